// ONNX graphs as fedpriv models (models/onnx.h): unpacking through the protoc-c code,
// compilation of the graph into steps, and the forward pass over the tape's ops.
//
// Values: an activation (N, d1, ..., dk), k <= 3, N the batch (the graph input's first
// dimension, symbolic or not; every other dimension fixed); a parameter (a float
// initializer: one layer of the flat buffer); or a constant (a Constant node's tensor,
// an int64 initializer: shapes). Each node is compiled by its operator's entry in
// `onnx_ops` into one Step: what to compute, on which operands, with its geometry
// checked against the shapes here, so the forward pass never meets a shape it cannot run.
// Nodes must come in topological order (ONNX requires it): an input not yet defined is
// refused, which refuses every cycle.
#include "models/onnx.h"

#include <limits.h>
#include <math.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"
#include "core/jsonv.h"
#include "models/onnx_internal.h"

// -- the bounded allocator ------------------------------------------------------------
// protobuf-c sizes every array from what the wire holds, so what it allocates grows with
// the file: one allocation is at most ONNX_ALLOC_ONE(len), all of them together at most
// ONNX_ALLOC_ALL(len). A submessage of two bytes unpacks to a struct of up to ~200, a
// packed varint of one byte to eight: hence the factors, never a size the file declares.
#define ONNX_ALLOC_ONE(len) ((len) * 8 + ((size_t)64 << 10))
#define ONNX_ALLOC_ALL(len) ((len) * 128 + ((size_t)1 << 20))

typedef struct {
    alignas(max_align_t) size_t size;
} AllocHeader;

static void *bounded_alloc(void *ctx, size_t n) {
    OnnxArena *a = ctx;
    if (n > a->max_one || n > a->budget - a->used) {
        a->refused = 1;
        return NULL;
    }
    AllocHeader *h = malloc(sizeof *h + n);
    if (!h)
        return NULL;
    h->size = n;
    a->used += n;
    if (a->used > a->peak)
        a->peak = a->used;
    return h + 1;
}

static void bounded_free(void *ctx, void *p) {
    OnnxArena *a = ctx;
    if (!p)
        return;
    AllocHeader *h = (AllocHeader *)p - 1;
    a->used -= h->size;
    free(h);
}

void onnx_arena_init(OnnxArena *a, size_t file_len) {
    memset(a, 0, sizeof *a);
    a->max_one = ONNX_ALLOC_ONE(file_len);
    a->budget = ONNX_ALLOC_ALL(file_len);
    a->alloc = (ProtobufCAllocator){.alloc = bounded_alloc, .free = bounded_free, .allocator_data = a};
}

// -- small helpers ----------------------------------------------------------------------
static const char *node_label(const Onnx__NodeProto *n, int i, char *buf, size_t size) {
    if (n->name && n->name[0])
        snprintf(buf, size, "\"%.80s\"", n->name);
    else
        snprintf(buf, size, "#%d", i);
    return buf;
}

// One line naming the file, the node and its operator.
#define NODE_FAIL(c, code, ...) node_fail((c), (code), __VA_ARGS__)
static FpStatus node_fail(CompileCtx *c, FpStatus code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static FpStatus node_fail(CompileCtx *c, FpStatus code, const char *fmt, ...) {
    char what[400], lab[100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fp_fail(c->err, code, "%s: node %s (%.40s): %s", c->file, node_label(c->node, c->node_index, lab, sizeof lab),
                   c->node->op_type ? c->node->op_type : "?", what);
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

static float attr_float(const Onnx__NodeProto *n, const char *name, float dflt) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_f ? a->f : dflt;
}

// A list attribute of ints: all equal to one value v (returned), n_want entries (0: any);
// -1 when absent, -2 when the entries differ or the count is wrong.
static int64_t attr_uniform(const Onnx__NodeProto *n, const char *name, size_t n_want) {
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a)
        return -1;
    if (a->n_ints == 0 || (n_want && a->n_ints != n_want))
        return -2;
    for (size_t i = 1; i < a->n_ints; i++)
        if (a->ints[i] != a->ints[0])
            return -2;
    return a->ints[0];
}

// Attributes the compiler of an operator reads; any other present is refused (a silent
// ignore would compute something else than the file says).
static FpStatus only_attrs(CompileCtx *c, const char *const *known) {
    for (size_t i = 0; i < c->node->n_attribute; i++) {
        const char *nm = c->node->attribute[i]->name ? c->node->attribute[i]->name : "";
        int ok = 0;
        for (int k = 0; known && known[k]; k++)
            ok |= strcmp(known[k], nm) == 0;
        if (!ok)
            return NODE_FAIL(c, FP_EUNSUPPORTED, "attribute \"%.40s\" is not supported", nm);
    }
    return FP_OK;
}

static size_t numel_of(const OShape *s) {
    size_t n = 1;
    for (int i = 0; i < s->nd; i++)
        n *= (size_t)s->d[i];
    return n;
}

// -- values -------------------------------------------------------------------------------
static int find_value(const CompileCtx *c, const char *name) {
    for (int i = c->n_values - 1; i >= 0; i--)
        if (strcmp(c->values[i].name, name) == 0)
            return i;
    return -1;
}

static FpStatus add_value(CompileCtx *c, const char *name, OValue v, FpError *err) {
    if (!name)
        name = "";
    if (name[0] && find_value(c, name) >= 0)
        return c->node ? NODE_FAIL(c, FP_EFORMAT, "output \"%.60s\" is defined twice", name)
                       : fp_fail(err, FP_EFORMAT, "%s: value \"%.60s\" is defined twice", c->file, name);
    if (c->n_values == c->cap_values) {
        int cap = c->cap_values ? 2 * c->cap_values : 64;
        OValue *nv = realloc(c->values, sizeof *nv * (size_t)cap);
        if (!nv)
            return fp_fail(err, FP_ENOMEM, "out of memory compiling %s", c->file);
        c->values = nv;
        c->cap_values = cap;
    }
    v.name = name;
    c->values[c->n_values++] = v;
    return FP_OK;
}

// The float data of an initializer or Constant tensor, checked against its dims; int64
// data the same way. *n the element count.
static FpStatus tensor_numel(CompileCtx *c, const Onnx__TensorProto *t, size_t *n, OShape *shape) {
    const char *nm = t->name ? t->name : "";
    if (t->n_dims > 4)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: tensor \"%.60s\" has %zu dimensions (at most 4)", c->file, nm,
                       t->n_dims);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: tensor \"%.60s\" keeps its data in an external file", c->file, nm);
    size_t count = 1;
    shape->nd = (int)t->n_dims;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > INT_MAX)
            return fp_fail(c->err, FP_EFORMAT, "%s: tensor \"%.60s\": dimension %zu is %lld", c->file, nm, i,
                           (long long)t->dims[i]);
        shape->d[i] = (int)t->dims[i];
        // No element count beyond what the file could hold (4 bytes each at least).
        if (t->dims[i] && count > c->file_len / (size_t)t->dims[i])
            return fp_fail(c->err, FP_EFORMAT, "%s: tensor \"%.60s\" declares more elements than the file holds",
                           c->file, nm);
        count *= (size_t)t->dims[i];
    }
    *n = count;
    return FP_OK;
}

