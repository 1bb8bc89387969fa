// Perturbation throughput of the local-DP mechanisms (defenses/dp/mech.h) on a 10^7-element
// upload, one thread, the safe and the float samplers side by side: M elements/s of the
// fast path (best of R runs) in thread CPU time and wall clock, beside the per-element
// oracle it must equal bit for bit. Targets: safe laplace >= 300 M elements/s of one core's
// CPU time; spm and the float samplers >= 1000. Then the federated defenses' Gaussian and
// Laplace noise, safe and float (the Gaussian's safe path beside its per-element one; the
// safe Laplace's target: >= 50 M coordinates/s). Built and run by bench/run-perturb.sh.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defenses/clip.h"
#include "defenses/dp/dlaplace.h"
#include "defenses/dp/mech.h"

static double clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    double cpu, wall, oracle;
    int same, ok;
} Speed;

static Mech mech;   // a Mech holds its sampler's tables: keep it off the stack

static Speed measure(const char *json, float *x, float *y, size_t n, int reps) {
    Speed sp = {0};
    cJSON *o = cJSON_Parse(json);
    MechSpec spec;
    FpError e = {0};
    if (mech_spec_parse(o, "bench", MECH_PARSE_AUDIT, NULL, &spec, &e) != FP_OK || mech_init(&mech, &spec, &e) != FP_OK) {
        fprintf(stderr, "perturb_bench: %s\n", e.msg);
        cJSON_Delete(o);
        return sp;
    }
    cJSON_Delete(o);
    RngStream s = rng_stream(1, RNG_DEFENSE, 0, 0);
    double best_wall = INFINITY, best_cpu = INFINITY;
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((double)(i % 2000) / 1000.0 - 1.0);
        double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        mech_perturb(&mech, x, n, &s, 0);
        double w1 = clock_s(CLOCK_MONOTONIC), c1 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        best_wall = fmin(best_wall, w1 - w0);
        best_cpu = fmin(best_cpu, c1 - c0);
    }
    // The oracle on the same input, once (it is an order of magnitude slower).
    for (size_t i = 0; i < n; i++)
        y[i] = (float)((double)(i % 2000) / 1000.0 - 1.0);
    double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    mech_perturb_ref(&mech, y, n, &s, 0);
    double t_ref = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
    sp.same = memcmp(x, y, n * sizeof(float)) == 0;
    sp.cpu = n / best_cpu / 1e6;
    sp.wall = n / best_wall / 1e6;
    sp.oracle = n / t_ref / 1e6;
    sp.ok = 1;
    return sp;
}

// The federated defenses' Gaussian noise (defenses/clip.h ClipNoise, also dp-sgd's per-step
// noise) on n coordinates, std 0.5 at multiplier 1: M coordinates/s of thread CPU time, best
// of reps. For the safe sampler `oracle` is the per-element path (clip_noise_one on each
// element: what clip_noise_add ran before dgauss_wide_add), timed once, and `same` checks
// the fast path against it bit for bit on every element.
static Speed measure_fed(int safe, float *x, float *y, size_t n, int reps) {
    Speed sp = {.same = 1};
    ParamLayer layer = {.offset = 0, .count = n, .trainable = 1};
    ParamTable t = {.layers = &layer, .n_layers = 1, .n_params = n, .n_trainable = n};
    cJSON *o = cJSON_Parse(safe ? "{}" : "{\"sampler\":\"float\"}");
    ClipNoise cn;
    FpError e = {0};
    if (clip_noise_parse(o, "defense", &t, &cn, &e) != FP_OK || clip_noise_build(&cn, 1.0, &e) != FP_OK) {
        fprintf(stderr, "perturb_bench: %s\n", e.msg);
        cJSON_Delete(o);
        return sp;
    }
    cJSON_Delete(o);
    RngStream rs = rng_stream(1, RNG_TEST, 0, 0);
    sp.cpu = 0;
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++)
            x[i] = 0.001f * (float)(i % 7);
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        clip_noise_add(&cn, x, &t, &rs, 0.5);
        double c = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0, w = clock_s(CLOCK_MONOTONIC) - w0;
        sp.cpu = fmax(sp.cpu, (double)n / c / 1e6);
        sp.wall = fmax(sp.wall, (double)n / w / 1e6);
    }
    if (safe) {
        for (size_t i = 0; i < n; i++)
            y[i] = 0.001f * (float)(i % 7);
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        for (size_t i = 0; i < n; i++)
            y[i] = clip_noise_one(&cn, y[i], i, &rs, 0.5);
        sp.oracle = (double)n / (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e6;
        sp.same = memcmp(x, y, n * sizeof(float)) == 0;
    }
    sp.ok = 1;
    clip_noise_free(&cn);
    return sp;
}

