// The HTML text buffer, escaping and atomic file writes of reports/html.h.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"
#include "reports/html.h"

// ---- buffer and escaping --------------------------------------------------------------

void hb_init(HtmlBuf *b) { *b = (HtmlBuf){0}; }
void hb_free(HtmlBuf *b) {
    free(b->s);
    *b = (HtmlBuf){0};
}

void hb_put(HtmlBuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void hb_puts(HtmlBuf *b, const char *s) { hb_put(b, s, strlen(s)); }

void hb_printf(HtmlBuf *b, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        hb_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    hb_put(b, big, (size_t)n);
    free(big);
}

// Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one.
static int utf8_len(const unsigned char *s) {
    if (s[0] < 0x80)
        return 1;
    int n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4))
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
        return 0; // overlong, surrogates
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}

void hb_escape(HtmlBuf *b, const char *text) {
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    while (*s) {
        switch (*s) {
        case '&': hb_puts(b, "&amp;"); s++; continue;
        case '<': hb_puts(b, "&lt;"); s++; continue;
        case '>': hb_puts(b, "&gt;"); s++; continue;
        case '"': hb_puts(b, "&quot;"); s++; continue;
        case '\'': hb_puts(b, "&#39;"); s++; continue;
        default: break;
        }
        if ((*s < 0x20 && *s != '\n' && *s != '\t') || *s == 0x7F) {
            hb_puts(b, "\xEF\xBF\xBD");
            s++;
            continue;
        }
        int n = utf8_len(s);
        if (n == 0) {
            hb_puts(b, "\xEF\xBF\xBD");
            s++;
        } else {
            hb_put(b, (const char *)s, (size_t)n);
            s += n;
        }
    }
}

void hb_escape_attr(HtmlBuf *b, const char *text) { hb_escape(b, text); }

FpStatus report_write_file_atomic(const char *path, const char *data, size_t n, FpError *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fp_create_new(tmp, err); // created exclusively, never through a link (core/files.h)
    if (!f)
        return FP_EIO;
    int ok = fwrite(data, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: write failed: %s", path, strerror(saved ? saved : EIO));
    }
    if (rename(tmp, path) != 0) {
        saved = errno;
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: cannot rename into place: %s", path, strerror(saved));
    }
    return FP_OK;
}
