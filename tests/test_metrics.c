// Evaluation metrics: SSIM/PSNR/MSE (eval/image_metrics.h) and ROC/AUC/TPR at FPR
// (eval/roc.h).
// - SSIM against fixtures/ssim/reference.json (numpy reference of the spec's valid-window
//   definition, cross-checked with skimage by tools/make-metric-fixtures.py): |Δ| <= 1e-4.
// - SSIM against a naive double-precision loop (below) on random inputs, including values
//   outside [0,1] and the smallest allowed size; plan reuse; basic properties.
// - ROC against fixtures/roc/reference.json (brute-force counting and Mann-Whitney U),
//   extremes, a 6-sigma test of AUC = 1/2 on random scores, the FPR <= t convention.
// - `fedpriv ssim` end to end when FEDPRIV_BIN is set.
// Fixtures are read from $FEDPRIV_FIXTURES or ./fixtures (make test runs from the
// repository root).
#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "core/rng.h"
#include "eval/image_metrics.h"
#include "eval/roc.h"
#include "eval/png.h"
#include "tests/cli_run.h"

// ---------------------------------------------------------------------------------
// Helpers

static const char *fixtures_dir(void) {
    const char *d = getenv("FEDPRIV_FIXTURES");
    return d && d[0] ? d : "fixtures";
}

static cJSON *load_fixture(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fixtures_dir(), rel);
    cJSON *j = NULL;
    FpError err = {0};
    ck_assert_msg(jv_load_file(path, &j, &err) == FP_OK, "%s (run from the repository root or set FEDPRIV_FIXTURES)",
                  err.msg);
    return j;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "fixture: missing number \"%s\"", key);
    return v->valuedouble;
}

static float *read_fixture_png(const char *name, int *c, int *h, int *w) {
    char path[1024];
    snprintf(path, sizeof path, "%s/ssim/%s", fixtures_dir(), name);
    float *img = NULL;
    FpError err = {0};
    ck_assert_msg(png_read(path, &img, c, h, w, &err) == FP_OK, "%s", err.msg);
    return img;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The spec's SSIM written out directly in double precision: for every valid position,
// weighted sums over the 11x11 window with weights g[u] g[v]. a, b are (c, h, w).
static double ssim_naive(const float *a, const float *b, int c, int h, int w) {
    double g[11], gs = 0;
    for (int k = -5; k <= 5; k++)
        gs += g[k + 5] = exp(-(double)(k * k) / (2 * 1.5 * 1.5));
    for (int k = 0; k < 11; k++)
        g[k] /= gs;
    const double c1 = 0.01 * 0.01, c2 = 0.03 * 0.03;
    double total = 0;
    for (int ch = 0; ch < c; ch++) {
        const float *x = a + (size_t)ch * h * w, *y = b + (size_t)ch * h * w;
        double sum = 0;
        for (int i = 5; i < h - 5; i++)
            for (int j = 5; j < w - 5; j++) {
                double mx = 0, my = 0, xx = 0, yy = 0, xy = 0;
                for (int u = -5; u <= 5; u++)
                    for (int v = -5; v <= 5; v++) {
                        double wt = g[u + 5] * g[v + 5], p = x[(i + u) * w + j + v], q = y[(i + u) * w + j + v];
                        mx += wt * p, my += wt * q, xx += wt * p * p, yy += wt * q * q, xy += wt * p * q;
                    }
                double vx = xx - mx * mx, vy = yy - my * my, vxy = xy - mx * my;
                sum += ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2));
            }
        total += sum / ((double)(h - 10) * (w - 10));
    }
    return total / c;
}

// ---------------------------------------------------------------------------------
// SSIM, PSNR, MSE

