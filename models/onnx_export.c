// A built-in model as an ONNX graph (models/onnx.h, onnx_model_save): its forward pass is
// run once on a tape in evaluation mode and the tape's ops, read back from the output,
// become the nodes PyTorch's exporter writes for the same layers. A matmul by a weight
// (trans_b) plus its bias is one Gemm (transB 1), a convolution plus its channel bias
// one Conv, a reshape that keeps the batch a Flatten; the initializers are the model's
// layers under their documented names (fedpriv list), so the file re-imports to the same
// tape ops (models/onnx_model.c: Gemm is ad_linear, Conv ad_conv2d + ad_add_channel_bias)
// and computes the built-in model's logits bit for bit. An op with no such node (batch
// norm's composite, the LSTM's slices) is FP_EUNSUPPORTED, naming the model: resnet18 and
// lstm have no ONNX export.
//
// Everything the message points to is allocated in one pool, freed at once; the bytes are
// packed by the protoc-c code that reads them.
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/version.h"
#include "models/onnx_internal.h"

#define EXPORT_OPSET 13
#define EXPORT_IR_VERSION 7 // the IR version of opset 13
#define EXPORT_BATCH 2      // the traced batch (any size other than a dimension's would do)

typedef struct Chunk {
    struct Chunk *next;
    alignas(max_align_t) unsigned char data[];
} Chunk;

typedef struct Exporter {
    const Model *m;
    Var *const *p;
    const Var *x;
    FpError *err;
    FpStatus st;
    Chunk *pool;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    const Var **vars;   // the values named so far, and their names
    char **names;
    int n_vars, cap_vars;
} Exporter;

static void *ex_alloc(Exporter *e, size_t n) {
    Chunk *c = calloc(1, sizeof *c + (n ? n : 1));
    if (!c) {
        if (e->st == FP_OK)
            e->st = fp_fail(e->err, FP_ENOMEM, "out of memory exporting %s as ONNX", e->m->cfg.name);
        return NULL;
    }
    c->next = e->pool;
    e->pool = c;
    return c->data;
}

static char *ex_strdup(Exporter *e, const char *s) {
    char *d = ex_alloc(e, strlen(s) + 1);
    return d ? strcpy(d, s) : NULL;
}

static FpStatus unsupported(Exporter *e, const char *what) {
    if (e->st == FP_OK)
        e->st = fp_fail(e->err, FP_EUNSUPPORTED, "%s has no ONNX export: its forward pass uses %s, which has no "
                        "ONNX node here (the safetensors file holds its weights)", e->m->cfg.name, what);
    return e->st;
}

// The layer a leaf views (-1: none).
static int param_of(const Exporter *e, const Var *v) {
    if (!v || v->op != OP_LEAF)
        return -1;
    for (int i = 0; i < e->m->table.n_layers; i++)
        if (e->p[i] && e->p[i]->t.data == v->t.data && e->p[i]->t.numel == v->t.numel)
            return i;
    return -1;
}

static Onnx__AttributeProto *attr_ints(Exporter *e, const char *name, int64_t v, int count) {
    Onnx__AttributeProto *a = ex_alloc(e, sizeof *a);
    int64_t *ints = ex_alloc(e, sizeof *ints * (size_t)count);
    if (!a || !ints)
        return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    for (int i = 0; i < count; i++)
        ints[i] = v;
    a->n_ints = (size_t)count;
    a->ints = ints;
    return a;
}

static Onnx__AttributeProto *attr_int(Exporter *e, const char *name, int64_t v) {
    Onnx__AttributeProto *a = ex_alloc(e, sizeof *a);
    if (!a)
        return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    return a;
}

