// `fedpriv matrix --status DIR`: which cells of a run are done, running, missing or
// failed, from the folder alone (any process, any host, while shards or ranks still
// write it): the index lists the cells, each cell's file says how it ended, and a claim
// (runner/cell_store.h) says who runs it. Reading also rebuilds the statuses in the
// index from the cell files, so DIR/results.json is current afterwards.
#ifndef FEDPRIV_RUNNER_MATRIX_STATUS_H
#define FEDPRIV_RUNNER_MATRIX_STATUS_H

#include <cjson/cJSON.h>

#include "core/status.h"

typedef enum {
    CELL_STATE_DONE = 0,
    CELL_STATE_DIVERGED,
    CELL_STATE_FAILED,
    CELL_STATE_RUNNING,
    CELL_STATE_MISSING,  // not run yet, or interrupted (its writer died)
    CELL_STATE_COUNT
} CellState;

// "done", "diverged", "failed", "running", "missing".
const char *cell_state_name(CellState s);

typedef struct MatrixStatusCell {
    char id[128];
    char label[256];
    CellState state;
    char detail[384];   // failed: why; running: who and since when; missing: "interrupted: ..." or ""
} MatrixStatusCell;

typedef struct MatrixStatus {
    int n;
    MatrixStatusCell *cells;
    int counts[CELL_STATE_COUNT];
} MatrixStatus;

// Reads the state of every cell of the run in dir and rewrites the index's statuses from
// the cell files. A missing or malformed index is FP_EIO/FP_EFORMAT naming the file.
FpStatus matrix_status_load(const char *dir, MatrixStatus *out, FpError *err);
void matrix_status_free(MatrixStatus *s);

// The status as JSON: {"dir", "cells": n, "counts": {...}, "list": [{id, label, state, detail}]}.
cJSON *matrix_status_json(const MatrixStatus *s, const char *dir);

#endif
