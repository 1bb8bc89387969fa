// The strongest attacker by default, against the federation's own model
// (`FP_TEST_SUITE=attacker_default`):
//   - `fedpriv attack dlg` with default options on the ReLU `mlp` of a 100-client
//     Fashion-MNIST federation without a defense recovers the image and applies (its
//     analytic variant, at every seed tried; refused and left out where a convolution
//     comes first); the
//     single L2 attacker, which recovers nothing there, no longer calls the attack "not
//     applicable": the adaptive attacker decides, against the federation without a
//     defense (attacks/attacker.h);
//   - the single attacker's own keys without "attacker" are refused, naming "single";
//   - every result names the attacked model ("attacked_model", "probe"), and a matrix
//     attack with a model of its own is labelled a probe in its label, its CSV rows and
//     the report, beside the federation's accuracy (runner/attack_registry.h).
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "inversion_fixture.h"

// The federation on a small share of Fashion-MNIST: 100 clients, q 0.1, 20 rounds,
// the default `mlp` (ReLU), no defense.
#define MLP_CONFIG                                                                                                     \
    "{\"seed\": %d, \"dataset\": {\"name\": \"fashion-mnist\", \"split\": \"test\", \"train_samples\": 2000,"           \
    " \"test_samples\": 200}, \"model\": {\"name\": \"mlp\"},"                                                         \
    " \"federation\": {\"clients\": 100, \"sample_rate\": 0.1, \"rounds\": 20}, \"defense\": {\"name\": \"none\"},"    \
    " \"threads\": 2, \"attack\": {\"name\": \"dlg\"%s}}"

// obj's string key (the test fails, not crashes, when it is missing).
static const char *str(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(obj, key);
    ck_assert_msg(cJSON_IsString(v), "\"%s\" is missing or not a string", key);
    return v->valuestring;
}

// Runs `fedpriv attack dlg` on MLP_CONFIG with extra attack keys; the result, or NULL
// when Fashion-MNIST is not installed (the test then skips). err receives stderr.
static cJSON *mlp_attack_seed(const char *dir, const char *name, const char *extra, int seed, char *err, size_t n) {
    char cfg[600], text[2048], cmd[2048], p[700];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, name);
    snprintf(text, sizeof text, MLP_CONFIG, seed, extra);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s attack dlg --config %s --out %s/%s", bin(), cfg, dir, name);
    int rc = run_cmd(cmd, err, n);
    if (rc == 2 && strstr(err, "fashion-mnist"))
        return NULL;
    ck_assert_msg(rc == 0, "%s: exit %d: %s", name, rc, err);
    snprintf(p, sizeof p, "%s/%s/result.json", dir, name);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(p, &r, NULL), FP_OK);
    ck_assert_str_eq(str(r, "status"), "done");
    return r;
}

static cJSON *mlp_attack(const char *dir, const char *name, const char *extra, char *err, size_t n) {
    return mlp_attack_seed(dir, name, extra, 1, err, n);
}

static void rm_rf(const char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(dlg_default_recovers_on_relu_mlp) {
    if (!bin()) {
        printf("SKIP: dlg_default_recovers_on_relu_mlp (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-atkdef-XXXXXX", err[16384];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cJSON *r = mlp_attack(dir, "default", "", err, sizeof err);
    if (!r) {
        printf("SKIP: Fashion-MNIST is not installed [dlg_default_recovers_on_relu_mlp]\n");
        rm_rf(dir);
        return;
    }
    ck_assert_str_eq(str(r, "attacker"), "adaptive");
    ck_assert_int_eq(cJSON_GetObjectItem(r, "images_recovered")->valueint, 1);
    ck_assert_msg(cJSON_GetObjectItem(r, "ssim_mean")->valuedouble >= 0.9, "SSIM %g",
                  cJSON_GetObjectItem(r, "ssim_mean")->valuedouble);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "applicable")));
    ck_assert_str_eq(str(cJSON_GetObjectItem(r, "applicability"), "attacker"),
                     "adaptive");
    ck_assert_msg(!strstr(err, "not applicable"), "%s", err);
    // The result names the model it attacked: the federation's own.
    ck_assert_str_eq(str(r, "attacked_model"), "mlp");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(r, "probe")));
    cJSON_Delete(r);
    rm_rf(dir);
}
END_TEST

