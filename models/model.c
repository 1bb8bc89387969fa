// Model creation, initialisation, parameter views and the weight file format.
#include "models/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"
#include "core/jsonv.h"
#include "core/rng.h"
#include "core/suggest.h"
#include "models/onnx.h"

extern const ModelOps model_mlp, model_logreg, model_lenet, model_cnn_mnist, model_cnn_cifar, model_lstm,
    model_resnet18;

static const ModelOps *const all_models[] = {&model_mlp,       &model_logreg, &model_lenet,   &model_cnn_mnist,
                                             &model_cnn_cifar, &model_lstm,   &model_resnet18};

int model_count(void) { return (int)(sizeof all_models / sizeof all_models[0]); }
const ModelOps *model_at(int i) { return i >= 0 && i < model_count() ? all_models[i] : NULL; }
const ModelOps *model_find(const char *name) {
    for (int i = 0; i < model_count(); i++)
        if (strcmp(all_models[i]->name, name) == 0)
            return all_models[i];
    return NULL;
}

FpStatus model_add_layer(Model *m, const char *name, ParamKind kind, int ndim, const int *shape, int fan_in,
                         FpError *err) {
    if (m->table.n_layers == m->cap_layers) {
        int cap = m->cap_layers ? 2 * m->cap_layers : 16;
        ParamLayer *nl = realloc(m->table.layers, sizeof(ParamLayer) * cap);
        int *nf = realloc(m->fan_in, sizeof(int) * cap);
        if (!nl || !nf) {
            if (nl)
                m->table.layers = nl;
            if (nf)
                m->fan_in = nf;
            return fp_fail(err, FP_ENOMEM, "out of memory building the model's layer table");
        }
        m->table.layers = nl;
        m->fan_in = nf;
        m->cap_layers = cap;
    }
    ParamLayer *l = &m->table.layers[m->table.n_layers];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->kind = kind;
    l->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        l->shape[i] = shape[i];
    l->count = shape_numel(ndim, shape);
    l->offset = m->table.n_params;
    l->trainable = kind != PARAM_BN_STAT;
    m->fan_in[m->table.n_layers] = fan_in;
    m->table.n_params += l->count;
    if (l->trainable)
        m->table.n_trainable += l->count;
    m->table.n_layers++;
    return FP_OK;
}

static FpStatus parse_config(const ModelOps *ops, const cJSON *json, const char *path, const DataShape *in,
                             ModelConfig *cfg, FpError *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", ops->name);
    static const char *const inits[] = {"default", "uniform", NULL};
    int init = 0;
    FP_TRY(jv_choice(json, path, "init", inits, 0, &init, err));
    cfg->init = (InitKind)init;
    cfg->bn_momentum = 0.1f;
    return ops->configure(cfg, json, path, in, err);
}

Model *model_create(const cJSON *json, const char *path, const DataShape *in, const Backend *be, FpError *err) {
    return model_create_at(json, path, in, be, NULL, err);
}

Model *model_create_at(const cJSON *json, const char *path, const DataShape *in, const Backend *be,
                       const char *base_dir, FpError *err) {
    if (cJSON_IsObject(json) && cJSON_GetObjectItemCaseSensitive(json, "onnx"))
        return onnx_model_create(json, path, in, be, base_dir, err);
    const char *name = NULL;
    if (jv_string(json, path, "name", JV_REQUIRED, NULL, &name, err) != FP_OK)
        return NULL;
    const ModelOps *ops = model_find(name);
    if (!ops) {
        char p[256], hint[FP_SUGGEST_MAX_LEN + 32];
        FpSuggest s;
        fp_suggest_begin(&s, name);
        for (int i = 0; i < model_count(); i++)
            fp_suggest_add(&s, model_at(i)->name);
        fp_fail(err, FP_EPARAM, "%s: unknown model \"%.64s\" (%sfedpriv list shows the models)",
                jv_path(p, sizeof p, path, "name"), name, fp_did_you_mean(&s, "", " ", hint, sizeof hint));
        return NULL;
    }
    Model *m = fp_calloc(1, sizeof *m, err);
    if (!m)
        return NULL;
    m->ops = ops;
    m->in = *in;
    m->be = be;
    if (parse_config(ops, json, path, in, &m->cfg, err) != FP_OK || ops->layout(m, err) != FP_OK) {
        model_free(m);
        return NULL;
    }
    m->params = be->alloc(m->table.n_params * sizeof(float));
    if (!m->params) {
        fp_fail(err, FP_ENOMEM, "out of memory: model %s needs %zu parameters (%.1f MB)", name, m->table.n_params,
                m->table.n_params * 4.0 / 1e6);
        model_free(m);
        return NULL;
    }
    be->fill(m->params, m->table.n_params, 0.0f);
    return m;
}

