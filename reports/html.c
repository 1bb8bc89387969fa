// The HTML report (see reports/html.h). Sections, in page order: summary and problems,
// the attack × defense matrix with a colour scale, privacy spent, accuracy per round,
// ROC curves, reconstructions, audit findings, run metadata.
//
// Artifacts are read only from inside DIR: a path from a result must be relative,
// without "..", every component is opened without following a symbolic link
// (core/files.h), and the file must decode as a PNG (eval/png.h) before its bytes are
// inlined; anything else is listed as a problem instead of drawing a broken image.
#include "reports/html.h"

#include <errno.h>
#include <glib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/files.h"
#include "core/jsonv.h"
#include "core/version.h"
#include "eval/png.h"
#include "reports/results.h"
#include "reports/svg.h"

// ---- buffer and escaping --------------------------------------------------------------

void hb_init(HtmlBuf *b) { *b = (HtmlBuf){0}; }
void hb_free(HtmlBuf *b) {
    free(b->s);
    *b = (HtmlBuf){0};
}

void hb_put(HtmlBuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void hb_puts(HtmlBuf *b, const char *s) { hb_put(b, s, strlen(s)); }

void hb_printf(HtmlBuf *b, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        hb_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    hb_put(b, big, (size_t)n);
    free(big);
}

// Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one.
static int utf8_len(const unsigned char *s) {
    if (s[0] < 0x80)
        return 1;
    int n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4))
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
        return 0; // overlong, surrogates
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}

void hb_escape(HtmlBuf *b, const char *text) {
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    while (*s) {
        switch (*s) {
        case '&': hb_puts(b, "&amp;"); s++; continue;
        case '<': hb_puts(b, "&lt;"); s++; continue;
        case '>': hb_puts(b, "&gt;"); s++; continue;
        case '"': hb_puts(b, "&quot;"); s++; continue;
        case '\'': hb_puts(b, "&#39;"); s++; continue;
        default: break;
        }
        if ((*s < 0x20 && *s != '\n' && *s != '\t') || *s == 0x7F) {
            hb_puts(b, "\xEF\xBF\xBD");
            s++;
            continue;
        }
        int n = utf8_len(s);
        if (n == 0) {
            hb_puts(b, "\xEF\xBF\xBD");
            s++;
        } else {
            hb_put(b, (const char *)s, (size_t)n);
            s += n;
        }
    }
}

void hb_escape_attr(HtmlBuf *b, const char *text) { hb_escape(b, text); }

FpStatus report_write_file_atomic(const char *path, const char *data, size_t n, FpError *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fp_create_new(tmp, err);
    if (!f)
        return FP_EIO;
    int ok = fwrite(data, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: write failed: %s", path, strerror(saved ? saved : EIO));
    }
    if (rename(tmp, path) != 0) {
        saved = errno;
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: cannot rename into place: %s", path, strerror(saved));
    }
    return FP_OK;
}

// ---- the report ------------------------------------------------------------------------

typedef struct Report {
    const char *dir;
    MatrixResults r;
    const cJSON *attacks; // the index's attack list
    int n_attacks;
    HtmlBuf out;
    HtmlBuf problems;     // <li> items
    int n_problems;
    int max_images;
} Report;

static const char *jstr(const cJSON *o, const char *key, const char *def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : def;
}