START_TEST(ssim_matches_reference_fixture) {
    cJSON *ref = load_fixture("ssim/reference.json");
    const cJSON *pair;
    int count = 0, gray = 0, colour = 0;
    double worst = 0;
    cJSON_ArrayForEach(pair, cJSON_GetObjectItem(ref, "pairs")) {
        const char *an = cJSON_GetObjectItem(pair, "a")->valuestring, *bn = cJSON_GetObjectItem(pair, "b")->valuestring;
        int c, h, w, c2, h2, w2;
        float *a = read_fixture_png(an, &c, &h, &w), *b = read_fixture_png(bn, &c2, &h2, &w2);
        ck_assert(c == c2 && h == h2 && w == w2);
        gray += c == 1 && h == 28 && w == 28;
        colour += c == 3 && h == 32 && w == 32;
        ImageMetrics m;
        FpError err = {0};
        ck_assert_msg(image_metrics(a, b, c, h, w, &m, &err) == FP_OK, "%s", err.msg);
        double want = num(pair, "ssim"), d = fabs(m.ssim - want);
        worst = fmax(worst, d);
        ck_assert_msg(d <= 1e-4, "%s vs %s: ssim %.10f, reference %.10f", an, bn, m.ssim, want);
        // The whole-map mean (the padded convention) is far from it: the test can tell.
        if (strcmp(an, bn) != 0)
            ck_assert_double_gt(fabs(num(pair, "ssim_full_map_mean") - want), 1e-3);
        // The reference works on v/255 in double, we on the nearest floats (relative
        // error < 6e-8 per value), hence relative tolerances.
        ck_assert_double_le(fabs(m.mse - num(pair, "mse")), 1e-6 * num(pair, "mse"));
        const cJSON *psnr = cJSON_GetObjectItem(pair, "psnr");
        if (cJSON_IsNull(psnr))
            ck_assert(isinf(m.psnr) && m.psnr > 0);
        else
            ck_assert_double_eq_tol(m.psnr, psnr->valuedouble, 1e-5);
        free(a);
        free(b);
        count++;
    }
    ck_assert_int_ge(count, 12);
    ck_assert_int_ge(gray, 6);
    ck_assert_int_ge(colour, 6);
    printf("ssim fixture: %d pairs, max |delta| %.2e\n", count, worst);
    cJSON_Delete(ref);
}
END_TEST

START_TEST(ssim_matches_naive_loop) {
    RngStream s = rng_stream(11, RNG_TEST, 0, 0);
    const int shapes[][3] = {{1, 28, 28}, {3, 32, 32}, {1, 11, 11}, {2, 11, 40}, {3, 17, 13}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int c = shapes[k][0], h = shapes[k][1], w = shapes[k][2];
        size_t n = (size_t)c * h * w;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        // b is a noisy copy of a; both partly outside [0, 1] (unclamped reconstructions).
        for (size_t i = 0; i < n; i++) {
            a[i] = (float)(0.5 + 0.6 * rng_next_normal(&s));
            b[i] = a[i] + (float)(0.3 * rng_next_normal(&s));
        }
        double got, want = ssim_naive(a, b, c, h, w);
        FpError err = {0};
        ck_assert_msg(image_ssim(a, b, c, h, w, &got, &err) == FP_OK, "%s", err.msg);
        ck_assert_msg(fabs(got - want) <= 1e-9, "shape %dx%dx%d: ssim %.15f, naive %.15f", c, h, w, got, want);
        free(a);
        free(b);
    }
}
END_TEST

