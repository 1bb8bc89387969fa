// Inline SVG line plots for the HTML report: accuracy per round and ROC curves with a
// logarithmic FPR axis. Output is plain SVG markup appended to an HtmlBuf; every label
// is escaped. Non-finite points are skipped (the line breaks there).
#ifndef FEDPRIV_REPORTS_SVG_H
#define FEDPRIV_REPORTS_SVG_H

#include "reports/html.h"

typedef struct SvgSeries {
    const char *label;   // legend text (escaped)
    const double *x, *y; // n points
    int n;
    int style;           // colour and dash: svg_color(style), svg_dash(style); the same
                         // style in several plots is the same series (one shared legend)
} SvgSeries;

typedef struct SvgPlot {
    const char *title;   // aria label and <title> (escaped)
    const char *xlabel, *ylabel;
    int log_x;           // 1: x on a log10 axis; x <= 0 or below xmin is drawn at xmin
    double xmin, xmax, ymin, ymax; // the axes' ranges (log_x: xmin > 0)
    int diagonal;        // 1: the dashed y = x line (chance level of a ROC curve)
    int x_integer;       // 1: x ticks at whole numbers only (rounds)
    int width, height;   // pixels (0: 560 × 340)
} SvgPlot;

// Colour of series i (a palette of 10 distinguishable colours; later series repeat
// the palette with dashes).
const char *svg_color(int i);
// The dash pattern of series i ("" for the first 10).
const char *svg_dash(int i);

// Appends <svg>…</svg> for the series. On a log x axis the segment between two points
// is drawn as the straight line it is in linear coordinates (a ROC curve interpolates
// linearly between its points), so it is subdivided there; x = 0 is drawn at xmin. The legend is not drawn: the report writes it in
// HTML beside the plot (svg_legend), where long labels wrap.
void svg_line_plot(HtmlBuf *out, const SvgPlot *p, const SvgSeries *series, int n);
// An HTML legend: one swatch and escaped label per series.
void svg_legend(HtmlBuf *out, const SvgSeries *series, int n);

#endif
