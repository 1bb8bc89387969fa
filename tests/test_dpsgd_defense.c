// The `dp-sgd` defense (defenses/dp_sgd.c): record-level DP-SGD inside each client.
//
// In process, through DefenseOps.local_gradient on a client whose records are all the same
// (so every record has the same clipped gradient c and a step's noiseless gradient is
// |batch| c / (q n), which reads the batch size back exactly):
//   - Poisson batches: over 400 steps the batch sizes have mean q n and variance
//     q n (1 − q) within 6 standard errors (SE of the mean √(v/N), of the sample
//     variance v √(2/(N − 1)) for a near-normal count); the control: the same check
//     rejects fixed-size batches of q n;
//   - the noise: the gradient at σ minus the one at σ = 0 (same step, so the same batch)
//     has per-element variance (σ C / (q n))² within 6 SE (Gaussian: SE v √(2/N)); the
//     control: the same check rejects σ · 0.9.
// Through `fedpriv train` (skipped without FEDPRIV_BIN): a federation end to end with a
// fixed seed (twice: bit-identical results), whose per-round sound ε equals `fedpriv
// accountant` for T local steps × rounds, PLD and RDP, and with a target ε; the control:
// noise multiplier 0 gives guarantee none and ε = inf; and the matrix cells of
// fixtures/dpsgd-matrix.json (dp-sgd and none against DLG and Basic-MIA) held to
// fixtures/dpsgd-baseline.json (RDP there: the PLD account of every federation the
// attacks build costs seconds each).
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "defenses/clip.h"
#include "defenses/registry.h"
#include "defenses/dpsgd_step.h"
#include "fl/fed.h"
#include "tests/cli_run.h"

// ---- in process --------------------------------------------------------------------------

#define DS_N 200        // records of the client
#define DS_B 20         // batch size: q = 0.1
#define DS_STEPS 400    // steps sampled

typedef struct {
    Dataset *d;
    Model *m;
    Tape *t;
    const DefenseOps *ops;
    void *state;
    uint32_t idx[DS_N];
    int n;
    DefenseRound round;
    float *grad;
    float c[1 << 12];   // the clipped per-record gradient (host)
    size_t np;
} Fix;