// A number, or NaN (also for null, "inf" strings and absent keys; see jvalue_text).
static double jnum(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void problem(Report *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(Report *R, const char *fmt, ...) {
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

// A figure in a privacy column: numbers, "inf" (no guarantee), or absent.
static void put_value(HtmlBuf *o, const cJSON *v) {
    if (cJSON_IsNumber(v))
        hb_printf(o, "%.4g", v->valuedouble);
    else if (cJSON_IsString(v) && strcmp(v->valuestring, "inf") == 0)
        hb_puts(o, "∞");
    else if (cJSON_IsString(v))
        hb_escape(o, v->valuestring);
    else
        hb_puts(o, "—");
}

static const cJSON *cell_attack_at(const cJSON *cell, int k) {
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(cell, "attacks")) {
        if (jnum(a, "index") == (double)k) // NaN (absent) never equals
            return a;
    }
    return NULL;
}

static const cJSON *index_cell(const Report *R, int i) {
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(R->r.index, "cells"), i);
}

static const char *cell_label(const Report *R, int i) { return jstr(index_cell(R, i), "label", "?"); }

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
static void inline_png(Report *R, const char *adir, const char *file, const char *alt, const char *where) {
    char rel[1100], path[5200];
    if (!safe_rel(adir) || !safe_rel(file)) {
        problem(R, "%s: image path \"%.200s\" is not a plain relative path inside the run folder", where,
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
    if (why) {
        problem(R, "%s: %s: %s", where, rel, why);
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
    "max-width:1180px;padding:0 16px}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #ddd;"
    "padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}"
    "table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #d6d6d6;padding:4px 8px;text-align:left;"
    "vertical-align:top}th{background:#f3f3f3;font-weight:600}td.name{white-space:nowrap}td.num{text-align:right;font-variant-numeric:"
    "tabular-nums}td.na{color:#555;font-style:italic;background:#eee}small,.note{color:#666}.note{font-size:12.5px}"
    ".st-done{color:#1b7a2f}.st-diverged{background:#fde2c8;color:#8a3b00;font-weight:600}"
    ".st-failed{background:#f8d0d0;color:#8b0000;font-weight:600}.st-pending,.st-skipped{color:#777;"
    "font-style:italic}.problems{background:#fff4e5;border:1px solid #f0c36d;padding:6px 12px}"
    ".missing{display:inline-block;border:1px dashed #c00;color:#c00;padding:8px;font-size:12px}"
    ".plots{display:flex;flex-wrap:wrap;gap:8px 18px}.plotbox{flex:0 0 auto}.plotbox h3{margin:6px 0 0 58px}"
    ".legend{list-style:none;padding:0;margin:4px 0;font-size:12.5px}.legend li{display:inline-block;"
    "margin-right:14px}.legend svg{vertical-align:middle;margin-right:4px}"
    ".recon{display:flex;flex-wrap:wrap;align-items:flex-start;gap:6px;margin:4px 0 10px}figure{margin:0;"
    "min-width:64px;text-align:center;font-size:11px;line-height:1.25;color:#444}figure img{margin:0 auto}figure img{display:block;image-rendering:pixelated;"
    "border:1px solid #ccc}.sep{width:10px}"
    ".scale{display:inline-block;width:160px;height:10px;vertical-align:middle;background:linear-gradient(90deg,"
    "hsl(120,60%,82%),hsl(60,60%,82%),hsl(0,60%,82%))}"
    "pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow:auto;font-size:12px;max-height:360px}"
    "dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px}dt{font-weight:600}dd{margin:0}"
    ".g-proven{color:#1b7a2f;font-weight:600}.g-conditional{color:#8a5a00;font-weight:600}.g-none{color:#8b0000;"
    "font-weight:600}ul.why{margin:2px 0 0 16px;padding:0;font-size:12px;color:#555}";

static void put_status(HtmlBuf *o, const char *status, const char *message) {
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

// Background colour for a value in a column: green (good) → red (bad).
static void put_scaled_note(HtmlBuf *o, double v, double lo, double hi, int higher_is_bad, const char *note) {
    double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    double bad = higher_is_bad ? t : 1 - t;
    hb_printf(o, "<td class=\"num\" style=\"background:hsl(%.0f,60%%,82%%)\">%.3f", 120 * (1 - bad), v);
    if (note) {
        hb_puts(o, "<br><small>");
        hb_escape(o, note);
        hb_puts(o, "</small>");
    }
    hb_puts(o, "</td>");
}

static void put_scaled(HtmlBuf *o, double v, double lo, double hi, int higher_is_bad) {
    put_scaled_note(o, v, lo, hi, higher_is_bad, NULL);
}

// An attack entry that says it does not apply: it recovers nothing without any defense.
static int entry_not_applicable(const cJSON *a) {
    return a && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(a, "applicable"));
}

static void section_matrix(Report *R) {
    HtmlBuf *o = &R->out;
    int n = R->r.n, K = R->n_attacks;
    // Column ranges over the finished cells: column 0 is model accuracy, 1 + k attack k.
    double *lo = malloc(sizeof(double) * (size_t)(K + 1)), *hi = malloc(sizeof(double) * (size_t)(K + 1));
    if (!lo || !hi) {
        free(lo);
        free(hi);
        o->oom = 1;
        return;
    }
    for (int k = 0; k <= K; k++) {
        lo[k] = INFINITY;
        hi[k] = -INFINITY;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *c = R->r.cells[i];
        if (!c)
            continue;
        double v = jnum(cJSON_GetObjectItemCaseSensitive(c, "model"), "test_accuracy");
        if (isfinite(v)) {
            lo[0] = fmin(lo[0], v);
            hi[0] = fmax(hi[0], v);
        }
        for (int k = 0; k < K; k++) {
            const cJSON *a = cell_attack_at(c, k);
            double av = jnum(a, "value");
            if (a && strcmp(jstr(a, "status", ""), "done") == 0 && isfinite(av) && !entry_not_applicable(a)) {
                lo[k + 1] = fmin(lo[k + 1], av);
                hi[k + 1] = fmax(hi[k + 1], av);
            }
        }
    }
    hb_puts(o, "<h2 id=\"matrix\">Attack × defense matrix</h2>");
    hb_puts(o, "<p class=\"note\">Rows: defense settings; columns: the federated model's final test accuracy and each "
               "attack's headline metric. Colour is relative within a column: <span class=\"scale\"></span> "
               "green = higher accuracy or less leakage, red = lower accuracy or more leakage. A cell that "
               "diverged or failed shows that word, never a number; an attack that recovers nothing against the "
               "same federation without any defense shows \"not applicable\" (its figure would read as "
               "protection). Gradient inversion shows its mean SSIM over the images, each attacked by every "
               "variant of the adaptive attacker with the strongest kept, and how many images it recovered; "
               "its observer is the server (the victim's upload) or public (the released model).</p>");
    int with_params = 0;
    for (int i = 0; i < n; i++)
        with_params |= cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(index_cell(R, i), "params")) > 0;
    hb_puts(o, "<table class=\"matrix\"><thead><tr><th>Defense</th><th>ε</th>");
    if (with_params)
        hb_puts(o, "<th>Other parameters</th>");
    hb_puts(o, "<th>Status</th><th>Model accuracy</th>");
    for (int k = 0; k < K; k++) {
        const cJSON *a = cJSON_GetArrayItem(R->attacks, k);
        hb_puts(o, "<th>");
        hb_escape(o, jstr(a, "name", "?"));
        if (jstr(a, "observer", NULL)) { // gradient inversion: which point of the federation it sees
            hb_puts(o, " <small>(");
            hb_escape(o, jstr(a, "observer", ""));
            hb_puts(o, ")</small>");
        }
        hb_puts(o, "<br><small>");
        hb_escape(o, jstr(a, "headline", ""));
        hb_puts(o, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "higher_leaks")) ? " (higher = more leakage)"
                                                                                     : " (lower = more leakage)");
        hb_puts(o, "</small></th>");
    }
    hb_puts(o, "</tr></thead><tbody>");
    for (int i = 0; i < n; i++) {
        const cJSON *e = index_cell(R, i), *c = R->r.cells[i];
        const char *status = cell_status_name(R->r.status[i]);
        const char *msg = c ? jstr(c, "message", "") : jstr(e, "message", "");
        hb_puts(o, "<tr><td class=\"name\">");
        hb_escape(o, jstr(e, "defense", "?"));
        if (jstr(e, "variant", NULL)) {
            hb_puts(o, " <small>");
            hb_escape(o, jstr(e, "variant", ""));
            hb_puts(o, "</small>");
        }
        hb_puts(o, "</td><td class=\"num\">");
        put_value(o, cJSON_GetObjectItemCaseSensitive(e, "epsilon"));
        hb_puts(o, "</td>");
        if (with_params) {
            hb_puts(o, "<td>");
            const cJSON *params = cJSON_GetObjectItemCaseSensitive(e, "params"), *p;
            cJSON_ArrayForEach(p, params) {
                char *v = cJSON_PrintUnformatted(p);
                hb_escape(o, p->string);
                hb_puts(o, "=");
                hb_escape(o, v ? v : "?");
                hb_puts(o, " ");
                free(v);
            }
            hb_puts(o, "</td>");
        }
        hb_puts(o, "<td>");
        put_status(o, status, msg);
        hb_puts(o, "</td>");
        double acc = c ? jnum(cJSON_GetObjectItemCaseSensitive(c, "model"), "test_accuracy") : NAN;
        if (isfinite(acc))
            put_scaled(o, acc, lo[0], hi[0], 0);
        else {
            hb_puts(o, "<td>");
            put_status(o, R->r.status[i] == CELL_DONE ? "n/a" : status, msg);
            hb_puts(o, "</td>");
        }
        for (int k = 0; k < K; k++) {
            const cJSON *a = c ? cell_attack_at(c, k) : NULL;
            double v = jnum(a, "value");
            int done = a && strcmp(jstr(a, "status", ""), "done") == 0 && isfinite(v);
            // Gradient inversion counts recovered images (SSIM >= recovered_ssim) beside its mean.
            const cJSON *res = a ? cJSON_GetObjectItemCaseSensitive(a, "result") : NULL;
            const cJSON *rec = cJSON_GetObjectItemCaseSensitive(res, "images_recovered");
            const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(res, "images");
            char note[96];
            if (cJSON_IsNumber(rec) && cJSON_IsArray(imgs))
                snprintf(note, sizeof note, "%d of %d recovered (SSIM ≥ %g)", rec->valueint,
                         cJSON_GetArraySize(imgs), jnum(res, "recovered_ssim"));
            if (done && entry_not_applicable(a)) // no number: it would read as protection
                hb_puts(o, "<td class=\"na\" title=\"the attack recovers nothing against this federation without any "
                           "defense, so its figures here are no evidence of protection\">not applicable</td>");
            else if (done)
                put_scaled_note(o, v, lo[k + 1], hi[k + 1],
                                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "higher_leaks")),
                                cJSON_IsNumber(rec) && cJSON_IsArray(imgs) ? note : NULL);
            else {
                hb_puts(o, "<td>");
                put_status(o, a ? jstr(a, "status", "failed") : status, a ? jstr(a, "message", "") : msg);
                hb_puts(o, "</td>");
            }
        }
        hb_puts(o, "</tr>");
    }
    hb_puts(o, "</tbody></table>");
    free(lo);
    free(hi);
}

