// The membership attacks as their authors run them, and what every MIA concludes
// (suite mia_strength): the intervals of AUC and low-FPR TPR (eval/binomial.h), the
// applicability rule and the one-line headline (attacks/mia.h mia_conclude), LiRA's
// augmented query views and two-sided offline score, RMIA's fitted a.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/mia.h"
#include "cli_run.h"
#include "eval/binomial.h"
#include "mia_fixture.h"

static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(v != NULL, "missing \"%s\"", key);
    return v;
}

// The interval [lo, hi] at o[key] (two numbers).
static void interval(const cJSON *o, const char *key, double *lo, double *hi) {
    const cJSON *a = item(o, key);
    ck_assert_msg(cJSON_IsArray(a) && cJSON_GetArraySize(a) == 2, "\"%s\" is not an interval", key);
    *lo = cJSON_GetArrayItem(a, 0)->valuedouble;
    *hi = cJSON_GetArrayItem(a, 1)->valuedouble;
}

// ---------------------------------------------------------------------------------
// Intervals

START_TEST(intervals_known_values) {
    double lo, hi;
    // k = 0 of 100: lo = 0, hi = 1 − (α/2)^(1/n) (the closed form at the edge).
    binom_cp_interval(0, 100, 0.05, &lo, &hi);
    ck_assert_double_eq(lo, 0);
    ck_assert_double_eq_tol(hi, 1 - pow(0.025, 0.01), 1e-9);
    // k = n: the mirror image.
    binom_cp_interval(100, 100, 0.05, &lo, &hi);
    ck_assert_double_eq_tol(lo, pow(0.025, 0.01), 1e-9);
    ck_assert_double_eq(hi, 1);
    // k = 24 of 100 (R: binom.test(24, 100)$conf.int = 0.1602246 0.3357355).
    binom_cp_interval(24, 100, 0.05, &lo, &hi);
    ck_assert_double_eq_tol(lo, 0.1602246, 1e-6);
    ck_assert_double_eq_tol(hi, 0.3357355, 1e-6);
    // Hanley–McNeil at A = ½, 100 + 100: SE² = (¼ + 99/12 + 99/12) / 10⁴.
    binom_auc_interval(0.5, 100, 100, 0.05, &lo, &hi);
    double se = sqrt((0.25 + 2 * 99 / 12.0) / 1e4);
    ck_assert_double_eq_tol(hi - 0.5, 1.959964 * se, 1e-5);
    ck_assert_double_eq_tol(0.5 - lo, 1.959964 * se, 1e-5);
    // A perfect AUC has no spread; the interval stays within [0, 1].
    binom_auc_interval(1.0, 100, 100, 0.05, &lo, &hi);
    ck_assert_double_eq(lo, 1);
    ck_assert_double_eq(hi, 1);
}
END_TEST

// mia_report states the intervals beside the figures, and each holds its figure.
START_TEST(report_states_intervals) {
    enum { n = 400 };
    double score[n];
    int32_t label[n];
    RngStream rs = rng_stream(5, RNG_TEST, 1, 0);
    for (int i = 0; i < n; i++) {
        label[i] = i < n / 2;
        score[i] = rng_next_normal(&rs) + (label[i] ? 1.0 : 0.0);
    }
    cJSON *r = cJSON_CreateObject();
    FpError err = {0};
    ck_assert_int_eq(mia_report(r, score, label, n, NULL, 0.5, "score >= 0.5", &err), FP_OK);
    double lo, hi;
    interval(r, "auc_interval", &lo, &hi);
    ck_assert_double_lt(lo, num(r, "auc"));
    ck_assert_double_gt(hi, num(r, "auc"));
    ck_assert_double_lt(hi - lo, 0.15); // 200 + 200: about ±0.05
    const cJSON *tf = item(r, "tpr_at_fpr"), *ti = item(r, "tpr_at_fpr_interval");
    static const char *const keys[] = {"0.01", "0.001", "0"};
    for (int k = 0; k < 3; k++) {
        interval(ti, keys[k], &lo, &hi);
        double v = num(tf, keys[k]);
        ck_assert_msg(lo <= v && v <= hi, "%s: %g outside [%g, %g]", keys[k], v, lo, hi);
        double l2, h2;
        binom_cp_interval(llround(v * n / 2), n / 2, 0.05, &l2, &h2);
        ck_assert_double_eq_tol(lo, l2, 1e-12);
        ck_assert_double_eq_tol(hi, h2, 1e-12);
    }
    ck_assert_ptr_nonnull(strstr(item(r, "interval_rule")->valuestring, "Clopper-Pearson"));
    cJSON_Delete(r);
}
END_TEST

