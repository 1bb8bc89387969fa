// The empirical audit of a scalar mechanism (audits/mechanism.h): moments against the closed
// forms, and a Clopper-Pearson lower bound on ε from output histograms.
#include "audits/mechanism.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/json_number.h"
#include "core/rng.h"

AuditConfig audit_config_default(void) {
    return (AuditConfig){.samples = 10000000, .seed = 1, .bins = 50, .alpha = 0.05, .pilot = 0};
}

// ---- progress -------------------------------------------------------------------------

FpProgress audit_progress_start(FILE *f, const char *what, long long total) {
    return fp_progress_start(f, total, AUDIT_PROGRESS_FIRST_SECONDS, AUDIT_PROGRESS_SECONDS, "draws", "audit %s", what);
}

// ---- Clopper-Pearson ----------------------------------------------------------------

// Lentz's continued fraction for I_x(a, b) (Numerical Recipes §6.4, betacf): converges
// fast for x < (a+1)/(a+b+2), in O(sqrt(max(a, b))) terms.
static double beta_cf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-15;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny)
        d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 1000000; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        d = fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        d = fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps)
            break;
    }
    return h;
}

double audit_beta_inc(double a, double b, double x) {
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1) / (a + b + 2))
        return exp(lbt) * beta_cf(a, b, x) / a;
    return 1 - exp(lbt) * beta_cf(b, a, 1 - x) / b;
}

// P[Bin(n, p) >= k] = I_p(k, n-k+1): increasing in p.
static double tail_ge(long long k, long long n, double p) { return audit_beta_inc((double)k, (double)(n - k + 1), p); }
// P[Bin(n, p) <= k] = I_{1-p}(n-k, k+1): decreasing in p.
static double tail_le(long long k, long long n, double p) { return audit_beta_inc((double)(n - k), (double)(k + 1), 1 - p); }

double audit_cp_lower(long long k, long long n, double alpha) {
    if (k <= 0)
        return 0;
    if (k >= n)
        return pow(alpha, 1.0 / (double)n);
    // The p with P[Bin(n, p) >= k] = alpha lies below k/n: bracket near it, then bisect,
    // returning the low end (never above the exact bound).
    double ph = (double)k / (double)n, w = 12 * sqrt(ph * (1 - ph) / (double)n) + 40.0 / (double)n;
    double lo = ph - w > 0 ? ph - w : 0, hi = ph;
    if (tail_ge(k, n, lo) > alpha)
        lo = 0;
    for (int it = 0; it < 200 && hi - lo > 1e-13 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (tail_ge(k, n, mid) > alpha)
            hi = mid;
        else
            lo = mid;
    }
    return lo;
}

