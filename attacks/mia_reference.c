// Shadow and reference models of the membership attacks (attacks/target.h): the one
// ML-Leaks / Basic-MIA shadow, and the reference sets of LiRA and RMIA (offline: OUT for
// every candidate; online: each candidate IN for exactly half of the models). Every
// model is trained by mia_train_model, i.e. by fl/, exactly like the target, and kept
// only as its logits on the queries. With env->reference_dir those logits also go to the
// on-disk cache (attacks/refcache.h), keyed by the model's identity: the procedure (the
// text built once per target here), the training indices and their content, the seed.
// So LiRA and RMIA over the same reference models, later cells of a matrix and reruns
// train nothing that was trained before.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attacks/refcache.h"
#include "attacks/target.h"
#include "core/clock.h"
#include "core/progress.h"
#include "core/version.h"

static const char *const ref_kind_names[MIA_REF_KINDS] = {"offline", "online"};

// ---------------------------------------------------------------------------------
// Identity

// A hash of sample i's features and label: a query's or a training sample's content.
static uint64_t sample_content(const Dataset *d, uint32_t i) {
    size_t ss = dataset_sample_size(d);
    uint64_t h = refcache_hash(REFCACHE_HASH_START, d->x + (size_t)i * ss, ss * sizeof(float));
    int32_t y = d->y ? d->y[i] : -1;
    return refcache_hash(h, &y, sizeof y);
}

// The training procedure every shadow and reference model of t shares: the code's
// version, the backend (and the CPU's BLAS kernels), the data set, the architecture, the
// federation settings, the defense as configured and the target's kind. The seed and the
// training data are added per model (reference_identity).
static char *procedure_text(const AttackEnv *env, const MiaTarget *t) {
    const Experiment *ex = env->ex;
    const Model *m = ex->model;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", "fedpriv " FEDPRIV_VERSION);
    cJSON_AddStringToObject(o, "backend", ex->backend->name);
    if (ex->backend->device == DEVICE_CPU)   // other GEMM kernels sum in another order
        cJSON_AddStringToObject(o, "blas_kernels", backend_cpu_blas_kernels());
    cJSON *d = cJSON_AddObjectToObject(o, "dataset");
    cJSON_AddStringToObject(d, "name", ex->dataset_name);
    cJSON_AddNumberToObject(d, "train_samples", ex->train->n);
    cJSON_AddNumberToObject(d, "test_samples", ex->test->n);
    cJSON_AddNumberToObject(d, "shadow_test_samples", t->shadow_test->n);
    cJSON *mj = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(mj, "name", m->cfg.name);
    cJSON_AddNumberToObject(mj, "init", m->cfg.init);
    cJSON *hid = cJSON_AddArrayToObject(mj, "hidden");
    for (int i = 0; i < m->cfg.n_hidden; i++)
        cJSON_AddItemToArray(hid, cJSON_CreateNumber(m->cfg.hidden[i]));
    cJSON_AddNumberToObject(mj, "bn_momentum", m->cfg.bn_momentum);
    cJSON *layers = cJSON_AddArrayToObject(mj, "layers");
    for (int i = 0; i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        cJSON *e = cJSON_CreateArray();
        cJSON_AddItemToArray(e, cJSON_CreateString(l->name));
        cJSON_AddItemToArray(e, cJSON_CreateNumber((double)l->count));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(l->kind));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(l->trainable));
        cJSON_AddItemToArray(layers, e);
    }
    FedConfig fc = ex->fed;
    fc.samples_per_client = 0; // as mia_train_model runs it: the plan's pieces are the partition
    cJSON_AddItemToObject(o, "federation", fed_config_to_json(&fc));
    if (ex->defense_json)
        cJSON_AddItemToObject(o, "defense", cJSON_Duplicate(ex->defense_json, 1));
    else
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "defense"), "name",
                                ex->defense ? ex->defense->name : "none");
    cJSON *tg = cJSON_AddObjectToObject(o, "target");
    cJSON_AddNumberToObject(tg, "kind", t->cfg.kind);
    cJSON_AddNumberToObject(tg, "client", t->cfg.client);
    cJSON_AddNumberToObject(tg, "view", t->cfg.view);
    cJSON_AddNumberToObject(tg, "central_epochs", t->cfg.central_epochs);
    if (t->cfg.kind == MIA_TARGET_CLIENT) // its federations replay the target's participants
        cJSON_AddNumberToObject(tg, "sampling_seed", (double)ex->seed);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

