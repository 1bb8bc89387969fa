// Membership-inference building blocks shared by the attacks (declared in
// attacks/mia.h): per-sample features from logits, batched logits of a model (and of its
// augmented query views), and the attack models (a zoo `mlp` trained on feature rows by the core's local_train).
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/mia.h"
#include "core/jsonv.h"

// ---------------------------------------------------------------------------------
// Per-sample features from logits (double precision)

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

// log Σ_{c ≠ skip} exp(z_c) (skip < 0: all classes).
static double logsumexp_except(const float *z, int n, int skip) {
    double mx = -INFINITY;
    for (int c = 0; c < n; c++)
        if (c != skip && z[c] > mx)
            mx = z[c];
    if (!isfinite(mx))
        return mx;
    double s = 0;
    for (int c = 0; c < n; c++)
        if (c != skip)
            s += exp((double)z[c] - mx);
    return mx + log(s);
}

double mia_phi(const float *z, int n_classes, int y) { return (double)z[y] - logsumexp_except(z, n_classes, y); }

double mia_loss_of_phi(double phi) { return softplus(-phi); }

// Mentr(p, y) = −(1 − p_y) log p_y − Σ_{i≠y} p_i log(1 − p_i) (Song & Mittal 2021, as
// CS-MIA uses it). log(1 − p_i) = logsumexp_{c≠i} z − logsumexp z exactly, so no clamp
// at 1e-30 is needed.
double mia_mentr(const float *z, int n_classes, int y) {
    double lse = logsumexp_except(z, n_classes, -1);
    double phi = mia_phi(z, n_classes, y);
    double m = exp(-softplus(phi)) * softplus(-phi); // (1 − p_y) · (−log p_y)
    for (int i = 0; i < n_classes; i++) {
        if (i == y)
            continue;
        double pi = exp((double)z[i] - lse);
        m -= pi * (logsumexp_except(z, n_classes, i) - lse);
    }
    return m;
}

// The classes of the k largest logits, largest first (k is small: insertion is enough);
// -1 where there are fewer than k classes.
static void top_classes(const float *z, int n_classes, int k, int *cls) {
    for (int j = 0; j < k; j++)
        cls[j] = -1;
    for (int c = 0; c < n_classes; c++)
        for (int j = 0; j < k; j++)
            if (cls[j] < 0 || z[c] > z[cls[j]]) {
                for (int q = k - 1; q > j; q--)
                    cls[q] = cls[q - 1];
                cls[j] = c;
                break;
            }
}

void mia_top_probs(const float *z, int n_classes, int k, float *out) {
    double lse = logsumexp_except(z, n_classes, -1);
    int cls[64];
    top_classes(z, n_classes, k, cls);
    for (int j = 0; j < k; j++)
        out[j] = cls[j] < 0 ? 0.0f : (float)exp((double)z[cls[j]] - lse);
}

// log(p / (1 − p)) of the top-k posteriors, from the logits (no saturation at p = 1);
// a missing class (k > classes) counts as p = 0, clamped to −100.
void mia_top_logodds(const float *z, int n_classes, int k, float *out) {
    int cls[64];
    top_classes(z, n_classes, k, cls);
    for (int j = 0; j < k; j++) {
        double v = cls[j] < 0 ? -100.0 : mia_phi(z, n_classes, cls[j]);
        out[j] = (float)(v < -100.0 ? -100.0 : v);
    }
}

// ---------------------------------------------------------------------------------
// Logits of a model on a set of samples (inference only), threads over sample ranges.

#define MIA_EVAL_BATCH 256

typedef struct {
    Model *m;
    const Dataset *d;
    const uint32_t *idx;
    int begin, end, n_out;
    float *logits;
    FpStatus st;
} LogitJob;

static void *logit_worker(void *arg) {
    LogitJob *j = arg;
    Model *m = j->m;
    Tape *t = tape_create(m->be);
    float *scratch = malloc(sizeof(float) * MIA_EVAL_BATCH * dataset_sample_size(j->d));
    Var **p = malloc(sizeof(Var *) * (size_t)m->table.n_layers);
    if (!t || !scratch || !p) {
        j->st = FP_ENOMEM;
        goto out;
    }
    for (int b0 = j->begin; b0 < j->end; b0 += MIA_EVAL_BATCH) {
        int bs = j->end - b0 < MIA_EVAL_BATCH ? j->end - b0 : MIA_EVAL_BATCH;
        tape_reset(t);
        Var *out = NULL;
        if (model_param_vars(m, t, 0, p) == FP_OK) {
            Var *x = dataset_batch(t, j->d, j->idx + b0, bs, scratch);
            out = x ? model_forward(m, t, p, x, 0) : NULL;
        }
        if (!out || out->t.ndim != 2 || out->t.shape[1] != j->n_out) {
            j->st = tape_status(t) == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED;
            goto out;
        }
        ad_to_host(t, out, j->logits + (size_t)b0 * j->n_out);
    }
out:
    tape_free(t);
    free(scratch);
    free(p);
    return NULL;
}

