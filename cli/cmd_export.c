// `fedpriv export DIR [--format csv|jsonl] [-o FILE]`: a matrix run as one tidy table
// (reports/export.h), on standard output or written atomically to FILE.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "reports/export.h"

int cmd_export(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    int n_dirs = 0, format = EXPORT_CSV;
    static const char *const formats[] = {"csv", "jsonl", NULL};
    _Static_assert(EXPORT_CSV == 0 && EXPORT_JSONL == 1, "formats lists the ExportFormat values in order");
    const CliOption opts[] = {
        {"--format", NULL, CLI_CHOICE, &format, .choices = formats, .help = "the table's format (default csv)"},
        {"--out", "-o", CLI_STRING, &out, .value = "FILE", .help = "write FILE (atomically) instead of standard output"},
    };
    const CliCommand c = {
        .cmd = "export",
        .synopsis = "fedpriv export DIR [--format csv|jsonl] [-o FILE]",
        .about = "  Writes the matrix run in DIR (fedpriv matrix ... --out DIR) as one tidy table: one row per\n"
                 "  cell (defense setting x seed) x attack x metric, with the columns cell, setting, defense,\n"
                 "  variant, params, epsilon, epsilon_nominal, epsilon_sound, guarantee, unit, seed, status,\n"
                 "  attack, metric, value (docs/report.md). CSV (default) writes infinities as inf / -inf and\n"
                 "  no value as an empty field; JSONL writes them as \"inf\" / \"-inf\" and null.\n"
                 "  Standard output by default. Exit 0 on success, 2 on bad input.",
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
        fp_print_line(stderr, "fedpriv export: the run folder DIR is required (fedpriv export --help)");
        return CLI_EXIT_BADINPUT;
    }
    ExportFormat fmt = (ExportFormat)format;
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
