#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FpStatus fp_fail(FpError *err, FpStatus code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
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
    int n = snprintf(msg, sizeof msg, "%s: ", prefix);
    if (n < 0 || (size_t)n >= sizeof msg)
        n = (int)sizeof msg - 1;
    snprintf(msg + n, sizeof msg - (size_t)n, "%s", err->msg);
    memcpy(err->msg, msg, sizeof msg);
}
