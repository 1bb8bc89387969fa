// Proven with the standard account (docs/defenses-federated.md, docs/dpsgd.md).
//   sampler: the rounded Gaussian's table (dgauss_wide_init_rounded) has the law of
//       round(N(0, σ²)): its probabilities against the ideal cells' to 1e-12, and 2^20 draws
//       whose mean, variance and P(J = 0) are each within 6 standard errors of the ideal
//       law's. Control: the same check rejects the discrete Gaussian of the same σ (the
//       wrong law) and the rounded Gaussian one table step wider (the wrong scale).
//   server noise: DP-FedAvg in the demo federation (1,000 clients, Bernoulli q 0.1, 20
//       rounds, δ 1e-5, the MLP 784-64-10) at a target ε of 1 draws a multiplier within
//       1.05 of the standard RDP accountant's for the same ε (2.30; it drew 4.24 under the
//       discrete Gaussian's general bound) and its record is proven at the target; also at
//       ε 0.25, 4 and 8. Control: Zhu & Wang's bound at that multiplier is above the target.
//   dp-sgd: q 0.1, 100 steps, target ε 3: σ within 5% of the PLD accountant's for that ε,
//       conditional on the float summation alone.
//   the field's figure: each record states the standard accountant's ε (RDP and PLD) for
//       its multiplier, rate and steps, equal to the accountants' own.
//   describe: a defense whose describe() runs out of memory fails fed_defense_json with the
//       one line, never a partial object.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_pld.h"
#include "defenses/clip.h"
#include "defenses/dp/dgauss.h"
#include "defenses/dpsgd_step.h"
#include "defenses/registry.h"
#include "fl/fed.h"
#include "models/model.h"
#include "fl/experiment.h"
#include "reports/export.h"
#include "runner/check.h"
#include "tests/defense_fixtures.h"
#include "tests/matrix_standins.h"

// P(round(Z) = j), Z ~ N(0, σ²), in double: the ideal law the table must hold.
static double rounded_p(long j, double sigma) {
    double a = (fabs((double)j) - 0.5) / (sigma * sqrt(2.0)), b = (fabs((double)j) + 0.5) / (sigma * sqrt(2.0));
    return j == 0 ? erf(b) : 0.5 * (erfc(a) - erfc(b));
}

START_TEST(rounded_table_holds_the_law) {
    static const double sigmas[] = {1, 2, 64};
    for (int i = 0; i < 3; i++) {
        DGaussWide g;
        ck_assert_int_eq(dgauss_wide_init_rounded(&g, sigmas[i], NULL), FP_OK);
        ck_assert_double_eq(g.sigma, sigmas[i]);   // 2σ² a power of two already
        ck_assert_int_eq(g.rounded, 1);
        double worst = 0;
        for (long j = -(long)(6 * g.sigma); j <= (long)(6 * g.sigma); j++)
            worst = fmax(worst, fabs((double)dgauss_wide_pmf(&g, j) / rounded_p(j, g.sigma) - 1));
        ck_assert_msg(worst < 1e-12, "sigma %g: relative error %g", g.sigma, worst);
        // Its variance is the rounded law's, σ² + 1/12 to Sheppard's correction (not σ²).
        ck_assert_double_eq_tol(g.variance, g.sigma * g.sigma + 1.0 / 12, 1e-6 * g.sigma * g.sigma + 1e-9);
        dgauss_wide_free(&g);
    }
    DGaussWide g;
    ck_assert_int_eq(dgauss_wide_init_rounded(&g, 0.5, NULL), FP_EPARAM);
}
END_TEST

// The largest |z| over mean, variance and P(J = 0) of n draws of g against round(N(0, σ²)):
// each statistic's standard error from the ideal law's moments (variance of J², of 1{J=0}).
static double rounded_law_z(const DGaussWide *g, double sigma, int n, uint64_t seed) {
    double v = 0, m4 = 0;
    for (long j = -(long)(40 * sigma); j <= (long)(40 * sigma); j++) {
        double p = rounded_p(j, sigma);
        v += p * (double)j * j;
        m4 += p * (double)j * j * (double)j * j;
    }
    double p0 = rounded_p(0, sigma);
    RngStream rs = rng_stream(seed, RNG_TEST, 0, 0);
    double s1 = 0, s2 = 0, zeros = 0;
    for (int i = 0; i < n; i++) {
        double j = (double)dgauss_wide_draw_at(g, &rs, (uint64_t)i);
        s1 += j;
        s2 += j * j;
        zeros += j == 0;
    }
    double z_mean = (s1 / n) / sqrt(v / n);
    double z_var = (s2 / n - v) / sqrt((m4 - v * v) / n);
    double z_zero = (zeros / n - p0) / sqrt(p0 * (1 - p0) / n);
    return fmax(fabs(z_mean), fmax(fabs(z_var), fabs(z_zero)));
}

