// The HTML report (see reports/html.h): the page, its style, the helpers the section
// files share (reports/report_internal.h) and the warnings section. Sections, in page
// order: summary, problems and warnings; the attack × defense matrix with anchored
// colours (html_matrix.c); the privacy-utility trade-off, accuracy per round and ROC
// curves (html_plots.c); reconstructions, privacy spent, audit findings and run
// metadata (html_sections.c).
//
// Artifacts are read only from inside DIR: a path from a result must be relative,
// without "..", every component is opened without following a symbolic link
// (core/files.h), and the file must decode as a PNG (eval/png.h) before its bytes are
// inlined; anything else is listed as a problem instead of drawing a broken image.
#include <glib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "core/version.h"
#include "eval/png.h"
#include "reports/report_internal.h"

const char *rep_str(const cJSON *o, const char *key, const char *def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : def;
}

double rep_num(const cJSON *o, const char *key) { return jnum_value(cJSON_GetObjectItemCaseSensitive(o, key)); }

void rep_problem(Report *R, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    R->n_problems++;
    hb_puts(&R->problems, "<li>");
    hb_escape(&R->problems, msg);
    hb_puts(&R->problems, "</li>");
}

void rep_put_num(HtmlBuf *o, double v) {
    if (isnan(v))
        hb_puts(o, "—");
    else if (isinf(v))
        hb_puts(o, v > 0 ? "∞" : "−∞");
    else
        hb_printf(o, "%.4g", v);
}

void rep_put_seed(HtmlBuf *o, double v) {
    if (v >= 0 && v < 0x1p53 && v == floor(v))
        hb_printf(o, "%.0f", v);
    else
        rep_put_num(o, v);
}

void rep_put_stat(HtmlBuf *o, const SeedStat *s) {
    if (s->n == 0) {
        hb_puts(o, "—");
        return;
    }
    if (isinf(s->mean)) {
        rep_put_num(o, s->mean);
        return;
    }
    hb_printf(o, "%.3f", fabs(s->mean) < 5e-4 ? 0.0 : s->mean);
    if (isfinite(s->ci_high))
        hb_printf(o, "<span class=\"ci\"> ± %.3f</span>", (s->ci_high - s->ci_low) / 2);
}

void rep_stat_title(HtmlBuf *o, const MetricSummary *m, int n) {
    char t[64];
    if (n > 1) {
        hb_puts(o, "per seed: ");
        for (int i = 0; i < n; i++) {
            if (isnan(m->values[i]))
                snprintf(t, sizeof t, "no value");
            else if (isinf(m->values[i]))
                snprintf(t, sizeof t, "%s", m->values[i] > 0 ? "∞" : "−∞");
            else
                snprintf(t, sizeof t, "%.4g", m->values[i]);
            hb_puts(o, i ? ", " : "");
            hb_puts(o, t);
        }
        if (isfinite(m->stat.ci_low))
            hb_printf(o, "; mean %.4g, 95%% CI [%.4g, %.4g] (Student t over %d seeds)", m->stat.mean, m->stat.ci_low,
                      m->stat.ci_high, m->stat.n);
    } else if (n == 1 && !isnan(m->values[0])) {
        snprintf(t, sizeof t, "%.6g", m->values[0]);
        hb_printf(o, "%s (one seed: no interval)", t);
    }
}

void rep_put_status(HtmlBuf *o, const char *status, const char *message) {
    hb_puts(o, "<span class=\"st-");
    hb_escape_attr(o, status);
    hb_puts(o, "\"");
    if (message && message[0]) {
        hb_puts(o, " title=\"");
        hb_escape_attr(o, message);
        hb_puts(o, "\"");
    }
    hb_puts(o, ">");
    hb_escape(o, status);
    hb_puts(o, "</span>");
}

// A path from a result, joined under DIR, or NULL when it could leave DIR.
static int safe_rel(const char *p) {
    if (!p || !p[0] || p[0] == '/' || strchr(p, '\\') || strlen(p) > 512)
        return 0;
    for (const char *s = p; *s; s++)
        if (s[0] == '.' && s[1] == '.' && (s == p || s[-1] == '/') && (s[2] == '/' || s[2] == 0))
            return 0;
    return 1;
}