static FpStatus tensor_floats(CompileCtx *c, const Onnx__TensorProto *t, float **out, OShape *shape) {
    size_t n;
    const char *nm = t->name ? t->name : "";
    FP_TRY(tensor_numel(c, t, &n, shape));
    if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: tensor \"%.60s\" is of data type %d, not float32", c->file, nm,
                       t->has_data_type ? t->data_type : 0);
    size_t have = t->has_raw_data ? t->raw_data.len / 4 : t->n_float_data;
    if ((t->has_raw_data && (t->raw_data.len % 4 || t->n_float_data)) || have != n)
        return fp_fail(c->err, FP_EFORMAT, "%s: tensor \"%.60s\" declares %zu elements and holds %zu", c->file, nm, n,
                       have);
    float *v = malloc(sizeof(float) * (n ? n : 1));
    if (!v)
        return fp_fail(c->err, FP_ENOMEM, "out of memory reading %s", c->file);
    if (t->has_raw_data)
        for (size_t i = 0; i < n; i++) {
            const uint8_t *b = t->raw_data.data + 4 * i; // little-endian on the wire
            uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
            memcpy(&v[i], &u, 4);
        }
    else
        memcpy(v, t->float_data, sizeof(float) * n);
    *out = v;
    return FP_OK;
}

static FpStatus tensor_ints(CompileCtx *c, const Onnx__TensorProto *t, int64_t **out, size_t *n_out) {
    size_t n;
    OShape shape;
    const char *nm = t->name ? t->name : "";
    FP_TRY(tensor_numel(c, t, &n, &shape));
    if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: tensor \"%.60s\" is of data type %d, not float32 or int64",
                       c->file, nm, t->has_data_type ? t->data_type : 0);
    size_t have = t->has_raw_data ? t->raw_data.len / 8 : t->n_int64_data;
    if ((t->has_raw_data && (t->raw_data.len % 8 || t->n_int64_data)) || have != n || n > 8)
        return fp_fail(c->err, FP_EFORMAT, "%s: tensor \"%.60s\" declares %zu int64 elements and holds %zu (a shape: "
                       "at most 8)", c->file, nm, n, have);
    int64_t *v = calloc(8, sizeof *v);
    if (!v)
        return fp_fail(c->err, FP_ENOMEM, "out of memory reading %s", c->file);
    for (size_t i = 0; i < n; i++) {
        if (t->has_raw_data) {
            uint64_t u = 0;
            for (int b = 7; b >= 0; b--)
                u = u << 8 | t->raw_data.data[8 * i + (size_t)b];
            v[i] = (int64_t)u;
        } else
            v[i] = t->int64_data[i];
    }
    *out = v;
    *n_out = n;
    return FP_OK;
}

// An initializer as an operand: a parameter layer (made on first use, of the kind its
// first use gives it) or, for int64 ones, a shape constant.
static FpStatus use_initializer(CompileCtx *c, int vi, ParamKind kind, Operand *op) {
    OValue *v = &c->values[vi];
    const Onnx__TensorProto *t = c->graph->initializer[v->init];
    if (t->has_data_type && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
        if (!v->ints) {
            size_t n;
            FP_TRY(tensor_ints(c, t, &v->ints, &n));
            v->n_ints = (int)n;
        }
        *op = (Operand){.kind = OPD_INTS, .index = vi};
        return FP_OK;
    }
    if (v->layer < 0) {
        OnnxGraph *g = c->g;
        if (strlen(v->name) >= sizeof(((ParamLayer *)0)->name))
            return NODE_FAIL(c, FP_EUNSUPPORTED, "initializer name \"%.60s...\" is longer than %zu bytes", v->name,
                             sizeof(((ParamLayer *)0)->name) - 1);
        if (g->n_layers == g->cap_layers) {
            int cap = g->cap_layers ? 2 * g->cap_layers : 16;
            OnnxLayer *nl = realloc(g->layers, sizeof *nl * (size_t)cap);
            if (!nl)
                return fp_fail(c->err, FP_ENOMEM, "out of memory compiling %s", c->file);
            g->layers = nl;
            g->cap_layers = cap;
        }
        OnnxLayer *l = &g->layers[g->n_layers];
        memset(l, 0, sizeof *l);
        FP_TRY(tensor_floats(c, t, &l->values, &l->dims));
        l->init = v->init;
        l->kind = kind;
        v->layer = g->n_layers++;
        v->shape = l->dims;
    } else {
        ParamKind had = c->g->layers[v->layer].kind;
        if ((had == PARAM_BN_STAT) != (kind == PARAM_BN_STAT))
            return NODE_FAIL(c, FP_EUNSUPPORTED, "initializer \"%.60s\" is used both as running statistics and as "
                             "a trained weight", v->name);
    }
    *op = (Operand){.kind = OPD_PARAM, .index = v->layer};
    return FP_OK;
}

