// The list of defenses. Add a defense: write defenses/NAME.c defining
// `const DefenseOps defense_NAME`, declare it below and add it to the table.
#include <math.h>
#include <string.h>

#include "defenses/defense.h"

extern const DefenseOps defense_none;
extern const DefenseOps defense_layerwise, defense_flat_laplace;
extern const DefenseOps defense_spm, defense_duchi, defense_pm, defense_ldp_fl, defense_laplace, defense_gaussian,
    defense_adaptive_harmony;
extern const DefenseOps defense_gaussian_dpfedavg, defense_dp_fedasgp, defense_fedsmp, defense_avp, defense_nbafl;
extern const DefenseOps defense_dp_sgd;

static const DefenseOps *const all_defenses[] = {
    &defense_none,
    &defense_layerwise, &defense_flat_laplace,
    &defense_spm, &defense_duchi, &defense_pm, &defense_ldp_fl, &defense_laplace, &defense_gaussian,
    &defense_adaptive_harmony,
    &defense_gaussian_dpfedavg, &defense_dp_fedasgp, &defense_fedsmp, &defense_avp, &defense_nbafl,
    &defense_dp_sgd,
};

int defense_count(void) { return (int)(sizeof all_defenses / sizeof all_defenses[0]); }

const DefenseOps *defense_at(int i) { return i >= 0 && i < defense_count() ? all_defenses[i] : NULL; }

const DefenseOps *defense_find(const char *name) {
    for (int i = 0; i < defense_count(); i++)
        if (strcmp(all_defenses[i]->name, name) == 0)
            return all_defenses[i];
    return NULL;
}

const char *guarantee_name(Guarantee g) {
    static const char *const names[] = {[GUARANTEE_NONE] = "none", [GUARANTEE_CONDITIONAL] = "conditional",
                                        [GUARANTEE_PROVEN] = "proven"};
    return (unsigned)g < sizeof names / sizeof names[0] ? names[g] : "none";
}

void privacy_assume(PrivacyRecord *rec, const char *sentence) {
    if (!sentence)
        return;
    for (int i = 0; i < PRIVACY_MAX_ASSUMPTIONS; i++) {
        if (!rec->assumptions[i]) {
            rec->assumptions[i] = sentence;
            return;
        }
        if (strcmp(rec->assumptions[i], sentence) == 0)
            return;
    }
    rec->guarantee = GUARANTEE_NONE; // it cannot say all it assumes
}

void privacy_record_settle(PrivacyRecord *rec) {
    int n = 0;
    while (n < PRIVACY_MAX_ASSUMPTIONS && rec->assumptions[n])
        n++;
    if ((unsigned)rec->guarantee > GUARANTEE_PROVEN)
        rec->guarantee = GUARANTEE_NONE;
    if (rec->guarantee == GUARANTEE_PROVEN && n > 0)
        rec->guarantee = GUARANTEE_CONDITIONAL; // a bound that needs assumptions is not proven
    if (rec->guarantee == GUARANTEE_CONDITIONAL && n == 0)
        rec->guarantee = GUARANTEE_NONE;        // nor is one that does not say what it needs
    if (isnan(rec->epsilon_total_sound))
        rec->guarantee = GUARANTEE_NONE;
    rec->epsilon_total_conditional = rec->epsilon_total_upload_conditional = NAN;
    if (rec->guarantee == GUARANTEE_CONDITIONAL) {
        rec->epsilon_total_conditional = rec->epsilon_total_sound;
        rec->epsilon_total_upload_conditional = rec->epsilon_total_upload;
    }
    if (rec->guarantee != GUARANTEE_PROVEN) {
        rec->epsilon_total_sound = INFINITY;
        rec->epsilon_total_upload = INFINITY;
    } else if (isnan(rec->epsilon_total_upload)) {
        rec->epsilon_total_upload = INFINITY;
    }
}

void defense_privacy(const DefenseOps *ops, const void *state, int rounds_done, PrivacyRecord *rec) {
    *rec = (PrivacyRecord){.sigma = -1};
    ops->privacy(state, rounds_done, rec);
    privacy_record_settle(rec);
}
