// Clipping, Gaussian noise and order statistics over trainable elements (see clip.h).
#include "defenses/clip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"
#include "core/jsonv.h"
#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_pld.h"

double clip_norm(const float *x, const ParamTable *t) {
    double s = 0;
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        if (!L->trainable)
            continue;
        const float *p = x + L->offset;
        for (size_t i = 0; i < L->count; i++)
            s += (double)p[i] * p[i];
    }
    return sqrt(s);
}

double clip_scale(double norm, double c) {
    double target = c * (1.0 - CLIP_MARGIN);
    return norm > target ? target / norm : 1.0;
}

double clip_to_norm(float *x, const ParamTable *t, double c) {
    double norm = clip_norm(x, t), scale = clip_scale(norm, c);
    if (scale == 1.0)
        return norm;
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        if (!L->trainable)
            continue;
        float *p = x + L->offset;
        for (size_t i = 0; i < L->count; i++)
            p[i] = (float)(p[i] * scale);
    }
    return norm;
}

FpStatus clip_noise_parse(const cJSON *params, const char *path, const ParamTable *t, ClipNoise *n, FpError *err) {
    static const char *const samplers[] = {"safe", "float", NULL};
    int choice;
    memset(n, 0, sizeof *n);
    FP_TRY(jv_choice(params, path, "sampler", samplers, 0, &choice, err));
    n->safe = choice == 0;
    n->d = t->n_trainable;
    return FP_OK;
}

static void free_table(void *t) {
    dgauss_wide_free(t);
    free(t);
}

FpStatus clip_noise_build(ClipNoise *n, double ratio, FpError *err) {
    if (!n->safe || n->table.hi)
        return FP_OK;
    double s = fmin(fmax(256.0 * sqrt((double)n->d) * fmax(ratio, 1.0), 64.0), DGAUSS_WIDE_SIGMA_MAX);
    // The table is a function of (law, S) alone, and building it is most of a defense's
    // create() (an audit of 100 runs built it 100 times): the memo holds one per key, read
    // only once built (dgauss_wide_add takes it const), so sharing draws the same values.
    char key[96];
    snprintf(key, sizeof key, "noise table: %s S %a", n->rounded ? "rounded" : "discrete", s);
    const DGaussWide *shared = defense_memo_get_object(n->memo, key);
    if (shared) {
        n->table = *shared;
        n->borrowed = 1;
        return FP_OK;
    }
    DGaussWide *t = calloc(1, sizeof *t);
    if (!t)
        return fp_fail(err, FP_ENOMEM, "out of memory for the noise table");
    FpStatus st = n->rounded ? dgauss_wide_init_rounded(t, s, err) : dgauss_wide_init(t, s, err);
    if (st != FP_OK) {
        free(t);
        return st;
    }
    shared = defense_memo_put_object(n->memo, key, t, free_table);
    if (shared) { // the memo's now (t itself, or another thread's of the same key)
        if (shared != t)
            free_table(t);
        n->table = *shared;
        n->borrowed = 1;
    } else { // no memo, or out of memory: this defense's own
        n->table = *t;
        free(t);
        n->borrowed = 0;
    }
    return FP_OK;
}

void clip_noise_free(ClipNoise *n) {
    if (n->safe && !n->borrowed)
        dgauss_wide_free(&n->table);
    if (n->borrowed)
        memset(&n->table, 0, sizeof n->table);
}

void clip_noise_add_at(const ClipNoise *n, float *x, size_t count, const RngStream *rng, uint64_t first, double std) {
    if (std <= 0)
        return;
    if (n->safe) {
        dgauss_wide_add(&n->table, std / n->table.sigma, x, count, rng, first);
        return;
    }
    for (size_t k = 0; k < count; k++)
        x[k] = clip_noise_one(n, x[k], first + k, rng, std);
}

void clip_noise_add(const ClipNoise *n, float *x, const ParamTable *t, const RngStream *rng, double std) {
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        if (L->trainable)
            clip_noise_add_at(n, x + L->offset, L->count, rng, L->offset, std);
    }
}

double clip_noise_inflation(const ClipNoise *n, double std, double sensitivity, int replace) {
    if (!n->safe)
        return 1;
    double g = std / n->table.sigma;
    return 1 + 1e-12 + g * sqrt((double)n->d) / (replace ? sensitivity : 2 * sensitivity);
}

void clip_noise_describe(const ClipNoise *n, cJSON *out) {
    cJSON_AddStringToObject(out, "sampler", n->safe ? "safe" : "float");
    if (n->safe) {
        cJSON_AddStringToObject(out, "noise_law", n->rounded ? "rounded gaussian" : "discrete gaussian");
        cJSON_AddNumberToObject(out, "noise_grid_steps", n->table.sigma);
    }
}

static const double clip_noise_shares[] = {CLIP_NOISE_SLACK, 0x1p-6, 0x1p-3, 0x1p-1};
#define CLIP_NOISE_SHARES ((int)(sizeof clip_noise_shares / sizeof clip_noise_shares[0]))

