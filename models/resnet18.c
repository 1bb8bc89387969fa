// `resnet18`, CIFAR style (He et al. 2016; the common CIFAR variant): 3×3 stem conv
// (64, stride 1) + batch norm + ReLU, four stages of two BasicBlocks (64, 128, 256,
// 512 channels; stride 2 from the second stage, 1×1 conv + BN shortcuts when the shape
// changes), global average pooling, linear classifier. Convolutions have no bias.
// Batch-norm running statistics are non-trainable layers of the flat buffer
// (PARAM_BN_STAT): sent and averaged with the model, never perturbed by a defense.
#include <stdio.h>
#include <stdlib.h>

#include "core/jsonv.h"
#include "models/model.h"

static FpStatus resnet_configure(ModelConfig *cfg, const cJSON *json, const char *path, const DataShape *in,
                                 FpError *err) {
    static const char *const keys[] = {"name", "init", NULL};
    FP_TRY(jv_keys(json, path, keys, err));
    if (in->h < 8 || in->w < 8 || !in->n_classes)
        return fp_fail(err, FP_EPARAM, "%s.name: resnet18 needs classification images of at least 8x8", path);
    return FP_OK;
}

static FpStatus add_conv(Model *m, const char *name, int c_out, int c_in, int k, FpError *err) {
    int ws[4] = {c_out, c_in, k, k};
    return model_add_layer(m, name, PARAM_WEIGHT, 4, ws, c_in * k * k, err);
}

static FpStatus add_bn(Model *m, const char *prefix, int c, FpError *err) {
    char n[48];
    int s[1] = {c};
    snprintf(n, sizeof n, "%s.weight", prefix);
    FP_TRY(model_add_layer(m, n, PARAM_BN_SCALE, 1, s, 0, err));
    snprintf(n, sizeof n, "%s.bias", prefix);
    FP_TRY(model_add_layer(m, n, PARAM_BN_SHIFT, 1, s, 0, err));
    snprintf(n, sizeof n, "%s.running_mean", prefix);
    FP_TRY(model_add_layer(m, n, PARAM_BN_STAT, 1, s, 0, err));
    snprintf(n, sizeof n, "%s.running_var", prefix);
    return model_add_layer(m, n, PARAM_BN_STAT, 1, s, 0, err);
}

static const int stage_channels[4] = {64, 128, 256, 512};

static int block_has_shortcut(int stage, int block) { return stage > 0 && block == 0; }

static FpStatus resnet_layout(Model *m, FpError *err) {
    FP_TRY(add_conv(m, "conv1.weight", 64, m->in.c, 3, err));
    FP_TRY(add_bn(m, "bn1", 64, err));
    int c_in = 64;
    char n[48];
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < 2; b++) {
            int c = stage_channels[s];
            snprintf(n, sizeof n, "layer%d.%d.conv1.weight", s + 1, b);
            FP_TRY(add_conv(m, n, c, c_in, 3, err));
            snprintf(n, sizeof n, "layer%d.%d.bn1", s + 1, b);
            FP_TRY(add_bn(m, n, c, err));
            snprintf(n, sizeof n, "layer%d.%d.conv2.weight", s + 1, b);
            FP_TRY(add_conv(m, n, c, c, 3, err));
            snprintf(n, sizeof n, "layer%d.%d.bn2", s + 1, b);
            FP_TRY(add_bn(m, n, c, err));
            if (block_has_shortcut(s, b)) {
                snprintf(n, sizeof n, "layer%d.%d.shortcut.weight", s + 1, b);
                FP_TRY(add_conv(m, n, c, c_in, 1, err));
                snprintf(n, sizeof n, "layer%d.%d.shortcut_bn", s + 1, b);
                FP_TRY(add_bn(m, n, c, err));
            }
            c_in = c;
        }
    int ws[2] = {m->in.n_classes, 512}, bs[1] = {m->in.n_classes};
    FP_TRY(model_add_layer(m, "fc.weight", PARAM_WEIGHT, 2, ws, 512, err));
    return model_add_layer(m, "fc.bias", PARAM_BIAS, 1, bs, 512, err);
}

// Batch norm over p[*k..*k+3] (γ, β, running mean, running var). Training mode uses
// batch statistics and updates the running ones in the parameter buffer (PyTorch:
// running = (1−m)·running + m·batch, with the unbiased batch variance).
static Var *batchnorm(const Model *m, Tape *t, Var *const *p, int *k, Var *x, int training) {
    Var *gamma = p[*k], *beta = p[*k + 1], *rm = p[*k + 2], *rv = p[*k + 3];
    *k += 4;
    if (!x)
        return NULL;
    int c = (int)gamma->t.numel;
    float *buf = malloc(sizeof(float) * 4 * (size_t)c);
    if (!buf)
        return NULL;
    float *mean = buf, *var = buf + c, *run_m = buf + 2 * c, *run_v = buf + 3 * c;
    const Backend *be = m->be;
    be->download(run_m, rm->t.data, sizeof(float) * c);
    be->download(run_v, rv->t.data, sizeof(float) * c);
    Var *y;
    if (training) {
        y = ad_batchnorm_train(t, x, gamma, beta, 1e-5f, mean, var);
        double count = (double)x->t.numel / c, mom = m->cfg.bn_momentum;
        for (int i = 0; y && i < c; i++) {
            run_m[i] = (float)((1 - mom) * run_m[i] + mom * mean[i]);
            run_v[i] = (float)((1 - mom) * run_v[i] + mom * var[i] * (count > 1 ? count / (count - 1) : 1));
        }
        if (y) {
            be->upload(rm->t.data, run_m, sizeof(float) * c);
            be->upload(rv->t.data, run_v, sizeof(float) * c);
        }
    } else
        y = ad_batchnorm_eval(t, x, gamma, beta, run_m, run_v, 1e-5f);
    free(buf);
    return y;
}

static Var *resnet_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    int k = 0;
    Var *h = ad_conv2d(t, x, p[k++], 1, 1);
    h = ad_unary(t, UN_RELU, batchnorm(m, t, p, &k, h, training));
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < 2; b++) {
            int stride = (s > 0 && b == 0) ? 2 : 1;
            Var *in = h;
            Var *o = ad_conv2d(t, in, p[k++], stride, 1);
            o = ad_unary(t, UN_RELU, batchnorm(m, t, p, &k, o, training));
            o = ad_conv2d(t, o, p[k++], 1, 1);
            o = batchnorm(m, t, p, &k, o, training);
            Var *sc = in;
            if (block_has_shortcut(s, b)) {
                sc = ad_conv2d(t, in, p[k++], 2, 0);
                sc = batchnorm(m, t, p, &k, sc, training);
            }
            h = ad_unary(t, UN_RELU, ad_add(t, o, sc));
        }
    if (!h)
        return NULL;
    h = ad_avgpool2d(t, h, h->t.shape[2], h->t.shape[2]);
    int shape[2] = {x->t.shape[0], 512};
    return ad_linear(t, ad_reshape(t, h, 2, shape), p[k], p[k + 1]);
}

const ModelOps model_resnet18 = {
    .name = "resnet18",
    .summary = "ResNet-18, CIFAR style (3x3 stem, batch norm), 11M parameters",
    .configure = resnet_configure,
    .layout = resnet_layout,
    .forward = resnet_forward,
};
