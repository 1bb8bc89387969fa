// DLG (Zhu et al., NeurIPS 2019) and iDLG (Zhao et al. 2020) against a defended
// upload: `fedpriv attack dlg|idlg --config FILE.json --out DIR`.
//
// Threat model: an honest-but-curious server of the configured federation that
// receives one client's upload, after the defense's client side, in one round. Each
// batch of attack.batch_size images is the local data of one victim client of that
// federation (attacks/victims.h: victim b is client (observe.client + b) mod N, observed
// at observe.round or at its first participation); by default it takes one SGD step on
// them (the FedSGD probe DLG assumes), with "local": "federation" the federation's local
// procedure. The federation runs as configured up to that round (the defense created
// once from its own DefenseSetup), and the upload comes from fl's one upload path. The
// server turns the upload into its estimate of the batch gradient at the round's global
// weights, g = (w_global − w)/(lr·steps) − wd·w_global with w the upload as weights
// (upload_gradient_estimate: −delta/(lr·steps) for a delta, upload/steps for a gradient),
// and inverts it at those weights.
// Both attacks then run attacks/inversion.h: DLG learns x′ and soft labels y′; iDLG
// first reads the labels off the last layer's gradient (idlg_labels) and learns x′ only.
// A defended upload that is not finite, or a final matching loss that is not, is
// FP_EDIVERGED: the run reports "diverged" and no similarity as a finding.
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
#include "attacks/victims.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "eval/image_metrics.h"
#include "eval/png.h"

#define DLG_MAX_BATCH 8
#define DLG_MAX_IMAGES 4096
#define GRID_SNAPSHOTS 8 // snapshot columns in the grid (evenly spaced)

typedef struct DlgOptions {
    int idlg;
    int *images, n_images;
    int batch_size;
    int use_train;          // images come from the train split (dataset.split), else test
    VictimOptions victims;
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
                                       "snapshot_every", "lbfgs", VICTIM_KEYS, NULL};
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
    if (st == FP_OK)
        st = victims_parse(env, n / o->batch_size, &o->victims, err);
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

// The configured federation up to the observed round (the first when each victim's first
// participation is observed), counted as that share of a training of the federation's
// data; then every image of every restart: `steps` L-BFGS steps of at most max_eval
// evaluations of the gradient-matching loss each (an upper bound: a step may stop early).
static FpStatus dlg_work_common(const AttackEnv *env, int idlg, AttackWork *w, FpError *err) {
    DlgOptions o;
    FP_TRY(dlg_parse(env, idlg, &o, err));
    free(o.images);
    const FedConfig *fed = &env->ex->fed;
    uint64_t rounds = fed->rounds > 0 ? (uint64_t)fed->rounds : 1, run = o.victims.round >= 0 ? o.victims.round + 1 : 1;
    uint64_t data = fed->samples_per_client > 0 ? (uint64_t)fed->samples_per_client * (uint64_t)fed->clients
                                                : (uint64_t)env->ex->train->n;
    *w = (AttackWork){.shadow_samples = data * (run < rounds ? run : rounds) / rounds,
                      .passes = (uint64_t)o.n_images * (uint64_t)o.inv.restarts * (uint64_t)o.inv.steps *
                                (uint64_t)o.inv.lbfgs.max_eval * 6};
    return FP_OK;
}
static FpStatus dlg_work(const AttackEnv *env, AttackWork *w, FpError *err) { return dlg_work_common(env, 0, w, err); }
static FpStatus idlg_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    return dlg_work_common(env, 1, w, err);
}

