// Proven accounts of the discrete Gaussian (defenses/dp/accountant_discrete.c), against values
// computed here independently of the formulas: the Rényi divergences of the laws
// themselves, summed over the integer lattice in long double.
//
// - Poisson subsampling: base P0 = N_Z(0, σ²), P1 = N_Z(1, σ²) (1-D, integer shift 1, so
//   the multiplier is σ), mixture M = (1−q)P0 + qP1; D_α(M‖P0) and D_α(P0‖M) summed over
//   x in [−60σ − 8, 60σ + 8] (the mass beyond is below e^{−1800}). Checked: the bound is >=
//   both directions on a grid of (q, σ, α); D_α(M‖P0) equals Mironov, Talwar, Zhang's
//   integer-order sum (the lattice identity of accountant_discrete.c); the bound is >= that
//   continuous formula; control: the bound without its ℓ = 2 term is exceeded.
// - Sums of n discrete Gaussians: the law of Y = Σ n iid N_Z(0, σ²) by convolution, and
//   D_α(Y + 1 ‖ Y) <= α·(1/(nσ²) + τ/2)/2 (Kairouz, Liu, Steinke 2021 Thm 1, d = 1);
//   control: at σ = 1/2 the sum is NOT as private as one discrete Gaussian of variance nσ²
//   (D_α exceeds α/(2nσ²)), so the τ term is needed.
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "defenses/dp/accountant.h"

// ln Σ_x e^{t(x)} over the terms written into t[0..n), in long double.
static long double log_sum(const long double *t, int n) {
    long double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        if (t[i] > m)
            m = t[i];
    for (int i = 0; i < n; i++)
        s += expl(t[i] - m);
    return m + logl(s);
}

// D_α(M‖P0) (dir = 0) or D_α(P0‖M) (dir = 1) for the 1-D subsampled discrete Gaussian.
static double direct_divergence(double q, double sigma, double alpha, int dir) {
    int r = (int)ceil(60 * sigma) + 8, n = 2 * r + 1;
    // calloc: the sanitizer build's -O1 cannot see that the loop below writes every term.
    long double *l0 = calloc((size_t)n, sizeof(long double)), *l1 = calloc((size_t)n, sizeof(long double));
    long double *t = calloc((size_t)n, sizeof(long double)), s2 = 2.0L * sigma * sigma;
    ck_assert(l0 && l1 && t);
    for (int i = 0; i < n; i++) {
        long double x = i - r;
        l0[i] = -x * x / s2;
        l1[i] = -(x - 1) * (x - 1) / s2;
    }
    long double z0 = log_sum(l0, n), z1 = log_sum(l1, n);  // each law normalised on its own
    for (int i = 0; i < n; i++) {
        long double p0 = l0[i] - z0, p1 = l1[i] - z1;
        long double a = logl(1 - (long double)q) + p0, b = logl((long double)q) + p1;
        long double mix = (a > b ? a : b) + log1pl(expl(-fabsl(a - b)));
        long double p = dir == 0 ? mix : p0, qq = dir == 0 ? p0 : mix;
        t[i] = alpha * p + (1 - alpha) * qq;
    }
    double d = (double)(log_sum(t, n) / (alpha - 1));
    free(l0);
    free(l1);
    free(t);
    return d;
}

// Zhu & Wang's sum without its ℓ = 2 term: a broken bound (the control).
static double bound_without_l2(double q, double sigma, int alpha) {
    double s = pow(1 - q, alpha - 1) * (1 + (alpha - 1) * q);
    for (int l = 3; l <= alpha; l++) {
        double c = exp(lgamma(alpha + 1.0) - lgamma(l + 1.0) - lgamma(alpha - l + 1.0));
        s += 3 * c * pow(q, l) * pow(1 - q, alpha - l) * exp((l * l - l) / (2 * sigma * sigma));
    }
    return log(s) / (alpha - 1);
}

