// `fedpriv export`: a matrix run as one tidy table, one row per cell × attack × metric
// (a cell is one defense setting run with one seed), for pandas, R or a spreadsheet.
//
// Columns (CSV header, JSONL keys), in this order:
//   cell             the cell's id (its file under DIR/cells/)
//   setting          the defense setting's label ("spm corrected ε=1")
//   defense, variant the defense and its variant ("" when none)
//   params           swept parameters other than ε, compact JSON ("" when none)
//   epsilon          the ε the setting was configured with ("" when none)
//   epsilon_nominal  the paper's ε after the last round (privacy.nominal.epsilon_total)
//   epsilon_sound    the sound ε after the last round (privacy.sound.epsilon_total)
//   guarantee        of the sound ε: proven, conditional, none
//   unit             the privacy unit (scalar, layer, upload, client, record)
//   seed             the cell's seed
//   status           the cell's status, or the attack's for attack rows (done, diverged,
//                    failed, skipped, ...)
//   attack           the attack's label ("" for the model's own metrics)
//   metric           model_accuracy / model_loss for the model; for an attack, every
//                    number in its result, nested keys joined by "." (tpr_at_fpr.0.01,
//                    target.test_accuracy), lists and timings left out
//   value            the number
// Numbers follow the one non-finite rule (core/json_number.h): CSV writes the shortest
// decimal that reads back to the same double, inf, -inf, and an empty field for no value; JSONL writes
// JSON numbers, "inf", "-inf" and null. An attack that did not finish gives one row for
// its headline metric with no value. Cells without a result file (pending) give no rows.
#ifndef FEDPRIV_REPORTS_EXPORT_H
#define FEDPRIV_REPORTS_EXPORT_H

#include "reports/html.h"

typedef enum { EXPORT_CSV = 0, EXPORT_JSONL = 1 } ExportFormat;

// Appends the table of the run in dir to out. A run that cannot be read is
// FP_EIO/FP_EFORMAT naming the file.
FpStatus report_export(const char *dir, ExportFormat format, HtmlBuf *out, FpError *err);

#endif
