// Membership inference (attacks/target.h and the basic-mia, ml-leaks, cs-mia and lira
// attacks): per-sample features against direct formulas, the metrics against the ROC
// fixtures computed by an independent numpy implementation (fixtures/roc/), the attack
// model on a separable problem, tiny end-to-end attacks on a synthetic CSV of heavily
// overlapping classes (a target trained long on few samples overfits, so membership must
// show) and on an untrained target (where it must not), the shared target cache, and bad configs
// (library validation, and through $FEDPRIV_BIN when set).
#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/attack_registry.h"
#include "attacks/target.h"
#include "core/jsonv.h"
#include "tests/mia_fixture.h"

// ---------------------------------------------------------------------------------
// Features

START_TEST(features_match_direct_formulas) {
    // Moderate logits, where the direct double-precision formulas are accurate.
    const float z[5] = {1.5f, -0.25f, 0.75f, 2.0f, -1.0f};
    double e[5], s = 0;
    for (int c = 0; c < 5; c++)
        s += e[c] = exp(z[c]);
    for (int y = 0; y < 5; y++) {
        double py = e[y] / s;
        ck_assert_double_eq_tol(mia_phi(z, 5, y), log(py / (1 - py)), 1e-12);
        ck_assert_double_eq_tol(mia_loss_of_phi(mia_phi(z, 5, y)), -log(py), 1e-12);
        double mentr = -(1 - py) * log(py);
        for (int i = 0; i < 5; i++)
            if (i != y)
                mentr -= e[i] / s * log(1 - e[i] / s);
        ck_assert_double_eq_tol(mia_mentr(z, 5, y), mentr, 1e-12);
    }
    float top[3];
    mia_top_probs(z, 5, 3, top);
    ck_assert_float_eq_tol(top[0], (float)(e[3] / s), 1e-6f);
    ck_assert_float_eq_tol(top[1], (float)(e[0] / s), 1e-6f);
    ck_assert_float_eq_tol(top[2], (float)(e[2] / s), 1e-6f);
    mia_top_logodds(z, 5, 3, top);
    ck_assert_float_eq_tol(top[0], (float)log(e[3] / (s - e[3])), 1e-5f);
    ck_assert_float_eq_tol(top[2], (float)log(e[2] / (s - e[2])), 1e-5f);
    float pad[7];
    mia_top_probs(z, 5, 7, pad); // more than the classes: zero posteriors
    ck_assert_float_eq(pad[5], 0.0f);
    ck_assert_float_eq(pad[6], 0.0f);
    // Saturated logits: the float softmax says p_y = 1 exactly, φ still resolves.
    const float big[3] = {40.0f, 0.0f, 1.0f};
    ck_assert_double_eq_tol(mia_phi(big, 3, 0), 40.0 - log(exp(0.0) + exp(1.0)), 1e-9);
    ck_assert_double_gt(mia_loss_of_phi(mia_phi(big, 3, 0)), 0);
    ck_assert_double_eq_tol(mia_phi(big, 3, 1), -40.0, 1e-6);
}
END_TEST

// ---------------------------------------------------------------------------------
// Metrics against the fixtures

