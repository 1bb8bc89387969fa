// Hostile input, issue 33 cases 4 and 6 (docs/security.md, "Hostile input"): strings
// from a run folder or a baseline reach a terminal, a CSV on standard output or a GitHub
// annotation only escaped (core/status.h), and a tampered metric or a mistyped baseline
// parameter is bad input (exit 2, one line naming the file or JSON path). End-to-end
// runs of the binary (skipped when FEDPRIV_BIN is unset) on a tiny CSV federation that
// trains in milliseconds; the run folders are then tampered with as an attacker with
// write access to them would.
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "scratch.h"
#include "core/status.h"
#include "defenses/registry.h"

// ---- helpers ------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) { scratch_make(tmp_dir, sizeof tmp_dir, "hostile-term"); }

static void remove_tmp_dir(void) { scratch_remove(tmp_dir); }

static cJSON *load_json(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    ck_assert_msg(j != NULL, "%s: not JSON", path);
    return j;
}

static void save_json(const char *path, const cJSON *j) {
    char *t = cJSON_Print(j);
    ck_assert_ptr_nonnull(t);
    write_text(path, t);
    free(t);
}

#define OUT_CAP (1 << 16)
static char out_buf[OUT_CAP], err_buf[OUT_CAP];

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL}, out_buf, err_buf, OUT_CAP)

// NULL when s is `lines` lines of text with no control character a terminal acts on: no
// byte below 0x20 but the newlines, no DEL, no C1 control (U+0080-U+009F, as UTF-8 or as
// a lone byte); else what is wrong. lines < 0: JSON text of any number of lines, which
// may also be indented with tabs (cJSON's formatted output).
static const char *unclean_text(const char *s, int lines) {
    static char why[128];
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; p[i]; i++) {
        if ((p[i] < 0x20 && p[i] != '\n' && !(lines < 0 && p[i] == '\t')) || p[i] == 0x7f) {
            snprintf(why, sizeof why, "raw control byte 0x%02x at %zu", p[i], i);
            return why;
        }
        if (p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f) {
            snprintf(why, sizeof why, "raw C1 control U+00%02X at %zu", p[i + 1], i);
            return why;
        }
        if (p[i] >= 0x80 && p[i] <= 0x9f && (i == 0 || p[i - 1] < 0x80)) {
            snprintf(why, sizeof why, "raw C1 byte 0x%02x at %zu", p[i], i);
            return why;
        }
    }
    if (lines >= 0 && cli_count_lines(s) != lines) {
        snprintf(why, sizeof why, "%d lines, expected %d", cli_count_lines(s), lines);
        return why;
    }
    return NULL;
}

#define assert_clean(s, lines)                                                                                \
    do {                                                                                                       \
        const char *why_ = unclean_text((s), (lines));                                                         \
        ck_assert_msg(why_ == NULL, "%s in:\n%s", why_, (s));                                                  \
    } while (0)

// The label: retitles the terminal, clears it, and forges a line.
#define HOSTILE "gauss \x1b]0;pwned\x07\x1b[2J\nfake line: all done"
#define HOSTILE_ESCAPED "gauss \\x1b]0;pwned\\x07\\x1b[2J\\nfake line: all done"

// A two-cell matrix run in tmp_dir/NAME: no defense, and gaussian-dpfedavg at ε = 1 with
// client noise. No attack.
static void tiny_run(const char *name, char *dir, size_t n) {
    char csv[400], mpath[400], text[2048];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_tiny_csv(csv);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 16}, \"threads\": 1,"
             " \"defenses\": [{\"name\": \"none\"}, {\"name\": \"gaussian-dpfedavg\", \"epsilon\": [1],"
             " \"noise\": \"client\", \"clip\": 1}]}",
             csv);
    snprintf(mpath, sizeof mpath, "%s/%s.json", tmp_dir, name);
    write_text(mpath, text);
    scratch_path(tmp_dir, name, dir, n);
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "matrix: %d: %s", rc, err_buf);
}

