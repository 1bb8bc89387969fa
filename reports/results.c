// Reading a matrix run back: the index, the cell files and the stored audit findings
// (reports/results.h). The report and `fedpriv check` read runs only through here.
#include "reports/results.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"
#include "core/jsonv.h"

const char *cell_status_name(CellStatus s) {
    switch (s) {
    case CELL_DONE: return "done";
    case CELL_DIVERGED: return "diverged";
    case CELL_FAILED: return "failed";
    default: return "pending";
    }
}

int cell_status_parse(const char *s) {
    for (int i = CELL_PENDING; i <= CELL_FAILED; i++)
        if (s && strcmp(s, cell_status_name((CellStatus)i)) == 0)
            return i;
    return -1;
}

int results_id_is_safe(const char *id) {
    if (!id || !id[0] || strlen(id) > 120 || id[0] == '.')
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '-' || *p == '_'))
            return 0;
    return 1;
}

// Every metric a run's files hold that the report, the export and `fedpriv check` read,
// with the values it can take: where a cell metric lies in a cell file, and for attack
// results the keys that are a probability or a similarity wherever they appear. "inf"
// (core/json_number.h) is a legitimate ε (no guarantee) but no accuracy; null is "no
// value" (a diverged cell's accuracy). Reading a run refuses a value out of its range
// (check_metric_values): a tampered file is bad input, not a result to compare.
typedef struct MetricRange {
    const char *name;   // cell metric name, or the result key
    const char *path;   // in the cell file (NULL for attack result keys)
    double min, max;    // inclusive
    int infinite_ok;    // 1: +inf (or -inf, when min is -inf) is a value
    const char *what;   // for the message: "an accuracy is in [0, 1]"
} MetricRange;

static const MetricRange cell_metric_table[] = {
    {"model_accuracy", "model.test_accuracy", 0, 1, 0, "an accuracy is a finite number in [0, 1]"},
    {"model_loss", "model.test_loss", 0, INFINITY, 1, "a loss is at least 0"},
    {"epsilon_nominal", "privacy.nominal.epsilon_total", 0, INFINITY, 1, "an epsilon is at least 0 or \"inf\""},
    {"epsilon_sound", "privacy.sound.epsilon_total", 0, INFINITY, 1, "an epsilon is at least 0 or \"inf\""},
    {"epsilon_conditional", "privacy.sound.epsilon_total_conditional", 0, INFINITY, 1,
     "an epsilon is at least 0 or \"inf\""},
    {"epsilon_upload", "privacy.sound.upload.epsilon_total", 0, INFINITY, 1, "an epsilon is at least 0 or \"inf\""},
    // The field's figure for the same multiplier, rate and steps (fl/defense.h), no bound of the run.
    {"epsilon_standard_rdp", "privacy.standard.rdp", 0, INFINITY, 1, "an epsilon is at least 0 or \"inf\""},
    {"epsilon_standard_pld", "privacy.standard.pld", 0, INFINITY, 1, "an epsilon is at least 0 or \"inf\""},
};
#define N_CELL_METRICS (int)(sizeof cell_metric_table / sizeof cell_metric_table[0])

// Attack result keys by meaning: headlines (AttackOps.headline: "auc", "ssim_mean") and
// the figures of the same kind beside them.
static const MetricRange attack_metric_table[] = {
    {"auc", NULL, 0, 1, 0, "an AUC is a finite number in [0, 1]"},
    {"ssim_mean", NULL, -1, 1, 0, "an SSIM is a finite number in [-1, 1]"},
    {"ssim", NULL, -1, 1, 0, "an SSIM is a finite number in [-1, 1]"},
    {"label_accuracy", NULL, 0, 1, 0, "an accuracy is a finite number in [0, 1]"},
    {"best_balanced_accuracy", NULL, 0, 1, 0, "an accuracy is a finite number in [0, 1]"},
    {"shadow_test_accuracy_mean", NULL, 0, 1, 0, "an accuracy is a finite number in [0, 1]"},
};
#define N_ATTACK_METRICS (int)(sizeof attack_metric_table / sizeof attack_metric_table[0])

