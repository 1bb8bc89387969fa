// `fedpriv check`: declared bounds over a matrix run, for CI. A baseline file lists
// bounds; each selects defense settings of the run (or audit findings) and bounds one
// metric:
//
//   {"description": "what this CI expects",
//    "require_complete": true,
//    "bounds": [
//      {"label": "DLG SSIM under SPM with ε ≤ 1", "defense": "spm", "epsilon_max": 1,
//       "attack": "dlg", "metric": "ssim_mean", "at_most": 0.2},
//      {"defense": "gaussian-dpfedavg", "epsilon_max": 1, "attack": "ml-leaks",
//       "metric": "auc", "statistic": "ci_upper", "at_most": 0.6},
//      {"defense": "none", "metric": "model_accuracy", "at_least": 0.8},
//      {"audit": "*", "metric": "epsilon_lower_bound", "at_most": "epsilon"}]}
//
// Cell bounds: "defense" (a name or "*"), optional "variant", "epsilon_min",
// "epsilon_max" (inclusive; a setting without ε never matches them) and "params"
// (values the setting's defense object must hold exactly) select defense settings.
// Without "attack", "metric" is one of model_accuracy, model_loss, epsilon_nominal,
// epsilon_sound (totals after the last round). With "attack" (every attack of that name
// in the run, or one attack's label), "metric" is a key of the attack's result ("a.b"
// reaches into objects; keys that contain dots, like tpr_at_fpr.0.01, are found too) or
// "headline" (the default): the attack's headline value.
// Seeds: a setting's value is a statistic of its per-seed values, "statistic": "mean"
// (the default), "ci_upper" or "ci_lower" (the Student-t 95% interval of the mean,
// reports/summary.h; it needs at least 2 seeds).
// "at_most" may name another key of the same attack result instead of a number:
// {"attack": "audit-training", "metric": "epsilon_lower_bound", "at_most":
// "epsilon_claimed"} asserts, seed by seed, that a training audit's lower bound stays
// below the defense's claim (an infinite or missing claim is a violation:
// there is nothing to compare with; no "statistic" goes with it). The audit keyword
// "epsilon" is refused there: it names no key of an attack's result.
// Audit bounds: "audit" (a mechanism name or "*"), optional "variant", "epsilon_min",
// "epsilon_max"; "metric" defaults to epsilon_lower_bound; "at_most" may be the string
// "epsilon": the finding's own claimed ε.
// "guarantee" ("none", "conditional", "proven"): the weakest guarantee a selected setting's
// privacy record may have (proven > conditional > none; the weakest over its seeds);
// a bound may be only that, without a metric.
// Every other bound needs "at_most" and/or "at_least" (inclusive, at_least <= at_most) and
// matches at least "min_cells" (default 1, at least 1) settings or findings; fewer is a
// violation, so a bound can never pass vacuously. A selected setting with a seed that
// diverged, failed or is pending, or without the metric, is a violation. With
// "require_complete" (default true) every failed or pending cell of the run is one too.
//
// A DIR without results.json whose audit/ folder holds findings (fedpriv audit --out,
// fedpriv audit-scores --out) is checked as a run without cells.
// Bad input (FP_EPARAM, exit 2): unknown keys, wrong types, a bound without a limit,
// at_least > at_most, min_cells < 1, and names that exist nowhere: a defense, attack or
// mechanism neither registered nor in the run, a variant the defense does not have, an
// attack metric no finished result of that attack in the run reports. A typo is a bad
// baseline, not a privacy regression.
#ifndef FEDPRIV_RUNNER_CHECK_H
#define FEDPRIV_RUNNER_CHECK_H

#include <cjson/cJSON.h>

#include "core/status.h"
#include "reports/html.h"

// One comparison (a bound against one setting or finding), or a violation that is not a
// comparison (too few matches, an incomplete run: is_comparison = 0).
typedef struct CheckItem {
    int bound;            // index into the baseline's bounds; -1 for run-level items
    char *bound_name;     // 'bound 3 "label"'
    char *subject;        // 'cell "spm corrected ε=1"', 'audit spm corrected ε=1 (file)', or ""
    char *what;           // "dlg ssim_mean (mean of 2 seeds)"
    char *message;        // the whole line, as text output prints it
    int is_comparison;
    int ok;
    double value;         // observed (NaN when there is none)
    int has_max, has_min;
    double at_most, at_least;
    double margin;        // distance to the nearest limit: >= 0 holds, < 0 violated; NaN without a value
} CheckItem;

typedef struct CheckResult {
    int bounds;           // bounds in the baseline
    int evaluations;      // comparisons made
    int n_violations;
    int n_items;
    CheckItem *items;     // every comparison and violation, in order
} CheckResult;

// Checks the run in dir against a parsed baseline (path names it in messages). A bad
// baseline is FP_EPARAM naming the file and JSON path; an unreadable run is
// FP_EIO/FP_EFORMAT. Violations are results, not errors.
FpStatus check_baseline(const char *dir, const cJSON *baseline, const char *path, CheckResult *out, FpError *err);
void check_result_free(CheckResult *r);

typedef enum { CHECK_TEXT = 0, CHECK_JSON = 1, CHECK_JUNIT = 2, CHECK_GITHUB = 3 } CheckFormat;

// The format named s ("text", "json", "junit", "github"), or -1.
int check_format_parse(const char *s);
// Appends the result in a format: text (every comparison with its value and margin, then
// the verdict), JSON (one object), JUnit XML (one test case per comparison), or GitHub
// Actions annotations (::error lines for violations, plain lines for the rest).
void check_format(const CheckResult *r, CheckFormat format, const char *dir, const char *baseline_path, HtmlBuf *out);

#endif