START_TEST(ssim_plan_reuse_and_properties) {
    int c, h, w;
    float *a = read_fixture_png("astronaut32.png", &c, &h, &w), *b = read_fixture_png("astronaut32-noisy.png", &c, &h, &w),
          *d = read_fixture_png("chelsea32.png", &c, &h, &w);
    FpError err = {0};
    double ab, ad, ba, aa;
    ck_assert_int_eq(image_ssim(a, b, c, h, w, &ab, &err), FP_OK);
    ck_assert_int_eq(image_ssim(a, d, c, h, w, &ad, &err), FP_OK);
    ck_assert_int_eq(image_ssim(b, a, c, h, w, &ba, &err), FP_OK);
    ck_assert_int_eq(image_ssim(a, a, c, h, w, &aa, &err), FP_OK);
    ck_assert_double_eq_tol(ab, ba, 1e-12); // symmetric
    ck_assert_double_eq_tol(aa, 1.0, 1e-12);
    ck_assert_double_lt(ad, ab);

    // One plan, new pixels each run: the same numbers as fresh pipelines.
    SsimPlan *plan = NULL;
    ck_assert_int_eq(ssim_plan_create(c, h, w, &plan, &err), FP_OK);
    double r1, r2, r3;
    ck_assert_int_eq(ssim_plan_run(plan, a, b, &r1, &err), FP_OK);
    ck_assert_int_eq(ssim_plan_run(plan, a, d, &r2, &err), FP_OK);
    ck_assert_int_eq(ssim_plan_run(plan, a, b, &r3, &err), FP_OK);
    ck_assert(r1 == ab && r2 == ad && r3 == ab);
    ssim_plan_free(plan);

    // Bad input.
    double v;
    ck_assert_int_eq(image_ssim(a, b, c, 10, 40, &v, &err), FP_EPARAM);
    ck_assert_int_eq(image_ssim(a, b, c, 40, 10, &v, &err), FP_EPARAM);
    ck_assert_int_eq(image_ssim(a, b, 0, h, w, &v, &err), FP_EPARAM);
    ck_assert_int_eq(image_ssim(a, NULL, c, h, w, &v, &err), FP_EPARAM);
    b[100] = NAN;
    ck_assert_int_eq(image_ssim(a, b, c, h, w, &v, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "non-finite"));
    ck_assert_int_eq(image_mse(a, b, c, h, w, &v, &err), FP_EPARAM);
    free(a);
    free(b);
    free(d);
}
END_TEST

START_TEST(psnr_and_mse_closed_forms) {
    float a[3 * 12 * 12], b[3 * 12 * 12];
    for (int i = 0; i < 3 * 12 * 12; i++)
        a[i] = 0.25f, b[i] = 0.25f + (i % 2 ? 0.125f : -0.125f); // every error is ±1/8
    double mse, psnr;
    FpError err = {0};
    ck_assert_int_eq(image_mse(a, b, 3, 12, 12, &mse, &err), FP_OK);
    ck_assert_double_eq(mse, 1.0 / 64);
    ck_assert_int_eq(image_psnr(a, b, 3, 12, 12, &psnr, &err), FP_OK);
    ck_assert_double_eq_tol(psnr, 10 * log10(64.0), 1e-12);
    ck_assert_int_eq(image_psnr(a, a, 3, 12, 12, &psnr, &err), FP_OK);
    ck_assert(isinf(psnr) && psnr > 0);
}
END_TEST

// What one SSIM costs at the DLG size (32x32x3): printed, and bounded loosely (about 100x a
// quiet machine's figure, so that sanitizers and a loaded machine pass) so that a
// pathological regression (a pipeline rebuilt per tile, a thread pool per band) fails.
START_TEST(ssim_speed_at_cifar_size) {
    int c, h, w;
    float *a = read_fixture_png("astronaut32.png", &c, &h, &w), *b = read_fixture_png("astronaut32-noisy.png", &c, &h, &w);
    FpError err = {0};
    double v;
    ck_assert_int_eq(image_ssim(a, b, c, h, w, &v, &err), FP_OK); // warm-up: libvips start
    const int reps = 200;
    double t0 = seconds();
    for (int i = 0; i < reps; i++)
        ck_assert_int_eq(image_ssim(a, b, c, h, w, &v, &err), FP_OK);
    double one_shot = (seconds() - t0) / reps;
    SsimPlan *plan = NULL;
    ck_assert_int_eq(ssim_plan_create(c, h, w, &plan, &err), FP_OK);
    t0 = seconds();
    for (int i = 0; i < reps; i++)
        ck_assert_int_eq(ssim_plan_run(plan, a, b, &v, &err), FP_OK);
    double planned = (seconds() - t0) / reps;
    ssim_plan_free(plan);
    printf("ssim 3x32x32: %.3f ms per image_ssim call, %.3f ms per ssim_plan_run\n", one_shot * 1e3, planned * 1e3);
    ck_assert_double_lt(one_shot, 0.2);
    ck_assert_double_lt(planned, 0.05);
    free(a);
    free(b);
}
END_TEST

