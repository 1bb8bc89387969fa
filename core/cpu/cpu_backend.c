// The CPU backend: the reference implementation of every kernel in core/backend.h.
// Plain loops (the compiler vectorises them) and OpenBLAS for GEMM. This file holds
// memory, elementwise, reductions and optimiser steps; convolution and pooling are in
// cpu_conv.c, and the convolutions run through oneDNN (cpu_conv_dnnl.c) in builds that
// found it (FEDPRIV_HAVE_DNNL; `make DNNL=0` keeps the im2col ones). This file and the
// Makefile are the only places that know.
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/cpu/cpu_kernels.h"

static void *cpu_alloc(size_t bytes) {
    // 64-byte alignment for vector loads; aligned_alloc needs a multiple of the alignment.
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

static void cpu_free(void *p) { free(p); }

static void cpu_memcpy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src)
        memmove(dst, src, bytes);
}

static void cpu_fill(float *x, size_t n, float v) {
    if (v == 0.0f) {
        memset(x, 0, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

static void cpu_sync(void) {}

// c (m×n) = alpha op(a) op(b) + beta c, row-major.
static void cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, const float *b,
                     float beta, float *c) {
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        for (size_t i = 0; i < (size_t)m * n; i++)
            c[i] = beta == 0.0f ? 0.0f : beta * c[i];
        return;
    }
    int lda = trans_a ? m : k, ldb = trans_b ? k : n;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, a, lda, b, ldb, beta, c, n);
}

static void cpu_transpose(int rows, int cols, const float *x, float *y) {
    // x is (rows, cols), y is (cols, rows); blocked for cache reuse.
    const int B = 32;
    for (int i0 = 0; i0 < rows; i0 += B)
        for (int j0 = 0; j0 < cols; j0 += B)
            for (int i = i0; i < rows && i < i0 + B; i++)
                for (int j = j0; j < cols && j < j0 + B; j++)
                    y[(size_t)j * rows + i] = x[(size_t)i * cols + j];
}

static void cpu_unary(UnaryOp op, size_t n, const float *x, float *y) {
    switch (op) {
    case UN_NEG: for (size_t i = 0; i < n; i++) y[i] = -x[i]; break;
    case UN_EXP: for (size_t i = 0; i < n; i++) y[i] = expf(x[i]); break;
    case UN_LOG: for (size_t i = 0; i < n; i++) y[i] = logf(x[i]); break;
    case UN_SIGMOID: for (size_t i = 0; i < n; i++) y[i] = cpu_sigmoid(x[i]); break;
    case UN_TANH: for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]); break;
    case UN_RELU: for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f; break;
    case UN_STEP: for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? 1.0f : 0.0f; break;
    case UN_SQUARE: for (size_t i = 0; i < n; i++) y[i] = x[i] * x[i]; break;
    case UN_SQRT: for (size_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); break;
    case UN_RECIP: for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; break;
    case UN_ABS: for (size_t i = 0; i < n; i++) y[i] = fabsf(x[i]); break;
    case UN_SIGN: for (size_t i = 0; i < n; i++) y[i] = (float)((x[i] > 0.0f) - (x[i] < 0.0f)); break;
    case UN_COUNT: break;
    }
}

static void cpu_affine(size_t n, const float *x, float alpha, float beta, float *y) {
    for (size_t i = 0; i < n; i++)
        y[i] = alpha * x[i] + beta;
}

#define BINARY_LOOP(EXPR)                                                                                  \
    do {                                                                                                   \
        if (nb == n && inner == 1) {                                                                       \
            for (size_t i = 0; i < n; i++) {                                                               \
                float av = a[i], bv = b[i];                                                                \
                y[i] = (EXPR);                                                                             \
            }                                                                                              \
        } else if (inner == 1 && n % nb == 0) { /* row broadcast: b along each row of (n/nb, nb) */        \
            for (size_t r = 0; r < n; r += nb)                                                             \
                for (size_t j = 0; j < nb; j++) {                                                          \
                    float av = a[r + j], bv = b[j];                                                        \
                    y[r + j] = (EXPR);                                                                     \
                }                                                                                          \
        } else {                                                                                           \
            for (size_t i0 = 0, j = 0; i0 < n; i0 += inner, j = (j + 1 == nb) ? 0 : j + 1) {               \
                float bv = b[j];                                                                           \
                size_t end = i0 + inner < n ? i0 + inner : n;                                              \
                for (size_t i = i0; i < end; i++) {                                                        \
                    float av = a[i];                                                                       \
                    y[i] = (EXPR);                                                                         \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
    } while (0)

static void cpu_binary(BinaryOp op, size_t n, const float *a, const float *b, size_t inner, size_t nb, float *y) {
    switch (op) {
    case BIN_ADD: BINARY_LOOP(av + bv); break;
    case BIN_SUB: BINARY_LOOP(av - bv); break;
    case BIN_MUL: BINARY_LOOP(av * bv); break;
    case BIN_DIV: BINARY_LOOP(av / bv); break;
    case BIN_SIGMOID_GRAD: BINARY_LOOP(av * (bv * (1.0f - bv))); break;
    case BIN_COUNT: break;
    }
}

static void cpu_expand(size_t n, const float *b, size_t inner, size_t nb, float *y) {
    for (size_t i0 = 0, j = 0; i0 < n; i0 += inner, j = (j + 1 == nb) ? 0 : j + 1) {
        size_t end = i0 + inner < n ? i0 + inner : n;
        for (size_t i = i0; i < end; i++)
            y[i] = b[j];
    }
}

// Outputs per block of the column sums: the accumulators live on the stack, since a
// backend op has no way to report a failed allocation.
#define SUM_BLOCK 512

static void cpu_sum_broadcast(size_t n, const float *x, size_t inner, size_t nb, float *y) {
    // Accumulate in double per output so large reductions stay accurate.
    if (inner == 1 && n % nb == 0) { // column sums of (n/nb, nb): rows in order, vectorised
        double acc[SUM_BLOCK];
        for (size_t j0 = 0; j0 < nb; j0 += SUM_BLOCK) {
            size_t w = nb - j0 < SUM_BLOCK ? nb - j0 : SUM_BLOCK;
            for (size_t j = 0; j < w; j++)
                acc[j] = 0;
            for (size_t r = j0; r < n; r += nb)
                for (size_t j = 0; j < w; j++)
                    acc[j] += x[r + j];
            for (size_t j = 0; j < w; j++)
                y[j0 + j] = (float)acc[j];
        }
        return;
    }
    // Output j sums the runs of `inner` elements at i0 = (k nb + j) inner, k = 0, 1, ...
    for (size_t j = 0; j < nb; j++) {
        double acc = 0;
        for (size_t i0 = j * inner; i0 < n; i0 += nb * inner) {
            size_t end = i0 + inner < n ? i0 + inner : n;
            float s = 0.0f;
            for (size_t i = i0; i < end; i++)
                s += x[i];
            acc += s;
        }
        y[j] = (float)acc;
    }
}

static void cpu_softmax(int rows, int cols, const float *x, float *y) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        float m = xr[0];
        for (int j = 1; j < cols; j++)
            m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int j = 0; j < cols; j++) {
            yr[j] = expf(xr[j] - m);
            s += yr[j];
        }
        float inv = 1.0f / s;
        for (int j = 0; j < cols; j++)
            yr[j] *= inv;
    }
}

