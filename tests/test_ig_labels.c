// Batch label recovery for Inverting Gradients (attacks/inversion.h, bias_count_labels):
// the counts read off the last bias's gradient (Geng et al. 2021) against LLG's row sums
// (Wainakh et al. 2022), on the fixture of test_ig.c (12×12 synthetic images, random
// labels with repeats) at two initialisations: PyTorch's default, where the last layer
// is not saturated and both rules work, and U(−0.5, 0.5) ("uniform"), where a sigmoid
// LeNet predicts nearly one class for every input: the predicted class's row sum is then
// positive even where it is a true label, so LLG misses it, and the bias counts do not.
// Then the CLI on Fashion-MNIST at the setting of docs/attacks-dlg.md ("Inverting Gradients
// at B = 4"), where LLG named 6 of the 12 labels.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/inversion.h"
#include "core/jsonv.h"
#include "core/json_number.h"
#include "core/rng.h"
#include "tests/cli_run.h"
#include "tests/inversion_fixture.h"

// How many of truth's B labels the multiset got names (each entry used once).
static int hits(const int32_t *truth, const int32_t *got, int B) {
    int used[16] = {0}, n = 0;
    for (int i = 0; i < B; i++)
        for (int j = 0; j < B; j++)
            if (!used[j] && got[j] == truth[i]) {
                used[j] = 1;
                n++;
                break;
            }
    return n;
}

// The share of labels each rule recovers over 60 batches of B = 4.
static void label_shares(const char *init, double *bias_share, double *llg_share) {
    enum { B = 4, BATCHES = 60 };
    Model *m = tiny_lenet_init(12, 12, 5, init);
    const ParamLayer *w = &m->table.layers[model_last_weight_layer(m)];
    int bl = inversion_last_bias_layer(m);
    ck_assert_int_ge(bl, 0);
    const ParamLayer *b = &m->table.layers[bl];
    float *g = malloc(sizeof(float) * m->table.n_params), x[B * 144];
    RngStream rs = rng_stream(23, RNG_TEST, 0, 0);
    int by_bias = 0, by_llg = 0;
    for (int t = 0; t < BATCHES; t++) {
        int32_t y[B], got[B];
        for (int i = 0; i < B; i++) {
            y[i] = (int32_t)(rng_next_uniform(&rs) * 10);
            test_image((int)(rng_next_uniform(&rs) * 40), x + i * 144, 12, 12);
        }
        true_gradient(m, x, y, B, g);
        FpError err = {0};
        ck_assert_msg(bias_count_labels(m, g + b->offset, B, 7, (uint32_t)t, got, &err) == FP_OK, "%s", err.msg);
        for (int i = 1; i < B; i++)
            ck_assert_int_le(got[i - 1], got[i]); // a multiset, in increasing order
        by_bias += hits(y, got, B);
        llg_labels(g + w->offset, w->shape[0], w->shape[1], B, got);
        by_llg += hits(y, got, B);
    }
    *bias_share = (double)by_bias / (B * BATCHES);
    *llg_share = (double)by_llg / (B * BATCHES);
    printf("ig_labels (%s init): bias counts %.4f, LLG %.4f\n", init, *bias_share, *llg_share);
    free(g);
    model_free(m);
}

// The rule is exact up to the estimate of the batch's mean prediction (the counts are
// B·(p̄ − ∂L/∂b) with p̄ guessed on uniform inputs): on these smooth synthetic images the
// guess is close, and every label must be named. LLG is the control: in the saturated
// network it must miss labels the bias counts find (it named 0.85 here when this was
// written), so the check tells the two rules apart.
START_TEST(bias_counts_survive_a_saturated_layer) {
    double bias, llg;
    label_shares("uniform", &bias, &llg);
    ck_assert_msg(bias == 1.0, "bias counts named %.4f of the labels", bias);
    ck_assert_msg(llg < bias, "LLG %.4f: the saturated fixture no longer separates the rules", llg);
    label_shares("default", &bias, &llg);
    ck_assert_msg(bias == 1.0, "bias counts named %.4f of the labels at the default init", bias);
}
END_TEST

