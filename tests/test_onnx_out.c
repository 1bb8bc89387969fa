// Trained models out as ONNX (models/onnx_export.c, models/onnx_save.c) and the
// `--save-model` refusal of a name that is one of the run's inputs (cli/cmd_train.c,
// experiment_output_replaces_input).
//
// A built-in model's exported graph, and an imported model's graph written back with its
// trained initializers, import again into fedpriv and compute the trained model's logits
// and gradients bit for bit; tests/onnx_roundtrip.py (check-export) evaluates the exported
// files with PyTorch when python3-onnx is installed.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/files.h"
#include "fl/experiment.h"
#include "models/onnx.h"
#include "tests/cli_run.h"
#include "tests/scratch.h"

#define N_X 16

static Model *builtin(const char *json, const DataShape *in, uint64_t seed) {
    cJSON *j = cJSON_Parse(json);
    FpError err = {0};
    Model *m = model_create(j, "model", in, backend_cpu(), &err);
    cJSON_Delete(j);
    ck_assert_msg(m != NULL, "%s: %s", json, err.msg);
    ck_assert_int_eq(model_init(m, seed, &err), FP_OK);
    return m;
}

static Model *import_file(const char *dir, const char *file, const DataShape *in) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "onnx", file);
    FpError err = {0};
    Model *m = model_create_at(j, "model", in, backend_cpu(), dir, &err);
    cJSON_Delete(j);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_int_eq(model_init(m, 99, &err), FP_OK); // the file's weights, whatever the seed
    return m;
}

static void inputs(const DataShape *in, float *x) {
    for (int i = 0; i < N_X * in->c * in->h * in->w; i++)
        x[i] = (float)(0.5 + 0.5 * sin(0.61 * i + 0.2));
}

// The logits (evaluation mode) on N_X inputs, and the gradient of the cross-entropy.
static void pass(const Model *m, float *logits, float *grads) {
    const DataShape *in = &m->in;
    int k = in->n_classes, shape[4] = {N_X, in->c, in->h, in->w};
    float *x = malloc(sizeof(float) * N_X * in->c * in->h * in->w);
    inputs(in, x);
    Tape *t = tape_create(backend_cpu());
    Var *p[32], *g[32];
    ck_assert_int_le(m->table.n_layers, 32);
    ck_assert_int_eq(model_param_vars(m, t, 1, p), FP_OK);
    Var *y = model_forward(m, t, p, ad_from_host(t, x, 4, shape, 0), 0);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->t.numel, N_X * k);
    ad_to_host(t, y, logits);
    int32_t labels[N_X];
    for (int i = 0; i < N_X; i++)
        labels[i] = i % k;
    ck_assert_int_eq(ad_grad(t, ad_cross_entropy(t, y, labels), p, m->table.n_layers, g, 0), FP_OK);
    size_t off = 0;
    for (int i = 0; i < m->table.n_layers; i++) {
        ad_to_host(t, g[i], grads + off);
        off += g[i]->t.numel;
    }
    tape_free(t);
    free(x);
}

// A few SGD steps (lr 0.5) on the inputs, so the weights are a trained model's, not the
// initialisation's.
static void train_steps(Model *m, int steps) {
    size_t np = m->table.n_params;
    float *w = malloc(sizeof(float) * np), *g = malloc(sizeof(float) * np), logits[N_X * 16];
    for (int s = 0; s < steps; s++) {
        pass(m, logits, g);
        model_get_params(m, w);
        for (size_t i = 0; i < np; i++)
            w[i] -= 0.5f * g[i];
        model_set_params(m, w);
    }
    free(w);
    free(g);
}

