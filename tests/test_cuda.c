// CPU-vs-CUDA tests of every slot of the CUDA backend's vtable against the CPU backend
// (the oracle) on random inputs: memory, elementwise, GEMM, reductions, softmax,
// convolution (aligned and misaligned operands) and pooling (with ties). The autodiff,
// training, determinism and Philox tests are in tests/test_cuda_autodiff.c; the SKIP rule
// and helpers in tests/cuda_check.h. Every check prints its measured worst error, so a
// GPU run's log records the figures.
//
// Tolerances (docs/cuda.md explains them): element by element |cuda − cpu| ≤ rtol·|cpu| + atol.
//   data movement (fill, copy, transpose, slice, expand, neg, relu, step, abs, sign,
//     max-pool values, argmax, gather)               exact
//   single IEEE operations (add/sub/mul/div, square, sqrt, recip, avg-pool, max-pool
//     scatter)                                       rtol 2.5e-7 (2 ulp; bit-exact by design)
//   multiply-then-add (affine, axpy, SGD)            rtol 2.5e-7, atol 1e-6 (bit-exact unless a
//                                                    host compiler fuses an FMA)
//   exp, log, tanh, sigmoid                          rtol 2e-6, atol 1e-7 (CUDA's expf/tanhf: 2 ulp)
//   softmax / log_softmax                            rtol 1e-5, atol 1e-7 / 1e-6 (summation order)
//   gemm, convolution                                rtol 1e-4, atol 1e-4·mean|cpu| (order, algorithm)
//   sum, dot                                         1e-12·Σ|x| (both accumulate in double)
//   sum_broadcast                                    1e-5·Σ|x| per output (the CPU sums float runs)
#include "tests/cuda_check.h"

#ifdef FEDPRIV_HAVE_CUDA
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_internal.h"
#endif

