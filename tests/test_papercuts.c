// Command-line papercuts, each with the run that used to fail: one config serves train and
// attack, attack --out makes its parents, two attacks never share an --out, the
// accountant takes fractions and a training set-up, check --format github encodes only
// its annotations, and an unknown name suggests the nearest known one. End-to-end runs
// (skipped when FEDPRIV_BIN is unset) on a tiny CSV federation that trains in milliseconds.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "scratch.h"
#include "core/suggest.h"
#include "reports/html.h"
#include "runner/check.h"

static char tmp_dir[256];

static void make_tmp_dir(void) { scratch_make(tmp_dir, sizeof tmp_dir, "papercuts"); }

static void remove_tmp_dir(void) { scratch_remove(tmp_dir); }

#define OUT_CAP (1 << 16)
static char out_buf[OUT_CAP], err_buf[OUT_CAP], text_buf[OUT_CAP], text2_buf[OUT_CAP];

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL}, out_buf, err_buf, OUT_CAP)
// The number of lines in s.
static int lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

// Writes a config training logreg on the tiny CSV, with defense (NULL: none), the
// extra top-level members tail (NULL: none) into tmp_dir/name; its path into path.
static const char *write_config(const char *name, const char *defense, const char *tail, char *path, size_t n) {
    char csv[400], text[2048];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_tiny_csv(csv);
    snprintf(text, sizeof text,
             "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},\n"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 16},\n"
             " \"defense\": %s, \"seed\": 3, \"threads\": 1%s}\n",
             csv, defense ? defense : "{\"name\": \"none\"}", tail ? tail : "");
    write_text(scratch_path(tmp_dir, name, path, n), text);
    return path;
}

// ---- one config for train and attack ---------------------------------------------------

// Before: "fedpriv train: c.json: attack: unknown key", exit 2.
START_TEST(train_ignores_attack_key) {
    char cfg[400], out[400];
    write_config("both.json", NULL, ", \"attack\": {\"name\": \"basic-mia\"}", cfg, sizeof cfg);
    int rc = RUN("train", "--config", cfg, "--out", scratch_path(tmp_dir, "train.json", out, sizeof out));
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "%s", err_buf);
    const char *said = strstr(err_buf, "attack: ignored");
    ck_assert_msg(said != NULL, "%s", err_buf);
    ck_assert_ptr_null(strstr(said + 1, "attack: ignored")); // once
    ck_assert_ptr_nonnull(strstr(read_text(out, text_buf, sizeof text_buf), "\"status\":\t\"ok\""));
    // The same file runs the attack.
    rc = RUN("attack", "basic-mia", "--config", cfg, "--out", scratch_path(tmp_dir, "both-out", out, sizeof out));
    ck_assert_msg(rc == 0, "%s", err_buf);
    // Without an attack key, nothing is said.
    write_config("plain.json", NULL, NULL, cfg, sizeof cfg);
    rc = RUN("train", "--config", cfg, "--out", scratch_path(tmp_dir, "train2.json", out, sizeof out));
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_ptr_null(strstr(err_buf, "ignored"));
}
END_TEST

// ---- attack --out ------------------------------------------------------------------------

// Before: "a/b/c: cannot create directory: No such file or directory", exit 2.
START_TEST(attack_out_makes_parents) {
    char cfg[400], out[400], result[500];
    write_config("mia.json", NULL, NULL, cfg, sizeof cfg);
    snprintf(out, sizeof out, "%s/deep/er/out", tmp_dir);
    int rc = RUN("attack", "basic-mia", "--config", cfg, "--out", out);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "%s", err_buf);
    snprintf(result, sizeof result, "%s/result.json", out);
    ck_assert_ptr_nonnull(strstr(read_text(result, text_buf, sizeof text_buf), "\"attack\":\t\"basic-mia\""));
}
END_TEST

