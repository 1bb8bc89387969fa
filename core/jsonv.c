#include "core/jsonv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"
#include "core/json_number.h"
#include "core/proc.h"
#include "core/suggest.h"

const char *jv_path(char *buf, size_t n, const char *parent, const char *key) {
    if (parent && parent[0])
        snprintf(buf, n, "%s.%s", parent, key);
    else
        snprintf(buf, n, "%s", key);
    return buf;
}

int jv_key_in(const char *key, const char *const *list) {
    for (int i = 0; key && list && list[i]; i++)
        if (strcmp(list[i], key) == 0)
            return 1;
    return 0;
}

FpStatus jv_keys(const cJSON *obj, const char *path, const char *const *allowed, FpError *err) {
    if (!cJSON_IsObject(obj))
        return fp_fail(err, FP_EPARAM, "%s: must be an object", path && path[0] ? path : "(top level)");
    for (const cJSON *it = obj->child; it; it = it->next) {
        if (!jv_key_in(it->string, allowed)) {
            char p[256], hint[FP_SUGGEST_MAX_LEN + 32];
            FpSuggest s;
            fp_suggest_begin(&s, it->string);
            fp_suggest_add_list(&s, allowed);
            return fp_fail(err, FP_EPARAM, "%s: unknown key%s", jv_path(p, sizeof p, path, it->string),
                           fp_did_you_mean(&s, " (", ")", hint, sizeof hint));
        }
    }
    return FP_OK;
}

FpStatus jv_exclusive(const cJSON *obj, const char *path, const char *a, const char *b, FpError *err) {
    if (cJSON_GetObjectItemCaseSensitive(obj, a) && cJSON_GetObjectItemCaseSensitive(obj, b)) {
        char p[256];
        return fp_fail(err, FP_EPARAM, "%s: give \"%s\" or \"%s\", not both", jv_path(p, sizeof p, path, b), a, b);
    }
    return FP_OK;
}

FpStatus jv_number(const cJSON *obj, const char *path, const char *key, int required, double def, double lo,
                   int lo_open, double hi, int hi_open, double *out, FpError *err) {
    char p[256];
    jv_path(p, sizeof p, path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required)
            return fp_fail(err, FP_EPARAM, "%s: required number is missing", p);
        *out = def;
        return FP_OK;
    }
    if (!cJSON_IsNumber(v))
        return fp_fail(err, FP_EPARAM, "%s: must be a number", p);
    double x = v->valuedouble;
    if (!isfinite(x))
        return fp_fail(err, FP_EPARAM, "%s: must be finite", p);
    if ((lo_open ? x <= lo : x < lo) || (hi_open ? x >= hi : x > hi)) {
        char lob[32], hib[32];
        snprintf(lob, sizeof lob, "%g", lo);
        snprintf(hib, sizeof hib, "%g", hi);
        return fp_fail(err, FP_EPARAM, "%s: must be in %s%s, %s%s, got %g", p, lo_open ? "(" : "[",
                       isinf(lo) ? "-inf" : lob, isinf(hi) ? "inf" : hib, hi_open ? ")" : "]", x);
    }
    *out = x;
    return FP_OK;
}

FpStatus jv_int(const cJSON *obj, const char *path, const char *key, int required, long long def, long long lo,
                long long hi, long long *out, FpError *err) {
    char p[256];
    jv_path(p, sizeof p, path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required)
            return fp_fail(err, FP_EPARAM, "%s: required integer is missing", p);
        *out = def;
        return FP_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return fp_fail(err, FP_EPARAM, "%s: must be an integer", p);
    long long x;
    if (v->valuestring) { // the literal's text (core/jsonv_text.c): exact where the double is not
        int k = jv_text_integer(v->valuestring, &x);
        if (k == 0)
            return fp_fail(err, FP_EPARAM, "%s: must be an integer, got %.40s", p, v->valuestring);
        if (k < 0 || x < lo || x > hi)
            return fp_fail(err, FP_EPARAM, "%s: must be in [%lld, %lld], got %.40s", p, lo, hi, v->valuestring);
    } else {
        double d = v->valuedouble;
        if (d != floor(d))
            return fp_fail(err, FP_EPARAM, "%s: must be an integer", p);
        if (d < (double)lo || d > (double)hi || d < -0x1p63 || d >= 0x1p63)
            return fp_fail(err, FP_EPARAM, "%s: must be in [%lld, %lld], got %.17g", p, lo, hi, d);
        x = (long long)d;
        if (x < lo || x > hi) // (double)hi rounds up above 2^53
            return fp_fail(err, FP_EPARAM, "%s: must be in [%lld, %lld], got %lld", p, lo, hi, x);
    }
    *out = x;
    return FP_OK;
}

