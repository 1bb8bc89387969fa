// The MLP benchmark job of bench/run.sh (bench/mlp-job.json: Fashion-MNIST, 784-256-10,
// 10 IID clients, E=1, B=64, lr 0.05, 5 rounds) timed in CPU seconds rather than wall
// seconds, beside the GEMM floor timed the same way in the same process, so that the
// "of floor" figure holds on a machine that other jobs keep busy.
//
// Each repeat resets the model to its seeded initialisation and runs every round of the
// federation (local training, FedAvg); the per-round test evaluation runs on a single
// test sample so that it costs nothing, and the full test set is scored once at the end
// (untimed). Before each repeat the floor is measured: the five GEMMs of one training
// step (forward x·W1ᵀ and h·W2ᵀ; backward dW2 = dyᵀh, dh = dy·W2, dW1 = dhᵀx, as
// bench/sgemm_rate.c) run single-threaded in a loop, CPU-timed. Prints one JSON line with
// medians. Usage: mlp_cpu CONFIG [threads [repeats]]
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/jsonv.h"
#include "defenses/registry.h"
#include "fl/experiment.h"

static double cpu_seconds(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
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

// Samples per CPU second that the GEMMs alone allow (batch 64, 784-256-10).
static double gemm_floor(int iters) {
    const int B = 64, IN = 784, H = 256, O = 10;
    float *x = calloc((size_t)B * IN, 4), *w1 = calloc((size_t)H * IN, 4), *h = calloc((size_t)B * H, 4);
    float *w2 = calloc((size_t)O * H, 4), *y = calloc((size_t)B * O, 4), *dw1 = calloc((size_t)H * IN, 4);
    float *dw2 = calloc((size_t)O * H, 4);
    for (size_t i = 0; i < (size_t)B * IN; i++)
        x[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)H * IN; i++)
        w1[i] = (float)(i % 5) * 0.01f;
    double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int it = 0; it < iters; it++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, H, IN, 1, x, IN, w1, IN, 0, h, H);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, O, H, 1, h, H, w2, H, 0, y, O);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, H, B, 1, y, O, h, H, 0, dw2, H);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, O, 1, y, O, w2, H, 0, h, H);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, IN, B, 1, h, H, x, IN, 0, dw1, IN);
    }
    double secs = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    free(x); free(w1); free(h); free(w2); free(y); free(dw1); free(dw2);
    return (double)iters * B / secs;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: mlp_cpu CONFIG [threads [repeats]]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 1, repeats = argc > 3 ? atoi(argv[3]) : 3;
    if (threads < 1)
        threads = 1;
    if (repeats < 1 || repeats > 64)
        repeats = 3;
    FpError err = {0};
    cJSON *root = NULL;
    Experiment ex;
    if (jv_load_file(argv[1], &root, &err) != FP_OK || experiment_load(root, NULL, "cpu", threads, defense_find, &ex, &err) != FP_OK) {
        fprintf(stderr, "mlp_cpu: %s\n", err.msg);
        return 2;
    }
    size_t np = ex.model->table.n_params;
    float *init = malloc(np * sizeof(float));
    model_get_params(ex.model, init);
    Dataset *full_test = ex.test;
    uint32_t first = 0;
    ex.test = dataset_subset(full_test, &first, 1, &err);
    if (!init || !ex.test) {
        fprintf(stderr, "mlp_cpu: %s\n", init ? err.msg : "out of memory");
        return 2;
    }
    openblas_set_num_threads(1);
    double cpu[64], wall[64], floor_rate[64];
    long samples = 0;
    for (int r = 0; r < repeats; r++) {
        floor_rate[r] = gemm_floor(1000);
        model_set_params(ex.model, init);
        Federation *f = experiment_federation(&ex, NULL, 1, &err);
        if (!f) {
            fprintf(stderr, "mlp_cpu: %s\n", err.msg);
            return 2;
        }
        double c0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_seconds(CLOCK_MONOTONIC);
        FpStatus st = fed_run(f, 0, &err);
        cpu[r] = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
        wall[r] = cpu_seconds(CLOCK_MONOTONIC) - w0;
        fed_free(f);
        if (st != FP_OK) {
            fprintf(stderr, "mlp_cpu: %s\n", err.msg);
            return 1;
        }
        samples = (long)ex.fed.rounds * ex.train->n;
    }
    double acc = 0, loss = 0;
    if (model_evaluate(ex.model, full_test, threads, &acc, &loss, NULL, &err) != FP_OK) {
        fprintf(stderr, "mlp_cpu: %s\n", err.msg);
        return 1;
    }
    double c = median(cpu, repeats), w = median(wall, repeats), fl = median(floor_rate, repeats);
    printf("{\"threads\": %d, \"repeats\": %d, \"samples\": %ld, \"cpu_seconds\": %.4f, \"wall_seconds\": %.4f, "
           "\"samples_per_cpu_s\": %.0f, \"floor_samples_per_cpu_s\": %.0f, \"of_floor\": %.4f, "
           "\"test_accuracy\": %.4f}\n",
           threads, repeats, samples, c, w, samples / c, fl, samples / c / fl, acc);
    dataset_free(ex.test);
    ex.test = full_test;
    experiment_free(&ex);
    cJSON_Delete(root);
    free(init);
    return 0;
}
