// The list of attacks. Add an attack: write attacks/NAME.c defining
// `const AttackOps attack_NAME`, declare it below and add it to the table.
#include "runner/attack_registry.h"

#include <string.h>

#include "core/suggest.h"

extern const AttackOps attack_dlg;
extern const AttackOps attack_idlg;
extern const AttackOps attack_inverting_gradients;
extern const AttackOps attack_basic_mia;
extern const AttackOps attack_ml_leaks;
extern const AttackOps attack_cs_mia;
extern const AttackOps attack_lira;
extern const AttackOps attack_rmia;
extern const AttackOps attack_dlg_regression;
extern const AttackOps attack_audit_training; // audits/training.c: the training-run audit as a matrix attack

static const AttackOps *const all_attacks[] = {
    &attack_dlg,
    &attack_idlg,
    &attack_inverting_gradients,
    &attack_basic_mia,
    &attack_ml_leaks,
    &attack_cs_mia,
    &attack_lira,
    &attack_rmia,
    &attack_dlg_regression,
    &attack_audit_training,
    NULL, // end
};

int attack_count(void) { return (int)(sizeof all_attacks / sizeof all_attacks[0]) - 1; }

const AttackOps *attack_at(int i) { return i >= 0 && i < attack_count() ? all_attacks[i] : NULL; }

const AttackOps *attack_find(const char *name) {
    for (int i = 0; i < attack_count(); i++)
        if (strcmp(all_attacks[i]->name, name) == 0)
            return all_attacks[i];
    return NULL;
}

const char *attack_suggest(const char *name, char *buf, size_t n) {
    FpSuggest s;
    fp_suggest_begin(&s, name);
    for (int i = 0; i < attack_count(); i++)
        fp_suggest_add(&s, all_attacks[i]->name);
    return fp_did_you_mean(&s, "", " ", buf, n);
}
