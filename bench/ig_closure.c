// One Inverting Gradients closure evaluation in isolation: the objective of
// bench/run-ig.sh (cosine distance + total variation, given labels, one gradient or E
// simulated local steps) on a model at its default initialisation, evaluated at a fixed
// point again and again. Prints one JSON line: microseconds per evaluation (thread CPU
// time, median of runs) and a checksum of the loss and gradient bits, so that two builds
// can be compared for speed and for bit-identical results without the CLI's start-up.
// Build: bash bench/link.sh bench/ig_closure.c build/bench/ig_closure
// Linked with BENCH_LDFLAGS=-Wl,--wrap=cblas_sgemm (link.sh passes it on), every OpenBLAS
// sgemm call of the library is timed as well, and the line adds the GEMMs' time and calls
// in the median run's closures ("gemm_us_per_evaluation", OpenBLAS's packing included):
// the part of a closure that no change outside OpenBLAS can make faster. The timing costs
// the wrapped closure about 40 ns a call: compare closures unwrapped.
// Usage: ig_closure MODEL BATCH [local steps [evaluations per run [runs]]]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "attacks/inversion.h"
#include "core/clock.h"
#include "core/rng.h"

// Seconds inside cblas_sgemm since the start, and the calls, when the linker wrapped it:
// the library's calls land in __wrap_cblas_sgemm, which times __real_cblas_sgemm. Without
// --wrap nothing calls the wrapper and the weak __real_cblas_sgemm stays unresolved. The
// wrapper has the BLAS signature and no context, hence the two file-scope counters (this
// program's only state outside main). CLOCK_MONOTONIC, not the thread's CPU clock: on one
// thread they agree, and the CPU clock is a system call (about 0.4 µs here, which a
// closure's hundred-odd GEMMs would feel) where the monotonic one is read in user space.
static double gemm_seconds;
static long gemm_calls;

void __real_cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER, OPENBLAS_CONST enum CBLAS_TRANSPOSE,
                        OPENBLAS_CONST enum CBLAS_TRANSPOSE, OPENBLAS_CONST blasint, OPENBLAS_CONST blasint,
                        OPENBLAS_CONST blasint, OPENBLAS_CONST float, OPENBLAS_CONST float *,
                        OPENBLAS_CONST blasint, OPENBLAS_CONST float *, OPENBLAS_CONST blasint,
                        OPENBLAS_CONST float, float *, OPENBLAS_CONST blasint) __attribute__((weak));
void __wrap_cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER o, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
                        OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m,
                        OPENBLAS_CONST blasint n, OPENBLAS_CONST blasint k, OPENBLAS_CONST float alpha,
                        OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *b,
                        OPENBLAS_CONST blasint ldb, OPENBLAS_CONST float beta, float *c,
                        OPENBLAS_CONST blasint ldc) {
    double t0 = fp_clock_seconds(CLOCK_MONOTONIC);
    __real_cblas_sgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm_seconds += fp_clock_seconds(CLOCK_MONOTONIC) - t0;
    gemm_calls++;
}

// A run's closure and GEMM times, ordered by the closure's.
typedef struct {
    double us, gemm_us;
    long gemm_calls;
} RunTime;

static int cmp_run(const void *a, const void *b) {
    double x = ((const RunTime *)a)->us, y = ((const RunTime *)b)->us;
    return (x > y) - (x < y);
}

