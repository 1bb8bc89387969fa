// CPU kernels shared between the files of the CPU backend (not a public API).
#ifndef FEDPRIV_CORE_CPU_KERNELS_H
#define FEDPRIV_CORE_CPU_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"

static inline float cpu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

void cpu_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y, float *cols, int cols_filled);
void cpu_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx);
void cpu_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw, float *cols,
                                int cols_filled);
size_t cpu_conv2d_columns_size(const ConvGeom *g);
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
// 1 when oneDNN runs direction dir (0 forward, 1 backward-data, 2 backward-filter) of g,
// with its implementation's name in impl; 0 when the im2col path runs it.
int dnnl_conv2d_takes(const ConvGeom *g, int dir, char *impl, size_t impl_size);

#endif
