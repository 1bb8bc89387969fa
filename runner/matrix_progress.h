// A matrix run's progress: one line per cell ended, with its headline figures and the
// ETA of the cells still to run here. The ETA is what the cost model (runner/cell_cost.h)
// predicts for those cells, at the seconds per unit of estimated cost measured on the
// cells of each kind that ended (so one slow kind of cell does not make every cell look
// slow), divided among the cells run at once. Not for other modules: use runner/matrix.h.
#ifndef FEDPRIV_RUNNER_MATRIX_PROGRESS_H
#define FEDPRIV_RUNNER_MATRIX_PROGRESS_H

#include <stdio.h>

#include "runner/cell_cost.h"
#include "runner/matrix_internal.h"

typedef struct MatrixProgress {
    FILE *out;              // NULL: silent (the counts and the ETA are kept all the same)
    const Matrix *m;
    int total, finished, ran, jobs, remaining;
    int seeds;              // the matrix's seeds: with more than one, each line names its cell's
    unsigned char *pending; // per cell: 1 while it is still to run in this process
    CostRates *rates;       // seconds per unit of cost, per kind (the cell's defense object)
} MatrixProgress;

// total: this run's share of the cells, finished of them already; todo: the n cells to
// run, jobs at a time. FP_ENOMEM when out of memory.
FpStatus matrix_progress_init(MatrixProgress *p, const Matrix *m, FILE *out, int total, int finished,
                              const int *todo, int n, int jobs, FpError *err);
void matrix_progress_free(MatrixProgress *p);

// Cell c ended (c->status and c->seconds are this run's): counts it, learns its cost and
// prints its line. where: "" or " (rank 2)".
void matrix_progress_cell(MatrixProgress *p, const Cell *c, const char *dir, const char *where);

// The seconds the pending cells are predicted to take; NaN before the first cell ended.
double matrix_progress_eta(const MatrixProgress *p);

// The attacks as the matrix file lists them, and how each runs: "dlg (server, public),
// ml-leaks" (an attack with observers runs once per observer, runner/matrix.c). Returns
// their number.
int matrix_attacks_configured(const Matrix *m, char *buf, size_t n);

#endif
