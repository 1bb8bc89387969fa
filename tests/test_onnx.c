// ONNX models in and trained weights out (models/onnx.h).
//
// Graphs are built here through the same protoc-c code the reader uses, so a test names
// exactly the malformation it makes. The round trip with PyTorch is tests/onnx_roundtrip.py
// (python3-torch, which `make test` installs).
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/jsonv.h"
#include "models/onnx_internal.h"
#include "models/onnx.h"
#include "tests/cli_run.h"
#include "tests/scratch.h"

// -- building graphs ---------------------------------------------------------------------
// A graph under construction: everything it points to lives in the builder (fixed pools),
// freed at once.
typedef struct {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    Onnx__NodeProto nodes[16], *node_ptrs[16];
    Onnx__AttributeProto attrs[32], *attr_ptrs[32];
    int n_attrs;
    Onnx__TensorProto inits[16], *init_ptrs[16];
    float *data[16];
    int64_t dims[16][4];
    Onnx__ValueInfoProto in, out, *in_ptr, *out_ptr;
    Onnx__TypeProto in_type, out_type;
    Onnx__TypeProto__Tensor in_tt, out_tt;
    Onnx__TensorShapeProto in_shape;
    Onnx__TensorShapeProto__Dimension in_dims[4], *in_dim_ptrs[4];
    char *ios[16][6];
    int64_t ints[32][4];
} Builder;

static void b_init(Builder *b, int opset, int n_in_dims, const int *in_dims) {
    memset(b, 0, sizeof *b);
    b->model = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    b->graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    b->opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->model.n_opset_import = 1;
    b->model.opset_import = b->opsets;
    b->model.has_ir_version = 1;
    b->model.ir_version = 8;
    b->model.graph = &b->graph;
    b->graph.node = b->node_ptrs;
    b->graph.initializer = b->init_ptrs;
    b->in = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    b->out = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    b->in.name = "x";
    b->out.name = "y";
    b->in_type = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    b->in_tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    b->in_tt.has_elem_type = 1;
    b->in_tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    b->in_shape = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int i = 0; i < n_in_dims; i++) {
        b->in_dims[i] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (i == 0) {
            b->in_dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            b->in_dims[i].dim_param = "batch";
        } else {
            b->in_dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            b->in_dims[i].dim_value = in_dims[i];
        }
        b->in_dim_ptrs[i] = &b->in_dims[i];
    }
    b->in_shape.n_dim = (size_t)n_in_dims;
    b->in_shape.dim = b->in_dim_ptrs;
    b->in_tt.shape = &b->in_shape;
    b->in_type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->in_type.tensor_type = &b->in_tt;
    b->in.type = &b->in_type;
    b->in_ptr = &b->in;
    b->out_ptr = &b->out;
    b->graph.n_input = 1;
    b->graph.input = &b->in_ptr;
    b->graph.n_output = 1;
    b->graph.output = &b->out_ptr;
}

// A float initializer of the given dims with values v (copied), or uniform ±0.5 from a
// fixed sequence when v is NULL.
static void b_init_tensor(Builder *b, const char *name, int nd, const int *dims, const float *v) {
    int k = (int)b->graph.n_initializer++;
    Onnx__TensorProto *t = &b->inits[k];
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        b->dims[k][i] = dims[i];
        n *= (size_t)dims[i];
    }
    t->n_dims = (size_t)nd;
    t->dims = b->dims[k];
    b->data[k] = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        b->data[k][i] = v ? v[i] : (float)(((i * 7919 + (size_t)k * 104729) % 1000) / 1000.0 - 0.5);
    t->n_float_data = n;
    t->float_data = b->data[k];
    b->init_ptrs[k] = t;
}

// A node op(inputs) -> outputs (NULL-terminated lists of at most 3 inputs, 2 outputs).
static Onnx__NodeProto *b_node(Builder *b, const char *op, const char *name, const char *i0, const char *i1,
                               const char *i2, const char *out) {
    int k = (int)b->graph.n_node++;
    Onnx__NodeProto *n = &b->nodes[k];
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->op_type = (char *)op;
    n->name = (char *)name;
    const char *ins[3] = {i0, i1, i2};
    for (int i = 0; i < 3 && ins[i]; i++)
        b->ios[k][n->n_input++] = (char *)ins[i];
    n->input = b->ios[k];
    b->ios[k][3] = (char *)out;
    n->n_output = 1;
    n->output = &b->ios[k][3];
    n->attribute = &b->attr_ptrs[b->n_attrs];
    b->node_ptrs[k] = n;
    return n;
}

// Attributes of the node made last.
static void b_attr_int(Builder *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = &b->attrs[b->n_attrs];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    b->attr_ptrs[b->n_attrs++] = a;
    n->n_attribute++;
}

