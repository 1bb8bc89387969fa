// `dp-fedasgp`: significant-gradient protection (Zhang, Mao, He, Huang, Wu, IEEE Trans.
// Computers 2024, "Balancing privacy and accuracy using significant gradient protection
// in federated learning"; digest: shared spec dp-fedasgp-and-mias §1.3).
//
// Client (upload = the summed local gradient G = (w_global − w_local)/η, trainable
// layers only, d coordinates):
//   g' = G · min(1, C/‖G‖₂)                                  clipped once (Alg. 1 line 20)
// variant "paper" (Alg. 1 with eq. 13's noise law and eq. 14's threshold):
//   s = sort_ascending(g')  (or of |g'| with "significance": "abs")
//   λ_t = min(s[⌈t·d/T⌉], s[⌈0.9·d⌉])                         eq. 14, 1-based, t = 1..T
//   α ~ Lap(ΔS/ε1), β ~ Lap(ΔS/ε2), each drawn ONCE per upload   Alg. 1 line 21 (no q)
//   g_j = g'_j + Lap(q·ΔS/ε3)  if g'_j + α ≥ λ_t + β           eq. 1 / eq. 13
//   g_j = g'_j                 otherwise (sent exactly)
//   ε = ε1 + ε2 + ε3, ε1 + ε2 = test_share·ε, ε1 : ε2 = q^{2/3} : 1 (Thm 2; Lyu et al. 2017)
// This claims ε-DP per upload but has none (digest §1.5 items 2–4): λ_t is an exact
// quantile of the private g', the test is an uncapped SVT with α drawn once, and every
// coordinate below the threshold is released without noise. Its sound ε is INFINITY.
//
// variant "corrected" (default): the sparse vector technique as Lyu, Su, Li 2017
// ("Understanding the sparse vector technique", Alg. 1, non-monotone queries) with a
// public threshold and a cap, followed by Laplace on the selected values:
//   scan the d coordinates in a public random order (RNG_DEFENSE_AUX);
//   ρ ~ Lap(ΔS/ε2) once; for each coordinate ν_j ~ Lap(2c·ΔS/ε1) fresh;
//   select j if |g'_j| + ν_j ≥ T + ρ; stop after c selections (c = ⌈fraction·d⌉);
//   g_j = g'_j + Lap(√c·ΔS/ε3) on the selected, 0 elsewhere;
//   ε1 : ε2 = (2c)^{2/3} : 1 (Lyu's optimum for non-monotone queries).
// The query |g'_j| and every coordinate change by at most ΔS between neighbours whose
// clipped updates differ by ΔS in L2, and any ≤ c selected coordinates by at most √c·ΔS
// in L1, so each upload is (ε1 + ε2 + ε3)-DP for that neighbour relation; with the
// default ΔS = 2C it holds for ANY change of the client's data (client-level local DP).
// Rounds compose sequentially. T is public ("threshold", default C/√d, the RMS value
// of a coordinate of a vector of norm C).
//
// Server: g = Σ γ_i g_i over the round's participants (eq. 3); the engine then steps
// W ← W − η·g (eq. 20).
//   paper: γ_i = ½(n_i/n + L_i/L) (eq. 16), L_i the mean cross-entropy of the client's
//     trained local model on its own data (Alg. 1 line 19 leaves "ΔM(W)_e" undefined),
//     sent in the clear as in the paper: a statistic of the private data outside any
//     budget, one more reason this variant has no guarantee. When no loss is known (no
//     model given, regression) γ_i = n_i/n.
//   corrected: γ_i = n_i/n. L_i is not computed or sent (it would need its own noise
//     and budget); n_i, the sample count the engine's FedAvg weights use anyway, is the
//     only thing beside the noisy upload, so the guarantee covers all a client sends
//     (for neighbours that keep n_i: any change of the client's records, not their
//     number).
//
// Params: {"name": "dp-fedasgp", "variant", "epsilon" (per upload, required), "clip"
// (1), "sensitivity" ΔS (paper: = clip; corrected: 2·clip), "svt_q" (paper's q, 1),
// "test_share" ((ε1+ε2)/ε, 0.1), "significance" ("signed" paper / "abs" corrected),
// "max_selected_fraction" (corrected, 0.01), "threshold" (corrected, C/√d)}.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/clip.h"
#include "defenses/dp/dlaplace.h"
#include "fl/defense.h"
#include "models/predict.h"

