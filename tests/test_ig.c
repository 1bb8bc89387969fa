// Inverting Gradients (attacks/inverting_gradients.c): the Hungarian assignment against
// brute force, LLG's batch label rule, the simulated local steps against plain host SGD,
// their exact second-order gradient, signed Adam recovering an image, and
// `fedpriv attack inverting-gradients` end to end (batch 1 without defense against a
// control under huge client noise, a batch of 4 after 5 local steps, bad configs).
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attacks/inversion.h"
#include "core/jsonv.h"
#include "core/rng.h"
#include "eval/assignment.h"
#include "eval/image_metrics.h"
#include "inversion_fixture.h"

// Thresholds below measured fixed-seed runs (printed by each test): LLG 1.000 at B = 4
// (iDLG's distinct rule 0.829), SSIM 0.9998 (Adam, tiny), 0.9998 (CLI, batch 1), 0.9999
// (CLI, 5 local steps); the noise controls measured SSIM -0.0001 and -0.06.
#define LLG_B4_MIN 0.95
#define ADAM_TINY_MIN_SSIM 0.99
#define CLI_B1_MIN_SSIM 0.99
#define CLI_E5_MIN_SSIM 0.99

// -- the assignment ------------------------------------------------------------------------
static void brute_best(const double *s, int n, int k, int *used, double sum, double *best) {
    if (k == n) {
        *best = sum > *best ? sum : *best;
        return;
    }
    for (int j = 0; j < n; j++)
        if (!used[j]) {
            used[j] = 1;
            brute_best(s, n, k + 1, used, sum + s[k * n + j], best);
            used[j] = 0;
        }
}

START_TEST(hungarian_matches_brute_force) {
    RngStream rs = rng_stream(17, RNG_TEST, 0, 0);
    int greedy_short = 0;
    for (int n = 1; n <= 7; n++)
        for (int trial = 0; trial < 200; trial++) {
            double s[49];
            for (int k = 0; k < n * n; k++) // half the trials on a few integer levels: many ties
                s[k] = trial % 2 ? rng_next_normal(&rs) : (double)(int)(4 * rng_next_uniform(&rs));
            int col[7], used[7] = {0}, seen[7] = {0};
            FpError err = {0};
            ck_assert_int_eq(assignment_max(s, n, col, &err), FP_OK);
            double got = 0, best = -INFINITY;
            for (int i = 0; i < n; i++) {
                ck_assert(col[i] >= 0 && col[i] < n && !seen[col[i]]);
                seen[col[i]] = 1;
                got += s[i * n + col[i]];
            }
            brute_best(s, n, 0, used, 0.0, &best);
            ck_assert_msg(fabs(got - best) <= 1e-9 * (1 + fabs(best)), "n %d trial %d: %.17g, optimum %.17g", n,
                          trial, got, best);
            // Control: row-by-row greedy choice, which the comparison must tell apart.
            double greedy = 0;
            int taken[7] = {0};
            for (int i = 0; i < n; i++) {
                int b = -1;
                for (int j = 0; j < n; j++)
                    if (!taken[j] && (b < 0 || s[i * n + j] > s[i * n + b]))
                        b = j;
                taken[b] = 1;
                greedy += s[i * n + b];
            }
            greedy_short += greedy < best - 1e-9 * (1 + fabs(best));
        }
    ck_assert_int_gt(greedy_short, 100);
    double bad[4] = {1, NAN, 0, 2};
    int col[2];
    ck_assert_int_eq(assignment_max(bad, 2, col, NULL), FP_EPARAM);
    ck_assert_int_eq(assignment_max(bad, 0, col, NULL), FP_EPARAM);
}
END_TEST

// -- LLG -----------------------------------------------------------------------------------
// How many of the B true labels the multiset `got` names.
static int multiset_hits(const int32_t *truth, const int32_t *got, int B) {
    int used[64] = {0}, hits = 0;
    for (int i = 0; i < B; i++)
        for (int k = 0; k < B; k++)
            if (!used[k] && got[k] == truth[i]) {
                used[k] = 1;
                hits++;
                break;
            }
    return hits;
}

