// The compute backend: one small vtable of memory functions and kernels on raw
// device pointers. The CPU backend (core/cpu/) is the reference and the oracle: plain
// loops, OpenBLAS for GEMM-shaped work. The CUDA backend (core/cuda/) implements the
// same slots with cuBLAS, cuDNN and small kernels, and is tested against the CPU one.
// `#ifdef FEDPRIV_HAVE_CUDA` appears only in core/backend.c.
//
// Conventions: row-major; images NCHW; every kernel writes (=) its output unless a
// slot says it accumulates (+=). Pointers are device pointers of this backend.
#ifndef FEDPRIV_CORE_BACKEND_H
#define FEDPRIV_CORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum { DEVICE_CPU = 0, DEVICE_CUDA = 1 } DeviceKind;

typedef enum {
    UN_NEG, UN_EXP, UN_LOG, UN_SIGMOID, UN_TANH, UN_RELU,
    UN_STEP,      // 1 where x > 0, else 0 (the derivative of ReLU)
    UN_SQUARE, UN_SQRT, UN_RECIP, UN_ABS, UN_SIGN,
    UN_COUNT
} UnaryOp;

typedef enum {
    BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV,
    BIN_SIGMOID_GRAD, // a·b(1 − b): the sigmoid's backward, a = dy, b = σ(x), in one pass
    BIN_COUNT
} BinaryOp;

// 2-D convolution: x (n, c_in, h_in, w_in), w (c_out, c_in, kh, kw), y (n, c_out, h_out, w_out),
// h_out = (h_in + 2 pad - kh) / stride + 1.
typedef struct ConvGeom {
    int n, c_in, h_in, w_in;
    int c_out, kh, kw, stride, pad;
    int h_out, w_out;
} ConvGeom;

// 2-D pooling: x (n, c, h_in, w_in), window k×k, stride, no padding.
typedef struct PoolGeom {
    int n, c, h_in, w_in, k, stride, h_out, w_out;
} PoolGeom;

typedef struct Backend {
    const char *name;
    DeviceKind device;

    // -- memory ------------------------------------------------------------
    void *(*alloc)(size_t bytes);                                  // NULL on failure
    void (*free)(void *p);
    void (*upload)(void *dst, const void *host_src, size_t bytes); // host -> device
    void (*download)(void *host_dst, const void *src, size_t bytes); // device -> host
    void (*copy)(void *dst, const void *src, size_t bytes);        // device -> device
    void (*fill)(float *x, size_t n, float v);
    void (*sync)(void);

    // -- dense algebra -------------------------------------------------------
    // c = alpha * op(a) @ op(b) + beta * c; op(a) is m×k, op(b) is k×n, c is m×n.
    void (*gemm)(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, const float *b,
                 float beta, float *c);
    // y = x^T for x (rows, cols).
    void (*transpose)(int rows, int cols, const float *x, float *y);

    // -- elementwise -----------------------------------------------------------
    void (*unary)(UnaryOp op, size_t n, const float *x, float *y);
    void (*affine)(size_t n, const float *x, float alpha, float beta, float *y); // y = alpha x + beta
    // y[i] = a[i] op b[(i / inner) % nb]   (nb == n, inner == 1: plain elementwise)
    void (*binary)(BinaryOp op, size_t n, const float *a, const float *b, size_t inner, size_t nb, float *y);
    // y[i] = b[(i / inner) % nb]  (broadcast b to n elements)
    void (*expand)(size_t n, const float *b, size_t inner, size_t nb, float *y);
    // y[j] = sum over i < n with (i / inner) % nb == j of x[i]   (the adjoint of expand)
    void (*sum_broadcast)(size_t n, const float *x, size_t inner, size_t nb, float *y);

    // -- neural-net kernels ----------------------------------------------------
    void (*softmax)(int rows, int cols, const float *x, float *y);     // per row
    void (*log_softmax)(int rows, int cols, const float *x, float *y); // per row, stable
    // forward and backward_filter read x through its columns (im2col) where the backend
    // builds them. cols: NULL, or conv2d_columns_size(g) floats that the caller keeps for
    // the later calls that read the same x with the same geometry (the tape: forward,
    // weight gradient and its double-backward); cols_filled 0 builds them there, 1 reads
    // them. Either way the result is bit-identical to cols NULL.
    void (*conv2d_forward)(const ConvGeom *g, const float *x, const float *w, float *y, float *cols,
                           int cols_filled);
    void (*conv2d_backward_data)(const ConvGeom *g, const float *dy, const float *w, float *dx);
    void (*conv2d_backward_filter)(const ConvGeom *g, const float *x, const float *dy, float *dw, float *cols,
                                   int cols_filled);
    // Per-example weight gradients (DP-SGD): row i of dw (g->n rows of c_out·c_in·kh·kw)
    // is example i's alone, written (=).
    void (*conv2d_backward_filter_per_example)(const ConvGeom *g, const float *x, const float *dy, float *dw);
    // Optional (NULL: the backend keeps no columns): floats of the columns of x for g, 0
    // where it keeps none for this geometry (too large to hold).
    size_t (*conv2d_columns_size)(const ConvGeom *g);
    void (*maxpool_forward)(const PoolGeom *g, const float *x, float *y, int32_t *argmax);
    void (*maxpool_scatter)(const PoolGeom *g, const float *dy, const int32_t *argmax, float *dx); // dx = 0 then +=
    void (*maxpool_gather)(const PoolGeom *g, const float *x, const int32_t *argmax, float *y);
    void (*avgpool_forward)(const PoolGeom *g, const float *x, float *y);
    void (*avgpool_backward)(const PoolGeom *g, const float *dy, float *dx);
    // Views as (outer, dim, inner): dst[o, dst_off + j, i] = src[o, src_off + j, i] for j < len.
    void (*slice_copy)(int outer, int inner, int src_dim, int src_off, int dst_dim, int dst_off, int len,
                       const float *src, float *dst);

    // -- reductions to the host and optimiser steps -------------------------
    double (*sum)(size_t n, const float *x);
    double (*dot)(size_t n, const float *x, const float *y);
    void (*axpy)(size_t n, float alpha, const float *x, float *y); // y += alpha x
    // v = momentum v + (g + wd w); w -= lr v   (PyTorch SGD semantics; momentum 0 → plain SGD)
    void (*sgd_step)(size_t n, float *w, const float *g, float *v, float lr, float momentum, float weight_decay);
    int (*all_finite)(size_t n, const float *x);

    // Optional: per-thread BLAS/kernel threads (NULL when not applicable).
    void (*set_threads)(int n);
} Backend;

const Backend *backend_cpu(void);
// OpenBLAS's name of the kernels the CPU backend's GEMMs run ("Haswell", "SkylakeX", ...):
// its own choice for this CPU, or the one OPENBLAS_CORETYPE names. Results are
// bit-identical between runs on the same kernels; other kernels sum in another order.
const char *backend_cpu_blas_kernels(void);
// The CUDA backend, or NULL with err filled when it is not built or no GPU is present.
const Backend *backend_cuda(FpError *err);
// "cpu" or "cuda".
const Backend *backend_by_name(const char *name, FpError *err);

#endif
