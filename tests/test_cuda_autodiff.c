// CPU-vs-CUDA tests above the kernels: autodiff gradients of first and second order
// computed on both backends (a LeNet-style conv + sigmoid + linear + cross-entropy net;
// batch norm with a gradient penalty; DLG's gradient-matching distance and its gradient
// with respect to the dummy data, a gradient of a gradient), ten SGD steps of a small
// conv net, bit-for-bit determinism from run to run on the GPU, and the Philox draws of
// core/cuda/cuda_rng.h against core/rng.h. SKIP rule and helpers: tests/cuda_check.h.
//
// Tolerances (docs/cuda.md): ‖cuda − cpu‖ ≤ tol·‖cpu‖ per output:
//   first order 1e-4, second order 1e-3, parameters after 10 SGD steps 1e-4;
//   GPU run to run: identical bits;
//   Philox raw words and uniforms: bit-identical; normals and laplaces: double draws within
//   1e-12, float draws within 1 ulp (the count of differing draws is printed).
#include "core/autodiff.h"
#include "tests/cuda_check.h"

#ifdef FEDPRIV_HAVE_CUDA
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_rng.h"
#endif

// -- autodiff on both backends ------------------------------------------------------------
// A graph's outputs (its loss and gradients), copied to the host for comparison.
#define GRAPH_MAX 8
typedef struct GraphOut {
    int n;
    const char *name[GRAPH_MAX];
    size_t len[GRAPH_MAX];
    float *val[GRAPH_MAX];
} GraphOut;

static void out_add(GraphOut *o, Tape *t, const char *name, const Var *v) {
    ck_assert_msg(v != NULL, "graph output %s could not be built (tape status %d)", name, (int)tape_status(t));
    ck_assert_int_lt(o->n, GRAPH_MAX);
    o->name[o->n] = name;
    o->len[o->n] = v->t.numel;
    o->val[o->n] = host_floats(v->t.numel);
    ad_to_host(t, v, o->val[o->n]);
    o->n++;
}

static void out_free(GraphOut *o) {
    for (int i = 0; i < o->n; i++)
        free(o->val[i]);
    o->n = 0;
}

// ‖gpu − cpu‖ ≤ tol ‖cpu‖ for every output.
static void compare_graph(const char *what, const GraphOut *cpu, const GraphOut *gpu, double tol) {
    ck_assert_int_eq(cpu->n, gpu->n);
    for (int k = 0; k < cpu->n; k++) {
        ck_assert(cpu->len[k] == gpu->len[k]);
        double d2 = 0, r2 = 0;
        for (size_t i = 0; i < cpu->len[k]; i++) {
            double d = (double)gpu->val[k][i] - cpu->val[k][i];
            d2 += d * d;
            r2 += (double)cpu->val[k][i] * cpu->val[k][i];
        }
        double rel = sqrt(d2) / fmax(sqrt(r2), 1e-30);
        printf("cuda %s %-12s n=%-6zu norm-relative error %.3g (allowed %.3g)\n", what, cpu->name[k], cpu->len[k], rel,
               tol);
        ck_assert_msg(rel <= tol && r2 > 0, "%s %s: norm-relative error %g (allowed %g, |cpu| %g)", what,
                      cpu->name[k], rel, tol, sqrt(r2));
    }
}

static int graph_same_bits(const GraphOut *a, const GraphOut *b) {
    if (a->n != b->n)
        return 0;
    for (int k = 0; k < a->n; k++)
        if (a->len[k] != b->len[k] || memcmp(a->val[k], b->val[k], a->len[k] * sizeof(float)) != 0)
            return 0;
    return 1;
}

static Var *leaf_uniform(Tape *t, int ndim, const int *shape, float lo, float hi, unsigned seed, int rg) {
    size_t n = shape_numel(ndim, shape);
    float *h = host_floats(n);
    fill_uniform(h, n, lo, hi, seed);
    Var *v = ad_from_host(t, h, ndim, shape, rg);
    free(h);
    ck_assert_ptr_nonnull(v);
    return v;
}

