// Cells handed out across MPI ranks (runner/matrix_ranks.h).
#include "runner/matrix_ranks.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_REPORT = 11, TAG_WORK = 12, TAG_AGREE = 13 };

// What a rank tells rank 0: the cell it finished (−1: none yet) and how it ended, or the
// error that stopped it (code != FP_OK).
typedef struct CellReport {
    int32_t cell;
    int32_t status;
    int32_t code;
    int32_t pad;
    double seconds;
    char message[256];
    char error[512];
} CellReport;

static void nap(void) {
    struct timespec ts = {0, 2000000L};
    nanosleep(&ts, NULL);
}

FpStatus matrix_ranks_agree(Comm *comm, FpStatus mine, FpError *err) {
    if (comm_size(comm) <= 1)
        return mine;
    int all_ok = 0;
    FpError cerr = {0};
    if (comm_min_int(comm, mine == FP_OK, &all_ok, &cerr) != FP_OK) {
        comm_abort(comm, 3);
        if (err)
            *err = cerr;
        return cerr.code;
    }
    if (all_ok)
        return FP_OK;
    // Somebody failed: every rank but 0 reports its status to rank 0, which keeps the
    // first failure (its own, else the lowest failing rank's).
    CellReport r = {.cell = -1, .code = mine};
    if (comm_rank(comm) > 0) {
        if (mine != FP_OK && err)
            snprintf(r.error, sizeof r.error, "%s", err->msg);
        if (comm_send(comm, 0, TAG_AGREE, &r, sizeof r, &cerr) != FP_OK)
            comm_abort(comm, 3);
        FpStatus code = mine != FP_OK ? mine : FP_EIO;
        return fp_fail(err, code, "another rank failed (rank 0 reports it)");
    }
    FpStatus first = mine;
    char msg[sizeof err->msg] = "";
    if (mine != FP_OK && err)
        snprintf(msg, sizeof msg, "%s", err->msg);
    for (int k = 1; k < comm_size(comm); k++) {
        if (comm_recv(comm, k, TAG_AGREE, &r, sizeof r, NULL, &cerr) != FP_OK)
            comm_abort(comm, 3);
        if (first == FP_OK && r.code != FP_OK) {
            first = (FpStatus)r.code;
            snprintf(msg, sizeof msg, "rank %d: %.480s", k, r.error);
        }
    }
    return fp_fail(err, first, "%s", msg);
}

// ---- rank 0 ---------------------------------------------------------------------------

// The queue rank 0 hands out, shared with its cell thread.
typedef struct Dispatch {
    pthread_mutex_t mu;
    Matrix *m;
    const CellRunContext *rc;
    const int *todo;
    int n, next;
    int stop;              // after an error: hand out nothing more
    // The cell thread's results, in the order it produced them.
    int *done_cell;
    CellOutcome *done_out;
    int n_done, n_taken;   // produced / taken by the main thread
    FpStatus thread_st;
    FpError thread_err;
    int thread_finished;
} Dispatch;

// The next cell to hand out, or −1.
static int take_next(Dispatch *d) {
    pthread_mutex_lock(&d->mu);
    int i = !d->stop && d->next < d->n ? d->todo[d->next++] : -1;
    pthread_mutex_unlock(&d->mu);
    return i;
}

