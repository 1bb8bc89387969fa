// Strict JSON text (jv_parse in core/jsonv.h): the checks cJSON does not make.
//
// cJSON stays the parser; it accepts more than RFC 8259 allows (leading zeros, raw
// control characters in strings, any byte <= 0x20 as white space, "1." as a number),
// decodes \u0000 into a NUL that silently cuts the string, and keeps every duplicate
// key (lookups then find the first). So a scanner walks the text beside the tree cJSON
// built, value by value in document order, and rejects:
//   - anything outside the RFC 8259 grammar (white space is space, tab, CR, LF only);
//   - a leading zero ("02"), "1.", ".5", "+1", a number a double cannot hold (1e400);
//   - raw control characters (U+0000..U+001F) in a string, \u0000, a lone surrogate,
//     bytes that are not UTF-8, an unknown escape;
//   - a duplicate key in an object (compared after unescaping, as lookups compare);
//   - nesting deeper than JV_MAX_DEPTH.
// Each failure is "NAME:LINE:COLUMN: JSON.PATH: what" at the offending byte. When cJSON
// itself fails, the same scanner runs without a tree to say where and why.
//
// Exact integers: a double holds every integer below 2^53 exactly, but a literal with 16
// or more significant digits may name a number the double only approximates (cJSON
// reads 9007199254740993 as 9007199254740992, 4503599627370496.5 as 4503599627370496).
// For such a literal whose double is integral, the literal's text is kept in the number
// node's valuestring (cJSON frees, duplicates and ignores it for numbers), and jv_int
// reads the text, not the double.
#include "core/jsonv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JV_MAX_DEPTH 512

// The JSON path is a stack of frames, formatted only when a message needs it (a
// formatted path per array element would cost more than the scan itself on the MNIST
// digit files).
typedef struct PathFrame {
    const char *key; // NULL: an array index
    int key_len, index;
} PathFrame;

typedef struct Scan {
    const char *name;
    const unsigned char *t;
    size_t len, pos;
    int depth;
    PathFrame path[JV_MAX_DEPTH + 2];
    int n_path;
    FpError *err;
} Scan;

static void line_col(const Scan *S, size_t at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at && i < S->len; i++) {
        if (S->t[i] == '\n') {
            ++*line;
            *col = 1;
        } else
            ++*col;
    }
}

static void format_path(const Scan *S, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < S->n_path && k + 1 < n; i++) {
        const PathFrame *f = &S->path[i];
        int w = f->key ? snprintf(buf + k, n - k, "%s%.*s", k ? "." : "", f->key_len > 64 ? 64 : f->key_len, f->key)
                       : snprintf(buf + k, n - k, "[%d]", f->index);
        if (w < 0)
            break;
        k = k + (size_t)w < n ? k + (size_t)w : n - 1;
    }
}

static int scan_fail(Scan *S, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int scan_fail(Scan *S, size_t at, const char *fmt, ...) {
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int line, col;
    line_col(S, at, &line, &col);
    char path[2048];
    format_path(S, path, sizeof path);
    size_t plen = strlen(path);
    // A very deep path keeps its end, where the problem is.
    int cut = plen > 160;
    fp_fail(S->err, FP_EFORMAT, "%s:%d:%d: %s%s: %s", S->name, line, col, cut ? "..." : "",
            cut ? path + plen - 120 : plen ? path : "(top level)", what);
    return -1;
}

static void path_key(Scan *S, const char *key, size_t key_len) {
    S->path[S->n_path++] = (PathFrame){.key = key, .key_len = (int)(key_len < 4096 ? key_len : 4096)};
}

static void path_index(Scan *S, int i) { S->path[S->n_path++] = (PathFrame){.index = i}; }

static void path_pop(Scan *S) { S->n_path--; }

static void skip_ws(Scan *S) {
    while (S->pos < S->len &&
           (S->t[S->pos] == ' ' || S->t[S->pos] == '\t' || S->t[S->pos] == '\n' || S->t[S->pos] == '\r'))
        S->pos++;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 1;
}

// The length of a valid UTF-8 sequence of at most `avail` bytes at p (2-4), or 0.
static int utf8_len(const unsigned char *p, size_t avail) {
    int n = p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3 : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
    if (n == 0 || (size_t)n > avail)
        return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0) || (p[0] == 0xF0 && p[1] < 0x90) ||
        (p[0] == 0xF4 && p[1] >= 0x90))
        return 0; // overlong, a surrogate, or above U+10FFFF
    return n;
}