double clip_noise_delta_share(const ClipNoise *n, double eps, double draws, double delta) {
    if (!n->safe)
        return 0;
    for (int i = 0; i < CLIP_NOISE_SHARES; i++)
        if ((1 + exp(eps)) * draws * DGAUSS_WIDE_TV <= delta * clip_noise_shares[i])
            return clip_noise_shares[i];
    return CLIP_NOISE_SLACK;
}

double clip_noise_epsilon(const ClipNoise *n, double delta, double draws, ClipEpsilonAt at, const void *ctx,
                          long long rounds, int *covered) {
    *covered = 1;
    if (!n->safe)
        return at(ctx, rounds, delta);
    const double *shares = clip_noise_shares;
    double first = INFINITY;
    for (int i = 0; i < CLIP_NOISE_SHARES; i++) {
        double e = at(ctx, rounds, delta * (1 - shares[i]));
        if (i == 0)
            first = e;
        if (!isfinite(e) || clip_noise_delta_slack(n, e, draws) <= delta * shares[i])
            return e;
    }
    *covered = 0;
    return first;
}

double clip_noise_delta_slack(const ClipNoise *n, double eps, double draws) {
    return n->safe ? (1 + exp(eps)) * draws * n->table.tv : 0;
}

void clip_standard_account(PrivacyRecord *rec, DefenseMemo *memo, PldStepMemo *pld, double q, double sigma,
                           long long steps, double delta) {
    rec->standard_notion = CLIP_STANDARD_NOTION;
    if (steps <= 0 || q <= 0) {
        rec->epsilon_standard_rdp = rec->epsilon_standard_pld = 0;
        return;
    }
    if (sigma <= 0) {
        rec->epsilon_standard_rdp = rec->epsilon_standard_pld = INFINITY;
        return;
    }
    char key[160];
    snprintf(key, sizeof key, "standard account: q %a sigma %a steps %lld delta %a", q, sigma, steps, delta);
    double e[2] = {INFINITY, INFINITY};
    if (defense_memo_get(memo, key, e, 2)) {
        rec->epsilon_standard_rdp = e[0];
        rec->epsilon_standard_pld = e[1];
        return;
    }
    FpError pe = {0};
    FpStatus st[2] = {rdp_epsilon(q, sigma, steps, delta, &e[0], NULL, NULL),
                      pld_epsilon_memo(q, sigma, steps, delta, pld, &e[1], &pe)};
    // The PLD accountant refuses a loss that needs more grid points than it holds with
    // FP_ENOMEM too ("... use a coarser grid", a tiny multiplier): it states no figure
    // there, which is no allocation failure.
    if (st[1] == FP_ENOMEM && strstr(pe.msg, "coarser grid"))
        st[1] = FP_EUNSUPPORTED;
    for (int i = 0; i < 2; i++)
        e[i] = st[i] == FP_OK ? e[i] : st[i] == FP_ENOMEM ? NAN : INFINITY;
    rec->epsilon_standard_rdp = e[0];
    rec->epsilon_standard_pld = e[1];
    if (!isnan(e[0]) && !isnan(e[1]))   // an account that ran out of memory is not one to reuse
        defense_memo_put(memo, key, e, 2);
}

size_t clip_trainable_index(const ParamTable *t, uint32_t *idx) {
    size_t n = 0;
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        if (!L->trainable)
            continue;
        for (size_t i = 0; i < L->count; i++)
            idx[n++] = (uint32_t)(L->offset + i);
    }
    return n;
}

// Hoare-style quickselect with a median-of-three pivot: expected O(n), deterministic.
float clip_select_kth(float *buf, size_t n, size_t k) {
    long lo = 0, hi = (long)n - 1, kk = (long)k;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        float a = buf[lo], b = buf[mid], c = buf[hi];
        float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        long i = lo, j = hi;
        while (i <= j) {
            while (buf[i] < pivot)
                i++;
            while (buf[j] > pivot)
                j--;
            if (i <= j) {
                float tmp = buf[i];
                buf[i++] = buf[j];
                buf[j--] = tmp;
            }
        }
        // Now buf[lo..j] <= pivot <= buf[i..hi] and everything strictly between equals pivot.
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            return buf[kk];
    }
    return buf[kk];
}

void clip_top_k(const float *val, size_t n, size_t k, unsigned char *keep, float *scratch) {
    if (k >= n) {
        memset(keep, 1, n);
        return;
    }
    memset(keep, 0, n);
    if (k == 0)
        return;
    memcpy(scratch, val, n * sizeof(float));
    float kth = clip_select_kth(scratch, n, n - k); // the k-th largest value
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (val[i] > kth) {
            keep[i] = 1;
            kept++;
        }
    for (size_t i = 0; i < n && kept < k; i++)
        if (val[i] == kth) {
            keep[i] = 1;
            kept++;
        }
}

// The grid of the safe sampler's lattice sum for server noise std (0: no rounding).
static double sum_grid(const ClipNoise *noise, double std) { return std > 0 && noise->safe ? std / noise->table.sigma : 0; }