// <img> with the PNG inlined, or a visible placeholder (and a listed problem).
void rep_inline_png(Report *R, const char *adir, const char *file, const char *alt, const char *where) {
    char rel[1100], path[5200];
    if (!safe_rel(adir) || !safe_rel(file)) {
        rep_problem(R, "%s: image path \"%.200s\" is not a plain relative path inside the run folder", where,
                file ? file : "");
        hb_puts(&R->out, "<span class=\"missing\">bad path</span>");
        return;
    }
    snprintf(rel, sizeof rel, "%s/%s", adir, file);
    snprintf(path, sizeof path, "%s/%s", R->dir, rel);
    // Read it from inside DIR only (no link on the way: core/files.h), at most 16 MiB,
    // look at the header (a report shows images up to 4096 px a side, so a small file
    // cannot ask for gigabytes when decoded), then decode those same bytes: only a PNG
    // that libpng reads cleanly is inlined.
    char *contents = NULL;
    size_t len = 0;
    int missing = 0;
    const char *why = NULL;
    FpError err = {0}, rerr = {0};
    if (fp_read_beneath(R->dir, rel, 16 << 20, &contents, &len, &missing, &rerr) != FP_OK)
        why = missing ? "no such file" : rerr.msg;
    else if (len < 24 || memcmp(contents, "\x89PNG\r\n\x1a\n", 8) != 0 || memcmp(contents + 12, "IHDR", 4) != 0)
        why = "not a PNG file";
    else {
        const unsigned char *u = (const unsigned char *)contents;
        unsigned long pw = (unsigned long)u[16] << 24 | u[17] << 16 | u[18] << 8 | u[19];
        unsigned long ph = (unsigned long)u[20] << 24 | u[21] << 16 | u[22] << 8 | u[23];
        if (pw > 4096 || ph > 4096)
            why = "larger than 4096 pixels on a side";
    }
    float *img = NULL;
    int c, h = 0, w = 0;
    if (!why && png_read_memory(path, contents, len, &img, &c, &h, &w, &err) != FP_OK)
        why = err.msg;
    free(img);
    if (rerr.code == FP_ENOMEM || err.code == FP_ENOMEM) { // not the image's fault: the report fails
        free(contents);
        R->out.oom = 1;
        return;
    }
    if (why) {
        rep_problem(R, "%s: %s: %s", where, rel, why);
        free(contents);
        hb_puts(&R->out, "<span class=\"missing\">image missing</span>");
        return;
    }
    gchar *b64 = g_base64_encode((const guchar *)contents, len);
    free(contents);
    int scale = w <= 40 ? 2 : 1; // small digits are unreadable at 1:1
    hb_printf(&R->out, "<img width=\"%d\" height=\"%d\" alt=\"", w * scale, h * scale);
    hb_escape_attr(&R->out, alt);
    hb_puts(&R->out, "\" src=\"data:image/png;base64,");
    hb_puts(&R->out, b64);
    hb_puts(&R->out, "\">");
    g_free(b64);
}