START_TEST(llg_constructed) {
    // Confident predictions (p of the true class 0.9) and equal hidden sums: every true
    // occurrence contributes −0.9·S/B to its row, each other row +0.1·S/(9B): repeated
    // labels are recovered with their counts.
    enum { K = 10, H = 20, B = 5 };
    int32_t truth[B] = {3, 3, 3, 7, 1}, got[B];
    float gw[K * H] = {0};
    for (int b = 0; b < B; b++)
        for (int c = 0; c < K; c++)
            for (int j = 0; j < H; j++)
                gw[c * H + j] += (float)(((c == truth[b] ? 0.9 : 0.1 / 9) - (c == truth[b])) * 0.5 / B);
    llg_labels(gw, K, H, B, got);
    ck_assert_int_eq(multiset_hits(truth, got, B), B);
    for (int b = 1; b < B; b++)
        ck_assert_int_le(got[b - 1], got[b]);
    // Control: iDLG's rule names each class once and misses the repeats.
    idlg_labels(gw, K, H, B, got);
    ck_assert_int_eq(multiset_hits(truth, got, B), 3);
}
END_TEST

// Label recovery at B = 4 on the fixture: 12×12 synthetic images with random labels
// (repeats allowed), a LeNet at PyTorch's default initialisation, the true batch gradient.
START_TEST(llg_batch_of_four_on_fixture) {
    enum { B = 4, BATCHES = 60 };
    Model *m = tiny_lenet_init(12, 12, 5, "default");
    const ParamLayer *l = &m->table.layers[model_last_weight_layer(m)];
    float *g = malloc(sizeof(float) * m->table.n_params), x[B * 144];
    RngStream rs = rng_stream(23, RNG_TEST, 0, 0);
    int llg = 0, idlg = 0, batches_with_repeat = 0;
    for (int t = 0; t < BATCHES; t++) {
        int32_t y[B], got[B];
        int repeat = 0;
        for (int b = 0; b < B; b++) {
            y[b] = (int32_t)(rng_next_uniform(&rs) * 10);
            test_image((int)(rng_next_uniform(&rs) * 40), x + b * 144, 12, 12);
            for (int k = 0; k < b; k++)
                repeat |= y[k] == y[b];
        }
        batches_with_repeat += repeat;
        true_gradient(m, x, y, B, g);
        llg_labels(g + l->offset, l->shape[0], l->shape[1], B, got);
        llg += multiset_hits(y, got, B);
        idlg_labels(g + l->offset, l->shape[0], l->shape[1], B, got);
        idlg += multiset_hits(y, got, B);
    }
    double acc = (double)llg / (B * BATCHES), acc_idlg = (double)idlg / (B * BATCHES);
    printf("llg_batch_of_four_on_fixture: LLG %.4f, iDLG's distinct rule %.4f (%d of %d batches repeat a label)\n",
           acc, acc_idlg, batches_with_repeat, BATCHES);
    ck_assert_msg(acc >= LLG_B4_MIN, "LLG accuracy %g", acc);
    ck_assert_msg(acc > acc_idlg, "LLG %g, iDLG's rule %g", acc, acc_idlg);
    free(g);
    model_free(m);
}
END_TEST

