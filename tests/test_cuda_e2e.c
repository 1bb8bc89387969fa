// CPU-vs-CUDA above the kernels, end to end: a short federated run (models, local SGD,
// aggregation and evaluation on each backend from the same seed) and a DLG run through
// the CLI with --device cpu and --device cuda (and Inverting Gradients through a simulated
// two-step local procedure), and the same federated run under dp-sgd
// (record-level DP-SGD in every client). Without a GPU every test prints SKIP.
//
// Tolerances: float rounding differs between backends (cuBLAS/cuDNN summation order),
// and SGD compounds it, so the final parameters must agree to 1e-3 norm-relative after
// 3 rounds and the test accuracy to 0.02; DLG's first matching loss (one closure, no
// optimisation yet) to 1e-4 relative, and the final SSIM to 0.05.
#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "defenses/registry.h"
#include "fl/experiment.h"
#include "tests/cuda_check.h"

// Class k's samples scatter around a fixed random mean image (the same means for every
// seed, so train and test sets share them); seed draws the noise.
static Dataset *blobs(int n, int classes, uint64_t seed) {
    Dataset *d = dataset_create("blobs", n, 1, 16, 16, classes, 0, NULL);
    size_t ss = dataset_sample_size(d);
    RngStream ms = rng_stream(30, RNG_TEST, 20, 0), rs = rng_stream(seed, RNG_TEST, 21, 0);
    float *means = malloc(sizeof(float) * ss * classes);
    for (size_t i = 0; i < ss * classes; i++)
        means[i] = (float)rng_next_uniform(&ms);
    for (int i = 0; i < n; i++) {
        d->y[i] = i % classes;
        for (size_t j = 0; j < ss; j++) {
            float v = means[(size_t)d->y[i] * ss + j] + 0.2f * (float)rng_next_normal(&rs);
            d->x[(size_t)i * ss + j] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
    }
    free(means);
    return d;
}

static float *federate_with(const Backend *be, const char *model_json, const char *defense_json, double *acc) {
    Dataset *train = blobs(480, 4, 31), *test = blobs(120, 4, 32);
    cJSON *mj = cJSON_Parse(model_json);
    cJSON *fj = cJSON_Parse("{\"clients\":4,\"sample_rate\":0.5,\"rounds\":3,\"local_epochs\":3,\"batch_size\":16,\"lr\":0.05,"
                            "\"momentum\":0.9}");
    DataShape in = {1, 16, 16, 4, 0};
    FpError err = {0};
    Model *m = model_create(mj, "model", &in, be, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    model_init(m, 5);
    cJSON *dj = defense_json ? cJSON_Parse(defense_json) : NULL;
    FedSetup s = {.seed = 5, .threads = 1, .backend = be, .global = m, .train = train, .test = test, .quiet = 1,
                  .defense = dj ? defense_find(cJSON_GetObjectItem(dj, "name")->valuestring) : NULL,
                  .defense_json = dj};
    ck_assert_int_eq(fed_config_parse(fj, "federation", &s.cfg, &err), FP_OK);
    Federation *f = fed_create(&s, &err);
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_int_eq(fed_run(f, 0, &err), FP_OK);
    *acc = fed_round_result(f, 2)->test_accuracy;
    float *p = malloc(m->table.n_params * sizeof(float));
    model_get_params(m, p);
    fed_free(f);
    model_free(m);
    dataset_free(train);
    dataset_free(test);
    cJSON_Delete(mj);
    cJSON_Delete(fj);
    cJSON_Delete(dj);
    return p;
}

static float *federate(const Backend *be, const char *model_json, double *acc) {
    return federate_with(be, model_json, NULL, acc);
}

START_TEST(cuda_federated_run_matches_cpu) {
    GPU_OR_SKIP(g, "cuda_federated_run_matches_cpu");
    const char *models[] = {"{\"name\":\"mlp\",\"hidden\":[32]}", "{\"name\":\"cnn-mnist\"}"};
    size_t counts[] = {256 * 32 + 32 + 32 * 4 + 4, 0};
    for (int k = 0; k < 2; k++) {
        double acc_cpu, acc_gpu;
        float *c = federate(backend_cpu(), models[k], &acc_cpu), *q = federate(g, models[k], &acc_gpu);
        cJSON *mj = cJSON_Parse(models[k]);
        DataShape in = {1, 16, 16, 4, 0};
        Model *m = model_create(mj, "model", &in, backend_cpu(), NULL);
        size_t n = m->table.n_params;
        if (counts[k])
            ck_assert_uint_eq(n, counts[k]);
        double d2 = 0, r2 = 0;
        for (size_t i = 0; i < n; i++) {
            d2 += ((double)q[i] - c[i]) * ((double)q[i] - c[i]);
            r2 += (double)c[i] * c[i];
        }
        double rel = sqrt(d2 / r2);
        printf("cuda federated %s: parameters norm-relative difference %.3g (allowed 1e-3), accuracy cpu %.4f cuda %.4f\n",
               models[k], rel, acc_cpu, acc_gpu);
        ck_assert_double_le(rel, 1e-3);
        ck_assert_double_le(fabs(acc_cpu - acc_gpu), 0.02);
        ck_assert_double_ge(acc_cpu, 0.9); // the run learned something worth comparing
        free(c);
        free(q);
        model_free(m);
        cJSON_Delete(mj);
    }
}
END_TEST

// dp-sgd on both backends: the Poisson batches and the noise are drawn on the host from
// the same streams, so only the per-example gradients' rounding differs (and with it
// which records a clip touches by a hair): the same tolerances as the plain run.
START_TEST(cuda_dpsgd_run_matches_cpu) {
    GPU_OR_SKIP(g, "cuda_dpsgd_run_matches_cpu");
    const char *models[] = {"{\"name\":\"mlp\",\"hidden\":[32]}", "{\"name\":\"cnn-mnist\"}"};
    const char *dp = "{\"name\":\"dp-sgd\",\"clip\":1,\"noise_multiplier\":0.5}";
    for (int k = 0; k < 2; k++) {
        double acc_cpu, acc_gpu;
        float *c = federate_with(backend_cpu(), models[k], dp, &acc_cpu), *q = federate_with(g, models[k], dp, &acc_gpu);
        cJSON *mj = cJSON_Parse(models[k]);
        DataShape in = {1, 16, 16, 4, 0};
        Model *m = model_create(mj, "model", &in, backend_cpu(), NULL);
        size_t n = m->table.n_params;
        double d2 = 0, r2 = 0;
        for (size_t i = 0; i < n; i++) {
            d2 += ((double)q[i] - c[i]) * ((double)q[i] - c[i]);
            r2 += (double)c[i] * c[i];
        }
        double rel = sqrt(d2 / r2);
        printf("cuda dp-sgd %s: parameters norm-relative difference %.3g (allowed 1e-3), accuracy cpu %.4f cuda %.4f\n",
               models[k], rel, acc_cpu, acc_gpu);
        ck_assert_double_le(rel, 1e-3);
        ck_assert_double_le(fabs(acc_cpu - acc_gpu), 0.02);
        free(c);
        free(q);
        model_free(m);
        cJSON_Delete(mj);
    }
}
END_TEST

// Runs `fedpriv attack NAME` on DEVICE with the given model, federation and attack
// objects on 100 Fashion-MNIST test images, and returns its result.json.
static cJSON *run_attack(const char *bin, const char *dir, const char *fm, const char *name, const char *body,
                         const char *device) {
    char cfg[1200], cmd[4096], out[1100];
    snprintf(cfg, sizeof cfg, "%s/%s-%s.json", dir, name, device);
    FILE *f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\", \"split\": \"test\","
               " \"train_samples\": 100, \"test_samples\": 100}, %s,"
               " \"defense\": {\"name\": \"none\"}, \"device\": \"%s\"}",
            fm, body, device);
    fclose(f);
    snprintf(out, sizeof out, "%s/out-%s-%s", dir, name, device);
    snprintf(cmd, sizeof cmd, "%s attack %s --config %s --out %s >/dev/null 2>&1", bin, name, cfg, out);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed", cmd);
    snprintf(cfg, sizeof cfg, "%s/result.json", out);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(cfg, &r, NULL), FP_OK);
    return r;
}