static const char *css =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;margin:24px auto;"
    "max-width:1240px;padding:0 16px}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #ddd;"
    "padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}"
    "table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #d6d6d6;padding:4px 8px;text-align:left;"
    "vertical-align:top}th{background:#f3f3f3;font-weight:600}td.name{white-space:nowrap}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums;white-space:nowrap}small,.note{color:#666}.note{font-size:12.5px}"
    "td small{display:block;font-size:11px;line-height:1.25;white-space:normal}.wide{overflow-x:auto}"
    "table.matrix td.num small{max-width:190px;margin-left:auto}.ci{color:#555;font-size:11.5px}"
    ".st-done{color:#1b7a2f}.st-diverged{background:#fde2c8;color:#8a3b00;font-weight:600}"
    ".st-failed{background:#f8d0d0;color:#8b0000;font-weight:600}.st-pending,.st-skipped,.st-n\\/a{color:#777;"
    "font-style:italic}.problems{background:#fff4e5;border:1px solid #f0c36d;padding:6px 12px}"
    ".warnings{background:#fffbe6;border:1px solid #e0c050;padding:6px 12px}.warnings li{margin:4px 0}"
    ".wkind{font:600 11px ui-monospace,monospace;background:#f3e3a0;border-radius:3px;padding:0 4px;"
    "margin-right:6px}.warn{color:#a05a00;font-weight:700;cursor:help}"
    ".g-proven{background:#d8f0dc;color:#14532d}.g-conditional{background:#fdf0c8;color:#7a4d00}"
    ".g-none{background:#eee;color:#555}.badge{font-size:11px;border-radius:3px;padding:0 4px;white-space:nowrap}"
    "tr.chance td{background:#fafafa;color:#555;font-style:italic;border-top:2px solid #bbb}"
    ".missing{display:inline-block;border:1px dashed #c00;color:#c00;padding:8px;font-size:12px}"
    ".plots{display:flex;flex-wrap:wrap;gap:8px 18px}.plotbox{flex:0 0 auto}.plotbox h3{margin:6px 0 0 58px}"
    ".legend{list-style:none;padding:0;margin:4px 0;font-size:12.5px}.legend li{display:inline-block;"
    "margin-right:14px}.legend svg{vertical-align:middle;margin-right:4px}"
    ".recon{display:flex;flex-wrap:wrap;align-items:flex-start;gap:6px;margin:4px 0 10px}figure{margin:0;"
    "min-width:64px;text-align:center;font-size:11px;line-height:1.25;color:#444}figure img{margin:0 auto;"
    "display:block;image-rendering:pixelated;border:1px solid #ccc}.sep{width:10px}"
    ".scale{display:inline-block;width:120px;height:10px;vertical-align:middle;margin:0 4px}"
    ".scale-leak{background:linear-gradient(90deg,hsl(120,60%,82%),hsl(60,60%,82%),hsl(0,60%,82%))}"
    ".scale-acc{background:linear-gradient(90deg,hsl(0,60%,82%),hsl(60,60%,82%),hsl(120,60%,82%))}"
    "details{margin:6px 0}summary{cursor:pointer;color:#335}"
    "pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow:auto;font-size:12px;max-height:360px}"
    "dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px}dt{font-weight:600}dd{margin:0}"
    "ul.why{margin:2px 0 0 16px;padding:0;font-size:12px;color:#555}";

// ---- warnings ------------------------------------------------------------------------------------

void section_warnings(Report *R) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    hb_puts(o, "<h2 id=\"warnings\">Warnings</h2>");
    if (S->n_warnings == 0) {
        hb_puts(o, "<p class=\"note\">None: every setting learned above chance, every attack leaks without a "
                   "defense, the nominal ε share one unit and notion, and no defense adds its noise after an "
                   "attack's observation point.</p>");
        return;
    }
    hb_printf(o, "<div class=\"warnings\"><b>%d warning%s</b> — read these before the numbers below (also in "
                 "<code>results.json</code>, <code>summary.warnings</code>).<ul>",
              S->n_warnings, S->n_warnings == 1 ? "" : "s");
    for (int i = 0; i < S->n_warnings; i++) {
        hb_puts(o, "<li><span class=\"wkind\">");
        hb_escape(o, S->warnings[i].kind);
        hb_puts(o, "</span>");
        hb_escape(o, S->warnings[i].message);
        hb_puts(o, "</li>");
    }
    hb_puts(o, "</ul></div>");
}

// ---- the page ------------------------------------------------------------------------------------

