// CIFAR-10, binary version (Krizhevsky 2009, cifar-10-binary.tar.gz): data_batch_1..5.bin
// and test_batch.bin, each 10,000 records of
//   [1 byte label 0..9][1024 bytes R][1024 bytes G][1024 bytes B]   (32×32, row-major)
// which is already C×H×W, so a record maps to x by byte/255 with no reordering.
// Files may be raw or gzip (read through zlib). A size that is not a positive multiple
// of 3073 or a label >= 10 is an FP_EFORMAT naming the file (and the record).
#include "datasets/dataset.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define CIFAR_SIDE 32
#define CIFAR_PIXELS (3 * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10

FpStatus cifar10_load(const char *const *files, int n_files, Dataset **out, FpError *err) {
    *out = NULL;
    if (!files || n_files < 1)
        return fp_fail(err, FP_EPARAM, "cifar10_load: at least one file is needed, got %d", n_files);
    for (int f = 0; f < n_files; f++)
        if (!files[f])
            return fp_fail(err, FP_EPARAM, "cifar10_load: file %d is NULL", f);
    unsigned char **buf = fp_calloc((size_t)n_files, sizeof *buf, err);
    size_t *len = fp_calloc((size_t)n_files, sizeof *len, err);
    FpStatus st = FP_OK;
    if (!buf || !len) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    size_t total = 0;
    for (int f = 0; f < n_files; f++) {
        if ((st = dataset_read_file(files[f], &buf[f], &len[f], err)) != FP_OK)
            goto done;
        if (len[f] == 0 || len[f] % CIFAR_RECORD != 0) {
            st = fp_fail(err, FP_EFORMAT,
                         "%s: %zu bytes is not a positive multiple of %d (CIFAR-10 binary records: "
                         "1 label byte + 3072 pixel bytes)",
                         files[f], len[f], CIFAR_RECORD);
            goto done;
        }
        size_t recs = len[f] / CIFAR_RECORD;
        for (size_t r = 0; r < recs; r++) {
            unsigned lab = buf[f][r * CIFAR_RECORD];
            if (lab >= CIFAR_CLASSES) {
                st = fp_fail(err, FP_EFORMAT, "%s: record %zu (byte offset %zu): label %u >= %d", files[f], r,
                             r * CIFAR_RECORD, lab, CIFAR_CLASSES);
                goto done;
            }
        }
        total += recs;
        if (total > INT_MAX) {
            st = fp_fail(err, FP_EFORMAT, "%s: more than %d records in all", files[f], INT_MAX);
            goto done;
        }
    }
    Dataset *d = dataset_create("cifar10", (int)total, 3, CIFAR_SIDE, CIFAR_SIDE, CIFAR_CLASSES, 0, err);
    if (!d) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    float lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = (float)v / 255.0f;
    size_t i = 0;
    for (int f = 0; f < n_files; f++)
        for (size_t r = 0; r < len[f] / CIFAR_RECORD; r++, i++) {
            const unsigned char *rec = buf[f] + r * CIFAR_RECORD;
            d->y[i] = rec[0];
            float *x = d->x + i * CIFAR_PIXELS;
            for (int j = 0; j < CIFAR_PIXELS; j++)
                x[j] = lut[rec[1 + j]];
        }
    *out = d;
done:
    if (buf)
        for (int f = 0; f < n_files; f++)
            free(buf[f]);
    free(buf);
    free(len);
    return st;
}
