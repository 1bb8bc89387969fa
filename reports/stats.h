// Statistics over seeds and the anchored scales of the report's metrics (reports/summary.h
// builds them per defense setting; `fedpriv check` bounds them).
//
// Statistics over seeds. A setting that ran with seeds s_1..s_n has one value per seed
// for each metric. What the report shows (metric_interval):
//   - a proportion with known counts (model accuracy: correct test examples; the
//     recovered fraction: images recovered) gets the Wilson 95% score interval of the
//     counts pooled over the seeds, k successes of N trials,
//       (p + z²/2N ± z·√(p(1-p)/N + z²/4N²)) / (1 + z²/N),   p = k/N, z = 1.96,
//     which lies inside [0, 1] whatever k (Wilson 1927); it counts the sampling of test
//     examples (or images), not the spread between seeds, which the per-seed values show;
//   - any other metric with at least STATS_MIN_SEEDS_FOR_T seeds gets the Student-t 95%
//     interval of the mean, mean ± t_{0.975, n-1} · sd / √n (sd with n - 1);
//   - with two seeds, the two values (their min–max), never a t-interval: t_{0.975,1} =
//     12.7 makes one from two values wider than the metric's whole range;
//   - with one seed, the value alone.
// A seed without a value (the cell diverged, failed or is pending) is left out and
// counted as missing.
//
// Anchored scales. A metric's colour and its "does this attack work" test use fixed
// meanings, never the spread of a column: AUC and balanced accuracy 0.5 = chance and 1
// = every member found; SSIM and recovered fractions 0 = nothing and 1 = everything;
// TPR at 1% FPR 0.01 = chance. Model accuracy is placed between chance (the share of
// the most frequent test class) and the accuracy without a defense.
#ifndef FEDPRIV_REPORTS_STATS_H
#define FEDPRIV_REPORTS_STATS_H

// ---- statistics over seeds ---------------------------------------------------------------

// The fewest seeds the report draws a Student-t interval from.
#define STATS_MIN_SEEDS_FOR_T 3

typedef struct SeedStat {
    int n;                  // values that are not NaN
    int missing;            // NaN values (seeds without a value)
    double mean;            // NaN when n = 0; ±inf when a value is infinite
    double ci_low, ci_high; // 95% Student-t interval of the mean; NaN when n < 2 or not finite
                            // (`fedpriv check` bounds its ends from 2 seeds; the report shows
                            // it from STATS_MIN_SEEDS_FOR_T: metric_interval)
    double min, max;        // of the values; NaN when n = 0
} SeedStat;

// The statistics of v[0..n) (NaN entries are missing values).
void seed_stat(const double *v, int n, SeedStat *out);
// t_{0.975, df}: the two-sided 95% Student-t quantile (df >= 1).
double student_t975(int df);
// The Wilson 95% score interval of k successes in n trials (0 <= k <= n, n > 0), inside
// [0, 1]; NaN ends when n is not positive.
void wilson_interval(double k, double n, double *low, double *high);

// ---- anchored scales ----------------------------------------------------------------------

typedef struct MetricScale {
    const char *metric;  // the result key ("auc", "ssim_mean", "tpr_at_fpr.0.01", ...)
    double chance;       // what an attack that learns nothing scores
    double full;         // a complete leak
    const char *name;    // short name for headers and axes ("AUC", "TPR at 1% FPR")
} MetricScale;

// The scale of a metric, or NULL when it has no fixed meaning here.
const MetricScale *metric_scale(const char *metric);
// Where v lies between chance (0) and a full leak (1), clamped to [0, 1]; NaN when v
// or the scale is missing.
double metric_leak(const MetricScale *s, double v);
// An attack leaks when its headline lies at least this share of the way from chance to a
// full leak (AUC 0.55, SSIM 0.1): the test of the attack_fails_without_defense warning
// and of the verdict (reports/verdict.h).
#define STATS_LEAK_SHARE 0.1

// ---- a metric over the seeds ---------------------------------------------------------------

typedef struct MetricSummary {
    double *values;         // one per run of the setting (NaN: no value)
    SeedStat stat;
    // A proportion's counts pooled over the seeds with a value: successes of trials
    // (model accuracy: correct test examples; recovered fraction: images). NaN when the
    // metric is no proportion or its counts are unknown.
    double successes, trials;
} MetricSummary;

typedef enum { INTERVAL_NONE = 0, INTERVAL_WILSON, INTERVAL_STUDENT_T } IntervalKind;

typedef struct MetricInterval {
    IntervalKind kind;
    double low, high;       // NaN with INTERVAL_NONE
} MetricInterval;

// The 95% interval the report shows for m (the rule above): Wilson for a proportion
// with counts, Student t from STATS_MIN_SEEDS_FOR_T seeds, else none.
MetricInterval metric_interval(const MetricSummary *m);
// "wilson", "student-t", "none".
const char *interval_kind_name(IntervalKind k);

#endif
