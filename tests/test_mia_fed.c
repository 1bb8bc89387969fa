// Membership inference in federations the engine partitions without IID: a membership
// target accepts every label partition the engine has. Its client data (the plan's first
// clients × m permuted samples) are split by the engine's own partitioner on their
// labels with the run's seed, so each client's members are exactly what
// partition_dirichlet / partition_shards give for that list and seed, in unequal pieces;
// LiRA and RMIA (offline, and online against the global target) run on it, and their
// reference federations are split the same way. The online variant against one client
// is refused under label skew (the partitioner, not the plan, decides that client's
// piece), naming the JSON path.
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/mia_fixture.h"

#define MF_CLIENTS 10
#define MF_SEED 5

// The federation: 10 clients over the synthetic mixture (2500 training rows; the plan's
// client data are 10 × 62), partition `partition` (with alpha 0.5 or 2 shards each), all
// clients every round, 2 rounds of 3 local epochs, an mlp of 16 units.
static void mf_open(Fixture *fx, const char *partition) {
    make_tmpdir(fx->dir, sizeof fx->dir);
    char csv[600], cfg[2048];
    snprintf(csv, sizeof csv, "%s/mixture.csv", fx->dir);
    write_mixture_csv(csv, 3000);
    snprintf(cfg, sizeof cfg,
             "{\"seed\": %d, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
             " \"federation\": {\"clients\": %d, \"rounds\": 2, \"local_epochs\": 3, \"batch_size\": 20,"
             " \"lr\": 0.1, \"momentum\": 0.9, \"partition\": \"%s\", \"alpha\": 0.5}, \"threads\": 1}",
             MF_SEED, csv, MF_CLIENTS, partition);
    fx->root = cJSON_Parse(cfg);
    ck_assert_ptr_nonnull(fx->root);
    FpError err = {0};
    ck_assert_msg(experiment_load(fx->root, NULL, "cpu", 1, defense_find, &fx->ex, &err) == FP_OK, "%s", err.msg);
}

// What the engine's partitioner gives for the plan's client data: the first n_train
// entries of the plan's permutation (RNG_ATTACK round 0), their labels, and the
// partitioner with the engine's stream for the seed (RNG_PARTITION round 0).
static Partition *engine_pieces(const Experiment *ex, int n_train, int dirichlet) {
    int n = ex->train->n;
    uint32_t *perm = malloc(sizeof(uint32_t) * (size_t)n);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)n_train);
    ck_assert_ptr_nonnull(perm);
    ck_assert_ptr_nonnull(labels);
    for (int i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    RngStream rs = rng_stream(ex->seed, RNG_ATTACK, 0, 0);
    rng_shuffle_u32(&rs, perm, (uint32_t)n);
    for (int i = 0; i < n_train; i++)
        labels[i] = ex->train->y[perm[i]];
    RngStream rp = rng_stream(ex->seed, RNG_PARTITION, 0, 0);
    Partition *p = NULL;
    FpError err = {0};
    FpStatus st = dirichlet ? partition_dirichlet(labels, n_train, ex->train->n_classes, MF_CLIENTS, 0.5, &rp, &p, &err)
                            : partition_shards(labels, n_train, MF_CLIENTS, 2, &rp, &p, &err);
    ck_assert_msg(st == FP_OK, "%s", err.msg);
    free(perm);
    free(labels);
    return p;
}

static const cJSON *plan_of(const cJSON *res) {
    const cJSON *plan = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "target"), "data_plan");
    ck_assert_ptr_nonnull(plan);
    return plan;
}

// The result's client_samples equal the engine partitioner's counts, and they are unequal
// (else the check would not tell a partition from the equal IID pieces).
static void check_pieces(const cJSON *res, const Partition *p, const char *partition) {
    const cJSON *plan = plan_of(res);
    ck_assert_str_eq(cJSON_GetObjectItem(plan, "partition")->valuestring, partition);
    const cJSON *cs = cJSON_GetObjectItem(plan, "client_samples");
    ck_assert_int_eq(cJSON_GetArraySize(cs), MF_CLIENTS);
    int lo = 1 << 30, hi = 0, sum = 0;
    for (int k = 0; k < MF_CLIENTS; k++) {
        int c = (int)cJSON_GetArrayItem(cs, k)->valuedouble;
        ck_assert_int_eq(c, p->count[k]);
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
        sum += c;
    }
    ck_assert_int_eq(sum, (int)num(plan, "client_data"));
    ck_assert_int_lt(lo, hi);
}

START_TEST(dirichlet_global_target_has_the_engines_pieces_and_lira_rmia_run) {
    Fixture fx;
    mf_open(&fx, "dirichlet");
    AttackCache *cache = attack_cache_create();
    cJSON *l = run_attack(&fx, "lira", "{\"shadow_models\": 4}", cache);
    cJSON *r = run_attack(&fx, "rmia", "{\"shadow_models\": 4}", cache);
    cJSON *lo = run_attack(&fx, "lira", "{\"shadow_models\": 4, \"variant\": \"online\"}", cache);
    int n_train = (int)num(plan_of(l), "client_data");
    ck_assert_int_eq(n_train, MF_CLIENTS * (2500 / (4 * MF_CLIENTS)));
    Partition *p = engine_pieces(&fx.ex, n_train, 1);
    check_pieces(l, p, "dirichlet");
    check_pieces(r, p, "dirichlet");
    // The global target's members: every client's piece but the adversary's (the last).
    const cJSON *tg = cJSON_GetObjectItem(l, "target");
    ck_assert_int_eq((int)num(tg, "members_trained_on"), n_train);
    ck_assert_int_eq((int)num(plan_of(l), "adversary_held_out"), p->count[MF_CLIENTS - 1]);
    int M = (int)num(tg, "eval_members");
    ck_assert_int_eq(M, n_train - p->count[MF_CLIENTS - 1]);
    check_result_shape(l, M);
    check_result_shape(r, M);
    check_result_shape(lo, M);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(tg, "shared_from_earlier_attack")) ||
              cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "target"), "shared_from_earlier_attack")));
    // Online: every candidate IN for exactly half of the 4 models (all clients take part).
    const cJSON *ipc = cJSON_GetObjectItem(cJSON_GetObjectItem(lo, "reference_models"), "in_models_per_candidate");
    ck_assert_int_eq((int)num(ipc, "min"), 2);
    ck_assert_int_eq((int)num(ipc, "max"), 2);
    partition_free(p);
    cJSON_Delete(l);
    cJSON_Delete(r);
    cJSON_Delete(lo);
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