// ---------------------------------------------------------------------------------
// Applicability

static DefenseOps fake_defense(const char *name) {
    DefenseOps d;
    memset(&d, 0, sizeof d);
    d.name = name;
    return d;
}

// A result with the given AUC interval and TPR-at-1%-FPR interval.
static cJSON *result_with(double auc_lo, double auc_hi, double t_lo, double t_hi) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "auc", 0.5 * (auc_lo + auc_hi));
    const double a[2] = {auc_lo, auc_hi}, t[2] = {t_lo, t_hi};
    cJSON_AddItemToObject(r, "auc_interval", cJSON_CreateDoubleArray(a, 2));
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(r, "tpr_at_fpr"), "0.01", 0.5 * (t_lo + t_hi));
    cJSON_AddItemToObject(cJSON_AddObjectToObject(r, "tpr_at_fpr_interval"), "0.01", cJSON_CreateDoubleArray(t, 2));
    return r;
}

START_TEST(applicability_rule) {
    Experiment ex;
    memset(&ex, 0, sizeof ex);
    DefenseOps none = fake_defense("none"), dp = fake_defense("dp-fedavg");
    AttackEnv env = {.ex = &ex, .quiet = 1};
    // Without a defense the run is its own reference: at chance only when both
    // intervals hold chance (AUC 0.5 and TPR 1%).
    ex.defense = &none;
    struct { double al, ah, tl, th; int applicable; } cases[] = {
        {0.45, 0.56, 0.00, 0.04, 0}, // both at chance
        {0.52, 0.61, 0.00, 0.04, 1}, // AUC above chance
        {0.45, 0.56, 0.02, 0.09, 1}, // TPR at 1% FPR above 1%
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *r = result_with(cases[k].al, cases[k].ah, cases[k].tl, cases[k].th);
        mia_conclude(&env, "lira", r);
        ck_assert_msg(cJSON_IsBool(item(r, "applicable")), "case %zu", k);
        ck_assert_int_eq(cJSON_IsTrue(item(r, "applicable")), cases[k].applicable);
        const cJSON *ap = item(r, "applicability");
        ck_assert_str_eq(item(ap, "reference")->valuestring, "this run (no defense)");
        ck_assert_int_eq(cJSON_GetObjectItem(ap, "verdict") != NULL, !cases[k].applicable);
        cJSON_Delete(r);
    }
    // Under a defense with a matrix's "none" cell handed over: that cell decides.
    ex.defense = &dp;
    cJSON *entry = cJSON_CreateObject();
    cJSON_AddStringToObject(entry, "status", "done");
    cJSON_AddItemToObject(entry, "result", result_with(0.46, 0.55, 0.0, 0.03));
    env.reference_given = 1;
    env.reference = entry;
    env.reference_source = "cell c0";
    cJSON *r = result_with(0.40, 0.48, 0.0, 0.02); // its own figures do not decide
    mia_conclude(&env, "rmia", r);
    ck_assert(cJSON_IsFalse(item(r, "applicable")));
    ck_assert_str_eq(item(item(r, "applicability"), "reference")->valuestring, "cell c0");
    cJSON_Delete(r);
    // A reference that failed, or none at all: undecided (null) with the reason.
    cJSON_ReplaceItemInObject(entry, "status", cJSON_CreateString("failed"));
    r = result_with(0.6, 0.7, 0.1, 0.2);
    mia_conclude(&env, "rmia", r);
    ck_assert(cJSON_IsNull(item(r, "applicable")));
    ck_assert_ptr_nonnull(strstr(item(item(r, "applicability"), "reason")->valuestring, "failed"));
    cJSON_Delete(r);
    env.reference_given = 0;
    env.reference = NULL;
    r = result_with(0.6, 0.7, 0.1, 0.2);
    mia_conclude(&env, "rmia", r);
    ck_assert(cJSON_IsNull(item(r, "applicable")));
    ck_assert_ptr_nonnull(strstr(item(item(r, "applicability"), "reason")->valuestring, "defense none"));
    cJSON_Delete(r);
    cJSON_Delete(entry);
}
END_TEST

