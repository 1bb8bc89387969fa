// The server loop (see fl/fed.h for the round structure and the determinism rule).
#include "fl/fed.h"

#include "fl/fed_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/jsonv.h"
#include "core/rng_secure.h" // RNG_SEED_SECURE
#include "datasets/power_load.h" // dataset_natural_partition

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
    // local_steps replaces local_epochs; both together would leave one silently unused.
    FP_TRY(jv_exclusive(json, path, "local_epochs", "local_steps", err));
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

int fed_cohort_size(const FedConfig *c) {
    int m = (int)lround(c->sample_rate * c->clients);
    return m < 1 ? 1 : m > c->clients ? c->clients : m;
}

// -- clients' data ---------------------------------------------------------------------
int fed_client_samples(const Federation *f, int k) {
    if (f->override && f->override[k])
        return f->override[k]->n;
    int n = f->part->count[k];
    int cap = f->s.cfg.samples_per_client;
    return cap > 0 && cap < n ? cap : n;
}

void fed_client_data(const Federation *f, int k, const Dataset **d, const uint32_t **idx, int *n) {
    const ClientOverride *o = f->override ? f->override[k] : NULL;
    *d = o ? o->data : f->s.train;
    *idx = o ? o->idx : f->part->idx[k];
    *n = fed_client_samples(f, k);
}

LocalTrainConfig fed_client_local(const Federation *f, int k) {
    const FedConfig *c = &f->s.cfg;
    LocalTrainConfig lc = {.epochs = c->local_epochs, .steps = c->local_steps, .batch_size = c->batch_size,
                           .lr = c->lr, .momentum = c->momentum, .weight_decay = c->weight_decay};
    const ClientOverride *o = f->override ? f->override[k] : NULL;
    if (o && o->probe) { // one step on all its samples: the FedSGD probe
        lc.steps = 1;
        lc.batch_size = o->n;
    }
    return lc;
}

// -- creation ------------------------------------------------------------------------------
static FpStatus make_partition(Federation *f, FpError *err) {
    const FedSetup *setup = &f->s;
    const FedConfig *c = &setup->cfg;
    if (setup->partition) {
        if (setup->partition->n_clients != c->clients)
            return fp_fail(err, FP_EPARAM, "federation.clients: %d, but the partition given has %d clients",
                           c->clients, setup->partition->n_clients);
        f->part = setup->partition;
        return FP_OK;
    }
    RngStream rs = rng_stream(setup->seed, RNG_PARTITION, 0, 0);
    if (setup->train->n < c->clients)
        return fp_fail(err, FP_EPARAM, "federation.clients: %d clients but only %d training samples", c->clients,
                       setup->train->n);
    if (c->partition == PARTITION_IID)
        FP_TRY(partition_iid(setup->train->n, c->clients, &rs, &f->own_partition, err));
    else if (c->partition == PARTITION_NATURAL)
        FP_TRY(dataset_natural_partition(setup->train, c->clients, &f->own_partition, err));
    else if (!setup->train->y)
        return fp_fail(err, FP_EPARAM, "federation.partition: label-based partitions need a classification dataset");
    else if (c->partition == PARTITION_DIRICHLET)
        FP_TRY(partition_dirichlet(setup->train->y, setup->train->n, setup->train->n_classes, c->clients, c->alpha,
                                   &rs, &f->own_partition, err));
    else
        FP_TRY(partition_shards(setup->train->y, setup->train->n, c->clients, c->shards_per_client, &rs,
                                &f->own_partition, err));
    f->part = f->own_partition;
    return FP_OK;
}

