// The matrix runner (runner/matrix.h) and `fedpriv check` (runner/check.h):
// expansion of ε lists and sweeps, bad matrix files, kill-and-resume (SIGKILL at many
// moments, then a rerun ends with the same cells as an uninterrupted run), --jobs
// determinism, diverged and failed cells, the baseline bounds; and, when FEDPRIV_BIN is
// set (make test), the CLI: bad files exit 2 with one line, the CI matrix
// (fixtures/ci-matrix.json) passes fixtures/ci-baseline.json, and a violated baseline
// exits 1.
//
// Stand-in defenses and attacks (tests/matrix_standins.h) keep the library tests fast
// and independent of which real ones are registered; the CI test uses the real ones.
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>

#include "matrix_compare.h"
#include "matrix_standins.h"
#include "runner/check.h"

#define TEST_DIR "build/test-matrix"
#define CSV TEST_DIR "/blobs.csv"

static void setup_data(void) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
}

static const char *const some_defenses =
    "[{\"name\": \"none\"}, {\"name\": \"noise\", \"variant\": \"paper\", \"epsilon\": [0.5, 1, 2, 4]},"
    " {\"name\": \"explode\"}]";

// ---- expansion and bad files -------------------------------------------------------------

START_TEST(expands_epsilon_lists_and_sweeps) {
    setup_data();
    cJSON *root = standin_matrix(CSV,
                                 "[{\"name\": \"noise\", \"variant\": \"paper\", \"epsilon\": [0.5, 1, 2]},"
                                 " {\"name\": \"noise\", \"epsilon\": 3, \"sweep\": {\"variant\": [\"corrected\", \"paper\"]}},"
                                 " {\"name\": \"none\"}]",
                                 "[{\"name\": \"probe\"}]");
    ck_assert_ptr_nonnull(root);
    Matrix *m = NULL;
    FpError err = {0};
    MatrixOptions mo = {.registry = &standin_registry};
    ck_assert_msg(matrix_load(root, &mo, &m, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(matrix_cell_count(m), 6);
    ck_assert_str_eq(matrix_cell_label(m, 0), "noise paper ε=0.5");
    ck_assert_str_eq(matrix_cell_label(m, 2), "noise paper ε=2");
    ck_assert_str_eq(matrix_cell_label(m, 3), "noise ε=3 variant=\"corrected\"");
    ck_assert_str_eq(matrix_cell_label(m, 4), "noise ε=3 variant=\"paper\"");
    ck_assert_str_eq(matrix_cell_label(m, 5), "none");
    for (int i = 0; i < 6; i++) {
        const char *id = matrix_cell_id(m, i);
        for (const char *p = id; *p; p++)
            ck_assert_msg(strchr("abcdefghijklmnopqrstuvwxyz0123456789.-", *p), "id %s", id);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(id, matrix_cell_id(m, j));
    }
    ck_assert_int_eq(strncmp(matrix_cell_id(m, 0), "noise-paper-0.5-", 16), 0);
    matrix_free(m);
    cJSON_Delete(root);
}
END_TEST

// Cell identities: every seed its own, and "rng": "secure" (its seed carries a flag in
// bit 63, beyond a double's precision) apart from the reproducible runs.
START_TEST(cell_ids_tell_seeds_and_rngs_apart) {
    setup_data();
    char ids[4][96];
    for (int k = 0; k < 4; k++) {
        cJSON *root = standin_matrix(CSV, "[{\"name\": \"none\"}]", "[]");
        cJSON_ReplaceItemInObjectCaseSensitive(root, "seed", cJSON_CreateNumber(k % 2 ? 4 : 3));
        if (k >= 2)
            cJSON_AddStringToObject(root, "rng", "secure");
        Matrix *m = NULL;
        FpError err = {0};
        MatrixOptions mo = {.registry = &standin_registry};
        FpStatus st = matrix_load(root, &mo, &m, &err);
        cJSON_Delete(root);
        if (k >= 2 && st == FP_EBACKEND) { // no getrandom here
            fprintf(stderr, "SKIP: secure rng unavailable: %s\n", err.msg);
            return;
        }
        ck_assert_msg(st == FP_OK, "%s", err.msg);
        snprintf(ids[k], sizeof ids[k], "%s", matrix_cell_id(m, 0));
        matrix_free(m);
    }
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < a; b++)
            ck_assert_str_ne(ids[a], ids[b]);
}
END_TEST

typedef struct {
    const char *defenses, *attacks, *want;
} BadCase;

START_TEST(bad_matrix_files_name_the_path) {
    setup_data();
    static const BadCase cases[] = {
        {"[{\"name\": \"none\"}, {\"name\": \"nope\"}]", "[]", "defenses[1].name: unknown defense \"nope\""},
        {"[{\"name\": \"none\"}]", "[{\"name\": \"zap\"}]", "attacks[0].name: unknown attack \"zap\""},
        {"[{\"name\": \"noise\", \"epsilon\": []}]", "[]", "defenses[0].epsilon: empty list"},
        {"[]", "[]", "defenses: empty list"},
        {"[{\"name\": \"noise\", \"epsilon\": [1, \"x\"]}]", "[]", "defenses[0].epsilon[1]: must be a number"},
        {"[{\"name\": \"noise\", \"epsilon\": [1, -1]}]", "[]", "defenses[0].epsilon: must be in (0"},
        {"[{\"name\": \"noise\", \"epsilon\": [1, 2, 1]}]", "[]", "appears twice"},
        {"[{\"name\": \"noise\", \"epsilon\": 1, \"sweep\": {\"variant\": []}}]", "[]",
         "defenses[0].sweep.variant: empty list"},
        {"[{\"name\": \"noise\", \"epsilon\": 1, \"sweep\": {\"epsilon\": [2]}}]", "[]", "cannot sweep"},
        {"[{\"name\": \"none\"}]", "[{\"name\": \"probe\", \"bogus\": 1}]", "attacks[0].bogus: unknown key"},
        {"[{\"name\": \"none\"}]", "[{\"name\": \"probe\", \"model\": {\"name\": \"nomodel\"}}]", "attacks[0].model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *root = standin_matrix(CSV, cases[i].defenses, cases[i].attacks);
        ck_assert_ptr_nonnull(root);
        Matrix *m = NULL;
        FpError err = {0};
        MatrixOptions mo = {.registry = &standin_registry};
        FpStatus st = matrix_load(root, &mo, &m, &err);
        ck_assert_msg(st == FP_EPARAM, "case %zu: status %d (%s)", i, st, err.msg);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(err.msg, cases[i].want), "case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].want);
        ck_assert_msg(!strchr(err.msg, '\n'), "case %zu: more than one line", i);
        cJSON_Delete(root);
    }
    // An unknown top-level key.
    cJSON *root = standin_matrix(CSV, "[{\"name\": \"none\"}]", "[]");
    cJSON_AddNumberToObject(root, "bogus", 1);
    Matrix *m = NULL;
    FpError err = {0};
    ck_assert_int_eq(matrix_load(root, NULL, &m, &err), FP_EPARAM);
    ck_assert_str_eq(err.msg, "bogus: unknown key");
    cJSON_Delete(root);
}
END_TEST

// "seeds": every setting once per seed; the cells of seed 3 are those of a run with
// "seed": 3 (same spec, same hash, same numbers); results.json gets the summary.
START_TEST(seeds_run_each_setting_once_per_seed) {
    setup_data();
    const char *dir = TEST_DIR "/seeds", *one = TEST_DIR "/seed3";
    standin_rm(dir);
    standin_rm(one);
    cJSON *root = standin_matrix_seeds(CSV, "[3, 4]", "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [0.5]}]",
                                       "[{\"name\": \"probe\"}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, dir, 2, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.cells, 4);
    ck_assert_int_eq(s.done, 4);
    cJSON_Delete(root);
    root = standin_matrix(CSV, "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [0.5]}]", "[{\"name\": \"probe\"}]");
    ck_assert_msg(standin_run(root, one, 1, &s, &err) == FP_OK, "%s", err.msg); // "seed": 3
    cJSON_Delete(root);
    MatrixResults a, b;
    ck_assert_int_eq(matrix_results_load(dir, &a, &err), FP_OK);
    ck_assert_int_eq(matrix_results_load(one, &b, &err), FP_OK);
    ck_assert_int_eq(a.n_settings, 2);
    ck_assert_int_eq(b.n_settings, 2);
    static const int want_seed[] = {3, 4, 3, 4}, want_setting[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        const cJSON *e = matrix_index_cell(&a, i);
        ck_assert_int_eq(cJSON_GetObjectItem(e, "seed")->valueint, want_seed[i]);
        ck_assert_int_eq(cJSON_GetObjectItem(e, "setting")->valueint, want_setting[i]);
        char tag[8];
        snprintf(tag, sizeof tag, "-s%d-", want_seed[i]);
        ck_assert_msg(strstr(cJSON_GetObjectItem(e, "id")->valuestring, tag), "%s", cJSON_GetObjectItem(e, "id")->valuestring);
    }
    for (int k = 0; k < 2; k++) {
        const cJSON *ca = a.cells[a.settings[k].runs[0]], *cb = b.cells[b.settings[k].runs[0]];
        ck_assert_str_eq(cJSON_GetObjectItem(ca, "spec_hash")->valuestring, cJSON_GetObjectItem(cb, "spec_hash")->valuestring);
        ck_assert(results_cell_metric(ca, "model_accuracy") == results_cell_metric(cb, "model_accuracy"));
        ck_assert(results_cell_metric(ca, "model_loss") == results_cell_metric(cb, "model_loss"));
        // the other seed trains another model
        ck_assert(results_cell_metric(a.cells[a.settings[k].runs[1]], "model_loss") != results_cell_metric(ca, "model_loss"));
    }
    const cJSON *sum = cJSON_GetObjectItem(a.index, "summary");
    ck_assert_ptr_nonnull(sum);
    const cJSON *acc = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(sum, "settings"), 0),
                                                               "metrics"),
                                           "model_accuracy");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(acc, "values")), 2);
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(acc, "ci_high")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(a.index, "seeds")), 2);
    matrix_results_free(&a);
    matrix_results_free(&b);
    // Bad seed lists name the path.
    static const char *const bad[][2] = {
        {"[]", "seeds: must be a non-empty list"},
        {"[1, 1.5]", "seeds[1]: must be an integer"},
        {"[1, -2]", "seeds[1]: must be an integer"},
        {"[5, 6, 5]", "seeds[2]: 5 appears twice"},
        {"3", "seeds: must be a non-empty list"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        root = standin_matrix_seeds(CSV, bad[i][0], "[{\"name\": \"none\"}]", "[]");
        Matrix *m = NULL;
        MatrixOptions mo = {.registry = &standin_registry};
        ck_assert_int_eq(matrix_load(root, &mo, &m, &err), FP_EPARAM);
        ck_assert_msg(strstr(err.msg, bad[i][1]), "case %zu: %s", i, err.msg);
        cJSON_Delete(root);
    }
    root = standin_matrix(CSV, "[{\"name\": \"none\"}]", "[]");
    cJSON_AddItemToObject(root, "seeds", cJSON_CreateIntArray((int[]){1, 2}, 2));
    Matrix *m = NULL;
    ck_assert_int_eq(matrix_load(root, NULL, &m, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "either \"seed\" or \"seeds\""));
    cJSON_Delete(root);
}
END_TEST

