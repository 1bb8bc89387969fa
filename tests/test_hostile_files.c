// Hostile files inside run and output folders (docs/security.md, "Hostile input", issue
// cases 33.1, 33.3, 33.6 and 33.7): a symbolic link planted where fedpriv writes, a FIFO
// where it reads, a 4 GB sparse cache entry, a forged cache entry whose checksum is
// right but whose logits are not finite, and damaged entries reported without --verbose.
// Every file inside a run folder goes through one opener (core/files.h fp_open_beneath);
// these tests plant each kind of file at each place and check the command refuses it in
// one line with exit 2 (or, for a cache entry, reports and retrains it), promptly, and
// leaves the file it points to untouched. End-to-end tests skip without FEDPRIV_BIN.
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "attacks/refcache.h"
#include "cli_run.h"
#include "scratch.h"
#include "core/files.h"
#include "core/jsonv.h"
#include "runner/cell_store.h"

// ---- helpers ------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) { scratch_make(tmp_dir, sizeof tmp_dir, "hfiles"); }

static void remove_tmp_dir(void) { scratch_remove(tmp_dir); }

static char text_buf[1 << 16]; // what read_text read last

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static char out_buf[1 << 16], err_buf[1 << 16];

// Runs `$FEDPRIV_BIN args...` like cli_run, but the child is killed by SIGALRM after
// limit seconds (the alarm survives exec): a command that blocks on a FIFO returns 128
// instead of hanging the suite.
static int run_limited(unsigned limit, const char *const *args) {
    const char *argv[CLI_RUN_MAX_ARGS + 2];
    int n = 0;
    argv[n++] = getenv("FEDPRIV_BIN");
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    FILE *fo = tmpfile(), *fe = tmpfile();
    ck_assert_ptr_nonnull(fo);
    ck_assert_ptr_nonnull(fe);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fileno(fo), 1);
        dup2(fileno(fe), 2);
        alarm(limit);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    FILE *fs[2] = {fo, fe};
    char *bufs[2] = {out_buf, err_buf};
    for (int k = 0; k < 2; k++) {
        rewind(fs[k]);
        size_t got = fread(bufs[k], 1, sizeof out_buf - 1, fs[k]);
        bufs[k][got] = 0;
        fclose(fs[k]);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}
#define RUN(...) run_limited(20, (const char *const[]){__VA_ARGS__, NULL})

// Exit 2, and stderr's last line (the error) names needle.
static void assert_refused(int rc, const char *needle) {
    ck_assert_msg(rc == 2, "exit %d (128: killed by the alarm, it hung): %s", rc, err_buf);
    size_t n = strlen(err_buf);
    ck_assert_msg(n > 0 && err_buf[n - 1] == '\n', "no error line: %s", err_buf);
    const char *last = err_buf + n - 1;
    while (last > err_buf && last[-1] != '\n')
        last--;
    ck_assert_msg(strncmp(last, "fedpriv ", 8) == 0 && strstr(last, needle), "not one line naming %s: %s", needle,
                  err_buf);
}

// The multi-run audit of case 33.1 on the tiny set: 16 runs of a one-round federation.
static const char *write_multi_run_config(char *path, size_t n) {
    char csv[400], text[1024];
    write_tiny_csv(scratch_path(tmp_dir, "tiny.csv", csv, sizeof csv));
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 4, \"rounds\": 1, \"batch_size\": 4}, \"threads\": 1,"
             " \"defense\": {\"name\": \"gaussian-dpfedavg\", \"epsilon\": 4},"
             " \"attack\": {\"name\": \"audit-training\", \"method\": \"multi-run\", \"runs\": 16}}",
             csv);
    write_text(scratch_path(tmp_dir, "multi-run.json", path, n), text);
    return path;
}