static void b_attr_ints(Builder *b, Onnx__NodeProto *n, const char *name, int64_t v, int count) {
    Onnx__AttributeProto *a = &b->attrs[b->n_attrs];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    for (int i = 0; i < count; i++)
        b->ints[b->n_attrs][i] = v;
    a->n_ints = (size_t)count;
    a->ints = b->ints[b->n_attrs];
    b->attr_ptrs[b->n_attrs++] = a;
    n->n_attribute++;
}

static uint8_t *b_pack(Builder *b, size_t *len) {
    *len = protobuf_c_message_get_packed_size(&b->model.base);
    uint8_t *buf = malloc(*len + 1);
    protobuf_c_message_pack(&b->model.base, buf);
    return buf;
}

static void b_free(Builder *b) {
    for (int i = 0; i < 16; i++)
        free(b->data[i]);
}

// The small valid graph the refusals start from: x (N,4) -> Gemm(W 3x4, B 3, transB) ->
// Relu -> y (N,3), for write_tiny_csv's data.
static void b_tiny(Builder *b, int opset) {
    int in[2] = {0, 4}, w[2] = {3, 4}, bias[1] = {3};
    b_init(b, opset, 2, in);
    b_init_tensor(b, "fc.weight", 2, w, NULL);
    b_init_tensor(b, "fc.bias", 1, bias, NULL);
    Onnx__NodeProto *g = b_node(b, "Gemm", "fc", "x", "fc.weight", "fc.bias", "h");
    b_attr_int(b, g, "transB", 1);
    b_node(b, "Relu", "act", "h", NULL, NULL, "y");
}

