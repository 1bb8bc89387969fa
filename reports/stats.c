// Statistics over seeds and anchored scales (see reports/stats.h).
#include "reports/stats.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

// ---- statistics over seeds ---------------------------------------------------------------

// t_{0.975, df} for df = 1..30 (scipy.stats.t.ppf(0.975, df), 4 decimals).
static const double t975[31] = {NAN,    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
                                2.2010, 2.1788,  2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796,
                                2.0739, 2.0687,  2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};

double student_t975(int df) {
    if (df < 1)
        return NAN;
    if (df <= 30)
        return t975[df];
    // Cornish-Fisher expansion around the normal quantile (Abramowitz & Stegun 26.7.5):
    // within 1e-4 of the exact quantile for df > 30.
    double z = 1.959963984540054, z2 = z * z, v = df;
    return z + z * (z2 + 1) / (4 * v) + z * ((5 * z2 + 16) * z2 + 3) / (96 * v * v) +
           z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / (384 * v * v * v);
}

void seed_stat(const double *v, int n, SeedStat *o) {
    *o = (SeedStat){.mean = NAN, .ci_low = NAN, .ci_high = NAN, .min = NAN, .max = NAN};
    double sum = 0;
    int inf = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(v[i])) {
            o->missing++;
            continue;
        }
        if (o->n == 0 || v[i] < o->min)
            o->min = v[i];
        if (o->n == 0 || v[i] > o->max)
            o->max = v[i];
        o->n++;
        inf |= isinf(v[i]);
        sum += v[i]; // an infinity makes the mean infinite (or NaN for +inf and -inf)
    }
    if (o->n == 0)
        return;
    o->mean = sum / o->n;
    if (o->n < 2 || inf)
        return;
    double ss = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i]))
            ss += (v[i] - o->mean) * (v[i] - o->mean);
    double half = student_t975(o->n - 1) * sqrt(ss / (o->n - 1)) / sqrt((double)o->n);
    o->ci_low = o->mean - half;
    o->ci_high = o->mean + half;
}

void wilson_interval(double k, double n, double *low, double *high) {
    *low = *high = NAN;
    if (!(n > 0) || !(k >= 0) || k > n)
        return;
    const double z = 1.959963984540054, z2 = z * z;
    double p = k / n, d = 1 + z2 / n;
    double centre = (p + z2 / (2 * n)) / d, half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / d;
    // The exact ends at k = 0 and k = n (rounding would leave 1e-17 outside [0, 1]).
    *low = k == 0 ? 0 : fmax(0, centre - half);
    *high = k == n ? 1 : fmin(1, centre + half);
}

static const char *const interval_names[] = {[INTERVAL_NONE] = "none", [INTERVAL_WILSON] = "wilson",
                                             [INTERVAL_STUDENT_T] = "student-t"};

const char *interval_kind_name(IntervalKind k) { return interval_names[k]; }

MetricInterval metric_interval(const MetricSummary *m) {
    MetricInterval iv = {.kind = INTERVAL_NONE, .low = NAN, .high = NAN};
    if (m->trials > 0 && m->stat.n > 0) {
        iv.kind = INTERVAL_WILSON;
        wilson_interval(m->successes, m->trials, &iv.low, &iv.high);
    } else if (m->stat.n >= STATS_MIN_SEEDS_FOR_T && isfinite(m->stat.ci_low)) {
        iv.kind = INTERVAL_STUDENT_T;
        iv.low = m->stat.ci_low;
        iv.high = m->stat.ci_high;
    }
    return iv;
}

// ---- anchored scales ----------------------------------------------------------------------

static const MetricScale scales[] = {
    {"auc", 0.5, 1, "AUC"},
    {"balanced_accuracy", 0.5, 1, "balanced accuracy"},
    {"best_balanced_accuracy", 0.5, 1, "best balanced accuracy"},
    {"advantage", 0, 1, "advantage"},
    {"best_advantage", 0, 1, "best advantage"},
    {"tpr_at_fpr.0.01", 0.01, 1, "TPR at 1% FPR"},
    {"tpr_at_fpr.0.001", 0.001, 1, "TPR at 0.1% FPR"},
    {"ssim_mean", 0, 1, "mean SSIM"},
    {"ssim_max", 0, 1, "max SSIM"},
    {"ssim", 0, 1, "SSIM"},
    {"recovered_fraction", 0, 1, "recovered fraction"},
    {"label_accuracy", 0.1, 1, "label accuracy"},
};

const MetricScale *metric_scale(const char *metric) {
    for (size_t i = 0; metric && i < sizeof scales / sizeof scales[0]; i++)
        if (strcmp(scales[i].metric, metric) == 0)
            return &scales[i];
    return NULL;
}

double metric_leak(const MetricScale *s, double v) {
    if (!s || isnan(v))
        return NAN;
    double t = (v - s->chance) / (s->full - s->chance);
    return t < 0 ? 0 : t > 1 ? 1 : t;
}