// End to end: every MIA decides its applicability from its own undefended run: an
// untrained target (lr 1e-7) is at chance for all of them, an overfit one is not.
START_TEST(e2e_every_mia_flags_chance) {
    static const char *const names[] = {"basic-mia", "ml-leaks", "cs-mia", "lira", "rmia"};
    static const char *const opts[] = {"{}", "{}", "{}", "{\"shadow_models\": 4}", "{\"shadow_models\": 4}"};
    for (int trained = 0; trained < 2; trained++) {
        Fixture fx;
        fixture_open(&fx, trained ? 0.1 : 1e-7, 100);
        AttackCache *cache = attack_cache_create();
        for (int i = 0; i < 5; i++) {
            cJSON *r = run_attack(&fx, names[i], opts[i], cache);
            const cJSON *ap = item(r, "applicable");
            ck_assert_msg(cJSON_IsBool(ap), "%s", names[i]);
            ck_assert_msg(cJSON_IsTrue(ap) == trained, "%s (trained %d): applicable %d, auc %g", names[i], trained,
                          cJSON_IsTrue(ap), num(r, "auc"));
            cJSON_Delete(r);
        }
        attack_cache_free(cache);
        fixture_close(&fx);
    }
}
END_TEST

// `fedpriv attack` ends with the headline: AUC and TPR at 1% and 0.1% FPR with their
// intervals, one printable line; at chance a second line says "not applicable".
START_TEST(cli_prints_headline) {
    SKIP_UNLESS_BIN();
    char dir[512], csv[600], cfg[700], out[700];
    make_tmpdir(dir, sizeof dir);
    snprintf(csv, sizeof csv, "%s/mixture.csv", dir);
    write_mixture_csv(csv, 1200);
    for (int trained = 0; trained < 2; trained++) {
        snprintf(cfg, sizeof cfg, "%s/c%d.json", dir, trained);
        FILE *f = fopen(cfg, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"mlp\", "
                   "\"hidden\": [64]}, \"federation\": {\"clients\": 2, \"rounds\": 3, \"local_epochs\": 15, "
                   "\"samples_per_client\": 100, \"batch_size\": 20, \"lr\": %g, \"momentum\": 0.9}, \"threads\": 1}",
                csv, trained ? 0.1 : 1e-7);
        fclose(f);
        snprintf(out, sizeof out, "%s/out%d", dir, trained);
        const char *args[] = {"attack", "basic-mia", "--config", cfg, "--out", out, NULL};
        static char so[1 << 16], se[1 << 16];
        int rc = cli_run(args, so, se, sizeof so);
        SKIP_WITHOUT_BIN(rc);
        ck_assert_msg(rc == 0, "rc %d: %s", rc, se);
        const char *h = strstr(se, "basic-mia: AUC ");
        ck_assert_msg(h != NULL, "no headline in: %s", se);
        const char *eol = strchr(h, '\n');
        ck_assert_ptr_nonnull(eol);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(eol - h + 1), h);
        ck_assert_ptr_null(cli_unclean_line(line));
        ck_assert_msg(strstr(line, "] at 1% FPR, ") && strstr(line, "] at 0.1% FPR (100 members, 100 non-members)"),
                      "%s", line);
        ck_assert_int_eq(strstr(se, "basic-mia: not applicable: it is at chance without any defense") != NULL,
                         !trained);
    }
    remove_tree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------
// LiRA

