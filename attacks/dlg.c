// DLG (Zhu et al., NeurIPS 2019) and iDLG (Zhao et al. 2020) against a defended
// upload: `fedpriv attack dlg|idlg --config FILE.json --out DIR`.
//
// Threat model: an honest-but-curious server that sees one client's upload after the
// defense, for one round in which the client held one batch of the attacked images.
// Each batch of attack.batch_size images is its own client (client id = batch number,
// round 0) of a one-round federation with as many clients as batches.
//   - gradient-level defenses (upload_kind UPLOAD_GRADIENT): the client's upload is the
//     gradient of the batch-mean loss at the global weights (one step's summed gradient,
//     computed directly rather than as (w − w′)/lr, which would only add float rounding);
//     the defense perturbs it and the server matches that;
//   - weight-level defenses (UPLOAD_WEIGHTS / UPLOAD_DELTA: SPM, the local-DP
//     mechanisms, and "none"): the client takes one SGD step on the batch through
//     local_train (federation.lr, momentum, weight_decay), the defense perturbs the
//     weights or delta, and the server estimates g = (w_global − upload)/lr − wd·w_global
//     (or −delta/lr − wd·w_global). attack.threat_model "gradient" / "weights" forces one.
// Both attacks then run attacks/inversion.h: DLG learns x′ and soft labels y′; iDLG
// first reads the labels off the last layer's gradient (idlg_labels) and learns x′ only.
//
// Metrics: each reconstruction is clamped to [0,1] (what its PNG holds) and compared
// with the originals by SSIM, PSNR and MSE (eval/image_metrics.h). For a batch of B > 1
// the B reconstructions are matched to the B originals by the assignment (permutation)
// that maximises the summed SSIM, found exhaustively (B ≤ 8: at most 40 320 permutations);
// label_correct compares the matched reconstruction's label (argmax softmax(y′) for
// DLG, the rule's label for iDLG) with the original's.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/attack.h"
#include "attacks/inversion.h"
#include "core/jsonv.h"
#include "eval/image_metrics.h"
#include "eval/png.h"

#define DLG_MAX_BATCH 8
#define DLG_MAX_IMAGES 4096
#define GRID_SNAPSHOTS 8 // snapshot columns in the grid (evenly spaced)

typedef enum { THREAT_AUTO = 0, THREAT_GRADIENT = 1, THREAT_WEIGHTS = 2 } ThreatChoice;

typedef struct DlgOptions {
    int idlg;
    int *images, n_images;
    int batch_size;
    int use_train;          // images come from the train split (dataset.split), else test
    ThreatChoice threat;
    InversionConfig inv;
} DlgOptions;

// -- configuration ------------------------------------------------------------------------
static FpStatus parse_lbfgs(const cJSON *j, const char *path, LbfgsConfig *c, FpError *err) {
    *c = lbfgs_defaults();
    if (!j)
        return FP_OK;
    static const char *const keys[] = {"lr", "max_iter", "max_eval", "history_size", "tolerance_grad",
                                       "tolerance_change", NULL};
    FP_TRY(jv_keys(j, path, keys, err));
    long long v;
    FP_TRY(jv_number(j, path, "lr", JV_OPTIONAL, c->lr, 0, 1, 1e6, 0, &c->lr, err));
    FP_TRY(jv_int(j, path, "max_iter", JV_OPTIONAL, c->max_iter, 1, 100000, &v, err));
    c->max_iter = (int)v;
    FP_TRY(jv_int(j, path, "max_eval", JV_OPTIONAL, c->max_iter * 5 / 4, 1, 1000000, &v, err));
    c->max_eval = (int)v;
    FP_TRY(jv_int(j, path, "history_size", JV_OPTIONAL, c->history_size, 1, 10000, &v, err));
    c->history_size = (int)v;
    FP_TRY(jv_number(j, path, "tolerance_grad", JV_OPTIONAL, c->tolerance_grad, 0, 0, 1e6, 0, &c->tolerance_grad, err));
    FP_TRY(jv_number(j, path, "tolerance_change", JV_OPTIONAL, c->tolerance_change, 0, 0, 1e6, 0,
                     &c->tolerance_change, err));
    return FP_OK;
}