typedef struct DpFedAsgp {
    int paper;
    int abs_test;          // significance on |g'_j| (1) or on the signed g'_j (0)
    double epsilon, clip, sensitivity, svt_q, test_share;
    double eps1, eps2, eps3;                    // query (α / ν), threshold (β / ρ), values (N)
    double query_scale, threshold_scale, noise_scale;
    double threshold;      // corrected: the public T
    size_t cap;            // corrected: c
    double cap_fraction;
    int rounds;
    int n_clients;
    const ParamTable *table;
    size_t d;              // trainable coordinates
    double *loss;          // paper: per client id, L_i of its last upload (NaN when unknown)
    int *n_samples;        // per client id: n_i
    size_t *selected;      // per client id: coordinates noised in its last upload
    // corrected: the noise ("sampler"; docs/defenses-federated.md, the Laplace noise)
    int safe;              // 1: the discrete Laplace on grids (defenses/dp/dlaplace.h); 0: float
    double svt_grid;       // g_s: the grid of the queries |g'_j|, the threshold and ν, ρ
    long long svt_shift;   // s: integer steps that cover a neighbour's move of a query (ΔS/g_s + 2 err)
    long long threshold_steps; // T on the grid (public, rounded to nearest)
    double value_grid;     // g_v: the grid of the values' noise
    double eps_sound;      // per upload: what the safe sampler's law and grids prove
    double eps_sound_query, eps_sound_threshold, eps_sound_values;
    DLap query_law, threshold_law, value_law;
} DpFedAsgp;

// The SVT grid: ΔS/g_s = K - ½ steps (K = DP_ASGP_SVT_STEPS, halved while the query
// noise's scale would exceed the table), so the shift s = ⌈ΔS/g_s + 2 err⌉ = K costs
// 1/(2K) more than ΔS/g_s (within the test share of ε).
#define DP_ASGP_SVT_STEPS 1024
// The values' grid: scale b_v/g_v >= 4096 steps; the rounding costs nothing (randomized),
// E − 1 exceeds 1/scale by about 1/(2·scale).
#define DP_ASGP_VALUE_SCALE 4096.0

static void asgp_free_laws(DpFedAsgp *s) {
    dlap_free(&s->query_law);
    dlap_free(&s->threshold_law);
    dlap_free(&s->value_law);
}

