// ROC, AUC, TPR at FPR, balanced accuracy, advantage and confusion metrics for
// membership-inference scores. Conventions in roc.h.
//
// roc_compute sorts the examples by decreasing score and sweeps them once, emitting
// one point after each run of equal scores (so ties never split). The AUC is summed
// from the integer counts, sum over points of (fp_i - fp_{i-1}) (tp_i + tp_{i-1}) / 2,
// divided by n1 n0 at the end: exact up to 2^53 examples, and the trapezoid of the
// points below.
#include "eval/roc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double score;
    int label;
} Scored;

// Decreasing score; the order within ties does not matter (they form one point).
static int by_score_desc(const void *pa, const void *pb) {
    double a = ((const Scored *)pa)->score, b = ((const Scored *)pb)->score;
    return (a < b) - (a > b);
}

static FpStatus check_inputs(const char *fn, const double *scores, const int *labels, int n, int *n_pos,
                             FpError *err) {
    if (!scores || !labels || n < 2)
        return fp_fail(err, FP_EPARAM, "%s: needs at least 2 scored examples, got %d", fn, n);
    int pos = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(scores[i]))
            return fp_fail(err, FP_EPARAM, "%s: score %d is NaN", fn, i);
        if (labels[i] != 0 && labels[i] != 1)
            return fp_fail(err, FP_EPARAM, "%s: label %d is %d, not 0 (non-member) or 1 (member)", fn, i, labels[i]);
        pos += labels[i];
    }
    if (pos == 0 || pos == n)
        return fp_fail(err, FP_EPARAM, "%s: needs both members and non-members (got %d members of %d)", fn, pos, n);
    *n_pos = pos;
    return FP_OK;
}

void roc_free(Roc *roc) {
    if (!roc)
        return;
    free(roc->fpr);
    free(roc->tpr);
    free(roc->thresholds);
    memset(roc, 0, sizeof *roc);
}

FpStatus roc_compute(const double *scores, const int *labels, int n, Roc *out, FpError *err) {
    memset(out, 0, sizeof *out);
    int n_pos;
    FP_TRY(check_inputs("roc", scores, labels, n, &n_pos, err));
    const int n_neg = n - n_pos;
    Scored *s = fp_malloc((size_t)n * sizeof *s, err);
    if (!s)
        return FP_ENOMEM;
    for (int i = 0; i < n; i++)
        s[i] = (Scored){scores[i], labels[i]};
    qsort(s, (size_t)n, sizeof *s, by_score_desc);

    Roc r = {.n_pos = n_pos, .n_neg = n_neg};
    r.fpr = fp_malloc(((size_t)n + 1) * sizeof *r.fpr, err);
    r.tpr = r.fpr ? fp_malloc(((size_t)n + 1) * sizeof *r.tpr, err) : NULL;
    r.thresholds = r.tpr ? fp_malloc(((size_t)n + 1) * sizeof *r.thresholds, err) : NULL;
    if (!r.thresholds) {
        free(s);
        roc_free(&r);
        return FP_ENOMEM;
    }
    r.fpr[0] = 0, r.tpr[0] = 0, r.thresholds[0] = INFINITY;
    int m = 1;
    long tp = 0, fp = 0, prev_tp = 0, prev_fp = 0;
    double area2 = 0; // twice the area, in units of one member x one non-member
    for (int i = 0; i < n;) {
        double t = s[i].score;
        for (; i < n && s[i].score == t; i++) {
            tp += s[i].label;
            fp += 1 - s[i].label;
        }
        r.fpr[m] = (double)fp / n_neg;
        r.tpr[m] = (double)tp / n_pos;
        r.thresholds[m] = t;
        area2 += (double)(fp - prev_fp) * (double)(tp + prev_tp);
        prev_tp = tp, prev_fp = fp;
        m++;
    }
    free(s);
    r.n_points = m;
    r.auc = area2 / (2.0 * (double)n_pos * (double)n_neg);
    *out = r;
    return FP_OK;
}

double roc_tpr_at_fpr(const Roc *roc, double max_fpr) {
    // FPR is non-decreasing along the points, so the last point with FPR <= t is the
    // end of a prefix.
    double tpr = 0;
    for (int i = 0; i < roc->n_points && roc->fpr[i] <= max_fpr; i++)
        tpr = roc->tpr[i];
    return tpr;
}

double roc_best_balanced_accuracy(const Roc *roc, double *threshold) {
    double best = -1, best_t = INFINITY;
    for (int i = 0; i < roc->n_points; i++) {
        double acc = 1.0 - (roc->fpr[i] + (1.0 - roc->tpr[i])) / 2.0;
        if (acc > best)
            best = acc, best_t = roc->thresholds[i];
    }
    if (threshold)
        *threshold = best_t;
    return best;
}

double roc_advantage(const Roc *roc, double *threshold) {
    double best = -2, best_t = INFINITY;
    for (int i = 0; i < roc->n_points; i++) {
        double adv = roc->tpr[i] - roc->fpr[i];
        if (adv > best)
            best = adv, best_t = roc->thresholds[i];
    }
    if (threshold)
        *threshold = best_t;
    return best;
}

FpStatus roc_confusion_at(const double *scores, const int *labels, int n, double threshold, Confusion *out,
                          FpError *err) {
    memset(out, 0, sizeof *out);
    int n_pos;
    FP_TRY(check_inputs("confusion", scores, labels, n, &n_pos, err));
    if (isnan(threshold))
        return fp_fail(err, FP_EPARAM, "confusion: threshold is NaN");
    Confusion c = {.threshold = threshold};
    for (int i = 0; i < n; i++) {
        int member = scores[i] >= threshold;
        if (labels[i] && member)
            c.tp++;
        else if (labels[i])
            c.fn++;
        else if (member)
            c.fp++;
        else
            c.tn++;
    }
    c.accuracy = (double)(c.tp + c.tn) / n;
    c.precision = c.tp + c.fp ? (double)c.tp / (double)(c.tp + c.fp) : 0.0;
    c.recall = (double)c.tp / (double)(c.tp + c.fn);
    c.fpr = (double)c.fp / (double)(c.fp + c.tn);
    c.balanced_accuracy = (c.recall + 1.0 - c.fpr) / 2.0;
    *out = c;
    return FP_OK;
}
