// The verdict of a matrix run (see reports/verdict.h).
#include "reports/verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"

static const char *const word_names[] = {[VERDICT_NO_RESULT] = "no result", [VERDICT_LEAKS] = "leaks",
                                         [VERDICT_PROTECTS] = "protects",
                                         [VERDICT_NOT_MEASURABLE] = "not measurable here"};
static const char *const view_names[VERDICT_N_VIEWS] = {[VERDICT_VIEW_SERVER] = "server",
                                                        [VERDICT_VIEW_PUBLIC] = "public"};
static const char *const family_names[VERDICT_N_FAMILIES] = {[FAMILY_INVERSION] = "inversion",
                                                             [FAMILY_MEMBERSHIP] = "membership"};

const char *verdict_word_name(VerdictWord w) { return word_names[w]; }
const char *verdict_view_name(VerdictView v) { return view_names[v]; }
const char *verdict_family_name(AttackFamily f) { return f >= 0 && f < VERDICT_N_FAMILIES ? family_names[f] : "?"; }

// Families by headline metric (the AttackOps headlines of attacks/).
static const struct {
    const char *headline;
    AttackFamily family;
} family_of_headline[] = {
    {"ssim_mean", FAMILY_INVERSION},         {"ssim_max", FAMILY_INVERSION},
    {"ssim", FAMILY_INVERSION},              {"auc", FAMILY_MEMBERSHIP},
    {"balanced_accuracy", FAMILY_MEMBERSHIP}, {"best_balanced_accuracy", FAMILY_MEMBERSHIP},
};

AttackFamily verdict_family_of(const char *headline) {
    for (size_t i = 0; headline && i < sizeof family_of_headline / sizeof family_of_headline[0]; i++)
        if (strcmp(family_of_headline[i].headline, headline) == 0)
            return family_of_headline[i].family;
    return FAMILY_NONE;
}

VerdictView verdict_view_of(const RunSummary *S, int k) {
    AttackFamily f = verdict_family_of(S->attacks[k].headline);
    const char *o = NULL;
    for (int i = 0; i < S->n_settings && !o; i++)
        o = S->settings[i].observer[k];
    if (!o) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(S->attacks[k].index, "observer");
        o = cJSON_IsString(v) ? v->valuestring : NULL;
    }
    if (!o)
        return f == FAMILY_MEMBERSHIP ? VERDICT_VIEW_PUBLIC : VERDICT_VIEW_SERVER;
    return strcmp(o, "public") == 0 ? VERDICT_VIEW_PUBLIC : VERDICT_VIEW_SERVER;
}

static int key_index(const AttackColumn *c, const char *key) {
    for (int q = 0; q < c->n_keys; q++)
        if (strcmp(c->keys[q], key) == 0)
            return q;
    return -1;
}

// Attack k's figures against setting s, into x (x->seeds = 0 when it has no value).
static void attack_figures(const RunSummary *S, const SettingSummary *s, int k, AttackFamily f, VerdictCell *x) {
    const AttackColumn *c = &S->attacks[k];
    const MetricSummary *h = setting_attack_metric(s, k, 0);
    *x = (VerdictCell){.attack = k, .seeds = h->stat.n, .recovered = NAN, .images = NAN, .ssim = NAN, .auc = NAN,
                       .tpr = NAN, .not_applicable = h->stat.n == 0 ? s->not_applicable[k] : 0};
    if (f == FAMILY_INVERSION) {
        x->ssim = h->stat.mean;
        int q = key_index(c, "recovered_fraction");
        const MetricSummary *m = q >= 0 ? setting_attack_metric(s, k, q) : NULL;
        if (m && m->trials > 0) {
            x->recovered = m->successes;
            x->images = m->trials;
        }
    } else {
        x->auc = h->stat.mean;
        int q = key_index(c, "tpr_at_fpr.0.01");
        if (q >= 0)
            x->tpr = setting_attack_metric(s, k, q)->stat.mean;
    }
}

