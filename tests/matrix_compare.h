// Comparing two matrix runs (tests of the runner, shards and MPI ranks): every cell of
// run a has the same status and result in run b, timings excepted, the same artifact
// bytes, and b holds no leftovers of interrupted cells (work folders, temp files, claims);
// and a run's index lists every cell as finished.
#ifndef FEDPRIV_TESTS_MATRIX_COMPARE_H
#define FEDPRIV_TESTS_MATRIX_COMPARE_H

#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"

// Timings are the only thing allowed to differ between runs: the cell's "run" object,
// keys ending in "seconds", and millisecond figures ("ms" as a word of the key, as in
// DLG's "ms_per_evaluation").
static inline int is_timing_key(const char *k) {
    size_t n = strlen(k);
    if (strcmp(k, "run") == 0 || (n >= 7 && strcmp(k + n - 7, "seconds") == 0))
        return 1;
    for (const char *p = strstr(k, "ms"); p; p = strstr(p + 1, "ms"))
        if ((p == k || p[-1] == '_') && (p[2] == 0 || p[2] == '_'))
            return 1;
    return 0;
}

static inline void strip_timings(cJSON *j) {
    cJSON *c = j ? j->child : NULL;
    while (c) {
        cJSON *next = c->next;
        if (c->string && is_timing_key(c->string))
            cJSON_Delete(cJSON_DetachItemViaPointer(j, c));
        else
            strip_timings(c);
        c = next;
    }
}

// The path of the first difference between a and b (for the failure message).
static inline int first_difference(const cJSON *a, const cJSON *b, const char *path, char *out,
                                   size_t n) {
    if (cJSON_Compare(a, b, 1))
        return 0;
    if (a && b && ((cJSON_IsObject(a) && cJSON_IsObject(b)) || (cJSON_IsArray(a) && cJSON_IsArray(b)))) {
        int i = 0;
        for (const cJSON *x = a->child; x; x = x->next, i++) {
            const cJSON *y = cJSON_IsObject(a) ? cJSON_GetObjectItemCaseSensitive(b, x->string) : cJSON_GetArrayItem(b, i);
            char sub[512];
            if (cJSON_IsObject(a))
                snprintf(sub, sizeof sub, "%.400s.%.100s", path, x->string);
            else
                snprintf(sub, sizeof sub, "%.400s[%d]", path, i);
            if (first_difference(x, y, sub, out, n))
                return 1;
        }
    }
    char *ta = a ? cJSON_PrintUnformatted(a) : NULL, *tb = b ? cJSON_PrintUnformatted(b) : NULL;
    snprintf(out, n, "%.300s: %.80s vs %.80s", path[0] ? path : "(top)", ta ? ta : "(absent)", tb ? tb : "(absent)");
    free(ta);
    free(tb);
    return 1;
}

static inline cJSON *load_json(const char *path) {
    cJSON *j = NULL;
    FpError err = {0};
    ck_assert_msg(jv_load_file(path, &j, &err) == FP_OK, "%s", err.msg);
    return j;
}

static inline void assert_same_files(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    ck_assert_msg(fa && fb, "%s or %s missing", a, b);
    int ca, cb;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
        ck_assert_msg(ca == cb, "%s and %s differ", a, b);
    } while (ca != EOF);
    fclose(fa);
    fclose(fb);
}

// Every cell of run a has the same status and result in run b (timings excepted), the
// same artifact bytes, and b has no leftovers of interrupted cells.
static inline void assert_same_runs(const char *a, const char *b) {
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/results.json", a);
    cJSON *ix = load_json(pa);
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ix, "cells")) {
        const char *id = cJSON_GetObjectItemCaseSensitive(e, "id")->valuestring;
        snprintf(pa, sizeof pa, "%s/cells/%s.json", a, id);
        snprintf(pb, sizeof pb, "%s/cells/%s.json", b, id);
        cJSON *ca = load_json(pa), *cb = load_json(pb);
        strip_timings(ca);
        strip_timings(cb);
        char where[512] = "";
        first_difference(ca, cb, "", where, sizeof where);
        ck_assert_msg(cJSON_Compare(ca, cb, 1), "cell %s differs at %s", id, where);
        const cJSON *at;
        cJSON_ArrayForEach(at, cJSON_GetObjectItemCaseSensitive(ca, "attacks")) {
            const cJSON *dir = cJSON_GetObjectItemCaseSensitive(at, "dir");
            if (!cJSON_IsString(dir))
                continue;
            snprintf(pa, sizeof pa, "%s/%s", a, dir->valuestring);
            DIR *d = opendir(pa);
            ck_assert_ptr_nonnull(d);
            struct dirent *de;
            while ((de = readdir(d)))
                if (de->d_name[0] != '.') {
                    char fa[800], fb[800];
                    snprintf(fa, sizeof fa, "%s/%s/%s", a, dir->valuestring, de->d_name);
                    snprintf(fb, sizeof fb, "%s/%s/%s", b, dir->valuestring, de->d_name);
                    assert_same_files(fa, fb);
                }
            closedir(d);
        }
        cJSON_Delete(ca);
        cJSON_Delete(cb);
        n++;
    }
    ck_assert_int_gt(n, 0);
    cJSON_Delete(ix);
    snprintf(pb, sizeof pb, "%s/cells", b);
    DIR *d = opendir(pb);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        ck_assert_msg(!strstr(de->d_name, ".partial"), "leftover %s", de->d_name);
        ck_assert_msg(!strstr(de->d_name, ".tmp."), "leftover %s", de->d_name);
        ck_assert_msg(!strstr(de->d_name, ".stale."), "leftover %s", de->d_name);
        ck_assert_msg(!strstr(de->d_name, ".running"), "leftover claim %s", de->d_name);
    }
    closedir(d);
}

// Every cell of the index has a finished status in the index itself (not only on disk).
static inline void assert_index_complete(const char *dir, int cells) {
    char path[512];
    snprintf(path, sizeof path, "%s/results.json", dir);
    cJSON *ix = load_json(path);
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ix, "cells")) {
        const char *st = cJSON_GetObjectItemCaseSensitive(e, "status")->valuestring;
        ck_assert_msg(strcmp(st, "done") == 0 || strcmp(st, "diverged") == 0, "%s: cell %d is %s in the index", dir,
                      n, st);
        n++;
    }
    ck_assert_int_eq(n, cells);
    cJSON_Delete(ix);
}

#endif
