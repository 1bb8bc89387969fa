// The state of a matrix run's cells (runner/matrix_status.h).
#include "runner/matrix_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/jsonv.h"
#include "core/proc.h"
#include "reports/results.h"
#include "runner/cell_store.h"

static const char *const state_names[CELL_STATE_COUNT] = {"done", "diverged", "failed", "running", "missing"};

const char *cell_state_name(CellState s) { return s >= 0 && s < CELL_STATE_COUNT ? state_names[s] : "missing"; }

static void describe_age(double seconds, char *buf, size_t n) {
    if (seconds < 0)
        seconds = 0;
    if (seconds < 120)
        snprintf(buf, n, "%.0f s", seconds);
    else if (seconds < 7200)
        snprintf(buf, n, "%.0f min", seconds / 60);
    else
        snprintf(buf, n, "%.1f h", seconds / 3600);
}

// "node3, pid 4242, shard 2/4, rank 1, job slurm 77_2, for 3 min" from a claim.
static void describe_claim(const cJSON *c, char *buf, size_t n) {
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(c, "host");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(c, "pid");
    const cJSON *shard = cJSON_GetObjectItemCaseSensitive(c, "shard");
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(c, "rank");
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(c, "job");
    const cJSON *started = cJSON_GetObjectItemCaseSensitive(c, "started");
    size_t k = (size_t)snprintf(buf, n, "%s, pid %.0f", cJSON_IsString(host) ? host->valuestring : "?",
                                cJSON_IsNumber(pid) ? pid->valuedouble : 0);
    if (cJSON_IsString(shard) && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", shard %s", shard->valuestring);
    if (cJSON_IsNumber(rank) && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", rank %.0f", rank->valuedouble);
    if (cJSON_IsString(job) && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", job %s", job->valuestring);
    if (cJSON_IsNumber(started) && k < n) {
        char age[32];
        describe_age(difftime(time(NULL), (time_t)started->valuedouble), age, sizeof age);
        snprintf(buf + k, n - k, ", for %s", age);
    }
}

