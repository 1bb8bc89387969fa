// Inline SVG plots (see reports/svg.h). Coordinates are written with one decimal:
// enough for a screen and keeps the page small.
#include "reports/svg.h"

#include <math.h>
#include <stdio.h>

// Tableau 10: distinguishable, and readable on white.
static const char *const palette[10] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
static const char *const dashes[4] = {"", "6 3", "2 2", "8 3 2 3"};

const char *svg_color(int i) { return palette[(i < 0 ? 0 : i) % 10]; }
const char *svg_dash(int i) { return dashes[(i < 0 ? 0 : i) % 4]; }
int svg_marker_shape(int i) { return (i < 0 ? 0 : i) % 7; }

#define INF_BAND 46.0 // pixels right of the finite x range for x = +inf

typedef struct Frame {
    const SvgPlot *p;
    double left, top, w, h; // the plotting area (the ∞ band included)
    double fw;              // width of the finite x range
    double lx0, lx1;        // log10 of the x range when log_x
    double ly0, ly1;        // log10 of the y range when log_y
} Frame;

static double clamp01(double t) { return t < 0 ? 0 : t > 1 ? 1 : t; }

static double map_x(const Frame *f, double x) {
    if (f->p->inf_band && isinf(x) && x > 0)
        return f->left + f->w - INF_BAND / 2;
    double t;
    if (f->p->log_x) {
        if (!(x > f->p->xmin))
            x = f->p->xmin;
        t = (log10(x) - f->lx0) / (f->lx1 - f->lx0);
    } else
        t = (x - f->p->xmin) / (f->p->xmax - f->p->xmin);
    return f->left + clamp01(t) * f->fw;
}

static double map_y(const Frame *f, double y) {
    double t;
    if (f->p->log_y) {
        if (!(y > f->p->ymin))
            y = f->p->ymin;
        t = (log10(y) - f->ly0) / (f->ly1 - f->ly0);
    } else
        t = (y - f->p->ymin) / (f->p->ymax - f->p->ymin);
    return f->top + (1 - clamp01(t)) * f->h;
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

// The tick values of an axis: decades on a log axis, nice steps on a linear one. At
// most 40 ticks: a range far below the values' precision must not loop forever.
static int ticks(int log_axis, double lo, double hi, double lstep, double *out) {
    int n = 0;
    if (log_axis) {
        for (double e = ceil(log10(lo) - 1e-9); e <= log10(hi) + 1e-9 && n < 40; e += 1)
            out[n++] = pow(10, e);
    } else
        for (double v = ceil(lo / lstep - 1e-9) * lstep; v <= hi + lstep * 1e-9 && n < 40; v += lstep)
            out[n++] = v;
    return n;
}

static void axes(HtmlBuf *o, const Frame *f) {
    const SvgPlot *p = f->p;
    char lab[64];
    double ys = nice_step(p->ymax - p->ymin, 5), xs = x_step(p), yt[40], xt[40];
    int ny = ticks(p->log_y, p->ymin, p->ymax, ys, yt), nx = ticks(p->log_x, p->xmin, p->xmax, xs, xt);
    hb_printf(o, "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">");
    for (int i = 0; i < ny; i++)
        hb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", f->left, map_y(f, yt[i]), f->left + f->w,
                  map_y(f, yt[i]));
    for (int i = 0; i < nx; i++)
        hb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", map_x(f, xt[i]), f->top, map_x(f, xt[i]),
                  f->top + f->h);
    hb_printf(o, "</g><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>",
              f->left, f->top, f->w, f->h);
    if (p->inf_band) // the band: a separate column, not part of the continuous axis
        hb_printf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f4f4f4\" stroke=\"#888\"/>",
                  f->left + f->fw + 6, f->top, INF_BAND - 6, f->h);
    hb_printf(o, "<g font-size=\"11\" fill=\"#333\">");
    for (int i = 0; i < ny; i++) {
        if (p->log_y)
            snprintf(lab, sizeof lab, "%g", yt[i]);
        else
            tick_label(lab, sizeof lab, yt[i], ys);
        hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", f->left - 5, map_y(f, yt[i]) + 4, lab);
    }
    for (int i = 0; i < nx; i++) {
        if (p->log_x)
            snprintf(lab, sizeof lab, "%g", xt[i]);
        else
            tick_label(lab, sizeof lab, xt[i], xs);
        hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", map_x(f, xt[i]), f->top + f->h + 15,
                  lab);
    }
    if (p->inf_band)
        hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">∞</text>", map_x(f, INFINITY),
                  f->top + f->h + 15);
    hb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", f->left + f->w / 2, f->top + f->h + 34);
    hb_escape(o, p->xlabel ? p->xlabel : "");
    hb_printf(o, "</text><text transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">",
              f->top + f->h / 2);
    hb_escape(o, p->ylabel ? p->ylabel : "");
    hb_puts(o, "</text></g>");
}

