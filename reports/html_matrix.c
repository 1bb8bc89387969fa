// The attack × defense matrix of the report: one row per defense setting, the privacy
// it claims (nominal ε with its notion, sound ε with its guarantee and unit), the model
// accuracy and each attack's metrics, as means over seeds with 95% intervals; colours on
// fixed scales (reports/summary.h), a chance row at the bottom, and the per-seed values.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/report_internal.h"
#include "reports/verdict.h"

// Background of a value by where it lies on its scale: t = 0 green (no leak, or the
// accuracy without a defense), t = 1 red.
static void open_cell(HtmlBuf *o, double bad) {
    if (isnan(bad))
        hb_puts(o, "<td class=\"num\"");
    else
        hb_printf(o, "<td class=\"num\" style=\"background:hsl(%.0f,60%%,82%%)\"", 120 * (1 - bad));
}

// How bad an accuracy is: 0 at the accuracy without a defense (or above), 1 at chance
// (or below). Without a baseline, 1 - the share of the way from chance to 1.
static double accuracy_badness(const RunSummary *S, double acc) {
    if (isnan(acc) || isnan(S->chance))
        return NAN;
    double top = S->baseline >= 0 && S->settings[S->baseline].accuracy.stat.n > 0
                     ? S->settings[S->baseline].accuracy.stat.mean
                     : 1;
    if (!(top > S->chance + 1e-9))
        return NAN;
    double t = (acc - S->chance) / (top - S->chance);
    return t < 0 ? 1 : t > 1 ? 0 : 1 - t;
}

// 1 when warning w concerns setting si and attack k (-1: the setting itself). A
// setting's noise_after_observation warning concerns each attack that observes before
// the noise too.
static int concerns(const RunSummary *S, int w, int si, int k) {
    const RunWarning *x = &S->warnings[w];
    if (x->setting != si)
        return 0;
    if (x->attack == k)
        return 1;
    return k >= 0 && x->attack < 0 && strcmp(x->kind, "noise_after_observation") == 0 &&
           setting_observes_before_noise(&S->settings[si], k);
}

// The warnings that concern setting si (and attack k, or -1 for the setting itself), as
// a ⚠ with the messages in its tooltip.
static void warn_mark(HtmlBuf *o, const RunSummary *S, int si, int k) {
    int n = 0;
    for (int w = 0; w < S->n_warnings; w++)
        n += concerns(S, w, si, k);
    if (!n)
        return;
    hb_puts(o, " <a class=\"warn\" href=\"#warnings\" title=\"");
    for (int w = 0, m = 0; w < S->n_warnings; w++)
        if (concerns(S, w, si, k)) {
            hb_puts(o, m++ ? " | " : "");
            hb_escape_attr(o, S->warnings[w].message);
        }
    hb_puts(o, "\">⚠</a>");
}

static void put_guarantee(HtmlBuf *o, const SettingSummary *s) {
    const char *g = s->guarantee[0] ? s->guarantee : "none";
    hb_puts(o, " <span class=\"badge g-");
    hb_escape_attr(o, strcmp(g, "proven") == 0 || strcmp(g, "conditional") == 0 ? g : "none");
    hb_puts(o, "\"");
    if (cJSON_GetArraySize(s->assumptions) > 0) {
        hb_puts(o, " title=\"");
        const cJSON *a;
        int m = 0;
        cJSON_ArrayForEach(a, s->assumptions) if (cJSON_IsString(a)) {
            hb_puts(o, m++ ? " · " : "");
            hb_escape_attr(o, a->valuestring);
        }
        hb_puts(o, "\"");
    }
    hb_puts(o, ">");
    hb_escape(o, g);
    hb_puts(o, "</span>");
}

