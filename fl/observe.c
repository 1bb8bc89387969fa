// Victims and observation points (see fl/fed.h): an attack's client inside the
// configured federation, and what a declared observer sees of its upload.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fl/experiment.h"
#include "fl/fed_internal.h"

const char *fed_observer_name(FedObserver o) {
    static const char *const names[FED_OBSERVERS] = {"server", "public"};
    return o >= 0 && o < FED_OBSERVERS ? names[o] : "?";
}

FpStatus fed_set_client_data(Federation *f, int client, const FedClientData *cd, FpError *err) {
    int K = f->s.cfg.clients;
    if (client < 0 || client >= K)
        return fp_fail(err, FP_EPARAM, "client %d: the federation has clients 0..%d", client, K - 1);
    if (!cd->data || cd->n < 1 || !cd->idx)
        return fp_fail(err, FP_EPARAM, "client %d: its data must hold at least one sample", client);
    for (int i = 0; i < cd->n; i++)
        if (cd->idx[i] >= (uint32_t)cd->data->n)
            return fp_fail(err, FP_EPARAM, "client %d: sample %u is outside the %d of %s", client, cd->idx[i],
                           cd->data->n, cd->data->name);
    if (cd->data->c != f->s.train->c || cd->data->h != f->s.train->h || cd->data->w != f->s.train->w ||
        cd->data->n_classes != f->s.train->n_classes || cd->data->target_dim != f->s.train->target_dim)
        return fp_fail(err, FP_EPARAM, "client %d: its data are not shaped like the federation's", client);
    if (!f->override && !(f->override = calloc((size_t)K, sizeof(ClientOverride *))))
        return fp_fail(err, FP_ENOMEM, "out of memory");
    ClientOverride *o = f->override[client] ? f->override[client] : calloc(1, sizeof *o);
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)cd->n);
    if (!o || !idx) {
        if (o != f->override[client])
            free(o);
        free(idx);
        return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    memcpy(idx, cd->idx, sizeof(uint32_t) * (size_t)cd->n);
    free(o->idx);
    *o = (ClientOverride){.data = cd->data, .idx = idx, .n = cd->n, .probe = cd->probe};
    f->override[client] = o;
    return FP_OK;
}

void fed_observation_free(FedObservation *o) {
    if (!o)
        return;
    free(o->upload);
    free(o->global);
    cJSON_Delete(o->privacy);
    memset(o, 0, sizeof *o);
}

static int slot_of(const int *clients, int n, int client) {
    for (int s = 0; s < n; s++)
        if (clients[s] == client)
            return s;
    return -1;
}

// Copies what the server received from slot s of the begun round.
static FpStatus take(Federation *f, int slot, FedObservation *o, FpError *err) {
    size_t np = f->s.global->table.n_params;
    int r = f->rounds_done, client = f->round_clients[slot];
    const UploadParams *p = NULL;
    const float *u = fed_round_upload(f, slot, &p);
    o->round = r;
    o->client = client;
    o->kind = f->kind;
    o->client_kind = f->kind;
    o->params = *p;
    o->local = fed_client_local(f, client);
    o->n_local = fed_client_samples(f, client);
    o->local_steps = local_train_steps(&o->local, o->n_local);
    o->participants = f->n_round;
    PrivacyRecord pr;
    FP_TRY(defense_privacy(f->s.defense, f->defense_state, r + 1, &pr, err));
    o->privacy = privacy_record_json(&pr);
    o->upload = malloc(np * sizeof(float));
    o->global = malloc(np * sizeof(float));
    if (!o->upload || !o->global || !o->privacy)
        return fp_fail(err, FP_ENOMEM, "out of memory keeping an observed upload");
    memcpy(o->upload, u, np * sizeof(float));
    memcpy(o->global, f->global_host, np * sizeof(float));
    for (size_t i = 0; i < np; i++)
        if (!isfinite(u[i]))
            return fp_fail(err, FP_EDIVERGED, "the upload of client %d in round %d is not finite after the defense "
                           "(element %zu)", client, r + 1, i);
    return FP_OK;
}

