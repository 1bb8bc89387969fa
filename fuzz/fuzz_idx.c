// libFuzzer target: IDX image + label files, raw or gzip (datasets/idx.c).
//
// Input layout: byte 0 picks n_classes for idx_load_classes (0..11; 0 = max label + 1,
// and 10 also runs idx_load), bytes 1-2 (little endian) the length of the image file,
// then the image file's bytes, then the label file's bytes.
#include "datasets/dataset.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3)
        return 0;
    int n_classes = data[0] % 12;
    size_t img_len = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (img_len > size)
        img_len = size;
    const char *img = fuzz_file(0, data, img_len);
    const char *lab = fuzz_file(1, data + img_len, size - img_len);
    Dataset *d = NULL;
    FpError err = {0};
    FpStatus st = n_classes == 10 ? idx_load(img, lab, "fuzz", &d, &err)
                                  : idx_load_classes(img, lab, "fuzz", n_classes, &d, &err);
    if (st == FP_OK) {
        // A loaded set must satisfy the invariants the models rely on.
        if (!d || dataset_check(d, &err) != FP_OK)
            abort();
    } else {
        if (d)
            abort(); // failure must leave the output NULL
        fuzz_check_message(err.msg);
    }
    dataset_free(d);
    return 0;
}
