// One local step of DP-SGD against one ordinary step, in fedpriv, timed in CPU seconds
// (one thread), on Fashion-MNIST training records.
//
//   non-private: fl's local_train for `steps` minibatch steps of `batch` records (forward,
//                mean cross-entropy, gradient, SGD update: exactly a client's local step);
//   dp-sgd:      defenses/dpsgd_step.h's private step on the same batches (per-example
//                gradients from one backward pass, clipping at C = 1, noise σ = 1 on the sum,
//                divided by the batch size) followed by the same SGD update, with the
//                defense's default sampler (the discrete Gaussian on a grid, ClipNoise);
//   dp-sgd float: the same with the float sampler (Box–Muller; what the step drew before
//                the safe sampler, "sampler": "float");
//   dp-sgd σ=0:  the same without drawing noise, to show what the noise costs.
// Each of `repeats` rounds times every variant once, in turn, after the model is reset to
// its seeded initialisation; the medians are printed as one JSON line: CPU milliseconds
// per step on the CPU backend, wall milliseconds (the device synchronised) on CUDA.
// Usage: dpsgd_step MODEL BATCH [steps [repeats [cpu|cuda]]]   (MODEL: mlp, cnn-mnist, lenet, logreg)
//        dpsgd_step --kernels   prints the OpenBLAS kernel set in use
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defenses/dpsgd_step.h"
#include "fl/fed.h"