static int count_cell_files(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/cells", dir);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        n += len > 5 && strcmp(de->d_name + len - 5, ".json") == 0;
    }
    closedir(d);
    return n;
}

// Cell files of dir that diverged and were not retried yet: the next rerun runs them
// once more (runner/matrix.h).
static int count_unretried_diverged(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/cells", dir);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        char f[1024];
        snprintf(f, sizeof f, "%s/cells/%s", dir, de->d_name);
        cJSON *c = load_json(f);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(c, "status");
        n += cJSON_IsString(st) && strcmp(st->valuestring, "diverged") == 0 &&
             !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "run"), "diverged_retries");
        cJSON_Delete(c);
    }
    closedir(d);
    return n;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Starts the matrix in a child and SIGKILLs it once `cells` cell files exist and then
// `extra_ms` more have passed. Returns 1 when the child finished before the kill.
static int run_and_kill(const cJSON *root, const char *dir, int jobs, int cells, int extra_ms) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        MatrixSummary s;
        FpError err = {0};
        _exit(standin_run(root, dir, jobs, &s, &err) == FP_OK ? 0 : 3);
    }
    double t0 = now_s();
    int status, done = 0;
    while (count_cell_files(dir) < cells && now_s() - t0 < 60) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            done = 1;
            break;
        }
        usleep(2000);
    }
    if (!done) {
        usleep((useconds_t)extra_ms * 1000);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        done = WIFEXITED(status);
    }
    if (done)
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the matrix run failed");
    return done;
}

