// An imported ONNX graph as a Model (models/onnx.h): its layers, its initial weights and
// the forward pass, one tape op (or a composite of core/layers.c) per compiled step, the
// same calls the built-in models make (models/cnn.c, models/resnet18.c), so that an
// imported LeNet computes what `lenet` computes, bit for bit.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"
#include "core/jsonv.h"
#include "models/onnx_internal.h"

extern const ModelOps model_onnx;

typedef struct RunCtx {
    const Model *m;
    const OnnxGraph *g;
    Tape *t;
    Var *const *p;
    Var **v;
    int n, training;
} RunCtx;

static Var *operand_var(const RunCtx *r, const Operand *o) {
    switch (o->kind) {
    case OPD_ACT: return r->v[o->index];
    case OPD_PARAM: return r->p[o->index];
    case OPD_CONST: {
        const OnnxConst *k = &r->g->consts[o->index];
        int one[1] = {1};
        return k->shape.nd ? ad_from_host(r->t, k->values, k->shape.nd, k->shape.d, 0)
                           : ad_from_host(r->t, k->values, 1, one, 0);
    }
    default: return NULL;
    }
}

#define IN(k) operand_var(r, &s->in[k])

static Var *run_gemm(const RunCtx *r, const Step *s) {
    Var *b = s->in[2].kind == OPD_NONE ? NULL : IN(2);
    if (s->trans_b)
        return ad_linear(r->t, IN(0), IN(1), b); // as models/mlp.c: (n,in) @ (out,in)ᵀ + b
    Var *y = ad_matmul(r->t, IN(0), IN(1), 0, 0);
    return b ? ad_binary_bc(r->t, BIN_ADD, y, b, 1) : y;
}

static Var *run_matmul(const RunCtx *r, const Step *s) { return ad_matmul(r->t, IN(0), IN(1), 0, 0); }

static Var *run_binary(const RunCtx *r, const Step *s) {
    BinaryOp op = s->kind == ST_ADD ? BIN_ADD : BIN_MUL;
    if (s->same)
        return op == BIN_ADD ? ad_add(r->t, IN(0), IN(1)) : ad_mul(r->t, IN(0), IN(1));
    return ad_binary_bc(r->t, op, IN(0), IN(1), s->inner);
}

static Var *run_unary(const RunCtx *r, const Step *s) { return ad_unary(r->t, s->unary, IN(0)); }

static Var *run_conv(const RunCtx *r, const Step *s) {
    Var *y = ad_conv2d(r->t, IN(0), IN(1), s->stride, s->pad);
    return s->in[2].kind == OPD_NONE ? y : ad_add_channel_bias(r->t, y, IN(2));
}

static Var *run_maxpool(const RunCtx *r, const Step *s) { return ad_maxpool2d(r->t, IN(0), s->k, s->stride); }
static Var *run_avgpool(const RunCtx *r, const Step *s) { return ad_avgpool2d(r->t, IN(0), s->k, s->stride); }

static Var *run_reshape(const RunCtx *r, const Step *s) {
    int shape[4];
    memcpy(shape, s->shape.d, sizeof shape);
    shape[0] = r->n;
    return ad_reshape(r->t, IN(0), s->shape.nd, shape);
}

static Var *run_softmax(const RunCtx *r, const Step *s) { return ad_softmax(r->t, IN(0)); }
static Var *run_log_softmax(const RunCtx *r, const Step *s) { return ad_log_softmax(r->t, IN(0)); }
static Var *run_identity(const RunCtx *r, const Step *s) { return IN(0); }

// As models/resnet18.c batchnorm(): training uses the batch's statistics and updates the
// running ones in the parameter buffer (running = (1−m)·running + m·batch, the unbiased
// batch variance, m PyTorch's momentum); evaluation uses the running ones.
static Var *run_batchnorm(const RunCtx *r, const Step *s) {
    Var *x = IN(0), *gamma = operand_var(r, &s->bn[0]), *beta = operand_var(r, &s->bn[1]),
        *rm = operand_var(r, &s->bn[2]), *rv = operand_var(r, &s->bn[3]);
    if (!x)
        return NULL;
    int c = (int)gamma->t.numel;
    float *buf = malloc(sizeof(float) * 4 * (size_t)c);
    if (!buf)
        return NULL;
    float *mean = buf, *var = buf + c, *run_m = buf + 2 * c, *run_v = buf + 3 * c;
    const Backend *be = r->m->be;
    be->download(run_m, rm->t.data, sizeof(float) * c);
    be->download(run_v, rv->t.data, sizeof(float) * c);
    Var *y;
    if (r->training) {
        y = ad_batchnorm_train(r->t, x, gamma, beta, s->eps, mean, var);
        double count = (double)x->t.numel / c, mom = s->momentum;
        for (int i = 0; y && i < c; i++) {
            run_m[i] = (float)((1 - mom) * run_m[i] + mom * mean[i]);
            run_v[i] = (float)((1 - mom) * run_v[i] + mom * var[i] * (count > 1 ? count / (count - 1) : 1));
        }
        if (y) {
            be->upload(rm->t.data, run_m, sizeof(float) * c);
            be->upload(rv->t.data, run_v, sizeof(float) * c);
        }
    } else
        y = ad_batchnorm_eval(r->t, x, gamma, beta, run_m, run_v, s->eps);
    free(buf);
    return y;
}

