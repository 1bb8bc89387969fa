// `fedsmp`: sparsified model perturbation (Hu, Guo, Gong, IEEE TMC 2024, "Federated
// learning with sparsified model perturbation"), the FedSMP-top_k baseline of the
// DP-FedASGP paper (digest: shared spec dp-fedasgp-and-mias §2).
//
// Client (upload = its update Δ = w_local − w_global, trainable layers, d coordinates):
//   keep k = ⌈fraction·d⌉ coordinates (the mask), zero the others,
//   clip the kept vector to L2 norm C,
//   add Gaussian noise to the kept coordinates only (zeros stay zero).
// Server: the fixed-denominator average (Σ_i uploads)/m, m the cohort or q·N (defenses/clip.h).
//
// Variants
//   paper: the mask is the top-k of the client's own |Δ| (FedSMP-top_k), and the noise
//       N(0, σ²) per kept coordinate uses the DP-FedASGP paper's eq. 2 calibration
//       (σ = (ΔS/ε)√(2(ln 1.25 + ε)), "epsilon" per round), as for its DP-FedAvg
//       baseline. The mask depends on the client's data and the zeros reveal it, so no
//       DP statement covers the upload: the sound ε is INFINITY.
//   corrected (default): the mask is k coordinates drawn at random from public
//       randomness, the same for every client of the round (the rand-k sparsifier;
//       RNG_DEFENSE_AUX stream of the server, client id CLIP_SERVER_CLIENT). Each of the
//       round's p participants adds N(0, z²C²/p) on every kept coordinate (p announced
//       with the round; the server adds N(0, z²C²) itself when p = 0), so the kept
//       coordinates of the sum always carry N(0, z²C²): a round is the client-level
//       Gaussian mechanism with multiplier z on the mask's subspace, accounted as
//       gaussian-dpfedavg's client noise (defenses/clip.h: Poisson or fixed-size RDP,
//       and the upload observer's ε), with z given ("noise_multiplier") or found for a
//       target "epsilon" (never above it).
//
// Params: {"name": "fedsmp", "variant", "topk_fraction" (0.1, in (0, 1]), "clip" (1),
// "noise_multiplier" | "epsilon", "delta" (1e-5), "sensitivity" (paper only), "sampler"
// ("safe": the discrete Gaussian on a grid, defenses/clip.h ClipNoise; "float")}.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/clip.h"
#include "fl/defense.h"

typedef struct FedSmp {
    ClipGaussian g;
    double fraction;
    size_t k, d;
    const ParamTable *table;
    uint64_t seed;
} FedSmp;

// The keys create() accepts, also what takes_param answers from.
static const char *const smp_keys[] = {"name", "variant", "topk_fraction", "clip", "noise_multiplier", "epsilon",
                                       "delta", "sensitivity", "sampler", NULL};
static int smp_takes_param(const char *key) { return jv_key_in(key, smp_keys); }

static FpStatus smp_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                           FpError *err) {
    static const char *const variants[] = {"corrected", "paper", NULL};
    FP_TRY(jv_keys(params, path, smp_keys, err));
    int variant;
    FP_TRY(jv_choice(params, path, "variant", variants, 0, &variant, err));
    FedSmp s = {.table = setup->params, .d = setup->params->n_trainable, .seed = setup->seed};
    FP_TRY(jv_number(params, path, "topk_fraction", JV_OPTIONAL, 0.1, 0, 1, 1, 0, &s.fraction, err));
    FpStatus st = clip_gaussian_parse(params, path, setup, variant == 1, 0, &s.g, err);
    if (st != FP_OK) {
        clip_gaussian_free(&s.g);
        return st;
    }
    s.k = (size_t)ceil(s.fraction * (double)s.d - 1e-9);
    if (s.k < 1 && s.d > 0)
        s.k = 1;
    FedSmp *out = fp_calloc(1, sizeof *out, err);
    if (!out) {
        clip_gaussian_free(&s.g);
        return FP_ENOMEM;
    }
    *out = s;
    *state = out;
    return FP_OK;
}

static void smp_destroy(void *state) {
    FedSmp *s = state;
    if (!s)
        return;
    clip_gaussian_free(&s->g);
    free(s);
}

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
    double scale = clip_scale(sqrt(norm2), s->g.clip);
    double std = clip_gaussian_client_std(&s->g, round->participants);
    for (size_t j = 0; j < d; j++) {
        if (!keep[j])
            continue;
        uint32_t i = idx[j];
        upload[i] = clip_noise_one(&s->g.noise, (float)(upload[i] * scale), i, &round->rng, std);
    }
    free(idx);
    free(buf);
    free(keep);
    return FP_OK;
}

// The server's side is a running sum (DefenseOps.sum_add): the uploads' plain sum over the
// fixed denominator, then, in a round nobody took part in, the server's noise on the mask.
static void smp_sum_add(const void *state, int round, int k, double *acc, const float *upload, double weight) {
    const FedSmp *s = state;
    clip_sum_add(s->table, &s->g.noise, 0.0, acc, upload, weight);
}