START_TEST(kill_and_resume_gives_the_same_cells) {
    setup_data();
    const char *ref = TEST_DIR "/resume-ref", *dir = TEST_DIR "/resume";
    standin_rm(ref);
    standin_rm(dir);
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\", \"sleep_ms\": 120}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, ref, 1, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.cells, 6);
    ck_assert_int_eq(s.done, 5);
    ck_assert_int_eq(s.diverged, 1);
    // Killed mid-cell (first cell, then after two), in parallel mode, then at many
    // moments in a row, each time resuming the same folder.
    ck_assert_int_eq(run_and_kill(root, dir, 1, 0, 60), 0);
    ck_assert_int_eq(count_cell_files(dir), 0);
    ck_assert_int_eq(run_and_kill(root, dir, 1, 2, 40), 0);
    int before = count_cell_files(dir);
    ck_assert_int_ge(before, 2);
    ck_assert_int_eq(run_and_kill(root, dir, 2, before + 1, 30), 0);
    before = count_cell_files(dir);
    int retried = count_unretried_diverged(dir);
    ck_assert_msg(standin_run(root, dir, 1, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.skipped, before - retried); // the rerun skips what was done, retries what diverged
    ck_assert_int_eq(s.done + s.diverged, 6);
    assert_same_runs(ref, dir);
    // Killed again and again at moments spread over the cells (a pseudo-random 5 to 255 ms
    // after the start, plus 20 ms more each time so that slow builds get to the end too;
    // one or two cells at a time), until a run gets to the end.
    const char *dir2 = TEST_DIR "/resume-many";
    standin_rm(dir2);
    int kills = 0;
    for (int delay = 7; kills < 60; delay = (delay * 37 + 11) % 250 + 5, kills++)
        if (run_and_kill(root, dir2, kills % 2 ? 2 : 1, count_cell_files(dir2), delay + 20 * kills))
            break;
    ck_assert_int_ge(kills, 5);
    ck_assert_int_lt(kills, 60);
    retried = count_unretried_diverged(dir2);
    ck_assert_msg(standin_run(root, dir2, 1, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.skipped, 6 - retried);
    assert_same_runs(ref, dir2);
    dir = dir2;
    // A finished run reruns nothing.
    ck_assert_int_eq(standin_run(root, dir, 2, &s, &err), FP_OK);
    ck_assert_int_eq(s.skipped, 6);
    cJSON_Delete(root);
}
END_TEST

START_TEST(jobs_give_the_same_results) {
    setup_data();
    const char *a = TEST_DIR "/jobs1", *b = TEST_DIR "/jobs3";
    standin_rm(a);
    standin_rm(b);
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\"}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, a, 1, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_msg(standin_run(root, b, 3, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.done, 5);
    assert_same_runs(a, b);
    assert_same_runs(b, a);
    cJSON_Delete(root);
}
END_TEST

START_TEST(diverged_cells_are_marked_never_a_number) {
    setup_data();
    const char *dir = TEST_DIR "/diverged";
    standin_rm(dir);
    cJSON *root = standin_matrix(CSV, "[{\"name\": \"none\"}, {\"name\": \"explode\"}]",
                                 "[{\"name\": \"probe\"}, {\"name\": \"nan\"}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, dir, 1, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.diverged, 2); // explode: training; none: the nan attack
    ck_assert_int_eq(s.failed, 0);
    MatrixResults r;
    ck_assert_int_eq(matrix_results_load(dir, &r, &err), FP_OK);
    ck_assert_int_eq(r.n, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(r.status[i], CELL_DIVERGED);
        const char *st = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.index,
                                                                                                          "cells"), i),
                                                          "status")->valuestring;
        ck_assert_str_eq(st, "diverged");
    }
    const cJSON *none = r.cells[0], *boom = r.cells[1];
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(none, "model"),
                                                              "test_accuracy")));
    const cJSON *nan_attack = matrix_cell_attack(none, "nan");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(nan_attack, "status")->valuestring, "diverged");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(nan_attack, "value")));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(boom, "model"),
                                                            "test_accuracy")));
    ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItemCaseSensitive(boom, "message")->valuestring, "diverged"));
    const cJSON *probe = matrix_cell_attack(boom, "probe");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(probe, "status")->valuestring, "skipped");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(probe, "value")));
    matrix_results_free(&r);
    // Diverged cells are results, retried once: the first rerun runs them again (the
    // retry records "diverged_retries" in the cell's "run"), the next keeps them; and a
    // run that keeps diverged cells does not retry them at all.
    ck_assert_int_eq(standin_run(root, dir, 1, &s, &err), FP_OK);
    ck_assert_int_eq(s.skipped, 0);
    ck_assert_int_eq(s.diverged, 2);
    ck_assert_int_eq(count_unretried_diverged(dir), 0);
    ck_assert_int_eq(standin_run(root, dir, 1, &s, &err), FP_OK);
    ck_assert_int_eq(s.skipped, 2);
    const char *kept = TEST_DIR "/diverged-kept";
    standin_rm(kept);
    ck_assert_int_eq(standin_run(root, kept, 1, &s, &err), FP_OK);
    Matrix *m = NULL;
    MatrixOptions mo = {.registry = &standin_registry, .file = "standin.json"};
    ck_assert_int_eq(matrix_load(root, &mo, &m, &err), FP_OK);
    MatrixRunOptions ro = {.jobs = 1, .keep_diverged = 1};
    ck_assert_int_eq(matrix_run(m, kept, &ro, &s, &err), FP_OK);
    matrix_free(m);
    ck_assert_int_eq(s.skipped, 2);
    ck_assert_int_eq(count_unretried_diverged(kept), 2);
    cJSON_Delete(root);
}
END_TEST

