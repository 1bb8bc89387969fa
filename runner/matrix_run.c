// Running a matrix (see runner/matrix.h): one cell at a time in this process, or up
// to --jobs cells at once, each in a forked process, or the cells of one shard, or
// cells handed out to MPI ranks (runner/matrix_ranks.c). Either way a cell computes the
// same thing: its result depends only on its spec and the seed.
//
// Crash safety. A cell's artifacts are written into this writer's own work folder,
// renamed to DIR/cells/ID/ when the cell ends, and only then is DIR/cells/ID.json
// written (temp file, fsync, rename): runner/cell_store.h. A cell is finished exactly
// when its JSON exists with the current spec hash, so a run killed at any instant
// leaves either a finished cell or one that is run again from scratch. Forked cells die
// with their parent (PR_SET_PDEATHSIG), so a killed run leaves no writer behind.
#include "core/clock.h"
#include "core/json_number.h"
#include "runner/matrix_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attacks/refcache.h"
#include "attacks/target.h"
#include "core/comm.h"
#include "core/files.h"
#include "core/jsonv.h"
#include "core/proc.h"
#include "core/rng_secure.h"
#include "reports/summary.h"
#include "runner/attack_registry.h"
#include "runner/cell_store.h"
#include "runner/matrix_ranks.h"
#include "runner/shard.h"

// A cell whose result stands: done, or diverged and either kept (--keep-diverged) or
// already retried (runner/matrix.h).
static int cell_settled(const Cell *c, int keep_diverged) {
    return c->status == CELL_DONE ||
           (c->status == CELL_DIVERGED && (keep_diverged || c->retries >= MATRIX_DIVERGED_RETRIES));
}

// Reads the status of cell c from disk when its file changed since the last look;
// 1 when the status changed. A settled cell stays so (runner/cell_store.h: a finished
// result is never replaced, a diverged one only by its retry), so it is not looked at
// again.
static int refresh_status(Cell *c, const char *dir) {
    if (cell_settled(c, 0) && c->disk_mtime_ns >= 0)
        return 0;
    char path[4096];
    store_cell_json_path(dir, c->id, path, sizeof path);
    struct stat sb;
    long long mtime = -1, size = -1;
    if (stat(path, &sb) == 0) {
        mtime = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        size = (long long)sb.st_size;
    }
    if (mtime == c->disk_mtime_ns && size == c->disk_size)
        return 0;
    CellStatus was = c->status;
    c->retries = 0;
    c->status = mtime < 0 ? CELL_PENDING
                          : store_cell_status_retries(dir, c->id, c->hash, c->message, sizeof c->message, &c->retries);
    if (c->status == CELL_PENDING)
        c->message[0] = 0;
    c->disk_mtime_ns = mtime;
    c->disk_size = size;
    return c->status != was;
}

static int refresh_statuses(Matrix *m, const char *dir) {
    int changed = 0;
    for (int i = 0; i < m->n_cells; i++)
        changed |= refresh_status(&m->cells[i], dir);
    return changed;
}

static FpStatus write_index(const Matrix *m, const char *dir, const cJSON *summary, FpError *err);

// Writes, then looks again, until no cell changed in between. Of concurrent writers,
// the one whose index lands last therefore saw every cell committed before it (a cell
// committed later is followed by its writer's own index), so the final index misses
// nothing (on NFS up to its attribute caching; `fedpriv matrix --status` rebuilds it).
static FpStatus index_write_loop(Matrix *m, const char *dir, const cJSON *summary, FpError *err) {
    refresh_statuses(m, dir);
    for (int tries = 0; tries < 8; tries++) {
        FP_TRY(write_index(m, dir, summary, err));
        if (!refresh_statuses(m, dir))
            break;
    }
    return FP_OK;
}

FpStatus matrix_index_write(Matrix *m, const char *dir, int force, FpError *err) {
    double now = fp_monotonic_seconds();
    if (!force && m->index_written_at > 0 && now - m->index_written_at < MATRIX_INDEX_INTERVAL)
        return FP_OK;
    m->index_written_at = now;
    return index_write_loop(m, dir, NULL, err);
}

// The last look, now with the values: per setting, every metric over the seeds and the
// warnings (reports/summary.h), read back from the cell files. A run that cannot be
// summarised keeps the index without "summary" (fedpriv report summarises it again);
// running out of memory on the way is an error, not a run without a summary.
static FpStatus index_write_final(Matrix *m, const char *dir, FpError *err) {
    FP_TRY(index_write_loop(m, dir, NULL, err));
    MatrixResults mr;
    RunSummary rs;
    FpError serr = {0};
    FpStatus st = matrix_results_load(dir, &mr, &serr);
    if (st != FP_OK)
        return st == FP_ENOMEM ? fp_fail(err, st, "%s", serr.msg) : FP_OK;
    st = run_summary_build(&mr, &rs, &serr);
    if (st == FP_ENOMEM)
        st = fp_fail(err, st, "%s", serr.msg);
    else if (st != FP_OK)
        st = FP_OK;
    else {
        cJSON *sj = run_summary_json(&rs);
        st = sj ? index_write_loop(m, dir, sj, err) : fp_fail(err, FP_ENOMEM, "out of memory");
        cJSON_Delete(sj);
        run_summary_free(&rs);
    }
    matrix_results_free(&mr);
    return st;
}

// How the report names attack k: its name, and when another attack of the matrix has
// the same name, the options that tell them apart ("dlg observer=public").
static void attack_label(const Matrix *m, int k, char *buf, size_t n) {
    const AttackSpec *as = &m->attacks[k];
    size_t len = (size_t)snprintf(buf, n, "%s", as->ops->name);
    const cJSON *it;
    cJSON_ArrayForEach(it, as->json) {
        if (strcmp(it->string, "name") == 0)
            continue;
        int differs = 0;
        for (int o = 0; o < m->n_attacks; o++) {
            if (o == k || strcmp(m->attacks[o].ops->name, as->ops->name) != 0)
                continue;
            const cJSON *other = cJSON_GetObjectItemCaseSensitive(m->attacks[o].json, it->string);
            differs |= !other || !cJSON_Compare(other, it, 1);
        }
        if (!differs || len >= n)
            continue;
        char *v = cJSON_IsString(it) ? NULL : cJSON_PrintUnformatted(it);
        len += (size_t)snprintf(buf + len, n - len, " %s=%s", it->string, v ? v : it->valuestring);
        free(v);
    }
    // A probe model is named in the label, so every column and row that shows it says so.
    char model[200];
    if (attack_model_label(m->base.model_json, as->model_json, model, sizeof model) && len < n)
        snprintf(buf + len, n - len, " on %s (probe)", model);
}

