// fedpriv: how much does a differential-privacy defense for federated learning
// actually protect, and what does it cost? One binary, one subcommand per task.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/backend.h"
#include "core/comm.h"
#include "core/suggest.h"
#include "core/version.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} Command;

static const Command commands[] = {
    {"train", cmd_train, "train a federation under a defense: --config FILE.json [--out result.json]"},
    {"list", cmd_list, "list models, datasets, defenses and attacks"},
    {"attack", cmd_attack, "run one attack against a defense: NAME --config FILE.json --out DIR"},
    {"accountant", cmd_accountant, "(epsilon, delta) by the RDP accountant, or sigma for a target epsilon"},
    {"forecast", cmd_forecast, "power-load reference forecasts and a saved model's error per zone: --config FILE.json"},
    {"audit", cmd_audit, "audit a local-DP mechanism: bias, variance and an epsilon lower bound"},
    {"audit-training", cmd_audit_training,
     "audit a whole training run with canary clients: --config FILE.json --out DIR (epsilon lower bound)"},
    {"audit-scores", cmd_audit_scores,
     "audit scores from any framework: --scores FILE (membership ROC, or canary/run epsilon lower bounds)"},
    {"ssim", cmd_ssim, "SSIM, PSNR and MSE of two PNG images: A.png B.png [--json]"},
    {"matrix", cmd_matrix, "run an attack x defense matrix: FILE.json --out DIR [--jobs N] [--shard K/N|slurm]; "
                           "--status DIR"},
    {"report", cmd_report, "the HTML report of a matrix run: DIR [-o report.html]"},
    {"check", cmd_check, "check a matrix run against declared bounds (CI): DIR --baseline FILE.json"},
    {"export", cmd_export, "a matrix run as one tidy CSV or JSONL table: DIR [--format csv|jsonl] [-o FILE]"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: fedpriv COMMAND [options]   (fedpriv COMMAND --help for details; fedpriv --version)\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
}

// cJSON reports a failed allocation only by returning NULL, and every result fedpriv
// writes is built by cJSON_Add* calls that do not check it: a member would silently go
// missing from results.json, a cell or an audit result that then reads "done". So a
// cJSON allocation that fails ends the process with one line (exit 1). Nothing is left
// half-written: the atomic writers serialise before they create their temporary file,
// and a rerun resumes (cells, claims and partial folders of a dead process are cleaned).
static void *json_malloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fp_print_line(stderr, "fedpriv: out of memory (%zu bytes for a JSON document)", n);
        exit(CLI_EXIT_FAIL);
    }
    return p;
}

int main(int argc, char **argv) {
    cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = json_malloc, .free_fn = free});
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_BADINPUT;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("fedpriv %s (%s)%s; OpenBLAS %s kernels\n", FEDPRIV_VERSION, fedpriv_build_describe(),
               comm_mpi_built() ? " with MPI" : "", backend_cpu_blas_kernels());
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            int rc = cli_reject_repeated_options(commands[i].name, argc - 1, argv + 1);
            return rc ? rc : commands[i].run(argc - 1, argv + 1);
        }
    char hint[FP_SUGGEST_MAX_LEN + 32];
    FpSuggest s;
    fp_suggest_begin(&s, argv[1]);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fp_suggest_add(&s, commands[i].name);
    fp_print_line(stderr, "fedpriv: unknown command \"%s\" (%sfedpriv --help lists them)", argv[1],
                  fp_did_you_mean(&s, "", " ", hint, sizeof hint));
    return CLI_EXIT_BADINPUT;
}
