// `spm`: SPM (Chen & Zheng, Electronics 2024) on every trainable scalar of the uploaded
// weights, per the reconstructed Alg. 1 (shared spec spm.md §2.2). Variants corrected
// (default, unbiased), paper (Alg. 2 as printed, biased by e^eps/(e^eps+1)) and pnpm (the
// PNPM reconstruction); formulas in defenses/mech_spm.c. No clipping: SPM takes any real.
#include "defenses/mech_defense.h"

static FpStatus spm_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                           FpError *err) {
    MechDefense *d = NULL;
    FpStatus st = mech_defense_create(&mech_spm, params, path, setup, NULL, &d, err);
    *state = d;
    return st;
}

static int spm_takes_param(const char *key) { return mech_defense_takes(&mech_spm, NULL, key); }

const DefenseOps defense_spm = {
    .name = "spm",
    .summary = "SPM (Chen & Zheng 2024): sign-keeping piecewise noise on every trainable weight",
    .variants = "corrected,paper,pnpm",
    .create = spm_create,
    .destroy = mech_defense_destroy,
    .upload_kind = mech_defense_upload_kind,
    .client_perturb = mech_defense_perturb,
    .upload_params = mech_defense_upload_params,
    .privacy = mech_defense_privacy,
    .describe = mech_defense_describe,
    .takes_param = spm_takes_param,
};
