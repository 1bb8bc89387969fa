// The one training procedure of the membership attacks (attacks/mia.h): every target,
// shadow and reference model is trained here, by fl/ (fed_run over the plan's pieces, or
// local_train for the central target), with the hooks that capture the client target's
// model and record the global model's confidence series. There is no second path.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/mia.h"

// A 64-bit seed for a derived model (shadow j, an attack model): the first block of
// its own stream, so it never coincides with the run seed's other streams.
uint64_t mia_derived_seed(uint64_t seed, RngPurpose purpose, uint32_t round, uint32_t client) {
    RngStream s = rng_stream(seed, purpose, round, client);
    uint32_t w[4];
    rng_block(&s, 0, w);
    return ((uint64_t)w[0] << 21 ^ w[1]) & (((uint64_t)1 << 53) - 1); // JSON-exact
}

// (attacks/mia.h)
int mia_member_range(const MiaTargetConfig *cfg, const int *bounds, int clients, int n, int *first) {
    if (cfg->kind == MIA_TARGET_CLIENT) {
        long long a = bounds ? bounds[cfg->client] : (long long)cfg->client * n / clients;
        long long b = bounds ? bounds[cfg->client + 1] : (long long)(cfg->client + 1) * n / clients;
        *first = (int)a;
        return (int)(b - a);
    }
    *first = 0;
    return n;
}

// (attacks/mia.h) The engine's own partitioners on the list's labels: the same code and
// the same stream (RNG_PARTITION, round 0, on the model's seed) as fl/fed.c's.
FpStatus mia_split(const Experiment *ex, uint32_t *idx, int n, uint64_t seed, int *bounds, FpError *err) {
    const FedConfig *fc = &ex->fed;
    int K = fc->clients;
    if (fc->partition == PARTITION_IID) {
        for (int k = 0; k <= K; k++)
            bounds[k] = (int)((long long)k * n / K);
        return FP_OK;
    }
    if (fc->partition == PARTITION_NATURAL || !ex->train->y)
        return fp_fail(err, FP_EPARAM, "federation.partition: \"natural\" has no membership targets: only "
                       "power-load brings a natural split, and membership inference needs a classification dataset");
    int32_t *labels = fp_malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1), err);
    uint32_t *copy = fp_malloc(sizeof(uint32_t) * (size_t)(n > 0 ? n : 1), err);
    if (!labels || !copy) {
        free(labels);
        free(copy);
        return FP_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        labels[i] = ex->train->y[idx[i]];
    memcpy(copy, idx, sizeof(uint32_t) * (size_t)n);
    RngStream rs = rng_stream(seed, RNG_PARTITION, 0, 0);
    Partition *p = NULL;
    FpError perr = {0};
    FpStatus st = fc->partition == PARTITION_DIRICHLET
                      ? partition_dirichlet(labels, n, ex->train->n_classes, K, fc->alpha, &rs, &p, &perr)
                      : partition_shards(labels, n, K, fc->shards_per_client, &rs, &p, &perr);
    free(labels);
    if (st == FP_EPARAM)
        st = fp_fail(err, st, "federation.partition: %s (the membership plan's client data: %d samples)", perr.msg, n);
    else if (st != FP_OK && err)
        *err = perr;
    for (int k = 0, at = 0; st == FP_OK && k < K; k++) { // piece k: its positions, increasing
        bounds[k] = at;
        for (int i = 0; i < p->count[k]; i++)
            idx[at++] = copy[p->idx[k][i]];
        bounds[k + 1] = at;
    }
    partition_free(p);
    free(copy);
    return st;
}

// ---------------------------------------------------------------------------------
// Training a target or shadow model (the same procedure for both)