// -- simulated local steps -------------------------------------------------------------------
// The server's estimate after E SGD steps with momentum and weight decay on (x, y),
// computed on the host with fl/local.c's update rule (cpu_sgd_step): the target.
static void host_local_estimate(Model *m, const float *x, const int32_t *y, int B, const InvLocalSteps *ls,
                                float *est) {
    size_t n = m->table.n_params;
    float *theta0 = malloc(sizeof(float) * n), *v = calloc(n, sizeof(float)), *g = malloc(sizeof(float) * n);
    memcpy(theta0, m->params, sizeof(float) * n);
    for (int k = 0; k < ls->steps; k++) {
        true_gradient(m, x, y, B, g);
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + (float)ls->weight_decay * m->params[i];
            v[i] = (float)ls->momentum * v[i] + d;
            m->params[i] -= (float)ls->lr * v[i];
        }
    }
    for (size_t i = 0; i < n; i++)
        est[i] = (float)((theta0[i] - (double)m->params[i]) / (ls->lr * ls->steps) - ls->weight_decay * theta0[i]);
    memcpy(m->params, theta0, sizeof(float) * n); // the model is left at θ_0
    free(theta0);
    free(v);
    free(g);
}

static double objective_at(Model *m, const float *target, const int32_t *y, int B, InvLocalSteps ls,
                           InvDistance dist, const float *z) {
    InversionConfig cfg = {.steps = 1, .restarts = 1, .distance = dist, .lbfgs = lbfgs_defaults()};
    InversionProblem p = {.model = m, .target = target, .batch = B, .labels = y, .seed = 1, .local = ls};
    FpError err = {0};
    InversionObjective *o = inversion_objective_create(&p, &cfg, &err);
    ck_assert_msg(o != NULL, "%s", err.msg);
    double d;
    ck_assert_msg(inversion_objective_eval(o, z, NULL, &d, &err) == FP_OK, "%s", err.msg);
    inversion_objective_free(o);
    return d;
}

START_TEST(local_steps_match_host_sgd) {
    enum { B = 2 };
    Model *m = tiny_lenet_init(12, 12, 6, "default");
    size_t n = m->table.n_params;
    float *est = malloc(sizeof(float) * n), x[B * 144];
    int32_t y[B] = {3, 5};
    test_image(0, x, 12, 12);
    test_image(3, x + 144, 12, 12);
    InvLocalSteps ls = {.steps = 5, .lr = 0.5, .momentum = 0.9, .weight_decay = 1e-3};
    host_local_estimate(m, x, y, B, &ls, est);
    double norm2 = 0;
    for (size_t i = 0; i < n; i++)
        norm2 += (double)est[i] * est[i];
    // At the true images, the simulated estimate is the host's up to float rounding ...
    double sim = objective_at(m, est, y, B, ls, INV_DISTANCE_L2, x) / norm2;
    // ... while the one-gradient objective (DLG's assumption) is not (the control).
    InvLocalSteps one = {0};
    double plain = objective_at(m, est, y, B, one, INV_DISTANCE_L2, x) / norm2;
    printf("local_steps_match_host_sgd: relative squared distance %.3g simulated, %.3g one gradient\n", sim, plain);
    ck_assert_msg(sim < 1e-9, "simulated: %g", sim);
    ck_assert_msg(plain > 1e-3, "one gradient: %g", plain);
    free(est);
    model_free(m);
}
END_TEST

