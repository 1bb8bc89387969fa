// Gradient inversion: the L-BFGS port against torch.optim.LBFGS trajectories, iDLG's
// label rule, exact second-order gradients of the matching objective, tiny DLG/iDLG runs
// that converge, and `fedpriv attack dlg|idlg` end to end and on bad configs.
//
// The L-BFGS reference values come from torch.optim.LBFGS (torch 1.13) and are printed
// by `/usr/bin/python3 bench/dlg_bench.py --lbfgs-reference`.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attacks/inversion.h"
#include "attacks/lbfgs.h"
#include "core/jsonv.h"
#include "core/rng.h"
#include "eval/image_metrics.h"
#include "eval/png.h"
#include "inversion_fixture.h"

// -- L-BFGS ----------------------------------------------------------------------------------
static const double SM_A[5] = {1.0, 2.0, 0.5, 3.0, 1.5}, SM_C[5] = {0.3, -0.2, 0.5, 0.1, -0.4};

// Σ a_i (x_i − c_i)² + (Σ x)⁴/4 + log(1 + e^{x0 − x1}), in double.
static FpStatus smooth_fn(void *ctx, const float *x, float *g, double *loss, FpError *err) {
    double s = 0, l = 0;
    for (int i = 0; i < 5; i++) {
        s += x[i];
        l += SM_A[i] * (x[i] - SM_C[i]) * (x[i] - SM_C[i]);
    }
    double z = (double)x[0] - x[1], sg = 1.0 / (1.0 + exp(-z));
    l += 0.25 * s * s * s * s + log1p(exp(z));
    for (int i = 0; i < 5; i++)
        g[i] = (float)(2 * SM_A[i] * (x[i] - SM_C[i]) + s * s * s);
    g[0] += (float)sg;
    g[1] -= (float)sg;
    *loss = l;
    if (ctx)
        ++*(int *)ctx;
    return FP_OK;
}

static FpStatus rosen_fn(void *ctx, const float *x, float *g, double *loss, FpError *err) {
    float a = 1 - x[0], b = x[1] - x[0] * x[0];
    *loss = (double)(a * a + 100 * b * b);
    g[0] = -2 * a - 400 * b * x[0];
    g[1] = 200 * b;
    if (ctx)
        ++*(int *)ctx;
    return FP_OK;
}

typedef struct { double x[5]; long evals, iters; } LbfgsRef;

START_TEST(lbfgs_matches_torch_smooth) {
    // torch.optim.LBFGS float64, lr 0.5, max_iter 4 (max_eval 5), 4 step() calls.
    static const LbfgsRef ref[4] = {
        {{0.354139088, -0.134235401, 0.549483155, 0.266221676, -0.595482912}, 4, 4},
        {{0.0664451335, -0.068788475, 0.520534457, 0.108034516, -0.409556099}, 8, 8},
        {{0.036105052, -0.0693557792, 0.501549328, 0.0997507388, -0.401384576}, 12, 12},
        {{0.0349266039, -0.0694832788, 0.49640387, 0.0993336906, -0.401327664}, 16, 16},
    };
    LbfgsConfig c = lbfgs_defaults();
    c.lr = 0.5;
    c.max_iter = 4;
    c.max_eval = 5;
    FpError err = {0};
    Lbfgs *o = lbfgs_create(5, &c, &err);
    ck_assert_ptr_nonnull(o);
    float x[5] = {1, -1, 0.5f, 2, -1.5f};
    int calls = 0;
    for (int s = 0; s < 4; s++) {
        ck_assert_int_eq(lbfgs_step(o, x, smooth_fn, &calls, NULL, &err), FP_OK);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(fabs(x[i] - ref[s].x[i]) < 2e-6, "step %d x[%d] = %.9g, torch %.9g", s, i, x[i],
                          ref[s].x[i]);
        ck_assert_int_eq(lbfgs_func_evals(o), ref[s].evals);
        ck_assert_int_eq(lbfgs_iterations(o), ref[s].iters);
    }
    ck_assert_int_eq(calls, 16);
    lbfgs_free(o);
}
END_TEST

