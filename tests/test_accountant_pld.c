// The PLD accountant (defenses/dp/accountant_pld.h): against an independent high-precision
// reference, against RDP, the exact Gaussian, composition, monotonicity, the σ search and
// `fedpriv accountant --method pld`.
//
// Reference values: tools/pld_reference.py (mpmath, 30 digits), which computes ε(δ) for
// k steps of the Poisson-subsampled Gaussian by inverting the characteristic function of
// the privacy loss (an exponentially tilted Fourier integral; no loss grid, no FFT, no
// connect-the-dots), for each direction, with self-checks against the exact RDP moments
// and the closed-form Gaussian; the one-step values come from the closed-form hockey-stick
// divergence solved by mpmath findroot. The constants below are its output, pasted.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_pld.h"
#include "tests/cli_run.h"

// {q, sigma, steps, delta, eps_remove, eps_add}; the add/remove ε is the larger.
static const struct {
    double q, sigma;
    long long steps;
    double delta, eps_remove, eps_add;
} REF[] = {
    // PLD_REFERENCE_TABLE
    {0.02048, 1.54, 1464, 1.0e-5, 2.38629290854991, 2.17043304465567},
    {0.0042666666666666667, 1.1, 14062, 1.0e-5, 2.3815969214244, 2.24355937269898},
    {0.04, 1.5, 2250, 1.0e-5, 6.76878039341805, 6.17855264604809},
    {0.01, 4.0, 10000, 1.0e-5, 0.94686680076438, 0.937036425402058},
    {0.1, 1.0, 100, 1.0e-6, 8.05860816325972, 4.33419866720796},
    {0.5, 2.0, 50, 1.0e-5, 9.47359372083504, 7.75229061631152},
};

// PLD is an upper bound (never below the exact ε beyond the reference's own 1e-12) and
// within 1e-3 relative of it at the default grid.
START_TEST(matches_independent_reference) {
    for (size_t i = 0; i < sizeof REF / sizeof REF[0]; i++) {
        double want = fmax(REF[i].eps_remove, REF[i].eps_add), eps;
        FpError err = {0};
        ck_assert_msg(pld_epsilon(REF[i].q, REF[i].sigma, REF[i].steps, REF[i].delta, &eps, &err) == FP_OK, "%s",
                      err.msg);
        double rel = (eps - want) / want;
        ck_assert_msg(rel >= -1e-12 && rel <= 1e-3, "q=%g sigma=%g steps=%lld delta=%g: PLD %.10g vs reference %.10g "
                      "(relative %.3g)", REF[i].q, REF[i].sigma, REF[i].steps, REF[i].delta, eps, want, rel);
    }
}
END_TEST

// One step: the discrete PLD interpolates the exact hockey-stick curve at grid points, so
// its ε lies within one grid step above the exact one; the C closed form used for the
// comparison agrees with the mpmath one.
START_TEST(one_step_is_within_a_grid_step) {
    static const struct { double q, sigma, delta; } cases[] = {{0.05, 0.8, 1e-5}, {0.3, 2.0, 1e-3}, {1.0, 1.0, 1e-6}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double eps;
        ck_assert_int_eq(pld_epsilon(cases[i].q, cases[i].sigma, 1, cases[i].delta, &eps, NULL), FP_OK);
        for (int remove = 0; remove < 2; remove++)
            ck_assert_double_le(pld_one_step_delta(cases[i].q, cases[i].sigma, remove, eps), cases[i].delta);
        double below = eps - 2 * PLD_DEFAULT_GRID;
        ck_assert(fmax(pld_one_step_delta(cases[i].q, cases[i].sigma, 1, below),
                       pld_one_step_delta(cases[i].q, cases[i].sigma, 0, below)) > cases[i].delta);
    }
}
END_TEST

