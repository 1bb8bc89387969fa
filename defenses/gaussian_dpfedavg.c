// `gaussian-dpfedavg`: client-level DP-FedAvg with Gaussian noise (McMahan, Ramage,
// Talwar, Zhang 2018, "Learning differentially private recurrent language models",
// Alg. 1 with the fixed-denominator estimator).
//
// Each sampled client uploads its update Δ_i = w_local − w_global clipped to L2 norm C
// (trainable layers only). The server forms
//     Δ̄ = (Σ_i Δ_i + N(0, z²C² I)) / m,     m the cohort (fixed-size) or q·N (Bernoulli),
// so one client moves Δ̄ by at most C/m, and releases Δ̄ every round, also one nobody
// takes part in (release_empty_rounds). With "noise": "client" each of the round's k
// participants adds its share N(0, z²C²/k) instead (k announced with the round, so the
// shares always add up to N(0, z²C²)); each upload alone then carries only z/√k. The
// accounts (defenses/clip.h ClipGaussian): Poisson RDP with multiplier z for Bernoulli
// sampling (add/remove one client), Wang-Balle-Kasiviswanathan Thm 9 with z/2 for
// fixed-size cohorts (replace one client), and the upload observer's exact Gaussian
// composition beside them; with "epsilon" given, z is the smallest multiplier whose ε
// after all planned rounds does not exceed it.
//
// Variants: corrected (default; RDP calibration), paper (the DP-FedASGP paper's DP-FedAvg
// baseline: per-client σ from its eq. 2 whatever the cohort, nominal ε per round). Both
// average with the fixed denominator m; the paper's n_i/n weights would let a large
// client weigh more than C/m and void the bound.
//
// Params: {"name": "gaussian-dpfedavg", "variant", "clip" (1), "noise_multiplier" |
// "epsilon", "delta" (1e-5), "noise" ("server"), "sensitivity" (paper only; = clip),
// "sampler" ("safe": the discrete Gaussian on a grid, defenses/clip.h ClipNoise; "float")}.
#include <math.h>
#include <stdlib.h>

#include "core/jsonv.h"
#include "defenses/clip.h"
#include "fl/defense.h"

typedef struct DpFedAvg {
    ClipGaussian g;
    const ParamTable *table;
    uint64_t seed;
} DpFedAvg;

// The keys create() accepts, also what takes_param answers from.
static const char *const dpfedavg_keys[] = {"name", "variant", "clip", "noise_multiplier", "epsilon", "delta", "noise",
                                            "sampler", "sensitivity", NULL};
static int dpfedavg_takes_param(const char *key) { return jv_key_in(key, dpfedavg_keys); }

static FpStatus dpfedavg_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                                FpError *err) {
    static const char *const variants[] = {"corrected", "paper", NULL};
    FP_TRY(jv_keys(params, path, dpfedavg_keys, err));
    int variant;
    FP_TRY(jv_choice(params, path, "variant", variants, 0, &variant, err));
    DpFedAvg *s = fp_calloc(1, sizeof *s, err);
    if (!s)
        return FP_ENOMEM;
    FpStatus st = clip_gaussian_parse(params, path, setup, variant == 1, 1, &s->g, err);
    if (st != FP_OK) {
        clip_gaussian_free(&s->g);
        free(s);
        return st;
    }
    s->table = setup->params;
    s->seed = setup->seed;
    *state = s;
    return FP_OK;
}

static void dpfedavg_destroy(void *state) {
    DpFedAvg *s = state;
    if (!s)
        return;
    clip_gaussian_free(&s->g);
    free(s);
}

static UploadKind dpfedavg_upload_kind(const void *state) { return UPLOAD_DELTA; }

static FpStatus dpfedavg_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    DpFedAvg *s = state;
    clip_to_norm(upload, s->table, s->g.clip);
    clip_noise_add(&s->g.noise, upload, s->table, &round->rng, clip_gaussian_client_std(&s->g, round->participants));
    return FP_OK;
}

// The server's side is a running sum (DefenseOps.sum_add): each upload joins the sum as
// it arrives, in client order; the noise and the fixed denominator come once at the end.
static void dpfedavg_sum_add(const void *state, int round, int k, double *acc, const float *upload, double weight) {
    const DpFedAvg *s = state;
    clip_sum_add(s->table, &s->g.noise, clip_gaussian_server_std(&s->g, k), acc, upload, weight);
}

static FpStatus dpfedavg_sum_finish(void *state, int round, int k, const double *acc, float *out, FpError *err) {
    DpFedAvg *s = state;
    RngStream rs = rng_stream(s->seed, RNG_DEFENSE, (uint32_t)round, CLIP_SERVER_CLIENT);
    clip_sum_finish(s->table, &s->g.noise, &rs, clip_gaussian_server_std(&s->g, k), s->g.m, acc, out);
    return FP_OK;
}

static void dpfedavg_end_round(void *state, int round, int n_participants) {
    clip_gaussian_end_round(&((DpFedAvg *)state)->g, round, n_participants);
}

static void dpfedavg_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    clip_gaussian_privacy(&((const DpFedAvg *)state)->g, rounds_done, rec);
}

static void dpfedavg_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    clip_gaussian_upload_params(&((const DpFedAvg *)state)->g, round->participants, out);
}

static FpStatus dpfedavg_describe(const void *state, cJSON *out) {
    return clip_gaussian_describe(&((const DpFedAvg *)state)->g, out);
}

const DefenseOps defense_gaussian_dpfedavg = {
    .name = "gaussian-dpfedavg",
    .summary = "client-level DP-FedAvg: clip the update to C, Gaussian noise z*C on the sum, RDP accountant",
    .variants = "corrected,paper",
    .create = dpfedavg_create,
    .destroy = dpfedavg_destroy,
    .upload_kind = dpfedavg_upload_kind,
    .client_perturb = dpfedavg_perturb,
    .upload_params = dpfedavg_upload_params,
    .sum_add = dpfedavg_sum_add,
    .sum_finish = dpfedavg_sum_finish,
    .release_empty_rounds = 1,
    .end_round = dpfedavg_end_round,
    .privacy = dpfedavg_privacy,
    .describe = dpfedavg_describe,
    .takes_param = dpfedavg_takes_param,
};