// ---------------------------------------------------------------------------------
// ROC

static void load_case(const cJSON *cs, double **scores, int **labels, int *n) {
    const cJSON *sc = cJSON_GetObjectItem(cs, "scores"), *lb = cJSON_GetObjectItem(cs, "labels");
    *n = cJSON_GetArraySize(sc);
    ck_assert_int_eq(cJSON_GetArraySize(lb), *n);
    *scores = malloc(sizeof **scores * (size_t)*n);
    *labels = malloc(sizeof **labels * (size_t)*n);
    for (int i = 0; i < *n; i++) {
        (*scores)[i] = cJSON_GetArrayItem(sc, i)->valuedouble;
        (*labels)[i] = cJSON_GetArrayItem(lb, i)->valueint;
    }
}

START_TEST(roc_matches_reference_fixture) {
    cJSON *ref = load_fixture("roc/reference.json");
    const cJSON *cs;
    int cases = 0;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItem(ref, "cases")) {
        const char *name = cJSON_GetObjectItem(cs, "name")->valuestring;
        double *s;
        int *l, n;
        load_case(cs, &s, &l, &n);
        Roc roc;
        FpError err = {0};
        ck_assert_msg(roc_compute(s, l, n, &roc, &err) == FP_OK, "%s: %s", name, err.msg);
        ck_assert_int_eq(roc.n_points, (int)num(cs, "n_points"));
        ck_assert_msg(fabs(roc.auc - num(cs, "auc")) <= 1e-12, "%s: auc %.15f vs %.15f", name, roc.auc,
                      num(cs, "auc"));
        const cJSON *fpr = cJSON_GetObjectItem(cs, "fpr"), *tpr = cJSON_GetObjectItem(cs, "tpr"),
                    *thr = cJSON_GetObjectItem(cs, "thresholds");
        if (fpr) {
            ck_assert(isinf(roc.thresholds[0]) && roc.fpr[0] == 0 && roc.tpr[0] == 0);
            for (int i = 0; i < roc.n_points; i++) {
                ck_assert_double_eq_tol(roc.fpr[i], cJSON_GetArrayItem(fpr, i)->valuedouble, 1e-15);
                ck_assert_double_eq_tol(roc.tpr[i], cJSON_GetArrayItem(tpr, i)->valuedouble, 1e-15);
                if (i > 0)
                    ck_assert(roc.thresholds[i] == cJSON_GetArrayItem(thr, i - 1)->valuedouble);
            }
        }
        const cJSON *at = cJSON_GetObjectItem(cs, "tpr_at_fpr"), *t;
        cJSON_ArrayForEach(t, at) {
            double got = roc_tpr_at_fpr(&roc, strtod(t->string, NULL));
            ck_assert_msg(fabs(got - t->valuedouble) <= 1e-15, "%s: tpr at fpr %s: %.15f vs %.15f", name, t->string,
                          got, t->valuedouble);
        }
        ck_assert_double_eq_tol(roc_best_balanced_accuracy(&roc, NULL), num(cs, "best_balanced_accuracy"), 1e-12);
        ck_assert_double_eq_tol(roc_advantage(&roc, NULL), num(cs, "advantage"), 1e-12);
        const cJSON *cf;
        cJSON_ArrayForEach(cf, cJSON_GetObjectItem(cs, "confusion")) {
            Confusion m;
            ck_assert_int_eq(roc_confusion_at(s, l, n, num(cf, "threshold"), &m, &err), FP_OK);
            ck_assert(m.tp == (long)num(cf, "tp") && m.fp == (long)num(cf, "fp") && m.tn == (long)num(cf, "tn") &&
                      m.fn == (long)num(cf, "fn"));
            ck_assert_double_eq_tol(m.accuracy, num(cf, "accuracy"), 1e-12);
            ck_assert_double_eq_tol(m.precision, num(cf, "precision"), 1e-12);
            ck_assert_double_eq_tol(m.recall, num(cf, "recall"), 1e-12);
        }
        roc_free(&roc);
        free(s);
        free(l);
        cases++;
    }
    ck_assert_int_ge(cases, 4);
    cJSON_Delete(ref);
}
END_TEST