// ∂D/∂x′ through 3 simulated steps (cosine + TV) against central differences.
START_TEST(local_steps_gradient_matches_finite_differences) {
    Model *m = tiny_lenet_init(12, 12, 7, "default");
    size_t np = m->table.n_params;
    float *est = malloc(sizeof(float) * np), x[144], z[144], gz[144];
    int32_t y = 4;
    test_image(2, x, 12, 12);
    InvLocalSteps ls = {.steps = 3, .lr = 0.5, .momentum = 0.5, .weight_decay = 1e-2};
    host_local_estimate(m, x, &y, 1, &ls, est);
    InversionConfig cfg = {.steps = 1, .restarts = 1, .distance = INV_DISTANCE_COSINE, .tv = 0.05,
                           .lbfgs = lbfgs_defaults()};
    InversionProblem p = {.model = m, .target = est, .batch = 1, .labels = &y, .seed = 1, .local = ls};
    FpError err = {0};
    InversionObjective *o = inversion_objective_create(&p, &cfg, &err);
    ck_assert_msg(o != NULL, "%s", err.msg);
    RngStream rs = rng_stream(29, RNG_TEST, 0, 0);
    for (int i = 0; i < 144; i++)
        z[i] = x[i] + 0.3f * (float)rng_next_normal(&rs);
    double d0;
    ck_assert_int_eq(inversion_objective_eval(o, z, gz, &d0, &err), FP_OK);
    const double h = 1e-2;
    int checked = 0;
    for (int i = 3; i < 144 && checked < 12; i += 11) {
        int r0 = i / 12, c0 = i % 12, near = 0; // TV's kinks: skip pixels close to a neighbour
        int nb[4][2] = {{r0 - 1, c0}, {r0 + 1, c0}, {r0, c0 - 1}, {r0, c0 + 1}};
        for (int q = 0; q < 4; q++)
            if (nb[q][0] >= 0 && nb[q][0] < 12 && nb[q][1] >= 0 && nb[q][1] < 12 &&
                fabsf(z[i] - z[nb[q][0] * 12 + nb[q][1]]) < 2 * h)
                near = 1;
        if (near)
            continue;
        float keep = z[i];
        double dp, dm;
        z[i] = keep + (float)h;
        inversion_objective_eval(o, z, NULL, &dp, &err);
        z[i] = keep - (float)h;
        inversion_objective_eval(o, z, NULL, &dm, &err);
        z[i] = keep;
        double fd = (dp - dm) / (2 * h), an = gz[i];
        ck_assert_msg(fabs(fd - an) <= 3e-2 * fmax(fabs(fd), fabs(an)) + 1e-4 * (1 + d0),
                      "coordinate %d: analytic %.6g, finite differences %.6g", i, an, fd);
        checked++;
    }
    ck_assert_int_ge(checked, 8);
    inversion_objective_free(o);
    free(est);
    model_free(m);
}
END_TEST

// Signed Adam recovers one image from its gradient; the same run against a target
// drowned in noise (σ = 10‖g‖/√n per coordinate) does not (the control).
static double adam_run_ssim(double noise) {
    Model *m = tiny_lenet(12, 12, 2);
    size_t np = m->table.n_params;
    float *g = malloc(sizeof(float) * np), x[144], rec[144];
    test_image(2, x, 12, 12);
    int32_t y = 6;
    true_gradient(m, x, &y, 1, g);
    double norm = 0;
    for (size_t i = 0; i < np; i++)
        norm += (double)g[i] * g[i];
    RngStream rs = rng_stream(31, RNG_TEST, 0, 0);
    for (size_t i = 0; noise > 0 && i < np; i++)
        g[i] += (float)(noise * sqrt(norm / np) * rng_next_normal(&rs));
    InversionConfig cfg = {.steps = 300, .restarts = 2, .distance = INV_DISTANCE_COSINE, .tv = 1e-4,
                           .optimizer = INV_OPTIMIZER_ADAM_SIGNED, .adam = {.lr = 0.1, .step_decay = 1, .boxed = 1}};
    InversionProblem p = {.model = m, .target = g, .batch = 1, .labels = &y, .seed = 11};
    InversionResult r;
    FpError err = {0};
    ck_assert_msg(inversion_run(&p, &cfg, &r, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(r.evaluations, 2 * 301);
    for (int k = 0; k < 2; k++)
        ck_assert(!(r.restart_losses[k] < r.loss));
    for (int i = 0; i < 144; i++) {
        ck_assert(r.x[i] >= 0.0f && r.x[i] <= 1.0f); // boxed
        rec[i] = r.x[i];
    }
    double ssim;
    ck_assert_int_eq(image_ssim(x, rec, 1, 12, 12, &ssim, &err), FP_OK);
    inversion_result_free(&r);
    free(g);
    model_free(m);
    return ssim;
}

START_TEST(adam_signed_recovers_tiny) {
    double clean = adam_run_ssim(0), noisy = adam_run_ssim(10);
    printf("adam_signed_recovers_tiny: SSIM %.4f clean, %.4f under noise\n", clean, noisy);
    ck_assert_msg(clean >= ADAM_TINY_MIN_SSIM, "clean SSIM %g", clean);
    ck_assert_msg(noisy < 0.5, "noisy SSIM %g", noisy);
}
END_TEST

// -- the CLI -------------------------------------------------------------------------------
static cJSON *run_ig(const char *dir, const char *name, const char *model_init, const char *federation,
                     const char *defense, const char *attack_extra, char *err, size_t errn, int *rc) {
    char cfg[1200], text[4096], cmd[4096], p[1500];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, name);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\", \"split\": \"test\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"%s\"}, \"defense\": %s, \"federation\": %s,"
             " \"attack\": {\"name\": \"inverting-gradients\"%s%s}}",
             dir, model_init, defense, federation,
             // These tests are of the paper's configuration (signed Adam on cosine + TV): the
             // single attacker, unless a test names one (the adaptive set: test_ig_labels.c).
             strstr(attack_extra, "\"attacker\"") ? "" : ", \"attacker\": \"single\"", attack_extra);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s attack inverting-gradients --config %s --out %s/%s --threads 1", bin(), cfg, dir,
             name);
    *rc = run_cmd(cmd, err, errn);
    snprintf(p, sizeof p, "%s/%s/result.json", dir, name);
    cJSON *r = NULL;
    return *rc == 0 && jv_load_file(p, &r, NULL) == FP_OK ? r : NULL;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    ck_assert_msg(cJSON_IsNumber(v), "%s missing", k);
    return v->valuedouble;
}

