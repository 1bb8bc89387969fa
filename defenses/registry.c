// The list of defenses. Add a defense: write defenses/NAME.c defining
// `const DefenseOps defense_NAME`, declare it below and add it to the table.
#include <string.h>

#include "defenses/registry.h"

#include "core/suggest.h"

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

const char *defense_suggest(const char *name, char *buf, size_t n) {
    FpSuggest s;
    fp_suggest_begin(&s, name);
    for (int i = 0; i < defense_count(); i++)
        fp_suggest_add(&s, all_defenses[i]->name);
    return fp_did_you_mean(&s, "", " ", buf, n);
}
