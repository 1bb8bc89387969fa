// The private step of DP-SGD (see dpsgd_step.h): per-example gradients from one backward
// pass, per-record clipping, Gaussian noise (ClipNoise) on the clipped sum.
#include "defenses/dpsgd_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/per_example.h"
#include "datasets/batch.h"
#include "models/predict.h"

// The rounding allowance on a computed norm (banner of dpsgd_step.h).
#define DPSGD_NORM_MARGIN (1.0 + 1.0 / 1048576.0)

FpStatus dpsgd_check_model(const Model *m, FpError *err) {
    for (int i = 0; i < m->table.n_layers; i++) {
        ParamKind k = m->table.layers[i].kind;
        if (k == PARAM_BN_SCALE || k == PARAM_BN_SHIFT || k == PARAM_BN_STAT)
            return fp_fail(err, FP_EUNSUPPORTED,
                           "model %s has batch norm: per-example gradients are ill-defined when a batch's "
                           "statistics mix its examples, so DP-SGD cannot run on it (use a model without batch norm)",
                           m->cfg.name);
    }
    return FP_OK;
}

// Per-call host scratch: the batch (non-CPU backends) and its labels or targets, the
// parameter leaves and where each layer's result goes.
typedef struct {
    float *data;
    Var **p;
    float **dst;
} Scratch;

static void scratch_free(Scratch *s) {
    free(s->data);
    free(s->p);
    free(s->dst);
}

// Records the forward pass of records idx[0..n) on t and runs the per-example backward pass.
static FpStatus forward_backward(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, Scratch *sc,
                                 PerExample **pe, FpError *err) {
    FP_TRY(dpsgd_check_model(m, err));
    if (dataset_sample_size(d) != (size_t)m->in.c * m->in.h * m->in.w)
        return fp_fail(err, FP_EPARAM, "DP-SGD: the data's samples do not match the model's input");
    size_t ss = dataset_sample_size(d), per = ss > (size_t)d->target_dim ? ss : (size_t)d->target_dim;
    int L = m->table.n_layers;
    sc->data = malloc(sizeof(float) * ((size_t)n * per + (size_t)n));
    sc->p = malloc(sizeof(Var *) * (size_t)L);
    sc->dst = malloc(sizeof(float *) * (size_t)L);
    if (!sc->data || !sc->p || !sc->dst)
        return fp_fail(err, FP_ENOMEM, "out of memory for a DP-SGD batch of %d records", n);
    tape_reset(t);
    FP_TRY(model_param_vars(m, t, 1, sc->p));
    Var *x = dataset_batch(t, d, idx, n, sc->data);
    Var *out = x ? model_forward(m, t, sc->p, x, 1) : NULL;
    Var *loss = batch_loss(t, out, d, idx, n, sc->data); // the mean over the batch
    Var *loss_sum = loss ? ad_scale(t, loss, (float)n) : NULL;
    return per_example_create(t, loss_sum, sc->p, L, n, pe, err);
}

// Σ_i c_i ∇ℓ_i into grad with c_i = min(1, C/‖∇ℓ_i‖), and the batch's statistics.
static FpStatus clipped_sum(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, double clip,
                            float *grad, DpSgdStats *st, FpError *err) {
    Scratch sc = {0};
    PerExample *pe = NULL;
    double *norms2 = malloc(sizeof(double) * (size_t)n);
    float *w = malloc(sizeof(float) * (size_t)n);
    FpStatus rc = norms2 && w ? forward_backward(m, t, d, idx, n, &sc, &pe, err)
                              : fp_fail(err, FP_ENOMEM, "out of memory for a DP-SGD batch of %d records", n);
    if (rc == FP_OK)
        rc = per_example_sq_norms(pe, norms2, err);
    for (int i = 0; i < n && rc == FP_OK; i++) {
        double norm = sqrt(norms2[i]), bound = norm * DPSGD_NORM_MARGIN;
        w[i] = bound > clip ? (float)(clip / bound) : 1.0f;
        st->clipped += bound > clip;
        st->mean_norm += norm / n;
        st->max_norm = fmax(st->max_norm, norm);
    }
    if (rc == FP_OK) {
        for (int k = 0; k < m->table.n_layers; k++)
            sc.dst[k] = grad + m->table.layers[k].offset;
        rc = per_example_weighted_sum(pe, w, sc.dst, err);
    }
    per_example_free(pe);
    scratch_free(&sc);
    free(norms2);
    free(w);
    return rc;
}