static FpStatus smp_sum_finish(void *state, int round, int k, const double *acc, float *out, FpError *err) {
    FedSmp *s = state;
    clip_sum_finish(s->table, &s->g.noise, NULL, 0.0, s->g.m, acc, out);
    double std = clip_gaussian_server_std(&s->g, k);
    if (std > 0 && s->d > 0) { // nobody took part: the server's N(0, z²C²) on the round's mask
        uint32_t *idx = malloc(sizeof(uint32_t) * s->d * 2);
        unsigned char *keep = malloc(s->d);
        if (!idx || !keep) {
            free(idx);
            free(keep);
            return fp_fail(err, FP_ENOMEM, "out of memory in fedsmp (%zu coordinates)", s->d);
        }
        clip_trainable_index(s->table, idx);
        random_mask(s, round, idx + s->d, keep);
        RngStream rs = rng_stream(s->seed, RNG_DEFENSE, (uint32_t)round, CLIP_SERVER_CLIENT);
        for (size_t j = 0; j < s->d; j++)
            if (keep[j])
                out[idx[j]] = (float)(clip_noise_one(&s->g.noise, (float)(out[idx[j]] * s->g.m), idx[j], &rs, std) /
                                      s->g.m);
        free(idx);
        free(keep);
    }
    return FP_OK;
}

static void smp_end_round(void *state, int round, int n_participants) {
    clip_gaussian_end_round(&((FedSmp *)state)->g, round, n_participants);
}

static void smp_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const FedSmp *s = state;
    clip_gaussian_privacy(&s->g, rounds_done, rec);
    if (s->g.paper) {
        rec->guarantee = GUARANTEE_NONE;
        memset(rec->assumptions, 0, sizeof rec->assumptions);
        privacy_assume(rec, "the kept coordinates are the top-k of the client's own update, and the zeros of the "
                            "upload reveal that data-dependent support");
        rec->sound_notion = "no guarantee: the kept coordinates are the top-k of the client's own update, and "
                            "the zeros of the upload reveal that data-dependent support";
        rec->upload_notion = NULL;
    } else {
        rec->sound_notion = s->g.cohort > 0
            ? "client-level (eps, delta)-DP of the released aggregates, replace one client: the shares, sized for "
              "the cohort, add up to N(0, z^2 C^2) on a public random-k support; RDP of the Gaussian (multiplier "
              "z/2) on a fixed-size cohort without replacement (Wang, Balle, Kasiviswanathan 2019 Thm 9, rate m/N), "
              "Balle et al. 2020 conversion"
            : "client-level (eps, delta)-DP of the released aggregates, replace one client: per round, given its "
              "cohort size k (Bernoulli, independent of the data; the shares' grid shows it), the shares, sized for "
              "k, add up to N(0, z^2 C^2) on a public random-k support; RDP of the Gaussian (multiplier z/2) on a "
              "cohort of k without replacement (Wang, Balle, Kasiviswanathan 2019 Thm 9, rate k/N), Balle et al. "
              "2020 conversion";
        if (s->g.noise.safe) // the safe sampler's proofs (defenses/clip.h)
            rec->sound_notion = s->g.cohort > 0
                ? "client-level (eps, delta)-DP of the released aggregates, replace one client: the shares, sized for "
                  "the cohort, add up to N(0, z^2 C^2) on a public random-k support, each the discrete Gaussian on a "
                  "grid (multiplier divided by the rounding's inflation), their sum by Kairouz, Liu, Steinke 2021 "
                  "Thm 1; RDP (multiplier z/2) on a fixed-size cohort without replacement (Wang, Balle, "
                  "Kasiviswanathan 2019 Thm 9, rate m/N), Balle et al. 2020 conversion"
                : "client-level (eps, delta)-DP of the released aggregates, replace one client: per round, given its "
                  "cohort size k (Bernoulli, independent of the data; the shares' grid shows it), the shares, sized "
                  "for k, add up to N(0, z^2 C^2) on a public random-k support, each the discrete Gaussian on a grid "
                  "(multiplier divided by the rounding's inflation), their sum by Kairouz, Liu, Steinke 2021 Thm 1; "
                  "RDP (multiplier z/2) on a cohort of k without replacement (Wang, Balle, Kasiviswanathan 2019 Thm "
                  "9, rate k/N), Balle et al. 2020 conversion";
    }
}

static void smp_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    clip_gaussian_upload_params(&((const FedSmp *)state)->g, round->participants, out);
}

static FpStatus smp_describe(const void *state, cJSON *out) {
    const FedSmp *s = state;
    FP_TRY(clip_gaussian_describe(&s->g, out));
    cJSON_AddNumberToObject(out, "topk_fraction", s->fraction);
    cJSON_AddNumberToObject(out, "kept_coordinates", (double)s->k);
    cJSON_AddStringToObject(out, "mask", s->g.paper ? "top-k of the client's own |update| (data-dependent)"
                                                    : "random k per round, shared by the round's clients (public)");
    return FP_OK;
}

const DefenseOps defense_fedsmp = {
    .name = "fedsmp",
    .summary = "FedSMP: keep k coordinates of the update, clip, Gaussian noise on the kept ones, RDP accountant",
    .variants = "corrected,paper",
    .create = smp_create,
    .destroy = smp_destroy,
    .upload_kind = smp_upload_kind,
    .client_perturb = smp_perturb,
    .upload_params = smp_upload_params,
    .sum_add = smp_sum_add,
    .sum_finish = smp_sum_finish,
    .release_empty_rounds = 1,
    .end_round = smp_end_round,
    .privacy = smp_privacy,
    .describe = smp_describe,
    .takes_param = smp_takes_param,
};
