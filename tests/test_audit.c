// The empirical audit (audits/mechanism.h) and `fedpriv audit`: Clopper-Pearson bounds against
// known values, every sound mechanism's ε lower bound <= its ε (with power to come close),
// a deliberately broken mechanism caught, SPM's magnitude leak caught, the issue's
// acceptance figures (SPM bias factor 0.574 as published, 1.000 corrected), and the CLI.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audits/mechanism.h"
#include "audits/support.h"
#include "tests/cli_run.h"

static Mech make_mech(const char *text) {
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    MechSpec sp;
    Mech m;
    FpError e = {0};
    ck_assert_msg(mech_spec_parse(o, "mechanism", MECH_PARSE_AUDIT, NULL, &sp, &e) == FP_OK, "%s", e.msg);
    ck_assert_msg(mech_init(&m, &sp, &e) == FP_OK, "%s", e.msg);
    cJSON_Delete(o);
    return m;
}

static AuditResult run_audit(const Mech *m, long long n, const double *inputs, int n_in) {
    AuditConfig cfg = audit_config_default();
    cfg.samples = n;
    cfg.inputs = inputs;
    cfg.n_inputs = n_in;
    AuditResult r;
    FpError e = {0};
    ck_assert_msg(audit_run(m, &cfg, &r, &e) == FP_OK, "%s", e.msg);
    return r;
}

// ---- Clopper-Pearson ------------------------------------------------------------------

// P[Bin(n, p) >= k] by direct summation in log space (n small).
static double binom_tail_ge(int k, int n, double p) {
    double s = 0;
    for (int i = k; i <= n; i++)
        s += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) + i * log(p) + (n - i) * log1p(-p));
    return s;
}

START_TEST(clopper_pearson_known_values) {
    ck_assert_double_eq_tol(audit_beta_inc(2, 3, 0.5), 0.6875, 1e-14);
    ck_assert_double_eq_tol(audit_beta_inc(1, 1, 0.3), 0.3, 1e-14);
    ck_assert_double_eq_tol(audit_beta_inc(5, 1, 0.7), pow(0.7, 5), 1e-14);
    // R: binom.test(5, 10)$conf.int, binom.test(1, 100), binom.test(0, 50) (two-sided 95%,
    // so one-sided 0.025 each).
    ck_assert_double_eq_tol(audit_cp_lower(5, 10, 0.025), 0.1870860, 1e-6);
    ck_assert_double_eq_tol(audit_cp_upper(5, 10, 0.025), 0.8129140, 1e-6);
    ck_assert_double_eq_tol(audit_cp_lower(1, 100, 0.025), 0.0002531460, 1e-9);
    ck_assert_double_eq_tol(audit_cp_upper(1, 100, 0.025), 0.0544593854, 1e-9);
    ck_assert_double_eq_tol(audit_cp_upper(0, 50, 0.025), 0.07112174, 1e-7);
    ck_assert_double_eq(audit_cp_lower(0, 50, 0.025), 0);
    ck_assert_double_eq(audit_cp_upper(50, 50, 0.025), 1);
    // The bounds solve the tail equations (n = 1000 by direct summation) and are
    // conservative at large n (never inside the interval's exact end).
    for (int k = 1; k < 1000; k += 37) {
        double lo = audit_cp_lower(k, 1000, 1e-6), hi = audit_cp_upper(k, 1000, 1e-6);
        ck_assert_double_le(fabs(binom_tail_ge(k, 1000, lo) - 1e-6), 1e-9);
        ck_assert_double_le(fabs((1 - binom_tail_ge(k + 1, 1000, hi)) - 1e-6), 1e-9);
    }
    long long n = 10000000, k = 5000000;
    double lo = audit_cp_lower(k, n, 1e-6), hi = audit_cp_upper(k, n, 1e-6), sd = sqrt(0.25 / n);
    ck_assert(lo < 0.5 - 4.7 * sd && lo > 0.5 - 5.1 * sd);   // z(1e-6) = 4.753
    ck_assert(hi > 0.5 + 4.7 * sd && hi < 0.5 + 5.1 * sd);
}
END_TEST