// One model's identity: the procedure, its training list (order included: it decides
// the clients' pieces) by indices and content, its pieces when they are not the IID
// split's equal ones, and its seed.
static char *reference_identity(const MiaTarget *t, const Dataset *d, const uint32_t *idx, int n, const int *bounds,
                                int clients, uint64_t seed, int views, int shift) {
    uint64_t hi = refcache_hash(REFCACHE_HASH_START, idx, sizeof(uint32_t) * (size_t)n), hc = REFCACHE_HASH_START;
    if (bounds && t->cfg.kind != MIA_TARGET_CENTRAL && strcmp(t->partition, "iid") != 0) // IID: the key it always had
        hi = refcache_hash(hi, bounds, sizeof(int) * ((size_t)clients + 1));
    for (int i = 0; i < n; i++) {
        uint64_t c = sample_content(d, idx[i]);
        hc = refcache_hash(hc, &c, sizeof c);
    }
    size_t len = strlen(t->procedure) + 200;
    char *s = malloc(len), qv[64] = ""; // the views only when there are several: one view is the plain entry
    if (views > 1)
        snprintf(qv, sizeof qv, ",\"query_views\":{\"views\":%d,\"shift\":%d}", views, shift);
    if (s)
        snprintf(s, len, "{\"procedure\":%s,\"train\":{\"samples\":%d,\"indices\":\"%016llx\",\"content\":\"%016llx\"},"
                 "\"seed\":%llu%s}", t->procedure, n, (unsigned long long)hi, (unsigned long long)hc,
                 (unsigned long long)seed, qv);
    return s;
}

// ---------------------------------------------------------------------------------
// One model: from the on-disk cache, or trained, scored and stored

typedef struct RefRequest {
    const uint32_t *train;        // training list
    int n_train;
    const int *bounds;            // its clients' pieces (mia_split; NULL: equal pieces)
    uint64_t seed;
    const uint32_t *query;        // samples to score
    const uint64_t *content;      // their content hashes
    int n_query;
    unsigned char *member;        // in: the plan's MIA_Q_* per query; out: corrected for clients
                                  // that never took part (or read from the cache); may be NULL
    int views, shift;             // query views (mia_query_views); 0 = 1
    float *logits;                // out: n_query × views × C
    double test_accuracy;         // out
    int loaded;                   // out: 1 when read from the on-disk cache
} RefRequest;

// A client that the server never sampled (or whose self-sampling kept it out of every
// round) trained on nothing: its piece of the training list is OUT for this model
// (client k holds positions [bounds[k], bounds[k+1]), as mia_train_model splits it).
static FpStatus drop_untrained(int n_data, RefRequest *rq, int K, const int *took_part, FpError *err) {
    int idle = 0;
    for (int k = 0; k < K; k++)
        idle += took_part[k] == 0;
    if (!idle)
        return FP_OK;
    unsigned char *untrained = calloc((size_t)n_data, 1);
    if (!untrained)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    for (int k = 0; k < K; k++)
        if (!took_part[k])
            for (long long i = rq->bounds ? rq->bounds[k] : (long long)k * rq->n_train / K;
                 i < (rq->bounds ? rq->bounds[k + 1] : (long long)(k + 1) * rq->n_train / K); i++)
                untrained[rq->train[i]] = 1;
    for (int q = 0; q < rq->n_query; q++)
        if (untrained[rq->query[q]])
            rq->member[q] = MIA_Q_OUT;
    free(untrained);
    return FP_OK;
}

