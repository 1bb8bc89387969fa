// DLG (Zhu et al., NeurIPS 2019) and iDLG (Zhao et al. 2020) against a defended
// upload or release: `fedpriv attack dlg|idlg --config FILE.json --out DIR`.
//
// Threat model: an observer of the configured federation (attacks/victims.h). Each batch
// of attack.batch_size images is the local data of one victim client of that federation
// (victim b is client (observe.client + b) mod N, observed at observe.round or at its
// first participation); by default it takes one SGD step on them (the FedSGD probe DLG
// assumes), with "local": "federation" the federation's local procedure. The federation
// runs as configured up to that round (the defense created once from its own
// DefenseSetup), and the upload comes from fl's one upload path. The "server" observer
// (default) receives the victim's upload after the defense's client side; the "public"
// observer receives the model the server releases after that round. Either turns what it
// saw into its estimate of the batch gradient at the round's global weights
// (victims_gradient) and inverts it at those weights.
// Both attacks then run attacks/inversion.h: DLG learns x′ and soft labels y′; iDLG
// first reads the labels off the last layer's gradient (idlg_labels) and learns x′ only.
// This file is the pipeline every gradient-inversion attack shares
// (attacks/inversion_attack.h); dlg and idlg are its L-BFGS entries, inverting-gradients
// (attacks/inverting_gradients.c) its signed-Adam one.
// The attacker is one configuration ("single") or every variant of the adaptive attacker
// (attacks/attacker.h), of which each image keeps the strongest. A defended upload that
// is not finite, or a batch whose every variant ends with a matching loss that is not,
// is FP_EDIVERGED: the run reports "diverged" and no similarity as a finding.
//
// Metrics: each reconstruction is clamped to [0,1] (what its PNG holds) and compared
// with the originals by SSIM, PSNR and MSE (eval/image_metrics.h). For a batch of B > 1
// the B reconstructions of a variant are matched to the B originals by the assignment
// (permutation) that maximises the summed SSIM (eval/assignment.h, the Hungarian
// algorithm); label_correct compares the matched reconstruction's label (argmax
// softmax(y′) for DLG, the rule's label for iDLG and LLG) with the original's. Whether the
// attack applies at all is decided against the federation without a defense
// (attacks/attacker.h, applicability).
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/attack.h"
#include "attacks/attacker.h"
#include "attacks/inversion.h"
#include "attacks/inversion_attack.h"
#include "attacks/victims.h"
#include "defenses/registry.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "eval/assignment.h"
#include "eval/image_metrics.h"
#include "eval/png.h"

#define DLG_MAX_BATCH 8
#define DLG_MAX_IMAGES 4096
#define INV_MAX_KEYS 32
#define GRID_SNAPSHOTS 8 // snapshot columns in the grid (evenly spaced)

