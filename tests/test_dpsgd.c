// DP-SGD's private step (defenses/dpsgd_step.h) and the per-example gradients under it
// (core/per_example.h).
//
// The oracle for per-example gradients is the ordinary path: one tape per record, a batch
// of one through fl's dataset_batch/batch_loss and ad_grad. "Relative error" below is, per
// record and layer, max_j |g_j − g'_j| / max_j |g'_j| (g' the batch-of-one gradient).
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/per_example.h"
#include "defenses/dpsgd_step.h"
#include "defenses/registry.h"
#include "fl/fed.h"
#include "tests/cuda_check.h"

#define PE_TOL 1e-5

// A synthetic dataset of n records: images in [0,1] (classification) or sequences with a
// regression target, labels spread over the classes. Seeded, so every run is the same.
static Dataset *make_data(int n, int c, int h, int w, int classes, int target_dim, unsigned seed) {
    FpError err = {0};
    Dataset *d = dataset_create("synthetic", n, c, h, w, classes, target_dim, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    RngStream rs = rng_stream(seed, RNG_TEST, 1, 0);
    size_t ss = dataset_sample_size(d);
    for (size_t i = 0; i < (size_t)n * ss; i++)
        d->x[i] = (float)rng_uniform_at(&rs, i);
    for (int i = 0; i < n; i++) {
        if (classes)
            d->y[i] = (int32_t)((i * 7 + 3) % classes);
        for (int t = 0; t < target_dim; t++)
            d->target[(size_t)i * target_dim + t] = (float)(2.0 * rng_uniform_at(&rs, 1000000 + i * 8 + t) - 1.0);
    }
    return d;
}

static Model *make_model(const char *json, const Dataset *d, const Backend *be) {
    cJSON *j = cJSON_Parse(json);
    ck_assert_ptr_nonnull(j);
    DataShape in = {d->c, d->h, d->w, d->n_classes, d->target_dim};
    FpError err = {0};
    Model *m = model_create(j, "model", &in, be, &err);
    cJSON_Delete(j);
    ck_assert_msg(m != NULL, "%s: %s", json, err.msg);
    ck_assert_int_eq(model_init(m, 11, NULL), FP_OK);
    return m;
}

// The gradient of record r's loss alone (host, n_params floats; 0 on non-trainable).
static void batch_of_one_grad(Model *m, const Dataset *d, uint32_t r, float *out) {
    Tape *t = tape_create(m->be);
    int L = m->table.n_layers;
    Var **p = malloc(sizeof(Var *) * (size_t)L * 2);
    float *scratch = malloc(sizeof(float) * (dataset_sample_size(d) + (size_t)d->target_dim + 1));
    ck_assert(t && p && scratch);
    ck_assert_int_eq(model_param_vars(m, t, 1, p), FP_OK);
    Var *x = dataset_batch(t, d, &r, 1, scratch);
    Var *loss = batch_loss(t, model_forward(m, t, p, x, 1), d, &r, 1, scratch);
    ck_assert_ptr_nonnull(loss);
    ck_assert_int_eq(ad_grad(t, loss, p, L, p + L, 0), FP_OK);
    memset(out, 0, sizeof(float) * m->table.n_params);
    for (int k = 0; k < L; k++)
        if (m->table.layers[k].trainable)
            ad_to_host(t, p[L + k], out + m->table.layers[k].offset);
    tape_free(t);
    free(p);
    free(scratch);
}

// Max over records and layers of the relative error of per-example gradients vs batch-of-one.
static double per_example_error(Model *m, const Dataset *d, const uint32_t *idx, int n) {
    size_t np = m->table.n_params;
    float *pe = malloc(sizeof(float) * np * (size_t)n), *one = malloc(sizeof(float) * np);
    ck_assert(pe && one);
    Tape *t = tape_create(m->be);
    FpError err = {0};
    ck_assert_msg(dpsgd_per_example_grads(m, t, d, idx, n, pe, &err) == FP_OK, "%s", err.msg);
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        batch_of_one_grad(m, d, idx[i], one);
        for (int k = 0; k < m->table.n_layers; k++) {
            const ParamLayer *l = &m->table.layers[k];
            double diff = 0.0, ref = 0.0;
            for (size_t j = l->offset; j < l->offset + l->count; j++) {
                diff = fmax(diff, fabs((double)pe[(size_t)i * np + j] - one[j]));
                ref = fmax(ref, fabs((double)one[j]));
            }
            ck_assert_msg(ref > 0.0, "layer %s of record %d has a zero gradient: the check would be vacuous",
                          l->name, i);
            worst = fmax(worst, diff / ref);
        }
    }
    tape_free(t);
    free(pe);
    free(one);
    return worst;
}

