// The CUDA backend: initialisation, device memory and the vtable. The kernels live in
// the *.cu files of this folder, GEMM in cuda_gemm.c (cuBLAS), convolution in
// cuda_conv.c (cuDNN); core/cpu/ is the reference every slot is tested against
// (tests/test_cuda.c).
//
// Initialisation is lazy and happens once per process (pthread_once): count devices,
// take device 0 (select another with CUDA_VISIBLE_DEVICES), create the context, probe
// that this build's kernels run on it, open cuBLAS (cuda_blas.c), create the cuBLAS and
// cuDNN handles. Without a driver or a device, cuda_backend_get returns NULL with
// FP_EUNSUPPORTED (the machine cannot do what was asked: the CLI exits 2) and a message
// that starts "no CUDA device"; other failures return NULL with FP_EBACKEND and the reason.
// See cuda_internal.h for why the state is the one process-wide exception to the
// no-globals rule and how errors are handled.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_internal.h"

typedef struct CudaOnce {
    pthread_once_t once;
    FpStatus status;
    FpError err;
    CudaCtx ctx;
} CudaOnce;

// The one process-wide mutable state (see the banner of cuda_internal.h).
static CudaOnce cuda_state = {.once = PTHREAD_ONCE_INIT};

CudaCtx *cuda_ctx(void) { return &cuda_state.ctx; }

void cuda_fatal(const char *file, int line, const char *what, const char *detail) {
    fprintf(stderr, "fedpriv: CUDA backend failure at %s:%d: %s: %s\n", file, line, what, detail ? detail : "");
    fflush(stderr);
    abort();
}

static void cuda_init(void) {
    CudaOnce *s = &cuda_state;
    CudaCtx *c = &s->ctx;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        // No driver (cudaErrorInsufficientDriver), no device (cudaErrorNoDevice), or a
        // driver that cannot start: all mean there is no GPU to use.
        s->status = fp_fail(&s->err, FP_EUNSUPPORTED, "no CUDA device (%s)",
                            e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices");
        (void)cudaGetLastError();
        return;
    }
    c->device = 0;
    struct cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, c->device)) != cudaSuccess ||
        (e = cudaSetDevice(c->device)) != cudaSuccess || (e = cudaFree(NULL)) != cudaSuccess) {
        s->status = fp_fail(&s->err, FP_EUNSUPPORTED, "no CUDA device (device %d cannot be used: %s)", c->device,
                            cudaGetErrorString(e));
        (void)cudaGetLastError();
        return;
    }
    snprintf(c->device_name, sizeof c->device_name, "%s", prop.name);
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    if ((e = cuda_probe_kernels()) != cudaSuccess) {
        s->status = fp_fail(&s->err, FP_EBACKEND,
                            "CUDA device %s (compute capability %d.%d) cannot run this build's kernels (%s); "
                            "rebuild with a matching CUDA_ARCH",
                            c->device_name, c->cc_major, c->cc_minor, cudaGetErrorString(e));
        return;
    }
    if ((s->status = cuda_blas_load(&c->cublas, &s->err)) != FP_OK)
        return;
    cublasStatus_t bs = c->cublas.create(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        s->status = fp_fail(&s->err, FP_EBACKEND, "cublasCreate failed: %s", c->cublas.status_string(bs));
        return;
    }
    // Plain FP32 GEMM (no TF32 tensor-core rounding): results must match the CPU backend
    // within float tolerances.
    if ((bs = c->cublas.set_math_mode(c->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
        s->status = fp_fail(&s->err, FP_EBACKEND, "cublasSetMathMode failed: %s", c->cublas.status_string(bs));
        return;
    }
    cudnnStatus_t ds = cudnnCreate(&c->dnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        s->status = fp_fail(&s->err, FP_EBACKEND, "cudnnCreate failed: %s", cudnnGetErrorString(ds));
        return;
    }
    c->conv = cuda_conv_cache_create();
    if (!c->conv || pthread_mutex_init(&c->lock, NULL) != 0) {
        s->status = fp_fail(&s->err, FP_ENOMEM, "out of memory initialising the CUDA backend");
        return;
    }
    s->status = FP_OK;
}

// Grow-only buffers: synchronise before freeing so no queued kernel still uses the old one.
static void *grow(void **buf, size_t *have, size_t bytes) {
    if (bytes <= *have && *buf)
        return *buf;
    size_t want = bytes < 4096 ? 4096 : bytes + bytes / 4;
    void *p = NULL;
    if (cudaMalloc(&p, want) != cudaSuccess) {
        (void)cudaGetLastError(); // out of memory is not sticky; clear it
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        want = bytes;
    }
    if (*buf) {
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaFree(*buf));
    }
    *buf = p;
    *have = want;
    return p;
}

