// Local-DP mechanisms (defenses/dp/mech.h) and the defenses built on them: the fast loops
// against the per-element oracle, the closed forms against the output laws and the
// digests' tables, Monte-Carlo moments and histograms within 6σ, parameter errors, and
// the defense plugins (layers, ranges, privacy records, Adaptive-Harmony's sampling and
// server estimator).
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defenses/dp/accountant.h"
#include "defenses/registry.h"
#include "fl/defense.h"
#include "defenses/mech_defense.h"
#include "defenses/dp/mech_internal.h"

// Every mechanism, variant and sampler; %g is ε. classic gaussian needs ε < 1.
static const char *const configs[] = {
    "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":%.17g}",
    "{\"name\":\"spm\",\"variant\":\"paper\",\"epsilon\":%.17g}",
    "{\"name\":\"spm\",\"variant\":\"pnpm\",\"epsilon\":%.17g}",
    "{\"name\":\"duchi\",\"epsilon\":%.17g}",
    "{\"name\":\"pm\",\"epsilon\":%.17g}",
    "{\"name\":\"ldp-fl\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
    "{\"name\":\"laplace\",\"epsilon\":%.17g,\"clip\":0.5}",
    "{\"name\":\"gaussian\",\"epsilon\":%.17g,\"clip\":0.5}",
    "{\"name\":\"gaussian\",\"variant\":\"classic\",\"epsilon\":%.17g,\"clip\":0.5,\"delta\":1e-6}",
    "{\"name\":\"adaptive-harmony\",\"variant\":\"corrected\",\"epsilon\":%.17g,\"range\":[0.2,1.0],\"dim\":7}",
    "{\"name\":\"adaptive-harmony\",\"variant\":\"paper\",\"epsilon\":%.17g,\"range\":[0.2,1.0],\"dim\":7}",
    "{\"name\":\"rr\",\"epsilon\":%.17g}",
    "{\"name\":\"rr\",\"variant\":\"broken\",\"epsilon\":%.17g}",
    "{\"name\":\"spm\",\"variant\":\"corrected\",\"sampler\":\"float\",\"epsilon\":%.17g}",
    "{\"name\":\"spm\",\"variant\":\"paper\",\"sampler\":\"float\",\"epsilon\":%.17g}",
    "{\"name\":\"pm\",\"sampler\":\"float\",\"epsilon\":%.17g}",
    "{\"name\":\"laplace\",\"sampler\":\"float\",\"epsilon\":%.17g,\"clip\":0.5}",
    "{\"name\":\"gaussian\",\"sampler\":\"float\",\"epsilon\":%.17g,\"clip\":0.5}",
    "{\"name\":\"laplace\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
};
#define N_CONFIGS ((int)(sizeof configs / sizeof configs[0]))

// A resolved mechanism (on the heap: a Mech holds its sampler's tables); free() it.
static Mech *make_mech(const char *fmt, double eps) {
    char text[256];
    snprintf(text, sizeof text, fmt, eps);
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    MechSpec sp;
    Mech *m = malloc(sizeof *m);
    FpError e = {0};
    ck_assert_msg(mech_spec_parse(o, "m", MECH_PARSE_AUDIT, NULL, &sp, &e) == FP_OK, "%s: %s", text, e.msg);
    ck_assert_msg(mech_init(m, &sp, &e) == FP_OK, "%s: %s", text, e.msg);
    cJSON_Delete(o);
    return m;
}

// "spm/paper/float" for messages.
static const char *label(const Mech *m) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s%s%s/%s", m->spec.ops->name, m->spec.variant ? "/" : "",
             mech_variant_name(m->spec.variant), mech_sampler_name(m->sampler->kind));
    return buf;
}

static double config_eps(int c, int k) {
    static const double eps[] = {0.3, 1.0, 3.0}, eps_classic[] = {0.3, 0.6, 0.9};
    return strstr(configs[c], "classic") ? eps_classic[k] : eps[k];
}

// Inputs that exercise the mechanism: the ends, an inner point, one outside the range
// (clipped), and 0 for spm (output exactly 0).
static int config_inputs(const Mech *m, double *x) {
    if (m->spec.ops->range == MECH_RANGE_NONE) {
        x[0] = -1.7;
        x[1] = 0.37;
        x[2] = 2.5;
        x[3] = 0;
        return m->spec.ops == &mech_spm ? 4 : 3;
    }
    double lo = m->spec.lo, hi = m->spec.hi;
    x[0] = lo;
    x[1] = lo + 0.3 * (hi - lo);
    x[2] = hi;
    x[3] = hi + 1;
    return 4;
}

// ---- the fast loops are the oracle, bit for bit ------------------------------------

START_TEST(fast_path_matches_oracle) {
    static const uint64_t firsts[] = {0, 1, 3, 63, 64, 65, 1000, (4ull << 32) - 70};
    const size_t n = 777;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    for (int c = 0; c < N_CONFIGS; c++) {
        // ε 0.05 puts the safe laplace table past the register search (a gather path)
        for (int k = 0; k < 2; k++) {
            double eps = strstr(configs[c], "classic") ? 0.8 : k ? 0.05 : 1.3;
            if (k && !strstr(configs[c], "laplace"))
                continue;
            Mech *m = make_mech(configs[c], eps);
            for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
                for (size_t i = 0; i < n; i++)
                    a[i] = b[i] = (float)(sin(0.7 * (double)i) * 1.4 + (i % 11 == 0 ? 0 : 0.01 * (double)(i % 5)));
                RngStream s = rng_stream(99 + (uint64_t)c, RNG_TEST, 3, 4);
                mech_perturb(m, a, n, &s, firsts[f]);
                mech_perturb_ref(m, b, n, &s, firsts[f]);
                for (size_t i = 0; i < n; i++)
                    ck_assert_msg(memcmp(&a[i], &b[i], sizeof(float)) == 0, "%s: first %llu element %zu: %a vs %a",
                                  label(m), (unsigned long long)firsts[f], i, a[i], b[i]);
            }
            free(m);
        }
    }
    free(a);
    free(b);
}
END_TEST

