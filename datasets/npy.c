// NumPy .npy arrays: the strict header reader, the folder source, and datasets made of
// arrays (see datasets/npy.h for the format and the names).
#include "datasets/npy.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/files.h"

// The largest .npy file read (the items are then converted to float32 samples).
#define NPY_MAX_FILE ((size_t)1 << 36)

static const struct {
    const char *descr;
    NpyDtype type;
    size_t size;
} dtypes[] = {
    {"|u1", NPY_U1, 1}, {"|i1", NPY_I1, 1}, {"<i4", NPY_I4, 4}, {"<i8", NPY_I8, 8}, {"<f4", NPY_F4, 4}, {"<f8", NPY_F8, 8},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

const char *npy_dtype_name(NpyDtype t) {
    static const char *const names[] = {"uint8", "int8", "int32", "int64", "float32", "float64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static size_t item_size(NpyDtype t) {
    for (int i = 0; i < N_DTYPES; i++)
        if (dtypes[i].type == t)
            return dtypes[i].size;
    return 0;
}

int npy_is_integer(const NpyArray *a) { return a->dtype == NPY_U1 || a->dtype == NPY_I1 || a->dtype == NPY_I4 || a->dtype == NPY_I8; }

double npy_get(const NpyArray *a, size_t i) {
    const unsigned char *p = a->data + i * item_size(a->dtype);
    // Little endian by construction of the descr table; assembled bytewise, so the host's
    // order does not matter.
    uint64_t u = 0;
    for (size_t k = item_size(a->dtype); k-- > 0;)
        u = u << 8 | p[k];
    switch (a->dtype) {
    case NPY_U1: return (double)(uint8_t)u;
    case NPY_I1: return (double)(int8_t)(uint8_t)u;
    case NPY_I4: return (double)(int32_t)(uint32_t)u;
    case NPY_I8: return (double)(int64_t)u;
    case NPY_F4: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, sizeof f);
        return f;
    }
    case NPY_F8: {
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    }
    return NAN;
}

// ---- the header ------------------------------------------------------------------------

typedef struct {
    const char *s, *end;
} Cursor;

static void skip_ws(Cursor *c) {
    while (c->s < c->end && *c->s == ' ')
        c->s++;
}

static int take(Cursor *c, char ch) {
    skip_ws(c);
    if (c->s < c->end && *c->s == ch) {
        c->s++;
        return 1;
    }
    return 0;
}

// A quoted Python string without escapes, into buf.
static int quoted(Cursor *c, char *buf, size_t n) {
    skip_ws(c);
    if (c->s >= c->end || (*c->s != '\'' && *c->s != '"'))
        return 0;
    char q = *c->s++;
    size_t k = 0;
    while (c->s < c->end && *c->s != q) {
        if (*c->s == '\\' || k + 1 >= n)
            return 0;
        buf[k++] = *c->s++;
    }
    if (c->s >= c->end)
        return 0;
    c->s++;
    buf[k] = 0;
    return 1;
}

static int word(Cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->s) >= n && memcmp(c->s, w, n) == 0) {
        c->s += n;
        return 1;
    }
    return 0;
}

// (d0, d1, ...) with an optional trailing comma; "(5,)" and "()" included, "(5)" not a tuple
// but accepted as NumPy never writes it and it can only mean one dimension.
static int shape_tuple(Cursor *c, NpyArray *a) {
    if (!take(c, '('))
        return 0;
    a->ndim = 0;
    if (take(c, ')'))
        return 1;
    for (;;) {
        skip_ws(c);
        if (c->s >= c->end || *c->s < '0' || *c->s > '9' || a->ndim == NPY_MAX_DIMS)
            return 0;
        int64_t v = 0;
        while (c->s < c->end && *c->s >= '0' && *c->s <= '9') {
            if (v > (INT64_C(1) << 40))
                return 0; // no dimension of a readable file is that long
            v = v * 10 + (*c->s++ - '0');
        }
        a->shape[a->ndim++] = v;
        if (take(c, ')'))
            return 1;
        if (!take(c, ','))
            return 0;
        if (take(c, ')'))
            return 1;
    }
}