// Before: the second attack replaced the first's result.json without a word.
START_TEST(attacks_never_share_an_out) {
    char cfg[400], out[400], result[500];
    write_config("shared.json", NULL, NULL, cfg, sizeof cfg);
    scratch_path(tmp_dir, "shared-out", out, sizeof out);
    snprintf(result, sizeof result, "%s/result.json", out);
    int rc = RUN("attack", "basic-mia", "--config", cfg, "--out", out);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "%s", err_buf);
    read_text(result, text_buf, sizeof text_buf);
    rc = RUN("attack", "ml-leaks", "--config", cfg, "--out", out);
    ck_assert_int_eq(rc, 2);
    ck_assert_int_eq(lines(err_buf), 1);
    ck_assert_msg(strstr(err_buf, "this folder holds the attack \"basic-mia\", not \"ml-leaks\"") != NULL, "%s",
                  err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "give each attack its own --out"));
    ck_assert_str_eq(read_text(result, text2_buf, sizeof text2_buf), text_buf); // untouched
    // The same attack again is a rerun, and goes ahead.
    rc = RUN("attack", "basic-mia", "--config", cfg, "--out", out);
    ck_assert_msg(rc == 0, "%s", err_buf);
    read_text(result, text_buf, sizeof text_buf);
    // A record planted as a link is refused, never followed or taken over.
    char owner[500], planted[500], saved[500];
    snprintf(owner, sizeof owner, "%s/attack-owner.txt", out);
    write_text(scratch_path(tmp_dir, "planted.txt", planted, sizeof planted), "ml-leaks\n");
    ck_assert_int_eq(rename(owner, scratch_path(tmp_dir, "owner.bak", saved, sizeof saved)), 0);
    ck_assert_int_eq(symlink(planted, owner), 0);
    rc = RUN("attack", "ml-leaks", "--config", cfg, "--out", out);
    ck_assert_int_eq(rc, 2);
    ck_assert_int_eq(lines(err_buf), 1);
    ck_assert_msg(strstr(err_buf, "attack-owner.txt") != NULL, "%s", err_buf);
    ck_assert_str_eq(read_text(result, text2_buf, sizeof text2_buf), text_buf);
    // A folder written before the record existed is known by its result.json.
    ck_assert_int_eq(unlink(owner), 0);
    rc = RUN("attack", "ml-leaks", "--config", cfg, "--out", out);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "holds the attack \"basic-mia\"") != NULL, "%s", err_buf);
}
END_TEST

// ---- accountant ------------------------------------------------------------------------

// The epsilon of one --json run.
static double json_epsilon(const char *text, const char *key) {
    cJSON *j = cJSON_Parse(text);
    ck_assert_msg(j != NULL, "not JSON: %s", text);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    ck_assert_msg(cJSON_IsNumber(v), "%s: no number %s", text, key);
    double x = v->valuedouble;
    cJSON_Delete(j);
    return x;
}

