// Membership-inference metrics (declared in attacks/target.h): the ROC of a score on a
// balanced eval set, AUC, TPR at low FPR (the last ROC point with FPR <= t), the best
// threshold, the confusion metrics of an attack's own decisions, and ROC points thinned
// for the report.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/target.h"

// ---------------------------------------------------------------------------------
// Metrics

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

typedef struct {
    double s;
    int32_t y;
} ScoredLabel;

static int by_score_desc(const void *a, const void *b) {
    double x = ((const ScoredLabel *)a)->s, y = ((const ScoredLabel *)b)->s;
    return x > y ? -1 : x < y ? 1 : 0;
}

double mia_best_threshold(const double *scores, const int32_t *labels, int n, double *best_accuracy) {
    ScoredLabel *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
    double P = 0, N = 0;
    for (int i = 0; i < n; i++) {
        P += labels[i] != 0;
        N += labels[i] == 0;
    }
    if (!v || n == 0 || P == 0 || N == 0) {
        free(v);
        *best_accuracy = 0.5;
        return INFINITY;
    }
    for (int i = 0; i < n; i++)
        v[i] = (ScoredLabel){scores[i], labels[i] != 0};
    qsort(v, (size_t)n, sizeof *v, by_score_desc);
    // Nothing predicted a member: accuracy ½, threshold above every score.
    double best = 0.5, tau = INFINITY, tp = 0, fp = 0;
    for (int i = 0; i < n;) {
        int j = i;
        for (; j < n && v[j].s == v[i].s; j++) // a tie group is taken whole
            v[j].y ? tp++ : fp++;
        double acc = 0.5 * (tp / P + 1 - fp / N);
        if (acc > best) {
            best = acc;
            tau = j < n ? 0.5 * (v[i].s + v[j].s) : v[i].s;
            if (!isfinite(tau)) // halfway to −inf
                tau = v[i].s;
        }
        i = j;
    }
    free(v);
    *best_accuracy = best;
    return tau;
}

// ROC points of "member iff score >= t" for every distinct score t, descending, after
// (0, 0): fpr/tpr get up to n + 1 values; returns their count.
static int roc_points(const double *scores, const int32_t *labels, int n, double *fpr, double *tpr) {
    ScoredLabel *v = malloc(sizeof *v * (size_t)n);
    if (!v)
        return -1;
    double P = 0, N = 0;
    for (int i = 0; i < n; i++) {
        v[i] = (ScoredLabel){scores[i], labels[i] != 0};
        P += v[i].y;
    }
    N = n - P;
    qsort(v, (size_t)n, sizeof *v, by_score_desc);
    int k = 0;
    double tp = 0, fp = 0;
    fpr[k] = tpr[k] = 0;
    k++;
    for (int i = 0; i < n;) {
        int j = i;
        for (; j < n && v[j].s == v[i].s; j++)
            v[j].y ? tp++ : fp++;
        fpr[k] = fp / N;
        tpr[k] = tp / P;
        k++;
        i = j;
    }
    free(v);
    return k;
}

// The last point with FPR <= t (TPR is non-decreasing along the curve, so this is the
// largest TPR with FPR <= t).
static double tpr_at(const double *fpr, const double *tpr, int k, double t) {
    double best = 0;
    for (int i = 0; i < k && fpr[i] <= t; i++)
        best = tpr[i];
    return best;
}

#define MIA_ROC_MAX_POINTS 200

FpStatus mia_report(cJSON *result, const double *scores, const int32_t *labels, int n, const unsigned char *decisions,
                    double decision_threshold, const char *rule, FpError *err) {
    int P = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(scores[i]) && !isinf(scores[i]))
            return fp_fail(err, FP_EDIVERGED, "membership inference: a score is NaN");
        P += labels[i] != 0;
    }
    if (P == 0 || P == n)
        return fp_fail(err, FP_EPARAM, "membership inference: the eval set needs members and non-members");
    double *fpr = malloc(sizeof(double) * ((size_t)n + 1)), *tpr = malloc(sizeof(double) * ((size_t)n + 1));
    unsigned char *dec = malloc((size_t)n);
    int k = fpr && tpr && dec ? roc_points(scores, labels, n, fpr, tpr) : -1;
    if (k < 0) {
        free(fpr);
        free(tpr);
        free(dec);
        return fp_fail(err, FP_ENOMEM, "out of memory for the ROC");
    }
    double auc = 0, best_bacc = 0.5, best_adv = 0;
    for (int i = 1; i < k; i++) {
        auc += (fpr[i] - fpr[i - 1]) * 0.5 * (tpr[i] + tpr[i - 1]);
        if (0.5 * (tpr[i] + 1 - fpr[i]) > best_bacc)
            best_bacc = 0.5 * (tpr[i] + 1 - fpr[i]);
        if (tpr[i] - fpr[i] > best_adv)
            best_adv = tpr[i] - fpr[i];
    }
    cJSON_AddNumberToObject(result, "auc", auc);
    cJSON *tf = cJSON_AddObjectToObject(result, "tpr_at_fpr");
    cJSON_AddNumberToObject(tf, "0.01", tpr_at(fpr, tpr, k, 0.01));
    cJSON_AddNumberToObject(tf, "0.001", tpr_at(fpr, tpr, k, 0.001));
    cJSON_AddStringToObject(result, "tpr_at_fpr_rule", "TPR of the last ROC point with FPR <= t (points by decreasing "
                                                       "threshold, member iff score >= threshold)");
    cJSON_AddNumberToObject(result, "best_balanced_accuracy", best_bacc);
    cJSON_AddNumberToObject(result, "best_advantage", best_adv);
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
    cJSON *roc = cJSON_AddObjectToObject(result, "roc");
    cJSON *af = cJSON_AddArrayToObject(roc, "fpr"), *at = cJSON_AddArrayToObject(roc, "tpr");
    unsigned char *keep = calloc((size_t)k, 1);
    if (!keep) {
        free(fpr);
        free(tpr);
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
    cJSON_AddNumberToObject(roc, "points_total", k);
    cJSON_AddBoolToObject(roc, "thinned", k > MIA_ROC_MAX_POINTS);
    free(fpr);
    free(tpr);
    free(dec);
    return FP_OK;
}
