// The one test runner: every suite from tests/test_*.c (collected by the Makefile into
// suites.h) runs in one SRunner, so Check prints a single summary line for the run.
// FP_TEST_SUITE=name runs only that suite.
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FP_SUITE(fn) Suite *fn(void);
#include "suites.h"
#undef FP_SUITE

typedef Suite *(*SuiteFn)(void);
static const struct { const char *name; SuiteFn fn; } all_suites[] = {
#define FP_SUITE(fn) {#fn, fn},
#include "suites.h"
#undef FP_SUITE
};

int main(void) {
    const char *only = getenv("FP_TEST_SUITE");
    SRunner *runner = NULL;
    size_t n = sizeof all_suites / sizeof all_suites[0];
    for (size_t i = 0; i < n; i++) {
        if (only && !strstr(all_suites[i].name, only))
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
