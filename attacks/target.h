// Membership-inference targets: who is a member, how the target (and every shadow
// model) is trained, and the cache that lets several attacks of one matrix cell share
// one trained federation. Used by basic_mia.c, ml_leaks.c, cs_mia.c, lira.c and rmia.c.
//
// Data plan. The experiment's training set is permuted once (RNG_ATTACK, round 0) and
// cut into disjoint pieces, in this order:
//
//   [ client data: clients × m ][ eval non-members: M ][ adversary's D_test: m ][ shadow pool ]
//
//   m   = federation.samples_per_client, or n / (4·clients) when that is 0 (so that by
//         default the target trains on a quarter of the data, as in ML-Leaks' four
//         equal parts). Client k owns piece k of the client data.
//   M   = eval members = eval non-members (balanced): "members" in the attack config,
//         default all the target's members that the data can balance. Global target:
//         drawn from the pieces of the clients the server samples (fed_sampled_clients);
//         a drawn member whose client the defense's self-sampling then kept out of every
//         round is dropped after training, with one non-member (the set stays balanced).
//   The adversary's D_test exists for the global target when clients >= 2: CS-MIA's
//   adversary is the last client, contributing its piece (D_train) to training and
//   keeping D_test back. Its piece is never an eval member.
//   The shadow pool is what the target never saw: shadow models draw from it only.
//
// Targets ("target" in the attack config):
//   "global"  the final global model of a federation over the client data under the
//             experiment's defense (default). Members: the pieces of the clients that
//             took part in at least one round, but the adversary's (with q < 1 a client
//             the server never samples trains on nothing: its records are not members).
//   "client"  one client's model ("target_client"): as the server receives it, i.e. the
//             upload after the defense turned back into weights ("client_model":
//             "uploaded", default), or the raw local model before the defense ("raw"),
//             from the last round that client took part in. Members: that client's
//             piece. The client must be one the server samples in some round (the
//             engine's sampler, fed_sampled_clients: the participants `fedpriv train`
//             lists for the seed); by default it is the lowest-numbered such client.
//             Its shadow and reference federations replay the target federation's
//             participants round by round (FedSetup.replay_sampling), so the client
//             takes part in each of them exactly when it did in the target's and its
//             model comes from the same round.
//   "central" one model trained centrally with local_train on all the client data for
//             "central_epochs" (default rounds × local_epochs) epochs; no defense applies.
// A shadow model is trained by exactly the same procedure (same fl/ code, same defense,
// same federation settings, a fresh initialisation and seed) on data from the shadow
// pool; its member set is defined the same way (without an adversary).
//
// Per-sample features come from logits in double precision: with a = logsumexp over
// the wrong classes, φ = z_y − a = log(p_y / (1 − p_y)) (LiRA's logit-scaled
// confidence), the loss is softplus(−φ) = −log p_y and p_y = sigmoid(φ). So ranking
// by loss, by confidence or by φ is the same global-threshold attack; working from φ
// avoids the ties that float probabilities of exactly 1 would create.
//
// The in-process cache (AttackCache) is not thread-safe: the attacks of one cell run one
// after another. The on-disk reference-model cache (attacks/refcache.h) is safe for any
// number of threads and processes.
#ifndef FEDPRIV_ATTACKS_TARGET_H
#define FEDPRIV_ATTACKS_TARGET_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "attacks/attack.h"

typedef struct AttackCache AttackCache;

typedef enum { MIA_TARGET_GLOBAL = 0, MIA_TARGET_CLIENT = 1, MIA_TARGET_CENTRAL = 2 } MiaTargetKind;
typedef enum { MIA_CLIENT_UPLOADED = 0, MIA_CLIENT_RAW = 1 } MiaClientView;

// The target options every MIA accepts (they decide which trained target is shared).
typedef struct MiaTargetConfig {
    MiaTargetKind kind;
    int client;            // the target client (kind client)
    int client_defaulted;  // 1: "target_client" was not given (client: the lowest-numbered one sampled);
                           // not part of the cache key (the client is)
    MiaClientView view;
    int members;           // requested eval members (0 = as many as balance allows)
    int central_epochs;    // 0 = rounds × local_epochs
    int series;            // record the global model's confidence series (CS-MIA); not part
                           // of the cache key: a cached target without a series is retrained
} MiaTargetConfig;

// The JSON keys mia_target_parse reads; an attack lists them with its own keys.
#define MIA_TARGET_KEYS "target", "target_client", "client_model", "members", "central_epochs"

