// Federated DP defenses (gaussian-dpfedavg, dp-fedasgp, fedsmp, avp, nbafl) and their
// helpers (defenses/clip.h): clipping and selection, statistical tests of every noise
// law with 6-sigma tolerances derived from the estimator's variance (each with a
// companion check that the same test rejects a broken mechanism), the SVT pass rate
// against eq. 14's λ_t schedule, σ-for-target never above the target, AVP's schedule
// and ledgers, and `fedpriv train` runs (good configs, and bad parameters → exit 2 with
// one line naming the JSON path; skipped when FEDPRIV_BIN is unset).
//
// Statistical tests. For zero-mean noise of variance v the estimator mean(x²) over n
// draws has standard error v·√((κ − 1)/n), κ the kurtosis (Gaussian 3, Laplace 6); a
// test passes when |mean(x²) − v| < 6 standard errors. Seeds are fixed, so each test is
// deterministic; at 6σ a correct mechanism fails with probability ~2e-9 per seed.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend.h"
#include "datasets/dataset.h"
#include "defenses/dp/accountant.h"
#include "defenses/clip.h"
#include "defenses/registry.h"
#include "fl/defense.h"
#include "fl/fed.h"
#include "models/model.h"
#include "core/jsonv.h"
#include "tests/cli_run.h"
#include "tests/defense_fixtures.h"

// ---- clip helpers ----------------------------------------------------------------------

START_TEST(clip_scales_trainable_only) {
    Table t;
    table_init(&t, 3, 1);
    float x[7] = {3, 0, 4, 100, 100, 100, 0};
    ck_assert_double_eq_tol(clip_norm(x, &t.table), 5.0, 1e-12);
    double before = clip_to_norm(x, &t.table, 1.0);
    ck_assert_double_eq_tol(before, 5.0, 1e-12);
    // Just inside C (CLIP_MARGIN), never above it as stored.
    ck_assert(clip_norm(x, &t.table) <= 1.0 && clip_norm(x, &t.table) >= 1.0 - 2 * CLIP_MARGIN);
    ck_assert_float_eq(x[3], 100.0f); // batch-norm statistics are never touched
    ck_assert_float_eq_tol(x[0], 0.6f, 1e-6f);
    float y[7] = {0.1f, 0, 0, 7, 7, 7, 0.1f};
    clip_to_norm(y, &t.table, 1.0); // already inside: unchanged
    ck_assert_float_eq(y[0], 0.1f);
    ck_assert_float_eq(y[6], 0.1f);
}
END_TEST

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

START_TEST(select_kth_matches_sort) {
    RngStream rs = rng_stream(SEED, RNG_TEST, 1, 0);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + rng_next_below(&rs, 300);
        float a[300], b[300], c[300];
        for (size_t i = 0; i < n; i++) // few distinct values: many ties
            a[i] = (float)(rng_next_below(&rs, trial % 2 ? 7 : 1000)) - 3.0f;
        memcpy(b, a, n * sizeof(float));
        qsort(b, n, sizeof(float), cmp_float);
        size_t k = rng_next_below(&rs, (uint32_t)n);
        memcpy(c, a, n * sizeof(float));
        ck_assert_float_eq(clip_select_kth(c, n, k), b[k]);
    }
}
END_TEST

START_TEST(top_k_keeps_exactly_k_largest) {
    float v[8] = {5, 1, 5, 3, 9, 5, 0, 2};
    unsigned char keep[8];
    float scratch[8];
    clip_top_k(v, 8, 3, keep, scratch); // 9, then two of the three 5s: the first two by index
    unsigned char want[8] = {1, 0, 1, 0, 1, 0, 0, 0};
    ck_assert_mem_eq(keep, want, 8);
    clip_top_k(v, 8, 0, keep, scratch);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(keep[i], 0);
    clip_top_k(v, 8, 8, keep, scratch);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(keep[i], 1);
}
END_TEST

// ---- gaussian-dpfedavg -------------------------------------------------------------------

// Client-side noise: each of the round's k participants adds N(0, (zC)²/k) to every
// trainable coordinate (here k = 10).
START_TEST(dpfedavg_client_noise_sigma) {
    Table t;
    table_init(&t, 4000, 96);
    DefenseSetup su = setup_for(&t, 100, 10, 0.1, 50);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1.3,\"clip\":2,\"noise\":\"client\"}",
                            &su, &ops);
    double want_std = 1.3 * 2 / sqrt(10.0);
    size_t np = t.table.n_params, n = 0;
    double *x = malloc(sizeof(double) * np * 20);
    float *u = malloc(sizeof(float) * np);
    for (int c = 0; c < 20; c++) {
        memset(u, 0, sizeof(float) * np); // inside the clip: the upload is pure noise
        u[4000] = 7.0f;                   // a batch-norm statistic
        DefenseRound r = round_ctx(3, c, 50);
        r.participants = 10;
        ck_assert_int_eq(ops->client_perturb(st, u, &r, NULL), FP_OK);
        ck_assert_float_eq(u[4000], 7.0f);
        for (size_t i = 0; i < np; i++)
            if (i < 4000 || i >= 4003)
                x[n++] = u[i];
    }
    double z = moment_z(x, n, want_std * want_std, 3);
    ck_assert_msg(fabs(z) < 6, "client noise variance off by %.1f standard errors", z);
    // Companion: the same check rejects a mechanism that forgets the 1/sqrt(m) share
    // scaled down to a 3% error in the std (a subtler bug than that).
    for (size_t i = 0; i < n; i++)
        x[i] *= 1.03;
    ck_assert_msg(fabs(moment_z(x, n, want_std * want_std, 3)) > 6, "the variance check misses a 3%% std error");
    free(x);
    free(u);
    ops->destroy(st);
}
END_TEST

// Server-side noise: (Σ uploads + N(0, (zC)²)) / m; uploads are clipped, not noised.
START_TEST(dpfedavg_server_noise_and_clip) {
    Table t;
    table_init(&t, 3000, 0);
    DefenseSetup su = setup_for(&t, 50, 10, 0.2, 50);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":0.8,\"clip\":1.5}", &su, &ops);
    size_t np = t.table.n_params;
    float *u[10];
    for (int c = 0; c < 10; c++) {
        u[c] = malloc(sizeof(float) * np);
        for (size_t i = 0; i < np; i++)
            u[c][i] = (float)(c + 1); // norm ≫ C: clipped to exactly C, no noise client-side
        DefenseRound r = round_ctx(0, c, 50);
        ops->client_perturb(st, u[c], &r, NULL);
        ck_assert_double_eq_tol(clip_norm(u[c], &t.table), 1.5, 1e-5);
        ck_assert_float_eq_tol(u[c][0], (float)(1.5 / sqrt(3000.0)), 1e-7f);
    }
    double w[10];
    for (int c = 0; c < 10; c++)
        w[c] = 0.1;
    int clients[10] = {0};
    float *out = malloc(sizeof(float) * np);
    double *x = malloc(sizeof(double) * np * 40);
    size_t n = 0;
    for (int round = 0; round < 40; round++) {
        ck_assert_int_eq(defense_aggregate(ops, st, round, (const float *const *)u, w, clients, 10, np, out, NULL), FP_OK);
        // the mean of the clipped uploads is 10·C/√d/m per coordinate (m = qN = 10)
        for (size_t i = 0; i < 3000; i++) // the trainable layer (3000..3002 are statistics)
            x[n++] = out[i] - 1.5 / sqrt(3000.0);
    }
    double want = 0.8 * 1.5 / 10;
    double z = moment_z(x, n, want * want, 3);
    ck_assert_msg(fabs(z) < 6, "server noise variance off by %.1f standard errors", z);
    ck_assert_msg(fabs(moment_z(x, n, want * want * 1.06, 3)) > 6, "the check misses a 3%% std error");
    for (int c = 0; c < 10; c++)
        free(u[c]);
    free(out);
    free(x);
    ops->destroy(st);
}
END_TEST

