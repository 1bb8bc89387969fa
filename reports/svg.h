// Inline SVG plots for the HTML report: accuracy per round, ROC curves on log-log axes,
// privacy-utility curves on a log ε axis. Output is plain SVG markup appended to an
// HtmlBuf; every label is escaped. Non-finite points are skipped (the line breaks
// there), except x = +inf on a plot with an ∞ band, drawn as a marker in the band.
//
// Series are told apart without colour: series i has colour i mod 10, dash pattern
// i mod 4 and marker shape i mod 7 (28 series before a combination repeats), and the
// HTML legend shows all three.
#ifndef FEDPRIV_REPORTS_SVG_H
#define FEDPRIV_REPORTS_SVG_H

#include "reports/html.h"

typedef struct SvgSeries {
    const char *label;   // legend text (escaped)
    const double *x, *y; // n points
    int n;
    int style;           // colour, dash and marker: the same style in several plots is the
                         // same series (one shared legend)
    const double *ylo, *yhi;      // optional error bars (NULL: none; NaN entries: none)
    const unsigned char *hollow;  // optional: 1 = an open marker (e.g. a conditional bound)
    int no_line;         // 1: markers only
} SvgSeries;

typedef struct SvgRefLine {
    double y;            // a horizontal reference line across the plot
    const char *label;   // drawn at its right end (escaped)
} SvgRefLine;

typedef struct SvgPlot {
    const char *title;   // aria label and <title> (escaped)
    const char *xlabel, *ylabel;
    int log_x, log_y;    // 1: that axis is log10; values <= 0 or below the minimum are drawn at it
    double xmin, xmax, ymin, ymax; // the axes' ranges (log axes: min > 0)
    int diagonal;        // 1: the dashed y = x line (chance of a ROC curve), drawn on top
    int x_integer;       // 1: x ticks at whole numbers only (rounds)
    int inf_band;        // 1: x = +inf is drawn in a band right of the axis, labelled ∞
    int n_refs;
    SvgRefLine refs[4];
    int width, height;   // pixels (0: 560 × 340)
} SvgPlot;

// Colour, dash pattern ("" = solid) and marker shape (0..6) of series style i.
const char *svg_color(int i);
const char *svg_dash(int i);
int svg_marker_shape(int i);

// Appends <svg>…</svg> for the series. On a log axis the segment between two points is
// drawn as the straight line it is in linear coordinates (a ROC curve interpolates
// linearly between its points), so it is subdivided there. The legend is not drawn:
// the report writes it in HTML beside the plot (svg_legend), where long labels wrap.
void svg_line_plot(HtmlBuf *out, const SvgPlot *p, const SvgSeries *series, int n);
// An HTML legend: one swatch (colour, dash, marker) and escaped label per series.
void svg_legend(HtmlBuf *out, const SvgSeries *series, int n);

#endif