static void write_bytes(const char *path, const uint8_t *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

// -- refusals ------------------------------------------------------------------------------
typedef struct {
    const char *what;
    const char *expect; // in the one line
} Refusal;

// Builds malformation i into buf; returns its length.
static uint8_t *malformed(int i, size_t *len) {
    Builder b;
    uint8_t *buf = NULL;
    switch (i) {
    case 0: // truncated: half of a valid file
        b_tiny(&b, 13);
        buf = b_pack(&b, len);
        *len /= 2;
        break;
    case 1: // an opset before 9
        b_tiny(&b, 7);
        buf = b_pack(&b, len);
        break;
    case 2: // an operator the core does not have
        b_tiny(&b, 13);
        b.nodes[1].op_type = "Erf";
        buf = b_pack(&b, len);
        break;
    case 3: { // a cycle: fc reads the Relu's output, the Relu reads fc's
        b_tiny(&b, 13);
        b.ios[0][0] = "y";
        b.ios[1][0] = "h";
        buf = b_pack(&b, len);
        break;
    }
    case 4: // a weight of the wrong shape for the input: (3, 5)
        b_tiny(&b, 13);
        b.dims[0][1] = 5;
        b.inits[0].n_float_data = 15;
        b.data[0] = realloc(b.data[0], sizeof(float) * 15);
        b.inits[0].float_data = b.data[0];
        buf = b_pack(&b, len);
        break;
    case 5: // a tensor declaring 2^60 elements, holding 12
        b_tiny(&b, 13);
        b.dims[0][0] = (int64_t)1 << 30;
        b.dims[0][1] = (int64_t)1 << 30;
        buf = b_pack(&b, len);
        break;
    case 6: // a dynamic shape: the input's features symbolic
        b_tiny(&b, 13);
        b.in_dims[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        b.in_dims[1].dim_param = "features";
        buf = b_pack(&b, len);
        break;
    case 7: // an attribute the core cannot run: a grouped convolution
        b_tiny(&b, 13);
        b.nodes[0].op_type = "Conv";
        b.nodes[0].n_attribute = 0;
        {
            Onnx__NodeProto *n = &b.nodes[0];
            n->attribute = &b.attr_ptrs[b.n_attrs];
            b_attr_int(&b, n, "group", 2);
        }
        buf = b_pack(&b, len);
        break;
    case 8: { // a length-delimited field that claims 2 GiB (protobuf level)
        static const uint8_t bytes[] = {0x3a, 0xff, 0xff, 0xff, 0xff, 0x07, 0x0a, 0x00};
        *len = sizeof bytes;
        buf = malloc(*len);
        memcpy(buf, bytes, *len);
        return buf;
    }
    case 9: // an opset from the future, and a dropped output
        b_tiny(&b, 99);
        buf = b_pack(&b, len);
        break;
    case 10: // raw bytes that are not a multiple of 4 for a float tensor
        b_tiny(&b, 13);
        b.inits[1].n_float_data = 0;
        b.inits[1].has_raw_data = 1;
        b.inits[1].raw_data = (ProtobufCBinaryData){.len = 11, .data = (uint8_t *)"0123456789a"};
        buf = b_pack(&b, len);
        break;
    default: // the graph's output is never computed
        b_tiny(&b, 13);
        b.out.name = "nowhere";
        buf = b_pack(&b, len);
        break;
    }
    b_free(&b);
    return buf;
}

static const Refusal refusals[] = {
    {"truncated", "truncated or malformed"},
    {"opset 7", "opset 7"},
    {"unsupported operator", "node \"act\" (Erf): operator not supported"},
    {"cycle", "node \"fc\" (Gemm): input \"y\" is not defined before the node"},
    {"shape mismatch", "node \"fc\" (Gemm)"},
    {"huge declared tensor", "declares more elements than the file holds"},
    {"dynamic shape", "dimension 1 is dynamic"},
    {"grouped convolution", "node \"fc\" (Conv)"},
    {"2 GiB field", "not an ONNX model"},
    {"opset 99", "opset 99"},
    {"ragged raw data", "declares 3 elements and holds 2"},
    {"output never computed", "\"nowhere\" is not computed by a node"},
};
#define N_REFUSALS (int)(sizeof refusals / sizeof refusals[0])

// In process: every malformed file is refused with the expected line, and the unpacking
// never held more than the bound the file's size sets.
START_TEST(malformed_files_refused_in_process) {
    DataShape in = {.c = 1, .h = 1, .w = 4, .n_classes = 3};
    for (int i = 0; i < N_REFUSALS; i++) {
        size_t len, peak = 0;
        uint8_t *buf = malformed(i, &len);
        FpError err = {0};
        FpStatus st = onnx_check_bytes(buf, len, "bad.onnx", &in, &peak, &err);
        ck_assert_msg(st == FP_EFORMAT || st == FP_EUNSUPPORTED, "%s: status %d (%s)", refusals[i].what, st, err.msg);
        ck_assert_msg(strstr(err.msg, refusals[i].expect), "%s: \"%s\" lacks \"%s\"", refusals[i].what, err.msg,
                      refusals[i].expect);
        ck_assert_msg(strncmp(err.msg, "bad.onnx: ", 10) == 0, "%s: the line does not name the file: %s",
                      refusals[i].what, err.msg);
        ck_assert_msg(peak <= len * 128 + ((size_t)1 << 20), "%s: %zu bytes held for a file of %zu",
                      refusals[i].what, peak, len);
        free(buf);
    }
    // The valid graph they come from compiles.
    Builder b;
    b_tiny(&b, 13);
    size_t len;
    uint8_t *buf = b_pack(&b, &len);
    FpError err = {0};
    ck_assert_msg(onnx_check_bytes(buf, len, "ok.onnx", &in, NULL, &err) == FP_OK, "%s", err.msg);
    free(buf);
    b_free(&b);
}
END_TEST

// Through the CLI: `fedpriv train` on each gives exit 2 and one clean line naming the file.
START_TEST(malformed_files_refused_by_train) {
    SKIP_UNLESS_BIN();
    char dir[256], p[512], cfg[512], out[8192], errb[8192];
    scratch_make(dir, sizeof dir, "onnx-bad");
    write_tiny_csv(scratch_path(dir, "data.csv", p, sizeof p));
    snprintf(cfg, sizeof cfg, "%s/train.json", dir);
    char text[1024];
    snprintf(text, sizeof text,
             "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s/data.csv\"}, \"model\": {\"onnx\": \"bad.onnx\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 16}, \"threads\": 1}",
             dir);
    write_text(cfg, text);
    for (int i = 0; i < N_REFUSALS; i++) {
        size_t len;
        uint8_t *buf = malformed(i, &len);
        write_bytes(scratch_path(dir, "bad.onnx", p, sizeof p), buf, len);
        free(buf);
        const char *args[] = {"train", "--config", cfg, NULL};
        int rc = cli_run(args, out, errb, sizeof out);
        ck_assert_msg(rc == 2, "%s: exit %d: %s", refusals[i].what, rc, errb);
        assert_one_clean_line(errb);
        ck_assert_msg(strstr(errb, "bad.onnx") && strstr(errb, refusals[i].expect), "%s: %s", refusals[i].what, errb);
        ck_assert_str_eq(out, "");
    }
    scratch_remove(dir);
}
END_TEST

// -- an imported LeNet is the built-in lenet -------------------------------------------------
// DLG's LeNet (models/cnn.c) on 1x8x8 inputs, 4 classes, written as ONNX with the built-in
// model's initial weights: its logits, gradients and second-order gradients (what gradient
// inversion differentiates) are the built-in model's, bit for bit.
static Model *builtin_lenet(const DataShape *in) {
    cJSON *j = cJSON_Parse("{\"name\": \"lenet\", \"init\": \"uniform\"}");
    FpError err = {0};
    Model *m = model_create(j, "model", in, backend_cpu(), &err);
    cJSON_Delete(j);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_int_eq(model_init(m, 5, &err), FP_OK);
    return m;
}

static uint8_t *lenet_onnx(const Model *ref, size_t *len) {
    Builder b;
    int in[4] = {0, ref->in.c, ref->in.h, ref->in.w};
    b_init(&b, 13, 4, in);
    float *host = malloc(sizeof(float) * ref->table.n_params);
    model_get_params(ref, host);
    for (int i = 0; i < ref->table.n_layers; i++) {
        const ParamLayer *l = &ref->table.layers[i];
        b_init_tensor(&b, l->name, l->ndim, l->shape, host + l->offset);
    }
    free(host);
    static const char *const conv_in[3] = {"x", "s1", "s2"}, *const conv_out[3] = {"c1", "c2", "c3"},
                             *const sig_out[3] = {"s1", "s2", "s3"};
    static const int strides[3] = {2, 2, 1};
    for (int k = 0; k < 3; k++) {
        Onnx__NodeProto *n = b_node(&b, "Conv", NULL, conv_in[k], b.inits[2 * k].name, b.inits[2 * k + 1].name,
                                    conv_out[k]);
        b_attr_ints(&b, n, "strides", strides[k], 2);
        b_attr_ints(&b, n, "pads", 2, 4);
        b_attr_ints(&b, n, "kernel_shape", 5, 2);
        b_node(&b, "Sigmoid", NULL, conv_out[k], NULL, NULL, sig_out[k]);
    }
    b_node(&b, "Flatten", NULL, "s3", NULL, NULL, "flat");
    Onnx__NodeProto *g = b_node(&b, "Gemm", NULL, "flat", "fc.weight", "fc.bias", "y");
    b_attr_int(&b, g, "transB", 1);
    uint8_t *buf = b_pack(&b, len);
    b_free(&b);
    return buf;
}

static Model *imported(const uint8_t *buf, size_t len, const DataShape *in, const char *dir) {
    char p[512];
    write_bytes(scratch_path(dir, "lenet.onnx", p, sizeof p), buf, len);
    cJSON *j = cJSON_Parse("{\"onnx\": \"lenet.onnx\"}");
    FpError err = {0};
    Model *m = model_create_at(j, "model", in, backend_cpu(), dir, &err);
    cJSON_Delete(j);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_int_eq(model_init(m, 123, &err), FP_OK); // the seed is not used: the file's weights are
    return m;
}

// loss = CE(f(x), y); g = dL/dθ; h = d(Σ g²)/dx: the values of all three into out.
static void lenet_pass(const Model *m, float *logits, float *grads, float *hx) {
    Tape *t = tape_create(backend_cpu());
    Var *p[16];
    ck_assert_int_eq(model_param_vars(m, t, 1, p), FP_OK);
    float xs[2 * 64];
    for (int i = 0; i < 2 * 64; i++)
        xs[i] = (float)sin(0.37 * i);
    int shape[4] = {2, 1, 8, 8};
    Var *x = ad_from_host(t, xs, 4, shape, 1);
    Var *y = model_forward(m, t, p, x, 1);
    ck_assert_ptr_nonnull(y);
    ad_to_host(t, y, logits);
    int32_t labels[2] = {1, 3};
    Var *loss = ad_cross_entropy(t, y, labels);
    Var *g[16];
    int nl = m->table.n_layers;
    ck_assert_int_eq(ad_grad(t, loss, p, nl, g, 1), FP_OK);
    Var *s = NULL;
    size_t off = 0;
    for (int i = 0; i < nl; i++) {
        ad_to_host(t, g[i], grads + off);
        off += g[i]->t.numel;
        Var *sq = ad_sum(t, ad_mul(t, g[i], g[i]));
        s = s ? ad_add(t, s, sq) : sq;
    }
    Var *h;
    ck_assert_int_eq(ad_grad(t, s, &x, 1, &h, 0), FP_OK);
    ad_to_host(t, h, hx);
    tape_free(t);
}

START_TEST(imported_lenet_is_builtin_bit_for_bit) {
    char dir[256];
    scratch_make(dir, sizeof dir, "onnx-lenet");
    DataShape in = {.c = 1, .h = 8, .w = 8, .n_classes = 4};
    Model *ref = builtin_lenet(&in);
    size_t len;
    uint8_t *buf = lenet_onnx(ref, &len);
    Model *m = imported(buf, len, &in, dir);
    free(buf);
    ck_assert_int_eq(m->table.n_layers, ref->table.n_layers);
    ck_assert_uint_eq(m->table.n_params, ref->table.n_params);
    for (int i = 0; i < m->table.n_layers; i++) {
        ck_assert_str_eq(m->table.layers[i].name, ref->table.layers[i].name);
        ck_assert_int_eq(m->table.layers[i].kind, ref->table.layers[i].kind);
    }
    ck_assert_int_eq(model_last_weight_layer(m), model_last_weight_layer(ref));
    size_t np = ref->table.n_params;
    float la[8], lb[8], *ga = malloc(sizeof(float) * np), *gb = malloc(sizeof(float) * np), ha[128], hb[128];
    // A clone shares the graph and computes the same.
    FpError err = {0};
    Model *c = model_clone(m, m->be, &err);
    ck_assert_ptr_nonnull(c);
    model_free(m);
    lenet_pass(ref, la, ga, ha);
    lenet_pass(c, lb, gb, hb);
    ck_assert_mem_eq(la, lb, sizeof la);
    ck_assert_mem_eq(ga, gb, sizeof(float) * np);
    ck_assert_mem_eq(ha, hb, sizeof ha);
    // Control: one weight changed in the file changes the logits.
    float *host = malloc(sizeof(float) * np);
    model_get_params(c, host);
    host[3] += 0.25f;
    model_set_params(c, host);
    lenet_pass(c, lb, gb, hb);
    ck_assert_int_ne(memcmp(la, lb, sizeof la), 0);
    free(host);
    free(ga);
    free(gb);
    model_free(c);
    model_free(ref);
    scratch_remove(dir);
}
END_TEST

// `fedpriv attack idlg` on the imported LeNet and on the built-in `lenet` with the same
// weights (the built-in's from the config's seed, written into the ONNX file): the same
// reconstructions, losses and scores, bit for bit (the results' text equal but for the
// model's name).
static cJSON *attack_result(const char *dir, const char *tag, const char *attack, const char *model_json,
                            const char *attack_json) {
    char cfg[512], text[2048], outdir[512], p[600], out[8192], errb[8192];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, tag);
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\"},"
             " \"model\": %s, \"defense\": {\"name\": \"none\"}, \"federation\": {\"clients\": 3, \"rounds\": 1,"
             " \"batch_size\": 10}, \"attack\": %s}",
             dir, model_json, attack_json);
    write_text(cfg, text);
    snprintf(outdir, sizeof outdir, "%s/out-%s", dir, tag);
    const char *args[] = {"attack", attack, "--config", cfg, "--out", outdir, "--threads", "1", NULL};
    int rc = cli_run(args, out, errb, sizeof out);
    ck_assert_msg(rc == 0, "%s: exit %d: %s", tag, rc, errb);
    snprintf(p, sizeof p, "%s/result.json", outdir);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(p, &r, NULL), FP_OK);
    return r;
}