// The federation's one DefenseSetup, from the configured partition (a victim's data,
// given later, never changes it), and the defense's state created from it.
static FpStatus make_defense(Federation *f, FpError *err) {
    const FedSetup *setup = &f->s;
    const FedConfig *c = &setup->cfg;
    f->dsetup = (DefenseSetup){.seed = setup->seed, .params = &setup->global->table, .n_clients = c->clients,
                               .rounds = c->rounds, .sample_rate = c->sample_rate, .local_epochs = c->local_epochs,
                               .local_steps = c->local_steps, .batch_size = c->batch_size, .lr = c->lr,
                               .cohort_size = c->sampling == SAMPLING_FIXED ? fed_cohort_size(c) : 0,
                               .memo = setup->memo, .progress = setup->quiet ? NULL : stderr};
    f->dsetup.min_client_samples = 1 << 30;
    f->client_samples = malloc(sizeof(int) * (size_t)c->clients);
    if (!f->client_samples)
        return fp_fail(err, FP_ENOMEM, "out of memory preparing the federation");
    f->dsetup.client_samples = f->client_samples;
    for (int k = 0; k < c->clients; k++) {
        int n = fed_client_samples(f, k);
        f->client_samples[k] = n;
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
        return fp_fail(err, FP_ENOMEM, "out of memory preparing the federation");
    }
    for (int k = 0; k < c->clients; k++)
        for (int i = 0; i < fed_client_samples(f, k); i++)
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
    // The server's Bernoulli cohort sizes, drawn from the seed alone: what a calibration
    // to a target ε accounts (DefenseSetup.planned_cohorts).
    int *planned = c->sampling == SAMPLING_FIXED ? NULL : malloc(sizeof(int) * (size_t)(c->rounds > 0 ? c->rounds : 1));
    int *scratch = planned ? malloc(sizeof(int) * (size_t)c->clients) : NULL;
    for (int r = 0; scratch && r < c->rounds; r++)
        if ((planned[r] = fed_server_sample(c, setup->seed, r, scratch)) < 0) {
            free(scratch);
            scratch = NULL;
        }
    f->dsetup.planned_cohorts = scratch ? planned : NULL;
    free(scratch);
    FpStatus st = f->s.defense->create(djson, "defense", &f->dsetup, &f->defense_state, err);
    f->dsetup.planned_cohorts = NULL;
    free(planned);
    cJSON_Delete(dflt);
    if (st != FP_OK) {
        f->defense_state = NULL;
        return st;
    }
    f->kind = f->s.defense->upload_kind(f->defense_state);
    return FP_OK;
}

