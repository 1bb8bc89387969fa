// Hostile use of matrix run folders (docs/security.md, "Hostile input"; issue 33, cases
// 5 to 7): two matrices writing one folder, as shards at once or one after the other; the
// shard lock and which matrix holds it; a full run blocked by a shard, with an old note in
// .lock; a diverged cell on rerun; a Slurm array of zero tasks. End-to-end runs of the
// binary (skipped when FEDPRIV_BIN is unset) on a tiny CSV federation that trains in
// milliseconds; the Slurm variables also through the library.
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "scratch.h"
#include "runner/shard.h"

// ---- helpers ------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) { scratch_make(tmp_dir, sizeof tmp_dir, "hmatrix"); }

static void remove_tmp_dir(void) { scratch_remove(tmp_dir); }

static cJSON *read_json(const char *path) {
    char *text = read_text_alloc(path, 1 << 20);
    cJSON *j = cJSON_Parse(text);
    free(text);
    ck_assert_msg(j != NULL, "%s: not JSON", path);
    return j;
}

// A small, learnable CSV (3 classes, 4 features), every feature times scale: 1e30
// overflows the logits at lr 1000 (a diverging federation, as in tests/test_hardening.c).
static void write_csv(const char *path, double scale) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c,d,label\n");
    for (int i = 0; i < 240; i++) {
        int y = i % 3;
        fprintf(f, "%g,%g,%g,%g,%d\n", scale * (y + 0.1 * (i % 7)), scale * (0.5 * y - 0.05 * (i % 5)),
                scale * ((i * 7) % 11) / 11.0, scale * (y == 2), y);
    }
    ck_assert_int_eq(fclose(f), 0);
}

// TMP/NAME.json: a matrix on the tiny CSV. head: the first keys ("\"seed\": 3"), lr the
// federation's, defenses and attacks JSON lists. Its path into path.
static const char *write_matrix(const char *name, const char *head, const char *csv_name, double lr,
                                const char *defenses, const char *attacks, char *path, size_t n) {
    char csv[400], file[100], text[4096];
    scratch_path(tmp_dir, csv_name, csv, sizeof csv);
    if (access(csv, F_OK) != 0)
        write_csv(csv, strstr(csv_name, "huge") ? 1e30 : 1.0);
    snprintf(text, sizeof text,
             "{%s, \"threads\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": "
             "\"logreg\"}, \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 16, \"lr\": %g},"
             " \"defenses\": %s, \"attacks\": %s}",
             head, csv, lr, defenses, attacks);
    snprintf(file, sizeof file, "%s.json", name);
    write_text(scratch_path(tmp_dir, file, path, n), text);
    return path;
}

// Two cells: one per shard of two.
#define TWO_CELLS "[{\"name\": \"none\"}, {\"name\": \"laplace\", \"clip\": 1, \"epsilon\": 1}]"

#define OUT_CAP (1 << 16)
static char out_buf[OUT_CAP], err_buf[OUT_CAP];

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL}, out_buf, err_buf, OUT_CAP)

// "this run folder belongs to the matrix A, not to the matrix B" for the files a and b.
static const char *belongs_line(const char *a, const char *b, char *buf, size_t n) {
    char ra[PATH_MAX], rb[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(a, ra));
    ck_assert_ptr_nonnull(realpath(b, rb));
    snprintf(buf, n, "this run folder belongs to the matrix %s, not to the matrix %s", ra, rb);
    return buf;
}

// Holds DIR's locks as a running shard K/N does: .lock shared, .lock-shard-K-of-N
// exclusively with a note naming this process. fds[2] to close.
static void hold_shard(const char *dir, int k, int n, const char *matrix, int fds[2]) {
    char p[600], host[256] = "", note[1200];
    snprintf(p, sizeof p, "%s/.lock", dir);
    fds[0] = open(p, O_RDWR | O_CREAT, 0600);
    ck_assert_int_ge(fds[0], 0);
    ck_assert_int_eq(flock(fds[0], LOCK_SH | LOCK_NB), 0);
    snprintf(p, sizeof p, "%s/.lock-shard-%d-of-%d", dir, k, n);
    fds[1] = open(p, O_RDWR | O_CREAT, 0600);
    ck_assert_int_ge(fds[1], 0);
    ck_assert_int_eq(flock(fds[1], LOCK_EX | LOCK_NB), 0);
    gethostname(host, sizeof host - 1);
    int len = snprintf(note, sizeof note, "pid %ld on %s since 2030-01-02T03:04:05Z, shard %d/%d of %s\n",
                       (long)getpid(), host, k, n, matrix);
    ck_assert_int_eq(ftruncate(fds[1], 0), 0);
    ck_assert_int_eq(pwrite(fds[1], note, (size_t)len, 0), len);
}

