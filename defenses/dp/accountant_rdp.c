// RDP accountant for the Poisson-subsampled Gaussian mechanism (SGM).
//
// Mironov, Talwar, Zhang 2019 (arXiv 1908.10530) §3.3: with μ0 = N(0, σ²), μ1 = N(1, σ²)
// and μ = (1−q)μ0 + qμ1, one SGM step is (α, ε_α)-RDP with ε_α = ln A_α / (α−1),
// A_α = E_{z∼μ0}[(μ(z)/μ0(z))^α]. We follow Opacus `accountants/analysis/rdp.py`
// (itself TF Privacy's `rdp_accountant.py`) formula by formula, so the numbers agree:
// - integer α: A_α = Σ_{k=0..α} C(α,k) (1−q)^{α−k} q^k exp((k²−k)/(2σ²)), summed in
//   log space (lgamma for the binomials, a running log-sum-exp);
// - fractional α: the two series split at z0 = σ² ln(1/q − 1) + ½, terms with erfc
//   tails, signed binomials C(α,i) (negative for some i > α), stopped once both terms
//   are below e^−30;
// - q = 0 → 0, σ = 0 → ∞, q = 1 → α/(2σ²).
// Composition: RDP adds order by order over steps and phases. Conversion to (ε, δ):
// Balle et al. 2020 Thm 21 (Opacus `get_privacy_spent`) or the classic Mironov 2017
// Prop. 3 bound. Differences from Opacus, all conservative: a fractional-order series
// whose log-space subtraction goes negative (Opacus raises) or that has not converged
// after RDP_FRAC_MAX_TERMS terms yields ε_α = ∞ (the order is skipped), and ε is
// clamped at 0.
// Precision (tests/test_accountant.c, against 40-digit quadrature): ~1e-10 relative per
// order in general; for fractional α near 1 with small q, A_α − 1 is tiny and the series
// sums terms of size ~1 in double precision, leaving ~8 digits of ε_α (Opacus' rdp.py
// loses the same or more there). Such orders are almost never the optimal one.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_logspace.h"

#define RDP_FRAC_MAX_TERMS 100000
#define RDP_SEARCH_REL_TOL 1e-7
#define RDP_SEARCH_SIGMA_MAX 1073741824.0  // 2^30

// ---- log-space arithmetic ----------------------------------------------------------

// ln(e^x + e^y).
static double log_add(double x, double y) {
    double a = fmin(x, y), b = fmax(x, y);
    if (a == -INFINITY)
        return b;
    return log1p(exp(a - b)) + b;
}

// ln(e^x − e^y), x >= y; NAN when x < y (the series lost its precision).
static double log_sub(double x, double y) {
    if (x < y)
        return NAN;
    if (y == -INFINITY)
        return x;
    if (x == y)
        return -INFINITY;
    return x + log1p(-exp(y - x));
}

double accountant_log_erfc(double x) {
    // glibc's erfc keeps its relative accuracy down to ~1e-174 at x = 20; beyond, the
    // asymptotic series erfc(x) = e^{−x²}/(x√π) Σ_n (−1)^n (2n−1)!!/(2x²)^n, whose terms
    // shrink by (2n−1)/(2x²) <= 1/10 for the first 40 of them.
    if (x < 20.0)
        return log(erfc(x));
    double inv = 1.0 / (2.0 * x * x), term = 1.0, sum = 1.0;
    for (int n = 1; n < 40 && fabs(term) > 1e-18; n++) {
        term *= -(2.0 * n - 1.0) * inv;
        sum += term;
    }
    return -x * x - log(x) - 0.5 * log(M_PI) + log(sum);
}

// ---- ln A_α ------------------------------------------------------------------------