// σ for a target ε never overshoots it, and is tight (within 0.1%), over q, rounds, ε.
START_TEST(sigma_for_target_never_exceeds) {
    Table t;
    table_init(&t, 10, 0);
    const double qs[] = {0.01, 0.1, 1.0};
    const int rounds[] = {1, 30, 400};
    const double eps[] = {0.1, 0.5, 2, 8};
    const char *names[] = {"gaussian-dpfedavg", "fedsmp"};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int e = 0; e < 4; e++) {
                int clients = 100;
                DefenseSetup su = setup_for(&t, clients, rounds[b], qs[a], 10);
                char json[160];
                snprintf(json, sizeof json, "{\"name\":\"%s\",\"epsilon\":%g,\"delta\":1e-5}", names[(a + b + e) % 2],
                         eps[e]);
                const DefenseOps *ops;
                void *st = make_defense(json, &su, &ops);
                PrivacyRecord rec;
                ops->privacy(st, rounds[b], &rec);
                ck_assert_msg(rec.epsilon_total_sound <= eps[e], "%s q=%g T=%d: eps %.9g > target %g", json, qs[a],
                              rounds[b], rec.epsilon_total_sound, eps[e]);
                ck_assert_msg(rec.epsilon_total_sound >= eps[e] * 0.999, "%s: eps %.9g far below target", json,
                              rec.epsilon_total_sound);
                ck_assert_double_eq(rec.epsilon_total_nominal, rec.epsilon_total_sound);
                ck_assert_double_eq(rec.delta, 1e-5);
                ops->privacy(st, rounds[b] / 2, &rec); // fewer rounds, less spent
                ck_assert(rec.epsilon_total_sound <= eps[e]);
                ops->destroy(st);
            }
}
END_TEST

// The paper calibration: σ = (ΔS/ε)√(2(ln 1.25 + ε)) per client (digest §1.2: ε=0.1 → 8.039).
START_TEST(dpfedavg_paper_sigma_eq2) {
    Table t;
    table_init(&t, 10, 0);
    DefenseSetup su = setup_for(&t, 100, 10, 0.1, 10);
    const double eps[] = {0.1, 0.2, 0.5, 1, 2, 4}, want[] = {8.039, 4.600, 2.405, 1.564, 1.054, 0.727};
    for (int i = 0; i < 6; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"name\":\"gaussian-dpfedavg\",\"variant\":\"paper\",\"epsilon\":%g}", eps[i]);
        const DefenseOps *ops;
        void *st = make_defense(json, &su, &ops);
        ck_assert_double_eq_tol(describe_number(ops, st, "client_noise_std"), want[i], 5e-4);
        PrivacyRecord rec;
        ops->privacy(st, 7, &rec);
        ck_assert_double_eq_tol(rec.epsilon_total_nominal, 7 * eps[i], 1e-12);
        ck_assert(isfinite(rec.epsilon_total_sound) && rec.epsilon_total_sound > 0);
        ops->destroy(st);
    }
}
END_TEST

// ---- dp-fedasgp ---------------------------------------------------------------------------

// d evenly spaced distinct values (spacing s, centred), shuffled, norm < C = 1.
static void spaced_values(float *u, size_t d, double s, uint64_t seed) {
    uint32_t *perm = malloc(sizeof(uint32_t) * d);
    for (size_t j = 0; j < d; j++)
        perm[j] = (uint32_t)j;
    RngStream rs = rng_stream(seed, RNG_TEST, 7, 0);
    rng_shuffle_u32(&rs, perm, (uint32_t)d);
    for (size_t j = 0; j < d; j++)
        u[j] = (float)(((double)perm[j] - (d - 1) / 2.0) * s);
    free(perm);
}

// With α, β negligible, exactly the coordinates >= λ_t pass: d − r_t + 1 of them, with
// r_t = min(⌈t·d/T⌉, ⌈0.9·d⌉) (eq. 14), and only they change; the rest are sent exactly.
START_TEST(asgp_paper_threshold_schedule) {
    enum { D = 1000 };
    Table t;
    table_init(&t, D, 0);
    const int T = 40;
    DefenseSetup su = setup_for(&t, 100, T, 0.1, 10);
    const DefenseOps *ops;
    // ε1 : ε2 = q^{2/3} : 1 with ε1 + ε2 = 0.99: with q = 1e24 and ΔS = 1e-26 the value
    // noise q·ΔS/ε3 is Lap(1) while α ~ Lap(1e-26) and β ~ Lap(1e-10), far below the spacing.
    void *st = make_defense("{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":1e-26,"
                            "\"svt_q\":1e24,\"test_share\":0.99}", &su, &ops);
    ck_assert_double_le(describe_number(ops, st, "threshold_noise_scale"), 1e-9);
    ck_assert_double_eq_tol(describe_number(ops, st, "laplace_scale"), 1.0, 1e-9);
    float in[D], u[D];
    spaced_values(in, D, 1e-4, 1);
    const int ts[] = {1, 2, 10, 20, 36, 37, 40};
    for (int k = 0; k < 7; k++) {
        memcpy(u, in, sizeof u);
        DefenseRound r = round_ctx(ts[k] - 1, 5, 10);
        ops->client_perturb(st, u, &r, NULL);
        int r1 = (int)ceil((double)ts[k] * D / T), r2 = (int)ceil(0.9 * D), rt = r1 < r2 ? r1 : r2;
        float lambda = (float)(((double)(rt - 1) - (D - 1) / 2.0) * 1e-4);
        int passed = 0;
        for (int j = 0; j < D; j++) {
            int changed = u[j] != in[j];
            passed += changed;
            // The coordinate equal to λ_t passes iff α >= β (probability ½): either way.
            if (in[j] != lambda)
                ck_assert_msg(changed == (in[j] > lambda), "t=%d: coordinate %g vs lambda %g", ts[k], in[j], lambda);
        }
        ck_assert_msg(passed == D - rt + 1 || passed == D - rt, "t=%d: %d passed, want %d", ts[k], passed, D - rt + 1);
    }
    ops->destroy(st);
}
END_TEST

