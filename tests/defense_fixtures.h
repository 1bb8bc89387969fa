// Fixtures for the tests of the federated defenses (tests/test_fed_defenses.c,
// tests/test_privacy.c): a parameter table with a batch-norm statistic between two
// trainable layers, a DefenseSetup around it, defenses created from JSON text, a
// round context, describe() numbers, and the 6-sigma variance statistic.
#ifndef FEDPRIV_TESTS_DEFENSE_FIXTURES_H
#define FEDPRIV_TESTS_DEFENSE_FIXTURES_H

#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "defenses/registry.h"
#include "fl/defense.h"

#define SEED 20240611ULL

// A parameter table: "w" (trainable, n1), "bn.running" (3, not trainable), "b" (trainable, n2).
typedef struct {
    ParamLayer layers[3];
    ParamTable table;
} Table;

static inline void table_init(Table *t, size_t n1, size_t n2) {
    memset(t, 0, sizeof *t);
    t->layers[0] = (ParamLayer){.name = "w", .offset = 0, .count = n1, .ndim = 1, .kind = PARAM_WEIGHT,
                                .trainable = 1};
    t->layers[1] = (ParamLayer){.name = "bn.running", .offset = n1, .count = 3, .ndim = 1, .kind = PARAM_BN_STAT,
                                .trainable = 0};
    t->layers[2] = (ParamLayer){.name = "b", .offset = n1 + 3, .count = n2, .ndim = 1, .kind = PARAM_BIAS,
                                .trainable = 1};
    t->layers[0].shape[0] = (int)n1;
    t->layers[1].shape[0] = 3;
    t->layers[2].shape[0] = (int)n2;
    t->table = (ParamTable){.n_layers = 3, .layers = t->layers, .n_params = n1 + 3 + n2, .n_trainable = n1 + n2};
}

static inline DefenseSetup setup_for(const Table *t, int clients, int rounds, double q, int min_samples) {
    return (DefenseSetup){.seed = SEED, .params = &t->table, .n_clients = clients, .rounds = rounds,
                          .sample_rate = q, .local_epochs = 1, .batch_size = 32, .lr = 0.1,
                          .min_client_samples = min_samples, .max_client_samples = min_samples};
}

// Creates a defense from JSON text; fails the test with the error message on failure.
static inline void *make_defense(const char *json, const DefenseSetup *setup, const DefenseOps **ops) {
    cJSON *j = cJSON_Parse(json);
    ck_assert_ptr_nonnull(j);
    *ops = defense_find(cJSON_GetObjectItem(j, "name")->valuestring);
    ck_assert_ptr_nonnull(*ops);
    void *st = NULL;
    FpError err = {0};
    FpStatus s = (*ops)->create(j, "defense", setup, &st, &err);
    cJSON_Delete(j);
    ck_assert_msg(s == FP_OK, "create %s: %s", json, err.msg);
    return st;
}

// The create error (FP_OK when it succeeds; the state is then destroyed).
static inline FpStatus create_status(const char *json, const DefenseSetup *setup, FpError *err) {
    cJSON *j = cJSON_Parse(json);
    ck_assert_ptr_nonnull(j);
    const DefenseOps *ops = defense_find(cJSON_GetObjectItem(j, "name")->valuestring);
    void *st = NULL;
    FpStatus s = ops->create(j, "defense", setup, &st, err);
    if (s == FP_OK)
        ops->destroy(st);
    cJSON_Delete(j);
    return s;
}

static inline DefenseRound round_ctx(int round, int client, int n_local) {
    return (DefenseRound){.round = round, .client = client,
                          .rng = rng_stream(SEED, RNG_DEFENSE, (uint32_t)round, (uint32_t)client),
                          .aux_rng = rng_stream(SEED, RNG_DEFENSE_AUX, (uint32_t)round, (uint32_t)client),
                          .n_local_samples = n_local};
}

static inline double describe_number(const DefenseOps *ops, void *st, const char *key) {
    cJSON *o = cJSON_CreateObject();
    ops->describe(st, o);
    cJSON *v = cJSON_GetObjectItem(o, key);
    ck_assert_msg(v && cJSON_IsNumber(v), "describe() lacks %s", key);
    double x = v->valuedouble;
    cJSON_Delete(o);
    return x;
}

// z-score of mean(x²) against the variance v of zero-mean noise with kurtosis kurt.
static inline double moment_z(const double *x, size_t n, double v, double kurt) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return (s / n - v) / (v * sqrt((kurt - 1) / n));
}

#endif