START_TEST(failed_cells_are_recorded_and_retried) {
    setup_data();
    const char *dir = TEST_DIR "/failed";
    standin_rm(dir);
    cJSON *root = standin_matrix(CSV, "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": 1}]",
                                 "[{\"name\": \"probe\"}, {\"name\": \"broken\"}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_int_eq(standin_run(root, dir, 2, &s, &err), FP_OK);
    ck_assert_int_eq(s.failed, 2);
    ck_assert_int_eq(s.done, 0);
    MatrixResults r;
    ck_assert_int_eq(matrix_results_load(dir, &r, &err), FP_OK);
    ck_assert_int_eq(r.status[1], CELL_FAILED);
    const cJSON *b = matrix_cell_attack(r.cells[1], "broken");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(b, "message")->valuestring, "stand-in attack failure");
    const cJSON *p = matrix_cell_attack(r.cells[1], "probe");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(p, "status")->valuestring, "done");
    matrix_results_free(&r);
    ck_assert_int_eq(standin_run(root, dir, 1, &s, &err), FP_OK);
    ck_assert_int_eq(s.skipped, 0); // failed cells run again
    ck_assert_int_eq(s.failed, 2);
    cJSON_Delete(root);
}
END_TEST

START_TEST(a_changed_matrix_reruns_only_what_changed) {
    setup_data();
    const char *dir = TEST_DIR "/changed";
    standin_rm(dir);
    cJSON *a = standin_matrix(CSV, "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [1, 2]}]",
                              "[{\"name\": \"probe\"}]");
    cJSON *b = standin_matrix(CSV, "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [1, 2, 3]}]",
                              "[{\"name\": \"probe\"}]");
    cJSON *c = standin_matrix(CSV, "[{\"name\": \"none\"}]", "[{\"name\": \"probe\", \"sleep_ms\": 1}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_int_eq(standin_run(a, dir, 1, &s, &err), FP_OK);
    ck_assert_int_eq(standin_run(b, dir, 1, &s, &err), FP_OK);
    ck_assert_int_eq(s.skipped, 3);
    ck_assert_int_eq(s.done, 4);
    ck_assert_int_eq(standin_run(c, dir, 1, &s, &err), FP_OK); // another attack config: another cell
    ck_assert_int_eq(s.skipped, 0);
    MatrixResults r;
    ck_assert_int_eq(matrix_results_load(dir, &r, &err), FP_OK);
    ck_assert_int_eq(r.n, 1); // the index lists the current matrix only
    matrix_results_free(&r);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
}
END_TEST

START_TEST(a_second_run_on_the_same_folder_is_refused) {
    setup_data();
    const char *dir = TEST_DIR "/locked";
    standin_rm(dir);
    ck_assert(standin_mkdirs(dir));
    int fd = open(TEST_DIR "/locked/.lock", O_RDWR | O_CREAT, 0666);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(flock(fd, LOCK_EX), 0);
    cJSON *root = standin_matrix(CSV, "[{\"name\": \"none\"}]", "[]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_int_eq(standin_run(root, dir, 1, &s, &err), FP_EIO); // after waiting 5 s for it
    ck_assert_ptr_nonnull(strstr(err.msg, "another fedpriv matrix"));
    close(fd);
    ck_assert_int_eq(standin_run(root, dir, 1, &s, &err), FP_OK);
    cJSON_Delete(root);
}
END_TEST

// ---- check -----------------------------------------------------------------------------------

static const char *check_dir(void) {
    static const char *dir = TEST_DIR "/check";
    setup_data();
    standin_rm(dir);
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\"}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, dir, 2, &s, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(root);
    return dir;
}

static int violations(const char *dir, const char *baseline, char *first, size_t n) {
    cJSON *b = cJSON_Parse(baseline);
    ck_assert_ptr_nonnull(b);
    CheckResult r;
    FpError err = {0};
    ck_assert_msg(check_baseline(dir, b, "baseline.json", &r, &err) == FP_OK, "%s", err.msg);
    int v = r.n_violations;
    if (first) {
        first[0] = 0;
        for (int i = 0; i < r.n_items; i++)
            if (!r.items[i].ok) {
                snprintf(first, n, "%s", r.items[i].message);
                break;
            }
    }
    check_result_free(&r);
    cJSON_Delete(b);
    return v;
}

START_TEST(check_bounds_hold_and_fail) {
    const char *dir = check_dir();
    char first[1024];
    // The probe's leak is 1/(1+ε): 0.667, 0.5, 0.333, 0.2 for ε = 0.5, 1, 2, 4; 1 without defense.
    const char *ok = "{\"require_complete\": true, \"bounds\": ["
                     "{\"defense\": \"noise\", \"epsilon_max\": 1, \"attack\": \"probe\", \"at_most\": 0.67},"
                     "{\"defense\": \"noise\", \"epsilon_min\": 2, \"attack\": \"probe\", \"metric\": \"auc\", \"at_most\": 0.67},"
                     "{\"defense\": \"noise\", \"variant\": \"paper\", \"epsilon_min\": 4, \"epsilon_max\": 4,"
                     " \"attack\": \"probe\", \"metric\": \"images.0.ssim\", \"at_most\": 0.21, \"at_least\": 0.19},"
                     "{\"defense\": \"none\", \"attack\": \"probe\", \"at_least\": 0.99},"
                     "{\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.5},"
                     "{\"defense\": \"noise\", \"params\": {\"variant\": \"paper\"}, \"metric\": \"epsilon_nominal\", \"at_most\": 12},"
                     "{\"defense\": \"*\", \"epsilon_max\": 0.5, \"metric\": \"epsilon_sound\", \"at_least\": 3, \"at_most\": 3}]}";
    ck_assert_int_eq(violations(dir, ok, first, sizeof first), 0);
    // A weakened defense: the bound fails and names the cell and the value.
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"label\": \"probe under noise\", \"defense\": \"noise\","
                                     " \"epsilon_max\": 1, \"attack\": \"probe\", \"at_most\": 0.55}]}",
                                first, sizeof first),
                     1);
    ck_assert_str_eq(first, "bound 1 \"probe under noise\": cell \"noise paper ε=0.5\": probe ssim_mean = 0.6667, "
                            "above the bound 0.55");
    // A broken attack: leakage without a defense below what it must reach.
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"none\", \"attack\": \"probe\", \"at_least\": 1.5}]}",
                                first, sizeof first),
                     1);
    ck_assert_ptr_nonnull(strstr(first, "below the bound 1.5"));
    // Never vacuous: a bound that selects nothing is a violation.
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"spm\", \"attack\": \"probe\", \"at_most\": 0.2}]}",
                                first, sizeof first),
                     1);
    ck_assert_ptr_nonnull(strstr(first, "matches 0 defense settings"));
    // A diverged cell has no number to pass a bound with.
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"explode\", \"metric\": \"model_accuracy\","
                                     " \"at_least\": 0}]}",
                                first, sizeof first),
                     1);
    ck_assert_ptr_nonnull(strstr(first, "diverged"));
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"explode\", \"attack\": \"probe\", \"at_most\": 1}]}",
                                first, sizeof first),
                     1);
    ck_assert_ptr_nonnull(strstr(first, "skipped"));
    // Guarantees: the stand-in's bound is proven up to ε = 1 and conditional above it;
    // "none" claims nothing. A bound may require a guarantee, alone or with a metric.
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"noise\", \"epsilon_max\": 1,"
                                     " \"guarantee\": \"proven\"},"
                                     "{\"defense\": \"noise\", \"guarantee\": \"conditional\","
                                     " \"metric\": \"epsilon_nominal\", \"at_most\": 12},"
                                     "{\"defense\": \"noise\", \"epsilon_min\": 2, \"metric\": \"epsilon_conditional\","
                                     " \"at_least\": 12, \"at_most\": 24},"
                                     "{\"defense\": \"none\", \"guarantee\": \"none\"}]}",
                                first, sizeof first),
                     0);
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"noise\", \"guarantee\": \"proven\"}]}", first,
                                sizeof first),
                     2);
    ck_assert_str_eq(first, "bound 1 (defense noise: guarantee): cell \"noise paper ε=2\": guarantee conditional, "
                            "needs proven (stand-in: above epsilon 1 the bound is assumed)");
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"none\", \"guarantee\": \"conditional\"}]}",
                                first, sizeof first),
                     1);
    ck_assert_ptr_nonnull(strstr(first, "guarantee none, needs conditional"));
    // A conditional cell's sound figure is ∞: an epsilon_sound bound fails there.
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"defense\": \"noise\", \"epsilon_min\": 4,"
                                     " \"metric\": \"epsilon_sound\", \"at_most\": 100}]}",
                                first, sizeof first),
                     1);
    ck_assert_ptr_nonnull(strstr(first, "epsilon_sound = inf"));
}
END_TEST