static FpStatus dlg_parse(const AttackEnv *env, int idlg, DlgOptions *o, FpError *err) {
    memset(o, 0, sizeof *o);
    o->idlg = idlg;
    const cJSON *j = env->attack_json;
    const char *path = env->path;
    const Experiment *ex = env->ex;
    char p[256];
    static const char *const keys[] = {"name", "images", "batch_size", "steps", "restarts", "distance", "tv",
                                       "snapshot_every", "threat_model", "lbfgs", NULL};
    FP_TRY(jv_keys(j, path, keys, err));
    long long v;
    FP_TRY(jv_int(j, path, "batch_size", JV_OPTIONAL, 1, 1, DLG_MAX_BATCH, &v, err));
    o->batch_size = (int)v;
    FP_TRY(jv_int(j, path, "steps", JV_OPTIONAL, 300, 1, 1000000, &v, err));
    o->inv.steps = (int)v;
    FP_TRY(jv_int(j, path, "restarts", JV_OPTIONAL, 1, 1, 1000, &v, err));
    o->inv.restarts = (int)v;
    FP_TRY(jv_int(j, path, "snapshot_every", JV_OPTIONAL, 10, 0, 1000000, &v, err));
    o->inv.snapshot_every = (int)v;
    static const char *const dists[] = {"l2", "cosine", NULL};
    int choice;
    FP_TRY(jv_choice(j, path, "distance", dists, INV_DISTANCE_L2, &choice, err));
    o->inv.distance = (InvDistance)choice;
    FP_TRY(jv_number(j, path, "tv", JV_OPTIONAL, 0.0, 0, 0, 1e6, 0, &o->inv.tv, err));
    static const char *const threats[] = {"auto", "gradient", "weights", NULL};
    FP_TRY(jv_choice(j, path, "threat_model", threats, THREAT_AUTO, &choice, err));
    o->threat = (ThreatChoice)choice;
    const cJSON *lj;
    FP_TRY(jv_object(j, path, "lbfgs", JV_OPTIONAL, &lj, err));
    FP_TRY(parse_lbfgs(lj, jv_path(p, sizeof p, path, "lbfgs"), &o->inv.lbfgs, err));
    // Where the images come from: dataset.split ("test" by default).
    static const char *const splits[] = {"test", "train", NULL};
    FP_TRY(jv_choice(ex->dataset_json, "dataset", "split", splits, 0, &choice, err));
    o->use_train = choice == 1;
    const Dataset *d = o->use_train ? ex->train : ex->test;
    // The model must be an image classifier with a last linear layer (iDLG's rule).
    if (ex->shape.n_classes < 2 || !d->y)
        return fp_fail(err, FP_EPARAM, "dataset.name: gradient inversion needs a classification dataset");
    if (d->h < IMAGE_SSIM_WINDOW || d->w < IMAGE_SSIM_WINDOW || (d->c != 1 && d->c != 3))
        return fp_fail(err, FP_EPARAM, "dataset.name: gradient inversion needs 1- or 3-channel images of at least "
                                       "%dx%d (SSIM), the data is %dx%dx%d", IMAGE_SSIM_WINDOW, IMAGE_SSIM_WINDOW,
                       d->c, d->h, d->w);
    int last = model_last_weight_layer(ex->model);
    if (idlg && (last < 0 || ex->model->table.layers[last].ndim != 2 ||
                 ex->model->table.layers[last].shape[0] != ex->shape.n_classes))
        return fp_fail(err, FP_EPARAM, "model.name: iDLG needs a model whose last layer is linear (classes x hidden)");
    double *imgs = NULL;
    int n = 0;
    FP_TRY(jv_number_array(j, path, "images", JV_OPTIONAL, 1, DLG_MAX_IMAGES, &imgs, &n, err));
    if (!imgs) {
        n = o->batch_size;
        imgs = fp_malloc(sizeof(double) * n, err);
        if (!imgs)
            return FP_ENOMEM;
        for (int i = 0; i < n; i++)
            imgs[i] = i;
    }
    o->images = fp_malloc(sizeof(int) * n, err);
    if (!o->images) {
        free(imgs);
        return FP_ENOMEM;
    }
    o->n_images = n;
    FpStatus st = FP_OK;
    jv_path(p, sizeof p, path, "images");
    for (int i = 0; i < n && st == FP_OK; i++) {
        if (imgs[i] != floor(imgs[i]) || imgs[i] < 0 || imgs[i] >= d->n)
            st = fp_fail(err, FP_EPARAM, "%s[%d]: must be an integer index in [0, %d) (the %s split), got %g", p, i,
                         d->n, o->use_train ? "train" : "test", imgs[i]);
        else
            o->images[i] = (int)imgs[i];
        for (int k = 0; k < i && st == FP_OK; k++)
            if (o->images[k] == o->images[i])
                st = fp_fail(err, FP_EPARAM, "%s[%d]: index %d is listed twice", p, i, o->images[i]);
    }
    free(imgs);
    if (st == FP_OK && n % o->batch_size != 0)
        st = fp_fail(err, FP_EPARAM, "%s: %d images do not split into batches of %s.batch_size = %d", p, n, path,
                     o->batch_size);
    if (st != FP_OK) {
        free(o->images);
        o->images = NULL;
    }
    return st;
}

