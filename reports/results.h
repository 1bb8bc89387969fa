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

// A defense setting: the cells that ran it, one per seed (a matrix without "seeds" has
// one cell per setting).
typedef struct MatrixSetting {
    int n_runs;
    int *runs;      // cell indices, in index order (seed order)
} MatrixSetting;

typedef struct MatrixResults {
    cJSON *index;   // DIR/results.json
    int n;          // cells in the index
    cJSON **cells;  // n entries: the cell's JSON, or NULL when it has none yet (pending)
    CellStatus *status; // n entries: from the cell file when present, else the index
    int n_settings;
    MatrixSetting *settings; // cells grouped by their "setting" (else by label), in order
} MatrixResults;

// Reads DIR/results.json and the cell files it names. A missing or malformed index, a
// cell id that is not a plain file name, or a malformed cell file is FP_EIO/FP_EFORMAT
// naming the file.
FpStatus matrix_results_load(const char *dir, MatrixResults *out, FpError *err);
void matrix_results_free(MatrixResults *r);

// The index entry of cell i, and of attack k (the index's "attacks" list).
const cJSON *matrix_index_cell(const MatrixResults *r, int i);
const cJSON *matrix_index_attack(const MatrixResults *r, int k);
int matrix_attack_count(const MatrixResults *r);

// A cell's attack entry by attack name (the first one), or NULL.
const cJSON *matrix_cell_attack(const cJSON *cell, const char *name);
// A cell's entry for attack k of the index ("index": k), or NULL.
const cJSON *matrix_cell_attack_at(const cJSON *cell, int k);

// obj at path: a key, or "a.b.c" into objects and lists ("images.0.ssim"); keys that
// hold dots are tried whole first ("tpr_at_fpr.0.01" finds {"tpr_at_fpr": {"0.01": x}}).
const cJSON *results_lookup(const cJSON *obj, const char *path);

// 1 for keys that hold timings, which differ between runs of the same cell: keys
// ending in "seconds" ("train_seconds"), and keys with "ms" as a word ("ms_per_evaluation").
int results_is_timing_key(const char *key);

// Cell-level metrics: model_accuracy, model_loss (after the last round),
// epsilon_nominal, epsilon_sound, epsilon_conditional (the bound a conditional record
// holds under its assumptions), epsilon_upload (the upload observer's bound): totals
// after the last round. One table (reports/results.c) says where each lies in a cell
// file and the values it can take; matrix_results_load refuses a cell file with a
// value out of range (an accuracy of -5 or "inf", an AUC above 1) as FP_EFORMAT naming
// the file and the JSON path.
// The k-th cell metric's name, NULL past the last.
const char *results_cell_metric_at(int k);
int results_is_cell_metric(const char *metric);
// A cell metric's value (core/json_number.h: "inf" is +inf); NaN when absent.
double results_cell_metric(const cJSON *cell, const char *metric);
// An attack metric of a cell's attack entry: "headline" is its "value", anything else a
// path into its "result". NaN when absent or when the attack did not finish ("done").
double results_attack_metric(const cJSON *attack_entry, const char *metric);

// Audit findings stored with a run: every DIR/audit/*.json (names sorted), each the
// output of `fedpriv audit --json`: one object, a list of them, or {"results": [...]}.
// *records is a list of the finding objects, each with "file" (the file's name) added;
// an empty list when DIR/audit does not exist. A malformed file is FP_EFORMAT.
FpStatus matrix_audit_load(const char *dir, cJSON **records, FpError *err);

#endif