typedef struct DlgOptions {
    const InversionAttack *a;
    int *images, n_images;
    int batch_size;
    int use_train;          // images come from the train split (dataset.split), else test
    VictimOptions victims;
    InversionConfig inv;    // the attack's own keys: the single attacker, the variants' defaults
    Attacker attacker;
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

static FpStatus dlg_parse(const AttackEnv *env, const InversionAttack *a, DlgOptions *o, FpError *err) {
    memset(o, 0, sizeof *o);
    o->a = a;
    const cJSON *j = env->attack_json;
    const char *path = env->path;
    const Experiment *ex = env->ex;
    char p[256];
    static const char *const shared[] = {"name", "images", "batch_size", "steps", "restarts", "snapshot_every",
                                         VICTIM_KEYS, NULL};
    const char *keys[INV_MAX_KEYS];
    int nk = 0;
    for (int k = 0; shared[k] && nk < INV_MAX_KEYS - 1; k++)
        keys[nk++] = shared[k];
    for (int k = 0; a->keys && a->keys[k] && nk < INV_MAX_KEYS - 1; k++)
        keys[nk++] = a->keys[k];
    keys[nk] = NULL;
    FP_TRY(jv_keys(j, path, keys, err));
    long long v;
    FP_TRY(jv_int(j, path, "batch_size", JV_OPTIONAL, 1, 1, a->max_batch, &v, err));
    o->batch_size = (int)v;
    FP_TRY(jv_int(j, path, "steps", JV_OPTIONAL, a->default_steps, 1, 1000000, &v, err));
    o->inv.steps = (int)v;
    FP_TRY(jv_int(j, path, "restarts", JV_OPTIONAL, 1, 1, 1000, &v, err));
    o->inv.restarts = (int)v;
    FP_TRY(jv_int(j, path, "snapshot_every", JV_OPTIONAL, 10, 0, 1000000, &v, err));
    o->inv.snapshot_every = (int)v;
    FP_TRY(a->parse(j, path, &o->inv, err));
    int choice;
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
    if (a->labels != INV_LABELS_LEARNED && (last < 0 || ex->model->table.layers[last].ndim != 2 ||
                                            ex->model->table.layers[last].shape[0] != ex->shape.n_classes))
        return fp_fail(err, FP_EPARAM, "model.name: %s needs a model whose last layer is linear (classes x hidden)",
                       a->rule_owner);
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
    // The simulated local procedure is full-batch: each step sees the victim's B images.
    if (st == FP_OK && a->simulate_local && o->victims.federation_local && ex->fed.batch_size < o->batch_size)
        st = fp_fail(err, FP_EPARAM, "federation.batch_size: %d is smaller than %s.batch_size = %d: %s simulates the "
                     "victim's local steps on its whole batch (a minibatch order is not simulated)",
                     ex->fed.batch_size, path, o->batch_size, a->name);
    int explicit = !a->adaptive_set &&
                   (cJSON_GetObjectItemCaseSensitive(j, "restarts") || cJSON_GetObjectItemCaseSensitive(j, "distance") ||
                    cJSON_GetObjectItemCaseSensitive(j, "tv"));
    if (st == FP_OK)
        st = attacker_parse(j, path, &o->inv, explicit, a->takes_adaptive, a->adaptive_set,
                            inversion_analytic_applies(ex->model), &o->attacker, err);
    if (st != FP_OK) {
        free(o->images);
        o->images = NULL;
    }
    return st;
}

FpStatus inversion_attack_validate(const AttackEnv *env, const InversionAttack *a, FpError *err) {
    DlgOptions o;
    FP_TRY(dlg_parse(env, a, &o, err));
    free(o.images);
    return FP_OK;
}

// The configured federation up to the observed round (the first when each victim's first
// participation is observed), counted as that share of a training of the federation's
// data; then every image of every start of every attacker variant: `steps` optimiser
// steps, each of at most max_eval evaluations of the gradient-matching loss for L-BFGS
// (an upper bound: a step may stop early) or one for Adam, and an evaluation through E
// simulated local steps counted E times. Under a defense, without a reference handed
// over, all of it twice (the reference run without the defense).
FpStatus inversion_attack_work(const AttackEnv *env, const InversionAttack *a, AttackWork *w, FpError *err) {
    DlgOptions o;
    FP_TRY(dlg_parse(env, a, &o, err));
    free(o.images);
    const FedConfig *fed = &env->ex->fed;
    uint64_t rounds = fed->rounds > 0 ? (uint64_t)fed->rounds : 1, run = o.victims.round >= 0 ? o.victims.round + 1 : 1;
    uint64_t data = fed->samples_per_client > 0 ? (uint64_t)fed->samples_per_client * (uint64_t)fed->clients
                                                : (uint64_t)env->ex->train->n;
    uint64_t starts_steps = 0;
    for (int v = 0; v < o.attacker.n; v++)
        starts_steps += (uint64_t)attacker_variant_steps(&o.attacker.v[v]);
    uint64_t runs = o.attacker.reference && !env->reference_given && env->ex->defense &&
                            strcmp(env->ex->defense->name, "none") != 0
                        ? 2 : 1;
    uint64_t per_step = o.inv.optimizer == INV_OPTIMIZER_LBFGS ? (uint64_t)o.inv.lbfgs.max_eval : 1, local = 1;
    if (a->simulate_local && o.victims.federation_local) {
        LocalTrainConfig lc = {.epochs = fed->local_epochs, .steps = fed->local_steps, .batch_size = fed->batch_size};
        long e = local_train_steps(&lc, o.batch_size);
        local = e > 1 ? (uint64_t)e : 1;
    }
    *w = (AttackWork){.shadow_samples = runs * data * (run < rounds ? run : rounds) / rounds,
                      .passes = runs * (uint64_t)o.n_images * starts_steps * per_step * local * 6};
    return FP_OK;
}

// -- matching and metrics -------------------------------------------------------------------
static void clamp01(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = isnan(src[i]) ? 0.0f : src[i] < 0.0f ? 0.0f : src[i] > 1.0f ? 1.0f : src[i];
}

static FpStatus write_png(const char *dir, const char *rel, const float *img, int c, int h, int w, FpError *err) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", dir, rel);
    return png_write(full, img, c, h, w, err);
}


// -- targets: what the observer saw, as inversion problems ------------------------------------
// One batch's target: the observer's gradient estimate at the observed round's weights.
typedef struct BatchTarget {
    const Model *model;            // the round's global weights (one of Targets.models)
    float *target;                 // host, n_params
    int32_t labels[INV_ATTACK_MAX_BATCH]; // the label rule's (iDLG, LLG)
    InvLocalSteps local;           // the victim's local steps to simulate (zero: none)
} BatchTarget;

typedef struct Targets {
    int n_batches;
    FedObservation *obs;
    BatchTarget *t;
    Model **models;                // one per distinct observed round (NULL elsewhere)
} Targets;

