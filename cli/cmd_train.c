// `fedpriv train --config FILE.json [--out result.json] [--device cpu|cuda] [--threads N] [--secure-rng]`:
// trains a federation under a defense and writes the result JSON (resolved config,
// seed, backend, per-round accuracy and loss and privacy, final figures, wall time).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "defenses/registry.h"
#include "fl/experiment.h"

static void usage(FILE *f) {
    fprintf(f, "usage: fedpriv train --config FILE.json [--out result.json] [--device cpu|cuda] [--threads N]\n"
               "                     [--save-model FILE] [--secure-rng]\n"
               "  Trains a simulated federation as the config describes and writes the result JSON\n"
               "  (default: stdout). Progress goes to stderr. Exit 0 on success, 1 if training\n"
               "  diverged (the result says so), 2 on bad input. --secure-rng: draw the defense's\n"
               "  noise from ChaCha20 keyed by getrandom (as \"rng\": \"secure\" in the config).\n");
}

int cmd_train(int argc, char **argv) {
    const char *config = NULL, *out = NULL, *device = NULL, *save = NULL;
    long long threads = 0;
    int secure_rng = 0;
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--config") == 0 && v)
            config = argv[++i];
        else if (strcmp(a, "--out") == 0 && v)
            out = argv[++i];
        else if (strcmp(a, "--device") == 0 && v)
            device = argv[++i];
        else if (strcmp(a, "--save-model") == 0 && v)
            save = argv[++i];
        else if (strcmp(a, "--secure-rng") == 0)
            secure_rng = 1;
        else if (strcmp(a, "--threads") == 0) {
            if (!cli_parse_int_range("train", a, v, 1, FED_MAX_THREADS, &threads))
                return CLI_EXIT_BADINPUT;
            i++;
        } else {
            fp_print_line(stderr, "fedpriv train: unknown or incomplete option \"%s\" (fedpriv train --help)", a);
            return CLI_EXIT_BADINPUT;
        }
    }
    if (!config) {
        fp_print_line(stderr, "fedpriv train: --config FILE.json is required");
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    cJSON *root = NULL;
    // Outputs are checked before the work: a read-only folder or a directory named as
    // the result fails now, not after training.
    if ((out && fp_check_writable_file(out, &err) != FP_OK) || (save && fp_check_writable_file(save, &err) != FP_OK) ||
        jv_load_file(config, &root, &err) != FP_OK)
        return cli_report_error("train", &err);
    // --secure-rng overrides the config's "rng" key (docs/security.md).
    if (secure_rng && cJSON_IsObject(root)) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "rng");
        cJSON_AddStringToObject(root, "rng", "secure");
    }
    Experiment ex;
    if (experiment_load(root, NULL, device, (int)threads, defense_find, &ex, &err) != FP_OK) {
        cJSON_Delete(root);
        // Messages name the JSON path; say which file it is in.
        fp_error_prefix(&err, config);
        return cli_report_error("train", &err);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    Federation *f = experiment_federation(&ex, NULL, 0, &err);
    if (!f) {
        fp_error_prefix(&err, config);
        experiment_free(&ex);
        cJSON_Delete(root);
        return cli_report_error("train", &err);
    }
    FpStatus st = fed_run(f, 0, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "command", "train");
    experiment_describe(&ex, f, res);
    cJSON_AddItemToObject(res, "rounds", fed_rounds_json(f, 1));
    int rc = CLI_EXIT_OK;
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
        if (save && model_save(ex.model, save, &err) != FP_OK)
            rc = cli_report_error("train", &err);
    } else if (st == FP_EDIVERGED) {
        cJSON_AddStringToObject(res, "status", "diverged");
        cJSON_AddNumberToObject(res, "diverged_round", fed_rounds_done(f));
        cJSON_AddNullToObject(res, "final");
        fp_print_line(stderr, "fedpriv train: %s", err.msg);
        rc = CLI_EXIT_FAIL;
    } else {
        rc = cli_report_error("train", &err);
        cJSON_Delete(res);
        res = NULL;
    }
    if (res) {
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
