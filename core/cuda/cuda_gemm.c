// GEMM on the GPU with cuBLAS, row-major as the vtable defines it.
//
// cuBLAS is column-major. A row-major (r×c) matrix with leading dimension c is, read
// column-major, its transpose (c×r) with the same leading dimension. So the row-major
// product C = op(A) op(B) (m×n) is computed as the column-major product
// Cᵀ = op(B)ᵀ op(A)ᵀ (n×m): swap the operands, keep each one's transpose flag and
// leading dimension (lda = trans_a ? m : k, ldb = trans_b ? k : n, ldc = n, exactly as
// core/cpu/cpu_backend.c passes them to cblas_sgemm with CblasRowMajor).
//
// Math: the handle is in CUBLAS_DEFAULT_MATH (set at initialisation), which for SGEMM
// means FP32 FMA arithmetic, no TF32 tensor cores. cuBLAS results are bit-wise
// reproducible run to run on one GPU model with one stream (cuBLAS documentation,
// "Results reproducibility"); everything here runs on the legacy default stream.
#include "core/cuda/cuda_internal.h"

void cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, const float *b,
               float beta, float *c) {
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) { // an empty sum: c = beta c (the CPU backend's rule; cuBLAS wants k >= 1 for the ld checks)
        cuda_scale_inplace((size_t)m * n, beta, c);
        return;
    }
    int lda = trans_a ? m : k, ldb = trans_b ? k : n;
    CudaCtx *ctx = cuda_ctx();
    pthread_mutex_lock(&ctx->lock);
    CUBLAS_CHECK(ctx->cublas.sgemm(ctx->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   n, m, k, &alpha, b, ldb, a, lda, &beta, c, n));
    pthread_mutex_unlock(&ctx->lock);
}