// Grids and laws of the safe sampler, and the ε they prove per upload (Lyu et al. 2017,
// Alg. 1's proof on the grid: docs/defenses-federated.md).
static FpStatus asgp_build_safe(DpFedAsgp *s, const char *path, FpError *err) {
    if (s->table->n_params >= DLAP_INDEX_MAX / 2)
        return fp_fail(err, FP_EUNSUPPORTED, "%s: the safe sampler indexes at most 2^30 parameters, got %zu", path,
                       s->table->n_params);
    long k = DP_ASGP_SVT_STEPS;
    for (;; k /= 2) {
        double g = s->sensitivity / (k - 0.5);
        if (s->query_scale / g * M_LN2 <= (double)DLAP_Q_MAX && s->threshold_scale / g >= 1)
            break;
        if (k <= 16)
            return fp_fail(err, FP_EPARAM, "%s.epsilon: the safe sampler's grid cannot hold the SVT's query noise (scale "
                                           "%g against sensitivity %g); use \"sampler\": \"float\"",
                           path, s->query_scale, s->sensitivity);
    }
    s->svt_grid = s->sensitivity / (k - 0.5);
    FP_TRY(dlap_init(&s->query_law, s->query_scale / s->svt_grid, err));
    FpStatus st = dlap_init(&s->threshold_law, s->threshold_scale / s->svt_grid, err);
    if (st == FP_OK)
        st = dlap_init(&s->value_law, DP_ASGP_VALUE_SCALE, err);
    if (st != FP_OK) {
        asgp_free_laws(s);
        return st;
    }
    // Queries |g'_j| lie in [0, C]; a neighbour moves each by at most ΔS, its effective
    // position by at most ΔS/g_s + 2 err.
    double reach = s->sensitivity / s->svt_grid * (1 + 0x1p-50) + 2 * dlap_position_error(s->svt_grid, s->clip);
    s->svt_shift = (long long)ceil(reach);
    if (!(s->threshold / s->svt_grid < 0x1p50)) {
        asgp_free_laws(s);
        return fp_fail(err, FP_EPARAM, "%s.threshold: %g is beyond the safe sampler's grid", path, s->threshold);
    }
    s->threshold_steps = llround(s->threshold / s->svt_grid);
    s->value_grid = s->noise_scale / s->value_law.scale;
    if (!(s->clip / s->value_grid < 0x1p50)) {
        asgp_free_laws(s);
        return fp_fail(err, FP_EPARAM, "%s.epsilon: %g puts the values' grid below 2^-50 of the clip; use "
                                       "\"sampler\": \"float\"", path, s->epsilon);
    }
    // ρ shifted by s: ratio E_ρ^s; each of at most c passes: a tail moved by at most 2s,
    // ratio e^{(E_ν − 1)·2s}; values: L1 sensitivity √c·ΔS over at most c coordinates.
    s->eps_sound_threshold = (double)s->svt_shift * s->threshold_law.log_ratio * (1 + 0x1p-50);
    s->eps_sound_query = 2.0 * (double)s->cap * (double)s->svt_shift * s->query_law.lipschitz * (1 + 0x1p-50);
    s->eps_sound_values = dlap_epsilon_l1(&s->value_law, s->value_grid, sqrt((double)s->cap) * s->sensitivity,
                                          (double)s->cap, s->clip);
    s->eps_sound = (s->eps_sound_threshold + s->eps_sound_query + s->eps_sound_values) * (1 + 0x1p-50);
    return FP_OK;
}

// The keys create() accepts, also what takes_param answers from.
static const char *const asgp_keys[] = {"name", "variant", "epsilon", "clip", "sensitivity", "svt_q", "test_share",
                                        "significance", "max_selected_fraction", "threshold", "sampler", NULL};
static int asgp_takes_param(const char *key) { return jv_key_in(key, asgp_keys); }