// Batch 1 without defense recovers both images; the same attack against client-side
// Gaussian noise of 100× the clip does not.
START_TEST(cli_batch1_recovers_and_noise_control) {
    if (!bin()) {
        printf("SKIP: cli_batch1_recovers_and_noise_control (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-ig-XXXXXX", err[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 6);
    const char *attack = ", \"images\": [1, 4], \"steps\": 300, \"restarts\": 1";
    int rc;
    cJSON *r = run_ig(dir, "clean", "uniform", "{\"clients\": 3}", "{\"name\": \"none\"}", attack, err, sizeof err,
                      &rc);
    ck_assert_msg(r != NULL, "exit %d: %s", rc, err);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "status")->valuestring, "done");
    cJSON *cfg = cJSON_GetObjectItem(r, "attack_config");
    ck_assert_str_eq(cJSON_GetObjectItem(cfg, "optimizer")->valuestring, "adam on signed gradients");
    ck_assert_str_eq(cJSON_GetObjectItem(cfg, "distance")->valuestring, "cosine");
    ck_assert_double_eq(num(r, "recovered_ssim"), 0.9);
    double clean = num(r, "ssim_mean");
    printf("cli_batch1_recovers_and_noise_control: SSIM %.4f, PSNR %.2f, recovered %.2f\n", clean, num(r, "psnr_mean"),
           num(r, "recovered_fraction"));
    ck_assert_msg(clean >= CLI_B1_MIN_SSIM, "SSIM %g", clean);
    ck_assert_double_eq(num(r, "recovered_fraction"), 1.0);
    ck_assert_double_eq(num(r, "label_accuracy"), 1.0);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "observer")->valuestring, "server");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "applicable"))); // decided by this run (no defense)
    cJSON_Delete(r);
    r = run_ig(dir, "noisy", "uniform", "{\"clients\": 3}",
               "{\"name\": \"gaussian-dpfedavg\", \"noise_multiplier\": 100, \"clip\": 1, \"noise\": \"client\"}",
               attack, err, sizeof err, &rc);
    ck_assert_msg(r != NULL, "exit %d: %s", rc, err);
    double noisy = num(r, "ssim_mean");
    printf("cli_batch1_recovers_and_noise_control: under noise SSIM %.4f\n", noisy);
    ck_assert_msg(noisy < 0.5, "SSIM %g under noise", noisy);
    ck_assert_double_eq(num(r, "recovered_fraction"), 0.0);
    // Nothing recovered under the defense, and the attack applies: its reference run
    // against the federation without the defense recovers.
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "applicable")));
    ck_assert_int_eq(num(cJSON_GetObjectItem(r, "applicability"), "reference_images_recovered"), 2);
    cJSON_Delete(r);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// Two images after 5 local steps with momentum (the victim's upload through fl's upload
