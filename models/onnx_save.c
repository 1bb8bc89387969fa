// Trained weights out (models/onnx.h): safetensors for every model, and the imported ONNX
// graph again with its initializers replaced by the trained values, packed through the
// same protoc-c code that read it. Both files are written atomically (a temporary name
// made with fp_create_new, then renamed), as model_save writes its own.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"
#include "core/version.h"
#include "models/onnx_internal.h"

static FpStatus write_atomic(const char *filename, const uint8_t *const *parts, const size_t *lens, int n,
                             FpError *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", filename, (long)getpid());
    FILE *f = fp_create_new(tmp, err);
    if (!f)
        return FP_EIO;
    int ok = 1;
    for (int i = 0; ok && i < n; i++)
        ok = fwrite(parts[i], 1, lens[i], f) == lens[i];
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, filename) != 0) {
        remove(tmp);
        return fp_fail(err, FP_EIO, "%s: write failed", filename);
    }
    return FP_OK;
}

// float32 to little-endian bytes, whatever the host's order.
static void put_le32(uint8_t *out, const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        out[4 * i] = (uint8_t)u;
        out[4 * i + 1] = (uint8_t)(u >> 8);
        out[4 * i + 2] = (uint8_t)(u >> 16);
        out[4 * i + 3] = (uint8_t)(u >> 24);
    }
}

// The dims a layer is written with: the ONNX initializer's for an imported model (a
// scalar stays a scalar), the table's otherwise.
static OShape layer_dims(const Model *m, int i) {
    const OnnxGraph *g = onnx_model_graph(m);
    if (g)
        return g->layers[i].dims;
    const ParamLayer *l = &m->table.layers[i];
    OShape s = {.nd = l->ndim};
    memcpy(s.d, l->shape, sizeof s.d);
    return s;
}

static const char *bn_prefix(const char *name, char *buf, size_t n) {
    static const char suffix[] = ".running_mean";
    size_t ln = strlen(name), ls = sizeof suffix - 1;
    if (ln <= ls || strcmp(name + ln - ls, suffix) != 0 || ln - ls + 21 >= n)
        return NULL;
    snprintf(buf, n, "%.*s.num_batches_tracked", (int)(ln - ls), name);
    return buf;
}

static void add_entry(cJSON *hdr, const char *name, const char *dtype, const OShape *s, size_t begin, size_t end) {
    cJSON *e = cJSON_AddObjectToObject(hdr, name);
    cJSON_AddStringToObject(e, "dtype", dtype);
    cJSON *sh = cJSON_AddArrayToObject(e, "shape");
    for (int k = 0; k < s->nd; k++)
        cJSON_AddItemToArray(sh, cJSON_CreateNumber(s->d[k]));
    cJSON *off = cJSON_AddArrayToObject(e, "data_offsets");
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)begin));
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)end));
}

FpStatus model_save_safetensors(const Model *m, const char *filename, FpError *err) {
    const ParamTable *tb = &m->table;
    int n_bn = 0;
    char nb[80];
    for (int i = 0; i < tb->n_layers; i++)
        n_bn += bn_prefix(tb->layers[i].name, nb, sizeof nb) != NULL;
    size_t data_len = tb->n_params * 4 + (size_t)n_bn * 8;
    float *host = malloc(tb->n_params * sizeof(float) + 4);
    uint8_t *data = calloc(data_len + 1, 1);
    cJSON *hdr = cJSON_CreateObject();
    if (!host || !data || !hdr) {
        free(host);
        free(data);
        cJSON_Delete(hdr);
        return fp_fail(err, FP_ENOMEM, "out of memory saving %s", filename);
    }
    model_get_params(m, host);
    cJSON *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddStringToObject(meta, "producer", "fedpriv " FEDPRIV_VERSION);
    cJSON_AddStringToObject(meta, "model", m->cfg.name);
    // The layers in the buffer's order, then the batch-norm counters (8 zero bytes each).
    size_t pos = 0;
    for (int i = 0; i < tb->n_layers; i++) {
        const ParamLayer *l = &tb->layers[i];
        OShape s = layer_dims(m, i);
        put_le32(data + pos, host + l->offset, l->count);
        add_entry(hdr, l->name, "F32", &s, pos, pos + 4 * l->count);
        pos += 4 * l->count;
    }
    OShape scalar = {.nd = 0};
    for (int i = 0; i < tb->n_layers; i++)
        if (bn_prefix(tb->layers[i].name, nb, sizeof nb)) {
            add_entry(hdr, nb, "I64", &scalar, pos, pos + 8);
            pos += 8;
        }
    free(host);
    char *text = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    if (!text) {
        free(data);
        return fp_fail(err, FP_ENOMEM, "out of memory saving %s", filename);
    }
    // The header padded with spaces to a multiple of 8, so the data is aligned.
    size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
    char *h = malloc(padded);
    if (!h) {
        free(text);
        free(data);
        return fp_fail(err, FP_ENOMEM, "out of memory saving %s", filename);
    }
    memcpy(h, text, hl);
    memset(h + hl, ' ', padded - hl);
    free(text);
    uint8_t len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (uint8_t)((uint64_t)padded >> (8 * k));
    const uint8_t *parts[3] = {len8, (const uint8_t *)h, data};
    size_t lens[3] = {8, padded, data_len};
    FpStatus st = write_atomic(filename, parts, lens, 3, err);
    free(h);
    free(data);
    return st;
}

