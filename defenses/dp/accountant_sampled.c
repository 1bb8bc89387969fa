// RDP of the Gaussian mechanism under the sampling kinds other than Poisson add/remove
// (see defenses/dp/accountant.h): fixed-size sampling without replacement (Wang, Balle,
// Kasiviswanathan 2019, Thm 9) and the joint-convexity bound for replace-one neighbours.
//
// Conventions: sigma is the noise multiplier for replace-one neighbours (std over the
// replace-one L2 sensitivity), so the base Gaussian mechanism is ε(α) = α/(2σ²)-RDP for
// every α (Mironov 2017 Prop. 7) and ε(∞) = ∞. Sums are taken in log space (a running
// log-sum-exp), binomials by lgamma_r. Every function returns an upper bound: where a
// bound is not defined it returns the next valid one, never a smaller number.
// Precision: tests/test_accountant.c compares with a 50-digit mpmath evaluation of the
// same sums (1e-10 relative).
#include <math.h>

#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_logspace.h"

// ln of Thm 9's sum at integer α >= 2: an upper bound on (α−1)·ε'(α).
static double wbk_log_moment(double q, double sigma, long long alpha) {
    double inv2s2 = 1.0 / (2.0 * sigma * sigma), lq = log(q), a = (double)alpha;
    double e2 = 2.0 * inv2s2; // ε(2)
    // min{4(e^{ε(2)} − 1), e^{ε(2)}·min{2, (e^{ε(∞)} − 1)²}} with ε(∞) = ∞.
    double log_min2 = fmin(log(4.0) + log(expm1(e2)), M_LN2 + e2);
    double m = 0.0, sum = 1.0; // the leading 1
    lse_push(&m, &sum, log_binom(a, 2.0) + 2.0 * lq + log_min2);
    for (long long j = 3; j <= alpha; j++) {
        double jd = (double)j;
        // 2 q^j C(α,j) e^{(j−1)ε(j)}, min{2, (e^{ε(∞)} − 1)^j} = 2.
        lse_push(&m, &sum, M_LN2 + log_binom(a, jd) + jd * lq + (jd - 1.0) * jd * inv2s2);
    }
    return m + log(sum);
}

double rdp_poisson_replace_gaussian(double q, double sigma, double alpha) {
    if (!(q >= 0.0 && q <= 1.0) || !(sigma >= 0.0) || !(alpha > 1.0))
        return NAN;
    if (q == 0.0)
        return 0.0;
    if (sigma == 0.0 || isinf(alpha))
        return isinf(sigma) ? 0.0 : INFINITY;
    double base = alpha / (2.0 * sigma * sigma);
    if (q == 1.0)
        return base;
    // ln(1 − q + q e^{(α−1)ε(α)}), summed in log space.
    double m = log1p(-q), sum = 1.0;
    lse_push(&m, &sum, log(q) + (alpha - 1.0) * base);
    double r = (m + log(sum)) / (alpha - 1.0);
    return r < base ? r : base;
}

double rdp_fixed_gaussian(double q, double sigma, double alpha) {
    double jc = rdp_poisson_replace_gaussian(q, sigma, alpha); // also the argument checks
    if (isnan(jc) || q == 0.0 || q == 1.0 || sigma == 0.0 || isinf(alpha) || isinf(sigma))
        return jc;
    double wbk;
    if (alpha <= 2.0) {
        wbk = wbk_log_moment(q, sigma, 2); // ε'(α) <= ε'(2) for α in (1, 2]
    } else if (alpha == floor(alpha) && alpha < 1e6) {
        wbk = wbk_log_moment(q, sigma, (long long)alpha) / (alpha - 1.0);
    } else if (alpha < 1e6) {
        double lo = floor(alpha), t = alpha - lo;
        wbk = ((1.0 - t) * wbk_log_moment(q, sigma, (long long)lo) +
               t * wbk_log_moment(q, sigma, (long long)lo + 1)) / (alpha - 1.0);
    } else {
        wbk = INFINITY;
    }
    return wbk < jc ? wbk : jc;
}