static FpStatus reference_obtain(const AttackEnv *env, const MiaTarget *t, RefRequest *rq, int threads,
                                 FpError *err) {
    const Experiment *ex = env->ex;
    int V = rq->views > 1 ? rq->views : 1, C = t->n_classes, row = V * C; // an entry's row: every view's logits
    char *id = NULL;
    rq->loaded = 0;
    if (env->reference_dir && t->procedure) {
        id = reference_identity(t, ex->train, rq->train, rq->n_train, rq->bounds, ex->fed.clients, rq->seed, V,
                                V > 1 ? rq->shift : 0);
        if (!id)
            return fp_fail(err, FP_ENOMEM, "out of memory");
        FpError lerr = {0};
        int hit = 0;
        FpStatus ls = refcache_load(env->reference_dir, id, rq->query, rq->content, rq->n_query, row, rq->logits,
                                    rq->member, &rq->test_accuracy, &hit, &lerr);
        if (ls == FP_ENOMEM) {
            free(id);
            if (err)
                *err = lerr;
            return ls;
        }
        // A damaged entry is retrained and overwritten, and always said (quiet or not: it
        // means the run folder was changed by something other than fedpriv).
        if (ls != FP_OK)
            fp_print_line(stderr, "mia: reference-model cache: %s; training the model again", lerr.msg);
        if (hit) {
            free(id);
            rq->loaded = 1;
            return FP_OK;
        }
    }
    Model *m = NULL;
    int K = ex->fed.clients, *took_part = t->cfg.kind == MIA_TARGET_CENTRAL ? NULL : calloc((size_t)K, sizeof(int));
    FpStatus st = t->cfg.kind != MIA_TARGET_CENTRAL && !took_part ? fp_fail(err, FP_ENOMEM, "out of memory") : FP_OK;
    // client_model "rounds": the model's every upload of the client and the global model
    // it started from, scored as 2R groups of V / 2R views (mia_rounds_logits). The federation replays the target's participants,
    // so the client uploads in the same rounds; only a defense's self-sampling could
    // differ, and then the rounds do not line up.
    int R = t->cfg.view == MIA_CLIENT_ROUNDS ? t->rounds.n : 0;
    MiaRounds rounds = {0};
    if (st == FP_OK)
        st = mia_train_model(env, &t->cfg, rq->train, rq->n_train, rq->bounds, rq->seed, 1, t->shadow_test, 1, threads,
                             NULL, &m, NULL, NULL, took_part, R ? &rounds : NULL, err);
    if (st == FP_OK && R &&
        (rounds.n != R || memcmp(rounds.round, t->rounds.round, sizeof(int) * (size_t)R) != 0))
        st = fp_fail(err, FP_EPARAM, "%s.client_model: client %d uploaded in %d rounds of a reference federation and in "
                     "%d of the target's: the defense's self-sampling decides them, and \"rounds\" needs the same "
                     "rounds in every model", env->path, t->cfg.client, rounds.n, R);
    if (st == FP_OK && took_part && rq->member)
        st = drop_untrained(ex->train->n, rq, K, took_part, err);
    free(took_part);
    if (st == FP_OK)
        st = R ? mia_rounds_logits(m, &rounds, ex->train, rq->query, rq->n_query, V / (MIA_ROUND_ROWS * R), rq->shift,
                                   threads,
                                   rq->logits, err)
               : mia_logits_views(m, ex->train, rq->query, rq->n_query, V, rq->shift, threads, rq->logits, err);
    mia_rounds_free(&rounds);
    if (st == FP_OK)
        st = model_evaluate(m, t->shadow_test, threads, &rq->test_accuracy, NULL, NULL, err);
    model_free(m);
    if (st == FP_OK && id) { // a cache that cannot be written costs time, not correctness
        FpError werr = {0};
        if (refcache_store(env->reference_dir, id, rq->query, rq->content, rq->n_query, row, rq->logits, rq->member,
                           rq->test_accuracy, &werr) != FP_OK && !env->quiet)
            fprintf(stderr, "mia: reference-model cache: %s (going on without it)\n", werr.msg);
    }
    free(id);
    return st;
}

// ---------------------------------------------------------------------------------
// Queries and the population

static void content_of(const Dataset *d, const uint32_t *idx, int n, uint64_t *out) {
    for (int i = 0; i < n; i++)
        out[i] = sample_content(d, idx[i]);
}

// Grows the query list to 2M + n_population and scores the new population samples with
// the target.
static FpStatus queries_grow(const AttackEnv *env, MiaTarget *t, int n_population, FpError *err) {
    const Experiment *ex = env->ex;
    int M2 = 2 * t->sz.members, C = t->n_classes, old = t->n_population, nq = M2 + n_population;
    uint32_t *q = realloc(t->query_idx, sizeof(uint32_t) * (size_t)nq);
    if (q)
        t->query_idx = q;
    uint64_t *c = realloc(t->query_content, sizeof(uint64_t) * (size_t)nq);
    if (c)
        t->query_content = c;
    float *pl = realloc(t->pop_logits, sizeof(float) * (size_t)(n_population ? n_population : 1) * C);
    if (pl)
        t->pop_logits = pl;
    if (!q || !c || !pl)
        return fp_fail(err, FP_ENOMEM, "out of memory for %d population samples", n_population);
    if (old == 0 && t->n_query == 0) {
        memcpy(q, t->eval_idx, sizeof(uint32_t) * (size_t)M2);
        content_of(ex->train, q, M2, c);
    }
    memcpy(q + M2 + old, t->pop_order + old, sizeof(uint32_t) * (size_t)(n_population - old));
    content_of(ex->train, q + M2 + old, n_population - old, c + M2 + old);
    FP_TRY(mia_logits(t->model, ex->train, q + M2 + old, n_population - old, ex->threads, pl + (size_t)old * C, err));
    t->n_population = n_population;
    t->n_query = nq;
    return FP_OK;
}

