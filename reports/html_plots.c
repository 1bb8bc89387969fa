// The report's plots: the privacy-utility trade-off (per defense family, accuracy and
// each attack's key metrics against the sound ε on a log axis), accuracy per round and
// ROC curves on log-log axes.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"
#include "reports/report_internal.h"
#include "reports/svg.h"

// ---- privacy-utility -----------------------------------------------------------------------------

// A family: the settings of one defense and variant, each a point at its sound ε.
typedef struct Family {
    char label[160];
    int n;
    int *settings;   // by increasing x
    double *x;       // sound ε (conditional bound when none is proven; +inf when neither)
    unsigned char *hollow; // 1: x is a conditional bound
} Family;

// Where setting s sits on the ε axis: its sound ε when proven (a filled marker); else
// the best bound it has that is not proven (open marker): the conditional bound, or a
// sound ε whose record does not say it is proven; else +inf (no bound: the ∞ band).
static double family_x(const SettingSummary *s, unsigned char *hollow) {
    *hollow = 0;
    if (isfinite(s->eps_sound) && strcmp(s->guarantee, "proven") == 0)
        return s->eps_sound;
    *hollow = 1;
    if (isfinite(s->eps_conditional))
        return s->eps_conditional;
    if (isfinite(s->eps_sound))
        return s->eps_sound;
    *hollow = 0;
    return INFINITY;
}

static int build_families(const RunSummary *S, Family *fam) {
    int nf = 0;
    for (int i = 0; i < S->n_settings; i++) {
        const SettingSummary *s = &S->settings[i];
        if (s->is_baseline || !s->privacy)
            continue;
        char label[160];
        snprintf(label, sizeof label, "%s%s%s", s->defense, s->variant ? " " : "", s->variant ? s->variant : "");
        // swept parameters other than ε make families of their own
        if (cJSON_GetArraySize(s->params) > 0) {
            char *v = cJSON_PrintUnformatted(s->params);
            size_t k = strlen(label);
            snprintf(label + k, sizeof label - k, " %s", v ? v : "");
            free(v);
        }
        int f = 0;
        while (f < nf && strcmp(fam[f].label, label) != 0)
            f++;
        if (f == nf) {
            fam[nf] = (Family){0};
            snprintf(fam[nf].label, sizeof fam[nf].label, "%s", label);
            fam[nf].settings = malloc(sizeof(int) * (size_t)S->n_settings);
            fam[nf].x = malloc(sizeof(double) * (size_t)S->n_settings);
            fam[nf].hollow = malloc((size_t)S->n_settings);
            if (!fam[nf].settings || !fam[nf].x || !fam[nf].hollow)
                return -1 - nf;
            nf++;
        }
        Family *F = &fam[f];
        unsigned char h;
        double x = family_x(s, &h);
        int at = F->n; // insertion by x
        while (at > 0 && F->x[at - 1] > x) {
            F->settings[at] = F->settings[at - 1];
            F->x[at] = F->x[at - 1];
            F->hollow[at] = F->hollow[at - 1];
            at--;
        }
        F->settings[at] = i;
        F->x[at] = x;
        F->hollow[at] = h;
        F->n++;
    }
    return nf;
}

static void free_families(Family *fam, int nf) {
    for (int f = 0; f < nf; f++) {
        free(fam[f].settings);
        free(fam[f].x);
        free(fam[f].hollow);
    }
}