// -- memory and elementwise ---------------------------------------------------------------
START_TEST(cuda_memory_and_elementwise) {
    GPU_OR_SKIP(g, "memory_and_elementwise");
    const Backend *c = backend_cpu();
#ifdef FEDPRIV_HAVE_CUDA
    char desc[512];
    FpError err = {0};
    if (cuda_device_describe(desc, sizeof desc, &err) == FP_OK)
        printf("cuda device: %s\n", desc);
#endif
    FpError e2 = {0};
    ck_assert_ptr_eq(backend_by_name("cuda", &e2), g);
    const size_t n = 100003;
    float *x = host_floats(n), *y = host_floats(n), *ref = host_floats(n), *b = host_floats(n);
    fill_uniform(x, n, -2.0f, 2.0f, 1);
    fill_uniform(b, n, 0.5f, 1.5f, 2);
    float *dx = dev_copy(g, x, n), *dy = dev_empty(g, n), *db = dev_copy(g, b, n);

    // round trip, device copy, overlapping copy (memmove semantics), fill
    float *back = from_dev(g, dx, n);
    EXACT("upload/download", x, back, n);
    free(back);
    g->copy(dy, dx, n * sizeof(float));
    back = from_dev(g, dy, n);
    EXACT("copy", x, back, n);
    free(back);
    memcpy(ref, x, n * sizeof(float));
    memmove(ref + 7, ref, 5000 * sizeof(float));
    g->copy(dy + 7, dy, 5000 * sizeof(float));
    back = from_dev(g, dy, n);
    EXACT("copy overlapping", ref, back, n);
    free(back);
    const float fills[2] = {0.0f, -1.25f};
    for (int f = 0; f < 2; f++) {
        c->fill(ref, n, fills[f]);
        g->fill(dy, n, fills[f]);
        back = from_dev(g, dy, n);
        EXACT("fill", ref, back, n);
        free(back);
    }

    // unary: inputs in each op's domain
    static const char *un_name[UN_COUNT] = {"neg", "exp", "log", "sigmoid", "tanh", "relu",
                                            "step", "square", "sqrt", "recip", "abs", "sign"};
    for (int op = 0; op < UN_COUNT; op++) {
        const float *in = (op == UN_LOG || op == UN_SQRT || op == UN_RECIP) ? b : x;
        float *din = (op == UN_LOG || op == UN_SQRT || op == UN_RECIP) ? db : dx;
        c->unary((UnaryOp)op, n, in, ref);
        g->unary((UnaryOp)op, n, din, dy);
        back = from_dev(g, dy, n);
        char what[40];
        snprintf(what, sizeof what, "unary %s", un_name[op]);
        int transc = op == UN_EXP || op == UN_LOG || op == UN_SIGMOID || op == UN_TANH;
        int ieee = op == UN_SQUARE || op == UN_SQRT || op == UN_RECIP;
        expect_close(what, ref, back, n, transc ? TRANSC_RTOL : ieee ? IEEE_RTOL : 0.0, transc ? 1e-7 : 0.0);
        free(back);
    }
    c->affine(n, x, -1.75f, 0.3f, ref);
    g->affine(n, dx, -1.75f, 0.3f, dy);
    back = from_dev(g, dy, n);
    expect_close("affine", ref, back, n, IEEE_RTOL, MULADD_ATOL);
    free(back);

    // binary and expand with every broadcast layout: (inner, nb)
    const size_t n2 = 6 * 5 * 7 * 3; // (6,5,7,3)
    const struct { size_t inner, nb; const char *name; } bc[] = {
        {1, n2, "same"}, {1, 3, "row"}, {21, 5, "channel"}, {105, 6, "column"}, {n2, 1, "scalar"}, {7, 15, "mixed"}};
    static const char *bin_name[BIN_COUNT] = {"add", "sub", "mul", "div", "sigmoid_grad"};
    for (size_t k = 0; k < sizeof bc / sizeof bc[0]; k++) {
        for (int op = 0; op < BIN_COUNT; op++) {
            c->binary((BinaryOp)op, n2, x, b, bc[k].inner, bc[k].nb, ref);
            g->binary((BinaryOp)op, n2, dx, db, bc[k].inner, bc[k].nb, dy);
            back = from_dev(g, dy, n2);
            char what[48];
            snprintf(what, sizeof what, "binary %s %s", bin_name[op], bc[k].name);
            expect_close(what, ref, back, n2, IEEE_RTOL, 0);
            free(back);
        }
        c->expand(n2, b, bc[k].inner, bc[k].nb, ref);
        g->expand(n2, db, bc[k].inner, bc[k].nb, dy);
        back = from_dev(g, dy, n2);
        char what[48];
        snprintf(what, sizeof what, "expand %s", bc[k].name);
        EXACT(what, ref, back, n2);
        free(back);
    }

    // transpose, slice_copy
    const int shapes[][2] = {{37, 53}, {1, 300}, {300, 1}, {64, 64}, {3, 2000}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int r = shapes[k][0], cl = shapes[k][1];
        c->transpose(r, cl, x, ref);
        g->transpose(r, cl, dx, dy);
        back = from_dev(g, dy, (size_t)r * cl);
        EXACT("transpose", ref, back, (size_t)r * cl);
        free(back);
    }
    // (outer 4, dim 9, inner 5): take rows 2..7 into a (4, 12, 5) buffer at offset 3
    c->fill(ref, 4 * 12 * 5, 0.5f);
    g->fill(dy, 4 * 12 * 5, 0.5f);
    c->slice_copy(4, 5, 9, 2, 12, 3, 6, x, ref);
    g->slice_copy(4, 5, 9, 2, 12, 3, 6, dx, dy);
    back = from_dev(g, dy, 4 * 12 * 5);
    EXACT("slice_copy", ref, back, 4 * 12 * 5);
    free(back);

    // axpy and SGD (plain, and momentum with weight decay)
    memcpy(ref, b, n * sizeof(float));
    c->axpy(n, -0.37f, x, ref);
    g->axpy(n, -0.37f, dx, db);
    back = from_dev(g, db, n);
    expect_close("axpy", ref, back, n, IEEE_RTOL, MULADD_ATOL);
    free(back);
    g->upload(db, b, n * sizeof(float)); // the gradient for the SGD steps: b again
    for (int mom = 0; mom < 2; mom++) {
        float *w = host_floats(n), *v = host_floats(n);
        memcpy(w, x, n * sizeof(float));
        fill_uniform(v, n, -0.1f, 0.1f, 3);
        float *dw = dev_copy(g, w, n), *dv = dev_copy(g, v, n);
        for (int step = 0; step < 3; step++) {
            c->sgd_step(n, w, b, v, 0.05f, mom ? 0.9f : 0.0f, 5e-4f);
            g->sgd_step(n, dw, db, dv, 0.05f, mom ? 0.9f : 0.0f, 5e-4f);
        }
        float *gw = from_dev(g, dw, n), *gv = from_dev(g, dv, n);
        expect_close(mom ? "sgd momentum w" : "sgd plain w", w, gw, n, IEEE_RTOL, MULADD_ATOL);
        expect_close(mom ? "sgd momentum v" : "sgd plain v (untouched)", v, gv, n, IEEE_RTOL, MULADD_ATOL);
        free(gw);
        free(gv);
        free(w);
        free(v);
        g->free(dw);
        g->free(dv);
    }
    g->sync();
    g->free(dx);
    g->free(dy);
    g->free(db);
    free(x);
    free(y);
    free(ref);
    free(b);
}
END_TEST

