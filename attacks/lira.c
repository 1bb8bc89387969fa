// `lira`: the Likelihood Ratio Attack (Carlini et al., S&P'22, "Membership Inference
// Attacks From First Principles", §IV-C online and §VI offline; TF Privacy
// research/mi_lira_2021), over the reference models of attacks/target.h (shared with
// RMIA and cached on disk).
//
// Every reference model is trained exactly like the target (same fl/ procedure, defense
// and settings, fresh seeds). For candidate x with label y, each gives the logit-scaled
// confidence
//     φ = log(p_y / (1 − p_y))   (from logits: z_y − logsumexp_{c≠y} z_c).
//
// "variant": "offline" (default): N OUT models on random shadow_size-subsets of the
// shadow pool, which excludes every eval sample. A Gaussian N(μ_x, σ_x²) is fitted to the
// N values (mean and population standard deviation), and the one-sided test asks how
// unlikely the target's φ_obs is under it:
//     p-value = Pr[Z ≥ φ_obs],  Z ~ N(μ_x, σ_x²),   member when p is small.
// Score: z = (φ_obs − μ_x) / σ_x. 1 − p = Φ(z) is monotone in z, so the ROC is that of
// the paper's Λ = 1 − Pr[Z > φ_obs], without Φ saturating at 1 in floating point.
// Decision: member iff p <= alpha (default 0.05), i.e. z >= Φ⁻¹(1 − alpha).
//
// "variant": "online": N models (N even), each candidate IN for exactly N/2 of them (the
// paper's 50% inclusion, as balanced as its reference code makes it; fewer when a client of
// a reference federation never took part, as its records are OUT there). Per candidate
// Gaussians are fitted to the IN values, N(μ_in, σ_in²), and to the OUT values,
// N(μ_out, σ_out²); the score is the log likelihood ratio (the paper's Algorithm 1)
//     log Λ = log N(φ_obs; μ_in, σ_in²) − log N(φ_obs; μ_out, σ_out²),
// and the decision is Λ >= 1 (the more likely hypothesis at equal priors: the eval set is
// balanced).
//
// "variance": "per-sample" (σ per candidate and hypothesis, default) or "fixed" (one σ
// for all candidates and both hypotheses: the square root of the mean of the
// per-candidate variances, the paper's global variance for few models). Deviations from
// the reference code, which centres on the median and, with fix_variance, takes np.std
// over all candidates' values together (so the between-candidate spread of μ enters σ):
// we fit the Gaussians by their maximum-likelihood means and pool the within-candidate
// variances.
//
// "offline_score": "one-sided" (default, the paper's §VI test above) or "two-sided", the
// reference code's offline score (plot.py generate_ours_offline): −log N(φ_obs; μ_out,
// σ_out²), far from the OUT values on either side.
//
// "augment" (default false): the paper's augmented queries on image data: each candidate
// in 18 views (the sample and its mirror at 9 shifts, attacks/mia.h mia_query_views),
// one Gaussian per view, the views' scores averaged (the reference code's mean over
// augmentations). Off by default: fedpriv's training augments nothing, so the views are
// other inputs to the model and dilute the sample's own signal (docs/attacks-mia.md
// measures it).
//
// "client_model": "rounds" (client target: the client-level observer, the server's view of
// the client over every round it took part in). Each upload is scored as one more group
// of views, its value being φ(upload) − φ(the global model the server sent that round)
// ("round_statistic": "gain", the default: the server knows both, and the difference
// leaves what the client's own training did to the sample) or φ(upload) ("confidence";
// mia_rounds_phi). Per candidate, upload and view a Gaussian is
// fitted to the reference models' values on their own upload of that round (a client
// target's reference federations
// replay the target's participants, so the client uploads in the same rounds after the
// same global updates), and the scores are averaged over uploads and views. Offline that
// is Stouffer's combination of the per-upload z (up to √R), online the log likelihood
// ratio summed over the uploads (up to 1/R): Carlini et al.'s test on each uploaded
// model, combined over the rounds as Nasr et al. (S&P'19, §V passive white-box) combine
// an observer's epochs.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attacks/target.h"
#include "core/clock.h"
#include "core/jsonv.h"

