// What the report shows first: the verdict table (reports/verdict.h), one row per
// defense setting and one word per observer and attack family with the rule that
// decides it, and then the warnings, grouped by kind, each kind collapsed with its count.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/report_internal.h"
#include "reports/verdict.h"

// What each view observes, for its heading.
static const char *const view_heads[VERDICT_N_VIEWS] = {
    [VERDICT_VIEW_SERVER] = "Server’s view <small>a client’s upload</small>",
    [VERDICT_VIEW_PUBLIC] = "Public view <small>the released model</small>",
};
static const char *const family_heads[VERDICT_N_FAMILIES] = {
    [FAMILY_INVERSION] = "Inversion<br><small>best: images recovered</small>",
    [FAMILY_MEMBERSHIP] = "Membership<br><small>best: AUC, TPR at 1% FPR</small>",
};
// The CSS class of each word.
static const char *const word_class[] = {[VERDICT_NO_RESULT] = "v-none", [VERDICT_LEAKS] = "v-leaks",
                                         [VERDICT_PROTECTS] = "v-protects",
                                         [VERDICT_NOT_MEASURABLE] = "v-unmeasurable"};

static void verdict_cell(Report *R, const RunVerdict *v, const VerdictRow *row, int c) {
    const RunSummary *S = &R->S;
    const SettingSummary *s = &S->settings[row->setting];
    const VerdictColumn *col = &v->columns[c];
    const VerdictCell *x = &row->cells[c];
    HtmlBuf *o = &R->out;
    hb_printf(o, "<td class=\"v %s\"", word_class[x->word]);
    if (x->attack >= 0) {
        const MetricSummary *h = setting_attack_metric(s, x->attack, 0);
        hb_puts(o, " title=\"");
        hb_escape_attr(o, S->attacks[x->attack].label);
        if (x->not_applicable)
            hb_puts(o, ": the attack reports itself not applicable here (it recovers nothing without a defense)");
        else {
            hb_puts(o, ", the strongest of this column here: ");
            hb_escape_attr(o, S->attacks[x->attack].scales[0] ? S->attacks[x->attack].scales[0]->name
                                                              : S->attacks[x->attack].headline);
            hb_puts(o, " ");
            rep_stat_title(o, h, s->runs->n_runs);
        }
        hb_puts(o, "\"");
    }
    hb_puts(o, "><b>");
    hb_escape(o, verdict_word_name(x->word));
    hb_puts(o, "</b>");
    if (x->attack >= 0) {
        char fig[80];
        verdict_cell_text(col, x, fig, sizeof fig);
        hb_puts(o, "<small>"); // the attack's name is in the tooltip
        hb_escape(o, fig);
        if (x->seeds > 0 && x->seeds < s->runs->n_runs)
            hb_printf(o, " · %d of %d seeds", x->seeds, s->runs->n_runs);
        hb_puts(o, "</small>");
    }
    hb_puts(o, "</td>");
}

static void accuracy_cell(Report *R, const VerdictRow *row) {
    const RunSummary *S = &R->S;
    const SettingSummary *s = &S->settings[row->setting];
    const MetricSummary *m = S->regression ? &s->loss : &s->accuracy;
    HtmlBuf *o = &R->out;
    if (m->stat.n == 0) {
        hb_puts(o, "<td>—</td>");
        return;
    }
    hb_puts(o, "<td class=\"num\" title=\"");
    rep_stat_title(o, m, s->runs->n_runs);
    hb_puts(o, "\">");
    hb_printf(o, "%.3f", m->stat.mean);
    const char *note = verdict_accuracy_note(S, row->setting);
    if (!S->regression && !s->is_baseline && isfinite(row->accuracy_cost))
        hb_printf(o, "<small>%s%+.1f points%s%s%s</small>", note ? "<b class=\"chance\">" : "",
                  fabs(row->accuracy_cost) < 5e-4 ? 0.0 : -100 * row->accuracy_cost, note ? " · " : "", note ? note : "",
                  note ? "</b>" : "");
    else if (s->is_baseline)
        hb_printf(o, "<small>no defense%s%s</small>", note ? " · " : "", note ? note : "");
    hb_puts(o, "</td>");
}

