// Membership-inference targets: who is a member, how the target (and every shadow
// model) is trained, and the cache that lets several attacks of one matrix cell share
// one trained federation; their shadow and reference models (attacks/mia_reference.c).
// Used by basic_mia.c, ml_leaks.c, cs_mia.c, lira.c and rmia.c. The types they share:
// attacks/mia.h.
//
// Data plan. The experiment's training set is permuted once (RNG_ATTACK, round 0) and
// cut into disjoint pieces, in this order:
//
//   [ client data: clients × m ][ eval non-members: M ][ adversary's D_test: m ][ shadow pool ]
//
//   m   = federation.samples_per_client, or n / (4·clients) when that is 0 (so that by
//         default the target trains on a quarter of the data, as in ML-Leaks' four
//         equal parts). Client k owns piece k of the client data, cut as the engine
//         partitions (mia_split, attacks/mia.h): equal under IID, unequal under label skew.
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
//             from the last round that client took part in; or, "rounds", every upload
//             of the client as the server receives them (the client-level observer:
//             MiaTarget.rounds; the model is the last). Members: that client's
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

#include "attacks/mia.h"

typedef struct AttackCache AttackCache;

// Parses the target options from env->attack_json (the caller checks the keys).
FpStatus mia_target_parse(const AttackEnv *env, MiaTargetConfig *cfg, FpError *err);
// FP_EPARAM naming client_model when cfg asks for every upload of the client ("rounds"):
// for the attacks that read one model's outputs (ML-Leaks, RMIA).
FpStatus mia_one_model_only(const AttackEnv *env, const MiaTargetConfig *cfg, const char *attack, FpError *err);
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
// each, scored on `views` views of every query (t->n_views: LiRA's augmented queries; 1:
// the sample alone; 0: whatever the set holds, 1 when empty), on the current queries
// (another size or view count starts over): from memory, from the on-disk cache
// (env->reference_dir), or trained (in parallel workers, one thread each, so the numbers
// do not depend on the thread count) and stored there.
FpStatus mia_target_references(const AttackEnv *env, MiaTarget *t, MiaRefKind kind, int n_models, int shadow_size,
                               int views, FpError *err);
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

// Sets up the reference models' queries of a freshly built target (population order,
// query list and content hashes, the procedure's identity text) and scores the default
// population with the target model (attacks/mia_reference.c).
FpStatus mia_queries_init(const AttackEnv *env, MiaTarget *t, FpError *err);
// Frees what mia_reference.c allocated in t (queries, reference sets, shadow).
void mia_references_free(MiaTarget *t);

// The target block of a result ("target": kind, sizes, accuracies, training time,
// whether an earlier attack of the cell trained it).
void mia_target_describe(const MiaTarget *t, cJSON *result);

// A cache of trained targets for the attacks of one matrix cell.
AttackCache *attack_cache_create(void);
void attack_cache_free(AttackCache *c);

#endif