// mech_logf: within 2^-23(1 + |ln u|) of ln u and non-decreasing, on every 61st float of
// [2^-34, 1] (bench/logf_check.c checks all of them); Box-Muller's extreme words.
START_TEST(float_log_and_box_muller) {
    uint32_t b0, b1;
    float f0 = 0x1p-34f, f1 = 1.0f;
    memcpy(&b0, &f0, 4);
    memcpy(&b1, &f1, 4);
    float prev = -INFINITY, first_bad = 0;
    long bad = 0;   // counted, asserted once: Check reports every passing assertion to its parent
    for (uint32_t b = b0; b <= b1; b += 61) {
        float u;
        memcpy(&u, &b, 4);
        double lf = mech_logf(u), ld = log((double)u);
        if (!(fabs(lf - ld) <= MECH_LOGF_ERR(ld)) || lf < prev)
            first_bad = bad++ ? first_bad : u;
        prev = (float)lf;
    }
    ck_assert_msg(bad == 0, "mech_logf: %ld floats off the bound or not monotone, first %a", bad, first_bad);
    // Extreme words stay finite and inside the documented bound.
    const uint32_t ws[] = {0, 1, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            float z0, z1;
            mech_gauss2(ws[i], ws[j], &z0, &z1);
            ck_assert(isfinite(z0) && isfinite(z1));
            ck_assert_double_le(hypot(z0, z1), 6.78);
        }
    float z0, z1;
    mech_gauss2(0xffffffffu, 12345, &z0, &z1);
    ck_assert(z0 == 0 && z1 == 0);
}
END_TEST

// ---- closed forms ---------------------------------------------------------------------

// mech_mean/mech_variance agree with the moments of mech_law: the papers' formulas for the
// float samplers (up to the float rounding of atoms and the 2^-32 thresholds), the
// discretised law itself for the safe ones.
START_TEST(closed_forms_match_laws) {
    for (int c = 0; c < N_CONFIGS; c++)
        for (int k = 0; k < 3; k++) {
            Mech *m = make_mech(configs[c], config_eps(c, k));
            double xs[4];
            int nx = config_inputs(m, xs);
            for (int i = 0; i < nx; i++) {
                double x = (double)(float)xs[i];
                MechLaw law;
                mech_law(m, x, &law);
                double w = 0;
                for (int p = 0; p < law.n; p++)
                    w += law.p[p].weight;
                ck_assert_double_le(fabs(w - 1), 1e-12);
                double mt = mech_mean(m, x), vt = mech_variance(m, x);
                double scale = sqrt(vt) + fabs(mt) + 1e-12;
                ck_assert_msg(fabs(law_mean(&law) - mt) <= 1e-6 * scale, "%s eps %g x %g: mean %.9g vs law %.9g",
                              label(m), m->spec.eps, x, mt, law_mean(&law));
                ck_assert_msg(fabs(law_central_moment(&law, 2) - vt) <= 1e-5 * (vt + 1e-12),
                              "%s eps %g x %g: var %.9g vs law %.9g", label(m), m->spec.eps, x, vt,
                              law_central_moment(&law, 2));
                ck_assert(law_prob(&law, -INFINITY, INFINITY) > 1 - 1e-12);
            }
            free(m);
        }
}
END_TEST

// The safe samplers' exact moments stay close to the papers' closed forms (the float
// samplers'): the discretisation moves the mean by less than 1e-3 of the noise's sd (of
// the clipped input, or x itself) and the variance by less than 3% (laplace: the random
// rounding adds up to Λ²/4, Λ = b/4 at worst; gaussian: σ is recalibrated on the table;
// pm at ε = 15: a window of 36 cells of 2^16 where PM's is 1/1809 of the domain).
START_TEST(safe_moments_near_papers) {
    static const char *const pairs[][2] = {
        {"{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":%.17g}",
         "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":%.17g,\"sampler\":\"float\"}"},
        {"{\"name\":\"spm\",\"variant\":\"paper\",\"epsilon\":%.17g}",
         "{\"name\":\"spm\",\"variant\":\"paper\",\"epsilon\":%.17g,\"sampler\":\"float\"}"},
        {"{\"name\":\"spm\",\"variant\":\"pnpm\",\"epsilon\":%.17g}",
         "{\"name\":\"spm\",\"variant\":\"pnpm\",\"epsilon\":%.17g,\"sampler\":\"float\"}"},
        {"{\"name\":\"pm\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
         "{\"name\":\"pm\",\"epsilon\":%.17g,\"range\":[-0.3,0.9],\"sampler\":\"float\"}"},
        {"{\"name\":\"laplace\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
         "{\"name\":\"laplace\",\"epsilon\":%.17g,\"range\":[-0.3,0.9],\"sampler\":\"float\"}"},
        {"{\"name\":\"gaussian\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
         "{\"name\":\"gaussian\",\"epsilon\":%.17g,\"range\":[-0.3,0.9],\"sampler\":\"float\"}"},
    };
    static const double eps[] = {0.1, 0.5, 1, 2, 4, 8, 15};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (size_t k = 0; k < sizeof eps / sizeof eps[0]; k++) {
            Mech *ms = make_mech(pairs[p][0], eps[k]), *mf = make_mech(pairs[p][1], eps[k]);
            const double xs[] = {-0.3, 0.1, 0.77, 0.9, 1.4};
            for (int i = 0; i < 5; i++) {
                double x = (float)xs[i];
                double vs = mech_variance(ms, x), vf = mech_variance(mf, x);
                double sd = sqrt(vf), ms_ = mech_mean(ms, x), mf_ = mech_mean(mf, x);
                ck_assert_msg(fabs(ms_ - mf_) <= 1e-3 * sd + 1e-6 * fabs(x), "%s eps %g x %g: mean %.9g vs %.9g",
                              label(ms), eps[k], x, ms_, mf_);
                if (x != 0)
                    ck_assert_msg(fabs(vs / vf - 1) <= 0.03, "%s eps %g x %g: variance %.9g vs %.9g", label(ms),
                                  eps[k], x, vs, vf);
            }
            ck_assert_double_le(ms->eps_proven, eps[k]);
            ck_assert(isinf(mf->eps_proven));
            free(ms);
            free(mf);
        }
}
END_TEST

