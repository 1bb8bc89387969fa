// Matrices beyond one process, in the library: shards for job arrays (runner/shard.h),
// the cost model (runner/cell_cost.h), cells written by concurrent writers
// (runner/cell_store.h), `fedpriv matrix --status` (runner/matrix_status.h), and the
// communicator without MPI (core/comm.h). tests/test_cluster_cli.c runs the binary: every
// way of running a real matrix (shards, a Slurm array, mpirun -n 1, 2, 3, a killed rank).
//
// The tests use the stand-ins of tests/matrix_standins.h.
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/wait.h>

#include "core/comm.h"
#include "core/proc.h"
#include "matrix_compare.h"
#include "matrix_standins.h"
#include "reports/html.h"
#include "runner/cell_cost.h"
#include "runner/check.h"
#include "runner/matrix_status.h"
#include "runner/shard.h"

#define TEST_DIR "build/test-cluster"
#define CSV TEST_DIR "/blobs.csv"

static void setup_data(void) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
}

static const char *const some_defenses =
    "[{\"name\": \"none\"}, {\"name\": \"noise\", \"variant\": \"paper\", \"epsilon\": [0.5, 1, 2, 4]},"
    " {\"name\": \"explode\"}]";

// ---- shard specs and Slurm arrays ------------------------------------------------------------

START_TEST(shard_specs_parse_strictly) {
    ShardSpec s;
    FpError err = {0};
    ck_assert_int_eq(shard_parse("1/1", &s, &err), FP_OK);
    ck_assert_int_eq(s.index, 0);
    ck_assert_int_eq(s.count, 1);
    ck_assert_int_eq(shard_parse("3/8", &s, &err), FP_OK);
    ck_assert_int_eq(s.index, 2);
    ck_assert_int_eq(s.count, 8);
    ck_assert_int_eq(shard_parse("100000/100000", &s, &err), FP_OK);
    static const char *const bad[] = {"0/3", "4/3", "1/0", "x", "1/", "/3", "1/3/4", "+1/3", " 1/3", "1/3 ",
                                      "1//3", "", "1/100001", "-1/3", "1.0/3", "01/3x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (FpError){0};
        ck_assert_msg(shard_parse(bad[i], &s, &err) == FP_EPARAM, "\"%s\" accepted", bad[i]);
        ck_assert_msg(strncmp(err.msg, "--shard: ", 9) == 0, "%s", err.msg);
    }
    ck_assert_int_eq(shard_parse(NULL, &s, &err), FP_EPARAM);
}
END_TEST

