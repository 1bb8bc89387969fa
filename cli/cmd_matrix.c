// `fedpriv matrix FILE.json --out DIR [--jobs N] [--device cpu|cuda] [--threads N] [--verbose]`:
// runs every defense setting of a matrix file against every attack in it, one JSON per
// cell in DIR/cells/, the index in DIR/results.json (runner/matrix.h). A rerun skips
// finished cells, so an interrupted run resumes where it stopped.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/jsonv.h"
#include "runner/matrix.h"

static void usage(FILE *f) {
    fprintf(f, "usage: fedpriv matrix FILE.json --out DIR [--jobs N] [--device cpu|cuda] [--threads N] [--verbose]\n"
               "  Trains the federation under each defense setting of FILE.json (each value of each\n"
               "  epsilon list) and runs every attack of the file against it. One JSON per cell in\n"
               "  DIR/cells/, the index with each cell's status in DIR/results.json. A rerun skips the\n"
               "  cells already finished, so a killed run resumes. --jobs N runs N cells at once in\n"
               "  separate processes (same results). Progress and the ETA go to stderr.\n"
               "  Then: fedpriv report DIR; fedpriv check DIR --baseline FILE.json.\n"
               "  Exit 0 when every cell finished (done or diverged), 1 when a cell failed, 2 on bad input.\n"
               "  The file format is in docs/report.md.\n");
}

int cmd_matrix(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    const char *file = NULL, *out = NULL, *device = NULL;
    long long jobs = 1, threads = 0;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--out") == 0 && v)
            out = argv[++i];
        else if (strcmp(a, "--device") == 0 && v)
            device = argv[++i];
        else if (strcmp(a, "--verbose") == 0)
            verbose = 1;
        else if (strcmp(a, "--jobs") == 0 || strcmp(a, "--threads") == 0) {
            long long *dst = a[2] == 'j' ? &jobs : &threads;
            if (!cli_parse_int_range("matrix", a, v, 1, a[2] == 'j' ? 256 : FED_MAX_THREADS, dst))
                return CLI_EXIT_BADINPUT;
            i++;
        } else if (a[0] != '-' && !file)
            file = a;
        else {
            fp_print_line(stderr, "fedpriv matrix: unknown or incomplete option \"%s\" (fedpriv matrix --help)", a);
            return CLI_EXIT_BADINPUT;
        }
    }
    if (!file || !out) {
        fp_print_line(stderr, "fedpriv matrix: a matrix FILE.json and --out DIR are required (fedpriv matrix --help)");
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    cJSON *root = NULL;
    if (matrix_check_out(out, &err) != FP_OK || jv_load_file(file, &root, &err) != FP_OK)
        return cli_report_error("matrix", &err);
    Matrix *m = NULL;
    MatrixOptions mo = {.device = device, .threads = (int)threads, .file = file, .progress = stderr};
    FpStatus st = matrix_load(root, &mo, &m, &err);
    cJSON_Delete(root);
    if (st != FP_OK) {
        fp_error_prefix(&err, file);
        return cli_report_error("matrix", &err);
    }
    MatrixRunOptions ro = {.jobs = (int)jobs, .verbose = verbose, .progress = stderr};
    MatrixSummary sum;
    st = matrix_run(m, out, &ro, &sum, &err);
    matrix_free(m);
    if (st != FP_OK)
        return cli_report_error("matrix", &err);
    fp_print_line(stderr, "matrix: %d cells: %d done, %d diverged, %d failed (%d finished earlier); %.1f s. Results in %s/results.json",
            sum.cells, sum.done, sum.diverged, sum.failed, sum.skipped, sum.seconds, out);
    return sum.failed > 0 || sum.pending > 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
