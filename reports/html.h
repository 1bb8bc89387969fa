// The HTML report of a matrix run (`fedpriv report DIR`): one self-contained page that
// works offline: no scripts, no external resources (a Content-Security-Policy says so),
// images inlined as base64 PNG data URIs, plots as inline SVG.
//
// Every string that comes from a config, a result or any other file goes through
// hb_escape (or hb_escape_attr inside attribute values): &, <, >, " and ' become
// entities, so a defense named <script>alert(1)</script> is shown as text.
#ifndef FEDPRIV_REPORTS_HTML_H
#define FEDPRIV_REPORTS_HTML_H

#include <stddef.h>

#include "core/status.h"

// A growing text buffer. After an allocation failure it stops growing and oom is set;
// the writer checks oom once at the end.
typedef struct HtmlBuf {
    char *s;
    size_t len, cap;
    int oom;
} HtmlBuf;

void hb_init(HtmlBuf *b);
void hb_free(HtmlBuf *b);
void hb_put(HtmlBuf *b, const char *s, size_t n);
void hb_puts(HtmlBuf *b, const char *s);
void hb_printf(HtmlBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Text content: & < > " ' escaped; invalid UTF-8 bytes and control characters other
// than tab and newline become U+FFFD, so nothing a file holds can break the markup.
void hb_escape(HtmlBuf *b, const char *text);
// The same escaping, for attribute values (always written between double quotes).
void hb_escape_attr(HtmlBuf *b, const char *text);

typedef struct ReportOptions {
    const char *title;      // NULL: "fedpriv report"
    int max_images;         // reconstructions shown per attack and cell (0: 8)
} ReportOptions;

// Writes the report of the run in dir (DIR/results.json, the cell files, their PNG
// artifacts, DIR/audit/*.json when present) to out_path, atomically. *problems (when
// not NULL) receives the number of artifacts that could not be shown (missing or
// invalid PNG files, bad paths); the page lists them too.
FpStatus report_write_html(const char *dir, const char *out_path, const ReportOptions *opt, int *problems,
                           FpError *err);

// The verdict table of the run in dir as plain text (`fedpriv report --summary`,
// reports/verdict.h), into *text (malloc'd, NUL-terminated; the caller frees it).
FpStatus report_summary_text(const char *dir, char **text, FpError *err);

// Writes n bytes to path atomically (temp file beside it, fsync, rename).
FpStatus report_write_file_atomic(const char *path, const char *data, size_t n, FpError *err);

#endif