FpStatus mia_queries_init(const AttackEnv *env, MiaTarget *t, FpError *err) {
    const Experiment *ex = env->ex;
    int P = t->sz.pool;
    t->pop_order = fp_malloc(sizeof(uint32_t) * (size_t)(P ? P : 1), err);
    if (!t->pop_order)
        return FP_ENOMEM;
    memcpy(t->pop_order, t->pool_idx, sizeof(uint32_t) * (size_t)P);
    RngStream rs = rng_stream(ex->seed, RNG_SHADOW, 7, 0);
    rng_shuffle_u32(&rs, t->pop_order, (uint32_t)P);
    t->n_views = mia_query_views(ex->train, &t->view_shift);
    t->procedure = procedure_text(env, t);
    if (!t->procedure)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    return queries_grow(env, t, P < MIA_POPULATION_DEFAULT ? P : MIA_POPULATION_DEFAULT, err);
}

FpStatus mia_target_population(const AttackEnv *env, MiaTarget *t, int n_population, FpError *err) {
    if (n_population <= t->n_population)
        return FP_OK;
    if (n_population > t->sz.pool)
        return fp_fail(err, FP_EPARAM, "%s.population: %d samples asked for, the shadow pool holds %d", env->path,
                       n_population, t->sz.pool);
    FP_TRY(queries_grow(env, t, n_population, err));
    for (int k = 0; k < MIA_REF_KINDS; k++) // scored on fewer queries: obtained again
        t->refs[k].n = 0;
    return FP_OK;
}

static void refset_free(MiaRefSet *rs) {
    free(rs->logits);
    free(rs->member);
    free(rs->test_accuracy);
    memset(rs, 0, sizeof *rs);
}

void mia_references_free(MiaTarget *t) {
    free(t->shadow_idx);
    free(t->shadow_logits);
    free(t->pop_order);
    free(t->query_idx);
    free(t->query_content);
    free(t->pop_logits);
    free(t->procedure);
    for (int k = 0; k < MIA_REF_KINDS; k++)
        refset_free(&t->refs[k]);
}

// ---------------------------------------------------------------------------------
// The ML-Leaks / Basic-MIA shadow

FpStatus mia_target_shadow(const AttackEnv *env, MiaTarget *t, int shadow_size, FpError *err) {
    if (t->shadow_size == shadow_size)
        return FP_OK;
    Experiment *ex = env->ex;
    int C = t->n_classes, first, K = t->sz.clients;
    uint64_t seed = mia_derived_seed(ex->seed, RNG_SHADOW, 0, 0);
    // shadow-in = pool[0, S), split among the clients as the engine partitions: trained on;
    // its member set, then as many shadow-out = pool[S, S + members).
    uint32_t *train = fp_malloc(sizeof(uint32_t) * (size_t)shadow_size, err);
    int *bounds = fp_malloc(sizeof(int) * ((size_t)K + 1), err);
    if (!train || !bounds) {
        free(train);
        free(bounds);
        return FP_ENOMEM;
    }
    memcpy(train, t->pool_idx, sizeof(uint32_t) * (size_t)shadow_size);
    FpStatus st = t->cfg.kind == MIA_TARGET_CENTRAL ? FP_OK : mia_split(ex, train, shadow_size, seed, bounds, err);
    int members = mia_member_range(&t->cfg, t->cfg.kind == MIA_TARGET_CENTRAL ? NULL : bounds, K, shadow_size, &first);
    if (st == FP_OK && shadow_size + members > t->sz.pool)
        st = fp_fail(err, FP_EPARAM, "%s.shadow_size: %d + %d shadow samples exceed the pool of %d", env->path,
                     shadow_size, members, t->sz.pool);
    free(t->shadow_idx);
    free(t->shadow_logits);
    t->shadow_size = 0;
    t->shadow_idx = st == FP_OK ? fp_malloc(sizeof(uint32_t) * 2 * (size_t)members, err) : NULL;
    // client_model "rounds": rows per upload and its start (mia_rounds_logits)
    int R = t->cfg.view == MIA_CLIENT_ROUNDS ? MIA_ROUND_ROWS * t->rounds.n : 1;
    t->shadow_logits = st == FP_OK ? fp_malloc(sizeof(float) * 2 * (size_t)members * R * C, err) : NULL;
    uint64_t *content = st == FP_OK ? fp_malloc(sizeof(uint64_t) * 2 * (size_t)members, err) : NULL;
    if (st == FP_OK && (!t->shadow_idx || !t->shadow_logits || !content))
        st = FP_ENOMEM;
    if (st != FP_OK) {
        free(content);
        free(train);
        free(bounds);
        return st;
    }
    memcpy(t->shadow_idx, train + first, sizeof(uint32_t) * (size_t)members);
    memcpy(t->shadow_idx + members, t->pool_idx + shadow_size, sizeof(uint32_t) * (size_t)members);
    content_of(ex->train, t->shadow_idx, 2 * members, content);
    double t0 = fp_monotonic_seconds();
    RefRequest rq = {.train = train, .n_train = shadow_size,
                     .bounds = t->cfg.kind == MIA_TARGET_CENTRAL ? NULL : bounds,
                     .seed = seed, .query = t->shadow_idx, .content = content, .n_query = 2 * members,
                     .views = R, .shift = t->view_shift, .logits = t->shadow_logits};
    st = reference_obtain(env, t, &rq, ex->threads, err);
    free(content);
    free(train);
    free(bounds);
    FP_TRY(st);
    t->shadow_test_accuracy = rq.test_accuracy;
    t->shadow_loaded = rq.loaded;
    t->shadow_seconds = fp_monotonic_seconds() - t0;
    t->shadow_n = members;
    t->shadow_size = shadow_size;
    if (!env->quiet)
        fprintf(stderr, "mia: shadow model on %d samples %s in %.1f s (test accuracy %.4f)\n", shadow_size,
                rq.loaded ? "read from the reference-model cache" : "trained", t->shadow_seconds,
                t->shadow_test_accuracy);
    return FP_OK;
}