static FpStatus dlg_validate_common(const AttackEnv *env, int idlg, FpError *err) {
    DlgOptions o;
    FP_TRY(dlg_parse(env, idlg, &o, err));
    free(o.images);
    return FP_OK;
}

static FpStatus dlg_validate(const AttackEnv *env, FpError *err) { return dlg_validate_common(env, 0, err); }
static FpStatus idlg_validate(const AttackEnv *env, FpError *err) { return dlg_validate_common(env, 1, err); }

// -- what the server observes --------------------------------------------------------------
typedef struct Observer {
    const DefenseOps *ops;
    void *state;
    DefenseSetup setup;
    UploadKind kind;
    int weights_path;       // 1: estimate from weights/delta after one SGD step; 0: the gradient itself
    Model *local;           // the client's model
    Tape *tape;
    float *momentum;        // device, n_params
    float *global, *upload; // host, n_params
    float *scratch;
} Observer;

static void observer_free(Observer *ob) {
    if (ob->state)
        ob->ops->destroy(ob->state);
    if (ob->local && ob->momentum)
        ob->local->be->free(ob->momentum);
    model_free(ob->local);
    tape_free(ob->tape);
    free(ob->global);
    free(ob->upload);
    free(ob->scratch);
    memset(ob, 0, sizeof *ob);
}

static FpStatus observer_create(const Experiment *ex, const DlgOptions *o, const Dataset *d, Observer *ob,
                                FpError *err) {
    memset(ob, 0, sizeof *ob);
    Model *m = ex->model;
    size_t np = m->table.n_params;
    int n_batches = o->n_images / o->batch_size;
    ob->ops = ex->defense;
    ob->setup = (DefenseSetup){.seed = ex->seed, .params = &m->table, .n_clients = n_batches, .rounds = 1,
                               .sample_rate = 1.0, .local_epochs = 1, .batch_size = o->batch_size, .lr = ex->fed.lr,
                               .min_client_samples = o->batch_size, .max_client_samples = o->batch_size};
    cJSON *dflt = NULL;
    const cJSON *dj = ex->defense_json;
    if (!dj) {
        dflt = cJSON_CreateObject();
        cJSON_AddStringToObject(dflt, "name", ob->ops->name);
        dj = dflt;
    }
    FpStatus st = ob->ops->create(dj, "defense", &ob->setup, &ob->state, err);
    cJSON_Delete(dflt);
    if (st != FP_OK) {
        ob->state = NULL;
        return st;
    }
    ob->kind = ob->ops->upload_kind(ob->state);
    ob->weights_path = o->threat == THREAT_WEIGHTS || (o->threat == THREAT_AUTO && ob->kind != UPLOAD_GRADIENT);
    ob->local = model_clone(m, m->be, err);
    ob->tape = tape_create(m->be);
    ob->global = malloc(np * sizeof(float));
    ob->upload = malloc(np * sizeof(float));
    size_t ss = dataset_sample_size(d);
    ob->scratch = malloc(sizeof(float) * ((size_t)o->batch_size * (ss + 1) + 16));
    ob->momentum = ob->local ? m->be->alloc(np * sizeof(float)) : NULL;
    if (!ob->local || !ob->tape || !ob->global || !ob->upload || !ob->scratch || !ob->momentum) {
        observer_free(ob);
        return fp_fail(err, FP_ENOMEM, "out of memory preparing the observed client");
    }
    model_get_params(m, ob->global);
    return FP_OK;
}

// The batch-mean loss gradient at the global weights (host, n_params; non-trainable 0).
static FpStatus batch_gradient(Observer *ob, const Dataset *d, const uint32_t *idx, int B, float *g, FpError *err) {
    Model *m = ob->local;
    Tape *t = ob->tape;
    int L = m->table.n_layers;
    Var **p = malloc(sizeof(Var *) * 2 * L);
    if (!p)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    model_set_params(m, ob->global);
    tape_reset(t);
    FpStatus st = model_param_vars(m, t, 1, p);
    Var *x = st == FP_OK ? dataset_batch(t, d, idx, B, ob->scratch) : NULL;
    Var *out = x ? model_forward(m, t, p, x, 1) : NULL;
    Var *loss = batch_loss(t, out, d, idx, B, ob->scratch);
    st = loss ? ad_grad(t, loss, p, L, p + L, 0) : FP_EUNSUPPORTED;
    if (st == FP_OK) {
        memset(g, 0, sizeof(float) * m->table.n_params);
        for (int i = 0; i < L; i++)
            if (m->table.layers[i].trainable)
                ad_to_host(t, p[L + i], g + m->table.layers[i].offset);
    }
    free(p);
    if (st != FP_OK)
        return fp_fail(err, st == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED, "the client's gradient failed (%s)",
                       fp_status_name(st));
    return FP_OK;
}

