// `cs-mia`: the confidence-series membership attack (Gu, Bai & Xu, JISA'22, code
// local_cs.py), as DP-FedASGP evaluates defenses with it.
//
// The adversary takes part in training as a client (the federation's last client; see
// attacks/target.h): it contributes its piece D_train and keeps an equal-sized D_test
// back. After every round it queries the new global model and records, for each sample,
// a confidence value: the true-label probability p_y (default) or Song & Mittal's
// modified entropy Mentr. A sample's feature is its series over the R rounds. The attack
// model, an MLP R→64→1 sigmoid in the paper (here the zoo's `mlp` R→64→2 softmax: the
// softmax over two logits is the sigmoid of their difference), learns D_train's series
// (label 1) against D_test's (label 0), then scores the eval members (other clients'
// data) and non-members.
//
// The reference trains with Adam (lr 1e-3, batch 128, 50 epochs); the core has SGD, so
// the defaults are SGD with momentum 0.9, lr 0.05, batch 128, 50 epochs, on
// standardised features. The series are kept: per-round means of each set in the
// result, a few samples' series inline, and every series in cs_mia_series.csv.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attacks/target.h"
#include "core/clock.h"
#include "core/files.h"
#include "core/jsonv.h"

static const char *const cs_keys[] = {"name", MIA_TARGET_KEYS, "feature", "attack_model", "series_samples", NULL};
static const char *const feature_names[] = {"confidence", "mentr", NULL};

static const MiaMlpConfig cs_mlp_default = {
    .hidden = 64, .epochs = 50, .batch_size = 128, .lr = 0.05, .momentum = 0.9, .weight_decay = 0,
    .standardize = 1};

typedef struct {
    MiaTargetConfig cfg;
    MiaSizes sz;
    int feature, series_samples;
    MiaMlpConfig mlp;
} CsOptions;

static FpStatus cs_options(const AttackEnv *env, CsOptions *o, FpError *err) {
    const cJSON *j = env->attack_json;
    char p[256];
    FP_TRY(jv_keys(j, env->path, cs_keys, err));
    FP_TRY(mia_target_parse(env, &o->cfg, err));
    if (o->cfg.kind != MIA_TARGET_GLOBAL)
        return fp_fail(err, FP_EPARAM, "%s: cs-mia observes the global model after every round; only \"global\" "
                       "is supported", jv_path(p, sizeof p, env->path, "target"));
    if (env->ex->fed.clients < 2)
        return fp_fail(err, FP_EPARAM, "federation.clients: cs-mia's adversary is one of the clients, so at least "
                       "2 are needed");
    o->cfg.series = 1;
    FP_TRY(mia_sizes(env, &o->cfg, &o->sz, err));
    FP_TRY(jv_choice(j, env->path, "feature", feature_names, 0, &o->feature, err));
    long long v;
    FP_TRY(jv_int(j, env->path, "series_samples", JV_OPTIONAL, 10, 0, 100000, &v, err));
    o->series_samples = (int)v;
    o->mlp = cs_mlp_default;
    return mia_mlp_parse(j, env->path, &o->mlp, err);
}

static FpStatus cs_validate(const AttackEnv *env, FpError *err) {
    CsOptions o;
    return cs_options(env, &o, err);
}

// The target, and the global model's confidence on the series samples every round.
static FpStatus cs_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    CsOptions o;
    FP_TRY(cs_options(env, &o, err));
    uint64_t series = 2 * (uint64_t)o.sz.members + (uint64_t)o.sz.adv_out + (uint64_t)o.sz.per_client;
    *w = (AttackWork){.target_samples = (uint64_t)o.sz.n_train,
                      .passes = (uint64_t)env->ex->fed.rounds * series};
    return FP_OK;
}

// Row i of the feature matrix: sample s's series over the rounds.
static void series_row(const MiaTarget *t, const float *series, int s, float *row) {
    for (int r = 0; r < t->series_rounds; r++)
        row[r] = series[(size_t)r * t->n_series + s];
}

static cJSON *mean_series(const MiaTarget *t, const float *series, int first, int count) {
    cJSON *a = cJSON_CreateArray();
    for (int r = 0; r < t->series_rounds; r++) {
        double s = 0;
        for (int i = 0; i < count; i++)
            s += series[(size_t)r * t->n_series + first + i];
        cJSON_AddItemToArray(a, cJSON_CreateNumber(count ? s / count : NAN));
    }
    return a;
}

static FpStatus write_series_csv(const AttackEnv *env, const MiaTarget *t, const float *series, FpError *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cs_mia_series.csv", env->out_dir);
    FILE *f = fp_create_new(path, err); // a link planted in the output folder is replaced, not followed
    if (!f)
        return FP_EIO;
    int M = t->sz.members, m = t->sz.adv_out;
    fprintf(f, "set,sample,member");
    for (int r = 1; r <= t->series_rounds; r++)
        fprintf(f, ",round%d", r);
    fprintf(f, "\n");
    for (int s = 0; s < t->n_series; s++) {
        const char *set = s < M ? "eval" : s < 2 * M ? "eval" : s < 2 * M + m ? "adversary_train" : "adversary_test";
        int member = s < M || (s >= 2 * M && s < 2 * M + m);
        uint32_t idx = s < 2 * M ? t->eval_idx[s] : s < 2 * M + m ? t->adv_in[s - 2 * M] : t->adv_out[s - 2 * M - m];
        fprintf(f, "%s,%u,%d", set, idx, member);
        for (int r = 0; r < t->series_rounds; r++)
            fprintf(f, ",%.9g", series[(size_t)r * t->n_series + s]);
        fprintf(f, "\n");
    }
    if (fclose(f) != 0)
        return fp_fail(err, FP_EIO, "%s: write failed", path);
    return FP_OK;
}

