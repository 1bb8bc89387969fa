// The defense plugin contract, owned by the engine that calls it (fl/fed.c). A defense
// perturbs what a client uploads (client side), may replace the server's aggregation,
// and reports what privacy it spent. The defenses themselves are plugins above fl: one
// file per defense in defenses/, listed by defenses/registry.h. The engine itself knows
// one: defense_none, plain FedAvg (fl/defense.c), which it runs when given no defense.
//
// The engine (fl/) is the only caller: it builds the one DefenseSetup of a federation
// (fl/fed.c fed_create) and every DefenseRound (fl/upload.c, the one client-upload path
// that the engine and every attack go through), so a defense is always calibrated for
// the federation it runs in.
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
//   or, for the fast scalar mechanisms of defenses/dp/mech.h, word i mod 4 of Philox block
//   ⌊i/4⌋ — so results do not depend on loop order or thread count, and the GPU draws
//   the same numbers.
// - `variant` is "corrected" (the default: the mechanism with the digest's fixes) or
//   "paper" (as published), plus defense-specific ones ("pnpm" for spm).
#ifndef FEDPRIV_FL_DEFENSE_H
#define FEDPRIV_FL_DEFENSE_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "core/autodiff.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/status.h"

struct Model;
struct Dataset;

typedef enum { UPLOAD_WEIGHTS = 0, UPLOAD_DELTA = 1, UPLOAD_GRADIENT = 2 } UploadKind;

// A memo of what a defense derives from its configuration alone at some cost (dp-sgd's σ
// for an ε target and its ε per round: accountant searches of about a second each),
// shared by the federations of one experiment (an audit's runs, an attack's reference
// models, a matrix's cells), so that each is derived once. A key names every input of
// the derivation; a value is up to DEFENSE_MEMO_VALUES doubles. Safe to share between
// threads. A NULL memo remembers nothing (every call derives afresh).
typedef struct DefenseMemo DefenseMemo;
#define DEFENSE_MEMO_VALUES 2
DefenseMemo *defense_memo_create(void);
void defense_memo_free(DefenseMemo *m);
// 1 and values[0..n) when key was put (with n values), else 0.
int defense_memo_get(DefenseMemo *m, const char *key, double *values, int n);
// Remembers n <= DEFENSE_MEMO_VALUES values under key (a key already there keeps its values;
// out of memory, nothing is remembered).
void defense_memo_put(DefenseMemo *m, const char *key, const double *values, int n);
// An object under key, built once and shared read-only by every federation of the
// experiment (a noise table: defenses/clip.c). get: the object, or NULL. put: remembers
// obj under key and owns it from then on (free_obj releases it with the memo), and
// returns the object now stored under key: obj, or the one another thread put first
// (then obj is the caller's still, to free). NULL when m is NULL or out of memory (obj
// stays the caller's). A key names values or an object, never both.
void *defense_memo_get_object(DefenseMemo *m, const char *key);
void *defense_memo_put_object(DefenseMemo *m, const char *key, void *obj, void (*free_obj)(void *));
// How many keys it holds (0 for NULL).
int defense_memo_size(DefenseMemo *m);

// What a defense knows when it is created: the federation it protects.
typedef struct DefenseSetup {
    uint64_t seed;
    const ParamTable *params;
    int n_clients;
    int rounds;
    double sample_rate;      // q: fraction of clients sampled per round
    int cohort_size;         // fixed-size sampling: the m = max(1, round(q·N)) clients drawn
                             // uniformly without replacement each round; 0: Bernoulli sampling
                             // (each client independently with probability q)
    const int *planned_cohorts; // Bernoulli sampling: per round (rounds entries) the number of clients the
                             // server's sampling draws, a function of the seed alone (never of the data), what a
                             // calibration to a target ε can account; read during create only; NULL when not known
    int local_epochs;
    int local_steps;         // > 0: every client takes that many local steps a round (else local_epochs passes)
    int batch_size;
    double lr;
    int min_client_samples;  // smallest local dataset (for sensitivities like 2C/|D_k|)
    int max_client_samples;
    const int *client_samples; // per client: its configured number of samples (n_clients entries; a victim's
                               // data given later never changes it)
    // The server's side, for defenses that replace aggregation with a data-driven merge
    // (layerwise's Shapley merge). All borrowed, valid for the federation's lifetime:
    // the model architecture (read only; clone it), the training set, and the indices of
    // its samples that no client trains on (a held-out server evaluation set: e.g. the
    // 5% the natural power-load split keeps back). n_server = 0 when there are none.
    const struct Model *model;
    const struct Dataset *server_data;
    const uint32_t *server_idx;
    int n_server;
    DefenseMemo *memo;       // optional, borrowed: the experiment's (above)
    FILE *progress;          // where a server-side step that can outlast a round's usual time
                             // (layerwise's Shapley merge) reports within the round; NULL: silent
                             // (a quiet federation; ranks other than 0)
} DefenseSetup;

