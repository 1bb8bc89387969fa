// `layerwise`: explainability-driven layer-wise DP-FL (Liu et al. 2025, "Differential
// Privacy Integrated Federated Learning for Power Systems: An Explainability-Driven
// Approach"), and `flat-laplace`, the flat DP-FL baseline the paper compares with.
//
// Client side, per round t (digest §1.8, the runnable reading):
//   g = (w_t − w_local)/η               the upload: UPLOAD_GRADIENT (A1)
//   s_u  (Eqs. 14–15) fraction of sigmoid-gate pre-activations > −2 of the local model
//        on M local samples; units without sigmoids (the linear head) get 1 or the
//        mean of the others (A4); one budget unit per nn-layer: tensors sharing the
//        name prefix before the first '.' (A5)
//   C_u  (Eq. 19) the clip statistic (A3), stated in describe():
//        "mean-norm" (default) the mean over minibatches of the unit's gradient norm,
//        minibatches of the federation's batch size over one pass of the local data at
//        w_t — the norm is L2 for `paper` and L1 for `corrected`, the norm it clips in;
//        "mean-abs" the literal |mean of the unit's gradient entries|; a number: fixed;
//        times "clip_scale" (1 by default; the update g sums ~E·n/B steps, so the
//        per-step statistic clips it hard — the reproduction document shows both).
//   ε_t  = remaining budget / remaining rounds (A2); the budget is what the variant
//        accounts (`paper`: the paper's additive count; `corrected`: every draw)
//   ε_u  = s_u/Σ s · ε (Eq. 16)
//   g̃_u = clip_u(g_u) + Lap(b_u) per coordinate, b_u = 2·C_u·η/ε_u with an L2 clip
//        (`paper`, Eqs. 17, 20) or b_u = 2·C_u/ε_u with an L1 clip (`corrected`: the L1
//        sensitivity of what is perturbed, so the Laplace mechanism's ε_u holds)
//   Armijo (Eqs. 10–13): accept when f(w_t − η g̃) <= f(w_t) − c·η·‖g̃‖², f the local
//        loss; else ε ← λ·ε and redraw, while λ·ε <= cap·ε_t and the budget allows
//        (minus "reserve" × ε_total/rounds kept for each later round; 0 = A2 as written);
//        upload α·g̃_first + (1−α)·g̃_last when more than one draw was made.
// Accounting, side by side in PrivacyRecord (max over clients): nominal = the paper's
// (the final ε of each round, Σ_t); sound = every draw at its true pure-DP cost
// (layerwise_true_epsilon). C_u, s_u and the Armijo test read private data and are not
// privatised; the sound notion says so whenever they are in use.
// Server side (aggregation "shapley", Eqs. 21–22): W_k = w_t − η g̃_k, SHAP vector over
// feature groups and p_k = 1/loss on the server's held-out evaluation set, greedy merge
// of the most cosine-similar pair (defenses/shapley.h). "fedavg" keeps the engine's mean.
//
// flat-laplace (digest §5): ε_t = ε_total/rounds, one unit, one clip (mean-norm over the
// whole model, or fixed), Laplace b = 2C/ε with an L2 clip (`paper`, as the paper's DP-FL
// baseline reads) or an L1 clip (`corrected`), FedAvg aggregation, no Armijo.
#include "defenses/layerwise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/clip.h"
#include "defenses/dp/dlaplace.h"
#include "fl/defense.h"
#include "defenses/shapley.h"
#include "models/model.h"
#include "models/predict.h"

// The safe sampler's scale in grid steps: E − 1 exceeds 1/scale by about 1/(2·scale).
#define LW_NOISE_SCALE 4096.0

typedef enum { CLIP_MEAN_NORM = 0, CLIP_MEAN_ABS = 1, CLIP_FIXED = 2 } ClipKind;
typedef enum { LIN_ONE = 0, LIN_MEAN = 1 } LinearImportance;
typedef enum { LW_AGG_SHAPLEY = 0, LW_AGG_FEDAVG = 1 } LwAggregation;

typedef struct LwUnit {
    char name[48];
    int layers[16], n_layers; // trainable tensors of the unit
    size_t count;
    int sigmoid;              // has sigmoid gates (Eq. 14 applies)
} LwUnit;

typedef struct LwState {
    int flat;
    LayerwiseVariant variant;
    double eps_total, lambda, c, alpha, cap, reserve, threshold, importance_fraction, clip_value, clip_scale;
    int armijo, importance_max;
    ClipKind clip;
    LinearImportance linear;
    LwAggregation agg;
    DefenseSetup setup;
    const ParamTable *table;
    int n_units;
    LwUnit units[LAYERWISE_MAX_UNITS];
    // per client
    double *spent_nominal, *spent_sound;
    const float **global_seen;
    LayerwiseClientRound *last;
    // totals for describe()
    long uploads, draws, accepted_first, accepted_later, never_accepted, merges;
    double sum_eps_t, sum_s[LAYERWISE_MAX_UNITS], sum_clip[LAYERWISE_MAX_UNITS], sum_norm[LAYERWISE_MAX_UNITS],
        sum_scale[LAYERWISE_MAX_UNITS];
    double round_nominal_max;
    // server (Shapley merge)
    int safe;                // "sampler": the discrete Laplace on a grid (1) or the float one (0)
    DLap law;                // safe: the noise law, scale LW_NOISE_SCALE grid steps; grid g = b/scale
    ShapServer *server;
    ShapVectorKind shap_kind;
    int n_perm;
    char sound_notion[512];
} LwState;

// -- helpers with a public face (layerwise.h) ------------------------------------------
double layerwise_activation_fraction(const float *preact, size_t n, double threshold) {
    size_t on = 0;
    for (size_t i = 0; i < n; i++)
        on += preact[i] > threshold;
    return n ? (double)on / n : 0.0;
}

void layerwise_budget_shares(const double *s, int n_units, double eps_t, double *eps_out) {
    double sum = 0;
    for (int i = 0; i < n_units; i++)
        sum += s[i];
    for (int i = 0; i < n_units; i++)
        eps_out[i] = sum > 0 ? s[i] / sum * eps_t : eps_t / n_units;
}

