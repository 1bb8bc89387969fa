// The loss-explosion rule (fl/experiment.h, FED_LOSS_EXPLODED_FACTOR): a run whose test
// loss explodes while its weights stay finite is marked in train's result, in a matrix
// cell, in the report's warnings and in results.json, never shown as a plain "ok".
// The headline case is the one that motivated the rule: SPM as published
// (fixtures/repro/spm/spm-paper.json) at C = 5 clients, its first 12 of T = 50 rounds.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "core/json_number.h"
#include "tests/cli_run.h"
#include "tests/scratch.h"

static char out_buf[1 << 16], err_buf[1 << 16];

static cJSON *load(const char *path) {
    cJSON *j = NULL;
    FpError err = {0};
    ck_assert_msg(jv_load_file(path, &j, &err) == FP_OK, "%s", err.msg);
    return j;
}

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

// The marker agrees with the rule applied to the rounds the result lists: its round is
// the first whose test loss exceeds 10 ln K, and its peak is the largest loss.
static void assert_marker_matches_rounds(const cJSON *marker, const cJSON *rounds, int classes) {
    ck_assert_msg(cJSON_IsObject(marker), "no loss_exploded marker");
    double threshold = 10 * log((double)classes);
    ck_assert_double_eq_tol(jnum_value(get(marker, "threshold")), threshold, 1e-12);
    int first = 0;
    double peak = -INFINITY;
    const cJSON *r;
    cJSON_ArrayForEach(r, rounds) {
        double loss = jnum_value(get(r, "test_loss"));
        if (!first && loss > threshold)
            first = (int)jnum_value(get(r, "round"));
        peak = fmax(peak, loss);
    }
    ck_assert_int_gt(first, 0);
    ck_assert_int_eq((int)jnum_value(get(marker, "round")), first);
    ck_assert_double_eq_tol(jnum_value(get(marker, "peak_test_loss")), peak, 1e-9 * peak);
    ck_assert_str_eq(get(marker, "kind")->valuestring, "loss_exploded");
}