// Before: "--q: not a number: \"256/60000\"" and "unknown option \"--batch-size\"".
START_TEST(accountant_fractions_and_setup) {
    int rc = RUN("accountant", "--q", "256/60000", "--sigma", "1.1", "--steps", "2350", "--delta", "1e-5", "--json");
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "%s", err_buf);
    double eps_fraction = json_epsilon(out_buf, "epsilon");
    ck_assert_double_eq_tol(json_epsilon(out_buf, "q"), 256.0 / 60000.0, 1e-15);
    char q[64];
    snprintf(q, sizeof q, "%.17g", 256.0 / 60000.0);
    rc = RUN("accountant", "--q", q, "--sigma", "1.1", "--steps", "2350", "--delta", "1e-5", "--json");
    ck_assert_int_eq(rc, 0);
    ck_assert_double_eq(json_epsilon(out_buf, "epsilon"), eps_fraction);
    // 10 epochs of 60000 records in batches of 256: 10 x ceil(60000/256) = 2350 steps.
    rc = RUN("accountant", "--batch-size", "256", "--dataset-size", "60000", "--epochs", "10", "--sigma", "1.1",
             "--delta", "1e-5", "--json");
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_double_eq(json_epsilon(out_buf, "steps"), 2350);
    ck_assert_double_eq(json_epsilon(out_buf, "epsilon"), eps_fraction);
    ck_assert_double_eq(json_epsilon(out_buf, "epochs"), 10);
    // The PLD accountant takes them alike.
    rc = RUN("accountant", "--method", "pld", "--q=256/60000", "--sigma", "1.1", "--steps", "100", "--delta", "1e-5");
    ck_assert_msg(rc == 0, "%s", err_buf);
    static const struct {
        const char *args[14];
        const char *msg;
    } bad[] = {
        {{"accountant", "--q", "1/0", "--sigma", "1", "--steps", "10", "--delta", "1e-5"}, "--q: the denominator"},
        {{"accountant", "--q", "3/2", "--sigma", "1", "--steps", "10", "--delta", "1e-5"}, "--q must be in [0, 1]"},
        {{"accountant", "--q", "1/x", "--sigma", "1", "--steps", "10", "--delta", "1e-5"}, "--q: not a number"},
        {{"accountant", "--batch-size", "256", "--sigma", "1", "--steps", "10", "--delta", "1e-5"}, "go together"},
        {{"accountant", "--batch-size", "2", "--dataset-size", "1", "--sigma", "1", "--steps", "10", "--delta",
          "1e-5"},
         "larger than --dataset-size"},
        {{"accountant", "--q", "0.1", "--batch-size", "2", "--dataset-size", "10", "--sigma", "1", "--steps", "10",
          "--delta", "1e-5"},
         "not both"},
        {{"accountant", "--q", "0.1", "--epochs", "2", "--sigma", "1", "--delta", "1e-5"}, "--epochs needs"},
        {{"accountant", "--batch-size", "2", "--dataset-size", "10", "--epochs", "2", "--steps", "3", "--sigma", "1",
          "--delta", "1e-5"},
         "--steps or --epochs"},
        {{"accountant", "--batch-size", "0", "--dataset-size", "10", "--epochs", "2", "--sigma", "1", "--delta",
          "1e-5"},
         "--batch-size must be an integer >= 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = cli_run(bad[i].args, out_buf, err_buf, OUT_CAP);
        ck_assert_msg(rc == 2, "case %zu: exit %d", i, rc);
        ck_assert_msg(strstr(err_buf, bad[i].msg) != NULL, "case %zu: %s", i, err_buf);
        ck_assert_msg(lines(err_buf) == 1, "case %zu: not one line: %s", i, err_buf);
    }
    // The usage says how the steps are counted.
    rc = RUN("accountant", "--help");
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(strstr(out_buf, "E x ceil(M/B) steps"));
}
END_TEST

// ---- check --format github ---------------------------------------------------------------

// Before: the plain "ok:" lines were percent-encoded too ("at most 50%25").
START_TEST(github_encodes_annotations_only) {
    char m_ok[] = "bound 1: dlg ssim at most 50% of the baseline: 0.2 (margin 0.3)";
    char m_bad[] = "bound 2: accuracy at least 90%: 0.5\nsecond line";
    char name_ok[] = "bound 1", name_bad[] = "bound 2: 90%", empty[] = "";
    CheckItem items[2] = {
        {.bound = 0, .bound_name = name_ok, .subject = empty, .what = empty, .message = m_ok, .ok = 1},
        {.bound = 1, .bound_name = name_bad, .subject = empty, .what = empty, .message = m_bad, .ok = 0},
    };
    CheckResult r = {.bounds = 2, .evaluations = 2, .n_violations = 1, .n_items = 2, .items = items};
    HtmlBuf o;
    hb_init(&o);
    check_format(&r, CHECK_GITHUB, "run", "base.json", &o);
    ck_assert(!o.oom);
    ck_assert_msg(strstr(o.s, "ok: bound 1: dlg ssim at most 50% of the baseline: 0.2 (margin 0.3)\n") != NULL, "%s",
                  o.s);
    const char *ann = strstr(o.s, "::error ");
    ck_assert_ptr_nonnull(ann);
    ck_assert_msg(strstr(ann, "title=fedpriv check%3A bound 2%3A 90%25::bound 2: accuracy at least 90%25: 0.5%0Asecond "
                              "line\n") != NULL,
                  "%s", ann);
    ck_assert_ptr_null(strstr(o.s, "50%25"));
    hb_free(&o);
}
END_TEST

