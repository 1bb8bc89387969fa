// Hostile input to `fedpriv audit-training` (docs/security.md, "Hostile input", issue 33
// cases 2 and 6): a multi-run audit's resume file belongs to one whole configuration and
// holds finite scores only, and the audit's keys refuse values outside their stated
// ranges instead of reading some of them as "the default". End-to-end runs of the binary
// (skipped when FEDPRIV_BIN is unset) on a tiny CSV federation that trains in
// milliseconds.
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli_run.h"
#include "scratch.h"
#include "core/json_number.h"
#include "core/jsonv.h"

// ---- helpers ------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) { scratch_make(tmp_dir, sizeof tmp_dir, "hostile-audit"); }

static void remove_tmp_dir(void) { scratch_remove(tmp_dir); }

// A small, learnable CSV classification set (3 classes, 6 features: with 4, logreg's
// default initialisation U(±1/√fan_in) would be "uniform"'s U(±0.5) exactly); `shift`
// moves one feature, so that two sets differ in their values only.
static void write_audit_csv(const char *path, double shift) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c,d,e,f,label\n");
    for (int i = 0; i < 240; i++) {
        int y = i % 3;
        fprintf(f, "%g,%g,%g,%g,%g,%g,%d\n", y + 0.1 * (i % 7) + shift, 0.5 * y - 0.05 * (i % 5),
                ((i * 7) % 11) / 11.0, (double)(y == 2), ((i * 5) % 13) / 13.0, 0.3 * (y == 1) + 0.01 * (i % 3), y);
    }
    ck_assert_int_eq(fclose(f), 0);
}

#define DPFEDAVG "{\"name\": \"gaussian-dpfedavg\", \"epsilon\": 4}"

// An audit config on the CSV at csv (default: tiny.csv in tmp_dir, written on first use):
// `model` (a JSON object), 4 clients (the last one the canary), one round, `defense`, and
// `attack` as the attack object. Returns its path in a buffer the next call reuses.
static const char *audit_config_with(const char *name, const char *csv, const char *model, const char *defense,
                                     const char *attack) {
    static char path[400];
    char def_csv[400], text[2048];
    if (!csv) {
        csv = scratch_path(tmp_dir, "tiny.csv", def_csv, sizeof def_csv);
        if (access(csv, F_OK) != 0)
            write_audit_csv(csv, 0);
    }
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"threads\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": %s,\n"
             " \"federation\": {\"clients\": 4, \"rounds\": 1, \"batch_size\": 16},\n"
             " \"defense\": %s,\n \"attack\": %s}\n",
             csv, model, defense, attack);
    write_text(scratch_path(tmp_dir, name, path, sizeof path), text);
    return path;
}

// The same with DP-FedAvg at ε = 4.
static const char *audit_config(const char *name, const char *csv, const char *model, const char *attack) {
    return audit_config_with(name, csv, model, DPFEDAVG, attack);
}

#define MULTI_RUN "{\"name\": \"audit-training\", \"method\": \"multi-run\", \"runs\": 16}"
#define LOGREG "{\"name\": \"logreg\"}"

#define OUT_CAP (1 << 16)
static char out_buf[OUT_CAP], err_buf[OUT_CAP];

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL}, out_buf, err_buf, OUT_CAP)

static cJSON *load_result(const char *out_dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/result.json", out_dir);
    cJSON *r = NULL;
    FpError e = {0};
    ck_assert_msg(jv_load_file(path, &r, &e) == FP_OK, "%s", e.msg);
    return r;
}

// Runs the audit of config into out_dir (exit 0 expected) and returns its result.json.
static cJSON *audit(const char *config, const char *out_dir) {
    int rc = RUN("audit-training", "--config", config, "--out", out_dir);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err_buf);
    return load_result(out_dir);
}

static double num(const cJSON *o, const char *key) { return jnum_value(cJSON_GetObjectItemCaseSensitive(o, key)); }

// The result's chosen test and its counts, printed: two audits agree bit for bit when
// these strings and their ε̂ do.
static char *test_text(const cJSON *r) {
    char *t = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r, "test"));
    ck_assert_ptr_nonnull(t);
    return t;
}

