// Membership-inference targets, shadow models and the cache (see attacks/target.h for
// the data plan and the target kinds). Every model here, target, shadow or attack
// model, is trained by fl/ (fed_run or local_train): there is no second training path.
#include "attacks/target.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/jsonv.h"

struct AttackCache {
    MiaTarget *head;
};

// ---------------------------------------------------------------------------------
// Options and sizes

static const char *const kind_names[] = {"global", "client", "central", NULL};
static const char *const view_names[] = {"uploaded", "raw", "rounds", NULL};
static const char *const round_statistic_names[] = {"gain", "confidence", NULL}; // MiaRoundStatistic

// The client target's client: the one given, which the server must sample in some round,
// or by default the lowest-numbered client it samples. Who is sampled is the engine's
// own sampler on the experiment's seed (fed_sampled_clients), i.e. the participants that
// `fedpriv train` lists; a defense's self-sampling may still keep the client out, which
// the target's training says.
static FpStatus pick_client(const AttackEnv *env, MiaTargetConfig *cfg, FpError *err) {
    const FedConfig *fc = &env->ex->fed;
    char p[256];
    unsigned char *ever = fp_malloc((size_t)fc->clients, err);
    if (!ever)
        return FP_ENOMEM;
    fed_sampled_clients(fc, env->ex->seed, ever);
    int first = -1, taking_part = 0;
    for (int k = fc->clients - 1; k >= 0; k--)
        if (ever[k]) {
            first = k;
            taking_part++;
        }
    int given = cfg->client >= 0, ok = given ? ever[cfg->client] : first >= 0;
    free(ever);
    jv_path(p, sizeof p, env->path, "target_client");
    if (!ok && first < 0)
        return fp_fail(err, FP_EPARAM, "%s: the server samples no client in the federation's %d rounds (raise "
                       "federation.sample_rate or rounds)", p, fc->rounds);
    if (!ok)
        return fp_fail(err, FP_EPARAM, "%s: client %d is never sampled in the federation's %d rounds (%d of %d "
                       "clients take part; the lowest-numbered is client %d)", p, cfg->client, fc->rounds,
                       taking_part, fc->clients, first);
    cfg->client_defaulted = !given;
    if (!given)
        cfg->client = first;
    return FP_OK;
}

FpStatus mia_target_parse(const AttackEnv *env, MiaTargetConfig *cfg, FpError *err) {
    const cJSON *j = env->attack_json;
    const char *path = env->path;
    const Experiment *ex = env->ex;
    char p[256];
    memset(cfg, 0, sizeof *cfg);
    int c;
    long long v;
    FP_TRY(jv_choice(j, path, "target", kind_names, MIA_TARGET_GLOBAL, &c, err));
    cfg->kind = (MiaTargetKind)c;
    FP_TRY(jv_int(j, path, "target_client", JV_OPTIONAL, -1, 0, 1000000, &v, err));
    cfg->client = (int)v; // -1: not given
    FP_TRY(jv_choice(j, path, "client_model", view_names, MIA_CLIENT_UPLOADED, &c, err));
    cfg->view = (MiaClientView)c;
    FP_TRY(jv_choice(j, path, "round_statistic", round_statistic_names, MIA_ROUND_GAIN, &c, err));
    cfg->round_statistic = c;
    if (cJSON_GetObjectItemCaseSensitive(j, "round_statistic") &&
        (cfg->kind != MIA_TARGET_CLIENT || cfg->view != MIA_CLIENT_ROUNDS))
        return fp_fail(err, FP_EPARAM, "%s: only the client-level observer (\"target\": \"client\", "
                       "\"client_model\": \"rounds\") combines rounds", jv_path(p, sizeof p, path, "round_statistic"));
    FP_TRY(jv_int(j, path, "members", JV_OPTIONAL, 0, 0, 1 << 30, &v, err));
    cfg->members = (int)v;
    FP_TRY(jv_int(j, path, "central_epochs", JV_OPTIONAL, 0, 0, 1000000, &v, err));
    cfg->central_epochs = (int)v;
    if (cfg->kind == MIA_TARGET_CLIENT && cfg->client >= ex->fed.clients)
        return fp_fail(err, FP_EPARAM, "%s: client %d does not exist (federation.clients is %d)",
                       jv_path(p, sizeof p, path, "target_client"), cfg->client, ex->fed.clients);
    if (cfg->kind == MIA_TARGET_CLIENT)
        FP_TRY(pick_client(env, cfg, err));
    if (cfg->kind != MIA_TARGET_CLIENT) { // meaningless there: keep the cache key canonical
        cfg->client = 0;
        cfg->view = MIA_CLIENT_UPLOADED;
    }
    if (cfg->kind == MIA_TARGET_CENTRAL && cfg->central_epochs == 0)
        cfg->central_epochs = ex->fed.rounds * (ex->fed.local_steps > 0 ? 1 : ex->fed.local_epochs);
    if (cfg->kind != MIA_TARGET_CENTRAL)
        cfg->central_epochs = 0;
    if (ex->train->n_classes < 2 || !ex->train->y)
        return fp_fail(err, FP_EPARAM, "dataset.name: membership inference needs a classification dataset, \"%s\" "
                       "is not one", ex->dataset_name);
    if (cfg->kind != MIA_TARGET_CENTRAL && ex->fed.partition == PARTITION_NATURAL)
        return fp_fail(err, FP_EPARAM, "federation.partition: \"natural\" has no membership targets: only "
                       "power-load brings a natural split, and membership inference needs a classification dataset");
    return FP_OK;
}