Federation *fed_create(const FedSetup *setup, FpError *err) {
    Federation *f = fp_calloc(1, sizeof *f, err);
    if (!f)
        return NULL;
    f->s = *setup;
    const FedConfig *c = &setup->cfg;
    size_t np = setup->global->table.n_params;
    if (!f->s.defense)
        f->s.defense = &defense_none;
    if (comm_size(setup->comm) > 1 && (setup->seed & RNG_SEED_SECURE)) {
        fp_fail(err, FP_EUNSUPPORTED, "a secure-RNG federation runs in one process: its sampling and server noise "
                "are fresh OS randomness in each process, so %d ranks would not agree (run it without mpirun)",
                comm_size(setup->comm));
        goto fail;
    }
    if (!defense_aggregation_valid(f->s.defense)) {
        fp_fail(err, FP_EPARAM, "defense %s states its aggregation wrongly: one form only, server_aggregate or "
                "sum_add with sum_finish (fl/defense.h)", f->s.defense->name);
        goto fail;
    }
    if (setup->canaries && !f->s.defense->record_canaries) {
        fp_fail(err, FP_EUNSUPPORTED, "defense %s does not sample audit canary records (only a record-level local "
                "procedure such as dp-sgd does)", f->s.defense->name);
        goto fail;
    }
    if (comm_rank(setup->comm) != 0)
        f->s.quiet = 1; // rank 0 speaks for the federation
    if (make_partition(f, err) != FP_OK || make_defense(f, err) != FP_OK)
        goto fail;
    // Workers.
    if (setup->threads > FED_MAX_THREADS) {
        fp_fail(err, FP_EPARAM, "threads: %d requested, at most %d", setup->threads, FED_MAX_THREADS);
        goto fail;
    }
    f->threads = setup->threads < 1 ? 1 : setup->threads;
    if (setup->backend->device != DEVICE_CPU)
        f->threads = 1;
    for (int w = 0; w < f->threads; w++) {
        Worker *wk = &f->workers[w];
        wk->tape = tape_create(setup->backend);
        wk->local = model_clone(setup->global, setup->backend, err);
        wk->momentum = setup->backend->alloc(np * sizeof(float));
        wk->host_local = malloc(np * sizeof(float));
        wk->upload = malloc(np * sizeof(float) + FED_SLOT_TRAILER);
        if (!wk->tape || !wk->local || !wk->momentum || !wk->host_local || !wk->upload) {
            fp_fail(err, FP_ENOMEM, "out of memory preparing %d client workers", f->threads);
            goto fail;
        }
    }
    f->global_host = malloc(np * sizeof(float));
    f->uploads = calloc((size_t)c->clients, sizeof(float *));
    f->slot_params = calloc((size_t)c->clients, sizeof(UploadParams));
    f->slot_done = calloc((size_t)c->clients, 1);
    f->round_clients = malloc(sizeof(int) * c->clients);
    f->sample_perm = malloc(sizeof(uint32_t) * c->clients);
    f->sample_chosen = malloc((size_t)c->clients);
    f->participations = calloc((size_t)c->clients, sizeof(int));
    f->results = calloc((size_t)c->rounds, sizeof(FedRoundResult));
    if (!f->global_host || !f->uploads || !f->slot_params || !f->slot_done || !f->round_clients || !f->sample_perm ||
        !f->sample_chosen || !f->participations || !f->results) {
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
    for (int w = 0; w < FED_MAX_THREADS; w++) {
        Worker *wk = &f->workers[w];
        tape_free(wk->tape);
        model_free(wk->local);
        if (wk->momentum)
            f->s.backend->free(wk->momentum);
        free(wk->host_local);
        free(wk->upload);
    }
    if (f->uploads)
        for (int k = 0; k < f->s.cfg.clients; k++)
            free(f->uploads[k]);
    if (f->override)
        for (int k = 0; k < f->s.cfg.clients; k++)
            if (f->override[k]) {
                free(f->override[k]->idx);
                free(f->override[k]);
            }
    free(f->override);
    free(f->rank_records);
    free(f->uploads);
    free(f->slot_params);
    free(f->slot_done);
    free(f->round_clients);
    free(f->sample_perm);
    free(f->sample_chosen);
    free(f->participations);
    free(f->global_host);
    if (f->results)
        for (int r = 0; r < f->s.cfg.rounds; r++)
            free((void *)f->results[r].clients);
    free(f->results);
    free(f->server_idx);
    free(f->client_samples);
    partition_free(f->own_partition);
    free(f);
}

int fed_rounds_done(const Federation *f) { return f->rounds_done; }
const FedRoundResult *fed_round_result(const Federation *f, int r) {
    return r >= 0 && r < f->rounds_done ? &f->results[r] : NULL;
}
const Partition *fed_partition(const Federation *f) { return f->part; }
void *fed_defense_state(const Federation *f) { return f->defense_state; }
int fed_client_participations(const Federation *f, int client) {
    return client >= 0 && client < f->s.cfg.clients ? f->participations[client] : 0;
}

cJSON *fed_defense_json(const Federation *f, FpError *err) {
    cJSON *j = cJSON_CreateObject();
    FpStatus st = j && cJSON_AddStringToObject(j, "name", f->s.defense->name) ? FP_OK : FP_ENOMEM;
    if (st == FP_OK && f->s.defense->describe)
        st = f->s.defense->describe(f->defense_state, j);
    if (st == FP_OK)
        return j;
    cJSON_Delete(j);
    fp_fail(err, st, st == FP_ENOMEM ? "out of memory while accounting privacy" : "the defense could not state its "
            "parameters");
    return NULL;
}

// -- sampling --------------------------------------------------------------------------------
// The server's sampling of round `round` into out (increasing client order); returns n.
// Fixed: m = round(q·N) without replacement; Bernoulli(q) each (RNG_CLIENT_SAMPLE, round).
static int server_sample(const FedConfig *c, uint64_t seed, int round, uint32_t *perm, char *chosen, int *out) {
    RngStream rs = rng_stream(seed, RNG_CLIENT_SAMPLE, (uint32_t)round, 0);
    int n = 0;
    if (c->sampling == SAMPLING_FIXED) {
        int m = fed_cohort_size(c);
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
                out[n++] = k;
    } else {
        for (int k = 0; k < c->clients; k++)
            if (rng_next_uniform(&rs) < c->sample_rate)
                out[n++] = k;
    }
    return n;
}

int fed_server_sample(const FedConfig *c, uint64_t seed, int round, int *clients) {
    uint32_t *perm = malloc(sizeof(uint32_t) * (size_t)c->clients);
    char *chosen = malloc((size_t)c->clients);
    int n = -1;
    if (perm && chosen)
        n = server_sample(c, seed, round, perm, chosen, clients);
    free(perm);
    free(chosen);
    return n;
}

void fed_sampled_clients(const FedConfig *c, uint64_t seed, unsigned char *ever) {
    int K = c->clients;
    memset(ever, 0, (size_t)K);
    uint32_t *perm = malloc(sizeof(uint32_t) * (size_t)K);
    char *chosen = malloc((size_t)K);
    int *out = malloc(sizeof(int) * (size_t)K);
    if (!perm || !chosen || !out) { // no scratch: claim everyone (a superset is safe for callers)
        memset(ever, 1, (size_t)K);
    } else
        for (int r = 0; r < c->rounds; r++) {
            int n = server_sample(c, seed, r, perm, chosen, out);
            for (int s = 0; s < n; s++)
                ever[out[s]] = 1;
        }
    free(perm);
    free(chosen);
    free(out);
}

// The participants of round `round`: the server's sampling, then the defense's own
// client self-sampling (e.g. Adaptive-Harmony's restrictive sampling).
static int sample_clients(Federation *f, int round) {
    uint64_t seed = f->s.replay_sampling ? f->s.sampling_seed : f->s.seed;
    int n = server_sample(&f->s.cfg, seed, round, f->sample_perm, f->sample_chosen, f->round_clients);
    if (f->s.defense->participates) {
        int kept = 0;
        for (int s = 0; s < n; s++) {
            DefenseRound dr = fed_defense_round(f, round, f->round_clients[s]);
            if (f->s.defense->participates(f->defense_state, &dr))
                f->round_clients[kept++] = f->round_clients[s];
        }
        n = kept;
    }
    return n;
}

// -- aggregation -----------------------------------------------------------------------------
// Two forms (DefenseOps): a running sum, where each upload joins the sum as it arrives, in
// client order, and is freed (a streamed round: one sum and the uploads in flight, one per
// worker), and the gather form, where every upload is held until the defense's
// server_aggregate runs. Both add in client order, so a round's aggregate is the same
// bits however its clients were spread over threads and ranks.
float *fed_slot_buffer(Federation *f, int slot, FpError *err) {
    if (!f->uploads[slot] &&
        !(f->uploads[slot] = malloc(f->s.global->table.n_params * sizeof(float) + FED_SLOT_TRAILER)))
        fp_fail(err, FP_ENOMEM, "out of memory for client uploads");
    return f->uploads[slot];
}

void fed_slot_release(Federation *f, int slot) {
    free(f->uploads[slot]);
    f->uploads[slot] = NULL;
}

int fed_round_streams(const Federation *f) {
    const DefenseOps *ops = f->s.defense;
    if (defense_gathers(ops))
        return 0;
    // Across ranks a hook that sees uploads or local models, or a defense's per-client
    // state, needs every upload on every rank: those rounds gather (fl/ranks.c).
    return fed_ranks(f) == 1 || (!f->s.hooks.on_upload && !f->s.hooks.on_local_model && !ops->client_state_size);
}

// The FedAvg weights of the round's n slots (they sum to 1): from the clients' sample
// counts (or uniform), known before any upload.
static FpStatus round_weights(const Federation *f, int n, double **out, FpError *err) {
    double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!(*out = w))
        return fp_fail(err, FP_ENOMEM, "out of memory aggregating");
    double total = 0;
    for (int s = 0; s < n; s++) {
        w[s] = f->s.cfg.aggregation == AGG_WEIGHTED ? fed_client_samples(f, f->round_clients[s]) : 1.0;
        total += w[s];
    }
    for (int s = 0; s < n; s++)
        w[s] = total > 0 ? w[s] / total : 1.0 / n;
    return FP_OK;
}

