// Hostile input (docs/security.md, "Hostile input"): each case a probe of the tool as an
// attacker would try it found, with the fix's regression test. Unit tests of the strict
// JSON layer and the message formatter, then end-to-end runs of the binary (skipped when
// FEDPRIV_BIN is unset) on a tiny CSV federation that trains in milliseconds.
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli_run.h"
#include "scratch.h"
#include "core/jsonv.h"
#include "core/status.h"
#include "fl/experiment.h"
#include "runner/matrix.h"

// ---- helpers ------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) { scratch_make(tmp_dir, sizeof tmp_dir, "hostile"); }

static void remove_tmp_dir(void) { scratch_remove(tmp_dir); }

static char text_buf[1 << 16]; // what read_text read last

// The tiny CSV in tmp_dir and a config that trains on it. federation and defense are
// JSON objects (NULL: two clients, one round; no defense); tail ends the top-level
// object (NULL: ", \"seed\": 3, \"threads\": 1").
static const char *tiny_config(char *buf, size_t n, const char *federation, const char *defense, const char *tail) {
    char csv[400];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_tiny_csv(csv);
    snprintf(buf, n,
             "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},\n"
             " \"federation\": %s,\n \"defense\": %s%s}\n",
             csv, federation ? federation : "{\"clients\": 2, \"rounds\": 1, \"batch_size\": 16}",
             defense ? defense : "{\"name\": \"none\"}", tail ? tail : ", \"seed\": 3, \"threads\": 1");
    return buf;
}

#define OUT_CAP (1 << 16)
static char out_buf[OUT_CAP], err_buf[OUT_CAP];

// Runs the binary; returns its status, or -1 (the caller then skips).
#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL}, out_buf, err_buf, OUT_CAP)
// ---- 5. one formatter escapes control characters ---------------------------------------

START_TEST(formatter_escapes_controls) {
    char buf[256];
    fp_format(buf, sizeof buf, "name \"%s\"", "\x1b]0;pwned\x07x\nfedpriv train: ok");
    ck_assert_str_eq(buf, "name \"\\x1b]0;pwned\\x07x\\nfedpriv train: ok\"");
    // Valid UTF-8 passes; bytes that are not UTF-8, C1 controls and bidi overrides do not.
    fp_format(buf, sizeof buf, "%s|%s|%s|%s", "ε=1 ✓", "\xff\xc3", "\xc2\x9b" "1m", "a\xe2\x80\xae" "b");
    ck_assert_str_eq(buf, "ε=1 ✓|\\xff\\xc3|\\u009b1m|a\\u202eb");
    // Cut at a character, never inside an escape or a UTF-8 sequence.
    char small[8];
    fp_format(small, sizeof small, "abcde\n");
    ck_assert_str_eq(small, "abcde\\n");
    fp_format(small, sizeof small, "abcdef\n");
    ck_assert_str_eq(small, "abcdef");
    fp_format(small, sizeof small, "abcdeε");
    ck_assert_str_eq(small, "abcdeε");
    fp_format(small, sizeof small, "abcdefε");
    ck_assert_str_eq(small, "abcdef");
    // fp_fail and fp_error_prefix go through it.
    FpError err = {0};
    ck_assert_int_eq(fp_fail(&err, FP_EPARAM, "x: %s", "a\tb\r\n"), FP_EPARAM);
    ck_assert_str_eq(err.msg, "x: a\\tb\\r\\n");
    fp_error_prefix(&err, "file\x1b.json");
    ck_assert_str_eq(err.msg, "file\\x1b.json: x: a\\tb\\r\\n");
}
END_TEST

// Control test: the checker of the CLI tests sees a raw control byte and a second line.
START_TEST(clean_line_check_catches_raw_bytes) {
    ck_assert_ptr_null(cli_unclean_line("fedpriv train: x\n"));
    ck_assert_ptr_nonnull(cli_unclean_line("fedpriv train: \x1b]0;x\x07\n"));
    ck_assert_ptr_nonnull(cli_unclean_line("fedpriv train: x\nfedpriv train: ok\n"));
}
END_TEST

START_TEST(cli_defense_name_is_escaped) {
    char cfg[2048], path[400];
    tiny_config(cfg, sizeof cfg, NULL, "{\"name\": \"\\u001b]0;pwned\\u0007x\\nfedpriv train: ok\"}", NULL);
    write_text(scratch_path(tmp_dir, "esc.json", path, sizeof path), cfg);
    int rc = RUN("train", "--config", path);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "defense.name: unknown defense \"\\x1b]0;pwned\\x07x\\nfedpriv train: ok\""));
}
END_TEST

// A run folder of a one-cell matrix (no attack), for check and report.
static void tiny_matrix_run(const char *name, char *dir, size_t n) {
    char csv[400], mpath[400], text[2048];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_tiny_csv(csv);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 16}, \"threads\": 1,"
             " \"defenses\": [{\"name\": \"none\"}]}",
             csv);
    snprintf(mpath, sizeof mpath, "%s/%s.json", tmp_dir, name);
    write_text(mpath, text);
    scratch_path(tmp_dir, name, dir, n);
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "matrix: %d: %s", rc, err_buf);
}