START_TEST(lbfgs_rosenbrock_rules) {
    FpError err = {0};
    // Defaults: the first step scales lr by min(1, 1/‖g‖₁), runs max_iter = 20 iterations
    // and evaluates 20 times (none after the last iteration). torch float32: (−0.781142235, 0.61316514).
    LbfgsConfig c = lbfgs_defaults();
    Lbfgs *o = lbfgs_create(2, &c, &err);
    float x[2] = {-1.5f, 2.0f};
    int calls = 0;
    double l0 = 0;
    ck_assert_int_eq(lbfgs_step(o, x, rosen_fn, &calls, &l0, &err), FP_OK);
    ck_assert_double_eq_tol(l0, 2.5 * 2.5 + 100 * 0.25 * 0.25, 1e-4); // the loss at the entry point
    ck_assert_msg(fabs(x[0] + 0.781142235) < 1e-4 && fabs(x[1] - 0.61316514) < 1e-4, "x = (%.9g, %.9g)", x[0], x[1]);
    ck_assert_int_eq(lbfgs_func_evals(o), 20);
    ck_assert_int_eq(lbfgs_iterations(o), 20);
    ck_assert_int_eq(calls, 20);
    // It reaches the minimum (1, 1); afterwards a step costs one evaluation (a stopping rule).
    for (int s = 0; s < 20; s++)
        lbfgs_step(o, x, rosen_fn, &calls, NULL, &err);
    ck_assert_msg(fabs(x[0] - 1) < 1e-3 && fabs(x[1] - 1) < 1e-3, "x = (%g, %g)", x[0], x[1]);
    long e0 = lbfgs_func_evals(o);
    lbfgs_step(o, x, rosen_fn, &calls, NULL, &err);
    ck_assert_int_eq(lbfgs_func_evals(o), e0 + 1);
    lbfgs_free(o);
    // max_eval 5 stops a step after 5 evaluations (4 iterations). torch float32, two steps:
    // (−1.397861, 2.00676703) 5 4, (−1.40838158, 1.98181629) 10 8.
    c.max_eval = 5;
    o = lbfgs_create(2, &c, &err);
    x[0] = -1.5f;
    x[1] = 2.0f;
    lbfgs_step(o, x, rosen_fn, NULL, NULL, &err);
    ck_assert_int_eq(lbfgs_func_evals(o), 5);
    ck_assert_int_eq(lbfgs_iterations(o), 4);
    ck_assert_msg(fabs(x[0] + 1.397861) < 1e-5 && fabs(x[1] - 2.00676703) < 1e-5, "x = (%.9g, %.9g)", x[0], x[1]);
    lbfgs_step(o, x, rosen_fn, NULL, NULL, &err);
    ck_assert_int_eq(lbfgs_func_evals(o), 10);
    ck_assert_int_eq(lbfgs_iterations(o), 8);
    ck_assert_msg(fabs(x[0] + 1.40838158) < 1e-4 && fabs(x[1] - 1.98181629) < 1e-4, "x = (%.9g, %.9g)", x[0], x[1]);
    lbfgs_free(o);
    // Bad configurations are refused.
    c = lbfgs_defaults();
    c.history_size = 0;
    ck_assert_ptr_null(lbfgs_create(2, &c, &err));
    ck_assert_int_eq(err.code, FP_EPARAM);
}
END_TEST

// f = ½ Σ a_i x_i² in 50 dimensions, condition number 10: L-BFGS with unit steps converges.
static FpStatus quad_fn(void *ctx, const float *x, float *g, double *loss, FpError *err) {
    double l = 0;
    for (int i = 0; i < 50; i++) {
        double a = 1.0 + 9.0 * i / 49.0;
        l += 0.5 * a * x[i] * x[i];
        g[i] = (float)(a * x[i]);
    }
    *loss = l;
    return FP_OK;
}

START_TEST(lbfgs_quadratic_converges) {
    FpError err = {0};
    LbfgsConfig c = lbfgs_defaults();
    Lbfgs *o = lbfgs_create(50, &c, &err);
    float x[50];
    for (int i = 0; i < 50; i++)
        x[i] = (float)((i % 7) - 3);
    for (int s = 0; s < 5; s++)
        ck_assert_int_eq(lbfgs_step(o, x, quad_fn, NULL, NULL, &err), FP_OK);
    double m = 0;
    for (int i = 0; i < 50; i++)
        m = fmax(m, fabs(x[i]));
    ck_assert_msg(m < 1e-4, "max |x| = %g after 5 steps", m);
    lbfgs_free(o);
}
END_TEST

