// The layer table of a flat parameter buffer. Every model keeps all of its parameters
// in one contiguous float buffer; this table says which slice is which layer. FedAvg,
// clipping, noise and the per-layer mechanisms are flat loops over the buffer and
// this table.
#ifndef FEDPRIV_CORE_PARAMS_H
#define FEDPRIV_CORE_PARAMS_H

#include <stddef.h>

typedef enum {
    PARAM_WEIGHT = 0,
    PARAM_BIAS = 1,
    PARAM_BN_SCALE = 2,   // batch-norm gamma (trainable)
    PARAM_BN_SHIFT = 3,   // batch-norm beta (trainable)
    PARAM_BN_STAT = 4,    // batch-norm running mean/var: not trainable, never perturbed
} ParamKind;

typedef struct ParamLayer {
    char name[48];        // "conv1.weight"
    size_t offset;        // first element in the flat buffer
    size_t count;         // number of elements
    int ndim;
    int shape[4];
    ParamKind kind;
    int trainable;        // 0 for running statistics
} ParamLayer;

typedef struct ParamTable {
    int n_layers;
    ParamLayer *layers;
    size_t n_params;      // total elements, trainable or not
    size_t n_trainable;   // elements in trainable layers
} ParamTable;

#endif