static void cpu_log_softmax(int rows, int cols, const float *x, float *y) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        float m = xr[0];
        for (int j = 1; j < cols; j++)
            m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int j = 0; j < cols; j++)
            s += expf(xr[j] - m);
        float lse = m + logf(s);
        for (int j = 0; j < cols; j++)
            yr[j] = xr[j] - lse;
    }
}

static void cpu_slice_copy(int outer, int inner, int src_dim, int src_off, int dst_dim, int dst_off, int len,
                           const float *src, float *dst) {
    size_t block = (size_t)len * inner;
    for (int o = 0; o < outer; o++)
        memcpy(dst + ((size_t)o * dst_dim + dst_off) * inner, src + ((size_t)o * src_dim + src_off) * inner,
               block * sizeof(float));
}

static double cpu_sum(size_t n, const float *x) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s;
}

static double cpu_dot(size_t n, const float *x, const float *y) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * y[i];
    return s;
}

static void cpu_axpy(size_t n, float alpha, const float *x, float *y) {
    for (size_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

static void cpu_sgd_step(size_t n, float *w, const float *g, float *v, float lr, float momentum,
                         float weight_decay) {
    if (momentum == 0.0f) {
        for (size_t i = 0; i < n; i++)
            w[i] -= lr * (g[i] + weight_decay * w[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + weight_decay * w[i];
        v[i] = momentum * v[i] + d;
        w[i] -= lr * v[i];
    }
}

static int cpu_all_finite(size_t n, const float *x) {
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= isfinite(x[i]) != 0;
    return ok;
}

static void cpu_set_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

static const Backend cpu_backend = {
    .name = "cpu",
    .device = DEVICE_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .fill = cpu_fill,
    .sync = cpu_sync,
    .gemm = cpu_gemm,
    .transpose = cpu_transpose,
    .unary = cpu_unary,
    .affine = cpu_affine,
    .binary = cpu_binary,
    .expand = cpu_expand,
    .sum_broadcast = cpu_sum_broadcast,
    .softmax = cpu_softmax,
    .log_softmax = cpu_log_softmax,
#ifdef FEDPRIV_HAVE_DNNL
    // oneDNN (cpu_conv_dnnl.c), which keeps no columns; im2col for what it does not run
    .conv2d_forward = dnnl_conv2d_forward,
    .conv2d_backward_data = dnnl_conv2d_backward_data,
    .conv2d_backward_filter = dnnl_conv2d_backward_filter,
    .conv2d_backward_filter_per_example = dnnl_conv2d_backward_filter_per_example,
    .conv2d_columns_size = NULL,
#else
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward_data = cpu_conv2d_backward_data,
    .conv2d_backward_filter = cpu_conv2d_backward_filter,
    .conv2d_backward_filter_per_example = cpu_conv2d_backward_filter_per_example,
    .conv2d_columns_size = cpu_conv2d_columns_size,
#endif
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_scatter = cpu_maxpool_scatter,
    .maxpool_gather = cpu_maxpool_gather,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .slice_copy = cpu_slice_copy,
    .sum = cpu_sum,
    .dot = cpu_dot,
    .axpy = cpu_axpy,
    .sgd_step = cpu_sgd_step,
    .all_finite = cpu_all_finite,
    .set_threads = cpu_set_threads,
};

const Backend *backend_cpu(void) { return &cpu_backend; }

const char *backend_cpu_blas_kernels(void) {
    const char *name = openblas_get_corename();
    return name && *name ? name : "unknown";
}
