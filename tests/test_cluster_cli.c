// Matrices beyond one process, through the binary (make test sets FEDPRIV_BIN): a tiny
// real matrix (three Gaussian blobs, an MLP, three real defenses, basic-mia) run in one
// process, as shards (--shard K/N, and the tasks of an emulated Slurm array), under
// mpirun -n 1, 2 and 3 (--oversubscribe: this machine may have fewer cores), and with a
// rank killed mid-matrix then a rerun: the cells must equal the one-process run's, timings
// apart. Without mpirun or without an MPI build the MPI parts print SKIP with the reason
// (FEDPRIV_REQUIRE_MPI=1 turns that into a failure, for CI, where make deps installs
// Open MPI). One federation across ranks: fedpriv train with 1 process and under mpirun
// -n 2 and 3 gives the same weights and result. The library side is tests/test_cluster.c
// (and, for a round's records, tests/test_observe.c).
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>

#include "cli_run.h"
#include "core/comm.h"
#include "fl/experiment.h"
#include "matrix_compare.h"
#include "matrix_standins.h"
#include "runner/matrix_status.h"

#define TEST_DIR "build/test-cluster-cli"
#define CSV TEST_DIR "/blobs.csv"

static void setup_data(void) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
}

// ---- the CLI: a tiny real matrix ----------------------------------------------------------

#define REAL_MATRIX TEST_DIR "/real.json"
#define SLOW_MATRIX TEST_DIR "/real-slow.json"
#define REAL_DEFENSES                                                                                      \
    "[{\"name\": \"none\"}, {\"name\": \"laplace\", \"clip\": 1, \"epsilon\": [1, 2, 4]},"                  \
    " {\"name\": \"gaussian-dpfedavg\", \"noise\": \"client\", \"epsilon\": [1, 2]}]"

static void write_real_matrix(const char *path, int rounds, const char *defenses) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"threads\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
             " \"federation\": {\"clients\": 4, \"rounds\": %d, \"batch_size\": 16, \"lr\": 0.1},"
             " \"defenses\": %s, \"attacks\": [{\"name\": \"basic-mia\"}]}",
             "blobs.csv", rounds, defenses); // beside the matrix file, which its paths are relative to
    standin_write_text(path, text);
}

static char out_buf[1 << 16], err_buf[1 << 16];

// `fedpriv matrix FILE --out DIR [a b]`; the exit status.
static int run_matrix(const char *file, const char *dir, const char *a, const char *b) {
    const char *args[] = {"matrix", file, "--out", dir, a, b, NULL};
    return cli_run(args, out_buf, err_buf, sizeof out_buf);
}

// mpirun's path, or NULL after printing SKIP (a failure under FEDPRIV_REQUIRE_MPI=1):
// without mpirun, or in a build without MPI.
static const char *mpirun_or_skip(const char *test) {
    static char path[1024];
    const char *p = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", p ? p : "/usr/bin:/bin");
    path[0] = 0;
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d && !path[0]; d = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof path, "%s/mpirun", d);
        if (access(path, X_OK) != 0)
            path[0] = 0;
    }
    const char *why = NULL;
    if (!path[0])
        why = "mpirun is not installed (make deps installs Open MPI: openmpi-bin, libopenmpi-dev)";
    else if (!comm_mpi_built()) // this runner and FEDPRIV_BIN come from the same build
        why = "fedpriv was built without MPI (make MPI=1)";
    if (!why)
        return path;
    const char *req = getenv("FEDPRIV_REQUIRE_MPI");
    ck_assert_msg(!(req && *req && strcmp(req, "0") != 0), "%s: FEDPRIV_REQUIRE_MPI is set but %s", test, why);
    fprintf(stderr, "SKIP: %s [%s]\n", why, test);
    return NULL;
}