// The SPM digest's table (spm.md §1.3), per unit ω²: E[t*] of Alg. 2, the variances of
// Alg. 2, Fix A (corrected), Fix B (pnpm) and the paper's claim; for both samplers.
START_TEST(spm_matches_digest_table) {
    static const struct { double eps, bias, alg2, fix_a, fix_b, claim; } t[] = {
        {0.3, 0.574, 17.28, 52.37, 55.01, 29.66}, {0.6, 0.646, 4.989, 11.97, 12.76, 7.372},
        {0.9, 0.711, 2.491, 4.928, 5.244, 3.214}, {1.5, 0.818, 1.016, 1.520, 1.589, 1.060},
        {1.9, 0.870, 0.636, 0.841, 0.868, 0.601}, {3.9, 0.980, 0.081, 0.084, 0.085, 0.063},
    };
    for (int fl = 0; fl < 2; fl++)
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            const char *samp = fl ? ",\"sampler\":\"float\"" : "";
            char fp[128], fc[128], fn[128];
            snprintf(fp, sizeof fp, "{\"name\":\"spm\",\"variant\":\"paper\",\"epsilon\":%%.17g%s}", samp);
            snprintf(fc, sizeof fc, "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":%%.17g%s}", samp);
            snprintf(fn, sizeof fn, "{\"name\":\"spm\",\"variant\":\"pnpm\",\"epsilon\":%%.17g%s}", samp);
            Mech *paper = make_mech(fp, t[i].eps), *corr = make_mech(fc, t[i].eps), *pnpm = make_mech(fn, t[i].eps);
            // The table rounds to 3 or 4 significant digits.
            ck_assert_double_le(fabs(mech_mean(paper, 1) - t[i].bias), 5e-4);
            ck_assert_double_le(fabs(mech_variance(paper, 1) - t[i].alg2), 5e-3 * fmax(1, t[i].alg2 / 10));
            ck_assert_double_le(fabs(mech_variance(corr, 1) - t[i].fix_a), 5e-3 * fmax(1, t[i].fix_a / 10));
            ck_assert_double_le(fabs(mech_variance(pnpm, 1) - t[i].fix_b), 5e-3 * fmax(1, t[i].fix_b / 10));
            ck_assert_double_le(fabs(mech_variance_claimed(paper, 1) - t[i].claim), 5e-3 * fmax(1, t[i].claim / 10));
            ck_assert_double_eq_tol(mech_mean(corr, -2.5), -2.5, 1e-12);
            ck_assert_double_eq_tol(mech_mean(pnpm, 0.7), fl ? 0.7 : (float)0.7, 1e-12);   // safe: the float input
            // Any unbiased ε-LDP estimator of a sign has variance >= 4u/(u-1)²: the corrected
            // variants respect it, the paper's claim does not (digest §1.3).
            double u = exp(t[i].eps), bound = 4 * u / ((u - 1) * (u - 1));
            ck_assert_double_ge(mech_variance(corr, 1), bound);
            ck_assert_double_ge(mech_variance(pnpm, 1), bound);
            ck_assert_double_lt(mech_variance_claimed(paper, 1), bound);
            free(paper);
            free(corr);
            free(pnpm);
        }
}
END_TEST

// Adaptive-Harmony (digest §1.4): corrected unbiased with Var r²(dκ² - t²); the paper's
// zero fill biased by -c(1 - 1/d). PM, Duchi and LDP-FL closed forms at known points.
START_TEST(other_closed_forms) {
    Mech *hc = make_mech(configs[9], 1.0), *hp = make_mech(configs[10], 1.0);
    double k = (exp(1.0) + 1) / (exp(1.0) - 1), c = 0.6, r = 0.4, d = 7;
    ck_assert_double_le(fabs(k - 2.16395), 1e-5);
    ck_assert_double_eq_tol(mech_mean(hc, 0.9), 0.9, 1e-15);
    ck_assert_double_eq_tol(mech_variance(hc, 0.9), r * r * (d * k * k - 0.75 * 0.75), 1e-12);
    ck_assert_double_eq_tol(mech_mean(hp, 0.9), 0.9 - c * (1 - 1 / d), 1e-15);
    // Duchi at ε = ln 3: B = 2, Var(t) = 4 - t² (the exact law: within the 32-bit thresholds).
    Mech *du = make_mech(configs[3], log(3.0));
    ck_assert_double_eq_tol(mech_variance(du, 0.5), 4 - 0.25, 1e-7);
    ck_assert_double_eq_tol(mech_mean(du, 3.0), 1.0, 1e-8);   // clipped
    // PM at ε = 2 ln 3: h = 3, Var(t) = t²/2 + 6/12.
    Mech *pm = make_mech("{\"name\":\"pm\",\"sampler\":\"float\",\"epsilon\":%.17g}", 2 * log(3.0));
    ck_assert_double_eq_tol(mech_variance(pm, 0.5), 0.125 + 0.5, 1e-12);
    // LDP-FL: Var = r²B² - (w - c)², r = 0.6, c = 0.3.
    Mech *lf = make_mech(configs[5], log(3.0));
    ck_assert_double_eq_tol(mech_variance(lf, 0.6), 0.36 * 4 - 0.09, 1e-7);
    // Laplace scale Δ/ε; analytic Gaussian below the classic σ; RR broken keeps more.
    Mech *la = make_mech("{\"name\":\"laplace\",\"sampler\":\"float\",\"epsilon\":%.17g,\"clip\":0.5}", 0.5);
    ck_assert_double_eq_tol(mech_variance(la, 0), 2 * 2.0 * 2.0, 1e-12);
    Mech *ga = make_mech("{\"name\":\"gaussian\",\"sampler\":\"float\",\"epsilon\":%.17g,\"clip\":0.5}", 0.5);
    Mech *gc = make_mech(
        "{\"name\":\"gaussian\",\"variant\":\"classic\",\"sampler\":\"float\",\"epsilon\":%.17g,\"clip\":0.5}", 0.5);
    ck_assert_double_lt(ga->sigma, gc->sigma);
    ck_assert_double_le(gaussian_delta_for_epsilon(1.0 / ga->sigma, 0.5), 1e-5);
    ck_assert_double_gt(gaussian_delta_for_epsilon(1.0 / (0.999 * ga->sigma), 0.5), 1e-5);   // the smallest σ
    Mech *all[] = {hc, hp, du, pm, lf, la, ga, gc};
    for (int i = 0; i < 8; i++)
        free(all[i]);
}
END_TEST

// ---- Monte Carlo: moments and histograms ----------------------------------------------

// Sample mean within 6 sd (sqrt(Var/N)) and sample variance within 6 sd
// (sqrt((μ4 - Var²)/N), μ4 from the law) of the closed forms, for every mechanism,
// variant, sampler, ε in a list of three, and inputs including clipped ones.
START_TEST(moments_within_six_sigma) {
    const long long n = 400000;
    float *buf = malloc((size_t)n * sizeof(float));
    for (int c = 0; c < N_CONFIGS; c++)
        for (int k = 0; k < 3; k++) {
            Mech *m = make_mech(configs[c], config_eps(c, k));
            double xs[4];
            int nx = config_inputs(m, xs);
            for (int i = 0; i < nx; i++) {
                float x = (float)xs[i];
                for (long long j = 0; j < n; j++)
                    buf[j] = x;
                RngStream s = rng_stream(1000 + (uint64_t)(c * 16 + k * 4 + i), RNG_TEST, 0, 0);
                mech_perturb(m, buf, (size_t)n, &s, 0);
                double mt = mech_mean(m, x), vt = mech_variance(m, x);
                double s1 = 0, s2 = 0;
                for (long long j = 0; j < n; j++) {
                    double dd = buf[j] - mt;
                    s1 += dd;
                    s2 += dd * dd;
                }
                double mean = mt + s1 / n, var = (s2 - s1 * s1 / n) / (n - 1);
                MechLaw law;
                mech_law(m, x, &law);
                double mu4 = law_central_moment(&law, 4);
                double se_m = sqrt(vt / n), se_v = sqrt(fmax(mu4 - vt * vt, 0) / n);
                ck_assert_msg(fabs(mean - mt) <= 6 * se_m + 1e-6 * fabs(mt), "%s eps %g x %g: mean %.6g vs %.6g (sd %.3g)",
                              label(m), m->spec.eps, x, mean, mt, se_m);
                ck_assert_msg(fabs(var - vt) <= 6 * se_v + 1e-9, "%s eps %g x %g: var %.6g vs %.6g (sd %.3g)",
                              label(m), m->spec.eps, x, var, vt, se_v);
            }
            free(m);
        }
    free(buf);
}
END_TEST