START_TEST(roc_extremes_and_thresholds) {
    const double s[6] = {0.9, 0.8, 0.7, 0.3, 0.2, 0.1};
    const int sep[6] = {1, 1, 1, 0, 0, 0}, rev[6] = {0, 0, 0, 1, 1, 1};
    Roc roc;
    FpError err = {0};
    ck_assert_int_eq(roc_compute(s, sep, 6, &roc, &err), FP_OK);
    ck_assert_double_eq(roc.auc, 1.0);
    ck_assert_double_eq(roc_tpr_at_fpr(&roc, 0.0), 1.0);
    double t;
    ck_assert_double_eq(roc_advantage(&roc, &t), 1.0);
    ck_assert_double_eq(t, 0.7); // the lowest member score separates
    ck_assert_double_eq(roc_best_balanced_accuracy(&roc, NULL), 1.0);
    roc_free(&roc);
    ck_assert_ptr_null(roc.fpr);

    ck_assert_int_eq(roc_compute(s, rev, 6, &roc, &err), FP_OK);
    ck_assert_double_eq(roc.auc, 0.0);
    ck_assert_double_eq(roc_tpr_at_fpr(&roc, 0.5), 0.0);
    ck_assert_double_eq(roc_advantage(&roc, NULL), 0.0);            // only the trivial points
    ck_assert_double_eq(roc_best_balanced_accuracy(&roc, NULL), 0.5);
    roc_free(&roc);

    // All scores tied: one point besides (0,0), the diagonal, AUC 1/2.
    const double tied[4] = {0.4, 0.4, 0.4, 0.4};
    const int lab[4] = {1, 0, 1, 0};
    ck_assert_int_eq(roc_compute(tied, lab, 4, &roc, &err), FP_OK);
    ck_assert_int_eq(roc.n_points, 2);
    ck_assert_double_eq(roc.auc, 0.5);
    roc_free(&roc);

    // FPR exactly at t counts (<=): 100 non-members, one scored above every member.
    double sc[200];
    int lb[200];
    for (int i = 0; i < 100; i++)
        sc[i] = 0.5 + i * 1e-3, lb[i] = 1;      // members in [0.5, 0.6)
    for (int i = 100; i < 200; i++)
        sc[i] = (i - 100) * 1e-3, lb[i] = 0;    // non-members in [0, 0.1)
    sc[100] = 2.0;                              // ... but one above everything
    ck_assert_int_eq(roc_compute(sc, lb, 200, &roc, &err), FP_OK);
    ck_assert_double_eq(roc_tpr_at_fpr(&roc, 0.01), 1.0); // (0.01, 1) is reached with FPR == t
    ck_assert_double_eq(roc_tpr_at_fpr(&roc, 0.0099), 0.0);
    ck_assert_double_eq(roc_tpr_at_fpr(&roc, -1), 0.0);
    roc_free(&roc);

    // ±infinity are ordinary scores.
    const double inf_s[4] = {INFINITY, -INFINITY, 1.0, 0.0};
    const int inf_l[4] = {1, 0, 1, 0};
    ck_assert_int_eq(roc_compute(inf_s, inf_l, 4, &roc, &err), FP_OK);
    ck_assert_double_eq(roc.auc, 1.0);
    roc_free(&roc);
}
END_TEST

// Scores independent of membership: AUC within 6 sigma of 1/2, sigma^2 = (n1+n0+1)/(12 n1 n0)
// (the Mann-Whitney null variance without ties; ties only shrink it). Continuous scores,
// then the same scores on 7 levels (heavy ties).
START_TEST(roc_random_scores_give_half) {
    const int n1 = 3000, n0 = 2000, n = n1 + n0;
    double *s = malloc(sizeof *s * n);
    int *l = malloc(sizeof *l * n);
    const double sigma = sqrt((double)(n1 + n0 + 1) / (12.0 * n1 * n0));
    for (int round = 0; round < 4; round++) {
        RngStream r = rng_stream(77, RNG_TEST, (uint32_t)round, 0);
        for (int i = 0; i < n; i++) {
            double u = rng_next_uniform(&r);
            s[i] = round % 2 ? floor(u * 7) : u;
            l[i] = i < n1;
        }
        Roc roc;
        FpError err = {0};
        ck_assert_int_eq(roc_compute(s, l, n, &roc, &err), FP_OK);
        ck_assert_msg(fabs(roc.auc - 0.5) <= 6 * sigma, "round %d: auc %.5f, 6 sigma %.5f", round, roc.auc, 6 * sigma);
        if (round % 2)
            ck_assert_int_eq(roc.n_points, 8);
        roc_free(&roc);
    }
    free(s);
    free(l);
}
END_TEST