// Under SANITIZE=1: Open MPI keeps allocations from MPI_Init past MPI_Finalize on
// purpose, and LeakSanitizer would report them and fail a clean run. They are told apart
// from ours by tests/openmpi.lsan.supp, which names Open MPI's libraries and components:
// the components stay loaded so that their frames keep their names (no dlclose), and the
// stacks are unwound slowly so that they reach those libraries (Debian builds them
// without frame pointers). Leak detection stays on for jobs of up to two ranks, every
// command here but two. In jobs of three ranks on the 2-core test machine, LeakSanitizer's
// own tracer was seen to crash at exit ("Tracer caught signal 11 ... LeakSanitizer has
// encountered a fatal error") after a run that had finished cleanly: a limit of the
// sanitizer's stop-the-world under oversubscription, not a leak. Those jobs run with the
// leak check off; ASan checks everything else, and the same code is leak-checked in the
// two-rank jobs. No effect on other builds. Set by mpi_argv, the one builder of every
// mpirun command here, for the commands that follow.
static void sanitizer_env_for_mpi(int total_ranks) {
    char supp[PATH_MAX], opts[PATH_MAX + 128];
    ck_assert_ptr_nonnull(realpath("tests/openmpi.lsan.supp", supp));
    snprintf(opts, sizeof opts, "suppressions=%s:print_suppressions=0:fast_unwind_on_malloc=0", supp);
    if (total_ranks > 2)
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    else
        unsetenv("ASAN_OPTIONS");
    setenv("LSAN_OPTIONS", opts, 1);
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
}

#define MPI_ARGV_MAX 24

// Appends `-n R fedpriv ARGS...` (args NULL-terminated) to argv at *k.
static void mpi_argv_app(const char *argv[MPI_ARGV_MAX], int *k, const char *ranks, const char *const *args) {
    argv[(*k)++] = "-n";
    argv[(*k)++] = ranks;
    argv[(*k)++] = getenv("FEDPRIV_BIN");
    for (int i = 0; args[i]; i++) {
        ck_assert_int_lt(*k, MPI_ARGV_MAX - 4);
        argv[(*k)++] = args[i];
    }
    argv[*k] = NULL;
}

// The argv of `mpirun [--allow-run-as-root] --oversubscribe -n R fedpriv ARGS...` (args
// NULL-terminated), then `: -n R2 fedpriv ARGS2...` when args2 is not NULL (two
// programs in one job); and the sanitizer environment it runs under.
static void mpi_argv_mpmd(const char *argv[MPI_ARGV_MAX], const char *mpirun, const char *ranks,
                          const char *const *args, const char *ranks2, const char *const *args2) {
    sanitizer_env_for_mpi(atoi(ranks) + (args2 ? atoi(ranks2) : 0));
    int k = 0;
    argv[k++] = mpirun;
    if (geteuid() == 0)
        argv[k++] = "--allow-run-as-root";
    argv[k++] = "--oversubscribe";
    mpi_argv_app(argv, &k, ranks, args);
    if (args2) {
        argv[k++] = ":";
        mpi_argv_app(argv, &k, ranks2, args2);
    }
}

static void mpi_argv(const char *argv[MPI_ARGV_MAX], const char *mpirun, const char *ranks, const char *const *args) {
    mpi_argv_mpmd(argv, mpirun, ranks, args, NULL, NULL);
}

// `mpirun -n R fedpriv matrix FILE --out DIR`; the exit status.
static int mpi_matrix(const char *mpirun, int ranks, const char *file, const char *dir) {
    char n[8];
    snprintf(n, sizeof n, "%d", ranks);
    const char *argv[MPI_ARGV_MAX], *args[] = {"matrix", file, "--out", dir, NULL};
    mpi_argv(argv, mpirun, n, args);
    return cli_exec(argv, out_buf, err_buf, sizeof out_buf);
}

