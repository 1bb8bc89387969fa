// The initial weights of a model as an experiment draws them (model_init with the
// experiment's seed), for the PyTorch port of Inverting Gradients (bench/ig_bench.py):
// the observed round of bench/run-ig.sh is each victim's first participation, round 1,
// whose global weights are these. Writes the flat float32 parameters (layer order
// conv1.weight, conv1.bias, ..., as PyTorch's state_dict) to OUT and prints one JSON
// line with the layer names and shapes.
// Usage: ig_weights MODEL INIT SEED OUT       (Fashion-MNIST shape 1×28×28, 10 classes)
#include <stdio.h>
#include <stdlib.h>

#include "models/model.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: ig_weights MODEL INIT SEED OUT\n");
        return 2;
    }
    char js[256];
    snprintf(js, sizeof js, "{\"name\": \"%s\", \"init\": \"%s\"}", argv[1], argv[2]);
    cJSON *mj = cJSON_Parse(js);
    DataShape shape = {.c = 1, .h = 28, .w = 28, .n_classes = 10};
    FpError err = {0};
    Model *m = mj ? model_create(mj, "model", &shape, backend_cpu(), &err) : NULL;
    cJSON_Delete(mj);
    if (!m) {
        fprintf(stderr, "ig_weights: %s\n", err.msg);
        return 2;
    }
    model_init(m, strtoull(argv[3], NULL, 10), NULL);
    FILE *f = fopen(argv[4], "wb");
    size_t np = m->table.n_params;
    if (!f || fwrite(m->params, sizeof(float), np, f) != np || fclose(f) != 0) {
        fprintf(stderr, "ig_weights: cannot write %s\n", argv[4]);
        model_free(m);
        return 2;
    }
    printf("{\"n_params\": %zu, \"layers\": [", np);
    for (int i = 0; i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        printf("%s{\"name\": \"%s\", \"shape\": [", i ? ", " : "", l->name);
        for (int d = 0; d < l->ndim; d++)
            printf("%s%d", d ? ", " : "", l->shape[d]);
        printf("]}");
    }
    printf("]}\n");
    model_free(m);
    return 0;
}
