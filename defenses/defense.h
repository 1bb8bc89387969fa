// The defense plugin contract. A defense perturbs what a client uploads (client side),
// may replace the server's aggregation, and reports what privacy it spent. One file
// per defense; defenses/registry.c lists them.
//
// Conventions
// - Uploads are host float buffers laid out like the model's flat parameter buffer
//   (see core/params.h). `upload_kind` says what the engine puts there:
//     UPLOAD_WEIGHTS  the client's weights after local training,
//     UPLOAD_DELTA    local weights minus the round's global weights,
//     UPLOAD_GRADIENT the summed local gradient, (w_global - w_local) / lr.
//   The engine turns the aggregate back into the next global model accordingly.
// - Only trainable layers are perturbed (ParamLayer.trainable); batch-norm running
//   statistics are sent as they are.
// - All randomness comes from the RngStream in the round context, indexed by element:
//   the noise of element i depends only on (stream, i) — e.g. rng_*_at(&round->rng, i),
//   or, for the fast scalar mechanisms of defenses/mech.h, word i mod 4 of Philox block
//   ⌊i/4⌋ — so results do not depend on loop order or thread count, and the GPU draws
//   the same numbers.
// - `variant` is "corrected" (the default: the mechanism with the digest's fixes) or
//   "paper" (as published), plus defense-specific ones ("pnpm" for spm).
#ifndef FEDPRIV_DEFENSES_DEFENSE_H
#define FEDPRIV_DEFENSES_DEFENSE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/params.h"
#include "core/rng.h"
#include "core/status.h"

struct Model;
struct Dataset;

typedef enum { UPLOAD_WEIGHTS = 0, UPLOAD_DELTA = 1, UPLOAD_GRADIENT = 2 } UploadKind;

// What a defense knows when it is created: the federation it protects.
typedef struct DefenseSetup {
    uint64_t seed;
    const ParamTable *params;
    int n_clients;
    int rounds;
    double sample_rate;      // q: fraction of clients sampled per round
    int local_epochs;
    int batch_size;
    double lr;
    int min_client_samples;  // smallest local dataset (for sensitivities like 2C/|D_k|)
    int max_client_samples;
    // The server's side, for defenses that replace aggregation with a data-driven merge
    // (layerwise's Shapley merge). All borrowed, valid for the federation's lifetime:
    // the model architecture (read only; clone it), the training set, and the indices of
    // its samples that no client trains on (a held-out server evaluation set: e.g. the
    // 5% the natural power-load split keeps back). n_server = 0 when there are none.
    const struct Model *model;
    const struct Dataset *server_data;
    const uint32_t *server_idx;
    int n_server;
} DefenseSetup;

// What a defense knows when it perturbs one client's upload in one round.
typedef struct DefenseRound {
    int round;               // 0-based
    int client;              // client id
    RngStream rng;           // RNG_DEFENSE stream for (seed, round, client)
    RngStream aux_rng;       // RNG_DEFENSE_AUX stream for non-noise choices
    const float *global;     // the round's global weights (flat, host), n_params
    int n_local_samples;
    const struct Model *model;         // the client's trained local model (read only)
    const struct Dataset *local_data;  // the client's data
    const uint32_t *local_idx;
    int n_local;
} DefenseRound;

// How far the sound bound is a guarantee for the code as it runs (floating point,
// sampling and participants included). Zero-initialised records say NONE: a defense
// claims more only by setting it.
typedef enum {
    GUARANTEE_NONE = 0,        // no bound holds for what runs (epsilon_total_sound is INFINITY)
    GUARANTEE_CONDITIONAL = 1, // a bound holds under `assumptions` (epsilon_total_conditional)
    GUARANTEE_PROVEN = 2,      // epsilon_total_sound is proven for what runs
} Guarantee;

#define PRIVACY_MAX_ASSUMPTIONS 6

// Privacy accounting, side by side: the paper's nominal claim and a sound bound.
// A value < 0 means "not defined for this defense"; INFINITY means no guarantee.
// epsilon_total_sound is a proven bound or INFINITY; a bound that needs assumptions
// goes to epsilon_total_conditional with the assumptions as plain sentences.
typedef struct PrivacyRecord {
    const char *unit;              // "scalar", "layer", "upload", "client", "record"
    double epsilon_round_nominal;  // the paper's ε for one round
    double epsilon_total_nominal;  // the paper's ε composed over the rounds so far
    const char *nominal_notion;    // e.g. "epsilon-LDP per scalar, sequential composition"
    double epsilon_total_sound;    // a sound (ε, δ) over the rounds so far
    double delta;                  // δ of the sound bound (0 for pure DP)
    const char *sound_notion;      // e.g. "RDP (subsampled Gaussian), Balle et al. 2020 conversion"
    double sigma;                  // noise multiplier or scale this round, when one exists (else -1)
    Guarantee guarantee;           // of the sound bound (NONE unless a defense says more)
    double epsilon_total_conditional;  // the bound under `assumptions` (read when CONDITIONAL)
    const char *assumptions[PRIVACY_MAX_ASSUMPTIONS]; // NULL-terminated sentences: what a
                                   // conditional bound assumes, or why there is none
} PrivacyRecord;

// "proven", "conditional", "none".
const char *guarantee_name(Guarantee g);

typedef struct DefenseOps {
    const char *name;
    const char *summary;           // one line for `fedpriv list`
    const char *variants;          // comma-separated, default first; NULL when none
    // Parse and validate params (the "defense" JSON object, path for messages such as
    // "defense.epsilon"), allocate the state. Unknown keys are errors.
    FpStatus (*create)(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                       FpError *err);
    void (*destroy)(void *state);
    UploadKind (*upload_kind)(const void *state);
    // Optional: 1 when the client takes part this round (client self-sampling); NULL = always.
    int (*participates)(void *state, const DefenseRound *round);
    // Client side: perturb the upload in place (n = params->n_params).
    FpStatus (*client_perturb)(void *state, float *upload, const DefenseRound *round, FpError *err);
    // Optional: server aggregation of k perturbed uploads into out (same kind as the uploads).
    // weights[i] = the engine's FedAvg weight of upload i (they sum to 1). NULL = weighted mean.
    FpStatus (*server_aggregate)(void *state, int round, const float *const *uploads, const double *weights,
                                 const int *clients, int k, float *out, FpError *err);
    // Called once per round after aggregation: update schedules and accounting.
    void (*end_round)(void *state, int round, int n_participants);
    // The privacy spent after `rounds_done` rounds.
    void (*privacy)(const void *state, int rounds_done, PrivacyRecord *rec);
    // Optional: add the resolved parameters (variant, ε, clip, ...) to a JSON object.
    void (*describe)(const void *state, cJSON *out);
} DefenseOps;

// The registry (defenses/registry.c).
const DefenseOps *defense_find(const char *name);
int defense_count(void);
const DefenseOps *defense_at(int i);

#endif