START_TEST(check_audit_bounds) {
    const char *dir = check_dir();
    ck_assert(standin_mkdirs(TEST_DIR "/check/audit"));
    FILE *f = fopen(TEST_DIR "/check/audit/spm.json", "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[{\"mechanism\": \"spm\", \"variant\": \"corrected\", \"epsilon\": 1, \"bias_factor\": 1.001,"
               " \"epsilon_lower_bound\": 0.8},"
               " {\"mechanism\": \"spm\", \"variant\": \"broken\", \"epsilon\": 1, \"epsilon_lower_bound\": 1.7}]");
    fclose(f);
    char first[1024];
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"audit\": \"spm\", \"variant\": \"corrected\", \"at_most\": \"epsilon\"},"
                                     " {\"audit\": \"*\", \"metric\": \"bias_factor\", \"variant\": \"corrected\","
                                     " \"at_least\": 0.99, \"at_most\": 1.01}]}",
                                first, sizeof first),
                     0);
    ck_assert_int_eq(violations(dir, "{\"bounds\": [{\"audit\": \"*\", \"at_most\": \"epsilon\"}]}", first, sizeof first),
                     1);
    ck_assert_ptr_nonnull(strstr(first, "epsilon_lower_bound = 1.7, above the bound 1"));
}
END_TEST

