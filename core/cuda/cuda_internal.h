// Internals of the CUDA backend shared by its C and CUDA translation units (not a
// public API). Included from C (cuda_backend.c, cuda_gemm.c, cuda_conv.c, compiled by
// gcc) and from C++ (the *.cu kernel files, compiled by nvcc).
//
// Process-wide state. The house rule is "no mutable globals"; the one exception is the
// device state below (CUDA context, cuBLAS and cuDNN handles, the convolution plan cache,
// a workspace and a scratch buffer). It is created once, lazily, under pthread_once
// (cuda_backend.c) and never torn down before exit, because the handles are per process
// and per device anyway. Every use of a handle, the workspace, the scratch buffer or the
// plan cache happens under ctx->lock, so client threads may share the backend.
//
// Streams: everything (kernels, cuBLAS, cuDNN, copies) runs on the legacy default
// stream, so device work is ordered exactly as the host issued it and memory handed back
// to the scratch/workspace buffers is never reused while still in flight.
//
// Errors: the vtable has no error channel (its slots return void). Allocation failure
// is reported the vtable's way (alloc returns NULL; a convolution falls back to an
// algorithm needing less workspace). Any other CUDA, cuBLAS or cuDNN failure means the
// device state is unusable or a caller passed a geometry the backend cannot run:
// cuda_fatal prints the failing statement with file:line and aborts, rather than let a
// run continue on garbage (see docs/cuda.md).
#ifndef FEDPRIV_CORE_CUDA_INTERNAL_H
#define FEDPRIV_CORE_CUDA_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/backend.h"

typedef struct CudaConvCache CudaConvCache; // cuda_conv.c

// The cuBLAS entry points fedpriv uses, opened at initialisation (cuda_blas.c says why).
typedef struct CudaBlasApi {
    void *library;
    cublasStatus_t (*create)(cublasHandle_t *handle);
    cublasStatus_t (*set_math_mode)(cublasHandle_t handle, cublasMath_t mode);
    const char *(*status_string)(cublasStatus_t status);
    cublasStatus_t (*sgemm)(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const float *alpha, const float *a, int lda, const float *b, int ldb,
                            const float *beta, float *c, int ldc);
} CudaBlasApi;

// Opens cuBLAS and looks up CudaBlasApi's entry points. FP_EBACKEND with dlerror's reason
// when the library or a symbol is missing. Needs no GPU.
FpStatus cuda_blas_load(CudaBlasApi *api, FpError *err);
// The library's name as dlopen is given it ("libcublas.so.<major>").
const char *cuda_blas_soname(void);

typedef struct CudaCtx {
    int device;
    char device_name[256];
    int cc_major, cc_minor;      // compute capability
    CudaBlasApi cublas;          // the library's entry points (cuda_blas.c)
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    pthread_mutex_t lock;        // guards everything below and the use of blas / dnn
    void *workspace;             // cuDNN workspace (grow-only)
    size_t workspace_bytes;
    void *scratch;               // reduction partials and small results (grow-only)
    size_t scratch_bytes;
    void *staging[3];            // aligned copies of misaligned convolution operands
    size_t staging_bytes[3];
    CudaConvCache *conv;
} CudaCtx;

// The initialised state; only valid after cuda_backend_get() returned non-NULL.
CudaCtx *cuda_ctx(void);

// Prints "fedpriv: CUDA backend failure at file:line: what: detail" and aborts.
void cuda_fatal(const char *file, int line, const char *what, const char *detail) __attribute__((noreturn));

// Grow-only device buffers (call with ctx->lock held). Return NULL when cudaMalloc fails;
// the old buffer is kept then. Growing synchronises the device before freeing the old one.
void *cuda_scratch(CudaCtx *c, size_t bytes);
void *cuda_workspace(CudaCtx *c, size_t bytes);
void *cuda_staging(CudaCtx *c, int slot, size_t bytes);