// After the round of an observation taken by take() was finished: the public observer's
// view, the released global model, with the account after the round.
static FpStatus take_release(Federation *f, FedObservation *o, FpError *err) {
    size_t np = f->s.global->table.n_params;
    o->kind = UPLOAD_WEIGHTS;
    memcpy(o->upload, f->global_host, np * sizeof(float));
    cJSON_Delete(o->privacy);
    PrivacyRecord pr;
    FP_TRY(defense_privacy(f->s.defense, f->defense_state, o->round + 1, &pr, err));
    if (!(o->privacy = privacy_record_json(&pr)))
        return fp_fail(err, FP_ENOMEM, "out of memory keeping an observed release");
    for (size_t i = 0; i < np; i++)
        if (!isfinite(o->upload[i]))
            return fp_fail(err, FP_EDIVERGED, "the model released after round %d is not finite (element %zu)",
                           o->round + 1, i);
    return FP_OK;
}

FpStatus fed_observe(Federation *f, const FedObservePoint *points, int n, FedObservation *out, FpError *err) {
    const FedConfig *c = &f->s.cfg;
    memset(out, 0, sizeof *out * (size_t)(n > 0 ? n : 1));
    if (f->round_open)
        return fp_fail(err, FP_EPARAM, "round %d is begun: observation starts at a round boundary", f->rounds_done + 1);
    for (int i = 0; i < n; i++) {
        out[i].point = points[i];
        if (points[i].client < 0 || points[i].client >= c->clients)
            return fp_fail(err, FP_EPARAM, "client %d: the federation has clients 0..%d", points[i].client,
                           c->clients - 1);
        if (points[i].round >= c->rounds || (points[i].round >= 0 && points[i].round < f->rounds_done))
            return fp_fail(err, FP_EPARAM, "round %d: the federation plans rounds %d..%d from here",
                           points[i].round + 1, f->rounds_done + 1, c->rounds);
        if (points[i].observer < 0 || points[i].observer >= FED_OBSERVERS)
            return fp_fail(err, FP_EUNSUPPORTED, "observer %d is not known", (int)points[i].observer);
    }
    unsigned char *done = calloc((size_t)(n > 0 ? n : 1), 1);
    int *here = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1)); // slot observed in this round, or -1
    FpStatus st = done && here ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    int pending = n;
    while (st == FP_OK && pending > 0) {
        int r = f->rounds_done;
        if (r >= c->rounds) { // only first-participation points can be left
            for (int i = 0; i < n; i++)
                if (!done[i]) {
                    st = fp_fail(err, FP_EPARAM, "client %d never takes part in the federation's %d rounds",
                                 points[i].client, c->rounds);
                    break;
                }
            break;
        }
        int np_round = 0;
        st = fed_round_begin(f, &np_round, err);
        if (st != FP_OK)
            break;
        const int *clients = NULL;
        fed_round_participants(f, &clients);
        int resolving = 0;
        for (int i = 0; i < n && st == FP_OK; i++) {
            here[i] = -1;
            if (done[i])
                continue;
            int s = slot_of(clients, np_round, points[i].client);
            if (points[i].round == r && s < 0)
                st = fp_fail(err, FP_EPARAM, "client %d does not take part in round %d (%d participants)",
                             points[i].client, r + 1, np_round);
            else if (s >= 0 && (points[i].round == r || points[i].round < 0)) {
                here[i] = s;
                resolving++;
            }
        }
        if (st != FP_OK)
            break;
        // A public point needs the round's release: every upload, the aggregation.
        int release = 0;
        for (int i = 0; i < n; i++)
            release |= here[i] >= 0 && points[i].observer == FED_OBSERVER_PUBLIC;
        int last = resolving == pending;
        if (last && !release) { // only the observed clients' uploads are formed
            int *slots = malloc(sizeof(int) * (size_t)(resolving > 0 ? resolving : 1));
            int m = 0;
            for (int i = 0; slots && i < n; i++)
                if (here[i] >= 0)
                    slots[m++] = here[i];
            st = slots ? fed_round_run(f, slots, m, err) : fp_fail(err, FP_ENOMEM, "out of memory");
            free(slots);
        } else
            st = fed_round_run(f, NULL, 0, err);
        for (int i = 0; i < n && st == FP_OK; i++)
            if (here[i] >= 0) {
                st = take(f, here[i], &out[i], err);
                done[i] = 1;
                pending--;
            }
        if (st == FP_OK && (!last || release))
            st = fed_round_finish(f, err);
        for (int i = 0; i < n && st == FP_OK && release; i++)
            if (here[i] >= 0 && points[i].observer == FED_OBSERVER_PUBLIC)
                st = take_release(f, &out[i], err);
    }
    free(done);
    free(here);
    if (st != FP_OK)
        for (int i = 0; i < n; i++)
            fed_observation_free(&out[i]);
    return st;
}
