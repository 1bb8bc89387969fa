// Perturbation throughput of the local-DP mechanisms (defenses/mech.h) on a 10^7-element
// upload, one thread: M elements/s of the fast path (best of R runs, wall clock and
// thread CPU time) beside the per-element oracle it must equal bit for bit. The target
// for spm and gaussian is >= 1000 M elements/s (numpy's ~67 M/s for the same job is the
// reference the issue gives). Built and run by bench/run-perturb.sh.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defenses/mech.h"

static double clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atoll(argv[1]) : 10000000;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    static const char *const specs[][2] = {
        {"laplace", "{\"name\":\"laplace\",\"epsilon\":0.6,\"clip\":1}"},
        {"laplace", "{\"name\":\"laplace\",\"epsilon\":0.6,\"clip\":1,\"sampler\":\"float\"}"},
        {"gaussian", "{\"name\":\"gaussian\",\"epsilon\":0.6,\"clip\":1}"},
        {"gaussian", "{\"name\":\"gaussian\",\"epsilon\":0.6,\"clip\":1,\"sampler\":\"float\"}"},
        {"pm", "{\"name\":\"pm\",\"epsilon\":0.6,\"clip\":1}"},
        {"pm", "{\"name\":\"pm\",\"epsilon\":0.6,\"clip\":1,\"sampler\":\"float\"}"},
        {"spm", "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":0.6}"},
        {"spm", "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":0.6,\"sampler\":\"float\"}"},
        {"duchi", "{\"name\":\"duchi\",\"epsilon\":0.6,\"clip\":1}"},
        {"ldp-fl", "{\"name\":\"ldp-fl\",\"epsilon\":0.6,\"clip\":1}"},
    };
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    if (!x || !y || n < 64) {
        fprintf(stderr, "perturb_bench: cannot allocate %zu elements\n", n);
        return 2;
    }
    int fail = 0;
    printf("%zu elements, one thread, best of %d runs (M elements/s)\n", n, reps);
    printf("%-10s %-8s %12s %12s %12s %s\n", "mechanism", "sampler", "wall", "cpu", "oracle", "fast == oracle");
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        cJSON *o = cJSON_Parse(specs[k][1]);
        MechSpec sp;
        static Mech m;
        FpError e = {0};
        if (mech_spec_parse(o, "bench", MECH_PARSE_AUDIT, NULL, &sp, &e) != FP_OK || mech_init(&m, &sp, &e) != FP_OK) {
            fprintf(stderr, "perturb_bench: %s\n", e.msg);
            return 2;
        }
        cJSON_Delete(o);
        RngStream s = rng_stream(1, RNG_DEFENSE, 0, 0);
        double best_wall = INFINITY, best_cpu = INFINITY;
        for (int r = 0; r < reps; r++) {
            for (size_t i = 0; i < n; i++)
                x[i] = (float)((double)(i % 2000) / 1000.0 - 1.0);
            double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
            mech_perturb(&m, x, n, &s, 0);
            double w1 = clock_s(CLOCK_MONOTONIC), c1 = clock_s(CLOCK_THREAD_CPUTIME_ID);
            best_wall = fmin(best_wall, w1 - w0);
            best_cpu = fmin(best_cpu, c1 - c0);
        }
        // The oracle on the same input, once (it is an order of magnitude slower).
        for (size_t i = 0; i < n; i++)
            y[i] = (float)((double)(i % 2000) / 1000.0 - 1.0);
        double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        mech_perturb_ref(&m, y, n, &s, 0);
        double t_ref = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        int same = memcmp(x, y, n * sizeof(float)) == 0;
        fail |= !same;
        printf("%-10s %-8s %12.0f %12.0f %12.0f %s\n", specs[k][0], mech_sampler_name(m.sampler->kind),
               n / best_wall / 1e6, n / best_cpu / 1e6, n / t_ref / 1e6, same ? "yes" : "NO");
    }
    free(x);
    free(y);
    return fail;
}
