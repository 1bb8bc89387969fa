// Audits of scores from any framework (`fedpriv audit-scores`): a file of scores with
// one bit per row, read strictly, then judged by the procedures fedpriv applies to its
// own runs. Nothing here trains; the same functions are the back end of audit-training
// (audits/training.h) and of the membership-inference attacks' ROC (eval/roc.h).
//
// The file. CSV with a header row (numbers only, comma separated, LF or CRLF, blank
// lines skipped, no quoting): one bit column, "member" (membership scores: 1 = the
// record was in the training set) or "in" (canaries: 1 = canary i was included, or run
// i had the canary); optionally one id column, "canary" or "run" (which says the kind:
// one-run or multi-run) or "id", not used otherwise; every other column is a score
// (1 to TRAINING_AUDIT_MAX_SCORES of them), named by its header. Or .npy: an N×K array
// (K >= 2, any dtype datasets/npy.h reads): column 0 the bits, columns 1.. the scores,
// named "score" (K = 2) or "score1", "score2", ...
//
// The kinds:
//   membership  the ROC of the (single) score against the member bits (eval/roc.h), AUC
//               with its Hanley-McNeil (1982) normal interval, TPR at FPR 1%, 0.1% and
//               0 (the last ROC point with FPR <= t) with two-sided Clopper-Pearson
//               intervals of the members found at that point, best balanced accuracy
//               and advantage. Intervals at the given confidence (0.95).
//   one-run     Steinke, Nasr, Jagielski 2023: training_audit_one_run_scores, rows in
//               canary order.
//   multi-run   Nasr et al. 2023: training_audit_multi_run_scores, rows in run order
//               (audit-training alternates in, out, in, ...).
// A bad file (a malformed header, a NaN, a bit other than 0/1, too many columns, rows
// of other lengths) is FP_EFORMAT naming the file and the line.
#ifndef FEDPRIV_AUDITS_SCORES_H
#define FEDPRIV_AUDITS_SCORES_H

#include <cjson/cJSON.h>

#include "audits/training.h"
#include "core/status.h"

typedef enum { SCORES_MEMBERSHIP = 0, SCORES_ONE_RUN = 1, SCORES_MULTI_RUN = 2, SCORES_KIND_UNKNOWN = -1 } ScoresKind;

// "membership", "one-run", "multi-run" (NULL past the last).
const char *scores_kind_name(ScoresKind k);
ScoresKind scores_kind_parse(const char *s);

typedef struct ScoreTable {
    int n, n_scores;
    char *names[TRAINING_AUDIT_MAX_SCORES];
    double *score[TRAINING_AUDIT_MAX_SCORES]; // score[k][i]
    int *bit;                                  // n bits
    int bit_is_member;                         // the bit column was "member" (else "in")
    ScoresKind kind_from_file;                 // from the id column or the bit column; UNKNOWN for .npy
} ScoreTable;

FpStatus scores_read(const char *path, ScoreTable *out, FpError *err);
void scores_free(ScoreTable *t);

// The membership report into res (keys above). FP_EPARAM without members or non-members,
// or with more than one score column.
FpStatus scores_membership(const ScoreTable *t, double confidence, cJSON *res, FpError *err);

// The view the training audit's bounds read.
TrainingAuditScores scores_view(const ScoreTable *t);

#endif