// A one-cell matrix with LiRA (2 reference models) on a 5-class Gaussian mixture: every
// run trains in milliseconds and stores two entries in DIR/reference-models.
static const char *write_lira_matrix(char *path, size_t n) {
    char csv[400], text[1024];
    scratch_path(tmp_dir, "mix.csv", csv, sizeof csv);
    FILE *f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    for (int j = 0; j < 8; j++)
        fprintf(f, "f%d,", j);
    fprintf(f, "label\n");
    unsigned s = 12345;
    for (int i = 0; i < 600; i++) {
        int y = i % 5;
        for (int j = 0; j < 8; j++) {
            s = s * 1103515245u + 12345u;
            fprintf(f, "%.4f,", 0.3 * ((y + j) % 5) + (double)(s >> 16) / 65536.0);
        }
        fprintf(f, "%d\n", y);
    }
    fclose(f);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"local_epochs\": 1, \"samples_per_client\": 50,"
             " \"batch_size\": 20}, \"threads\": 1, \"defenses\": [{\"name\": \"none\"}],"
             " \"attacks\": [{\"name\": \"lira\", \"shadow_models\": 2}]}",
             csv);
    write_text(scratch_path(tmp_dir, "lira.json", path, n), text);
    return path;
}

// The first entry name (ending in suffix) in folder dir into name; 0 when there is none.
static int first_entry(const char *dir, const char *suffix, char *name, size_t n) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d))) {
        size_t len = strlen(de->d_name), k = strlen(suffix);
        if (len > k && strcmp(de->d_name + len - k, suffix) == 0 && de->d_name[0] != '.') {
            snprintf(name, n, "%s", de->d_name);
            found = 1;
        }
    }
    closedir(d);
    return found;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

// ---- 33.1: writes through a symbolic link --------------------------------------------

// `ln -s victim.txt MT/multi-run.txt; audit-training --out MT` replaced the victim with
// the run lines (fopen, truncate, fopen "w" on the path). Now: exit 2, one line, the
// victim byte for byte as it was; a link to another audit's file is not resumed from or
// rewritten either, nor is a hard link written in place.
START_TEST(audit_multi_run_link_not_written_through) {
    if (!cli_have_bin())
        return;
    char cfg[400], victim[400], mt[400], planted[500];
    write_multi_run_config(cfg, sizeof cfg);
    write_text(scratch_path(tmp_dir, "victim.txt", victim, sizeof victim), "IMPORTANT\n");
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "MT", mt, sizeof mt), 0700), 0);
    snprintf(planted, sizeof planted, "%s/multi-run.txt", mt);
    ck_assert_int_eq(symlink(victim, planted), 0);
    assert_refused(RUN("audit-training", "--config", cfg, "--out", mt), "multi-run.txt");
    ck_assert_str_eq(read_text(victim, text_buf, sizeof text_buf), "IMPORTANT\n");
    // A link to another audit's file: that audit's runs are neither resumed nor rewritten.
    char other[400], theirs[500];
    static char before[1 << 16];
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "other", other, sizeof other), 0700), 0);
    int rc = RUN("audit-training", "--config", cfg, "--out", other);
    ck_assert_msg(rc == 0, "%s", err_buf);
    snprintf(theirs, sizeof theirs, "%s/multi-run.txt", other);
    snprintf(before, sizeof before, "%s", read_text(theirs, text_buf, sizeof text_buf));
    ck_assert_ptr_nonnull(strstr(before, "run 14: "));
    ck_assert_int_eq(unlink(planted), 0);
    ck_assert_int_eq(symlink(theirs, planted), 0);
    assert_refused(RUN("audit-training", "--config", cfg, "--out", mt), "multi-run.txt");
    ck_assert_str_eq(read_text(theirs, text_buf, sizeof text_buf), before);
    // A hard link to it: read maybe, but never cut or rewritten in place.
    ck_assert_int_eq(unlink(planted), 0);
    ck_assert_int_eq(link(theirs, planted), 0);
    assert_refused(RUN("audit-training", "--config", cfg, "--out", mt), "hard link");
    ck_assert_str_eq(read_text(theirs, text_buf, sizeof text_buf), before);
}
END_TEST