static const MetricRange *find_range(const MetricRange *t, int n, const char *name) {
    for (int k = 0; name && k < n; k++)
        if (strcmp(t[k].name, name) == 0)
            return &t[k];
    return NULL;
}

const char *results_cell_metric_at(int k) { return k >= 0 && k < N_CELL_METRICS ? cell_metric_table[k].name : NULL; }

int results_is_cell_metric(const char *metric) {
    return find_range(cell_metric_table, N_CELL_METRICS, metric) != NULL;
}

double results_cell_metric(const cJSON *cell, const char *metric) {
    const MetricRange *m = find_range(cell_metric_table, N_CELL_METRICS, metric);
    return m ? jnum_value(results_lookup(cell, m->path)) : NAN;
}

// NULL when v (possibly absent) is null or a value m allows, else the reason in buf.
// The limits hold to rounding (1e-9): an SSIM computed as 1 + 2^-52 is a result.
static const char *range_problem(const MetricRange *m, const cJSON *v, char *buf, size_t n) {
    if (!v || cJSON_IsNull(v))
        return NULL;
    if (!jnum_is_value(v)) {
        snprintf(buf, n, "must be a number%s or null (%s)", m->infinite_ok ? ", \"inf\"" : "", m->what);
        return buf;
    }
    double x = jnum_value(v);
    if ((isfinite(x) || m->infinite_ok) && x >= m->min - 1e-9 && x <= m->max + 1e-9)
        return NULL;
    char num[40];
    snprintf(buf, n, "%s is out of range (%s)", jnum_text(x, num, sizeof num), m->what);
    return buf;
}

// The attack result keys of the table, wherever they are in obj (objects and lists).
static FpStatus check_attack_values(const cJSON *obj, char *path, size_t len, size_t cap, const char *file,
                                    FpError *err) {
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, obj) {
        size_t n = it->string ? (size_t)snprintf(path + len, cap - len, ".%s", it->string)
                              : (size_t)snprintf(path + len, cap - len, "[%d]", i);
        i++;
        if (len + n >= cap)
            continue;
        char why[200];
        const MetricRange *m = it->string ? find_range(attack_metric_table, N_ATTACK_METRICS, it->string) : NULL;
        if (m && range_problem(m, it, why, sizeof why))
            return fp_fail(err, FP_EFORMAT, "%s: %s: %s", file, path, why);
        if (cJSON_IsObject(it) || cJSON_IsArray(it))
            FP_TRY(check_attack_values(it, path, len + n, cap, file, err));
        path[len] = 0;
    }
    return FP_OK;
}

// A cell file's metrics against the table: one message naming the file and the JSON
// path of the first value out of range.
static FpStatus check_metric_values(const cJSON *cell, const char *file, FpError *err) {
    char why[200];
    for (int k = 0; k < N_CELL_METRICS; k++) {
        const MetricRange *m = &cell_metric_table[k];
        if (range_problem(m, results_lookup(cell, m->path), why, sizeof why))
            return fp_fail(err, FP_EFORMAT, "%s: %s: %s", file, m->path, why);
    }
    const cJSON *a;
    int i = 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(cell, "attacks")) {
        char path[512];
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(a, "headline");
        const MetricRange *m = cJSON_IsString(h) ? find_range(attack_metric_table, N_ATTACK_METRICS, h->valuestring)
                                                 : NULL;
        snprintf(path, sizeof path, "attacks[%d].value", i);
        if (m && range_problem(m, cJSON_GetObjectItemCaseSensitive(a, "value"), why, sizeof why))
            return fp_fail(err, FP_EFORMAT, "%s: %s: %s", file, path, why);
        int len = snprintf(path, sizeof path, "attacks[%d].result", i);
        FP_TRY(check_attack_values(cJSON_GetObjectItemCaseSensitive(a, "result"), path, (size_t)len, sizeof path, file,
                                   err));
        i++;
    }
    return FP_OK;
}

