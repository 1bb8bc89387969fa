// CSV loader for tabular data (classification by a label column, regression by a target
// column, or unlabelled). RFC 4180 subset: comma separated; fields may be "quoted" with
// "" for a quote and may then hold commas and newlines; LF or CRLF line ends; a UTF-8
// byte-order mark is skipped; blank lines are skipped; spaces around a number are
// allowed. The file is read whole (raw or gzip) and split in place, one pass.
// Errors are one line "file:line:column: problem", both 1-based, line = physical line.
#include "datasets/dataset.h"

#include <limits.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CSV_MAX_INT_LABEL 65535 // integer labels up to this are kept as they are

typedef struct {
    const char *path;
    char *s, *end; // unread input
    int line;      // physical line of *s
} CsvReader;

typedef struct {
    char **field;  // NUL-terminated, in place
    int *col_line; // physical line where each field starts (a quoted field may span lines)
    int cap, n;    // n may exceed cap: fields past cap are counted, not kept
    int line;      // line where the record starts
} CsvRecord;

// Reads one record into rec. Returns 1 with a record, 0 at the end, -1 on error.
static int csv_next(CsvReader *r, CsvRecord *rec, FpError *err) {
    // Skip blank lines.
    while (r->s < r->end && (*r->s == '\n' || *r->s == '\r')) {
        if (*r->s == '\r' && r->s + 1 < r->end && r->s[1] == '\n')
            r->s++;
        r->s++;
        r->line++;
    }
    if (r->s >= r->end)
        return 0;
    rec->n = 0;
    rec->line = r->line;
    for (;;) {
        char *start = r->s, *out = r->s;
        int fline = r->line;
        if (r->s < r->end && *r->s == '"') {
            r->s++;
            for (;;) {
                if (r->s >= r->end) {
                    fp_fail(err, FP_EFORMAT, "%s:%d:%d: unterminated quoted field", r->path, fline, rec->n + 1);
                    return -1;
                }
                char ch = *r->s++;
                if (ch == '"') {
                    if (r->s < r->end && *r->s == '"') {
                        *out++ = '"';
                        r->s++;
                        continue;
                    }
                    break;
                }
                if (ch == '\n')
                    r->line++;
                *out++ = ch;
            }
            if (r->s < r->end && *r->s != ',' && *r->s != '\n' && *r->s != '\r') {
                fp_fail(err, FP_EFORMAT, "%s:%d:%d: unexpected '%c' after a closing quote", r->path, r->line,
                        rec->n + 1, *r->s);
                return -1;
            }
        } else {
            while (r->s < r->end && *r->s != ',' && *r->s != '\n' && *r->s != '\r')
                r->s++;
            out = r->s;
        }
        // r->s is at the delimiter (or the end); out is where the field's text ends.
        char delim = r->s < r->end ? *r->s : '\n';
        if (r->s < r->end)
            r->s++;
        *out = 0; // out <= the delimiter's position (or the NUL dataset_read_file puts after the data)
        if (rec->n < rec->cap) { // a quoted field's text was copied down over its opening quote
            rec->field[rec->n] = start;
            rec->col_line[rec->n] = fline;
        }
        rec->n++;
        if (delim == ',')
            continue;
        if (delim == '\r' && r->s < r->end && *r->s == '\n')
            r->s++;
        r->line++;
        return 1;
    }
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        *--e = 0;
    return s;
}