// Input k of the current node as an operand; kind is the layer kind an initializer there
// gets. *shape its shape (activations: with the batch dimension first).
static FpStatus operand(CompileCtx *c, int k, ParamKind kind, Operand *op, OShape *shape) {
    const Onnx__NodeProto *n = c->node;
    if ((size_t)k >= n->n_input || !n->input[k] || !n->input[k][0])
        return NODE_FAIL(c, FP_EFORMAT, "input %d is missing", k);
    int vi = find_value(c, n->input[k]);
    if (vi < 0)
        return NODE_FAIL(c, FP_EFORMAT, "input \"%.60s\" is not defined before the node (the graph is not in "
                         "topological order, or has a cycle)", n->input[k]);
    OValue *v = &c->values[vi];
    if (v->unusable)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "input \"%.60s\" is an output fedpriv does not compute (%s)",
                         n->input[k], v->unusable);
    if (v->init >= 0)
        FP_TRY(use_initializer(c, vi, kind, op));
    else
        *op = (Operand){.kind = v->is_const ? OPD_CONST : v->ints ? OPD_INTS : OPD_ACT,
                        .index = v->is_const ? v->layer : vi};
    *shape = c->values[vi].shape;
    return FP_OK;
}

static int has_input(const Onnx__NodeProto *n, int k) {
    return (size_t)k < n->n_input && n->input[k] && n->input[k][0];
}

// -- the operators -------------------------------------------------------------------------
// Each compiler fills c->step (kind, operands, geometry) and c->out (the first output's
// shape), or refuses.
static const char *const no_attrs[] = {NULL};

static FpStatus need_act(CompileCtx *c, const Operand *o, const OShape *s, int nd_min, int nd_max, const char *what) {
    if (o->kind != OPD_ACT)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "%s must be computed from the graph input, not a constant", what);
    if (s->nd < nd_min || s->nd > nd_max)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "%s has %d dimensions (this operator takes %d to %d)", what, s->nd,
                         nd_min, nd_max);
    return FP_OK;
}

static FpStatus op_unary(CompileCtx *c) {
    FP_TRY(only_attrs(c, no_attrs));
    OShape s;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &s));
    FP_TRY(need_act(c, &c->step.in[0], &s, 1, 4, "the input"));
    const char *op = c->node->op_type;
    c->step.kind = ST_UNARY;
    c->step.unary = strcmp(op, "Relu") == 0 ? UN_RELU : strcmp(op, "Sigmoid") == 0 ? UN_SIGMOID : UN_TANH;
    c->out = s;
    return FP_OK;
}

static FpStatus op_identity(CompileCtx *c) {
    // Dropout: fedpriv trains without it (identity, as at inference); its ratio is kept in
    // the file and ignored here. Its mask output is never computed.
    static const char *const dropout[] = {"ratio", "seed", "is_test", NULL};
    FP_TRY(only_attrs(c, strcmp(c->node->op_type, "Dropout") == 0 ? dropout : no_attrs));
    OShape s;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &s));
    FP_TRY(need_act(c, &c->step.in[0], &s, 1, 4, "the input"));
    c->step.kind = ST_IDENTITY;
    c->out = s;
    return FP_OK;
}

// a op b where b (a parameter or constant) broadcasts to a (numpy rules, right-aligned),
// as ad_binary_bc can: b's dimensions other than 1 form one run that equals a's there.
static FpStatus broadcast(CompileCtx *c, const OShape *a, const OShape *b, size_t *inner, size_t *nb) {
    if (b->nd > a->nd)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "a constant of %d dimensions cannot broadcast to %d", b->nd, a->nd);
    int off = a->nd - b->nd, lo = -1, hi = -1;
    for (int i = 0; i < b->nd; i++)
        if (b->d[i] != 1) {
            if (lo < 0)
                lo = i + off;
            hi = i + off;
        }
    *inner = 1;
    *nb = 1;
    if (lo < 0)
        return FP_OK; // a scalar
    if (lo == 0)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "a constant along the batch dimension");
    for (int i = lo; i <= hi; i++) {
        if (b->d[i - off] != a->d[i])
            return NODE_FAIL(c, FP_EFORMAT, "shapes do not broadcast: dimension %d is %d and %d", i, a->d[i],
                             b->d[i - off]);
        *nb *= (size_t)a->d[i];
    }
    for (int i = hi + 1; i < a->nd; i++)
        *inner *= (size_t)a->d[i];
    return FP_OK;
}