START_TEST(cli_check_label_is_escaped) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN"))
        return;
    char dir[400], base[400];
    tiny_matrix_run("run", dir, sizeof dir);
    write_text(scratch_path(tmp_dir, "base.json", base, sizeof base),
               "{\"bounds\": [{\"label\": \"\\u001b[2J\\u001b]0;owned\\u0007\\nall bounds hold\","
               " \"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 2}]}");
    int rc = RUN("check", dir, "--baseline", base);
    ck_assert_int_eq(rc, 1);
    // The comparison's FAIL line, the summary and the violation: no line from the label.
    ck_assert_int_eq(cli_count_lines(out_buf), 3);
    for (const char *p = out_buf; *p; p++)
        ck_assert_msg((unsigned char)*p >= 0x20 || *p == '\n', "raw control byte in: %s", out_buf);
    ck_assert_ptr_nonnull(strstr(out_buf, "\\x1b[2J\\x1b]0;owned\\x07\\nall bounds hold"));
}
END_TEST

// ---- 6. strict JSON for every file ---------------------------------------------------------

// Each text is rejected with its line, column, JSON path and reason.
START_TEST(strict_json_rejects) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\"clients\": 2, \"clients\": 3}", "t.json:1:16: clients: duplicate key (first at line 1, column 2)"},
        {"{\"a\": {\"b\": [1, {\"c\": 1,\n \"c\": 2}]}}", "t.json:2:2: a.b[1].c: duplicate key (first at line 1"},
        {"{\"k\\u0065y\": 1, \"key\": 2}", "key: duplicate key"}, // compared after unescaping
        {"{\"name\": \"none\\u0000x\"}", "t.json:1:15: name: \\u0000 (a NUL character) in a string"},
        {"{\"seed\": 02}", "t.json:1:10: seed: leading zero in a number"},
        {"{\"lr\": -01.5}", "lr: leading zero"},
        {"{\"name\": \"a\nb\"}", "t.json:1:12: name: raw control character U+000A in a string"},
        {"{\"name\": \"a\tb\"}", "raw control character U+0009"},
        {"{\"name\": \"\x1b]0;x\x07\"}", "raw control character U+001B"},
        {"{\"name\": \"\xff\"}", "byte 0xff in a string is not UTF-8"},
        {"{\"name\": \"\xc0\xaf\"}", "not UTF-8"},             // overlong '/'
        {"{\"name\": \"\\ud800x\"}", "high surrogate without its low half"},
        {"{\"name\": \"\\udc00\"}", "lone low surrogate"},
        {"{\"x\": 1e400}", "x: 1e400 is out of the range of a double"},
        {"{\"x\": 1.}", "malformed JSON: a digit must follow the decimal point"},
        {"{\"x\": .5}", "malformed JSON: unexpected '.'"},
        {"{\"x\": +1}", "malformed JSON: unexpected '+'"},
        {"{\"x\": [1, 2,]}", "x: malformed JSON: trailing comma before ']'"},
        {"{\"x\": 1,}", "malformed JSON: trailing comma before '}'"},
        {"{\"x\":\f1}", "unexpected byte 0x0c"},
        {"{\"x\": 1} {}", "t.json:1:10: (top level): malformed JSON: text after the JSON value"},
        {"{\"x\": \"\\q\"}", "unknown escape \\q"},
        {"\xef\xbb\xbf{}", "byte-order mark"},
        {"", "malformed JSON: empty"},
        {"{\"x\": tru}", "malformed JSON: unknown word"},
        {"{\"dataset\": {\"name\": \"fashion-mnist\"}, \"model\": {\"name\": \"mlp\"},", "malformed JSON"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *j = (cJSON *)1;
        FpError err = {0};
        FpStatus st = jv_parse("t.json", cases[k].text, strlen(cases[k].text), &j, &err);
        ck_assert_msg(st == FP_EFORMAT, "case %zu (%s): status %d", k, cases[k].text, st);
        ck_assert_ptr_null(j);
        ck_assert_msg(strstr(err.msg, cases[k].want) != NULL, "case %zu: got \"%s\", want \"%s\"", k, err.msg,
                      cases[k].want);
        ck_assert_ptr_null(cli_unclean_line(strcat(err.msg, "\n")));
    }
    // Depth: 600 nested arrays.
    char deep[1300];
    memset(deep, '[', 600);
    memset(deep + 600, ']', 600);
    deep[1200] = 0;
    cJSON *j = NULL;
    FpError err = {0};
    ck_assert_int_eq(jv_parse("t.json", deep, 1200, &j, &err), FP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "nested deeper than 512 levels"));
    // A NUL byte inside the text (cJSON would stop there).
    ck_assert_int_eq(jv_parse("t.json", "{\"a\": 1}\0{", 10, &j, &err), FP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "text after the JSON value"));
}
END_TEST

// What strict JSON allows still parses to the same tree cJSON gives.
START_TEST(strict_json_accepts) {
    const char *text = " {\"a\": [0, -0, 1.5e3, 2E-2, -1.25, 10, 1e+2], \"s\": \"\\u00e9\\ud83d\\ude00 \\\"\\\\\\/\\b\\f\\n\\r\\t\","
                       "\r\n \"\\u0065\": {}, \"e\\u0301\": [], \"t\": true, \"f\": false, \"n\": null, \"u\": \"ε✓\x7f\"}\n";
    cJSON *j = NULL;
    FpError err = {0};
    ck_assert_msg(jv_parse("t.json", text, strlen(text), &j, &err) == FP_OK, "%s", err.msg);
    cJSON *ref = cJSON_Parse(text);
    ck_assert(cJSON_Compare(j, ref, 1));
    ck_assert_str_eq(cJSON_GetObjectItem(j, "s")->valuestring, "é😀 \"\\/\b\f\n\r\t");
    cJSON_Delete(ref);
    cJSON_Delete(j);
}
END_TEST