// A marker of series style i at (x, y): filled, or open (white inside).
static void marker(HtmlBuf *o, int style, double x, double y, int hollow) {
    const char *c = svg_color(style), *fill = hollow ? "#fff" : c;
    double r = 3.4;
    switch (svg_marker_shape(style)) {
    case 0: hb_printf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\" stroke=\"%s\"/>", x, y, r, fill, c); break;
    case 1:
        hb_printf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"%s\"/>", x - r, y - r,
                  2 * r, 2 * r, fill, c);
        break;
    case 2:
        hb_printf(o, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\" stroke=\"%s\"/>", x, y - r - 1, x + r + 0.6,
                  y + r - 0.4, x - r - 0.6, y + r - 0.4, fill, c);
        break;
    case 3:
        hb_printf(o, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\" stroke=\"%s\"/>", x, y - r - 1,
                  x + r + 1, y, x, y + r + 1, x - r - 1, y, fill, c);
        break;
    case 4:
        hb_printf(o, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\" stroke=\"%s\"/>", x, y + r + 1, x + r + 0.6,
                  y - r + 0.4, x - r - 0.6, y - r + 0.4, fill, c);
        break;
    case 5:
        hb_printf(o, "<path d=\"M%.1f %.1fH%.1fM%.1f %.1fV%.1f\" stroke=\"%s\" stroke-width=\"2\"/>", x - r - 0.6, y,
                  x + r + 0.6, x, y - r - 0.6, y + r + 0.6, c);
        break;
    default:
        hb_printf(o, "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\" stroke-width=\"2\"/>", x - r,
                  y - r, x + r, y + r, x - r, y + r, x + r, y - r, c);
        break;
    }
}

static void polyline_open(HtmlBuf *o, int i) {
    hb_printf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"", svg_color(i));
    if (svg_dash(i)[0])
        hb_printf(o, " stroke-dasharray=\"%s\"", svg_dash(i));
    hb_puts(o, " points=\"");
}

static int drawable(const SvgPlot *p, double x, double y) {
    return isfinite(y) && (isfinite(x) || (p->inf_band && isinf(x) && x > 0));
}

static void series(HtmlBuf *o, const Frame *f, const SvgSeries *s) {
    const SvgPlot *p = f->p;
    hb_puts(o, "<g><title>");
    hb_escape(o, s->label ? s->label : "");
    hb_puts(o, "</title>");
    int open = 0, pts = 0;
    for (int k = 0; k < s->n; k++) {
        double x = s->x[k], y = s->y[k];
        if (drawable(p, x, y))
            pts++;
        if (s->no_line || !isfinite(x) || !isfinite(y)) {
            if (open)
                hb_puts(o, "\"/>");
            open = 0;
            continue;
        }
        if (!open)
            polyline_open(o, s->style);
        else if ((p->log_x || p->log_y) && k > 0) {
            // Subdivide the linear segment from the previous point (log-spaced in x on a
            // log x axis), so it is drawn as the straight line it is in linear coordinates.
            double x0 = s->x[k - 1], y0 = s->y[k - 1];
            int vertical = x == x0;
            double a = p->log_x ? fmax(x0, p->xmin) : x0, b = p->log_x ? fmax(x, p->xmin) : x;
            if (!vertical && (!p->log_x || b > a * 1.05))
                for (int q = 1; q < 24; q++) {
                    double xq = p->log_x ? a * pow(b / a, q / 24.0) : a + (b - a) * q / 24.0;
                    hb_printf(o, "%.1f,%.1f ", map_x(f, xq), map_y(f, y0 + (y - y0) * (xq - x0) / (x - x0)));
                }
        }
        open = 1;
        hb_printf(o, "%.1f,%.1f ", map_x(f, x), map_y(f, y));
    }
    if (open)
        hb_puts(o, "\"/>");
    // Error bars, then markers: at every point when there are few, else at about six
    // points spread along the series and shifted by style so that series do not share them.
    for (int k = 0; s->ylo && s->yhi && k < s->n; k++)
        if (drawable(p, s->x[k], s->y[k]) && isfinite(s->ylo[k]) && isfinite(s->yhi[k])) {
            double px = map_x(f, s->x[k]), lo = map_y(f, s->ylo[k]), hi = map_y(f, s->yhi[k]);
            hb_printf(o, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\" stroke=\"%s\" stroke-width=\"1.2\"/>",
                      px, lo, hi, px - 3, lo, px + 3, px - 3, hi, px + 3, svg_color(s->style));
        }
    if (pts <= 12) {
        for (int k = 0; k < s->n; k++)
            if (drawable(p, s->x[k], s->y[k]))
                marker(o, s->style, map_x(f, s->x[k]), map_y(f, s->y[k]), s->hollow && s->hollow[k]);
    } else {
        int last = -1;
        for (int q = 0; q < 6; q++) {
            int k = (int)((q + 0.15 + 0.14 * (s->style % 5)) * s->n / 6.0);
            if (k >= s->n)
                k = s->n - 1;
            while (k < s->n && !drawable(p, s->x[k], s->y[k]))
                k++;
            if (k >= s->n || k == last)
                continue;
            last = k;
            marker(o, s->style, map_x(f, s->x[k]), map_y(f, s->y[k]), s->hollow && s->hollow[k]);
        }
    }
    hb_puts(o, "</g>");
}