// ---- did you mean --------------------------------------------------------------------------

START_TEST(edit_distance_values) {
    ck_assert_int_eq(fp_edit_distance("dp-sgd", "dp-sgd"), 0);
    ck_assert_int_eq(fp_edit_distance("dp-sdg", "dp-sgd"), 1); // one swap
    ck_assert_int_eq(fp_edit_distance("dpsgd", "dp-sgd"), 1);
    ck_assert_int_eq(fp_edit_distance("DP-SGD", "dp-sgd"), 0);
    ck_assert_int_eq(fp_edit_distance("kitten", "sitting"), 3);
    ck_assert_int_eq(fp_edit_distance("", "abc"), 3);
    ck_assert_int_eq(fp_edit_distance("ca", "abc"), 3); // OSA: a swapped pair is not edited again
    char longer[FP_SUGGEST_MAX_LEN + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    ck_assert_int_eq(fp_edit_distance(longer, "a"), FP_SUGGEST_MAX_LEN + 1);
    // Near names are suggested, far ones not; the first of equals wins.
    static const char *const names[] = {"none", "dp-sgd", "spm", "pm", NULL};
    FpSuggest s;
    char buf[128];
    fp_suggest_begin(&s, "dp-sdg");
    fp_suggest_add_list(&s, names);
    ck_assert_str_eq(fp_did_you_mean(&s, " (", ")", buf, sizeof buf), " (did you mean \"dp-sgd\"?)");
    fp_suggest_begin(&s, "zzzz");
    fp_suggest_add_list(&s, names);
    ck_assert_str_eq(fp_did_you_mean(&s, " (", ")", buf, sizeof buf), "");
    fp_suggest_begin(&s, "sm"); // one edit from spm and from pm: the first listed
    fp_suggest_add_list(&s, names);
    ck_assert_ptr_nonnull(s.best);
    ck_assert_str_eq(s.best, "spm");
}
END_TEST

static int in_names(const char *name, const void *ctx) {
    for (const char *const *n = ctx; *n; n++)
        if (strcmp(*n, name) == 0)
            return 1;
    return 0;
}

START_TEST(probe_finds_one_edit_away) {
    static const char *const names[] = {"none", "dp-sgd", "gaussian-dpfedavg", NULL};
    const char *const tries[][2] = {{"dp-sdg", "dp-sgd"}, {"dpsgd", "dp-sgd"}, {"dp-sgdd", "dp-sgd"},
                                    {"dp-sgx", "dp-sgd"}, {"nome", "none"},    {"Dp-sgd", "dp-sgd"}};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        FpSuggest s;
        char near[FP_SUGGEST_MAX_LEN + 2];
        fp_suggest_begin(&s, tries[i][0]);
        fp_suggest_probe(&s, in_names, names, near, sizeof near);
        ck_assert_msg(s.best && strcmp(s.best, tries[i][1]) == 0, "%s: %s", tries[i][0], s.best ? s.best : "none");
    }
    FpSuggest s;
    char near[FP_SUGGEST_MAX_LEN + 2];
    fp_suggest_begin(&s, "fedsgd-dp");
    fp_suggest_probe(&s, in_names, names, near, sizeof near);
    ck_assert_ptr_null(s.best);
}
END_TEST

