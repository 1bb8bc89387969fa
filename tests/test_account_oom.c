// Privacy accounting that runs out of memory (defenses/clip.h ClipEpsilonAt, fl/defense.h
// DefenseOps.privacy): the real `fedpriv train`, run with tests/fault_shim.c preloaded, has
// its n-th allocation fail for n = 1, 2, ... (a tiny client-level Gaussian federation)
// until one n fails inside the accountant. For every n tried:
//   - exit 0: each round's privacy record is the clean run's (a failed account never
//     passes for a complete "eps = inf"), or
//   - exit 1 or 2: one line on stderr besides the progress lines, and no result file;
// and the accountant's own failure is reached: one line "out of memory while accounting
// privacy". Two paths: the per-round record (noise_multiplier given) and the calibration
// to a target epsilon at create (epsilon given: its search is the first account to run).
// Skipped when FEDPRIV_BIN is unset (like every CLI test); fails when the shim is missing.
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_run.h"

#define OOM_OUT_CAP (1 << 16)
static char oom_out[OOM_OUT_CAP], oom_err[OOM_OUT_CAP];
static char oom_dir[256];

static void oom_setup(void) {
    const char *base = getenv("TMPDIR");
    snprintf(oom_dir, sizeof oom_dir, "%s/fedpriv-oom-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(oom_dir));
}

static void oom_path(const char *name, char *buf, size_t n) { snprintf(buf, n, "%s/%s", oom_dir, name); }

static void oom_teardown(void) {
    const char *names[] = {"tiny.csv", "run.json", "result.json", "report", NULL};
    char p[400];
    for (int i = 0; names[i]; i++) {
        oom_path(names[i], p, sizeof p);
        unlink(p);
    }
    rmdir(oom_dir);
}

static char *oom_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    b[fread(b, 1, (size_t)n, f)] = '\0';
    fclose(f);
    return b;
}

// Each round's "privacy" object of a result file, printed one after the other (malloc'd).
static char *round_privacy(const char *path) {
    char *text = oom_slurp(path);
    ck_assert_msg(text != NULL, "%s missing after exit 0", path);
    cJSON *j = cJSON_Parse(text);
    free(text);
    ck_assert_msg(j != NULL, "%s does not parse", path);
    cJSON *rounds = cJSON_GetObjectItemCaseSensitive(j, "rounds"), *r;
    ck_assert_msg(cJSON_IsArray(rounds) && cJSON_GetArraySize(rounds) > 0, "%s has no rounds", path);
    size_t cap = 1, len = 0;
    char *all = calloc(1, 1);
    cJSON_ArrayForEach(r, rounds) {
        char *one = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r, "privacy"));
        ck_assert_ptr_nonnull(one);
        size_t k = strlen(one);
        all = realloc(all, cap += k + 1);
        ck_assert_ptr_nonnull(all);
        memcpy(all + len, one, k);
        all[len += k] = '\n';
        all[++len] = '\0';
        free(one);
    }
    cJSON_Delete(j);
    return all;
}

