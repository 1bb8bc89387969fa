// `fedpriv audit`: samples one local-DP mechanism (defenses/dp/mech.h) on chosen inputs and
// runs three tests (all by default, or those named by --test):
//   moments  the empirical mean, bias factor and variance against the closed forms
//            (audits/mechanism.h), within 6σ;
//   epsilon  a 95% lower confidence bound on ε from output histograms, <= the claimed ε;
//   support  every output drawn at one input can occur at the other (audits/support.h).
// Exit 0 when every test run passes, 1 when one fails, 2 on bad input.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "audits/mechanism.h"
#include "audits/support.h"
#include "fl/experiment.h"

static const char *const CMD = "audit";

enum { TEST_MOMENTS = 1, TEST_EPSILON = 2, TEST_SUPPORT = 4 };

static void print_header(const Mech *m) {
    const MechOps *info = m->spec.ops;
    printf("audit of %s", info->name);
    if (m->spec.variant != MV_NONE)
        printf(" (variant %s)", mech_variant_name(m->spec.variant));
    printf(", sampler %s, epsilon %g", mech_sampler_name(m->sampler->kind), m->spec.eps);
    if (info->takes_delta)
        printf(", delta %g", m->spec.delta);
    if (info->range != MECH_RANGE_NONE)
        printf(", range [%g, %g]", m->spec.lo, m->spec.hi);
    if (info->takes_dim)
        printf(", d %ld", m->spec.dim);
    printf("\n");
}

static void print_text(const Mech *m, const AuditResult *r, int tests) {
    print_header(m);
    printf("  %lld samples per input, seed %llu\n", r->samples, (unsigned long long)r->seed);
    printf("  %10s %12s %12s %9s %12s %12s %8s %8s\n", "input", "mean", "theory", "mean/x", "variance", "theory",
           "z mean", "z var");
    for (int i = 0; i < r->n_inputs; i++) {
        const AuditInput *a = &r->in[i];
        char bf[16];
        if (a->bias_factor == a->bias_factor)
            snprintf(bf, sizeof bf, "%.4f", a->bias_factor);
        else
            snprintf(bf, sizeof bf, "-");   // input 0
        printf("  %10.4g %12.6g %12.6g %9s %12.6g %12.6g %8.2f %8.2f\n", a->input, a->mean, a->mean_theory, bf,
               a->variance, a->variance_theory, a->z_mean, a->z_variance);
    }
    for (int i = 0; i < r->n_inputs; i++)
        if (r->in[i].variance_claimed == r->in[i].variance_claimed) {
            printf("  the paper claims variance %.6g at input %g (Eq. A17/A21; below the bound 4e^eps/(e^eps-1)^2 "
                   "of any unbiased eps-LDP estimator of a sign)\n",
                   r->in[i].variance_claimed, r->in[i].input);
            break;
        }
    if (r->bias_factor == r->bias_factor)
        printf("bias factor %.4f +- %.4f (1 s.e.; theory %.4f)\n", r->bias_factor, r->bias_factor_se,
               r->bias_factor_theory);
    if (r->lb_from >= 0)
        printf("epsilon lower bound %.4f (%.0f%% confidence; %lld sets, Bonferroni): outputs in [%g, %g) from "
               "input %g: %lld vs %lld from input %g\n",
               r->epsilon_lower_bound, 100 * (1 - r->alpha), r->sets_tested, r->set_lo, r->set_hi,
               r->in[r->lb_from].input, r->count_from, r->count_to, r->in[r->lb_to].input);
    else
        printf("epsilon lower bound: none positive (%lld sets)\n", r->sets_tested);
    if (tests & TEST_EPSILON)
        printf("epsilon check: %s (lower bound %s claimed epsilon %g)\n", r->pass_epsilon ? "PASS" : "FAIL",
               r->pass_epsilon ? "<=" : ">", m->spec.eps);
    if (tests & TEST_MOMENTS)
        printf("moments within 6 sigma of the closed forms: %s\n", r->pass_moments ? "PASS" : "FAIL");
    printf("(%.2f s)\n", r->seconds);
}