static void targets_free(Targets *tg) {
    for (int bi = 0; bi < tg->n_batches; bi++) {
        if (tg->t)
            free(tg->t[bi].target);
        if (tg->models)
            model_free(tg->models[bi]);
        if (tg->obs)
            fed_observation_free(&tg->obs[bi]);
    }
    free(tg->t);
    free(tg->models);
    free(tg->obs);
    memset(tg, 0, sizeof *tg);
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

// The victims inside the federation under `defense`, observed as configured, and their targets.
static FpStatus targets_observe(const AttackEnv *env, const DlgOptions *o, const DefenseOps *defense,
                                const cJSON *defense_json, const Dataset *d, const uint32_t *idx, Targets *tg,
                                cJSON **defense_out, FpError *err) {
    const Experiment *ex = env->ex;
    int B = o->batch_size, nb = o->n_images / B;
    size_t np = ex->model->table.n_params;
    memset(tg, 0, sizeof *tg);
    tg->n_batches = nb;
    tg->obs = calloc((size_t)nb, sizeof *tg->obs);
    tg->t = calloc((size_t)nb, sizeof *tg->t);
    tg->models = calloc((size_t)nb, sizeof *tg->models);
    if (!tg->obs || !tg->t || !tg->models)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    FP_TRY(victims_observe(env, &o->victims, defense, defense_json, d, idx, B, nb, tg->obs, defense_out, err));
    for (int bi = 0; bi < nb; bi++) {
        BatchTarget *t = &tg->t[bi];
        const FedObservation *ob = &tg->obs[bi];
        for (int k = 0; k < bi && !t->model; k++) // the model at the round's global weights: one per round
            if (tg->obs[k].round == ob->round)
                t->model = tg->t[k].model;
        if (!t->model) {
            if (!(tg->models[bi] = model_clone(ex->model, ex->backend, err)))
                return err && err->code ? err->code : FP_ENOMEM;
            model_set_params(tg->models[bi], ob->global);
            t->model = tg->models[bi];
        }
        if (!(t->target = malloc(sizeof(float) * np)))
            return fp_fail(err, FP_ENOMEM, "out of memory");
        victims_gradient(ex, ob, t->target);
        if (!all_finite(t->target, np))
            return fp_fail(err, FP_EDIVERGED, "batch %d (image %d): the %s's gradient estimate from what it saw of "
                           "client %d in round %d is not finite", bi, o->images[bi * B],
                           fed_observer_name(ob->point.observer), ob->client, ob->round + 1);
        if (o->a->labels != INV_LABELS_LEARNED) {
            const ParamLayer *l = &ex->model->table.layers[model_last_weight_layer(ex->model)];
            int bias = inversion_last_bias_layer(ex->model);
            // A batch: the counts from the last bias (exact up to the estimate of the mean
            // prediction, and right where a saturated layer defeats LLG), else LLG.
            if (o->a->labels == INV_LABELS_BATCH && B > 1 && bias >= 0)
                FP_TRY(bias_count_labels(t->model, t->target + ex->model->table.layers[bias].offset, B, ex->seed,
                                         (uint32_t)bi, t->labels, err));
            else if (o->a->labels == INV_LABELS_BATCH && B > 1)
                llg_labels(t->target + l->offset, l->shape[0], l->shape[1], B, t->labels);
            else
                idlg_labels(t->target + l->offset, l->shape[0], l->shape[1], B, t->labels);
        }
        // Geiping et al. §4: the victim's E local steps are inverted by running them on x′.
        if (o->a->simulate_local && ob->local_steps > 1) {
            if (ob->local.batch_size < ob->n_local)
                return fp_fail(err, FP_EPARAM, "federation.batch_size: client %d's local steps use minibatches of %d "
                               "of its %d samples; %s simulates full-batch steps", ob->client, ob->local.batch_size,
                               ob->n_local, o->a->name);
            t->local = (InvLocalSteps){.steps = (int)ob->local_steps, .lr = ob->local.lr,
                                       .momentum = ob->local.momentum, .weight_decay = ob->local.weight_decay};
        }
    }
    return FP_OK;
}

// -- inversions: every (batch, variant) job, in threads -----------------------------------------
typedef struct InvJob {
    const BatchTarget *bt;
    const AttackerVariant *v;
    int batch;
    InversionResult res;
    FpStatus st;
    FpError err;
} InvJob;

// The inversions are independent: worker w runs jobs w, w + T, w + 2T, ... Each has its
// own tape; the models are only read. Results do not depend on the thread count.
typedef struct InvWorker {
    const DlgOptions *o;
    const Experiment *ex;
    InvJob *jobs;
    int first, stride, n_jobs;
    InvProgress *progress;
} InvWorker;

static void *inversion_worker(void *arg) {
    InvWorker *w = arg;
    for (int k = w->first; k < w->n_jobs; k += w->stride) {
        InvJob *j = &w->jobs[k];
        InversionProblem prob = {.model = j->bt->model, .target = j->bt->target, .batch = w->o->batch_size,
                                 .labels = w->o->a->labels != INV_LABELS_LEARNED ? j->bt->labels : NULL,
                                 .seed = w->ex->seed, .stream = (uint32_t)j->batch,
                                 .first_restart = j->v->first_restart, .local = j->bt->local,
                                 .progress = w->progress};
        j->st = inversion_run(&prob, &j->v->inv, &j->res, &j->err);
        if (j->st != FP_OK)
            break;
    }
    return NULL;
}

// Job bi·V + v inverts batch bi with variant v; progress (NULL: silent) gets the steps'
// progress line, labelled `label`.
static InvJob *inversions_run(const Experiment *ex, const DlgOptions *o, const Targets *tg, FILE *progress,
                              const char *label, FpError *err) {
    int V = o->attacker.n, n = tg->n_batches * V;
    InvJob *jobs = calloc((size_t)n, sizeof *jobs);
    if (!jobs) {
        fp_fail(err, FP_ENOMEM, "out of memory");
        return NULL;
    }
    long long steps = 0;
    for (int k = 0; k < n; k++) {
        jobs[k] = (InvJob){.bt = &tg->t[k / V], .v = &o->attacker.v[k % V], .batch = k / V};
        steps += attacker_variant_steps(jobs[k].v);
    }
    InvProgress pr;
    inv_progress_init(&pr, progress, label, steps);
    int T = ex->threads < 1 ? 1 : ex->threads;
    if (T > n)
        T = n;
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
        w[k] = (InvWorker){.o = o, .ex = ex, .jobs = jobs, .first = k, .stride = T, .n_jobs = n, .progress = &pr};
    for (int k = 1; k < T; k++)
        running[k] = pthread_create(&tid[k], NULL, inversion_worker, &w[k]) == 0;
    inversion_worker(&w[0]);
    for (int k = 1; k < T; k++) {
        if (running[k])
            pthread_join(tid[k], NULL);
        else // no thread: run its share here
            inversion_worker(&w[k]);
    }
    inv_progress_free(&pr);
    return jobs;
}

static void inversions_free(InvJob *jobs, int n) {
    for (int k = 0; jobs && k < n; k++)
        inversion_result_free(&jobs[k].res);
    free(jobs);
}

// -- scoring: the strongest variant per image --------------------------------------------------
typedef struct ImageScore {
    int variant;                          // the kept variant
    int j;                                // its reconstruction matched to this image
    int pred;                             // its label for the image
    ImageMetrics m;
    double vssim[ATTACKER_MAX_VARIANTS];  // each variant's SSIM for this image (NaN: it diverged)
} ImageScore;

// Scores every image: per variant the matching of reconstructions to originals, then the
// variant with the highest SSIM. A batch whose every variant diverged is FP_EDIVERGED.
// With a label rule, labels_in_multiset (when not NULL) counts how many of the batches'
// true labels the rule names as a multiset (LLG's own measure; the assignment plays no part).
static FpStatus score_images(const DlgOptions *o, const Dataset *d, const uint32_t *idx, const InvJob *jobs,
                             int n_batches, ImageScore *sc, int *labels_in_multiset, FpError *err) {
    int B = o->batch_size, V = o->attacker.n, c = d->c, h = d->h, w = d->w;
    size_t ss = dataset_sample_size(d);
    float *rec = malloc(sizeof(float) * ss * B);
    double *ssim = malloc(sizeof(double) * B * B); // (original i, reconstruction j)
    if (!rec || !ssim) {
        free(rec);
        free(ssim);
        return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    FpStatus st = FP_OK;
    for (int bi = 0; bi < n_batches && st == FP_OK; bi++) {
        ImageScore *s = sc + (size_t)bi * B;
        int matched[ATTACKER_MAX_VARIANTS][INV_ATTACK_MAX_BATCH], finite = 0;
        for (int i = 0; i < B; i++) {
            s[i] = (ImageScore){.variant = -1};
            for (int v = 0; v < V; v++)
                s[i].vssim[v] = NAN;
        }
        for (int v = 0; v < V && st == FP_OK; v++) {
            const InversionResult *res = &jobs[bi * V + v].res;
            if (!isfinite(res->loss))
                continue;
            finite++;
            clamp01(rec, res->x, ss * B);
            for (int i = 0; i < B && st == FP_OK; i++)
                for (int j = 0; j < B && st == FP_OK; j++)
                    st = image_ssim(d->x + (size_t)idx[bi * B + i] * ss, rec + (size_t)j * ss, c, h, w,
                                    &ssim[i * B + j], err);
            if (st == FP_OK)
                st = assignment_max(ssim, B, matched[v], err);
            for (int i = 0; i < B && st == FP_OK; i++) {
                s[i].vssim[v] = ssim[i * B + matched[v][i]];
                if (s[i].variant < 0 || s[i].vssim[v] > s[i].vssim[s[i].variant]) {
                    s[i].variant = v;
                    s[i].j = matched[v][i];
                }
            }
        }
        if (st == FP_OK && !finite)
            st = fp_fail(err, FP_EDIVERGED, "batch %d (image %d): the matching loss is not finite after %d steps in "
                         "every restart of every attacker variant", bi, (int)idx[bi * B], o->attacker.v[0].inv.steps);
        for (int i = 0; i < B && st == FP_OK; i++) {
            const InversionResult *res = &jobs[bi * V + s[i].variant].res;
            clamp01(rec, res->x + (size_t)s[i].j * ss, ss);
            st = image_metrics(d->x + (size_t)idx[bi * B + i] * ss, rec, c, h, w, &s[i].m, err);
            if (o->a->labels != INV_LABELS_LEARNED)
                s[i].pred = jobs[bi * V + s[i].variant].bt->labels[s[i].j];
            else {
                const float *pr = res->label_probs + (size_t)s[i].j * res->classes;
                s[i].pred = 0;
                for (int k = 1; k < res->classes; k++)
                    if (pr[k] > pr[s[i].pred])
                        s[i].pred = k;
            }
        }
        if (st == FP_OK && labels_in_multiset && o->a->labels != INV_LABELS_LEARNED) {
            const int32_t *labels = jobs[bi * V].bt->labels;
            int used[INV_ATTACK_MAX_BATCH] = {0};
            for (int i = 0; i < B; i++)
                for (int k = 0; k < B; k++)
                    if (!used[k] && labels[k] == d->y[idx[bi * B + i]]) {
                        used[k] = 1;
                        (*labels_in_multiset)++;
                        break;
                    }
        }
    }
    free(rec);
    free(ssim);
    return st;
}

// -- the result ----------------------------------------------------------------------------------
typedef struct RunTotals {
    double seconds, cpu_seconds;
    int labels_ok;
    long evals;
    int kept[ATTACKER_MAX_VARIANTS], recovered[ATTACKER_MAX_VARIANTS];
    double vssim_sum[ATTACKER_MAX_VARIANTS];
    int vn[ATTACKER_MAX_VARIANTS];
} RunTotals;

static cJSON *number_list(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < n; k++)
        cJSON_AddItemToArray(a, isfinite(v[k]) ? cJSON_CreateNumber(v[k]) : cJSON_CreateNull());
    return a;
}

// One image's record, its PNGs and its grid row.
static FpStatus write_image(const AttackEnv *env, const DlgOptions *o, const Dataset *d, int bi, int i,
                            uint32_t index, const ImageScore *s, const InvJob *jobs, float *grid, int grid_cols,
                            cJSON *images, FpError *err) {
    int B = o->batch_size, V = o->attacker.n, c = d->c, h = d->h, w = d->w;
    size_t ss = dataset_sample_size(d);
    const InvJob *job = &jobs[bi * V + s->variant];
    const InversionResult *res = &job->res;
    const float *orig = d->x + (size_t)index * ss;
    float *r = malloc(sizeof(float) * ss), *snap = malloc(sizeof(float) * ss);
    if (!r || !snap) {
        free(r);
        free(snap);
        return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    clamp01(r, res->x + (size_t)s->j * ss, ss);
    char orig_png[64], rec_png[64];
    snprintf(orig_png, sizeof orig_png, "original_%u.png", index);
    snprintf(rec_png, sizeof rec_png, "reconstruction_%u.png", index);
    FpStatus st = write_png(env->out_dir, orig_png, orig, c, h, w, err);
    if (st == FP_OK)
        st = write_png(env->out_dir, rec_png, r, c, h, w, err);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddItemToArray(images, e);
    cJSON_AddNumberToObject(e, "index", index);
    cJSON_AddNumberToObject(e, "batch", bi);
    cJSON_AddNumberToObject(e, "label", d->y[index]);
    cJSON_AddNumberToObject(e, "recovered_label", s->pred);
    cJSON_AddBoolToObject(e, "label_correct", s->pred == d->y[index]);
    if (o->a->labels == INV_LABELS_LEARNED)
        cJSON_AddItemToObject(e, "label_probabilities",
                              cJSON_CreateFloatArray(res->label_probs + (size_t)s->j * res->classes, res->classes));
    jnum_add(e, "ssim", s->m.ssim);
    jnum_add(e, "psnr", s->m.psnr);
    jnum_add(e, "mse", s->m.mse);
    cJSON_AddBoolToObject(e, "recovered", s->m.ssim >= ATTACKER_RECOVERED_SSIM);
    cJSON_AddStringToObject(e, "variant", job->v->name);
    cJSON *vs = cJSON_AddArrayToObject(e, "variant_ssim"); // every variant's, in the order of "variants"
    for (int v = 0; v < V; v++)
        cJSON_AddItemToArray(vs, isfinite(s->vssim[v]) ? cJSON_CreateNumber(s->vssim[v]) : cJSON_CreateNull());
    jnum_add(e, "matching_loss", res->loss);
    cJSON_AddNumberToObject(e, "best_restart", res->best_restart);
    cJSON_AddItemToObject(e, "restart_losses", number_list(res->restart_losses, job->v->inv.restarts));
    cJSON_AddItemToObject(e, "loss_curve", number_list(res->loss_curve, res->n_curve));
    cJSON_AddStringToObject(e, "original_png", orig_png);
    cJSON_AddStringToObject(e, "reconstruction_png", rec_png);
    cJSON *sn = cJSON_AddArrayToObject(e, "snapshots");
    int row = bi * B + i;
    memcpy(grid + (size_t)row * grid_cols * ss, orig, sizeof(float) * ss);
    memcpy(grid + ((size_t)row * grid_cols + grid_cols - 1) * ss, r, sizeof(float) * ss);
    for (int k = 0; k < res->n_snapshots && st == FP_OK; k++) {
        clamp01(snap, res->snapshots + ((size_t)k * B + s->j) * ss, ss);
        char sp[80];
        snprintf(sp, sizeof sp, "reconstruction_%u_step%d.png", index, res->snapshot_steps[k]);
        double s_ssim = NAN;
        st = image_ssim(orig, snap, c, h, w, &s_ssim, err);
        if (st == FP_OK)
            st = write_png(env->out_dir, sp, snap, c, h, w, err);
        cJSON *so = cJSON_CreateObject();
        cJSON_AddNumberToObject(so, "step", res->snapshot_steps[k]);
        jnum_add(so, "ssim", s_ssim);
        jnum_add(so, "matching_loss", res->loss_curve[res->snapshot_steps[k]]);
        cJSON_AddStringToObject(so, "png", sp);
        cJSON_AddItemToArray(sn, so);
        // Evenly spaced snapshots fill the grid's middle columns.
        int n_mid = grid_cols - 2;
        for (int col = 0; col < n_mid; col++)
            if ((int)((long)(col + 1) * res->n_snapshots / n_mid) - 1 == k)
                memcpy(grid + ((size_t)row * grid_cols + 1 + col) * ss, snap, sizeof(float) * ss);
    }
    free(r);
    free(snap);
    return st;
}

static void describe_config(const DlgOptions *o, const Model *model, cJSON *result) {
    cJSON *cfg = cJSON_AddObjectToObject(result, "attack_config");
    cJSON_AddStringToObject(cfg, "name", o->a->name);
    cJSON_AddItemToObject(cfg, "images", cJSON_CreateIntArray(o->images, o->n_images));
    cJSON_AddStringToObject(cfg, "split", o->use_train ? "train" : "test");
    cJSON_AddNumberToObject(cfg, "batch_size", o->batch_size);
    cJSON_AddNumberToObject(cfg, "steps", o->inv.steps);
    if (!o->attacker.adaptive) {
        cJSON_AddNumberToObject(cfg, "restarts", o->inv.restarts);
        cJSON_AddStringToObject(cfg, "distance", o->inv.distance == INV_DISTANCE_L2 ? "l2" : "cosine");
        cJSON_AddNumberToObject(cfg, "tv", o->inv.tv);
    }
    attacker_describe(&o->attacker, cfg);
    cJSON_AddBoolToObject(cfg, "reference", o->attacker.reference);
    cJSON_AddNumberToObject(cfg, "snapshot_every", o->inv.snapshot_every);
    cJSON_AddStringToObject(cfg, "local", o->victims.federation_local ? "federation" : "probe");
    cJSON_AddStringToObject(cfg, "observer", fed_observer_name(o->victims.observer));
    cJSON *oc = cJSON_AddObjectToObject(cfg, "observe");
    cJSON_AddNumberToObject(oc, "client", o->victims.client);
    cJSON_AddStringToObject(oc, "client_rule", o->victims.client_defaulted
                                                   ? "default: the lowest-numbered client that takes part"
                                                   : "observe.client");
    if (o->victims.round >= 0)
        cJSON_AddNumberToObject(oc, "round", o->victims.round + 1);
    else
        cJSON_AddStringToObject(oc, "round", "first participation");
    cJSON_AddStringToObject(cfg, "label_rule", o->a->labels == INV_LABELS_LEARNED ? "learned soft labels (DLG)"
                                               : o->a->labels == INV_LABELS_IDLG || o->batch_size == 1
                                                   ? "iDLG: smallest last-layer row sums"
                                                   : inversion_last_bias_layer(model) >= 0
                                                       ? "label counts from the last bias's gradient (Geng et al. "
                                                         "2021), the mean prediction estimated on 64 uniform inputs"
                                                       : "LLG (Wainakh et al. 2022): negative row sums, then impact");
    o->a->describe(&o->inv, cfg);
}

// The inversion steps' line is labelled as the caller says (a matrix cell names itself
// and the attack), else with the attack's name.
static const char *progress_label(const AttackEnv *env, const DlgOptions *o) {
    return env->quiet && env->progress_label ? env->progress_label : o->a->name;
}

static int defense_is_none(const DefenseOps *d) { return !d || strcmp(d->name, "none") == 0; }

// The reference run: the same attack (observer, attacker, images, seed) against the
// federation without a defense; its recovery decides applicability. A reference that
// diverges leaves it undecided.
static FpStatus reference_run(const AttackEnv *env, const DlgOptions *o, const Dataset *d, const uint32_t *idx,
                              const char *source, Applicability *ap, FpError *err) {
    const Experiment *ex = env->ex;
    if (!env->quiet)
        fprintf(stderr, "%s: reference run of the %s attacker without the defense (does the attack apply?)\n",
                o->a->name, o->attacker.adaptive ? "adaptive" : "single");
    Targets tg;
    FpError rerr = {0};
    int B = o->batch_size, nb = o->n_images / B;
    FpStatus st = targets_observe(env, o, defense_find("none"), NULL, d, idx, &tg, NULL, &rerr);
    InvJob *jobs = st == FP_OK ? inversions_run(ex, o, &tg, env->quiet ? env->progress : stderr, progress_label(env, o), &rerr) : NULL;
    if (st == FP_OK && !jobs)
        st = rerr.code ? rerr.code : FP_ENOMEM;
    for (int k = 0; st == FP_OK && k < nb * o->attacker.n; k++)
        if (jobs[k].st != FP_OK) {
            st = jobs[k].st;
            rerr = jobs[k].err;
        }
    ImageScore *sc = st == FP_OK ? calloc((size_t)o->n_images, sizeof *sc) : NULL;
    if (st == FP_OK && !sc)
        st = fp_fail(&rerr, FP_ENOMEM, "out of memory");
    if (st == FP_OK)
        st = score_images(o, d, idx, jobs, nb, sc, NULL, &rerr);
    if (st == FP_OK) {
        Recovery r = {0};
        for (int i = 0; i < o->n_images; i++)
            recovery_add(&r, sc[i].m.ssim, sc[i].m.psnr, sc[i].m.mse);
        applicability_from(ap, source, &r);
        ap->by_adaptive = o->attacker.adaptive;
    } else if (st == FP_EDIVERGED) {
        memset(ap, 0, sizeof *ap);
        snprintf(ap->source, sizeof ap->source, "%s", source);
        snprintf(ap->reason, sizeof ap->reason, "the reference run diverged: %.200s", rerr.msg);
        st = FP_OK;
    } else if (err)
        *err = rerr;
    free(sc);
    inversions_free(jobs, nb * o->attacker.n);
    targets_free(&tg);
    return st;
}

FpStatus inversion_attack_run(const AttackEnv *env, const InversionAttack *a, cJSON *result, FpError *err) {
    DlgOptions o;
    FP_TRY(dlg_parse(env, a, &o, err));
    const Experiment *ex = env->ex;
    const Dataset *d = o.use_train ? ex->train : ex->test;
    size_t ss = dataset_sample_size(d);
    int B = o.batch_size, n_batches = o.n_images / B, V = o.attacker.n;
    int n_snap = 0;
    for (int v = 0; v < V; v++)
        if (o.attacker.v[v].inv.snapshot_every > 0 &&
            o.attacker.v[v].inv.steps / o.attacker.v[v].inv.snapshot_every > n_snap)
            n_snap = o.attacker.v[v].inv.steps / o.attacker.v[v].inv.snapshot_every;
    int grid_cols = 2 + (n_snap < GRID_SNAPSHOTS ? n_snap : GRID_SNAPSHOTS);
    float *grid = calloc((size_t)o.n_images * grid_cols * ss, sizeof(float));
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)o.n_images);
    ImageScore *sc = calloc((size_t)o.n_images, sizeof *sc);
    FpStatus st = grid && idx && sc ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    for (int i = 0; st == FP_OK && i < o.n_images; i++)
        idx[i] = (uint32_t)o.images[i];
    // The resolved configuration, before the work.
    describe_config(&o, ex->model, result);
    FedObserver observer = o.victims.observer;
    cJSON_AddStringToObject(result, "observer", fed_observer_name(observer));
    cJSON_AddStringToObject(result, "threat_model_detail",
                            observer == FED_OBSERVER_SERVER
                                ? "an honest-but-curious server of the configured federation: each batch is one "
                                  "victim client's local data, and the server receives that client's upload after "
                                  "the defense's client side (before any server-side noise) in the observed round, "
                                  "and inverts its gradient estimate at that round's global weights"
                                : "a public observer of the configured federation (anyone who receives the global "
                                  "models): each batch is one victim client's local data, and the observer receives "
                                  "the model the server releases after the observed round, the aggregate of every "
                                  "participant's upload with the server's noise, and inverts the global model's "
                                  "change at that round's weights");
    cJSON_AddStringToObject(result, "attacker", o.attacker.adaptive ? "adaptive" : "single");
    // What the observer sees: the victims inside the federation, through fl's upload path.
    Targets tg = {0};
    cJSON *defense = NULL;
    if (st == FP_OK)
        st = targets_observe(env, &o, ex->defense, ex->defense_json, d, idx, &tg, &defense, err);
    if (defense)
        cJSON_AddItemToObject(result, "defense", defense);
    cJSON *oj = cJSON_AddArrayToObject(result, "observations");
    int latest = -1;
    for (int bi = 0; tg.obs && bi < n_batches; bi++) {
        if (!tg.obs[bi].upload) // not observed (the run stopped before)
            break;
        cJSON *e = victims_observation_json(ex, &o.victims, &tg.obs[bi]);
        cJSON_AddNumberToObject(e, "batch", bi);
        cJSON_AddItemToArray(oj, e);
        if (latest < 0 || tg.obs[bi].round > tg.obs[latest].round)
            latest = bi;
    }
    if (latest >= 0) // the figure for this observer, after the latest observed round
        cJSON_AddItemToObject(result, "observer_privacy", victims_observer_privacy(&tg.obs[latest]));
    InvJob *jobs = NULL;
    int labels_in_multiset = 0;
    if (st == FP_OK && !(jobs = inversions_run(ex, &o, &tg, env->quiet ? env->progress : stderr, progress_label(env, &o), err)))
        st = err && err->code ? err->code : FP_ENOMEM;
    for (int k = 0; st == FP_OK && k < n_batches * V; k++)
        if (jobs[k].st != FP_OK) {
            st = jobs[k].st;
            if (err)
                *err = jobs[k].err;
        }
    if (st == FP_OK)
        st = score_images(&o, d, idx, jobs, n_batches, sc, &labels_in_multiset, err);
    // Per image: the strongest variant's reconstruction.
    cJSON *images = cJSON_AddArrayToObject(result, "images");
    RunTotals tot = {0};
    Recovery rec = {0};
    for (int i = 0; st == FP_OK && i < o.n_images; i++) {
        const ImageScore *s = &sc[i];
        st = write_image(env, &o, d, i / B, i % B, idx[i], s, jobs, grid, grid_cols, images, err);
        recovery_add(&rec, s->m.ssim, s->m.psnr, s->m.mse);
        tot.labels_ok += s->pred == d->y[idx[i]];
        tot.kept[s->variant]++;
        for (int v = 0; v < V; v++)
            if (isfinite(s->vssim[v])) {
                tot.vn[v]++;
                tot.vssim_sum[v] += s->vssim[v];
                tot.recovered[v] += s->vssim[v] >= ATTACKER_RECOVERED_SSIM;
            }
    }
    for (int k = 0; jobs && k < n_batches * V; k++) {
        tot.evals += jobs[k].res.evaluations;
        tot.seconds += jobs[k].res.seconds;
        tot.cpu_seconds += jobs[k].res.cpu_seconds;
    }
    if (st == FP_OK && !env->quiet)
        for (int i = 0; i < o.n_images; i++)
            fprintf(stderr, "%s: image %d (batch %d): SSIM %.4f (%s)\n", a->name, (int)idx[i], i / B,
                    sc[i].m.ssim, o.attacker.v[sc[i].variant].name);
    inversions_free(jobs, n_batches * V);
    targets_free(&tg);
    // Does the attack apply at all? Decided against the federation without a defense.
    Applicability ap = {0};
    if (st == FP_OK) {
        if (defense_is_none(ex->defense)) {
            applicability_from(&ap, "this run (no defense)", &rec);
            ap.by_adaptive = o.attacker.adaptive;
        }
        else if (env->reference_given)
            applicability_from_result(&ap, env->reference_source ? env->reference_source : "the reference",
                                      env->reference);
        else if (o.attacker.reference)
            st = reference_run(env, &o, d, idx, "a reference run of this attack against the federation without a "
                               "defense", &ap, err);
        else {
            snprintf(ap.source, sizeof ap.source, "none");
            snprintf(ap.reason, sizeof ap.reason, "no reference run (\"reference\": false)");
        }
    }
    // "Not applicable" only after the strongest attacker fails (attacks/attacker.h): a
    // single attacker that recovers nothing without the defense hands the decision to the
    // adaptive one, run against the federation without the defense.
    if (st == FP_OK && ap.decided && !ap.applicable && !ap.by_adaptive && a->takes_adaptive && o.attacker.reference) {
        DlgOptions strong = o;
        attacker_default_adaptive(&o.inv, a->adaptive_set, inversion_analytic_applies(ex->model), &strong.attacker);
        Applicability sa = {0};
        st = reference_run(env, &strong, d, idx, "a reference run of the adaptive attacker against the federation "
                           "without a defense (this run's single attacker recovered nothing there)", &sa, err);
        if (st == FP_OK && sa.decided)
            ap = sa;
    }
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
        recovery_json(&rec, result);
        cJSON_AddNumberToObject(result, "label_accuracy", (double)tot.labels_ok / rec.n);
        if (a->labels != INV_LABELS_LEARNED)
            cJSON_AddNumberToObject(result, "label_multiset_accuracy", (double)labels_in_multiset / rec.n);
        cJSON *vr = cJSON_AddArrayToObject(result, "variants");
        for (int v = 0; v < V; v++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", o.attacker.v[v].name);
            cJSON_AddNumberToObject(e, "images_kept", tot.kept[v]);
            cJSON_AddNumberToObject(e, "images_recovered", tot.recovered[v]);
            jnum_add(e, "ssim_mean", tot.vn[v] ? tot.vssim_sum[v] / tot.vn[v] : NAN);
            cJSON_AddNumberToObject(e, "images_diverged", rec.n - tot.vn[v]);
            cJSON_AddItemToArray(vr, e);
        }
        applicability_json(&ap, result);
        if (!env->quiet && ap.decided && !ap.applicable)
            fprintf(stderr, "%s: not applicable: the %s attacker recovers no image without any defense (%s)\n",
                    a->name, ap.by_adaptive ? "adaptive" : "single", ap.source);
        cJSON_AddNumberToObject(result, "closure_evaluations", (double)tot.evals);
        cJSON_AddNumberToObject(result, "optimisation_seconds", tot.seconds);
        cJSON_AddNumberToObject(result, "ms_per_evaluation", tot.evals ? 1e3 * tot.seconds / tot.evals : 0.0);
        cJSON_AddNumberToObject(result, "optimisation_cpu_seconds", tot.cpu_seconds);
        cJSON_AddNumberToObject(result, "cpu_ms_per_evaluation", tot.evals ? 1e3 * tot.cpu_seconds / tot.evals : 0.0);
    }
    free(grid);
    free(idx);
    free(sc);
    free(o.images);
    return st;
}

