// What the matrix's files share: runner/matrix.c (loading, cells), matrix_index.c (the
// index), matrix_cell.c (one cell, executed), matrix_progress.c (the lines and the ETA),
// matrix_run.c and matrix_ranks.c (running the cells: here, forked, on MPI ranks).
// Not for other modules: use runner/matrix.h.
#ifndef FEDPRIV_RUNNER_MATRIX_INTERNAL_H
#define FEDPRIV_RUNNER_MATRIX_INTERNAL_H

#include "runner/matrix.h"

#include <stdint.h>

typedef struct AttackSpec {
    const AttackOps *ops;
    cJSON *json;        // the attack's object as the attack parses it (no "model")
    cJSON *model_json;  // the attack's own model, or NULL: the matrix's model
    Model *proto;       // that model initialised from the seed (NULL: the matrix's)
    char path[32];      // "attacks[1]": the object in the matrix file it comes from
    char dirname[80];   // "1-dlg-server": its artifacts folder inside the cell's
    const char *observer; // the declared observer ("server", "public") of an attack with
                          // observers (points into json), else NULL
} AttackSpec;

typedef struct Cell {
    char id[96];        // slug-hash: the file name
    char label[256];    // "spm corrected ε=0.5"
    char path[64];      // "defenses[2]"
    char hash[17];      // of spec
    int defense_index;
    const DefenseOps *ops;
    cJSON *defense;     // the defense object this cell runs
    cJSON *params;      // the swept parameters other than epsilon ({} when none)
    cJSON *spec;        // everything the result depends on
    double epsilon;     // NaN when the defense object has none
    int on_axis;        // at most one swept list away from its first value (validated first)
    uint64_t cost;      // estimated work (runner/cell_cost.h)
    int retries;        // reruns that ran it again after it diverged, as on disk ("run":
                        // {"diverged_retries"}; runner/matrix.h)
    uint64_t seed;      // this cell's run seed (one of the matrix's seeds)
    int setting;        // the defense setting it runs: cells differing only in seed share it
    CellStatus status;  // as on disk when last looked at (the index is written from it)
    char message[256];  // why it failed or diverged
    double seconds;     // this run's wall time for it (0 when skipped)
    long long disk_mtime_ns, disk_size; // DIR/cells/ID.json when status was read (-1: absent)
} Cell;

struct Matrix {
    cJSON *root;        // the matrix file (a copy)
    cJSON *base_root;   // the experiment part of it
    MatrixRegistry reg;
    Experiment base;    // the model in it stays as initialised from the seed
    int have_base;
    int n_attacks;
    AttackSpec *attacks;
    int n_cells, cap_cells;
    Cell *cells;
    int n_seeds;        // "seeds", or the one "seed"
    uint64_t *seeds;
    int n_settings;
    char file[256];
    // The matrix's identity for its run folders (runner/matrix_owner.c): its "name"
    // (named = 1), or else its file's canonical path.
    int named;
    char owner[4096];
    double index_written_at; // monotonic seconds of the last index write (0: none yet)
};

// ---- the index (runner/matrix_index.c) ----
// Refreshes the cells' statuses from their files (unfinished cells only, and only files
// changed since the last look are read) and rewrites DIR/results.json atomically. The
// index is thus written from the cell files alone, by whichever process: concurrent
// writers (shards, ranks) can only disagree about cells finished between their looks,
// never lose one for good. Unless force, nothing is done within MATRIX_INDEX_INTERVAL
// seconds of the last write: on a shared file system with thousands of cells, looking
// at every unfinished cell after every cell would cost more than the cells.
#define MATRIX_INDEX_INTERVAL 2.0
FpStatus matrix_index_write(Matrix *m, const char *dir, int force, FpError *err);

// A cell whose result stands: done, or diverged and either kept (--keep-diverged) or
// already retried (runner/matrix.h).
int matrix_cell_settled(const Cell *c, int keep_diverged);
// Reads the status of cell c from disk when its file changed since the last look; 1 when
// the status changed.
int matrix_cell_refresh(Cell *c, const char *dir);
// The last look, now with the values: per setting, every metric over the seeds and the
// warnings (reports/summary.h), read back from the cell files. A run that cannot be
// summarised keeps the index without "summary" (fedpriv report summarises it again);
// running out of memory on the way is an error, not a run without a summary.
FpStatus matrix_index_write_final(Matrix *m, const char *dir, FpError *err);

const DefenseOps *matrix_defense_find(const Matrix *m, const char *name);
const AttackOps *matrix_attack_find(const Matrix *m, const char *name);
// The reference of cell i: the first cell without a defense ("none") of the same seed,
// whose attacks' results decide whether an attack applies (AttackOps.uses_reference);
// -1 when i has no defense, no attack takes a reference, or the matrix has no such cell.
int matrix_reference_of(const Matrix *m, int i);
// "philox" (reproducible) or "secure" (the config's "rng": "secure"; core/rng_secure.h).
const char *matrix_rng_name(const Matrix *m);

// The folder's owner (runner/matrix_owner.c). init: from the matrix's "name" (NULL:
// none) or else its file (NULL or "": none). claim: records this matrix in
// DIR/matrix-owner.json when the folder has no owner yet, else checks that it is this
// matrix (FP_EPARAM naming both when not). describe: "the matrix named \"X\"" or
// "the matrix PATH", for messages. check_name: the "name" key's value (NULL: none) is
// one line of 1 to 200 characters.
FpStatus matrix_owner_check_name(const char *name, FpError *err);
void matrix_owner_init(Matrix *m, const char *name, const char *file);
FpStatus matrix_owner_claim(const Matrix *m, const char *dir, FpError *err);
void matrix_owner_describe(const Matrix *m, char *buf, size_t n);

#endif