// The span [lo, hi] of a law (12 scales of a Laplace, 5 sd of a normal, all atoms).
static void law_span(const MechLaw *law, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int p = 0; p < law->n; p++) {
        const LawPiece *q = &law->p[p];
        double a, b;
        switch (q->kind) {
        case LAW_UNIFORM: a = q->a, b = q->b; break;
        case LAW_LAPLACE: a = q->a - 12 * q->b, b = q->a + 12 * q->b; break;
        case LAW_NORMAL: a = q->a - 5 * q->b, b = q->a + 5 * q->b; break;
        case LAW_GRID: a = q->a, b = q->a + q->b * (double)(q->n - 1); break;
        case LAW_LATTICE: {   // the atoms with probability above 1e-9
            a = INFINITY, b = -INFINITY;
            for (long k = q->m->lat_kmin; k <= q->m->lat_kmax; k++) {
                MechLaw one = {1, {*q}};
                one.p[0].weight = 1;
                double y = fmaf(q->m->f_b, (float)k + (float)q->a, q->m->f_lo);
                if (law_prob(&one, y - 0.5 * q->b, y + 0.5 * q->b) > 1e-9) {
                    a = fmin(a, y);
                    b = fmax(b, y);
                }
            }
            break;
        }
        default: a = b = q->a; break;
        }
        *lo = fmin(*lo, a);
        *hi = fmax(*hi, b);
    }
}

// Each of 30 bins over the law's support holds N·p samples within 6 binomial sd (+2
// for float rounding at the support's ends): checks the shape, not only two moments.
START_TEST(histograms_match_laws) {
    const long long n = 500000;
    float *buf = malloc((size_t)n * sizeof(float));
    for (int c = 0; c < N_CONFIGS; c++) {
        Mech *m = make_mech(configs[c], strstr(configs[c], "classic") ? 0.7 : 1.1);
        double xs[4];
        config_inputs(m, xs);
        float x = (float)xs[1];
        MechLaw law;
        mech_law(m, x, &law);
        double lo, hi;
        law_span(&law, &lo, &hi);
        // atoms at the ends fall inside (the kernels' float outputs sit within 1e-6 of the
        // law's double ones)
        lo -= 1e-6 * (hi - lo + 1);
        hi += 1e-6 * (hi - lo + 1);
        for (long long j = 0; j < n; j++)
            buf[j] = x;
        RngStream s = rng_stream(77 + (uint64_t)c, RNG_TEST, 1, 0);
        mech_perturb(m, buf, (size_t)n, &s, 0);
        enum { B = 30 };
        long long cnt[B + 2] = {0};
        for (long long j = 0; j < n; j++) {
            double y = buf[j];
            int b = y < lo ? 0 : y >= hi ? B + 1 : 1 + (int)((y - lo) / (hi - lo) * B);
            cnt[b > B ? B : b]++;
        }
        for (int b = 0; b < B + 2; b++) {
            double e0 = b == 0 ? -INFINITY : lo + (hi - lo) * (b - 1) / B;
            double e1 = b == B + 1 ? INFINITY : b == 0 ? lo : lo + (hi - lo) * b / B;
            double p = law_prob(&law, e0, e1), mu = n * p;
            ck_assert_msg(fabs((double)cnt[b] - mu) <= 6 * sqrt(mu * (1 - p)) + 2,
                          "%s bin %d [%g, %g): %lld vs %.1f", label(m), b, e0, e1, cnt[b], mu);
        }
        free(m);
    }
    free(buf);
}
END_TEST

// ---- parameters -----------------------------------------------------------------------

static FpStatus parse_text(const char *text, int flags, const char *const *extra, MechSpec *sp, FpError *e) {
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    FpStatus st = mech_spec_parse(o, "defense", flags, extra, sp, e);
    cJSON_Delete(o);
    return st;
}

