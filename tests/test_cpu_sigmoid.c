// The CPU backend's sigmoid (core/cpu/cpu_kernels.h: a vectorisable exponential instead
// of libm's expf) against σ in double precision, and a check that an output a few ulp
// off is caught.
//
// The bound, from the kernel's three roundings: e = e^−|x| is within 1.02 ulp (the
// exponential's measured worst case on [ln 2⁻¹²⁶, 0]), i.e. a relative error under
// 2.04·2⁻²⁴; σ = (1 or e)/(1 + e) passes e's relative error on with a factor 1/(1 + e) ≤ 1,
// and the sum and the division add 2⁻²⁴ each. So σ is within 4.04·2⁻²⁴ relative, which
// is at most 4.04 ulp of the result (an ulp is at least 2⁻²⁴ of it). Below the smallest
// normal float the kernel returns 0 or the subnormal it computes: there the check is
// absolute, 2⁻¹²⁶.
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/backend.h"

#define SIGMOID_ULP_BOUND 4.04
#define GRID_LO -100.0
#define GRID_STEP 1.0e-4
#define GRID_N 2000001 // x from −100 to 100 in steps of 10⁻⁴

static double sigmoid_exact(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

// The largest error of y[i] = σ(x[i]) in ulps of the exact value, over outputs of at
// least FLT_MIN; *abs_small gets the largest absolute error over the smaller ones.
static double max_ulp_error(const float *x, const float *y, size_t n, double *abs_small) {
    double worst = 0.0;
    *abs_small = 0.0;
    for (size_t i = 0; i < n; i++) {
        double want = sigmoid_exact(x[i]), err = fabs((double)y[i] - want);
        if (want < FLT_MIN) {
            if (err > *abs_small)
                *abs_small = err;
            continue;
        }
        int e;
        frexp(want, &e);
        double ulps = err / ldexp(1.0, e - 24);
        if (!(ulps <= worst)) // a NaN output counts as the worst
            worst = isnan(ulps) ? INFINITY : ulps;
    }
    return worst;
}

static float *grid(void) {
    float *x = malloc(sizeof(float) * GRID_N);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < GRID_N; i++)
        x[i] = (float)(GRID_LO + GRID_STEP * (double)i);
    return x;
}

// The CPU backend's σ on the grid into *y (both arrays the caller's to free).
static float *sigmoid_on_grid(const Backend **be, float **y) {
    FpError err;
    *be = backend_by_name("cpu", &err);
    ck_assert_ptr_nonnull(*be);
    float *x = grid();
    *y = malloc(sizeof(float) * GRID_N);
    ck_assert_ptr_nonnull(*y);
    (*be)->unary(UN_SIGMOID, GRID_N, x, *y);
    return x;
}

START_TEST(sigmoid_within_its_error_bound) {
    const Backend *be;
    float *y, *x = sigmoid_on_grid(&be, &y);
    double small, worst = max_ulp_error(x, y, GRID_N, &small);
    fprintf(stderr, "sigmoid: largest error %.3f ulp, %.3g absolute below FLT_MIN (bound %.2f ulp)\n", worst, small,
            SIGMOID_ULP_BOUND);
    ck_assert_msg(worst <= SIGMOID_ULP_BOUND, "sigmoid error %.3f ulp exceeds the bound %.2f", worst, SIGMOID_ULP_BOUND);
    ck_assert_msg(small <= ldexp(1.0, -126), "sigmoid error %.3g below FLT_MIN", small);
    // σ(0) = 1/2 exactly; the limits and NaN.
    const float special[5] = {0.0f, -INFINITY, INFINITY, NAN, -0.0f};
    float out[5];
    be->unary(UN_SIGMOID, 5, special, out);
    ck_assert(out[0] == 0.5f && out[1] == 0.0f && out[2] == 1.0f && isnan(out[3]) && out[4] == 0.5f);
    free(x);
    free(y);
}
END_TEST

// The same measure catches a sigmoid whose outputs are 5 ulp off (in either direction,
// alternating), just past the bound.
START_TEST(sigmoid_check_catches_an_inaccurate_kernel) {
    const Backend *be;
    float *y, *x = sigmoid_on_grid(&be, &y);
    for (size_t i = 0; i < GRID_N; i++)
        for (int k = 0; k < 5; k++)
            y[i] = nextafterf(y[i], i % 2 ? 2.0f : 0.0f);
    double small, worst = max_ulp_error(x, y, GRID_N, &small);
    ck_assert_msg(worst > SIGMOID_ULP_BOUND, "a sigmoid 5 ulp off measured %.3f ulp, within the bound", worst);
    free(x);
    free(y);
}
END_TEST

Suite *suite_cpu_sigmoid(void) {
    Suite *s = suite_create("cpu_sigmoid");
    TCase *tc = tcase_create("accuracy");
    tcase_add_test(tc, sigmoid_within_its_error_bound);
    tcase_add_test(tc, sigmoid_check_catches_an_inaccurate_kernel);
    suite_add_tcase(s, tc);
    return s;
}
