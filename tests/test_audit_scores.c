// `fedpriv audit-scores` (audits/scores.h): on the scores audit-training writes it gives
// audit-training's ε̂ exactly (one-run and multi-run); null scores give ε̂ 0 and
// perfectly separated scores the audit's ceiling; membership scores give the ROC
// figures with intervals (CSV and .npy alike); `fedpriv check` gates a folder of such
// findings; malformed score files are one line naming the file and exit 2.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audits/scores.h"
#include "cli_run.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "scratch.h"

static double num(const cJSON *o, const char *key) { return jnum_value(cJSON_GetObjectItem(o, key)); }

static cJSON *load(const char *path) {
    cJSON *r = NULL;
    FpError e = {0};
    ck_assert_msg(jv_load_file(path, &r, &e) == FP_OK, "%s", e.msg);
    return r;
}

#define FED_ONE_ROUND "{\"clients\": 210, \"rounds\": 1, \"batch_size\": 2}"
#define DPFEDAVG "{\"name\": \"gaussian-dpfedavg\", \"epsilon\": 2}"

// audit-training on a small federation (the config of test_audit_training.c's CLI tests).
static cJSON *audit_training_of(const char *dir, const char *fed, const char *defense, const char *attack,
                                char *outdir, size_t n) {
    char cfg[700];
    scratch_path(dir, "c.json", cfg, sizeof cfg);
    char json[1200];
    snprintf(json, sizeof json,
             "{\"seed\": 3, \"dataset\": {\"name\": \"fashion-mnist\", \"train_samples\": 600, \"test_samples\": 50},"
             " \"model\": {\"name\": \"logreg\"}, \"federation\": %s, \"defense\": %s, \"attack\": %s}",
             fed, defense, attack);
    write_text(cfg, json);
    scratch_path(dir, "out", outdir, n);
    char out[8192], err[8192];
    const char *args[] = {"audit-training", "--config", cfg, "--out", outdir, NULL};
    int rc = cli_run(args, out, err, sizeof out);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
    char res[800];
    return load(scratch_path(outdir, "result.json", res, sizeof res));
}

static cJSON *audit_training(const char *dir, const char *attack, char *outdir, size_t n) {
    return audit_training_of(dir, FED_ONE_ROUND, DPFEDAVG, attack, outdir, n);
}

// `fedpriv audit-scores ARGS... --json`: the parsed result (exit status in *rc).
static cJSON *audit_scores(const char *const *extra, int *rc, char *err, size_t n) {
    const char *args[32] = {"audit-scores"};
    int k = 1;
    for (; extra[k - 1]; k++)
        args[k] = extra[k - 1];
    args[k++] = "--json";
    args[k] = NULL;
    static char out[1 << 16];
    *rc = cli_run(args, out, err, n);
    return *rc == 0 || *rc == 1 ? cJSON_Parse(out) : NULL;
}

static void same_bound(const cJSON *a, const cJSON *b, const char *what) {
    ck_assert_msg(num(a, "epsilon_lower_bound") == num(b, "epsilon_lower_bound"), "%s: %.17g vs %.17g", what,
                  num(a, "epsilon_lower_bound"), num(b, "epsilon_lower_bound"));
    ck_assert(num(a, "epsilon_ceiling") == num(b, "epsilon_ceiling"));
}

START_TEST(reproduces_audit_training_one_run) {
    if (!cli_have_bin() || access("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", R_OK) != 0)
        return;
    char dir[512], outdir[700], scores[800], delta[64], conf[64], err[8192];
    scratch_make(dir, sizeof dir, "scores");
    cJSON *r = audit_training(dir, "{\"name\": \"audit-training\", \"canaries\": 200}", outdir, sizeof outdir);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "scores_file")->valuestring, "scores.csv");
    snprintf(delta, sizeof delta, "%.17g", num(r, "delta"));
    snprintf(conf, sizeof conf, "%.17g", num(r, "confidence"));
    const char *extra[] = {"--scores", scratch_path(outdir, "scores.csv", scores, sizeof scores), "--delta", delta,
                           "--confidence", conf, NULL};
    int rc;
    cJSON *s = audit_scores(extra, &rc, err, sizeof err);
    ck_assert_msg(rc == 0 && s, "rc %d: %s", rc, err);
    ck_assert_str_eq(cJSON_GetObjectItem(s, "kind")->valuestring, "one-run"); // from the "canary" column
    same_bound(s, r, "one-run");
    ck_assert(num(s, "correct") == num(r, "correct") && num(s, "guesses") == num(r, "guesses"));
    ck_assert_str_eq(cJSON_GetObjectItem(s, "score")->valuestring, cJSON_GetObjectItem(r, "score")->valuestring);
    ck_assert(num(s, "epsilon_lower_bound") > 0); // a bound that means something, not 0 = 0
    cJSON_Delete(s);
    cJSON_Delete(r);
    scratch_remove(dir);
}
END_TEST