static const uint32_t IDX[6] = {4, 0, 9, 2, 7, 5};

START_TEST(per_example_matches_batch_of_one) {
    // Every supported family (the lstm's recurrent weight is used once per time step).
    static const struct {
        const char *json;
        int c, h, w, classes, target;
    } cases[] = {
        {"{\"name\":\"mlp\",\"hidden\":[24,16]}", 1, 6, 6, 5, 0},
        {"{\"name\":\"logreg\"}", 1, 6, 6, 4, 0},
        {"{\"name\":\"lenet\"}", 3, 12, 12, 6, 0},
        {"{\"name\":\"cnn-mnist\"}", 1, 20, 20, 10, 0},
        {"{\"name\":\"cnn-cifar\"}", 3, 8, 8, 10, 0},
        {"{\"name\":\"lstm\",\"hidden\":8}", 1, 5, 3, 0, 2},
        {"{\"name\":\"mlp\",\"hidden\":[12]}", 1, 1, 7, 0, 3}, // regression (MSE)
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Dataset *d = make_data(10, cases[c].c, cases[c].h, cases[c].w, cases[c].classes, cases[c].target, 5 + c);
        Model *m = make_model(cases[c].json, d, backend_cpu());
        double e = per_example_error(m, d, IDX, 6);
        ck_assert_msg(e <= PE_TOL, "%s: per-example vs batch-of-one relative error %.3g > %g", cases[c].json, e,
                      PE_TOL);
        model_free(m);
        dataset_free(d);
    }
}
END_TEST

// Control: the comparison is sensitive. Perturbing one element of one record's gradient by
// the tolerance's worth must register (the check is not vacuous on layers near zero).
START_TEST(per_example_check_catches_a_wrong_row) {
    Dataset *d = make_data(10, 1, 6, 6, 5, 0, 3);
    Model *m = make_model("{\"name\":\"mlp\",\"hidden\":[8]}", d, backend_cpu());
    // Records 4 and 0 swapped in the per-example call: every row is some record's exact
    // gradient, but not the one compared with.
    uint32_t swapped[6] = {0, 4, 9, 2, 7, 5};
    size_t np = m->table.n_params;
    float *pe = malloc(sizeof(float) * np * 6), *one = malloc(sizeof(float) * np);
    Tape *t = tape_create(m->be);
    ck_assert_int_eq(dpsgd_per_example_grads(m, t, d, swapped, 6, pe, NULL), FP_OK);
    batch_of_one_grad(m, d, IDX[0], one);
    double diff = 0, ref = 0;
    for (size_t j = 0; j < np; j++) {
        diff = fmax(diff, fabs((double)pe[j] - one[j]));
        ref = fmax(ref, fabs((double)one[j]));
    }
    ck_assert_double_gt(diff / ref, 100 * PE_TOL);
    tape_free(t);
    free(pe);
    free(one);
    model_free(m);
    dataset_free(d);
}
END_TEST