static int cell_leaks(const RunSummary *S, const VerdictCell *x, AttackFamily f) {
    if (f == FAMILY_INVERSION && x->images > 0)
        return x->recovered >= 1;
    double v = f == FAMILY_INVERSION ? x->ssim : x->auc;
    return metric_leak(S->attacks[x->attack].scales[0], v) >= STATS_LEAK_SHARE;
}

// 1 when a is a stronger attack than b (b may have no value): more images recovered,
// then the higher mean SSIM; the higher mean AUC.
static int stronger(const VerdictCell *a, const VerdictCell *b, AttackFamily f) {
    if (a->seeds == 0 || b->seeds == 0) // a figure beats "not applicable", which beats nothing
        return a->seeds > 0 || (b->seeds == 0 && a->not_applicable > b->not_applicable);
    if (f == FAMILY_MEMBERSHIP)
        return a->auc > b->auc;
    double fa = a->images > 0 ? a->recovered / a->images : -1, fb = b->images > 0 ? b->recovered / b->images : -1;
    return fa > fb || (fa == fb && a->ssim > b->ssim);
}

FpStatus run_verdict_build(const RunSummary *S, RunVerdict *v) {
    memset(v, 0, sizeof *v);
    v->S = S;
    // Columns in a fixed order: server inversion, server membership, public inversion,
    // public membership; only those with an attack.
    int col_of[VERDICT_N_VIEWS][VERDICT_N_FAMILIES];
    int counts[VERDICT_N_VIEWS][VERDICT_N_FAMILIES] = {{0}};
    for (int k = 0; k < S->n_attacks; k++) {
        AttackFamily f = verdict_family_of(S->attacks[k].headline);
        if (f != FAMILY_NONE)
            counts[verdict_view_of(S, k)][f]++;
    }
    for (int w = 0; w < VERDICT_N_VIEWS; w++)
        for (int f = 0; f < VERDICT_N_FAMILIES; f++) {
            col_of[w][f] = -1;
            if (counts[w][f]) {
                col_of[w][f] = v->n_columns;
                v->columns[v->n_columns++] = (VerdictColumn){.view = w, .family = f, .n_attacks = counts[w][f]};
            }
        }
    v->n_rows = S->n_settings;
    v->rows = calloc((size_t)(S->n_settings ? S->n_settings : 1), sizeof(VerdictRow));
    if (!v->rows)
        return FP_ENOMEM;
    double base_acc = S->baseline >= 0 ? S->settings[S->baseline].accuracy.stat.mean : NAN;
    for (int i = 0; i < S->n_settings; i++) {
        const SettingSummary *s = &S->settings[i];
        VerdictRow *row = &v->rows[i];
        row->setting = i;
        row->accuracy_cost = base_acc - s->accuracy.stat.mean;
        for (int c = 0; c < v->n_columns; c++)
            row->cells[c] = (VerdictCell){.attack = -1, .recovered = NAN, .images = NAN, .ssim = NAN, .auc = NAN,
                                          .tpr = NAN};
        for (int k = 0; k < S->n_attacks; k++) {
            AttackFamily f = verdict_family_of(S->attacks[k].headline);
            if (f == FAMILY_NONE)
                continue;
            VerdictCell x;
            attack_figures(S, s, k, f, &x);
            VerdictCell *best = &row->cells[col_of[verdict_view_of(S, k)][f]];
            if ((x.seeds > 0 || x.not_applicable > 0) && stronger(&x, best, f))
                *best = x;
        }
    }
    // Measurable: the setting without a defense leaks in the column.
    for (int c = 0; c < v->n_columns; c++) {
        VerdictColumn *col = &v->columns[c];
        const VerdictCell *b = S->baseline >= 0 ? &v->rows[S->baseline].cells[c] : NULL;
        col->measurable = b && b->seeds > 0 && cell_leaks(S, b, col->family);
        for (int i = 0; i < v->n_rows; i++) {
            VerdictCell *x = &v->rows[i].cells[c];
            x->word = x->not_applicable          ? VERDICT_NOT_MEASURABLE
                      : x->seeds == 0                 ? VERDICT_NO_RESULT
                      : !col->measurable              ? VERDICT_NOT_MEASURABLE
                      : cell_leaks(S, x, col->family) ? VERDICT_LEAKS
                                                      : VERDICT_PROTECTS;
        }
    }
    return FP_OK;
}

