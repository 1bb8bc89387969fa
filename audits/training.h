// Empirical audits of whole federated training runs: `fedpriv audit-training` and the
// matrix attack "audit-training". The privacy unit is the client (client-level DP and
// local DP of the uploads); an audit gives a lower bound ε̂ on the ε of the configured
// training run, to set beside the defense's claim.
//
// Canaries. A canary client uploads a crafted update instead of training: a Dirac of
// norm c (default: the defense's clip) in one trainable coordinate j, in the upload
// space of the defense (a delta, a summed gradient, or the global weights plus the
// Dirac). It goes through the defense's client side exactly as a trained upload does
// (fed_round_craft_upload, the one upload path of fl/). "In", it uploads +c·e_j; "out",
// it uploads the neighbour the defense's account is stated for: with Bernoulli client
// sampling (add/remove one client) the zero update, which the sum-and-noise defenses
// release exactly as if the client were absent; with fixed-size cohorts and for local
// DP (replace one client) −c·e_j. "neighbours" overrides the choice.
//
// Observers (what the auditor scores a canary from):
//   final-model  the last global model against the first: w_T[j] − w_0[j];
//   aggregates   every released aggregate (white box): the change of the global model
//                at j in each round;
//   uploads      the canary's own uploads as the server receives them.
// Two scores per canary: signed (the sum along +e_j, oriented so that "in" pushes it
// up: the likelihood-ratio statistic for Gaussian noise) and magnitude (the sum of
// |·| per round, which sees data-dependent supports: an exact zero where the noise
// should be). With canary clients seen in every aggregate of a sampled federation, or
// canary records seen in every upload of a defense that takes one local step a round,
// under a Gaussian defense, a third, likelihood (audits/training.c, round_likelihood):
// the likelihood ratio of the claimed mechanism summed over rounds. Where it applies it is
// the audit's score, fixed before any score is seen (the Neyman–Pearson test of the
// claim: picking among three on the selection half lost it to a sum by chance, at half
// the bound it gives); elsewhere the score, and everywhere how many guesses or which
// threshold, is chosen on data the bound does not use (below), so the reported bound
// needs no correction for it.
//
// One-run audit (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training
// run", arXiv 2305.08846). m canary clients (the last m client ids of the federation,
// coordinates distinct, public), each "in" with probability ½ (S_i from the RNG_AUDIT
// stream of the one seed), in one training run. The auditor guesses "in" for its k
// highest scores and "out" for its k lowest (r = 2k guesses, v correct). For an
// (ε, δ)-DP mechanism (§5, Theorem 5.2 of the arXiv version) the number W of correct
// guesses satisfies
//   P[W >= v] <= f(v) + 2mδ · max_{i=1..v} (f(v−i) − f(v)) / i,
//   f(v) = P[Binomial(r, e^ε/(1+e^ε)) >= v],
// and ε̂ is the largest ε for which this p-value stays below 1 − confidence (found by
// doubling then 60 bisection steps, never above the exact root). The canaries of even
// index choose the score and k (the best bound over k in {m/100, m/50, m/20, m/10, m/5,
// m/4 of them}); the bound is computed from the odd-index canaries alone (m/2 of
// them): given the even bits, the run is still (ε, δ)-DP in each odd bit, which are
// independent fair coins. Beside it, the f-DP bound of Mahloujifar, Melis and
// Chaudhuri (2024) on the same guesses (below); the larger ε̂ is reported.
//
// Multi-run audit (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis
// 2023, "Tight auditing of differentially private machine learning", the white-box
// gradient canary). R training runs, each from its own seed (RNG_AUDIT, run), alternately
// with the canary client (the last client id) "in" and "out"; the canary's coordinate
// is public and fixed. The first half of the runs chooses the test: a score, a
// threshold τ and a side (in when score >= τ, or <= τ), maximising the bound on those
// runs. On the second half, with one-sided Clopper-Pearson bounds at level (1−conf)/4
// each (Jagielski, Ullman, Oprea 2020):
//   ε̂ = max over (a, b) in {(in, out), (out, in)} of ln((p_lo(a) − δ) / p_hi(b)),
// p(·) the probability that the test fires; if the training run is (ε, δ)-DP for this
// pair of neighbours, ε̂ <= ε with probability >= confidence (a union bound over the
// four one-sided bounds the two directions use; at (1−conf)/2 each, as before this
// release, it held at 1 − 2(1−conf) only). Runs differ in data partition, initialisation and noise:
// each run is a neighbouring pair's draw, and a mixture of (ε, δ)-indistinguishable
// pairs is (ε, δ)-indistinguishable.
//
// What ε̂ is compared with (epsilon_claimed): the defense's account after the planned
// rounds for the observer (aggregates, final model: the sound bound; uploads: the upload
// observer's bound when the defense states one, else the sound bound), proven if it is,
// else its conditional figure, else the paper's nominal total; or "epsilon_claimed" of
// the config (e.g. a control that declares a larger ε than its noise gives). pass:
// ε̂ <= epsilon_claimed (an audit with nothing claimed passes: ∞).
#ifndef FEDPRIV_AUDITS_TRAINING_H
#define FEDPRIV_AUDITS_TRAINING_H

