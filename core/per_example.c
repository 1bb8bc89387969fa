// Per-example gradients through the tape (see per_example.h for the rules).
//
// Shapes: linear X (B, in), dY (B, out), W (out, in); conv X (B, C, H, W), dY (B, O, Ho, Wo),
// W (O, C, kh, kw); bias: dZ holds B blocks of nb·inner elements, element j of block i
// belongs to bias entry (j / inner) % nb.
#include <stdlib.h>
#include <string.h>

#include "core/per_example.h"
#include "core/tape_internal.h"

// Per-example gradients are formed at most this many floats at a time (64 MB).
#define PE_CHUNK_FLOATS ((size_t)16 << 20)

typedef enum { USE_LINEAR, USE_CONV, USE_BIAS } UseKind;

typedef struct {
    UseKind kind;
    int param;   // index into params
    Var *node;   // the op's output (Y or Z)
    Var *input;  // X (linear, conv)
    Var *grad;   // dL/d node, after the backward pass
} Use;

struct PerExample {
    Tape *t;
    const Backend *be;
    int batch, n_params;
    Var **params;
    int *use_count;
    Use *uses;
    int n_uses;
};

static const char *op_name(OpKind op) {
    static const char *const names[OP_COUNT] = {
        [OP_LEAF] = "leaf", [OP_MATMUL] = "matmul", [OP_UNARY] = "unary", [OP_AFFINE] = "affine",
        [OP_BINARY] = "binary", [OP_EXPAND] = "expand", [OP_SUM_BROADCAST] = "sum_broadcast",
        [OP_SOFTMAX] = "softmax", [OP_LOG_SOFTMAX] = "log_softmax", [OP_CONV2D] = "conv2d",
        [OP_CONV2D_BWD_DATA] = "conv2d_backward_data", [OP_CONV2D_BWD_FILTER] = "conv2d_backward_filter",
        [OP_MAXPOOL] = "maxpool", [OP_MAXPOOL_SCATTER] = "maxpool_scatter", [OP_MAXPOOL_GATHER] = "maxpool_gather",
        [OP_AVGPOOL] = "avgpool", [OP_AVGPOOL_BWD] = "avgpool_backward", [OP_RESHAPE] = "reshape",
        [OP_SLICE] = "slice", [OP_SLICE_PAD] = "slice_pad", [OP_TRANSPOSE] = "transpose",
    };
    return op >= 0 && op < OP_COUNT && names[op] ? names[op] : "unknown";
}

// The rule for node v using parameter p in input slot `slot`, or -1 (no rule).
static int use_rule(const Var *v, int slot, const Var *p, int batch) {
    const Var *a = v->in[0];
    if (slot != 1 || !a)
        return -1;
    if (v->op == OP_MATMUL && !v->attr.mm.trans_a && v->attr.mm.trans_b && a->t.ndim == 2 && a->t.shape[0] == batch)
        return USE_LINEAR;
    if (v->op == OP_CONV2D && a->t.ndim == 4 && a->t.shape[0] == batch && v->attr.conv.n == batch)
        return USE_CONV;
    if (v->op == OP_BINARY && v->attr.bin.op == BIN_ADD && v->attr.bin.nb == p->t.numel &&
        v->t.numel == (size_t)batch * p->t.numel * v->attr.bin.inner)
        return USE_BIAS;
    return -1;
}

