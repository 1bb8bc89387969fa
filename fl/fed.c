// The server loop (see fl/fed.h for the round structure and the determinism rule).
#include "fl/fed.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/jsonv.h"
#include "datasets/power_load.h" // dataset_natural_partition

#define MAX_THREADS 16

static const char *const sampling_names[] = {"fixed", "bernoulli", NULL};
static const char *const partition_names[] = {"iid", "dirichlet", "shards", "natural", NULL};
static const char *const aggregation_names[] = {"weighted", "mean", NULL};

FpStatus fed_config_parse(const cJSON *json, const char *path, FedConfig *c, FpError *err) {
    static const char *const keys[] = {"clients", "sample_rate", "sampling", "rounds", "local_epochs", "local_steps",
                                       "batch_size", "lr", "momentum", "weight_decay", "partition", "alpha",
                                       "shards_per_client", "aggregation", "samples_per_client", NULL};
    memset(c, 0, sizeof *c);
    FP_TRY(jv_keys(json, path, keys, err));
    long long v;
    int choice;
    FP_TRY(jv_int(json, path, "clients", JV_OPTIONAL, 10, 1, 100000, &v, err));
    c->clients = (int)v;
    FP_TRY(jv_number(json, path, "sample_rate", JV_OPTIONAL, 1.0, 0, 1, 1, 0, &c->sample_rate, err));
    FP_TRY(jv_choice(json, path, "sampling", sampling_names, SAMPLING_FIXED, &choice, err));
    c->sampling = (ClientSampling)choice;
    FP_TRY(jv_int(json, path, "rounds", JV_OPTIONAL, 5, 1, 1000000, &v, err));
    c->rounds = (int)v;
    FP_TRY(jv_int(json, path, "local_epochs", JV_OPTIONAL, 1, 1, 100000, &v, err));
    c->local_epochs = (int)v;
    FP_TRY(jv_int(json, path, "local_steps", JV_OPTIONAL, 0, 0, 100000000, &v, err));
    c->local_steps = (int)v;
    FP_TRY(jv_int(json, path, "batch_size", JV_OPTIONAL, 64, 1, 1 << 20, &v, err));
    c->batch_size = (int)v;
    FP_TRY(jv_number(json, path, "lr", JV_OPTIONAL, 0.05, 0, 1, 1e6, 0, &c->lr, err));
    FP_TRY(jv_number(json, path, "momentum", JV_OPTIONAL, 0.0, 0, 0, 1, 1, &c->momentum, err));
    FP_TRY(jv_number(json, path, "weight_decay", JV_OPTIONAL, 0.0, 0, 0, 1e3, 0, &c->weight_decay, err));
    FP_TRY(jv_choice(json, path, "partition", partition_names, PARTITION_IID, &choice, err));
    c->partition = (PartitionKind)choice;
    FP_TRY(jv_number(json, path, "alpha", JV_OPTIONAL, 1.0, 0, 1, 1e6, 0, &c->alpha, err));
    FP_TRY(jv_int(json, path, "shards_per_client", JV_OPTIONAL, 2, 1, 1000, &v, err));
    c->shards_per_client = (int)v;
    FP_TRY(jv_choice(json, path, "aggregation", aggregation_names, AGG_WEIGHTED, &choice, err));
    c->aggregation = (AggregationKind)choice;
    FP_TRY(jv_int(json, path, "samples_per_client", JV_OPTIONAL, 0, 0, 1 << 30, &v, err));
    c->samples_per_client = (int)v;
    return FP_OK;
}

