// Elementwise kernels of the CUDA backend: fill, unary, affine, broadcast binary,
// expand, transpose, slice copy, axpy and the SGD step. Semantics, argument order and
// the broadcast rule y[i] = a[i] op b[(i / inner) % nb] are those of
// core/cpu/cpu_backend.c, the reference these are tested against.
//
// Rounding: the CPU build compiles ISO C (-std=c11), where GCC does not fuse a*b+c into
// an FMA. nvcc would, so the kernels spell multiply-then-add with __fmul_rn/__fadd_rn
// (which are never contracted) and get the CPU's bits exactly. Division and sqrtf are
// IEEE-rounded (nvcc's default -prec-div/-prec-sqrt), so recip/div/sqrt match too; only
// expf/logf/tanhf (and sigmoid through expf) differ from glibc by an ulp or two.
#include "core/cuda/cuda_launch.cuh"

#define GRID_STRIDE(I, i, n) for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (I)gridDim.x * blockDim.x)

// -- probe ---------------------------------------------------------------------------------
__global__ void k_probe(int *out) { *out = 12345; }

extern "C" cudaError_t cuda_probe_kernels(void) {
    int *d = NULL, h = 0;
    cudaError_t e = cudaMalloc(&d, sizeof(int));
    if (e != cudaSuccess)
        return e;
    k_probe<<<1, 1>>>(d);
    e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e == cudaSuccess && h != 12345)
        e = cudaErrorUnknown;
    return e;
}

// -- fill and scale ----------------------------------------------------------------------
__global__ void k_fill(size_t n, float v, float *x) {
    GRID_STRIDE(size_t, i, n) x[i] = v;
}

extern "C" void cuda_fill(float *x, size_t n, float v) {
    if (n == 0)
        return;
    if (v == 0.0f) { // like the CPU backend: any zero fills +0
        CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), 0));
        return;
    }
    k_fill<<<cuda_blocks(n), CUDA_THREADS>>>(n, v, x);
    CUDA_CHECK_LAUNCH("k_fill");
}

__global__ void k_scale(size_t n, float beta, float *c) {
    GRID_STRIDE(size_t, i, n) c[i] = __fmul_rn(beta, c[i]);
}

extern "C" void cuda_scale_inplace(size_t n, float beta, float *c) {
    if (n == 0)
        return;
    if (beta == 0.0f) {
        CUDA_CHECK(cudaMemsetAsync(c, 0, n * sizeof(float), 0));
        return;
    }
    k_scale<<<cuda_blocks(n), CUDA_THREADS>>>(n, beta, c);
    CUDA_CHECK_LAUNCH("k_scale");
}

// -- unary and affine --------------------------------------------------------------------
__device__ __forceinline__ float unary_op(int op, float v) {
    switch (op) {
    case UN_NEG: return -v;
    case UN_EXP: return expf(v);
    case UN_LOG: return logf(v);
    case UN_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case UN_TANH: return tanhf(v);
    case UN_RELU: return v > 0.0f ? v : 0.0f;
    case UN_STEP: return v > 0.0f ? 1.0f : 0.0f;
    case UN_SQUARE: return __fmul_rn(v, v);
    case UN_SQRT: return sqrtf(v);
    case UN_RECIP: return 1.0f / v;
    case UN_ABS: return fabsf(v);
    case UN_SIGN: return (float)((v > 0.0f) - (v < 0.0f));
    default: return v;
    }
}

template <typename I> __global__ void k_unary(int op, I n, const float *x, float *y) {
    GRID_STRIDE(I, i, n) y[i] = unary_op(op, x[i]);
}

extern "C" void cuda_unary(UnaryOp op, size_t n, const float *x, float *y) {
    if (n == 0 || op < 0 || op >= UN_COUNT)
        return;
    if (cuda_fits32(n))
        k_unary<uint32_t><<<cuda_blocks(n), CUDA_THREADS>>>((int)op, (uint32_t)n, x, y);
    else
        k_unary<size_t><<<cuda_blocks(n), CUDA_THREADS>>>((int)op, n, x, y);
    CUDA_CHECK_LAUNCH("k_unary");
}