static void assert_same_keys(const cJSON *a, const cJSON *b, const char *const *keys) {
    for (int k = 0; keys[k]; k++) {
        const cJSON *ja = cJSON_GetObjectItem(a, keys[k]), *jb = cJSON_GetObjectItem(b, keys[k]);
        ck_assert_msg(ja && jb, "%s missing", keys[k]);
        char *ta = cJSON_PrintUnformatted(ja), *tb = cJSON_PrintUnformatted(jb);
        ck_assert_msg(strcmp(ta, tb) == 0, "%s differs:\n%.600s\n%.600s", keys[k], ta, tb);
        free(ta);
        free(tb);
    }
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s missing", path);
    uint8_t *b = malloc(1 << 20);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

// A Fashion-MNIST-shaped IDX folder of n 12x12 images per split, labels k % 10.
static void write_idx12(const char *dir, int n) {
    const char *split[2] = {"train", "t10k"};
    for (int s = 0; s < 2; s++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, split[s]);
        FILE *f = fopen(p, "wb");
        ck_assert_ptr_nonnull(f);
        unsigned char hdr[16] = {0, 0, 8, 3, 0, 0, 0, (unsigned char)n, 0, 0, 0, 12, 0, 0, 0, 12};
        fwrite(hdr, 1, 16, f);
        for (int k = 0; k < n; k++)
            for (int i = 0; i < 144; i++)
                fputc((int)lrint(127.5 + 127.5 * sin(0.21 * (i % 12) * (k + s + 1) + 0.13 * (i / 12))), f);
        ck_assert_int_eq(fclose(f), 0);
        snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, split[s]);
        f = fopen(p, "wb");
        ck_assert_ptr_nonnull(f);
        unsigned char lh[8] = {0, 0, 8, 1, 0, 0, 0, (unsigned char)n};
        fwrite(lh, 1, 8, f);
        for (int k = 0; k < n; k++)
            fputc(k % 10, f);
        ck_assert_int_eq(fclose(f), 0);
    }
}

