// The tidy export of a matrix run (see reports/export.h).
#include "reports/export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"
#include "reports/results.h"

// epsilon_sound (proven, else inf), epsilon_conditional (the bound under the record's
// assumptions, empty unless conditional) and guarantee are the record's own (the released
// aggregates' observer), epsilon_upload and upload_guarantee the upload observer's record,
// labelled by its own proof; epsilon_standard_rdp and _pld the standard accountant's ε for
// the same multiplier, rate and steps (the field's figure, no bound of the run; empty when
// the defense states none). attacked_model names the model a row's figure is of: the
// federation's for its accuracy and loss, the attacked one for an attack's (a probe
// model's label when the attack attacked one; runner/attack_registry.h).
static const char *const columns[] = {"cell",      "setting", "defense", "variant", "params", "epsilon",
                                      "epsilon_nominal", "epsilon_sound", "epsilon_conditional", "guarantee",
                                      "epsilon_upload", "upload_guarantee", "epsilon_standard_rdp",
                                      "epsilon_standard_pld", "unit", "seed", "status", "attack",
                                      "attacked_model", "metric", "value"};
#define N_COLUMNS (int)(sizeof columns / sizeof columns[0])
// The columns a row's entries fill in.
enum { COL_STATUS = 16, COL_ATTACK, COL_ATTACKED_MODEL, COL_METRIC, COL_VALUE };
_Static_assert(COL_VALUE + 1 == N_COLUMNS, "the row columns are the last five");

// One row's fields: text, or a number (is_num) written by the non-finite rule.
typedef struct Field {
    const char *text;
    double num;
    int is_num;
} Field;

// A CSV field. Its text comes from the run's files, and a table on standard output is
// read on a terminal too: control characters are escaped first (core/status.h: ESC as
// \x1b, a newline as \n), so a field is one line of printable text whatever a tampered
// file holds; other text, UTF-8 included, is written as it is. Then RFC 4180 quoting.
static void csv_text(HtmlBuf *o, const char *raw) {
    char s[8192];
    fp_escape(raw, s, sizeof s);
    if (!strpbrk(s, ",\"")) {
        hb_puts(o, s);
        return;
    }
    hb_puts(o, "\"");
    for (const char *p = s; *p; p++)
        hb_put(o, *p == '"' ? "\"\"" : p, *p == '"' ? 2 : 1);
    hb_puts(o, "\"");
}

static void emit(HtmlBuf *o, ExportFormat fmt, const Field *f) {
    char num[40];
    if (fmt == EXPORT_CSV) {
        for (int c = 0; c < N_COLUMNS; c++) {
            if (c)
                hb_puts(o, ",");
            csv_text(o, f[c].is_num ? jnum_text(f[c].num, num, sizeof num) : f[c].text);
        }
        hb_puts(o, "\n");
        return;
    }
    cJSON *j = cJSON_CreateObject();
    for (int c = 0; c < N_COLUMNS && j; c++) {
        if (f[c].is_num)
            jnum_add(j, columns[c], f[c].num);
        else
            cJSON_AddStringToObject(j, columns[c], f[c].text);
    }
    // JSONL keeps every string exactly: cJSON escapes C0 controls, fp_escape_json the rest.
    char *t = j ? jnum_print(j, 0) : NULL, *safe = t ? fp_escape_json(t) : NULL;
    if (safe) {
        hb_puts(o, safe);
        hb_puts(o, "\n");
    } else
        o->oom = 1;
    free(safe);
    free(t);
    cJSON_Delete(j);
}

static const char *jstr(const cJSON *o, const char *key, const char *def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : def;
}

// Every number under obj (objects only; lists and timings left out), path-joined.
static void numbers(HtmlBuf *o, ExportFormat fmt, Field *f, const cJSON *obj, char *path, size_t len, size_t cap) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        if (!it->string || results_is_timing_key(it->string))
            continue;
        size_t n = (size_t)snprintf(path + len, cap - len, "%s%s", len ? "." : "", it->string);
        if (len + n >= cap)
            continue;
        if (cJSON_IsObject(it))
            numbers(o, fmt, f, it, path, len + n, cap);
        else if (jnum_is_value(it) || cJSON_IsNull(it)) {
            f[COL_METRIC] = (Field){.text = path};
            f[COL_VALUE] = (Field){.num = jnum_value(it), .is_num = 1};
            emit(o, fmt, f);
        }
        path[len] = 0;
    }
}