void fed_round_sum_add(Federation *f, RoundSum *sum, int slot, const float *upload) {
    if (f->s.hooks.on_upload)
        f->s.hooks.on_upload(f->s.hooks.ctx, f->rounds_done, f->round_clients[slot], upload, f->kind,
                             &f->s.global->table, &f->slot_params[slot]);
    defense_sum_add(f->s.defense, f->defense_state, f->rounds_done, f->n_round, f->s.global->table.n_params, sum->acc,
                    upload, sum->weights[slot]);
    f->slot_done[slot] = 1;
}

// A streamed round in one process: worker w forms slots w, w + T, ... into its own buffer
// (a slot formed before, e.g. by fed_observe, is taken from its slot), waits until every
// earlier slot is added, adds its own and lets the next one in. So the uploads join the
// sum in client order whatever the thread count, and at most one upload per worker is
// alive. A failing slot waits for its turn too, so the error reported is the first
// failing slot's, whatever the threads.
typedef struct StreamRun {
    Federation *f;
    RoundSum *sum;
    pthread_mutex_t lock;
    pthread_cond_t turn;
    int next;          // the next slot to add (under lock)
    int failed;        // a slot failed: everyone stops
    FpStatus st;
    FpError err;
} StreamRun;

typedef struct {
    StreamRun *run;
    int worker, stride;
} StreamJob;

