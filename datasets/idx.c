// IDX loader (the MNIST / Fashion-MNIST file format, LeCun et al.), raw or gzip: zlib's
// gzread reads both transparently.
//
// An IDX file is a 4-byte big-endian magic 0x0000TTDD (TT = data type, 0x08 = unsigned
// byte; DD = number of dimensions), DD big-endian uint32 sizes, then the data, row-major.
// Images are 0x00000803 (n, rows, cols); labels 0x00000801 (n). Everything a header
// declares is checked against what the file holds: a short file, extra bytes after the
// data, or a damaged gzip stream is an FP_EFORMAT naming the file. Buffers grow as data
// arrives, so a corrupt header that claims terabytes fails on truncation, not on malloc.
#include "datasets/dataset.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_SIDE 4096u           // rows and cols: a sanity bound, far above any real set
#define IDX_FIRST_CHUNK ((size_t)64 << 20)

static FpStatus idx_open(const char *path, gzFile *out, FpError *err) {
    *out = NULL;
    if (!path)
        return fp_fail(err, FP_EPARAM, "idx_load: no file given");
    struct stat st;
    if (stat(path, &st) != 0)
        return fp_fail(err, FP_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fp_fail(err, FP_EIO, "%s: not a regular file", path);
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return fp_fail(err, FP_EIO, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
    gzbuffer(f, 1 << 17);
    *out = f;
    return FP_OK;
}

// Reads up to want bytes; *got < want only at the end of the data. I/O and gzip
// errors (including a gzip stream cut short) are failures.
static FpStatus idx_read(gzFile f, const char *path, unsigned char *buf, size_t want, size_t *got,
                         FpError *err) {
    *got = 0;
    while (*got < want) {
        size_t chunk = want - *got < ((size_t)1 << 30) ? want - *got : ((size_t)1 << 30);
        int r = gzread(f, buf + *got, (unsigned)chunk);
        if (r > 0) {
            *got += (size_t)r;
            continue;
        }
        int zerr = Z_OK;
        const char *zmsg = gzerror(f, &zerr);
        if (r < 0 || zerr != Z_OK) {
            if (zerr == Z_ERRNO)
                return fp_fail(err, FP_EIO, "%s: read error: %s", path, strerror(errno));
            if (zerr == Z_BUF_ERROR)
                return fp_fail(err, FP_EFORMAT, "%s: truncated gzip stream", path);
            return fp_fail(err, FP_EFORMAT, "%s: gzip error: %s", path, zmsg);
        }
        break;
    }
    return FP_OK;
}

// Reads the magic and the dims; checks type (unsigned byte) and number of dimensions.
static FpStatus idx_header(gzFile f, const char *path, uint32_t magic, uint32_t *dims, FpError *err) {
    int ndim = (int)(magic & 0xff);
    unsigned char hdr[16];
    size_t want = 4 + 4 * (size_t)ndim, got;
    FP_TRY(idx_read(f, path, hdr, want, &got, err));
    if (got < 4)
        return fp_fail(err, FP_EFORMAT, "%s: truncated: %zu bytes, too short for an IDX header", path, got);
    uint32_t m = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (m != magic) {
        const char *what = magic == IDX_MAGIC_IMAGES ? "an idx3 unsigned-byte image file" : "an idx1 unsigned-byte label file";
        if (hdr[0] != 0 || hdr[1] != 0)
            return fp_fail(err, FP_EFORMAT, "%s: bad magic 0x%08x: not an IDX file (expected 0x%08x, %s)", path,
                           m, magic, what);
        if (hdr[2] != 0x08)
            return fp_fail(err, FP_EFORMAT,
                           "%s: bad magic 0x%08x: IDX data type 0x%02x is not unsigned byte (expected 0x%08x, %s)",
                           path, m, hdr[2], magic, what);
        return fp_fail(err, FP_EFORMAT, "%s: bad magic 0x%08x: %d dimensions (expected 0x%08x, %s)", path, m,
                       hdr[3], magic, what);
    }
    if (got < want)
        return fp_fail(err, FP_EFORMAT, "%s: truncated: the IDX header needs %zu bytes, the file has %zu", path,
                       want, got);
    for (int i = 0; i < ndim; i++) {
        const unsigned char *p = hdr + 4 + 4 * i;
        dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
    return FP_OK;
}

// After the declared data: nothing more may follow. Reading on also makes zlib check
// the gzip trailer (CRC and length), so a corrupted stream is caught here.
static FpStatus idx_expect_end(gzFile f, const char *path, FpError *err) {
    unsigned char extra[64];
    size_t got;
    FP_TRY(idx_read(f, path, extra, sizeof extra, &got, err));
    if (got > 0)
        return fp_fail(err, FP_EFORMAT, "%s: trailing data after what the IDX header declares", path);
    return FP_OK;
}

// Reads exactly total bytes into a buffer that grows as data arrives; a short file
// is reported by the caller (which knows what the bytes are) through *got.
static FpStatus idx_read_body(gzFile f, const char *path, uint64_t total, unsigned char **out, size_t *got,
                              FpError *err) {
    *out = NULL;
    *got = 0;
    size_t cap = total < IDX_FIRST_CHUNK ? (size_t)total : IDX_FIRST_CHUNK;
    unsigned char *b = fp_malloc(cap, err);
    if (!b)
        return err ? err->code : FP_ENOMEM;
    for (;;) {
        size_t n;
        FpStatus st = idx_read(f, path, b + *got, cap - *got, &n, err);
        if (st != FP_OK) {
            free(b);
            return st;
        }
        *got += n;
        if (*got < cap || cap == total)
            break;
        size_t ncap = (uint64_t)cap * 2 < total ? cap * 2 : (size_t)total;
        unsigned char *nb = realloc(b, ncap);
        if (!nb) {
            free(b);
            return fp_fail(err, FP_ENOMEM, "%s: out of memory reading %zu bytes", path, ncap);
        }
        b = nb;
        cap = ncap;
    }
    *out = b;
    return FP_OK;
}

FpStatus idx_load_classes(const char *images_path, const char *labels_path, const char *name, int n_classes,
                          Dataset **out, FpError *err) {
    *out = NULL;
    if (!images_path || !labels_path)
        return fp_fail(err, FP_EPARAM, "idx_load: both an image file and a label file are needed");
    if (n_classes < 0 || n_classes > 256)
        return fp_fail(err, FP_EPARAM, "idx_load: n_classes must be in [0, 256], got %d", n_classes);
    gzFile fi = NULL, fl = NULL;
    unsigned char *pix = NULL, *lab = NULL;
    Dataset *d = NULL;
    FpStatus st;
    uint32_t idim[3] = {0}, ldim[1] = {0};
    size_t got;

    if ((st = idx_open(images_path, &fi, err)) != FP_OK)
        goto done;
    if ((st = idx_header(fi, images_path, IDX_MAGIC_IMAGES, idim, err)) != FP_OK)
        goto done;
    if (idim[0] == 0 || idim[0] > INT32_MAX || idim[1] == 0 || idim[1] > IDX_MAX_SIDE || idim[2] == 0 ||
        idim[2] > IDX_MAX_SIDE) {
        st = fp_fail(err, FP_EFORMAT, "%s: bad dimensions %u x %u x %u (need 1..%d images of 1..%u x 1..%u)",
                     images_path, idim[0], idim[1], idim[2], INT32_MAX, IDX_MAX_SIDE, IDX_MAX_SIDE);
        goto done;
    }
    if ((st = idx_open(labels_path, &fl, err)) != FP_OK)
        goto done;
    if ((st = idx_header(fl, labels_path, IDX_MAGIC_LABELS, ldim, err)) != FP_OK)
        goto done;
    if (ldim[0] != idim[0]) {
        st = fp_fail(err, FP_EFORMAT, "%s: %u labels, but %s has %u images", labels_path, ldim[0], images_path,
                     idim[0]);
        goto done;
    }
    uint32_t n = idim[0];

    if ((st = idx_read_body(fl, labels_path, n, &lab, &got, err)) != FP_OK)
        goto done;
    if (got < n) {
        st = fp_fail(err, FP_EFORMAT, "%s: truncated: the header declares %u labels, the file holds %zu", labels_path,
                     n, got);
        goto done;
    }
    if ((st = idx_expect_end(fl, labels_path, err)) != FP_OK)
        goto done;
    int max_label = 0;
    for (uint32_t i = 0; i < n; i++)
        max_label = lab[i] > max_label ? lab[i] : max_label;
    int K = n_classes > 0 ? n_classes : max_label + 1;
    if (max_label >= K) {
        uint32_t i = 0;
        while (lab[i] < K)
            i++;
        st = fp_fail(err, FP_EFORMAT, "%s: label %d of item %u is >= the %d classes", labels_path, lab[i], i, K);
        goto done;
    }

    uint64_t per = (uint64_t)idim[1] * idim[2], total = per * n;
    if ((st = idx_read_body(fi, images_path, total, &pix, &got, err)) != FP_OK)
        goto done;
    if (got < total) {
        st = fp_fail(err, FP_EFORMAT,
                     "%s: truncated: the header declares %u images of %ux%u (%llu bytes), the file holds %zu bytes "
                     "(%llu whole images)",
                     images_path, n, idim[1], idim[2], (unsigned long long)total, got,
                     (unsigned long long)(got / per));
        goto done;
    }
    if ((st = idx_expect_end(fi, images_path, err)) != FP_OK)
        goto done;

    d = dataset_create(name ? name : "idx", (int)n, 1, (int)idim[1], (int)idim[2], K, 0, err);
    if (!d) {
        st = err ? err->code : FP_ENOMEM;
        goto done;
    }
    float lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = (float)v / 255.0f;
    for (uint64_t j = 0; j < total; j++)
        d->x[j] = lut[pix[j]];
    for (uint32_t i = 0; i < n; i++)
        d->y[i] = lab[i];
    *out = d;
    d = NULL;
    st = FP_OK;
done:
    if (fi)
        gzclose(fi);
    if (fl)
        gzclose(fl);
    free(pix);
    free(lab);
    dataset_free(d);
    return st;
}

FpStatus idx_load(const char *images_path, const char *labels_path, const char *name, Dataset **out,
                  FpError *err) {
    return idx_load_classes(images_path, labels_path, name, 10, out, err);
}
