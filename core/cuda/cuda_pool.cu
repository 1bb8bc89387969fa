// Max and average pooling on the GPU (k×k windows, stride, no padding), with exactly the
// CPU backend's semantics (core/cpu/cpu_conv.c), which cuDNN pooling does not give:
//   - maxpool_forward records argmax = the flat index of the maximum within the sample's
//     (n, c) input plane, ties to the first in row-major window order (a strict >);
//   - maxpool_scatter is dx = 0, then dx[argmax[o]] += dy[o] for o in increasing order;
//   - maxpool_gather is y[o] = x[argmax[o]];
//   - avgpool_backward spreads dy[o] / k² over each window, adding in increasing o.
// Windows overlap when stride < k, so a scatter written per output would need atomic
// float adds, whose order (and so whose rounding) changes from run to run. Both
// backward kernels are therefore gathers: one thread per input position loops over the
// output windows that cover it in increasing o and adds in that fixed order, which is the
// CPU's order, so the bits match the CPU's too.
#include "core/cuda/cuda_launch.cuh"

typedef struct PoolDims {
    size_t planes, in_plane, out_plane;
    int h_in, w_in, h_out, w_out, k, stride;
} PoolDims;

static PoolDims dims_of(const PoolGeom *g) {
    PoolDims d;
    d.planes = (size_t)g->n * g->c;
    d.in_plane = (size_t)g->h_in * g->w_in;
    d.out_plane = (size_t)g->h_out * g->w_out;
    d.h_in = g->h_in;
    d.w_in = g->w_in;
    d.h_out = g->h_out;
    d.w_out = g->w_out;
    d.k = g->k;
    d.stride = g->stride;
    return d;
}

static int pool_valid(const PoolGeom *g) {
    return g->n > 0 && g->c > 0 && g->h_out > 0 && g->w_out > 0 && g->k > 0 && g->stride > 0;
}

#define FOR_EACH(i, n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// The output windows covering input row iy: oy in [*lo, *hi] (empty when lo > hi).
__device__ __forceinline__ void covering(int iy, int k, int stride, int n_out, int *lo, int *hi) {
    *lo = iy - k + 1 <= 0 ? 0 : (iy - k + stride) / stride; // ceil((iy − k + 1) / stride)
    int h = iy / stride;
    *hi = h < n_out - 1 ? h : n_out - 1;
}

__global__ void k_maxpool_fwd(PoolDims d, const float *x, float *y, int32_t *argmax) {
    FOR_EACH(o, d.planes * d.out_plane) {
        size_t p = o / d.out_plane;
        int q = (int)(o - p * d.out_plane), oy = q / d.w_out, ox = q - oy * d.w_out;
        const float *xp = x + p * d.in_plane;
        int best = (oy * d.stride) * d.w_in + ox * d.stride;
        float m = xp[best];
        for (int ki = 0; ki < d.k; ki++)
            for (int kj = 0; kj < d.k; kj++) {
                int idx = (oy * d.stride + ki) * d.w_in + ox * d.stride + kj;
                float v = xp[idx];
                if (v > m) {
                    m = v;
                    best = idx;
                }
            }
        y[o] = m;
        argmax[o] = best;
    }
}

__global__ void k_maxpool_scatter(PoolDims d, const float *dy, const int32_t *argmax, float *dx) {
    FOR_EACH(e, d.planes * d.in_plane) {
        size_t p = e / d.in_plane;
        int q = (int)(e - p * d.in_plane), iy = q / d.w_in, ix = q - iy * d.w_in;
        int oy0, oy1, ox0, ox1;
        covering(iy, d.k, d.stride, d.h_out, &oy0, &oy1);
        covering(ix, d.k, d.stride, d.w_out, &ox0, &ox1);
        const float *dyp = dy + p * d.out_plane;
        const int32_t *ap = argmax + p * d.out_plane;
        float acc = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                int o = oy * d.w_out + ox;
                if (ap[o] == q)
                    acc = __fadd_rn(acc, dyp[o]);
            }
        dx[e] = acc;
    }
}

