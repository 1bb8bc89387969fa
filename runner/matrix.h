// Attack × defense matrices: one dataset and model, a list of defenses each swept over
// parameter values (ε lists), a list of attacks. A cell is one defense setting: the
// federation is trained under it (the model accuracy per round, the privacy spent) and
// every attack of the matrix runs against that setting. docs/report.md documents the
// file format; in short:
//
//   {"seed": 1, "dataset": {...}, "model": {...}, "federation": {...},
//    "defenses": [{"name": "spm", "variant": "corrected", "epsilon": [0.5, 1, 2]},
//                 {"name": "gaussian-dpfedavg", "epsilon": 1, "sweep": {"clip": [0.5, 1]}},
//                 {"name": "none"}],
//    "attacks": [{"name": "dlg", "model": {"name": "lenet"}, "images": [0]},
//                {"name": "ml-leaks"}]}
//
// On disk (DIR = --out):
//   DIR/matrix-owner.json      the matrix the folder belongs to (below, "Owner")
//   DIR/results.json           the index: every cell with its status (pending, done,
//                              failed, diverged), rewritten atomically after each cell
//                              from the cell files (so concurrent shards and ranks agree)
//   DIR/cells/ID.json          one cell's result, written atomically once the cell ends
//   DIR/cells/ID/K-ATTACK/     the artifacts of attack K (PNG files, ...)
//   DIR/reference-models/      the membership attacks' reference models (their logits
//                              only; attacks/refcache.h), shared by every cell and rerun
//   DIR/cells/ID.running       who runs the cell now (runner/cell_store.h has the rest)
// A cell's ID is a readable slug plus a hash of everything that determines its result
// (seed, backend, dataset, model, federation, the cell's defense object, the attacks).
// A rerun skips every cell whose file exists with the same hash and status done;
// failed and missing cells run again, and so does a diverged cell once (its retry
// records "run": {"diverged_retries": 1}, and a retry's result, diverged again or not,
// stands), unless the run keeps diverged cells (MatrixRunOptions.keep_diverged,
// `--keep-diverged`). A divergence may come from outside the cell's spec (a damaged
// reference-model cache entry, the "secure" RNG): one retry settles it.
//
// Owner. A run folder holds one matrix: the first run into DIR records the matrix in
// DIR/matrix-owner.json, and a run of another matrix into DIR (at the same time, as a
// shard, or later) is refused with FP_EPARAM naming both, before it writes anything. A
// matrix is its "name" key, or else its file's canonical path (MatrixOptions.file), so
// the same file edited (another ε, attack or seed) resumes and extends its folder. Results are deterministic given the
// seed, so a run killed at any moment (SIGKILL included) and rerun ends with the same
// cell files as an uninterrupted run; only run-dependent facts differ: timings, in keys
// named "seconds" or ending in "_seconds", and objects named "run" (the cell's; an
// attack's, e.g. which reference models it trained and which it read from
// DIR/reference-models/).
#ifndef FEDPRIV_RUNNER_MATRIX_H
#define FEDPRIV_RUNNER_MATRIX_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "attacks/attack.h"
#include "defenses/registry.h"
#include "fl/defense.h"
#include "reports/results.h"

// Where names are looked up. NULL (or a NULL slot) = the built-in registries; tests
// pass stand-ins.
typedef struct MatrixRegistry {
    const DefenseOps *(*defense_find)(const char *name);
    const AttackOps *(*attack_find)(const char *name);
} MatrixRegistry;

// The largest matrix: cells in all (defense settings), and runs in all (cells x (1 +
// attacks)). Checked before anything is expanded (matrix_load).
#define MATRIX_MAX_CELLS 10000
#define MATRIX_MAX_RUNS 100000

typedef struct MatrixOptions {
    const MatrixRegistry *registry; // NULL: the built-in registries
    const char *device;             // NULL: the file's "device"
    int threads;                    // 0: the file's "threads"
    const char *file;               // the matrix file's name, for results.json (may be NULL)
    FILE *progress;                 // a line before checking many cells; NULL: silent
} MatrixOptions;