// FNV-1a over the bytes.
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: ig_closure MODEL BATCH [local steps [evaluations [runs]]]\n");
        return 2;
    }
    int batch = atoi(argv[2]), local = argc > 3 ? atoi(argv[3]) : 1;
    int evals = argc > 4 ? atoi(argv[4]) : 500, runs = argc > 5 ? atoi(argv[5]) : 5;
    if (batch < 1 || batch > 64 || local < 1 || local > 100) {
        fprintf(stderr, "ig_closure: batch must be 1..64 and local steps 1..100\n");
        return 2;
    }
    if (evals < 1)
        evals = 1;
    if (runs < 1 || runs > 100)
        runs = 5;
    FpError err = {0};
    char mjs[128];
    snprintf(mjs, sizeof mjs, "{\"name\": \"%.40s\", \"init\": \"default\"}", argv[1]);
    cJSON *mj = cJSON_Parse(mjs);
    DataShape shape = {.c = 1, .h = 28, .w = 28, .n_classes = 10};
    Model *m = model_create(mj, "model", &shape, backend_cpu(), &err);
    if (!m) {
        fprintf(stderr, "ig_closure: %s\n", err.msg);
        return 2;
    }
    model_init(m, 1, NULL);
    size_t np = m->table.n_params;
    float *target = malloc(np * sizeof(float));
    RngStream rs = rng_stream(7, RNG_ATTACK, 0, 0);
    for (size_t i = 0; i < np; i++)
        target[i] = 0.01f * (float)rng_normal_at(&rs, i);
    int32_t labels[64];
    for (int i = 0; i < batch; i++)
        labels[i] = (int32_t)((3 * i + 1) % 10);
    InversionProblem p = {.model = m, .target = target, .batch = batch, .labels = labels,
                          .local = {.steps = local, .lr = 0.01}};
    InversionConfig cfg = {.steps = 1, .restarts = 1, .distance = INV_DISTANCE_COSINE, .tv = 1e-4,
                           .optimizer = INV_OPTIMIZER_ADAM_SIGNED, .adam = {.lr = 0.1, .step_decay = 1, .boxed = 1}};
    InversionObjective *o = inversion_objective_create(&p, &cfg, &err);
    if (!o) {
        fprintf(stderr, "ig_closure: %s\n", err.msg);
        return 2;
    }
    size_t nz = inversion_objective_size(o);
    float *z = malloc(nz * sizeof(float)), *grad = malloc(nz * sizeof(float));
    RngStream zs = rng_stream(1, RNG_ATTACK, 0, 1);
    for (size_t i = 0; i < nz; i++)
        z[i] = (float)rng_normal_at(&zs, i);
    double loss = 0;
    RunTime t[100];
    uint64_t h = 1469598103934665603ull;
    for (int r = 0; r < runs; r++) {
        double t0 = fp_clock_seconds(CLOCK_THREAD_CPUTIME_ID), g0 = gemm_seconds;
        long c0 = gemm_calls;
        for (int e = 0; e < evals; e++)
            if (inversion_objective_eval(o, z, grad, &loss, &err) != FP_OK) {
                fprintf(stderr, "ig_closure: %s\n", err.msg);
                return 1;
            }
        t[r].us = (fp_clock_seconds(CLOCK_THREAD_CPUTIME_ID) - t0) / evals * 1e6;
        t[r].gemm_us = (gemm_seconds - g0) / evals * 1e6;
        t[r].gemm_calls = (gemm_calls - c0) / evals;
    }
    h = fnv(fnv(h, &loss, sizeof loss), grad, nz * sizeof(float));
    qsort(t, (size_t)runs, sizeof t[0], cmp_run);
    char gemm[96] = "";
    if (gemm_calls > 0)
        snprintf(gemm, sizeof gemm, ", \"gemm_us_per_evaluation\": %.2f, \"gemm_calls_per_evaluation\": %ld",
                 t[runs / 2].gemm_us, t[runs / 2].gemm_calls);
    printf("{\"model\": \"%s\", \"batch\": %d, \"local_steps\": %d, \"evaluations\": %d, \"runs\": %d, "
           "\"cpu_us_per_evaluation\": %.2f, \"min_us\": %.2f%s, \"loss\": %.9g, \"checksum\": \"%016llx\"}\n",
           argv[1], batch, local, evals, runs, t[runs / 2].us, t[0].us, gemm, loss, (unsigned long long)h);
    inversion_objective_free(o);
    model_free(m);
    cJSON_Delete(mj);
    free(target);
    free(z);
    free(grad);
    return 0;
}
