// `fedpriv train --config FILE.json [--out result.json] [--device cpu|cuda] [--threads N] [--secure-rng]`:
// trains a federation under a defense and writes the result JSON (resolved config,
// seed, backend, per-round accuracy and loss and privacy, final figures, wall time).
// Under mpirun/srun (fedpriv built with MPI) the ranks run one federation together, each
// forming a share of every round's uploads (fl/fed.h); rank 0 writes the result and the
// model, the other ranks print nothing but their own errors.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/comm.h"
#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "defenses/registry.h"
#include "fl/experiment.h"
#include "models/onnx.h"

// An error: rank 0 says it; another rank says it only when it is its own (a failure
// every rank met in the same place, bad input above all, is said once).
static int train_error(const Comm *comm, const FpError *err, int own) {
    if (comm_rank(comm) == 0)
        return cli_report_error("train", err);
    if (own)
        fp_print_line(stderr, "fedpriv train (rank %d of %d): %s", comm_rank(comm), comm_size(comm), err->msg);
    return cli_error_status(err);
}

// Every rank must hold the federation before the first round's exchange: one that could
// not (a data file missing on its node) stops them all. The lowest failing rank says why
// (rank 0 names it when it is another). Returns 0 when every rank is ready, else the
// exit status.
static int ranks_ready(Comm *comm, FpStatus st, FpError *err) {
    int me = comm_rank(comm), first = INT_MAX;
    FpError e2 = {0};
    if (comm_min_int(comm, st == FP_OK ? INT_MAX : me * 16 + (int)st, &first, &e2) != FP_OK)
        return train_error(comm, &e2, 1);
    if (first == INT_MAX)
        return 0;
    if (st != FP_OK)
        return train_error(comm, err, first / 16 == me);
    fp_fail(err, (FpStatus)(first % 16), "rank %d of %d could not load the experiment (" FED_RANK_FAILED_NOTE ")",
            first / 16, comm_size(comm));
    return train_error(comm, err, 0);
}