// Slurm sets COUNT (tasks), MIN, MAX, and STEP from "A-B:S" (1 otherwise, also for lists).
START_TEST(slurm_arrays_map_to_shards) {
    ShardSpec s;
    FpError err = {0};
    // --array=0-15: task 0..15 → shard 0..15 of 16.
    char id[16];
    for (int t = 0; t < 16; t++) {
        snprintf(id, sizeof id, "%d", t);
        SlurmArrayEnv e = {id, "0", "15", "16", "1"};
        ck_assert_int_eq(shard_from_slurm(&e, &s, &err), FP_OK);
        ck_assert_int_eq(s.index, t);
        ck_assert_int_eq(s.count, 16);
    }
    // --array=1-31:2 (1, 3, ..., 31): task 7 is the fourth.
    SlurmArrayEnv step = {"7", "1", "31", "16", "2"};
    ck_assert_int_eq(shard_from_slurm(&step, &s, &err), FP_OK);
    ck_assert_int_eq(s.index, 3);
    ck_assert_int_eq(s.count, 16);
    // --array=5-9%2 (a throttle changes nothing), MAX and STEP unset (older Slurm).
    SlurmArrayEnv old = {"9", "5", NULL, "5", NULL};
    ck_assert_int_eq(shard_from_slurm(&old, &s, &err), FP_OK);
    ck_assert_int_eq(s.index, 4);
    ck_assert_int_eq(s.count, 5);
    // An array of one task.
    SlurmArrayEnv one = {"4", "4", "4", "1", "1"};
    ck_assert_int_eq(shard_from_slurm(&one, &s, &err), FP_OK);
    ck_assert_int_eq(s.index, 0);
    ck_assert_int_eq(s.count, 1);
    static const struct {
        SlurmArrayEnv e;
        const char *want;
    } bad[] = {
        {{NULL, "0", "3", "4", "1"}, "SLURM_ARRAY_TASK_ID is not set"},
        {{"1", NULL, "3", "4", "1"}, "SLURM_ARRAY_TASK_MIN is not set"},
        {{"1", "0", "3", NULL, "1"}, "SLURM_ARRAY_TASK_COUNT is not set"},
        {{"1x", "0", "3", "4", "1"}, "SLURM_ARRAY_TASK_ID is \"1x\""},
        {{"-1", "0", "3", "4", "1"}, "SLURM_ARRAY_TASK_ID is \"-1\""},
        {{"1", "0", "3", "0", "1"}, "SLURM_ARRAY_TASK_COUNT is \"0\""},
        {{"1", "0", "3", "4", "0"}, "SLURM_ARRAY_TASK_STEP is \"0\""},
        {{"1", "0", "3", "4", " 1"}, "SLURM_ARRAY_TASK_STEP is \" 1\""},
        {{"1", "0", "3x", "4", "1"}, "SLURM_ARRAY_TASK_MAX is \"3x\""},
        // --array=1,3,5,7: Slurm says STEP 1, so MAX 7 is not MIN + 3·STEP.
        {{"3", "1", "7", "4", "1"}, "not one sequence"},
        // --array=1-7:2,20: STEP 2 but a fifth index at 20.
        {{"20", "1", "20", "5", "2"}, "not one sequence"},
        // --array=0-0:2,1,4 = {0, 1, 4}: MIN/MAX/COUNT/STEP fit 0, 2, 4; task 1 is off it.
        {{"1", "0", "4", "3", "2"}, "not in the sequence"},
        {{"9", "0", "3", "4", "1"}, "not in the sequence"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (FpError){0};
        ck_assert_msg(shard_from_slurm(&bad[i].e, &s, &err) == FP_EPARAM, "case %zu accepted", i);
        ck_assert_msg(strstr(err.msg, bad[i].want) && strncmp(err.msg, "--shard slurm: ", 15) == 0, "case %zu: %s", i,
                      err.msg);
    }
}
END_TEST

// ---- assignment -------------------------------------------------------------------------------

// The largest shard total of an assignment, and the lower bound max(largest cell, total/N)
// that no assignment can beat.
static void makespan(const uint64_t *cost, const int *owner, int n, int count, double *span, double *lower) {
    double *load = calloc((size_t)count, sizeof(double)), total = 0, biggest = 0;
    for (int i = 0; i < n; i++) {
        load[owner[i]] += (double)cost[i];
        total += (double)cost[i];
        biggest = (double)cost[i] > biggest ? (double)cost[i] : biggest;
    }
    *span = 0;
    for (int s = 0; s < count; s++)
        *span = load[s] > *span ? load[s] : *span;
    *lower = total / count > biggest ? total / count : biggest;
    free(load);
}

// Graham's bound for longest processing time first, given the optimum OPT of the instance:
// the largest shard is at most (4/3 − 1/(3N)) · OPT.
static int within_lpt_bound(const uint64_t *cost, const int *owner, int n, int count, double opt) {
    double span, lower;
    makespan(cost, owner, n, count, &span, &lower);
    return span <= (4.0 / 3.0 - 1.0 / (3.0 * count)) * opt + 1e-9;
}

START_TEST(assignment_covers_every_cell_once_and_balances) {
    enum { N_CELLS = 240 };
    uint64_t cost[N_CELLS];
    int owner[N_CELLS], again[N_CELLS];
    RngStream rs = rng_stream(11, RNG_TEST, 0, 0);
    for (int i = 0; i < N_CELLS; i++) // heavy-tailed: a few cells 100x the others
        cost[i] = 1000 + (uint64_t)(1e5 * pow(rng_next_uniform(&rs), 8));
    FpError err = {0};
    for (int count = 1; count <= 17; count++) {
        ck_assert_int_eq(shard_assign(cost, N_CELLS, count, owner, &err), FP_OK);
        ck_assert_int_eq(shard_assign(cost, N_CELLS, count, again, &err), FP_OK);
        ck_assert_int_eq(memcmp(owner, again, sizeof owner), 0); // deterministic
        int per[17] = {0};
        for (int i = 0; i < N_CELLS; i++) {
            ck_assert_int_ge(owner[i], 0);
            ck_assert_int_lt(owner[i], count);
            per[owner[i]]++;
        }
        for (int s = 0; s < count; s++) // every shard has work (240 cells, at most 17 shards)
            ck_assert_int_gt(per[s], 0);
        double span, lower;
        makespan(cost, owner, N_CELLS, count, &span, &lower);
        // No assignment beats `lower`; with many small cells to fill the gaps, LPT lands
        // within the smallest cell of it (1000 of at least 170000: 0.6%); 2% is the check.
        ck_assert_msg(span <= 1.02 * lower, "%d shards: largest %g, lower bound %g", count, span, lower);
    }
    // Equal costs: shard sizes differ by at most one, in matrix order round robin.
    for (int i = 0; i < N_CELLS; i++)
        cost[i] = 7;
    ck_assert_int_eq(shard_assign(cost, 10, 4, owner, &err), FP_OK);
    static const int want[10] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1};
    ck_assert_int_eq(memcmp(owner, want, sizeof want), 0);
    // More shards than cells: the extra shards are empty, every cell still placed once.
    ck_assert_int_eq(shard_assign(cost, 3, 5, owner, &err), FP_OK);
    ck_assert_int_eq(owner[0], 0);
    ck_assert_int_eq(owner[1], 1);
    ck_assert_int_eq(owner[2], 2);
    ck_assert_int_eq(shard_assign(cost, 3, 0, owner, &err), FP_EPARAM);
}
END_TEST