double layerwise_laplace_scale(LayerwiseVariant v, double clip, double lr, double eps_unit) {
    return v == LW_PAPER ? 2.0 * clip * lr / eps_unit : 2.0 * clip / eps_unit;
}

double layerwise_true_epsilon(LayerwiseVariant v, double eps_unit, size_t d, double lr) {
    return v == LW_PAPER ? eps_unit * sqrt((double)d) / lr : eps_unit;
}

// Counts, through the model's probe, the sigmoid-gate inputs above the threshold.
typedef struct GateCount {
    double threshold;
    float *buf;       // room for the largest gate block of a batch
    size_t on, total;
} GateCount;

static void count_gate(void *ctx, const char *unit, Tape *t, Var *z) {
    GateCount *g = ctx;
    ad_to_host(t, z, g->buf);
    for (size_t i = 0; i < z->t.numel; i++)
        g->on += g->buf[i] > g->threshold;
    g->total += z->t.numel;
}

FpStatus layerwise_lstm_importance(const Model *m, const Dataset *d, const uint32_t *idx, int n, double threshold,
                                   double *s, FpError *err) {
    if (strcmp(m->ops->name, "lstm") != 0)
        return fp_fail(err, FP_EUNSUPPORTED, "layerwise: Eq. 14 needs sigmoid gates; model %s has none (use lstm)",
                       m->ops->name);
    int H = m->cfg.hidden[0];
    size_t ss = dataset_sample_size(d);
    Tape *t = tape_create(m->be);
    Var *p[8];
    int cap = n > 256 ? 256 : n;
    GateCount gc = {.threshold = threshold};
    float *scratch = fp_malloc(sizeof(float) * (size_t)cap * ss, err);
    gc.buf = fp_malloc(sizeof(float) * (size_t)cap * H, err);
    FpStatus st = t && scratch && gc.buf ? FP_OK : FP_ENOMEM;
    ModelProbe probe = {.ctx = &gc, .sigmoid_input = count_gate};
    for (int b0 = 0; st == FP_OK && b0 < n; b0 += 256) {
        int bs = n - b0 < 256 ? n - b0 : 256;
        tape_reset(t);
        model_param_vars(m, t, 0, p);
        Var *x = dataset_batch(t, d, idx + b0, bs, scratch);
        Var *out = x ? model_forward_probed(m, t, p, x, 0, &probe) : NULL;
        if (tape_status(t) != FP_OK || !out)
            st = fp_fail(err, FP_ENOMEM, "layerwise: out of memory computing layer importance");
    }
    tape_free(t);
    free(scratch);
    free(gc.buf);
    *s = gc.total ? (double)gc.on / gc.total : 0.0;
    return st;
}

const LayerwiseClientRound *layerwise_client_round(const void *state, int client) {
    const LwState *s = state;
    return s && client >= 0 && client < s->setup.n_clients ? &s->last[client] : NULL;
}

int layerwise_units(const void *state, const char **names, size_t *counts, int max) {
    const LwState *s = state;
    for (int i = 0; i < s->n_units && i < max; i++) {
        if (names)
            names[i] = s->units[i].name;
        if (counts)
            counts[i] = s->units[i].count;
    }
    return s->n_units;
}

// -- creation -------------------------------------------------------------------------------
static FpStatus build_units(LwState *s, FpError *err) {
    const ParamTable *tb = s->table;
    s->n_units = 0;
    for (int i = 0; i < tb->n_layers; i++) {
        const ParamLayer *l = &tb->layers[i];
        if (!l->trainable)
            continue;
        char prefix[48];
        const char *dot = strchr(l->name, '.');
        snprintf(prefix, sizeof prefix, "%.*s", dot ? (int)(dot - l->name) : (int)strlen(l->name), l->name);
        if (s->flat)
            snprintf(prefix, sizeof prefix, "model");
        LwUnit *u = NULL;
        for (int k = 0; k < s->n_units; k++)
            if (strcmp(s->units[k].name, prefix) == 0)
                u = &s->units[k];
        if (!u) {
            if (s->n_units == LAYERWISE_MAX_UNITS)
                return fp_fail(err, FP_EUNSUPPORTED, "layerwise: more than %d layers", LAYERWISE_MAX_UNITS);
            u = &s->units[s->n_units++];
            memset(u, 0, sizeof *u);
            snprintf(u->name, sizeof u->name, "%s", prefix);
            u->sigmoid = !s->flat && strcmp(prefix, "lstm") == 0;
        }
        if (u->n_layers == 16)
            return fp_fail(err, FP_EUNSUPPORTED, "layerwise: layer %s has more than 16 tensors", prefix);
        u->layers[u->n_layers++] = i;
        u->count += l->count;
    }
    return s->n_units ? FP_OK : fp_fail(err, FP_EPARAM, "layerwise: the model has no trainable parameters");
}

static FpStatus parse_clip(const cJSON *params, const char *path, LwState *s, FpError *err) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(params, "clip");
    char p[256];
    jv_path(p, sizeof p, path, "clip");
    s->clip = CLIP_MEAN_NORM;
    if (!c)
        return FP_OK;
    if (cJSON_IsNumber(c)) {
        if (!(c->valuedouble > 0) || !isfinite(c->valuedouble))
            return fp_fail(err, FP_EPARAM, "%s: a fixed clip must be > 0, got %g", p, c->valuedouble);
        s->clip = CLIP_FIXED;
        s->clip_value = c->valuedouble;
        return FP_OK;
    }
    if (cJSON_IsString(c) && strcmp(c->valuestring, "mean-norm") == 0)
        return FP_OK;
    if (cJSON_IsString(c) && strcmp(c->valuestring, "mean-abs") == 0 && !s->flat) {
        s->clip = CLIP_MEAN_ABS;
        return FP_OK;
    }
    return fp_fail(err, FP_EPARAM, "%s: must be \"mean-norm\"%s or a number > 0", p,
                   s->flat ? "" : ", \"mean-abs\"");
}

static void lw_destroy(void *state);