// Sizes of the data plan (computed without allocating; validate() uses them).
typedef struct MiaSizes {
    int n_data;            // training-set size of the experiment
    int clients;
    int per_client;        // m
    int n_train;           // clients × m: the data the target trains on
    int available;         // the target's members that could be evaluated
    int members;           // M (eval non-members = M)
    int adversary;         // CS-MIA's client, or -1
    int adv_out;           // size of the adversary's D_test (m or 0)
    int pool;              // shadow pool size
    int model_members;     // member-set size of a model trained on n_train samples (shadows)
    int taking_part;       // global target: clients the server samples at least once
    int members_without_participation; // drawn members whose client a defense's self-sampling kept out
                                       // of every round (dropped after training, with as many non-members)
} MiaSizes;

// Reference (shadow) models of LiRA and RMIA (attacks/mia_reference.c). Each is trained
// exactly like the target (same fl/ procedure, defense and settings, a fresh
// initialisation and seed) and scored on the target's queries: the eval candidates, then
// the population samples. Only those logits are kept (in memory and in the on-disk cache
// of attacks/refcache.h), never the weights.
//   offline  model j trains on a uniformly random shadow_size-subset of the shadow pool
//            (RNG_SHADOW round 2, client j; seed from round 1): OUT for every candidate.
//   online   models 2k and 2k+1 split the 2M candidates into two random halves
//            (RNG_SHADOW round 6, client k): each candidate is IN for exactly half of the
//            models. Model j's member set holds its half of the candidates and pool
//            samples (round 5, client j), in a random order (round 4); the rest of its
//            training set is pool samples; seed from round 3.
typedef enum { MIA_REF_OFFLINE = 0, MIA_REF_ONLINE = 1 } MiaRefKind;
#define MIA_REF_KINDS 2
// What a reference model's training set is to a query: not in it, in the model's member
// set (the target client's piece, or all of it), or trained on by another client.
enum { MIA_Q_OUT = 0, MIA_Q_IN = 1, MIA_Q_OTHER = 2 };
// Population samples queried by default (fewer when the pool is smaller).
#define MIA_POPULATION_DEFAULT 1000

typedef struct MiaRefSet {
    int size;                    // training-set size of each model (0 = none yet)
    int n, cap;                  // models held
    float *logits;               // model j, query q: logits + (j·n_query + q)·C
    unsigned char *member;       // j·n_query + q: MIA_Q_*
    double *test_accuracy;       // per model, on the shadow test set
    double seconds;              // wall time spent obtaining the n models
    int trained, loaded;         // of the n: trained in this process, read from the on-disk cache
} MiaRefSet;

// A trained target and what the attacks read from it. Owned by the cache (or by the
// attack when there is no cache: mia_target_release frees it then).
typedef struct MiaTarget {
    char key[160];               // canonical target options (cache key)
    MiaTargetConfig cfg;
    MiaSizes sz;
    int n_classes;
    uint32_t *perm;              // the permuted training set (n_data indices) all pieces point into
    const uint32_t *train_idx;   // client data (n_train); client k owns [k·m, (k+1)·m)
    uint32_t *eval_idx;          // 2M: members then non-members
    const uint32_t *adv_in;      // adversary's piece (m), or NULL
    const uint32_t *adv_out;     // adversary's D_test (m), or NULL
    const uint32_t *pool_idx;    // shadow pool (sz.pool)
    float *eval_logits;          // 2M × C: the target's logits on eval_idx
    double train_loss;           // mean CE of the target over its training data (Yeom's τ)
    double test_loss;            // mean CE on the experiment's test set
    double test_accuracy;
    double train_accuracy;       // on its training data
    double train_seconds;
    Model *model;                // the trained target (kept to score more population samples)
    Dataset *shadow_test;        // the first ≤ 2000 test samples (shadow federations evaluate on it)
    cJSON *defense;              // federated targets: the defense's resolved parameters and privacy spent
    int participated_round;      // client target: the round its model comes from (1-based), else 0
    // Confidence series (global target): rounds × n_series, samples eval_idx (2M), then
    // adv_in (m), then adv_out (m). p_y and Mentr of the global model after each round.
    int series_rounds, n_series;
    float *series_py, *series_mentr;
    // ML-Leaks / Basic-MIA shadow (one model): logits on its members then as many
    // shadow-out samples (labels from ex->train via shadow_idx).
    int shadow_size;             // 0 = not trained yet
    int shadow_n;                // members (= non-members) of the shadow set
    uint32_t *shadow_idx;        // 2·shadow_n
    float *shadow_logits;        // 2·shadow_n × C
    double shadow_seconds, shadow_test_accuracy;
    int shadow_loaded;           // 1: read from the on-disk cache
    // The reference models' queries: eval_idx (2M), then the population: the first
    // n_population of a fixed random order of the shadow pool (RNG_SHADOW round 7).
    // Population samples may be in a reference model's training set (its member codes
    // say so); they are never in the target's.
    int n_population, n_query;   // n_query = 2M + n_population
    uint32_t *pop_order;         // sz.pool
    uint32_t *query_idx;         // n_query
    uint64_t *query_content;     // a hash of each query's features and label (cache check)
    float *pop_logits;           // n_population × C: the target's logits on the population
    MiaRefSet refs[MIA_REF_KINDS];
    char *procedure;             // identity text of the reference models' training procedure
    int acquisitions;            // how many attacks used it (> 1: shared through the cache)
    struct MiaTarget *next;
} MiaTarget;