// DIR/reference-models as a link to a folder outside: `matrix` and `attack lira` wrote
// every cache entry there. Now both refuse it up front, and the folder stays empty.
START_TEST(reference_models_link_refused) {
    if (!cli_have_bin())
        return;
    char mpath[400], outside[400], dir[400], refs[500];
    write_lira_matrix(mpath, sizeof mpath);
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "outside", outside, sizeof outside), 0700), 0);
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "LL", dir, sizeof dir), 0700), 0);
    snprintf(refs, sizeof refs, "%s/reference-models", dir);
    ck_assert_int_eq(symlink(outside, refs), 0);
    assert_refused(RUN("matrix", mpath, "--out", dir), "reference-models");
    ck_assert_int_eq(count_entries(outside), 0);
    // The same for `attack lira` (its config: the matrix's experiment with one attack).
    char cfg[400], *csv_at = NULL;
    static char text[1 << 16];
    snprintf(text, sizeof text, "%s", read_text(mpath, text_buf, sizeof text_buf));
    csv_at = strstr(text, ", \"defenses\"");
    ck_assert_ptr_nonnull(csv_at);
    snprintf(csv_at, sizeof text - (size_t)(csv_at - text), ", \"attack\": {\"shadow_models\": 2}}");
    write_text(scratch_path(tmp_dir, "lira-attack.json", cfg, sizeof cfg), text);
    assert_refused(RUN("attack", "lira", "--config", cfg, "--out", dir), "reference-models");
    ck_assert_int_eq(count_entries(outside), 0);
    // A link as an entry: refused by name, the file it points to untouched.
    char victim[400], entry[600];
    write_text(scratch_path(tmp_dir, "victim.txt", victim, sizeof victim), "IMPORTANT\n");
    ck_assert_int_eq(unlink(refs), 0);
    ck_assert_int_eq(mkdir(refs, 0700), 0);
    snprintf(entry, sizeof entry, "%s/0123456789abcdef0123456789abcdef.ref", refs);
    ck_assert_int_eq(symlink(victim, entry), 0);
    assert_refused(RUN("matrix", mpath, "--out", dir), "0123456789abcdef0123456789abcdef.ref");
    ck_assert_str_eq(read_text(victim, text_buf, sizeof text_buf), "IMPORTANT\n");
}
END_TEST

// A cell file or the lock as a link to a file outside: refused, never written through.
START_TEST(cell_and_lock_links_refused) {
    if (!cli_have_bin())
        return;
    char mpath[400], dir[400], cells[500], victim[400], path[600];
    write_lira_matrix(mpath, sizeof mpath);
    write_text(scratch_path(tmp_dir, "victim.txt", victim, sizeof victim), "IMPORTANT\n");
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "LC", dir, sizeof dir), 0700), 0);
    snprintf(cells, sizeof cells, "%s/cells", dir);
    ck_assert_int_eq(mkdir(cells, 0700), 0);
    static const char *const names[] = {"x.json", "x.running"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", cells, names[k]);
        ck_assert_int_eq(symlink(victim, path), 0);
        assert_refused(RUN("matrix", mpath, "--out", dir), names[k]);
        ck_assert_int_eq(unlink(path), 0);
    }
    snprintf(path, sizeof path, "%s/.lock", dir);
    unlink(path); // left by the runs above
    ck_assert_int_eq(symlink(victim, path), 0);
    assert_refused(RUN("matrix", mpath, "--out", dir), ".lock");
    ck_assert_str_eq(read_text(victim, text_buf, sizeof text_buf), "IMPORTANT\n");
}
END_TEST