// The server's evaluation set for the Shapley merge (A8, A9).
static FpStatus server_prepare(LwState *s, const cJSON *params, const char *path, FpError *err) {
    const DefenseSetup *su = &s->setup;
    long long shap_n, eval_n, perms;
    int kind;
    static const char *const vec_names[] = {"mean-abs", "mean", NULL};
    FP_TRY(jv_int(params, path, "shap_samples", JV_OPTIONAL, 64, 1, 4096, &shap_n, err));
    FP_TRY(jv_int(params, path, "eval_samples", JV_OPTIONAL, 256, 1, 1 << 20, &eval_n, err));
    FP_TRY(jv_int(params, path, "shap_permutations", JV_OPTIONAL, 64, 1, 100000, &perms, err));
    FP_TRY(jv_choice(params, path, "shap_vector", vec_names, SHAP_MEAN_ABS, &kind, err));
    if (!su->model || !su->server_data || su->n_server < 1) {
        char p[256];
        return fp_fail(err, FP_EPARAM,
                       "%s: the Shapley merge needs a server evaluation set (training samples no client uses): "
                       "federation.partition \"natural\" keeps 5%% of power-load back, or set "
                       "federation.samples_per_client; or use \"aggregation\": \"fedavg\"",
                       jv_path(p, sizeof p, path, "aggregation"));
    }
    int cols = su->server_data->w, n_groups = 0;
    int *groups = fp_malloc(sizeof(int) * cols, err);
    if (!groups)
        return FP_ENOMEM;
    FpStatus st = shapley_parse_groups(params, path, "feature_groups", cols, groups, &n_groups, err);
    ShapServerConfig cfg = {.shap_samples = (int)shap_n, .eval_samples = (int)eval_n, .group_of_col = groups,
                            .n_groups = n_groups, .kind = (ShapVectorKind)kind, .n_perm = (int)perms,
                            .seed = su->seed, .progress = su->progress};
    if (st == FP_OK && !(s->server = shap_server_create(su->model, su->server_data, su->server_idx, su->n_server, &cfg,
                                                         err)))
        st = err ? err->code : FP_ENOMEM;
    s->shap_kind = cfg.kind;
    s->n_perm = cfg.n_perm;
    free(groups);
    return st;
}

// The keys create() accepts, also what takes_param answers from.
static const char *const lw_keys[] = {"name", "variant", "epsilon_total", "lambda", "c", "alpha", "cap", "reserve", "armijo",
                                      "threshold", "importance_fraction", "importance_max", "linear_importance",
                                      "clip", "clip_scale", "aggregation", "feature_groups", "shap_samples",
                                      "eval_samples", "shap_vector", "shap_permutations", "sampler", NULL};
static int lw_takes_param(const char *key) { return jv_key_in(key, lw_keys); }
static const char *const flat_keys[] = {"name", "variant", "epsilon_total", "clip", "clip_scale", "sampler", NULL};
static int flat_takes_param(const char *key) { return jv_key_in(key, flat_keys); }

static FpStatus lw_create_common(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                                 int flat, FpError *err) {
    static const char *const variants[] = {"corrected", "paper", NULL};
    static const char *const lin_names[] = {"one", "mean", NULL};
    static const char *const agg_names[] = {"shapley", "fedavg", NULL};
    *state = NULL;
    FP_TRY(jv_keys(params, path, flat ? flat_keys : lw_keys, err));
    LwState *s = fp_calloc(1, sizeof *s, err);
    if (!s)
        return FP_ENOMEM;
    s->flat = flat;
    s->setup = *setup;
    s->table = setup->params;
    int v, lin = LIN_ONE, agg = flat ? LW_AGG_FEDAVG : LW_AGG_SHAPLEY;
    long long imax = 256;
    FpStatus st = jv_choice(params, path, "variant", variants, LW_CORRECTED, &v, err);
    s->variant = (LayerwiseVariant)v;
    if (st == FP_OK)
        st = jv_number(params, path, "epsilon_total", JV_OPTIONAL, 25.0, 0, 1, 1e6, 0, &s->eps_total, err);
    if (st == FP_OK)
        st = parse_clip(params, path, s, err);
    if (st == FP_OK)
        st = dlap_parse_sampler(params, path, &s->safe, err);
    if (st == FP_OK && s->safe && (s->table->n_params + 1) * 8 >= DLAP_INDEX_MAX)
        st = fp_fail(err, FP_EUNSUPPORTED, "%s: the safe sampler indexes the draws of at most 2^28 parameters", path);
    if (st == FP_OK && s->safe)
        st = dlap_init(&s->law, LW_NOISE_SCALE, err);
    if (st == FP_OK)
        st = jv_number(params, path, "clip_scale", JV_OPTIONAL, 1.0, 0, 1, 1e9, 0, &s->clip_scale, err);
    if (st == FP_OK && !flat) {
        if (st == FP_OK)
            st = jv_number(params, path, "lambda", JV_OPTIONAL, 1.5, 1, 1, 100, 0, &s->lambda, err);
        if (st == FP_OK)
            st = jv_number(params, path, "c", JV_OPTIONAL, 1e-4, 0, 1, 1, 1, &s->c, err);
        if (st == FP_OK)
            st = jv_number(params, path, "alpha", JV_OPTIONAL, 0.5, 0, 0, 1, 0, &s->alpha, err);
        if (st == FP_OK)
            st = jv_number(params, path, "cap", JV_OPTIONAL, 4.0, 1, 0, 1e6, 0, &s->cap, err);
        if (st == FP_OK)
            st = jv_number(params, path, "reserve", JV_OPTIONAL, 0.0, 0, 0, 1, 0, &s->reserve, err);
        if (st == FP_OK)
            st = jv_bool(params, path, "armijo", 1, &s->armijo, err);
        if (st == FP_OK)
            st = jv_number(params, path, "threshold", JV_OPTIONAL, -2.0, -1e6, 0, 1e6, 0, &s->threshold, err);
        if (st == FP_OK)
            st = jv_number(params, path, "importance_fraction", JV_OPTIONAL, 0.1, 0, 1, 1, 0, &s->importance_fraction,
                           err);
        if (st == FP_OK)
            st = jv_int(params, path, "importance_max", JV_OPTIONAL, 256, 1, 1 << 20, &imax, err);
        if (st == FP_OK)
            st = jv_choice(params, path, "linear_importance", lin_names, LIN_ONE, &lin, err);
        if (st == FP_OK)
            st = jv_choice(params, path, "aggregation", agg_names, LW_AGG_SHAPLEY, &agg, err);
    }
    s->importance_max = (int)imax;
    s->linear = (LinearImportance)lin;
    s->agg = (LwAggregation)agg;
    if (st == FP_OK && s->table->n_layers > 64)
        st = fp_fail(err, FP_EUNSUPPORTED, "%s.name: models with more than 64 parameter tensors are not supported", path);
    if (st == FP_OK)
        st = build_units(s, err);
    if (st == FP_OK && !flat && (!setup->model || strcmp(setup->model->ops->name, "lstm") != 0))
        st = fp_fail(err, FP_EUNSUPPORTED,
                     "%s.name: layerwise measures layer importance on sigmoid gates (Eq. 14): it needs the lstm "
                     "model, got %s",
                     path, setup->model ? setup->model->ops->name : "(unknown)");
    if (st == FP_OK) {
        int K = setup->n_clients;
        s->spent_nominal = fp_calloc((size_t)K, sizeof(double), err);
        s->spent_sound = fp_calloc((size_t)K, sizeof(double), err);
        s->global_seen = fp_calloc((size_t)K, sizeof(float *), err);
        s->last = fp_calloc((size_t)K, sizeof(LayerwiseClientRound), err);
        if (!s->spent_nominal || !s->spent_sound || !s->global_seen || !s->last)
            st = FP_ENOMEM;
        for (int k = 0; st == FP_OK && k < K; k++)
            s->last[k].round = -1;
    }
    if (st == FP_OK && s->agg == LW_AGG_SHAPLEY)
        st = server_prepare(s, params, path, err);
    if (st != FP_OK) {
        lw_destroy(s);
        return st;
    }
    // The importance s_i always reads private data; the clip unless it is fixed; the test when on.
    int uncovered_clip = s->clip != CLIP_FIXED, uncovered = uncovered_clip || !flat;
    snprintf(s->sound_notion, sizeof s->sound_notion,
             "pure epsilon-DP per client (max over clients), every Laplace draw counted%s at its true cost: %s%s%s",
             flat ? "" : " (Armijo retries, both fused draws)",
             s->variant == LW_PAPER
                 ? (flat ? "L2 clip, so L1 sensitivity 2C*sqrt(d)"
                         : "L2 clip, so L1 sensitivity 2C*sqrt(d) per unit, and noise on the gradient, so no eta factor")
                 : "L1 clip, sensitivity 2C of the perturbed gradient",
             uncovered ? ". Not covered (private data used unprivatised): " : "",
             uncovered ? (flat ? "the clip C^i"
                               : s->armijo ? (uncovered_clip ? "the clip C^i, the importance s_i, the Armijo test"
                                                             : "the importance s_i, the Armijo test")
                                           : (uncovered_clip ? "the clip C^i, the importance s_i"
                                                             : "the importance s_i"))
                       : "");
    *state = s;
    return FP_OK;
}