static Var *(*const run_step[ST_COUNT])(const RunCtx *r, const Step *s) = {
    [ST_GEMM] = run_gemm,         [ST_MATMUL] = run_matmul,   [ST_ADD] = run_binary,
    [ST_MUL] = run_binary,        [ST_UNARY] = run_unary,     [ST_CONV] = run_conv,
    [ST_MAXPOOL] = run_maxpool,   [ST_AVGPOOL] = run_avgpool, [ST_RESHAPE] = run_reshape,
    [ST_SOFTMAX] = run_softmax,   [ST_LOGSOFTMAX] = run_log_softmax,
    [ST_BATCHNORM] = run_batchnorm, [ST_IDENTITY] = run_identity,
};

static Var *onnx_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    const OnnxGraph *g = m->state;
    if (!x)
        return NULL;
    Var **v = calloc((size_t)g->n_values, sizeof *v);
    if (!v)
        return NULL;
    RunCtx r = {.m = m, .g = g, .t = t, .p = p, .v = v, .n = x->t.shape[0], .training = training};
    // The data's samples take the graph input's shape (their sizes agree: checked at load).
    int shape[4];
    memcpy(shape, g->in_shape.d, sizeof shape);
    shape[0] = r.n;
    v[g->in_value] = ad_reshape(t, x, g->in_shape.nd, shape);
    for (int i = 0; i < g->n_steps && v[g->in_value]; i++) {
        const Step *s = &g->steps[i];
        if (!(v[s->out] = run_step[s->kind](&r, s)))
            break;
    }
    Var *y = v[g->out_value];
    free(v);
    return y;
}

static void onnx_init(Model *m, float *host, uint64_t seed) {
    const OnnxGraph *g = m->state;
    for (int i = 0; i < g->n_layers; i++)
        memcpy(host + m->table.layers[i].offset, g->layers[i].values, sizeof(float) * m->table.layers[i].count);
}

static void *onnx_share(void *state) {
    atomic_fetch_add(&((OnnxGraph *)state)->refs, 1);
    return state;
}

static void onnx_release(void *state) {
    OnnxGraph *g = state;
    if (atomic_fetch_sub(&g->refs, 1) == 1)
        onnx_graph_free(g);
}

const ModelOps model_onnx = {
    .name = "onnx",
    .summary = "a graph imported from an ONNX file: {\"onnx\": \"model.onnx\"}",
    .init = onnx_init,
    .forward = onnx_forward,
    .state_share = onnx_share,
    .state_release = onnx_release,
};

int model_is_onnx(const Model *m) { return m && m->ops == &model_onnx; }
const OnnxGraph *onnx_model_graph(const Model *m) { return model_is_onnx(m) ? m->state : NULL; }

// FNV-1a, 64 bits: the model's name carries the file's digest, so that a weight file or a
// cached reference model of one imported graph is never taken for another's.
static uint64_t fnv1a(const uint8_t *b, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

Model *onnx_model_from_bytes(const uint8_t *buf, size_t len, const char *name, const DataShape *in,
                             const Backend *be, FpError *err) {
    OnnxGraph *g;
    if (onnx_graph_compile(buf, len, name, in, &g, NULL, err) != FP_OK)
        return NULL;
    Model *m = fp_calloc(1, sizeof *m, err);
    if (!m) {
        onnx_graph_free(g);
        return NULL;
    }
    m->ops = &model_onnx;
    m->state = g;
    m->in = *in;
    m->be = be;
    snprintf(m->cfg.name, sizeof m->cfg.name, "onnx-%016llx", (unsigned long long)fnv1a(buf, len));
    m->cfg.bn_momentum = 0.1f;
    const Onnx__GraphProto *gp = g->proto->graph;
    for (int i = 0; i < g->n_layers; i++) {
        const OnnxLayer *l = &g->layers[i];
        int one[1] = {1};
        int nd = l->dims.nd ? l->dims.nd : 1;
        if (model_add_layer(m, gp->initializer[l->init]->name, l->kind, nd, l->dims.nd ? l->dims.d : one, 0, err) !=
            FP_OK) {
            model_free(m);
            return NULL;
        }
    }
    m->params = be->alloc(m->table.n_params * sizeof(float));
    if (!m->params) {
        fp_fail(err, FP_ENOMEM, "out of memory: %s needs %zu parameters (%.1f MB)", name, m->table.n_params,
                m->table.n_params * 4.0 / 1e6);
        model_free(m);
        return NULL;
    }
    be->fill(m->params, m->table.n_params, 0.0f);
    return m;
}

Model *onnx_model_create(const cJSON *json, const char *path, const DataShape *in, const Backend *be,
                         const char *base_dir, FpError *err) {
    // "init": "file" (default) starts from the graph's initializers; "uniform" from DLG's
    // U(−0.5, 0.5) drawn from the seed, as a built-in model with that init (models/model.c):
    // a shadow or reference model of an attack then starts where the built-in one would.
    static const char *const keys[] = {"onnx", "init", NULL}, *const inits[] = {"file", "uniform", NULL};
    const char *file;
    int init = 0;
    if (jv_keys(json, path, keys, err) != FP_OK || jv_string(json, path, "onnx", JV_REQUIRED, NULL, &file, err) != FP_OK ||
        jv_choice(json, path, "init", inits, 0, &init, err) != FP_OK)
        return NULL;
    char full[4200];
    if (file[0] != '/' && base_dir && base_dir[0])
        snprintf(full, sizeof full, "%s/%s", base_dir, file);
    else
        snprintf(full, sizeof full, "%s", file);
    char *buf;
    size_t len;
    if (fp_read_input(full, ONNX_MAX_FILE, &buf, &len, err) != FP_OK)
        return NULL;
    Model *m = onnx_model_from_bytes((const uint8_t *)buf, len, full, in, be, err);
    free(buf);
    if (m && init == 1)
        m->cfg.init = INIT_UNIFORM; // model_init: the generic initialisation, not onnx_init
    return m;
}