cJSON *fed_config_to_json(const FedConfig *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "clients", c->clients);
    cJSON_AddNumberToObject(j, "sample_rate", c->sample_rate);
    cJSON_AddStringToObject(j, "sampling", sampling_names[c->sampling]);
    cJSON_AddNumberToObject(j, "rounds", c->rounds);
    cJSON_AddNumberToObject(j, "local_epochs", c->local_epochs);
    cJSON_AddNumberToObject(j, "local_steps", c->local_steps);
    cJSON_AddNumberToObject(j, "batch_size", c->batch_size);
    cJSON_AddNumberToObject(j, "lr", c->lr);
    cJSON_AddNumberToObject(j, "momentum", c->momentum);
    cJSON_AddNumberToObject(j, "weight_decay", c->weight_decay);
    cJSON_AddStringToObject(j, "partition", partition_names[c->partition]);
    if (c->partition == PARTITION_DIRICHLET)
        cJSON_AddNumberToObject(j, "alpha", c->alpha);
    if (c->partition == PARTITION_SHARDS)
        cJSON_AddNumberToObject(j, "shards_per_client", c->shards_per_client);
    cJSON_AddStringToObject(j, "aggregation", aggregation_names[c->aggregation]);
    cJSON_AddNumberToObject(j, "samples_per_client", c->samples_per_client);
    return j;
}

// One worker's resources, reused across rounds.
typedef struct Worker {
    Tape *tape;
    Model *local;
    float *momentum;
    float *host_local;   // the local model's parameters on the host
} Worker;

struct Federation {
    FedSetup s;
    Partition *own_partition;
    const Partition *part;
    void *defense_state;
    DefenseSetup dsetup;
    int threads;
    Worker workers[MAX_THREADS];
    float *global_host;
    float **uploads;       // one per client slot of a round
    int *round_clients;
    uint32_t *sample_perm;  // client sampling scratch (clients entries)
    char *sample_chosen;
    FedRoundResult *results;
    int rounds_done;
    uint32_t *server_idx;  // training samples no client trains on (DefenseSetup.server_idx)
};