START_TEST(rounded_sampler_passes_moments) {
    DGaussWide g;
    ck_assert_int_eq(dgauss_wide_init_rounded(&g, 1, NULL), FP_OK);
    double z = rounded_law_z(&g, 1, 1 << 20, 41);
    ck_assert_msg(z <= 6, "rounded sampler at sigma 1: |z| %g", z);
    dgauss_wide_free(&g);
}
END_TEST

// Control: the same check on a wrong law (the discrete Gaussian N_Z(0, 1), variance 1
// instead of 13/12) and on a wrong scale (the rounded table of 2σ² = 4, σ √2) fails.
START_TEST(broken_sampler_is_caught) {
    DGaussWide g;
    ck_assert_int_eq(dgauss_wide_init(&g, 1, NULL), FP_OK);
    double z = rounded_law_z(&g, 1, 1 << 20, 41);
    ck_assert_msg(z > 6, "control: the discrete Gaussian passes as the rounded one (|z| %g)", z);
    dgauss_wide_free(&g);
    ck_assert_int_eq(dgauss_wide_init_rounded(&g, 1.2, NULL), FP_OK);
    ck_assert_double_eq(g.sigma, sqrt(2.0));
    z = rounded_law_z(&g, 1, 1 << 20, 41);
    ck_assert_msg(z > 6, "control: a rounded Gaussian of sigma sqrt 2 passes as sigma 1 (|z| %g)", z);
    dgauss_wide_free(&g);
}
END_TEST

// ---- server-noise DP-FedAvg in the demo federation --------------------------------------

#define DEMO_CLIENTS 1000
#define DEMO_ROUNDS 20
#define DEMO_Q 0.1
#define DEMO_DELTA 1e-5

typedef struct {
    double eps, ratio_max;   // target, and the bound on z over the standard RDP multiplier
} ServerCase;

// z/σ_RDP is φ(z) = 1 + z√d/(2S) with S capped at 16384 grid steps (d = 50,890): 1.050 at
// z 7.27 (ε 0.25), 1.016 at ε 1.
static const ServerCase server_cases[] = {{0.25, 1.051}, {1, 1.05}, {4, 1.05}, {8, 1.05}};

START_TEST(server_noise_meets_standard_account) {
    Table t;
    table_init(&t, 784 * 64 + 64 + 64 * 10, 10);
    DefenseSetup su = setup_for(&t, DEMO_CLIENTS, DEMO_ROUNDS, DEMO_Q, 60);
    for (size_t i = 0; i < sizeof server_cases / sizeof server_cases[0]; i++) {
        const ServerCase *c = &server_cases[i];
        char json[160];
        snprintf(json, sizeof json, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"server\",\"epsilon\":%g}", c->eps);
        const DefenseOps *ops;
        void *st = make_defense(json, &su, &ops);
        double z = describe_number(ops, st, "noise_multiplier"), sigma;
        ck_assert_int_eq(rdp_sigma_for_epsilon(DEMO_Q, DEMO_ROUNDS, DEMO_DELTA, c->eps, NULL, 0, &sigma, NULL, NULL), FP_OK);
        if (getenv("FP_STANDARD_FIGURES"))
            fprintf(stderr, "server noise eps %g: z %.6g, standard RDP %.6g, ratio %.4f\n", c->eps, z, sigma,
                    z / sigma);
        ck_assert_msg(z <= c->ratio_max * sigma, "eps %g: z %g vs standard %g", c->eps, z, sigma);
        PrivacyRecord rec;
        ck_assert_int_eq(defense_privacy(ops, st, DEMO_ROUNDS, &rec, NULL), FP_OK);
        ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
        ck_assert_msg(rec.epsilon_total_sound <= c->eps && rec.epsilon_total_sound >= 0.99 * c->eps, "eps %g: %g",
                      c->eps, rec.epsilon_total_sound);
        ck_assert_ptr_nonnull(strstr(rec.sound_notion, "rounded Gaussian"));
        // The field's figure beside it: the accountants' own for (q, z, rounds), below ours
        // (no inflation, no slack).
        double rdp, pld;
        ck_assert_int_eq(rdp_epsilon(DEMO_Q, z, DEMO_ROUNDS, DEMO_DELTA, &rdp, NULL, NULL), FP_OK);
        ck_assert_int_eq(pld_epsilon(DEMO_Q, z, DEMO_ROUNDS, DEMO_DELTA, &pld, NULL), FP_OK);
        ck_assert_str_eq(rec.standard_notion, CLIP_STANDARD_NOTION);
        ck_assert_double_eq(rec.epsilon_standard_rdp, rdp);
        ck_assert_double_eq(rec.epsilon_standard_pld, pld);
        ck_assert(rdp < rec.epsilon_total_sound && pld < rdp);
        // Control: the discrete Gaussian's general Poisson bound at this z overshoots the
        // target, so a record still accounted by it would fail above.
        RdpAccountant *acc;
        double general;
        ck_assert_int_eq(rdp_accountant_create(NULL, 0, &acc, NULL), FP_OK);
        ck_assert_int_eq(rdp_accountant_add_sampled(acc, RDP_SAMPLING_POISSON_DISCRETE, DEMO_Q,
                                                    z / describe_number(ops, st, "rounding_inflation"), DEMO_ROUNDS,
                                                    NULL),
                         FP_OK);
        ck_assert_int_eq(rdp_accountant_epsilon(acc, DEMO_DELTA, RDP_CONVERSION_BALLE2020, &general, NULL, NULL),
                         FP_OK);
        rdp_accountant_free(acc);
        ck_assert_msg(general > c->eps, "control: the general bound %g meets %g", general, c->eps);
        ops->destroy(st);
    }
}
END_TEST