// A sampled federation audited from every aggregate under server noise: the likelihood
// score is the audit's by rule, scores.csv holds it alone, and audit-scores on the file
// gives the same bound and names the same score.
START_TEST(reproduces_audit_training_likelihood) {
    if (!cli_have_bin() || access("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", R_OK) != 0)
        return;
    char dir[512], outdir[700], scores[800], delta[64], conf[64], err[8192];
    scratch_make(dir, sizeof dir, "scores");
    cJSON *r = audit_training_of(dir, "{\"clients\": 210, \"rounds\": 10, \"batch_size\": 2, \"sample_rate\": 0.1,"
                                 " \"sampling\": \"bernoulli\"}",
                                 "{\"name\": \"gaussian-dpfedavg\", \"noise_multiplier\": 0.7, \"noise\": \"server\"}",
                                 "{\"name\": \"audit-training\", \"canaries\": 200, \"observer\": \"aggregates\"}",
                                 outdir, sizeof outdir);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "score")->valuestring, "likelihood");
    scratch_path(outdir, "scores.csv", scores, sizeof scores);
    FILE *f = fopen(scores, "r");
    char header[128] = "";
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(header, sizeof header, f));
    fclose(f);
    ck_assert_str_eq(header, "canary,in,likelihood\n");
    snprintf(delta, sizeof delta, "%.17g", num(r, "delta"));
    snprintf(conf, sizeof conf, "%.17g", num(r, "confidence"));
    const char *extra[] = {"--scores", scores, "--delta", delta, "--confidence", conf, NULL};
    int rc;
    cJSON *s = audit_scores(extra, &rc, err, sizeof err);
    ck_assert_msg(rc == 0 && s, "rc %d: %s", rc, err);
    same_bound(s, r, "likelihood");
    ck_assert_str_eq(cJSON_GetObjectItem(s, "score")->valuestring, "likelihood");
    ck_assert(num(s, "correct") == num(r, "correct") && num(s, "guesses") == num(r, "guesses"));
    ck_assert(num(s, "epsilon_lower_bound") > 0);
    cJSON_Delete(s);
    cJSON_Delete(r);
    scratch_remove(dir);
}
END_TEST

START_TEST(reproduces_audit_training_multi_run) {
    if (!cli_have_bin() || access("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", R_OK) != 0)
        return;
    char dir[512], outdir[700], scores[800], delta[64], err[8192];
    scratch_make(dir, sizeof dir, "scores");
    cJSON *r = audit_training(dir, "{\"name\": \"audit-training\", \"method\": \"multi-run\", \"runs\": 16}", outdir,
                              sizeof outdir);
    snprintf(delta, sizeof delta, "%.17g", num(r, "delta"));
    const char *extra[] = {"--scores", scratch_path(outdir, "scores.csv", scores, sizeof scores), "--delta", delta,
                           NULL};
    int rc;
    cJSON *s = audit_scores(extra, &rc, err, sizeof err);
    ck_assert_msg(rc == 0 && s, "rc %d: %s", rc, err);
    ck_assert_str_eq(cJSON_GetObjectItem(s, "kind")->valuestring, "multi-run"); // from the "run" column
    same_bound(s, r, "multi-run");
    const cJSON *ts = cJSON_GetObjectItem(s, "test"), *tr = cJSON_GetObjectItem(r, "test");
    ck_assert(num(ts, "threshold") == num(tr, "threshold") && num(ts, "fired_in") == num(tr, "fired_in") &&
              num(ts, "fired_out") == num(tr, "fired_out"));
    cJSON_Delete(s);
    cJSON_Delete(r);
    scratch_remove(dir);
}
END_TEST

// ---- test vectors ------------------------------------------------------------------------------------