Model *model_clone(const Model *src, const Backend *be, FpError *err) {
    Model *m = fp_calloc(1, sizeof *m, err);
    if (!m)
        return NULL;
    m->ops = src->ops;
    m->state = src->state && src->ops->state_share ? src->ops->state_share(src->state) : NULL;
    m->cfg = src->cfg;
    m->in = src->in;
    m->be = be;
    m->table = src->table;
    m->cap_layers = src->table.n_layers;
    m->table.layers = malloc(sizeof(ParamLayer) * (src->table.n_layers ? src->table.n_layers : 1));
    m->fan_in = malloc(sizeof(int) * (src->table.n_layers ? src->table.n_layers : 1));
    m->params = be->alloc(src->table.n_params * sizeof(float));
    if (!m->table.layers || !m->fan_in || !m->params) {
        fp_fail(err, FP_ENOMEM, "out of memory cloning model %s", src->cfg.name);
        if (!m->params)
            m->be = NULL;
        model_free(m);
        return NULL;
    }
    memcpy(m->table.layers, src->table.layers, sizeof(ParamLayer) * src->table.n_layers);
    memcpy(m->fan_in, src->fan_in, sizeof(int) * src->table.n_layers);
    if (be == src->be)
        be->copy(m->params, src->params, src->table.n_params * sizeof(float));
    else {
        float *host = malloc(src->table.n_params * sizeof(float));
        if (!host) {
            fp_fail(err, FP_ENOMEM, "out of memory cloning model %s", src->cfg.name);
            model_free(m);
            return NULL;
        }
        model_get_params(src, host);
        model_set_params(m, host);
        free(host);
    }
    return m;
}

void model_free(Model *m) {
    if (!m)
        return;
    if (m->params && m->be)
        m->be->free(m->params);
    if (m->state && m->ops->state_release)
        m->ops->state_release(m->state);
    free(m->table.layers);
    free(m->fan_in);
    free(m);
}

void model_get_params(const Model *m, float *host) {
    m->be->download(host, m->params, m->table.n_params * sizeof(float));
}

void model_set_params(Model *m, const float *host) {
    m->be->upload(m->params, host, m->table.n_params * sizeof(float));
}

// Generic initialisation (PyTorch's default for Linear and Conv2d: kaiming_uniform with
// a = √5, which is U(±1/√fan_in) for weights, and U(±1/√fan_in) for biases), or
// U(−0.5, 0.5) everywhere for DLG's LeNet. Batch norm: γ = 1, β = 0, mean 0, var 1.
static void generic_init(Model *m, float *host, uint64_t seed) {
    RngStream rs = rng_stream(seed, RNG_INIT, 0, 0);
    for (int i = 0; i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        float *p = host + l->offset;
        if (l->kind == PARAM_BN_SCALE || l->kind == PARAM_BN_SHIFT || l->kind == PARAM_BN_STAT) {
            float v = l->kind == PARAM_BN_SCALE ? 1.0f : 0.0f;
            if (l->kind == PARAM_BN_STAT && strstr(l->name, "var"))
                v = 1.0f;
            for (size_t k = 0; k < l->count; k++)
                p[k] = v;
            continue;
        }
        double bound = m->cfg.init == INIT_UNIFORM ? 0.5 : 1.0 / sqrt((double)(m->fan_in[i] > 0 ? m->fan_in[i] : 1));
        for (size_t k = 0; k < l->count; k++)
            p[k] = (float)((2.0 * rng_next_uniform(&rs) - 1.0) * bound);
    }
}

FpStatus model_init(Model *m, uint64_t seed, FpError *err) {
    float *host = fp_malloc(m->table.n_params * sizeof(float), err);
    if (!host)
        return FP_ENOMEM;
    if (m->ops->init && m->cfg.init == INIT_DEFAULT)
        m->ops->init(m, host, seed);
    else
        generic_init(m, host, seed);
    model_set_params(m, host);
    free(host);
    return FP_OK;
}

FpStatus model_param_vars(const Model *m, Tape *t, int requires_grad, Var **p) {
    for (int i = 0; i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        p[i] = ad_leaf(t, m->params + l->offset, l->ndim, l->shape, requires_grad && l->trainable);
        if (!p[i])
            return FP_ENOMEM;
    }
    return FP_OK;
}

Var *model_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training) {
    return m->ops->forward(m, t, p, x, training, NULL);
}

Var *model_forward_probed(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe) {
    return m->ops->forward(m, t, p, x, training, probe);
}