FpStatus dpsgd_step(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, const DpSgdStepConfig *cfg,
                    const RngStream *noise, uint64_t noise_first, float *grad, DpSgdStats *stats, FpError *err) {
    const Backend *be = m->be;
    const ParamTable *tb = &m->table;
    if (!(cfg->clip > 0.0) || !isfinite(cfg->clip))
        return fp_fail(err, FP_EPARAM, "DP-SGD: clip must be > 0 and finite, got %g", cfg->clip);
    if (!(cfg->noise_multiplier >= 0.0) || !isfinite(cfg->noise_multiplier))
        return fp_fail(err, FP_EPARAM, "DP-SGD: noise multiplier must be >= 0 and finite, got %g",
                       cfg->noise_multiplier);
    if (!(cfg->denominator > 0.0) || !isfinite(cfg->denominator))
        return fp_fail(err, FP_EPARAM, "DP-SGD: denominator must be > 0, got %g", cfg->denominator);
    if (n < 0)
        return fp_fail(err, FP_EPARAM, "DP-SGD: batch of %d records", n);
    if (cfg->noise_multiplier > 0.0 && (!cfg->sampler || (cfg->sampler->safe && !cfg->sampler->table.hi)))
        return fp_fail(err, FP_EPARAM, "DP-SGD: noise multiplier %g without a built Gaussian sampler",
                       cfg->noise_multiplier);
    if (noise_first > (UINT64_C(1) << 48) - (uint64_t)tb->n_params)
        return fp_fail(err, FP_EPARAM, "DP-SGD: noise indices from %llu are beyond the stream's 2^48",
                       (unsigned long long)noise_first);
    if (cfg->n_diracs < 0 || (cfg->n_diracs > 0 && (!cfg->dirac_coords || !(fabs(cfg->dirac_value) <= cfg->clip))))
        return fp_fail(err, FP_EPARAM, "DP-SGD: %d canary records of gradient value %g (at most the clip %g)",
                       cfg->n_diracs, (double)cfg->dirac_value, cfg->clip);
    for (int i = 0; i < cfg->n_diracs; i++)
        if (cfg->dirac_coords[i] >= tb->n_params)
            return fp_fail(err, FP_EPARAM, "DP-SGD: canary coordinate %u beyond the model's %zu parameters",
                           cfg->dirac_coords[i], tb->n_params);
    FP_TRY(dpsgd_check_model(m, err));
    DpSgdStats st = {.batch = n + cfg->n_diracs};
    be->fill(grad, tb->n_params, 0.0f);
    if (n > 0)
        FP_TRY(clipped_sum(m, t, d, idx, n, cfg->clip, grad, &st, err));
    // The canary records' clipped gradients, one Dirac each (in batch order, after the
    // data's: the sum is the same set of records).
    for (int i = 0; i < cfg->n_diracs; i++) {
        float *at = grad + cfg->dirac_coords[i], v;
        be->download(&v, at, sizeof v);
        v += cfg->dirac_value;
        be->upload(at, &v, sizeof v);
    }
    // The noise on the clipped sum S (the sampler rounds S as a whole on the safe path), then
    // g = that / denominator. On the CPU the sum is noised in place; elsewhere it travels to
    // the host and back.
    double std = cfg->noise_multiplier * cfg->clip;
    float *host = NULL;
    if (std != 0.0 && be->device != DEVICE_CPU) {
        host = malloc(sizeof(float) * tb->n_params);
        if (!host)
            return fp_fail(err, FP_ENOMEM, "out of memory for DP-SGD noise");
        be->download(host, grad, sizeof(float) * tb->n_params);
    }
    float *sum = host ? host : grad;
    for (int k = 0; k < tb->n_layers && std != 0.0; k++) {
        const ParamLayer *l = &tb->layers[k];
        if (l->trainable)
            clip_noise_add_at(cfg->sampler, sum + l->offset, l->count, noise, noise_first + l->offset, std);
    }
    if (host) {
        be->upload(grad, host, sizeof(float) * tb->n_params);
        free(host);
    }
    float inv = (float)(1.0 / cfg->denominator);
    for (int k = 0; k < tb->n_layers; k++) {
        const ParamLayer *l = &tb->layers[k];
        if (l->trainable)
            be->affine(l->count, grad + l->offset, inv, 0.0f, grad + l->offset);
    }
    if (stats)
        *stats = st;
    return FP_OK;
}

FpStatus dpsgd_per_example_grads(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, float *out,
                                 FpError *err) {
    const ParamTable *tb = &m->table;
    if (n < 1)
        return fp_fail(err, FP_EPARAM, "DP-SGD: per-example gradients of %d records", n);
    Scratch sc = {0};
    PerExample *pe = NULL;
    FpStatus st = forward_backward(m, t, d, idx, n, &sc, &pe, err);
    for (int k = 0; k < tb->n_layers && st == FP_OK; k++) {
        sc.dst[k] = tb->layers[k].trainable ? tape_alloc(t, sizeof(float) * (size_t)n * tb->layers[k].count) : NULL;
        if (tb->layers[k].trainable && !sc.dst[k])
            st = fp_fail(err, FP_ENOMEM, "out of memory for per-example gradients");
    }
    if (st == FP_OK)
        st = per_example_grads(pe, sc.dst, err);
    if (st == FP_OK) {
        memset(out, 0, sizeof(float) * (size_t)n * tb->n_params);
        for (int k = 0; k < tb->n_layers; k++) {
            const ParamLayer *l = &tb->layers[k];
            if (!l->trainable)
                continue;
            for (int i = 0; i < n; i++)
                m->be->download(out + (size_t)i * tb->n_params + l->offset, sc.dst[k] + (size_t)i * l->count,
                                sizeof(float) * l->count);
        }
    }
    per_example_free(pe);
    scratch_free(&sc);
    return st;
}