static double log_a_int(double q, double sigma, long long alpha) {
    double lq = log(q), l1q = log1p(-q), two_s2 = 2.0 * sigma * sigma;
    double lga = lgam((double)alpha + 1.0);
    double m = -INFINITY, sum = 0.0;  // ln Σ e^{s_k} = m + ln sum
    for (long long k = 0; k <= alpha; k++) {
        double kd = (double)k;
        double s = lga - lgam(kd + 1.0) - lgam((double)(alpha - k) + 1.0) + kd * lq + (double)(alpha - k) * l1q +
                   (kd * kd - kd) / two_s2;
        if (s > m) {
            sum = sum * exp(m - s) + 1.0;
            m = s;
        } else {
            sum += exp(s - m);
        }
    }
    return m + log(sum);
}

static double log_a_frac(double q, double sigma, double alpha) {
    double lq = log(q), l1q = log1p(-q), two_s2 = 2.0 * sigma * sigma, s_sqrt2 = sigma * M_SQRT2;
    double lga = lgam(alpha + 1.0), z0 = sigma * sigma * log(1.0 / q - 1.0) + 0.5;
    double la0 = -INFINITY, la1 = -INFINITY;  // the integrals over (−∞, z0] and [z0, ∞)
    int sign = 1;                              // sign of C(α, i) = Π_{t<=i} (α−t+1)/t
    for (long i = 0; i <= RDP_FRAC_MAX_TERMS; i++) {
        double id = (double)i, j = alpha - id;
        if (i > 0 && alpha - id + 1.0 < 0.0)
            sign = -sign;
        double log_coef = lga - lgam(id + 1.0) - lgam(alpha - id + 1.0);  // ln |C(α, i)|
        double log_t0 = log_coef + id * lq + j * l1q;
        double log_t1 = log_coef + j * lq + id * l1q;
        double log_e0 = -M_LN2 + accountant_log_erfc((id - z0) / s_sqrt2);
        double log_e1 = -M_LN2 + accountant_log_erfc((z0 - j) / s_sqrt2);
        double s0 = log_t0 + (id * id - id) / two_s2 + log_e0;
        double s1 = log_t1 + (j * j - j) / two_s2 + log_e1;
        if (sign > 0) {
            la0 = log_add(la0, s0);
            la1 = log_add(la1, s1);
        } else {
            la0 = log_sub(la0, s0);
            la1 = log_sub(la1, s1);
            if (isnan(la0) || isnan(la1))
                return INFINITY;
        }
        if (fmax(s0, s1) < -30.0)
            return log_add(la0, la1);
    }
    return INFINITY;  // not converged: count the order as giving no guarantee
}

double rdp_subsampled_gaussian(double q, double sigma, double alpha) {
    if (!(q >= 0.0 && q <= 1.0) || !(sigma >= 0.0) || !(alpha > 1.0))
        return NAN;
    if (q == 0.0)
        return 0.0;
    if (sigma == 0.0)
        return INFINITY;
    if (q == 1.0)
        return alpha / (2.0 * sigma * sigma);
    if (isinf(alpha) || isinf(sigma))
        return isinf(sigma) ? 0.0 : INFINITY;
    double la;
    if (alpha == floor(alpha) && alpha < 1e9)
        la = log_a_int(q, sigma, (long long)alpha);
    else
        la = log_a_frac(q, sigma, alpha);
    return la / (alpha - 1.0);
}

// ---- sampling kinds (by table) -----------------------------------------------------

static const struct {
    const char *name;
    int replace_one;
    double (*rdp)(double q, double sigma, double alpha);
} sampling_kinds[] = {
    [RDP_SAMPLING_POISSON] = {"poisson", 0, rdp_subsampled_gaussian},
    [RDP_SAMPLING_FIXED] = {"fixed", 1, rdp_fixed_gaussian},
    [RDP_SAMPLING_POISSON_REPLACE] = {"poisson-replace", 1, rdp_poisson_replace_gaussian},
    [RDP_SAMPLING_POISSON_DISCRETE] = {"poisson-discrete", 0, rdp_poisson_discrete_gaussian},
};
#define N_SAMPLING_KINDS ((int)(sizeof sampling_kinds / sizeof sampling_kinds[0]))