// -- GEMM -----------------------------------------------------------------------------------
START_TEST(cuda_gemm_matches_cpu) {
    GPU_OR_SKIP(g, "gemm");
    const Backend *c = backend_cpu();
    const struct { int m, n, k; float alpha, beta; } cases[] = {
        {37, 29, 53, 1.0f, 0.0f}, {1, 64, 128, 0.5f, 1.0f}, {128, 1, 7, 1.0f, 0.5f},
        {128, 256, 512, 1.0f, 0.0f}, {5, 6, 0, 1.0f, 0.25f}, {5, 6, 0, 1.0f, 0.0f}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int m = cases[t].m, n = cases[t].n, k = cases[t].k;
                size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
                float *a = host_floats(na), *b = host_floats(nb), *cc = host_floats(nc);
                fill_uniform(a, na, -1, 1, 10 + (unsigned)t);
                fill_uniform(b, nb, -1, 1, 20 + (unsigned)t);
                fill_uniform(cc, nc, -1, 1, 30 + (unsigned)t);
                if (cases[t].beta == 0.0f) // beta 0 must not read c (cuBLAS and OpenBLAS both)
                    for (size_t i = 0; i < nc; i++)
                        cc[i] = NAN;
                float *da = dev_copy(g, a, na), *db = dev_copy(g, b, nb), *dc = dev_copy(g, cc, nc);
                c->gemm(ta, tb, m, n, k, cases[t].alpha, a, b, cases[t].beta, cc);
                g->gemm(ta, tb, m, n, k, cases[t].alpha, da, db, cases[t].beta, dc);
                float *got = from_dev(g, dc, nc);
                char what[64];
                snprintf(what, sizeof what, "gemm %dx%dx%d t%d%d b%g", m, n, k, ta, tb, cases[t].beta);
                expect_close(what, cc, got, nc, 1e-4, 1e-4 * mean_abs(cc, nc));
                free(got);
                free(a);
                free(b);
                free(cc);
                g->free(da);
                g->free(db);
                g->free(dc);
            }
}
END_TEST