FpStatus jv_bool(const cJSON *obj, const char *path, const char *key, int def, int *out, FpError *err) {
    char p[256];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        *out = def;
        return FP_OK;
    }
    if (!cJSON_IsBool(v))
        return fp_fail(err, FP_EPARAM, "%s: must be true or false", jv_path(p, sizeof p, path, key));
    *out = cJSON_IsTrue(v);
    return FP_OK;
}

FpStatus jv_string(const cJSON *obj, const char *path, const char *key, int required, const char *def,
                   const char **out, FpError *err) {
    char p[256];
    jv_path(p, sizeof p, path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required)
            return fp_fail(err, FP_EPARAM, "%s: required string is missing", p);
        *out = def;
        return FP_OK;
    }
    if (!cJSON_IsString(v) || !v->valuestring)
        return fp_fail(err, FP_EPARAM, "%s: must be a string", p);
    *out = v->valuestring;
    return FP_OK;
}

FpStatus jv_choice(const cJSON *obj, const char *path, const char *key, const char *const *choices, int def,
                   int *out, FpError *err) {
    const char *s = NULL;
    FP_TRY(jv_string(obj, path, key, JV_OPTIONAL, NULL, &s, err));
    if (!s) {
        *out = def;
        return FP_OK;
    }
    for (int i = 0; choices[i]; i++)
        if (strcmp(choices[i], s) == 0) {
            *out = i;
            return FP_OK;
        }
    char p[256], list[512] = "";
    for (int i = 0; choices[i]; i++) {
        if (i)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, choices[i], sizeof list - strlen(list) - 1);
    }
    char hint[FP_SUGGEST_MAX_LEN + 32];
    FpSuggest sg;
    fp_suggest_begin(&sg, s);
    fp_suggest_add_list(&sg, choices);
    return fp_fail(err, FP_EPARAM, "%s: unknown value \"%.64s\" (%sexpected one of: %s)", jv_path(p, sizeof p, path, key),
                   s, fp_did_you_mean(&sg, "", " ", hint, sizeof hint), list);
}

FpStatus jv_object(const cJSON *obj, const char *path, const char *key, int required, const cJSON **out,
                   FpError *err) {
    char p[256];
    jv_path(p, sizeof p, path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required)
            return fp_fail(err, FP_EPARAM, "%s: required object is missing", p);
        *out = NULL;
        return FP_OK;
    }
    if (!cJSON_IsObject(v))
        return fp_fail(err, FP_EPARAM, "%s: must be an object", p);
    *out = v;
    return FP_OK;
}

FpStatus jv_number_array(const cJSON *obj, const char *path, const char *key, int required, int min_len,
                         int max_len, double **out, int *n, FpError *err) {
    char p[256];
    jv_path(p, sizeof p, path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    *n = 0;
    if (!v) {
        if (required)
            return fp_fail(err, FP_EPARAM, "%s: required array is missing", p);
        return FP_OK;
    }
    if (!cJSON_IsArray(v))
        return fp_fail(err, FP_EPARAM, "%s: must be an array of numbers", p);
    int len = cJSON_GetArraySize(v);
    if (len < min_len || len > max_len)
        return fp_fail(err, FP_EPARAM, "%s: must have %d to %d entries, got %d", p, min_len, max_len, len);
    double *a = fp_malloc(sizeof(double) * (size_t)(len ? len : 1), err);
    if (!a)
        return FP_ENOMEM;
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) {
            free(a);
            return fp_fail(err, FP_EPARAM, "%s[%d]: must be a number", p, i);
        }
        a[i] = it->valuedouble;
    }
    *out = a;
    *n = len;
    return FP_OK;
}