FpStatus matrix_status_load(const char *dir, MatrixStatus *out, FpError *err) {
    memset(out, 0, sizeof *out);
    char path[4200];
    snprintf(path, sizeof path, "%s/results.json", dir);
    cJSON *ix = NULL;
    // The index and the cells through the one opener (core/files.h): a link or a FIFO
    // is refused with its name, never followed or waited on.
    FP_TRY(jv_load_beneath(dir, "results.json", &ix, NULL, err));
    FpStatus cst = store_check_files(dir, err);
    if (cst != FP_OK) {
        cJSON_Delete(ix);
        return cst;
    }
    cJSON *cells = cJSON_GetObjectItemCaseSensitive(ix, "cells");
    if (!cJSON_IsObject(ix) || !cJSON_IsArray(cells)) {
        cJSON_Delete(ix);
        return fp_fail(err, FP_EFORMAT, "%s: not a fedpriv matrix index (no \"cells\" list)", path);
    }
    int n = cJSON_GetArraySize(cells);
    out->cells = calloc((size_t)(n ? n : 1), sizeof(MatrixStatusCell));
    if (!out->cells) {
        cJSON_Delete(ix);
        return fp_fail(err, FP_ENOMEM, "out of memory reading %s", path);
    }
    int counts[4] = {0}, changed = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_GetArrayItem(cells, i);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *hash = cJSON_GetObjectItemCaseSensitive(e, "spec_hash");
        const cJSON *label = cJSON_GetObjectItemCaseSensitive(e, "label");
        if (!cJSON_IsString(id) || !results_id_is_safe(id->valuestring) || !cJSON_IsString(hash)) {
            matrix_status_free(out);
            cJSON_Delete(ix);
            return fp_fail(err, FP_EFORMAT, "%s: cells[%d]: needs a plain \"id\" and a \"spec_hash\"", path, i);
        }
        MatrixStatusCell *sc = &out->cells[out->n++];
        snprintf(sc->id, sizeof sc->id, "%s", id->valuestring);
        snprintf(sc->label, sizeof sc->label, "%s", cJSON_IsString(label) ? label->valuestring : id->valuestring);
        char message[256];
        CellStatus cs = store_cell_status(dir, sc->id, hash->valuestring, message, sizeof message);
        counts[cs]++;
        // The index, rebuilt from the cell file.
        const cJSON *was = cJSON_GetObjectItemCaseSensitive(e, "status");
        if (!cJSON_IsString(was) || strcmp(was->valuestring, cell_status_name(cs)) != 0) {
            cJSON_ReplaceItemInObjectCaseSensitive(e, "status", cJSON_CreateString(cell_status_name(cs)));
            cJSON_DeleteItemFromObjectCaseSensitive(e, "message");
            if (message[0])
                cJSON_AddStringToObject(e, "message", message);
            changed = 1;
        }
        if (cs == CELL_DONE || cs == CELL_DIVERGED) {
            sc->state = cs == CELL_DONE ? CELL_STATE_DONE : CELL_STATE_DIVERGED;
            snprintf(sc->detail, sizeof sc->detail, "%s", message);
        } else {
            // Not finished: a live claim means running (a failed cell being retried too).
            cJSON *claim = store_claim_read(dir, sc->id);
            const cJSON *tag = cJSON_GetObjectItemCaseSensitive(claim, "tag");
            const cJSON *ch = cJSON_GetObjectItemCaseSensitive(claim, "spec_hash");
            int ours = claim && cJSON_IsString(ch) && strcmp(ch->valuestring, hash->valuestring) == 0;
            char who[300];
            if (ours)
                describe_claim(claim, who, sizeof who);
            if (ours && cJSON_IsString(tag) && proc_tag_is_dead(tag->valuestring)) {
                sc->state = cs == CELL_FAILED ? CELL_STATE_FAILED : CELL_STATE_MISSING;
                snprintf(sc->detail, sizeof sc->detail, "interrupted: its writer died (%s)", who);
            } else if (ours) {
                sc->state = CELL_STATE_RUNNING;
                snprintf(sc->detail, sizeof sc->detail, "%s", who);
            } else {
                sc->state = cs == CELL_FAILED ? CELL_STATE_FAILED : CELL_STATE_MISSING;
                snprintf(sc->detail, sizeof sc->detail, "%s", cs == CELL_FAILED ? message : "");
            }
            cJSON_Delete(claim);
        }
        out->counts[sc->state]++;
    }
    FpStatus st = FP_OK;
    if (changed) {
        cJSON *cn = cJSON_CreateObject();
        for (int s = 0; s < 4; s++)
            cJSON_AddNumberToObject(cn, cell_status_name((CellStatus)s), counts[s]);
        if (cJSON_GetObjectItemCaseSensitive(ix, "counts"))
            cJSON_ReplaceItemInObjectCaseSensitive(ix, "counts", cn);
        else
            cJSON_AddItemToObject(ix, "counts", cn);
        st = jv_write_file_atomic(path, ix, err);
    }
    cJSON_Delete(ix);
    if (st != FP_OK)
        matrix_status_free(out);
    return st;
}

void matrix_status_free(MatrixStatus *s) {
    free(s->cells);
    memset(s, 0, sizeof *s);
}

cJSON *matrix_status_json(const MatrixStatus *s, const char *dir) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "dir", dir);
    cJSON_AddNumberToObject(j, "cells", s->n);
    cJSON *cn = cJSON_AddObjectToObject(j, "counts");
    for (int k = 0; k < CELL_STATE_COUNT; k++)
        cJSON_AddNumberToObject(cn, cell_state_name((CellState)k), s->counts[k]);
    cJSON *list = cJSON_AddArrayToObject(j, "list");
    for (int i = 0; i < s->n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", s->cells[i].id);
        cJSON_AddStringToObject(e, "label", s->cells[i].label);
        cJSON_AddStringToObject(e, "state", cell_state_name(s->cells[i].state));
        cJSON_AddStringToObject(e, "detail", s->cells[i].detail);
        cJSON_AddItemToArray(list, e);
    }
    return j;
}