// -- reductions ----------------------------------------------------------------------------
START_TEST(cuda_reductions) {
    GPU_OR_SKIP(g, "reductions");
    const Backend *c = backend_cpu();
    const size_t big = 1000003;
    float *x = host_floats(big), *y = host_floats(big);
    fill_uniform(x, big, -1, 1, 50);
    fill_uniform(y, big, -1, 1, 51);
    float *dx = dev_copy(g, x, big), *dy = dev_copy(g, y, big);
    const size_t sizes[] = {1, 1000, 4097, big};
    for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k];
        double abs_sum = 0, abs_dot = 0;
        for (size_t i = 0; i < n; i++) {
            abs_sum += fabs(x[i]);
            abs_dot += fabs((double)x[i] * y[i]);
        }
        double s_c = c->sum(n, x), s_g = g->sum(n, dx), d_c = c->dot(n, x, y), d_g = g->dot(n, dx, dy);
        printf("cuda sum n=%zu: |diff| %.3g (allowed %.3g); dot: |diff| %.3g (allowed %.3g)\n", n, fabs(s_c - s_g),
               1e-12 * abs_sum, fabs(d_c - d_g), 1e-12 * abs_dot);
        ck_assert_msg(fabs(s_c - s_g) <= 1e-12 * abs_sum, "sum n=%zu: cpu %.17g cuda %.17g", n, s_c, s_g);
        ck_assert_msg(fabs(d_c - d_g) <= 1e-12 * abs_dot, "dot n=%zu: cpu %.17g cuda %.17g", n, d_c, d_g);
    }
    ck_assert(g->sum(0, dx) == 0.0);

    // sum_broadcast: (n, inner, nb) covering the one-thread-per-output path, the partial-sum
    // path, a truncated last chunk, inner > n and nb larger than the number of chunks
    const struct { size_t n, inner, nb; } sb[] = {
        {30, 1, 5},          {64 * 10, 10, 64},    {8 * 16 * 1024, 1024, 16}, {big, big, 1},
        {100, 7, 3},         {50, 80, 1},          {12, 2, 20},               {600 * 300, 1, 300},
        {256 * 512, 1, 512}, {3 * 4096 * 5, 5, 4096}};
    for (size_t k = 0; k < sizeof sb / sizeof sb[0]; k++) {
        size_t n = sb[k].n, inner = sb[k].inner, nb = sb[k].nb;
        float *ref = host_floats(nb), *dout = dev_empty(g, nb);
        double *absum = calloc(nb, sizeof(double));
        for (size_t i = 0; i < n; i++)
            absum[(i / inner) % nb] += fabs(x[i]);
        c->sum_broadcast(n, x, inner, nb, ref);
        g->sum_broadcast(n, dx, inner, nb, dout);
        float *got = from_dev(g, dout, nb);
        double worst = 0;
        size_t at = 0;
        for (size_t j = 0; j < nb; j++) {
            double err = fabs((double)got[j] - ref[j]), allow = 1e-5 * absum[j] + 1e-30;
            if (err / allow > worst) {
                worst = err / allow;
                at = j;
            }
        }
        printf("cuda sum_broadcast n=%zu inner=%zu nb=%zu: worst/allowed %.3g\n", n, inner, nb, worst);
        ck_assert_msg(worst <= 1.0, "sum_broadcast n=%zu inner=%zu nb=%zu: output %zu cpu %.9g cuda %.9g", n, inner,
                      nb, at, ref[at], got[at]);
        free(got);
        free(ref);
        free(absum);
        g->free(dout);
    }

    // all_finite
    ck_assert_int_eq(g->all_finite(big, dx), 1);
    ck_assert_int_eq(g->all_finite(0, dx), 1);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        float keep = x[777777];
        g->upload(dx + 777777, &bad[k], sizeof(float));
        ck_assert_int_eq(g->all_finite(big, dx), 0);
        ck_assert_int_eq(g->all_finite(777777, dx), 1);
        g->upload(dx + 777777, &keep, sizeof(float));
    }
    ck_assert_int_eq(g->all_finite(big, dx), 1);
    g->free(dx);
    g->free(dy);
    free(x);
    free(y);
}
END_TEST

