// Fault injection (docs/security.md): the real binary, run with tests/fault_shim.c
// preloaded, has its n-th allocation, or its n-th write, flush, close, fsync or rename,
// fail, over a small matrix run, a report, an export and an audit-training resume. Each
// time:
//   1. it exits 1 or 2 with one line of printable text on stderr, or it exits 0 having
//      absorbed the fault, its outputs then those of a run without faults;
//   2. nothing is left half-written: every file in the output folder is complete and
//      valid (JSON parses, PNG ends with IEND, HTML with </html>, CSV with a newline, a
//      cache entry's CRC holds, the audit journal's lines are whole but for the last) and
//      no *.tmp.* file is left;
//   3. a rerun without faults gives the uninterrupted result: results.json and the cells
//      as a clean run's (timings, PIDs and hosts aside), the same export and report bytes,
//      the same audit result.
// Which n: every n when a scenario has at most FAULT_BUDGET counted calls of the kind,
// else FAULT_BUDGET values: the first FAULT_BUDGET / 4 (start-up) and the rest evenly
// spaced up to the count; under the sanitizers the budget is a quarter.
// FEDPRIV_FAULT_BUDGET=K tries K values instead, FEDPRIV_FAULT_EVERY=1 every n (minutes
// to hours); CK_RUN_CASE=NAME runs one scenario (control, export, report, audit, matrix).
// The control test shows the checks fail on a program that truncates a file and reports
// success.
// Skipped when FEDPRIV_BIN is unset (like every CLI test); fails when the shim is missing.
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli_run.h"
#include "core/jsonv.h"

#if defined(__SANITIZE_ADDRESS__)
#define FAULT_BUDGET 12
#define FAULT_SANITIZED 1
#else
#define FAULT_BUDGET 48
#define FAULT_SANITIZED 0
#endif

// ---- files ----------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/fedpriv-fault-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) { return remove(path); }

static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void remove_tmp_dir(void) { rm_tree(tmp_dir); }

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

// The whole file (malloc'd, NUL-terminated; *n its length), or NULL when missing.
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    for (size_t got; (got = fread(b + len, 1, cap - len - 1, f)) > 0;) {
        len += got;
        if (len + 1 == cap) {
            b = realloc(b, cap *= 2);
            ck_assert_ptr_nonnull(b);
        }
    }
    fclose(f);
    b[len] = 0;
    if (n)
        *n = len;
    return b;
}

// Copies file from to file to (the audit journal a scenario starts from).
static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = slurp(from, &n);
    ck_assert_msg(b != NULL, "%s missing", from);
    FILE *f = fopen(to, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    free(b);
}

// ---- the binary, with the shim -----------------------------------------------------------

#define OUT_CAP (1 << 20)
static char out_buf[OUT_CAP], err_buf[OUT_CAP];

static const char *shim_path(void) {
    static char path[4200];
    const char *env = getenv("FEDPRIV_FAULT_SHIM");
    if (env && *env)
        return env;
    const char *bin = getenv("FEDPRIV_BIN");
    snprintf(path, sizeof path, "%s", bin);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "tests/libfpfault.so");
    return path;
}

typedef struct {
    int rc;
    long count[2];  // alloc, io calls counted
    char fired[512]; // the shim's "fired ..." line, "" when nothing failed
} Outcome;

static const char *const kind_names[2] = {"alloc", "io"};