START_TEST(batch_norm_and_unknown_uses_are_refused) {
    Dataset *d = make_data(4, 3, 32, 32, 10, 0, 1);
    Model *m = make_model("{\"name\":\"resnet18\"}", d, backend_cpu());
    FpError err = {0};
    ck_assert_int_eq(dpsgd_check_model(m, &err), FP_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "batch norm"));
    Tape *t = tape_create(backend_cpu());
    float *g = malloc(sizeof(float) * m->table.n_params);
    DpSgdStepConfig cfg = {1.0, 0.0, 4.0, NULL};
    RngStream rs = rng_stream(1, RNG_DEFENSE, 0, 0);
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 4, &cfg, &rs, 0, g, NULL, &err), FP_EUNSUPPORTED);
    free(g);
    model_free(m);
    dataset_free(d);
    // A parameter scaling activations elementwise (as batch norm's γ does) has no rule.
    tape_reset(t);
    int xs[2] = {3, 4}, ws[1] = {4};
    float xv[12], wv[4] = {1, 2, 3, 4};
    for (int i = 0; i < 12; i++)
        xv[i] = (float)i / 7.0f;
    Var *x = ad_from_host(t, xv, 2, xs, 0), *w = ad_from_host(t, wv, 1, ws, 1);
    Var *loss = ad_sum(t, ad_binary_bc(t, BIN_MUL, x, w, 1));
    PerExample *pe = NULL;
    ck_assert_int_eq(per_example_create(t, loss, &w, 1, 3, &pe, &err), FP_EUNSUPPORTED);
    ck_assert_ptr_null(pe);
    ck_assert_ptr_nonnull(strstr(err.msg, "binary"));
    tape_free(t);
}
END_TEST

// Clipped sum with σ = 0 against its definition on the exact per-example gradients.
START_TEST(private_step_is_the_clipped_mean) {
    Dataset *d = make_data(10, 1, 20, 20, 10, 0, 8);
    Model *m = make_model("{\"name\":\"cnn-mnist\"}", d, backend_cpu());
    size_t np = m->table.n_params;
    float *pe = malloc(sizeof(float) * np * 6), *g = malloc(sizeof(float) * np);
    double *want = calloc(np, sizeof(double));
    Tape *t = tape_create(m->be);
    ck_assert_int_eq(dpsgd_per_example_grads(m, t, d, IDX, 6, pe, NULL), FP_OK);
    double norms[6];
    for (int i = 0; i < 6; i++) {
        double n2 = 0;
        for (size_t j = 0; j < np; j++)
            n2 += (double)pe[i * np + j] * pe[i * np + j];
        norms[i] = sqrt(n2);
    }
    // C between the smallest and largest norm: some records are clipped, some are not.
    double lo = norms[0], hi = norms[0];
    for (int i = 1; i < 6; i++) {
        lo = fmin(lo, norms[i]);
        hi = fmax(hi, norms[i]);
    }
    ck_assert_double_lt(lo, hi);
    DpSgdStepConfig cfg = {.clip = 0.5 * (lo + hi), .noise_multiplier = 0.0, .denominator = 4.5};
    for (int i = 0; i < 6; i++) {
        double f = norms[i] > cfg.clip ? cfg.clip / norms[i] : 1.0;
        for (size_t j = 0; j < np; j++)
            want[j] += f * pe[i * np + j] / cfg.denominator;
    }
    DpSgdStats st;
    RngStream rs = rng_stream(1, RNG_DEFENSE, 0, 0);
    FpError err = {0};
    ck_assert_msg(dpsgd_step(m, t, d, IDX, 6, &cfg, &rs, 0, g, &st, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(st.batch, 6);
    ck_assert_int_gt(st.clipped, 0);
    ck_assert_int_lt(st.clipped, 6);
    double diff = 0, ref = 0;
    for (size_t j = 0; j < np; j++) {
        diff = fmax(diff, fabs(g[j] - want[j]));
        ref = fmax(ref, fabs(want[j]));
    }
    ck_assert_msg(diff <= 1e-5 * ref, "clipped mean off by %.3g (scale %.3g)", diff, ref);
    // Sensitivity: removing one record moves the clipped sum by at most C.
    DpSgdStepConfig sum_cfg = cfg;
    sum_cfg.denominator = 1.0;
    float *g5 = malloc(sizeof(float) * np);
    for (int drop = 0; drop < 6; drop++) {
        uint32_t rest[5];
        for (int i = 0, r = 0; i < 6; i++)
            if (i != drop)
                rest[r++] = IDX[i];
        ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 6, &sum_cfg, &rs, 0, g, NULL, NULL), FP_OK);
        ck_assert_int_eq(dpsgd_step(m, t, d, rest, 5, &sum_cfg, &rs, 0, g5, NULL, NULL), FP_OK);
        double n2 = 0;
        for (size_t j = 0; j < np; j++)
            n2 += ((double)g[j] - g5[j]) * ((double)g[j] - g5[j]);
        ck_assert_double_le(sqrt(n2), cfg.clip * (1 + 1e-5));
    }
    free(g5);
    tape_free(t);
    free(pe);
    free(g);
    free(want);
    model_free(m);
    dataset_free(d);
}
END_TEST