void clip_sum_add(const ParamTable *t, const ClipNoise *noise, double std, double *acc, const float *upload,
                  double weight) {
    double grid = sum_grid(noise, std);
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        for (size_t i = L->offset; i < L->offset + L->count; i++) {
            if (L->trainable && grid > 0)
                acc[i] += dgauss_grid_round(upload[i], grid);
            else if (L->trainable)
                acc[i] += upload[i];
            else
                acc[i] += weight * upload[i];
        }
    }
}

void clip_sum_finish(const ParamTable *t, const ClipNoise *noise, const RngStream *rng, double std, double m,
                     const double *acc, float *out) {
    double grid = sum_grid(noise, std);
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        for (size_t i = L->offset; i < L->offset + L->count; i++) {
            double s = acc[i];
            if (L->trainable && grid > 0)
                out[i] = (float)(grid * (s + (double)dgauss_wide_draw_at(&noise->table, rng, i)) / m);
            else if (L->trainable) {
                if (std > 0)
                    s += std * rng_normal_at(rng, i);
                out[i] = (float)(s / m);
            } else
                out[i] = (float)s;
        }
    }
}

// ---- client-level Gaussian calibration -------------------------------------------------

// The sampling kind of the server-noise account: fixed-size (Wang, Balle, Kasiviswanathan
// 2019 Thm 9, replace one) or Poisson, add/remove one: Mironov, Talwar, Zhang 2019 for
// both samplers, since the safe one draws the rounded Gaussian on the lattice sum (the
// release is post-processing of the continuous Gaussian mechanism, ClipNoise); the float
// one's record has no guarantee anyway.
static RdpSampling server_sampling(const ClipGaussian *g) {
    return g->cohort > 0 ? RDP_SAMPLING_FIXED : RDP_SAMPLING_POISSON;
}

// The sampling kind a target ε is calibrated under: the server-noise account; with client
// shares and a fixed cohort Thm 9 at m/N; with client shares and Bernoulli sampling the
// account of rounds whose cohort is not known, joint convexity at rate q (replace one),
// which holds whatever the counts: the record then gives the realised cohorts' figure
// (clip.h), below it for cohorts near qN, above for much larger ones.
static RdpSampling calibration_sampling(const ClipGaussian *g) {
    if (g->server_noise)
        return server_sampling(g);
    return g->cohort > 0 ? RDP_SAMPLING_FIXED : RDP_SAMPLING_POISSON_REPLACE;
}

// The corrected variant's multiplier in the account: z for add/remove (server noise,
// Poisson), z/2 for replace-one (fixed-size, and every client-share account: a replaced
// client moves the sum by up to 2C).
static double corrected_sigma(const ClipGaussian *g, double z) {
    return g->cohort > 0 || !g->server_noise ? z / 2 : z;
}

// The safe sampler's inflation of the aggregate's multiplier (ClipNoise): every draw on the
// aggregate has std zC (server noise; client shares, whose own grids are finer, are bounded
// by the k = 1 share) or σ (paper shares); one client's rounded vector moves by C/g + √d/2
// steps added or removed, and two vectors within 2C by 2C/g + √d: the same factor.
static double noise_phi(const ClipGaussian *g) {
    double std = g->paper ? g->paper_std : g->z * g->clip;
    return clip_noise_inflation(&g->noise, std, g->clip, 0);
}

// The round's cohort size: m with fixed-size sampling, the one end_round saw with
// Bernoulli sampling, -1 when unknown.
static int round_cohort(const ClipGaussian *g, int r) {
    if (g->cohort > 0)
        return g->cohort;
    return g->seen_k && r >= 0 && r < g->rounds ? g->seen_k[r] : -1;
}

// Draws of the discrete Gaussian table over `rounds` rounds that the released aggregates
// depend on: d per round on the server; with client shares the d of each of the round's k
// participants (the server's d when k = 0; every client's when k is unknown): clients not
// sampled draw nothing the release holds.
static double noise_draws(const ClipGaussian *g, int rounds) {
    if (g->server_noise)
        return (double)g->noise.d * rounds;
    double n = 0;
    for (int r = 0; r < rounds; r++) {
        int k = round_cohort(g, r);
        n += k < 0 ? g->n_clients : k > 0 ? k : 1;
    }
    return (double)g->noise.d * n;
}

// The draws one client's uploads hold over `rounds` rounds: its share's d per round.
static double upload_draws(const ClipGaussian *g, int rounds) { return (double)g->noise.d * rounds; }

// The multiplier of the sum of k >= 1 client shares for replace-one neighbours (2C), with
// the rounding's inflation, as if the sum were one Gaussian: corrected z/2 (k shares of
// z²C²/k), paper σ√k/2C.
static double share_sum_gauss_multiplier(const ClipGaussian *g, int k) {
    double m = g->paper ? g->paper_std * sqrt((double)k) / (2 * g->clip) : g->z / 2;
    return m / noise_phi(g);
}

// The same with the sum of k discrete Gaussians accounted (Kairouz, Liu, Steinke 2021
// Thm 1: dgauss_sum_multiplier, each share N_Z(0, S²) on d coordinates); the float
// sampler's continuous shares add up to one Gaussian exactly.
static double share_sum_multiplier(const ClipGaussian *g, int k) {
    double m = share_sum_gauss_multiplier(g, k);
    if (!g->noise.safe)
        return m;
    double r = dgauss_sum_multiplier(m, g->noise.table.sigma, k, (double)g->noise.d);
    return isnan(r) ? 0 : r;
}

