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
#include <unistd.h>

#include "attacks/attack.h"
#include "attacks/refcache.h"
#include "runner/attack_registry.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "core/comm.h"
#include "core/files.h"
#include "core/jsonv.h"
#include "runner/cell_store.h"
#include "defenses/registry.h"

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

// One folder, one attack: two attacks writing one --out would each write DIR/result.json,
// the second silently replacing the first. The first run records its attack in
// DIR/attack-owner.txt (written to a temporary name, then link()ed, which fails when
// another run got there first, so of two started at once exactly one owns DIR); a later
// run of another attack is refused, the same attack (a rerun, which reuses
// DIR/reference-models) goes ahead. A folder written before the record existed is known
// by its result.json's "attack".
#define ATTACK_OWNER_FILE "attack-owner.txt"

static FpStatus owner_read(const char *out, char *owner, size_t n, int *missing, FpError *err) {
    char *buf = NULL;
    size_t len = 0;
    FpError rerr = {0};
    *missing = 0;
    FpStatus st = fp_read_beneath(out, ATTACK_OWNER_FILE, 256, &buf, &len, missing, &rerr);
    if (st == FP_OK) {
        len = strcspn(buf, "\n");
        snprintf(owner, n, "%.*s", (int)len, buf);
    }
    free(buf);
    if (st != FP_OK && !*missing) { // a link, a FIFO, a huge file: never taken over
        if (err)
            *err = rerr;
        return st;
    }
    return FP_OK;
}

static FpStatus claim_out(const char *out, const char *name, FpError *err) {
    char owner[256] = "", path[4200], tmp[4300];
    int missing = 0;
    FP_TRY(owner_read(out, owner, sizeof owner, &missing, err));
    if (missing) {
        cJSON *old = NULL;
        int no_result = 0;
        FpError ignored = {0};
        if (jv_load_beneath(out, "result.json", &old, &no_result, &ignored) == FP_OK) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(old, "attack");
            if (cJSON_IsString(a))
                snprintf(owner, sizeof owner, "%s", a->valuestring);
        }
        cJSON_Delete(old);
    }
    if (missing && (!owner[0] || strcmp(owner, name) == 0)) {
        snprintf(path, sizeof path, "%s/" ATTACK_OWNER_FILE, out);
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        FILE *f = fp_create_new(tmp, err);
        if (!f)
            return FP_EIO;
        int ok = fprintf(f, "%s\n", name) > 0;
        ok &= fclose(f) == 0;
        int linked = ok && link(tmp, path) == 0, e = errno;
        if (ok && !linked && (e == EPERM || e == ENOTSUP || e == EOPNOTSUPP || e == EMLINK)) // no hard links here
            linked = rename(tmp, path) == 0, e = errno;
        unlink(tmp);
        if (linked)
            return FP_OK;
        if (!ok || e != EEXIST)
            return fp_fail(err, FP_EIO, "%s: cannot create: %s", path, ok ? strerror(e) : "write failed");
        // Another run recorded its attack between our look and our link.
        FP_TRY(owner_read(out, owner, sizeof owner, &missing, err));
    }
    if (owner[0] && strcmp(owner, name) != 0)
        return fp_fail(err, FP_EPARAM,
                       "%s: this folder holds the attack \"%s\", not \"%s\" (%s/" ATTACK_OWNER_FILE
                       "): give each attack its own --out",
                       out, owner, name, out);
    return FP_OK;
}

static int attack_run(const char *cmd, Comm *comm, const AttackOps *ops, const char *name, const char *config, const char *out,
                      const char *reference_dir, const char *device, int threads);

static const char ABOUT[] =
    "  Runs the attack NAME (fedpriv list shows them) as the config's \"attack\" object says,\n"
    "  against the config's defense, and writes DIR/result.json (DIR and its parents are made\n"
    "  when missing). The config's attack.name, if present, must match NAME. DIR holds one\n"
    "  attack: a rerun of the same attack into DIR is fine, another attack is refused (exit 2).\n"
    "  Membership attacks keep their reference models' logits in DIR/reference-models/: a\n"
    "  rerun into DIR trains none of them again. --reference-models REFDIR keeps them there\n"
    "  instead, so that two attacks with their own DIR share one set (lira into out/lira,\n"
    "  then rmia --out out/rmia --reference-models out/lira/reference-models reads LiRA's\n"
    "  models; an entry is found by the model's identity, so a different target or procedure\n"
    "  never reads another's). Exit 0 when done, 1 if the attack diverged\n"
    "  (the result says so, without metrics), 2 on bad input.\n"
    "  Gradient inversion (dlg, idlg, dlg-regression) attacks a client of the configured\n"
    "  federation: attack.observer \"server\" (its upload, the default) or \"public\" (the\n"
    "  released model); dlg and idlg take attack.attacker \"adaptive\" (the default: every\n"
    "  variant per image, the strongest kept) or \"single\". The result names the attacked\n"
    "  model (attacked_model: the config's model, the federation's). docs/attacks-dlg.md.\n"
    "  Under mpirun -n R (built with MPI) the ranks share the clients of the attack's target\n"
    "  federation and rank 0 writes DIR (docs/cluster.md).";