FpStatus per_example_create(Tape *t, Var *loss_sum, Var *const *params, int n, int batch, PerExample **out,
                            FpError *err) {
    *out = NULL;
    if (!loss_sum || tape_status(t) != FP_OK)
        return fp_fail(err, tape_status(t) == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED,
                       "per-example gradients: the forward pass failed (%s)",
                       tape_status(t) == FP_ENOMEM ? "out of memory" : "bad graph");
    if (batch < 1 || loss_sum->t.numel != 1)
        return fp_fail(err, FP_EPARAM, "per-example gradients need a scalar loss and a batch >= 1");
    PerExample *pe = fp_calloc(1, sizeof *pe, err);
    if (!pe)
        return FP_ENOMEM;
    pe->t = t;
    pe->be = tape_backend(t);
    pe->batch = batch;
    pe->n_params = n;
    pe->params = fp_calloc((size_t)n, sizeof(Var *), err);
    pe->use_count = fp_calloc((size_t)n, sizeof(int), err);
    int cap = 64;
    pe->uses = fp_malloc(sizeof(Use) * (size_t)cap, err);
    FpStatus st = FP_OK;
    Var **wrt = NULL, **grads = NULL;
    if (!pe->params || !pe->use_count || !pe->uses) {
        st = FP_ENOMEM;
        goto fail;
    }
    for (int k = 0; k < n; k++)
        pe->params[k] = params[k] && params[k]->requires_grad ? params[k] : NULL;
    // Every use of a parameter on the tape up to the loss, in tape order.
    for (int i = 0; i <= loss_sum->id; i++) {
        Var *v = tape_node(t, i);
        for (int slot = 0; slot < 2; slot++) {
            if (!v->in[slot])
                continue;
            for (int k = 0; k < n; k++) {
                if (!pe->params[k] || v->in[slot] != pe->params[k])
                    continue;
                int rule = use_rule(v, slot, pe->params[k], batch);
                if (rule < 0) {
                    st = fp_fail(err, FP_EUNSUPPORTED,
                                 "per-example gradients: parameter %d is used by op %s (operand %d), which has no "
                                 "per-example rule (e.g. batch norm mixes the examples of a batch)",
                                 k, op_name(v->op), slot);
                    goto fail;
                }
                if (pe->n_uses == cap) {
                    cap *= 2;
                    Use *nu = realloc(pe->uses, sizeof(Use) * (size_t)cap);
                    if (!nu) {
                        st = fp_fail(err, FP_ENOMEM, "out of memory in per-example gradients");
                        goto fail;
                    }
                    pe->uses = nu;
                }
                pe->uses[pe->n_uses++] = (Use){(UseKind)rule, k, v, v->in[0], NULL};
                pe->use_count[k]++;
            }
        }
    }
    wrt = fp_malloc(sizeof(Var *) * (size_t)(pe->n_uses + 1), err);
    grads = fp_malloc(sizeof(Var *) * (size_t)(pe->n_uses + 1), err);
    if (!wrt || !grads) {
        st = FP_ENOMEM;
        goto fail;
    }
    for (int u = 0; u < pe->n_uses; u++)
        wrt[u] = pe->uses[u].node;
    // One sweep; pruning skips every weight gradient and the input gradient of the first layer.
    st = ad_grad(t, loss_sum, wrt, pe->n_uses, grads, 0);
    if (st != FP_OK) {
        st = fp_fail(err, st, "per-example gradients: the backward pass failed (%s)", fp_status_name(st));
        goto fail;
    }
    for (int u = 0; u < pe->n_uses; u++)
        pe->uses[u].grad = grads[u];
    free(wrt);
    free(grads);
    *out = pe;
    return FP_OK;
fail:
    free(wrt);
    free(grads);
    per_example_free(pe);
    return st;
}

void per_example_free(PerExample *pe) {
    if (!pe)
        return;
    free(pe->params);
    free(pe->use_count);
    free(pe->uses);
    free(pe);
}

static float *scratch(PerExample *pe, size_t floats, FpError *err) {
    float *p = tape_alloc(pe->t, floats * sizeof(float));
    if (!p)
        fp_fail(err, FP_ENOMEM, "out of memory for per-example gradients (%zu floats)", floats);
    return p;
}