static int same_shape(const OShape *a, const OShape *b) {
    if (a->nd != b->nd)
        return 0;
    for (int i = 0; i < a->nd; i++)
        if (a->d[i] != b->d[i])
            return 0;
    return 1;
}

static FpStatus op_binary(CompileCtx *c) {
    FP_TRY(only_attrs(c, no_attrs));
    OShape s0, s1;
    Operand o0, o1;
    ParamKind k = c->node->op_type[0] == 'A' ? PARAM_BIAS : PARAM_WEIGHT;
    FP_TRY(operand(c, 0, k, &o0, &s0));
    FP_TRY(operand(c, 1, k, &o1, &s1));
    if (o0.kind != OPD_ACT) { // both operators commute: the activation first
        Operand t = o0;
        o0 = o1;
        o1 = t;
        OShape ts = s0;
        s0 = s1;
        s1 = ts;
    }
    FP_TRY(need_act(c, &o0, &s0, 1, 4, "one input"));
    if (o1.kind == OPD_INTS)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "an int64 operand");
    c->step.kind = c->node->op_type[0] == 'A' ? ST_ADD : ST_MUL;
    c->step.in[0] = o0;
    c->step.in[1] = o1;
    if (o1.kind == OPD_ACT) {
        if (!same_shape(&s0, &s1))
            return NODE_FAIL(c, FP_EUNSUPPORTED, "two computed inputs of different shapes");
        c->step.same = 1;
    } else
        FP_TRY(broadcast(c, &s0, &s1, &c->step.inner, &c->step.nb));
    c->out = s0;
    return FP_OK;
}

static FpStatus op_matmul(CompileCtx *c) {
    FP_TRY(only_attrs(c, no_attrs));
    OShape a, b;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &a));
    FP_TRY(need_act(c, &c->step.in[0], &a, 2, 2, "input A"));
    FP_TRY(operand(c, 1, PARAM_WEIGHT, &c->step.in[1], &b));
    if (c->step.in[1].kind != OPD_PARAM || b.nd != 2 || b.d[0] != a.d[1])
        return NODE_FAIL(c, FP_EUNSUPPORTED, "input B must be a weight of (%d, M)", a.d[1]);
    c->step.kind = ST_MATMUL;
    c->out = (OShape){.nd = 2, .d = {a.d[0], b.d[1]}};
    return FP_OK;
}

static FpStatus op_gemm(CompileCtx *c) {
    static const char *const known[] = {"alpha", "beta", "transA", "transB", NULL};
    FP_TRY(only_attrs(c, known));
    const Onnx__NodeProto *n = c->node;
    if (attr_float(n, "alpha", 1.0f) != 1.0f || attr_float(n, "beta", 1.0f) != 1.0f || attr_int(n, "transA", 0))
        return NODE_FAIL(c, FP_EUNSUPPORTED, "alpha and beta other than 1 or transA are not supported");
    OShape a, b, bias;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &a));
    FP_TRY(need_act(c, &c->step.in[0], &a, 2, 2, "input A"));
    FP_TRY(operand(c, 1, PARAM_WEIGHT, &c->step.in[1], &b));
    int tb = (int)attr_int(n, "transB", 0);
    if (c->step.in[1].kind != OPD_PARAM || b.nd != 2 || b.d[tb ? 1 : 0] != a.d[1])
        return tb ? NODE_FAIL(c, FP_EFORMAT, "input B must be a weight of (N, %d) (transB 1)", a.d[1])
                  : NODE_FAIL(c, FP_EFORMAT, "input B must be a weight of (%d, N)", a.d[1]);
    int m = b.d[tb ? 0 : 1];
    c->step.trans_b = tb;
    c->step.kind = ST_GEMM;
    c->step.in[2].kind = OPD_NONE;
    if (has_input(n, 2)) {
        FP_TRY(operand(c, 2, PARAM_BIAS, &c->step.in[2], &bias));
        if (c->step.in[2].kind != OPD_PARAM || numel_of(&bias) != (size_t)m || bias.d[bias.nd - 1] != m)
            return NODE_FAIL(c, FP_EUNSUPPORTED, "input C must be a bias of %d", m);
    }
    c->out = (OShape){.nd = 2, .d = {a.d[0], m}};
    return FP_OK;
}