FpStatus jv_load_file(const char *filename, cJSON **out, FpError *err) {
    *out = NULL;
    char *buf;
    size_t len;
    // A regular file only (core/files.h fp_open_input): a FIFO named as a config does not
    // block, and the size is checked before anything is read.
    FP_TRY(fp_read_input(filename, (size_t)1 << 30, &buf, &len, err));
    FpStatus st = jv_parse(filename, buf, len, out, err);
    free(buf);
    return st;
}

FpStatus jv_load_beneath(const char *dir, const char *rel, cJSON **out, int *missing, FpError *err) {
    *out = NULL;
    char *buf;
    size_t len;
    FP_TRY(fp_read_beneath(dir, rel, (size_t)1 << 30, &buf, &len, missing, err));
    char name[4200];
    snprintf(name, sizeof name, "%s/%s", dir, rel);
    FpStatus st = jv_parse(name, buf, len, out, err);
    free(buf);
    return st;
}

// Number nodes that cJSON would print inexactly: integral, 1e15 <= |v| < 2^63.
static int needs_exact(const cJSON *n) {
    return cJSON_IsNumber(n) && n->valuedouble == floor(n->valuedouble) && fabs(n->valuedouble) >= 1e15 &&
           fabs(n->valuedouble) < 0x1p63;
}

static int any_needs_exact(const cJSON *j) {
    for (; j; j = j->next)
        if (needs_exact(j) || (j->child && any_needs_exact(j->child)))
            return 1;
    return 0;
}

// In a copy: such numbers become raw nodes holding all their digits.
static int make_exact(cJSON *j) {
    for (; j; j = j->next) {
        if (needs_exact(j)) {
            char digits[32];
            snprintf(digits, sizeof digits, "%.0f", j->valuedouble);
            char *text = strdup(digits);
            if (!text)
                return 0;
            free(j->valuestring);
            j->valuestring = text;
            j->type = cJSON_Raw;
        } else if (j->child && !make_exact(j->child))
            return 0;
    }
    return 1;
}

char *jv_print(const cJSON *j, int formatted) {
    if (!j)
        return NULL;
    if (!needs_exact(j) && !(j->child && any_needs_exact(j->child)))
        return formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    cJSON *copy = cJSON_Duplicate(j, 1);
    char *text = NULL;
    if (copy && make_exact(copy))
        text = formatted ? cJSON_Print(copy) : cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    return text;
}

FpStatus jv_write_file_atomic(const char *filename, const cJSON *json, FpError *err) {
    char *text = jnum_print(json, 1); // non-finite numbers by the one rule (core/json_number.h)
    if (!text)
        return fp_fail(err, FP_ENOMEM, "%s: out of memory serialising JSON", filename);
    size_t n = strlen(text);
    // The temp name carries host and PID: writers on several machines sharing the folder
    // (NFS) never write the same temp file.
    char tmp[4200], tag[PROC_TAG_MAX];
    proc_tag(tag, sizeof tag);
    snprintf(tmp, sizeof tmp, "%s.tmp.%s", filename, tag);
    FILE *f = fp_create_new(tmp, err); // a link planted at the temp name is not followed
    if (!f) {
        free(text);
        return FP_EIO;
    }
    int ok = fwrite(text, 1, n, f) == n && fputc('\n', f) != EOF && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = (fclose(f) == 0) && ok;
    free(text);
    if (!ok) {
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: write failed: %s", filename, strerror(saved ? saved : EIO));
    }
    if (rename(tmp, filename) != 0) {
        saved = errno;
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: cannot rename into place: %s", filename, strerror(saved));
    }
    return FP_OK;
}