// Nominal ε (total after the last round) with its unit and notion; sound ε with its
// guarantee, δ and unit.
static void privacy_cells(HtmlBuf *o, const SettingSummary *s) {
    if (!s->privacy) {
        hb_puts(o, "<td class=\"eps-nominal\">—</td><td class=\"eps-sound\">—</td>");
        return;
    }
    hb_puts(o, "<td class=\"num eps-nominal\">");
    rep_put_num(o, s->eps_nominal);
    hb_puts(o, "<small title=\"");
    hb_escape_attr(o, s->nominal_notion);
    hb_puts(o, "\">");
    if (strcmp(s->unit, "none") != 0) {
        hb_puts(o, "per ");
        hb_escape(o, s->unit[0] ? s->unit : "?");
    }
    if (s->nominal_notion[0]) {
        char shortn[64];
        snprintf(shortn, sizeof shortn, "%.30s%s", s->nominal_notion, strlen(s->nominal_notion) > 30 ? "…" : "");
        hb_puts(o, strcmp(s->unit, "none") != 0 ? "; " : "");
        hb_escape(o, shortn);
    }
    hb_puts(o, "</small></td><td class=\"num eps-sound\">");
    rep_put_num(o, s->eps_sound);
    put_guarantee(o, s);
    hb_puts(o, "<small title=\"");
    hb_escape_attr(o, s->sound_notion);
    hb_puts(o, "\">");
    if (isfinite(s->eps_sound) || isfinite(s->delta)) {
        hb_puts(o, "(ε, δ = ");
        rep_put_num(o, s->delta);
        hb_puts(o, ") ");
    }
    if (strcmp(s->unit, "none") != 0) {
        hb_puts(o, "per ");
        hb_escape(o, s->unit[0] ? s->unit : "?");
    }
    if (isfinite(s->eps_conditional)) {
        hb_puts(o, "; conditional ");
        rep_put_num(o, s->eps_conditional);
    }
    if (!isnan(s->eps_standard_rdp) && !isnan(s->eps_standard_pld)) {   // the field's figure (fl/defense.h)
        hb_puts(o, "; standard accountant RDP ");
        rep_put_num(o, s->eps_standard_rdp);
        hb_puts(o, ", PLD ");
        rep_put_num(o, s->eps_standard_pld);
    }
    hb_puts(o, "</small></td>");
}

// The status of a setting's runs when they are not all done: "1 diverged", ...
static const char *setting_status(const SettingSummary *s) {
    if (s->n_done == s->runs->n_runs)
        return "done";
    if (s->n_failed)
        return "failed";
    if (s->n_diverged)
        return "diverged";
    return "pending";
}

// Under an attack column's name: the model it attacked ("on mlp"; "probe lenet, not the
// federation's mlp" when the attack attacked a model of its own). Runs made before results
// named their model show nothing.
static void attacked_model_note(HtmlBuf *o, const AttackColumn *c) {
    const char *m = rep_str(c->index, "attacked_model", NULL);
    if (!m)
        return;
    int probe = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c->index, "probe"));
    hb_puts(o, probe ? "<b>probe</b> " : "on ");
    hb_escape(o, m);
    if (probe) {
        hb_puts(o, ", not the federation's ");
        hb_escape(o, rep_str(c->index, "federation_model", "?"));
    }
    hb_puts(o, "<br>");
}