// path), inverted by simulating them; a batch of 4 with a repeated label (LLG).
START_TEST(cli_local_steps_and_batch4) {
    if (!bin()) {
        printf("SKIP: cli_local_steps_and_batch4 (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-ig4-XXXXXX", err[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 14);
    int rc;
    const char *fed = "{\"clients\": 3, \"local_steps\": 5, \"batch_size\": 8, \"lr\": 0.01, \"momentum\": 0.5}";
    cJSON *r = run_ig(dir, "e5", "uniform", fed, "{\"name\": \"none\"}",
                      ", \"images\": [1, 4], \"batch_size\": 2, \"steps\": 400, \"local\": \"federation\"", err,
                      sizeof err, &rc);
    ck_assert_msg(r != NULL, "exit %d: %s", rc, err);
    cJSON *ob = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "observations"), 0);
    ck_assert_int_eq(num(cJSON_GetObjectItem(ob, "local"), "steps"), 5);
    printf("cli_local_steps_and_batch4: 5 steps, B = 2: SSIM %.4f, PSNR %.2f\n", num(r, "ssim_mean"),
           num(r, "psnr_mean"));
    fflush(stdout);
    ck_assert_msg(num(r, "ssim_mean") >= CLI_E5_MIN_SSIM, "SSIM %g", num(r, "ssim_mean"));
    ck_assert_double_eq(num(r, "label_accuracy"), 1.0);
    cJSON_Delete(r);
    // Fashion-MNIST-like labels k mod 10: images 1 and 11 share label 1.
    r = run_ig(dir, "b4", "default", "{\"clients\": 3}", "{\"name\": \"none\"}",
               ", \"images\": [1, 11, 2, 5], \"batch_size\": 4, \"steps\": 100", err, sizeof err, &rc);
    ck_assert_msg(r != NULL, "exit %d: %s", rc, err);
    // LeNet's last layer has a bias: the batch's labels are counted from its gradient
    // (tests/test_ig_labels.c), LLG being the rule for a last layer without one.
    ck_assert_ptr_nonnull(strstr(
        cJSON_GetObjectItem(cJSON_GetObjectItem(r, "attack_config"), "label_rule")->valuestring, "Geng et al. 2021"));
    printf("cli_local_steps_and_batch4: B = 4: SSIM %.4f, labels %.2f\n", num(r, "ssim_mean"),
           num(r, "label_multiset_accuracy"));
    ck_assert_double_eq(num(r, "label_multiset_accuracy"), 1.0);
    ck_assert_double_eq(num(r, "label_accuracy"), 1.0); // each matched reconstruction carries its original's label
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "images")), 4);
    cJSON_Delete(r);
    // Bad configurations: one line naming the key, exit 2.
    const struct { const char *fed, *extra, *needle; } bad[] = {
        {fed, ", \"decay\": \"cosine\"", "decay"},
        {fed, ", \"lbfgs\": {}", "lbfgs"},
        {fed, ", \"attacker\": \"strongest\"", "attacker"},
        {fed, ", \"lr\": 0", "lr"},
        {"{\"clients\": 3, \"local_steps\": 5, \"batch_size\": 2}",
         ", \"images\": [0, 1, 2, 3], \"batch_size\": 4, \"local\": \"federation\"", "federation.batch_size"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char name[16];
        snprintf(name, sizeof name, "bad%zu", k);
        cJSON *b = run_ig(dir, name, "default", bad[k].fed, "{\"name\": \"none\"}", bad[k].extra, err, sizeof err, &rc);
        ck_assert_ptr_null(b);
        ck_assert_msg(rc == 2, "case %zu: exit %d: %s", k, rc, err);
        ck_assert_msg(strstr(err, bad[k].needle) && count_lines(err) == 1, "case %zu: %s", k, err);
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// In the matrix: one cell per defense, the attack's headline in each (no defense
// recovers, client noise of 100x the clip does not).
START_TEST(cli_matrix_cells) {
    if (!bin()) {
        printf("SKIP: cli_matrix_cells (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-igm-XXXXXX", err[4096], cfg[1200], text[4096], cmd[4096], p[1500];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 6);
    snprintf(cfg, sizeof cfg, "%s/m.json", dir);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\", \"split\": \"test\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"},"
             " \"federation\": {\"clients\": 3, \"rounds\": 1},"
             " \"defenses\": [{\"name\": \"none\"}, {\"name\": \"gaussian-dpfedavg\", \"noise\": \"client\","
             " \"noise_multiplier\": 100, \"clip\": 1}],"
             " \"attacks\": [{\"name\": \"inverting-gradients\", \"images\": [1, 4], \"steps\": 300}]}",
             dir);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s matrix %s --out %s/out", bin(), cfg, dir);
    ck_assert_msg(run_cmd(cmd, err, sizeof err) == 0, "%s", err);
    snprintf(p, sizeof p, "%s/out/results.json", dir);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(p, &r, NULL), FP_OK);
    cJSON *cells = cJSON_GetObjectItem(r, "cells");
    ck_assert_int_eq(cJSON_GetArraySize(cells), 2);
    for (int k = 0; k < 2; k++) {
        cJSON *c = cJSON_GetArrayItem(cells, k);
        snprintf(p, sizeof p, "%s/out/%s", dir, cJSON_GetObjectItem(c, "file")->valuestring);
        cJSON *cell = NULL;
        ck_assert_int_eq(jv_load_file(p, &cell, NULL), FP_OK);
        // Once per observer: the server's view and the public release (3 participants).
        cJSON *as = cJSON_GetObjectItem(cell, "attacks"), *a;
        ck_assert_int_eq(cJSON_GetArraySize(as), 2);
        const char *def = cJSON_GetObjectItem(c, "defense")->valuestring;
        cJSON_ArrayForEach(a, as) {
            ck_assert_str_eq(cJSON_GetObjectItem(a, "name")->valuestring, "inverting-gradients");
            ck_assert_str_eq(cJSON_GetObjectItem(a, "status")->valuestring, "done");
            const char *observer = cJSON_GetObjectItem(a, "observer")->valuestring;
            double v = num(a, "value");
            printf("cli_matrix_cells: %s, %s observer: SSIM %.4f\n", def, observer, v);
            if (strcmp(observer, "server") != 0)
                continue;
            if (strcmp(def, "none") == 0)
                ck_assert_msg(v >= CLI_B1_MIN_SSIM, "none: SSIM %g", v);
            else
                ck_assert_msg(v < 0.5, "%s: SSIM %g", def, v);
        }
        cJSON_Delete(cell);
    }
    cJSON_Delete(r);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *suite_ig(void) {
    Suite *s = suite_create("ig");
    TCase *tc = tcase_create("units");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, hungarian_matches_brute_force);
    tcase_add_test(tc, llg_constructed);
    tcase_add_test(tc, llg_batch_of_four_on_fixture);
    tcase_add_test(tc, local_steps_match_host_sgd);
    tcase_add_test(tc, local_steps_gradient_matches_finite_differences);
    tcase_add_test(tc, adam_signed_recovers_tiny);
    suite_add_tcase(s, tc);
    tc = tcase_create("cli");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, cli_batch1_recovers_and_noise_control);
    tcase_add_test(tc, cli_local_steps_and_batch4);
    tcase_add_test(tc, cli_matrix_cells);
    suite_add_tcase(s, tc);
    return s;
}
