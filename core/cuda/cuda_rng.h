// Philox-4x32-10 draws on the GPU: the same streams as core/rng.h, element by element.
//
// Block i of a stream is the same function of (key, purpose, round, client, i) on both
// backends (core/rng.h documents the counter layout), and these kernels evaluate the
// CPU's formulas with the same double-precision arithmetic:
//   uniform  = rng_uniform_at(s, first + i)   (53-bit, from words 0-1): bit-identical;
//   laplace  = rng_laplace_at(s, first + i)   (inversion with log1p, words 0-1);
//   normal   = rng_normal_at(s, first + i)    (Box-Muller on words 0-3).
// Laplace and normal go through the GPU's double log1p / log / cos, which differ from
// glibc's by at most an ulp or two of a double; after rounding to float the draws agree
// with the CPU's except, very rarely, by one float ulp (tests/test_cuda.c measures it).
//
// Only code built with FEDPRIV_HAVE_CUDA may include this header. Pointers are device
// memory. Functions return FP_OK, or FP_EBACKEND (no device, or a launch failed) with err
// filled.
#ifndef FEDPRIV_CORE_CUDA_RNG_H
#define FEDPRIV_CORE_CUDA_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { // the project headers below are C; keep their functions' C linkage in C++
#endif

#include "core/rng.h"
#include "core/status.h"

typedef enum { CUDA_RNG_UNIFORM = 0, CUDA_RNG_NORMAL = 1, CUDA_RNG_LAPLACE = 2 } CudaRngDist;

// out[i] = (float)(scale * draw(s, first + i)) for i < n; with accumulate,
// out[i] += (float)(scale * draw(s, first + i)) (the CPU idiom x[i] += (float)(sigma * z)).
FpStatus cuda_rng_fill(CudaRngDist dist, const RngStream *s, uint64_t first, size_t n, double scale, int accumulate,
                       float *out, FpError *err);

// out[i] = draw(s, first + i) in double, unrounded (for tests and audits).
FpStatus cuda_rng_fill_f64(CudaRngDist dist, const RngStream *s, uint64_t first, size_t n, double *out,
                           FpError *err);

// out[4i .. 4i+3] = rng_block(s, first + i) for i < n.
FpStatus cuda_rng_blocks(const RngStream *s, uint64_t first, size_t n, uint32_t *out, FpError *err);

#ifdef __cplusplus
}
#endif

#endif
