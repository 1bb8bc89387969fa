// libFuzzer target: matrix files (runner/matrix.c matrix_load: the file's own keys,
// every defense's ε list and sweep, every attack's parameters, all validated before
// any training) and the run files a report reads back (matrix_results_load).
//
// Byte 0 even: the rest is a matrix file. Its "dataset" object's "name" and "path" are
// replaced by a tiny CSV (as in fuzz_config.c), so a run costs no dataset load; inputs
// whose "model.hidden" asks for more than 2^22 weights, or whose lists expand into more
// than 256 cells (each validated through a federation set-up: a large legitimate matrix
// takes seconds, which the 5 s timeout would call a hang; the size limit itself is
// checked before expansion and tested in tests/test_hostile.c), are skipped. Odd: the rest
// replaces one file of a fixed run directory (byte 1 picks results.json or a cell
// file) and the run is read back.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "fuzz/fuzz_run_dir.h"
#include "fuzz/fuzz_util.h"
#include "runner/matrix.h"

static char dir[128], csv_path[192];

static void cleanup(void) {
    fuzz_run_dir_remove(dir);
    unlink(csv_path);
    rmdir(dir);
}

static void setup(void) {
    snprintf(dir, sizeof dir, "%s", fuzz_tmpdir());
    fuzz_run_dir_make(dir);
    snprintf(csv_path, sizeof csv_path, "%s/tiny.csv", dir);
    char text[2048] = "a,b,c,d,label\n";
    for (int i = 0; i < 36; i++) {
        char row[64];
        snprintf(row, sizeof row, "%d,%d,%d,%d,%d\n", i % 5, (i * 7) % 11, i % 3, (i * 3) % 7, i % 3);
        strcat(text, row);
    }
    fuzz_write(csv_path, text, strlen(text));
    atexit(cleanup);
}

// The cells the defense lists expand into (the product of each entry's list lengths).
static double requested_cells(const cJSON *root) {
    double total = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "defenses")) {
        double cells = 1;
        const cJSON *eps = cJSON_GetObjectItemCaseSensitive(e, "epsilon");
        if (cJSON_IsArray(eps))
            cells *= cJSON_GetArraySize(eps);
        const cJSON *l;
        cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(e, "sweep")) {
            if (cJSON_IsArray(l))
                cells *= cJSON_GetArraySize(l);
        }
        total += cells;
    }
    return total;
}

static double requested_weights(const cJSON *root) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *h = m ? cJSON_GetObjectItemCaseSensitive(m, "hidden") : NULL;
    double total = 0, prev = 16;
    for (const cJSON *e = h ? h->child : NULL; e; e = e->next)
        if (cJSON_IsNumber(e)) {
            double v = e->valuedouble > 0 ? e->valuedouble : 0;
            total += 4 * v * (v + prev);
            prev = v;
        }
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0])
        setup();
    if (size < 2)
        return 0;
    FpError err = {0};
    if ((data[0] & 1) == 0) {
        const char *path = fuzz_file(0, data + 1, size - 1);
        cJSON *root = NULL;
        if (jv_load_file(path, &root, &err) != FP_OK) {
            fuzz_check_message(err.msg);
            return 0;
        }
        fuzz_check_tree(root);
        if (cJSON_IsObject(root) && requested_weights(root) <= (double)(1 << 22) && requested_cells(root) <= 256) {
            cJSON *dj = cJSON_GetObjectItemCaseSensitive(root, "dataset");
            if (cJSON_IsObject(dj)) {
                cJSON_DeleteItemFromObjectCaseSensitive(dj, "name");
                cJSON_DeleteItemFromObjectCaseSensitive(dj, "path");
                cJSON_AddStringToObject(dj, "name", "csv");
                cJSON_AddStringToObject(dj, "path", csv_path);
            }
            MatrixOptions opt = {.device = "cpu", .threads = 1, .file = "matrix.json"};
            Matrix *m = NULL;
            if (matrix_load(root, &opt, &m, &err) == FP_OK) {
                for (int i = 0; i < matrix_cell_count(m); i++)
                    if (!matrix_cell_id(m, i) || !matrix_cell_label(m, i))
                        abort();
                matrix_free(m);
            } else {
                if (m)
                    abort(); // failure must leave the output NULL
                fuzz_check_message(err.msg);
            }
        }
        cJSON_Delete(root);
        return 0;
    }
    char p[512];
    int which = data[1] % 4; // 0: index, 1-3: a cell
    if (which == 0)
        snprintf(p, sizeof p, "%s/results.json", dir);
    else
        snprintf(p, sizeof p, "%s/cells/%s.json", dir, fuzz_cell_ids[which - 1]);
    fuzz_write(p, data + 2, size - 2);
    MatrixResults r;
    if (matrix_results_load(dir, &r, &err) == FP_OK)
        matrix_results_free(&r);
    else
        fuzz_check_message(err.msg);
    fuzz_run_dir_make(dir);
    return 0;
}
