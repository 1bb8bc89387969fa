// `laplace`: local Laplace noise on every trainable scalar, clipped into the configured
// range, scale (hi - lo)/eps (defenses/mech_laplace.c). The safe sampler (default) draws a
// discrete Laplace on a grid and records guarantee proven; "sampler": "float" draws in
// float32 and records none.
#include "defenses/mech_defense.h"

static FpStatus laplace_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                               FpError *err) {
    MechDefense *d = NULL;
    FpStatus st = mech_defense_create(&mech_laplace, params, path, setup, NULL, &d, err);
    *state = d;
    return st;
}

static int laplace_takes_param(const char *key) { return mech_defense_takes(&mech_laplace, NULL, key); }

const DefenseOps defense_laplace = {
    .name = "laplace",
    .summary = "Laplace noise per clipped scalar, scale (hi-lo)/eps (local DP)",
    .variants = NULL,
    .create = laplace_create,
    .destroy = mech_defense_destroy,
    .upload_kind = mech_defense_upload_kind,
    .client_perturb = mech_defense_perturb,
    .upload_params = mech_defense_upload_params,
    .privacy = mech_defense_privacy,
    .describe = mech_defense_describe,
    .takes_param = laplace_takes_param,
};
