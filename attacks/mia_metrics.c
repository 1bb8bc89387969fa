// Membership-inference metrics (declared in attacks/target.h) on top of eval/roc.h: the
// ROC of a score on a balanced eval set, AUC, TPR at low FPR (the last ROC point with
// FPR <= t), the best threshold, the confusion metrics of an attack's own decisions
// (which need not be a threshold on the reported score), and ROC points thinned for
// the report; the intervals of AUC and of TPR at low FPR (eval/binomial.h); whether the
// attack applies, and the one-line headline.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/mia.h"
#include "core/status.h"
#include "eval/binomial.h"
#include "eval/roc.h"

// The level of every interval the membership attacks report.
#define MIA_INTERVAL_ALPHA 0.05

static cJSON *interval_json(double lo, double hi) {
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(hi));
    return a;
}

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
    double lo, hi;
    binom_auc_interval(roc.auc, roc.n_pos, roc.n_neg, MIA_INTERVAL_ALPHA, &lo, &hi);
    cJSON_AddItemToObject(result, "auc_interval", interval_json(lo, hi));
    cJSON *tf = cJSON_AddObjectToObject(result, "tpr_at_fpr");
    cJSON *ti = cJSON_AddObjectToObject(result, "tpr_at_fpr_interval");
    static const struct { const char *key; double fpr; } low_fpr[] = {{"0.01", 0.01}, {"0.001", 0.001}, {"0", 0.0}};
    for (size_t i = 0; i < sizeof low_fpr / sizeof low_fpr[0]; i++) { // "0": members found before any non-member
        double v = roc_tpr_at_fpr(&roc, low_fpr[i].fpr);
        cJSON_AddNumberToObject(tf, low_fpr[i].key, v);
        binom_cp_interval(llround(v * roc.n_pos), roc.n_pos, MIA_INTERVAL_ALPHA, &lo, &hi);
        cJSON_AddItemToObject(ti, low_fpr[i].key, interval_json(lo, hi));
    }
    cJSON_AddStringToObject(result, "interval_rule", "95%: AUC by Hanley & McNeil (1982); TPR at FPR t by "
                                                     "Clopper-Pearson over the members, at that ROC point's threshold "
                                                     "(with n non-members, FPRs below 1/n are FPR 0)");
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
    cJSON_AddStringToObject(result, "balanced_accuracy_note",
                            2 * P == n ? "eval sets are balanced (members = non-members), so balanced accuracy = "
                                         "accuracy; chance = 0.5"
                                       : "eval sets are unbalanced: balanced accuracy = (TPR + TNR) / 2; chance = 0.5");
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
        double lo_fpr = 1.0 / (n - P);
        keep[0] = keep[k - 1] = 1;
        for (int g = 0; g < 2 * GRID; g++) {
            double target = g < GRID ? lo_fpr * pow(1.0 / lo_fpr, g / (GRID - 1.0)) : (g - GRID + 1) / (GRID + 1.0);
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

cJSON *mia_run_object(cJSON *result) {
    cJSON *r = cJSON_GetObjectItemCaseSensitive(result, "run");
    return r ? r : cJSON_AddObjectToObject(result, "run");
}

// ---------------------------------------------------------------------------------
// Applicability and the headline

// The interval [lo, hi] at result[key] (an array of two numbers), or at result[key][sub].
static int read_interval(const cJSON *result, const char *key, const char *sub, double *lo, double *hi) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(result, key);
    if (sub)
        a = cJSON_GetObjectItemCaseSensitive(a, sub);
    const cJSON *l = cJSON_GetArrayItem(a, 0), *h = cJSON_GetArrayItem(a, 1);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 || !cJSON_IsNumber(l) || !cJSON_IsNumber(h))
        return 0;
    *lo = l->valuedouble;
    *hi = h->valuedouble;
    return 1;
}

