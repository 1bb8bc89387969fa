// The membership-inference family's shared types and procedures: the target options,
// the data plan's sizes, the trained target and its reference models (MiaTarget), the
// one training procedure, per-sample features, the metrics every MIA reports and the
// LiRA and RMIA scores. Where each lives:
//   attacks/mia_train.c      the training procedure (targets, shadows, reference models)
//   attacks/mia_features.c   features from logits, logits of a model, the attack MLP
//   attacks/mia_metrics.c    ROC metrics and their intervals, applicability, the headline
//   attacks/mia_reference.c  shadow and reference models, their queries (attacks/target.h)
//   attacks/target.c         the data plan, the target and the cache (attacks/target.h)
// and the attacks basic_mia.c, ml_leaks.c, cs_mia.c, lira.c and rmia.c, which include
// attacks/target.h. The data plan and the target kinds: attacks/target.h.
#ifndef FEDPRIV_ATTACKS_MIA_H
#define FEDPRIV_ATTACKS_MIA_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "attacks/attack.h"

typedef enum { MIA_TARGET_GLOBAL = 0, MIA_TARGET_CLIENT = 1, MIA_TARGET_CENTRAL = 2 } MiaTargetKind;
// What of the client target the attacker sees: its last upload as the server receives it,
// its local model before the defense, or every upload it made (the client-level observer:
// the server's view of one client over every round it took part in).
typedef enum { MIA_CLIENT_UPLOADED = 0, MIA_CLIENT_RAW = 1, MIA_CLIENT_ROUNDS = 2 } MiaClientView;

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
    int round_statistic;   // client_model "rounds": what each upload gives a sample (MiaRoundStatistic);
                           // not part of the cache key (the target is the same)
} MiaTargetConfig;

// The JSON keys mia_target_parse reads; an attack lists them with its own keys.
#define MIA_TARGET_KEYS "target", "target_client", "client_model", "round_statistic", "members", "central_epochs"

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
    int views;                   // views per query each model was scored on (1: the sample alone)
    int n, cap;                  // models held
    float *logits;               // model j, query q, view v: logits + ((j·n_query + q)·views + v)·C
    unsigned char *member;       // j·n_query + q: MIA_Q_*
    double *test_accuracy;       // per model, on the shadow test set
    double seconds;              // wall time spent obtaining the n models
    int trained, loaded;         // of the n: trained in this process, read from the on-disk cache
} MiaRefSet;

// The client target's every upload as the server received it (client_model "rounds"):
// n uploads, turned back into weights, from rounds round[0..n) (1-based, increasing);
// upload r's weights at params + r·n_params, and the global model the server sent the
// client that round (what the upload started from, which the server knows) at
// start + r·n_params.
typedef struct MiaRounds {
    int n;
    int *round;
    float *params, *start;
    size_t n_params;
} MiaRounds;

// A trained target and what the attacks read from it. Owned by the cache (or by the
// attack when there is no cache: mia_target_release frees it then).
typedef struct MiaTarget {
    char key[160];               // canonical target options (cache key)
    MiaTargetConfig cfg;
    MiaSizes sz;
    int n_classes;
    uint32_t *perm;              // the permuted training set (n_data indices) all pieces point into
    const uint32_t *train_idx;   // client data (n_train); client k owns [bounds[k], bounds[k+1])
    int *bounds;                 // clients + 1: the pieces of train_idx (mia_split on the run's seed)
    char partition[16];          // federation.partition as the engine names it
    uint32_t *eval_idx;          // 2M: members then non-members
    int labels_matched;          // non-members matched to the members' label counts (label skew)
    int *eval_label_counts;      // 2 × n_classes: the members' label counts, then the non-members'; or NULL
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
    MiaRounds rounds;            // client_model "rounds": the client's every upload (model = the last one)
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
    int n_views, view_shift;     // the data's query views (mia_query_views): what "augment" scores
    uint32_t *pop_order;         // sz.pool
    uint32_t *query_idx;         // n_query
    uint64_t *query_content;     // a hash of each query's features and label (cache check)
    float *pop_logits;           // n_population × C: the target's logits on the population
    MiaRefSet refs[MIA_REF_KINDS];
    char *procedure;             // identity text of the reference models' training procedure
    int acquisitions;            // how many attacks used it (> 1: shared through the cache)
    struct MiaTarget *next;
} MiaTarget;

// ---------------------------------------------------------------------------------
// Training (attacks/mia_train.c): the one procedure of every target, shadow and
// reference model.

// A 64-bit seed (below 2^53, exact in JSON) for a derived model: shadow j, an attack model.
uint64_t mia_derived_seed(uint64_t seed, RngPurpose purpose, uint32_t round, uint32_t client);