static FpStatus op_conv(CompileCtx *c) {
    static const char *const known[] = {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad", NULL};
    FP_TRY(only_attrs(c, known));
    const Onnx__NodeProto *n = c->node;
    OShape x, w, b;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &x));
    FP_TRY(need_act(c, &c->step.in[0], &x, 4, 4, "input X"));
    FP_TRY(operand(c, 1, PARAM_WEIGHT, &c->step.in[1], &w));
    if (c->step.in[1].kind != OPD_PARAM || w.nd != 4 || w.d[1] != x.d[1])
        return NODE_FAIL(c, FP_EFORMAT, "input W must be a weight of (M, %d, kh, kw)", x.d[1]);
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (ap && !(ap->has_s && ap->s.len == 6 && memcmp(ap->s.data, "NOTSET", 6) == 0))
        return NODE_FAIL(c, FP_EUNSUPPORTED, "auto_pad is not supported (give pads)");
    int64_t stride = attr_uniform(n, "strides", 2), pad = attr_uniform(n, "pads", 4), dil = attr_uniform(n, "dilations", 2);
    const Onnx__AttributeProto *ks = attr(n, "kernel_shape");
    if (attr_int(n, "group", 1) != 1 || stride == -2 || pad == -2 || (dil != -1 && dil != 1) ||
        (ks && (ks->n_ints != 2 || ks->ints[0] != w.d[2] || ks->ints[1] != w.d[3])))
        return NODE_FAIL(c, FP_EUNSUPPORTED, "only group 1, dilation 1, equal strides and equal pads on every side, "
                         "kernel_shape as W's");
    stride = stride < 0 ? 1 : stride;
    pad = pad < 0 ? 0 : pad;
    if (stride < 1 || stride > 64 || pad > 64)
        return NODE_FAIL(c, FP_EFORMAT, "stride %lld, pad %lld", (long long)stride, (long long)pad);
    int ho = (x.d[2] + 2 * (int)pad - w.d[2]), wo = (x.d[3] + 2 * (int)pad - w.d[3]);
    if (ho < 0 || wo < 0)
        return NODE_FAIL(c, FP_EFORMAT, "the kernel %dx%d is larger than the padded input %dx%d", w.d[2], w.d[3],
                         x.d[2] + 2 * (int)pad, x.d[3] + 2 * (int)pad);
    c->step.kind = ST_CONV;
    c->step.stride = (int)stride;
    c->step.pad = (int)pad;
    c->step.in[2].kind = OPD_NONE;
    if (has_input(n, 2)) {
        FP_TRY(operand(c, 2, PARAM_BIAS, &c->step.in[2], &b));
        if (c->step.in[2].kind != OPD_PARAM || b.nd != 1 || b.d[0] != w.d[0])
            return NODE_FAIL(c, FP_EFORMAT, "input B must be a bias of %d", w.d[0]);
    }
    c->out = (OShape){.nd = 4, .d = {x.d[0], w.d[0], ho / (int)stride + 1, wo / (int)stride + 1}};
    return FP_OK;
}

static FpStatus op_pool(CompileCtx *c) {
    static const char *const known[] = {"kernel_shape", "strides", "pads", "ceil_mode", "dilations",
                                        "storage_order", "count_include_pad", "auto_pad", NULL};
    FP_TRY(only_attrs(c, known));
    const Onnx__NodeProto *n = c->node;
    OShape x;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &x));
    FP_TRY(need_act(c, &c->step.in[0], &x, 4, 4, "input X"));
    int64_t k = attr_uniform(n, "kernel_shape", 2), stride = attr_uniform(n, "strides", 2),
            pad = attr_uniform(n, "pads", 4), dil = attr_uniform(n, "dilations", 2);
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (k < 1 || stride == -2 || (pad != -1 && pad != 0) || (dil != -1 && dil != 1) || attr_int(n, "ceil_mode", 0) ||
        attr_int(n, "storage_order", 0) || (ap && !(ap->has_s && ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6))))
        return NODE_FAIL(c, FP_EUNSUPPORTED, "only square kernels, equal strides, no padding, no dilation, no "
                         "ceil_mode");
    stride = stride < 0 ? 1 : stride;
    if (k > x.d[2] || k > x.d[3] || stride > 64)
        return NODE_FAIL(c, FP_EFORMAT, "kernel %lld on an input of %dx%d", (long long)k, x.d[2], x.d[3]);
    c->step.kind = n->op_type[0] == 'M' ? ST_MAXPOOL : ST_AVGPOOL;
    c->step.k = (int)k;
    c->step.stride = (int)stride;
    c->out = (OShape){.nd = 4, .d = {x.d[0], x.d[1], (x.d[2] - (int)k) / (int)stride + 1,
                                     (x.d[3] - (int)k) / (int)stride + 1}};
    return FP_OK;
}

static FpStatus op_global_avgpool(CompileCtx *c) {
    FP_TRY(only_attrs(c, no_attrs));
    OShape x;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &x));
    FP_TRY(need_act(c, &c->step.in[0], &x, 4, 4, "input X"));
    if (x.d[2] != x.d[3])
        return NODE_FAIL(c, FP_EUNSUPPORTED, "a %dx%d input: only square ones", x.d[2], x.d[3]);
    c->step.kind = ST_AVGPOOL;
    c->step.k = c->step.stride = x.d[2];
    c->out = (OShape){.nd = 4, .d = {x.d[0], x.d[1], 1, 1}};
    return FP_OK;
}

static FpStatus op_flatten(CompileCtx *c) {
    static const char *const known[] = {"axis", NULL};
    FP_TRY(only_attrs(c, known));
    OShape x;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &x));
    FP_TRY(need_act(c, &c->step.in[0], &x, 1, 4, "the input"));
    if (attr_int(c->node, "axis", 1) != 1)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "only axis 1 (the batch stays the first dimension)");
    c->step.kind = ST_RESHAPE;
    c->out = (OShape){.nd = 2, .d = {x.d[0], (int)(numel_of(&x) / (size_t)x.d[0])}};
    return FP_OK;
}

