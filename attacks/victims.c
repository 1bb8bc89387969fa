// Victims inside the configured federation (see attacks/victims.h).
#include "attacks/victims.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"

FpStatus victims_parse(const AttackEnv *env, int n_victims, VictimOptions *o, FpError *err) {
    const cJSON *j = env->attack_json;
    const Experiment *ex = env->ex;
    char p[256];
    memset(o, 0, sizeof *o);
    o->round = -1;
    o->client = -1; // not given
    static const char *const locals[] = {"probe", "federation", NULL};
    FP_TRY(jv_choice(j, env->path, "local", locals, 0, &o->federation_local, err));
    const char *observers[FED_OBSERVERS + 1] = {NULL};
    for (int k = 0; k < FED_OBSERVERS; k++)
        observers[k] = fed_observer_name((FedObserver)k);
    int observer;
    FP_TRY(jv_choice(j, env->path, "observer", observers, FED_OBSERVER_SERVER, &observer, err));
    o->observer = (FedObserver)observer;
    const cJSON *ob;
    FP_TRY(jv_object(j, env->path, "observe", JV_OPTIONAL, &ob, err));
    const char *op = jv_path(p, sizeof p, env->path, "observe");
    if (ob) {
        static const char *const keys[] = {"round", "client", NULL};
        long long v;
        FP_TRY(jv_keys(ob, op, keys, err));
        FP_TRY(jv_int(ob, op, "client", JV_OPTIONAL, -1, 0, ex->fed.clients - 1, &v, err));
        o->client = (int)v;
        if (cJSON_GetObjectItemCaseSensitive(ob, "round")) { // 1-based, as results number rounds
            FP_TRY(jv_int(ob, op, "round", JV_REQUIRED, 1, 1, ex->fed.rounds, &v, err));
            o->round = (int)v - 1;
        }
    }
    if (n_victims > ex->fed.clients)
        return fp_fail(err, FP_EPARAM, "%s: %d observed uploads (one victim client each) but federation.clients is %d",
                       env->path, n_victims, ex->fed.clients);
    // Before any work: does the server sample each victim (in the declared round, or ever)?
    // A defense's self-sampling can still keep one out; fed_observe says so then.
    int K = ex->fed.clients;
    int *in_round = malloc(sizeof(int) * (size_t)K);
    unsigned char *ever = malloc((size_t)K);
    FpStatus st = in_round && ever ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    int n_round = 0;
    if (st == FP_OK && o->round >= 0 && (n_round = fed_server_sample(&ex->fed, ex->seed, o->round, in_round)) < 0)
        st = fp_fail(err, FP_ENOMEM, "out of memory");
    if (st == FP_OK && o->round < 0)
        fed_sampled_clients(&ex->fed, ex->seed, ever);
    // Default: the lowest-numbered client that takes part (in the declared round, or ever).
    o->client_defaulted = o->client < 0;
    for (int k = 0; st == FP_OK && o->client < 0 && k < K; k++)
        if (o->round >= 0 ? n_round > 0 && in_round[0] == k : ever[k])
            o->client = k;
    if (st == FP_OK && o->client < 0)
        st = o->round >= 0 ? fp_fail(err, FP_EPARAM, "%s: no client takes part in round %d", op, o->round + 1)
                           : fp_fail(err, FP_EPARAM, "%s: the server samples no client in the federation's %d rounds",
                                     op, ex->fed.rounds);
    for (int v = 0; st == FP_OK && v < n_victims; v++) {
        int client = (o->client + v) % K, found = 0;
        for (int s = 0; o->round >= 0 && s < n_round; s++)
            found |= in_round[s] == client;
        if (o->round >= 0 && !found)
            st = fp_fail(err, FP_EPARAM, "%s: client %d does not take part in round %d (%d of %d clients sampled)%s",
                         op, client, o->round + 1, n_round, K,
                         n_victims > 1 ? "; batch b's victim is client observe.client + b" : "");
        else if (o->round < 0 && !ever[client])
            st = fp_fail(err, FP_EPARAM, "%s: client %d is never sampled in the federation's %d rounds", op, client,
                         ex->fed.rounds);
    }
    free(in_round);
    free(ever);
    return st;
}

FpStatus victims_observe(const AttackEnv *env, const VictimOptions *o, const DefenseOps *defense,
                         const cJSON *defense_json, const Dataset *d, const uint32_t *idx, int per_victim,
                         int n_victims, FedObservation *out, cJSON **defense_out, FpError *err) {
    const Experiment *ex = env->ex;
    if (defense_out)
        *defense_out = NULL;
    // The federation trains its own copy of the experiment's initial model.
    Experiment fex = *ex;
    fex.defense = defense;
    fex.defense_json = defense_json;
    fex.model = model_clone(ex->model, ex->backend, err);
    if (!fex.model)
        return err && err->code ? err->code : FP_ENOMEM;
    FedObservePoint *pts = calloc((size_t)n_victims, sizeof *pts);
    Federation *f = pts ? experiment_federation(&fex, NULL, env->quiet, err) : NULL;
    FpStatus st = f     ? FP_OK
                  : pts ? (err && err->code ? err->code : FP_ENOMEM)
                        : fp_fail(err, FP_ENOMEM, "out of memory");
    for (int v = 0; st == FP_OK && v < n_victims; v++) {
        int client = (o->client + v) % ex->fed.clients;
        FedClientData cd = {.data = d, .idx = idx + (size_t)v * per_victim, .n = per_victim,
                            .probe = !o->federation_local};
        st = fed_set_client_data(f, client, &cd, err);
        pts[v] = (FedObservePoint){.client = client, .round = o->round, .observer = o->observer};
    }
    if (st == FP_OK) {
        st = fed_observe(f, pts, n_victims, out, err);
        char p[256];
        if (st == FP_EPARAM) // which victim does not take part: the observation point is the input
            fp_error_prefix(err, jv_path(p, sizeof p, env->path, "observe"));
    }
    if (st == FP_OK && defense_out && !(*defense_out = fed_defense_json(f, err)))
        st = err && err->code ? err->code : FP_ENOMEM;
    fed_free(f);
    model_free(fex.model);
    free(pts);
    return st;
}

