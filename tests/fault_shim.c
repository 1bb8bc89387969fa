// Fault injection for the fault suite (tests/test_fault.c): an LD_PRELOAD library that
// makes the n-th allocation, or the n-th output call, of a fedpriv process fail, the way
// SQLite's test suite fails each allocation and each write in turn. Test code only: the
// product binary is run unchanged, with this library preloaded.
//
// Environment:
//   FEDPRIV_FAULT=alloc:N    the N-th counted allocation returns NULL (errno ENOMEM)
//   FEDPRIV_FAULT=io:N       the N-th counted output call fails (below)
//   FEDPRIV_FAULT=silent:N   control: the N-th counted write "succeeds" having written only
//                            its first half (a broken program the checks must catch)
//   unset, or anything else  nothing fails; the calls are only counted
//   FEDPRIV_FAULT_REPORT=F   at exit, F gets "alloc A io B\n" (the calls counted); when the
//                            fault fired, first a line "fired KIND N FUNCTION OBJECT+0xOFFSET"
//                            then " from 0x..." for the callers further up in the same object
//                            (addr2line -f -i -e OBJECT OFFSET... names them)
// Each fault fires once (the N-th call only; the calls after it succeed).
//
// What is counted. Only calls made from fedpriv's own code (the main executable's text)
// and from the libraries that report a failure to their caller: libcjson (NULL from a
// parse or print), libpng (png_error, a longjmp fedpriv catches) and zlib (Z_MEM_ERROR).
// The caller is the return address of the interposed call, so a library's internal calls
// are not counted and never fail: OpenBLAS, libvips/GLib (g_malloc aborts by design),
// FFTW, Open MPI and glibc's own calls (fopen's FILE, strerror's buffer, stdio's write()
// under fwrite). This is the limit of the method: fedpriv cannot survive those libraries'
// allocation failures, and the suite does not pretend to test that.
//   Allocations: malloc, calloc, realloc, aligned_alloc, posix_memalign, memalign,
//   strdup, strndup.
//   Output: fwrite, fputs, fputc, putc, putchar, puts, fprintf, vfprintf, printf, vprintf,
//   fflush, fclose (of a stream open for writing), write, pwrite, fsync, fdatasync,
//   rename, renameat. Standard error (fd 2) is never failed: the one error line must
//   reach the test.
// How an output call fails: as on a full or failing disk. fwrite, fputs, puts and the
// printf family write the first half of their data, set the stream's error indicator
// and return a short count or EOF (errno ENOSPC); fputc/putc/putchar write nothing;
// fflush sets the error indicator and returns EOF without flushing; fclose discards the
// unwritten buffer, closes and returns EOF; write and pwrite return -1 (ENOSPC); fsync,
// fdatasync, rename and renameat return -1 (EIO) and do nothing.
//
// Processes. The count is per process: a forked child (the matrix runner's --jobs N
// workers) neither counts nor fails anything, so the suite runs matrices with --jobs 1,
// where every cell runs in the one process counted.
//
// Under AddressSanitizer (make SANITIZE=1) the allocator calls go through to ASan's, found
// with dlsym(RTLD_NEXT) like glibc's; the executable's libasan then loads after this
// library, so the test sets ASAN_OPTIONS=verify_asan_link_order=0. dlsym itself may
// allocate while the real functions are being looked up: those requests are served from a
// static buffer that free() recognises.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

enum { KIND_ALLOC, KIND_IO, N_KINDS };
static const char *const kind_names[N_KINDS] = {"alloc", "io"};

// ---- the real functions ------------------------------------------------------------------

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static void *(*real_aligned_alloc)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static char *(*real_strdup)(const char *);
static char *(*real_strndup)(const char *, size_t);
static size_t (*real_fwrite)(const void *, size_t, size_t, FILE *);
static int (*real_fputs)(const char *, FILE *);
static int (*real_fputc)(int, FILE *);
static int (*real_putc)(int, FILE *);
static int (*real_vfprintf)(FILE *, const char *, va_list);
static int (*real_fflush)(FILE *);
static int (*real_fclose)(FILE *);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_open)(const char *, int, ...);

// While dlsym runs (it may call calloc for its error state), allocations come from here.
static _Alignas(64) char boot[16384];
static size_t boot_used;
static __thread int resolving __attribute__((tls_model("initial-exec")));

static void *boot_alloc(size_t n) {
    n = (n + 63) & ~(size_t)63;
    size_t at = __atomic_fetch_add(&boot_used, n, __ATOMIC_RELAXED);
    return at + n <= sizeof boot ? boot + at : NULL;
}