// Forms the client's upload for batch `client`, lets the defense perturb it, and writes
// the server's estimate of the batch gradient to target (host, n_params).
static FpStatus observe(Observer *ob, const Experiment *ex, const Dataset *d, const uint32_t *idx, int B, int client,
                        float *target, FpError *err) {
    Model *m = ob->local;
    size_t np = m->table.n_params;
    const FedConfig *fc = &ex->fed;
    const float *w = ob->global;
    float *up = ob->upload;
    float lr = (float)fc->lr, wd = (float)fc->weight_decay;
    UploadKind kind = ob->kind;
    if (!ob->weights_path) {
        FP_TRY(batch_gradient(ob, d, idx, B, up, err));
        kind = UPLOAD_GRADIENT;
    } else {
        // One local SGD step on the batch, exactly as the engine trains a client.
        model_set_params(m, w);
        LocalTrainConfig lc = {.epochs = 1, .steps = 1, .batch_size = B, .lr = fc->lr, .momentum = fc->momentum,
                               .weight_decay = fc->weight_decay};
        RngStream shuffle = rng_stream(ex->seed, RNG_SHUFFLE, 0, (uint32_t)client);
        FP_TRY(local_train(m, ob->tape, d, idx, B, &lc, &shuffle, ob->momentum, err));
        model_get_params(m, up);
        if (kind == UPLOAD_DELTA)
            for (size_t i = 0; i < np; i++)
                up[i] -= w[i];
        else if (kind == UPLOAD_GRADIENT) // a gradient-level defense forced onto this path
            for (size_t i = 0; i < np; i++)
                up[i] = (w[i] - up[i]) / lr;
    }
    DefenseRound dr = {.round = 0, .client = client,
                       .rng = rng_stream(ex->seed, RNG_DEFENSE, 0, (uint32_t)client),
                       .aux_rng = rng_stream(ex->seed, RNG_DEFENSE_AUX, 0, (uint32_t)client),
                       .global = w, .n_local_samples = B, .model = m, .local_data = d, .local_idx = idx, .n_local = B};
    FP_TRY(ob->ops->client_perturb(ob->state, up, &dr, err));
    for (size_t i = 0; i < np; i++) {
        switch (kind) {
        case UPLOAD_WEIGHTS: target[i] = (w[i] - up[i]) / lr - wd * w[i]; break;
        case UPLOAD_DELTA: target[i] = -up[i] / lr - wd * w[i]; break;
        case UPLOAD_GRADIENT: target[i] = up[i] - (ob->weights_path ? wd * w[i] : 0.0f); break;
        }
    }
    return FP_OK;
}

// -- matching and metrics -------------------------------------------------------------------
static void best_assignment(const double *ssim, int B, int *perm, int *best, double *best_sum, int k, int *used,
                            double sum) {
    if (k == B) {
        if (sum > *best_sum) {
            *best_sum = sum;
            memcpy(best, perm, sizeof(int) * B);
        }
        return;
    }
    for (int j = 0; j < B; j++)
        if (!used[j]) {
            used[j] = 1;
            perm[k] = j;
            best_assignment(ssim, B, perm, best, best_sum, k + 1, used, sum + ssim[k * B + j]);
            used[j] = 0;
        }
}

static void clamp01(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = isnan(src[i]) ? 0.0f : src[i] < 0.0f ? 0.0f : src[i] > 1.0f ? 1.0f : src[i];
}

static void add_number(cJSON *o, const char *key, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else if (isinf(v))
        cJSON_AddStringToObject(o, key, v > 0 ? "inf" : "-inf");
    else
        cJSON_AddNullToObject(o, key);
}

static FpStatus write_png(const char *dir, const char *rel, const float *img, int c, int h, int w, FpError *err) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", dir, rel);
    return png_write(full, img, c, h, w, err);
}

// -- the attack -------------------------------------------------------------------------------
typedef struct RunTotals {
    double ssim_sum, psnr_sum, mse_sum, seconds, cpu_seconds;
    int n, labels_ok, ssim_95;
    long evals;
} RunTotals;