// P(D <= s) for D the sum of two independent Laplace(b) (the law of β − α).
static double laplace_sum_cdf(double s, double b) {
    double a = fabs(s) / b, tail = (2 + a) * exp(-a) / 4;
    return s >= 0 ? 1 - tail : tail;
}

// The SVT pass count against λ_t: coordinate j passes iff x_j − λ_t >= β − α, so
// E[count] = Σ_j F(x_j − λ_t) and Var = Σ_{j,k} F(min) − E² (F the law of β − α).
START_TEST(asgp_paper_svt_pass_rate) {
    enum { D = 400, TRIALS = 8000 };
    Table t;
    table_init(&t, D, 0);
    const int T = 10, round = 1; // t = 2: λ is the 20% quantile, r_t = 80
    DefenseSetup su = setup_for(&t, TRIALS, T, 0.1, 10);
    const DefenseOps *ops;
    // ε = 1, test share 0.1, q = 1: ε1 = ε2 = 0.05, α, β ~ Lap(ΔS/0.05) = Lap(0.01).
    void *st = make_defense("{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":5e-4}",
                            &su, &ops);
    ck_assert_double_eq_tol(describe_number(ops, st, "query_noise_scale"), 0.01, 1e-12);
    ck_assert_double_eq_tol(describe_number(ops, st, "threshold_noise_scale"), 0.01, 1e-12);
    float in[D], u[D];
    spaced_values(in, D, 1e-4, 2); // values in ±0.02
    double lambda = ((double)(80 - 1) - (D - 1) / 2.0) * 1e-4;
    double b = 0.01, mean = 0, m2 = 0;
    for (int j = 0; j < D; j++)
        mean += laplace_sum_cdf((double)in[j] - lambda, b);
    for (int j = 0; j < D; j++)
        for (int k = 0; k < D; k++)
            m2 += laplace_sum_cdf(fmin(in[j], in[k]) - lambda, b);
    double sd = sqrt(m2 - mean * mean), se = sd / sqrt((double)TRIALS);
    double sum = 0, broken_sum = 0;
    for (int c = 0; c < TRIALS; c++) {
        memcpy(u, in, sizeof u);
        DefenseRound r = round_ctx(round, c, 10);
        ops->client_perturb(st, u, &r, NULL);
        int passed = 0;
        for (int j = 0; j < D; j++)
            passed += u[j] != in[j];
        sum += passed;
        // A broken SVT that forgets α (threshold noise only): same test, own draws.
        RngStream bs = rng_stream(SEED, RNG_TEST, 99, (uint32_t)c);
        double beta = b * rng_next_laplace(&bs);
        for (int j = 0; j < D; j++)
            broken_sum += in[j] >= lambda + beta;
    }
    double z = (sum / TRIALS - mean) / se, zb = (broken_sum / TRIALS - mean) / se;
    ck_assert_msg(fabs(z) < 6, "pass count %.2f vs expected %.2f (z = %.1f)", sum / TRIALS, mean, z);
    ck_assert_msg(fabs(zb) > 6, "the pass-rate check misses a missing alpha (z = %.1f)", zb);
    ops->destroy(st);
}
END_TEST

// At the paper's own split the test is all or nothing: α, β ~ Lap(ΔS/ε1) with ε1 = 0.005
// (ε = 0.1) dwarf every clipped coordinate, so an upload is noised everywhere or nowhere,
// each with probability ½ (β − α ≥ 0 is a fair coin), and eq. 14's λ_t stops mattering.
// 400 uploads: each count is Binomial(400, ½) (sd 10), so 6σ is [140, 260]; the share
// of split uploads is about the density of β − α at 0 (1/40) times the range of g' − λ_t.
START_TEST(asgp_paper_all_or_nothing) {
    enum { D = 5000, TRIALS = 400 };
    Table t;
    table_init(&t, D, 0);
    DefenseSetup su = setup_for(&t, TRIALS, 25, 0.1, 10);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":0.1,\"sensitivity\":0.05,"
                            "\"clip\":5}", &su, &ops);
    float *in = malloc(sizeof(float) * D), *u = malloc(sizeof(float) * D);
    RngStream rs = rng_stream(SEED, RNG_TEST, 11, 0);
    for (int j = 0; j < D; j++)
        in[j] = (float)(rng_next_normal(&rs) * 4.0 / sqrt((double)D)); // norm ≈ 4 < C: not clipped
    int none = 0, all = 0, split = 0;
    for (int c = 0; c < TRIALS; c++) {
        memcpy(u, in, sizeof(float) * D);
        DefenseRound r = round_ctx(c % 25, c, 10);
        ops->client_perturb(st, u, &r, NULL);
        int n = 0;
        for (int j = 0; j < D; j++)
            n += u[j] != in[j];
        none += n == 0;
        all += n == D;
        split += n > 0 && n < D;
    }
    ck_assert_msg(none >= 140 && none <= 260 && all >= 140 && all <= 260, "none %d, all %d", none, all);
    ck_assert_msg(split <= 20, "%d of %d uploads split", split, TRIALS);
    free(in);
    free(u);
    ops->destroy(st);
}
END_TEST

// Noise on passing coordinates is Lap(q·ΔS/ε3) (eq. 13): variance 2b², kurtosis 6.
START_TEST(asgp_paper_laplace_scale) {
    enum { D = 2000, TRIALS = 100 };
    Table t;
    table_init(&t, D, 0);
    DefenseSetup su = setup_for(&t, TRIALS, D, 0.1, 10); // T = d: at t = 1 λ is the minimum
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":2,\"sensitivity\":1e-3,"
                            "\"svt_q\":8,\"test_share\":0.5}", &su, &ops);
    double b = 8 * 1e-3 / (2 * 0.5); // ε3 = (1 − 0.5)·2
    ck_assert_double_eq_tol(describe_number(ops, st, "laplace_scale"), b, 1e-15);
    PrivacyRecord rec;
    ops->privacy(st, 3, &rec);
    ck_assert_double_eq_tol(rec.sigma, b, 1e-15);
    ck_assert(isinf(rec.epsilon_total_sound));
    ck_assert_double_eq_tol(rec.epsilon_total_nominal, 6, 1e-12);
    double *x = malloc(sizeof(double) * D * TRIALS), *bad = malloc(sizeof(double) * D * TRIALS);
    size_t n = 0;
    float in[D], u[D];
    spaced_values(in, D, 3e-5, 3); // norm 0.77 < C: not clipped
    for (int c = 0; c < TRIALS; c++) {
        memcpy(u, in, sizeof u);
        DefenseRound r = round_ctx(0, c, 10);
        ops->client_perturb(st, u, &r, NULL);
        for (int j = 0; j < D; j++)
            if (u[j] != in[j]) {
                bad[n] = 1.1 * b * rng_laplace_at(&r.rng, (uint64_t)j + D); // a 10% scale error
                x[n++] = (double)u[j] - in[j];
            }
    }
    ck_assert_int_gt(n, D * TRIALS * 9 / 10);
    double z = moment_z(x, n, 2 * b * b, 6);
    ck_assert_msg(fabs(z) < 6, "Laplace variance off by %.1f standard errors", z);
    ck_assert_msg(fabs(moment_z(bad, n, 2 * b * b, 6)) > 6, "the check misses a 10%% scale error");
    free(x);
    free(bad);
    ops->destroy(st);
}
END_TEST

