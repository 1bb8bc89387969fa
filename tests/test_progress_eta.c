// A matrix run's progress (runner/matrix_progress.h, runner/matrix_cell.h): the ETA
// learned per kind of cell, the lines that name each attack's observer and attacked
// model and count the attacks as the file lists them, and the lines long work inside a
// cell prints (the rounds, the attacks, a membership attack's reference models).
//
// The ETA test runs real cells (the runner, the federation, a stand-in attack) whose
// defense sleeps a given time per upload, so two kinds of cells cost about 0.1 s and
// 1 s whatever the machine's load; the progress stream is a FILE that stamps each line
// with the monotonic clock when it is written, so the ETA a line printed is compared
// with the time the run really took from then on.
#include <check.h>
#include <stdio.h>

#include "core/clock.h"
#include "matrix_standins.h"
#include "runner/cell_cost.h"

#define TEST_DIR "build/test-progress-eta"
#define CSV TEST_DIR "/blobs.csv"

// ---- a defense that costs a known time -------------------------------------------------

typedef struct {
    long long ms;
} Slowdown;

static FpStatus slowdown_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                                FpError *err) {
    static const char *const keys[] = {"name", "ms", "epsilon", NULL};
    FP_TRY(jv_keys(params, path, keys, err));
    Slowdown *s = calloc(1, sizeof *s);
    if (!s)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    double eps;
    FpStatus st = jv_int(params, path, "ms", JV_REQUIRED, 0, 0, 1000, &s->ms, err);
    if (st == FP_OK)
        st = jv_number(params, path, "epsilon", JV_OPTIONAL, 1.0, 0, 1, 1e6, 0, &eps, err);
    if (st != FP_OK) {
        free(s);
        return st;
    }
    *state = s;
    return FP_OK;
}
static void slowdown_destroy(void *state) { free(state); }
static UploadKind slowdown_upload_kind(const void *state) { return UPLOAD_WEIGHTS; }
static FpStatus slowdown_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    usleep((useconds_t)(((Slowdown *)state)->ms * 1000));
    return FP_OK;
}
static void slowdown_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    *rec = (PrivacyRecord){.unit = "upload", .epsilon_round_nominal = INFINITY, .epsilon_total_nominal = INFINITY,
                           .epsilon_total_sound = INFINITY, .nominal_notion = "none", .sound_notion = "none"};
}
static const DefenseOps slowdown = {.name = "slowdown", .summary = "test: sleeps ms per upload",
                                    .create = slowdown_create, .destroy = slowdown_destroy,
                                    .upload_kind = slowdown_upload_kind, .client_perturb = slowdown_perturb,
                                    .privacy = slowdown_privacy};

// "seen": an attack with observers (as gradient inversion has), run once per observer.
static FpStatus seen_validate(const AttackEnv *env, FpError *err) {
    static const char *const keys[] = {"name", "observer", "sleep_ms", NULL};
    return jv_keys(env->attack_json, env->path, keys, err);
}
static const AttackOps seen = {.name = "seen", .summary = "test: an attack with observers", .headline = "ssim_mean",
                               .headline_higher_leaks = 1, .observers = 1, .validate = seen_validate,
                               .run = probe_run};

static const DefenseOps *eta_defense_find(const char *name) {
    return strcmp(name, "slowdown") == 0 ? &slowdown : standin_defense_find(name);
}
static const AttackOps *eta_attack_find(const char *name) {
    return strcmp(name, "seen") == 0 ? &seen : standin_attack_find(name);
}
static const MatrixRegistry eta_registry = {.defense_find = eta_defense_find, .attack_find = eta_attack_find};

// ---- a progress stream that stamps its lines -------------------------------------------

#define MAX_LINES 256
typedef struct {
    char text[MAX_LINES][1024];
    double at[MAX_LINES];
    int n;
    char partial[1024];
    size_t len;
} Stamped;

static ssize_t stamped_write(void *cookie, const char *buf, size_t size) {
    Stamped *s = cookie;
    for (size_t i = 0; i < size; i++) {
        if (buf[i] != '\n') {
            if (s->len + 1 < sizeof s->partial)
                s->partial[s->len++] = buf[i];
            continue;
        }
        if (s->n < MAX_LINES) {
            s->partial[s->len] = 0;
            snprintf(s->text[s->n], sizeof s->text[0], "%s", s->partial);
            s->at[s->n++] = fp_monotonic_seconds();
        }
        s->len = 0;
    }
    return (ssize_t)size;
}