#define CUDA_CHECK(stmt)                                                                                   \
    do {                                                                                                   \
        cudaError_t cuda_check_e_ = (stmt);                                                                \
        if (cuda_check_e_ != cudaSuccess)                                                                  \
            cuda_fatal(__FILE__, __LINE__, #stmt, cudaGetErrorString(cuda_check_e_));                      \
    } while (0)

// After a kernel launch: launch-configuration errors now, execution errors surface at
// the next synchronising call (download, sum, sync), which is checked too.
#define CUDA_CHECK_LAUNCH(name)                                                                            \
    do {                                                                                                   \
        cudaError_t cuda_launch_e_ = cudaGetLastError();                                                   \
        if (cuda_launch_e_ != cudaSuccess)                                                                 \
            cuda_fatal(__FILE__, __LINE__, "launch of " name, cudaGetErrorString(cuda_launch_e_));          \
    } while (0)

#define CUBLAS_CHECK(stmt)                                                                                 \
    do {                                                                                                   \
        cublasStatus_t cublas_check_s_ = (stmt);                                                           \
        if (cublas_check_s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            cuda_fatal(__FILE__, __LINE__, #stmt, cuda_ctx()->cublas.status_string(cublas_check_s_));    \
    } while (0)

#define CUDNN_CHECK(stmt)                                                                                  \
    do {                                                                                                   \
        cudnnStatus_t cudnn_check_s_ = (stmt);                                                             \
        if (cudnn_check_s_ != CUDNN_STATUS_SUCCESS)                                                        \
            cuda_fatal(__FILE__, __LINE__, #stmt, cudnnGetErrorString(cudnn_check_s_));                    \
    } while (0)

// Runs a tiny kernel so that a device without a kernel image for this build (compute
// capability below 8.0) is found at initialisation. cudaSuccess or the launch error.
cudaError_t cuda_probe_kernels(void);

// -- kernels (cuda_elementwise.cu) ---------------------------------------------------
void cuda_fill(float *x, size_t n, float v);
void cuda_transpose(int rows, int cols, const float *x, float *y);
void cuda_unary(UnaryOp op, size_t n, const float *x, float *y);
void cuda_affine(size_t n, const float *x, float alpha, float beta, float *y);
void cuda_binary(BinaryOp op, size_t n, const float *a, const float *b, size_t inner, size_t nb, float *y);
void cuda_expand(size_t n, const float *b, size_t inner, size_t nb, float *y);
void cuda_slice_copy(int outer, int inner, int src_dim, int src_off, int dst_dim, int dst_off, int len,
                     const float *src, float *dst);
void cuda_axpy(size_t n, float alpha, const float *x, float *y);
void cuda_sgd_step(size_t n, float *w, const float *g, float *v, float lr, float momentum, float weight_decay);
void cuda_scale_inplace(size_t n, float beta, float *c); // c = beta c (c = 0 when beta == 0)

// -- softmax (cuda_softmax.cu) -------------------------------------------------------
void cuda_softmax(int rows, int cols, const float *x, float *y);
void cuda_log_softmax(int rows, int cols, const float *x, float *y);

// -- reductions (cuda_reduce.cu) -------------------------------------------------------
void cuda_sum_broadcast(size_t n, const float *x, size_t inner, size_t nb, float *y);
double cuda_sum(size_t n, const float *x);
double cuda_dot(size_t n, const float *x, const float *y);
int cuda_all_finite(size_t n, const float *x);

// -- pooling (cuda_pool.cu) ----------------------------------------------------------
void cuda_maxpool_forward(const PoolGeom *g, const float *x, float *y, int32_t *argmax);
void cuda_maxpool_scatter(const PoolGeom *g, const float *dy, const int32_t *argmax, float *dx);
void cuda_maxpool_gather(const PoolGeom *g, const float *x, const int32_t *argmax, float *y);
void cuda_avgpool_forward(const PoolGeom *g, const float *x, float *y);
void cuda_avgpool_backward(const PoolGeom *g, const float *dy, float *dx);

// -- cuBLAS (cuda_gemm.c) and cuDNN (cuda_conv.c) -------------------------------------
void cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, const float *b,
               float beta, float *c);
void cuda_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y, float *cols, int cols_filled);
void cuda_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx);
void cuda_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw, float *cols,
                                 int cols_filled);
void cuda_conv2d_backward_filter_per_example(const ConvGeom *g, const float *x, const float *dy, float *dw);
CudaConvCache *cuda_conv_cache_create(void);

#ifdef __cplusplus
}
#endif

#endif
