// `rmia`: Robust Membership Inference Attack (Zarifzadeh, Liu & Shokri, ICML 2024, "Low-
// Cost High-Power Membership Inference Attacks"; ML Privacy Meter's reference code), over
// the reference models of attacks/target.h (shared with LiRA and cached on disk).
//
// Pr(q | θ) is the model's softmax probability of q's true label, p_y = sigmoid(φ)
// (from logits in double precision; its log is −softplus(−φ), exact where p_y rounds
// to 0 or 1). Pr(q) is its mean over reference models θ' (the paper's §3, Eq. 5):
//   online  (x a candidate; each candidate is IN for exactly half of the N models):
//           Pr(x) = ½ (Pr_IN(x) + Pr_OUT(x)), the means over its IN and its OUT models (the
//           mean over all N, unless a client of a reference federation never took part:
//           its records are OUT there; a candidate left without IN models takes the
//           offline approximation);
//   offline (no IN model exists): Pr(x) = ½ ((1 + a) Pr_OUT(x) + (1 − a)), the paper's
//           linear approximation Pr_IN(x) ≈ a Pr_OUT(x) + (1 − a) ("offline_a", a in [0, 1],
//           or "fit", the default: fitted on the reference models as ML Privacy Meter
//           does, see fit_offline_a; 0.3 when too few samples allow a fit), with
//           Pr_OUT(x) the mean over the models that did not train on x.
// The population samples z (fixed per target: the first "population" of a random order
// of the shadow pool, never seen by the target) have no IN models in either variant, so
// Pr(z) always takes the offline approximation, from the models that did not train on z
// (a z that every model trained on is left out of the population).
//
// The pairwise likelihood ratio (Eq. 3) and the score (Eq. 4):
//   LR_θ(x, z) = (Pr(x | θ) / Pr(x)) / (Pr(z | θ) / Pr(z)),
//   Score_MIA(x; θ) = Pr_z[LR_θ(x, z) ≥ γ]   ("gamma", default 1),
// the fraction of the population that x dominates by a factor γ; decision: member iff
// Score ≥ β ("beta", default 0.95: with γ = 1, a non-member exchangeable with the z
// samples has a Score uniform over the population's ranks, so β = 0.95 is a test of level
// about 5%, LiRA's default α). Computed in logs: Score(x) is the fraction of z with
// log r(z) ≤ log r(x) − log γ, r(q) = Pr(q | θ) / Pr(q), by binary search in the sorted
// log r(z). So for one target the score is the population's empirical CDF at r(x)/γ:
// monotone in r(x), and the ROC of Score is that of r(x) up to the ties of the CDF's
// steps (reported beside it as "ratio_without_population"). γ and the population move the
// decision threshold and the resolution, not the ranking.
//
// Deviations: ML Privacy Meter computes Pr(x) from OUT models only, with the offline
// approximation, in both settings; we use the paper's online definition (all models) for
// candidates. Privacy Meter tunes a on a paired reference model's own training data and
// the rest of its population; ours are the population queries (reference model 0's
// member set among them), so a small target whose reference models train on a sliver of
// the pool may leave too few to fit (the result says so and keeps a = 0.3).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attacks/target.h"
#include "core/clock.h"
#include "core/jsonv.h"
#include "eval/roc.h"

// a's grid (ML Privacy Meter tunes it on 0, 0.01, ..., 1) and the fewest members and
// non-members of the held-out reference model a fit needs among the population queries.
#define RMIA_A_GRID 100
#define RMIA_A_FIT_MIN 20
#define RMIA_A_DEFAULT 0.3

static const char *const rmia_keys[] = {"name",       MIA_TARGET_KEYS, "variant", "shadow_models", "shadow_size",
                                        "population", "gamma",         "beta",    "offline_a",     NULL};
static const char *const variant_names[] = {"offline", "online", NULL};

typedef struct {
    MiaTargetConfig cfg;
    MiaSizes sz;
    MiaRefKind variant;
    int n_models, shadow_size, population;
    int fit_a;             // "offline_a": "fit" (the default): fitted on the reference models
    double gamma, beta, a;
} RmiaOptions;

