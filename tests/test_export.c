// The one non-finite number rule (core/json_number.h) and `fedpriv export`
// (reports/export.h): a matrix run exported as CSV and JSONL is read back by Python's
// csv and json modules (tests/export_roundtrip.py) and holds every value of the run
// exactly, +inf and -inf included; a control shows that a changed digit is caught.
#include <check.h>
#include <sys/wait.h>

#include "core/json_number.h"
#include "matrix_standins.h"
#include "reports/export.h"
#include "tests/cli_run.h"

#define TEST_DIR "build/test-export"
#define CSV TEST_DIR "/blobs.csv"
#define RUN TEST_DIR "/run"

START_TEST(one_rule_for_non_finite_numbers) {
    cJSON *o = cJSON_CreateObject();
    jnum_add(o, "a", 0.1);
    jnum_add(o, "p", INFINITY);
    jnum_add(o, "n", -INFINITY);
    jnum_add(o, "x", NAN);
    char *t = jnum_print(o, 0);
    ck_assert_str_eq(t, "{\"a\":0.1,\"p\":\"inf\",\"n\":\"-inf\",\"x\":null}");
    cJSON_free(t);
    ck_assert(jnum_value(cJSON_GetObjectItem(o, "p")) == INFINITY);
    ck_assert(jnum_value(cJSON_GetObjectItem(o, "n")) == -INFINITY);
    ck_assert(isnan(jnum_value(cJSON_GetObjectItem(o, "x"))));
    ck_assert(isnan(jnum_value(NULL)));
    ck_assert(jnum_is_value(cJSON_GetObjectItem(o, "p")) && !jnum_is_value(cJSON_GetObjectItem(o, "x")));
    cJSON_Delete(o);
    // A writer that forgot the rule: printing applies it anyway (cJSON alone prints null
    // for an infinity and loses its sign), nested and at the top level.
    cJSON *raw = cJSON_CreateObject();
    cJSON *inner = cJSON_AddObjectToObject(raw, "in");
    cJSON_AddNumberToObject(inner, "v", -INFINITY);
    cJSON_AddItemToObject(raw, "list", cJSON_CreateDoubleArray((double[]){1, INFINITY}, 2));
    t = jnum_print(raw, 0);
    ck_assert_str_eq(t, "{\"in\":{\"v\":\"-inf\"},\"list\":[1,\"inf\"]}");
    cJSON_free(t);
    ck_assert(cJSON_GetObjectItem(inner, "v")->valuedouble == -INFINITY); // the tree is left as it was
    cJSON_Delete(raw);
    cJSON *top = cJSON_CreateNumber(INFINITY);
    t = jnum_print(top, 0);
    ck_assert_str_eq(t, "\"inf\"");
    cJSON_free(t);
    cJSON_Delete(top);
    // jv_write_file_atomic uses it.
    ck_assert(standin_mkdirs(TEST_DIR));
    cJSON *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "psnr", INFINITY);
    FpError err = {0};
    ck_assert_int_eq(jv_write_file_atomic(TEST_DIR "/inf.json", f, &err), FP_OK);
    cJSON_Delete(f);
    cJSON *back = NULL;
    ck_assert_int_eq(jv_load_file(TEST_DIR "/inf.json", &back, &err), FP_OK);
    ck_assert(jnum_value(cJSON_GetObjectItem(back, "psnr")) == INFINITY);
    cJSON_Delete(back);
    // CSV text: the shortest decimal that reads back exactly; inf, -inf; empty for NaN.
    char b[40];
    ck_assert_str_eq(jnum_text(0.1, b, sizeof b), "0.1");
    ck_assert_str_eq(jnum_text(2.0 / 3, b, sizeof b), "0.6666666666666666"); // 16 digits suffice
    ck_assert(strtod(jnum_text(2.0 / 3, b, sizeof b), NULL) == 2.0 / 3);
    ck_assert_str_eq(jnum_text(INFINITY, b, sizeof b), "inf");
    ck_assert_str_eq(jnum_text(-INFINITY, b, sizeof b), "-inf");
    ck_assert_str_eq(jnum_text(NAN, b, sizeof b), "");
    ck_assert_str_eq(jnum_text(1e300, b, sizeof b), "1e+300");
}
END_TEST

// A run whose results hold +inf (the probe's PSNR without a defense), -inf (the blind
// attack's advantage), no value (a diverged cell) and two seeds.
static void make_run(void) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
    standin_rm(RUN);
    cJSON *root = standin_matrix_seeds(CSV, "[3, 4]",
                                       "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [0.5]},"
                                       " {\"name\": \"explode\"}]",
                                       "[{\"name\": \"probe\"}, {\"name\": \"blind\"}]");
    ck_assert_ptr_nonnull(root);
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, RUN, 2, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.done, 4);
    ck_assert_int_eq(s.diverged, 2);
    cJSON_Delete(root);
}

