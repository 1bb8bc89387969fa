// One matrix cell, executed here (runner/matrix_cell.h).
#include "runner/matrix_cell.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attacks/target.h"
#include "core/clock.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "core/proc.h"
#include "core/progress.h"
#include "core/rng_secure.h"
#include "runner/attack_registry.h"
#include "runner/cell_store.h"

void matrix_attack_title(const Matrix *m, int k, char *buf, size_t n) {
    const AttackSpec *as = &m->attacks[k];
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(as->model_json ? as->model_json : m->base.model_json, "name");
    const char *model_name = cJSON_IsString(model) ? model->valuestring : "?";
    if (as->observer)
        snprintf(buf, n, "%s (%s, %s)", as->ops->name, as->observer, model_name);
    else
        snprintf(buf, n, "%s (%s)", as->ops->name, model_name);
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
// The cell's status and why (the first attack's failure or divergence) are raised as
// this attack ends.
// reference: the entries of the cell's reference cell (matrix_reference_of), as its file
// has them ({"attacks": [...]}), or NULL.
static cJSON *run_attack(Matrix *m, const Cell *c, int k, const Experiment *cex, AttackCache *cache,
                         const cJSON *reference, const char *reference_id, const char *partial,
                         const CellRunContext *rc, CellStatus *status, char *why, size_t why_n) {
    AttackSpec *as = &m->attacks[k];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", as->ops->name);
    cJSON_AddNumberToObject(e, "index", k);
    if (as->observer)
        cJSON_AddStringToObject(e, "observer", as->observer);
    attack_name_model(m->base.model_json, as->model_json, e);
    cJSON_AddStringToObject(e, "headline", as->ops->headline ? as->ops->headline : "");
    cJSON_AddBoolToObject(e, "higher_leaks", as->ops->headline_higher_leaks);
    char rel[256], adir[4096 + 256];
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
        snprintf(refdir, sizeof refdir, "%s/reference-models", rc->dir);
        char title[160], label[300];
        matrix_attack_title(m, k, title, sizeof title);
        snprintf(label, sizeof label, "matrix: %.120s: %s", c->label, title);
        AttackEnv env = {.ex = &aex, .attack_json = as->json, .path = as->path, .out_dir = adir, .cache = cache,
                         .reference_dir = refdir, .quiet = !rc->verbose, .progress = rc->progress,
                         .progress_seconds = rc->progress_seconds, .progress_label = label};
        // The reference of an attack that decides whether it applies: this attack in the
        // cell without a defense of the same seed (cell_reference: read from its file, or
        // run here when it is not there yet, so that every way of running the matrix
        // decides alike).
        char source[160];
        if (as->ops->uses_reference && reference) {
            snprintf(source, sizeof source, "cell %s", reference_id);
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

// The cell's experiment: the matrix's, with the cell's seed (same RNG kind), threads and
// defense, and its own model initialised from that seed (NULL model: ferr says why).
static Experiment cell_experiment(const Matrix *m, const Cell *c, int threads, FpError *ferr) {
    Experiment cex = m->base;
    cex.seed = c->seed | (m->base.seed & RNG_SEED_SECURE);
    cex.threads = threads;
    cex.defense = c->ops;
    cex.defense_json = c->defense;
    cex.model = model_clone(m->base.model, m->base.backend, ferr);
    if (cex.model && model_init(cex.model, c->seed, ferr) != FP_OK) {
        model_free(cex.model);
        cex.model = NULL;
    }
    return cex;
}

// Trains the cell's federation round by round, with a progress line at most every
// rc->progress_seconds (the engine's own lines when verbose), and records the
// model's figures in j. *f is the federation (NULL when it could not be set up).
// Returns how training ended; a failure or divergence is also set in *status and why.
// ferr holds why cex has no model, if so.
static FpStatus cell_train(Experiment *cex, const Cell *c, const CellRunContext *rc, cJSON *j, Federation **f_out,
                           FpError *ferr, CellStatus *status, char *why, size_t why_n) {
    Federation *f = cex->model ? experiment_federation(cex, NULL, !rc->verbose, ferr) : NULL;
    FpStatus fst = f ? FP_OK : (ferr->code ? ferr->code : FP_ENOMEM);
    if (f) {
        FpProgress pr = fp_progress_start(rc->verbose ? NULL : rc->progress, cex->fed.rounds,
                                          rc->progress_seconds, rc->progress_seconds, "rounds",
                                          "matrix: %s: training", c->label);
        while (fst == FP_OK && fed_rounds_done(f) < cex->fed.rounds) { // fed_run's loop, with the line
            fst = fed_round_begin(f, NULL, ferr);
            if (fst == FP_OK)
                fst = fed_round_finish(f, ferr);
            if (fst == FP_OK)
                fp_progress_add(&pr, 1);
        }
    }
    cJSON *model = cJSON_AddObjectToObject(j, "model");
    if (f) {
        cJSON *resolved = fed_defense_json(f, fst == FP_OK ? ferr : NULL);
        if (!resolved && fst == FP_OK)   // its account ran out of memory: the cell fails, no NaN in it
            fst = ferr->code ? ferr->code : FP_ENOMEM;
        if (resolved)
            cJSON_AddItemToObject(j, "defense_resolved", resolved);
        int nr = fed_rounds_done(f);
        const FedRoundResult *last = nr > 0 ? fed_round_result(f, nr - 1) : NULL;
        jnum_add(model, "test_accuracy", last && fst == FP_OK ? last->test_accuracy : NAN);
        jnum_add(model, "test_loss", last && fst == FP_OK ? last->test_loss : NAN);
        if (!cex->test->n_classes)
            jnum_add(model, "test_mae", last && fst == FP_OK ? last->test_mae : NAN);
        cJSON_AddItemToObject(model, "rounds", fed_rounds_json(f, 1));
        cJSON *boom = fst == FP_OK ? fed_loss_explosion_json(f, cex->test->n_classes) : NULL;
        if (boom)
            cJSON_AddItemToObject(model, "loss_exploded", boom);
        if (last)
            cJSON_AddItemToObject(j, "privacy", privacy_record_json(&last->privacy));
    }
    if (fst == FP_EDIVERGED) {
        *status = CELL_DIVERGED;
        snprintf(why, why_n, "training: %.480s", ferr->msg);
        cJSON_AddNumberToObject(model, "diverged_round", f ? fed_rounds_done(f) : 0);
    } else if (fst != FP_OK) {
        *status = CELL_FAILED;
        snprintf(why, why_n, "training: %.480s", ferr->msg[0] ? ferr->msg : fp_status_name(fst));
    }
    *f_out = f;
    return fst;
}

// The reference cell r's result as its file has it, when it is done; else NULL.
static cJSON *reference_on_disk(const Matrix *m, int r, const char *dir) {
    const Cell *rcell = &m->cells[r];
    char rpath[4096];
    snprintf(rpath, sizeof rpath, "cells/%s.json", rcell->id);
    cJSON *reference = NULL;
    if (store_cell_status(dir, rcell->id, rcell->hash, NULL, 0) != CELL_DONE ||
        jv_load_beneath(dir, rpath, &reference, NULL, NULL) != FP_OK) {
        cJSON_Delete(reference);
        reference = NULL;
    }
    return reference;
}

// Attack k's entry when the federation did not train: no setting to attack, never a number.
static cJSON *skipped_attack(const Matrix *m, int k) {
    const AttackOps *ops = m->attacks[k].ops;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", ops->name);
    cJSON_AddNumberToObject(e, "index", k);
    cJSON_AddStringToObject(e, "headline", ops->headline ? ops->headline : "");
    cJSON_AddBoolToObject(e, "higher_leaks", ops->headline_higher_leaks);
    cJSON_AddStringToObject(e, "status", "skipped");
    cJSON_AddNullToObject(e, "value");
    cJSON_AddStringToObject(e, "message", "not run: the federation did not train");
    return e;
}

static int same_model(const cJSON *a, const cJSON *b);

// The attacks that take a reference, run against reference cell r here, as its file
// would have them ({"attacks": [...]}: the others as skipped): when r has not finished
// where this process can read it (another shard or rank runs it, or runs it now). They
// run exactly as in cell r (its seed, no defense, their own targets), so the entries
// equal its file's, and the cell's result does not depend on which way the matrix ran.
// Their artifacts go to a scratch folder in the cell's work folder, removed after.
static cJSON *reference_run_here(Matrix *m, int r, const Experiment *cex, const char *partial,
                                 const CellRunContext *rc, const char *label) {
    const Cell *rcell = &m->cells[r];
    Experiment rex = *cex;
    rex.seed = rcell->seed | (m->base.seed & RNG_SEED_SECURE);
    rex.defense = rcell->ops;
    rex.defense_json = rcell->defense;
    if (rc->progress || rc->verbose)
        fp_print_line(rc->progress ? rc->progress : stderr,
                      "matrix: %s: running the attacks of cell %s here, its reference (its result is not on disk yet)",
                      label, rcell->id);
    char scratch[4096 + 128];
    snprintf(scratch, sizeof scratch, "%s/reference-%s", partial, rcell->id);
    cJSON *j = cJSON_CreateObject(), *atk = cJSON_AddArrayToObject(j, "attacks");
    AttackCache **caches = calloc((size_t)(m->n_attacks ? m->n_attacks : 1), sizeof(AttackCache *));
    for (int k = 0; k < m->n_attacks; k++) {
        if (!m->attacks[k].ops->uses_reference) {
            cJSON_AddItemToArray(atk, skipped_attack(m, k));
            continue;
        }
        int owner = k;
        for (int o = 0; o < k && owner == k; o++)
            if (m->attacks[o].ops->uses_reference && same_model(m->attacks[o].model_json, m->attacks[k].model_json))
                owner = o;
        if (caches && !caches[owner])
            caches[owner] = attack_cache_create();
        CellStatus ignored = CELL_DONE; // its failure is cell r's, read from its entry here
        char why[512];
        cJSON_AddItemToArray(atk, run_attack(m, rcell, k, &rex, caches ? caches[owner] : NULL, NULL, NULL, scratch,
                                             rc, &ignored, why, sizeof why));
    }
    for (int k = 0; caches && k < m->n_attacks; k++)
        attack_cache_free(caches[k]);
    free(caches);
    store_rm_tree(scratch);
    return j;
}

// Every attack of the matrix against the trained cell → j's "attacks" list, with a
// progress line at most every rc->progress_seconds naming the attack that runs next.
static void cell_attacks(Matrix *m, int i, const Experiment *cex, FpStatus trained, const char *partial,
                         const CellRunContext *rc, cJSON *j, CellStatus *status, char *why, size_t why_n) {
    const Cell *c = &m->cells[i];
    cJSON *atk = cJSON_AddArrayToObject(j, "attacks");
    if (trained != FP_OK) {
        for (int k = 0; k < m->n_attacks; k++)
            cJSON_AddItemToArray(atk, skipped_attack(m, k));
        return;
    }
    // The attacks of a cell share trained targets (attacks/target.h): a membership
    // target or shadow model trained for one attack is reused by the next. Reference
    // models also go to DIR/reference-models/ (attacks/refcache.h), shared by every cell,
    // shard and rerun that trains the same model.
    // The cache keys targets by their options, not by the architecture, so attacks with
    // a model of their own ("model" in the attack object) share only with the same model.
    AttackCache **caches = calloc((size_t)(m->n_attacks ? m->n_attacks : 1), sizeof(AttackCache *));
    int r = matrix_reference_of(m, i);
    cJSON *reference = r >= 0 ? reference_on_disk(m, r, rc->dir) : NULL;
    if (r >= 0 && !reference)
        reference = reference_run_here(m, r, cex, partial, rc, c->label);
    FpProgress pr = fp_progress_start(rc->verbose ? NULL : rc->progress, m->n_attacks, rc->progress_seconds,
                                      rc->progress_seconds, "attacks", "matrix: %s: attacks", c->label);
    for (int k = 0; k < m->n_attacks; k++) {
        char title[160];
        matrix_attack_title(m, k, title, sizeof title);
        if (rc->verbose)
            fp_print_line(stderr, "matrix: %s: attack %s", c->label, title);
        int owner = k;
        for (int o = 0; o < k && owner == k; o++)
            if (same_model(m->attacks[o].model_json, m->attacks[k].model_json))
                owner = o;
        if (caches && !caches[owner])
            caches[owner] = attack_cache_create();
        AttackCache *cache = caches ? caches[owner] : NULL;
        cJSON_AddItemToArray(atk, run_attack(m, c, k, cex, cache, reference, r >= 0 ? m->cells[r].id : NULL, partial, rc, status,
                                             why, why_n));
        // The line, when due, says what was done and what runs next.
        if (k + 1 < m->n_attacks) {
            matrix_attack_title(m, k + 1, title, sizeof title);
            snprintf(pr.label, sizeof pr.label, "matrix: %.120s: attacks, next %.100s", c->label, title);
        }
        fp_progress_add(&pr, 1);
    }
    cJSON_Delete(reference);
    for (int k = 0; caches && k < m->n_attacks; k++)
        attack_cache_free(caches[k]);
    free(caches);
}

FpStatus matrix_cell_execute(Matrix *m, int i, const CellRunContext *rc, CellOutcome *out, FpError *err) {
    const Cell *c = &m->cells[i];
    const char *dir = rc->dir;
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
    Experiment cex = cell_experiment(m, c, rc->threads, &ferr);
    Federation *f = NULL;
    FpStatus trained = cell_train(&cex, c, rc, j, &f, &ferr, &status, why, sizeof why);
    cell_attacks(m, i, &cex, trained, partial, rc, j, &status, why, sizeof why);
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
    cell_json_finish(j, status, why, out->seconds, rc->threads, retries);
    FpStatus st = store_commit(dir, c->id, c->hash, partial, j, &out->kept_existing, err);
    cJSON_Delete(j);
    out->status = status;
    // A message longer than the outcome's field is cut there (the cell's JSON keeps it whole).
    snprintf(out->message, sizeof out->message, "%.*s", (int)sizeof out->message - 1, why);
    if (st == FP_OK && out->kept_existing) // the result that stands is the other writer's
        out->status = store_cell_status(dir, c->id, c->hash, out->message, sizeof out->message);
    return st;
}

FpStatus matrix_cell_record_crash(Matrix *m, int i, const char *dir, const char *why, double seconds, int threads,
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
