// Partitioners: which samples each federated client holds. IID shards, Dirichlet(alpha)
// label skew (per-class variant), and McMahan et al.'s sorted shards. All draw from the
// RngStream they are given (RNG_PARTITION), sequentially, so a seed fixes the split.
// Conventions (dataset.h): every client gets >= 1 sample, indices per client are
// increasing, no index is used twice.
#include "datasets/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

Partition *partition_create(int n_clients, const int *count, FpError *err) {
    if (n_clients < 1) {
        fp_fail(err, FP_EPARAM, "partition: need at least 1 client, got %d", n_clients);
        return NULL;
    }
    for (int k = 0; count && k < n_clients; k++)
        if (count[k] < 0) {
            fp_fail(err, FP_EPARAM, "partition: client %d has a negative count %d", k, count[k]);
            return NULL;
        }
    Partition *p = fp_calloc(1, sizeof *p, err);
    if (!p)
        return NULL;
    p->n_clients = n_clients;
    p->count = fp_calloc((size_t)n_clients, sizeof *p->count, err);
    p->idx = fp_calloc((size_t)n_clients, sizeof *p->idx, err);
    if (!p->count || !p->idx)
        goto fail;
    for (int k = 0; k < n_clients; k++) {
        p->count[k] = count ? count[k] : 0;
        if (!(p->idx[k] = fp_malloc((size_t)p->count[k] * sizeof(uint32_t), err)))
            goto fail;
    }
    return p;
fail:
    partition_free(p);
    return NULL;
}

void partition_free(Partition *p) {
    if (!p)
        return;
    if (p->idx)
        for (int k = 0; k < p->n_clients; k++)
            free(p->idx[k]);
    free(p->idx);
    free(p->count);
    free(p);
}