typedef struct TrainHooks {
    const Experiment *ex;
    int threads;
    // client target: the model the server receives (or the raw local model) from the
    // last round the client took part in
    int client;                 // -1: none
    MiaClientView view;
    float *start_global;        // this round's starting global weights (host)
    float *captured;
    int captured_round;         // 1-based, 0 = never
    MiaRounds *rounds;          // client_model "rounds": every upload (NULL: only the last)
    // confidence series of the global model (NULL: none), and its scratch logits
    const MiaSeries *series;
    float *series_logits;
    FpStatus st;
    FpError err;
} TrainHooks;

static void hook_upload(void *ctx, int round, int client, const float *upload, UploadKind kind,
                        const ParamTable *table, const UploadParams *params) {
    TrainHooks *h = ctx;
    if (client != h->client || h->view == MIA_CLIENT_RAW)
        return;
    upload_to_weights(kind, upload, h->start_global, table->n_params, h->ex->fed.lr, h->captured);
    h->captured_round = round + 1;
    MiaRounds *r = h->rounds;
    if (!r || h->st != FP_OK)
        return;
    size_t np = table->n_params;
    int *rr = realloc(r->round, sizeof(int) * ((size_t)r->n + 1));
    if (rr)
        r->round = rr;
    float *pp = realloc(r->params, sizeof(float) * np * ((size_t)r->n + 1));
    if (pp)
        r->params = pp;
    float *ps = realloc(r->start, sizeof(float) * np * ((size_t)r->n + 1));
    if (ps)
        r->start = ps;
    if (!rr || !pp || !ps) {
        h->st = fp_fail(&h->err, FP_ENOMEM, "out of memory for the client's uploads");
        return;
    }
    memcpy(r->params + np * (size_t)r->n, h->captured, sizeof(float) * np);
    memcpy(r->start + np * (size_t)r->n, h->start_global, sizeof(float) * np);
    r->round[r->n++] = round + 1;
    r->n_params = np;
}

void mia_rounds_free(MiaRounds *r) {
    free(r->round);
    free(r->params);
    free(r->start);
    memset(r, 0, sizeof *r);
}

// (attacks/mia.h)
FpStatus mia_rounds_logits(Model *m, const MiaRounds *rounds, const Dataset *d, const uint32_t *idx, int n,
                           int views, int shift, int threads, float *logits, FpError *err) {
    int R = rounds->n, V = views > 1 ? views : 1, C = d->n_classes;
    float *one = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1) * V * C);
    if (!one)
        return fp_fail(err, FP_ENOMEM, "out of memory for the rounds' logits");
    FpStatus st = FP_OK;
    for (int r = 0; st == FP_OK && r < R; r++)
        for (int s = MIA_ROUND_ROWS - 1; st == FP_OK && s >= 0; s--) { // the upload last: m is left there
            model_set_params(m, (s ? rounds->start : rounds->params) + rounds->n_params * (size_t)r);
            st = mia_logits_views(m, d, idx, n, V, shift, threads, one, err);
            for (int i = 0; st == FP_OK && i < n; i++)
                memcpy(logits + ((((size_t)i * R + r) * MIA_ROUND_ROWS + s) * V) * C, one + (size_t)i * V * C,
                       sizeof(float) * (size_t)V * C);
        }
    if (st == FP_OK && R)
        model_set_params(m, rounds->params + rounds->n_params * (size_t)(R - 1));
    free(one);
    return st;
}

// (attacks/mia.h)
void mia_rounds_phi(const float *logits, int n, int R, int views, int n_classes, const int32_t *y,
                    MiaRoundStatistic stat, double *out) {
    int V = views > 1 ? views : 1, C = n_classes;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < R; r++)
            for (int v = 0; v < V; v++) {
                const float *up = logits + ((((size_t)i * R + r) * MIA_ROUND_ROWS + 0) * V + v) * C;
                const float *start = logits + ((((size_t)i * R + r) * MIA_ROUND_ROWS + 1) * V + v) * C;
                out[((size_t)i * R + r) * V + v] =
                    mia_phi(up, C, y[i]) - (stat == MIA_ROUND_GAIN ? mia_phi(start, C, y[i]) : 0);
            }
}