int fed_cohort_size(const FedConfig *c) {
    int m = (int)lround(c->sample_rate * c->clients);
    return m < 1 ? 1 : m > c->clients ? c->clients : m;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int client_samples(const Federation *f, int k) {
    int n = f->part->count[k];
    int cap = f->s.cfg.samples_per_client;
    return cap > 0 && cap < n ? cap : n;
}

Federation *fed_create(const FedSetup *setup, FpError *err) {
    Federation *f = fp_calloc(1, sizeof *f, err);
    if (!f)
        return NULL;
    f->s = *setup;
    const FedConfig *c = &setup->cfg;
    size_t np = setup->global->table.n_params;
    if (!f->s.defense)
        f->s.defense = defense_find("none");
    // Partition.
    if (setup->partition) {
        if (setup->partition->n_clients != c->clients) {
            fp_fail(err, FP_EPARAM, "federation.clients: %d, but the partition given has %d clients", c->clients,
                    setup->partition->n_clients);
            goto fail;
        }
        f->part = setup->partition;
    } else {
        RngStream rs = rng_stream(setup->seed, RNG_PARTITION, 0, 0);
        FpStatus st;
        if (setup->train->n < c->clients) {
            fp_fail(err, FP_EPARAM, "federation.clients: %d clients but only %d training samples", c->clients,
                    setup->train->n);
            goto fail;
        }
        if (c->partition == PARTITION_IID)
            st = partition_iid(setup->train->n, c->clients, &rs, &f->own_partition, err);
        else if (c->partition == PARTITION_NATURAL)
            st = dataset_natural_partition(setup->train, c->clients, &f->own_partition, err);
        else if (!setup->train->y) {
            fp_fail(err, FP_EPARAM, "federation.partition: label-based partitions need a classification dataset");
            goto fail;
        } else if (c->partition == PARTITION_DIRICHLET)
            st = partition_dirichlet(setup->train->y, setup->train->n, setup->train->n_classes, c->clients, c->alpha,
                                     &rs, &f->own_partition, err);
        else
            st = partition_shards(setup->train->y, setup->train->n, c->clients, c->shards_per_client, &rs,
                                  &f->own_partition, err);
        if (st != FP_OK)
            goto fail;
        f->part = f->own_partition;
    }
    // Defense.
    f->dsetup = (DefenseSetup){.seed = setup->seed, .params = &setup->global->table, .n_clients = c->clients,
                               .rounds = c->rounds, .sample_rate = c->sample_rate, .local_epochs = c->local_epochs,
                               .batch_size = c->batch_size, .lr = c->lr,
                               .cohort_size = c->sampling == SAMPLING_FIXED ? fed_cohort_size(c) : 0};
    f->dsetup.min_client_samples = 1 << 30;
    for (int k = 0; k < c->clients; k++) {
        int n = client_samples(f, k);
        if (n < f->dsetup.min_client_samples)
            f->dsetup.min_client_samples = n;
        if (n > f->dsetup.max_client_samples)
            f->dsetup.max_client_samples = n;
    }
    // The server's held-out samples: those in no client's (capped) share.
    char *used = calloc((size_t)setup->train->n, 1);
    f->server_idx = malloc(sizeof(uint32_t) * (size_t)setup->train->n);
    if (!used || !f->server_idx) {
        free(used);
        fp_fail(err, FP_ENOMEM, "out of memory preparing the federation");
        goto fail;
    }
    for (int k = 0; k < c->clients; k++)
        for (int i = 0; i < client_samples(f, k); i++)
            used[f->part->idx[k][i]] = 1;
    for (int i = 0; i < setup->train->n; i++)
        if (!used[i])
            f->server_idx[f->dsetup.n_server++] = (uint32_t)i;
    free(used);
    f->dsetup.model = setup->global;
    f->dsetup.server_data = setup->train;
    f->dsetup.server_idx = f->server_idx;
    cJSON *dflt = NULL;
    const cJSON *djson = setup->defense_json;
    if (!djson) {
        dflt = cJSON_CreateObject();
        cJSON_AddStringToObject(dflt, "name", f->s.defense->name);
        djson = dflt;
    }
    FpStatus dst = f->s.defense->create(djson, "defense", &f->dsetup, &f->defense_state, err);
    cJSON_Delete(dflt);
    if (dst != FP_OK)
        goto fail;
    // Workers.
    f->threads = setup->threads < 1 ? 1 : setup->threads > MAX_THREADS ? MAX_THREADS : setup->threads;
    if (setup->backend->device != DEVICE_CPU)
        f->threads = 1;
    for (int w = 0; w < f->threads; w++) {
        Worker *wk = &f->workers[w];
        wk->tape = tape_create(setup->backend);
        wk->local = model_clone(setup->global, setup->backend, err);
        wk->momentum = setup->backend->alloc(np * sizeof(float));
        wk->host_local = malloc(np * sizeof(float));
        if (!wk->tape || !wk->local || !wk->momentum || !wk->host_local) {
            fp_fail(err, FP_ENOMEM, "out of memory preparing %d client workers", f->threads);
            goto fail;
        }
    }
    f->global_host = malloc(np * sizeof(float));
    f->uploads = calloc((size_t)c->clients, sizeof(float *));
    f->round_clients = malloc(sizeof(int) * c->clients);
    f->sample_perm = malloc(sizeof(uint32_t) * c->clients);
    f->sample_chosen = malloc((size_t)c->clients);
    f->results = calloc((size_t)c->rounds, sizeof(FedRoundResult));
    if (!f->global_host || !f->uploads || !f->round_clients || !f->sample_perm || !f->sample_chosen || !f->results) {
        fp_fail(err, FP_ENOMEM, "out of memory preparing the federation");
        goto fail;
    }
    return f;
fail:
    fed_free(f);
    return NULL;
}

void fed_free(Federation *f) {
    if (!f)
        return;
    if (f->defense_state && f->s.defense)
        f->s.defense->destroy(f->defense_state);
    for (int w = 0; w < MAX_THREADS; w++) {
        Worker *wk = &f->workers[w];
        tape_free(wk->tape);
        model_free(wk->local);
        if (wk->momentum)
            f->s.backend->free(wk->momentum);
        free(wk->host_local);
    }
    if (f->uploads)
        for (int k = 0; k < f->s.cfg.clients; k++)
            free(f->uploads[k]);
    free(f->uploads);
    free(f->round_clients);
    free(f->sample_perm);
    free(f->sample_chosen);
    free(f->global_host);
    free(f->results);
    free(f->server_idx);
    partition_free(f->own_partition);
    free(f);
}

int fed_rounds_done(const Federation *f) { return f->rounds_done; }
const FedRoundResult *fed_round_result(const Federation *f, int r) {
    return r >= 0 && r < f->rounds_done ? &f->results[r] : NULL;
}
const Partition *fed_partition(const Federation *f) { return f->part; }
void *fed_defense_state(const Federation *f) { return f->defense_state; }

cJSON *fed_defense_json(const Federation *f) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", f->s.defense->name);
    if (f->s.defense->describe)
        f->s.defense->describe(f->defense_state, j);
    return j;
}

