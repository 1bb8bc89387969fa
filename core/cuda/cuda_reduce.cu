// Reductions on the GPU: sum and dot to the host (double), the broadcast sum
// sum_broadcast (the adjoint of expand), and all_finite.
//
// Determinism: no atomics. Every reduction runs on a grid whose shape depends only on
// the problem size; each thread accumulates a fixed strided subset in double, a block
// folds its threads with a fixed shared-memory tree, and the block partials are added
// in block order (on the host for sum/dot, by one thread per output for sum_broadcast).
// So the same input gives the same bits on every run.
//
// Accuracy: the accumulation is in double throughout, so results are at least as
// accurate as the CPU backend's (which sums float runs of `inner` elements, then
// doubles); they agree to float rounding.
#include "core/cuda/cuda_launch.cuh"

#define RED_THREADS 256
#define RED_PER_BLOCK (RED_THREADS * 16) // elements per block aimed at
#define RED_MAX_BLOCKS 1024
#define SMALL_PER_OUTPUT 256 // sum_broadcast: one thread per output at or below this many terms

// The sum of v over the block's RED_THREADS threads, in a fixed tree order; every thread
// gets the result.
__device__ double block_sum(double v, double *sh) {
    int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = RED_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            sh[t] = sh[t] + sh[t + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

// -- sum and dot -------------------------------------------------------------------------
// The product of two floats is exact in double, so contracting the accumulation into an
// FMA changes nothing.
template <int DOT> __global__ void k_partial(size_t n, const float *x, const float *y, double *partial) {
    __shared__ double sh[RED_THREADS];
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * RED_THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * RED_THREADS)
        acc += DOT ? (double)x[i] * (double)y[i] : (double)x[i];
    double s = block_sum(acc, sh);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s;
}

static double reduce_to_host(size_t n, const float *x, const float *y) {
    if (n == 0)
        return 0.0;
    size_t b = (n + RED_PER_BLOCK - 1) / RED_PER_BLOCK;
    unsigned blocks = (unsigned)(b < RED_MAX_BLOCKS ? b : RED_MAX_BLOCKS);
    double host[RED_MAX_BLOCKS];
    CudaCtx *c = cuda_ctx();
    pthread_mutex_lock(&c->lock);
    double *partial = (double *)cuda_scratch(c, blocks * sizeof(double));
    if (!partial)
        cuda_fatal(__FILE__, __LINE__, "reduction", "out of device memory for partial sums");
    if (y)
        k_partial<1><<<blocks, RED_THREADS>>>(n, x, y, partial);
    else
        k_partial<0><<<blocks, RED_THREADS>>>(n, x, NULL, partial);
    CUDA_CHECK_LAUNCH("k_partial");
    CUDA_CHECK(cudaMemcpy(host, partial, blocks * sizeof(double), cudaMemcpyDeviceToHost));
    pthread_mutex_unlock(&c->lock);
    double s = 0.0;
    for (unsigned i = 0; i < blocks; i++)
        s += host[i];
    return s;
}

extern "C" double cuda_sum(size_t n, const float *x) { return reduce_to_host(n, x, NULL); }
extern "C" double cuda_dot(size_t n, const float *x, const float *y) { return reduce_to_host(n, x, y); }

// -- sum_broadcast ---------------------------------------------------------------------------
// x is read as consecutive chunks of `inner` elements (the last may be short); chunk c
// belongs to output c % nb. Output j's terms, in order, are element r of chunk j + t·nb,
// for t = 0, 1, ... and r < inner: term e = t·inner + r, e < per_out.

// One thread per output, sequential (short sums: bias gradients, softmax row sums).
template <typename I> __global__ void k_sumbc_small(I n, const float *x, I inner, I nb, I n_chunks, float *y) {
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < nb; j += (I)gridDim.x * blockDim.x) {
        double acc = 0.0;
        for (I c = j; c < n_chunks; c += nb) {
            I end = (c + 1) * inner < n ? (c + 1) * inner : n;
            for (I i = c * inner; i < end; i++)
                acc += (double)x[i];
        }
        y[j] = (float)acc;
    }
}

// Blocks j·P .. j·P + P−1 share output j's terms, strided; each writes one partial.
template <typename I>
__global__ void k_sumbc_partial(I n, const float *x, I inner, I nb, I per_out, unsigned parts, double *partial) {
    __shared__ double sh[RED_THREADS];
    I j = (I)(blockIdx.x / parts);
    unsigned p = blockIdx.x % parts;
    double acc = 0.0;
    for (I e = (I)p * RED_THREADS + threadIdx.x; e < per_out; e += (I)parts * RED_THREADS) {
        I t = e / inner, r = e - t * inner;
        I i = (j + t * nb) * inner + r;
        if (i < n)
            acc += (double)x[i];
    }
    double s = block_sum(acc, sh);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s;
}

