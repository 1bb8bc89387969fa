// The list of attacks. Add an attack: write attacks/NAME.c defining
// `const AttackOps attack_NAME`, declare it below and add it to the table.
#include "runner/attack_registry.h"

#include <stdio.h>
#include <stdlib.h>
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
extern const AttackOps attack_client_membership;
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
    &attack_client_membership,
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

static const char *model_name(const cJSON *m) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name");
    return cJSON_IsString(n) ? n->valuestring : "?";
}

// A model's label: its name, or its compact JSON when that alone does not tell it from
// the other model (a probe "mlp" of another width beside the federation's "mlp").
static void label_of(const cJSON *m, const cJSON *other, char *buf, size_t n) {
    if (strcmp(model_name(m), model_name(other)) != 0) {
        snprintf(buf, n, "%s", model_name(m));
        return;
    }
    char *t = cJSON_PrintUnformatted(m);
    snprintf(buf, n, "%s", t ? t : model_name(m));
    free(t);
}

int attack_model_label(const cJSON *federation, const cJSON *attacked, char *buf, size_t n) {
    int probe = attacked && !cJSON_Compare(attacked, federation, 1);
    if (probe)
        label_of(attacked, federation, buf, n);
    else
        snprintf(buf, n, "%s", model_name(federation));
    return probe;
}

void attack_name_model(const cJSON *federation, const cJSON *attacked, cJSON *obj) {
    char label[512];
    int probe = attack_model_label(federation, attacked, label, sizeof label);
    cJSON_DeleteItemFromObjectCaseSensitive(obj, "attacked_model");
    cJSON_DeleteItemFromObjectCaseSensitive(obj, "probe");
    cJSON_AddStringToObject(obj, "attacked_model", label);
    cJSON_AddBoolToObject(obj, "probe", probe);
    if (!probe)
        return;
    char fl[512];
    label_of(federation, attacked, fl, sizeof fl);
    cJSON_AddStringToObject(obj, "federation_model", fl);
    cJSON_AddItemToObject(obj, "probe_model", cJSON_Duplicate(attacked, 1));
}