// The clients' pieces of a training list. Every target, shadow and reference model
// trains on a list of n samples cut into federation.clients pieces: client k owns
// positions [bounds[k], bounds[k+1]) (bounds has clients + 1 entries, bounds[0] = 0,
// bounds[clients] = n). mia_split makes them as the engine partitions its data
// (fl/fed.c, datasets/partition.c), on the labels of the list and the model's seed (the
// RNG_PARTITION stream the engine draws for that seed), and reorders the list in place so
// that each piece is contiguous:
//   "iid"        the list is already in random order: equal contiguous pieces k·n/K, the
//                list unchanged (no draw);
//   "dirichlet"  partition_dirichlet(labels, n, classes, K, federation.alpha);
//   "shards"     partition_shards(labels, n, K, federation.shards_per_client);
//   "natural"    FP_EPARAM: only power-load brings a natural split, and it is no
//                classification dataset.
// A partitioner's refusal (too few samples) comes back naming federation.partition.
FpStatus mia_split(const Experiment *ex, uint32_t *idx, int n, uint64_t seed, int *bounds, FpError *err);

// The member range [*first, *first + count) of a model trained on n samples whose pieces
// are bounds (NULL: equal pieces k·n/clients, the IID split): the target client's piece,
// or all of them.
int mia_member_range(const MiaTargetConfig *cfg, const int *bounds, int clients, int n, int *first);

void mia_rounds_free(MiaRounds *r);

// Logits of the rounds' models on the views of samples idx of d, in the layout of query
// views with MIA_ROUND_ROWS·R·views of them: sample i, round r, model s (0: the upload,
// 1: the global model it started from), view v at (((i·R + r)·2 + s)·views + v)·C.
// m is the model whose parameters are set to each one in turn and left at the last upload.
#define MIA_ROUND_ROWS 2
FpStatus mia_rounds_logits(Model *m, const MiaRounds *rounds, const Dataset *d, const uint32_t *idx, int n,
                           int views, int shift, int threads, float *logits, FpError *err);
// The client-level observer's statistic from those logits (R rounds, views each; labels
// y[i]), for sample i, round r and view v, at out[(i·R + r)·views + v]:
//   gain (MIA_ROUND_GAIN, "round_statistic": "gain", the default): φ(upload) − φ(start),
//        how much the client's training in round r raised the sample's logit-scaled
//        confidence over the model the server sent it. The server knows both models, so
//        the difference removes what the shared global model already knew of the sample
//        (its difficulty, the other clients' contributions) and leaves what the client's
//        own data did: the update-based signal of Nasr et al. (S&P'19, the passive
//        observer of the updates) in the loss form, for every upload;
//   MIA_ROUND_CONFIDENCE ("confidence"): φ(upload), each upload's own confidence. Where
//        the client took part before, the start already holds its data and the gain
//        shrinks; the confidence keeps it.
typedef enum { MIA_ROUND_GAIN = 0, MIA_ROUND_CONFIDENCE = 1 } MiaRoundStatistic;
void mia_rounds_phi(const float *logits, int n, int R, int views, int n_classes, const int32_t *y,
                    MiaRoundStatistic stat, double *out);

// A request to record the global model's confidence series (CS-MIA): after each round,
// p_y and Mentr of samples idx (n of them) into py and mentr (rounds × n each, the
// caller's arrays).
typedef struct MiaSeries {
    const uint32_t *idx;
    int n, rounds;
    float *py, *mentr;
} MiaSeries;

// Trains a model of the experiment's architecture on idx[0..n) as cfg says, by fl/
// (fed_run with the pieces idx[bounds[k], bounds[k+1]) as the partition, bounds NULL:
// equal pieces, or local_train for the central target). fresh: a new initialisation
// from seed (shadow and reference models); else the experiment's initial model (the
// target). series: optional confidence-series recording
// (global target; NULL: none). *round_out: the client target's round. *defense_out (when
// not NULL): the defense's resolved parameters and the privacy spent. participations
// (when not NULL, federated): the rounds each client took part in. rounds_out (client
// target, client_model "rounds"; NULL otherwise): every upload of the client, the
// returned model being the last.
FpStatus mia_train_model(const AttackEnv *env, const MiaTargetConfig *cfg, const uint32_t *idx, int n,
                         const int *bounds, uint64_t seed, int fresh, const Dataset *test, int quiet, int threads,
                         const MiaSeries *series, Model **out, int *round_out, cJSON **defense_out,
                         int *participations, MiaRounds *rounds_out, FpError *err);

// ---------------------------------------------------------------------------------
// Features and the attack model (attacks/mia_features.c)

// Per-sample features from one row of logits z (C classes), true label y.
double mia_phi(const float *z, int n_classes, int y);   // log(p_y / (1 − p_y))
double mia_loss_of_phi(double phi);                     // −log p_y = softplus(−φ)
double mia_mentr(const float *z, int n_classes, int y); // Song & Mittal's modified entropy
void mia_top_probs(const float *z, int n_classes, int k, float *out); // softmax, sorted descending, first k (<= 64)
void mia_top_logodds(const float *z, int n_classes, int k, float *out); // log(p/(1-p)) of those, from logits

// Logits (n × C) of model m on samples idx of d, threads in parallel (CPU).
FpStatus mia_logits(Model *m, const Dataset *d, const uint32_t *idx, int n, int threads, float *logits, FpError *err);

