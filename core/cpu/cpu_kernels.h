// CPU kernels shared between the files of the CPU backend (not a public API).
#ifndef FEDPRIV_CORE_CPU_KERNELS_H
#define FEDPRIV_CORE_CPU_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/float_bits.h"

// e^a for a ≤ 0, written so that a loop over it vectorises (no libm call, no branch):
// LeNet's sigmoids spent 46% of its training step in scalar expf calls. Cody–Waite
// reduction a = n ln 2 + r with |r| ≤ ln 2 / 2 (n rounded by the 1.5·2²³ trick, read
// back from the float's bits, so no float-to-int conversion), e^r from Cephes' degree-7
// polynomial for expf, then 2ⁿ built in the exponent field. Below ln 2⁻¹²⁶ it returns 0
// (the true value is under 1.2e-38, a subnormal). NaN stays NaN. Measured over every float
// in [ln 2⁻¹²⁶, 0]: within 1.02 ulp of e^a (tests/test_cpu_sigmoid.c checks σ built on it
// against double precision).
static inline float cpu_exp_nonpositive(float a) {
    const float magic = 12582912.0f; // 1.5·2²³: adding it rounds to an integer, in the low bits
    float t = a * 1.44269504088896341f + magic;
    float n = t - magic;
    int32_t ni = (int32_t)(float_to_bits(t) - float_to_bits(magic)); // n, for |n| < 2²²
    float r = a - n * 0.693359375f - n * -2.12194440e-4f;               // ln 2 split, Cody–Waite
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float e = p * float_from_bits((uint32_t)(ni + 127) << 23);
    return a < -87.33654475f ? 0.0f : e;
}

// σ(x) = 1/(1 + e^−x) for x ≥ 0 and e^x/(1 + e^x) below, so the exponential's argument
// is never positive (no overflow) and small outputs keep their relative accuracy.
static inline float cpu_sigmoid(float x) {
    float e = cpu_exp_nonpositive(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

void cpu_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y, float *cols, int cols_filled);
void cpu_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx);
void cpu_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw, float *cols,
                                int cols_filled);
size_t cpu_conv2d_columns_size(const ConvGeom *g);
// c_i (m × n) = a_i (m × k) · b_iᵀ (b_i is n × k) for i < batch, each operand packed row-major
// and the batch's matrices consecutive: the product the per-example weight gradients need.
typedef void (*CpuBatchedProductNT)(int batch, int m, int n, int k, const float *a, const float *b, float *c);
// The loop of OpenBLAS GEMMs (the oracle, and the product without oneDNN).
void cpu_batched_product_nt(int batch, int m, int n, int k, const float *a, const float *b, float *c);
// Row i of dw (g->n rows of c_out·c_in·kh·kw floats) = example i's weight gradient (=).
void cpu_conv2d_backward_filter_per_example_by(const ConvGeom *g, const float *x, const float *dy, float *dw,
                                               CpuBatchedProductNT product);
void cpu_conv2d_backward_filter_per_example(const ConvGeom *g, const float *x, const float *dy, float *dw);
void cpu_maxpool_forward(const PoolGeom *g, const float *x, float *y, int32_t *argmax);
void cpu_maxpool_scatter(const PoolGeom *g, const float *dy, const int32_t *argmax, float *dx);
void cpu_maxpool_gather(const PoolGeom *g, const float *x, const int32_t *argmax, float *y);
void cpu_avgpool_forward(const PoolGeom *g, const float *x, float *y);
void cpu_avgpool_backward(const PoolGeom *g, const float *dy, float *dx);

// The plain direct convolution (no im2col): the oracle the im2col path is tested against.
void cpu_conv2d_forward_naive(const ConvGeom *g, const float *x, const float *w, float *y);

// The same three convolutions through oneDNN (cpu_conv_dnnl.c, built where oneDNN is
// found: FEDPRIV_HAVE_DNNL), falling back to the im2col ones above for geometries
// oneDNN would not run with an optimised implementation. They keep no columns (cols is
// ignored).
void dnnl_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y, float *cols, int cols_filled);
void dnnl_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx);
void dnnl_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw, float *cols,
                                 int cols_filled);
// Per-example weight gradients with the chunk's product on oneDNN's batched matmul.
void dnnl_conv2d_backward_filter_per_example(const ConvGeom *g, const float *x, const float *dy, float *dw);
// The batched product alone (tests compare it with cpu_batched_product_nt); 0 when oneDNN
// would run it with its reference loops, and then c is untouched.
int dnnl_batched_product_nt_run(int batch, int m, int n, int k, const float *a, const float *b, float *c);
// 1 when oneDNN runs direction dir (0 forward, 1 backward-data, 2 backward-filter) of g,
// with its implementation's name in impl; 0 when the im2col path runs it.
int dnnl_conv2d_takes(const ConvGeom *g, int dir, char *impl, size_t impl_size);

#endif