// The accuracy of always predicting the test set's most frequent class (the chance
// level the report marks); NaN for a regression task.
static double chance_accuracy(const Dataset *test) {
    if (!test->y || test->n_classes <= 0 || test->n <= 0)
        return NAN;
    int *count = calloc((size_t)test->n_classes, sizeof(int)), best = 0;
    if (!count)
        return NAN;
    for (int i = 0; i < test->n; i++)
        if (test->y[i] >= 0 && test->y[i] < test->n_classes && ++count[test->y[i]] > best)
            best = count[test->y[i]];
    free(count);
    return (double)best / test->n;
}

static FpStatus write_index(const Matrix *m, const char *dir, const cJSON *summary, FpError *err) {
    cJSON *ix = cJSON_CreateObject();
    cJSON_AddStringToObject(ix, "fedpriv_version", FEDPRIV_VERSION);
    cJSON_AddStringToObject(ix, "kind", "fedpriv-matrix");
    cJSON_AddStringToObject(ix, "matrix_file", m->file);
    if (m->named)
        cJSON_AddStringToObject(ix, "name", m->owner);
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(m->root, "description");
    cJSON_AddStringToObject(ix, "description", cJSON_IsString(desc) ? desc->valuestring : "");
    cJSON_AddNumberToObject(ix, "seed", (double)m->seeds[0]);
    cJSON *seeds = cJSON_AddArrayToObject(ix, "seeds");
    for (int s = 0; s < m->n_seeds; s++)
        cJSON_AddItemToArray(seeds, cJSON_CreateNumber((double)m->seeds[s]));
    cJSON_AddStringToObject(ix, "rng", matrix_rng_name(m));
    cJSON_AddStringToObject(ix, "backend", m->base.backend->name);
    cJSON_AddNumberToObject(ix, "threads", m->base.threads);
    cJSON *ds = cJSON_AddObjectToObject(ix, "dataset");
    cJSON_AddStringToObject(ds, "name", m->base.dataset_name);
    cJSON_AddNumberToObject(ds, "train_samples", m->base.train->n);
    cJSON_AddNumberToObject(ds, "test_samples", m->base.test->n);
    if (m->base.test->n_classes > 0) {
        cJSON_AddNumberToObject(ds, "classes", m->base.test->n_classes);
        jnum_add(ds, "chance_accuracy", chance_accuracy(m->base.test));
    }
    cJSON_AddItemToObject(ix, "model", cJSON_Duplicate(m->base.model_json, 1));
    cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(ix, "model"), "parameters",
                            (double)m->base.model->table.n_params);
    cJSON_AddItemToObject(ix, "federation", fed_config_to_json(&m->base.fed));
    cJSON *atk = cJSON_AddArrayToObject(ix, "attacks");
    for (int k = 0; k < m->n_attacks; k++) {
        const AttackSpec *as = &m->attacks[k];
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "name", as->ops->name);
        char label[256];
        attack_label(m, k, label, sizeof label);
        cJSON_AddStringToObject(a, "label", label);
        cJSON_AddStringToObject(a, "summary", as->ops->summary ? as->ops->summary : "");
        cJSON_AddStringToObject(a, "headline", as->ops->headline ? as->ops->headline : "");
        cJSON_AddBoolToObject(a, "higher_leaks", as->ops->headline_higher_leaks);
        if (as->observer)
            cJSON_AddStringToObject(a, "observer", as->observer);
        attack_name_model(m->base.model_json, as->model_json, a);
        const cJSON *atk_kind = cJSON_GetObjectItemCaseSensitive(as->json, "attacker");
        if (cJSON_IsString(atk_kind))
            cJSON_AddStringToObject(a, "attacker", atk_kind->valuestring);
        cJSON_AddStringToObject(a, "dir", as->dirname);
        cJSON *cfg = cJSON_Duplicate(as->json, 1);
        if (as->model_json)
            cJSON_AddItemToObject(cfg, "model", cJSON_Duplicate(as->model_json, 1));
        cJSON_AddItemToObject(a, "config", cfg);
        cJSON_AddItemToArray(atk, a);
    }
    cJSON *cells = cJSON_AddArrayToObject(ix, "cells");
    int counts[4] = {0};
    for (int i = 0; i < m->n_cells; i++) {
        const Cell *c = &m->cells[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", c->id);
        cJSON_AddStringToObject(e, "label", c->label);
        cJSON_AddStringToObject(e, "defense", c->ops->name);
        const cJSON *variant = cJSON_GetObjectItemCaseSensitive(c->defense, "variant");
        if (cJSON_IsString(variant))
            cJSON_AddStringToObject(e, "variant", variant->valuestring);
        jnum_add(e, "epsilon", c->epsilon);
        cJSON_AddItemToObject(e, "params", cJSON_Duplicate(c->params, 1));
        cJSON_AddNumberToObject(e, "defense_index", c->defense_index);
        cJSON_AddNumberToObject(e, "setting", c->setting);
        cJSON_AddNumberToObject(e, "seed", (double)c->seed);
        cJSON_AddStringToObject(e, "status", cell_status_name(c->status));
        if (c->message[0])
            cJSON_AddStringToObject(e, "message", c->message);
        cJSON_AddStringToObject(e, "spec_hash", c->hash);
        char file[160];
        snprintf(file, sizeof file, "cells/%s.json", c->id);
        cJSON_AddStringToObject(e, "file", file);
        cJSON_AddItemToArray(cells, e);
        counts[c->status]++;
    }
    cJSON *cn = cJSON_AddObjectToObject(ix, "counts");
    for (int s = 0; s < 4; s++)
        cJSON_AddNumberToObject(cn, cell_status_name((CellStatus)s), counts[s]);
    if (summary)
        cJSON_AddItemToObject(ix, "summary", cJSON_Duplicate(summary, 1));
    char path[4096];
    snprintf(path, sizeof path, "%s/results.json", dir);
    FpStatus st = jv_write_file_atomic(path, ix, err);
    cJSON_Delete(ix);
    return st;
}

// The cell's JSON skeleton: identity, spec and defense.
static cJSON *cell_json_begin(const Cell *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "fedpriv_version", FEDPRIV_VERSION);
    cJSON_AddStringToObject(j, "cell", c->id);
    cJSON_AddStringToObject(j, "label", c->label);
    cJSON_AddStringToObject(j, "status", "pending");
    cJSON_AddStringToObject(j, "spec_hash", c->hash);
    cJSON_AddItemToObject(j, "spec", cJSON_Duplicate(c->spec, 1));
    cJSON_AddStringToObject(j, "defense", c->ops->name);
    cJSON_AddNumberToObject(j, "seed", (double)c->seed);
    jnum_add(j, "epsilon", c->epsilon);
    cJSON_AddItemToObject(j, "params", cJSON_Duplicate(c->params, 1));
    return j;
}