// q = 1: k steps are one Gaussian mechanism with μ = √k/σ, whose exact ε the compose
// accountant computes from its closed form (accountant_compose.c).
START_TEST(unsampled_is_the_exact_gaussian) {
    static const struct { double sigma; long long steps; double delta; } cases[] = {
        {5.0, 50, 1e-5}, {1.0, 1, 1e-5}, {10.0, 100, 1e-8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double eps, exact, s[1] = {cases[i].sigma / sqrt((double)cases[i].steps)};
        ck_assert_int_eq(pld_epsilon(1.0, cases[i].sigma, cases[i].steps, cases[i].delta, &eps, NULL), FP_OK);
        ck_assert_int_eq(gaussian_exact_epsilon(s, 1, cases[i].delta, &exact, NULL), FP_OK);
        ck_assert_msg(eps >= exact * (1 - 1e-9) && eps <= exact * (1 + 1e-4), "sigma %g steps %lld: %.10g vs %.10g",
                      cases[i].sigma, cases[i].steps, eps, exact);
    }
}
END_TEST

// PLD <= RDP (the default grid, Balle et al. conversion) on a grid of (q, σ, steps, δ);
// points where RDP's ε exceeds 10 are left out (the PLD window, and its time, grow with ε;
// the reference settings above cover larger ε).
START_TEST(below_rdp_on_a_grid) {
    static const double qs[] = {0.004, 0.05, 0.3}, sigmas[] = {1.0, 3.0}, deltas[] = {1e-5, 1e-9};
    static const long long steps[] = {10, 1000};
    int checked = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 2; c++)
                for (int d = 0; d < 2; d++) {
                    double pld, rdp;
                    ck_assert_int_eq(rdp_epsilon(qs[a], sigmas[b], steps[c], deltas[d], &rdp, NULL, NULL), FP_OK);
                    if (rdp > 10)
                        continue;
                    FpError err = {0};
                    ck_assert_msg(pld_epsilon(qs[a], sigmas[b], steps[c], deltas[d], &pld, &err) == FP_OK, "%s",
                                  err.msg);
                    ck_assert_msg(pld <= rdp, "q=%g sigma=%g steps=%lld delta=%g: PLD %.6g > RDP %.6g", qs[a],
                                  sigmas[b], steps[c], deltas[d], pld, rdp);
                    checked++;
                }
    ck_assert_int_ge(checked, 16);
}
END_TEST

START_TEST(composition_and_monotonicity) {
    PldAccountant *a, *b;
    PldEpsilon ra, rb;
    ck_assert_int_eq(pld_accountant_create(0, &a, NULL), FP_OK);
    ck_assert_int_eq(pld_accountant_create(0, &b, NULL), FP_OK);
    ck_assert_int_eq(pld_accountant_add(a, 0.02, 1.2, 300, NULL), FP_OK);
    ck_assert_int_eq(pld_accountant_add(b, 0.02, 1.2, 100, NULL), FP_OK);
    ck_assert_int_eq(pld_accountant_add(b, 0.02, 1.2, 200, NULL), FP_OK);
    ck_assert_int_eq(pld_accountant_epsilon(a, 1e-5, &ra, NULL), FP_OK);
    ck_assert_int_eq(pld_accountant_epsilon(b, 1e-5, &rb, NULL), FP_OK);
    ck_assert_double_eq(ra.epsilon, rb.epsilon);
    // A second, different phase can only add; its error terms stay within the budget.
    ck_assert_int_eq(pld_accountant_add(b, 0.1, 3.0, 50, NULL), FP_OK);
    ck_assert_int_eq(pld_accountant_epsilon(b, 1e-5, &rb, NULL), FP_OK);
    ck_assert_double_gt(rb.epsilon, ra.epsilon);
    ck_assert_double_le(rb.delta_grid + rb.delta_tail + rb.delta_alias + rb.delta_roundoff, 1e-5);
    ck_assert_double_le(rb.delta_tail + rb.delta_alias + rb.delta_roundoff, 1e-3 * 1e-5);
    pld_accountant_free(a);
    pld_accountant_free(b);
    double e1, e2, e3, e4;
    ck_assert_int_eq(pld_epsilon(0.01, 1.0, 200, 1e-5, &e1, NULL), FP_OK);
    ck_assert_int_eq(pld_epsilon(0.01, 1.0, 400, 1e-5, &e2, NULL), FP_OK);
    ck_assert_int_eq(pld_epsilon(0.01, 1.5, 200, 1e-5, &e3, NULL), FP_OK);
    ck_assert_int_eq(pld_epsilon(0.02, 1.0, 200, 1e-5, &e4, NULL), FP_OK);
    ck_assert_double_gt(e2, e1);
    ck_assert_double_lt(e3, e1);
    ck_assert_double_gt(e4, e1);
}
END_TEST

