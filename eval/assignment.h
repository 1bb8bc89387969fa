// Optimal assignment (the linear sum assignment problem) by the Hungarian algorithm
// (Kuhn 1955, Munkres 1957) in its O(n³) form with row and column potentials (shortest
// augmenting paths, Jonker and Volgenant's formulation): used to match the B
// reconstructions of a batch inversion to the B originals before scoring them.
#ifndef FEDPRIV_EVAL_ASSIGNMENT_H
#define FEDPRIV_EVAL_ASSIGNMENT_H

#include "core/status.h"

// The permutation col_of_row (row i gets column col_of_row[i]) that maximises
// Σ_i score[i·n + col_of_row[i]] over n × n finite scores. FP_EPARAM for n < 1 or a
// score that is not finite; FP_ENOMEM.
FpStatus assignment_max(const double *score, int n, int *col_of_row, FpError *err);

#endif