static void check_metrics_case(const cJSON *c) {
    const cJSON *sc = cJSON_GetObjectItem(c, "scores"), *lb = cJSON_GetObjectItem(c, "labels");
    int n = cJSON_GetArraySize(sc);
    double *s = malloc(sizeof(double) * n);
    int32_t *l = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) {
        s[i] = cJSON_GetArrayItem(sc, i)->valuedouble;
        l[i] = cJSON_GetArrayItem(lb, i)->valueint;
    }
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *tf = cJSON_GetObjectItem(c, "tpr_at_fpr");
    // Each confusion entry: decisions "member iff score >= threshold".
    const cJSON *conf;
    cJSON_ArrayForEach(conf, cJSON_GetObjectItem(c, "confusion")) {
        cJSON *r = cJSON_CreateObject();
        FpError err = {0};
        ck_assert_int_eq(mia_report(r, s, l, n, NULL, num(conf, "threshold"), "test", &err), FP_OK);
        ck_assert_msg(fabs(num(r, "auc") - num(c, "auc")) < 1e-12, "%s: auc %.15g vs %.15g", name, num(r, "auc"),
                      num(c, "auc"));
        const cJSON *rt = cJSON_GetObjectItem(r, "tpr_at_fpr");
        ck_assert_double_eq_tol(num(rt, "0.01"), num(tf, "0.01"), 1e-12);
        ck_assert_double_eq_tol(num(rt, "0.001"), num(tf, "0.001"), 1e-12);
        ck_assert_double_eq_tol(num(r, "best_balanced_accuracy"), num(c, "best_balanced_accuracy"), 1e-12);
        ck_assert_double_eq_tol(num(r, "best_advantage"), num(c, "advantage"), 1e-12);
        ck_assert_double_eq_tol(num(r, "precision"), num(conf, "precision"), 1e-12);
        ck_assert_double_eq_tol(num(r, "recall"), num(conf, "recall"), 1e-12);
        double P = num(conf, "tp") + num(conf, "fn"), N = num(conf, "tn") + num(conf, "fp");
        double bacc = 0.5 * (num(conf, "tp") / P + num(conf, "tn") / N);
        ck_assert_double_eq_tol(num(r, "balanced_accuracy"), bacc, 1e-12);
        ck_assert_double_eq_tol(num(r, "advantage"), num(conf, "tp") / P - num(conf, "fp") / N, 1e-12);
        // The unthinned points equal the fixture's, when it lists them.
        const cJSON *ff = cJSON_GetObjectItem(c, "fpr");
        if (ff && num(c, "n_points") <= 200) {
            const cJSON *roc = cJSON_GetObjectItem(r, "roc");
            ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(roc, "fpr")), (int)num(c, "n_points"));
            for (int i = 0; i < (int)num(c, "n_points"); i++) {
                ck_assert_double_eq_tol(cJSON_GetArrayItem(cJSON_GetObjectItem(roc, "fpr"), i)->valuedouble,
                                        cJSON_GetArrayItem(ff, i)->valuedouble, 1e-12);
                ck_assert_double_eq_tol(cJSON_GetArrayItem(cJSON_GetObjectItem(roc, "tpr"), i)->valuedouble,
                                        cJSON_GetArrayItem(cJSON_GetObjectItem(c, "tpr"), i)->valuedouble, 1e-12);
            }
        }
        cJSON_Delete(r);
    }
    free(s);
    free(l);
}

// The "tiny-ties" case of fixtures/roc/reference.json, inline so that this test runs
// anywhere (values from the numpy reference in tools/make-metric-fixtures.py).
static const char tiny_ties[] =
    "{\"name\": \"tiny-ties\", \"scores\": [0.9, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.4, 0.3, 0.1, 0.8, 0.2],"
    " \"labels\": [1, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0], \"n_points\": 9, \"auc\": 0.8055555555555556,"
    " \"tpr_at_fpr\": {\"0.001\": 0.16666666666666666, \"0.01\": 0.16666666666666666},"
    " \"best_balanced_accuracy\": 0.75, \"advantage\": 0.5, \"confusion\": ["
    " {\"threshold\": 0.6, \"tp\": 5, \"fp\": 3, \"tn\": 3, \"fn\": 1, \"precision\": 0.625, \"recall\": 0.8333333333333334},"
    " {\"threshold\": 0.9, \"tp\": 1, \"fp\": 0, \"tn\": 6, \"fn\": 5, \"precision\": 1.0, \"recall\": 0.16666666666666666},"
    " {\"threshold\": 0.1, \"tp\": 6, \"fp\": 6, \"tn\": 0, \"fn\": 0, \"precision\": 0.5, \"recall\": 1.0}]}";

START_TEST(metrics_match_fixtures) {
    cJSON *c = cJSON_Parse(tiny_ties);
    ck_assert_ptr_nonnull(c);
    check_metrics_case(c);
    // TPR at FPR 0: members ranked above every non-member. Here only the 0.9 (a member)
    // beats the first non-member (0.8, tied with two members): 1 of 6.
    {
        const cJSON *sc = cJSON_GetObjectItem(c, "scores"), *lb = cJSON_GetObjectItem(c, "labels");
        double s[12];
        int32_t l[12];
        for (int i = 0; i < 12; i++) {
            s[i] = cJSON_GetArrayItem(sc, i)->valuedouble;
            l[i] = cJSON_GetArrayItem(lb, i)->valueint;
        }
        cJSON *r = cJSON_CreateObject();
        ck_assert_int_eq(mia_report(r, s, l, 12, NULL, 0.5, "test", NULL), FP_OK);
        ck_assert_double_eq_tol(num(cJSON_GetObjectItem(r, "tpr_at_fpr"), "0"), 1.0 / 6, 1e-15);
        cJSON_Delete(r);
    }
    cJSON_Delete(c);
    cJSON *all = NULL;
    if (jv_load_file("fixtures/roc/reference.json", &all, NULL) != FP_OK) {
        printf("SKIP: metrics_match_fixtures beyond tiny-ties (run from the repository root)\n");
        return;
    }
    const cJSON *cs;
    int count = 0;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItem(all, "cases")) {
        check_metrics_case(cs);
        count++;
    }
    ck_assert_int_ge(count, 4);
    cJSON_Delete(all);
}
END_TEST

