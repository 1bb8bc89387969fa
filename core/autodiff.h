// Reverse-mode automatic differentiation on a tape, exact to any order.
//
// Every op's backward pass is itself written with the differentiable ops of this file,
// so the gradient of a gradient is exact (PyTorch's create_graph=True). DLG needs this:
// it differentiates ‖∇θ L(x′, y′) − g‖² with respect to x′ and y′.
//
// Memory: a Tape owns every Var created on it and their values (an arena on the tape's
// backend). tape_reset() forgets them all at once (per training step or per DLG
// closure evaluation). Leaves may view memory the tape does not own (a model's flat
// parameter buffer, an attack's dummy input).
//
// Errors: when the arena cannot grow, an op returns NULL and the tape remembers
// FP_ENOMEM; every op returns NULL when given a NULL input, so a caller checks the
// final result (or tape_status) once.
//
// Gradient semantics: ad_grad returns new Vars (assigned, not accumulated); callers
// that keep parameter gradients accumulate them into their own buffers explicitly.
#ifndef FEDPRIV_CORE_AUTODIFF_H
#define FEDPRIV_CORE_AUTODIFF_H

#include <stdint.h>

#include "core/backend.h"
#include "core/tensor.h"

typedef struct Tape Tape;
typedef struct Var Var;

typedef enum {
    OP_LEAF = 0,
    OP_MATMUL, OP_UNARY, OP_AFFINE, OP_BINARY, OP_EXPAND, OP_SUM_BROADCAST,
    OP_SOFTMAX, OP_LOG_SOFTMAX, OP_CONV2D, OP_CONV2D_BWD_DATA, OP_CONV2D_BWD_FILTER,
    OP_MAXPOOL, OP_MAXPOOL_SCATTER, OP_MAXPOOL_GATHER, OP_AVGPOOL, OP_AVGPOOL_BWD,
    OP_RESHAPE, OP_SLICE, OP_SLICE_PAD, OP_TRANSPOSE,
    OP_COUNT
} OpKind;

struct Var {
    Tensor t;               // the value (device memory of the tape's backend)
    int requires_grad;      // part of a differentiable path
    OpKind op;
    Var *in[2];
    union {
        struct { int trans_a, trans_b; } mm;
        struct { UnaryOp op; } un;
        struct { float alpha, beta; } aff;
        struct { BinaryOp op; size_t inner, nb; } bin;
        struct { size_t inner, nb; } bc;             // expand / sum_broadcast
        ConvGeom conv;
        PoolGeom pool;
        struct { int outer, inner, dim, off, len; } slice; // slice: dim is the source's; pad: the result's
    } attr;
    int32_t *argmax;        // max pooling: saved positions (tape memory)
    float *cols;            // conv2d, its weight gradient: the columns of in[0] (tape memory) or NULL
    Var *grad;              // scratch of ad_grad
    int id;                 // position on the tape (creation order = a topological order)
};

Tape *tape_create(const Backend *be);
void tape_free(Tape *t);
// Forget every Var and rewind the arena (keeps the memory for the next step).
void tape_reset(Tape *t);
const Backend *tape_backend(const Tape *t);
FpStatus tape_status(const Tape *t); // FP_OK or FP_ENOMEM
// Bytes of arena memory held (for diagnostics).
size_t tape_arena_bytes(const Tape *t);

// Raw arena memory on the tape's backend (freed by tape_reset); NULL on failure.
void *tape_alloc(Tape *t, size_t bytes);

// -- leaves ------------------------------------------------------------------
// A view of external device memory.
Var *ad_leaf(Tape *t, float *data, int ndim, const int *shape, int requires_grad);
// A new tape tensor, uninitialised / zero / filled / copied from host memory.
Var *ad_empty(Tape *t, int ndim, const int *shape);
Var *ad_full(Tape *t, int ndim, const int *shape, float value);
Var *ad_from_host(Tape *t, const float *host, int ndim, const int *shape, int requires_grad);