static FpStatus rmia_options(const AttackEnv *env, RmiaOptions *o, FpError *err) {
    const cJSON *j = env->attack_json;
    char p[256];
    FP_TRY(jv_keys(j, env->path, rmia_keys, err));
    FP_TRY(mia_target_parse(env, &o->cfg, err));
    FP_TRY(mia_one_model_only(env, &o->cfg, "rmia", err));
    FP_TRY(mia_sizes(env, &o->cfg, &o->sz, err));
    long long v;
    int c;
    FP_TRY(jv_choice(j, env->path, "variant", variant_names, MIA_REF_OFFLINE, &c, err));
    o->variant = (MiaRefKind)c;
    FP_TRY(jv_int(j, env->path, "shadow_models", JV_OPTIONAL, 4, 1, 4096, &v, err));
    o->n_models = (int)v;
    FP_TRY(jv_int(j, env->path, "shadow_size", JV_OPTIONAL, 0, 0, 1 << 30, &v, err));
    FP_TRY(mia_shadow_size(env, &o->sz, v, 0, &o->shadow_size, err));
    int dflt = o->sz.pool < MIA_POPULATION_DEFAULT ? o->sz.pool : MIA_POPULATION_DEFAULT;
    FP_TRY(jv_int(j, env->path, "population", JV_OPTIONAL, dflt, 1, 1 << 30, &v, err));
    if (v > o->sz.pool)
        return fp_fail(err, FP_EPARAM, "%s: %lld population samples asked for, the shadow pool holds %d (dataset %d = "
                       "target training %d + eval non-members %d + ...)", jv_path(p, sizeof p, env->path, "population"),
                       v, o->sz.pool, o->sz.n_data, o->sz.n_train, o->sz.members);
    o->population = (int)v;
    FP_TRY(jv_number(j, env->path, "gamma", JV_OPTIONAL, 1.0, 0, 1, 1e6, 0, &o->gamma, err));
    FP_TRY(jv_number(j, env->path, "beta", JV_OPTIONAL, 0.95, 0, 0, 1, 0, &o->beta, err));
    const cJSON *aj = cJSON_GetObjectItemCaseSensitive(j, "offline_a");
    o->fit_a = !aj || (cJSON_IsString(aj) && strcmp(aj->valuestring, "fit") == 0);
    o->a = RMIA_A_DEFAULT;
    if (aj && !o->fit_a && !cJSON_IsNumber(aj))
        return fp_fail(err, FP_EPARAM, "%s: must be a number in [0, 1] or \"fit\"",
                       jv_path(p, sizeof p, env->path, "offline_a"));
    if (!o->fit_a)
        FP_TRY(jv_number(j, env->path, "offline_a", JV_OPTIONAL, RMIA_A_DEFAULT, 0, 0, 1, 0, &o->a, err));
    if (o->variant == MIA_REF_ONLINE)
        FP_TRY(mia_online_check(env, &o->cfg, &o->sz, o->n_models, o->shadow_size, err));
    return FP_OK;
}

static FpStatus rmia_validate(const AttackEnv *env, FpError *err) {
    RmiaOptions o;
    return rmia_options(env, &o, err);
}

// log(e^x + e^y) with −∞ allowed.
static double log_add_exp(double x, double y) {
    double m = x > y ? x : y;
    if (m == -INFINITY)
        return -INFINITY;
    return m + log(exp(x - m) + exp(y - m));
}

// log p_y = −softplus(−φ) from a row of logits.
static double log_prob(const float *z, int C, int y) {
    double phi = mia_phi(z, C, y);
    return phi > 0 ? -log1p(exp(-phi)) : phi - log1p(exp(phi));
}

// log of the mean of Pr(q | θ′) over the models whose member code for q is `code`
// (*count of them; -INFINITY when none).
static double log_mean(const double *lp, const unsigned char *member, int n_query, int N, int code, int *count) {
    double lse = -INFINITY;
    int k = 0;
    for (int j = 0; j < N; j++)
        if (member[(size_t)j * n_query] == code) {
            lse = log_add_exp(lse, lp[j]);
            k++;
        }
    *count = k;
    return k ? lse - log((double)k) : -INFINITY;
}