// A string at S->pos (on its opening quote).
static int scan_string(Scan *S) {
    size_t start = S->pos++;
    for (;;) {
        if (S->pos >= S->len)
            return scan_fail(S, start, "malformed JSON: unterminated string");
        unsigned c = S->t[S->pos];
        if (c == '"') {
            S->pos++;
            return 0;
        }
        if (c < 0x20)
            return scan_fail(S, S->pos, "raw control character U+%04X in a string (write it as an escape, e.g. \\n)",
                             c);
        if (c == '\\') {
            size_t at = S->pos;
            if (S->pos + 1 >= S->len)
                return scan_fail(S, start, "malformed JSON: unterminated string");
            unsigned e = S->t[S->pos + 1];
            if (e && strchr("\"\\/bfnrt", (int)e)) {
                S->pos += 2;
                continue;
            }
            if (e != 'u')
                return scan_fail(S, at, "malformed JSON: unknown escape \\%c in a string", e >= 0x20 && e < 0x7f ? (char)e : '?');
            unsigned u, lo;
            if (S->pos + 6 > S->len || !hex4(S->t + S->pos + 2, &u))
                return scan_fail(S, at, "malformed JSON: \\u must be followed by four hexadecimal digits");
            if (u == 0)
                return scan_fail(S, at, "\\u0000 (a NUL character) in a string");
            if (u >= 0xDC00 && u <= 0xDFFF)
                return scan_fail(S, at, "\\u%04x is a lone low surrogate", u);
            S->pos += 6;
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (S->pos + 6 > S->len || S->t[S->pos] != '\\' || S->t[S->pos + 1] != 'u' ||
                    !hex4(S->t + S->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return scan_fail(S, at, "\\u%04x is a high surrogate without its low half", u);
                S->pos += 6;
            }
            continue;
        }
        if (c >= 0x80) {
            int n = utf8_len(S->t + S->pos, S->len - S->pos);
            if (!n)
                return scan_fail(S, S->pos, "byte 0x%02x in a string is not UTF-8", c);
            S->pos += (size_t)n;
            continue;
        }
        S->pos++;
    }
}

// Reads a literal's text exactly: 1 and *out when it is an integer that fits a long
// long, -1 when it is an integer that does not, 0 when it is not an integer (or not a
// number at all).
int jv_text_integer(const char *text, long long *out) {
    const char *p = text;
    int neg = *p == '-';
    if (neg)
        p++;
    char digits[400];
    int nd = 0, frac = 0, seen_point = 0;
    for (; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.') {
            if (seen_point)
                return 0;
            seen_point = 1;
            continue;
        }
        if (!is_digit(*p))
            return 0;
        if (nd == 0 && *p == '0' && !seen_point)
            continue; // leading zeros of the integer part
        if (nd >= (int)sizeof digits - 1)
            return nd ? -1 : 0;
        digits[nd++] = *p;
        frac += seen_point;
    }
    long exp10 = 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        int eneg = *p == '-';
        if (*p == '+' || *p == '-')
            p++;
        if (!is_digit(*p))
            return 0;
        for (; is_digit(*p); p++)
            if (exp10 < 100000)
                exp10 = exp10 * 10 + (*p - '0');
        if (eneg)
            exp10 = -exp10;
    }
    if (*p)
        return 0;
    // value = digits × 10^(exp10 - frac)
    long scale = exp10 - frac;
    while (scale < 0 && nd > 0 && digits[nd - 1] == '0') {
        nd--;
        scale++;
    }
    int first = 0;
    while (first < nd && digits[first] == '0')
        first++;
    if (first == nd) {
        *out = 0;
        return 1;
    }
    if (scale < 0)
        return 0; // nonzero digits after the point
    if (nd - first + scale > 19)
        return -1;
    unsigned long long v = 0, lim = neg ? (unsigned long long)1 << 63 : ((unsigned long long)1 << 63) - 1;
    for (int i = first; i < nd + scale; i++) {
        unsigned d = i < nd ? (unsigned)(digits[i] - '0') : 0;
        if (v > (lim - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = neg ? (long long)(0 - v) : (long long)v;
    return 1;
}

static int scan_number(Scan *S, cJSON *node) {
    size_t start = S->pos;
    const unsigned char *t = S->t;
    int sig = 0, nonzero = 0;
    if (t[S->pos] == '-')
        S->pos++;
    if (S->pos < S->len && t[S->pos] == '0') {
        S->pos++;
        if (S->pos < S->len && is_digit(t[S->pos]))
            return scan_fail(S, start, "leading zero in a number (JSON writes 2, not 02)");
    } else if (S->pos < S->len && is_digit(t[S->pos])) {
        for (; S->pos < S->len && is_digit(t[S->pos]); S->pos++)
            sig++, nonzero = 1;
    } else
        return scan_fail(S, start, "malformed JSON: a digit must follow '-'");
    if (S->pos < S->len && t[S->pos] == '.') {
        S->pos++;
        if (S->pos >= S->len || !is_digit(t[S->pos]))
            return scan_fail(S, start, "malformed JSON: a digit must follow the decimal point");
        for (; S->pos < S->len && is_digit(t[S->pos]); S->pos++) {
            nonzero |= t[S->pos] != '0';
            sig += nonzero;
        }
    }
    if (S->pos < S->len && (t[S->pos] == 'e' || t[S->pos] == 'E')) {
        S->pos++;
        if (S->pos < S->len && (t[S->pos] == '+' || t[S->pos] == '-'))
            S->pos++;
        if (S->pos >= S->len || !is_digit(t[S->pos]))
            return scan_fail(S, start, "malformed JSON: a digit must follow the exponent mark");
        while (S->pos < S->len && is_digit(t[S->pos]))
            S->pos++;
    }
    if (!node)
        return 0;
    if (!cJSON_IsNumber(node))
        return scan_fail(S, start, "the parser read this value differently");
    if (!isfinite(node->valuedouble))
        return scan_fail(S, start, "%.*s is out of the range of a double (about ±1.8e308)",
                         (int)(S->pos - start < 40 ? S->pos - start : 40), (const char *)t + start);
    if (sig >= 16 && node->valuedouble == floor(node->valuedouble)) {
        size_t n = S->pos - start;
        char *text = malloc(n + 1);
        if (!text) {
            fp_fail(S->err, FP_ENOMEM, "%s: out of memory", S->name);
            return -1;
        }
        memcpy(text, t + start, n);
        text[n] = 0;
        free(node->valuestring);
        node->valuestring = text;
    }
    return 0;
}

static int scan_value(Scan *S, cJSON *node);

typedef struct Member {
    const char *key;
    size_t at;
} Member;

static int cmp_member(const void *a, const void *b) {
    const Member *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

// Duplicate keys of one object (lockstep mode only: keys as cJSON decoded them).
static int check_duplicates(Scan *S, Member *m, int n) {
    qsort(m, (size_t)n, sizeof *m, cmp_member);
    size_t worst = (size_t)-1;
    int wi = -1;
    for (int i = 1; i < n; i++)
        if (strcmp(m[i - 1].key, m[i].key) == 0 && m[i].at < worst) {
            worst = m[i].at; // report the earliest second occurrence in the text
            wi = i;
        }
    if (wi < 0)
        return 0;
    int line, col;
    line_col(S, m[wi - 1].at, &line, &col);
    path_key(S, m[wi].key, strlen(m[wi].key));
    int rc = scan_fail(S, m[wi].at, "duplicate key (first at line %d, column %d)", line, col);
    path_pop(S);
    return rc;
}

static int scan_object(Scan *S, cJSON *node) {
    size_t open = S->pos++;
    if (node && !cJSON_IsObject(node))
        return scan_fail(S, open, "the parser read this value differently");
    cJSON *child = node ? node->child : NULL;
    Member local[16], *members = local;
    int n = 0, cap = 16, rc = 0;
    skip_ws(S);
    if (S->pos < S->len && S->t[S->pos] == '}') {
        S->pos++;
        return 0;
    }
    for (;;) {
        skip_ws(S);
        if (S->pos >= S->len || S->t[S->pos] != '"') {
            rc = S->pos < S->len && S->t[S->pos] == '}' && n > 0
                     ? scan_fail(S, S->pos, "malformed JSON: trailing comma before '}'")
                     : scan_fail(S, S->pos < S->len ? S->pos : open, "malformed JSON: expected a key in double quotes");
            break;
        }
        size_t key_at = S->pos;
        if ((rc = scan_string(S)))
            break;
        size_t key_end = S->pos;
        skip_ws(S);
        if (S->pos >= S->len || S->t[S->pos] != ':') {
            rc = scan_fail(S, S->pos < S->len ? S->pos : key_at, "malformed JSON: expected ':' after the key");
            break;
        }
        S->pos++;
        if (node && !child) {
            rc = scan_fail(S, key_at, "the parser read this object differently");
            break;
        }
        if (child)
            path_key(S, child->string, strlen(child->string));
        else
            path_key(S, (const char *)S->t + key_at + 1, key_end - key_at - 2);
        rc = scan_value(S, child);
        path_pop(S);
        if (rc)
            break;
        if (child) {
            if (n == cap) {
                Member *bigger = malloc(sizeof *members * (size_t)cap * 2);
                if (!bigger) {
                    rc = -1;
                    fp_fail(S->err, FP_ENOMEM, "%s: out of memory", S->name);
                    break;
                }
                memcpy(bigger, members, sizeof *members * (size_t)n);
                if (members != local)
                    free(members);
                members = bigger;
                cap *= 2;
            }
            members[n] = (Member){.key = child->string, .at = key_at};
            child = child->next;
        }
        n++;
        skip_ws(S);
        if (S->pos < S->len && S->t[S->pos] == ',') {
            S->pos++;
            continue;
        }
        if (S->pos < S->len && S->t[S->pos] == '}') {
            S->pos++;
            break;
        }
        rc = scan_fail(S, S->pos < S->len ? S->pos : open,
                       S->pos < S->len ? "malformed JSON: expected ',' or '}' after a member"
                                       : "malformed JSON: unterminated object");
        break;
    }
    if (!rc && node)
        rc = check_duplicates(S, members, n);
    if (members != local)
        free(members);
    return rc;
}

static int scan_array(Scan *S, cJSON *node) {
    size_t open = S->pos++;
    if (node && !cJSON_IsArray(node))
        return scan_fail(S, open, "the parser read this value differently");
    cJSON *child = node ? node->child : NULL;
    skip_ws(S);
    if (S->pos < S->len && S->t[S->pos] == ']') {
        S->pos++;
        return 0;
    }
    path_index(S, 0);
    for (int i = 0;; i++) {
        S->path[S->n_path - 1].index = i;
        skip_ws(S);
        if (S->pos < S->len && S->t[S->pos] == ']' && i > 0) {
            path_pop(S);
            return scan_fail(S, S->pos, "malformed JSON: trailing comma before ']'");
        }
        if (node && !child) {
            path_pop(S);
            return scan_fail(S, S->pos, "the parser read this array differently");
        }
        if (scan_value(S, child)) {
            path_pop(S);
            return -1;
        }
        if (child)
            child = child->next;
        skip_ws(S);
        if (S->pos < S->len && S->t[S->pos] == ',') {
            S->pos++;
            continue;
        }
        path_pop(S);
        if (S->pos < S->len && S->t[S->pos] == ']') {
            S->pos++;
            return 0;
        }
        return scan_fail(S, S->pos < S->len ? S->pos : open,
                         S->pos < S->len ? "malformed JSON: expected ',' or ']' after an element"
                                         : "malformed JSON: unterminated array");
    }
}

static int scan_word(Scan *S, cJSON *node) {
    static const struct {
        const char *word;
        int (*is)(const cJSON *);
    } words[] = {{"true", cJSON_IsTrue}, {"false", cJSON_IsFalse}, {"null", cJSON_IsNull}};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t n = strlen(words[k].word);
        if (S->len - S->pos >= n && memcmp(S->t + S->pos, words[k].word, n) == 0) {
            if (node && !words[k].is(node))
                return scan_fail(S, S->pos, "the parser read this value differently");
            S->pos += n;
            return 0;
        }
    }
    return scan_fail(S, S->pos, "malformed JSON: unknown word (a value is true, false, null, a number, a string, [...] or {...})");
}

static int scan_value(Scan *S, cJSON *node) {
    skip_ws(S);
    if (S->pos >= S->len)
        return scan_fail(S, S->len, "malformed JSON: the text ends where a value should be");
    if (++S->depth > JV_MAX_DEPTH)
        return scan_fail(S, S->pos, "nested deeper than %d levels", JV_MAX_DEPTH);
    unsigned c = S->t[S->pos];
    int rc;
    if (c == '{')
        rc = scan_object(S, node);
    else if (c == '[')
        rc = scan_array(S, node);
    else if (c == '"') {
        rc = node && !cJSON_IsString(node) ? scan_fail(S, S->pos, "the parser read this value differently")
                                           : scan_string(S);
    } else if (c == '-' || is_digit((int)c))
        rc = scan_number(S, node);
    else if (c >= 'a' && c <= 'z')
        rc = scan_word(S, node);
    else if (c >= 0x20 && c < 0x7f)
        rc = scan_fail(S, S->pos, "malformed JSON: unexpected '%c' where a value should be", (char)c);
    else
        rc = scan_fail(S, S->pos, "malformed JSON: unexpected byte 0x%02x where a value should be", c);
    S->depth--;
    return rc;
}

// 0 when the whole text is one strict JSON value (matching tree, when not NULL).
static int scan_document(Scan *S, cJSON *tree) {
    if (S->len >= 3 && memcmp(S->t, "\xEF\xBB\xBF", 3) == 0)
        return scan_fail(S, 0, "the text starts with a byte-order mark (save it as UTF-8 without BOM)");
    skip_ws(S);
    if (S->pos >= S->len)
        return scan_fail(S, 0, "malformed JSON: empty: no JSON value");
    if (scan_value(S, tree))
        return -1;
    skip_ws(S);
    if (S->pos < S->len)
        return scan_fail(S, S->pos, "malformed JSON: text after the JSON value");
    return 0;
}

FpStatus jv_parse(const char *name, const char *text, size_t len, cJSON **out, FpError *err) {
    *out = NULL;
    if (!name)
        name = "(JSON text)";
    Scan S = {.name = name, .t = (const unsigned char *)text, .len = len, .err = err};
    // cJSON reads up to the first NUL; the scanner reads all len bytes.
    cJSON *tree = memchr(text, 0, len) ? NULL : cJSON_ParseWithLengthOpts(text, len, NULL, 0);
    if (!tree) {
        if (scan_document(&S, NULL))
            return err ? err->code : FP_EFORMAT;
        return fp_fail(err, FP_ENOMEM, "%s: out of memory parsing JSON", name);
    }
    if (scan_document(&S, tree)) {
        cJSON_Delete(tree);
        return err ? err->code : FP_EFORMAT;
    }
    *out = tree;
    return FP_OK;
}