// The CLI binary and Fashion-MNIST, or NULL (after printing SKIP) when either is missing.
static const char *attack_prerequisites(const char *test, const char **fm) {
    const char *bin = getenv("FEDPRIV_BIN");
    *fm = getenv("FEDPRIV_FASHION_MNIST_DIR");
    if (!*fm)
        *fm = DATASET_FASHION_MNIST_DIR;
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/t10k-images-idx3-ubyte.gz", *fm);
    if (!bin || access(probe, R_OK) != 0) {
        printf("SKIP: %s (FEDPRIV_BIN unset or no Fashion-MNIST at %s)\n", test, *fm);
        return NULL;
    }
    return bin;
}

static double first_loss(const cJSON *image) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(image, "loss_curve"), 0)->valuedouble;
}

static void remove_tree(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(cuda_dlg_run_matches_cpu) {
    GPU_OR_SKIP(g, "cuda_dlg_run_matches_cpu");
    const char *fm, *bin = attack_prerequisites("cuda_dlg_run_matches_cpu", &fm);
    if (!bin)
        return;
    char dir[] = "/tmp/fedpriv-cuda-dlg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *body = "\"model\": {\"name\": \"lenet\", \"init\": \"uniform\"},"
                       " \"attack\": {\"name\": \"dlg\", \"images\": [0], \"batch_size\": 1, \"steps\": 40}";
    cJSON *c = run_attack(bin, dir, fm, "dlg", body, "cpu"), *q = run_attack(bin, dir, fm, "dlg", body, "cuda");
    cJSON *ic = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "images"), 0);
    cJSON *iq = cJSON_GetArrayItem(cJSON_GetObjectItem(q, "images"), 0);
    ck_assert_ptr_nonnull(ic);
    ck_assert_ptr_nonnull(iq);
    double l0c = first_loss(ic), l0q = first_loss(iq);
    double sc = cJSON_GetObjectItem(ic, "ssim")->valuedouble, sq = cJSON_GetObjectItem(iq, "ssim")->valuedouble;
    printf("cuda DLG: first matching loss cpu %.8g cuda %.8g; SSIM after 40 steps cpu %.4f cuda %.4f\n", l0c, l0q, sc,
           sq);
    ck_assert_double_le(fabs(l0c - l0q), 1e-4 * fabs(l0c));
    ck_assert_double_le(fabs(sc - sq), 0.05);
    cJSON_Delete(c);
    cJSON_Delete(q);
    remove_tree(dir);
}
END_TEST