// Parses the target options from env->attack_json (the caller checks the keys).
FpStatus mia_target_parse(const AttackEnv *env, MiaTargetConfig *cfg, FpError *err);
// Plan sizes for this experiment; FP_EPARAM names the JSON path when the data are too few.
FpStatus mia_sizes(const AttackEnv *env, const MiaTargetConfig *cfg, MiaSizes *sz, FpError *err);
// The shadow training-set size an attack asks for ("shadow_size", 0 = the target's
// n_train), checked against the pool: need_out = 1 also needs as many shadow-out
// samples as the shadow has members (ML-Leaks, Basic-MIA). Too large → FP_EPARAM.
FpStatus mia_shadow_size(const AttackEnv *env, const MiaSizes *sz, long long requested, int need_out, int *size,
                         FpError *err);

// The trained target for cfg: from env->cache when there, else trained (and stored in
// the cache when there is one). Release with mia_target_release.
FpStatus mia_target_acquire(const AttackEnv *env, const MiaTargetConfig *cfg, MiaTarget **out, FpError *err);
void mia_target_release(const AttackEnv *env, MiaTarget *t);
// Trains (once; cached on t) the one shadow model of ML-Leaks / Basic-MIA on shadow_size
// pool samples; its shadow-out set follows in the pool. From the on-disk cache when
// env->reference_dir holds it.
FpStatus mia_target_shadow(const AttackEnv *env, MiaTarget *t, int shadow_size, FpError *err);
// Makes the queries cover at least n_population population samples (the target scores
// them). Growing past what the reference models were scored on drops them: they are
// obtained again (from the on-disk cache only if an entry covers the new queries).
FpStatus mia_target_population(const AttackEnv *env, MiaTarget *t, int n_population, FpError *err);
// Ensures t->refs[kind] holds at least n_models reference models of shadow_size samples
// each (another size starts over), scored on the current queries: from memory, from the
// on-disk cache (env->reference_dir), or trained (in parallel workers, one thread each,
// so the numbers do not depend on the thread count) and stored there.
FpStatus mia_target_references(const AttackEnv *env, MiaTarget *t, MiaRefKind kind, int n_models, int shadow_size,
                               FpError *err);
// The online design's requirements (validate): an even number of models, a member set of
// shadow_size samples that holds half the candidates, a pool that fills the rest.
FpStatus mia_online_check(const AttackEnv *env, const MiaTargetConfig *cfg, const MiaSizes *sz, int n_models,
                          int shadow_size, FpError *err);
// The "reference_models" block of a result (kind, models, size, queries, mean test
// accuracy, floats kept) and, in its "run" object, how many were trained now, read from
// the disk cache or reused from an earlier attack (counts since *before, a snapshot of
// the set taken when the attack started).
void mia_references_describe(const MiaTarget *t, MiaRefKind kind, int n_models, const MiaRefSet *before,
                             cJSON *result);

// A 64-bit seed (below 2^53, exact in JSON) for a derived model: shadow j, an attack model.
uint64_t mia_derived_seed(uint64_t seed, RngPurpose purpose, uint32_t round, uint32_t client);

// Per-sample features from one row of logits z (C classes), true label y.
double mia_phi(const float *z, int n_classes, int y);   // log(p_y / (1 − p_y))
double mia_loss_of_phi(double phi);                     // −log p_y = softplus(−φ)
double mia_mentr(const float *z, int n_classes, int y); // Song & Mittal's modified entropy
void mia_top_probs(const float *z, int n_classes, int k, float *out); // softmax, sorted descending, first k (<= 64)
void mia_top_logodds(const float *z, int n_classes, int k, float *out); // log(p/(1-p)) of those, from logits

// Logits (n × C) of model m on samples idx of d, threads in parallel (CPU).
FpStatus mia_logits(Model *m, const Dataset *d, const uint32_t *idx, int n, int threads, float *logits, FpError *err);

