// `mlp` (784-256-10 by default, ReLU between layers) and `logreg` (one linear layer).
// Inputs of any shape are flattened.
#include <stdio.h>
#include <stdlib.h>

#include "core/jsonv.h"
#include "models/model.h"

static int input_size(const DataShape *in) { return in->c * in->h * in->w; }
static int output_size(const DataShape *in) { return in->n_classes ? in->n_classes : in->target_dim; }

static FpStatus mlp_configure(ModelConfig *cfg, const cJSON *json, const char *path, const DataShape *in,
                              FpError *err) {
    static const char *const keys[] = {"name", "init", "hidden", NULL};
    FP_TRY(jv_keys(json, path, keys, err));
    double *h = NULL;
    int n = 0;
    FP_TRY(jv_number_array(json, path, "hidden", JV_OPTIONAL, 0, 8, &h, &n, err));
    if (!h) {
        cfg->hidden[0] = 256;
        cfg->n_hidden = 1;
        return FP_OK;
    }
    for (int i = 0; i < n; i++) {
        if (h[i] < 1 || h[i] > 1 << 20 || h[i] != (int)h[i]) {
            free(h);
            return fp_fail(err, FP_EPARAM, "%s.hidden[%d]: must be a positive integer", path, i);
        }
        cfg->hidden[i] = (int)h[i];
    }
    cfg->n_hidden = n;
    free(h);
    return FP_OK;
}

static FpStatus mlp_layout(Model *m, FpError *err) {
    int prev = input_size(&m->in);
    char name[48];
    for (int i = 0; i <= m->cfg.n_hidden; i++) {
        int out = i < m->cfg.n_hidden ? m->cfg.hidden[i] : output_size(&m->in);
        int ws[2] = {out, prev}, bs[1] = {out};
        snprintf(name, sizeof name, "fc%d.weight", i + 1);
        FP_TRY(model_add_layer(m, name, PARAM_WEIGHT, 2, ws, prev, err));
        snprintf(name, sizeof name, "fc%d.bias", i + 1);
        FP_TRY(model_add_layer(m, name, PARAM_BIAS, 1, bs, prev, err));
        prev = out;
    }
    return FP_OK;
}

static Var *mlp_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    int shape[2] = {x->t.shape[0], input_size(&m->in)};
    Var *h = ad_reshape(t, x, 2, shape);
    for (int i = 0; i <= m->cfg.n_hidden; i++) {
        h = ad_linear(t, h, p[2 * i], p[2 * i + 1]);
        if (i < m->cfg.n_hidden)
            h = ad_unary(t, UN_RELU, h);
    }
    return h;
}

const ModelOps model_mlp = {
    .name = "mlp",
    .summary = "multi-layer perceptron, ReLU (hidden sizes configurable; default 256)",
    .configure = mlp_configure,
    .layout = mlp_layout,
    .forward = mlp_forward,
    .dense_input = 1,
};

static FpStatus logreg_configure(ModelConfig *cfg, const cJSON *json, const char *path, const DataShape *in,
                                 FpError *err) {
    static const char *const keys[] = {"name", "init", NULL};
    FP_TRY(jv_keys(json, path, keys, err));
    cfg->n_hidden = 0;
    return FP_OK;
}

const ModelOps model_logreg = {
    .name = "logreg",
    .summary = "logistic (softmax) regression: one linear layer",
    .configure = logreg_configure,
    .layout = mlp_layout,
    .forward = mlp_forward,
    .dense_input = 1,
};