__global__ void k_affine(size_t n, const float *x, float alpha, float beta, float *y) {
    GRID_STRIDE(size_t, i, n) y[i] = __fadd_rn(__fmul_rn(alpha, x[i]), beta);
}

extern "C" void cuda_affine(size_t n, const float *x, float alpha, float beta, float *y) {
    if (n == 0)
        return;
    k_affine<<<cuda_blocks(n), CUDA_THREADS>>>(n, x, alpha, beta, y);
    CUDA_CHECK_LAUNCH("k_affine");
}

// -- broadcast binary and expand -----------------------------------------------------------
__device__ __forceinline__ float binary_op(int op, float a, float b) {
    switch (op) {
    case BIN_ADD: return __fadd_rn(a, b);
    case BIN_SUB: return __fsub_rn(a, b);
    case BIN_MUL: return __fmul_rn(a, b);
    case BIN_SIGMOID_GRAD: return __fmul_rn(a, __fmul_rn(b, __fsub_rn(1.0f, b)));
    default: return a / b; // BIN_DIV, IEEE-rounded
    }
}

// y[i] = a[i] op b[(i / inner) % nb]
template <typename I> __global__ void k_binary(int op, I n, const float *a, const float *b, I inner, I nb, float *y) {
    GRID_STRIDE(I, i, n) y[i] = binary_op(op, a[i], b[(i / inner) % nb]);
}

template <typename I> __global__ void k_binary_same(int op, I n, const float *a, const float *b, float *y) {
    GRID_STRIDE(I, i, n) y[i] = binary_op(op, a[i], b[i]);
}

extern "C" void cuda_binary(BinaryOp op, size_t n, const float *a, const float *b, size_t inner, size_t nb,
                            float *y) {
    if (n == 0 || inner == 0 || nb == 0 || op < 0 || op >= BIN_COUNT)
        return;
    unsigned blocks = cuda_blocks(n);
    if (nb == n && inner == 1) {
        if (cuda_fits32(n))
            k_binary_same<uint32_t><<<blocks, CUDA_THREADS>>>((int)op, (uint32_t)n, a, b, y);
        else
            k_binary_same<size_t><<<blocks, CUDA_THREADS>>>((int)op, n, a, b, y);
    } else if (cuda_fits32(n) && cuda_fits32(inner) && cuda_fits32(nb)) {
        k_binary<uint32_t><<<blocks, CUDA_THREADS>>>((int)op, (uint32_t)n, a, b, (uint32_t)inner, (uint32_t)nb, y);
    } else {
        k_binary<size_t><<<blocks, CUDA_THREADS>>>((int)op, n, a, b, inner, nb, y);
    }
    CUDA_CHECK_LAUNCH("k_binary");
}

template <typename I> __global__ void k_expand(I n, const float *b, I inner, I nb, float *y) {
    GRID_STRIDE(I, i, n) y[i] = b[(i / inner) % nb];
}

extern "C" void cuda_expand(size_t n, const float *b, size_t inner, size_t nb, float *y) {
    if (n == 0 || inner == 0 || nb == 0)
        return;
    if (cuda_fits32(n) && cuda_fits32(inner) && cuda_fits32(nb))
        k_expand<uint32_t><<<cuda_blocks(n), CUDA_THREADS>>>((uint32_t)n, b, (uint32_t)inner, (uint32_t)nb, y);
    else
        k_expand<size_t><<<cuda_blocks(n), CUDA_THREADS>>>(n, b, inner, nb, y);
    CUDA_CHECK_LAUNCH("k_expand");
}

// -- transpose and slice copy -----------------------------------------------------------
// x (rows, cols) -> y (cols, rows) through a 32×33 shared tile (coalesced both ways).
__global__ void k_transpose(int rows, int cols, const float *x, float *y) {
    __shared__ float tile[32][33];
    int c0 = blockIdx.x * 32;
    for (int r0 = blockIdx.y * 32; r0 < rows; r0 += gridDim.y * 32) {
        for (int j = threadIdx.y; j < 32; j += blockDim.y) {
            int r = r0 + j, c = c0 + threadIdx.x;
            if (r < rows && c < cols)
                tile[j][threadIdx.x] = x[(size_t)r * cols + c];
        }
        __syncthreads();
        for (int j = threadIdx.y; j < 32; j += blockDim.y) {
            int c = c0 + j, r = r0 + threadIdx.x;
            if (c < cols && r < rows)
                y[(size_t)c * rows + r] = tile[threadIdx.x][j];
        }
        __syncthreads();
    }
}