static FpStatus asgp_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                            FpError *err) {
    static const char *const variants[] = {"corrected", "paper", NULL};
    static const char *const tests[] = {"signed", "abs", NULL};
    char p[256];
    FP_TRY(jv_keys(params, path, asgp_keys, err));
    int variant;
    FP_TRY(jv_choice(params, path, "variant", variants, 0, &variant, err));
    DpFedAsgp s = {.paper = variant == 1, .rounds = setup->rounds, .n_clients = setup->n_clients,
                   .table = setup->params, .d = setup->params->n_trainable};
    FP_TRY(jv_number(params, path, "epsilon", JV_REQUIRED, 0, 0, 1, INFINITY, 0, &s.epsilon, err));
    FP_TRY(jv_number(params, path, "clip", JV_OPTIONAL, 1.0, 0, 1, INFINITY, 0, &s.clip, err));
    FP_TRY(jv_number(params, path, "sensitivity", JV_OPTIONAL, s.paper ? s.clip : 2 * s.clip, 0, 1, INFINITY, 0,
                     &s.sensitivity, err));
    FP_TRY(jv_number(params, path, "test_share", JV_OPTIONAL, 0.1, 0, 1, 1, 1, &s.test_share, err));
    int sig;
    FP_TRY(jv_choice(params, path, "significance", tests, s.paper ? 0 : 1, &sig, err));
    s.abs_test = sig == 1;
    if (s.paper) {
        if (cJSON_GetObjectItemCaseSensitive(params, "max_selected_fraction") ||
            cJSON_GetObjectItemCaseSensitive(params, "threshold") || cJSON_GetObjectItemCaseSensitive(params, "sampler"))
            return fp_fail(err, FP_EPARAM, "%s: max_selected_fraction, threshold and sampler belong to the corrected "
                                           "variant (the paper's threshold is eq. 14's quantile; its noise is drawn in "
                                           "floating point)", path);
        FP_TRY(jv_number(params, path, "svt_q", JV_OPTIONAL, 1.0, 0, 1, INFINITY, 0, &s.svt_q, err));
    } else {
        if (cJSON_GetObjectItemCaseSensitive(params, "svt_q"))
            return fp_fail(err, FP_EPARAM, "%s: the corrected variant's cap is max_selected_fraction",
                           jv_path(p, sizeof p, path, "svt_q"));
        if (!s.abs_test)
            return fp_fail(err, FP_EPARAM, "%s: the corrected variant tests |g'| (a public threshold on the "
                                           "magnitude)", jv_path(p, sizeof p, path, "significance"));
        FP_TRY(jv_number(params, path, "max_selected_fraction", JV_OPTIONAL, 0.01, 0, 1, 1, 0, &s.cap_fraction, err));
        double dflt = s.d > 0 ? s.clip / sqrt((double)s.d) : 0;
        FP_TRY(jv_number(params, path, "threshold", JV_OPTIONAL, dflt, 0, 0, INFINITY, 0, &s.threshold, err));
        s.cap = (size_t)ceil(s.cap_fraction * (double)s.d - 1e-9);
        if (s.cap < 1)
            s.cap = 1;
        s.svt_q = 2.0 * (double)s.cap; // Lyu's non-monotone split: ε1 : ε2 = (2c)^{2/3} : 1
        FP_TRY(dlap_parse_sampler(params, path, &s.safe, err));
    }
    double r = pow(s.svt_q, 2.0 / 3.0), test = s.test_share * s.epsilon;
    s.eps1 = test * r / (1 + r);
    s.eps2 = test / (1 + r);
    s.eps3 = s.epsilon - test;
    if (s.paper) {
        s.query_scale = s.sensitivity / s.eps1;                  // α (Alg. 1: no q)
        s.threshold_scale = s.sensitivity / s.eps2;              // β
        s.noise_scale = s.svt_q * s.sensitivity / s.eps3;        // N (eq. 13)
    } else {
        s.query_scale = 2.0 * (double)s.cap * s.sensitivity / s.eps1;
        s.threshold_scale = s.sensitivity / s.eps2;
        s.noise_scale = sqrt((double)s.cap) * s.sensitivity / s.eps3;
    }
    if (s.safe && s.d > 0)
        FP_TRY(asgp_build_safe(&s, path, err));
    // The grids' rounding (the SVT's shift ⌈ΔS/g⌉, E − 1 > ln E, the laws' scales rounded)
    // puts the proven ε per upload up to about 1e-4 above the split's ε: the corrected
    // variant widens its three scales by that excess until the proof meets its ε (a few
    // rounds of the same build; the paper variant keeps the paper's scales).
    for (int i = 0; i < 8 && s.safe && s.d > 0 && !s.paper && s.eps_sound > s.epsilon; i++) {
        double f = s.eps_sound / s.epsilon * (1 + 1e-9);
        asgp_free_laws(&s);
        s.query_scale *= f;
        s.threshold_scale *= f;
        s.noise_scale *= f;
        FP_TRY(asgp_build_safe(&s, path, err));
    }
    DpFedAsgp *out = fp_calloc(1, sizeof *out, err);
    if (!out) {
        asgp_free_laws(&s);
        return FP_ENOMEM;
    }
    *out = s;
    size_t nc = setup->n_clients > 0 ? (size_t)setup->n_clients : 1;
    out->loss = malloc(sizeof(double) * nc);
    out->n_samples = calloc(nc, sizeof(int));
    out->selected = calloc(nc, sizeof(size_t));
    if (!out->loss || !out->n_samples || !out->selected) {
        free(out->loss);
        free(out->n_samples);
        free(out->selected);
        asgp_free_laws(out);
        free(out);
        return fp_fail(err, FP_ENOMEM, "out of memory for dp-fedasgp's per-client state (%zu clients)", nc);
    }
    for (size_t i = 0; i < nc; i++)
        out->loss[i] = NAN;
    *state = out;
    return FP_OK;
}

