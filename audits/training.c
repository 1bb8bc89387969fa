// Audits of whole training runs with canaries (audits/training.h): the one-run audit
// (Steinke, Nasr, Jagielski 2023) and the multi-run white-box audit (Nasr et al. 2023),
// both on the configured federation through fl's one upload path. The canaries are
// clients that upload a crafted update (client-level defenses) or, for a defense whose
// local procedure is record-level (DefenseOps.record_canaries: dp-sgd), records whose
// clipped gradient is a Dirac, sampled inside the clients like their own records.
#include "audits/training.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attacks/attack.h"
#include "audits/mechanism.h"
#include "core/clock.h"
#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "core/rng_secure.h"
#include "defenses/clip.h"

// RNG_AUDIT streams of the run seed (first counter word; the mechanism audit uses small
// input indices there).
#define STREAM_COORDS 0x10000u   // the canaries' coordinates
#define STREAM_BITS 0x10001u     // one-run: which canaries are in
#define STREAM_RUNS 0x10002u     // multi-run: each run's seed

// The canary's norm where the defense measures its clip on each client's data ("clip":
// "mean-norm", ...): above any clip such a statistic gives, so that the defense clips the
// Dirac to its own bound, the largest change a client's upload can make.
#define AUDIT_CANARY_NORM_MEASURED 1e6

// The canaries' scores. signed and magnitude are sums over what the observer sees;
// likelihood (one-run, aggregates observer, sampled clients, a Gaussian defense with its
// multiplier z) weighs each round by the likelihood ratio of "the canary took part with
// probability q" against "it did not" (round_likelihood). Multi-run audits keep the
// first N_RUN_SCORES (one canary per run leaves no other to measure a round's noise by).
enum { SCORE_SIGNED = 0, SCORE_MAGNITUDE = 1, SCORE_LIKELIHOOD = 2, N_SCORES = 3, N_RUN_SCORES = 2 };
_Static_assert(N_SCORES <= TRAINING_AUDIT_MAX_SCORES, "a canary holds every score");
static const char *const score_names[] = {"signed", "magnitude", "likelihood"};
static const char *const method_names[] = {"one-run", "multi-run", NULL};
static const char *const observer_names[] = {"final-model", "aggregates", "uploads", NULL};
static const char *const neighbour_names[] = {"default", "remove", "replace", NULL};

FpStatus training_audit_parse(const cJSON *j, const char *path, TrainingAuditConfig *c, FpError *err) {
    static const char *const keys[] = {"name", "method", "observer", "neighbours", "canaries", "runs", "canary_norm",
                                       "confidence", "delta", "epsilon_claimed", NULL};
    memset(c, 0, sizeof *c);
    FP_TRY(jv_keys(j, path, keys, err));
    int choice;
    long long v;
    FP_TRY(jv_choice(j, path, "method", method_names, TRAINING_AUDIT_ONE_RUN, &choice, err));
    c->method = (TrainingAuditMethod)choice;
    FP_TRY(jv_choice(j, path, "observer", observer_names, AUDIT_OBSERVER_FINAL_MODEL, &choice, err));
    c->observer = (AuditObserver)choice;
    FP_TRY(jv_choice(j, path, "neighbours", neighbour_names, AUDIT_NEIGHBOURS_DEFAULT, &choice, err));
    c->neighbours = (AuditNeighbours)choice;
    FP_TRY(jv_int(j, path, "canaries", JV_OPTIONAL, 200, 20, 1000000, &v, err));
    c->canaries = (int)v;
    FP_TRY(jv_int(j, path, "runs", JV_OPTIONAL, 200, 8, 10000000, &v, err));
    if (v % 2) {
        char p[256];
        return fp_fail(err, FP_EPARAM, "%s: must be even (half the runs with the canary, half without), got %lld",
                       jv_path(p, sizeof p, path, "runs"), v);
    }
    c->runs = (int)v;
    // A key left out takes its default; no value in a key's range stands for "the
    // default" (canary_norm 0 and delta -1 did, so a typed 0 or -0.5 was silently the
    // defense's clip or δ).
    FP_TRY(jv_number(j, path, "canary_norm", JV_OPTIONAL, 0, 0, 1, 1e30, 0, &c->canary_norm, err));
    // At least 0.5: a lower bound that fails more often than it holds states nothing; at
    // most 1 - 1e-6, the most the verdict's percentage shows (99.9999%).
    FP_TRY(jv_number(j, path, "confidence", JV_OPTIONAL, 0.95, 0.5, 0, TRAINING_AUDIT_CONFIDENCE_MAX, 0,
                     &c->confidence, err));
    // δ < 1: every mechanism is (0, 1)-DP.
    c->delta = NAN;
    if (cJSON_GetObjectItemCaseSensitive(j, "delta"))
        FP_TRY(jv_number(j, path, "delta", JV_REQUIRED, 0, 0, 0, 1, 1, &c->delta, err));
    c->epsilon_claimed = NAN;
    if (cJSON_GetObjectItemCaseSensitive(j, "epsilon_claimed"))
        FP_TRY(jv_number(j, path, "epsilon_claimed", JV_REQUIRED, 0, 0, 0, 1e6, 0, &c->epsilon_claimed, err));
    return FP_OK;
}

// ---- the bounds --------------------------------------------------------------------------

// P[Binomial(r, q) = k].
static double binom_pmf(int r, double q, int k) {
    if (k < 0 || k > r)
        return 0;
    if (q >= 1)
        return k == r;
    return exp(lgamma(r + 1.0) - lgamma(k + 1.0) - lgamma(r - k + 1.0) + k * log(q) + (r - k) * log1p(-q));
}

// P[Binomial(r, q) >= v] = I_q(v, r − v + 1).
static double binom_tail_ge(int r, double q, int v) {
    if (v <= 0)
        return 1;
    if (v > r)
        return 0;
    return audit_beta_inc((double)v, (double)(r - v + 1), q);
}

double training_audit_one_run_p_value(int m, int r, int v, double eps, double delta) {
    double q = 1 / (1 + exp(-eps)); // e^ε/(1+e^ε): the accuracy of ε-DP randomised response
    double beta = binom_tail_ge(r, q, v), worst = 0, sum = 0;
    for (int i = 1; i <= v; i++) { // sum = f(v−i) − f(v) = P[v − i <= Bin(r, q) < v]
        sum += binom_pmf(r, q, v - i);
        if (sum / i > worst)
            worst = sum / i;
    }
    double p = beta + 2.0 * m * delta * worst;
    return p < 1 ? p : 1;
}

