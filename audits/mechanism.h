// Empirical audit of a scalar local-DP mechanism (defenses/dp/mech.h): `fedpriv audit`.
//
// For each input x it draws N outputs (RNG_AUDIT stream (seed, input index, 0)) and
// compares the sample mean and variance with the closed forms: z-scores against the
// standard errors sqrt(Var/N) and sqrt((μ4 - Var²)/N), μ4 from the mechanism's output
// law. It reports the bias factor mean/x per input and pooled over the inputs (the
// least-squares slope of the means on x).
//
// Lower bound on ε (Jagielski et al. 2020 style, from output histograms). For every
// ordered pair of inputs (x, x') and every output set S in a fixed family, with one-sided
// Clopper-Pearson bounds p_lo(S) <= P[M(x) ∈ S] and q_hi(S) >= P[M(x') ∈ S]:
//   ε_LB = max over pairs and S of ln((p_lo - δ) / q_hi).
// If M is (ε, δ)-DP, P[M(x) ∈ S] <= e^ε P[M(x') ∈ S] + δ for every S, so ε_LB <= ε
// whenever all the bounds hold. The family: the contiguous unions of B bins (B(B+1)/2
// sets) whose edges are quantiles of a pilot sample from independent streams (seed,
// input, 1), fixed before the main sample is drawn. Multiple comparisons: Bonferroni over
// all 2·pairs·sets one-sided bounds, each at α/(2·pairs·sets), so all of them hold at once
// with probability >= 1 - α (α = 0.05): ε_LB is a 95% lower confidence bound, valid
// however the maximising set was picked. A mechanism whose ε_LB exceeds its claimed ε
// fails the audit.
#ifndef FEDPRIV_AUDITS_MECHANISM_H
#define FEDPRIV_AUDITS_MECHANISM_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "core/progress.h"
#include "core/status.h"
#include "defenses/dp/mech.h"

#define AUDIT_MAX_INPUTS 16
// The sizes' limits (also the CLI's) and the progress rule: an audit's work grows with
// its sample counts without bound (10^12 draws is hours), so a run reports its draws on
// `progress` at most every AUDIT_PROGRESS_SECONDS, the first AUDIT_PROGRESS_FIRST_SECONDS
// in (early enough that a mistyped size shows its ETA at once).
#define AUDIT_MAX_SAMPLES 1000000000000LL
#define AUDIT_PROGRESS_SECONDS 10.0
#define AUDIT_PROGRESS_FIRST_SECONDS 2.0

// Draws done of the total, with the elapsed time and the ETA (core/progress.h), labelled
// "audit WHAT" for the test drawing ("moments and epsilon", "support").
FpProgress audit_progress_start(FILE *f, const char *what, long long total);

typedef struct AuditConfig {
    long long samples;      // N per input (default 10^7)
    uint64_t seed;          // default 1
    int bins;               // B (default 50, at most 400)
    double alpha;           // family-wise confidence 1 - alpha (default 0.05)
    long long pilot;        // pilot draws per input for the bin edges (default min(N, 2·10^5))
    const double *inputs;   // NULL: the mechanism's default pair (mech_default_inputs)
    int n_inputs;
    FILE *progress;         // the draws' progress (audit_progress_start); NULL: silent
} AuditConfig;

// Defaults for everything but the inputs.
AuditConfig audit_config_default(void);

typedef struct AuditInput {
    double input;           // as given
    double input_used;      // as the mechanism sees it: rounded to float, then clipped
    double mean, mean_theory, z_mean;
    double bias_factor, bias_factor_theory;   // mean / input (NAN at input 0)
    double variance, variance_theory, z_variance;
    double variance_claimed;                  // the paper's claim where it differs (spm paper), else NAN
    double min, max;
} AuditInput;

typedef struct AuditResult {
    int n_inputs;
    AuditInput in[AUDIT_MAX_INPUTS];
    long long samples;
    uint64_t seed;
    int bins;               // bins actually used (pilot quantiles merged where they tie)
    double alpha, alpha_per_bound;
    long long sets_tested;  // pairs × sets
    double bias_factor, bias_factor_se, bias_factor_theory;   // pooled over inputs != 0 (NAN if none)
    double epsilon_claimed, delta;
    double epsilon_lower_bound;   // -INFINITY when no set gives a positive bound
    // The witness: inputs in[lb_from] (p side) and in[lb_to] (q side), set [set_lo, set_hi).
    int lb_from, lb_to;
    double set_lo, set_hi;
    long long count_from, count_to;
    double p_lower, q_upper;
    int pass_epsilon;       // epsilon_lower_bound <= epsilon_claimed
    int pass_moments;       // every |z| <= 6
    double seconds;
} AuditResult;

// FP_EPARAM for a bad config (samples < 100, bins outside [2, 400], more than
// AUDIT_MAX_INPUTS inputs, fewer than 2 inputs, a non-finite input).
FpStatus audit_run(const Mech *m, const AuditConfig *cfg, AuditResult *res, FpError *err);

// The inputs an audit compares: `given` (n_given of them), or the mechanism's default
// pair when none are given; checked (2 to AUDIT_MAX_INPUTS finite numbers). out holds
// AUDIT_MAX_INPUTS; *n_out is their number. Shared by every audit of a mechanism.
FpStatus audit_inputs(const Mech *m, const double *given, int n_given, double *out, int *n_out, FpError *err);
// The result as JSON (NAN and infinities as null), with the mechanism's parameters.
cJSON *audit_result_json(const Mech *m, const AuditResult *r);
// The mechanism's parameters (name, variant, sampler, epsilon, delta, range, ...) into o.
void audit_mechanism_json(const Mech *m, cJSON *o);

// One-sided Clopper-Pearson bounds for k successes in n trials at level alpha:
// P[p < lower] <= alpha and P[p > upper] <= alpha. lower(0) = 0, upper(n) = 1.
double audit_cp_lower(long long k, long long n, double alpha);
double audit_cp_upper(long long k, long long n, double alpha);
// The regularised incomplete beta function I_x(a, b) (a, b > 0).
double audit_beta_inc(double a, double b, double x);

#endif