// -- iDLG's label rule --------------------------------------------------------------------------
START_TEST(idlg_rule_constructed) {
    // ∂L/∂W[c,j] = (p_c − 1[c=y]) h_j with h ≥ 0 (sigmoid outputs) and p a softmax.
    enum { K = 10, H = 37 };
    RngStream rs = rng_stream(5, RNG_TEST, 0, 0);
    float gw[K * H];
    for (int trial = 0; trial < 200; trial++) {
        int y = trial % K;
        double p[K], s = 0;
        for (int c = 0; c < K; c++)
            s += p[c] = exp(3 * rng_next_normal(&rs));
        float h[H];
        for (int j = 0; j < H; j++)
            h[j] = (float)rng_next_uniform(&rs);
        for (int c = 0; c < K; c++)
            for (int j = 0; j < H; j++)
                gw[c * H + j] = (float)((p[c] / s - (c == y)) * h[j]);
        int32_t lab;
        idlg_labels(gw, K, H, 1, &lab);
        ck_assert_int_eq(lab, y);
    }
    // A batch of 3 distinct labels: the mean of three such gradients, confident predictions.
    int ys[3] = {7, 2, 4};
    memset(gw, 0, sizeof gw);
    for (int b = 0; b < 3; b++)
        for (int c = 0; c < K; c++)
            for (int j = 0; j < H; j++)
                gw[c * H + j] += (float)(((c == (ys[b] + 1) % K ? 0.1 : 0.9 / (K - 1)) - (c == ys[b])) *
                                         (0.2 + 0.01 * j) / 3.0);
    int32_t labs[3];
    idlg_labels(gw, K, H, 3, labs);
    int found[K] = {0};
    for (int b = 0; b < 3; b++)
        found[labs[b]] = 1;
    ck_assert(found[7] && found[2] && found[4]);
}
END_TEST

START_TEST(idlg_rule_on_lenet_gradients) {
    Model *m = tiny_lenet(12, 12, 3);
    float *g = malloc(sizeof(float) * m->table.n_params), x[144];
    int last = model_last_weight_layer(m);
    const ParamLayer *l = &m->table.layers[last];
    for (int y = 0; y < 10; y++) {
        test_image(y, x, 12, 12);
        int32_t lab = y, got;
        true_gradient(m, x, &lab, 1, g);
        idlg_labels(g + l->offset, l->shape[0], l->shape[1], 1, &got);
        ck_assert_int_eq(got, y);
    }
    free(g);
    model_free(m);
}
END_TEST

// -- the objective ---------------------------------------------------------------------------------
// ∂D/∂z from the double-backward tape agrees with central differences of D (in double
// steps of float evaluations), for l2, cosine and the TV prior, DLG and iDLG.
START_TEST(objective_gradient_matches_finite_differences) {
    Model *m = tiny_lenet(12, 12, 4);
    float *g = malloc(sizeof(float) * m->table.n_params), x[144];
    test_image(1, x, 12, 12);
    int32_t y = 3;
    true_gradient(m, x, &y, 1, g);
    struct { InvDistance d; double tv; int idlg; } cases[] = {
        {INV_DISTANCE_L2, 0, 0}, {INV_DISTANCE_COSINE, 0, 0}, {INV_DISTANCE_L2, 0.5, 1}, {INV_DISTANCE_COSINE, 0.1, 1}};
    RngStream rs = rng_stream(9, RNG_TEST, 0, 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        InversionConfig cfg = {.steps = 1, .restarts = 1, .distance = cases[k].d, .tv = cases[k].tv,
                               .lbfgs = lbfgs_defaults()};
        InversionProblem p = {.model = m, .target = g, .batch = 1, .labels = cases[k].idlg ? &y : NULL, .seed = 1};
        FpError err = {0};
        InversionObjective *o = inversion_objective_create(&p, &cfg, &err);
        ck_assert_msg(o != NULL, "%s", err.msg);
        size_t n = inversion_objective_size(o);
        ck_assert_uint_eq(n, cases[k].idlg ? 144 : 154);
        float *z = malloc(sizeof(float) * n), *gz = malloc(sizeof(float) * n);
        for (size_t i = 0; i < n; i++) // near the truth, so D is small and smooth
            z[i] = i < 144 ? x[i] + 0.3f * (float)rng_next_normal(&rs) : (float)rng_next_normal(&rs);
        double d0;
        ck_assert_int_eq(inversion_objective_eval(o, z, gz, &d0, &err), FP_OK);
        ck_assert(isfinite(d0) && d0 > 0);
        // TV is |·|-based: its derivative jumps where two neighbouring pixels are equal, so
        // only pixels at least 2h away from every neighbour are checked there.
        const double hstep = 1e-2;
        int checked = 0;
        for (size_t i = 5; i < n && checked < 12; i += i < 144 ? 7 : 3) {
            if (cases[k].tv > 0 && i < 144) {
                int r0 = (int)i / 12, c0 = (int)i % 12, near = 0;
                int nb[4][2] = {{r0 - 1, c0}, {r0 + 1, c0}, {r0, c0 - 1}, {r0, c0 + 1}};
                for (int q = 0; q < 4; q++)
                    if (nb[q][0] >= 0 && nb[q][0] < 12 && nb[q][1] >= 0 && nb[q][1] < 12 &&
                        fabsf(z[i] - z[nb[q][0] * 12 + nb[q][1]]) < 2 * hstep)
                        near = 1;
                if (near)
                    continue;
            }
            float keep = z[i];
            double dp, dm;
            z[i] = keep + (float)hstep;
            inversion_objective_eval(o, z, NULL, &dp, &err);
            z[i] = keep - (float)hstep;
            inversion_objective_eval(o, z, NULL, &dm, &err);
            z[i] = keep;
            double fd = (dp - dm) / (2 * hstep), an = gz[i];
            double tol = 3e-2 * fmax(fabs(fd), fabs(an)) + 1e-4 * (1 + d0);
            ck_assert_msg(fabs(fd - an) <= tol, "case %zu coordinate %zu: analytic %.6g, finite differences %.6g", k,
                          i, an, fd);
            checked++;
        }
        ck_assert_int_ge(checked, 10);
        free(z);
        free(gz);
        inversion_objective_free(o);
    }
    free(g);
    model_free(m);
}
END_TEST