static void asgp_destroy(void *state) {
    DpFedAsgp *s = state;
    if (!s)
        return;
    free(s->loss);
    free(s->n_samples);
    free(s->selected);
    asgp_free_laws(s);
    free(s);
}

static UploadKind asgp_upload_kind(const void *state) { return UPLOAD_GRADIENT; }

// Mean cross-entropy of the client's local model on its own samples (NaN when unknown).
static double local_loss(const DefenseRound *round) {
    if (!round->model || !round->local_data || !round->local_idx || round->n_local <= 0 ||
        round->local_data->n_classes <= 0)
        return NAN;
    int nc = round->local_data->n_classes;
    float *probs = malloc(sizeof(float) * (size_t)round->n_local * nc);
    if (!probs)
        return NAN;
    double sum = NAN;
    if (model_predict(round->model, round->local_data, round->local_idx, round->n_local, probs, NULL) ==
        FP_OK) {
        sum = 0;
        for (int i = 0; i < round->n_local; i++) {
            double py = probs[(size_t)i * nc + round->local_data->y[round->local_idx[i]]];
            sum += -log(py > 1e-30 ? py : 1e-30);
        }
        sum /= round->n_local;
    }
    free(probs);
    return sum;
}

static FpStatus perturb_paper(const DpFedAsgp *s, float *upload, const uint32_t *idx, float *buf,
                              const DefenseRound *round, size_t *selected) {
    size_t d = s->d;
    for (size_t j = 0; j < d; j++) {
        float v = upload[idx[j]];
        buf[j] = s->abs_test ? fabsf(v) : v;
    }
    // eq. 14: rank r_t = min(⌈t·d/T⌉, ⌈0.9·d⌉), 1-based, t = 1..T.
    // Integer ceilings: ⌈t·d/T⌉ and ⌈9d/10⌉ exactly.
    unsigned long long t = (unsigned long long)round->round + 1, T = s->rounds > 0 ? (unsigned long long)s->rounds : 1;
    unsigned long long r1 = (t * d + T - 1) / T, r2 = (9ULL * d + 9) / 10;
    unsigned long long r = r1 < r2 ? r1 : r2;
    if (r < 1)
        r = 1;
    float lambda = clip_select_kth(buf, d, (size_t)r - 1);
    RngStream aux = round->aux_rng;
    double alpha = s->query_scale * rng_next_laplace(&aux);
    double beta = s->threshold_scale * rng_next_laplace(&aux);
    size_t n = 0;
    for (size_t j = 0; j < d; j++) {
        uint32_t i = idx[j];
        double x = s->abs_test ? fabs(upload[i]) : upload[i];
        if (x + alpha >= lambda + beta) {
            upload[i] = (float)(upload[i] + s->noise_scale * rng_laplace_at(&round->rng, i));
            n++;
        }
    }
    *selected = n;
    return FP_OK;
}