START_TEST(poisson_discrete_bound_holds_both_directions) {
    const double qs[] = {0.01, 0.1, 0.3, 0.7};
    const double sigmas[] = {0.6, 1, 2, 5};
    const double alphas[] = {1.5, 2, 2.5, 3, 4, 6.3, 8, 16, 32};
    int control_caught = 0, checked = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 9; c++) {
                double q = qs[a], s = sigmas[b], al = alphas[c];
                double up = rdp_poisson_discrete_gaussian(q, s, al);
                double fwd = direct_divergence(q, s, al, 0), bwd = direct_divergence(q, s, al, 1);
                ck_assert_msg(up >= fwd && up >= bwd, "q %g sigma %g alpha %g: bound %.12g < direct %.12g / %.12g", q,
                              s, al, up, fwd, bwd);
                ck_assert(up <= al / (2 * s * s) * (1 + 1e-11));  // never above the unsampled curve
                checked++;
                if (al != floor(al))
                    continue;
                // The lattice identity: D_α(M‖P0) is MTZ's integer-order sum exactly.
                double mtz = rdp_subsampled_gaussian(q, s, al);
                ck_assert_msg(fabs(fwd - mtz) <= 1e-9 * fabs(mtz) + 1e-15, "q %g sigma %g alpha %g: %.15g vs MTZ %.15g",
                              q, s, al, fwd, mtz);
                ck_assert(up >= mtz);
                if (bound_without_l2(q, s, (int)al) < fmax(fwd, bwd))
                    control_caught++;
            }
    ck_assert_int_eq(checked, 144);
    ck_assert_msg(control_caught >= 16, "the broken bound was exceeded only %d times", control_caught);
    // Special cases and the table entry.
    ck_assert_double_eq(rdp_poisson_discrete_gaussian(0, 1, 2), 0);
    ck_assert(isinf(rdp_poisson_discrete_gaussian(0.1, 0, 2)));
    ck_assert_double_eq(rdp_poisson_discrete_gaussian(1, 2, 3), 3 / 8.0);
    ck_assert(isnan(rdp_poisson_discrete_gaussian(1.5, 1, 2)) && isnan(rdp_poisson_discrete_gaussian(0.1, 1, 1)));
    ck_assert_str_eq(rdp_sampling_name(RDP_SAMPLING_POISSON_DISCRETE), "poisson-discrete");
    ck_assert_int_eq(rdp_sampling_replace_one(RDP_SAMPLING_POISSON_DISCRETE), 0);
    ck_assert_double_eq(rdp_sampled_gaussian(RDP_SAMPLING_POISSON_DISCRETE, 0.1, 2, 7),
                        rdp_poisson_discrete_gaussian(0.1, 2, 7));
}
END_TEST

// Over the accountant's extended grid, the proven account is >= MTZ's (ε and every order),
// and the price of the general bound stays moderate: measured 2.015 vs 1.712 (q 0.01,
// σ 1.1, 1000 steps), 5.148 vs 4.318, 11.98 vs 9.234, 3.989 vs 2.601 (q 0.5).
START_TEST(poisson_discrete_account_above_continuous) {
    double orders[RDP_EXTENDED_ORDER_COUNT];
    int n = rdp_extended_orders(orders);
    const double cases[][3] = {{0.01, 1.1, 1000}, {0.24, 1, 3}, {0.1, 0.8, 50}, {0.5, 3, 10}};
    for (int c = 0; c < 4; c++) {
        double e[2];
        for (int k = 0; k < 2; k++) {
            RdpAccountant *acc;
            ck_assert_int_eq(rdp_accountant_create(orders, n, &acc, NULL), FP_OK);
            ck_assert_int_eq(rdp_accountant_add_sampled(acc, k ? RDP_SAMPLING_POISSON_DISCRETE : RDP_SAMPLING_POISSON,
                                                        cases[c][0], cases[c][1], (long long)cases[c][2], NULL),
                             FP_OK);
            const double *o;
            const double *r = rdp_accountant_rdp(acc, &o, NULL);
            if (k)
                for (int i = 0; i < n; i++)
                    if (o[i] == floor(o[i]))
                        ck_assert(r[i] >= cases[c][2] * rdp_subsampled_gaussian(cases[c][0], cases[c][1], o[i]));
            ck_assert_int_eq(rdp_accountant_epsilon(acc, 1e-5, RDP_CONVERSION_BALLE2020, &e[k], NULL, NULL), FP_OK);
            rdp_accountant_free(acc);
        }
        ck_assert_msg(e[1] >= e[0] && e[1] < 1.6 * e[0], "case %d: proven %g, continuous %g", c, e[1], e[0]);
    }
}
END_TEST

// ---- sums of discrete Gaussians ------------------------------------------------------