// -- one round ------------------------------------------------------------------------
typedef struct {
    Federation *f;
    int round;
    int worker;
    int n_participants;
    FpStatus st;
    FpError err;
} RoundJob;

static FpStatus client_update(Federation *f, Worker *wk, int round, int client, int participants, float *upload,
                              FpError *err) {
    const FedConfig *c = &f->s.cfg;
    size_t np = f->s.global->table.n_params;
    Model *local = wk->local;
    model_set_params(local, f->global_host);
    LocalTrainConfig lc = {.epochs = c->local_epochs, .steps = c->local_steps, .batch_size = c->batch_size,
                           .lr = c->lr, .momentum = c->momentum, .weight_decay = c->weight_decay};
    RngStream shuffle = rng_stream(f->s.seed, RNG_SHUFFLE, (uint32_t)round, (uint32_t)client);
    int n = client_samples(f, client);
    if (n > 0)
        FP_TRY(local_train(local, wk->tape, f->s.train, f->part->idx[client], n, &lc, &shuffle, wk->momentum, err));
    if (f->s.hooks.on_local_model)
        f->s.hooks.on_local_model(f->s.hooks.ctx, round, client, local);
    model_get_params(local, wk->host_local);
    UploadKind kind = f->s.defense->upload_kind(f->defense_state);
    const float *g = f->global_host, *w = wk->host_local;
    switch (kind) {
    case UPLOAD_WEIGHTS: memcpy(upload, w, np * sizeof(float)); break;
    case UPLOAD_DELTA: for (size_t i = 0; i < np; i++) upload[i] = w[i] - g[i]; break;
    case UPLOAD_GRADIENT: {
        float inv = (float)(1.0 / c->lr);
        for (size_t i = 0; i < np; i++)
            upload[i] = (g[i] - w[i]) * inv;
        break;
    }
    }
    DefenseRound dr = {.round = round, .client = client,
                       .rng = rng_stream(f->s.seed, RNG_DEFENSE, (uint32_t)round, (uint32_t)client),
                       .aux_rng = rng_stream(f->s.seed, RNG_DEFENSE_AUX, (uint32_t)round, (uint32_t)client),
                       .global = f->global_host, .n_local_samples = n, .model = local,
                       .local_data = f->s.train, .local_idx = f->part->idx[client], .n_local = n,
                       .participants = participants};
    return f->s.defense->client_perturb(f->defense_state, upload, &dr, err);
}

static void *round_worker(void *arg) {
    RoundJob *j = arg;
    Federation *f = j->f;
    Worker *wk = &f->workers[j->worker];
    for (int s = j->worker; s < j->n_participants; s += f->threads) {
        int client = f->round_clients[s];
        j->st = client_update(f, wk, j->round, client, j->n_participants, f->uploads[s], &j->err);
        if (j->st != FP_OK)
            break;
    }
    return NULL;
}