static FpStatus lw_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                          FpError *err) {
    return lw_create_common(params, path, setup, state, 0, err);
}

static FpStatus flat_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                            FpError *err) {
    return lw_create_common(params, path, setup, state, 1, err);
}

static void lw_destroy(void *state) {
    LwState *s = state;
    if (!s)
        return;
    free(s->spent_nominal);
    free(s->spent_sound);
    free(s->global_seen);
    free(s->last);
    dlap_free(&s->law);
    shap_server_free(s->server);
    free(s);
}

static UploadKind lw_upload_kind(const void *state) { return UPLOAD_GRADIENT; }

// The budget the variant's schedule draws from: the paper's count, or every draw.
static double budget_left(const LwState *s, int k) {
    return s->eps_total - (s->variant == LW_PAPER ? s->spent_nominal[k] : s->spent_sound[k]);
}

static int lw_participates(void *state, const DefenseRound *r) {
    const LwState *s = state;
    return budget_left(s, r->client) > 1e-9 * s->eps_total;
}

// -- client side ------------------------------------------------------------------------------
// Mean loss of m over samples idx[0..n) of d.
static FpStatus mean_loss(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, float *scratch,
                          double *loss, FpError *err) {
    Var *p[64];
    double sum = 0;
    for (int b0 = 0; b0 < n; b0 += 256) {
        int bs = n - b0 < 256 ? n - b0 : 256;
        tape_reset(t);
        model_param_vars(m, t, 0, p);
        Var *x = dataset_batch(t, d, idx + b0, bs, scratch);
        Var *l = batch_loss(t, x ? model_forward(m, t, p, x, 0) : NULL, d, idx + b0, bs, scratch);
        if (!l)
            return fp_fail(err, FP_ENOMEM, "layerwise: out of memory evaluating the local loss");
        sum += ad_item(t, l) * bs;
    }
    *loss = sum / n;
    return FP_OK;
}

// Eq. 19 statistics per unit from minibatch gradients at m's parameters (w_t): one pass
// over the local data in batches of the federation's size.
static FpStatus clip_statistics(const LwState *s, Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n,
                                float *scratch, double *clip, FpError *err) {
    int L = m->table.n_layers, B = s->setup.batch_size < n ? s->setup.batch_size : n, batches = 0;
    Var *p[64], *g[64];
    float *host = fp_malloc(sizeof(float) * m->table.n_params, err);
    if (!host)
        return FP_ENOMEM;
    for (int u = 0; u < s->n_units; u++)
        clip[u] = 0;
    FpStatus st = FP_OK;
    for (int b0 = 0; st == FP_OK && b0 < n; b0 += B, batches++) {
        int bs = n - b0 < B ? n - b0 : B;
        tape_reset(t);
        model_param_vars(m, t, 1, p);
        Var *x = dataset_batch(t, d, idx + b0, bs, scratch);
        Var *l = batch_loss(t, x ? model_forward(m, t, p, x, 1) : NULL, d, idx + b0, bs, scratch);
        if (!l || ad_grad(t, l, p, L, g, 0) != FP_OK) {
            st = fp_fail(err, FP_ENOMEM, "layerwise: out of memory computing gradient statistics");
            break;
        }
        for (int u = 0; u < s->n_units; u++) {
            const LwUnit *un = &s->units[u];
            double acc = 0, sum = 0;
            for (int q = 0; q < un->n_layers; q++) {
                const ParamLayer *pl = &m->table.layers[un->layers[q]];
                ad_to_host(t, g[un->layers[q]], host);
                for (size_t i = 0; i < pl->count; i++) {
                    double v = host[i];
                    acc += s->clip == CLIP_MEAN_ABS ? 0 : s->variant == LW_PAPER ? v * v : fabs(v);
                    sum += v;
                }
            }
            clip[u] += s->clip == CLIP_MEAN_ABS ? fabs(sum / un->count) : s->variant == LW_PAPER ? sqrt(acc) : acc;
        }
    }
    for (int u = 0; u < s->n_units; u++)
        clip[u] = batches ? clip[u] / batches : 0;
    free(host);
    return st;
}