double training_audit_one_run_epsilon(int m, int r, int v, double delta, double p) {
    if (r <= 0 || !(training_audit_one_run_p_value(m, r, v, 0, delta) < p))
        return 0;
    double lo = 0, hi = 1;
    while (hi < 100 && training_audit_one_run_p_value(m, r, v, hi, delta) < p) {
        lo = hi;
        hi *= 2;
    }
    if (hi >= 100 && training_audit_one_run_p_value(m, r, v, 100, delta) < p)
        return 100;
    for (int it = 0; it < 60; it++) { // the p-value grows with ε: keep lo on the rejected side
        double mid = 0.5 * (lo + hi);
        if (training_audit_one_run_p_value(m, r, v, mid, delta) < p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// ---- the f-DP one-run bound (Mahloujifar, Melis, Chaudhuri 2024) -----------------------------

// The inverse blow-up of the (ε, δ)-DP trade-off curve f(x) = max(0, 1 − δ − e^ε x,
// e^−ε (1 − δ − x)): b(x) = 1 − f(x) = min(1, δ + e^ε x, 1 − e^−ε (1 − δ − x)) is the
// most an event of probability x under one neighbour can have under the other, and
// b⁻¹(y) the least probability an event of probability y under one needs under the
// other (b is a minimum of increasing pieces: its inverse the maximum of theirs).
static double eps_delta_blow_up_inverse(double y, double eps, double delta) {
    if (y <= delta)
        return 0;
    double a = (y - delta) * exp(-eps), b = 1 - delta - exp(eps) * (1 - y);
    double x = a > b ? a : b;
    return x < 1 ? x : 1;
}

int training_audit_fdp_rejects(int m, int r, int v, double eps, double delta, double p) {
    if (r <= 0 || v <= 0 || v > r || r > m)
        return 0;
    double t = p * r / m;                // the guesses' share of the probability budget
    double rr = t * v / r, h = t * (r - v) / r; // r[v], h[v]
    for (int i = v - 1; i >= 0; i--) {
        double h_next = h, b = eps_delta_blow_up_inverse(rr, eps, delta);
        h = b > h_next ? b : h_next;
        rr += (double)i / (double)(r - i) * (h - h_next);
    }
    return rr + h > (double)r / m;
}

double training_audit_fdp_epsilon(int m, int r, int v, double delta, double p) {
    if (!training_audit_fdp_rejects(m, r, v, 0, delta, p))
        return 0;
    double lo = 0, hi = 1;
    while (hi < 100 && training_audit_fdp_rejects(m, r, v, hi, delta, p)) {
        lo = hi;
        hi *= 2;
    }
    if (hi >= 100 && training_audit_fdp_rejects(m, r, v, 100, delta, p))
        return 100;
    for (int it = 0; it < 60; it++) { // rejected at lo, not at hi
        double mid = 0.5 * (lo + hi);
        if (training_audit_fdp_rejects(m, r, v, mid, delta, p))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// Both bounds bound the same tail P[W >= v] of the same count W (SNJ's p-value, and
// f-DP's: rejected means P[W >= v] < p under the curve), so their minimum does too, and
// the larger ε̂ holds at the stated confidence, not at twice the error: for the true ε,
// {max > ε} lies in {the smaller tail bound at W is below p}, whose probability is at
// most p (the least v where it is below p has P[W >= v] below p).
static double one_run_bound(int m, int r, int v, double delta, double p, double *snj, double *fdp) {
    *snj = training_audit_one_run_epsilon(m, r, v, delta, p);
    *fdp = training_audit_fdp_epsilon(m, r, v, delta, p);
    return *snj > *fdp ? *snj : *fdp;
}

static double ratio_bound(long long fa, long long na, long long fb, long long nb, double delta, double a) {
    double num = audit_cp_lower(fa, na, a) - delta, den = audit_cp_upper(fb, nb, a);
    return num > 0 && den > 0 ? log(num / den) : -INFINITY;
}

// Four one-sided bounds enter (a lower and an upper for each of p(in) and p(out)), and
// the maximum over the two directions holds when all four do: α/4 each, a union bound
// of α. (At α/2 each the stated 95% was 90%.)
double training_audit_counts_epsilon(long long fire_in, long long n_in, long long fire_out, long long n_out,
                                     double delta, double alpha) {
    if (n_in <= 0 || n_out <= 0)
        return 0;
    double a = alpha / 4;
    double e1 = ratio_bound(fire_in, n_in, fire_out, n_out, delta, a);
    double e2 = ratio_bound(fire_out, n_out, fire_in, n_in, delta, a);
    double e = e1 > e2 ? e1 : e2;
    return e > 0 ? e : 0;
}

// ---- training with canaries ----------------------------------------------------------------

typedef struct Canary {
    int client;
    uint32_t coord;     // flat index of its Dirac
    int in;
    double score[TRAINING_AUDIT_MAX_SCORES];
} Canary;

// log(1 − q + q·e^u) without overflow: the log-likelihood ratio of a round in which a
// mechanism's output is N(μ, σ²) with probability q and N(0, σ²) otherwise, against
// N(0, σ²), at u = (μ·x − μ²/2)/σ².
static double log_mixture(double q, double u) {
    if (u > 30) // e^u ≥ 1e13: log(q·e^u·(1 + (1 − q)/(q·e^u)))
        return u + log(q) + log1p((1 - q) / q * exp(-u));
    return log1p(q * expm1(u));
}

static int compare_doubles(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

// The median of v[0..n), n >= 1 (v is sorted in place).
static double median_sorting(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One round's likelihood-ratio scores. y[c] is canary c's coordinate of the released
// change, signed so that its Dirac moves it up. The round's noise is Gaussian with the
// same σ at every canary's coordinate: σ and the centre are measured across the canaries
// (median and 1.4826·MAD, robust to the few that took part), and a canary's Dirac, the
// clip C, is 1/z of σ = z·C. With canaries in each round with probability q, the score
// adds log((1 − q) + q·e^{(a·x − a²/2)}) for x = (y − centre)/σ, a = 1/z (Nasr et al.
// 2023's white-box scores over steps, Poisson-sampled); against replace neighbours (an
// out canary sends −C) it is that minus the same at −x. Any score keeps the bound valid
// (the one-run bound holds for every function of the output); this one only decides how
// tight it is. The canary records in one client's upload are scored the same way:
// its one local step's noisy clipped sum samples each with the step's rate q and adds
// noise z·C, so x and a are the same quantities in that upload. idx lists the canaries
// y[0..n) belong to (NULL: canaries 0..n−1). work holds n doubles.
static void round_likelihood(Canary *cn, const int *idx, int n, const double *y, double q, double z, int replace,
                             double *work) {
    memcpy(work, y, sizeof(double) * (size_t)n);
    double centre = median_sorting(work, n);
    for (int c = 0; c < n; c++)
        work[c] = fabs(y[c] - centre);
    double sigma = 1.4826 * median_sorting(work, n);
    if (!(sigma > 0) || !isfinite(sigma))
        return; // a round without noise at the canaries' coordinates says nothing this way
    double a = 1 / z;
    for (int c = 0; c < n; c++) {
        double x = (y[c] - centre) / sigma;
        double l = log_mixture(q, a * x - 0.5 * a * a);
        if (replace)
            l -= log_mixture(q, -a * x - 0.5 * a * a);
        cn[idx ? idx[c] : c].score[SCORE_LIKELIHOOD] += l;
    }
}

typedef struct AuditCtx {
    Experiment *ex;
    const TrainingAuditConfig *cfg;
    Model *model;          // the audit's own copy, re-initialised per run
    int replace;           // out = −c·e_j (1) or the zero update (0)
    double norm;           // c (0 until resolved from the defense)
    int records;           // 1: canary records inside the clients; 0: canary clients
    int record_unit;       // the defense's privacy unit is the record
    PrivacyRecord rec;     // the defense's account after the last run's planned rounds
    cJSON *defense;        // its resolved parameters (first run)
    int has_upload_notion; // the account states a separate upload-observer bound
    int has_coordinate_notion; // ... and one for uploads that differ in one coordinate
    cJSON *privacy;        // privacy_record_json of rec
    int n_scores;          // the canaries' scores the last run filled (N_SCORES with likelihood)
    DefenseMemo *memo;     // the experiment's memo, else the audit's own: σ and accounts derived once
} AuditCtx;

static double clip_of(const cJSON *defense) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(defense, "clip");
    if (cJSON_IsString(c))   // measured on each client's data: larger than any, so that the clip sets the size
        return AUDIT_CANARY_NORM_MEASURED;
    return cJSON_IsNumber(c) && c->valuedouble > 0 && isfinite(c->valuedouble) ? c->valuedouble : 1.0;
}

// Client k's canary records: the coordinates of the canaries that are in (a->records).
static FpStatus record_canaries(const AuditCtx *a, const Canary *cn, int n_canaries, int K, DefenseCanaries **out,
                                uint32_t **coords_out, FpError *err) {
    DefenseCanaries *dc = calloc((size_t)K, sizeof *dc);
    uint32_t *coords = malloc(sizeof(uint32_t) * (size_t)(n_canaries > 0 ? n_canaries : 1));
    if (!dc || !coords) {
        free(dc);
        free(coords);
        return fp_fail(err, FP_ENOMEM, "out of memory for %d canary records", n_canaries);
    }
    for (int c = 0; c < n_canaries; c++)
        dc[cn[c].client].n += cn[c].in;
    int at = 0;
    for (int k = 0; k < K; k++) {
        dc[k].coords = coords + at;
        dc[k].value = (float)a->norm;
        at += dc[k].n;
        dc[k].n = 0;
    }
    for (int c = 0; c < n_canaries; c++)
        if (cn[c].in)
            ((uint32_t *)dc[cn[c].client].coords)[dc[cn[c].client].n++] = cn[c].coord;
    *out = dc;
    *coords_out = coords;
    return FP_OK;
}

// One training run of the configured federation from `seed`, canary clients uploading
// their crafted updates or canary records inside the clients; fills each canary's scores
// for the configured observer.
static FpStatus train_with_canaries(AuditCtx *a, uint64_t seed, Canary *cn, int n_canaries, FpError *err) {
    Experiment *ex = a->ex;
    int K = ex->fed.clients;
    if (a->norm <= 0 && a->records)
        a->norm = clip_of(ex->defense_json);
    DefenseCanaries *dc = NULL;
    uint32_t *dc_coords = NULL;
    if (a->records)
        FP_TRY(record_canaries(a, cn, n_canaries, K, &dc, &dc_coords, err));
    FpStatus init = model_init(a->model, seed, err);
    if (init != FP_OK) {
        free(dc);
        free(dc_coords);
        return init;
    }
    FedSetup s = {.cfg = ex->fed, .seed = seed, .threads = ex->threads, .backend = ex->backend, .global = a->model,
                  .train = ex->train, .test = ex->test, .defense = ex->defense, .defense_json = ex->defense_json,
                  .quiet = 1, .canaries = dc, .memo = a->memo, .account_final_only = 1};
    Federation *f = fed_create(&s, err);
    if (!f) {
        free(dc);
        free(dc_coords);
        return err ? err->code : FP_ENOMEM;
    }
    if (!a->defense) {
        a->defense = fed_defense_json(f, err);
        if (!a->defense) {
            fed_free(f);
            free(dc);
            free(dc_coords);
            return err && err->code ? err->code : FP_ENOMEM;
        }
        if (a->norm <= 0)
            a->norm = clip_of(a->defense);
    }
    size_t np = a->model->table.n_params;
    UploadKind kind = fed_upload_kind(f);
    double dir = kind == UPLOAD_GRADIENT ? -1 : 1; // how +e_j in the upload moves the weights
    // A canary record's gradient +c·e_j moves the weights the other way (descent): its
    // scores are the weights' movement against e_j.
    double sign = a->records ? -dir : dir, wdir = a->records ? -1 : dir;
    int *which = malloc(sizeof(int) * (size_t)K);
    float *w0 = malloc(sizeof(float) * np), *prev = malloc(sizeof(float) * np), *cur = malloc(sizeof(float) * np);
    float *update = calloc(np, sizeof(float)), *sent = malloc(sizeof(float) * np);
    double *ys = NULL; // the likelihood score's round values and scratch, 2 per canary
    int *by_client = NULL; // canary records grouped by client, then the groups' offsets
    FpStatus st = FP_OK;
    if (!which || !w0 || !prev || !cur || !update || !sent) {
        st = fp_fail(err, FP_ENOMEM, "out of memory for the audit's canaries");
        goto done;
    }
    for (int k = 0; k < K; k++)
        which[k] = -1;
    for (int c = 0; c < n_canaries; c++) {
        if (!a->records)
            which[cn[c].client] = c;
        cn[c].score[SCORE_SIGNED] = cn[c].score[SCORE_MAGNITUDE] = cn[c].score[SCORE_LIKELIHOOD] = 0;
    }
    // The likelihood score, under a defense with a Gaussian multiplier (its resolved
    // "noise_multiplier"): canary clients seen in every aggregate, sampled at the
    // federation's rate; or canary records seen in each upload of a defense that takes one
    // local step a round, sampled at the step's rate ("accountant_sample_rate").
    const cJSON *zj = cJSON_GetObjectItemCaseSensitive(a->defense, "noise_multiplier");
    const cJSON *qj = cJSON_GetObjectItemCaseSensitive(a->defense, "accountant_sample_rate");
    const cJSON *ej = cJSON_GetObjectItemCaseSensitive(a->defense, "local_steps_per_round");
    double z = cJSON_IsNumber(zj) ? zj->valuedouble : 0;
    double q = a->records ? (cJSON_IsNumber(qj) ? qj->valuedouble : 0) : ex->fed.sample_rate;
    int observed = a->records ? a->cfg->observer == AUDIT_OBSERVER_UPLOADS && cJSON_IsNumber(ej) &&
                                ej->valuedouble == 1
                              : a->cfg->observer == AUDIT_OBSERVER_AGGREGATES;
    int likelihood = observed && n_canaries >= 2 && z > 0 && isfinite(z) && q > 0 && q < 1;
    a->n_scores = likelihood ? N_SCORES : N_RUN_SCORES;
    if (likelihood && (!(ys = malloc(sizeof(double) * 2 * (size_t)n_canaries)) ||
                       (a->records && !(by_client = calloc((size_t)n_canaries + 2 * ((size_t)K + 1), sizeof(int)))))) {
        st = fp_fail(err, FP_ENOMEM, "out of memory for the audit's canaries");
        goto done;
    }
    int *start = by_client ? by_client + n_canaries : NULL, *fill = start ? start + K + 1 : NULL;
    if (by_client) { // each client's canary records, contiguous: by_client[start[k] .. start[k + 1])
        for (int c = 0; c < n_canaries; c++)
            start[cn[c].client + 1]++;
        for (int k = 0; k < K; k++)
            start[k + 1] += start[k];
        for (int c = 0; c < n_canaries; c++)
            by_client[start[cn[c].client] + fill[cn[c].client]++] = c;
    }
    model_get_params(a->model, w0);
    memcpy(prev, w0, sizeof(float) * np);
    float out_value = a->replace ? (float)-a->norm : 0.0f;
    for (int r = 0; r < ex->fed.rounds && st == FP_OK; r++) {
        int n;
        const int *clients;
        if ((st = fed_round_begin(f, &n, err)) != FP_OK)
            break;
        fed_round_participants(f, &clients);
        if (a->records) { // every client trains; the uploads observer reads its canaries' coordinates
            st = fed_round_run(f, NULL, 0, err);
            for (int slot = 0; slot < n && st == FP_OK && a->cfg->observer == AUDIT_OBSERVER_UPLOADS; slot++) {
                const float *up = fed_round_upload(f, slot, NULL);
                for (int c = 0; c < n_canaries; c++)
                    if (cn[c].client == clients[slot]) {
                        uint32_t j = cn[c].coord;
                        double u = (double)up[j] - (kind == UPLOAD_WEIGHTS ? prev[j] : 0);
                        cn[c].score[SCORE_SIGNED] += sign * u;
                        cn[c].score[SCORE_MAGNITUDE] += fabs(u);
                    }
                if (by_client) { // this upload's canaries, scored against each other's noise
                    int k = clients[slot], m = start[k + 1] - start[k];
                    const int *mine = by_client + start[k];
                    for (int i = 0; i < m; i++) {
                        uint32_t j = cn[mine[i]].coord;
                        ys[i] = sign * ((double)up[j] - (kind == UPLOAD_WEIGHTS ? prev[j] : 0));
                    }
                    if (m >= 2)
                        round_likelihood(cn, mine, m, ys, q, z, a->replace, ys + m);
                }
            }
        }
        if (kind == UPLOAD_WEIGHTS) // the Dirac on top of the round's global weights
            memcpy(update, prev, sizeof(float) * np);
        for (int slot = 0; slot < n && st == FP_OK; slot++) {
            int c = which[clients[slot]];
            if (c < 0)
                continue;
            uint32_t j = cn[c].coord;
            float base = update[j];
            update[j] = base + (cn[c].in ? (float)a->norm : out_value);
            st = fed_round_craft_upload(f, slot, update, sent, err);
            update[j] = base;
            if (st == FP_OK && a->cfg->observer == AUDIT_OBSERVER_UPLOADS) {
                double u = (double)sent[j] - (kind == UPLOAD_WEIGHTS ? prev[j] : 0);
                cn[c].score[SCORE_SIGNED] += u;
                cn[c].score[SCORE_MAGNITUDE] += fabs(u);
            }
        }
        if (st == FP_OK)
            st = fed_round_finish(f, err);
        if (st != FP_OK)
            break;
        model_get_params(a->model, cur);
        if (a->cfg->observer == AUDIT_OBSERVER_AGGREGATES) {
            for (int c = 0; c < n_canaries; c++) {
                double dw = (double)cur[cn[c].coord] - prev[cn[c].coord];
                cn[c].score[SCORE_SIGNED] += wdir * dw;
                cn[c].score[SCORE_MAGNITUDE] += fabs(dw);
                if (ys)
                    ys[c] = wdir * dw;
            }
            if (ys)
                round_likelihood(cn, NULL, n_canaries, ys, q, z, a->replace, ys + n_canaries);
        }
        memcpy(prev, cur, sizeof(float) * np);
    }
    if (st == FP_OK && a->cfg->observer == AUDIT_OBSERVER_FINAL_MODEL)
        for (int c = 0; c < n_canaries; c++) {
            double dw = (double)prev[cn[c].coord] - w0[cn[c].coord];
            cn[c].score[SCORE_SIGNED] = wdir * dw;
            cn[c].score[SCORE_MAGNITUDE] = fabs(dw);
        }
    for (int c = 0; c < n_canaries && st == FP_OK; c++)
        for (int sc = 0; sc < a->n_scores; sc++)
            if (!isfinite(cn[c].score[sc])) {
                st = fp_fail(err, FP_EDIVERGED, "the %s score of canary %d is not finite (%g)", score_names[sc], c,
                             cn[c].score[sc]);
                break;
            }
    if (st == FP_OK) {
        const FedRoundResult *last = fed_round_result(f, fed_rounds_done(f) - 1);
        cJSON_Delete(a->privacy);
        a->privacy = privacy_record_json(&last->privacy);
        a->rec = last->privacy;
        // The record's strings live in the defense's state: keep only the numbers.
        a->rec.unit = a->rec.nominal_notion = a->rec.sound_notion = a->rec.upload_notion = NULL;
        a->rec.coordinate_notion = NULL;
        memset(a->rec.assumptions, 0, sizeof a->rec.assumptions);
        a->has_upload_notion = last->privacy.upload_notion != NULL;
        a->has_coordinate_notion = last->privacy.coordinate_notion != NULL;
        a->record_unit = last->privacy.unit && strcmp(last->privacy.unit, "record") == 0;
    }
done:
    free(ys);
    free(by_client);
    free(dc);
    free(dc_coords);
    free(which);
    free(w0);
    free(prev);
    free(cur);
    free(update);
    free(sent);
    fed_free(f);
    return st;
}

// m distinct trainable coordinates, uniformly from the public stream (partial Fisher-Yates).
static FpStatus pick_coords(const ParamTable *t, uint64_t seed, int m, uint32_t *out, FpError *err) {
    size_t d = t->n_trainable;
    if ((size_t)m > d)
        return fp_fail(err, FP_EPARAM, "attack.canaries: %d canaries need as many trainable coordinates; the model "
                       "has %zu", m, d);
    uint32_t *idx = malloc(sizeof(uint32_t) * (d ? d : 1));
    if (!idx)
        return fp_fail(err, FP_ENOMEM, "out of memory choosing canary coordinates");
    clip_trainable_index(t, idx);
    RngStream rs = rng_stream(seed, RNG_AUDIT, STREAM_COORDS, 0);
    for (int k = 0; k < m; k++) {
        uint32_t r = (uint32_t)k + rng_next_below(&rs, (uint32_t)(d - (size_t)k));
        uint32_t tmp = idx[k];
        idx[k] = idx[r];
        idx[r] = tmp;
        out[k] = idx[k];
    }
    free(idx);
    return FP_OK;
}

// ---- scores: the bounds from canary scores -------------------------------------------------

typedef struct {
    double s;
    int in, id;
} Scored;

static int cmp_scored_desc(const void *x, const void *y) {
    const Scored *a = x, *b = y;
    if (a->s != b->s)
        return a->s < b->s ? 1 : -1;
    return (a->id > b->id) - (a->id < b->id);
}

// Correct guesses when the k highest scores are guessed in and the k lowest out.
static int correct_guesses(const TrainingAuditScores *sc, int parity, int score, int k, Scored *buf, int *n_out) {
    int n = 0;
    for (int c = parity; c < sc->n; c += 2)
        buf[n++] = (Scored){sc->score[score][c], sc->in[c], c};
    qsort(buf, (size_t)n, sizeof(Scored), cmp_scored_desc);
    int v = 0;
    for (int i = 0; i < k && i < n; i++)
        v += buf[i].in;
    for (int i = 0; i < k && n - 1 - i >= k; i++)
        v += !buf[n - 1 - i].in;
    *n_out = n;
    return v;
}

typedef struct {
    int score, k, r, v, m;
    double epsilon;
} OneRunChoice;

static FpStatus check_scores(const TrainingAuditScores *sc, int min_n, FpError *err) {
    if (sc->n < min_n || sc->n_scores < 1 || sc->n_scores > TRAINING_AUDIT_MAX_SCORES)
        return fp_fail(err, FP_EPARAM, "%d rows of %d scores: the audit needs at least %d rows and 1 to %d scores",
                       sc->n, sc->n_scores, min_n, TRAINING_AUDIT_MAX_SCORES);
    for (int i = 0; i < sc->n; i++) {
        if (sc->in[i] != 0 && sc->in[i] != 1)
            return fp_fail(err, FP_EPARAM, "row %d: inclusion bit %d (0 or 1)", i, sc->in[i]);
        for (int k = 0; k < sc->n_scores; k++)
            if (isnan(sc->score[k][i]))
                return fp_fail(err, FP_EPARAM, "row %d: the %s score is NaN", i, sc->names[k]);
    }
    return FP_OK;
}

// The one-run procedure on scores: the score and k chosen on the even canaries, the bound
// (the larger of SNJ's and the f-DP bound, one_run_bound) from the odd ones; ceiling: every
// guess right at the best k of the grid. sc is checked by the caller.
static FpStatus one_run_choose(const TrainingAuditScores *sc, double delta, double confidence,
                               TrainingAuditOneRunBound *out, FpError *err) {
    memset(out, 0, sizeof *out);
    int m = sc->n;
    Scored *buf = malloc(sizeof(Scored) * (size_t)m);
    if (!buf)
        return fp_fail(err, FP_ENOMEM, "out of memory for %d canaries", m);
    double p0 = 1 - confidence, snj, fdp;
    int half = m / 2; // odd canaries: m/2; even: m − m/2
    static const int divisors[] = {100, 50, 20, 10, 5, 4};
    OneRunChoice best = {.epsilon = -1};
    for (int s = 0; s < sc->n_scores; s++)
        for (size_t di = 0; di < sizeof divisors / sizeof divisors[0]; di++) {
            int k = half / divisors[di];
            if (k < 1)
                continue;
            int n, v = correct_guesses(sc, 0, s, k, buf, &n);
            double e = one_run_bound(n, 2 * k, v, delta, p0, &snj, &fdp);
            if (e > best.epsilon)
                best = (OneRunChoice){s, k, 2 * k, v, n, e};
        }
    if (best.k < 1) // fewer than 2 odd canaries: no guess at all, ε̂ = 0
        best = (OneRunChoice){0, 0, 0, 0, m - half, 0};
    int n = half, v = best.k > 0 ? correct_guesses(sc, 1, best.score, best.k, buf, &n) : 0;
    out->epsilon = best.k > 0 ? one_run_bound(n, 2 * best.k, v, delta, p0, &out->epsilon_snj, &out->epsilon_fdp) : 0;
    for (size_t di = 0; di < sizeof divisors / sizeof divisors[0]; di++) {
        int k = half / divisors[di];
        if (k >= 1)
            out->ceiling = fmax(out->ceiling, one_run_bound(n, 2 * k, 2 * k, delta, p0, &snj, &fdp));
    }
    out->score = best.score;
    out->guesses = 2 * best.k;
    out->correct = v;
    out->scored = n;
    out->selection_canaries = best.m;
    out->selection_guesses = best.r;
    out->selection_correct = best.v;
    out->selection_epsilon = best.epsilon;
    free(buf);
    return FP_OK;
}

FpStatus training_audit_one_run_scores(const TrainingAuditScores *sc, double delta, double confidence, cJSON *res,
                                       FpError *err) {
    FP_TRY(check_scores(sc, 2, err));
    TrainingAuditOneRunBound b;
    FP_TRY(one_run_choose(sc, delta, confidence, &b, err));
    int in_total = 0;
    for (int c = 0; c < sc->n; c++)
        in_total += sc->in[c];
    cJSON_AddNumberToObject(res, "epsilon_ceiling", b.ceiling);
    cJSON_AddNumberToObject(res, "epsilon_lower_bound", b.epsilon);
    // Both bounds from the same guesses; the larger is reported (one_run_bound).
    cJSON_AddNumberToObject(res, "epsilon_steinke_nasr_jagielski", b.epsilon_snj);
    cJSON_AddNumberToObject(res, "epsilon_fdp", b.epsilon_fdp);
    cJSON_AddStringToObject(res, "bound", b.epsilon_fdp > b.epsilon_snj ? "f-dp (Mahloujifar et al. 2024)"
                                                                       : "Steinke, Nasr, Jagielski 2023");
    cJSON_AddNumberToObject(res, "canaries", sc->n);
    cJSON_AddNumberToObject(res, "canaries_in", in_total);
    cJSON_AddNumberToObject(res, "canaries_scored", b.scored);
    cJSON_AddNumberToObject(res, "guesses", b.guesses);
    cJSON_AddNumberToObject(res, "correct", b.correct);
    cJSON_AddStringToObject(res, "score", sc->names[b.score]);
    cJSON *sel = cJSON_AddObjectToObject(res, "selection");
    cJSON_AddNumberToObject(sel, "canaries", b.selection_canaries);
    cJSON_AddNumberToObject(sel, "guesses", b.selection_guesses);
    cJSON_AddNumberToObject(sel, "correct", b.selection_correct);
    cJSON_AddNumberToObject(sel, "epsilon", b.selection_epsilon);
    return FP_OK;
}

FpStatus training_audit_one_run_bound(const double *scores, int n_scores, const int *in, int m, double delta,
                                      double confidence, TrainingAuditOneRunBound *out, FpError *err) {
    memset(out, 0, sizeof *out);
    if (m < 2 || n_scores < 1 || n_scores > TRAINING_AUDIT_MAX_SCORES)
        return fp_fail(err, FP_EPARAM, "one-run bound: %d canaries and %d scores (need at least 2 and 1 to %d)", m,
                       n_scores, TRAINING_AUDIT_MAX_SCORES);
    double *cols = malloc(sizeof(double) * (size_t)m * (size_t)n_scores);
    int *bits = malloc(sizeof(int) * (size_t)m);
    if (!cols || !bits) {
        free(cols);
        free(bits);
        return fp_fail(err, FP_ENOMEM, "out of memory for %d canaries", m);
    }
    TrainingAuditScores sc = {.n = m, .n_scores = n_scores, .in = bits};
    for (int k = 0; k < n_scores; k++) {
        sc.names[k] = "score";
        sc.score[k] = cols + (size_t)k * (size_t)m;
        for (int c = 0; c < m; c++)
            cols[(size_t)k * m + c] = scores[(size_t)c * (size_t)n_scores + (size_t)k];
    }
    for (int c = 0; c < m; c++)
        bits[c] = in[c] != 0;
    FpStatus st = one_run_choose(&sc, delta, confidence, out, err);
    free(cols);
    free(bits);
    return st;
}

// δ of the bound: the config's, else the defense's account's (0 for pure DP).
static double audit_delta(const AuditCtx *a) {
    if (!isnan(a->cfg->delta))
        return a->cfg->delta;
    return a->rec.delta > 0 && a->rec.delta < 1 ? a->rec.delta : 0;
}

// The canaries' (or runs') scores as columns, for the bounds and the scores file.
typedef struct {
    double *col[N_SCORES];
    int *in;
    TrainingAuditScores view;
} ScoreColumns;

// Scores first .. first + n_scores − 1 of each canary.
static FpStatus score_columns(const Canary *cn, int n, int first, int n_scores, ScoreColumns *o, FpError *err) {
    memset(o, 0, sizeof *o);
    int ok = (o->in = malloc(sizeof(int) * (size_t)(n ? n : 1))) != NULL;
    for (int s = 0; s < n_scores; s++)
        ok &= (o->col[s] = malloc(sizeof(double) * (size_t)(n ? n : 1))) != NULL;
    if (!ok) {
        free(o->in);
        for (int s = 0; s < n_scores; s++)
            free(o->col[s]);
        return fp_fail(err, FP_ENOMEM, "out of memory for %d scores", n);
    }
    for (int i = 0; i < n; i++) {
        o->in[i] = cn[i].in;
        for (int s = 0; s < n_scores; s++)
            o->col[s][i] = cn[i].score[first + s];
    }
    o->view = (TrainingAuditScores){.n = n, .n_scores = n_scores, .in = o->in};
    for (int s = 0; s < n_scores; s++) {
        o->view.names[s] = score_names[first + s];
        o->view.score[s] = o->col[s];
    }
    return FP_OK;
}

static void score_columns_free(ScoreColumns *o) {
    free(o->in);
    for (int s = 0; s < o->view.n_scores; s++)
        free(o->col[s]);
}

// DIR/scores.csv: the scores the bound was computed from, for `fedpriv audit-scores`
// (which reproduces ε̂ from them): a header "canary,in,signed,magnitude" (one-run;
// "canary,in,likelihood" where that score applies) or "run,in,signed,magnitude" (multi-run), then
// one row per canary or run in order, %.17g so that every score reads back as the same
// double. Written through fp_open_beneath
// (no link below DIR is followed) and renamed into place.
static FpStatus write_scores(const char *dir, const char *id_name, const TrainingAuditScores *sc, FpError *err) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "scores.csv.tmp.%ld", (long)getpid());
    int fd = fp_open_beneath(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC, NULL, err);
    if (fd < 0)
        return err ? err->code : FP_EIO;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return fp_fail(err, FP_EIO, "%s/%s: cannot write", dir, tmp);
    }
    fprintf(f, "%s,in", id_name);
    for (int s = 0; s < sc->n_scores; s++)
        fprintf(f, ",%s", sc->names[s]);
    fputc('\n', f);
    for (int i = 0; i < sc->n; i++) {
        fprintf(f, "%d,%d", i, sc->in[i]);
        for (int s = 0; s < sc->n_scores; s++)
            fprintf(f, ",%.17g", sc->score[s][i]);
        fputc('\n', f);
    }
    char from[4200], to[4200];
    snprintf(from, sizeof from, "%s/%s", dir, tmp);
    snprintf(to, sizeof to, "%s/scores.csv", dir);
    if (ferror(f) | (fclose(f) != 0) || rename(from, to) != 0) {
        unlink(from);
        return fp_fail(err, FP_EIO, "%s: cannot write: %s", to, strerror(errno));
    }
    return FP_OK;
}

static FpStatus one_run(AuditCtx *a, cJSON *res, FpError *err) {
    const TrainingAuditConfig *cfg = a->cfg;
    Experiment *ex = a->ex;
    int m = cfg->canaries, K = ex->fed.clients;
    if (m > K && !a->records)
        return fp_fail(err, FP_EPARAM, "attack.canaries: %d canary clients, but the federation has %d clients "
                       "(federation.clients)", m, K);
    Canary *cn = calloc((size_t)m, sizeof(Canary));
    uint32_t *coords = malloc(sizeof(uint32_t) * (size_t)m);
    if (!cn || !coords) {
        free(cn);
        free(coords);
        return fp_fail(err, FP_ENOMEM, "out of memory for %d canaries", m);
    }
    FpStatus st = pick_coords(&a->model->table, ex->seed, m, coords, err);
    RngStream bits = rng_stream(ex->seed, RNG_AUDIT, STREAM_BITS, 0);
    // Canary clients are the last m ids; canary records are dealt to the clients in turn.
    for (int c = 0; c < m; c++)
        cn[c] = (Canary){.client = a->records ? c % K : K - m + c, .coord = coords[c],
                         .in = (int)(rng_next_u32(&bits) & 1u)};
    if (st == FP_OK)
        st = train_with_canaries(a, ex->seed, cn, m, err);
    // The likelihood score, where it applies, is the audit's score by rule (audits/training.h):
    // the bound and scores.csv hold it alone, so audit-scores on the file gives the same ε̂.
    int likelihood = a->n_scores == N_SCORES;
    ScoreColumns cols;
    if (st == FP_OK && (st = score_columns(cn, m, likelihood ? SCORE_LIKELIHOOD : 0, likelihood ? 1 : a->n_scores,
                                           &cols, err)) == FP_OK) {
        st = training_audit_one_run_scores(&cols.view, audit_delta(a), cfg->confidence, res, err);
        if (st == FP_OK && cfg->state_dir && (st = write_scores(cfg->state_dir, "canary", &cols.view, err)) == FP_OK)
            cJSON_AddStringToObject(res, "scores_file", "scores.csv");
        score_columns_free(&cols);
    }
    free(cn);
    free(coords);
    return st;
}

// ---- multi-run --------------------------------------------------------------------------------

typedef struct {
    int score, ge;      // the test: score >= tau (ge) or <= tau
    double tau, epsilon;
} Test;

static void count_fires(const TrainingAuditScores *sc, int lo, int hi, const Test *t, long long *fi, long long *ni,
                        long long *fo, long long *no) {
    *fi = *ni = *fo = *no = 0;
    for (int r = lo; r < hi; r++) {
        double s = sc->score[t->score][r];
        int fire = t->ge ? s >= t->tau : s <= t->tau;
        if (sc->in[r]) {
            (*ni)++;
            *fi += fire;
        } else {
            (*no)++;
            *fo += fire;
        }
    }
}

FpStatus training_audit_multi_run_scores(const TrainingAuditScores *sc, double delta, double confidence, cJSON *res,
                                         FpError *err) {
    FP_TRY(check_scores(sc, 4, err));
    int R = sc->n, pick = R / 2;
    double alpha = 1 - confidence;
    Test best = {.epsilon = -1};
    for (int s = 0; s < sc->n_scores; s++)
        for (int ge = 0; ge <= 1; ge++)
            for (int r = 0; r < pick; r++) {
                Test t = {s, ge, sc->score[s][r], 0};
                long long fi, ni, fo, no;
                count_fires(sc, 0, pick, &t, &fi, &ni, &fo, &no);
                t.epsilon = training_audit_counts_epsilon(fi, ni, fo, no, delta, alpha);
                if (t.epsilon > best.epsilon)
                    best = t;
            }
    long long fi, ni, fo, no;
    count_fires(sc, pick, R, &best, &fi, &ni, &fo, &no);
    double eps = training_audit_counts_epsilon(fi, ni, fo, no, delta, alpha);
    cJSON_AddNumberToObject(res, "epsilon_lower_bound", eps);
    // The most this audit could report: a test that fires in every scored "in" run and
    // in no "out" run.
    cJSON_AddNumberToObject(res, "epsilon_ceiling", training_audit_counts_epsilon(ni, ni, 0, no, delta, alpha));
    cJSON_AddNumberToObject(res, "runs", R);
    cJSON_AddNumberToObject(res, "runs_scored", R - pick);
    cJSON *test = cJSON_AddObjectToObject(res, "test");
    cJSON_AddStringToObject(test, "score", sc->names[best.score]);
    cJSON_AddStringToObject(test, "fires_when", best.ge ? "score >= threshold" : "score <= threshold");
    cJSON_AddNumberToObject(test, "threshold", best.tau);
    cJSON_AddNumberToObject(test, "fired_in", (double)fi);
    cJSON_AddNumberToObject(test, "runs_in", (double)ni);
    cJSON_AddNumberToObject(test, "fired_out", (double)fo);
    cJSON_AddNumberToObject(test, "runs_out", (double)no);
    cJSON_AddNumberToObject(test, "selection_epsilon", best.epsilon);
    return FP_OK;
}

// ---- multi-run: finished runs kept on disk --------------------------------------------------
//
// DIR/multi-run.txt: a first line naming what the runs depend on (runs_spec below: a
// 64-bit FNV-1a of the canonical JSON of the whole resolved experiment and the fedpriv
// version), then one line per finished run, in order:
// "run r: <signed score> <magnitude score>" (%.17g, so a resumed run is bit-identical).
// A rerun with the same first line skips the runs listed (a last line cut short by a kill
// is ignored); any other first line starts the file over, saying so. Resumed scores must
// be finite: the first line that is not a finished run with finite scores ends the
// resume, said on stderr unless it is a last line cut short (resumed_run). The last run
// is always trained again: it leaves the defense's account and resolved parameters for
// the result.

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    return h;
}

// FNV-1a over 32-bit words of n bytes (a tail of 1-3 bytes zero-padded): the data's
// digest, a word at a time because a training set can be hundreds of megabytes.
static uint64_t fnv1a_words(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t w = 0;
        memcpy(&w, b + i, n - i < 4 ? n - i : 4);
        h = (h ^ w) * UINT64_C(0x100000001b3);
    }
    return h;
}

// The samples themselves (shape, features, labels or targets): the same data read from
// another path is the same experiment; other data under the same path is not.
static void add_data_digest(cJSON *o, const char *key, const Dataset *d) {
    if (!d)
        return;
    int shape[] = {d->n, d->c, d->h, d->w, d->n_classes, d->target_dim};
    uint64_t h = fnv1a_words(UINT64_C(0xcbf29ce484222325), shape, sizeof shape);
    size_t n = (size_t)d->n;
    if (d->x)
        h = fnv1a_words(h, d->x, sizeof(float) * n * dataset_sample_size(d));
    if (d->y)
        h = fnv1a_words(h, d->y, sizeof(int32_t) * n);
    if (d->target)
        h = fnv1a_words(h, d->target, sizeof(float) * n * (size_t)d->target_dim);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    cJSON *e = cJSON_AddObjectToObject(o, key);
    cJSON_AddNumberToObject(e, "samples", d->n);
    cJSON_AddStringToObject(e, "digest", hex);
}

// Sorts every object's keys into byte order, in place (strict JSON has no duplicate
// keys), so that two spellings of one config print alike.
static void sort_keys(cJSON *j) {
    for (cJSON *it = j->child; it; it = it->next)
        sort_keys(it);
    if (!cJSON_IsObject(j))
        return;
    cJSON *sorted = NULL, *next;
    for (cJSON *it = j->child; it; it = next) { // insertion sort of the children
        next = it->next;
        cJSON **at = &sorted;
        while (*at && strcmp((*at)->string, it->string) <= 0)
            at = &(*at)->next;
        it->next = *at;
        *at = it;
    }
    cJSON *prev = NULL;
    for (cJSON *it = sorted; it; it = it->next) { // cJSON's prev links: the head's is the tail
        it->prev = prev;
        prev = it;
    }
    if (sorted)
        sorted->prev = prev;
    j->child = sorted;
}

static cJSON *sorted_copy(const cJSON *j) {
    cJSON *c = cJSON_Duplicate(j, 1);
    if (c)
        sort_keys(c);
    return c;
}

// Everything a run's scores depend on, as canonical JSON: the version, seed and RNG,
// backend (and the CPU's BLAS kernels, which fix the order of its sums), the data's
// digests, the model and federation as resolved, the defense as configured (keys
// sorted; with the version, that fixes what it resolves to), and the audit's settings
// that enter a run (observer, neighbours, canary kind and norm). Not the number of runs,
// the confidence, δ or the claim: they change what is computed from the scores, not the
// scores. Before, the model entered only as its parameter count and the data as its
// size, so "init": "uniform" resumed "init": "default"'s runs.
static cJSON *runs_spec(const AuditCtx *a) {
    const Experiment *ex = a->ex;
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "fedpriv_version", FEDPRIV_VERSION);
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)ex->seed); // the secure-RNG flag included
    cJSON_AddStringToObject(s, "seed", seed);
    const Backend *b = ex->backend ? ex->backend : backend_cpu();
    cJSON_AddStringToObject(s, "backend", b->name);
    if (b->device == DEVICE_CPU)
        cJSON_AddStringToObject(s, "blas_kernels", backend_cpu_blas_kernels());
    cJSON *d = cJSON_AddObjectToObject(s, "dataset");
    cJSON_AddStringToObject(d, "name", ex->dataset_name);
    add_data_digest(d, "train", ex->train);
    add_data_digest(d, "test", ex->test);
    const Model *mo = a->model; // as resolved: {"name": "mlp"} and its defaults spelled out are one model
    cJSON *m = cJSON_AddObjectToObject(s, "model");
    cJSON_AddStringToObject(m, "name", mo->cfg.name); // an imported model: "onnx-" and its file's digest
    cJSON_AddStringToObject(m, "init", mo->cfg.init == INIT_UNIFORM ? "uniform" : "default");
    cJSON_AddItemToObject(m, "hidden", cJSON_CreateIntArray(mo->cfg.hidden, mo->cfg.n_hidden));
    cJSON_AddNumberToObject(m, "bn_momentum", mo->cfg.bn_momentum);
    cJSON_AddNumberToObject(m, "parameters", (double)mo->table.n_params);
    cJSON_AddItemToObject(s, "federation", fed_config_to_json(&ex->fed));
    cJSON_AddItemToObject(s, "defense", ex->defense_json ? sorted_copy(ex->defense_json) : cJSON_CreateNull());
    cJSON *au = cJSON_AddObjectToObject(s, "audit");
    cJSON_AddStringToObject(au, "method", method_names[TRAINING_AUDIT_MULTI_RUN]);
    cJSON_AddStringToObject(au, "observer", observer_names[a->cfg->observer]);
    cJSON_AddStringToObject(au, "neighbours", a->replace ? "replace" : "remove");
    cJSON_AddStringToObject(au, "canary", a->records ? "record" : "client");
    if (a->cfg->canary_norm > 0)
        cJSON_AddNumberToObject(au, "canary_norm", a->cfg->canary_norm);
    else
        cJSON_AddStringToObject(au, "canary_norm", "default");
    return s;
}