START_TEST(idlg_on_imported_lenet_matches_builtin) {
    SKIP_UNLESS_BIN();
    char dir[256];
    scratch_make(dir, sizeof dir, "onnx-idlg");
    write_idx12(dir, 40);
    DataShape in = {.c = 1, .h = 12, .w = 12, .n_classes = 10};
    cJSON *j = cJSON_Parse("{\"name\": \"lenet\", \"init\": \"uniform\"}");
    FpError err = {0};
    Model *ref = model_create(j, "model", &in, backend_cpu(), &err);
    cJSON_Delete(j);
    ck_assert_ptr_nonnull(ref);
    ck_assert_int_eq(model_init(ref, 3, &err), FP_OK); // what the config's seed 3 gives
    size_t len;
    uint8_t *buf = lenet_onnx(ref, &len);
    char p[512];
    write_bytes(scratch_path(dir, "lenet.onnx", p, sizeof p), buf, len);
    free(buf);
    model_free(ref);
    static const char *const idlg =
        "{\"name\": \"idlg\", \"images\": [1, 4], \"batch_size\": 2, \"steps\": 15, \"attacker\": \"single\", \"restarts\": 1}";
    cJSON *a = attack_result(dir, "builtin", "idlg", "{\"name\": \"lenet\", \"init\": \"uniform\"}", idlg);
    cJSON *b = attack_result(dir, "imported", "idlg", "{\"onnx\": \"lenet.onnx\"}", idlg);
    static const char *const keys[] = {"ssim_mean", "images", NULL};
    assert_same_keys(a, b, keys);
    // The reconstructions' PNGs are the same bytes.
    cJSON *im = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "images"), 0);
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s/out-builtin/%s", dir, cJSON_GetObjectItem(im, "reconstruction_png")->valuestring);
    snprintf(pb, sizeof pb, "%s/out-imported/%s", dir, cJSON_GetObjectItem(im, "reconstruction_png")->valuestring);
    size_t na, nb;
    uint8_t *da = read_all(pa, &na), *db = read_all(pb, &nb);
    ck_assert_uint_gt(na, 8);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(da, db, na);
    free(da);
    free(db);
    cJSON_Delete(a);
    cJSON_Delete(b);
    scratch_remove(dir);
}
END_TEST

