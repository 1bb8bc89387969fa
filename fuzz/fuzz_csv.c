// libFuzzer target: CSV tables (datasets/csv.c).
//
// Byte 0 picks the mode: 0 classification by column "label", 1 regression by column
// "target", 2 unlabelled, 3 both (must be rejected). The rest is the file.
#include "datasets/dataset.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    int mode = data[0] % 4;
    const char *path = fuzz_file(0, data + 1, size - 1);
    const char *label = mode == 0 || mode == 3 ? "label" : NULL;
    const char *target = mode == 1 || mode == 3 ? "target" : NULL;
    Dataset *d = NULL;
    FpError err = {0};
    FpStatus st = csv_load(path, label, target, &d, &err);
    if (st == FP_OK) {
        if (!d || mode == 3 || dataset_check(d, &err) != FP_OK)
            abort();
        // The holdout split runs on every loaded CSV without its own split.
        Dataset *tr = NULL;
        if (d->n > 0 && dataset_holdout(d, DATASET_HOLDOUT_DENOM, "train", &tr, &err) == FP_OK)
            dataset_free(tr);
    } else {
        if (d)
            abort(); // failure must leave the output NULL
        fuzz_check_message(err.msg);
    }
    dataset_free(d);
    return 0;
}
