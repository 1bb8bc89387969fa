// Philox-4x32-10 on the GPU: one thread per element evaluates the CPU's
// rng_block / rng_uniform_at / rng_normal_at / rng_laplace_at (core/rng.c) for its index,
// with the same Philox (core/philox.h, compiled for the device) and the same
// double-precision formulas. See cuda_rng.h.
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_launch.cuh"
#include "core/cuda/cuda_rng.h"
#include "core/philox.h"

typedef struct RngKey {
    uint32_t k0, k1, purpose, round, client;
} RngKey;

// Block `index` of the stream: core/philox.h, the same function the CPU evaluates.
__device__ __forceinline__ void philox_stream_block(const RngKey &s, uint64_t index, uint32_t w[4]) {
    uint32_t ctr[4];
    philox_counter(index, s.purpose, s.round, s.client, ctr);
    philox_block(ctr, s.k0, s.k1, w);
}

// rng_u01d: 53 bits from two words, the midpoint of a 2^-53 grid cell in (0,1). Exact.
__device__ __forceinline__ double u01d(uint32_t hi, uint32_t lo) {
    return ((double)(((uint64_t)(hi >> 5) << 26) | (lo >> 6)) + 0.5) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ double draw(int dist, const RngKey &s, uint64_t index) {
    uint32_t w[4];
    philox_stream_block(s, index, w);
    double u = u01d(w[0], w[1]);
    if (dist == CUDA_RNG_UNIFORM)
        return u;
    if (dist == CUDA_RNG_LAPLACE) { // x = -sign(u-1/2) ln(1 - 2|u-1/2|)
        double d = u - 0.5;
        return d < 0 ? log1p(2.0 * d) : -log1p(-2.0 * d);
    }
    double u2 = u01d(w[2], w[3]); // Box-Muller, as box_muller() in core/rng.c
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * u2);
}

__global__ void k_rng_fill(int dist, RngKey s, uint64_t first, size_t n, double scale, int accumulate, float *out) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = (float)(scale * draw(dist, s, first + i));
        out[i] = accumulate ? __fadd_rn(out[i], v) : v;
    }
}

__global__ void k_rng_fill_f64(int dist, RngKey s, uint64_t first, size_t n, double *out) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = draw(dist, s, first + i);
}

__global__ void k_rng_blocks(RngKey s, uint64_t first, size_t n, uint32_t *out) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t w[4];
        philox_stream_block(s, first + i, w);
        out[4 * i] = w[0];
        out[4 * i + 1] = w[1];
        out[4 * i + 2] = w[2];
        out[4 * i + 3] = w[3];
    }
}

static RngKey key_of(const RngStream *s) {
    RngKey k = {s->key[0], s->key[1], s->purpose, s->round, s->client};
    return k;
}

// The backend must be up (context, device) before a launch; then the launch's own error.
static FpStatus ready(int dist, FpError *err) {
    if (dist < CUDA_RNG_UNIFORM || dist > CUDA_RNG_LAPLACE)
        return fp_fail(err, FP_EPARAM, "cuda_rng: unknown distribution %d", dist);
    FpError local = {FP_OK, ""};
    if (cuda_backend_get(&local))
        return FP_OK;
    if (err)
        *err = local;
    return local.code;
}

static FpStatus launched(const char *what, FpError *err) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? FP_OK : fp_fail(err, FP_EBACKEND, "%s: %s", what, cudaGetErrorString(e));
}

extern "C" FpStatus cuda_rng_fill(CudaRngDist dist, const RngStream *s, uint64_t first, size_t n, double scale,
                                  int accumulate, float *out, FpError *err) {
    FpStatus st = ready(dist, err);
    if (st != FP_OK || n == 0)
        return st;
    k_rng_fill<<<cuda_blocks(n), CUDA_THREADS>>>((int)dist, key_of(s), first, n, scale, accumulate, out);
    return launched("cuda_rng_fill", err);
}

extern "C" FpStatus cuda_rng_fill_f64(CudaRngDist dist, const RngStream *s, uint64_t first, size_t n, double *out,
                                      FpError *err) {
    FpStatus st = ready(dist, err);
    if (st != FP_OK || n == 0)
        return st;
    k_rng_fill_f64<<<cuda_blocks(n), CUDA_THREADS>>>((int)dist, key_of(s), first, n, out);
    return launched("cuda_rng_fill_f64", err);
}

extern "C" FpStatus cuda_rng_blocks(const RngStream *s, uint64_t first, size_t n, uint32_t *out, FpError *err) {
    FpStatus st = ready(CUDA_RNG_UNIFORM, err);
    if (st != FP_OK || n == 0)
        return st;
    k_rng_blocks<<<cuda_blocks(n), CUDA_THREADS>>>(key_of(s), first, n, out);
    return launched("cuda_rng_blocks", err);
}
