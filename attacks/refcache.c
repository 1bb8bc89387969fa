// The on-disk reference-model cache (see attacks/refcache.h for the format and the
// concurrency rule: unique temp file, fsync, rename).
#include "attacks/refcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/files.h"

#define REFCACHE_MAGIC "FPREFLG1"
#define REFCACHE_BOM 0x01020304u
#define REFCACHE_FORMAT 2u
#define REFCACHE_HEADER (8 + 5 * 4 + 8)
#define REFCACHE_MAX_BYTES ((size_t)1 << 30) // the format's limit (refcache.h): a bigger file is not an entry

// FNV-1a over 8-byte words (then the tail bytes), with a final avalanche (splitmix64's
// finaliser) so that close inputs land far apart.
uint64_t refcache_hash(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    const uint64_t prime = 0x100000001b3ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * prime;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * prime;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

// The entry's file name, HASH.ref (37 bytes with the NUL).
static void entry_name(const char *identity, char out[40]) {
    size_t len = strlen(identity);
    uint64_t a = refcache_hash(REFCACHE_HASH_START, identity, len);
    uint64_t b = refcache_hash(0x84222325cbf29ce4ull ^ len, identity, len);
    snprintf(out, 40, "%016llx%016llx.ref", (unsigned long long)a, (unsigned long long)b);
}

void refcache_path(const char *dir, const char *identity, char *out, size_t n) {
    char name[40];
    entry_name(identity, name);
    snprintf(out, n, "%s/%s", dir, name);
}

// The cache folder split as refcache.h says: parent (the run folder, the user's choice)
// and leaf (its last component, e.g. "reference-models", never a link). "X/" is "X".
static void split_dir(const char *dir, char *parent, size_t n, char *leaf, size_t ln) {
    char buf[4200];
    snprintf(buf, sizeof buf, "%s", dir && dir[0] ? dir : ".");
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/')
        buf[--len] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash) {
        snprintf(parent, n, ".");
        snprintf(leaf, ln, "%s", buf);
    } else {
        snprintf(leaf, ln, "%s", slash + 1);
        if (slash == buf)
            slash[1] = 0;
        else
            *slash = 0;
        snprintf(parent, n, "%s", buf);
    }
}

// Opens the cache folder (created when create and missing): -1 with err set, or -1 and
// *missing when it does not exist.
static int open_dir(const char *dir, int create, int *missing, FpError *err) {
    char parent[4200], leaf[4200];
    split_dir(dir, parent, sizeof parent, leaf, sizeof leaf);
    return fp_open_beneath(parent, leaf, O_DIRECTORY | (create ? O_CREAT : 0), missing, err);
}

FpStatus refcache_check_dir(const char *dir, FpError *err) {
    int missing = 0;
    FpError local = {0};
    int fd = open_dir(dir, 0, &missing, &local);
    if (fd < 0)
        return missing ? FP_OK : fp_fail(err, local.code, "%s", local.msg);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return fp_fail(err, FP_EIO, "%s: cannot list: %s", dir, strerror(errno));
    }
    FpStatus st = FP_OK;
    struct dirent *de;
    while (st == FP_OK && (de = readdir(d))) {
        struct stat sb;
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISLNK(sb.st_mode) || !S_ISREG(sb.st_mode))
            st = fp_fail(err, FP_EFORMAT, "%s/%s: %s (the cache holds only entries fedpriv wrote: remove it)", dir,
                         de->d_name, S_ISLNK(sb.st_mode) ? "a symbolic link" : "not a regular file");
    }
    closedir(d);
    return st;
}

// A cursor over the bytes of an entry being read.
typedef struct {
    const unsigned char *p;
    size_t n, at;
} Reader;

static int take(Reader *r, void *out, size_t bytes) {
    if (r->n - r->at < bytes)
        return 0;
    memcpy(out, r->p + r->at, bytes);
    r->at += bytes;
    return 1;
}

// Reads n bytes at offset off; 0 when the file ends first.
static int read_at(int fd, void *buf, size_t n, off_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (unsigned char *)buf + got, n - got, off + (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return 0;
        got += (size_t)k;
    }
    return 1;
}

