// Convolutional models:
//   lenet      DLG's LeNet (Zhu et al. 2019, models/vision.py): three 5×5 convolutions with
//              12 channels, strides 2/2/1, padding 2, sigmoid after each, one linear layer.
//   cnn-mnist  2×[conv 5×5 (10, 20 channels), ReLU, max-pool 2], FC 320→50→10 (ReLU).
//   cnn-cifar  conv 3→64 and 64→128 (5×5, pad 2), each ReLU + max-pool 2, FC 8192→384→192→10.
#include <stdio.h>
#include <string.h>

#include "core/jsonv.h"
#include "models/model.h"

static int n_out(const DataShape *in) { return in->n_classes ? in->n_classes : in->target_dim; }
static int conv_out(int size, int k, int stride, int pad) { return (size + 2 * pad - k) / stride + 1; }

static FpStatus add_conv(Model *m, const char *name, int c_out, int c_in, int k, FpError *err) {
    char n[48];
    int ws[4] = {c_out, c_in, k, k}, bs[1] = {c_out};
    snprintf(n, sizeof n, "%s.weight", name);
    FP_TRY(model_add_layer(m, n, PARAM_WEIGHT, 4, ws, c_in * k * k, err));
    snprintf(n, sizeof n, "%s.bias", name);
    return model_add_layer(m, n, PARAM_BIAS, 1, bs, c_in * k * k, err);
}

static FpStatus add_fc(Model *m, const char *name, int out, int in, FpError *err) {
    char n[48];
    int ws[2] = {out, in}, bs[1] = {out};
    snprintf(n, sizeof n, "%s.weight", name);
    FP_TRY(model_add_layer(m, n, PARAM_WEIGHT, 2, ws, in, err));
    snprintf(n, sizeof n, "%s.bias", name);
    return model_add_layer(m, n, PARAM_BIAS, 1, bs, in, err);
}

static Var *conv_bias(Tape *t, Var *x, Var *w, Var *b, int stride, int pad) {
    return ad_add_channel_bias(t, ad_conv2d(t, x, w, stride, pad), b);
}

static Var *flatten(Tape *t, Var *x) {
    if (!x)
        return NULL;
    int shape[2] = {x->t.shape[0], (int)(x->t.numel / (size_t)x->t.shape[0])};
    return ad_reshape(t, x, 2, shape);
}

static FpStatus image_only(const char *path, const DataShape *in, int min_size, FpError *err) {
    if (in->h < min_size || in->w < min_size)
        return fp_fail(err, FP_EPARAM, "%s.name: this model needs images of at least %dx%d, the data is %dx%d", path,
                       min_size, min_size, in->h, in->w);
    if (!in->n_classes)
        return fp_fail(err, FP_EPARAM, "%s.name: this model needs a classification dataset", path);
    return FP_OK;
}

// -- lenet ---------------------------------------------------------------------------
static FpStatus lenet_configure(ModelConfig *cfg, const cJSON *json, const char *path, const DataShape *in,
                                FpError *err) {
    static const char *const keys[] = {"name", "init", NULL};
    FP_TRY(jv_keys(json, path, keys, err));
    return image_only(path, in, 4, err);
}

static FpStatus lenet_layout(Model *m, FpError *err) {
    int h = conv_out(conv_out(m->in.h, 5, 2, 2), 5, 2, 2), w = conv_out(conv_out(m->in.w, 5, 2, 2), 5, 2, 2);
    FP_TRY(add_conv(m, "conv1", 12, m->in.c, 5, err));
    FP_TRY(add_conv(m, "conv2", 12, 12, 5, err));
    FP_TRY(add_conv(m, "conv3", 12, 12, 5, err));
    return add_fc(m, "fc", n_out(&m->in), 12 * h * w, err);
}

static Var *lenet_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    Var *h = ad_unary(t, UN_SIGMOID, conv_bias(t, x, p[0], p[1], 2, 2));
    h = ad_unary(t, UN_SIGMOID, conv_bias(t, h, p[2], p[3], 2, 2));
    h = ad_unary(t, UN_SIGMOID, conv_bias(t, h, p[4], p[5], 1, 2));
    return ad_linear(t, flatten(t, h), p[6], p[7]);
}