static void set_env(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

// Runs the binary with args (NULL-terminated) under the shim in mode ("alloc:N", "io:N",
// "silent:N" or "count"); stdout and stderr land in out_buf and err_buf.
static Outcome run_mode(const char *mode, const char *const *args) {
    char report[400], asan[1024];
    tmp_path("shim-report", report, sizeof report);
    unlink(report);
    const char *shim = shim_path();
    ck_assert_msg(access(shim, R_OK) == 0, "%s missing: the fault suite's shim is built with the test runner "
                                           "(make ... fedpriv-tests)", shim);
    const char *old_asan = getenv("ASAN_OPTIONS");
    char *saved_asan = old_asan ? strdup(old_asan) : NULL;
    // libasan loads after the shim; a failing process's leaks are not what this suite checks.
    snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0%s", old_asan ? old_asan : "", old_asan ? ":" : "",
             strcmp(mode, "count") == 0 ? "" : ":detect_leaks=0");
    set_env("LD_PRELOAD", shim);
    set_env("FEDPRIV_FAULT", mode);
    set_env("FEDPRIV_FAULT_REPORT", report);
    set_env("OPENBLAS_NUM_THREADS", "1");
    if (FAULT_SANITIZED)
        set_env("ASAN_OPTIONS", asan);
    Outcome o = {0};
    o.rc = cli_run(args, out_buf, err_buf, OUT_CAP);
    set_env("LD_PRELOAD", NULL);
    set_env("FEDPRIV_FAULT", NULL);
    set_env("FEDPRIV_FAULT_REPORT", NULL);
    if (FAULT_SANITIZED)
        set_env("ASAN_OPTIONS", saved_asan);
    free(saved_asan);
    char *r = slurp(report, NULL);
    if (r) {
        char *line = strstr(r, "fired ");
        if (line) {
            size_t k = strcspn(line, "\n");
            snprintf(o.fired, sizeof o.fired, "%.*s", (int)k, line);
        }
        char *counts = strstr(r, "alloc ");
        if (counts)
            sscanf(counts, "alloc %ld io %ld", &o.count[0], &o.count[1]);
        free(r);
    }
    return o;
}

// The values of n tried for count counted calls: see the banner.
static int pick_ns(long count, long *ns, int cap) {
    const char *every = getenv("FEDPRIV_FAULT_EVERY"), *want = getenv("FEDPRIV_FAULT_BUDGET");
    int all = every && strcmp(every, "1") == 0;
    int budget = want && atoi(want) >= 4 ? atoi(want) : FAULT_BUDGET;
    budget = budget < cap ? budget : cap;
    int k = 0;
    if (all || count <= budget) {
        for (long n = 1; n <= count && k < cap; n++)
            ns[k++] = n;
        return k;
    }
    int head = budget / 4, rest = budget - head;
    for (long n = 1; n <= head; n++)
        ns[k++] = n;
    for (int i = 1; i <= rest; i++)
        ns[k++] = head + (long)((double)(count - head) * i / rest);
    return k;
}

// ---- the checks ------------------------------------------------------------------------