static FpStatus op_reshape(CompileCtx *c) {
    static const char *const known[] = {"allowzero", NULL};
    FP_TRY(only_attrs(c, known));
    OShape x, s;
    Operand so;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &x));
    FP_TRY(need_act(c, &c->step.in[0], &x, 1, 4, "the data"));
    FP_TRY(operand(c, 1, PARAM_WEIGHT, &so, &s));
    if (so.kind != OPD_INTS)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "the shape must be a constant (a dynamic shape)");
    const OValue *sv = &c->values[so.index];
    if (attr_int(c->node, "allowzero", 0) || sv->n_ints < 1 || sv->n_ints > 4)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "a target shape of %d dimensions (1 to 4), allowzero 0", sv->n_ints);
    // The first entry keeps the batch (0, -1 or the declared batch); the rest are fixed,
    // one of them -1 at most.
    int64_t first = sv->ints[0];
    if (first != 0 && first != -1 && first != c->batch)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "the target shape's first entry %lld changes the batch", (long long)first);
    OShape o = {.nd = sv->n_ints, .d = {x.d[0]}};
    size_t per = numel_of(&x) / (size_t)x.d[0], known_n = 1;
    int infer = -1;
    for (int i = 1; i < sv->n_ints; i++) {
        int64_t v = sv->ints[i];
        if (v == 0 && i < x.nd)
            v = x.d[i];
        if (v == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (v < 1 || v > INT_MAX)
            return NODE_FAIL(c, FP_EFORMAT, "target shape entry %d is %lld", i, (long long)sv->ints[i]);
        o.d[i] = (int)v;
        known_n *= (size_t)v;
        if (known_n > per)
            break;
    }
    if (infer >= 0 && known_n && per % known_n == 0)
        o.d[infer] = (int)(per / known_n), known_n = per;
    if (known_n != per)
        return NODE_FAIL(c, FP_EFORMAT, "cannot reshape %zu elements per sample to the target shape", per);
    c->step.kind = ST_RESHAPE;
    c->out = o;
    return FP_OK;
}

static FpStatus op_softmax(CompileCtx *c) {
    static const char *const known[] = {"axis", NULL};
    FP_TRY(only_attrs(c, known));
    OShape x;
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &x));
    FP_TRY(need_act(c, &c->step.in[0], &x, 2, 2, "the input"));
    int64_t axis = attr_int(c->node, "axis", c->opset >= 13 ? -1 : 1);
    if (axis != 1 && axis != -1)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "axis %lld (only the last of a 2-D input)", (long long)axis);
    c->step.kind = c->node->op_type[0] == 'L' ? ST_LOGSOFTMAX : ST_SOFTMAX;
    c->out = x;
    return FP_OK;
}

static FpStatus op_batchnorm(CompileCtx *c) {
    static const char *const known[] = {"epsilon", "momentum", "training_mode", "spatial", NULL};
    FP_TRY(only_attrs(c, known));
    OShape x, s[4];
    static const ParamKind kinds[4] = {PARAM_BN_SCALE, PARAM_BN_SHIFT, PARAM_BN_STAT, PARAM_BN_STAT};
    FP_TRY(operand(c, 0, PARAM_WEIGHT, &c->step.in[0], &x));
    if (x.nd != 2 && x.nd != 4)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "input X has %d dimensions (2 or 4)", x.nd);
    FP_TRY(need_act(c, &c->step.in[0], &x, 2, 4, "input X"));
    if (attr_int(c->node, "spatial", 1) != 1)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "spatial 0");
    for (int k = 0; k < 4; k++) {
        FP_TRY(operand(c, k + 1, kinds[k], &c->step.bn[k], &s[k]));
        if (c->step.bn[k].kind != OPD_PARAM || s[k].nd != 1 || s[k].d[0] != x.d[1])
            return NODE_FAIL(c, FP_EFORMAT, "input %d must be an initializer of %d (the channels)", k + 1, x.d[1]);
    }
    c->step.kind = ST_BATCHNORM;
    c->step.eps = attr_float(c->node, "epsilon", 1e-5f);
    // ONNX: running = running·momentum + batch·(1 − momentum); PyTorch's momentum (and the
    // core's, models/resnet18.c) is 1 − that, exported 0.1 → 0.9, taken back to 0.1f.
    c->step.momentum = (float)(1.0 - (double)attr_float(c->node, "momentum", 0.9f));
    if (!(c->step.eps > 0) || !(c->step.momentum >= 0 && c->step.momentum <= 1))
        return NODE_FAIL(c, FP_EFORMAT, "epsilon %g, momentum %g", c->step.eps, 1 - c->step.momentum);
    c->out = x;
    return FP_OK;
}

static FpStatus op_constant(CompileCtx *c) {
    static const char *const known[] = {"value", NULL};
    FP_TRY(only_attrs(c, known));
    const Onnx__AttributeProto *a = attr(c->node, "value");
    if (!a || !a->t)
        return NODE_FAIL(c, FP_EUNSUPPORTED, "only a tensor \"value\"");
    c->step.kind = ST_CONSTANT;
    c->step.tensor = a->t;
    return FP_OK;
}

typedef struct OnnxOpEntry {
    const char *name;
    FpStatus (*compile)(CompileCtx *c);
} OnnxOpEntry;

static const OnnxOpEntry onnx_ops[] = {
    {"Gemm", op_gemm},           {"MatMul", op_matmul},
    {"Add", op_binary},          {"Mul", op_binary},
    {"Relu", op_unary},          {"Sigmoid", op_unary},
    {"Tanh", op_unary},          {"Conv", op_conv},
    {"MaxPool", op_pool},        {"AveragePool", op_pool},
    {"GlobalAveragePool", op_global_avgpool},
    {"Flatten", op_flatten},     {"Reshape", op_reshape},
    {"Softmax", op_softmax},     {"LogSoftmax", op_softmax},
    {"BatchNormalization", op_batchnorm},
    {"Dropout", op_identity},    {"Identity", op_identity},
    {"Constant", op_constant},
};