// Audit canary records of one client (audits/training.c, the record-level audit): n
// records that are not in the client's data but that a record-level local procedure
// samples exactly as it samples the client's own, each standing for a record whose
// clipped gradient is value·e_coords[i] at every step that includes it (the Dirac gradient
// canaries of white-box DP-SGD audits: Nasr et al. 2023, Steinke, Nasr, Jagielski 2023).
// DP-SGD's guarantee covers any per-record gradient within the clip, so such a record is
// one the guarantee must hold for.
typedef struct DefenseCanaries {
    int n;
    const uint32_t *coords;   // trainable flat indices, one per canary
    float value;              // the gradient's entry there: its norm, at most the clip
} DefenseCanaries;

// What a defense knows when it perturbs one client's upload in one round.
typedef struct DefenseRound {
    int round;               // 0-based
    int client;              // client id
    RngStream rng;           // RNG_DEFENSE stream for (seed, round, client)
    RngStream aux_rng;       // RNG_DEFENSE_AUX stream for non-noise choices
    const float *global;     // the round's global weights (flat, host), n_params
    int n_local_samples;
    const struct Model *model;         // the client's local model, trained when client_perturb runs (read
                                       // only); NULL in participates()
    const struct Dataset *local_data;  // the client's data: samples local_idx[0..n_local) (NULL in participates())
    const uint32_t *local_idx;
    int n_local;
    int participants;        // k: the round's cohort after sampling and self-sampling (0 in participates(); known to
                             // every client before it uploads, as a server announces its cohort)
    const DefenseCanaries *canaries; // the client's audit canary records (NULL: none); read only by a
                                     // defense with record_canaries
} DefenseRound;

// One step of a client's local procedure, for a defense that replaces the step's
// gradient (DefenseOps.local_gradient). Valid during the call only.
typedef struct DefenseLocalStep {
    const DefenseRound *round;         // the client's round (its model is the one training here)
    long step;                         // 0-based step within this round's local procedure
    long steps;                        // the procedure's number of steps this round
    struct Model *model;               // the client's model at this step (parameters on its backend)
    Tape *tape;                        // reset before the call; the slot may record on it
    const struct Dataset *data;        // the step's minibatch: samples idx[0..n) of data
    const uint32_t *idx;
    int n;
} DefenseLocalStep;

// What a defense applied to one upload, as an observer of that upload would state it:
// the noise on each coordinate, the clip, the ε the upload spends. Filled by
// DefenseOps.upload_params right after client_perturb; the engine records it per round
// and attacks per observed upload, from the same call, so the two always agree.
typedef struct UploadParams {
    const char *noise;          // the law added to each perturbed coordinate: "gaussian", "laplace", or a
                                // scalar mechanism's name ("spm", "pm", ...); NULL when the client adds none
    double noise_scale;         // its scale on the upload as sent: Gaussian std, Laplace b; for another
                                // scalar mechanism its largest output std over the clip range; 0 = none
    double server_noise_scale;  // std of the Gaussian the server adds to the sum of a round's uploads (0 = none)
    const char *clip_norm;      // "l2" or "l1" (the trainable part is clipped to that norm), "range" (each
                                // scalar clamped to an interval of half-width clip); NULL = no clip
    double clip;                // the bound (the largest over layers or units where they differ); -1 = none
    double epsilon;             // ε of this upload in the defense's own per-upload or per-round claim; -1 = none
} UploadParams;

// The record of an upload with no defense: nothing added, nothing clipped.
static inline UploadParams upload_params_none(void) {
    return (UploadParams){.noise = NULL, .noise_scale = 0, .server_noise_scale = 0, .clip_norm = NULL, .clip = -1,
                          .epsilon = -1};
}

// How far the sound bound is a guarantee for the code as it runs (floating point,
// sampling and participants included). Zero-initialised records say NONE: a defense
// claims more only by setting it.
typedef enum {
    GUARANTEE_NONE = 0,        // no bound holds for what runs (every sound figure is INFINITY)
    GUARANTEE_CONDITIONAL = 1, // a bound holds under `assumptions` (the *_conditional figures)
    GUARANTEE_PROVEN = 2,      // the sound figures are proven for what runs
} Guarantee;

#define PRIVACY_MAX_ASSUMPTIONS 6