static FILE *stamped_open(Stamped *s) {
    memset(s, 0, sizeof *s);
    FILE *f = fopencookie(s, "w", (cookie_io_functions_t){.write = stamped_write});
    ck_assert_ptr_nonnull(f);
    setvbuf(f, NULL, _IOLBF, 0);
    return f;
}

// The index of the first line starting with prefix, or -1.
static int find_line(const Stamped *s, const char *prefix) {
    for (int i = 0; i < s->n; i++)
        if (strncmp(s->text[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

// The seconds of "ETA X s" (or "X min Y s") in a line; -1 when none.
static double line_eta(const char *line) {
    const char *e = strstr(line, "; ETA ");
    if (!e)
        return -1;
    double a, b;
    if (sscanf(e, "; ETA %lf min %lf s", &a, &b) == 2)
        return 60 * a + b;
    if (sscanf(e, "; ETA %lf s", &a) == 1)
        return a;
    return -1;
}

// Runs the matrix of `defenses` (attack: probe) into dir with progress on s; returns the
// time the run ended.
static double run_stamped(const char *defenses, const char *attacks, const char *dir, Stamped *s,
                          double cell_progress_seconds) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
    standin_rm(dir);
    cJSON *root = standin_matrix(CSV, defenses, attacks);
    ck_assert_ptr_nonnull(root);
    Matrix *m = NULL;
    FpError err = {0};
    MatrixOptions mo = {.registry = &eta_registry, .file = "eta.json"};
    ck_assert_msg(matrix_load(root, &mo, &m, &err) == FP_OK, "%s", err.msg);
    FILE *f = stamped_open(s);
    MatrixRunOptions ro = {.jobs = 1, .progress = f, .cell_progress_seconds = cell_progress_seconds};
    MatrixSummary sum;
    ck_assert_msg(matrix_run(m, dir, &ro, &sum, &err) == FP_OK, "%s", err.msg);
    double end = fp_monotonic_seconds();
    fclose(f);
    ck_assert_int_eq(sum.done, matrix_cell_count(m));
    matrix_free(m);
    cJSON_Delete(root);
    return end;
}

// The ETA printed once a quarter of the cells ended, against the time the run took from
// that line on.
static void check_eta_after_a_quarter(const char *defenses, const char *name) {
    char dir[256];
    snprintf(dir, sizeof dir, TEST_DIR "/%s", name);
    Stamped *s = malloc(sizeof *s);
    ck_assert_ptr_nonnull(s);
    double end = run_stamped(defenses, "[{\"name\": \"probe\"}]", dir, s, 0);
    int q = find_line(s, "matrix: [2/8] ");
    ck_assert_msg(q >= 0, "%s: no line for the second cell of 8", name);
    double eta = line_eta(s->text[q]), real = end - s->at[q];
    ck_assert_msg(eta >= 0, "%s: no ETA in \"%s\"", name, s->text[q]);
    if (getenv("FP_TEST_VERBOSE"))
        for (int i = 0; i < s->n; i++)
            fprintf(stderr, "  %.3f %s\n", s->at[i] - s->at[0], s->text[i]);
    ck_assert_msg(fabs(eta - real) <= 0.25 * real, "%s: ETA %.2f s after a quarter of the cells, the rest took %.2f s "
                  "(\"%s\")", name, eta, real, s->text[q]);
    free(s);
    standin_rm(dir);
}

// Two kinds of cells, one about 10 times the other's cost (each upload sleeps 30 or
// 300 ms: about 0.2 s and 2 s a cell, the sleep well above the cell's own work, which a
// loaded machine slows), listed cheap ones first and then the other way
// round: 6 + 2 cells, so a quarter is 2 cells. Before the rates were learned per kind,
// the ETA was the mean cell time so far times the cells left: 2.3 times too long in the
// second order, 0.6 times in the first (and the two costly cells of the first order ran
// last, unmeasured).
START_TEST(eta_after_a_quarter_is_within_25_percent) {
#if defined(__SANITIZE_ADDRESS__)
    // A timing check on real cells: under ASan and UBSan the cells' own cost is no longer
    // the sleeps the test plants (5.1 s predicted against 3.2 s at load 3), so it runs in
    // the release build, whose ETA code is the same.
    printf("SKIP eta_after_a_quarter_is_within_25_percent: a timing check, run in the release build\n");
    return;
#endif
    check_eta_after_a_quarter("[{\"name\": \"slowdown\", \"ms\": 30, \"epsilon\": [1, 2, 3, 4, 5, 6]},"
                              " {\"name\": \"slowdown\", \"ms\": 300, \"epsilon\": [1, 2]}]",
                              "cheap-first");
    check_eta_after_a_quarter("[{\"name\": \"slowdown\", \"ms\": 300, \"epsilon\": [1, 2]},"
                              " {\"name\": \"slowdown\", \"ms\": 30, \"epsilon\": [1, 2, 3, 4, 5, 6]}]",
                              "costly-first");
}
END_TEST

// The learned rates: per kind, the ratio of sums; an unseen kind takes the pooled rate.
START_TEST(rates_are_learned_per_kind) {
    CostRates *r = cost_rates_create(3);
    ck_assert_ptr_nonnull(r);
    ck_assert(isnan(cost_rates_predict(r, 0, 100)));
    cost_rates_add(r, 0, 100, 1.0);
    cost_rates_add(r, 0, 300, 3.0);
    cost_rates_add(r, 1, 100, 10.0);
    ck_assert_double_eq_tol(cost_rates_predict(r, 0, 200), 2.0, 1e-12);
    ck_assert_double_eq_tol(cost_rates_predict(r, 1, 200), 20.0, 1e-12);
    ck_assert_double_eq_tol(cost_rates_predict(r, 2, 500), 500 * 14.0 / 500, 1e-12);
    ck_assert_double_eq_tol(cost_rates_predict(r, 7, 500), 14.0, 1e-12); // no such kind: pooled
    cost_rates_add(r, 1, 0, NAN); // never a rate from a non-number
    ck_assert_double_eq_tol(cost_rates_predict(r, 1, 100), 10.0, 1e-12);
    cost_rates_free(r);
}
END_TEST

// The first line counts the attacks as listed (an attack with observers runs once per
// observer, and the line says how); each cell's line names the observer and the attacked
// model of each result.
START_TEST(lines_name_observers_and_count_attacks_as_listed) {
    Stamped *s = malloc(sizeof *s);
    ck_assert_ptr_nonnull(s);
    const char *dir = TEST_DIR "/observers";
    run_stamped("[{\"name\": \"none\"}, {\"name\": \"slowdown\", \"ms\": 0}]",
                "[{\"name\": \"seen\"}, {\"name\": \"probe\", \"model\": {\"name\": \"logreg\"}}]", dir,
                s, 0);
    int plan = find_line(s, "matrix: 2 cells");
    ck_assert_msg(plan >= 0, "no first line");
    ck_assert_msg(strstr(s->text[plan], "2 attacks each: seen (server, public), probe"), "%s", s->text[plan]);
    int cell = find_line(s, "matrix: [1/2] ");
    ck_assert_msg(cell >= 0, "no cell line");
    ck_assert_msg(strstr(s->text[cell], "seen (server, mlp) ssim_mean 1.0000, seen (public, mlp) ssim_mean 1.0000, "
                                        "probe (logreg) ssim_mean 1.0000"),
                  "%s", s->text[cell]);
    free(s);
    standin_rm(dir);
}
END_TEST

// Inside a cell, the training rounds and the attacks report how far they are, never
// sooner than one interval (here 0.15 s, in production 10 s) after the cell started nor
// sooner than one interval after the last such line: work shorter than that says nothing.
START_TEST(long_cells_report_rounds_and_attacks) {
    Stamped *s = malloc(sizeof *s);
    ck_assert_ptr_nonnull(s);
    const char *dir = TEST_DIR "/inside";
    const double every = 0.15;
    run_stamped("[{\"name\": \"slowdown\", \"ms\": 60}, {\"name\": \"none\"}]",
                "[{\"name\": \"probe\", \"sleep_ms\": 200}, {\"name\": \"probe\", \"sleep_ms\": 1}]", dir, s,
                every);
    int rounds = find_line(s, "matrix: slowdown: training: ");
    for (int i = 0; rounds < 0 && i < s->n; i++)
        fprintf(stderr, "  %s\n", s->text[i]);
    ck_assert_msg(rounds >= 0, "no line for the rounds");
    ck_assert_msg(strstr(s->text[rounds], " of 3 rounds ("), "%s", s->text[rounds]);
    int attacks = find_line(s, "matrix: slowdown: attacks, next probe (mlp): 1 of 2 attacks (");
    ck_assert_msg(attacks >= 0, "no line for the attacks");
    // Each cell's training lines: the first one interval after "running", the next ones
    // an interval apart (the clock's stamp is taken after the line is written: 10 ms slack).
    const char *cells[] = {"slowdown", "none"};
    for (int k = 0; k < 2; k++) {
        char running[64], training[64];
        snprintf(running, sizeof running, "matrix: running %s", cells[k]);
        snprintf(training, sizeof training, "matrix: %s: training: ", cells[k]);
        int start = find_line(s, running);
        ck_assert_msg(start >= 0, "no line %s", running);
        double last = s->at[start];
        for (int i = start + 1; i < s->n; i++)
            if (strncmp(s->text[i], training, strlen(training)) == 0) {
                ck_assert_msg(s->at[i] - last >= every - 0.01, "%.3f s after the last: %s", s->at[i] - last,
                              s->text[i]);
                last = s->at[i];
            }
    }
    free(s);
    standin_rm(dir);
}
END_TEST

// A membership attack's reference models, trained inside a quiet cell, say how many are
// done (LiRA offline: 8 small reference models on the blob data).
START_TEST(reference_models_report_k_of_n) {
    Stamped *s = malloc(sizeof *s);
    ck_assert_ptr_nonnull(s);
    const char *dir = TEST_DIR "/references";
    run_stamped("[{\"name\": \"none\"}]", "[{\"name\": \"lira\", \"shadow_models\": 8}]", dir, s, 0.001);
    int refs = find_line(s, "matrix: none: lira (mlp): offline: ");
    for (int i = 0; (refs < 0 || getenv("FP_TEST_VERBOSE")) && i < s->n; i++)
        fprintf(stderr, "  %s\n", s->text[i]);
    ck_assert_msg(refs >= 0, "no line for the reference models");
    ck_assert_msg(strstr(s->text[refs], " of 8 reference models ("), "%s", s->text[refs]);
    free(s);
    standin_rm(dir);
}
END_TEST

// Every seed of a setting carries the setting's cost estimate: the cost is estimated once
// per setting (the seed changes none of it), and before it was copied a setting's other
// seeds kept 0, so they ran last under "largest first" and, when one of them ended first,
// the ETA was its seconds per cost unit times every other cell's cost (tens of millions of
// hours on the small demo). Control: the three seeds of each setting are compared with the
// setting's first, and every cost must be positive.
START_TEST(every_seed_of_a_setting_has_its_cost) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
    cJSON *root = standin_matrix_seeds(CSV, "[1, 2, 3]",
                                       "[{\"name\": \"slowdown\", \"ms\": 30, \"epsilon\": [1, 2]}]",
                                       "[{\"name\": \"probe\"}]");
    ck_assert_ptr_nonnull(root);
    Matrix *m = NULL;
    FpError err = {0};
    MatrixOptions mo = {.registry = &eta_registry, .file = "eta.json"};
    ck_assert_msg(matrix_load(root, &mo, &m, &err) == FP_OK, "%s", err.msg);
    int n = matrix_cell_count(m);
    ck_assert_int_eq(n, 6); // 2 settings x 3 seeds, a setting's seeds side by side
    for (int i = 0; i < n; i++) {
        ck_assert_msg(matrix_cell_cost(m, i) > 0, "cell %d has no cost estimate", i);
        ck_assert_msg(matrix_cell_cost(m, i) == matrix_cell_cost(m, i - i % 3), "cell %d: %llu against %llu", i,
                      (unsigned long long)matrix_cell_cost(m, i), (unsigned long long)matrix_cell_cost(m, i - i % 3));
    }
    matrix_free(m);
    cJSON_Delete(root);
}
END_TEST

Suite *suite_progress_eta(void) {
    Suite *s = suite_create("progress_eta");
    TCase *tc = tcase_create("progress_eta");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rates_are_learned_per_kind);
    tcase_add_test(tc, every_seed_of_a_setting_has_its_cost);
    tcase_add_test(tc, eta_after_a_quarter_is_within_25_percent);
    tcase_add_test(tc, lines_name_observers_and_count_attacks_as_listed);
    tcase_add_test(tc, long_cells_report_rounds_and_attacks);
    tcase_add_test(tc, reference_models_report_k_of_n);
    suite_add_tcase(s, tc);
    return s;
}