// The sound ε of the released aggregates after `rounds` rounds (see clip.h).
static double aggregate_epsilon_at(const void *ctx, long long rounds, double delta) {
    const ClipGaussian *g = ctx;
    if (rounds <= 0 || g->q == 0)
        return 0;
    if (g->z <= 0)
        return INFINITY;
    double orders[RDP_EXTENDED_ORDER_COUNT], eps = INFINITY;
    int n = rdp_extended_orders(orders);
    RdpAccountant *acc = NULL;
    FpStatus st = rdp_accountant_create(orders, n, &acc, NULL);
    if (st != FP_OK)
        return st == FP_ENOMEM ? NAN : INFINITY;
    if (g->server_noise) {
        st = rdp_accountant_add_sampled(acc, server_sampling(g), g->q, corrected_sigma(g, g->z) / noise_phi(g), rounds,
                                        NULL);
    } else {
        // Client shares. Per round, given its cohort size k (fixed, or a Bernoulli count,
        // whose law does not depend on the data under replace-one neighbours; given k the
        // cohort is a uniform k-subset): Thm 9 of Wang et al. at rate k/N for the sum of k
        // shares; the rounds with one k form one phase. The shares' grid depends on k, so the
        // release shows k: an account over add/remove neighbours, where k reveals presence,
        // would not hold. Rounds of unknown k: the changed client is sampled with probability
        // q, the sum it joins has some k <= N (joint convexity over the rest of the cohort),
        // with the smallest multiplier of any k: k = 1 or N (monotone in k but for τ, which
        // grows with k and is taken at N).
        int N = g->n_clients;
        long long *count = calloc((size_t)N + 1, sizeof(long long)), unknown = 0;
        st = count ? FP_OK : FP_ENOMEM;
        for (long long r = 0; st == FP_OK && r < rounds; r++) {
            int k = round_cohort(g, (int)r);
            if (k >= 0 && k <= N)
                count[k]++;
            else
                unknown++;
        }
        for (int k = 1; st == FP_OK && k <= N; k++)
            if (count[k] > 0)
                st = rdp_accountant_add_sampled(acc, RDP_SAMPLING_FIXED, (double)k / N, share_sum_multiplier(g, k),
                                                count[k], NULL);
        if (st == FP_OK && unknown > 0) {
            double m = fmin(share_sum_gauss_multiplier(g, 1), share_sum_gauss_multiplier(g, N));
            if (g->noise.safe)
                m = dgauss_sum_multiplier(m, g->noise.table.sigma, N, (double)g->noise.d);
            st = isnan(m) ? FP_EPARAM
                          : rdp_accountant_add_sampled(acc, RDP_SAMPLING_POISSON_REPLACE, g->q, m, unknown, NULL);
        }
        free(count);
    }
    if (st == FP_OK)
        st = rdp_accountant_epsilon(acc, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL);
    rdp_accountant_free(acc);
    return st == FP_OK ? eps : st == FP_ENOMEM ? NAN : INFINITY;
}

// The upload observer's multipliers with client noise: round r's share std client_std(k_r)
// on a vector within 2C of any other (a Bernoulli round of unknown k counts as N), n of
// them written into ratio (room for rounds).
static int upload_ratios(const ClipGaussian *g, long long rounds, double *ratio) {
    int n = 0;
    for (int r = 0; r < rounds; r++) {
        int k = round_cohort(g, r);
        if (k < 0)
            k = g->n_clients;
        if (k > 0) {
            double std = clip_gaussian_client_std(g, k);
            ratio[n++] = std / (2 * g->clip) / clip_noise_inflation(&g->noise, std, 2 * g->clip, 1);
        }
    }
    return n;
}

// The upload observer's ε after `rounds` rounds with client noise (the client may take
// part in all), no amplification. Each upload is one discrete Gaussian mechanism, RDP
// α/(2s_r²) at every order (Canonne, Kamath, Steinke 2020 Thm 4): the curves add up and
// convert over a continuum of orders (gaussian_rdp_epsilon), proven. The exact composition
// of continuous Gaussians (Dong, Roth, Su 2022) is tighter but holds for the continuous
// law only: the float sampler's figure (whose record has no guarantee).
static double upload_epsilon_with(const void *ctx, long long rounds, double delta, int exact) {
    const ClipGaussian *g = ctx;
    if (g->server_noise)
        return INFINITY; // the server sees the clipped update itself
    if (rounds <= 0)
        return 0;
    double *ratio = malloc(sizeof(double) * (size_t)rounds), eps = INFINITY;
    if (!ratio)
        return NAN;
    int n = upload_ratios(g, rounds, ratio);
    FpStatus st = FP_OK;
    if (n == 0)
        eps = 0;
    else if (exact)
        st = gaussian_exact_epsilon(ratio, n, delta, &eps, NULL);
    else
        st = gaussian_rdp_epsilon(ratio, n, delta, &eps, NULL, NULL);
    free(ratio);
    return st == FP_OK ? eps : st == FP_ENOMEM ? NAN : INFINITY;
}

