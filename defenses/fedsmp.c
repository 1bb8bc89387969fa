// `fedsmp`: sparsified model perturbation (Hu, Guo, Gong, IEEE TMC 2024, "Federated
// learning with sparsified model perturbation"), the FedSMP-top_k baseline of the
// DP-FedASGP paper (digest: shared spec dp-fedasgp-and-mias §2).
//
// Client (upload = its update Δ = w_local − w_global, trainable layers, d coordinates):
//   keep k = ⌈fraction·d⌉ coordinates (the mask), zero the others,
//   clip the kept vector to L2 norm C,
//   add Gaussian noise to the kept coordinates only (zeros stay zero).
// Server: the fixed-denominator average (Σ_i uploads)/m, m = q·N (defenses/clip.h).
//
// Variants
//   paper: the mask is the top-k of the client's own |Δ| (FedSMP-top_k), and the noise
//       N(0, σ²) per kept coordinate uses the DP-FedASGP paper's eq. 2 calibration
//       (σ = (ΔS/ε)√(2(ln 1.25 + ε)), "epsilon" per round), as for its DP-FedAvg
//       baseline. The mask depends on the client's data and the zeros reveal it, so no
//       DP statement covers the upload: the sound ε is INFINITY.
//   corrected (default): the mask is k coordinates drawn at random from public
//       randomness, the same for every client of the round (the rand-k sparsifier;
//       RNG_DEFENSE_AUX stream of the server, client id CLIP_SERVER_CLIENT). Every kept
//       coordinate then carries the sum noise N(0, z²C²) from the m clients' shares
//       N(0, z²C²/m), so a round is the subsampled Gaussian mechanism with multiplier z
//       on the mask's subspace: RDP accounting, with z given ("noise_multiplier") or
//       found for a target "epsilon" (never above it).
//
// Params: {"name": "fedsmp", "variant", "topk_fraction" (0.1, in (0, 1]), "clip" (1),
// "noise_multiplier" | "epsilon", "delta" (1e-5), "sensitivity" (paper only)}.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/clip.h"
#include "defenses/defense.h"

typedef struct FedSmp {
    ClipGaussian g;
    double fraction;
    size_t k, d;
    const ParamTable *table;
    uint64_t seed;
} FedSmp;

static FpStatus smp_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                           FpError *err) {
    static const char *const keys[] = {"name", "variant", "topk_fraction", "clip", "noise_multiplier", "epsilon",
                                       "delta", "sensitivity", NULL};
    static const char *const variants[] = {"corrected", "paper", NULL};
    FP_TRY(jv_keys(params, path, keys, err));
    int variant;
    FP_TRY(jv_choice(params, path, "variant", variants, 0, &variant, err));
    FedSmp s = {.table = setup->params, .d = setup->params->n_trainable, .seed = setup->seed};
    FP_TRY(jv_number(params, path, "topk_fraction", JV_OPTIONAL, 0.1, 0, 1, 1, 0, &s.fraction, err));
    FP_TRY(clip_gaussian_parse(params, path, setup, variant == 1, 0, &s.g, err));
    s.k = (size_t)ceil(s.fraction * (double)s.d - 1e-9);
    if (s.k < 1 && s.d > 0)
        s.k = 1;
    FedSmp *out = fp_calloc(1, sizeof *out, err);
    if (!out)
        return FP_ENOMEM;
    *out = s;
    *state = out;
    return FP_OK;
}

static void smp_destroy(void *state) { free(state); }

static UploadKind smp_upload_kind(const void *state) { return UPLOAD_DELTA; }

// The corrected variant's mask of round r: k of the d trainable coordinates, uniformly
// at random from the server's public stream (a partial Fisher-Yates shuffle).
static void random_mask(const FedSmp *s, int round, uint32_t *perm, unsigned char *keep) {
    RngStream rs = rng_stream(s->seed, RNG_DEFENSE_AUX, (uint32_t)round, CLIP_SERVER_CLIENT);
    for (size_t j = 0; j < s->d; j++)
        perm[j] = (uint32_t)j;
    memset(keep, 0, s->d);
    for (size_t j = 0; j < s->k; j++) {
        size_t r = j + rng_next_below(&rs, (uint32_t)(s->d - j));
        uint32_t t = perm[j];
        perm[j] = perm[r];
        perm[r] = t;
        keep[perm[j]] = 1;
    }
}