// Cells are grouped by their index entry's "setting" number (the matrix runner writes
// it: one setting, several seeds); an entry without one is a setting of its own. A
// number outside [0, n) is a malformed index.
static FpStatus group_settings(MatrixResults *r) {
    int n = r->n ? r->n : 1;
    r->settings = calloc((size_t)n, sizeof(MatrixSetting));
    int *of = malloc(sizeof(int) * (size_t)n), *slot = malloc(sizeof(int) * (size_t)n);
    FpStatus st = r->settings && of && slot ? FP_OK : FP_ENOMEM;
    for (int i = 0; i < n && st == FP_OK; i++)
        slot[i] = -1;
    for (int i = 0; i < r->n && st == FP_OK; i++) {
        const cJSON *sv = cJSON_GetObjectItemCaseSensitive(matrix_index_cell(r, i), "setting");
        if (!sv) {
            of[i] = r->n_settings++;
            continue;
        }
        if (!cJSON_IsNumber(sv) || sv->valuedouble < 0 || sv->valuedouble >= r->n ||
            sv->valuedouble != (double)(int)sv->valuedouble) {
            st = FP_EFORMAT;
            break;
        }
        int k = (int)sv->valuedouble;
        if (slot[k] < 0)
            slot[k] = r->n_settings++;
        of[i] = slot[k];
    }
    for (int i = 0; i < r->n && st == FP_OK; i++)
        r->settings[of[i]].n_runs++;
    for (int k = 0; k < r->n_settings && st == FP_OK; k++) {
        if (!(r->settings[k].runs = malloc(sizeof(int) * (size_t)r->settings[k].n_runs)))
            st = FP_ENOMEM;
        r->settings[k].n_runs = 0;
    }
    for (int i = 0; i < r->n && st == FP_OK; i++) {
        MatrixSetting *g = &r->settings[of[i]];
        g->runs[g->n_runs++] = i;
    }
    free(of);
    free(slot);
    return st;
}

