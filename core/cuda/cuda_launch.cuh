// Launch helpers shared by the CUDA kernel files (device code only; not a public API).
//
// Kernels use grid-stride loops over a fixed grid that depends on the problem size
// only (never on the device), so the work each thread does, and the order of every
// floating-point operation, is the same on every run.
//
// Index arithmetic: 64-bit division costs tens of instructions on the GPU, so each
// elementwise kernel is instantiated for 32-bit indices and used whenever every index
// fits (cuda_fits32), with a 64-bit instantiation for the rare larger tensor.
#ifndef FEDPRIV_CORE_CUDA_LAUNCH_CUH
#define FEDPRIV_CORE_CUDA_LAUNCH_CUH

#include <stdint.h>

#include "core/cuda/cuda_internal.h"

#define CUDA_THREADS 256
#define CUDA_MAX_BLOCKS (1u << 20)

static inline unsigned cuda_blocks(size_t n) {
    size_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    return (unsigned)(b < CUDA_MAX_BLOCKS ? b : CUDA_MAX_BLOCKS);
}

// Below 2^31, so that a grid-stride step (at most CUDA_MAX_BLOCKS · 1024 = 2^30) added to
// an index still below the bound cannot wrap a 32-bit unsigned index.
static inline int cuda_fits32(size_t v) { return v < ((size_t)1 << 31); }

#endif
