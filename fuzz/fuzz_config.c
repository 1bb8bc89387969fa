// libFuzzer target: experiment config files (core/jsonv.c jv_load_file, then
// fl/experiment.c experiment_load, which validates every top-level key, fl/fed.c
// fed_config_parse, the defense name and the model config, and finally fed_create,
// which runs the defense's own parameter parser).
//
// The input is the config file. So that a run costs microseconds, not a dataset load,
// the "dataset" object's "name" and "path" are replaced by a tiny CSV written once to a
// private directory; its other keys (train_samples, test_samples, split, unknown keys)
// stay fuzzed. Inputs whose "model.hidden" asks for a model of more than 2^22 weights
// are skipped: a huge model is a legitimate request whose out-of-memory path
// tests/test_hardening.c checks deterministically (setrlimit in a forked child).
#include <cjson/cJSON.h>
#include <stdio.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "defenses/registry.h"
#include "fl/experiment.h"
#include "fuzz/fuzz_util.h"

static char csv_path[160];

static void cleanup(void) {
    unlink(csv_path);
    char dir[160];
    snprintf(dir, sizeof dir, "%s", csv_path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        rmdir(dir);
    }
}

static void setup(void) {
    snprintf(csv_path, sizeof csv_path, "%s/tiny.csv", fuzz_tmpdir());
    char text[2048] = "a,b,c,d,label\n";
    for (int i = 0; i < 36; i++) {
        char row[64];
        snprintf(row, sizeof row, "%d,%d,%d,%d,%d\n", i % 5, (i * 7) % 11, i % 3, (i * 3) % 7, i % 3);
        strcat(text, row);
    }
    fuzz_write(csv_path, text, strlen(text));
    atexit(cleanup);
}

// Rough weight count of the model the config asks for (mlp/lstm hidden sizes on the
// 4-feature data); 0 when it names none.
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
    if (!csv_path[0])
        setup();
    const char *path = fuzz_file(0, data, size);
    cJSON *root = NULL;
    FpError err = {0};
    if (jv_load_file(path, &root, &err) != FP_OK) {
        if (root)
            abort();
        fuzz_check_message(err.msg);
        return 0;
    }
    fuzz_check_tree(root);
    if (!cJSON_IsObject(root) || requested_weights(root) > (double)(1 << 22)) {
        cJSON_Delete(root);
        return 0;
    }
    cJSON *dj = cJSON_GetObjectItemCaseSensitive(root, "dataset");
    if (cJSON_IsObject(dj)) {
        cJSON_DeleteItemFromObjectCaseSensitive(dj, "name");
        cJSON_DeleteItemFromObjectCaseSensitive(dj, "path");
        cJSON_AddStringToObject(dj, "name", "csv");
        cJSON_AddStringToObject(dj, "path", csv_path);
    }
    Experiment ex;
    FpStatus st = experiment_load(root, NULL, NULL, 1, defense_find, &ex, &err);
    if (st == FP_OK) {
        Federation *f = experiment_federation(&ex, NULL, 1, &err);
        if (!f)
            fuzz_check_message(err.msg);
        fed_free(f);
        experiment_free(&ex);
    } else {
        fuzz_check_message(err.msg);
    }
    cJSON_Delete(root);
    return 0;
}