START_TEST(bad_parameters_name_the_json_path) {
    static const struct { const char *text; int flags; const char *msg; } bad[] = {
        {"{\"name\":\"spm\",\"epsilon\":0}", MECH_PARSE_AUDIT, "defense.epsilon: must be in [1e-09, 15]"},
        {"{\"name\":\"spm\",\"epsilon\":-1}", MECH_PARSE_DEFENSE, "defense.epsilon"},
        {"{\"name\":\"spm\",\"epsilon\":16}", MECH_PARSE_DEFENSE, "defense.epsilon"},
        {"{\"name\":\"spm\"}", MECH_PARSE_DEFENSE, "defense.epsilon: required"},
        {"{\"name\":\"spm\",\"epsilon\":\"1\"}", MECH_PARSE_DEFENSE, "defense.epsilon: must be a number"},
        {"{\"name\":\"spm\",\"variant\":\"fixed\",\"epsilon\":1}", MECH_PARSE_DEFENSE, "defense.variant: unknown variant"},
        {"{\"name\":\"duchi\",\"variant\":\"paper\",\"epsilon\":1}", MECH_PARSE_AUDIT, "defense.variant: duchi has no"},
        {"{\"name\":\"spm\",\"epsilon\":1,\"clip\":1}", MECH_PARSE_DEFENSE, "defense.clip: spm takes no input range"},
        {"{\"name\":\"spm\",\"epsilon\":1,\"sigma\":1}", MECH_PARSE_DEFENSE, "defense.sigma: unknown key"},
        {"{\"name\":\"duchi\",\"epsilon\":1}", MECH_PARSE_DEFENSE, "defense.range: duchi needs an input range"},
        {"{\"name\":\"pm\",\"epsilon\":1}", MECH_PARSE_DEFENSE, "defense.range: pm needs"},
        {"{\"name\":\"ldp-fl\",\"epsilon\":1}", MECH_PARSE_AUDIT, "defense.range: ldp-fl needs"},
        {"{\"name\":\"laplace\",\"epsilon\":1}", MECH_PARSE_AUDIT, "defense.range: laplace needs"},
        {"{\"name\":\"gaussian\",\"epsilon\":1}", MECH_PARSE_AUDIT, "defense.range: gaussian needs"},
        {"{\"name\":\"adaptive-harmony\",\"epsilon\":1}", MECH_PARSE_DEFENSE, "defense.range: adaptive-harmony"},
        {"{\"name\":\"laplace\",\"epsilon\":1,\"clip\":1,\"range\":[0,1]}", MECH_PARSE_DEFENSE, "defense.range: give "},
        {"{\"name\":\"laplace\",\"epsilon\":1,\"range\":[1,0]}", MECH_PARSE_DEFENSE, "defense.range: needs lo < hi"},
        {"{\"name\":\"laplace\",\"epsilon\":1,\"range\":[1]}", MECH_PARSE_DEFENSE, "defense.range: must have 2"},
        {"{\"name\":\"laplace\",\"epsilon\":1,\"clip\":0}", MECH_PARSE_DEFENSE, "defense.clip: must be in"},
        {"{\"name\":\"laplace\",\"epsilon\":1,\"range\":\"layer\"}", MECH_PARSE_DEFENSE, "defense.range: must be [lo"},
        {"{\"name\":\"ldp-fl\",\"epsilon\":1,\"range\":\"layer\"}", MECH_PARSE_AUDIT, "defense.range: must be"},
        {"{\"name\":\"ldp-fl\",\"epsilon\":1,\"clip\":1,\"min_radius\":1}", MECH_PARSE_DEFENSE,
         "defense.min_radius: only with"},
        {"{\"name\":\"gaussian\",\"epsilon\":1,\"clip\":1,\"delta\":0}", MECH_PARSE_DEFENSE, "defense.delta"},
        {"{\"name\":\"adaptive-harmony\",\"epsilon\":1,\"clip\":1,\"dim\":3}", MECH_PARSE_DEFENSE,
         "defense.dim: unknown key"},
        {"{\"name\":\"adaptive-harmony\",\"epsilon\":1,\"clip\":1,\"dim\":0}", MECH_PARSE_AUDIT, "defense.dim"},
        {"{\"name\":\"rr\",\"epsilon\":1}", MECH_PARSE_DEFENSE, "defense.name: unknown mechanism \"rr\""},
        {"{\"name\":\"nope\",\"epsilon\":1}", MECH_PARSE_AUDIT, "defense.name: unknown mechanism"},
        {"[1]", MECH_PARSE_AUDIT, "defense: must be an object"},
        {"{\"name\":\"duchi\",\"epsilon\":1,\"sampler\":\"float\"}", MECH_PARSE_AUDIT,
         "defense.sampler: duchi has one sampler, \"safe\""},
        {"{\"name\":\"pm\",\"epsilon\":1,\"sampler\":\"double\"}", MECH_PARSE_AUDIT,
         "defense.sampler: unknown sampler \"double\" (expected one of: safe, float)"},
        {"{\"name\":\"pm\",\"epsilon\":1,\"sampler\":1}", MECH_PARSE_AUDIT, "defense.sampler"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        MechSpec sp;
        FpError e = {0};
        ck_assert_msg(parse_text(bad[i].text, bad[i].flags, NULL, &sp, &e) == FP_EPARAM, "accepted %s", bad[i].text);
        ck_assert_msg(strstr(e.msg, bad[i].msg) != NULL, "%s: message \"%s\"", bad[i].text, e.msg);
        ck_assert_ptr_null(strchr(e.msg, '\n'));
    }
    // Classic Gaussian at ε >= 1 parses but cannot be resolved.
    MechSpec sp;
    Mech m;
    FpError e = {0};
    ck_assert_int_eq(parse_text("{\"name\":\"gaussian\",\"variant\":\"classic\",\"epsilon\":1,\"clip\":1}",
                                MECH_PARSE_DEFENSE, NULL, &sp, &e),
                     FP_OK);
    ck_assert_int_eq(mech_init(&m, &sp, &e), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(e.msg, "defense.epsilon: the classic Gaussian"));
    // The safe samplers' tables have limits; the message names the float sampler.
    ck_assert_int_eq(parse_text("{\"name\":\"laplace\",\"epsilon\":0.001,\"clip\":1}", MECH_PARSE_DEFENSE, NULL,
                                &sp, &e),
                     FP_OK);
    ck_assert_int_eq(mech_init(&m, &sp, &e), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(e.msg, "defense.epsilon: the safe laplace sampler needs epsilon >="));
    ck_assert_ptr_nonnull(strstr(e.msg, "\"sampler\": \"float\""));
    ck_assert_int_eq(parse_text("{\"name\":\"gaussian\",\"epsilon\":0.01,\"clip\":1}", MECH_PARSE_DEFENSE, NULL,
                                &sp, &e),
                     FP_OK);
    ck_assert_int_eq(mech_init(&m, &sp, &e), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(e.msg, "defense.epsilon: the safe gaussian sampler holds sigma up to"));
    sp.sampler = MECH_SAMPLER_FLOAT;   // the float samplers take them
    ck_assert_int_eq(mech_init(&m, &sp, &e), FP_OK);
    // Defaults: duchi/pm get [-1, 1] in an audit; variants default to the first listed.
    ck_assert_int_eq(parse_text("{\"name\":\"pm\",\"epsilon\":1}", MECH_PARSE_AUDIT, NULL, &sp, &e), FP_OK);
    ck_assert(sp.has_range && sp.lo == -1 && sp.hi == 1);
    ck_assert_int_eq(parse_text("{\"name\":\"spm\",\"epsilon\":1}", MECH_PARSE_DEFENSE, NULL, &sp, &e), FP_OK);
    ck_assert_int_eq(sp.variant, MV_CORRECTED);
    ck_assert_int_eq(parse_text("{\"name\":\"gaussian\",\"epsilon\":1,\"clip\":2}", MECH_PARSE_AUDIT, NULL, &sp, &e),
                     FP_OK);
    ck_assert(sp.variant == MV_ANALYTIC && sp.delta == 1e-5 && sp.lo == -2 && sp.hi == 2);
    ck_assert_int_eq(parse_text("{\"name\":\"ldp-fl\",\"epsilon\":1,\"range\":\"layer\"}", MECH_PARSE_DEFENSE, NULL,
                                &sp, &e),
                     FP_OK);
    ck_assert(sp.range_per_layer && sp.min_radius == 1e-3);
    static const char *const extra[] = {"upload", NULL};
    ck_assert_int_eq(parse_text("{\"name\":\"spm\",\"epsilon\":1,\"upload\":\"delta\"}", MECH_PARSE_DEFENSE, extra,
                                &sp, &e),
                     FP_OK);
}
END_TEST

// ---- the defense plugins ----------------------------------------------------------------

// Three layers: a 5x7 weight and its bias (trainable), and a batch-norm statistic.
static ParamLayer test_layers[3] = {
    {.name = "fc.weight", .offset = 0, .count = 35, .ndim = 2, .shape = {5, 7}, .kind = PARAM_WEIGHT, .trainable = 1},
    {.name = "fc.bias", .offset = 35, .count = 5, .ndim = 1, .shape = {5}, .kind = PARAM_BIAS, .trainable = 1},
    {.name = "bn.running_mean", .offset = 40, .count = 4, .ndim = 1, .shape = {4}, .kind = PARAM_BN_STAT,
     .trainable = 0},
};
static const ParamTable test_table = {.n_layers = 3, .layers = test_layers, .n_params = 44, .n_trainable = 40};
#define NP 44

static void *create_defense(const DefenseOps *ops, const char *text, FpStatus want, const char *msg) {
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    DefenseSetup setup = {.seed = 5, .params = &test_table, .n_clients = 10, .rounds = 3, .sample_rate = 1};
    void *state = NULL;
    FpError e = {0};
    FpStatus st = ops->create(o, "defense", &setup, &state, &e);
    cJSON_Delete(o);
    ck_assert_msg(st == want, "%s: status %d (%s)", text, st, e.msg);
    if (msg)
        ck_assert_msg(strstr(e.msg, msg) != NULL, "%s: message \"%s\"", text, e.msg);
    return state;
}

static DefenseRound test_round(int round, int client, const float *global) {
    return (DefenseRound){.round = round, .client = client,
                          .rng = rng_stream(5, RNG_DEFENSE, (uint32_t)round, (uint32_t)client),
                          .aux_rng = rng_stream(5, RNG_DEFENSE_AUX, (uint32_t)round, (uint32_t)client),
                          .global = global};
}

START_TEST(scalar_defenses_perturb_trainable_scalars) {
    static const char *const cfg[][2] = {
        {"spm", "{\"name\":\"spm\",\"variant\":\"paper\",\"epsilon\":0.6}"},
        {"duchi", "{\"name\":\"duchi\",\"epsilon\":1,\"clip\":0.5}"},
        {"pm", "{\"name\":\"pm\",\"epsilon\":1,\"range\":[-1,2]}"},
        {"ldp-fl", "{\"name\":\"ldp-fl\",\"epsilon\":2,\"range\":[-0.5,0.5]}"},
        {"laplace", "{\"name\":\"laplace\",\"epsilon\":1,\"clip\":1,\"upload\":\"delta\"}"},
        {"gaussian", "{\"name\":\"gaussian\",\"epsilon\":0.5,\"clip\":0.1}"},
    };
    float global[NP], up[NP], ref[NP];
    for (int i = 0; i < NP; i++)
        global[i] = 0.1f * (float)((i * 7) % 11) - 0.4f;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const DefenseOps *ops = defense_find(cfg[c][0]);
        ck_assert_ptr_nonnull(ops);
        MechDefense *d = create_defense(ops, cfg[c][1], FP_OK, NULL);
        ck_assert_int_eq(ops->upload_kind(d), c == 4 ? UPLOAD_DELTA : UPLOAD_WEIGHTS);
        ck_assert_uint_eq(d->d, 40);
        DefenseRound r = test_round(2, 7, global);
        memcpy(up, global, sizeof up);
        ck_assert_int_eq(ops->client_perturb(d, up, &r, NULL), FP_OK);
        // Element i is the mechanism applied to element i of the round's stream.
        for (int i = 0; i < 40; i++) {
            ref[i] = mech_draw_one(&d->mech, global[i], &r.rng, (uint64_t)i);
            ck_assert_msg(memcmp(&up[i], &ref[i], sizeof(float)) == 0, "%s element %d", cfg[c][0], i);
        }
        for (int i = 40; i < NP; i++)
            ck_assert(up[i] == global[i]);   // batch-norm statistics travel as they are
        // Another client draws other noise; the same client again the same.
        float again[NP];
        memcpy(again, global, sizeof again);
        DefenseRound r2 = test_round(2, 8, global);
        ops->client_perturb(d, again, &r2, NULL);
        ck_assert(memcmp(again, up, 40 * sizeof(float)) != 0);
        // The table carries 4 batch-norm statistics unperturbed: the bound is conditional.
        PrivacyRecord pr;
        defense_privacy(ops, d, 3, &pr, NULL);
        ck_assert_str_eq(pr.unit, "scalar");
        ck_assert_double_eq(pr.epsilon_round_nominal, d->mech.spec.eps);
        ck_assert_double_eq_tol(pr.epsilon_total_nominal, 3 * d->mech.spec.eps, 1e-12);
        ck_assert(isinf(pr.epsilon_total_sound));
        if (c == 0) {
            ck_assert_int_eq(pr.guarantee, GUARANTEE_NONE);   // SPM: the sign only
            ck_assert_ptr_nonnull(strstr(pr.assumptions[0], "magnitude"));
        } else {
            ck_assert_int_eq(pr.guarantee, GUARANTEE_CONDITIONAL);
            ck_assert_ptr_nonnull(strstr(pr.assumptions[0], "4 untrainable scalars"));
            ck_assert_ptr_null(pr.assumptions[1]);
            if (c == 5)
                ck_assert(pr.epsilon_total_conditional > 3 * 0.5 && pr.delta == 1e-5 && pr.sigma == d->mech.sigma);
            else
                ck_assert_double_eq_tol(pr.epsilon_total_conditional, 40 * 3 * d->mech.spec.eps, 1e-9);
        }
        cJSON *desc = cJSON_CreateObject();
        ops->describe(d, desc);
        ck_assert_double_eq(cJSON_GetObjectItem(desc, "epsilon")->valuedouble, d->mech.spec.eps);
        cJSON_Delete(desc);
        ops->destroy(d);
    }
}
END_TEST

