// First- and second-order finite-difference checks of every differentiable op, and a
// check that a wrong derivative is caught.
#include <check.h>
#include <stdio.h>

#include "core/autodiff.h"
#include "core/tape_internal.h"
#include "tests/gradcheck.c.inc"

#define TOL 2e-2

static Var *b_matmul_nn(Tape *t, Var **x, void *c) { return ad_matmul(t, x[0], x[1], 0, 0); }
static Var *b_matmul_nt(Tape *t, Var **x, void *c) { return ad_matmul(t, x[0], x[1], 0, 1); }
static Var *b_matmul_tn(Tape *t, Var **x, void *c) { return ad_matmul(t, x[0], x[1], 1, 0); }
static Var *b_matmul_tt(Tape *t, Var **x, void *c) { return ad_matmul(t, x[0], x[1], 1, 1); }
static Var *b_unary(Tape *t, Var **x, void *c) { return ad_unary(t, *(UnaryOp *)c, x[0]); }
static Var *b_affine(Tape *t, Var **x, void *c) { return ad_affine(t, x[0], -1.5f, 0.25f); }
static Var *b_mul(Tape *t, Var **x, void *c) { return ad_mul(t, x[0], x[1]); }
static Var *b_div(Tape *t, Var **x, void *c) { return ad_div(t, x[0], x[1]); }
static Var *b_sub(Tape *t, Var **x, void *c) { return ad_sub(t, x[0], x[1]); }
static Var *b_row_bias_mul(Tape *t, Var **x, void *c) { return ad_binary_bc(t, BIN_MUL, x[0], x[1], 1); }
static Var *b_chan_div(Tape *t, Var **x, void *c) { return ad_binary_bc(t, BIN_DIV, x[0], x[1], 6); }
static Var *b_sigmoid_grad(Tape *t, Var **x, void *c) { return ad_binary_bc(t, BIN_SIGMOID_GRAD, x[0], x[1], 1); }
static Var *b_chan_sigmoid_grad(Tape *t, Var **x, void *c) { return ad_binary_bc(t, BIN_SIGMOID_GRAD, x[0], x[1], 6); }
static Var *b_col_sub(Tape *t, Var **x, void *c) { return ad_binary_bc(t, BIN_SUB, x[0], x[1], 4); }
static Var *b_expand(Tape *t, Var **x, void *c) {
    int shape[2] = {3, 4};
    return ad_mul(t, ad_expand(t, x[0], 2, shape, 1), ad_expand(t, x[0], 2, shape, 1));
}
static Var *b_sumbc(Tape *t, Var **x, void *c) {
    return ad_unary(t, UN_SQUARE, ad_sum_broadcast(t, x[0], 2, 3)); // x (2,3,2): per middle index
}
static Var *b_mean_sq(Tape *t, Var **x, void *c) { return ad_mean(t, ad_unary(t, UN_SQUARE, x[0])); }
static Var *b_softmax(Tape *t, Var **x, void *c) { return ad_softmax(t, x[0]); }
static Var *b_log_softmax(Tape *t, Var **x, void *c) { return ad_log_softmax(t, x[0]); }
typedef struct { int stride, pad; } ConvCtx;
static Var *b_conv(Tape *t, Var **x, void *c) {
    ConvCtx *cc = c;
    // square the output so the second derivative in x alone is non-zero
    Var *y = ad_conv2d(t, x[0], x[1], cc->stride, cc->pad);
    return ad_mul(t, y, y);
}
static Var *b_conv_bias_sig(Tape *t, Var **x, void *c) {
    return ad_unary(t, UN_SIGMOID, ad_add_channel_bias(t, ad_conv2d(t, x[0], x[1], 2, 2), x[2]));
}
static Var *b_maxpool(Tape *t, Var **x, void *c) {
    Var *y = ad_maxpool2d(t, x[0], 2, 2);
    return ad_mul(t, y, y);
}
static Var *b_avgpool(Tape *t, Var **x, void *c) {
    Var *y = ad_avgpool2d(t, x[0], 2, 2);
    return ad_mul(t, y, y);
}
static Var *b_reshape_tr(Tape *t, Var **x, void *c) {
    int shape[2] = {4, 3};
    Var *r = ad_reshape(t, x[0], 2, shape);
    return ad_mul(t, ad_transpose(t, r), ad_transpose(t, r));
}
static Var *b_slice_concat(Tape *t, Var **x, void *c) {
    Var *a = ad_slice(t, x[0], 1, 1, 2);  // (3,2)
    Var *b = ad_slice(t, x[0], 1, 0, 1);  // (3,1)
    Var *cat = ad_concat(t, ad_unary(t, UN_SQUARE, a), b, 1); // (3,3)
    return ad_mul(t, cat, cat);
}
static Var *b_linear_tanh(Tape *t, Var **x, void *c) { return ad_unary(t, UN_TANH, ad_linear(t, x[0], x[1], x[2])); }
static Var *b_ce_soft(Tape *t, Var **x, void *c) { return ad_cross_entropy_soft(t, x[0], ad_softmax(t, x[1])); }
static Var *b_ce_hard(Tape *t, Var **x, void *c) {
    static const int32_t labels[3] = {2, 0, 3};
    return ad_cross_entropy(t, x[0], labels);
}
static Var *b_mse(Tape *t, Var **x, void *c) { return ad_mse(t, ad_unary(t, UN_SIGMOID, x[0]), x[1]); }
static Var *b_bn4(Tape *t, Var **x, void *c) {
    Var *y = ad_batchnorm_train(t, x[0], x[1], x[2], 1e-5f, NULL, NULL);
    return ad_mul(t, y, y);
}
static Var *b_bn2(Tape *t, Var **x, void *c) { return ad_unary(t, UN_TANH, ad_batchnorm_train(t, x[0], x[1], x[2], 1e-5f, NULL, NULL)); }
static Var *b_bn_eval(Tape *t, Var **x, void *c) {
    static const float mean[3] = {0.1f, -0.2f, 0.3f}, var[3] = {1.0f, 0.5f, 2.0f};
    Var *y = ad_batchnorm_eval(t, x[0], x[1], x[2], mean, var, 1e-5f);
    return ad_mul(t, y, y);
}