struct Comm;

typedef struct MatrixRunOptions {
    int jobs;       // cells run at once, >= 1; > 1 runs each cell in a forked process (CPU only)
    int verbose;    // 1: the training engine's and the attacks' own progress as well
    FILE *progress; // one line per cell with the ETA; NULL: silent (ranks other than 0 are)
    int shard_index, shard_count; // count <= 1: every cell; else the cells of shard index
                                  // (0-based) of count (runner/shard.h)
    struct Comm *comm; // NULL or one process: this process runs the cells; several ranks:
                       // rank 0 hands them out, largest first (runner/matrix_ranks.c)
    const char *job;   // the scheduler's job, for the claims ("slurm 1234_5"); may be NULL
    int keep_diverged; // 1: a diverged cell is finished (no retry; see above)
    double cell_progress_seconds; // inside a cell, long work's lines on the progress stream at most
                                  // this often; 0: every 10 s (runner/matrix_cell.h)
} MatrixRunOptions;

// Reruns of a diverged cell: one.
#define MATRIX_DIVERGED_RETRIES 1

typedef struct MatrixSummary {
    int cells;      // in the matrix
    int mine;       // this run's share: the shard's cells, or every cell
    int skipped;    // of mine, already finished by an earlier run
    int done, diverged, failed, pending; // of mine, after this run
    int matrix_finished; // cells of the whole matrix finished on disk after this run
    int stale;      // cell files in DIR/cells not of this matrix now (noted, left alone)
    double seconds; // wall time of this run
} MatrixSummary;

typedef struct Matrix Matrix;

// Validates a matrix file (parsed), loads the data and checks every cell's defense and
// attack parameters, all before any training: unknown defense or attack, an empty ε
// list, a duplicate cell, a bad parameter or a matrix over MATRIX_MAX_CELLS /
// MATRIX_MAX_RUNS is FP_EPARAM with the JSON path ("defenses[1].epsilon: empty list").
// root is copied.
FpStatus matrix_load(const cJSON *root, const MatrixOptions *opt, Matrix **out, FpError *err);
void matrix_free(Matrix *m);

int matrix_cell_count(const Matrix *m);
const char *matrix_cell_id(const Matrix *m, int i);
const char *matrix_cell_label(const Matrix *m, int i);
// The cell's estimated cost (runner/cell_cost.h).
uint64_t matrix_cell_cost(const Matrix *m, int i);

// Runs the cells not yet finished in dir (created if missing) and writes the index.
// A cell that fails or diverges is recorded as such and the others go on; the return
// value is an error only when the run itself cannot proceed (dir unwritable, dir
// belongs to another matrix, another run holds dir's lock).
//
// Locks (flock, an optimisation for one host: correctness never rests on them, see
// runner/cell_store.h): a whole-matrix run holds DIR/.lock exclusively, so a second one
// on the same host is refused; a shard holds DIR/.lock shared and DIR/.lock-shard-K-of-N
// exclusively, so different shards run side by side and the same shard twice is refused.
// Each lock's holder notes "pid P on HOST since T" in it (a shard's note adds "shard K/N
// of MATRIX"); a refusal names the live holder, or says that it is unknown. Under MPI
// only rank 0 locks.
FpStatus matrix_run(Matrix *m, const char *dir, const MatrixRunOptions *opt, MatrixSummary *sum, FpError *err);

// Before loading a matrix (which may take long): dir is, or can be made as, a writable
// folder, and no live run holds its lock (the message names the holder: pid, host and
// since when).
FpStatus matrix_check_out(const char *dir, FpError *err);

// Also before loading: dir does not belong to another matrix than the one the parsed
// file root (named file) describes (see "Owner" above; matrix_run checks again, and
// records the owner). FP_OK when dir has no owner yet.
FpStatus matrix_check_owner(const char *dir, const cJSON *root, const char *file, FpError *err);

#endif
