// Communication between the processes of one job. Built with Open MPI (make MPI=1, or
// MPI=auto when mpicc is found) and started by an MPI launcher (mpirun, or srun with
// PMI/PMIx), a communicator is MPI_COMM_WORLD; otherwise it is a communicator of one
// process and MPI is never initialised: the same binary runs alone, without mpirun,
// and a binary built without MPI needs no MPI library at all.
// `#ifdef FEDPRIV_HAVE_MPI` appears only in core/comm.c.
//
// Rules. The handle is passed explicitly (no global communicator). Every call on a
// communicator comes from the thread that created it (MPI_THREAD_FUNNELED); other
// threads of a rank compute and never talk to MPI. Waiting never spins: a rank that
// waits for a message or a collective sleeps between polls, so that on a machine with
// as many ranks as cores a waiting rank leaves its core to a computing one. Messages
// are bytes: every rank runs the same binary on the same architecture.
#ifndef FEDPRIV_CORE_COMM_H
#define FEDPRIV_CORE_COMM_H

#include <stddef.h>

#include "core/status.h"

#define COMM_ANY_SOURCE (-1)

typedef struct Comm Comm;

// 1 when this binary was built with MPI.
int comm_mpi_built(void);

// The world communicator. Started by an MPI launcher and built with MPI: MPI is
// initialised here. Started by a launcher of several processes but built without MPI:
// FP_EUNSUPPORTED (each process would otherwise do the whole job alone). Otherwise one
// process, no MPI.
FpStatus comm_create(Comm **out, FpError *err);
// Finalises MPI when comm_create initialised it. NULL is a no-op.
void comm_free(Comm *c);

int comm_rank(const Comm *c);
int comm_size(const Comm *c);
// "mpi" or "local".
const char *comm_kind(const Comm *c);

// Sends bytes to rank dest with a tag (>= 0). Returns once buf may be reused.
FpStatus comm_send(Comm *c, int dest, int tag, const void *buf, size_t bytes, FpError *err);
// 1 in *ready when a message with tag from src (COMM_ANY_SOURCE: anyone) is waiting,
// its sender in *from. Never blocks.
FpStatus comm_probe(Comm *c, int src, int tag, int *ready, int *from, FpError *err);
// Receives a message of exactly `bytes` bytes with tag from src (COMM_ANY_SOURCE:
// anyone), sleeping while none has arrived; its sender in *from (may be NULL). A
// message of another size is FP_EFORMAT.
FpStatus comm_recv(Comm *c, int src, int tag, void *buf, size_t bytes, int *from, FpError *err);
// Non-blocking point-to-point (MPI_Isend / MPI_Irecv): the call starts the transfer and
// returns a request; comm_wait completes it (sleeping between polls) and frees it. buf
// must stay untouched (send) or unread (receive) until then. Messages between two ranks
// with one tag arrive in the order they were sent (MPI's non-overtaking rule). A receive
// of a message of another size than `bytes` is FP_EFORMAT at comm_wait. Every started
// request must be waited for, also on an error path (a request left behind would hold
// its buffer and leave the peer waiting).
typedef struct CommRequest CommRequest;
FpStatus comm_isend(Comm *c, int dest, int tag, const void *buf, size_t bytes, CommRequest **req, FpError *err);
FpStatus comm_irecv(Comm *c, int src, int tag, void *buf, size_t bytes, CommRequest **req, FpError *err);
// Completes *req and frees it (*req becomes NULL; NULL is a no-op).
FpStatus comm_wait(Comm *c, CommRequest **req, FpError *err);
// buf of rank root to every rank.
FpStatus comm_bcast(Comm *c, int root, void *buf, size_t bytes, FpError *err);
// Every rank's block to every rank: rank r holds bytes [offsets[r], offsets[r+1]) of buf
// (offsets has size+1 entries, the same on every rank) and afterwards every rank holds
// all of buf. Blocks of any size (sent in pieces of at most 1 GiB).
FpStatus comm_share_blocks(Comm *c, void *buf, const size_t *offsets, FpError *err);
// The smallest v over all ranks, on every rank.
FpStatus comm_min_int(Comm *c, int v, int *out, FpError *err);
// Ends every process of the job with `code` (MPI_Abort): for a broken protocol, where
// waiting ranks could otherwise wait forever. Alone: nothing (nobody waits; the caller
// returns its error).
void comm_abort(Comm *c, int code);

#endif