// NULL when stderr names the failure in one line of printable text, else what is wrong.
// matrix and audit-training also write progress lines there ("matrix: ...",
// "audit-training: "); beside them there must be one error line, or (matrix, exit 1)
// none when a cell failed, which its progress line says ("...: failed in ...").
static const char *unclean_error(const char *s, int rc) {
    size_t n = strlen(s);
    if (n == 0 || s[n - 1] != '\n')
        return "no whole line";
    int errors = 0, cell_failed = 0;
    for (const char *line = s; *line;) {
        const char *eol = strchr(line, '\n');
        for (const char *p = line; p < eol; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                return "a raw control byte";
        if (strncmp(line, "matrix: ", 8) == 0 || strncmp(line, "audit-training: ", 16) == 0) {
            const char *f = strstr(line, ": failed in ");
            cell_failed += f && f < eol;
        } else
            errors++;
        line = eol + 1;
    }
    if (errors == 1 || (errors == 0 && rc == 1 && cell_failed))
        return NULL;
    return errors ? "more than one error line" : "no error line";
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// The audit journal (audits/training.c, multi-run.txt): the fingerprint line, then
// "run r: a b" lines numbered from 0; only the last may be cut short.
static const char *journal_problem(const char *text, size_t n) {
    if (n == 0)
        return NULL;
    if (strncmp(text, "fedpriv multi-run audit ", 24) != 0)
        return "the first line is not the fingerprint";
    const char *p = strchr(text, '\n');
    if (!p)
        return NULL; // cut inside the first line: the next run starts over
    int want = 0;
    for (p++; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol)
            return NULL; // the last line, cut short
        int r, used = 0;
        double a, b;
        if (sscanf(p, "run %d: %lg %lg%n", &r, &a, &b, &used) != 3 || p + used != eol || r != want)
            return "a line in the middle is not a whole run record";
        want++;
        p = eol + 1;
    }
    return NULL;
}

// What is wrong with the file at path (by its kind), or NULL.
static const char *file_problem(const char *path) {
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    if (strstr(name, ".tmp."))
        return "a temporary file was left behind";
    size_t n;
    char *b = slurp(path, &n);
    if (!b)
        return "unreadable";
    const char *why = NULL;
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char png_end[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    if (ends_with(name, ".json") || ends_with(name, ".running")) {
        cJSON *j = NULL;
        FpError e = {0};
        if (jv_load_file(path, &j, &e) != FP_OK)
            why = "not valid JSON";
        cJSON_Delete(j);
    } else if (ends_with(name, ".png")) {
        if (n < 20 || memcmp(b, png_sig, 8) != 0 || memcmp(b + n - 12, png_end, 12) != 0)
            why = "a PNG without its signature or IEND chunk";
    } else if (ends_with(name, ".html")) {
        if (!ends_with(b, "</html>\n"))
            why = "HTML not ending with </html>";
    } else if (ends_with(name, ".csv") || ends_with(name, ".jsonl")) {
        if (n == 0 || b[n - 1] != '\n')
            why = "a table not ending with a newline";
    } else if (ends_with(name, ".ref")) {
        uint32_t stored;
        if (n < 12 || memcmp(b, "FPREFLG1", 8) != 0)
            why = "a cache entry without its magic";
        else if ((memcpy(&stored, b + n - 4, 4), (uint32_t)crc32(0L, (const Bytef *)b, (uInt)(n - 4)) != stored))
            why = "a cache entry whose CRC does not hold";
    } else if (strcmp(name, "multi-run.txt") == 0) {
        why = journal_problem(b, n);
    }
    free(b);
    return why;
}

static char tree_problem_buf[4600];

static int check_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    if (flag != FTW_F)
        return 0;
    const char *why = file_problem(path);
    if (why) {
        snprintf(tree_problem_buf, sizeof tree_problem_buf, "%s: %s", path, why);
        return 1;
    }
    return 0;
}

// The first half-written or stray file under dir ("" when none).
static const char *tree_problem(const char *dir) {
    tree_problem_buf[0] = 0;
    struct stat st;
    if (stat(dir, &st) == 0)
        nftw(dir, check_entry, 16, FTW_PHYS);
    return tree_problem_buf;
}

// Deletes the members that differ between two clean runs: timings, processes, hosts, when
// a folder was first written (matrix-owner.json's "since"); and
// where an attack's applicability reference came from (the no-defense cell of the run, or
// the attack's own reference run when that cell had not finished: the same numbers).
static void drop_volatile(cJSON *j) {
    if (j && j->string && strcmp(j->string, "applicability") == 0)
        cJSON_DeleteItemFromObjectCaseSensitive(j, "reference");
    static const char *const exact[] = {"pid", "host", "tag", "started", "since", "runs_resumed", NULL};
    for (cJSON *c = j ? j->child : NULL, *next; c; c = next) {
        next = c->next;
        int drop = 0;
        if (c->string) {
            drop = ends_with(c->string, "seconds") || ends_with(c->string, "ms_per_evaluation");
            for (int i = 0; exact[i] && !drop; i++)
                drop = strcmp(c->string, exact[i]) == 0;
        }
        if (drop)
            cJSON_Delete(cJSON_DetachItemViaPointer(j, c));
        else
            drop_volatile(c);
    }
}

// A JSON file's text without its volatile members (malloc'd), or NULL.
static char *stable_json(const char *path) {
    cJSON *j = NULL;
    if (jv_load_file(path, &j, NULL) != FP_OK)
        return NULL;
    drop_volatile(j);
    char *t = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return t;
}

// 1 when the two files hold the same (JSON: the same stable members), else 0.
static int same_file(const char *a, const char *b) {
    if (ends_with(a, ".json")) {
        char *x = stable_json(a), *y = stable_json(b);
        int same = x && y && strcmp(x, y) == 0;
        free(x);
        free(y);
        return same;
    }
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

// The results: files under a clean run's folder that a rerun must reproduce (relative
// paths in clean; the .lock note and the claims aside).
static char diff_buf[4800];
static const char *diff_root_clean, *diff_root_other;

static int compare_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    if (flag != FTW_F)
        return 0;
    const char *rel = path + strlen(diff_root_clean);
    if (ends_with(rel, "/.lock") || ends_with(rel, ".running"))
        return 0;
    char other[4600];
    snprintf(other, sizeof other, "%s%s", diff_root_other, rel);
    if (!same_file(path, other)) {
        snprintf(diff_buf, sizeof diff_buf, "%.4600s differs from the clean run's (or is missing)", other);
        return 1;
    }
    return 0;
}

// "" when every result file of the clean folder is in other with the same content.
static const char *tree_diff(const char *clean, const char *other) {
    diff_buf[0] = 0;
    diff_root_clean = clean;
    diff_root_other = other;
    nftw(clean, compare_entry, 16, FTW_PHYS);
    return diff_buf;
}

// ---- scenarios -------------------------------------------------------------------------
//
// A scenario prepares its inputs once, then for each n: resets the output (reset), runs
// the command with the fault (args), checks, reruns without it when it failed, and
// compares the output (outdir) with the clean run's (cleandir).

typedef struct {
    const char *name;
    const char *const *args;   // the command, run faulted and again clean
    const char *outdir;        // what it writes
    const char *cleandir;      // the same command's output from a clean start
    const char *stdout_clean;  // its standard output when that is the result (export), else NULL
    void (*reset)(const char *outdir);
} Scenario;

static void reset_empty(const char *outdir) { rm_tree(outdir); }

static char journal_start[400]; // the audit journal a resume starts from

static void reset_journal(const char *outdir) {
    rm_tree(outdir);
    ck_assert_int_eq(mkdir(outdir, 0700), 0);
    char to[600];
    snprintf(to, sizeof to, "%s/multi-run.txt", outdir);
    copy_file(journal_start, to);
}

// Runs sc's command under every chosen n of kind, asserting the three properties.
static void run_scenario(const Scenario *sc, int kind) {
    sc->reset(sc->outdir);
    Outcome base = run_mode("count", sc->args);
    ck_assert_msg(base.rc == 0, "%s: the run without faults exits %d: %s", sc->name, base.rc, err_buf);
    long count = base.count[kind];
    ck_assert_msg(count > 0, "%s: no %s calls counted (is the shim working?)", sc->name, kind_names[kind]);
    static long ns[1 << 16];
    int k = pick_ns(count, ns, 1 << 16), fired = 0;
    for (int i = 0; i < k; i++) {
        char mode[64];
        snprintf(mode, sizeof mode, "%s:%ld", kind_names[kind], ns[i]);
        sc->reset(sc->outdir);
        Outcome o = run_mode(mode, sc->args);
        fired += o.fired[0] != 0;
        ck_assert_msg(o.rc == 0 || o.rc == 1 || o.rc == 2, "%s %s (%s): exit %d, stderr: %s", sc->name, mode, o.fired,
                      o.rc, err_buf);
        const char *problem = tree_problem(sc->outdir);
        ck_assert_msg(!problem[0], "%s %s (%s): %s", sc->name, mode, o.fired, problem);
        if (o.rc != 0) {
            const char *why = unclean_error(err_buf, o.rc);
            ck_assert_msg(!why, "%s %s (%s): exit %d and %s on stderr: %s", sc->name, mode, o.fired, o.rc, why,
                          err_buf);
        } else if (sc->stdout_clean) {
            ck_assert_msg(strcmp(out_buf, sc->stdout_clean) == 0, "%s %s (%s): exit 0 with another output", sc->name,
                          mode, o.fired);
        }
        if (o.rc != 0) { // the rerun
            Outcome again = run_mode("count", sc->args);
            ck_assert_msg(again.rc == 0, "%s %s (%s): the rerun exits %d: %s", sc->name, mode, o.fired, again.rc,
                          err_buf);
            if (sc->stdout_clean)
                ck_assert_msg(strcmp(out_buf, sc->stdout_clean) == 0, "%s %s: the rerun's output differs", sc->name,
                              mode);
        }
        if (sc->cleandir) {
            const char *diff = tree_diff(sc->cleandir, sc->outdir);
            ck_assert_msg(!diff[0], "%s %s (%s, exit %d): %s", sc->name, mode, o.fired, o.rc, diff);
        }
    }
    ck_assert_msg(fired == k, "%s: the fault fired in %d of %d runs", sc->name, fired, k);
    fprintf(stderr, "fault: %s: %d of %ld %s calls failed in turn\n", sc->name, k, count, kind_names[kind]);
}

// A tiny image set: IDX files of 12x12 images (DLG's SSIM needs 11x11 at least).
static void write_be32(FILE *f, uint32_t v) {
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
    fwrite(b, 1, 4, f);
}

static void write_idx_pair(const char *dir, const char *prefix, int n, int h, int w) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, prefix);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    write_be32(f, 0x803), write_be32(f, (uint32_t)n), write_be32(f, (uint32_t)h), write_be32(f, (uint32_t)w);
    for (int i = 0; i < n * h * w; i++)
        fputc((i * 37) % 251, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, prefix);
    f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    write_be32(f, 0x801), write_be32(f, (uint32_t)n);
    for (int i = 0; i < n; i++)
        fputc(i % 10, f);
    ck_assert_int_eq(fclose(f), 0);
}

