// Measures OpenBLAS sgemm GFLOP/s on the MLP benchmark's GEMM shapes (batch 64,
// 784-256-10), single-threaded BLAS per worker and `threads` workers in parallel, as
// fedpriv trains. Prints one JSON line. The GEMM floor of the benchmark job is
// rate / (FLOPs per training sample).
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct { int iters; double flops; } Job;

// One training step's GEMMs: forward x·W1ᵀ, h·W2ᵀ; backward dW2 = dyᵀh, dh = dy·W2, dW1 = dhᵀx.
static void *work(void *arg) {
    Job *j = arg;
    const int B = 64, IN = 784, H = 256, O = 10;
    float *x = calloc((size_t)B * IN, 4), *w1 = calloc((size_t)H * IN, 4), *h = calloc((size_t)B * H, 4);
    float *w2 = calloc((size_t)O * H, 4), *y = calloc((size_t)B * O, 4), *dw1 = calloc((size_t)H * IN, 4);
    float *dw2 = calloc((size_t)O * H, 4);
    for (size_t i = 0; i < (size_t)B * IN; i++) x[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)H * IN; i++) w1[i] = (float)(i % 5) * 0.01f;
    for (int it = 0; it < j->iters; it++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, H, IN, 1, x, IN, w1, IN, 0, h, H);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, O, H, 1, h, H, w2, H, 0, y, O);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, H, B, 1, y, O, h, H, 0, dw2, H);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, O, 1, y, O, w2, H, 0, h, H);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, IN, B, 1, h, H, x, IN, 0, dw1, IN);
    }
    j->flops = (double)j->iters * 2.0 * B * (2.0 * H * IN + 3.0 * O * H);
    free(x); free(w1); free(h); free(w2); free(y); free(dw1); free(dw2);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1 || threads > 64) threads = 1;
    openblas_set_num_threads(1);
    Job jobs[64];
    pthread_t tid[64];
    for (int t = 0; t < threads; t++) jobs[t].iters = 2000;
    double t0 = now();
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, work, &jobs[t]);
    double flops = 0;
    for (int t = 0; t < threads; t++) { pthread_join(tid[t], NULL); flops += jobs[t].flops; }
    double secs = now() - t0;
    double per_sample = 2.0 * (2.0 * 256 * 784 + 3.0 * 10 * 256);
    printf("{\"threads\": %d, \"sgemm_gflops\": %.2f, \"flops_per_sample\": %.0f, \"floor_samples_per_s\": %.0f}\n",
           threads, flops / secs / 1e9, per_sample, flops / secs / per_sample);
    return 0;
}