const ModelOps model_lenet = {
    .name = "lenet",
    .summary = "DLG's LeNet: 3 sigmoid 5x5 convs (12 ch, strides 2/2/1) + linear",
    .configure = lenet_configure,
    .layout = lenet_layout,
    .forward = lenet_forward,
};

// -- cnn-mnist ---------------------------------------------------------------------------
static FpStatus small_cnn_configure(ModelConfig *cfg, const cJSON *json, const char *path, const DataShape *in,
                                    FpError *err) {
    static const char *const keys[] = {"name", "init", NULL};
    FP_TRY(jv_keys(json, path, keys, err));
    // cnn-mnist: (h−4)/2 − 4 ≥ 2 for the second pooling, so at least 16×16.
    return image_only(path, in, strcmp(cfg->name, "cnn-mnist") == 0 ? 16 : 4, err);
}

static FpStatus cnn_mnist_layout(Model *m, FpError *err) {
    int h = (conv_out(m->in.h, 5, 1, 0) / 2 - 4) / 2, w = (conv_out(m->in.w, 5, 1, 0) / 2 - 4) / 2;
    FP_TRY(add_conv(m, "conv1", 10, m->in.c, 5, err));
    FP_TRY(add_conv(m, "conv2", 20, 10, 5, err));
    FP_TRY(add_fc(m, "fc1", 50, 20 * h * w, err));
    return add_fc(m, "fc2", n_out(&m->in), 50, err);
}

static Var *cnn_mnist_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    Var *h = ad_maxpool2d(t, ad_unary(t, UN_RELU, conv_bias(t, x, p[0], p[1], 1, 0)), 2, 2);
    h = ad_maxpool2d(t, ad_unary(t, UN_RELU, conv_bias(t, h, p[2], p[3], 1, 0)), 2, 2);
    h = ad_unary(t, UN_RELU, ad_linear(t, flatten(t, h), p[4], p[5]));
    return ad_linear(t, h, p[6], p[7]);
}

const ModelOps model_cnn_mnist = {
    .name = "cnn-mnist",
    .summary = "2x[conv 5x5, ReLU, max-pool 2] + FC 320-50-10 (MNIST-sized input)",
    .configure = small_cnn_configure,
    .layout = cnn_mnist_layout,
    .forward = cnn_mnist_forward,
};

// -- cnn-cifar ---------------------------------------------------------------------------
static FpStatus cnn_cifar_layout(Model *m, FpError *err) {
    int h = m->in.h / 2 / 2, w = m->in.w / 2 / 2;
    FP_TRY(add_conv(m, "conv1", 64, m->in.c, 5, err));
    FP_TRY(add_conv(m, "conv2", 128, 64, 5, err));
    FP_TRY(add_fc(m, "fc1", 384, 128 * h * w, err));
    FP_TRY(add_fc(m, "fc2", 192, 384, err));
    return add_fc(m, "fc3", n_out(&m->in), 192, err);
}

static Var *cnn_cifar_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    Var *h = ad_maxpool2d(t, ad_unary(t, UN_RELU, conv_bias(t, x, p[0], p[1], 1, 2)), 2, 2);
    h = ad_maxpool2d(t, ad_unary(t, UN_RELU, conv_bias(t, h, p[2], p[3], 1, 2)), 2, 2);
    h = ad_unary(t, UN_RELU, ad_linear(t, flatten(t, h), p[4], p[5]));
    h = ad_unary(t, UN_RELU, ad_linear(t, h, p[6], p[7]));
    return ad_linear(t, h, p[8], p[9]);
}

const ModelOps model_cnn_cifar = {
    .name = "cnn-cifar",
    .summary = "conv 3-64-128 (5x5, pad 2, ReLU, max-pool 2) + FC 8192-384-192-10",
    .configure = small_cnn_configure,
    .layout = cnn_cifar_layout,
    .forward = cnn_cifar_forward,
};