static double upload_epsilon_at(const void *ctx, long long rounds, double delta) {
    const ClipGaussian *g = ctx;
    return upload_epsilon_with(ctx, rounds, delta, !g->noise.safe);
}

static double aggregate_epsilon(const ClipGaussian *g, long long rounds, int *covered) {
    return clip_noise_epsilon(&g->noise, g->delta, noise_draws(g, (int)rounds), aggregate_epsilon_at, g, rounds,
                              covered);
}

static double upload_epsilon(const ClipGaussian *g, int rounds, int *covered) {
    return clip_noise_epsilon(&g->noise, g->delta, upload_draws(g, rounds), upload_epsilon_at, g, rounds, covered);
}

// A target ε meets the record: the z above solves a simpler account than the record
// reports (with client shares and Bernoulli sampling, joint convexity at rate q, for any
// counts; elsewhere without the sum's τ term or with the inflation bounded in closed form),
// so it lands below the target (1.698 for 2 in the demo federation). The record's own
// account after all rounds, on the cohorts the server's sampling draws (seen_k: counts of
// the seed alone, never of the data, so z a function of them is a fixed mechanism given
// them, and given its count a round's cohort is a uniform subset), is decreasing in z: the
// smallest z on a relative grid of 1e-7 whose record is at most the target. The record
// ends there when the rounds run with the cohorts planned; a round whose count differs is
// accounted as it ran.
// 1 when the record at g->z meets target; an account that ran out of memory (NaN) sets
// *oom, which ends the search (a bisection on NaN would settle on a wrong z).
static int record_meets(const ClipGaussian *g, double target, int *oom) {
    int covered;
    double e = aggregate_epsilon(g, g->rounds, &covered);
    *oom |= isnan(e);
    return e <= target;
}

static FpStatus calibrate_to_record(ClipGaussian *g, FpError *err) {
    const double target = g->epsilon;
    int oom = 0;
    double hi = g->z, lo;
    for (int i = 0; i < 60 && !record_meets(g, target, &oom) && !oom; i++)
        g->z = hi *= 1.25;
    if (!oom && record_meets(g, target, &oom)) {
        lo = hi;
        do {
            g->z = lo /= 1.5;
        } while (lo > 1e-6 && record_meets(g, target, &oom) && !oom);
        while (!oom && hi / lo > 1 + 1e-7) {
            g->z = sqrt(lo * hi);
            if (record_meets(g, target, &oom))
                hi = g->z;
            else
                lo = g->z;
        }
        g->z = hi;
    } // else no larger z meets it either: keep the search's (the record then says so)
    return oom ? fp_fail(err, FP_ENOMEM, "out of memory while accounting privacy") : FP_OK;
}