// The imported graph with its initializers pointing at raw (the trained weights as
// float32 little-endian), packed.
static FpStatus pack_imported(const Model *m, const OnnxGraph *g, const uint8_t *raw, uint8_t **out, size_t *len,
                              FpError *err) {
    const Onnx__GraphProto *gp = g->proto->graph;
    // Shallow copies: the model's own graph is shared by its clones and never written to.
    Onnx__ModelProto mp = *g->proto;
    Onnx__GraphProto graph = *gp;
    Onnx__TensorProto **inits = malloc(sizeof *inits * (gp->n_initializer ? gp->n_initializer : 1));
    Onnx__TensorProto *tensors = malloc(sizeof *tensors * (size_t)g->n_layers);
    FpStatus st = FP_OK;
    if (!inits || !tensors) {
        st = fp_fail(err, FP_ENOMEM, "out of memory saving %s as ONNX", m->cfg.name);
        goto done;
    }
    memcpy(inits, gp->initializer, sizeof *inits * gp->n_initializer);
    for (int i = 0; i < g->n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        tensors[i] = *gp->initializer[g->layers[i].init];
        tensors[i].n_float_data = 0;
        tensors[i].float_data = NULL;
        tensors[i].has_raw_data = 1;
        tensors[i].raw_data = (ProtobufCBinaryData){.len = 4 * l->count, .data = (uint8_t *)raw + 4 * l->offset};
        inits[g->layers[i].init] = &tensors[i];
    }
    graph.initializer = inits;
    mp.graph = &graph;
    *len = protobuf_c_message_get_packed_size(&mp.base);
    if (!(*out = malloc(*len ? *len : 1)))
        st = fp_fail(err, FP_ENOMEM, "out of memory saving %s as ONNX", m->cfg.name);
    else
        protobuf_c_message_pack(&mp.base, *out);
done:
    free(tensors);
    free(inits);
    return st;
}

FpStatus onnx_model_save(const Model *m, const char *filename, FpError *err) {
    const OnnxGraph *g = onnx_model_graph(m);
    float *host = malloc(m->table.n_params * sizeof(float) + 4);
    uint8_t *raw = malloc(m->table.n_params * 4 + 4), *out = NULL;
    size_t len = 0;
    FpStatus st;
    if (!host || !raw)
        st = fp_fail(err, FP_ENOMEM, "out of memory saving %s", filename);
    else {
        model_get_params(m, host);
        put_le32(raw, host, m->table.n_params);
        st = g ? pack_imported(m, g, raw, &out, &len, err) : onnx_export_builtin(m, raw, &out, &len, err);
    }
    if (st == FP_OK) {
        const uint8_t *parts[1] = {out};
        st = write_atomic(filename, parts, &len, 1, err);
    }
    free(out);
    free(raw);
    free(host);
    return st;
}

int onnx_sibling(const char *safetensors, char *buf, size_t n) {
    static const char ext[] = ".safetensors";
    size_t ln = strlen(safetensors), le = sizeof ext - 1;
    if (ln <= le || strcmp(safetensors + ln - le, ext) != 0)
        return 0;
    return (size_t)snprintf(buf, n, "%.*s.onnx", (int)(ln - le), safetensors) < n;
}

FpStatus model_save_by_name(const Model *m, const char *filename, FpError *err) {
    char onnx[4200];
    if (!onnx_sibling(filename, onnx, sizeof onnx))
        return model_save(m, filename, err);
    FP_TRY(model_save_safetensors(m, filename, err));
    return model_has_onnx_export(m, NULL) ? onnx_model_save(m, onnx, err) : FP_OK;
}
