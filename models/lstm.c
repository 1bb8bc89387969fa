// `lstm`: one-layer LSTM for sequence regression (load forecasting) with a linear head
// on the last hidden state. Input x is (n, steps, features) (DataShape c=1, h=steps,
// w=features). Gates in PyTorch's order i, f, g, o:
//   z = x_t W_ihᵀ + h W_hhᵀ + b;  i,f,o = σ(z_·), g = tanh(z_g)
//   c = f ⊙ c + i ⊙ g;  h = o ⊙ tanh(c)
// Built from differentiable ops, so DLG can differentiate its gradients.
#include "core/jsonv.h"
#include "models/model.h"

#include <math.h>
#include <stdlib.h>

#include "core/rng.h"

static FpStatus lstm_configure(ModelConfig *cfg, const cJSON *json, const char *path, const DataShape *in,
                               FpError *err) {
    static const char *const keys[] = {"name", "init", "hidden", NULL};
    FP_TRY(jv_keys(json, path, keys, err));
    long long h;
    FP_TRY(jv_int(json, path, "hidden", JV_OPTIONAL, 32, 1, 4096, &h, err));
    cfg->hidden[0] = (int)h;
    cfg->n_hidden = 1;
    if (in->c != 1 || in->h < 1)
        return fp_fail(err, FP_EPARAM, "%s.name: lstm needs sequence data (steps × features)", path);
    return FP_OK;
}

static FpStatus lstm_layout(Model *m, FpError *err) {
    int H = m->cfg.hidden[0], F = m->in.w, out = m->in.target_dim ? m->in.target_dim : m->in.n_classes;
    int wih[2] = {4 * H, F}, whh[2] = {4 * H, H}, b[1] = {4 * H}, hw[2] = {out, H}, hb[1] = {out};
    FP_TRY(model_add_layer(m, "lstm.weight_ih", PARAM_WEIGHT, 2, wih, H, err));
    FP_TRY(model_add_layer(m, "lstm.weight_hh", PARAM_WEIGHT, 2, whh, H, err));
    FP_TRY(model_add_layer(m, "lstm.bias", PARAM_BIAS, 1, b, H, err));
    FP_TRY(model_add_layer(m, "head.weight", PARAM_WEIGHT, 2, hw, H, err));
    return model_add_layer(m, "head.bias", PARAM_BIAS, 1, hb, H, err);
}

// One step; the gate pre-activations z = x_t W_ihᵀ + h W_hhᵀ + b are (n, 4H), order i,f,g,o.
// The probe sees the inputs of the sigmoid gates i, f and o.
Var *lstm_step(Tape *t, Var *const *p, Var *x_t, Var **h, Var **c, int H, const ModelProbe *probe) {
    Var *z = ad_add(t, ad_linear(t, x_t, p[0], p[2]), ad_matmul(t, *h, p[1], 0, 1));
    Var *zi = ad_slice(t, z, 1, 0, H), *i = ad_unary(t, UN_SIGMOID, zi);
    Var *zf = ad_slice(t, z, 1, H, H), *f = ad_unary(t, UN_SIGMOID, zf);
    Var *g = ad_unary(t, UN_TANH, ad_slice(t, z, 1, 2 * H, H));
    Var *zo = ad_slice(t, z, 1, 3 * H, H), *o = ad_unary(t, UN_SIGMOID, zo);
    if (probe && probe->sigmoid_input && zi && zf && zo) {
        probe->sigmoid_input(probe->ctx, "lstm", t, zi);
        probe->sigmoid_input(probe->ctx, "lstm", t, zf);
        probe->sigmoid_input(probe->ctx, "lstm", t, zo);
    }
    *c = ad_add(t, ad_mul(t, f, *c), ad_mul(t, i, g));
    *h = ad_mul(t, o, ad_unary(t, UN_TANH, *c));
    return z;
}

static Var *lstm_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    int n = x->t.shape[0], T = m->in.h, F = m->in.w, H = m->cfg.hidden[0];
    int s3[3] = {n, T, F}, s2[2] = {n, F}, hs[2] = {n, H};
    Var *x3 = ad_reshape(t, x, 3, s3);
    Var *h = ad_full(t, 2, hs, 0.0f), *c = ad_full(t, 2, hs, 0.0f);
    for (int step = 0; step < T; step++)
        lstm_step(t, p, ad_reshape(t, ad_slice(t, x3, 1, step, 1), 2, s2), &h, &c, H, probe);
    return ad_linear(t, h, p[3], p[4]);
}

// PyTorch's LSTM initialisation: every parameter U(±1/√hidden).
static void lstm_init(Model *m, float *host, uint64_t seed) {
    RngStream rs = rng_stream(seed, RNG_INIT, 0, 0);
    double bound = 1.0 / sqrt((double)m->cfg.hidden[0]);
    for (size_t k = 0; k < m->table.n_params; k++)
        host[k] = (float)((2.0 * rng_next_uniform(&rs) - 1.0) * bound);
}

const ModelOps model_lstm = {
    .name = "lstm",
    .summary = "one-layer LSTM (sigmoid gates, tanh paths) + linear head, sequence regression",
    .configure = lstm_configure,
    .layout = lstm_layout,
    .init = lstm_init,
    .forward = lstm_forward,
};