// An attack model from the model zoo (`mlp`, one hidden ReLU layer, 2 softmax outputs)
// trained with local_train on feature rows (dim floats each, label 1 = member); the
// score of each test row is its member log-odds z_1 − z_0 (P(member) ≥ ½ ⇔ score ≥ 0).
typedef struct MiaMlpConfig {
    int hidden, epochs, batch_size;
    double lr, momentum, weight_decay;
    int standardize;       // z-score features with the training rows' mean and std
} MiaMlpConfig;
FpStatus mia_mlp_scores(int dim, const float *x_train, const int32_t *y_train, int n_train, const float *x_test,
                        int n_test, const MiaMlpConfig *cfg, uint64_t seed, uint32_t attack_id, double *scores,
                        FpError *err);
// Reads "attack_model": {"hidden", "epochs", "batch_size", "lr", "momentum", "weight_decay",
// "standardize"} over the defaults in cfg.
FpStatus mia_mlp_parse(const cJSON *attack_json, const char *path, MiaMlpConfig *cfg, FpError *err);
cJSON *mia_mlp_json(const MiaMlpConfig *cfg);

// The metrics every MIA reports, into result: on the balanced eval set (labels[i] = 1
// for members), from the scores (higher = more likely a member) and the attack's own
// decisions (1 = member; NULL: decide score >= decision_threshold).
//   auc, tpr_at_fpr {"0.01", "0.001", "0"} with the rule stated, best_balanced_accuracy,
//   best_advantage; balanced_accuracy, precision, recall, advantage, tpr, fpr at the
//   decision rule (described by rule); roc {fpr, tpr} thinned to <= 200 points that
//   keep the low-FPR region; members / non_members.
FpStatus mia_report(cJSON *result, const double *scores, const int32_t *labels, int n, const unsigned char *decisions,
                    double decision_threshold, const char *rule, FpError *err);
// The confusion metrics of decisions (1 = member) against labels (1 = member): tp, fp,
// tn, fn, tpr, fpr, balanced_accuracy, precision (0 when nothing is predicted a member),
// recall, advantage = tpr − fpr.
cJSON *mia_decision_json(const unsigned char *decisions, const int32_t *labels, int n);
// The threshold τ with the best balanced accuracy of "member iff score >= τ" on a
// labelled set (τ halfway between the last score taken and the next lower one);
// *best_accuracy gets that accuracy.
double mia_best_threshold(const double *scores, const int32_t *labels, int n, double *best_accuracy);

// The scores of LiRA and RMIA from per-sample values (what lira.c and rmia.c compute
// after reading their reference models; pure functions, exposed for the tests).
// Model j's value on query q is at [j·Q + q], its member code (MIA_Q_*) likewise.
//
// LiRA (attacks/lira.c): phi_obs[i] the target's φ on candidate i, phi_refs the
// reference models' (Q = n). Offline: z = (φ_obs − μ_out)/σ_out; online: log N(φ_obs;
// μ_in, σ_in²) − log N(φ_obs; μ_out, σ_out²); fixed_variance: one σ, the root of the
// mean of the per-candidate variances. *pooled_sigma gets that σ. FP_EPARAM when a
// candidate is not OUT for every model (offline) or IN for exactly half (online).
FpStatus mia_lira_scores(const double *phi_obs, const double *phi_refs, const unsigned char *member, int n, int N,
                         int online, int fixed_variance, double *score, double *pooled_sigma, FpError *err);
// RMIA (attacks/rmia.c): lp_target[q] = log Pr(q | θ) for the n candidates, then the Z
// population samples (Q = n + Z); lp_refs the reference models'. Out: score[i] =
// Score_MIA of candidate i, log_ratio[i] = log(Pr(x|θ)/Pr(x)), *population_used = the z
// that some model did not train on.
FpStatus mia_rmia_scores(const double *lp_target, const double *lp_refs, const unsigned char *member, int n, int Z,
                         int N, int online, double a, double gamma, double *score, double *log_ratio,
                         int *population_used, FpError *err);

// The result's "run" object (created when missing): what depends on the run rather than
// on the configuration, such as where reference models came from. Like timings, it may
// differ between an uninterrupted run and a resumed one (runner/matrix.h).
cJSON *mia_run_object(cJSON *result);

// The target block of a result ("target": kind, sizes, accuracies, training time,
// whether an earlier attack of the cell trained it).
void mia_target_describe(const MiaTarget *t, cJSON *result);

// A cache of trained targets for the attacks of one matrix cell.
AttackCache *attack_cache_create(void);
void attack_cache_free(AttackCache *c);

#endif
