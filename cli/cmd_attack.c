// `fedpriv attack NAME --config FILE.json --out DIR [--device cpu|cuda] [--threads N]`:
// runs one registered attack against the defense the config names, and writes
// DIR/result.json (metrics, artifacts relative to DIR, run metadata, "status": "done").
// A run that diverged (a non-finite defended upload or matching loss) writes "status":
// "diverged" with the reason and no metrics, and exits 1.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "attacks/attack.h"
#include "cli/cli.h"
#include "core/files.h"
#include "core/jsonv.h"

static void usage(FILE *f) {
    fprintf(f, "usage: fedpriv attack NAME --config FILE.json --out DIR [--device cpu|cuda] [--threads N]\n"
               "  Runs the attack NAME (fedpriv list shows them) as the config's \"attack\" object says,\n"
               "  against the config's defense, and writes DIR/result.json. The config's attack.name,\n"
               "  if present, must match NAME. Membership attacks keep their reference models' logits\n"
               "  in DIR/reference-models/: a rerun into DIR trains none of them again. Exit 0 when\n"
               "  done, 1 if the attack diverged (the result says so, without metrics), 2 on bad input.\n"
               "  Gradient inversion (dlg, idlg, dlg-regression) attacks a client of the configured\n"
               "  federation: attack.observer \"server\" (its upload, the default) or \"public\" (the\n"
               "  released model); dlg and idlg take attack.attacker \"single\" (the default) or\n"
               "  \"adaptive\" (every variant per image, the strongest kept). docs/attacks-dlg.md.\n");
}

static int make_dir(const char *dir, FpError *err) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fp_fail(err, FP_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
        return 0;
    }
    return 1;
}

int cmd_attack(int argc, char **argv) {
    if (cli_wants_help(argc, argv) || argc < 2) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_BADINPUT : CLI_EXIT_OK;
    }
    const char *name = argv[1], *config = NULL, *out = NULL, *device = NULL;
    long long threads = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--config") == 0 && v)
            config = argv[++i];
        else if (strcmp(a, "--out") == 0 && v)
            out = argv[++i];
        else if (strcmp(a, "--device") == 0 && v)
            device = argv[++i];
        else if (strcmp(a, "--threads") == 0) {
            if (!cli_parse_int_range("attack", a, v, 1, FED_MAX_THREADS, &threads))
                return CLI_EXIT_BADINPUT;
            i++;
        }
        else {
            fp_print_line(stderr, "fedpriv attack: unknown or incomplete option \"%s\" (fedpriv attack --help)", a);
            return CLI_EXIT_BADINPUT;
        }
    }
    const AttackOps *ops = attack_find(name);
    if (!ops) {
        fp_print_line(stderr, "fedpriv attack: unknown attack \"%s\" (fedpriv list shows the attacks)", name);
        return CLI_EXIT_BADINPUT;
    }
    if (!config || !out) {
        fp_print_line(stderr, "fedpriv attack: --config FILE.json and --out DIR are required");
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    cJSON *root = NULL;
    if (fp_check_writable_dir(out, &err) != FP_OK || jv_load_file(config, &root, &err) != FP_OK)
        return cli_report_error("attack", &err);
    cJSON *attack_json = cJSON_GetObjectItemCaseSensitive(root, "attack");
    cJSON *owned = NULL;
    if (!attack_json) {
        owned = cJSON_CreateObject();
        attack_json = owned;
    } else if (!cJSON_IsObject(attack_json)) {
        fp_print_line(stderr, "fedpriv attack: %s: attack: must be an object", config);
        cJSON_Delete(root);
        return CLI_EXIT_BADINPUT;
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(attack_json, "name");
    if (n && (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0)) {
        fp_print_line(stderr, "fedpriv attack: %s: attack.name: \"%s\" does not match the command's attack \"%s\"", config,
                cJSON_IsString(n) ? n->valuestring : "?", name);
        cJSON_Delete(owned);
        cJSON_Delete(root);
        return CLI_EXIT_BADINPUT;
    }
    static const char *const extra[] = {"attack", NULL};
    Experiment ex;
    AttackEnv env = {.attack_json = attack_json, .path = "attack", .out_dir = out};
    int rc = CLI_EXIT_OK;
    if (experiment_load(root, extra, device, (int)threads, &ex, &err) != FP_OK) {
        fp_error_prefix(&err, config);
        cJSON_Delete(owned);
        cJSON_Delete(root);
        return cli_report_error("attack", &err);
    }
    env.ex = &ex;
    char refdir[4200];
    snprintf(refdir, sizeof refdir, "%s/reference-models", out);
    env.reference_dir = refdir;
    if (ops->validate(&env, &err) != FP_OK || !make_dir(out, &err)) {
        fp_error_prefix(&err, config);
        rc = cli_report_error("attack", &err);
        goto done;
    }
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "command", "attack");
    cJSON_AddStringToObject(res, "attack", ops->name);
    experiment_describe(&ex, NULL, res);
    FpStatus st = ops->run(&env, res, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    if (st == FP_EDIVERGED) {
        // A diverged run is a result, never a finding: the status and the reason, and
        // whatever the attack recorded of its setting (observations), no metrics.
        fp_print_line(stderr, "fedpriv attack: diverged: %s", err.msg);
        cJSON_AddStringToObject(res, "status", "diverged");
        cJSON_AddStringToObject(res, "message", err.msg);
        if (ops->headline)
            cJSON_DeleteItemFromObjectCaseSensitive(res, ops->headline);
        rc = CLI_EXIT_FAIL;
    } else if (st != FP_OK) {
        rc = cli_report_error("attack", &err);
        cJSON_Delete(res);
        goto done;
    } else
        cJSON_AddStringToObject(res, "status", "done");
    cJSON_AddNumberToObject(res, "wall_seconds", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    // All threads' CPU time of the attack (data loading excluded, like wall_seconds).
    cJSON_AddNumberToObject(res, "cpu_seconds", (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9);
    char path[4096];
    snprintf(path, sizeof path, "%s/result.json", out);
    if (jv_write_file_atomic(path, res, &err) != FP_OK)
        rc = cli_report_error("attack", &err);
    cJSON_Delete(res);
done:
    experiment_free(&ex);
    cJSON_Delete(owned);
    cJSON_Delete(root);
    return rc;
}
