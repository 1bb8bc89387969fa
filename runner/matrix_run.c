// Running a matrix (see runner/matrix.h): one cell at a time in this process, or up
// to --jobs cells at once, each in a forked process, or the cells of one shard, or
// cells handed out to MPI ranks (runner/matrix_ranks.c). Either way a cell computes the
// same thing (runner/matrix_cell.c): its result depends only on its spec and the seed.
//
// Crash safety. A cell's artifacts are written into this writer's own work folder,
// renamed to DIR/cells/ID/ when the cell ends, and only then is DIR/cells/ID.json
// written (temp file, fsync, rename): runner/cell_store.h. A cell is finished exactly
// when its JSON exists with the current spec hash, so a run killed at any instant
// leaves either a finished cell or one that is run again from scratch. Forked cells die
// with their parent (PR_SET_PDEATHSIG), so a killed run leaves no writer behind.
#include "core/clock.h"
#include "runner/matrix_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attacks/refcache.h"
#include "core/comm.h"
#include "core/files.h"
#include "runner/cell_store.h"
#include "runner/matrix_cell.h"
#include "runner/matrix_progress.h"
#include "runner/matrix_ranks.h"
#include "runner/shard.h"

// ---- running the cells ---------------------------------------------------------------

// Cell c ended in this process (or its child): its line and the index.
static FpStatus cell_ended(Matrix *m, const char *dir, Cell *c, MatrixProgress *pr, int *ran, FpError *err) {
    ran[c - m->cells] = 1;
    matrix_progress_cell(pr, c, dir, "");
    return matrix_index_write(m, dir, 0, err);
}

// One cell after the other, here.
static FpStatus run_serial(Matrix *m, const CellRunContext *rc, const int *todo, int n, FILE *progress,
                           MatrixProgress *pr, int *ran, FpError *err) {
    FpStatus st = FP_OK;
    for (int t = 0; t < n && st == FP_OK; t++) {
        Cell *c = &m->cells[todo[t]];
        if (progress) {
            if (m->n_seeds > 1)
                fp_print_line(progress, "matrix: running %s (seed %llu)", c->label, (unsigned long long)c->seed);
            else
                fp_print_line(progress, "matrix: running %s", c->label);
            fflush(progress);
        }
        CellOutcome out;
        st = matrix_cell_execute(m, todo[t], rc, &out, err);
        if (st == FP_OK) {
            c->status = out.status;
            snprintf(c->message, sizeof c->message, "%s", out.message);
            c->seconds = out.seconds;
            st = cell_ended(m, rc->dir, c, pr, ran, err);
        }
    }
    return st;
}

// Cell i in a child process that dies with the parent; the child's pid, or -1.
static pid_t fork_cell(Matrix *m, int i, const CellRunContext *rc, pid_t parent) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(4);
    FpError cerr = {0};
    CellOutcome out;
    FpStatus cst = matrix_cell_execute(m, i, rc, &out, &cerr);
    if (cst != FP_OK)
        fp_print_line(stderr, "fedpriv matrix: %s", cerr.msg);
    fflush(NULL);
    _exit(cst == FP_OK ? 0 : 3);
}

