// .npz archives (np.savez, np.savez_compressed): a zip of NAME.npy members, read through
// libzip. A member's declared size is believed only as far as its compressed size can
// hold it: stored members must declare exactly their stored bytes, deflated ones at most
// 1032 times theirs (deflate's largest ratio, RFC 1951's 258-byte matches in 2 bits),
// so a forged size never allocates beyond what the archive could expand to; libzip
// checks each member's CRC as it is read to the end.
#include "datasets/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "core/files.h"

#define NPZ_MAX_MEMBER ((zip_uint64_t)1 << 36)
#define DEFLATE_MAX_RATIO 1032

struct NpzArchive {
    zip_t *z;
    char path[4096];
};

FpStatus npz_open(const char *path, NpzArchive **out, FpError *err) {
    *out = NULL;
    // A regular file only (a FIFO or a folder would hang or mislead libzip).
    int fd = fp_open_input(path, err);
    if (fd < 0)
        return err ? err->code : FP_EIO;
    int ze = 0;
    zip_t *z = zip_fdopen(fd, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!z) {
        zip_error_t e;
        zip_error_init_with_code(&e, ze);
        FpStatus st = fp_fail(err, FP_EFORMAT, "%s: not a readable .npz (zip) archive: %s", path, zip_error_strerror(&e));
        zip_error_fini(&e);
        close(fd);
        return st;
    }
    NpzArchive *a = fp_calloc(1, sizeof *a, err);
    if (!a) {
        zip_discard(z);
        return FP_ENOMEM;
    }
    a->z = z;
    snprintf(a->path, sizeof a->path, "%s", path);
    *out = a;
    return FP_OK;
}

void npz_close(NpzArchive *a) {
    if (!a)
        return;
    zip_discard(a->z); // read-only: nothing to write back
    free(a);
}

int npz_has(const NpzArchive *a, const char *member) { return zip_name_locate(a->z, member, 0) >= 0; }

FpStatus npz_read(const NpzArchive *a, const char *member, unsigned char **buf, size_t *len, FpError *err) {
    *buf = NULL;
    *len = 0;
    zip_int64_t i = zip_name_locate(a->z, member, 0);
    if (i < 0)
        return fp_fail(err, FP_EFORMAT, "%s: no member %s", a->path, member);
    zip_stat_t sb;
    zip_stat_init(&sb);
    if (zip_stat_index(a->z, (zip_uint64_t)i, 0, &sb) != 0 || !(sb.valid & ZIP_STAT_SIZE) ||
        !(sb.valid & ZIP_STAT_COMP_SIZE) || !(sb.valid & ZIP_STAT_COMP_METHOD))
        return fp_fail(err, FP_EFORMAT, "%s:%s: unreadable zip entry", a->path, member);
    if (sb.comp_method != ZIP_CM_STORE && sb.comp_method != ZIP_CM_DEFLATE)
        return fp_fail(err, FP_EFORMAT, "%s:%s: compression method %d (np.savez stores, np.savez_compressed "
                       "deflates)", a->path, member, (int)sb.comp_method);
    if (sb.size > NPZ_MAX_MEMBER ||
        (sb.comp_method == ZIP_CM_STORE && sb.size != sb.comp_size) ||
        (sb.comp_method == ZIP_CM_DEFLATE && sb.size / DEFLATE_MAX_RATIO > sb.comp_size + 1))
        return fp_fail(err, FP_EFORMAT, "%s:%s: declares %llu bytes from %llu compressed: not a size it can hold",
                       a->path, member, (unsigned long long)sb.size, (unsigned long long)sb.comp_size);
    unsigned char *b = fp_malloc((size_t)sb.size + 1, err);
    if (!b)
        return FP_ENOMEM;
    zip_file_t *f = zip_fopen_index(a->z, (zip_uint64_t)i, 0);
    if (!f) {
        free(b);
        return fp_fail(err, FP_EFORMAT, "%s:%s: %s", a->path, member, zip_strerror(a->z));
    }
    zip_uint64_t got = 0;
    zip_int64_t r = 1;
    while (got < sb.size && (r = zip_fread(f, b + got, sb.size - got)) > 0)
        got += (zip_uint64_t)r;
    char extra;
    if (r >= 0 && got == sb.size)
        r = zip_fread(f, &extra, 1); // 0 at the end; libzip checks the CRC there
    FpStatus st = FP_OK;
    if (r != 0 || got != sb.size)
        st = fp_fail(err, FP_EFORMAT, "%s:%s: %s", a->path, member,
                     r < 0 ? zip_file_strerror(f) : "holds other than its declared size");
    if (zip_fclose(f) != 0 && st == FP_OK)
        st = fp_fail(err, FP_EFORMAT, "%s:%s: damaged (CRC)", a->path, member);
    if (st != FP_OK) {
        free(b);
        return st;
    }
    *buf = b;
    *len = (size_t)sb.size;
    return FP_OK;
}
