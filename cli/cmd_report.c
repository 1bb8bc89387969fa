// `fedpriv report DIR [-o report.html] [--title TEXT] [--max-images N] [--summary]`: the
// HTML report of a matrix run (reports/html.h): one self-contained page that works
// offline; --summary prints its verdict table as text instead.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/files.h"
#include "reports/html.h"

int cmd_report(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *title = NULL;
    long long max_images = 0;
    int summary = 0;
    int n_dirs = 0;
    const CliOption opts[] = {
        {"--out", "-o", CLI_STRING, &out, .value = "report.html", .help = "the page to write (default DIR/report.html)"},
        {"--title", NULL, CLI_STRING, &title, .value = "TEXT", .help = "the page's title"},
        {"--max-images", NULL, CLI_INT, &max_images, .value = "N", .help = "reconstructed images shown per cell",
         .lo = 1, .hi = 1000},
        {"--summary", NULL, CLI_FLAG, &summary,
         .help = "print the page's verdict table as text on stdout instead (one line per defense setting, one word "
                 "per observer and attack family, the rule that decides it)"},
    };
    const CliCommand c = {
        .cmd = "report",
        .synopsis = "fedpriv report DIR [-o report.html] [--title TEXT] [--max-images N] [--summary]",
        .about = "  Writes one self-contained HTML page (default DIR/report.html) from the matrix run in DIR\n"
                 "  (fedpriv matrix ... --out DIR): the attack x defense table with a colour scale, privacy\n"
                 "  spent (nominal and sound), accuracy per round and ROC curves (inline SVG), reconstructed\n"
                 "  images (inline PNG), audit findings from DIR/audit/*.json, and run metadata.\n"
                 "  Exit 0 on success (problems such as missing images are listed in the page and counted on\n"
                 "  stderr), 2 on bad input.",
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
    if (!dir) {
        fp_print_line(stderr, "fedpriv report: the run folder DIR is required (fedpriv report --help)");
        return CLI_EXIT_BADINPUT;
    }
    if (summary && (out || title || max_images)) {
        fp_print_line(stderr, "fedpriv report: --summary prints the verdict as text; -o, --title and --max-images are for the page");
        return CLI_EXIT_BADINPUT;
    }
    if (summary) {
        FpError serr = {0};
        char *text = NULL;
        if (report_summary_text(dir, &text, &serr) != FP_OK)
            return cli_report_error("report", &serr);
        fputs(text, stdout); // every string from the run is escaped (reports/verdict.h)
        free(text);
        return CLI_EXIT_OK;
    }
    char def[4200];
    if (!out) {
        snprintf(def, sizeof def, "%s/report.html", dir);
        out = def;
    }
    FpError err = {0};
    int problems = 0;
    ReportOptions ro = {.title = title, .max_images = (int)max_images};
    if (fp_check_writable_file(out, &err) != FP_OK || report_write_html(dir, out, &ro, &problems, &err) != FP_OK)
        return cli_report_error("report", &err);
    fp_print_line(stderr, "report: wrote %s%s", out, problems ? "" : " (no problems)");
    if (problems)
        fp_print_line(stderr, "report: %d problem%s listed at the top of the page (missing or invalid artifacts, failed cells)",
                problems, problems == 1 ? "" : "s");
    return CLI_EXIT_OK;
}