// -- tiny inversions that converge ---------------------------------------------------------------------
static void tiny_run(int idlg, double *ssim_out, int *label_ok) {
    Model *m = tiny_lenet(12, 12, 2);
    float *g = malloc(sizeof(float) * m->table.n_params), x[144], rec[144];
    test_image(2, x, 12, 12);
    int32_t y = 6;
    true_gradient(m, x, &y, 1, g);
    InversionConfig cfg = {.steps = 60, .restarts = 3, .snapshot_every = 20, .lbfgs = lbfgs_defaults()};
    InversionProblem p = {.model = m, .target = g, .batch = 1, .labels = idlg ? &y : NULL, .seed = 11};
    InversionResult r;
    FpError err = {0};
    ck_assert_msg(inversion_run(&p, &cfg, &r, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(r.n_curve, 61);
    ck_assert_int_eq(r.n_snapshots, 3);
    ck_assert_int_eq(r.snapshot_steps[2], 60);
    // The kept restart is the one with the lowest final loss, and its curve ends there.
    for (int k = 0; k < 3; k++)
        ck_assert(!(r.restart_losses[k] < r.loss));
    ck_assert_double_eq(r.loss_curve[60], r.loss);
    ck_assert_msg(r.loss < 1e-4 * r.loss_curve[0], "matching loss %g from %g", r.loss, r.loss_curve[0]);
    for (int i = 0; i < 144; i++)
        rec[i] = fminf(1.0f, fmaxf(0.0f, r.x[i]));
    ck_assert_int_eq(image_ssim(x, rec, 1, 12, 12, ssim_out, &err), FP_OK);
    // The last snapshot is the final point.
    ck_assert_int_eq(memcmp(r.snapshots + 2 * 144, r.x, sizeof(float) * 144), 0);
    *label_ok = 1;
    if (!idlg) {
        int best = 0;
        for (int c = 1; c < 10; c++)
            if (r.label_probs[c] > r.label_probs[best])
                best = c;
        *label_ok = best == y;
    } else
        ck_assert_ptr_null(r.label_probs);
    ck_assert(r.evaluations > 60);
    inversion_result_free(&r);
    free(g);
    model_free(m);
}

START_TEST(dlg_tiny_converges) {
    double ssim;
    int ok;
    tiny_run(0, &ssim, &ok);
    ck_assert_msg(ssim > 0.95, "DLG SSIM %g", ssim);
    ck_assert(ok);
}
END_TEST

START_TEST(idlg_tiny_converges) {
    double ssim;
    int ok;
    tiny_run(1, &ssim, &ok);
    ck_assert_msg(ssim > 0.95, "iDLG SSIM %g", ssim);
}
END_TEST

// -- the CLI ---------------------------------------------------------------------------------------------
START_TEST(cli_attack_end_to_end) {
    if (!bin()) {
        printf("SKIP: cli_attack_end_to_end (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-dlg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 6);
    char cfg[1200], text[4096], cmd[4096], err[4096];
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    // iDLG on a batch of two with distinct labels: both labels come from the rule, and the
    // reconstructions are matched to the originals.
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\", \"split\": \"test\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"}, \"defense\": {\"name\": \"none\"},"
             " \"federation\": {\"clients\": 3},"
             " \"attack\": {\"name\": \"idlg\", \"images\": [1, 4], \"batch_size\": 2, \"steps\": 40,"
             " \"restarts\": 2, \"snapshot_every\": 20, \"attacker\": \"single\"}}",
             dir);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s attack idlg --config %s --out %s/out --threads 1", bin(), cfg, dir);
    ck_assert_msg(run_cmd(cmd, err, sizeof err) == 0, "%s", err);
    char p[1500];
    snprintf(p, sizeof p, "%s/out/result.json", dir);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(p, &r, NULL), FP_OK);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "observer")->valuestring, "server");
    ck_assert_str_eq(cJSON_GetObjectItem(r, "status")->valuestring, "done");
    cJSON *ob = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "observations"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(ob, "upload_kind")->valuestring, "weights");
    ck_assert_int_eq(cJSON_GetObjectItem(ob, "round")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(ob, "local"), "steps")->valueint, 1);
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(r, "ssim_mean")));
    cJSON *images = cJSON_GetObjectItem(r, "images");
    ck_assert_int_eq(cJSON_GetArraySize(images), 2);
    const char *keys[] = {"index", "ssim", "psnr", "mse", "label_correct", "loss_curve", "original_png",
                          "reconstruction_png", "snapshots"};
    for (int i = 0; i < 2; i++) {
        cJSON *e = cJSON_GetArrayItem(images, i);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            ck_assert_msg(cJSON_GetObjectItem(e, keys[k]) != NULL, "images[%d].%s missing", i, keys[k]);
        ck_assert_int_eq(cJSON_GetObjectItem(e, "index")->valueint, i == 0 ? 1 : 4);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(e, "label_correct")));
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(e, "loss_curve")), 41);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(e, "snapshots")), 2);
        double ssim = cJSON_GetObjectItem(e, "ssim")->valuedouble;
        ck_assert_msg(ssim > 0.9, "image %d: SSIM %g", i, ssim);
        // The PNGs exist, hold 12×12 gray images, and `fedpriv ssim` of the pair agrees
        // with the result (both are computed from the clamped reconstruction; the PNG
        // rounds it to 8 bits).
        char a[1600], b[1600];
        snprintf(a, sizeof a, "%s/out/%s", dir, cJSON_GetObjectItem(e, "original_png")->valuestring);
        snprintf(b, sizeof b, "%s/out/%s", dir, cJSON_GetObjectItem(e, "reconstruction_png")->valuestring);
        float *img = NULL;
        int c, h, w;
        ck_assert_int_eq(png_read(b, &img, &c, &h, &w, NULL), FP_OK);
        ck_assert(c == 1 && h == 12 && w == 12);
        free(img);
        snprintf(cmd, sizeof cmd, "%s ssim %s %s --json > %s/ssim.json", bin(), a, b, dir);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(p, sizeof p, "%s/ssim.json", dir);
        cJSON *s = NULL;
        ck_assert_int_eq(jv_load_file(p, &s, NULL), FP_OK);
        ck_assert_double_eq_tol(cJSON_GetObjectItem(s, "ssim")->valuedouble, ssim, 2e-2);
        cJSON_Delete(s);
    }
    snprintf(p, sizeof p, "%s/out/grid.png", dir);
    ck_assert_int_eq(access(p, R_OK), 0);
    cJSON_Delete(r);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// --threads N runs batches in parallel and gives the same result as one thread. The