static FpStatus smp_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    FedSmp *s = state;
    size_t d = s->d;
    if (d == 0)
        return FP_OK;
    uint32_t *idx = malloc(sizeof(uint32_t) * d * 2);
    float *buf = malloc(sizeof(float) * d * 2);
    unsigned char *keep = malloc(d);
    if (!idx || !buf || !keep) {
        free(idx);
        free(buf);
        free(keep);
        return fp_fail(err, FP_ENOMEM, "out of memory in fedsmp (%zu coordinates)", d);
    }
    clip_trainable_index(s->table, idx);
    if (s->g.paper) {
        for (size_t j = 0; j < d; j++)
            buf[j] = fabsf(upload[idx[j]]);
        clip_top_k(buf, d, s->k, keep, buf + d);
    } else {
        random_mask(s, round->round, idx + d, keep);
    }
    double norm2 = 0;
    for (size_t j = 0; j < d; j++) {
        uint32_t i = idx[j];
        if (!keep[j])
            upload[i] = 0.0f;
        else
            norm2 += (double)upload[i] * upload[i];
    }
    double norm = sqrt(norm2), scale = norm > s->g.clip ? s->g.clip / norm : 1.0;
    double std = s->g.client_std;
    for (size_t j = 0; j < d; j++) {
        if (!keep[j])
            continue;
        uint32_t i = idx[j];
        upload[i] = (float)(upload[i] * scale + std * rng_normal_at(&round->rng, i));
    }
    free(idx);
    free(buf);
    free(keep);
    return FP_OK;
}

static FpStatus smp_aggregate(void *state, int round, const float *const *uploads, const double *weights,
                              const int *clients, int k, float *out, FpError *err) {
    FedSmp *s = state;
    clip_aggregate_fixed(uploads, weights, k, s->g.m, s->table, NULL, 0.0, out);
    return FP_OK;
}

static void smp_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const FedSmp *s = state;
    clip_gaussian_privacy(&s->g, rounds_done, rec);
    if (s->g.paper) {
        rec->epsilon_total_sound = INFINITY;
        rec->sound_notion = "no guarantee: the kept coordinates are the top-k of the client's own update, and "
                            "the zeros of the upload reveal that data-dependent support";
    } else {
        rec->sound_notion = "client-level (eps, delta)-DP of the aggregate (add/remove one client): RDP of the "
                            "Poisson-subsampled Gaussian (rate q, multiplier z) on a public random-k support, "
                            "Balle et al. 2020 conversion; one upload alone carries multiplier z/sqrt(m) (secure "
                            "aggregation assumed)";
    }
}

static void smp_describe(const void *state, cJSON *out) {
    const FedSmp *s = state;
    clip_gaussian_describe(&s->g, out);
    cJSON_AddNumberToObject(out, "topk_fraction", s->fraction);
    cJSON_AddNumberToObject(out, "kept_coordinates", (double)s->k);
    cJSON_AddStringToObject(out, "mask", s->g.paper ? "top-k of the client's own |update| (data-dependent)"
                                                    : "random k per round, shared by the round's clients (public)");
}

const DefenseOps defense_fedsmp = {
    .name = "fedsmp",
    .summary = "FedSMP: keep k coordinates of the update, clip, Gaussian noise on the kept ones, RDP accountant",
    .variants = "corrected,paper",
    .create = smp_create,
    .destroy = smp_destroy,
    .upload_kind = smp_upload_kind,
    .client_perturb = smp_perturb,
    .server_aggregate = smp_aggregate,
    .privacy = smp_privacy,
    .describe = smp_describe,
};
