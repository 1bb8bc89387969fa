// Membership-inference metrics (declared in attacks/target.h) on top of eval/roc.h: the
// ROC of a score on a balanced eval set, AUC, TPR at low FPR (the last ROC point with
// FPR <= t), the best threshold, the confusion metrics of an attack's own decisions
// (which need not be a threshold on the reported score), and ROC points thinned for
// the report.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/target.h"
#include "eval/roc.h"

cJSON *mia_decision_json(const unsigned char *dec, const int32_t *labels, int n) {
    double tp = 0, fp = 0, tn = 0, fn = 0;
    for (int i = 0; i < n; i++) {
        if (labels[i])
            dec[i] ? tp++ : fn++;
        else
            dec[i] ? fp++ : tn++;
    }
    double tpr = tp + fn > 0 ? tp / (tp + fn) : 0, fpr = fp + tn > 0 ? fp / (fp + tn) : 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "balanced_accuracy", 0.5 * (tpr + 1 - fpr));
    cJSON_AddNumberToObject(o, "precision", tp + fp > 0 ? tp / (tp + fp) : 0);
    cJSON_AddNumberToObject(o, "recall", tpr);
    cJSON_AddNumberToObject(o, "advantage", tpr - fpr);
    cJSON_AddNumberToObject(o, "tpr", tpr);
    cJSON_AddNumberToObject(o, "fpr", fpr);
    cJSON_AddNumberToObject(o, "tp", tp);
    cJSON_AddNumberToObject(o, "fp", fp);
    cJSON_AddNumberToObject(o, "tn", tn);
    cJSON_AddNumberToObject(o, "fn", fn);
    return o;
}

double mia_best_threshold(const double *scores, const int32_t *labels, int n, double *best_accuracy) {
    Roc roc;
    if (roc_compute(scores, labels, n, &roc, NULL) != FP_OK) { // no members or no non-members
        *best_accuracy = 0.5;
        return INFINITY;
    }
    double t;
    *best_accuracy = roc_best_balanced_accuracy(&roc, &t);
    // Halfway between the chosen score and the next lower one: the same rule on the
    // shadow data, and on new data it splits the gap evenly instead of at its edge.
    for (int i = 0; i + 1 < roc.n_points; i++)
        if (roc.thresholds[i] == t && isfinite(t) && isfinite(roc.thresholds[i + 1])) {
            t = 0.5 * (t + roc.thresholds[i + 1]);
            break;
        }
    roc_free(&roc);
    return t;
}

#define MIA_ROC_MAX_POINTS 200

FpStatus mia_report(cJSON *result, const double *scores, const int32_t *labels, int n, const unsigned char *decisions,
                    double decision_threshold, const char *rule, FpError *err) {
    for (int i = 0; i < n; i++) // a NaN score is a failed model, not bad input
        if (isnan(scores[i]))
            return fp_fail(err, FP_EDIVERGED, "membership inference: score %d is NaN (the model diverged)", i);
    Roc roc;
    FpStatus st = roc_compute(scores, labels, n, &roc, err);
    if (st != FP_OK)
        return st;
    unsigned char *dec = malloc((size_t)n);
    if (!dec) {
        roc_free(&roc);
        return fp_fail(err, FP_ENOMEM, "out of memory for the ROC");
    }
    int k = roc.n_points, P = roc.n_pos;
    const double *fpr = roc.fpr, *tpr = roc.tpr;
    cJSON_AddNumberToObject(result, "auc", roc.auc);
    cJSON *tf = cJSON_AddObjectToObject(result, "tpr_at_fpr");
    cJSON_AddNumberToObject(tf, "0.01", roc_tpr_at_fpr(&roc, 0.01));
    cJSON_AddNumberToObject(tf, "0.001", roc_tpr_at_fpr(&roc, 0.001));
    cJSON_AddNumberToObject(tf, "0", roc_tpr_at_fpr(&roc, 0.0)); // members found before any non-member
    cJSON_AddStringToObject(result, "tpr_at_fpr_rule", "TPR of the last ROC point with FPR <= t (points by decreasing "
                                                       "threshold, member iff score >= threshold)");
    cJSON_AddNumberToObject(result, "best_balanced_accuracy", roc_best_balanced_accuracy(&roc, NULL));
    cJSON_AddNumberToObject(result, "best_advantage", roc_advantage(&roc, NULL));
    for (int i = 0; i < n; i++)
        dec[i] = decisions ? decisions[i] : scores[i] >= decision_threshold;
    cJSON *d = mia_decision_json(dec, labels, n);
    static const char *const copy[] = {"balanced_accuracy", "precision", "recall", "advantage", "tpr", "fpr"};
    for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++)
        cJSON_AddNumberToObject(result, copy[i], cJSON_GetObjectItem(d, copy[i])->valuedouble);
    cJSON_Delete(d);
    cJSON_AddStringToObject(result, "decision_rule", rule);
    cJSON_AddStringToObject(result, "balanced_accuracy_note", "eval sets are balanced (members = non-members), so "
                                                              "balanced accuracy = accuracy; chance = 0.5");
    cJSON_AddNumberToObject(result, "members", P);
    cJSON_AddNumberToObject(result, "non_members", n - P);
    // ROC points for plotting: all when few, else the ends plus, for a log-spaced grid g
    // (the low-FPR region, from the smallest non-zero FPR, 1/non-members, to 1) and a
    // linear grid, the last point with FPR <= g.
    cJSON *rj = cJSON_AddObjectToObject(result, "roc");
    cJSON *af = cJSON_AddArrayToObject(rj, "fpr"), *at = cJSON_AddArrayToObject(rj, "tpr");
    unsigned char *keep = calloc((size_t)k, 1);
    if (!keep) {
        roc_free(&roc);
        free(dec);
        return fp_fail(err, FP_ENOMEM, "out of memory for the ROC");
    }
    if (k <= MIA_ROC_MAX_POINTS)
        memset(keep, 1, (size_t)k);
    else {
        enum { GRID = (MIA_ROC_MAX_POINTS - 2) / 2 };
        double lo = 1.0 / (n - P);
        keep[0] = keep[k - 1] = 1;
        for (int g = 0; g < 2 * GRID; g++) {
            double target = g < GRID ? lo * pow(1.0 / lo, g / (GRID - 1.0)) : (g - GRID + 1) / (GRID + 1.0);
            int a = 0, b = k - 1; // last index with fpr <= target (fpr[0] = 0 <= target)
            while (a < b) {
                int mid = (a + b + 1) / 2;
                if (fpr[mid] <= target)
                    a = mid;
                else
                    b = mid - 1;
            }
            keep[a] = 1;
        }
    }
    for (int i = 0; i < k; i++)
        if (keep[i]) {
            cJSON_AddItemToArray(af, cJSON_CreateNumber(fpr[i]));
            cJSON_AddItemToArray(at, cJSON_CreateNumber(tpr[i]));
        }
    free(keep);
    cJSON_AddNumberToObject(rj, "points_total", k);
    cJSON_AddBoolToObject(rj, "thinned", k > MIA_ROC_MAX_POINTS);
    roc_free(&roc);
    free(dec);
    return FP_OK;
}