extern "C" void cuda_transpose(int rows, int cols, const float *x, float *y) {
    if (rows <= 0 || cols <= 0)
        return;
    unsigned gy = (unsigned)((rows + 31) / 32);
    dim3 grid((unsigned)((cols + 31) / 32), gy < 65535u ? gy : 65535u), block(32, 8);
    k_transpose<<<grid, block>>>(rows, cols, x, y);
    CUDA_CHECK_LAUNCH("k_transpose");
}

// dst[o, dst_off + j, i] = src[o, src_off + j, i]: element e of the (outer, len·inner) copy.
template <typename I>
__global__ void k_slice(I total, I block, I inner, I src_dim, I src_off, I dst_dim, I dst_off, const float *src,
                        float *dst) {
    GRID_STRIDE(I, e, total) {
        I o = e / block, r = e - o * block;
        dst[(o * dst_dim + dst_off) * inner + r] = src[(o * src_dim + src_off) * inner + r];
    }
}

extern "C" void cuda_slice_copy(int outer, int inner, int src_dim, int src_off, int dst_dim, int dst_off, int len,
                                const float *src, float *dst) {
    if (outer <= 0 || inner <= 0 || len <= 0)
        return;
    size_t block = (size_t)len * inner, total = (size_t)outer * block;
    size_t span = (size_t)outer * (size_t)(src_dim > dst_dim ? src_dim : dst_dim) * inner; // largest index + 1
    unsigned blocks = cuda_blocks(total);
    if (cuda_fits32(span))
        k_slice<uint32_t><<<blocks, CUDA_THREADS>>>((uint32_t)total, (uint32_t)block, (uint32_t)inner,
                                                    (uint32_t)src_dim, (uint32_t)src_off, (uint32_t)dst_dim,
                                                    (uint32_t)dst_off, src, dst);
    else
        k_slice<size_t><<<blocks, CUDA_THREADS>>>(total, block, (size_t)inner, (size_t)src_dim, (size_t)src_off,
                                                  (size_t)dst_dim, (size_t)dst_off, src, dst);
    CUDA_CHECK_LAUNCH("k_slice");
}

// -- optimiser -------------------------------------------------------------------------------
__global__ void k_axpy(size_t n, float alpha, const float *x, float *y) {
    GRID_STRIDE(size_t, i, n) y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
}

extern "C" void cuda_axpy(size_t n, float alpha, const float *x, float *y) {
    if (n == 0)
        return;
    k_axpy<<<cuda_blocks(n), CUDA_THREADS>>>(n, alpha, x, y);
    CUDA_CHECK_LAUNCH("k_axpy");
}

// d = g + wd w; v = momentum v + d; w -= lr v   (PyTorch SGD; momentum 0: w -= lr d, v untouched)
__global__ void k_sgd(size_t n, float *w, const float *g, float *v, float lr, float momentum, float wd) {
    GRID_STRIDE(size_t, i, n) {
        float wi = w[i];
        float d = __fadd_rn(g[i], __fmul_rn(wd, wi));
        if (momentum != 0.0f) {
            d = __fadd_rn(__fmul_rn(momentum, v[i]), d);
            v[i] = d;
        }
        w[i] = __fsub_rn(wi, __fmul_rn(lr, d));
    }
}

extern "C" void cuda_sgd_step(size_t n, float *w, const float *g, float *v, float lr, float momentum,
                              float weight_decay) {
    if (n == 0)
        return;
    k_sgd<<<cuda_blocks(n), CUDA_THREADS>>>(n, w, g, v, lr, momentum, weight_decay);
    CUDA_CHECK_LAUNCH("k_sgd");
}