FpStatus partition_validate(const Partition *p, int n, FpError *err) {
    if (!p || p->n_clients < 1 || !p->count || !p->idx)
        return fp_fail(err, FP_EPARAM, "partition: empty or malformed");
    unsigned char *seen = fp_calloc(n > 0 ? (size_t)n : 1, 1, err);
    if (!seen)
        return err ? err->code : FP_ENOMEM;
    for (int k = 0; k < p->n_clients; k++) {
        if (p->count[k] < 0 || (p->count[k] > 0 && !p->idx[k])) {
            free(seen);
            return fp_fail(err, FP_EPARAM, "partition: client %d has a bad count %d", k, p->count[k]);
        }
        for (int i = 0; i < p->count[k]; i++) {
            uint32_t j = p->idx[k][i];
            if (j >= (uint32_t)(n > 0 ? n : 0)) {
                free(seen);
                return fp_fail(err, FP_EPARAM, "partition: client %d index %u outside [0, %d)", k, j, n);
            }
            if (seen[j]) {
                free(seen);
                return fp_fail(err, FP_EPARAM, "partition: sample %u given twice (again to client %d)", j, k);
            }
            seen[j] = 1;
        }
    }
    free(seen);
    return FP_OK;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void sort_clients(Partition *p) {
    for (int k = 0; k < p->n_clients; k++)
        qsort(p->idx[k], (size_t)p->count[k], sizeof(uint32_t), cmp_u32);
}

static FpStatus check_sizes(const char *what, int n, int n_clients, FpError *err) {
    if (n_clients < 1)
        return fp_fail(err, FP_EPARAM, "%s partition: need at least 1 client, got %d", what, n_clients);
    if (n < n_clients)
        return fp_fail(err, FP_EPARAM, "%s partition: %d samples cannot give each of %d clients one", what,
                       n < 0 ? 0 : n, n_clients);
    return FP_OK;
}

FpStatus partition_iid(int n, int n_clients, RngStream *rng, Partition **out, FpError *err) {
    *out = NULL;
    FP_TRY(check_sizes("iid", n, n_clients, err));
    if (!rng)
        return fp_fail(err, FP_EPARAM, "iid partition: no random stream");
    uint32_t *perm = fp_malloc((size_t)n * sizeof *perm, err);
    int *count = fp_malloc((size_t)n_clients * sizeof *count, err);
    Partition *p = NULL;
    if (!perm || !count)
        goto fail;
    for (int i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    rng_shuffle_u32(rng, perm, (uint32_t)n);
    // Sizes floor(n/K) and, for the first n % K clients, one more: nothing dropped.
    for (int k = 0; k < n_clients; k++)
        count[k] = n / n_clients + (k < n % n_clients);
    if (!(p = partition_create(n_clients, count, err)))
        goto fail;
    for (int k = 0, at = 0; k < n_clients; k++) {
        memcpy(p->idx[k], perm + at, (size_t)count[k] * sizeof *perm);
        at += count[k];
    }
    sort_clients(p);
    free(perm);
    free(count);
    *out = p;
    return FP_OK;
fail:
    free(perm);
    free(count);
    return err ? err->code : FP_ENOMEM;
}

// Indices grouped by label, label 0 first, ascending index within a label (a stable
// counting sort). *start has n_classes+1 entries: label c is order[start[c]..start[c+1]).
static FpStatus group_by_label(const int32_t *labels, int n, int n_classes, uint32_t **order, int **start,
                               FpError *err) {
    *order = fp_malloc((size_t)n * sizeof **order, err);
    *start = fp_calloc((size_t)n_classes + 1, sizeof **start, err);
    if (!*order || !*start) {
        free(*order);
        free(*start);
        return err ? err->code : FP_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        (*start)[labels[i] + 1]++;
    for (int c = 0; c < n_classes; c++)
        (*start)[c + 1] += (*start)[c];
    int *fill = fp_malloc((size_t)n_classes * sizeof *fill + 1, err);
    if (!fill) {
        free(*order);
        free(*start);
        return err ? err->code : FP_ENOMEM;
    }
    memcpy(fill, *start, (size_t)n_classes * sizeof *fill);
    for (int i = 0; i < n; i++)
        (*order)[fill[labels[i]]++] = (uint32_t)i;
    free(fill);
    return FP_OK;
}

static FpStatus check_labels(const char *what, const int32_t *labels, int n, int n_classes, FpError *err) {
    if (!labels)
        return fp_fail(err, FP_EPARAM, "%s partition: needs labels (a classification dataset)", what);
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= n_classes)
            return fp_fail(err, FP_EPARAM, "%s partition: label %d of sample %d outside [0, %d)", what,
                           (int)labels[i], i, n_classes);
    return FP_OK;
}

FpStatus partition_dirichlet(const int32_t *labels, int n, int n_classes, int n_clients, double alpha,
                             RngStream *rng, Partition **out, FpError *err) {
    *out = NULL;
    FP_TRY(check_sizes("dirichlet", n, n_clients, err));
    if (!rng)
        return fp_fail(err, FP_EPARAM, "dirichlet partition: no random stream");
    if (!(alpha > 0.0 && alpha <= 1e6))
        return fp_fail(err, FP_EPARAM, "dirichlet partition: alpha must be in (0, 1e6], got %g", alpha);
    if (n_classes < 1)
        return fp_fail(err, FP_EPARAM, "dirichlet partition: n_classes must be >= 1, got %d", n_classes);
    FP_TRY(check_labels("dirichlet", labels, n, n_classes, err));

    uint32_t *order = NULL;
    int *start = NULL;
    FP_TRY(group_by_label(labels, n, n_classes, &order, &start, err));
    // owner[i]: the client that gets order[i]; then indices are gathered per client.
    int *owner = fp_malloc((size_t)n * sizeof *owner, err);
    int *count = fp_calloc((size_t)n_clients, sizeof *count, err);
    double *prop = fp_malloc((size_t)n_clients * sizeof *prop, err);
    Partition *p = NULL;
    if (!owner || !count || !prop)
        goto fail;
    for (int c = 0; c < n_classes; c++) {
        int nc = start[c + 1] - start[c];
        if (nc == 0)
            continue;
        rng_shuffle_u32(rng, order + start[c], (uint32_t)nc);
        // p ~ Dir(alpha): independent Gamma(alpha, 1) draws, normalised.
        double sum = 0;
        for (int k = 0; k < n_clients; k++)
            sum += prop[k] = rng_next_gamma(rng, alpha);
        if (!(sum > 0.0 && isfinite(sum))) {
            int k1 = (int)rng_next_below(rng, (uint32_t)n_clients);
            for (int k = 0; k < n_clients; k++)
                prop[k] = k == k1;
            sum = 1.0;
        }
        double cum = 0;
        int lo = 0;
        for (int k = 0; k < n_clients; k++) {
            cum += prop[k];
            int hi = k == n_clients - 1 ? nc : (int)floor(cum / sum * nc + 0.5);
            hi = hi < lo ? lo : (hi > nc ? nc : hi);
            for (int i = lo; i < hi; i++)
                owner[start[c] + i] = k;
            count[k] += hi - lo;
            lo = hi;
        }
    }
    // Every client gets a sample: an empty client takes the last index (in order[]
    // position) of the largest client, lowest ids first. n >= n_clients, so the
    // largest client always has at least 2 while someone is empty.
    for (int k = 0; k < n_clients; k++) {
        if (count[k] > 0)
            continue;
        int big = 0;
        for (int j = 1; j < n_clients; j++)
            if (count[j] > count[big])
                big = j;
        for (int i = n - 1; i >= 0; i--)
            if (owner[i] == big) {
                owner[i] = k;
                break;
            }
        count[big]--;
        count[k]++;
    }
    if (!(p = partition_create(n_clients, count, err)))
        goto fail;
    memset(count, 0, (size_t)n_clients * sizeof *count);
    for (int i = 0; i < n; i++)
        p->idx[owner[i]][count[owner[i]]++] = order[i];
    sort_clients(p);
    *out = p;
    free(order);
    free(start);
    free(owner);
    free(count);
    free(prop);
    return FP_OK;
fail:
    free(order);
    free(start);
    free(owner);
    free(count);
    free(prop);
    return err ? err->code : FP_ENOMEM;
}

FpStatus partition_shards(const int32_t *labels, int n, int n_clients, int shards_per_client, RngStream *rng,
                          Partition **out, FpError *err) {
    *out = NULL;
    FP_TRY(check_sizes("shards", n, n_clients, err));
    if (!rng)
        return fp_fail(err, FP_EPARAM, "shards partition: no random stream");
    if (shards_per_client < 1)
        return fp_fail(err, FP_EPARAM, "shards partition: shards per client must be >= 1, got %d",
                       shards_per_client);
    if ((long long)n_clients * shards_per_client > n)
        return fp_fail(err, FP_EPARAM, "shards partition: %d clients x %d shards needs at least %lld samples, got %d",
                       n_clients, shards_per_client, (long long)n_clients * shards_per_client, n);
    if (!labels)
        return fp_fail(err, FP_EPARAM, "shards partition: needs labels (a classification dataset)");
    int32_t max = 0;
    for (int i = 0; i < n; i++) {
        if (labels[i] < 0)
            return fp_fail(err, FP_EPARAM, "shards partition: label %d of sample %d is negative", (int)labels[i], i);
        max = labels[i] > max ? labels[i] : max;
    }
    if (max == INT32_MAX)
        return fp_fail(err, FP_EPARAM, "shards partition: label %d too large", (int)max);
    uint32_t *order = NULL, *shard = NULL;
    int *start = NULL, *count = NULL;
    Partition *p = NULL;
    FP_TRY(group_by_label(labels, n, max + 1, &order, &start, err));
    int S = n_clients * shards_per_client;
    shard = fp_malloc((size_t)S * sizeof *shard, err);
    count = fp_calloc((size_t)n_clients, sizeof *count, err);
    if (!shard || !count)
        goto fail;
    for (int s = 0; s < S; s++)
        shard[s] = (uint32_t)s;
    rng_shuffle_u32(rng, shard, (uint32_t)S);
    // Shard s covers order[lo(s) .. lo(s+1)), lo(s) = floor(s*n/S).
#define SHARD_LO(s) ((int)((long long)(s) * n / S))
    for (int k = 0; k < n_clients; k++)
        for (int j = 0; j < shards_per_client; j++) {
            uint32_t s = shard[k * shards_per_client + j];
            count[k] += SHARD_LO(s + 1) - SHARD_LO(s);
        }
    if (!(p = partition_create(n_clients, count, err)))
        goto fail;
    for (int k = 0; k < n_clients; k++) {
        int at = 0;
        for (int j = 0; j < shards_per_client; j++) {
            uint32_t s = shard[k * shards_per_client + j];
            for (int i = SHARD_LO(s); i < SHARD_LO(s + 1); i++)
                p->idx[k][at++] = order[i];
        }
    }
#undef SHARD_LO
    sort_clients(p);
    *out = p;
    free(order);
    free(start);
    free(shard);
    free(count);
    return FP_OK;
fail:
    free(order);
    free(start);
    free(shard);
    free(count);
    return err ? err->code : FP_ENOMEM;
}