static void fix_init(Fix *fx, double sigma, double clip) {
    FpError err = {0};
    fx->d = dataset_create("same", DS_N, 1, 1, 6, 3, 0, &err);
    ck_assert_msg(fx->d != NULL, "%s", err.msg);
    for (int i = 0; i < DS_N; i++) { // every record the same
        for (int j = 0; j < 6; j++)
            fx->d->x[(size_t)i * 6 + j] = 0.1f * (float)(j + 1);
        fx->d->y[i] = 1;
        fx->idx[i] = (uint32_t)i;
    }
    cJSON *mj = cJSON_Parse("{\"name\": \"logreg\"}");
    DataShape in = {1, 1, 6, 3, 0};
    fx->m = model_create(mj, "model", &in, backend_cpu(), &err);
    cJSON_Delete(mj);
    ck_assert_msg(fx->m != NULL, "%s", err.msg);
    ck_assert_int_eq(model_init(fx->m, 5, NULL), FP_OK);
    fx->np = fx->m->table.n_params;
    ck_assert_uint_le(fx->np, sizeof fx->c / sizeof fx->c[0]);
    fx->t = tape_create(fx->m->be);
    fx->n = DS_N;
    int samples = DS_N;
    DefenseSetup su = {.seed = 9, .params = &fx->m->table, .n_clients = 1, .rounds = 1, .sample_rate = 1,
                       .local_epochs = 1, .local_steps = DS_STEPS, .batch_size = DS_B, .lr = 0.1,
                       .min_client_samples = DS_N, .max_client_samples = DS_N, .client_samples = &samples,
                       .model = fx->m};
    char js[200];
    snprintf(js, sizeof js, "{\"name\": \"dp-sgd\", \"clip\": %.17g, \"noise_multiplier\": %.17g}", clip, sigma);
    cJSON *dj = cJSON_Parse(js);
    fx->ops = defense_find("dp-sgd");
    ck_assert_ptr_nonnull(fx->ops);
    ck_assert_msg(fx->ops->create(dj, "defense", &su, &fx->state, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(dj);
    fx->round = (DefenseRound){.round = 0, .client = 0, .rng = rng_stream(9, RNG_DEFENSE, 0, 0),
                               .aux_rng = rng_stream(9, RNG_DEFENSE_AUX, 0, 0), .n_local_samples = DS_N,
                               .model = fx->m, .local_data = fx->d, .local_idx = fx->idx, .n_local = DS_N,
                               .participants = 1};
    fx->grad = fx->m->be->alloc(sizeof(float) * fx->np);
    ck_assert_ptr_nonnull(fx->grad);
    // c: one record's gradient, clipped as the private step clips it.
    float *pe = malloc(sizeof(float) * fx->np);
    ck_assert_ptr_nonnull(pe);
    ck_assert_msg(dpsgd_per_example_grads(fx->m, fx->t, fx->d, fx->idx, 1, pe, &err) == FP_OK, "%s", err.msg);
    double nrm = 0;
    for (size_t j = 0; j < fx->np; j++)
        nrm += (double)pe[j] * pe[j];
    nrm = sqrt(nrm) * (1.0 + 1.0 / 1048576.0);
    double s = nrm > clip ? clip / nrm : 1.0;
    for (size_t j = 0; j < fx->np; j++)
        fx->c[j] = (float)(pe[j] * (float)s);
    free(pe);
}

static void fix_free(Fix *fx) {
    fx->ops->destroy(fx->state);
    fx->m->be->free(fx->grad);
    tape_free(fx->t);
    model_free(fx->m);
    dataset_free(fx->d);
}

// The private gradient of local step `step` (host copy in out).
static void fix_step(Fix *fx, long step, float *out) {
    DefenseLocalStep ls = {.round = &fx->round, .step = step, .steps = DS_STEPS, .model = fx->m, .tape = fx->t,
                           .data = fx->d, .idx = fx->idx, .n = DS_B};
    FpError err = {0};
    ck_assert_msg(fx->ops->local_gradient(fx->state, &ls, fx->grad, &err) == FP_OK, "%s", err.msg);
    fx->m->be->download(out, fx->grad, sizeof(float) * fx->np);
}

// |batch| of a noiseless step: grad = |batch| c / (q n), read at c's largest element.
static double batch_size_of(const Fix *fx, const float *g) {
    size_t jm = 0;
    for (size_t j = 1; j < fx->np; j++)
        if (fabsf(fx->c[j]) > fabsf(fx->c[jm]))
            jm = j;
    return (double)g[jm] / fx->c[jm] * DS_B;
}

// Mean and variance of counts[0..N) against a Binomial(n, q) count's, within 6 SE.
static int poisson_batches_ok(const double *counts, int N, double n, double q) {
    double mean = 0, var = 0, mu = n * q, v = n * q * (1 - q);
    for (int i = 0; i < N; i++)
        mean += counts[i] / N;
    for (int i = 0; i < N; i++)
        var += (counts[i] - mean) * (counts[i] - mean) / (N - 1);
    return fabs(mean - mu) < 6 * sqrt(v / N) && fabs(var - v) < 6 * v * sqrt(2.0 / (N - 1));
}

// Mean of x² over n zero-mean Gaussian draws against variance v, within 6 SE.
static int gaussian_var_ok(const double *x, size_t n, double v) {
    double m2 = 0;
    for (size_t i = 0; i < n; i++)
        m2 += x[i] * x[i] / (double)n;
    return fabs(m2 - v) < 6 * v * sqrt(2.0 / (double)n);
}

START_TEST(local_batches_are_poisson) {
    Fix fx;
    fix_init(&fx, 0.0, 0.05);
    float *g = malloc(sizeof(float) * fx.np);
    double counts[DS_STEPS], fixed[DS_STEPS];
    ck_assert_ptr_nonnull(g);
    for (long s = 0; s < DS_STEPS; s++) {
        fix_step(&fx, s, g);
        double b = batch_size_of(&fx, g);
        ck_assert_msg(fabs(b - round(b)) < 1e-3 * fmax(1.0, b), "step %ld: batch size %g is not a count", s, b);
        // The whole gradient is |batch| c / (q n): nothing else is in it.
        for (size_t j = 0; j < fx.np; j++)
            ck_assert_msg(fabsf(g[j] - (float)(round(b) / DS_B) * fx.c[j]) <= 1e-5f * fmaxf(1.0f, fabsf(g[j])),
                          "step %ld element %zu: %g, want %g", s, j, g[j], round(b) / DS_B * fx.c[j]);
        counts[s] = round(b);
        fixed[s] = DS_B;
    }
    ck_assert_msg(poisson_batches_ok(counts, DS_STEPS, DS_N, (double)DS_B / DS_N),
                  "batch sizes are not Binomial(%d, %g)", DS_N, (double)DS_B / DS_N);
    ck_assert_msg(!poisson_batches_ok(fixed, DS_STEPS, DS_N, (double)DS_B / DS_N),
                  "control: fixed-size batches pass the Poisson check");
    free(g);
    fix_free(&fx);
}
END_TEST

START_TEST(step_noise_is_sigma_c_over_qn) {
    const double sigma = 1.3, clip = 0.05;
    Fix noisy, quiet, under;
    fix_init(&noisy, sigma, clip);
    fix_init(&quiet, 0.0, clip);
    fix_init(&under, sigma * 0.9, clip); // a broken mechanism: 10% too little noise
    size_t np = noisy.np, steps = 4000 / np + 1, n = steps * np;
    double *diff = malloc(sizeof(double) * n), *diff_under = malloc(sizeof(double) * n);
    float *a = malloc(sizeof(float) * np), *b = malloc(sizeof(float) * np), *u = malloc(sizeof(float) * np);
    ck_assert(diff && diff_under && a && b && u);
    for (size_t s = 0; s < steps; s++) {
        fix_step(&noisy, (long)s, a);
        fix_step(&quiet, (long)s, b);
        fix_step(&under, (long)s, u);
        for (size_t j = 0; j < np; j++) {
            diff[s * np + j] = (double)a[j] - b[j];
            diff_under[s * np + j] = (double)u[j] - b[j];
        }
    }
    double std = sigma * clip / DS_B; // σ C / (q n), q n = B
    ck_assert_msg(gaussian_var_ok(diff, n, std * std), "the step's noise is not N(0, (sigma C / (q n))^2)");
    ck_assert_msg(!gaussian_var_ok(diff_under, n, std * std), "control: 0.9 sigma passes the noise check");
    free(diff);
    free(diff_under);
    free(a);
    free(b);
    free(u);
    fix_free(&noisy);
    fix_free(&quiet);
    fix_free(&under);
}
END_TEST

// ---- through `fedpriv train` ---------------------------------------------------------------

#define E2E_ROUNDS 3

// 4 clients of 20 records (batch 5: q = 0.25, T = 2 epochs x 4 = 8 steps a round), half
// of them sampled each round (every round still counts for the record's account).
static void write_config_threads(const char *dir, const char *defense_json, int threads, char *cfg_path, size_t n) {
    char csv[512];
    snprintf(csv, sizeof csv, "%s/toy.csv", dir);
    FILE *f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "f1,f2,label\n");
    for (int i = 0; i < 200; i++)
        fprintf(f, "%g,%g,%d\n", (i % 7) / 7.0 - 0.5 + (i % 2) * 0.4, (i % 5) / 5.0, i % 2);
    fclose(f);
    snprintf(cfg_path, n, "%s/cfg.json", dir);
    f = fopen(cfg_path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},\n"
            " \"federation\": {\"clients\": 4, \"sample_rate\": 0.5, \"rounds\": %d, \"local_epochs\": 2,\n"
            "                \"samples_per_client\": 20, \"batch_size\": 5, \"lr\": 0.2},\n"
            " \"defense\": %s, \"threads\": %d}\n",
            csv, E2E_ROUNDS, defense_json, threads);
    fclose(f);
}