static FpStatus cs_run(const AttackEnv *env, cJSON *result, FpError *err) {
    CsOptions o;
    FP_TRY(cs_options(env, &o, err));
    MiaTarget *t;
    FP_TRY(mia_target_acquire(env, &o.cfg, &t, err));
    double t0 = fp_monotonic_seconds();
    int R = t->series_rounds, M = t->sz.members, m = t->sz.adv_out, n = 2 * M, ntr = 2 * m;
    const float *series = o.feature == 0 ? t->series_py : t->series_mentr;
    float *xtr = malloc(sizeof(float) * (size_t)ntr * R), *xte = malloc(sizeof(float) * (size_t)n * R);
    int32_t *ytr = malloc(sizeof(int32_t) * (size_t)ntr), *label = malloc(sizeof(int32_t) * (size_t)n);
    double *score = malloc(sizeof(double) * (size_t)n);
    FpStatus st = FP_OK;
    if (!xtr || !xte || !ytr || !label || !score) {
        st = fp_fail(err, FP_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < ntr; i++) { // D_train (members, the adversary's piece), then D_test
        series_row(t, series, 2 * M + i, xtr + (size_t)i * R);
        ytr[i] = i < m;
    }
    for (int i = 0; i < n; i++) {
        series_row(t, series, i, xte + (size_t)i * R);
        label[i] = i < M;
    }
    st = mia_mlp_scores(R, xtr, ytr, ntr, xte, n, &o.mlp, env->ex->seed, 2, score, err);
    if (st == FP_OK)
        st = mia_report(result, score, label, n, NULL, 0.0,
                        "member iff the attack model's P(member) >= 1/2 (its member log-odds >= 0)", err);
    if (st == FP_OK)
        st = write_series_csv(env, t, series, err);
    if (st != FP_OK)
        goto out;
    cJSON_AddStringToObject(result, "score", "the attack model's member log-odds on the sample's confidence series");
    cJSON *am = mia_mlp_json(&o.mlp);
    cJSON_AddNumberToObject(am, "inputs", R);
    cJSON_AddStringToObject(am, "reference_difference", "reference: MLP R-64-1 sigmoid with Adam lr 1e-3; here "
                                                        "R-64-2 softmax (equivalent output) with SGD+momentum");
    cJSON_AddItemToObject(result, "attack_model", am);
    cJSON *ad = cJSON_AddObjectToObject(result, "adversary");
    cJSON_AddNumberToObject(ad, "client", t->sz.adversary);
    cJSON_AddNumberToObject(ad, "train_samples", m);
    cJSON_AddNumberToObject(ad, "held_out_samples", m);
    cJSON *se = cJSON_AddObjectToObject(result, "series");
    cJSON_AddStringToObject(se, "feature", o.feature == 0 ? "confidence (true-label probability p_y)"
                                                          : "mentr (Song & Mittal modified entropy)");
    cJSON_AddNumberToObject(se, "rounds", R);
    cJSON_AddItemToObject(se, "member_mean", mean_series(t, series, 0, M));
    cJSON_AddItemToObject(se, "non_member_mean", mean_series(t, series, M, M));
    cJSON_AddItemToObject(se, "adversary_train_mean", mean_series(t, series, 2 * M, m));
    cJSON_AddItemToObject(se, "adversary_test_mean", mean_series(t, series, 2 * M + m, m));
    cJSON *samples = cJSON_AddArrayToObject(se, "samples");
    int k = o.series_samples < M ? o.series_samples : M;
    float *row = malloc(sizeof(float) * (size_t)(R > 0 ? R : 1));
    for (int c = 0; row && c < 2; c++)
        for (int i = 0; i < k; i++) {
            int s = c == 0 ? i : M + i;
            series_row(t, series, s, row);
            cJSON *o1 = cJSON_CreateObject();
            cJSON_AddNumberToObject(o1, "sample", t->eval_idx[s]);
            cJSON_AddNumberToObject(o1, "member", c == 0);
            cJSON_AddItemToObject(o1, "values", cJSON_CreateFloatArray(row, R));
            cJSON_AddItemToArray(samples, o1);
        }
    free(row);
    cJSON_AddStringToObject(se, "csv", "cs_mia_series.csv");
    cJSON *art = cJSON_AddObjectToObject(result, "artifacts");
    cJSON_AddStringToObject(art, "series_csv", "cs_mia_series.csv");
    mia_target_describe(t, result);
    mia_conclude(env, "cs-mia", result);
    cJSON *tm = cJSON_AddObjectToObject(result, "timing");
    cJSON_AddNumberToObject(tm, "target_train_seconds", t->train_seconds);
    cJSON_AddNumberToObject(tm, "shadow_train_seconds", 0);
    cJSON_AddNumberToObject(tm, "attack_seconds", fp_monotonic_seconds() - t0);
out:
    free(xtr);
    free(xte);
    free(ytr);
    free(label);
    free(score);
    mia_target_release(env, t);
    return st;
}

const AttackOps attack_cs_mia = {
    .name = "cs-mia",
    .summary = "membership: CS-MIA (adversary client, confidence series of the global model, R-64 attack MLP)",
    .headline = "auc",
    .headline_higher_leaks = 1,
    .uses_reference = 1,
    .validate = cs_validate,
    .run = cs_run,
    .work = cs_work,
};
