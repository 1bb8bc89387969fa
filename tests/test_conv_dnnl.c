// The CPU backend's oneDNN convolutions (core/cpu/cpu_conv_dnnl.c) against the im2col
// path (core/cpu/cpu_conv.c), the oracle, for all three directions on random geometries
// and LeNet's; and their determinism. In a build without oneDNN (DNNL=0) the suite
// prints SKIP and passes.
//
// Tolerance, per output element: each side computes a sum of k products in float, in
// its own order (blocked, FMA), so each is within γ_k·S of the exact sum, with
// S = Σ|a|·|b| over the same products and γ_k = k·u/(1 − k·u), u = 2⁻²⁴ (any summation
// order; Higham, Accuracy and Stability, §3.1). The two differ by at most 2·γ_k·S.
// k is c_in·kh·kw (forward), at most c_out·kh·kw (input gradient), n·h_out·w_out
// (weight gradient); S is computed in double by the direct loops below.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"

#ifdef FEDPRIV_HAVE_DNNL
#include <omp.h>

#include "core/cpu/cpu_kernels.h"
#include "core/rng.h"

typedef struct ConvCase {
    ConvGeom g;
    size_t nx, nw, ny;
    float *x, *w, *dy;
    double *sy, *sdx, *sdw; // S per element of y, dx, dw
} ConvCase;

static ConvGeom geom(int n, int c_in, int h, int w, int c_out, int k, int stride, int pad) {
    ConvGeom g = {.n = n, .c_in = c_in, .h_in = h, .w_in = w, .c_out = c_out, .kh = k, .kw = k, .stride = stride,
                  .pad = pad};
    g.h_out = (h + 2 * pad - k) / stride + 1;
    g.w_out = (w + 2 * pad - k) / stride + 1;
    return g;
}

static void case_init(ConvCase *c, const ConvGeom *g, uint32_t seed) {
    c->g = *g;
    c->nx = (size_t)g->n * g->c_in * g->h_in * g->w_in;
    c->nw = (size_t)g->c_out * g->c_in * g->kh * g->kw;
    c->ny = (size_t)g->n * g->c_out * g->h_out * g->w_out;
    c->x = malloc(c->nx * 4), c->w = malloc(c->nw * 4), c->dy = malloc(c->ny * 4);
    c->sy = calloc(c->ny, 8), c->sdx = calloc(c->nx, 8), c->sdw = calloc(c->nw, 8);
    RngStream rs = rng_stream(11, RNG_TEST, 7, seed);
    for (size_t i = 0; i < c->nx; i++) c->x[i] = (float)rng_next_normal(&rs);
    for (size_t i = 0; i < c->nw; i++) c->w[i] = (float)rng_next_normal(&rs);
    for (size_t i = 0; i < c->ny; i++) c->dy[i] = (float)rng_next_normal(&rs);
    // x (n, c_in, h_in, w_in), w (c_out, c_in, kh, kw), y (n, c_out, h_out, w_out)
    for (int n = 0; n < g->n; n++)
        for (int co = 0; co < g->c_out; co++)
            for (int oy = 0; oy < g->h_out; oy++)
                for (int ox = 0; ox < g->w_out; ox++) {
                    size_t yi = ((size_t)(n * g->c_out + co) * g->h_out + oy) * g->w_out + ox;
                    for (int ci = 0; ci < g->c_in; ci++)
                        for (int ki = 0; ki < g->kh; ki++)
                            for (int kj = 0; kj < g->kw; kj++) {
                                int iy = oy * g->stride - g->pad + ki, ix = ox * g->stride - g->pad + kj;
                                if (iy < 0 || iy >= g->h_in || ix < 0 || ix >= g->w_in)
                                    continue;
                                size_t xi = ((size_t)(n * g->c_in + ci) * g->h_in + iy) * g->w_in + ix;
                                size_t wi = ((size_t)(co * g->c_in + ci) * g->kh + ki) * g->kw + kj;
                                c->sy[yi] += fabs((double)c->x[xi] * c->w[wi]);
                                c->sdx[xi] += fabs((double)c->dy[yi] * c->w[wi]);
                                c->sdw[wi] += fabs((double)c->x[xi] * c->dy[yi]);
                            }
                }
}

static void case_free(ConvCase *c) {
    free(c->x), free(c->w), free(c->dy), free(c->sy), free(c->sdx), free(c->sdw);
}