// Cell k of the run's index: its id into id (and the index entry).
static cJSON *index_cell(cJSON *ix, int k, char *id, size_t n) {
    cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(ix, "cells"), k);
    ck_assert_ptr_nonnull(e);
    snprintf(id, n, "%s", cJSON_GetObjectItem(e, "id")->valuestring);
    return e;
}

static void cell_path(const char *dir, const char *id, const char *ext, char *buf, size_t n) {
    snprintf(buf, n, "%s/cells/%s%s", dir, id, ext);
}

// ---- 4. matrix --status -------------------------------------------------------------------

// The index's label of a missing cell, and a running cell's claim (its host and the job
// label the runner builds from SLURM_ARRAY_JOB_ID: "slurm $SLURM_ARRAY_JOB_ID_$TASK"),
// as the issue wrote them: one header and two cell lines, nothing raw.
START_TEST(cli_matrix_status_escaped) {
    SKIP_UNLESS_BIN();
    char dir[400], ixp[500], id0[128], id1[128], p[600];
    tiny_run("st", dir, sizeof dir);
    snprintf(ixp, sizeof ixp, "%s/results.json", dir);
    cJSON *ix = load_json(ixp);
    cJSON *e0 = index_cell(ix, 0, id0, sizeof id0), *e1 = index_cell(ix, 1, id1, sizeof id1);
    cJSON_ReplaceItemInObject(e0, "label", cJSON_CreateString(HOSTILE "\xc2\x9b" "1m"));
    cJSON_ReplaceItemInObject(e0, "status", cJSON_CreateString("pending"));
    cJSON_ReplaceItemInObject(e1, "status", cJSON_CreateString("pending"));
    save_json(ixp, ix);
    cell_path(dir, id0, ".json", p, sizeof p);
    ck_assert_int_eq(unlink(p), 0);
    cell_path(dir, id1, ".json", p, sizeof p);
    ck_assert_int_eq(unlink(p), 0);
    cJSON *claim = cJSON_CreateObject();
    cJSON_AddStringToObject(claim, "cell", id1);
    cJSON_AddStringToObject(claim, "spec_hash", cJSON_GetObjectItem(e1, "spec_hash")->valuestring);
    cJSON_AddStringToObject(claim, "host", "node\x1b]0;x\x07\nfake line: all done");
    cJSON_AddNumberToObject(claim, "pid", 4242);
    cJSON_AddStringToObject(claim, "tag", "elsewhere.4242"); // another host: taken as alive
    cJSON_AddStringToObject(claim, "shard", "1/2\x1b[2J");
    cJSON_AddStringToObject(claim, "job", "slurm \x1b]0;pwned\x07\nfake line: all done_3");
    cJSON_AddNumberToObject(claim, "started", (double)time(NULL));
    cell_path(dir, id1, ".running", p, sizeof p);
    save_json(p, claim);
    cJSON_Delete(claim);
    cJSON_Delete(ix);

    ck_assert_int_eq(RUN("matrix", "--status", dir), 1);
    assert_clean(out_buf, 3);
    ck_assert_msg(strstr(out_buf, "  missing  " HOSTILE_ESCAPED "\\u009b1m\n"), "%s", out_buf);
    ck_assert_msg(strstr(out_buf, "  running  gaussian-dpfedavg ε=1 (node\\x1b]0;x\\x07\\nfake line: all done, pid 4242, "
                                  "shard 1/2\\x1b[2J, job slurm \\x1b]0;pwned\\x07\\nfake line: all done_3, for "),
                  "%s", out_buf);

    // --json: the same strings escaped as JSON, which read back exactly.
    ck_assert_int_eq(RUN("matrix", "--status", dir, "--json"), 1);
    assert_clean(out_buf, -1);
    ck_assert_ptr_nonnull(strstr(out_buf, "\\u009b1m"));
    cJSON *j = cJSON_Parse(out_buf);
    ck_assert_ptr_nonnull(j);
    int found = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "list"))
        found += strcmp(cJSON_GetObjectItem(c, "label")->valuestring, HOSTILE "\xc2\x9b" "1m") == 0;
    ck_assert_int_eq(found, 1);
    cJSON_Delete(j);
}
END_TEST