// n rows "id,in,score": in alternates 1, 0 over the odd rows' pairs (see below); the score
// is constant (null) or the bit itself (separated).
static void write_vector(const char *path, const char *id, int n, int separated) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s,in,score\n", id);
    for (int i = 0; i < n; i++) {
        int in = (i / 2) % 2 == 0; // 1 1 0 0 1 1 0 0 ...: each parity class alternates
        fprintf(f, "%d,%d,%g\n", i, in, separated ? (double)in : 0.5);
    }
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(null_scores_give_zero_and_separated_the_ceiling) {
    SKIP_UNLESS_BIN();
    char dir[512], p[700], err[8192];
    scratch_make(dir, sizeof dir, "scores");
    static const char *const ids[] = {"canary", "run"};
    for (int k = 0; k < 2; k++)
        for (int sep = 0; sep <= 1; sep++) {
            write_vector(scratch_path(dir, "v.csv", p, sizeof p), ids[k], 1000, sep);
            const char *extra[] = {"--scores", p, "--delta", "1e-5", NULL};
            int rc;
            cJSON *s = audit_scores(extra, &rc, err, sizeof err);
            ck_assert_msg(rc == 0 && s, "rc %d: %s", rc, err);
            double eps = num(s, "epsilon_lower_bound"), ceiling = num(s, "epsilon_ceiling");
            ck_assert(ceiling > 1);
            if (sep)
                ck_assert_msg(eps == ceiling, "%s separated: %.17g, ceiling %.17g", ids[k], eps, ceiling);
            else
                ck_assert_msg(eps == 0, "%s null: %.17g", ids[k], eps);
            cJSON_Delete(s);
        }
    scratch_remove(dir);
}
END_TEST

// The same two bounds in-process, and the controls: a score that is the bit's opposite is
// separated too for the multi-run test (it fires on "<="), and a canary audit's guesses
// are one-sided (in for the highest), so the opposite gives 0.
START_TEST(bounds_from_arrays) {
    enum { N = 400 };
    static double null_s[N], sep[N], anti[N];
    static int in[N];
    for (int i = 0; i < N; i++) {
        in[i] = (i / 2) % 2 == 0;
        null_s[i] = 0.5;
        sep[i] = in[i] ? 2.0 : -1.0;
        anti[i] = -sep[i];
    }
    FpError err = {0};
    const double *cols[] = {null_s, sep, anti};
    double got[2][3], ceiling[2];
    for (int method = 0; method < 2; method++)
        for (int c = 0; c < 3; c++) {
            TrainingAuditScores v = {.n = N, .n_scores = 1, .names = {"s"}, .score = {cols[c]}, .in = in};
            cJSON *r = cJSON_CreateObject();
            FpStatus st = method == 0 ? training_audit_one_run_scores(&v, 1e-5, 0.95, r, &err)
                                      : training_audit_multi_run_scores(&v, 1e-5, 0.95, r, &err);
            ck_assert_msg(st == FP_OK, "%s", err.msg);
            got[method][c] = num(r, "epsilon_lower_bound");
            ceiling[method] = num(r, "epsilon_ceiling");
            cJSON_Delete(r);
        }
    for (int method = 0; method < 2; method++) {
        ck_assert(got[method][0] == 0);
        ck_assert(got[method][1] == ceiling[method] && ceiling[method] > 1);
    }
    ck_assert(got[0][2] == 0);
    ck_assert(got[1][2] == ceiling[1]);
    // Bits other than 0/1, NaN scores, too few rows: FP_EPARAM.
    in[3] = 2;
    TrainingAuditScores bad = {.n = N, .n_scores = 1, .names = {"s"}, .score = {sep}, .in = in};
    cJSON *r = cJSON_CreateObject();
    ck_assert_int_eq(training_audit_one_run_scores(&bad, 0, 0.95, r, &err), FP_EPARAM);
    in[3] = 1;
    null_s[5] = NAN;
    bad.score[0] = null_s;
    ck_assert_int_eq(training_audit_multi_run_scores(&bad, 0, 0.95, r, &err), FP_EPARAM);
    bad.n = 3;
    bad.score[0] = sep;
    ck_assert_int_eq(training_audit_multi_run_scores(&bad, 0, 0.95, r, &err), FP_EPARAM);
    cJSON_Delete(r);
}
END_TEST

// ---- membership --------------------------------------------------------------------------------------

