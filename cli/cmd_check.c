// `fedpriv check DIR --baseline FILE.json`: the bounds a CI declares over a matrix run
// (runner/check.h). Exit 0 when every bound holds, 1 with the list of violations, 2 on
// bad input (an unreadable run or a malformed baseline).
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/jsonv.h"
#include "runner/check.h"

static void usage(FILE *f) {
    fprintf(f, "usage: fedpriv check DIR --baseline FILE.json\n"
               "  Checks the matrix run in DIR (fedpriv matrix ... --out DIR) against the bounds in\n"
               "  FILE.json, e.g. \"DLG SSIM under spm with epsilon <= 1 at most 0.2\" or \"model accuracy\n"
               "  without defense at least 0.8\" (format: docs/report.md). Prints each violation.\n"
               "  Exit 0 when all bounds hold, 1 when any is violated, 2 on bad input.\n");
}

int cmd_check(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    const char *dir = NULL, *baseline = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--baseline") == 0 && v)
            baseline = argv[++i];
        else if (a[0] != '-' && !dir)
            dir = a;
        else {
            fp_print_line(stderr, "fedpriv check: unknown or incomplete option \"%s\" (fedpriv check --help)", a);
            return CLI_EXIT_BADINPUT;
        }
    }
    if (!dir || !baseline) {
        fp_print_line(stderr, "fedpriv check: the run folder DIR and --baseline FILE.json are required");
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    cJSON *b = NULL;
    if (jv_load_file(baseline, &b, &err) != FP_OK)
        return cli_report_error("check", &err);
    CheckResult r;
    FpStatus st = check_baseline(dir, b, baseline, &r, &err);
    cJSON_Delete(b);
    if (st != FP_OK)
        return cli_report_error("check", &err);
    int rc = CLI_EXIT_OK;
    if (r.n_violations == 0)
        printf("check: all %d bound%s hold (%d comparison%s)\n", r.bounds, r.bounds == 1 ? "" : "s", r.evaluations,
               r.evaluations == 1 ? "" : "s");
    else {
        fp_print_line(stdout, "check: %d violation%s of %s (%d bound%s, %d comparison%s):", r.n_violations,
               r.n_violations == 1 ? "" : "s", baseline, r.bounds, r.bounds == 1 ? "" : "s", r.evaluations,
               r.evaluations == 1 ? "" : "s");
        for (int i = 0; i < r.n_violations; i++)
            fp_print_line(stdout, "  - %s", r.violations[i]);
        rc = CLI_EXIT_FAIL;
    }
    check_result_free(&r);
    return rc;
}
