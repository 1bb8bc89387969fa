// `fedpriv report DIR [-o report.html] [--title TEXT] [--max-images N] [--summary]`: the
// HTML report of a matrix run (reports/html.h): one self-contained page that works
// offline; --summary prints its verdict table as text instead.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/files.h"
#include "reports/html.h"

static void usage(FILE *f) {
    fprintf(f, "usage: fedpriv report DIR [-o report.html] [--title TEXT] [--max-images N] [--summary]\n"
               "  Writes one self-contained HTML page (default DIR/report.html) from the matrix run in DIR\n"
               "  (fedpriv matrix ... --out DIR): the attack x defense table with a colour scale, privacy\n"
               "  spent (nominal and sound), accuracy per round and ROC curves (inline SVG), reconstructed\n"
               "  images (inline PNG), audit findings from DIR/audit/*.json, and run metadata.\n"
               "  --summary prints the page's verdict table as text on stdout instead (one line per\n"
               "  defense setting, one word per observer and attack family, the rule that decides it).\n"
               "  Exit 0 on success (problems such as missing images are listed in the page and counted on\n"
               "  stderr), 2 on bad input.\n");
}

int cmd_report(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    const char *dir = NULL, *out = NULL, *title = NULL;
    long long max_images = 0;
    int summary = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--out") == 0) && v)
            out = argv[++i];
        else if (strcmp(a, "--summary") == 0)
            summary = 1;
        else if (strcmp(a, "--title") == 0 && v)
            title = argv[++i];
        else if (strcmp(a, "--max-images") == 0) {
            if (!cli_parse_int_range("report", a, v, 1, 1000, &max_images))
                return CLI_EXIT_BADINPUT;
            i++;
        } else if (a[0] != '-' && !dir)
            dir = a;
        else {
            fp_print_line(stderr, "fedpriv report: unknown or incomplete option \"%s\" (fedpriv report --help)", a);
            return CLI_EXIT_BADINPUT;
        }
    }
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
