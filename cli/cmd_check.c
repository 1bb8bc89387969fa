// `fedpriv check DIR --baseline FILE.json [--format text|json|junit|github]`: the bounds
// a CI declares over a matrix run (runner/check.h). Exit 0 when every bound holds, 1
// when one is violated, 2 on bad input (an unreadable run, a malformed baseline, a
// name in it that exists nowhere).
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/jsonv.h"
#include "runner/check.h"

int cmd_check(int argc, char **argv) {
    const char *dir = NULL, *baseline = NULL, *format = "text";
    int n_dirs = 0;
    const CliOption opts[] = {
        {"--baseline", NULL, CLI_STRING, &baseline, .value = "FILE.json", .help = "the declared bounds"},
        {"--format", NULL, CLI_STRING, &format, .value = "text|json|junit|github",
         .help = "text    one line per comparison (default)\n"
                 "json    one object with every comparison, for scripts\n"
                 "junit   JUnit XML, one test case per comparison (CI test reports)\n"
                 "github  GitHub Actions annotations: ::error lines for the violations\n"
                 "        (only those are percent-encoded; other lines are plain)"},
    };
    const CliCommand c = {
        .cmd = "check",
        .synopsis = "fedpriv check DIR --baseline FILE.json [--format text|json|junit|github]",
        .about = "  Checks the matrix run in DIR (fedpriv matrix ... --out DIR) against the bounds in\n"
                 "  FILE.json, e.g. \"DLG SSIM under spm with epsilon <= 1 at most 0.2\" or \"model accuracy\n"
                 "  without defense at least 0.8\" (format: docs/report.md). Prints every comparison with the\n"
                 "  observed value and its margin to the bound, then the verdict.\n"
                 "  Exit 0 when all bounds hold, 1 when any is violated, 2 on bad input (an unreadable run,\n"
                 "  a malformed baseline, an unknown defense, attack, metric or variant).",
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
        .positional = &dir,
        .max_positional = 1,
        .n_positional = &n_dirs,
        .positional_names = "one run folder DIR",
    };
    int rc = cli_options_parse(&c, argc, argv);
    if (rc != CLI_PARSED)
        return rc;
    if (!dir || !baseline) {
        fp_print_line(stderr, "fedpriv check: the run folder DIR and --baseline FILE.json are required");
        return CLI_EXIT_BADINPUT;
    }
    int fmt = check_format_parse(format);
    if (fmt < 0) {
        fp_print_line(stderr, "fedpriv check: --format must be text, json, junit or github, got \"%.64s\"", format);
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
    HtmlBuf out;
    hb_init(&out);
    check_format(&r, (CheckFormat)fmt, dir, baseline, &out);
    rc = r.n_violations ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    if (out.oom || fwrite(out.s ? out.s : "", 1, out.len, stdout) != out.len || fflush(stdout) != 0) {
        fp_print_line(stderr, "fedpriv check: cannot write the result");
        rc = CLI_EXIT_FAIL;
    }
    hb_free(&out);
    check_result_free(&r);
    return rc;
}
