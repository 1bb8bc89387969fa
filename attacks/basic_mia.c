// `basic-mia`: the global-threshold membership attacks on the target's true-label
// confidence.
//
//   1. Confidence threshold (Song, Shokri & Mittal CCS'19, as DP-FedASGP's "Basic-MIA"):
//      member iff p_y(x) >= τ, one global τ chosen for the best accuracy on shadow data:
//      a shadow model trained like the target on shadow-in, scored on its members
//      (shadow-in) and as many shadow-out samples (the same shadow model ML-Leaks uses).
//   2. Yeom et al. (CSF'18, EvaluatingDPML `yeom_membership_inference`): member iff
//      ℓ(x, y) <= τ with τ = the target's mean training loss (per-example CE), and its
//      Gaussian variant: member iff N(0, train_loss).pdf(ℓ) >= N(0, test_loss).pdf(ℓ).
//   3. The sweep of every threshold (TF Privacy's THRESHOLD_ATTACK on −loss): the ROC,
//      AUC and TPR at low FPR. Loss, confidence and φ = log(p_y/(1−p_y)) rank the samples
//      identically (attacks/target.h), so one sweep serves all three.
// With "client_model": "rounds" (the client-level observer: every upload of the client
// target) a sample's score is the mean over the uploads of φ(upload) − φ(the global model
// the server sent that round) ("round_statistic": "gain", default) or of φ(upload)
// ("confidence"), the shadow's too (so the confidence threshold and the
// sweep are on that gain), and its loss the mean of the uploads' losses (Yeom's τ: their
// mean training loss).
// The headline is the sweep's AUC; balanced_accuracy and the confusion metrics are those
// of the shadow-chosen confidence threshold (1.).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attacks/target.h"
#include "core/clock.h"
#include "core/jsonv.h"

static const char *const basic_keys[] = {"name", MIA_TARGET_KEYS, "shadow_size", NULL};

static FpStatus basic_validate(const AttackEnv *env, FpError *err) {
    FP_TRY(jv_keys(env->attack_json, env->path, basic_keys, err));
    MiaTargetConfig cfg;
    MiaSizes sz;
    long long s;
    int size;
    FP_TRY(mia_target_parse(env, &cfg, err));
    FP_TRY(mia_sizes(env, &cfg, &sz, err));
    FP_TRY(jv_int(env->attack_json, env->path, "shadow_size", JV_OPTIONAL, 0, 0, 1 << 30, &s, err));
    return mia_shadow_size(env, &sz, s, 1, &size, err);
}

// The target, one shadow model, and a forward pass over the eval and shadow sets.
static FpStatus basic_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    MiaTargetConfig cfg;
    MiaSizes sz;
    long long s;
    int size;
    FP_TRY(mia_target_parse(env, &cfg, err));
    FP_TRY(mia_sizes(env, &cfg, &sz, err));
    FP_TRY(jv_int(env->attack_json, env->path, "shadow_size", JV_OPTIONAL, 0, 0, 1 << 30, &s, err));
    FP_TRY(mia_shadow_size(env, &sz, s, 1, &size, err));
    *w = (AttackWork){.target_samples = (uint64_t)sz.n_train, .shadow_samples = (uint64_t)size,
                      .passes = 2 * (uint64_t)sz.members + 2 * (uint64_t)size};
    return FP_OK;
}

static double normal_logpdf0(double x, double sd) { return -0.5 * (x / sd) * (x / sd) - log(sd); }

