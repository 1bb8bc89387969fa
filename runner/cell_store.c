// Cells on disk, shared by concurrent writers (runner/cell_store.h).
#include "runner/cell_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/files.h"
#include "core/jsonv.h"
#include "core/proc.h"

FpStatus store_make_dirs(const char *dir, FpError *err) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return fp_fail(err, FP_EIO, "%.200s...: path too long", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return fp_fail(err, FP_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return fp_fail(err, FP_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return fp_fail(err, FP_EIO, "%s: not a directory", buf);
    return FP_OK;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) { return remove(path); }

void store_rm_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void store_cell_json_path(const char *dir, const char *id, char *buf, size_t n) {
    snprintf(buf, n, "%s/cells/%s.json", dir, id);
}

void store_cell_dir_path(const char *dir, const char *id, char *buf, size_t n) {
    snprintf(buf, n, "%s/cells/%s", dir, id);
}

static void claim_path(const char *dir, const char *id, char *buf, size_t n) {
    snprintf(buf, n, "%s/cells/%s.running", dir, id);
}

// A cell file's "run": {"diverged_retries": N}; 0 when absent or not a count.
static int retries_of(const cJSON *cell) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cell, "run"),
                                                      "diverged_retries");
    return cJSON_IsNumber(r) && r->valuedouble >= 0 && r->valuedouble <= 1e6 ? (int)r->valuedouble : 0;
}

CellStatus store_cell_status(const char *dir, const char *id, const char *hash, char *message, size_t n) {
    return store_cell_status_retries(dir, id, hash, message, n, NULL);
}

CellStatus store_cell_status_retries(const char *dir, const char *id, const char *hash, char *message, size_t n,
                                     int *retries) {
    char path[4096];
    if (message && n)
        message[0] = 0;
    if (retries)
        *retries = 0;
    // Through the one opener (core/files.h): a link or a FIFO planted as the cell is
    // unreadable (pending: the commit's rename replaces it), never followed or waited on.
    snprintf(path, sizeof path, "cells/%s.json", id);
    cJSON *j = NULL;
    if (jv_load_beneath(dir, path, &j, NULL, NULL) != FP_OK)
        return CELL_PENDING;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "spec_hash");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "status");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
    int st = cJSON_IsString(s) ? cell_status_parse(s->valuestring) : -1;
    CellStatus out = CELL_PENDING;
    if (cJSON_IsString(h) && strcmp(h->valuestring, hash) == 0 && st >= 0) {
        out = (CellStatus)st;
        if (message && n)
            snprintf(message, n, "%s", cJSON_IsString(msg) ? msg->valuestring : "");
        if (retries)
            *retries = retries_of(j);
    }
    cJSON_Delete(j);
    return out;
}

FpStatus store_claim(const char *dir, const char *id, const char *hash, const cJSON *who, FpError *err) {
    char path[4096], host[72], tag[PROC_TAG_MAX];
    claim_path(dir, id, path, sizeof path);
    proc_host(host, sizeof host);
    proc_tag(tag, sizeof tag);
    cJSON *c = who ? cJSON_Duplicate(who, 1) : cJSON_CreateObject();
    if (!c)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    cJSON_AddStringToObject(c, "cell", id);
    cJSON_AddStringToObject(c, "spec_hash", hash);
    cJSON_AddStringToObject(c, "host", host);
    cJSON_AddNumberToObject(c, "pid", (double)getpid());
    cJSON_AddStringToObject(c, "tag", tag);
    cJSON_AddNumberToObject(c, "started", (double)time(NULL));
    FpStatus st = jv_write_file_atomic(path, c, err);
    cJSON_Delete(c);
    return st;
}

