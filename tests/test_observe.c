// The one client-upload path and what attacks observe of the configured federation:
//   - a round formed in pieces (any subset of slots, any order, some formed by another
//     federation in lockstep and handed over) is bit-identical to the plain run;
//   - a defense's local_gradient slot replaces each local step's gradient;
//   - fed_observe returns exactly the upload and the global weights the engine's own
//     round produces for that client (declared round and first participation);
//   - a victim's data never change the federation's DefenseSetup;
//   - per defense, the noise scale and clip an attack records for its observed upload are
//     those `fedpriv train` records for the same config in the same round (and a control:
//     another federation gives other values where the calibration depends on it);
//   - the global membership target's members come from clients that took part;
//   - a slot's record (upload and the defense's per-client state), handed between
//     federations in lockstep as between ranks, gives the plain run's result.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "defenses/registry.h"
#include "fl/experiment.h"
#include "tests/cli_run.h"

// A separable synthetic classification set (class k's mean a fixed random vector).
static Dataset *blobs(int n, int classes, uint64_t seed) {
    Dataset *d = dataset_create("blobs", n, 1, 6, 6, classes, 0, NULL);
    size_t ss = dataset_sample_size(d);
    RngStream rs = rng_stream(seed, RNG_TEST, 21, 0);
    float *means = malloc(sizeof(float) * ss * classes);
    for (size_t i = 0; i < ss * classes; i++)
        means[i] = (float)rng_next_uniform(&rs);
    for (int i = 0; i < n; i++) {
        d->y[i] = i % classes;
        for (size_t j = 0; j < ss; j++) {
            float v = means[(size_t)d->y[i] * ss + j] + 0.2f * (float)rng_next_normal(&rs);
            d->x[(size_t)i * ss + j] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
    }
    free(means);
    return d;
}

// A federation over blobs under the defense JSON (NULL: none); the caller frees with fed_kit_free.
typedef struct {
    Dataset *train, *test;
    Model *model;
    cJSON *defense;
    Federation *f;
} FedKit;

static const DefenseOps *ops_of(const cJSON *dj) {
    return dj ? defense_find(cJSON_GetObjectItem(dj, "name")->valuestring) : NULL;
}

static void fed_kit(FedKit *k, const char *fed_json, const char *defense_json, const DefenseOps *ops, FedHooks hooks,
                    int threads) {
    memset(k, 0, sizeof *k);
    k->train = blobs(240, 3, 31);
    k->test = blobs(60, 3, 32);
    cJSON *mj = cJSON_Parse("{\"name\":\"mlp\",\"hidden\":[10]}"), *fj = cJSON_Parse(fed_json);
    DataShape in = {1, 6, 6, 3, 0};
    k->model = model_create(mj, "model", &in, backend_cpu(), NULL);
    ck_assert_int_eq(model_init(k->model, 7, NULL), FP_OK);
    k->defense = defense_json ? cJSON_Parse(defense_json) : NULL;
    FedSetup s = {.seed = 7, .threads = threads, .backend = backend_cpu(), .global = k->model, .train = k->train,
                  .test = k->test, .defense = ops ? ops : ops_of(k->defense), .defense_json = k->defense,
                  .hooks = hooks, .quiet = 1};
    FpError err = {0};
    ck_assert_int_eq(fed_config_parse(fj, "federation", &s.cfg, &err), FP_OK);
    k->f = fed_create(&s, &err);
    ck_assert_msg(k->f != NULL, "%s", err.msg);
    cJSON_Delete(mj);
    cJSON_Delete(fj);
}

static void fed_kit_free(FedKit *k) {
    fed_free(k->f);
    model_free(k->model);
    dataset_free(k->train);
    dataset_free(k->test);
    cJSON_Delete(k->defense);
}

static const char *const FED = "{\"clients\":8,\"sample_rate\":0.5,\"rounds\":4,\"batch_size\":8,\"lr\":0.1,"
                               "\"momentum\":0.5}";
// Client noise: every upload carries its own Gaussian draw, so the streams matter.
static const char *const NOISY = "{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":0.8,\"clip\":1,"
                                 "\"noise\":\"client\"}";

// -- rounds in pieces -------------------------------------------------------------------------
START_TEST(round_in_pieces_is_bit_identical) {
    FedKit a, b, c;
    fed_kit(&a, FED, NOISY, NULL, (FedHooks){0}, 2);
    fed_kit(&b, FED, NOISY, NULL, (FedHooks){0}, 1);
    fed_kit(&c, FED, NOISY, NULL, (FedHooks){0}, 3);
    FpError err = {0};
    ck_assert_int_eq(fed_run(a.f, 0, &err), FP_OK);
    size_t np = a.model->table.n_params;
    float *u = malloc(np * sizeof(float));
    for (int r = 0; r < 4; r++) {
        // b forms its even slots here, in decreasing order and one at a time; c (another
        // "process" in lockstep) forms the odd ones, and b takes them as they are.
        int nb = 0, nc = 0;
        ck_assert_int_eq(fed_round_begin(b.f, &nb, &err), FP_OK);
        ck_assert_int_eq(fed_round_begin(c.f, &nc, &err), FP_OK);
        ck_assert_int_eq(nb, 4);
        ck_assert_int_eq(nc, nb);
        for (int s = nb - 1; s >= 0; s--) {
            if (s % 2 == 0) {
                ck_assert_ptr_null(fed_round_upload(b.f, s, NULL));
                ck_assert_int_eq(fed_round_run(b.f, &s, 1, &err), FP_OK);
                continue;
            }
            ck_assert_int_eq(fed_round_run(c.f, &s, 1, &err), FP_OK);
            const UploadParams *p = NULL;
            const float *cu = fed_round_upload(c.f, s, &p);
            ck_assert_ptr_nonnull(cu);
            memcpy(u, cu, np * sizeof(float));
            ck_assert_int_eq(fed_round_set_upload(b.f, s, u, p, &err), FP_OK);
        }
        ck_assert_int_eq(fed_round_finish(b.f, &err), FP_OK);
        ck_assert_int_eq(fed_round_finish(c.f, &err), FP_OK);
    }
    ck_assert_int_eq(memcmp(a.model->params, b.model->params, np * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.model->params, c.model->params, np * sizeof(float)), 0);
    // The rounds' records agree too, uploads summary included.
    for (int r = 0; r < 4; r++) {
        const FedRoundResult *ra = fed_round_result(a.f, r), *rb = fed_round_result(b.f, r);
        ck_assert(ra->test_loss == rb->test_loss);
        ck_assert_int_eq(ra->upload.uploads, 4);
        ck_assert(ra->upload.noise_scale_min == rb->upload.noise_scale_max);
        ck_assert(ra->upload.noise_scale_min > 0);
    }
    // Control: one upload formed with another client's stream changes the result.
    FedKit d;
    fed_kit(&d, FED, NOISY, NULL, (FedHooks){0}, 1);
    int nd = 0;
    ck_assert_int_eq(fed_round_begin(d.f, &nd, &err), FP_OK);
    ck_assert_int_eq(fed_round_run(d.f, NULL, 0, &err), FP_OK);
    memcpy(u, fed_round_upload(d.f, 1, NULL), np * sizeof(float));
    ck_assert_int_eq(fed_round_set_upload(d.f, 0, u, NULL, &err), FP_OK);
    ck_assert_int_eq(fed_round_finish(d.f, &err), FP_OK);
    ck_assert_int_eq(fed_run(d.f, 1, &err), FP_OK);
    ck_assert_int_ne(memcmp(a.model->params, d.model->params, np * sizeof(float)), 0);
    // Out of order is refused.
    ck_assert_int_eq(fed_round_run(a.f, NULL, 0, &err), FP_EPARAM);
    ck_assert_int_eq(fed_run(a.f, 0, &err), FP_EPARAM);
    free(u);
    fed_kit_free(&a);
    fed_kit_free(&b);
    fed_kit_free(&c);
    fed_kit_free(&d);
}
END_TEST

// -- the local_gradient slot ----------------------------------------------------------------
// A defense that replaces every local step's gradient by the constant 1 (and records the
// steps it saw): the client's delta is then exactly −lr per step on every trainable weight.
typedef struct {
    size_t np;
    long calls, last_step, steps;
    int clients_seen;
} StepState;

static FpStatus step_create(const cJSON *p, const char *path, const DefenseSetup *setup, void **state, FpError *err) {
    StepState *s = calloc(1, sizeof *s);
    s->np = setup->params->n_params;
    s->last_step = -1;
    *state = s;
    return FP_OK;
}
static void step_destroy(void *state) { free(state); }
static UploadKind step_kind(const void *state) { return UPLOAD_DELTA; }
static FpStatus step_gradient(void *state, const DefenseLocalStep *st, float *grad, FpError *err) {
    StepState *s = state;
    ck_assert_int_eq(st->step, s->last_step + 1); // steps in order, from 0
    ck_assert_ptr_nonnull(st->round);
    ck_assert_ptr_eq(st->round->model, st->model);
    ck_assert(st->n >= 1 && st->idx && st->data && st->tape);
    s->last_step = st->step + 1 == st->steps ? -1 : st->step;
    s->steps = st->steps;
    s->calls++;
    st->model->be->fill(grad, s->np, 1.0f);
    return FP_OK;
}
static FpStatus step_perturb(void *state, float *upload, const DefenseRound *r, FpError *err) { return FP_OK; }
static void step_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    *rec = (PrivacyRecord){.unit = "none", .sigma = -1};
}
static const DefenseOps stepper = {.name = "stepper", .create = step_create, .destroy = step_destroy,
                                   .upload_kind = step_kind, .local_gradient = step_gradient,
                                   .client_perturb = step_perturb, .privacy = step_privacy};

