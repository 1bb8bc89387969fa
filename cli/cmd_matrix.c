// `fedpriv matrix FILE.json --out DIR [--jobs N] [--shard K/N|slurm] [--device cpu|cuda]
// [--threads N] [--keep-diverged] [--verbose]`: runs every defense setting of a matrix
// file against every attack in it, one JSON per cell in DIR/cells/, the index in
// DIR/results.json (runner/matrix.h). A rerun skips finished cells, so an interrupted run
// resumes where it stopped (and retries a diverged cell once); DIR belongs to one matrix. --shard runs one shard of a job array (runner/shard.h); under mpirun the
// ranks share the cells (runner/matrix_ranks.h). `fedpriv matrix --status DIR` says
// which cells are done, running, missing or failed (runner/matrix_status.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/comm.h"
#include "core/jsonv.h"
#include "runner/matrix.h"
#include "runner/matrix_ranks.h"
#include "runner/matrix_status.h"
#include "runner/shard.h"

static int print_status(const char *dir, int json) {
    MatrixStatus s;
    FpError err = {0};
    if (matrix_status_load(dir, &s, &err) != FP_OK)
        return cli_report_error("matrix", &err);
    int finished = s.counts[CELL_STATE_DONE] + s.counts[CELL_STATE_DIVERGED];
    // Labels, claims (host, job) and messages come from files anyone with access to DIR
    // can write: every line goes through the escaping formatter (core/status.h).
    if (json) {
        cJSON *j = matrix_status_json(&s, dir);
        char *text = cJSON_Print(j), *safe = text ? fp_escape_json(text) : NULL;
        printf("%s\n", safe ? safe : "{}");
        free(safe);
        free(text);
        cJSON_Delete(j);
    } else {
        fp_print_line(stdout, "%s: %d cells: %d done, %d diverged, %d failed, %d running, %d missing", dir, s.n,
                      s.counts[CELL_STATE_DONE], s.counts[CELL_STATE_DIVERGED], s.counts[CELL_STATE_FAILED],
                      s.counts[CELL_STATE_RUNNING], s.counts[CELL_STATE_MISSING]);
        static const CellState order[] = {CELL_STATE_RUNNING, CELL_STATE_FAILED, CELL_STATE_MISSING};
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < s.n; i++)
                if (s.cells[i].state == order[k])
                    fp_print_line(stdout, "  %-8s %s%s%s%s", cell_state_name(order[k]), s.cells[i].label,
                                  s.cells[i].detail[0] ? " (" : "", s.cells[i].detail, s.cells[i].detail[0] ? ")" : "");
    }
    int all = finished == s.n;
    matrix_status_free(&s);
    return all ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

// The scheduler's job, for the claims: "slurm 1234_5" in a job array, "slurm 1234" in a job.
static void job_label(char *buf, size_t n) {
    const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID"), *j = getenv("SLURM_JOB_ID");
    if (aj && at)
        snprintf(buf, n, "slurm %.30s_%.12s", aj, at);
    else if (j)
        snprintf(buf, n, "slurm %.30s", j);
    else
        buf[0] = 0;
}

static const char ABOUT[] =
    "  Trains the federation under each defense setting of FILE.json (each value of each\n"
    "  epsilon list) and runs every attack of the file against it. One JSON per cell in\n"
    "  DIR/cells/, the index with each cell's status in DIR/results.json. A rerun skips the\n"
    "  cells already finished, so a killed run resumes; a cell that diverged is run once more\n"
    "  on the next rerun (its result then stands), unless --keep-diverged. --jobs N runs N\n"
    "  cells at once in separate processes (same results). Progress and the ETA go to stderr.\n"
    "  DIR belongs to one matrix, known by its \"name\" key or else by FILE's full path: the\n"
    "  same FILE edited (another epsilon, attack or seed) extends DIR; another matrix is\n"
    "  refused (exit 2): give it another --out.\n"
    "  --shard K/N runs only shard K of N (1 <= K <= N): the cells are split by estimated\n"
    "  cost, the same way by every shard, so N jobs (a Slurm array: --shard slurm reads\n"
    "  SLURM_ARRAY_TASK_ID/MIN/MAX/COUNT/STEP) cover the matrix once, writing into one\n"
    "  shared DIR (NFS is fine). Under mpirun (fedpriv built with MPI) rank 0 hands the\n"
    "  cells out, largest first, and runs cells too. Same cells whichever way.\n"
    "  --status DIR lists the cells that are not finished (running where, failed why,\n"
    "  missing) and the counts; --json prints all cells as JSON. Exit 0 when every cell is\n"
    "  finished, 1 otherwise.\n"
    "  Then: fedpriv report DIR; fedpriv check DIR --baseline FILE.json.\n"
    "  Exit 0 when every cell of this run finished (done or diverged), 1 when a cell failed,\n"
    "  2 on bad input. The file format is in docs/report.md, clusters in docs/cluster.md.";

