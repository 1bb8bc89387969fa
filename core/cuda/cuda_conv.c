// 2-D convolution on the GPU with cuDNN: forward, backward-data and backward-filter,
// the three ops the autodiff tape closes over (core/ops.c). Semantics as the CPU
// backend (core/cpu/cpu_conv.c): cross-correlation, NCHW, symmetric zero padding, one
// stride for both axes; every call assigns its output (alpha 1, beta 0).
//
// A plan per geometry (ConvGeom) holds the tensor, filter and convolution descriptors
// and, per direction, the chosen algorithm and its workspace size. Plans live in a small
// cache (evicted round-robin) so a training loop pays for the choice once.
//
// Algorithm choice (why not cudnnFind*): cudnnFind* times the candidates, and timing
// noise can pick a different algorithm in another run, and different algorithms round
// differently, so results would change from run to run. We take cuDNN's heuristic
// ranking (cudnnGet*Algorithm_v7, a pure function of geometry, GPU and cuDNN version)
// and the first candidate that
//   - has status CUDNN_STATUS_SUCCESS,
//   - is CUDNN_DETERMINISTIC (no atomics: the same inputs give the same bits),
//   - was ranked for CUDNN_FMA_MATH (plain FP32), or failing any such, for
//     CUDNN_DEFAULT_MATH; either way it runs with the descriptor's math type, which is
//     always CUDNN_FMA_MATH, so no TF32 tensor-core rounding is ever allowed
//     (CUDNN_DEFAULT_MATH would allow TF32 on A100 and later),
//   - sums the products directly (GEMM, implicit GEMM, direct; BWD_DATA_ALGO_1,
//     BWD_FILTER_ALGO_1): FFT and Winograd algorithms transform the operands, and their
//     rounding grows with the tile and the values' range (on an H100, DP-SGD's clipped sum
//     for cnn-mnist at a batch of 32 was 1.5e-4 norm-relative from the CPU's while the
//     heuristic could pick them, 3.8e-7 once they were excluded), which DP-SGD's rounded
//     sums and the CPU-vs-CUDA tolerances cannot absorb,
//   - needs at most CONV_WS_LIMIT bytes of workspace and that workspace can be allocated.
// If none qualifies, or the chosen algorithm fails when run (an engine that rejects an
// alignment, say), the plan walks a fixed list of deterministic algorithms, led by the
// ones that support every geometry (IMPLICIT_GEMM forward, BWD_DATA_ALGO_1,
// BWD_FILTER_ALGO_1), and takes the first that cuDNN accepts and that runs. The
// non-deterministic ones (BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0 and _3) and the transforming
// ones (FFT, FFT_TILING, WINOGRAD, WINOGRAD_NONFUSED) are never used.
//
// Operands that are not 16-byte aligned (views into a model's flat parameter buffer at
// an odd offset) are staged through aligned buffers, so no engine ever sees them.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_internal.h"

#define CONV_CACHE_SIZE 64
#define CONV_WS_LIMIT ((size_t)1 << 30)
#define CONV_MAX_ALGOS 32

enum { DIR_FWD = 0, DIR_BWD_DATA = 1, DIR_BWD_FILTER = 2, DIR_COUNT = 3 };

typedef struct ConvPlan {
    int used;
    ConvGeom g;
    cudnnTensorDescriptor_t x, y;     // (n, c_in, h_in, w_in), (n, c_out, h_out, w_out)
    cudnnFilterDescriptor_t w;        // (c_out, c_in, kh, kw)
    cudnnConvolutionDescriptor_t conv;
    int chosen[DIR_COUNT];            // 0 until an algorithm is chosen
    int algo[DIR_COUNT];
    size_t ws[DIR_COUNT];             // workspace bytes of algo
    int next_fallback[DIR_COUNT];     // entries of fallback_list tried (0: the heuristic choice is in use)
} ConvPlan;

struct CudaConvCache {
    ConvPlan plans[CONV_CACHE_SIZE];
    int next_evict;
};

CudaConvCache *cuda_conv_cache_create(void) { return calloc(1, sizeof(CudaConvCache)); }

static void plan_destroy(ConvPlan *p) {
    if (!p->used)
        return;
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->x));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->y));
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->w));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->conv));
    memset(p, 0, sizeof *p);
}