typedef struct {
    float *delta;
    size_t np;
    int uploads;
} Capture;

static void capture_upload(void *ctx, int round, int client, const float *upload, UploadKind kind,
                           const ParamTable *table, const UploadParams *params) {
    Capture *c = ctx;
    if (c->uploads++ == 0)
        memcpy(c->delta, upload, c->np * sizeof(float));
}

START_TEST(local_gradient_slot_replaces_each_step) {
    FedKit k;
    Capture cap = {0};
    // 240 samples over 4 clients, batch 16, 2 epochs: 60/16 → 4 steps per epoch, 8 in all.
    const char *fed = "{\"clients\":4,\"rounds\":1,\"batch_size\":16,\"local_epochs\":2,\"lr\":0.25}";
    fed_kit(&k, fed, "{\"name\":\"stepper\"}", &stepper, (FedHooks){.ctx = &cap, .on_upload = capture_upload}, 1);
    cap.np = k.model->table.n_params;
    cap.delta = malloc(cap.np * sizeof(float));
    FpError err = {0};
    ck_assert_int_eq(fed_run(k.f, 0, &err), FP_OK);
    StepState *s = fed_defense_state(k.f);
    ck_assert_int_eq(s->steps, 8);
    ck_assert_int_eq(s->calls, 4 * 8);
    LocalTrainConfig lc = {.epochs = 2, .batch_size = 16};
    ck_assert_int_eq(local_train_steps(&lc, 60), 8);
    // delta = w − 8·0.25·1 − w: exactly −2 wherever the float sums are exact, and within
    // rounding of it elsewhere.
    for (size_t i = 0; i < cap.np; i++)
        ck_assert_msg(fabsf(cap.delta[i] + 2.0f) < 1e-5f, "delta[%zu] = %g", i, cap.delta[i]);
    fed_kit_free(&k);
    // Control: the plain procedure (no slot) moves the weights by their own gradients.
    Capture plain = {.np = cap.np, .delta = calloc(cap.np, sizeof(float))};
    DefenseOps plain_ops = stepper;
    plain_ops.local_gradient = NULL;
    fed_kit(&k, fed, "{\"name\":\"stepper\"}", &plain_ops, (FedHooks){.ctx = &plain, .on_upload = capture_upload}, 1);
    ck_assert_int_eq(fed_run(k.f, 0, &err), FP_OK);
    int differ = 0;
    for (size_t i = 0; i < cap.np; i++)
        differ += fabsf(plain.delta[i] + 2.0f) > 1e-3f;
    ck_assert_int_gt(differ, (int)cap.np / 2);
    fed_kit_free(&k);
    free(cap.delta);
    free(plain.delta);
}
END_TEST

