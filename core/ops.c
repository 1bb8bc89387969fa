// Differentiable ops: the forward constructors and, in op_backward, each op's
// derivative written with these same ops (so derivatives of any order are exact).
//
// Closed families keep this finite: conv2d / conv2d_backward_data /
// conv2d_backward_filter are each other's derivatives; max-pool scatter and gather are
// adjoint; avg-pool forward and backward are adjoint; expand and sum_broadcast are
// adjoint; slice and slice_pad are adjoint.
#include <string.h>

#include "core/tape_internal.h"

#define BE(t) tape_backend(t)

static int valid2(const Var *a, const Var *b) { return a && b; }

// -- matmul ---------------------------------------------------------------------------
Var *ad_matmul(Tape *t, Var *a, Var *b, int trans_a, int trans_b) {
    if (!valid2(a, b) || a->t.ndim != 2 || b->t.ndim != 2)
        return NULL;
    int m = trans_a ? a->t.shape[1] : a->t.shape[0];
    int k = trans_a ? a->t.shape[0] : a->t.shape[1];
    int kb = trans_b ? b->t.shape[1] : b->t.shape[0];
    int n = trans_b ? b->t.shape[0] : b->t.shape[1];
    if (k != kb)
        return NULL;
    int shape[2] = {m, n};
    Var *v = tape_new_var(t, OP_MATMUL, a, b, 2, shape);
    if (!v)
        return NULL;
    v->attr.mm.trans_a = trans_a;
    v->attr.mm.trans_b = trans_b;
    BE(t)->gemm(trans_a, trans_b, m, n, k, 1.0f, a->t.data, b->t.data, 0.0f, v->t.data);
    return v;
}

// -- elementwise ----------------------------------------------------------------------
Var *ad_unary(Tape *t, UnaryOp op, Var *x) {
    if (!x)
        return NULL;
    Var *v = tape_new_var(t, OP_UNARY, x, NULL, x->t.ndim, x->t.shape);
    if (!v)
        return NULL;
    v->attr.un.op = op;
    if (op == UN_STEP || op == UN_SIGN)
        v->requires_grad = 0; // piecewise constant: zero derivative
    BE(t)->unary(op, x->t.numel, x->t.data, v->t.data);
    return v;
}

Var *ad_affine(Tape *t, Var *x, float alpha, float beta) {
    if (!x)
        return NULL;
    Var *v = tape_new_var(t, OP_AFFINE, x, NULL, x->t.ndim, x->t.shape);
    if (!v)
        return NULL;
    v->attr.aff.alpha = alpha;
    v->attr.aff.beta = beta;
    BE(t)->affine(x->t.numel, x->t.data, alpha, beta, v->t.data);
    return v;
}

Var *ad_scale(Tape *t, Var *x, float alpha) { return ad_affine(t, x, alpha, 0.0f); }

Var *ad_binary_bc(Tape *t, BinaryOp op, Var *a, Var *b, size_t inner) {
    if (!valid2(a, b) || inner == 0)
        return NULL;
    size_t nb = b->t.numel;
    if (nb == 0 || a->t.numel % nb != 0 || (inner > 1 && a->t.numel % (inner * nb) != 0 && nb > 1))
        return NULL;
    Var *v = tape_new_var(t, OP_BINARY, a, b, a->t.ndim, a->t.shape);
    if (!v)
        return NULL;
    v->attr.bin.op = op;
    v->attr.bin.inner = inner;
    v->attr.bin.nb = nb;
    BE(t)->binary(op, a->t.numel, a->t.data, b->t.data, inner, nb, v->t.data);
    return v;
}

static Var *same_shape_binary(Tape *t, BinaryOp op, Var *a, Var *b) {
    if (!valid2(a, b) || a->t.numel != b->t.numel)
        return NULL;
    return ad_binary_bc(t, op, a, b, 1);
}

Var *ad_add(Tape *t, Var *a, Var *b) { return same_shape_binary(t, BIN_ADD, a, b); }
Var *ad_sub(Tape *t, Var *a, Var *b) { return same_shape_binary(t, BIN_SUB, a, b); }
Var *ad_mul(Tape *t, Var *a, Var *b) { return same_shape_binary(t, BIN_MUL, a, b); }
Var *ad_div(Tape *t, Var *a, Var *b) { return same_shape_binary(t, BIN_DIV, a, b); }