// Process CPU seconds on the CPU backend; wall seconds after a device sync on CUDA.
static const Backend *timed_be;
static double cpu_now(void) {
    struct timespec t;
    if (timed_be->device != DEVICE_CPU)
        timed_be->sync();
    clock_gettime(timed_be->device == DEVICE_CPU ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int fail(const char *what, const FpError *err) {
    fprintf(stderr, "dpsgd_step: %s: %s\n", what, err->msg);
    return 2;
}

// CPU seconds of `steps` private steps (σ as given) with SGD updates on consecutive
// batches of order[].
static double time_private(Model *m, Tape *t, const Dataset *d, const uint32_t *order, int batch, int steps,
                           double sigma, const ClipNoise *sampler, float *grad, float *vbuf, FpError *err) {
    DpSgdStepConfig cfg = {.clip = 1.0, .noise_multiplier = sigma, .denominator = batch, .sampler = sampler};
    RngStream rs = rng_stream(7, RNG_DEFENSE, 0, 0);
    double t0 = cpu_now();
    for (int k = 0; k < steps; k++) {
        if (dpsgd_step(m, t, d, order + (size_t)k * batch, batch, &cfg, &rs, (uint64_t)(k + 1) << 32, grad, NULL,
                       err) != FP_OK)
            return -1;
        m->be->sgd_step(m->table.n_params, m->params, grad, vbuf, 0.05f, 0.0f, 0.0f);
    }
    return cpu_now() - t0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--kernels") == 0) { // the OpenBLAS kernel set in use
        printf("%s\n", backend_cpu_blas_kernels());
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: dpsgd_step MODEL BATCH [steps [repeats [cpu|cuda]]]\n");
        return 2;
    }
    const char *name = argv[1];
    int batch = atoi(argv[2]), steps = argc > 3 ? atoi(argv[3]) : 50, repeats = argc > 4 ? atoi(argv[4]) : 5;
    if (batch < 1 || steps < 1 || repeats < 1 || repeats > 64) {
        fprintf(stderr, "dpsgd_step: bad batch, steps or repeats\n");
        return 2;
    }
    openblas_set_num_threads(1);
    FpError err = {0};
    const Backend *be = backend_by_name(argc > 5 ? argv[5] : "cpu", &err);
    if (!be)
        return fail("device", &err);
    timed_be = be;
    Dataset *d = NULL;
    if (dataset_open("fashion-mnist", "train", getenv("FASHION_MNIST_DIR"), &d, &err) != FP_OK)
        return fail("data", &err);
    char json[96];
    snprintf(json, sizeof json, "{\"name\": \"%s\"}", name);
    cJSON *mj = cJSON_Parse(json);
    DataShape in = {d->c, d->h, d->w, d->n_classes, 0};
    Model *m = mj ? model_create(mj, "model", &in, be, &err) : NULL;
    cJSON_Delete(mj);
    if (!m)
        return fail("model", &err);
    model_init(m, 1, NULL);
    size_t np = m->table.n_params;
    int n = batch * steps;
    if (n > d->n)
        n = d->n - d->n % batch, steps = n / batch;
    float *init = malloc(sizeof(float) * np), *grad = be->alloc(sizeof(float) * np), *vbuf = be->alloc(sizeof(float) * np);
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)n);
    Tape *t = tape_create(m->be), *tp = tape_create(m->be);
    if (!init || !grad || !vbuf || !idx || !t || !tp || dpsgd_check_model(m, &err) != FP_OK)
        return fail("setup", &err);
    be->fill(vbuf, np, 0.0f);
    model_get_params(m, init);
    for (int i = 0; i < n; i++)
        idx[i] = (uint32_t)i;
    // The private runs use the batches of local_train's first epoch, in its order.
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)n);
    memcpy(order, idx, sizeof(uint32_t) * (size_t)n);
    RngStream shuf = rng_stream(3, RNG_SHUFFLE, 0, 0);
    rng_shuffle_u32(&shuf, order, (uint32_t)n);
    LocalTrainConfig lc = {.epochs = 1, .steps = steps, .batch_size = batch, .lr = 0.05};
    ClipNoise safe, flt;
    cJSON *sj = cJSON_Parse("{}"), *fj = cJSON_Parse("{\"sampler\": \"float\"}");
    if (clip_noise_parse(sj, "defense", &m->table, &safe, &err) != FP_OK || clip_noise_build(&safe, 1.0, &err) != FP_OK ||
        clip_noise_parse(fj, "defense", &m->table, &flt, &err) != FP_OK)
        return fail("sampler", &err);
    cJSON_Delete(sj);
    cJSON_Delete(fj);
    double plain[64], priv[64], privf[64], priv0[64];
    for (int r = 0; r < repeats; r++) {
        model_set_params(m, init);
        RngStream sh = rng_stream(3, RNG_SHUFFLE, 0, 0);
        double t0 = cpu_now();
        if (local_train(m, t, d, idx, n, &lc, &sh, vbuf, &err) != FP_OK)
            return fail("local_train", &err);
        plain[r] = cpu_now() - t0;
        model_set_params(m, init);
        priv[r] = time_private(m, tp, d, order, batch, steps, 1.0, &safe, grad, vbuf, &err);
        model_set_params(m, init);
        privf[r] = time_private(m, tp, d, order, batch, steps, 1.0, &flt, grad, vbuf, &err);
        model_set_params(m, init);
        priv0[r] = time_private(m, tp, d, order, batch, steps, 0.0, NULL, grad, vbuf, &err);
        if (priv[r] < 0 || privf[r] < 0 || priv0[r] < 0)
            return fail("dpsgd_step", &err);
    }
    double p = median(plain, repeats) / steps * 1e3, q = median(priv, repeats) / steps * 1e3,
           qf = median(privf, repeats) / steps * 1e3, q0 = median(priv0, repeats) / steps * 1e3;
    printf("{\"device\": \"%s\", \"clock\": \"%s\", \"model\": \"%s\", \"params\": %zu, \"batch\": %d, \"steps\": %d, \"repeats\": %d, "
           "\"ms_per_step\": %.4f, \"dpsgd_ms_per_step\": %.4f, \"dpsgd_float_ms_per_step\": %.4f, "
           "\"dpsgd_no_noise_ms_per_step\": %.4f, \"ratio\": %.3f, \"sampler\": \"safe, T = %g\"}\n",
           be->name, be->device == DEVICE_CPU ? "process cpu" : "wall", name, np, batch, steps, repeats, p, q, qf, q0,
           q / p, safe.table.sigma);
    clip_noise_free(&safe);
    tape_free(t);
    tape_free(tp);
    model_free(m);
    dataset_free(d);
    free(init);
    be->free(grad);
    be->free(vbuf);
    free(idx);
    free(order);
    return 0;
}
