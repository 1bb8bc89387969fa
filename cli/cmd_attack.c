// `fedpriv attack NAME --config FILE.json --out DIR [--device cpu|cuda] [--threads N]`:
// runs one registered attack against the defense the config names, and writes
// DIR/result.json (metrics, artifacts relative to DIR, run metadata, "status": "done").
// A run that diverged (a non-finite defended upload or matching loss) writes "status":
// "diverged" with the reason and no metrics, and exits 1.
// Under mpirun/srun (fedpriv built with MPI) every rank runs the attack and the ranks
// share the clients of its target federation (fl/fed.h); rank 0 writes DIR, the other
// ranks write their artifacts into a scratch folder they remove, and print only their
// own errors.
#define _XOPEN_SOURCE 700 // nftw, mkdtemp
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "attacks/attack.h"
#include "attacks/refcache.h"
#include "runner/attack_registry.h"
#include "cli/cli.h"
#include "core/comm.h"
#include "core/files.h"
#include "core/jsonv.h"
#include "defenses/registry.h"

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
               "  \"adaptive\" (every variant per image, the strongest kept). docs/attacks-dlg.md.\n"
               "  Under mpirun -n R (built with MPI) the ranks share the clients of the attack's target\n"
               "  federation and rank 0 writes DIR (docs/cluster.md).\n");
}

static int make_dir(const char *dir, FpError *err) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fp_fail(err, FP_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
        return 0;
    }
    return 1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

// An error: rank 0 says it; another rank only its own (not one every rank met alike).
static int attack_error(const char *cmd, const Comm *comm, const FpError *err, int own) {
    if (comm_rank(comm) == 0)
        return cli_report_error(cmd, err);
    if (own)
        fp_print_line(stderr, "fedpriv %s (rank %d of %d): %s", cmd, comm_rank(comm), comm_size(comm), err->msg);
    return cli_error_status(err);
}

static int attack_run(const char *cmd, Comm *comm, const AttackOps *ops, const char *name, const char *config, const char *out,
                      const char *device, int threads);

int cmd_attack(int argc, char **argv) {
    return cmd_attack_as("attack", argc, argv);
}

int cmd_attack_as(const char *cmd, int argc, char **argv) {
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
            if (!cli_parse_int_range(cmd, a, v, 1, FED_MAX_THREADS, &threads))
                return CLI_EXIT_BADINPUT;
            i++;
        }
        else {
            fp_print_line(stderr, "fedpriv %s: unknown or incomplete option \"%s\" (fedpriv %s --help)", cmd, a, cmd);
            return CLI_EXIT_BADINPUT;
        }
    }
    const AttackOps *ops = attack_find(name);
    if (!ops) {
        fp_print_line(stderr, "fedpriv %s: unknown attack \"%s\" (fedpriv list shows the attacks)", cmd, name);
        return CLI_EXIT_BADINPUT;
    }
    if (!config || !out) {
        fp_print_line(stderr, "fedpriv %s: --config FILE.json and --out DIR are required", cmd);
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    Comm *comm = NULL;
    if (comm_create(&comm, &err) != FP_OK)
        return cli_report_error(cmd, &err);
    int rc;
    if (comm_rank(comm) == 0)
        rc = attack_run(cmd, comm, ops, name, config, out, device, (int)threads);
    else { // artifacts of the other ranks go to a scratch folder, removed after
        const char *tmp = getenv("TMPDIR");
        char scratch[4096];
        snprintf(scratch, sizeof scratch, "%s/fedpriv-attack-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(scratch)) {
            fp_fail(&err, FP_EIO, "%s: cannot create a scratch folder: %s", scratch, strerror(errno));
            rc = attack_error(cmd, comm, &err, 1);
        } else {
            rc = attack_run(cmd, comm, ops, name, config, scratch, device, (int)threads);
            nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
    }
    comm_free(comm);
    return rc;
}

static int attack_run(const char *cmd, Comm *comm, const AttackOps *ops, const char *name, const char *config, const char *out,
                      const char *device, int threads) {
    FpError err = {0};
    cJSON *root = NULL;
    int lead = comm_rank(comm) == 0;
    if (fp_check_writable_dir(out, &err) != FP_OK || jv_load_file(config, &root, &err) != FP_OK ||
        experiment_resolve_paths(root, config, &err) != FP_OK) {
        cJSON_Delete(root);
        return attack_error(cmd, comm, &err, 0);
    }
    cJSON *attack_json = cJSON_GetObjectItemCaseSensitive(root, "attack");
    cJSON *owned = NULL;
    if (!attack_json) {
        owned = cJSON_CreateObject();
        attack_json = owned;
    } else if (!cJSON_IsObject(attack_json)) {
        if (lead)
            fp_print_line(stderr, "fedpriv %s: %s: attack: must be an object", cmd, config);
        cJSON_Delete(root);
        return CLI_EXIT_BADINPUT;
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(attack_json, "name");
    if (n && (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0)) {
        if (lead)
            fp_print_line(stderr, "fedpriv %s: %s: attack.name: \"%s\" does not match the command's attack \"%s\"", cmd, config,
                cJSON_IsString(n) ? n->valuestring : "?", name);
        cJSON_Delete(owned);
        cJSON_Delete(root);
        return CLI_EXIT_BADINPUT;
    }
    static const char *const extra[] = {"attack", NULL};
    Experiment ex;
    AttackEnv env = {.attack_json = attack_json, .path = "attack", .out_dir = out, .quiet = !lead};
    int rc = CLI_EXIT_OK;
    if (experiment_load(root, extra, device, (int)threads, defense_find, &ex, &err) != FP_OK) {
        fp_error_prefix(&err, config);
        cJSON_Delete(owned);
        cJSON_Delete(root);
        return attack_error(cmd, comm, &err, 0);
    }
    ex.comm = comm;
    env.ex = &ex;
    char refdir[4200];
    snprintf(refdir, sizeof refdir, "%s/reference-models", out);
    env.reference_dir = refdir;
    // OUT/reference-models is refused up front when it is a link (attacks/refcache.h).
    if (ops->validate(&env, &err) != FP_OK || !make_dir(out, &err) || refcache_check_dir(refdir, &err) != FP_OK) {
        fp_error_prefix(&err, config);
        rc = attack_error(cmd, comm, &err, 0);
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
        if (lead)
            fp_print_line(stderr, "fedpriv %s: diverged: %s", cmd, err.msg);
        cJSON_AddStringToObject(res, "status", "diverged");
        cJSON_AddStringToObject(res, "message", err.msg);
        if (ops->headline)
            cJSON_DeleteItemFromObjectCaseSensitive(res, ops->headline);
        rc = CLI_EXIT_FAIL;
    } else if (st != FP_OK) {
        rc = attack_error(cmd, comm, &err, !strstr(err.msg, FED_RANK_FAILED_NOTE));
        cJSON_Delete(res);
        goto done;
    } else
        cJSON_AddStringToObject(res, "status", "done");
    cJSON_AddNumberToObject(res, "wall_seconds", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    // All threads' CPU time of the attack (data loading excluded, like wall_seconds).
    cJSON_AddNumberToObject(res, "cpu_seconds", (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9);
    char path[4096];
    snprintf(path, sizeof path, "%s/result.json", out);
    if (lead && jv_write_file_atomic(path, res, &err) != FP_OK)
        rc = cli_report_error(cmd, &err);
    cJSON_Delete(res);
done:
    experiment_free(&ex);
    cJSON_Delete(owned);
    cJSON_Delete(root);
    return rc;
}
