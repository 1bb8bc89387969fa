// What the report's files share: the page (reports/html.c) calls the sections
// (html_verdict.c, html_matrix.c, html_plots.c, html_sections.c), and they all use the
// helpers of report_util.c. Not for other modules: use reports/html.h.
#ifndef FEDPRIV_REPORTS_REPORT_INTERNAL_H
#define FEDPRIV_REPORTS_REPORT_INTERNAL_H

#include <cjson/cJSON.h>

#include "reports/html.h"
#include "reports/results.h"
#include "reports/summary.h"

typedef struct Report {
    const char *dir;
    MatrixResults r;
    RunSummary S;
    HtmlBuf out;
    HtmlBuf problems;     // <li> items
    int n_problems;
    int max_images;
} Report;

const char *rep_str(const cJSON *o, const char *key, const char *def);
// A number, "inf"/"-inf" as infinities (core/json_number.h), else NaN.
double rep_num(const cJSON *o, const char *key);

// Adds a line to the problems box at the top of the page.
void rep_problem(Report *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// <img> with the PNG (a path under DIR) inlined, or a visible placeholder and a problem.
void rep_inline_png(Report *R, const char *adir, const char *file, const char *alt, const char *where);
// A status word with its CSS class and, when given, the message as a tooltip.
void rep_put_status(HtmlBuf *o, const char *status, const char *message);
// A number as text: %.4g, "∞" / "−∞", "—" when NaN.
void rep_put_num(HtmlBuf *o, double v);
// A seed: every digit of an integer below 2^53 (seeds are exact), else as rep_put_num.
void rep_put_seed(HtmlBuf *o, double v);
// The mean and what metric_interval allows (reports/summary.h): "0.765 [0.746, 0.783]"
// (Wilson), "0.765 ± 0.012" (Student t, 3 seeds or more), "0.765 0.761–0.769" (two seeds:
// both values), the value alone with one seed; "—" when none.
void rep_put_stat(HtmlBuf *o, const MetricSummary *m);
// The per-seed values and the interval, for a tooltip: "per seed: 0.81, 0.80; 1620 of
// 2000 pooled over 2 seeds, Wilson 95% interval [..]".
void rep_stat_title(HtmlBuf *o, const MetricSummary *m, int n);

// Sections, in page order (the problems box follows the verdict).
void section_verdict(Report *R);
void section_warnings(Report *R);
void section_matrix(Report *R);
void section_tradeoff(Report *R);
void section_curves(Report *R);
void section_images(Report *R);
void section_privacy(Report *R);
void section_audit(Report *R);
void section_metadata(Report *R);

#endif