// m and the model imported from file compute the same, bit for bit; and a weight changed
// in the import changes its logits (so the comparison can fail).
static void assert_same_model(const Model *m, const Model *again, const char *what) {
    ck_assert_int_eq(again->table.n_layers, m->table.n_layers);
    ck_assert_uint_eq(again->table.n_params, m->table.n_params);
    for (int i = 0; i < m->table.n_layers; i++) {
        ck_assert_str_eq(again->table.layers[i].name, m->table.layers[i].name);
        ck_assert_int_eq(again->table.layers[i].kind, m->table.layers[i].kind);
    }
    size_t np = m->table.n_params, nl = (size_t)N_X * m->in.n_classes;
    float *la = malloc(sizeof(float) * nl), *lb = malloc(sizeof(float) * nl);
    float *ga = malloc(sizeof(float) * np), *gb = malloc(sizeof(float) * np);
    pass(m, la, ga);
    pass(again, lb, gb);
    ck_assert_msg(memcmp(la, lb, sizeof(float) * nl) == 0, "%s: the re-imported logits differ", what);
    ck_assert_msg(memcmp(ga, gb, sizeof(float) * np) == 0, "%s: the re-imported gradients differ", what);
    fprintf(stderr, "onnx out: %s: re-imported logits and gradients bit-identical (logit[0] %.9g)\n", what, la[0]);
    // Control: one weight changed in the import changes its logits.
    Model *c = model_clone(again, again->be, NULL);
    ck_assert_ptr_nonnull(c);
    float *w = malloc(sizeof(float) * np);
    model_get_params(c, w);
    w[np - 1] += 0.25f; // the last bias
    model_set_params(c, w);
    pass(c, lb, gb);
    ck_assert_int_ne(memcmp(la, lb, sizeof(float) * nl), 0);
    model_free(c);
    free(w);
    free(la);
    free(lb);
    free(ga);
    free(gb);
}