static void runs_fingerprint(const AuditCtx *a, char *out, size_t n) {
    cJSON *spec = runs_spec(a);
    char *text = spec ? jv_print(spec, 0) : NULL;
    if (text)
        snprintf(out, n, "fedpriv multi-run audit %016llx",
                 (unsigned long long)fnv1a(UINT64_C(0xcbf29ce484222325), text));
    else // out of memory: a first line no file holds, so nothing is resumed
        snprintf(out, n, "fedpriv multi-run audit ?");
    free(text);
    cJSON_Delete(spec);
}

// Whether line is the finished line of run r, its scores in *sg and *mg. A line cut short
// (no newline: the last one, of a kill) is not, silently. Any other line that is not
// run r's, with finite scores, is damage (fedpriv writes no other: a run whose score is
// not finite fails as diverged), said in one line on stderr; the runs from it on are
// trained again, so the result is still the uninterrupted one. Before, a "nan" was read:
// in the scored half it silently stopped the test firing.
static int resumed_run(const char *path, const char *line, int r, double *sg, double *mg, int quiet) {
    int got;
    char end = 0;
    if (sscanf(line, "run %d: %lg %lg%c", &got, sg, mg, &end) == 4 && end == '\n' && got == r && isfinite(*sg) &&
        isfinite(*mg))
        return 1;
    size_t n = strcspn(line, "\n");
    if (line[n] == '\n' && !quiet)
        fp_print_line(stderr, "audit-training: %s:%d: not the finished run %d with finite scores (\"%.*s\"): the "
                      "file was damaged or edited; runs %d and on are trained again", path, r + 2, r,
                      (int)(n < 60 ? n : 60), line, r);
    return 0;
}