// Keeps the first line of the resume file and `runs` runs: an audit killed after them.
static void cut_after(const char *out_dir, int runs) {
    char path[600], line[256], kept[8192] = "";
    snprintf(path, sizeof path, "%s/multi-run.txt", out_dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 1 + runs && fgets(line, sizeof line, f); i++)
        strcat(kept, line);
    fclose(f);
    write_text(path, kept);
}

// ---- 33.2: the resume fingerprint covers the whole experiment -------------------------------

// The reproduction: "init": "default" and "init": "uniform" have the same
// parameter count, which was all the fingerprint knew of the model, so B resumed A's
// runs and reported another threshold than B uninterrupted. Now B starts over, says so in
// one line, and gives B's uninterrupted test exactly.
START_TEST(cli_resume_refuses_another_init) {
    char out_a[400], out_b[400];
    scratch_path(tmp_dir, "out-a", out_a, sizeof out_a);
    scratch_path(tmp_dir, "out-b", out_b, sizeof out_b);
    char cfg[400]; // audit_config's buffer is reused by the next call
    snprintf(cfg, sizeof cfg, "%s",
             audit_config("b.json", NULL, "{\"name\": \"logreg\", \"init\": \"uniform\"}", MULTI_RUN));
    int rc = RUN("audit-training", "--config", cfg, "--out", out_b);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err_buf);
    cJSON *b = load_result(out_b); // B uninterrupted
    char *tb = test_text(b);
    // A, interrupted after 6 runs; then B into the same folder.
    rc = RUN("audit-training", "--config", audit_config("a.json", NULL, "{\"name\": \"logreg\", \"init\": \"default\"}",
                                                        MULTI_RUN), "--out", out_a);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err_buf);
    cut_after(out_a, 6);
    cJSON *ab = audit(cfg, out_a);
    char *tab = test_text(ab);
    ck_assert_str_eq(tab, tb); // before: A's runs 0-5 gave another threshold
    ck_assert_double_eq(num(ab, "epsilon_lower_bound"), num(b, "epsilon_lower_bound"));
    ck_assert_int_eq((int)num(ab, "runs_resumed"), 0);
    ck_assert_msg(strstr(err_buf, "holds the runs of another configuration"), "%s", err_buf);
    ck_assert_msg(!strstr(err_buf, "resuming"), "%s", err_buf);
    free(tb);
    free(tab);
    cJSON_Delete(b);
    cJSON_Delete(ab);
}
END_TEST

// What the fingerprint covers beyond the model: the data's values (the same path holding
// other data starts over), and what it does not depend on: the spelling of the config
// (a model default spelled out, keys in another order) and where the same data is read
// from (a resume).
START_TEST(cli_resume_follows_the_data_not_the_spelling) {
    char out[400], csv2[400], csv3[400];
    scratch_path(tmp_dir, "out", out, sizeof out);
    const char *cfg = audit_config("a.json", NULL, LOGREG, MULTI_RUN);
    int rc = RUN("audit-training", "--config", cfg, "--out", out);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err_buf);
    cJSON *a = load_result(out); // uninterrupted
    char *ta = test_text(a);
    // The same data under another path, the model's default spelled out, the defense's
    // keys in another order: resumed.
    scratch_path(tmp_dir, "copy.csv", csv2, sizeof csv2);
    write_audit_csv(csv2, 0);
    cut_after(out, 6);
    cJSON *c = audit(audit_config_with("c.json", csv2, "{\"init\": \"default\", \"name\": \"logreg\"}",
                                       "{\"epsilon\": 4, \"name\": \"gaussian-dpfedavg\"}", MULTI_RUN), out);
    ck_assert_msg(strstr(err_buf, "resuming after 6 finished runs"), "%s", err_buf);
    ck_assert_int_eq((int)num(c, "runs_resumed"), 6);
    char *tc = test_text(c);
    ck_assert_str_eq(tc, ta);
    // Other values under that path (as many samples, as many parameters): starts over.
    write_audit_csv(csv2, 0.25);
    cut_after(out, 6);
    cJSON *d = audit(audit_config("d.json", csv2, LOGREG, MULTI_RUN), out);
    ck_assert_msg(strstr(err_buf, "holds the runs of another configuration"), "%s", err_buf);
    ck_assert_int_eq((int)num(d, "runs_resumed"), 0);
    char *td = test_text(d);
    scratch_path(tmp_dir, "fresh.csv", csv3, sizeof csv3);
    write_audit_csv(csv3, 0.25);
    char fresh[400];
    cJSON *e = audit(audit_config("e.json", csv3, LOGREG, MULTI_RUN),
                     scratch_path(tmp_dir, "out-fresh", fresh, sizeof fresh));
    char *te = test_text(e);
    ck_assert_str_eq(td, te);
    free(ta);
    free(tc);
    free(td);
    free(te);
    cJSON_Delete(a);
    cJSON_Delete(c);
    cJSON_Delete(d);
    cJSON_Delete(e);
}
END_TEST