// The assumption of a bound over continuous noise drawn by a sampler not proven
// floating-point safe: Mironov 2012 shows that floating-point Laplace outputs have
// input-dependent supports, which voids any ε. A defense that draws such noise and
// states the ideal mechanism's bound lists this sentence (dp-sgd's Gaussian today; the
// federated Gaussian and Laplace defenses have safe samplers, and their float ones say
// none).
#define PRIVACY_ASSUME_EXACT_NOISE                                                                         \
    "the noise is an exact draw from its continuous law: the floating-point sampler that adds it is not " \
    "yet proven safe (Mironov 2012)"

// Privacy accounting, side by side: the paper's nominal claim and a sound bound.
// A value < 0 means "not defined for this defense"; INFINITY means no guarantee.
//
// How a defense fills it: it writes its accountant's bound into epsilon_total_sound
// (and, when it states one, the upload observer's into epsilon_total_upload), says
// what the bound rests on (guarantee, assumptions: privacy_assume), and returns. The
// one place that turns this into what results show is defense_privacy() (privacy_
// record_settle): a bound that is not proven leaves the sound fields, which then hold a
// proven bound or INFINITY and nothing else; a conditional bound moves to the
// *_conditional fields beside its assumptions; a claim of PROVEN with assumptions is
// CONDITIONAL, a CONDITIONAL one without any is NONE.
//
// Two observers: epsilon_total_sound is the bound for the observer the sound notion
// names (for the client-level defenses: one who sees the released aggregates, and not
// which clients took part); epsilon_total_upload, when upload_notion is set, the bound
// for one who sees a client's own uploads and knows it took part (the server without
// secure aggregation, an eavesdropper on the uplink): no sampling amplification there.
// Each is labelled by its own proof when upload_own_label is set (below): the settling then
// applies the one rule to each record apart.
typedef struct PrivacyRecord {
    const char *unit;              // "scalar", "layer", "upload", "client", "record"
    double epsilon_round_nominal;  // the paper's ε for one round
    double epsilon_total_nominal;  // the paper's ε composed over the rounds so far
    const char *nominal_notion;    // e.g. "epsilon-LDP per scalar, sequential composition"
    double epsilon_total_sound;    // a sound (ε, δ) over the rounds so far (see above)
    double delta;                  // δ of the sound bound (0 for pure DP)
    const char *sound_notion;      // e.g. "RDP (subsampled Gaussian), Balle et al. 2020 conversion"
    double sigma;                  // noise multiplier or scale this round, when one exists (else -1)
    Guarantee guarantee;           // of the sound bound (NONE unless a defense says more)
    double epsilon_total_conditional;  // the bound under `assumptions` (set by the settling; NAN otherwise)
    const char *assumptions[PRIVACY_MAX_ASSUMPTIONS]; // NULL-terminated sentences: what a
                                   // conditional bound assumes, or why there is none
    double epsilon_total_upload;   // the upload observer's (ε, δ) (read when upload_notion is set)
    double epsilon_total_upload_conditional; // its bound under its assumptions (set by the settling)
    const char *upload_notion;     // NULL: the defense states no separate upload-observer bound
    // The upload observer's bound is its own record when upload_own_label is set: labelled
    // by upload_guarantee and upload_assumptions (privacy_assume_upload), settled by the
    // same rule, so that what its proof lacks never turns the aggregate's figure into ∞
    // nor the other way round. 0: it shares guarantee and assumptions (one bound for both).
    int upload_own_label;
    Guarantee upload_guarantee;
    const char *upload_assumptions[PRIVACY_MAX_ASSUMPTIONS];
    // Two narrower neighbour relations a training audit can test (audits/training.h), each
    // implied by the unit's and stated only where the defense proves it:
    double epsilon_total_coordinate;   // two uploads of one client that differ in one
                                   // coordinate (read when coordinate_notion is set): a
                                   // coordinate-wise mechanism's per-scalar account
    double epsilon_total_coordinate_conditional; // its bound under `assumptions` (the settling)
    const char *coordinate_notion; // NULL: not stated
    int record_bound_covers_client; // a record-level bound whose sensitivity is the whole
                                   // clip ball, so it holds for any change of one client's
                                   // upload (AVP's and NbAFL's Δs = 2C)
    // The field's figure beside ours (read when standard_notion is set): the ε that the
    // standard accountant of Opacus and TF Privacy, the Poisson-subsampled Gaussian (add/
    // remove one), gives for the record's multiplier, rate and steps at its δ, by RDP
    // (Mironov, Talwar, Zhang 2019, Balle et al. 2020 conversion) and by PLD. A comparison,
    // not a bound of this run: no rounding inflation, table slack or sampling kind of ours.
    // NaN: out of memory (defense_privacy fails).
    double epsilon_standard_rdp;
    double epsilon_standard_pld;
    const char *standard_notion;
} PrivacyRecord;

