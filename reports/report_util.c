// The helpers the report's section files share (reports/report_internal.h): reading
// fields of a result, the problems box, numbers, statistics and status words as HTML,
// and inlined PNG artifacts. The page itself (reports/html.c) and every section file
// call these; none of them calls back into a section, so the files form no circle.
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

#include "core/files.h"
#include "core/json_number.h"
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

// Three decimals, without "-0.000".
static void put3(HtmlBuf *o, double v) { hb_printf(o, "%.3f", fabs(v) < 5e-4 ? 0.0 : v); }

void rep_put_stat(HtmlBuf *o, const MetricSummary *m) {
    const SeedStat *s = &m->stat;
    if (s->n == 0) {
        hb_puts(o, "—");
        return;
    }
    if (isinf(s->mean)) {
        rep_put_num(o, s->mean);
        return;
    }
    put3(o, s->mean);
    MetricInterval iv = metric_interval(m);
    if (iv.kind == INTERVAL_STUDENT_T)
        hb_printf(o, "<span class=\"ci\"> ± %.3f</span>", (iv.high - iv.low) / 2);
    else if (iv.kind == INTERVAL_WILSON) {
        hb_puts(o, "<span class=\"ci\"> [");
        put3(o, iv.low);
        hb_puts(o, ", ");
        put3(o, iv.high);
        hb_puts(o, "]</span>");
    } else if (s->n == 2 && isfinite(s->min) && isfinite(s->max) && s->min != s->max) { // both values, no interval
        hb_puts(o, "<span class=\"ci\"> ");
        put3(o, s->min);
        hb_puts(o, "–");
        put3(o, s->max);
        hb_puts(o, "</span>");
    }
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
    } else if (n == 1 && !isnan(m->values[0])) {
        snprintf(t, sizeof t, "%.6g", m->values[0]);
        hb_printf(o, "%s (one seed)", t);
    }
    MetricInterval iv = metric_interval(m);
    if (iv.kind == INTERVAL_WILSON)
        hb_printf(o, "; %.0f of %.0f pooled over %d seed%s, Wilson 95%% interval [%.4g, %.4g]", m->successes, m->trials,
                  m->stat.n, m->stat.n == 1 ? "" : "s", iv.low, iv.high);
    else if (iv.kind == INTERVAL_STUDENT_T)
        hb_printf(o, "; mean %.4g, 95%% CI [%.4g, %.4g] (Student t over %d seeds)", m->stat.mean, iv.low, iv.high,
                  m->stat.n);
    else if (m->stat.n == 2)
        hb_puts(o, "; two seeds: their values, no interval (a t-interval needs 3)");
    else if (m->stat.n == 1)
        hb_puts(o, ": no interval");
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

