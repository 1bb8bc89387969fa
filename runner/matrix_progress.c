// A matrix run's progress lines and their ETA (runner/matrix_progress.h).
#include "runner/matrix_progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "runner/matrix_cell.h"

// A cell's kind for the learned rates: the defense object it comes from.
static int cell_kind(const Cell *c) { return c->defense_index; }

FpStatus matrix_progress_init(MatrixProgress *p, const Matrix *m, FILE *out, int total, int finished,
                              const int *todo, int n, int jobs, FpError *err) {
    int kinds = 0;
    for (int i = 0; i < m->n_cells; i++)
        if (cell_kind(&m->cells[i]) + 1 > kinds)
            kinds = cell_kind(&m->cells[i]) + 1;
    *p = (MatrixProgress){.out = out, .m = m, .total = total, .finished = finished, .jobs = jobs > 0 ? jobs : 1,
                          .remaining = n, .seeds = m->n_seeds};
    p->pending = calloc((size_t)(m->n_cells ? m->n_cells : 1), 1);
    p->rates = cost_rates_create(kinds);
    if (!p->pending || !p->rates) {
        matrix_progress_free(p);
        return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    for (int t = 0; t < n; t++)
        p->pending[todo[t]] = 1;
    return FP_OK;
}

void matrix_progress_free(MatrixProgress *p) {
    free(p->pending);
    cost_rates_free(p->rates);
    p->pending = NULL;
    p->rates = NULL;
}

double matrix_progress_eta(const MatrixProgress *p) {
    double sum = 0, largest = 0;
    int left = 0;
    for (int i = 0; i < p->m->n_cells; i++) {
        if (!p->pending[i])
            continue;
        const Cell *c = &p->m->cells[i];
        double s = cost_rates_predict(p->rates, cell_kind(c), c->cost);
        if (isnan(s))
            return NAN;
        sum += s;
        largest = s > largest ? s : largest;
        left++;
    }
    // jobs at a time: the work shared among them, but never less than its largest cell.
    int par = p->jobs < left ? p->jobs : left;
    double eta = par > 0 ? sum / par : 0;
    return eta > largest ? eta : largest;
}

int matrix_attacks_configured(const Matrix *m, char *buf, size_t n) {
    int count = 0;
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < m->n_attacks; k++) {
        const AttackSpec *as = &m->attacks[k];
        int first = k == 0 || strcmp(m->attacks[k - 1].path, as->path) != 0; // copies share their object
        int last = k + 1 == m->n_attacks || strcmp(m->attacks[k + 1].path, as->path) != 0;
        count += first;
        if (len >= n)
            continue;
        if (first)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", count > 1 ? ", " : "", as->ops->name);
        if (as->observer && len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s%s%s", first ? " (" : ", ", as->observer, last ? ")" : "");
    }
    return count;
}

static void format_duration(double s, char *buf, size_t n) {
    if (s < 10)
        snprintf(buf, n, "%.1f s", s);
    else if (s < 60)
        snprintf(buf, n, "%.0f s", s);
    else if (s < 3600)
        snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, n, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

// ", dlg (server, lenet) ssim_mean 0.8977" per attack of the cell file j.
static size_t append_attacks(const Matrix *m, const cJSON *j, char *line, size_t k, size_t n) {
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(j, "attacks")) {
        const cJSON *ix = cJSON_GetObjectItemCaseSensitive(a, "index");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(a, "headline");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, "value");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(a, "status");
        if (k >= n || !cJSON_IsNumber(ix) || ix->valueint < 0 || ix->valueint >= m->n_attacks ||
            !cJSON_IsString(h) || !cJSON_IsString(s))
            continue;
        char title[160];
        matrix_attack_title(m, ix->valueint, title, sizeof title);
        if (cJSON_IsNumber(v))
            k += (size_t)snprintf(line + k, n - k, ", %s %s %.4f", title, h->valuestring, v->valuedouble);
        else
            k += (size_t)snprintf(line + k, n - k, ", %s %s", title, s->valuestring);
    }
    return k;
}

void matrix_progress_cell(MatrixProgress *p, const Cell *c, const char *dir, const char *where) {
    int i = (int)(c - p->m->cells);
    p->finished++;
    p->ran++;
    if (i >= 0 && i < p->m->n_cells && p->pending[i]) {
        p->pending[i] = 0;
        p->remaining--;
    }
    cost_rates_add(p->rates, cell_kind(c), c->cost, c->seconds);
    if (!p->out)
        return;
    char line[1024];
    char seed[40] = "";
    if (p->seeds > 1)
        snprintf(seed, sizeof seed, " (seed %llu)", (unsigned long long)c->seed);
    size_t k = (size_t)snprintf(line, sizeof line, "matrix: [%d/%d] %s%s: %s in %.1f s%s", p->finished, p->total,
                                c->label, seed, cell_status_name(c->status), c->seconds, where ? where : "");
    // The headline figures, read back from the cell file (it may come from a child).
    char rel[200];
    snprintf(rel, sizeof rel, "cells/%s.json", c->id);
    cJSON *j = NULL;
    if (c->status != CELL_FAILED && jv_load_beneath(dir, rel, &j, NULL, NULL) == FP_OK) {
        const cJSON *acc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "model"),
                                                            "test_accuracy");
        if (cJSON_IsNumber(acc) && k < sizeof line)
            k += (size_t)snprintf(line + k, sizeof line - k, ": accuracy %.4f", acc->valuedouble);
        k = append_attacks(p->m, j, line, k, sizeof line);
    }
    cJSON_Delete(j);
    if (c->status != CELL_DONE && c->message[0] && k < sizeof line)
        k += (size_t)snprintf(line + k, sizeof line - k, " (%s)", c->message);
    double eta = matrix_progress_eta(p);
    if (p->remaining > 0 && isfinite(eta) && k < sizeof line) {
        char text[64];
        format_duration(eta, text, sizeof text);
        snprintf(line + k, sizeof line - k, "; ETA %s", text);
    }
    fp_print_line(p->out, "%s", line); // labels and messages come from files: escaped
    fflush(p->out);
}