FpStatus clip_gaussian_parse(const cJSON *params, const char *path, const DefenseSetup *setup, int paper,
                             int allow_noise_site, ClipGaussian *g, FpError *err) {
    char p[256];
    memset(g, 0, sizeof *g);
    g->paper = paper;
    g->rounds = setup->rounds;
    g->memo = setup->memo;
    FP_TRY(pld_step_memo_create(&g->pld_memo, err));
    FP_TRY(jv_number(params, path, "clip", JV_OPTIONAL, 1.0, 0, 1, INFINITY, 0, &g->clip, err));
    FP_TRY(jv_number(params, path, "delta", JV_OPTIONAL, 1e-5, 0, 1, 1, 1, &g->delta, err));
    // The sampling the engine runs: a fixed cohort of m (rate m/N, replace-one
    // neighbours), or Bernoulli(q) (Poisson, add/remove).
    g->n_clients = setup->n_clients > 0 ? setup->n_clients : 1;
    g->cohort = setup->cohort_size > 0 ? (setup->cohort_size < g->n_clients ? setup->cohort_size : g->n_clients) : 0;
    g->q = g->cohort > 0 ? (double)g->cohort / g->n_clients : setup->sample_rate;
    g->m = g->cohort > 0 ? g->cohort : fmax(1.0, setup->sample_rate * g->n_clients);
    FP_TRY(clip_noise_parse(params, path, setup->params, &g->noise, err));
    g->noise.memo = setup->memo;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(params, "noise_multiplier");
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(params, "epsilon");
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(params, "sensitivity");
    const cJSON *site = cJSON_GetObjectItemCaseSensitive(params, "noise");
    g->server_noise = 0;
    if (allow_noise_site && !paper) {
        static const char *const sites[] = {"server", "client", NULL};
        int choice;
        FP_TRY(jv_choice(params, path, "noise", sites, 0, &choice, err));
        g->server_noise = choice == 0;
        // The server's one draw on the lattice sum: the rounded Gaussian (ClipNoise); client
        // shares must add up, so they keep the discrete Gaussian (Kairouz, Liu, Steinke 2021).
        g->noise.rounded = g->server_noise;
    } else if (site && allow_noise_site) {
        return fp_fail(err, FP_EPARAM, "%s: the paper variant adds the noise at each client",
                       jv_path(p, sizeof p, path, "noise"));
    }
    g->sensitivity = -1;
    g->epsilon = -1;
    if (paper) {
        if (nm)
            return fp_fail(err, FP_EPARAM, "%s: the paper variant is calibrated by epsilon (its eq. 2)",
                           jv_path(p, sizeof p, path, "noise_multiplier"));
        FP_TRY(jv_number(params, path, "epsilon", JV_REQUIRED, 0, 0, 1, INFINITY, 0, &g->epsilon, err));
        FP_TRY(jv_number(params, path, "sensitivity", JV_OPTIONAL, g->clip, 0, 1, INFINITY, 0, &g->sensitivity, err));
        g->paper_std = g->sensitivity / g->epsilon * sqrt(2.0 * (log(1.25) + g->epsilon));
        g->z = g->paper_std * sqrt(g->m) / g->clip;
    } else {
        if (se)
            return fp_fail(err, FP_EPARAM,
                           "%s: only the paper variant takes a sensitivity (the corrected one uses the clip)",
                           jv_path(p, sizeof p, path, "sensitivity"));
        if ((nm != NULL) == (ep != NULL))
            return fp_fail(err, FP_EPARAM, "%s: give exactly one of noise_multiplier and epsilon", path);
        if (nm) {
            FP_TRY(jv_number(params, path, "noise_multiplier", JV_REQUIRED, 0, 0, 0, INFINITY, 0, &g->z, err));
        } else {
            FP_TRY(jv_number(params, path, "epsilon", JV_REQUIRED, 0, 0, 1, INFINITY, 0, &g->epsilon, err));
            double orders[RDP_EXTENDED_ORDER_COUNT], sigma;
            int no = rdp_extended_orders(orders);
            FpError e2 = {0};
            double delta_acc =
                g->delta * (1 - clip_noise_delta_share(&g->noise, g->epsilon, noise_draws(g, g->rounds), g->delta));
            if (rdp_sigma_for_epsilon_sampled(calibration_sampling(g), g->q, g->rounds, delta_acc, g->epsilon,
                                              orders, no, &sigma, NULL, &e2) != FP_OK)
                return fp_fail(err, FP_EPARAM, "%s: %s", jv_path(p, sizeof p, path, "epsilon"), e2.msg);
            double z_eff = rdp_sampling_replace_one(calibration_sampling(g)) ? 2 * sigma : sigma;
            // The safe sampler's account divides z by φ(z) = 1 + a + b z (noise_phi): the
            // smallest z with z/φ(z) >= z_eff.
            FP_TRY(clip_noise_build(&g->noise, z_eff, err));
            double a = 1e-12, b = g->noise.safe ? sqrt((double)g->noise.d) / (2 * g->noise.table.sigma) : 0;
            if (b * z_eff >= 1)
                return fp_fail(err, FP_EPARAM, "%s: the grid of the safe sampler cannot reach epsilon %g with %zu "
                               "coordinates", jv_path(p, sizeof p, path, "epsilon"), g->epsilon, g->noise.d);
            g->z = z_eff * (1 + a) / (1 - b * z_eff) * (1 + 1e-12);
        }
    }
    FP_TRY(clip_noise_build(&g->noise, g->paper ? g->paper_std / g->clip : g->z, err));
    if (g->rounds > 0) {
        g->seen_k = malloc(sizeof(int) * (size_t)g->rounds);
        if (!g->seen_k)
            return fp_fail(err, FP_ENOMEM, "out of memory for %d rounds", g->rounds);
        // Until end_round says what ran, a round's cohort is the one the server's sampling
        // draws from the seed (client shares, Bernoulli), else unknown.
        int plan = !g->server_noise && g->cohort == 0 && setup->planned_cohorts;
        for (int r = 0; r < g->rounds; r++)
            g->seen_k[r] = plan ? setup->planned_cohorts[r] : -1;
    }
    if (!paper && g->epsilon > 0 && g->rounds > 0)
        FP_TRY(calibrate_to_record(g, err));
    if (g->server_noise)
        g->server_std = g->z * g->clip;
    return FP_OK;
}

void clip_gaussian_free(ClipGaussian *g) {
    free(g->seen_k);
    g->seen_k = NULL;
    pld_step_memo_free(g->pld_memo);
    g->pld_memo = NULL;
    clip_noise_free(&g->noise);
    g->noise.safe = 0;
}

double clip_gaussian_client_std(const ClipGaussian *g, int k) {
    if (g->server_noise)
        return 0;
    if (g->paper)
        return g->paper_std;
    return g->z * g->clip / sqrt(k >= 1 ? (double)k : 1.0);
}

double clip_gaussian_server_std(const ClipGaussian *g, int k) {
    if (g->server_noise)
        return g->server_std;
    return !g->paper && k == 0 ? g->z * g->clip : 0;
}

void clip_gaussian_end_round(ClipGaussian *g, int round, int k) {
    if (g->seen_k && round >= 0 && round < g->rounds)
        g->seen_k[round] = k;
}

double clip_gaussian_epsilon(const ClipGaussian *g, long long rounds) {
    int covered;
    return aggregate_epsilon(g, rounds, &covered);
}