static void *cell_thread(void *arg) {
    Dispatch *d = arg;
    for (;;) {
        int i = take_next(d);
        if (i < 0)
            break;
        CellOutcome out;
        FpError e = {0};
        FpStatus st = matrix_cell_execute(d->m, i, d->rc, &out, &e);
        pthread_mutex_lock(&d->mu);
        if (st != FP_OK) {
            d->thread_st = st;
            d->thread_err = e;
            d->stop = 1;
        } else {
            d->done_cell[d->n_done] = i;
            d->done_out[d->n_done] = out;
            d->n_done++;
        }
        pthread_mutex_unlock(&d->mu);
        if (st != FP_OK)
            break;
    }
    pthread_mutex_lock(&d->mu);
    d->thread_finished = 1;
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

// A cell ended on some rank: its status, the progress line, the index.
static FpStatus cell_ended(Matrix *m, const char *dir, int i, CellStatus status, const char *message, double seconds,
                           int rank, MatrixProgress *pr, int *ran, FpError *err) {
    Cell *c = &m->cells[i];
    c->status = status;
    snprintf(c->message, sizeof c->message, "%s", message);
    c->seconds = seconds;
    ran[i] = 1;
    char where[32];
    snprintf(where, sizeof where, " (rank %d)", rank);
    matrix_progress_cell(pr, c, dir, where);
    return matrix_index_write(m, dir, 0, err);
}

static FpStatus run_rank0(Matrix *m, Comm *comm, const CellRunContext *rc, const int *todo, int n, FpStatus st,
                          MatrixProgress *pr, int *ran, FpError *err) {
    Dispatch d = {.m = m, .rc = rc, .todo = todo, .n = n, .stop = st != FP_OK};
    pthread_mutex_init(&d.mu, NULL);
    d.done_cell = malloc(sizeof(int) * (size_t)(n ? n : 1));
    d.done_out = malloc(sizeof(CellOutcome) * (size_t)(n ? n : 1));
    if (!d.done_cell || !d.done_out) {
        if (st == FP_OK)
            st = fp_fail(err, FP_ENOMEM, "out of memory");
        d.stop = 1;
    }
    pthread_t th;
    int have_thread = pthread_create(&th, NULL, cell_thread, &d) == 0;
    if (!have_thread) {
        d.thread_finished = 1;
        if (st == FP_OK)
            st = fp_fail(err, FP_EIO, "cannot start rank 0's cell thread");
        d.stop = 1;
    }
    int active = comm_size(comm) - 1; // ranks not yet told to stop
    int joined = !have_thread;
    FpError cerr = {0};
    while (active > 0 || !joined) {
        int busy = 0;
        if (active > 0) {
            int ready = 0, from = -1;
            if (comm_probe(comm, COMM_ANY_SOURCE, TAG_REPORT, &ready, &from, &cerr) != FP_OK)
                comm_abort(comm, 3);
            if (ready) {
                busy = 1;
                CellReport r;
                if (comm_recv(comm, from, TAG_REPORT, &r, sizeof r, NULL, &cerr) != FP_OK)
                    comm_abort(comm, 3);
                r.message[sizeof r.message - 1] = r.error[sizeof r.error - 1] = 0;
                if (r.code != FP_OK) {
                    pthread_mutex_lock(&d.mu);
                    d.stop = 1;
                    pthread_mutex_unlock(&d.mu);
                    if (st == FP_OK)
                        st = fp_fail(err, (FpStatus)r.code, "rank %d: %s", from, r.error);
                } else if (r.cell >= 0 && r.cell < m->n_cells) {
                    FpStatus cs = cell_ended(m, rc->dir, r.cell, (CellStatus)r.status, r.message, r.seconds, from, pr,
                                             ran, st == FP_OK ? err : &cerr);
                    if (cs != FP_OK && st == FP_OK) {
                        st = cs;
                        pthread_mutex_lock(&d.mu);
                        d.stop = 1;
                        pthread_mutex_unlock(&d.mu);
                    }
                }
                int32_t next = take_next(&d);
                if (next < 0)
                    active--;
                if (comm_send(comm, from, TAG_WORK, &next, sizeof next, &cerr) != FP_OK)
                    comm_abort(comm, 3);
            }
        }
        // What rank 0's own thread finished meanwhile.
        for (;;) {
            pthread_mutex_lock(&d.mu);
            int have = d.n_taken < d.n_done;
            int i = have ? d.done_cell[d.n_taken] : -1;
            CellOutcome out = have ? d.done_out[d.n_taken] : (CellOutcome){0};
            if (have)
                d.n_taken++;
            int finished = d.thread_finished;
            pthread_mutex_unlock(&d.mu);
            if (!have) {
                if (finished && !joined) {
                    pthread_join(th, NULL);
                    joined = 1;
                    busy = 1;
                    if (d.thread_st != FP_OK && st == FP_OK) {
                        st = d.thread_st;
                        if (err)
                            *err = d.thread_err;
                    }
                }
                break;
            }
            busy = 1;
            FpStatus cs = cell_ended(m, rc->dir, i, out.status, out.message, out.seconds, 0, pr, ran,
                                     st == FP_OK ? err : &cerr);
            if (cs != FP_OK && st == FP_OK) {
                st = cs;
                pthread_mutex_lock(&d.mu);
                d.stop = 1;
                pthread_mutex_unlock(&d.mu);
            }
        }
        if (!busy)
            nap();
    }
    pthread_mutex_destroy(&d.mu);
    free(d.done_cell);
    free(d.done_out);
    return st;
}

// ---- the other ranks ----------------------------------------------------------------

static FpStatus run_worker(Matrix *m, Comm *comm, const CellRunContext *rc, FpStatus st, int *ran, FpError *err) {
    CellReport r = {.cell = -1, .code = st};
    if (st != FP_OK && err)
        snprintf(r.error, sizeof r.error, "%s", err->msg);
    FpError cerr = {0};
    for (;;) {
        if (comm_send(comm, 0, TAG_REPORT, &r, sizeof r, &cerr) != FP_OK)
            comm_abort(comm, 3);
        int32_t cell;
        if (comm_recv(comm, 0, TAG_WORK, &cell, sizeof cell, NULL, &cerr) != FP_OK)
            comm_abort(comm, 3);
        if (cell < 0)
            break;
        if (cell >= m->n_cells) { // ranks disagree on the matrix: checked before, so a bug
            fprintf(stderr, "fedpriv matrix: rank %d: cell %d does not exist (%d cells)\n", comm_rank(comm), cell,
                    m->n_cells);
            comm_abort(comm, 3);
            return fp_fail(err, FP_EFORMAT, "cell %d does not exist", cell);
        }
        CellOutcome out;
        FpError e = {0};
        FpStatus cs = matrix_cell_execute(m, cell, rc, &out, &e);
        memset(&r, 0, sizeof r);
        r.cell = cell;
        r.code = cs;
        if (cs == FP_OK) {
            r.status = out.status;
            r.seconds = out.seconds;
            snprintf(r.message, sizeof r.message, "%s", out.message);
            ran[cell] = 1;
        } else {
            snprintf(r.error, sizeof r.error, "%s", e.msg);
            if (st == FP_OK) {
                st = cs;
                if (err)
                    *err = e;
            }
        }
    }
    return st;
}

// A fingerprint of the matrix: its cells' hashes in order.
static uint64_t matrix_fingerprint(const Matrix *m) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < m->n_cells; i++)
        for (const char *p = m->cells[i].hash; *p; p++) {
            h ^= (unsigned char)*p;
            h *= 1099511628211ull;
        }
    return h ^ (uint64_t)m->n_cells;
}

FpStatus matrix_run_ranks(Matrix *m, Comm *comm, const CellRunContext *rc, const int *todo, int n, FpStatus st,
                          MatrixProgress *pr, int *ran, FpError *err) {
    // Every rank must hold the same matrix (same file, same fedpriv): compare with rank 0.
    uint64_t fp = matrix_fingerprint(m), fp0 = fp;
    FpError cerr = {0};
    if (comm_bcast(comm, 0, &fp0, sizeof fp0, &cerr) != FP_OK)
        comm_abort(comm, 3);
    if (st == FP_OK && fp != fp0)
        st = fp_fail(err, FP_EPARAM, "this rank's matrix differs from rank 0's (every rank must read the same matrix "
                     "file with the same fedpriv)");
    st = matrix_ranks_agree(comm, st, err);
    if (st != FP_OK)
        return st;
    if (comm_rank(comm) == 0)
        return run_rank0(m, comm, rc, todo, n, st, pr, ran, err);
    return run_worker(m, comm, rc, st, ran, err);
}