static int sampling_ok(RdpSampling s) { return (unsigned)s < (unsigned)N_SAMPLING_KINDS; }

const char *rdp_sampling_name(RdpSampling s) { return sampling_ok(s) ? sampling_kinds[s].name : NULL; }

int rdp_sampling_replace_one(RdpSampling s) { return sampling_ok(s) ? sampling_kinds[s].replace_one : 0; }

double rdp_sampled_gaussian(RdpSampling s, double q, double sigma, double alpha) {
    return sampling_ok(s) ? sampling_kinds[s].rdp(q, sigma, alpha) : NAN;
}

// ---- order grids -------------------------------------------------------------------

int rdp_default_orders(double *out) {
    if (out) {
        int n = 0;
        for (int x = 1; x <= 99; x++)
            out[n++] = 1.0 + x / 10.0;  // the same doubles as Python's 1 + x / 10.0
        for (int a = 12; a <= 63; a++)
            out[n++] = a;
    }
    return RDP_DEFAULT_ORDER_COUNT;
}

int rdp_extended_orders(double *out) {
    static const double extra[RDP_EXTENDED_ORDER_COUNT - RDP_DEFAULT_ORDER_COUNT] = {
        64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024};
    if (out) {
        rdp_default_orders(out);
        memcpy(out + RDP_DEFAULT_ORDER_COUNT, extra, sizeof extra);
    }
    return RDP_EXTENDED_ORDER_COUNT;
}

// ---- conversion to (ε, δ) ----------------------------------------------------------

static FpStatus check_delta(double delta, FpError *err) {
    if (!(delta > 0.0 && delta < 1.0))
        return fp_fail(err, FP_EPARAM, "delta must be in (0, 1), got %g", delta);
    return FP_OK;
}

FpStatus rdp_to_epsilon(const double *orders, const double *rdp, int n, double delta, RdpConversion conv,
                        double *eps, double *best_alpha, FpError *err) {
    FP_TRY(check_delta(delta, err));
    if (n < 1 || !orders || !rdp)
        return fp_fail(err, FP_EPARAM, "no RDP orders given");
    if (conv != RDP_CONVERSION_BALLE2020 && conv != RDP_CONVERSION_CLASSIC)
        return fp_fail(err, FP_EPARAM, "unknown RDP conversion %d", (int)conv);
    double best = INFINITY, best_a = NAN, log_delta = log(delta);
    for (int i = 0; i < n; i++) {
        double a = orders[i], r = rdp[i];
        if (!(a > 1.0))
            return fp_fail(err, FP_EPARAM, "RDP order %g is not > 1", a);
        if (!isfinite(r) || isinf(a))
            continue;
        double e;
        if (conv == RDP_CONVERSION_BALLE2020)  // Balle et al. 2020 Thm 21
            e = r - (log_delta + log(a)) / (a - 1.0) + log((a - 1.0) / a);
        else  // Mironov 2017 Prop. 3
            e = r - log_delta / (a - 1.0);
        if (e < best) {
            best = e;
            best_a = a;
        }
    }
    *eps = best < 0.0 ? 0.0 : best;
    if (best_alpha)
        *best_alpha = best_a;
    return FP_OK;
}

// ---- the accountant ----------------------------------------------------------------

struct RdpAccountant {
    int n;
    double *orders;  // n orders, each > 1
    double *rdp;     // accumulated ε_α per order
    int spent;       // 1 once a phase with q > 0 and steps > 0 was added
    int relation;    // -1 until a phase is added; then 0 add/remove, 1 replace-one
};

static FpStatus check_orders(const double *orders, int n, FpError *err) {
    if (n < 1)
        return fp_fail(err, FP_EPARAM, "the order grid is empty");
    for (int i = 0; i < n; i++)
        if (!(orders[i] > 1.0) || isnan(orders[i]))
            return fp_fail(err, FP_EPARAM, "RDP order %g is not > 1", orders[i]);
    return FP_OK;
}