START_TEST(cuda_softmax_matches_cpu) {
    GPU_OR_SKIP(g, "softmax");
    const Backend *c = backend_cpu();
    const int shapes[][2] = {{5, 10}, {300, 1000}, {1, 1}, {64, 33}, {2, 4096}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int r = shapes[k][0], cl = shapes[k][1];
        size_t n = (size_t)r * cl;
        float *x = host_floats(n), *ref = host_floats(n);
        fill_uniform(x, n, -6, 6, 60 + (unsigned)k);
        float *dx = dev_copy(g, x, n), *dy = dev_empty(g, n);
        c->softmax(r, cl, x, ref);
        g->softmax(r, cl, dx, dy);
        float *got = from_dev(g, dy, n);
        expect_close("softmax", ref, got, n, 1e-5, 1e-7);
        free(got);
        c->log_softmax(r, cl, x, ref);
        g->log_softmax(r, cl, dx, dy);
        got = from_dev(g, dy, n);
        expect_close("log_softmax", ref, got, n, 1e-5, 1e-6);
        free(got);
        free(x);
        free(ref);
        g->free(dx);
        g->free(dy);
    }
}
END_TEST

// -- convolution ----------------------------------------------------------------------------
static const ConvGeom conv_cases[] = {
    // n, c_in, h_in, w_in, c_out, kh, kw, stride, pad (h_out, w_out filled in)
    {2, 3, 8, 8, 4, 3, 3, 1, 0, 0, 0},     {3, 3, 9, 7, 4, 5, 3, 2, 2, 0, 0},   {1, 3, 32, 32, 12, 5, 5, 2, 2, 0, 0},
    {8, 16, 16, 16, 32, 3, 3, 1, 1, 0, 0}, {4, 8, 10, 10, 8, 1, 1, 2, 0, 0, 0}, {16, 64, 8, 8, 64, 3, 3, 1, 1, 0, 0},
    {2, 2, 6, 6, 3, 4, 4, 3, 1, 0, 0},     {32, 3, 32, 32, 16, 3, 3, 1, 1, 0, 0},
};
#define N_CONV ((int)(sizeof conv_cases / sizeof conv_cases[0]))

START_TEST(cuda_conv_matches_cpu) {
    GPU_OR_SKIP(g, "conv");
    const Backend *c = backend_cpu();
    ConvGeom geo = conv_cases[_i];
    geo.h_out = (geo.h_in + 2 * geo.pad - geo.kh) / geo.stride + 1;
    geo.w_out = (geo.w_in + 2 * geo.pad - geo.kw) / geo.stride + 1;
    size_t nx = (size_t)geo.n * geo.c_in * geo.h_in * geo.w_in, nw = (size_t)geo.c_out * geo.c_in * geo.kh * geo.kw;
    size_t ny = (size_t)geo.n * geo.c_out * geo.h_out * geo.w_out;
    float *x = host_floats(nx), *w = host_floats(nw), *dy = host_floats(ny);
    float *y = host_floats(ny), *dx = host_floats(nx), *dw = host_floats(nw);
    fill_uniform(x, nx, -1, 1, 70 + _i);
    fill_uniform(w, nw, -1, 1, 80 + _i);
    fill_uniform(dy, ny, -1, 1, 90 + _i);
    c->conv2d_forward(&geo, x, w, y, NULL, 0);
    c->conv2d_backward_data(&geo, dy, w, dx);
    c->conv2d_backward_filter(&geo, x, dy, dw, NULL, 0);
    // Twice: operands aligned, then every operand one float off 16-byte alignment (a view
    // into a flat parameter buffer), which the backend must stage.
    for (int off = 0; off < 2; off++) {
        float *gx = dev_empty(g, nx + 1), *gw = dev_empty(g, nw + 1), *gdy = dev_empty(g, ny + 1);
        float *gy = dev_empty(g, ny + 1), *gdx = dev_empty(g, nx + 1), *gdw = dev_empty(g, nw + 1);
        g->upload(gx + off, x, nx * sizeof(float));
        g->upload(gw + off, w, nw * sizeof(float));
        g->upload(gdy + off, dy, ny * sizeof(float));
        g->conv2d_forward(&geo, gx + off, gw + off, gy + off, NULL, 0);
        g->conv2d_backward_data(&geo, gdy + off, gw + off, gdx + off);
        g->conv2d_backward_filter(&geo, gx + off, gdy + off, gdw + off, NULL, 0);
        float *hy = from_dev(g, gy + off, ny), *hdx = from_dev(g, gdx + off, nx), *hdw = from_dev(g, gdw + off, nw);
        char what[3][96];
        const char *dir[3] = {"fwd", "bwd_data", "bwd_filter"};
        for (int d = 0; d < 3; d++)
            snprintf(what[d], sizeof what[d], "conv%d %s%s", _i, dir[d], off ? " misaligned" : "");
        expect_close(what[0], y, hy, ny, 1e-4, 1e-4 * mean_abs(y, ny));
        expect_close(what[1], dx, hdx, nx, 1e-4, 1e-4 * mean_abs(dx, nx));
        expect_close(what[2], dw, hdw, nw, 1e-4, 1e-4 * mean_abs(dw, nw));
        free(hy);
        free(hdx);
        free(hdw);
        g->free(gx);
        g->free(gw);
        g->free(gdy);
        g->free(gy);
        g->free(gdx);
        g->free(gdw);
    }
    // per-example weight gradients (DP-SGD's): row i is example i's alone
    float *pw = host_floats(nw * geo.n);
    c->conv2d_backward_filter_per_example(&geo, x, dy, pw);
    float *gx = dev_empty(g, nx), *gdy = dev_empty(g, ny), *gpw = dev_empty(g, nw * geo.n);
    g->upload(gx, x, nx * sizeof(float));
    g->upload(gdy, dy, ny * sizeof(float));
    g->conv2d_backward_filter_per_example(&geo, gx, gdy, gpw);
    float *hpw = from_dev(g, gpw, nw * geo.n);
    char pwhat[96];
    snprintf(pwhat, sizeof pwhat, "conv%d bwd_filter per example", _i);
    expect_close(pwhat, pw, hpw, nw * geo.n, 1e-4, 1e-4 * mean_abs(pw, nw * geo.n));
    free(hpw);
    free(pw);
    g->free(gx);
    g->free(gdy);
    g->free(gpw);
#ifdef FEDPRIV_HAVE_CUDA
    char plans[2048];
    cuda_conv_describe_plans(plans, sizeof plans);
    printf("cuda conv%d algorithms: %s", _i, plans);
#endif
    free(x);
    free(w);
    free(dy);
    free(y);
    free(dx);
    free(dw);
}
END_TEST

