// Nearest-name suggestions (core/suggest.h).
#include "core/suggest.h"

#include <stdio.h>
#include <string.h>

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

int fp_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > FP_SUGGEST_MAX_LEN || m > FP_SUGGEST_MAX_LEN)
        return FP_SUGGEST_MAX_LEN + 1;
    // d[i][j]: distance between a[0..i) and b[0..j) (optimal string alignment: a swapped
    // pair is not edited again, which is what a typing slip is).
    int d[FP_SUGGEST_MAX_LEN + 1][FP_SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = lower((unsigned char)a[i - 1]) != lower((unsigned char)b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && lower((unsigned char)a[i - 1]) == lower((unsigned char)b[j - 2]) &&
                lower((unsigned char)a[i - 2]) == lower((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

// The largest distance still called a slip for a given name of length len.
static int threshold(size_t len) {
    int t = (int)(len / 3);
    return t < 1 ? 1 : t > 3 ? 3 : t;
}

void fp_suggest_begin(FpSuggest *s, const char *given) {
    s->given = given ? given : "";
    s->best = NULL;
    s->dist = threshold(strlen(s->given)) + 1;
}

void fp_suggest_add(FpSuggest *s, const char *candidate) {
    if (!candidate || strcmp(candidate, s->given) == 0)
        return;
    int d = fp_edit_distance(s->given, candidate);
    if (d < s->dist) {
        s->best = candidate;
        s->dist = d;
    }
}

void fp_suggest_add_list(FpSuggest *s, const char *const *names) {
    for (int i = 0; names && names[i]; i++)
        fp_suggest_add(s, names[i]);
}

void fp_suggest_probe(FpSuggest *s, int (*exists)(const char *name, const void *ctx), const void *ctx, char *buf,
                      size_t n) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789-_.";
    size_t len = strlen(s->given);
    if (s->dist <= 1 || len > FP_SUGGEST_MAX_LEN || n < len + 2)
        return;
    char t[FP_SUGGEST_MAX_LEN + 2];
    for (int kind = 0; kind < 4; kind++) {
        size_t positions = kind == 3 ? len + 1 : len;
        for (size_t i = 0; i < positions; i++) {
            size_t variants = kind == 0 || kind == 1 ? 1 : sizeof alphabet - 1;
            for (size_t k = 0; k < variants; k++) {
                if (kind == 0) { // delete given[i]
                    memcpy(t, s->given, i);
                    memcpy(t + i, s->given + i + 1, len - i);
                } else if (kind == 1) { // swap given[i], given[i + 1]
                    if (i + 1 >= len)
                        break;
                    memcpy(t, s->given, len + 1);
                    t[i] = s->given[i + 1];
                    t[i + 1] = s->given[i];
                } else if (kind == 2) { // substitute given[i]
                    if (s->given[i] == alphabet[k])
                        continue;
                    memcpy(t, s->given, len + 1);
                    t[i] = alphabet[k];
                } else { // insert before given[i]
                    memcpy(t, s->given, i);
                    t[i] = alphabet[k];
                    memcpy(t + i + 1, s->given + i, len - i + 1);
                }
                if (strcmp(t, s->given) != 0 && exists(t, ctx)) {
                    snprintf(buf, n, "%s", t);
                    s->best = buf;
                    s->dist = 1;
                    return;
                }
            }
        }
    }
}

const char *fp_did_you_mean(const FpSuggest *s, const char *before, const char *after, char *buf, size_t n) {
    if (n == 0)
        return "";
    buf[0] = 0;
    if (s->best)
        snprintf(buf, n, "%sdid you mean \"%s\"?%s", before, s->best, after);
    return buf;
}
