// The non-finite number rule (core/json_number.h).
#include "core/json_number.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"

cJSON *jnum_create(double v) {
    if (isfinite(v))
        return cJSON_CreateNumber(v);
    if (isinf(v))
        return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    return cJSON_CreateNull();
}

cJSON *jnum_add(cJSON *obj, const char *key, double v) {
    cJSON *item = jnum_create(v);
    if (item && !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return NULL;
    }
    return item;
}

double jnum_value(const cJSON *item) {
    if (cJSON_IsNumber(item))
        return item->valuedouble;
    if (cJSON_IsString(item) && strcmp(item->valuestring, "inf") == 0)
        return INFINITY;
    if (cJSON_IsString(item) && strcmp(item->valuestring, "-inf") == 0)
        return -INFINITY;
    return NAN;
}

int jnum_is_value(const cJSON *item) { return cJSON_IsNumber(item) || isinf(jnum_value(item)); }

const char *jnum_text(double v, char *buf, size_t n) {
    if (isfinite(v)) {
        // The shortest of 15, 16 or 17 significant digits that reads back to v.
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(buf, n, "%.*g", digits, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    }
    else if (isinf(v))
        snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
    else if (n > 0)
        buf[0] = 0;
    return buf;
}

static int has_nonfinite(const cJSON *j) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j) && !isfinite(j->valuedouble))
            return 1;
        if (j->child && has_nonfinite(j->child))
            return 1;
    }
    return 0;
}

// Rewrites, in place, every non-finite number under parent (a copy the caller owns) by
// the rule: the node becomes the string "inf" / "-inf", or null, keeping its key.
static int apply_rule(cJSON *parent) {
    for (cJSON *c = parent->child; c; c = c->next) {
        if (cJSON_IsNumber(c) && !isfinite(c->valuedouble)) {
            int keep = c->type & cJSON_StringIsConst; // a flag about the key, not the value
            if (isinf(c->valuedouble)) {
                c->valuestring = strdup(c->valuedouble > 0 ? "inf" : "-inf");
                if (!c->valuestring)
                    return 0;
                c->type = cJSON_String | keep;
            } else
                c->type = cJSON_NULL | keep;
            c->valuedouble = 0;
            c->valueint = 0;
        } else if (c->child && !apply_rule(c))
            return 0;
    }
    return 1;
}

char *jnum_print(const cJSON *json, int formatted) {
    if (!json)
        return NULL;
    // Printed by jv_print, which also writes large integers (seeds) with all their digits.
    if (!(cJSON_IsNumber(json) && !isfinite(json->valuedouble)) && !has_nonfinite(json->child))
        return jv_print(json, formatted);
    cJSON *copy = cJSON_Duplicate(json, 1), *wrap = cJSON_CreateArray();
    char *text = NULL;
    if (copy && wrap) {
        cJSON_AddItemToArray(wrap, copy); // so a top-level number can be replaced too
        if (apply_rule(wrap))
            text = jv_print(wrap->child, formatted);
        cJSON_Delete(wrap);
    } else {
        cJSON_Delete(copy);
        cJSON_Delete(wrap);
    }
    return text;
}
