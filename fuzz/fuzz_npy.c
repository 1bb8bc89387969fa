// libFuzzer target: .npy arrays (datasets/npy.c npy_parse, the strict header reader, then
// npy_make_dataset on what it accepted) and partition files (dataset_read_partition_file).
//
// Input layout: byte 0 picks what the rest is used as (mod 3: 0 the features x of a
// dataset with generated labels, 1 the labels and client ids of a generated 4-sample
// table, 2 a partition file of text lines for it), then the file's bytes.
#include "datasets/dataset.h"
#include "datasets/npy.h"
#include "fuzz/fuzz_util.h"

static void check_failure(FpStatus st, const Dataset *d, const FpError *err) {
    if (st == FP_OK)
        return;
    if (d)
        abort(); // failure must leave the output NULL
    fuzz_check_message(err->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    int use = data[0] % 3;
    data++;
    size--;
    FpError err = {0};
    NpyArray a;
    FpStatus st = npy_parse("fuzz.npy", data, size, &a, &err);
    if (st != FP_OK) {
        fuzz_check_message(err.msg);
        if (use != 2)
            return 0;
    } else if (a.count * (size_t)(a.dtype == NPY_U1 || a.dtype == NPY_I1 ? 1 : a.dtype == NPY_I4 || a.dtype == NPY_F4 ? 4 : 8) >
               size) {
        abort(); // a view beyond the file
    }
    Dataset *d = NULL;
    if (use == 0 && st == FP_OK && a.ndim >= 1 && a.shape[0] > 0 && a.shape[0] <= 4096) {
        int n = (int)a.shape[0];
        int64_t *lab = malloc(sizeof(int64_t) * (size_t)n);
        if (!lab)
            return 0;
        for (int i = 0; i < n; i++)
            lab[i] = i % 3;
        NpyArray y = {.dtype = NPY_I8, .ndim = 1, .shape = {n}, .count = (size_t)n, .data = (const unsigned char *)lab};
        st = npy_make_dataset("fuzz", &a, "x", &y, "y", NULL, "c", &d, &err);
        if (st == FP_OK && (!d || dataset_check(d, &err) != FP_OK))
            abort(); // a loaded set must satisfy the invariants the models rely on
        check_failure(st, d, &err);
        free(lab);
    } else if (use == 1 && st == FP_OK) {
        static const unsigned char px[4] = {0, 64, 128, 255};
        NpyArray x = {.dtype = NPY_U1, .ndim = 2, .shape = {4, 1}, .count = 4, .data = px};
        st = npy_make_dataset("fuzz", &x, "x", &a, "y", &a, "c", &d, &err);
        if (st == FP_OK && (!d || dataset_check(d, &err) != FP_OK || !d->client))
            abort();
        check_failure(st, d, &err);
    } else if (use == 2) {
        // The same bytes as a partition file (.npy by name) of a 4-sample table.
        d = dataset_create("fuzz", 4, 1, 1, 1, 2, 0, &err);
        if (!d)
            return 0;
        char path[128];
        const char *f = fuzz_file(0, data, size);
        snprintf(path, sizeof path, "%s", f);
        st = dataset_read_partition_file(d, path, &err); // not *.npy: read as text
        if (st == FP_OK) {
            for (int i = 0; i < d->n; i++)
                if (!d->client || d->client[i] < 0 || d->client[i] >= d->n_client_ids)
                    abort();
        } else
            fuzz_check_message(err.msg);
    }
    dataset_free(d);
    return 0;
}