START_TEST(check_rejects_bad_baselines) {
    const char *dir = check_dir();
    static const char *const bad[][2] = {
        {"{\"bounds\": []}", "bounds: needs a non-empty list"},
        {"{\"bounds\": [{\"defense\": \"none\", \"metric\": \"model_accuracy\"}]}", "bounds[0]: needs \"at_most\""},
        {"{\"bounds\": [{\"metric\": \"model_accuracy\", \"at_least\": 1}]}", "needs exactly one of"},
        {"{\"bounds\": [{\"defense\": \"none\", \"metric\": \"auc\", \"at_least\": 1}]}", "bounds[0].metric"},
        {"{\"bounds\": [{\"defense\": \"none\", \"attack\": \"probe\", \"at_most\": \"epsilon\"}]}", "bounds[0].at_most"},
        {"{\"bounds\": [{\"defense\": \"none\", \"attack\": \"probe\", \"at_most\": 1, \"colour\": 1}]}",
         "bounds[0].colour: unknown key"},
        {"{\"bound\": []}", "bound: unknown key"},
        {"{\"bounds\": [{\"defense\": \"none\", \"guarantee\": \"certain\"}]}", "bounds[0].guarantee"},
        {"{\"bounds\": [{\"defense\": \"none\", \"attack\": \"probe\", \"guarantee\": \"proven\"}]}",
         "bounds[0].guarantee"},
        {"{\"bounds\": [{\"defense\": \"none\", \"guarantee\": \"proven\", \"metric\": \"model_loss\"}]}",
         "\"metric\" needs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *b = cJSON_Parse(bad[i][0]);
        CheckResult r;
        FpError err = {0};
        ck_assert_int_eq(check_baseline(dir, b, "b.json", &r, &err), FP_EPARAM);
        ck_assert_msg(strstr(err.msg, bad[i][1]) && strncmp(err.msg, "b.json: ", 8) == 0, "case %zu: %s", i, err.msg);
        cJSON_Delete(b);
    }
    cJSON *b = cJSON_Parse("{\"bounds\": [{\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0}]}");
    CheckResult r;
    FpError err = {0};
    ck_assert_int_eq(check_baseline(TEST_DIR "/no-such-run", b, "b.json", &r, &err), FP_EIO);
    cJSON_Delete(b);
}
END_TEST

// ---- the CLI (make test sets FEDPRIV_BIN) -------------------------------------------------------

// Runs a shell command; returns its exit status, stdout+stderr in out.
static int sh(const char *cmd, char *out, size_t n) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t k = 0;
    int c;
    while ((c = fgetc(p)) != EOF)
        if (k + 1 < n)
            out[k++] = (char)c;
    out[k] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *bin_or_skip(void) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (!bin || !bin[0])
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
    return bin && bin[0] ? bin : NULL;
}

