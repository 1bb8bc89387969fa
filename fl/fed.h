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
//      steps 2 and 3 are the one client-upload path (fl/upload.h) that attacks observe;
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

#include "core/comm.h"
#include "datasets/batch.h"
#include "datasets/dataset.h"
#include "fl/defense.h"
#include "fl/upload.h"
#include "models/model.h"
#include "models/predict.h"

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
    int epochs, steps, batch_size;   // steps > 0: that many minibatch steps; else epochs passes
    double lr, momentum, weight_decay;
    // Optional: a defense that wraps the procedure step by step (DefenseOps.local_gradient),
    // with its state and the client's round. Set by the upload path only; NULL = plain SGD.
    const DefenseOps *defense;
    void *defense_state;
    const DefenseRound *round;
} LocalTrainConfig;

// The number of SGD steps cfg takes on n samples.
long local_train_steps(const LocalTrainConfig *cfg, int n);

// What the engine records of a round's uploads: the defense's UploadParams over the
// round's participants (min and max where clients differ, e.g. layerwise's data-driven clips).
typedef struct UploadSummary {
    int uploads;                          // how many were formed
    const char *noise;                    // UploadParams.noise (NULL: none)
    const char *clip_norm;
    double noise_scale_min, noise_scale_max;
    double clip_min, clip_max;
    double server_noise_scale;
    double epsilon_min, epsilon_max;
} UploadSummary;

// Observers. Any pointer may be NULL. Models handed to hooks are only valid during the call.
typedef struct FedHooks {
    void *ctx;
    // A client's upload after the defense (host buffer, n_params floats), with what the
    // defense applied to it; called in client order when the round finishes (in a
    // streamed round as each upload joins the sum, from the worker thread that formed it,
    // one call at a time: the hook must not talk to MPI).
    void (*on_upload)(void *ctx, int round, int client, const float *upload, UploadKind kind, const ParamTable *table,
                      const UploadParams *params);
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
    PrivacyRecord privacy;    // the account after the round, on rank 0 (one process: always); on the
                              // other ranks of one federation not accounted (privacy_record_unaccounted)
    UploadSummary upload;     // what the defense applied to the round's uploads
    const int *clients;       // the ids of its participants (increasing; `participants` of them): the
                              // server's sampling after the defense's self-sampling, as the engine ran
                              // it. Owned by the federation.
} FedRoundResult;

typedef struct Federation Federation;

// The most threads a federation, its evaluation and the attacks run. A request above it
// is an error naming it (never a silent clamp: results record the threads that ran).
#define FED_MAX_THREADS 16

typedef struct FedSetup {
    FedConfig cfg;
    uint64_t seed;
    int threads;                    // worker threads for clients and evaluation, 1..FED_MAX_THREADS
    const Backend *backend;
    Model *global;                  // borrowed: trained in place
    const Dataset *train, *test;    // borrowed
    const Partition *partition;     // optional, borrowed: else built from cfg (RNG_PARTITION)
    const DefenseOps *defense;      // NULL = none
    const cJSON *defense_json;      // the "defense" object (NULL = {"name": ...} defaults)
    FedHooks hooks;
    int quiet;                      // no progress on stderr
    const DefenseCanaries *canaries; // optional, borrowed: canaries[k] (cfg.clients entries) are client k's
                                    // audit canary records, handed to the defense in its DefenseRound; only
                                    // for a defense with record_canaries (fed_create refuses them otherwise)
    DefenseMemo *memo;              // optional, borrowed: the experiment's memo (DefenseSetup.memo)
    int account_final_only;         // 1: only round cfg.rounds is accounted, the rounds before it say so
                                    // (PRIVACY_NOT_FINAL_REASON): for callers that read the final record
                                    // alone (audits), where the per-round account was most of a run's time
    int replay_sampling;            // 1: the server samples clients from sampling_seed's RNG_CLIENT_SAMPLE
    uint64_t sampling_seed;         // stream instead of seed's: the same participants, round by round, as
                                    // the federation of that seed (a membership target's reference
                                    // federations replay its schedule: attacks/target.h)
    Comm *comm;                     // optional, borrowed (core/comm.h): several ranks run this one
                                    // federation, each forming a share of every round's uploads
                                    // (see "One federation across ranks"); NULL or one rank: alone
} FedSetup;