// The single L2 attacker recovers nothing on the same upload; "not applicable" would be
// its false negative: the adaptive attacker's reference without a defense decides.
START_TEST(single_attacker_failure_is_not_a_verdict) {
    if (!bin()) {
        printf("SKIP: single_attacker_failure_is_not_a_verdict (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-atkdef-XXXXXX", err[16384];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cJSON *r = mlp_attack(dir, "single", ", \"attacker\": \"single\"", err, sizeof err);
    if (!r) {
        printf("SKIP: Fashion-MNIST is not installed [single_attacker_failure_is_not_a_verdict]\n");
        rm_rf(dir);
        return;
    }
    ck_assert_str_eq(str(r, "attacker"), "single");
    ck_assert_int_eq(cJSON_GetObjectItem(r, "images_recovered")->valueint, 0); // the weak attacker fails
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "applicable")));
    cJSON *ap = cJSON_GetObjectItem(r, "applicability");
    ck_assert_str_eq(str(ap, "attacker"), "adaptive");
    ck_assert_int_eq(cJSON_GetObjectItem(ap, "reference_images_recovered")->valueint, 1);
    ck_assert_msg(!strstr(err, "not applicable"), "%s", err);
    cJSON_Delete(r);
    rm_rf(dir);
}
END_TEST

// The analytic variant (attacks/inversion.h) recovers the victim's image from the mlp's
// first layer at every seed, where the gradient-matching variants alone recovered it at
// seeds 1 and 5 of 1–6 (SSIM 0.16–0.25 at the others): the kept variant, its SSIM and
// its first-layer residual. Seeds 2 and 3 here, seed 1 in dlg_default_recovers_on_relu_mlp.
// A batch of 4 (images 0–7, two victims): one unit active on only one image gives that
// image, so most of the batch comes back (measured when written: 7 of 8 at SSIM 1.000,
// the eighth at 0.738).
START_TEST(analytic_recovers_at_every_seed) {
    if (!bin()) {
        printf("SKIP: analytic_recovers_at_every_seed (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-atkdef-XXXXXX", err[16384];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int seed = 2; seed <= 3; seed++) {
        char name[16];
        snprintf(name, sizeof name, "seed%d", seed);
        cJSON *r = mlp_attack_seed(dir, name, "", seed, err, sizeof err);
        if (!r) {
            printf("SKIP: Fashion-MNIST is not installed [analytic_recovers_at_every_seed]\n");
            rm_rf(dir);
            return;
        }
        ck_assert_int_eq(cJSON_GetObjectItem(r, "images_recovered")->valueint, 1);
        cJSON *img = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "images"), 0);
        ck_assert_str_eq(str(img, "variant"), "analytic");
        ck_assert_msg(cJSON_GetObjectItem(img, "ssim")->valuedouble >= 0.999, "seed %d: SSIM %g", seed,
                      cJSON_GetObjectItem(img, "ssim")->valuedouble);
        ck_assert_msg(cJSON_GetObjectItem(img, "matching_loss")->valuedouble < 1e-6, "seed %d: residual %g", seed,
                      cJSON_GetObjectItem(img, "matching_loss")->valuedouble);
        cJSON_Delete(r);
    }
    cJSON *r = mlp_attack_seed(dir, "batch4", ", \"batch_size\": 4, \"images\": [0, 1, 2, 3, 4, 5, 6, 7]", 1, err,
                               sizeof err);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(cJSON_GetObjectItem(r, "images_recovered")->valueint >= 6, "batch 4: %d of 8 recovered",
                  cJSON_GetObjectItem(r, "images_recovered")->valueint);
    cJSON_Delete(r);
    rm_rf(dir);
}
END_TEST

// `fedpriv attack dlg` on LeNet (U(-0.5, 0.5)) over the 20-image set in dir with the given
// attack keys, into dir/out; its exit status, stderr in err.
static int lenet_attack(const char *dir, const char *out, const char *attack_keys, char *err, size_t n) {
    char cfg[600], text[2048], cmd[2048];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, out);
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\", \"split\": \"test\"},"
             " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"}, \"federation\": {\"clients\": 2},"
             " \"attack\": {%s}}", dir, attack_keys);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s attack dlg --config %s --out %s/%s", bin(), cfg, dir, out);
    return run_cmd(cmd, err, n);
}