// -- pooling --------------------------------------------------------------------------------
static const PoolGeom pool_cases[] = {
    // n, c, h_in, w_in, k, stride (h_out, w_out filled in)
    {2, 3, 8, 8, 2, 2, 0, 0}, {2, 2, 9, 9, 3, 2, 0, 0}, {1, 4, 7, 5, 3, 1, 0, 0}, {3, 2, 8, 8, 2, 3, 0, 0},
    {16, 32, 32, 32, 2, 2, 0, 0}};
#define N_POOL ((int)(sizeof pool_cases / sizeof pool_cases[0]))

START_TEST(cuda_pool_matches_cpu) {
    GPU_OR_SKIP(g, "pool");
    const Backend *c = backend_cpu();
    PoolGeom pg = pool_cases[_i];
    pg.h_out = (pg.h_in - pg.k) / pg.stride + 1;
    pg.w_out = (pg.w_in - pg.k) / pg.stride + 1;
    size_t nx = (size_t)pg.n * pg.c * pg.h_in * pg.w_in, ny = (size_t)pg.n * pg.c * pg.h_out * pg.w_out;
    for (int ties = 0; ties < 2; ties++) {
        float *x = host_floats(nx), *dy = host_floats(ny), *y = host_floats(ny), *dx = host_floats(nx);
        int32_t *am = malloc(ny * sizeof(int32_t)), *gam_h = malloc(ny * sizeof(int32_t));
        fill_uniform(x, nx, -1, 1, 100 + _i);
        if (ties) // few distinct values: many ties, which must go to the first in the window
            for (size_t i = 0; i < nx; i++)
                x[i] = floorf(x[i] * 2.0f);
        fill_uniform(dy, ny, -1, 1, 110 + _i);
        float *gx = dev_copy(g, x, nx), *gdy = dev_copy(g, dy, ny), *gy = dev_empty(g, ny), *gdx = dev_empty(g, nx);
        int32_t *gam = (int32_t *)dev_empty(g, ny);
        c->maxpool_forward(&pg, x, y, am);
        g->maxpool_forward(&pg, gx, gy, gam);
        float *h = from_dev(g, gy, ny);
        EXACT(ties ? "maxpool fwd (ties)" : "maxpool fwd", y, h, ny);
        free(h);
        g->download(gam_h, gam, ny * sizeof(int32_t));
        for (size_t i = 0; i < ny; i++)
            ck_assert_msg(am[i] == gam_h[i], "maxpool argmax %zu: cpu %d cuda %d", i, am[i], gam_h[i]);
        c->maxpool_scatter(&pg, dy, am, dx);
        g->maxpool_scatter(&pg, gdy, gam, gdx);
        h = from_dev(g, gdx, nx);
        expect_close("maxpool scatter", dx, h, nx, IEEE_RTOL, 0);
        free(h);
        c->maxpool_gather(&pg, x, am, y);
        g->maxpool_gather(&pg, gx, gam, gy);
        h = from_dev(g, gy, ny);
        EXACT("maxpool gather", y, h, ny);
        free(h);
        c->avgpool_forward(&pg, x, y);
        g->avgpool_forward(&pg, gx, gy);
        h = from_dev(g, gy, ny);
        expect_close("avgpool fwd", y, h, ny, IEEE_RTOL, 0);
        free(h);
        c->avgpool_backward(&pg, dy, dx);
        g->avgpool_backward(&pg, gdy, gdx);
        h = from_dev(g, gdx, nx);
        expect_close("avgpool bwd", dx, h, nx, IEEE_RTOL, 0);
        free(h);
        g->free(gx);
        g->free(gdy);
        g->free(gy);
        g->free(gdx);
        g->free(gam);
        free(x);
        free(dy);
        free(y);
        free(dx);
        free(am);
        free(gam_h);
    }
}
END_TEST