static void write_config(const char *dir, const char *defense_json, char *cfg_path, size_t n) {
    write_config_threads(dir, defense_json, 2, cfg_path, n);
}

static cJSON *train_threads(const char *dir, const char *defense_json, int threads, int want_rc) {
    char cfg[600], out_path[600];
    static char out[1 << 18], errb[1 << 14];
    snprintf(out_path, sizeof out_path, "%s/result.json", dir);
    write_config_threads(dir, defense_json, threads, cfg, sizeof cfg);
    const char *args[] = {"train", "--config", cfg, "--out", out_path, NULL};
    int rc = cli_run(args, out, errb, sizeof errb);
    if (rc < 0)
        return NULL;
    ck_assert_msg(rc == want_rc, "%s: exit %d: %s", defense_json, rc, errb);
    FILE *f = fopen(out_path, "r");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(out, 1, sizeof out - 1, f);
    out[got] = '\0';
    fclose(f);
    unlink(out_path);
    cJSON *res = cJSON_Parse(out);
    ck_assert_ptr_nonnull(res);
    return res;
}

static cJSON *train(const char *dir, const char *defense_json, int want_rc) {
    return train_threads(dir, defense_json, 2, want_rc);
}

// ε of `fedpriv accountant --method M --q Q --sigma S --steps N --delta D --json` (M
// "rdp-discrete": --method rdp --sampling poisson-discrete).
static double accountant_epsilon(const char *method, double q, double sigma, long steps, double delta) {
    char qs[40], ss[40], ns[40], ds[40];
    static char out[8192], errb[8192];
    snprintf(qs, sizeof qs, "%.17g", q);
    snprintf(ss, sizeof ss, "%.17g", sigma);
    snprintf(ns, sizeof ns, "%ld", steps);
    snprintf(ds, sizeof ds, "%.17g", delta);
    int discrete = strcmp(method, "rdp-discrete") == 0;
    const char *args[] = {"accountant", "--method", discrete ? "rdp" : method, "--q", qs, "--sigma", ss, "--steps",
                          ns, "--delta", ds, "--json", discrete ? "--sampling" : NULL, "poisson-discrete", NULL};
    int rc = cli_run(args, out, errb, sizeof out);
    ck_assert_msg(rc == 0, "fedpriv accountant: exit %d: %s", rc, errb);
    cJSON *j = cJSON_Parse(out);
    ck_assert_ptr_nonnull(j);
    double e = cJSON_GetObjectItem(j, "epsilon")->valuedouble;
    cJSON_Delete(j);
    return e;
}