// retries: "diverged_retries" (runner/matrix.h), written when not 0.
static void cell_json_finish(cJSON *j, CellStatus s, const char *message, double seconds, int threads, int retries) {
    char host[72];
    proc_host(host, sizeof host);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "status", cJSON_CreateString(cell_status_name(s)));
    if (message && message[0])
        cJSON_AddStringToObject(j, "message", message);
    cJSON *run = cJSON_AddObjectToObject(j, "run");
    cJSON_AddNumberToObject(run, "wall_seconds", seconds);
    cJSON_AddNumberToObject(run, "threads", threads);
    cJSON_AddNumberToObject(run, "pid", (double)getpid());
    cJSON_AddStringToObject(run, "host", host);
    if (retries > 0)
        cJSON_AddNumberToObject(run, "diverged_retries", retries);
}

// The "diverged_retries" of the attempt at cell c that starts now: one more than its
// file's when that result diverged (this attempt is its retry), else the file's.
static int attempt_retries(const char *dir, const Cell *c) {
    int had;
    CellStatus was = store_cell_status_retries(dir, c->id, c->hash, NULL, 0, &had);
    return had + (was == CELL_DIVERGED);
}

// One attack against the cell's setting → its entry in the cell's "attacks" list.
static cJSON *run_attack(Matrix *m, const Cell *c, int k, const Experiment *cex, AttackCache *cache,
                         const char *dir, const cJSON *reference, const char *partial, int verbose,
                         CellStatus *status, char *why,
                         size_t why_n) {
    AttackSpec *as = &m->attacks[k];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", as->ops->name);
    cJSON_AddNumberToObject(e, "index", k);
    if (as->observer)
        cJSON_AddStringToObject(e, "observer", as->observer);
    attack_name_model(m->base.model_json, as->model_json, e);
    cJSON_AddStringToObject(e, "headline", as->ops->headline ? as->ops->headline : "");
    cJSON_AddBoolToObject(e, "higher_leaks", as->ops->headline_higher_leaks);
    char rel[256], adir[4200];
    snprintf(rel, sizeof rel, "cells/%s/%s", c->id, as->dirname);
    cJSON_AddStringToObject(e, "dir", rel);
    snprintf(adir, sizeof adir, "%s/%s", partial, as->dirname);
    FpError err = {0};
    cJSON *res = cJSON_CreateObject();
    attack_name_model(m->base.model_json, as->model_json, res);
    double t0 = fp_monotonic_seconds();
    FpStatus st = store_make_dirs(adir, &err);
    Experiment aex = *cex;
    aex.model = NULL;
    if (st == FP_OK) {
        aex.model = model_clone(as->proto ? as->proto : m->base.model, m->base.backend, &err);
        if (!aex.model)
            st = err.code ? err.code : FP_ENOMEM;
        else
            st = model_init(aex.model, c->seed, &err); // the attack's model from this cell's seed
    }
    if (st == FP_OK) {
        char refdir[4200];
        snprintf(refdir, sizeof refdir, "%s/reference-models", dir);
        AttackEnv env = {.ex = &aex, .attack_json = as->json, .path = as->path, .out_dir = adir, .cache = cache,
                         .reference_dir = refdir, .quiet = !verbose};
        // The reference of an attack that decides whether it applies: this attack in the
        // matrix's cell without a defense (when this cell has a defense and that cell's
        // result is on disk; else the attack runs its own reference).
        char source[160];
        if (as->ops->uses_reference && reference && matrix_cell_needs_reference(m, (int)(c - m->cells))) {
            const Cell *rc = &m->cells[m->reference_cell];
            snprintf(source, sizeof source, "cell %s", rc->id);
            env.reference_given = 1;
            env.reference = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(reference, "attacks"), k);
            env.reference_source = source;
        }
        st = as->ops->run(&env, res, &err);
    }
    model_free(aex.model);
    double secs = fp_monotonic_seconds() - t0;
    CellStatus s = CELL_DONE;
    char msg[512] = "";
    const char *hk = as->ops->headline ? as->ops->headline : "";
    const cJSON *hv = cJSON_GetObjectItemCaseSensitive(res, hk);
    if (st == FP_EDIVERGED) {
        s = CELL_DIVERGED;
        snprintf(msg, sizeof msg, "%s", err.msg[0] ? err.msg : "the attack diverged");
    } else if (st != FP_OK) {
        s = CELL_FAILED;
        snprintf(msg, sizeof msg, "%s", err.msg[0] ? err.msg : fp_status_name(st));
    } else if (!cJSON_IsNumber(hv)) {
        s = CELL_FAILED;
        snprintf(msg, sizeof msg, "the result has no numeric headline metric \"%s\"", hk);
    } else if (!isfinite(hv->valuedouble)) {
        s = CELL_DIVERGED; // never a silent number: NaN/Inf is recorded as divergence
        snprintf(msg, sizeof msg, "the headline metric \"%s\" is not finite", hk);
    }
    cJSON_AddStringToObject(e, "status", cell_status_name(s));
    const cJSON *applicable = cJSON_GetObjectItemCaseSensitive(res, "applicable");
    if (s == CELL_DONE) {
        cJSON_AddNumberToObject(e, "value", hv->valuedouble);
        if (applicable) // true, false, or null (undecided)
            cJSON_AddItemToObject(e, "applicable", cJSON_Duplicate(applicable, 0));
    } else {
        cJSON_AddNullToObject(e, "value");
        cJSON_AddStringToObject(e, "message", msg);
    }
    cJSON_AddNumberToObject(e, "seconds", secs);
    cJSON_AddItemToObject(e, "result", res);
    if (s > *status) {
        *status = s;
        snprintf(why, why_n, "%.64s: %.400s", as->ops->name, msg);
    }
    return e;
}

static int same_model(const cJSON *a, const cJSON *b) {
    if (!a || !b)
        return a == b;
    return cJSON_Compare(a, b, 1);
}

