// The communicator (core/comm.h): Open MPI when built with it, else one process. The
// only file that names MPI.
#include "core/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef FEDPRIV_HAVE_MPI
#include <mpi.h>
#endif

struct Comm {
    int rank, size;
    int mpi;        // 1: MPI_COMM_WORLD, initialised by comm_create
};


// A non-negative integer environment variable, or -1 when unset or not a number.
static long env_count(const char *name) {
    const char *s = getenv(name);
    if (!s || !*s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 ? -1 : v;
}

// Whether an MPI launcher started this process, and how many it started (0: unknown).
// Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMIx launchers (Open MPI, srun
// --mpi=pmix) PMIX_RANK; PMI-1/2 launchers (srun --mpi=pmi2, MPICH's Hydra) PMI_SIZE.
static int launched(long *size, long *rank) {
    *size = env_count("OMPI_COMM_WORLD_SIZE");
    if (*size < 0)
        *size = env_count("PMI_SIZE");
    *rank = env_count("OMPI_COMM_WORLD_RANK");
    if (*rank < 0)
        *rank = env_count("PMIX_RANK");
    if (*rank < 0)
        *rank = env_count("PMI_RANK");
    return *size >= 0 || *rank >= 0;
}

#ifdef FEDPRIV_HAVE_MPI
int comm_mpi_built(void) { return 1; }

// How long a waiting rank sleeps between polls: short against a cell or a round,
// long enough that a waiting rank costs no CPU worth measuring.
#define COMM_POLL_NS 2000000L
// A wait for a request sleeps 10 µs first and twice as long after each poll, up to
// COMM_POLL_NS: a message that is a moment away (a streamed round's next upload, a
// round's broadcast, milliseconds apart) is taken within microseconds, a long wait still
// costs a poll every 2 ms.
#define COMM_FIRST_POLL_NS 10000L

static void comm_nap_ns(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static void comm_nap(void) { comm_nap_ns(COMM_POLL_NS); }

static FpStatus mpi_fail(FpError *err, int code, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return fp_fail(err, FP_EBACKEND, "MPI: %s failed: %s", what, msg);
}

// Completes a request, sleeping between tests.
static FpStatus mpi_wait(MPI_Request *req, MPI_Status *status, const char *what, FpError *err) {
    for (long ns = COMM_FIRST_POLL_NS;; ns = ns * 2 < COMM_POLL_NS ? ns * 2 : COMM_POLL_NS) {
        int done = 0;
        int rc = MPI_Test(req, &done, status ? status : MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, what);
        if (done)
            return FP_OK;
        comm_nap_ns(ns);
    }
}
#else
int comm_mpi_built(void) { return 0; }
#endif

FpStatus comm_create(Comm **out, FpError *err) {
    *out = NULL;
    long size, rank;
    int by_launcher = launched(&size, &rank);
    Comm *c = fp_calloc(1, sizeof *c, err);
    if (!c)
        return FP_ENOMEM;
    c->size = 1;
    if (by_launcher) {
#ifdef FEDPRIV_HAVE_MPI
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            free(c);
            return mpi_fail(err, rc, "MPI_Init_thread");
        }
        c->mpi = 1;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->size);
        if (provided < MPI_THREAD_FUNNELED) {
            comm_free(c);
            return fp_fail(err, FP_EBACKEND, "MPI: this MPI library does not allow threads (MPI_THREAD_FUNNELED)");
        }
#else
        if (size > 1 || rank > 0) {
            free(c);
            return fp_fail(err, FP_EUNSUPPORTED, "started by an MPI launcher (%ld processes), but this fedpriv was "
                           "built without MPI: every process would do the whole job alone (rebuild with make MPI=1, "
                           "which needs Open MPI: make deps)", size > 0 ? size : rank + 1);
        }
#endif
    }
    *out = c;
    return FP_OK;
}

void comm_free(Comm *c) {
    if (!c)
        return;
#ifdef FEDPRIV_HAVE_MPI
    if (c->mpi)
        MPI_Finalize();
#endif
    free(c);
}

int comm_rank(const Comm *c) { return c ? c->rank : 0; }
int comm_size(const Comm *c) { return c ? c->size : 1; }
const char *comm_kind(const Comm *c) { return c && c->mpi ? "mpi" : "local"; }

