// Clipping, Gaussian noise and order statistics over trainable elements (see clip.h).
#include "defenses/clip.h"

#include <math.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/accountant.h"

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

double clip_to_norm(float *x, const ParamTable *t, double c) {
    double norm = clip_norm(x, t);
    if (norm <= c || norm == 0)
        return norm;
    float scale = (float)(c / norm);
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        if (!L->trainable)
            continue;
        float *p = x + L->offset;
        for (size_t i = 0; i < L->count; i++)
            p[i] *= scale;
    }
    return norm;
}

void clip_add_gaussian(float *x, const ParamTable *t, const RngStream *rng, double std) {
    if (std <= 0)
        return;
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        if (!L->trainable)
            continue;
        for (size_t i = L->offset; i < L->offset + L->count; i++)
            x[i] = (float)(x[i] + std * rng_normal_at(rng, i));
    }
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

void clip_aggregate_fixed(const float *const *uploads, const double *weights, int k, double m,
                          const ParamTable *t, const RngStream *rng, double std, float *out) {
    for (int l = 0; l < t->n_layers; l++) {
        const ParamLayer *L = &t->layers[l];
        for (size_t i = L->offset; i < L->offset + L->count; i++) {
            double s = 0;
            if (L->trainable) {
                for (int c = 0; c < k; c++)
                    s += uploads[c][i];
                if (std > 0)
                    s += std * rng_normal_at(rng, i);
                out[i] = (float)(s / m);
            } else {
                for (int c = 0; c < k; c++)
                    s += weights[c] * uploads[c][i];
                out[i] = (float)s;
            }
        }
    }
}

// ---- client-level Gaussian calibration -------------------------------------------------

// The sound ε of `rounds` rounds of the subsampled Gaussian on the extended grid (the
// default grid cannot certify ε below about 0.1 at δ = 1e-5).
static double rdp_eps_extended(double q, double z, long long rounds, double delta) {
    if (rounds <= 0 || q == 0)
        return 0;
    if (z <= 0)
        return INFINITY;
    double orders[RDP_EXTENDED_ORDER_COUNT], eps = INFINITY;
    int n = rdp_extended_orders(orders);
    RdpAccountant *acc = NULL;
    if (rdp_accountant_create(orders, n, &acc, NULL) == FP_OK && rdp_accountant_add(acc, q, z, rounds, NULL) == FP_OK)
        if (rdp_accountant_epsilon(acc, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL) != FP_OK)
            eps = INFINITY;
    rdp_accountant_free(acc);
    return eps;
}

FpStatus clip_gaussian_parse(const cJSON *params, const char *path, const DefenseSetup *setup, int paper,
                             int allow_noise_site, ClipGaussian *g, FpError *err) {
    char p[256];
    memset(g, 0, sizeof *g);
    g->paper = paper;
    g->rounds = setup->rounds;
    FP_TRY(jv_number(params, path, "clip", JV_OPTIONAL, 1.0, 0, 1, INFINITY, 0, &g->clip, err));
    FP_TRY(jv_number(params, path, "delta", JV_OPTIONAL, 1e-5, 0, 1, 1, 1, &g->delta, err));
    // The accountant's rate: Bernoulli sampling includes a client with probability q,
    // fixed-size sampling with m/N, m = max(1, round(qN)) (accounted as Poisson at that
    // rate, the usual approximation). Take the larger.
    int n = setup->n_clients > 0 ? setup->n_clients : 1;
    double m_fixed = fmax(1.0, (double)lround(setup->sample_rate * n));
    g->q = fmin(1.0, fmax(setup->sample_rate, m_fixed / n));
    g->m = fmax(1.0, setup->sample_rate * n);
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
        g->client_std = g->sensitivity / g->epsilon * sqrt(2.0 * (log(1.25) + g->epsilon));
        g->z = g->client_std * sqrt(g->m) / g->clip;
        return FP_OK;
    }
    if (se)
        return fp_fail(err, FP_EPARAM, "%s: only the paper variant takes a sensitivity (the corrected one uses the clip)",
                       jv_path(p, sizeof p, path, "sensitivity"));
    if ((nm != NULL) == (ep != NULL))
        return fp_fail(err, FP_EPARAM, "%s: give exactly one of noise_multiplier and epsilon", path);
    if (nm) {
        FP_TRY(jv_number(params, path, "noise_multiplier", JV_REQUIRED, 0, 0, 0, INFINITY, 0, &g->z, err));
    } else {
        FP_TRY(jv_number(params, path, "epsilon", JV_REQUIRED, 0, 0, 1, INFINITY, 0, &g->epsilon, err));
        double orders[RDP_EXTENDED_ORDER_COUNT];
        int no = rdp_extended_orders(orders);
        FpError e2 = {0};
        if (rdp_sigma_for_epsilon(g->q, g->rounds, g->delta, g->epsilon, orders, no, &g->z, NULL, &e2) != FP_OK)
            return fp_fail(err, FP_EPARAM, "%s: %s", jv_path(p, sizeof p, path, "epsilon"), e2.msg);
    }
    if (g->server_noise)
        g->server_std = g->z * g->clip;
    else
        g->client_std = g->z * g->clip / sqrt(g->m);
    return FP_OK;
}