static int train_run(Comm *comm, const char *config, const char *out, const char *device, const char *save,
                     int threads, int secure_rng) {
    FpError err = {0};
    int lead = comm_rank(comm) == 0;
    cJSON *root = NULL;
    // Outputs are checked before the work (by rank 0, which writes them): a read-only
    // folder or a directory named as the result fails now, not after training.
    FpStatus st = FP_OK;
    if (lead && out)
        st = fp_check_writable_file(out, &err);
    char save_onnx_buf[4200];
    const char *save_onnx = save && onnx_sibling(save, save_onnx_buf, sizeof save_onnx_buf) ? save_onnx_buf : NULL;
    if (st == FP_OK && lead && save)
        st = fp_check_writable_file(save, &err);
    if (st == FP_OK && lead && save_onnx)
        st = fp_check_writable_file(save_onnx, &err);
    if (st == FP_OK)
        st = jv_load_file(config, &root, &err);
    if (st == FP_OK) // paths in the config are relative to its folder
        st = experiment_resolve_paths(root, config, &err);
    // No output may replace one of the run's inputs (`--save-model model.safetensors`
    // beside the imported model.onnx would write model.onnx): refused before the work.
    const char *const outputs[3][2] = {{"--save-model", save}, {"--save-model", save_onnx}, {"--out", out}};
    for (int i = 0; st == FP_OK && lead && i < 3; i++) {
        char what[4400];
        if (outputs[i][1] && outputs[i][1][0] &&
            experiment_output_replaces_input(root, config, outputs[i][1], what, sizeof what))
            st = i == 1 ? fp_fail(&err, FP_EPARAM, "--save-model %s: its ONNX file %s would replace the run's input "
                                  "(%s): choose another name", save, save_onnx, what)
                        : fp_fail(&err, FP_EPARAM, "%s %s would replace the run's input (%s): choose another name",
                                  outputs[i][0], outputs[i][1], what);
    }
    int loaded = st == FP_OK; // these messages name their file already
    // --secure-rng overrides the config's "rng" key (docs/security.md).
    if (st == FP_OK && secure_rng && cJSON_IsObject(root)) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "rng");
        cJSON_AddStringToObject(root, "rng", "secure");
    }
    // One file serves `fedpriv train` and `fedpriv attack`: its "attack" object is the
    // attack's, which training does not run; said once, by the rank that speaks.
    static const char *const extra[] = {"attack", NULL};
    if (st == FP_OK && lead && cJSON_GetObjectItemCaseSensitive(root, "attack"))
        fp_print_line(stderr, "fedpriv train: %s: attack: ignored (train runs no attack; fedpriv attack reads it)",
                      config);
    Experiment ex;
    memset(&ex, 0, sizeof ex);
    Federation *f = NULL;
    if (st == FP_OK && (st = experiment_load_at(root, config, extra, device, threads, defense_find, &ex, &err)) == FP_OK) {
        ex.comm = comm;
        if (!(f = experiment_federation(&ex, NULL, 0, &err)))
            st = err.code != FP_OK ? err.code : FP_ENOMEM;
    }
    // A model with no ONNX form (resnet18, lstm) saves its safetensors alone: said now.
    FpError why = {0};
    if (st == FP_OK && lead && save_onnx && !model_has_onnx_export(ex.model, &why))
        fp_print_line(stderr, "fedpriv train: warning: --save-model: %s; %s is not written", why.msg, save_onnx);
    // Messages name the JSON path; say which file it is in.
    if (st != FP_OK && loaded)
        fp_error_prefix(&err, config);
    int rc = ranks_ready(comm, st, &err);
    if (rc != 0) {
        fed_free(f);
        experiment_free(&ex);
        cJSON_Delete(root);
        return rc;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = fed_run(f, 0, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "command", "train");
    if (st == FP_OK)   // an account that ran out of memory fails the run, never a NaN in config
        st = experiment_describe(&ex, f, res, &err);
    else
        experiment_describe(&ex, NULL, res, NULL);
    cJSON_AddItemToObject(res, "rounds", fed_rounds_json(f, 1));
    rc = CLI_EXIT_OK;
    if (st == FP_OK) {
        cJSON_AddStringToObject(res, "status", "ok");
        const FedRoundResult *last = fed_round_result(f, fed_rounds_done(f) - 1);
        cJSON *fin = cJSON_AddObjectToObject(res, "final");
        if (ex.test->n_classes)
            cJSON_AddNumberToObject(fin, "test_accuracy", last->test_accuracy);
        cJSON_AddNumberToObject(fin, "test_loss", last->test_loss);
        if (!ex.test->n_classes)
            cJSON_AddNumberToObject(fin, "test_mae", last->test_mae);
        cJSON_AddItemToObject(fin, "privacy", privacy_record_json(&last->privacy));
        // Finite but exploded (fl/experiment.h): the status stays "ok" (the run finished),
        // the result and stderr say what its accuracy is.
        cJSON *boom = fed_loss_explosion_json(f, ex.test->n_classes);
        if (boom) {
            if (lead)
                fp_print_line(stderr, "fedpriv train: warning: %s",
                              cJSON_GetObjectItemCaseSensitive(boom, "message")->valuestring);
            cJSON_AddItemToArray(cJSON_AddArrayToObject(res, "warnings"), cJSON_Duplicate(boom, 1));
            cJSON_AddItemToObject(fin, "loss_exploded", boom);
        }
        if (lead && save && model_save_by_name(ex.model, save, &err) != FP_OK)
            rc = cli_report_error("train", &err);
    } else if (st == FP_EDIVERGED) {
        cJSON_AddStringToObject(res, "status", "diverged");
        cJSON_AddNumberToObject(res, "diverged_round", fed_rounds_done(f));
        cJSON_AddNullToObject(res, "final");
        if (lead)
            fp_print_line(stderr, "fedpriv train: %s", err.msg);
        rc = CLI_EXIT_FAIL;
    } else {
        // A rank's own failure is said by that rank (the others name it in theirs).
        rc = train_error(comm, &err, !strstr(err.msg, FED_RANK_FAILED_NOTE));
        cJSON_Delete(res);
        res = NULL;
    }
    if (res && lead) {
        cJSON_AddNumberToObject(res, "wall_seconds", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
        if (out) {
            if (jv_write_file_atomic(out, res, &err) != FP_OK)
                rc = cli_report_error("train", &err);
        } else {
            char *text = jnum_print(res, 1);
            puts(text);
            free(text);
        }
    }
    cJSON_Delete(res);
    fed_free(f);
    experiment_free(&ex);
    cJSON_Delete(root);
    return rc;
}

int cmd_train(int argc, char **argv) {
    const char *config = NULL, *out = NULL, *device = NULL, *save = NULL;
    long long threads = 0;
    int secure_rng = 0;
    const CliOption opts[] = {
        {"--config", NULL, CLI_STRING, &config, .value = "FILE.json", .help = "the experiment (an \"attack\" object in it is ignored)"},
        {"--out", NULL, CLI_STRING, &out, .value = "result.json", .help = "where the result goes (default: stdout)"},
        {"--device", NULL, CLI_STRING, &device, .value = "cpu|cuda", .help = "where to compute (default: the config's)"},
        {"--threads", NULL, CLI_INT, &threads, .value = "N", .help = "worker threads", .lo = 1, .hi = FED_MAX_THREADS},
        {"--save-model", NULL, CLI_STRING, &save, .value = "FILE", .help = "also save the trained model: FILE.safetensors writes the weights as safetensors and the model as "
                 "FILE.onnx (docs/bring-your-own.md); another name the fedpriv weight file (fedpriv forecast --model). "
                 "A name that is one of the run's inputs is refused"},
        {"--secure-rng", NULL, CLI_FLAG, &secure_rng, .help = "draw the defense's noise from ChaCha20 keyed by getrandom\n"
                                                          "(as \"rng\": \"secure\" in the config)"},
    };
    const CliCommand c = {
        .cmd = "train",
        .synopsis = "fedpriv train --config FILE.json [--out result.json] [--device cpu|cuda] [--threads N]\n"
                    "                     [--save-model FILE] [--secure-rng]",
        .about = "  Trains a simulated federation as the config describes and writes the result JSON\n"
                 "  (default: stdout). Progress goes to stderr. Exit 0 on success, 1 if training\n"
                 "  diverged (the result says so), 2 on bad input. The config may hold an \"attack\"\n"
                 "  object, so one file serves fedpriv train and fedpriv attack: train says once that it\n"
                 "  ignores it.\n"
                 "  Under mpirun -n R (built with MPI) R ranks share every round's clients; the\n"
                 "  result is bit-identical to one process, and rank 0 writes it (docs/cluster.md).",
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
    };
    int rc = cli_options_parse(&c, argc, argv);
    if (rc != CLI_PARSED)
        return rc;
    if (!config) {
        fp_print_line(stderr, "fedpriv train: --config FILE.json is required");
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    Comm *comm = NULL;
    if (comm_create(&comm, &err) != FP_OK)
        return cli_report_error("train", &err);
    rc = train_run(comm, config, out, device, save, (int)threads, secure_rng);
    comm_free(comm);
    return rc;
}
