// `fedpriv check` (runner/check.h): statistics over seeds, every comparison reported with
// its value and margin, exit 2 for baselines that name what exists nowhere (the typo
// cases: "metric": "ssim", "attack": "DLG", an unknown defense or variant), at_least >
// at_most and min_cells < 1, and the four output formats through the binary.
#include <check.h>
#include <sys/wait.h>

#include "matrix_standins.h"
#include "runner/check.h"
#include "tests/cli_run.h"

#define TEST_DIR "build/test-check"
#define CSV TEST_DIR "/blobs.csv"
#define RUN TEST_DIR "/run"

// One run for the whole suite: none and the stand-in noise defense at two ε, two seeds.
// The first test starts it afresh; the others resume it (nothing left to run).
static void make_run_from(int fresh) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
    if (fresh)
        standin_rm(RUN);
    cJSON *root = standin_matrix_seeds(CSV, "[3, 4]", "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [0.5, 2]}]",
                                       "[{\"name\": \"probe\"}]");
    ck_assert_ptr_nonnull(root);
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, RUN, 2, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.done, 6);
    cJSON_Delete(root);
}
static void make_run(void) { make_run_from(0); }

// Checks a baseline given as text; returns the status, r filled when FP_OK.
static FpStatus check_text(const char *baseline, CheckResult *r, FpError *err) {
    cJSON *b = cJSON_Parse(baseline);
    ck_assert_msg(b != NULL, "%s", baseline);
    FpStatus st = check_baseline(RUN, b, "b.json", r, err);
    cJSON_Delete(b);
    return st;
}

START_TEST(every_comparison_has_a_value_and_a_margin) {
    make_run_from(1);
    CheckResult r;
    FpError err = {0};
    // The probe leaks 1/(1+ε) whatever the seed: 2/3 at ε = 0.5.
    ck_assert_msg(check_text("{\"bounds\": [{\"defense\": \"noise\", \"epsilon_max\": 0.5, \"attack\": \"probe\","
                             " \"at_most\": 0.7}, {\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.1}]}",
                             &r, &err) == FP_OK,
                  "%s", err.msg);
    ck_assert_int_eq(r.n_violations, 0);
    ck_assert_int_eq(r.evaluations, 2);
    ck_assert_int_eq(r.n_items, 2);
    ck_assert(r.items[0].ok && r.items[0].is_comparison);
    ck_assert_double_eq_tol(r.items[0].value, 2.0 / 3, 1e-9);
    ck_assert_double_eq_tol(r.items[0].margin, 0.7 - 2.0 / 3, 1e-9);
    ck_assert_msg(strstr(r.items[0].message, "(mean of 2 seeds)") && strstr(r.items[0].message, "margin 0.03333"), "%s",
                  r.items[0].message);
    check_result_free(&r);
}
END_TEST

// mean, ci_upper and ci_lower over the seeds: with two seeds the interval is mean ±
// t(1)·sd/√2, computed here from the per-seed accuracies of the run.
START_TEST(statistics_over_seeds) {
    make_run();
    MatrixResults mr;
    FpError err = {0};
    ck_assert_int_eq(matrix_results_load(RUN, &mr, &err), FP_OK);
    ck_assert_int_eq(mr.n_settings, 3);
    double a[2];
    for (int j = 0; j < 2; j++)
        a[j] = results_cell_metric(mr.cells[mr.settings[0].runs[j]], "model_accuracy");
    matrix_results_free(&mr);
    ck_assert(a[0] != a[1]); // the seeds differ, so the interval has a width
    double mean = (a[0] + a[1]) / 2, half = 12.706204736 * fabs(a[0] - a[1]) / sqrt(2) / sqrt(2);
    static const char *const stats[] = {"mean", "ci_upper", "ci_lower"};
    double want[] = {mean, mean + half, mean - half};
    for (int q = 0; q < 3; q++) {
        char text[512];
        snprintf(text, sizeof text, "{\"bounds\": [{\"defense\": \"none\", \"metric\": \"model_accuracy\","
                                    " \"statistic\": \"%s\", \"at_least\": -100}]}", stats[q]);
        CheckResult r;
        ck_assert_int_eq(check_text(text, &r, &err), FP_OK);
        ck_assert_int_eq(r.n_violations, 0);
        ck_assert_msg(fabs(r.items[0].value - want[q]) < 1e-3, "%s: %g, want %g", stats[q], r.items[0].value, want[q]);
        check_result_free(&r);
    }
    // The upper end fails where the mean passes: the point of bounding it.
    char text[512];
    snprintf(text, sizeof text, "{\"bounds\": [{\"defense\": \"none\", \"metric\": \"model_accuracy\","
                                " \"statistic\": \"ci_upper\", \"at_most\": %.17g}]}", mean + half / 2);
    CheckResult r;
    ck_assert_int_eq(check_text(text, &r, &err), FP_OK);
    ck_assert_int_eq(r.n_violations, 1);
    ck_assert(r.items[0].margin < 0);
    check_result_free(&r);
}
END_TEST