// The analytic variant needs a first dense layer on the input: on LeNet (a convolution
// first) the default set leaves it out, and listing it is refused in one line naming the
// variant's path, without a partial result.
START_TEST(analytic_only_where_it_applies) {
    if (!bin()) {
        printf("SKIP: analytic_only_where_it_applies (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-atkdef-XXXXXX", err[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 20);
    char p[700];
    ck_assert_int_eq(lenet_attack(dir, "out", "\"images\": [0], \"variants\": [{\"name\": \"a\", \"method\": \"analytic\"}]",
                                  err, sizeof err), 2);
    ck_assert_int_eq(count_lines(err), 1);
    ck_assert_msg(strstr(err, "attack.variants[0].method") && strstr(err, "dense"), "%s", err);
    snprintf(p, sizeof p, "%s/out/result.json", dir);
    ck_assert_int_ne(access(p, F_OK), 0);
    // The default set on LeNet: the three gradient-matching variants, as before.
    int rc = lenet_attack(dir, "out2", "\"images\": [0], \"steps\": 2", err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    snprintf(p, sizeof p, "%s/out2/result.json", dir);
    cJSON *r = NULL;
    ck_assert_int_eq(jv_load_file(p, &r, NULL), FP_OK);
    cJSON *vs = cJSON_GetObjectItem(r, "variants");
    ck_assert_int_eq(cJSON_GetArraySize(vs), 3);
    for (int k = 0; k < 3; k++)
        ck_assert_str_ne(str(cJSON_GetArrayItem(vs, k), "name"), "analytic");
    cJSON_Delete(r);
    rm_rf(dir);
}
END_TEST

// restarts, distance or tv without "attacker" would silently be a weaker attacker: refused,
// one line naming attack.attacker and the way to ask for one configuration.
START_TEST(single_keys_without_attacker_are_refused) {
    if (!bin()) {
        printf("SKIP: single_keys_without_attacker_are_refused (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-atkdef-XXXXXX", err[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 20);
    char cmd[700];
    ck_assert_int_eq(lenet_attack(dir, "out", "\"images\": [0], \"restarts\": 2", err, sizeof err), 2);
    ck_assert_int_eq(count_lines(err), 1);
    ck_assert_msg(strstr(err, "attack.attacker") && strstr(err, "(the default)") && strstr(err, "\"single\""), "%s",
                  err);
    snprintf(cmd, sizeof cmd, "%s/out/result.json", dir);
    ck_assert_int_ne(access(cmd, F_OK), 0); // no partial result
    rm_rf(dir);
}
END_TEST

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_int_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

// A matrix over a federation that trains an `mlp`, attacked by DLG on its own model and
// by DLG with a LeNet of its own (a probe): each result, the index, the CSV and the report
// name the attacked model; the probe is labelled as one, beside the federation's accuracy.
START_TEST(probe_model_is_labelled) {
    if (!bin()) {
        printf("SKIP: probe_model_is_labelled (FEDPRIV_BIN unset)\n");
        return;
    }
    char dir[] = "/tmp/fedpriv-test-atkdef-XXXXXX", err[16384];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_idx_set(dir, 40);
    char cfg[600], text[4096], cmd[4096], p[800];
    snprintf(cfg, sizeof cfg, "%s/m.json", dir);
    snprintf(text, sizeof text,
             "{\"seed\": 1, \"dataset\": {\"name\": \"fashion-mnist\", \"path\": \"%s\", \"split\": \"test\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [16]}, \"threads\": 1,"
             " \"federation\": {\"clients\": 1, \"rounds\": 1, \"local_steps\": 1, \"batch_size\": 4},"
             " \"defenses\": [{\"name\": \"none\"}],"
             " \"attacks\": [{\"name\": \"dlg\", \"images\": [0], \"steps\": 2, \"attacker\": \"single\"},"
             "  {\"name\": \"dlg\", \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"}, \"images\": [0],"
             "   \"steps\": 2, \"attacker\": \"single\"}]}", dir);
    write_text(cfg, text);
    snprintf(cmd, sizeof cmd, "%s matrix %s --out %s/run --jobs 1", bin(), cfg, dir);
    ck_assert_msg(run_cmd(cmd, err, sizeof err) == 0, "%s", err);
    // The index: each attack names its model; the probe's label says so.
    snprintf(p, sizeof p, "%s/run/results.json", dir);
    cJSON *ix = NULL;
    ck_assert_int_eq(jv_load_file(p, &ix, NULL), FP_OK);
    cJSON *atk = cJSON_GetObjectItem(ix, "attacks");
    ck_assert_int_eq(cJSON_GetArraySize(atk), 2);
    cJSON *own = cJSON_GetArrayItem(atk, 0), *probe = cJSON_GetArrayItem(atk, 1);
    ck_assert_str_eq(str(own, "attacked_model"), "mlp");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(own, "probe")));
    ck_assert_str_eq(str(probe, "attacked_model"), "lenet");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(probe, "probe")));
    ck_assert_str_eq(str(probe, "federation_model"), "mlp");
    ck_assert_msg(strstr(str(probe, "label"), "on lenet (probe)"), "%s",
                  str(probe, "label"));
    ck_assert_msg(!strstr(str(own, "label"), "probe"), "%s",
                  str(own, "label"));
    // The cell's results say the same.
    const char *id = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ix, "cells"), 0), "id")->valuestring;
    snprintf(p, sizeof p, "%s/run/cells/%s.json", dir, id);
    cJSON *cell = NULL;
    ck_assert_int_eq(jv_load_file(p, &cell, NULL), FP_OK);
    for (int k = 0; k < 2; k++) {
        cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(cell, "attacks"), k);
        ck_assert_str_eq(str(e, "status"), "done");
        cJSON *res = cJSON_GetObjectItem(e, "result");
        ck_assert_str_eq(str(res, "attacked_model"), k ? "lenet" : "mlp");
        ck_assert(cJSON_IsBool(cJSON_GetObjectItem(res, "probe")) && cJSON_IsTrue(cJSON_GetObjectItem(res, "probe")) == k);
    }
    cJSON_Delete(cell);
    cJSON_Delete(ix);
    // The CSV: an attacked_model column, the federation's model on its accuracy rows.
    snprintf(cmd, sizeof cmd, "%s export %s/run -o %s/run.csv", bin(), dir, dir);
    ck_assert_msg(run_cmd(cmd, err, sizeof err) == 0, "%s", err);
    snprintf(p, sizeof p, "%s/run.csv", dir);
    char *csv = slurp(p);
    ck_assert_msg(strstr(csv, ",status,attack,attacked_model,metric,value\n"), "%.400s", csv);
    ck_assert_msg(strstr(csv, ",done,,mlp,model_accuracy,"), "%.2000s", csv);
    ck_assert_msg(strstr(csv, ",done,dlg on lenet (probe),lenet,ssim_mean,"), "%.4000s", csv);
    ck_assert_msg(strstr(csv, ",done,dlg,mlp,ssim_mean,"), "%.4000s", csv);
    free(csv);
    // The report: each column names its model; the probe's cell names the federation's
    // model and accuracy beside the figure.
    snprintf(cmd, sizeof cmd, "%s report %s/run -o %s/r.html", bin(), dir, dir);
    ck_assert_msg(run_cmd(cmd, err, sizeof err) == 0, "%s", err);
    snprintf(p, sizeof p, "%s/r.html", dir);
    char *html = slurp(p);
    ck_assert_ptr_nonnull(strstr(html, "<small>on mlp<br>"));
    ck_assert_ptr_nonnull(strstr(html, "<small><b>probe</b> lenet, not the federation's mlp<br>"));
    ck_assert_ptr_nonnull(strstr(html, "<small class=\"probe\">of the probe lenet; the federation's mlp: accuracy "));
    free(html);
    rm_rf(dir);
}
END_TEST

Suite *suite_attacker_default(void) {
    Suite *s = suite_create("attacker_default");
    TCase *tc = tcase_create("attacker_default");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, dlg_default_recovers_on_relu_mlp);
    tcase_add_test(tc, single_attacker_failure_is_not_a_verdict);
    tcase_add_test(tc, single_keys_without_attacker_are_refused);
    tcase_add_test(tc, analytic_recovers_at_every_seed);
    tcase_add_test(tc, analytic_only_where_it_applies);
    tcase_add_test(tc, probe_model_is_labelled);
    suite_add_tcase(s, tc);
    return s;
}