// "proven", "conditional", "none".
const char *guarantee_name(Guarantee g);

// Appends an assumption (or, for a record without guarantee, a reason) to rec; a
// sentence already listed is not repeated. Beyond PRIVACY_MAX_ASSUMPTIONS the record
// cannot state what it assumes and its guarantee becomes NONE.
void privacy_assume(PrivacyRecord *rec, const char *sentence);
// The same for the upload observer's own record (upload_own_label).
void privacy_assume_upload(PrivacyRecord *rec, const char *sentence);

// The one rule (see PrivacyRecord): after it, epsilon_total_sound and
// epsilon_total_upload are proven bounds or INFINITY. Call it once per record.
void privacy_record_settle(PrivacyRecord *rec);

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
    // Optional: the client's local procedure, wrapped step by step. A record-level defense
    // (DP-SGD, Abadi et al. 2016 Alg. 1: clip each example's gradient, add Gaussian noise to
    // the sum) writes the gradient of this step into grad (n_params floats on the model's
    // backend, the flat layout; entries of non-trainable layers are ignored); the client's
    // SGD update (lr, momentum, weight decay of the federation) then applies it. NULL: the
    // minibatch-mean gradient by backpropagation. Noise drawn here must not reuse the
    // upload's element indices: draw from step->round->rng at ((uint64_t)(step + 1) << 32) + i.
    FpStatus (*local_gradient)(void *state, const DefenseLocalStep *step, float *grad, FpError *err);
    // 1: local_gradient samples DefenseRound.canaries as records of the client (what a
    // record-level audit needs); 0: canary records are refused.
    int record_canaries;
    // Client side: perturb the upload in place (n = params->n_params).
    FpStatus (*client_perturb)(void *state, float *upload, const DefenseRound *round, FpError *err);
    // Optional: what client_perturb just applied to this client's upload (same round
    // context; reads state only). NULL: upload_params_none().
    void (*upload_params)(const void *state, const DefenseRound *round, UploadParams *out);
    // Optional, for a defense whose client side (client_perturb, local_gradient) keeps
    // per-client state that its server side or later rounds read (participates,
    // upload_params, server_aggregate, end_round, privacy): that client's state after its
    // upload as client_state_size bytes (save: reads state only), and the same state put
    // back where the client did not run (load). The engine moves it beside the upload when
    // a round's clients run in other processes (one federation across MPI ranks, fl/fed.h),
    // so every process holds the same state after every round. NULL/0: nothing to move.
    size_t client_state_size;
    void (*client_state_save)(const void *state, const DefenseRound *round, void *buf);
    void (*client_state_load)(void *state, const DefenseRound *round, const void *buf);
    // The server's aggregation comes in one of two forms; which one is a property of the
    // defense, stated by the slots it sets (a defense sets at most one form):
    //
    // The running sum (sum_add and sum_finish; both NULL together with server_aggregate:
    // the engine's FedAvg weighted mean, defense_fedavg_sum_add): sum_add adds one upload
    // (same kind as the uploads), with the engine's FedAvg weight `weight` (the round's
    // weights sum to 1) and the round's k participants, into acc (n_params doubles, zero at
    // the round's start); the engine calls it once per upload, in client order, and then
    // frees the upload. sum_finish turns the sum of the k uploads into out (n_params: the
    // denominator, the server's noise). The engine then holds one sum and one upload in
    // flight instead of all k, and across MPI ranks the uploads stream to rank 0, which
    // alone sums them, in client order (fl/ranks.c). sum_add reads state only.
    void (*sum_add)(const void *state, int round, int k, double *acc, const float *upload, double weight);
    FpStatus (*sum_finish)(void *state, int round, int k, const double *acc, float *out, FpError *err);
    // The gather form, for an aggregation that needs the k uploads at once (a data-driven
    // merge, weights from what the clients reported, anything that is not a sum in client
    // order): aggregate the k perturbed uploads into out (same kind as the uploads).
    // weights[i] = the engine's FedAvg weight of upload i (they sum to 1). The engine holds
    // every upload of the round until it runs, on every rank (each rank receives every
    // upload: fl/ranks.c).
    FpStatus (*server_aggregate)(void *state, int round, const float *const *uploads, const double *weights,
                                 const int *clients, int k, float *out, FpError *err);
    // Either form is called with k = 0 in a round nobody takes part only when
    // release_empty_rounds is set.
    // 1: a round without participants still runs the aggregation (k = 0) and releases
    // what it returns (the server's noise alone), as a central-noise account assumes: a
    // round skipped when nobody takes part would tell who took part.
    int release_empty_rounds;
    // Called once per round after aggregation: update schedules and accounting.
    void (*end_round)(void *state, int round, int n_participants);
    // The privacy spent after `rounds_done` rounds (see PrivacyRecord for how to fill it;
    // callers go through defense_privacy()). An account that could not be computed for
    // lack of memory writes NaN (never a legitimate ε) into the ε it could not compute
    // (epsilon_total_sound, epsilon_total_upload or a nominal ε), never INFINITY, which
    // would claim a complete "no guarantee": defense_privacy() turns it into FP_ENOMEM.
    // It may keep memos of figures (the same figures with or without them) but must change
    // nothing that training reads: across ranks only rank 0 calls it (fl/fed.c).
    void (*privacy)(const void *state, int rounds_done, PrivacyRecord *rec);
    // Optional: add the resolved parameters (variant, ε, clip, ...) to a JSON object.
    // FP_ENOMEM when an account it states ran out of memory (then out is not a result: a
    // NaN ε is never written); FP_OK otherwise.
    FpStatus (*describe)(const void *state, cJSON *out);
    // 1 when key is one create() accepts in the defense's JSON object (the same list it
    // validates with), so that `fedpriv check` can tell a baseline's "params" typo from a
    // value no setting has. NULL: the defense does not say.
    int (*takes_param)(const char *key);
} DefenseOps;