// -- observation is the engine's upload ----------------------------------------------------------
typedef struct {
    int client;
    int round;            // the round to capture (-1: the client's first)
    int got_round;
    float *upload, *global;
    UploadParams params;
    size_t np;
} Spy;

static void spy_upload(void *ctx, int round, int client, const float *upload, UploadKind kind,
                       const ParamTable *table, const UploadParams *params) {
    Spy *s = ctx;
    if (client != s->client || s->got_round >= 0 || (s->round >= 0 && round != s->round))
        return;
    memcpy(s->upload, upload, s->np * sizeof(float));
    s->params = *params;
    s->got_round = round;
}

static void spy_global(void *ctx, int round, Model *global) {
    Spy *s = ctx;
    if (s->got_round < 0) // the weights the next round starts from
        model_get_params(global, s->global);
}

START_TEST(observation_is_the_engines_upload) {
    // A client the server samples (4 of 8, seed 7) in at least two of the 4 rounds, not in all.
    FedConfig fc = {.clients = 8, .sample_rate = 0.5, .sampling = SAMPLING_FIXED, .rounds = 4};
    unsigned char in[4][8] = {{0}};
    for (int r = 0; r < 4; r++) {
        int clients[8], n = fed_server_sample(&fc, 7, r, clients);
        ck_assert_int_eq(n, 4);
        for (int s = 0; s < n; s++)
            in[r][clients[s]] = 1;
    }
    int victim = -1, rounds[4], n_rounds = 0, absent = -1;
    for (int k = 0; k < 8 && victim < 0; k++) {
        n_rounds = 0;
        absent = -1;
        for (int r = 0; r < 4; r++) {
            if (in[r][k])
                rounds[n_rounds++] = r;
            else if (absent < 0)
                absent = r;
        }
        victim = n_rounds >= 2 && absent >= 0 ? k : -1;
    }
    ck_assert_int_ge(victim, 0);
    const char *defenses[] = {NOISY, "{\"name\":\"avp\",\"epsilon\":10,\"clip\":5}"};
    for (int d = 0; d < 2; d++)
        for (int declared = 0; declared < 2; declared++) {
            FedKit a, b;
            // The first participation, or the last round the victim is sampled in.
            Spy spy = {.client = victim, .round = declared ? rounds[n_rounds - 1] : -1, .got_round = -1};
            fed_kit(&a, FED, defenses[d], NULL,
                    (FedHooks){.ctx = &spy, .on_upload = spy_upload, .on_global = spy_global}, 2);
            spy.np = a.model->table.n_params;
            spy.upload = malloc(spy.np * sizeof(float));
            spy.global = malloc(spy.np * sizeof(float));
            model_get_params(a.model, spy.global);
            FpError err = {0};
            ck_assert_int_eq(fed_run(a.f, 0, &err), FP_OK);
            ck_assert_int_eq(spy.got_round, declared ? rounds[n_rounds - 1] : rounds[0]);
            fed_kit(&b, FED, defenses[d], NULL, (FedHooks){0}, 1);
            FedObservePoint pt = {.client = victim, .round = spy.round, .observer = FED_OBSERVER_SERVER};
            FedObservation ob;
            FpStatus st = fed_observe(b.f, &pt, 1, &ob, &err);
            ck_assert_msg(st == FP_OK, "%s", err.msg);
            ck_assert_int_eq(ob.round, spy.got_round);
            ck_assert_int_eq(ob.client, victim);
            ck_assert_int_eq(memcmp(ob.upload, spy.upload, spy.np * sizeof(float)), 0);
            ck_assert_int_eq(memcmp(ob.global, spy.global, spy.np * sizeof(float)), 0);
            ck_assert(ob.params.noise_scale == spy.params.noise_scale && ob.params.clip == spy.params.clip);
            ck_assert(ob.params.noise_scale > 0);
            ck_assert_int_eq(ob.participants, 4);
            ck_assert_int_eq(ob.local_steps, 4); // 30 samples, batch 8
            ck_assert_int_eq(fed_rounds_done(b.f), ob.round); // stopped inside the observed round
            fed_observation_free(&ob);
            if (declared) { // a declared round the client is not in
                FedKit c;
                fed_kit(&c, FED, defenses[d], NULL, (FedHooks){0}, 1);
                pt.round = absent;
                ck_assert_int_eq(fed_observe(c.f, &pt, 1, &ob, &err), FP_EPARAM);
                ck_assert_ptr_nonnull(strstr(err.msg, "does not take part"));
                fed_kit_free(&c);
            }
            free(spy.upload);
            free(spy.global);
            fed_kit_free(&a);
            fed_kit_free(&b);
        }
}
END_TEST