Var *ad_expand(Tape *t, Var *b, int ndim, const int *shape, size_t inner) {
    if (!b)
        return NULL;
    Var *v = tape_new_var(t, OP_EXPAND, b, NULL, ndim, shape);
    if (!v)
        return NULL;
    v->attr.bc.inner = inner;
    v->attr.bc.nb = b->t.numel;
    BE(t)->expand(v->t.numel, b->t.data, inner, b->t.numel, v->t.data);
    return v;
}

Var *ad_sum_broadcast(Tape *t, Var *x, size_t inner, size_t nb) {
    if (!x)
        return NULL;
    int shape[1] = {(int)nb};
    Var *v = tape_new_var(t, OP_SUM_BROADCAST, x, NULL, 1, shape);
    if (!v)
        return NULL;
    v->attr.bc.inner = inner;
    v->attr.bc.nb = nb;
    BE(t)->sum_broadcast(x->t.numel, x->t.data, inner, nb, v->t.data);
    return v;
}

Var *ad_sum(Tape *t, Var *x) { return x ? ad_sum_broadcast(t, x, x->t.numel, 1) : NULL; }

Var *ad_mean(Tape *t, Var *x) { return x ? ad_scale(t, ad_sum(t, x), 1.0f / (float)x->t.numel) : NULL; }

// -- softmax family -------------------------------------------------------------------
static Var *rowwise(Tape *t, OpKind op, Var *x) {
    if (!x || x->t.ndim != 2)
        return NULL;
    Var *v = tape_new_var(t, op, x, NULL, 2, x->t.shape);
    if (!v)
        return NULL;
    if (op == OP_SOFTMAX)
        BE(t)->softmax(x->t.shape[0], x->t.shape[1], x->t.data, v->t.data);
    else
        BE(t)->log_softmax(x->t.shape[0], x->t.shape[1], x->t.data, v->t.data);
    return v;
}

Var *ad_softmax(Tape *t, Var *x) { return rowwise(t, OP_SOFTMAX, x); }
Var *ad_log_softmax(Tape *t, Var *x) { return rowwise(t, OP_LOG_SOFTMAX, x); }

// -- convolution family ------------------------------------------------------------------
// The input x of a convolution is read through its columns (im2col) three times per
// double-backward: by the forward, by the weight gradient bwd_filter(x, dy) and by that
// gradient's own derivative conv(x, ddw). Where the backend builds columns, the first of
// these nodes keeps them in tape memory (freed with the tape, rewound with it) and hands
// them to the next: `cols` is the columns of x that an earlier node built, or NULL. Kept
// only while recording and where a later node can read them (the node's gradient flows
// to its second input), and only for geometries the backend holds in one group.
static float *conv_columns(Tape *t, const ConvGeom *g, const Var *v, const Var *second, float *cols, int *filled) {
    *filled = cols != NULL;
    if (cols || !BE(t)->conv2d_columns_size || !tape_grad_enabled(t) || !v->requires_grad || !second->requires_grad)
        return cols;
    size_t n = BE(t)->conv2d_columns_size(g);
    return n ? tape_alloc(t, n * sizeof(float)) : NULL; // NULL: out of memory (the tape's status says so)
}

static Var *conv_fwd(Tape *t, Var *x, Var *w, const ConvGeom *g, float *cols) {
    int shape[4] = {g->n, g->c_out, g->h_out, g->w_out};
    Var *v = tape_new_var(t, OP_CONV2D, x, w, 4, shape);
    if (!v)
        return NULL;
    v->attr.conv = *g;
    int filled;
    v->cols = conv_columns(t, g, v, w, cols, &filled);
    BE(t)->conv2d_forward(g, x->t.data, w->t.data, v->t.data, v->cols, filled);
    return v;
}

static Var *conv_bwd_data(Tape *t, Var *dy, Var *w, const ConvGeom *g) {
    int shape[4] = {g->n, g->c_in, g->h_in, g->w_in};
    Var *v = tape_new_var(t, OP_CONV2D_BWD_DATA, dy, w, 4, shape);
    if (!v)
        return NULL;
    v->attr.conv = *g;
    BE(t)->conv2d_backward_data(g, dy->t.data, w->t.data, v->t.data);
    return v;
}

static Var *conv_bwd_filter(Tape *t, Var *x, Var *dy, const ConvGeom *g, float *cols) {
    int shape[4] = {g->c_out, g->c_in, g->kh, g->kw};
    Var *v = tape_new_var(t, OP_CONV2D_BWD_FILTER, x, dy, 4, shape);
    if (!v)
        return NULL;
    v->attr.conv = *g;
    int filled;
    v->cols = conv_columns(t, g, v, dy, cols, &filled);
    BE(t)->conv2d_backward_filter(g, x->t.data, dy->t.data, v->t.data, v->cols, filled);
    return v;
}