static FpStatus basic_run(const AttackEnv *env, cJSON *result, FpError *err) {
    MiaTargetConfig cfg;
    MiaSizes sz;
    long long req;
    int shadow_size;
    FP_TRY(mia_target_parse(env, &cfg, err));
    FP_TRY(mia_sizes(env, &cfg, &sz, err));
    FP_TRY(jv_int(env->attack_json, env->path, "shadow_size", JV_OPTIONAL, 0, 0, 1 << 30, &req, err));
    FP_TRY(mia_shadow_size(env, &sz, req, 1, &shadow_size, err));
    MiaTarget *t;
    FP_TRY(mia_target_acquire(env, &cfg, &t, err));
    FpStatus st = mia_target_shadow(env, t, shadow_size, err);
    if (st != FP_OK) {
        mia_target_release(env, t);
        return st;
    }
    double t0 = fp_monotonic_seconds();
    const Dataset *d = env->ex->train;
    int C = t->n_classes, M = t->sz.members, n = 2 * M, ns = 2 * t->shadow_n;
    double *score = malloc(sizeof(double) * (size_t)(n > ns ? n : ns));
    double *loss = malloc(sizeof(double) * (size_t)n);
    int32_t *label = malloc(sizeof(int32_t) * (size_t)(n > ns ? n : ns));
    unsigned char *dec = malloc((size_t)n);
    if (!score || !loss || !label || !dec) {
        st = fp_fail(err, FP_ENOMEM, "out of memory");
        goto out;
    }
    // client_model "rounds": every upload of the client scores each sample by the round
    // statistic (mia_rounds_phi: its gain φ(upload) − φ(start) over the global model the
    // server sent, or φ(upload)), averaged over the uploads; its loss is the mean of the uploads' losses. The shadow's
    // rows likewise: every upload of its own client, and its start.
    int rounds = cfg.view == MIA_CLIENT_ROUNDS, R = rounds ? t->rounds.n : 1, nmax = n > ns ? n : ns;
    float *zr = rounds ? malloc(sizeof(float) * (size_t)n * MIA_ROUND_ROWS * R * C) : NULL;
    double *gain = rounds ? malloc(sizeof(double) * (size_t)nmax * R) : NULL;
    int32_t *ys = malloc(sizeof(int32_t) * (size_t)nmax);
    if (!ys || (rounds && (!zr || !gain)))
        st = fp_fail(err, FP_ENOMEM, "out of memory");
    else if (rounds)
        st = mia_rounds_logits(t->model, &t->rounds, d, t->eval_idx, n, 1, 0, env->ex->threads, zr, err);
    if (st != FP_OK) {
        free(zr);
        free(gain);
        free(ys);
        goto out;
    }
    // 1. τ on the shadow model's members (label 1) and shadow-out samples (label 0).
    for (int i = 0; i < ns; i++)
        ys[i] = d->y[t->shadow_idx[i]];
    if (rounds)
        mia_rounds_phi(t->shadow_logits, ns, R, 1, C, ys, cfg.round_statistic, gain);
    for (int i = 0; i < ns; i++) {
        score[i] = 0;
        for (int r = 0; r < R; r++)
            score[i] += (rounds ? gain[(size_t)i * R + r] : mia_phi(t->shadow_logits + (size_t)i * C, C, ys[i])) / R;
        label[i] = i < t->shadow_n;
    }
    double shadow_acc;
    double tau_phi = mia_best_threshold(score, label, ns, &shadow_acc);
    // The target's eval samples: members first, then non-members.
    for (int i = 0; i < n; i++)
        ys[i] = d->y[t->eval_idx[i]];
    if (rounds)
        mia_rounds_phi(zr, n, R, 1, C, ys, cfg.round_statistic, gain);
    for (int i = 0; i < n; i++) {
        if (rounds) {
            score[i] = loss[i] = 0;
            for (int r = 0; r < R; r++) {
                score[i] += gain[(size_t)i * R + r] / R;
                loss[i] += mia_loss_of_phi(mia_phi(zr + (((size_t)i * R + r) * MIA_ROUND_ROWS) * C, C, ys[i])) / R;
            }
        } else {
            score[i] = mia_phi(t->eval_logits + (size_t)i * C, C, ys[i]);
            loss[i] = mia_loss_of_phi(score[i]);
        }
        label[i] = i < M;
        dec[i] = score[i] >= tau_phi;
    }
    free(zr);
    free(gain);
    free(ys);
    char rule[320];
    if (rounds)
        snprintf(rule, sizeof rule, "member iff the mean over the client's uploads of %s >= %.9g, the threshold "
                 "with the best accuracy (%.4f) on the shadow federation's in/out data",
                 cfg.round_statistic == MIA_ROUND_GAIN ? "phi(upload) - phi(the model it started from)" : "phi(upload)",
                 tau_phi, shadow_acc);
    else
        snprintf(rule, sizeof rule, "member iff the true-label confidence p_y >= %.9g, the threshold with the best "
                 "accuracy (%.4f) on the shadow model's in/out data", 1.0 / (1.0 + exp(-tau_phi)), shadow_acc);
    st = mia_report(result, score, label, n, dec, 0, rule, err);
    if (st != FP_OK)
        goto out;
    cJSON *ct = cJSON_AddObjectToObject(result, "confidence_threshold");
    cJSON_AddNumberToObject(ct, "tau_confidence", 1.0 / (1.0 + exp(-tau_phi)));
    cJSON_AddNumberToObject(ct, "tau_logit", tau_phi);
    cJSON_AddNumberToObject(ct, "shadow_accuracy", shadow_acc);
    cJSON_AddNumberToObject(ct, "shadow_members", t->shadow_n);
    cJSON_AddNumberToObject(ct, "shadow_non_members", t->shadow_n);
    cJSON_AddNumberToObject(ct, "shadow_training_samples", t->shadow_size);
    cJSON_AddBoolToObject(mia_run_object(result), "shadow_read_from_disk_cache", t->shadow_loaded);
    cJSON_AddNumberToObject(ct, "shadow_test_accuracy", t->shadow_test_accuracy);
    // 2. Yeom: τ = mean training loss; Gaussian variant with the test loss.
    for (int i = 0; i < n; i++)
        dec[i] = loss[i] <= t->train_loss;
    cJSON *y = mia_decision_json(dec, label, n);
    cJSON_AddNumberToObject(y, "tau_loss", t->train_loss);
    cJSON_AddStringToObject(y, "rule", "member iff the per-example loss <= the target's mean training loss "
                                       "(Yeom et al. 2018)");
    cJSON_AddItemToObject(result, "yeom", y);
    double sd_in = t->train_loss > 1e-12 ? t->train_loss : 1e-12, sd_out = t->test_loss;
    for (int i = 0; i < n; i++)
        dec[i] = normal_logpdf0(loss[i], sd_in) >= normal_logpdf0(loss[i], sd_out);
    cJSON *g = mia_decision_json(dec, label, n);
    cJSON_AddNumberToObject(g, "train_loss", t->train_loss);
    cJSON_AddNumberToObject(g, "test_loss", t->test_loss);
    cJSON_AddStringToObject(g, "rule", "member iff N(0, train_loss).pdf(loss) >= N(0, test_loss).pdf(loss) "
                                       "(EvaluatingDPML's Gaussian variant)");
    cJSON_AddItemToObject(result, "yeom_gaussian", g);
    cJSON_AddStringToObject(result, "score", rounds ? cfg.round_statistic == MIA_ROUND_GAIN
                                                          ? "sweep of every threshold on the mean over the client's "
                                                            "uploads of phi(upload) - phi(the global model it started "
                                                            "from), phi = log(p_y/(1-p_y)): ROC, AUC and TPR at FPR"
                                                          : "sweep of every threshold on the mean over the client's "
                                                            "uploads of phi(upload), phi = log(p_y/(1-p_y)): ROC, AUC "
                                                            "and TPR at FPR"
                                                   : "sweep of every threshold on the true-label confidence "
                                                     "(equivalently -loss or log(p_y/(1-p_y))): ROC, AUC and TPR at FPR");
    mia_target_describe(t, result);
    mia_conclude(env, "basic-mia", result);
    cJSON *tm = cJSON_AddObjectToObject(result, "timing");
    cJSON_AddNumberToObject(tm, "target_train_seconds", t->train_seconds);
    cJSON_AddNumberToObject(tm, "shadow_train_seconds", t->shadow_seconds);
    cJSON_AddNumberToObject(tm, "attack_seconds", fp_monotonic_seconds() - t0);
out:
    free(score);
    free(loss);
    free(label);
    free(dec);
    mia_target_release(env, t);
    return st;
}

const AttackOps attack_basic_mia = {
    .name = "basic-mia",
    .summary = "membership: true-label confidence threshold (shadow-chosen), Yeom loss threshold, threshold sweep",
    .headline = "auc",
    .headline_higher_leaks = 1,
    .uses_reference = 1,
    .validate = basic_validate,
    .run = basic_run,
    .work = basic_work,
};