// Integers are read from their text where a double would round (case 4).
START_TEST(exact_integers_read_and_written) {
    static const struct {
        const char *literal;
        long long hi, want;
        const char *error; // NULL: accepted as want
    } cases[] = {
        {"9007199254740991", EXPERIMENT_SEED_MAX, 9007199254740991LL, NULL},
        {"9007199254740992", EXPERIMENT_SEED_MAX, 0, "must be in [0, 9007199254740991], got 9007199254740992"},
        {"9007199254740993", EXPERIMENT_SEED_MAX, 0, "got 9007199254740993"},
        {"9007199254740993", 1LL << 62, 9007199254740993LL, NULL}, // a double would say ...992
        {"4503599627370496.5", 1LL << 62, 0, "must be an integer, got 4503599627370496.5"},
        {"4503599627370496.0", 1LL << 62, 4503599627370496LL, NULL},
        {"450359962737049600e-2", 1LL << 62, 4503599627370496LL, NULL},
        {"1.5e1", 100, 15, NULL},
        {"12345678901234567890123", 1LL << 62, 0, "must be in [0, 4611686018427387904], got 1234567890123456789"},
        {"1e5", 100, 0, "must be in [0, 100], got 100000"},
        {"2.5", 100, 0, "must be an integer"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[128];
        snprintf(text, sizeof text, "{\"seed\": %s}", cases[k].literal);
        cJSON *j = NULL;
        FpError err = {0};
        ck_assert_int_eq(jv_parse("t.json", text, strlen(text), &j, &err), FP_OK);
        long long v = -1;
        FpStatus st = jv_int(j, "", "seed", JV_REQUIRED, 0, 0, cases[k].hi, &v, &err);
        if (cases[k].error) {
            ck_assert_msg(st == FP_EPARAM, "case %zu accepted as %lld", k, v);
            ck_assert_msg(strstr(err.msg, cases[k].error) != NULL, "case %zu: %s", k, err.msg);
        } else {
            ck_assert_msg(st == FP_OK, "case %zu: %s", k, err.msg);
            ck_assert_msg(v == cases[k].want, "case %zu: %lld != %lld", k, v, cases[k].want);
        }
        cJSON_Delete(j);
    }
    // Written with every digit: cJSON alone writes 5e+15 and 9.00719925474099e+15 for these.
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "a", 5000000000000001.0);
    cJSON_AddNumberToObject(o, "b", 9007199254740990.0);
    cJSON_AddNumberToObject(o, "c", 9007199254740991.0);
    cJSON_AddNumberToObject(o, "d", 0.1);
    cJSON_AddNumberToObject(o, "e", 1e300);
    char *naive = cJSON_PrintUnformatted(o);
    ck_assert_ptr_null(strstr(naive, "9007199254740991")); // the control: cJSON rounds
    free(naive);
    char *text = jv_print(o, 0);
    ck_assert_str_eq(text, "{\"a\":5000000000000001,\"b\":9007199254740990,\"c\":9007199254740991,\"d\":0.1,\"e\":1e+300}");
    ck_assert_int_eq(cJSON_IsNumber(cJSON_GetObjectItem(o, "a")), 1); // the tree is unchanged
    free(text);
    cJSON_Delete(o);
}
END_TEST

START_TEST(local_steps_and_epochs_exclusive) {
    cJSON *j = cJSON_Parse("{\"local_epochs\": 2, \"local_steps\": 5}");
    FedConfig c;
    FpError err = {0};
    ck_assert_int_eq(fed_config_parse(j, "federation", &c, &err), FP_EPARAM);
    ck_assert_str_eq(err.msg, "federation.local_steps: give \"local_epochs\" or \"local_steps\", not both");
    cJSON_Delete(j);
    j = cJSON_Parse("{\"local_steps\": 5}");
    ck_assert_int_eq(fed_config_parse(j, "federation", &c, &err), FP_OK);
    ck_assert_int_eq(c.local_steps, 5);
    cJSON_Delete(j);
}
END_TEST

// Duplicate keys in a config, a matrix and a baseline: exit 2 naming file, line and key
// (before, the first one won: "clients": 2, "clients": 3 ran with 2).
START_TEST(cli_duplicate_keys_every_file) {
    char cfg[2048], path[400], mpath[400], bpath[400], dir[400];
    tiny_config(cfg, sizeof cfg, "{\"clients\": 2,\n \"clients\": 3, \"rounds\": 1}", NULL, NULL);
    write_text(scratch_path(tmp_dir, "dup.json", path, sizeof path), cfg);
    int rc = RUN("train", "--config", path);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "dup.json:3:2: federation.clients: duplicate key (first at line 2"));
    write_text(scratch_path(tmp_dir, "m.json", mpath, sizeof mpath),
               "{\"defenses\": [{\"name\": \"none\"}], \"seed\": 1, \"seed\": 1}");
    rc = RUN("matrix", mpath, "--out", scratch_path(tmp_dir, "mout", dir, sizeof dir));
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "m.json:1:45: seed: duplicate key (first at line 1, column 34)"));
    ck_assert_int_eq(access(dir, F_OK), -1); // nothing ran
    write_text(scratch_path(tmp_dir, "b.json", bpath, sizeof bpath), "{\"bounds\": [], \"bounds\": []}");
    rc = RUN("check", tmp_dir, "--baseline", bpath);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "b.json:1:16: bounds: duplicate key"));
}
END_TEST