// ---- 5. a run folder belongs to one matrix --------------------------------------------------

// The reproduction, one after the other: m1's shard 1/2, then m2's shard 2/2 into the same
// folder. Before: m2 ran, results.json became m2's and m1's finished cell dropped out of
// report, check and status. Now m2 is refused with one line naming both matrices, and the
// folder is as m1 left it.
START_TEST(second_matrix_shard_refused) {
    SKIP_UNLESS_BIN();
    char m1[400], m2[400], mx[400], index[500], line[2 * PATH_MAX + 100];
    write_matrix("m1", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", m1, sizeof m1);
    write_matrix("m2", "\"seed\": 4", "tiny.csv", 0.1, TWO_CELLS, "[]", m2, sizeof m2);
    scratch_path(tmp_dir, "MX", mx, sizeof mx);
    int rc = RUN("matrix", m1, "--out", mx, "--shard", "1/2");
    ck_assert_msg(rc == 0, "%s", err_buf);
    snprintf(index, sizeof index, "%s/results.json", mx);
    char *before = read_text_alloc(index, 1 << 20);
    rc = RUN("matrix", m2, "--out", mx, "--shard", "2/2");
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, belongs_line(m1, m2, line, sizeof line)), "%s", err_buf);
    ck_assert_ptr_nonnull(strstr(err_buf, "use another --out folder"));
    char *after = read_text_alloc(index, 1 << 20);
    ck_assert_str_eq(after, before); // m1's index, untouched
    // Refused before its data are loaded (which may take long): m3's data file is missing.
    char m3[400];
    write_matrix("m3", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", m3, sizeof m3);
    char *text = read_text_alloc(m3, 1 << 20), *at = strstr(text, "tiny.csv");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "nope.csv", 8);
    write_text(m3, text);
    free(text);
    rc = RUN("matrix", m3, "--out", mx, "--shard", "2/2");
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, belongs_line(m1, m3, line, sizeof line)), "%s", err_buf);
    free(before);
    free(after);
    // m1's finished cell is still in the status, and m1's own shard 2/2 completes the folder.
    rc = RUN("matrix", "--status", mx);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(out_buf, "2 cells: 1 done"), "%s", out_buf);
    rc = RUN("matrix", m1, "--out", mx, "--shard", "2/2");
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_int_eq(RUN("matrix", "--status", mx), 0);
}
END_TEST

// The reproduction as written: both shards started at the same instant. Exactly one
// matrix gets the folder; the other is refused naming both, and results.json is the
// winner's alone (before: both ran, and the index was whichever wrote last).
START_TEST(two_matrices_at_once_one_wins) {
    SKIP_UNLESS_BIN();
    char m1[400], m2[400], mx[400], errfile[400], line[2 * PATH_MAX + 100];
    write_matrix("m1", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", m1, sizeof m1);
    write_matrix("m2", "\"seed\": 4", "tiny.csv", 0.1, TWO_CELLS, "[]", m2, sizeof m2);
    scratch_path(tmp_dir, "MX", mx, sizeof mx);
    scratch_path(tmp_dir, "m1.err", errfile, sizeof errfile);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { // m1 --shard 1/2 &
        static char o[OUT_CAP], e[OUT_CAP];
        int rc = cli_run((const char *const[]){"matrix", m1, "--out", mx, "--shard", "1/2", NULL}, o, e, OUT_CAP);
        FILE *f = fopen(errfile, "w");
        if (f) {
            fputs(e, f);
            fclose(f);
        }
        _exit(rc);
    }
    int rc2 = RUN("matrix", m2, "--out", mx, "--shard", "2/2");
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    int rc1 = WEXITSTATUS(status);
    char *err1 = read_text_alloc(errfile, 1 << 20);
    ck_assert_msg((rc1 == 0 && rc2 == 2) || (rc1 == 2 && rc2 == 0), "m1: %d (%s), m2: %d (%s)", rc1, err1, rc2,
                  err_buf);
    const char *winner = rc1 == 0 ? m1 : m2, *loser = rc1 == 0 ? m2 : m1;
    const char *refusal = rc1 == 0 ? err_buf : err1;
    assert_one_clean_line(refusal);
    ck_assert_msg(strstr(refusal, belongs_line(winner, loser, line, sizeof line)), "%s", refusal);
    free(err1);
    char p[500];
    snprintf(p, sizeof p, "%s/results.json", mx);
    cJSON *ix = read_json(p);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(ix, "matrix_file")->valuestring, winner);
    cJSON_Delete(ix);
    snprintf(p, sizeof p, "%s/matrix-owner.json", mx);
    cJSON *owner = read_json(p);
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(winner, real));
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(owner, "file")->valuestring, real);
    cJSON_Delete(owner);
}
END_TEST