// ---- dp-sgd -------------------------------------------------------------------------------

// One client of 320 records, batch 32 (q 0.1), 10 local steps a round, 10 rounds: 100 steps.
START_TEST(dpsgd_meets_pld_account) {
    Table t;
    table_init(&t, 2000, 10);
    int samples = 320;
    DefenseSetup su = setup_for(&t, 1, 10, 1, 320);
    su.local_steps = 10;
    su.batch_size = 32;
    su.client_samples = &samples;
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"dp-sgd\",\"epsilon\":3}", &su, &ops);
    double sigma = describe_number(ops, st, "noise_multiplier"), want;
    ck_assert_int_eq(pld_sigma_for_epsilon(0.1, 100, DEMO_DELTA, 3, 0, NULL, &want, NULL, NULL), FP_OK);
    if (getenv("FP_STANDARD_FIGURES"))
        fprintf(stderr, "dp-sgd q 0.1, 100 steps, eps 3: sigma %.6g, PLD %.6g, ratio %.4f\n", sigma, want,
                sigma / want);
    ck_assert_msg(sigma <= 1.05 * want && sigma >= want, "sigma %g vs PLD %g", sigma, want);
    PrivacyRecord rec;
    ck_assert_int_eq(defense_privacy(ops, st, 10, &rec, NULL), FP_OK);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_CONDITIONAL);
    ck_assert(rec.epsilon_total_conditional <= 3 && rec.epsilon_total_conditional > 2.9);
    ck_assert_str_eq(rec.assumptions[0], DPSGD_ASSUME_FLOAT_SUM);   // the one thing it assumes
    ck_assert_ptr_null(rec.assumptions[1]);
    ck_assert_ptr_nonnull(rec.standard_notion);
    ck_assert(rec.epsilon_standard_pld <= rec.epsilon_total_conditional);
    ops->destroy(st);
}
END_TEST

// ---- the standard figures in a run's files -----------------------------------------------

#define STANDARD_DIR "build/test-standard-account"