// A privacy record's guarantee: the state, then its assumptions (conditional) or its
// reasons (none) as a list.
static void put_guarantee(HtmlBuf *o, const cJSON *p) {
    const char *g = jstr(p, "guarantee", "");
    int known = strcmp(g, "proven") == 0 || strcmp(g, "conditional") == 0 || strcmp(g, "none") == 0;
    if (!known) { // a record written before guarantees: it claims nothing proven
        hb_puts(o, "—");
        return;
    }
    hb_puts(o, "<span class=\"g-");
    hb_escape_attr(o, g);
    hb_puts(o, "\">");
    hb_escape(o, g);
    hb_puts(o, "</span>");
    const cJSON *as = cJSON_GetObjectItemCaseSensitive(p, "assumptions"), *a;
    if (cJSON_GetArraySize(as) > 0) {
        hb_puts(o, strcmp(g, "conditional") == 0 ? "<br><small>if:</small>" : "<br><small>because:</small>");
        hb_puts(o, "<ul class=\"why\">");
        cJSON_ArrayForEach(a, as) {
            hb_puts(o, "<li>");
            hb_escape(o, cJSON_IsString(a) ? a->valuestring : "?");
            hb_puts(o, "</li>");
        }
        hb_puts(o, "</ul>");
    }
}