// One step's masses kept between accountings (PldStepMemo): the standard figure of t
// rounds restated after every round, as a federation's record does, is bit for bit the
// figure computed from scratch, whatever order the step counts come in (growing, with
// rounds skipped, shrinking) and with two mechanisms in one memo; the memo grows with the
// truncation range. The control: a memo that matches an entry whatever its sigma (the
// test-only FEDPRIV_TEST_PLD_MEMO_ANY_SIGMA), filled at sigma 1, gives sigma 1.2 another
// figure than from scratch, so the comparison catches a memo of the wrong mechanism.
static double pld_scratch(double q, double sigma, long long steps) {
    double eps;
    ck_assert_int_eq(pld_epsilon(q, sigma, steps, 1e-5, &eps, NULL), FP_OK);
    return eps;
}
static double pld_memoised(PldStepMemo *m, double q, double sigma, long long steps) {
    double eps;
    ck_assert_int_eq(pld_epsilon_memo(q, sigma, steps, 1e-5, m, &eps, NULL), FP_OK);
    return eps;
}

START_TEST(step_memo_is_bit_identical) {
    static const long long orders[][6] = {{1, 2, 3, 4, 5, 6}, {1, 2, 4, 8, 16, 20}, {20, 12, 6, 3, 2, 1}};
    for (int o = 0; o < 3; o++) {
        PldStepMemo *m;
        ck_assert_int_eq(pld_step_memo_create(&m, NULL), FP_OK);
        long bins_first = 0;
        for (int i = 0; i < 6; i++) {
            long long t = orders[o][i];
            double a = pld_memoised(m, 0.01, 1.0, t), b = pld_scratch(0.01, 1.0, t);
            ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "order %d, %lld steps: memoised %.17g, from scratch %.17g",
                          o, t, a, b);
            if (i == 0)
                bins_first = pld_step_memo_bins(m);
            if (o == 2 && i == 2) { // a second mechanism beside the first
                a = pld_memoised(m, 0.02, 1.3, t);
                b = pld_scratch(0.02, 1.3, t);
                ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "second mechanism: %.17g against %.17g", a, b);
            }
        }
        ck_assert_int_gt(bins_first, 0);
        if (o < 2) // more steps truncate further out: the memo grew
            ck_assert_int_gt(pld_step_memo_bins(m), bins_first);
        pld_step_memo_free(m);
    }
    PldStepMemo *m;
    ck_assert_int_eq(pld_step_memo_create(&m, NULL), FP_OK);
    pld_memoised(m, 0.01, 1.0, 5);
    setenv("FEDPRIV_TEST_PLD_MEMO_ANY_SIGMA", "1", 1);
    double wrong = pld_memoised(m, 0.01, 1.2, 5);
    unsetenv("FEDPRIV_TEST_PLD_MEMO_ANY_SIGMA");
    double right = pld_scratch(0.01, 1.2, 5);
    ck_assert_msg(memcmp(&wrong, &right, sizeof wrong) != 0, "a memo of sigma 1 used for sigma 1.2 should give "
                  "another figure (%.17g, from scratch %.17g)", wrong, right);
    pld_step_memo_free(m);
}
END_TEST