FpStatus npy_parse(const char *name, const unsigned char *buf, size_t len, NpyArray *out, FpError *err) {
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return fp_fail(err, FP_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", name);
    int major = buf[6], minor = buf[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return fp_fail(err, FP_EFORMAT, "%s: .npy format version %d.%d (this reader knows 1.0, 2.0 and 3.0)", name,
                       major, minor);
    size_t pre = major == 1 ? 10 : 12;
    if (len < pre)
        return fp_fail(err, FP_EFORMAT, "%s: truncated .npy preamble", name);
    size_t hlen = major == 1 ? (size_t)buf[8] | (size_t)buf[9] << 8
                             : (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    if (hlen > NPY_MAX_HEADER || hlen > len - pre)
        return fp_fail(err, FP_EFORMAT, "%s: .npy header of %zu bytes, the file has %zu after the preamble", name,
                       hlen, len - pre);
    const char *h = (const char *)buf + pre;
    for (size_t i = 0; i < hlen; i++)
        if ((unsigned char)h[i] < 0x20 && h[i] != '\n')
            return fp_fail(err, FP_EFORMAT, "%s: .npy header holds a control byte at offset %zu", name, pre + i);
        else if ((unsigned char)h[i] >= 0x7f)
            return fp_fail(err, FP_EFORMAT, "%s: .npy header holds a non-ASCII byte at offset %zu", name, pre + i);
    // The header ends with '\n'; before it only the dict and spaces.
    if (hlen == 0 || h[hlen - 1] != '\n')
        return fp_fail(err, FP_EFORMAT, "%s: .npy header does not end with a newline", name);
    Cursor c = {h, h + hlen - 1};
    int seen_descr = 0, seen_order = 0, seen_shape = 0;
    char descr[32];
    if (!take(&c, '{'))
        return fp_fail(err, FP_EFORMAT, "%s: .npy header is not a dict", name);
    for (;;) {
        if (take(&c, '}'))
            break;
        char key[32];
        if (!quoted(&c, key, sizeof key) || !take(&c, ':'))
            return fp_fail(err, FP_EFORMAT, "%s: .npy header: expected 'key': value at offset %zu", name,
                           pre + (size_t)(c.s - h));
        if (strcmp(key, "descr") == 0 && !seen_descr++) {
            if (!quoted(&c, descr, sizeof descr))
                return fp_fail(err, FP_EFORMAT, "%s: .npy header: descr must be a type string such as '<f4' (a "
                               "structured dtype is not read)", name);
        } else if (strcmp(key, "fortran_order") == 0 && !seen_order++) {
            if (word(&c, "True"))
                return fp_fail(err, FP_EFORMAT, "%s: a Fortran-order array (save it with np.ascontiguousarray)",
                               name);
            if (!word(&c, "False"))
                return fp_fail(err, FP_EFORMAT, "%s: .npy header: fortran_order must be True or False", name);
        } else if (strcmp(key, "shape") == 0 && !seen_shape++) {
            if (!shape_tuple(&c, out))
                return fp_fail(err, FP_EFORMAT, "%s: .npy header: shape must be a tuple of at most %d integers", name,
                               NPY_MAX_DIMS);
        } else {
            return fp_fail(err, FP_EFORMAT, "%s: .npy header: %s key '%.31s' (the keys are descr, fortran_order and "
                           "shape, once each)", name,
                           strcmp(key, "descr") && strcmp(key, "fortran_order") && strcmp(key, "shape") ? "unknown"
                                                                                                        : "repeated",
                           key);
        }
        if (take(&c, '}'))
            break;
        if (!take(&c, ','))
            return fp_fail(err, FP_EFORMAT, "%s: .npy header: expected ',' or '}' at offset %zu", name,
                           pre + (size_t)(c.s - h));
    }
    skip_ws(&c);
    if (c.s != c.end)
        return fp_fail(err, FP_EFORMAT, "%s: .npy header: text after the dict at offset %zu", name,
                       pre + (size_t)(c.s - h));
    if (!seen_descr || !seen_order || !seen_shape)
        return fp_fail(err, FP_EFORMAT, "%s: .npy header lacks '%s'", name,
                       !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    int t = -1;
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(descr, dtypes[i].descr) == 0 || (dtypes[i].size == 1 && descr[0] == '<' &&
                                                    strcmp(descr + 1, dtypes[i].descr + 1) == 0))
            t = i;
    if (t < 0) {
        char e[48];
        return fp_fail(err, FP_EFORMAT, "%s: dtype '%s' is not read (uint8, int8, int32, int64, float32 or float64, "
                       "little endian)", name, fp_escape(descr, e, sizeof e));
    }
    out->dtype = dtypes[t].type;
    size_t count = 1, data = len - pre - hlen;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] != 0 && count > SIZE_MAX / (size_t)out->shape[d])
            return fp_fail(err, FP_EFORMAT, "%s: shape too large", name);
        count *= (size_t)out->shape[d];
    }
    if (count > data / dtypes[t].size || count * dtypes[t].size != data)
        return fp_fail(err, FP_EFORMAT, "%s: the header declares %zu items of %zu bytes, the file holds %zu data bytes",
                       name, count, dtypes[t].size, data);
    out->count = count;
    out->data = buf + pre + hlen;
    return FP_OK;
}