// The opener itself: every write mode refuses a link and a hard link, and O_TRUNC cuts
// nothing it refuses.
START_TEST(opener_refuses_links_for_every_mode) {
    char dir[400], victim[400], path[600];
    scratch_path(tmp_dir, "d", dir, sizeof dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    write_text(scratch_path(tmp_dir, "victim.txt", victim, sizeof victim), "IMPORTANT\n");
    snprintf(path, sizeof path, "%s/f", dir);
    ck_assert_int_eq(symlink(victim, path), 0);
    static const int modes[] = {O_RDONLY, O_WRONLY | O_CREAT, O_RDWR | O_CREAT | O_TRUNC, O_WRONLY | O_APPEND,
                                O_WRONLY | O_CREAT | O_TRUNC};
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        FpError err = {0};
        int missing = 7;
        ck_assert_int_eq(fp_open_beneath(dir, "f", modes[k], &missing, &err), -1);
        ck_assert_int_eq(err.code, FP_EFORMAT);
        ck_assert_int_eq(missing, 0);
        ck_assert_msg(strstr(err.msg, "symbolic link"), "%s", err.msg);
    }
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(link(victim, path), 0);
    FpError err = {0};
    ck_assert_int_eq(fp_open_beneath(dir, "f", O_WRONLY | O_TRUNC, NULL, &err), -1);
    ck_assert_msg(strstr(err.msg, "hard link"), "%s", err.msg);
    ck_assert_str_eq(read_text(victim, text_buf, sizeof text_buf), "IMPORTANT\n");
    int fd = fp_open_beneath(dir, "f", O_RDONLY, NULL, &err); // reading it is harmless
    ck_assert_int_ge(fd, 0);
    close(fd);
    // A linked folder on the way, and a folder asked for that is a link.
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    ck_assert_int_eq(symlink(tmp_dir, sub), 0);
    ck_assert_int_eq(fp_open_beneath(dir, "sub/victim.txt", O_RDONLY, NULL, &err), -1);
    ck_assert_int_eq(err.code, FP_EFORMAT);
    ck_assert_int_eq(fp_open_beneath(dir, "sub", O_DIRECTORY | O_CREAT, NULL, &err), -1);
    ck_assert_int_eq(err.code, FP_EFORMAT);
    // A missing file: FP_EIO and *missing; created with O_CREAT.
    int missing = 0;
    ck_assert_int_eq(fp_open_beneath(dir, "new", O_RDONLY, &missing, &err), -1);
    ck_assert_int_eq(missing, 1);
    ck_assert_int_eq(err.code, FP_EIO);
    fd = fp_open_beneath(dir, "new", O_WRONLY | O_CREAT, &missing, &err);
    ck_assert_int_ge(fd, 0);
    close(fd);
}
END_TEST

// ---- 33.3: a FIFO hangs the program ---------------------------------------------------

// The FIFO cases of the issue, each in a run of the binary killed after 20 s: exit 2 and
// a line naming the file, at once.
START_TEST(fifo_in_run_folder_refused_promptly) {
    if (!cli_have_bin())
        return;
    char cfg[400], dir[400], path[1000], mpath[400];
    // OUT/multi-run.txt under audit-training.
    write_multi_run_config(cfg, sizeof cfg);
    ck_assert_int_eq(mkdir(scratch_path(tmp_dir, "MF", dir, sizeof dir), 0700), 0);
    snprintf(path, sizeof path, "%s/multi-run.txt", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    double t0 = now_seconds();
    assert_refused(RUN("audit-training", "--config", cfg, "--out", dir), "multi-run.txt");
    ck_assert_msg(now_seconds() - t0 < 10, "took %.1f s", now_seconds() - t0);
    // DIR/reference-models/HASH.ref, DIR/cells/ID.json and ID.running under matrix: the
    // matrix run first, then each file replaced by a FIFO.
    write_lira_matrix(mpath, sizeof mpath);
    scratch_path(tmp_dir, "LF", dir, sizeof dir);
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "%s", err_buf);
    char refs[500], name[300], cells[500];
    snprintf(refs, sizeof refs, "%s/reference-models", dir);
    snprintf(cells, sizeof cells, "%s/cells", dir);
    ck_assert(first_entry(refs, ".ref", name, sizeof name));
    snprintf(path, sizeof path, "%s/%s", refs, name);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    assert_refused(RUN("matrix", mpath, "--out", dir), name);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert(first_entry(cells, ".json", name, sizeof name));
    snprintf(path, sizeof path, "%s/%s", cells, name);
    static char kept[1 << 16];
    snprintf(kept, sizeof kept, "%s", read_text(path, text_buf, sizeof text_buf));
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    assert_refused(RUN("matrix", mpath, "--out", dir), name);
    // matrix --status on that cell, and on a claim that is a FIFO.
    assert_refused(RUN("matrix", "--status", dir), name);
    ck_assert_int_eq(unlink(path), 0);
    write_text(path, kept);
    char claim[700];
    snprintf(claim, sizeof claim, "%.*s.running", (int)(strlen(path) - 5), path);
    ck_assert_int_eq(mkfifo(claim, 0600), 0);
    assert_refused(RUN("matrix", "--status", dir), ".running");
    assert_refused(RUN("matrix", mpath, "--out", dir), ".running");
    ck_assert_int_eq(unlink(claim), 0);
    // results.json under matrix --status.
    snprintf(path, sizeof path, "%s/results.json", dir);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    assert_refused(RUN("matrix", "--status", dir), "results.json");
    // The lock.
    ck_assert_int_eq(unlink(path), 0);
    snprintf(path, sizeof path, "%s/.lock", dir);
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    assert_refused(RUN("matrix", mpath, "--out", dir), ".lock");
    // A FIFO given as a config (jv_load_file) is not waited on either.
    char fifo[400];
    ck_assert_int_eq(mkfifo(scratch_path(tmp_dir, "config.fifo", fifo, sizeof fifo), 0600), 0);
    assert_refused(RUN("train", "--config", fifo), "config.fifo");
}
END_TEST

