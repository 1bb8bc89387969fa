// In-memory datasets (host memory, float32) and their loaders.
//
// A sample is x[i*sample_size .. (i+1)*sample_size), laid out C×H×W for images
// (values in [0,1]) or as a flat feature/time vector otherwise. Classification sets
// carry int32 labels y[i] in [0, n_classes); regression sets carry target[i*target_dim..].
#ifndef FEDPRIV_DATASETS_DATASET_H
#define FEDPRIV_DATASETS_DATASET_H

#include <stdint.h>
#include <stddef.h>

#include "core/rng.h"
#include "core/status.h"

typedef struct Dataset {
    char name[64];
    int n;                // number of samples
    int c, h, w;          // per-sample shape; tabular: c=h=1, w=features; sequence: c=1, h=steps, w=features
    int n_classes;        // 0 for regression
    int target_dim;       // regression outputs per sample (0 for classification)
    float *x;             // n * c*h*w
    int32_t *y;           // n labels, or NULL
    float *target;        // n * target_dim, or NULL
} Dataset;

static inline size_t dataset_sample_size(const Dataset *d) { return (size_t)d->c * d->h * d->w; }

// Allocates an empty dataset of the given shape (x, and y or target, zeroed).
Dataset *dataset_create(const char *name, int n, int c, int h, int w, int n_classes, int target_dim,
                        FpError *err);
void dataset_free(Dataset *d);

// A new dataset holding the samples idx[0..n) of src, in that order.
Dataset *dataset_subset(const Dataset *src, const uint32_t *idx, int n, FpError *err);

// Splits of data among clients: client k owns idx[k][0..count[k]) (indices into a Dataset).
typedef struct Partition {
    int n_clients;
    int *count;
    uint32_t **idx;
} Partition;

void partition_free(Partition *p);

#endif