__global__ void k_sumbc_finish(size_t nb, unsigned parts, const double *partial, float *y) {
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < nb; j += (size_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (unsigned p = 0; p < parts; p++)
            s += partial[j * parts + p];
        y[j] = (float)s;
    }
}

extern "C" void cuda_sum_broadcast(size_t n, const float *x, size_t inner, size_t nb, float *y) {
    if (nb == 0 || inner == 0)
        return;
    if (n == 0) {
        CUDA_CHECK(cudaMemsetAsync(y, 0, nb * sizeof(float), 0));
        return;
    }
    if (inner > n) // every index is in chunk 0 either way
        inner = n;
    size_t n_chunks = n / inner + (n % inner != 0);
    size_t per_out = ((n_chunks + nb - 1) / nb) * inner; // terms of the busiest output
    // The largest index formed is below (n_chunks + nb) · inner ≤ n + (nb + 1) · inner.
    int small32 = nb < ((size_t)1 << 31) / (inner + 1) && cuda_fits32(n + (nb + 1) * inner);
    if (per_out <= SMALL_PER_OUTPUT) {
        if (small32)
            k_sumbc_small<uint32_t><<<cuda_blocks(nb), CUDA_THREADS>>>((uint32_t)n, x, (uint32_t)inner,
                                                                      (uint32_t)nb, (uint32_t)n_chunks, y);
        else
            k_sumbc_small<size_t><<<cuda_blocks(nb), CUDA_THREADS>>>(n, x, inner, nb, n_chunks, y);
        CUDA_CHECK_LAUNCH("k_sumbc_small");
        return;
    }
    size_t parts = (per_out + RED_PER_BLOCK - 1) / RED_PER_BLOCK;
    size_t cap = nb >= 65536 ? 1 : 65536 / nb;
    if (parts > cap)
        parts = cap;
    if (parts > RED_MAX_BLOCKS)
        parts = RED_MAX_BLOCKS;
    if (nb * parts > 0x7fffffffu)
        cuda_fatal(__FILE__, __LINE__, "sum_broadcast", "too many outputs for one grid");
    CudaCtx *c = cuda_ctx();
    pthread_mutex_lock(&c->lock);
    double *partial = (double *)cuda_scratch(c, nb * parts * sizeof(double));
    if (!partial)
        cuda_fatal(__FILE__, __LINE__, "sum_broadcast", "out of device memory for partial sums");
    unsigned blocks = (unsigned)(nb * parts);
    if (small32)
        k_sumbc_partial<uint32_t><<<blocks, RED_THREADS>>>((uint32_t)n, x, (uint32_t)inner, (uint32_t)nb,
                                                          (uint32_t)per_out, (unsigned)parts, partial);
    else
        k_sumbc_partial<size_t><<<blocks, RED_THREADS>>>(n, x, inner, nb, per_out, (unsigned)parts, partial);
    CUDA_CHECK_LAUNCH("k_sumbc_partial");
    k_sumbc_finish<<<cuda_blocks(nb), CUDA_THREADS>>>(nb, (unsigned)parts, partial, y);
    CUDA_CHECK_LAUNCH("k_sumbc_finish");
    pthread_mutex_unlock(&c->lock);
}

// -- all_finite ----------------------------------------------------------------------------
// Threads that see a NaN or an infinity all store the same 1: a benign race, no sum.
__global__ void k_nonfinite(size_t n, const float *x, int *flag) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i]))
            *flag = 1;
}

extern "C" int cuda_all_finite(size_t n, const float *x) {
    if (n == 0)
        return 1;
    int bad = 0;
    CudaCtx *c = cuda_ctx();
    pthread_mutex_lock(&c->lock);
    int *flag = (int *)cuda_scratch(c, sizeof(int));
    if (!flag)
        cuda_fatal(__FILE__, __LINE__, "all_finite", "out of device memory");
    CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), 0));
    k_nonfinite<<<cuda_blocks(n), CUDA_THREADS>>>(n, x, flag);
    CUDA_CHECK_LAUNCH("k_nonfinite");
    CUDA_CHECK(cudaMemcpy(&bad, flag, sizeof(int), cudaMemcpyDeviceToHost));
    pthread_mutex_unlock(&c->lock);
    return !bad;
}