// The float samplers' records: guarantee none, the reason with the measured share of
// impossible outputs (pm, laplace) or undecidable (gaussian); the same defenses with the
// safe sampler on a table without batch-norm statistics: proven.
START_TEST(float_sampler_records) {
    static const char *const cfg[][3] = {
        {"pm", "{\"name\":\"pm\",\"epsilon\":1,\"clip\":1%s}", "% of 2000 outputs at input 1 cannot occur at input -1"},
        {"laplace", "{\"name\":\"laplace\",\"epsilon\":1,\"clip\":1%s}", "% of 2000 outputs at input 1 cannot occur"},
        {"gaussian", "{\"name\":\"gaussian\",\"epsilon\":1,\"clip\":1%s}", "so the support audit cannot decide them"},
        {"spm", "{\"name\":\"spm\",\"epsilon\":0.5%s}", "cannot occur at input -1"},
    };
    static ParamLayer one[1] = {
        {.name = "w", .offset = 0, .count = 40, .ndim = 1, .shape = {40}, .kind = PARAM_WEIGHT, .trainable = 1}};
    const ParamTable table = {.n_layers = 1, .layers = one, .n_params = 40, .n_trainable = 40};
    DefenseSetup setup = {.seed = 5, .params = &table, .n_clients = 10, .rounds = 3, .sample_rate = 1};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int fl = 0; fl < 2; fl++) {
            char text[256];
            snprintf(text, sizeof text, cfg[c][1], fl ? ",\"sampler\":\"float\"" : "");
            cJSON *o = cJSON_Parse(text);
            const DefenseOps *ops = defense_find(cfg[c][0]);
            void *st = NULL;
            FpError e = {0};
            ck_assert_msg(ops->create(o, "defense", &setup, &st, &e) == FP_OK, "%s: %s", text, e.msg);
            cJSON_Delete(o);
            PrivacyRecord pr;
            defense_privacy(ops, st, 2, &pr, NULL);
            int spm = strcmp(cfg[c][0], "spm") == 0;
            if (fl || spm) {
                ck_assert_int_eq(pr.guarantee, GUARANTEE_NONE);
                ck_assert(isinf(pr.epsilon_total_sound));
            } else {
                ck_assert_int_eq(pr.guarantee, GUARANTEE_PROVEN);
                // 40 scalars × 2 rounds: 80 by composition (gaussian: its RDP bound, above 1)
                ck_assert(isfinite(pr.epsilon_total_sound) && pr.epsilon_total_sound > 1);
                if (strcmp(cfg[c][0], "gaussian") != 0)
                    ck_assert_double_eq_tol(pr.epsilon_total_sound, 80, 1e-9);
                ck_assert_ptr_null(pr.assumptions[0]);
            }
            if (fl) {
                const char *why = pr.assumptions[spm ? 1 : 0];
                ck_assert_ptr_nonnull(why);
                ck_assert_msg(strstr(why, "defense.sampler is \"float\"") && strstr(why, "Mironov 2012") &&
                                  strstr(why, cfg[c][2]),
                              "%s: %s", text, why);
            }
            ops->destroy(st);
        }
}
END_TEST