// ---- 4. check --format github and json ------------------------------------------------------

START_TEST(cli_check_github_escaped) {
    SKIP_UNLESS_BIN();
    char dir[400], base[400];
    tiny_run("gh", dir, sizeof dir);
    // One bound that holds (an `ok:` line), one violated (an ::error annotation).
    write_text(scratch_path(tmp_dir, "base.json", base, sizeof base),
               "{\"bounds\": [{\"label\": \"gauss \\u001b]0;pwned\\u0007\\u001b[2J\\nfake line: all done\","
               " \"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0},"
               " {\"label\": \"gauss \\u001b]0;pwned\\u0007\\u001b[2J\\nfake line: all done, 100%\","
               " \"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 2}]}");
    ck_assert_int_eq(RUN("check", dir, "--baseline", base, "--format", "github"), 1);
    // The ok line, the annotation, the summary.
    assert_clean(out_buf, 3);
    // A workflow command's data percent-encodes %, CR and LF (so the annotation keeps its
    // line break, %0A, on one line of the log) and escapes the other controls.
#define HOSTILE_GH "gauss \\x1b]0;pwned\\x07\\x1b[2J%0Afake line: all done"
    // The ok line is no annotation: the text format's escaping, nothing percent-encoded.
#define HOSTILE_PLAIN "gauss \\x1b]0;pwned\\x07\\x1b[2J\\nfake line: all done"
    ck_assert_msg(strncmp(out_buf, "ok: bound 1 \"" HOSTILE_PLAIN "\": ", 13 + strlen(HOSTILE_PLAIN) + 3) == 0, "%s",
                  out_buf);
    const char *ann = strstr(out_buf, "\n::error file=");
    ck_assert_msg(ann != NULL, "%s", out_buf);
    // Properties: ':' and ',' percent-encoded; the message: '%' percent-encoded.
    ck_assert_msg(strstr(ann, ",title=fedpriv check%3A bound 2 \"gauss \\x1b]0;pwned\\x07\\x1b[2J%0Afake line%3A all "
                              "done%2C 100%25\"::bound 2 \"" HOSTILE_GH ", 100%25\": "),
                  "%s", ann);

    // JSON: a C1 control in a label is written \u009b, and reads back as it was.
    write_text(base, "{\"bounds\": [{\"label\": \"x\\u009b2Jy\\u202e\", \"defense\": \"none\","
                     " \"metric\": \"model_accuracy\", \"at_least\": 2}]}");
    ck_assert_int_eq(RUN("check", dir, "--baseline", base, "--format", "json"), 1);
    assert_clean(out_buf, -1);
    ck_assert_msg(strstr(out_buf, "x\\u009b2Jy\\u202e"), "%s", out_buf);
    cJSON *j = cJSON_Parse(out_buf);
    ck_assert_ptr_nonnull(j);
    const char *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "results"), 0), "message")->valuestring;
    ck_assert_msg(strstr(msg, "x\xc2\x9b" "2Jy\xe2\x80\xae"), "%s", msg);
    cJSON_Delete(j);
}
END_TEST

// ---- 4. export to standard output --------------------------------------------------------