static const char *const lira_keys[] = {"name",  MIA_TARGET_KEYS, "variant", "shadow_models", "shadow_size",
                                        "variance", "alpha", "augment", "offline_score", NULL};
static const char *const offline_score_names[] = {"one-sided", "two-sided", NULL};
static const char *const variance_names[] = {"per-sample", "fixed", NULL};
static const char *const variant_names[] = {"offline", "online", NULL};

typedef struct {
    MiaTargetConfig cfg;
    MiaSizes sz;
    int n_models, shadow_size, fixed_variance, augment, two_sided;
    MiaRefKind variant;
    double alpha;
} LiraOptions;

static FpStatus lira_options(const AttackEnv *env, LiraOptions *o, FpError *err) {
    const cJSON *j = env->attack_json;
    FP_TRY(jv_keys(j, env->path, lira_keys, err));
    FP_TRY(mia_target_parse(env, &o->cfg, err));
    FP_TRY(mia_sizes(env, &o->cfg, &o->sz, err));
    long long v;
    int c;
    FP_TRY(jv_choice(j, env->path, "variant", variant_names, MIA_REF_OFFLINE, &c, err));
    o->variant = (MiaRefKind)c;
    FP_TRY(jv_int(j, env->path, "shadow_models", JV_OPTIONAL, 16, 2, 4096, &v, err));
    o->n_models = (int)v;
    FP_TRY(jv_int(j, env->path, "shadow_size", JV_OPTIONAL, 0, 0, 1 << 30, &v, err));
    FP_TRY(mia_shadow_size(env, &o->sz, v, 0, &o->shadow_size, err));
    FP_TRY(jv_choice(j, env->path, "variance", variance_names, 0, &o->fixed_variance, err));
    FP_TRY(jv_number(j, env->path, "alpha", JV_OPTIONAL, 0.05, 0, 1, 1, 1, &o->alpha, err));
    FP_TRY(jv_bool(j, env->path, "augment", 0, &o->augment, err));
    FP_TRY(jv_choice(j, env->path, "offline_score", offline_score_names, 0, &o->two_sided, err));
    char p[256];
    if (o->two_sided && cJSON_GetObjectItemCaseSensitive(j, "alpha"))
        return fp_fail(err, FP_EPARAM, "%s: the two-sided offline score decides at the fixed level 0.05 (alpha "
                       "sets the one-sided test's)", jv_path(p, sizeof p, env->path, "alpha"));
    if (o->variant == MIA_REF_ONLINE) {
        if (cJSON_GetObjectItemCaseSensitive(j, "offline_score"))
            return fp_fail(err, FP_EPARAM, "%s: only the offline variant has a one- or two-sided score",
                           jv_path(p, sizeof p, env->path, "offline_score"));
        if (cJSON_GetObjectItemCaseSensitive(j, "alpha"))
            return fp_fail(err, FP_EPARAM, "%s: only the offline variant's one-sided test has a level alpha (the "
                           "online variant decides by the likelihood ratio)", jv_path(p, sizeof p, env->path, "alpha"));
        FP_TRY(mia_online_check(env, &o->cfg, &o->sz, o->n_models, o->shadow_size, err));
    }
    return FP_OK;
}

static FpStatus lira_validate(const AttackEnv *env, FpError *err) {
    LiraOptions o;
    return lira_options(env, &o, err);
}

// The target, N OUT shadow models, each scored on the eval samples.
static FpStatus lira_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    LiraOptions o;
    FP_TRY(lira_options(env, &o, err));
    *w = (AttackWork){.target_samples = (uint64_t)o.sz.n_train,
                      .shadow_samples = (uint64_t)o.n_models * (uint64_t)o.shadow_size,
                      .passes = ((uint64_t)o.n_models + 1) * 2 * (uint64_t)o.sz.members};
    return FP_OK;
}