FpStatus mia_one_model_only(const AttackEnv *env, const MiaTargetConfig *cfg, const char *attack, FpError *err) {
    char p[256];
    if (cfg->kind == MIA_TARGET_CLIENT && cfg->view == MIA_CLIENT_ROUNDS)
        return fp_fail(err, FP_EPARAM, "%s: %s attacks one model; \"rounds\" (every upload of the client) is for "
                       "lira and basic-mia", jv_path(p, sizeof p, env->path, "client_model"), attack);
    return FP_OK;
}

// The data plan's permutation of the training set (RNG_ATTACK round 0), its first n_train
// entries (the client data) split among the clients as the engine partitions (mia_split
// on the run's seed; the central target trains on them whole: equal pieces, which
// nothing reads). perm NULL: only the bounds (from a scratch permutation where the
// partition needs one).
static FpStatus plan_split(const Experiment *ex, int n_train, int central, uint32_t *perm, int *bounds,
                           FpError *err) {
    int n = ex->train->n, K = ex->fed.clients, by_labels = !central && ex->fed.partition != PARTITION_IID;
    uint32_t *own = NULL;
    if (!perm && by_labels && !(perm = own = fp_malloc(sizeof(uint32_t) * (size_t)n, err)))
        return FP_ENOMEM;
    if (perm) {
        for (int i = 0; i < n; i++)
            perm[i] = (uint32_t)i;
        RngStream rs = rng_stream(ex->seed, RNG_ATTACK, 0, 0);
        rng_shuffle_u32(&rs, perm, (uint32_t)n);
    }
    FpStatus st = FP_OK;
    if (by_labels)
        st = mia_split(ex, perm, n_train, ex->seed, bounds, err);
    else
        for (int k = 0; k <= K; k++)
            bounds[k] = (int)((long long)k * n_train / K);
    free(own);
    return st;
}