// LeNet-style: max-pool on the input (so both backends pick the same argmax), conv
// 5×5/2 + bias + sigmoid, conv 3×3 + tanh, avg-pool, linear, cross-entropy. First order.
static void graph_lenet(const Backend *be, GraphOut *o) {
    static const int xs[4] = {4, 3, 16, 16}, w1s[4] = {6, 3, 5, 5}, b1s[1] = {6}, w2s[4] = {8, 6, 3, 3},
                     w3s[2] = {10, 8 * 6 * 6}, b3s[1] = {10}, flat[2] = {4, 8 * 6 * 6};
    static const int32_t labels[4] = {1, 7, 3, 9};
    Tape *t = tape_create(be);
    Var *in[6] = {leaf_uniform(t, 4, xs, 0, 1, 200, 1),        leaf_uniform(t, 4, w1s, -0.3f, 0.3f, 201, 1),
                  leaf_uniform(t, 1, b1s, -0.1f, 0.1f, 202, 1), leaf_uniform(t, 4, w2s, -0.3f, 0.3f, 203, 1),
                  leaf_uniform(t, 2, w3s, -0.1f, 0.1f, 204, 1), leaf_uniform(t, 1, b3s, -0.1f, 0.1f, 205, 1)};
    Var *h = ad_maxpool2d(t, in[0], 3, 1);                                         // (4,3,14,14)
    h = ad_unary(t, UN_SIGMOID, ad_add_channel_bias(t, ad_conv2d(t, h, in[1], 2, 2), in[2])); // (4,6,7,7)
    h = ad_unary(t, UN_TANH, ad_conv2d(t, h, in[3], 1, 1));                         // (4,8,7,7)
    h = ad_reshape(t, ad_avgpool2d(t, h, 2, 1), 2, flat);                          // (4,288)
    Var *loss = ad_cross_entropy(t, ad_linear(t, h, in[4], in[5]), labels);
    Var *g[6];
    ck_assert_int_eq(ad_grad(t, loss, in, 6, g, 0), FP_OK);
    static const char *names[6] = {"dL/dx", "dL/dw1", "dL/db1", "dL/dw2", "dL/dw3", "dL/db3"};
    out_add(o, t, "loss", loss);
    for (int k = 0; k < 6; k++)
        out_add(o, t, names[k], g[k]);
    tape_free(t);
}

// Linear + batch norm + tanh + linear + softmax + MSE, with a second-order term: the
// gradient of R = L + Σ_k ‖∂L/∂θ_k‖² (a gradient penalty) with respect to x and θ.
static void graph_batchnorm(const Backend *be, GraphOut *o) {
    static const int xs[2] = {8, 20}, w1s[2] = {16, 20}, b1s[1] = {16}, ts[2] = {8, 5}, w2s[2] = {5, 16};
    Tape *t = tape_create(be);
    Var *in[6] = {leaf_uniform(t, 2, xs, -1, 1, 210, 1),   leaf_uniform(t, 2, w1s, -0.5f, 0.5f, 211, 1),
                  leaf_uniform(t, 1, b1s, -0.1f, 0.1f, 212, 1), leaf_uniform(t, 1, b1s, 0.5f, 1.5f, 213, 1),
                  leaf_uniform(t, 1, b1s, -0.2f, 0.2f, 214, 1), leaf_uniform(t, 2, w2s, -0.5f, 0.5f, 215, 1)};
    Var *target = leaf_uniform(t, 2, ts, 0, 0.4f, 216, 0);
    Var *h = ad_batchnorm_train(t, ad_linear(t, in[0], in[1], in[2]), in[3], in[4], 1e-5f, NULL, NULL);
    Var *loss = ad_mse(t, ad_softmax(t, ad_linear(t, ad_unary(t, UN_TANH, h), in[5], NULL)), target);
    Var *g[6], *gg[6];
    ck_assert_int_eq(ad_grad(t, loss, in, 6, g, 1), FP_OK);
    Var *r = loss;
    for (int k = 1; k < 6; k++)
        r = ad_add(t, r, ad_sum(t, ad_unary(t, UN_SQUARE, g[k])));
    ck_assert_int_eq(ad_grad(t, r, in, 6, gg, 0), FP_OK);
    // b1 is followed by batch norm, which removes any per-feature shift: its gradients are 0
    // in exact arithmetic (float noise of 1e-9 on either backend), so they are not compared.
    static const char *names[6] = {"dR/dx", "dR/dw1", "dR/db1", "dR/dgamma", "dR/dbeta", "dR/dw2"};
    out_add(o, t, "loss", loss);
    out_add(o, t, "dL/dw1", g[1]);
    out_add(o, t, "R", r);
    for (int k = 0; k < 6; k++)
        if (k != 2)
            out_add(o, t, names[k], gg[k]);
    tape_free(t);
}