// One process, then every other way: shards 1/3..3/3 (--shard 1/3, then tasks of an
// emulated Slurm array, with --status between), mpirun -n 1, 2 and 3. Every way gives the
// cells of the one-process run, timings apart, and a complete index.
START_TEST(cli_every_way_gives_the_same_cells) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN")) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    setup_data();
    write_real_matrix(REAL_MATRIX, 3, REAL_DEFENSES);
    const char *ref = TEST_DIR "/real-one";
    standin_rm(ref);
    int rc = run_matrix(REAL_MATRIX, ref, NULL, NULL);
    ck_assert_msg(rc == 0, "fedpriv matrix exited %d:\n%s", rc, err_buf);

    // Shard 1/3 with --shard 1/3, then --status; shards 2/3 and 3/3 as the tasks 3 and 5
    // of an emulated Slurm array --array=1-5:2 (MIN 1, MAX 5, COUNT 3, STEP 2).
    const char *dir = TEST_DIR "/real-shards";
    standin_rm(dir);
    rc = run_matrix(REAL_MATRIX, dir, "--shard", "1/3");
    ck_assert_msg(rc == 0, "--shard 1/3 exited %d:\n%s", rc, err_buf);
    ck_assert_msg(strstr(err_buf, "matrix: shard 1/3: 2 cells: 2 done"), "%s", err_buf);
    const char *st_args[] = {"matrix", "--status", dir, NULL};
    ck_assert_int_eq(cli_run(st_args, out_buf, err_buf, sizeof out_buf), 1); // 1 until every cell is finished
    char want[160];
    snprintf(want, sizeof want, "%s: 6 cells: 2 done, 0 diverged, 0 failed, 0 running, 4 missing\n", dir);
    ck_assert_msg(strncmp(out_buf, want, strlen(want)) == 0, "%s", out_buf);
    ck_assert_int_eq(cli_count_lines(out_buf), 1 + 4); // one line per missing cell
    setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
    setenv("SLURM_ARRAY_TASK_MAX", "5", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
    setenv("SLURM_ARRAY_TASK_STEP", "2", 1);
    setenv("SLURM_ARRAY_JOB_ID", "77", 1);
    for (int t = 3; t <= 5; t += 2) {
        char id[16];
        snprintf(id, sizeof id, "%d", t);
        setenv("SLURM_ARRAY_TASK_ID", id, 1);
        rc = run_matrix(REAL_MATRIX, dir, "--shard", "slurm");
        ck_assert_msg(rc == 0, "task %d exited %d:\n%s", t, rc, err_buf);
        snprintf(want, sizeof want, "matrix: shard %d/3: 2 cells: 2 done", t / 2 + 1);
        ck_assert_msg(strstr(err_buf, want), "no \"%s\" in:\n%s", want, err_buf);
    }
    setenv("SLURM_ARRAY_TASK_ID", "4", 1); // off the sequence
    ck_assert_int_eq(run_matrix(REAL_MATRIX, dir, "--shard", "slurm"), 2);
    ck_assert_msg(strstr(err_buf, "task 4 is not in the sequence 1, 3, ... 5") && cli_count_lines(err_buf) == 1,
                  "%s", err_buf);
    static const char *const vars[] = {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                                       "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP", "SLURM_ARRAY_JOB_ID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    assert_same_runs(ref, dir);
    assert_same_runs(dir, ref);
    assert_index_complete(dir, 6);
    const char *json_args[] = {"matrix", "--status", dir, "--json", NULL};
    ck_assert_int_eq(cli_run(json_args, out_buf, err_buf, sizeof out_buf), 0);
    cJSON *j = cJSON_Parse(out_buf);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "counts"), "done")->valueint,
                     6);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "list")), 6);
    cJSON_Delete(j);

    // Bad input: one line, exit 2 (the parsers' cases are the unit tests above).
    rc = run_matrix(REAL_MATRIX, dir, "--shard", "0/3");
    ck_assert_msg(rc == 2 && strstr(err_buf, "--shard: expected K/N") && cli_count_lines(err_buf) == 1, "%d %s", rc,
                  err_buf);
    rc = run_matrix(REAL_MATRIX, dir, "--shard", "slurm");
    ck_assert_msg(rc == 2 && strstr(err_buf, "SLURM_ARRAY_TASK_ID is not set") && cli_count_lines(err_buf) == 1,
                  "%d %s", rc, err_buf);
    const char *missing[] = {"matrix", "--status", TEST_DIR "/no-such-run", NULL};
    ck_assert_int_eq(cli_run(missing, out_buf, err_buf, sizeof out_buf), 2);
    ck_assert_int_eq(cli_count_lines(err_buf), 1);
    const char *mixed[] = {"matrix", "--status", dir, "--shard", "1/2", NULL};
    ck_assert_int_eq(cli_run(mixed, out_buf, err_buf, sizeof out_buf), 2);

    // MPI ranks.
    const char *mpirun = mpirun_or_skip("cli_every_way_gives_the_same_cells: mpirun -n 1, 2, 3");
    for (int r = 1; mpirun && r <= 3; r++) {
        char mdir[128];
        snprintf(mdir, sizeof mdir, TEST_DIR "/real-mpi%d", r);
        standin_rm(mdir);
        rc = mpi_matrix(mpirun, r, REAL_MATRIX, mdir);
        ck_assert_msg(rc == 0, "mpirun -n %d exited %d:\n%s\n%s", r, rc, out_buf, err_buf);
        ck_assert_msg(strstr(err_buf, "matrix: 6 cells: 6 done"), "%s", err_buf);
        if (r > 1) {
            snprintf(want, sizeof want, "matrix: %d MPI ranks", r);
            ck_assert_msg(strstr(err_buf, want), "%s", err_buf);
        }
        assert_same_runs(ref, mdir);
        assert_same_runs(mdir, ref);
        assert_index_complete(mdir, 6);
    }
}
END_TEST

