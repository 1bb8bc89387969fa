// Tensors: float32, row-major, NCHW for images. A Tensor is a view: it names memory
// (host memory on the CPU backend, device memory on CUDA) and a shape, and owns
// nothing. Memory belongs to a Tape's arena (per-step values) or to a Model (its flat
// parameter buffer).
#ifndef FEDPRIV_CORE_TENSOR_H
#define FEDPRIV_CORE_TENSOR_H

#include <stddef.h>

#define TENSOR_MAX_DIMS 4

typedef struct Tensor {
    float *data;
    int ndim;
    int shape[TENSOR_MAX_DIMS];
    size_t numel;
} Tensor;

static inline size_t shape_numel(int ndim, const int *shape) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    return n;
}

static inline Tensor tensor_view(float *data, int ndim, const int *shape) {
    Tensor t = {.data = data, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    t.numel = shape_numel(ndim, shape);
    return t;
}

static inline int tensor_same_shape(const Tensor *a, const Tensor *b) {
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

#endif