// One batch's inversion job: the server's target and (iDLG) labels in, the result out.
typedef struct BatchJob {
    float *target;                 // host, n_params
    int32_t labels[DLG_MAX_BATCH]; // iDLG's rule
    InversionResult res;
    FpStatus st;
    FpError err;
} BatchJob;

// Scores one finished batch: matching, metrics, PNGs, the per-image records, the grid rows.
static FpStatus score_batch(const AttackEnv *env, const DlgOptions *o, const Dataset *d, int bi, BatchJob *job,
                            float *grid, int grid_cols, cJSON *images, RunTotals *tot, FpError *err) {
    int B = o->batch_size, c = d->c, h = d->h, w = d->w;
    size_t ss = dataset_sample_size(d);
    uint32_t idx[DLG_MAX_BATCH];
    const int32_t *labels = job->labels;
    InversionResult res = job->res;
    for (int i = 0; i < B; i++)
        idx[i] = (uint32_t)o->images[bi * B + i];
    float *rec = malloc(sizeof(float) * ss * B), *snap = malloc(sizeof(float) * ss);
    FpStatus st = FP_OK;
    if (!rec || !snap) {
        st = fp_fail(err, FP_ENOMEM, "out of memory");
        goto out;
    }
    clamp01(rec, res.x, ss * B);
    // SSIM of every (original i, reconstruction j) pair, then the best assignment.
    double ssim[DLG_MAX_BATCH * DLG_MAX_BATCH];
    for (int i = 0; i < B && st == FP_OK; i++)
        for (int j = 0; j < B && st == FP_OK; j++)
            st = image_ssim(d->x + (size_t)idx[i] * ss, rec + (size_t)j * ss, c, h, w, &ssim[i * B + j], err);
    if (st != FP_OK)
        goto out;
    int perm[DLG_MAX_BATCH], best[DLG_MAX_BATCH], used[DLG_MAX_BATCH] = {0};
    double best_sum = -INFINITY;
    for (int i = 0; i < B; i++)
        best[i] = i;
    best_assignment(ssim, B, perm, best, &best_sum, 0, used, 0.0);
    for (int i = 0; i < B && st == FP_OK; i++) {
        int j = best[i], index = (int)idx[i];
        const float *orig = d->x + (size_t)idx[i] * ss, *r = rec + (size_t)j * ss;
        ImageMetrics im;
        st = image_metrics(orig, r, c, h, w, &im, err);
        if (st != FP_OK)
            break;
        int pred = o->idlg ? labels[j] : 0;
        if (!o->idlg) {
            const float *pr = res.label_probs + (size_t)j * res.classes;
            pred = 0;
            for (int k = 1; k < res.classes; k++)
                if (pr[k] > pr[pred])
                    pred = k;
        }
        char orig_png[64], rec_png[64];
        snprintf(orig_png, sizeof orig_png, "original_%d.png", index);
        snprintf(rec_png, sizeof rec_png, "reconstruction_%d.png", index);
        st = write_png(env->out_dir, orig_png, orig, c, h, w, err);
        if (st == FP_OK)
            st = write_png(env->out_dir, rec_png, r, c, h, w, err);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(images, e);
        cJSON_AddNumberToObject(e, "index", index);
        cJSON_AddNumberToObject(e, "batch", bi);
        cJSON_AddNumberToObject(e, "label", d->y[idx[i]]);
        cJSON_AddNumberToObject(e, "recovered_label", pred);
        cJSON_AddBoolToObject(e, "label_correct", pred == d->y[idx[i]]);
        if (!o->idlg)
            cJSON_AddItemToObject(e, "label_probabilities",
                                  cJSON_CreateFloatArray(res.label_probs + (size_t)j * res.classes, res.classes));
        add_number(e, "ssim", im.ssim);
        add_number(e, "psnr", im.psnr);
        add_number(e, "mse", im.mse);
        add_number(e, "matching_loss", res.loss);
        cJSON_AddNumberToObject(e, "best_restart", res.best_restart);
        cJSON *rl = cJSON_AddArrayToObject(e, "restart_losses");
        for (int k = 0; k < o->inv.restarts; k++)
            cJSON_AddItemToArray(rl, isfinite(res.restart_losses[k]) ? cJSON_CreateNumber(res.restart_losses[k])
                                                                      : cJSON_CreateNull());
        cJSON *lc = cJSON_AddArrayToObject(e, "loss_curve");
        for (int k = 0; k < res.n_curve; k++)
            cJSON_AddItemToArray(lc, isfinite(res.loss_curve[k]) ? cJSON_CreateNumber(res.loss_curve[k])
                                                                 : cJSON_CreateNull());
        cJSON_AddStringToObject(e, "original_png", orig_png);
        cJSON_AddStringToObject(e, "reconstruction_png", rec_png);
        cJSON *sn = cJSON_AddArrayToObject(e, "snapshots");
        int row = bi * B + i;
        memcpy(grid + (size_t)row * grid_cols * ss, orig, sizeof(float) * ss);
        memcpy(grid + ((size_t)row * grid_cols + grid_cols - 1) * ss, r, sizeof(float) * ss);
        for (int k = 0; k < res.n_snapshots && st == FP_OK; k++) {
            clamp01(snap, res.snapshots + ((size_t)k * B + j) * ss, ss);
            char sp[80];
            snprintf(sp, sizeof sp, "reconstruction_%d_step%d.png", index, res.snapshot_steps[k]);
            double s_ssim = NAN;
            st = image_ssim(orig, snap, c, h, w, &s_ssim, err);
            if (st == FP_OK)
                st = write_png(env->out_dir, sp, snap, c, h, w, err);
            cJSON *so = cJSON_CreateObject();
            cJSON_AddNumberToObject(so, "step", res.snapshot_steps[k]);
            add_number(so, "ssim", s_ssim);
            add_number(so, "matching_loss", res.loss_curve[res.snapshot_steps[k]]);
            cJSON_AddStringToObject(so, "png", sp);
            cJSON_AddItemToArray(sn, so);
            // Evenly spaced snapshots fill the grid's middle columns.
            int n_mid = grid_cols - 2;
            for (int col = 0; col < n_mid; col++)
                if ((int)((long)(col + 1) * res.n_snapshots / n_mid) - 1 == k)
                    memcpy(grid + ((size_t)row * grid_cols + 1 + col) * ss, snap, sizeof(float) * ss);
        }
        tot->ssim_sum += im.ssim;
        tot->psnr_sum += im.psnr;
        tot->mse_sum += im.mse;
        tot->labels_ok += pred == d->y[idx[i]];
        tot->ssim_95 += im.ssim >= 0.95;
        tot->n++;
    }
    tot->evals += res.evaluations;
    tot->seconds += res.seconds;
    tot->cpu_seconds += res.cpu_seconds;
    if (!env->quiet && st == FP_OK) {
        fprintf(stderr, "%s: batch %d/%d (image %d%s): SSIM %.4f, matching loss %.3g, %ld evaluations, %.1f s\n",
                o->idlg ? "idlg" : "dlg", bi + 1, o->n_images / B, (int)idx[0], B > 1 ? ", ..." : "",
                ssim[0 * B + best[0]], res.loss, res.evaluations, res.seconds);
    }
out:
    free(rec);
    free(snap);
    return st;
}