static void *stream_worker(void *arg) {
    StreamJob *j = arg;
    StreamRun *run = j->run;
    Federation *f = run->f;
    Worker *wk = &f->workers[j->worker];
    for (int s = j->worker; s < f->n_round; s += j->stride) {
        const float *u = f->uploads[s];
        FpError e = {0};
        FpStatus st = FP_OK;
        if (!f->slot_done[s]) {
            st = fed_client_upload(f, wk, f->rounds_done, f->round_clients[s], wk->upload, &f->slot_params[s], &e);
            u = wk->upload;
        }
        pthread_mutex_lock(&run->lock);
        while (run->next != s && !run->failed)
            pthread_cond_wait(&run->turn, &run->lock);
        if (!run->failed && st != FP_OK) {
            run->failed = 1;
            run->st = st;
            run->err = e;
        }
        int stop = run->failed;
        pthread_mutex_unlock(&run->lock);
        if (!stop) { // this slot's turn: only this thread touches the sum now
            fed_round_sum_add(f, run->sum, s, u);
            fed_slot_release(f, s);
        }
        pthread_mutex_lock(&run->lock);
        if (!stop)
            run->next = s + 1;
        pthread_cond_broadcast(&run->turn);
        pthread_mutex_unlock(&run->lock);
        if (stop)
            break;
    }
    return NULL;
}

static FpStatus round_stream(Federation *f, RoundSum *sum, FpError *err) {
    const Backend *be = f->s.backend;
    if (be->set_threads)
        be->set_threads(1); // clients run in parallel; each GEMM single-threaded (determinism)
    StreamRun run = {.f = f, .sum = sum};
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.turn, NULL);
    int nt = f->threads < f->n_round ? f->threads : (f->n_round > 0 ? f->n_round : 1);
    StreamJob jobs[FED_MAX_THREADS];
    pthread_t tid[FED_MAX_THREADS];
    int started[FED_MAX_THREADS] = {0};
    for (int w = 0; w < nt; w++)
        jobs[w] = (StreamJob){.run = &run, .worker = w, .stride = nt};
    for (int w = 1; w < nt; w++)
        started[w] = pthread_create(&tid[w], NULL, stream_worker, &jobs[w]) == 0;
    // A worker whose thread did not start: its slots are formed after the started
    // workers wait for them, so run them all in this thread in turn instead.
    int all_started = 1;
    for (int w = 1; w < nt; w++)
        all_started &= started[w];
    if (all_started)
        stream_worker(&jobs[0]);
    else {
        pthread_mutex_lock(&run.lock);
        run.failed = 1;
        run.st = fp_fail(&run.err, FP_ENOMEM, "could not start %d client threads", nt);
        pthread_cond_broadcast(&run.turn);
        pthread_mutex_unlock(&run.lock);
    }
    for (int w = 1; w < nt; w++)
        if (started[w])
            pthread_join(tid[w], NULL);
    pthread_cond_destroy(&run.turn);
    pthread_mutex_destroy(&run.lock);
    if (run.failed) {
        if (err)
            *err = run.err;
        return run.st;
    }
    return FP_OK;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