// DLG (Zhu et al. 2019, eq. 4): the gradient-matching distance
// D(x', y') = Σ_k ‖∂L(F(x'), softmax(y'))/∂W_k − ∂L(F(x), y)/∂W_k‖² and its gradient with
// respect to the dummy x' and soft-label logits y' (a gradient of a gradient).
static Var *dlg_net(Tape *t, Var *x, Var **w) {
    static const int flat[2] = {2, 6 * 4 * 4};
    Var *h = ad_unary(t, UN_SIGMOID, ad_add_channel_bias(t, ad_conv2d(t, x, w[0], 2, 2), w[1])); // (2,6,8,8)
    h = ad_unary(t, UN_SIGMOID, ad_conv2d(t, h, w[2], 2, 2));                                   // (2,6,4,4)
    return ad_linear(t, ad_reshape(t, h, 2, flat), w[3], NULL);                                   // (2,10)
}

static void graph_dlg(const Backend *be, GraphOut *o) {
    static const int xs[4] = {2, 3, 16, 16}, w1s[4] = {6, 3, 5, 5}, b1s[1] = {6}, w2s[4] = {6, 6, 5, 5},
                     w3s[2] = {10, 96}, ys[2] = {2, 10};
    static const int32_t labels[2] = {3, 7};
    Tape *t = tape_create(be);
    Var *w[4] = {leaf_uniform(t, 4, w1s, -0.5f, 0.5f, 220, 1), leaf_uniform(t, 1, b1s, -0.1f, 0.1f, 221, 1),
                 leaf_uniform(t, 4, w2s, -0.5f, 0.5f, 222, 1), leaf_uniform(t, 2, w3s, -0.5f, 0.5f, 223, 1)};
    Var *x = leaf_uniform(t, 4, xs, 0, 1, 224, 0);
    Var *target[4];
    ck_assert_int_eq(ad_grad(t, ad_cross_entropy(t, dlg_net(t, x, w), labels), w, 4, target, 0), FP_OK);
    Var *dummy[2] = {leaf_uniform(t, 4, xs, 0, 1, 225, 1), leaf_uniform(t, 2, ys, -1, 1, 226, 1)};
    Var *l2 = ad_cross_entropy_soft(t, dlg_net(t, dummy[0], w), ad_softmax(t, dummy[1]));
    Var *g2[4];
    ck_assert_int_eq(ad_grad(t, l2, w, 4, g2, 1), FP_OK);
    Var *d = NULL;
    for (int k = 0; k < 4; k++) {
        Var *term = ad_sum(t, ad_unary(t, UN_SQUARE, ad_sub(t, g2[k], target[k])));
        d = d ? ad_add(t, d, term) : term;
    }
    Var *dd[2];
    ck_assert_int_eq(ad_grad(t, d, dummy, 2, dd, 0), FP_OK);
    out_add(o, t, "D", d);
    out_add(o, t, "dD/dx'", dd[0]);
    out_add(o, t, "dD/dy'", dd[1]);
    out_add(o, t, "target dW1", target[0]);
    tape_free(t);
}

START_TEST(cuda_autodiff_first_order) {
    GPU_OR_SKIP(g, "autodiff_first_order");
    GraphOut c = {0}, d = {0};
    graph_lenet(backend_cpu(), &c);
    graph_lenet(g, &d);
    compare_graph("lenet", &c, &d, 1e-4);
    out_free(&c);
    out_free(&d);
}
END_TEST

START_TEST(cuda_autodiff_second_order) {
    GPU_OR_SKIP(g, "autodiff_second_order");
    GraphOut c = {0}, d = {0};
    graph_batchnorm(backend_cpu(), &c);
    graph_batchnorm(g, &d);
    compare_graph("batchnorm", &c, &d, 1e-3);
    out_free(&c);
    out_free(&d);
    graph_dlg(backend_cpu(), &c);
    graph_dlg(g, &d);
    compare_graph("dlg", &c, &d, 1e-3);
    out_free(&c);
    out_free(&d);
}
END_TEST