// The sampler of a defense's "sampler" JSON for m's trainable elements, built for σ.
static void make_sampler(const Model *m, const char *json, double sigma, ClipNoise *out) {
    cJSON *j = cJSON_Parse(json);
    FpError err = {0};
    ck_assert_msg(clip_noise_parse(j, "defense", &m->table, out, &err) == FP_OK, "%s", err.msg);
    ck_assert_msg(clip_noise_build(out, sigma, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(j);
}

static double sample_var(const float *g, size_t n) {
    double ss = 0;
    for (size_t k = 0; k < n; k++)
        ss += (double)g[k] * g[k];
    return ss / (double)n;
}

// The float sampler's noise: element k is (float)(σC · rng_normal_at(stream, first + k))
// divided by the denominator in float, exactly (an empty batch leaves only the noise),
// other indices differ, the same indices repeat bit for bit; its variance matches
// σC/denominator within 6 standard errors, and the same check rejects a step with 10%
// less noise (the control).
START_TEST(noise_is_element_indexed_gaussian) {
    Dataset *d = make_data(4, 1, 6, 6, 5, 0, 2);
    Model *m = make_model("{\"name\":\"mlp\",\"hidden\":[256]}", d, backend_cpu());
    size_t np = m->table.n_params;
    float *g = malloc(sizeof(float) * np), *g2 = malloc(sizeof(float) * np);
    Tape *t = tape_create(m->be);
    RngStream rs = rng_stream(42, RNG_DEFENSE, 3, 1);
    ClipNoise fl;
    make_sampler(m, "{\"sampler\": \"float\"}", 1.3, &fl);
    DpSgdStepConfig cfg = {.clip = 2.0, .noise_multiplier = 1.3, .denominator = 4.0, .sampler = &fl};
    double std = 1.3 * 2.0 / 4.0;
    uint64_t first = (uint64_t)8 << 32; // the defense contract's indices for local step 7
    ck_assert_int_eq(dpsgd_step(m, t, d, NULL, 0, &cfg, &rs, first, g, NULL, NULL), FP_OK);
    for (size_t k = 0; k < np; k++)
        ck_assert_float_eq(g[k], (float)(0.0f + 1.3 * 2.0 * rng_normal_at(&rs, first + k)) * (float)(1.0 / 4.0));
    ck_assert_int_eq(dpsgd_step(m, t, d, NULL, 0, &cfg, &rs, first, g2, NULL, NULL), FP_OK);
    ck_assert_int_eq(memcmp(g, g2, sizeof(float) * np), 0);
    ck_assert_int_eq(dpsgd_step(m, t, d, NULL, 0, &cfg, &rs, first + ((uint64_t)1 << 32), g2, NULL, NULL), FP_OK);
    ck_assert_int_ne(memcmp(g, g2, sizeof(float) * np), 0);
    // Sample variance of np draws against σC/denominator: standard error var·√(2/np).
    double want = std * std, se = want * sqrt(2.0 / (double)np);
    ck_assert_msg(fabs(sample_var(g, np) - want) <= 6 * se, "noise variance %.6g vs %.6g (se %.3g)", sample_var(g, np),
                  want, se);
    DpSgdStepConfig weak = cfg; // control: 10% less noise must fail the same check
    weak.noise_multiplier *= 0.9;
    ck_assert_int_eq(dpsgd_step(m, t, d, NULL, 0, &weak, &rs, first, g2, NULL, NULL), FP_OK);
    ck_assert_msg(fabs(sample_var(g2, np) - want) > 6 * se, "the variance check cannot see noise 10%% too small");
    clip_noise_free(&fl);
    tape_free(t);
    free(g);
    free(g2);
    model_free(m);
    dataset_free(d);
}
END_TEST

// Mean and variance of x[0..n) against N_Z(0, var) scaled by grid, within 6 standard
// errors: the mean's √(v/n), the mean square's √((m4 − v²)/n) with m4 = 3v² (the discrete
// Gaussian's fourth moment is within 1e-12 of the continuous one's at these T).
static int dgauss_moments_ok(const double *x, size_t n, double v) {
    double m1 = 0, m2 = 0;
    for (size_t i = 0; i < n; i++) {
        m1 += x[i] / (double)n;
        m2 += x[i] * x[i] / (double)n;
    }
    return fabs(m1) <= 6 * sqrt(v / (double)n) && fabs(m2 - v) <= 6 * v * sqrt(2.0 / (double)n);
}

// The safe sampler (the default of the dp-sgd defense): with an empty batch the step is
// g·J_k / denominator with J_k the plain search (dgauss_wide_draw_ref) on element first + k's
// words (dgauss_wide_words), bit for bit,
// g = σC/T the grid (T the table's σ in grid steps); the noise on the sum, x_k = g·J_k,
// has mean 0 and variance g²·Var(J) within 6 SE over 4 steps; the control: a step at
// 0.9σ (a broken scale) fails the same check. The chunked path equals the per-element
// one (clip_noise_one) for any split of the elements.
START_TEST(safe_noise_is_the_discrete_gaussian) {
    Dataset *d = make_data(4, 1, 6, 6, 5, 0, 2);
    Model *m = make_model("{\"name\":\"mlp\",\"hidden\":[256]}", d, backend_cpu());
    size_t np = m->table.n_params;
    const double sigma = 1.3, clip = 2.0, den = 4.0;
    ClipNoise sf;
    make_sampler(m, "{}", sigma, &sf);
    ck_assert(sf.safe);
    const DGaussWide *tab = &sf.table;
    double grid = sigma * clip / tab->sigma;
    float *g = malloc(sizeof(float) * np);
    enum { STEPS = 4 };
    double *x = malloc(sizeof(double) * np * STEPS), *x_weak = malloc(sizeof(double) * np * STEPS);
    Tape *t = tape_create(m->be);
    RngStream rs = rng_stream(42, RNG_DEFENSE, 3, 1);
    DpSgdStepConfig cfg = {.clip = clip, .noise_multiplier = sigma, .denominator = den, .sampler = &sf};
    DpSgdStepConfig weak = cfg;
    weak.noise_multiplier *= 0.9;
    for (int s = 0; s < STEPS; s++) {
        uint64_t first = (uint64_t)(s + 1) << 32;
        ck_assert_int_eq(dpsgd_step(m, t, d, NULL, 0, &cfg, &rs, first, g, NULL, NULL), FP_OK);
        for (size_t k = 0; k < np; k++) {
            uint32_t w[4];
            dgauss_wide_words(&rs, first + k, w);
            long j = dgauss_wide_draw_ref(tab, w);
            ck_assert_msg(g[k] == (float)(grid * (double)j) * (float)(1.0 / den), "step %d element %zu", s, k);
            x[s * np + k] = grid * (double)j;
        }
        ck_assert_int_eq(dpsgd_step(m, t, d, NULL, 0, &weak, &rs, first, g, NULL, NULL), FP_OK);
        for (size_t k = 0; k < np; k++)
            x_weak[s * np + k] = (double)g[k] * den;
    }
    double v = grid * grid * tab->variance;
    ck_assert_msg(dgauss_moments_ok(x, np * STEPS, v), "the safe step's noise is not g N_Z(0, T^2)");
    ck_assert_msg(!dgauss_moments_ok(x_weak, np * STEPS, v), "control: 0.9 sigma passes the noise check");
    // Element-indexed: the vector path over pieces split off the chunks' alignment equals the
    // per-element oracle over the whole (non-zero inputs, so the rounding is exercised).
    float *a = malloc(sizeof(float) * np), *b = malloc(sizeof(float) * np);
    for (size_t k = 0; k < np; k++)
        a[k] = b[k] = (float)(0.37 * sin((double)k));
    uint64_t first = ((uint64_t)1 << 32) - 21;   // the pieces cross the 2^32 boundary of the index
    clip_noise_add_at(&sf, a, 5, &rs, first, sigma * clip);
    clip_noise_add_at(&sf, a + 5, 1000, &rs, first + 5, sigma * clip);
    clip_noise_add_at(&sf, a + 1005, np - 1005, &rs, first + 1005, sigma * clip);
    for (size_t k = 0; k < np; k++)
        ck_assert_msg(a[k] == clip_noise_one(&sf, b[k], first + k, &rs, sigma * clip), "element %zu", k);
    free(a);
    free(b);
    clip_noise_free(&sf);
    tape_free(t);
    free(g);
    free(x);
    free(x_weak);
    model_free(m);
    dataset_free(d);
}
END_TEST

START_TEST(bad_configs_are_eparam) {
    Dataset *d = make_data(4, 1, 6, 6, 5, 0, 2);
    Model *m = make_model("{\"name\":\"logreg\"}", d, backend_cpu());
    float *g = malloc(sizeof(float) * m->table.n_params);
    Tape *t = tape_create(m->be);
    RngStream rs = rng_stream(1, RNG_DEFENSE, 0, 0);
    FpError err = {0};
    DpSgdStepConfig bad[] = {{0.0, 1.0, 1.0}, {1.0, -1.0, 1.0}, {1.0, 1.0, 0.0}, {NAN, 1.0, 1.0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 2, &bad[i], &rs, 0, g, NULL, &err), FP_EPARAM);
    ClipNoise sf, unbuilt;
    make_sampler(m, "{}", 1.0, &sf);
    cJSON *none = cJSON_Parse("{}");
    ck_assert_int_eq(clip_noise_parse(none, "defense", &m->table, &unbuilt, NULL), FP_OK);
    cJSON_Delete(none);
    DpSgdStepConfig no_sampler = {1.0, 1.0, 2.0, NULL}, no_table = {1.0, 1.0, 2.0, &unbuilt};
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 2, &no_sampler, &rs, 0, g, NULL, &err), FP_EPARAM);
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 2, &no_table, &rs, 0, g, NULL, &err), FP_EPARAM);
    DpSgdStepConfig ok = {1.0, 1.0, 2.0, &sf};
    static const uint32_t two[] = {0, 1};
    ck_assert_msg(dpsgd_step(m, t, d, two, 2, &ok, &rs, 0, g, NULL, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, -1, &ok, &rs, 0, g, NULL, &err), FP_EPARAM);
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 2, &ok, &rs, UINT64_C(1) << 48, g, NULL, &err), FP_EPARAM);
    ck_assert_int_eq(dpsgd_per_example_grads(m, t, d, IDX, 0, g, &err), FP_EPARAM);
    Dataset *other = make_data(4, 1, 5, 5, 5, 0, 2); // 25 inputs for a 36-input model
    ck_assert_int_eq(dpsgd_step(m, t, other, IDX, 2, &ok, &rs, 0, g, NULL, &err), FP_EPARAM);
    dataset_free(other);
    clip_noise_free(&sf);
    tape_free(t);
    free(g);
    model_free(m);
    dataset_free(d);
}
END_TEST