// Graham's worst case for LPT (2N+1 jobs: two each of 2N−1 .. N+1, three of N) meets
// the bound exactly, so the check is tight; naive round robin in matrix order breaks
// it on a list whose large cells all fall on one shard (the control).
START_TEST(lpt_meets_grahams_bound_and_round_robin_does_not) {
    enum { N = 3 };
    uint64_t cost[2 * N + 1] = {5, 5, 4, 4, 3, 3, 3}; // OPT = 9 (5+4, 5+4, 3+3+3)
    int owner[2 * N + 1];
    FpError err = {0};
    ck_assert_int_eq(shard_assign(cost, 2 * N + 1, N, owner, &err), FP_OK);
    double span, lower;
    makespan(cost, owner, 2 * N + 1, N, &span, &lower);
    ck_assert(within_lpt_bound(cost, owner, 2 * N + 1, N, 9));
    ck_assert_double_eq_tol(span, 11, 1e-9); // (4/3 − 1/9) · 9 = 11: the bound is attained
    // The control: cells 0, 2, 4 large, round robin over 2 shards puts them together.
    uint64_t skew[6] = {10, 1, 10, 1, 10, 1};
    int rr[6];
    for (int i = 0; i < 6; i++)
        rr[i] = i % 2;
    ck_assert(!within_lpt_bound(skew, rr, 6, 2, 20)); // OPT 20 (10+10 | 10+1+1+1); round robin: 30
    ck_assert_int_eq(shard_assign(skew, 6, 2, owner, &err), FP_OK);
    ck_assert(within_lpt_bound(skew, owner, 6, 2, 20));
    makespan(skew, owner, 6, 2, &span, &lower);
    ck_assert_double_eq_tol(span, 20, 1e-9);
}
END_TEST

// ---- the cost model -----------------------------------------------------------------------