FpStatus rdp_accountant_create(const double *orders, int n_orders, RdpAccountant **out, FpError *err) {
    *out = NULL;
    if (orders)
        FP_TRY(check_orders(orders, n_orders, err));
    else
        n_orders = RDP_DEFAULT_ORDER_COUNT;
    RdpAccountant *acc = fp_calloc(1, sizeof *acc, err);
    if (!acc)
        return FP_ENOMEM;
    acc->n = n_orders;
    acc->relation = -1;
    acc->orders = fp_malloc((size_t)n_orders * sizeof(double), err);
    acc->rdp = fp_calloc((size_t)n_orders, sizeof(double), err);
    if (!acc->orders || !acc->rdp) {
        rdp_accountant_free(acc);
        return FP_ENOMEM;
    }
    if (orders)
        memcpy(acc->orders, orders, (size_t)n_orders * sizeof(double));
    else
        rdp_default_orders(acc->orders);
    *out = acc;
    return FP_OK;
}

static FpStatus check_phase(double q, double sigma, long long steps, FpError *err) {
    if (!(q >= 0.0 && q <= 1.0))
        return fp_fail(err, FP_EPARAM, "sampling rate q must be in [0, 1], got %g", q);
    if (!(sigma >= 0.0) || !isfinite(sigma))
        return fp_fail(err, FP_EPARAM, "noise multiplier sigma must be >= 0 and finite, got %g", sigma);
    if (steps < 0)
        return fp_fail(err, FP_EPARAM, "steps must be >= 0, got %lld", steps);
    return FP_OK;
}

FpStatus rdp_accountant_add(RdpAccountant *acc, double q, double sigma, long long steps, FpError *err) {
    return rdp_accountant_add_sampled(acc, RDP_SAMPLING_POISSON, q, sigma, steps, err);
}

FpStatus rdp_accountant_add_sampled(RdpAccountant *acc, RdpSampling s, double q, double sigma, long long steps,
                                    FpError *err) {
    if (!sampling_ok(s))
        return fp_fail(err, FP_EPARAM, "unknown sampling kind %d", (int)s);
    FP_TRY(check_phase(q, sigma, steps, err));
    int rel = sampling_kinds[s].replace_one;
    if (acc->relation >= 0 && acc->relation != rel)
        return fp_fail(err, FP_EPARAM, "a %s phase (%s neighbours) cannot compose with the %s phases already added",
                       sampling_kinds[s].name, rel ? "replace-one" : "add/remove",
                       acc->relation ? "replace-one" : "add/remove");
    acc->relation = rel;
    if (steps == 0 || q == 0.0)
        return FP_OK;  // nothing released about anyone
    for (int i = 0; i < acc->n; i++)
        acc->rdp[i] += (double)steps * sampling_kinds[s].rdp(q, sigma, acc->orders[i]);
    acc->spent = 1;
    return FP_OK;
}

FpStatus rdp_accountant_epsilon(const RdpAccountant *acc, double delta, RdpConversion conv, double *eps,
                                double *best_alpha, FpError *err) {
    FP_TRY(check_delta(delta, err));
    if (!acc->spent) {
        *eps = 0.0;
        if (best_alpha)
            *best_alpha = NAN;
        return FP_OK;
    }
    return rdp_to_epsilon(acc->orders, acc->rdp, acc->n, delta, conv, eps, best_alpha, err);
}

const double *rdp_accountant_rdp(const RdpAccountant *acc, const double **orders, int *n_orders) {
    if (orders)
        *orders = acc->orders;
    if (n_orders)
        *n_orders = acc->n;
    return acc->rdp;
}

void rdp_accountant_free(RdpAccountant *acc) {
    if (!acc)
        return;
    free(acc->orders);
    free(acc->rdp);
    free(acc);
}