// victims are clients 1, 2, 3 of a federation of 4 with half of them sampled per round:
// each is observed at its first participation, with the round's global weights.
START_TEST(cli_attack_threads_and_observation) {
    if (!bin()) {
        printf("SKIP: cli_attack_threads_and_observation (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-dlgthr-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 8);
    char cfg[1200], text[4096], cmd[4096], err[4096], p[1500];
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(text, sizeof text,
             "{\"seed\": 5, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"},"
             " \"federation\": {\"clients\": 4, \"sample_rate\": 0.5, \"rounds\": 6, \"lr\": 0.01},"
             " \"attack\": {\"images\": [0, 1, 2], \"steps\": 40, \"restarts\": 2, \"attacker\": \"single\", \"observe\": {\"client\": 1}}}",
             dir);
    write_text(cfg, text);
    cJSON *r[2];
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s attack dlg --config %s --out %s/out%d --threads %d", bin(), cfg, dir, k, k + 1);
        ck_assert_msg(run_cmd(cmd, err, sizeof err) == 0, "%s", err);
        snprintf(p, sizeof p, "%s/out%d/result.json", dir, k);
        ck_assert_int_eq(jv_load_file(p, &r[k], NULL), FP_OK);
    }
    cJSON *obs = cJSON_GetObjectItem(r[0], "observations");
    ck_assert_int_eq(cJSON_GetArraySize(obs), 3);
    int later = 0;
    for (int i = 0; i < 3; i++) {
        cJSON *o = cJSON_GetArrayItem(obs, i);
        ck_assert_int_eq(cJSON_GetObjectItem(o, "client")->valueint, 1 + i);
        ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "federation"), "participants")->valueint, 2);
        ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "federation"), "clients")->valueint, 4);
        later += cJSON_GetObjectItem(o, "round")->valueint > 1;
    }
    ck_assert_msg(later > 0, "with 2 of 4 clients per round some victim starts later"); // seed 5: fixed
    cJSON *a = cJSON_GetObjectItem(r[0], "images"), *b = cJSON_GetObjectItem(r[1], "images");
    ck_assert_int_eq(cJSON_GetArraySize(a), 3);
    int recovered = 0;
    for (int i = 0; i < 3; i++) {
        cJSON *ea = cJSON_GetArrayItem(a, i), *eb = cJSON_GetArrayItem(b, i);
        char *ca = cJSON_PrintUnformatted(cJSON_GetObjectItem(ea, "loss_curve"));
        char *cb = cJSON_PrintUnformatted(cJSON_GetObjectItem(eb, "loss_curve"));
        ck_assert_str_eq(ca, cb);
        free(ca);
        free(cb);
        ck_assert(cJSON_GetObjectItem(ea, "ssim")->valuedouble == cJSON_GetObjectItem(eb, "ssim")->valuedouble);
        recovered += cJSON_GetObjectItem(ea, "ssim")->valuedouble > 0.9;
    }
    ck_assert_int_eq(cJSON_GetObjectItem(r[0], "images_recovered")->valueint,
                     cJSON_GetObjectItem(r[1], "images_recovered")->valueint);
    ck_assert_msg(recovered >= 2, "%d of 3 recovered", recovered);
    cJSON_Delete(r[0]);
    cJSON_Delete(r[1]);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// -- observers and the adaptive attacker (reduced from docs/attacks-dlg.md's figures) ------------