// The documented way to extend a run still works: the same file with another ε resumes
// (the finished cells are skipped), with another attack runs again (every cell's spec
// changed) and notes the old cells. A matrix with a "name" is known by it: a copy at
// another path with the same name extends the folder, another name is refused (before:
// "name" was an unknown key).
START_TEST(same_matrix_extended_resumes) {
    SKIP_UNLESS_BIN();
    char m[400], mx[400];
    write_matrix("m", "\"seed\": 3", "tiny.csv", 0.1, "[{\"name\": \"none\"}]", "[]", m, sizeof m);
    scratch_path(tmp_dir, "MX", mx, sizeof mx);
    ck_assert_msg(RUN("matrix", m, "--out", mx) == 0, "%s", err_buf);
    write_matrix("m", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", m, sizeof m);
    int rc = RUN("matrix", m, "--out", mx);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "matrix: 2 cells (2 settings x 1 seed, 0 attacks each), 1 already finished, 1 to run"),
                  "%s", err_buf);
    write_matrix("m", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[{\"name\": \"basic-mia\"}]", m, sizeof m);
    rc = RUN("matrix", m, "--out", mx);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "0 already finished, 2 to run"), "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "/cells holds 2 cell files not of this matrix as it is now"), "%s", err_buf);
    // Named: the name is the identity, wherever the file is.
    char a[400], b[400], c[400], nx[400];
    write_matrix("named-a", "\"name\": \"study\", \"seed\": 3", "tiny.csv", 0.1, "[{\"name\": \"none\"}]", "[]", a,
                 sizeof a);
    write_matrix("named-b", "\"name\": \"study\", \"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", b, sizeof b);
    write_matrix("named-c", "\"name\": \"other\", \"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", c, sizeof c);
    scratch_path(tmp_dir, "NX", nx, sizeof nx);
    ck_assert_msg(RUN("matrix", a, "--out", nx) == 0, "%s", err_buf);
    rc = RUN("matrix", b, "--out", nx);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "1 already finished, 1 to run"), "%s", err_buf);
    rc = RUN("matrix", c, "--out", nx);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, "this run folder belongs to the matrix named \"study\", not to the matrix named "
                                  "\"other\""), "%s", err_buf);
    // And the name is checked: one line of text.
    write_matrix("named-d", "\"name\": \"a\\u001b[2Jb\", \"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", c, sizeof c);
    rc = RUN("matrix", c, "--out", nx);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, "name: a control character at byte 1"), "%s", err_buf);
}
END_TEST