void run_verdict_free(RunVerdict *v) {
    free(v->rows);
    memset(v, 0, sizeof *v);
}

// ---- text -------------------------------------------------------------------------------------

void verdict_column_title(const VerdictColumn *c, char *buf, size_t n) {
    snprintf(buf, n, "%s: %s", verdict_view_name(c->view), verdict_family_name(c->family));
}

static const struct {
    const char *kind, *note;
} accuracy_notes[] = {{"accuracy_at_chance", "at chance"}, {"accuracy_near_chance", "near chance"}};

const char *verdict_accuracy_note(const RunSummary *S, int i) {
    for (int w = 0; w < S->n_warnings; w++)
        for (size_t q = 0; q < sizeof accuracy_notes / sizeof accuracy_notes[0]; q++)
            if (S->warnings[w].setting == i && strcmp(S->warnings[w].kind, accuracy_notes[q].kind) == 0)
                return accuracy_notes[q].note;
    return NULL;
}

// "1", "∞".
static const char *eps_text(double e, char *buf, size_t n) {
    if (isinf(e))
        snprintf(buf, n, "∞");
    else if (isnan(e))
        snprintf(buf, n, "—");
    else
        snprintf(buf, n, "%.3g", e);
    return buf;
}

// One record: "1 per client (proven)", "∞; 2.21 per client (conditional)", "∞ (none)".
static size_t record_text(char *buf, size_t n, double eps, double cond, const char *guarantee, const char *unit) {
    char a[32], b[32], per[80] = "";
    if (unit && unit[0] && strcmp(unit, "none") != 0)
        fp_format(per, sizeof per, " per %s", unit);
    if (isfinite(eps))
        return fp_format(buf, n, "%s%s (%s)", eps_text(eps, a, sizeof a), per, guarantee[0] ? guarantee : "none");
    if (isfinite(cond))
        return fp_format(buf, n, "%s; %s%s (conditional)", eps_text(eps, a, sizeof a), eps_text(cond, b, sizeof b),
                         per);
    return fp_format(buf, n, "%s (%s)", eps_text(eps, a, sizeof a), guarantee[0] ? guarantee : "none");
}

void verdict_epsilon_text(const SettingSummary *s, char *buf, size_t n) {
    if (!s->privacy) {
        snprintf(buf, n, "—");
        return;
    }
    size_t k = record_text(buf, n, s->eps_sound, s->eps_conditional, s->guarantee, s->unit);
    if (k + 1 < n && s->upload_guarantee) {
        k += (size_t)snprintf(buf + k, n - k, "; upload ");
        if (k + 1 < n)
            record_text(buf + k, n - k, s->eps_upload, s->eps_upload_conditional, s->upload_guarantee, NULL);
    }
}

void verdict_cell_text(const VerdictColumn *c, const VerdictCell *x, char *buf, size_t n) {
    if (x->not_applicable)
        snprintf(buf, n, "not applicable");
    else if (x->seeds == 0)
        snprintf(buf, n, "—");
    else if (c->family == FAMILY_INVERSION && x->images > 0)
        snprintf(buf, n, "%.0f/%.0f recovered", x->recovered, x->images);
    else if (c->family == FAMILY_INVERSION)
        snprintf(buf, n, "SSIM %.3f", fabs(x->ssim) < 5e-4 ? 0.0 : x->ssim);
    else if (isfinite(x->tpr))
        snprintf(buf, n, "AUC %.3f, TPR %.1f%%", x->auc, 100 * x->tpr);
    else
        snprintf(buf, n, "AUC %.3f", x->auc);
}

