// The one client-upload path (see fl/upload.h) and the upload arithmetic the server and
// the attacks share.
#include "fl/upload.h"

#include <stdlib.h>
#include <string.h>

#include "fl/fed_internal.h"

void upload_form(UploadKind kind, const float *w, const float *g, size_t n, double lr, float *upload) {
    switch (kind) {
    case UPLOAD_WEIGHTS: memcpy(upload, w, n * sizeof(float)); break;
    case UPLOAD_DELTA:
        for (size_t i = 0; i < n; i++)
            upload[i] = w[i] - g[i];
        break;
    case UPLOAD_GRADIENT: {
        float inv = (float)(1.0 / lr);
        for (size_t i = 0; i < n; i++)
            upload[i] = (g[i] - w[i]) * inv;
        break;
    }
    }
}

void upload_to_weights(UploadKind kind, const float *upload, const float *g, size_t n, double lr, float *out) {
    switch (kind) {
    case UPLOAD_WEIGHTS:
        if (out != upload)
            memmove(out, upload, n * sizeof(float));
        break;
    case UPLOAD_DELTA:
        for (size_t i = 0; i < n; i++)
            out[i] = g[i] + upload[i];
        break;
    case UPLOAD_GRADIENT: {
        float l = (float)lr;
        for (size_t i = 0; i < n; i++)
            out[i] = g[i] - l * upload[i];
        break;
    }
    }
}

void upload_gradient_estimate(UploadKind kind, const float *upload, const float *g, size_t n, double lr, long steps,
                              double wd, float *out) {
    float denom = (float)(lr * (double)(steps > 0 ? steps : 1)), s = (float)(steps > 0 ? steps : 1), w = (float)wd;
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case UPLOAD_WEIGHTS: out[i] = (g[i] - upload[i]) / denom - w * g[i]; break;
        case UPLOAD_DELTA: out[i] = -upload[i] / denom - w * g[i]; break;
        case UPLOAD_GRADIENT: out[i] = upload[i] / s - w * g[i]; break;
        }
    }
}

const char *upload_kind_name(UploadKind kind) {
    static const char *const names[] = {"weights", "delta", "gradient"};
    return kind >= UPLOAD_WEIGHTS && kind <= UPLOAD_GRADIENT ? names[kind] : "?";
}

// -- the client's side of a round ---------------------------------------------------------
DefenseRound fed_defense_round(const Federation *f, int round, int client) {
    return (DefenseRound){.round = round, .client = client,
                          .rng = rng_stream(f->s.seed, RNG_DEFENSE, (uint32_t)round, (uint32_t)client),
                          .aux_rng = rng_stream(f->s.seed, RNG_DEFENSE_AUX, (uint32_t)round, (uint32_t)client),
                          .global = f->global_host};
}

// Step 4 of the upload path: the defense's client side on the formed upload, and what it applied.
static FpStatus client_side(Federation *f, const DefenseRound *dr, float *upload, UploadParams *params,
                            FpError *err) {
    const DefenseOps *ops = f->s.defense;
    FP_TRY(ops->client_perturb(f->defense_state, upload, dr, err));
    *params = upload_params_none();
    if (ops->upload_params)
        ops->upload_params(f->defense_state, dr, params);
    return FP_OK;
}

DefenseRound fed_client_round(const Federation *f, int round, int client) {
    const Dataset *d;
    const uint32_t *idx;
    int n;
    fed_client_data(f, client, &d, &idx, &n);
    DefenseRound dr = fed_defense_round(f, round, client);
    dr.n_local_samples = n;
    dr.local_data = d;
    dr.local_idx = idx;
    dr.n_local = n;
    dr.participants = f->n_round;
    dr.canaries = f->s.canaries ? &f->s.canaries[client] : NULL;
    return dr;
}

FpStatus fed_client_upload(Federation *f, Worker *wk, int round, int client, float *upload, UploadParams *params,
                           FpError *err) {
    size_t np = f->s.global->table.n_params;
    const DefenseOps *ops = f->s.defense;
    DefenseRound dr = fed_client_round(f, round, client);
    dr.model = wk->local;
    const Dataset *d = dr.local_data;
    const uint32_t *idx = dr.local_idx;
    int n = dr.n_local;
    // 1-2. From the global weights, the client's local procedure on its data.
    Model *local = wk->local;
    model_set_params(local, f->global_host);
    LocalTrainConfig lc = fed_client_local(f, client);
    if (ops->local_gradient) {
        lc.defense = ops;
        lc.defense_state = f->defense_state;
        lc.round = &dr;
    }
    RngStream shuffle = rng_stream(f->s.seed, RNG_SHUFFLE, (uint32_t)round, (uint32_t)client);
    if (n > 0)
        FP_TRY(local_train(local, wk->tape, d, idx, n, &lc, &shuffle, wk->momentum, err));
    if (f->s.hooks.on_local_model)
        f->s.hooks.on_local_model(f->s.hooks.ctx, round, client, local);
    // 3. The upload of the defense's kind.
    model_get_params(local, wk->host_local);
    upload_form(f->kind, wk->host_local, f->global_host, np, f->s.cfg.lr, upload);
    // 4. The defense, client side, and what it applied.
    return client_side(f, &dr, upload, params, err);
}

FpStatus fed_round_craft_upload(Federation *f, int slot, const float *update, float *upload_out, FpError *err) {
    if (!f->round_open || slot < 0 || slot >= f->n_round)
        return fp_fail(err, FP_EPARAM, "slot %d is not a participant of a begun round", slot);
    size_t np = f->s.global->table.n_params;
    int client = f->round_clients[slot];
    // The client holds its share of the data but ran no local procedure: the defense sees
    // its data and, as its model, the round's global weights (what a client that trained
    // nothing holds). Crafted uploads are formed one at a time, outside fed_round_run, so
    // the first worker's model is free.
    DefenseRound dr = fed_client_round(f, f->rounds_done, client);
    dr.n_local_samples = fed_client_samples(f, client);
    Model *held = f->workers[0].local;
    model_set_params(held, f->global_host);
    dr.model = held;
    float *u = malloc(np * sizeof(float));
    if (!u)
        return fp_fail(err, FP_ENOMEM, "out of memory for a crafted upload");
    memcpy(u, update, np * sizeof(float));
    UploadParams params;
    FpStatus st = client_side(f, &dr, u, &params, err);
    if (st == FP_OK)
        st = fed_round_set_upload(f, slot, u, &params, err);
    if (st == FP_OK && upload_out)
        memcpy(upload_out, u, np * sizeof(float));
    free(u);
    return st;
}

UploadKind fed_upload_kind(const Federation *f) { return f->kind; }