// ---- sources: a folder of NAME.npy, or an .npz --------------------------------------------

struct NpySource {
    char path[4096];
    NpzArchive *z; // NULL: a folder
};

FpStatus npy_source_open(const char *path, int npz, NpySource **out, FpError *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return fp_fail(err, FP_EIO, "%s: no such %s", path, npz ? "file" : "folder");
    if (!npz && !S_ISDIR(st.st_mode))
        return fp_fail(err, FP_EIO, "%s: not a folder (dataset \"npy\" reads NAME.npy files in a folder; \"npz\" "
                       "reads an archive)", path);
    NpySource *s = fp_calloc(1, sizeof *s, err);
    if (!s)
        return FP_ENOMEM;
    if ((size_t)snprintf(s->path, sizeof s->path, "%s", path) >= sizeof s->path) {
        free(s);
        return fp_fail(err, FP_EPARAM, "path too long: %.200s...", path);
    }
    if (npz && npz_open(path, &s->z, err) != FP_OK) {
        free(s);
        return err ? err->code : FP_EFORMAT;
    }
    *out = s;
    return FP_OK;
}

void npy_source_free(NpySource *s) {
    if (!s)
        return;
    npz_close(s->z);
    free(s);
}

int npy_source_has(const NpySource *s, const char *name) {
    char p[4200];
    if (s->z) {
        snprintf(p, sizeof p, "%s.npy", name);
        return npz_has(s->z, p);
    }
    snprintf(p, sizeof p, "%s/%s.npy", s->path, name);
    struct stat st;
    return stat(p, &st) == 0;
}

FpStatus npy_source_read(const NpySource *s, const char *name, unsigned char **buf, NpyArray *a, char *where,
                         size_t where_size, FpError *err) {
    *buf = NULL;
    size_t len = 0;
    FpStatus st;
    if (s->z) {
        snprintf(where, where_size, "%.300s:%.60s.npy", s->path, name);
        char member[80];
        snprintf(member, sizeof member, "%.60s.npy", name);
        st = npz_read(s->z, member, buf, &len, err);
    } else {
        snprintf(where, where_size, "%.300s/%.60s.npy", s->path, name);
        char *b = NULL;
        st = fp_read_input(where, NPY_MAX_FILE, &b, &len, err);
        *buf = (unsigned char *)b;
    }
    if (st == FP_OK)
        st = npy_parse(where, *buf, len, a, err);
    if (st != FP_OK) {
        free(*buf);
        *buf = NULL;
    }
    return st;
}

// ---- datasets ------------------------------------------------------------------------------

