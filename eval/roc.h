// ROC analysis of membership-inference scores: ROC points, AUC, TPR at a fixed FPR,
// best balanced accuracy, advantage, and confusion metrics at a threshold.
//
// Conventions (shared/spec/attacks-metrics-accounting.md):
// - A higher score means "more likely a member"; label 1 = member, 0 = non-member.
//   At threshold t an example is predicted a member iff score >= t.
// - One ROC point per distinct score, thresholds in decreasing order, after a first
//   point (0, 0) whose threshold is +INFINITY and predicts nobody a member: sklearn
//   roc_curve(drop_intermediate=False). Tied scores move the curve diagonally, so a
//   tie between a member and a non-member counts one half in the AUC.
// - AUC by the trapezoid rule over those points (equal to the Mann-Whitney U statistic
//   with ties counted 1/2, divided by n1 n0).
// - TPR at FPR t = the TPR of the last ROC point with FPR <= t (Privacy Meter / ART;
//   LiRA uses the strict FPR < t, LeakPro the largest TPR with FPR <= t, which on a
//   monotone curve is the same as ours). With few non-members the achievable FPRs are
//   multiples of 1/n0: TPR at 0.1% FPR needs n0 >= 1000 to be more than TPR at FPR 0.
// - Best balanced accuracy = max over points of 1 - (FPR + FNR)/2 (LiRA's "accuracy");
//   advantage = max over points of TPR - FPR (Yeom et al.). Both >= their values at the
//   trivial points (0,0) and (1,1): 0.5 and 0.
#ifndef FEDPRIV_EVAL_ROC_H
#define FEDPRIV_EVAL_ROC_H

#include "core/status.h"

typedef struct {
    int n_points;       // distinct scores + 1
    double *fpr;        // (n_points) non-decreasing, fpr[0] = 0, fpr[n_points-1] = 1
    double *tpr;        // (n_points) non-decreasing, tpr[0] = 0, tpr[n_points-1] = 1
    double *thresholds; // (n_points) decreasing; thresholds[0] = +INFINITY
    int n_pos, n_neg;   // members, non-members
    double auc;
} Roc;

// Builds the ROC of n scored examples. Needs n >= 2, at least one member and one
// non-member, labels in {0, 1} and no NaN score (±infinity is allowed) → else FP_EPARAM.
// *out is filled on success (free with roc_free) and zeroed on failure.
FpStatus roc_compute(const double *scores, const int *labels, int n, Roc *out, FpError *err);
void roc_free(Roc *roc);

// TPR of the last point with FPR <= max_fpr (0 when max_fpr < 0).
double roc_tpr_at_fpr(const Roc *roc, double max_fpr);

// max over points of 1 - (FPR + FNR)/2; *threshold (when not NULL) gets the threshold
// of the first point reaching it.
double roc_best_balanced_accuracy(const Roc *roc, double *threshold);

// max over points of TPR - FPR; *threshold as above.
double roc_advantage(const Roc *roc, double *threshold);

typedef struct {
    double threshold;
    long tp, fp, tn, fn;
    double accuracy;          // (tp + tn) / n
    double precision;         // tp / (tp + fp); 0 when nothing is predicted a member (sklearn's zero_division=0)
    double recall;            // tp / (tp + fn) = TPR
    double fpr;               // fp / (fp + tn)
    double balanced_accuracy; // (recall + 1 - fpr) / 2
} Confusion;

// Confusion metrics when predicting member iff score >= threshold. Same input checks
// as roc_compute; threshold may be ±INFINITY but not NaN.
FpStatus roc_confusion_at(const double *scores, const int *labels, int n, double threshold, Confusion *out,
                          FpError *err);

#endif