FpStatus mia_sizes(const AttackEnv *env, const MiaTargetConfig *cfg, MiaSizes *sz, FpError *err) {
    const Experiment *ex = env->ex;
    char p[256];
    memset(sz, 0, sizeof *sz);
    sz->n_data = ex->train->n;
    sz->clients = ex->fed.clients;
    sz->per_client = ex->fed.samples_per_client > 0 ? ex->fed.samples_per_client : sz->n_data / (4 * sz->clients);
    if (sz->per_client < 1)
        return fp_fail(err, FP_EPARAM, "federation.clients: %d clients are too many for %d training samples",
                       sz->clients, sz->n_data);
    long long n_train = (long long)sz->clients * sz->per_client;
    if (n_train >= sz->n_data)
        return fp_fail(err, FP_EPARAM, "federation.samples_per_client: %d clients × %d samples leave no non-members "
                       "among the %d training samples of the dataset", sz->clients, sz->per_client, sz->n_data);
    sz->n_train = (int)n_train;
    int *bounds = fp_malloc(sizeof(int) * ((size_t)sz->clients + 1), err);
    if (!bounds)
        return FP_ENOMEM;
    FpStatus st = plan_split(ex, sz->n_train, cfg->kind == MIA_TARGET_CENTRAL, NULL, bounds, err);
    if (st != FP_OK) {
        free(bounds);
        return st;
    }
    sz->adversary = cfg->kind == MIA_TARGET_GLOBAL && sz->clients >= 2 ? sz->clients - 1 : -1;
    // The adversary's D_test: as many samples as its piece holds (CS-MIA's D_train).
    sz->adv_out = sz->adversary >= 0 ? bounds[sz->adversary + 1] - bounds[sz->adversary] : 0;
    if (n_train + sz->adv_out + 1 > sz->n_data) {
        free(bounds);
        return fp_fail(err, FP_EPARAM, "federation.samples_per_client: %d clients × %d samples%s leave no non-members "
                       "among the %d training samples of the dataset", sz->clients, sz->per_client,
                       sz->adv_out ? " (+ the adversary's held-out set)" : "", sz->n_data);
    }
    int first;
    if (cfg->kind == MIA_TARGET_GLOBAL) { // members: records of clients that take part (not the adversary's)
        unsigned char *ever = fp_malloc((size_t)sz->clients, err);
        if (!ever) {
            free(bounds);
            return FP_ENOMEM;
        }
        fed_sampled_clients(&ex->fed, ex->seed, ever);
        for (int k = 0; k < sz->clients; k++)
            sz->taking_part += ever[k];
        for (int k = 0; k < sz->clients; k++)
            sz->available += ever[k] && k != sz->adversary ? bounds[k + 1] - bounds[k] : 0;
        free(ever);
        if (sz->available == 0) {
            free(bounds);
            return fp_fail(err, FP_EPARAM, "federation.sample_rate: no client but the adversary takes part in the "
                           "%d rounds: the global target has no members", ex->fed.rounds);
        }
    } else
        sz->available = mia_member_range(cfg, cfg->kind == MIA_TARGET_CLIENT ? bounds : NULL, sz->clients,
                                         sz->n_train, &first);
    sz->model_members = sz->available;
    if (cfg->kind == MIA_TARGET_GLOBAL)
        sz->model_members = sz->n_train;
    free(bounds);
    int room = sz->n_data - sz->n_train - sz->adv_out; // for non-members and the pool
    if (cfg->members > 0) {
        if (cfg->members > sz->available)
            return fp_fail(err, FP_EPARAM, "%s: %d members asked for, but the %s target trains on only %d samples "
                           "that can be evaluated", jv_path(p, sizeof p, env->path, "members"), cfg->members,
                           kind_names[cfg->kind], sz->available);
        if (cfg->members > room)
            return fp_fail(err, FP_EPARAM, "%s: %d members need as many non-members, but only %d samples remain "
                           "outside the target's training data", jv_path(p, sizeof p, env->path, "members"),
                           cfg->members, room);
        sz->members = cfg->members;
    } else
        sz->members = sz->available < room ? sz->available : room;
    sz->pool = room - sz->members;
    return FP_OK;
}

FpStatus mia_shadow_size(const AttackEnv *env, const MiaSizes *sz, long long requested, int need_out, int *size,
                         FpError *err) {
    MiaTargetConfig cfg;
    FP_TRY(mia_target_parse(env, &cfg, err));
    char p[256];
    jv_path(p, sizeof p, env->path, "shadow_size");
    int first;
    if (requested > 0) {
        long long need =
            requested + (need_out ? mia_member_range(&cfg, NULL, sz->clients, (int)requested, &first) : 0);
        if (requested < sz->clients)
            return fp_fail(err, FP_EPARAM, "%s: %lld samples cannot be split among %d clients", p, requested,
                           sz->clients);
        if (need > sz->pool)
            return fp_fail(err, FP_EPARAM, "%s: the shadow set needs %lld samples%s, larger than the %d left for "
                           "shadows (dataset %d = target training %d + eval non-members %d%s + shadow pool)", p,
                           need, need_out ? " (shadow-in and shadow-out)" : "", sz->pool, sz->n_data, sz->n_train,
                           sz->members, sz->adv_out ? " + adversary's held-out set" : "");
        *size = (int)requested;
        return FP_OK;
    }
    // Default: the target's own training size (four equal parts), shrunk to what the pool holds.
    int s = sz->n_train;
    while (s >= sz->clients && s + (need_out ? mia_member_range(&cfg, NULL, sz->clients, s, &first) : 0) > sz->pool)
        s = s * 15 / 16 < s - 1 ? s * 15 / 16 : s - 1;
    if (s < sz->clients)
        return fp_fail(err, FP_EPARAM, "%s: the shadow pool holds only %d samples (dataset %d = target training %d + "
                       "eval non-members %d + shadow pool): lower federation.samples_per_client or members", p,
                       sz->pool, sz->n_data, sz->n_train, sz->members);
    *size = s;
    return FP_OK;
}