void clip_gaussian_privacy(const ClipGaussian *g, int rounds_done, PrivacyRecord *rec) {
    int covered_sound, covered_upload;
    double sound = aggregate_epsilon(g, rounds_done, &covered_sound);
    *rec = (PrivacyRecord){.unit = "client", .delta = g->delta, .sigma = g->z, .epsilon_total_sound = sound,
                           .guarantee = GUARANTEE_PROVEN};
    // The notion by (paper, fixed cohort, server noise), each also with the safe sampler's
    // sentence (what makes the same accounts proven for the discrete Gaussian, ClipNoise).
#define CLIP_SAFE_NOTE                                                                                       \
    "; the noise is the discrete Gaussian on a grid (Canonne, Kamath, Steinke 2020), each multiplier divided " \
    "by the rounding's inflation (config rounding_inflation) and delta holding the table's distance to it; "   \
    "Poisson sampling by the general bound of Zhu & Wang 2019 (Thm 5), a sum of k clients' shares by "        \
    "Kairouz, Liu, Steinke 2021 (Thm 1)"
#define CLIP_ROUNDED_NOTE                                                                                    \
    "; the noise is the rounded Gaussian round(N(0, S^2)) on a grid added to the lattice sum of the rounded "   \
    "uploads: x + round(Z) = round(x + Z), post-processing of the continuous Gaussian mechanism on x, so the "  \
    "continuous account holds, the multiplier divided by the rounding's inflation (config rounding_inflation) " \
    "and delta holding the table's distance to the rounded law"
#define CLIP_NOTION(text) {text, text CLIP_SAFE_NOTE, text CLIP_ROUNDED_NOTE}
    static const char *const notions[6][3] = {
        CLIP_NOTION("client-level (eps, delta)-DP of the released aggregates, replace one client: per round, given "
                    "its cohort size k (Bernoulli, independent of the data; the shares' grid shows it), the clients' "
                    "shares, sized for k, add up to N(0, z^2 C^2) (the server adds it when k = 0); Wang, Balle, "
                    "Kasiviswanathan 2019 Thm 9 at rate k/N, multiplier z/2; Balle et al. 2020 conversion"),
        CLIP_NOTION("client-level (eps, delta)-DP of the released aggregates, add/remove one client: RDP of the "
                    "Poisson-subsampled Gaussian (rate q, multiplier z; the server's noise also in rounds nobody "
                    "takes part), Balle et al. 2020 conversion"),
        CLIP_NOTION("client-level (eps, delta)-DP of the released aggregates, replace one client: the clients' shares, "
                    "sized for the cohort, add up to the sum's N(0, z^2 C^2); RDP of the Gaussian (multiplier z/2 for "
                    "the 2C a replaced client moves the sum) on a fixed-size cohort without replacement (Wang, Balle, "
                    "Kasiviswanathan 2019 Thm 9, rate m/N), Balle et al. 2020 conversion"),
        CLIP_NOTION("client-level (eps, delta)-DP of the released aggregates, replace one client: RDP of the Gaussian "
                    "(multiplier z on the sum, z/2 for the 2C a replaced client moves it) on a fixed-size cohort "
                    "without replacement (Wang, Balle, Kasiviswanathan 2019 Thm 9, rate m/N), Balle et al. 2020 "
                    "conversion"),
        CLIP_NOTION("client-level (eps, delta)-DP of the released aggregates, replace one client: per round, given its "
                    "cohort size k (Bernoulli, independent of the data) the sum carries N(0, k sigma^2): Wang, Balle, "
                    "Kasiviswanathan 2019 Thm 9 at rate k/N, multiplier sigma sqrt(k)/2C; Balle et al. 2020 "
                    "conversion"),
        CLIP_NOTION("client-level (eps, delta)-DP of the released aggregates, replace one client: the sum carries the "
                    "m clients' shares, N(0, m sigma^2); RDP of the Gaussian on a fixed-size cohort without "
                    "replacement (Wang, Balle, Kasiviswanathan 2019 Thm 9, rate m/N, multiplier sigma sqrt(m)/2C), "
                    "Balle et al. 2020 conversion"),
    };
#undef CLIP_NOTION
#undef CLIP_ROUNDED_NOTE
#undef CLIP_SAFE_NOTE
    int which = g->paper ? 4 + (g->cohort > 0) : 2 * (g->cohort > 0) + g->server_noise;
    rec->sound_notion = notions[which][g->noise.safe ? 1 + g->noise.rounded : 0];
    clip_standard_account(rec, g->memo, g->pld_memo, g->q, g->z, rounds_done, g->delta);
    rec->epsilon_total_upload = upload_epsilon(g, rounds_done, &covered_upload);
    rec->upload_notion =
        g->server_noise
            ? "none: the server sees each client's clipped update without noise (the noise is added to the sum)"
        : g->noise.safe
            ? "(eps, delta)-DP of one client's uploads against the server or an eavesdropper who knows it took part, "
              "any change of its data: the discrete Gaussian with its share's std on a vector within 2C of any other "
              "(Canonne, Kamath, Steinke 2020 Thm 4, with the rounding's inflation), in every round, RDP composed "
              "over a continuum of orders; no amplification"
            : "(eps, delta)-DP of one client's uploads against the server or an eavesdropper who knows it took part, "
              "any change of its data: the Gaussian with its share's std on a vector within 2C of any other, in "
              "every round, composed exactly (Dong, Roth, Su 2022); no amplification";
    // Two records, each labelled by its own proof: the table's slack that one account
    // cannot fit in δ makes that account conditional, not the other.
    rec->upload_own_label = 1;
    rec->upload_guarantee = GUARANTEE_PROVEN;
    if (!g->noise.safe) {
        rec->guarantee = rec->upload_guarantee = GUARANTEE_NONE;
        privacy_assume(rec, CLIP_NOISE_FLOAT_REASON);
        privacy_assume_upload(rec, CLIP_NOISE_FLOAT_REASON);
    }
    if (g->server_noise) {
        rec->upload_guarantee = GUARANTEE_NONE;
        privacy_assume_upload(rec, "the server sees each client's clipped update without noise");
    }
    if (g->noise.safe && !covered_sound)
        privacy_assume(rec, CLIP_NOISE_SLACK_ASSUMPTION);
    if (g->noise.safe && !g->server_noise && !covered_upload)
        privacy_assume_upload(rec, CLIP_NOISE_SLACK_ASSUMPTION);
    if (g->paper) {
        rec->epsilon_round_nominal = g->epsilon;
        rec->epsilon_total_nominal = g->epsilon * rounds_done;
        rec->nominal_notion = "(eps, e^-eps)-DP per round by the DP-FedASGP paper's eq. 2 (classic Gaussian "
                              "bound, sensitivity dS), sequential composition over rounds (the paper composes none)";
    } else {
        rec->epsilon_round_nominal = aggregate_epsilon(g, 1, &covered_sound);
        rec->epsilon_total_nominal = sound;
        rec->nominal_notion = "the same RDP account (the corrected variant claims what it can prove)";
    }
}