// A node op(inputs) -> a new value, named after the layer it applies (PREFIX of
// PREFIX.weight) or its operator; attrs NULL-terminated. Returns the value's name.
static const char *add_node(Exporter *e, const char *op, const char *layer, const char *const *inputs, int n_in,
                            Onnx__AttributeProto *const *attrs, int n_attrs) {
    if (e->st != FP_OK)
        return NULL;
    if (e->n_nodes == e->cap_nodes) {
        size_t cap = e->cap_nodes ? 2 * e->cap_nodes : 16;
        Onnx__NodeProto **nn = ex_alloc(e, sizeof *nn * cap);
        if (!nn)
            return NULL;
        if (e->n_nodes)
            memcpy(nn, e->nodes, sizeof *nn * e->n_nodes);
        e->nodes = nn;
        e->cap_nodes = cap;
    }
    Onnx__NodeProto *n = ex_alloc(e, sizeof *n);
    char **ins = ex_alloc(e, sizeof *ins * (size_t)n_in), **outs = ex_alloc(e, sizeof *outs);
    Onnx__AttributeProto **as = ex_alloc(e, sizeof *as * (size_t)(n_attrs ? n_attrs : 1));
    char name[96], out[112];
    if (layer) {
        const char *dot = strrchr(layer, '.');
        snprintf(name, sizeof name, "%.*s", dot ? (int)(dot - layer) : (int)strlen(layer), layer);
    } else
        snprintf(name, sizeof name, "%s_%zu", op, e->n_nodes);
    snprintf(out, sizeof out, "%s_out", name);
    if (!n || !ins || !outs || !as || !(outs[0] = ex_strdup(e, out)))
        return NULL;
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->op_type = (char *)op;
    n->name = ex_strdup(e, name);
    for (int i = 0; i < n_in; i++)
        ins[i] = (char *)inputs[i];
    n->n_input = (size_t)n_in;
    n->input = ins;
    n->n_output = 1;
    n->output = outs;
    for (int i = 0; i < n_attrs; i++)
        if (!(as[i] = attrs[i]))
            return NULL;
    n->n_attribute = (size_t)n_attrs;
    n->attribute = as;
    e->nodes[e->n_nodes++] = n;
    return outs[0];
}

static const char *emit(Exporter *e, const Var *v);

static const char *param_name(Exporter *e, const Var *v) {
    int i = param_of(e, v);
    return i >= 0 ? e->m->table.layers[i].name : NULL;
}

// y = x W^T (+ b): Gemm, transB 1 (nn.Linear's export).
static const char *emit_gemm(Exporter *e, const Var *mm, const Var *bias) {
    const char *w = param_name(e, mm->in[1]), *b = bias ? param_name(e, bias) : NULL;
    if (!w || mm->attr.mm.trans_a || !mm->attr.mm.trans_b || (bias && !b))
        return unsupported(e, "a matrix product that is not a linear layer (x times a weight, transposed)"), NULL;
    const char *in[3] = {emit(e, mm->in[0]), w, b};
    Onnx__AttributeProto *a[1] = {attr_int(e, "transB", 1)};
    return in[0] ? add_node(e, "Gemm", w, in, b ? 3 : 2, a, 1) : NULL;
}

// Conv (nn.Conv2d's export): square kernel, equal strides and pads.
static const char *emit_conv(Exporter *e, const Var *cv, const Var *bias) {
    const char *w = param_name(e, cv->in[1]), *b = bias ? param_name(e, bias) : NULL;
    if (!w || (bias && !b))
        return unsupported(e, "a convolution whose filters are not a layer"), NULL;
    const ConvGeom *g = &cv->attr.conv;
    const char *in[3] = {emit(e, cv->in[0]), w, b};
    Onnx__AttributeProto *a[3] = {attr_ints(e, "kernel_shape", g->kh, 2), attr_ints(e, "strides", g->stride, 2),
                                  attr_ints(e, "pads", g->pad, 4)};
    if (g->kh != g->kw)
        return unsupported(e, "a convolution with a non-square kernel"), NULL;
    return in[0] ? add_node(e, "Conv", w, in, b ? 3 : 2, a, 3) : NULL;
}