// `fedpriv check` bounds the standard figures as metrics and the export carries them as
// columns beside the proven and conditional ε (the stand-in "clientdp" states RDP 0.9ε and
// PLD 0.8ε; "none" states none, so its columns are empty).
START_TEST(check_and_export_carry_standard_figures) {
    ck_assert(standin_mkdirs(STANDARD_DIR));
    ck_assert(standin_write_csv(STANDARD_DIR "/blobs.csv"));
    standin_rm(STANDARD_DIR "/run");
    cJSON *root = standin_matrix_seeds(STANDARD_DIR "/blobs.csv", "[3]",
                                       "[{\"name\": \"clientdp\", \"epsilon\": [1]}, {\"name\": \"none\"}]",
                                       "[{\"name\": \"probe\"}]");
    MatrixSummary sum;
    FpError err = {0};
    ck_assert_msg(standin_run(root, STANDARD_DIR "/run", 1, &sum, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(root);
    static const struct {
        const char *bound;
        int violations;
    } cases[] = {
        {"{\"defense\": \"clientdp\", \"metric\": \"epsilon_standard_pld\", \"at_most\": 0.85}", 0},
        {"{\"defense\": \"clientdp\", \"metric\": \"epsilon_standard_pld\", \"at_most\": 0.75}", 1},
        {"{\"defense\": \"clientdp\", \"metric\": \"epsilon_standard_rdp\", \"at_least\": 0.89}", 0},
        {"{\"defense\": \"clientdp\", \"metric\": \"epsilon_standard_rdp\", \"at_least\": 0.95}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[300];
        snprintf(text, sizeof text, "{\"bounds\": [%s]}", cases[i].bound);
        cJSON *b = cJSON_Parse(text);
        CheckResult r;
        ck_assert_msg(check_baseline(STANDARD_DIR "/run", b, "b.json", &r, &err) == FP_OK, "%s: %s", text, err.msg);
        cJSON_Delete(b);
        ck_assert_msg(r.n_violations == cases[i].violations, "%s: %d violations", text, r.n_violations);
        check_result_free(&r);
    }
    HtmlBuf o;
    hb_init(&o);
    ck_assert_msg(report_export(STANDARD_DIR "/run", EXPORT_CSV, &o, &err) == FP_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(o.s);
    ck_assert_ptr_nonnull(strstr(o.s, ",epsilon_sound,epsilon_conditional,guarantee,epsilon_upload,upload_guarantee,"
                                      "epsilon_standard_rdp,epsilon_standard_pld,"));
    ck_assert_ptr_nonnull(strstr(o.s, ",1,,proven,inf,none,0.9,0.8,client,"));   // clientdp
    ck_assert_ptr_nonnull(strstr(o.s, ",inf,inf,,none,,,,,none,"));   // "none": no figures
    hb_free(&o);
}
END_TEST

// ---- describe ------------------------------------------------------------------------------

// A defense whose describe() ran out of memory: gaussian-dpfedavg with that slot replaced.
static FpStatus oom_describe(const void *state, cJSON *out) {
    cJSON_AddNumberToObject(out, "epsilon_after_all_rounds", 1);
    return FP_ENOMEM;
}

// fed_defense_json and experiment_describe pass the slot's FP_ENOMEM on with the one line,
// never a partial object (the defense's NaN ε used to land in config.defense, exit 0); the
// product's own describe states its figure.
START_TEST(describe_out_of_memory_fails) {
    Dataset *train = dataset_create("blobs", 40, 1, 2, 2, 2, 0, NULL);
    ck_assert_ptr_nonnull(train);
    for (int i = 0; i < 40; i++) {
        train->y[i] = i % 2;
        for (int j = 0; j < 4; j++)
            train->x[(size_t)i * 4 + j] = (float)((i % 2) * 0.5 + 0.1 * j);
    }
    cJSON *mj = cJSON_Parse("{\"name\":\"logreg\"}");
    cJSON *fj = cJSON_Parse("{\"clients\": 4, \"sample_rate\": 0.5, \"rounds\": 2}");
    cJSON *dj = cJSON_Parse("{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1}");
    DataShape in = {1, 2, 2, 2, 0};
    Model *m = model_create(mj, "model", &in, backend_cpu(), NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(model_init(m, 7, NULL), FP_OK);
    DefenseOps ops = *defense_find("gaussian-dpfedavg");
    for (int broken = 0; broken < 2; broken++) {
        if (broken)
            ops.describe = oom_describe;
        FedSetup su = {.seed = 7, .threads = 1, .backend = backend_cpu(), .global = m, .train = train,
                       .test = train, .defense = &ops, .defense_json = dj, .quiet = 1};
        FpError err = {0};
        ck_assert_int_eq(fed_config_parse(fj, "federation", &su.cfg, &err), FP_OK);
        Federation *f = fed_create(&su, &err);
        ck_assert_msg(f != NULL, "%s", err.msg);
        cJSON *j = fed_defense_json(f, &err);
        if (!broken) {
            ck_assert_ptr_nonnull(j);
            ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "epsilon_after_all_rounds")));
            cJSON_Delete(j);
        } else {
            ck_assert_ptr_null(j);
            ck_assert_int_eq(err.code, FP_ENOMEM);
            ck_assert_str_eq(err.msg, "out of memory while accounting privacy");
        }
        fed_free(f);
    }
    model_free(m);
    dataset_free(train);
    cJSON_Delete(mj);
    cJSON_Delete(fj);
    cJSON_Delete(dj);
}
END_TEST

Suite *suite_standard_account(void) {
    Suite *s = suite_create("standard_account");
    TCase *tc = tcase_create("sampler");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rounded_table_holds_the_law);
    tcase_add_test(tc, rounded_sampler_passes_moments);
    tcase_add_test(tc, broken_sampler_is_caught);
    suite_add_tcase(s, tc);
    tc = tcase_create("accounts");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, server_noise_meets_standard_account);
    tcase_add_test(tc, dpsgd_meets_pld_account);
    tcase_add_test(tc, describe_out_of_memory_fails);
    tcase_add_test(tc, check_and_export_carry_standard_figures);
    suite_add_tcase(s, tc);
    return s;
}