// The library calls behind those runs, each on a FIFO, under an alarm: they return at
// once with the file named (or, for a cell's status, pending).
START_TEST(fifo_library_reads_do_not_block) {
    char dir[400], path[600];
    scratch_path(tmp_dir, "d", dir, sizeof dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    alarm(10); // a blocking open ends the test with SIGALRM instead of hanging it
    // refcache_load: seen in open() at attacks/refcache.c.
    const char *id = "{\"fifo\":1}";
    refcache_path(dir, id, path, sizeof path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    float z[4];
    uint32_t q[2] = {1, 2};
    uint64_t c[2] = {3, 4};
    int hit = 1;
    FpError err = {0};
    ck_assert_int_eq(refcache_load(dir, id, q, c, 2, 2, z, NULL, NULL, &hit, &err), FP_EFORMAT);
    ck_assert_int_eq(hit, 0);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "not a regular file"), "%s", err.msg);
    // A store replaces it (rename), never writes into it.
    ck_assert_int_eq(refcache_store(dir, id, q, c, 2, 2, (float[]){1, 2, 3, 4}, NULL, 0.5, &err), FP_OK);
    ck_assert_int_eq(refcache_load(dir, id, q, c, 2, 2, z, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 1);
    // jv_load_file and jv_load_beneath.
    snprintf(path, sizeof path, "%s/x.json", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    cJSON *j = NULL;
    ck_assert_int_eq(jv_load_file(path, &j, &err), FP_EFORMAT);
    ck_assert_msg(strstr(err.msg, "x.json") && strstr(err.msg, "not a regular file"), "%s", err.msg);
    ck_assert_int_eq(jv_load_beneath(dir, "x.json", &j, NULL, &err), FP_EFORMAT);
    // The cell store: ID.json and ID.running.
    char cells[500];
    snprintf(cells, sizeof cells, "%s/cells", dir);
    ck_assert_int_eq(mkdir(cells, 0700), 0);
    snprintf(path, sizeof path, "%s/c1.json", cells);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/c1.running", cells);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(store_cell_status(dir, "c1", "h", NULL, 0), CELL_PENDING);
    ck_assert_ptr_null(store_claim_read(dir, "c1"));
    ck_assert_int_eq(store_check_files(dir, &err), FP_EFORMAT);
    ck_assert_msg(strstr(err.msg, "cells/c1."), "%s", err.msg);
    alarm(0);
}
END_TEST

// ---- 33.7: a 4 GB sparse .ref was read whole before its magic was checked --------------

// 3.9 GB resident and 12.9 s per worker before; now the size and the 36-byte header are
// checked first: a 4 GB file of zeros (no magic) and a 4 GB file with a valid header
// (past the format's 1 GiB limit) are refused in well under a second, naming the file.
START_TEST(sparse_4gb_ref_refused_without_reading) {
    char dir[400], path[600];
    scratch_path(tmp_dir, "d", dir, sizeof dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    const char *id = "{\"sparse\":1}";
    refcache_path(dir, id, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 4000000000LL), 0);
    close(fd);
    float z[4];
    uint32_t q[2] = {1, 2};
    uint64_t c[2] = {3, 4};
    int hit = 1;
    FpError err = {0};
    double t0 = now_seconds();
    ck_assert_int_eq(refcache_load(dir, id, q, c, 2, 2, z, NULL, NULL, &hit, &err), FP_EFORMAT);
    double took = now_seconds() - t0;
    ck_assert_msg(took < 0.25, "took %.2f s", took);
    ck_assert_int_eq(hit, 0);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "not a reference-model cache entry"), "%s", err.msg);
    // A real entry's header, then 4 GB.
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(refcache_store(dir, id, q, c, 2, 2, (float[]){1, 2, 3, 4}, NULL, 0.5, &err), FP_OK);
    ck_assert_int_eq(truncate(path, 4000000000LL), 0);
    t0 = now_seconds();
    ck_assert_int_eq(refcache_load(dir, id, q, c, 2, 2, z, NULL, NULL, &hit, &err), FP_EFORMAT);
    took = now_seconds() - t0;
    ck_assert_msg(took < 0.25, "took %.2f s", took);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "larger than"), "%s", err.msg);
    ck_assert_int_eq(unlink(path), 0);
}
END_TEST