// The entry at path, read whole into *data (*n bytes) only after its size (fstat) is
// within the format's limit and its header (magic, byte-order mark, format, counts) is
// read and announces exactly that size: a large file that is not an entry costs one
// header read, not its size in memory.
static FpStatus read_entry(int fd, const char *path, unsigned char **data, size_t *n, FpError *err) {
    *data = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0 || (unsigned long long)st.st_size > REFCACHE_MAX_BYTES)
        return fp_fail(err, FP_EFORMAT, "%s: not a reference-model cache entry (larger than %zu bytes)", path,
                       REFCACHE_MAX_BYTES);
    size_t size = (size_t)st.st_size;
    unsigned char head[REFCACHE_HEADER];
    size_t hn = size < REFCACHE_HEADER ? size : REFCACHE_HEADER;
    if (!read_at(fd, head, hn, 0))
        return fp_fail(err, FP_EFORMAT, "%s: truncated while reading", path);
    Reader r = {head, hn, 0};
    char magic[8];
    uint32_t bom, format, id_len, nq, nc;
    double acc;
    if (!take(&r, magic, 8) || memcmp(magic, REFCACHE_MAGIC, 8) != 0 || !take(&r, &bom, 4) || bom != REFCACHE_BOM ||
        !take(&r, &format, 4) || format != REFCACHE_FORMAT)
        return fp_fail(err, FP_EFORMAT, "%s: not a reference-model cache entry of this format", path);
    if (!take(&r, &id_len, 4) || !take(&r, &nq, 4) || !take(&r, &nc, 4) || !take(&r, &acc, 8))
        return fp_fail(err, FP_EFORMAT, "%s: truncated header", path);
    // The exact size the header announces (in 64 bits: no overflow for u32 counts).
    uint64_t need = (uint64_t)REFCACHE_HEADER + id_len + (uint64_t)nq * (4 + 8 + 1) + (uint64_t)nq * nc * 4 + 4;
    if (need != size)
        return fp_fail(err, FP_EFORMAT, "%s: %zu bytes, the header announces %llu (truncated or damaged)", path, size,
                       (unsigned long long)need);
    unsigned char *buf = malloc(size);
    if (!buf)
        return fp_fail(err, FP_ENOMEM, "%s: out of memory (%zu bytes)", path, size);
    if (!read_at(fd, buf, size, 0)) {
        free(buf);
        return fp_fail(err, FP_EFORMAT, "%s: truncated while reading", path);
    }
    *data = buf;
    *n = size;
    return FP_OK;
}

FpStatus refcache_load(const char *dir, const char *identity, const uint32_t *query, const uint64_t *content,
                       int n_query, int n_classes, float *logits, unsigned char *member, double *test_accuracy,
                       int *hit, FpError *err) {
    *hit = 0;
    char path[4200], parent[4200], leaf[4200], rel[4300], name[40];
    refcache_path(dir, identity, path, sizeof path);
    entry_name(identity, name);
    split_dir(dir, parent, sizeof parent, leaf, sizeof leaf);
    snprintf(rel, sizeof rel, "%s/%s", leaf, name);
    // Through the one opener (core/files.h): neither the cache folder nor the entry is a
    // link, and the entry is a regular file (a FIFO does not block).
    int missing = 0;
    FpError oerr = {0};
    int fd = fp_open_beneath(parent, rel, O_RDONLY, &missing, &oerr);
    if (fd < 0) {
        if (missing)
            return FP_OK;
        if (err)
            *err = oerr;
        return oerr.code;
    }
    unsigned char *data;
    size_t n = 0;
    FpStatus st = read_entry(fd, path, &data, &n, err);
    close(fd);
    if (st != FP_OK)
        return st;
    uint32_t id_len, nq, nc;
    double acc;
    memcpy(&id_len, data + 16, 4);
    memcpy(&nq, data + 20, 4);
    memcpy(&nc, data + 24, 4);
    memcpy(&acc, data + 28, 8);
    uint32_t crc_stored;
    memcpy(&crc_stored, data + n - 4, 4);
    if ((uint32_t)crc32(0L, data, (uInt)(n - 4)) != crc_stored) {
        st = fp_fail(err, FP_EFORMAT, "%s: checksum mismatch (damaged entry)", path);
        goto out;
    }
    const unsigned char *q = data + REFCACHE_HEADER + id_len, *c = q + (size_t)nq * 4, *mb = c + (size_t)nq * 8,
                        *z = mb + nq;
    // A checksum proves nothing against a forger: what a trained model cannot give (a
    // logit that is not finite, an accuracy outside [0, 1]) is a damaged entry, retrained,
    // never scored.
    if (!isnan(acc) && !(acc >= 0 && acc <= 1)) { // NaN: a shadow test set without classes
        st = fp_fail(err, FP_EFORMAT, "%s: test accuracy %g is not in [0, 1] (damaged or forged entry)", path, acc);
        goto out;
    }
    for (size_t k = 0; k < (size_t)nq * nc; k++) {
        float v;
        memcpy(&v, z + k * 4, 4);
        if (!isfinite(v)) {
            st = fp_fail(err, FP_EFORMAT, "%s: logit %g of query %zu, class %zu is not finite (damaged or forged "
                         "entry)", path, (double)v, k / nc, k % nc);
            goto out;
        }
    }
    // A valid entry: a hit when it is this identity and covers the queries.
    size_t want_len = strlen(identity);
    if (id_len != want_len || memcmp(data + REFCACHE_HEADER, identity, want_len) != 0 || (int)nc != n_classes ||
        nq < (uint32_t)n_query)
        goto out;
    for (int i = 0; i < n_query; i++) {
        uint32_t qi;
        uint64_t ci;
        memcpy(&qi, q + (size_t)i * 4, 4);
        memcpy(&ci, c + (size_t)i * 8, 8);
        if (qi != query[i] || ci != content[i])
            goto out;
    }
    memcpy(logits, z, sizeof(float) * (size_t)n_query * n_classes);
    if (member)
        memcpy(member, mb, (size_t)n_query);
    if (test_accuracy)
        *test_accuracy = acc;
    *hit = 1;
out:
    free(data);
    return st;
}