// A defended cell whose reference (the "none" cell) is not on disk yet runs the
// reference's attacks itself: shards run in the order 3, 2, 1 (the "none" cell is in
// shard 1) give every cell the same result, "applicable" included, as one process that
// ran "none" first. Without it a membership attack's "applicable" was null in the
// cells that ran before "none" finished, so the result depended on the order.
START_TEST(a_cell_runs_its_missing_reference_itself) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN")) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    setup_data();
    write_real_matrix(REAL_MATRIX, 3, REAL_DEFENSES);
    const char *ref = TEST_DIR "/reference-one", *dir = TEST_DIR "/reference-backwards";
    standin_rm(ref);
    standin_rm(dir);
    int rc = run_matrix(REAL_MATRIX, ref, NULL, NULL);
    ck_assert_msg(rc == 0, "fedpriv matrix exited %d:\n%s", rc, err_buf);
    ck_assert_msg(!strstr(err_buf, "here, its reference"), "one process ran none first, yet:\n%s", err_buf);
    int ran_here = 0;
    for (int k = 3; k >= 1; k--) {
        char shard[32];
        snprintf(shard, sizeof shard, "%d/3", k);
        rc = run_matrix(REAL_MATRIX, dir, "--shard", shard);
        ck_assert_msg(rc == 0, "--shard %s exited %d:\n%s", shard, rc, err_buf);
        ran_here += strstr(err_buf, "running the attacks of cell none-") != NULL;
    }
    ck_assert_msg(ran_here >= 1, "no shard ran the reference's attacks itself");
    assert_same_runs(ref, dir);
    assert_same_runs(dir, ref);
    assert_index_complete(dir, 6);
    cJSON *cell = NULL;
    char p[512];
    DIR *d = opendir(TEST_DIR "/reference-backwards/cells");
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int defended = 0;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, "laplace-", 8) == 0 && strstr(de->d_name, ".json")) {
            snprintf(p, sizeof p, "%s/cells/%s", dir, de->d_name);
            cell = load_json(p);
            const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cell, "attacks"), 0);
            ck_assert_msg(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(a, "applicable")), "%s: applicable undecided",
                          p);
            cJSON_Delete(cell);
            defended++;
        }
    closedir(d);
    ck_assert_int_eq(defended, 3);
}
END_TEST

// The pid of a claim by rank `rank` in dir, or 0.
static pid_t claim_of_rank(const char *dir, int rank) {
    char cells[256];
    snprintf(cells, sizeof cells, "%s/cells", dir);
    DIR *d = opendir(cells);
    if (!d)
        return 0;
    pid_t pid = 0;
    struct dirent *de;
    while (!pid && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 8 || strcmp(de->d_name + n - 8, ".running") != 0)
            continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", cells, de->d_name);
        cJSON *c = NULL;
        if (jv_load_file(p, &c, NULL) != FP_OK)
            continue; // gone meanwhile
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "rank");
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(c, "pid");
        if (cJSON_IsNumber(r) && r->valueint == rank && cJSON_IsNumber(pj))
            pid = (pid_t)pj->valueint;
        cJSON_Delete(c);
    }
    closedir(d);
    return pid;
}