static int in_boot(const void *p) { return (const char *)p >= boot && (const char *)p < boot + sizeof boot; }

#ifndef _IO_NO_WRITES
#define _IO_NO_WRITES 0x0008 // glibc's flag of a stream not open for writing (libio.h)
#endif

#define RESOLVE(name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name)

static void resolve(void) {
    if (real_free)
        return;
    resolving = 1;
    RESOLVE(malloc);
    RESOLVE(calloc);
    RESOLVE(realloc);
    RESOLVE(aligned_alloc);
    RESOLVE(posix_memalign);
    RESOLVE(memalign);
    RESOLVE(strdup);
    RESOLVE(strndup);
    RESOLVE(fwrite);
    RESOLVE(fputs);
    RESOLVE(fputc);
    RESOLVE(putc);
    RESOLVE(vfprintf);
    RESOLVE(fflush);
    RESOLVE(fclose);
    RESOLVE(write);
    RESOLVE(pwrite);
    RESOLVE(fsync);
    RESOLVE(fdatasync);
    RESOLVE(rename);
    RESOLVE(renameat);
    RESOLVE(open);
    RESOLVE(free); // last: its being set means the rest are
    resolving = 0;
}

// 0 while this thread is inside resolve() (allocations then come from the boot buffer).
static int ensure(void) {
    if (!real_free) {
        if (resolving)
            return 0;
        resolve();
    }
    return real_free != NULL;
}

// ---- which calls count -------------------------------------------------------------------

typedef struct {
    uintptr_t lo, hi;
    const char *object; // "" for the main executable
    uintptr_t base;
} Range;

static Range ranges[32];
static int n_ranges;
static int ready;          // set once the constructor has read the environment
static int child;          // set in a forked child: nothing counts there
static long fire_kind = -1, fire_at;
static int fire_silent;
static long seen[N_KINDS];
static char report_path[4096];

static const char *const counted_libs[] = {"libcjson.so", "libpng", "libz.so", NULL};

static int add_object(struct dl_phdr_info *info, size_t size, void *data) {
    int *first = data;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    int take = *first;
    *first = 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (int i = 0; !take && counted_libs[i]; i++)
        take = strncmp(base, counted_libs[i], strlen(counted_libs[i])) == 0;
    if (!take)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && n_ranges < (int)(sizeof ranges / sizeof ranges[0]); i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
            ranges[n_ranges++] = (Range){info->dlpi_addr + ph->p_vaddr, info->dlpi_addr + ph->p_vaddr + ph->p_memsz,
                                         name, info->dlpi_addr};
    }
    return 0;
}

static void in_child(void) { child = 1; }

static void write_report(void) {
    if (!report_path[0] || child)
        return;
    int fd = real_open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char line[128];
    int n = snprintf(line, sizeof line, "alloc %ld io %ld\n", __atomic_load_n(&seen[KIND_ALLOC], __ATOMIC_RELAXED),
                     __atomic_load_n(&seen[KIND_IO], __ATOMIC_RELAXED));
    real_write(fd, line, (size_t)n);
    close(fd);
}

__attribute__((constructor(101))) static void shim_init(void) {
    resolve();
    const char *mode = getenv("FEDPRIV_FAULT"), *report = getenv("FEDPRIV_FAULT_REPORT");
    if (report)
        snprintf(report_path, sizeof report_path, "%s", report);
    if (mode) {
        static const struct {
            const char *prefix;
            int kind, silent;
        } modes[] = {{"alloc:", KIND_ALLOC, 0}, {"io:", KIND_IO, 0}, {"silent:", KIND_IO, 1}};
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            if (strncmp(mode, modes[i].prefix, strlen(modes[i].prefix)) == 0) {
                fire_kind = modes[i].kind;
                fire_silent = modes[i].silent;
                fire_at = strtol(mode + strlen(modes[i].prefix), NULL, 10);
            }
    }
    int first = 1;
    dl_iterate_phdr(add_object, &first);
    void *warm[2];
    backtrace(warm, 2); // loads the unwinder now, not inside a failing call
    pthread_atfork(NULL, NULL, in_child);
    atexit(write_report);
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

static const Range *counted_caller(const void *ret) {
    uintptr_t a = (uintptr_t)ret;
    for (int i = 0; i < n_ranges; i++)
        if (a >= ranges[i].lo && a < ranges[i].hi)
            return &ranges[i];
    return NULL;
}

// 1 when this call is to fail: it is counted and it is the N-th of its kind.
static int should_fail(int kind, const char *fn, const void *ret) {
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE) || child || resolving)
        return 0;
    const Range *r = counted_caller(ret);
    if (!r)
        return 0;
    long n = __atomic_add_fetch(&seen[kind], 1, __ATOMIC_RELAXED);
    if (kind != fire_kind || n != fire_at)
        return 0;
    if (report_path[0]) {
        int fd = real_open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            char line[4800];
            int len = snprintf(line, sizeof line, "fired %s %ld %s %s+0x%lx", kind_names[kind], n, fn,
                               r->object[0] ? r->object : "fedpriv", (unsigned long)((uintptr_t)ret - r->base));
            void *frames[12];
            int depth = backtrace(frames, 12); // loaded by the constructor: no allocation here
            for (int i = 2; i < depth && len < (int)sizeof line - 40; i++)
                if (counted_caller(frames[i]) == r)
                    len += snprintf(line + len, sizeof line - (size_t)len, " from 0x%lx",
                                    (unsigned long)((uintptr_t)frames[i] - 1 - r->base));
            line[len++] = '\n';
            real_write(fd, line, (size_t)len);
            close(fd);
        }
    }
    return 1;
}