// Reads the finished runs' scores into runs[0..done) and returns done (0 when the file is
// missing or names other runs); *f is the file open for appending after them, with
// anything past the last whole line cut off (NULL when the directory cannot be written:
// no resume then). The file is opened once, through the one opener (core/files.h), and
// cut and rewritten through that descriptor: a link, a FIFO or a hard link planted as
// DIR/multi-run.txt is refused (-1, err set), never read, cut or written through.
static int runs_resume(const char *dir, const char *fingerprint, Canary *runs, int R, FILE **f, int quiet,
                       FpError *err) {
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/multi-run.txt", dir);
    int done = 0;
    long keep = 0; // bytes of the file that stay
    *f = NULL;
    FpError oerr = {0};
    int fd = fp_open_beneath(dir, "multi-run.txt", O_RDWR | O_CREAT, NULL, &oerr);
    if (fd < 0 && oerr.code == FP_EFORMAT) {
        fp_fail(err, oerr.code, "%s", oerr.msg);
        return -1;
    }
    struct stat sb;
    FILE *in = fd >= 0 && fstat(fd, &sb) == 0 ? fdopen(fd, "r+") : NULL;
    if (!in && fd >= 0)
        close(fd);
    if (in && sb.st_size > 0) {
        size_t fl = strlen(fingerprint);
        if (fgets(line, sizeof line, in) && strncmp(line, fingerprint, fl) == 0 && line[fl] == '\n') {
            keep = ftell(in);
            double sg, mg;
            while (done < R && fgets(line, sizeof line, in) && resumed_run(path, line, done, &sg, &mg, quiet)) {
                runs[done].score[SCORE_SIGNED] = sg;
                runs[done].score[SCORE_MAGNITUDE] = mg;
                done++;
                keep = ftell(in);
            }
        } else if (!quiet) {
            fp_print_line(stderr, "audit-training: %s holds the runs of another configuration (or fedpriv "
                          "version); starting over", path);
        }
    }
    if (!in)
        return 0;
    if (keep > 0 && fflush(in) == 0 && ftruncate(fileno(in), keep) == 0 && fseek(in, keep, SEEK_SET) == 0) {
        *f = in;
        if (done > 0 && !quiet)
            fprintf(stderr, "audit-training: resuming after %d finished runs (%s)\n", done, path);
        return done;
    }
    if (fflush(in) == 0 && ftruncate(fileno(in), 0) == 0 && fseek(in, 0, SEEK_SET) == 0) {
        *f = in;
        fprintf(*f, "%s\n", fingerprint);
        fflush(*f);
    } else
        fclose(in);
    return 0;
}