// ---- the ε lower bound ----------------------------------------------------------------

static const char *const sound[] = {
    "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":%.17g}",
    "{\"name\":\"spm\",\"variant\":\"paper\",\"epsilon\":%.17g}",
    "{\"name\":\"spm\",\"variant\":\"pnpm\",\"epsilon\":%.17g}",
    "{\"name\":\"duchi\",\"epsilon\":%.17g}",
    "{\"name\":\"pm\",\"epsilon\":%.17g}",
    "{\"name\":\"ldp-fl\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
    "{\"name\":\"laplace\",\"epsilon\":%.17g,\"clip\":0.5}",
    "{\"name\":\"gaussian\",\"epsilon\":%.17g,\"clip\":0.5}",
    "{\"name\":\"adaptive-harmony\",\"variant\":\"corrected\",\"epsilon\":%.17g,\"range\":[0.2,1.0],\"dim\":4}",
    "{\"name\":\"adaptive-harmony\",\"variant\":\"paper\",\"epsilon\":%.17g,\"range\":[0.2,1.0],\"dim\":4}",
    "{\"name\":\"rr\",\"epsilon\":%.17g}",
};

// Every mechanism that keeps its promise passes at several ε: ε_LB <= ε and the
// moments within 6σ. The pure-ε mechanisms with a sharp density ratio also show the
// bound has power: it comes within 15% of ε at 10^6 samples.
START_TEST(sound_mechanisms_pass) {
    static const double eps[] = {0.5, 2.0};
    for (size_t c = 0; c < sizeof sound / sizeof sound[0]; c++)
        for (int k = 0; k < 2; k++) {
            char text[256];
            snprintf(text, sizeof text, sound[c], eps[k]);
            Mech m = make_mech(text);
            AuditResult r = run_audit(&m, 1000000, NULL, 0);
            ck_assert_msg(r.epsilon_lower_bound <= eps[k], "%s: bound %g", text, r.epsilon_lower_bound);
            ck_assert_msg(r.pass_epsilon && r.pass_moments, "%s: moments z %g %g %g %g", text, r.in[0].z_mean,
                          r.in[0].z_variance, r.in[1].z_mean, r.in[1].z_variance);
            int sharp = m.spec.ops != &mech_gaussian && m.spec.ops != &mech_harmony;
            if (sharp)
                ck_assert_msg(r.epsilon_lower_bound > 0.85 * eps[k], "%s: bound %g has no power", text,
                              r.epsilon_lower_bound);
        }
}
END_TEST

// Randomised response that keeps the sign with the probability for 2ε while claiming ε:
// the audit must reject it.
START_TEST(broken_mechanism_fails) {
    static const double eps[] = {0.3, 1.0, 2.0};
    for (int k = 0; k < 3; k++) {
        char text[128];
        snprintf(text, sizeof text, "{\"name\":\"rr\",\"variant\":\"broken\",\"epsilon\":%.17g}", eps[k]);
        Mech m = make_mech(text);
        AuditResult r = run_audit(&m, 1000000, NULL, 0);
        ck_assert_msg(r.epsilon_lower_bound > 1.5 * eps[k], "eps %g: bound %g", eps[k], r.epsilon_lower_bound);
        ck_assert(!r.pass_epsilon);
        ck_assert(r.pass_moments);   // its moments are what its (broken) law says
        ck_assert_double_le(r.epsilon_lower_bound, 2 * eps[k]);
    }
}
END_TEST

// SPM protects the sign only: 0.5 and 1 have disjoint output supports in part.
START_TEST(spm_magnitude_leak_is_caught) {
    Mech m = make_mech("{\"name\":\"spm\",\"epsilon\":1}");
    const double in[] = {0.5, 1.0};
    AuditResult r = run_audit(&m, 200000, in, 2);
    ck_assert_double_gt(r.epsilon_lower_bound, 5);
    ck_assert(!r.pass_epsilon);
    ck_assert_int_eq(r.count_to, 0);
}
END_TEST