static int sample_clients(Federation *f, int round) {
    const FedConfig *c = &f->s.cfg;
    RngStream rs = rng_stream(f->s.seed, RNG_CLIENT_SAMPLE, (uint32_t)round, 0);
    int n = 0;
    if (c->sampling == SAMPLING_FIXED) {
        int m = fed_cohort_size(c);
        uint32_t *perm = f->sample_perm;
        char *chosen = f->sample_chosen;
        for (int k = 0; k < c->clients; k++)
            perm[k] = (uint32_t)k;
        if (m < c->clients)
            rng_shuffle_u32(&rs, perm, (uint32_t)c->clients);
        // Keep the chosen clients in increasing order: the aggregation order.
        memset(chosen, 0, c->clients > 0 ? (size_t)c->clients : 0);
        for (int k = 0; k < m; k++)
            chosen[perm[k]] = 1;
        for (int k = 0; k < c->clients; k++)
            if (chosen[k])
                f->round_clients[n++] = k;
    } else {
        for (int k = 0; k < c->clients; k++)
            if (rng_next_uniform(&rs) < c->sample_rate)
                f->round_clients[n++] = k;
    }
    // The defense's client self-sampling (e.g. Adaptive-Harmony's restrictive sampling).
    if (f->s.defense->participates) {
        int kept = 0;
        for (int s = 0; s < n; s++) {
            DefenseRound dr = {.round = round, .client = f->round_clients[s],
                               .rng = rng_stream(f->s.seed, RNG_DEFENSE, (uint32_t)round, (uint32_t)f->round_clients[s]),
                               .aux_rng = rng_stream(f->s.seed, RNG_DEFENSE_AUX, (uint32_t)round,
                                                     (uint32_t)f->round_clients[s]),
                               .global = f->global_host};
            if (f->s.defense->participates(f->defense_state, &dr))
                f->round_clients[kept++] = f->round_clients[s];
        }
        n = kept;
    }
    return n;
}

