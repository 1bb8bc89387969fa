// The one-run and multi-run bounds as pure functions (audits/training.h): the f-DP bound
// of Mahloujifar, Melis and Chaudhuri (2024) against cases computed independently, the
// multi-run levels, the bounds' coverage under simulated mechanisms whose ε is known,
// and the test vectors (scores that carry no information give 0; perfectly separated
// scores give the audit's ceiling).
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audits/mechanism.h"
#include "audits/training.h"
#include "core/rng.h"

// ---- the f-DP bound -----------------------------------------------------------------------

// Randomised response at ε is ε-DP and gives each guess right with probability
// e^ε/(1+e^ε), independently: P[W >= v] is that binomial tail exactly, and SNJ's bound at
// δ = 0 is that tail (tight). So no valid bound at δ = 0 can reject an ε whose
// binomial tail is above p: the f-DP ε̂ (pure curve) never exceeds SNJ's, and it stays
// close (the recursion is tight up to the discretisation of the guesses).
START_TEST(fdp_never_beats_randomised_response) {
    static const int cases[][3] = {{1000, 100, 90},  {1000, 100, 70}, {200, 200, 150}, {1000, 1000, 700},
                                   {100, 20, 18},    {3500, 1750, 1750}, {3500, 700, 600}, {50, 10, 10}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int m = cases[i][0], r = cases[i][1], v = cases[i][2];
        double snj = training_audit_one_run_epsilon(m, r, v, 0, 0.05), fdp = training_audit_fdp_epsilon(m, r, v, 0, 0.05);
        ck_assert_msg(fdp <= snj + 1e-9, "(%d, %d, %d): f-DP %.9g above the exact randomised-response bound %.9g", m, r,
                      v, fdp, snj);
        ck_assert_msg(fdp >= 0.9 * snj, "(%d, %d, %d): f-DP %.9g far below the exact bound %.9g", m, r, v, fdp, snj);
        // At the reported ε the curve is rejected, just above it not.
        if (fdp > 0 && fdp < 100) {
            ck_assert(training_audit_fdp_rejects(m, r, v, fdp, 0, 0.05));
            ck_assert(!training_audit_fdp_rejects(m, r, v, fdp + 1e-6, 0, 0.05));
        }
    }
}
END_TEST

// Reference values of an independent implementation of the same recursion (Python, the
// same doubling and 60-step bisection), at δ > 0.
START_TEST(fdp_bound_matches_reference) {
    static const struct {
        int m, r, v;
        double delta, eps;
    } ref[] = {
        {1000, 100, 90, 1e-5, 1.6143181101108575},  {1000, 100, 100, 0, 3.4929654311522933},
        {3500, 1750, 1750, 1e-5, 6.369199346606337}, {3500, 700, 600, 1e-5, 1.6024471343605406},
        {500, 250, 200, 1e-3, 1.0940844088162018},   {100, 20, 12, 1e-5, 0},
    };
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        double e = training_audit_fdp_epsilon(ref[i].m, ref[i].r, ref[i].v, ref[i].delta, 0.05);
        ck_assert_msg(fabs(e - ref[i].eps) <= 1e-7, "case %zu: %.17g vs %.17g", i, e, ref[i].eps);
    }
    // Fewer correct guesses, more δ or a smaller p never give a larger ε̂.
    ck_assert_double_le(training_audit_fdp_epsilon(1000, 100, 80, 1e-5, 0.05),
                        training_audit_fdp_epsilon(1000, 100, 90, 1e-5, 0.05));
    ck_assert_double_le(training_audit_fdp_epsilon(1000, 100, 90, 1e-2, 0.05),
                        training_audit_fdp_epsilon(1000, 100, 90, 1e-5, 0.05));
    ck_assert_double_le(training_audit_fdp_epsilon(1000, 100, 90, 1e-5, 0.01),
                        training_audit_fdp_epsilon(1000, 100, 90, 1e-5, 0.05));
}
END_TEST