// The largest seed is recorded exactly (cJSON alone wrote 9.00719925474099e+15, the
// same for …990, …991 and …992: exact_integers_read_and_written checks those apart),
// and 2^53 itself is refused (case 4).
START_TEST(cli_seeds_exact) {
    char cfg[2048], path[400], out[400];
    tiny_config(cfg, sizeof cfg, NULL, NULL, ", \"seed\": 9007199254740991");
    write_text(scratch_path(tmp_dir, "seed.json", path, sizeof path), cfg);
    int rc = RUN("train", "--config", path, "--out", scratch_path(tmp_dir, "seed-result.json", out, sizeof out));
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(read_text(out, text_buf, sizeof text_buf), "\"seed\":\t9007199254740991,") != NULL, "%s",
                  read_text(out, text_buf, sizeof text_buf));
    tiny_config(cfg, sizeof cfg, NULL, NULL, ", \"seed\": 9007199254740992");
    write_text(path, cfg);
    rc = RUN("train", "--config", path);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "seed: must be in [0, 9007199254740991], got 9007199254740992"));
}
END_TEST

// A repeated option is an error, for every command, in both spellings (before, the
// first one won: --epsilon 1 --epsilon 2 audited epsilon 1). main() checks it before
// any command runs; the parser itself is checked here without a process.
START_TEST(cli_repeated_option) {
    char *twice[] = {"audit", "--epsilon", "1", "--clip", "1", "--epsilon=2"};
    char *short_twice[] = {"report", "DIR", "-o", "a.html", "-o", "b.html"};
    char *negatives[] = {"audit", "--range", "-0.5", "0.5", "--input", "-0.5", "-0.5", "0.5", "--title", "-"};
    char *once[] = {"train", "--config", "c.json", "--out", "--config"}; // a value may look like an option once
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY); // its error lines are checked below, through main
    ck_assert(saved >= 0 && null >= 0 && dup2(null, 2) == 2);
    int r[4] = {cli_reject_repeated_options("audit", 6, twice), cli_reject_repeated_options("report", 6, short_twice),
                cli_reject_repeated_options("audit", 10, negatives), cli_reject_repeated_options("train", 4, once)};
    dup2(saved, 2);
    close(saved);
    close(null);
    ck_assert_int_eq(r[0], 2);
    ck_assert_int_eq(r[1], 2);
    ck_assert_int_eq(r[2], 0);
    ck_assert_int_eq(r[3], 0);
    int rc = RUN("accountant", "--q", "0.1", "--sigma", "1", "--steps", "10", "--delta", "1e-5", "--sigma", "2");
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_str_eq(err_buf, "fedpriv accountant: --sigma is given twice (each option once; fedpriv accountant --help)\n");
}
END_TEST

// Thread counts: honoured up to FED_MAX_THREADS and recorded, rejected above with the
// maximum (before: "threads": 200 ran 16 client workers and recorded 200), one line for
// --threads 1e9 (before: two).
START_TEST(cli_threads_honoured_or_rejected) {
    char cfg[2048], path[400], out[400];
    tiny_config(cfg, sizeof cfg, NULL, NULL, ", \"threads\": 200");
    write_text(scratch_path(tmp_dir, "t200.json", path, sizeof path), cfg);
    int rc = RUN("train", "--config", path);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "threads: must be in [1, 16], got 200"));
    tiny_config(cfg, sizeof cfg, NULL, NULL, NULL);
    write_text(path, cfg);
    const char *bad[] = {"1e9", "17"};
    for (int k = 0; k < 2; k++) {
        rc = RUN("train", "--config", path, "--threads", bad[k]);
        ck_assert_int_eq(rc, 2);
        assert_one_clean_line(err_buf);
        ck_assert_ptr_nonnull(strstr(err_buf, "--threads must be an integer in [1, 16]"));
    }
    rc = RUN("train", "--config", path, "--threads", "16", "--out", scratch_path(tmp_dir, "t16.json", out, sizeof out));
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_ptr_nonnull(strstr(read_text(out, text_buf, sizeof text_buf), "\"threads\":\t16,"));
}
END_TEST

// Numbers out of a type's range are numbers: a range message, not "not a number".
START_TEST(cli_numbers_out_of_range) {
    int rc = RUN("audit", "--mechanism", "laplace", "--epsilon", "1e-320", "--clip", "1");
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "epsilon: must be in [1e-09, 15], got 9.99989e-321"));
    rc = RUN("accountant", "--q", "0.1", "--sigma", "1e400", "--steps", "10", "--delta", "1e-5");
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(err_buf, "fedpriv accountant: --sigma: 1e400 is out of range (finite numbers up to ±1.8e308)\n");
    rc = RUN("accountant", "--q", "0.1", "--sigma", "1", "--steps", "10", "--delta", "1e-400");
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "--delta: 1e-400 is too close to 0 to represent"));
    // A CSV value beyond float32.
    char csv[400], cfg[2048], path[400];
    write_text(scratch_path(tmp_dir, "big.csv", csv, sizeof csv), "a,label\n1,0\n1e308,1\n2,0\n");
    tiny_config(cfg, sizeof cfg, NULL, NULL, NULL);
    char *p = strstr(cfg, "tiny.csv");
    memcpy(p, "big.csv\"", 8);
    memmove(p + 7, p + 8, strlen(p + 8) + 1);
    write_text(scratch_path(tmp_dir, "big.json", path, sizeof path), cfg);
    rc = RUN("train", "--config", path);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "big.csv:3:1: 1e308 is out of range (values are float32: |x| <= 3.4e38)"));
}
END_TEST