// Ten SGD steps (momentum 0.9, weight decay) of a small conv net whose parameters live in
// one flat buffer at an odd offset (misaligned views), on both backends.
static void train_steps(const Backend *be, float *final_params) {
    enum { OFF_W1 = 1, OFF_B1 = OFF_W1 + 100, OFF_W2 = OFF_B1 + 4, OFF_B2 = OFF_W2 + 192, N_PARAMS = OFF_B2 + 3 };
    static const int xs[4] = {8, 1, 12, 12}, w1s[4] = {4, 1, 5, 5}, b1s[1] = {4}, w2s[2] = {3, 64}, b2s[1] = {3},
                     flat[2] = {8, 64};
    static const int32_t labels[8] = {0, 1, 2, 0, 1, 2, 2, 1};
    static const size_t off[4] = {OFF_W1, OFF_B1, OFF_W2, OFF_B2}, cnt[4] = {100, 4, 192, 3};
    float init[N_PARAMS];
    fill_uniform(init, N_PARAMS, -0.3f, 0.3f, 230);
    float *p = be->alloc(N_PARAMS * sizeof(float)), *v = be->alloc(N_PARAMS * sizeof(float));
    ck_assert(p && v);
    be->upload(p, init, sizeof init);
    be->fill(v, N_PARAMS, 0.0f);
    Tape *t = tape_create(be);
    for (int step = 0; step < 10; step++) {
        tape_reset(t);
        Var *x = leaf_uniform(t, 4, xs, 0, 1, 231 + (unsigned)step, 0);
        Var *w[4] = {ad_leaf(t, p + OFF_W1, 4, w1s, 1), ad_leaf(t, p + OFF_B1, 1, b1s, 1),
                     ad_leaf(t, p + OFF_W2, 2, w2s, 1), ad_leaf(t, p + OFF_B2, 1, b2s, 1)};
        Var *h = ad_unary(t, UN_SIGMOID, ad_add_channel_bias(t, ad_conv2d(t, x, w[0], 1, 0), w[1])); // (8,4,8,8)
        h = ad_reshape(t, ad_avgpool2d(t, h, 2, 2), 2, flat);                                      // (8,64)
        Var *loss = ad_cross_entropy(t, ad_linear(t, h, w[2], w[3]), labels);
        Var *g[4];
        ck_assert_int_eq(ad_grad(t, loss, w, 4, g, 0), FP_OK);
        for (int k = 0; k < 4; k++)
            be->sgd_step(cnt[k], p + off[k], g[k]->t.data, v + off[k], 0.1f, 0.9f, 1e-3f);
    }
    be->download(final_params, p, N_PARAMS * sizeof(float));
    tape_free(t);
    be->free(p);
    be->free(v);
}

START_TEST(cuda_training_steps) {
    GPU_OR_SKIP(g, "training_steps");
    enum { N = 300 };
    float c[N], d[N];
    train_steps(backend_cpu(), c);
    train_steps(g, d);
    GraphOut oc = {1, {"params"}, {N}, {c}}, od = {1, {"params"}, {N}, {d}};
    compare_graph("10 sgd steps", &oc, &od, 1e-4);
}
END_TEST