// Where δ weighs (SNJ's 2mδ term), the f-DP bound is the tighter one and the one-run
// bound reports it; both are stated.
START_TEST(fdp_is_tighter_where_delta_weighs) {
    double snj = training_audit_one_run_epsilon(500, 250, 200, 1e-3, 0.05);
    double fdp = training_audit_fdp_epsilon(500, 250, 200, 1e-3, 0.05);
    ck_assert_msg(fdp > snj, "f-DP %g, SNJ %g", fdp, snj);
}
END_TEST

// ---- coverage under known mechanisms --------------------------------------------------------

// Scores that carry no information (independent of the bits, ε = 0, δ = 0): each
// audit's ε̂ exceeds 0 with probability at most 1 − confidence. 400 audits of 200
// canaries: at most 20 expected; 36 is more than 3.6σ above (σ = √(400·0.05·0.95)).
START_TEST(one_run_null_coverage) {
    enum { M = 200, TRIALS = 400 };
    double scores[M];
    int in[M], over = 0;
    RngStream rs = rng_stream(3, RNG_TEST, 77, 0);
    for (int t = 0; t < TRIALS; t++) {
        for (int c = 0; c < M; c++) {
            scores[c] = rng_next_normal(&rs);
            in[c] = (int)(rng_next_u32(&rs) & 1u);
        }
        TrainingAuditOneRunBound b;
        ck_assert_int_eq(training_audit_one_run_bound(scores, 1, in, M, 0, 0.95, &b, NULL), FP_OK);
        over += b.epsilon > 0;
    }
    ck_assert_msg(over <= 36, "%d of %d null audits report eps_hat > 0", over, TRIALS);
}
END_TEST

// Randomised response at ε = 1 in every "in" and "out" run, R = 100 runs (50 scored of
// each): the multi-run bound exceeds 1 in at most 5% of 2000 simulated audits (here
// well under, since one direction carries the signal). And the levels: a perfect test
// on 50 + 50 runs gives ln(lower / upper) with each one-sided bound at α/4.
START_TEST(multi_run_levels_and_coverage) {
    double lo = pow(0.0125, 1.0 / 50), hi = 1 - lo;
    ck_assert_double_eq_tol(training_audit_counts_epsilon(50, 50, 0, 50, 0, 0.05), log(lo / hi), 1e-9);
    ck_assert_double_eq_tol(training_audit_counts_epsilon(50, 50, 0, 50, 0, 0.05),
                            log(audit_cp_lower(50, 50, 0.0125) / audit_cp_upper(0, 50, 0.0125)), 1e-12);
    // Each direction at α/4: above the two-sided α/2 value of before.
    ck_assert_double_lt(training_audit_counts_epsilon(50, 50, 0, 50, 0, 0.05),
                        log(audit_cp_lower(50, 50, 0.025) / audit_cp_upper(0, 50, 0.025)));
    double eps = 1, pin = 1 / (1 + exp(-eps)), pout = 1 - pin;
    RngStream rs = rng_stream(4, RNG_TEST, 78, 0);
    int over = 0;
    for (int t = 0; t < 2000; t++) {
        long long fi = 0, fo = 0;
        for (int r = 0; r < 50; r++) {
            fi += rng_next_uniform(&rs) < pin;
            fo += rng_next_uniform(&rs) < pout;
        }
        over += training_audit_counts_epsilon(fi, 50, fo, 50, 0, 0.05) > eps;
    }
    ck_assert_msg(over <= 100, "%d of 2000 audits of an eps = 1 mechanism report more", over);
}
END_TEST

// ---- test vectors ---------------------------------------------------------------------------