static FpStatus check_peer(const Comm *c, int peer, int any_ok, const char *what, FpError *err) {
    if ((any_ok && peer == COMM_ANY_SOURCE) || (peer >= 0 && peer < comm_size(c) && peer != comm_rank(c)))
        return FP_OK;
    return fp_fail(err, FP_EPARAM, "%s: no rank %d among %d (this is rank %d)", what, peer, comm_size(c),
                   comm_rank(c));
}

FpStatus comm_send(Comm *c, int dest, int tag, const void *buf, size_t bytes, FpError *err) {
    FP_TRY(check_peer(c, dest, 0, "comm_send", err));
#ifdef FEDPRIV_HAVE_MPI
    if (bytes > 0x7fffffff)
        return fp_fail(err, FP_EPARAM, "comm_send: %zu bytes in one message", bytes);
    MPI_Request req;
    int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, dest, tag, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "MPI_Isend");
    return mpi_wait(&req, NULL, "MPI_Isend", err);
#else
    return fp_fail(err, FP_EUNSUPPORTED, "comm_send: built without MPI");
#endif
}

FpStatus comm_probe(Comm *c, int src, int tag, int *ready, int *from, FpError *err) {
    *ready = 0;
    FP_TRY(check_peer(c, src, 1, "comm_probe", err));
#ifdef FEDPRIV_HAVE_MPI
    MPI_Status st;
    int rc = MPI_Iprobe(src == COMM_ANY_SOURCE ? MPI_ANY_SOURCE : src, tag, MPI_COMM_WORLD, ready, &st);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "MPI_Iprobe");
    if (*ready && from)
        *from = st.MPI_SOURCE;
    return FP_OK;
#else
    return FP_OK; // alone: nobody sends
#endif
}

FpStatus comm_recv(Comm *c, int src, int tag, void *buf, size_t bytes, int *from, FpError *err) {
    FP_TRY(check_peer(c, src, 1, "comm_recv", err));
#ifdef FEDPRIV_HAVE_MPI
    if (bytes > 0x7fffffff)
        return fp_fail(err, FP_EPARAM, "comm_recv: %zu bytes in one message", bytes);
    // Probe first (sleeping), then receive exactly what arrived: a message of the wrong
    // size is an error, never a truncated buffer.
    MPI_Status st;
    for (;;) {
        int ready = 0;
        int rc = MPI_Iprobe(src == COMM_ANY_SOURCE ? MPI_ANY_SOURCE : src, tag, MPI_COMM_WORLD, &ready, &st);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Iprobe");
        if (ready)
            break;
        comm_nap();
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count != (int)bytes)
        return fp_fail(err, FP_EFORMAT, "MPI: a message of %d bytes from rank %d where %zu were expected (tag %d); "
                       "do all ranks run the same fedpriv?", count, st.MPI_SOURCE, bytes, tag);
    int rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "MPI_Recv");
    if (from)
        *from = st.MPI_SOURCE;
    return FP_OK;
#else
    return fp_fail(err, FP_EUNSUPPORTED, "comm_recv: built without MPI");
#endif
}

struct CommRequest {
#ifdef FEDPRIV_HAVE_MPI
    MPI_Request req;
#endif
    size_t bytes; // a receive's expected size (0 for a send)
    int recv;
};

// Starts one non-blocking transfer (send = 1: MPI_Isend, else MPI_Irecv).
static FpStatus comm_start(Comm *c, int peer, int tag, void *buf, size_t bytes, int send, CommRequest **req,
                           FpError *err) {
    *req = NULL;
    const char *what = send ? "comm_isend" : "comm_irecv";
    FP_TRY(check_peer(c, peer, 0, what, err));
#ifdef FEDPRIV_HAVE_MPI
    if (bytes > 0x7fffffff)
        return fp_fail(err, FP_EPARAM, "%s: %zu bytes in one message", what, bytes);
    CommRequest *r = fp_calloc(1, sizeof *r, err);
    if (!r)
        return FP_ENOMEM;
    r->bytes = bytes;
    r->recv = !send;
    int rc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r->req)
                  : MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r->req);
    if (rc != MPI_SUCCESS) {
        free(r);
        return mpi_fail(err, rc, send ? "MPI_Isend" : "MPI_Irecv");
    }
    *req = r;
    return FP_OK;
#else
    (void)tag;
    (void)buf;
    (void)bytes;
    return fp_fail(err, FP_EUNSUPPORTED, "%s: built without MPI", what);
#endif
}