// A typo is bad input (2), not a privacy regression (1).
START_TEST(typos_and_impossible_bounds_are_bad_input) {
    make_run();
    static const char *const bad[][2] = {
        {"{\"bounds\": [{\"defense\": \"none\", \"attack\": \"probe\", \"metric\": \"ssim\", \"at_least\": 0.9}]}",
         "bounds[0].metric: the results of attack \"probe\" have no metric \"ssim\""},
        {"{\"bounds\": [{\"defense\": \"none\", \"attack\": \"DLG\", \"at_least\": 0.9}]}",
         "bounds[0].attack: unknown attack \"DLG\""},
        {"{\"bounds\": [{\"defense\": \"nosie\", \"attack\": \"probe\", \"at_most\": 0.9}]}",
         "bounds[0].defense: unknown defense \"nosie\""},
        {"{\"bounds\": [{\"defense\": \"spm\", \"variant\": \"corected\", \"attack\": \"probe\", \"at_most\": 0.9}]}",
         "bounds[0].variant: defense \"spm\" has no variant \"corected\""},
        {"{\"bounds\": [{\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.9, \"at_most\": 0.5}]}",
         "bounds[0]: at_least 0.9 > at_most 0.5"},
        {"{\"bounds\": [{\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.1, \"min_cells\": 0}]}",
         "bounds[0].min_cells"},
        {"{\"bounds\": [{\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.1, \"statistic\": \"median\"}]}",
         "bounds[0].statistic"},
        {"{\"bounds\": [{\"audit\": \"spn\", \"at_most\": \"epsilon\"}]}", "bounds[0].audit: unknown mechanism \"spn\""},
        {"{\"bounds\": [{\"audit\": \"spm\", \"statistic\": \"ci_upper\", \"at_most\": \"epsilon\"}]}",
         "bounds[0].statistic"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CheckResult r;
        FpError err = {0};
        ck_assert_msg(check_text(bad[i][0], &r, &err) == FP_EPARAM, "case %zu passed: %s", i, bad[i][0]);
        ck_assert_msg(strstr(err.msg, bad[i][1]) && strncmp(err.msg, "b.json: ", 8) == 0, "case %zu: %s", i, err.msg);
    }
    // The control: names that exist are accepted, also when the run lacks them (a defense
    // dropped from the matrix is a violation, exit 1), and metrics reached by a path.
    CheckResult r;
    FpError err = {0};
    ck_assert_int_eq(check_text("{\"bounds\": [{\"defense\": \"spm\", \"variant\": \"corrected\", \"attack\": \"probe\","
                                " \"at_most\": 0.9}, {\"defense\": \"none\", \"attack\": \"probe\", \"metric\": "
                                "\"tpr_at_fpr.0.01\", \"at_least\": 0}, {\"defense\": \"none\", \"attack\": \"probe\","
                                " \"metric\": \"images.0.ssim\", \"at_least\": 0.9}]}",
                                &r, &err),
                     FP_OK);
    ck_assert_int_eq(r.n_violations, 1);
    check_result_free(&r);
}
END_TEST

// ---- the binary ------------------------------------------------------------------------------

static const char *bin_or_skip(void) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (!bin || !bin[0])
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
    return bin && bin[0] ? bin : NULL;
}