// A sound figure: the proven number (∞ when there is none), and beside it, for a
// conditional record, the bound that holds if its assumptions do.
static void put_sound(HtmlBuf *o, const cJSON *obj) {
    put_value(o, cJSON_GetObjectItemCaseSensitive(obj, "epsilon_total"));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, "epsilon_total_conditional");
    if (c) {
        hb_puts(o, "<br><small>");
        put_value(o, c);
        hb_puts(o, " if</small>");
    }
}

static void section_privacy(Report *R) {
    HtmlBuf *o = &R->out;
    hb_puts(o, "<h2 id=\"privacy\">Privacy spent</h2><p class=\"note\">After the last round of the cell's federation. "
               "<b>Nominal</b>: the ε the defense's paper claims, composed as the paper composes it. <b>Sound</b>: a "
               "bound that holds (ε, δ) by the accountant named, for the code as it runs. <b>Guarantee</b>: "
               "<span class=\"g-proven\">proven</span> (the sound ε is a theorem for what runs), "
               "<span class=\"g-conditional\">conditional</span> (the sound ε is ∞; the bound under it holds if the "
               "listed assumptions do) or <span class=\"g-none\">none</span> (with the reasons). <b>Upload "
               "observer</b>: the bound against the server or an eavesdropper who sees a client's own uploads, when "
               "the defense states one. ∞ = no guarantee, — = not defined.</p>");
    hb_puts(o, "<table><thead><tr><th>Defense setting</th><th>Unit</th><th>Nominal ε (per round)</th>"
               "<th>Nominal ε (total)</th><th>Nominal notion</th><th>Guarantee</th><th>Sound ε (total)</th><th>δ</th>"
               "<th>Sound notion</th><th>Upload observer ε</th><th>σ</th></tr></thead><tbody>");
    for (int i = 0; i < R->r.n; i++) {
        const cJSON *c = R->r.cells[i];
        const cJSON *p = c ? cJSON_GetObjectItemCaseSensitive(c, "privacy") : NULL;
        hb_puts(o, "<tr><td>");
        hb_escape(o, cell_label(R, i));
        hb_puts(o, "</td>");
        if (!p) {
            hb_puts(o, "<td colspan=\"10\">");
            put_status(o, cell_status_name(R->r.status[i]), c ? jstr(c, "message", "") : "");
            hb_puts(o, "</td></tr>");
            continue;
        }
        const cJSON *nom = cJSON_GetObjectItemCaseSensitive(p, "nominal");
        const cJSON *snd = cJSON_GetObjectItemCaseSensitive(p, "sound");
        const cJSON *up = cJSON_GetObjectItemCaseSensitive(snd, "upload");
        hb_puts(o, "<td>");
        hb_escape(o, jstr(p, "unit", ""));
        hb_puts(o, "</td><td class=\"num\">");
        put_value(o, cJSON_GetObjectItemCaseSensitive(nom, "epsilon_round"));
        hb_puts(o, "</td><td class=\"num\">");
        put_value(o, cJSON_GetObjectItemCaseSensitive(nom, "epsilon_total"));
        hb_puts(o, "</td><td><small>");
        hb_escape(o, jstr(nom, "notion", ""));
        hb_puts(o, "</small></td><td>");
        put_guarantee(o, p);
        hb_puts(o, "</td><td class=\"num\">");
        put_sound(o, snd);
        hb_puts(o, "</td><td class=\"num\">");
        put_value(o, cJSON_GetObjectItemCaseSensitive(snd, "delta"));
        hb_puts(o, "</td><td><small>");
        hb_escape(o, jstr(snd, "notion", ""));
        hb_puts(o, "</small></td><td class=\"num\">");
        if (up) { // the notion on hover: the column stays narrow
            hb_puts(o, "<span title=\"");
            hb_escape_attr(o, jstr(up, "notion", ""));
            hb_puts(o, "\">");
            put_sound(o, up);
            hb_puts(o, "</span>");
        } else {
            hb_puts(o, "—");
        }
        hb_puts(o, "</td><td class=\"num\">");
        put_value(o, cJSON_GetObjectItemCaseSensitive(p, "sigma"));
        hb_puts(o, "</td></tr>");
    }
    hb_puts(o, "</tbody></table>");
}

// Series over the cells (label = the cell's); xs/ys filled per cell by get().
typedef int (*SeriesGet)(const cJSON *cell, int k, double **x, double **y, int *n);

static int get_rounds(const cJSON *cell, int key, double **x, double **y, int *n) {
    const cJSON *rounds = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cell, "model"), "rounds");
    int m = cJSON_GetArraySize(rounds);
    if (m <= 0)
        return 0;
    *x = malloc(sizeof(double) * (size_t)m);
    *y = malloc(sizeof(double) * (size_t)m);
    if (!*x || !*y)
        return 0;
    for (int r = 0; r < m; r++) {
        const cJSON *o = cJSON_GetArrayItem(rounds, r);
        (*x)[r] = jnum(o, "round");
        (*y)[r] = jnum(o, key ? "test_loss" : "test_accuracy");
    }
    *n = m;
    return 1;
}

