// Reading a matrix run back: the index, the cell files and the stored audit findings
// (reports/results.h). The report and `fedpriv check` read runs only through here.
#include "reports/results.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        r->cells[i] = cell;
        r->status[i] = (CellStatus)cst;
    }
    return FP_OK;
}

void matrix_results_free(MatrixResults *r) {
    if (r->cells)
        for (int i = 0; i < r->n; i++)
            cJSON_Delete(r->cells[i]);
    free(r->cells);
    free(r->status);
    cJSON_Delete(r->index);
    memset(r, 0, sizeof *r);
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