Federation *fed_create(const FedSetup *setup, FpError *err);
void fed_free(Federation *f);
// Run rounds [first, cfg.rounds); first must be fed_rounds_done(f). Returns FP_EDIVERGED
// (with the round in err) when the global model stops being finite; the rounds done so
// far stay available.
FpStatus fed_run(Federation *f, int first_round, FpError *err);
int fed_rounds_done(const Federation *f);
const FedRoundResult *fed_round_result(const Federation *f, int round);
const Partition *fed_partition(const Federation *f);
void *fed_defense_state(const Federation *f);
// The defense's resolved parameters (describe()); NULL with err set when they could not be
// stated ("out of memory while accounting privacy": an account inside describe() ran out
// of memory, or the object could not be made), never a partial object.
cJSON *fed_defense_json(const Federation *f, FpError *err);
// How many rounds client k took part in so far (uploads aggregated).
int fed_client_participations(const Federation *f, int client);
// The clients the server's sampler picks at least once in the planned rounds (ever[k] =
// 1, k < cfg->clients), before any self-sampling of the defense: a pure function of the
// config and the seed, the same sampling fed_round_begin does (server_sample in fl/fed.c,
// the one sampler), so these are exactly the clients a `fedpriv train` of that config
// and seed lists as participants (its rounds' participant_ids) when the defense does no
// self-sampling. Not for a secure-RNG seed (its sampling is fresh OS randomness).
void fed_sampled_clients(const FedConfig *cfg, uint64_t seed, unsigned char *ever);
// The server's sampling of round `round` (0-based) into clients (room for cfg->clients,
// increasing order); returns how many, or -1 out of memory.
int fed_server_sample(const FedConfig *cfg, uint64_t seed, int round, int *clients);

// -- rounds step by step ---------------------------------------------------------------
// fed_run is a loop of begin, run, finish. The participants of a round occupy slots
// 0..n-1 in increasing client order. Any subset of slots may be formed at a time, in any
// order, by fed_round_run (threads) or elsewhere (fed_round_set_upload: another process
// formed it with the same code); each slot holds exactly what that client alone uploads,
// and fed_round_finish combines the slots in client order, so the result is
// bit-identical however the clients were split. A defense whose aggregation reads
// per-client state that client_perturb wrote (dp-fedasgp's local losses, layerwise's
// budgets) has that state where the client ran.

// Begins round fed_rounds_done(f): the round's global weights and its participants
// (server sampling, then the defense's self-sampling). n_out: how many (may be NULL).
FpStatus fed_round_begin(Federation *f, int *n_out, FpError *err);
// The participants of the begun round (slot s holds client clients[s]); returns n.
int fed_round_participants(const Federation *f, const int **clients);
// Forms the uploads of slots[0..n) (slots NULL: every slot not formed yet), clients in
// parallel threads. A slot already formed is left as it is.
FpStatus fed_round_run(Federation *f, const int *slots, int n, FpError *err);
// Slot s's upload after the defense (host, n_params) and what was applied, or NULL until formed.
const float *fed_round_upload(const Federation *f, int slot, const UploadParams **params);
// A slot formed elsewhere (the same client, round and code in another process).
FpStatus fed_round_set_upload(Federation *f, int slot, const float *upload, const UploadParams *params,
                              FpError *err);
// A slot whose client uploads a crafted update instead of running its local procedure
// (an audit's canary client): update (host, n_params, in the defense's upload kind,
// fed_upload_kind) replaces steps 1-3 of the upload path and goes through step 4, the
// defense's client side with the DefenseRound of (seed, round, client), exactly as a
// trained upload does; the slot is then formed (fed_round_upload returns it). The
// defense sees the client's local data and, as its model, the global weights (it trained
// nothing), and the client's sample count as its n. Not while fed_round_run runs (it uses
// the first worker's model). upload_out (may be NULL, n_params): what the server receives.
FpStatus fed_round_craft_upload(Federation *f, int slot, const float *update, float *upload_out, FpError *err);
// What a client uploads under the federation's defense.
UploadKind fed_upload_kind(const Federation *f);
// Forms the missing slots (across ranks, see below), aggregates in client order,
// updates the defense's schedules and accounting, evaluates and records the round.
// FP_EDIVERGED when the model is not finite.
FpStatus fed_round_finish(Federation *f, FpError *err);

// A slot as another process receives it: the upload (n_params floats) followed by the
// defense's per-client state (DefenseOps.client_state_size bytes). fed_slot_record_size
// is its size; fed_round_save_slot writes formed slot s's record; fed_round_load_slot
// makes slot s the record's upload, puts the client's state into this federation's
// defense state and states what was applied from it (DefenseOps.upload_params), so the
// federation is in the state it would be in had it formed the slot itself.
size_t fed_slot_record_size(const Federation *f);
FpStatus fed_round_save_slot(const Federation *f, int slot, void *record, FpError *err);
FpStatus fed_round_load_slot(Federation *f, int slot, const void *record, FpError *err);

