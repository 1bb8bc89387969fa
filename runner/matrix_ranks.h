// A matrix across MPI ranks (`mpirun -n R fedpriv matrix F.json --out DIR`): every rank
// loads the matrix; rank 0 hands the cells out one at a time, largest estimated cost
// first (runner/cell_cost.h; after one cell of each kind, which the ETA measures early:
// runner/matrix_progress.h), to whichever rank asks, and runs cells itself in a second
// thread meanwhile (its main thread alone talks to MPI, core/comm.h); each rank commits
// the cells it ran into DIR like any other writer (runner/cell_store.h), and rank 0
// writes the index and the progress. A rank that dies takes the job down with it (that
// is mpirun's rule); the cells it had finished stay, the one it was running is run again
// by the next run, which skips everything finished.
//
// Protocol (tags on the communicator): a rank sends a CellReport (the cell it finished,
// or none) to rank 0, which answers with the next cell index or −1 (stop). After an
// error anywhere rank 0 answers −1 to every request, so every rank gets to the end.
#ifndef FEDPRIV_RUNNER_MATRIX_RANKS_H
#define FEDPRIV_RUNNER_MATRIX_RANKS_H

#include "core/comm.h"
#include "runner/matrix_cell.h"
#include "runner/matrix_progress.h"

// Every rank calls this with its own status of a step all ranks took (loading the
// matrix, preparing the folder). FP_OK when every rank succeeded. Otherwise the same
// non-OK status on every rank; rank 0's err names the first failing rank and its
// message ("rank 2: data/x.csv: cannot open"), the others' err says rank 0 reports it.
FpStatus matrix_ranks_agree(Comm *comm, FpStatus mine, FpError *err);

// Runs the todo cells (n, largest first, the same list on every rank) across the ranks
// of comm. st is this rank's status so far: after a failure anywhere nothing runs and
// the first error comes back. ran[i] = 1 for each cell that this rank ran (rank 0: that
// any rank ran); rank 0 updates the cells' statuses, the progress and the index.
FpStatus matrix_run_ranks(Matrix *m, Comm *comm, const CellRunContext *rc, const int *todo, int n, FpStatus st,
                          MatrixProgress *pr, int *ran, FpError *err);

#endif