FpStatus matrix_cell_execute(Matrix *m, int i, const CellRunContext *rc, CellOutcome *out, FpError *err) {
    const Cell *c = &m->cells[i];
    const char *dir = rc->dir;
    int threads = rc->threads, verbose = rc->verbose;
    char partial[4096];
    double t0 = fp_monotonic_seconds();
    memset(out, 0, sizeof *out);
    int retries = attempt_retries(dir, c);
    FP_TRY(store_claim(dir, c->id, c->hash, rc->who, err));
    FP_TRY(store_partial_create(dir, c->id, partial, sizeof partial, err));
    cJSON *j = cell_json_begin(c);
    CellStatus status = CELL_DONE;
    char why[512] = "";
    FpError ferr = {0};
    Experiment cex = m->base;
    cex.seed = c->seed | (m->base.seed & RNG_SEED_SECURE); // this cell's seed, same RNG kind
    cex.threads = threads;
    cex.defense = c->ops;
    cex.defense_json = c->defense;
    cex.model = model_clone(m->base.model, m->base.backend, &ferr);
    if (cex.model && model_init(cex.model, c->seed, &ferr) != FP_OK) {
        model_free(cex.model);
        cex.model = NULL;
    }
    Federation *f = cex.model ? experiment_federation(&cex, NULL, !verbose, &ferr) : NULL;
    FpStatus fst = f ? fed_run(f, 0, &ferr) : (ferr.code ? ferr.code : FP_ENOMEM);
    cJSON *model = cJSON_AddObjectToObject(j, "model");
    if (f) {
        cJSON *resolved = fed_defense_json(f, fst == FP_OK ? &ferr : NULL);
        if (!resolved && fst == FP_OK)   // its account ran out of memory: the cell fails, no NaN in it
            fst = ferr.code ? ferr.code : FP_ENOMEM;
        if (resolved)
            cJSON_AddItemToObject(j, "defense_resolved", resolved);
        int nr = fed_rounds_done(f);
        const FedRoundResult *last = nr > 0 ? fed_round_result(f, nr - 1) : NULL;
        jnum_add(model, "test_accuracy", last && fst == FP_OK ? last->test_accuracy : NAN);
        jnum_add(model, "test_loss", last && fst == FP_OK ? last->test_loss : NAN);
        if (!m->base.test->n_classes)
            jnum_add(model, "test_mae", last && fst == FP_OK ? last->test_mae : NAN);
        cJSON_AddItemToObject(model, "rounds", fed_rounds_json(f, 1));
        cJSON *boom = fst == FP_OK ? fed_loss_explosion_json(f, m->base.test->n_classes) : NULL;
        if (boom)
            cJSON_AddItemToObject(model, "loss_exploded", boom);
        if (last)
            cJSON_AddItemToObject(j, "privacy", privacy_record_json(&last->privacy));
    }
    if (fst == FP_EDIVERGED) {
        status = CELL_DIVERGED;
        snprintf(why, sizeof why, "training: %.480s", ferr.msg);
        cJSON_AddNumberToObject(model, "diverged_round", f ? fed_rounds_done(f) : 0);
    } else if (fst != FP_OK) {
        status = CELL_FAILED;
        snprintf(why, sizeof why, "training: %.480s", ferr.msg[0] ? ferr.msg : fp_status_name(fst));
    }
    // The attacks of a cell share trained targets (attacks/target.h): a membership
    // target or shadow model trained for one attack is reused by the next. Reference
    // models also go to DIR/reference-models/ (attacks/refcache.h), shared by every cell,
    // shard and rerun that trains the same model.
    // The cache keys targets by their options, not by the architecture, so attacks with
    // a model of their own ("model" in the attack object) share only with the same model.
    AttackCache **caches = calloc((size_t)(m->n_attacks ? m->n_attacks : 1), sizeof(AttackCache *));
    cJSON *atk = cJSON_AddArrayToObject(j, "attacks");
    // The reference cell's result (it ran first where this run holds it: matrix_run orders
    // the cells so); one not on disk, or of another spec, is none (the attack then runs its
    // own reference).
    cJSON *reference = NULL;
    if (matrix_cell_needs_reference(m, i)) {
        const Cell *rcell = &m->cells[m->reference_cell];
        char rpath[4096];
        snprintf(rpath, sizeof rpath, "cells/%s.json", rcell->id);
        if (store_cell_status(dir, rcell->id, rcell->hash, NULL, 0) != CELL_DONE ||
            jv_load_beneath(dir, rpath, &reference, NULL, NULL) != FP_OK) {
            cJSON_Delete(reference);
            reference = NULL;
        }
    }
    for (int k = 0; k < m->n_attacks; k++) {
        if (fst != FP_OK) { // no trained setting to attack: say so, never a number
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", m->attacks[k].ops->name);
            cJSON_AddNumberToObject(e, "index", k);
            cJSON_AddStringToObject(e, "headline", m->attacks[k].ops->headline ? m->attacks[k].ops->headline : "");
            cJSON_AddBoolToObject(e, "higher_leaks", m->attacks[k].ops->headline_higher_leaks);
            cJSON_AddStringToObject(e, "status", "skipped");
            cJSON_AddNullToObject(e, "value");
            cJSON_AddStringToObject(e, "message", "not run: the federation did not train");
            cJSON_AddItemToArray(atk, e);
            continue;
        }
        if (verbose)
            fp_print_line(stderr, "matrix: %s: attack %s", c->label, m->attacks[k].ops->name);
        int owner = k;
        for (int o = 0; o < k && owner == k; o++)
            if (same_model(m->attacks[o].model_json, m->attacks[k].model_json))
                owner = o;
        if (caches && !caches[owner])
            caches[owner] = attack_cache_create();
        AttackCache *cache = caches ? caches[owner] : NULL;
        cJSON_AddItemToArray(atk, run_attack(m, c, k, &cex, cache, dir, reference, partial, verbose, &status, why,
                                             sizeof why));
    }
    cJSON_Delete(reference);
    for (int k = 0; caches && k < m->n_attacks; k++)
        attack_cache_free(caches[k]);
    free(caches);
    cJSON *meta = cJSON_AddObjectToObject(j, "metadata");
    FpError derr = {0};
    if (experiment_describe(&cex, f, meta, &derr) != FP_OK && status == CELL_DONE) {
        status = CELL_FAILED;
        snprintf(why, sizeof why, "training: %.480s", derr.msg);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "threads"); // a run setting, kept in "run"
    fed_free(f);
    model_free(cex.model);
    out->seconds = fp_monotonic_seconds() - t0;
    cell_json_finish(j, status, why, out->seconds, threads, retries);
    FpStatus st = store_commit(dir, c->id, c->hash, partial, j, &out->kept_existing, err);
    cJSON_Delete(j);
    out->status = status;
    // A message longer than the outcome's field is cut there (the cell's JSON keeps it whole).
    snprintf(out->message, sizeof out->message, "%.*s", (int)sizeof out->message - 1, why);
    if (st == FP_OK && out->kept_existing) // the result that stands is the other writer's
        out->status = store_cell_status(dir, c->id, c->hash, out->message, sizeof out->message);
    return st;
}

// A cell whose process died before writing its result: recorded as failed (unless
// another writer finished it), and the dead process's work folder and claim removed.
static FpStatus record_crash(Matrix *m, int i, const char *dir, const char *why, double seconds, int threads,
                             FpError *err) {
    Cell *c = &m->cells[i];
    store_clean_leftovers(dir, 0);
    cJSON *j = cell_json_begin(c);
    cJSON_AddArrayToObject(j, "attacks");
    cell_json_finish(j, CELL_FAILED, why, seconds, threads, attempt_retries(dir, c));
    int kept;
    FpStatus st = store_commit(dir, c->id, c->hash, NULL, j, &kept, err);
    cJSON_Delete(j);
    c->status = st == FP_OK && kept ? store_cell_status(dir, c->id, c->hash, c->message, sizeof c->message)
                                    : CELL_FAILED;
    if (!kept)
        snprintf(c->message, sizeof c->message, "%s", why);
    return st;
}