void svg_line_plot(HtmlBuf *o, const SvgPlot *p, const SvgSeries *s, int n) {
    int W = p->width > 0 ? p->width : 560, H = p->height > 0 ? p->height : 340;
    Frame f = {.p = p, .left = 58, .top = 12, .w = W - 58 - 14, .h = H - 12 - 44};
    f.fw = p->inf_band ? f.w - INF_BAND : f.w;
    int ok_range = p->xmax > p->xmin && p->ymax > p->ymin && (!p->log_x || p->xmin > 0) && (!p->log_y || p->ymin > 0) &&
                   isfinite(p->xmax) && isfinite(p->ymax) && f.fw > 20;
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
    if (p->log_y) {
        f.ly0 = log10(p->ymin);
        f.ly1 = log10(p->ymax);
    }
    axes(o, &f);
    for (int r = 0; r < p->n_refs && r < 4; r++) {
        double py = map_y(&f, p->refs[r].y);
        if (!isfinite(p->refs[r].y))
            continue;
        // A label close to an earlier line's goes to the left end, so the two stay readable.
        int left = 0;
        for (int q = 0; q < r; q++)
            left |= isfinite(p->refs[q].y) && fabs(map_y(&f, p->refs[q].y) - py) < 12;
        hb_printf(o, "<g><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-width=\"1\" "
                     "stroke-dasharray=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\" fill=\"#444\" "
                     "text-anchor=\"%s\">",
                  f.left, py, f.left + f.w, py, r == 0 ? "5 3" : "1 3", left ? f.left + 3 : f.left + f.fw - 3, py - 3,
                  left ? "start" : "end");
        hb_escape(o, p->refs[r].label ? p->refs[r].label : "");
        hb_puts(o, "</text></g>");
    }
    for (int i = 0; i < n; i++)
        series(o, &f, &s[i]);
    if (p->diagonal) { // chance, on top of the curves so that none hides it
        HtmlBuf pts;
        hb_init(&pts);
        for (int k = 0; k <= 60; k++) {
            double lo = fmax(p->xmin, p->log_y ? p->ymin : p->xmin), hi = fmin(p->xmax, p->ymax);
            double x = p->log_x ? pow(10, log10(lo) + (log10(hi) - log10(lo)) * k / 60.0) : lo + (hi - lo) * k / 60.0;
            hb_printf(&pts, "%.1f,%.1f ", map_x(&f, x), map_y(&f, x));
        }
        hb_printf(o, "<g><title>chance (a random guess)</title><polyline fill=\"none\" stroke=\"#fff\" "
                     "stroke-width=\"3.5\" stroke-opacity=\"0.8\" points=\"%s\"/><polyline fill=\"none\" "
                     "stroke=\"#222\" stroke-width=\"1.3\" stroke-dasharray=\"5 4\" points=\"%s\"/></g>",
                  pts.s ? pts.s : "", pts.s ? pts.s : "");
        o->oom |= pts.oom;
        hb_free(&pts);
    }
    hb_puts(o, "</svg>");
}

void svg_legend(HtmlBuf *o, const SvgSeries *s, int n) {
    hb_puts(o, "<ul class=\"legend\">");
    for (int i = 0; i < n; i++) {
        hb_printf(o, "<li><svg width=\"34\" height=\"12\" aria-hidden=\"true\"><line x1=\"1\" y1=\"6\" x2=\"33\" y2=\"6\" "
                     "stroke=\"%s\" stroke-width=\"2.2\"",
                  svg_color(s[i].style));
        if (svg_dash(s[i].style)[0])
            hb_printf(o, " stroke-dasharray=\"%s\"", svg_dash(s[i].style));
        hb_puts(o, "/>");
        marker(o, s[i].style, 17, 6, 0);
        hb_puts(o, "</svg>");
        hb_escape(o, s[i].label ? s[i].label : "");
        hb_puts(o, "</li>");
    }
    hb_puts(o, "</ul>");
}