FpStatus report_export(const char *dir, ExportFormat fmt, HtmlBuf *o, FpError *err) {
    MatrixResults r;
    FP_TRY(matrix_results_load(dir, &r, err));
    if (fmt == EXPORT_CSV) {
        for (int c = 0; c < N_COLUMNS; c++) {
            hb_puts(o, c ? "," : "");
            hb_puts(o, columns[c]);
        }
        hb_puts(o, "\n");
    }
    for (int i = 0; i < r.n; i++) {
        const cJSON *e = matrix_index_cell(&r, i), *c = r.cells[i];
        if (!c)
            continue;
        const cJSON *priv = cJSON_GetObjectItemCaseSensitive(c, "privacy");
        const cJSON *sound = cJSON_GetObjectItemCaseSensitive(priv, "sound");
        const cJSON *upload = cJSON_GetObjectItemCaseSensitive(sound, "upload");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(e, "params");
        char *ptext = cJSON_GetArraySize(params) > 0 ? cJSON_PrintUnformatted(params) : NULL;
        Field f[N_COLUMNS] = {
            {.text = jstr(e, "id", "")},
            {.text = jstr(e, "label", "")},
            {.text = jstr(e, "defense", "")},
            {.text = jstr(e, "variant", "")},
            {.text = ptext ? ptext : ""},
            {.num = jnum_value(cJSON_GetObjectItemCaseSensitive(e, "epsilon")), .is_num = 1},
            {.num = results_cell_metric(c, "epsilon_nominal"), .is_num = 1},
            {.num = results_cell_metric(c, "epsilon_sound"), .is_num = 1},
            {.num = results_cell_metric(c, "epsilon_conditional"), .is_num = 1},
            {.text = jstr(priv, "guarantee", "")},
            {.num = results_cell_metric(c, "epsilon_upload"), .is_num = 1},
            {.text = jstr(upload, "guarantee", "")},
            {.num = results_cell_metric(c, "epsilon_standard_rdp"), .is_num = 1},
            {.num = results_cell_metric(c, "epsilon_standard_pld"), .is_num = 1},
            {.text = jstr(priv, "unit", "")},
            {.num = jnum_value(cJSON_GetObjectItemCaseSensitive(e, "seed")), .is_num = 1},
            {.text = cell_status_name(r.status[i])},
            {.text = ""},
            {.text = jstr(cJSON_GetObjectItemCaseSensitive(r.index, "model"), "name", "")},
            {.text = ""},
            {.is_num = 1},
        };
        const char *federation_model = f[COL_ATTACKED_MODEL].text;
        static const char *const model_metrics[] = {"model_accuracy", "model_loss"};
        for (int q = 0; q < 2; q++) {
            f[COL_METRIC] = (Field){.text = model_metrics[q]};
            f[COL_VALUE] = (Field){.num = results_cell_metric(c, model_metrics[q]), .is_num = 1};
            emit(o, fmt, f);
        }
        for (int k = 0; k < matrix_attack_count(&r); k++) {
            const cJSON *a = matrix_cell_attack_at(c, k);
            if (!a)
                continue;
            const cJSON *ix = matrix_index_attack(&r, k);
            f[COL_ATTACK] = (Field){.text = jstr(ix, "label", jstr(ix, "name", ""))};
            f[COL_ATTACKED_MODEL] = (Field){.text = jstr(a, "attacked_model", jstr(ix, "attacked_model",
                                                                                     federation_model))};
            f[COL_STATUS] = (Field){.text = jstr(a, "status", "")};
            if (strcmp(jstr(a, "status", ""), "done") != 0) {
                f[COL_METRIC] = (Field){.text = jstr(a, "headline", "")};
                f[COL_VALUE] = (Field){.num = NAN, .is_num = 1};
                emit(o, fmt, f);
                continue;
            }
            char path[512] = "";
            numbers(o, fmt, f, cJSON_GetObjectItemCaseSensitive(a, "result"), path, 0, sizeof path);
        }
        free(ptext);
    }
    matrix_results_free(&r);
    if (o->oom)
        return fp_fail(err, FP_ENOMEM, "out of memory exporting %s", dir);
    return FP_OK;
}