START_TEST(roc_thinning_keeps_low_fpr) {
    // 5000 + 5000 scores with a shifted member distribution: 10001 ROC points.
    int n = 10000;
    double *s = malloc(sizeof(double) * n);
    int32_t *l = malloc(sizeof(int32_t) * n);
    RngStream rs = rng_stream(5, RNG_TEST, 6, 0);
    for (int i = 0; i < n; i++) {
        l[i] = i < n / 2;
        s[i] = rng_next_normal(&rs) + (l[i] ? 1.0 : 0.0);
    }
    cJSON *r = cJSON_CreateObject();
    FpError err = {0};
    ck_assert_int_eq(mia_report(r, s, l, n, NULL, 0.5, "test", &err), FP_OK);
    check_result_shape(r, n / 2);
    const cJSON *roc = cJSON_GetObjectItem(r, "roc");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(roc, "thinned")));
    ck_assert_int_eq((int)num(roc, "points_total"), n + 1);
    // The kept points include the ones TPR at 0.1% and 1% FPR are read from.
    const cJSON *fpr = cJSON_GetObjectItem(roc, "fpr"), *tpr = cJSON_GetObjectItem(roc, "tpr");
    const cJSON *tf = cJSON_GetObjectItem(r, "tpr_at_fpr");
    const char *keys[2] = {"0.001", "0.01"};
    double ts[2] = {0.001, 0.01};
    for (int q = 0; q < 2; q++) {
        double best = 0;
        int low = 0;
        for (int i = 0; i < cJSON_GetArraySize(fpr); i++)
            if (cJSON_GetArrayItem(fpr, i)->valuedouble <= ts[q]) {
                best = cJSON_GetArrayItem(tpr, i)->valuedouble;
                low++;
            }
        ck_assert_double_eq(best, num(tf, keys[q]));
        // The low-FPR region is resolved: every FPR level k/5000 up to 0.1% is kept (6),
        // and at least 20 points up to 1%.
        ck_assert_int_ge(low, q == 0 ? 6 : 20);
    }
    cJSON_Delete(r);
    free(s);
    free(l);
}
END_TEST

START_TEST(best_threshold_separates) {
    const double s[6] = {0.1, 0.2, 0.3, 0.7, 0.8, 0.9};
    const int32_t l[6] = {0, 0, 0, 1, 1, 1};
    double acc;
    double tau = mia_best_threshold(s, l, 6, &acc);
    ck_assert_double_eq(acc, 1.0);
    ck_assert_double_eq_tol(tau, 0.5, 1e-15);
    const int32_t flipped[6] = {1, 1, 1, 0, 0, 0}; // nothing beats predicting no member at all
    tau = mia_best_threshold(s, flipped, 6, &acc);
    ck_assert_double_eq(acc, 0.5);
}
END_TEST

// ---------------------------------------------------------------------------------
// The attack model