static void format_duration(double s, char *buf, size_t n) {
    if (s < 60)
        snprintf(buf, n, "%.0f s", s);
    else if (s < 3600)
        snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, n, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

void matrix_progress_cell(MatrixProgress *p, const Cell *c, const char *dir, const char *where) {
    p->finished++;
    p->ran++;
    p->remaining--;
    p->run_seconds += c->seconds;
    if (!p->out)
        return;
    char line[1024];
    char seed[40] = "";
    if (p->seeds > 1)
        snprintf(seed, sizeof seed, " (seed %llu)", (unsigned long long)c->seed);
    size_t k = (size_t)snprintf(line, sizeof line, "matrix: [%d/%d] %s%s: %s in %.1f s%s", p->finished, p->total,
                                c->label, seed, cell_status_name(c->status), c->seconds, where ? where : "");
    // The headline figures, read back from the cell file (it may come from a child).
    char rel[200];
    snprintf(rel, sizeof rel, "cells/%s.json", c->id);
    cJSON *j = NULL;
    if (c->status != CELL_FAILED && jv_load_beneath(dir, rel, &j, NULL, NULL) == FP_OK) {
        const cJSON *acc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "model"),
                                                            "test_accuracy");
        if (cJSON_IsNumber(acc) && k < sizeof line)
            k += (size_t)snprintf(line + k, sizeof line - k, ": accuracy %.4f", acc->valuedouble);
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(j, "attacks")) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "name");
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(a, "headline");
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, "value");
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(a, "status");
            if (k >= sizeof line || !cJSON_IsString(n) || !cJSON_IsString(h) || !cJSON_IsString(s))
                continue;
            if (cJSON_IsNumber(v))
                k += (size_t)snprintf(line + k, sizeof line - k, ", %s %s %.4f", n->valuestring, h->valuestring,
                                      v->valuedouble);
            else
                k += (size_t)snprintf(line + k, sizeof line - k, ", %s %s", n->valuestring, s->valuestring);
        }
    }
    cJSON_Delete(j);
    if (c->status != CELL_DONE && c->message[0] && k < sizeof line)
        k += (size_t)snprintf(line + k, sizeof line - k, " (%s)", c->message);
    if (p->remaining > 0 && k < sizeof line) {
        int par = p->jobs < p->remaining ? p->jobs : p->remaining;
        char eta[64];
        format_duration(p->run_seconds / p->ran * p->remaining / par, eta, sizeof eta);
        snprintf(line + k, sizeof line - k, "; ETA %s", eta);
    }
    fp_print_line(p->out, "%s", line); // labels and messages come from files: escaped
    fflush(p->out);
}

static FpStatus run_forked(Matrix *m, const CellRunContext *rc, const int *todo, int n, int jobs,
                           MatrixProgress *pr, int *ran, FpError *err) {
    typedef struct {
        pid_t pid;
        int cell;
        double t0;
    } Slot;
    const char *dir = rc->dir;
    Slot *slots = calloc((size_t)jobs, sizeof(Slot));
    if (!slots)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    pid_t parent = getpid();
    int next = 0, running = 0;
    FpStatus st = FP_OK;
    while ((next < n && st == FP_OK) || running > 0) {
        while (st == FP_OK && next < n && running < jobs) {
            // A cell that takes the reference cell's results waits until that one ends.
            int ref_busy = 0;
            for (int q = 0; q < jobs; q++)
                ref_busy |= slots[q].pid && slots[q].cell == m->reference_cell;
            if (ref_busy && matrix_cell_needs_reference(m, todo[next]))
                break;
            int s = 0;
            while (slots[s].pid)
                s++;
            fflush(NULL);
            pid_t pid = fork();
            if (pid < 0) {
                st = fp_fail(err, FP_EIO, "cannot start a cell process: %s", strerror(errno));
                break;
            }
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                    _exit(4);
                FpError cerr = {0};
                CellOutcome out;
                FpStatus cst = matrix_cell_execute(m, todo[next], rc, &out, &cerr);
                if (cst != FP_OK)
                    fp_print_line(stderr, "fedpriv matrix: %s", cerr.msg);
                fflush(NULL);
                _exit(cst == FP_OK ? 0 : 3);
            }
            slots[s] = (Slot){.pid = pid, .cell = todo[next], .t0 = fp_monotonic_seconds()};
            running++;
            next++;
        }
        if (running == 0)
            break;
        int wstatus;
        pid_t pid = waitpid(-1, &wstatus, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            st = fp_fail(err, FP_EIO, "waiting for cell processes: %s", strerror(errno));
            break;
        }
        int s = 0;
        while (s < jobs && slots[s].pid != pid)
            s++;
        if (s == jobs)
            continue; // not one of ours
        Cell *c = &m->cells[slots[s].cell];
        c->seconds = fp_monotonic_seconds() - slots[s].t0;
        CellStatus fs = store_cell_status(dir, c->id, c->hash, c->message, sizeof c->message);
        if (fs == CELL_PENDING) { // it wrote nothing usable
            char why[256];
            if (WIFSIGNALED(wstatus))
                snprintf(why, sizeof why, "the cell's process was killed by signal %d", WTERMSIG(wstatus));
            else
                snprintf(why, sizeof why, "the cell's process exited with status %d before writing its result",
                         WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
            FpStatus rs = record_crash(m, slots[s].cell, dir, why, c->seconds, rc->threads, err);
            if (rs != FP_OK && st == FP_OK)
                st = rs;
        } else
            c->status = fs;
        slots[s].pid = 0;
        running--;
        ran[slots[s].cell] = 1;
        matrix_progress_cell(pr, c, dir, "");
        FpStatus ws = matrix_index_write(m, dir, 0, err);
        if (ws != FP_OK && st == FP_OK)
            st = ws;
    }
    free(slots);
    return st;
}

// ---- the folder's locks --------------------------------------------------------------
// flock (an optimisation for one host; correctness never rests on it, runner/cell_store.h)
// on DIR/.lock, opened through the one opener (core/files.h: never a link or a FIFO). A run of the whole matrix holds it
// exclusively and writes "pid P on HOST since TIME" into it, so a second run says who
// holds the folder instead of waiting without a word.