// Rank 1 is stopped and killed in the middle of a cell; mpirun takes the job down; a
// rerun finishes the matrix, and the cells equal those of one process.
START_TEST(mpi_killed_rank_then_rerun_gives_the_same_cells) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN")) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    const char *mpirun = mpirun_or_skip("mpi_killed_rank_then_rerun_gives_the_same_cells");
    if (!mpirun)
        return;
    setup_data();
    // Four cells of about 0.1 s each in the release build: long enough to catch rank 1
    // inside one.
    write_real_matrix(SLOW_MATRIX, 8,
                      "[{\"name\": \"none\"}, {\"name\": \"laplace\", \"clip\": 1, \"epsilon\": [1, 2]},"
                      " {\"name\": \"gaussian-dpfedavg\", \"noise\": \"client\", \"epsilon\": 1}]");
    const char *ref = TEST_DIR "/slow-one", *dir = TEST_DIR "/slow-mpi";
    standin_rm(ref);
    standin_rm(dir);
    const char *argv[MPI_ARGV_MAX], *args[] = {"matrix", SLOW_MATRIX, "--out", dir, NULL};
    mpi_argv(argv, mpirun, "2", args);
    fflush(NULL);
    pid_t job = fork();
    ck_assert_int_ge(job, 0);
    if (job == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    pid_t victim = 0;
    for (int t = 0; t < 12000 && !victim; t++) { // up to a minute for the ranks to start
        victim = claim_of_rank(dir, 1);
        if (!victim)
            usleep(5000);
    }
    ck_assert_msg(victim > 0, "rank 1 never claimed a cell");
    kill(victim, SIGSTOP); // frozen where it is (mid-cell, or just past it), then killed
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(job, &status, 0), job);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "the job survived the loss of a rank");
    MatrixStatus st;
    FpError err = {0};
    ck_assert_msg(matrix_status_load(dir, &st, &err) == FP_OK, "%s", err.msg);
    int finished = st.counts[CELL_STATE_DONE] + st.counts[CELL_STATE_DIVERGED];
    ck_assert_int_lt(finished, 4);                       // killed mid-matrix
    ck_assert_int_eq(st.counts[CELL_STATE_RUNNING], 0); // every writer is gone: nothing "running"
    matrix_status_free(&st);
    int rc = mpi_matrix(mpirun, 2, SLOW_MATRIX, dir);
    ck_assert_msg(rc == 0, "the rerun exited %d:\n%s", rc, err_buf);
    char want[64];
    snprintf(want, sizeof want, "%d already finished", finished);
    ck_assert_msg(strstr(err_buf, want), "no \"%s\" in:\n%s", want, err_buf);
    rc = run_matrix(SLOW_MATRIX, ref, NULL, NULL);
    ck_assert_msg(rc == 0, "the one-process run exited %d:\n%s", rc, err_buf);
    assert_same_runs(ref, dir);
    assert_same_runs(dir, ref);
}
END_TEST

// ---- one federation across ranks ------------------------------------------------------------

// (The configs are written to TEST_DIR/<run>/, and their data path is relative to them.)
// Two federations, each with client sampling: server-side Gaussian noise (gaussian-dpfedavg,
// keyed by the round, drawn on every rank), and client-side Laplace noise whose aggregation
// weighs each upload by the loss its client reported (dp-fedasgp's paper variant: the
// per-client state moves with the upload).
#define TRAIN_CONFIG(defense, sampling)                                                                     \
    "{\"seed\": 5, \"threads\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"../blobs.csv\"},"               \
    " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"                                                    \
    " \"federation\": {\"clients\": 7, \"sample_rate\": 0.6, \"sampling\": \"" sampling "\", \"rounds\": 3," \
    " \"batch_size\": 16, \"lr\": 0.1, \"momentum\": 0.5}, \"defense\": " defense "}"
// The first two are running sums (DefenseOps.sum_add: the uploads stream to rank 0, which
// adds them in client order), the third gathers every upload on every rank
// (server_aggregate). "none" runs two threads per rank: the uploads of a rank's threads
// join the sum in turn.
static const char *const train_configs[][2] = {
    {"server", TRAIN_CONFIG("{\"name\": \"gaussian-dpfedavg\", \"noise\": \"server\", \"noise_multiplier\": 1}",
                            "fixed")},
    {"none",
     "{\"seed\": 5, \"threads\": 2, \"dataset\": {\"name\": \"csv\", \"path\": \"../blobs.csv\"},"
     " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
     " \"federation\": {\"clients\": 7, \"sample_rate\": 0.9, \"rounds\": 3, \"batch_size\": 16, \"lr\": 0.1},"
     " \"defense\": {\"name\": \"none\"}}"},
    {"client", TRAIN_CONFIG("{\"name\": \"dp-fedasgp\", \"variant\": \"paper\", \"epsilon\": 4}", "bernoulli")},
};

// The bytes of a file (malloc'd, *n of them), or NULL.
static char *read_bytes(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long len = -1;
    if (fp && fseek(fp, 0, SEEK_END) == 0 && (len = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)len + 1)) && fread(buf, 1, (size_t)len, fp) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (fp)
        fclose(fp);
    *n = buf ? (size_t)len : 0;
    return buf;
}