FpStatus report_write_html(const char *dir, const char *out_path, const ReportOptions *opt, int *problems,
                           FpError *err) {
    Report R = {.dir = dir, .max_images = opt && opt->max_images > 0 ? opt->max_images : 8};
    FP_TRY(matrix_results_load(dir, &R.r, err));
    FpStatus st = run_summary_build(&R.r, &R.S, err);
    if (st != FP_OK) {
        matrix_results_free(&R.r);
        return st;
    }
    hb_init(&R.out);
    hb_init(&R.problems);
    for (int i = 0; i < R.r.n; i++)
        if (R.r.status[i] == CELL_FAILED) {
            const cJSON *c = R.r.cells[i];
            rep_problem(&R, "cell \"%.120s\" failed: %.400s", rep_str(matrix_index_cell(&R.r, i), "label", "?"),
                        c ? rep_str(c, "message", "") : "");
        }
    // The body first: problems found while writing it go in the box at the top.
    section_warnings(&R);
    section_matrix(&R);
    section_tradeoff(&R);
    section_curves(&R);
    section_images(&R);
    section_privacy(&R);
    section_audit(&R);
    section_metadata(&R);
    const char *title = opt && opt->title ? opt->title : "fedpriv report";
    HtmlBuf page;
    hb_init(&page);
    hb_puts(&page, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
                   "style-src 'unsafe-inline'\"><meta name=\"viewport\" content=\"width=device-width\"><title>");
    hb_escape(&page, title);
    hb_puts(&page, "</title><style>");
    hb_puts(&page, css);
    hb_puts(&page, "</style></head><body><h1>");
    hb_escape(&page, title);
    hb_puts(&page, "</h1><p>");
    const char *desc = rep_str(R.r.index, "description", "");
    if (desc[0]) {
        hb_escape(&page, desc);
        hb_puts(&page, " · ");
    }
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(R.r.index, "dataset");
    hb_escape(&page, rep_str(ds, "name", "?"));
    hb_puts(&page, " · model ");
    hb_escape(&page, rep_str(cJSON_GetObjectItemCaseSensitive(R.r.index, "model"), "name", "?"));
    const cJSON *fed = cJSON_GetObjectItemCaseSensitive(R.r.index, "federation");
    double clients = rep_num(fed, "clients"), q = rep_num(fed, "sample_rate"), rounds = rep_num(fed, "rounds");
    if (isfinite(clients))
        hb_printf(&page, " · %.0f clients, q = %g, %.0f rounds", clients, q, rounds);
    int counts[4] = {0};
    for (int i = 0; i < R.r.n; i++)
        counts[R.r.status[i]]++;
    hb_printf(&page, " · %d defense settings × %d attacks × %d seed%s · %d cells: %d done, %d diverged, %d failed, "
                     "%d pending</p>",
              R.S.n_settings, R.S.n_attacks, R.S.n_seeds, R.S.n_seeds == 1 ? "" : "s", R.r.n, counts[CELL_DONE],
              counts[CELL_DIVERGED], counts[CELL_FAILED], counts[CELL_PENDING]);
    hb_puts(&page, "<p class=\"note\"><a href=\"#warnings\">Warnings</a> · <a href=\"#matrix\">Matrix</a> · "
                   "<a href=\"#tradeoff\">Privacy–utility</a> · <a href=\"#curves\">Accuracy and ROC curves</a> · "
                   "<a href=\"#reconstructions\">Reconstructions</a> · <a href=\"#privacy\">Privacy spent</a> · "
                   "<a href=\"#audit\">Audit</a> · <a href=\"#metadata\">Metadata</a></p>");
    if (R.n_problems) {
        hb_printf(&page, "<div class=\"problems\"><b>%d problem%s</b><ul>", R.n_problems, R.n_problems == 1 ? "" : "s");
        hb_put(&page, R.problems.s ? R.problems.s : "", R.problems.len);
        hb_puts(&page, "</ul></div>");
    }
    hb_put(&page, R.out.s ? R.out.s : "", R.out.len);
    hb_puts(&page, "<p class=\"note\">Generated by fedpriv ");
    hb_escape(&page, FEDPRIV_VERSION);
    hb_puts(&page, ".</p></body></html>\n");
    if (page.oom || R.out.oom || R.problems.oom)
        st = fp_fail(err, FP_ENOMEM, "out of memory writing the report");
    else
        st = report_write_file_atomic(out_path, page.s, page.len, err);
    if (problems)
        *problems = R.n_problems;
    hb_free(&page);
    hb_free(&R.out);
    hb_free(&R.problems);
    run_summary_free(&R.S);
    matrix_results_free(&R.r);
    return st;
}