static void write_npy_scores(const char *path, const double *rows, int n) {
    char h[128];
    int hl = snprintf(h, sizeof h, "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, 2), }", n);
    while ((10 + hl + 1) % 64)
        h[hl++] = ' ';
    h[hl++] = '\n';
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hl, 0};
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, (size_t)hl, f);
    fwrite(rows, sizeof(double), (size_t)n * 2, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(membership_roc_with_intervals) {
    SKIP_UNLESS_BIN();
    char dir[512], csv[700], npy[700], err[8192];
    scratch_make(dir, sizeof dir, "scores");
    // 200 members scored i/200 + 0.3, 200 non-members scored i/200: AUC and TPRs known.
    enum { N = 400 };
    static double rows[N][2];
    FILE *f = fopen(scratch_path(dir, "m.csv", csv, sizeof csv), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "id,member,loss_score\n");
    for (int i = 0; i < N; i++) {
        int member = i % 2;
        double s = (i / 2) / 200.0 + (member ? 0.3 : 0);
        rows[i][0] = member;
        rows[i][1] = s;
        fprintf(f, "%d,%d,%.17g\n", i, member, s);
    }
    fclose(f);
    write_npy_scores(scratch_path(dir, "m.npy", npy, sizeof npy), &rows[0][0], N);
    cJSON *res[2];
    const char *paths[] = {csv, npy};
    for (int k = 0; k < 2; k++) {
        const char *extra[] = {"--scores", paths[k], NULL};
        int rc;
        res[k] = audit_scores(extra, &rc, err, sizeof err);
        ck_assert_msg(rc == 0 && res[k], "rc %d: %s", rc, err);
        ck_assert_str_eq(cJSON_GetObjectItem(res[k], "kind")->valuestring, "membership");
    }
    const cJSON *r = res[0];
    // AUC = P[member score > non-member score] = 1 − (0.7·0.7/2) ≈ 0.755 (grid: the exact count).
    long long wins = 0;
    for (int a = 0; a < 200; a++)
        for (int b = 0; b < 200; b++)
            wins += 2 * ((a / 200.0 + 0.3) > (b / 200.0)) + ((a / 200.0 + 0.3) == (b / 200.0));
    ck_assert_double_eq_tol(num(r, "auc"), wins / (2.0 * 200 * 200), 1e-12);
    const cJSON *ai = cJSON_GetObjectItem(r, "auc_interval");
    double lo = jnum_value(cJSON_GetArrayItem(ai, 0)), hi = jnum_value(cJSON_GetArrayItem(ai, 1));
    ck_assert(lo < num(r, "auc") && num(r, "auc") < hi && hi - lo < 0.12 && hi - lo > 0.03);
    // TPR at FPR 0: members above the largest non-member score 0.995: 0.3 + a/200 > 0.995.
    const cJSON *tf = cJSON_GetObjectItem(r, "tpr_at_fpr"), *ti = cJSON_GetObjectItem(r, "tpr_at_fpr_interval");
    int above = 0;
    for (int a = 0; a < 200; a++)
        above += a / 200.0 + 0.3 > 199 / 200.0;
    ck_assert_double_eq_tol(num(tf, "0"), above / 200.0, 1e-12);
    for (const cJSON *t = tf->child; t; t = t->next) {
        const cJSON *iv = cJSON_GetObjectItem(ti, t->string);
        ck_assert_msg(jnum_value(cJSON_GetArrayItem(iv, 0)) <= t->valuedouble &&
                          t->valuedouble <= jnum_value(cJSON_GetArrayItem(iv, 1)),
                      "TPR at %s outside its interval", t->string);
    }
    // .npy gives the same figures.
    ck_assert(num(res[1], "auc") == num(r, "auc"));
    ck_assert(num(cJSON_GetObjectItem(res[1], "tpr_at_fpr"), "0.01") == num(tf, "0.01"));
    cJSON_Delete(res[0]);
    cJSON_Delete(res[1]);
    scratch_remove(dir);
}
END_TEST

// ---- fedpriv check over audit-scores findings ----------------------------------------------------

START_TEST(check_gates_score_findings) {
    SKIP_UNLESS_BIN();
    char dir[512], p[700], v[700], base[700], out[8192], err[8192];
    scratch_make(dir, sizeof dir, "scores");
    write_vector(scratch_path(dir, "v.csv", v, sizeof v), "canary", 1000, 1);
    ck_assert_int_eq(mkdir(scratch_path(dir, "run", p, sizeof p), 0700), 0);
    ck_assert_int_eq(mkdir(scratch_path(dir, "run/audit", p, sizeof p), 0700), 0);
    char finding[800];
    scratch_path(dir, "run/audit/canaries.json", finding, sizeof finding);
    // Separated canary scores refute a claim of ε = 1: exit 1, and the finding says so.
    const char *args[] = {"audit-scores", "--scores", v, "--delta", "1e-5", "--epsilon-claimed", "1", "--name",
                          "team-canaries", "--out", finding, NULL};
    ck_assert_int_eq(cli_run(args, out, err, sizeof out), 1);
    write_text(scratch_path(dir, "b.json", base, sizeof base),
               "{\"bounds\": [{\"audit\": \"team-canaries\", \"metric\": \"epsilon_lower_bound\", \"at_most\": \"epsilon\"}]}");
    char run[700];
    scratch_path(dir, "run", run, sizeof run);
    const char *check[] = {"check", run, "--baseline", base, NULL};
    ck_assert_int_eq(cli_run(check, out, err, sizeof out), 1);
    ck_assert_msg(strstr(out, "FAIL") && strstr(out, "team-canaries"), "%s", out);
    // A claim the scores cannot refute passes.
    args[6] = "50";
    ck_assert_int_eq(cli_run(args, out, err, sizeof out), 0);
    int rc = cli_run(check, out, err, sizeof out);
    ck_assert_msg(rc == 0, "rc %d: %s %s", rc, out, err);
    scratch_remove(dir);
}
END_TEST

// ---- refusals ------------------------------------------------------------------------------------------

START_TEST(bad_score_files_are_refused) {
    SKIP_UNLESS_BIN();
    char dir[512], p[700], out[8192], err[8192];
    scratch_make(dir, sizeof dir, "scores");
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"in,score\n1,0.5\n0,nan\n", ":3:2: not a number: \"nan\""},
        {"in,score\n1,0.5\n2,0.1\n", ":3: the in bit is 2"},
        {"in,score\n1,0.5\n0\n", ":3: 1 fields, the header has 2"},
        {"in,score\n1,0.5,7\n", ":2: more fields than the header's 2"},
        {"score,other\n1,0.5\n", ":1: no bit column"},
        {"in,\"score\"\n1,0.5\n", ":1:2: column name"},
        {"in\n1\n", ":1: no score column"},
        {"member,member,s\n1,1,1\n", "a second bit column"},
        {"", "empty file"},
        {"in,score\n", "no rows after the header"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(scratch_path(dir, "s.csv", p, sizeof p), bad[i].text);
        const char *args[] = {"audit-scores", "--scores", p, NULL};
        ck_assert_msg(cli_run(args, out, err, sizeof out) == 2, "accepted: %s", bad[i].text);
        assert_one_clean_line(err);
        ck_assert_msg(strstr(err, "s.csv") && strstr(err, bad[i].needle), "\"%s\" lacks \"%s\"", err, bad[i].needle);
    }
    // Membership scores without non-members; a .npy of the wrong shape; bad options.
    write_text(p, "member,score\n1,0.5\n1,0.7\n");
    const char *a1[] = {"audit-scores", "--scores", p, NULL};
    ck_assert_int_eq(cli_run(a1, out, err, sizeof out), 2);
    assert_one_clean_line(err);
    double three[3] = {1, 0.5, 0.2};
    char npy[700];
    FILE *f = fopen(scratch_path(dir, "s.npy", npy, sizeof npy), "wb");
    const char *h = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n";
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)strlen(h), 0};
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, strlen(h), f);
    fwrite(three, sizeof three, 1, f);
    fclose(f);
    const char *a2[] = {"audit-scores", "--scores", npy, NULL};
    ck_assert_int_eq(cli_run(a2, out, err, sizeof out), 2);
    assert_one_clean_line(err);
    ck_assert_msg(strstr(err, "s.npy") && strstr(err, "N x K"), "%s", err);
    const char *a3[] = {"audit-scores", "--scores", npy, "--kind", "two-run", NULL};
    ck_assert_int_eq(cli_run(a3, out, err, sizeof out), 2);
    assert_one_clean_line(err);
    const char *a4[] = {"audit-scores", "--scores", npy, "--confidence", "0.2", NULL};
    ck_assert_int_eq(cli_run(a4, out, err, sizeof out), 2);
    assert_one_clean_line(err);
    const char *a5[] = {"audit-scores", NULL};
    ck_assert_int_eq(cli_run(a5, out, err, sizeof out), 2);
    assert_one_clean_line(err);
    scratch_remove(dir);
}
END_TEST

Suite *suite_audit_scores(void) {
    Suite *s = suite_create("audit_scores");
    TCase *tc = tcase_create("scores");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, reproduces_audit_training_one_run);
    tcase_add_test(tc, reproduces_audit_training_likelihood);
    tcase_add_test(tc, reproduces_audit_training_multi_run);
    tcase_add_test(tc, null_scores_give_zero_and_separated_the_ceiling);
    tcase_add_test(tc, bounds_from_arrays);
    tcase_add_test(tc, membership_roc_with_intervals);
    tcase_add_test(tc, check_gates_score_findings);
    tcase_add_test(tc, bad_score_files_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