// The same inputs give the same bits on every run: DLG's second-order graph, and the
// convolution directions and reductions on a larger problem.
START_TEST(cuda_deterministic) {
    GPU_OR_SKIP(g, "deterministic");
    GraphOut a = {0}, b = {0};
    graph_dlg(g, &a);
    graph_dlg(g, &b);
    ck_assert_msg(graph_same_bits(&a, &b), "DLG gradients differ between two runs on the GPU");
    out_free(&a);
    out_free(&b);
    ConvGeom geo = {64, 32, 16, 16, 64, 3, 3, 1, 1, 16, 16};
    size_t nx = (size_t)64 * 32 * 16 * 16, nw = (size_t)64 * 32 * 9, ny = (size_t)64 * 64 * 16 * 16;
    float *x = host_floats(nx), *w = host_floats(nw), *dy = host_floats(ny);
    fill_uniform(x, nx, -1, 1, 240);
    fill_uniform(w, nw, -1, 1, 241);
    fill_uniform(dy, ny, -1, 1, 242);
    float *gx = dev_copy(g, x, nx), *gw = dev_copy(g, w, nw), *gdy = dev_copy(g, dy, ny);
    float *gy = dev_empty(g, ny), *gdx = dev_empty(g, nx), *gdw = dev_empty(g, nw), *gs = dev_empty(g, 64);
    float *run[2][4];
    double sums[2];
    for (int r = 0; r < 2; r++) {
        g->conv2d_forward(&geo, gx, gw, gy, NULL, 0);
        g->conv2d_backward_data(&geo, gdy, gw, gdx);
        g->conv2d_backward_filter(&geo, gx, gdy, gdw, NULL, 0);
        g->sum_broadcast(ny, gdy, 16 * 16, 64, gs);
        run[r][0] = from_dev(g, gy, ny);
        run[r][1] = from_dev(g, gdx, nx);
        run[r][2] = from_dev(g, gdw, nw);
        run[r][3] = from_dev(g, gs, 64);
        sums[r] = g->dot(ny, gy, gdy);
    }
    ck_assert_msg(memcmp(run[0][0], run[1][0], ny * sizeof(float)) == 0, "conv forward is not deterministic");
    ck_assert_msg(memcmp(run[0][1], run[1][1], nx * sizeof(float)) == 0, "conv backward-data is not deterministic");
    ck_assert_msg(memcmp(run[0][2], run[1][2], nw * sizeof(float)) == 0, "conv backward-filter is not deterministic");
    ck_assert_msg(memcmp(run[0][3], run[1][3], 64 * sizeof(float)) == 0, "sum_broadcast is not deterministic");
    ck_assert_msg(sums[0] == sums[1], "dot is not deterministic");
    printf("cuda deterministic: DLG graph, conv fwd/bwd_data/bwd_filter (64x32x16x16, 3x3), sum_broadcast, dot: "
           "identical bits over two runs\n");
#ifdef FEDPRIV_HAVE_CUDA
    char plans[1024];
    cuda_conv_describe_plans(plans, sizeof plans);
    printf("cuda conv algorithms: %s", plans);
#endif
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++)
            free(run[r][k]);
    g->free(gx);
    g->free(gw);
    g->free(gdy);
    g->free(gy);
    g->free(gdx);
    g->free(gdw);
    g->free(gs);
    free(x);
    free(w);
    free(dy);
}
END_TEST