Var *ad_conv2d(Tape *t, Var *x, Var *w, int stride, int pad) {
    if (!valid2(x, w) || x->t.ndim != 4 || w->t.ndim != 4 || x->t.shape[1] != w->t.shape[1] || stride < 1 || pad < 0)
        return NULL;
    ConvGeom g = {.n = x->t.shape[0], .c_in = x->t.shape[1], .h_in = x->t.shape[2], .w_in = x->t.shape[3],
                  .c_out = w->t.shape[0], .kh = w->t.shape[2], .kw = w->t.shape[3], .stride = stride, .pad = pad};
    g.h_out = (g.h_in + 2 * pad - g.kh) / stride + 1;
    g.w_out = (g.w_in + 2 * pad - g.kw) / stride + 1;
    if (g.h_out < 1 || g.w_out < 1)
        return NULL;
    return conv_fwd(t, x, w, &g, NULL);
}

// -- pooling family --------------------------------------------------------------------
static Var *pool_var(Tape *t, OpKind op, Var *x, const PoolGeom *g, int out_shape) {
    int so[4] = {g->n, g->c, g->h_out, g->w_out}, si[4] = {g->n, g->c, g->h_in, g->w_in};
    Var *v = tape_new_var(t, op, x, NULL, 4, out_shape ? so : si);
    if (v)
        v->attr.pool = *g;
    return v;
}

static Var *maxpool_scatter(Tape *t, Var *dy, int32_t *argmax, const PoolGeom *g) {
    Var *v = pool_var(t, OP_MAXPOOL_SCATTER, dy, g, 0);
    if (!v)
        return NULL;
    v->argmax = argmax;
    BE(t)->maxpool_scatter(g, dy->t.data, argmax, v->t.data);
    return v;
}

static Var *maxpool_gather(Tape *t, Var *x, int32_t *argmax, const PoolGeom *g) {
    Var *v = pool_var(t, OP_MAXPOOL_GATHER, x, g, 1);
    if (!v)
        return NULL;
    v->argmax = argmax;
    BE(t)->maxpool_gather(g, x->t.data, argmax, v->t.data);
    return v;
}

static Var *avgpool_fwd(Tape *t, Var *x, const PoolGeom *g) {
    Var *v = pool_var(t, OP_AVGPOOL, x, g, 1);
    if (v)
        BE(t)->avgpool_forward(g, x->t.data, v->t.data);
    return v;
}

static Var *avgpool_bwd(Tape *t, Var *dy, const PoolGeom *g) {
    Var *v = pool_var(t, OP_AVGPOOL_BWD, dy, g, 0);
    if (v)
        BE(t)->avgpool_backward(g, dy->t.data, v->t.data);
    return v;
}

static int pool_geom(const Var *x, int k, int stride, PoolGeom *g) {
    if (!x || x->t.ndim != 4 || k < 1 || stride < 1 || x->t.shape[2] < k || x->t.shape[3] < k)
        return 0;
    *g = (PoolGeom){.n = x->t.shape[0], .c = x->t.shape[1], .h_in = x->t.shape[2], .w_in = x->t.shape[3], .k = k,
                    .stride = stride};
    g->h_out = (g->h_in - k) / stride + 1;
    g->w_out = (g->w_in - k) / stride + 1;
    return 1;
}

Var *ad_maxpool2d(Tape *t, Var *x, int k, int stride) {
    PoolGeom g;
    if (!pool_geom(x, k, stride, &g))
        return NULL;
    Var *v = pool_var(t, OP_MAXPOOL, x, &g, 1);
    if (!v)
        return NULL;
    v->argmax = tape_alloc(t, v->t.numel * sizeof(int32_t));
    if (!v->argmax)
        return NULL;
    BE(t)->maxpool_forward(&g, x->t.data, v->t.data, v->argmax);
    return v;
}

Var *ad_avgpool2d(Tape *t, Var *x, int k, int stride) {
    PoolGeom g;
    if (!pool_geom(x, k, stride, &g))
        return NULL;
    return avgpool_fwd(t, x, &g);
}