// The shard lock is the folder's matrix's: mB's shard 1/2 beside mA's shard 1/2 is refused
// as another matrix (before: "shard 1/2 is already running", as if it were mA's), and mA's
// own shard 1/2 twice names the matrix and the live holder.
START_TEST(shard_lock_names_the_matrix) {
    SKIP_UNLESS_BIN();
    char ma[400], mb[400], mx[400], line[2 * PATH_MAX + 100], real[PATH_MAX], want[PATH_MAX + 300];
    write_matrix("mA", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", ma, sizeof ma);
    write_matrix("mB", "\"seed\": 4", "tiny.csv", 0.1, TWO_CELLS, "[]", mb, sizeof mb);
    scratch_path(tmp_dir, "MX", mx, sizeof mx);
    ck_assert_msg(RUN("matrix", ma, "--out", mx, "--shard", "2/2") == 0, "%s", err_buf);
    ck_assert_ptr_nonnull(realpath(ma, real));
    snprintf(want, sizeof want, "the matrix %s", real);
    int fds[2];
    hold_shard(mx, 1, 2, want, fds); // mA's shard 1/2 runs
    int rc = RUN("matrix", mb, "--out", mx, "--shard", "1/2");
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, belongs_line(ma, mb, line, sizeof line)), "%s", err_buf);
    ck_assert_ptr_null(strstr(err_buf, "already running"));
    rc = RUN("matrix", ma, "--out", mx, "--shard", "1/2");
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "shard 1/2 of the matrix %s is already running on this machine (pid %ld on %s since ",
             real, (long)getpid(), host);
    ck_assert_msg(strstr(err_buf, want), "%s", err_buf);
    close(fds[1]);
    close(fds[0]);
    // Released: the shard runs, and its lock's note names it and the matrix.
    ck_assert_msg(RUN("matrix", ma, "--out", mx, "--shard", "1/2") == 0, "%s", err_buf);
    char p[500];
    snprintf(p, sizeof p, "%s/.lock-shard-1-of-2", mx);
    char *note = read_text_alloc(p, 1 << 20);
    snprintf(want, sizeof want, ", shard 1/2 of the matrix %s\n", real);
    ck_assert_msg(strstr(note, want) && strncmp(note, "pid ", 4) == 0, "%s", note);
    free(note);
}
END_TEST

// The owner record is read like every file of a run folder (never through a link, never
// a FIFO): a link planted as DIR/matrix-owner.json is refused, and its target untouched.
START_TEST(owner_record_not_followed) {
    SKIP_UNLESS_BIN();
    char m[400], mx[400], victim[400], link_path[500];
    write_matrix("m", "\"seed\": 3", "tiny.csv", 0.1, "[{\"name\": \"none\"}]", "[]", m, sizeof m);
    write_text(scratch_path(tmp_dir, "victim.txt", victim, sizeof victim), "IMPORTANT\n");
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "MX", mx, sizeof mx), 0700), 0);
    snprintf(link_path, sizeof link_path, "%s/matrix-owner.json", mx);
    ck_assert_int_eq(symlink(victim, link_path), 0);
    int rc = RUN("matrix", m, "--out", mx);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, "matrix-owner.json") && strstr(err_buf, "symbolic link"), "%s", err_buf);
    char *text = read_text_alloc(victim, 1 << 20);
    ck_assert_str_eq(text, "IMPORTANT\n");
    free(text);
    char index[500];
    snprintf(index, sizeof index, "%s/results.json", mx);
    ck_assert_int_eq(access(index, F_OK), -1);
}
END_TEST

// ---- 7. a full run blocked by a shard --------------------------------------------------------