static FpStatus perturb_corrected(const DpFedAsgp *s, float *upload, const uint32_t *idx, uint32_t *order,
                                  unsigned char *keep, const DefenseRound *round, size_t *selected) {
    size_t d = s->d, np = s->table->n_params;
    // A public scan order: independent of the data, so it costs no privacy.
    RngStream aux = round->aux_rng;
    for (size_t j = 0; j < d; j++)
        order[j] = (uint32_t)j;
    rng_shuffle_u32(&aux, order, (uint32_t)d);
    memset(keep, 0, d);
    size_t n = 0;
    if (s->safe) {
        // On the grid g_s: ⌊|g'_j|⌉ + ν_j >= T + ρ in integers (ν_j: element np + i of the
        // round's stream, ρ: element 2·np; the values: element i).
        long long bar = s->threshold_steps + dlap_draw(&s->threshold_law, &round->rng, 2 * (uint64_t)np, NULL);
        for (size_t k = 0; k < d && n < s->cap; k++) {
            uint32_t j = order[k], i = idx[j];
            if (dlap_noisy_int(&s->query_law, s->svt_grid, fabsf(upload[i]), &round->rng, (uint64_t)np + i) >= bar) {
                keep[j] = 1;
                n++;
            }
        }
        for (size_t j = 0; j < d; j++) {
            uint32_t i = idx[j];
            upload[i] = keep[j] ? dlap_value(&s->value_law, s->value_grid, upload[i], &round->rng, i) : 0.0f;
        }
        *selected = n;
        return FP_OK;
    }
    double rho = s->threshold_scale * rng_next_laplace(&aux);
    for (size_t k = 0; k < d && n < s->cap; k++) {
        uint32_t j = order[k], i = idx[j];
        // ν_j: the RNG_DEFENSE stream past the parameter indices (N_j uses index i).
        double nu = s->query_scale * rng_laplace_at(&round->rng, (uint64_t)np + i);
        if (fabs(upload[i]) + nu >= s->threshold + rho) {
            keep[j] = 1;
            n++;
        }
    }
    for (size_t j = 0; j < d; j++) {
        uint32_t i = idx[j];
        upload[i] = keep[j] ? (float)(upload[i] + s->noise_scale * rng_laplace_at(&round->rng, i)) : 0.0f;
    }
    *selected = n;
    return FP_OK;
}

static FpStatus asgp_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    DpFedAsgp *s = state;
    size_t d = s->d;
    if (d == 0)
        return FP_OK;
    clip_to_norm(upload, s->table, s->clip);
    uint32_t *idx = malloc(sizeof(uint32_t) * d);
    float *buf = malloc(sizeof(float) * d);
    uint32_t *order = s->paper ? NULL : malloc(sizeof(uint32_t) * d);
    unsigned char *keep = s->paper ? NULL : malloc(d);
    FpStatus st = FP_OK;
    size_t selected = 0;
    if (!idx || !buf || (!s->paper && (!order || !keep)))
        st = fp_fail(err, FP_ENOMEM, "out of memory in dp-fedasgp (%zu coordinates)", d);
    else {
        clip_trainable_index(s->table, idx);
        st = s->paper ? perturb_paper(s, upload, idx, buf, round, &selected)
                      : perturb_corrected(s, upload, idx, order, keep, round, &selected);
    }
    free(idx);
    free(buf);
    free(order);
    free(keep);
    if (st == FP_OK && round->client >= 0 && round->client < s->n_clients) {
        // Each client id is written by the one thread that handles it this round. Only
        // the paper variant computes L_i (the corrected one sends nothing but n_i).
        s->loss[round->client] = s->paper ? local_loss(round) : NAN;
        s->n_samples[round->client] = round->n_local_samples;
        s->selected[round->client] = selected;
    }
    return st;
}

// What asgp_perturb keeps of a client (the paper's L_i and n_i, which the client sends
// the server beside its upload; the coordinates it noised), moved where it did not run.
typedef struct AsgpClientState {
    double loss;
    int n_samples;
    size_t selected;
} AsgpClientState;

static void asgp_client_state_save(const void *state, const DefenseRound *round, void *buf) {
    const DpFedAsgp *s = state;
    AsgpClientState cs = {.loss = NAN};
    if (round->client >= 0 && round->client < s->n_clients)
        cs = (AsgpClientState){.loss = s->loss[round->client], .n_samples = s->n_samples[round->client],
                               .selected = s->selected[round->client]};
    memcpy(buf, &cs, sizeof cs);
}