// The round's UploadParams over its participants.
static UploadSummary summarize_uploads(const Federation *f, int n) {
    UploadSummary u = {.uploads = n};
    for (int s = 0; s < n; s++) {
        const UploadParams *p = &f->slot_params[s];
        if (s == 0) {
            u.noise = p->noise;
            u.clip_norm = p->clip_norm;
            u.noise_scale_min = u.noise_scale_max = p->noise_scale;
            u.clip_min = u.clip_max = p->clip;
            u.epsilon_min = u.epsilon_max = p->epsilon;
            u.server_noise_scale = p->server_noise_scale;
            continue;
        }
        u.noise_scale_min = fmin(u.noise_scale_min, p->noise_scale);
        u.noise_scale_max = fmax(u.noise_scale_max, p->noise_scale);
        u.clip_min = fmin(u.clip_min, p->clip);
        u.clip_max = fmax(u.clip_max, p->clip);
        u.epsilon_min = fmin(u.epsilon_min, p->epsilon);
        u.epsilon_max = fmax(u.epsilon_max, p->epsilon);
        u.server_noise_scale = fmax(u.server_noise_scale, p->server_noise_scale);
    }
    return u;
}

// -- one round, step by step --------------------------------------------------------------
FpStatus fed_round_begin(Federation *f, int *n_out, FpError *err) {
    if (f->round_open)
        return fp_fail(err, FP_EPARAM, "round %d is already begun", f->rounds_done + 1);
    if (f->rounds_done >= f->s.cfg.rounds)
        return fp_fail(err, FP_EPARAM, "federation.rounds: all %d planned rounds are done", f->s.cfg.rounds);
    int r = f->rounds_done;
    f->round_t0 = fp_monotonic_seconds();
    model_get_params(f->s.global, f->global_host);
    int n = sample_clients(f, r);
    memset(f->slot_done, 0, (size_t)f->s.cfg.clients);
    f->n_round = n;
    f->round_open = 1;
    if (n_out)
        *n_out = n;
    return FP_OK;
}

int fed_round_participants(const Federation *f, const int **clients) {
    if (clients)
        *clients = f->round_clients;
    return f->round_open ? f->n_round : 0;
}

typedef struct {
    Federation *f;
    const int *slots;
    int n_slots, worker, stride;
    FpStatus st;
    FpError err;
} RoundJob;

static void *round_worker(void *arg) {
    RoundJob *j = arg;
    Federation *f = j->f;
    Worker *wk = &f->workers[j->worker];
    for (int i = j->worker; i < j->n_slots; i += j->stride) {
        int s = j->slots[i];
        j->st = fed_client_upload(f, wk, f->rounds_done, f->round_clients[s], f->uploads[s], &f->slot_params[s],
                                  &j->err);
        if (j->st != FP_OK)
            break;
    }
    return NULL;
}

FpStatus fed_round_run(Federation *f, const int *slots, int n, FpError *err) {
    if (!f->round_open)
        return fp_fail(err, FP_EPARAM, "no round is begun");
    int *todo = malloc(sizeof(int) * (size_t)(f->n_round > 0 ? f->n_round : 1));
    if (!todo)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    int m = 0;
    for (int i = 0; i < (slots ? n : f->n_round); i++) {
        int s = slots ? slots[i] : i;
        if (s < 0 || s >= f->n_round) {
            free(todo);
            return fp_fail(err, FP_EPARAM, "slot %d: the round has %d participants", s, f->n_round);
        }
        int dup = 0;
        for (int k = 0; k < m; k++)
            dup |= todo[k] == s;
        if (!f->slot_done[s] && !dup)
            todo[m++] = s;
    }
    for (int i = 0; i < m; i++)
        if (!fed_slot_buffer(f, todo[i], err)) {
            free(todo);
            return FP_ENOMEM;
        }
    const Backend *be = f->s.backend;
    if (be->set_threads)
        be->set_threads(1); // clients run in parallel; each GEMM single-threaded (determinism)
    RoundJob jobs[FED_MAX_THREADS];
    pthread_t tid[FED_MAX_THREADS];
    int nt = f->threads < m ? f->threads : (m > 0 ? m : 1);
    for (int w = 0; w < nt; w++)
        jobs[w] = (RoundJob){.f = f, .slots = todo, .n_slots = m, .worker = w, .stride = nt};
    int started[FED_MAX_THREADS] = {0};
    for (int w = 1; w < nt; w++)
        started[w] = pthread_create(&tid[w], NULL, round_worker, &jobs[w]) == 0;
    round_worker(&jobs[0]);
    for (int w = 1; w < nt; w++) {
        if (started[w])
            pthread_join(tid[w], NULL);
        else
            round_worker(&jobs[w]);
    }
    FpStatus st = FP_OK;
    for (int w = 0; w < nt && st == FP_OK; w++)
        if (jobs[w].st != FP_OK) {
            st = jobs[w].st;
            if (err)
                *err = jobs[w].err;
        }
    for (int i = 0; st == FP_OK && i < m; i++)
        f->slot_done[todo[i]] = 1;
    free(todo);
    return st;
}