// The federations of one experiment share a memo (DefenseSetup.memo): dp-sgd searches σ
// for its ε target once and accounts each round once, and a federation that finds them
// there gets the same σ and the same record, bit for bit, as one that derives them (what
// makes a multi-run audit of 200 federations take seconds instead of minutes).
static void dpsgd_state(const char *json, DefenseMemo *memo, const ParamTable *table, double *sigma,
                        PrivacyRecord *rec) {
    static const int samples[] = {20, 20, 20};
    DefenseSetup setup = {.seed = 1, .params = table, .n_clients = 3, .rounds = 2, .sample_rate = 1,
                          .local_steps = 2, .batch_size = 5, .lr = 0.1, .min_client_samples = 20,
                          .max_client_samples = 20, .client_samples = samples, .memo = memo};
    const DefenseOps *ops = defense_find("dp-sgd");
    ck_assert_ptr_nonnull(ops);
    cJSON *params = cJSON_Parse(json), *desc = cJSON_CreateObject();
    void *state = NULL;
    FpError err = {0};
    ck_assert_msg(ops->create(params, "defense", &setup, &state, &err) == FP_OK, "%s", err.msg);
    ops->describe(state, desc);
    *sigma = cJSON_GetObjectItem(desc, "noise_multiplier")->valuedouble;
    defense_privacy(ops, state, 2, rec, NULL);
    ops->destroy(state);
    cJSON_Delete(params);
    cJSON_Delete(desc);
}

