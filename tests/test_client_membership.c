// Client membership (attacks/client_membership.c): did this client take part?
//   - without a defense, in a small sampled federation (20 clients of 150 Fashion-MNIST
//     images, 5 per round, 8 rounds), the per-round test finds the participants: the
//     AUC's 95% interval lies above 0.5;
//   - the control: the same federation under server-noise DP-FedAvg at ε 0.5, whose
//     noise buries one client's update, is at chance (the interval holds 0.5), so the
//     first check is not passed by something other than the client's update in the
//     release;
//   - its members are exactly the engine's participants (5 a round × 8 rounds = 40 of
//     160 pairs), and the result is bit-identical at 1 and 2 threads;
//   - a bad "candidates" exits 2 naming the JSON path.
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "core/json_number.h"
#include "tests/cli_run.h"
#include "tests/scratch.h"

static char out_buf[1 << 16], err_buf[1 << 16];

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

// Runs client-membership on the small federation under `defense` (JSON) with `attack`
// (JSON) and `threads`; returns the exit status and the result (NULL unless 0).
static int run_cm(const char *defense, const char *attack, int threads, cJSON **result) {
    char dir[256], cfg[320], out[320], text[2048], th[8];
    scratch_make(dir, sizeof dir, "client-membership");
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"fashion-mnist\", \"train_samples\": 3000, \"test_samples\": 500},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [32]},"
             " \"federation\": {\"clients\": 20, \"sample_rate\": 0.25, \"sampling\": \"fixed\", \"rounds\": 8,"
             "  \"local_epochs\": 1, \"batch_size\": 16, \"lr\": 0.05, \"partition\": \"iid\"},"
             " \"defense\": %s, \"attack\": %s}",
             defense, attack);
    write_text(scratch_path(dir, "cfg.json", cfg, sizeof cfg), text);
    snprintf(th, sizeof th, "%d", threads);
    const char *args[] = {"attack", "client-membership", "--config", cfg, "--out",
                          scratch_path(dir, "out", out, sizeof out), "--threads", th, NULL};
    int rc = cli_run(args, out_buf, err_buf, sizeof out_buf);
    *result = NULL;
    if (rc == 0) {
        char path[400];
        FpError err = {0};
        snprintf(path, sizeof path, "%s/result.json", out);
        ck_assert_msg(jv_load_file(path, result, &err) == FP_OK, "%s", err.msg);
    }
    scratch_remove(dir);
    return rc;
}

static void auc_interval(const cJSON *r, double *lo, double *hi) {
    const cJSON *iv = get(r, "auc_interval");
    *lo = jnum_value(cJSON_GetArrayItem(iv, 0));
    *hi = jnum_value(cJSON_GetArrayItem(iv, 1));
}

START_TEST(participants_are_found_without_a_defense_and_not_under_strong_noise) {
    if (!cli_have_bin()) {
        printf("SKIP participants_are_found_without_a_defense_and_not_under_strong_noise: FEDPRIV_BIN is not set\n");
        return;
    }
    cJSON *r;
    int rc = run_cm("{\"name\": \"none\"}", "{\"name\": \"client-membership\"}", 2, &r);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_buf);
    double lo, hi;
    auc_interval(r, &lo, &hi);
    ck_assert_msg(lo > 0.5, "no defense: AUC %.3f [%.3f, %.3f] does not find the participants",
                  jnum_value(get(r, "auc")), lo, hi);
    ck_assert_int_eq((int)jnum_value(get(r, "members")), 8 * 5); // the engine's participants, every round
    ck_assert_int_eq((int)jnum_value(get(r, "non_members")), 8 * 15);
    ck_assert_int_eq((int)jnum_value(get(r, "candidates")), 20);
    ck_assert_ptr_nonnull(get(r, "client_level"));
    // The same run at 1 thread: the same scores, so the same figures to the last bit.
    cJSON *r1;
    rc = run_cm("{\"name\": \"none\"}", "{\"name\": \"client-membership\"}", 1, &r1);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_buf);
    ck_assert(jnum_value(get(r1, "auc")) == jnum_value(get(r, "auc")));
    ck_assert(jnum_value(get(get(r1, "tpr_at_fpr"), "0.01")) == jnum_value(get(get(r, "tpr_at_fpr"), "0.01")));
    cJSON_Delete(r1);
    cJSON_Delete(r);
    // The control: noise that buries one client's update leaves the test at chance.
    rc = run_cm("{\"name\": \"gaussian-dpfedavg\", \"noise\": \"server\", \"epsilon\": 0.5}",
                "{\"name\": \"client-membership\"}", 2, &r);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_buf);
    auc_interval(r, &lo, &hi);
    ck_assert_msg(lo <= 0.5 && hi >= 0.5, "server noise at eps 0.5: AUC %.3f [%.3f, %.3f] away from chance",
                  jnum_value(get(r, "auc")), lo, hi);
    cJSON_Delete(r);
}
END_TEST

START_TEST(bad_candidates_exit_2_naming_the_path) {
    if (!cli_have_bin()) {
        printf("SKIP bad_candidates_exit_2_naming_the_path: FEDPRIV_BIN is not set\n");
        return;
    }
    cJSON *r;
    int rc = run_cm("{\"name\": \"none\"}", "{\"name\": \"client-membership\", \"candidates\": 1}", 1, &r);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "attack.candidates"), "%s", err_buf);
    ck_assert_int_eq(cli_count_lines(err_buf), 1);
    rc = run_cm("{\"name\": \"none\"}", "{\"name\": \"client-membership\", \"candidate\": 4}", 1, &r);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "candidate"), "%s", err_buf);
}
END_TEST

Suite *suite_client_membership(void) {
    Suite *s = suite_create("client_membership");
    TCase *t = tcase_create("attack");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, participants_are_found_without_a_defense_and_not_under_strong_noise);
    tcase_add_test(t, bad_candidates_exit_2_naming_the_path);
    suite_add_tcase(s, t);
    return s;
}