// Cell i's process ended with wstatus: the cell's status from its file, or, when it wrote
// nothing usable, recorded as a crash.
static FpStatus reap_cell(Matrix *m, int i, const CellRunContext *rc, int wstatus, double seconds, FpError *err) {
    Cell *c = &m->cells[i];
    c->seconds = seconds;
    CellStatus fs = store_cell_status(rc->dir, c->id, c->hash, c->message, sizeof c->message);
    if (fs != CELL_PENDING) {
        c->status = fs;
        return FP_OK;
    }
    char why[256];
    if (WIFSIGNALED(wstatus))
        snprintf(why, sizeof why, "the cell's process was killed by signal %d", WTERMSIG(wstatus));
    else
        snprintf(why, sizeof why, "the cell's process exited with status %d before writing its result",
                 WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    return matrix_cell_record_crash(m, i, rc->dir, why, seconds, rc->threads, err);
}

// Up to jobs cells at once, each in a forked process.
static FpStatus run_forked(Matrix *m, const CellRunContext *rc, const int *todo, int n, int jobs,
                           MatrixProgress *pr, int *ran, FpError *err) {
    typedef struct {
        pid_t pid;
        int cell;
        double t0;
    } Slot;
    const char *dir = rc->dir;
    Slot *slots = calloc((size_t)jobs, sizeof(Slot));
    if (!slots)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    pid_t parent = getpid();
    int next = 0, running = 0;
    FpStatus st = FP_OK;
    while ((next < n && st == FP_OK) || running > 0) {
        while (st == FP_OK && next < n && running < jobs) {
            // A cell that takes its reference cell's results waits until that one ends
            // (else it would run the reference's attacks itself: runner/matrix_cell.c).
            int ref = matrix_reference_of(m, todo[next]), ref_busy = 0;
            for (int q = 0; q < jobs && ref >= 0; q++)
                ref_busy |= slots[q].pid && slots[q].cell == ref;
            if (ref_busy)
                break;
            int s = 0;
            while (slots[s].pid)
                s++;
            pid_t pid = fork_cell(m, todo[next], rc, parent);
            if (pid < 0) {
                st = fp_fail(err, FP_EIO, "cannot start a cell process: %s", strerror(errno));
                break;
            }
            slots[s] = (Slot){.pid = pid, .cell = todo[next], .t0 = fp_monotonic_seconds()};
            running++;
            next++;
        }
        if (running == 0)
            break;
        int wstatus;
        pid_t pid = waitpid(-1, &wstatus, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            st = fp_fail(err, FP_EIO, "waiting for cell processes: %s", strerror(errno));
            break;
        }
        int s = 0;
        while (s < jobs && slots[s].pid != pid)
            s++;
        if (s == jobs)
            continue; // not one of ours
        Cell *c = &m->cells[slots[s].cell];
        FpStatus rs = reap_cell(m, slots[s].cell, rc, wstatus, fp_monotonic_seconds() - slots[s].t0, err);
        if (rs != FP_OK && st == FP_OK)
            st = rs;
        slots[s].pid = 0;
        running--;
        FpStatus ws = cell_ended(m, dir, c, pr, ran, err);
        if (ws != FP_OK && st == FP_OK)
            st = ws;
    }
    free(slots);
    return st;
}

// ---- the folder's locks --------------------------------------------------------------
// flock (an optimisation for one host; correctness never rests on it, runner/cell_store.h)
// on DIR/.lock, opened through the one opener (core/files.h: never a link or a FIFO). A
// run of the whole matrix holds it exclusively and writes "pid P on HOST since TIME" into
// it, so a second run says who holds the folder instead of waiting without a word.

// The holder's line, and whether it is a process of this host that is still alive.
static void lock_holder(int fd, char *who, size_t n, int *alive) {
    char buf[256] = "";
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    buf[got > 0 ? got : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    snprintf(who, n, "%s", buf[0] ? buf : "a process that left no name");
    char host[256] = "", mine[256] = "";
    long pid = 0;
    gethostname(mine, sizeof mine - 1);
    *alive = -1; // unknown (another host, or no line)
    if (sscanf(buf, "pid %ld on %255s", &pid, host) == 2 && pid > 0 && strcmp(host, mine) == 0)
        *alive = kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static FpStatus locked_error(const char *dir, const char *who, FpError *err) {
    return fp_fail(err, FP_EIO, "%s: another fedpriv matrix is writing this folder (%s): wait for it to end, or "
                   "use another --out folder", dir, who);
}

// "pid P on HOST since TIME" and, when given, what for, as the lock's note (a note that
// cannot be written leaves the lock holding; a blocked run then names "a process that
// left no name").
static void write_note(int fd, const char *what) {
    char host[256] = "?", when[64] = "?", line[600];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(line, sizeof line, "pid %ld on %s since %s%s%s\n", (long)getpid(), host, when, what ? ", " : "",
                     what ? what : "");
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    ssize_t noted = ftruncate(fd, 0) == 0 ? pwrite(fd, line, (size_t)n, 0) : -1;
    (void)noted;
}

// The shards of DIR whose lock notes name a live process of this host, "pid P on H
// since T, shard K/N of ..." joined by "; " into buf ("" when none). Only the notes are
// read: probing a shard's lock could refuse that shard starting at the same instant.
static void live_shard_holders(const char *dir, char *buf, size_t n) {
    buf[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t used = 0;
    struct dirent *de;
    while ((de = readdir(d)) && used + 1 < n) {
        int k, count, end = 0;
        if (sscanf(de->d_name, ".lock-shard-%d-of-%d%n", &k, &count, &end) != 2 || de->d_name[end] != 0)
            continue;
        int fd = fp_open_beneath(dir, de->d_name, O_RDONLY, NULL, NULL);
        if (fd < 0)
            continue;
        char who[300];
        int alive;
        lock_holder(fd, who, sizeof who, &alive);
        close(fd);
        if (alive == 1)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "; " : "", who);
    }
    closedir(d);
}

// The folder locks of runner/matrix.h. Returns the descriptors to close (-1: none).
// matrix: this run's matrix (matrix_owner_describe), for the notes and messages.
static FpStatus take_locks(const char *dir, int sharded, int shard_index, int shard_count, const char *matrix,
                           FILE *progress, int fds[2], FpError *err) {
    fds[0] = fds[1] = -1;
    int missing = 0;
    FpError lerr = {0};
    fds[0] = fp_open_beneath(dir, ".lock", O_RDWR | O_CREAT, &missing, &lerr);
    if (fds[0] < 0)
        return fp_fail(err, lerr.code ? lerr.code : FP_EIO, "%s", lerr.msg);
    char who[300] = "", shards[1200] = "";
    int alive = -1;
    if (flock(fds[0], (sharded ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
        lock_holder(fds[0], who, sizeof who, &alive);
        // The note in .lock is a whole-matrix run's; shards hold .lock shared and leave
        // theirs in their own lock files. A note naming a process that has ended is an
        // old run's: the live holder, if any, is a shard.
        if (alive != 1)
            live_shard_holders(dir, shards, sizeof shards);
        if (alive != 1 && shards[0]) {
            char both[1700];
            if (alive == 0)
                snprintf(both, sizeof both, "%s; the note in .lock names %s, which has ended", shards, who);
            else
                snprintf(both, sizeof both, "%s", shards);
            close(fds[0]);
            fds[0] = -1;
            return locked_error(dir, both, err);
        }
        if (alive != 0) { // running, or not ours to check: say so at once
            close(fds[0]);
            fds[0] = -1;
            return locked_error(dir, who, err);
        }
        if (progress)
            fp_print_line(progress, "matrix: %s is locked by %s, which has stopped; waiting for its cell processes "
                          "to exit", dir, who);
    }
    // A run killed a moment ago may still have cell processes on their way out (they
    // hold the lock until they die): wait a little for them before giving up.
    int locked = 0;
    for (int tries = 0; tries < 100 && !(locked = flock(fds[0], (sharded ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0);
         tries++)
        usleep(50000);
    if (!locked) {
        close(fds[0]);
        fds[0] = -1;
        if (alive == 0) // the note's process is gone and no shard names itself: say so, not a dead PID
            return fp_fail(err, FP_EIO, "%s: another fedpriv matrix is writing this folder, but which is unknown: "
                           "the note in .lock names %s, which has ended, and no shard's lock names a live process "
                           "of this machine: wait for it to end, or use another --out folder", dir, who);
        return locked_error(dir, who[0] ? who : "a run of the whole matrix", err);
    }
    if (!sharded) {
        write_note(fds[0], NULL);
        return FP_OK;
    }
    char name[64];
    snprintf(name, sizeof name, ".lock-shard-%d-of-%d", shard_index + 1, shard_count);
    fds[1] = fp_open_beneath(dir, name, O_RDWR | O_CREAT, &missing, &lerr);
    if (fds[1] < 0 && lerr.code == FP_EFORMAT) { // a link or not a file: said as such
        close(fds[0]);
        fds[0] = -1;
        return fp_fail(err, lerr.code, "%s", lerr.msg);
    }
    if (fds[1] < 0 || flock(fds[1], LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[300] = "";
        if (fds[1] >= 0) {
            lock_holder(fds[1], holder, sizeof holder, &alive);
            if (alive == 0 && strlen(holder) + 16 < sizeof holder)
                strcat(holder, ", which has ended");
            close(fds[1]);
        }
        close(fds[0]);
        fds[0] = fds[1] = -1;
        if (e != EWOULDBLOCK)
            return fp_fail(err, FP_EIO, "%s: shard %d/%d of %s: cannot lock %s/%s: %s", dir, shard_index + 1,
                           shard_count, matrix, dir, name, strerror(e));
        return fp_fail(err, FP_EIO, "%s: shard %d/%d of %s is already running on this machine (%s)", dir,
                       shard_index + 1, shard_count, matrix, holder);
    }
    char what[4300];
    snprintf(what, sizeof what, "shard %d/%d of %s", shard_index + 1, shard_count, matrix);
    write_note(fds[1], what);
    return FP_OK;
}

static void release_locks(int fds[2]) {
    for (int k = 0; k < 2; k++)
        if (fds[k] >= 0)
            close(fds[k]);
}

// Who runs the cells, for the claims.
static cJSON *claim_who(const MatrixRunOptions *opt) {
    cJSON *who = cJSON_CreateObject();
    if (opt->shard_count > 1) {
        char sh[32];
        snprintf(sh, sizeof sh, "%d/%d", opt->shard_index + 1, opt->shard_count);
        cJSON_AddStringToObject(who, "shard", sh);
    }
    if (comm_size(opt->comm) > 1) {
        cJSON_AddNumberToObject(who, "rank", comm_rank(opt->comm));
        cJSON_AddNumberToObject(who, "ranks", comm_size(opt->comm));
    }
    if (opt->job && opt->job[0])
        cJSON_AddStringToObject(who, "job", opt->job);
    return who;
}

FpStatus matrix_check_out(const char *dir, FpError *err) {
    FP_TRY(fp_check_writable_dir(dir, err));
    int missing = 0;
    FpError lerr = {0};
    int fd = fp_open_beneath(dir, ".lock", O_RDONLY, &missing, &lerr);
    if (fd < 0)
        return missing ? FP_OK : fp_fail(err, lerr.code, "%s", lerr.msg);
    FpStatus st = FP_OK;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        char who[300];
        int alive;
        lock_holder(fd, who, sizeof who, &alive);
        if (alive != 0) // a stopped run's cells are left to matrix_run's wait
            st = locked_error(dir, who, err);
    } else
        flock(fd, LOCK_UN);
    close(fd);
    return st;
}

// Cell files in DIR/cells that are not cells of this matrix: cells of this matrix before
// an edit (matrix_owner.c keeps other matrices out), of another fedpriv version, or of
// a folder written before owners were recorded. Returns their number and the first
// one's name.
static int cmp_id(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int count_stale_cells(const Matrix *m, const char *dir, char *example, size_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/cells", dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    const char **ids = malloc(sizeof(char *) * (size_t)(m->n_cells ? m->n_cells : 1));
    if (!ids) {
        closedir(d);
        return 0;
    }
    for (int i = 0; i < m->n_cells; i++)
        ids[i] = m->cells[i].id;
    qsort(ids, (size_t)m->n_cells, sizeof *ids, cmp_id);
    int stale = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0 || de->d_name[0] == '.' || len > 200)
            continue;
        char stem[256];
        snprintf(stem, sizeof stem, "%.*s", (int)(len - 5), de->d_name);
        const char *key = stem;
        if (!bsearch(&key, ids, (size_t)m->n_cells, sizeof *ids, cmp_id) && stale++ == 0)
            snprintf(example, n, "cells/%s", de->d_name);
    }
    closedir(d);
    free(ids);
    return stale;
}

// ---- matrix_run's steps --------------------------------------------------------------

static FpStatus check_run_options(const Matrix *m, const MatrixRunOptions *opt, FpError *err) {
    int ranks = comm_size(opt->comm);
    if (opt->jobs > 1 && m->base.backend->device != DEVICE_CPU)
        return fp_fail(err, FP_EPARAM, "--jobs %d: parallel cells need the cpu device (a GPU runs one cell at a time)",
                       opt->jobs);
    if (opt->jobs > 1 && ranks > 1)
        return fp_fail(err, FP_EPARAM, "--jobs %d under MPI: the %d ranks already run cells side by side (start more "
                       "ranks instead)", opt->jobs, ranks);
    if (opt->shard_count > 1 &&
        (opt->shard_index < 0 || opt->shard_index >= opt->shard_count || opt->shard_count > SHARD_MAX))
        return fp_fail(err, FP_EPARAM, "--shard %d/%d: no such shard", opt->shard_index + 1, opt->shard_count);
    return FP_OK;
}

// The folder, made ready to write: its folders (every rank makes them, rank 0 first in
// practice; mkdir is idempotent), its owner and locks (rank 0), no link where cells or
// reference models go, and what dead writers on this host left removed. The folder's
// matrix first (before the locks: a shard of another matrix is refused as such, not as
// "already running"), then the locks.
static FpStatus prepare_folder(const Matrix *m, const char *dir, const MatrixRunOptions *opt, int rank,
                               int locks[2], FpError *err) {
    int sharded = opt->shard_count > 1;
    char path[4200];
    FP_TRY(store_make_dirs(dir, err));
    snprintf(path, sizeof path, "%s/cells", dir);
    FP_TRY(store_make_dirs(path, err));
    char matrix_name[4200];
    matrix_owner_describe(m, matrix_name, sizeof matrix_name);
    if (rank == 0) {
        FP_TRY(matrix_owner_claim(m, dir, err));
        FP_TRY(take_locks(dir, sharded, opt->shard_index, opt->shard_count, matrix_name, opt->progress, locks, err));
    }
    struct stat cst;
    if (lstat(path, &cst) != 0 || !S_ISDIR(cst.st_mode))
        return fp_fail(err, FP_EIO, "%s: not a folder (a symbolic link is not followed: cells are written only "
                       "inside the run folder)", path);
    char refs[4200];
    snprintf(refs, sizeof refs, "%s/reference-models", dir);
    FP_TRY(refcache_check_dir(refs, err));
    FP_TRY(store_check_files(dir, err));
    store_clean_leftovers(dir, rank == 0 && !sharded);
    return FP_OK;
}

// Cell files in DIR/cells that are not cells of this matrix, said on the progress stream.
static int note_stale_cells(const Matrix *m, const char *dir, FILE *progress) {
    char example[300] = "";
    int stale = count_stale_cells(m, dir, example, sizeof example);
    if (stale && progress) {
        fp_print_line(progress, "matrix: note: %s/cells holds %d cell file%s not of this matrix as it is now (e.g. "
                      "%s: from before an edit of it, or of another fedpriv version); report and check read only this "
                      "run's cells", dir, stale, stale == 1 ? "" : "s", example);
        fflush(progress);
    }
    return stale;
}

// This run's share and what of it is left to run.
typedef struct RunShare {
    int *mine;      // per cell: 1 when this run's (the shard's cells, or all)
    int *todo;      // the cells to run, n of them, in the order they run (order_cells)
    int *ran;       // per cell: 1 when this run (this rank; rank 0: any rank) ran it
    int n, n_mine, skipped, retrying;
} RunShare;

static void share_free(RunShare *s) {
    free(s->mine);
    free(s->todo);
    free(s->ran);
}

// The shard's cells (the same on every rank and every host), or all; then each one's
// status from disk: the settled ones are skipped, the others are to run.
static FpStatus select_cells(Matrix *m, const char *dir, const MatrixRunOptions *opt, RunShare *s, FpError *err) {
    size_t cells = (size_t)(m->n_cells ? m->n_cells : 1);
    s->mine = calloc(cells, sizeof(int));
    s->todo = malloc(sizeof(int) * cells);
    s->ran = calloc(cells, sizeof(int));
    uint64_t *costs = malloc(sizeof(uint64_t) * cells);
    FpStatus st = s->mine && s->todo && s->ran && costs ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    if (st == FP_OK && opt->shard_count > 1) {
        for (int i = 0; i < m->n_cells; i++)
            costs[i] = m->cells[i].cost;
        st = shard_assign(costs, m->n_cells, opt->shard_count, s->todo, err);
        for (int i = 0; st == FP_OK && i < m->n_cells; i++)
            s->mine[i] = s->todo[i] == opt->shard_index;
    } else if (st == FP_OK)
        for (int i = 0; i < m->n_cells; i++)
            s->mine[i] = 1;
    free(costs);
    for (int i = 0; st == FP_OK && i < m->n_cells; i++) {
        Cell *c = &m->cells[i];
        c->message[0] = 0;
        c->seconds = 0;
        c->status = CELL_PENDING;
        c->disk_mtime_ns = c->disk_size = -2; // unknown: read now
        matrix_cell_refresh(c, dir);
        if (!s->mine[i])
            continue;
        s->n_mine++;
        if (matrix_cell_settled(c, opt->keep_diverged))
            s->skipped++;
        else {
            s->retrying += c->status == CELL_DIVERGED;
            s->todo[s->n++] = i;
        }
    }
    return st;
}

// Moves, stably, the cells for which keep(m, i, seen) says 1 to the front of todo.
static void hoist(const Matrix *m, int *todo, int n, int (*keep)(const Matrix *, int, unsigned char *),
                  unsigned char *seen) {
    int front = 0;
    for (int t = 0; t < n; t++)
        if (keep(m, todo[t], seen)) {
            int i = todo[t];
            memmove(todo + front + 1, todo + front, sizeof(int) * (size_t)(t - front));
            todo[front++] = i;
        }
}
static int first_of_its_kind(const Matrix *m, int i, unsigned char *seen) {
    int k = m->cells[i].defense_index, first = !seen[k];
    seen[k] = 1;
    return first;
}
static int is_reference(const Matrix *m, int i, unsigned char *seen) {
    (void)seen;
    return strcmp(m->cells[i].ops->name, "none") == 0;
}

// The order the cells run in. Under MPI, largest estimated cost first (the hand-out's
// tail is then short); else as listed. Then the first cell of each kind (defense
// object) comes first, so that the ETA has measured every kind early
// (runner/matrix_progress.h); and, outside MPI, the reference cells (no defense) before
// all: the others read their attacks' results.
static FpStatus order_cells(Matrix *m, RunShare *s, int ranks, FpError *err) {
    size_t cells = (size_t)(m->n_cells ? m->n_cells : 1);
    unsigned char *seen = calloc(cells, 1);
    int *order = ranks > 1 ? malloc(sizeof(int) * cells) : NULL;
    uint64_t *costs = ranks > 1 ? malloc(sizeof(uint64_t) * cells) : NULL;
    if (!seen || (ranks > 1 && (!order || !costs))) {
        free(seen);
        free(order);
        free(costs);
        return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    if (ranks > 1) {
        for (int i = 0; i < m->n_cells; i++)
            costs[i] = m->cells[i].cost;
        shard_order_by_cost(costs, m->n_cells, order);
        for (int t = 0; t < s->n; t++)
            seen[s->todo[t]] = 1;
        s->n = 0;
        for (int t = 0; t < m->n_cells; t++)
            if (seen[order[t]])
                s->todo[s->n++] = order[t];
        memset(seen, 0, cells);
    }
    hoist(m, s->todo, s->n, first_of_its_kind, seen);
    if (ranks <= 1)
        hoist(m, s->todo, s->n, is_reference, NULL);
    free(seen);
    free(order);
    free(costs);
    return FP_OK;
}

// The first lines: what runs, and how.
static void print_plan(const Matrix *m, const MatrixRunOptions *opt, const RunShare *s, int threads, int ranks) {
    FILE *f = opt->progress;
    char attacks[512];
    int n_attacks = matrix_attacks_configured(m, attacks, sizeof attacks);
    char each[600];
    snprintf(each, sizeof each, "%d attack%s each%s%s", n_attacks, n_attacks == 1 ? "" : "s", n_attacks ? ": " : "",
             attacks);
    if (opt->shard_count > 1) {
        fp_print_line(f, "matrix: shard %d/%d: %d cells (%s), %d already finished, %d to run", opt->shard_index + 1,
                      opt->shard_count, s->n_mine, each, s->skipped, s->n);
        double part = 0, all = 0;
        for (int i = 0; i < m->n_cells; i++) {
            all += (double)m->cells[i].cost;
            part += s->mine[i] ? (double)m->cells[i].cost : 0;
        }
        fprintf(f, "matrix: shard %d/%d holds %d of the %d cells, %.1f%% of the estimated work\n",
                opt->shard_index + 1, opt->shard_count, s->n_mine, m->n_cells, all > 0 ? 100 * part / all : 0);
    } else
        fp_print_line(f, "matrix: %d cells (%d settings x %d seed%s, %s), %d already finished, %d to run", s->n_mine,
                      m->n_settings, m->n_seeds, m->n_seeds == 1 ? "" : "s", each, s->skipped, s->n);
    if (s->retrying)
        fprintf(f, "matrix: %d of them diverged on an earlier run and %s retried once (--keep-diverged keeps "
                "diverged cells as they are)\n", s->retrying, s->retrying == 1 ? "is" : "are");
    if (opt->jobs > 1 && s->n > 0)
        fprintf(f, "matrix: %d cells at a time, %d thread%s each\n", opt->jobs, threads, threads == 1 ? "" : "s");
    if (ranks > 1)
        fprintf(f, "matrix: %d MPI ranks, cells handed out from rank 0, largest first (after one of each kind)\n",
                ranks);
    fflush(f);
}

// The counts after the run, from the cells' files: a worker rank knows only its own cells.
static MatrixSummary summarize(Matrix *m, const char *dir, const RunShare *s, int rank, int stale) {
    MatrixSummary sum = {.cells = m->n_cells, .mine = s->n_mine, .skipped = s->skipped, .stale = stale};
    for (int i = 0; i < m->n_cells; i++) {
        if (rank == 0 || s->ran[i])
            matrix_cell_refresh(&m->cells[i], dir);
        CellStatus cs = m->cells[i].status;
        sum.matrix_finished += cs == CELL_DONE || cs == CELL_DIVERGED;
        if (!s->mine[i] || (rank > 0 && !s->ran[i]))
            continue;
        switch (cs) {
        case CELL_DONE: sum.done++; break;
        case CELL_DIVERGED: sum.diverged++; break;
        case CELL_FAILED: sum.failed++; break;
        default: sum.pending++; break;
        }
    }
    return sum;
}

FpStatus matrix_run(Matrix *m, const char *dir, const MatrixRunOptions *opt_in, MatrixSummary *sum, FpError *err) {
    MatrixRunOptions opt = opt_in ? *opt_in : (MatrixRunOptions){.jobs = 1};
    if (opt.jobs < 1)
        opt.jobs = 1;
    FP_TRY(check_run_options(m, &opt, err));
    int ranks = comm_size(opt.comm), rank = comm_rank(opt.comm);
    FILE *cell_progress = opt.progress; // every rank's long cells say how far they are
    if (rank > 0)
        opt.progress = NULL; // rank 0 speaks for the job
    double t_start = fp_monotonic_seconds();
    int locks[2] = {-1, -1}, stale = 0;
    RunShare share = {0};
    FpStatus st = prepare_folder(m, dir, &opt, rank, locks, err);
    if (st == FP_OK && rank == 0)
        stale = note_stale_cells(m, dir, opt.progress);
    if (st == FP_OK)
        st = select_cells(m, dir, &opt, &share, err);
    if (st == FP_OK)
        st = order_cells(m, &share, ranks, err);
    if (st == FP_OK && rank == 0)
        st = matrix_index_write(m, dir, 1, err);
    int prepared = st == FP_OK; // the folder is ours to write
    if (!prepared)
        share.n = 0;
    int threads = m->base.threads;
    if (opt.jobs > 1)
        threads = threads / opt.jobs > 0 ? threads / opt.jobs : 1;
    MatrixProgress pr;
    FpStatus ps = matrix_progress_init(&pr, m, opt.progress, share.n_mine, share.skipped, share.todo, share.n,
                                       ranks > 1 ? ranks : opt.jobs, st == FP_OK ? err : NULL);
    if (st == FP_OK)
        st = ps;
    if (st == FP_OK && opt.progress)
        print_plan(m, &opt, &share, threads, ranks);
    cJSON *who = claim_who(&opt);
    CellRunContext rc = {.dir = dir, .threads = threads, .verbose = opt.verbose, .progress = cell_progress,
                         .progress_seconds = opt.cell_progress_seconds > 0 ? opt.cell_progress_seconds
                                                                           : MATRIX_CELL_PROGRESS_SECONDS,
                         .who = who};
    if (ranks > 1) // every rank takes part even after an error here (rank 0 then tells the others to stop): a
                   // rank that left early would leave the others waiting
        st = matrix_run_ranks(m, opt.comm, &rc, share.todo, share.n, st, &pr, share.ran, err);
    else if (st == FP_OK && opt.jobs > 1 && share.n > 1)
        st = run_forked(m, &rc, share.todo, share.n, opt.jobs, &pr, share.ran, err);
    else if (st == FP_OK)
        st = run_serial(m, &rc, share.todo, share.n, opt.progress, &pr, share.ran, err);
    cJSON_Delete(who);
    matrix_progress_free(&pr);
    if (prepared) {
        MatrixSummary s = summarize(m, dir, &share, rank, stale);
        s.seconds = fp_monotonic_seconds() - t_start;
        if (sum)
            *sum = s;
    } else if (sum)
        *sum = (MatrixSummary){.cells = m->n_cells, .mine = share.n_mine, .skipped = share.skipped, .stale = stale,
                               .seconds = fp_monotonic_seconds() - t_start};
    if (rank == 0 && prepared) {
        FpError ierr = {0};
        FpStatus is = matrix_index_write_final(m, dir, &ierr); // the last look: what every writer finished
        if (st == FP_OK && is != FP_OK) {
            st = is;
            if (err)
                *err = ierr;
        }
    }
    share_free(&share);
    release_locks(locks);
    return st;
}