// G (cnt × numel(param k), device) += the per-example gradients of examples i0..i0+cnt−1
// from use u (accumulates: G must be zeroed first).
static FpStatus accumulate_rows(PerExample *pe, const Use *u, int i0, int cnt, float *g, FpError *err) {
    const Backend *be = pe->be;
    const Var *x = u->input, *dy = u->grad;
    size_t numel = pe->params[u->param]->t.numel;
    if (u->kind == USE_LINEAR) {
        int in = x->t.shape[1], outd = dy->t.shape[1];
        for (int i = 0; i < cnt; i++) // dY_iᵀ X_i: (out × 1) @ (1 × in)
            be->gemm(1, 0, outd, in, 1, 1.0f, dy->t.data + (size_t)(i0 + i) * outd, x->t.data + (size_t)(i0 + i) * in,
                     1.0f, g + (size_t)i * numel);
        return FP_OK;
    }
    if (u->kind == USE_CONV) {
        ConvGeom gc = u->node->attr.conv;
        gc.n = cnt;
        size_t xs = (size_t)gc.c_in * gc.h_in * gc.w_in, ys = (size_t)gc.c_out * gc.h_out * gc.w_out;
        const float *xi = x->t.data + (size_t)i0 * xs, *dyi = dy->t.data + (size_t)i0 * ys;
        if (pe->use_count[u->param] == 1) { // single use: G is zero, write (=)
            be->conv2d_backward_filter_per_example(&gc, xi, dyi, g);
            return FP_OK;
        }
        float *tmp = scratch(pe, (size_t)cnt * numel, err);
        if (!tmp)
            return FP_ENOMEM;
        be->conv2d_backward_filter_per_example(&gc, xi, dyi, tmp);
        be->axpy((size_t)cnt * numel, 1.0f, tmp, g);
        return FP_OK;
    }
    // Bias: block i of dZ summed over inner, per bias entry: sum_broadcast to (cnt, nb).
    size_t per = dy->t.numel / (size_t)pe->batch, inner = u->node->attr.bin.inner;
    float *tmp = scratch(pe, (size_t)cnt * numel, err);
    if (!tmp)
        return FP_ENOMEM;
    be->sum_broadcast((size_t)cnt * per, dy->t.data + (size_t)i0 * per, inner, (size_t)cnt * numel, tmp);
    be->axpy((size_t)cnt * numel, 1.0f, tmp, g);
    return FP_OK;
}

// Per-example gradients of parameter k for examples i0..i0+cnt−1 into g (=).
static FpStatus param_rows(PerExample *pe, int k, int i0, int cnt, float *g, FpError *err) {
    pe->be->fill(g, (size_t)cnt * pe->params[k]->t.numel, 0.0f);
    for (int u = 0; u < pe->n_uses; u++)
        if (pe->uses[u].param == k)
            FP_TRY(accumulate_rows(pe, &pe->uses[u], i0, cnt, g, err));
    return FP_OK;
}

// host[i] += Σ_j rows[i][j]² for cnt rows of len floats (device): the squares, then their
// row sums as one matrix-vector product with ones (the BLAS's blocked, vectorised sums;
// a row sum through sum_broadcast adds one float at a time, 6% of LeNet's DP-SGD step).
static FpStatus add_row_sq(PerExample *pe, const float *rows, int cnt, size_t len, double *host, FpError *err) {
    float *sq = scratch(pe, (size_t)cnt * len + len + (size_t)cnt, err);
    if (!sq)
        return FP_ENOMEM;
    float *ones = sq + (size_t)cnt * len, *sums = ones + len;
    pe->be->unary(UN_SQUARE, (size_t)cnt * len, rows, sq);
    pe->be->fill(ones, len, 1.0f);
    pe->be->gemm(0, 0, cnt, 1, (int)len, 1.0f, sq, ones, 0.0f, sums);
    float *h = malloc(sizeof(float) * (size_t)cnt);
    if (!h)
        return fp_fail(err, FP_ENOMEM, "out of memory in per-example norms");
    pe->be->download(h, sums, sizeof(float) * (size_t)cnt);
    for (int i = 0; i < cnt; i++)
        host[i] += h[i];
    free(h);
    return FP_OK;
}