// Mean CE and accuracy of m on samples idx of the training set.
static FpStatus loss_on(const Experiment *ex, Model *m, const uint32_t *idx, int n, double *loss, double *acc,
                        FpError *err) {
    int C = ex->train->n_classes;
    float *z = malloc(sizeof(float) * (size_t)n * C);
    if (!z)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    FpStatus st = mia_logits(m, ex->train, idx, n, ex->threads, z, err);
    double sum = 0, correct = 0;
    for (int i = 0; st == FP_OK && i < n; i++) {
        const float *r = z + (size_t)i * C;
        int y = ex->train->y[idx[i]], best = 0;
        for (int c = 1; c < C; c++)
            if (r[c] > r[best])
                best = c;
        correct += best == y;
        sum += mia_loss_of_phi(mia_phi(r, C, y));
    }
    free(z);
    *loss = n ? sum / n : NAN;
    *acc = n ? correct / n : NAN;
    return st;
}

// ---------------------------------------------------------------------------------
// The target and its cache

static void target_free(MiaTarget *t) {
    if (!t)
        return;
    free(t->perm);
    free(t->bounds);
    free(t->eval_idx);
    free(t->eval_label_counts);
    free(t->eval_logits);
    free(t->series_py);
    free(t->series_mentr);
    mia_references_free(t);
    mia_rounds_free(&t->rounds);
    model_free(t->model);
    dataset_free(t->shadow_test);
    cJSON_Delete(t->defense);
    free(t);
}

AttackCache *attack_cache_create(void) { return calloc(1, sizeof(AttackCache)); }

void attack_cache_free(AttackCache *c) {
    if (!c)
        return;
    for (MiaTarget *t = c->head, *next; t; t = next) {
        next = t->next;
        target_free(t);
    }
    free(c);
}

static void target_key(const Experiment *ex, const MiaTargetConfig *cfg, char *key, size_t n) {
    snprintf(key, n, "seed=%llu data=%d kind=%d client=%d view=%d members=%d central_epochs=%d",
             (unsigned long long)ex->seed, ex->train->n, cfg->kind, cfg->client, cfg->view, cfg->members,
             cfg->central_epochs);
}

// Members of the global target are records of clients that took part at least once.
// They were drawn from the clients the server samples; a defense's self-sampling can
// still keep one out of every round: its records leave the eval set, and as many
// non-members with them (the set stays balanced), the series rows following.
static void keep_participants(MiaTarget *t, const int *took_part) {
    MiaSizes *sz = &t->sz;
    int M = sz->members, kept = 0;
    int *row = malloc(sizeof(int) * 2 * (size_t)(M > 0 ? M : 1)); // new row of each old eval row (-1: dropped)
    int *client_of = malloc(sizeof(int) * (size_t)sz->n_data);
    if (!row || !client_of) { // no scratch: nothing can be checked, so nothing is claimed
        free(row);
        free(client_of);
        return;
    }
    for (int i = 0; i < sz->n_data; i++)
        client_of[i] = -1;
    for (int k = 0; k < sz->clients; k++)
        for (int i = t->bounds[k]; i < t->bounds[k + 1]; i++)
            client_of[t->train_idx[i]] = k;
    for (int i = 0; i < M; i++) {
        int k = client_of[t->eval_idx[i]];
        row[i] = k >= 0 && took_part[k] ? kept++ : -1;
    }
    free(client_of);
    sz->members_without_participation = M - kept;
    if (kept == M) {
        free(row);
        return;
    }
    for (int i = 0; i < M; i++) // non-members: the first `kept` stay
        row[M + i] = i < kept ? kept + i : -1;
    uint32_t *old = t->eval_idx;
    for (int i = 0; i < 2 * M; i++)
        if (row[i] >= 0)
            old[row[i]] = old[i]; // row[i] <= i: compaction in place
    if (t->series_py) {
        int n_old = t->n_series, n_new = 2 * kept + (n_old - 2 * M);
        for (int r = 0; r < t->series_rounds; r++) {
            float *py = t->series_py + (size_t)r * n_old, *me = t->series_mentr + (size_t)r * n_old;
            float *npy = t->series_py + (size_t)r * n_new, *nme = t->series_mentr + (size_t)r * n_new;
            for (int i = 0; i < n_old; i++) {
                int to = i < 2 * M ? row[i] : 2 * kept + (i - 2 * M);
                if (to >= 0) { // to <= i and rounds move forward: never overwrites an unread cell
                    npy[to] = py[i];
                    nme[to] = me[i];
                }
            }
        }
        t->n_series = n_new;
    }
    sz->members = kept;
    free(row);
}