FpStatus matrix_results_load(const char *dir, MatrixResults *r, FpError *err) {
    memset(r, 0, sizeof *r);
    char path[4096];
    snprintf(path, sizeof path, "%s/results.json", dir);
    // Everything below DIR is read through jv_load_beneath: a link planted in the run
    // folder is refused, never followed out of it.
    FP_TRY(jv_load_beneath(dir, "results.json", &r->index, NULL, err));
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(r->index, "cells");
    if (!cJSON_IsObject(r->index) || !cJSON_IsArray(cells)) {
        matrix_results_free(r);
        return fp_fail(err, FP_EFORMAT, "%s: not a fedpriv matrix index (no \"cells\" list)", path);
    }
    r->n = cJSON_GetArraySize(cells);
    r->cells = calloc((size_t)(r->n ? r->n : 1), sizeof(cJSON *));
    r->status = calloc((size_t)(r->n ? r->n : 1), sizeof(CellStatus));
    if (!r->cells || !r->status) {
        matrix_results_free(r);
        return fp_fail(err, FP_ENOMEM, "out of memory reading %s", path);
    }
    for (int i = 0; i < r->n; i++) {
        const cJSON *e = cJSON_GetArrayItem(cells, i);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(e, "status");
        const cJSON *hash = cJSON_GetObjectItemCaseSensitive(e, "spec_hash");
        int s = cJSON_IsString(status) ? cell_status_parse(status->valuestring) : -1;
        if (!cJSON_IsString(id) || !results_id_is_safe(id->valuestring) || s < 0 || !cJSON_IsString(hash)) {
            matrix_results_free(r);
            return fp_fail(err, FP_EFORMAT, "%s: cells[%d]: needs a plain \"id\", a \"spec_hash\" and a known \"status\"",
                           path, i);
        }
        r->status[i] = (CellStatus)s;
        char cpath[4096], rel[200];
        snprintf(cpath, sizeof cpath, "%s/cells/%s.json", dir, id->valuestring);
        snprintf(rel, sizeof rel, "cells/%s.json", id->valuestring);
        cJSON *cell = NULL;
        int missing = 0;
        FpStatus st = jv_load_beneath(dir, rel, &cell, &missing, err);
        if (st != FP_OK && missing) {
            r->status[i] = CELL_PENDING; // no file: whatever the index said, nothing to show
            continue;
        }
        if (st != FP_OK) {
            matrix_results_free(r);
            return st;
        }
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(cell, "spec_hash");
        const cJSON *cs = cJSON_GetObjectItemCaseSensitive(cell, "status");
        int cst = cJSON_IsString(cs) ? cell_status_parse(cs->valuestring) : -1;
        if (!cJSON_IsObject(cell) || !cJSON_IsString(ch) || cst < 0) {
            cJSON_Delete(cell);
            matrix_results_free(r);
            return fp_fail(err, FP_EFORMAT, "%s: not a fedpriv matrix cell (needs \"spec_hash\" and \"status\")", cpath);
        }
        if (strcmp(ch->valuestring, hash->valuestring) != 0) { // a stale file from another matrix
            cJSON_Delete(cell);
            r->status[i] = CELL_PENDING;
            continue;
        }
        if ((st = check_metric_values(cell, cpath, err)) != FP_OK) {
            cJSON_Delete(cell);
            matrix_results_free(r);
            return st;
        }
        r->cells[i] = cell;
        r->status[i] = (CellStatus)cst;
    }
    FpStatus st = group_settings(r);
    if (st != FP_OK) {
        matrix_results_free(r);
        return st == FP_ENOMEM ? fp_fail(err, st, "out of memory reading %s", path)
                               : fp_fail(err, st, "%s: a cell's \"setting\" is not an index below the cell count", path);
    }
    return FP_OK;
}

void matrix_results_free(MatrixResults *r) {
    for (int k = 0; r->settings && k < r->n_settings; k++)
        free(r->settings[k].runs);
    free(r->settings);
    if (r->cells)
        for (int i = 0; i < r->n; i++)
            cJSON_Delete(r->cells[i]);
    free(r->cells);
    free(r->status);
    cJSON_Delete(r->index);
    memset(r, 0, sizeof *r);
}

const cJSON *matrix_index_cell(const MatrixResults *r, int i) {
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->index, "cells"), i);
}

const cJSON *matrix_index_attack(const MatrixResults *r, int k) {
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->index, "attacks"), k);
}

int matrix_attack_count(const MatrixResults *r) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r->index, "attacks");
    return cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
}

const cJSON *matrix_cell_attack_at(const cJSON *cell, int k) {
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(cell, "attacks")) {
        const cJSON *ix = cJSON_GetObjectItemCaseSensitive(a, "index");
        if (cJSON_IsNumber(ix) && ix->valuedouble == (double)k)
            return a;
    }
    return NULL;
}

const cJSON *results_lookup(const cJSON *obj, const char *path) {
    const cJSON *v = NULL;
    if (!path || !path[0])
        return NULL;
    if (cJSON_IsArray(obj)) { // "images.0.ssim": a list index
        char *end;
        long i = strtol(path, &end, 10);
        if (end == path || i < 0 || i > 1000000000 || (*end && *end != '.'))
            return NULL;
        v = cJSON_GetArrayItem(obj, (int)i);
        return *end ? results_lookup(v, end + 1) : v;
    }
    if (!cJSON_IsObject(obj))
        return NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, path)))
        return v;
    for (const char *dot = strchr(path, '.'); dot; dot = strchr(dot + 1, '.')) {
        size_t n = (size_t)(dot - path);
        char head[256];
        if (n >= sizeof head)
            break;
        memcpy(head, path, n);
        head[n] = 0;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(obj, head);
        if (h && (v = results_lookup(h, dot + 1)))
            return v;
    }
    return NULL;
}

