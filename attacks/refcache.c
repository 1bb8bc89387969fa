// The on-disk reference-model cache (see attacks/refcache.h for the format and the
// concurrency rule: unique temp file, fsync, rename).
#include "attacks/refcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define REFCACHE_MAGIC "FPREFLG1"
#define REFCACHE_BOM 0x01020304u
#define REFCACHE_FORMAT 2u
#define REFCACHE_HEADER (8 + 5 * 4 + 8)
#define REFCACHE_MAX_BYTES ((size_t)1 << 32) // no entry is this large: a bigger file is damaged

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

void refcache_path(const char *dir, const char *identity, char *out, size_t n) {
    size_t len = strlen(identity);
    uint64_t a = refcache_hash(REFCACHE_HASH_START, identity, len);
    uint64_t b = refcache_hash(0x84222325cbf29ce4ull ^ len, identity, len);
    snprintf(out, n, "%s/%016llx%016llx.ref", dir, (unsigned long long)a, (unsigned long long)b);
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

static FpStatus read_all(const char *path, unsigned char **data, size_t *n, int *missing, FpError *err) {
    *data = NULL;
    *missing = 0;
    // A link planted in the run folder is not followed (docs/security.md, run folders).
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        if (errno == ENOENT) {
            *missing = 1;
            return FP_OK;
        }
        return fp_fail(err, FP_EIO, "%s: cannot read: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0 || (size_t)st.st_size > REFCACHE_MAX_BYTES) {
        fclose(f);
        return fp_fail(err, FP_EFORMAT, "%s: not a reference-model cache entry (size)", path);
    }
    size_t size = (size_t)st.st_size;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return fp_fail(err, FP_ENOMEM, "%s: out of memory (%zu bytes)", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    fclose(f);
    if (got != size) {
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
    char path[4200];
    refcache_path(dir, identity, path, sizeof path);
    unsigned char *data;
    size_t n = 0;
    int missing;
    FP_TRY(read_all(path, &data, &n, &missing, err));
    if (missing)
        return FP_OK;
    Reader r = {data, n, 0};
    char magic[8];
    uint32_t bom, format, id_len, nq, nc;
    double acc;
    FpStatus st = FP_OK;
    if (!take(&r, magic, 8) || memcmp(magic, REFCACHE_MAGIC, 8) != 0 || !take(&r, &bom, 4) || bom != REFCACHE_BOM ||
        !take(&r, &format, 4) || format != REFCACHE_FORMAT) {
        st = fp_fail(err, FP_EFORMAT, "%s: not a reference-model cache entry of this format", path);
        goto out;
    }
    if (!take(&r, &id_len, 4) || !take(&r, &nq, 4) || !take(&r, &nc, 4) || !take(&r, &acc, 8)) {
        st = fp_fail(err, FP_EFORMAT, "%s: truncated header", path);
        goto out;
    }
    // The exact size the header announces (in 64 bits: no overflow for u32 counts).
    uint64_t need = (uint64_t)REFCACHE_HEADER + id_len + (uint64_t)nq * (4 + 8 + 1) + (uint64_t)nq * nc * 4 + 4;
    if (need != n) {
        st = fp_fail(err, FP_EFORMAT, "%s: %zu bytes, the header announces %llu (truncated or damaged)", path, n,
                     (unsigned long long)need);
        goto out;
    }
    uint32_t crc_stored;
    memcpy(&crc_stored, data + n - 4, 4);
    if ((uint32_t)crc32(0L, data, (uInt)(n - 4)) != crc_stored) {
        st = fp_fail(err, FP_EFORMAT, "%s: checksum mismatch (damaged entry)", path);
        goto out;
    }
    // A valid entry: a hit when it is this identity and covers the queries.
    size_t want_len = strlen(identity);
    if (id_len != want_len || memcmp(data + r.at, identity, want_len) != 0 || (int)nc != n_classes ||
        nq < (uint32_t)n_query)
        goto out;
    r.at += id_len;
    const unsigned char *q = data + r.at, *c = q + (size_t)nq * 4, *mb = c + (size_t)nq * 8, *z = mb + nq;
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
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return fp_fail(err, FP_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
    char path[4200], tmp[4300];
    refcache_path(dir, identity, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return fp_fail(err, FP_EIO, "%s: cannot create a temp file: %s", dir, strerror(errno));
    fchmod(fd, 0644); // mkstemp's 0600 would hide the entry from other users of a shared run folder
    unsigned char *codes = member ? NULL : calloc((size_t)(n_query ? n_query : 1), 1);
    FILE *f = codes || member ? fdopen(fd, "wb") : NULL;
    if (!f) {
        free(codes);
        close(fd);
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: cannot write: %s", tmp, strerror(errno));
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
    if (!ok) {
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: write failed: %s", tmp, strerror(saved ? saved : EIO));
    }
    if (rename(tmp, path) != 0) {
        saved = errno;
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: cannot rename into place: %s", path, strerror(saved));
    }
    return FP_OK;
}