START_TEST(roc_rejects_bad_input) {
    const double s[4] = {0.1, 0.2, NAN, 0.4};
    const int ok[4] = {1, 0, 1, 0}, one_class[4] = {1, 1, 1, 1}, bad_label[4] = {1, 0, 2, 0};
    Roc roc;
    Confusion m;
    FpError err = {0};
    ck_assert_int_eq(roc_compute(s, ok, 4, &roc, &err), FP_EPARAM); // NaN
    ck_assert_ptr_nonnull(strstr(err.msg, "NaN"));
    ck_assert_ptr_null(roc.fpr);
    ck_assert_int_eq(roc_compute(s, ok, 2, &roc, &err), FP_OK); // the first two are fine
    roc_free(&roc);
    ck_assert_int_eq(roc_compute(s, one_class, 2, &roc, &err), FP_EPARAM);
    ck_assert_int_eq(roc_compute(s, bad_label, 2, &roc, &err), FP_OK);
    roc_free(&roc);
    const double fine[4] = {0.1, 0.2, 0.3, 0.4};
    ck_assert_int_eq(roc_compute(fine, bad_label, 4, &roc, &err), FP_EPARAM);
    ck_assert_int_eq(roc_compute(fine, ok, 1, &roc, &err), FP_EPARAM);
    ck_assert_int_eq(roc_confusion_at(fine, ok, 4, NAN, &m, &err), FP_EPARAM);
    ck_assert_int_eq(roc_confusion_at(fine, one_class, 4, 0.2, &m, &err), FP_EPARAM);
    // Nothing predicted a member: precision 0 (sklearn's zero_division=0), recall 0.
    ck_assert_int_eq(roc_confusion_at(fine, ok, 4, INFINITY, &m, &err), FP_OK);
    ck_assert(m.tp == 0 && m.fp == 0 && m.precision == 0 && m.recall == 0 && m.accuracy == 0.5);
}
END_TEST

// ---------------------------------------------------------------------------------
// fedpriv ssim, end to end

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