FpStatus clip_gaussian_describe(const ClipGaussian *g, cJSON *out) {
    cJSON_AddStringToObject(out, "variant", g->paper ? "paper" : "corrected");
    cJSON_AddNumberToObject(out, "clip", g->clip);
    cJSON_AddStringToObject(out, "noise", g->server_noise ? "server" : "client");
    cJSON_AddNumberToObject(out, "noise_multiplier", g->z);
    if (g->server_noise)
        cJSON_AddNumberToObject(out, "server_noise_std", g->server_std);
    else if (g->paper)
        cJSON_AddNumberToObject(out, "client_noise_std", g->paper_std);
    else
        cJSON_AddStringToObject(out, "client_noise_std", "z*C/sqrt(k), k the round's participants");
    cJSON_AddNumberToObject(out, "delta", g->delta);
    clip_noise_describe(&g->noise, out);
    if (g->noise.safe)   // the accounts' multipliers are the continuous ones divided by this (ClipNoise)
        cJSON_AddNumberToObject(out, "rounding_inflation", noise_phi(g));
    if (g->epsilon > 0)
        cJSON_AddNumberToObject(out, g->paper ? "epsilon_per_round" : "epsilon_target", g->epsilon);
    if (g->paper)
        cJSON_AddNumberToObject(out, "sensitivity", g->sensitivity);
    cJSON_AddStringToObject(out, "sampling", g->cohort > 0 ? "fixed" : "bernoulli");
    cJSON_AddNumberToObject(out, "accountant_sample_rate", g->q);
    cJSON_AddNumberToObject(out, "aggregation_denominator", g->m);
    const char *acct;
    if (!g->server_noise && g->cohort == 0)
        acct = "RDP, per round its cohort k as a fixed-size cohort without replacement (Wang, Balle, Kasiviswanathan "
               "2019 Thm 9, rate k/N), replace one client, orders 1.1..63 and 64..1024, Balle et al. 2020";
    else if (g->paper || g->cohort > 0 || !g->server_noise)
        acct = "RDP, fixed-size cohort without replacement (Wang, Balle, Kasiviswanathan 2019 Thm 9), replace one "
               "client, orders 1.1..63 and 64..1024, Balle et al. 2020";
    else
        acct = "RDP Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019, add/remove one client; the safe "
               "sampler's rounded Gaussian is post-processing of it), orders 1.1..63 and 64..1024, Balle et al. 2020";
    cJSON_AddStringToObject(out, "accountant", acct);
    double e = clip_gaussian_epsilon(g, g->rounds);
    if (isnan(e))   // out of memory: never a figure (fl/defense.h)
        return FP_ENOMEM;
    jnum_add(out, "epsilon_after_all_rounds", e);
    return FP_OK;
}

void clip_gaussian_upload_params(const ClipGaussian *g, int k, UploadParams *out) {
    *out = upload_params_none();
    out->noise_scale = clip_gaussian_client_std(g, k);
    out->noise = out->noise_scale > 0 ? "gaussian" : NULL;
    out->server_noise_scale = clip_gaussian_server_std(g, k);
    out->clip_norm = "l2";
    out->clip = g->clip;
    out->epsilon = g->paper ? g->epsilon : -1;
}