// Null scores: every canary scores the same and the bits alternate along the canaries
// each half sorts by (ties go by index), so every guess set holds as many in as out: ε̂ is
// 0, by both bounds. Perfectly separated scores (1 for in, 0 for out, a quarter or more of
// each half in and out): every guess right at the best k, ε̂ is the ceiling.
START_TEST(one_run_test_vectors) {
    enum { M = 2000 };
    double *scores = malloc(sizeof(double) * M * 2);
    int *in = malloc(sizeof(int) * M);
    for (int c = 0; c < M; c++) {
        in[c] = (c / 2) % 2; // along each parity class: 0, 1, 0, 1, ...
        scores[2 * c] = 0;
        scores[2 * c + 1] = 0;
    }
    TrainingAuditOneRunBound b;
    ck_assert_int_eq(training_audit_one_run_bound(scores, 2, in, M, 1e-5, 0.95, &b, NULL), FP_OK);
    ck_assert_double_eq(b.epsilon, 0);
    ck_assert_double_eq(b.epsilon_snj, 0);
    ck_assert_double_eq(b.epsilon_fdp, 0);
    ck_assert_double_gt(b.ceiling, 3);
    RngStream rs = rng_stream(5, RNG_TEST, 79, 0);
    for (int c = 0; c < M; c++) {
        in[c] = (int)(rng_next_u32(&rs) & 1u);
        scores[2 * c] = rng_next_normal(&rs);  // noise
        scores[2 * c + 1] = in[c] ? 1.0 : 0.0; // separates
    }
    ck_assert_int_eq(training_audit_one_run_bound(scores, 2, in, M, 1e-5, 0.95, &b, NULL), FP_OK);
    ck_assert_int_eq(b.score, 1);
    ck_assert_int_eq(b.correct, b.guesses);
    ck_assert_double_eq_tol(b.epsilon, b.ceiling, 1e-12);
    // The ceiling: every guess right at the best k of the grid (k = 1%, ..., 25% of the
    // m/2 odd canaries), each k's ε̂ the larger of the two bounds.
    static const int divisors[] = {100, 50, 20, 10, 5, 4};
    int half = M / 2;
    double want = 0;
    for (size_t i = 0; i < sizeof divisors / sizeof divisors[0]; i++) {
        int r = 2 * (half / divisors[i]);
        want = fmax(want, fmax(training_audit_one_run_epsilon(half, r, r, 1e-5, 0.05),
                               training_audit_fdp_epsilon(half, r, r, 1e-5, 0.05)));
    }
    ck_assert_double_eq_tol(b.ceiling, want, 1e-12);
    ck_assert_double_eq(b.epsilon, fmax(b.epsilon_snj, b.epsilon_fdp));
    ck_assert_double_eq_tol(b.epsilon_snj, training_audit_one_run_epsilon(half, b.guesses, b.guesses, 1e-5, 0.05), 1e-12);
    // Bad shapes are refused.
    FpError err = {0};
    ck_assert_int_eq(training_audit_one_run_bound(scores, 0, in, M, 0, 0.95, &b, &err), FP_EPARAM);
    ck_assert_int_eq(training_audit_one_run_bound(scores, 2, in, 1, 0, 0.95, &b, &err), FP_EPARAM);
    free(scores);
    free(in);
}
END_TEST

// The multi-run counts: a test that fires equally often with and without the canary gives
// 0; one that fires in every "in" run and no "out" run gives the ceiling the audit reports
// (training_audit_counts_epsilon(n_in, n_in, 0, n_out)).
START_TEST(multi_run_test_vectors) {
    ck_assert_double_eq(training_audit_counts_epsilon(25, 50, 25, 50, 1e-5, 0.05), 0);
    ck_assert_double_eq(training_audit_counts_epsilon(0, 50, 0, 50, 1e-5, 0.05), 0);
    ck_assert_double_eq(training_audit_counts_epsilon(50, 50, 50, 50, 1e-5, 0.05), 0);
    double ceiling = training_audit_counts_epsilon(50, 50, 0, 50, 1e-5, 0.05);
    ck_assert_double_gt(ceiling, 2);
    for (int f = 0; f <= 50; f++)
        ck_assert_double_le(training_audit_counts_epsilon(f, 50, 50 - f, 50, 1e-5, 0.05), ceiling + 1e-12);
}
END_TEST

Suite *suite_audit_fdp(void) {
    Suite *s = suite_create("audit_fdp");
    TCase *t = tcase_create("bounds");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, fdp_never_beats_randomised_response);
    tcase_add_test(t, fdp_bound_matches_reference);
    tcase_add_test(t, fdp_is_tighter_where_delta_weighs);
    tcase_add_test(t, one_run_null_coverage);
    tcase_add_test(t, multi_run_levels_and_coverage);
    tcase_add_test(t, one_run_test_vectors);
    tcase_add_test(t, multi_run_test_vectors);
    suite_add_tcase(s, t);
    return s;
}