static const char *emit_op(Exporter *e, const Var *v) {
    const char *in[1];
    switch (v->op) {
    case OP_BINARY: {
        // A bias added along the last dimension of a linear layer, or along the channels of
        // a convolution's output (core/layers.c ad_linear, ad_add_channel_bias).
        const Var *a = v->in[0], *b = v->in[1];
        int bias = v->attr.bin.op == BIN_ADD && param_of(e, b) >= 0 && b->t.ndim == 1;
        if (bias && a->op == OP_MATMUL && v->attr.bin.inner == 1)
            return emit_gemm(e, a, b);
        if (bias && a->op == OP_CONV2D && a->t.ndim == 4 && v->attr.bin.inner == (size_t)a->t.shape[2] * a->t.shape[3])
            return emit_conv(e, a, b);
        return unsupported(e, "an elementwise operation other than a layer's bias"), NULL;
    }
    case OP_MATMUL: return emit_gemm(e, v, NULL);
    case OP_CONV2D: return emit_conv(e, v, NULL);
    case OP_UNARY: {
        static const struct {
            UnaryOp op;
            const char *name;
        } acts[] = {{UN_RELU, "Relu"}, {UN_SIGMOID, "Sigmoid"}, {UN_TANH, "Tanh"}};
        for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++)
            if (acts[k].op == v->attr.un.op)
                return (in[0] = emit(e, v->in[0])) ? add_node(e, acts[k].name, NULL, in, 1, NULL, 0) : NULL;
        return unsupported(e, "an elementwise function other than ReLU, sigmoid and tanh"), NULL;
    }
    case OP_MAXPOOL:
    case OP_AVGPOOL: {
        const PoolGeom *g = &v->attr.pool;
        Onnx__AttributeProto *a[2] = {attr_ints(e, "kernel_shape", g->k, 2), attr_ints(e, "strides", g->stride, 2)};
        return (in[0] = emit(e, v->in[0]))
                   ? add_node(e, v->op == OP_MAXPOOL ? "MaxPool" : "AveragePool", NULL, in, 1, a, 2)
                   : NULL;
    }
    case OP_RESHAPE: {
        // A reshape that keeps the batch and flattens the rest (the only one the built-in
        // models make before a linear layer): Flatten, axis 1. The graph input is already
        // the data's shape, so flattening it is the same Flatten.
        const Var *src = v->in[0];
        if (v->t.ndim != 2 || v->t.shape[0] != src->t.shape[0])
            return unsupported(e, "a reshape other than flattening each sample"), NULL;
        Onnx__AttributeProto *a[1] = {attr_int(e, "axis", 1)};
        return (in[0] = emit(e, src)) ? add_node(e, "Flatten", NULL, in, 1, a, 1) : NULL;
    }
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX: {
        Onnx__AttributeProto *a[1] = {attr_int(e, "axis", -1)};
        return (in[0] = emit(e, v->in[0]))
                   ? add_node(e, v->op == OP_SOFTMAX ? "Softmax" : "LogSoftmax", NULL, in, 1, a, 1)
                   : NULL;
    }
    default: return unsupported(e, "a tape operation of kind other than a layer's"), NULL;
    }
}

// The name of v's value, emitting the nodes that compute it first (once each).
static const char *emit(Exporter *e, const Var *v) {
    if (e->st != FP_OK || !v)
        return NULL;
    if (v == e->x)
        return "x";
    for (int i = 0; i < e->n_vars; i++)
        if (e->vars[i] == v)
            return e->names[i];
    if (v->op == OP_LEAF) {
        const char *pn = param_name(e, v);
        return pn ? pn : (unsupported(e, "a constant tensor"), NULL);
    }
    const char *name = emit_op(e, v);
    if (!name)
        return NULL;
    if (e->n_vars == e->cap_vars) {
        int cap = e->cap_vars ? 2 * e->cap_vars : 32;
        const Var **nv = ex_alloc(e, sizeof *nv * (size_t)cap);
        char **nn = ex_alloc(e, sizeof *nn * (size_t)cap);
        if (!nv || !nn)
            return NULL;
        if (e->n_vars) {
            memcpy(nv, e->vars, sizeof *nv * (size_t)e->n_vars);
            memcpy(nn, e->names, sizeof *nn * (size_t)e->n_vars);
        }
        e->vars = nv;
        e->names = nn;
        e->cap_vars = cap;
    }
    e->vars[e->n_vars] = v;
    e->names[e->n_vars++] = (char *)name;
    return name;
}