static int put(FILE *f, const void *p, size_t n, uLong *crc) {
    *crc = crc32(*crc, p, (uInt)n);
    return fwrite(p, 1, n, f) == n;
}

FpStatus refcache_store(const char *dir, const char *identity, const uint32_t *query, const uint64_t *content,
                        int n_query, int n_classes, const float *logits, const unsigned char *member,
                        double test_accuracy, FpError *err) {
    for (size_t k = 0; k < (size_t)n_query * n_classes; k++)
        if (!isfinite(logits[k])) // refcache_load would refuse it as damaged
            return fp_fail(err, FP_EPARAM, "%s: not stored: the model's logits are not finite", dir);
    // The folder through the one opener (created when missing; a link is refused), then
    // a temp file created exclusively inside it, never through a link, renamed into
    // place at the same descriptor: nothing is written outside the run folder.
    FpError derr = {0};
    int dfd = open_dir(dir, 1, NULL, &derr);
    if (dfd < 0) {
        if (err)
            *err = derr;
        return derr.code;
    }
    char path[4200], name[40], tmp[120];
    refcache_path(dir, identity, path, sizeof path);
    entry_name(identity, name);
    // A unique temp name per writer (processes and threads alike): pid, clock and a stack
    // address hashed, tried again on a clash.
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 64; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t salt[4] = {(uint64_t)getpid(), (uint64_t)ts.tv_nsec, (uint64_t)(uintptr_t)&ts, (uint64_t)tries};
        snprintf(tmp, sizeof tmp, "%s.tmp.%016llx", name,
                 (unsigned long long)refcache_hash(REFCACHE_HASH_START, salt, sizeof salt));
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int saved = errno;
        close(dfd);
        return fp_fail(err, FP_EIO, "%s: cannot create a temp file: %s", dir, strerror(saved));
    }
    fchmod(fd, 0644); // the umask would hide the entry from other users of a shared run folder
    unsigned char *codes = member ? NULL : calloc((size_t)(n_query ? n_query : 1), 1);
    FILE *f = codes || member ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int saved = errno;
        free(codes);
        close(fd);
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return fp_fail(err, FP_EIO, "%s/%s: cannot write: %s", dir, tmp, strerror(saved));
    }
    uint32_t head[5] = {REFCACHE_BOM, REFCACHE_FORMAT, (uint32_t)strlen(identity), (uint32_t)n_query,
                        (uint32_t)n_classes};
    uLong crc = crc32(0L, Z_NULL, 0);
    int ok = put(f, REFCACHE_MAGIC, 8, &crc) && put(f, head, sizeof head, &crc) &&
             put(f, &test_accuracy, 8, &crc) &&
             put(f, identity, head[2], &crc) && put(f, query, sizeof(uint32_t) * (size_t)n_query, &crc) &&
             put(f, content, sizeof(uint64_t) * (size_t)n_query, &crc) &&
             put(f, member ? member : codes, (size_t)n_query, &crc) &&
             put(f, logits, sizeof(float) * (size_t)n_query * n_classes, &crc);
    free(codes);
    uint32_t c32 = (uint32_t)crc;
    ok = ok && fwrite(&c32, 4, 1, f) == 1 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = fclose(f) == 0 && ok;
    if (ok && renameat(dfd, tmp, dfd, name) != 0) {
        saved = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return fp_fail(err, FP_EIO, "%s: cannot rename into place: %s", path, strerror(saved));
    }
    if (!ok)
        unlinkat(dfd, tmp, 0);
    close(dfd);
    if (!ok)
        return fp_fail(err, FP_EIO, "%s/%s: write failed: %s", dir, tmp, strerror(saved ? saved : EIO));
    return FP_OK;
}
