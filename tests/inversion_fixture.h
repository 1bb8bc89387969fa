// Shared by the gradient-inversion tests (test_dlg.c, test_ig.c): a small LeNet, the
// true batch gradient, smooth synthetic images, an IDX data set of them, and CLI helpers.
#ifndef FEDPRIV_TESTS_INVERSION_FIXTURE_H
#define FEDPRIV_TESTS_INVERSION_FIXTURE_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/autodiff.h"
#include "models/model.h"

static inline Model *tiny_lenet_init(int h, int w, uint64_t seed, const char *init) {
    FpError err = {0};
    char js[128];
    snprintf(js, sizeof js, "{\"name\": \"lenet\", \"init\": \"%s\"}", init);
    cJSON *mj = cJSON_Parse(js);
    DataShape sh = {.c = 1, .h = h, .w = w, .n_classes = 10};
    Model *m = model_create(mj, "model", &sh, backend_cpu(), &err);
    cJSON_Delete(mj);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_int_eq(model_init(m, seed, NULL), FP_OK);
    return m;
}

static inline Model *tiny_lenet(int h, int w, uint64_t seed) { return tiny_lenet_init(h, w, seed, "uniform"); }

// The batch-mean cross-entropy gradient of m at images x (B × h×w) with labels y (host, n_params).
static inline void true_gradient(Model *m, const float *x, const int32_t *y, int B, float *g) {
    Tape *t = tape_create(m->be);
    int L = m->table.n_layers;
    Var *p[16], *dw[16];
    ck_assert_int_eq(model_param_vars(m, t, 1, p), FP_OK);
    int shape[4] = {B, m->in.c, m->in.h, m->in.w};
    Var *xv = ad_from_host(t, x, 4, shape, 0);
    Var *loss = ad_cross_entropy(t, model_forward(m, t, p, xv, 1), y);
    ck_assert_int_eq(ad_grad(t, loss, p, L, dw, 0), FP_OK);
    for (int i = 0; i < L; i++)
        ad_to_host(t, dw[i], g + m->table.layers[i].offset);
    tape_free(t);
}

// A smooth 12×12 test image in [0,1] (a blob and a stripe, different per k).
static inline void test_image(int k, float *img, int h, int w) {
    for (int i = 0; i < h; i++)
        for (int j = 0; j < w; j++) {
            double di = i - (3 + k % 5), dj = j - (4 + (k * 3) % 5);
            double v = 0.8 * exp(-(di * di + dj * dj) / 8.0) + 0.2 * (0.5 + 0.5 * sin(0.9 * (i + k) + 0.4 * j));
            img[i * w + j] = (float)v;
        }
}

static inline const char *bin(void) { return getenv("FEDPRIV_BIN"); }

static inline int run_cmd(const char *cmd, char *errbuf, size_t n) {
    char full[8192], errfile[] = "/tmp/fedpriv-dlg-stderr-XXXXXX";
    int fd = mkstemp(errfile);
    close(fd);
    snprintf(full, sizeof full, "%s 2>%s >/dev/null", cmd, errfile);
    int st = system(full);
    FILE *f = fopen(errfile, "r");
    size_t got = f ? fread(errbuf, 1, n - 1, f) : 0;
    errbuf[got] = 0;
    if (f)
        fclose(f);
    unlink(errfile);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static inline void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

// A Fashion-MNIST-shaped IDX directory of n 12×12 images per split, labels k % 10.
static inline void write_idx_set(const char *dir, int n) {
    const char *split[2] = {"train", "t10k"};
    for (int s = 0; s < 2; s++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, split[s]);
        FILE *f = fopen(p, "wb");
        unsigned char hdr[16] = {0, 0, 8, 3, 0, 0, 0, (unsigned char)n, 0, 0, 0, 12, 0, 0, 0, 12};
        fwrite(hdr, 1, 16, f);
        for (int k = 0; k < n; k++) {
            float img[144];
            test_image(k + s, img, 12, 12);
            for (int i = 0; i < 144; i++)
                fputc((int)lrintf(img[i] * 255), f);
        }
        fclose(f);
        snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, split[s]);
        f = fopen(p, "wb");
        unsigned char lh[8] = {0, 0, 8, 1, 0, 0, 0, (unsigned char)n};
        fwrite(lh, 1, 8, f);
        for (int k = 0; k < n; k++)
            fputc(k % 10, f);
        fclose(f);
    }
}

#endif
