// `gaussian`: local Gaussian noise on every trainable scalar, clipped into the configured
// range, sigma for (eps, delta) per scalar: analytic (default, Balle & Wang 2018) or classic
// (Dwork & Roth Thm A.1, eps < 1) (defenses/mech_gaussian.c). The safe sampler (default)
// draws a discrete Gaussian on a grid and records guarantee proven; "sampler": "float"
// draws Box-Muller in float32 and records none.
#include "defenses/mech_defense.h"

static FpStatus gaussian_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                                FpError *err) {
    MechDefense *d = NULL;
    FpStatus st = mech_defense_create(&mech_gaussian, params, path, setup, NULL, &d, err);
    *state = d;
    return st;
}

static int gaussian_takes_param(const char *key) { return mech_defense_takes(&mech_gaussian, NULL, key); }

const DefenseOps defense_gaussian = {
    .name = "gaussian",
    .summary = "Gaussian noise per clipped scalar for (eps, delta) (local DP)",
    .variants = "analytic,classic",
    .create = gaussian_create,
    .destroy = mech_defense_destroy,
    .upload_kind = mech_defense_upload_kind,
    .client_perturb = mech_defense_perturb,
    .upload_params = mech_defense_upload_params,
    .privacy = mech_defense_privacy,
    .describe = mech_defense_describe,
    .takes_param = gaussian_takes_param,
};