static void plan_init(ConvPlan *p, const ConvGeom *g) {
    memset(p, 0, sizeof *p);
    p->g = *g;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    p->used = 1;
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g->n, g->c_in, g->h_in, g->w_in));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g->c_out, g->c_in, g->kh, g->kw));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, g->pad, g->pad, g->stride, g->stride, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH));
    int on, oc, oh, ow;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow));
    if (on != g->n || oc != g->c_out || oh != g->h_out || ow != g->w_out) {
        char msg[160];
        snprintf(msg, sizeof msg, "cuDNN computes output (%d,%d,%d,%d), the geometry says (%d,%d,%d,%d)", on, oc, oh,
                 ow, g->n, g->c_out, g->h_out, g->w_out);
        cuda_fatal(__FILE__, __LINE__, "inconsistent ConvGeom", msg);
    }
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g->n, g->c_out, g->h_out, g->w_out));
}

static ConvPlan *plan_get(CudaConvCache *cache, const ConvGeom *g) {
    ConvPlan *free_slot = NULL;
    for (int i = 0; i < CONV_CACHE_SIZE; i++) {
        ConvPlan *p = &cache->plans[i];
        if (p->used && memcmp(&p->g, g, sizeof *g) == 0)
            return p;
        if (!p->used && !free_slot)
            free_slot = p;
    }
    if (!free_slot) {
        free_slot = &cache->plans[cache->next_evict];
        cache->next_evict = (cache->next_evict + 1) % CONV_CACHE_SIZE;
        plan_destroy(free_slot);
    }
    plan_init(free_slot, g);
    return free_slot;
}

// Workspace size of one algorithm; 0 on success, -1 when cuDNN rejects the algorithm.
static int ws_size(CudaCtx *c, const ConvPlan *p, int dir, int algo, size_t *bytes) {
    cudnnStatus_t s;
    if (dir == DIR_FWD)
        s = cudnnGetConvolutionForwardWorkspaceSize(c->dnn, p->x, p->w, p->conv, p->y, (cudnnConvolutionFwdAlgo_t)algo,
                                                    bytes);
    else if (dir == DIR_BWD_DATA)
        s = cudnnGetConvolutionBackwardDataWorkspaceSize(c->dnn, p->w, p->y, p->conv, p->x,
                                                         (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    else
        s = cudnnGetConvolutionBackwardFilterWorkspaceSize(c->dnn, p->x, p->y, p->conv, p->w,
                                                           (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    return s == CUDNN_STATUS_SUCCESS ? 0 : -1;
}

// One heuristic candidate, whatever the direction.
typedef struct Candidate {
    int algo;
    cudnnStatus_t status;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} Candidate;

// Deterministic algorithms in the order they are tried when the heuristic choice is
// unusable, and the only ones ever used: each sums products directly; -1 ends a list.
static const int fallback_list[DIR_COUNT][5] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
     CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, -1},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, -1},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, -1},
};

static int direct_sum(int dir, int algo) {
    for (int i = 0; fallback_list[dir][i] >= 0; i++)
        if (fallback_list[dir][i] == algo)
            return 1;
    return 0;
}

static int acceptable(CudaCtx *c, ConvPlan *p, int dir, const Candidate *k, cudnnMathType_t math) {
    size_t bytes = 0;
    if (k->status != CUDNN_STATUS_SUCCESS || k->determinism != CUDNN_DETERMINISTIC || k->math != math ||
        !direct_sum(dir, k->algo))
        return 0;
    if (ws_size(c, p, dir, k->algo, &bytes) != 0 || bytes > CONV_WS_LIMIT)
        return 0;
    if (bytes && !cuda_workspace(c, bytes))
        return 0;
    p->algo[dir] = k->algo;
    p->ws[dir] = bytes;
    return 1;
}

// Moves the plan to the next usable algorithm of fallback_list; 0 when the list is spent.
static int use_fallback(CudaCtx *c, ConvPlan *p, int dir) {
    while (fallback_list[dir][p->next_fallback[dir]] >= 0) {
        int algo = fallback_list[dir][p->next_fallback[dir]++];
        size_t bytes = 0;
        if (ws_size(c, p, dir, algo, &bytes) != 0 || bytes > CONV_WS_LIMIT || (bytes && !cuda_workspace(c, bytes)))
            continue;
        p->algo[dir] = algo;
        p->ws[dir] = bytes;
        p->chosen[dir] = 1;
        return 1;
    }
    return 0;
}

#define COPY_CANDIDATES(perf, got, out)                                                                    \
    for (int i_ = 0; i_ < (got) && i_ < CONV_MAX_ALGOS; i_++)                                             \
    (out)[i_] = (Candidate){(int)(perf)[i_].algo, (perf)[i_].status, (perf)[i_].determinism, (perf)[i_].mathType}