static void attack_cell(Report *R, int si, int k) {
    const RunSummary *S = &R->S;
    const SettingSummary *s = &S->settings[si];
    const AttackColumn *c = &S->attacks[k];
    const MetricSummary *h = setting_attack_metric(s, k, 0);
    HtmlBuf *o = &R->out;
    int n = s->runs->n_runs;
    if (s->not_applicable[k] && h->stat.n == 0) {
        hb_puts(o, "<td>");
        rep_put_status(o, "n/a", "the attack reports itself not applicable here");
        warn_mark(o, S, si, k);
        hb_puts(o, "</td>");
        return;
    }
    if (h->stat.n == 0) { // no run gave a value: say why (the first run's attack status)
        const char *st = "pending", *msg = "";
        for (int j = 0; j < n; j++) {
            const cJSON *cell = R->r.cells[s->runs->runs[j]];
            const cJSON *a = cell ? matrix_cell_attack_at(cell, k) : NULL;
            if (a) {
                st = rep_str(a, "status", "failed");
                msg = rep_str(a, "message", "");
                break;
            }
            if (cell) {
                st = cell_status_name(R->r.status[s->runs->runs[j]]);
                msg = rep_str(cell, "message", "");
            }
        }
        hb_puts(o, "<td>");
        rep_put_status(o, st, msg);
        hb_puts(o, "</td>");
        return;
    }
    // Colour by the headline on its fixed scale (its mean); none when it has no scale.
    double bad = metric_leak(c->scales[0], h->stat.mean);
    if (!c->scales[0])
        bad = NAN;
    open_cell(o, bad);
    hb_puts(o, " title=\"");
    rep_stat_title(o, h, n);
    hb_puts(o, "\">");
    rep_put_stat(o, h);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c->index, "probe"))) {
        // A probe's figure is of another model than the row's accuracy: both named.
        const MetricSummary *acc = S->regression ? &s->loss : &s->accuracy;
        hb_puts(o, "<small class=\"probe\">of the probe ");
        hb_escape(o, rep_str(c->index, "attacked_model", "?"));
        hb_puts(o, "; the federation's ");
        hb_escape(o, rep_str(c->index, "federation_model", "?"));
        hb_puts(o, S->regression ? ": test loss " : ": accuracy ");
        rep_put_stat(o, acc);
        hb_puts(o, "</small>");
    }
    if (h->stat.missing)
        hb_printf(o, "<small>%d of %d seeds without a value</small>", h->stat.missing, n);
    for (int q = 1; q < c->n_keys; q++) {
        const MetricSummary *m = setting_attack_metric(s, k, q);
        if (m->stat.n == 0)
            continue;
        MetricInterval iv = metric_interval(m);
        if (strcmp(c->keys[q], "recovered_fraction") == 0 && iv.kind == INTERVAL_WILSON) { // k of n, interval on hover
            hb_printf(o, "<small title=\"images recovered over the seeds; Wilson 95%% interval of the fraction "
                         "[%.3f, %.3f]\">recovered %.0f/%.0f</small>",
                      iv.low, iv.high, m->successes, m->trials);
            continue;
        }
        hb_puts(o, "<small>");
        hb_escape(o, c->scales[q] ? c->scales[q]->name : c->keys[q]);
        hb_puts(o, " ");
        rep_put_stat(o, m);
        hb_puts(o, "</small>");
    }
    warn_mark(o, S, si, k);
    hb_puts(o, "</td>");
}

// The attack columns grouped by family, then view (the verdict's columns), in index
// order within a group; attacks of no family last. ord receives S->n_attacks indices,
// group[k] each attack's group.
#define MATRIX_OTHER_GROUP VERDICT_MAX_COLUMNS
static int attack_group(const RunSummary *S, int k) {
    AttackFamily f = verdict_family_of(S->attacks[k].headline);
    return f == FAMILY_NONE ? MATRIX_OTHER_GROUP : (int)f * VERDICT_N_VIEWS + (int)verdict_view_of(S, k);
}

static void attack_order(const RunSummary *S, int *ord) {
    int n = 0;
    for (int g = 0; g <= MATRIX_OTHER_GROUP; g++)
        for (int k = 0; k < S->n_attacks; k++)
            if (attack_group(S, k) == g)
                ord[n++] = k;
}

static const char *const group_heads[VERDICT_N_FAMILIES] = {[FAMILY_INVERSION] = "Gradient inversion",
                                                            [FAMILY_MEMBERSHIP] = "Membership inference"};