// A journal line that could not be written ends the audit: appending after a half-written
// line would leave a record in the middle that a resume stops at, and an audit that goes
// on without its journal could not be resumed.
static FpStatus journal_failed(const char *dir, FpError *err) {
    int saved = errno;
    return fp_fail(err, FP_EIO, "%s/multi-run.txt: write failed: %s", dir, strerror(saved ? saved : EIO));
}

static FpStatus multi_run(AuditCtx *a, cJSON *res, int quiet, FpError *err) {
    const TrainingAuditConfig *cfg = a->cfg;
    Experiment *ex = a->ex;
    int R = cfg->runs;
    Canary *runs = calloc((size_t)R, sizeof(Canary));
    if (!runs)
        return fp_fail(err, FP_ENOMEM, "out of memory for %d runs", R);
    uint32_t coord = 0;
    FpStatus st = pick_coords(&a->model->table, ex->seed, 1, &coord, err);
    for (int r = 0; r < R; r++)
        runs[r] = (Canary){.client = ex->fed.clients - 1, .coord = coord, .in = r % 2 == 0};
    FILE *kept = NULL;
    int resumed = 0;
    if (st == FP_OK && cfg->state_dir) {
        char fp[64];
        runs_fingerprint(a, fp, sizeof fp);
        resumed = runs_resume(cfg->state_dir, fp, runs, R - 1, &kept, quiet, err);
        if (resumed < 0) {
            st = FP_EFORMAT;
            resumed = 0;
        } else if (kept && ferror(kept)) { // the fingerprint line did not reach the file
            st = journal_failed(cfg->state_dir, err);
        }
    }
    RngStream seeds = rng_stream(ex->seed, RNG_AUDIT, STREAM_RUNS, 0);
    for (int r = 0; r < R && st == FP_OK; r++) {
        uint64_t hi = rng_next_u32(&seeds), lo = rng_next_u32(&seeds);
        if (r < resumed)
            continue;
        // A run's seed is a draw with the secure-RNG flag (bit 63) taken from the audit's
        // own seed: a draw that set it made that run's noise fresh OS randomness, so the
        // audit could not be rerun bit for bit.
        uint64_t run_seed = (((hi << 32) | lo) & ~RNG_SEED_SECURE) | (ex->seed & RNG_SEED_SECURE);
        st = train_with_canaries(a, run_seed, &runs[r], 1, err);
        if (st == FP_OK && kept && r < R - 1 &&
            (fprintf(kept, "run %d: %.17g %.17g\n", r, runs[r].score[SCORE_SIGNED], runs[r].score[SCORE_MAGNITUDE]) < 0 ||
             fflush(kept) != 0))
            st = journal_failed(cfg->state_dir, err);
        if (!quiet && (R < 10 || (r + 1) % (R / 10) == 0))
            fprintf(stderr, "audit-training: run %d/%d\n", r + 1, R);
    }
    if (kept && fclose(kept) != 0 && st == FP_OK)
        st = journal_failed(cfg->state_dir, err);
    if (st == FP_OK)
        cJSON_AddNumberToObject(res, "runs_resumed", resumed);
    ScoreColumns cols;
    if (st == FP_OK && (st = score_columns(runs, R, 0, N_RUN_SCORES, &cols, err)) == FP_OK) {
        st = training_audit_multi_run_scores(&cols.view, audit_delta(a), cfg->confidence, res, err);
        if (st == FP_OK && cfg->state_dir && (st = write_scores(cfg->state_dir, "run", &cols.view, err)) == FP_OK)
            cJSON_AddStringToObject(res, "scores_file", "scores.csv");
        score_columns_free(&cols);
    }
    free(runs);
    return st;
}