// The acceptance: SPM at ε = 0.3 as published has bias factor 0.574 ± 0.005
// (e^ε/(e^ε+1) = 0.5744), the corrected variant 1.000 ± 0.005, with the default
// audit (10^7 samples per input, seed 1).
START_TEST(spm_acceptance_figures) {
    Mech paper = make_mech("{\"name\":\"spm\",\"variant\":\"paper\",\"epsilon\":0.3}");
    Mech corr = make_mech("{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":0.3}");
    AuditConfig cfg = audit_config_default();
    AuditResult rp, rc;
    ck_assert_int_eq(audit_run(&paper, &cfg, &rp, NULL), FP_OK);
    ck_assert_int_eq(audit_run(&corr, &cfg, &rc, NULL), FP_OK);
    double u = exp(0.3);
    // the safe sampler's keep and flip counts per cell are within one word of 2^22·(u, 1)/(u+1)
    ck_assert_double_eq_tol(rp.bias_factor_theory, u / (u + 1), 1e-5);
    ck_assert_double_le(fabs(rp.bias_factor - 0.574), 0.005);
    ck_assert_double_le(fabs(rp.bias_factor - u / (u + 1)), 6 * rp.bias_factor_se);
    ck_assert_double_le(fabs(rc.bias_factor - 1.0), 0.005);
    ck_assert_double_le(fabs(rc.bias_factor - 1.0), 6 * rc.bias_factor_se);
    ck_assert(rp.pass_epsilon && rp.pass_moments && rc.pass_epsilon && rc.pass_moments);
    // The paper's variance claim is reported beside the truth.
    ck_assert_double_eq_tol(rp.in[1].variance_claimed, 29.66, 0.01);
    ck_assert_double_eq_tol(rp.in[1].variance_theory, 17.28, 0.01);
    cJSON *j = audit_result_json(&paper, &rp);
    const cJSON *in0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "inputs"), 0);
    static const char *const keys[] = {"mean", "bias_factor", "variance", "variance_theory"};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(cJSON_IsNumber(cJSON_GetObjectItem(in0, keys[i])), "%s", keys[i]);
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "epsilon_lower_bound")));
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "bias_factor")));
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "pass")));
    cJSON_Delete(j);
}
END_TEST

START_TEST(audit_rejects_bad_config) {
    Mech m = make_mech("{\"name\":\"duchi\",\"epsilon\":1}");
    AuditConfig cfg = audit_config_default();
    AuditResult r;
    FpError e = {0};
    cfg.samples = 10;
    ck_assert_int_eq(audit_run(&m, &cfg, &r, &e), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(e.msg, "audit.samples"));
    cfg = audit_config_default();
    const double one[] = {0.5};
    cfg.inputs = one;
    cfg.n_inputs = 1;
    ck_assert_int_eq(audit_run(&m, &cfg, &r, &e), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(e.msg, "audit.inputs"));
    cfg = audit_config_default();
    cfg.bins = 1;
    ck_assert_int_eq(audit_run(&m, &cfg, &r, &e), FP_EPARAM);
}
END_TEST

// ---- the support audit ---------------------------------------------------------------

static SupportResult run_support(const Mech *m, long long n, const double *inputs, int n_in) {
    SupportConfig cfg = support_config_default();
    cfg.samples = n;
    cfg.inputs = inputs;
    cfg.n_inputs = n_in;
    SupportResult r;
    FpError e = {0};
    ck_assert_msg(audit_support(m, &cfg, &r, &e) == FP_OK, "%s", e.msg);
    return r;
}