// Φ⁻¹(q) by bisection on Φ(z) = ½ erfc(−z/√2) (only a decision threshold; 1e-12 is ample).
static double normal_quantile(double q) {
    double lo = -40, hi = 40;
    for (int it = 0; it < 200 && hi - lo > 1e-12; it++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / sqrt(2.0)) < q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

// A floor on σ: a candidate whose values coincide (e.g. a saturated float) would
// otherwise divide by zero; 1e-6 in φ units is far below any real spread.
static double sd_floor(double var) {
    double sd = sqrt(var);
    return sd > 1e-6 ? sd : 1e-6;
}

static double normal_logpdf(double x, double mu, double sd) {
    double u = (x - mu) / sd;
    return -0.5 * u * u - log(sd);
}

// Mean and population variance of the values v[j·stride] of the models whose member
// code (member[j·n]) is `code`; the count is returned.
static int moments(const double *v, size_t stride, const unsigned char *member, int n, int N, int code, double *mu,
                   double *var) {
    double s = 0, ss = 0;
    int k = 0;
    for (int j = 0; j < N; j++)
        if (member[(size_t)j * n] == code) {
            s += v[(size_t)j * stride];
            k++;
        }
    *mu = k ? s / k : NAN;
    for (int j = 0; j < N; j++)
        if (member[(size_t)j * n] == code) {
            double e = v[(size_t)j * stride] - *mu;
            ss += e * e;
        }
    *var = k ? ss / k : NAN;
    return k;
}

FpStatus mia_lira_scores(const double *phi_obs, const double *phi_refs, const unsigned char *member, int n, int N,
                         const MiaLiraScoring *how, double *score, double *pooled_sigma, FpError *err) {
    int A = how->n_aug > 0 ? how->n_aug : 1, online = how->online;
    size_t stride = (size_t)n * A; // model j's values start at j·n·A
    // Per candidate, view and hypothesis (OUT: 2c, IN: 2c + 1, c = i·A + a): mean and variance of φ.
    size_t cells = (size_t)n * A;
    double *mu = malloc(sizeof(double) * 2 * cells), *var = malloc(sizeof(double) * 2 * cells);
    if (!mu || !var) {
        free(mu);
        free(var);
        return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    double pooled = 0;
    for (int i = 0; i < n; i++)
        for (int a = 0; a < A; a++) {
            size_t c = (size_t)i * A + a;
            int k_out = moments(phi_refs + c, stride, member + i, n, N, MIA_Q_OUT, &mu[2 * c], &var[2 * c]);
            int k_in = moments(phi_refs + c, stride, member + i, n, N, MIA_Q_IN, &mu[2 * c + 1], &var[2 * c + 1]);
            // The designs: offline, never IN; online, IN for half the models, fewer when a
            // client of a reference federation never took part (its records are OUT there),
            // but at least one of each.
            if (k_out + k_in != N || (online ? k_in < 1 || k_out < 1 || k_in > N / 2 : k_in != 0)) {
                free(mu);
                free(var);
                return fp_fail(err, FP_EPARAM, "lira: candidate %d is IN for %d of %d reference models (%s)", i, k_in,
                               N, online ? "the online variant needs IN and OUT models for each: raise shadow_models, "
                                           "or federation.sample_rate so that reference clients take part"
                                         : "expected none");
            }
            pooled += (online ? 0.5 * (var[2 * c] + var[2 * c + 1]) : var[2 * c]) / (double)cells;
        }
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int a = 0; a < A; a++) {
            size_t c = (size_t)i * A + a;
            double x = phi_obs[c], sd_out = sd_floor(how->fixed_variance ? pooled : var[2 * c]);
            if (online) {
                double sd_in = sd_floor(how->fixed_variance ? pooled : var[2 * c + 1]);
                s += normal_logpdf(x, mu[2 * c + 1], sd_in) - normal_logpdf(x, mu[2 * c], sd_out);
            } else if (how->two_sided)
                s -= normal_logpdf(x, mu[2 * c], sd_out);
            else
                s += (x - mu[2 * c]) / sd_out;
        }
        score[i] = s / A;
    }
    *pooled_sigma = sqrt(pooled);
    free(mu);
    free(var);
    return FP_OK;
}