// `[mpirun -n R] fedpriv train --config FILE --out DIR/r<R>.json --save-model DIR/m<R>.bin`
// (R = 0: no mpirun); the exit status.
static int train_ranks(const char *mpirun, int ranks, const char *file, const char *dir, const char *extra) {
    char res[512], model[512], n[8];
    snprintf(res, sizeof res, "%s/r%d.json", dir, ranks);
    snprintf(model, sizeof model, "%s/m%d.bin", dir, ranks);
    snprintf(n, sizeof n, "%d", ranks);
    const char *args[] = {"train", "--config", file, "--out", res, "--save-model", model, extra, NULL};
    if (!mpirun)
        return cli_run(args, out_buf, err_buf, sizeof out_buf);
    const char *argv[MPI_ARGV_MAX];
    mpi_argv(argv, mpirun, n, args);
    return cli_exec(argv, out_buf, err_buf, sizeof out_buf);
}

// Every round of a train result states an accounted privacy record: never the record of a
// rank that did not account it (fl/fed.c accounts on rank 0 alone, which writes the
// result), and with its sound figure and, where the defense states it, the field's PLD
// figure present (a number or "inf").
static void assert_rounds_accounted(const cJSON *res, int rounds, const char *what) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(res, "rounds");
    ck_assert_msg(cJSON_GetArraySize(arr) == rounds, "%s: %d rounds, not %d", what, cJSON_GetArraySize(arr), rounds);
    for (int r = 0; r < rounds; r++) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, r), "privacy");
        char *text = p ? cJSON_PrintUnformatted(p) : NULL;
        ck_assert_msg(text && !strstr(text, PRIVACY_UNACCOUNTED_REASON), "%s: round %d is not accounted: %s", what,
                      r + 1, text ? text : "(no privacy record)");
        free(text);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "sound"),
                                                          "epsilon_total");
        ck_assert_msg(cJSON_IsNumber(e) || cJSON_IsString(e), "%s: round %d has no sound figure", what, r + 1);
        const cJSON *std = cJSON_GetObjectItemCaseSensitive(p, "standard");
        if (std)
            ck_assert_msg(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(std, "pld")), "%s: round %d has no PLD "
                          "figure", what, r + 1);
    }
}