START_TEST(attack_mlp_learns_and_is_deterministic) {
    // 2-D features: members around (+0.5, +0.5), non-members around (−0.5, −0.5), sd 0.3.
    int n = 400;
    float *x = malloc(sizeof(float) * 2 * n);
    int32_t *y = malloc(sizeof(int32_t) * n);
    RngStream rs = rng_stream(8, RNG_TEST, 7, 0);
    for (int i = 0; i < n; i++) {
        y[i] = i % 2;
        for (int k = 0; k < 2; k++)
            x[2 * i + k] = (float)((y[i] ? 0.5 : -0.5) + 0.3 * rng_next_normal(&rs));
    }
    MiaMlpConfig c = {.hidden = 16, .epochs = 20, .batch_size = 10, .lr = 0.05, .momentum = 0.9};
    double *s1 = malloc(sizeof(double) * n), *s2 = malloc(sizeof(double) * n);
    FpError err = {0};
    // Train on the first half, score the second.
    ck_assert_int_eq(mia_mlp_scores(2, x, y, n / 2, x + n, n / 2, &c, 11, 1, s1, &err), FP_OK);
    ck_assert_int_eq(mia_mlp_scores(2, x, y, n / 2, x + n, n / 2, &c, 11, 1, s2, &err), FP_OK);
    int correct = 0;
    for (int i = 0; i < n / 2; i++) {
        ck_assert_double_eq(s1[i], s2[i]);
        correct += (s1[i] >= 0) == (y[n / 2 + i] == 1);
    }
    // Bayes accuracy is Φ(0.5·√2/0.3) ≈ 0.9907; 0.95 leaves room for a finite model.
    ck_assert_int_ge(correct, (int)(0.95 * n / 2));
    free(x);
    free(y);
    free(s1);
    free(s2);
}
END_TEST

// ---------------------------------------------------------------------------------
// End to end

// Null-hypothesis spread of the AUC of m members against m non-members (Mann-Whitney):
// sd = sqrt((2m + 1) / (12 m²)). A leak is asserted at 6 sd above 0.5.
static double auc_6sd(int m) { return 6.0 * sqrt((2.0 * m + 1) / (12.0 * m * (double)m)); }

START_TEST(e2e_overfit_target_leaks_and_cache_shares) {
    Fixture fx;
    fixture_open(&fx, 0.1, 100);
    AttackCache *cache = attack_cache_create();
    cJSON *b = run_attack(&fx, "basic-mia", "{}", cache);
    cJSON *l = run_attack(&fx, "ml-leaks", "{}", cache);
    cJSON *z = run_attack(&fx, "lira", "{\"shadow_models\": 8}", cache);
    cJSON *rs[3] = {b, l, z};
    for (int i = 0; i < 3; i++) {
        // The global target's eval members: client 0's 100 samples (client 1 is CS-MIA's adversary).
        check_result_shape(rs[i], 100);
        const cJSON *t = cJSON_GetObjectItem(rs[i], "target");
        ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItem(t, "shared_from_earlier_attack")), i > 0);
        ck_assert_double_eq(num(t, "train_seconds"), num(cJSON_GetObjectItem(b, "target"), "train_seconds"));
        ck_assert_double_gt(num(t, "train_accuracy"), num(t, "test_accuracy") + 0.3); // overfit
        const cJSON *tm = cJSON_GetObjectItem(rs[i], "timing");
        ck_assert_double_ge(num(tm, "shadow_train_seconds"), 0);
        ck_assert_double_ge(num(tm, "attack_seconds"), 0);
    }
    // The label-aware attacks must see the members (ML-Leaks, label-free, is weaker:
    // its own leak check is on a larger set below).
    ck_assert_msg(num(b, "auc") > 0.5 + auc_6sd(100), "basic-mia auc %g", num(b, "auc"));
    ck_assert_msg(num(z, "auc") > 0.5 + auc_6sd(100), "lira auc %g", num(z, "auc"));
    ck_assert_int_eq((int)num(z, "shadow_models"), 8);
    const cJSON *dj = cJSON_GetObjectItem(cJSON_GetObjectItem(b, "target"), "defense");
    ck_assert_str_eq(cJSON_GetObjectItem(dj, "name")->valuestring, "none");
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(dj, "privacy"));
    ck_assert_double_eq(num(cJSON_GetObjectItem(z, "global_threshold"), "auc"), num(b, "auc"));
    // The same attack without the cache trains its own target: the same numbers.
    cJSON *b2 = run_attack(&fx, "basic-mia", "{}", NULL);
    ck_assert_double_eq(num(b2, "auc"), num(b, "auc"));
    ck_assert_double_eq(num(b2, "balanced_accuracy"), num(b, "balanced_accuracy"));
    ck_assert(!cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(b2, "target"), "shared_from_earlier_attack")));
    cJSON_Delete(b2);
    for (int i = 0; i < 3; i++)
        cJSON_Delete(rs[i]);
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