// A victim's own data change its uploads, never the federation's calibration.
START_TEST(victim_data_keep_the_defense_setup) {
    FedKit a, b;
    const char *avp = "{\"name\":\"avp\",\"epsilon\":10,\"clip\":5,\"sensitivity\":\"2C/min|D_k|\"}";
    fed_kit(&a, FED, avp, NULL, (FedHooks){0}, 1);
    fed_kit(&b, FED, avp, NULL, (FedHooks){0}, 1);
    uint32_t idx[2] = {3, 4};
    FedClientData cd = {.data = b.test, .idx = idx, .n = 2, .probe = 1};
    FpError err = {0};
    ck_assert_int_eq(fed_set_client_data(b.f, 1, &cd, &err), FP_OK);
    cJSON *ja = fed_defense_json(a.f, NULL), *jb = fed_defense_json(b.f, NULL);
    double sa = cJSON_GetObjectItem(ja, "sigma_initial")->valuedouble;
    ck_assert(sa == cJSON_GetObjectItem(jb, "sigma_initial")->valuedouble);
    ck_assert_int_eq(cJSON_GetObjectItem(jb, "min_client_samples")->valueint, 30); // not the victim's 2
    FedObservePoint pt = {.client = 1, .round = -1};
    FedObservation ob;
    ck_assert_int_eq(fed_observe(b.f, &pt, 1, &ob, &err), FP_OK);
    ck_assert_int_eq(ob.n_local, 2);
    ck_assert_int_eq(ob.local_steps, 1); // the probe: one step on both samples
    ck_assert_int_eq(ob.local.batch_size, 2);
    fed_observation_free(&ob);
    // Bad victims.
    uint32_t bad = 60;
    FedClientData cb = {.data = b.test, .idx = &bad, .n = 1};
    ck_assert_int_eq(fed_set_client_data(b.f, 2, &cb, &err), FP_EPARAM);
    ck_assert_int_eq(fed_set_client_data(b.f, 8, &cd, &err), FP_EPARAM);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    fed_kit_free(&a);
    fed_kit_free(&b);
}
END_TEST

