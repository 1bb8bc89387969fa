// The local-DP defenses that are one mechanism of defenses/dp/ applied as it is by
// defenses/mech_defense.c to every trainable scalar of an upload: one row each. A row
// names the defense, its `fedpriv list` line, its variants and the mechanism; what the
// mechanism does, and where its formulas come from, is in its file:
//   laplace   Laplace noise clipped into the range, scale (hi - lo)/eps; the safe sampler
//             (default) draws a discrete Laplace on a grid and records guarantee proven,
//             "sampler": "float" draws in float32 and records none (dp/mech_laplace.c)
//   gaussian  Gaussian noise, sigma for (eps, delta) per scalar: analytic (default, Balle &
//             Wang 2018) or classic (Dwork & Roth Thm A.1, eps < 1); the safe sampler draws a
//             discrete Gaussian on a grid (proven), "float" Box-Muller in float32 (none)
//             (dp/mech_gaussian.c)
//   duchi     Duchi et al.'s one-dimensional mechanism (dp/mech_duchi.c)
//   pm        the Piecewise Mechanism, Wang et al. ICDE 2019 (dp/mech_pm.c)
//   ldp-fl    Sun et al. IJCAI 2021: w clipped into [c - r, c + r] and sent as
//             c ± r(e^eps+1)/(e^eps-1); "range": [lo, hi] for every layer, or "layer" from
//             the round's global model; their parameter shuffling is not simulated
//             (dp/mech_duchi.c)
//   spm       SPM (Chen & Zheng, Electronics 2024) per the reconstructed Alg. 1 (shared spec
//             spm.md §2.2): corrected (default, unbiased), paper (Alg. 2 as printed, biased
//             by e^eps/(e^eps+1)) and pnpm (the PNPM reconstruction); no clipping, SPM
//             takes any real (dp/mech_spm.c)
// DefenseOps.create has no context argument, so each row expands to its own create and
// takes_param around the shared ones.
#include "defenses/mech_defense.h"

#define MECH_SHELL(ident, defense_name, mech_ops, line, variant_list)                                            \
    static FpStatus ident##_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state, \
                                   FpError *err) {                                                                \
        MechDefense *d = NULL;                                                                                    \
        FpStatus st = mech_defense_create(&mech_ops, params, path, setup, NULL, &d, err);                         \
        *state = d;                                                                                               \
        return st;                                                                                                \
    }                                                                                                             \
    static int ident##_takes_param(const char *key) { return mech_defense_takes(&mech_ops, NULL, key); }          \
    const DefenseOps defense_##ident = {                                                                          \
        .name = defense_name,                                                                                     \
        .summary = line,                                                                                          \
        .variants = variant_list,                                                                                 \
        .create = ident##_create,                                                                                 \
        .destroy = mech_defense_destroy,                                                                          \
        .upload_kind = mech_defense_upload_kind,                                                                  \
        .client_perturb = mech_defense_perturb,                                                                   \
        .upload_params = mech_defense_upload_params,                                                              \
        .privacy = mech_defense_privacy,                                                                          \
        .describe = mech_defense_describe,                                                                        \
        .takes_param = ident##_takes_param,                                                                       \
    };

MECH_SHELL(laplace, "laplace", mech_laplace, "Laplace noise per clipped scalar, scale (hi-lo)/eps (local DP)", NULL)
MECH_SHELL(gaussian, "gaussian", mech_gaussian, "Gaussian noise per clipped scalar for (eps, delta) (local DP)",
           "analytic,classic")
MECH_SHELL(duchi, "duchi", mech_duchi, "Duchi et al. one-dimensional LDP per clipped scalar (needs clip or range)",
           NULL)
MECH_SHELL(pm, "pm", mech_pm, "Piecewise Mechanism (Wang et al. 2019) per clipped scalar (needs clip or range)", NULL)
MECH_SHELL(ldp_fl, "ldp-fl", mech_ldp_fl,
           "LDP-FL (Sun et al. 2021): c +- r(e^eps+1)/(e^eps-1) per scalar, fixed or per-layer range", NULL)
MECH_SHELL(spm, "spm", mech_spm, "SPM (Chen & Zheng 2024): sign-keeping piecewise noise on every trainable weight",
           "corrected,paper,pnpm")
