// `duchi`: the Duchi et al. one-dimensional mechanism on every trainable scalar, clipped
// into the configured range (defenses/mech_duchi.c).
#include "defenses/mech_defense.h"

static FpStatus duchi_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                             FpError *err) {
    MechDefense *d = NULL;
    FpStatus st = mech_defense_create(&mech_duchi, params, path, setup, NULL, &d, err);
    *state = d;
    return st;
}

static int duchi_takes_param(const char *key) { return mech_defense_takes(&mech_duchi, NULL, key); }

const DefenseOps defense_duchi = {
    .name = "duchi",
    .summary = "Duchi et al. one-dimensional LDP per clipped scalar (needs clip or range)",
    .variants = NULL,
    .create = duchi_create,
    .destroy = mech_defense_destroy,
    .upload_kind = mech_defense_upload_kind,
    .client_perturb = mech_defense_perturb,
    .upload_params = mech_defense_upload_params,
    .privacy = mech_defense_privacy,
    .describe = mech_defense_describe,
    .takes_param = duchi_takes_param,
};