// The inversions are independent: worker w runs batches w, w + T, w + 2T, ... Each has
// its own tape; the model is only read. Results do not depend on the thread count.
typedef struct InvWorker {
    const DlgOptions *o;
    const Experiment *ex;
    BatchJob *jobs;
    int first, stride, n_batches;
} InvWorker;

static void *inversion_worker(void *arg) {
    InvWorker *w = arg;
    for (int bi = w->first; bi < w->n_batches; bi += w->stride) {
        BatchJob *j = &w->jobs[bi];
        InversionProblem prob = {.model = w->ex->model, .target = j->target, .batch = w->o->batch_size,
                                 .labels = w->o->idlg ? j->labels : NULL, .seed = w->ex->seed,
                                 .stream = (uint32_t)bi};
        j->st = inversion_run(&prob, &w->o->inv, &j->res, &j->err);
        if (j->st != FP_OK)
            break;
    }
    return NULL;
}

static FpStatus run_inversions(const Experiment *ex, const DlgOptions *o, BatchJob *jobs, int n_batches,
                               FpError *err) {
    int T = ex->threads < 1 ? 1 : ex->threads;
    if (T > n_batches)
        T = n_batches;
    if (ex->backend->device != DEVICE_CPU)
        T = 1;
    if (ex->backend->set_threads)
        ex->backend->set_threads(1); // closures are far too small for BLAS threads
    InvWorker w[64];
    pthread_t tid[64];
    int running[64] = {0};
    if (T > 64)
        T = 64;
    for (int k = 0; k < T; k++)
        w[k] = (InvWorker){.o = o, .ex = ex, .jobs = jobs, .first = k, .stride = T, .n_batches = n_batches};
    for (int k = 1; k < T; k++)
        running[k] = pthread_create(&tid[k], NULL, inversion_worker, &w[k]) == 0;
    inversion_worker(&w[0]);
    for (int k = 1; k < T; k++) {
        if (running[k])
            pthread_join(tid[k], NULL);
        else // no thread: run its share here
            inversion_worker(&w[k]);
    }
    for (int bi = 0; bi < n_batches; bi++)
        if (jobs[bi].st != FP_OK) {
            *err = jobs[bi].err;
            return jobs[bi].st;
        }
    return FP_OK;
}

