// Inline SVG line plots (see reports/svg.h). Coordinates are written with one decimal:
// enough for a screen and keeps the page small.
#include "reports/svg.h"

#include <math.h>
#include <stdio.h>

// Tableau 10: distinguishable, and readable on white.
static const char *const palette[10] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
static const char *const dashes[4] = {"", "6 3", "2 3", "8 3 2 3"};

const char *svg_color(int i) { return palette[(i < 0 ? 0 : i) % 10]; }
const char *svg_dash(int i) { return dashes[((i < 0 ? 0 : i) / 10) % 4]; }

typedef struct Frame {
    const SvgPlot *p;
    double left, top, w, h; // the plotting area
    double lx0, lx1;        // log10 of the x range when log_x
} Frame;

static double map_x(const Frame *f, double x) {
    double t;
    if (f->p->log_x) {
        if (!(x > f->p->xmin))
            x = f->p->xmin;
        t = (log10(x) - f->lx0) / (f->lx1 - f->lx0);
    } else
        t = (x - f->p->xmin) / (f->p->xmax - f->p->xmin);
    if (t < 0)
        t = 0;
    if (t > 1)
        t = 1;
    return f->left + t * f->w;
}

static double map_y(const Frame *f, double y) {
    double t = (y - f->p->ymin) / (f->p->ymax - f->p->ymin);
    if (t < 0)
        t = 0;
    if (t > 1)
        t = 1;
    return f->top + (1 - t) * f->h;
}

// A step of 1, 2 or 5 × 10^k giving about `want` intervals over range.
static double nice_step(double range, int want) {
    double raw = range / want, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static double x_step(const SvgPlot *p) {
    double s = nice_step(p->xmax - p->xmin, 6);
    return p->x_integer && s < 1 ? 1 : s;
}

static void tick_label(char *buf, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-9)
        v = 0;
    snprintf(buf, n, "%g", v);
}

// Tick loops stop after 40 ticks: a range far below the values' precision (y += step
// not moving y) must not loop forever.
static void axes(HtmlBuf *o, const Frame *f) {
    const SvgPlot *p = f->p;
    char lab[64];
    hb_printf(o, "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">");
    // y grid and labels
    double ys = nice_step(p->ymax - p->ymin, 5);
    for (double y = ceil(p->ymin / ys - 1e-9) * ys, t = 0; y <= p->ymax + ys * 1e-9 && t < 40; y += ys, t++) {
        double py = map_y(f, y);
        hb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", f->left, py, f->left + f->w, py);
    }
    // x grid
    if (p->log_x) {
        for (double e = ceil(f->lx0 - 1e-9), t = 0; e <= f->lx1 + 1e-9 && t < 40; e += 1, t++) {
            double px = map_x(f, pow(10, e));
            hb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px, f->top, px, f->top + f->h);
        }
    } else {
        double xs = x_step(p);
        for (double x = ceil(p->xmin / xs - 1e-9) * xs, t = 0; x <= p->xmax + xs * 1e-9 && t < 40; x += xs, t++) {
            double px = map_x(f, x);
            hb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px, f->top, px, f->top + f->h);
        }
    }
    hb_printf(o, "</g><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>",
              f->left, f->top, f->w, f->h);
    hb_printf(o, "<g font-size=\"11\" fill=\"#333\">");
    for (double y = ceil(p->ymin / ys - 1e-9) * ys, t = 0; y <= p->ymax + ys * 1e-9 && t < 40; y += ys, t++) {
        tick_label(lab, sizeof lab, y, ys);
        hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", f->left - 5, map_y(f, y) + 4, lab);
    }
    if (p->log_x) {
        for (double e = ceil(f->lx0 - 1e-9), t = 0; e <= f->lx1 + 1e-9 && t < 40; e += 1, t++) {
            snprintf(lab, sizeof lab, "%g", pow(10, e));
            hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", map_x(f, pow(10, e)),
                      f->top + f->h + 15, lab);
        }
    } else {
        double xs = x_step(p);
        for (double x = ceil(p->xmin / xs - 1e-9) * xs, t = 0; x <= p->xmax + xs * 1e-9 && t < 40; x += xs, t++) {
            tick_label(lab, sizeof lab, x, xs);
            hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", map_x(f, x),
                      f->top + f->h + 15, lab);
        }
    }
    hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", f->left + f->w / 2, f->top + f->h + 34);
    hb_escape(o, p->xlabel ? p->xlabel : "");
    hb_printf(o, "</text><text transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">",
              f->top + f->h / 2);
    hb_escape(o, p->ylabel ? p->ylabel : "");
    hb_puts(o, "</text></g>");
}