START_TEST(e2e_lira_independent_of_threads) {
    // Shadows train in parallel workers; the numbers must not depend on how many.
    Fixture fx;
    fixture_open(&fx, 0.1, 100);
    cJSON *r[2];
    for (int k = 0; k < 2; k++) {
        fx.ex.threads = k + 1;
        r[k] = run_attack(&fx, "lira", "{\"shadow_models\": 3}", NULL);
    }
    ck_assert_double_eq(num(r[0], "auc"), num(r[1], "auc"));
    ck_assert_double_eq(num(r[0], "pooled_sigma"), num(r[1], "pooled_sigma"));
    ck_assert(cJSON_Compare(cJSON_GetObjectItem(r[0], "roc"), cJSON_GetObjectItem(r[1], "roc"), 1));
    ck_assert(cJSON_Compare(cJSON_GetObjectItem(r[0], "tpr_at_fpr"), cJSON_GetObjectItem(r[1], "tpr_at_fpr"), 1));
    cJSON_Delete(r[0]);
    cJSON_Delete(r[1]);
    fixture_close(&fx);
}
END_TEST

START_TEST(e2e_cs_mia_series_and_client_target) {
    Fixture fx;
    fixture_open(&fx, 0.1, 100);
    cJSON *r = run_attack(&fx, "cs-mia", "{\"members\": 80}", NULL);
    check_result_shape(r, 80);
    const cJSON *se = cJSON_GetObjectItem(r, "series");
    ck_assert_int_eq((int)num(se, "rounds"), 3);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(se, "member_mean")), 3);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(se, "samples")), 20);
    // Overfit: members' final-round confidence exceeds non-members'.
    double mm = cJSON_GetArrayItem(cJSON_GetObjectItem(se, "member_mean"), 2)->valuedouble;
    double nm = cJSON_GetArrayItem(cJSON_GetObjectItem(se, "non_member_mean"), 2)->valuedouble;
    ck_assert_double_gt(mm, nm + 0.2);
    ck_assert_msg(num(r, "auc") > 0.5 + auc_6sd(80), "cs-mia auc %g", num(r, "auc"));
    // The CSV holds every series: a header, 2·80 eval rows and 2·100 adversary rows.
    char p[700], line[4096];
    snprintf(p, sizeof p, "%s/cs_mia_series.csv", fx.dir);
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    int lines = 0;
    while (fgets(line, sizeof line, f))
        lines++;
    fclose(f);
    ck_assert_int_eq(lines, 1 + 160 + 200);
    cJSON_Delete(r);
    // A client's model as the server receives it is a target too.
    r = run_attack(&fx, "basic-mia", "{\"target\": \"client\", \"target_client\": 1}", NULL);
    check_result_shape(r, 100);
    const cJSON *t = cJSON_GetObjectItem(r, "target");
    ck_assert_str_eq(cJSON_GetObjectItem(t, "kind")->valuestring, "client");
    ck_assert_int_eq((int)num(t, "from_round"), 3);
    ck_assert_msg(num(r, "auc") > 0.5 + auc_6sd(100), "client target auc %g", num(r, "auc"));
    // Without a defense the upload is the local model: "raw" attacks the same weights.
    cJSON *raw = run_attack(&fx, "basic-mia", "{\"target\": \"client\", \"target_client\": 1, "
                                             "\"client_model\": \"raw\"}", NULL);
    ck_assert_double_eq(num(raw, "auc"), num(r, "auc"));
    ck_assert_double_eq(num(cJSON_GetObjectItem(raw, "target"), "train_loss"),
                        num(cJSON_GetObjectItem(r, "target"), "train_loss"));
    cJSON_Delete(raw);
    cJSON_Delete(r);
    fixture_close(&fx);
}
END_TEST

START_TEST(e2e_ml_leaks_on_central_target) {
    // 2 × 300 samples trained centrally for 120 epochs (60 left the log-odds attack at
    // 0.56 on some CPUs: too close to chance to be a test): 600 members, so 6 sd is 0.10.
    Fixture fx;
    fixture_open(&fx, 0.1, 300);
    AttackCache *cache = attack_cache_create();
    const char *opts[2] = {"{\"target\": \"central\", \"central_epochs\": 120}",
                           "{\"target\": \"central\", \"central_epochs\": 120, \"features\": \"logodds\"}"};
    for (int k = 0; k < 2; k++) {
        cJSON *r = run_attack(&fx, "ml-leaks", opts[k], cache);
        check_result_shape(r, 600);
        ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "target"), "kind")->valuestring, "central");
        ck_assert_msg(num(r, "auc") > 0.5 + auc_6sd(600), "ml-leaks auc %g", num(r, "auc"));
        ck_assert_int_eq((int)num(cJSON_GetObjectItem(r, "shadow"), "members"), 600);
        cJSON_Delete(r);
    }
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

