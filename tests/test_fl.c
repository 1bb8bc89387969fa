// Models, local training, the federated engine and `fedpriv train` end to end:
// shapes, save/reload bit-equality, convergence, determinism across thread counts,
// divergence detection and bad-input handling of the CLI.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "fl/experiment.h"
#include "tests/cli_run.h"

static cJSON *parse(const char *s) { return cJSON_Parse(s); }

// A separable synthetic classification set: class k's mean is a fixed random vector.
static Dataset *blobs(int n, int c, int h, int w, int classes, uint64_t seed) {
    Dataset *d = dataset_create("blobs", n, c, h, w, classes, 0, NULL);
    size_t ss = dataset_sample_size(d);
    RngStream rs = rng_stream(seed, RNG_TEST, 9, 0);
    float *means = malloc(sizeof(float) * ss * classes);
    for (size_t i = 0; i < ss * classes; i++)
        means[i] = (float)rng_next_uniform(&rs);
    for (int i = 0; i < n; i++) {
        d->y[i] = i % classes;
        for (size_t j = 0; j < ss; j++) {
            float v = means[(size_t)d->y[i] * ss + j] + 0.15f * (float)rng_next_normal(&rs);
            d->x[(size_t)i * ss + j] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
    }
    free(means);
    return d;
}

START_TEST(model_shapes) {
    struct { const char *json; DataShape in; size_t params; int out; } cases[] = {
        {"{\"name\":\"mlp\"}", {1, 28, 28, 10, 0}, 784 * 256 + 256 + 256 * 10 + 10, 10},
        {"{\"name\":\"logreg\"}", {1, 28, 28, 10, 0}, 7850, 10},
        {"{\"name\":\"lenet\"}", {1, 28, 28, 10, 0}, 12 * 25 + 12 + 2 * (12 * 12 * 25 + 12) + 588 * 10 + 10, 10},
        {"{\"name\":\"lenet\"}", {3, 32, 32, 100, 0}, 12 * 75 + 12 + 2 * (12 * 12 * 25 + 12) + 768 * 100 + 100, 100},
        {"{\"name\":\"cnn-mnist\"}", {1, 28, 28, 10, 0}, 260 + 5020 + 320 * 50 + 50 + 510, 10},
        {"{\"name\":\"cnn-cifar\"}", {3, 32, 32, 10, 0}, 64 * 75 + 64 + 128 * 1600 + 128 + 8192 * 384 + 384 + 384 * 192 + 192 + 1930, 10},
        {"{\"name\":\"lstm\",\"hidden\":8}", {1, 24, 3, 0, 1}, 32 * 3 + 32 * 8 + 32 + 8 + 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *j = parse(cases[k].json);
        FpError err = {0};
        Model *m = model_create(j, "model", &cases[k].in, backend_cpu(), &err);
        ck_assert_msg(m != NULL, "%s: %s", cases[k].json, err.msg);
        ck_assert_uint_eq(m->table.n_params, cases[k].params);
        ck_assert_int_eq(model_init(m, 3, NULL), FP_OK);
        Tape *t = tape_create(backend_cpu());
        Var *p[64];
        model_param_vars(m, t, 1, p);
        int shape[4] = {2, cases[k].in.c, cases[k].in.h, cases[k].in.w};
        Var *x = ad_full(t, 4, shape, 0.5f);
        Var *y = model_forward(m, t, p, x, 1);
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(y->t.shape[0], 2);
        ck_assert_int_eq(y->t.shape[1], cases[k].out);
        tape_free(t);
        model_free(m);
        cJSON_Delete(j);
    }
}
END_TEST

START_TEST(resnet18_forward_and_bn_stats) {
    cJSON *j = parse("{\"name\":\"resnet18\"}");
    DataShape in = {3, 32, 32, 10, 0};
    Model *m = model_create(j, "model", &in, backend_cpu(), NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_gt(m->table.n_params, 11000000);
    ck_assert_uint_lt(m->table.n_trainable, m->table.n_params); // running stats are not trainable
    ck_assert_int_eq(model_init(m, 1, NULL), FP_OK);
    Tape *t = tape_create(backend_cpu());
    Var *p[256];
    model_param_vars(m, t, 1, p);
    int shape[4] = {2, 3, 32, 32};
    Var *x = ad_full(t, 4, shape, 0.25f);
    int32_t labels[2] = {1, 2};
    Var *loss = ad_cross_entropy(t, model_forward(m, t, p, x, 1), labels);
    ck_assert_ptr_nonnull(loss);
    Var *g[256];
    ck_assert_int_eq(ad_grad(t, loss, p, m->table.n_layers, g, 0), FP_OK);
    // the first BN's running mean moved from 0 towards the batch mean
    const ParamLayer *rm = &m->table.layers[3];
    ck_assert_str_eq(rm->name, "bn1.running_mean");
    ck_assert_int_eq(rm->trainable, 0);
    float v[64];
    memcpy(v, m->params + rm->offset, sizeof v);
    double s = 0;
    for (int i = 0; i < 64; i++)
        s += fabs(v[i]);
    ck_assert_double_gt(s, 0);
    tape_free(t);
    model_free(m);
    cJSON_Delete(j);
}
END_TEST

START_TEST(save_reload_bit_identical) {
    cJSON *j = parse("{\"name\":\"cnn-mnist\"}");
    DataShape in = {1, 28, 28, 10, 0};
    Model *a = model_create(j, "model", &in, backend_cpu(), NULL), *b = model_create(j, "model", &in, backend_cpu(), NULL);
    ck_assert_int_eq(model_init(a, 42, NULL), FP_OK);
    char path[] = "/tmp/fedpriv-test-weights-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    FpError err = {0};
    ck_assert_int_eq(model_save(a, path, &err), FP_OK);
    ck_assert_int_eq(model_load(b, path, &err), FP_OK);
    ck_assert_int_eq(memcmp(a->params, b->params, a->table.n_params * sizeof(float)), 0);
    // truncated file → format error naming the file
    FILE *f = fopen(path, "r+b");
    ck_assert_int_eq(ftruncate(fileno(f), 1000), 0);
    fclose(f);
    ck_assert_int_eq(model_load(b, path, &err), FP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, path));
    // wrong magic
    f = fopen(path, "wb");
    fputs("NOPE and more bytes", f);
    fclose(f);
    ck_assert_int_eq(model_load(b, path, &err), FP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "magic"));
    // another architecture's file
    cJSON *j2 = parse("{\"name\":\"mlp\"}");
    Model *c = model_create(j2, "model", &in, backend_cpu(), NULL);
    ck_assert_int_eq(model_save(c, path, &err), FP_OK);
    ck_assert_int_eq(model_load(b, path, &err), FP_EFORMAT);
    unlink(path);
    model_free(a);
    model_free(b);
    model_free(c);
    cJSON_Delete(j);
    cJSON_Delete(j2);
}
END_TEST

START_TEST(local_training_converges) {
    Dataset *d = blobs(400, 1, 6, 6, 4, 7);
    cJSON *j = parse("{\"name\":\"mlp\",\"hidden\":[16]}");
    DataShape in = {1, 6, 6, 4, 0};
    Model *m = model_create(j, "model", &in, backend_cpu(), NULL);
    ck_assert_int_eq(model_init(m, 5, NULL), FP_OK);
    double acc0, loss0, acc1, loss1;
    ck_assert_int_eq(model_evaluate(m, d, 1, &acc0, &loss0, NULL, NULL), FP_OK);
    uint32_t *idx = malloc(sizeof(uint32_t) * 400);
    for (int i = 0; i < 400; i++)
        idx[i] = (uint32_t)i;
    LocalTrainConfig lc = {.epochs = 10, .batch_size = 32, .lr = 0.1, .momentum = 0.9};
    Tape *t = tape_create(backend_cpu());
    float *mom = malloc(m->table.n_params * sizeof(float));
    RngStream rs = rng_stream(1, RNG_SHUFFLE, 0, 0);
    ck_assert_int_eq(local_train(m, t, d, idx, 400, &lc, &rs, mom, NULL), FP_OK);
    ck_assert_int_eq(model_evaluate(m, d, 2, &acc1, &loss1, NULL, NULL), FP_OK);
    ck_assert_double_lt(loss1, 0.25 * loss0);
    ck_assert_double_gt(acc1, 0.95);
    free(idx);
    free(mom);
    tape_free(t);
    model_free(m);
    dataset_free(d);
    cJSON_Delete(j);
}
END_TEST

// Runs a small federation and returns the final parameters (malloc'd).
static float *run_fed(int threads, uint64_t seed, const char *fed_json, FpStatus *status, size_t *np) {
    Dataset *train = blobs(600, 1, 6, 6, 3, 11), *test = blobs(150, 1, 6, 6, 3, 12);
    cJSON *mj = parse("{\"name\":\"mlp\",\"hidden\":[12]}"), *fj = parse(fed_json);
    DataShape in = {1, 6, 6, 3, 0};
    Model *m = model_create(mj, "model", &in, backend_cpu(), NULL);
    ck_assert_int_eq(model_init(m, seed, NULL), FP_OK);
    FedSetup s = {.seed = seed, .threads = threads, .backend = backend_cpu(), .global = m, .train = train,
                  .test = test, .quiet = 1};
    FpError err = {0};
    ck_assert_int_eq(fed_config_parse(fj, "federation", &s.cfg, &err), FP_OK);
    Federation *f = fed_create(&s, &err);
    ck_assert_msg(f != NULL, "%s", err.msg);
    *status = fed_run(f, 0, &err);
    *np = m->table.n_params;
    float *out = malloc(*np * sizeof(float));
    memcpy(out, m->params, *np * sizeof(float));
    fed_free(f);
    model_free(m);
    dataset_free(train);
    dataset_free(test);
    cJSON_Delete(mj);
    cJSON_Delete(fj);
    return out;
}

START_TEST(federation_is_deterministic_across_threads) {
    const char *cfg = "{\"clients\":6,\"sample_rate\":0.5,\"rounds\":3,\"batch_size\":16,\"lr\":0.1,"
                      "\"momentum\":0.5,\"partition\":\"dirichlet\",\"alpha\":0.5}";
    FpStatus s1, s2, s3, s4;
    size_t n;
    float *a = run_fed(1, 3, cfg, &s1, &n), *b = run_fed(2, 3, cfg, &s2, &n), *c = run_fed(4, 3, cfg, &s3, &n);
    float *d = run_fed(2, 4, cfg, &s4, &n);
    ck_assert_int_eq(s1, FP_OK);
    ck_assert_int_eq(memcmp(a, b, n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a, c, n * sizeof(float)), 0);
    ck_assert_int_ne(memcmp(a, d, n * sizeof(float)), 0); // another seed, another run
    free(a);
    free(b);
    free(c);
    free(d);
}
END_TEST

// A regression with a far too large step size explodes; the engine must say so
// (FP_EDIVERGED) rather than report a number.
START_TEST(divergence_is_reported) {
    Dataset *train = dataset_create("r", 200, 1, 1, 4, 0, 1, NULL), *test = dataset_create("r", 50, 1, 1, 4, 0, 1, NULL);
    RngStream rs = rng_stream(2, RNG_TEST, 4, 0);
    for (int i = 0; i < 200 * 4; i++)
        train->x[i] = (float)rng_next_uniform(&rs);
    for (int i = 0; i < 50 * 4; i++)
        test->x[i] = (float)rng_next_uniform(&rs);
    for (int i = 0; i < 200; i++)
        train->target[i] = 10.0f * train->x[i * 4];
    cJSON *mj = parse("{\"name\":\"mlp\",\"hidden\":[8]}"), *fj = parse("{\"clients\":2,\"rounds\":5,\"lr\":1e3}");
    DataShape in = {1, 1, 4, 0, 1};
    Model *m = model_create(mj, "model", &in, backend_cpu(), NULL);
    ck_assert_int_eq(model_init(m, 1, NULL), FP_OK);
    FedSetup s = {.seed = 1, .threads = 1, .backend = backend_cpu(), .global = m, .train = train, .test = test,
                  .quiet = 1};
    FpError err = {0};
    ck_assert_int_eq(fed_config_parse(fj, "federation", &s.cfg, &err), FP_OK);
    Federation *f = fed_create(&s, &err);
    ck_assert_int_eq(fed_run(f, 0, &err), FP_EDIVERGED);
    ck_assert_ptr_nonnull(strstr(err.msg, "diverged"));
    fed_free(f);
    model_free(m);
    dataset_free(train);
    dataset_free(test);
    cJSON_Delete(mj);
    cJSON_Delete(fj);
}
END_TEST

START_TEST(bad_federation_values_name_the_path) {
    struct { const char *json, *needle; } cases[] = {
        {"{\"clients\":0}", "federation.clients"},
        {"{\"lr\":-1}", "federation.lr"},
        {"{\"sample_rate\":1.5}", "federation.sample_rate"},
        {"{\"partition\":\"zipf\"}", "federation.partition"},
        {"{\"rounds\":2.5}", "federation.rounds"},
        {"{\"roundz\":2}", "federation.roundz: unknown key"},
        {"{\"batch_size\":\"64\"}", "federation.batch_size"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *j = parse(cases[k].json);
        FedConfig c;
        FpError err = {0};
        ck_assert_int_eq(fed_config_parse(j, "federation", &c, &err), FP_EPARAM);
        ck_assert_msg(strstr(err.msg, cases[k].needle), "%s -> %s", cases[k].json, err.msg);
        cJSON_Delete(j);
    }
}
END_TEST

// -- the CLI end to end -------------------------------------------------------------
static const char *bin(void) { return getenv("FEDPRIV_BIN"); }

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int have_fashion(void) { return access(DATASET_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) == 0; }

START_TEST(cli_train_twice_identical) {
    if (!bin() || !have_fashion()) {
        printf("SKIP: cli_train_twice_identical (FEDPRIV_BIN unset or Fashion-MNIST not installed)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-train-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char cfg[512], cmd[2048], out[4096], err[4096];
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    write_file(cfg, "{\"seed\": 7, \"dataset\": {\"name\": \"fashion-mnist\", \"train_samples\": 3000,"
                    " \"test_samples\": 1000}, \"model\": {\"name\": \"mlp\", \"hidden\": [32]},"
                    " \"federation\": {\"clients\": 4, \"rounds\": 2, \"batch_size\": 32, \"lr\": 0.1}}");
    for (int k = 0; k < 2; k++) {
        char out_path[600], threads[8];
        snprintf(out_path, sizeof out_path, "%s/r%d.json", dir, k);
        snprintf(threads, sizeof threads, "%d", k + 1);
        const char *args[] = {"train", "--config", cfg, "--out", out_path, "--threads", threads, NULL};
        ck_assert_int_eq(cli_run(args, out, err, sizeof err), 0);
    }
    cJSON *r[2];
    for (int k = 0; k < 2; k++) {
        char p[600];
        snprintf(p, sizeof p, "%s/r%d.json", dir, k);
        ck_assert_int_eq(jv_load_file(p, &r[k], NULL), FP_OK);
        // timings and the thread count are allowed to differ
        cJSON_DeleteItemFromObject(r[k], "wall_seconds");
        cJSON_DeleteItemFromObject(r[k], "threads");
        cJSON *rounds = cJSON_GetObjectItem(r[k], "rounds"), *it;
        cJSON_ArrayForEach(it, rounds) {
            cJSON_DeleteItemFromObject(it, "seconds");
            cJSON_DeleteItemFromObject(it, "train_seconds");
        }
    }
    ck_assert(cJSON_Compare(r[0], r[1], 1));
    cJSON *fin = cJSON_GetObjectItem(r[0], "final");
    double acc = cJSON_GetObjectItem(fin, "test_accuracy")->valuedouble;
    ck_assert_double_gt(acc, 0.6); // 3000 samples, 2 rounds: well above chance (0.1)
    ck_assert_str_eq(cJSON_GetObjectItem(r[0], "status")->valuestring, "ok");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r[0], "rounds")), 2);
    cJSON_Delete(r[0]);
    cJSON_Delete(r[1]);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// Each bad input: exit 2 and exactly one line on stderr containing the needle.
START_TEST(cli_bad_inputs) {
    if (!bin()) {
        printf("SKIP: cli_bad_inputs (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-bad-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char p[1200], cmd[4096], out[8192], err[4096];
    // IDX fixtures: a good 2-image set, then broken variants.
    unsigned char img_hdr[16] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2};
    unsigned char lab_hdr[8] = {0, 0, 8, 1, 0, 0, 0, 2};
    unsigned char pix[8] = {0, 255, 3, 4, 5, 6, 7, 8}, labs[2] = {1, 2};
    struct { const char *name; int truncate, bad_magic, label_count; const char *needle; } idx_cases[] = {
        {"truncated", 1, 0, 2, "truncated"}, {"magic", 0, 1, 2, "magic"}, {"mismatch", 0, 0, 3, "labels, but"}};
    for (size_t k = 0; k < 3; k++) {
        char sub[1100];
        snprintf(sub, sizeof sub, "%s/%s", dir, idx_cases[k].name);
        snprintf(cmd, sizeof cmd, "mkdir -p %s", sub);
        ck_assert_int_eq(system(cmd), 0);
        const char *split[2] = {"train", "t10k"};
        for (int s = 0; s < 2; s++) {
            snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", sub, split[s]);
            FILE *f = fopen(p, "wb");
            unsigned char h[16];
            memcpy(h, img_hdr, 16);
            if (idx_cases[k].bad_magic)
                h[3] = 9;
            fwrite(h, 1, 16, f);
            fwrite(pix, 1, idx_cases[k].truncate ? 5 : 8, f);
            fclose(f);
            snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", sub, split[s]);
            f = fopen(p, "wb");
            unsigned char lh[8];
            memcpy(lh, lab_hdr, 8);
            lh[7] = (unsigned char)idx_cases[k].label_count;
            fwrite(lh, 1, 8, f);
            unsigned char l3[3] = {1, 2, 3};
            fwrite(idx_cases[k].label_count == 2 ? labs : l3, 1, (size_t)idx_cases[k].label_count, f);
            fclose(f);
        }
        snprintf(p, sizeof p, "%s/cfg-%s.json", dir, idx_cases[k].name);
        char json[2048];
        snprintf(json, sizeof json, "{\"dataset\":{\"name\":\"fashion-mnist\",\"path\":\"%s\"},\"model\":{\"name\":\"mlp\"}}",
                 sub);
        write_file(p, json);
        const char *args[] = {"train", "--config", p, NULL};
        ck_assert_int_eq(cli_run(args, out, err, sizeof err), 2);
        ck_assert_msg(cli_count_lines(err) == 1 && strstr(err, idx_cases[k].needle), "%s: %s", idx_cases[k].name, err);
    }
    struct { const char *json, *needle; } cfg_cases[] = {
        {"{\"dataset\": {\"name\": \"fashion-mnist\"}, \"model\": {\"name\": \"mlp\"},", "malformed JSON"},
        {"{\"dataset\":{\"name\":\"fashion-mnist\"},\"model\":{\"name\":\"mlp\"},\"federaton\":{}}", "federaton: unknown key"},
        {"{\"dataset\":{\"name\":\"fashion-mnist\"},\"model\":{\"name\":\"mlp\"},\"federation\":{\"lr\":0}}", "federation.lr"},
        {"{\"dataset\":{\"name\":\"fashion-mnist\"},\"model\":{\"name\":\"mlp\",\"hidden\":[0]}}", "model.hidden[0]"},
        {"{\"dataset\":{\"name\":\"fashion-mnist\"},\"model\":{\"name\":\"vgg\"}}", "model.name"},
        {"{\"dataset\":{\"name\":\"imagenet\"},\"model\":{\"name\":\"mlp\"}}", "dataset.name"},
        {"{\"dataset\":{\"name\":\"fashion-mnist\",\"path\":\"/nonexistent/dir\"},\"model\":{\"name\":\"mlp\"}}", "nonexistent"},
        {"{\"dataset\":{\"name\":\"fashion-mnist\"},\"model\":{\"name\":\"mlp\"},\"defense\":{\"name\":\"magic\"}}", "defense.name"},
        {"{\"seed\":-1,\"dataset\":{\"name\":\"fashion-mnist\"},\"model\":{\"name\":\"mlp\"}}", "seed"},
    };
    for (size_t k = 0; k < sizeof cfg_cases / sizeof cfg_cases[0]; k++) {
        snprintf(p, sizeof p, "%s/cfg%zu.json", dir, k);
        write_file(p, cfg_cases[k].json);
        const char *args[] = {"train", "--config", p, NULL};
        ck_assert_int_eq(cli_run(args, out, err, sizeof err), 2);
        ck_assert_msg(cli_count_lines(err) == 1 && strstr(err, cfg_cases[k].needle), "case %zu: %s", k, err);
    }
    snprintf(p, sizeof p, "%s/missing.json", dir);
    const char *missing[] = {"train", "--config", p, NULL}, *bogus[] = {"train", "--bogus", NULL};
    ck_assert_int_eq(cli_run(missing, out, err, sizeof err), 2);
    ck_assert(cli_count_lines(err) == 1 && strstr(err, "missing.json"));
    ck_assert_int_eq(cli_run(bogus, out, err, sizeof err), 2);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *suite_fl(void) {
    Suite *s = suite_create("fl");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, model_shapes);
    tcase_add_test(tc, resnet18_forward_and_bn_stats);
    tcase_add_test(tc, save_reload_bit_identical);
    tcase_add_test(tc, local_training_converges);
    tcase_add_test(tc, federation_is_deterministic_across_threads);
    tcase_add_test(tc, divergence_is_reported);
    tcase_add_test(tc, bad_federation_values_name_the_path);
    tcase_add_test(tc, cli_train_twice_identical);
    tcase_add_test(tc, cli_bad_inputs);
    suite_add_tcase(s, tc);
    return s;
}
