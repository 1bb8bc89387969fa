// Row-wise softmax and log-softmax on the GPU (x and y are (rows, cols), row-major),
// the numerically stable forms of core/cpu/cpu_backend.c:
//   m = max_j x_j,  s = Σ_j exp(x_j − m),  softmax = exp(x − m) / s,  log_softmax = x − (m + log s).
// One warp per row. Each lane reduces a strided subset, then an XOR butterfly combines
// the lanes; a butterfly adds the same two partial sums in every lane (a + b = b + a
// exactly), so all lanes hold identical bits and the order is fixed: the result is the
// same on every run. It differs from the CPU's sequential sum only by float rounding.
#include <math.h>

#include "core/cuda/cuda_launch.cuh"

#define WARPS_PER_BLOCK 8
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(FULL_MASK, v, o);
        v = u > v ? u : v;
    }
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// log_form 0: softmax, 1: log_softmax.
__global__ void k_softmax(int rows, int cols, const float *x, float *y, int log_form) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= rows) // uniform per warp: whole warps leave together, shuffles stay full
        return;
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;
    float m = -INFINITY;
    for (int j = lane; j < cols; j += 32)
        m = xr[j] > m ? xr[j] : m;
    m = warp_max(m);
    float s = 0.0f;
    for (int j = lane; j < cols; j += 32)
        s = __fadd_rn(s, expf(__fsub_rn(xr[j], m)));
    s = warp_sum(s);
    if (log_form) {
        float lse = __fadd_rn(m, logf(s));
        for (int j = lane; j < cols; j += 32)
            yr[j] = __fsub_rn(xr[j], lse);
    } else {
        float inv = 1.0f / s;
        for (int j = lane; j < cols; j += 32)
            yr[j] = __fmul_rn(expf(__fsub_rn(xr[j], m)), inv);
    }
}

static void launch(int rows, int cols, const float *x, float *y, int log_form) {
    if (rows <= 0 || cols <= 0)
        return;
    unsigned blocks = (unsigned)((rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
    k_softmax<<<blocks, WARPS_PER_BLOCK * 32>>>(rows, cols, x, y, log_form);
    CUDA_CHECK_LAUNCH("k_softmax");
}

extern "C" void cuda_softmax(int rows, int cols, const float *x, float *y) { launch(rows, cols, x, y, 0); }
extern "C" void cuda_log_softmax(int rows, int cols, const float *x, float *y) { launch(rows, cols, x, y, 1); }