// Under label skew (a partition other than IID) the eval members' labels are not the
// data's mix: one client's piece may be mostly two classes. Non-members drawn uniformly
// would then differ from the members by label alone, and an attack would score the
// label mix, not membership. So the non-members match the members' label counts: the
// first samples of each label in `rest` (the plan's part outside the client data, a
// random permutation already), taken in order; the others keep their order behind them
// for the adversary's held-out data and the shadow pool.
static FpStatus match_non_members(const Dataset *train, const uint32_t *members, int M, uint32_t *rest, int n_rest,
                                  const char *path, FpError *err) {
    int C = train->n_classes;
    int *left = calloc((size_t)C, sizeof(int));
    uint32_t *chosen = fp_malloc(sizeof(uint32_t) * (size_t)n_rest, err);
    if (!left || !chosen) {
        free(left);
        free(chosen);
        return FP_ENOMEM;
    }
    for (int i = 0; i < M; i++)
        left[train->y[members[i]]]++;
    int a = 0, b = M;
    for (int j = 0; j < n_rest; j++) {
        int y = train->y[rest[j]];
        if (left[y] > 0 && a < M) {
            chosen[a++] = rest[j];
            left[y]--;
        } else if (b < n_rest)
            chosen[b++] = rest[j];
    }
    FpStatus st = FP_OK;
    if (a < M) {
        int y = 0;
        while (y < C - 1 && left[y] == 0)
            y++;
        char p[160];
        st = fp_fail(err, FP_EPARAM, "%s: the target's members under label skew need %d more non-members of class %d "
                     "than the data hold outside the clients' data: lower members or federation.samples_per_client",
                     jv_path(p, sizeof p, path, "members"), left[y], y);
    } else
        memcpy(rest, chosen, sizeof(uint32_t) * (size_t)n_rest);
    free(left);
    free(chosen);
    return st;
}