// Runs train under the shim in mode ("count" or "alloc:N"); *count gets the allocations
// counted when the report says.
static int run_train(const char *mode, const char *cfg, const char *result, long *count) {
    char shim[4200], report[400];
    snprintf(shim, sizeof shim, "%s", getenv("FEDPRIV_BIN"));
    char *slash = strrchr(shim, '/');
    snprintf(slash ? slash + 1 : shim, sizeof shim - (size_t)(slash ? slash + 1 - shim : 0), "tests/libfpfault.so");
    ck_assert_msg(access(shim, R_OK) == 0, "%s missing (built with the test runner)", shim);
    oom_path("report", report, sizeof report);
    unlink(report);
    unlink(result);
    setenv("LD_PRELOAD", shim, 1);
    setenv("FEDPRIV_FAULT", mode, 1);
    setenv("FEDPRIV_FAULT_REPORT", report, 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
#if defined(__SANITIZE_ADDRESS__)
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
#endif
    int rc = cli_run((const char *const[]){"train", "--config", cfg, "--out", result, NULL}, oom_out, oom_err,
                     OOM_OUT_CAP);
    unsetenv("LD_PRELOAD");
    unsetenv("FEDPRIV_FAULT");
    unsetenv("FEDPRIV_FAULT_REPORT");
    char *r = oom_slurp(report);
    if (r && count) {
        char *c = strstr(r, "alloc ");
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(sscanf(c, "alloc %ld", count), 1);
    }
    free(r);
    return rc;
}

// stderr less the "round k/n: ..." progress lines.
static int error_lines(const char *err, const char **first) {
    int n = 0;
    *first = NULL;
    for (const char *l = err; *l;) {
        const char *e = strchr(l, '\n');
        size_t k = e ? (size_t)(e - l) : strlen(l);
        if (strncmp(l, "round ", 6) != 0) {
            if (!*first)
                *first = l;
            n++;
        }
        l += k + (e != NULL);
    }
    return n;
}

static void sweep(const char *defense) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN"))
        return; // skipped, like every CLI test
    char csv[400], cfg[400], result[400], text[1024];
    oom_path("tiny.csv", csv, sizeof csv);
    oom_path("run.json", cfg, sizeof cfg);
    oom_path("result.json", result, sizeof result);
    FILE *f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c,d,label\n");
    for (int i = 0; i < 240; i++) {
        int y = i % 3;
        fprintf(f, "%g,%g,%g,%g,%d\n", y + 0.1 * (i % 7), 0.5 * y - 0.05 * (i % 5), ((i * 7) % 11) / 11.0,
                (double)(y == 2), y);
    }
    ck_assert_int_eq(fclose(f), 0);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 4, \"rounds\": 2, \"batch_size\": 16}, \"threads\": 1,"
             " \"defense\": {\"name\": \"gaussian-dpfedavg\", %s}}",
             csv, defense);
    f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);

    long count = 0;
    int rc = run_train("count", cfg, result, &count);
    ck_assert_msg(rc == 0, "clean run: %d: %s", rc, oom_err);
    ck_assert_int_gt(count, 0);
    char *clean = round_privacy(result);
    int reached = 0;
    for (long n = 1; n <= count && !reached; n++) {
        char mode[64];
        snprintf(mode, sizeof mode, "alloc:%ld", n);
        rc = run_train(mode, cfg, result, NULL);
        if (rc == 0) {
            char *got = round_privacy(result);
            ck_assert_msg(strcmp(got, clean) == 0, "alloc:%ld: exit 0 with another account: %.200s (clean: %.200s)", n,
                          got, clean);
            free(got);
            continue;
        }
        const char *line;
        ck_assert_msg(rc == 1 || rc == 2, "alloc:%ld: exit %d: %s", n, rc, oom_err);
        ck_assert_msg(error_lines(oom_err, &line) == 1, "alloc:%ld: not one error line: %s", n, oom_err);
        ck_assert_msg(access(result, F_OK) != 0, "alloc:%ld: exit %d left %s", n, rc, result);
        reached = strstr(line, "out of memory while accounting privacy") != NULL;
    }
    free(clean);
    ck_assert_msg(reached, "no allocation of the %ld counted failed inside the accountant", count);
}

START_TEST(record_account_oom) { sweep("\"noise_multiplier\": 1.0"); }
END_TEST

START_TEST(calibration_oom) { sweep("\"epsilon\": 4"); }
END_TEST

Suite *suite_account_oom(void) {
    Suite *s = suite_create("account_oom");
    TCase *tc = tcase_create("account_oom");
    tcase_add_checked_fixture(tc, oom_setup, oom_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, record_account_oom);
    tcase_add_test(tc, calibration_oom);
    suite_add_tcase(s, tc);
    return s;
}