// modelK.x.f32 and modelK.logits.f32: the inputs and m's logits on them (raw float32),
// for tests/onnx_export_check.py.
static void write_raw(const char *dir, const char *name, const float *v, size_t n) {
    char p[600];
    FILE *f = fopen(scratch_path(dir, name, p, sizeof p), "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(v, sizeof(float), n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_inputs_and_logits(const Model *m, const char *dir, size_t k) {
    size_t nx = (size_t)N_X * m->in.c * m->in.h * m->in.w, nl = (size_t)N_X * m->in.n_classes;
    float *x = malloc(sizeof(float) * nx), *logits = malloc(sizeof(float) * nl),
          *g = malloc(sizeof(float) * m->table.n_params);
    inputs(&m->in, x);
    pass(m, logits, g);
    char name[64];
    snprintf(name, sizeof name, "model%zu.x.f32", k);
    write_raw(dir, name, x, nx);
    snprintf(name, sizeof name, "model%zu.logits.f32", k);
    write_raw(dir, name, logits, nl);
    free(x);
    free(logits);
    free(g);
}

static const struct {
    const char *json;
    DataShape in;
} exported[] = {
    {"{\"name\": \"mlp\", \"hidden\": [6, 5]}", {.c = 1, .h = 1, .w = 4, .n_classes = 3}},
    {"{\"name\": \"mlp\"}", {.c = 1, .h = 8, .w = 8, .n_classes = 4}},
    {"{\"name\": \"logreg\"}", {.c = 1, .h = 1, .w = 4, .n_classes = 3}},
    {"{\"name\": \"lenet\", \"init\": \"uniform\"}", {.c = 1, .h = 8, .w = 8, .n_classes = 4}},
    {"{\"name\": \"cnn-mnist\"}", {.c = 1, .h = 16, .w = 16, .n_classes = 10}},
    {"{\"name\": \"cnn-cifar\"}", {.c = 3, .h = 8, .w = 8, .n_classes = 10}},
};

START_TEST(builtin_export_reimports_bit_for_bit) {
    char dir[256], p[512], q[64];
    scratch_make(dir, sizeof dir, "onnx-out");
    for (size_t k = 0; k < sizeof exported / sizeof exported[0]; k++) {
        Model *m = builtin(exported[k].json, &exported[k].in, 7 + k);
        train_steps(m, 3);
        FpError err = {0};
        ck_assert(model_has_onnx_export(m, &err));
        snprintf(q, sizeof q, "model%zu.onnx", k);
        ck_assert_msg(onnx_model_save(m, scratch_path(dir, q, p, sizeof p), &err) == FP_OK, "%s", err.msg);
        Model *again = import_file(dir, q, &m->in);
        assert_same_model(m, again, exported[k].json);
        write_inputs_and_logits(m, dir, k);
        model_free(again);
        model_free(m);
    }
    // PyTorch's view of the same files: the ONNX checker, the graph evaluated with torch
    // ops, and the documented names loaded into an nn.Module (tests/onnx_export_check.py).
    char out[16384], errb[16384];
    const char *check[] = {"/usr/bin/python3", "tests/onnx_export_check.py", dir, NULL};
    int rc = cli_exec(check, out, errb, sizeof out);
    if (rc == 3)
        fprintf(stderr, "SKIP onnx out: PyTorch check: %s", out); // python3-onnx missing (make test installs it)
    else {
        ck_assert_msg(rc == 0, "onnx_export_check.py: exit %d: %s%s", rc, out, errb);
        fprintf(stderr, "onnx out: PyTorch check:\n%s", out);
    }
    scratch_remove(dir);
}
END_TEST

// resnet18's batch norm and the LSTM's gates have no ONNX form here: said, naming the
// model; --save-model then writes the safetensors alone.
START_TEST(models_without_onnx_form_say_so) {
    char dir[256], p[512], q[512];
    scratch_make(dir, sizeof dir, "onnx-out-none");
    DataShape seq = {.c = 1, .h = 5, .w = 3, .n_classes = 2};
    Model *m = builtin("{\"name\": \"lstm\", \"hidden\": 4}", &seq, 1);
    FpError err = {0};
    ck_assert(!model_has_onnx_export(m, &err));
    ck_assert_msg(strstr(err.msg, "lstm has no ONNX export") != NULL, "%s", err.msg);
    ck_assert_int_eq(onnx_model_save(m, scratch_path(dir, "lstm.onnx", p, sizeof p), &err), FP_EUNSUPPORTED);
    ck_assert_int_ne(access(p, F_OK), 0);
    ck_assert_msg(model_save_by_name(m, scratch_path(dir, "lstm.safetensors", q, sizeof q), &err) == FP_OK, "%s",
                  err.msg);
    ck_assert_int_eq(access(q, F_OK), 0);
    ck_assert_int_ne(access(p, F_OK), 0);
    model_free(m);
    scratch_remove(dir);
}
END_TEST

// -- the CLI: train, save, import, train again ---------------------------------------------
// The weights of a safetensors file written by fedpriv (the layers in the buffer's order,
// little-endian floats) into m, each checked against the layer's name and size.
static void load_safetensors(Model *m, const char *path) {
    size_t cap = 1 << 20;
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s missing", path);
    uint8_t *b = malloc(cap);
    size_t n = fread(b, 1, cap, f);
    fclose(f);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--)
        hl = hl << 8 | b[k];
    ck_assert_uint_lt(8 + hl, n);
    char *h = strndup((const char *)b + 8, hl);
    cJSON *j = cJSON_Parse(h);
    ck_assert_ptr_nonnull(j);
    float *w = malloc(sizeof(float) * m->table.n_params);
    for (int i = 0; i < m->table.n_layers; i++) {
        const ParamLayer *l = &m->table.layers[i];
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, l->name), *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        ck_assert_msg(off != NULL, "%s: no %s", path, l->name);
        size_t lo = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, hi = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        ck_assert_uint_eq(hi - lo, 4 * l->count);
        memcpy(w + l->offset, b + 8 + hl + lo, 4 * l->count); // little-endian hosts
    }
    model_set_params(m, w);
    free(w);
    cJSON_Delete(j);
    free(h);
    free(b);
}

static void train_cli(const char *dir, const char *model_json, const char *save, int seed) {
    char cfg[512], text[1024], out[8192], errb[8192], sp[512];
    snprintf(cfg, sizeof cfg, "%s/train.json", dir);
    snprintf(text, sizeof text,
             "{\"seed\": %d, \"dataset\": {\"name\": \"csv\", \"path\": \"data.csv\"}, \"model\": %s,"
             " \"federation\": {\"clients\": 2, \"rounds\": 2, \"batch_size\": 16, \"lr\": 0.2}, \"threads\": 1}",
             seed, model_json);
    write_text(cfg, text);
    const char *args[] = {"train", "--config", cfg, "--save-model", scratch_path(dir, save, sp, sizeof sp), "--out",
                          "/dev/null", NULL};
    int rc = cli_run(args, out, errb, sizeof out);
    ck_assert_msg(rc == 0, "train %s: exit %d: %s", model_json, rc, errb);
}

