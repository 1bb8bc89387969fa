// Binomial and AUC intervals (eval/binomial.h).
#include "eval/binomial.h"

#include <math.h>

// Lentz's continued fraction for I_x(a, b) (Numerical Recipes §6.4, betacf): converges
// fast for x < (a+1)/(a+b+2).
static double beta_cf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-15;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    d = 1 / (fabs(d) < tiny ? tiny : d);
    double h = d;
    for (int m = 1; m <= 100000; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps)
            break;
    }
    return h;
}

double binom_beta_inc(double a, double b, double x) {
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1) / (a + b + 2))
        return exp(lbt) * beta_cf(a, b, x) / a;
    return 1 - exp(lbt) * beta_cf(b, a, 1 - x) / b;
}

// The x with I_x(a, b) = q (I is increasing in x), by bisection to 1e-12.
static double beta_quantile(double a, double b, double q) {
    double lo = 0, hi = 1;
    for (int it = 0; it < 200 && hi - lo > 1e-12; it++) {
        double mid = 0.5 * (lo + hi);
        if (binom_beta_inc(a, b, mid) < q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

void binom_cp_interval(long long k, long long n, double alpha, double *lo, double *hi) {
    if (n <= 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    *lo = k <= 0 ? 0 : beta_quantile((double)k, (double)(n - k + 1), alpha / 2);
    *hi = k >= n ? 1 : beta_quantile((double)(k + 1), (double)(n - k), 1 - alpha / 2);
}

// Φ⁻¹(1 − alpha/2) by bisection on erfc (a fixed level; 1e-12 is ample).
static double normal_upper(double alpha) {
    double lo = 0, hi = 40;
    for (int it = 0; it < 200 && hi - lo > 1e-12; it++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(mid / sqrt(2.0)) > alpha / 2)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

void binom_auc_interval(double auc, long long n_pos, long long n_neg, double alpha, double *lo, double *hi) {
    if (n_pos <= 0 || n_neg <= 0 || !isfinite(auc)) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double a = auc, q1 = a / (2 - a), q2 = 2 * a * a / (1 + a);
    double var = (a * (1 - a) + (double)(n_pos - 1) * (q1 - a * a) + (double)(n_neg - 1) * (q2 - a * a)) /
                 ((double)n_pos * (double)n_neg);
    double se = var > 0 ? sqrt(var) : 0, z = normal_upper(alpha);
    *lo = a - z * se < 0 ? 0 : a - z * se;
    *hi = a + z * se > 1 ? 1 : a + z * se;
}
