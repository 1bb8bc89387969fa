// Helpers shared by the libFuzzer targets in fuzz/ (one target per input parser; see
// docs/security.md for how to build and run them).
//
// Most fedpriv parsers take a path, not a buffer, so a target writes its input to a
// file first. The file is a memfd (an anonymous in-memory file) reached through
// /proc/self/fd/N: no disk traffic, nothing left behind, and gzopen/fopen open it as an
// ordinary file. One memfd per slot is created on first use and truncated before every
// write, so a target does not leak descriptors over millions of runs.
#ifndef FEDPRIV_FUZZ_UTIL_H
#define FEDPRIV_FUZZ_UTIL_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_SLOTS 4

// Writes data[0..size) to memfd slot (0 .. FUZZ_SLOTS-1) and returns its path
// (/proc/self/fd/N, a static buffer per slot). Aborts on a system failure: that is a
// harness problem, not a finding.
static inline const char *fuzz_file(int slot, const uint8_t *data, size_t size) {
    static int fds[FUZZ_SLOTS] = {-1, -1, -1, -1};
    static char paths[FUZZ_SLOTS][64];
    if (fds[slot] < 0) {
        fds[slot] = memfd_create("fedpriv-fuzz", 0);
        if (fds[slot] < 0)
            abort();
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
    }
    if (ftruncate(fds[slot], 0) != 0)
        abort();
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fds[slot], data + done, size - done, (off_t)done);
        if (w <= 0)
            abort();
        done += (size_t)w;
    }
    return paths[slot];
}

// A private temporary directory under $TMPDIR (or /tmp), created on first use. The
// targets that use it remove its contents in an atexit handler; a killed run leaves
// it behind for the system's tmp cleaner.
static inline const char *fuzz_tmpdir(void) {
    static char dir[64];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/fedpriv-fuzz-XXXXXX", base && strlen(base) < 30 ? base : "/tmp");
        if (!mkdtemp(dir))
            abort();
    }
    return dir;
}

// An error line as fedpriv prints it: not empty, one line of printable text (the
// formatter of core/status.h escapes control characters, whatever the input held).
static inline void fuzz_check_message(const char *msg) {
    if (!msg[0])
        abort();
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            abort();
}

// A tree jv_load_file accepted: no object holds a key twice (the strict layer of
// core/jsonv_text.c refuses duplicates; cJSON alone keeps both and finds the first).
static inline void fuzz_check_tree(const cJSON *j) {
    for (; j; j = j->next) {
        if (cJSON_IsObject(j))
            for (const cJSON *a = j->child; a; a = a->next)
                for (const cJSON *b = a->next; b; b = b->next)
                    if (strcmp(a->string, b->string) == 0)
                        abort();
        if (j->child)
            fuzz_check_tree(j->child);
    }
}

// Writes a whole file (for fixed helper files next to the fuzzed one).
static inline void fuzz_write(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
}

#endif
