// The discrete Laplace of the federated defenses (defenses/dp/dlaplace.h): its draws against
// the exact law (per atom and moments, 6 standard errors, fixed seeds) with a halved scale
// as the control; the realised law's adjacent ratios within the stated E (and E at the
// ideal 2^(1/q)) with a broken table as the control; element-indexed draws (the 16-wide
// path equals the scalar one, any split); the randomized rounding unbiased; and the
// support: every output of the safe sampler is possible at every input, while the float
// sampler has outputs that only one of two inputs can give (Mironov 2012).
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "defenses/dp/dlaplace.h"

static DLap make_law(double scale_min) {
    DLap t;
    FpError e = {0};
    ck_assert_msg(dlap_init(&t, scale_min, &e) == FP_OK, "%s", e.msg);
    return t;
}

// Exact mean, variance and fourth central moment of J from the pmf (|j| < jmax).
static void exact_moments(const DLap *t, long long jmax, double *mean, double *var, double *m4) {
    long double s1 = 0, s2 = 0;
    for (long long j = -jmax; j < jmax; j++) {
        long double p = dlap_pmf(t, j);
        s1 += p * j;
        s2 += p * j * j;
    }
    long double c4 = 0, mu = s1;
    for (long long j = -jmax; j < jmax; j++)
        c4 += dlap_pmf(t, j) * powl(j - mu, 4);
    *mean = (double)s1;
    *var = (double)(s2 - s1 * s1);
    *m4 = (double)c4;
}

// z of the sample variance of n draws of `law` against the variance of `ref`.
static double variance_z(const DLap *law, const DLap *ref, int n, uint32_t client) {
    RngStream s = rng_stream(11, RNG_TEST, 1, client);
    double mean, var, m4;
    exact_moments(ref, (long long)(60 * ref->scale) + 10, &mean, &var, &m4);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)dlap_draw(law, &s, (uint64_t)i, NULL) - mean;
        acc += d * d;
    }
    return (acc / n - var) / sqrt((m4 - var * var) / n);
}

START_TEST(dlap_draws_follow_the_exact_law) {
    enum { N = 400000, JMAX = 70 };
    DLap t = make_law(12);   // q = 10: both tables used (m = 2, l = 5)
    ck_assert_int_eq(t.q, t.m * t.l);
    ck_assert(t.m > 1 && t.l > 1);
    // The table's law is the geometric 2^(-y/q) up to its 63-bit counts.
    double p = exp2(-1.0 / t.q);
    long double total = 0;
    for (long long j = -60 * t.q; j < 60 * t.q; j++) {
        long long y = j >= 0 ? j : -1 - j;
        long double ideal = 0.5L * (1 - p) * powl(p, (long double)y), got = dlap_pmf(&t, j);
        ck_assert_msg(fabsl(got / ideal - 1) < 1e-12L, "P(J = %lld) = %Lg, ideal %Lg", j, got, ideal);
        total += got;
    }
    ck_assert(fabsl(total - 1) < 1e-12L);
    static long count[2 * JMAX + 1];
    memset(count, 0, sizeof count);
    RngStream s = rng_stream(5, RNG_TEST, 0, 0);
    double sum = 0;
    for (int i = 0; i < N; i++) {
        long long j = dlap_draw(&t, &s, (uint64_t)i, NULL);
        sum += (double)j;
        if (j >= -JMAX && j <= JMAX)
            count[j + JMAX]++;
    }
    for (int j = -JMAX; j <= JMAX; j++) {
        double e = N * (double)dlap_pmf(&t, j);
        ck_assert_msg(fabs(count[j + JMAX] - e) <= 6 * sqrt(e) + 1, "J = %d: %ld draws, %.1f expected", j,
                      count[j + JMAX], e);
    }
    double mean, var, m4;
    exact_moments(&t, (long long)(60 * t.scale), &mean, &var, &m4);
    ck_assert_double_eq_tol(mean, -0.5, 1e-12);
    ck_assert(fabs(var / (2 * t.scale * t.scale) - 1) < 0.01);   // the Laplace variance 2b², up to the grid
    ck_assert_msg(fabs(sum / N - mean) < 6 * sqrt(var / N), "mean %g", sum / N);
    double z = variance_z(&t, &t, N, 0);
    ck_assert_msg(fabs(z) < 6, "variance off by %.1f standard errors", z);
    // Control: a sampler of half the scale fails the same check.
    DLap half = make_law(6);
    double zc = variance_z(&half, &t, N, 0);
    ck_assert_msg(fabs(zc) > 6, "the check misses a halved scale (z = %.1f)", zc);
    dlap_free(&half);
    dlap_free(&t);
}
END_TEST