FpStatus rdp_epsilon(double q, double sigma, long long steps, double delta, double *eps, double *best_alpha,
                     FpError *err) {
    RdpAccountant *acc;
    FP_TRY(rdp_accountant_create(NULL, 0, &acc, err));
    FpStatus st = rdp_accountant_add(acc, q, sigma, steps, err);
    if (st == FP_OK)
        st = rdp_accountant_epsilon(acc, delta, RDP_CONVERSION_BALLE2020, eps, best_alpha, err);
    rdp_accountant_free(acc);
    return st;
}

// ---- σ for a target ε --------------------------------------------------------------

// ε of one phase (q, sigma, steps) on the given orders; rdp is scratch of n doubles.
static double phase_epsilon(RdpSampling s, double q, double sigma, long long steps, const double *orders, int n,
                            double delta, double *rdp) {
    for (int i = 0; i < n; i++)
        rdp[i] = (double)steps * sampling_kinds[s].rdp(q, sigma, orders[i]);
    double eps;
    if (rdp_to_epsilon(orders, rdp, n, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL) != FP_OK)
        return INFINITY;
    return eps;
}

FpStatus rdp_sigma_for_epsilon(double q, long long steps, double delta, double target_eps, const double *orders,
                               int n_orders, double *sigma, double *eps_at, FpError *err) {
    return rdp_sigma_for_epsilon_sampled(RDP_SAMPLING_POISSON, q, steps, delta, target_eps, orders, n_orders, sigma,
                                         eps_at, err);
}

FpStatus rdp_sigma_for_epsilon_sampled(RdpSampling s, double q, long long steps, double delta, double target_eps,
                                       const double *orders, int n_orders, double *sigma, double *eps_at,
                                       FpError *err) {
    if (!sampling_ok(s))
        return fp_fail(err, FP_EPARAM, "unknown sampling kind %d", (int)s);
    FP_TRY(check_phase(q, 0.0, steps, err));
    FP_TRY(check_delta(delta, err));
    if (steps < 1)
        return fp_fail(err, FP_EPARAM, "steps must be >= 1, got %lld", steps);
    if (!(target_eps > 0.0) || !isfinite(target_eps))
        return fp_fail(err, FP_EPARAM, "target epsilon must be > 0 and finite, got %g", target_eps);
    if (q == 0.0) {
        *sigma = 0.0;
        if (eps_at)
            *eps_at = 0.0;
        return FP_OK;
    }
    double default_orders[RDP_DEFAULT_ORDER_COUNT];
    if (orders) {
        FP_TRY(check_orders(orders, n_orders, err));
    } else {
        n_orders = rdp_default_orders(default_orders);
        orders = default_orders;
    }
    double *scratch = fp_malloc((size_t)n_orders * sizeof(double), err);
    if (!scratch)
        return FP_ENOMEM;

    // Bracket: eps(lo) > target (lo = 0 gives ∞), eps(hi) <= target.
    double lo = 0.0, hi = 1.0, e_hi = phase_epsilon(s, q, hi, steps, orders, n_orders, delta, scratch);
    while (!(e_hi <= target_eps)) {
        lo = hi;
        hi *= 2.0;
        if (hi > RDP_SEARCH_SIGMA_MAX) {
            free(scratch);
            return fp_fail(err, FP_EPARAM,
                           "target epsilon %g is below what this RDP order grid can certify at "
                           "delta %g (epsilon %g at sigma %g); use larger RDP orders (the extended grid)",
                           target_eps, delta, e_hi, lo);
        }
        e_hi = phase_epsilon(s, q, hi, steps, orders, n_orders, delta, scratch);
    }
    // ε is non-increasing in σ; keep the invariant and return the verified end.
    while (hi - lo > RDP_SEARCH_REL_TOL * hi) {
        double mid = 0.5 * (lo + hi);
        double e = phase_epsilon(s, q, mid, steps, orders, n_orders, delta, scratch);
        if (e <= target_eps) {
            hi = mid;
            e_hi = e;
        } else {
            lo = mid;
        }
    }
    free(scratch);
    *sigma = hi;
    if (eps_at)
        *eps_at = e_hi;
    return FP_OK;
}
