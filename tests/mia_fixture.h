// What the membership-inference suites share (tests/test_mia.c, tests/test_mia_ref.c):
// temporary folders, a synthetic CSV of overlapping classes, the small federation every
// end-to-end test attacks, and running one attack on it.
#ifndef FEDPRIV_TESTS_MIA_FIXTURE_H
#define FEDPRIV_TESTS_MIA_FIXTURE_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/attack_registry.h"
#include "attacks/target.h"
#include "defenses/registry.h"


static inline int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

static inline void make_tmpdir(char *dir, size_t n) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, n, "%s/fedpriv-mia-XXXXXX", base && base[0] ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static inline void remove_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static inline double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "missing number \"%s\"", key);
    return v->valuedouble;
}

// A synthetic CSV of n rows: 5 classes drawn uniformly, 20 features x = μ_y + N(0, 1)
// with class means μ_c ~ N(0, 0.2²) per feature (RNG_TEST streams). The classes overlap
// heavily (test accuracy ~0.3), so a model trained long on few samples overfits and its
// members show.
static inline void write_mixture_csv(const char *path, int n) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    double mu[5][20];
    RngStream rm = rng_stream(99, RNG_TEST, 4, 0), rs = rng_stream(99, RNG_TEST, 5, 0);
    for (int c = 0; c < 5; c++)
        for (int j = 0; j < 20; j++)
            mu[c][j] = 0.2 * rng_next_normal(&rm);
    for (int j = 0; j < 20; j++)
        fprintf(f, "f%d,", j);
    fprintf(f, "label\n");
    for (int i = 0; i < n; i++) {
        uint32_t y = rng_next_below(&rs, 5);
        for (int j = 0; j < 20; j++)
            fprintf(f, "%.6f,", mu[y][j] + rng_next_normal(&rs));
        fprintf(f, "%u\n", y);
    }
    fclose(f);
}

// The experiment of the end-to-end tests: 2 clients × spc samples, 3 rounds of 15
// local epochs (SGD lr, momentum 0.9).
typedef struct {
    char dir[512];
    cJSON *root;
    Experiment ex;
} Fixture;

// The federation: 2 clients × spc samples, `rounds` rounds of `epochs` local epochs (SGD
// lr, momentum 0.9, batch 20), an mlp with `hidden` units.
static inline void fixture_open_sized(Fixture *fx, double lr, int spc, int rounds, int epochs, int hidden) {
    make_tmpdir(fx->dir, sizeof fx->dir);
    char csv[600], cfg[2048];
    snprintf(csv, sizeof csv, "%s/mixture.csv", fx->dir);
    write_mixture_csv(csv, 3000); // 2500 train / 500 test after the 1/6 holdout
    snprintf(cfg, sizeof cfg,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [%d]},"
             " \"federation\": {\"clients\": 2, \"rounds\": %d, \"local_epochs\": %d, \"samples_per_client\": %d,"
             " \"batch_size\": 20, \"lr\": %g, \"momentum\": 0.9}, \"threads\": 2}",
             csv, hidden, rounds, epochs, spc, lr);
    fx->root = cJSON_Parse(cfg);
    ck_assert_ptr_nonnull(fx->root);
    FpError err = {0};
    ck_assert_msg(experiment_load(fx->root, NULL, "cpu", 2, defense_find, &fx->ex, &err) == FP_OK, "%s", err.msg);
}

// The end-to-end tests' target: 3 rounds of 15 local epochs, 64 hidden units (overfits).
static inline void fixture_open(Fixture *fx, double lr, int spc) { fixture_open_sized(fx, lr, spc, 3, 15, 64); }

static inline void fixture_close(Fixture *fx) {
    experiment_free(&fx->ex);
    cJSON_Delete(fx->root);
    remove_tree(fx->dir);
}

// Runs attack `name` with the attack object `attack_json` on fx, sharing `cache` (may be
// NULL) and the on-disk reference-model cache reference_dir (may be NULL); returns the
// result.
static inline cJSON *run_attack_in(Fixture *fx, const char *name, const char *attack_json, AttackCache *cache,
                                   const char *reference_dir) {
    const AttackOps *ops = attack_find(name);
    ck_assert_ptr_nonnull(ops);
    cJSON *aj = cJSON_Parse(attack_json);
    ck_assert_ptr_nonnull(aj);
    AttackEnv env = {.ex = &fx->ex, .attack_json = aj, .path = "attack", .out_dir = fx->dir, .cache = cache,
                     .reference_dir = reference_dir, .quiet = 1};
    FpError err = {0};
    ck_assert_msg(ops->validate(&env, &err) == FP_OK, "%s: %s", name, err.msg);
    cJSON *res = cJSON_CreateObject();
    ck_assert_msg(ops->run(&env, res, &err) == FP_OK, "%s: %s", name, err.msg);
    cJSON_Delete(aj);
    return res;
}

static inline cJSON *run_attack(Fixture *fx, const char *name, const char *attack_json, AttackCache *cache) {
    return run_attack_in(fx, name, attack_json, cache, NULL);
}

// The shape every MIA result must have: balanced sizes, metrics in range, a monotone
// ROC of at most 200 points from (0,0) to (1,1).
static inline void check_result_shape(const cJSON *r, int members) {
    ck_assert_int_eq((int)num(r, "members"), members);
    ck_assert_int_eq((int)num(r, "non_members"), members);
    static const char *const unit[] = {"auc", "balanced_accuracy", "best_balanced_accuracy", "precision", "recall"};
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
        double v = num(r, unit[i]);
        ck_assert_msg(v >= 0 && v <= 1, "%s = %g", unit[i], v);
    }
    const cJSON *tf = cJSON_GetObjectItem(r, "tpr_at_fpr");
    ck_assert_double_le(num(tf, "0.001"), num(tf, "0.01"));
    ck_assert_double_le(num(tf, "0"), num(tf, "0.001"));
    ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(r, "tpr_at_fpr_rule")->valuestring, "FPR <= t"));
    const cJSON *roc = cJSON_GetObjectItem(r, "roc");
    const cJSON *fpr = cJSON_GetObjectItem(roc, "fpr"), *tpr = cJSON_GetObjectItem(roc, "tpr");
    int k = cJSON_GetArraySize(fpr);
    ck_assert_int_eq(k, cJSON_GetArraySize(tpr));
    ck_assert_int_le(k, 200);
    ck_assert_int_ge(k, 2);
    ck_assert_double_eq(cJSON_GetArrayItem(fpr, 0)->valuedouble, 0);
    ck_assert_double_eq(cJSON_GetArrayItem(tpr, 0)->valuedouble, 0);
    ck_assert_double_eq(cJSON_GetArrayItem(fpr, k - 1)->valuedouble, 1);
    ck_assert_double_eq(cJSON_GetArrayItem(tpr, k - 1)->valuedouble, 1);
    for (int i = 1; i < k; i++) {
        ck_assert_double_ge(cJSON_GetArrayItem(fpr, i)->valuedouble, cJSON_GetArrayItem(fpr, i - 1)->valuedouble);
        ck_assert_double_ge(cJSON_GetArrayItem(tpr, i)->valuedouble, cJSON_GetArrayItem(tpr, i - 1)->valuedouble);
    }
    const cJSON *t = cJSON_GetObjectItem(r, "target"); // attack results only
    if (t)
        ck_assert_int_eq((int)num(t, "eval_members"), members);
}

#endif