// sigma 0 spends an infinite epsilon, and says so (before: "epsilon inf at alpha nan").
START_TEST(cli_accountant_sigma_zero) {
    int rc = RUN("accountant", "--q", "0.1", "--sigma", "0", "--steps", "10", "--delta", "1e-5");
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_null(strstr(out_buf, "nan"));
    ck_assert_ptr_nonnull(strstr(out_buf, "epsilon inf  (no finite bound: sigma 0 adds no noise"));
    rc = RUN("accountant", "--q", "0.1", "--sigma", "0", "--steps", "10", "--delta", "1e-5", "--json");
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(strstr(out_buf, "\"epsilon\":\"inf\",\"alpha\":null"));
}
END_TEST

// ---- 3. dataset shapes checked at load ----------------------------------------------------

static void write_be32(FILE *f, uint32_t v) {
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
    fwrite(b, 1, 4, f);
}

// An IDX image file of n images h x w (pixel values i % 251) and its labels (i % 10).
static void write_idx_pair(const char *dir, const char *prefix, int n, int h, int w) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, prefix);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    write_be32(f, 0x803), write_be32(f, (uint32_t)n), write_be32(f, (uint32_t)h), write_be32(f, (uint32_t)w);
    for (int i = 0; i < n * h * w; i++)
        fputc(i % 251, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, prefix);
    f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    write_be32(f, 0x801), write_be32(f, (uint32_t)n);
    for (int i = 0; i < n; i++)
        fputc(i % 10, f);
    ck_assert_int_eq(fclose(f), 0);
}

// Test images 28x29 beside 28x28 training images: exit 2 before training, naming both
// files, for train and for matrix (before: train failed after training with "evaluation
// failed: unsupported", matrix failed every cell and exited 1).
START_TEST(cli_dataset_shapes_checked_at_load) {
    char dir[400], cfg[1024], path[400], mpath[400], out[400];
    scratch_path(tmp_dir, "idx", dir, sizeof dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    write_idx_pair(dir, "train", 40, 28, 28);
    write_idx_pair(dir, "t10k", 20, 28, 29);
    snprintf(cfg, sizeof cfg,
             "{\"seed\": 1, \"dataset\": {\"name\": \"mnist\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}, \"threads\": 1%s}",
             dir, "");
    write_text(scratch_path(tmp_dir, "shape.json", path, sizeof path), cfg);
    int rc = RUN("train", "--config", path, "--out", scratch_path(tmp_dir, "shape-result.json", out, sizeof out));
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, "dataset: the test set ") && strstr(err_buf, "idx/t10k-images-idx3-ubyte has samples of 1x28x29") &&
                      strstr(err_buf, "idx/train-images-idx3-ubyte 1x28x28: they must match"),
                  "%s", err_buf);
    ck_assert_ptr_null(strstr(err_buf, "round")); // no training happened
    ck_assert_int_eq(access(out, F_OK), -1);
    snprintf(cfg, sizeof cfg,
             "{\"seed\": 1, \"dataset\": {\"name\": \"mnist\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}, \"threads\": 1, \"defenses\": [{\"name\": \"none\"}]}",
             dir);
    write_text(scratch_path(tmp_dir, "shape-matrix.json", mpath, sizeof mpath), cfg);
    rc = RUN("matrix", mpath, "--out", scratch_path(tmp_dir, "shape-run", out, sizeof out));
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "they must match"));
    // The same files with matching shapes train.
    write_idx_pair(dir, "t10k", 20, 28, 28);
    rc = RUN("train", "--config", path, "--out", scratch_path(tmp_dir, "shape-result.json", out, sizeof out));
    ck_assert_msg(rc == 0, "%s", err_buf);
}
END_TEST

// ---- 2. the whole matrix's size, before expansion ------------------------------------------

// A defense that counts its create() calls (the matrix validates each cell through it)
// and refuses "k" < 0.
static int count_creates;
static FpStatus count_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                             FpError *err) {
    count_creates++;
    static const char *const keys[] = {"name", "epsilon", "k", NULL};
    FP_TRY(jv_keys(params, path, keys, err));
    double eps, k;
    FP_TRY(jv_number(params, path, "epsilon", JV_REQUIRED, 0, 0, 1, 1e6, 0, &eps, err));
    FP_TRY(jv_number(params, path, "k", JV_OPTIONAL, 1, 0, 0, 1e6, 0, &k, err));
    *state = NULL;
    return FP_OK;
}
static void count_destroy(void *state) {}
static UploadKind count_upload_kind(const void *state) { return UPLOAD_WEIGHTS; }
static FpStatus count_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) { return FP_OK; }
static void count_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    *rec = (PrivacyRecord){.unit = "none", .epsilon_round_nominal = INFINITY, .epsilon_total_nominal = INFINITY,
                           .epsilon_total_sound = INFINITY, .sigma = -1};
}
static const DefenseOps count_defense = {.name = "count", .summary = "counts validations", .create = count_create,
                                         .destroy = count_destroy, .upload_kind = count_upload_kind,
                                         .client_perturb = count_perturb, .privacy = count_privacy};