// Controls: the float samplers of laplace, pm and spm (at ±1, the sign it protects, for
// ε < 1) have outputs that cannot occur at the other input, so the support audit refutes
// every ε; the
// float gaussian cannot be decided; every safe sampler and the two-point mechanisms pass,
// at ε 0.5 and 4 (and the safe gaussian at its δ).
START_TEST(support_controls) {
    static const char *const fails[] = {
        "{\"name\":\"laplace\",\"sampler\":\"float\",\"epsilon\":%.17g,\"clip\":1}",
        "{\"name\":\"pm\",\"sampler\":\"float\",\"epsilon\":%.17g}",
    };
    // spm's float sampler at ±1: impossible outputs at ε < 1 (about 3% at ε = 0.5); from
    // ε = 1 on none turned up in 20000 draws (its kept and flipped parts both have more
    // than 2^24 words)
    static const char *const spm_fails[] = {
        "{\"name\":\"spm\",\"sampler\":\"float\",\"epsilon\":0.5}",
        "{\"name\":\"spm\",\"variant\":\"paper\",\"sampler\":\"float\",\"epsilon\":0.3}",
    };
    static const char *const passes[] = {
        "{\"name\":\"laplace\",\"epsilon\":%.17g,\"clip\":1}",
        "{\"name\":\"laplace\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
        "{\"name\":\"gaussian\",\"epsilon\":%.17g,\"clip\":1}",
        "{\"name\":\"pm\",\"epsilon\":%.17g}",
        "{\"name\":\"spm\",\"epsilon\":%.17g}",
        "{\"name\":\"spm\",\"variant\":\"pnpm\",\"epsilon\":%.17g}",
        "{\"name\":\"duchi\",\"epsilon\":%.17g}",
        "{\"name\":\"ldp-fl\",\"epsilon\":%.17g,\"range\":[-0.3,0.9]}",
        "{\"name\":\"adaptive-harmony\",\"epsilon\":%.17g,\"range\":[0.2,1.0],\"dim\":4}",
        "{\"name\":\"rr\",\"epsilon\":%.17g}",
    };
    static const double eps[] = {0.5, 4};
    char text[256];
    for (int k = 0; k < 2; k++) {
        for (size_t c = 0; c < sizeof fails / sizeof fails[0]; c++) {
            snprintf(text, sizeof text, fails[c], eps[k]);
            Mech m = make_mech(text);
            SupportResult r = run_support(&m, 20000, NULL, 0);
            ck_assert_msg(r.decidable && !r.pass && r.impossible > 100, "%s: %lld impossible", text, r.impossible);
            ck_assert(isinf(r.epsilon_lower_bound));
            ck_assert(r.pair[0].has_witness || r.pair[1].has_witness);
        }
        for (size_t c = 0; c < sizeof passes / sizeof passes[0]; c++) {
            snprintf(text, sizeof text, passes[c], eps[k]);
            Mech m = make_mech(text);
            SupportResult r = run_support(&m, 20000, NULL, 0);
            ck_assert_msg(r.decidable && r.pass && r.impossible == 0, "%s: %lld impossible", text, r.impossible);
            ck_assert_double_eq(r.epsilon_lower_bound, 0);
        }
    }
    for (size_t c = 0; c < sizeof spm_fails / sizeof spm_fails[0]; c++) {
        Mech m = make_mech(spm_fails[c]);
        SupportResult r = run_support(&m, 20000, NULL, 0);
        ck_assert_msg(r.decidable && !r.pass && r.impossible > 100, "%s: %lld impossible", spm_fails[c], r.impossible);
    }
    Mech g = make_mech("{\"name\":\"gaussian\",\"sampler\":\"float\",\"epsilon\":1,\"clip\":1}");
    SupportResult r = run_support(&g, 100, NULL, 0);
    ck_assert(!r.decidable && !r.pass);
    // SPM's safe sampler protects the sign only: inputs of different magnitude have
    // disjoint supports, and the audit says so.
    Mech spm = make_mech("{\"name\":\"spm\",\"epsilon\":1}");
    const double in[] = {0.5, 1.0};
    r = run_support(&spm, 2000, in, 2);
    ck_assert(!r.pass && r.pair[0].impossible == 2000);
}
END_TEST