// Under label skew the non-members match the eval members' label counts class by class,
// and the members' mix is skewed: its chi-square distance from the data's uniform class
// mix exceeds the 0.1% critical value (18.47 at the fixture's 5 classes, 4 degrees of
// freedom), so non-members drawn uniformly would not have matched.
static void check_labels_matched(const cJSON *tg, int members) {
    ck_assert_str_eq(cJSON_GetObjectItem(tg, "non_members_rule")->valuestring,
                     "matched to the eval members' label counts (label skew)");
    const cJSON *lc = cJSON_GetObjectItem(tg, "eval_label_counts");
    const cJSON *mem = cJSON_GetObjectItem(lc, "members"), *non = cJSON_GetObjectItem(lc, "non_members");
    int C = cJSON_GetArraySize(mem), total = 0;
    ck_assert_int_eq(C, 5);
    ck_assert_int_eq(cJSON_GetArraySize(non), C);
    for (int c = 0; c < C; c++) {
        int m = (int)cJSON_GetArrayItem(mem, c)->valuedouble;
        ck_assert_int_eq((int)cJSON_GetArrayItem(non, c)->valuedouble, m);
        total += m;
    }
    ck_assert_int_eq(total, members);
    double expect = (double)total / C, chi2 = 0;
    for (int c = 0; c < C; c++) {
        double d = cJSON_GetArrayItem(mem, c)->valuedouble - expect;
        chi2 += d * d / expect;
    }
    ck_assert_msg(chi2 > 18.47, "the members' labels are not skewed (chi-square %.2f), so the match proves nothing",
                  chi2);
}

START_TEST(dirichlet_client_target_is_its_piece) {
    Fixture fx;
    mf_open(&fx, "dirichlet");
    cJSON *l = run_attack(&fx, "lira", "{\"shadow_models\": 4, \"target\": \"client\", \"target_client\": 3}", NULL);
    int n_train = (int)num(plan_of(l), "client_data");
    Partition *p = engine_pieces(&fx.ex, n_train, 1);
    check_pieces(l, p, "dirichlet");
    const cJSON *tg = cJSON_GetObjectItem(l, "target");
    ck_assert_int_eq((int)num(tg, "client"), 3);
    ck_assert_int_eq((int)num(tg, "members_trained_on"), p->count[3]);
    ck_assert_int_eq((int)num(tg, "eval_members"), p->count[3]);
    check_result_shape(l, p->count[3]);
    check_labels_matched(tg, p->count[3]);
    partition_free(p);
    cJSON_Delete(l);
    fixture_close(&fx);
}
END_TEST

START_TEST(shards_target_has_the_engines_pieces) {
    Fixture fx;
    mf_open(&fx, "shards");
    cJSON *r = run_attack(&fx, "rmia", "{\"shadow_models\": 2}", NULL);
    int n_train = (int)num(plan_of(r), "client_data");
    Partition *p = engine_pieces(&fx.ex, n_train, 0);
    const cJSON *cs = cJSON_GetObjectItem(plan_of(r), "client_samples");
    ck_assert_str_eq(cJSON_GetObjectItem(plan_of(r), "partition")->valuestring, "shards");
    for (int k = 0; k < MF_CLIENTS; k++) // shards: sizes differ by at most one; the counts still match
        ck_assert_int_eq((int)cJSON_GetArrayItem(cs, k)->valuedouble, p->count[k]);
    partition_free(p);
    cJSON_Delete(r);
    fixture_close(&fx);
}
END_TEST

// The online variant against one client under label skew: refused at validation with
// the JSON path, nothing trained.
START_TEST(online_client_target_under_label_skew_is_refused) {
    Fixture fx;
    mf_open(&fx, "dirichlet");
    const AttackOps *ops = attack_find("lira");
    cJSON *aj = cJSON_Parse("{\"shadow_models\": 4, \"variant\": \"online\", \"target\": \"client\"}");
    AttackEnv env = {.ex = &fx.ex, .attack_json = aj, .path = "attack", .out_dir = fx.dir, .quiet = 1};
    FpError err = {0};
    ck_assert_int_eq(ops->validate(&env, &err), FP_EPARAM);
    ck_assert_msg(strstr(err.msg, "attack.variant") && strstr(err.msg, "dirichlet"), "%s", err.msg);
    cJSON_Delete(aj);
    fixture_close(&fx);
}
END_TEST

Suite *suite_mia_fed(void) {
    Suite *s = suite_create("mia_fed");
    TCase *e = tcase_create("partitions");
    tcase_set_timeout(e, 120);
    tcase_add_test(e, dirichlet_global_target_has_the_engines_pieces_and_lira_rmia_run);
    tcase_add_test(e, dirichlet_client_target_is_its_piece);
    tcase_add_test(e, shards_target_has_the_engines_pieces);
    tcase_add_test(e, online_client_target_under_label_skew_is_refused);
    suite_add_tcase(s, e);
    return s;
}