// fedpriv train with 1 process and under mpirun -n 2 and 3: the same final weights, bit for
// bit, and the same result JSON apart from timings, every round's privacy record included
// and accounted (rank 0 alone accounts, assert_rounds_accounted; the control replaces one
// round's record by an unaccounted rank's); rank 0 alone reports progress. The
// same for an attack's federation (basic-mia, 1 and 2 ranks). A rank that cannot load
// the experiment stops them all; a secure-RNG run is refused.
START_TEST(train_across_ranks_is_bit_identical) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN")) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    setup_data();
    const char *mpirun = mpirun_or_skip("train_across_ranks_is_bit_identical: mpirun -n 2, 3");
    if (!mpirun)
        return;
    for (size_t c = 0; c < sizeof train_configs / sizeof *train_configs; c++) {
        char dir[256], file[300];
        snprintf(dir, sizeof dir, TEST_DIR "/train-%s", train_configs[c][0]);
        snprintf(file, sizeof file, "%s/config.json", dir);
        standin_rm(dir);
        ck_assert(standin_mkdirs(dir));
        standin_write_text(file, train_configs[c][1]);
        int rc = train_ranks(NULL, 1, file, dir, NULL);
        ck_assert_msg(rc == 0, "%s: one process exited %d:\n%s", file, rc, err_buf);
        char p1[512], pr[512];
        snprintf(p1, sizeof p1, "%s/r1.json", dir);
        cJSON *one = load_json(p1);
        strip_timings(one);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(one, "status")->valuestring, "ok");
        assert_rounds_accounted(one, 3, file);
        if (c == 0) {
            // The control: one round's record replaced by an unaccounted rank's is caught,
            // by the check above and by the comparison below.
            cJSON *bad = cJSON_Duplicate(one, 1);
            PrivacyRecord un;
            privacy_record_unaccounted(&un, PRIVACY_UNACCOUNTED_REASON);
            cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(bad, "rounds"), 1),
                                                   "privacy", privacy_record_json(&un));
            ck_assert_msg(!cJSON_Compare(one, bad, 1), "a round's unaccounted record should differ from its account");
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(bad, "rounds"), 1), "privacy");
            char *text = cJSON_PrintUnformatted(p);
            ck_assert_msg(strstr(text, PRIVACY_UNACCOUNTED_REASON), "the unaccounted record says so: %s", text);
            free(text);
            cJSON_Delete(bad);
        }
        for (int r = 2; r <= 3; r++) {
            rc = train_ranks(mpirun, r, file, dir, NULL);
            ck_assert_msg(rc == 0, "%s: mpirun -n %d exited %d:\n%s\n%s", file, r, rc, out_buf, err_buf);
            const char *first = strstr(err_buf, "round 1/3");
            ck_assert_msg(first && !strstr(first + 1, "round 1/3"), "rank 0 alone reports progress:\n%s", err_buf);
            snprintf(p1, sizeof p1, "%s/m1.bin", dir);
            snprintf(pr, sizeof pr, "%s/m%d.bin", dir, r);
            assert_same_files(p1, pr);
            snprintf(pr, sizeof pr, "%s/r%d.json", dir, r);
            cJSON *many = load_json(pr);
            strip_timings(many);
            assert_rounds_accounted(many, 3, pr);
            char where[512] = "";
            first_difference(one, many, "", where, sizeof where);
            ck_assert_msg(cJSON_Compare(one, many, 1), "%s: %d ranks differ at %s", file, r, where);
            cJSON_Delete(many);
        }
        cJSON_Delete(one);
    }
    // The control: rank 0 adding the uploads rank by rank (all of its own, then rank 1's:
    // the order a reduction would impose, through the test-only FEDPRIV_TEST_SUM_BY_RANK)
    // gives other weights than one process, so the comparison above catches a sum in rank
    // order. FedAvg's plain float sum shows it (dp-fedasgp gathers; gaussian-dpfedavg's
    // safe sampler sums integers, which any order adds exactly).
    {
        char file[300], p1[512], p2[512];
        snprintf(file, sizeof file, TEST_DIR "/train-none/config.json");
        setenv("FEDPRIV_TEST_SUM_BY_RANK", "1", 1);
        int rc = train_ranks(mpirun, 2, file, TEST_DIR "/train-none", NULL);
        unsetenv("FEDPRIV_TEST_SUM_BY_RANK");
        ck_assert_msg(rc == 0, "the control run exited %d:\n%s", rc, err_buf);
        snprintf(p1, sizeof p1, TEST_DIR "/train-none/m1.bin");
        snprintf(p2, sizeof p2, TEST_DIR "/train-none/m2.bin");
        size_t n1 = 0, n2 = 0;
        char *a = read_bytes(p1, &n1), *b = read_bytes(p2, &n2);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_msg(n1 == n2 && memcmp(a, b, n1) != 0, "summed rank by rank, the model should differ from one "
                      "process's (%zu and %zu bytes)", n1, n2);
        free(a);
        free(b);
    }
    // The federation inside an attack (basic-mia's global target) splits the same way:
    // mpirun -n 2 writes the one-process result.
    char afile[300], adir[2][300];
    snprintf(afile, sizeof afile, TEST_DIR "/train-client/attack.json");
    cJSON *aj = cJSON_Parse(train_configs[0][1]);
    cJSON_AddItemToObject(aj, "attack", cJSON_Parse("{\"name\": \"basic-mia\"}"));
    char *atext = cJSON_Print(aj);
    standin_write_text(afile, atext);
    free(atext);
    cJSON_Delete(aj);
    for (int r = 1; r <= 2; r++) {
        snprintf(adir[r - 1], sizeof adir[r - 1], TEST_DIR "/train-client/attack%d", r);
        standin_rm(adir[r - 1]);
        const char *args[] = {"attack", "basic-mia", "--config", afile, "--out", adir[r - 1], NULL};
        const char *argv[MPI_ARGV_MAX];
        mpi_argv(argv, mpirun, "2", args);
        int rc = r == 1 ? cli_run(args, out_buf, err_buf, sizeof out_buf) : cli_exec(argv, out_buf, err_buf, sizeof out_buf);
        ck_assert_msg(rc == 0, "basic-mia with %d rank(s) exited %d:\n%s", r, rc, err_buf);
    }
    char pa[400], pb[400];
    snprintf(pa, sizeof pa, "%s/result.json", adir[0]);
    snprintf(pb, sizeof pb, "%s/result.json", adir[1]);
    cJSON *ra = load_json(pa), *rb = load_json(pb);
    strip_timings(ra);
    strip_timings(rb);
    char where[512] = "";
    first_difference(ra, rb, "", where, sizeof where);
    ck_assert_msg(cJSON_Compare(ra, rb, 1), "basic-mia with 2 ranks differs at %s", where);
    ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(ra, "auc"));
    cJSON_Delete(ra);
    cJSON_Delete(rb);
    // A rank that cannot load the experiment (its node lacks the file: here rank 1 of an
    // MPMD launch is given a config that does not exist) stops every rank, none waits: it
    // says why, and rank 0 names it.
    {
        const char *argv[MPI_ARGV_MAX];
        const char *const good[] = {"train", "--config", TEST_DIR "/train-server/config.json", NULL};
        const char *const absent[] = {"train", "--config", TEST_DIR "/train-server/absent.json", NULL};
        mpi_argv_mpmd(argv, mpirun, "1", good, "1", absent);
        int rc = cli_exec(argv, out_buf, err_buf, sizeof out_buf);
        ck_assert_int_ne(rc, 0);
        ck_assert_msg(strstr(err_buf, "(rank 1 of 2): " TEST_DIR "/train-server/absent.json"), "%s", err_buf);
        ck_assert_msg(strstr(err_buf, "fedpriv train: rank 1 of 2 could not load the experiment"), "%s", err_buf);
    }
    // A secure-RNG run draws its server side afresh in each process: refused with one line.
    char file[300];
    snprintf(file, sizeof file, TEST_DIR "/train-server/config.json");
    int rc = train_ranks(mpirun, 2, file, TEST_DIR "/train-server", "--secure-rng");
    ck_assert_int_ne(rc, 0);
    const char *why = strstr(err_buf, "secure-RNG federation runs in one process");
    ck_assert_msg(why && !strstr(why + 1, "secure-RNG federation"), "one refusal expected:\n%s", err_buf);
}
END_TEST