static void per_seed_table(Report *R, const int *ord) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    hb_puts(o, "<details><summary>Per-seed values</summary><table><thead><tr><th>Setting</th><th>Seed</th>"
               "<th>Status</th><th>Model accuracy</th>");
    for (int q = 0; q < S->n_attacks; q++) {
        int k = ord[q];
        hb_puts(o, "<th>");
        hb_escape(o, S->attacks[k].label);
        hb_puts(o, "<br><small>");
        hb_escape(o, S->attacks[k].headline);
        hb_puts(o, "</small></th>");
    }
    hb_puts(o, "</tr></thead><tbody>");
    for (int si = 0; si < S->n_settings; si++) {
        const SettingSummary *s = &S->settings[si];
        for (int j = 0; j < s->runs->n_runs; j++) {
            int i = s->runs->runs[j];
            hb_puts(o, "<tr><td class=\"name\">");
            hb_escape(o, s->label);
            hb_puts(o, "</td><td class=\"num\">");
            rep_put_seed(o, rep_num(matrix_index_cell(&R->r, i), "seed"));
            hb_puts(o, "</td><td>");
            rep_put_status(o, cell_status_name(R->r.status[i]), R->r.cells[i] ? rep_str(R->r.cells[i], "message", "") : "");
            hb_puts(o, "</td><td class=\"num\">");
            rep_put_num(o, S->regression ? s->loss.values[j] : s->accuracy.values[j]);
            hb_puts(o, "</td>");
            for (int q = 0; q < S->n_attacks; q++) {
                hb_puts(o, "<td class=\"num\">");
                rep_put_num(o, setting_attack_metric(s, ord[q], 0)->values[j]);
                hb_puts(o, "</td>");
            }
            hb_puts(o, "</tr>");
        }
    }
    hb_puts(o, "</tbody></table></details>");
}