static void epsilon_cell(Report *R, const SettingSummary *s) {
    HtmlBuf *o = &R->out;
    char t[400];
    verdict_epsilon_text(s, t, sizeof t);
    char *up = strstr(t, "; upload "); // the upload record on a line of its own
    if (up)
        *up = 0;
    hb_puts(o, "<td class=\"eps\" title=\"");
    hb_escape_attr(o, s->sound_notion);
    if (s->upload_notion && s->upload_notion[0]) {
        hb_puts(o, " | upload: ");
        hb_escape_attr(o, s->upload_notion);
    }
    hb_puts(o, "\">");
    hb_escape(o, t);
    if (up) {
        hb_puts(o, "<small>upload ");
        hb_escape(o, up + strlen("; upload "));
        hb_puts(o, "</small>");
    }
    hb_puts(o, "</td>");
}

void section_verdict(Report *R) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    RunVerdict v;
    if (run_verdict_build(S, &v) != FP_OK) {
        o->oom = 1;
        return;
    }
    hb_puts(o, "<h2 id=\"verdict\">Verdict</h2>");
    if (v.n_columns == 0) {
        hb_puts(o, "<p class=\"note\">No attack of this run is a gradient inversion or a membership attack, so there "
                   "is no verdict; the matrix below has every figure.</p>");
        run_verdict_free(&v);
        return;
    }
    int per_view[VERDICT_N_VIEWS] = {0};
    for (int c = 0; c < v.n_columns; c++)
        per_view[v.columns[c].view]++;
    hb_puts(o, "<table class=\"verdict\"><thead><tr><th rowspan=\"2\">Defense setting</th><th rowspan=\"2\">Seeds</th>"
               "<th rowspan=\"2\">Accuracy<br><small>against no defense</small></th>"
               "<th rowspan=\"2\">Proven ε<br><small>released model<br>upload</small></th>");
    for (int w = 0; w < VERDICT_N_VIEWS; w++)
        if (per_view[w])
            hb_printf(o, "<th colspan=\"%d\" class=\"view\">%s</th>", per_view[w], view_heads[w]);
    hb_puts(o, "</tr><tr>");
    for (int c = 0; c < v.n_columns; c++)
        hb_printf(o, "<th>%s</th>", family_heads[v.columns[c].family]);
    hb_puts(o, "</tr></thead><tbody>");
    for (int i = 0; i < v.n_rows; i++) {
        const VerdictRow *row = &v.rows[i];
        const SettingSummary *s = &S->settings[row->setting];
        hb_puts(o, "<tr><td class=\"name\">");
        hb_escape(o, s->label);
        hb_printf(o, "</td><td class=\"num\">%d</td>", s->runs->n_runs);
        accuracy_cell(R, row);
        epsilon_cell(R, s);
        for (int c = 0; c < v.n_columns; c++)
            verdict_cell(R, &v, row, c);
        hb_puts(o, "</tr>");
    }
    hb_puts(o, "</tbody></table><p class=\"note rule\"><b>The rule.</b> ");
    hb_escape(o, VERDICT_RULE);
    hb_puts(o, " Proven ε: the bound proven for the code as it runs, for the released models and (when the defense "
               "states one) for a client’s upload; ∞ = none proven, with a conditional bound beside it when one holds "
               "under stated assumptions. <a href=\"#matrix\">The matrix</a> has every attack’s figures.</p>");
    run_verdict_free(&v);
}

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
    // Kinds in the order they first appear.
    int n_kinds = 0;
    for (int i = 0; i < S->n_warnings; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(S->warnings[j].kind, S->warnings[i].kind) != 0;
        n_kinds += first;
    }
    hb_printf(o, "<div class=\"warnings\"><b>%d warning%s</b> of %d kind%s — open a kind to read them (also in "
                 "<code>results.json</code>, <code>summary.warnings</code>).",
              S->n_warnings, S->n_warnings == 1 ? "" : "s", n_kinds, n_kinds == 1 ? "" : "s");
    for (int i = 0; i < S->n_warnings; i++) {
        const char *kind = S->warnings[i].kind;
        int first = 1, count = 0;
        for (int j = 0; j < i && first; j++)
            first = strcmp(S->warnings[j].kind, kind) != 0;
        if (!first)
            continue;
        for (int j = i; j < S->n_warnings; j++)
            count += strcmp(S->warnings[j].kind, kind) == 0;
        hb_puts(o, "<details class=\"wgroup\"><summary><span class=\"wkind\">");
        hb_escape(o, kind);
        hb_printf(o, "</span>%d</summary><ul>", count);
        for (int j = i; j < S->n_warnings; j++)
            if (strcmp(S->warnings[j].kind, kind) == 0) {
                hb_puts(o, "<li>");
                hb_escape(o, S->warnings[j].message);
                hb_puts(o, "</li>");
            }
        hb_puts(o, "</ul></details>");
    }
    hb_puts(o, "</div>");
}
