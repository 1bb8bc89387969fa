// Datasets in memory: creation, subsets, the deterministic holdout split, invariant
// checks, the optional tabular [0,1] scaling, and whole-file reads through zlib (raw
// and gzip alike). See datasets/dataset.h for the layout conventions.
#include "datasets/dataset.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

Dataset *dataset_create(const char *name, int n, int c, int h, int w, int n_classes, int target_dim,
                        FpError *err) {
    if (n < 0 || c < 1 || h < 1 || w < 1 || n_classes < 0 || target_dim < 0) {
        fp_fail(err, FP_EPARAM, "dataset %s: bad shape n=%d c=%d h=%d w=%d n_classes=%d target_dim=%d",
                name ? name : "", n, c, h, w, n_classes, target_dim);
        return NULL;
    }
    if (n_classes > 0 && target_dim > 0) {
        fp_fail(err, FP_EPARAM, "dataset %s: both n_classes (%d) and target_dim (%d) set", name ? name : "",
                n_classes, target_dim);
        return NULL;
    }
    uint64_t sample = (uint64_t)c * (uint64_t)h * (uint64_t)w;
    if (sample > ((uint64_t)1 << 40) || (n > 0 && sample > (SIZE_MAX / sizeof(float)) / (uint64_t)n)) {
        fp_fail(err, FP_ENOMEM, "dataset %s: %d samples of %llu values is too large", name ? name : "", n,
                (unsigned long long)sample);
        return NULL;
    }
    Dataset *d = fp_calloc(1, sizeof *d, err);
    if (!d)
        return NULL;
    if (name) {
        strncpy(d->name, name, sizeof d->name - 1);
        d->name[sizeof d->name - 1] = 0;
    }
    d->n = n;
    d->c = c;
    d->h = h;
    d->w = w;
    d->n_classes = n_classes;
    d->target_dim = target_dim;
    d->x = fp_calloc((size_t)n * (size_t)sample, sizeof(float), err);
    if (!d->x)
        goto fail;
    if (n_classes > 0 && !(d->y = fp_calloc((size_t)n, sizeof(int32_t), err)))
        goto fail;
    if (target_dim > 0 && !(d->target = fp_calloc((size_t)n * (size_t)target_dim, sizeof(float), err)))
        goto fail;
    return d;
fail:
    dataset_free(d);
    return NULL;
}

void dataset_free(Dataset *d) {
    if (!d)
        return;
    free(d->x);
    free(d->y);
    free(d->target);
    free(d->client);
    free(d);
}

FpStatus dataset_set_clients(Dataset *d, const int32_t *ids, int n_ids, const char *source, FpError *err) {
    if (!d || (d->n > 0 && !ids) || n_ids < 1)
        return fp_fail(err, FP_EPARAM, "dataset_set_clients: bad arguments");
    for (int i = 0; i < d->n; i++)
        if (ids[i] < 0 || ids[i] >= n_ids)
            return fp_fail(err, FP_EFORMAT, "%s: client id %d of sample %d outside [0, %d)", source, (int)ids[i], i,
                           n_ids);
    int32_t *c = fp_malloc(sizeof(int32_t) * (size_t)d->n + 1, err);
    if (!c)
        return err ? err->code : FP_ENOMEM;
    memcpy(c, ids, sizeof(int32_t) * (size_t)d->n);
    free(d->client);
    d->client = c;
    d->n_client_ids = n_ids;
    return FP_OK;
}

