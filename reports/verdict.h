// The verdict of a matrix run: one row per defense setting and one word per observer and
// attack family, the first thing the report shows (reports/html.h), `fedpriv report
// --summary` prints and results.json carries ("summary.verdict"). docs/report.md
// describes it.
//
// Columns. Each attack of the run belongs to one family by its headline metric
// (verdict_family_of: SSIM → inversion, AUC or balanced accuracy → membership; others
// are in the matrix only) and to one view by its observer: the server's view (a
// client's upload as the server receives it, or as the client sends it) or the public
// view (the released model). A column is a (view, family) pair that has at least one
// attack; the strongest attack of the column against a setting is its figure there:
// the most images recovered (then the highest mean SSIM) for inversion, the highest mean
// AUC for membership.
//
// The rule (VERDICT_RULE, stated on the page and in the JSON):
//   leaks    the column's strongest attack recovers at least one image over all seeds
//            (the attack's own count, images_recovered: SSIM ≥ its recovered_ssim, 0.9
//            for every inversion attack of attacks/attacker.h); without image counts, its
//            headline is at least STATS_LEAK_SHARE of the way from chance to a full
//            leak; for membership, mean AUC at least STATS_LEAK_SHARE of the way from
//            0.5 to 1 (AUC ≥ 0.55), the test of the attack_fails_without_defense warning
//   protects it does not, in a column where the setting without a defense leaks
//   not measurable here  the setting without a defense does not leak in this column (or
//            the run has none): nothing shows the attack works here, so no figure under
//            a defense is evidence of protection; every cell of the column says so
//            and so is a cell whose strongest attack says itself that it does not apply
//            ("applicable": false: it recovers nothing without a defense)
//   no result  no seed of the setting has a value in this column (failed, pending)
#ifndef FEDPRIV_REPORTS_VERDICT_H
#define FEDPRIV_REPORTS_VERDICT_H

#include <cjson/cJSON.h>

#include "reports/html.h"
#include "reports/summary.h"


#define VERDICT_RULE                                                                                                  \
    "One word per observer and attack family, for the strongest attack of that column. Leaks: it recovers at least " \
    "one image (SSIM >= 0.9) over the seeds, or its mean membership AUC is at least 0.55 (a tenth of the way from "   \
    "chance, 0.5, to a full leak). Protects: it does not, where the setting without a defense leaks. Not measurable " \
    "here: the setting without a defense does not leak in this column either (or the run has none), so nothing "     \
    "shows the attack works here and no figure under a defense is evidence of protection."

typedef enum { VERDICT_NO_RESULT = 0, VERDICT_LEAKS, VERDICT_PROTECTS, VERDICT_NOT_MEASURABLE } VerdictWord;
typedef enum { VERDICT_VIEW_SERVER = 0, VERDICT_VIEW_PUBLIC, VERDICT_N_VIEWS } VerdictView;
typedef enum { FAMILY_NONE = -1, FAMILY_INVERSION = 0, FAMILY_MEMBERSHIP, VERDICT_N_FAMILIES } AttackFamily;

#define VERDICT_MAX_COLUMNS (VERDICT_N_VIEWS * VERDICT_N_FAMILIES)

// "leaks", "protects", "not measurable here", "no result".
const char *verdict_word_name(VerdictWord w);
// "server", "public"; "inversion", "membership".
const char *verdict_view_name(VerdictView v);
const char *verdict_family_name(AttackFamily f);
// The family of an attack by its headline metric, FAMILY_NONE when it has none here.
AttackFamily verdict_family_of(const char *headline);
// The view of attack k of a summary: its observer in the results (the first setting that
// states one), else the index's, else what its family usually observes (inversion: an
// upload; membership: the released model). Every observer but "public" sees uploads.
VerdictView verdict_view_of(const RunSummary *S, int k);

typedef struct VerdictColumn {
    VerdictView view;
    AttackFamily family;
    int n_attacks;          // the run's attacks in this column
    int measurable;         // the setting without a defense leaks here
} VerdictColumn;

typedef struct VerdictCell {
    VerdictWord word;
    int attack;             // the strongest attack (summary column), -1 when none has a value
    int seeds;              // seeds with a value for it
    int not_applicable;     // seeds whose result says the attack does not apply (it recovers
                            // nothing without a defense): "not measurable here", no figure
    // inversion: images recovered of images attacked, over the seeds (NaN: no counts)
    double recovered, images, ssim;
    // membership: means over the seeds (tpr NaN when the result has none)
    double auc, tpr;
} VerdictCell;

typedef struct VerdictRow {
    int setting;            // index into RunSummary.settings
    double accuracy_cost;   // accuracy without a defense minus this one's (means; NaN unknown)
    VerdictCell cells[VERDICT_MAX_COLUMNS];
} VerdictRow;

typedef struct RunVerdict {
    const RunSummary *S;
    int n_columns;
    VerdictColumn columns[VERDICT_MAX_COLUMNS];
    int n_rows;
    VerdictRow *rows;       // one per setting, in order
} RunVerdict;

// Builds the verdict of a summary (S must outlive it); FP_ENOMEM is the only failure.
FpStatus run_verdict_build(const RunSummary *S, RunVerdict *out);
void run_verdict_free(RunVerdict *v);

// The verdict as JSON (results.json's "summary.verdict"); NULL when out of memory.
cJSON *run_verdict_json(const RunVerdict *v);

// The verdict table as plain text (`fedpriv report --summary`): one line per setting,
// columns aligned, every string from the run through fp_format's escaping.
void run_verdict_text(const RunVerdict *v, HtmlBuf *out);

// A column's heading, e.g. "server: inversion"; a setting's proven ε, e.g. "1 per client
// (proven); upload ∞ (none)"; a cell's figure, e.g. "6/6 recovered", "AUC 0.62, TPR 4.1%".
void verdict_column_title(const VerdictColumn *c, char *buf, size_t n);
// "at chance" or "near chance" when a warning says so of setting i (accuracy_at_chance,
// accuracy_near_chance): a "protects" beside it is a model that learned (almost) nothing.
// NULL otherwise.
const char *verdict_accuracy_note(const RunSummary *S, int i);
void verdict_epsilon_text(const SettingSummary *s, char *buf, size_t n);
void verdict_cell_text(const VerdictColumn *c, const VerdictCell *x, char *buf, size_t n);

#endif