// ---- 33.6 (cache half): a forged entry of NaN logits with a valid checksum ---------------

// Rewrites logit k of the entry at path to v and recomputes its CRC-32, as a forger would.
static void forge_logit(const char *path, int n_query, int n_classes, int k, float v) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    long z = n - 4 - 4L * n_query * n_classes; // the logits end 4 bytes (the CRC) before the end
    memcpy(b + z + 4L * k, &v, 4);
    uint32_t crc = (uint32_t)crc32(0L, b, (uInt)(n - 4));
    memcpy(b + n - 4, &crc, 4);
    f = fopen(path, "wb");
    ck_assert_uint_eq(fwrite(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(b);
}

START_TEST(forged_nonfinite_entry_is_damaged) {
    char dir[400], path[600];
    scratch_path(tmp_dir, "d", dir, sizeof dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    const char *id = "{\"forged\":1}";
    uint32_t q[3] = {1, 2, 5};
    uint64_t c[3] = {3, 4, 9};
    float good[6] = {1, 2, 3, 4, 5, 6}, z[6];
    FpError err = {0};
    ck_assert_int_eq(refcache_store(dir, id, q, c, 3, 2, good, NULL, 0.5, &err), FP_OK);
    refcache_path(dir, id, path, sizeof path);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        forge_logit(path, 3, 2, 2 * k + 1, bad[k]);
        int hit = 1;
        ck_assert_int_eq(refcache_load(dir, id, q, c, 3, 2, z, NULL, NULL, &hit, &err), FP_EFORMAT);
        ck_assert_int_eq(hit, 0);
        ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "not finite"), "%s", err.msg);
        // Also when the request covers only queries before the forged one.
        ck_assert_int_eq(refcache_load(dir, id, q, c, 1, 2, z, NULL, NULL, &hit, &err), FP_EFORMAT);
        ck_assert_int_eq(refcache_store(dir, id, q, c, 3, 2, good, NULL, 0.5, &err), FP_OK);
    }
    // Nor is a non-finite model stored.
    float nan_logits[6] = {1, 2, NAN, 4, 5, 6};
    ck_assert_int_eq(refcache_store(dir, id, q, c, 3, 2, nan_logits, NULL, 0.5, &err), FP_EPARAM);
    int hit = 0;
    ck_assert_int_eq(refcache_load(dir, id, q, c, 3, 2, z, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 1);
    ck_assert_mem_eq(z, good, sizeof good);
}
END_TEST

