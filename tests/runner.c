// The one test runner: every suite from tests/test_*.c (collected by the Makefile into
// suites.h). FP_TEST_SUITE=name runs only the suites whose name contains it.
//
// FP_TEST_JOBS=N (make test sets it to the number of CPUs) runs up to N suites at once,
// each in its own process with its own SRunner; each suite's output is printed whole
// when it ends, and the last line sums them in Check's format: "100%: Checks: 621,
// Failures: 0, Errors: 0", followed by every failure's line again. Two kinds of suites
// run alone after the others, so that a neighbour's load cannot fail them: those whose
// checks time the machine (an ETA against planted sleeps, a refusal that must be fast),
// and those that start MPI jobs of 2 and 3 ranks, sized for the machine's cores
// (LeakSanitizer's stop-the-world tracer was seen to crash at exit in oversubscribed
// jobs; tests/test_cluster_cli.c). With N = 1
// (the default) every suite runs in one SRunner, and Check prints the summary itself.
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"

#define FP_SUITE(fn) Suite *fn(void);
#include "suites.h"
#undef FP_SUITE

typedef Suite *(*SuiteFn)(void);
static const struct { const char *name; SuiteFn fn; } all_suites[] = {
#define FP_SUITE(fn) {#fn, fn},
#include "suites.h"
#undef FP_SUITE
};
enum { N_SUITES = sizeof all_suites / sizeof all_suites[0] };

// Suites that run with nothing beside them: they measure wall time, or start MPI jobs.
static const char *const alone_suites[] = {"suite_progress_eta", "suite_hostile_limits", "suite_cluster",
                                           "suite_cluster_cli"};

static int runs_alone(const char *name) {
    for (size_t i = 0; i < sizeof alone_suites / sizeof alone_suites[0]; i++)
        if (strcmp(name, alone_suites[i]) == 0)
            return 1;
    return 0;
}

static int selected(size_t i, const char *only) { return !only || strstr(all_suites[i].name, only); }

static int run_in_one_runner(const char *only) {
    SRunner *runner = NULL;
    for (size_t i = 0; i < N_SUITES; i++) {
        if (!selected(i, only))
            continue;
        Suite *s = all_suites[i].fn();
        if (!runner)
            runner = srunner_create(s);
        else
            srunner_add_suite(runner, s);
    }
    if (!runner) {
        fprintf(stderr, "no test suite matches FP_TEST_SUITE=%s\n", only ? only : "");
        return 1;
    }
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}

// What a suite's process reports back through its pipe.
typedef struct { int run, failures, errors; } Counts;

typedef struct {
    pid_t pid;
    size_t suite;
    int result_fd;  // read end of its counts pipe
    char log[64];   // its output file, printed when it ends
    double started; // monotonic seconds when it was started
} Job;

// In the child: suite i, output into the log file, its counts into result_fd.
static void child_run(size_t i, int result_fd, const char *log) {
    FILE *f = freopen(log, "w", stdout);
    if (!f || dup2(fileno(stdout), STDERR_FILENO) < 0)
        _exit(3);
    setvbuf(stdout, NULL, _IOLBF, 0);
    SRunner *r = srunner_create(all_suites[i].fn());
    srunner_run_all(r, CK_NORMAL);
    Counts c = {srunner_ntests_run(r), 0, 0};
    TestResult **res = srunner_results(r);
    for (int k = 0; k < c.run; k++) {
        c.failures += tr_rtype(res[k]) == CK_FAILURE;
        c.errors += tr_rtype(res[k]) == CK_ERROR;
    }
    free(res);
    srunner_free(r);
    fflush(stdout);
    ssize_t w = write(result_fd, &c, sizeof c);
    _exit(w == (ssize_t)sizeof c ? 0 : 3);
}