// ROC points of attack k in a cell: {"fpr": [...], "tpr": [...]}, [[fpr, tpr], ...] or
// [{"fpr": f, "tpr": t}, ...] under "roc".
static int get_roc(const cJSON *cell, int k, double **x, double **y, int *n) {
    const cJSON *a = cell_attack_at(cell, k);
    if (!a || strcmp(jstr(a, "status", ""), "done") != 0)
        return 0;
    const cJSON *roc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "result"), "roc");
    const cJSON *fa = cJSON_GetObjectItemCaseSensitive(roc, "fpr"), *ta = cJSON_GetObjectItemCaseSensitive(roc, "tpr");
    int m = cJSON_IsArray(fa) && cJSON_IsArray(ta) ? cJSON_GetArraySize(fa) : cJSON_IsArray(roc) ? cJSON_GetArraySize(roc) : 0;
    if (cJSON_IsArray(fa) && cJSON_GetArraySize(ta) != m)
        return 0;
    if (m <= 0 || m > 1000000)
        return 0;
    *x = malloc(sizeof(double) * (size_t)m);
    *y = malloc(sizeof(double) * (size_t)m);
    if (!*x || !*y)
        return 0;
    for (int i = 0; i < m; i++) {
        const cJSON *fx, *ty;
        if (cJSON_IsArray(fa)) {
            fx = cJSON_GetArrayItem(fa, i);
            ty = cJSON_GetArrayItem(ta, i);
        } else {
            const cJSON *pt = cJSON_GetArrayItem(roc, i);
            fx = cJSON_IsArray(pt) ? cJSON_GetArrayItem(pt, 0) : cJSON_GetObjectItemCaseSensitive(pt, "fpr");
            ty = cJSON_IsArray(pt) ? cJSON_GetArrayItem(pt, 1) : cJSON_GetObjectItemCaseSensitive(pt, "tpr");
        }
        (*x)[i] = cJSON_IsNumber(fx) ? fx->valuedouble : NAN;
        (*y)[i] = cJSON_IsNumber(ty) ? ty->valuedouble : NAN;
    }
    *n = m;
    return 1;
}

// Builds one series per cell that has data; returns how many.
static int collect(Report *R, SeriesGet get, int k, SvgSeries *s) {
    int ns = 0;
    for (int i = 0; i < R->r.n; i++) {
        if (!R->r.cells[i])
            continue;
        double *x = NULL, *y = NULL;
        int n = 0;
        if (!get(R->r.cells[i], k, &x, &y, &n)) {
            free(x);
            free(y);
            continue;
        }
        s[ns++] = (SvgSeries){.label = cell_label(R, i), .x = x, .y = y, .n = n, .style = i};
    }
    return ns;
}

static void free_series(SvgSeries *s, int n) {
    for (int i = 0; i < n; i++) {
        free((void *)s[i].x);
        free((void *)s[i].y);
    }
}

static void section_curves(Report *R) {
    HtmlBuf *o = &R->out;
    SvgSeries *s = calloc((size_t)(R->r.n ? R->r.n : 1), sizeof(SvgSeries));
    if (!s) {
        o->oom = 1;
        return;
    }
    hb_puts(o, "<h2 id=\"curves\">Accuracy per round and ROC curves</h2><p class=\"note\">Left: the federated "
               "model's test accuracy after each round. Then one ROC curve per membership attack, on balanced "
               "member/non-member sets; the FPR axis is logarithmic so the low-FPR regime, where leaks matter, is "
               "visible; dashed: chance. One colour per defense setting in every plot.</p>");
    // The shared legend: every cell that has a result.
    int nl = 0;
    for (int i = 0; i < R->r.n; i++)
        if (R->r.cells[i])
            s[nl++] = (SvgSeries){.label = cell_label(R, i), .style = i};
    svg_legend(o, s, nl);
    hb_puts(o, "<div class=\"plots\">");
    int regression = 0, ns = collect(R, get_rounds, 0, s);
    int any = 0;
    for (int i = 0; i < ns; i++)
        for (int k = 0; k < s[i].n; k++)
            any |= isfinite(s[i].y[k]);
    if (!any) { // a regression task: plot the test loss instead
        free_series(s, ns);
        ns = collect(R, get_rounds, 1, s);
        regression = 1;
    }
    double xmax = 1, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < ns; i++)
        for (int k = 0; k < s[i].n; k++)
            if (isfinite(s[i].x[k]) && isfinite(s[i].y[k])) {
                xmax = fmax(xmax, s[i].x[k]);
                ymin = fmin(ymin, s[i].y[k]);
                ymax = fmax(ymax, s[i].y[k]);
            }
    if (!regression) {
        ymin = 0;
        ymax = 1;
    } else if (!(ymax > ymin)) {
        ymin = isfinite(ymin) ? ymin - 1 : 0;
        ymax = ymin + 2;
    }
    SvgPlot p = {.title = regression ? "test loss per round" : "test accuracy per round", .xlabel = "round",
                 .ylabel = regression ? "test loss" : "test accuracy", .xmin = xmax > 1 ? 1 : 0, .xmax = xmax,
                 .ymin = ymin, .ymax = ymax, .x_integer = 1, .width = 370, .height = 280};
    hb_puts(o, "<div class=\"plotbox\"><h3>");
    hb_puts(o, regression ? "Test loss per round" : "Test accuracy per round");
    hb_puts(o, "</h3>");
    if (ns == 0)
        hb_puts(o, "<p class=\"note\">No finished cell yet.</p>");
    else
        svg_line_plot(o, &p, s, ns);
    hb_puts(o, "</div>");
    free_series(s, ns);
    int plots = 0;
    for (int k = 0; k < R->n_attacks; k++) {
        ns = collect(R, get_roc, k, s);
        if (ns == 0)
            continue;
        double fmin_pos = 1;
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < s[i].n; j++)
                if (s[i].x[j] > 0 && s[i].x[j] < fmin_pos)
                    fmin_pos = s[i].x[j];
        double xmin = pow(10, floor(log10(fmin_pos)));
        xmin = fmin(fmax(xmin, 1e-5), 1e-2);
        char title[160];
        const char *name = jstr(cJSON_GetArrayItem(R->attacks, k), "name", "?");
        snprintf(title, sizeof title, "ROC of %.100s (log FPR)", name);
        SvgPlot rp = {.title = title, .xlabel = "false positive rate (log scale)", .ylabel = "true positive rate",
                      .log_x = 1, .xmin = xmin, .xmax = 1, .ymin = 0, .ymax = 1, .diagonal = 1, .width = 370,
                      .height = 280};
        hb_puts(o, "<div class=\"plotbox\"><h3>ROC: ");
        hb_escape(o, name);
        hb_puts(o, "</h3>");
        svg_line_plot(o, &rp, s, ns);
        hb_puts(o, "</div>");
        free_series(s, ns);
        plots++;
    }
    hb_puts(o, "</div>");
    if (plots == 0)
        hb_puts(o, "<p class=\"note\">No attack in this run reported ROC points.</p>");
    free(s);
}

