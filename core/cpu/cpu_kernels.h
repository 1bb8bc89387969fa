// CPU kernels shared between the files of the CPU backend (not a public API).
#ifndef FEDPRIV_CORE_CPU_KERNELS_H
#define FEDPRIV_CORE_CPU_KERNELS_H

#include <math.h>
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

#endif