// The matrix under test: 2 cells (no defense, DP-FedAvg), DLG with one image and one
// L-BFGS step of two iterations (its PNGs go through libpng), 2 clients, one round.
static const char *write_matrix(char *path, size_t n) {
    char idx[400], text[2048];
    tmp_path("idx", idx, sizeof idx);
    if (access(idx, F_OK) != 0) {
        ck_assert_int_eq(mkdir(idx, 0700), 0);
        write_idx_pair(idx, "train", 40, 12, 12);
        write_idx_pair(idx, "t10k", 20, 12, 12);
    }
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"mnist\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 4}, \"threads\": 1,"
             " \"defenses\": [{\"name\": \"none\"}, {\"name\": \"gaussian-dpfedavg\", \"epsilon\": [1]}],"
             " \"attacks\": [{\"name\": \"dlg\", \"model\": {\"name\": \"logreg\"}, \"images\": [0], \"steps\": 1,"
             " \"lbfgs\": {\"max_iter\": 2}}]}",
             idx);
    write_text(tmp_path("matrix.json", path, n), text);
    return path;
}

// A clean matrix run into tmp_dir/name.
static const char *clean_matrix(const char *name, char *dir, size_t n) {
    char mpath[400];
    write_matrix(mpath, sizeof mpath);
    tmp_path(name, dir, n);
    int rc = cli_run((const char *const[]){"matrix", mpath, "--out", dir, "--jobs", "1", NULL}, out_buf, err_buf,
                     OUT_CAP);
    ck_assert_msg(rc == 0, "matrix: %d: %s", rc, err_buf);
    return dir;
}

