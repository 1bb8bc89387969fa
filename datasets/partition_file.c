// Client ids per sample from a partition file (datasets/dataset.h
// dataset_read_partition_file), and the natural partition they give: client k holds
// exactly the samples whose id is k, in dataset order.
#include "datasets/dataset.h"
#include "datasets/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"

#define PARTITION_FILE_MAX ((size_t)1 << 32)
#define PARTITION_MAX_ID (1 << 24)

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

// One non-negative integer per line (LF or CRLF; spaces around it allowed; a last line
// without its newline too); a first line "client" is a header.
static FpStatus read_text_ids(const char *path, const char *buf, size_t len, int n, int32_t *ids, int *n_ids,
                              FpError *err) {
    const char *s = buf, *end = buf + len;
    int line = 0, got = 0, mx = -1;
    while (s < end) {
        const char *e = memchr(s, '\n', (size_t)(end - s));
        if (!e)
            e = end;
        line++;
        const char *a = s, *b = e;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
            b--;
        s = e < end ? e + 1 : end;
        if (line == 1 && b - a == 6 && memcmp(a, "client", 6) == 0)
            continue;
        long v = 0;
        const char *p = a;
        for (; p < b && *p >= '0' && *p <= '9' && v <= PARTITION_MAX_ID; p++)
            v = v * 10 + (*p - '0');
        if (a == b || p != b || v > PARTITION_MAX_ID)
            return fp_fail(err, FP_EFORMAT, "%s:%d: not a client id (one integer in [0, %d] per line)", path, line,
                           PARTITION_MAX_ID);
        if (got == n)
            return fp_fail(err, FP_EFORMAT, "%s:%d: more ids than the %d samples of the training set", path, line, n);
        ids[got++] = (int32_t)v;
        mx = (int)v > mx ? (int)v : mx;
    }
    if (got != n)
        return fp_fail(err, FP_EFORMAT, "%s: %d client ids for the %d samples of the training set", path, got, n);
    *n_ids = mx + 1;
    return FP_OK;
}

FpStatus dataset_read_partition_file(Dataset *d, const char *path, FpError *err) {
    char *buf = NULL;
    size_t len = 0;
    FP_TRY(fp_read_input(path, PARTITION_FILE_MAX, &buf, &len, err));
    int32_t *ids = NULL;
    int n_ids = 0;
    FpStatus st;
    if (has_suffix(path, ".npy")) {
        NpyArray a;
        st = npy_parse(path, (const unsigned char *)buf, len, &a, err);
        if (st == FP_OK && a.ndim == 1 && a.shape[0] != d->n)
            st = fp_fail(err, FP_EFORMAT, "%s: %lld client ids for the %d samples of the training set", path,
                         (long long)a.shape[0], d->n);
        if (st == FP_OK)
            st = npy_int_column(&a, path, d->n, &ids, &n_ids, err);
    } else if (memchr(buf, 0, len)) {
        st = fp_fail(err, FP_EFORMAT, "%s: not a text file of client ids (NUL bytes; a .npy file must be named "
                     "*.npy)", path);
    } else {
        ids = fp_malloc(sizeof(int32_t) * (size_t)d->n + 1, err);
        st = ids ? read_text_ids(path, buf, len, d->n, ids, &n_ids, err) : FP_ENOMEM;
    }
    if (st == FP_OK && n_ids < 1)
        st = fp_fail(err, FP_EFORMAT, "%s: no client ids", path);
    if (st == FP_OK)
        st = dataset_set_clients(d, ids, n_ids, path, err);
    free(ids);
    free(buf);
    return st;
}

FpStatus dataset_client_partition(const Dataset *d, int n_clients, Partition **out, FpError *err) {
    *out = NULL;
    if (!d || !d->client)
        return fp_fail(err, FP_EPARAM, "dataset_client_partition: %s has no client ids", d ? d->name : "(null)");
    if (n_clients != d->n_client_ids)
        return fp_fail(err, FP_EPARAM, "federation.clients: %d, but the client ids of %s number %d clients (0..%d)",
                       n_clients, d->source[0] ? d->source : d->name, d->n_client_ids, d->n_client_ids - 1);
    int *count = fp_calloc((size_t)n_clients, sizeof(int), err);
    if (!count)
        return FP_ENOMEM;
    for (int i = 0; i < d->n; i++)
        count[d->client[i]]++;
    for (int k = 0; k < n_clients; k++)
        if (count[k] == 0) {
            free(count);
            return fp_fail(err, FP_EPARAM, "federation.partition: client %d holds no sample of the training set %s "
                           "(the natural partition gives every client its own rows)", k,
                           d->source[0] ? d->source : d->name);
        }
    Partition *p = partition_create(n_clients, count, err);
    free(count);
    if (!p)
        return err ? err->code : FP_ENOMEM;
    memset(p->count, 0, sizeof(int) * (size_t)n_clients);
    for (int i = 0; i < d->n; i++) {
        int k = d->client[i];
        p->idx[k][p->count[k]++] = (uint32_t)i;
    }
    *out = p;
    return FP_OK;
}