// -- the attack records the deployed defense ----------------------------------------------------
static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

// A Fashion-MNIST-shaped IDX directory: n 12×12 images per split, labels k % 10.
static void write_idx(const char *dir, int n) {
    const char *split[2] = {"train", "t10k"};
    RngStream rs = rng_stream(3, RNG_TEST, 22, 0);
    for (int s = 0; s < 2; s++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, split[s]);
        FILE *f = fopen(p, "wb");
        unsigned char hdr[16] = {0, 0, 8, 3, 0, 0, 0, (unsigned char)n, 0, 0, 0, 12, 0, 0, 0, 12};
        fwrite(hdr, 1, 16, f);
        for (int i = 0; i < n * 144; i++)
            fputc((int)(rng_next_uniform(&rs) * 255), f);
        fclose(f);
        snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, split[s]);
        f = fopen(p, "wb");
        unsigned char lh[8] = {0, 0, 8, 1, 0, 0, 0, (unsigned char)n};
        fwrite(lh, 1, 8, f);
        for (int k = 0; k < n; k++)
            fputc(k % 10, f);
        fclose(f);
    }
}

static cJSON *load(const char *path) {
    cJSON *j = NULL;
    FpError e = {0};
    ck_assert_msg(jv_load_file(path, &j, &e) == FP_OK, "%s: %s", path, e.msg);
    return j;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    ck_assert_msg(v != NULL, "no \"%s\"", key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1; // null: not defined
}

// Trains the config, attacks it, and compares the attack's observation with the training
// run's record of the same round. Returns the observed noise scale.
// config is the experiment's JSON with a "%s" where the attack's key goes.
static double compare_with_training(const char *dir, const char *attack, const char *config, const char *attack_json,
                                    const char *label) {
    char cfg[600], tcfg[600], train_out[600], attack_dir[600], res[700], out[8192], err[8192], text[4096], a_key[1024];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, label);
    snprintf(tcfg, sizeof tcfg, "%s/%s-train-config.json", dir, label);
    snprintf(train_out, sizeof train_out, "%s/%s-train.json", dir, label);
    snprintf(attack_dir, sizeof attack_dir, "%s/%s-attack", dir, label);
    snprintf(text, sizeof text, config, ""); // fedpriv train takes the experiment without the attack
    write_file(tcfg, text);
    snprintf(a_key, sizeof a_key, ", \"attack\": %s", attack_json);
    snprintf(text, sizeof text, config, a_key);
    write_file(cfg, text);
    const char *targs[] = {"train", "--config", tcfg, "--out", train_out, NULL};
    int rc = cli_run(targs, out, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: train exit %d: %s", label, rc, err);
    const char *aargs[] = {"attack", attack, "--config", cfg, "--out", attack_dir, "--threads", "1", NULL};
    rc = cli_run(aargs, out, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: attack exit %d: %s", label, rc, err);
    snprintf(res, sizeof res, "%s/result.json", attack_dir);
    cJSON *a = load(res), *t = load(train_out);
    const cJSON *obs = cJSON_GetObjectItem(a, "observations");
    if (!obs) // dlg-regression: per curve
        obs = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "curves"), 0), "observations");
    const cJSON *ob = cJSON_GetArrayItem(obs, 0), *od = cJSON_GetObjectItem(ob, "defense");
    int round = (int)num(ob, "round");
    const cJSON *tr = cJSON_GetArrayItem(cJSON_GetObjectItem(t, "rounds"), round - 1);
    ck_assert_int_eq((int)num(tr, "round"), round);
    const cJSON *tu = cJSON_GetObjectItem(tr, "uploads");
    ck_assert_msg(tu != NULL, "%s: training round %d records no uploads", label, round);
    // The training round is uniform over its clients for these configs: one value each.
    ck_assert_msg(num(od, "noise_scale") == num(tu, "noise_scale"), "%s round %d: attack noise scale %.17g, training %.17g",
                  label, round, num(od, "noise_scale"), num(tu, "noise_scale"));
    ck_assert_msg(num(od, "clip") == num(tu, "clip"), "%s: clip %g vs %g", label, num(od, "clip"), num(tu, "clip"));
    ck_assert(num(od, "server_noise_scale") == num(tu, "server_noise_scale"));
    ck_assert_str_eq(cJSON_GetObjectItem(od, "noise")->valuestring, cJSON_GetObjectItem(tu, "noise")->valuestring);
    ck_assert(num(od, "epsilon") == num(tu, "epsilon"));
    // The observation states its federation.
    const cJSON *fj = cJSON_GetObjectItem(ob, "federation");
    ck_assert(num(fj, "clients") == num(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "config"), "federation"),
                                        "clients"));
    ck_assert_int_eq((int)num(fj, "participants"), (int)num(tr, "participants"));
    double scale = num(od, "noise_scale") > 0 ? num(od, "noise_scale") : num(od, "server_noise_scale");
    cJSON_Delete(a);
    cJSON_Delete(t);
    return scale;
}