// The unit's norm (L2 for paper, L1 for corrected) of a flat vector.
static double unit_norm(const LwState *s, const LwUnit *u, const float *v) {
    double acc = 0;
    for (int q = 0; q < u->n_layers; q++) {
        const ParamLayer *pl = &s->table->layers[u->layers[q]];
        for (size_t i = 0; i < pl->count; i++)
            acc += s->variant == LW_PAPER ? (double)v[pl->offset + i] * v[pl->offset + i] : fabs(v[pl->offset + i]);
    }
    return s->variant == LW_PAPER ? sqrt(acc) : acc;
}

static void unit_scale(const LwState *s, const LwUnit *u, float *v, double factor) {
    for (int q = 0; q < u->n_layers; q++) {
        const ParamLayer *pl = &s->table->layers[u->layers[q]];
        for (size_t i = 0; i < pl->count; i++)
            v[pl->offset + i] = (float)(v[pl->offset + i] * factor);
    }
}

static FpStatus lw_perturb(void *state, float *upload, const DefenseRound *rd, FpError *err) {
    LwState *s = state;
    int k = rd->client, R = s->setup.rounds, U = s->n_units;
    size_t np = s->table->n_params;
    double lr = s->setup.lr;
    LayerwiseClientRound *cr = &s->last[k];
    memset(cr, 0, sizeof *cr);
    cr->round = rd->round;
    cr->n_units = U;
    s->global_seen[k] = rd->global;
    double left = budget_left(s, k);
    int rounds_left = R - rd->round > 0 ? R - rd->round : 1;
    // A2: the remaining budget over the remaining rounds; flat DP-FL: ε_total/rounds.
    double eps_t = s->flat ? (left > 1e-9 * s->eps_total ? s->eps_total / R : 0) : left / rounds_left;
    cr->eps_t = eps_t;
    if (!(eps_t > 0)) { // budget spent: release nothing (zeros cost nothing)
        memset(upload, 0, np * sizeof(float));
        return FP_OK;
    }
    // The importance (layerwise), a measured clip and the Armijo test read the client's
    // model and data (a training audit's canary client shows its own share and the global
    // weights); flat DP-FL with a fixed clip reads neither.
    int reads_data = !s->flat || s->clip != CLIP_FIXED;
    if (reads_data && (!rd->model || !rd->local_data || rd->n_local < 1))
        return fp_fail(err, FP_EPARAM, "%s: this client has no model and data, which %s reads%s",
                       s->flat ? "flat-laplace" : "layerwise",
                       s->flat ? "its measured clip (\"clip\": \"mean-norm\" or \"mean-abs\")"
                               : "its layer importance (Eqs. 14-15)",
                       s->flat ? "; a fixed \"clip\": C does not" : "");
    const Dataset *d = rd->local_data;
    Tape *t = NULL;
    Model *m = NULL;
    float *scratch = NULL;
    uint32_t *order = NULL;
    if (reads_data) {
        const Model *lm = rd->model;
        size_t ss = dataset_sample_size(d);
        int B = s->setup.batch_size > 256 ? s->setup.batch_size : 256;
        t = tape_create(lm->be);
        m = model_clone(lm, lm->be, err);
        scratch = malloc(sizeof(float) * ((size_t)B * (ss > (size_t)d->target_dim ? ss : (size_t)d->target_dim) + B));
        order = malloc(sizeof(uint32_t) * rd->n_local);
    }
    float *clipped = malloc(sizeof(float) * np), *first = malloc(sizeof(float) * np), *w = malloc(sizeof(float) * np);
    FpStatus st = clipped && first && w && (!reads_data || (t && m && scratch && order))
                      ? FP_OK
                      : fp_fail(err, FP_ENOMEM, "layerwise: out of memory");
    // 1. Importance (Eqs. 14–15) of the trained local model on M local samples (A4).
    double s_sig = 1, s_u[LAYERWISE_MAX_UNITS];
    if (st == FP_OK && !s->flat) {
        int M = (int)lround(s->importance_fraction * rd->n_local);
        M = M < 1 ? 1 : M > s->importance_max ? s->importance_max : M > rd->n_local ? rd->n_local : M;
        memcpy(order, rd->local_idx, sizeof(uint32_t) * rd->n_local);
        RngStream aux = rd->aux_rng;
        rng_shuffle_u32(&aux, order, (uint32_t)rd->n_local);
        st = layerwise_lstm_importance(rd->model, d, order, M, s->threshold, &s_sig, err);
    }
    double sig_sum = 0;
    int sig_n = 0;
    for (int u = 0; u < U; u++)
        if (s->units[u].sigmoid) {
            sig_sum += s_sig;
            sig_n++;
        }
    for (int u = 0; u < U; u++)
        s_u[u] = s->flat ? 1.0
                 : s->units[u].sigmoid ? s_sig
                 : (s->linear == LIN_MEAN && sig_n) ? sig_sum / sig_n
                                                      : 1.0;
    // 2. Clip statistics at w_t (Eq. 19), then per-unit clipping of the upload (Eq. 17).
    double clip[LAYERWISE_MAX_UNITS];
    if (st == FP_OK) {
        if (m)
            model_set_params(m, rd->global);
        if (s->clip == CLIP_FIXED)
            for (int u = 0; u < U; u++)
                clip[u] = s->clip_value;
        else
            st = clip_statistics(s, m, t, d, rd->local_idx, rd->n_local, scratch, clip, err);
        for (int u = 0; u < U; u++)
            clip[u] *= s->clip_scale;
    }
    if (st == FP_OK) {
        memcpy(clipped, upload, np * sizeof(float));
        for (int u = 0; u < U; u++) {
            double nrm = unit_norm(s, &s->units[u], clipped);
            cr->norm[u] = nrm;
            cr->s[u] = s_u[u];
            cr->clip[u] = clip[u];
            // clip_scale keeps a margin of 1e-6: the float rounding of the scaled elements
            // cannot carry the stored norm past C, so the sensitivity holds for the upload.
            unit_scale(s, &s->units[u], clipped, clip[u] > 0 ? clip_scale(nrm, clip[u]) : 0);
        }
    }
    // 3. Draws with Armijo escalation (Eqs. 9–13).
    double f0 = 0, eps = eps_t, spent_round = 0;
    int use_armijo = !s->flat && s->armijo;
    if (st == FP_OK && use_armijo)
        st = mean_loss(m, t, d, rd->local_idx, rd->n_local, scratch, &f0, err);
    for (int a = 0; st == FP_OK; a++) {
        double eps_u[LAYERWISE_MAX_UNITS], cost = 0;
        layerwise_budget_shares(s_u, U, eps, eps_u);
        memcpy(upload, clipped, np * sizeof(float));
        for (int u = 0; u < U; u++) {
            const LwUnit *un = &s->units[u];
            // flat DP-FL has no η in its sensitivity (Δf = 2C, Eq. 18): lr = 1 in both formulas.
            double b = layerwise_laplace_scale(s->variant, clip[u], s->flat ? 1.0 : lr, eps_u[u]);
            cr->scale[u] = b;
            cr->eps_unit[u] = eps_u[u];
            double unit_cost = layerwise_true_epsilon(s->variant, eps_u[u], un->count, s->flat ? 1.0 : lr);
            if (s->safe && b > 0) {
                // The discrete Laplace on the grid g = b/scale: its pure ε for the unit's L1
                // sensitivity (2C with the L1 clip, 2C√d with the L2 clip; coordinates within C).
                if ((uint64_t)(a + 1) * np >= DLAP_INDEX_MAX) {
                    st = fp_fail(err, FP_EUNSUPPORTED, "layerwise: too many Armijo draws for the safe sampler's index");
                    break;
                }
                double g = b / s->law.scale;
                if (!(clip[u] / g < 0x1p50)) {
                    st = fp_fail(err, FP_EPARAM, "layerwise: the Laplace scale %g is below 2^-50 of the clip %g: "
                                                 "beyond the safe sampler's grid (use \"sampler\": \"float\")", b,
                                 clip[u]);
                    break;
                }
                double l1 = s->variant == LW_PAPER ? 2 * clip[u] * sqrt((double)un->count) : 2 * clip[u];
                unit_cost = dlap_epsilon_l1(&s->law, g, l1, (double)un->count, clip[u]);
                for (int q = 0; q < un->n_layers; q++) {
                    const ParamLayer *pl = &s->table->layers[un->layers[q]];
                    dlap_add(&s->law, g, upload + pl->offset, pl->count, &rd->rng, (uint64_t)a * np + pl->offset);
                }
            } else {
                for (int q = 0; q < un->n_layers; q++) {
                    const ParamLayer *pl = &s->table->layers[un->layers[q]];
                    for (size_t i = 0; i < pl->count; i++) {
                        size_t e = pl->offset + i;
                        upload[e] = (float)(upload[e] + b * rng_laplace_at(&rd->rng, (uint64_t)a * np + e));
                    }
                }
            }
            cost += unit_cost;
        }
        if (st != FP_OK)
            break;
        cr->draws = a + 1;
        cr->eps_final = eps;
        spent_round += eps;
        cr->eps_sound += cost;
        if (a == 0)
            memcpy(first, upload, np * sizeof(float));
        if (!use_armijo) {
            cr->accepted = 1;
            break;
        }
        // Eq. 10: f(w_t − η g̃) <= f(w_t) − c η ‖g̃‖².
        double sq = 0, f1;
        for (size_t i = 0; i < np; i++) {
            sq += (double)upload[i] * upload[i];
            w[i] = (float)(rd->global[i] - lr * upload[i]);
        }
        model_set_params(m, w);
        st = mean_loss(m, t, d, rd->local_idx, rd->n_local, scratch, &f1, err);
        if (st != FP_OK)
            break;
        if (isfinite(f1) && f1 <= f0 - s->c * lr * sq) {
            cr->accepted = 1;
            break;
        }
        // Eq. 11, within the cap and the budget (the variant's count of what is spent),
        // leaving reserve × ε_total/R for each later round.
        double next = s->lambda * eps;
        double need = s->variant == LW_PAPER ? next : spent_round + next;
        double avail = left - s->reserve * (s->eps_total / R) * (rounds_left - 1);
        if (next > s->cap * eps_t * (1 + 1e-12) || need > avail * (1 + 1e-12))
            break;
        eps = next;
    }
    if (st == FP_OK && cr->draws > 1) // Eq. 13: fuse the first and the last draw
        for (size_t i = 0; i < np; i++)
            upload[i] = (float)(s->alpha * first[i] + (1 - s->alpha) * upload[i]);
    if (st == FP_OK) {
        cr->eps_nominal = cr->eps_final; // the paper's count; eps_sound has every draw
        s->spent_nominal[k] += cr->eps_nominal;
        s->spent_sound[k] += cr->eps_sound;
    }
    tape_free(t);
    model_free(m);
    free(scratch);
    free(clipped);
    free(first);
    free(w);
    free(order);
    return st;
}