static int sh(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Tampered cells: a setting label and a privacy unit holding ESC, BEL, C1, newlines, a
// comma and a quote. The CSV stays one row per line and parseable, and reads back as the
// run with its control characters escaped; JSONL reads back exactly
// (tests/export_roundtrip.py, run from the repository root as `make test` does).
START_TEST(cli_export_escaped) {
    SKIP_UNLESS_BIN();
    char dir[400], ixp[500], id0[128], p[600];
    tiny_run("ex", dir, sizeof dir);
    snprintf(ixp, sizeof ixp, "%s/results.json", dir);
    cJSON *ix = load_json(ixp);
    cJSON *e0 = index_cell(ix, 0, id0, sizeof id0);
    cJSON_ReplaceItemInObject(e0, "label", cJSON_CreateString(HOSTILE "\xc2\x85"));
    save_json(ixp, ix);
    cJSON_Delete(ix);
    cell_path(dir, id0, ".json", p, sizeof p);
    cJSON *cell = load_json(p);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cell, "privacy"), "unit",
                              cJSON_CreateString("u\x07,\"q\"\r\nfake,row\x1b[1m"));
    save_json(p, cell);
    cJSON_Delete(cell);

    ck_assert_int_eq(RUN("export", dir), 0);
    assert_clean(out_buf, 1 + 2 * 2); // the header, two cells x (accuracy, loss)
    ck_assert_msg(strstr(out_buf, "," HOSTILE_ESCAPED "\\u0085,none,"), "%s", out_buf);
    ck_assert_msg(strstr(out_buf, ",\"u\\x07,\"\"q\"\"\\r\\nfake,row\\x1b[1m\","), "%s", out_buf);
    char csv[500], jsonl[500], cmd[2000], file[500];
    write_text(scratch_path(tmp_dir, "out.csv", csv, sizeof csv), out_buf);
    // -o FILE writes the same bytes as standard output.
    static char first[OUT_CAP];
    snprintf(first, sizeof first, "%s", out_buf);
    ck_assert_int_eq(RUN("export", dir, "-o", scratch_path(tmp_dir, "file.csv", file, sizeof file)), 0);
    FILE *f = fopen(file, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out_buf, 1, OUT_CAP - 1, f);
    out_buf[n] = 0;
    fclose(f);
    ck_assert_str_eq(out_buf, first);
    ck_assert_int_eq(RUN("export", dir, "--format", "jsonl"), 0);
    assert_clean(out_buf, 4);
    write_text(scratch_path(tmp_dir, "out.jsonl", jsonl, sizeof jsonl), out_buf);
    snprintf(cmd, sizeof cmd, "python3 tests/export_roundtrip.py %s %s %s >&2", dir, csv, jsonl);
    ck_assert_int_eq(sh(cmd), 0);
    // An option is quoted in the error line escaped.
    ck_assert_int_eq(RUN("export", dir, "--x\x1b]0;pwned\x07\nfake line"), 2);
    assert_clean(err_buf, 1);
    ck_assert_msg(strstr(err_buf, "\"--x\\x1b]0;pwned\\x07\\nfake line\""), "%s", err_buf);
    // The control: the raw label in the CSV is a difference the script sees.
    snprintf(cmd, sizeof cmd, "sed 's/\\\\x07/x/' %s > %s.bad && python3 tests/export_roundtrip.py %s %s.bad 2>/dev/null",
             csv, csv, dir, csv);
    ck_assert_int_eq(sh(cmd), 1);
}
END_TEST

// ---- 6. a typo in a baseline's params --------------------------------------------------

START_TEST(defenses_declare_their_params) {
    for (int i = 0; i < defense_count(); i++) {
        const DefenseOps *d = defense_at(i);
        ck_assert_msg(d->takes_param != NULL, "%s does not say which parameters it takes", d->name);
        ck_assert_msg(d->takes_param("name"), "%s", d->name);
        ck_assert_msg(!d->takes_param("nosie"), "%s", d->name);
    }
    ck_assert(defense_find("gaussian-dpfedavg")->takes_param("noise"));
    ck_assert(defense_find("spm")->takes_param("upload"));      // the scalar-mechanism defenses' own key
    ck_assert(!defense_find("spm")->takes_param("clip"));       // spm takes any real: no input range
    ck_assert(defense_find("ldp-fl")->takes_param("clip"));
    ck_assert(defense_find("adaptive-harmony")->takes_param("self_sampling"));
    ck_assert(!defense_find("laplace")->takes_param("self_sampling"));
}
END_TEST