// The experiment (%%s: the attack key) and the attack, with the parameters filled in.
#define DLG_CONFIG                                                                                                   \
    "{\"seed\": 2, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\"},"                                    \
    " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"},"                                                       \
    " \"federation\": {\"clients\": %d, \"sample_rate\": 0.25, \"rounds\": 4, \"batch_size\": 4, \"lr\": 0.05},"   \
    " \"defense\": %s%%s, \"threads\": 2}"
#define DLG_ATTACK                                                                                                   \
    "{\"name\": \"dlg\", \"images\": [0], \"steps\": 1, \"snapshot_every\": 0, \"observe\": {\"client\": %d, \"round\": 3}}"

START_TEST(attack_records_the_deployed_defense) {
    char probe[8];
    const char *none[] = {"--version", NULL};
    if (cli_run(none, probe, probe, sizeof probe) < 0) {
        printf("SKIP: attack_records_the_deployed_defense (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-observe-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx(dir, 80);
    struct { const char *label, *defense; } cases[] = {
        {"none", "{\"name\": \"none\"}"},
        {"spm", "{\"name\": \"spm\", \"epsilon\": 1}"},
        {"pm", "{\"name\": \"pm\", \"epsilon\": 1, \"clip\": 0.5}"},
        {"dpfedavg-eps", "{\"name\": \"gaussian-dpfedavg\", \"epsilon\": 4, \"clip\": 1, \"noise\": \"client\"}"},
        {"dpfedavg-z", "{\"name\": \"gaussian-dpfedavg\", \"noise_multiplier\": 1.1, \"clip\": 0.5}"},
        {"fedsmp", "{\"name\": \"fedsmp\", \"epsilon\": 4, \"clip\": 1}"},
        {"dp-fedasgp", "{\"name\": \"dp-fedasgp\", \"epsilon\": 2, \"clip\": 1}"},
        {"avp", "{\"name\": \"avp\", \"epsilon\": 10, \"clip\": 5, \"sensitivity\": \"2C/min|D_k|\"}"},
        {"nbafl", "{\"name\": \"nbafl\", \"epsilon\": 10, \"clip\": 5}"},
    };
    // Observe round 3 of 4, at a client the server samples there (5 of 20 per round).
    FedConfig fc = {.clients = 20, .sample_rate = 0.25, .sampling = SAMPLING_FIXED, .rounds = 4};
    int in_round[20];
    ck_assert_int_eq(fed_server_sample(&fc, 2, 2, in_round), 5);
    int victim = in_round[2];
    char text[2048], atk[512];
    double avp_scale = 0, dpf_scale = 0;
    snprintf(atk, sizeof atk, DLG_ATTACK, victim);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(text, sizeof text, DLG_CONFIG, dir, 20, cases[k].defense);
        double s = compare_with_training(dir, "dlg", text, atk, cases[k].label);
        ck_assert_msg(k == 0 ? s == 0 : s > 0, "%s: scale %g", cases[k].label, s);
        if (strcmp(cases[k].label, "avp") == 0)
            avp_scale = s;
        if (strcmp(cases[k].label, "dpfedavg-eps") == 0)
            dpf_scale = s;
    }
    // Control: the same defenses deployed in another federation (16 clients) are
    // calibrated differently, so the comparison above can tell federations apart.
    ck_assert_int_eq(fed_server_sample(&(FedConfig){.clients = 16, .sample_rate = 0.25, .rounds = 4}, 2, 2, in_round),
                     4);
    snprintf(atk, sizeof atk, DLG_ATTACK, in_round[0]);
    snprintf(text, sizeof text, DLG_CONFIG, dir, 16, cases[7].defense);
    ck_assert(compare_with_training(dir, "dlg", text, atk, "avp16") != avp_scale);
    snprintf(text, sizeof text, DLG_CONFIG, dir, 16, cases[3].defense);
    ck_assert(compare_with_training(dir, "dlg", text, atk, "dpfedavg16") != dpf_scale);
    // layerwise on the lstm, through dlg-regression: every client in every round, a fixed
    // clip and equal layer shares, so its per-upload scale is set by the budget schedule.
    ck_assert(compare_with_training(
                  dir, "dlg-regression",
                  "{\"seed\": 3, \"dataset\": {\"name\": \"power-load\"}, \"model\": {\"name\": \"lstm\", \"hidden\": 8},"
                  " \"federation\": {\"clients\": 20, \"rounds\": 3, \"batch_size\": 8, \"lr\": 0.05,"
                  " \"partition\": \"natural\", \"samples_per_client\": 8},"
                  " \"defense\": {\"name\": \"layerwise\", \"epsilon_total\": 9, \"clip\": 0.5, \"armijo\": false,"
                  " \"linear_importance\": \"mean\", \"aggregation\": \"fedavg\"}%s, \"threads\": 2}",
                  "{\"name\": \"dlg-regression\", \"samples\": [5], \"steps\": 1, \"reference\": false,"
                  " \"observe\": {\"client\": 4, \"round\": 2}}",
                  "layerwise") > 0);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// `spm` at ε = 1e-300 with its float sampler: the defended upload is not finite (C
// overflows; the safe sampler refuses such an ε with exit 2). The attack says "diverged",
// exits 1 and presents no similarity.
START_TEST(diverged_attack_is_no_finding) {
    char probe[8];
    const char *none[] = {"--version", NULL};
    if (cli_run(none, probe, probe, sizeof probe) < 0) {
        printf("SKIP: diverged_attack_is_no_finding (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-observe-div-XXXXXX", cfg[600], res[700], text[2048], out[4096], err[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx(dir, 40);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"}, \"federation\": {\"clients\": 4},"
             " \"defense\": {\"name\": \"spm\", \"epsilon\": 1e-300, \"sampler\": \"float\"},"
             " \"attack\": {\"images\": [0], \"steps\": 2}}",
             dir);
    write_file(cfg, text);
    const char *args[] = {"attack", "dlg", "--config", cfg, "--out", dir, NULL};
    int rc = cli_run(args, out, err, sizeof err);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "diverged"));
    snprintf(res, sizeof res, "%s/result.json", dir);
    cJSON *r = load(res);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "status")->valuestring, "diverged");
    ck_assert_ptr_null(cJSON_GetObjectItem(r, "ssim_mean"));
    ck_assert_ptr_null(cJSON_GetObjectItem(r, "images_recovered"));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "images")), 0);
    cJSON_Delete(r);
    // Control: the same run at ε = 1 is done and scored.
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"}, \"federation\": {\"clients\": 4},"
             " \"defense\": {\"name\": \"spm\", \"epsilon\": 1}, \"attack\": {\"images\": [0], \"steps\": 2}}",
             dir);
    write_file(cfg, text);
    ck_assert_int_eq(cli_run(args, out, err, sizeof err), 0);
    r = load(res);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "status")->valuestring, "done");
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(r, "ssim_mean")));
    cJSON_Delete(r);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// -- records: a slot as another process receives it ---------------------------------------