int cmd_matrix(int argc, char **argv) {
    const char *file = NULL, *out = NULL, *device = NULL, *shard = NULL, *status_dir = NULL;
    long long jobs = 1, threads = 0;
    int verbose = 0, json = 0, keep_diverged = 0, n_files = 0;
    const CliOption opts[] = {
        {"--out", NULL, CLI_STRING, &out, .value = "DIR", .help = "the run folder (made with its parents)"},
        {"--jobs", NULL, CLI_INT, &jobs, .value = "N", .help = "cells run at once, in separate processes", .lo = 1,
         .hi = 256},
        {"--shard", NULL, CLI_STRING, &shard, .value = "K/N|slurm", .help = "run shard K of N only (above)"},
        {"--device", NULL, CLI_STRING, &device, .value = "cpu|cuda", .help = "where to compute (default: the file's)"},
        {"--threads", NULL, CLI_INT, &threads, .value = "N", .help = "worker threads per cell", .lo = 1,
         .hi = FED_MAX_THREADS},
        {"--keep-diverged", NULL, CLI_FLAG, &keep_diverged, .help = "a rerun keeps diverged cells as they are"},
        {"--verbose", NULL, CLI_FLAG, &verbose, .help = "more progress on stderr"},
        {"--status", NULL, CLI_STRING, &status_dir, .value = "DIR", .help = "say which cells of DIR are not finished"},
        {"--json", NULL, CLI_FLAG, &json, .help = "with --status: every cell as JSON"},
    };
    const CliCommand c = {
        .cmd = "matrix",
        .synopsis = "fedpriv matrix FILE.json --out DIR [--jobs N] [--shard K/N|slurm] [--device cpu|cuda]\n"
                    "                      [--threads N] [--keep-diverged] [--verbose]\n"
                    "       mpirun -n R fedpriv matrix FILE.json --out DIR [...]\n"
                    "       fedpriv matrix --status DIR [--json]",
        .about = ABOUT,
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
        .positional = &file,
        .max_positional = 1,
        .n_positional = &n_files,
        .positional_names = "one matrix FILE.json",
    };
    int prc = cli_options_parse(&c, argc, argv);
    if (prc != CLI_PARSED)
        return prc;
    if (status_dir) {
        if (file || out || shard || device || jobs != 1 || threads || verbose || keep_diverged) {
            fp_print_line(stderr, "fedpriv matrix: --status DIR takes only --json (fedpriv matrix --help)");
            return CLI_EXIT_BADINPUT;
        }
        return print_status(status_dir, json);
    }
    if (json) {
        fp_print_line(stderr, "fedpriv matrix: --json goes with --status DIR (fedpriv matrix --help)");
        return CLI_EXIT_BADINPUT;
    }
    if (!file || !out) {
        fp_print_line(stderr, "fedpriv matrix: a matrix FILE.json and --out DIR are required (fedpriv matrix --help)");
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    ShardSpec sh = {0, 1};
    if (shard) {
        SlurmArrayEnv env = {getenv("SLURM_ARRAY_TASK_ID"), getenv("SLURM_ARRAY_TASK_MIN"),
                             getenv("SLURM_ARRAY_TASK_MAX"), getenv("SLURM_ARRAY_TASK_COUNT"),
                             getenv("SLURM_ARRAY_TASK_STEP")};
        FpStatus st = strcmp(shard, "slurm") == 0 ? shard_from_slurm(&env, &sh, &err) : shard_parse(shard, &sh, &err);
        if (st != FP_OK)
            return cli_report_error("matrix", &err);
    }
    Comm *comm = NULL;
    if (comm_create(&comm, &err) != FP_OK)
        return cli_report_error("matrix", &err);
    int rank = comm_rank(comm);
    cJSON *root = NULL;
    Matrix *m = NULL;
    FpStatus st = matrix_check_out(out, &err);
    if (st == FP_OK)
        st = jv_load_file(file, &root, &err);
    if (st == FP_OK) // before the data are loaded: that may take long
        st = matrix_check_owner(out, root, file, &err);
    if (st == FP_OK) // paths in the matrix file are relative to its folder
        st = experiment_resolve_paths(root, file, &err);
    if (st == FP_OK) {
        MatrixOptions mo = {.device = device, .threads = (int)threads, .file = file, .progress = stderr};
        st = matrix_load(root, &mo, &m, &err);
        if (st != FP_OK)
            fp_error_prefix(&err, file);
    }
    cJSON_Delete(root);
    // Every rank loaded the same file; one that could not (a missing data file on one
    // node) stops them all, and rank 0 says why.
    st = matrix_ranks_agree(comm, st, &err);
    if (st != FP_OK) {
        int rc = rank == 0 ? cli_report_error("matrix", &err) : cli_error_status(&err);
        matrix_free(m);
        comm_free(comm);
        return rc;
    }
    char job[64];
    job_label(job, sizeof job);
    MatrixRunOptions ro = {.jobs = (int)jobs, .verbose = verbose, .progress = stderr, .shard_index = sh.index,
                           .shard_count = sh.count, .comm = comm, .job = job, .keep_diverged = keep_diverged};
    MatrixSummary sum;
    st = matrix_run(m, out, &ro, &sum, &err);
    matrix_free(m);
    int rc;
    if (st != FP_OK)
        rc = rank == 0 ? cli_report_error("matrix", &err) : cli_error_status(&err);
    else {
        if (rank == 0 && sh.count > 1)
            fp_print_line(stderr, "matrix: shard %d/%d: %d cells: %d done, %d diverged, %d failed (%d finished earlier); "
                            "%.1f s. The whole matrix: %d of %d cells finished (fedpriv matrix --status %s)",
                    sh.index + 1, sh.count, sum.mine, sum.done, sum.diverged, sum.failed, sum.skipped, sum.seconds,
                    sum.matrix_finished, sum.cells, out);
        else if (rank == 0)
            fp_print_line(stderr, "matrix: %d cells: %d done, %d diverged, %d failed (%d finished earlier); %.1f s. "
                            "Results in %s/results.json",
                    sum.cells, sum.done, sum.diverged, sum.failed, sum.skipped, sum.seconds, out);
        rc = sum.failed > 0 || sum.pending > 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    }
    comm_free(comm);
    return rc;
}