// -- the graph ---------------------------------------------------------------------------
static FpStatus check_opset(CompileCtx *c, const Onnx__ModelProto *mp) {
    int64_t v = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (d[0] == 0 || strcmp(d, "ai.onnx") == 0)
            v = o->has_version ? o->version : -1;
    }
    if (v < ONNX_OPSET_MIN || v > ONNX_OPSET_MAX)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: opset %lld of the default domain: fedpriv reads opsets %d to %d",
                       c->file, (long long)v, ONNX_OPSET_MIN, ONNX_OPSET_MAX);
    c->opset = (int)v;
    return FP_OK;
}

// The graph input: the one input that is not an initializer, float32, its dimensions
// after the first fixed.
static FpStatus graph_input(CompileCtx *c, const DataShape *in) {
    const Onnx__GraphProto *g = c->graph;
    const Onnx__ValueInfoProto *vi = NULL;
    for (size_t i = 0; i < g->n_input; i++) {
        const char *nm = g->input[i]->name ? g->input[i]->name : "";
        int is_init = 0;
        for (size_t k = 0; k < g->n_initializer; k++)
            is_init |= g->initializer[k]->name && strcmp(g->initializer[k]->name, nm) == 0;
        if (is_init)
            continue;
        if (vi)
            return fp_fail(c->err, FP_EUNSUPPORTED, "%s: the graph has more than one input (\"%.60s\", \"%.60s\")",
                           c->file, vi->name ? vi->name : "", nm);
        vi = g->input[i];
    }
    if (!vi)
        return fp_fail(c->err, FP_EFORMAT, "%s: the graph has no input", c->file);
    const char *nm = vi->name ? vi->name : "";
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type->has_elem_type ||
        tp->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || !tp->tensor_type->shape)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: graph input \"%.60s\": only a float32 tensor of known shape",
                       c->file, nm);
    const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
    if (sp->n_dim < 2 || sp->n_dim > 4)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: graph input \"%.60s\" has %zu dimensions (2 to 4: the batch "
                       "first)", c->file, nm, sp->n_dim);
    OShape s = {.nd = (int)sp->n_dim};
    const Onnx__TensorShapeProto__Dimension *d0 = sp->dim[0];
    c->batch = d0->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? d0->dim_value : -1;
    s.d[0] = c->batch > 0 && c->batch < 1 << 20 ? (int)c->batch : 1;
    for (int i = 1; i < s.nd; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
        if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE || d->dim_value < 1 ||
            d->dim_value > 1 << 20)
            return fp_fail(c->err, FP_EUNSUPPORTED, "%s: graph input \"%.60s\": dimension %d is dynamic (only the "
                           "batch may be)", c->file, nm, i);
        s.d[i] = (int)d->dim_value;
    }
    size_t per = numel_of(&s) / (size_t)s.d[0];
    if (in && per != (size_t)in->c * in->h * in->w)
        return fp_fail(c->err, FP_EFORMAT, "%s: graph input \"%.60s\" takes %zu values per sample, the data has %d "
                       "(%dx%dx%d)", c->file, nm, per, in->c * in->h * in->w, in->c, in->h, in->w);
    c->g->in_shape = s;
    c->g->in_value = c->n_values;
    return add_value(c, nm, (OValue){.shape = s, .init = -1, .layer = -1}, c->err);
}

static FpStatus compile_nodes(CompileCtx *c) {
    const Onnx__GraphProto *g = c->graph;
    OnnxGraph *og = c->g;
    if (g->n_node > ONNX_MAX_NODES)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: %zu nodes (at most %d)", c->file, g->n_node, ONNX_MAX_NODES);
    og->steps = calloc(g->n_node ? g->n_node : 1, sizeof *og->steps);
    if (!og->steps)
        return fp_fail(c->err, FP_ENOMEM, "out of memory compiling %s", c->file);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        c->node = n;
        c->node_index = (int)i;
        memset(&c->step, 0, sizeof c->step);
        if (!n->op_type)
            return NODE_FAIL(c, FP_EFORMAT, "no operator");
        if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
            return NODE_FAIL(c, FP_EUNSUPPORTED, "domain \"%.40s\" is not supported", n->domain);
        const OnnxOpEntry *e = NULL;
        for (size_t k = 0; k < sizeof onnx_ops / sizeof onnx_ops[0]; k++)
            if (strcmp(onnx_ops[k].name, n->op_type) == 0)
                e = &onnx_ops[k];
        if (!e)
            return NODE_FAIL(c, FP_EUNSUPPORTED, "operator not supported (fedpriv runs Gemm, MatMul, Add, Mul, Relu, "
                             "Sigmoid, Tanh, Conv, MaxPool, AveragePool, GlobalAveragePool, Flatten, Reshape, "
                             "Softmax, LogSoftmax, BatchNormalization, Dropout, Identity, Constant)");
        if (n->n_output < 1 || !n->output[0] || !n->output[0][0])
            return NODE_FAIL(c, FP_EFORMAT, "no output");
        FP_TRY(e->compile(c));
        OValue v = {.shape = c->out, .init = -1, .layer = -1};
        if (c->step.kind == ST_CONSTANT) {
            const Onnx__TensorProto *t = c->step.tensor;
            if (t->has_data_type && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
                size_t nn;
                FP_TRY(tensor_ints(c, t, &v.ints, &nn));
                v.n_ints = (int)nn;
                FpStatus st = add_value(c, n->output[0], v, c->err);
                if (st != FP_OK)
                    free(v.ints); // not in the table: freed here
                FP_TRY(st);
                continue;
            } else if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
                // Dropout's training_mode (a bool) and the like: known, never read.
                v.unusable = "a constant neither float32 nor int64";
            } else {
                OnnxConst *k = &og->consts[og->n_consts];
                if (og->n_consts == ONNX_MAX_CONSTS)
                    return NODE_FAIL(c, FP_EUNSUPPORTED, "more than %d float constants", ONNX_MAX_CONSTS);
                FP_TRY(tensor_floats(c, t, &k->values, &k->shape));
                v.is_const = 1;
                v.shape = k->shape;
                v.layer = og->n_consts++; // the constant's index
            }
            FP_TRY(add_value(c, n->output[0], v, c->err));
            continue; // no step: the value is known now
        }
        if (c->step.in[0].kind == OPD_ACT)
            c->step.src = c->step.in[0].index;
        c->step.out = c->n_values;
        c->step.shape = c->out;
        og->steps[og->n_steps++] = c->step;
        FP_TRY(add_value(c, n->output[0], v, c->err));
        for (size_t k = 1; k < n->n_output; k++)
            if (n->output[k] && n->output[k][0])
                FP_TRY(add_value(c, n->output[k],
                                 (OValue){.init = -1, .layer = -1, .unusable = "a second output of the node"},
                                 c->err));
    }
    c->node = NULL;
    if (g->n_output != 1 || !g->output[0]->name)
        return fp_fail(c->err, FP_EUNSUPPORTED, "%s: the graph has %zu outputs (one: the logits)", c->file,
                       g->n_output);
    int vo = find_value(c, g->output[0]->name);
    if (vo < 0 || c->values[vo].init >= 0 || c->values[vo].is_const || c->values[vo].ints || c->values[vo].unusable)
        return fp_fail(c->err, FP_EFORMAT, "%s: the graph output \"%.60s\" is not computed by a node", c->file,
                       g->output[0]->name);
    const OShape *os = &c->values[vo].shape;
    int k = c->in ? (c->in->n_classes ? c->in->n_classes : c->in->target_dim) : os->d[1];
    if (os->nd != 2 || os->d[1] != k)
        return fp_fail(c->err, FP_EFORMAT, "%s: the graph output \"%.60s\" must be (batch, %d) for this data, it is "
                       "%d-dimensional with %d in its last", c->file, g->output[0]->name, k, os->nd, os->d[os->nd - 1]);
    og->out_value = vo;
    og->n_values = c->n_values;
    if (og->n_layers == 0)
        return fp_fail(c->err, FP_EFORMAT, "%s: the graph has no weights (float initializers)", c->file);
    return FP_OK;
}

