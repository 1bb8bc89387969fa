// The private step of DP-SGD (see dpsgd_step.h): per-example gradients from one backward
// pass, per-record clipping, Gaussian noise on the clipped sum.
#include "defenses/dpsgd_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/per_example.h"
#include "fl/fed.h"

// The rounding allowance on a computed norm (banner of dpsgd_step.h).
#define DPSGD_NORM_MARGIN (1.0 + 1.0 / 1048576.0)

struct DpSgdStep {
    Tape *tape;
    int max_batch, n_layers;
    Var **p;          // parameter leaves, n_layers
    float **dst;      // per layer: where its part of the result goes
    float *scratch;   // host: a batch's images (non-CPU backends) and labels or targets
    size_t scratch_n;
    double *norms2;   // max_batch
    float *weights;   // max_batch clip factors
    float *noise;     // host, n_params (non-CPU backends)
    float *noise_dev; // device, n_params (non-CPU backends)
};

static int has_batch_norm(const ParamTable *t) {
    for (int i = 0; i < t->n_layers; i++)
        if (t->layers[i].kind == PARAM_BN_SCALE || t->layers[i].kind == PARAM_BN_SHIFT ||
            t->layers[i].kind == PARAM_BN_STAT)
            return 1;
    return 0;
}

FpStatus dpsgd_step_create(const Model *m, int max_batch, DpSgdStep **out, FpError *err) {
    *out = NULL;
    if (has_batch_norm(&m->table))
        return fp_fail(err, FP_EUNSUPPORTED,
                       "model %s has batch norm: per-example gradients are ill-defined when a batch's statistics "
                       "mix its examples, so DP-SGD cannot run on it (use a model without batch norm)",
                       m->cfg.name);
    if (max_batch < 1)
        return fp_fail(err, FP_EPARAM, "DP-SGD: the largest batch must be >= 1, got %d", max_batch);
    DpSgdStep *s = fp_calloc(1, sizeof *s, err);
    if (!s)
        return FP_ENOMEM;
    s->max_batch = max_batch;
    s->n_layers = m->table.n_layers;
    s->tape = tape_create(m->be);
    s->p = calloc((size_t)s->n_layers, sizeof(Var *));
    s->dst = calloc((size_t)s->n_layers, sizeof(float *));
    s->norms2 = malloc(sizeof(double) * (size_t)max_batch);
    s->weights = malloc(sizeof(float) * (size_t)max_batch);
    if (m->be->device != DEVICE_CPU) {
        s->noise = malloc(sizeof(float) * m->table.n_params);
        s->noise_dev = m->be->alloc(sizeof(float) * m->table.n_params);
    }
    if (!s->tape || !s->p || !s->dst || !s->norms2 || !s->weights ||
        (m->be->device != DEVICE_CPU && (!s->noise || !s->noise_dev))) {
        if (s->noise_dev)
            m->be->free(s->noise_dev);
        s->noise_dev = NULL;
        dpsgd_step_free(s);
        return fp_fail(err, FP_ENOMEM, "out of memory for DP-SGD scratch");
    }
    *out = s;
    return FP_OK;
}

void dpsgd_step_free(DpSgdStep *s) {
    if (!s)
        return;
    if (s->noise_dev)
        tape_backend(s->tape)->free(s->noise_dev);
    tape_free(s->tape);
    free(s->p);
    free(s->dst);
    free(s->scratch);
    free(s->norms2);
    free(s->weights);
    free(s->noise);
    free(s);
}

// Records the forward pass of records idx[0..n) and runs the per-example backward pass.
static FpStatus forward_backward(DpSgdStep *s, Model *m, const Dataset *d, const uint32_t *idx, int n,
                                 PerExample **pe, FpError *err) {
    size_t ss = dataset_sample_size(d), per = ss > (size_t)d->target_dim ? ss : (size_t)d->target_dim;
    size_t need = (size_t)n * per + (size_t)n;
    if (need > s->scratch_n) {
        float *ns = realloc(s->scratch, sizeof(float) * need);
        if (!ns)
            return fp_fail(err, FP_ENOMEM, "out of memory for a DP-SGD batch");
        s->scratch = ns;
        s->scratch_n = need;
    }
    if (dataset_sample_size(d) != (size_t)m->in.c * m->in.h * m->in.w)
        return fp_fail(err, FP_EPARAM, "DP-SGD: the data's samples do not match the model's input");
    tape_reset(s->tape);
    FP_TRY(model_param_vars(m, s->tape, 1, s->p));
    Var *x = dataset_batch(s->tape, d, idx, n, s->scratch);
    Var *out = x ? model_forward(m, s->tape, s->p, x, 1) : NULL;
    Var *loss = batch_loss(s->tape, out, d, idx, n, s->scratch); // the mean over the batch
    Var *loss_sum = loss ? ad_scale(s->tape, loss, (float)n) : NULL;
    return per_example_create(s->tape, loss_sum, s->p, s->n_layers, n, pe, err);
}