START_TEST(trained_models_reimport_bit_for_bit) {
    SKIP_UNLESS_BIN();
    char dir[256], p[512];
    scratch_make(dir, sizeof dir, "onnx-out-cli");
    write_tiny_csv(scratch_path(dir, "data.csv", p, sizeof p));
    DataShape in = {.c = 1, .h = 1, .w = 4, .n_classes = 3};
    // (a) A built-in mlp trained, its ONNX file re-imported: the weights of its safetensors.
    train_cli(dir, "{\"name\": \"mlp\", \"hidden\": [6, 5]}", "mlp.safetensors", 1);
    Model *ref = builtin("{\"name\": \"mlp\", \"hidden\": [6, 5]}", &in, 1);
    load_safetensors(ref, scratch_path(dir, "mlp.safetensors", p, sizeof p));
    Model *again = import_file(dir, "mlp.onnx", &in);
    assert_same_model(ref, again, "fedpriv train: mlp");
    // (b) That file imported and trained again: its trained ONNX file re-imported.
    float *before = malloc(sizeof(float) * ref->table.n_params), *after = malloc(sizeof(float) * ref->table.n_params);
    model_get_params(ref, before);
    train_cli(dir, "{\"onnx\": \"mlp.onnx\"}", "retrained.safetensors", 2);
    load_safetensors(ref, scratch_path(dir, "retrained.safetensors", p, sizeof p));
    model_get_params(ref, after);
    ck_assert_int_ne(memcmp(before, after, sizeof(float) * ref->table.n_params), 0); // it trained
    Model *re = import_file(dir, "retrained.onnx", &in);
    assert_same_model(ref, re, "fedpriv train: imported mlp");
    free(before);
    free(after);
    model_free(re);
    model_free(again);
    model_free(ref);
    scratch_remove(dir);
}
END_TEST

// -- refusing to write over an input ---------------------------------------------------------
START_TEST(output_replaces_compares_files_not_names) {
    char dir[256], p[512], q[512], r[512];
    scratch_make(dir, sizeof dir, "onnx-out-same");
    ck_assert_int_eq(mkdir(scratch_path(dir, "arrays", p, sizeof p), 0755), 0);
    write_text(scratch_path(dir, "arrays/x_train.npy", q, sizeof q), "x");
    write_text(scratch_path(dir, "model.onnx", r, sizeof r), "m");
    char spelled[600], linked[600], hard[600], other[600];
    snprintf(spelled, sizeof spelled, "%s/arrays/../model.onnx", dir);
    snprintf(linked, sizeof linked, "%s/link.onnx", dir);
    snprintf(hard, sizeof hard, "%s/hard.onnx", dir);
    snprintf(other, sizeof other, "%s/other.onnx", dir);
    ck_assert_int_eq(symlink(r, linked), 0);
    ck_assert_int_eq(link(r, hard), 0);
    write_text(other, "m"); // the same bytes, another file
    ck_assert(fp_output_replaces(r, r));
    ck_assert(fp_output_replaces(spelled, r));
    ck_assert(fp_output_replaces(linked, r));
    ck_assert(fp_output_replaces(hard, r));
    ck_assert(fp_output_replaces(q, p));           // a file under the dataset's folder
    ck_assert(!fp_output_replaces(other, r));
    ck_assert(!fp_output_replaces(r, p));          // beside the folder, not in it
    snprintf(other, sizeof other, "%s/missing.onnx", dir);
    ck_assert(!fp_output_replaces(other, r));      // nothing there: nothing replaced
    // The config's keys, "{split}" expanded as the loaders do.
    write_text(scratch_path(dir, "test.csv", q, sizeof q), "a,label\n");
    char text[1024], what[600];
    snprintf(text, sizeof text, "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s/{split}.csv\"}}", dir);
    cJSON *root = cJSON_Parse(text);
    ck_assert(experiment_output_replaces_input(root, NULL, q, what, sizeof what));
    ck_assert_msg(strstr(what, "dataset.path") && strstr(what, "test.csv"), "%s", what);
    ck_assert(!experiment_output_replaces_input(root, NULL, r, what, sizeof what));
    cJSON_Delete(root);
    scratch_remove(dir);
}
END_TEST