START_TEST(cli_ssim_prints_and_rejects_bad_images) {
    char out[4096], errb[4096], a[1024], b[1024], gray[1024];
    snprintf(a, sizeof a, "%s/ssim/astronaut32.png", fixtures_dir());
    snprintf(b, sizeof b, "%s/ssim/astronaut32-noisy.png", fixtures_dir());
    snprintf(gray, sizeof gray, "%s/ssim/camera28.png", fixtures_dir());
    const char *ok[] = {"ssim", a, b, NULL};
    int rc = cli_run(ok, out, errb, sizeof out);
    if (rc < 0) {
        printf("SKIP: cli_ssim_prints_and_rejects_bad_images (FEDPRIV_BIN unset)\n");
        return;
    }
    cJSON *ref = load_fixture("ssim/reference.json");
    double want = -2;
    const cJSON *pair;
    cJSON_ArrayForEach(pair, cJSON_GetObjectItem(ref, "pairs")) {
        if (!strcmp(cJSON_GetObjectItem(pair, "a")->valuestring, "astronaut32.png") &&
            !strcmp(cJSON_GetObjectItem(pair, "b")->valuestring, "astronaut32-noisy.png"))
            want = num(pair, "ssim");
    }
    cJSON_Delete(ref);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, errb);
    double ssim = -2, psnr = 0;
    ck_assert_msg(sscanf(out, "ssim %lf psnr %lf", &ssim, &psnr) == 2, "unexpected output: %s", out);
    ck_assert_double_eq_tol(ssim, want, 1e-4);

    const char *js[] = {"ssim", a, b, "--json", NULL};
    ck_assert_int_eq(cli_run(js, out, errb, sizeof out), 0);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    ck_assert_double_eq_tol(num(j, "ssim"), want, 1e-4);
    ck_assert_double_eq_tol(num(j, "psnr"), psnr, 1e-3);
    ck_assert_int_eq((int)num(j, "channels"), 3);
    cJSON_Delete(j);
    const char *same[] = {"ssim", a, a, "--json", NULL};
    ck_assert_int_eq(cli_run(same, out, errb, sizeof out), 0);
    j = cJSON_Parse(out);
    // Identical images: PSNR is +inf, written "inf" by the one non-finite rule (core/json_number.h).
    ck_assert(j && cJSON_IsString(cJSON_GetObjectItem(j, "psnr")) && num(j, "ssim") == 1.0);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "psnr")->valuestring, "inf");
    cJSON_Delete(j);

    // Bad inputs: exit 2, one line on stderr naming the offending file.
    char dir[512], text[600], small[600], missing[600];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fedpriv-ssim-XXXXXX", base && base[0] ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(text, sizeof text, "%s/notes.png", dir);
    FILE *f = fopen(text, "w");
    fputs("not an image\n", f);
    fclose(f);
    snprintf(small, sizeof small, "%s/small.png", dir);
    float px[8 * 8] = {0};
    FpError err = {0};
    ck_assert_int_eq(png_write_gray(small, px, 8, 8, &err), FP_OK);
    snprintf(missing, sizeof missing, "%s/missing.png", dir);
    struct {
        const char *args[5];
        const char *named;
    } bad[] = {
        {{"ssim", a, text, NULL}, text},      // not a PNG
        {{"ssim", text, a, NULL}, text},
        {{"ssim", a, gray, NULL}, gray},      // size and channel mismatch
        {{"ssim", small, small, NULL}, small}, // smaller than the window
        {{"ssim", a, missing, NULL}, missing},
        {{"ssim", a, NULL}, "usage"},
        {{"ssim", a, b, "--bogus", NULL}, "--bogus"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        rc = cli_run(bad[k].args, out, errb, sizeof out);
        ck_assert_msg(rc == 2, "case %zu: exit %d, stderr %s", k, rc, errb);
        ck_assert_msg(strstr(errb, bad[k].named) != NULL, "case %zu: stderr does not name %s: %s", k, bad[k].named,
                      errb);
        if (strcmp(bad[k].named, "usage") != 0)
            ck_assert_msg(cli_count_lines(errb) == 1, "case %zu: stderr is not one line: %s", k, errb);
        ck_assert_str_eq(out, "");
    }
    const char *help[] = {"ssim", "--help", NULL};
    ck_assert_int_eq(cli_run(help, out, errb, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: fedpriv ssim"));
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}
END_TEST

Suite *suite_metrics(void) {
    Suite *s = suite_create("metrics");
    TCase *img = tcase_create("image");
    tcase_add_test(img, ssim_matches_reference_fixture);
    tcase_add_test(img, ssim_matches_naive_loop);
    tcase_add_test(img, ssim_plan_reuse_and_properties);
    tcase_add_test(img, psnr_and_mse_closed_forms);
    tcase_add_test(img, ssim_speed_at_cifar_size);
    tcase_set_timeout(img, 60);
    suite_add_tcase(s, img);
    TCase *roc = tcase_create("roc");
    tcase_add_test(roc, roc_matches_reference_fixture);
    tcase_add_test(roc, roc_extremes_and_thresholds);
    tcase_add_test(roc, roc_random_scores_give_half);
    tcase_add_test(roc, roc_rejects_bad_input);
    suite_add_tcase(s, roc);
    TCase *cli = tcase_create("cli");
    tcase_add_test(cli, cli_ssim_prints_and_rejects_bad_images);
    tcase_set_timeout(cli, 60);
    suite_add_tcase(s, cli);
    return s;
}