FpStatus npy_int_column(const NpyArray *a, const char *what, int n, int32_t **ids, int *n_ids, FpError *err) {
    *ids = NULL;
    *n_ids = 0;
    if (a->ndim != 1 || a->shape[0] != n)
        return fp_fail(err, FP_EFORMAT, "%s: shape (%lld%s) for %d samples: it must be (%d,)", what,
                       a->ndim ? (long long)a->shape[0] : 0LL, a->ndim == 1 ? "," : a->ndim ? ", ..." : "", n, n);
    if (!npy_is_integer(a))
        return fp_fail(err, FP_EFORMAT, "%s: %s values; labels and client ids are integers", what,
                       npy_dtype_name(a->dtype));
    int32_t *v = fp_malloc(sizeof(int32_t) * (size_t)n + 1, err);
    if (!v)
        return FP_ENOMEM;
    int mx = -1;
    for (int i = 0; i < n; i++) {
        double x = npy_get(a, (size_t)i);
        if (x < 0 || x > 1 << 24) {
            free(v);
            return fp_fail(err, FP_EFORMAT, "%s: value %.0f at index %d outside [0, %d]", what, x, i, 1 << 24);
        }
        v[i] = (int32_t)x;
        mx = v[i] > mx ? v[i] : mx;
    }
    *ids = v;
    *n_ids = mx + 1;
    return FP_OK;
}

FpStatus npy_make_dataset(const char *name, const NpyArray *x, const char *xw, const NpyArray *y, const char *yw,
                          const NpyArray *client, const char *cw, Dataset **out, FpError *err) {
    *out = NULL;
    if (x->ndim < 2 || x->ndim > 4)
        return fp_fail(err, FP_EFORMAT, "%s: a %d-dimensional array; features are N×F, N×H×W, N×C×H×W or N×H×W×C",
                       xw, x->ndim);
    if (x->dtype != NPY_U1 && x->dtype != NPY_F4 && x->dtype != NPY_F8)
        return fp_fail(err, FP_EFORMAT, "%s: %s features (uint8, float32 or float64)", xw, npy_dtype_name(x->dtype));
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] < 1 || x->shape[d] > INT_MAX / 2)
            return fp_fail(err, FP_EFORMAT, "%s: dimension %d is %lld", xw, d, (long long)x->shape[d]);
    int n = (int)x->shape[0], c = 1, h = 1, w = (int)x->shape[x->ndim - 1], last = 0;
    if (x->ndim == 3)
        h = (int)x->shape[1];
    else if (x->ndim == 4) {
        int64_t s1 = x->shape[1], s3 = x->shape[3];
        if (s1 <= 4 && s3 > 4) { // N×C×H×W
            c = (int)s1, h = (int)x->shape[2], w = (int)s3;
        } else if (s3 <= 4 && s1 > 4) { // N×H×W×C
            h = (int)s1, w = (int)x->shape[2], c = (int)s3, last = 1;
        } else
            return fp_fail(err, FP_EFORMAT, "%s: shape (%lld, %lld, %lld, %lld) is neither clearly N×C×H×W nor "
                           "N×H×W×C (channels: at most 4, the image sides: more)", xw, (long long)x->shape[0],
                           (long long)s1, (long long)x->shape[2], (long long)s3);
    }
    int32_t *labels = NULL, *ids = NULL;
    int K = 0, n_ids = 0;
    FpStatus st = FP_OK;
    if (y)
        st = npy_int_column(y, yw, n, &labels, &K, err);
    if (st == FP_OK && client)
        st = npy_int_column(client, cw, n, &ids, &n_ids, err);
    Dataset *d = NULL;
    if (st == FP_OK && !(d = dataset_create(name, n, c, h, w, y ? K : 0, 0, err)))
        st = err ? err->code : FP_ENOMEM;
    if (st == FP_OK) {
        size_t ss = dataset_sample_size(d), plane = (size_t)h * w;
        for (size_t i = 0; i < (size_t)n; i++)
            for (size_t k = 0; k < ss; k++) {
                // Channels last: sample item k = (y·W + x)·C + ch goes to ch·H·W + y·W + x.
                size_t dst = last ? (k % (size_t)c) * plane + k / (size_t)c : k;
                double v = npy_get(x, i * ss + k);
                float f = x->dtype == NPY_U1 ? (float)(uint8_t)v / 255.0f : (float)v;
                if (!isfinite(f) || (d->c * d->h > 1 && (f < 0 || f > 1))) {
                    st = fp_fail(err, FP_EFORMAT, "%s: sample %zu value %zu is %g: %s", xw, i, k, v,
                                 isfinite(f) ? "images must lie in [0,1] (or be uint8)" : "not a finite float32");
                    goto done;
                }
                d->x[i * ss + dst] = f;
            }
        if (labels)
            memcpy(d->y, labels, sizeof(int32_t) * (size_t)n);
        if (ids)
            st = dataset_set_clients(d, ids, n_ids, cw, err);
    }
