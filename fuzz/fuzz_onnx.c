// libFuzzer target: ONNX model files (models/onnx.c, through the protoc-c code).
//
// Byte 0 picks the data the model is built for (1x1x4 with 3 classes, 1x8x8 with 4, or
// 1x12x12 with 4); the rest is the file. A file that is refused must say why in one line,
// and the unpacking must stay within the bound its size sets. A file that compiles must
// run: a forward pass in both modes and a backward pass on a batch of 2 give the
// (2, classes) logits the compilation promised, with no memory error.
#include "core/backend.h"
#include "fuzz/fuzz_util.h"
#include "models/onnx.h"

static const DataShape shapes[3] = {
    {.c = 1, .h = 1, .w = 4, .n_classes = 3},
    {.c = 1, .h = 8, .w = 8, .n_classes = 4},
    {.c = 1, .h = 12, .w = 12, .n_classes = 4},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const DataShape *in = &shapes[data[0] % 3];
    FpError err = {0};
    size_t peak = 0;
    if (onnx_check_bytes(data + 1, size - 1, "fuzz.onnx", in, &peak, &err) != FP_OK) {
        fuzz_check_message(err.msg);
        if (peak > (size - 1) * 128 + ((size_t)1 << 20))
            abort();
        return 0;
    }
    Model *m = onnx_model_from_bytes(data + 1, size - 1, "fuzz.onnx", in, backend_cpu(), &err);
    if (!m || model_init(m, 1, &err) != FP_OK)
        abort();
    Tape *t = tape_create(backend_cpu());
    Var *p[256];
    float x[2 * 144];
    for (int i = 0; i < 2 * 144; i++)
        x[i] = (float)(i % 7) * 0.25f - 0.5f;
    int shape[4] = {2, in->c, in->h, in->w};
    // More layers than this harness views: compiled, not run.
    for (int training = 0; training < 2 && m->table.n_layers <= 256; training++) {
        tape_reset(t); // the parameter leaves live on the tape: made again after each reset
        if (model_param_vars(m, t, 1, p) != FP_OK)
            break;
        Var *y = model_forward(m, t, p, ad_from_host(t, x, 4, shape, 0), training);
        if (!y && tape_status(t) == FP_OK)
            abort(); // compiled but could not run
        if (y && (y->t.ndim != 2 || y->t.shape[0] != 2 || y->t.shape[1] != in->n_classes))
            abort();
        if (y && training) {
            int32_t labels[2] = {0, 1};
            Var *g[256];
            if (ad_grad(t, ad_cross_entropy(t, y, labels), p, m->table.n_layers, g, 0) != FP_OK &&
                tape_status(t) == FP_OK)
                abort();
        }
    }
    tape_free(t);
    model_free(m);
    return 0;
}
