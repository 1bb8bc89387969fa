// The matrix's index, DIR/results.json (runner/matrix_internal.h): written from the cell
// files alone, by whichever process, so concurrent writers agree.
#include "runner/matrix_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "reports/summary.h"
#include "runner/attack_registry.h"
#include "runner/cell_store.h"

int matrix_cell_settled(const Cell *c, int keep_diverged) {
    return c->status == CELL_DONE ||
           (c->status == CELL_DIVERGED && (keep_diverged || c->retries >= MATRIX_DIVERGED_RETRIES));
}

// A settled cell stays so (runner/cell_store.h: a finished result is never replaced, a
// diverged one only by its retry), so it is not looked at again.
int matrix_cell_refresh(Cell *c, const char *dir) {
    if (matrix_cell_settled(c, 0) && c->disk_mtime_ns >= 0)
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
        changed |= matrix_cell_refresh(&m->cells[i], dir);
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

FpStatus matrix_index_write_final(Matrix *m, const char *dir, FpError *err) {
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