// The setting on 12×12 images: 100 clients, all in round 1, gaussian-dpfedavg with
// server-side noise at ε = 8. The clip (0.01) shrinks every upload by a large factor.
static cJSON *observer_run(const char *dir, const char *name, const char *federation, const char *defense,
                           const char *attack) {
    char cfg[1200], text[4096], cmd[4096], err[4096], p[1500];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, name);
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\", \"split\": \"test\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"}, \"federation\": %s, \"defense\": %s,"
             " \"attack\": {\"name\": \"dlg\", \"steps\": 60, %s}}",
             dir, federation, defense, attack);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s attack dlg --config %s --out %s/%s --threads 1", bin(), cfg, dir, name);
    ck_assert_msg(run_cmd(cmd, err, sizeof err) == 0, "%s: %s", name, err);
    snprintf(p, sizeof p, "%s/%s/result.json", dir, name);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(p, &r, NULL), FP_OK);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "status")->valuestring, "done");
    return r;
}

static double rnum(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", key);
    return v->valuedouble;
}

#define OBS_FEDERATION                                                                                                 \
    "{\"clients\": 100, \"sample_rate\": 1, \"rounds\": 1, \"local_steps\": 1, \"batch_size\": 2, \"lr\": 0.1}"
#define OBS_SERVER_NOISE "{\"name\": \"gaussian-dpfedavg\", \"epsilon\": 8, \"clip\": 0.01, \"noise\": \"server\"}"

// The server observer sees the clipped upload without the server's noise: the adaptive
// attacker recovers both images (its cosine variant ignores the clip's scale), the attack
// applies (without a defense it recovers both too). Control: the single L2 attacker on the
// same uploads recovers nothing, so a cell that counted only it would report protection.
START_TEST(cli_server_observer_adaptive_attacker) {
    if (!bin()) {
        printf("SKIP: cli_server_observer_adaptive_attacker (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-dlgobs-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 200);
    cJSON *r = observer_run(dir, "adaptive", OBS_FEDERATION, OBS_SERVER_NOISE,
                            "\"images\": [0, 1], \"attacker\": \"adaptive\", \"observer\": \"server\"");
    ck_assert_str_eq(cJSON_GetObjectItem(r, "observer")->valuestring, "server");
    ck_assert_str_eq(cJSON_GetObjectItem(r, "attacker")->valuestring, "adaptive");
    cJSON *ob = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "observations"), 0);
    cJSON *od = cJSON_GetObjectItem(ob, "defense");
    ck_assert_double_eq(rnum(od, "clip"), 0.01);
    ck_assert_msg(rnum(od, "server_noise_scale") > 0, "no server noise recorded");
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(ob, "federation"), "participants")->valueint, 100);
    ck_assert_double_eq(rnum(r, "recovered_ssim"), 0.9);
    ck_assert_int_eq((int)rnum(r, "images_recovered"), 2);
    ck_assert_double_eq(rnum(r, "recovered_fraction"), 1.0);
    ck_assert(rnum(r, "ssim_max") >= rnum(r, "ssim_mean"));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "variants")), 3);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "applicable")));
    cJSON *ap = cJSON_GetObjectItem(r, "applicability");
    ck_assert_int_eq((int)rnum(ap, "reference_images_recovered"), 2); // no defense: 2 of 2
    // Per image the kept variant is the one with the highest SSIM.
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(r, "images")) {
        double best = -INFINITY;
        cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(e, "variant_ssim")) if (cJSON_IsNumber(v) && v->valuedouble > best)
            best = v->valuedouble;
        ck_assert_double_eq(rnum(e, "ssim"), best);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(e, "recovered")));
    }
    cJSON_Delete(r);
    r = observer_run(dir, "single", OBS_FEDERATION, OBS_SERVER_NOISE,
                     "\"images\": [0, 1], \"attacker\": \"single\", \"reference\": false");
    ck_assert_int_eq((int)rnum(r, "images_recovered"), 0);
    ck_assert_msg(rnum(r, "ssim_max") < 0.5, "single L2 SSIM max %g", rnum(r, "ssim_max"));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(r, "applicable"))); // no reference: undecided
    cJSON_Delete(r);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// The public observer sees the released model: the victim's clipped upload averaged with