// Finding (a) of the issue, measured with the float samplers (as every run drew them
// before the safe samplers): the share of outputs at one input that cannot occur at the
// other is 28.6% for laplace at ε = 1 on [-1, 1] (+1 against -1), 32.7% for inputs 0.5
// against -0.25, and 36% and 46% for pm at ε = 1 and 4 (+1 against -1). Within 6 binomial
// sd at 20000 draws (plus the rounding).
START_TEST(finding_a_figures) {
    static const struct { const char *text; double x, x2, share, rounding; } t[] = {
        {"{\"name\":\"laplace\",\"sampler\":\"float\",\"epsilon\":1,\"clip\":1}", 1, -1, 0.286, 0.0005},
        {"{\"name\":\"laplace\",\"sampler\":\"float\",\"epsilon\":1,\"clip\":1}", 0.5, -0.25, 0.327, 0.0005},
        {"{\"name\":\"pm\",\"sampler\":\"float\",\"epsilon\":1}", 1, -1, 0.36, 0.005},
        {"{\"name\":\"pm\",\"sampler\":\"float\",\"epsilon\":4}", 1, -1, 0.46, 0.005},
    };
    const long long n = 20000;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        Mech m = make_mech(t[i].text);
        const double in[] = {t[i].x, t[i].x2};
        SupportResult r = run_support(&m, n, in, 2);
        double share = r.pair[0].share, sd = sqrt(t[i].share * (1 - t[i].share) / n);
        ck_assert_msg(fabs(share - t[i].share) <= 6 * sd + t[i].rounding, "%s %g vs %g: share %.4f, want %.3f",
                      t[i].text, t[i].x, t[i].x2, share, t[i].share);
    }
}
END_TEST

// ---- the CLI ----------------------------------------------------------------------------