static void print_support(const SupportResult *r) {
    if (!r->decidable) {
        printf("support check: UNDECIDED (this sampler's outputs come from 2^64 word pairs: no exact inverse; "
               "its guarantee is none)\n");
        return;
    }
    for (int k = 0; k < r->n_pairs; k++) {
        const SupportPair *p = &r->pair[k];
        printf("  support: %lld of %lld outputs at input %g cannot occur at input %g (%.2f%%, %.0f%% interval "
               "[%.2f%%, %.2f%%])",
               p->impossible, p->drawn, r->inputs[p->from], r->inputs[p->to], 100 * p->share, 95.0,
               100 * p->share_lo, 100 * p->share_hi);
        if (p->has_witness)
            printf("; e.g. %.9g (%a)%s", p->witness, p->witness,
                   p->confirmed == 1   ? ", no word of 2^32 gives it"
                   : p->confirmed == 0 ? ", BUT A WORD GIVES IT (inverse search wrong)"
                                       : "");
        printf("\n");
    }
    if (r->impossible > 0 && r->delta == 0)
        printf("support check: %s (epsilon lower bound inf: an output at one input cannot occur at the other)\n",
               r->pass ? "PASS" : "FAIL");
    else
        printf("support check: %s (every output drawn can occur at the other input%s)\n", r->pass ? "PASS" : "FAIL",
               r->impossible > 0 ? ", up to a share within delta" : "");
}

// "moments,epsilon,support" -> bits; 0 on an unknown name.
static int parse_tests(const char *v) {
    int bits = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v ? v : "");
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "moments") == 0)
            bits |= TEST_MOMENTS;
        else if (strcmp(t, "epsilon") == 0)
            bits |= TEST_EPSILON;
        else if (strcmp(t, "support") == 0)
            bits |= TEST_SUPPORT;
        else
            return 0;
    }
    return bits;
}

static const char ABOUT[] =
    "  moments: draws N outputs of a local-DP mechanism at each input and reports the mean, the\n"
    "  bias factor mean/x and the variance against the closed forms (z-scores, 6 sigma).\n"
    "  epsilon: a lower bound on epsilon, the largest ln((P_lo[M(x) in S] - delta) /\n"
    "  P_hi[M(x') in S]) over ordered input pairs and unions of adjacent output bins, with\n"
    "  one-sided Clopper-Pearson bounds Bonferroni-corrected over every set tested (95%\n"
    "  family-wise confidence).\n"
    "  support: draws outputs at each input and decides exactly whether each can occur at the\n"
    "  other; one that cannot refutes every epsilon (lower bound inf: floating-point samplers,\n"
    "  Mironov 2012).";

static const char AFTER[] =
    "  SPM is epsilon-LDP on the sign only: audit it on inputs of equal magnitude (the default\n"
    "  -1, 1); other pairs show that the magnitude is not protected.\n"
    "\n"
    "  example: fedpriv audit --mechanism spm --variant paper --epsilon 0.3\n"
    "           -> bias factor 0.574 (the paper's Alg. 2 shrinks every weight by e^eps/(e^eps+1))";