static int sh(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

START_TEST(export_round_trips_through_python) {
    make_run();
    HtmlBuf b;
    hb_init(&b);
    FpError err = {0};
    ck_assert_msg(report_export(RUN, EXPORT_CSV, &b, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(report_write_file_atomic(TEST_DIR "/run.csv", b.s, b.len, &err), FP_OK);
    // attacked_model: the federation's model (the stand-in attacks have none of their own)
    ck_assert_ptr_nonnull(strstr(b.s, ",probe,mlp,psnr,inf\n"));
    ck_assert_ptr_nonnull(strstr(b.s, ",blind,mlp,best_advantage,-inf\n"));
    ck_assert_ptr_nonnull(strstr(b.s, ",skipped,probe,mlp,ssim_mean,\n"));  // the diverged cell: no value
    ck_assert_ptr_nonnull(strstr(b.s, "noise ε=0.5,noise,,,0.5,"));     // UTF-8 as is
    hb_free(&b);
    hb_init(&b);
    ck_assert_int_eq(report_export(RUN, EXPORT_JSONL, &b, &err), FP_OK);
    ck_assert_int_eq(report_write_file_atomic(TEST_DIR "/run.jsonl", b.s, b.len, &err), FP_OK);
    ck_assert_ptr_nonnull(strstr(b.s, "\"metric\":\"psnr\",\"value\":\"inf\"}"));
    hb_free(&b);
    ck_assert_int_eq(sh("python3 tests/export_roundtrip.py " RUN " " TEST_DIR "/run.csv " TEST_DIR "/run.jsonl"), 0);
    // The control: one changed digit, one dropped row: both caught.
    ck_assert_int_eq(sh("sed '0,/model_accuracy,0\\./s//model_accuracy,1./' " TEST_DIR "/run.csv > " TEST_DIR
                        "/bad.csv && python3 tests/export_roundtrip.py " RUN " " TEST_DIR "/bad.csv 2>/dev/null"),
                     1);
    ck_assert_int_eq(sh("grep -v ',psnr,inf' " TEST_DIR "/run.csv > " TEST_DIR "/bad.csv && python3 "
                        "tests/export_roundtrip.py " RUN " " TEST_DIR "/bad.csv 2>/dev/null"),
                     1);
}
END_TEST

START_TEST(cli_export) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (!bin || !bin[0]) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    make_run();
    static char out[1 << 20], err[1 << 20];
    const char *std[] = {"export", RUN, NULL};
    ck_assert_int_eq(cli_run(std, out, err, sizeof out), 0);
    static const char header[] = "cell,setting,defense,variant,params,epsilon,epsilon_nominal,epsilon_sound,"
                                 "epsilon_conditional,guarantee,epsilon_upload,upload_guarantee,epsilon_standard_rdp,"
                                 "epsilon_standard_pld,unit,seed,status,attack,attacked_model,metric,value\n";
    ck_assert(strncmp(out, header, sizeof header - 1) == 0);
    const char *file[] = {"export", RUN, "--format", "jsonl", "-o", TEST_DIR "/cli.jsonl", NULL};
    ck_assert_int_eq(cli_run(file, out, err, sizeof out), 0);
    ck_assert_str_eq(out, "");
    FILE *f = fopen(TEST_DIR "/cli.jsonl", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    cJSON *j = cJSON_Parse(line);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(cJSON_GetArraySize(j), 21); // the 21 columns
    cJSON_Delete(j);
    // Bad input: one line, exit 2.
    const char *fmt[] = {"export", RUN, "--format", "xlsx", NULL};
    ck_assert_int_eq(cli_run(fmt, out, err, sizeof out), 2);
    ck_assert_int_eq(cli_count_lines(err), 1);
    const char *none[] = {"export", TEST_DIR "/no-such-run", NULL};
    ck_assert_int_eq(cli_run(none, out, err, sizeof out), 2);
    ck_assert_msg(strstr(err, "results.json") && cli_count_lines(err) == 1, "%s", err);
}
END_TEST

Suite *suite_export(void) {
    Suite *s = suite_create("export");
    TCase *tc = tcase_create("export");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, one_rule_for_non_finite_numbers);
    tcase_add_test(tc, export_round_trips_through_python);
    tcase_add_test(tc, cli_export);
    suite_add_tcase(s, tc);
    return s;
}