START_TEST(cost_model_follows_the_config) {
    // train(S) = 3·P · R · m · E · S / N.
    FedConfig f = {.clients = 10, .sample_rate = 0.3, .rounds = 5, .local_epochs = 2, .batch_size = 16};
    ck_assert_uint_eq(cost_train(&f, 5000, 1000, 100), 3ull * 100 * 5 * 3 * 2 * 1000 / 10);
    f.sampling = SAMPLING_BERNOULLI; // the expected participants, rounded: 3
    ck_assert_uint_eq(cost_train(&f, 5000, 1000, 100), 900000ull);
    f.local_steps = 7; // 7 steps of 16 samples per participant per round, whatever S
    ck_assert_uint_eq(cost_train(&f, 5000, 1000, 100), 3ull * 100 * 5 * 3 * 7 * 16);
    f.local_steps = 0;
    f.sample_rate = 0.01; // at least one participant
    ck_assert_uint_eq(cost_train(&f, 5000, 1000, 100), 3ull * 100 * 5 * 1 * 2 * 1000 / 10);
    f.rounds = 1000000; // saturates, never wraps
    f.clients = 1;
    f.sample_rate = 1;
    ck_assert_uint_eq(cost_train(&f, 5000, UINT64_MAX / 2, 1000000), UINT64_MAX);

    // Whole cells from real matrices: cost grows with rounds, model size, shadow models.
    setup_data();
    static const char *const variants[][3] = {
        // federation, model hidden, attacks
        {"\"rounds\": 3", "16", "[{\"name\": \"basic-mia\"}]"},
        {"\"rounds\": 6", "16", "[{\"name\": \"basic-mia\"}]"},
        {"\"rounds\": 3", "64", "[{\"name\": \"basic-mia\"}]"},
        {"\"rounds\": 3", "16", "[{\"name\": \"lira\", \"shadow_models\": 4}]"},
        {"\"rounds\": 3", "16", "[{\"name\": \"lira\", \"shadow_models\": 8}]"},
        {"\"rounds\": 3", "16", "[]"},
    };
    uint64_t c[6];
    for (int v = 0; v < 6; v++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
                 " \"model\": {\"name\": \"mlp\", \"hidden\": [%s]},"
                 " \"federation\": {\"clients\": 4, %s, \"batch_size\": 16, \"lr\": 0.1},"
                 " \"defenses\": [{\"name\": \"none\"}], \"attacks\": %s}",
                 CSV, variants[v][1], variants[v][0], variants[v][2]);
        cJSON *root = cJSON_Parse(text);
        ck_assert_ptr_nonnull(root);
        Matrix *m = NULL;
        FpError err = {0};
        ck_assert_msg(matrix_load(root, NULL, &m, &err) == FP_OK, "%s", err.msg);
        c[v] = matrix_cell_cost(m, 0);
        matrix_free(m);
        cJSON_Delete(root);
    }
    ck_assert(c[5] > 0);
    ck_assert(c[0] > c[5]);                          // an attack adds work
    ck_assert(c[1] > c[0] + c[0] / 2);               // twice the rounds: well over 1.5x
    ck_assert(c[2] > 3 * c[0]);                      // hidden 64 vs 16: over 3x the parameters
    ck_assert(c[4] > c[3] && c[3] > c[5]);           // more shadow models, more work
    // LiRA's shadows train on the target's n/4 samples, so four more of them cost one
    // training of all n: as much as the cell's own federation (c[5] minus evaluation).
    ck_assert(c[4] - c[3] > c[5] / 2 && c[4] - c[3] < 2 * c[5]);
}
END_TEST

// ---- shards and concurrent writers (stand-ins, in process) ------------------------------------

static FpStatus shard_run(const cJSON *root, const char *dir, int index, int count, MatrixSummary *sum, FpError *err) {
    Matrix *m = NULL;
    MatrixOptions mo = {.registry = &standin_registry, .file = "standin.json"};
    FP_TRY(matrix_load(root, &mo, &m, err));
    MatrixRunOptions ro = {.jobs = 1, .shard_index = index, .shard_count = count};
    FpStatus st = matrix_run(m, dir, &ro, sum, err);
    matrix_free(m);
    return st;
}