Dataset *dataset_subset(const Dataset *src, const uint32_t *idx, int n, FpError *err) {
    if (!src || n < 0 || (n > 0 && !idx)) {
        fp_fail(err, FP_EPARAM, "dataset_subset: bad arguments (n=%d)", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (idx[i] >= (uint32_t)src->n) {
            fp_fail(err, FP_EPARAM, "dataset %s: subset index %u at position %d is out of range (n=%d)",
                    src->name, idx[i], i, src->n);
            return NULL;
        }
    Dataset *d = dataset_create(src->name, n, src->c, src->h, src->w, src->n_classes, src->target_dim, err);
    if (!d)
        return NULL;
    memcpy(d->source, src->source, sizeof d->source);
    if (src->client) {
        if (!(d->client = fp_malloc(sizeof(int32_t) * (size_t)n + 1, err))) {
            dataset_free(d);
            return NULL;
        }
        d->n_client_ids = src->n_client_ids;
        for (int i = 0; i < n; i++)
            d->client[i] = src->client[idx[i]];
    }
    size_t ss = dataset_sample_size(src), td = (size_t)src->target_dim;
    for (int i = 0; i < n; i++) {
        memcpy(d->x + (size_t)i * ss, src->x + (size_t)idx[i] * ss, ss * sizeof(float));
        if (d->y)
            d->y[i] = src->y ? src->y[idx[i]] : 0;
        if (d->target && src->target)
            memcpy(d->target + (size_t)i * td, src->target + (size_t)idx[i] * td, td * sizeof(float));
    }
    return d;
}

FpStatus dataset_holdout(const Dataset *all, int denom, const char *split, Dataset **out, FpError *err) {
    *out = NULL;
    if (!all || denom < 2)
        return fp_fail(err, FP_EPARAM, "dataset_holdout: denominator must be >= 2, got %d", denom);
    int want_test;
    if (split && strcmp(split, "train") == 0)
        want_test = 0;
    else if (split && strcmp(split, "test") == 0)
        want_test = 1;
    else
        return fp_fail(err, FP_EPARAM, "dataset %s: split must be \"train\" or \"test\", got \"%s\"", all->name,
                       split ? split : "(null)");
    uint32_t *idx = fp_malloc((size_t)all->n * sizeof *idx + 1, err);
    if (!idx)
        return err ? err->code : FP_ENOMEM;
    int m = 0;
    if (all->n_classes > 0 && all->y) {
        // Per class: how many there are, then which of them (by rank) are test.
        int K = all->n_classes;
        int *total = fp_calloc((size_t)K, 2 * sizeof(int), err);
        if (!total) {
            free(idx);
            return err ? err->code : FP_ENOMEM;
        }
        int *seen = total + K;
        for (int i = 0; i < all->n; i++) {
            int32_t c = all->y[i];
            if (c < 0 || c >= K) {
                free(total);
                free(idx);
                return fp_fail(err, FP_EFORMAT, "dataset %s: label %d of sample %d outside [0, %d)", all->name,
                               (int)c, i, K);
            }
            total[c]++;
        }
        for (int i = 0; i < all->n; i++) {
            int c = all->y[i];
            int is_test = seen[c]++ >= total[c] - total[c] / denom;
            if (is_test == want_test)
                idx[m++] = (uint32_t)i;
        }
        free(total);
    } else {
        int first_test = all->n - all->n / denom;
        for (int i = want_test ? first_test : 0; i < (want_test ? all->n : first_test); i++)
            idx[m++] = (uint32_t)i;
    }
    Dataset *d = dataset_subset(all, idx, m, err);
    free(idx);
    if (!d)
        return err ? err->code : FP_ENOMEM;
    snprintf(d->name, sizeof d->name, "%.50s/%s", all->name, want_test ? "test" : "train");
    *out = d;
    return FP_OK;
}

FpStatus dataset_check(const Dataset *d, FpError *err) {
    if (!d)
        return fp_fail(err, FP_EPARAM, "dataset_check: no dataset");
    size_t ss = dataset_sample_size(d);
    int image = d->c > 1 || d->h > 1;
    for (int i = 0; i < d->n; i++) {
        const float *x = d->x + (size_t)i * ss;
        for (size_t j = 0; j < ss; j++) {
            if (!isfinite(x[j]))
                return fp_fail(err, FP_EFORMAT, "dataset %s: sample %d value %zu is not finite", d->name, i, j);
            if (image && (x[j] < 0.0f || x[j] > 1.0f))
                return fp_fail(err, FP_EFORMAT, "dataset %s: sample %d pixel %zu = %g outside [0,1]", d->name, i,
                               j, (double)x[j]);
        }
        if (d->n_classes > 0 && (!d->y || d->y[i] < 0 || d->y[i] >= d->n_classes))
            return fp_fail(err, FP_EFORMAT, "dataset %s: sample %d label %d outside [0, %d)", d->name, i,
                           d->y ? (int)d->y[i] : -1, d->n_classes);
        for (int t = 0; t < d->target_dim; t++)
            if (!d->target || !isfinite(d->target[(size_t)i * d->target_dim + t]))
                return fp_fail(err, FP_EFORMAT, "dataset %s: sample %d target %d is not finite", d->name, i, t);
    }
    return FP_OK;
}

FpStatus dataset_scale_to_unit(Dataset *d, const Dataset *ref, FpError *err) {
    if (!d || !ref)
        return fp_fail(err, FP_EPARAM, "dataset_scale_to_unit: no dataset");
    size_t ss = dataset_sample_size(d);
    if (dataset_sample_size(ref) != ss)
        return fp_fail(err, FP_EPARAM, "dataset %s: %zu features but reference %s has %zu", d->name, ss,
                       ref->name, dataset_sample_size(ref));
    if (ref->n < 1)
        return fp_fail(err, FP_EPARAM, "dataset %s: reference %s is empty", d->name, ref->name);
    float *lo = fp_malloc(2 * ss * sizeof(float), err);
    if (!lo)
        return err ? err->code : FP_ENOMEM;
    float *hi = lo + ss;
    memcpy(lo, ref->x, ss * sizeof(float));
    memcpy(hi, ref->x, ss * sizeof(float));
    for (int i = 1; i < ref->n; i++) {
        const float *x = ref->x + (size_t)i * ss;
        for (size_t j = 0; j < ss; j++) {
            lo[j] = x[j] < lo[j] ? x[j] : lo[j];
            hi[j] = x[j] > hi[j] ? x[j] : hi[j];
        }
    }
    // Range first: d may be ref itself.
    for (size_t j = 0; j < ss; j++)
        hi[j] = hi[j] > lo[j] ? 1.0f / (hi[j] - lo[j]) : 0.0f;
    for (int i = 0; i < d->n; i++) {
        float *x = d->x + (size_t)i * ss;
        for (size_t j = 0; j < ss; j++)
            x[j] = (x[j] - lo[j]) * hi[j];
    }
    free(lo);
    return FP_OK;
}

FpStatus dataset_read_file(const char *path, unsigned char **buf, size_t *len, FpError *err) {
    *buf = NULL;
    *len = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return fp_fail(err, FP_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fp_fail(err, FP_EIO, "%s: not a regular file", path);
    gzFile f = gzopen(path, "rb");
    if (!f)
        return fp_fail(err, FP_EIO, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
    gzbuffer(f, 1 << 17);
    size_t cap = (size_t)st.st_size + 1, n = 0;
    unsigned char *b = fp_malloc(cap, err);
    if (!b) {
        gzclose(f);
        return err ? err->code : FP_ENOMEM;
    }
    for (;;) {
        if (n == cap) {
            if (cap > ((size_t)1 << 40)) {
                free(b);
                gzclose(f);
                return fp_fail(err, FP_EFORMAT, "%s: more than 1 TiB uncompressed", path);
            }
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                gzclose(f);
                return fp_fail(err, FP_ENOMEM, "%s: out of memory reading %zu bytes", path, cap * 2);
            }
            b = nb;
            cap *= 2;
        }
        size_t want = cap - n < ((size_t)1 << 30) ? cap - n : ((size_t)1 << 30);
        int got = gzread(f, b + n, (unsigned)want);
        if (got > 0) {
            n += (size_t)got;
            continue;
        }
        int zerr = Z_OK;
        const char *zmsg = gzerror(f, &zerr);
        if (got < 0 || (zerr != Z_OK)) {
            // zmsg lives in f's state: format the message before gzclose frees it
            // (found by fuzz/fuzz_cifar.c; regression input fuzz/corpus/cifar/regress-*).
            FpStatus status;
            if (zerr == Z_ERRNO)
                status = fp_fail(err, FP_EIO, "%s: read error: %s", path, strerror(errno));
            else if (zerr == Z_BUF_ERROR)
                status = fp_fail(err, FP_EFORMAT, "%s: truncated gzip stream", path);
            else
                status = fp_fail(err, FP_EFORMAT, "%s: gzip error: %s", path, zmsg);
            free(b);
            gzclose(f);
            return status;
        }
        break; // end of file
    }
    gzclose(f);
    b[n] = 0; // the loop above always leaves n < cap
    *buf = b;
    *len = n;
    return FP_OK;
}