// A float32 tensor's type: (batch, dims[1..nd)), the first dimension symbolic.
static Onnx__ValueInfoProto *value_info(Exporter *e, const char *name, int nd, const int *dims) {
    Onnx__ValueInfoProto *vi = ex_alloc(e, sizeof *vi);
    Onnx__TypeProto *tp = ex_alloc(e, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ex_alloc(e, sizeof *tt);
    Onnx__TensorShapeProto *sp = ex_alloc(e, sizeof *sp);
    Onnx__TensorShapeProto__Dimension *d = ex_alloc(e, sizeof *d * (size_t)nd), **dp = ex_alloc(e, sizeof *dp * (size_t)nd);
    if (!vi || !tp || !tt || !sp || !d || !dp)
        return NULL;
    for (int i = 0; i < nd; i++) {
        d[i] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (i == 0) {
            d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d[i].dim_param = "batch";
        } else {
            d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d[i].dim_value = dims[i];
        }
        dp[i] = &d[i];
    }
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    sp->n_dim = (size_t)nd;
    sp->dim = dp;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sp;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

// The model's layers as initializers, float32 little-endian raw data (raw: the
// parameter buffer's bytes, n_params * 4).
static Onnx__TensorProto **initializers(Exporter *e, const uint8_t *raw) {
    const ParamTable *tb = &e->m->table;
    Onnx__TensorProto **ts = ex_alloc(e, sizeof *ts * (size_t)tb->n_layers);
    for (int i = 0; ts && i < tb->n_layers; i++) {
        const ParamLayer *l = &tb->layers[i];
        Onnx__TensorProto *t = ex_alloc(e, sizeof *t);
        int64_t *dims = ex_alloc(e, sizeof *dims * (size_t)(l->ndim ? l->ndim : 1));
        if (!t || !dims)
            return NULL;
        *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
        t->name = (char *)l->name;
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        for (int k = 0; k < l->ndim; k++)
            dims[k] = l->shape[k];
        t->n_dims = (size_t)l->ndim;
        t->dims = dims;
        t->has_raw_data = 1;
        t->raw_data = (ProtobufCBinaryData){.len = 4 * l->count, .data = (uint8_t *)raw + 4 * l->offset};
        ts[i] = t;
    }
    return ts;
}

FpStatus onnx_export_builtin(const Model *m, const uint8_t *raw, uint8_t **out, size_t *out_len, FpError *err) {
    *out = NULL;
    *out_len = 0;
    Exporter e = {.m = m, .err = err};
    Tape *t = tape_create(m->be);
    Var **p = calloc((size_t)m->table.n_layers, sizeof *p);
    if (!t || !p) {
        tape_free(t);
        free(p);
        return fp_fail(err, FP_ENOMEM, "out of memory exporting %s as ONNX", m->cfg.name);
    }
    int in_dims[4] = {EXPORT_BATCH, m->in.c, m->in.h, m->in.w};
    Var *x = ad_full(t, 4, in_dims, 0.0f);
    Var *y = model_param_vars(m, t, 0, p) == FP_OK && x ? model_forward(m, t, p, x, 0) : NULL;
    e.p = p;
    e.x = x;
    if (!y)
        e.st = fp_fail(err, tape_status(t) == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED,
                       "%s: its forward pass could not be traced for the ONNX export", m->cfg.name);
    const char *logits = y ? emit(&e, y) : NULL;
    if (e.st == FP_OK && (y->t.ndim != 2 || !logits))
        unsupported(&e, "an output that is not (batch, outputs)");
    Onnx__ValueInfoProto *vin = NULL, *vout = NULL;
    Onnx__TensorProto **inits = NULL;
    if (e.st == FP_OK && !raw)
        goto done; // traced only (model_has_onnx_export)
    if (e.st == FP_OK) {
        // The last node writes the logits under the graph output's name.
        e.nodes[e.n_nodes - 1]->output[0] = "logits";
        vin = value_info(&e, "x", 4, in_dims);
        vout = value_info(&e, "logits", 2, y->t.shape);
        inits = initializers(&e, raw);
    }
    if (e.st == FP_OK) {
        Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
        opset.has_version = 1;
        opset.version = EXPORT_OPSET;
        Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
        graph.name = (char *)m->cfg.name;
        graph.n_node = e.n_nodes;
        graph.node = e.nodes;
        graph.n_initializer = (size_t)m->table.n_layers;
        graph.initializer = inits;
        graph.n_input = 1;
        graph.input = &vin;
        graph.n_output = 1;
        graph.output = &vout;
        Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
        mp.has_ir_version = 1;
        mp.ir_version = EXPORT_IR_VERSION;
        mp.producer_name = "fedpriv";
        mp.producer_version = FEDPRIV_VERSION;
        mp.n_opset_import = 1;
        mp.opset_import = opsets;
        mp.graph = &graph;
        size_t len = protobuf_c_message_get_packed_size(&mp.base);
        if ((*out = malloc(len ? len : 1))) {
            *out_len = protobuf_c_message_pack(&mp.base, *out);
        } else
            e.st = fp_fail(err, FP_ENOMEM, "out of memory exporting %s as ONNX", m->cfg.name);
    }
done:
    while (e.pool) {
        Chunk *c = e.pool;
        e.pool = c->next;
        free(c);
    }
    free(p);
    tape_free(t);
    return e.st;
}

int model_has_onnx_export(const Model *m, FpError *why) {
    if (model_is_onnx(m))
        return 1;
    uint8_t *out;
    size_t len;
    FpError local = {0};
    FpStatus st = onnx_export_builtin(m, NULL, &out, &len, why ? why : &local);
    return st == FP_OK;
}