static const char *reference_run(const cJSON *root) {
    static const char *dir = TEST_DIR "/reference";
    standin_rm(dir);
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, dir, 1, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.cells, 6);
    ck_assert_int_eq(s.done + s.diverged, 6);
    return dir;
}

START_TEST(shards_give_the_same_cells) {
    setup_data();
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\"}]");
    const char *ref = reference_run(root);
    const char *dir = TEST_DIR "/shards";
    standin_rm(dir);
    int total = 0;
    for (int k = 0; k < 3; k++) {
        MatrixSummary s;
        FpError err = {0};
        ck_assert_msg(shard_run(root, dir, k, 3, &s, &err) == FP_OK, "%s", err.msg);
        ck_assert_int_eq(s.cells, 6);
        ck_assert_int_eq(s.mine, 2); // equal costs: 2 cells each
        ck_assert_int_eq(s.skipped, 0);
        ck_assert_int_eq(s.pending + s.failed, 0);
        ck_assert_int_eq(s.matrix_finished, 2 * (k + 1));
        total += s.mine;
    }
    ck_assert_int_eq(total, 6);
    assert_same_runs(ref, dir);
    assert_same_runs(dir, ref);
    assert_index_complete(dir, 6);
    // The report and check read every cell, whichever shard wrote it.
    cJSON *b = cJSON_Parse("{\"require_complete\": true, \"bounds\": [{\"defense\": \"noise\","
                           " \"attack\": \"probe\", \"at_most\": 0.67}, {\"defense\": \"none\", \"attack\": \"probe\","
                           " \"at_least\": 0.99}]}");
    CheckResult cr;
    FpError cerr = {0};
    ck_assert_msg(check_baseline(dir, b, "b.json", &cr, &cerr) == FP_OK, "%s", cerr.msg);
    ck_assert_int_eq(cr.n_violations, 0);
    check_result_free(&cr);
    cJSON_Delete(b);
    int problems = -1;
    ck_assert_msg(report_write_html(dir, TEST_DIR "/shards/report.html", NULL, &problems, &cerr) == FP_OK, "%s",
                  cerr.msg);
    ck_assert_int_eq(problems, 0);
    // A shard run again skips its cells.
    MatrixSummary s;
    FpError err = {0};
    ck_assert_int_eq(shard_run(root, dir, 1, 3, &s, &err), FP_OK);
    ck_assert_int_eq(s.skipped, 2);
    cJSON_Delete(root);
}
END_TEST

// Five processes at once on one folder, with overlapping shards (1/2 and 1/3 share
// cells), so that cells are computed twice at the same time: nothing is corrupted, the
// cells equal the reference, the index ends complete, and no leftovers remain.
START_TEST(concurrent_overlapping_shards_never_corrupt_cells) {
    setup_data();
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\", \"sleep_ms\": 40}]");
    const char *ref = reference_run(root);
    const char *dir = TEST_DIR "/concurrent";
    standin_rm(dir);
    static const int shards[][2] = {{0, 2}, {1, 2}, {0, 3}, {1, 3}, {2, 3}};
    pid_t pids[5];
    fflush(NULL);
    for (int k = 0; k < 5; k++) {
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0) {
            MatrixSummary s;
            FpError err = {0};
            FpStatus st = shard_run(root, dir, shards[k][0], shards[k][1], &s, &err);
            if (st != FP_OK)
                fprintf(stderr, "shard %d/%d: %s\n", shards[k][0] + 1, shards[k][1], err.msg);
            _exit(st == FP_OK && s.pending == 0 && s.failed == 0 ? 0 : 1);
        }
    }
    for (int k = 0; k < 5; k++) {
        int status;
        ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "shard %d/%d failed", shards[k][0] + 1,
                      shards[k][1]);
    }
    assert_same_runs(ref, dir);
    assert_same_runs(dir, ref);
    assert_index_complete(dir, 6);
    cJSON_Delete(root);
}
END_TEST