static FpStatus target_build(const AttackEnv *env, const MiaTargetConfig *cfg, MiaTarget *t, FpError *err) {
    Experiment *ex = env->ex;
    FP_TRY(mia_sizes(env, cfg, &t->sz, err));
    const MiaSizes *sz = &t->sz;
    t->cfg = *cfg;
    t->n_classes = ex->train->n_classes;
    int C = t->n_classes, M = sz->members, m = sz->adv_out;
    // The data plan: one permutation of the training set, cut into pieces, the client
    // data split among the clients as the engine partitions.
    t->perm = fp_malloc(sizeof(uint32_t) * (size_t)sz->n_data, err);
    t->bounds = fp_malloc(sizeof(int) * ((size_t)sz->clients + 1), err);
    t->eval_idx = fp_malloc(sizeof(uint32_t) * 2 * (size_t)M, err);
    t->eval_logits = fp_malloc(sizeof(float) * 2 * (size_t)M * C, err);
    if (!t->perm || !t->bounds || !t->eval_idx || !t->eval_logits)
        return FP_ENOMEM;
    FP_TRY(plan_split(ex, sz->n_train, cfg->kind == MIA_TARGET_CENTRAL, t->perm, t->bounds, err));
    cJSON *fj = fed_config_to_json(&ex->fed); // the partition as the engine names it
    const cJSON *pn = cJSON_GetObjectItemCaseSensitive(fj, "partition");
    snprintf(t->partition, sizeof t->partition, "%s", cJSON_IsString(pn) ? pn->valuestring : "iid");
    cJSON_Delete(fj);
    t->train_idx = t->perm;
    const uint32_t *non_members = t->perm + sz->n_train;
    t->adv_in = sz->adversary >= 0 ? t->train_idx + t->bounds[sz->adversary] : NULL;
    t->adv_out = sz->adversary >= 0 ? non_members + M : NULL;
    t->pool_idx = non_members + M + sz->adv_out;
    // Eval members: M drawn uniformly from the target's evaluable members.
    int first = 0;
    if (cfg->kind == MIA_TARGET_CLIENT)
        mia_member_range(cfg, t->bounds, sz->clients, sz->n_train, &first);
    uint32_t *avail = fp_malloc(sizeof(uint32_t) * (size_t)sz->available, err);
    if (!avail)
        return FP_ENOMEM;
    if (cfg->kind == MIA_TARGET_GLOBAL) { // the pieces of the clients the server samples (not the adversary)
        unsigned char *ever = fp_malloc((size_t)sz->clients, err);
        if (!ever) {
            free(avail);
            return FP_ENOMEM;
        }
        fed_sampled_clients(&ex->fed, ex->seed, ever);
        int k_avail = 0;
        for (int k = 0; k < sz->clients; k++)
            if (ever[k] && k != sz->adversary) {
                int piece = t->bounds[k + 1] - t->bounds[k];
                memcpy(avail + k_avail, t->train_idx + t->bounds[k], sizeof(uint32_t) * (size_t)piece);
                k_avail += piece;
            }
        free(ever);
    } else
        memcpy(avail, t->train_idx + first, sizeof(uint32_t) * (size_t)sz->available);
    RngStream rm = rng_stream(ex->seed, RNG_ATTACK, 1, 0);
    rng_shuffle_u32(&rm, avail, (uint32_t)sz->available);
    memcpy(t->eval_idx, avail, sizeof(uint32_t) * (size_t)M);
    free(avail);
    t->labels_matched = cfg->kind != MIA_TARGET_CENTRAL && C > 0 && strcmp(t->partition, "iid") != 0;
    if (t->labels_matched)
        FP_TRY(match_non_members(ex->train, t->eval_idx, M, t->perm + sz->n_train, sz->n_data - sz->n_train,
                                 env->path, err));
    memcpy(t->eval_idx + M, non_members, sizeof(uint32_t) * (size_t)M);
    if (C > 0) {
        if (!(t->eval_label_counts = calloc(2 * (size_t)C, sizeof(int))))
            return FP_ENOMEM;
        for (int i = 0; i < 2 * M; i++)
            t->eval_label_counts[(i >= M) * C + ex->train->y[t->eval_idx[i]]]++;
    }
    // A small test set for the shadows' progress lines (the target uses the full one).
    int nt = ex->test->n < 2000 ? ex->test->n : 2000;
    uint32_t *tidx = fp_malloc(sizeof(uint32_t) * (size_t)nt, err);
    if (!tidx)
        return FP_ENOMEM;
    for (int i = 0; i < nt; i++)
        tidx[i] = (uint32_t)i;
    t->shadow_test = dataset_subset(ex->test, tidx, nt, err);
    free(tidx);
    if (!t->shadow_test)
        return err ? err->code : FP_ENOMEM;
    // Train the target, recording the confidence series when asked.
    MiaSeries series = {0};
    uint32_t *sidx = NULL;
    if (cfg->series && cfg->kind == MIA_TARGET_GLOBAL) {
        t->n_series = 2 * M + 2 * sz->adv_out;
        t->series_rounds = ex->fed.rounds;
        size_t cells = (size_t)t->series_rounds * t->n_series;
        sidx = fp_malloc(sizeof(uint32_t) * (size_t)t->n_series, err);
        t->series_py = fp_malloc(sizeof(float) * cells, err);
        t->series_mentr = fp_malloc(sizeof(float) * cells, err);
        if (!sidx || !t->series_py || !t->series_mentr) {
            free(sidx);
            return FP_ENOMEM;
        }
        memcpy(sidx, t->eval_idx, sizeof(uint32_t) * 2 * (size_t)M);
        if (sz->adv_out) {
            memcpy(sidx + 2 * M, t->adv_in, sizeof(uint32_t) * (size_t)m);
            memcpy(sidx + 2 * M + m, t->adv_out, sizeof(uint32_t) * (size_t)m);
        }
        series = (MiaSeries){.idx = sidx, .n = t->n_series, .rounds = t->series_rounds, .py = t->series_py,
                             .mentr = t->series_mentr};
    }
    double t0 = fp_monotonic_seconds();
    Model *model = NULL;
    int *took_part = fp_calloc((size_t)sz->clients, sizeof(int), err);
    if (!took_part) {
        free(sidx);
        return FP_ENOMEM;
    }
    FpStatus st = mia_train_model(env, cfg, t->train_idx, sz->n_train, t->bounds, ex->seed, 0, ex->test, env->quiet,
                                  ex->threads, sidx ? &series : NULL, &model, &t->participated_round,
                                  &t->defense, took_part, cfg->view == MIA_CLIENT_ROUNDS ? &t->rounds : NULL, err);
    free(sidx);
    if (st == FP_OK && cfg->kind == MIA_TARGET_GLOBAL) {
        keep_participants(t, took_part);
        if (t->sz.members == 0)
            st = fp_fail(err, FP_EPARAM, "%s: no client whose records were drawn as members took part in training "
                         "(the defense's self-sampling kept them out)", env->path);
    }
    // What the attacks read: logits on the eval samples, Yeom's τ (over the records the
    // target trained on: those of clients that took part), accuracies.
    int first_train = 0, n_tr = mia_member_range(cfg, t->bounds, sz->clients, sz->n_train, &first_train);
    uint32_t *trained = st == FP_OK ? fp_malloc(sizeof(uint32_t) * (size_t)(n_tr > 0 ? n_tr : 1), err) : NULL;
    int n_trained = 0;
    for (int k = 0; trained && k < sz->clients; k++) // the pieces that overlap the member range
        for (int i = t->bounds[k]; i < t->bounds[k + 1]; i++)
            if (i >= first_train && i < first_train + n_tr && (cfg->kind != MIA_TARGET_GLOBAL || took_part[k]))
                trained[n_trained++] = t->train_idx[i];
    free(took_part);
    if (st == FP_OK && !trained)
        st = FP_ENOMEM;
    if (st != FP_OK) {
        model_free(model);
        return st;
    }
    t->train_seconds = fp_monotonic_seconds() - t0;
    M = t->sz.members;
    st = mia_logits(model, ex->train, t->eval_idx, 2 * M, ex->threads, t->eval_logits, err);
    // Every upload's model (client_model "rounds"): Yeom's τ is the mean over them of the
    // mean training loss, as its score is the mean over them of the per-example loss.
    double loss_sum = 0;
    for (int r = 0; st == FP_OK && r < t->rounds.n; r++) {
        model_set_params(model, t->rounds.params + t->rounds.n_params * (size_t)r);
        st = loss_on(ex, model, trained, n_trained, &t->train_loss, &t->train_accuracy, err);
        loss_sum += t->train_loss;
    }
    if (st == FP_OK) // the model is left at its last upload
        st = loss_on(ex, model, trained, n_trained, &t->train_loss, &t->train_accuracy, err);
    if (st == FP_OK && t->rounds.n)
        t->train_loss = loss_sum / t->rounds.n;
    free(trained);
    if (st == FP_OK)
        st = model_evaluate(model, ex->test, ex->threads, &t->test_accuracy, &t->test_loss, NULL, err);
    t->model = model;
    if (st == FP_OK)
        st = mia_queries_init(env, t, err);
    return st;
}