START_TEST(calibration_is_memoised) {
    Dataset *d = make_data(4, 1, 6, 6, 5, 0, 2);
    Model *m = make_model("{\"name\":\"logreg\"}", d, backend_cpu());
    const char *cfg = "{\"name\":\"dp-sgd\",\"epsilon\":3}";
    double s_plain, s_first, s_again;
    PrivacyRecord r_plain, r_first, r_again;
    dpsgd_state(cfg, NULL, &m->table, &s_plain, &r_plain);
    DefenseMemo *memo = defense_memo_create();
    dpsgd_state(cfg, memo, &m->table, &s_first, &r_first);
    int kept = defense_memo_size(memo);
    ck_assert_int_eq(kept, 5); // σ, ε after one round (the nominal per round) and after two, the
                               // standard accountant's figures after two, and the noise table
    dpsgd_state(cfg, memo, &m->table, &s_again, &r_again);
    ck_assert_int_eq(defense_memo_size(memo), kept); // nothing derived again
    ck_assert(s_plain == s_first && s_first == s_again);
    ck_assert(r_plain.epsilon_total_conditional == r_first.epsilon_total_conditional);
    ck_assert(r_first.epsilon_total_conditional == r_again.epsilon_total_conditional);
    ck_assert_msg(r_again.epsilon_total_conditional <= 3 && r_again.epsilon_total_conditional > 2.9, "eps %g",
                  r_again.epsilon_total_conditional);
    // Another target is another key (its σ sizes another table too).
    double s_other;
    PrivacyRecord r_other;
    dpsgd_state("{\"name\":\"dp-sgd\",\"epsilon\":5}", memo, &m->table, &s_other, &r_other);
    ck_assert_int_eq(defense_memo_size(memo), kept + 5);
    ck_assert(s_other < s_first);
    defense_memo_free(memo);
    model_free(m);
    dataset_free(d);
}
END_TEST