static FpStatus dlg_validate(const AttackEnv *env, FpError *err) { return dlg_validate_common(env, 0, err); }
static FpStatus idlg_validate(const AttackEnv *env, FpError *err) { return dlg_validate_common(env, 1, err); }

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
    const Model *model;            // the round's global weights (borrowed)
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
        jnum_add(e, "ssim", im.ssim);
        jnum_add(e, "psnr", im.psnr);
        jnum_add(e, "mse", im.mse);
        jnum_add(e, "matching_loss", res.loss);
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
            jnum_add(so, "ssim", s_ssim);
            jnum_add(so, "matching_loss", res.loss_curve[res.snapshot_steps[k]]);
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
        InversionProblem prob = {.model = j->model, .target = j->target, .batch = w->o->batch_size,
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
    InvWorker w[FED_MAX_THREADS];
    pthread_t tid[FED_MAX_THREADS];
    int running[FED_MAX_THREADS] = {0};
    if (T > FED_MAX_THREADS)
        T = FED_MAX_THREADS; // experiment_load refuses more
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

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

static FpStatus dlg_run_common(const AttackEnv *env, cJSON *result, int idlg, FpError *err) {
    DlgOptions o;
    FP_TRY(dlg_parse(env, idlg, &o, err));
    const Experiment *ex = env->ex;
    const Dataset *d = o.use_train ? ex->train : ex->test;
    size_t ss = dataset_sample_size(d), np = ex->model->table.n_params;
    int B = o.batch_size, n_batches = o.n_images / B;
    int n_snap = o.inv.snapshot_every > 0 ? o.inv.steps / o.inv.snapshot_every : 0;
    int grid_cols = 2 + (n_snap < GRID_SNAPSHOTS ? n_snap : GRID_SNAPSHOTS);
    float *grid = calloc((size_t)o.n_images * grid_cols * ss, sizeof(float));
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)o.n_images);
    FedObservation *obs = calloc((size_t)n_batches, sizeof *obs);
    BatchJob *jobs = calloc((size_t)n_batches, sizeof(BatchJob));
    Model **round_models = calloc((size_t)n_batches, sizeof(Model *)); // one per distinct observed round
    FpStatus st = grid && idx && obs && jobs && round_models ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    for (int i = 0; st == FP_OK && i < o.n_images; i++)
        idx[i] = (uint32_t)o.images[i];
    // The resolved configuration, before the work.
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
    cJSON_AddStringToObject(cfg, "local", o.victims.federation_local ? "federation" : "probe");
    cJSON *oc = cJSON_AddObjectToObject(cfg, "observe");
    cJSON_AddNumberToObject(oc, "client", o.victims.client);
    if (o.victims.round >= 0)
        cJSON_AddNumberToObject(oc, "round", o.victims.round + 1);
    else
        cJSON_AddStringToObject(oc, "round", "first participation");
    cJSON *lb = cJSON_AddObjectToObject(cfg, "lbfgs");
    cJSON_AddNumberToObject(lb, "lr", o.inv.lbfgs.lr);
    cJSON_AddNumberToObject(lb, "max_iter", o.inv.lbfgs.max_iter);
    cJSON_AddNumberToObject(lb, "max_eval", o.inv.lbfgs.max_eval);
    cJSON_AddNumberToObject(lb, "history_size", o.inv.lbfgs.history_size);
    cJSON_AddNumberToObject(lb, "tolerance_grad", o.inv.lbfgs.tolerance_grad);
    cJSON_AddNumberToObject(lb, "tolerance_change", o.inv.lbfgs.tolerance_change);
    cJSON_AddStringToObject(result, "observer", fed_observer_name(FED_OBSERVER_SERVER));
    cJSON_AddStringToObject(result, "threat_model_detail",
                            "an honest-but-curious server of the configured federation: each batch is one victim "
                            "client's local data, and the server receives that client's upload after the defense's "
                            "client side in the observed round, and inverts its gradient estimate at that round's "
                            "global weights");
    // What the server sees: the victims inside the federation, through fl's upload path.
    cJSON *defense = NULL;
    if (st == FP_OK)
        st = victims_observe(env, &o.victims, ex->defense, ex->defense_json, d, idx, B, n_batches, obs, &defense,
                             err);
    if (defense)
        cJSON_AddItemToObject(result, "defense", defense);
    cJSON *oj = cJSON_AddArrayToObject(result, "observations");
    for (int bi = 0; st == FP_OK && bi < n_batches; bi++) {
        cJSON *e = victims_observation_json(ex, &o.victims, &obs[bi]);
        cJSON_AddNumberToObject(e, "batch", bi);
        cJSON_AddItemToArray(oj, e);
        // The model at the round's global weights: one per distinct round.
        for (int k = 0; k <= bi && !jobs[bi].model; k++)
            if (k == bi || obs[k].round == obs[bi].round)
                jobs[bi].model = round_models[k];
        if (!jobs[bi].model) {
            if (!(round_models[bi] = model_clone(ex->model, ex->backend, err))) {
                st = err && err->code ? err->code : FP_ENOMEM;
                break;
            }
            model_set_params(round_models[bi], obs[bi].global);
            jobs[bi].model = round_models[bi];
        }
        jobs[bi].target = malloc(sizeof(float) * np);
        if (!jobs[bi].target) {
            st = fp_fail(err, FP_ENOMEM, "out of memory");
            break;
        }
        victims_gradient(ex, &obs[bi], jobs[bi].target);
        if (!all_finite(jobs[bi].target, np))
            st = fp_fail(err, FP_EDIVERGED, "batch %d (image %d): the server's gradient estimate from client %d's "
                         "defended upload in round %d is not finite", bi, o.images[bi * B], obs[bi].client,
                         obs[bi].round + 1);
        if (st == FP_OK && o.idlg) {
            const ParamLayer *l = &ex->model->table.layers[model_last_weight_layer(ex->model)];
            idlg_labels(jobs[bi].target + l->offset, l->shape[0], l->shape[1], B, jobs[bi].labels);
        }
    }
    if (st == FP_OK)
        st = run_inversions(ex, &o, jobs, n_batches, err);
    // A matching loss that is not finite leaves no reconstruction to score.
    for (int bi = 0; st == FP_OK && bi < n_batches; bi++)
        if (!isfinite(jobs[bi].res.loss))
            st = fp_fail(err, FP_EDIVERGED, "batch %d (image %d): the matching loss is not finite after %d steps "
                         "(every restart diverged)", bi, o.images[bi * B], o.inv.steps);
    cJSON *images = cJSON_AddArrayToObject(result, "images");
    RunTotals tot = {0};
    for (int bi = 0; bi < n_batches && st == FP_OK; bi++)
        st = score_batch(env, &o, d, bi, &jobs[bi], grid, grid_cols, images, &tot, err);
    for (int bi = 0; jobs && bi < n_batches; bi++) {
        free(jobs[bi].target);
        inversion_result_free(&jobs[bi].res);
        model_free(round_models[bi]);
        fed_observation_free(&obs[bi]);
    }
    free(jobs);
    free(round_models);
    free(obs);
    free(idx);
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
        jnum_add(result, "ssim_mean", tot.ssim_sum / tot.n);
        jnum_add(result, "psnr_mean", tot.psnr_sum / tot.n);
        jnum_add(result, "mse_mean", tot.mse_sum / tot.n);
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
    .work = dlg_work,
};

const AttackOps attack_idlg = {
    .name = "idlg",
    .summary = "Improved DLG: label from the last layer's gradient signs, then L-BFGS on the images (SSIM)",
    .headline = "ssim_mean",
    .headline_higher_leaks = 1,
    .validate = idlg_validate,
    .run = idlg_run,
    .work = idlg_work,
};