// corrected: at most c coordinates selected, zeros elsewhere, Lap(√c·ΔS/ε3) on them, and a
// finite sound ε that composes sequentially.
START_TEST(asgp_corrected_capped_and_sound) {
    enum { D = 5000, TRIALS = 60 };
    Table t;
    table_init(&t, D, 0);
    DefenseSetup su = setup_for(&t, TRIALS, 20, 0.1, 10);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"dp-fedasgp\",\"epsilon\":4,\"max_selected_fraction\":0.02}", &su, &ops);
    const int c_cap = 100;
    ck_assert_double_eq(describe_number(ops, st, "max_selected"), c_cap);
    double b = sqrt((double)c_cap) * 2.0 / (4 * 0.9); // ΔS = 2C, ε3 = 0.9ε
    // widened by the safe sampler's excess over ε (at most 1e-3; tests/test_records.c)
    double scale = describe_number(ops, st, "laplace_scale");
    ck_assert(scale >= b && scale <= b * (1 + 1e-3));
    b = scale;
    float in[D], u[D];
    spaced_values(in, D, 5e-6, 4); // norm 0.51 < C
    double *x = malloc(sizeof(double) * D * TRIALS);
    size_t n = 0;
    for (int c = 0; c < TRIALS; c++) {
        memcpy(u, in, sizeof u);
        DefenseRound r = round_ctx(2, c, 10);
        ops->client_perturb(st, u, &r, NULL);
        int nz = 0;
        for (int j = 0; j < D; j++)
            if (u[j] != 0) {
                nz++;
                x[n++] = (double)u[j] - in[j];
            }
        ck_assert_int_le(nz, c_cap);
        ck_assert_int_gt(nz, 0);
    }
    double z = moment_z(x, n, 2 * b * b, 6);
    ck_assert_msg(fabs(z) < 6, "corrected Laplace variance off by %.1f standard errors", z);
    PrivacyRecord rec;
    ops->privacy(st, 5, &rec);
    // The safe sampler's proof: within 0.1% of the nominal 4 per upload (the SVT's shift
    // ⌈ΔS/g⌉ and E − 1 > ln E add a little, the laws' scales rounded up take a little).
    double per = describe_number(ops, st, "epsilon_sound_per_upload");
    ck_assert_double_eq_tol(rec.epsilon_total_sound, 5 * per, 1e-9);
    ck_assert(fabs(per / 4 - 1) < 1e-3);
    ck_assert_double_eq_tol(per,
                            describe_number(ops, st, "epsilon_sound_query") +
                                describe_number(ops, st, "epsilon_sound_threshold") +
                                describe_number(ops, st, "epsilon_sound_values"),
                            1e-9);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert_ptr_null(rec.assumptions[0]);
    ck_assert_double_eq(rec.delta, 0);
    free(x);
    ops->destroy(st);
    // The float sampler: no guarantee.
    st = make_defense("{\"name\":\"dp-fedasgp\",\"epsilon\":4,\"max_selected_fraction\":0.02,\"sampler\":\"float\"}",
                      &su, &ops);
    ops->privacy(st, 5, &rec);
    privacy_record_settle(&rec);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_NONE);
    ck_assert(isinf(rec.epsilon_total_sound));
    ops->destroy(st);
}
END_TEST

// γ_i = ½(n_i/n + L_i/L) (eq. 16) with L_i the local model's mean loss on its data; and
// n_i/n when no loss is known.
START_TEST(asgp_dynamic_weights) {
    FpError err = {0};
    const Backend *be = backend_cpu();
    Dataset *ds = dataset_create("toy", 30, 1, 1, 2, 2, 0, &err);
    ck_assert_ptr_nonnull(ds);
    for (int i = 0; i < 30; i++) {
        ds->x[2 * i] = (float)(i % 5) - 2.0f;
        ds->x[2 * i + 1] = (float)(i % 3) - 1.0f;
        ds->y[i] = i % 2;
    }
    DataShape shape = {.c = 1, .h = 1, .w = 2, .n_classes = 2};
    cJSON *mj = cJSON_Parse("{\"name\":\"logreg\"}");
    Model *m[2] = {model_create(mj, "model", &shape, be, &err), model_create(mj, "model", &shape, be, &err)};
    cJSON_Delete(mj);
    ck_assert_msg(m[0] && m[1], "%s", err.msg);
    ck_assert_int_eq(model_init(m[0], 1, NULL), FP_OK);
    ck_assert_int_eq(model_init(m[1], 2, NULL), FP_OK);
    size_t np = m[0]->table.n_params;
    uint32_t idx[2][15];
    int nloc[2] = {10, 15};
    for (int i = 0; i < 15; i++) {
        idx[0][i] = (uint32_t)i;
        idx[1][i] = (uint32_t)(15 + i);
    }
    DefenseSetup su = {.seed = SEED, .params = &m[0]->table, .n_clients = 4, .rounds = 5, .sample_rate = 0.5,
                       .min_client_samples = 10};
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":1e-3}",
                            &su, &ops);
    float *u[2];
    double loss[2];
    int clients[2] = {1, 3};
    for (int k = 0; k < 2; k++) {
        u[k] = malloc(sizeof(float) * np);
        for (size_t i = 0; i < np; i++)
            u[k][i] = (float)(0.01 * (k + 1) * ((int)i - 2));
        DefenseRound r = round_ctx(0, clients[k], nloc[k]);
        r.model = m[k];
        r.local_data = ds;
        r.local_idx = idx[k];
        r.n_local = nloc[k];
        ck_assert_int_eq(ops->client_perturb(st, u[k], &r, NULL), FP_OK);
        float probs[30];
        ck_assert_int_eq(model_predict(m[k], ds, idx[k], nloc[k], probs, NULL), FP_OK);
        loss[k] = 0;
        for (int i = 0; i < nloc[k]; i++)
            loss[k] -= log(probs[2 * i + ds->y[idx[k][i]]]) / nloc[k];
    }
    double w[2] = {0.5, 0.5}, gamma[2];
    for (int k = 0; k < 2; k++)
        gamma[k] = 0.5 * (nloc[k] / 25.0 + loss[k] / (loss[0] + loss[1]));
    ck_assert_double_eq_tol(gamma[0] + gamma[1], 1.0, 1e-12);
    ck_assert(fabs(gamma[0] - nloc[0] / 25.0) > 1e-3); // the losses matter here
    float *out = malloc(sizeof(float) * np);
    ck_assert_int_eq(ops->server_aggregate(st, 0, (const float *const *)u, w, clients, 2, out, NULL), FP_OK);
    for (size_t i = 0; i < np; i++)
        ck_assert_double_eq_tol(out[i], gamma[0] * u[0][i] + gamma[1] * u[1][i], 1e-6);
    ops->destroy(st);
    // Without a model the loss is unknown: γ_i = n_i/n.
    st = make_defense("{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":1e-3}", &su, &ops);
    for (int k = 0; k < 2; k++) {
        DefenseRound r = round_ctx(0, clients[k], nloc[k]);
        ops->client_perturb(st, u[k], &r, NULL);
    }
    ops->server_aggregate(st, 0, (const float *const *)u, w, clients, 2, out, NULL);
    for (size_t i = 0; i < np; i++)
        ck_assert_double_eq_tol(out[i], 0.4 * u[0][i] + 0.6 * u[1][i], 1e-6);
    ops->destroy(st);
    for (int k = 0; k < 2; k++) {
        free(u[k]);
        model_free(m[k]);
    }
    free(out);
    dataset_free(ds);
}
END_TEST