// ---- the claim --------------------------------------------------------------------------------

// The ε the defense claims for the observer (see audits/training.h), and where it comes from.
// A narrower figure of the record as the claim: proven if it is, else its conditional
// figure, else none (∞); *source names which, from `labels` (proven, conditional, none).
static double narrower_claim(double proven, double conditional, const char *const labels[3], const char **source) {
    int which = isfinite(proven) ? 0 : isfinite(conditional) ? 1 : 2;
    *source = labels[which];
    return which == 0 ? proven : which == 1 ? conditional : INFINITY;
}

static double claimed_epsilon(const AuditCtx *a, AuditObserver o, const char **source) {
    const PrivacyRecord *p = &a->rec;
    if (a->has_coordinate_notion && !a->records) {
        // A canary client's "in" and "out" uploads differ in its Dirac's coordinate alone:
        // a coordinate-wise mechanism's per-scalar account is the claim they test, for
        // every observer (the rest is post-processing).
        static const char *const labels[] = {"one coordinate, proven", "one coordinate, conditional",
                                             "one coordinate: none"};
        return narrower_claim(p->epsilon_total_coordinate, p->epsilon_total_coordinate_conditional, labels, source);
    }
    if (o == AUDIT_OBSERVER_UPLOADS && a->has_upload_notion) {
        static const char *const labels[] = {"upload observer, proven", "upload observer, conditional",
                                             "upload observer: none"};
        return narrower_claim(p->epsilon_total_upload, p->epsilon_total_upload_conditional, labels, source);
    }
    if (isfinite(p->epsilon_total_sound)) {
        *source = "sound, proven";
        return p->epsilon_total_sound;
    }
    if (isfinite(p->epsilon_total_conditional)) {
        *source = "sound, conditional";
        return p->epsilon_total_conditional;
    }
    if (p->epsilon_total_nominal >= 0 && isfinite(p->epsilon_total_nominal)) {
        *source = "nominal (the paper's claim; no sound bound)";
        return p->epsilon_total_nominal;
    }
    *source = "none";
    return INFINITY;
}