// 99 others and the server's noise. It recovers nothing, and without a defense it recovers
// nothing either, so the attack is flagged not applicable there. (On these smooth 12×12
// images a reconstruction unrelated to the original still scores SSIM 0.1 to 0.25, so the
// bound here is on the best image, 0.5; the mean SSIM <= 0.2 of the issue is measured on
// Fashion-MNIST, docs/attacks-dlg.md.)
// Control: alone in its federation without a defense, the victim's image is recovered
// from the release, so the public observer's view does hold the victim's update.
START_TEST(cli_public_observer) {
    if (!bin()) {
        printf("SKIP: cli_public_observer (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-dlgpub-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 200);
    cJSON *r = observer_run(dir, "public", OBS_FEDERATION, OBS_SERVER_NOISE,
                            "\"images\": [0, 1], \"attacker\": \"adaptive\", \"observer\": \"public\"");
    ck_assert_str_eq(cJSON_GetObjectItem(r, "observer")->valuestring, "public");
    cJSON *ob = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "observations"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(ob, "observer")->valuestring, "public");
    ck_assert_int_eq((int)rnum(r, "images_recovered"), 0);
    ck_assert_msg(rnum(r, "ssim_max") < 0.5, "public SSIM max %g", rnum(r, "ssim_max"));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(r, "applicable")));
    ck_assert_int_eq((int)rnum(cJSON_GetObjectItem(r, "applicability"), "reference_images_recovered"), 0);
    cJSON_Delete(r);
    r = observer_run(dir, "alone", "{\"clients\": 1, \"rounds\": 1, \"local_steps\": 1, \"lr\": 0.1}",
                     "{\"name\": \"none\"}", "\"images\": [0], \"attacker\": \"adaptive\", \"observer\": \"public\"");
    ck_assert_int_eq((int)rnum(r, "images_recovered"), 1);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "applicable")));
    cJSON_Delete(r);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(cli_attack_bad_configs) {
    if (!bin()) {
        printf("SKIP: cli_attack_bad_configs (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-dlgbad-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 4);
    struct { const char *attack, *dataset_extra, *needle; } cases[] = {
        {"\"images\": [0], \"bogus\": 1", "", "attack.bogus"},
        {"\"images\": [0], \"batch_size\": 9", "", "attack.batch_size"},
        {"\"images\": [0, 1, 2], \"batch_size\": 2", "", "attack.images"},
        {"\"images\": [4]", "", "attack.images[0]"},
        {"\"images\": [1, 1]", "", "attack.images[1]"},
        {"\"images\": [0.5]", "", "attack.images[0]"},
        {"\"images\": \"all\"", "", "attack.images"},
        {"\"steps\": 0", "", "attack.steps"},
        {"\"restarts\": -1", "", "attack.restarts"},
        {"\"distance\": \"l1\"", "", "attack.distance"},
        {"\"tv\": -1", "", "attack.tv"},
        {"\"threat_model\": \"gradient\"", "", "attack.threat_model"},
        {"\"local\": \"sgd\"", "", "attack.local"},
        {"\"observe\": {\"round\": 6}", "", "attack.observe.round"},
        {"\"observe\": {\"client\": 3}", "", "attack.observe.client"},
        {"\"observe\": {\"when\": 1}", "", "attack.observe.when"},
        {"\"images\": [0, 1, 2]", "", "federation.clients is 2"},
        {"\"observe\": {\"round\": 2, \"client\": 1}", "", "attack.observe: client 1 does not take part in round 2"},
        {"\"lbfgs\": {\"lr\": 0}", "", "attack.lbfgs.lr"},
        {"\"lbfgs\": {\"line_search\": \"strong_wolfe\"}", "", "attack.lbfgs.line_search"},
        {"\"images\": [0]", ", \"split\": \"validation\"", "dataset.split"},
        {"\"name\": \"idlg\"", "", "attack.name"},
    };
    char cfg[1200], text[4096], cmd[4096], err[4096];
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(text, sizeof text,
                 "{\"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\"%s}, \"model\": {\"name\": \"lenet\"},"
                 " \"federation\": {\"clients\": 2, \"sample_rate\": 0.5, \"rounds\": 5}, \"attack\": {%s}}",
                 dir, cases[k].dataset_extra, cases[k].attack);
        write_text(cfg, text);
        snprintf(cmd, sizeof cmd, "%s attack dlg --config %s --out %s/out%zu", bin(), cfg, dir, k);
        int rc = run_cmd(cmd, err, sizeof err);
        ck_assert_msg(rc == 2, "case %zu (%s): exit %d, stderr: %s", k, cases[k].attack, rc, err);
        ck_assert_msg(count_lines(err) == 1, "case %zu: %d lines: %s", k, count_lines(err), err);
        ck_assert_msg(strstr(err, cases[k].needle) != NULL, "case %zu: \"%s\" not in: %s", k, cases[k].needle, err);
        char p[1500];
        snprintf(p, sizeof p, "%s/out%zu/result.json", dir, k);
        ck_assert_msg(access(p, F_OK) != 0, "case %zu left a result", k);
    }
    // iDLG needs a last linear layer of classes × hidden: fine for lenet; a bad model name is
    // the experiment's error, still one line and exit 2.
    snprintf(text, sizeof text,
             "{\"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\"}, \"model\": {\"name\": \"lenet5\"},"
             " \"attack\": {\"images\": [0]}}", dir);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s attack idlg --config %s --out %s/outm", bin(), cfg, dir);
    ck_assert_int_eq(run_cmd(cmd, err, sizeof err), 2);
    ck_assert_int_eq(count_lines(err), 1);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// `fedpriv ssim` (the same metric code) on bad images: not a PNG, sizes that differ.
START_TEST(cli_ssim_bad_images) {
    if (!bin()) {
        printf("SKIP: cli_ssim_bad_images (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-dlgssim-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char a[1100], b[1100], c[1100], cmd[4096], err[4096];
    snprintf(a, sizeof a, "%s/a.png", dir);
    snprintf(b, sizeof b, "%s/b.png", dir);
    snprintf(c, sizeof c, "%s/c.png", dir);
    float img[16 * 20];
    for (int i = 0; i < 16 * 20; i++)
        img[i] = (float)(i % 17) / 16.0f;
    ck_assert_int_eq(png_write_gray(a, img, 16, 16, NULL), FP_OK);
    ck_assert_int_eq(png_write_gray(b, img, 16, 20, NULL), FP_OK);
    write_text(c, "this is not a PNG file\n");
    snprintf(cmd, sizeof cmd, "%s ssim %s %s", bin(), a, a);
    ck_assert_int_eq(run_cmd(cmd, err, sizeof err), 0);
    const char *pairs[2][2] = {{a, c}, {a, b}};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s ssim %s %s", bin(), pairs[k][0], pairs[k][1]);
        int rc = run_cmd(cmd, err, sizeof err);
        ck_assert_msg(rc == 2, "pair %d: exit %d: %s", k, rc, err);
        ck_assert_msg(count_lines(err) == 1, "pair %d: %s", k, err);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *suite_dlg(void) {
    Suite *s = suite_create("dlg");
    TCase *tc = tcase_create("lbfgs");
    tcase_add_test(tc, lbfgs_matches_torch_smooth);
    tcase_add_test(tc, lbfgs_rosenbrock_rules);
    tcase_add_test(tc, lbfgs_quadratic_converges);
    suite_add_tcase(s, tc);
    tc = tcase_create("inversion");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, idlg_rule_constructed);
    tcase_add_test(tc, idlg_rule_on_lenet_gradients);
    tcase_add_test(tc, objective_gradient_matches_finite_differences);
    tcase_add_test(tc, dlg_tiny_converges);
    tcase_add_test(tc, idlg_tiny_converges);
    suite_add_tcase(s, tc);
    tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cli_attack_end_to_end);
    tcase_add_test(tc, cli_attack_threads_and_observation);
    tcase_add_test(tc, cli_attack_bad_configs);
    tcase_add_test(tc, cli_ssim_bad_images);
    suite_add_tcase(s, tc);
    tc = tcase_create("observers");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cli_server_observer_adaptive_attacker);
    tcase_add_test(tc, cli_public_observer);
    suite_add_tcase(s, tc);
    return s;
}
