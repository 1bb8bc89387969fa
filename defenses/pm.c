// `pm`: the Piecewise Mechanism (Wang et al. ICDE 2019) on every trainable scalar, clipped
// into the configured range (defenses/mech_pm.c).
#include "defenses/mech_defense.h"

static FpStatus pm_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                          FpError *err) {
    MechDefense *d = NULL;
    FpStatus st = mech_defense_create(&mech_pm, params, path, setup, NULL, &d, err);
    *state = d;
    return st;
}

static int pm_takes_param(const char *key) { return mech_defense_takes(&mech_pm, NULL, key); }

const DefenseOps defense_pm = {
    .name = "pm",
    .summary = "Piecewise Mechanism (Wang et al. 2019) per clipped scalar (needs clip or range)",
    .variants = NULL,
    .create = pm_create,
    .destroy = mech_defense_destroy,
    .upload_kind = mech_defense_upload_kind,
    .client_perturb = mech_defense_perturb,
    .upload_params = mech_defense_upload_params,
    .privacy = mech_defense_privacy,
    .describe = mech_defense_describe,
    .takes_param = pm_takes_param,
};