void *cuda_scratch(CudaCtx *c, size_t bytes) { return grow(&c->scratch, &c->scratch_bytes, bytes); }
void *cuda_workspace(CudaCtx *c, size_t bytes) { return grow(&c->workspace, &c->workspace_bytes, bytes); }
void *cuda_staging(CudaCtx *c, int slot, size_t bytes) {
    return grow(&c->staging[slot], &c->staging_bytes[slot], bytes);
}

// -- memory ------------------------------------------------------------------------------
static void *cuda_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); // cudaErrorMemoryAllocation is not sticky
        return NULL;
    }
    return p;
}

static void cuda_free(void *p) {
    if (p)
        CUDA_CHECK(cudaFree(p));
}

static void cuda_upload(void *dst, const void *host_src, size_t bytes) {
    if (bytes)
        CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}

static void cuda_download(void *host_dst, const void *src, size_t bytes) {
    if (bytes)
        CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

// Like the CPU's memmove: overlapping ranges are allowed (through a scratch copy,
// because cudaMemcpy's result on overlapping ranges is undefined).
static void cuda_copy(void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src)
        return;
    const char *d = dst, *s = src;
    if (d + bytes <= s || s + bytes <= d) {
        CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
        return;
    }
    CudaCtx *c = cuda_ctx();
    pthread_mutex_lock(&c->lock);
    void *tmp = cuda_scratch(c, bytes);
    if (!tmp)
        cuda_fatal(__FILE__, __LINE__, "overlapping device copy", "out of device memory for the temporary");
    CUDA_CHECK(cudaMemcpy(tmp, src, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(dst, tmp, bytes, cudaMemcpyDeviceToDevice));
    pthread_mutex_unlock(&c->lock);
}

static void cuda_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

static const Backend cuda_backend = {
    .name = "cuda",
    .device = DEVICE_CUDA,
    .alloc = cuda_alloc,                 // cudaMalloc (no managed memory)
    .free = cuda_free,
    .upload = cuda_upload,               // cudaMemcpy, synchronous for the host
    .download = cuda_download,
    .copy = cuda_copy,
    .fill = cuda_fill,
    .sync = cuda_sync,
    .gemm = cuda_gemm,                   // cuBLAS SGEMM, FP32 math
    .transpose = cuda_transpose,
    .unary = cuda_unary,
    .affine = cuda_affine,
    .binary = cuda_binary,
    .expand = cuda_expand,
    .sum_broadcast = cuda_sum_broadcast, // double accumulation, fixed order
    .softmax = cuda_softmax,
    .log_softmax = cuda_log_softmax,
    .conv2d_forward = cuda_conv2d_forward, // cuDNN, deterministic FMA-math algorithms
    .conv2d_backward_data = cuda_conv2d_backward_data,
    .conv2d_backward_filter = cuda_conv2d_backward_filter,
    .conv2d_backward_filter_per_example = cuda_conv2d_backward_filter_per_example,
    .maxpool_forward = cuda_maxpool_forward, // own kernels: argmax as the CPU records it
    .maxpool_scatter = cuda_maxpool_scatter,
    .maxpool_gather = cuda_maxpool_gather,
    .avgpool_forward = cuda_avgpool_forward,
    .avgpool_backward = cuda_avgpool_backward,
    .slice_copy = cuda_slice_copy,
    .sum = cuda_sum,
    .dot = cuda_dot,
    .axpy = cuda_axpy,
    .sgd_step = cuda_sgd_step,
    .all_finite = cuda_all_finite,
    .set_threads = NULL,                 // not applicable: the GPU runs every kernel
};

const Backend *cuda_backend_get(FpError *err) {
    pthread_once(&cuda_state.once, cuda_init);
    if (cuda_state.status != FP_OK) {
        if (err)
            *err = cuda_state.err;
        return NULL;
    }
    return &cuda_backend;
}

FpStatus cuda_device_describe(char *buf, size_t n, FpError *err) {
    FpError local = {FP_OK, ""};
    if (!cuda_backend_get(&local)) {
        if (err)
            *err = local;
        return local.code;
    }
    const CudaCtx *c = cuda_ctx();
    int rt = 0, drv = 0;
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaDriverGetVersion(&drv);
    snprintf(buf, n, "%s (compute capability %d.%d; CUDA runtime %d.%d, driver %d.%d; cuDNN %zu)", c->device_name,
             c->cc_major, c->cc_minor, rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10,
             cudnnGetVersion());
    return FP_OK;
}
