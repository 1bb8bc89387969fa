// `adaptive-harmony`: Optimal LDP-FL of Zhao et al. (Electronics 2022, 11, 4007; shared
// spec adaptive-harmony.md): restrictive client self-sampling plus Adaptive-Harmony on
// every trainable layer (the perturbation unit: a weight tensor and its bias are two
// units).
//
// Client side, per round:
//   - self-sampling (Alg. 4): q ~ U(0.5, 1), take part with probability q (so
//     Bernoulli(0.75) overall), from RNG_DEFENSE_AUX block 0 of (round, client);
//     "self_sampling": false turns it off;
//   - per unit ℓ with d_ℓ scalars (Alg. 2, defenses/dp/mech_harmony.c): one j ~ U{0..d_ℓ-1},
//     W*[j] = c ± d_ℓ·r·κ, every other scalar the fill: c (corrected, Alg. 2 line 1) or
//     0 (paper, Eq. 12). The draws are sequential on the client's RNG_DEFENSE stream, unit
//     by unit. The upload is the full buffer; what it carries is (ℓ, j, sign).
// Server side (server_aggregate): ŵ = c + (1/K)·Σ_k (W*_k - c) over the K participants,
// which for c-filled uploads is their plain mean (digest §2.3: divide by the number of
// participants, not by the reports per coordinate). The paper variant runs the same mean
// over its zero-filled uploads (Alg. 1 lines 8-13), so its estimate is biased by
// -c(1 - 1/d). Untrainable layers are averaged with the engine's FedAvg weights.
// The range is "clip"/"range" (fixed) or "range": "layer" (each unit's [min, max] in the
// round's global model, radius at least "min_radius").
//
// Privacy: ε-LDP per unit and round (Lemma 1); the paper reports ε. The sound total per
// client is L·ε per round by sequential composition over the L units, L·ε·rounds over
// the run (a client may take part in every round). Self-sampling amplifies nothing
// against a server that sees the client's own report, and shuffling is not simulated.
// Guarantee proven (the sign's threshold keeps the exact ratio within e^ε,
// mech_harmony_unit), conditional when batch-norm statistics travel unperturbed.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/mech_defense.h"

static const char *const harmony_extra_keys[] = {"self_sampling", NULL};
static int harmony_takes_param(const char *key) { return mech_defense_takes(&mech_harmony, harmony_extra_keys, key); }

static FpStatus harmony_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                               FpError *err) {
    MechDefense *d = NULL;
    *state = NULL;
    FP_TRY(mech_defense_create(&mech_harmony, params, path, setup, harmony_extra_keys, &d, err));
    FpStatus st = jv_bool(params, path, "self_sampling", 1, &d->self_sampling, err);
    for (int l = 0; st == FP_OK && l < d->n_layers; l++)
        if (d->layers[l].trainable && d->layers[l].count >= 0xffffffffu)
            st = fp_fail(err, FP_EPARAM, "%s: layer %s has %zu scalars; a unit must have fewer than 2^32", path,
                         d->layers[l].name, d->layers[l].count);
    if (st != FP_OK) {
        mech_defense_destroy(d);
        return st;
    }
    *state = d;
    return FP_OK;
}

// Alg. 4: q ~ U(0.5, 1) drawn afresh, then Bernoulli(q).
static int harmony_participates(void *state, const DefenseRound *round) {
    const MechDefense *d = state;
    if (!d->self_sampling)
        return 1;
    uint32_t w[4];
    rng_block(&round->aux_rng, 0, w);
    double q = 0.5 + 0.5 * rng_u01d(w[0], w[1]);
    return rng_u01d(w[2], w[3]) < q;
}

static FpStatus harmony_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    const MechDefense *d = state;
    RngStream seq = round->rng;
    for (int l = 0; l < d->n_layers; l++) {
        const ParamLayer *ly = &d->layers[l];
        if (!ly->trainable || ly->count == 0)
            continue;
        Mech m;
        FP_TRY(mech_defense_layer_mech(d, l, round, &m, err));
        mech_harmony_unit(&m, upload + ly->offset, ly->count, &seq);
    }
    return FP_OK;
}

static FpStatus harmony_aggregate(void *state, int round, const float *const *uploads, const double *weights,
                                  const int *clients, int k, float *out, FpError *err) {
    const MechDefense *d = state;
    if (k <= 0)
        return FP_OK;
    for (int l = 0; l < d->n_layers; l++) {
        const ParamLayer *ly = &d->layers[l];
        for (size_t i = 0; i < ly->count; i++) {
            // Clients in order, in double: deterministic whatever the thread count.
            double acc = 0;
            for (int s = 0; s < k; s++)
                acc += (ly->trainable ? 1.0 / k : weights[s]) * uploads[s][ly->offset + i];
            out[ly->offset + i] = (float)acc;
        }
    }
    return FP_OK;
}

static void harmony_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const MechDefense *d = state;
    double eps = d->mech.spec.eps, rounds = rounds_done > 0 ? rounds_done : 0;
    *rec = (PrivacyRecord){.unit = "layer",
                           .epsilon_round_nominal = eps,
                           .epsilon_total_nominal = eps * rounds,
                           .nominal_notion = "epsilon-LDP per layer per round (Lemma 1; the paper's claim); total = "
                                             "rounds x epsilon",
                           .delta = 0,
                           .sound_notion = "epsilon-LDP per client: sequential composition over its L layers "
                                           "(L x epsilon per round) and the rounds (a client in every round); no "
                                           "amplification by self-sampling or shuffling; the sign's 32-bit threshold "
                                           "keeps the exact ratio within e^epsilon",
                           .sigma = -1};
    mech_defense_guarantee(d, d->n_units * eps * rounds, rec);
    mech_defense_coordinate(rec, eps * rounds,
                            "two uploads of one client that differ in one coordinate: the mechanism of that "
                            "coordinate's layer alone (layers draw independently), epsilon per round");
}

static FpStatus harmony_describe(const void *state, cJSON *out) {
    const MechDefense *d = state;
    FP_TRY(mech_defense_describe(state, out));
    cJSON_AddBoolToObject(out, "self_sampling", d->self_sampling);
    cJSON_AddNumberToObject(out, "kappa", d->mech.big_c);
    return FP_OK;
}

const DefenseOps defense_adaptive_harmony = {
    .name = "adaptive-harmony",
    .summary = "Adaptive-Harmony + restrictive self-sampling (Zhao et al. 2022): one sampled scalar per layer",
    .variants = "corrected,paper",
    .create = harmony_create,
    .destroy = mech_defense_destroy,
    .upload_kind = mech_defense_upload_kind,
    .participates = harmony_participates,
    .client_perturb = harmony_perturb,
    .upload_params = mech_defense_upload_params,
    // The gather form (DefenseOps.server_aggregate): the engine holds every upload until it runs.
    .server_aggregate = harmony_aggregate,
    .privacy = harmony_privacy,
    .describe = harmony_describe,
    .takes_param = harmony_takes_param,
};