// DP-SGD's per-example gradients (core/per_example.c) find the imported Gemm as they find
// a built-in linear layer: `fedpriv train` under dp-sgd runs to the end.
START_TEST(dpsgd_trains_an_imported_model) {
    SKIP_UNLESS_BIN();
    char dir[256], p[512], cfg[512], out[16384], errb[8192], text[1024];
    scratch_make(dir, sizeof dir, "onnx-dp");
    write_tiny_csv(scratch_path(dir, "data.csv", p, sizeof p));
    Builder b;
    b_tiny(&b, 13);
    size_t len;
    uint8_t *buf = b_pack(&b, &len);
    b_free(&b);
    write_bytes(scratch_path(dir, "tiny.onnx", p, sizeof p), buf, len);
    free(buf);
    snprintf(cfg, sizeof cfg, "%s/dp.json", dir);
    snprintf(text, sizeof text,
             "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s/data.csv\"}, \"model\": {\"onnx\": \"tiny.onnx\"},"
             " \"federation\": {\"clients\": 2, \"rounds\": 2, \"batch_size\": 16, \"lr\": 0.1}, \"threads\": 1,"
             " \"defense\": {\"name\": \"dp-sgd\", \"clip\": 1, \"epsilon\": 8, \"delta\": 1e-5}}",
             dir);
    write_text(cfg, text);
    const char *args[] = {"train", "--config", cfg, "--out", scratch_path(dir, "res.json", p, sizeof p), NULL};
    int rc = cli_run(args, out, errb, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, errb);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(p, &r, NULL), FP_OK);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "status")->valuestring, "ok");
    cJSON_Delete(r);
    scratch_remove(dir);
}
END_TEST

// LiRA on the imported LeNet and the built-in one: with "init": "uniform" the imported
// model's shadows start where the built-in's do (from the seed), so the scores, the ROC
// and its figures are the same, bit for bit.
START_TEST(lira_on_imported_lenet_matches_builtin) {
    SKIP_UNLESS_BIN();
    char dir[256], p[512];
    scratch_make(dir, sizeof dir, "onnx-lira");
    write_idx12(dir, 40);
    DataShape in = {.c = 1, .h = 12, .w = 12, .n_classes = 10};
    cJSON *j = cJSON_Parse("{\"name\": \"lenet\", \"init\": \"uniform\"}");
    FpError err = {0};
    Model *ref = model_create(j, "model", &in, backend_cpu(), &err);
    cJSON_Delete(j);
    ck_assert_ptr_nonnull(ref);
    ck_assert_int_eq(model_init(ref, 3, &err), FP_OK);
    size_t len;
    uint8_t *buf = lenet_onnx(ref, &len);
    write_bytes(scratch_path(dir, "lenet.onnx", p, sizeof p), buf, len);
    free(buf);
    model_free(ref);
    static const char *const lira = "{\"name\": \"lira\", \"shadow_models\": 2}";
    cJSON *a = attack_result(dir, "builtin", "lira", "{\"name\": \"lenet\", \"init\": \"uniform\"}", lira);
    cJSON *b = attack_result(dir, "imported", "lira", "{\"onnx\": \"lenet.onnx\", \"init\": \"uniform\"}", lira);
    static const char *const keys[] = {"auc", "roc", "tpr_at_fpr", "members", NULL};
    assert_same_keys(a, b, keys);
    cJSON_Delete(a);
    cJSON_Delete(b);
    scratch_remove(dir);
}
END_TEST