#define NEED_BIN()                                                                                              \
    do {                                                                                                       \
        if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN")) {                                               \
            fprintf(stderr, "SKIP: FEDPRIV_BIN is not set\n");                                                 \
            return;                                                                                            \
        }                                                                                                      \
    } while (0)

static void matrix_scenario(int kind) {
    char mpath[400], clean[400], out[400];
    write_matrix(mpath, sizeof mpath);
    clean_matrix("clean", clean, sizeof clean);
    tmp_path("out", out, sizeof out);
    const char *args[] = {"matrix", mpath, "--out", out, "--jobs", "1", NULL};
    Scenario sc = {"matrix", args, out, clean, NULL, reset_empty};
    run_scenario(&sc, kind);
}

START_TEST(matrix_alloc) {
    NEED_BIN();
    matrix_scenario(0);
}
END_TEST

START_TEST(matrix_io) {
    NEED_BIN();
    matrix_scenario(1);
}
END_TEST

static void reset_dir(const char *outdir) {
    rm_tree(outdir);
    ck_assert_int_eq(mkdir(outdir, 0700), 0);
}

// The report of one finished run, written into its own folder.
static void report_scenario(int kind) {
    char run[400], clean[400], out[400], page[600], clean_page[600];
    clean_matrix("run", run, sizeof run);
    tmp_path("clean-report", clean, sizeof clean);
    reset_dir(clean);
    snprintf(clean_page, sizeof clean_page, "%s/report.html", clean);
    int rc = cli_run((const char *const[]){"report", run, "-o", clean_page, NULL}, out_buf, err_buf, OUT_CAP);
    ck_assert_msg(rc == 0, "report: %d: %s", rc, err_buf);
    tmp_path("report", out, sizeof out);
    snprintf(page, sizeof page, "%s/report.html", out);
    const char *args[] = {"report", run, "-o", page, NULL};
    run_scenario(&(Scenario){"report", args, out, clean, NULL, reset_dir}, kind);
}

START_TEST(report_alloc) {
    NEED_BIN();
    report_scenario(0);
}
END_TEST

START_TEST(report_io) {
    NEED_BIN();
    report_scenario(1);
}
END_TEST

// The export of one finished run, to a file (-o) and to standard output.
static void export_scenario(int kind) {
    char run[400], clean[400], out[400], file[600], clean_file[600];
    clean_matrix("run", run, sizeof run);
    tmp_path("clean-export", clean, sizeof clean);
    reset_dir(clean);
    snprintf(clean_file, sizeof clean_file, "%s/export.csv", clean);
    int rc = cli_run((const char *const[]){"export", run, "-o", clean_file, NULL}, out_buf, err_buf, OUT_CAP);
    ck_assert_msg(rc == 0, "export: %d: %s", rc, err_buf);
    tmp_path("export", out, sizeof out);
    snprintf(file, sizeof file, "%s/export.csv", out);
    const char *to_file[] = {"export", run, "-o", file, NULL};
    run_scenario(&(Scenario){"export -o", to_file, out, clean, NULL, reset_dir}, kind);
    // To standard output: the bytes written there are the result.
    char *expected = slurp(clean_file, NULL);
    ck_assert_ptr_nonnull(expected);
    const char *to_stdout[] = {"export", run, "--format", "csv", NULL};
    run_scenario(&(Scenario){"export", to_stdout, out, NULL, expected, reset_dir}, kind);
    free(expected);
}

START_TEST(export_alloc) {
    NEED_BIN();
    export_scenario(0);
}
END_TEST

START_TEST(export_io) {
    NEED_BIN();
    export_scenario(1);
}
END_TEST

// A multi-run audit of 8 runs on a tiny CSV federation, resumed from a journal holding its
// first 3 runs and half of the fourth; the uninterrupted result is that of the same
// resume without faults.
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

static void audit_scenario(int kind) {
    char csv[400], cfg[400], text[2048], full[400], clean[400], out[400];
    write_tiny_csv(tmp_path("tiny.csv", csv, sizeof csv));
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 4, \"rounds\": 1, \"batch_size\": 16}, \"threads\": 1,"
             " \"defense\": {\"name\": \"gaussian-dpfedavg\", \"epsilon\": 4},"
             " \"attack\": {\"name\": \"audit-training\", \"method\": \"multi-run\", \"runs\": 8}}",
             csv);
    write_text(tmp_path("audit.json", cfg, sizeof cfg), text);
    // The whole audit once, for its journal.
    tmp_path("audit-full", full, sizeof full);
    int rc = cli_run((const char *const[]){"audit-training", "--config", cfg, "--out", full, NULL}, out_buf, err_buf,
                     OUT_CAP);
    ck_assert_msg(rc == 0, "audit-training: %d: %s", rc, err_buf);
    char journal[600];
    snprintf(journal, sizeof journal, "%s/multi-run.txt", full);
    char *j = slurp(journal, NULL);
    ck_assert_ptr_nonnull(j);
    char *cut = j;
    for (int line = 0; line < 4; line++) { // the fingerprint and runs 0-2
        cut = strchr(cut, '\n');
        ck_assert_ptr_nonnull(cut);
        cut++;
    }
    size_t half = strcspn(cut, "\n") / 2;
    cut[half] = 0;
    write_text(tmp_path("journal-start", journal_start, sizeof journal_start), j);
    free(j);
    tmp_path("audit-clean", clean, sizeof clean);
    reset_journal(clean);
    rc = cli_run((const char *const[]){"audit-training", "--config", cfg, "--out", clean, NULL}, out_buf, err_buf,
                 OUT_CAP);
    ck_assert_msg(rc == 0, "audit-training: %d: %s", rc, err_buf);
    ck_assert_msg(strstr(err_buf, "resuming after 3 finished runs"), "%s", err_buf);
    tmp_path("audit", out, sizeof out);
    const char *args[] = {"audit-training", "--config", cfg, "--out", out, NULL};
    run_scenario(&(Scenario){"audit-training resume", args, out, clean, NULL, reset_journal}, kind);
}