// A copy of s for an error message: at most 60 bytes, control characters (a quoted
// field may hold newlines) shown as '?', so the message stays one line.
static const char *printable(const char *s, char *buf, size_t n) {
    size_t i = 0;
    for (; s[i] && i + 1 < n && i < 60; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    buf[i] = 0;
    return buf;
}

// 1 and *out for a number float32 holds; 0 for text that is not a number; -1 for a
// number out of float32's range (1e308 is a number, just not one a float holds).
static int parse_number(char *s, float *out) {
    s = trim(s);
    if (!*s)
        return 0;
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (*e || isnan(v) || (isinf(v) && errno != ERANGE)) // "nan", "inf": not finite numbers
        return 0;
    if (isinf(v) || fabs(v) > FLT_MAX) // 1e400 (ERANGE), 1e308
        return -1;
    *out = (float)v;
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Numbers a column's values: non-negative integers (up to CSV_MAX_INT_LABEL) as they
// are (*k = max + 1), else the distinct strings sorted bytewise, 0..K-1. NULL when out
// of memory.
static int32_t *number_values(char **vals, size_t rows, int *k, FpError *err) {
    int32_t *cls = fp_malloc(rows * sizeof *cls, err);
    if (!cls)
        return NULL;
    int K = 0, all_int = 1;
    for (size_t i = 0; i < rows && all_int; i++) {
        char *e;
        long v = strtol(vals[i], &e, 10);
        if (!vals[i][0] || *e || v < 0 || v > CSV_MAX_INT_LABEL || vals[i][0] == '+' || vals[i][0] == '-')
            all_int = 0;
        else {
            cls[i] = (int32_t)v;
            K = (int)v + 1 > K ? (int)v + 1 : K;
        }
    }
    if (!all_int) {
        char **sorted = fp_malloc(rows * sizeof *sorted, err);
        if (!sorted) {
            free(cls);
            return NULL;
        }
        memcpy(sorted, vals, rows * sizeof *sorted);
        qsort(sorted, rows, sizeof *sorted, cmp_str);
        size_t u = 0;
        for (size_t i = 0; i < rows; i++)
            if (u == 0 || strcmp(sorted[u - 1], sorted[i]) != 0)
                sorted[u++] = sorted[i];
        K = (int)u;
        for (size_t i = 0; i < rows; i++) {
            char **hit = bsearch(&vals[i], sorted, u, sizeof *sorted, cmp_str);
            cls[i] = (int32_t)(hit - sorted);
        }
        free(sorted);
    }
    *k = K;
    return cls;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

FpStatus csv_load(const char *path, const char *label_column, const char *target_column, Dataset **out,
                  FpError *err) {
    return csv_load_clients(path, label_column, target_column, NULL, out, err);
}

FpStatus csv_load_clients(const char *path, const char *label_column, const char *target_column,
                          const char *client_column, Dataset **out, FpError *err) {
    *out = NULL;
    if (!path)
        return fp_fail(err, FP_EPARAM, "csv_load: no file given");
    if (label_column && target_column)
        return fp_fail(err, FP_EPARAM, "%s: give a label column or a target column, not both", path);
    unsigned char *raw = NULL;
    size_t len = 0;
    FP_TRY(dataset_read_file(path, &raw, &len, err));
    FpStatus st = FP_OK;
    CsvReader r = {path, (char *)raw, (char *)raw + len, 1};
    CsvRecord rec = {0};
    char **header = NULL, **labels = NULL, **clients = NULL;
    int32_t *cls = NULL, *cids = NULL;
    float *feat = NULL, *targ = NULL;
    Dataset *d = NULL;
    if (len >= 3 && raw[0] == 0xEF && raw[1] == 0xBB && raw[2] == 0xBF)
        r.s += 3;
    if (memchr(raw, 0, len)) {
        st = fp_fail(err, FP_EFORMAT, "%s: not a text file (contains NUL bytes)", path);
        goto done;
    }

    // Header: its fields are the column names.
    rec.cap = 1 << 16;
    rec.field = fp_malloc((size_t)rec.cap * sizeof *rec.field, err);
    rec.col_line = fp_malloc((size_t)rec.cap * sizeof *rec.col_line, err);
    if (!rec.field || !rec.col_line) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    int got = csv_next(&r, &rec, err);
    if (got < 0) {
        st = FP_EFORMAT;
        goto done;
    }
    if (got == 0) {
        st = fp_fail(err, FP_EFORMAT, "%s: empty file (a header row is required)", path);
        goto done;
    }
    int ncol = rec.n, hline = rec.line;
    if (ncol > rec.cap) {
        st = fp_fail(err, FP_EFORMAT, "%s:%d: more than %d columns", path, hline, rec.cap);
        goto done;
    }
    header = fp_malloc((size_t)ncol * sizeof *header, err);
    if (!header) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    for (int j = 0; j < ncol; j++) {
        header[j] = trim(rec.field[j]);
        for (int k = 0; k < j; k++)
            if (strcmp(header[k], header[j]) == 0) {
                char pb[64];
                st = fp_fail(err, FP_EFORMAT, "%s:%d:%d: duplicate column name \"%s\" (also column %d)", path,
                             hline, j + 1, printable(header[j], pb, sizeof pb), k + 1);
                goto done;
            }
    }
    const char *want = label_column ? label_column : target_column;
    int special = -1;
    if (want) {
        for (int j = 0; j < ncol; j++)
            if (strcmp(header[j], want) == 0)
                special = j;
        if (special < 0) {
            char names[200] = "";
            size_t used = 0;
            for (int j = 0; j < ncol && used < sizeof names - 8; j++) {
                char pb[64];
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", j ? ", " : "",
                                         printable(header[j], pb, sizeof pb));
            }
            if (used >= sizeof names - 8)
                strcpy(names + sizeof names - 8, ", ...");
            char pw[64];
            st = fp_fail(err, FP_EPARAM, "%s: no column named \"%s\" (the header has: %s)", path,
                         printable(want, pw, sizeof pw), names);
            goto done;
        }
    }
    int client_col = -1; // optional: no such column, no client ids
    for (int j = 0; client_column && j < ncol; j++)
        if (strcmp(header[j], client_column) == 0 && j != special)
            client_col = j;
    int nfeat = ncol - (special >= 0) - (client_col >= 0);
    if (nfeat < 1) {
        st = fp_fail(err, FP_EFORMAT, "%s:%d: no feature columns besides \"%s\"", path, hline, want);
        goto done;
    }
    rec.cap = ncol; // later records: fields past the header's count are only counted

    // Rows.
    size_t rows = 0, cap = 1024;
    feat = fp_malloc(cap * (size_t)nfeat * sizeof *feat, err);
    if (label_column)
        labels = fp_malloc(cap * sizeof *labels, err);
    if (target_column)
        targ = fp_malloc(cap * sizeof *targ, err);
    if (client_col >= 0)
        clients = fp_malloc(cap * sizeof *clients, err);
    if (!feat || (label_column && !labels) || (target_column && !targ) || (client_col >= 0 && !clients)) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    while ((got = csv_next(&r, &rec, err)) > 0) {
        if (rec.n != ncol) {
            st = fp_fail(err, FP_EFORMAT, "%s:%d: %d field%s, the header has %d", path, rec.line, rec.n,
                         rec.n == 1 ? "" : "s", ncol);
            goto done;
        }
        if (rows == cap) {
            if (cap >= (size_t)INT_MAX) {
                st = fp_fail(err, FP_EFORMAT, "%s: more than %d rows", path, INT_MAX);
                goto done;
            }
            cap *= 2;
            float *nf = realloc(feat, cap * (size_t)nfeat * sizeof *feat);
            if (nf)
                feat = nf;
            char **nl = labels ? realloc(labels, cap * sizeof *labels) : NULL;
            if (nl)
                labels = nl;
            float *nt = targ ? realloc(targ, cap * sizeof *targ) : NULL;
            if (nt)
                targ = nt;
            char **nc = clients ? realloc(clients, cap * sizeof *clients) : NULL;
            if (nc)
                clients = nc;
            if (!nf || (labels && !nl) || (targ && !nt) || (clients && !nc)) {
                st = fp_fail(err, FP_ENOMEM, "%s: out of memory at %zu rows", path, rows);
                goto done;
            }
        }
        float *x = feat + rows * (size_t)nfeat;
        for (int j = 0, f = 0; j < ncol; j++) {
            if (j == special && labels) {
                labels[rows] = trim(rec.field[j]);
                continue;
            }
            if (j == client_col) {
                clients[rows] = trim(rec.field[j]);
                continue;
            }
            float v;
            int parsed = parse_number(rec.field[j], &v);
            if (parsed != 1) {
                char pb[64];
                st = fp_fail(err, FP_EFORMAT,
                             parsed ? "%s:%d:%d: %s is out of range (values are float32: |x| <= 3.4e38)"
                                    : "%s:%d:%d: not a number: \"%s\"",
                             path, rec.col_line[j], j + 1, printable(rec.field[j], pb, sizeof pb));
                goto done;
            }
            if (j == special)
                targ[rows] = v;
            else
                x[f++] = v;
        }
        rows++;
    }
    if (got < 0) {
        st = FP_EFORMAT;
        goto done;
    }
    if (rows == 0) {
        st = fp_fail(err, FP_EFORMAT, "%s: no data rows after the header", path);
        goto done;
    }

    // Classes and clients: integers as they are, else the sorted distinct strings.
    int K = 0, KC = 0;
    if (labels && !(cls = number_values(labels, rows, &K, err))) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    if (clients && !(cids = number_values(clients, rows, &KC, err))) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    d = dataset_create(base_name(path), (int)rows, 1, 1, nfeat, labels ? K : 0, targ ? 1 : 0, err);
    if (!d) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    if (cids && (st = dataset_set_clients(d, cids, KC, path, err)) != FP_OK) {
        dataset_free(d);
        goto done;
    }
    memcpy(d->x, feat, rows * (size_t)nfeat * sizeof *feat);
    if (cls)
        memcpy(d->y, cls, rows * sizeof *cls);
    if (targ)
        memcpy(d->target, targ, rows * sizeof *targ);
    *out = d;
done:
    free(raw);
    free(rec.field);
    free(rec.col_line);
    free(header);
    free(labels);
    free(clients);
    free(cls);
    free(cids);
    free(feat);
    free(targ);
    return st;
}