// ---------------------------------------------------------------------------------
// Reference sets (LiRA, RMIA)

FpStatus mia_online_check(const AttackEnv *env, const MiaTargetConfig *cfg, const MiaSizes *sz, int n_models,
                          int shadow_size, FpError *err) {
    int first, mm = mia_member_range(cfg, NULL, sz->clients, shadow_size, &first);
    if (cfg->kind == MIA_TARGET_CLIENT && env->ex->fed.partition != PARTITION_IID)
        return fp_fail(err, FP_EPARAM, "%s.variant: the online reference models of a client target put each "
                       "candidate in the client's piece, which a label-skewed partition (federation.partition "
                       "\"%s\") decides itself: use \"variant\": \"offline\" or \"target\": "
                       "\"global\"", env->path, env->ex->fed.partition == PARTITION_DIRICHLET ? "dirichlet" : "shards");
    if (n_models % 2)
        return fp_fail(err, FP_EPARAM, "%s.shadow_models: the online variant pairs its reference models (each "
                       "candidate IN for exactly half of them): %d is odd", env->path, n_models);
    if (mm < sz->members)
        return fp_fail(err, FP_EPARAM, "%s.shadow_size: an online reference model of %d samples has %d members, fewer "
                       "than the %d candidates it must hold (half of the %d eval samples)", env->path, shadow_size, mm,
                       sz->members, 2 * sz->members);
    if (shadow_size - sz->members > sz->pool)
        return fp_fail(err, FP_EPARAM, "%s.shadow_size: an online reference model needs %d pool samples beside its "
                       "candidates, the shadow pool holds %d", env->path, shadow_size - sz->members, sz->pool);
    return FP_OK;
}

// Per worker: the buffers of one model's plan.
typedef struct {
    uint32_t *pool;       // sz.pool
    uint32_t *cands;      // 2M
    uint32_t *train;      // shadow_size
    int *bounds;          // clients + 1: the pieces of train (mia_split)
    unsigned char *mark;  // n_data, zero between models
    float *scratch;       // n_query × C (the logits before they are copied into the set)
} RefScratch;