// The view-combined scores against direct formulas: one-sided = mean of the views'
// z-scores, two-sided = −mean of log N(φ; μ_out, σ_out²) (the normaliser's −½ log 2π left
// out), online = mean of the views' log likelihood ratios.
START_TEST(lira_views_match_direct_formulas) {
    enum { n = 2, N = 4, A = 3 };
    double obs[n * A], refs[N * n * A];
    unsigned char out[N * n] = {0}, half[N * n];
    RngStream rs = rng_stream(8, RNG_TEST, 2, 0);
    for (int i = 0; i < n * A; i++)
        obs[i] = rng_next_normal(&rs);
    for (int i = 0; i < N * n * A; i++)
        refs[i] = rng_next_normal(&rs);
    for (int j = 0; j < N; j++)
        for (int i = 0; i < n; i++)
            half[j * n + i] = (j + i) % 2 ? MIA_Q_IN : MIA_Q_OUT;
    double one[n], two[n], onl[n], sigma;
    FpError err = {0};
    ck_assert_int_eq(mia_lira_scores(obs, refs, out, n, N, &(MiaLiraScoring){.n_aug = A}, one, &sigma, &err), FP_OK);
    ck_assert_int_eq(mia_lira_scores(obs, refs, out, n, N, &(MiaLiraScoring){.two_sided = 1, .n_aug = A}, two, &sigma,
                                     &err), FP_OK);
    ck_assert_int_eq(mia_lira_scores(obs, refs, half, n, N, &(MiaLiraScoring){.online = 1, .n_aug = A}, onl, &sigma,
                                     &err), FP_OK);
    for (int i = 0; i < n; i++) {
        double z = 0, nlp = 0, llr = 0;
        for (int a = 0; a < A; a++) {
            double s[2] = {0}, ss[2] = {0}, k[2] = {0};
            double m = 0, v = 0;
            for (int j = 0; j < N; j++)
                m += refs[(j * n + i) * A + a] / N;
            for (int j = 0; j < N; j++)
                v += pow(refs[(j * n + i) * A + a] - m, 2) / N;
            double x = obs[i * A + a];
            z += (x - m) / sqrt(v) / A;
            nlp += (0.5 * pow((x - m) / sqrt(v), 2) + log(sqrt(v))) / A;
            for (int j = 0; j < N; j++) {
                int in = half[j * n + i] == MIA_Q_IN;
                s[in] += refs[(j * n + i) * A + a];
                k[in]++;
            }
            double mu[2] = {s[0] / k[0], s[1] / k[1]};
            for (int j = 0; j < N; j++) {
                int in = half[j * n + i] == MIA_Q_IN;
                ss[in] += pow(refs[(j * n + i) * A + a] - mu[in], 2) / k[in];
            }
            double lin = -0.5 * pow((x - mu[1]) / sqrt(ss[1]), 2) - log(sqrt(ss[1]));
            double lout = -0.5 * pow((x - mu[0]) / sqrt(ss[0]), 2) - log(sqrt(ss[0]));
            llr += (lin - lout) / A;
        }
        ck_assert_double_eq_tol(one[i], z, 1e-12);
        ck_assert_double_eq_tol(two[i], nlp, 1e-12);
        ck_assert_double_eq_tol(onl[i], llr, 1e-12);
    }
    // The two-sided score ranks a far-below value as a member, the one-sided does not.
    double lo_obs[n * A], s1[n], s2[n];
    memcpy(lo_obs, obs, sizeof obs);
    for (int a = 0; a < A; a++)
        lo_obs[a] = -50; // candidate 0: far below every OUT value
    mia_lira_scores(lo_obs, refs, out, n, N, &(MiaLiraScoring){.n_aug = A}, s1, &sigma, &err);
    mia_lira_scores(lo_obs, refs, out, n, N, &(MiaLiraScoring){.two_sided = 1, .n_aug = A}, s2, &sigma, &err);
    ck_assert_double_lt(s1[0], s1[1]);
    ck_assert_double_gt(s2[0], s2[1]);
}
END_TEST

// Image data get 2 mirrors × 9 shifts = 18 views, view 0 the sample itself and view 9
// its mirror; other data one view.
START_TEST(query_views_of_images) {
    FpError err = {0};
    Dataset *img = dataset_create("img", 2, 1, 28, 28, 3, 0, &err);
    ck_assert_ptr_nonnull(img);
    Dataset *tab = dataset_create("tab", 2, 1, 1, 20, 3, 0, &err);
    ck_assert_ptr_nonnull(tab);
    int shift;
    ck_assert_int_eq(mia_query_views(img, &shift), 18);
    ck_assert_int_eq(shift, 4);
    ck_assert_int_eq(mia_query_views(tab, &shift), 1);
    ck_assert_int_eq(shift, 0);
    dataset_free(img);
    dataset_free(tab);
}
END_TEST