// Before: each of these said only "unknown ...", with no suggestion.
START_TEST(unknown_names_suggest_the_nearest) {
    char cfg[400];
    write_config("typo-defense.json", "{\"name\": \"dp-sdg\"}", NULL, cfg, sizeof cfg);
    int rc = RUN("train", "--config", cfg);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    ck_assert_int_eq(lines(err_buf), 1);
    ck_assert_msg(strstr(err_buf, "unknown defense \"dp-sdg\" (did you mean \"dp-sgd\"? fedpriv list shows the defenses)"),
                  "%s", err_buf);
    rc = RUN("attack", "dgl", "--config", cfg, "--out", tmp_dir);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "unknown attack \"dgl\" (did you mean \"dlg\"?"), "%s", err_buf);
    // A model, and a key of the config.
    char csv[400], text[2048];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    snprintf(text, sizeof text,
             "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logregg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}}",
             csv);
    write_text(scratch_path(tmp_dir, "typo-model.json", cfg, sizeof cfg), text);
    rc = RUN("train", "--config", cfg);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "unknown model \"logregg\" (did you mean \"logreg\"?"), "%s", err_buf);
    snprintf(text, sizeof text,
             "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federaton\": {\"clients\": 2, \"rounds\": 1}}",
             csv);
    write_text(scratch_path(tmp_dir, "typo-key.json", cfg, sizeof cfg), text);
    rc = RUN("train", "--config", cfg);
    ck_assert_int_eq(rc, 2);
    ck_assert_int_eq(lines(err_buf), 1);
    ck_assert_msg(strstr(err_buf, "federaton: unknown key (did you mean \"federation\"?)"), "%s", err_buf);
    // A matrix's defense and attack names.
    char mpath[400], dir[400];
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}, \"threads\": 1,"
             " \"defenses\": [{\"name\": \"gausian\", \"epsilon\": [1], \"clip\": 1}]}",
             csv);
    write_text(scratch_path(tmp_dir, "typo-matrix.json", mpath, sizeof mpath), text);
    rc = RUN("matrix", mpath, "--out", scratch_path(tmp_dir, "typo-run", dir, sizeof dir));
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "unknown defense \"gausian\" (did you mean \"gaussian\"?"), "%s", err_buf);
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}, \"threads\": 1,"
             " \"defenses\": [{\"name\": \"none\"}], \"attacks\": [{\"name\": \"lria\"}]}",
             csv);
    write_text(mpath, text);
    rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "unknown attack \"lria\" (did you mean \"lira\"?"), "%s", err_buf);
    // A choice of a config, and a command.
    write_config("typo-choice.json", NULL, ", \"rng\": \"secrue\"", cfg, sizeof cfg);
    rc = RUN("train", "--config", cfg);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "rng: unknown value \"secrue\" (did you mean \"secure\"? expected one of"), "%s",
                  err_buf);
    rc = RUN("trian", "--config", cfg);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(err_buf, "fedpriv: unknown command \"trian\" (did you mean \"train\"? fedpriv --help lists them)\n");
    // A name near nothing gets no suggestion (the control).
    write_config("far.json", "{\"name\": \"zzzzzz\"}", NULL, cfg, sizeof cfg);
    rc = RUN("train", "--config", cfg);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err_buf, "unknown defense \"zzzzzz\" (fedpriv list shows the defenses)"), "%s", err_buf);
}
END_TEST

Suite *suite_papercuts(void) {
    Suite *s = suite_create("papercuts");
    TCase *t = tcase_create("papercuts");
    tcase_add_unchecked_fixture(t, make_tmp_dir, remove_tmp_dir);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, train_ignores_attack_key);
    tcase_add_test(t, attack_out_makes_parents);
    tcase_add_test(t, attacks_never_share_an_out);
    tcase_add_test(t, accountant_fractions_and_setup);
    tcase_add_test(t, github_encodes_annotations_only);
    tcase_add_test(t, edit_distance_values);
    tcase_add_test(t, probe_finds_one_edit_away);
    tcase_add_test(t, unknown_names_suggest_the_nearest);
    suite_add_tcase(s, t);
    return s;
}