// Removes what write_config and train leave in dir, then dir.
static void remove_dir(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/toy.csv", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/cfg.json", dir);
    unlink(p);
    rmdir(dir);
}

static const cJSON *round_privacy(const cJSON *res, int r) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "rounds"), r), "privacy");
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", k);
    return v->valuedouble;
}

// Whether the round's record lists the assumption `a`.
static int assumes(const cJSON *p, const char *a) {
    const cJSON *as = cJSON_GetObjectItem(p, "assumptions"), *e;
    cJSON_ArrayForEach(e, as)
        if (cJSON_IsString(e) && strcmp(e->valuestring, a) == 0)
            return 1;
    return 0;
}

// Each round's conditional ε is the accountant's for q = 0.25, T = 8 steps x rounds at the
// multiplier σ/φ (φ the safe sampler's rounding inflation, config rounding_inflation) and
// δ(1 − 2^-10) (the rest holds the table's distance to the rounded Gaussian): PLD, or RDP
// of the continuous Poisson-subsampled Gaussian, whose accounts hold exactly for the
// rounded Gaussian (post-processing of the continuous mechanism). The record is
// conditional on the float summation of the clipped gradients alone, never on a float
// sampler.
static void check_account(const cJSON *res, const char *method, double sigma) {
    const cJSON *def = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "config"), "defense");
    ck_assert_ptr_nonnull(def);
    ck_assert_str_eq(cJSON_GetObjectItem(def, "sampler")->valuestring, "safe");
    double phi = num(def, "rounding_inflation");
    ck_assert(phi > 1 && phi < 1.1);
    ck_assert_double_eq_tol(num(def, "accountant_sample_rate"), 0.25, 1e-15);
    ck_assert_double_eq(num(def, "local_steps_per_round"), 8);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(res, "rounds")), E2E_ROUNDS);
    for (int r = 0; r < E2E_ROUNDS; r++) {
        const cJSON *p = round_privacy(res, r);
        ck_assert_str_eq(cJSON_GetObjectItem(p, "unit")->valuestring, "record");
        ck_assert_str_eq(cJSON_GetObjectItem(p, "guarantee")->valuestring, "conditional");
        const cJSON *sound = cJSON_GetObjectItem(p, "sound");
        ck_assert_str_eq(cJSON_GetObjectItem(sound, "epsilon_total")->valuestring, "inf");
        double got = num(sound, "epsilon_total_conditional");
        double want = accountant_epsilon(method, 0.25, sigma / phi, 8L * (r + 1), 1e-5 * (1 - 0x1p-10));
        ck_assert_msg(fabs(got - want) <= 1e-9 * want, "%s round %d: epsilon %.12g, accountant %.12g", method,
                      r + 1, got, want);
        ck_assert(assumes(p, DPSGD_ASSUME_FLOAT_SUM));
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "assumptions")), 1);
        ck_assert(!assumes(p, CLIP_NOISE_FLOAT_REASON));
        ck_assert(!assumes(p, PRIVACY_ASSUME_EXACT_NOISE));
    }
}