// -- DLG and iDLG: L-BFGS, L2 or cosine distance --------------------------------------------
static FpStatus dlg_parse_own(const cJSON *j, const char *path, InversionConfig *cfg, FpError *err) {
    char p[256];
    static const char *const dists[] = {"l2", "cosine", NULL};
    int choice;
    FP_TRY(jv_choice(j, path, "distance", dists, INV_DISTANCE_L2, &choice, err));
    cfg->distance = (InvDistance)choice;
    FP_TRY(jv_number(j, path, "tv", JV_OPTIONAL, 0.0, 0, 0, 1e6, 0, &cfg->tv, err));
    const cJSON *lj;
    FP_TRY(jv_object(j, path, "lbfgs", JV_OPTIONAL, &lj, err));
    cfg->optimizer = INV_OPTIMIZER_LBFGS;
    return parse_lbfgs(lj, jv_path(p, sizeof p, path, "lbfgs"), &cfg->lbfgs, err);
}

static void dlg_describe(const InversionConfig *c, cJSON *cfg) {
    cJSON *lb = cJSON_AddObjectToObject(cfg, "lbfgs");
    cJSON_AddNumberToObject(lb, "lr", c->lbfgs.lr);
    cJSON_AddNumberToObject(lb, "max_iter", c->lbfgs.max_iter);
    cJSON_AddNumberToObject(lb, "max_eval", c->lbfgs.max_eval);
    cJSON_AddNumberToObject(lb, "history_size", c->lbfgs.history_size);
    cJSON_AddNumberToObject(lb, "tolerance_grad", c->lbfgs.tolerance_grad);
    cJSON_AddNumberToObject(lb, "tolerance_change", c->lbfgs.tolerance_change);
}