// ---- fedsmp --------------------------------------------------------------------------------

// paper: exactly the top-k of the client's own |Δ| survive, clipped to C; corrected: a
// random k-subset, the same for every client of a round, different across rounds.
START_TEST(fedsmp_masks_and_clip) {
    enum { D = 1000 };
    Table t;
    table_init(&t, D, 0);
    DefenseSetup su = setup_for(&t, 100, 10, 0.1, 10);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"fedsmp\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":1e-9,"
                            "\"topk_fraction\":0.05,\"clip\":0.5}", &su, &ops);
    float in[D], u[D];
    spaced_values(in, D, 1e-2, 5); // norm ≈ 91: clipped
    memcpy(u, in, sizeof u);
    DefenseRound r = round_ctx(0, 1, 10);
    ops->client_perturb(st, u, &r, NULL);
    double norm2 = 0;
    int kept = 0;
    for (int j = 0; j < D; j++) {
        int top = fabsf(in[j]) > 4.75f; // |values| 0.005 .. 4.995: the 50 largest are 4.755 .. 4.995
        ck_assert_msg((u[j] != 0) == top, "coordinate %d (%g) kept=%d", j, in[j], u[j] != 0);
        kept += u[j] != 0;
        norm2 += (double)u[j] * u[j];
    }
    ck_assert_int_eq(kept, 50);
    ck_assert_double_eq_tol(sqrt(norm2), 0.5, 1e-5);
    ops->destroy(st);

    st = make_defense("{\"name\":\"fedsmp\",\"noise_multiplier\":0,\"topk_fraction\":0.1}", &su, &ops);
    unsigned char masks[3][D];
    const int rc[3][2] = {{4, 2}, {4, 9}, {5, 2}};
    for (int k = 0; k < 3; k++) {
        for (int j = 0; j < D; j++)
            u[j] = 1e-3f;
        r = round_ctx(rc[k][0], rc[k][1], 10);
        ops->client_perturb(st, u, &r, NULL);
        int n = 0;
        for (int j = 0; j < D; j++)
            n += masks[k][j] = u[j] != 0;
        ck_assert_int_eq(n, 100);
    }
    ck_assert_mem_eq(masks[0], masks[1], D); // same round, two clients: one public mask
    ck_assert(memcmp(masks[0], masks[2], D) != 0);
    ops->destroy(st);
}
END_TEST

// corrected: each of the round's k participants adds N(0, (zC)²/k) on the kept
// coordinates only (here k = 10), with either sampler. The safe one's discrete noise is
// exactly 0 on a kept coordinate with probability P(J = 0) ≈ 1/(S√(2π)) (S = 16384 here:
// 0.12 expected per client), so it may show a few fewer non-zeros than the mask.
START_TEST(fedsmp_noise_sigma) {
    enum { D = 20000, CLIENTS = 10 };
    Table t;
    table_init(&t, D, 0);
    DefenseSetup su = setup_for(&t, 100, 10, 0.1, 10);
    static const char *const defs[] = {
        "{\"name\":\"fedsmp\",\"noise_multiplier\":2,\"clip\":0.3,\"topk_fraction\":0.25}",
        "{\"name\":\"fedsmp\",\"noise_multiplier\":2,\"clip\":0.3,\"topk_fraction\":0.25,\"sampler\":\"float\"}",
    };
    double want = 2 * 0.3 / sqrt(10.0);
    float *u = malloc(sizeof(float) * D);
    double *x = malloc(sizeof(double) * D * CLIENTS);
    for (int v = 0; v < 2; v++) {
        const DefenseOps *ops;
        void *st = make_defense(defs[v], &su, &ops);
        size_t n = 0;
        for (int c = 0; c < CLIENTS; c++) {
            memset(u, 0, sizeof(float) * D);
            DefenseRound r = round_ctx(c, c, 10);
            r.participants = 10;
            ops->client_perturb(st, u, &r, NULL);
            int nz = 0;
            for (int j = 0; j < D; j++)
                if (u[j] != 0) {
                    nz++;
                    x[n++] = u[j];
                }
            if (v == 1)
                ck_assert_int_eq(nz, D / 4);
            else
                ck_assert_msg(nz <= D / 4 && nz >= D / 4 - 10, "safe sampler: %d non-zeros for a mask of %d", nz, D / 4);
        }
        double z = moment_z(x, n, want * want, 3);
        ck_assert_msg(fabs(z) < 6, "%s: noise variance off by %.1f standard errors", defs[v], z);
        ck_assert_msg(fabs(moment_z(x, n, want * want * 1.06, 3)) > 6, "the check misses a 3%% std error");
        ops->destroy(st);
    }
    free(u);
    free(x);
}
END_TEST

// ---- avp / nbafl -------------------------------------------------------------------------