START_TEST(defense_parameter_errors) {
    create_defense(defense_find("spm"), "{\"name\":\"spm\",\"variant\":\"wrong\",\"epsilon\":1}", FP_EPARAM,
                   "defense.variant: unknown variant");
    create_defense(defense_find("spm"), "{\"name\":\"spm\",\"epsilon\":0}", FP_EPARAM, "defense.epsilon");
    create_defense(defense_find("spm"), "{\"name\":\"spm\",\"epsilon\":1,\"extra\":2}", FP_EPARAM,
                   "defense.extra: unknown key");
    create_defense(defense_find("pm"), "{\"name\":\"pm\",\"epsilon\":1}", FP_EPARAM, "defense.range: pm needs");
    create_defense(defense_find("ldp-fl"), "{\"name\":\"ldp-fl\",\"epsilon\":1,\"range\":\"layer\",\"upload\":\"delta\"}",
                   FP_EPARAM, "defense.range: \"layer\" ranges");
    create_defense(defense_find("spm"), "{\"name\":\"spm\",\"epsilon\":1,\"upload\":\"noise\"}", FP_EPARAM,
                   "defense.upload");
    create_defense(defense_find("duchi"), "{\"name\":\"pm\",\"epsilon\":1,\"clip\":1}", FP_EPARAM,
                   "defense.name: this defense runs duchi");
    create_defense(defense_find("adaptive-harmony"),
                   "{\"name\":\"adaptive-harmony\",\"epsilon\":1,\"clip\":1,\"self_sampling\":1}", FP_EPARAM,
                   "defense.self_sampling");
}
END_TEST

// "range": "layer": each layer's [c - r, c + r] is its [min, max] in the global model.
START_TEST(layer_ranges_come_from_the_global_model) {
    const DefenseOps *ops = defense_find("ldp-fl");
    MechDefense *d = create_defense(ops, "{\"name\":\"ldp-fl\",\"epsilon\":1,\"range\":\"layer\",\"min_radius\":0.01}",
                                    FP_OK, NULL);
    float global[NP] = {0};
    for (int i = 0; i < 35; i++)
        global[i] = -0.2f + 0.01f * (float)i;   // [-0.2, 0.14]
    for (int i = 35; i < 40; i++)
        global[i] = 0.5f;                       // a constant bias: radius floored
    DefenseRound r = test_round(0, 0, global);
    Mech m;
    ck_assert_int_eq(mech_defense_layer_mech(d, 0, &r, &m, NULL), FP_OK);
    ck_assert_double_eq_tol(m.c, -0.03, 1e-6);
    ck_assert_double_eq_tol(m.r, 0.17, 1e-6);
    ck_assert_int_eq(mech_defense_layer_mech(d, 1, &r, &m, NULL), FP_OK);
    ck_assert_double_eq_tol(m.c, 0.5, 1e-7);
    ck_assert_double_eq_tol(m.r, 0.01, 1e-12);
    float up[NP];
    memcpy(up, global, sizeof up);
    up[3] = 9;   // clipped to c + r
    ck_assert_int_eq(ops->client_perturb(d, up, &r, NULL), FP_OK);
    double k = (exp(1.0) + 1) / (exp(1.0) - 1);
    for (int i = 0; i < 35; i++)
        ck_assert(fabs(fabs(up[i] + 0.03) - 0.17 * k) < 1e-5);
    for (int i = 35; i < 40; i++)
        ck_assert(fabs(fabs(up[i] - 0.5) - 0.01 * k) < 1e-5);
    ops->destroy(d);
}
END_TEST

