// Hostile input (docs/security.md, "Hostile input"): each case a probe of the tool as an
// attacker would try it found, with the fix's regression test. Unit tests of the strict
// JSON layer and the message formatter, then end-to-end runs of the binary (skipped when
// FEDPRIV_BIN is unset) on a tiny CSV federation that trains in milliseconds.
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "core/jsonv.h"
#include "core/status.h"

// ---- helpers ------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/fedpriv-hostile-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    chmod(path, 0700); // a read-only folder a test made must still go
    return remove(path);
}

static void remove_tmp_dir(void) {
    chmod(tmp_dir, 0700);
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *tmp_path(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", tmp_dir, name);
    return buf;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

// A small, learnable CSV classification set (3 classes, 4 features).
static void write_tiny_csv(const char *path) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c,d,label\n");
    for (int i = 0; i < 240; i++) {
        int y = i % 3;
        fprintf(f, "%g,%g,%g,%g,%d\n", y + 0.1 * (i % 7), 0.5 * y - 0.05 * (i % 5), ((i * 7) % 11) / 11.0,
                (double)(y == 2), y);
    }
    ck_assert_int_eq(fclose(f), 0);
}

// The tiny CSV in tmp_dir and a config that trains on it, with extra top-level keys
// (",\"k\": v" or "") and a federation/defense of the caller's.
static const char *tiny_config(char *buf, size_t n, const char *federation, const char *defense, const char *extra) {
    char csv[400];
    tmp_path("tiny.csv", csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_tiny_csv(csv);
    snprintf(buf, n,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},\n"
             " \"federation\": %s,\n \"defense\": %s, \"threads\": 1%s}\n",
             csv, federation ? federation : "{\"clients\": 2, \"rounds\": 1, \"batch_size\": 16}",
             defense ? defense : "{\"name\": \"none\"}", extra ? extra : "");
    return buf;
}

#define OUT_CAP (1 << 16)
static char out_buf[OUT_CAP], err_buf[OUT_CAP];

// Runs the binary; returns its status, or -1 (the caller then skips).
#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL}, out_buf, err_buf, OUT_CAP)
#define SKIP_WITHOUT_BIN(rc)                                                                                  \
    do {                                                                                                       \
        if ((rc) == -1) {                                                                                      \
            fprintf(stderr, "SKIP: FEDPRIV_BIN is not set\n");                                                 \
            return;                                                                                            \
        }                                                                                                      \
    } while (0)

// NULL when s is one line of printable text (no byte below 0x20 or DEL but the final
// newline), else what is wrong.
static const char *unclean_line(const char *s) {
    if (cli_count_lines(s) != 1)
        return "not exactly one line";
    size_t n = strlen(s);
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return "a raw control byte";
    return NULL;
}

#define assert_one_clean_line(s)                                                                              \
    do {                                                                                                       \
        const char *why_ = unclean_line(s);                                                                    \
        ck_assert_msg(why_ == NULL, "%s in: %s", why_, s);                                                     \
    } while (0)

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
    ck_assert_ptr_null(unclean_line("fedpriv train: x\n"));
    ck_assert_ptr_nonnull(unclean_line("fedpriv train: \x1b]0;x\x07\n"));
    ck_assert_ptr_nonnull(unclean_line("fedpriv train: x\nfedpriv train: ok\n"));
}
END_TEST

START_TEST(cli_defense_name_is_escaped) {
    char cfg[2048], path[400];
    tiny_config(cfg, sizeof cfg, NULL, "{\"name\": \"\\u001b]0;pwned\\u0007x\\nfedpriv train: ok\"}", NULL);
    write_text(tmp_path("esc.json", path, sizeof path), cfg);
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
    tmp_path("tiny.csv", csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_tiny_csv(csv);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 16}, \"threads\": 1,"
             " \"defenses\": [{\"name\": \"none\"}]}",
             csv);
    snprintf(mpath, sizeof mpath, "%s/%s.json", tmp_dir, name);
    write_text(mpath, text);
    tmp_path(name, dir, n);
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "matrix: %d: %s", rc, err_buf);
}

START_TEST(cli_check_label_is_escaped) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN"))
        return;
    char dir[400], base[400];
    tiny_matrix_run("run", dir, sizeof dir);
    write_text(tmp_path("base.json", base, sizeof base),
               "{\"bounds\": [{\"label\": \"\\u001b[2J\\u001b]0;owned\\u0007\\nall bounds hold\","
               " \"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 2}]}");
    int rc = RUN("check", dir, "--baseline", base);
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(cli_count_lines(out_buf), 2);
    for (const char *p = out_buf; *p; p++)
        ck_assert_msg((unsigned char)*p >= 0x20 || *p == '\n', "raw control byte in: %s", out_buf);
    ck_assert_ptr_nonnull(strstr(out_buf, "\\x1b[2J\\x1b]0;owned\\x07\\nall bounds hold"));
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
    suite_add_tcase(s, tc);
    return s;
}