// One figure: an image and a two-line caption (what it is; its SSIM).
static void figure(Report *R, const char *adir, const char *file, const char *caption, double ssim,
                   const char *where) {
    hb_puts(&R->out, "<figure>");
    inline_png(R, adir, file, caption, where);
    hb_puts(&R->out, "<figcaption>");
    hb_escape(&R->out, caption);
    hb_puts(&R->out, "<br>");
    if (isfinite(ssim))
        hb_printf(&R->out, "SSIM %.3f", fabs(ssim) < 5e-4 ? 0.0 : ssim); // no "-0.000"
    else
        hb_puts(&R->out, "&nbsp;");
    hb_puts(&R->out, "</figcaption></figure>");
}

static void section_images(Report *R) {
    HtmlBuf *o = &R->out;
    hb_puts(o, "<h2 id=\"reconstructions\">Reconstructions</h2>");
    int shown = 0;
    for (int k = 0; k < R->n_attacks; k++) {
        const char *name = jstr(cJSON_GetArrayItem(R->attacks, k), "name", "?");
        int header = 0;
        for (int i = 0; i < R->r.n; i++) {
            const cJSON *a = R->r.cells[i] ? cell_attack_at(R->r.cells[i], k) : NULL;
            const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "result"), "images");
            if (!cJSON_IsArray(imgs) || cJSON_GetArraySize(imgs) == 0)
                continue;
            const char *adir = jstr(a, "dir", "");
            if (!header) {
                hb_puts(o, "<h3>");
                hb_escape(o, name);
                hb_puts(o, "</h3><p class=\"note\">Per image: the original, the reconstruction at intermediate steps, "
                           "and the final one, with SSIM to the original.</p>");
                header = 1;
            }
            hb_puts(o, "<div><b>");
            hb_escape(o, cell_label(R, i));
            hb_printf(o, "</b> <small>mean SSIM %.3f</small></div><div class=\"recon\">",
                      jnum(cJSON_GetObjectItemCaseSensitive(a, "result"), "ssim_mean"));
            int m = 0;
            const cJSON *im;
            cJSON_ArrayForEach(im, imgs) {
                if (m++ >= R->max_images)
                    break;
                char where[400], cap[96];
                snprintf(where, sizeof where, "%.120s, %.60s, image %d", cell_label(R, i), name, m - 1);
                const char *orig = jstr(im, "original_png", NULL);
                if (orig)
                    figure(R, adir, orig, "original", NAN, where);
                // At most 3 snapshots, evenly spaced (the final image follows them).
                const cJSON *snaps = cJSON_GetObjectItemCaseSensitive(im, "snapshots");
                int nsnap = cJSON_GetArraySize(snaps), shown_snap = nsnap < 3 ? nsnap : 3;
                for (int q = 0; q < shown_snap; q++) {
                    const cJSON *snap = cJSON_GetArrayItem(snaps, (int)lround((q + 1.0) * nsnap / shown_snap) - 1);
                    const char *png = jstr(snap, "png", NULL);
                    if (!png)
                        continue;
                    snprintf(cap, sizeof cap, "step %g", jnum(snap, "step"));
                    figure(R, adir, png, cap, jnum(snap, "ssim"), where);
                }
                const char *rec = jstr(im, "reconstruction_png", NULL);
                if (rec)
                    figure(R, adir, rec, "final", jnum(im, "ssim"), where);
                hb_puts(o, "<div class=\"sep\"></div>");
                shown++;
            }
            hb_puts(o, "</div>");
        }
    }
    if (!shown)
        hb_puts(o, "<p class=\"note\">No attack in this run produced reconstructions.</p>");
}