// Model j's training list (split among the clients as the engine partitions, into
// w->train and w->bounds), seed and what it is to each query (attacks/target.h). The
// online plan puts the candidates in the member range of equal pieces: all of the list
// (global target) or, IID only (mia_online_check), the client's piece.
static FpStatus reference_plan(const AttackEnv *env, const MiaTarget *t, MiaRefKind kind, int j, int S, RefScratch *w,
                               unsigned char *member, uint64_t *seed_out, FpError *err) {
    const Experiment *ex = env->ex;
    int P = t->sz.pool, M = t->sz.members, first = 0, K = t->sz.clients;
    int mm = mia_member_range(&t->cfg, NULL, K, S, &first);
    memcpy(w->pool, t->pool_idx, sizeof(uint32_t) * (size_t)P);
    uint64_t seed;
    if (kind == MIA_REF_OFFLINE) {
        // A uniformly random S-subset of the pool (the first S of a shuffle).
        RngStream rs = rng_stream(ex->seed, RNG_SHADOW, 2, (uint32_t)j);
        rng_shuffle_u32(&rs, w->pool, (uint32_t)P);
        memcpy(w->train, w->pool, sizeof(uint32_t) * (size_t)S);
        seed = mia_derived_seed(ex->seed, RNG_SHADOW, 1, (uint32_t)j);
    } else {
        // Models 2k and 2k+1 take complementary halves of the candidates.
        memcpy(w->cands, t->eval_idx, sizeof(uint32_t) * 2 * (size_t)M);
        RngStream rh = rng_stream(ex->seed, RNG_SHADOW, 6, (uint32_t)(j / 2));
        rng_shuffle_u32(&rh, w->cands, (uint32_t)(2 * M));
        const uint32_t *mine = w->cands + (j % 2 ? M : 0);
        RngStream rp = rng_stream(ex->seed, RNG_SHADOW, 5, (uint32_t)j);
        rng_shuffle_u32(&rp, w->pool, (uint32_t)P); // fill: w->pool[0, S − M)
        // The member set: the candidates and mm − M fill samples, in a random order.
        uint32_t *ms = w->train + first;
        memcpy(ms, mine, sizeof(uint32_t) * (size_t)M);
        memcpy(ms + M, w->pool, sizeof(uint32_t) * (size_t)(mm - M));
        RngStream ro = rng_stream(ex->seed, RNG_SHADOW, 4, (uint32_t)j);
        rng_shuffle_u32(&ro, ms, (uint32_t)mm);
        // The other clients' pieces: the rest of the fill.
        const uint32_t *rest = w->pool + (mm - M);
        for (int i = 0, r = 0; i < S; i++)
            if (i < first || i >= first + mm)
                w->train[i] = rest[r++];
        seed = mia_derived_seed(ex->seed, RNG_SHADOW, 3, (uint32_t)j);
    }
    if (t->cfg.kind == MIA_TARGET_CENTRAL)
        for (int k = 0; k <= K; k++)
            w->bounds[k] = (int)((long long)k * S / K);
    else
        FP_TRY(mia_split(ex, w->train, S, seed, w->bounds, err));
    mm = mia_member_range(&t->cfg, t->cfg.kind == MIA_TARGET_CENTRAL ? NULL : w->bounds, K, S, &first);
    for (int i = 0; i < S; i++)
        w->mark[w->train[i]] = i >= first && i < first + mm ? MIA_Q_IN : MIA_Q_OTHER;
    for (int q = 0; q < t->n_query; q++)
        member[q] = w->mark[t->query_idx[q]];
    for (int i = 0; i < S; i++)
        w->mark[w->train[i]] = 0;
    *seed_out = seed;
    return FP_OK;
}

// Reference models done of those to train, shared by the workers: a line at most every
// env->progress_seconds (10 s) on env->progress when quiet (else each model has its own).
typedef struct {
    pthread_mutex_t lock;
    FpProgress models;
} RefProgress;

typedef struct {
    const AttackEnv *env;
    MiaTarget *t;
    MiaRefKind kind;
    int first, step, end, threads;
    unsigned char *loaded;        // per model
    RefProgress *progress;
    FpStatus st;
    FpError err;
} RefJob;

