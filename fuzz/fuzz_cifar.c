// libFuzzer target: CIFAR-10 binary batches, raw or gzip (datasets/cifar10.c).
//
// Input layout: byte 0 even → the rest is one file; odd → bytes 1-2 (little endian)
// give the length of a first file and the remainder is a second file (files are
// concatenated by the loader).
#include "datasets/dataset.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const char *files[2];
    int n_files = 1;
    if (data[0] & 1) {
        if (size < 3)
            return 0;
        size_t a = (size_t)data[1] | (size_t)data[2] << 8;
        data += 3;
        size -= 3;
        if (a > size)
            a = size;
        files[0] = fuzz_file(0, data, a);
        files[1] = fuzz_file(1, data + a, size - a);
        n_files = 2;
    } else {
        files[0] = fuzz_file(0, data + 1, size - 1);
    }
    Dataset *d = NULL;
    FpError err = {0};
    FpStatus st = cifar10_load(files, n_files, &d, &err);
    if (st == FP_OK) {
        if (!d || d->c != 3 || d->h != 32 || d->w != 32 || dataset_check(d, &err) != FP_OK)
            abort();
    } else {
        if (d)
            abort(); // failure must leave the output NULL
        fuzz_check_message(err.msg);
    }
    dataset_free(d);
    return 0;
}