FpStatus mia_target_acquire(const AttackEnv *env, const MiaTargetConfig *cfg, MiaTarget **out, FpError *err) {
    char key[160];
    target_key(env->ex, cfg, key, sizeof key);
    *out = NULL;
    if (env->cache)
        for (MiaTarget *t = env->cache->head; t; t = t->next)
            if (strcmp(t->key, key) == 0 && (!cfg->series || t->series_py)) {
                t->acquisitions++;
                *out = t;
                return FP_OK;
            }
    MiaTarget *t = fp_calloc(1, sizeof *t, err);
    if (!t)
        return FP_ENOMEM;
    snprintf(t->key, sizeof t->key, "%s", key);
    FpStatus st = target_build(env, cfg, t, err);
    if (st != FP_OK) {
        target_free(t);
        return st;
    }
    t->acquisitions = 1;
    if (env->cache) { // newest first: a rebuilt target with a series shadows the older one
        t->next = env->cache->head;
        env->cache->head = t;
    }
    *out = t;
    return FP_OK;
}

void mia_target_release(const AttackEnv *env, MiaTarget *t) {
    if (!env->cache)
        target_free(t);
}

// ---------------------------------------------------------------------------------
// Describing the target

void mia_target_describe(const MiaTarget *t, cJSON *result) {
    const MiaSizes *sz = &t->sz;
    cJSON *o = cJSON_AddObjectToObject(result, "target");
    cJSON_AddStringToObject(o, "kind", kind_names[t->cfg.kind]);
    if (t->cfg.kind == MIA_TARGET_CLIENT) {
        cJSON_AddNumberToObject(o, "client", t->cfg.client);
        cJSON_AddStringToObject(o, "client_rule", t->cfg.client_defaulted
                                                      ? "default: the lowest-numbered client the server samples"
                                                      : "target_client");
        cJSON_AddStringToObject(o, "reference_sampling", "shadow and reference federations replay the target "
                                                         "federation's participants round by round");
        cJSON_AddStringToObject(o, "client_model",
                                t->cfg.view == MIA_CLIENT_UPLOADED ? "uploaded (after the defense, as the server receives it)"
                                : t->cfg.view == MIA_CLIENT_RAW    ? "raw (the local model before the defense)"
                                                                   : "rounds (every upload of the client, after the "
                                                                     "defense, as the server receives them)");
        cJSON_AddNumberToObject(o, "from_round", t->participated_round);
        if (t->cfg.view == MIA_CLIENT_ROUNDS) {
            cJSON *a = cJSON_AddArrayToObject(o, "rounds");
            for (int r = 0; a && r < t->rounds.n; r++)
                cJSON_AddItemToArray(a, cJSON_CreateNumber(t->rounds.round[r]));
        }
    }
    if (t->cfg.kind == MIA_TARGET_CENTRAL)
        cJSON_AddNumberToObject(o, "central_epochs", t->cfg.central_epochs);
    cJSON_AddBoolToObject(o, "defense_applied", t->cfg.kind != MIA_TARGET_CENTRAL);
    if (t->defense)
        cJSON_AddItemToObject(o, "defense", cJSON_Duplicate(t->defense, 1));
    cJSON_AddNumberToObject(o, "clients", sz->clients);
    cJSON_AddNumberToObject(o, "samples_per_client", sz->per_client);
    cJSON_AddNumberToObject(o, "training_samples", sz->n_train);
    cJSON_AddNumberToObject(o, "members_trained_on", sz->model_members);
    cJSON_AddNumberToObject(o, "eval_members", sz->members);
    cJSON_AddNumberToObject(o, "eval_non_members", sz->members);
    cJSON_AddStringToObject(o, "non_members_rule", t->labels_matched
                                                       ? "matched to the eval members' label counts (label skew)"
                                                       : "uniform over the data outside the clients' data");
    if (t->eval_label_counts) { // the eval sets' labels, so a reader can see that they match or how far they differ
        cJSON *lc = cJSON_AddObjectToObject(o, "eval_label_counts");
        cJSON *mem = cJSON_AddArrayToObject(lc, "members"), *non = cJSON_AddArrayToObject(lc, "non_members");
        for (int c = 0; mem && non && c < t->n_classes; c++) {
            cJSON_AddItemToArray(mem, cJSON_CreateNumber(t->eval_label_counts[c]));
            cJSON_AddItemToArray(non, cJSON_CreateNumber(t->eval_label_counts[t->n_classes + c]));
        }
    }
    if (t->cfg.kind == MIA_TARGET_GLOBAL) {
        cJSON_AddStringToObject(o, "members_rule", "records of clients that took part in at least one round "
                                                   "(not the adversary's)");
        cJSON_AddNumberToObject(o, "clients_sampled", sz->taking_part);
        if (sz->members_without_participation)
            cJSON_AddNumberToObject(o, "members_dropped_never_took_part", sz->members_without_participation);
    }
    cJSON_AddNumberToObject(o, "train_accuracy", t->train_accuracy);
    cJSON_AddNumberToObject(o, "train_loss", t->train_loss);
    cJSON_AddNumberToObject(o, "test_accuracy", t->test_accuracy);
    cJSON_AddNumberToObject(o, "test_loss", t->test_loss);
    cJSON_AddNumberToObject(o, "train_seconds", t->train_seconds);
    cJSON_AddBoolToObject(o, "shared_from_earlier_attack", t->acquisitions > 1);
    cJSON *plan = cJSON_AddObjectToObject(o, "data_plan");
    cJSON_AddNumberToObject(plan, "dataset_samples", sz->n_data);
    cJSON_AddNumberToObject(plan, "client_data", sz->n_train);
    cJSON_AddNumberToObject(plan, "eval_non_members", sz->members);
    cJSON_AddNumberToObject(plan, "adversary_held_out", sz->adv_out);
    cJSON_AddNumberToObject(plan, "shadow_pool", sz->pool);
    if (sz->adversary >= 0)
        cJSON_AddNumberToObject(plan, "adversary_client", sz->adversary);
    cJSON_AddStringToObject(plan, "split", "one RNG_ATTACK permutation of the training set, cut in this order; "
                                           "client data split as the engine partitions (RNG_PARTITION on the "
                                           "run's seed)");
    if (t->cfg.kind == MIA_TARGET_CENTRAL)
        return;
    cJSON_AddStringToObject(plan, "partition", t->partition);
    if (strcmp(t->partition, "iid") != 0) { // unequal pieces: each one's size (samples_per_client is their mean)
        cJSON *a = cJSON_AddArrayToObject(plan, "client_samples");
        for (int k = 0; a && k < sz->clients; k++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(t->bounds[k + 1] - t->bounds[k]));
    }
}