FpStatus mia_logits(Model *m, const Dataset *d, const uint32_t *idx, int n, int threads, float *logits, FpError *err) {
    if (n <= 0)
        return FP_OK;
    if (m->be->device != DEVICE_CPU || threads < 1)
        threads = 1;
    if (threads > FED_MAX_THREADS)
        threads = FED_MAX_THREADS; // experiment_load refuses more
    if (threads > (n + MIA_EVAL_BATCH - 1) / MIA_EVAL_BATCH)
        threads = (n + MIA_EVAL_BATCH - 1) / MIA_EVAL_BATCH;
    LogitJob jobs[FED_MAX_THREADS];
    pthread_t tid[FED_MAX_THREADS];
    int started[FED_MAX_THREADS] = {0};
    // Whole batches per thread, at fixed boundaries: a sample's batch-mates, hence its
    // logits bit for bit, do not depend on the thread count.
    int batches = (n + MIA_EVAL_BATCH - 1) / MIA_EVAL_BATCH, per = (batches + threads - 1) / threads;
    for (int k = 0; k < threads; k++) {
        long long b = (long long)k * per * MIA_EVAL_BATCH, e = (long long)(k + 1) * per * MIA_EVAL_BATCH;
        if (e > n)
            e = n;
        if (b > e)
            b = e;
        jobs[k] = (LogitJob){.m = m, .d = d, .idx = idx, .begin = (int)b, .end = (int)e, .n_out = d->n_classes,
                             .logits = logits};
    }
    for (int k = 1; k < threads; k++)
        started[k] = pthread_create(&tid[k], NULL, logit_worker, &jobs[k]) == 0;
    logit_worker(&jobs[0]);
    for (int k = 1; k < threads; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            logit_worker(&jobs[k]);
    }
    for (int k = 0; k < threads; k++)
        if (jobs[k].st != FP_OK)
            return fp_fail(err, jobs[k].st, "membership inference: computing the model's outputs failed (%s)",
                           fp_status_name(jobs[k].st));
    return FP_OK;
}

// ---------------------------------------------------------------------------------
// Augmented query views (LiRA's augmented queries)

// The nine shifts (dy, dx) in units of s, the unshifted first: view 0 is the sample.
static const int view_shift[9][2] = {{0, 0}, {-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 1}, {1, -1}, {1, 0}, {1, 1}};

int mia_query_views(const Dataset *d, int *shift) {
    *shift = 0;
    if (d->h < MIA_VIEW_MIN_SIDE || d->w < MIA_VIEW_MIN_SIDE)
        return 1;
    *shift = (d->w + 4) / 8; // 4 px on 28- and 32-px images (the reference code's 4 on CIFAR-10)
    return MIA_VIEWS;
}

// Index i reflected into [0, n) without repeating the edge (TensorFlow's REFLECT padding).
static int reflect(int i, int n) { return i < 0 ? -i : i >= n ? 2 * n - 2 - i : i; }

// View v of the (c, h, w) image src into dst: mirrored left-right when v >= 9, then moved
// by view_shift[v % 9]·s with reflection padding (dst[y][x] = F[y + dy][x + dx], F the
// possibly mirrored image).
static void make_view(const float *src, float *dst, int c, int h, int w, int v, int s) {
    int flip = v >= 9, dy = view_shift[v % 9][0] * s, dx = view_shift[v % 9][1] * s;
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++) {
            const float *row = src + ((size_t)ch * h + reflect(y + dy, h)) * w;
            float *out = dst + ((size_t)ch * h + y) * w;
            for (int x = 0; x < w; x++) {
                int xs = reflect(x + dx, w);
                out[x] = row[flip ? w - 1 - xs : xs];
            }
        }
}

// Candidates per chunk: a chunk's views are one temporary data set (views × chunk samples).
#define MIA_VIEW_CHUNK 256