// .lock keeps the note of the last whole-matrix run, whose process has ended; a shard
// holds the lock now. A whole-matrix run names the live shard and says the note's process
// has ended; with no shard naming itself it says the holder is unknown (before: it named
// the dead PID as the writer).
START_TEST(full_run_blocked_by_shard_names_live_holder) {
    SKIP_UNLESS_BIN();
    char m[400], mx[400], p[500];
    write_matrix("m", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", m, sizeof m);
    scratch_path(tmp_dir, "MX", mx, sizeof mx);
    ck_assert_msg(RUN("matrix", m, "--out", mx) == 0, "%s", err_buf);
    snprintf(p, sizeof p, "%s/.lock", mx);
    char *note = read_text_alloc(p, 1 << 20);
    long dead = 0;
    ck_assert_int_eq(sscanf(note, "pid %ld on ", &dead), 1); // that run's process, gone now
    ck_assert_int_ne(kill((pid_t)dead, 0), 0);
    note[strcspn(note, "\n")] = 0;
    char dead_writer[600];
    snprintf(dead_writer, sizeof dead_writer, "writing this folder (%s)", note);
    int fds[2];
    hold_shard(mx, 1, 2, "the matrix m", fds);
    int rc = RUN("matrix", m, "--out", mx);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    char want[1200], host[256] = "";
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "another fedpriv matrix is writing this folder (pid %ld on %s since "
             "2030-01-02T03:04:05Z, shard 1/2 of the matrix m; the note in .lock names %s, which has ended)",
             (long)getpid(), host, note);
    ck_assert_msg(strstr(err_buf, want), "%s", err_buf);
    ck_assert_ptr_null(strstr(err_buf, dead_writer));
    // No shard names itself (an older fedpriv's, or a note that could not be written).
    ck_assert_int_eq(ftruncate(fds[1], 0), 0);
    rc = RUN("matrix", m, "--out", mx);
    ck_assert_int_eq(rc, 2);
    // The line it printed while it waited for the old run's cell processes, then the refusal.
    ck_assert_msg(cli_count_lines(err_buf) == 2 && strstr(err_buf, "which has stopped; waiting for its cell processes"),
                  "%s", err_buf);
    assert_one_clean_line(strchr(err_buf, '\n') + 1);
    snprintf(want, sizeof want, "another fedpriv matrix is writing this folder, but which is unknown: the note in "
             ".lock names %s, which has ended", note);
    ck_assert_msg(strstr(err_buf, want), "%s", err_buf);
    ck_assert_ptr_null(strstr(err_buf, dead_writer));
    free(note);
    close(fds[1]);
    close(fds[0]);
    ck_assert_msg(RUN("matrix", m, "--out", mx) == 0, "%s", err_buf);
}
END_TEST

// SLURM_ARRAY_TASK_COUNT=0 is a number, out of range: the message says what the range is
// (before: "\"0\" (a number was expected...)"). Through the library and the binary.
START_TEST(slurm_task_count_zero) {
    ShardSpec s;
    FpError err = {0};
    SlurmArrayEnv zero = {"0", "0", "0", "0", "1"};
    ck_assert_int_eq(shard_from_slurm(&zero, &s, &err), FP_EPARAM);
    ck_assert_msg(strstr(err.msg, "SLURM_ARRAY_TASK_COUNT is \"0\": the count of tasks (shards) must be at least 1"),
                  "%s", err.msg);
    ck_assert_ptr_null(strstr(err.msg, "a number was expected"));
    char big[32];
    snprintf(big, sizeof big, "%d", SHARD_MAX + 1);
    SlurmArrayEnv many = {"0", "0", "0", big, "1"};
    err = (FpError){0};
    ck_assert_int_eq(shard_from_slurm(&many, &s, &err), FP_EPARAM);
    char want[200];
    snprintf(want, sizeof want, "the count of tasks (shards) must be at most %d", SHARD_MAX);
    ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
    SlurmArrayEnv step = {"0", "0", "0", "1", "0"};
    err = (FpError){0};
    ck_assert_int_eq(shard_from_slurm(&step, &s, &err), FP_EPARAM);
    ck_assert_msg(strstr(err.msg, "SLURM_ARRAY_TASK_STEP is \"0\": the step must be at least 1"), "%s", err.msg);
    SlurmArrayEnv word = {"0", "0", "0", "x1", "1"};
    err = (FpError){0};
    ck_assert_int_eq(shard_from_slurm(&word, &s, &err), FP_EPARAM);
    ck_assert_msg(strstr(err.msg, "SLURM_ARRAY_TASK_COUNT is \"x1\" (a number was expected"), "%s", err.msg);
    if (!getenv("FEDPRIV_BIN") || !*getenv("FEDPRIV_BIN"))
        return;
    char m[400], mx[400];
    write_matrix("m", "\"seed\": 3", "tiny.csv", 0.1, TWO_CELLS, "[]", m, sizeof m);
    setenv("SLURM_ARRAY_TASK_ID", "0", 1);
    setenv("SLURM_ARRAY_TASK_MIN", "0", 1);
    setenv("SLURM_ARRAY_TASK_MAX", "0", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "0", 1);
    setenv("SLURM_ARRAY_TASK_STEP", "1", 1);
    int rc = RUN("matrix", m, "--out", scratch_path(tmp_dir, "MX", mx, sizeof mx), "--shard", "slurm");
    static const char *const vars[] = {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                                       "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP"};
    for (int i = 0; i < 5; i++)
        unsetenv(vars[i]);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err_buf);
    ck_assert_msg(strstr(err_buf, "SLURM_ARRAY_TASK_COUNT is \"0\": the count of tasks (shards) must be at least 1"),
                  "%s", err_buf);
    ck_assert_int_eq(access(mx, F_OK), -1); // refused before anything was written
}
END_TEST