const float *fed_round_upload(const Federation *f, int slot, const UploadParams **params) {
    if (!f->round_open || slot < 0 || slot >= f->n_round || !f->slot_done[slot])
        return NULL;
    if (params)
        *params = &f->slot_params[slot];
    return f->uploads[slot];
}

FpStatus fed_round_set_upload(Federation *f, int slot, const float *upload, const UploadParams *params,
                              FpError *err) {
    if (!f->round_open || slot < 0 || slot >= f->n_round)
        return fp_fail(err, FP_EPARAM, "slot %d is not a participant of a begun round", slot);
    if (!fed_slot_buffer(f, slot, err))
        return FP_ENOMEM;
    memcpy(f->uploads[slot], upload, sizeof(float) * f->s.global->table.n_params);
    f->slot_params[slot] = params ? *params : upload_params_none();
    f->slot_done[slot] = 1;
    return FP_OK;
}

FpStatus fed_round_finish(Federation *f, FpError *err) {
    if (!f->round_open)
        return fp_fail(err, FP_EPARAM, "no round is begun");
    const FedConfig *c = &f->s.cfg;
    size_t np = f->s.global->table.n_params;
    int r = f->rounds_done, n = f->n_round;
    // A defense whose account releases every round (central noise) aggregates even
    // an empty one: the server's noise alone.
    int release = n > 0 || (f->s.defense->release_empty_rounds && defense_aggregates(f->s.defense));
    RoundSum sum = {0};
    int streams = fed_round_streams(f);
    FpStatus st = FP_OK;
    if (!streams) // every upload first (across ranks: every record to every rank)
        st = fed_ranks(f) > 1 ? fed_round_form_ranks(f, err) : fed_round_run(f, NULL, 0, err);
    float *agg = st == FP_OK ? malloc(np * sizeof(float)) : NULL;
    if (st == FP_OK)
        st = agg ? round_weights(f, n, &sum.weights, err) : fp_fail(err, FP_ENOMEM, "out of memory aggregating");
    if (st == FP_OK && streams && fed_rank(f) == 0 && !(sum.acc = calloc(np, sizeof(double)))) // only rank 0 sums
        st = fp_fail(err, FP_ENOMEM, "out of memory aggregating");
    if (st != FP_OK && streams && fed_ranks(f) > 1)
        fed_rank_abort(f, err); // the other ranks are streaming: without this rank they would wait forever
    if (st == FP_OK && streams) {
        if (fed_ranks(f) > 1)
            st = fed_round_stream_ranks(f, &sum, agg, err); // agg finished on rank 0, on every rank
        else {
            st = round_stream(f, &sum, err);
            if (st == FP_OK && release)
                st = defense_sum_finish(f->s.defense, f->defense_state, r, n, np, sum.acc, agg, err);
        }
    } else if (st == FP_OK) {
        if (f->s.hooks.on_upload)
            for (int s = 0; s < n; s++)
                f->s.hooks.on_upload(f->s.hooks.ctx, r, f->round_clients[s], f->uploads[s], f->kind,
                                     &f->s.global->table, &f->slot_params[s]);
        if (release)
            st = defense_aggregate(f->s.defense, f->defense_state, r, (const float *const *)f->uploads, sum.weights,
                                   f->round_clients, n, np, agg, err);
    }
    if (st == FP_OK && release) {
        upload_to_weights(f->kind, agg, f->global_host, np, f->s.cfg.lr, f->global_host);
        model_set_params(f->s.global, f->global_host);
    }
    free(sum.acc);
    free(sum.weights);
    free(agg);
    FP_TRY(st);
    if (f->s.defense->end_round)
        f->s.defense->end_round(f->defense_state, r, n);
    for (int s = 0; s < n; s++)
        f->participations[f->round_clients[s]]++;
    f->round_open = 0;
    FedRoundResult *res = &f->results[r];
    memset(res, 0, sizeof *res);
    int *ids = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!ids)
        return fp_fail(err, FP_ENOMEM, "out of memory recording round %d", r + 1);
    memcpy(ids, f->round_clients, sizeof(int) * (size_t)n);
    res->clients = ids;
    res->train_seconds = fp_monotonic_seconds() - f->round_t0;
    res->round = r + 1;
    res->participants = n;
    res->upload = summarize_uploads(f, n);
    // The account is for the results, which rank 0 alone writes: the other ranks of one
    // federation skip it (the field's PLD figure alone was about 40% of a cheap round's
    // CPU, repeated on every rank). Nothing a rank trains on reads it: the privacy slot
    // changes no state that training uses (DefenseOps.privacy; dp-sgd caches figures
    // only), and every calibration and noise scale comes from create(), the same on every
    // rank. Their record says it was not accounted (privacy_record_unaccounted).
    if (f->s.account_final_only && r + 1 != f->s.cfg.rounds) {
        privacy_record_unaccounted(&res->privacy, PRIVACY_NOT_FINAL_REASON);
    } else if (fed_rank(f) == 0) {
        FpStatus pst = defense_privacy(f->s.defense, f->defense_state, r + 1, &res->privacy, err);
        if (pst != FP_OK && fed_ranks(f) > 1)
            fed_rank_abort(f, err); // this rank's own failure: the others would wait for it next round
        FP_TRY(pst);
    } else {
        privacy_record_unaccounted(&res->privacy, PRIVACY_UNACCOUNTED_REASON);
    }
    f->rounds_done = r + 1;
    if (!all_finite(f->global_host, np)) {
        res->test_accuracy = res->test_loss = res->test_mae = res->test_mape = NAN;
        return fp_fail(err, FP_EDIVERGED, "training diverged in round %d: the global model is not finite", r + 1);
    }
    res->test_mape = NAN;
    if (f->s.test->n_classes)
        FP_TRY(model_evaluate(f->s.global, f->s.test, f->threads, &res->test_accuracy, &res->test_loss, &res->test_mae,
                              err));
    else { // regression: MSE, MAE and MAPE in one pass
        res->test_accuracy = NAN;
        FP_TRY(model_evaluate_regression(f->s.global, f->s.test, f->threads, &res->test_loss, &res->test_mae,
                                         &res->test_mape, err));
    }
    if (!isfinite(res->test_loss))
        return fp_fail(err, FP_EDIVERGED, "training diverged in round %d: the test loss is not finite", r + 1);
    res->seconds = fp_monotonic_seconds() - f->round_t0;
    if (f->s.hooks.on_global)
        f->s.hooks.on_global(f->s.hooks.ctx, r, f->s.global);
    if (!f->s.quiet) {
        if (f->run_t0 == 0 || f->run_first > r) {
            f->run_t0 = f->round_t0;
            f->run_first = r;
        }
        double elapsed = fp_monotonic_seconds() - f->run_t0, eta = elapsed / (r + 1 - f->run_first) * (c->rounds - r - 1);
        if (f->s.test->n_classes)
            fprintf(stderr, "round %d/%d: %d clients, test accuracy %.4f, loss %.4f (%.1f s, ETA %.0f s)\n", r + 1,
                    c->rounds, n, res->test_accuracy, res->test_loss, res->seconds, eta);
        else
            fprintf(stderr, "round %d/%d: %d clients, test MSE %.5f, MAE %.5f, MAPE %.4f (%.1f s, ETA %.0f s)\n",
                    r + 1, c->rounds, n, res->test_loss, res->test_mae, res->test_mape, res->seconds, eta);
    }
    return FP_OK;
}

FpStatus fed_run(Federation *f, int first_round, FpError *err) {
    if (first_round != f->rounds_done || f->round_open)
        return fp_fail(err, FP_EPARAM, "fed_run: rounds run in order: the next is round %d, not %d",
                       f->rounds_done + 1, first_round + 1);
    f->run_t0 = fp_monotonic_seconds();
    f->run_first = first_round;
    while (f->rounds_done < f->s.cfg.rounds) {
        FP_TRY(fed_round_begin(f, NULL, err));
        FP_TRY(fed_round_finish(f, err));
    }
    return FP_OK;
}