int cmd_attack(int argc, char **argv) {
    return cmd_attack_as("attack",
                         "fedpriv attack NAME --config FILE.json --out DIR [--reference-models REFDIR] [--device cpu|cuda] "
                         "[--threads N]",
                         ABOUT, argc, argv);
}

int cmd_attack_as(const char *cmd, const char *synopsis, const char *about, int argc, char **argv) {
    const char *config = NULL, *out = NULL, *reference_dir = NULL, *device = NULL, *names[1] = {NULL};
    long long threads = 0;
    int n_names = 0;
    const CliOption opts[] = {
        {"--config", NULL, CLI_STRING, &config, .value = "FILE.json", .help = "the experiment and its \"attack\" object"},
        {"--out", NULL, CLI_STRING, &out, .value = "DIR", .help = "the result folder (DIR/result.json)"},
        {"--reference-models", NULL, CLI_STRING, &reference_dir, .value = "REFDIR",
         .help = "membership attacks: the reference models' cache (default DIR/reference-models)"},
        {"--device", NULL, CLI_STRING, &device, .value = "cpu|cuda", .help = "where to compute (default: the config's)"},
        {"--threads", NULL, CLI_INT, &threads, .value = "N", .help = "worker threads", .lo = 1, .hi = FED_MAX_THREADS},
    };
    const CliCommand c = {.cmd = cmd, .synopsis = synopsis, .about = about, .opts = opts, .n_opts = CLI_OPTIONS_COUNT(opts),
                          .positional = names, .max_positional = 1, .n_positional = &n_names,
                          .positional_names = "one attack NAME"};
    if (argc < 2) {
        cli_options_usage(&c, stderr);
        return CLI_EXIT_BADINPUT;
    }
    int rc = cli_options_parse(&c, argc, argv);
    if (rc != CLI_PARSED)
        return rc;
    const char *name = names[0];
    if (!name) {
        fp_print_line(stderr, "fedpriv %s: the attack NAME is required (fedpriv list shows the attacks)", cmd);
        return CLI_EXIT_BADINPUT;
    }
    const AttackOps *ops = attack_find(name);
    if (!ops) {
        char hint[128];
        fp_print_line(stderr, "fedpriv %s: unknown attack \"%s\" (%sfedpriv list shows the attacks)", cmd, name,
                      attack_suggest(name, hint, sizeof hint));
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
    if (comm_rank(comm) == 0)
        rc = attack_run(cmd, comm, ops, name, config, out, reference_dir, device, (int)threads);
    else { // artifacts of the other ranks go to a scratch folder, removed after
        const char *tmp = getenv("TMPDIR");
        char scratch[4096];
        snprintf(scratch, sizeof scratch, "%s/fedpriv-attack-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(scratch)) {
            fp_fail(&err, FP_EIO, "%s: cannot create a scratch folder: %s", scratch, strerror(errno));
            rc = attack_error(cmd, comm, &err, 1);
        } else {
            // their reference models too: only rank 0 writes the shared cache
            rc = attack_run(cmd, comm, ops, name, config, scratch, NULL, device, (int)threads);
            nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
    }
    comm_free(comm);
    return rc;
}

static int attack_run(const char *cmd, Comm *comm, const AttackOps *ops, const char *name, const char *config, const char *out,
                      const char *reference_dir, const char *device, int threads) {
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
    if (experiment_load_at(root, config, extra, device, (int)threads, defense_find, &ex, &err) != FP_OK) {
        fp_error_prefix(&err, config);
        cJSON_Delete(owned);
        cJSON_Delete(root);
        return attack_error(cmd, comm, &err, 0);
    }
    ex.comm = comm;
    env.ex = &ex;
    char refdir[4200];
    if (reference_dir)
        snprintf(refdir, sizeof refdir, "%s", reference_dir);
    else
        snprintf(refdir, sizeof refdir, "%s/reference-models", out);
    env.reference_dir = refdir;
    // The cache folder (OUT/reference-models or --reference-models) is refused up front
    // when it is a link (attacks/refcache.h).
    if (ops->validate(&env, &err) != FP_OK || store_make_dirs(out, &err) != FP_OK ||
        (reference_dir && store_make_dirs(refdir, &err) != FP_OK)) {
        fp_error_prefix(&err, config);
        rc = attack_error(cmd, comm, &err, 0);
        goto done;
    }
    if (refcache_check_dir(refdir, &err) != FP_OK) {
        fp_error_prefix(&err, config);
        rc = attack_error(cmd, comm, &err, 0);
        goto done;
    }
    if (claim_out(out, ops->name, &err) != FP_OK) { // the message names DIR, not the config
        rc = attack_error(cmd, comm, &err, 0);
        goto done;
    }
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "command", "attack");
    cJSON_AddStringToObject(res, "attack", ops->name);
    experiment_describe(&ex, NULL, res, NULL);   // no federation: nothing that can fail
    attack_name_model(ex.model_json, NULL, res); // the config's model is the federation's
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