FpStatus comm_isend(Comm *c, int dest, int tag, const void *buf, size_t bytes, CommRequest **req, FpError *err) {
    return comm_start(c, dest, tag, (void *)buf, bytes, 1, req, err); // MPI_Isend reads buf only
}

FpStatus comm_irecv(Comm *c, int src, int tag, void *buf, size_t bytes, CommRequest **req, FpError *err) {
    return comm_start(c, src, tag, buf, bytes, 0, req, err);
}

FpStatus comm_wait(Comm *c, CommRequest **req, FpError *err) {
    (void)c;
    CommRequest *r = *req;
    if (!r)
        return FP_OK;
    *req = NULL;
    FpStatus st = FP_OK;
#ifdef FEDPRIV_HAVE_MPI
    MPI_Status status;
    st = mpi_wait(&r->req, &status, r->recv ? "MPI_Irecv" : "MPI_Isend", err);
    int count = 0;
    if (st == FP_OK && r->recv && (MPI_Get_count(&status, MPI_BYTE, &count) != MPI_SUCCESS || (size_t)count != r->bytes))
        st = fp_fail(err, FP_EFORMAT, "MPI: a message of %d bytes from rank %d, %zu expected: do all ranks run the "
                     "same fedpriv?", count, status.MPI_SOURCE, r->bytes);
#else
    (void)err;
#endif
    free(r);
    return st;
}

FpStatus comm_bcast(Comm *c, int root, void *buf, size_t bytes, FpError *err) {
    if (root < 0 || root >= comm_size(c))
        return fp_fail(err, FP_EPARAM, "comm_bcast: no rank %d among %d", root, comm_size(c));
#ifdef FEDPRIV_HAVE_MPI
    if (c->mpi && c->size > 1) {
        if (bytes > 0x7fffffff)
            return fp_fail(err, FP_EPARAM, "comm_bcast: %zu bytes in one message", bytes);
        MPI_Request req;
        int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Ibcast");
        return mpi_wait(&req, NULL, "MPI_Ibcast", err);
    }
#endif
    return FP_OK;
}

FpStatus comm_share_blocks(Comm *c, void *buf, const size_t *offsets, FpError *err) {
#ifdef FEDPRIV_HAVE_MPI
    if (c->mpi && c->size > 1) {
        // One broadcast per rank's block (per piece of it): every rank starts the same
        // broadcasts in the same order, then all complete together.
        const size_t piece = (size_t)1 << 30;
        size_t n_req = 0;
        for (int r = 0; r < c->size; r++)
            n_req += (offsets[r + 1] - offsets[r] + piece - 1) / piece;
        MPI_Request *req = fp_malloc(sizeof(MPI_Request) * (n_req ? n_req : 1), err);
        if (!req)
            return FP_ENOMEM;
        size_t k = 0;
        int rc = MPI_SUCCESS;
        for (int r = 0; r < c->size && rc == MPI_SUCCESS; r++)
            for (size_t at = offsets[r]; at < offsets[r + 1] && rc == MPI_SUCCESS; at += piece) {
                size_t len = offsets[r + 1] - at < piece ? offsets[r + 1] - at : piece;
                rc = MPI_Ibcast((char *)buf + at, (int)len, MPI_BYTE, r, MPI_COMM_WORLD, &req[k++]);
            }
        FpStatus st = FP_OK;
        if (rc != MPI_SUCCESS)
            st = mpi_fail(err, rc, "MPI_Ibcast");
        while (st == FP_OK) {
            int done = 0;
            rc = MPI_Testall((int)k, req, &done, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS)
                st = mpi_fail(err, rc, "MPI_Testall");
            else if (done)
                break;
            else
                comm_nap();
        }
        free(req);
        return st;
    }
#endif
    (void)c;
    (void)buf;
    (void)offsets;
    (void)err;
    return FP_OK;
}

FpStatus comm_min_int(Comm *c, int v, int *out, FpError *err) {
    *out = v;
#ifdef FEDPRIV_HAVE_MPI
    if (c->mpi && c->size > 1) {
        MPI_Request req;
        int rc = MPI_Iallreduce(&v, out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Iallreduce");
        return mpi_wait(&req, NULL, "MPI_Iallreduce", err);
    }
#endif
    return FP_OK;
}

void comm_abort(Comm *c, int code) {
#ifdef FEDPRIV_HAVE_MPI
    if (c && c->mpi)
        MPI_Abort(MPI_COMM_WORLD, code);
#endif
    (void)c;
    (void)code;
}