// An audit's canary records (DpSgdStepConfig.n_diracs): each adds its value at its
// coordinate to the clipped sum before the noise, and nowhere else; a value beyond the
// clip or a coordinate beyond the model is refused.
START_TEST(canary_records_add_their_dirac) {
    Dataset *d = make_data(10, 1, 6, 6, 5, 0, 3);
    Model *m = make_model("{\"name\":\"logreg\"}", d, backend_cpu());
    size_t np = m->table.n_params;
    float *g0 = malloc(sizeof(float) * np), *g1 = malloc(sizeof(float) * np);
    Tape *t = tape_create(m->be);
    RngStream rs = rng_stream(1, RNG_DEFENSE, 0, 0);
    FpError err = {0};
    static const uint32_t coords[] = {7, 100, 7}; // two canaries may share a coordinate
    DpSgdStepConfig plain = {.clip = 0.5, .noise_multiplier = 0.0, .denominator = 4.0};
    DpSgdStepConfig canaries = plain;
    canaries.n_diracs = 3;
    canaries.dirac_coords = coords;
    canaries.dirac_value = 0.5f;
    DpSgdStats st;
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 6, &plain, &rs, 0, g0, NULL, &err), FP_OK);
    ck_assert_msg(dpsgd_step(m, t, d, IDX, 6, &canaries, &rs, 0, g1, &st, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(st.batch, 9);
    for (size_t j = 0; j < np; j++) {
        double want = j == 7 ? 2 * 0.5 / 4.0 : j == 100 ? 0.5 / 4.0 : 0.0;
        ck_assert_msg(fabs(((double)g1[j] - g0[j]) - want) <= 1e-6, "element %zu: %g, want %g", j,
                      (double)g1[j] - g0[j], want);
    }
    canaries.dirac_value = 0.75f; // beyond the clip
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 6, &canaries, &rs, 0, g1, NULL, &err), FP_EPARAM);
    static const uint32_t outside[] = {4000000};
    canaries.dirac_value = 0.5f;
    canaries.n_diracs = 1;
    canaries.dirac_coords = outside;
    ck_assert_int_eq(dpsgd_step(m, t, d, IDX, 6, &canaries, &rs, 0, g1, NULL, &err), FP_EPARAM);
    tape_free(t);
    free(g0);
    free(g1);
    model_free(m);
    dataset_free(d);
}
END_TEST

