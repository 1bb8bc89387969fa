// Helpers shared by the CPU-vs-CUDA test files (tests/test_cuda.c, tests/test_cuda_autodiff.c):
// the SKIP rule, host/device buffers, seeded inputs and the tolerance check.
//
// Without a GPU (or without the CUDA build) every test prints
// "SKIP: no CUDA device (<reason>) [test]" and passes. FEDPRIV_REQUIRE_CUDA=1 turns a
// missing device into a failure, so a script on a GPU machine cannot pass on SKIPs.
// A GPU that is present but whose driver, cuBLAS or cuDNN fails is always a failure.
#ifndef FEDPRIV_TESTS_CUDA_CHECK_H
#define FEDPRIV_TESTS_CUDA_CHECK_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/rng.h"

// The CUDA backend, or NULL after printing SKIP when there is no device. Any other
// initialisation failure (a GPU whose driver, cuBLAS or cuDNN fails) fails the test.
static inline const Backend *gpu_or_skip(const char *test) {
    FpError err = {0};
    const Backend *g = backend_cuda(&err);
    if (g)
        return g;
    int no_device = err.code == FP_EUNSUPPORTED || strncmp(err.msg, "no CUDA device", 14) == 0;
    ck_assert_msg(no_device, "%s: the CUDA backend failed to initialise: %s", test, err.msg);
    const char *req = getenv("FEDPRIV_REQUIRE_CUDA");
    ck_assert_msg(!(req && *req && strcmp(req, "0") != 0), "%s: FEDPRIV_REQUIRE_CUDA is set but: %s", test, err.msg);
    if (strncmp(err.msg, "no CUDA device", 14) == 0)
        printf("SKIP: %s [%s]\n", err.msg, test);
    else
        printf("SKIP: no CUDA device (%s) [%s]\n", err.msg, test);
    fflush(stdout);
    return NULL;
}

#define GPU_OR_SKIP(g, name)                                                                                \
    const Backend *g = gpu_or_skip(name);                                                                  \
    if (!g)                                                                                                \
    return

static inline float *host_floats(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

static inline void fill_uniform(float *x, size_t n, float lo, float hi, unsigned seed) {
    RngStream s = rng_stream(seed, RNG_TEST, 40, 0);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * rng_uniform_at(&s, i));
}

static inline float *dev_copy(const Backend *g, const float *h, size_t n) {
    float *d = g->alloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(d);
    g->upload(d, h, n * sizeof(float));
    return d;
}

static inline float *dev_empty(const Backend *g, size_t n) {
    float *d = g->alloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(d);
    return d;
}

static inline float *from_dev(const Backend *g, const float *d, size_t n) {
    float *h = host_floats(n);
    g->download(h, d, n * sizeof(float));
    return h;
}

static inline double mean_abs(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += fabs(x[i]);
    return n ? s / n : 0;
}

// Elementwise check |got − ref| ≤ rtol·|ref| + atol (NaN only where ref is NaN); prints
// the worst ratio error/allowance and the worst relative error.
static inline void expect_close(const char *what, const float *ref, const float *got, size_t n, double rtol, double atol) {
    double worst = 0, worst_rel = 0;
    size_t at = 0, differ = 0;
    for (size_t i = 0; i < n; i++) {
        double r = ref[i], v = got[i];
        if (isnan(r) || isnan(v)) {
            if (!(isnan(r) && isnan(v))) {
                worst = INFINITY;
                at = i;
            }
            continue;
        }
        if (r == v)
            continue;
        differ++;
        double err = fabs(v - r), allow = rtol * fabs(r) + atol;
        double ratio = allow > 0 ? err / allow : INFINITY;
        if (ratio > worst) {
            worst = ratio;
            at = i;
        }
        if (r != 0 && err / fabs(r) > worst_rel)
            worst_rel = err / fabs(r);
    }
    printf("cuda %-28s n=%-8zu differing=%-7zu max rel err %.3g  (worst/allowed %.3g)\n", what, n, differ, worst_rel,
           worst);
    ck_assert_msg(worst <= 1.0, "%s: element %zu: cpu %.9g cuda %.9g (rtol %g atol %g)", what, at, ref[at], got[at],
                  rtol, atol);
}

#define EXACT(what, ref, got, n) expect_close(what, ref, got, n, 0.0, 0.0)
#define IEEE_RTOL 2.5e-7
#define TRANSC_RTOL 2e-6
// Multiply-then-add ops (affine, axpy, SGD) are bit-exact as long as neither side fuses
// them into an FMA (the kernels use __fmul_rn/__fadd_rn; GCC in ISO C mode does not fuse).
// Should a host compiler fuse anyway, a result moves by an ulp of the product (inputs are
// O(1)), which can be large relative to a cancelled sum: hence a small absolute allowance.
#define MULADD_ATOL 1e-6

#endif