static int start_job(Job *j, size_t i) {
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(j->log, sizeof j->log, "%.40s/fp-suite-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int lfd = mkstemp(j->log);
    if (lfd < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    close(lfd);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        unlink(j->log);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        child_run(i, fds[1], j->log);
    }
    close(fds[1]);
    j->pid = pid; // j->log already names its output file
    j->suite = i;
    j->result_fd = fds[0];
    j->started = fp_monotonic_seconds();
    return 0;
}

// The ended job's output, printed whole; its failure lines (those after Check's summary
// line) appended to failures; its counts added to total. 0, or -1 when the suite's
// process died without reporting (counted as an error).
static int finish_job(Job *j, int status, Counts *total, char **failures, size_t *fail_len, double *seconds) {
    seconds[j->suite] = fp_monotonic_seconds() - j->started;
    Counts c = {0, 0, 0};
    ssize_t got = read(j->result_fd, &c, sizeof c);
    close(j->result_fd);
    FILE *f = fopen(j->log, "r");
    char line[8192];
    int after_summary = 0;
    while (f && fgets(line, sizeof line, f)) {
        fputs(line, stdout);
        if (strstr(line, "%: Checks: "))
            after_summary = 1;
        else if (after_summary) {
            size_t n = strlen(line);
            char *grown = realloc(*failures, *fail_len + n + 1);
            if (grown) {
                memcpy(grown + *fail_len, line, n + 1);
                *failures = grown;
                *fail_len += n;
            }
        }
    }
    if (f)
        fclose(f);
    unlink(j->log);
    printf("%s: %.1f s\n", all_suites[j->suite].name, seconds[j->suite]);
    fflush(stdout);
    if (got != (ssize_t)sizeof c || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("%s: the suite's process ended without its counts (status %d)\n", all_suites[j->suite].name, status);
        total->errors++;
        total->run++;
        return -1;
    }
    total->run += c.run;
    total->failures += c.failures;
    total->errors += c.errors;
    return 0;
}

// Runs the suites of order[0..n) with up to jobs processes at once.
static void run_pool(const size_t *order, size_t n, int jobs, Counts *total, char **failures, size_t *fail_len,
                     double *seconds) {
    Job *running = calloc((size_t)jobs, sizeof *running);
    size_t next = 0;
    int active = 0;
    while (running && (next < n || active > 0)) {
        while (next < n && active < jobs) {
            int s = 0;
            while (running[s].pid)
                s++;
            if (start_job(&running[s], order[next]) != 0) {
                printf("%s: cannot start its process: %s\n", all_suites[order[next]].name, strerror(errno));
                total->errors++;
                total->run++;
            } else
                active++;
            next++;
        }
        if (active == 0)
            continue;
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int s = 0; s < jobs; s++)
            if (running[s].pid == pid) {
                finish_job(&running[s], status, total, failures, fail_len, seconds);
                running[s].pid = 0;
                active--;
            }
    }
    free(running);
}

// The slowest suites and the whole run's wall time: where make test spends its time.
static void print_slowest(const double *seconds, double wall) {
    size_t order[N_SUITES];
    for (size_t i = 0; i < N_SUITES; i++)
        order[i] = i;
    for (size_t i = 1; i < N_SUITES; i++) // insertion sort, slowest first
        for (size_t k = i; k > 0 && seconds[order[k]] > seconds[order[k - 1]]; k--) {
            size_t t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    printf("Wall time %.0f s; slowest suites:", wall);
    for (size_t i = 0; i < 8 && i < N_SUITES && seconds[order[i]] > 0; i++)
        printf("%s %s %.0f s", i ? "," : "", all_suites[order[i]].name, seconds[order[i]]);
    printf("\n");
}

int main(void) {
    const char *only = getenv("FP_TEST_SUITE");
    const char *jobs_env = getenv("FP_TEST_JOBS");
    int jobs = jobs_env && *jobs_env ? atoi(jobs_env) : 1;
    if (jobs <= 1)
        return run_in_one_runner(only);
    size_t order[N_SUITES], n_free = 0, alone[N_SUITES], n_alone = 0;
    for (size_t i = 0; i < N_SUITES; i++)
        if (selected(i, only)) {
            if (runs_alone(all_suites[i].name))
                alone[n_alone++] = i;
            else
                order[n_free++] = i;
        }
    if (n_free + n_alone == 0) {
        fprintf(stderr, "no test suite matches FP_TEST_SUITE=%s\n", only ? only : "");
        return 1;
    }
    printf("Running %zu suites, up to %d at once (FP_TEST_JOBS), then %zu alone (timed or MPI)\n", n_free + n_alone,
           jobs, n_alone);
    Counts total = {0, 0, 0};
    char *failures = NULL;
    size_t fail_len = 0;
    double seconds[N_SUITES] = {0}, began = fp_monotonic_seconds();
    run_pool(order, n_free, jobs, &total, &failures, &fail_len, seconds);
    run_pool(alone, n_alone, 1, &total, &failures, &fail_len, seconds);
    print_slowest(seconds, fp_monotonic_seconds() - began);
    int passed = total.run - total.failures - total.errors;
    printf("%d%%: Checks: %d, Failures: %d, Errors: %d\n", total.run ? (int)(100.0 * passed / total.run) : 0, total.run,
           total.failures, total.errors);
    if (failures)
        fputs(failures, stdout);
    free(failures);
    return total.failures + total.errors == 0 ? 0 : 1;
}