// Inverting Gradients on both backends, a batch of 2 whose victim ran 2 local steps, so
// the closure differentiates through the simulated local procedure (second order through
// convolutions and sigmoids). x' is drawn on the host from the same stream, so the first
// objective (1 - cos + TV, no step taken yet) must agree to 1e-4 relative; after 30 steps
// of Adam on the gradient's sign the mean SSIM to 0.05, as DLG's.
START_TEST(cuda_ig_run_matches_cpu) {
    GPU_OR_SKIP(g, "cuda_ig_run_matches_cpu");
    const char *fm, *bin = attack_prerequisites("cuda_ig_run_matches_cpu", &fm);
    if (!bin)
        return;
    char dir[] = "/tmp/fedpriv-cuda-ig-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *body = "\"model\": {\"name\": \"lenet\", \"init\": \"default\"},"
                       " \"federation\": {\"clients\": 4, \"local_steps\": 2, \"batch_size\": 64, \"lr\": 0.01},"
                       " \"attack\": {\"name\": \"inverting-gradients\", \"images\": [0, 1], \"batch_size\": 2,"
                       " \"steps\": 30, \"local\": \"federation\"}";
    cJSON *c = run_attack(bin, dir, fm, "inverting-gradients", body, "cpu");
    cJSON *q = run_attack(bin, dir, fm, "inverting-gradients", body, "cuda");
    cJSON *ic = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "images"), 0);
    cJSON *iq = cJSON_GetArrayItem(cJSON_GetObjectItem(q, "images"), 0);
    ck_assert_ptr_nonnull(ic);
    ck_assert_ptr_nonnull(iq);
    ck_assert_str_eq(cJSON_GetObjectItem(q, "backend")->valuestring, "cuda");
    double l0c = first_loss(ic), l0q = first_loss(iq);
    double sc = cJSON_GetObjectItem(c, "ssim_mean")->valuedouble, sq = cJSON_GetObjectItem(q, "ssim_mean")->valuedouble;
    printf("cuda IG (B 2, 2 local steps): first objective cpu %.8g cuda %.8g; mean SSIM after 30 steps cpu %.4f "
           "cuda %.4f\n",
           l0c, l0q, sc, sq);
    ck_assert_double_le(fabs(l0c - l0q), 1e-4 * fabs(l0c));
    ck_assert_double_le(fabs(sc - sq), 0.05);
    cJSON_Delete(c);
    cJSON_Delete(q);
    remove_tree(dir);
}
END_TEST

Suite *suite_cuda_e2e(void) {
    Suite *s = suite_create("cuda_e2e");
    TCase *tc = tcase_create("cuda_e2e");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cuda_federated_run_matches_cpu);
    tcase_add_test(tc, cuda_dpsgd_run_matches_cpu);
    tcase_add_test(tc, cuda_dlg_run_matches_cpu);
    tcase_add_test(tc, cuda_ig_run_matches_cpu);
    suite_add_tcase(s, tc);
    return s;
}