// -- shape ---------------------------------------------------------------------------------
Var *ad_reshape(Tape *t, Var *x, int ndim, const int *shape) {
    if (!x || shape_numel(ndim, shape) != x->t.numel)
        return NULL;
    return tape_new_view(t, OP_RESHAPE, x, x->t.data, ndim, shape);
}

static Var *slice_op(Tape *t, Var *x, int outer, int inner, int dim, int off, int len, int ndim, const int *shape) {
    Var *v = tape_new_var(t, OP_SLICE, x, NULL, ndim, shape);
    if (!v)
        return NULL;
    v->attr.slice.outer = outer;
    v->attr.slice.inner = inner;
    v->attr.slice.dim = dim;
    v->attr.slice.off = off;
    v->attr.slice.len = len;
    BE(t)->slice_copy(outer, inner, dim, off, len, 0, len, x->t.data, v->t.data);
    return v;
}

// The adjoint of slice: y (outer, len, inner) placed at off inside zeros (outer, dim, inner).
static Var *slice_pad_op(Tape *t, Var *y, int outer, int inner, int dim, int off, int len, int ndim,
                         const int *shape) {
    Var *v = tape_new_var(t, OP_SLICE_PAD, y, NULL, ndim, shape);
    if (!v)
        return NULL;
    v->attr.slice.outer = outer;
    v->attr.slice.inner = inner;
    v->attr.slice.dim = dim;
    v->attr.slice.off = off;
    v->attr.slice.len = len;
    BE(t)->fill(v->t.data, v->t.numel, 0.0f);
    BE(t)->slice_copy(outer, inner, len, 0, dim, off, len, y->t.data, v->t.data);
    return v;
}

static void axis_split(const Var *x, int axis, int *outer, int *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= x->t.shape[i];
    for (int i = axis + 1; i < x->t.ndim; i++)
        *inner *= x->t.shape[i];
}

Var *ad_slice(Tape *t, Var *x, int axis, int off, int len) {
    if (!x || axis < 0 || axis >= x->t.ndim || off < 0 || len < 1 || off + len > x->t.shape[axis])
        return NULL;
    int outer, inner, shape[TENSOR_MAX_DIMS];
    axis_split(x, axis, &outer, &inner);
    memcpy(shape, x->t.shape, sizeof shape);
    shape[axis] = len;
    return slice_op(t, x, outer, inner, x->t.shape[axis], off, len, x->t.ndim, shape);
}

Var *ad_concat(Tape *t, Var *a, Var *b, int axis) {
    if (!valid2(a, b) || a->t.ndim != b->t.ndim || axis < 0 || axis >= a->t.ndim)
        return NULL;
    for (int i = 0; i < a->t.ndim; i++)
        if (i != axis && a->t.shape[i] != b->t.shape[i])
            return NULL;
    int outer, inner, shape[TENSOR_MAX_DIMS];
    axis_split(a, axis, &outer, &inner);
    memcpy(shape, a->t.shape, sizeof shape);
    int la = a->t.shape[axis], lb = b->t.shape[axis];
    shape[axis] = la + lb;
    Var *pa = slice_pad_op(t, a, outer, inner, la + lb, 0, la, a->t.ndim, shape);
    Var *pb = slice_pad_op(t, b, outer, inner, la + lb, la, lb, a->t.ndim, shape);
    return ad_add(t, pa, pb);
}

Var *ad_transpose(Tape *t, Var *x) {
    if (!x || x->t.ndim != 2)
        return NULL;
    int shape[2] = {x->t.shape[1], x->t.shape[0]};
    Var *v = tape_new_var(t, OP_TRANSPOSE, x, NULL, 2, shape);
    if (v)
        BE(t)->transpose(x->t.shape[0], x->t.shape[1], x->t.data, v->t.data);
    return v;
}

// -- backward rules ------------------------------------------------------------------------
// Each rule computes gradients only for inputs that need them: inputs on a
// differentiable path that lead to a variable the sweep was asked about (ad_grad in
// core/tape.c marks the others by pointing their grad scratch at themselves).
static int needs(const Var *v, int i) {
    const Var *in = v->in[i];
    return in && in->requires_grad && in->grad != in;
}

static Var *as_shape_of(Tape *t, Var *g, const Var *like) {
    if (!g)
        return NULL;
    return g->t.ndim == like->t.ndim && tensor_same_shape(&g->t, &like->t) ? g
                                                                            : ad_reshape(t, g, like->t.ndim, like->t.shape);
}