// The federated defenses' Laplace noise (dp-fedasgp, layerwise, flat-laplace;
// defenses/dp/dlaplace.h) on n coordinates, scale 4096 grid steps, b = 0.5: the safe sampler
// (16-wide Philox) or the float one (rng_laplace_at per element). For the safe sampler
// `same` checks the 16-wide path against dlap_value element by element on the first 10^5.
static Speed measure_fed_laplace(int safe, float *x, size_t n, int reps) {
    Speed sp = {.same = 1};
    DLap law;
    FpError e = {0};
    if (dlap_init(&law, 4096, &e) != FP_OK) {
        fprintf(stderr, "perturb_bench: %s\n", e.msg);
        return sp;
    }
    const double b = 0.5, g = b / law.scale;
    RngStream rs = rng_stream(1, RNG_TEST, 0, 0);
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++)
            x[i] = 0.001f * (float)(i % 7);
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        if (safe)
            dlap_add(&law, g, x, n, &rs, 0);
        else
            for (size_t i = 0; i < n; i++)
                x[i] = (float)(x[i] + b * rng_laplace_at(&rs, i));
        double c = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0, w = clock_s(CLOCK_MONOTONIC) - w0;
        sp.cpu = fmax(sp.cpu, (double)n / c / 1e6);
        sp.wall = fmax(sp.wall, (double)n / w / 1e6);
    }
    for (size_t i = 0; safe && i < n && i < 100000; i++)
        sp.same &= x[i] == dlap_value(&law, g, 0.001f * (float)(i % 7), &rs, i);
    sp.ok = 1;
    dlap_free(&law);
    return sp;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atoll(argv[1]) : 10000000;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    static const struct { const char *name, *json; } mechs[] = {
        {"laplace", "{\"name\":\"laplace\",\"epsilon\":0.6,\"clip\":1%s}"},
        {"gaussian", "{\"name\":\"gaussian\",\"epsilon\":0.6,\"clip\":1%s}"},
        {"pm", "{\"name\":\"pm\",\"epsilon\":0.6,\"clip\":1%s}"},
        {"spm", "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":0.6%s}"},
        {"duchi", "{\"name\":\"duchi\",\"epsilon\":0.6,\"clip\":1%s}"},
        {"ldp-fl", "{\"name\":\"ldp-fl\",\"epsilon\":0.6,\"clip\":1%s}"},
    };
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    if (!x || !y || n < 64) {
        fprintf(stderr, "perturb_bench: cannot allocate %zu elements\n", n);
        return 2;
    }
    int fail = 0;
    double safe_laplace = 0;
    printf("%zu elements, epsilon 0.6, one thread, best of %d runs: M elements/s of thread CPU time [wall clock]\n", n,
           reps);
    printf("%-9s | %-26s | %-26s | %s\n", "mechanism", "safe (guarantee proven)", "float (guarantee none)",
           "safe / float");
    for (size_t k = 0; k < sizeof mechs / sizeof mechs[0]; k++) {
        char js[256], jf[256];
        snprintf(js, sizeof js, mechs[k].json, "");
        snprintf(jf, sizeof jf, mechs[k].json, ",\"sampler\":\"float\"");
        Speed s = measure(js, x, y, n, reps);
        int has_float = strcmp(mechs[k].name, "duchi") != 0 && strcmp(mechs[k].name, "ldp-fl") != 0;
        Speed f = has_float ? measure(jf, x, y, n, reps) : (Speed){0};
        fail |= !s.ok || !s.same || (has_float && (!f.ok || !f.same));
        char cs[64], cf[64] = "-";
        snprintf(cs, sizeof cs, "%6.0f [%5.0f] oracle %3.0f%s", s.cpu, s.wall, s.oracle, s.same ? "" : " DIFFERS");
        if (has_float)
            snprintf(cf, sizeof cf, "%6.0f [%5.0f] oracle %3.0f%s", f.cpu, f.wall, f.oracle, f.same ? "" : " DIFFERS");
        char ratio[32] = "one sampler (exact)";
        if (has_float)
            snprintf(ratio, sizeof ratio, "%.2f", s.cpu / f.cpu);
        printf("%-9s | %-26s | %-26s | %s\n", mechs[k].name, cs, cf, ratio);
        if (k == 0)
            safe_laplace = s.cpu;
    }
    Speed gs = measure_fed(1, x, y, n, reps), gf = measure_fed(0, x, y, n, reps);
    fail |= !gs.ok || !gs.same || !gf.ok;
    printf("federated Gaussian noise (gaussian-dpfedavg, fedsmp, avp, dp-sgd): safe (discrete, S = 16384) %.0f [%.0f]%s, "
           "per element (before) %.0f, float %.0f [%.0f], safe / float %.2f\n",
           gs.cpu, gs.wall, gs.same ? "" : " DIFFERS", gs.oracle, gf.cpu, gf.wall, gs.cpu / gf.cpu);
    Speed ls = measure_fed_laplace(1, x, n, reps), lf = measure_fed_laplace(0, x, n, reps);
    fail |= !ls.ok || !ls.same || !lf.ok;
    printf("federated Laplace noise (dp-fedasgp, layerwise, flat-laplace): safe (discrete, scale 4096 steps) %.0f "
           "[%.0f]%s, float %.0f [%.0f], safe / float %.2f (target for the safe one >= 50: %s)\n",
           ls.cpu, ls.wall, ls.same ? "" : " DIFFERS", lf.cpu, lf.wall, ls.cpu / lf.cpu, ls.cpu >= 50 ? "met" : "NOT met");
    printf("safe laplace: %.0f M elements/s of one core's CPU time (target >= 300: %s); fast path == oracle bit for "
           "bit: %s\n",
           safe_laplace, safe_laplace >= 300 ? "met" : "NOT met", fail ? "NO" : "yes");
    free(x);
    free(y);
    return fail;
}