// Two federations in lockstep split every round's slots in two blocks and hand each other
// their records (fed_round_save_slot / fed_round_load_slot), as ranks do: both end
// bit-identical to the plain run, per-round records and the defense's description
// included, under defenses whose client_perturb keeps per-client state where the client
// runs. Control: handing over the uploads alone (fed_round_set_upload) leaves that state
// behind, and the model (dp-fedasgp) or the defense's account (flat-laplace) differs.
static void lockstep_round(FedKit *x, FedKit *y, int with_state) {
    FpError err = {0};
    int nx = 0, ny = 0;
    ck_assert_int_eq(fed_round_begin(x->f, &nx, &err), FP_OK);
    ck_assert_int_eq(fed_round_begin(y->f, &ny, &err), FP_OK);
    ck_assert_int_eq(nx, ny);
    int half = nx / 2;
    size_t rs = fed_slot_record_size(x->f);
    ck_assert_uint_eq(rs, fed_slot_record_size(y->f));
    ck_assert_uint_ge(rs, x->model->table.n_params * sizeof(float) + sizeof(double));
    char *rec = malloc(rs);
    for (int s = 0; s < nx; s++) {
        FedKit *from = s < half ? x : y, *to = s < half ? y : x;
        ck_assert_int_eq(fed_round_run(from->f, &s, 1, &err), FP_OK);
        if (with_state) {
            ck_assert_int_eq(fed_round_save_slot(from->f, s, rec, &err), FP_OK);
            ck_assert_int_eq(fed_round_load_slot(to->f, s, rec, &err), FP_OK);
        } else {
            const UploadParams *p = NULL;
            const float *u = fed_round_upload(from->f, s, &p);
            ck_assert_int_eq(fed_round_set_upload(to->f, s, u, p, &err), FP_OK);
        }
    }
    free(rec);
    // Nothing is left to form: finishing runs no client again.
    ck_assert_int_eq(fed_round_finish(x->f, &err), FP_OK);
    ck_assert_int_eq(fed_round_finish(y->f, &err), FP_OK);
}