double audit_cp_upper(long long k, long long n, double alpha) {
    if (k >= n)
        return 1;
    if (k <= 0)
        return -expm1(log(alpha) / (double)n);   // 1 - alpha^(1/n)
    double ph = (double)k / (double)n, w = 12 * sqrt(ph * (1 - ph) / (double)n) + 40.0 / (double)n;
    double lo = ph, hi = ph + w < 1 ? ph + w : 1;
    if (tail_le(k, n, hi) > alpha)
        hi = 1;
    for (int it = 0; it < 200 && hi - lo > 1e-13 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (tail_le(k, n, mid) > alpha)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

// ---- sampling -------------------------------------------------------------------------

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// Number of edges <= y: the bin of y (bin k is [e_{k-1}, e_k)).
static int bin_of(const float *edges, int n_edges, float y) {
    int lo = 0, hi = n_edges;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (edges[mid] <= y)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#define AUDIT_CHUNK 65536

// Draws n outputs at input x from stream s into the accumulators.
static void draw(const Mech *m, float x, long long n, const RngStream *s, float *buf, double shift, double *s1,
                 double *s2, float *mn, float *mx, const float *edges, int n_edges, long long *counts,
                 FpProgress *pr) {
    for (long long done = 0; done < n; done += AUDIT_CHUNK) {
        size_t len = (size_t)(n - done < AUDIT_CHUNK ? n - done : AUDIT_CHUNK);
        for (size_t i = 0; i < len; i++)
            buf[i] = x;
        mech_perturb(m, buf, len, s, (uint64_t)done);
        double a1 = 0, a2 = 0;
        for (size_t i = 0; i < len; i++) {
            double d = (double)buf[i] - shift;
            a1 += d;
            a2 += d * d;
            *mn = buf[i] < *mn ? buf[i] : *mn;
            *mx = buf[i] > *mx ? buf[i] : *mx;
        }
        *s1 += a1;
        *s2 += a2;
        if (counts)
            for (size_t i = 0; i < len; i++)
                counts[bin_of(edges, n_edges, buf[i])]++;
        fp_progress_add(pr, (long long)len);
    }
}

typedef struct {
    double opt;             // ln((k_a/N - δ) / q̂): an upper bound on the set's ε_LB
    int a, b, lo, hi;       // inputs and bins lo..hi
    long long ka, kb;
} Candidate;

static int cmp_candidate(const void *x, const void *y) {
    double a = ((const Candidate *)x)->opt, b = ((const Candidate *)y)->opt;
    return (a < b) - (a > b);
}

static float input_as_used(const Mech *m, double x) { return mech_input(m, x); }

FpStatus audit_inputs(const Mech *m, const double *given, int n_given, double *out, int *n_out, FpError *err) {
    if (!given || n_given == 0) {
        mech_default_inputs(m, &out[0], &out[1]);
        *n_out = 2;
        return FP_OK;
    }
    if (n_given < 2 || n_given > AUDIT_MAX_INPUTS)
        return fp_fail(err, FP_EPARAM, "audit.inputs: need 2 to %d inputs, got %d", AUDIT_MAX_INPUTS, n_given);
    for (int i = 0; i < n_given; i++) {
        if (!isfinite(given[i]) || fabs(given[i]) > 1e30)
            return fp_fail(err, FP_EPARAM, "audit.inputs[%d]: must be a finite number", i);
        out[i] = given[i];
    }
    *n_out = n_given;
    return FP_OK;
}

FpStatus audit_run(const Mech *m, const AuditConfig *cfg, AuditResult *res, FpError *err) {
    double t0 = fp_monotonic_seconds();
    memset(res, 0, sizeof *res);
    if (cfg->samples < 100 || cfg->samples > AUDIT_MAX_SAMPLES)
        return fp_fail(err, FP_EPARAM, "audit.samples: must be in [100, %lld], got %lld", AUDIT_MAX_SAMPLES,
                       cfg->samples);
    if (cfg->bins < 2 || cfg->bins > 400)
        return fp_fail(err, FP_EPARAM, "audit.bins: must be in [2, 400], got %d", cfg->bins);
    if (!(cfg->alpha > 0 && cfg->alpha < 1))
        return fp_fail(err, FP_EPARAM, "audit.alpha: must be in (0, 1), got %g", cfg->alpha);
    double inputs[AUDIT_MAX_INPUTS];
    int n_in;
    FP_TRY(audit_inputs(m, cfg->inputs, cfg->n_inputs, inputs, &n_in, err));
    long long N = cfg->samples;
    long long pilot = cfg->pilot > 0 ? cfg->pilot : (N < 200000 ? N : 200000);
    res->n_inputs = n_in;
    res->samples = N;
    res->seed = cfg->seed;
    res->alpha = cfg->alpha;
    res->epsilon_claimed = m->spec.eps;
    res->delta = m->spec.ops->takes_delta ? m->spec.delta : 0;

    float *buf = malloc(sizeof(float) * AUDIT_CHUNK);
    float *pool = malloc(sizeof(float) * (size_t)pilot * (size_t)n_in);
    float *edges = malloc(sizeof(float) * (size_t)cfg->bins);
    long long *counts = calloc((size_t)n_in * (size_t)(cfg->bins + 1), sizeof(long long));
    if (!buf || !pool || !edges || !counts) {
        free(buf);
        free(pool);
        free(edges);
        free(counts);
        return fp_fail(err, FP_ENOMEM, "audit: out of memory for %lld pilot samples", pilot * n_in);
    }

    // Pilot: the bin edges, from streams independent of the main sample.
    for (int i = 0; i < n_in; i++) {
        RngStream s = rng_stream(cfg->seed, RNG_AUDIT, (uint32_t)i, 1);
        float *p = pool + (size_t)i * (size_t)pilot;
        float x = input_as_used(m, inputs[i]);
        for (long long j = 0; j < pilot; j++)
            p[j] = x;
        mech_perturb(m, p, (size_t)pilot, &s, 0);
    }
    size_t np = (size_t)pilot * (size_t)n_in;
    qsort(pool, np, sizeof(float), cmp_float);
    int n_edges = 0;
    for (int k = 1; k < cfg->bins; k++) {
        float e = pool[(size_t)((double)k / cfg->bins * (double)np)];
        if (n_edges == 0 || e > edges[n_edges - 1])
            edges[n_edges++] = e;
    }
    int nb = n_edges + 1;
    res->bins = nb;
    free(pool);

    // Main sample and moments.
    FpProgress pr = audit_progress_start(cfg->progress, "moments and epsilon", N * n_in);
    res->pass_moments = 1;
    double sxx = 0, sxm = 0, sxt = 0, sxv = 0;
    for (int i = 0; i < n_in; i++) {
        AuditInput *r = &res->in[i];
        float xf = input_as_used(m, inputs[i]);
        r->input = inputs[i];
        r->input_used = xf;
        r->mean_theory = mech_mean(m, xf);
        r->variance_theory = mech_variance(m, xf);
        r->variance_claimed = mech_variance_claimed(m, xf);
        MechLaw law;
        mech_law(m, xf, &law);
        double mu4 = law_central_moment(&law, 4);
        RngStream s = rng_stream(cfg->seed, RNG_AUDIT, (uint32_t)i, 0);
        double s1 = 0, s2 = 0;
        float mn = INFINITY, mx = -INFINITY;
        draw(m, xf, N, &s, buf, r->mean_theory, &s1, &s2, &mn, &mx, edges, n_edges, counts + (size_t)i * nb, &pr);
        r->mean = r->mean_theory + s1 / (double)N;
        r->variance = (s2 - s1 * s1 / (double)N) / (double)(N - 1);
        r->min = mn;
        r->max = mx;
        double se_m = sqrt(r->variance_theory / (double)N);
        double v4 = mu4 - r->variance_theory * r->variance_theory;
        double se_v = sqrt((v4 > 0 ? v4 : 0) / (double)N);
        double dm = r->mean - r->mean_theory, dv = r->variance - r->variance_theory;
        r->z_mean = se_m > 0 ? dm / se_m : (fabs(dm) <= 1e-12 * (1 + fabs(r->mean_theory)) ? 0 : INFINITY);
        r->z_variance = se_v > 0 ? dv / se_v : (fabs(dv) <= 1e-12 * (1 + r->variance_theory) ? 0 : INFINITY);
        if (!(fabs(r->z_mean) <= 6) || !(fabs(r->z_variance) <= 6))
            res->pass_moments = 0;
        r->bias_factor = xf != 0 ? r->mean / xf : NAN;
        r->bias_factor_theory = xf != 0 ? r->mean_theory / xf : NAN;
        sxx += (double)xf * xf;
        sxm += (double)xf * r->mean;
        sxt += (double)xf * r->mean_theory;
        sxv += (double)xf * xf * r->variance_theory;
    }
    res->bias_factor = sxx > 0 ? sxm / sxx : NAN;
    res->bias_factor_theory = sxx > 0 ? sxt / sxx : NAN;
    res->bias_factor_se = sxx > 0 ? sqrt(sxv / (double)N) / sxx : NAN;
    free(buf);

    // ε lower bound over ordered pairs and contiguous bin ranges.
    long long sets = (long long)nb * (nb + 1) / 2, pairs = (long long)n_in * (n_in - 1);
    res->sets_tested = sets * pairs;
    double ae = cfg->alpha / (2.0 * (double)res->sets_tested);
    res->alpha_per_bound = ae;
    double delta = res->delta, q0 = audit_cp_upper(0, N, ae);
    Candidate *cand = malloc(sizeof(Candidate) * (size_t)res->sets_tested);
    long long *pre = malloc(sizeof(long long) * (size_t)(nb + 1) * (size_t)n_in);
    if (!cand || !pre) {
        free(cand);
        free(pre);
        free(edges);
        free(counts);
        return fp_fail(err, FP_ENOMEM, "audit: out of memory for %lld candidate sets", res->sets_tested);
    }
    for (int i = 0; i < n_in; i++) {
        long long *p = pre + (size_t)i * (nb + 1);
        p[0] = 0;
        for (int b = 0; b < nb; b++)
            p[b + 1] = p[b] + counts[(size_t)i * nb + b];
    }
    long long nc = 0;
    for (int a = 0; a < n_in; a++)
        for (int b = 0; b < n_in; b++) {
            if (a == b)
                continue;
            const long long *pa = pre + (size_t)a * (nb + 1), *pb = pre + (size_t)b * (nb + 1);
            for (int lo = 0; lo < nb; lo++)
                for (int hi = lo; hi < nb; hi++) {
                    long long ka = pa[hi + 1] - pa[lo], kb = pb[hi + 1] - pb[lo];
                    double pa_hat = (double)ka / (double)N - delta;
                    double qb = kb > 0 ? (double)kb / (double)N : q0;
                    double opt = pa_hat > 0 ? log(pa_hat / qb) : -INFINITY;
                    cand[nc++] = (Candidate){opt, a, b, lo, hi, ka, kb};
                }
        }
    qsort(cand, (size_t)nc, sizeof(Candidate), cmp_candidate);
    res->epsilon_lower_bound = -INFINITY;
    res->lb_from = res->lb_to = -1;
    for (long long c = 0; c < nc; c++) {
        const Candidate *cd = &cand[c];
        if (!(cd->opt > res->epsilon_lower_bound))
            break;   // sorted: no later set can do better (p_lo <= k/N, q_hi >= k/N)
        double pl = audit_cp_lower(cd->ka, N, ae) - delta;
        if (!(pl > 0))
            continue;
        double qu = audit_cp_upper(cd->kb, N, ae);
        double lb = log(pl / qu);
        if (lb > res->epsilon_lower_bound) {
            res->epsilon_lower_bound = lb;
            res->lb_from = cd->a;
            res->lb_to = cd->b;
            res->set_lo = cd->lo == 0 ? -INFINITY : edges[cd->lo - 1];
            res->set_hi = cd->hi == nb - 1 ? INFINITY : edges[cd->hi];
            res->count_from = cd->ka;
            res->count_to = cd->kb;
            res->p_lower = pl + delta;
            res->q_upper = qu;
        }
    }
    free(cand);
    free(pre);
    free(edges);
    free(counts);
    res->pass_epsilon = res->epsilon_lower_bound <= m->spec.eps;
    res->seconds = fp_monotonic_seconds() - t0;
    return FP_OK;
}

// ---- JSON -------------------------------------------------------------------------------

static cJSON *bound_array(double lo, double hi) {
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, isfinite(lo) ? cJSON_CreateNumber(lo) : cJSON_CreateNull());
    cJSON_AddItemToArray(a, isfinite(hi) ? cJSON_CreateNumber(hi) : cJSON_CreateNull());
    return a;
}

void audit_mechanism_json(const Mech *m, cJSON *o) {
    const MechOps *info = m->spec.ops;
    cJSON_AddStringToObject(o, "mechanism", info->name);
    if (m->spec.variant != MV_NONE)
        cJSON_AddStringToObject(o, "variant", mech_variant_name(m->spec.variant));
    cJSON_AddStringToObject(o, "sampler", mech_sampler_name(m->sampler->kind));
    cJSON_AddNumberToObject(o, "epsilon", m->spec.eps);
    cJSON_AddNumberToObject(o, "delta", info->takes_delta ? m->spec.delta : 0);
    if (info->range != MECH_RANGE_NONE)
        cJSON_AddItemToObject(o, "range", bound_array(m->spec.lo, m->spec.hi));
    if (info->takes_dim)
        cJSON_AddNumberToObject(o, "dim", (double)m->spec.dim);
    if (info == &mech_gaussian || info == &mech_laplace)
        cJSON_AddNumberToObject(o, info == &mech_gaussian ? "sigma" : "scale", m->sigma);
    if (isfinite(m->eps_proven))
        cJSON_AddNumberToObject(o, "epsilon_proven", m->eps_proven);
    else
        cJSON_AddNullToObject(o, "epsilon_proven");
}

cJSON *audit_result_json(const Mech *m, const AuditResult *r) {
    cJSON *o = cJSON_CreateObject();
    audit_mechanism_json(m, o);
    cJSON_AddNumberToObject(o, "samples", (double)r->samples);
    cJSON_AddNumberToObject(o, "seed", (double)r->seed);
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < r->n_inputs; i++) {
        const AuditInput *a = &r->in[i];
        cJSON *j = cJSON_CreateObject();
        jnum_add(j, "input", a->input);
        jnum_add(j, "input_used", a->input_used);
        jnum_add(j, "mean", a->mean);
        jnum_add(j, "mean_theory", a->mean_theory);
        jnum_add(j, "z_mean", a->z_mean);
        jnum_add(j, "bias_factor", a->bias_factor);
        jnum_add(j, "bias_factor_theory", a->bias_factor_theory);
        jnum_add(j, "variance", a->variance);
        jnum_add(j, "variance_theory", a->variance_theory);
        jnum_add(j, "z_variance", a->z_variance);
        jnum_add(j, "variance_paper_claim", a->variance_claimed);
        jnum_add(j, "min", a->min);
        jnum_add(j, "max", a->max);
        cJSON_AddItemToArray(ins, j);
    }
    jnum_add(o, "bias_factor", r->bias_factor);
    jnum_add(o, "bias_factor_se", r->bias_factor_se);
    jnum_add(o, "bias_factor_theory", r->bias_factor_theory);
    jnum_add(o, "epsilon_lower_bound", r->epsilon_lower_bound);
    if (r->lb_from >= 0) {
        cJSON *w = cJSON_AddObjectToObject(o, "epsilon_lower_bound_witness");
        jnum_add(w, "input", r->in[r->lb_from].input);
        jnum_add(w, "input_other", r->in[r->lb_to].input);
        cJSON_AddItemToObject(w, "output_set", bound_array(r->set_lo, r->set_hi));
        cJSON_AddNumberToObject(w, "count", (double)r->count_from);
        cJSON_AddNumberToObject(w, "count_other", (double)r->count_to);
        jnum_add(w, "p_lower", r->p_lower);
        jnum_add(w, "p_other_upper", r->q_upper);
    }
    cJSON_AddNumberToObject(o, "confidence", 1 - r->alpha);
    cJSON_AddNumberToObject(o, "bins", r->bins);
    cJSON_AddNumberToObject(o, "sets_tested", (double)r->sets_tested);
    cJSON_AddNumberToObject(o, "alpha_per_bound", r->alpha_per_bound);
    cJSON_AddBoolToObject(o, "pass_epsilon", r->pass_epsilon);
    cJSON_AddBoolToObject(o, "pass_moments", r->pass_moments);
    cJSON_AddBoolToObject(o, "pass", r->pass_epsilon && r->pass_moments);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    return o;
}