// The largest ratio of adjacent probabilities over |j| <= reach.
static long double worst_ratio(const DLap *t, long long reach) {
    long double worst = 1;
    for (long long j = -reach; j < reach; j++) {
        long double r = dlap_pmf(t, j) / dlap_pmf(t, j + 1);
        worst = fmaxl(worst, fmaxl(r, 1 / r));
    }
    return worst;
}

START_TEST(dlap_adjacent_ratios_within_the_stated_bound) {
    static const double scales[] = {1, 3, 12, 4096, 1e5};
    for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        DLap t = make_law(scales[k]);
        ck_assert(t.scale >= scales[k]);
        // Every carry: within C, into B, into A (three blocks of q).
        long double worst = worst_ratio(&t, 3 * t.q + 2);
        ck_assert_msg(worst <= t.ratio, "scale %g: ratio %.17Lg above the stated %.17g", scales[k], worst, t.ratio);
        long double ideal = exp2l(1.0L / t.q);
        ck_assert_msg(fabsl(t.ratio / ideal - 1) < 1e-9L * (ideal - 1), "scale %g: E %.17g, ideal %.17Lg", scales[k],
                      t.ratio, ideal);
        ck_assert(t.log_ratio >= logl(worst) && t.lipschitz >= worst - 1);
        // E − 1 over the ideal 1/scale: 1 + about 1/(2·scale).
        ck_assert(t.lipschitz * t.scale > 1 && t.lipschitz * t.scale < 1 + 1 / t.scale);
        dlap_free(&t);
    }
    // Control: a table with one count moved (10% of C's first count to its second) breaks
    // the stated ratio, and the check sees it.
    DLap t = make_law(4096);
    uint64_t c0 = t.lo.s[1] - t.lo.s[0];
    t.lo.s[1] -= c0 / 10;
    ck_assert_msg(worst_ratio(&t, 2 * t.q) > t.ratio, "the check misses a broken table");
    dlap_free(&t);
}
END_TEST

START_TEST(dlap_element_indexed) {
    enum { N = 1000 };
    DLap t = make_law(4096);
    RngStream s = rng_stream(9, RNG_DEFENSE, 2, 3);
    float a[N], b[N];
    const double g = 1e-3;
    for (int i = 0; i < N; i++)
        a[i] = b[i] = (float)(0.01 * sin(i));
    dlap_add(&t, g, a, N, &s, 5);             // unaligned start: scalar head, 16-wide body, scalar tail
    dlap_add(&t, g, b, 333, &s, 5);           // another split
    dlap_add(&t, g, b + 333, N - 333, &s, 5 + 333);
    for (int i = 0; i < N; i++) {
        float want = dlap_value(&t, g, (float)(0.01 * sin(i)), &s, 5 + (uint64_t)i);
        ck_assert_msg(a[i] == want && b[i] == want, "element %d: %g, %g, scalar %g", i, a[i], b[i], want);
        // On the grid: g·(K + ½) for an integer K.
        double k = (double)a[i] / g - 0.5;
        ck_assert(fabs(k - nearbyint(k)) < 1e-3);
    }
    dlap_free(&t);
}
END_TEST

// Randomized rounding: E[g·(n + J + ½)] = x (to 2^-32 of g).
START_TEST(dlap_rounding_is_unbiased) {
    enum { N = 200000 };
    DLap t = make_law(16);
    const double g = 0.25;
    double mean, var, m4;
    exact_moments(&t, (long long)(60 * t.scale), &mean, &var, &m4);
    RngStream s = rng_stream(13, RNG_TEST, 0, 0);
    const float xs[] = {0.0f, 0.1f, -0.37f, 3.3f};
    for (int k = 0; k < 4; k++) {
        double acc = 0;
        for (int i = 0; i < N; i++)
            acc += dlap_value(&t, g, xs[k], &s, (uint64_t)k * N + i);
        double sd = g * sqrt(var + 0.25);   // the noise and at most the rounding's variance
        ck_assert_msg(fabs(acc / N - xs[k]) < 6 * sd / sqrt(N), "x = %g: mean %g", xs[k], acc / N);
    }
    dlap_free(&t);
}
END_TEST