static FpStatus aggregate(Federation *f, int round, int n, FpError *err) {
    size_t np = f->s.global->table.n_params;
    double *weights = malloc(sizeof(double) * (n ? n : 1));
    float *agg = malloc(np * sizeof(float));
    if (!weights || !agg) {
        free(weights);
        free(agg);
        return fp_fail(err, FP_ENOMEM, "out of memory aggregating");
    }
    double total = 0;
    for (int s = 0; s < n; s++) {
        weights[s] = f->s.cfg.aggregation == AGG_WEIGHTED ? client_samples(f, f->round_clients[s]) : 1.0;
        total += weights[s];
    }
    for (int s = 0; s < n; s++)
        weights[s] = total > 0 ? weights[s] / total : 1.0 / n;
    FpStatus st = FP_OK;
    if (f->s.defense->server_aggregate)
        st = f->s.defense->server_aggregate(f->defense_state, round, (const float *const *)f->uploads, weights,
                                            f->round_clients, n, agg, err);
    else {
        // Accumulate in double, clients in order: deterministic and accurate.
        double *acc = calloc(np, sizeof(double));
        if (!acc)
            st = fp_fail(err, FP_ENOMEM, "out of memory aggregating");
        for (int s = 0; acc && s < n; s++) {
            const float *u = f->uploads[s];
            double w = weights[s];
            for (size_t i = 0; i < np; i++)
                acc[i] += w * u[i];
        }
        for (size_t i = 0; acc && i < np; i++)
            agg[i] = (float)acc[i];
        free(acc);
    }
    if (st == FP_OK) {
        float *g = f->global_host;
        switch (f->s.defense->upload_kind(f->defense_state)) {
        case UPLOAD_WEIGHTS: memcpy(g, agg, np * sizeof(float)); break;
        case UPLOAD_DELTA: for (size_t i = 0; i < np; i++) g[i] += agg[i]; break;
        case UPLOAD_GRADIENT: {
            float lr = (float)f->s.cfg.lr;
            for (size_t i = 0; i < np; i++)
                g[i] -= lr * agg[i];
            break;
        }
        }
        model_set_params(f->s.global, g);
    }
    free(weights);
    free(agg);
    return st;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

FpStatus fed_run(Federation *f, int first_round, FpError *err) {
    const FedConfig *c = &f->s.cfg;
    size_t np = f->s.global->table.n_params;
    const Backend *be = f->s.backend;
    if (be->set_threads)
        be->set_threads(1); // clients run in parallel; each GEMM single-threaded (determinism)
    double t_start = now_seconds();
    for (int r = first_round; r < c->rounds; r++) {
        double t0 = now_seconds();
        model_get_params(f->s.global, f->global_host);
        int n = sample_clients(f, r);
        for (int s = 0; s < n; s++)
            if (!f->uploads[s] && !(f->uploads[s] = malloc(np * sizeof(float))))
                return fp_fail(err, FP_ENOMEM, "out of memory for client uploads");
        RoundJob jobs[MAX_THREADS];
        pthread_t tid[MAX_THREADS];
        int nt = f->threads < n ? f->threads : (n > 0 ? n : 1);
        for (int w = 0; w < nt; w++)
            jobs[w] = (RoundJob){.f = f, .round = r, .worker = w, .n_participants = n};
        int started[MAX_THREADS] = {0};
        for (int w = 1; w < nt; w++)
            started[w] = pthread_create(&tid[w], NULL, round_worker, &jobs[w]) == 0;
        round_worker(&jobs[0]);
        for (int w = 1; w < nt; w++) {
            if (started[w])
                pthread_join(tid[w], NULL);
            else
                round_worker(&jobs[w]);
        }
        for (int w = 0; w < nt; w++)
            if (jobs[w].st != FP_OK) {
                if (err)
                    *err = jobs[w].err;
                return jobs[w].st;
            }
        if (f->s.hooks.on_upload)
            for (int s = 0; s < n; s++)
                f->s.hooks.on_upload(f->s.hooks.ctx, r, f->round_clients[s], f->uploads[s],
                                     f->s.defense->upload_kind(f->defense_state), &f->s.global->table);
        // A defense whose account releases every round (central noise) aggregates even
        // an empty one: the server's noise alone.
        if (n > 0 || (f->s.defense->release_empty_rounds && f->s.defense->server_aggregate))
            FP_TRY(aggregate(f, r, n, err));
        if (f->s.defense->end_round)
            f->s.defense->end_round(f->defense_state, r, n);
        FedRoundResult *res = &f->results[r];
        memset(res, 0, sizeof *res);
        res->train_seconds = now_seconds() - t0;
        res->round = r + 1;
        res->participants = n;
        defense_privacy(f->s.defense, f->defense_state, r + 1, &res->privacy);
        if (!all_finite(f->global_host, np)) {
            res->test_accuracy = res->test_loss = res->test_mae = res->test_mape = NAN;
            f->rounds_done = r + 1;
            return fp_fail(err, FP_EDIVERGED, "training diverged in round %d: the global model is not finite", r + 1);
        }
        res->test_mape = NAN;
        if (f->s.test->n_classes)
            FP_TRY(model_evaluate(f->s.global, f->s.test, f->threads, &res->test_accuracy, &res->test_loss,
                                  &res->test_mae, err));
        else { // regression: MSE, MAE and MAPE in one pass
            res->test_accuracy = NAN;
            FP_TRY(model_evaluate_regression(f->s.global, f->s.test, f->threads, &res->test_loss, &res->test_mae,
                                             &res->test_mape, err));
        }
        if (!isfinite(res->test_loss)) {
            f->rounds_done = r + 1;
            return fp_fail(err, FP_EDIVERGED, "training diverged in round %d: the test loss is not finite", r + 1);
        }
        res->seconds = now_seconds() - t0;
        f->rounds_done = r + 1;
        if (f->s.hooks.on_global)
            f->s.hooks.on_global(f->s.hooks.ctx, r, f->s.global);
        if (!f->s.quiet) {
            double elapsed = now_seconds() - t_start, eta = elapsed / (r + 1 - first_round) * (c->rounds - r - 1);
            if (f->s.test->n_classes)
                fprintf(stderr, "round %d/%d: %d clients, test accuracy %.4f, loss %.4f (%.1f s, ETA %.0f s)\n", r + 1,
                        c->rounds, n, res->test_accuracy, res->test_loss, res->seconds, eta);
            else
                fprintf(stderr, "round %d/%d: %d clients, test MSE %.5f, MAE %.5f, MAPE %.4f (%.1f s, ETA %.0f s)\n",
                        r + 1, c->rounds, n, res->test_loss, res->test_mae, res->test_mape, res->seconds, eta);
        }
    }
    return FP_OK;
}