#include <cjson/cJSON.h>

#include "core/status.h"
#include "fl/experiment.h"

typedef enum { TRAINING_AUDIT_ONE_RUN = 0, TRAINING_AUDIT_MULTI_RUN = 1 } TrainingAuditMethod;
typedef enum { AUDIT_OBSERVER_FINAL_MODEL = 0, AUDIT_OBSERVER_AGGREGATES = 1, AUDIT_OBSERVER_UPLOADS = 2 } AuditObserver;
typedef enum { AUDIT_NEIGHBOURS_DEFAULT = 0, AUDIT_NEIGHBOURS_REMOVE = 1, AUDIT_NEIGHBOURS_REPLACE = 2 } AuditNeighbours;

// The largest "confidence": 1 - 1e-6 (the verdict prints it as 99.9999%).
#define TRAINING_AUDIT_CONFIDENCE_MAX 0.999999

typedef struct TrainingAuditConfig {
    TrainingAuditMethod method;   // "method": "one-run" (default) | "multi-run"
    AuditObserver observer;       // "observer": "final-model" (default) | "aggregates" | "uploads"
    AuditNeighbours neighbours;   // "neighbours": "remove" | "replace" (default: from the sampling)
    int canaries;                 // one-run: m (default 200, at least 20, at most federation.clients)
    int runs;                     // multi-run: R (default 200, even, at least 8)
    double canary_norm;           // "canary_norm" in (0, 1e30]; 0 when absent: the defense's "clip", else 1
    double confidence;            // "confidence" in [0.5, TRAINING_AUDIT_CONFIDENCE_MAX] (0.95)
    double delta;                 // "delta" in [0, 1); NAN when absent: the defense's δ
    double epsilon_claimed;       // "epsilon_claimed"; NAN: the defense's account (see above)
    const char *state_dir;        // not JSON, set by the caller: a directory where the multi-run audit keeps
                                  // its finished runs (multi-run.txt) and resumes from them, and where both
                                  // write the scores they bound (scores.csv, for audit-scores); NULL: none
} TrainingAuditConfig;

// Parses the audit's keys of an attack object ("name" is allowed and ignored); unknown
// keys and bad values fail naming the JSON path.
FpStatus training_audit_parse(const cJSON *attack_json, const char *path, TrainingAuditConfig *cfg, FpError *err);

// Runs the audit over the experiment's federation (its model is cloned, the experiment
// is left as it was) and fills result: "epsilon_lower_bound", "confidence", "observer",
// "method", "epsilon_claimed" (null = ∞) with its "claim_source", "epsilon_sound" (the
// proven bound, null = none), "epsilon_conditional", "guarantee", "delta", "pass", the
// chosen test and its counts, "seconds". FP_EPARAM when the federation cannot hold the
// canaries.
FpStatus training_audit_run(Experiment *ex, const TrainingAuditConfig *cfg, int quiet, cJSON *result, FpError *err);

// The one-run bound's p-value (the displayed inequality above): m canaries, r guesses,
// v correct, for an (eps, delta)-DP mechanism. And ε̂: the largest ε whose p-value is
// below p (0 when none is, at most 100).
double training_audit_one_run_p_value(int m, int r, int v, double eps, double delta);
double training_audit_one_run_epsilon(int m, int r, int v, double delta, double p);