// SPM as published, C = 5, the first 12 of T = 50 rounds, the rest of the paper's Table 3 setting unchanged.
START_TEST(spm_paper_at_five_clients_is_marked) {
    if (!cli_have_bin()) {
        printf("SKIP spm_paper_at_five_clients_is_marked: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    char dir[256], cfg[320], res[320];
    scratch_make(dir, sizeof dir, "explosion");
    cJSON *c = load("fixtures/repro/spm/spm-paper.json");
    cJSON *fed = cJSON_GetObjectItemCaseSensitive(c, "federation");
    ck_assert_int_eq((int)jnum_value(get(fed, "rounds")), 50); // the paper's T
    cJSON_ReplaceItemInObjectCaseSensitive(fed, "clients", cJSON_CreateNumber(5));
    // Its first 12 rounds, where the committed 50-round run (docs/reproductions/spm.md)
    // passes 10 ln K (23.0) at round 7 and stands at 378 by round 12: the marker is the same,
    // for a quarter of the run's time (50 rounds were 163 s of make test, more under the
    // sanitizers). The full run's figures are the reproduction's, checked by repro_smoke.
    cJSON_ReplaceItemInObjectCaseSensitive(fed, "rounds", cJSON_CreateNumber(12));
    char *text = cJSON_Print(c);
    write_text(scratch_path(dir, "spm-c5.json", cfg, sizeof cfg), text);
    free(text);
    cJSON_Delete(c);
    const char *args[] = {"train", "--config", cfg, "--out", scratch_path(dir, "result.json", res, sizeof res),
                          "--threads", "2", NULL};
    int rc = cli_run(args, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 0, "train exited %d: %s", rc, err_buf);
    cJSON *r = load(res);
    ck_assert_str_eq(get(r, "status")->valuestring, "ok"); // finite weights: not "diverged"
    const cJSON *fin = get(r, "final");
    assert_marker_matches_rounds(get(fin, "loss_exploded"), get(r, "rounds"), 10);
    // The finding of docs/reproductions/spm.md: near chance with a loss far above a
    // uniform guess's ln 10 (6e11 by round 50).
    ck_assert_double_lt(jnum_value(get(fin, "test_accuracy")), 0.2);
    ck_assert_double_gt(jnum_value(get(fin, "test_loss")), 100);
    ck_assert_str_eq(get(cJSON_GetArrayItem(get(r, "warnings"), 0), "kind")->valuestring, "loss_exploded");
    ck_assert_msg(strstr(err_buf, "fedpriv train: warning: the test loss exploded"), "%s", err_buf);
    cJSON_Delete(r);
    scratch_remove(dir);
}
END_TEST

// The same two defenses in a small matrix (a 3,000-sample federation, where SPM as
// published explodes within 12 rounds too): the SPM cell carries the marker, the healthy
// one does not, and the report warns of it by kind, in results.json and the page.
START_TEST(matrix_and_report_mark_it) {
    if (!cli_have_bin()) {
        printf("SKIP matrix_and_report_mark_it: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    char dir[256], cfg[320], run[320], path[400];
    scratch_make(dir, sizeof dir, "explosion-matrix");
    write_text(scratch_path(dir, "m.json", cfg, sizeof cfg),
               "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"train_samples\": 3000, \"test_samples\": 500},"
               " \"model\": {\"name\": \"mlp\", \"hidden\": [64]},"
               " \"federation\": {\"clients\": 5, \"sample_rate\": 0.6, \"sampling\": \"fixed\", \"rounds\": 12,"
               "  \"local_epochs\": 3, \"batch_size\": 64, \"lr\": 0.05, \"momentum\": 0, \"partition\": \"iid\"},"
               " \"defenses\": [{\"name\": \"none\"}, {\"name\": \"spm\", \"variant\": \"paper\", \"epsilon\": [0.6]}],"
               " \"attacks\": []}");
    const char *args[] = {"matrix", cfg, "--out", scratch_path(dir, "run", run, sizeof run), "--jobs", "1", NULL};
    int rc = cli_run(args, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 0, "matrix exited %d: %s", rc, err_buf);
    const char *rep[] = {"report", run, NULL};
    rc = cli_run(rep, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 0, "report exited %d: %s", rc, err_buf);
    cJSON *idx = load(scratch_path(run, "results.json", path, sizeof path));
    int marked = 0, healthy = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, get(idx, "cells")) {
        char cell[600];
        snprintf(cell, sizeof cell, "%s/cells/%s.json", run, get(e, "id")->valuestring);
        cJSON *c = load(cell);
        const cJSON *model = get(c, "model");
        if (strcmp(get(e, "defense")->valuestring, "spm") == 0) {
            assert_marker_matches_rounds(get(model, "loss_exploded"), get(model, "rounds"), 10);
            marked++;
        } else {
            ck_assert_ptr_null(get(model, "loss_exploded"));
            healthy++;
        }
        cJSON_Delete(c);
    }
    ck_assert_int_eq(marked, 1);
    ck_assert_int_eq(healthy, 1);
    int warned = 0;
    cJSON_ArrayForEach(e, get(get(idx, "summary"), "warnings")) {
        const cJSON *k = get(e, "kind");
        warned += cJSON_IsString(k) && strcmp(k->valuestring, "loss_exploded") == 0;
    }
    ck_assert_int_eq(warned, 1);
    cJSON_Delete(idx);
    char *html = read_text_alloc(scratch_path(run, "report.html", path, sizeof path), 1 << 24);
    ck_assert_msg(strstr(html, "loss_exploded") && strstr(html, "the test loss exploded"), "report does not say it");
    free(html);
    scratch_remove(dir);
}
END_TEST

Suite *suite_explosion(void) {
    Suite *s = suite_create("explosion");
    TCase *t = tcase_create("rule");
    tcase_set_timeout(t, 600); // 12 rounds of the full Fashion-MNIST at 5 clients: ~40 s, x3 under sanitizers
    tcase_add_test(t, spm_paper_at_five_clients_is_marked);
    tcase_add_test(t, matrix_and_report_mark_it);
    suite_add_tcase(s, t);
    return s;
}