static const DefenseOps *count_find(const char *name) {
    return strcmp(name, "count") == 0 ? &count_defense : defense_find(name);
}

static cJSON *count_matrix(const char *defenses) {
    char csv[400];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_tiny_csv(csv);
    size_t n = strlen(defenses) + 1024;
    char *text = malloc(n);
    ck_assert_ptr_nonnull(text);
    snprintf(text, n,
             "{\"seed\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}, \"threads\": 1, \"defenses\": %s}",
             csv, defenses);
    cJSON *j = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(j);
    return j;
}

// A bad value at the end of a long list is found after about the sum of the list
// lengths (on-axis cells first), not their product; the message names the cell.
START_TEST(matrix_bad_parameter_found_fast) {
    char defs[4096];
    int k = snprintf(defs, sizeof defs, "[{\"name\": \"count\", \"epsilon\": [");
    for (int i = 1; i <= 59; i++)
        k += snprintf(defs + k, sizeof defs - k, "%d, ", i);
    k += snprintf(defs + k, sizeof defs - k, "-1], \"sweep\": {\"k\": [");
    for (int i = 1; i <= 100; i++)
        k += snprintf(defs + k, sizeof defs - k, "%s%d", i > 1 ? ", " : "", i);
    snprintf(defs + k, sizeof defs - k, "]}}]");
    cJSON *root = count_matrix(defs);
    MatrixRegistry reg = {.defense_find = count_find};
    MatrixOptions mo = {.registry = &reg};
    Matrix *m = NULL;
    FpError err = {0};
    count_creates = 0;
    ck_assert_int_eq(matrix_load(root, &mo, &m, &err), FP_EPARAM);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.msg, "defenses[0].epsilon: must be in (0, 1e+06], got -1 (cell \"count ε=-1 k=1\")"),
                  "%s", err.msg);
    // 6000 cells, epsilon outermost: in file order the bad setting is cell 5901; the
    // on-axis cells are 60 + 99, and it is one of them.
    ck_assert_msg(count_creates <= 159, "%d validations before the error", count_creates);
    cJSON_Delete(root);
}
END_TEST

// The limit is the whole matrix's: 200 entries x 60 epsilons (12000 cells, each entry
// small) fail before anything is expanded, as do 2000 cells x 60 attacks.
START_TEST(matrix_size_limits_whole_matrix) {
    static char defs[1 << 16];
    int k = snprintf(defs, sizeof defs, "[");
    for (int e = 0; e < 200; e++) {
        k += snprintf(defs + k, sizeof defs - k, "%s{\"name\": \"count\", \"k\": %d, \"epsilon\": [", e ? ", " : "", e);
        for (int i = 1; i <= 60; i++)
            k += snprintf(defs + k, sizeof defs - k, "%s%d", i > 1 ? ", " : "", i);
        k += snprintf(defs + k, sizeof defs - k, "]}");
    }
    snprintf(defs + k, sizeof defs - k, "]");
    cJSON *root = count_matrix(defs);
    MatrixRegistry reg = {.defense_find = count_find};
    MatrixOptions mo = {.registry = &reg};
    Matrix *m = NULL;
    FpError err = {0};
    count_creates = 0;
    ck_assert_int_eq(matrix_load(root, &mo, &m, &err), FP_EPARAM);
    ck_assert_str_eq(err.msg, "defenses: the 200 entries expand into 12000 cells, more than the limit of 10000 per "
                              "matrix (split it into several matrix files, or sweep fewer values)");
    ck_assert_int_eq(count_creates, 0);
    cJSON_Delete(root);
    // Within the cell limit, but too many runs: 2000 cells x (1 + 60 attacks).
    k = snprintf(defs, sizeof defs, "[{\"name\": \"count\", \"epsilon\": [");
    for (int i = 1; i <= 2000; i++)
        k += snprintf(defs + k, sizeof defs - k, "%s%d", i > 1 ? ", " : "", i);
    snprintf(defs + k, sizeof defs - k, "]}]");
    root = count_matrix(defs);
    cJSON *atk = cJSON_AddArrayToObject(root, "attacks");
    for (int i = 0; i < 60; i++)
        cJSON_AddItemToArray(atk, cJSON_Parse("{\"name\": \"ml-leaks\"}"));
    ck_assert_int_eq(matrix_load(root, &mo, &m, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "attacks: 2000 cells x (training + 60 attacks) = 122000 runs, more than the "
                                          "limit of 100000"));
    ck_assert_int_eq(count_creates, 0);
    cJSON_Delete(root);
}
END_TEST