FpStatus training_audit_run(Experiment *ex, const TrainingAuditConfig *cfg, int quiet, cJSON *res, FpError *err) {
    double t0 = fp_monotonic_seconds();
    AuditCtx a = {.ex = ex, .cfg = cfg, .norm = cfg->canary_norm};
    // A record-level local procedure gets canary records, added or removed (dp-sgd's
    // add/remove notion); any other defense gets canary clients.
    a.records = ex->defense && ex->defense->record_canaries;
    if (a.records && cfg->neighbours == AUDIT_NEIGHBOURS_REPLACE)
        return fp_fail(err, FP_EPARAM, "attack.neighbours: %s is audited with canary records, which are added or "
                       "removed (its add/remove notion); \"replace\" is for canary clients", ex->defense->name);
    a.replace = !a.records && (cfg->neighbours == AUDIT_NEIGHBOURS_REPLACE ||
                               (cfg->neighbours == AUDIT_NEIGHBOURS_DEFAULT && ex->fed.sampling == SAMPLING_FIXED));
    a.model = model_clone(ex->model, ex->backend, err);
    if (!a.model)
        return err ? err->code : FP_ENOMEM;
    // The runs share one memo (the experiment's, or one for this audit when the caller has
    // none): a run's calibration and accounts are those of the run before (NULL when out
    // of memory: each run derives them again, the same figures).
    DefenseMemo *own_memo = ex->memo ? NULL : defense_memo_create();
    a.memo = ex->memo ? ex->memo : own_memo;
    cJSON_AddStringToObject(res, "method", method_names[cfg->method]);
    cJSON_AddStringToObject(res, "observer", observer_names[cfg->observer]);
    cJSON_AddStringToObject(res, "canary", a.records ? "record" : "client");
    cJSON_AddStringToObject(res, "neighbours", a.replace ? "replace" : "remove");
    cJSON_AddNumberToObject(res, "confidence", cfg->confidence);
    FpStatus st = cfg->method == TRAINING_AUDIT_ONE_RUN ? one_run(&a, res, err) : multi_run(&a, res, quiet, err);
    if (st == FP_OK) {
        const char *source;
        char covered_source[256];
        double claim = claimed_epsilon(&a, cfg->observer, &source);
        if (!a.records && a.record_unit && !a.rec.record_bound_covers_client) {
            // A canary client tests client-level privacy, which a record-level claim does
            // not state unless its sensitivity covers any change of the client's upload
            // (AVP's and NbAFL's Δs = 2C do; NbAFL's 2C/min|D_k| does not).
            claim = INFINITY;
            source = "none for canary clients: the defense's guarantee is record-level with a sensitivity below the "
                     "clip ball's, and its local procedure samples no canary records";
        } else if (!a.records && a.record_unit) {
            snprintf(covered_source, sizeof covered_source,
                     "%s; record-level with a sensitivity of the whole clip ball, which covers any change of a "
                     "client's upload", source);
            source = covered_source;
        }
        if (!isnan(cfg->epsilon_claimed)) {
            claim = cfg->epsilon_claimed;
            source = "config: epsilon_claimed";
        }
        double eps = cJSON_GetObjectItemCaseSensitive(res, "epsilon_lower_bound")->valuedouble;
        cJSON_AddNumberToObject(res, "delta", audit_delta(&a));
        jnum_add(res, "epsilon_claimed", claim);
        cJSON_AddStringToObject(res, "claim_source", source);
        jnum_add(res, "epsilon_sound", a.rec.epsilon_total_sound);
        jnum_add(res, "epsilon_conditional", a.rec.epsilon_total_conditional);
        jnum_add(res, "epsilon_nominal", a.rec.epsilon_total_nominal);
        cJSON_AddStringToObject(res, "guarantee", guarantee_name(a.rec.guarantee));
        cJSON_AddBoolToObject(res, "pass", !(eps > claim));
        // Whether ε̂ could have exceeded the claim at all: when not, a pass says nothing
        // about it (too few canaries or runs for a claim this large).
        double ceiling = cJSON_GetObjectItemCaseSensitive(res, "epsilon_ceiling")->valuedouble;
        cJSON_AddBoolToObject(res, "claim_testable", ceiling > claim);
        cJSON_AddNumberToObject(res, "canary_norm", a.norm);
        if (a.privacy)
            cJSON_AddItemToObject(res, "privacy", cJSON_Duplicate(a.privacy, 1));
        if (a.defense)
            cJSON_AddItemToObject(res, "defense_resolved", cJSON_Duplicate(a.defense, 1));
        cJSON_AddNumberToObject(res, "seconds", fp_monotonic_seconds() - t0);
    }
    cJSON_Delete(a.defense);
    cJSON_Delete(a.privacy);
    model_free(a.model);
    defense_memo_free(own_memo);
    return st;
}