done:
    free(labels);
    free(ids);
    if (st != FP_OK)
        dataset_free(d);
    else
        *out = d;
    return st;
}

// The split's arrays from a source: x_SPLIT/y_SPLIT (client_train with the training
// split), else x/y with the holdout.
static FpStatus open_source(const char *what, int npz, const char *split, const char *path, Dataset **out,
                            FpError *err) {
    *out = NULL;
    if (!path)
        return fp_fail(err, FP_EPARAM, "%s: no path given (%s)", what,
                       npz ? "an .npz archive with x_train, y_train, x_test, y_test"
                           : "a folder with x_train.npy, y_train.npy, x_test.npy, y_test.npy");
    NpySource *s = NULL;
    FP_TRY(npy_source_open(path, npz, &s, err));
    char xn[32], yn[32];
    int whole = 0;
    snprintf(xn, sizeof xn, "x_%s", split);
    snprintf(yn, sizeof yn, "y_%s", split);
    if (!npy_source_has(s, xn) && npy_source_has(s, "x")) {
        whole = 1;
        strcpy(xn, "x");
        strcpy(yn, "y");
    }
    const char *cn = strcmp(split, "train") == 0 || whole ? (whole ? "client" : "client_train") : NULL;
    unsigned char *xb = NULL, *yb = NULL, *cb = NULL;
    NpyArray xa, ya, ca;
    char xw[400], yw[400], cw[400];
    FpStatus st = npy_source_read(s, xn, &xb, &xa, xw, sizeof xw, err);
    int has_y = st == FP_OK && npy_source_has(s, yn), has_c = st == FP_OK && cn && npy_source_has(s, cn);
    if (st == FP_OK && !has_y)
        st = fp_fail(err, FP_EFORMAT, "%s: no labels: %s holds %s but no %s%s", what, path, xn, yn,
                     npz ? " member" : ".npy");
    if (st == FP_OK)
        st = npy_source_read(s, yn, &yb, &ya, yw, sizeof yw, err);
    if (st == FP_OK && has_c)
        st = npy_source_read(s, cn, &cb, &ca, cw, sizeof cw, err);
    Dataset *d = NULL;
    char name[64];
    snprintf(name, sizeof name, "%s/%s", what, split);
    if (st == FP_OK)
        st = npy_make_dataset(name, &xa, xw, &ya, yw, has_c ? &ca : NULL, cw, &d, err);
    free(xb);
    free(yb);
    free(cb);
    npy_source_free(s);
    if (st != FP_OK)
        return st;
    snprintf(d->source, sizeof d->source, "%.300s", xw);
    if (!whole) {
        *out = d;
        return FP_OK;
    }
    st = dataset_holdout(d, DATASET_HOLDOUT_DENOM, split, out, err);
    dataset_free(d);
    if (st == FP_OK)
        snprintf((*out)->name, sizeof (*out)->name, "%s", name);
    return st;
}

FpStatus npy_open(const char *split, const char *path, Dataset **out, FpError *err) {
    return open_source("npy", 0, split, path, out, err);
}

FpStatus npz_open_dataset(const char *split, const char *path, Dataset **out, FpError *err) {
    return open_source("npz", 1, split, path, out, err);
}