// Audit findings stored with the run (matrix_audit_load).
static void audit_row(Report *R, const cJSON *a) {
    HtmlBuf *o = &R->out;
    double eps = jnum(a, "epsilon"), lb = jnum(a, "epsilon_lower_bound");
    hb_puts(o, "<tr><td>");
    hb_escape(o, jstr(a, "file", ""));
    hb_puts(o, "</td><td>");
    hb_escape(o, jstr(a, "mechanism", jstr(a, "defense", "?")));
    hb_puts(o, " <small>");
    hb_escape(o, jstr(a, "variant", ""));
    hb_puts(o, "</small></td>");
    // `fedpriv audit --json` reports variances per input: show the first input's.
    const cJSON *in0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(a, "inputs"), 0);
    static const char *const keys[] = {"epsilon", "bias_factor", "variance", "variance_theory", "epsilon_lower_bound"};
    for (int k = 0; k < 5; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, keys[k]);
        if (!v && in0)
            v = cJSON_GetObjectItemCaseSensitive(in0, keys[k]);
        hb_puts(o, "<td class=\"num\">");
        put_value(o, v);
        hb_puts(o, "</td>");
    }
    if (isfinite(eps) && isfinite(lb))
        hb_puts(o, lb <= eps ? "<td class=\"st-done\">lower bound ≤ ε</td>" : "<td class=\"st-failed\">lower bound > ε</td>");
    else
        hb_puts(o, "<td>—</td>");
    hb_puts(o, "</tr>");
}

static void section_audit(Report *R) {
    HtmlBuf *o = &R->out;
    cJSON *recs = NULL;
    FpError err = {0};
    if (matrix_audit_load(R->dir, &recs, &err) != FP_OK) {
        problem(R, "audit: %s", err.msg);
        return;
    }
    if (cJSON_GetArraySize(recs) > 0) {
        hb_puts(o, "<h2 id=\"audit\">Audit findings</h2><p class=\"note\">Empirical checks of each mechanism "
                   "(<code>fedpriv audit</code>): the bias factor (1 = unbiased), the variance against its closed "
                   "form, and an ε lower bound from output histograms (Clopper–Pearson 95%). A lower bound above "
                   "the claimed ε means the claim does not hold.</p><table><thead><tr><th>File</th><th>Mechanism</th>"
                   "<th>Claimed ε</th><th>Bias factor</th><th>Variance (first input)</th><th>Variance (theory)</th>"
                   "<th>ε lower bound</th><th>Verdict</th></tr></thead><tbody>");
        const cJSON *a;
        cJSON_ArrayForEach(a, recs) audit_row(R, a);
        hb_puts(o, "</tbody></table>");
    }
    cJSON_Delete(recs);
}

static void put_json(HtmlBuf *o, const cJSON *j) {
    char *t = j ? jv_print(j, 1) : NULL;
    hb_puts(o, "<pre>");
    hb_escape(o, t ? t : "—");
    hb_puts(o, "</pre>");
    free(t);
}

static void section_metadata(Report *R) {
    HtmlBuf *o = &R->out;
    const cJSON *ix = R->r.index;
    double total = 0;
    for (int i = 0; i < R->r.n; i++)
        total += R->r.cells[i] ? jnum(cJSON_GetObjectItemCaseSensitive(R->r.cells[i], "run"), "wall_seconds") : 0;
    hb_puts(o, "<h2 id=\"metadata\">Run metadata</h2><dl>");
    static const char *const keys[] = {"matrix_file", "description", "fedpriv_version", "backend"};
    static const char *const names[] = {"Matrix file", "Description", "fedpriv version", "Backend"};
    for (int k = 0; k < 4; k++) {
        hb_printf(o, "<dt>%s</dt><dd>", names[k]);
        hb_escape(o, jstr(ix, keys[k], "—"));
        hb_puts(o, "</dd>");
    }
    hb_puts(o, "<dt>Seed</dt><dd>");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(ix, "seed");
    if (cJSON_IsNumber(seed) && seed->valuedouble >= 0 && seed->valuedouble < 0x1p53 &&
        seed->valuedouble == floor(seed->valuedouble))
        hb_printf(o, "%.0f", seed->valuedouble); // every digit: seeds are exact integers below 2^53
    else
        put_value(o, seed);
    hb_puts(o, "</dd><dt>Threads</dt><dd>");
    put_value(o, cJSON_GetObjectItemCaseSensitive(ix, "threads"));
    if (strcmp(jstr(ix, "rng", "philox"), "secure") == 0)
        hb_puts(o, "</dd><dt>RNG</dt><dd>secure: the defenses' noise and client sampling from ChaCha20 under fresh "
                   "OS keys (not reproducible); the rest Philox-4x32-10</dd>");
    else
        hb_puts(o, "</dd><dt>RNG</dt><dd>Philox-4x32-10, counter-based (results depend on the seed only, not on "
                   "thread or process count)</dd>");
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(ix, "dataset");
    hb_puts(o, "<dt>Dataset</dt><dd>");
    hb_escape(o, jstr(ds, "name", "?"));
    hb_printf(o, " (%g training, %g test samples)</dd>", jnum(ds, "train_samples"), jnum(ds, "test_samples"));
    hb_printf(o, "<dt>Cells</dt><dd>%d (", R->r.n);
    int counts[4] = {0};
    for (int i = 0; i < R->r.n; i++)
        counts[R->r.status[i]]++;
    static const CellStatus order[] = {CELL_DONE, CELL_DIVERGED, CELL_FAILED, CELL_PENDING};
    for (int s = 0; s < 4; s++)
        hb_printf(o, "%s%d %s", s ? ", " : "", counts[order[s]], cell_status_name(order[s]));
    hb_printf(o, ")</dd><dt>Compute time</dt><dd>%.1f s over the finished cells</dd></dl>", total);
    hb_puts(o, "<h3>Per cell</h3><table><thead><tr><th>Cell</th><th>Status</th><th>Wall time</th><th>Message</th>"
               "</tr></thead><tbody>");
    for (int i = 0; i < R->r.n; i++) {
        const cJSON *c = R->r.cells[i];
        hb_puts(o, "<tr><td>");
        hb_escape(o, cell_label(R, i));
        hb_puts(o, "</td><td>");
        put_status(o, cell_status_name(R->r.status[i]), NULL);
        hb_puts(o, "</td><td class=\"num\">");
        double w = c ? jnum(cJSON_GetObjectItemCaseSensitive(c, "run"), "wall_seconds") : NAN;
        if (isfinite(w))
            hb_printf(o, "%.1f s", w);
        else
            hb_puts(o, "—");
        hb_puts(o, "</td><td>");
        hb_escape(o, c ? jstr(c, "message", "") : "");
        hb_puts(o, "</td></tr>");
    }
    hb_puts(o, "</tbody></table><h3>Model</h3>");
    put_json(o, cJSON_GetObjectItemCaseSensitive(ix, "model"));
    hb_puts(o, "<h3>Federation</h3>");
    put_json(o, cJSON_GetObjectItemCaseSensitive(ix, "federation"));
    hb_puts(o, "<h3>Attacks</h3>");
    put_json(o, cJSON_GetObjectItemCaseSensitive(ix, "attacks"));
}

