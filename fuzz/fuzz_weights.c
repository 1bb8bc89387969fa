// libFuzzer target: model weight files, magic "FPMW" (models/model.c model_load).
//
// Byte 0 picks the receiving model (even: mlp with hidden [4]; odd: logreg), both on
// 1×2×2 inputs with 3 classes; the rest is the file. A load that succeeds must give
// finite-or-not floats without touching memory outside the model; a failed load must
// say why. The seeds are model_save outputs of exactly these models.
#include <cjson/cJSON.h>

#include "core/backend.h"
#include "fuzz/fuzz_util.h"
#include "models/model.h"

static Model *models[2];

static Model *make(const char *json) {
    cJSON *cfg = cJSON_Parse(json);
    DataShape shape = {.c = 1, .h = 2, .w = 2, .n_classes = 3};
    FpError err = {0};
    Model *m = model_create(cfg, "model", &shape, backend_cpu(), &err);
    cJSON_Delete(cfg);
    if (!m)
        abort();
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!models[0]) {
        models[0] = make("{\"name\": \"mlp\", \"hidden\": [4]}");
        models[1] = make("{\"name\": \"logreg\"}");
    }
    if (size < 1)
        return 0;
    Model *m = models[data[0] & 1];
    const char *path = fuzz_file(0, data + 1, size - 1);
    FpError err = {0};
    if (model_load(m, path, &err) != FP_OK)
        fuzz_check_message(err.msg);
    return 0;
}