// End to end: the forged entry in a matrix's cache is reported (without --verbose),
// retrained and overwritten; the cell is done, not diverged.
START_TEST(forged_nonfinite_entry_retrained_in_matrix) {
    if (!cli_have_bin())
        return;
    char mpath[400], dir[400], refs[500], name[300], path[900], cells[500], cell[300], cpath[900];
    write_lira_matrix(mpath, sizeof mpath);
    scratch_path(tmp_dir, "LN", dir, sizeof dir);
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "%s", err_buf);
    snprintf(refs, sizeof refs, "%s/reference-models", dir);
    snprintf(cells, sizeof cells, "%s/cells", dir);
    ck_assert(first_entry(refs, ".ref", name, sizeof name));
    snprintf(path, sizeof path, "%s/%s", refs, name);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    // The entry's counts from its header (u32 n_query at 20, n_classes at 24).
    FILE *f = fopen(path, "rb");
    uint32_t hdr[7];
    ck_assert_uint_eq(fread(hdr, 4, 7, f), 7);
    fclose(f);
    forge_logit(path, (int)hdr[5], (int)hdr[6], 0, NAN);
    ck_assert(first_entry(cells, ".json", cell, sizeof cell));
    snprintf(cpath, sizeof cpath, "%s/%s", cells, cell);
    ck_assert_int_eq(unlink(cpath), 0); // the cell runs again and looks its models up
    rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, name) && strstr(err_buf, "not finite") && strstr(err_buf, "training the model again"),
                  "%s", err_buf);
    cJSON *j = NULL;
    ck_assert_int_eq(jv_load_file(cpath, &j, NULL), FP_OK);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "status")->valuestring, "done");
    cJSON_Delete(j);
    // Overwritten with the retrained model's finite logits: a third run reads it back.
    FpError err = {0};
    char *text;
    size_t len;
    ck_assert_int_eq(fp_read_beneath(refs, name, (size_t)1 << 30, &text, &len, NULL, &err), FP_OK);
    free(text);
    ck_assert_int_eq(unlink(cpath), 0);
    rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0 && !strstr(err_buf, "reference-model cache"), "%s", err_buf);
}
END_TEST

// ---- 33.7: damaged entries are reported without --verbose --------------------------------

// docs/attacks-mia.md: a damaged entry "is reported on stderr, trained again and
// overwritten". A matrix run without --verbose said nothing.
START_TEST(damaged_entry_reported_without_verbose) {
    if (!cli_have_bin())
        return;
    char mpath[400], dir[400], refs[500], name[300], path[900], cells[500], cell[300], cpath[900];
    write_lira_matrix(mpath, sizeof mpath);
    scratch_path(tmp_dir, "LD", dir, sizeof dir);
    int rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "%s", err_buf);
    snprintf(refs, sizeof refs, "%s/reference-models", dir);
    snprintf(cells, sizeof cells, "%s/cells", dir);
    ck_assert(first_entry(refs, ".ref", name, sizeof name));
    snprintf(path, sizeof path, "%s/%s", refs, name);
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "\x55", 1, 60), 1); // a byte of the queries: the checksum fails
    close(fd);
    ck_assert(first_entry(cells, ".json", cell, sizeof cell));
    snprintf(cpath, sizeof cpath, "%s/%s", cells, cell);
    ck_assert_int_eq(unlink(cpath), 0);
    rc = RUN("matrix", mpath, "--out", dir);
    ck_assert_msg(rc == 0, "%s", err_buf);
    ck_assert_msg(strstr(err_buf, name) && strstr(err_buf, "checksum mismatch") &&
                  strstr(err_buf, "training the model again"), "%s", err_buf);
}
END_TEST

Suite *suite_hostile_files(void) {
    Suite *s = suite_create("hostile_files");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, make_tmp_dir, remove_tmp_dir);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, audit_multi_run_link_not_written_through);
    tcase_add_test(tc, reference_models_link_refused);
    tcase_add_test(tc, cell_and_lock_links_refused);
    tcase_add_test(tc, opener_refuses_links_for_every_mode);
    tcase_add_test(tc, fifo_in_run_folder_refused_promptly);
    tcase_add_test(tc, fifo_library_reads_do_not_block);
    tcase_add_test(tc, sparse_4gb_ref_refused_without_reading);
    tcase_add_test(tc, forged_nonfinite_entry_is_damaged);
    tcase_add_test(tc, forged_nonfinite_entry_retrained_in_matrix);
    tcase_add_test(tc, damaged_entry_reported_without_verbose);
    suite_add_tcase(s, tc);
    return s;
}