// log Pr(q) from the reference models' log p_y of query q (Eq. 5): with IN and OUT models
// (online candidates) ½ (Pr_IN + Pr_OUT), else the offline approximation
// ½ ((1 + a) Pr_OUT + (1 − a)). *count: the models used; 0 (and -INFINITY) when no model
// is OUT for q.
static double log_pr(const double *lp, const unsigned char *member, int n_query, int N, int online, double a,
                     int *count) {
    int k_out, k_in = 0;
    double l_out = log_mean(lp, member, n_query, N, MIA_Q_OUT, &k_out);
    double l_in = online ? log_mean(lp, member, n_query, N, MIA_Q_IN, &k_in) : -INFINITY;
    *count = k_out ? k_out + k_in : 0;
    if (!k_out)
        return -INFINITY;
    if (k_in)
        return log_add_exp(l_in, l_out) - log(2.0);
    // ½ ((1 + a) m + (1 − a)) in logs (a = 1: m itself).
    return log_add_exp(log1p(a) + l_out, a < 1 ? log1p(-a) : -INFINITY) - log(2.0);
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

// How many of the sorted v[0..n) are <= x.
static int count_le(const double *v, int n, double x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (v[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

FpStatus mia_rmia_scores(const double *lp_target, const double *lp_refs, const unsigned char *member, int n, int Z,
                         int N, int online, double a, double gamma, double *score, double *log_ratio,
                         int *population_used, FpError *err) {
    int Q = n + Z;
    double *lp = malloc(sizeof(double) * (size_t)(N ? N : 1)), *lr_z = malloc(sizeof(double) * (size_t)(Z ? Z : 1));
    if (!lp || !lr_z) {
        free(lp);
        free(lr_z);
        return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    // log r(q) = log Pr(q | θ) − log Pr(q) for the candidates, then the population.
    int Zu = 0; // the population samples some model did not train on
    for (int q = 0; q < Q; q++) {
        int k, candidate = q < n;
        for (int j = 0; j < N; j++)
            lp[j] = lp_refs[(size_t)j * Q + q];
        double lpr = log_pr(lp, member + q, Q, N, online && candidate, a, &k);
        if (candidate && !k) { // the design keeps every candidate OUT of the offline models and half the online ones
            free(lp);
            free(lr_z);
            return fp_fail(err, FP_EPARAM, "rmia: candidate %d has no reference model to compare with", q);
        }
        if (candidate)
            log_ratio[q] = lp_target[q] - lpr;
        else if (k)
            lr_z[Zu++] = lp_target[q] - lpr;
    }
    free(lp);
    *population_used = Zu;
    if (Zu == 0) {
        free(lr_z);
        return fp_fail(err, FP_EPARAM, "rmia: every population sample was in the training set of every reference "
                       "model (raise the population or lower shadow_size)");
    }
    qsort(lr_z, (size_t)Zu, sizeof(double), cmp_double);
    double lg = log(gamma);
    for (int i = 0; i < n; i++)
        score[i] = (double)count_le(lr_z, Zu, log_ratio[i] - lg) / Zu;
    free(lr_z);
    return FP_OK;
}

// a fitted on the reference models as ML Privacy Meter does (its offline tuning of a):
// reference model 0 plays the target and models 1..N−1 the references; for each a on
// the grid 0, 1/RMIA_A_GRID, ..., 1 the AUC of log r(x) = log Pr(x | θ_0) − log Pr(x)
// (Pr(x) by the offline approximation from the models 1..N−1 that did not train on x;
// with a fixed population Score_MIA ranks like r) over the population queries, members
// those in θ_0's member set and non-members those θ_0 never trained on. The a of the
// best AUC is kept (the smallest on ties). *members and *non_members count the fit's
// samples; below RMIA_A_FIT_MIN of either (or N < 2) nothing is fitted: returns 0.
static int fit_offline_a(const double *lp_r, const unsigned char *member, int n, int Z, int N, double *a_out,
                         double *auc_out, int *members, int *non_members) {
    int Q = n + Z, k = 0, m = 0;
    *members = *non_members = 0;
    if (N < 2)
        return 0;
    double *lp = malloc(sizeof(double) * (size_t)N);
    double *score = malloc(sizeof(double) * (size_t)Z);
    int *label = malloc(sizeof(int) * (size_t)Z), *q_of = malloc(sizeof(int) * (size_t)Z);
    int ok = lp && score && label && q_of;
    for (int q = n; ok && q < Q; q++) {
        unsigned char c = member[q]; // model 0's code
        int k_out = 0;
        for (int j = 1; j < N; j++)
            k_out += member[(size_t)j * Q + q] == MIA_Q_OUT;
        if ((c != MIA_Q_IN && c != MIA_Q_OUT) || !k_out)
            continue;
        label[k] = c == MIA_Q_IN;
        m += label[k];
        q_of[k++] = q;
    }
    *members = m;
    *non_members = k - m;
    ok = ok && m >= RMIA_A_FIT_MIN && k - m >= RMIA_A_FIT_MIN;
    double best = -1;
    for (int g = 0; ok && g <= RMIA_A_GRID; g++) {
        double a = (double)g / RMIA_A_GRID;
        for (int i = 0; i < k; i++) {
            int q = q_of[i], used;
            for (int j = 1; j < N; j++)
                lp[j - 1] = lp_r[(size_t)j * Q + q];
            score[i] = lp_r[q] - log_pr(lp, member + Q + q, Q, N - 1, 0, a, &used);
        }
        Roc roc;
        if (roc_compute(score, label, k, &roc, NULL) != FP_OK) {
            ok = 0;
            break;
        }
        if (roc.auc > best) {
            best = roc.auc;
            *a_out = a;
        }
        roc_free(&roc);
    }
    *auc_out = best;
    free(lp);
    free(score);
    free(label);
    free(q_of);
    return ok;
}

static FpStatus rmia_run(const AttackEnv *env, cJSON *result, FpError *err) {
    RmiaOptions o;
    FP_TRY(rmia_options(env, &o, err));
    MiaTarget *t;
    FP_TRY(mia_target_acquire(env, &o.cfg, &t, err));
    MiaRefSet before = t->refs[o.variant];
    FpStatus st = mia_target_population(env, t, o.population, err);
    if (st == FP_OK) {
        before = t->refs[o.variant]; // a grown population may have dropped the models
        st = mia_target_references(env, t, o.variant, o.n_models, o.shadow_size, 0, err); // any views: it reads view 0
    }
    if (st != FP_OK) {
        mia_target_release(env, t);
        return st;
    }
    double t0 = fp_monotonic_seconds();
    const Dataset *d = env->ex->train;
    const MiaRefSet *rs = &t->refs[o.variant];
    int C = t->n_classes, M = t->sz.members, n = 2 * M, N = o.n_models, Q = t->n_query, Z = o.population, Zu = 0;
    int V = rs->views; // RMIA reads each query's view 0: the sample itself
    int online = o.variant == MIA_REF_ONLINE, Qa = n + Z; // the queries this attack reads: a prefix of Q
    double *lp_t = malloc(sizeof(double) * (size_t)Qa), *lp_r = malloc(sizeof(double) * (size_t)N * Qa);
    unsigned char *member = malloc((size_t)N * Qa);
    double *lr_x = malloc(sizeof(double) * (size_t)n), *score = malloc(sizeof(double) * (size_t)n);
    int32_t *label = malloc(sizeof(int32_t) * (size_t)n);
    unsigned char *dec = malloc((size_t)n);
    if (!lp_t || !lp_r || !member || !lr_x || !score || !label || !dec) {
        st = fp_fail(err, FP_ENOMEM, "out of memory");
        goto out;
    }
    for (int q = 0; q < Qa; q++) {
        int y = d->y[t->query_idx[q]];
        lp_t[q] = log_prob(q < n ? t->eval_logits + (size_t)q * C : t->pop_logits + (size_t)(q - n) * C, C, y);
        for (int j = 0; j < N; j++) {
            lp_r[(size_t)j * Qa + q] = log_prob(rs->logits + ((size_t)j * Q + q) * V * C, C, y); // view 0
            member[(size_t)j * Qa + q] = rs->member[(size_t)j * Q + q];
        }
    }
    int fit_members = 0, fit_non = 0, fitted = 0;
    double fit_auc = NAN;
    if (o.fit_a)
        fitted = fit_offline_a(lp_r, member, n, Z, N, &o.a, &fit_auc, &fit_members, &fit_non);
    st = mia_rmia_scores(lp_t, lp_r, member, n, Z, N, online, o.a, o.gamma, score, lr_x, &Zu, err);
    if (st != FP_OK)
        goto out;
    for (int i = 0; i < n; i++) {
        label[i] = i < M;
        dec[i] = score[i] >= o.beta;
    }
    char rule[200];
    snprintf(rule, sizeof rule, "member iff Score_MIA = Pr_z[LR(x, z) >= %g] >= %g", o.gamma, o.beta);
    st = mia_report(result, score, label, n, dec, 0, rule, err);
    if (st != FP_OK)
        goto out;
    cJSON_AddStringToObject(result, "score", "Score_MIA(x) = fraction of population samples z with "
                                             "(Pr(x|target)/Pr(x)) / (Pr(z|target)/Pr(z)) >= gamma");
    cJSON_AddStringToObject(result, "variant", online ? "online" : "offline");
    cJSON_AddNumberToObject(result, "shadow_models", N);
    cJSON_AddNumberToObject(result, "shadow_size", o.shadow_size);
    cJSON_AddNumberToObject(result, "gamma", o.gamma);
    cJSON_AddNumberToObject(result, "beta", o.beta);
    cJSON_AddNumberToObject(result, "offline_a", o.a);
    cJSON *af = cJSON_AddObjectToObject(result, "offline_a_fit");
    if (!o.fit_a)
        cJSON_AddStringToObject(af, "rule", "given (\"offline_a\")");
    else {
        cJSON_AddStringToObject(af, "rule", "the best AUC on a grid of 0.01 with reference model 0 as the target and "
                                            "the others as references, over the population queries (ML Privacy "
                                            "Meter's tuning)");
        cJSON_AddBoolToObject(af, "fitted", fitted);
        cJSON_AddNumberToObject(af, "members", fit_members);
        cJSON_AddNumberToObject(af, "non_members", fit_non);
        if (fitted)
            cJSON_AddNumberToObject(af, "auc", fit_auc);
        else {
            char why[200];
            snprintf(why, sizeof why, "%s: a = %g kept", N < 2 ? "one reference model leaves none to fit on"
                                                              : "fewer than 20 members or non-members of reference "
                                                                "model 0 among the population queries", RMIA_A_DEFAULT);
            cJSON_AddStringToObject(af, "reason", why);
        }
    }
    cJSON_AddStringToObject(result, "offline_a_applies_to", online ? "the population samples (no IN models)"
                                                                   : "candidates and population samples");
    cJSON_AddNumberToObject(result, "population", Z);
    cJSON_AddNumberToObject(result, "population_used", Zu);
    double acc = 0;
    for (int j = 0; j < N; j++)
        acc += rs->test_accuracy[j];
    cJSON_AddNumberToObject(result, "shadow_test_accuracy_mean", acc / N);
    // The ranking of r(x) alone: what the population's CDF resolves (see the banner).
    cJSON *base = cJSON_CreateObject();
    st = mia_report(base, lr_x, label, n, NULL, INFINITY, "none (the sweep only)", err);
    if (st != FP_OK) {
        cJSON_Delete(base);
        goto out;
    }
    cJSON *cmp = cJSON_AddObjectToObject(result, "ratio_without_population");
    cJSON_AddStringToObject(cmp, "score", "log(Pr(x|target) / Pr(x)) (Score_MIA is monotone in it)");
    cJSON_AddItemToObject(cmp, "auc", cJSON_Duplicate(cJSON_GetObjectItem(base, "auc"), 1));
    cJSON_AddItemToObject(cmp, "tpr_at_fpr", cJSON_Duplicate(cJSON_GetObjectItem(base, "tpr_at_fpr"), 1));
    cJSON_Delete(base);
    mia_target_describe(t, result);
    mia_references_describe(t, o.variant, N, &before, result);
    mia_conclude(env, "rmia", result);
    cJSON *tm = cJSON_AddObjectToObject(result, "timing");
    cJSON_AddNumberToObject(tm, "target_train_seconds", t->train_seconds);
    cJSON_AddNumberToObject(tm, "shadow_train_seconds", rs->seconds);
    cJSON_AddNumberToObject(tm, "attack_seconds", fp_monotonic_seconds() - t0);
out:
    free(lp_t);
    free(lp_r);
    free(member);
    free(lr_x);
    free(score);
    free(label);
    free(dec);
    mia_target_release(env, t);
    return st;
}

const AttackOps attack_rmia = {
    .name = "rmia",
    .summary = "membership: RMIA, pairwise likelihood ratio against population samples (offline or online reference "
               "models)",
    .headline = "auc",
    .headline_higher_leaks = 1,
    .uses_reference = 1,
    .validate = rmia_validate,
    .run = rmia_run,
};