void section_matrix(Report *R) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    hb_puts(o, "<h2 id=\"matrix\">Attack × defense matrix</h2>");
    hb_printf(o, "<p class=\"note\">One row per defense setting; values are means over its seeds (the Seeds "
                 "column; up to %d here). Intervals: <b>[low, high]</b> is the Wilson 95%% interval of a proportion "
                 "(accuracy: correct test examples; recovered: images) pooled over the seeds; <b>± h</b> the "
                 "half-width of a Student-t 95%% interval, shown from %d seeds; with two seeds the two values "
                 "(low–high), no interval. Hover for the per-seed values",
              S->n_seeds, STATS_MIN_SEEDS_FOR_T);
    hb_puts(o, ". <b>Nominal ε</b> is what the defense's paper claims, in its own unit and notion; <b>sound ε</b> is "
               "an (ε, δ) bound after the last round with its guarantee: <span class=\"badge g-proven\">proven</span> "
               "for the code as it runs, <span class=\"badge g-conditional\">conditional</span> on stated assumptions "
               "(hover), or <span class=\"badge g-none\">none</span> (∞). Colours have fixed meanings, not the "
               "column's spread: leakage <span class=\"scale scale-leak\"></span> from chance (green: AUC 0.5, SSIM 0, "
               "TPR 1% at 1% FPR) to a full leak (red: AUC 1, SSIM 1); accuracy <span class=\"scale scale-acc\">"
               "</span> from chance (red) to the accuracy without a defense (green). ⚠ marks a warning.</p>");
    int *ord = malloc(sizeof(int) * (size_t)(S->n_attacks ? S->n_attacks : 1));
    if (!ord) {
        o->oom = 1;
        return;
    }
    attack_order(S, ord);
    hb_puts(o, "<div class=\"wide\"><table class=\"matrix\"><thead><tr><th rowspan=\"2\">Defense setting</th>"
               "<th rowspan=\"2\" class=\"eps-nominal\">Nominal ε<br><small>total, unit; notion</small></th>"
               "<th rowspan=\"2\" class=\"eps-sound\">Sound ε<br><small>total, guarantee</small></th>"
               "<th rowspan=\"2\">Seeds</th><th rowspan=\"2\">");
    hb_puts(o, S->regression ? "Model test loss" : "Model accuracy");
    hb_puts(o, "</th>");
    // One heading per group of attacks: family and view.
    for (int q = 0; q < S->n_attacks;) {
        int g = attack_group(S, ord[q]), span = 0;
        while (q + span < S->n_attacks && attack_group(S, ord[q + span]) == g)
            span++;
        if (g == MATRIX_OTHER_GROUP)
            hb_printf(o, "<th colspan=\"%d\" class=\"family\">Other attacks</th>", span);
        else
            hb_printf(o, "<th colspan=\"%d\" class=\"family\">%s <small>%s view</small></th>", span,
                      group_heads[g / VERDICT_N_VIEWS], verdict_view_name((VerdictView)(g % VERDICT_N_VIEWS)));
        q += span;
    }
    hb_puts(o, "</tr><tr>");
    for (int q = 0; q < S->n_attacks; q++) {
        const AttackColumn *c = &S->attacks[ord[q]];
        hb_puts(o, "<th>");
        hb_escape(o, c->label);
        hb_puts(o, "<br><small>");
        attacked_model_note(o, c);
        hb_escape(o, c->scales[0] ? c->scales[0]->name : c->headline);
        if (c->scales[0])
            hb_printf(o, " (chance %g)", c->scales[0]->chance);
        else
            hb_puts(o, c->higher_leaks ? " (higher = more leakage)" : " (lower = more leakage)");
        hb_puts(o, "</small></th>");
    }
    hb_puts(o, "</tr></thead><tbody>");
    for (int si = 0; si < S->n_settings; si++) {
        const SettingSummary *s = &S->settings[si];
        hb_puts(o, "<tr><td class=\"name\">");
        hb_escape(o, s->defense);
        if (s->variant) {
            hb_puts(o, " <span class=\"note\">");
            hb_escape(o, s->variant);
            hb_puts(o, "</span>");
        }
        if (isfinite(s->epsilon))
            hb_printf(o, " ε=%g", s->epsilon);
        warn_mark(o, S, si, -1);
        if (cJSON_GetArraySize(s->params) > 0) {
            hb_puts(o, "<small>");
            const cJSON *p;
            cJSON_ArrayForEach(p, s->params) {
                char *v = cJSON_PrintUnformatted(p);
                hb_escape(o, p->string);
                hb_puts(o, "=");
                hb_escape(o, v ? v : "?");
                hb_puts(o, " ");
                free(v);
            }
            hb_puts(o, "</small>");
        }
        hb_puts(o, "</td>");
        privacy_cells(o, s);
        hb_puts(o, "<td>");
        const char *st = setting_status(s);
        if (strcmp(st, "done") == 0)
            hb_printf(o, "%d", s->runs->n_runs);
        else {
            hb_printf(o, "%d/%d ", s->n_done, s->runs->n_runs);
            rep_put_status(o, st, NULL);
        }
        hb_puts(o, "</td>");
        const MetricSummary *m = S->regression ? &s->loss : &s->accuracy;
        if (m->stat.n == 0) {
            hb_puts(o, "<td>");
            rep_put_status(o, s->n_diverged ? "diverged" : st, NULL);
            hb_puts(o, "</td>");
        } else {
            open_cell(o, S->regression ? NAN : accuracy_badness(S, m->stat.mean));
            hb_puts(o, " title=\"");
            rep_stat_title(o, m, s->runs->n_runs);
            hb_puts(o, "\">");
            rep_put_stat(o, m);
            hb_puts(o, "</td>");
        }
        for (int q = 0; q < S->n_attacks; q++)
            attack_cell(R, si, ord[q]);
        hb_puts(o, "</tr>");
    }
    // Chance: what a model that learned nothing, and an attack that learned nothing, score.
    if (!S->regression) {
        hb_puts(o, "<tr class=\"chance\"><td>chance (no information)</td><td></td><td></td><td></td><td class=\"num\">");
        rep_put_num(o, S->chance);
        hb_puts(o, "<small>most frequent class</small></td>");
        for (int q = 0; q < S->n_attacks; q++) {
            int k = ord[q];
            hb_puts(o, "<td class=\"num\">");
            if (S->attacks[k].scales[0])
                hb_printf(o, "%g", S->attacks[k].scales[0]->chance);
            else
                hb_puts(o, "—");
            hb_puts(o, "</td>");
        }
        hb_puts(o, "</tr>");
    }
    hb_puts(o, "</tbody></table></div>");
    if (S->n_seeds > 1)
        per_seed_table(R, ord);
    free(ord);
}