static FpStatus reference_model(RefJob *jb, int j, RefScratch *w) {
    MiaTarget *t = jb->t;
    MiaRefSet *rs = &t->refs[jb->kind];
    size_t row = (size_t)j * t->n_query;
    double t0 = fp_monotonic_seconds();
    uint64_t seed = 0;
    FP_TRY(reference_plan(jb->env, t, jb->kind, j, rs->size, w, rs->member + row, &seed, &jb->err));
    RefRequest rq = {.train = w->train, .n_train = rs->size,
                     .bounds = t->cfg.kind == MIA_TARGET_CENTRAL ? NULL : w->bounds,
                     .seed = seed, .query = t->query_idx,
                     .content = t->query_content, .n_query = t->n_query, .member = rs->member + row,
                     .views = rs->views, .shift = t->view_shift,
                     .logits = rs->logits + row * rs->views * t->n_classes};
    FP_TRY(reference_obtain(jb->env, t, &rq, jb->threads, &jb->err));
    rs->test_accuracy[j] = rq.test_accuracy;
    jb->loaded[j] = (unsigned char)rq.loaded;
    if (!jb->env->quiet)
        fprintf(stderr, "mia: %s reference model %d on %d samples %s in %.1f s (test accuracy %.4f)\n",
                ref_kind_names[jb->kind], j + 1, rs->size, rq.loaded ? "read from the cache" : "trained",
                fp_monotonic_seconds() - t0, rq.test_accuracy);
    pthread_mutex_lock(&jb->progress->lock);
    fp_progress_add(&jb->progress->models, 1);
    pthread_mutex_unlock(&jb->progress->lock);
    return FP_OK;
}

static void *reference_worker(void *arg) {
    RefJob *jb = arg;
    const MiaTarget *t = jb->t;
    RefScratch w = {0};
    w.pool = malloc(sizeof(uint32_t) * (size_t)(t->sz.pool ? t->sz.pool : 1));
    w.cands = malloc(sizeof(uint32_t) * 2 * (size_t)t->sz.members);
    w.train = malloc(sizeof(uint32_t) * (size_t)t->refs[jb->kind].size);
    w.bounds = malloc(sizeof(int) * ((size_t)t->sz.clients + 1));
    w.mark = calloc((size_t)t->sz.n_data, 1);
    if (!w.pool || !w.cands || !w.train || !w.bounds || !w.mark)
        jb->st = fp_fail(&jb->err, FP_ENOMEM, "out of memory for a reference model");
    for (int j = jb->first; jb->st == FP_OK && j < jb->end; j += jb->step)
        jb->st = reference_model(jb, j, &w);
    free(w.pool);
    free(w.cands);
    free(w.train);
    free(w.bounds);
    free(w.mark);
    return NULL;
}

static FpStatus refset_reserve(MiaRefSet *rs, int n_models, int n_query, int C, FpError *err) {
    if (n_models <= rs->cap)
        return FP_OK;
    float *l = realloc(rs->logits, sizeof(float) * (size_t)n_models * n_query * C);
    if (l)
        rs->logits = l;
    unsigned char *m = realloc(rs->member, (size_t)n_models * n_query);
    if (m)
        rs->member = m;
    double *a = realloc(rs->test_accuracy, sizeof(double) * (size_t)n_models);
    if (a)
        rs->test_accuracy = a;
    if (!l || !m || !a)
        return fp_fail(err, FP_ENOMEM, "out of memory for %d reference models", n_models);
    rs->cap = n_models;
    return FP_OK;
}