static void asgp_client_state_load(void *state, const DefenseRound *round, const void *buf) {
    DpFedAsgp *s = state;
    AsgpClientState cs;
    memcpy(&cs, buf, sizeof cs);
    if (round->client < 0 || round->client >= s->n_clients)
        return;
    s->loss[round->client] = cs.loss;
    s->n_samples[round->client] = cs.n_samples;
    s->selected[round->client] = cs.selected;
}

static void asgp_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    const DpFedAsgp *s = state;
    *out = upload_params_none();
    out->noise = "laplace";
    out->noise_scale = s->noise_scale;
    out->clip_norm = "l2";
    out->clip = s->clip;
    out->epsilon = s->epsilon;
}

static FpStatus asgp_aggregate(void *state, int round, const float *const *uploads, const double *weights,
                               const int *clients, int k, float *out, FpError *err) {
    DpFedAsgp *s = state;
    double *gamma = malloc(sizeof(double) * (k > 0 ? k : 1));
    if (!gamma)
        return fp_fail(err, FP_ENOMEM, "out of memory aggregating");
    double n = 0, L = 0;
    int losses_known = 1;
    for (int c = 0; c < k; c++) {
        int id = clients[c];
        int ok = id >= 0 && id < s->n_clients;
        n += ok ? s->n_samples[id] : 0;
        double li = ok ? s->loss[id] : NAN;
        if (!isfinite(li) || li < 0)
            losses_known = 0;
        else
            L += li;
    }
    for (int c = 0; c < k; c++) {
        int id = clients[c];
        double share = n > 0 ? s->n_samples[id] / n : weights[c];
        // eq. 16: γ_i = ½(n_i/n + L_i/L); sums to 1 over the participants (paper only).
        gamma[c] = s->paper && losses_known && L > 0 ? 0.5 * (share + s->loss[id] / L) : share;
    }
    size_t np = s->table->n_params;
    for (size_t i = 0; i < np; i++) {
        double acc = 0;
        for (int c = 0; c < k; c++)
            acc += gamma[c] * uploads[c][i];
        out[i] = (float)acc;
    }
    free(gamma);
    return FP_OK;
}

static void asgp_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const DpFedAsgp *s = state;
    *rec = (PrivacyRecord){
        .unit = "client upload",
        .epsilon_round_nominal = s->epsilon,
        .epsilon_total_nominal = s->epsilon * rounds_done,
        .nominal_notion = "eps-DP per upload (paper Thm 2: eps1 + eps2 + eps3, Laplace, sensitivity dS), "
                          "sequential composition over rounds (the paper composes none)",
        .delta = 0,
        .sigma = s->noise_scale,
    };
    if (s->paper) {
        rec->epsilon_total_sound = INFINITY;
        rec->guarantee = GUARANTEE_NONE;
        rec->sound_notion = "no guarantee: lambda_t is an exact quantile of the private gradient, the SVT is "
                            "uncapped with alpha drawn once, coordinates below the threshold are sent exactly, and "
                            "the aggregation weight's loss L_i is sent without noise";
        privacy_assume(rec, "the threshold lambda_t is an exact quantile of the client's private gradient");
        privacy_assume(rec, "the significance test is an uncapped SVT with its query noise drawn once per upload");
        privacy_assume(rec, "coordinates below the threshold are sent exactly, without noise");
        privacy_assume(rec, "the aggregation weight uses L_i, the client's loss on its own data, sent without noise");
    } else if (!s->safe) {
        rec->epsilon_total_sound = INFINITY;
        rec->guarantee = GUARANTEE_NONE;
        rec->sound_notion = "no guarantee: the Laplace noise is drawn in floating point";
        privacy_assume(rec, DLAP_FLOAT_REASON);
    } else {
        rec->epsilon_total_sound = s->eps_sound * rounds_done;
        rec->guarantee = GUARANTEE_PROVEN;
        rec->sound_notion = "pure eps-DP per client upload (capped SVT, Lyu et al. 2017 Alg. 1, public threshold, on a "
                            "grid with discrete Laplace noise; Laplace on at most c coordinates, zeros elsewhere) for "
                            "clipped updates within dS in L2 (dS = 2C: any change of the client's records that keeps "
                            "its count n_i, the only other thing it sends), the grids' rounding and the realised "
                            "noise laws included; sequential composition over rounds (a client in every round)";
    }
}