// Elements where a and b differ by more than 2·γ_k·S.
static size_t beyond_bound(const float *a, const float *b, const double *s, size_t n, double k) {
    double u = ldexp(1.0, -24), gamma = k * u / (1 - k * u);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += fabs((double)a[i] - b[i]) > 2 * gamma * s[i];
    return bad;
}

typedef struct Outputs {
    float *y, *dx, *dw;
} Outputs;

static void outputs_alloc(Outputs *o, const ConvCase *c) {
    o->y = malloc(c->ny * 4), o->dx = malloc(c->nx * 4), o->dw = malloc(c->nw * 4);
}
static void outputs_free(Outputs *o) { free(o->y), free(o->dx), free(o->dw); }

static void run_dnnl(const ConvCase *c, Outputs *o) {
    dnnl_conv2d_forward(&c->g, c->x, c->w, o->y, NULL, 0);
    dnnl_conv2d_backward_data(&c->g, c->dy, c->w, o->dx);
    dnnl_conv2d_backward_filter(&c->g, c->x, c->dy, o->dw, NULL, 0);
}

static void run_im2col(const ConvCase *c, Outputs *o) {
    cpu_conv2d_forward(&c->g, c->x, c->w, o->y, NULL, 0);
    cpu_conv2d_backward_data(&c->g, c->dy, c->w, o->dx);
    cpu_conv2d_backward_filter(&c->g, c->x, c->dy, o->dw, NULL, 0);
}

// Checks one case; returns how many of its three directions oneDNN ran.
static int check_case(const ConvGeom *g, uint32_t seed) {
    ConvCase c;
    case_init(&c, g, seed);
    Outputs d, r;
    outputs_alloc(&d, &c);
    outputs_alloc(&r, &c);
    run_dnnl(&c, &d);
    run_im2col(&c, &r);
    double k_fwd = g->c_in * g->kh * g->kw, k_bd = g->c_out * g->kh * g->kw, k_bf = (double)g->n * g->h_out * g->w_out;
    ck_assert_msg(beyond_bound(d.y, r.y, c.sy, c.ny, k_fwd) == 0, "forward differs, case %u", seed);
    ck_assert_msg(beyond_bound(d.dx, r.dx, c.sdx, c.nx, k_bd) == 0, "backward-data differs, case %u", seed);
    ck_assert_msg(beyond_bound(d.dw, r.dw, c.sdw, c.nw, k_bf) == 0, "backward-filter differs, case %u", seed);
    int taken = 0;
    for (int dir = 0; dir < 3; dir++)
        taken += dnnl_conv2d_takes(g, dir, NULL, 0);
    outputs_free(&d), outputs_free(&r), case_free(&c);
    return taken;
}

static const ConvGeom lenet[3] = {
    {.n = 8, .c_in = 1, .h_in = 28, .w_in = 28, .c_out = 12, .kh = 5, .kw = 5, .stride = 2, .pad = 2, .h_out = 14, .w_out = 14},
    {.n = 8, .c_in = 12, .h_in = 14, .w_in = 14, .c_out = 12, .kh = 5, .kw = 5, .stride = 2, .pad = 2, .h_out = 7, .w_out = 7},
    {.n = 8, .c_in = 12, .h_in = 7, .w_in = 7, .c_out = 12, .kh = 5, .kw = 5, .stride = 1, .pad = 2, .h_out = 7, .w_out = 7},
};

START_TEST(dnnl_matches_im2col_random) {
    RngStream rs = rng_stream(3, RNG_TEST, 8, 0);
    int cases = 0, taken = 0;
    while (cases < 40) {
        int k = 1 + (int)rng_next_below(&rs, 5), stride = 1 + (int)rng_next_below(&rs, 3);
        int pad = (int)rng_next_below(&rs, 3), h = 3 + (int)rng_next_below(&rs, 12), w = 3 + (int)rng_next_below(&rs, 12);
        if (h + 2 * pad < k || w + 2 * pad < k || pad >= k)
            continue;
        static const int batches[] = {1, 3, 4, 5, 8, 16}; // 1 and 3: the im2col path, as it must be
        ConvGeom g = geom(batches[rng_next_below(&rs, 6)], 1 + (int)rng_next_below(&rs, 9), h, w,
                          1 + (int)rng_next_below(&rs, 17), k, stride, pad);
        taken += check_case(&g, (uint32_t)cases);
        cases++;
    }
    // most of the directions must really run on oneDNN, or this compared im2col with itself
    ck_assert_int_ge(taken, cases);
}
END_TEST