cJSON *store_claim_read(const char *dir, const char *id) {
    char path[4096];
    snprintf(path, sizeof path, "cells/%s.running", id);
    cJSON *j = NULL;
    if (jv_load_beneath(dir, path, &j, NULL, NULL) != FP_OK)
        return NULL;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

FpStatus store_partial_create(const char *dir, const char *id, char *partial, size_t n, FpError *err) {
    char tag[PROC_TAG_MAX];
    proc_tag(tag, sizeof tag);
    snprintf(partial, n, "%s/cells/%s.partial.%s", dir, id, tag);
    store_rm_tree(partial); // same tag: a dead process of ours (PIDs are reused)
    return store_make_dirs(partial, err);
}

FpStatus store_commit(const char *dir, const char *id, const char *hash, const char *partial, const cJSON *cell_json,
                      int *kept_existing, FpError *err) {
    char json[4096], final[4096], claim[4096];
    store_cell_json_path(dir, id, json, sizeof json);
    store_cell_dir_path(dir, id, final, sizeof final);
    claim_path(dir, id, claim, sizeof claim);
    *kept_existing = 0;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(cell_json, "status");
    int ours = cJSON_IsString(s) ? cell_status_parse(s->valuestring) : CELL_FAILED;
    int finished = ours == CELL_DONE || ours == CELL_DIVERGED;
    int had;
    CellStatus existing = store_cell_status_retries(dir, id, hash, NULL, 0, &had);
    // Another writer finished it meanwhile. A diverged result gives way only to a
    // finished retry (a failed one leaves it standing).
    if (existing == CELL_DONE || (existing == CELL_DIVERGED && (!finished || had >= retries_of(cell_json)))) {
        store_rm_tree(partial);
        unlink(claim);
        *kept_existing = 1;
        return FP_OK;
    }
    struct stat sb;
    if (!finished && lstat(final, &sb) == 0) {
        // A failed attempt never displaces artifacts in place: they may be a finished
        // writer's whose result is about to land.
        store_rm_tree(partial);
    } else {
        // Place the artifacts. rename() is atomic; a folder already there (a failed
        // attempt's, or a concurrent writer's) is moved aside under our own name first.
        char tag[PROC_TAG_MAX], stale[4200];
        proc_tag(tag, sizeof tag);
        snprintf(stale, sizeof stale, "%s/cells/%s.stale.%s", dir, id, tag);
        int placed = 0;
        for (int tries = 0; tries < 16 && !placed; tries++) {
            if (rename(partial, final) == 0) {
                placed = 1;
                break;
            }
            if (errno != EEXIST && errno != ENOTEMPTY && errno != EISDIR && errno != ENOTDIR)
                return fp_fail(err, FP_EIO, "%s: cannot rename into place: %s", final, strerror(errno));
            store_rm_tree(stale);
            if (rename(final, stale) != 0 && errno != ENOENT)
                return fp_fail(err, FP_EIO, "%s: cannot move aside: %s", final, strerror(errno));
            store_rm_tree(stale);
        }
        if (!placed)
            return fp_fail(err, FP_EIO, "%s: another writer keeps replacing it", final);
    }
    FP_TRY(jv_write_file_atomic(json, cell_json, err));
    unlink(claim);
    return FP_OK;
}

// "NAME<sep>TAG" → the TAG part when NAME ends in sep followed by a process tag.
static const char *tag_after(const char *name, const char *sep) {
    const char *hit = NULL;
    for (const char *p = strstr(name, sep); p; p = strstr(p + 1, sep))
        hit = p;
    if (!hit)
        return NULL;
    const char *tag = hit + strlen(sep);
    char host[72];
    pid_t pid;
    return proc_tag_parse(tag, host, sizeof host, &pid) ? tag : NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// A name of an older version's leftover: "X.tmp.PID" or "ID.partial".
static int legacy_leftover(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (t) {
        const char *p = t + 5;
        if (*p) {
            while (*p >= '0' && *p <= '9')
                p++;
            if (!*p)
                return 1;
        }
    }
    return ends_with(name, ".partial");
}

// path: the run folder root, or root/cells (claims = 1).
static void clean_folder(const char *root, const char *path, int exclusive, int claims) {
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (name[0] == '.')
            continue;
        const char *tag = tag_after(name, ".tmp.");
        if (!tag)
            tag = tag_after(name, ".partial.");
        if (!tag)
            tag = tag_after(name, ".stale.");
        char p[4600];
        snprintf(p, sizeof p, "%s/%s", path, name);
        if (tag) {
            if (proc_tag_is_dead(tag))
                store_rm_tree(p);
        } else if (exclusive && legacy_leftover(name)) {
            store_rm_tree(p);
        } else if (claims && ends_with(name, ".running")) {
            cJSON *c = NULL;
            char rel[4600];
            snprintf(rel, sizeof rel, "cells/%s", name);
            if (jv_load_beneath(root, rel, &c, NULL, NULL) == FP_OK) {
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "tag");
                if (cJSON_IsString(t) && proc_tag_is_dead(t->valuestring))
                    unlink(p);
            }
            cJSON_Delete(c);
        }
    }
    closedir(d);
}

void store_clean_leftovers(const char *dir, int exclusive) {
    char cells[4200];
    snprintf(cells, sizeof cells, "%s/cells", dir);
    clean_folder(dir, dir, exclusive, 0);
    clean_folder(dir, cells, exclusive, 1);
}

FpStatus store_check_files(const char *dir, FpError *err) {
    char cells[4200];
    snprintf(cells, sizeof cells, "%s/cells", dir);
    int missing = 0;
    FpError local = {0};
    int fd = fp_open_beneath(dir, "cells", O_DIRECTORY, &missing, &local);
    if (fd < 0)
        return missing ? FP_OK : fp_fail(err, local.code, "%s", local.msg);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return fp_fail(err, FP_EIO, "%s: cannot list: %s", cells, strerror(errno));
    }
    FpStatus st = FP_OK;
    struct dirent *de;
    while (st == FP_OK && (de = readdir(d))) {
        struct stat sb;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISLNK(sb.st_mode))
            st = fp_fail(err, FP_EFORMAT, "%s/%s: a symbolic link (the files of a run are never read or written "
                         "through a link: remove it)", cells, de->d_name);
        else if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
            st = fp_fail(err, FP_EFORMAT, "%s/%s: not a regular file (a FIFO, socket or device is never read or "
                         "written as a cell: remove it)", cells, de->d_name);
    }
    closedir(d);
    return st;
}