// The scores read back must be finite: a "nan" in the scored half used to stop the test
// firing there (fired_in 6 -> 0 in the issue) and was still reported "consistent". Now
// the first line that is not a finished run with finite scores ends the resume, said in
// one line naming the file and line: the runs from there are trained again, and the
// result and the file are the uninterrupted audit's, bit for bit.
START_TEST(cli_resume_retrains_nonfinite_scores) {
    char out[400], path[600];
    scratch_path(tmp_dir, "out", out, sizeof out);
    const char *cfg = audit_config("a.json", NULL, LOGREG, MULTI_RUN);
    int rc = RUN("audit-training", "--config", cfg, "--out", out);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err_buf);
    cJSON *a = load_result(out);
    char *ta = test_text(a);
    snprintf(path, sizeof path, "%s/multi-run.txt", out);
    char *orig = read_text_alloc(path, 1 << 16);
    // Run 10 (line 12) is in the scored half (runs 8-15 of 16); run 3 (line 5) chooses the test.
    static const struct {
        int run, field;
        const char *value, *needle;
    } cases[] = {
        {10, 0, "nan", "multi-run.txt:12: not the finished run 10 with finite scores (\"run 10: nan "},
        {10, 1, "-nan", "multi-run.txt:12: not the finished run 10 with finite scores"},
        {3, 1, "inf", "multi-run.txt:5: not the finished run 3 with finite scores"},
        {3, 0, "-1e999", "multi-run.txt:5: not the finished run 3 with finite scores"},
        {5, 0, "x", "multi-run.txt:7: not the finished run 5 with finite scores"}, // not a number at all
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        // The file with the one score replaced.
        char edited[1 << 14] = "", *save = NULL, *copy = strdup(orig);
        ck_assert_ptr_nonnull(copy);
        int line_no = 0;
        for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save), line_no++) {
            char line[256];
            int r;
            double sg, mg;
            if (line_no == cases[i].run + 1) {
                ck_assert_int_eq(sscanf(l, "run %d: %lg %lg", &r, &sg, &mg), 3);
                ck_assert_int_eq(r, cases[i].run);
                if (cases[i].field == 0)
                    snprintf(line, sizeof line, "run %d: %s %.17g", r, cases[i].value, mg);
                else
                    snprintf(line, sizeof line, "run %d: %.17g %s", r, sg, cases[i].value);
                l = line;
            }
            strcat(edited, l);
            strcat(edited, "\n");
        }
        free(copy);
        write_text(path, edited);
        cJSON *r = audit(cfg, out);
        ck_assert_msg(strstr(err_buf, cases[i].needle), "case %zu: %s", i, err_buf);
        ck_assert_msg(strstr(err_buf, "trained again\n"), "case %zu: %s", i, err_buf);
        char resumed[64];
        snprintf(resumed, sizeof resumed, "resuming after %d finished runs", cases[i].run);
        ck_assert_msg(cases[i].run == 0 || strstr(err_buf, resumed), "case %zu: %s", i, err_buf);
        ck_assert_int_eq((int)num(r, "runs_resumed"), cases[i].run);
        char *tr = test_text(r);
        ck_assert_str_eq(tr, ta);
        ck_assert_double_eq(num(r, "epsilon_lower_bound"), num(a, "epsilon_lower_bound"));
        char *now = read_text_alloc(path, 1 << 16);
        ck_assert_str_eq(now, orig); // the runs from the bad line on, written again
        free(now);
        free(tr);
        cJSON_Delete(r);
    }
    free(ta);
    free(orig);
    cJSON_Delete(a);
}
END_TEST

