// One DLG closure evaluation in isolation: the gradient-matching objective of
// bench/run-dlg.sh (LeNet with sigmoids, U(-0.5, 0.5) weights, one 1×28×28 dummy image
// and soft label, exact second order), evaluated at a fixed point again and again.
// Prints one JSON line: microseconds per evaluation (thread CPU time, median of runs)
// and a checksum of the loss and gradient bits, so that two builds can be compared for
// speed and for bit-identical results without the start-up cost of the CLI.
// Usage: dlg_closure [evaluations per run [runs]]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attacks/inversion.h"
#include "core/rng.h"

static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
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
    int evals = argc > 1 ? atoi(argv[1]) : 2000, runs = argc > 2 ? atoi(argv[2]) : 5;
    if (evals < 1)
        evals = 1;
    if (runs < 1 || runs > 100)
        runs = 5;
    FpError err = {0};
    cJSON *mj = cJSON_Parse("{\"name\": \"lenet\", \"init\": \"uniform\"}");
    DataShape shape = {.c = 1, .h = 28, .w = 28, .n_classes = 10};
    Model *m = model_create(mj, "model", &shape, backend_cpu(), &err);
    if (!m) {
        fprintf(stderr, "dlg_closure: %s\n", err.msg);
        return 2;
    }
    model_init(m, 1, NULL);
    size_t np = m->table.n_params;
    float *target = malloc(np * sizeof(float));
    RngStream rs = rng_stream(7, RNG_ATTACK, 0, 0);
    for (size_t i = 0; i < np; i++)
        target[i] = 0.01f * (float)rng_normal_at(&rs, i);
    InversionProblem p = {.model = m, .target = target, .batch = 1};
    InversionConfig cfg = {.steps = 1, .restarts = 1};
    InversionObjective *o = inversion_objective_create(&p, &cfg, &err);
    if (!o) {
        fprintf(stderr, "dlg_closure: %s\n", err.msg);
        return 2;
    }
    size_t nz = inversion_objective_size(o);
    float *z = malloc(nz * sizeof(float)), *grad = malloc(nz * sizeof(float));
    RngStream zs = rng_stream(1, RNG_ATTACK, 0, 1);
    for (size_t i = 0; i < nz; i++)
        z[i] = (float)rng_normal_at(&zs, i);
    double loss = 0, us[100];
    uint64_t h = 1469598103934665603ull;
    for (int r = 0; r < runs; r++) {
        double t0 = thread_cpu();
        for (int e = 0; e < evals; e++)
            if (inversion_objective_eval(o, z, grad, &loss, &err) != FP_OK) {
                fprintf(stderr, "dlg_closure: %s\n", err.msg);
                return 1;
            }
        us[r] = (thread_cpu() - t0) / evals * 1e6;
    }
    h = fnv(fnv(h, &loss, sizeof loss), grad, nz * sizeof(float));
    qsort(us, (size_t)runs, sizeof us[0], cmp_double);
    printf("{\"evaluations\": %d, \"runs\": %d, \"cpu_us_per_evaluation\": %.2f, \"min_us\": %.2f, \"loss\": %.9g, "
           "\"checksum\": \"%016llx\"}\n",
           evals, runs, us[runs / 2], us[0], loss, (unsigned long long)h);
    inversion_objective_free(o);
    model_free(m);
    cJSON_Delete(mj);
    free(target);
    free(z);
    free(grad);
    return 0;
}