static void hook_local(void *ctx, int round, int client, Model *local) {
    TrainHooks *h = ctx; // called from a worker thread: only the target client's call writes
    if (client != h->client || h->view != MIA_CLIENT_RAW)
        return;
    model_get_params(local, h->captured);
    h->captured_round = round + 1;
}

static void hook_global(void *ctx, int round, Model *global) {
    TrainHooks *h = ctx;
    if (h->start_global)
        model_get_params(global, h->start_global);
    const MiaSeries *s = h->series;
    if (!s || h->st != FP_OK || round >= s->rounds)
        return;
    h->st = mia_logits(global, h->ex->train, s->idx, s->n, h->threads, h->series_logits, &h->err);
    if (h->st != FP_OK)
        return;
    int C = h->ex->train->n_classes;
    for (int i = 0; i < s->n; i++) {
        const float *z = h->series_logits + (size_t)i * C;
        int y = h->ex->train->y[s->idx[i]];
        s->py[(size_t)round * s->n + i] = (float)(1.0 / (1.0 + exp(-mia_phi(z, C, y))));
        s->mentr[(size_t)round * s->n + i] = (float)mia_mentr(z, C, y);
    }
}

// (attacks/mia.h)
FpStatus mia_train_model(const AttackEnv *env, const MiaTargetConfig *cfg, const uint32_t *idx, int n,
                         const int *bounds, uint64_t seed, int fresh, const Dataset *test, int quiet, int threads,
                         const MiaSeries *series, Model **out, int *round_out, cJSON **defense_out,
                         int *participations, MiaRounds *rounds_out, FpError *err) {
    Experiment *ex = env->ex;
    const Backend *be = ex->backend;
    *out = NULL;
    Model *m = model_clone(ex->model, be, err);
    if (!m)
        return err ? err->code : FP_ENOMEM;
    FpStatus st = fresh ? model_init(m, seed, err) : FP_OK;
    if (st != FP_OK) {
        model_free(m);
        return st;
    }
    size_t np = m->table.n_params;
    if (cfg->kind == MIA_TARGET_CENTRAL) {
        Tape *t = tape_create(be);
        float *mom = be->alloc(np * sizeof(float));
        LocalTrainConfig lc = {.epochs = cfg->central_epochs, .steps = 0, .batch_size = ex->fed.batch_size,
                               .lr = ex->fed.lr, .momentum = ex->fed.momentum, .weight_decay = ex->fed.weight_decay};
        RngStream shuffle = rng_stream(seed, RNG_SHUFFLE, 0, 0);
        if (!t || !mom)
            st = fp_fail(err, FP_ENOMEM, "out of memory preparing central training");
        else
            st = local_train(m, t, ex->train, idx, n, &lc, &shuffle, mom, err);
        tape_free(t);
        if (mom)
            be->free(mom);
        if (round_out)
            *round_out = 0;
    } else {
        int K = ex->fed.clients;
        int *counts = malloc(sizeof(int) * (size_t)K);
        if (!counts) {
            model_free(m);
            return fp_fail(err, FP_ENOMEM, "out of memory");
        }
        for (int k = 0; k < K; k++)
            counts[k] = bounds ? bounds[k + 1] - bounds[k] : (int)((long long)(k + 1) * n / K - (long long)k * n / K);
        Partition *part = partition_create(K, counts, err);
        free(counts);
        if (!part) {
            model_free(m);
            return err ? err->code : FP_ENOMEM;
        }
        for (int k = 0; k < K; k++)
            memcpy(part->idx[k], idx + (bounds ? bounds[k] : (long long)k * n / K),
                   sizeof(uint32_t) * (size_t)part->count[k]);
        TrainHooks hooks = {.series = series};
        TrainHooks *h = &hooks;
        if (series && !(h->series_logits = malloc(sizeof(float) * (size_t)series->n * ex->train->n_classes)))
            st = fp_fail(err, FP_ENOMEM, "out of memory");
        h->ex = ex;
        h->threads = threads;
        h->client = cfg->kind == MIA_TARGET_CLIENT ? cfg->client : -1;
        h->view = cfg->view;
        h->rounds = h->client >= 0 && cfg->view == MIA_CLIENT_ROUNDS ? rounds_out : NULL;
        if (h->rounds)
            memset(h->rounds, 0, sizeof *h->rounds);
        if (h->client >= 0) {
            h->start_global = malloc(np * sizeof(float));
            h->captured = malloc(np * sizeof(float));
            if (h->start_global)
                model_get_params(m, h->start_global);
        }
        FedSetup s = {.cfg = ex->fed, .seed = seed, .threads = threads, .backend = be, .global = m,
                      .train = ex->train, .test = test, .partition = part, .defense = ex->defense,
                      .defense_json = ex->defense_json, .quiet = quiet, .memo = ex->memo,
                      // Ranks share the clients of the target's federation (fl/fed.h); a
                      // fresh model (a reference or shadow model, trained by worker threads,
                      // some read back from a rank's own cache) trains whole on each rank.
                      .comm = fresh ? NULL : ex->comm,
                      // A client target's reference federations replay the target's
                      // participants round by round: the server, who sampled them, knows
                      // the schedule, and the client's model then comes from the same round
                      // after the same global updates in every model (attacks/target.h).
                      .replay_sampling = fresh && h->client >= 0, .sampling_seed = ex->seed,
                      // The local-model hook only where the raw client model is the target:
                      // with it, ranks cannot split the clients.
                      .hooks = {.ctx = h, .on_upload = hook_upload,
                                .on_local_model = h->client >= 0 && h->view == MIA_CLIENT_RAW ? hook_local : NULL,
                                .on_global = hook_global}};
        s.cfg.samples_per_client = 0; // the partition holds exactly the plan's pieces
        Federation *f = NULL;
        if (st != FP_OK)
            ; // the series' scratch failed
        else if (h->client >= 0 && (!h->start_global || !h->captured))
            st = fp_fail(err, FP_ENOMEM, "out of memory");
        else if (!(f = fed_create(&s, err)))
            st = err ? err->code : FP_ENOMEM;
        else
            st = fed_run(f, 0, err);
        if (st == FP_OK && h->st != FP_OK) {
            st = h->st;
            if (err)
                *err = h->err;
        }
        if (st == FP_OK && h->client >= 0) {
            if (!h->captured_round) // the server sampled it (pick_client): the defense kept it out
                st = fp_fail(err, FP_EPARAM, "%s.target_client: client %d never took part in %s federation: the "
                             "defense's self-sampling kept it out of every round it was sampled in", env->path,
                             h->client, fresh ? "a reference" : "the target's");
            else
                model_set_params(m, h->captured);
        }
        if (round_out)
            *round_out = h->captured_round;
        for (int k = 0; participations && f && k < K; k++)
            participations[k] = fed_client_participations(f, k);
        if (st == FP_OK && defense_out && !(*defense_out = fed_defense_json(f, err)))
            st = err && err->code ? err->code : FP_ENOMEM;
        if (st == FP_OK && defense_out) {
            const FedRoundResult *last = fed_round_result(f, fed_rounds_done(f) - 1);
            if (last)
                cJSON_AddItemToObject(*defense_out, "privacy", privacy_record_json(&last->privacy));
        }
        fed_free(f);
        partition_free(part);
        free(h->start_global);
        free(h->captured);
        free(h->series_logits);
        if (st != FP_OK && h->rounds)
            mia_rounds_free(h->rounds);
    }
    if (st != FP_OK) {
        model_free(m);
        return st;
    }
    *out = m;
    return FP_OK;
}