// flock as the single-host guard: while shard 1/2 runs here (the test holds its locks),
// shard 1/2 again is refused at once, and shard 2/2 runs side by side.
START_TEST(the_same_shard_twice_on_one_host_is_refused) {
    setup_data();
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\"}]");
    const char *dir = TEST_DIR "/locked";
    standin_rm(dir);
    ck_assert(standin_mkdirs(dir));
    int whole = open(TEST_DIR "/locked/.lock", O_RDWR | O_CREAT, 0666);
    int one = open(TEST_DIR "/locked/.lock-shard-1-of-2", O_RDWR | O_CREAT, 0666);
    ck_assert(whole >= 0 && one >= 0);
    ck_assert_int_eq(flock(whole, LOCK_SH), 0);
    ck_assert_int_eq(flock(one, LOCK_EX), 0);
    MatrixSummary s;
    FpError err = {0};
    ck_assert_int_eq(shard_run(root, dir, 0, 2, &s, &err), FP_EIO);
    ck_assert_msg(strstr(err.msg, "shard 1/2 of the matrix standin.json is already running on this machine"), "%s",
                  err.msg);
    err = (FpError){0};
    ck_assert_msg(shard_run(root, dir, 1, 2, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.mine, 3);
    ck_assert_int_eq(s.pending, 0);
    close(one);
    close(whole);
    ck_assert_msg(shard_run(root, dir, 0, 2, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.matrix_finished, 6);
    cJSON_Delete(root);
}
END_TEST

// A PID that no process has any more: a child that exited and was reaped.
static pid_t dead_pid(void) {
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0)
        _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

// Leftovers of dead writers on this host go; another host's stay (its writer may live).
START_TEST(leftovers_of_dead_writers_go_and_other_hosts_stay) {
    setup_data();
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\"}]");
    const char *dir = TEST_DIR "/leftovers";
    standin_rm(dir);
    ck_assert(standin_mkdirs(TEST_DIR "/leftovers/cells"));
    char host[72], dead[PROC_TAG_MAX + 8], p[512];
    proc_host(host, sizeof host);
    snprintf(dead, sizeof dead, "%s.%d", host, (int)dead_pid());
    ck_assert(proc_tag_is_dead(dead));
    ck_assert(!proc_tag_is_dead("elsewhere.1"));
    char mine[PROC_TAG_MAX];
    proc_tag(mine, sizeof mine);
    ck_assert(!proc_tag_is_dead(mine));
    snprintf(p, sizeof p, "%s/cells/none-x.partial.%s", dir, dead);
    ck_assert(standin_mkdirs(p));
    snprintf(p, sizeof p, "%s/cells/none-x.partial.%s/junk.png", dir, dead);
    standin_write_text(p, "x");
    snprintf(p, sizeof p, "%s/cells/none-x.json.tmp.%s", dir, dead);
    standin_write_text(p, "{");
    snprintf(p, sizeof p, "%s/results.json.tmp.%s", dir, dead);
    standin_write_text(p, "{");
    snprintf(p, sizeof p, "%s/cells/ghost.running", dir);
    char claim[512];
    snprintf(claim, sizeof claim, "{\"cell\": \"ghost\", \"tag\": \"%s\"}", dead);
    standin_write_text(p, claim);
    ck_assert(standin_mkdirs(TEST_DIR "/leftovers/cells/none-y.partial.elsewhere.123"));
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, dir, 1, &s, &err) == FP_OK, "%s", err.msg);
    snprintf(p, sizeof p, "%s/cells/none-x.partial.%s", dir, dead);
    ck_assert_msg(!exists(p), "%s kept", p);
    snprintf(p, sizeof p, "%s/cells/none-x.json.tmp.%s", dir, dead);
    ck_assert(!exists(p));
    snprintf(p, sizeof p, "%s/results.json.tmp.%s", dir, dead);
    ck_assert(!exists(p));
    ck_assert(!exists(TEST_DIR "/leftovers/cells/ghost.running"));
    ck_assert(exists(TEST_DIR "/leftovers/cells/none-y.partial.elsewhere.123"));
    cJSON_Delete(root);
}
END_TEST