FpStatus dpsgd_step(DpSgdStep *s, Model *m, const Dataset *d, const uint32_t *idx, int n, const DpSgdStepConfig *cfg,
                    const RngStream *noise, uint64_t step, float *grad, DpSgdStats *stats, FpError *err) {
    const Backend *be = m->be;
    const ParamTable *tb = &m->table;
    if (!(cfg->clip > 0.0) || !isfinite(cfg->clip))
        return fp_fail(err, FP_EPARAM, "DP-SGD: clip must be > 0 and finite, got %g", cfg->clip);
    if (!(cfg->noise_multiplier >= 0.0) || !isfinite(cfg->noise_multiplier))
        return fp_fail(err, FP_EPARAM, "DP-SGD: noise multiplier must be >= 0 and finite, got %g",
                       cfg->noise_multiplier);
    if (!(cfg->denominator > 0.0) || !isfinite(cfg->denominator))
        return fp_fail(err, FP_EPARAM, "DP-SGD: denominator must be > 0, got %g", cfg->denominator);
    if (n < 0 || n > s->max_batch)
        return fp_fail(err, FP_EPARAM, "DP-SGD: batch of %d records, expected 0..%d", n, s->max_batch);
    uint64_t np = (uint64_t)tb->n_params;
    if (np && step > ((UINT64_C(1) << 48) - 1) / np - 1)
        return fp_fail(err, FP_EPARAM, "DP-SGD: step %llu is beyond the noise stream's indices",
                       (unsigned long long)step);
    DpSgdStats st0 = {.batch = n};
    be->fill(grad, tb->n_params, 0.0f);
    if (n > 0) {
        PerExample *pe = NULL;
        FP_TRY(forward_backward(s, m, d, idx, n, &pe, err));
        FpStatus st = per_example_sq_norms(pe, s->norms2, err);
        for (int i = 0; i < n && st == FP_OK; i++) {
            double norm = sqrt(s->norms2[i]) * DPSGD_NORM_MARGIN;
            s->weights[i] = norm > cfg->clip ? (float)(cfg->clip / norm) : 1.0f;
            st0.clipped += norm > cfg->clip;
            st0.mean_norm += sqrt(s->norms2[i]) / n;
            st0.max_norm = fmax(st0.max_norm, sqrt(s->norms2[i]));
        }
        for (int k = 0; k < s->n_layers; k++)
            s->dst[k] = grad + tb->layers[k].offset;
        if (st == FP_OK)
            st = per_example_weighted_sum(pe, s->weights, s->dst, err);
        per_example_free(pe);
        FP_TRY(st);
    }
    // g = S / denominator + (float)(σ C z / denominator) on trainable elements.
    float inv = (float)(1.0 / cfg->denominator);
    double std = cfg->noise_multiplier * cfg->clip / cfg->denominator;
    float *host = be->device == DEVICE_CPU ? NULL : s->noise;
    if (host)
        memset(host, 0, sizeof(float) * tb->n_params);
    for (int k = 0; k < tb->n_layers; k++) {
        const ParamLayer *l = &tb->layers[k];
        if (!l->trainable)
            continue;
        be->affine(l->count, grad + l->offset, inv, 0.0f, grad + l->offset);
        if (std == 0.0)
            continue;
        float *dst = host ? host : grad;
        uint64_t base = step * np;
        for (size_t i = l->offset; i < l->offset + l->count; i++)
            dst[i] = host ? (float)(std * rng_normal_at(noise, base + i))
                          : dst[i] + (float)(std * rng_normal_at(noise, base + i));
    }
    if (host && std != 0.0) {
        be->upload(s->noise_dev, host, sizeof(float) * tb->n_params);
        be->axpy(tb->n_params, 1.0f, s->noise_dev, grad);
    }
    if (stats)
        *stats = st0;
    return FP_OK;
}

FpStatus dpsgd_per_example_grads(DpSgdStep *s, Model *m, const Dataset *d, const uint32_t *idx, int n, float *out,
                                 FpError *err) {
    const ParamTable *tb = &m->table;
    if (n < 1 || n > s->max_batch)
        return fp_fail(err, FP_EPARAM, "DP-SGD: batch of %d records, expected 1..%d", n, s->max_batch);
    PerExample *pe = NULL;
    FP_TRY(forward_backward(s, m, d, idx, n, &pe, err));
    FpStatus st = FP_OK;
    memset(out, 0, sizeof(float) * (size_t)n * tb->n_params);
    for (int k = 0; k < s->n_layers && st == FP_OK; k++) {
        s->dst[k] = tb->layers[k].trainable ? tape_alloc(s->tape, sizeof(float) * (size_t)n * tb->layers[k].count)
                                            : NULL;
        if (tb->layers[k].trainable && !s->dst[k])
            st = fp_fail(err, FP_ENOMEM, "out of memory for per-example gradients");
    }
    if (st == FP_OK)
        st = per_example_grads(pe, s->dst, err);
    for (int k = 0; k < s->n_layers && st == FP_OK; k++) {
        const ParamLayer *l = &tb->layers[k];
        if (!l->trainable)
            continue;
        for (int i = 0; i < n; i++)
            m->be->download(out + (size_t)i * tb->n_params + l->offset, s->dst[k] + (size_t)i * l->count,
                            sizeof(float) * l->count);
    }
    per_example_free(pe);
    return st;
}