// ---- 33.6: the audit's keys refuse values outside their ranges ------------------------------

// "delta" in [-1, 0) was the defense's δ (-1 the "absent" sentinel inside the accepted
// range), "canary_norm": 0 the default norm, and "confidence": 1e-300 reported "at
// 1e-298% confidence". Each is now exit 2 with one line naming the JSON path and the
// range; leaving the key out still means the default.
START_TEST(cli_audit_keys_out_of_range) {
#define AUDIT8 "{\"name\": \"audit-training\", \"method\": \"multi-run\", \"runs\": 8, "
    static const struct {
        const char *attack, *needle;
    } bad[] = {
        {AUDIT8 "\"delta\": -1}", "attack.delta: must be in [0, 1), got -1"},
        {AUDIT8 "\"delta\": -0.5}", "attack.delta: must be in [0, 1), got -0.5"},
        {AUDIT8 "\"delta\": 1}", "attack.delta: must be in [0, 1), got 1"},
        {AUDIT8 "\"canary_norm\": 0}", "attack.canary_norm: must be in (0, 1e+30], got 0"},
        {AUDIT8 "\"canary_norm\": -2}", "attack.canary_norm: must be in (0, 1e+30], got -2"},
        {AUDIT8 "\"confidence\": 1e-300}", "attack.confidence: must be in [0.5, 0.999999], got 1e-300"},
        {AUDIT8 "\"confidence\": 0.3}", "attack.confidence: must be in [0.5, 0.999999], got 0.3"},
        {AUDIT8 "\"confidence\": 0.9999999}", "attack.confidence: must be in [0.5, 0.999999], got 1"},
        {AUDIT8 "\"confidence\": 1}", "attack.confidence: must be in [0.5, 0.999999], got 1"},
    };
    char out[400], res[600];
    scratch_path(tmp_dir, "out", out, sizeof out);
    snprintf(res, sizeof res, "%s/result.json", out);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        // What an accepted config runs: a multi-run audit of 8 runs.
        const char *cfg = audit_config("bad.json", NULL, LOGREG, bad[i].attack);
        int rc = RUN("audit-training", "--config", cfg, "--out", out);
        SKIP_WITHOUT_BIN(rc);
        ck_assert_msg(rc == 2, "case %zu: rc %d: %s", i, rc, err_buf);
        assert_one_clean_line(err_buf);
        ck_assert_msg(strstr(err_buf, bad[i].needle), "case %zu: %s", i, err_buf);
        ck_assert_msg(access(res, F_OK) != 0, "case %zu: a result was written", i);
    }
    // The ends of the ranges are accepted, and "delta": 0 is δ = 0, not the defense's.
    cJSON *r = audit(audit_config("ok.json", NULL, LOGREG,
                                  AUDIT8 "\"delta\": 0, \"confidence\": 0.5, \"canary_norm\": 2}"), out);
    ck_assert_double_eq(num(r, "delta"), 0);
    ck_assert_double_eq(num(r, "confidence"), 0.5);
    ck_assert_double_eq(num(r, "canary_norm"), 2);
    cJSON_Delete(r);
    // Left out: the defense's δ (DP-FedAvg's 1e-5 by default) and its clip.
    r = audit(audit_config_with("ok.json", NULL, LOGREG,
                                "{\"name\": \"gaussian-dpfedavg\", \"epsilon\": 4, \"clip\": 3}",
                                AUDIT8 "\"confidence\": 0.999999}"), out);
    ck_assert_double_eq_tol(num(r, "delta"), 1e-5, 1e-18);
    ck_assert_double_eq(num(r, "canary_norm"), 3);
    ck_assert_msg(strstr(err_buf, "at 99.9999% confidence"), "%s", err_buf);
    cJSON_Delete(r);
#undef AUDIT8
}
END_TEST

Suite *suite_hostile_audit(void) {
    Suite *s = suite_create("hostile_audit");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, make_tmp_dir, remove_tmp_dir);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cli_resume_refuses_another_init);
    tcase_add_test(tc, cli_resume_follows_the_data_not_the_spelling);
    tcase_add_test(tc, cli_resume_retrains_nonfinite_scores);
    tcase_add_test(tc, cli_audit_keys_out_of_range);
    suite_add_tcase(s, tc);
    return s;
}