// cuBLAS is opened at initialisation, not linked (core/cuda/cuda_blas.c): this needs no GPU,
// so it runs wherever the CUDA backend is built. Every entry point resolves, and the one
// call that needs no device answers.
START_TEST(cuda_blas_opens) {
#ifdef FEDPRIV_HAVE_CUDA
    CudaBlasApi api = {0};
    FpError err = {0};
    ck_assert_msg(cuda_blas_load(&api, &err) == FP_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(api.library);
    ck_assert_ptr_nonnull(api.create);
    ck_assert_ptr_nonnull(api.set_math_mode);
    ck_assert_ptr_nonnull(api.sgemm);
    ck_assert_ptr_nonnull(api.status_string);
    const char *ok = api.status_string(CUBLAS_STATUS_SUCCESS);
    ck_assert_ptr_nonnull(ok);
    ck_assert_uint_gt(strlen(ok), 0);
    ck_assert_str_ne(ok, api.status_string(CUBLAS_STATUS_NOT_INITIALIZED)); // a real table, not one string
    printf("cuda_blas_opens: %s: \"%s\"\n", cuda_blas_soname(), ok);
#else
    printf("SKIP: this build has no CUDA backend [cuda_blas_opens]\n");
#endif
}
END_TEST

Suite *suite_cuda(void) {
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("cpu_vs_cuda_ops");
    // Generous: the first CUDA call of each forked test creates a context and loads kernels.
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cuda_blas_opens);
    tcase_add_test(tc, cuda_memory_and_elementwise);
    tcase_add_test(tc, cuda_gemm_matches_cpu);
    tcase_add_test(tc, cuda_reductions);
    tcase_add_test(tc, cuda_softmax_matches_cpu);
    tcase_add_loop_test(tc, cuda_conv_matches_cpu, 0, N_CONV);
    tcase_add_loop_test(tc, cuda_pool_matches_cpu, 0, N_POOL);
    suite_add_tcase(s, tc);
    return s;
}