START_TEST(audit_resume_alloc) {
    NEED_BIN();
    audit_scenario(0);
}
END_TEST

START_TEST(audit_resume_io) {
    NEED_BIN();
    audit_scenario(1);
}
END_TEST

// ---- the control -----------------------------------------------------------------------

// The checks fail on a broken program: with the shim's "silent" mode the n-th write
// reports success having written half its data. Over the export to a file, some n leaves
// a half-written file the checks flag (and a result that differs from the clean one).
START_TEST(checks_catch_a_truncating_program) {
    NEED_BIN();
    char run[400], clean[400], out[400], file[600], clean_file[600];
    clean_matrix("run", run, sizeof run);
    tmp_path("clean-export", clean, sizeof clean);
    reset_dir(clean);
    snprintf(clean_file, sizeof clean_file, "%s/export.csv", clean);
    int rc = cli_run((const char *const[]){"export", run, "-o", clean_file, NULL}, out_buf, err_buf, OUT_CAP);
    ck_assert_msg(rc == 0, "export: %d: %s", rc, err_buf);
    tmp_path("export", out, sizeof out);
    snprintf(file, sizeof file, "%s/export.csv", out);
    const char *args[] = {"export", run, "-o", file, NULL};
    reset_dir(out);
    Outcome base = run_mode("count", args);
    ck_assert_int_eq(base.rc, 0);
    int flagged = 0, differs = 0;
    for (long n = 1; n <= base.count[1]; n++) {
        char mode[64];
        snprintf(mode, sizeof mode, "silent:%ld", n);
        reset_dir(out);
        Outcome o = run_mode(mode, args);
        ck_assert_int_eq(o.rc, 0); // the broken program claims success
        flagged += tree_problem(out)[0] != 0;
        differs += tree_diff(clean, out)[0] != 0;
    }
    ck_assert_msg(flagged > 0 && differs > 0, "the checks flagged %d and the comparison %d of %ld truncated exports",
                  flagged, differs, base.count[1]);
    // And each file check fails on what it guards against.
    char path[600];
    static const struct {
        const char *name, *text;
    } bad[] = {
        {"a.json", "{\"cells\": [1, 2"}, {"a.png", "\x89PNG\r\n\x1a\n0123456789abcdef"}, {"a.html", "<html><body>"},
        {"a.csv", "x,y\n1,"},           {"a.ref", "FPREFLG1 and no CRC"},               {"b.json.tmp.h.1", "{}"},
        {"multi-run.txt", "fedpriv multi-run audit 0123\nrun 0: 1 2\nrun 1: 0.5run 2: 1 1\nrun 3: 1 1\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", out, bad[i].name);
        write_text(path, bad[i].text);
        ck_assert_msg(file_problem(path) != NULL, "%s passed the checks", bad[i].name);
        unlink(path);
    }
    ck_assert_ptr_nonnull(unclean_error("fedpriv export: two\nfedpriv export: lines\n", 2));
    ck_assert_ptr_nonnull(unclean_error("fedpriv export: raw \x1b[2J\n", 2));
    ck_assert_ptr_nonnull(unclean_error("matrix: running none\n", 2));
    ck_assert_ptr_nonnull(unclean_error("", 1));
    ck_assert_ptr_null(unclean_error("matrix: running none\nfedpriv matrix: x: write failed: No space left\n", 2));
}
END_TEST

// One test case per scenario, so that CK_RUN_CASE=matrix (for one) runs it alone.
Suite *suite_fault(void) {
    Suite *s = suite_create("fault");
    const struct {
        const char *name;
        const TTest *tests[2];
    } cases[] = {
        {"control", {checks_catch_a_truncating_program, NULL}},
        {"export", {export_alloc, export_io}},
        {"report", {report_alloc, report_io}},
        {"audit", {audit_resume_alloc, audit_resume_io}},
        {"matrix", {matrix_alloc, matrix_io}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *t = tcase_create(cases[i].name);
        tcase_add_checked_fixture(t, make_tmp_dir, remove_tmp_dir);
        tcase_set_timeout(t, 600);
        for (int k = 0; k < 2 && cases[i].tests[k]; k++)
            tcase_add_test(t, cases[i].tests[k]);
        suite_add_tcase(s, t);
    }
    return s;
}