// Theorem 1 with the digest's worked numbers: U = 100, q = 0.1, |D_k| = 600, C = 5,
// ε = 10, δ = 1e-2, M = 30, Δs = 2C/|D_k| (NbAFL's, declared) → σ_const = 0.00876;
// ϑ = 1.05: σ_1 = 0.00643, σ_30 = 0.01304.
START_TEST(avp_theorem1_sigma) {
    Table t;
    table_init(&t, 10, 0);
    DefenseSetup su = setup_for(&t, 100, 30, 0.1, 600);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"nbafl\",\"epsilon\":10,\"delta\":0.01,\"sensitivity\":\"2C/min|D_k|\"}",
                            &su, &ops);
    ck_assert_double_eq_tol(describe_number(ops, st, "sigma_initial"), 0.00876, 5e-6);
    ck_assert_double_eq_tol(describe_number(ops, st, "sensitivity"), 2 * 5 / 600.0, 1e-15);
    ops->destroy(st);
    st = make_defense("{\"name\":\"avp\",\"epsilon\":10,\"delta\":0.01,\"sensitivity\":\"2C/min|D_k|\"}", &su,
                      &ops);
    ck_assert_double_eq_tol(describe_number(ops, st, "sigma_initial"), 0.00643, 5e-6);
    double sm = (1.05 - pow(1.05, 1 - 30)) / (1.05 - 1);
    ck_assert_double_eq_tol(describe_number(ops, st, "S_M"), sm, 1e-12);
    ck_assert_double_eq_tol(describe_number(ops, st, "S_M"), 16.14, 5e-3);
    PrivacyRecord rec;
    ops->privacy(st, 30, &rec);
    ck_assert_double_eq_tol(rec.sigma, 0.01304, 5e-6);
    ck_assert_double_eq_tol(rec.epsilon_total_nominal, 10, 1e-9); // the ledger ends at ε
    ck_assert(isfinite(rec.epsilon_total_sound) && rec.epsilon_total_sound > 0);
    ck_assert_str_eq(rec.unit, "record");
    ops->privacy(st, 1, &rec); // round 1 spends ϑ^0/S_M of the ε² budget
    ck_assert_double_eq_tol(rec.epsilon_total_nominal, 10 / sqrt(sm), 1e-9);
    ops->destroy(st);
}
END_TEST

// The noise actually added in round m has variance ϑ^{m−1}σ² (on clipped weights).
START_TEST(avp_per_round_sigma) {
    enum { D = 30000 };
    Table t;
    table_init(&t, D, 0);
    DefenseSetup su = setup_for(&t, 100, 30, 0.1, 600);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"avp\",\"epsilon\":10,\"delta\":1e-5,\"vartheta\":1.1}", &su, &ops);
    double s1 = describe_number(ops, st, "sigma_initial");
    double *x = malloc(sizeof(double) * D);
    float *u = malloc(sizeof(float) * D);
    const int ms[] = {1, 15, 30};
    for (int k = 0; k < 3; k++) {
        for (int j = 0; j < D; j++)
            u[j] = 0;
        u[0] = 100; // norm 100 > C = 5: clipped to 5 before the noise
        DefenseRound r = round_ctx(ms[k] - 1, 7, 600);
        ops->client_perturb(st, u, &r, NULL);
        double var = pow(1.1, ms[k] - 1) * s1 * s1;
        ck_assert_double_eq_tol(u[0], 5.0, 12 * sqrt(var));
        for (int j = 1; j < D; j++)
            x[j - 1] = u[j];
        double z = moment_z(x, D - 1, var, 3);
        ck_assert_msg(fabs(z) < 6, "round %d: variance off by %.1f standard errors", ms[k], z);
        // Companion: the prose's reading (noise shrinking as ϑ^{-(m-1)}) is rejected.
        if (ms[k] > 1)
            ck_assert(fabs(moment_z(x, D - 1, pow(1.1, -(ms[k] - 1)) * s1 * s1, 3)) > 6);
        PrivacyRecord rec;
        ops->privacy(st, ms[k], &rec);
        ck_assert_double_eq_tol(rec.sigma, sqrt(var), 1e-12 * sqrt(var));
    }
    free(x);
    free(u);
    ops->destroy(st);
}
END_TEST

// Refinement after round m0: the corrected rule ends the nominal ledger exactly at ε;
// Theorem 2 as printed overspends it (ϑ > 1 counts rounds 1..m0 at σ').
START_TEST(avp_refinement_ledgers) {
    Table t;
    table_init(&t, 10, 0);
    DefenseSetup su = setup_for(&t, 100, 30, 0.1, 600);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"avp\",\"epsilon\":4,\"refine_at\":10}", &su, &ops);
    PrivacyRecord rec, r10;
    ops->privacy(st, 30, &rec);
    ck_assert_double_eq_tol(rec.epsilon_total_nominal, 4, 1e-9);
    ops->privacy(st, 11, &r10);
    ops->privacy(st, 12, &rec);
    ck_assert_double_eq_tol(r10.sigma, rec.sigma, 1e-15); // constant after m0
    ops->destroy(st);
    st = make_defense("{\"name\":\"avp\",\"variant\":\"paper\",\"epsilon\":4,\"refine_at\":10}", &su, &ops);
    ops->privacy(st, 30, &rec);
    // ledger/B = S_10/S_30 + 20/(S_10 + 20) = 1.2138 at ϑ = 1.05
    double s10 = (1.05 - pow(1.05, -9)) / 0.05, s30 = (1.05 - pow(1.05, -29)) / 0.05;
    ck_assert_double_eq_tol(rec.epsilon_total_nominal, 4 * sqrt(s10 / s30 + 20 / (s10 + 20)), 1e-9);
    ck_assert(rec.epsilon_total_nominal > 4 * 1.05);
    ops->destroy(st);
    // Sound ledger: the end_round accountant agrees with a recomputation from scratch.
    st = make_defense("{\"name\":\"avp\",\"epsilon\":4}", &su, &ops);
    PrivacyRecord fresh;
    ops->privacy(st, 5, &fresh);
    for (int r = 0; r < 5; r++)
        ops->end_round(st, r, 10);
    ops->privacy(st, 5, &rec);
    ck_assert_double_eq_tol(rec.epsilon_total_sound, fresh.epsilon_total_sound, 1e-12);
    ops->destroy(st);
}
END_TEST

// Bad parameters fail in create() with the JSON path (the CLI maps them to exit 2).
START_TEST(bad_parameters_name_the_path) {
    Table t;
    table_init(&t, 10, 0);
    DefenseSetup su = setup_for(&t, 100, 30, 0.1, 600);
    static const struct { const char *json, *path; } bad[] = {
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1,\"delta\":1}", "defense.delta"},
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1,\"clip\":0}", "defense.clip"},
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":-1}", "defense.noise_multiplier"},
        {"{\"name\":\"gaussian-dpfedavg\",\"noise\":\"both\",\"noise_multiplier\":1}", "defense.noise"},
        {"{\"name\":\"gaussian-dpfedavg\"}", "defense: give exactly one"},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"clip\":-1}", "defense.clip"},
        {"{\"name\":\"dp-fedasgp\"}", "defense.epsilon"},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"max_selected_fraction\":0}", "defense.max_selected_fraction"},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"test_share\":1}", "defense.test_share"},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"sampler\":\"exact\"}", "defense.sampler"},
        {"{\"name\":\"flat-laplace\",\"sampler\":\"exact\"}", "defense.sampler"},
        {"{\"name\":\"fedsmp\",\"noise_multiplier\":1,\"topk_fraction\":0}", "defense.topk_fraction"},
        {"{\"name\":\"fedsmp\",\"noise_multiplier\":1,\"topk_fraction\":1.5}", "defense.topk_fraction"},
        {"{\"name\":\"fedsmp\",\"epsilon\":1,\"delta\":2}", "defense.delta"},
        {"{\"name\":\"avp\",\"vartheta\":0}", "defense.vartheta"},
        {"{\"name\":\"avp\",\"vartheta\":-1}", "defense.vartheta"},
        {"{\"name\":\"avp\",\"delta\":1}", "defense.delta"},
        {"{\"name\":\"nbafl\",\"clip\":0}", "defense.clip"},
        {"{\"name\":\"nbafl\",\"vartheta\":1.05}", "defense.vartheta"},
        {"{\"name\":\"avp\",\"refine_at\":30}", "defense.refine_at"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FpError err = {0};
        ck_assert_msg(create_status(bad[i].json, &su, &err) == FP_EPARAM, "%s was accepted", bad[i].json);
        ck_assert_msg(strstr(err.msg, bad[i].path) != NULL, "%s: message \"%s\" lacks %s", bad[i].json, err.msg,
                      bad[i].path);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
    }
    // Good ones, for contrast.
    FpError err = {0};
    ck_assert_int_eq(create_status("{\"name\":\"fedsmp\",\"noise_multiplier\":1,\"topk_fraction\":1}", &su, &err),
                     FP_OK);
    ck_assert_int_eq(create_status("{\"name\":\"avp\",\"vartheta\":0.9}", &su, &err), FP_OK);
}
END_TEST