// The last draw's Laplace scale and the clip of client k's upload, the largest over units.
static void lw_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    const LwState *s = state;
    const LayerwiseClientRound *cr = &s->last[round->client];
    *out = upload_params_none();
    if (cr->round != round->round || cr->draws == 0) // budget spent: zeros were sent
        return;
    out->noise = "laplace";
    out->clip_norm = s->variant == LW_PAPER ? "l2" : "l1";
    out->clip = 0;
    for (int u = 0; u < cr->n_units; u++) {
        out->noise_scale = fmax(out->noise_scale, cr->scale[u]);
        out->clip = fmax(out->clip, cr->clip[u]);
    }
    out->epsilon = cr->eps_final;
}

// What lw_perturb keeps of client k (its last round's record and the budget it has
// spent), moved where it did not run; the global model it saw is the round's own there.
typedef struct LwClientState {
    LayerwiseClientRound last;
    double spent_nominal, spent_sound;
} LwClientState;

static void lw_client_state_save(const void *state, const DefenseRound *round, void *buf) {
    const LwState *s = state;
    int k = round->client;
    LwClientState cs = {.last = s->last[k], .spent_nominal = s->spent_nominal[k], .spent_sound = s->spent_sound[k]};
    memcpy(buf, &cs, sizeof cs);
}

