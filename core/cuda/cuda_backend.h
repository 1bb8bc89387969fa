// The CUDA backend's entry points beyond the Backend vtable. Only code built with
// FEDPRIV_HAVE_CUDA may include this (core/backend.c, tests/test_cuda.c, and code that
// sits behind the same #ifdef); everything else reaches the backend through
// backend_by_name("cuda", &err).
#ifndef FEDPRIV_CORE_CUDA_BACKEND_H
#define FEDPRIV_CORE_CUDA_BACKEND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" { // the project headers below are C; keep their functions' C linkage in C++
#endif

#include "core/backend.h"
#include "core/status.h"

// The backend, initialised on first use (thread-safe). NULL with FP_EBACKEND when there
// is no usable GPU: the message then starts "no CUDA device" (no driver, no device);
// any other FP_EBACKEND message is a real failure on a machine that has a GPU.
const Backend *cuda_backend_get(FpError *err);

// One line naming the device, its compute capability and the CUDA/cuDNN versions.
FpStatus cuda_device_describe(char *buf, size_t n, FpError *err);

// The convolution algorithms chosen so far, one line per geometry
// ("x(n,c,h,w) w(k,c,r,s) s1 p0: fwd=1 ws=0 bwd_data=1 ws=0 ..."), for logs and
// benchmarks; "(fallback)" marks a direction where no heuristic candidate qualified.
// Returns the number of characters written (0 when the backend is not available).
size_t cuda_conv_describe_plans(char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
