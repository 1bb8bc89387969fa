// `fedpriv check`: declared bounds over a matrix run, for CI. A baseline file lists
// bounds; each selects cells of the run (or audit findings) and bounds one metric:
//
//   {"description": "what this CI expects",
//    "require_complete": true,
//    "bounds": [
//      {"label": "DLG SSIM under SPM with ε ≤ 1", "defense": "spm", "epsilon_max": 1,
//       "attack": "dlg", "metric": "ssim_mean", "at_most": 0.2},
//      {"defense": "gaussian-dpfedavg", "epsilon_max": 1, "attack": "ml-leaks",
//       "metric": "balanced_accuracy", "at_most": 0.55},
//      {"defense": "none", "metric": "model_accuracy", "at_least": 0.8},
//      {"audit": "*", "metric": "epsilon_lower_bound", "at_most": "epsilon"}]}
//
// Cell bounds: "defense" (a name or "*"), optional "variant", "epsilon_min",
// "epsilon_max" (inclusive; a cell without ε never matches them) and "params" (values
// the cell's defense object must hold exactly) select cells. Without "attack", "metric"
// is one of model_accuracy, model_loss, epsilon_nominal, epsilon_sound (totals after
// the last round). With "attack", "metric" is a key of that attack's result ("a.b"
// reaches into objects; keys that contain dots, like tpr_at_fpr.0.01, are found too)
// or "headline" (the default): the attack's headline value. "at_most" may name another
// key of the same attack result instead of a number: {"attack": "audit-training",
// "metric": "epsilon_lower_bound", "at_most": "epsilon_claimed"} asserts that a
// training audit's lower bound stays below the defense's claim (a null, i.e. infinite,
// or missing claim is a violation: there is nothing to compare with). The audit
// keyword "epsilon" is refused there: it names no key of an attack's result.
// Audit bounds: "audit" (a mechanism name or "*"), optional "variant", "epsilon_min",
// "epsilon_max"; "metric" defaults to epsilon_lower_bound; "at_most" may be the string
// "epsilon": the finding's own claimed ε.
// Every bound needs "at_most" and/or "at_least" (inclusive) and matches at least
// "min_cells" (default 1) cells or findings; fewer is a violation, so a bound can
// never pass vacuously. A selected cell that diverged, failed or is pending, or lacks
// the metric, is a violation. With "require_complete" (default true) every failed or
// pending cell of the run is one too.
#ifndef FEDPRIV_RUNNER_CHECK_H
#define FEDPRIV_RUNNER_CHECK_H

#include <cjson/cJSON.h>

#include "core/status.h"

typedef struct CheckResult {
    int bounds;        // bounds in the baseline
    int evaluations;   // (bound, cell or finding) pairs compared
    int n_violations;
    char **violations; // one readable line each
} CheckResult;

// Checks the run in dir against a parsed baseline (path names it in messages). A bad
// baseline (unknown key, wrong type, no bound) is FP_EPARAM naming the JSON path; an
// unreadable run is FP_EIO/FP_EFORMAT. Violations are results, not errors.
FpStatus check_baseline(const char *dir, const cJSON *baseline, const char *path, CheckResult *out, FpError *err);
void check_result_free(CheckResult *r);

#endif