static void lw_client_state_load(void *state, const DefenseRound *round, const void *buf) {
    LwState *s = state;
    int k = round->client;
    LwClientState cs;
    memcpy(&cs, buf, sizeof cs);
    s->last[k] = cs.last;
    s->spent_nominal[k] = cs.spent_nominal;
    s->spent_sound[k] = cs.spent_sound;
    s->global_seen[k] = round->global;
}

// -- server side ------------------------------------------------------------------------------
static FpStatus lw_aggregate(void *state, int round, const float *const *uploads, const double *weights,
                             const int *clients, int k, float *out, FpError *err) {
    LwState *s = state;
    size_t np = s->table->n_params;
    if (s->agg == LW_AGG_FEDAVG) {
        for (size_t i = 0; i < np; i++) {
            double acc = 0;
            for (int j = 0; j < k; j++)
                acc += weights[j] * uploads[j][i];
            out[i] = (float)acc;
        }
        return FP_OK;
    }
    // Temporary models W_k = w_t − η g̃_k; w_t is the round's global model the clients saw.
    FP_TRY(shap_server_merge(s->server, s->global_seen[clients[0]], s->setup.lr, uploads, k, out, NULL, err));
    s->merges += k - 1;
    return FP_OK;
}

static void lw_end_round(void *state, int round, int n_participants) {
    LwState *s = state;
    s->round_nominal_max = 0;
    for (int k = 0; k < s->setup.n_clients; k++) {
        const LayerwiseClientRound *cr = &s->last[k];
        if (cr->round != round || cr->draws == 0)
            continue;
        s->uploads++;
        s->draws += cr->draws;
        if (cr->accepted)
            cr->draws == 1 ? s->accepted_first++ : s->accepted_later++;
        else
            s->never_accepted++;
        s->sum_eps_t += cr->eps_t;
        for (int u = 0; u < s->n_units; u++) {
            s->sum_s[u] += cr->s[u];
            s->sum_clip[u] += cr->clip[u];
            s->sum_norm[u] += cr->norm[u];
            s->sum_scale[u] += cr->scale[u];
        }
        if (cr->eps_nominal > s->round_nominal_max)
            s->round_nominal_max = cr->eps_nominal;
    }
}

static void lw_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const LwState *s = state;
    double nom = 0, snd = 0;
    for (int k = 0; k < s->setup.n_clients; k++) {
        if (s->spent_nominal[k] > nom)
            nom = s->spent_nominal[k];
        if (s->spent_sound[k] > snd)
            snd = s->spent_sound[k];
    }
    *rec = (PrivacyRecord){
        .unit = "client",
        .epsilon_round_nominal = s->round_nominal_max,
        .epsilon_total_nominal = nom,
        .nominal_notion = s->flat ? "pure epsilon-DP per client, epsilon_total/rounds per round, sequential "
                                    "composition (the paper's DP-FL baseline); max over clients"
                                  : "pure epsilon-DP per client, the paper's additive accounting: the final Armijo "
                                    "epsilon of each round, layers composed by Eq. 16; max over clients",
        .epsilon_total_sound = snd,
        .delta = 0,
        .sound_notion = s->sound_notion,
        .sigma = -1,
        .guarantee = GUARANTEE_PROVEN,
    };
    // The figure counts every Laplace draw; what the client computes from its data and
    // uses unprivatised is an assumption of it (so the bound is conditional, never proven).
    if (s->clip != CLIP_FIXED)
        privacy_assume(rec, "the clip C^i, computed from the client's data at w_t, reveals nothing beyond the noisy "
                            "upload (it is not privatised)");
    if (!s->flat)
        privacy_assume(rec, "the layer importance s_i (Eqs. 14-15), measured on the client's data, reveals nothing "
                            "beyond the noisy upload (it is not privatised; it sets each layer's budget)");
    if (!s->flat && s->armijo)
        privacy_assume(rec, "the Armijo test (Eq. 10), evaluated on the client's data, reveals nothing beyond the "
                            "noisy upload (it decides how many draws are made and which are fused)");
    if (!s->safe) {
        rec->epsilon_total_sound = INFINITY;
        rec->guarantee = GUARANTEE_NONE;
        privacy_assume(rec, DLAP_FLOAT_REASON);
    }
}