FpStatus mia_target_references(const AttackEnv *env, MiaTarget *t, MiaRefKind kind, int n_models, int shadow_size,
                               int views, FpError *err) {
    Experiment *ex = env->ex;
    MiaRefSet *rs = &t->refs[kind];
    if (shadow_size > t->sz.pool)
        return fp_fail(err, FP_EPARAM, "%s.shadow_size: %d exceeds the shadow pool of %d", env->path, shadow_size,
                       t->sz.pool);
    if (kind == MIA_REF_ONLINE)
        FP_TRY(mia_online_check(env, &t->cfg, &t->sz, n_models, shadow_size, err));
    // client_model "rounds": each query is scored by every upload and the model it started
    // from, 2R groups of the views.
    int R = t->cfg.view == MIA_CLIENT_ROUNDS ? MIA_ROUND_ROWS * t->rounds.n : 1;
    if (views == 0)
        views = rs->n ? rs->views : R;
    else
        views *= R;
    if (rs->size != shadow_size || rs->views != views) { // other models, or other rows: start over
        rs->n = 0;
        rs->cap = rs->views != views ? 0 : rs->cap; // rows of another width: reserve again
        rs->seconds = 0;
        rs->size = shadow_size;
        rs->views = views;
    }
    if (n_models <= rs->n)
        return FP_OK;
    FP_TRY(refset_reserve(rs, n_models, t->n_query, rs->views * t->n_classes, err));
    unsigned char *loaded = fp_calloc((size_t)n_models, 1, err);
    if (!loaded)
        return FP_ENOMEM;
    int todo = n_models - rs->n;
    int workers = ex->backend->device != DEVICE_CPU ? 1 : ex->threads < FED_MAX_THREADS ? ex->threads : FED_MAX_THREADS;
    if (workers > todo)
        workers = todo;
    if (workers < 1)
        workers = 1;
    double t0 = fp_monotonic_seconds();
    FpStatus st = FP_OK;
    double every = env->progress_seconds > 0 ? env->progress_seconds : 10.0;
    RefProgress progress = {.models = fp_progress_start(env->quiet ? env->progress : NULL, todo, every, every,
                                                        "reference models", "%s: %s",
                                                        env->progress_label ? env->progress_label : env->path,
                                                        ref_kind_names[kind])};
    pthread_mutex_init(&progress.lock, NULL);
    RefJob jobs[FED_MAX_THREADS];
    pthread_t tid[FED_MAX_THREADS];
    int started[FED_MAX_THREADS] = {0};
    // One worker: the model gets the experiment's threads; several: one thread each (BLAS too).
    if (workers > 1 && ex->backend->set_threads)
        ex->backend->set_threads(1);
    for (int w = 0; w < workers; w++)
        jobs[w] = (RefJob){.env = env, .t = t, .kind = kind, .first = rs->n + w, .step = workers, .end = n_models,
                           .threads = workers > 1 ? 1 : ex->threads, .loaded = loaded, .progress = &progress};
    for (int w = 1; w < workers; w++)
        started[w] = pthread_create(&tid[w], NULL, reference_worker, &jobs[w]) == 0;
    reference_worker(&jobs[0]);
    for (int w = 1; w < workers; w++) {
        if (started[w])
            pthread_join(tid[w], NULL);
        else
            reference_worker(&jobs[w]);
    }
    pthread_mutex_destroy(&progress.lock);
    for (int w = 0; w < workers && st == FP_OK; w++)
        if (jobs[w].st != FP_OK) {
            st = jobs[w].st;
            if (err)
                *err = jobs[w].err;
        }
    if (st == FP_OK) {
        for (int j = rs->n; j < n_models; j++) {
            rs->loaded += loaded[j];
            rs->trained += !loaded[j];
        }
        rs->seconds += fp_monotonic_seconds() - t0; // wall time of the models (training or loading, and scoring)
        rs->n = n_models;
    }
    free(loaded);
    return st;
}

void mia_references_describe(const MiaTarget *t, MiaRefKind kind, int n_models, const MiaRefSet *before,
                             cJSON *result) {
    const MiaRefSet *rs = &t->refs[kind];
    cJSON *o = cJSON_AddObjectToObject(result, "reference_models");
    cJSON_AddStringToObject(o, "kind", kind == MIA_REF_OFFLINE ? "offline: OUT for every candidate"
                                                               : "online: each candidate IN for exactly half");
    cJSON_AddNumberToObject(o, "models", n_models);
    cJSON_AddNumberToObject(o, "shadow_size", rs->size);
    cJSON_AddNumberToObject(o, "queries", t->n_query);
    cJSON_AddNumberToObject(o, "population_queried", t->n_population);
    double acc = 0;
    for (int j = 0; j < n_models; j++)
        acc += rs->test_accuracy[j];
    cJSON_AddNumberToObject(o, "test_accuracy_mean", n_models ? acc / n_models : NAN);
    cJSON_AddNumberToObject(o, "stored_floats", (double)n_models * t->n_query * t->n_classes);
    if (kind == MIA_REF_ONLINE) { // N/2 each, fewer where a reference client never took part
        int lo = n_models, hi = 0;
        double sum = 0;
        for (int i = 0; i < 2 * t->sz.members; i++) {
            int k = 0;
            for (int j = 0; j < n_models; j++)
                k += rs->member[(size_t)j * t->n_query + i] == MIA_Q_IN;
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
            sum += k;
        }
        cJSON *c = cJSON_AddObjectToObject(o, "in_models_per_candidate");
        cJSON_AddNumberToObject(c, "min", lo);
        cJSON_AddNumberToObject(c, "mean", sum / (2 * t->sz.members));
        cJSON_AddNumberToObject(c, "max", hi);
    }
    // Where they came from depends on what earlier runs left in the cache, not on the
    // configuration: run-dependent, like timings, so it goes in the result's "run".
    int trained = rs->trained - before->trained, loaded = rs->loaded - before->loaded;
    cJSON *r = cJSON_AddObjectToObject(mia_run_object(result), "reference_models");
    cJSON_AddNumberToObject(r, "trained_now", trained);
    cJSON_AddNumberToObject(r, "read_from_disk_cache", loaded);
    cJSON_AddNumberToObject(r, "reused_from_earlier_attack", n_models - trained - loaded);
}