int cmd_audit(int argc, char **argv) {
    AuditConfig cfg = audit_config_default();
    SupportConfig scfg = support_config_default();
    double inputs[AUDIT_MAX_INPUTS], range[2], eps = 0, delta = 0, clip = 0;
    const char *mechanism = NULL, *variant = NULL, *sampler = NULL, *test_list = NULL, *out = NULL;
    long long dim = 0, samples = cfg.samples, support_samples = scfg.samples, seed = (long long)cfg.seed,
              bins = cfg.bins;
    int n_in = 0, n_range = 0, json = 0, confirm = 0, have_eps = 0, have_delta = 0, have_clip = 0, have_dim = 0,
        have_range = 0, tests = TEST_MOMENTS | TEST_EPSILON | TEST_SUPPORT;
    // Seeds are exact integers below 2^53, as in configs (fl/experiment.h). The mechanism's
    // own parameters are checked by mech_spec_parse, which names them mechanism.KEY.
    const CliOption opts[] = {
        {"--mechanism", NULL, CLI_STRING, &mechanism, .value = "NAME",
         .help = "spm, duchi, pm, ldp-fl, laplace, gaussian, adaptive-harmony, rr"},
        {"--variant", NULL, CLI_STRING, &variant, .value = "V",
         .help = "spm: corrected (default), paper, pnpm; adaptive-harmony: corrected,\n"
                 "paper; gaussian: analytic (default), classic; rr: standard, broken"},
        {"--sampler", NULL, CLI_STRING, &sampler, .value = "S",
         .help = "safe (default: exact law, proven epsilon) or float (spm, pm, laplace,\n"
                 "gaussian: the float32 samplers, no guarantee)"},
        {"--epsilon", NULL, CLI_DOUBLE, &eps, &have_eps, "E", "the claimed epsilon, in [1e-9, 15]"},
        {"--delta", NULL, CLI_DOUBLE, &delta, &have_delta, "D", "gaussian: delta in (0, 1) (default 1e-5)"},
        {"--clip", NULL, CLI_DOUBLE, &clip, &have_clip, "C",
         "input range [-C, C] (duchi and pm default to [-1, 1]; ldp-fl,\n"
         "laplace, gaussian and adaptive-harmony need one; spm and rr take none)"},
        {"--range", NULL, CLI_DOUBLES, range, &have_range, "LO HI", "input range [LO, HI] (or LO,HI), instead of --clip",
         .count = &n_range, .min_n = 2, .max_n = 2},
        {"--dim", NULL, CLI_INT, &dim, &have_dim, "D", "adaptive-harmony: the unit size d (default 10)"},
        {"--input", NULL, CLI_DOUBLES, inputs, NULL, "X ...",
         "inputs to compare (default: the range's ends, or -1 and 1)", .count = &n_in, .min_n = 1,
         .max_n = AUDIT_MAX_INPUTS},
        {"--test", NULL, CLI_STRING, &test_list, .value = "T,...",
         .help = "which tests to run: moments, epsilon, support (default all three)"},
        {"--samples", NULL, CLI_INT, &samples, .value = "N", .help = "outputs per input for moments and epsilon\n"
                                                                   "(default 10000000)",
         .lo = 0, .hi = AUDIT_MAX_SAMPLES},
        {"--support-samples", NULL, CLI_INT, &support_samples, .value = "N",
         .help = "outputs per ordered pair for support (default 100000)\n"
                 "(past a few seconds, the draws' progress and ETA go to stderr every 10 s)",
         .lo = 1, .hi = AUDIT_MAX_SAMPLES},
        {"--confirm", NULL, CLI_FLAG, &confirm,
         .help = "support: check the first impossible output against all 2^32 words\n"
                 "(one-word samplers; tens of seconds)"},
        {"--seed", NULL, CLI_INT, &seed, .value = "S", .help = "run seed (default 1)", .lo = 0,
         .hi = EXPERIMENT_SEED_MAX},
        {"--bins", NULL, CLI_INT, &bins, .value = "B", .help = "histogram bins for the epsilon bound (default 50)",
         .lo = 0, .hi = 400},
        {"--json", NULL, CLI_FLAG, &json, .help = "print the result as JSON"},
        {"--out", NULL, CLI_STRING, &out, .value = "FILE", .help = "also write the JSON result to FILE"},
    };
    const CliCommand c = {
        .cmd = CMD,
        .synopsis = "fedpriv audit --mechanism NAME [--variant V] [--sampler safe|float] --epsilon E\n"
                    "                     [--delta D] [--clip C | --range LO HI] [--dim D] [--input X ...]\n"
                    "                     [--test moments,epsilon,support] [--samples N] [--support-samples N]\n"
                    "                     [--confirm] [--seed S] [--bins B] [--json] [--out FILE]",
        .about = ABOUT,
        .after = AFTER,
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
    };
    int rc = cli_options_parse(&c, argc, argv);
    if (rc != CLI_PARSED)
        return rc;
    rc = CLI_EXIT_BADINPUT;
    if (test_list && !(tests = parse_tests(test_list))) {
        fp_print_line(stderr, "fedpriv %s: --test: expected moments, epsilon, support or a comma list of them", CMD);
        return rc;
    }
    cfg.samples = samples;
    cfg.seed = (uint64_t)seed;
    cfg.bins = (int)bins;
    scfg.samples = support_samples;
    scfg.confirm = confirm;
    // The mechanism as a config object, so that it is checked as a config's would be.
    cJSON *spec_json = cJSON_CreateObject();
    if (mechanism)
        cJSON_AddStringToObject(spec_json, "name", mechanism);
    if (variant)
        cJSON_AddStringToObject(spec_json, "variant", variant);
    if (sampler)
        cJSON_AddStringToObject(spec_json, "sampler", sampler);
    if (have_eps)
        cJSON_AddNumberToObject(spec_json, "epsilon", eps);
    if (have_delta)
        cJSON_AddNumberToObject(spec_json, "delta", delta);
    if (have_clip)
        cJSON_AddNumberToObject(spec_json, "clip", clip);
    if (have_dim)
        cJSON_AddNumberToObject(spec_json, "dim", (double)dim);
    if (have_range) {
        cJSON *r = cJSON_AddArrayToObject(spec_json, "range");
        cJSON_AddItemToArray(r, cJSON_CreateNumber(range[0]));
        cJSON_AddItemToArray(r, cJSON_CreateNumber(range[1]));
    }
    FpError out_err = {0};
    if (out && fp_check_writable_file(out, &out_err) != FP_OK) {
        rc = cli_report_error(CMD, &out_err);
        goto done;
    }
    if (!cJSON_GetObjectItem(spec_json, "name")) {
        fp_print_line(stderr, "fedpriv %s: --mechanism is required (fedpriv audit --help)", CMD);
        goto done;
    }
    FpError err = {0};
    MechSpec spec;
    Mech m;
    if (mech_spec_parse(spec_json, "mechanism", MECH_PARSE_AUDIT, NULL, &spec, &err) != FP_OK ||
        mech_init(&m, &spec, &err) != FP_OK) {
        rc = cli_report_error(CMD, &err);
        goto done;
    }
    cfg.inputs = n_in ? inputs : NULL;
    cfg.n_inputs = n_in;
    if (n_in == 1) {
        fp_print_line(stderr, "fedpriv %s: --input: give at least two inputs to compare", CMD);
        goto done;
    }
    cfg.progress = scfg.progress = stderr;
    scfg.seed = cfg.seed;
    scfg.inputs = cfg.inputs;
    scfg.n_inputs = cfg.n_inputs;
    AuditResult res;
    SupportResult sres;
    int pass = 1;
    cJSON *rj = NULL;
    if (tests & (TEST_MOMENTS | TEST_EPSILON)) {
        if (audit_run(&m, &cfg, &res, &err) != FP_OK) {
            rc = cli_report_error(CMD, &err);
            goto done;
        }
        rj = audit_result_json(&m, &res);
        pass &= !(tests & TEST_MOMENTS) || res.pass_moments;
        pass &= !(tests & TEST_EPSILON) || res.pass_epsilon;
    } else {
        rj = cJSON_CreateObject();
        audit_mechanism_json(&m, rj);
    }
    if (tests & TEST_SUPPORT) {
        if (audit_support(&m, &scfg, &sres, &err) != FP_OK) {
            cJSON_Delete(rj);
            rc = cli_report_error(CMD, &err);
            goto done;
        }
        cJSON_AddItemToObject(rj, "support", audit_support_json(&sres));
        pass &= sres.pass;
        // The audit's ε lower bound is the larger of the two tests': an impossible output
        // makes it infinite (what `fedpriv check` and the report read).
        if (isinf(sres.epsilon_lower_bound)) {
            cJSON *h = cJSON_DetachItemFromObject(rj, "epsilon_lower_bound");
            if (h)
                cJSON_AddItemToObject(rj, "epsilon_lower_bound_histogram", h);
            cJSON_AddStringToObject(rj, "epsilon_lower_bound", "inf");
            cJSON_AddStringToObject(rj, "epsilon_lower_bound_from", "support");
        }
    }
    cJSON *tl = cJSON_AddArrayToObject(rj, "tests");
    static const char *const names[] = {"moments", "epsilon", "support"};
    for (int t = 0; t < 3; t++)
        if (tests & (1 << t))
            cJSON_AddItemToArray(tl, cJSON_CreateString(names[t]));
    cJSON_DeleteItemFromObject(rj, "pass");
    cJSON_AddBoolToObject(rj, "pass", pass);
    if (out && jv_write_file_atomic(out, rj, &err) != FP_OK) {
        cJSON_Delete(rj);
        rc = cli_report_error(CMD, &err);
        goto done;
    }
    if (json) {
        char *s = jnum_print(rj, 1);
        printf("%s\n", s);
        free(s);
    } else {
        if (tests & (TEST_MOMENTS | TEST_EPSILON))
            print_text(&m, &res, tests);
        else
            print_header(&m);
        if (tests & TEST_SUPPORT)
            print_support(&sres);
    }
    cJSON_Delete(rj);
    rc = pass ? CLI_EXIT_OK : CLI_EXIT_FAIL;
done:
    cJSON_Delete(spec_json);
    return rc;
}