// ---- through `fedpriv train` ---------------------------------------------------------------

// A tiny CSV classification set (2 features, 2 classes) and a config around a defense.
static void write_config_threads(const char *dir, const char *defense_json, int threads, char *cfg_path, size_t n);
static void write_config(const char *dir, const char *defense_json, char *cfg_path, size_t n) {
    write_config_threads(dir, defense_json, 1, cfg_path, n);
}

static void write_config_threads(const char *dir, const char *defense_json, int threads, char *cfg_path, size_t n) {
    char csv[512];
    snprintf(csv, sizeof csv, "%s/toy.csv", dir);
    FILE *f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "f1,f2,label\n");
    for (int i = 0; i < 120; i++)
        fprintf(f, "%g,%g,%d\n", (i % 7) / 7.0 - 0.5 + (i % 2) * 0.4, (i % 5) / 5.0, i % 2);
    fclose(f);
    snprintf(cfg_path, n, "%s/cfg.json", dir);
    f = fopen(cfg_path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},\n"
            " \"federation\": {\"clients\": 10, \"sample_rate\": 0.5, \"rounds\": 3, \"local_epochs\": 1,\n"
            "                \"batch_size\": 5, \"lr\": 0.1},\n"
            " \"defense\": %s, \"threads\": %d}\n",
            csv, defense_json, threads);
    fclose(f);
}

START_TEST(cli_train_runs_every_defense) {
    char dir[] = "/tmp/fedpriv-feddef-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *defs[] = {
        "{\"name\":\"gaussian-dpfedavg\",\"epsilon\":2}",
        "{\"name\":\"gaussian-dpfedavg\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":0.01}",
        "{\"name\":\"dp-fedasgp\",\"epsilon\":1}",
        "{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":0.01}",
        "{\"name\":\"fedsmp\",\"noise_multiplier\":1,\"topk_fraction\":0.5}",
        "{\"name\":\"avp\",\"vartheta\":1.5}",
        "{\"name\":\"nbafl\"}",
    };
    char cfg[600], out_path[600];
    static char out[1 << 17], errb[1 << 14];
    snprintf(out_path, sizeof out_path, "%s/result.json", dir);
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        write_config(dir, defs[i], cfg, sizeof cfg);
        const char *args[] = {"train", "--config", cfg, "--out", out_path, NULL};
        int rc = cli_run(args, out, errb, sizeof errb);
        if (rc < 0) {
            printf("SKIP fedpriv train runs: FEDPRIV_BIN is not set (make test sets it)\n");
            rmdir(dir);
            return;
        }
        ck_assert_msg(rc == 0, "%s: exit %d: %s", defs[i], rc, errb);
        FILE *f = fopen(out_path, "r");
        ck_assert_ptr_nonnull(f);
        size_t got = fread(out, 1, sizeof out - 1, f);
        out[got] = '\0';
        fclose(f);
        cJSON *res = cJSON_Parse(out);
        ck_assert_ptr_nonnull(res);
        cJSON *rounds = cJSON_GetObjectItem(res, "rounds");
        ck_assert_int_eq(cJSON_GetArraySize(rounds), 3);
        double prev_sigma = 0;
        for (int r = 0; r < 3; r++) {
            cJSON *p = cJSON_GetObjectItem(cJSON_GetArrayItem(rounds, r), "privacy");
            ck_assert_ptr_nonnull(cJSON_GetObjectItem(p, "nominal"));
            ck_assert_ptr_nonnull(cJSON_GetObjectItem(p, "sound"));
            ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "nominal"), "notion"));
            ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "sound"), "notion"));
            cJSON *sg = cJSON_GetObjectItem(p, "sigma");
            ck_assert_ptr_nonnull(sg);
            if (i == 5) { // avp, ϑ = 1.5: σ grows by √1.5 per round
                if (r > 0)
                    ck_assert_double_eq_tol(sg->valuedouble / prev_sigma, sqrt(1.5), 1e-9);
                prev_sigma = sg->valuedouble;
            }
        }
        ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "config"), "defense"));
        cJSON_Delete(res);
    }
    unlink(out_path);
    char csv[600];
    snprintf(csv, sizeof csv, "%s/toy.csv", dir);
    unlink(csv);
    unlink(cfg);
    rmdir(dir);
}
END_TEST

// dp-fedasgp corrected through `fedpriv train`: every round's record is proven, its sound ε
// is the rounds times the per-upload ε its grids and laws prove (config.defense), and the
// element-indexed draws give the same model, bit for bit, with 1 and 2 threads.
static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