static void write_baseline(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

#define PASS_B TEST_DIR "/pass.json"
#define FAIL_B TEST_DIR "/fail.json"
#define TYPO_B TEST_DIR "/typo.json"

static void baselines(void) {
    write_baseline(PASS_B, "{\"bounds\": [{\"label\": \"probe, 100% weak\", \"defense\": \"noise\", \"attack\": \"probe\","
                           " \"at_most\": 0.7}, {\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.1}]}");
    write_baseline(FAIL_B, "{\"bounds\": [{\"label\": \"a: b, c\\nd\", \"defense\": \"noise\", \"attack\": \"probe\","
                           " \"at_most\": 0.5}, {\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.99}]}");
    write_baseline(TYPO_B, "{\"bounds\": [{\"defense\": \"none\", \"attack\": \"probe\", \"metric\": \"ssim\", \"at_least\": 0.9}]}");
}

START_TEST(cli_formats_and_exit_codes) {
    if (!bin_or_skip())
        return;
    make_run();
    baselines();
    static char out[65536], err[65536];
    // text: every comparison, also on success.
    const char *t[] = {"check", RUN, "--baseline", PASS_B, NULL};
    ck_assert_int_eq(cli_run(t, out, err, sizeof out), 0);
    ck_assert_msg(strstr(out, "  ok    bound 1 \"probe, 100% weak\": cell \"noise ε=0.5\": probe ssim_mean (mean of 2 seeds)"
                              " = 0.6667, at most 0.7 (margin 0.03333)") && strstr(out, "check: all 2 bounds hold"),
                  "%s", out);
    // json: parsable, with values and margins.
    const char *j[] = {"check", RUN, "--baseline", FAIL_B, "--format", "json", NULL};
    ck_assert_int_eq(cli_run(j, out, err, sizeof out), 1);
    cJSON *o = cJSON_Parse(out);
    ck_assert_msg(o != NULL, "not JSON: %s", out);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(o, "ok")));
    ck_assert_int_eq(cJSON_GetObjectItem(o, "violations")->valueint, 2);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "results"), 0);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(first, "ok")));
    ck_assert_double_eq_tol(cJSON_GetObjectItem(first, "value")->valuedouble, 2.0 / 3, 1e-9);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(first, "margin")->valuedouble, 0.5 - 2.0 / 3, 1e-9);
    cJSON_Delete(o);
    // junit: well-formed XML with the failures counted (Python's parser reads it).
    const char *ju[] = {"check", RUN, "--baseline", FAIL_B, "--format", "junit", NULL};
    ck_assert_int_eq(cli_run(ju, out, err, sizeof out), 1);
    ck_assert_msg(strstr(out, "tests=\"3\" failures=\"2\""), "%s", out); // ε = 2 passes the first bound
    FILE *f = fopen(TEST_DIR "/junit.xml", "w");
    fputs(out, f);
    fclose(f);
    int rc = system("python3 -c \"import sys, xml.etree.ElementTree as E; r = E.parse('" TEST_DIR "/junit.xml')"
                    ".getroot(); s = r.find('testsuite'); sys.exit(0 if len(s.findall('testcase')) == 3 and "
                    "len(s.findall('testcase/failure')) == 2 else 1)\"");
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "junit XML did not parse:\n%s", out);
    // github: one ::error annotation per violation, its properties and message escaped.
    const char *g[] = {"check", RUN, "--baseline", FAIL_B, "--format", "github", NULL};
    ck_assert_int_eq(cli_run(g, out, err, sizeof out), 1);
    int errors = 0;
    for (const char *q = out; (q = strstr(q, "::error ")); q++)
        errors++;
    ck_assert_int_eq(errors, 2);
    ck_assert_msg(strstr(out, "::error file=" FAIL_B ",title=fedpriv check%3A bound 1 \"a%3A b%2C c%0Ad\"::bound 1 \"a: b, c%0Ad\": "),
                  "%s", out);
    const char *gp[] = {"check", RUN, "--baseline", PASS_B, "--format", "github", NULL};
    ck_assert_int_eq(cli_run(gp, out, err, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "::notice title=fedpriv check::all 2 bounds hold"));
    ck_assert_ptr_null(strstr(out, "::error"));
    // Exit 2: a typo, an unknown format; one line on stderr.
    const char *ty[] = {"check", RUN, "--baseline", TYPO_B, NULL};
    ck_assert_int_eq(cli_run(ty, out, err, sizeof out), 2);
    ck_assert_msg(strstr(err, "no metric \"ssim\"") && cli_count_lines(err) == 1, "%s", err);
    const char *bf[] = {"check", RUN, "--baseline", PASS_B, "--format", "xml", NULL};
    ck_assert_int_eq(cli_run(bf, out, err, sizeof out), 2);
}
END_TEST

Suite *suite_check(void) {
    Suite *s = suite_create("check");
    TCase *tc = tcase_create("check");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_comparison_has_a_value_and_a_margin);
    tcase_add_test(tc, statistics_over_seeds);
    tcase_add_test(tc, typos_and_impossible_bounds_are_bad_input);
    tcase_add_test(tc, cli_formats_and_exit_codes);
    suite_add_tcase(s, tc);
    return s;
}
