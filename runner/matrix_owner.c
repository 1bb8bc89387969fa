// The matrix a run folder belongs to (runner/matrix.h, "Owner").
//
// A folder holds the cells of one matrix: two matrices writing one folder (at once, as
// shards, or one after the other) would rewrite each other's results.json, so that one
// matrix's finished cells drop out of report, check and status. The first run to write
// DIR records its matrix in DIR/matrix-owner.json; every later run compares and refuses
// another matrix before it writes anything.
//
// A matrix is known by its "name" key, or else by its file's canonical path: editing the
// file (another ε, another attack, another seed: the documented way to extend a run)
// keeps its identity, a different file does not. A matrix loaded without a file and
// without a name (library callers) is "" and matches only that.
//
// The record is created whole or not at all: written to a temp file, then link()ed to
// its name, which fails when another writer got there first (atomic on NFS too), so of
// two matrices started at the same instant exactly one owns the folder. Where the file
// system has no hard links the temp file is renamed instead: then two first runs
// started at the same instant are not told apart (a later run still is).
#include "runner/matrix_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/files.h"
#include "core/jsonv.h"
#include "core/proc.h"
#include "core/version.h"

#define OWNER_FILE "matrix-owner.json"

FpStatus matrix_owner_check_name(const char *name, FpError *err) {
    if (!name)
        return FP_OK;
    size_t n = strlen(name);
    if (n == 0 || n > 200)
        return fp_fail(err, FP_EPARAM, "name: must be 1 to 200 characters, got %zu", n);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return fp_fail(err, FP_EPARAM, "name: a control character at byte %zu (one line of text expected)", i);
    return FP_OK;
}

// The identity of a matrix with this "name" (NULL: none) and file into owner (n bytes).
static void identity(const char *name, const char *file, char *owner, size_t n) {
    char real[4096];
    if (name)
        snprintf(owner, n, "%s", name);
    else if (file && file[0] && realpath(file, real))
        snprintf(owner, n, "%s", real);
    else
        snprintf(owner, n, "%s", file ? file : "");
}

void matrix_owner_init(Matrix *m, const char *name, const char *file) {
    m->named = name != NULL;
    identity(name, file, m->owner, sizeof m->owner);
}

// "the matrix named \"study\"", "the matrix /home/u/m1.json".
static void describe(int named, const char *owner, char *buf, size_t n) {
    if (named)
        snprintf(buf, n, "the matrix named \"%s\"", owner);
    else if (owner[0])
        snprintf(buf, n, "the matrix %s", owner);
    else
        snprintf(buf, n, "a matrix without a name or file");
}

void matrix_owner_describe(const Matrix *m, char *buf, size_t n) { describe(m->named, m->owner, buf, n); }

// Compares DIR's record with the matrix (named, owner): FP_OK when it is that matrix or
// there is no record (*missing = 1), FP_EPARAM naming both when it is another, else the
// reason the record cannot be read (a link, a FIFO, damaged JSON: never taken over).
static FpStatus owner_compare(const char *dir, int named, const char *owner, int *missing, FpError *err) {
    cJSON *j = NULL;
    FpError rerr = {0};
    *missing = 0;
    if (jv_load_beneath(dir, OWNER_FILE, &j, missing, &rerr) != FP_OK) {
        cJSON_Delete(j);
        if (*missing)
            return FP_OK;
        if (err)
            *err = rerr;
        return rerr.code ? rerr.code : FP_EIO;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(j, "file");
    const cJSON *by = cJSON_IsString(name) ? name : file;
    if (!cJSON_IsObject(j) || !cJSON_IsString(by) || (cJSON_IsString(name) && cJSON_IsString(file))) {
        cJSON_Delete(j);
        return fp_fail(err, FP_EFORMAT, "%s/%s: not a matrix owner record (one of \"name\" or \"file\" expected): "
                       "remove it, or use another --out folder", dir, OWNER_FILE);
    }
    int same = (by == name) == named && strcmp(by->valuestring, owner) == 0;
    char theirs[4200], mine[4200];
    describe(by == name, by->valuestring, theirs, sizeof theirs);
    describe(named, owner, mine, sizeof mine);
    cJSON_Delete(j);
    if (same)
        return FP_OK;
    return fp_fail(err, FP_EPARAM, "%s: this run folder belongs to %s, not to %s (%s/%s; a folder holds one matrix, "
                   "known by its \"name\" or else its file's path): use another --out folder", dir, theirs, mine, dir,
                   OWNER_FILE);
}

FpStatus matrix_check_owner(const char *dir, const cJSON *root, const char *file, FpError *err) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (name && (!cJSON_IsString(name) || matrix_owner_check_name(name->valuestring, NULL) != FP_OK))
        return FP_OK; // matrix_load says what is wrong with it
    char owner[4096];
    identity(name ? name->valuestring : NULL, file, owner, sizeof owner);
    int missing;
    return owner_compare(dir, name != NULL, owner, &missing, err);
}

static FpStatus owner_create(const char *dir, const Matrix *m, int *exists, FpError *err) {
    *exists = 0;
    char host[72], tag[PROC_TAG_MAX], when[64] = "?";
    proc_host(host, sizeof host);
    proc_tag(tag, sizeof tag);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", "fedpriv-matrix-owner");
    cJSON_AddStringToObject(j, "fedpriv_version", FEDPRIV_VERSION);
    cJSON_AddStringToObject(j, m->named ? "name" : "file", m->owner);
    cJSON_AddStringToObject(j, "matrix_file", m->file);
    cJSON_AddStringToObject(j, "host", host);
    cJSON_AddNumberToObject(j, "pid", (double)getpid());
    cJSON_AddStringToObject(j, "since", when);
    char *text = jv_print(j, 1);
    cJSON_Delete(j);
    if (!text)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    char final[4200], tmp[4400];
    snprintf(final, sizeof final, "%s/%s", dir, OWNER_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp.%s", final, tag);
    FILE *f = fp_create_new(tmp, err);
    if (!f) {
        free(text);
        return FP_EIO;
    }
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    ok &= fclose(f) == 0;
    free(text);
    if (!ok) {
        unlink(tmp);
        return fp_fail(err, FP_EIO, "%s: cannot write: %s", tmp, strerror(e));
    }
    int rc = link(tmp, final);
    e = errno;
    if (rc != 0 && (e == EPERM || e == ENOTSUP || e == EOPNOTSUPP || e == EMLINK)) { // no hard links here
        rc = rename(tmp, final);
        e = errno;
    }
    unlink(tmp);
    if (rc == 0)
        return FP_OK;
    if (e == EEXIST) {
        *exists = 1;
        return FP_OK;
    }
    return fp_fail(err, FP_EIO, "%s: cannot create: %s", final, strerror(e));
}

FpStatus matrix_owner_claim(const Matrix *m, const char *dir, FpError *err) {
    for (int tries = 0; tries < 3; tries++) {
        int missing, exists;
        FP_TRY(owner_compare(dir, m->named, m->owner, &missing, err));
        if (!missing)
            return FP_OK;
        FP_TRY(owner_create(dir, m, &exists, err));
        if (!exists)
            return FP_OK;
        // Another writer recorded its matrix between our look and our link: look again.
    }
    return fp_fail(err, FP_EIO, "%s/%s: appears and disappears: another process keeps removing it", dir, OWNER_FILE);
}