int model_last_weight_layer(const Model *m) {
    for (int i = m->table.n_layers - 1; i >= 0; i--)
        if (m->table.layers[i].kind == PARAM_WEIGHT)
            return i;
    return -1;
}

// -- weight files ---------------------------------------------------------------------
#define WEIGHT_MAGIC "FPMW"
#define WEIGHT_VERSION 1u

static int write_u32(FILE *f, uint32_t v) { return fwrite(&v, 4, 1, f) == 1; }
static int read_u32(FILE *f, uint32_t *v) { return fread(v, 4, 1, f) == 1; }

FpStatus model_save(const Model *m, const char *filename, FpError *err) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", filename, (long)getpid());
    FILE *f = fp_create_new(tmp, err); // never through a link planted at the temp name
    if (!f)
        return FP_EIO;
    float *host = malloc(m->table.n_params * sizeof(float) + 4);
    if (!host) {
        fclose(f);
        remove(tmp);
        return fp_fail(err, FP_ENOMEM, "out of memory saving %s", filename);
    }
    model_get_params(m, host);
    int ok = fwrite(WEIGHT_MAGIC, 1, 4, f) == 4 && write_u32(f, WEIGHT_VERSION);
    size_t nl = strlen(m->cfg.name);
    ok = ok && write_u32(f, (uint32_t)nl) && fwrite(m->cfg.name, 1, nl, f) == nl;
    ok = ok && write_u32(f, (uint32_t)m->table.n_layers);
    for (int i = 0; ok && i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        size_t ln = strlen(l->name);
        ok = write_u32(f, (uint32_t)ln) && fwrite(l->name, 1, ln, f) == ln && write_u32(f, (uint32_t)l->count) &&
             fwrite(host + l->offset, sizeof(float), l->count, f) == l->count;
    }
    free(host);
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, filename) != 0) {
        remove(tmp);
        return fp_fail(err, FP_EIO, "%s: write failed", filename);
    }
    return FP_OK;
}

FpStatus model_load(Model *m, const char *filename, FpError *err) {
    FILE *f = fopen(filename, "rb");
    if (!f)
        return fp_fail(err, FP_EIO, "%s: cannot open: %s", filename, strerror(errno));
    FpStatus st = FP_OK;
    float *host = malloc(m->table.n_params * sizeof(float) + 4);
    char magic[4], name[64];
    uint32_t version, len, n_layers;
    if (!host) {
        st = fp_fail(err, FP_ENOMEM, "out of memory loading %s", filename);
        goto out;
    }
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, WEIGHT_MAGIC, 4) != 0) {
        st = fp_fail(err, FP_EFORMAT, "%s: not a fedpriv weight file (bad magic)", filename);
        goto out;
    }
    if (!read_u32(f, &version) || version != WEIGHT_VERSION) {
        st = fp_fail(err, FP_EFORMAT, "%s: unsupported weight file version", filename);
        goto out;
    }
    if (!read_u32(f, &len) || len >= sizeof name || fread(name, 1, len, f) != len) {
        st = fp_fail(err, FP_EFORMAT, "%s: truncated or corrupt header", filename);
        goto out;
    }
    name[len] = 0;
    if (strcmp(name, m->cfg.name) != 0) {
        st = fp_fail(err, FP_EFORMAT, "%s: holds a %s model, expected %s", filename, name, m->cfg.name);
        goto out;
    }
    if (!read_u32(f, &n_layers) || (int)n_layers != m->table.n_layers) {
        st = fp_fail(err, FP_EFORMAT, "%s: layer count does not match the model", filename);
        goto out;
    }
    for (int i = 0; i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        char lname[64];
        uint32_t count;
        if (!read_u32(f, &len) || len >= sizeof lname || fread(lname, 1, len, f) != len) {
            st = fp_fail(err, FP_EFORMAT, "%s: truncated at layer %d", filename, i);
            goto out;
        }
        lname[len] = 0;
        if (strcmp(lname, l->name) != 0 || !read_u32(f, &count) || count != l->count) {
            st = fp_fail(err, FP_EFORMAT, "%s: layer %d (%s) does not match the model's %s", filename, i, lname,
                         l->name);
            goto out;
        }
        if (fread(host + l->offset, sizeof(float), l->count, f) != l->count) {
            st = fp_fail(err, FP_EFORMAT, "%s: truncated in layer %s", filename, l->name);
            goto out;
        }
    }
    if (fgetc(f) != EOF) {
        st = fp_fail(err, FP_EFORMAT, "%s: trailing bytes after the last layer", filename);
        goto out;
    }
    model_set_params(m, host);
out:
    free(host);
    fclose(f);
    return st;
}