START_TEST(federation_end_to_end) {
    char dir[] = "/tmp/fedpriv-dpsgd-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *pld = "{\"name\":\"dp-sgd\",\"clip\":1,\"noise_multiplier\":1.1}";
    cJSON *a = train(dir, pld, 0);
    if (!a) {
        printf("SKIP dp-sgd federation: FEDPRIV_BIN is not set (make test sets it)\n");
        rmdir(dir);
        return;
    }
    check_account(a, "pld", 1.1);
    // Fixed seed: the same run gives the same model, so the same losses and accuracies,
    // with 1 thread as with 2.
    cJSON *b = train_threads(dir, pld, 1, 0);
    for (int r = 0; r < E2E_ROUNDS; r++) {
        const cJSON *ra = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "rounds"), r);
        const cJSON *rb = cJSON_GetArrayItem(cJSON_GetObjectItem(b, "rounds"), r);
        ck_assert_double_eq(num(ra, "test_loss"), num(rb, "test_loss"));
        ck_assert_double_eq(num(ra, "test_accuracy"), num(rb, "test_accuracy"));
    }
    // The noise is in the training: without it the same seed trains a different model.
    cJSON *z = train(dir, "{\"name\":\"dp-sgd\",\"clip\":1,\"noise_multiplier\":0}", 0);
    ck_assert(num(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "rounds"), 0), "test_loss") !=
              num(cJSON_GetArrayItem(cJSON_GetObjectItem(z, "rounds"), 0), "test_loss"));
    // Control: no noise, no guarantee.
    for (int r = 0; r < E2E_ROUNDS; r++) {
        const cJSON *p = round_privacy(z, r);
        ck_assert_str_eq(cJSON_GetObjectItem(p, "guarantee")->valuestring, "none");
        ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "sound"), "epsilon_total")->valuestring, "inf");
        ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "sound"), "epsilon_total_conditional"));
    }
    // Control: the float sampler gives guarantee none, with its reason.
    cJSON *f = train(dir, "{\"name\":\"dp-sgd\",\"clip\":1,\"noise_multiplier\":1.1,\"sampler\":\"float\"}", 0);
    for (int r = 0; r < E2E_ROUNDS; r++) {
        const cJSON *p = round_privacy(f, r);
        ck_assert_str_eq(cJSON_GetObjectItem(p, "guarantee")->valuestring, "none");
        ck_assert(assumes(p, CLIP_NOISE_FLOAT_REASON));
        ck_assert(!assumes(p, DPSGD_ASSUME_FLOAT_SUM));
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(z);
    cJSON_Delete(f);
    remove_dir(dir);
}
END_TEST

// RDP, and a target epsilon (the sigma found meets it after all rounds).
START_TEST(federation_rdp_and_target_epsilon) {
    char dir[] = "/tmp/fedpriv-dpsgd-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cJSON *rdp = train(dir, "{\"name\":\"dp-sgd\",\"noise_multiplier\":1.1,\"accountant\":\"rdp\"}", 0);
    if (!rdp) {
        printf("SKIP dp-sgd federation: FEDPRIV_BIN is not set (make test sets it)\n");
        rmdir(dir);
        return;
    }
    check_account(rdp, "rdp", 1.1);
    cJSON_Delete(rdp);
    cJSON *t = train(dir, "{\"name\":\"dp-sgd\",\"epsilon\":4,\"delta\":1e-5}", 0);
    double sigma = num(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "config"), "defense"), "noise_multiplier");
    ck_assert(sigma > 0);
    check_account(t, "pld", sigma);
    double last = num(cJSON_GetObjectItem(round_privacy(t, E2E_ROUNDS - 1), "sound"), "epsilon_total_conditional");
    ck_assert_msg(last <= 4.0 && last > 3.9, "target 4 reached %.6g", last);
    cJSON_Delete(t);
    // A target so large that the safe table's slack, (1 + e^eps)·draws·2^-59, no longer fits
    // in the first share of delta: the calibration must solve at the share the record will
    // use (before: sigma solved at delta(1 - 2^-10), the record at delta(1 - 2^-3), above
    // the target).
    t = train(dir, "{\"name\":\"dp-sgd\",\"epsilon\":20,\"delta\":1e-5}", 0);
    last = num(cJSON_GetObjectItem(round_privacy(t, E2E_ROUNDS - 1), "sound"), "epsilon_total_conditional");
    ck_assert_msg(last <= 20.0 && last > 19.9, "target 20 reached %.6g", last);
    cJSON_Delete(t);
    remove_dir(dir);
}
END_TEST