__global__ void k_maxpool_gather(PoolDims d, const float *x, const int32_t *argmax, float *y) {
    FOR_EACH(o, d.planes * d.out_plane) {
        size_t p = o / d.out_plane;
        y[o] = x[p * d.in_plane + argmax[o]];
    }
}

__global__ void k_avgpool_fwd(PoolDims d, float inv, const float *x, float *y) {
    FOR_EACH(o, d.planes * d.out_plane) {
        size_t p = o / d.out_plane;
        int q = (int)(o - p * d.out_plane), oy = q / d.w_out, ox = q - oy * d.w_out;
        const float *xp = x + p * d.in_plane;
        float s = 0.0f;
        for (int ki = 0; ki < d.k; ki++)
            for (int kj = 0; kj < d.k; kj++)
                s = __fadd_rn(s, xp[(oy * d.stride + ki) * d.w_in + ox * d.stride + kj]);
        y[o] = __fmul_rn(s, inv);
    }
}

__global__ void k_avgpool_bwd(PoolDims d, float inv, const float *dy, float *dx) {
    FOR_EACH(e, d.planes * d.in_plane) {
        size_t p = e / d.in_plane;
        int q = (int)(e - p * d.in_plane), iy = q / d.w_in, ix = q - iy * d.w_in;
        int oy0, oy1, ox0, ox1;
        covering(iy, d.k, d.stride, d.h_out, &oy0, &oy1);
        covering(ix, d.k, d.stride, d.w_out, &ox0, &ox1);
        const float *dyp = dy + p * d.out_plane;
        float acc = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++)
                acc = __fadd_rn(acc, __fmul_rn(dyp[oy * d.w_out + ox], inv));
        dx[e] = acc;
    }
}

extern "C" void cuda_maxpool_forward(const PoolGeom *g, const float *x, float *y, int32_t *argmax) {
    if (!pool_valid(g))
        return;
    PoolDims d = dims_of(g);
    k_maxpool_fwd<<<cuda_blocks(d.planes * d.out_plane), CUDA_THREADS>>>(d, x, y, argmax);
    CUDA_CHECK_LAUNCH("k_maxpool_fwd");
}

extern "C" void cuda_maxpool_scatter(const PoolGeom *g, const float *dy, const int32_t *argmax, float *dx) {
    if (!pool_valid(g))
        return;
    PoolDims d = dims_of(g);
    k_maxpool_scatter<<<cuda_blocks(d.planes * d.in_plane), CUDA_THREADS>>>(d, dy, argmax, dx);
    CUDA_CHECK_LAUNCH("k_maxpool_scatter");
}

extern "C" void cuda_maxpool_gather(const PoolGeom *g, const float *x, const int32_t *argmax, float *y) {
    if (!pool_valid(g))
        return;
    PoolDims d = dims_of(g);
    k_maxpool_gather<<<cuda_blocks(d.planes * d.out_plane), CUDA_THREADS>>>(d, x, argmax, y);
    CUDA_CHECK_LAUNCH("k_maxpool_gather");
}

extern "C" void cuda_avgpool_forward(const PoolGeom *g, const float *x, float *y) {
    if (!pool_valid(g))
        return;
    PoolDims d = dims_of(g);
    float inv = 1.0f / (float)(g->k * g->k); // computed as the CPU computes it
    k_avgpool_fwd<<<cuda_blocks(d.planes * d.out_plane), CUDA_THREADS>>>(d, inv, x, y);
    CUDA_CHECK_LAUNCH("k_avgpool_fwd");
}

extern "C" void cuda_avgpool_backward(const PoolGeom *g, const float *dy, float *dx) {
    if (!pool_valid(g))
        return;
    PoolDims d = dims_of(g);
    float inv = 1.0f / (float)(g->k * g->k);
    k_avgpool_bwd<<<cuda_blocks(d.planes * d.in_plane), CUDA_THREADS>>>(d, inv, dy, dx);
    CUDA_CHECK_LAUNCH("k_avgpool_bwd");
}
