// The Hungarian algorithm (see eval/assignment.h). Costs are the negated scores; u and
// v are the dual potentials (u_i + v_j ≤ cost_ij, tight on the matching), and each row
// is added by a Dijkstra-like search for the shortest augmenting path in reduced costs,
// so the matching stays optimal for the rows added so far.
#include "eval/assignment.h"

#include <math.h>
#include <stdlib.h>

FpStatus assignment_max(const double *score, int n, int *col_of_row, FpError *err) {
    if (n < 1)
        return fp_fail(err, FP_EPARAM, "assignment: %d rows", n);
    for (long k = 0; k < (long)n * n; k++)
        if (!isfinite(score[k]))
            return fp_fail(err, FP_EPARAM, "assignment: score %ld is not finite", k);
    // 1-based arrays with a virtual column 0 that holds the row being added.
    double *u = calloc((size_t)n + 1, sizeof(double)), *v = calloc((size_t)n + 1, sizeof(double));
    double *minv = malloc(sizeof(double) * ((size_t)n + 1));
    int *row_of_col = calloc((size_t)n + 1, sizeof(int)), *way = calloc((size_t)n + 1, sizeof(int));
    unsigned char *used = malloc((size_t)n + 1);
    FpStatus st = u && v && minv && row_of_col && way && used ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    for (int i = 1; st == FP_OK && i <= n; i++) {
        row_of_col[0] = i;
        int j0 = 0;
        for (int j = 0; j <= n; j++) {
            minv[j] = INFINITY;
            used[j] = 0;
        }
        do { // grow the alternating tree by the column with the least reduced cost
            used[j0] = 1;
            int i0 = row_of_col[j0], j1 = 0;
            double delta = INFINITY;
            for (int j = 1; j <= n; j++) {
                if (used[j])
                    continue;
                double cur = -score[(size_t)(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
                if (cur < minv[j]) {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if (minv[j] < delta) {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for (int j = 0; j <= n; j++) {
                if (used[j]) {
                    u[row_of_col[j]] += delta;
                    v[j] -= delta;
                } else
                    minv[j] -= delta;
            }
            j0 = j1;
        } while (row_of_col[j0] != 0);
        do { // augment along the path back to the virtual column
            int j1 = way[j0];
            row_of_col[j0] = row_of_col[j1];
            j0 = j1;
        } while (j0);
    }
    for (int j = 1; st == FP_OK && j <= n; j++)
        col_of_row[row_of_col[j] - 1] = j - 1;
    free(u);
    free(v);
    free(minv);
    free(row_of_col);
    free(way);
    free(used);
    return st;
}