FpStatus per_example_sq_norms(PerExample *pe, double *norms2, FpError *err) {
    int B = pe->batch;
    memset(norms2, 0, sizeof(double) * (size_t)B);
    double *a = malloc(sizeof(double) * (size_t)B), *b = malloc(sizeof(double) * (size_t)B);
    if (!a || !b) {
        free(a);
        free(b);
        return fp_fail(err, FP_ENOMEM, "out of memory in per-example norms");
    }
    FpStatus st = FP_OK;
    for (int k = 0; k < pe->n_params && st == FP_OK; k++) {
        if (!pe->params[k] || pe->use_count[k] == 0)
            continue;
        const Use *single = NULL;
        for (int u = 0; u < pe->n_uses; u++)
            if (pe->uses[u].param == k)
                single = &pe->uses[u];
        if (pe->use_count[k] == 1 && single->kind == USE_LINEAR) {
            // ‖dY_iᵀ X_i‖²_F = ‖dY_i‖² ‖X_i‖²
            memset(a, 0, sizeof(double) * (size_t)B);
            memset(b, 0, sizeof(double) * (size_t)B);
            st = add_row_sq(pe, single->input->t.data, B, (size_t)single->input->t.shape[1], a, err);
            if (st == FP_OK)
                st = add_row_sq(pe, single->grad->t.data, B, (size_t)single->grad->t.shape[1], b, err);
            for (int i = 0; i < B && st == FP_OK; i++)
                norms2[i] += a[i] * b[i];
            continue;
        }
        size_t numel = pe->params[k]->t.numel;
        int chunk = (int)(PE_CHUNK_FLOATS / numel);
        if (chunk < 1)
            chunk = 1;
        if (chunk > B)
            chunk = B;
        float *g = scratch(pe, (size_t)chunk * numel, err);
        if (!g) {
            st = FP_ENOMEM;
            break;
        }
        for (int i0 = 0; i0 < B && st == FP_OK; i0 += chunk) {
            int cnt = B - i0 < chunk ? B - i0 : chunk;
            st = param_rows(pe, k, i0, cnt, g, err);
            if (st == FP_OK)
                st = add_row_sq(pe, g, cnt, numel, norms2 + i0, err);
        }
    }
    free(a);
    free(b);
    return st;
}

FpStatus per_example_weighted_sum(PerExample *pe, const float *w, float *const *out, FpError *err) {
    const Backend *be = pe->be;
    int B = pe->batch;
    float *c = scratch(pe, (size_t)B, err);
    if (!c)
        return FP_ENOMEM;
    be->upload(c, w, sizeof(float) * (size_t)B);
    for (int k = 0; k < pe->n_params; k++)
        if (pe->params[k])
            be->fill(out[k], pe->params[k]->t.numel, 0.0f);
    for (int u = 0; u < pe->n_uses; u++) {
        const Use *us = &pe->uses[u];
        const Var *x = us->input, *dy = us->grad;
        size_t numel = pe->params[us->param]->t.numel, per = dy->t.numel / (size_t)B;
        float *dyc = scratch(pe, dy->t.numel, err); // dY with example i's block scaled by w_i
        if (!dyc)
            return FP_ENOMEM;
        be->binary(BIN_MUL, dy->t.numel, dy->t.data, c, per, (size_t)B, dyc);
        if (us->kind == USE_LINEAR) { // (c⊙dY)ᵀ X, accumulated into out
            be->gemm(1, 0, dy->t.shape[1], x->t.shape[1], B, 1.0f, dyc, x->t.data, 1.0f, out[us->param]);
            continue;
        }
        float *tmp = scratch(pe, numel, err);
        if (!tmp)
            return FP_ENOMEM;
        if (us->kind == USE_CONV)
            be->conv2d_backward_filter(&us->node->attr.conv, x->t.data, dyc, tmp, NULL, 0);
        else
            be->sum_broadcast(dy->t.numel, dyc, us->node->attr.bin.inner, numel, tmp);
        be->axpy(numel, 1.0f, tmp, out[us->param]);
    }
    return FP_OK;
}

FpStatus per_example_grads(PerExample *pe, float *const *out, FpError *err) {
    for (int k = 0; k < pe->n_params; k++) {
        if (!pe->params[k])
            continue;
        if (pe->use_count[k] == 0) {
            pe->be->fill(out[k], (size_t)pe->batch * pe->params[k]->t.numel, 0.0f);
            continue;
        }
        FP_TRY(param_rows(pe, k, 0, pe->batch, out[k], err));
    }
    return FP_OK;
}