// The label probe's draws are the attack's: the same seed and stream give the same
// multiset, and the rule does not change the model.
START_TEST(bias_counts_are_reproducible) {
    Model *m = tiny_lenet(12, 12, 5);
    int bl = inversion_last_bias_layer(m);
    float *g = malloc(sizeof(float) * m->table.n_params), x[4 * 144];
    int32_t y[4] = {1, 1, 2, 9}, a[4], b[4];
    for (int i = 0; i < 4; i++)
        test_image(3 * i, x + i * 144, 12, 12);
    true_gradient(m, x, y, 4, g);
    float *before = malloc(sizeof(float) * m->table.n_params);
    memcpy(before, m->params, sizeof(float) * m->table.n_params);
    ck_assert_int_eq(bias_count_labels(m, g + m->table.layers[bl].offset, 4, 11, 2, a, NULL), FP_OK);
    ck_assert_int_eq(bias_count_labels(m, g + m->table.layers[bl].offset, 4, 11, 2, b, NULL), FP_OK);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    ck_assert_int_eq(memcmp(before, m->params, sizeof(float) * m->table.n_params), 0);
    free(before);
    free(g);
    model_free(m);
}
END_TEST

// The CLI at docs/attacks-dlg.md's B = 4 setting: LeNet-sigmoid with U(−0.5, 0.5) weights,
// Fashion-MNIST test images [8(s−1), 8(s−1)+4) for seeds s = 1, 2, 3. One step of one
// attacker is enough: the labels are fixed before any optimisation, and every variant of
// the adaptive set uses the same ones (the adaptive set's 300-step L-BFGS runs are what
// made this check take minutes under the sanitizers).
START_TEST(fashion_mnist_labels_at_batch_four) {
    if (!cli_have_bin()) {
        printf("SKIP fashion_mnist_labels_at_batch_four: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    static char out[1 << 16], err[1 << 16];
    for (int s = 1; s <= 3; s++) {
        char dir[] = "/tmp/fedpriv-ig-labels-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char cfg[128], res[128];
        snprintf(cfg, sizeof cfg, "%s/c.json", dir);
        snprintf(res, sizeof res, "%s/out", dir);
        int a = 8 * (s - 1);
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"seed\": %d, \"dataset\": {\"name\": \"fashion-mnist\", \"split\": \"test\"},"
                 " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"},"
                 " \"federation\": {\"clients\": 16, \"batch_size\": 64, \"lr\": 0.01},"
                 " \"attack\": {\"name\": \"inverting-gradients\", \"images\": [%d, %d, %d, %d], \"batch_size\": 4,"
                 "  \"steps\": 1, \"attacker\": \"single\", \"reference\": false},"
                 " \"defense\": {\"name\": \"none\"}}",
                 s, a, a + 1, a + 2, a + 3);
        write_text(cfg, text);
        const char *args[] = {"attack", "inverting-gradients", "--config", cfg, "--out", res, NULL};
        int rc = cli_run(args, out, err, sizeof out);
        ck_assert_msg(rc == 0, "seed %d: exit %d: %s", s, rc, err);
        char rp[160];
        snprintf(rp, sizeof rp, "%s/result.json", res);
        cJSON *r = NULL;
        ck_assert_int_eq(jv_load_file(rp, &r, NULL), FP_OK);
        double acc = jnum_value(cJSON_GetObjectItemCaseSensitive(r, "label_multiset_accuracy"));
        ck_assert_msg(acc == 1.0, "seed %d: label multiset accuracy %g", s, acc);
        const cJSON *rule = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "attack_config"),
                                                             "label_rule");
        ck_assert_msg(cJSON_IsString(rule) && strstr(rule->valuestring, "bias"), "label rule not stated");
        cJSON_Delete(r);
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
}
END_TEST