double clip_gaussian_epsilon(const ClipGaussian *g, long long rounds) {
    return rdp_eps_extended(g->q, g->z, rounds, g->delta);
}

void clip_gaussian_privacy(const ClipGaussian *g, int rounds_done, PrivacyRecord *rec) {
    double sound = clip_gaussian_epsilon(g, rounds_done);
    *rec = (PrivacyRecord){.unit = "client", .delta = g->delta, .sigma = g->z, .epsilon_total_sound = sound};
    rec->sound_notion = g->server_noise
        ? "client-level (eps, delta)-DP of the released aggregates (add/remove one client): RDP of the "
          "Poisson-subsampled Gaussian (rate q, multiplier z), Balle et al. 2020 conversion"
        : "client-level (eps, delta)-DP of the aggregate (add/remove one client): RDP of the Poisson-subsampled "
          "Gaussian (rate q, multiplier z), Balle et al. 2020 conversion; the clients' noise shares add up to z "
          "only in the sum, so one upload alone carries multiplier z/sqrt(m) (secure aggregation assumed)";
    if (g->paper) {
        rec->epsilon_round_nominal = g->epsilon;
        rec->epsilon_total_nominal = g->epsilon * rounds_done;
        rec->nominal_notion = "(eps, e^-eps)-DP per round by the DP-FedASGP paper's eq. 2 (classic Gaussian "
                              "bound, sensitivity dS), sequential composition over rounds (the paper composes none)";
    } else {
        rec->epsilon_round_nominal = clip_gaussian_epsilon(g, 1);
        rec->epsilon_total_nominal = sound;
        rec->nominal_notion = "the same RDP account (the corrected variant claims what it can prove)";
    }
}

void clip_gaussian_describe(const ClipGaussian *g, cJSON *out) {
    cJSON_AddStringToObject(out, "variant", g->paper ? "paper" : "corrected");
    cJSON_AddNumberToObject(out, "clip", g->clip);
    cJSON_AddStringToObject(out, "noise", g->server_noise ? "server" : "client");
    cJSON_AddNumberToObject(out, "noise_multiplier", g->z);
    cJSON_AddNumberToObject(out, "client_noise_std", g->client_std);
    cJSON_AddNumberToObject(out, "server_noise_std", g->server_std);
    cJSON_AddNumberToObject(out, "delta", g->delta);
    if (g->epsilon > 0)
        cJSON_AddNumberToObject(out, g->paper ? "epsilon_per_round" : "epsilon_target", g->epsilon);
    if (g->paper)
        cJSON_AddNumberToObject(out, "sensitivity", g->sensitivity);
    cJSON_AddNumberToObject(out, "accountant_sample_rate", g->q);
    cJSON_AddNumberToObject(out, "aggregation_denominator", g->m);
    cJSON_AddStringToObject(out, "accountant", "RDP subsampled Gaussian, orders 1.1..63 and 64..1024, Balle et al. 2020");
    double e = clip_gaussian_epsilon(g, g->rounds);
    if (isfinite(e))
        cJSON_AddNumberToObject(out, "epsilon_after_all_rounds", e);
    else
        cJSON_AddNullToObject(out, "epsilon_after_all_rounds");
}