START_TEST(dnnl_matches_im2col_lenet) {
    int taken = 0;
    for (int i = 0; i < 3; i++)
        taken += check_case(&lenet[i], 100 + (uint32_t)i);
    ck_assert_int_eq(taken, 8); // all but the first layer's input gradient (left to im2col)
    ConvGeom one = lenet[1];
    one.n = 1;
    ck_assert_int_eq(dnnl_conv2d_takes(&one, 0, NULL, 0), 0); // batches under 4 too
}
END_TEST

// Control: the same check on a oneDNN forward output with one element moved by 1e-4 of
// its S (about 30 times the bound for k = 300) must fail, and on the gradients likewise.
START_TEST(dnnl_wrong_result_is_caught) {
    ConvCase c;
    case_init(&c, &lenet[1], 200);
    Outputs d, r;
    outputs_alloc(&d, &c);
    outputs_alloc(&r, &c);
    run_dnnl(&c, &d);
    run_im2col(&c, &r);
    const ConvGeom *g = &c.g;
    double k_fwd = g->c_in * g->kh * g->kw, k_bd = g->c_out * g->kh * g->kw, k_bf = (double)g->n * g->h_out * g->w_out;
    ck_assert_uint_eq(beyond_bound(d.y, r.y, c.sy, c.ny, k_fwd), 0);
    d.y[c.ny / 3] += (float)(1e-4 * c.sy[c.ny / 3]);
    ck_assert_uint_eq(beyond_bound(d.y, r.y, c.sy, c.ny, k_fwd), 1);
    d.dx[c.nx / 2] += (float)(1e-4 * c.sdx[c.nx / 2]);
    ck_assert_uint_eq(beyond_bound(d.dx, r.dx, c.sdx, c.nx, k_bd), 1);
    d.dw[7] -= (float)(1e-3 * c.sdw[7]); // k = 392: the bound is 4.7e-5 S
    ck_assert_uint_eq(beyond_bound(d.dw, r.dw, c.sdw, c.nw, k_bf), 1);
    outputs_free(&d), outputs_free(&r), case_free(&c);
}
END_TEST

// Per-example weight gradients (DP-SGD's): oneDNN's batched matmul over each example's
// columns against cpu_conv2d_backward_filter on that example alone, element by element
// within 2·γ_k·S_i (k = h_out·w_out, S_i the example's own Σ|x·dy|); the same bits with a
// caller allowing 4 OpenMP threads; and a moved element is caught.
static void check_per_example(const ConvGeom *g, uint32_t seed) {
    ConvCase c;
    case_init(&c, g, seed);
    ConvGeom g1 = *g;
    g1.n = 1;
    size_t xs = (size_t)g->c_in * g->h_in * g->w_in, ys = (size_t)g->c_out * g->h_out * g->w_out;
    float *d = malloc(c.nw * g->n * 4), *d4 = malloc(c.nw * g->n * 4), *r = malloc(c.nw * g->n * 4);
    double *s = calloc(c.nw * g->n, 8);
    ck_assert(d && d4 && r && s);
    dnnl_conv2d_backward_filter_per_example(g, c.x, c.dy, d);
    int before = omp_get_max_threads();
    omp_set_num_threads(4);
    dnnl_conv2d_backward_filter_per_example(g, c.x, c.dy, d4);
    omp_set_num_threads(before);
    ck_assert_int_eq(memcmp(d, d4, c.nw * g->n * 4), 0);
    for (int i = 0; i < g->n; i++) {
        cpu_conv2d_backward_filter(&g1, c.x + i * xs, c.dy + i * ys, r + i * c.nw, NULL, 0);
        for (int co = 0; co < g->c_out; co++)
            for (int ci = 0; ci < g->c_in; ci++)
                for (int ki = 0; ki < g->kh; ki++)
                    for (int kj = 0; kj < g->kw; kj++)
                        for (int oy = 0; oy < g->h_out; oy++)
                            for (int ox = 0; ox < g->w_out; ox++) {
                                int iy = oy * g->stride - g->pad + ki, ix = ox * g->stride - g->pad + kj;
                                if (iy < 0 || iy >= g->h_in || ix < 0 || ix >= g->w_in)
                                    continue;
                                double xv = c.x[i * xs + ((size_t)ci * g->h_in + iy) * g->w_in + ix];
                                double yv = c.dy[i * ys + ((size_t)co * g->h_out + oy) * g->w_out + ox];
                                s[i * c.nw + (((size_t)co * g->c_in + ci) * g->kh + ki) * g->kw + kj] += fabs(xv * yv);
                            }
    }
    double k = (double)g->h_out * g->w_out;
    ck_assert_msg(beyond_bound(d, r, s, c.nw * g->n, k) == 0, "per-example weight gradients differ, case %u", seed);
    size_t at = c.nw * g->n / 2;
    d[at] += (float)(1e-3 * s[at]);
    ck_assert_uint_eq(beyond_bound(d, r, s, c.nw * g->n, k), 1);
    free(d), free(d4), free(r), free(s), case_free(&c);
}

