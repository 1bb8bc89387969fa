// Files without surprises (see core/files.h).
#include "core/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *fp_create_new(const char *path, FpError *err) {
    if (unlink(path) != 0 && errno != ENOENT) {
        fp_fail(err, FP_EIO, "%s: cannot write: %s", path, strerror(errno));
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        fp_fail(err, FP_EIO, "%s: cannot write: %s", path, strerror(saved));
    }
    return f;
}

// Why an open of a path's component failed, in the words of core/files.h: a link, a
// folder expected, or anything but a regular file is FP_EFORMAT; a missing name or an
// I/O error is FP_EIO.
static int open_failed(const char *dir, const char *rel, const char *part, int saved, int last, int want_dir,
                       int *missing, FpError *err) {
    if (saved == ELOOP || (saved == ENOTDIR && (!last || want_dir)))
        fp_fail(err, FP_EFORMAT, "%s/%s: \"%s\" is a symbolic link or not a folder (files of a run are opened "
                "only inside its folder, never through a link)", dir, rel, part);
    else if (saved == ENXIO || saved == EISDIR || saved == ENODEV || saved == ETXTBSY || saved == EOPNOTSUPP)
        fp_fail(err, FP_EFORMAT, "%s/%s: not a regular file (a FIFO, socket, device or folder is never read or "
                "written as a run's file)", dir, rel);
    else {
        *missing = saved == ENOENT;
        fp_fail(err, FP_EIO, "%s/%s: %s", dir, rel, saved == ENOENT ? "no such file" : strerror(saved));
    }
    return -1;
}

int fp_open_beneath(const char *dir, const char *rel, int flags, int *missing, FpError *err) {
    int gone_local;
    if (!missing)
        missing = &gone_local;
    *missing = 0;
    if (!rel || !rel[0] || rel[0] == '/' || strlen(rel) > 1024) {
        fp_fail(err, FP_EFORMAT, "%s: \"%.200s\" is not a relative path inside the folder", dir, rel ? rel : "");
        return -1;
    }
    int want_dir = (flags & O_DIRECTORY) != 0, writing = (flags & O_ACCMODE) != O_RDONLY;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); // the folder itself is the user's choice
    if (fd < 0) {
        *missing = errno == ENOENT;
        fp_fail(err, FP_EIO, "%s/%s: cannot open: %s", dir, rel, strerror(errno));
        return -1;
    }
    char part[1025];
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        memcpy(part, p, n);
        part[n] = 0;
        if (n == 0 || strcmp(part, ".") == 0 || strcmp(part, "..") == 0) {
            close(fd);
            fp_fail(err, FP_EFORMAT, "%s/%s: \"..\", \".\" and empty path components are not allowed", dir, rel);
            return -1;
        }
        // O_NOFOLLOW: a link is ELOOP (or ENOTDIR with O_DIRECTORY), also when O_CREAT
        // meets a dangling one; O_NONBLOCK: a FIFO planted as the file does not block the
        // open (opened for writing with no reader it is ENXIO). O_TRUNC waits for the
        // checks below, so that only a regular file of this name is ever cut.
        int next;
        if (slash || want_dir) {
            next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (next < 0 && errno == ENOENT && !slash && (flags & O_CREAT) &&
                (mkdirat(fd, part, 0777) == 0 || errno == EEXIST))
                next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        } else
            next = openat(fd, part, (flags & (O_ACCMODE | O_CREAT | O_APPEND)) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                          0666);
        int saved = errno;
        close(fd);
        if (next < 0)
            return open_failed(dir, rel, part, saved, !slash, want_dir, missing, err);
        fd = next;
        if (!slash)
            break;
        p = slash + 1;
    }
    struct stat st;
    const char *why = NULL;
    FpStatus code = FP_EFORMAT;
    if (fstat(fd, &st) != 0)
        why = strerror(errno), code = FP_EIO;
    else if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
        why = want_dir ? "not a folder" : "not a regular file";
    else if (writing && st.st_nlink != 1) // written in place, the file's other name would change too
        why = "has another name (a hard link): it is not written in place";
    else if ((flags & O_TRUNC) && ftruncate(fd, 0) != 0)
        why = strerror(errno), code = FP_EIO;
    if (why) {
        close(fd);
        fp_fail(err, code, "%s/%s: %s", dir, rel, why);
        return -1;
    }
    if (!want_dir)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