static FpStatus lira_run(const AttackEnv *env, cJSON *result, FpError *err) {
    LiraOptions o;
    FP_TRY(lira_options(env, &o, err));
    MiaTarget *t;
    FP_TRY(mia_target_acquire(env, &o.cfg, &t, err));
    MiaRefSet before = t->refs[o.variant];
    FpStatus st = mia_target_references(env, t, o.variant, o.n_models, o.shadow_size, o.augment ? t->n_views : 1, err);
    if (st != FP_OK) {
        mia_target_release(env, t);
        return st;
    }
    double t0 = fp_monotonic_seconds();
    const Dataset *d = env->ex->train;
    const MiaRefSet *rs = &t->refs[o.variant];
    int C = t->n_classes, M = t->sz.members, n = 2 * M, N = o.n_models, Q = t->n_query, V = rs->views;
    // The values per candidate: φ on each view scored (all of the data's with augment, or
    // the sample alone); for every upload (client_model "rounds") the round statistic on
    // each view of each upload (mia_rounds_phi: the gain φ(upload) − φ(start), or φ(upload)).
    int rounds = o.cfg.view == MIA_CLIENT_ROUNDS, R = rounds ? t->rounds.n : 1;
    int Va = rounds ? V / (MIA_ROUND_ROWS * R) : V, A = R * Va; // views of each model, values per candidate
    int online = o.variant == MIA_REF_ONLINE, two_sided = !online && o.two_sided;
    size_t cells = (size_t)n * A;
    double *phi_r = malloc(sizeof(double) * (size_t)N * cells), *phi = malloc(sizeof(double) * cells);
    double *phi0 = malloc(sizeof(double) * (size_t)n);
    float *zt = V > 1 ? malloc(sizeof(float) * (size_t)n * V * C) : NULL; // the target's logits on the views
    unsigned char *member = malloc((size_t)N * n);
    double *score = malloc(sizeof(double) * (size_t)n), pooled_sigma = 0;
    int32_t *label = malloc(sizeof(int32_t) * (size_t)n), *y = malloc(sizeof(int32_t) * (size_t)n);
    unsigned char *dec = malloc((size_t)n);
    if (!phi_r || !phi || !phi0 || (V > 1 && !zt) || !member || !score || !label || !y || !dec) {
        st = fp_fail(err, FP_ENOMEM, "out of memory");
        goto out;
    }
    if (V > 1 && (st = rounds ? mia_rounds_logits(t->model, &t->rounds, d, t->eval_idx, n, Va, t->view_shift,
                                                  env->ex->threads, zt, err)
                              : mia_logits_views(t->model, d, t->eval_idx, n, V, t->view_shift, env->ex->threads, zt,
                                                 err)) != FP_OK)
        goto out;
    for (int i = 0; i < n; i++) { // the candidates are the first n queries
        y[i] = d->y[t->eval_idx[i]];
        label[i] = i < M;
        for (int j = 0; j < N; j++)
            member[(size_t)j * n + i] = rs->member[(size_t)j * Q + i];
    }
    if (rounds) {
        for (int j = 0; j < N; j++)
            mia_rounds_phi(rs->logits + (size_t)j * Q * V * C, n, R, Va, C, y, o.cfg.round_statistic,
                           phi_r + (size_t)j * cells);
        mia_rounds_phi(zt, n, R, Va, C, y, o.cfg.round_statistic, phi);
    } else
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < N; j++)
                for (int a = 0; a < A; a++)
                    phi_r[((size_t)j * n + i) * A + a] = mia_phi(rs->logits + (((size_t)j * Q + i) * V + a) * C, C, y[i]);
            for (int a = 0; a < A; a++)
                phi[(size_t)i * A + a] =
                    mia_phi(A > 1 ? zt + ((size_t)i * A + a) * C : t->eval_logits + (size_t)i * C, C, y[i]);
        }
    for (int i = 0; i < n; i++) { // uncalibrated: the sample itself, averaged over the uploads
        phi0[i] = 0;
        for (int r = 0; r < R; r++)
            phi0[i] += phi[(size_t)i * A + (size_t)r * Va] / R;
    }
    MiaLiraScoring how = {.online = online, .fixed_variance = o.fixed_variance, .two_sided = two_sided, .n_aug = A};
    st = mia_lira_scores(phi, phi_r, member, n, N, &how, score, &pooled_sigma, err);
    if (st != FP_OK)
        goto out;
    // Decisions at level alpha. One-sided: z >= Φ⁻¹(1 − α) (for A views on their mean,
    // whose spread under OUT is at most one: at most level α). Two-sided: the score is
    // ½ z² + log σ_out per view; member iff ½ z² >= ½ Φ⁻¹(1 − α/2)² at σ_out = 1 (the
    // reference code has no decision rule; the sweep does not depend on this one).
    double z_alpha = normal_quantile(1.0 - o.alpha), z_half = normal_quantile(1.0 - o.alpha / 2);
    double lp_alpha = 0.5 * z_half * z_half;
    for (int i = 0; i < n; i++)
        dec[i] = online ? score[i] >= 0 : score[i] >= (two_sided ? lp_alpha : z_alpha);
    char rule[240];
    if (online)
        snprintf(rule, sizeof rule, "member iff the likelihood ratio N(phi; mu_in, sigma_in) / N(phi; mu_out, "
                                    "sigma_out) >= 1 (geometric mean over the %d views)", A);
    else if (two_sided)
        snprintf(rule, sizeof rule, "member iff the mean over the %d views of -log N(phi; mu_out, sigma_out) - log "
                                    "sqrt(2 pi) >= %.4f (|z| >= %.4f at sigma_out = 1, level %g)", A, lp_alpha, z_half,
                 o.alpha);
    else if (A > 1)
        snprintf(rule, sizeof rule, "member iff the mean over the %d views of z = (phi_obs - mu_out) / sigma_out >= "
                 "%.4f (the one-sided p-value Pr[Z >= phi_obs] <= %g for one view)", A, z_alpha, o.alpha);
    else
        snprintf(rule, sizeof rule, "member iff the one-sided p-value Pr[Z >= phi_obs] <= %g (z >= %.4f)", o.alpha,
                 z_alpha);
    st = mia_report(result, score, label, n, dec, 0, rule, err);
    if (st != FP_OK)
        goto out;
    cJSON_AddStringToObject(result, "score",
                            online ? "mean over the views of log N(phi_obs; mu_in, sigma_in^2) - log N(phi_obs; mu_out, "
                                     "sigma_out^2), phi = log(p_y / (1 - p_y))"
                            : two_sided ? "two-sided (the reference code's): mean over the views of -log N(phi_obs; "
                                          "mu_out, sigma_out^2), phi = log(p_y / (1 - p_y))"
                                        : "one-sided: mean over the views of z = (phi_obs - mu_out) / sigma_out, phi = "
                                          "log(p_y / (1 - p_y)); for one view monotone in 1 - p-value");
    cJSON *qv = cJSON_AddObjectToObject(result, "query_views");
    cJSON_AddNumberToObject(qv, "views", A);
    if (rounds) {
        cJSON_AddNumberToObject(qv, "uploads", R);
        cJSON_AddStringToObject(qv, "rounds", o.cfg.round_statistic == MIA_ROUND_GAIN
                                                  ? "every upload of the client: the value of each upload and view "
                                                    "is phi(upload) - phi(the global model it started from) "
                                                    "(round_statistic gain), the scores averaged over uploads and views"
                                                  : "every upload of the client: the value of each upload and view "
                                                    "is phi(upload) (round_statistic confidence), the scores "
                                                    "averaged over uploads and views");
    }
    cJSON_AddStringToObject(qv, "augment", Va > 1 ? "the sample and its left-right mirror, each at 9 shifts (dy, dx) in "
                                                   "{-s, 0, s}^2 with reflection padding"
                                                 : t->n_views > 1 ? "off (\"augment\": false, the default): the sample alone"
                                                                  : "the sample alone (not image data)");
    if (Va > 1)
        cJSON_AddNumberToObject(qv, "shift_pixels", t->view_shift);
    char variant[80];
    snprintf(variant, sizeof variant, "%s%s, %s variance", online ? "online" : "offline",
             online ? "" : two_sided ? " two-sided" : " one-sided", o.fixed_variance ? "fixed" : "per-sample");
    cJSON_AddStringToObject(result, "variant", variant);
    cJSON_AddNumberToObject(result, "shadow_models", N);
    cJSON_AddNumberToObject(result, "shadow_size", o.shadow_size);
    double acc = 0;
    for (int j = 0; j < N; j++)
        acc += rs->test_accuracy[j];
    cJSON_AddNumberToObject(result, "shadow_test_accuracy_mean", acc / N);
    cJSON_AddNumberToObject(result, "pooled_sigma", pooled_sigma);
    if (!online && !two_sided)
        cJSON_AddNumberToObject(result, "alpha", o.alpha);
    // The same φ without the per-sample calibration: the global-threshold attack, for comparison.
    cJSON *base = cJSON_CreateObject();
    st = mia_report(base, phi0, label, n, NULL, INFINITY, "none (the sweep only)", err);
    if (st != FP_OK) {
        cJSON_Delete(base);
        goto out;
    }
    cJSON *cmp = cJSON_AddObjectToObject(result, "global_threshold");
    cJSON_AddStringToObject(cmp, "score", rounds ? "the mean over the uploads of the round statistic without "
                                                   "calibration (ranks like basic-mia's over every upload)"
                                                : "phi_obs without calibration (ranks like the loss/confidence "
                                                  "threshold attack)");
    cJSON_AddItemToObject(cmp, "auc", cJSON_Duplicate(cJSON_GetObjectItem(base, "auc"), 1));
    cJSON_AddItemToObject(cmp, "tpr_at_fpr", cJSON_Duplicate(cJSON_GetObjectItem(base, "tpr_at_fpr"), 1));
    cJSON_AddItemToObject(cmp, "best_balanced_accuracy",
                          cJSON_Duplicate(cJSON_GetObjectItem(base, "best_balanced_accuracy"), 1));
    cJSON_Delete(base);
    mia_target_describe(t, result);
    mia_references_describe(t, o.variant, N, &before, result);
    mia_conclude(env, "lira", result);
    cJSON *tm = cJSON_AddObjectToObject(result, "timing");
    cJSON_AddNumberToObject(tm, "target_train_seconds", t->train_seconds);
    cJSON_AddNumberToObject(tm, "shadow_train_seconds", rs->seconds);
    cJSON_AddNumberToObject(tm, "attack_seconds", fp_monotonic_seconds() - t0);
out:
    free(phi_r);
    free(phi);
    free(phi0);
    free(zt);
    free(member);
    free(score);
    free(label);
    free(y);
    free(dec);
    mia_target_release(env, t);
    return st;
}

const AttackOps attack_lira = {
    .name = "lira",
    .summary = "membership: LiRA, offline (N OUT reference models, one-sided test) or online (IN and OUT Gaussians per "
               "candidate, likelihood ratio)",
    .headline = "auc",
    .headline_higher_leaks = 1,
    .uses_reference = 1,
    .validate = lira_validate,
    .run = lira_run,
    .work = lira_work,
};
