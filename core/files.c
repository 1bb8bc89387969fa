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

// fp_open_beneath; *missing = 1 when a component does not exist.
static int open_beneath(const char *dir, const char *rel, int *missing, FpError *err) {
    *missing = 0;
    if (!rel || !rel[0] || rel[0] == '/' || strlen(rel) > 1024) {
        fp_fail(err, FP_EFORMAT, "%s: \"%.200s\" is not a relative path inside the folder", dir, rel ? rel : "");
        return -1;
    }
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
        // O_NOFOLLOW: a link is ELOOP (or ENOTDIR with O_DIRECTORY); O_NONBLOCK: a FIFO
        // planted as the file does not block the open.
        int next = openat(fd, part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (slash ? O_DIRECTORY : O_NONBLOCK));
        int saved = errno;
        close(fd);
        if (next < 0) {
            if (saved == ELOOP || saved == ENOTDIR)
                fp_fail(err, FP_EFORMAT, "%s/%s: \"%s\" is a symbolic link or not a folder (files of a run are read "
                        "only from inside its folder, never through a link)", dir, rel, part);
            else {
                *missing = saved == ENOENT;
                fp_fail(err, FP_EIO, "%s/%s: %s", dir, rel, saved == ENOENT ? "no such file" : strerror(saved));
            }
            return -1;
        }
        fd = next;
        if (!slash)
            break;
        p = slash + 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fp_fail(err, FP_EFORMAT, "%s/%s: not a regular file", dir, rel);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int fp_open_beneath(const char *dir, const char *rel, FpError *err) {
    int missing;
    return open_beneath(dir, rel, &missing, err);
}

FpStatus fp_read_beneath(const char *dir, const char *rel, size_t max, char **buf, size_t *len, int *missing,
                         FpError *err) {
    *buf = NULL;
    *len = 0;
    if (missing)
        *missing = 0;
    FpError local = {0};
    int gone;
    int fd = open_beneath(dir, rel, &gone, &local);
    if (fd < 0) {
        if (missing)
            *missing = gone;
        if (err)
            *err = local;
        return local.code;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size > max) {
        close(fd);
        return fp_fail(err, FP_EFORMAT, "%s/%s: larger than %zu bytes", dir, rel, max);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *b = malloc(cap);
    if (!b) {
        close(fd);
        return fp_fail(err, FP_ENOMEM, "%s/%s: out of memory", dir, rel);
    }
    for (;;) {
        if (n + 1 == cap) { // the file grew since fstat
            if (cap > max) {
                free(b);
                close(fd);
                return fp_fail(err, FP_EFORMAT, "%s/%s: larger than %zu bytes", dir, rel, max);
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                close(fd);
                return fp_fail(err, FP_ENOMEM, "%s/%s: out of memory", dir, rel);
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
            return fp_fail(err, FP_EIO, "%s/%s: read error: %s", dir, rel, strerror(saved));
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
