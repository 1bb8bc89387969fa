// libFuzzer target: PNG input through libpng (eval/png.c png_read).
#include <stdlib.h>

#include "fuzz/fuzz_util.h"
#include "eval/png.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, data, size);
    float *img = NULL;
    int c = 0, h = 0, w = 0;
    FpError err = {0};
    if (png_read(path, &img, &c, &h, &w, &err) == FP_OK) {
        if (!img || (c != 1 && c != 3) || h < 1 || w < 1 || h > PNG_MAX_SIDE || w > PNG_MAX_SIDE)
            abort();
        // Every value must be in [0, 1]; reading all of them also lets ASan see the size.
        for (size_t i = 0; i < (size_t)c * h * w; i++)
            if (!(img[i] >= 0.0f && img[i] <= 1.0f))
                abort();
    } else {
        if (img)
            abort(); // failure must leave the output NULL
        fuzz_check_message(err.msg);
    }
    free(img);
    return 0;
}
