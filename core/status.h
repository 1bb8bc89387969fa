// Status codes and error messages. Library code returns an FpStatus and fills an
// FpError with one human-readable line; only cli/ turns a status into an exit code
// (FP_EIO, FP_EFORMAT and FP_EPARAM are the user's bad input: exit 2).
//
// Messages quote what users and files supply (names, labels, paths, JSON strings), so
// every message passes through one formatter, fp_vformat: whatever the arguments hold,
// the result is one line of printable UTF-8. Control characters (C0, DEL, C1), bytes
// that are not UTF-8, and the Unicode line separators and bidirectional overrides
// are written as escapes (\n, \t, \r, \xNN, \uXXXX), so a name cannot retitle a
// terminal, fake a second line or reorder what a reader sees. fp_fail, fp_error_prefix
// and fp_print_line all use it; printing code never formats user strings itself.
#ifndef FEDPRIV_CORE_STATUS_H
#define FEDPRIV_CORE_STATUS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

typedef enum {
    FP_OK = 0,
    FP_EIO,          // a file is missing, unreadable or unwritable
    FP_EFORMAT,      // a file is malformed: wrong magic, truncated, bad JSON, bad sizes
    FP_EPARAM,       // a parameter or config value is out of range, unknown or of the wrong type
    FP_ENOMEM,       // an allocation failed (a model or dataset too large)
    FP_EDIVERGED,    // training produced NaN or Inf
    FP_EBACKEND,     // the compute backend failed (CUDA error, no device)
    FP_EUNSUPPORTED, // the backend or model cannot do what was asked
} FpStatus;

typedef struct FpError {
    FpStatus code;
    char msg[512];
} FpError;

// Sets err (when not NULL) to code and a printf-style message (through fp_vformat);
// returns code so that callers can write `return fp_fail(err, FP_EPARAM, "...")`.
FpStatus fp_fail(FpError *err, FpStatus code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Puts "prefix: " before err's message (truncating the end when it no longer fits), e.g.
// the config file's name before a JSON path.
void fp_error_prefix(FpError *err, const char *prefix);

// printf-style formatting into buf (n >= 1 bytes, always NUL-terminated), then the
// escaping described above; a long result is cut at a character boundary, never inside
// an escape. Returns the length written.
size_t fp_vformat(char *buf, size_t n, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
size_t fp_format(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// The escaped form of text in buf (n >= 1 bytes); returns buf.
const char *fp_escape(const char *text, char *buf, size_t n);
// Prints one formatted, escaped line (at most 2 KiB) and a newline to f.
void fp_print_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// JSON text for a terminal or a pipe (`--json`, `--format json`, JSONL): a copy of json
// (as cJSON prints it, which escapes C0 controls already) with the other code points the
// formatter escapes (DEL, C1 controls, line separators, bidirectional controls) written
// as \uXXXX, which parses back to the same string; a byte that is not UTF-8 becomes
// \ufffd. Outside strings JSON text is ASCII, so every such code point is in a string.
// Returns NULL when out of memory (the caller frees the result).
char *fp_escape_json(const char *json);

// A short name for a status ("io", "format", ...).
const char *fp_status_name(FpStatus code);

// Propagate a non-OK status from a call that already filled the error.
#define FP_TRY(expr)                         \
    do {                                     \
        FpStatus fp_try_status_ = (expr);    \
        if (fp_try_status_ != FP_OK)         \
            return fp_try_status_;           \
    } while (0)

// malloc/calloc that fill err with FP_ENOMEM and the requested size on failure.
void *fp_malloc(size_t bytes, FpError *err);
void *fp_calloc(size_t count, size_t size, FpError *err);

#endif