START_TEST(cli_bad_matrix_files_exit_2_with_one_line) {
    const char *bin = bin_or_skip();
    if (!bin)
        return;
    ck_assert(standin_mkdirs(TEST_DIR));
    static const char *const bad[][2] = {
        {"[{\"name\": \"none\"}, {\"name\": \"no-such-defense\"}]", "defenses[1].name: unknown defense"},
        {"[{\"name\": \"none\", \"epsilon\": []}]", "defenses[0].epsilon: empty list"},
        {"[]", "defenses: empty list"},
    };
    for (int i = 0; i < 4; i++) {
        FILE *f = fopen(TEST_DIR "/bad.json", "w");
        ck_assert_ptr_nonnull(f);
        if (i < 3)
            fprintf(f, "{\"dataset\": {\"name\": \"fashion-mnist\"}, \"model\": {\"name\": \"mlp\"}, \"defenses\": %s}",
                    bad[i][0]);
        else
            fprintf(f, "{\"dataset\": {\"name\": \"fashion-mnist\"}, \"model\": {\"name\": \"mlp\"},"
                       " \"defenses\": [{\"name\": \"none\"}], \"attacks\": [{\"name\": \"no-such-attack\"}]}");
        fclose(f);
        char cmd[1024], out[4096];
        snprintf(cmd, sizeof cmd, "'%s' matrix " TEST_DIR "/bad.json --out " TEST_DIR "/bad-run", bin);
        ck_assert_int_eq(sh(cmd, out, sizeof out), 2);
        const char *want = i < 3 ? bad[i][1] : "attacks[0].name: unknown attack \"no-such-attack\"";
        ck_assert_msg(strstr(out, want), "case %d: %s", i, out);
        ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "case %d: not one line: %s", i, out);
        ck_assert_ptr_nonnull(strstr(out, TEST_DIR "/bad.json: "));
    }
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "'%s' matrix " TEST_DIR "/missing.json --out " TEST_DIR "/bad-run", bin);
    ck_assert_int_eq(sh(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' check " TEST_DIR "/no-such-run --baseline fixtures/ci-baseline.json", bin);
    ck_assert_int_eq(sh(cmd, out, sizeof out), 2);
    ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
}
END_TEST

#define CI_DIR "build/ci-matrix"

// The audit findings the baseline bounds: `fedpriv audit --json` into CI_DIR/audit/.
static void ci_audit(const char *bin) {
    char cmd[1024], out[16384];
    ck_assert(standin_mkdirs(CI_DIR "/audit"));
    snprintf(cmd, sizeof cmd, "'%s' audit --mechanism spm --variant corrected --epsilon 1 --samples 1000000 --json"
                              " --out " CI_DIR "/audit/spm-corrected-eps1.json > /dev/null", bin);
    int rc = sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "fedpriv audit exited %d:\n%s", rc, out);
}

// The CI gate: the small matrix over the real defenses and attacks, then the baseline.
START_TEST(cli_ci_matrix_passes_the_baseline) {
    const char *bin = bin_or_skip();
    if (!bin)
        return;
    char cmd[1024], out[65536];
    // Always a fresh run: cells kept from an earlier build would hide what this one does.
    standin_rm(CI_DIR);
    snprintf(cmd, sizeof cmd, "'%s' matrix fixtures/ci-matrix.json --out " CI_DIR " --jobs 2", bin);
    int rc = sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "fedpriv matrix exited %d:\n%s", rc, out);
    ci_audit(bin);
    snprintf(cmd, sizeof cmd, "'%s' check " CI_DIR " --baseline fixtures/ci-baseline.json", bin);
    rc = sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "fedpriv check exited %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "hold"));
}
END_TEST