// The file: 200 entries x 999 epsilons. Exit 2 at once with one line (before:
// nothing printed for minutes while memory grew past 1.3 GB); the process stays small.
// "Small" is measured against the same binary rejecting a one-entry matrix at load:
// what the process needs before reading any input (its libraries, ASan's shadow memory)
// varies with the build by hundreds of MB, while parsing and refusing the 1 MB bomb adds
// about 30 MB (release) to 60 MB (ASan).
START_TEST(cli_matrix_bomb_fails_fast) {
    char mpath[400], spath[400], dir[400], csv[400];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    write_tiny_csv(csv);
    FILE *f = fopen(scratch_path(tmp_dir, "bomb.json", mpath, sizeof mpath), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"seed\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
               " \"threads\": 1, \"defenses\": [", csv);
    for (int e = 0; e < 200; e++) {
        fprintf(f, "%s{\"name\": \"gaussian-dpfedavg\", \"clip\": %g, \"epsilon\": [", e ? ",\n" : "", 1 + 0.01 * e);
        for (int i = 1; i <= 999; i++)
            fprintf(f, "%s%g", i > 1 ? ", " : "", 0.01 * i);
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    ck_assert_int_eq(fclose(f), 0);
    // The baseline: one entry, refused at load for an unknown attack.
    f = fopen(scratch_path(tmp_dir, "small.json", spath, sizeof spath), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"seed\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
               " \"threads\": 1, \"defenses\": [{\"name\": \"gaussian-dpfedavg\", \"clip\": 1, \"epsilon\": [0.5, 1]}],"
               " \"attacks\": [{\"name\": \"no-such-attack\"}]}\n", csv);
    ck_assert_int_eq(fclose(f), 0);
    struct rusage base, bomb;
    const char *const small_args[] = {"matrix", spath, "--out",
                                      scratch_path(tmp_dir, "small-run", dir, sizeof dir), NULL};
    int rc = cli_run_usage(small_args, out_buf, err_buf, OUT_CAP, &base);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    const char *const bomb_args[] = {"matrix", mpath, "--out",
                                     scratch_path(tmp_dir, "bomb-run", dir, sizeof dir), NULL};
    rc = cli_run_usage(bomb_args, out_buf, err_buf, OUT_CAP, &bomb);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "defenses: the 200 entries expand into 199800 cells, more than the limit"));
    ck_assert_int_eq(access(dir, F_OK), -1);
    long grew = bomb.ru_maxrss - base.ru_maxrss;
    fprintf(stderr, "cli_matrix_bomb_fails_fast: peak RSS %ld KiB, %ld KiB above a one-entry matrix\n",
            bomb.ru_maxrss, grew);
    ck_assert_msg(grew < 128 * 1024, "the matrix process reached %ld KiB, %ld KiB above a one-entry matrix",
                  bomb.ru_maxrss, grew);
}
END_TEST

// ---- 1 and 8. run folders and outputs -----------------------------------------------------

// An output that cannot be written fails before any training: a read-only folder, a
// directory named as the result file (before: training ran to the end, then "cannot
// write"). No progress line (training prints one per round) appears.
START_TEST(cli_outputs_checked_before_work) {
    char cfg[2048], path[400], ro[400], out[500];
    tiny_config(cfg, sizeof cfg, "{\"clients\": 2, \"rounds\": 3, \"batch_size\": 16}", NULL, NULL);
    write_text(scratch_path(tmp_dir, "cfg.json", path, sizeof path), cfg);
    scratch_path(tmp_dir, "ro", ro, sizeof ro);
    ck_assert_int_eq(mkdir(ro, 0500), 0);
    if (access(ro, W_OK) == 0) { // root writes into a read-only folder; not into sysfs
        snprintf(ro, sizeof ro, "/sys");
        int fd = open("/sys/fedpriv-probe", O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            close(fd);
            unlink("/sys/fedpriv-probe");
            fprintf(stderr, "SKIP: no folder here refuses this user's writes\n");
            return;
        }
    }
    snprintf(out, sizeof out, "%s/result.json", ro);
    int rc = RUN("train", "--config", path, "--out", out);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "/result.json: cannot write there: "));
    ck_assert_ptr_null(strstr(err_buf, "round")); // nothing trained
    rc = RUN("train", "--config", path, "--out", tmp_dir);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, ": is a directory (give a file name)"));
    snprintf(out, sizeof out, "%s/run", ro);
    rc = RUN("matrix", path, "--out", out);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "/run: cannot write there"));
    rc = RUN("attack", "ml-leaks", "--config", path, "--out", out);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "cannot write there"));
}
END_TEST

// A second matrix on a folder another run holds says who holds it, at once (before: it
// waited without a word). The lock is held here by this process, as a run would.
START_TEST(cli_matrix_lock_names_holder) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN"))
        return;
    char dir[400], lock[500], mpath[400], csv[400], text[1024], host[256] = "";
    scratch_path(tmp_dir, "held", dir, sizeof dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    int fd = open(lock, O_RDWR | O_CREAT, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
    gethostname(host, sizeof host - 1);
    char line[400];
    int n = snprintf(line, sizeof line, "pid %ld on %s since 2030-01-02T03:04:05Z\n", (long)getpid(), host);
    ck_assert_int_eq(write(fd, line, (size_t)n), n);
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    write_tiny_csv(csv);
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}, \"threads\": 1, \"defenses\": [{\"name\": \"none\"}]}",
             csv);
    write_text(scratch_path(tmp_dir, "m.json", mpath, sizeof mpath), text);
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    char want[400];
    snprintf(want, sizeof want, "another fedpriv matrix is writing this folder (pid %ld on %s since 2030-01-02T03:04:05Z)",
             (long)getpid(), host);
    ck_assert_msg(strstr(err_buf, want) != NULL, "%s", err_buf);
    close(fd); // released: the run goes ahead and writes its own note
    rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "%s", err_buf);
    snprintf(want, sizeof want, " on %s since ", host);
    ck_assert_ptr_nonnull(strstr(read_text(lock, text_buf, sizeof text_buf), want));
}
END_TEST

