// A scratch folder for the end-to-end CLI tests, and the files they write into it and
// read back. The folder's path lives in the calling file (these helpers take it as an
// argument, so that the header defines no state); failures fail the calling test.
#ifndef FEDPRIV_TESTS_SCRATCH_H
#define FEDPRIV_TESTS_SCRATCH_H

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// Makes a fresh folder $TMPDIR/fedpriv-TAG-XXXXXX (TMPDIR unset or empty: /tmp); its
// path into dir (n bytes).
static inline void scratch_make(char *dir, size_t n, const char *tag) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, n, "%s/fedpriv-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static inline int scratch_remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    if (flag == FTW_DP)
        chmod(path, 0700); // a read-only folder a test made must still go (links are not followed)
    return remove(path);
}

// Removes dir and everything below it, read-only folders included.
static inline void scratch_remove(const char *dir) {
    chmod(dir, 0700);
    nftw(dir, scratch_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

// "dir/name" into buf (n bytes); returns buf.
static inline const char *scratch_path(const char *dir, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

// Replaces the file at path with text.
static inline void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

// The file's first cap - 1 bytes into buf, NUL-terminated; returns buf.
static inline char *read_text(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

// The same into a malloc'd buffer of cap bytes (free it).
static inline char *read_text_alloc(const char *path, size_t cap) {
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    return read_text(path, buf, cap);
}

// A small, learnable CSV classification set at path (3 classes, 4 features, 240 rows).
static inline void write_tiny_csv(const char *path) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c,d,label\n");
    for (int i = 0; i < 240; i++) {
        int y = i % 3;
        fprintf(f, "%g,%g,%g,%g,%d\n", y + 0.1 * (i % 7), 0.5 * y - 0.05 * (i % 5), ((i * 7) % 11) / 11.0,
                (double)(y == 2), y);
    }
    ck_assert_int_eq(fclose(f), 0);
}

#endif