// ln of the law of the sum of n iid N_Z(0, σ²) on [−R, R]·n, by convolution (long double).
static long double *sum_law(double sigma, int n, int r, int *len) {
    int m = 2 * r + 1, L = m;
    long double *p = malloc(sizeof(long double) * m), z = 0;
    for (int i = 0; i < m; i++)
        z += p[i] = expl(-(long double)(i - r) * (i - r) / (2.0L * sigma * sigma));
    for (int i = 0; i < m; i++)
        p[i] /= z;
    long double *y = malloc(sizeof(long double) * m);
    for (int i = 0; i < m; i++)
        y[i] = p[i];
    for (int k = 1; k < n; k++) {
        long double *w = calloc((size_t)(L + m - 1), sizeof(long double));
        for (int i = 0; i < L; i++)
            for (int j = 0; j < m; j++)
                w[i + j] += y[i] * p[j];
        free(y);
        y = w;
        L += m - 1;
    }
    free(p);
    *len = L;
    return y;
}

// D_α(Y + 1 ‖ Y) for the law y of length len.
static double shift_divergence(const long double *y, int len, double alpha) {
    long double *t = malloc(sizeof(long double) * len);
    int n = 0;
    for (int i = 1; i < len; i++)
        if (y[i - 1] > 0 && y[i] > 0)
            t[n++] = alpha * logl(y[i - 1]) + (1 - alpha) * logl(y[i]);
    double d = (double)(log_sum(t, n) / (alpha - 1));
    free(t);
    return d;
}

START_TEST(share_sum_bound_holds_and_tau_is_needed) {
    const double sigmas[] = {0.5, 0.6, 0.8, 1};
    const double alphas[] = {2, 4, 8};
    int naive_exceeded = 0;
    for (int b = 0; b < 4; b++)
        for (int n = 2; n <= 3; n++) {
            int len;
            long double *y = sum_law(sigmas[b], n, 30, &len);
            double s = sigmas[b];
            // τ from its definition, and the accountant's upper bound on ln τ.
            double tau = 0;
            for (int k = 1; k < n; k++)
                tau += 10 * exp(-2 * M_PI * M_PI * s * s * k / (k + 1.0));
            double lt = dgauss_sum_log_tau(s, n);
            ck_assert(lt >= log(tau) && lt <= log(tau) + 1e-10);
            // The multiplier form: 1/σ'² = 1/(nσ²) + τ/2 for Δ = 1, d = 1.
            double m = dgauss_sum_multiplier(sqrt((double)n) * s, s, n, 1);
            ck_assert(m > 0 && 1 / (m * m) >= 1 / (n * s * s) + tau / 2);
            ck_assert(1 / (m * m) <= (1 / (n * s * s) + tau / 2) * (1 + 1e-10));
            for (int a = 0; a < 3; a++) {
                double al = alphas[a], d = shift_divergence(y, len, al);
                ck_assert_msg(d <= al / (2 * m * m), "sigma %g n %d alpha %g: D %.9g > KLS %.9g", s, n, al, d,
                              al / (2 * m * m));
                if (d > al / (2 * n * s * s))
                    naive_exceeded++;
            }
            free(y);
        }
    ck_assert_msg(naive_exceeded >= 3, "the one-Gaussian account was exceeded only %d times", naive_exceeded);
    // The grids of the defenses (S >= 64): τ underflows a double, its log does not, and the
    // multiplier moves by the rounding margin only.
    double lt = dgauss_sum_log_tau(64, 1000);
    ck_assert(isfinite(lt) && lt >= log(10.0) - M_PI * M_PI * 64 * 64 && lt <= log(10.0 * 999) - M_PI * M_PI * 4096 + 1);
    double m = dgauss_sum_multiplier(0.5, 64, 1000, 1e6);
    ck_assert(m < 0.5 && m > 0.5 * (1 - 1e-11));
    ck_assert_double_eq(dgauss_sum_multiplier(0.5, 64, 1, 1e6), 0.5);  // one share: the discrete Gaussian
    ck_assert(isinf(dgauss_sum_log_tau(64, 1)) && dgauss_sum_log_tau(64, 1) < 0);
    ck_assert(isnan(dgauss_sum_multiplier(0.5, 0.4, 2, 1)));
}
END_TEST

Suite *suite_accountant_discrete(void) {
    Suite *s = suite_create("accountant_discrete");
    TCase *t = tcase_create("accountant_discrete");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, poisson_discrete_bound_holds_both_directions);
    tcase_add_test(t, poisson_discrete_account_above_continuous);
    tcase_add_test(t, share_sum_bound_holds_and_tau_is_needed);
    suite_add_tcase(s, t);
    return s;
}