// -- ops (all differentiable to any order) ------------------------------------------
Var *ad_matmul(Tape *t, Var *a, Var *b, int trans_a, int trans_b); // 2-D: op(a) @ op(b)
Var *ad_unary(Tape *t, UnaryOp op, Var *x);
Var *ad_affine(Tape *t, Var *x, float alpha, float beta);          // alpha x + beta
Var *ad_scale(Tape *t, Var *x, float alpha);
// a op b with b broadcast: b has nb elements, element i of a pairs with b[(i/inner) % nb].
Var *ad_binary_bc(Tape *t, BinaryOp op, Var *a, Var *b, size_t inner);
Var *ad_add(Tape *t, Var *a, Var *b); // same shape
Var *ad_sub(Tape *t, Var *a, Var *b);
Var *ad_mul(Tape *t, Var *a, Var *b);
Var *ad_div(Tape *t, Var *a, Var *b);
// Broadcast b (nb elements) to the given shape: y[i] = b[(i/inner) % nb].
Var *ad_expand(Tape *t, Var *b, int ndim, const int *shape, size_t inner);
// y[j] = Σ_{i: (i/inner)%nb == j} x[i]; y has shape (nb).
Var *ad_sum_broadcast(Tape *t, Var *x, size_t inner, size_t nb);
Var *ad_sum(Tape *t, Var *x);   // scalar (shape (1))
Var *ad_mean(Tape *t, Var *x);  // scalar
Var *ad_softmax(Tape *t, Var *x);     // rows of a 2-D tensor
Var *ad_log_softmax(Tape *t, Var *x); // rows of a 2-D tensor
Var *ad_conv2d(Tape *t, Var *x, Var *w, int stride, int pad);
Var *ad_maxpool2d(Tape *t, Var *x, int k, int stride);
Var *ad_avgpool2d(Tape *t, Var *x, int k, int stride);
Var *ad_reshape(Tape *t, Var *x, int ndim, const int *shape); // a view; same numel
// Slice along axis `axis` (elements [off, off+len)); a copy.
Var *ad_slice(Tape *t, Var *x, int axis, int off, int len);
Var *ad_concat(Tape *t, Var *a, Var *b, int axis);
Var *ad_transpose(Tape *t, Var *x); // 2-D

// -- composite layers and losses ----------------------------------------------
Var *ad_linear(Tape *t, Var *x, Var *w, Var *b);            // x (n,in), w (out,in), b (out) or NULL
Var *ad_add_channel_bias(Tape *t, Var *x, Var *b);          // x (n,c,h,w) + b (c)
// Batch-mean cross-entropy -Σ_c y_c log softmax(z)_c with soft targets y (n, classes).
Var *ad_cross_entropy_soft(Tape *t, Var *logits, Var *target);
// Batch-mean cross-entropy with hard labels (host int32 labels, copied to the tape as one-hot).
Var *ad_cross_entropy(Tape *t, Var *logits, const int32_t *labels);
Var *ad_mse(Tape *t, Var *a, Var *b); // mean of squared differences
// Batch norm in training mode over (n, h, w) per channel (x 4-D) or over n (x 2-D);
// writes the batch mean and biased variance to mean_out/var_out (host, c floats) when non-NULL.
Var *ad_batchnorm_train(Tape *t, Var *x, Var *gamma, Var *beta, float eps, float *mean_out, float *var_out);
// Batch norm with fixed statistics (evaluation): (x - mean) / sqrt(var + eps) * gamma + beta.
Var *ad_batchnorm_eval(Tape *t, Var *x, Var *gamma, Var *beta, const float *mean, const float *var, float eps);

// -- gradients -----------------------------------------------------------------------
// Gradients of the scalar y with respect to wrt[0..n) into out[0..n) (Vars on the tape;
// zeros where y does not depend on wrt[k]). create_graph = 1 records the backward pass
// so that out[] can be differentiated again.
FpStatus ad_grad(Tape *t, Var *y, Var *const *wrt, int n, Var **out, int create_graph);

// The scalar value of a 1-element Var, read to the host.
double ad_item(Tape *t, const Var *v);
// Copy a Var's value to host memory.
void ad_to_host(Tape *t, const Var *v, float *host);

#endif