START_TEST(e2e_untrained_target_does_not_leak) {
    // lr 1e-7: the models stay at their initialisation, so no attack may find members
    // (100 + 100 samples: AUC within 6 sd of 0.5; a fixed decision rule's balanced
    // accuracy has sd <= sqrt(0.25/100)/√2·√2 = 0.05 → 6 sd = 0.3, we ask 0.25).
    Fixture fx;
    fixture_open(&fx, 1e-7, 100);
    AttackCache *cache = attack_cache_create();
    const char *names[7] = {"basic-mia", "ml-leaks", "lira", "cs-mia", "rmia", "lira", "rmia"};
    const char *opts[7] = {"{}", "{}", "{\"shadow_models\": 4}", "{}", "{\"shadow_models\": 4}",
                           "{\"shadow_models\": 4, \"variant\": \"online\"}",
                           "{\"shadow_models\": 4, \"variant\": \"online\"}"};
    for (int i = 0; i < 7; i++) {
        cJSON *r = run_attack(&fx, names[i], opts[i], cache);
        check_result_shape(r, 100);
        ck_assert_msg(fabs(num(r, "auc") - 0.5) < auc_6sd(100), "%s auc %g", names[i], num(r, "auc"));
        ck_assert_msg(fabs(num(r, "balanced_accuracy") - 0.5) < 0.25, "%s bacc %g", names[i],
                      num(r, "balanced_accuracy"));
        cJSON_Delete(r);
    }
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

// ---------------------------------------------------------------------------------
// Bad configs

// The global target's members are records of clients that took part: with 2 of 8
// clients sampled per round, a client never sampled trains on nothing and none of its
// records is a member; with a defense's self-sampling (Adaptive-Harmony, Alg. 4) a drawn
// member whose client refused every time is dropped with one non-member, and the series
// rows follow (CS-MIA).
START_TEST(global_target_members_took_part) {
    char dir[512], csv[600], cfg[2048];
    make_tmpdir(dir, sizeof dir);
    snprintf(csv, sizeof csv, "%s/mixture.csv", dir);
    write_mixture_csv(csv, 1200);
    const char *defenses[] = {"{\"name\": \"none\"}",
                              "{\"name\": \"adaptive-harmony\", \"epsilon\": 2, \"clip\": 1}"};
    for (int d = 0; d < 2; d++) {
        snprintf(cfg, sizeof cfg,
                 "{\"seed\": 4, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
                 " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
                 " \"federation\": {\"clients\": 8, \"sample_rate\": 0.25, \"rounds\": 3, \"samples_per_client\": 40,"
                 " \"batch_size\": 20, \"lr\": 0.1}, \"defense\": %s, \"threads\": 2}",
                 csv, defenses[d]);
        cJSON *root = cJSON_Parse(cfg), *aj = cJSON_Parse("{\"name\": \"cs-mia\"}");
        Experiment ex;
        FpError err = {0};
        ck_assert_msg(experiment_load(root, NULL, "cpu", 2, defense_find, &ex, &err) == FP_OK, "%s", err.msg);
        AttackEnv env = {.ex = &ex, .attack_json = aj, .path = "attack", .out_dir = dir, .quiet = 1};
        MiaTargetConfig tc;
        ck_assert_int_eq(mia_target_parse(&env, &tc, &err), FP_OK);
        tc.series = 1;
        MiaTarget *t = NULL;
        ck_assert_msg(mia_target_acquire(&env, &tc, &t, &err) == FP_OK, "%s", err.msg);
        // Who took part: the engine's own count, from a federation with the same sampling
        // (Adaptive-Harmony's self-sampling is stateless: the same clients refuse).
        unsigned char ever[8];
        fed_sampled_clients(&ex.fed, ex.seed, ever);
        Experiment fex = ex;
        fex.model = model_clone(ex.model, ex.backend, &err);
        Federation *f = experiment_federation(&fex, NULL, 1, &err);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fed_run(f, 0, &err), FP_OK);
        int m = t->sz.per_client, sampled = 0, took_part = 0;
        for (int k = 0; k < 7; k++) { // client 7 is CS-MIA's adversary
            sampled += ever[k];
            took_part += fed_client_participations(f, k) > 0;
            ck_assert(fed_client_participations(f, k) == 0 || ever[k]);
        }
        ck_assert_msg(sampled < 7, "every client sampled: the test would not tell"); // seed 4: fixed
        ck_assert_int_eq(t->sz.available, sampled * m);
        int M = t->sz.members;
        ck_assert_int_eq(M + t->sz.members_without_participation, d == 0 ? sampled * m : t->sz.available);
        if (d == 0)
            ck_assert_int_eq(t->sz.members_without_participation, 0);
        else { // seed 4: a sampled client refuses in every round it is sampled
            ck_assert_int_eq(M, took_part * m);
            ck_assert_int_gt(t->sz.members_without_participation, 0);
        }
        for (int i = 0; i < M; i++) {
            int pos = -1;
            for (int j = 0; j < t->sz.n_train && pos < 0; j++)
                pos = t->train_idx[j] == t->eval_idx[i] ? j : -1;
            ck_assert_int_ge(pos, 0);
            ck_assert_int_ne(pos / m, 7);
            ck_assert_msg(fed_client_participations(f, pos / m) > 0, "member %d of client %d", i, pos / m);
        }
        // Non-members are outside the training data; the series holds 2M + 2m rows.
        for (int i = M; i < 2 * M; i++)
            for (int j = 0; j < t->sz.n_train; j++)
                ck_assert_uint_ne(t->train_idx[j], t->eval_idx[i]);
        ck_assert_int_eq(t->n_series, 2 * M + 2 * m);
        // The last round's series row is the final model's p_y on the (compacted) eval set.
        for (int i = 0; i < 2 * M; i++) {
            const float *z = t->eval_logits + (size_t)i * t->n_classes;
            double py = 1.0 / (1.0 + exp(-mia_phi(z, t->n_classes, ex.train->y[t->eval_idx[i]])));
            float got = t->series_py[(size_t)(t->series_rounds - 1) * t->n_series + i];
            ck_assert_msg(fabs(got - py) < 1e-6, "eval row %d: series %g, final model %g", i, got, py);
        }
        fed_free(f);
        model_free(fex.model);
        mia_target_release(&env, t);
        experiment_free(&ex);
        cJSON_Delete(root);
        cJSON_Delete(aj);
    }
    remove_tree(dir);
}
END_TEST