START_TEST(save_model_over_an_input_is_refused) {
    SKIP_UNLESS_BIN();
    char dir[256], p[512], cfg[512], out[8192], errb[8192], res[512];
    scratch_make(dir, sizeof dir, "onnx-out-refuse");
    write_tiny_csv(scratch_path(dir, "data.csv", p, sizeof p));
    train_cli(dir, "{\"name\": \"mlp\", \"hidden\": [5]}", "model.safetensors", 1); // model.onnx
    snprintf(cfg, sizeof cfg, "%s/imported.json", dir);
    write_text(cfg, "{\"seed\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"data.csv\"}, \"model\": {\"onnx\": "
                    "\"model.onnx\"}, \"federation\": {\"clients\": 2, \"rounds\": 1, \"batch_size\": 16}}");
    char hard[600];
    snprintf(hard, sizeof hard, "%s/copy.csv", dir);
    ck_assert_int_eq(link(scratch_path(dir, "data.csv", p, sizeof p), hard), 0);
    char spelled_cfg[600], spelled_onnx[600], sibling[600];
    snprintf(spelled_cfg, sizeof spelled_cfg, "%s/./imported.json", dir);
    snprintf(spelled_onnx, sizeof spelled_onnx, "%s/../%s/model.onnx", dir, strrchr(dir, '/') + 1);
    snprintf(sibling, sizeof sibling, "%s/model.safetensors", dir);
    static const char *const expect[] = {"model.onnx", "the config file", "dataset.path", "model.onnx"};
    const char *names[] = {sibling, spelled_cfg, hard, spelled_onnx};
    snprintf(res, sizeof res, "%s/result.json", dir);
    struct stat before, after;
    ck_assert_int_eq(stat(scratch_path(dir, "model.onnx", p, sizeof p), &before), 0);
    for (int i = 0; i < 4; i++) {
        const char *args[] = {"train", "--config", cfg, "--save-model", names[i], "--out", res, NULL};
        int rc = cli_run(args, out, errb, sizeof out);
        ck_assert_msg(rc == 2, "--save-model %s: exit %d: %s", names[i], rc, errb);
        assert_one_clean_line(errb);
        ck_assert_msg(strstr(errb, "would replace the run's input") && strstr(errb, expect[i]), "%s", errb);
        ck_assert_int_ne(access(res, F_OK), 0); // refused before training: no result
    }
    ck_assert_int_eq(stat(p, &after), 0);
    ck_assert_int_eq(before.st_mtime, after.st_mtime);
    ck_assert_int_eq(before.st_size, after.st_size);
    // --out is held to the same rule.
    const char *over_cfg[] = {"train", "--config", cfg, "--out", spelled_cfg, NULL};
    ck_assert_int_eq(cli_run(over_cfg, out, errb, sizeof out), 2);
    ck_assert_msg(strstr(errb, "--out") && strstr(errb, "the config file"), "%s", errb);
    // Control: a new name beside them trains and writes both files.
    const char *ok[] = {"train", "--config", cfg, "--save-model", scratch_path(dir, "trained.safetensors", p, sizeof p),
                        "--out", res, NULL};
    int rc = cli_run(ok, out, errb, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, errb);
    ck_assert_int_eq(access(scratch_path(dir, "trained.onnx", p, sizeof p), F_OK), 0);
    ck_assert_int_eq(access(res, F_OK), 0);
    scratch_remove(dir);
}
END_TEST

Suite *suite_onnx_out(void) {
    Suite *s = suite_create("onnx_out");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, builtin_export_reimports_bit_for_bit);
    tcase_add_test(tc, models_without_onnx_form_say_so);
    tcase_add_test(tc, trained_models_reimport_bit_for_bit);
    tcase_add_test(tc, output_replaces_compares_files_not_names);
    tcase_add_test(tc, save_model_over_an_input_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