FpStatus mia_logits_views(Model *m, const Dataset *d, const uint32_t *idx, int n, int views, int shift, int threads,
                          float *logits, FpError *err) {
    if (views <= 1)
        return mia_logits(m, d, idx, n, threads, logits, err);
    int C = d->n_classes, B = n < MIA_VIEW_CHUNK ? n : MIA_VIEW_CHUNK;
    size_t ss = dataset_sample_size(d);
    uint32_t *rep = malloc(sizeof(uint32_t) * (size_t)B * views), *iota = malloc(sizeof(uint32_t) * (size_t)B * views);
    if (!rep || !iota) {
        free(rep);
        free(iota);
        return fp_fail(err, FP_ENOMEM, "out of memory for the query views");
    }
    for (int i = 0; i < B * views; i++)
        iota[i] = (uint32_t)i;
    FpStatus st = FP_OK;
    for (int b0 = 0; st == FP_OK && b0 < n; b0 += B) {
        int nb = n - b0 < B ? n - b0 : B;
        for (int i = 0; i < nb; i++)
            for (int v = 0; v < views; v++)
                rep[i * views + v] = idx[b0 + i];
        Dataset *sub = dataset_subset(d, rep, nb * views, err);
        if (!sub) {
            st = err ? err->code : FP_ENOMEM;
            break;
        }
        for (int i = 0; i < nb; i++)
            for (int v = 1; v < views; v++)
                make_view(d->x + (size_t)idx[b0 + i] * ss, sub->x + ((size_t)i * views + v) * ss, d->c, d->h, d->w, v,
                          shift);
        st = mia_logits(m, sub, iota, nb * views, threads, logits + (size_t)b0 * views * C, err);
        dataset_free(sub);
    }
    free(rep);
    free(iota);
    return st;
}

// ---------------------------------------------------------------------------------
// Attack models: a zoo `mlp` trained by local_train on feature rows

FpStatus mia_mlp_parse(const cJSON *attack_json, const char *path, MiaMlpConfig *c, FpError *err) {
    const cJSON *o;
    char p[256];
    jv_path(p, sizeof p, path, "attack_model");
    FP_TRY(jv_object(attack_json, path, "attack_model", JV_OPTIONAL, &o, err));
    if (!o)
        return FP_OK;
    static const char *const keys[] = {"hidden", "epochs", "batch_size", "lr", "momentum", "weight_decay",
                                       "standardize", NULL};
    FP_TRY(jv_keys(o, p, keys, err));
    long long v;
    FP_TRY(jv_int(o, p, "hidden", JV_OPTIONAL, c->hidden, 1, 1 << 16, &v, err));
    c->hidden = (int)v;
    FP_TRY(jv_int(o, p, "epochs", JV_OPTIONAL, c->epochs, 1, 100000, &v, err));
    c->epochs = (int)v;
    FP_TRY(jv_int(o, p, "batch_size", JV_OPTIONAL, c->batch_size, 1, 1 << 20, &v, err));
    c->batch_size = (int)v;
    FP_TRY(jv_number(o, p, "lr", JV_OPTIONAL, c->lr, 0, 1, 100, 0, &c->lr, err));
    FP_TRY(jv_number(o, p, "momentum", JV_OPTIONAL, c->momentum, 0, 0, 1, 1, &c->momentum, err));
    FP_TRY(jv_number(o, p, "weight_decay", JV_OPTIONAL, c->weight_decay, 0, 0, 1e3, 0, &c->weight_decay, err));
    FP_TRY(jv_bool(o, p, "standardize", c->standardize, &c->standardize, err));
    return FP_OK;
}

cJSON *mia_mlp_json(const MiaMlpConfig *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", "mlp");
    cJSON_AddNumberToObject(j, "hidden", c->hidden);
    cJSON_AddStringToObject(j, "activation", "relu");
    cJSON_AddStringToObject(j, "output", "2-way softmax (member log-odds = z1 - z0)");
    cJSON_AddStringToObject(j, "optimizer", "SGD (the training core's local_train)");
    cJSON_AddNumberToObject(j, "epochs", c->epochs);
    cJSON_AddNumberToObject(j, "batch_size", c->batch_size);
    cJSON_AddNumberToObject(j, "lr", c->lr);
    cJSON_AddNumberToObject(j, "momentum", c->momentum);
    cJSON_AddNumberToObject(j, "weight_decay", c->weight_decay);
    cJSON_AddBoolToObject(j, "standardize", c->standardize);
    return j;
}