// One trade-off plot: metric (attack k, key j; k = -1 for model accuracy) per family.
static void tradeoff_plot(Report *R, const Family *fam, int nf, int k, int j, double xmin, double xmax, int band) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    SvgSeries *s = calloc((size_t)nf, sizeof(SvgSeries));
    double *buf = malloc(sizeof(double) * 3 * (size_t)(S->n_settings ? S->n_settings : 1) * (size_t)(nf ? nf : 1));
    if (!s || !buf) {
        free(s);
        free(buf);
        o->oom = 1;
        return;
    }
    const MetricScale *scale = k >= 0 ? S->attacks[k].scales[j] : NULL;
    // Accuracy and metrics with a fixed scale keep that range (wide intervals of few seeds
    // are clipped at the frame); others fit their values.
    int fixed = k < 0 || scale;
    double ymax = k < 0 ? 1 : scale ? scale->full : -INFINITY, ymin = 0;
    int any = 0;
    for (int f = 0; f < nf; f++) {
        double *y = buf + (size_t)f * 3 * S->n_settings, *lo = y + S->n_settings, *hi = lo + S->n_settings;
        for (int q = 0; q < fam[f].n; q++) {
            const SettingSummary *st = &S->settings[fam[f].settings[q]];
            const MetricSummary *m = k < 0 ? &st->accuracy : setting_attack_metric(st, k, j);
            MetricInterval iv = metric_interval(m); // none from two seeds (reports/summary.h)
            y[q] = m->stat.mean;
            lo[q] = iv.low;
            hi[q] = iv.high;
            if (isfinite(y[q])) {
                any = 1;
                if (!fixed) {
                    ymax = fmax(ymax, isfinite(hi[q]) ? hi[q] : y[q]);
                    ymin = fmin(ymin, isfinite(lo[q]) ? lo[q] : y[q]);
                }
            }
        }
        s[f] = (SvgSeries){.label = fam[f].label, .x = fam[f].x, .y = y, .n = fam[f].n, .style = f, .ylo = lo,
                           .yhi = hi, .hollow = fam[f].hollow};
    }
    if (!any) {
        free(s);
        free(buf);
        return;
    }
    if (!(ymax > ymin))
        ymax = ymin + 1;
    char title[200], ylabel[160];
    const char *name = k < 0 ? "model accuracy" : scale ? scale->name : S->attacks[k].keys[j];
    if (k < 0)
        snprintf(ylabel, sizeof ylabel, "model accuracy");
    else
        snprintf(ylabel, sizeof ylabel, "%s: %s", S->attacks[k].label, name);
    snprintf(title, sizeof title, "%s vs sound epsilon", ylabel);
    SvgPlot p = {.title = title, .xlabel = "sound ε (total, log scale)", .ylabel = ylabel, .log_x = 1, .xmin = xmin,
                 .xmax = xmax, .ymin = ymin, .ymax = ymax, .inf_band = band, .width = 380, .height = 290};
    // Reference lines: chance, and the value without a defense.
    double chance = k < 0 ? S->chance : scale ? scale->chance : NAN;
    if (isfinite(chance))
        p.refs[p.n_refs++] = (SvgRefLine){.y = chance, .label = "chance"};
    if (S->baseline >= 0) {
        const SettingSummary *b = &S->settings[S->baseline];
        const MetricSummary *m = k < 0 ? &b->accuracy : setting_attack_metric(b, k, j);
        if (isfinite(m->stat.mean))
            p.refs[p.n_refs++] = (SvgRefLine){.y = m->stat.mean, .label = "no defense"};
    }
    hb_puts(o, "<div class=\"plotbox tradeoff\"><h3>");
    hb_escape(o, k < 0 ? "Model accuracy" : S->attacks[k].label);
    if (k >= 0) {
        hb_puts(o, ": ");
        hb_escape(o, name);
    }
    hb_puts(o, "</h3>");
    svg_line_plot(o, &p, s, nf);
    hb_puts(o, "</div>");
    free(s);
    free(buf);
}

