// What runner/matrix.c (loading, cells) and runner/matrix_run.c (running) share.
// Not for other modules: use runner/matrix.h.
#ifndef FEDPRIV_RUNNER_MATRIX_INTERNAL_H
#define FEDPRIV_RUNNER_MATRIX_INTERNAL_H

#include "runner/matrix.h"

typedef struct AttackSpec {
    const AttackOps *ops;
    cJSON *json;        // the attack's object as the attack parses it (no "model")
    cJSON *model_json;  // the attack's own model, or NULL: the matrix's model
    Model *proto;       // that model initialised from the seed (NULL: the matrix's)
    char path[32];      // "attacks[1]"
    char dirname[64];   // "1-dlg": its artifacts folder inside the cell's
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
    CellStatus status;
    char message[256];  // why it failed or diverged
    double seconds;     // this run's wall time for it (0 when skipped)
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
    char file[256];
};

const DefenseOps *matrix_defense_find(const Matrix *m, const char *name);
const AttackOps *matrix_attack_find(const Matrix *m, const char *name);
// "philox" (reproducible) or "secure" (the config's "rng": "secure"; core/rng_secure.h).
const char *matrix_rng_name(const Matrix *m);

#endif