START_TEST(records_carry_the_defense_client_state) {
    // dp-fedasgp (paper): the loss each client reported weighs its upload; flat-laplace:
    // the budget each client spent and its last record (what upload_params and end_round read).
    static const char *const defenses[] = {"{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":4,\"clip\":1}",
                                           "{\"name\":\"flat-laplace\",\"epsilon_total\":8}"};
    static const char *const FED4 = "{\"clients\":4,\"sample_rate\":1,\"rounds\":2,\"batch_size\":8,\"lr\":0.1}";
    for (int i = 0; i < 2; i++) {
        FedKit a, b, c, d, e;
        fed_kit(&a, FED4, defenses[i], NULL, (FedHooks){0}, 1);
        fed_kit(&b, FED4, defenses[i], NULL, (FedHooks){0}, 1);
        fed_kit(&c, FED4, defenses[i], NULL, (FedHooks){0}, 2);
        fed_kit(&d, FED4, defenses[i], NULL, (FedHooks){0}, 1);
        fed_kit(&e, FED4, defenses[i], NULL, (FedHooks){0}, 1);
        FpError err = {0};
        ck_assert_int_eq(fed_run(a.f, 0, &err), FP_OK);
        size_t np = a.model->table.n_params;
        for (int r = 0; r < 2; r++) {
            lockstep_round(&b, &c, 1);
            lockstep_round(&d, &e, 0);
        }
        ck_assert_int_eq(memcmp(a.model->params, b.model->params, np * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(a.model->params, c.model->params, np * sizeof(float)), 0);
        for (int r = 0; r < 2; r++) {
            const FedRoundResult *ra = fed_round_result(a.f, r), *rb = fed_round_result(b.f, r),
                                 *rc = fed_round_result(c.f, r);
            ck_assert(ra->test_loss == rb->test_loss && ra->test_loss == rc->test_loss);
            ck_assert_int_eq(memcmp(&ra->upload, &rc->upload, sizeof ra->upload), 0);
            ck_assert(ra->upload.noise_scale_min > 0);
            ck_assert(ra->privacy.epsilon_total_nominal == rc->privacy.epsilon_total_nominal);
        }
        cJSON *ja = fed_defense_json(a.f, NULL), *jb = fed_defense_json(b.f, NULL), *jc = fed_defense_json(c.f, NULL),
              *jd = fed_defense_json(d.f, NULL);
        ck_assert(cJSON_Compare(ja, jb, 1) && cJSON_Compare(ja, jc, 1));
        // Control: without the client state, the losses (dp-fedasgp) or the spent budgets and
        // records (flat-laplace) stay where the clients ran.
        if (i == 0) {
            ck_assert_int_ne(memcmp(a.model->params, d.model->params, np * sizeof(float)), 0);
            ck_assert_int_ne(memcmp(a.model->params, e.model->params, np * sizeof(float)), 0);
        } else
            ck_assert(!cJSON_Compare(ja, jd, 1));
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        cJSON_Delete(jc);
        cJSON_Delete(jd);
        fed_kit_free(&a);
        fed_kit_free(&b);
        fed_kit_free(&c);
        fed_kit_free(&d);
        fed_kit_free(&e);
    }
}
END_TEST

Suite *suite_observe(void) {
    Suite *s = suite_create("observe");
    TCase *fl = tcase_create("upload_path");
    tcase_set_timeout(fl, 60);
    tcase_add_test(fl, round_in_pieces_is_bit_identical);
    tcase_add_test(fl, local_gradient_slot_replaces_each_step);
    tcase_add_test(fl, observation_is_the_engines_upload);
    tcase_add_test(fl, victim_data_keep_the_defense_setup);
    tcase_add_test(fl, records_carry_the_defense_client_state);
    suite_add_tcase(s, fl);
    TCase *cli = tcase_create("cli");
    tcase_set_timeout(cli, 240);
    tcase_add_test(cli, attack_records_the_deployed_defense);
    tcase_add_test(cli, diverged_attack_is_no_finding);
    suite_add_tcase(s, cli);
    return s;
}