#define CALLER __builtin_return_address(0)

// ---- allocation --------------------------------------------------------------------------

void *malloc(size_t n) {
    if (!ensure())
        return boot_alloc(n);
    if (should_fail(KIND_ALLOC, "malloc", CALLER)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_malloc(n);
}

void *calloc(size_t k, size_t n) {
    if (!ensure())
        return boot_alloc(k * n); // the buffer is static and never reused, so zeroed
    if (should_fail(KIND_ALLOC, "calloc", CALLER)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_calloc(k, n);
}

void *realloc(void *p, size_t n) {
    if (!ensure())
        return NULL;
    if (in_boot(p)) { // one of dlsym's: move it to the real heap
        void *q = malloc(n);
        if (q)
            memcpy(q, p, n < (size_t)(boot + sizeof boot - (char *)p) ? n : (size_t)(boot + sizeof boot - (char *)p));
        return q;
    }
    if (should_fail(KIND_ALLOC, "realloc", CALLER)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_realloc(p, n);
}

void free(void *p) {
    if (!p || in_boot(p) || !ensure())
        return;
    real_free(p);
}

void *aligned_alloc(size_t a, size_t n) {
    resolve();
    if (should_fail(KIND_ALLOC, "aligned_alloc", CALLER)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_aligned_alloc(a, n);
}

int posix_memalign(void **out, size_t a, size_t n) {
    resolve();
    if (should_fail(KIND_ALLOC, "posix_memalign", CALLER))
        return ENOMEM;
    return real_posix_memalign(out, a, n);
}

void *memalign(size_t a, size_t n) {
    resolve();
    if (should_fail(KIND_ALLOC, "memalign", CALLER)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_memalign(a, n);
}

char *strdup(const char *s) {
    resolve();
    if (should_fail(KIND_ALLOC, "strdup", CALLER)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_strdup(s);
}

char *strndup(const char *s, size_t n) {
    resolve();
    if (should_fail(KIND_ALLOC, "strndup", CALLER)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_strndup(s, n);
}

// ---- output ------------------------------------------------------------------------------

static int is_stderr(FILE *f) { return f == stderr || (f && fileno(f) == 2); }

static void stream_failed(FILE *f) {
    f->_flags |= _IO_ERR_SEEN; // glibc's error indicator, as its own failed write sets it
    errno = ENOSPC;
}

// Writes the first half of data to f (or all of it in the silent control); returns 1
// when the caller is to report success (the silent control).
static int write_half(FILE *f, const void *data, size_t n) {
    if (fire_silent) {
        real_fwrite(data, 1, n / 2, f);
        return 1;
    }
    real_fwrite(data, 1, n / 2, f);
    stream_failed(f);
    return 0;
}

size_t fwrite(const void *p, size_t size, size_t k, FILE *f) {
    resolve();
    if (is_stderr(f) || !should_fail(KIND_IO, "fwrite", CALLER))
        return real_fwrite(p, size, k, f);
    if (size == 1) {
        if (write_half(f, p, k))
            return k;
        return k / 2;
    }
    size_t half = k / 2;
    real_fwrite(p, size, half, f);
    if (fire_silent)
        return k;
    stream_failed(f);
    return half;
}

int fputs(const char *s, FILE *f) {
    resolve();
    if (is_stderr(f) || !should_fail(KIND_IO, "fputs", CALLER))
        return real_fputs(s, f);
    return write_half(f, s, strlen(s)) ? 1 : EOF;
}

int puts(const char *s) {
    resolve();
    if (!should_fail(KIND_IO, "puts", CALLER))
        return real_fputs(s, stdout) == EOF || real_fputc('\n', stdout) == EOF ? EOF : 1;
    return write_half(stdout, s, strlen(s)) ? 1 : EOF;
}

static int fail_char(FILE *f, int c) {
    if (fire_silent)
        return (unsigned char)c;
    stream_failed(f);
    return EOF;
}

int fputc(int c, FILE *f) {
    resolve();
    if (is_stderr(f) || !should_fail(KIND_IO, "fputc", CALLER))
        return real_fputc(c, f);
    return fail_char(f, c);
}

int putc(int c, FILE *f) {
    resolve();
    if (is_stderr(f) || !should_fail(KIND_IO, "putc", CALLER))
        return real_putc(c, f);
    return fail_char(f, c);
}

int putchar(int c) {
    resolve();
    if (!should_fail(KIND_IO, "putchar", CALLER))
        return real_fputc(c, stdout);
    return fail_char(stdout, c);
}

// The printf family, formatted here so that half the text can be written.
static int vprint_to(FILE *f, const char *fn, const void *ret, const char *fmt, va_list ap) {
    if (is_stderr(f) || !should_fail(KIND_IO, fn, ret))
        return real_vfprintf(f, fmt, ap);
    char buf[8192];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    return write_half(f, buf, len) ? n : -1;
}

int vfprintf(FILE *f, const char *fmt, va_list ap) {
    resolve();
    return vprint_to(f, "vfprintf", CALLER, fmt, ap);
}

int fprintf(FILE *f, const char *fmt, ...) {
    resolve();
    va_list ap;
    va_start(ap, fmt);
    int n = vprint_to(f, "fprintf", CALLER, fmt, ap);
    va_end(ap);
    return n;
}

int vprintf(const char *fmt, va_list ap) {
    resolve();
    return vprint_to(stdout, "vprintf", CALLER, fmt, ap);
}

int printf(const char *fmt, ...) {
    resolve();
    va_list ap;
    va_start(ap, fmt);
    int n = vprint_to(stdout, "printf", CALLER, fmt, ap);
    va_end(ap);
    return n;
}

int fflush(FILE *f) {
    resolve();
    if (is_stderr(f) || !should_fail(KIND_IO, "fflush", CALLER))
        return real_fflush(f);
    if (fire_silent)
        return 0;
    if (f)
        stream_failed(f);
    errno = EIO;
    return EOF;
}

int fclose(FILE *f) {
    resolve();
    if (!f || is_stderr(f) || (f->_flags & _IO_NO_WRITES) || !should_fail(KIND_IO, "fclose", CALLER))
        return real_fclose(f);
    __fpurge(f); // what was not written yet is lost
    real_fclose(f);
    if (fire_silent)
        return 0;
    errno = EIO;
    return EOF;
}

ssize_t write(int fd, const void *p, size_t n) {
    resolve();
    if (fd == 2 || !should_fail(KIND_IO, "write", CALLER))
        return real_write(fd, p, n);
    if (fire_silent)
        return real_write(fd, p, n / 2) < 0 ? -1 : (ssize_t)n;
    errno = ENOSPC;
    return -1;
}

ssize_t pwrite(int fd, const void *p, size_t n, off_t at) {
    resolve();
    if (fd == 2 || !should_fail(KIND_IO, "pwrite", CALLER))
        return real_pwrite(fd, p, n, at);
    if (fire_silent)
        return real_pwrite(fd, p, n / 2, at) < 0 ? -1 : (ssize_t)n;
    errno = ENOSPC;
    return -1;
}

static int fail_eio(void) {
    if (fire_silent)
        return 0;
    errno = EIO;
    return -1;
}

int fsync(int fd) {
    resolve();
    return should_fail(KIND_IO, "fsync", CALLER) ? fail_eio() : real_fsync(fd);
}

int fdatasync(int fd) {
    resolve();
    return should_fail(KIND_IO, "fdatasync", CALLER) ? fail_eio() : real_fdatasync(fd);
}

int rename(const char *from, const char *to) {
    resolve();
    if (!should_fail(KIND_IO, "rename", CALLER))
        return real_rename(from, to);
    return fire_silent ? real_rename(from, to) : fail_eio();
}

int renameat(int dfrom, const char *from, int dto, const char *to) {
    resolve();
    if (!should_fail(KIND_IO, "renameat", CALLER))
        return real_renameat(dfrom, from, dto, to);
    return fire_silent ? real_renameat(dfrom, from, dto, to) : fail_eio();
}