START_TEST(dnnl_per_example_matches_im2col) {
    for (int i = 0; i < 3; i++)
        check_per_example(&lenet[i], 400 + (uint32_t)i);
    ConvGeom odd = geom(5, 3, 9, 11, 7, 3, 2, 1); // a batch that is not a multiple of anything
    check_per_example(&odd, 410);
    // the product really ran on oneDNN at LeNet's sizes (else this compared OpenBLAS with itself)
    float a[4 * 12 * 49] = {0}, b[4 * 300 * 49] = {0}, out[4 * 12 * 300];
    ck_assert_int_eq(dnnl_batched_product_nt_run(4, 12, 300, 49, a, b, out), 1);
}
END_TEST

// Two runs give the same bits, and so does a caller whose OpenMP setting allows 4 threads
// (each call runs oneDNN on one thread, whatever the caller's setting).
START_TEST(dnnl_is_deterministic) {
    ConvGeom g = geom(32, 12, 14, 14, 12, 5, 2, 2);
    ConvCase c;
    case_init(&c, &g, 300);
    Outputs a, b;
    outputs_alloc(&a, &c);
    outputs_alloc(&b, &c);
    int before = omp_get_max_threads();
    omp_set_num_threads(1);
    run_dnnl(&c, &a);
    run_dnnl(&c, &b);
    ck_assert_int_eq(memcmp(a.y, b.y, c.ny * 4), 0);
    ck_assert_int_eq(memcmp(a.dx, b.dx, c.nx * 4), 0);
    ck_assert_int_eq(memcmp(a.dw, b.dw, c.nw * 4), 0);
    omp_set_num_threads(4);
    run_dnnl(&c, &b);
    ck_assert_int_eq(omp_get_max_threads(), 4); // the caller's setting is restored
    ck_assert_int_eq(memcmp(a.y, b.y, c.ny * 4), 0);
    ck_assert_int_eq(memcmp(a.dx, b.dx, c.nx * 4), 0);
    ck_assert_int_eq(memcmp(a.dw, b.dw, c.nw * 4), 0);
    omp_set_num_threads(before);
    // control: a different input gives different bits (the comparison is not vacuous)
    c.x[0] += 1.0f;
    run_dnnl(&c, &b);
    ck_assert_int_ne(memcmp(a.y, b.y, c.ny * 4), 0);
    outputs_free(&a), outputs_free(&b), case_free(&c);
}
END_TEST

Suite *suite_conv_dnnl(void) {
    Suite *s = suite_create("conv_dnnl");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dnnl_matches_im2col_random);
    tcase_add_test(tc, dnnl_matches_im2col_lenet);
    tcase_add_test(tc, dnnl_wrong_result_is_caught);
    tcase_add_test(tc, dnnl_is_deterministic);
    tcase_add_test(tc, dnnl_per_example_matches_im2col);
    suite_add_tcase(s, tc);
    return s;
}

#else

START_TEST(dnnl_not_built) { printf("SKIP conv_dnnl: this build has no oneDNN (DNNL=0 or libdnnl-dev missing)\n"); }
END_TEST

Suite *suite_conv_dnnl(void) {
    Suite *s = suite_create("conv_dnnl");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, dnnl_not_built);
    suite_add_tcase(s, tc);
    return s;
}

#endif