// The holder's line, and whether it is a process of this host that is still alive.
static void lock_holder(int fd, char *who, size_t n, int *alive) {
    char buf[256] = "";
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    buf[got > 0 ? got : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    snprintf(who, n, "%s", buf[0] ? buf : "a process that left no name");
    char host[256] = "", mine[256] = "";
    long pid = 0;
    gethostname(mine, sizeof mine - 1);
    *alive = -1; // unknown (another host, or no line)
    if (sscanf(buf, "pid %ld on %255s", &pid, host) == 2 && pid > 0 && strcmp(host, mine) == 0)
        *alive = kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static FpStatus locked_error(const char *dir, const char *who, FpError *err) {
    return fp_fail(err, FP_EIO, "%s: another fedpriv matrix is writing this folder (%s): wait for it to end, or "
                   "use another --out folder", dir, who);
}

// "pid P on HOST since TIME" and, when given, what for, as the lock's note (a note that
// cannot be written leaves the lock holding; a blocked run then names "a process that
// left no name").
static void write_note(int fd, const char *what) {
    char host[256] = "?", when[64] = "?", line[600];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(line, sizeof line, "pid %ld on %s since %s%s%s\n", (long)getpid(), host, when, what ? ", " : "",
                     what ? what : "");
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    ssize_t noted = ftruncate(fd, 0) == 0 ? pwrite(fd, line, (size_t)n, 0) : -1;
    (void)noted;
}

// The shards of DIR whose lock notes name a live process of this host, "pid P on H
// since T, shard K/N of ..." joined by "; " into buf ("" when none). Only the notes are
// read: probing a shard's lock could refuse that shard starting at the same instant.
static void live_shard_holders(const char *dir, char *buf, size_t n) {
    buf[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t used = 0;
    struct dirent *de;
    while ((de = readdir(d)) && used + 1 < n) {
        int k, count, end = 0;
        if (sscanf(de->d_name, ".lock-shard-%d-of-%d%n", &k, &count, &end) != 2 || de->d_name[end] != 0)
            continue;
        int fd = fp_open_beneath(dir, de->d_name, O_RDONLY, NULL, NULL);
        if (fd < 0)
            continue;
        char who[300];
        int alive;
        lock_holder(fd, who, sizeof who, &alive);
        close(fd);
        if (alive == 1)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "; " : "", who);
    }
    closedir(d);
}

// The folder locks of runner/matrix.h. Returns the descriptors to close (-1: none).
// matrix: this run's matrix (matrix_owner_describe), for the notes and messages.
static FpStatus take_locks(const char *dir, int sharded, int shard_index, int shard_count, const char *matrix,
                           FILE *progress, int fds[2], FpError *err) {
    fds[0] = fds[1] = -1;
    int missing = 0;
    FpError lerr = {0};
    fds[0] = fp_open_beneath(dir, ".lock", O_RDWR | O_CREAT, &missing, &lerr);
    if (fds[0] < 0)
        return fp_fail(err, lerr.code ? lerr.code : FP_EIO, "%s", lerr.msg);
    char who[300] = "", shards[1200] = "";
    int alive = -1;
    if (flock(fds[0], (sharded ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
        lock_holder(fds[0], who, sizeof who, &alive);
        // The note in .lock is a whole-matrix run's; shards hold .lock shared and leave
        // theirs in their own lock files. A note naming a process that has ended is an
        // old run's: the live holder, if any, is a shard.
        if (alive != 1)
            live_shard_holders(dir, shards, sizeof shards);
        if (alive != 1 && shards[0]) {
            char both[1700];
            if (alive == 0)
                snprintf(both, sizeof both, "%s; the note in .lock names %s, which has ended", shards, who);
            else
                snprintf(both, sizeof both, "%s", shards);
            close(fds[0]);
            fds[0] = -1;
            return locked_error(dir, both, err);
        }
        if (alive != 0) { // running, or not ours to check: say so at once
            close(fds[0]);
            fds[0] = -1;
            return locked_error(dir, who, err);
        }
        if (progress)
            fp_print_line(progress, "matrix: %s is locked by %s, which has stopped; waiting for its cell processes "
                          "to exit", dir, who);
    }
    // A run killed a moment ago may still have cell processes on their way out (they
    // hold the lock until they die): wait a little for them before giving up.
    int locked = 0;
    for (int tries = 0; tries < 100 && !(locked = flock(fds[0], (sharded ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0);
         tries++)
        usleep(50000);
    if (!locked) {
        close(fds[0]);
        fds[0] = -1;
        if (alive == 0) // the note's process is gone and no shard names itself: say so, not a dead PID
            return fp_fail(err, FP_EIO, "%s: another fedpriv matrix is writing this folder, but which is unknown: "
                           "the note in .lock names %s, which has ended, and no shard's lock names a live process "
                           "of this machine: wait for it to end, or use another --out folder", dir, who);
        return locked_error(dir, who[0] ? who : "a run of the whole matrix", err);
    }
    if (!sharded) {
        write_note(fds[0], NULL);
        return FP_OK;
    }
    char name[64];
    snprintf(name, sizeof name, ".lock-shard-%d-of-%d", shard_index + 1, shard_count);
    fds[1] = fp_open_beneath(dir, name, O_RDWR | O_CREAT, &missing, &lerr);
    if (fds[1] < 0 && lerr.code == FP_EFORMAT) { // a link or not a file: said as such
        close(fds[0]);
        fds[0] = -1;
        return fp_fail(err, lerr.code, "%s", lerr.msg);
    }
    if (fds[1] < 0 || flock(fds[1], LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[300] = "";
        if (fds[1] >= 0) {
            lock_holder(fds[1], holder, sizeof holder, &alive);
            if (alive == 0 && strlen(holder) + 16 < sizeof holder)
                strcat(holder, ", which has ended");
            close(fds[1]);
        }
        close(fds[0]);
        fds[0] = fds[1] = -1;
        if (e != EWOULDBLOCK)
            return fp_fail(err, FP_EIO, "%s: shard %d/%d of %s: cannot lock %s/%s: %s", dir, shard_index + 1,
                           shard_count, matrix, dir, name, strerror(e));
        return fp_fail(err, FP_EIO, "%s: shard %d/%d of %s is already running on this machine (%s)", dir,
                       shard_index + 1, shard_count, matrix, holder);
    }
    char what[4300];
    snprintf(what, sizeof what, "shard %d/%d of %s", shard_index + 1, shard_count, matrix);
    write_note(fds[1], what);
    return FP_OK;
}

static void release_locks(int fds[2]) {
    for (int k = 0; k < 2; k++)
        if (fds[k] >= 0)
            close(fds[k]);
}

// Who runs the cells, for the claims.
static cJSON *claim_who(const MatrixRunOptions *opt) {
    cJSON *who = cJSON_CreateObject();
    if (opt->shard_count > 1) {
        char sh[32];
        snprintf(sh, sizeof sh, "%d/%d", opt->shard_index + 1, opt->shard_count);
        cJSON_AddStringToObject(who, "shard", sh);
    }
    if (comm_size(opt->comm) > 1) {
        cJSON_AddNumberToObject(who, "rank", comm_rank(opt->comm));
        cJSON_AddNumberToObject(who, "ranks", comm_size(opt->comm));
    }
    if (opt->job && opt->job[0])
        cJSON_AddStringToObject(who, "job", opt->job);
    return who;
}

FpStatus matrix_check_out(const char *dir, FpError *err) {
    FP_TRY(fp_check_writable_dir(dir, err));
    int missing = 0;
    FpError lerr = {0};
    int fd = fp_open_beneath(dir, ".lock", O_RDONLY, &missing, &lerr);
    if (fd < 0)
        return missing ? FP_OK : fp_fail(err, lerr.code, "%s", lerr.msg);
    FpStatus st = FP_OK;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        char who[300];
        int alive;
        lock_holder(fd, who, sizeof who, &alive);
        if (alive != 0) // a stopped run's cells are left to matrix_run's wait
            st = locked_error(dir, who, err);
    } else
        flock(fd, LOCK_UN);
    close(fd);
    return st;
}

// Cell files in DIR/cells that are not cells of this matrix: cells of this matrix before
// an edit (matrix_owner.c keeps other matrices out), of another fedpriv version, or of
// a folder written before owners were recorded. Returns their number and the first
// one's name.
static int cmp_id(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int count_stale_cells(const Matrix *m, const char *dir, char *example, size_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/cells", dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    const char **ids = malloc(sizeof(char *) * (size_t)(m->n_cells ? m->n_cells : 1));
    if (!ids) {
        closedir(d);
        return 0;
    }
    for (int i = 0; i < m->n_cells; i++)
        ids[i] = m->cells[i].id;
    qsort(ids, (size_t)m->n_cells, sizeof *ids, cmp_id);
    int stale = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0 || de->d_name[0] == '.' || len > 200)
            continue;
        char stem[256];
        snprintf(stem, sizeof stem, "%.*s", (int)(len - 5), de->d_name);
        const char *key = stem;
        if (!bsearch(&key, ids, (size_t)m->n_cells, sizeof *ids, cmp_id) && stale++ == 0)
            snprintf(example, n, "cells/%s", de->d_name);
    }
    closedir(d);
    free(ids);
    return stale;
}

FpStatus matrix_run(Matrix *m, const char *dir, const MatrixRunOptions *opt_in, MatrixSummary *sum, FpError *err) {
    MatrixRunOptions opt = opt_in ? *opt_in : (MatrixRunOptions){.jobs = 1};
    if (opt.jobs < 1)
        opt.jobs = 1;
    int sharded = opt.shard_count > 1;
    int ranks = comm_size(opt.comm), rank = comm_rank(opt.comm);
    if (opt.jobs > 1 && m->base.backend->device != DEVICE_CPU)
        return fp_fail(err, FP_EPARAM, "--jobs %d: parallel cells need the cpu device (a GPU runs one cell at a time)",
                       opt.jobs);
    if (opt.jobs > 1 && ranks > 1)
        return fp_fail(err, FP_EPARAM, "--jobs %d under MPI: the %d ranks already run cells side by side (start more "
                       "ranks instead)", opt.jobs, ranks);
    if (sharded && (opt.shard_index < 0 || opt.shard_index >= opt.shard_count || opt.shard_count > SHARD_MAX))
        return fp_fail(err, FP_EPARAM, "--shard %d/%d: no such shard", opt.shard_index + 1, opt.shard_count);
    if (rank > 0)
        opt.progress = NULL; // rank 0 speaks for the job
    double t_start = fp_monotonic_seconds();
    char path[4200];
    // Every rank makes the folders (rank 0 first in practice; mkdir is idempotent) and
    // removes what dead writers on its own host left.
    FpStatus st = store_make_dirs(dir, err);
    snprintf(path, sizeof path, "%s/cells", dir);
    if (st == FP_OK)
        st = store_make_dirs(path, err);
    // The folder's matrix first (before the locks: a shard of another matrix is refused as
    // such, not as "already running"), then the locks.
    char matrix_name[4200];
    matrix_owner_describe(m, matrix_name, sizeof matrix_name);
    if (st == FP_OK && rank == 0)
        st = matrix_owner_claim(m, dir, err);
    int locks[2] = {-1, -1};
    if (st == FP_OK && rank == 0)
        st = take_locks(dir, sharded, opt.shard_index, opt.shard_count, matrix_name, opt.progress, locks, err);
    // The cells folder must be a folder inside DIR, not a link to somewhere else.
    struct stat cst;
    if (st == FP_OK && (lstat(path, &cst) != 0 || !S_ISDIR(cst.st_mode)))
        st = fp_fail(err, FP_EIO, "%s: not a folder (a symbolic link is not followed: cells are written only "
                     "inside the run folder)", path);
    // Nor is the reference-model cache, and no cell file is a link or a FIFO.
    if (st == FP_OK) {
        char refs[4200];
        snprintf(refs, sizeof refs, "%s/reference-models", dir);
        st = refcache_check_dir(refs, err);
    }
    if (st == FP_OK)
        st = store_check_files(dir, err);
    if (st == FP_OK)
        store_clean_leftovers(dir, rank == 0 && !sharded);
    int stale = 0;
    if (st == FP_OK && rank == 0) {
        char stale_example[300] = "";
        stale = count_stale_cells(m, dir, stale_example, sizeof stale_example);
        if (stale && opt.progress) {
            fp_print_line(opt.progress, "matrix: note: %s/cells holds %d cell file%s not of this matrix as it is "
                          "now (e.g. %s: from before an edit of it, or of another fedpriv version); report and check "
                          "read only this run's cells", dir, stale, stale == 1 ? "" : "s", stale_example);
            fflush(opt.progress);
        }
    }
    // This run's share: the shard's cells (the same on every rank and every host), or all.
    int *mine = calloc((size_t)(m->n_cells ? m->n_cells : 1), sizeof(int));
    int *todo = malloc(sizeof(int) * (size_t)(m->n_cells ? m->n_cells : 1));
    int *ran = calloc((size_t)(m->n_cells ? m->n_cells : 1), sizeof(int));
    uint64_t *costs = malloc(sizeof(uint64_t) * (size_t)(m->n_cells ? m->n_cells : 1));
    if (st == FP_OK && (!mine || !todo || !ran || !costs))
        st = fp_fail(err, FP_ENOMEM, "out of memory");
    if (st == FP_OK) {
        for (int i = 0; i < m->n_cells; i++)
            costs[i] = m->cells[i].cost;
        if (sharded) {
            st = shard_assign(costs, m->n_cells, opt.shard_count, todo, err);
            for (int i = 0; st == FP_OK && i < m->n_cells; i++)
                mine[i] = todo[i] == opt.shard_index;
        } else
            for (int i = 0; i < m->n_cells; i++)
                mine[i] = 1;
    }
    int n = 0, skipped = 0, n_mine = 0, retrying = 0;
    if (st == FP_OK) {
        for (int i = 0; i < m->n_cells; i++) {
            Cell *c = &m->cells[i];
            c->message[0] = 0;
            c->seconds = 0;
            c->status = CELL_PENDING;
            c->disk_mtime_ns = c->disk_size = -2; // unknown: read now
            refresh_status(c, dir);
            if (!mine[i])
                continue;
            n_mine++;
            if (cell_settled(c, opt.keep_diverged))
                skipped++;
            else {
                retrying += c->status == CELL_DIVERGED;
                todo[n++] = i;
            }
        }
        // The reference cell (no defense) runs first: the others read its attacks' results.
        for (int t = 1; t < n; t++)
            if (todo[t] == m->reference_cell) {
                memmove(todo + 1, todo, sizeof(int) * (size_t)t);
                todo[0] = m->reference_cell;
            }
        if (rank == 0)
            st = matrix_index_write(m, dir, 1, err);
    }
    int prepared = st == FP_OK; // the folder is ours to write
    int threads = m->base.threads;
    if (opt.jobs > 1)
        threads = threads / opt.jobs > 0 ? threads / opt.jobs : 1;
    int par = ranks > 1 ? ranks : opt.jobs;
    MatrixProgress pr = {.out = opt.progress, .total = n_mine, .finished = skipped, .jobs = par, .remaining = n,
                         .seeds = m->n_seeds};
    if (st == FP_OK && opt.progress) {
        char share[64] = "";
        if (sharded)
            snprintf(share, sizeof share, "shard %d/%d: ", opt.shard_index + 1, opt.shard_count);
        if (sharded)
            fprintf(opt.progress, "matrix: %s%d cells (%d attacks each), %d already finished, %d to run\n", share,
                    n_mine, m->n_attacks, skipped, n);
        else
            fprintf(opt.progress, "matrix: %d cells (%d settings x %d seed%s, %d attacks each), %d already finished, "
                    "%d to run\n", n_mine, m->n_settings, m->n_seeds, m->n_seeds == 1 ? "" : "s", m->n_attacks, skipped,
                    n);
        if (sharded) {
            double part = 0, all = 0;
            for (int i = 0; i < m->n_cells; i++) {
                all += (double)m->cells[i].cost;
                part += mine[i] ? (double)m->cells[i].cost : 0;
            }
            fprintf(opt.progress, "matrix: shard %d/%d holds %d of the %d cells, %.1f%% of the estimated work\n",
                    opt.shard_index + 1, opt.shard_count, n_mine, m->n_cells, all > 0 ? 100 * part / all : 0);
        }
        if (retrying)
            fprintf(opt.progress, "matrix: %d of them diverged on an earlier run and %s retried once "
                    "(--keep-diverged keeps diverged cells as they are)\n", retrying, retrying == 1 ? "is" : "are");
        if (opt.jobs > 1 && n > 0)
            fprintf(opt.progress, "matrix: %d cells at a time, %d thread%s each\n", opt.jobs, threads,
                    threads == 1 ? "" : "s");
        if (ranks > 1)
            fprintf(opt.progress, "matrix: %d MPI ranks, cells handed out from rank 0, largest first\n", ranks);
        fflush(opt.progress);
    }
    cJSON *who = claim_who(&opt);
    CellRunContext rc = {.dir = dir, .threads = threads, .verbose = opt.verbose, .who = who};
    if (ranks > 1) {
        // The cells to run, largest first. Every rank takes part in the hand-out even
        // after an error here (rank 0 then tells the others to stop): a rank that left
        // early would leave the others waiting.
        int *order = st == FP_OK ? fp_malloc(sizeof(int) * (size_t)(m->n_cells ? m->n_cells : 1), err) : NULL;
        if (st == FP_OK && !order)
            st = FP_ENOMEM;
        n = 0;
        if (order) {
            shard_order_by_cost(costs, m->n_cells, order);
            for (int t = 0; t < m->n_cells; t++) {
                if (mine[order[t]] && !cell_settled(&m->cells[order[t]], opt.keep_diverged))
                    todo[n++] = order[t];
            }
            free(order);
        }
        st = matrix_run_ranks(m, opt.comm, &rc, todo, n, st, &pr, ran, err);
    } else if (st == FP_OK && opt.jobs > 1 && n > 1)
        st = run_forked(m, &rc, todo, n, opt.jobs, &pr, ran, err);
    else
        for (int t = 0; t < n && st == FP_OK; t++) {
            Cell *c = &m->cells[todo[t]];
            if (opt.progress) {
                if (m->n_seeds > 1)
                    fp_print_line(opt.progress, "matrix: running %s (seed %llu)", c->label, (unsigned long long)c->seed);
                else
                    fp_print_line(opt.progress, "matrix: running %s", c->label);
                fflush(opt.progress);
            }
            CellOutcome out;
            st = matrix_cell_execute(m, todo[t], &rc, &out, err);
            if (st == FP_OK) {
                c->status = out.status;
                snprintf(c->message, sizeof c->message, "%s", out.message);
                c->seconds = out.seconds;
                ran[todo[t]] = 1;
                matrix_progress_cell(&pr, c, dir, "");
                st = matrix_index_write(m, dir, 0, err);
            }
        }
    cJSON_Delete(who);
    MatrixSummary s = {.cells = m->n_cells, .mine = n_mine, .skipped = skipped, .stale = stale, .seconds = fp_monotonic_seconds() - t_start};
    for (int i = 0; prepared && i < m->n_cells; i++) {
        if (rank == 0 || ran[i]) // a worker rank knows only its own cells
            refresh_status(&m->cells[i], dir);
        CellStatus cs = m->cells[i].status;
        s.matrix_finished += cs == CELL_DONE || cs == CELL_DIVERGED;
        if (!mine[i] || (rank > 0 && !ran[i]))
            continue;
        switch (cs) {
        case CELL_DONE: s.done++; break;
        case CELL_DIVERGED: s.diverged++; break;
        case CELL_FAILED: s.failed++; break;
        default: s.pending++; break;
        }
    }
    if (rank == 0 && prepared) {
        FpError ierr = {0};
        FpStatus is = index_write_final(m, dir, &ierr); // the last look: what every writer finished
        if (st == FP_OK && is != FP_OK) {
            st = is;
            if (err)
                *err = ierr;
        }
    }
    if (sum)
        *sum = s;
    free(mine);
    free(todo);
    free(ran);
    free(costs);
    release_locks(locks);
    return st;
}