void section_tradeoff(Report *R) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    hb_puts(o, "<h2 id=\"tradeoff\">Privacy–utility trade-off</h2>");
    Family *fam = calloc((size_t)(S->n_settings ? S->n_settings : 1), sizeof(Family));
    if (!fam) {
        o->oom = 1;
        return;
    }
    int nf = build_families(S, fam);
    if (nf < 0) {
        free_families(fam, -nf);
        free(fam);
        o->oom = 1;
        return;
    }
    if (nf == 0 || S->regression) {
        hb_puts(o, "<p class=\"note\">No defended setting with a privacy record and an accuracy: nothing to plot.</p>");
        free(fam);
        return;
    }
    double lo = INFINITY, hi = -INFINITY;
    int band = 0;
    for (int f = 0; f < nf; f++)
        for (int q = 0; q < fam[f].n; q++) {
            double x = fam[f].x[q];
            if (isinf(x))
                band = 1;
            else if (x > 0) {
                lo = fmin(lo, x);
                hi = fmax(hi, x);
            }
        }
    double xmin = isfinite(lo) ? pow(10, floor(log10(lo))) : 0.1, xmax = isfinite(hi) ? pow(10, ceil(log10(hi))) : 10;
    if (xmax <= xmin)
        xmax = xmin * 10;
    hb_puts(o, "<p class=\"note\">Per defense family, each point is one setting at its <b>sound ε</b> (total after "
               "the last round, log scale): filled = proven for the code as it runs, open = a bound that is not "
               "proven (conditional on the assumptions listed in the matrix), in the <b>∞</b> band = no bound holds (the defense's nominal ε is not a guarantee for what "
               "runs). Error bars: 95% intervals (Wilson for accuracy and recovered fractions; Student t over seeds for "
               "other metrics, from 3 seeds; none from fewer). Dashed line: chance; dotted: no defense. A "
               "defense protects where its points sit near chance at small ε while its accuracy stays near the "
               "dotted line.</p>");
    SvgSeries *leg = calloc((size_t)nf, sizeof(SvgSeries));
    for (int f = 0; leg && f < nf; f++)
        leg[f] = (SvgSeries){.label = fam[f].label, .style = f};
    if (leg)
        svg_legend(o, leg, nf);
    free(leg);
    hb_puts(o, "<div class=\"plots\">");
    tradeoff_plot(R, fam, nf, -1, 0, xmin, xmax, band);
    for (int k = 0; k < S->n_attacks; k++)
        for (int j = 0; j < S->attacks[k].n_keys; j++)
            tradeoff_plot(R, fam, nf, k, j, xmin, xmax, band);
    hb_puts(o, "</div>");
    free_families(fam, nf);
    free(fam);
}

// ---- accuracy per round and ROC --------------------------------------------------------------------

// The mean over a setting's runs of each round's test accuracy (key 0) or loss (key 1).
static int setting_rounds(const Report *R, const SettingSummary *s, int key, double **x, double **y) {
    int m = 0;
    for (int j = 0; j < s->runs->n_runs; j++) {
        const cJSON *c = R->r.cells[s->runs->runs[j]];
        int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "model"), "rounds"));
        if (n > m)
            m = n;
    }
    if (m == 0)
        return 0;
    *x = calloc((size_t)m, sizeof(double));
    *y = calloc((size_t)m, sizeof(double));
    int *cnt = calloc((size_t)m, sizeof(int));
    if (!*x || !*y || !cnt) {
        free(cnt);
        return 0;
    }
    for (int r = 0; r < m; r++)
        (*x)[r] = r + 1;
    for (int j = 0; j < s->runs->n_runs; j++) {
        const cJSON *c = R->r.cells[s->runs->runs[j]], *ro;
        int r = 0;
        cJSON_ArrayForEach(ro, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "model"), "rounds")) {
            double v = rep_num(ro, key ? "test_loss" : "test_accuracy"), rn = rep_num(ro, "round");
            if (isfinite(rn))
                (*x)[r] = rn;
            if (isfinite(v)) {
                (*y)[r] += v;
                cnt[r]++;
            }
            r++;
        }
    }
    for (int r = 0; r < m; r++)
        (*y)[r] = cnt[r] ? (*y)[r] / cnt[r] : NAN;
    free(cnt);
    return m;
}