// Reads the open regular file fd whole (at most max bytes) into *buf; closes fd. name is
// for messages.
static FpStatus read_whole(int fd, const char *name, size_t max, char **buf, size_t *len, FpError *err) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0 || (unsigned long long)st.st_size > max) {
        close(fd);
        return fp_fail(err, FP_EFORMAT, "%s: larger than %zu bytes", name, max);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *b = malloc(cap);
    if (!b) {
        close(fd);
        return fp_fail(err, FP_ENOMEM, "%s: out of memory", name);
    }
    for (;;) {
        if (n + 1 == cap) { // the file grew since fstat
            if (cap > max) {
                free(b);
                close(fd);
                return fp_fail(err, FP_EFORMAT, "%s: larger than %zu bytes", name, max);
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                close(fd);
                return fp_fail(err, FP_ENOMEM, "%s: out of memory", name);
            }
            b = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int saved = errno;
            free(b);
            close(fd);
            return fp_fail(err, FP_EIO, "%s: read error: %s", name, strerror(saved));
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    b[n] = 0;
    *buf = b;
    *len = n;
    return FP_OK;
}

FpStatus fp_read_beneath(const char *dir, const char *rel, size_t max, char **buf, size_t *len, int *missing,
                         FpError *err) {
    *buf = NULL;
    *len = 0;
    FpError local = {0};
    int fd = fp_open_beneath(dir, rel, O_RDONLY, missing, &local);
    if (fd < 0) {
        if (err)
            *err = local;
        return local.code;
    }
    char name[2200];
    snprintf(name, sizeof name, "%s/%s", dir, rel);
    return read_whole(fd, name, max, buf, len, err);
}

int fp_open_input(const char *path, FpError *err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fp_fail(err, FP_EIO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fp_fail(err, FP_EFORMAT, "%s: not a regular file (give the path of a file: a FIFO, device or folder is not "
                "read)", path);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

FpStatus fp_read_input(const char *path, size_t max, char **buf, size_t *len, FpError *err) {
    *buf = NULL;
    *len = 0;
    FpError local = {0};
    int fd = fp_open_input(path, &local);
    if (fd < 0) {
        if (err)
            *err = local;
        return local.code;
    }
    return read_whole(fd, path, max, buf, len, err);
}

// Creates and removes a probe file in folder dir (named after base): the one test that
// answers "can a file be created here" for permissions, read-only mounts and full quotas
// alike.
static FpStatus probe_folder(const char *dir, const char *shown, FpError *err) {
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.fedpriv-probe.%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return fp_fail(err, FP_EIO, "%s: cannot write there: %s", shown, strerror(errno));
    close(fd);
    unlink(probe);
    return FP_OK;
}

FpStatus fp_check_writable_file(const char *path, FpError *err) {
    struct stat st;
    if (!path || !path[0])
        return fp_fail(err, FP_EIO, "an output file name is empty");
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return fp_fail(err, FP_EIO, "%s: is a directory (give a file name)", path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fp_fail(err, FP_EIO, "%s: the folder %s does not exist", path, dir);
    return probe_folder(dir, path, err);
}

FpStatus fp_check_writable_dir(const char *dir, FpError *err) {
    if (!dir || !dir[0])
        return fp_fail(err, FP_EIO, "an output folder name is empty");
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return fp_fail(err, FP_EIO, "%s: not a directory", dir);
        return probe_folder(dir, dir, err);
    }
    // Missing: the nearest existing parent must accept new entries.
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    for (;;) {
        char *slash = strrchr(parent, '/');
        while (slash && slash > parent && slash[1] == 0) { // trailing slashes
            *slash = 0;
            slash = strrchr(parent, '/');
        }
        if (!slash)
            snprintf(parent, sizeof parent, ".");
        else if (slash == parent)
            parent[1] = 0;
        else
            *slash = 0;
        if (stat(parent, &st) == 0)
            break;
        if (strcmp(parent, ".") == 0 || strcmp(parent, "/") == 0)
            break;
    }
    if (!S_ISDIR(st.st_mode))
        return fp_fail(err, FP_EIO, "%s: %s is not a directory", dir, parent);
    return probe_folder(parent, dir, err);
}

int fp_output_replaces(const char *out, const char *in) {
    struct stat so, si;
    if (!out || !in || stat(out, &so) != 0 || stat(in, &si) != 0)
        return 0;
    if (so.st_dev == si.st_dev && so.st_ino == si.st_ino)
        return 1;
    if (!S_ISDIR(si.st_mode))
        return 0;
    char *ro = realpath(out, NULL), *ri = realpath(in, NULL);
    size_t li = ri ? strlen(ri) : 0;
    int beneath = ro && ri && strncmp(ro, ri, li) == 0 && (ro[li] == '/' || (li && ri[li - 1] == '/'));
    free(ro);
    free(ri);
    return beneath;
}
