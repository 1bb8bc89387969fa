// Minibatches of a dataset as tape inputs: what local training, evaluation, the
// defenses that read local data and the attacks all feed a model.
#ifndef FEDPRIV_DATASETS_BATCH_H
#define FEDPRIV_DATASETS_BATCH_H

#include <stdint.h>

#include "core/autodiff.h"
#include "datasets/dataset.h"

// The input batch x (n, c, h, w) of samples idx[0..n) of d (idx NULL: samples 0..n) on
// the tape. On the CPU the samples are gathered straight into tape memory; other
// backends stage them in scratch (n · sample_size floats, host) first. NULL when the
// tape is out of memory.
Var *dataset_batch(Tape *t, const Dataset *d, const uint32_t *idx, int n, float *scratch);

#endif