static void choose(CudaCtx *c, ConvPlan *p, int dir) {
    Candidate cand[CONV_MAX_ALGOS];
    int max = 0, got = 0;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CONV_MAX_ALGOS];
        if (cudnnGetConvolutionForwardAlgorithmMaxCount(c->dnn, &max) != CUDNN_STATUS_SUCCESS ||
            cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, p->x, p->w, p->conv, p->y,
                                                   max < CONV_MAX_ALGOS ? max : CONV_MAX_ALGOS, &got,
                                                   perf) != CUDNN_STATUS_SUCCESS)
            got = 0;
        COPY_CANDIDATES(perf, got, cand);
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_MAX_ALGOS];
        if (cudnnGetConvolutionBackwardDataAlgorithmMaxCount(c->dnn, &max) != CUDNN_STATUS_SUCCESS ||
            cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, p->w, p->y, p->conv, p->x,
                                                        max < CONV_MAX_ALGOS ? max : CONV_MAX_ALGOS, &got,
                                                        perf) != CUDNN_STATUS_SUCCESS)
            got = 0;
        COPY_CANDIDATES(perf, got, cand);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_MAX_ALGOS];
        if (cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(c->dnn, &max) != CUDNN_STATUS_SUCCESS ||
            cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->dnn, p->x, p->y, p->conv, p->w,
                                                          max < CONV_MAX_ALGOS ? max : CONV_MAX_ALGOS, &got,
                                                          perf) != CUDNN_STATUS_SUCCESS)
            got = 0;
        COPY_CANDIDATES(perf, got, cand);
    }
    if (got > CONV_MAX_ALGOS)
        got = CONV_MAX_ALGOS;
    // Candidates cuDNN ranked for FMA math first; then any it ranked for default math,
    // which still run with the descriptor's FMA math (never TF32).
    for (int i = 0; i < got; i++)
        if (acceptable(c, p, dir, &cand[i], CUDNN_FMA_MATH)) {
            p->chosen[dir] = 1;
            return;
        }
    for (int i = 0; i < got; i++)
        if (acceptable(c, p, dir, &cand[i], CUDNN_DEFAULT_MATH)) {
            p->chosen[dir] = 1;
            return;
        }
    if (!use_fallback(c, p, dir))
        cuda_fatal(__FILE__, __LINE__, "convolution algorithm choice",
                   "cuDNN accepts no deterministic FP32 algorithm for this geometry");
}