static double read_number(const cJSON *o, const char *key, const char *sub) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (sub)
        v = cJSON_GetObjectItemCaseSensitive(v, sub);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void mia_conclude(const AttackEnv *env, const char *name, cJSON *result) {
    const cJSON *ref = NULL;
    char source[160], reason[256] = "";
    if (!env->ex->defense || strcmp(env->ex->defense->name, "none") == 0) {
        snprintf(source, sizeof source, "this run (no defense)");
        ref = result;
    } else if (env->reference_given) {
        snprintf(source, sizeof source, "%s", env->reference_source ? env->reference_source : "the reference");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(env->reference, "status");
        if (!env->reference)
            snprintf(reason, sizeof reason, "%s has no result for this attack", source);
        else if (!cJSON_IsString(st) || strcmp(st->valuestring, "done") != 0)
            snprintf(reason, sizeof reason, "the attack is %s in %s", cJSON_IsString(st) ? st->valuestring : "missing",
                     source);
        else
            ref = cJSON_GetObjectItemCaseSensitive(env->reference, "result");
    } else {
        snprintf(source, sizeof source, "none");
        snprintf(reason, sizeof reason, "no run of this attack without the defense to compare with (run it with "
                                        "defense none, or in a matrix with a \"none\" cell)");
    }
    double alo = 0, ahi = 0, tlo = 0, thi = 0;
    int decided = ref && read_interval(ref, "auc_interval", NULL, &alo, &ahi) &&
                  read_interval(ref, "tpr_at_fpr_interval", "0.01", &tlo, &thi);
    if (ref && !decided)
        snprintf(reason, sizeof reason, "the result in %s states no AUC and TPR intervals", source);
    int chance = decided && alo <= 0.5 && 0.5 <= ahi && tlo <= 0.01 && 0.01 <= thi;
    if (decided)
        cJSON_AddBoolToObject(result, "applicable", !chance);
    else
        cJSON_AddNullToObject(result, "applicable");
    cJSON *j = cJSON_AddObjectToObject(result, "applicability");
    cJSON_AddStringToObject(j, "rule", "applicable unless the same attack against the federation without any "
                                       "defense is at chance: its AUC's 95% interval holds 0.5 and its TPR-at-1%-FPR "
                                       "interval holds 0.01");
    cJSON_AddStringToObject(j, "reference", source);
    if (!decided)
        cJSON_AddStringToObject(j, "reason", reason);
    else {
        cJSON_AddNumberToObject(j, "reference_auc", read_number(ref, "auc", NULL));
        cJSON_AddItemToObject(j, "reference_auc_interval", interval_json(alo, ahi));
        cJSON_AddNumberToObject(j, "reference_tpr_at_1pct_fpr", read_number(ref, "tpr_at_fpr", "0.01"));
        cJSON_AddItemToObject(j, "reference_tpr_at_1pct_fpr_interval", interval_json(tlo, thi));
        if (chance)
            cJSON_AddStringToObject(j, "verdict", "not applicable: the attack is at chance without any defense, so "
                                                  "its figures under a defense are no evidence of protection");
    }
    if (env->quiet)
        return;
    double l1 = 0, h1 = 0, l2 = 0, h2 = 0, l0 = 0, h0 = 0;
    read_interval(result, "auc_interval", NULL, &l0, &h0);
    read_interval(result, "tpr_at_fpr_interval", "0.01", &l1, &h1);
    read_interval(result, "tpr_at_fpr_interval", "0.001", &l2, &h2);
    fp_print_line(stderr, "%s: AUC %.3f [%.3f, %.3f], TPR %.1f%% [%.1f%%, %.1f%%] at 1%% FPR, %.1f%% [%.1f%%, %.1f%%] "
                  "at 0.1%% FPR (%.0f members, %.0f non-members)", name, read_number(result, "auc", NULL), l0, h0,
                  100 * read_number(result, "tpr_at_fpr", "0.01"), 100 * l1, 100 * h1,
                  100 * read_number(result, "tpr_at_fpr", "0.001"), 100 * l2, 100 * h2,
                  read_number(result, "members", NULL), read_number(result, "non_members", NULL));
    if (chance)
        fp_print_line(stderr, "%s: not applicable: it is at chance without any defense (%s)", name, source);
}
