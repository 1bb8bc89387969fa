// Runs the fedpriv binary from the end-to-end CLI tests, shared by every suite that does.
//
// The binary is the one named by env FEDPRIV_BIN (`make test` sets it); a test calls
// cli_run and skips itself when that returns -1 (cli_exec runs any program, e.g.
// mpirun). The child is started with fork/execv (no shell, so paths need no quoting);
// its stdout and stderr go to two temporary files that are read back, NUL-terminated
// and truncated to cap - 1 bytes, into out and err.
// Failing to create the temporary files, to fork, or to wait fails the calling test.
#ifndef FEDPRIV_TESTS_CLI_RUN_H
#define FEDPRIV_TESTS_CLI_RUN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLI_RUN_MAX_ARGS 62

// Runs argv[0] (a path) with argv (NULL-terminated), its stdout and stderr read back
// into out and err (cap bytes each); when usage is not NULL it receives that child's own
// resource usage (wait4: peak RSS of this process alone, not of every child reaped so far).
// Returns the exit status, 128 when the child was killed by a signal, 127 when it could
// not be executed.
static inline int cli_exec_usage(const char *const *argv, char *out, char *err, size_t cap,
                                 struct rusage *usage) {
    ck_assert_uint_gt(cap, 0);
    FILE *fo = tmpfile(), *fe = tmpfile();
    ck_assert_ptr_nonnull(fo);
    ck_assert_ptr_nonnull(fe);
    fflush(NULL); // the child must not inherit and re-flush the test's buffered output
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fileno(fo), 1);
        dup2(fileno(fe), 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    ck_assert_int_eq(wait4(pid, &status, 0, &ru), pid);
    if (usage)
        *usage = ru;
    FILE *fs[2] = {fo, fe};
    char *bufs[2] = {out, err};
    for (int k = 0; k < 2; k++) {
        rewind(fs[k]);
        size_t got = fread(bufs[k], 1, cap - 1, fs[k]);
        bufs[k][got] = '\0';
        fclose(fs[k]);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static inline int cli_exec(const char *const *argv, char *out, char *err, size_t cap) {
    return cli_exec_usage(argv, out, err, cap, NULL);
}

// Runs `$FEDPRIV_BIN args...` (args is NULL-terminated, a subcommand like "train" is its
// first element). out and err each hold cap bytes. Returns the exit status, 128 when the
// child was killed by a signal, 127 when it could not be executed, or -1 when FEDPRIV_BIN
// is unset or empty (out and err are then left untouched).
static inline int cli_run_usage(const char *const *args, char *out, char *err, size_t cap,
                                struct rusage *usage) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (!bin || !*bin)
        return -1;
    const char *argv[CLI_RUN_MAX_ARGS + 2];
    int n = 0;
    argv[n++] = bin;
    for (int i = 0; args[i]; i++) {
        ck_assert_msg(n <= CLI_RUN_MAX_ARGS, "cli_run: more than %d arguments", CLI_RUN_MAX_ARGS);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return cli_exec_usage(argv, out, err, cap, usage);
}

static inline int cli_run(const char *const *args, char *out, char *err, size_t cap) {
    return cli_run_usage(args, out, err, cap, NULL);
}

// The number of newline characters in s (a one-line error message counts 1).
static inline int cli_count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

// Whether FEDPRIV_BIN names a binary to run (the end-to-end tests skip without one).
static inline int cli_have_bin(void) {
    const char *bin = getenv("FEDPRIV_BIN");
    return bin && *bin;
}

// Returns from the calling test, saying so, when rc is cli_run's -1 (FEDPRIV_BIN unset).
#define SKIP_WITHOUT_BIN(rc)                                                                                  \
    do {                                                                                                       \
        if ((rc) == -1) {                                                                                      \
            fprintf(stderr, "SKIP: FEDPRIV_BIN is not set\n");                                                 \
            return;                                                                                            \
        }                                                                                                      \
    } while (0)
#define SKIP_UNLESS_BIN() SKIP_WITHOUT_BIN(cli_have_bin() ? 0 : -1)

// NULL when s is one line of printable text (no byte below 0x20 or DEL but the final
// newline), else what is wrong.
static inline const char *cli_unclean_line(const char *s) {
    if (cli_count_lines(s) != 1)
        return "not exactly one line";
    size_t n = strlen(s);
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return "a raw control byte";
    return NULL;
}

#define assert_one_clean_line(s)                                                                              \
    do {                                                                                                       \
        const char *why_ = cli_unclean_line(s);                                                                \
        ck_assert_msg(why_ == NULL, "%s in: %s", why_, s);                                                     \
    } while (0)

#endif