// -- weights out -----------------------------------------------------------------------------
// The safetensors of a model: its header parsed back (8-byte little-endian length, JSON),
// each layer's entry checked against the table and its bytes against the parameters.
static void check_safetensors(const Model *m, const char *path, int n_counters) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t len8[8];
    ck_assert_uint_eq(fread(len8, 1, 8, f), 8);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--)
        hl = hl << 8 | len8[k];
    ck_assert_uint_eq(hl % 8, 0);
    char *hdr = calloc(hl + 1, 1);
    ck_assert_uint_eq(fread(hdr, 1, hl, f), hl);
    size_t data_len = m->table.n_params * 4 + (size_t)n_counters * 8;
    uint8_t *data = malloc(data_len + 1);
    ck_assert_uint_eq(fread(data, 1, data_len + 1, f), data_len);
    fclose(f);
    cJSON *j = cJSON_Parse(hdr);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(cJSON_GetArraySize(j), m->table.n_layers + n_counters + 1);
    ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(j, "__metadata__"));
    float *host = malloc(sizeof(float) * m->table.n_params);
    model_get_params(m, host);
    for (int i = 0; i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, l->name);
        ck_assert_msg(e != NULL, "%s missing", l->name);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(e, "dtype")->valuestring, "F32");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"), *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        size_t n = 1;
        for (int k = 0; k < cJSON_GetArraySize(sh); k++)
            n *= (size_t)cJSON_GetArrayItem(sh, k)->valuedouble;
        ck_assert_uint_eq(n, l->count);
        size_t lo = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, hi = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        ck_assert_uint_eq(lo, l->offset * 4);
        ck_assert_uint_eq(hi - lo, l->count * 4);
        ck_assert_mem_eq(data + lo, host + l->offset, l->count * 4); // little-endian hosts
    }
    free(host);
    cJSON_Delete(j);
    free(hdr);
    free(data);
}

START_TEST(saved_files_hold_the_weights) {
    char dir[256], p[512], q[512];
    scratch_make(dir, sizeof dir, "onnx-save");
    // A built-in model: its documented names, and its ONNX file beside them.
    DataShape tiny = {.c = 1, .h = 1, .w = 4, .n_classes = 3};
    cJSON *j = cJSON_Parse("{\"name\": \"mlp\", \"hidden\": [5]}");
    FpError err = {0};
    Model *mlp = model_create(j, "model", &tiny, backend_cpu(), &err);
    cJSON_Delete(j);
    ck_assert_ptr_nonnull(mlp);
    ck_assert_int_eq(model_init(mlp, 3, &err), FP_OK);
    ck_assert_str_eq(mlp->table.layers[0].name, "fc1.weight");
    ck_assert_str_eq(mlp->table.layers[3].name, "fc2.bias");
    ck_assert_msg(model_save_by_name(mlp, scratch_path(dir, "mlp.safetensors", p, sizeof p), &err) == FP_OK, "%s",
                  err.msg);
    check_safetensors(mlp, p, 0);
    ck_assert_int_eq(access(scratch_path(dir, "mlp.onnx", q, sizeof q), F_OK), 0); // tests/test_onnx_out.c
    model_free(mlp);
    // An imported model: changed weights written to both files; the ONNX file imports
    // again with exactly those weights, and the same layers.
    DataShape in = {.c = 1, .h = 8, .w = 8, .n_classes = 4};
    Model *ref = builtin_lenet(&in);
    size_t len;
    uint8_t *buf = lenet_onnx(ref, &len);
    Model *m = imported(buf, len, &in, dir);
    free(buf);
    float *host = malloc(sizeof(float) * m->table.n_params), *back = malloc(sizeof(float) * m->table.n_params);
    model_get_params(m, host);
    for (size_t i = 0; i < m->table.n_params; i++)
        host[i] = host[i] * 0.5f + 0.125f;
    model_set_params(m, host);
    ck_assert_msg(model_save_by_name(m, scratch_path(dir, "trained.safetensors", p, sizeof p), &err) == FP_OK, "%s",
                  err.msg);
    check_safetensors(m, p, 0);
    j = cJSON_Parse("{\"onnx\": \"trained.onnx\"}");
    Model *again = model_create_at(j, "model", &in, backend_cpu(), dir, &err);
    cJSON_Delete(j);
    ck_assert_msg(again != NULL, "%s", err.msg);
    ck_assert_int_eq(model_init(again, 1, &err), FP_OK);
    ck_assert_int_eq(again->table.n_layers, m->table.n_layers);
    model_get_params(again, back);
    ck_assert_mem_eq(back, host, sizeof(float) * m->table.n_params);
    free(host);
    free(back);
    model_free(again);
    model_free(m);
    model_free(ref);
    scratch_remove(dir);
}
END_TEST