// Display width of UTF-8 text: its code points (the table's text has no wide characters).
static int text_width(const char *s) {
    int w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

#define TEXT_COLS (4 + VERDICT_MAX_COLUMNS)

static void put_padded(HtmlBuf *o, const char *s, int width, int last) {
    hb_puts(o, s);
    for (int w = text_width(s); !last && w < width + 2; w++)
        hb_put(o, " ", 1);
}

void run_verdict_text(const RunVerdict *v, HtmlBuf *o) {
    const RunSummary *S = v->S;
    int nc = 4 + v->n_columns;
    // Every cell's text first (escaped by fp_format), then the widths.
    char(*cell)[160] = calloc((size_t)(v->n_rows + 1) * TEXT_COLS, sizeof *cell);
    if (!cell) {
        o->oom = 1;
        return;
    }
    static const char *const heads[4] = {"setting", "seeds", "accuracy (cost)", "proven ε"};
    for (int c = 0; c < 4; c++)
        snprintf(cell[c], sizeof cell[c], "%s", heads[c]);
    for (int c = 0; c < v->n_columns; c++)
        verdict_column_title(&v->columns[c], cell[4 + c], sizeof cell[4 + c]);
    for (int i = 0; i < v->n_rows; i++) {
        const VerdictRow *row = &v->rows[i];
        const SettingSummary *s = &S->settings[row->setting];
        char(*r)[160] = cell + (size_t)(i + 1) * TEXT_COLS;
        fp_format(r[0], sizeof r[0], "%s", s->label);
        snprintf(r[1], sizeof r[1], "%d", s->accuracy.stat.n > 0 ? s->accuracy.stat.n : s->runs->n_runs);
        if (s->accuracy.stat.n == 0)
            snprintf(r[2], sizeof r[2], "—");
        else if (isfinite(row->accuracy_cost) && !s->is_baseline)
            snprintf(r[2], sizeof r[2], "%.3f (%+.1f pts)", s->accuracy.stat.mean,
                     fabs(row->accuracy_cost) < 5e-4 ? 0.0 : -100 * row->accuracy_cost);
        else
            snprintf(r[2], sizeof r[2], "%.3f", s->accuracy.stat.mean);
        const char *note = verdict_accuracy_note(S, row->setting);
        if (note && s->accuracy.stat.n > 0) {
            size_t k = strlen(r[2]);
            snprintf(r[2] + k, sizeof r[2] - k, " %s", note);
        }
        verdict_epsilon_text(s, r[3], sizeof r[3]);
        for (int c = 0; c < v->n_columns; c++) {
            const VerdictCell *x = &row->cells[c];
            char fig[80];
            verdict_cell_text(&v->columns[c], x, fig, sizeof fig);
            if (x->attack < 0)
                snprintf(r[4 + c], sizeof r[4 + c], "%s", verdict_word_name(x->word));
            else
                fp_format(r[4 + c], sizeof r[4 + c], "%s: %s (%s)", verdict_word_name(x->word), fig,
                          S->attacks[x->attack].label);
        }
    }
    int width[TEXT_COLS] = {0};
    for (int i = 0; i <= v->n_rows; i++)
        for (int c = 0; c < nc; c++) {
            int w = text_width(cell[(size_t)i * TEXT_COLS + c]);
            width[c] = w > width[c] ? w : width[c];
        }
    hb_printf(o, "verdict: %d defense setting%s, %d attack%s in %d column%s\n", v->n_rows, v->n_rows == 1 ? "" : "s",
              S->n_attacks, S->n_attacks == 1 ? "" : "s", v->n_columns, v->n_columns == 1 ? "" : "s");
    for (int i = 0; i <= v->n_rows; i++) {
        for (int c = 0; c < nc; c++)
            put_padded(o, cell[(size_t)i * TEXT_COLS + c], width[c], c == nc - 1);
        hb_puts(o, "\n");
    }
    free(cell);
    hb_printf(o, "rule: %s\n", VERDICT_RULE);
    if (S->n_warnings)
        hb_printf(o, "%d warning%s in the report (fedpriv report DIR; results.json summary.warnings)\n",
                  S->n_warnings, S->n_warnings == 1 ? "" : "s");
}

// ---- JSON -------------------------------------------------------------------------------------

static void record_json(cJSON *o, double eps, double cond, const char *guarantee) {
    jnum_add(o, "epsilon_sound", eps);
    if (isfinite(cond))
        jnum_add(o, "epsilon_conditional", cond);
    cJSON_AddStringToObject(o, "guarantee", guarantee && guarantee[0] ? guarantee : "none");
}

cJSON *run_verdict_json(const RunVerdict *v) {
    const RunSummary *S = v->S;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "rule", VERDICT_RULE);
    cJSON *cols = cJSON_AddArrayToObject(j, "columns");
    for (int c = 0; c < v->n_columns; c++) {
        const VerdictColumn *col = &v->columns[c];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "view", verdict_view_name(col->view));
        cJSON_AddStringToObject(o, "family", verdict_family_name(col->family));
        cJSON_AddBoolToObject(o, "measurable", col->measurable);
        cJSON_AddNumberToObject(o, "attacks", col->n_attacks);
        cJSON_AddItemToArray(cols, o);
    }
    cJSON *rows = cJSON_AddArrayToObject(j, "rows");
    for (int i = 0; i < v->n_rows; i++) {
        const VerdictRow *row = &v->rows[i];
        const SettingSummary *s = &S->settings[row->setting];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "setting", s->label);
        cJSON_AddStringToObject(o, "defense", s->defense);
        cJSON_AddNumberToObject(o, "seeds", s->runs->n_runs);
        jnum_add(o, "accuracy", s->accuracy.stat.mean);
        jnum_add(o, "accuracy_cost", s->is_baseline ? NAN : row->accuracy_cost);
        const char *note = verdict_accuracy_note(S, row->setting);
        if (note)
            cJSON_AddStringToObject(o, "accuracy_note", note);
        cJSON *eps = cJSON_AddObjectToObject(o, "epsilon");
        cJSON_AddStringToObject(eps, "unit", s->unit);
        jnum_add(eps, "delta", s->delta);
        record_json(cJSON_AddObjectToObject(eps, "released"), s->eps_sound, s->eps_conditional, s->guarantee);
        if (s->upload_guarantee)
            record_json(cJSON_AddObjectToObject(eps, "upload"), s->eps_upload, s->eps_upload_conditional,
                        s->upload_guarantee);
        cJSON *cells = cJSON_AddArrayToObject(o, "cells");
        for (int c = 0; c < v->n_columns; c++) {
            const VerdictCell *x = &row->cells[c];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "view", verdict_view_name(v->columns[c].view));
            cJSON_AddStringToObject(e, "family", verdict_family_name(v->columns[c].family));
            cJSON_AddStringToObject(e, "verdict", verdict_word_name(x->word));
            if (x->attack >= 0)
                cJSON_AddStringToObject(e, "attack", S->attacks[x->attack].label);
            cJSON_AddNumberToObject(e, "seeds", x->seeds);
            if (x->not_applicable)
                cJSON_AddBoolToObject(e, "not_applicable", 1);
            if (v->columns[c].family == FAMILY_INVERSION) {
                if (x->images > 0) {
                    cJSON_AddNumberToObject(e, "images_recovered", x->recovered);
                    cJSON_AddNumberToObject(e, "images", x->images);
                }
                jnum_add(e, "ssim_mean", x->ssim);
            } else {
                jnum_add(e, "auc", x->auc);
                jnum_add(e, "tpr_at_fpr_0.01", x->tpr);
            }
            cJSON_AddItemToArray(cells, e);
        }
        cJSON_AddItemToArray(rows, o);
    }
    return j;
}