FpStatus report_write_html(const char *dir, const char *out_path, const ReportOptions *opt, int *problems,
                           FpError *err) {
    Report R = {.dir = dir, .max_images = opt && opt->max_images > 0 ? opt->max_images : 8};
    FP_TRY(matrix_results_load(dir, &R.r, err));
    R.attacks = cJSON_GetObjectItemCaseSensitive(R.r.index, "attacks");
    R.n_attacks = cJSON_IsArray(R.attacks) ? cJSON_GetArraySize(R.attacks) : 0;
    hb_init(&R.out);
    hb_init(&R.problems);
    for (int i = 0; i < R.r.n; i++)
        if (R.r.status[i] == CELL_FAILED) {
            const cJSON *c = R.r.cells[i];
            problem(&R, "cell \"%.120s\" failed: %.400s", cell_label(&R, i), c ? jstr(c, "message", "") : "");
        }
    // The body first: problems found while writing it go in the box at the top.
    section_matrix(&R);
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
    const char *desc = jstr(R.r.index, "description", "");
    if (desc[0]) {
        hb_escape(&page, desc);
        hb_puts(&page, " · ");
    }
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(R.r.index, "dataset");
    hb_escape(&page, jstr(ds, "name", "?"));
    hb_puts(&page, " · model ");
    hb_escape(&page, jstr(cJSON_GetObjectItemCaseSensitive(R.r.index, "model"), "name", "?"));
    int counts[4] = {0};
    for (int i = 0; i < R.r.n; i++)
        counts[R.r.status[i]]++;
    hb_printf(&page, " · %d defense settings × %d attacks · %d done, %d diverged, %d failed, %d pending</p>", R.r.n,
              R.n_attacks, counts[CELL_DONE], counts[CELL_DIVERGED], counts[CELL_FAILED], counts[CELL_PENDING]);
    hb_puts(&page, "<p class=\"note\"><a href=\"#matrix\">Matrix</a> · <a href=\"#curves\">Accuracy and ROC "
                   "curves</a> · <a href=\"#reconstructions\">Reconstructions</a> · <a href=\"#privacy\">Privacy "
                   "spent</a> · <a href=\"#audit\">Audit</a> · <a href=\"#metadata\">Metadata</a></p>");
    if (R.n_problems) {
        hb_printf(&page, "<div class=\"problems\"><b>%d problem%s</b><ul>", R.n_problems, R.n_problems == 1 ? "" : "s");
        hb_put(&page, R.problems.s ? R.problems.s : "", R.problems.len);
        hb_puts(&page, "</ul></div>");
    }
    hb_put(&page, R.out.s ? R.out.s : "", R.out.len);
    hb_puts(&page, "<p class=\"note\">Generated by fedpriv ");
    hb_escape(&page, FEDPRIV_VERSION);
    hb_puts(&page, ".</p></body></html>\n");
    FpStatus st = FP_OK;
    if (page.oom || R.out.oom || R.problems.oom)
        st = fp_fail(err, FP_ENOMEM, "out of memory writing the report");
    else
        st = report_write_file_atomic(out_path, page.s, page.len, err);
    if (problems)
        *problems = R.n_problems;
    hb_free(&page);
    hb_free(&R.out);
    hb_free(&R.problems);
    matrix_results_free(&R.r);
    return st;
}