START_TEST(special_cases_and_bad_input) {
    double eps;
    FpError err = {0};
    ck_assert_int_eq(pld_epsilon(0.0, 1.0, 100, 1e-5, &eps, NULL), FP_OK);
    ck_assert_double_eq(eps, 0.0);
    ck_assert_int_eq(pld_epsilon(0.1, 1.0, 0, 1e-5, &eps, NULL), FP_OK);
    ck_assert_double_eq(eps, 0.0);
    ck_assert_int_eq(pld_epsilon(0.1, 0.0, 10, 1e-5, &eps, NULL), FP_OK);
    ck_assert(isinf(eps));
    ck_assert_int_eq(pld_epsilon(1.5, 1.0, 10, 1e-5, &eps, &err), FP_EPARAM);
    ck_assert_int_eq(pld_epsilon(0.1, -1.0, 10, 1e-5, &eps, &err), FP_EPARAM);
    ck_assert_int_eq(pld_epsilon(0.1, 1.0, -1, 1e-5, &eps, &err), FP_EPARAM);
    ck_assert_int_eq(pld_epsilon(0.1, 1.0, 10, 0.0, &eps, &err), FP_EPARAM);
    ck_assert_int_eq(pld_epsilon(0.1, 1.0, 10, 1.0, &eps, &err), FP_EPARAM);
    PldAccountant *acc = NULL;
    ck_assert_int_eq(pld_accountant_create(0.5, &acc, &err), FP_EPARAM);
    ck_assert_ptr_null(acc);
    // δ below the error budget: the round-off bound alone exceeds it.
    ck_assert_int_eq(pld_epsilon(0.02, 1.0, 1000, 1e-300, &eps, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "budget"));
}
END_TEST

// The σ search meets its target and recovers the σ behind an ε (a cheap setting: the
// search runs ~25 accountings).
START_TEST(sigma_search) {
    double target, sigma, at;
    ck_assert_int_eq(pld_epsilon(0.004, 3.0, 1000, 1e-5, &target, NULL), FP_OK);
    ck_assert_int_eq(pld_sigma_for_epsilon(0.004, 1000, 1e-5, target, 0, NULL, &sigma, &at, NULL), FP_OK);
    ck_assert_double_le(at, target);
    ck_assert_double_le(fabs(sigma - 3.0) / 3.0, 1e-5);
    ck_assert_int_eq(pld_sigma_for_epsilon(0.0, 1000, 1e-5, 1.0, 0, NULL, &sigma, &at, NULL), FP_OK);
    ck_assert_double_eq(sigma, 0.0);
}
END_TEST

START_TEST(cli_pld) {
    char out[4096], err[4096];
    const char *ok[] = {"accountant", "--method", "pld", "--q", "0.02048", "--sigma", "1.54", "--steps", "1464",
                        "--delta", "1e-5", "--json", NULL};
    int rc = cli_run(ok, out, err, sizeof out);
    if (rc < 0)
        return; // FEDPRIV_BIN unset
    ck_assert_msg(rc == 0, "%s", err);
    cJSON *j = cJSON_Parse(out);
    ck_assert_ptr_nonnull(j);
    double eps = cJSON_GetObjectItem(j, "epsilon")->valuedouble, want = fmax(REF[0].eps_remove, REF[0].eps_add);
    ck_assert_double_le(fabs(eps - want) / want, 1e-3);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "method")->valuestring, "pld");
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(j, "delta_roundoff"));
    cJSON_Delete(j);
    const char *bad[][16] = {
        {"accountant", "--method", "pdl", "--q", "0.1", "--sigma", "1", "--steps", "10", "--delta", "1e-5", NULL},
        {"accountant", "--method", "pld", "--q", "0.1", "--sigma", "1", "--steps", "10", "--delta", "1e-5",
         "--orders", "extended", NULL},
        {"accountant", "--q", "0.1", "--sigma", "1", "--steps", "10", "--delta", "1e-5", "--grid", "1e-4", NULL},
        {"accountant", "--method", "pld", "--q", "0.1", "--sigma", "1", "--steps", "10", "--delta", "1e-5",
         "--grid", "2", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = cli_run(bad[i], out, err, sizeof out);
        ck_assert_int_eq(rc, 2);
        ck_assert_int_eq(cli_count_lines(err), 1);
    }
}
END_TEST

Suite *suite_accountant_pld(void) {
    Suite *s = suite_create("accountant_pld");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, matches_independent_reference);
    tcase_add_test(t, one_step_is_within_a_grid_step);
    tcase_add_test(t, unsampled_is_the_exact_gaussian);
    tcase_add_test(t, below_rdp_on_a_grid);
    tcase_add_test(t, composition_and_monotonicity);
    tcase_add_test(t, step_memo_is_bit_identical);
    tcase_add_test(t, special_cases_and_bad_input);
    tcase_add_test(t, sigma_search);
    tcase_add_test(t, cli_pld);
    suite_add_tcase(s, t);
    return s;
}