// The bounds from scores alone: what training_audit_run computes once it has trained,
// and what `fedpriv audit-scores` computes from a file of scores a team made with any
// framework. Row i is canary i (one-run: the even rows choose the score and k, the odd
// rows give the bound) or run i (multi-run: the first half chooses the test, the second
// half gives the bound); in[i] is 1 when canary i was included (run i had the canary).
// Every row holds n_scores scores (the auditor picks the best on the selection rows;
// audit-training's are "signed" and "magnitude"). Each fills res with the keys
// training_audit_run documents for its method (epsilon_lower_bound, epsilon_ceiling,
// the counts and the chosen score or test). FP_EPARAM for a bit other than 0/1, a NaN
// score, or too few rows (one-run 2, multi-run 4).
#define TRAINING_AUDIT_MAX_SCORES 8
typedef struct TrainingAuditScores {
    int n;
    int n_scores;
    const char *names[TRAINING_AUDIT_MAX_SCORES];
    const double *score[TRAINING_AUDIT_MAX_SCORES]; // score[k][i]: score k of row i
    const int *in;
} TrainingAuditScores;
FpStatus training_audit_one_run_scores(const TrainingAuditScores *scores, double delta, double confidence, cJSON *res,
                                       FpError *err);
FpStatus training_audit_multi_run_scores(const TrainingAuditScores *scores, double delta, double confidence,
                                         cJSON *res, FpError *err);

// The f-DP one-run bound (Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-differential
// privacy in one run", arXiv 2410.22235, Algorithm 3 with abstentions, two classes), for
// the trade-off curve f of (eps, delta)-DP. With b⁻¹ the inverse of x ↦ 1 − f(x) and
// t = p·r/m, it runs h_v = t(r − v)/r, r_v = t·v/r and, for i = v−1 down to 0,
//   h_i = max(h_{i+1}, b⁻¹(r_{i+1})),  r_i = r_{i+1} + i/(r − i) · (h_i − h_{i+1});
// when r_0 + h_0 > r/m, an f-DP mechanism gives v or more correct guesses with
// probability below p, and the curve is rejected (returns 1). ε̂ is the largest ε
// whose curve is rejected at p (0 when none is, at most 100; doubling, then 60
// bisection steps, never above the root). Tighter than SNJ's where δ > 0 (its 2mδ term).
int training_audit_fdp_rejects(int m, int r, int v, double eps, double delta, double p);
double training_audit_fdp_epsilon(int m, int r, int v, double delta, double p);

// The same one-run procedure on a row-major array (training_audit_one_run_scores on its
// columns): m canaries, scores (m, n_scores) row-major, in[c] != 0
// when canary c was in. The even canaries choose the score and k (above), the odd ones
// are bounded; ε̂ is the larger of SNJ's and the f-DP bound on the same guesses, which
// still holds at the stated confidence (both bound one tail of one count: their
// minimum does too). ceiling: every guess right at the best k. FP_EPARAM when m < 2 or
// n_scores is outside [1, TRAINING_AUDIT_MAX_SCORES].
typedef struct TrainingAuditOneRunBound {
    double epsilon;               // max(epsilon_snj, epsilon_fdp)
    double epsilon_snj, epsilon_fdp;
    double ceiling;
    int score, guesses, correct, scored;   // the chosen score, r, v, the odd canaries
    int selection_canaries, selection_guesses, selection_correct;
    double selection_epsilon;
} TrainingAuditOneRunBound;
FpStatus training_audit_one_run_bound(const double *scores, int n_scores, const int *in, int m, double delta,
                                     double confidence, TrainingAuditOneRunBound *out, FpError *err);

// The multi-run bound from counts: the test fired in fire_in of n_in "in" runs and
// fire_out of n_out "out" runs; one-sided Clopper-Pearson at alpha/4 each (four bounds
// enter the maximum over the two directions: a union bound of alpha).
double training_audit_counts_epsilon(long long fire_in, long long n_in, long long fire_out, long long n_out,
                                     double delta, double alpha);

#endif