static const char *cell_id(const char *dir, int i) {
    static char id[128];
    char path[512];
    snprintf(path, sizeof path, "%s/results.json", dir);
    cJSON *ix = load_json(path);
    const cJSON *cell = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ix, "cells"), i);
    snprintf(id, sizeof id, "%s", cJSON_GetObjectItemCaseSensitive(cell, "id")->valuestring);
    cJSON_Delete(ix);
    return id;
}

// Done, diverged, failed, running (claimed by a live writer, here on another host),
// missing (never run, or its writer died), and the index rebuilt from the cell files.
START_TEST(status_tells_each_state) {
    setup_data();
    cJSON *root = standin_matrix(CSV, some_defenses, "[{\"name\": \"probe\"}]");
    const char *dir = TEST_DIR "/status";
    standin_rm(dir);
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, dir, 1, &s, &err) == FP_OK, "%s", err.msg);
    char p[512], text[1024];
    // Cell 1 failed; cell 2 missing; cell 3 running elsewhere; cell 4 interrupted here.
    snprintf(p, sizeof p, "%s/cells/%s.json", dir, cell_id(dir, 1));
    cJSON *c = load_json(p);
    cJSON_ReplaceItemInObjectCaseSensitive(c, "status", cJSON_CreateString("failed"));
    cJSON_AddStringToObject(c, "message", "out of disk");
    ck_assert_int_eq(jv_write_file_atomic(p, c, &err), FP_OK);
    cJSON_Delete(c);
    for (int i = 2; i <= 4; i++) {
        snprintf(p, sizeof p, "%s/cells/%s.json", dir, cell_id(dir, i));
        cJSON *cj = load_json(p);
        char h[32];
        snprintf(h, sizeof h, "%s", cJSON_GetObjectItemCaseSensitive(cj, "spec_hash")->valuestring);
        cJSON_Delete(cj);
        ck_assert_int_eq(unlink(p), 0);
        if (i == 2)
            continue;
        char host[72];
        proc_host(host, sizeof host);
        pid_t pid = i == 3 ? 4242 : dead_pid();
        snprintf(text, sizeof text,
                 "{\"cell\": \"%s\", \"spec_hash\": \"%s\", \"host\": \"%s\", \"pid\": %d, \"tag\": \"%s.%d\","
                 " \"shard\": \"2/4\", \"started\": %.0f}",
                 cell_id(dir, i), h, i == 3 ? "elsewhere" : host, (int)pid, i == 3 ? "elsewhere" : host, (int)pid,
                 (double)time(NULL) - 300);
        snprintf(p, sizeof p, "%s/cells/%s.running", dir, cell_id(dir, i));
        standin_write_text(p, text);
    }
    MatrixStatus st;
    ck_assert_msg(matrix_status_load(dir, &st, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(st.n, 6);
    ck_assert_int_eq(st.counts[CELL_STATE_DONE], 1);     // none (cell 0)
    ck_assert_int_eq(st.counts[CELL_STATE_DIVERGED], 1); // explode (cell 5)
    ck_assert_int_eq(st.counts[CELL_STATE_FAILED], 1);
    ck_assert_int_eq(st.counts[CELL_STATE_RUNNING], 1);
    ck_assert_int_eq(st.counts[CELL_STATE_MISSING], 2);
    ck_assert_int_eq(st.cells[1].state, CELL_STATE_FAILED);
    ck_assert_str_eq(st.cells[1].detail, "out of disk");
    ck_assert_int_eq(st.cells[2].state, CELL_STATE_MISSING);
    ck_assert_str_eq(st.cells[2].detail, "");
    ck_assert_int_eq(st.cells[3].state, CELL_STATE_RUNNING);
    ck_assert_msg(strstr(st.cells[3].detail, "elsewhere, pid 4242, shard 2/4, for 5 min"), "%s", st.cells[3].detail);
    ck_assert_int_eq(st.cells[4].state, CELL_STATE_MISSING);
    ck_assert_msg(strncmp(st.cells[4].detail, "interrupted: its writer died", 28) == 0, "%s", st.cells[4].detail);
    matrix_status_free(&st);
    // The index now says what the files say.
    snprintf(p, sizeof p, "%s/results.json", dir);
    cJSON *ix = load_json(p);
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(ix, "cells");
    static const char *const want[] = {"done", "failed", "pending", "pending", "pending", "diverged"};
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cells, i), "status")->valuestring,
                         want[i]);
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(ix, "counts");
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(counts, "pending")->valueint, 3);
    cJSON_Delete(ix);
    // A rerun finishes the matrix (and retries the diverged cell once); the foreign claim
    // is gone with the cell it claimed.
    ck_assert_msg(standin_run(root, dir, 1, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.skipped, 1);
    ck_assert_int_eq(s.done + s.diverged, 6);
    ck_assert_msg(matrix_status_load(dir, &st, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(st.counts[CELL_STATE_DONE] + st.counts[CELL_STATE_DIVERGED], 6);
    matrix_status_free(&st);
    snprintf(p, sizeof p, "%s/cells/%s.running", dir, cell_id(dir, 3));
    ck_assert(!exists(p));
    ck_assert_int_eq(matrix_status_load(TEST_DIR "/no-such-run", &st, &err), FP_EIO);
    cJSON_Delete(root);
}
END_TEST

// Built without MPI, a binary started by a launcher of several processes refuses to run
// (each would do the whole job); alone, it needs no MPI at all.
START_TEST(a_launcher_without_mpi_is_refused) {
    Comm *c = NULL;
    FpError err = {0};
    ck_assert_int_eq(comm_create(&c, &err), FP_OK); // no launcher here: one process
    ck_assert_int_eq(comm_size(c), 1);
    ck_assert_int_eq(comm_rank(c), 0);
    ck_assert_str_eq(comm_kind(c), "local");
    int v;
    ck_assert_int_eq(comm_min_int(c, 5, &v, &err), FP_OK);
    ck_assert_int_eq(v, 5);
    comm_free(c);
    if (comm_mpi_built()) {
        fprintf(stderr, "SKIP: this build has MPI; the refusal is for builds without it [a_launcher_without_mpi]\n");
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
        setenv("OMPI_COMM_WORLD_RANK", "1", 1);
        Comm *cc = NULL;
        FpError e = {0};
        FpStatus st = comm_create(&cc, &e);
        _exit(st == FP_EUNSUPPORTED && strstr(e.msg, "built without MPI") ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

Suite *suite_cluster(void) {
    Suite *s = suite_create("cluster");
    TCase *tu = tcase_create("shards");
    tcase_add_test(tu, shard_specs_parse_strictly);
    tcase_add_test(tu, slurm_arrays_map_to_shards);
    tcase_add_test(tu, assignment_covers_every_cell_once_and_balances);
    tcase_add_test(tu, lpt_meets_grahams_bound_and_round_robin_does_not);
    tcase_add_test(tu, cost_model_follows_the_config);
    tcase_add_test(tu, a_launcher_without_mpi_is_refused);
    suite_add_tcase(s, tu);
    TCase *tw = tcase_create("writers");
    tcase_set_timeout(tw, 120);
    tcase_add_test(tw, shards_give_the_same_cells);
    tcase_add_test(tw, concurrent_overlapping_shards_never_corrupt_cells);
    tcase_add_test(tw, the_same_shard_twice_on_one_host_is_refused);
    tcase_add_test(tw, leftovers_of_dead_writers_go_and_other_hosts_stay);
    tcase_add_test(tw, status_tells_each_state);
    suite_add_tcase(s, tw);
    return s;
}