// Σ over the broadcast of g back to b's nb elements (identity when there is no broadcast).
static Var *unbroadcast(Tape *t, Var *g, size_t inner, size_t nb, const Var *b) {
    if (inner == 1 && nb == g->t.numel)
        return as_shape_of(t, g, b);
    return as_shape_of(t, ad_sum_broadcast(t, g, inner, nb), b);
}

static void backward_unary(Tape *t, Var *v, Var *g, Var **g0) {
    Var *x = v->in[0];
    switch (v->attr.un.op) {
    case UN_NEG: *g0 = ad_scale(t, g, -1.0f); break;
    case UN_EXP: *g0 = ad_mul(t, g, v); break;
    case UN_LOG: *g0 = ad_div(t, g, x); break;
    case UN_SIGMOID: *g0 = same_shape_binary(t, BIN_SIGMOID_GRAD, g, v); break; // g σ(1-σ), one pass
    case UN_TANH: *g0 = ad_mul(t, g, ad_affine(t, ad_unary(t, UN_SQUARE, v), -1.0f, 1.0f)); break; // 1 - tanh²
    case UN_RELU: *g0 = ad_mul(t, g, ad_unary(t, UN_STEP, x)); break;
    case UN_SQUARE: *g0 = ad_mul(t, g, ad_scale(t, x, 2.0f)); break;
    case UN_SQRT: *g0 = ad_div(t, ad_scale(t, g, 0.5f), v); break;
    case UN_RECIP: *g0 = ad_scale(t, ad_mul(t, g, ad_unary(t, UN_SQUARE, v)), -1.0f); break;
    case UN_ABS: *g0 = ad_mul(t, g, ad_unary(t, UN_SIGN, x)); break;
    case UN_STEP:
    case UN_SIGN:
    case UN_COUNT: *g0 = NULL; break;
    }
}

static void backward_binary(Tape *t, Var *v, Var *g, Var **g0, Var **g1) {
    Var *a = v->in[0], *b = v->in[1];
    size_t inner = v->attr.bin.inner, nb = v->attr.bin.nb;
    switch (v->attr.bin.op) {
    case BIN_ADD:
        if (needs(v, 0)) *g0 = g;
        if (needs(v, 1)) *g1 = unbroadcast(t, g, inner, nb, b);
        break;
    case BIN_SUB:
        if (needs(v, 0)) *g0 = g;
        if (needs(v, 1)) *g1 = ad_scale(t, unbroadcast(t, g, inner, nb, b), -1.0f);
        break;
    case BIN_MUL:
        if (needs(v, 0)) *g0 = ad_binary_bc(t, BIN_MUL, g, b, inner);
        if (needs(v, 1)) *g1 = unbroadcast(t, ad_mul(t, g, a), inner, nb, b);
        break;
    case BIN_DIV: // y = a / b: dy/da = 1/b, dy/db = -y/b
        if (needs(v, 0)) *g0 = ad_binary_bc(t, BIN_DIV, g, b, inner);
        if (needs(v, 1))
            *g1 = ad_scale(t, unbroadcast(t, ad_binary_bc(t, BIN_DIV, ad_mul(t, g, v), b, inner), inner, nb, b), -1.0f);
        break;
    case BIN_SIGMOID_GRAD: // y = a b(1 − b): dy/da = b(1 − b), dy/db = a(1 − 2b)
        if (needs(v, 0)) *g0 = ad_binary_bc(t, BIN_SIGMOID_GRAD, g, b, inner);
        if (needs(v, 1))
            *g1 = unbroadcast(t, ad_binary_bc(t, BIN_MUL, ad_mul(t, g, a), ad_affine(t, b, -2.0f, 1.0f), inner), inner, nb, b);
        break;
    case BIN_COUNT: break;
    }
}

static void backward_matmul(Tape *t, Var *v, Var *g, Var **g0, Var **g1) {
    Var *a = v->in[0], *b = v->in[1];
    int ta = v->attr.mm.trans_a, tb = v->attr.mm.trans_b;
    if (!ta && !tb) { // C = A B
        if (needs(v, 0)) *g0 = ad_matmul(t, g, b, 0, 1);
        if (needs(v, 1)) *g1 = ad_matmul(t, a, g, 1, 0);
    } else if (!ta && tb) { // C = A Bᵀ
        if (needs(v, 0)) *g0 = ad_matmul(t, g, b, 0, 0);
        if (needs(v, 1)) *g1 = ad_matmul(t, g, a, 1, 0);
    } else if (ta && !tb) { // C = Aᵀ B
        if (needs(v, 0)) *g0 = ad_matmul(t, b, g, 0, 1);
        if (needs(v, 1)) *g1 = ad_matmul(t, a, g, 0, 0);
    } else { // C = Aᵀ Bᵀ
        if (needs(v, 0)) *g0 = ad_matmul(t, b, g, 1, 1);
        if (needs(v, 1)) *g1 = ad_matmul(t, g, a, 1, 1);
    }
}

