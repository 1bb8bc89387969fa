// Composite layers and losses, built from the differentiable ops in core/ops.c, so
// their derivatives of every order come for free.
#include <math.h>
#include <stdlib.h>

#include "core/tape_internal.h"

Var *ad_linear(Tape *t, Var *x, Var *w, Var *b) {
    Var *y = ad_matmul(t, x, w, 0, 1); // (n,in) @ (out,in)ᵀ
    return b ? ad_binary_bc(t, BIN_ADD, y, b, 1) : y;
}

Var *ad_add_channel_bias(Tape *t, Var *x, Var *b) {
    if (!x || !b || x->t.ndim != 4 || (int)b->t.numel != x->t.shape[1])
        return NULL;
    return ad_binary_bc(t, BIN_ADD, x, b, (size_t)x->t.shape[2] * x->t.shape[3]);
}

// L = (1/n) Σ_i Σ_c −y_ic log softmax(z_i)_c   (DLG's soft-label loss; reduces to the
// usual cross-entropy for one-hot y).
Var *ad_cross_entropy_soft(Tape *t, Var *logits, Var *target) {
    if (!logits || !target || logits->t.ndim != 2 || target->t.numel != logits->t.numel)
        return NULL;
    Var *ls = ad_log_softmax(t, logits);
    Var *tgt = target->t.ndim == 2 ? target : ad_reshape(t, target, 2, logits->t.shape);
    return ad_scale(t, ad_sum(t, ad_mul(t, tgt, ls)), -1.0f / (float)logits->t.shape[0]);
}

Var *ad_cross_entropy(Tape *t, Var *logits, const int32_t *labels) {
    if (!logits || logits->t.ndim != 2)
        return NULL;
    int n = logits->t.shape[0], k = logits->t.shape[1];
    float *onehot = calloc((size_t)n * k, sizeof(float));
    if (!onehot)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (labels[i] < 0 || labels[i] >= k) {
            free(onehot);
            return NULL;
        }
        onehot[(size_t)i * k + labels[i]] = 1.0f;
    }
    Var *y = ad_from_host(t, onehot, 2, logits->t.shape, 0);
    free(onehot);
    return ad_cross_entropy_soft(t, logits, y);
}

Var *ad_mse(Tape *t, Var *a, Var *b) {
    if (!a || !b || a->t.numel != b->t.numel)
        return NULL;
    Var *bb = tensor_same_shape(&a->t, &b->t) ? b : ad_reshape(t, b, a->t.ndim, a->t.shape);
    return ad_mean(t, ad_unary(t, UN_SQUARE, ad_sub(t, a, bb)));
}

// Per-channel statistics layout: x (n,c,h,w) → inner = h·w, nb = c; x (n,c) → inner = 1.
static int bn_layout(const Var *x, size_t *inner, size_t *nb, size_t *count) {
    if (x->t.ndim == 4) {
        *inner = (size_t)x->t.shape[2] * x->t.shape[3];
        *nb = (size_t)x->t.shape[1];
    } else if (x->t.ndim == 2) {
        *inner = 1;
        *nb = (size_t)x->t.shape[1];
    } else
        return 0;
    *count = x->t.numel / *nb;
    return 1;
}

Var *ad_batchnorm_train(Tape *t, Var *x, Var *gamma, Var *beta, float eps, float *mean_out, float *var_out) {
    size_t inner, nb, count;
    if (!x || !gamma || !beta || !bn_layout(x, &inner, &nb, &count) || gamma->t.numel != nb || beta->t.numel != nb)
        return NULL;
    Var *mean = ad_scale(t, ad_sum_broadcast(t, x, inner, nb), 1.0f / (float)count);
    Var *xc = ad_binary_bc(t, BIN_SUB, x, mean, inner);
    Var *var = ad_scale(t, ad_sum_broadcast(t, ad_unary(t, UN_SQUARE, xc), inner, nb), 1.0f / (float)count);
    Var *inv_std = ad_unary(t, UN_RECIP, ad_unary(t, UN_SQRT, ad_affine(t, var, 1.0f, eps)));
    Var *xhat = ad_binary_bc(t, BIN_MUL, xc, inv_std, inner);
    Var *y = ad_binary_bc(t, BIN_ADD, ad_binary_bc(t, BIN_MUL, xhat, gamma, inner), beta, inner);
    if (y && mean_out)
        ad_to_host(t, mean, mean_out);
    if (y && var_out)
        ad_to_host(t, var, var_out);
    return y;
}

Var *ad_batchnorm_eval(Tape *t, Var *x, Var *gamma, Var *beta, const float *mean, const float *var, float eps) {
    size_t inner, nb, count;
    if (!x || !gamma || !beta || !bn_layout(x, &inner, &nb, &count))
        return NULL;
    float *scale = malloc(sizeof(float) * nb), *shift = malloc(sizeof(float) * nb);
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return NULL;
    }
    // (x − μ)/√(σ²+ε)·γ + β with fixed μ, σ²: x·s + (−μ·s) then ·γ + β, s = 1/√(σ²+ε).
    for (size_t c = 0; c < nb; c++) {
        scale[c] = 1.0f / sqrtf(var[c] + eps);
        shift[c] = -mean[c] * scale[c];
    }
    int shape[1] = {(int)nb};
    Var *s = ad_from_host(t, scale, 1, shape, 0), *m = ad_from_host(t, shift, 1, shape, 0);
    free(scale);
    free(shift);
    Var *xhat = ad_binary_bc(t, BIN_ADD, ad_binary_bc(t, BIN_MUL, x, s, inner), m, inner);
    return ad_binary_bc(t, BIN_ADD, ad_binary_bc(t, BIN_MUL, xhat, gamma, inner), beta, inner);
}