START_TEST(cli_check_params_typo_exit_2) {
    SKIP_UNLESS_BIN();
    char dir[400], base[400];
    tiny_run("pt", dir, sizeof dir);
    scratch_path(tmp_dir, "params.json", base, sizeof base);
    write_text(base, "{\"bounds\": [{\"defense\": \"gaussian-dpfedavg\", \"params\": {\"nosie\": \"client\"},"
                     " \"metric\": \"model_accuracy\", \"at_least\": 0}]}");
    ck_assert_int_eq(RUN("check", dir, "--baseline", base), 2);
    assert_clean(err_buf, 1);
    ck_assert_msg(strstr(err_buf, "params.json: bounds[0].params.nosie: defense \"gaussian-dpfedavg\" takes no parameter "
                                  "\"nosie\""),
                  "%s", err_buf);
    ck_assert_str_eq(out_buf, "");
    // "*": no defense at all takes it.
    write_text(base, "{\"bounds\": [{\"defense\": \"*\", \"params\": {\"nosie\": 1}, \"metric\": \"model_accuracy\","
                     " \"at_least\": 0}]}");
    ck_assert_int_eq(RUN("check", dir, "--baseline", base), 2);
    ck_assert_msg(strstr(err_buf, "bounds[0].params.nosie: no defense takes a parameter \"nosie\""), "%s", err_buf);
    // A real parameter with a value no setting has stays a violation (1); the right one holds.
    write_text(base, "{\"bounds\": [{\"defense\": \"gaussian-dpfedavg\", \"params\": {\"noise\": \"server\"},"
                     " \"metric\": \"model_accuracy\", \"at_least\": 0}]}");
    ck_assert_int_eq(RUN("check", dir, "--baseline", base), 1);
    ck_assert_msg(strstr(out_buf, "matches 0 defense settings"), "%s", out_buf);
    write_text(base, "{\"bounds\": [{\"defense\": \"gaussian-dpfedavg\", \"params\": {\"noise\": \"client\"},"
                     " \"metric\": \"model_accuracy\", \"at_least\": 0}]}");
    ck_assert_msg(RUN("check", dir, "--baseline", base) == 0, "%s%s", out_buf, err_buf);
}
END_TEST

// ---- 6. tampered metrics -----------------------------------------------------------------

// Sets key (a JSON value's text) in the object at path ("model") of the first cell file.
static void tamper_cell(const char *dir, const char *object, const char *key, const char *value, char *cell_file,
                        size_t n) {
    char ixp[500], id0[128];
    snprintf(ixp, sizeof ixp, "%s/results.json", dir);
    cJSON *ix = load_json(ixp);
    index_cell(ix, 0, id0, sizeof id0);
    cJSON_Delete(ix);
    cell_path(dir, id0, ".json", cell_file, n);
    cJSON *cell = load_json(cell_file);
    cJSON *obj = cJSON_GetObjectItem(cell, object);
    ck_assert_ptr_nonnull(obj);
    cJSON *v = cJSON_Parse(value);
    ck_assert_ptr_nonnull(v);
    if (cJSON_IsArray(obj))
        cJSON_AddItemToArray(obj, v);
    else if (cJSON_GetObjectItem(obj, key))
        cJSON_ReplaceItemInObject(obj, key, v);
    else
        cJSON_AddItemToObject(obj, key, v);
    save_json(cell_file, cell);
    cJSON_Delete(cell);
}

// check and report refuse the run: exit 2, one line naming the cell file and the JSON
// path, no report written.
static void assert_refused(const char *dir, const char *base, const char *cell_file, const char *what) {
    char html[500], want[900];
    snprintf(want, sizeof want, "%s: %s", cell_file, what);
    ck_assert_int_eq(RUN("check", dir, "--baseline", base), 2);
    assert_clean(err_buf, 1);
    ck_assert_msg(strstr(err_buf, want), "want \"%s\" in: %s", want, err_buf);
    scratch_path(tmp_dir, "report.html", html, sizeof html);
    ck_assert_int_eq(RUN("report", dir, "-o", html), 2);
    assert_clean(err_buf, 1);
    ck_assert_msg(strstr(err_buf, want), "want \"%s\" in: %s", want, err_buf);
    ck_assert_int_ne(access(html, F_OK), 0);
}