// The record of a round the federation did not account (fl/fed.c): every figure NaN, no
// guarantee, one sentence saying why. A rank other than 0 (only rank 0 writes results),
// or a round before the last of a federation asked for its final account only (audits).
void privacy_record_unaccounted(PrivacyRecord *rec, const char *reason);
#define PRIVACY_UNACCOUNTED_REASON "not accounted on this rank: rank 0 accounts the federation and writes its results"
#define PRIVACY_NOT_FINAL_REASON "not accounted: only the final round's account was asked for (an audit reads no other)"

// The privacy record of a defense after rounds_done rounds, settled
// (privacy_record_settle): what the engine and every result report. FP_ENOMEM ("out of
// memory while accounting privacy") when the defense's account ran out of memory (a NaN ε,
// see DefenseOps.privacy); *rec is then not a result.
FpStatus defense_privacy(const DefenseOps *ops, const void *state, int rounds_done, PrivacyRecord *rec,
                         FpError *err);

// The aggregation of a defense, for the engine and for tests that aggregate held uploads.
// defense_gathers: 1 when the defense's server side needs the round's uploads at once
// (server_aggregate), 0 when it is a running sum (its sum_add/sum_finish, or FedAvg's).
// defense_aggregates: 1 when the defense replaces FedAvg's mean (either form).
// defense_sum_add / defense_sum_finish: one step of the running sum, the defense's or
// FedAvg's (acc[i] += weight·upload[i] in double; out = (float)acc): the one summing code
// of the engine, whether uploads arrive from threads, from other ranks or are held.
// defense_aggregate: k held uploads through the defense's form: server_aggregate, or the
// running sum over them in order (the same calls the engine makes as they arrive, so the
// result is bit for bit the engine's).
int defense_gathers(const DefenseOps *ops);
// 1 when ops states one aggregation form: not both, and a running sum whole (sum_add and
// sum_finish together). fed_create refuses a defense that does not.
int defense_aggregation_valid(const DefenseOps *ops);
int defense_aggregates(const DefenseOps *ops);
void defense_fedavg_sum_add(size_t n, double *acc, const float *upload, double weight);
void defense_sum_add(const DefenseOps *ops, const void *state, int round, int k, size_t n, double *acc,
                     const float *upload, double weight);
FpStatus defense_sum_finish(const DefenseOps *ops, void *state, int round, int k, size_t n, const double *acc,
                            float *out, FpError *err);
FpStatus defense_aggregate(const DefenseOps *ops, void *state, int round, const float *const *uploads,
                           const double *weights, const int *clients, int k, size_t n, float *out, FpError *err);

// Looks a defense up by name (defenses/registry.h defense_find, or a test's stand-ins);
// NULL when there is none of that name.
typedef const DefenseOps *(*DefenseFindFn)(const char *name);

// Plain FedAvg: uploads untouched, no privacy claimed (the "none" of every registry).
extern const DefenseOps defense_none;

#endif