// The same run against a baseline that a weakened defense would produce a violation of.
START_TEST(cli_check_exits_1_on_a_violated_baseline) {
    const char *bin = bin_or_skip();
    if (!bin)
        return;
    char cmd[1024], out[65536];
    snprintf(cmd, sizeof cmd, "'%s' matrix fixtures/ci-matrix.json --out " CI_DIR " --jobs 2", bin);
    int rc = sh(cmd, out, sizeof out); // resumes the CI test's fresh run
    ck_assert_msg(rc == 0, "fedpriv matrix exited %d:\n%s", rc, out);
    ci_audit(bin);
    FILE *f = fopen(TEST_DIR "/strict-baseline.json", "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"bounds\": [{\"label\": \"impossible accuracy\", \"defense\": \"none\", \"metric\": \"model_accuracy\","
               " \"at_least\": 0.999},"
               " {\"label\": \"no defense leaks nothing\", \"defense\": \"none\", \"attack\": \"dlg\", \"at_most\": 0.01}]}");
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' check " CI_DIR " --baseline " TEST_DIR "/strict-baseline.json", bin);
    rc = sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 1, "fedpriv check exited %d:\n%s", rc, out);
    // dlg runs once per observer (two clients a round: the release averages them); the
    // public observer recovers nothing without a defense, so its entry is no evidence. Its
    // label names the LeNet it attacks as a probe (the federation trains an mlp).
    ck_assert_msg(strstr(out, "3 violations"), "%s", out);
    ck_assert_msg(strstr(out, "  - bound 1 \"impossible accuracy\": cell \"none\": model_accuracy = "), "%s", out);
    ck_assert_msg(strstr(out, "  - bound 2 \"no defense leaks nothing\": cell \"none\": dlg observer=server on lenet (probe) ssim_mean = "),
                  "%s", out);
    ck_assert_msg(strstr(out, "  - bound 2 \"no defense leaks nothing\": cell \"none\": dlg observer=public on lenet (probe) is not "
                              "applicable"), "%s", out);
}
END_TEST

// The real binary and the real attacks: SIGKILL after the first cell, rerun, and the
// cells equal those of the uninterrupted CI run (timings excepted), artifacts included.
START_TEST(cli_kill_and_resume_gives_the_same_cells) {
    const char *bin = bin_or_skip();
    if (!bin)
        return;
    char cmd[1024], out[65536];
    snprintf(cmd, sizeof cmd, "'%s' matrix fixtures/ci-matrix.json --out " CI_DIR " --jobs 2", bin);
    int rc = sh(cmd, out, sizeof out); // the reference: resumes the CI test's fresh run
    ck_assert_msg(rc == 0, "fedpriv matrix exited %d:\n%s", rc, out);
    const char *dir = TEST_DIR "/ci-killed";
    standin_rm(dir);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        execl(bin, "fedpriv", "matrix", "fixtures/ci-matrix.json", "--out", TEST_DIR "/ci-killed", "--jobs", "2",
              (char *)NULL);
        _exit(127);
    }
    double t0 = now_s();
    int status;
    while (count_cell_files(dir) < 1 && now_s() - t0 < 300 && waitpid(pid, &status, WNOHANG) == 0)
        usleep(20000);
    ck_assert_int_eq(count_cell_files(dir), 1);
    usleep(1500 * 1000); // into the next cells
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    waitpid(pid, &status, 0);
    ck_assert(WIFSIGNALED(status));
    int finished = count_cell_files(dir);
    ck_assert_int_lt(finished, 3);
    snprintf(cmd, sizeof cmd, "'%s' matrix fixtures/ci-matrix.json --out %s --jobs 2", bin, dir);
    rc = sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "the resumed run exited %d:\n%s", rc, out);
    char want[64];
    snprintf(want, sizeof want, "%d already finished", finished);
    ck_assert_msg(strstr(out, want), "expected \"%s\" in:\n%s", want, out);
    assert_same_runs(CI_DIR, dir);
    assert_same_runs(dir, CI_DIR);
}
END_TEST

Suite *suite_matrix(void) {
    Suite *s = suite_create("matrix");
    TCase *tc = tcase_create("runner");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, expands_epsilon_lists_and_sweeps);
    tcase_add_test(tc, bad_matrix_files_name_the_path);
    tcase_add_test(tc, cell_ids_tell_seeds_and_rngs_apart);
    tcase_add_test(tc, seeds_run_each_setting_once_per_seed);
    tcase_add_test(tc, kill_and_resume_gives_the_same_cells);
    tcase_add_test(tc, jobs_give_the_same_results);
    tcase_add_test(tc, diverged_cells_are_marked_never_a_number);
    tcase_add_test(tc, failed_cells_are_recorded_and_retried);
    tcase_add_test(tc, a_changed_matrix_reruns_only_what_changed);
    tcase_add_test(tc, a_second_run_on_the_same_folder_is_refused);
    suite_add_tcase(s, tc);
    TCase *tk = tcase_create("check");
    tcase_set_timeout(tk, 60);
    tcase_add_test(tk, check_bounds_hold_and_fail);
    tcase_add_test(tk, check_audit_bounds);
    tcase_add_test(tk, check_rejects_bad_baselines);
    suite_add_tcase(s, tk);
    TCase *tcli = tcase_create("cli");
    tcase_set_timeout(tcli, 400); // the CI matrix: at most 3 minutes on 2 cores
    tcase_add_test(tcli, cli_bad_matrix_files_exit_2_with_one_line);
    tcase_add_test(tcli, cli_ci_matrix_passes_the_baseline);
    tcase_add_test(tcli, cli_check_exits_1_on_a_violated_baseline);
    tcase_add_test(tcli, cli_kill_and_resume_gives_the_same_cells);
    suite_add_tcase(s, tcli);
    return s;
}