int results_is_timing_key(const char *key) {
    size_t n = strlen(key);
    if (n >= 7 && strcmp(key + n - 7, "seconds") == 0)
        return 1;
    for (const char *p = key; (p = strstr(p, "ms")); p += 2)
        if ((p == key || p[-1] == '_') && (p[2] == 0 || p[2] == '_'))
            return 1;
    return 0;
}

double results_attack_metric(const cJSON *a, const char *metric) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(a, "status");
    if (!a || !cJSON_IsString(st) || strcmp(st->valuestring, "done") != 0)
        return NAN;
    if (strcmp(metric, "headline") == 0)
        return jnum_value(cJSON_GetObjectItemCaseSensitive(a, "value"));
    return jnum_value(results_lookup(cJSON_GetObjectItemCaseSensitive(a, "result"), metric));
}

const cJSON *matrix_cell_attack(const cJSON *cell, const char *name) {
    const cJSON *atk = cJSON_GetObjectItemCaseSensitive(cell, "attacks");
    const cJSON *a;
    cJSON_ArrayForEach(a, atk) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return a;
    }
    return NULL;
}

// Natural order (eps4 before eps10).
static int cmp_names(const void *a, const void *b) { return strverscmp(*(char *const *)a, *(char *const *)b); }

FpStatus matrix_audit_load(const char *dir, cJSON **records, FpError *err) {
    *records = cJSON_CreateArray();
    if (!*records)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    char path[4200];
    snprintf(path, sizeof path, "%s/audit", dir);
    DIR *d = opendir(path);
    if (!d)
        return FP_OK;
    char *names[512];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0 || de->d_name[0] == '.')
            continue;
        if (!(names[n] = strdup(de->d_name)))
            break;
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_names);
    FpStatus st = FP_OK;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/audit/%s", dir, names[i]);
        char rel[300];
        snprintf(rel, sizeof rel, "audit/%.250s", names[i]);
        cJSON *j = NULL;
        if (st == FP_OK && (st = jv_load_beneath(dir, rel, &j, NULL, err)) == FP_OK) {
            cJSON *list = cJSON_IsArray(j) ? j : cJSON_GetObjectItemCaseSensitive(j, "results");
            if (cJSON_IsArray(list)) {
                for (cJSON *a = list->child; a && st == FP_OK; a = a->next)
                    if (!cJSON_IsObject(a))
                        st = fp_fail(err, FP_EFORMAT, "%s: audit findings must be JSON objects", path);
            } else if (!cJSON_IsObject(j))
                st = fp_fail(err, FP_EFORMAT, "%s: not an audit finding (a JSON object or a list of them)", path);
            if (st == FP_OK) {
                if (cJSON_IsArray(list)) {
                    for (cJSON *a = list->child; a; a = a->next) {
                        cJSON *rec = cJSON_Duplicate(a, 1);
                        cJSON_DeleteItemFromObjectCaseSensitive(rec, "file");
                        cJSON_AddStringToObject(rec, "file", names[i]);
                        cJSON_AddItemToArray(*records, rec);
                    }
                } else {
                    cJSON *rec = cJSON_Duplicate(j, 1);
                    cJSON_DeleteItemFromObjectCaseSensitive(rec, "file");
                    cJSON_AddStringToObject(rec, "file", names[i]);
                    cJSON_AddItemToArray(*records, rec);
                }
            }
        }
        cJSON_Delete(j);
        free(names[i]);
    }
    if (st != FP_OK) {
        cJSON_Delete(*records);
        *records = NULL;
    }
    return st;
}