START_TEST(cli_audit) {
    static char out[1 << 16], errb[1 << 12];
    const char *acc[] = {"audit", "--mechanism", "spm", "--variant", "paper", "--epsilon", "0.3", "--json", NULL};
    int rc = cli_run(acc, out, errb, sizeof out);
    if (rc < 0) {
        printf("SKIP cli tests: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    ck_assert_msg(rc == 0, "rc %d: %s", rc, errb);
    cJSON *j = cJSON_Parse(out);
    ck_assert_ptr_nonnull(j);
    ck_assert_double_le(fabs(cJSON_GetObjectItem(j, "bias_factor")->valuedouble - 0.574), 0.005);
    ck_assert_double_le(cJSON_GetObjectItem(j, "epsilon_lower_bound")->valuedouble, 0.3);
    cJSON_Delete(j);

    const char *text[] = {"audit", "--mechanism", "ldp-fl", "--epsilon", "1", "--range", "-0.5,0.5", "--input", "-0.5",
                          "0.1", "0.5", "--samples", "200000", NULL};
    ck_assert_int_eq(cli_run(text, out, errb, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "epsilon check: PASS"));

    const char *broken[] = {"audit",     "--mechanism", "rr", "--variant", "broken", "--epsilon", "1",
                            "--samples", "200000",      NULL};
    ck_assert_int_eq(cli_run(broken, out, errb, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "epsilon check: FAIL"));

    // the default run includes the support test: the float laplace fails it
    const char *flt[] = {"audit", "--mechanism", "laplace", "--sampler", "float", "--epsilon", "1", "--clip", "1",
                         "--samples", "100000", "--support-samples", "20000", NULL};
    ck_assert_int_eq(cli_run(flt, out, errb, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "epsilon check: PASS"));   // histograms cannot see it
    ck_assert_ptr_nonnull(strstr(out, "support check: FAIL (epsilon lower bound inf"));
    const char *safe[] = {"audit", "--mechanism", "laplace", "--epsilon", "1", "--clip", "1", "--test", "support",
                          "--support-samples", "20000", "--json", NULL};
    ck_assert_int_eq(cli_run(safe, out, errb, sizeof out), 0);
    j = cJSON_Parse(out);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "sampler")->valuestring, "safe");
    const cJSON *sj = cJSON_GetObjectItem(j, "support");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(sj, "pass")) && cJSON_IsTrue(cJSON_GetObjectItem(j, "pass")));
    ck_assert_double_eq(cJSON_GetObjectItem(sj, "impossible")->valuedouble, 0);
    ck_assert_ptr_null(cJSON_GetObjectItem(j, "bias_factor"));   // moments were not run
    cJSON_Delete(j);
    const char *pmf[] = {"audit", "--mechanism", "pm", "--sampler", "float", "--epsilon", "4", "--test", "support",
                         "--support-samples", "5000", "--json", NULL};
    ck_assert_int_eq(cli_run(pmf, out, errb, sizeof out), 1);
    j = cJSON_Parse(out);
    sj = cJSON_GetObjectItem(j, "support");
    ck_assert_str_eq(cJSON_GetObjectItem(sj, "epsilon_lower_bound")->valuestring, "inf");
    ck_assert_str_eq(cJSON_GetObjectItem(j, "epsilon_lower_bound")->valuestring, "inf");   // what check reads
    ck_assert(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(sj, "pairs"), 1), "witness_hex")));
    cJSON_Delete(j);

    const char *help[] = {"audit", "--help", NULL};
    ck_assert_int_eq(cli_run(help, out, errb, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: fedpriv audit"));

    static const struct { const char *args[10]; const char *msg; } bad[] = {
        {{"audit", "--mechanism", "spm", "--epsilon", "0"}, "mechanism.epsilon"},
        {{"audit", "--mechanism", "spm", "--epsilon", "-2"}, "mechanism.epsilon"},
        {{"audit", "--mechanism", "spm", "--variant", "fixed", "--epsilon", "1"}, "mechanism.variant"},
        {{"audit", "--mechanism", "ldp-fl", "--epsilon", "1"}, "mechanism.range"},
        {{"audit", "--mechanism", "gaussian", "--epsilon", "1"}, "mechanism.range"},
        {{"audit", "--mechanism", "adaptive-harmony", "--epsilon", "1"}, "mechanism.range"},
        {{"audit", "--mechanism", "spm"}, "mechanism.epsilon"},
        {{"audit", "--mechanism", "bogus", "--epsilon", "1"}, "mechanism.name"},
        {{"audit", "--mechanism", "spm", "--epsilon", "x"}, "--epsilon"},
        {{"audit", "--mechanism", "spm", "--epsilon", "1", "--samples", "5"}, "audit.samples"},
        {{"audit", "--mechanism", "spm", "--epsilon", "1", "--frobnicate"}, "unknown option"},
        {{"audit", "--mechanism", "spm", "--epsilon", "1", "--test", "speed"}, "--test"},
        {{"audit", "--mechanism", "spm", "--epsilon", "1", "--sampler", "double"}, "mechanism.sampler"},
        {{"audit", "--mechanism", "duchi", "--epsilon", "1", "--sampler", "float"}, "mechanism.sampler"},
        {{"audit", "--mechanism", "spm", "--epsilon", "1", "--support-samples", "0"}, "--support-samples"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(cli_run(bad[i].args, out, errb, sizeof out), 2);
        ck_assert_msg(strstr(errb, bad[i].msg) != NULL, "case %zu: %s", i, errb);
        ck_assert_msg(strchr(errb, '\n') == errb + strlen(errb) - 1, "case %zu: not one line: %s", i, errb);
    }
}
END_TEST

Suite *suite_audit(void) {
    Suite *s = suite_create("audit");
    TCase *t = tcase_create("audit");
    tcase_set_timeout(t, 180);
    tcase_add_test(t, clopper_pearson_known_values);
    tcase_add_test(t, sound_mechanisms_pass);
    tcase_add_test(t, broken_mechanism_fails);
    tcase_add_test(t, spm_magnitude_leak_is_caught);
    tcase_add_test(t, spm_acceptance_figures);
    tcase_add_test(t, audit_rejects_bad_config);
    tcase_add_test(t, support_controls);
    tcase_add_test(t, finding_a_figures);
    tcase_add_test(t, cli_audit);
    suite_add_tcase(s, t);
    return s;
}