// Augmented query views (LiRA's augmented queries: Carlini et al. 2022, §VI-A, and
// their code, which queries every image mirrored and shifted). For image data (height
// and width >= MIA_VIEW_MIN_SIDE) a query is MIA_VIEWS = 18 views: the sample and its
// left-right mirror, each at the 9 shifts (dy, dx) ∈ {−s, 0, s}² with reflection
// padding, s = (w + 4) / 8 pixels (4 on 28- and 32-px images); view 0 is the sample
// itself. Other data: one view. mia_query_views returns the count and sets *shift.
#define MIA_VIEWS 18
#define MIA_VIEW_MIN_SIDE 8
int mia_query_views(const Dataset *d, int *shift);
// Logits (n × views × C: sample i's view v at (i·views + v)·C) of model m on the views of
// samples idx of d; views = 1 is mia_logits.
FpStatus mia_logits_views(Model *m, const Dataset *d, const uint32_t *idx, int n, int views, int shift, int threads,
                          float *logits, FpError *err);

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
//   auc with auc_interval (Hanley & McNeil, 95%), tpr_at_fpr {"0.01", "0.001", "0"} with
//   tpr_at_fpr_interval (Clopper–Pearson, 95%, of the members found at that point) and
//   the rule stated, best_balanced_accuracy, best_advantage; balanced_accuracy,
//   precision, recall, advantage, tpr, fpr at the decision rule (described by rule); roc
//   {fpr, tpr} thinned to <= 200 points that keep the low-FPR region; members /
//   non_members.
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
// LiRA (attacks/lira.c): each candidate i is queried in A views (A = how->n_aug: the
// sample and its augmented copies); phi_obs[i·A + a] is the target's φ on view a of
// candidate i, phi_refs[(j·n + i)·A + a] reference model j's, member[j·n + i] its code.
// Per candidate, view and hypothesis a Gaussian is fitted to the reference models' φ.
//   offline, one-sided: z_a = (φ_obs − μ_out)/σ_out, score = the mean of z_a over the
//            views (Stouffer's combination up to the factor √A: the same ranking);
//   offline, two-sided (the reference code's): score = −mean_a log N(φ_obs; μ_out, σ_out²),
//            large when φ_obs is far from the OUT values on either side;
//   online:  score = mean_a [log N(φ_obs; μ_in, σ_in²) − log N(φ_obs; μ_out, σ_out²)].
// fixed_variance: one σ, the root of the mean of the per-candidate (and view) variances;
// *pooled_sigma gets that σ. FP_EPARAM when a candidate is not OUT for every model
// (offline) or IN for half (online, at least one IN and one OUT).
typedef struct MiaLiraScoring {
    int online;            // IN and OUT Gaussians, likelihood ratio; else OUT only
    int fixed_variance;    // one σ for every candidate, view and hypothesis
    int two_sided;         // offline: the reference code's two-sided score instead of z
    int n_aug;             // views per candidate (1: the sample alone)
} MiaLiraScoring;
FpStatus mia_lira_scores(const double *phi_obs, const double *phi_refs, const unsigned char *member, int n, int N,
                         const MiaLiraScoring *how, double *score, double *pooled_sigma, FpError *err);
// RMIA (attacks/rmia.c): lp_target[q] = log Pr(q | θ) for the n candidates, then the Z
// population samples (Q = n + Z); lp_refs the reference models'. Out: score[i] =
// Score_MIA of candidate i, log_ratio[i] = log(Pr(x|θ)/Pr(x)), *population_used = the z
// that some model did not train on.
FpStatus mia_rmia_scores(const double *lp_target, const double *lp_refs, const unsigned char *member, int n, int Z,
                         int N, int online, double a, double gamma, double *score, double *log_ratio,
                         int *population_used, FpError *err);

// ---------------------------------------------------------------------------------
// Results (attacks/mia_metrics.c)

// The result's "run" object (created when missing): what depends on the run rather than
// on the configuration, such as where reference models came from. Like timings, it may
// differ between an uninterrupted run and a resumed one (runner/matrix.h).
cJSON *mia_run_object(cJSON *result);

// Applicability and the headline, after mia_report filled result. The reference is the
// same attack against the federation without any defense: this run when the defense is
// "none", a matrix's "none" cell when the runner hands it over (AttackEnv.reference);
// otherwise undecided ("applicable": null, with the reason). The attack is at chance
// there, and so "not applicable" ("applicable": false), when the reference's AUC
// interval holds 0.5 and its TPR-at-1%-FPR interval holds 0.01: nothing a defense could
// protect was found, and its figures under a defense are no evidence of protection.
// Unless env->quiet, one line goes to stderr:
//   NAME: AUC 0.835 [0.78, 0.89], TPR 24.0% [16.0%, 33.6%] at 1% FPR, 7.0% [2.9%, 13.9%] at 0.1% FPR (100 members, 100 non-members)
// and, when not applicable, a second line saying so.
void mia_conclude(const AttackEnv *env, const char *name, cJSON *result);

#endif