static FpStatus asgp_describe(const void *state, cJSON *out) {
    const DpFedAsgp *s = state;
    cJSON_AddStringToObject(out, "variant", s->paper ? "paper" : "corrected");
    cJSON_AddStringToObject(out, "mechanism",
                            s->paper ? "none (nominal only): exact quantile threshold, uncapped SVT, exact "
                                       "non-significant coordinates, L_i in the clear"
                                     : "capped SVT with a public threshold and fresh query noise, Laplace on the "
                                       "selected coordinates, zeros elsewhere, weights from n_i: eps-DP per upload");
    cJSON_AddNumberToObject(out, "epsilon", s->epsilon);
    cJSON_AddNumberToObject(out, "epsilon1_query", s->eps1);
    cJSON_AddNumberToObject(out, "epsilon2_threshold", s->eps2);
    cJSON_AddNumberToObject(out, "epsilon3_values", s->eps3);
    cJSON_AddNumberToObject(out, "clip", s->clip);
    cJSON_AddNumberToObject(out, "sensitivity", s->sensitivity);
    cJSON_AddNumberToObject(out, "svt_q", s->svt_q);
    cJSON_AddStringToObject(out, "significance", s->abs_test ? "abs" : "signed");
    cJSON_AddNumberToObject(out, "query_noise_scale", s->query_scale);
    cJSON_AddNumberToObject(out, "threshold_noise_scale", s->threshold_scale);
    cJSON_AddNumberToObject(out, "laplace_scale", s->noise_scale);
    if (!s->paper) {
        cJSON_AddNumberToObject(out, "threshold", s->threshold);
        cJSON_AddNumberToObject(out, "max_selected", (double)s->cap);
        cJSON_AddStringToObject(out, "sampler", s->safe ? "safe" : "float");
        if (s->safe) {
            cJSON_AddNumberToObject(out, "epsilon_sound_per_upload", s->eps_sound);
            cJSON_AddNumberToObject(out, "epsilon_sound_query", s->eps_sound_query);
            cJSON_AddNumberToObject(out, "epsilon_sound_threshold", s->eps_sound_threshold);
            cJSON_AddNumberToObject(out, "epsilon_sound_values", s->eps_sound_values);
            cJSON_AddNumberToObject(out, "svt_shift_steps", (double)s->svt_shift);
            dlap_describe(&s->query_law, s->svt_grid, "query_noise_law", out);
            dlap_describe(&s->threshold_law, s->svt_grid, "threshold_noise_law", out);
            dlap_describe(&s->value_law, s->value_grid, "value_noise_law", out);
        }
    }
    cJSON_AddStringToObject(out, "aggregation",
                            s->paper ? "gamma_i = (n_i/n + L_i/L)/2, L_i = local model's mean loss on its data (sent "
                                       "without noise)"
                                     : "gamma_i = n_i/n (L_i is not sent)");
    return FP_OK;
}

const DefenseOps defense_dp_fedasgp = {
    .name = "dp-fedasgp",
    .summary = "DP-FedASGP: clip the summed gradient, SVT significance test, Laplace on significant coordinates",
    .variants = "corrected,paper",
    .create = asgp_create,
    .destroy = asgp_destroy,
    .upload_kind = asgp_upload_kind,
    .client_perturb = asgp_perturb,
    .upload_params = asgp_upload_params,
    .client_state_size = sizeof(AsgpClientState),
    .client_state_save = asgp_client_state_save,
    .client_state_load = asgp_client_state_load,
    // The gather form: the weights come from every participant's reported loss at once.
    .server_aggregate = asgp_aggregate,
    .privacy = asgp_privacy,
    .describe = asgp_describe,
    .takes_param = asgp_takes_param,
};
