// The federated engine: a server loop over rounds, client sampling, local training,
// uploads through a defense, aggregation, evaluation, and hooks for observers (the
// attacks), which the engine knows nothing about.
//
// One round r:
//   1. sample clients: fixed m = round(q·N) without replacement, or Bernoulli(q) each
//      (RNG_CLIENT_SAMPLE, round r); then the defense's own self-sampling, if any;
//   2. each participant copies the global model and trains E local epochs (or a fixed
//      number of local steps) of minibatch SGD (RNG_SHUFFLE, round r, client k);
//   3. its upload (weights, delta or summed gradient, as the defense asks) is perturbed
//      client-side by the defense (RNG_DEFENSE, round r, client k) and shown to hooks;
//   4. the server aggregates (the defense's rule, else the FedAvg mean weighted by
//      local sample counts or uniform; a round nobody takes part in changes nothing,
//      unless the defense releases its server noise then: release_empty_rounds), forms
//      the next global model, evaluates it on the test set and records the privacy
//      spent (defense_privacy: the settled record).
// Clients of a round run in parallel threads; each computes exactly what it would
// alone (the BLAS runs single-threaded inside), and the server combines them in client
// order, so results are bit-identical whatever the thread count.
#ifndef FEDPRIV_FL_FED_H
#define FEDPRIV_FL_FED_H

#include <cjson/cJSON.h>

#include "datasets/dataset.h"
#include "defenses/defense.h"
#include "models/model.h"

typedef enum { SAMPLING_FIXED = 0, SAMPLING_BERNOULLI = 1 } ClientSampling;
// PARTITION_NATURAL: the split the dataset brings (power-load: one client per zone;
// datasets/power_load.h dataset_natural_partition).
typedef enum { PARTITION_IID = 0, PARTITION_DIRICHLET = 1, PARTITION_SHARDS = 2, PARTITION_NATURAL = 3 } PartitionKind;
typedef enum { AGG_WEIGHTED = 0, AGG_MEAN = 1 } AggregationKind;

typedef struct FedConfig {
    int clients;
    double sample_rate;       // q
    ClientSampling sampling;
    int rounds;
    int local_epochs;         // E (used when local_steps == 0)
    int local_steps;          // a fixed number of minibatch steps instead of epochs (0 = epochs)
    int batch_size;
    double lr, momentum, weight_decay;
    PartitionKind partition;
    double alpha;             // Dirichlet concentration
    int shards_per_client;
    AggregationKind aggregation;
    int samples_per_client;   // 0 = all of the partition; else use only the first n of each client's share
} FedConfig;

// Fixed-size sampling's cohort: max(1, round(q·N)) clients (at most N) every round.
int fed_cohort_size(const FedConfig *cfg);

// Parse the "federation" object (path for messages). Unknown keys and bad values fail.
FpStatus fed_config_parse(const cJSON *json, const char *path, FedConfig *out, FpError *err);
cJSON *fed_config_to_json(const FedConfig *cfg);

// Local training options (one client, or a centrally trained model).
typedef struct LocalTrainConfig {
    int epochs, steps, batch_size;
    double lr, momentum, weight_decay;
} LocalTrainConfig;

// Observers. Any pointer may be NULL. Models handed to hooks are only valid during the call.
typedef struct FedHooks {
    void *ctx;
    // A client's upload after the defense (host buffer, n_params floats).
    void (*on_upload)(void *ctx, int round, int client, const float *upload, UploadKind kind, const ParamTable *table);
    // A client's local model after training (before the upload is formed).
    void (*on_local_model)(void *ctx, int round, int client, Model *local);
    // The global model after round `round` was aggregated.
    void (*on_global)(void *ctx, int round, Model *global);
} FedHooks;

typedef struct FedRoundResult {
    int round;
    int participants;
    double test_accuracy;     // classification; NaN for regression
    double test_loss;         // cross-entropy, or MSE for regression
    double test_mae;          // regression only (NaN otherwise)
    double test_mape;         // regression only: mean |ŷ−y|/|y| over targets y ≠ 0, a fraction (NaN otherwise)
    double seconds;           // the whole round
    double train_seconds;     // local training, defense and aggregation (no evaluation)
    PrivacyRecord privacy;
} FedRoundResult;

typedef struct Federation Federation;

typedef struct FedSetup {
    FedConfig cfg;
    uint64_t seed;
    int threads;                    // worker threads for clients and evaluation (>= 1)
    const Backend *backend;
    Model *global;                  // borrowed: trained in place
    const Dataset *train, *test;    // borrowed
    const Partition *partition;     // optional, borrowed: else built from cfg (RNG_PARTITION)
    const DefenseOps *defense;      // NULL = none
    const cJSON *defense_json;      // the "defense" object (NULL = {"name": ...} defaults)
    FedHooks hooks;
    int quiet;                      // no progress on stderr
} FedSetup;

Federation *fed_create(const FedSetup *setup, FpError *err);
void fed_free(Federation *f);
// Run rounds [first, cfg.rounds). Returns FP_EDIVERGED (with the round in err) when the
// global model stops being finite; the rounds done so far stay available.
FpStatus fed_run(Federation *f, int first_round, FpError *err);
int fed_rounds_done(const Federation *f);
const FedRoundResult *fed_round_result(const Federation *f, int round);
const Partition *fed_partition(const Federation *f);
void *fed_defense_state(const Federation *f);
// The defense's resolved parameters (describe()), or NULL.
cJSON *fed_defense_json(const Federation *f);

// Train m in place on samples idx[0..n) of d (n > 0). shuffle draws the minibatch order.
FpStatus local_train(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, const LocalTrainConfig *cfg,
                     RngStream *shuffle, float *momentum_buf, FpError *err);
// Test accuracy and mean loss of m on d (accuracy NaN for regression; mae for regression).
FpStatus model_evaluate(Model *m, const Dataset *d, int threads, double *accuracy, double *loss, double *mae,
                        FpError *err);
// Regression metrics of m on d: MSE, MAE and MAPE (mean |ŷ−y|/|y| over the outputs with
// y ≠ 0, as a fraction; NaN when every y is 0). Any output pointer may be NULL.
FpStatus model_evaluate_regression(Model *m, const Dataset *d, int threads, double *mse, double *mae, double *mape,
                                   FpError *err);
// Per-sample softmax outputs (n × classes, host) of m on samples idx (NULL = all) of d.
FpStatus model_predict(Model *m, const Dataset *d, const uint32_t *idx, int n, float *probs, FpError *err);
// Builds the batch x (host → tape) for samples idx[0..n) of d.
Var *dataset_batch(Tape *t, const Dataset *d, const uint32_t *idx, int n, float *scratch);
// The loss of a batch: cross-entropy (classification) or MSE (regression).
Var *batch_loss(Tape *t, Var *out, const Dataset *d, const uint32_t *idx, int n, float *scratch);

#endif