void victims_gradient(const Experiment *ex, const FedObservation *ob, float *out) {
    upload_gradient_estimate(ob->kind, ob->upload, ob->global, ex->model->table.n_params, ex->fed.lr,
                             ob->local_steps, ex->fed.weight_decay, out);
}

cJSON *victims_observer_privacy(const FedObservation *ob) {
    const cJSON *rec = ob->privacy;
    const cJSON *sound = cJSON_GetObjectItemCaseSensitive(rec, "sound");
    const cJSON *upload = cJSON_GetObjectItemCaseSensitive(sound, "upload");
    int use_upload = ob->point.observer == FED_OBSERVER_SERVER && upload;
    const cJSON *fig = use_upload ? upload : sound;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "observer", fed_observer_name(ob->point.observer));
    cJSON_AddStringToObject(j, "figure", use_upload ? "sound.upload" : "sound");
    cJSON_AddNumberToObject(j, "round", ob->round + 1);
    static const char *const keys[] = {"epsilon_total", "epsilon_total_conditional", NULL};
    for (int k = 0; keys[k]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(fig, keys[k]);
        if (v)
            cJSON_AddItemToObject(j, keys[k], cJSON_Duplicate(v, 1));
    }
    const cJSON *delta = cJSON_GetObjectItemCaseSensitive(sound, "delta");
    if (delta)
        cJSON_AddItemToObject(j, "delta", cJSON_Duplicate(delta, 1));
    // The figure's own record's label (sound.upload has its own), else the record's.
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(fig, "guarantee");
    if (!cJSON_IsString(g))
        g = cJSON_GetObjectItemCaseSensitive(rec, "guarantee");
    cJSON_AddStringToObject(j, "guarantee", cJSON_IsString(g) ? g->valuestring : "none");
    const cJSON *notion = cJSON_GetObjectItemCaseSensitive(fig, "notion");
    cJSON_AddStringToObject(j, "notion", cJSON_IsString(notion) ? notion->valuestring : "");
    return j;
}

cJSON *victims_observation_json(const Experiment *ex, const VictimOptions *o, const FedObservation *ob) {
    int pub = ob->point.observer == FED_OBSERVER_PUBLIC;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "round", ob->round + 1);
    cJSON_AddNumberToObject(j, "client", ob->client);
    cJSON_AddStringToObject(j, "observer", fed_observer_name(ob->point.observer));
    cJSON_AddStringToObject(j, "point", ob->point.round < 0 ? "the client's first participation" : "declared round");
    cJSON_AddStringToObject(j, "observed",
                            pub ? "the global model released after the round: the aggregate of every participant's "
                                  "upload, with the server's noise"
                                : "the client's upload as the server receives it, after the defense's client side "
                                  "and before any server-side noise");
    cJSON_AddStringToObject(j, "upload_kind", upload_kind_name(ob->client_kind));
    cJSON *fj = fed_config_to_json(&ex->fed);
    cJSON_AddNumberToObject(fj, "participants", ob->participants);
    cJSON_AddItemToObject(j, "federation", fj);
    cJSON *lj = cJSON_AddObjectToObject(j, "local");
    cJSON_AddStringToObject(lj, "procedure", o->federation_local ? "federation" : "probe");
    cJSON_AddNumberToObject(lj, "samples", ob->n_local);
    cJSON_AddNumberToObject(lj, "steps", (double)ob->local_steps);
    cJSON_AddNumberToObject(lj, "batch_size", ob->local.batch_size < ob->n_local ? ob->local.batch_size : ob->n_local);
    cJSON_AddNumberToObject(lj, "lr", ob->local.lr);
    cJSON_AddNumberToObject(lj, "momentum", ob->local.momentum);
    cJSON_AddNumberToObject(lj, "weight_decay", ob->local.weight_decay);
    cJSON *dj = upload_params_json(&ob->params);
    cJSON_AddItemToObject(dj, "privacy", cJSON_Duplicate(ob->privacy, 1));
    cJSON_AddItemToObject(j, "defense", dj);
    cJSON_AddItemToObject(j, "observer_privacy", victims_observer_privacy(ob));
    cJSON_AddStringToObject(j, "server_estimate",
                            pub || ob->kind == UPLOAD_WEIGHTS
                                ? (pub ? "(w_round - w_released)/(lr*steps) - weight_decay*w_round"
                                       : "(w_global - upload)/(lr*steps) - weight_decay*w_global")
                            : ob->kind == UPLOAD_DELTA ? "-upload/(lr*steps) - weight_decay*w_global"
                                                       : "upload/steps - weight_decay*w_global");
    return j;
}