FpStatus mia_mlp_scores(int dim, const float *x_train, const int32_t *y_train, int n_train, const float *x_test,
                        int n_test, const MiaMlpConfig *c, uint64_t seed, uint32_t attack_id, double *scores,
                        FpError *err) {
    if (n_train < 1 || n_test < 1)
        return fp_fail(err, FP_EPARAM, "attack model: empty training or test set");
    const Backend *be = backend_by_name("cpu", err);
    if (!be)
        return err ? err->code : FP_EBACKEND;
    Dataset *tr = dataset_create("mia-attack-train", n_train, 1, 1, dim, 2, 0, err);
    Dataset *te = dataset_create("mia-attack-test", n_test, 1, 1, dim, 2, 0, err);
    cJSON *mj = cJSON_CreateObject();
    cJSON_AddStringToObject(mj, "name", "mlp");
    cJSON_AddItemToObject(mj, "hidden", cJSON_CreateIntArray(&c->hidden, 1));
    DataShape shape = {.c = 1, .h = 1, .w = dim, .n_classes = 2};
    Model *m = tr && te ? model_create(mj, "attack_model", &shape, be, err) : NULL;
    cJSON_Delete(mj);
    Tape *t = tape_create(be);
    float *mom = be->alloc(sizeof(float) * (m ? m->table.n_params : 1));
    int nmax = n_train > n_test ? n_train : n_test;
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)nmax);
    float *z = malloc(sizeof(float) * 2 * (size_t)n_test);
    double *mean = calloc((size_t)dim, sizeof(double)), *sd = calloc((size_t)dim, sizeof(double));
    FpStatus st = FP_OK;
    if (!tr || !te || !m)
        st = err ? err->code : FP_ENOMEM;
    else if (!t || !mom || !idx || !z || !mean || !sd)
        st = fp_fail(err, FP_ENOMEM, "out of memory for the attack model");
    if (st == FP_OK) {
        // Optional standardisation with the training rows' statistics only.
        for (int k = 0; k < dim; k++)
            sd[k] = 1.0;
        if (c->standardize) {
            for (int i = 0; i < n_train; i++)
                for (int k = 0; k < dim; k++)
                    mean[k] += x_train[(size_t)i * dim + k] / (double)n_train;
            for (int k = 0; k < dim; k++) {
                double v = 0;
                for (int i = 0; i < n_train; i++) {
                    double d = x_train[(size_t)i * dim + k] - mean[k];
                    v += d * d / n_train;
                }
                sd[k] = v > 1e-24 ? sqrt(v) : 1.0;
            }
        }
        for (int i = 0; i < n_train; i++) {
            for (int k = 0; k < dim; k++)
                tr->x[(size_t)i * dim + k] = (float)((x_train[(size_t)i * dim + k] - mean[k]) / sd[k]);
            tr->y[i] = y_train[i];
        }
        for (int i = 0; i < n_test; i++)
            for (int k = 0; k < dim; k++)
                te->x[(size_t)i * dim + k] = (float)((x_test[(size_t)i * dim + k] - mean[k]) / sd[k]);
        st = model_init(m, mia_derived_seed(seed, RNG_ATTACK, 3, attack_id), err);
        for (int i = 0; i < nmax; i++)
            idx[i] = (uint32_t)i;
        LocalTrainConfig lc = {.epochs = c->epochs, .batch_size = c->batch_size, .lr = c->lr,
                               .momentum = c->momentum, .weight_decay = c->weight_decay};
        RngStream shuffle = rng_stream(seed, RNG_ATTACK, 2, attack_id);
        if (st == FP_OK)
            st = local_train(m, t, tr, idx, n_train, &lc, &shuffle, mom, err);
    }
    if (st == FP_OK)
        st = mia_logits(m, te, idx, n_test, 1, z, err);
    for (int i = 0; st == FP_OK && i < n_test; i++) {
        scores[i] = (double)z[2 * i + 1] - z[2 * i];
        if (!isfinite(scores[i]))
            st = fp_fail(err, FP_EDIVERGED, "the attack model diverged (lower attack_model.lr)");
    }
    free(mean);
    free(sd);
    free(idx);
    free(z);
    if (mom)
        be->free(mom);
    tape_free(t);
    model_free(m);
    dataset_free(tr);
    dataset_free(te);
    return st;
}