// ---- the support --------------------------------------------------------------------------

// The safe sampler at input x' can give y iff y = g·(K + ½) for an integer K (the float
// map is injective here) and P(J = K − n) > 0 for a grid point n of x'.
static int safe_possible(const DLap *t, double g, float x2, float y) {
    double k = nearbyint((double)y / g - 0.5);
    if ((float)(g * (k + 0.5)) != y)
        return 0;
    double n0 = floor((double)x2 / g);
    return dlap_pmf(t, (long long)(k - n0)) > 0 || dlap_pmf(t, (long long)(k - n0 - 1)) > 0;
}

// The float sampler (x + b·rng_laplace_at in double, stored as float) at input x2, word
// pair k (the 53 bits rng_uniform_at takes); the output is non-decreasing in k.
static float float_output(float x2, double b, uint64_t k) {
    double u = ((double)k + 0.5) * (1.0 / 9007199254740992.0), d = u - 0.5;
    double lap = d < 0 ? log1p(2.0 * d) : -log1p(-2.0 * d);
    return (float)(x2 + b * lap);
}

// Whether some 53-bit word gives y at x2: the first word at or above y by bisection, then
// its neighbours (a generous window, in case the libm is not monotone to the last bit).
static int float_possible(float x2, double b, float y) {
    uint64_t lo = 0, hi = ((uint64_t)1 << 53) - 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (float_output(x2, b, mid) < y)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (uint64_t k = lo > 64 ? lo - 64 : 0; k <= lo + 64 && k < ((uint64_t)1 << 53); k++)
        if (float_output(x2, b, k) == y)
            return 1;
    return 0;
}

START_TEST(dlap_support_is_input_independent_and_float_is_not) {
    const double b = 1.0;
    const float x = 0.5f, x2 = -0.5f;
    // Safe: every output drawn at x is possible at x2 (the 2^-32 tail path aside, all of them).
    DLap t = make_law(4096);
    const double g = b / t.scale;
    RngStream s = rng_stream(17, RNG_TEST, 0, 0);
    for (int i = 0; i < 20000; i++) {
        float y = dlap_value(&t, g, x, &s, (uint64_t)i);
        ck_assert_msg(safe_possible(&t, g, x2, y), "safe: output %.9g at %g is impossible at %g", y, x, x2);
    }
    dlap_free(&t);
    // Float: outputs of the tail (words near 0, |noise| ~ 30 b) at x that no word gives at x2.
    int impossible = 0;
    for (uint64_t k = 256; k < 256 + 32; k++) {
        float y = float_output(x, b, k);
        ck_assert(float_possible(x, b, y));   // the search finds what x itself gives
        impossible += !float_possible(x2, b, y);
    }
    ck_assert_msg(impossible > 0, "the float sampler's tail outputs were all possible at the other input");
}
END_TEST

// ---- the SVT on the grid, exactly ---------------------------------------------------------
//
// Lyu et al. 2017 Alg. 1 (cap c = 1) on two queries with discrete Laplace threshold and query
// noise, the queries rounded at random: the law of its three outputs (⊤; ⊥ ⊤; ⊥ ⊥) computed
// exactly for neighbouring positions (each moved by at most s steps), against the bound the
// dp-fedasgp record uses, s·ln E_ρ + 2·c·s·(E_ν − 1). Control: positions 4s apart (a
// sensitivity understated) exceed it.

// P(ν >= k) for |k| <= R (tail[k + R]); the law's mass beyond ±R is below 2^-80 here.
static long double *tails(const DLap *nu, long R) {
    long double *h = calloc((size_t)(2 * R + 2), sizeof(long double));
    for (long k = R; k >= -R; k--)
        h[k + R] = h[k + R + 1] + dlap_pmf(nu, k);
    return h;
}

