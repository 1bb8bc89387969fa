// Minibatches on the tape (see datasets/batch.h).
#include "datasets/batch.h"

#include <string.h>

Var *dataset_batch(Tape *t, const Dataset *d, const uint32_t *idx, int n, float *scratch) {
    size_t ss = dataset_sample_size(d);
    int shape[4] = {n, d->c, d->h, d->w};
    // On the CPU the batch is gathered straight into tape memory (one copy, not two).
    int direct = tape_backend(t)->device == DEVICE_CPU;
    Var *x = direct ? ad_empty(t, 4, shape) : NULL;
    float *dst = direct ? (x ? x->t.data : NULL) : scratch;
    if (!dst)
        return NULL;
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * ss, d->x + (size_t)(idx ? idx[i] : (uint32_t)i) * ss, ss * sizeof(float));
    return direct ? x : ad_from_host(t, scratch, 4, shape, 0);
}