START_TEST(bad_configs_fail_validation) {
    Fixture fx;
    fixture_open(&fx, 0.1, 100);
    struct { const char *attack, *json, *needle; } cases[] = {
        {"ml-leaks", "{\"shadow_size\": 100000}", "attack.shadow_size"},
        {"basic-mia", "{\"shadow_size\": 2000}", "attack.shadow_size"},  // 2000 in + 2000 out > pool
        {"lira", "{\"shadow_size\": 5000}", "attack.shadow_size"},
        {"lira", "{\"shadow_models\": 1}", "attack.shadow_models"},
        {"basic-mia", "{\"members\": 101}", "attack.members"},
        {"basic-mia", "{\"target\": \"client\", \"target_client\": 2}", "attack.target_client"},
        {"basic-mia", "{\"target\": \"server\"}", "attack.target"},
        {"cs-mia", "{\"target\": \"central\"}", "attack.target"},
        {"ml-leaks", "{\"bogus\": 1}", "bogus"},
        {"ml-leaks", "{\"attack_model\": {\"lr\": -1}}", "attack.attack_model.lr"},
        {"lira", "{\"variance\": \"global\"}", "attack.variance"},
        {"lira", "{\"variant\": \"both\"}", "attack.variant"},
        {"lira", "{\"variant\": \"online\", \"shadow_models\": 5}", "attack.shadow_models"},
        {"lira", "{\"variant\": \"online\", \"alpha\": 0.1}", "attack.alpha"},
        {"lira", "{\"variant\": \"online\", \"target\": \"client\", \"shadow_size\": 150}", "attack.shadow_size"},
        {"rmia", "{\"variant\": \"online\", \"shadow_models\": 3}", "attack.shadow_models"},
        {"rmia", "{\"shadow_models\": 0}", "attack.shadow_models"},
        {"rmia", "{\"population\": 100000}", "attack.population"},
        {"rmia", "{\"gamma\": 0}", "attack.gamma"},
        {"rmia", "{\"beta\": 1.5}", "attack.beta"},
        {"rmia", "{\"offline_a\": -0.1}", "attack.offline_a"},
        {"rmia", "{\"shadow_size\": 5000}", "attack.shadow_size"},
        {"rmia", "{\"z\": 3}", "z"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *aj = cJSON_Parse(cases[k].json);
        AttackEnv env = {.ex = &fx.ex, .attack_json = aj, .path = "attack", .out_dir = fx.dir, .quiet = 1};
        FpError err = {0};
        ck_assert_int_eq(attack_find(cases[k].attack)->validate(&env, &err), FP_EPARAM);
        ck_assert_msg(strstr(err.msg, cases[k].needle), "%s %s -> %s", cases[k].attack, cases[k].json, err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
        cJSON_Delete(aj);
    }
    fixture_close(&fx);
}
END_TEST

// Runs a shell command; exit status, stderr into errbuf.
static int run_cmd(const char *cmd, char *errbuf, size_t n) { // cmd: < 4096 bytes
    char full[5000], errfile[600];
    char dir[512];
    make_tmpdir(dir, sizeof dir);
    snprintf(errfile, sizeof errfile, "%s/stderr", dir);
    snprintf(full, sizeof full, "%s 2>%s >/dev/null", cmd, errfile);
    int st = system(full);
    FILE *f = fopen(errfile, "r");
    size_t got = f ? fread(errbuf, 1, n - 1, f) : 0;
    errbuf[got] = 0;
    if (f)
        fclose(f);
    remove_tree(dir);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

START_TEST(cli_bad_configs_exit_2) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (!bin || !*bin) {
        printf("SKIP: cli_bad_configs_exit_2 (FEDPRIV_BIN unset; make test sets it)\n");
        return;
    }
    char dir[512], csv[600], cfg[600], cmd[4096], err[4096];
    make_tmpdir(dir, sizeof dir);
    snprintf(csv, sizeof csv, "%s/random.csv", dir);
    write_mixture_csv(csv, 600);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"mlp\", \"hidden\": [8]},"
               " \"federation\": {\"clients\": 2, \"rounds\": 1, \"samples_per_client\": 50},"
               " \"attack\": {\"shadow_size\": 5000}}", csv);
    fclose(f);
    struct { const char *attack, *needle; } cases[] = {{"no-such-attack", "unknown attack"},
                                                       {"ml-leaks", "attack.shadow_size"},
                                                       {"lira", "attack.shadow_size"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(cmd, sizeof cmd, "%s attack %s --config %s --out %s/out", bin, cases[k].attack, cfg, dir);
        ck_assert_int_eq(run_cmd(cmd, err, sizeof err), 2);
        ck_assert_msg(strstr(err, cases[k].needle), "%s", err);
        ck_assert_int_eq(count_lines(err), 1);
    }
    char res[700];
    snprintf(res, sizeof res, "%s/out/result.json", dir);
    ck_assert_int_ne(access(res, F_OK), 0); // no partial result
    remove_tree(dir);
}
END_TEST

Suite *suite_mia(void) {
    Suite *s = suite_create("mia");
    TCase *u = tcase_create("unit");
    tcase_add_test(u, features_match_direct_formulas);
    tcase_add_test(u, metrics_match_fixtures);
    tcase_add_test(u, roc_thinning_keeps_low_fpr);
    tcase_add_test(u, best_threshold_separates);
    tcase_add_test(u, attack_mlp_learns_and_is_deterministic);
    suite_add_tcase(s, u);
    TCase *e = tcase_create("end_to_end");
    tcase_set_timeout(e, 120);
    tcase_add_test(e, e2e_overfit_target_leaks_and_cache_shares);
    tcase_add_test(e, e2e_lira_independent_of_threads);
    tcase_add_test(e, e2e_cs_mia_series_and_client_target);
    tcase_add_test(e, e2e_ml_leaks_on_central_target);
    tcase_add_test(e, e2e_untrained_target_does_not_leak);
    tcase_add_test(e, global_target_members_took_part);
    tcase_add_test(e, bad_configs_fail_validation);
    tcase_add_test(e, cli_bad_configs_exit_2);
    suite_add_tcase(s, e);
    return s;
}
