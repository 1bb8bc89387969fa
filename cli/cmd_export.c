// `fedpriv export DIR [--format csv|jsonl] [-o FILE]`: a matrix run as one tidy table
// (reports/export.h), on standard output or written atomically to FILE.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "reports/export.h"

static void usage(FILE *f) {
    fprintf(f, "usage: fedpriv export DIR [--format csv|jsonl] [-o FILE]\n"
               "  Writes the matrix run in DIR (fedpriv matrix ... --out DIR) as one tidy table: one row per\n"
               "  cell (defense setting x seed) x attack x metric, with the columns cell, setting, defense,\n"
               "  variant, params, epsilon, epsilon_nominal, epsilon_sound, guarantee, unit, seed, status,\n"
               "  attack, metric, value (docs/report.md). CSV (default) writes infinities as inf / -inf and\n"
               "  no value as an empty field; JSONL writes them as \"inf\" / \"-inf\" and null.\n"
               "  Standard output by default. Exit 0 on success, 2 on bad input.\n");
}

int cmd_export(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    const char *dir = NULL, *out = NULL, *format = "csv";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--out") == 0) && v)
            out = argv[++i];
        else if (strcmp(a, "--format") == 0 && v)
            format = argv[++i];
        else if (a[0] != '-' && !dir)
            dir = a;
        else {
            fp_print_line(stderr, "fedpriv export: unknown or incomplete option \"%s\" (fedpriv export --help)", a);
            return CLI_EXIT_BADINPUT;
        }
    }
    if (!dir) {
        fp_print_line(stderr, "fedpriv export: the run folder DIR is required (fedpriv export --help)");
        return CLI_EXIT_BADINPUT;
    }
    ExportFormat fmt;
    if (strcmp(format, "csv") == 0)
        fmt = EXPORT_CSV;
    else if (strcmp(format, "jsonl") == 0)
        fmt = EXPORT_JSONL;
    else {
        fp_print_line(stderr, "fedpriv export: --format must be csv or jsonl, got \"%.64s\"", format);
        return CLI_EXIT_BADINPUT;
    }
    HtmlBuf b;
    hb_init(&b);
    FpError err = {0};
    FpStatus st = report_export(dir, fmt, &b, &err);
    if (st == FP_OK && out)
        st = report_write_file_atomic(out, b.s ? b.s : "", b.len, &err);
    else if (st == FP_OK && (fwrite(b.s ? b.s : "", 1, b.len, stdout) != b.len || fflush(stdout) != 0))
        st = fp_fail(&err, FP_EIO, "standard output: write failed");
    hb_free(&b);
    if (st != FP_OK)
        return cli_report_error("export", &err);
    return CLI_EXIT_OK;
}