START_TEST(lira_option_checks) {
    Fixture fx;
    fixture_open(&fx, 0.1, 100);
    const AttackOps *ops = attack_find("lira");
    struct { const char *json, *needle; } bad[] = {
        {"{\"offline_score\": \"two-sided\", \"alpha\": 0.1}", "attack.alpha"},
        {"{\"variant\": \"online\", \"offline_score\": \"one-sided\"}", "attack.offline_score"},
        {"{\"offline_score\": \"three-sided\"}", "attack.offline_score"},
        {"{\"augment\": 1}", "attack.augment"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cJSON *aj = cJSON_Parse(bad[k].json);
        AttackEnv env = {.ex = &fx.ex, .attack_json = aj, .path = "attack", .out_dir = fx.dir, .quiet = 1};
        FpError err = {0};
        ck_assert_int_eq(ops->validate(&env, &err), FP_EPARAM);
        ck_assert_msg(strstr(err.msg, bad[k].needle), "%s: %s", bad[k].json, err.msg);
        cJSON_Delete(aj);
    }
    // Tabular data: "augment" scores the sample alone, and says why.
    cJSON *r = run_attack(&fx, "lira", "{\"shadow_models\": 4, \"augment\": true, \"offline_score\": \"two-sided\"}",
                          NULL);
    const cJSON *qv = item(r, "query_views");
    ck_assert_int_eq((int)num(qv, "views"), 1);
    ck_assert_ptr_nonnull(strstr(item(qv, "augment")->valuestring, "not image data"));
    ck_assert_ptr_nonnull(strstr(item(r, "variant")->valuestring, "two-sided"));
    ck_assert_ptr_null(cJSON_GetObjectItem(r, "alpha"));
    cJSON_Delete(r);
    fixture_close(&fx);
}
END_TEST

// ---------------------------------------------------------------------------------
// RMIA

// "offline_a" is fitted by default (reference model 0 as the target, over the
// population queries); a given value is kept.
START_TEST(rmia_fits_a) {
    Fixture fx;
    fixture_open(&fx, 0.1, 100);
    AttackCache *cache = attack_cache_create();
    cJSON *r = run_attack(&fx, "rmia", "{\"shadow_models\": 4}", cache);
    const cJSON *fit = item(r, "offline_a_fit");
    ck_assert(cJSON_IsTrue(item(fit, "fitted")));
    ck_assert_int_ge((int)num(fit, "members"), 20);
    ck_assert_int_ge((int)num(fit, "non_members"), 20);
    double a = num(r, "offline_a"), fit_auc = num(fit, "auc");
    ck_assert(a >= 0 && a <= 1);
    ck_assert(fit_auc > 0.5 && fit_auc <= 1); // an overfit reference model's members show
    cJSON_Delete(r);
    r = run_attack(&fx, "rmia", "{\"shadow_models\": 4, \"offline_a\": 0.3}", cache);
    ck_assert_double_eq(num(r, "offline_a"), 0.3);
    ck_assert_str_eq(item(item(r, "offline_a_fit"), "rule")->valuestring, "given (\"offline_a\")");
    cJSON_Delete(r);
    // One reference model leaves none to fit on: a = 0.3 kept, said.
    r = run_attack(&fx, "rmia", "{\"shadow_models\": 1}", cache);
    ck_assert(cJSON_IsFalse(item(item(r, "offline_a_fit"), "fitted")));
    ck_assert_double_eq(num(r, "offline_a"), 0.3);
    cJSON_Delete(r);
    cJSON *aj = cJSON_Parse("{\"offline_a\": \"tuned\"}");
    AttackEnv env = {.ex = &fx.ex, .attack_json = aj, .path = "attack", .out_dir = fx.dir, .quiet = 1};
    FpError err = {0};
    ck_assert_int_eq(attack_find("rmia")->validate(&env, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "attack.offline_a"));
    cJSON_Delete(aj);
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

Suite *suite_mia_strength(void) {
    Suite *s = suite_create("mia_strength");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, intervals_known_values);
    tcase_add_test(t, report_states_intervals);
    tcase_add_test(t, applicability_rule);
    tcase_add_test(t, lira_views_match_direct_formulas);
    tcase_add_test(t, query_views_of_images);
    tcase_add_test(t, lira_option_checks);
    tcase_add_test(t, rmia_fits_a);
    tcase_add_test(t, e2e_every_mia_flags_chance);
    tcase_add_test(t, cli_prints_headline);
    suite_add_tcase(s, t);
    return s;
}
