// `ldp-fl`: Sun et al. (IJCAI 2021) on every trainable scalar: w clipped into [c - r, c + r]
// and sent as c ± r(e^eps+1)/(e^eps-1) (defenses/mech_duchi.c). "range": [lo, hi] fixes
// the range for every layer; "range": "layer" takes each layer from the round's global
// model. Parameter shuffling (their anonymity layer) is not simulated.
#include "defenses/mech_defense.h"

static FpStatus ldp_fl_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                              FpError *err) {
    MechDefense *d = NULL;
    FpStatus st = mech_defense_create(&mech_ldp_fl, params, path, setup, NULL, &d, err);
    *state = d;
    return st;
}

static int ldp_fl_takes_param(const char *key) { return mech_defense_takes(&mech_ldp_fl, NULL, key); }

const DefenseOps defense_ldp_fl = {
    .name = "ldp-fl",
    .summary = "LDP-FL (Sun et al. 2021): c +- r(e^eps+1)/(e^eps-1) per scalar, fixed or per-layer range",
    .variants = NULL,
    .create = ldp_fl_create,
    .destroy = mech_defense_destroy,
    .upload_kind = mech_defense_upload_kind,
    .client_perturb = mech_defense_perturb,
    .upload_params = mech_defense_upload_params,
    .privacy = mech_defense_privacy,
    .describe = mech_defense_describe,
    .takes_param = ldp_fl_takes_param,
};