// ROC points of attack k in the first run of a setting that has them:
// {"fpr": [...], "tpr": [...]}, [[fpr, tpr], ...] or [{"fpr": f, "tpr": t}, ...] under "roc".
static int setting_roc(const Report *R, const SettingSummary *s, int k, double **x, double **y) {
    for (int j = 0; j < s->runs->n_runs; j++) {
        const cJSON *a = matrix_cell_attack_at(R->r.cells[s->runs->runs[j]], k);
        if (!a || strcmp(rep_str(a, "status", ""), "done") != 0)
            continue;
        const cJSON *roc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "result"), "roc");
        const cJSON *fa = cJSON_GetObjectItemCaseSensitive(roc, "fpr"), *ta = cJSON_GetObjectItemCaseSensitive(roc, "tpr");
        int m = cJSON_IsArray(fa) && cJSON_IsArray(ta) ? cJSON_GetArraySize(fa) : cJSON_IsArray(roc) ? cJSON_GetArraySize(roc) : 0;
        if ((cJSON_IsArray(fa) && cJSON_GetArraySize(ta) != m) || m <= 0 || m > 1000000)
            continue;
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
            (*x)[i] = jnum_value(fx);
            (*y)[i] = jnum_value(ty);
        }
        return m;
    }
    return 0;
}

static void free_series(SvgSeries *s, int n) {
    for (int i = 0; i < n; i++) {
        free((void *)s[i].x);
        free((void *)s[i].y);
    }
}

void section_curves(Report *R) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    SvgSeries *s = calloc((size_t)(S->n_settings ? S->n_settings : 1), sizeof(SvgSeries));
    if (!s) {
        o->oom = 1;
        return;
    }
    hb_puts(o, "<h2 id=\"curves\">Accuracy per round and ROC curves</h2><p class=\"note\">Left: the federated "
               "model's test accuracy after each round (mean over seeds). Then one ROC curve per membership attack "
               "(its first seed), on balanced member/non-member sets, with both axes logarithmic so the low-FPR "
               "regime, where leaks matter, is visible; the dashed diagonal on top is chance. One colour, dash and "
               "marker per defense setting in every plot.</p>");
    int nl = 0;
    for (int i = 0; i < S->n_settings; i++)
        if (S->settings[i].n_done + S->settings[i].n_diverged > 0)
            s[nl++] = (SvgSeries){.label = S->settings[i].label, .style = i};
    svg_legend(o, s, nl);
    hb_puts(o, "<div class=\"plots\">");
    int regression = S->regression, ns = 0;
    for (int i = 0; i < S->n_settings; i++) {
        double *x = NULL, *y = NULL;
        int m = setting_rounds(R, &S->settings[i], regression, &x, &y);
        if (m > 0)
            s[ns++] = (SvgSeries){.label = S->settings[i].label, .x = x, .y = y, .n = m, .style = i};
        else {
            free(x);
            free(y);
        }
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
                 .ymin = ymin, .ymax = ymax, .x_integer = 1, .width = 380, .height = 290};
    if (!regression && isfinite(S->chance))
        p.refs[p.n_refs++] = (SvgRefLine){.y = S->chance, .label = "chance"};
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
    for (int k = 0; k < S->n_attacks; k++) {
        ns = 0;
        for (int i = 0; i < S->n_settings; i++) {
            double *x = NULL, *y = NULL;
            int m = setting_roc(R, &S->settings[i], k, &x, &y);
            if (m > 0)
                s[ns++] = (SvgSeries){.label = S->settings[i].label, .x = x, .y = y, .n = m, .style = i};
            else {
                free(x);
                free(y);
            }
        }
        if (ns == 0)
            continue;
        double fmin_pos = 1;
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < s[i].n; j++)
                if (s[i].x[j] > 0 && s[i].x[j] < fmin_pos)
                    fmin_pos = s[i].x[j];
        double lo = pow(10, floor(log10(fmin_pos)));
        lo = fmin(fmax(lo, 1e-5), 1e-2);
        char title[200];
        snprintf(title, sizeof title, "ROC of %.120s (log-log)", S->attacks[k].label);
        SvgPlot rp = {.title = title, .xlabel = "false positive rate (log)", .ylabel = "true positive rate (log)",
                      .log_x = 1, .log_y = 1, .xmin = lo, .xmax = 1, .ymin = lo, .ymax = 1, .diagonal = 1,
                      .width = 380, .height = 290};
        hb_puts(o, "<div class=\"plotbox\"><h3>ROC: ");
        hb_escape(o, S->attacks[k].label);
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
