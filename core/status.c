#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The length of the UTF-8 sequence at s (1-4), or 0 when s does not start a valid,
// shortest-form sequence of a Unicode scalar value.
static int utf8_seq(const unsigned char *s) {
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        return (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)) // overlong, surrogate
            return 0;
        return 3;
    }
    if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)) // overlong, > U+10FFFF
            return 0;
        return 4;
    }
    return 0;
}

// Code points shown escaped although valid: C1 controls, the line and paragraph
// separators, and the bidirectional embeddings, overrides and isolates (which can make
// text display in another order than it is stored).
static int escaped_code_point(unsigned cp) {
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
           (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

const char *fp_escape(const char *text, char *buf, size_t n) {
    if (!buf || n == 0)
        return buf;
    size_t k = 0;
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    while (*s) {
        char esc[8];
        const char *piece = esc;
        size_t len;
        int seq = utf8_seq(s);
        unsigned cp = 0;
        if (seq == 2)
            cp = (unsigned)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        else if (seq == 3)
            cp = (unsigned)(s[0] & 0x0F) << 12 | (unsigned)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        if (seq == 1 && *s >= 0x20 && *s != 0x7F) {
            piece = (const char *)s;
            len = 1;
        } else if (seq == 1) {
            len = (size_t)(*s == '\n'   ? snprintf(esc, sizeof esc, "\\n")
                           : *s == '\t' ? snprintf(esc, sizeof esc, "\\t")
                           : *s == '\r' ? snprintf(esc, sizeof esc, "\\r")
                                        : snprintf(esc, sizeof esc, "\\x%02x", *s));
        } else if (seq == 0) { // not UTF-8: the byte itself
            len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *s);
            seq = 1;
        } else if ((seq == 2 || seq == 3) && escaped_code_point(cp)) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", cp);
        } else {
            piece = (const char *)s;
            len = (size_t)seq;
        }
        if (k + len >= n)
            break;
        memcpy(buf + k, piece, len);
        k += len;
        s += seq;
    }
    buf[k] = 0;
    return buf;
}

char *fp_escape_json(const char *json) {
    const unsigned char *s = (const unsigned char *)(json ? json : "");
    size_t n = strlen((const char *)s);
    char *out = malloc(6 * n + 1); // a byte becomes at most 6 (\u007f), a longer sequence never more
    if (!out)
        return NULL;
    size_t k = 0;
    while (*s) {
        int seq = utf8_seq(s);
        unsigned cp = *s;
        if (seq == 2)
            cp = (unsigned)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        else if (seq == 3)
            cp = (unsigned)(s[0] & 0x0F) << 12 | (unsigned)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        if (seq == 0) {
            cp = 0xFFFD;
            seq = 1;
        } else if (!(seq == 1 && cp == 0x7F) && !((seq == 2 || seq == 3) && escaped_code_point(cp))) {
            memcpy(out + k, s, (size_t)seq);
            k += (size_t)seq;
            s += seq;
            continue;
        }
        k += (size_t)snprintf(out + k, 7, "\\u%04x", cp);
        s += seq;
    }
    out[k] = 0;
    return out;
}

size_t fp_vformat(char *buf, size_t n, const char *fmt, va_list ap) {
    if (!buf || n == 0)
        return 0;
    char raw[2048];
    vsnprintf(raw, sizeof raw, fmt, ap);
    fp_escape(raw, buf, n);
    return strlen(buf);
}

size_t fp_format(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t k = fp_vformat(buf, n, fmt, ap);
    va_end(ap);
    return k;
}

void fp_print_line(FILE *f, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    fp_vformat(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(f, "%s\n", line);
}

FpStatus fp_fail(FpError *err, FpStatus code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fp_vformat(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

const char *fp_status_name(FpStatus code) {
    switch (code) {
    case FP_OK: return "ok";
    case FP_EIO: return "io";
    case FP_EFORMAT: return "format";
    case FP_EPARAM: return "parameter";
    case FP_ENOMEM: return "out of memory";
    case FP_EDIVERGED: return "diverged";
    case FP_EBACKEND: return "backend";
    case FP_EUNSUPPORTED: return "unsupported";
    }
    return "unknown";
}

void *fp_malloc(size_t bytes, FpError *err) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        fp_fail(err, FP_ENOMEM, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *fp_calloc(size_t count, size_t size, FpError *err) {
    if (size && count > (size_t)-1 / size) {
        fp_fail(err, FP_ENOMEM, "out of memory: %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        fp_fail(err, FP_ENOMEM, "out of memory allocating %zu bytes", count * size);
    return p;
}

void fp_error_prefix(FpError *err, const char *prefix) {
    if (!err || !prefix)
        return;
    char msg[sizeof err->msg];
    fp_format(msg, sizeof msg, "%s: %s", prefix, err->msg);
    memcpy(err->msg, msg, sizeof msg);
}