static cudnnStatus_t run(CudaCtx *c, ConvPlan *p, int dir, const void *in0, const void *in1, void *out) {
    const float one = 1.0f, zero = 0.0f;
    void *ws = NULL;
    if (p->ws[dir] && !(ws = cuda_workspace(c, p->ws[dir])))
        cuda_fatal(__FILE__, __LINE__, "convolution workspace", "out of device memory");
    switch (dir) {
    case DIR_FWD: // y = conv(x = in0, w = in1)
        return cudnnConvolutionForward(c->dnn, &one, p->x, in0, p->w, in1, p->conv,
                                       (cudnnConvolutionFwdAlgo_t)p->algo[dir], ws, p->ws[dir], &zero, p->y, out);
    case DIR_BWD_DATA: // dx = bwd_data(w = in0, dy = in1)
        return cudnnConvolutionBackwardData(c->dnn, &one, p->w, in0, p->y, in1, p->conv,
                                            (cudnnConvolutionBwdDataAlgo_t)p->algo[dir], ws, p->ws[dir], &zero, p->x,
                                            out);
    default: // dw = bwd_filter(x = in0, dy = in1)
        return cudnnConvolutionBackwardFilter(c->dnn, &one, p->x, in0, p->y, in1, p->conv,
                                              (cudnnConvolutionBwdFilterAlgo_t)p->algo[dir], ws, p->ws[dir], &zero,
                                              p->w, out);
    }
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// Copies a misaligned input into staging slot `slot`; returns the pointer to use.
static const void *stage_in(CudaCtx *c, int slot, const void *p, size_t bytes) {
    if (aligned16(p))
        return p;
    void *s = cuda_staging(c, slot, bytes);
    if (!s)
        cuda_fatal(__FILE__, __LINE__, "convolution operand staging", "out of device memory");
    CUDA_CHECK(cudaMemcpy(s, p, bytes, cudaMemcpyDeviceToDevice));
    return s;
}

static void conv_call(const ConvGeom *g, int dir, const float *in0, size_t n0, const float *in1, size_t n1,
                      float *out, size_t n_out) {
    if (g->n <= 0 || g->c_in <= 0 || g->c_out <= 0 || g->h_out <= 0 || g->w_out <= 0)
        return;
    CudaCtx *c = cuda_ctx();
    pthread_mutex_lock(&c->lock);
    ConvPlan *p = plan_get(c->conv, g);
    if (!p->chosen[dir])
        choose(c, p, dir);
    const void *a = stage_in(c, 0, in0, n0 * sizeof(float));
    const void *b = stage_in(c, 1, in1, n1 * sizeof(float));
    void *o = out;
    if (!aligned16(out) && !(o = cuda_staging(c, 2, n_out * sizeof(float))))
        cuda_fatal(__FILE__, __LINE__, "convolution output staging", "out of device memory");
    cudnnStatus_t s = run(c, p, dir, a, b, o);
    while (s != CUDNN_STATUS_SUCCESS && use_fallback(c, p, dir)) // an engine that would not run
        s = run(c, p, dir, a, b, o);
    if (s != CUDNN_STATUS_SUCCESS)
        cuda_fatal(__FILE__, __LINE__,
                   dir == DIR_FWD ? "cudnnConvolutionForward"
                                  : dir == DIR_BWD_DATA ? "cudnnConvolutionBackwardData" : "cudnnConvolutionBackwardFilter",
                   cudnnGetErrorString(s));
    if (o != out)
        CUDA_CHECK(cudaMemcpy(out, o, n_out * sizeof(float), cudaMemcpyDeviceToDevice));
    pthread_mutex_unlock(&c->lock);
}

static size_t x_count(const ConvGeom *g) { return (size_t)g->n * g->c_in * g->h_in * g->w_in; }
static size_t w_count(const ConvGeom *g) { return (size_t)g->c_out * g->c_in * g->kh * g->kw; }
static size_t y_count(const ConvGeom *g) { return (size_t)g->n * g->c_out * g->h_out * g->w_out; }

// cuDNN builds no columns that could be kept (conv2d_columns_size is NULL): cols is unused.
void cuda_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y, float *cols, int cols_filled) {
    (void)cols;
    (void)cols_filled;
    conv_call(g, DIR_FWD, x, x_count(g), w, w_count(g), y, y_count(g));
}

void cuda_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx) {
    conv_call(g, DIR_BWD_DATA, w, w_count(g), dy, y_count(g), dx, x_count(g));
}

void cuda_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw, float *cols,
                                 int cols_filled) {
    (void)cols;
    (void)cols_filled;
    conv_call(g, DIR_BWD_FILTER, x, x_count(g), dy, y_count(g), dw, w_count(g));
}

// One cuDNN weight gradient per example (batch 1).
void cuda_conv2d_backward_filter_per_example(const ConvGeom *g, const float *x, const float *dy, float *dw) {
    ConvGeom g1 = *g;
    g1.n = 1;
    size_t xs = x_count(&g1), ys = y_count(&g1), ws = w_count(&g1);
    for (int i = 0; i < g->n; i++)
        conv_call(&g1, DIR_BWD_FILTER, x + (size_t)i * xs, xs, dy + (size_t)i * ys, ys, dw + (size_t)i * ws, ws);
}

size_t cuda_conv_describe_plans(char *buf, size_t n) {
    static const char *dir_name[DIR_COUNT] = {"fwd", "bwd_data", "bwd_filter"};
    size_t used = 0;
    if (n)
        buf[0] = '\0';
    if (!cuda_backend_get(NULL))
        return 0;
    CudaCtx *c = cuda_ctx();
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < CONV_CACHE_SIZE; i++) {
        const ConvPlan *p = &c->conv->plans[i];
        if (!p->used)
            continue;
        const ConvGeom *g = &p->g;
        char line[256];
        int len = snprintf(line, sizeof line, "x(%d,%d,%d,%d) w(%d,%d,%d,%d) s%d p%d:", g->n, g->c_in, g->h_in, g->w_in,
                           g->c_out, g->c_in, g->kh, g->kw, g->stride, g->pad);
        for (int d = 0; d < DIR_COUNT; d++)
            if (p->chosen[d] && len > 0 && (size_t)len < sizeof line)
                len += snprintf(line + len, sizeof line - len, " %s=%d%s ws=%zu", dir_name[d], p->algo[d],
                                p->next_fallback[d] > 0 ? "(fallback)" : "", p->ws[d]);
        if (used + strlen(line) + 2 < n) {
            used += (size_t)snprintf(buf + used, n - used, "%s\n", line);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return used;
}