// ---- the matrix attack ------------------------------------------------------------------------

static FpStatus audit_validate(const AttackEnv *env, FpError *err) {
    TrainingAuditConfig c;
    return training_audit_parse(env->attack_json, env->path, &c, err);
}

static FpStatus audit_attack_run(const AttackEnv *env, cJSON *result, FpError *err) {
    TrainingAuditConfig c;
    FP_TRY(training_audit_parse(env->attack_json, env->path, &c, err));
    c.state_dir = env->out_dir;
    FP_TRY(training_audit_run(env->ex, &c, env->quiet, result, err));
    if (!env->quiet) {
        // One line of verdict, with what it can and cannot say.
        double eps = cJSON_GetObjectItemCaseSensitive(result, "epsilon_lower_bound")->valuedouble;
        double claim = jnum_value(cJSON_GetObjectItemCaseSensitive(result, "epsilon_claimed"));
        double ceiling = cJSON_GetObjectItemCaseSensitive(result, "epsilon_ceiling")->valuedouble;
        const char *source = cJSON_GetObjectItemCaseSensitive(result, "claim_source")->valuestring;
        if (!isfinite(claim))
            fprintf(stderr, "audit-training: epsilon >= %.3f at %g%% confidence; no claim to compare with (%s)\n", eps,
                    100 * c.confidence, source);
        else
            fprintf(stderr, "audit-training: epsilon >= %.3f at %g%% confidence against the claimed %.3f (%s): %s\n",
                    eps, 100 * c.confidence, claim, source,
                    eps > claim       ? "the claim is refuted"
                    : ceiling > claim ? "consistent with the claim"
                                      : "consistent, but this audit could not have refuted it (more canaries or runs)");
    }
    return FP_OK;
}

const AttackOps attack_audit_training = {
    .name = "audit-training",
    .summary = "empirical lower bound on the training run's epsilon: canary clients, one-run (Steinke et al. "
               "2023) or multi-run white-box (Nasr et al. 2023) audit",
    .headline = "epsilon_lower_bound",
    .headline_higher_leaks = 1,
    .validate = audit_validate,
    .run = audit_attack_run,
};