// Issue's done-when for Inverting Gradients at B = 4 with default options (the adaptive set
// of attacks/inverting_gradients.c, labels recovered by the attack): at least 5 of the 12
// images recovered (SSIM >= 0.9) and a mean SSIM of at least 0.75 over the three seeds.
// Measured (this release): 9 of 12, 0.931; the paper's configuration alone
// ("attacker": "single") 4 of 12, 0.592, as the PyTorch port given the true labels (0.586).
START_TEST(default_attacker_recovers_batches_of_four) {
    if (!cli_have_bin()) {
        printf("SKIP default_attacker_recovers_batches_of_four: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
#if defined(__SANITIZE_ADDRESS__)
    // Three adaptive inversions take minutes under ASan and UBSan; the figure is checked
    // in the release build, and the sanitizers see the same code through
    // fashion_mnist_labels_at_batch_four and test_ig.c.
    printf("SKIP default_attacker_recovers_batches_of_four: a figure test, run in the release build\n");
    return;
#endif
    static char out[1 << 16], err[1 << 16];
    int recovered = 0, images = 0;
    double ssim_sum = 0;
    for (int s = 1; s <= 3; s++) {
        char dir[] = "/tmp/fedpriv-ig-b4-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char cfg[128], res[128], text[1024], rp[160];
        snprintf(cfg, sizeof cfg, "%s/c.json", dir);
        snprintf(res, sizeof res, "%s/out", dir);
        int a = 8 * (s - 1);
        snprintf(text, sizeof text,
                 "{\"seed\": %d, \"dataset\": {\"name\": \"fashion-mnist\", \"split\": \"test\"},"
                 " \"model\": {\"name\": \"lenet\", \"init\": \"uniform\"},"
                 " \"federation\": {\"clients\": 16, \"batch_size\": 64, \"lr\": 0.01},"
                 " \"attack\": {\"name\": \"inverting-gradients\", \"images\": [%d, %d, %d, %d], \"batch_size\": 4},"
                 " \"defense\": {\"name\": \"none\"}}",
                 s, a, a + 1, a + 2, a + 3);
        write_text(cfg, text);
        const char *args[] = {"attack", "inverting-gradients", "--config", cfg, "--out", res, "--threads", "2", NULL};
        int rc = cli_run(args, out, err, sizeof out);
        ck_assert_msg(rc == 0, "seed %d: exit %d: %s", s, rc, err);
        snprintf(rp, sizeof rp, "%s/result.json", res);
        cJSON *r = NULL;
        ck_assert_int_eq(jv_load_file(rp, &r, NULL), FP_OK);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "attack_config"),
                                                          "attacker")->valuestring, "adaptive");
        recovered += (int)jnum_value(cJSON_GetObjectItemCaseSensitive(r, "images_recovered"));
        images += 4;
        ssim_sum += 4 * jnum_value(cJSON_GetObjectItemCaseSensitive(r, "ssim_mean"));
        cJSON_Delete(r);
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    printf("default_attacker_recovers_batches_of_four: %d of %d recovered, mean SSIM %.3f\n", recovered, images,
           ssim_sum / images);
    ck_assert_int_eq(images, 12);
    ck_assert_msg(recovered >= 5, "%d of 12 recovered", recovered);
    ck_assert_msg(ssim_sum / images >= 0.75, "mean SSIM %.3f", ssim_sum / images);
}
END_TEST

Suite *suite_ig_labels(void) {
    Suite *s = suite_create("ig_labels");
    TCase *t = tcase_create("rules");
    tcase_set_timeout(t, 600); // three inversions of 4 images, x3 under sanitizers
    tcase_add_test(t, bias_counts_survive_a_saturated_layer);
    tcase_add_test(t, bias_counts_are_reproducible);
    tcase_add_test(t, fashion_mnist_labels_at_batch_four);
    tcase_add_test(t, default_attacker_recovers_batches_of_four);
    suite_add_tcase(s, t);
    return s;
}