static FpStatus lw_describe(const void *state, cJSON *out) {
    const LwState *s = state;
    static const char *const clip_names[] = {"mean-norm", "mean-abs", "fixed"};
    cJSON_AddStringToObject(out, "variant", s->variant == LW_PAPER ? "paper" : "corrected");
    cJSON_AddNumberToObject(out, "epsilon_total", s->eps_total);
    cJSON_AddStringToObject(out, "clip", clip_names[s->clip]);
    cJSON_AddStringToObject(out, "sampler", s->safe ? "safe" : "float");
    if (s->safe) {
        cJSON *law = cJSON_AddObjectToObject(out, "noise_law");
        cJSON_AddNumberToObject(law, "scale_steps", s->law.scale);
        cJSON_AddNumberToObject(law, "steps_per_halving", (double)s->law.q);
        cJSON_AddNumberToObject(law, "ratio_bound", s->law.ratio);
        cJSON_AddStringToObject(law, "grid", "b / scale_steps for each unit's Laplace scale b");
    }
    if (s->clip == CLIP_FIXED)
        cJSON_AddNumberToObject(out, "clip_value", s->clip_value);
    cJSON_AddNumberToObject(out, "clip_scale", s->clip_scale);
    cJSON_AddStringToObject(out, "clip_statistic",
                            s->clip == CLIP_FIXED ? "a fixed clip for every unit"
                            : s->clip == CLIP_MEAN_ABS
                                ? "|mean of the unit's gradient entries| (Eq. 19 literally), mean over minibatches at w_t"
                            : s->variant == LW_PAPER ? "mean over minibatches at w_t (one local pass) of the unit's gradient L2 norm"
                                                     : "mean over minibatches at w_t (one local pass) of the unit's gradient L1 norm");
    cJSON_AddStringToObject(out, "noise", s->variant == LW_PAPER ? (s->flat ? "Laplace b = 2C/eps, L2 clip"
                                                                            : "Laplace b = 2*C*lr/eps_i (Eq. 20), L2 clip")
                                                                 : "Laplace b = 2C/eps_i, L1 clip");
    if (!s->flat) {
        cJSON_AddNumberToObject(out, "lambda", s->lambda);
        cJSON_AddNumberToObject(out, "c", s->c);
        cJSON_AddNumberToObject(out, "alpha", s->alpha);
        cJSON_AddNumberToObject(out, "cap", s->cap);
        cJSON_AddNumberToObject(out, "reserve", s->reserve);
        cJSON_AddBoolToObject(out, "armijo", s->armijo);
        cJSON_AddNumberToObject(out, "threshold", s->threshold);
        cJSON_AddNumberToObject(out, "importance_fraction", s->importance_fraction);
        cJSON_AddNumberToObject(out, "importance_max", s->importance_max);
        cJSON_AddStringToObject(out, "linear_importance", s->linear == LIN_MEAN ? "mean" : "one");
    }
    cJSON_AddStringToObject(out, "aggregation", s->agg == LW_AGG_SHAPLEY ? "shapley" : "fedavg");
    if (s->agg == LW_AGG_SHAPLEY) {
        int groups = shap_server_groups(s->server);
        cJSON_AddNumberToObject(out, "shap_samples", shap_server_rows(s->server));
        cJSON_AddNumberToObject(out, "eval_samples", shap_server_eval_samples(s->server));
        cJSON_AddNumberToObject(out, "server_set", s->setup.n_server);
        cJSON_AddNumberToObject(out, "feature_groups", groups);
        cJSON_AddStringToObject(out, "shap_vector", s->shap_kind == SHAP_MEAN ? "mean" : "mean-abs");
        cJSON_AddStringToObject(out, "shapley", groups <= SHAPLEY_EXACT_MAX ? "exact" : "permutation sampling");
        if (groups > SHAPLEY_EXACT_MAX)
            cJSON_AddNumberToObject(out, "shap_permutations", s->n_perm);
    }
    // What happened, summed over rounds and clients.
    cJSON *dg = cJSON_AddObjectToObject(out, "diagnostics");
    cJSON_AddNumberToObject(dg, "uploads", (double)s->uploads);
    cJSON_AddNumberToObject(dg, "draws", (double)s->draws);
    if (!s->flat) {
        cJSON_AddNumberToObject(dg, "armijo_accepted_first", (double)s->accepted_first);
        cJSON_AddNumberToObject(dg, "armijo_accepted_after_escalation", (double)s->accepted_later);
        cJSON_AddNumberToObject(dg, "armijo_never_accepted", (double)s->never_accepted);
    }
    if (s->agg == LW_AGG_SHAPLEY)
        cJSON_AddNumberToObject(dg, "merges", (double)s->merges);
    double n = s->uploads ? (double)s->uploads : 1;
    cJSON_AddNumberToObject(dg, "mean_eps_t", s->sum_eps_t / n);
    cJSON *units = cJSON_AddArrayToObject(dg, "units");
    for (int u = 0; u < s->n_units; u++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", s->units[u].name);
        cJSON_AddNumberToObject(o, "parameters", (double)s->units[u].count);
        if (!s->flat)
            cJSON_AddNumberToObject(o, "mean_importance", s->sum_s[u] / n);
        cJSON_AddNumberToObject(o, "mean_clip", s->sum_clip[u] / n);
        cJSON_AddNumberToObject(o, "mean_norm_before_clip", s->sum_norm[u] / n);
        cJSON_AddNumberToObject(o, "mean_laplace_scale", s->sum_scale[u] / n);
        cJSON_AddItemToArray(units, o);
    }
    return FP_OK;
}

const DefenseOps defense_layerwise = {
    .name = "layerwise",
    .summary = "layer-wise Laplace budgets from sigmoid-gate importance, Armijo escalation, SHAP-similarity merge "
               "(Liu et al. 2025; lstm)",
    .variants = "corrected,paper",
    .create = lw_create,
    .destroy = lw_destroy,
    .upload_kind = lw_upload_kind,
    .participates = lw_participates,
    .client_perturb = lw_perturb,
    .upload_params = lw_upload_params,
    .client_state_size = sizeof(LwClientState),
    .client_state_save = lw_client_state_save,
    .client_state_load = lw_client_state_load,
    // The gather form: the Shapley merge scores every upload against the others; its state
    // holds per-client budgets that travel with the uploads across ranks (client_state_*).
    .server_aggregate = lw_aggregate,
    .end_round = lw_end_round,
    .privacy = lw_privacy,
    .describe = lw_describe,
    .takes_param = lw_takes_param,
};

const DefenseOps defense_flat_laplace = {
    .name = "flat-laplace",
    .summary = "flat DP-FL baseline: epsilon_total/rounds per round, one clip, Laplace on the whole update, FedAvg",
    .variants = "corrected,paper",
    .create = flat_create,
    .destroy = lw_destroy,
    .upload_kind = lw_upload_kind,
    .participates = lw_participates,
    .client_perturb = lw_perturb,
    .upload_params = lw_upload_params,
    .client_state_size = sizeof(LwClientState),
    .client_state_save = lw_client_state_save,
    .client_state_load = lw_client_state_load,
    // The gather form: the Shapley merge scores every upload against the others; its state
    // holds per-client budgets that travel with the uploads across ranks (client_state_*).
    .server_aggregate = lw_aggregate,
    .end_round = lw_end_round,
    .privacy = lw_privacy,
    .describe = lw_describe,
    .takes_param = flat_takes_param,
};