// A different matrix into an old folder is refused, naming both, and the folder is left
// as it was (before: a warning about the old cells, and results.json became the new
// matrix's, so the old cells dropped out of report and check: issue 33, case 5); the
// same matrix file edited notes the cells that are no longer its own. A cells folder
// that is a link out of the run is refused.
START_TEST(cli_matrix_stale_cells_and_linked_cells) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN"))
        return;
    char dir[400];
    tiny_matrix_run("old", dir, sizeof dir);
    char mpath[400], oldpath[400], csv[400], text[1024], index[500], real_old[4096], real_new[4096];
    scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv);
    snprintf(text, sizeof text,
             "{\"seed\": 2, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1}, \"threads\": 1, \"defenses\": [{\"name\": \"none\"}]}",
             csv);
    write_text(scratch_path(tmp_dir, "new.json", mpath, sizeof mpath), text);
    snprintf(index, sizeof index, "%s/results.json", dir);
    char *before = strdup(read_text(index, text_buf, sizeof text_buf));
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_ptr_nonnull(realpath(scratch_path(tmp_dir, "old.json", oldpath, sizeof oldpath), real_old));
    ck_assert_ptr_nonnull(realpath(mpath, real_new));
    char want[9000];
    snprintf(want, sizeof want, "/old: this run folder belongs to the matrix %s, not to the matrix %s", real_old,
             real_new);
    ck_assert_msg(strstr(err_buf, want) != NULL, "%s", err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "use another --out folder"));
    ck_assert_str_eq(read_text(index, text_buf, sizeof text_buf), before); // untouched
    free(before);
    // The old matrix's own file, edited (another seed: a new cell), extends the folder and
    // notes the old cell.
    write_text(oldpath, text);
    rc = RUN("matrix", oldpath, "--out", dir);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "/old/cells holds 1 cell file not of this matrix as it is now (e.g. cells/none-"),
                  "%s", err_buf);
    // cells -> a folder outside the run.
    char other[400], cells[500], target[400];
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "elsewhere", other, sizeof other), 0700), 0);
    scratch_path(tmp_dir, "linked", dir, sizeof dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(cells, sizeof cells, "%s/cells", dir);
    ck_assert_ptr_nonnull(realpath(other, target));
    ck_assert_int_eq(symlink(target, cells), 0);
    rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(err_buf, "/linked/cells: not a folder (a symbolic link is not followed"));
    ck_assert_int_eq(rmdir(other), 0); // nothing was written there
}
END_TEST

// No CUDA device is the machine's limit, like a missing build: exit 2, one line.
START_TEST(cli_no_cuda_device_exit_2) {
    char cfg[2048], path[400];
    tiny_config(cfg, sizeof cfg, NULL, NULL, NULL);
    write_text(scratch_path(tmp_dir, "cfg.json", path, sizeof path), cfg);
    setenv("CUDA_VISIBLE_DEVICES", "", 1); // hides any GPU from the child
    int rc = RUN("train", "--config", path, "--device", "cuda");
    SKIP_WITHOUT_BIN(rc);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, "no CUDA device") || strstr(err_buf, "built without the CUDA backend"), "%s",
                  err_buf);
}
END_TEST

// ---- the suite --------------------------------------------------------------------------

Suite *suite_hostile(void) {
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, make_tmp_dir, remove_tmp_dir);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, formatter_escapes_controls);
    tcase_add_test(tc, clean_line_check_catches_raw_bytes);
    tcase_add_test(tc, cli_defense_name_is_escaped);
    tcase_add_test(tc, cli_check_label_is_escaped);
    tcase_add_test(tc, strict_json_rejects);
    tcase_add_test(tc, strict_json_accepts);
    tcase_add_test(tc, exact_integers_read_and_written);
    tcase_add_test(tc, local_steps_and_epochs_exclusive);
    tcase_add_test(tc, cli_duplicate_keys_every_file);
    tcase_add_test(tc, cli_seeds_exact);
    tcase_add_test(tc, cli_repeated_option);
    tcase_add_test(tc, cli_threads_honoured_or_rejected);
    tcase_add_test(tc, cli_numbers_out_of_range);
    tcase_add_test(tc, cli_accountant_sigma_zero);
    tcase_add_test(tc, cli_dataset_shapes_checked_at_load);
    tcase_add_test(tc, matrix_bad_parameter_found_fast);
    tcase_add_test(tc, matrix_size_limits_whole_matrix);
    tcase_add_test(tc, cli_matrix_bomb_fails_fast);
    tcase_add_test(tc, cli_outputs_checked_before_work);
    tcase_add_test(tc, cli_matrix_lock_names_holder);
    tcase_add_test(tc, cli_matrix_stale_cells_and_linked_cells);
    tcase_add_test(tc, cli_no_cuda_device_exit_2);
    suite_add_tcase(s, tc);
    return s;
}