static UnaryOp un_ops[] = {UN_NEG, UN_EXP, UN_LOG, UN_SIGMOID, UN_TANH, UN_RELU, UN_SQUARE, UN_SQRT, UN_RECIP, UN_ABS};
static const char *un_names[] = {"neg", "exp", "log", "sigmoid", "tanh", "relu", "square", "sqrt", "recip", "abs"};
static ConvCtx conv_s1p0 = {1, 0}, conv_s2p2 = {2, 2}, conv_s1p2 = {1, 2};

static GcCase cases[] = {
    {"matmul_nn", 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, b_matmul_nn, NULL, 1},
    {"matmul_nt", 2, {2, 2}, {{3, 4}, {2, 4}}, -1, 1, b_matmul_nt, NULL, 1},
    {"matmul_tn", 2, {2, 2}, {{4, 3}, {4, 2}}, -1, 1, b_matmul_tn, NULL, 1},
    {"matmul_tt", 2, {2, 2}, {{4, 3}, {2, 4}}, -1, 1, b_matmul_tt, NULL, 1},
    {"affine", 1, {2}, {{3, 4}}, -1, 1, b_affine, NULL, 1},
    {"mul", 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, b_mul, NULL, 1},
    {"div", 2, {2, 2}, {{3, 4}, {3, 4}}, 0.5f, 1.5f, b_div, NULL, 1},
    {"sub", 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, b_sub, NULL, 1},
    {"mul_row_broadcast", 2, {2, 1}, {{3, 4}, {4}}, -1, 1, b_row_bias_mul, NULL, 1},
    {"div_channel_broadcast", 2, {4, 1}, {{2, 3, 2, 3}, {3}}, 0.5f, 1.5f, b_chan_div, NULL, 1},
    {"sigmoid_grad", 2, {2, 2}, {{3, 4}, {3, 4}}, 0.1f, 0.9f, b_sigmoid_grad, NULL, 1},
    {"sigmoid_grad_channel_broadcast", 2, {4, 1}, {{2, 3, 2, 3}, {3}}, 0.1f, 0.9f, b_chan_sigmoid_grad, NULL, 1},
    {"sub_column_broadcast", 2, {2, 1}, {{3, 4}, {3}}, -1, 1, b_col_sub, NULL, 1},
    {"expand", 1, {1}, {{4}}, -1, 1, b_expand, NULL, 1},
    {"sum_broadcast", 1, {3}, {{2, 3, 2}}, -1, 1, b_sumbc, NULL, 1},
    {"mean", 1, {2}, {{3, 4}}, -1, 1, b_mean_sq, NULL, 1},
    {"softmax", 1, {2}, {{3, 5}}, -2, 2, b_softmax, NULL, 1},
    {"log_softmax", 1, {2}, {{3, 5}}, -2, 2, b_log_softmax, NULL, 1},
    {"conv2d_s1p0", 2, {4, 4}, {{2, 2, 5, 5}, {3, 2, 3, 3}}, -1, 1, b_conv, &conv_s1p0, 1},
    {"conv2d_s2p2", 2, {4, 4}, {{2, 3, 6, 6}, {2, 3, 5, 5}}, -1, 1, b_conv, &conv_s2p2, 1},
    {"conv2d_s1p2", 2, {4, 4}, {{1, 2, 4, 4}, {2, 2, 5, 5}}, -1, 1, b_conv, &conv_s1p2, 1},
    // batches of 4: the CPU backend runs these on oneDNN where it is built (smaller
    // batches stay on im2col), so its three directions are differentiated twice too
    {"conv2d_s2p2_b4", 2, {4, 4}, {{4, 3, 6, 6}, {5, 3, 5, 5}}, -1, 1, b_conv, &conv_s2p2, 1},
    {"conv2d_s1p0_b4", 2, {4, 4}, {{4, 5, 5, 5}, {3, 5, 3, 3}}, -1, 1, b_conv, &conv_s1p0, 1},
    {"conv2d_bias_sigmoid", 3, {4, 4, 1}, {{1, 3, 8, 8}, {4, 3, 5, 5}, {4}}, -0.5f, 0.5f, b_conv_bias_sig, NULL, 1},
    {"maxpool", 1, {4}, {{2, 2, 4, 4}}, -4, 4, b_maxpool, NULL, 1},
    {"avgpool", 1, {4}, {{2, 2, 4, 4}}, -1, 1, b_avgpool, NULL, 1},
    {"reshape_transpose", 1, {2}, {{3, 4}}, -1, 1, b_reshape_tr, NULL, 1},
    {"slice_concat", 1, {2}, {{3, 3}}, -1, 1, b_slice_concat, NULL, 1},
    {"linear_tanh", 3, {2, 2, 1}, {{3, 5}, {4, 5}, {4}}, -1, 1, b_linear_tanh, NULL, 1},
    {"cross_entropy_soft", 2, {2, 2}, {{3, 4}, {3, 4}}, -2, 2, b_ce_soft, NULL, 1},
    {"cross_entropy_hard", 1, {2}, {{3, 4}}, -2, 2, b_ce_hard, NULL, 1},
    {"mse", 2, {2, 2}, {{3, 4}, {3, 4}}, -1, 1, b_mse, NULL, 1},
    {"batchnorm_4d", 3, {4, 1, 1}, {{3, 2, 2, 2}, {2}, {2}}, -1, 1, b_bn4, NULL, 1},
    {"batchnorm_2d", 3, {2, 1, 1}, {{5, 3}, {3}, {3}}, -1, 1, b_bn2, NULL, 1},
    {"batchnorm_eval", 3, {2, 1, 1}, {{4, 3}, {3}, {3}}, -1, 1, b_bn_eval, NULL, 1},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(op_first_order) {
    double e = gradcheck(backend_cpu(), &cases[_i], 1, 11);
    if (!(e >= 0 && e < TOL))
        fprintf(stderr, "first order %s: relative error %g\n", cases[_i].name, e);
    ck_assert_msg(e >= 0 && e < TOL, "%s: first-order relative error %g", cases[_i].name, e);
}
END_TEST

START_TEST(op_second_order) {
    double e = gradcheck(backend_cpu(), &cases[_i], 2, 12);
    if (!(e >= 0 && e < TOL))
        fprintf(stderr, "second order %s: relative error %g\n", cases[_i].name, e);
    ck_assert_msg(e >= 0 && e < TOL, "%s: second-order relative error %g", cases[_i].name, e);
}
END_TEST

START_TEST(unary_first_and_second_order) {
    GcCase c = {un_names[_i], 1, {2}, {{3, 4}}, -1, 1, b_unary, &un_ops[_i], 1};
    if (un_ops[_i] == UN_LOG || un_ops[_i] == UN_SQRT || un_ops[_i] == UN_RECIP) {
        c.lo = 0.5f;
        c.hi = 1.5f;
    }
    double e1 = gradcheck(backend_cpu(), &c, 1, 13), e2 = gradcheck(backend_cpu(), &c, 2, 14);
    ck_assert_msg(e1 >= 0 && e1 < TOL, "%s: first-order relative error %g", c.name, e1);
    ck_assert_msg(e2 >= 0 && e2 < TOL, "%s: second-order relative error %g", c.name, e2);
}
END_TEST

// The checker must reject a derivative that does not belong to the function, as a
// wrong backward rule would give: the analytic pass differentiates tanh while the finite
// differences evaluate sigmoid; and a derivative 5% off.
static Var *b_tanh(Tape *t, Var **x, void *c) { return ad_unary(t, UN_TANH, x[0]); }
static Var *b_sigmoid(Tape *t, Var **x, void *c) { return ad_unary(t, UN_SIGMOID, x[0]); }

START_TEST(wrong_backward_is_caught) {
    GcCase mismatched = {"tanh_vs_sigmoid", 1, {2}, {{3, 4}}, -1, 1, b_tanh, NULL, 1, b_sigmoid, 0};
    ck_assert_double_gt(gradcheck(backend_cpu(), &mismatched, 1, 21), TOL);
    ck_assert_double_gt(gradcheck(backend_cpu(), &mismatched, 2, 22), TOL);
    GcCase off = {"conv_5pct_off", 2, {4, 4}, {{2, 2, 5, 5}, {3, 2, 3, 3}}, -1, 1, b_conv, &conv_s1p0, 1, NULL, 1.05};
    ck_assert_double_gt(gradcheck(backend_cpu(), &off, 1, 23), TOL);
    ck_assert_double_gt(gradcheck(backend_cpu(), &off, 2, 24), TOL);
    // and the same cases pass when nothing is wrong
    mismatched.numeric_build = NULL;
    off.analytic_scale = 0;
    ck_assert_double_lt(gradcheck(backend_cpu(), &mismatched, 1, 21), TOL);
    ck_assert_double_lt(gradcheck(backend_cpu(), &off, 2, 24), TOL);
}
END_TEST

// The im2col convolution (both of its im2col paths, both backward-data paths, batches of
// one, several sample groups) agrees with the direct loop: forward and backward-data
// directly, and backward-data / backward-filter through their adjoint identities against
// the direct forward:
//   <dy, conv(x, w)> = <bwd_data(dy, w), x> = <bwd_filter(x, dy), w>.
#include "core/cpu/cpu_kernels.h"
static const ConvGeom conv_geoms[] = {
    {.n = 3, .c_in = 3, .h_in = 9, .w_in = 7, .c_out = 4, .kh = 5, .kw = 3, .stride = 2, .pad = 2},
    {.n = 2, .c_in = 3, .h_in = 12, .w_in = 12, .c_out = 5, .kh = 5, .kw = 5, .stride = 1, .pad = 2},
    {.n = 1, .c_in = 2, .h_in = 11, .w_in = 9, .c_out = 3, .kh = 5, .kw = 5, .stride = 2, .pad = 2},
    {.n = 2, .c_in = 4, .h_in = 8, .w_in = 8, .c_out = 6, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
    {.n = 2, .c_in = 4, .h_in = 8, .w_in = 8, .c_out = 6, .kh = 3, .kw = 3, .stride = 2, .pad = 1},
    {.n = 3, .c_in = 5, .h_in = 6, .w_in = 6, .c_out = 2, .kh = 1, .kw = 1, .stride = 1, .pad = 0},
    {.n = 1, .c_in = 1, .h_in = 7, .w_in = 7, .c_out = 1, .kh = 5, .kw = 5, .stride = 1, .pad = 0},
    // 600 samples of 64×16×16 with a 5×5 kernel exceed one im2col group (several groups)
    {.n = 600, .c_in = 64, .h_in = 16, .w_in = 16, .c_out = 2, .kh = 5, .kw = 5, .stride = 1, .pad = 2},
    // backward-data by stride phases (>= 8 input channels): LeNet's second and third
    // convolutions at batch 3, a non-square kernel, no padding, padding beyond the kernel,
    // input rows and columns no output reads, a kernel smaller than the stride (phases
    // without taps)
    {.n = 3, .c_in = 12, .h_in = 14, .w_in = 14, .c_out = 12, .kh = 5, .kw = 5, .stride = 2, .pad = 2},
    {.n = 3, .c_in = 12, .h_in = 7, .w_in = 7, .c_out = 12, .kh = 5, .kw = 5, .stride = 1, .pad = 2},
    {.n = 2, .c_in = 8, .h_in = 8, .w_in = 9, .c_out = 3, .kh = 3, .kw = 3, .stride = 2, .pad = 0},
    {.n = 1, .c_in = 8, .h_in = 10, .w_in = 7, .c_out = 2, .kh = 2, .kw = 3, .stride = 3, .pad = 1},
    {.n = 2, .c_in = 8, .h_in = 7, .w_in = 9, .c_out = 3, .kh = 5, .kw = 3, .stride = 1, .pad = 2},
    {.n = 1, .c_in = 9, .h_in = 6, .w_in = 5, .c_out = 2, .kh = 3, .kw = 3, .stride = 1, .pad = 0},
    {.n = 2, .c_in = 8, .h_in = 5, .w_in = 4, .c_out = 2, .kh = 3, .kw = 2, .stride = 1, .pad = 3},
};

// dx of the direct loop, in double: the oracle for backward-data element by element.
static void conv_backward_data_naive(const ConvGeom *g, const float *dy, const float *w, double *dx) {
    memset(dx, 0, sizeof(double) * (size_t)g->n * g->c_in * g->h_in * g->w_in);
    for (int n = 0; n < g->n; n++)
        for (int co = 0; co < g->c_out; co++)
            for (int oy = 0; oy < g->h_out; oy++)
                for (int ox = 0; ox < g->w_out; ox++)
                    for (int c = 0; c < g->c_in; c++)
                        for (int ki = 0; ki < g->kh; ki++)
                            for (int kj = 0; kj < g->kw; kj++) {
                                int iy = oy * g->stride - g->pad + ki, ix = ox * g->stride - g->pad + kj;
                                if (iy < 0 || iy >= g->h_in || ix < 0 || ix >= g->w_in)
                                    continue;
                                dx[((size_t)(n * g->c_in + c) * g->h_in + iy) * g->w_in + ix] +=
                                    (double)dy[((size_t)(n * g->c_out + co) * g->h_out + oy) * g->w_out + ox] *
                                    w[((size_t)(co * g->c_in + c) * g->kh + ki) * g->kw + kj];
                            }
}

static double dotd(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

// Columns kept between calls (the tape's cache) give bit-identical results whichever
// call builds them, and are really read: spoiled columns change the result (control).
static void kept_columns_match(const ConvGeom *g, const float *x, const float *w, const float *dy, const float *y,
                               const float *dw) {
    size_t nc = cpu_conv2d_columns_size(g);
    if (!nc)
        return;
    size_t ny = (size_t)g->n * g->c_out * g->h_out * g->w_out, nw = (size_t)g->c_out * g->c_in * g->kh * g->kw;
    float *cols = malloc(nc * 4), *y2 = malloc(ny * 4), *dw2 = malloc(nw * 4);
    cpu_conv2d_forward(g, x, w, y2, cols, 0); // builds
    ck_assert_int_eq(memcmp(y2, y, ny * 4), 0);
    cpu_conv2d_backward_filter(g, x, dy, dw2, cols, 1); // reads
    ck_assert_int_eq(memcmp(dw2, dw, nw * 4), 0);
    cpu_conv2d_backward_filter(g, x, dy, dw2, cols, 0); // builds
    ck_assert_int_eq(memcmp(dw2, dw, nw * 4), 0);
    cpu_conv2d_forward(g, x, w, y2, cols, 1); // reads
    ck_assert_int_eq(memcmp(y2, y, ny * 4), 0);
    for (size_t i = 0; i < nc; i++)
        cols[i] += 1.0f;
    cpu_conv2d_forward(g, x, w, y2, cols, 1);
    ck_assert_int_ne(memcmp(y2, y, ny * 4), 0);
    free(cols); free(y2); free(dw2);
}

START_TEST(conv_im2col_matches_naive) {
    ConvGeom g = conv_geoms[_i];
    g.h_out = (g.h_in + 2 * g.pad - g.kh) / g.stride + 1;
    g.w_out = (g.w_in + 2 * g.pad - g.kw) / g.stride + 1;
    size_t nx = (size_t)g.n * g.c_in * g.h_in * g.w_in, nw = (size_t)g.c_out * g.c_in * g.kh * g.kw;
    size_t ny = (size_t)g.n * g.c_out * g.h_out * g.w_out;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *y1 = malloc(ny * 4), *y2 = malloc(ny * 4);
    float *dy = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4);
    RngStream rs = rng_stream(5, RNG_TEST, 3, (uint32_t)_i);
    for (size_t i = 0; i < nx; i++) x[i] = (float)rng_next_normal(&rs);
    for (size_t i = 0; i < nw; i++) w[i] = (float)rng_next_normal(&rs);
    for (size_t i = 0; i < ny; i++) dy[i] = (float)rng_next_normal(&rs);
    cpu_conv2d_forward(&g, x, w, y1, NULL, 0);
    cpu_conv2d_forward_naive(&g, x, w, y2);
    for (size_t i = 0; i < ny; i++)
        ck_assert_float_eq_tol(y1[i], y2[i], 1e-4f * (1 + fabsf(y2[i])));
    cpu_conv2d_backward_data(&g, dy, w, dx);
    cpu_conv2d_backward_filter(&g, x, dy, dw, NULL, 0);
    kept_columns_match(&g, x, w, dy, y1, dw);
    double ref = dotd(dy, y2, ny), scale = sqrt(dotd(dy, dy, ny) * dotd(y2, y2, ny)) + 1;
    ck_assert_double_le(fabs(dotd(dx, x, nx) - ref), 1e-4 * scale);
    ck_assert_double_le(fabs(dotd(dw, w, nw) - ref), 1e-4 * scale);
    if (nx <= 100000) { // every element of dx, against the direct loop (float rounding of a sum of <= 300 terms)
        double *dx_ref = malloc(nx * sizeof(double));
        conv_backward_data_naive(&g, dy, w, dx_ref);
        for (size_t i = 0; i < nx; i++)
            ck_assert_double_le(fabs(dx[i] - dx_ref[i]), 1e-4 * (1 + fabs(dx_ref[i])));
        free(dx_ref);
    }
    free(x); free(w); free(y1); free(y2); free(dy); free(dx); free(dw);
}
END_TEST

// ad_grad skips nodes that lead to no requested variable: the gradient of a loss with
// respect to the weights only equals the one from a sweep that also asks for the input,
// and builds fewer nodes.
START_TEST(grad_pruning_matches_full_sweep) {
    Tape *t = tape_create(backend_cpu());
    int xs[4] = {2, 3, 8, 8}, ws[4] = {4, 3, 5, 5};
    float xh[384], wh[300];
    RngStream rs = rng_stream(8, RNG_TEST, 4, 0);
    for (int i = 0; i < 384; i++) xh[i] = (float)rng_next_uniform(&rs);
    for (int i = 0; i < 300; i++) wh[i] = (float)(rng_next_uniform(&rs) - 0.5);
    float g_only[300], g_both[300];
    int nodes[2];
    for (int k = 0; k < 2; k++) {
        tape_reset(t);
        Var *x = ad_from_host(t, xh, 4, xs, 1), *w = ad_from_host(t, wh, 4, ws, 1);
        Var *loss = ad_mean(t, ad_unary(t, UN_SIGMOID, ad_conv2d(t, x, w, 2, 2)));
        Var *wrt[2] = {w, x}, *g[2];
        int before = tape_node_count(t);
        ck_assert_int_eq(ad_grad(t, loss, wrt, k == 0 ? 1 : 2, g, 0), FP_OK);
        nodes[k] = tape_node_count(t) - before;
        ad_to_host(t, g[0], k == 0 ? g_only : g_both);
    }
    ck_assert_int_eq(memcmp(g_only, g_both, sizeof g_only), 0);
    ck_assert_int_lt(nodes[0], nodes[1]);
    tape_free(t);
}
END_TEST

Suite *suite_autodiff(void) {
    Suite *s = suite_create("autodiff");
    TCase *tc = tcase_create("gradcheck");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, op_first_order, 0, N_CASES);
    tcase_add_loop_test(tc, op_second_order, 0, N_CASES);
    tcase_add_loop_test(tc, unary_first_and_second_order, 0, (int)(sizeof un_ops / sizeof un_ops[0]));
    tcase_add_test(tc, wrong_backward_is_caught);
    tcase_add_loop_test(tc, conv_im2col_matches_naive, 0, (int)(sizeof conv_geoms / sizeof conv_geoms[0]));
    tcase_add_test(tc, grad_pruning_matches_full_sweep);
    suite_add_tcase(s, tc);
    return s;
}