START_TEST(harmony_client_side) {
    const DefenseOps *ops = defense_find("adaptive-harmony");
    ck_assert_ptr_nonnull(ops->participates);
    ck_assert_ptr_nonnull(ops->server_aggregate);
    MechDefense *dc = create_defense(ops, "{\"name\":\"adaptive-harmony\",\"epsilon\":2,\"range\":[-1,3]}", FP_OK,
                                     NULL);
    MechDefense *dp = create_defense(
        ops, "{\"name\":\"adaptive-harmony\",\"variant\":\"paper\",\"epsilon\":2,\"range\":[-1,3]}", FP_OK, NULL);
    float global[NP];
    for (int i = 0; i < NP; i++)
        global[i] = 0.05f * (float)i - 1;
    double k = (exp(2.0) + 1) / (exp(2.0) - 1);
    for (int v = 0; v < 2; v++) {
        MechDefense *d = v ? dp : dc;
        float up[NP];
        memcpy(up, global, sizeof up);
        DefenseRound r = test_round(1, 3, global);
        ck_assert_int_eq(ops->client_perturb(d, up, &r, NULL), FP_OK);
        // One value c ± d·r·κ per unit (c = 1, r = 2), the fill elsewhere.
        const int off[2] = {0, 35}, cnt[2] = {35, 5};
        for (int u = 0; u < 2; u++) {
            int hits = 0;
            for (int i = off[u]; i < off[u] + cnt[u]; i++) {
                if (up[i] == (v ? 0.0f : 1.0f))
                    continue;
                hits++;
                ck_assert_double_eq_tol(fabs(up[i] - 1.0), cnt[u] * 2 * k, 1e-4);
            }
            ck_assert_int_eq(hits, 1);
        }
        for (int i = 40; i < NP; i++)
            ck_assert(up[i] == global[i]);
    }
    // Restrictive self-sampling: Bernoulli(E[q]) = Bernoulli(0.75), per round and client.
    int n = 40000, in = 0;
    for (int i = 0; i < n; i++) {
        DefenseRound r = test_round(i / 200, i % 200, global);
        in += ops->participates(dc, &r);
    }
    ck_assert_double_le(fabs(in - 0.75 * n), 6 * sqrt(n * 0.75 * 0.25));
    PrivacyRecord pr;
    defense_privacy(ops, dc, 4, &pr, NULL);
    ck_assert_str_eq(pr.unit, "layer");
    ck_assert_double_eq(pr.epsilon_round_nominal, 2);
    // L = 2 units, 4 rounds; conditional: the table's 4 batch-norm statistics are unperturbed
    ck_assert_int_eq(pr.guarantee, GUARANTEE_CONDITIONAL);
    ck_assert_double_eq_tol(pr.epsilon_total_conditional, 2 * 2 * 4, 1e-12);
    ops->destroy(dc);
    ops->destroy(dp);
    MechDefense *off = create_defense(ops, "{\"name\":\"adaptive-harmony\",\"epsilon\":2,\"clip\":1,"
                                           "\"self_sampling\":false}", FP_OK, NULL);
    DefenseRound r = test_round(0, 0, global);
    for (int i = 0; i < 100; i++) {
        r.aux_rng = rng_stream(5, RNG_DEFENSE_AUX, 0, (uint32_t)i);
        ck_assert_int_eq(ops->participates(off, &r), 1);
    }
    ops->destroy(off);
}
END_TEST

// The server estimator c + (1/K)Σ(W* - c) is unbiased (corrected); the zero-filled
// paper variant is biased by -c(1 - 1/d). Averaged over R rounds of K clients with the
// same weights w: mean within 6 sd, sd = r·sqrt((dκ² - t²)/(K·R)).
START_TEST(harmony_server_estimator) {
    const DefenseOps *ops = defense_find("adaptive-harmony");
    const char *const cfg[2] = {"{\"name\":\"adaptive-harmony\",\"epsilon\":1,\"range\":[0,2]}",
                                "{\"name\":\"adaptive-harmony\",\"variant\":\"paper\",\"epsilon\":1,\"range\":[0,2]}"};
    float w[NP];
    for (int i = 0; i < NP; i++)
        w[i] = 0.05f * (float)i;   // inside [0, 2]; bn stats too
    enum { K = 20, R = 3000 };
    float *ups = malloc(sizeof(float) * NP * K);
    const float *ptr[K];
    double weights[K];
    int clients[K];
    for (int s = 0; s < K; s++) {
        ptr[s] = ups + s * NP;
        weights[s] = (s + 1.0) / (K * (K + 1) / 2.0);
        clients[s] = s;
    }
    double k = (exp(1.0) + 1) / (exp(1.0) - 1);
    for (int v = 0; v < 2; v++) {
        MechDefense *d = create_defense(ops, cfg[v], FP_OK, NULL);
        double *sum = calloc(NP, sizeof(double));
        float out[NP];
        for (int rd = 0; rd < R; rd++) {
            for (int s = 0; s < K; s++) {
                memcpy(ups + s * NP, w, sizeof w);
                DefenseRound r = test_round(rd, s, w);
                ops->client_perturb(d, ups + s * NP, &r, NULL);
            }
            ck_assert_int_eq(ops->server_aggregate(d, rd, ptr, weights, clients, K, out, NULL), FP_OK);
            for (int i = 0; i < NP; i++)
                sum[i] += out[i];
        }
        for (int i = 0; i < 40; i++) {
            // c = 1, r = 1; the zero fill adds c²(d-1)/d² + 2crt(d-1)/d to the variance.
            double dim = i < 35 ? 35 : 5, t = (w[i] - 1.0) / 1.0;
            double want = v ? w[i] - 1.0 * (1 - 1 / dim) : w[i];
            double var = dim * k * k - t * t + (v ? (dim - 1) / (dim * dim) + 2 * t * (dim - 1) / dim : 0);
            double sd = sqrt(var / (K * (double)R));
            ck_assert_msg(fabs(sum[i] / R - want) <= 6 * sd, "variant %d element %d: %g vs %g (sd %g)", v, i,
                          sum[i] / R, want, sd);
        }
        for (int i = 40; i < NP; i++)   // untrainable: the FedAvg-weighted mean of equal values
            ck_assert_double_eq_tol(sum[i] / R, w[i], 1e-6);
        free(sum);
        ops->destroy(d);
    }
    free(ups);
}
END_TEST

Suite *suite_mechanisms(void) {
    Suite *s = suite_create("mechanisms");
    TCase *t = tcase_create("mechanisms");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, fast_path_matches_oracle);
    tcase_add_test(t, float_log_and_box_muller);
    tcase_add_test(t, closed_forms_match_laws);
    tcase_add_test(t, safe_moments_near_papers);
    tcase_add_test(t, spm_matches_digest_table);
    tcase_add_test(t, other_closed_forms);
    tcase_add_test(t, moments_within_six_sigma);
    tcase_add_test(t, histograms_match_laws);
    tcase_add_test(t, bad_parameters_name_the_json_path);
    tcase_add_test(t, scalar_defenses_perturb_trainable_scalars);
    tcase_add_test(t, defense_parameter_errors);
    tcase_add_test(t, float_sampler_records);
    tcase_add_test(t, layer_ranges_come_from_the_global_model);
    tcase_add_test(t, harmony_client_side);
    tcase_add_test(t, harmony_server_estimator);
    suite_add_tcase(s, t);
    return s;
}