void onnx_graph_free(OnnxGraph *g) {
    if (!g)
        return;
    for (int i = 0; i < g->n_layers; i++)
        free(g->layers[i].values);
    for (int i = 0; i < g->n_consts; i++)
        free(g->consts[i].values);
    free(g->layers);
    free(g->steps);
    if (g->proto)
        onnx__model_proto__free_unpacked(g->proto, &g->arena->alloc);
    free(g->arena);
    free(g);
}

FpStatus onnx_graph_compile(const uint8_t *buf, size_t len, const char *name, const DataShape *in, OnnxGraph **out,
                            size_t *peak, FpError *err) {
    *out = NULL;
    OnnxGraph *g = calloc(1, sizeof *g);
    OnnxArena *a = malloc(sizeof *a);
    if (!g || !a) {
        free(g);
        free(a);
        return fp_fail(err, FP_ENOMEM, "out of memory reading %s", name);
    }
    atomic_init(&g->refs, 1);
    onnx_arena_init(a, len);
    g->arena = a;
    g->proto = onnx__model_proto__unpack(&a->alloc, len, buf);
    if (peak)
        *peak = a->peak;
    if (!g->proto) {
        FpStatus st = a->refused ? fp_fail(err, FP_EFORMAT, "%s: not an ONNX model: it declares more data than "
                                           "its %zu bytes hold", name, len)
                                 : fp_fail(err, FP_EFORMAT, "%s: not an ONNX model (the protobuf is truncated or "
                                           "malformed)", name);
        onnx_graph_free(g);
        return st;
    }
    CompileCtx c = {.file = name, .file_len = len, .err = err, .g = g, .in = in};
    FpStatus st = FP_OK;
    if (!g->proto->graph)
        st = fp_fail(err, FP_EFORMAT, "%s: an ONNX model without a graph", name);
    if (st == FP_OK)
        st = check_opset(&c, g->proto);
    if (st == FP_OK) {
        c.graph = g->proto->graph;
        // Every initializer is a value from the start: a node may use any of them.
        for (size_t i = 0; st == FP_OK && i < c.graph->n_initializer; i++) {
            const Onnx__TensorProto *t = c.graph->initializer[i];
            if (!t->name || !t->name[0])
                st = fp_fail(err, FP_EFORMAT, "%s: initializer %zu has no name", name, i);
            else
                st = add_value(&c, t->name, (OValue){.init = (int)i, .layer = -1}, err);
        }
    }
    if (st == FP_OK)
        st = graph_input(&c, in);
    if (st == FP_OK)
        st = compile_nodes(&c);
    for (int i = 0; i < c.n_values; i++)
        free(c.values[i].ints);
    free(c.values);
    if (st != FP_OK) {
        onnx_graph_free(g);
        return st;
    }
    *out = g;
    return FP_OK;
}

FpStatus onnx_check_bytes(const uint8_t *buf, size_t len, const char *name, const DataShape *in, size_t *peak,
                          FpError *err) {
    OnnxGraph *g;
    FP_TRY(onnx_graph_compile(buf, len, name, in, &g, peak, err));
    onnx_graph_free(g);
    return FP_OK;
}