START_TEST(cli_asgp_corrected_proven_and_thread_independent) {
    char dir[] = "/tmp/fedpriv-asgp-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char cfg[600], out_path[600], model[2][600];
    static char out[1 << 17], errb[1 << 14];
    snprintf(out_path, sizeof out_path, "%s/result.json", dir);
    for (int th = 0; th < 2; th++) {
        snprintf(model[th], sizeof model[th], "%s/m%d.bin", dir, th);
        write_config_threads(dir, "{\"name\":\"dp-fedasgp\",\"epsilon\":2,\"max_selected_fraction\":0.5}", th + 1,
                             cfg, sizeof cfg);
        const char *args[] = {"train", "--config", cfg, "--out", out_path, "--save-model", model[th], NULL};
        int rc = cli_run(args, out, errb, sizeof errb);
        if (rc < 0) {
            printf("SKIP fedpriv train runs: FEDPRIV_BIN is not set (make test sets it)\n");
            rmdir(dir);
            return;
        }
        ck_assert_msg(rc == 0, "exit %d: %s", rc, errb);
        cJSON *res = NULL;
        FpError e = {0};
        ck_assert_int_eq(jv_load_file(out_path, &res, &e), FP_OK);
        const cJSON *def = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "config"), "defense");
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(def, "sampler")), "safe");
        double per = cJSON_GetNumberValue(cJSON_GetObjectItem(def, "epsilon_sound_per_upload"));
        ck_assert(fabs(per / 2 - 1) < 1e-3); // the laws round their scales up, the grids add a little
        const cJSON *ro;
        int r = 0;
        cJSON_ArrayForEach(ro, cJSON_GetObjectItem(res, "rounds")) {
            const cJSON *p = cJSON_GetObjectItem(ro, "privacy");
            ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(p, "guarantee")), "proven");
            ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "assumptions")), 0);
            double snd = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "sound"), "epsilon_total"));
            ck_assert_double_eq_tol(snd, per * (r + 1), 1e-9 * snd);
            r++;
        }
        ck_assert_int_eq(r, 3);
        cJSON_Delete(res);
    }
    size_t n0, n1;
    unsigned char *a = read_all(model[0], &n0), *b = read_all(model[1], &n1);
    ck_assert_msg(n0 == n1 && memcmp(a, b, n0) == 0, "the model differs between 1 and 2 threads");
    free(a);
    free(b);
    unlink(model[0]);
    unlink(model[1]);
    unlink(out_path);
    char csv[600];
    snprintf(csv, sizeof csv, "%s/toy.csv", dir);
    unlink(csv);
    unlink(cfg);
    rmdir(dir);
}
END_TEST

START_TEST(cli_bad_parameters_exit_2) {
    char dir[] = "/tmp/fedpriv-feddef-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const struct { const char *def, *path; } bad[] = {
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1,\"delta\":1}", "defense.delta"},
        {"{\"name\":\"fedsmp\",\"epsilon\":1,\"delta\":1.5}", "defense.delta"},
        {"{\"name\":\"avp\",\"delta\":1}", "defense.delta"},
        {"{\"name\":\"avp\",\"vartheta\":0}", "defense.vartheta"},
        {"{\"name\":\"avp\",\"vartheta\":-0.5}", "defense.vartheta"},
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1,\"clip\":0}", "defense.clip"},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"clip\":-2}", "defense.clip"},
        {"{\"name\":\"nbafl\",\"clip\":0}", "defense.clip"},
        {"{\"name\":\"fedsmp\",\"noise_multiplier\":1,\"topk_fraction\":0}", "defense.topk_fraction"},
        {"{\"name\":\"fedsmp\",\"noise_multiplier\":1,\"topk_fraction\":1.01}", "defense.topk_fraction"},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"bogus\":1}", "defense.bogus"},
    };
    char cfg[600];
    char out[8192], errb[8192];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_config(dir, bad[i].def, cfg, sizeof cfg);
        const char *args[] = {"train", "--config", cfg, NULL};
        int rc = cli_run(args, out, errb, sizeof out);
        if (rc < 0) {
            printf("SKIP fedpriv train bad-input runs: FEDPRIV_BIN is not set (make test sets it)\n");
            break;
        }
        ck_assert_msg(rc == 2, "%s: exit %d, want 2 (%s)", bad[i].def, rc, errb);
        ck_assert_msg(cli_count_lines(errb) == 1, "%s: want one line on stderr, got \"%s\"", bad[i].def, errb);
        ck_assert_msg(strstr(errb, bad[i].path) != NULL, "%s: \"%s\" does not name %s", bad[i].def, errb,
                      bad[i].path);
        ck_assert_msg(out[0] == '\0', "%s: partial output on stdout", bad[i].def);
    }
    char csv[600];
    snprintf(csv, sizeof csv, "%s/toy.csv", dir);
    unlink(csv);
    unlink(cfg);
    rmdir(dir);
}
END_TEST

// Every shipped defense states one aggregation form (fl/defense.h): the gather form or a
// whole running sum; gaussian-dpfedavg and fedsmp are running sums (their rounds stream
// across ranks), dp-fedasgp gathers (its weights need every reported loss). The control:
// a table with both forms, or half a running sum, is caught.
START_TEST(every_defense_states_one_aggregation_form) {
    for (int i = 0; i < defense_count(); i++)
        ck_assert_msg(defense_aggregation_valid(defense_at(i)), "%s", defense_at(i)->name);
    ck_assert(!defense_gathers(defense_find("gaussian-dpfedavg")) && defense_aggregates(defense_find("gaussian-dpfedavg")));
    ck_assert(!defense_gathers(defense_find("fedsmp")));
    ck_assert(!defense_gathers(defense_find("none")) && !defense_aggregates(defense_find("none")));
    ck_assert(defense_gathers(defense_find("dp-fedasgp")));
    DefenseOps both = *defense_find("gaussian-dpfedavg"), half = both;
    both.server_aggregate = defense_find("dp-fedasgp")->server_aggregate;
    half.sum_finish = NULL;
    ck_assert(!defense_aggregation_valid(&both));
    ck_assert(!defense_aggregation_valid(&half));
}
END_TEST

Suite *suite_fed_defenses(void) {
    Suite *s = suite_create("fed_defenses");
    TCase *tc = tcase_create("helpers");
    tcase_add_test(tc, clip_scales_trainable_only);
    tcase_add_test(tc, select_kth_matches_sort);
    tcase_add_test(tc, top_k_keeps_exactly_k_largest);
    tcase_add_test(tc, every_defense_states_one_aggregation_form);
    suite_add_tcase(s, tc);
    tc = tcase_create("mechanisms");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dpfedavg_client_noise_sigma);
    tcase_add_test(tc, dpfedavg_server_noise_and_clip);
    tcase_add_test(tc, sigma_for_target_never_exceeds);
    tcase_add_test(tc, dpfedavg_paper_sigma_eq2);
    tcase_add_test(tc, asgp_paper_threshold_schedule);
    tcase_add_test(tc, asgp_paper_svt_pass_rate);
    tcase_add_test(tc, asgp_paper_all_or_nothing);
    tcase_add_test(tc, asgp_paper_laplace_scale);
    tcase_add_test(tc, asgp_corrected_capped_and_sound);
    tcase_add_test(tc, asgp_dynamic_weights);
    tcase_add_test(tc, fedsmp_masks_and_clip);
    tcase_add_test(tc, fedsmp_noise_sigma);
    tcase_add_test(tc, avp_theorem1_sigma);
    tcase_add_test(tc, avp_per_round_sigma);
    tcase_add_test(tc, avp_refinement_ledgers);
    tcase_add_test(tc, bad_parameters_name_the_path);
    suite_add_tcase(s, tc);
    tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cli_train_runs_every_defense);
    tcase_add_test(tc, cli_asgp_corrected_proven_and_thread_independent);
    tcase_add_test(tc, cli_bad_parameters_exit_2);
    suite_add_tcase(s, tc);
    return s;
}