// -- one federation across ranks ---------------------------------------------------------
// With FedSetup.comm of R > 1 ranks (mpirun -n R, srun), every rank runs the same
// federation: the same sampling, the same global model, the same defense state. In
// fed_round_finish each rank forms a share of the round's slots, and the aggregate is
// formed one of two ways, by the defense's aggregation form (fl/defense.h):
//   streamed (a running sum: DefenseOps.sum_add, or FedAvg's): slot s is formed by rank
//     s mod R and sent to rank 0 as soon as it is; rank 0 adds every upload into one sum
//     in client order, finishes the aggregate and broadcasts it. A rank holds the sum
//     and a few uploads in flight, not one per participant;
//   gathered (DefenseOps.server_aggregate; or, for a running sum, a federation with an
//     on_upload or on_local_model hook or a defense with per-client state, which every
//     rank needs for every upload): the slots are split into R contiguous blocks of about
//     equal estimated cost (local SGD steps), every rank's block of records reaches every
//     rank (comm_share_blocks), and each rank aggregates all slots in client order,
//     exactly as one process does.
// Either way the uploads are added in client order by the same code one process runs,
// never summed in rank order, so the result is bit-identical to one process for the same
// seed and backend, whatever R. Server-side draws (sampling, server noise) are keyed by
// the seed. Where a rank fails to form its uploads every rank returns an error. Not
// split (every rank forms every slot, the same result): a federation with an
// on_local_model hook (the hook sees the local models where they train). Refused: a
// secure-RNG run (its server draws are fresh per process).
int fed_ranks(const Federation *f);
// Ends the message of a rank whose error another rank had (that rank says its own).
#define FED_RANK_FAILED_NOTE "its error is on its stderr"

int fed_rank(const Federation *f);

// -- victims and observation points ------------------------------------------------------
// A client whose local data and procedure are given instead of its share of the
// partition: an attack's victim inside the configured federation. Everything else (the
// DefenseSetup and so every calibration, the sampling, the other clients) stays as
// configured; the victim's aggregation weight is its n.
typedef struct FedClientData {
    const Dataset *data;       // borrowed for the federation's lifetime
    const uint32_t *idx;       // samples idx[0..n) of data (copied)
    int n;
    int probe;                 // 1: one local step on all n samples at once (the FedSGD probe that DLG
                               // assumes); 0: the federation's local procedure on them
} FedClientData;
FpStatus fed_set_client_data(Federation *f, int client, const FedClientData *cd, FpError *err);

// Who observes (design notes, "Truth of a verdict"):
//   FED_OBSERVER_SERVER sees a client's upload as the server receives it: after the
//     defense's client side, before any server-side noise (an honest-but-curious server
//     without secure aggregation, an eavesdropper on the uplink);
//   FED_OBSERVER_PUBLIC sees what the server releases after the round: the next global
//     model, the aggregate of every participant's upload with the server's noise in it
//     (anyone who receives the model, the other clients included).
typedef enum { FED_OBSERVER_SERVER = 0, FED_OBSERVER_PUBLIC = 1 } FedObserver;
#define FED_OBSERVERS 2
const char *fed_observer_name(FedObserver o); // "server", "public"

// A declared observation point: client's upload in round `round` (0-based; -1: the
// client's first participation from the federation's current round on), or, for the
// public observer, the release of that round.
typedef struct FedObservePoint {
    int client;
    int round;
    FedObserver observer;
} FedObservePoint;

// What the observer saw, with the federation's real state at that point.
typedef struct FedObservation {
    FedObservePoint point;     // as declared
    int round;                 // the round observed (0-based)
    int client;
    UploadKind kind;           // what `upload` holds: the client's upload kind (server), or
                               // UPLOAD_WEIGHTS (public: the released global model)
    UploadKind client_kind;    // the kind of the client's upload (the defense's)
    float *upload;             // host, n_params: what the observer received
    float *global;             // host, n_params: the round's global weights (the model the client started from)
    UploadParams params;       // what the defense applied to this client's upload (server_noise_scale: the
                               // noise the server adds to the round's sum, in the public observer's view)
    cJSON *privacy;            // the defense's account after this round (privacy_record_json; owned: the
                               // record's strings live in the defense's state, which the federation frees)
    LocalTrainConfig local;    // the client's local procedure (defense fields NULL)
    long local_steps;          // SGD steps it took
    int n_local;               // its samples
    int participants;          // clients taking part in the round (their uploads are in the public release)
} FedObservation;

// Runs the federation from its current round until every point is observed: rounds
// before the last one needed run in full (training, aggregation, accounting). A round
// with a public point runs in full too (every upload, the aggregation with the server's
// noise, the accounting) and the point gets the released model. In the last round, when
// it has server points only, only the observed clients' uploads are formed (the round is
// left begun, not finished). out[i] answers points[i]; free each with
// fed_observation_free. A client that does not take part in its declared round, or never
// within the planned rounds, is FP_EPARAM; an upload or a release that is not finite is
// FP_EDIVERGED.
FpStatus fed_observe(Federation *f, const FedObservePoint *points, int n, FedObservation *out, FpError *err);
void fed_observation_free(FedObservation *o);

// Train m in place on samples idx[0..n) of d (n > 0). shuffle draws the minibatch order.
FpStatus local_train(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, const LocalTrainConfig *cfg,
                     RngStream *shuffle, float *momentum_buf, FpError *err);

#endif