static void polyline_open(HtmlBuf *o, int i) {
    hb_printf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"", svg_color(i));
    if (svg_dash(i)[0])
        hb_printf(o, " stroke-dasharray=\"%s\"", svg_dash(i));
    hb_puts(o, " points=\"");
}

void svg_line_plot(HtmlBuf *o, const SvgPlot *p, const SvgSeries *s, int n) {
    int W = p->width > 0 ? p->width : 560, H = p->height > 0 ? p->height : 340;
    Frame f = {.p = p, .left = 58, .top = 12, .w = W - 58 - 14, .h = H - 12 - 44};
    int ok_range = p->xmax > p->xmin && p->ymax > p->ymin && (!p->log_x || p->xmin > 0);
    hb_printf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
              W, H, W, H);
    hb_escape_attr(o, p->title ? p->title : "plot");
    hb_puts(o, "\"><title>");
    hb_escape(o, p->title ? p->title : "plot");
    hb_puts(o, "</title>");
    if (!ok_range) { // nothing sensible to draw; never a broken picture
        hb_printf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#666\">no data</text></svg>", W / 2, H / 2);
        return;
    }
    if (p->log_x) {
        f.lx0 = log10(p->xmin);
        f.lx1 = log10(p->xmax);
    }
    axes(o, &f);
    if (p->diagonal) {
        hb_puts(o, "<polyline fill=\"none\" stroke=\"#999\" stroke-width=\"1\" stroke-dasharray=\"4 4\" points=\"");
        for (int k = 0; k <= 60; k++) {
            double x = p->log_x ? pow(10, f.lx0 + (f.lx1 - f.lx0) * k / 60.0) : p->xmin + (p->xmax - p->xmin) * k / 60.0;
            hb_printf(o, "%.1f,%.1f ", map_x(&f, x), map_y(&f, x));
        }
        hb_puts(o, "\"/>");
    }
    for (int i = 0; i < n; i++) {
        hb_puts(o, "<g><title>");
        hb_escape(o, s[i].label ? s[i].label : "");
        hb_puts(o, "</title>");
        int open = 0, pts = 0;
        for (int k = 0; k < s[i].n; k++) {
            double x = s[i].x[k], y = s[i].y[k];
            if (!isfinite(x) || !isfinite(y)) {
                if (open)
                    hb_puts(o, "\"/>");
                open = 0;
                continue;
            }
            if (!open)
                polyline_open(o, s[i].style);
            else if (p->log_x && k > 0) {
                // Subdivide the linear segment from the previous point, log-spaced in x.
                double x0 = s[i].x[k - 1], y0 = s[i].y[k - 1];
                double a = fmax(x0, p->xmin), b = fmax(x, p->xmin);
                if (b > a * 1.2 && x != x0)
                    for (int q = 1; q < 24; q++) {
                        double xq = a * pow(b / a, q / 24.0);
                        hb_printf(o, "%.1f,%.1f ", map_x(&f, xq), map_y(&f, y0 + (y - y0) * (xq - x0) / (x - x0)));
                    }
            }
            open = 1;
            pts++;
            hb_printf(o, "%.1f,%.1f ", map_x(&f, x), map_y(&f, y));
        }
        if (open)
            hb_puts(o, "\"/>");
        // A single point draws no line: mark every point when there are few.
        if (pts > 0 && pts <= 12)
            for (int k = 0; k < s[i].n; k++)
                if (isfinite(s[i].x[k]) && isfinite(s[i].y[k]))
                    hb_printf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\"/>", map_x(&f, s[i].x[k]),
                              map_y(&f, s[i].y[k]), svg_color(s[i].style));
        hb_puts(o, "</g>");
    }
    hb_puts(o, "</svg>");
}

void svg_legend(HtmlBuf *o, const SvgSeries *s, int n) {
    hb_puts(o, "<ul class=\"legend\">");
    for (int i = 0; i < n; i++) {
        hb_printf(o, "<li><svg width=\"26\" height=\"10\" aria-hidden=\"true\"><line x1=\"1\" y1=\"5\" x2=\"25\" y2=\"5\" "
                     "stroke=\"%s\" stroke-width=\"2.5\"",
                  svg_color(s[i].style));
        if (svg_dash(s[i].style)[0])
            hb_printf(o, " stroke-dasharray=\"%s\"", svg_dash(s[i].style));
        hb_puts(o, "/></svg>");
        hb_escape(o, s[i].label ? s[i].label : "");
        hb_puts(o, "</li>");
    }
    hb_puts(o, "</ul>");
}