// -- Philox on the GPU ----------------------------------------------------------------------
#ifdef FEDPRIV_HAVE_CUDA
// Distance in float ulps (order-preserving integer map of the float bits).
static int64_t ulp_distance(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia, lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

static double (*const cpu_draw[3])(const RngStream *, uint64_t) = {rng_uniform_at, rng_normal_at, rng_laplace_at};
static const char *dist_name[3] = {"uniform", "normal", "laplace"};
#endif

START_TEST(cuda_rng_matches_cpu) {
    GPU_OR_SKIP(g, "rng");
#ifdef FEDPRIV_HAVE_CUDA
    FpError err = {0};
    const RngStream streams[2] = {rng_stream(42, RNG_DEFENSE, 3, 7),
                                  rng_stream(0xdeadbeefcafef00dull, RNG_TEST, 0xffffffffu, 0x12345678u)};
    // raw blocks, including indices across the 2^32 boundary and near the 48-bit limit
    const uint64_t firsts[3] = {0, ((uint64_t)1 << 32) - 500, ((uint64_t)0xffff << 32) + 0xfffffc00u};
    const size_t nblk = 1000;
    uint32_t *dw = (uint32_t *)dev_empty(g, 4 * nblk), *hw = malloc(4 * nblk * sizeof(uint32_t));
    for (int s = 0; s < 2; s++)
        for (int f = 0; f < 3; f++) {
            ck_assert_int_eq(cuda_rng_blocks(&streams[s], firsts[f], nblk, dw, &err), FP_OK);
            g->download(hw, dw, 4 * nblk * sizeof(uint32_t));
            for (size_t i = 0; i < nblk; i++) {
                uint32_t ref[4];
                rng_block(&streams[s], firsts[f] + i, ref);
                for (int j = 0; j < 4; j++)
                    ck_assert_msg(hw[4 * i + j] == ref[j], "block %llu word %d: cpu %08x cuda %08x",
                                  (unsigned long long)(firsts[f] + i), j, ref[j], hw[4 * i + j]);
            }
        }
    g->free(dw);
    free(hw);

    // 10^6 draws of each law, in double and rounded to float
    const size_t n = 1000000;
    double *d64 = (double *)g->alloc(n * sizeof(double)), *h64 = malloc(n * sizeof(double));
    float *d32 = dev_empty(g, n), *h32 = host_floats(n);
    ck_assert(d64 && h64);
    for (int dist = 0; dist < 3; dist++) {
        const RngStream *s = &streams[dist == 1];
        ck_assert_int_eq(cuda_rng_fill_f64((CudaRngDist)dist, s, 0, n, d64, &err), FP_OK);
        ck_assert_int_eq(cuda_rng_fill((CudaRngDist)dist, s, 0, n, 1.0, 0, d32, &err), FP_OK);
        g->download(h64, d64, n * sizeof(double));
        g->download(h32, d32, n * sizeof(float));
        double max_d = 0;
        size_t f_differ = 0, d_differ = 0;
        int64_t max_ulp = 0;
        for (size_t i = 0; i < n; i++) {
            double ref = cpu_draw[dist](s, i);
            if (ref != h64[i])
                d_differ++;
            max_d = fmax(max_d, fabs(ref - h64[i]));
            int64_t u = ulp_distance((float)ref, h32[i]);
            f_differ += u != 0;
            max_ulp = u > max_ulp ? u : max_ulp;
        }
        printf("cuda rng %-7s n=%zu: doubles differing %zu (max |diff| %.3g); floats differing %zu (max %lld ulp)\n",
               dist_name[dist], n, d_differ, max_d, f_differ, (long long)max_ulp);
        if (dist == CUDA_RNG_UNIFORM)
            ck_assert_msg(d_differ == 0 && f_differ == 0, "uniform draws must be bit-identical");
        ck_assert_msg(max_d <= 1e-12, "%s: double draws differ by %g", dist_name[dist], max_d);
        ck_assert_msg(max_ulp <= 1, "%s: float draws differ by %lld ulp", dist_name[dist], (long long)max_ulp);
    }
    // scaled and accumulated fills from an offset: x[i] += (float)(sigma · z_{first+i})
    const size_t m = 100000;
    const uint64_t first = 123456789;
    float *base = host_floats(m);
    fill_uniform(base, m, -1, 1, 250);
    g->upload(d32, base, m * sizeof(float));
    ck_assert_int_eq(cuda_rng_fill(CUDA_RNG_NORMAL, &streams[0], first, m, 0.37, 1, d32, &err), FP_OK);
    g->download(h32, d32, m * sizeof(float));
    int64_t max_ulp = 0;
    for (size_t i = 0; i < m; i++) {
        float ref = base[i] + (float)(0.37 * rng_normal_at(&streams[0], first + i));
        int64_t u = ulp_distance(ref, h32[i]);
        max_ulp = u > max_ulp ? u : max_ulp;
    }
    printf("cuda rng accumulate sigma=0.37 from index %llu: max %lld ulp\n", (unsigned long long)first,
           (long long)max_ulp);
    ck_assert_msg(max_ulp <= 1, "accumulated normal noise differs by %lld ulp", (long long)max_ulp);
    ck_assert_int_eq(cuda_rng_fill((CudaRngDist)7, &streams[0], 0, 1, 1.0, 0, d32, &err), FP_EPARAM);
    free(base);
    g->free(d64);
    g->free(d32);
    free(h64);
    free(h32);
#endif
}
END_TEST

Suite *suite_cuda_autodiff(void) {
    Suite *s = suite_create("cuda_autodiff");
    TCase *tc = tcase_create("cpu_vs_cuda_graphs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cuda_autodiff_first_order);
    tcase_add_test(tc, cuda_autodiff_second_order);
    tcase_add_test(tc, cuda_training_steps);
    tcase_add_test(tc, cuda_deterministic);
    tcase_add_test(tc, cuda_rng_matches_cpu);
    suite_add_tcase(s, tc);
    return s;
}