static const char *const dlg_keys[] = {"distance", "tv", "lbfgs", ATTACKER_KEYS, NULL};

static const InversionAttack dlg_attack = {.name = "dlg", .rule_owner = "DLG", .labels = INV_LABELS_LEARNED,
                                           .max_batch = DLG_MAX_BATCH, .default_steps = 300, .takes_adaptive = 1,
                                           .keys = dlg_keys, .parse = dlg_parse_own, .describe = dlg_describe};
static const InversionAttack idlg_attack = {.name = "idlg", .rule_owner = "iDLG", .labels = INV_LABELS_IDLG,
                                            .max_batch = DLG_MAX_BATCH, .default_steps = 300, .takes_adaptive = 1,
                                            .keys = dlg_keys, .parse = dlg_parse_own, .describe = dlg_describe};

static FpStatus dlg_validate(const AttackEnv *env, FpError *err) {
    return inversion_attack_validate(env, &dlg_attack, err);
}
static FpStatus idlg_validate(const AttackEnv *env, FpError *err) {
    return inversion_attack_validate(env, &idlg_attack, err);
}
static FpStatus dlg_run(const AttackEnv *env, cJSON *result, FpError *err) {
    return inversion_attack_run(env, &dlg_attack, result, err);
}
static FpStatus idlg_run(const AttackEnv *env, cJSON *result, FpError *err) {
    return inversion_attack_run(env, &idlg_attack, result, err);
}
static FpStatus dlg_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    return inversion_attack_work(env, &dlg_attack, w, err);
}
static FpStatus idlg_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    return inversion_attack_work(env, &idlg_attack, w, err);
}

const AttackOps attack_dlg = {
    .name = "dlg",
    .summary = "Deep Leakage from Gradients: L-BFGS gradient matching of images and soft labels (SSIM)",
    .headline = "ssim_mean",
    .headline_higher_leaks = 1,
    .observers = 1,
    .adaptive = 1,
    .uses_reference = 1,
    .validate = dlg_validate,
    .run = dlg_run,
    .work = dlg_work,
};

const AttackOps attack_idlg = {
    .name = "idlg",
    .summary = "Improved DLG: label from the last layer's gradient signs, then L-BFGS on the images (SSIM)",
    .headline = "ssim_mean",
    .headline_higher_leaks = 1,
    .observers = 1,
    .adaptive = 1,
    .uses_reference = 1,
    .validate = idlg_validate,
    .run = idlg_run,
    .work = idlg_work,
};