// Every mpirun command of up to two ranks runs with leak detection on (mpi_argv): a clean two-rank federation
// exits 0 with no LeakSanitizer report, Open MPI's own leaks suppressed. In a sanitizer
// build, the control: the same run without the suppressions fails with LeakSanitizer's
// report, so the check is live (before, the MPI runs switched it off).
START_TEST(mpi_runs_keep_leak_detection_on) {
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN")) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    const char *mpirun = mpirun_or_skip("mpi_runs_keep_leak_detection_on");
    if (!mpirun)
        return;
    setup_data();
    const char *dir = TEST_DIR "/leaks", *file = TEST_DIR "/leaks/config.json", *res = TEST_DIR "/leaks/r.json";
    standin_rm(dir);
    ck_assert(standin_mkdirs(dir));
    standin_write_text(file, train_configs[0][1]);
    const char *argv[MPI_ARGV_MAX], *args[] = {"train", "--config", file, "--out", res, NULL};
    mpi_argv(argv, mpirun, "2", args);
    const char *asan = getenv("ASAN_OPTIONS"), *lsan = getenv("LSAN_OPTIONS");
    ck_assert_msg(!asan || !strstr(asan, "detect_leaks=0"), "ASAN_OPTIONS=%s", asan);
    ck_assert_msg(lsan && strstr(lsan, "openmpi.lsan.supp"), "LSAN_OPTIONS=%s", lsan ? lsan : "(unset)");
    int rc = cli_exec(argv, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc == 0 && !strstr(err_buf, "LeakSanitizer"), "mpirun -n 2 exited %d:\n%s", rc, err_buf);
#if defined(__SANITIZE_ADDRESS__)
    unsetenv("LSAN_OPTIONS");
    rc = cli_exec(argv, out_buf, err_buf, sizeof out_buf);
    ck_assert_msg(rc != 0 && strstr(err_buf, "ERROR: LeakSanitizer"),
                  "without the suppressions Open MPI's leaks should fail the run: exit %d:\n%s", rc, err_buf);
#endif
    standin_rm(dir);
}
END_TEST

Suite *suite_cluster_cli(void) {
    Suite *s = suite_create("cluster_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 600); // ASan and a busy machine: one full run can take a minute
    tcase_add_test(tc, cli_every_way_gives_the_same_cells);
    tcase_add_test(tc, a_cell_runs_its_missing_reference_itself);
    tcase_add_test(tc, mpi_killed_rank_then_rerun_gives_the_same_cells);
    tcase_add_test(tc, train_across_ranks_is_bit_identical);
    tcase_add_test(tc, mpi_runs_keep_leak_detection_on);
    suite_add_tcase(s, tc);
    return s;
}
