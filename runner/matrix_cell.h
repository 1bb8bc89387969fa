// One matrix cell, executed here: its federation trained under the cell's defense, every
// attack of the matrix run against it, and the result committed (runner/cell_store.h).
// Used by every way a matrix runs (runner/matrix_run.c: in this process, forked;
// runner/matrix_ranks.c: on MPI ranks); the cell computes the same thing either way.
// Not for other modules: use runner/matrix.h.
#ifndef FEDPRIV_RUNNER_MATRIX_CELL_H
#define FEDPRIV_RUNNER_MATRIX_CELL_H

#include <stdio.h>

#include "runner/matrix_internal.h"

// Inside a cell, long work (training rounds, the attacks) says how far it is on the
// progress stream at most every MATRIX_CELL_PROGRESS_SECONDS (MatrixRunOptions can say
// otherwise), the first time that long after it started: work shorter than that prints
// nothing.
#define MATRIX_CELL_PROGRESS_SECONDS 10.0

// What running one cell needs besides the matrix.
typedef struct CellRunContext {
    const char *dir;
    int threads;
    int verbose;        // 1: the engine's and the attacks' own lines as well
    FILE *progress;     // the long work's lines (see above); NULL: none
    double progress_seconds; // their interval (> 0)
    const cJSON *who;   // for the claim: shard, rank, job (may be NULL)
} CellRunContext;

// How a cell ended in this process.
typedef struct CellOutcome {
    CellStatus status;
    char message[256];
    double seconds;
    int kept_existing;  // another writer had finished it first: its result stands
} CellOutcome;

// Runs cell i here and commits it (runner/cell_store.h). Touches no Cell field, so that
// another thread may read the matrix meanwhile. The return value is an error only when
// the cell cannot be written; a failing or diverging cell is an outcome.
FpStatus matrix_cell_execute(Matrix *m, int i, const CellRunContext *rc, CellOutcome *out, FpError *err);

// A cell whose process died before writing its result: recorded as failed (unless
// another writer finished it), and the dead process's work folder and claim removed.
// Sets the cell's status and message.
FpStatus matrix_cell_record_crash(Matrix *m, int i, const char *dir, const char *why, double seconds, int threads,
                                  FpError *err);

// How progress lines name attack k: its name, the observer it attacks as and the model it
// attacks ("dlg (server, lenet)", "ml-leaks (mlp)"): the attack's own "model", else the
// matrix's.
void matrix_attack_title(const Matrix *m, int k, char *buf, size_t n);

#endif