static long double tail_at(const long double *h, long R, long long k) {
    return k > R ? 0 : k < -R ? 1 : h[k + R];
}

// P(query at effective position v passes the bar b) with randomized rounding.
static long double pass(const long double *h, long R, double v, long long bar) {
    double fl = floor(v), f = v - fl;
    return (1 - f) * tail_at(h, R, bar - (long long)fl) + f * tail_at(h, R, bar - (long long)fl - 1);
}

static void svt_law(const DLap *rho, const DLap *nu, const long double *h, long R, const double v[2],
                    long double out[3]) {
    out[0] = out[1] = out[2] = 0;
    for (long long z = -R; z <= R; z++) {
        long double pz = dlap_pmf(rho, z), p0 = pass(h, R, v[0], z), p1 = pass(h, R, v[1], z);
        out[0] += pz * p0;
        out[1] += pz * (1 - p0) * p1;
        out[2] += pz * (1 - p0) * (1 - p1);
    }
}

START_TEST(svt_on_the_grid_within_its_bound) {
    DLap rho = make_law(3), nu = make_law(6);
    const long R = 1200;
    long double *h = tails(&nu, R);
    const long long s = 2;
    const double bound = (double)s * rho.log_ratio + 2.0 * 1 * (double)s * nu.lipschitz;
    static const double pairs[][2][2] = {
        {{0.25, 1.75}, {2.25, -0.25}}, {{0.5, 0.5}, {2.5, 2.5}}, {{3.0, -1.0}, {1.0, 1.0}},
        {{0.125, 4.0}, {-1.875, 2.0}}, {{10.0, -10.0}, {8.0, -8.0}},
    };
    double worst = 0, moved = 0;
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        long double a[3], b[3], c[3];
        svt_law(&rho, &nu, h, R, pairs[k][0], a);
        svt_law(&rho, &nu, h, R, pairs[k][1], b);
        ck_assert(fabsl(a[0] + a[1] + a[2] - 1) < 1e-12L);
        // Control: the same neighbours moved 4 times as far (a sensitivity understated 4x).
        const double far[2] = {pairs[k][0][0] + 4 * (pairs[k][1][0] - pairs[k][0][0]),
                               pairs[k][0][1] + 4 * (pairs[k][1][1] - pairs[k][0][1])};
        svt_law(&rho, &nu, h, R, far, c);
        for (int o = 0; o < 3; o++) {
            double r = fabs((double)logl(a[o] / b[o]));
            ck_assert_msg(r <= bound, "pair %zu, output %d: log ratio %g above the bound %g", k, o, r, bound);
            worst = fmax(worst, r);
            moved = fmax(moved, fabs((double)logl(a[o] / c[o])));
        }
    }
    ck_assert_msg(worst > 0.4 * bound, "the bound %g is far above every ratio (%g)", bound, worst);
    ck_assert_msg(moved > bound, "control: neighbours 4s apart stay within the bound (%g <= %g)", moved, bound);
    free(h);
    dlap_free(&rho);
    dlap_free(&nu);
}
END_TEST

START_TEST(dlap_bad_scales) {
    DLap t;
    FpError e = {0};
    ck_assert_int_eq(dlap_init(&t, 0.5, &e), FP_EPARAM);
    ck_assert_int_eq(dlap_init(&t, 1e12, &e), FP_EPARAM);
    ck_assert_int_eq(dlap_init(&t, NAN, &e), FP_EPARAM);
}
END_TEST

Suite *suite_dlaplace(void) {
    Suite *s = suite_create("dlaplace");
    TCase *t = tcase_create("law");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, dlap_draws_follow_the_exact_law);
    tcase_add_test(t, dlap_adjacent_ratios_within_the_stated_bound);
    tcase_add_test(t, dlap_element_indexed);
    tcase_add_test(t, dlap_rounding_is_unbiased);
    tcase_add_test(t, dlap_support_is_input_independent_and_float_is_not);
    tcase_add_test(t, svt_on_the_grid_within_its_bound);
    tcase_add_test(t, dlap_bad_scales);
    suite_add_tcase(s, t);
    return s;
}