START_TEST(bad_parameters_exit_2) {
    char dir[] = "/tmp/fedpriv-dpsgd-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const struct { const char *def, *path; } bad[] = {
        {"{\"name\":\"dp-sgd\",\"clip\":0,\"noise_multiplier\":1}", "defense.clip"},
        {"{\"name\":\"dp-sgd\",\"noise_multiplier\":-1}", "defense.noise_multiplier"},
        {"{\"name\":\"dp-sgd\",\"epsilon\":1,\"delta\":1}", "defense.delta"},
        {"{\"name\":\"dp-sgd\",\"noise_multiplier\":1,\"accountant\":\"moments\"}", "defense.accountant"},
        {"{\"name\":\"dp-sgd\",\"noise_multiplier\":1,\"epsilon\":1}", "defense"},
        {"{\"name\":\"dp-sgd\",\"noise_multiplier\":1,\"bogus\":1}", "defense.bogus"},
        {"{\"name\":\"dp-sgd\",\"noise_multiplier\":1,\"sampler\":\"exact\"}", "defense.sampler"},
    };
    char cfg[600], out[8192], errb[8192];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_config(dir, bad[i].def, cfg, sizeof cfg);
        const char *args[] = {"train", "--config", cfg, NULL};
        int rc = cli_run(args, out, errb, sizeof out);
        if (rc < 0) {
            printf("SKIP dp-sgd bad-input runs: FEDPRIV_BIN is not set (make test sets it)\n");
            break;
        }
        ck_assert_msg(rc == 2, "%s: exit %d, want 2 (%s)", bad[i].def, rc, errb);
        ck_assert_msg(cli_count_lines(errb) == 1, "%s: want one line on stderr, got \"%s\"", bad[i].def, errb);
        ck_assert_msg(strstr(errb, bad[i].path) != NULL, "%s: \"%s\" does not name %s", bad[i].def, errb,
                      bad[i].path);
        ck_assert_msg(out[0] == '\0', "%s: partial output on stdout", bad[i].def);
    }
    remove_dir(dir);
}
END_TEST

// dp-sgd in the matrix beside no defense, against DLG and Basic-MIA
// (fixtures/dpsgd-matrix.json), held to fixtures/dpsgd-baseline.json by `fedpriv check`.
START_TEST(matrix_cells_with_dlg_and_mia) {
    char dir[] = "/tmp/fedpriv-dpsgd-matrix-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static char out[1 << 16], errb[1 << 16];
    const char *run[] = {"matrix", "fixtures/dpsgd-matrix.json", "--out", dir, "--jobs", "2", NULL};
    int rc = cli_run(run, out, errb, sizeof out);
    if (rc < 0) {
        printf("SKIP dp-sgd matrix: FEDPRIV_BIN is not set (make test sets it)\n");
        rmdir(dir);
        return;
    }
    ck_assert_msg(rc == 0, "fedpriv matrix exited %d: %s", rc, errb);
    const char *check[] = {"check", dir, "--baseline", "fixtures/dpsgd-baseline.json", NULL};
    rc = cli_run(check, out, errb, sizeof out);
    ck_assert_msg(rc == 0, "fedpriv check exited %d: %s%s", rc, out, errb);
    ck_assert_ptr_nonnull(strstr(out, "all 5 bounds hold"));
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *suite_dpsgd_defense(void) {
    Suite *s = suite_create("dpsgd_defense");
    TCase *t = tcase_create("mechanism");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, local_batches_are_poisson);
    tcase_add_test(t, step_noise_is_sigma_c_over_qn);
    suite_add_tcase(s, t);
    t = tcase_create("cli");
    tcase_set_timeout(t, 300); // sanitizer builds on a busy machine
    tcase_add_test(t, federation_end_to_end);
    tcase_add_test(t, federation_rdp_and_target_epsilon);
    tcase_add_test(t, bad_parameters_exit_2);
    tcase_add_test(t, matrix_cells_with_dlg_and_mia);
    suite_add_tcase(s, t);
    return s;
}