void op_backward(Tape *t, Var *v, Var *g, Var **g0, Var **g1) {
    Var *x = v->in[0];
    *g0 = *g1 = NULL;
    switch (v->op) {
    case OP_LEAF: break;
    case OP_MATMUL: backward_matmul(t, v, g, g0, g1); break;
    case OP_UNARY: backward_unary(t, v, g, g0); break;
    case OP_AFFINE: *g0 = ad_scale(t, g, v->attr.aff.alpha); break;
    case OP_BINARY: backward_binary(t, v, g, g0, g1); break;
    case OP_EXPAND: *g0 = as_shape_of(t, ad_sum_broadcast(t, g, v->attr.bc.inner, v->attr.bc.nb), x); break;
    case OP_SUM_BROADCAST: *g0 = ad_expand(t, g, x->t.ndim, x->t.shape, v->attr.bc.inner); break;
    case OP_SOFTMAX: { // dx = y ⊙ (g − rowsum(g ⊙ y))
        int rows = v->t.shape[0], cols = v->t.shape[1];
        Var *s = ad_sum_broadcast(t, ad_mul(t, g, v), cols, rows);
        *g0 = ad_mul(t, v, ad_binary_bc(t, BIN_SUB, g, s, cols));
        break;
    }
    case OP_LOG_SOFTMAX: { // dx = g − exp(y) ⊙ rowsum(g)
        int rows = v->t.shape[0], cols = v->t.shape[1];
        Var *s = ad_sum_broadcast(t, g, cols, rows);
        *g0 = ad_sub(t, g, ad_binary_bc(t, BIN_MUL, ad_unary(t, UN_EXP, v), s, cols));
        break;
    }
    case OP_CONV2D: // y = conv(x, w)
        if (needs(v, 0)) *g0 = conv_bwd_data(t, g, v->in[1], &v->attr.conv);
        if (needs(v, 1)) *g1 = conv_bwd_filter(t, x, g, &v->attr.conv, v->cols);
        break;
    case OP_CONV2D_BWD_DATA: // dx = bwd_data(dy, w): linear in each
        if (needs(v, 0)) *g0 = conv_fwd(t, g, v->in[1], &v->attr.conv, NULL);
        if (needs(v, 1)) *g1 = conv_bwd_filter(t, g, x, &v->attr.conv, NULL);
        break;
    case OP_CONV2D_BWD_FILTER: // dw = bwd_filter(x, dy)
        if (needs(v, 0)) *g0 = conv_bwd_data(t, v->in[1], g, &v->attr.conv);
        if (needs(v, 1)) *g1 = conv_fwd(t, x, g, &v->attr.conv, v->cols);
        break;
    case OP_MAXPOOL: *g0 = maxpool_scatter(t, g, v->argmax, &v->attr.pool); break;
    case OP_MAXPOOL_SCATTER: *g0 = maxpool_gather(t, g, v->argmax, &v->attr.pool); break;
    case OP_MAXPOOL_GATHER: *g0 = maxpool_scatter(t, g, v->argmax, &v->attr.pool); break;
    case OP_AVGPOOL: *g0 = avgpool_bwd(t, g, &v->attr.pool); break;
    case OP_AVGPOOL_BWD: *g0 = avgpool_fwd(t, g, &v->attr.pool); break;
    case OP_RESHAPE: *g0 = ad_reshape(t, g, x->t.ndim, x->t.shape); break;
    case OP_SLICE:
        *g0 = slice_pad_op(t, g, v->attr.slice.outer, v->attr.slice.inner, v->attr.slice.dim, v->attr.slice.off,
                           v->attr.slice.len, x->t.ndim, x->t.shape);
        break;
    case OP_SLICE_PAD:
        *g0 = slice_op(t, g, v->attr.slice.outer, v->attr.slice.inner, v->attr.slice.dim, v->attr.slice.off,
                       v->attr.slice.len, x->t.ndim, x->t.shape);
        break;
    case OP_TRANSPOSE: *g0 = ad_transpose(t, g); break;
    case OP_COUNT: break;
    }
}