// -- the round trip with PyTorch ------------------------------------------------------------------
static const char *const roundtrip_models[] = {"mlp_tanh", "lenet_pool", "cnn_bn"};

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s missing", path);
    float *v = malloc(sizeof(float) * n);
    ck_assert_uint_eq(fread(v, sizeof(float), n, f), n);
    ck_assert_int_eq(fgetc(f), EOF);
    fclose(f);
    return v;
}

// fedpriv's logits (evaluation mode) of the ONNX file at path on the 64 inputs.
static void onnx_logits(const char *dir, const char *file, const float *x, float *logits) {
    DataShape in = {.c = 1, .h = 12, .w = 12, .n_classes = 4};
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "onnx", file);
    FpError err = {0};
    Model *m = model_create_at(j, "model", &in, backend_cpu(), dir, &err);
    cJSON_Delete(j);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_int_eq(model_init(m, 1, &err), FP_OK);
    Tape *t = tape_create(backend_cpu());
    Var *p[32];
    ck_assert_int_le(m->table.n_layers, 32);
    ck_assert_int_eq(model_param_vars(m, t, 0, p), FP_OK);
    int shape[4] = {64, 1, 12, 12};
    Var *y = model_forward(m, t, p, ad_from_host(t, x, 4, shape, 0), 0);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->t.numel, 64 * 4);
    ad_to_host(t, y, logits);
    tape_free(t);
    model_free(m);
}

static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / (s > 0 ? s : 1e-30);
}

START_TEST(pytorch_roundtrip) {
    SKIP_UNLESS_BIN();
    const char *py = "/usr/bin/python3";
    char out[16384], errb[16384], dir[256], p[512], q[512];
    const char *probe[] = {py, "-c", "import torch", NULL};
    ck_assert_msg(cli_exec(probe, out, errb, sizeof out) == 0,
                  "python3 with torch is needed (make test installs python3-torch): %s", errb);
    scratch_make(dir, sizeof dir, "onnx-rt");
    const char *exp[] = {py, "tests/onnx_roundtrip.py", "export", dir, NULL};
    ck_assert_msg(cli_exec(exp, out, errb, sizeof out) == 0, "export failed: %s", errb);
    for (int k = 0; k < 3; k++) {
        const char *name = roundtrip_models[k];
        snprintf(p, sizeof p, "%s/%s.x.f32", dir, name);
        float *x = read_f32(p, 64 * 144);
        snprintf(p, sizeof p, "%s/%s.logits.f32", dir, name);
        float *want = read_f32(p, 64 * 4), got[256];
        snprintf(p, sizeof p, "%s.onnx", name);
        onnx_logits(dir, p, x, got);
        double r = rel_diff(got, want, 256);
        ck_assert_msg(r <= 1e-5, "%s: fedpriv's logits differ from PyTorch's by %.3g relative", name, r);
        fprintf(stderr, "onnx round trip: %s: logits within %.3g of PyTorch's\n", name, r);
        // One round of FedAvg (one client, one SGD step on the whole batch), saved.
        snprintf(p, sizeof p, "%s/%s.json", dir, name);
        snprintf(q, sizeof q, "%s/%s.trained.safetensors", dir, name);
        const char *train[] = {"train", "--config", p, "--save-model", q, "--out", "/dev/null", NULL};
        int rc = cli_run(train, out, errb, sizeof out);
        ck_assert_msg(rc == 0, "%s: train exit %d: %s", name, rc, errb);
        snprintf(p, sizeof p, "%s.trained.onnx", name);
        onnx_logits(dir, p, x, got);
        snprintf(p, sizeof p, "%s/%s.trained_logits.f32", dir, name);
        FILE *f = fopen(p, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(got, sizeof(float), 256, f), 256);
        ck_assert_int_eq(fclose(f), 0);
        free(x);
        free(want);
    }
    const char *check[] = {py, "tests/onnx_roundtrip.py", "check", dir, NULL};
    int rc = cli_exec(check, out, errb, sizeof out);
    ck_assert_msg(rc == 0, "check failed (%d): %s%s", rc, out, errb);
    fprintf(stderr, "onnx round trip: %s", out); // the figures: each model's largest relative difference
    scratch_remove(dir);
}
END_TEST

Suite *suite_onnx(void) {
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, malformed_files_refused_in_process);
    tcase_add_test(tc, malformed_files_refused_by_train);
    tcase_add_test(tc, imported_lenet_is_builtin_bit_for_bit);
    tcase_add_test(tc, idlg_on_imported_lenet_matches_builtin);
    tcase_add_test(tc, dpsgd_trains_an_imported_model);
    tcase_add_test(tc, lira_on_imported_lenet_matches_builtin);
    tcase_add_test(tc, saved_files_hold_the_weights);
    tcase_add_test(tc, pytorch_roundtrip);
    suite_add_tcase(s, tc);
    return s;
}