// CPU vs CUDA: the same private step (noise included) through the same vtable ops.
START_TEST(cuda_private_step_matches_cpu) {
    GPU_OR_SKIP(gpu, "cuda_private_step_matches_cpu");
    static const char *const models[] = {"{\"name\":\"mlp\",\"hidden\":[32]}", "{\"name\":\"cnn-mnist\"}",
                                         "{\"name\":\"lenet\"}"};
    for (int c = 0; c < 3; c++) {
        Dataset *d = c == 0 ? make_data(10, 1, 6, 6, 5, 0, 9)
                            : make_data(10, c == 1 ? 1 : 3, c == 1 ? 20 : 12, c == 1 ? 20 : 12, 10, 0, 9);
        Model *mc = make_model(models[c], d, backend_cpu());
        FpError err = {0};
        Model *mg = model_clone(mc, gpu, &err);
        ck_assert_msg(mg != NULL, "%s", err.msg);
        size_t np = mc->table.n_params;
        float *gc = malloc(sizeof(float) * np), *gg = malloc(sizeof(float) * np);
        float *dev = gpu->alloc(sizeof(float) * np);
        Tape *tc = tape_create(mc->be), *tg = tape_create(gpu);
        RngStream rs = rng_stream(5, RNG_DEFENSE, 1, 2);
        ClipNoise sf;
        make_sampler(mc, "{}", 0.5, &sf);
        DpSgdStepConfig cfg = {.clip = 0.05, .noise_multiplier = 0.5, .denominator = 6.0, .sampler = &sf};
        ck_assert_int_eq(dpsgd_step(mc, tc, d, IDX, 6, &cfg, &rs, 3, gc, NULL, NULL), FP_OK);
        ck_assert_msg(dpsgd_step(mg, tg, d, IDX, 6, &cfg, &rs, 3, dev, NULL, &err) == FP_OK, "%s", err.msg);
        gpu->download(gg, dev, sizeof(float) * np);
        double diff = 0, ref = 0;
        for (size_t j = 0; j < np; j++) {
            diff = fmax(diff, fabs((double)gc[j] - gg[j]));
            ref = fmax(ref, fabs((double)gc[j]));
        }
        // The sums differ in float rounding, so a coordinate near a half grid step may round
        // to the neighbouring grid point: one grid step (g/denominator) is allowed on top.
        double step = 0.5 * 0.05 / sf.table.sigma / 6.0;
        ck_assert_msg(diff <= 1e-4 * ref + step, "%s: CPU vs CUDA private step differ by %.3g (scale %.3g)", models[c],
                      diff, ref);
        clip_noise_free(&sf);
        tape_free(tc);
        tape_free(tg);
        gpu->free(dev);
        free(gc);
        free(gg);
        model_free(mc);
        model_free(mg);
        dataset_free(d);
    }
}
END_TEST

Suite *suite_dpsgd(void) {
    Suite *s = suite_create("dpsgd");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, per_example_matches_batch_of_one);
    tcase_add_test(t, per_example_check_catches_a_wrong_row);
    tcase_add_test(t, batch_norm_and_unknown_uses_are_refused);
    tcase_add_test(t, private_step_is_the_clipped_mean);
    tcase_add_test(t, noise_is_element_indexed_gaussian);
    tcase_add_test(t, safe_noise_is_the_discrete_gaussian);
    tcase_add_test(t, bad_configs_are_eparam);
    tcase_add_test(t, canary_records_add_their_dirac);
    tcase_add_test(t, calibration_is_memoised);
    tcase_add_test(t, cuda_private_step_matches_cpu);
    suite_add_tcase(s, t);
    return s;
}