// ---- 6. a diverged cell on rerun ---------------------------------------------------------------

// The cell's file in DIR/cells (one cell), parsed.
static cJSON *only_cell(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/results.json", dir);
    cJSON *ix = read_json(p);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ix,
                                                                                                           "cells"),
                                                                          0),
                                                         "file");
    ck_assert(cJSON_IsString(file));
    snprintf(p, sizeof p, "%s/%s", dir, file->valuestring);
    cJSON_Delete(ix);
    return read_json(p);
}

static int cell_retries(const cJSON *cell) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cell, "run"),
                                                      "diverged_retries");
    return cJSON_IsNumber(r) ? r->valueint : 0;
}

// A diverged cell (features of 1e30, lr 1000) is run again on the next rerun, once: the
// retry records "diverged_retries": 1 and stands; a third run skips it. --keep-diverged
// keeps it as it is (before: diverged cells were never retried, and a damaged cache entry
// that made a cell diverge stayed for good).
START_TEST(diverged_cell_retried_once) {
    SKIP_UNLESS_BIN();
    char m[400], mx[400], kx[400];
    write_matrix("m", "\"seed\": 3", "huge.csv", 1000, "[{\"name\": \"none\"}]", "[]", m, sizeof m);
    scratch_path(tmp_dir, "MX", mx, sizeof mx);
    int rc = RUN("matrix", m, "--out", mx);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "1 cells: 0 done, 1 diverged, 0 failed (0 finished earlier)"), "%s", err_buf);
    cJSON *cell = only_cell(mx);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cell, "status")->valuestring, "diverged");
    ck_assert_int_eq(cell_retries(cell), 0);
    cJSON_Delete(cell);
    rc = RUN("matrix", m, "--out", mx);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "0 already finished, 1 to run"), "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "1 of them diverged on an earlier run and is retried once (--keep-diverged"), "%s",
                  err_buf);
    cell = only_cell(mx);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cell, "status")->valuestring, "diverged");
    ck_assert_int_eq(cell_retries(cell), 1);
    cJSON_Delete(cell);
    rc = RUN("matrix", m, "--out", mx);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "1 already finished, 0 to run"), "%s", err_buf);
    // --keep-diverged: not retried, the file as it was.
    scratch_path(tmp_dir, "KX", kx, sizeof kx);
    ck_assert_msg(RUN("matrix", m, "--out", kx) == 0, "%s", err_buf);
    cJSON *first = only_cell(kx);
    rc = RUN("matrix", m, "--out", kx, "--keep-diverged");
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, "1 already finished, 0 to run"), "%s", err_buf);
    cJSON *kept = only_cell(kx);
    ck_assert(cJSON_Compare(first, kept, 1));
    cJSON_Delete(first);
    cJSON_Delete(kept);
    // --keep-diverged is a run option, not one of --status.
    rc = RUN("matrix", "--status", kx, "--keep-diverged");
    ck_assert_int_eq(rc, 2);
    // The help says what it does.
    ck_assert_int_eq(RUN("matrix", "--help"), 0);
    ck_assert_ptr_nonnull(strstr(out_buf, "--keep-diverged"));
    ck_assert_ptr_nonnull(strstr(out_buf, "known by its \"name\" key or else by FILE's full path"));
}
END_TEST

// ---- the suite --------------------------------------------------------------------------

Suite *suite_hostile_matrix(void) {
    Suite *s = suite_create("hostile_matrix");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, make_tmp_dir, remove_tmp_dir);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, second_matrix_shard_refused);
    tcase_add_test(tc, two_matrices_at_once_one_wins);
    tcase_add_test(tc, same_matrix_extended_resumes);
    tcase_add_test(tc, shard_lock_names_the_matrix);
    tcase_add_test(tc, owner_record_not_followed);
    tcase_add_test(tc, full_run_blocked_by_shard_names_live_holder);
    tcase_add_test(tc, slurm_task_count_zero);
    tcase_add_test(tc, diverged_cell_retried_once);
    suite_add_tcase(s, tc);
    return s;
}
