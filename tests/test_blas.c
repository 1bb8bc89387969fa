// The CPU backend names the OpenBLAS kernels its GEMMs run (`fedpriv --version`, results'
// "blas_kernels"): bit-identical reruns need the same kernels, so the name must be the
// kernels in use, which OPENBLAS_CORETYPE can choose, not a constant.
#include <cblas.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "tests/cli_run.h"

// The kernels `fedpriv --version` names, into name; 0 when FEDPRIV_BIN is unset.
static int cli_kernels(char *name, size_t n) {
    char out[512], err[512];
    const char *version[] = {"--version", NULL};
    int rc = cli_run(version, out, err, sizeof out);
    if (rc < 0)
        return 0;
    ck_assert_int_eq(rc, 0);
    const char *k = strstr(out, "OpenBLAS ");
    ck_assert_msg(k != NULL, "--version does not name the BLAS kernels: %s", out);
    char fmt[32];
    snprintf(fmt, sizeof fmt, "OpenBLAS %%%zus kernels", n - 1);
    ck_assert_int_eq(sscanf(k, fmt, name), 1);
    return 1;
}

START_TEST(blas_kernels_named_are_those_in_use) {
    char name[64];
    if (!cli_kernels(name, sizeof name)) {
        printf("SKIP: blas_kernels_named_are_those_in_use (FEDPRIV_BIN unset)\n");
        return;
    }
    // The CLI in this environment and the library in this process run the same kernels.
    ck_assert_str_eq(name, backend_cpu_blas_kernels());
    if (!strstr(openblas_get_config(), "DYNAMIC_ARCH")) {   // one set of kernels: nothing to choose
        printf("blas: OpenBLAS built for one CPU (%s): no other kernels to name\n", openblas_get_config());
        return;
    }
    // Control: another choice of kernels is named as such (Core2's are in every x86-64
    // OpenBLAS built for many CPUs, and no machine picks them by itself any more).
    const char *was = getenv("OPENBLAS_CORETYPE");
    char *saved = was ? strdup(was) : NULL;
    ck_assert_int_eq(setenv("OPENBLAS_CORETYPE", "Core2", 1), 0);
    char forced[64];
    ck_assert(cli_kernels(forced, sizeof forced));
    if (saved)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
    free(saved);
    ck_assert_msg(strcmp(forced, "Core2") == 0, "OPENBLAS_CORETYPE=Core2, but --version names %s", forced);
}
END_TEST

Suite *suite_blas(void) {
    Suite *s = suite_create("blas");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, blas_kernels_named_are_those_in_use);
    suite_add_tcase(s, tc);
    return s;
}
