// Reading a matrix run back (the report and `fedpriv check`): DIR/results.json, the
// cell files it names and the audit findings stored beside them. The layout on disk is
// written by the matrix runner (runner/matrix.h) and documented in docs/report.md.
#ifndef FEDPRIV_REPORTS_RESULTS_H
#define FEDPRIV_REPORTS_RESULTS_H

#include <cjson/cJSON.h>

#include "core/status.h"

typedef enum { CELL_PENDING = 0, CELL_DONE = 1, CELL_DIVERGED = 2, CELL_FAILED = 3 } CellStatus;

// "pending", "done", "diverged", "failed".
const char *cell_status_name(CellStatus s);
// The status named s, or -1.
int cell_status_parse(const char *s);

// 1 when id is a plain file name ([A-Za-z0-9._-], not starting with '.').
int results_id_is_safe(const char *id);

typedef struct MatrixResults {
    cJSON *index;   // DIR/results.json
    int n;          // cells in the index
    cJSON **cells;  // n entries: the cell's JSON, or NULL when it has none yet (pending)
    CellStatus *status; // n entries: from the cell file when present, else the index
} MatrixResults;

// Reads DIR/results.json and the cell files it names. A missing or malformed index, a
// cell id that is not a plain file name, or a malformed cell file is FP_EIO/FP_EFORMAT
// naming the file.
FpStatus matrix_results_load(const char *dir, MatrixResults *out, FpError *err);
void matrix_results_free(MatrixResults *r);

// A cell's attack entry by attack name (the first one), or NULL.
const cJSON *matrix_cell_attack(const cJSON *cell, const char *name);

// Audit findings stored with a run: every DIR/audit/*.json (names sorted), each the
// output of `fedpriv audit --json`: one object, a list of them, or {"results": [...]}.
// *records is a list of the finding objects, each with "file" (the file's name) added;
// an empty list when DIR/audit does not exist. A malformed file is FP_EFORMAT.
FpStatus matrix_audit_load(const char *dir, cJSON **records, FpError *err);

#endif