static FpStatus dlg_run_common(const AttackEnv *env, cJSON *result, int idlg, FpError *err) {
    DlgOptions o;
    FP_TRY(dlg_parse(env, idlg, &o, err));
    const Experiment *ex = env->ex;
    const Dataset *d = o.use_train ? ex->train : ex->test;
    size_t ss = dataset_sample_size(d);
    Observer ob;
    FpStatus st = observer_create(ex, &o, d, &ob, err);
    if (st != FP_OK) {
        free(o.images);
        return st;
    }
    int n_snap = o.inv.snapshot_every > 0 ? o.inv.steps / o.inv.snapshot_every : 0;
    int grid_cols = 2 + (n_snap < GRID_SNAPSHOTS ? n_snap : GRID_SNAPSHOTS);
    float *grid = calloc((size_t)o.n_images * grid_cols * ss, sizeof(float));
    if (!grid) {
        observer_free(&ob);
        free(o.images);
        return fp_fail(err, FP_ENOMEM, "out of memory for the image grid");
    }
    // The resolved configuration and the threat model, before the work.
    cJSON *cfg = cJSON_AddObjectToObject(result, "attack_config");
    cJSON_AddStringToObject(cfg, "name", idlg ? "idlg" : "dlg");
    cJSON_AddItemToObject(cfg, "images", cJSON_CreateIntArray(o.images, o.n_images));
    cJSON_AddStringToObject(cfg, "split", o.use_train ? "train" : "test");
    cJSON_AddNumberToObject(cfg, "batch_size", o.batch_size);
    cJSON_AddNumberToObject(cfg, "steps", o.inv.steps);
    cJSON_AddNumberToObject(cfg, "restarts", o.inv.restarts);
    cJSON_AddStringToObject(cfg, "distance", o.inv.distance == INV_DISTANCE_L2 ? "l2" : "cosine");
    cJSON_AddNumberToObject(cfg, "tv", o.inv.tv);
    cJSON_AddNumberToObject(cfg, "snapshot_every", o.inv.snapshot_every);
    cJSON *lb = cJSON_AddObjectToObject(cfg, "lbfgs");
    cJSON_AddNumberToObject(lb, "lr", o.inv.lbfgs.lr);
    cJSON_AddNumberToObject(lb, "max_iter", o.inv.lbfgs.max_iter);
    cJSON_AddNumberToObject(lb, "max_eval", o.inv.lbfgs.max_eval);
    cJSON_AddNumberToObject(lb, "history_size", o.inv.lbfgs.history_size);
    cJSON_AddNumberToObject(lb, "tolerance_grad", o.inv.lbfgs.tolerance_grad);
    cJSON_AddNumberToObject(lb, "tolerance_change", o.inv.lbfgs.tolerance_change);
    cJSON_AddStringToObject(result, "threat_model", ob.weights_path ? "weights" : "gradient");
    char desc[256];
    if (ob.weights_path)
        snprintf(desc, sizeof desc, "one local SGD step (lr %g) on the batch; the defense perturbs the %s; the server "
                 "uses %s", ex->fed.lr, ob.kind == UPLOAD_DELTA ? "delta" : ob.kind == UPLOAD_WEIGHTS ? "weights"
                 : "gradient", ob.kind == UPLOAD_DELTA ? "-delta/lr" : ob.kind == UPLOAD_WEIGHTS
                 ? "(w_global - upload)/lr" : "the upload");
    else
        snprintf(desc, sizeof desc, "the defense perturbs the batch gradient at the global weights; the server "
                 "matches the perturbed gradient");
    cJSON_AddStringToObject(result, "threat_model_detail", desc);
    cJSON *dj = cJSON_AddObjectToObject(result, "defense");
    cJSON_AddStringToObject(dj, "name", ob.ops->name);
    if (ob.ops->describe)
        ob.ops->describe(ob.state, dj);
    if (ob.ops->privacy) {
        PrivacyRecord pr;
        defense_privacy(ob.ops, ob.state, 1, &pr);
        cJSON_AddItemToObject(dj, "privacy_one_round", privacy_record_json(&pr));
    }
    cJSON *images = cJSON_AddArrayToObject(result, "images");
    RunTotals tot = {0};
    int n_batches = o.n_images / o.batch_size;
    size_t np = ex->model->table.n_params;
    BatchJob *jobs = calloc((size_t)n_batches, sizeof(BatchJob));
    if (!jobs)
        st = fp_fail(err, FP_ENOMEM, "out of memory");
    // What the server sees, client by client (in order: defenses may keep state).
    for (int bi = 0; bi < n_batches && st == FP_OK; bi++) {
        uint32_t idx[DLG_MAX_BATCH];
        for (int i = 0; i < o.batch_size; i++)
            idx[i] = (uint32_t)o.images[bi * o.batch_size + i];
        jobs[bi].target = malloc(sizeof(float) * np);
        if (!jobs[bi].target)
            st = fp_fail(err, FP_ENOMEM, "out of memory");
        else
            st = observe(&ob, ex, d, idx, o.batch_size, bi, jobs[bi].target, err);
        if (st == FP_OK && o.idlg) {
            const ParamLayer *l = &ex->model->table.layers[model_last_weight_layer(ex->model)];
            idlg_labels(jobs[bi].target + l->offset, l->shape[0], l->shape[1], o.batch_size, jobs[bi].labels);
        }
    }
    if (st == FP_OK)
        st = run_inversions(ex, &o, jobs, n_batches, err);
    for (int bi = 0; bi < n_batches && st == FP_OK; bi++)
        st = score_batch(env, &o, d, bi, &jobs[bi], grid, grid_cols, images, &tot, err);
    for (int bi = 0; jobs && bi < n_batches; bi++) {
        free(jobs[bi].target);
        inversion_result_free(&jobs[bi].res);
    }
    free(jobs);
    if (st == FP_OK) {
        char gp[4096];
        snprintf(gp, sizeof gp, "%s/grid.png", env->out_dir);
        int scale = d->h < 64 ? 96 / d->h : 1;
        st = png_write_grid(gp, grid, o.n_images * grid_cols, d->c, d->h, d->w, grid_cols, 2, scale < 1 ? 1 : scale,
                            err);
    }
    if (st == FP_OK) {
        cJSON_AddStringToObject(result, "grid_png", "grid.png");
        cJSON_AddStringToObject(result, "grid_layout", "one row per image: original, evenly spaced snapshots, final");
        add_number(result, "ssim_mean", tot.ssim_sum / tot.n);
        add_number(result, "psnr_mean", tot.psnr_sum / tot.n);
        add_number(result, "mse_mean", tot.mse_sum / tot.n);
        cJSON_AddNumberToObject(result, "label_accuracy", (double)tot.labels_ok / tot.n);
        cJSON_AddNumberToObject(result, "images_recovered", tot.ssim_95); // SSIM >= recovered_ssim
        cJSON_AddNumberToObject(result, "recovered_ssim", 0.95);
        cJSON_AddNumberToObject(result, "closure_evaluations", (double)tot.evals);
        cJSON_AddNumberToObject(result, "optimisation_seconds", tot.seconds);
        cJSON_AddNumberToObject(result, "ms_per_evaluation", tot.evals ? 1e3 * tot.seconds / tot.evals : 0.0);
        cJSON_AddNumberToObject(result, "optimisation_cpu_seconds", tot.cpu_seconds);
        cJSON_AddNumberToObject(result, "cpu_ms_per_evaluation", tot.evals ? 1e3 * tot.cpu_seconds / tot.evals : 0.0);
    }
    free(grid);
    observer_free(&ob);
    free(o.images);
    return st;
}

static FpStatus dlg_run(const AttackEnv *env, cJSON *result, FpError *err) {
    return dlg_run_common(env, result, 0, err);
}
static FpStatus idlg_run(const AttackEnv *env, cJSON *result, FpError *err) {
    return dlg_run_common(env, result, 1, err);
}

const AttackOps attack_dlg = {
    .name = "dlg",
    .summary = "Deep Leakage from Gradients: L-BFGS gradient matching of images and soft labels (SSIM)",
    .headline = "ssim_mean",
    .headline_higher_leaks = 1,
    .validate = dlg_validate,
    .run = dlg_run,
};

const AttackOps attack_idlg = {
    .name = "idlg",
    .summary = "Improved DLG: label from the last layer's gradient signs, then L-BFGS on the images (SSIM)",
    .headline = "ssim_mean",
    .headline_higher_leaks = 1,
    .validate = idlg_validate,
    .run = idlg_run,
};