START_TEST(cli_tampered_metrics_refused) {
    SKIP_UNLESS_BIN();
    char dir[400], base[400], cell[600];
    write_text(scratch_path(tmp_dir, "acc.json", base, sizeof base),
               "{\"bounds\": [{\"defense\": \"*\", \"metric\": \"model_accuracy\", \"at_least\": 0}]}");
    static const struct {
        const char *object, *key, *value, *what;
    } cases[] = {
        {"model", "test_accuracy", "-5", "model.test_accuracy: -5 is out of range (an accuracy is a finite number in [0, 1])"},
        {"model", "test_accuracy", "\"inf\"", "model.test_accuracy: inf is out of range"},
        {"model", "test_accuracy", "\"high\"", "model.test_accuracy: must be a number or null"},
        {"model", "test_loss", "-1", "model.test_loss: -1 is out of range"},
        {"privacy", "unit", "\"client\"", NULL}, // the control: an untouched metric, accepted
        {"attacks", "", "{\"index\": 0, \"name\": \"lira\", \"status\": \"done\", \"headline\": \"auc\", \"value\": 1.5,"
                        " \"result\": {\"auc\": 1.5}}",
         "attacks[0].value: 1.5 is out of range (an AUC is a finite number in [0, 1])"},
        {"attacks", "", "{\"index\": 0, \"name\": \"dlg\", \"status\": \"done\", \"headline\": \"ssim_mean\", \"value\": 0.5,"
                        " \"result\": {\"ssim_mean\": 0.5, \"images\": [{\"ssim\": 0.5}, {\"ssim\": -1.5}]}}",
         "attacks[0].result.images[1].ssim: -1.5 is out of range (an SSIM is a finite number in [-1, 1])"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "tm%zu", k);
        tiny_run(name, dir, sizeof dir);
        tamper_cell(dir, cases[k].object, cases[k].key, cases[k].value, cell, sizeof cell);
        if (cases[k].what)
            assert_refused(dir, base, cell, cases[k].what);
        else {
            // The untampered run: accuracies within [0, 1], the no-defense cell's ε "inf".
            ck_assert_msg(RUN("check", dir, "--baseline", base) == 0, "%s%s", out_buf, err_buf);
            ck_assert_ptr_nonnull(strstr(out_buf, "all 1 bound hold"));
        }
    }
}
END_TEST

// ---- the JSON escape -----------------------------------------------------------------------

START_TEST(json_escape_reads_back) {
    const char *in = "{\"a\":\"x\xc2\x9b" "1m\xe2\x80\xae" "b\x7f" "c ε \\u001b\"}";
    char *t = fp_escape_json(in);
    ck_assert_str_eq(t, "{\"a\":\"x\\u009b1m\\u202eb\\u007fc ε \\u001b\"}");
    cJSON *a = cJSON_Parse(in), *b = cJSON_Parse(t);
    ck_assert(cJSON_Compare(a, b, 1));
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(t);
    t = fp_escape_json("\"\xff\"");
    ck_assert_str_eq(t, "\"\\ufffd\"");
    free(t);
}
END_TEST

Suite *suite_hostile_term(void) {
    Suite *s = suite_create("hostile_term");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, make_tmp_dir, remove_tmp_dir);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, json_escape_reads_back);
    tcase_add_test(tc, cli_matrix_status_escaped);
    tcase_add_test(tc, cli_check_github_escaped);
    tcase_add_test(tc, cli_export_escaped);
    tcase_add_test(tc, defenses_declare_their_params);
    tcase_add_test(tc, cli_check_params_typo_exit_2);
    tcase_add_test(tc, cli_tampered_metrics_refused);
    suite_add_tcase(s, tc);
    return s;
}
