// `dlg-regression`: DLG (Zhu et al., NeurIPS 2019) on a sequence-regression model (the
// lstm load forecaster) with a continuous target, as the layer-wise DP paper's Fig. 7
// runs it: `fedpriv attack dlg-regression --config FILE.json --out DIR`.
//
// Threat model: an observer of the configured federation (attacks/victims.h): the
// honest-but-curious server that sees one client's upload in one round ("observer":
// "server", the default), or anyone who sees the model released after it ("public"). Target sample k is the local data of
// victim client (observe.client + k) mod N (batch 1); by default it takes one SGD step
// on it (the FedSGD probe), with "local": "federation" the federation's local procedure.
// The federation runs as configured up to the observed round (each victim's first
// participation unless observe.round says), the defense created once from its own
// DefenseSetup: its round budget, clip and schedule are the deployed ones at that round
// (layerwise: round 0 spends ε_total/rounds). The server's gradient estimate is
// upload_gradient_estimate of the upload at the round's global weights θ, which the
// attack differentiates through.
//
// Attack: the dummy window x′ and target y′ start from N(0,1) (rng_stream(seed,
// RNG_ATTACK, target, 0), the same start for every defense) and L-BFGS (attacks/lbfgs.h,
// PyTorch's defaults unless attack.lbfgs says otherwise) minimises the matching loss
//   D(x′, y′) = Σ_layers ‖∇θ MSE(f_θ(x′), y′) − g̃‖²
// through exact second-order derivatives. After every L-BFGS step the curves record D
// ("data Loss" in the paper) and MSE(x′, x) over the window's entries ("data Mse"; x′
// clamped per feature to the training windows' range, as DLG clamps images to [0,1];
// the unclamped final value is kept per target),
// averaged over the targets, plus |y′ − y| and the MSE of the last attack.recent_steps
// hours (default 6): through an LSTM the gradient of early hours vanishes, so DLG
// recovers the recent hours and the target far better than the whole window. Curves: the undefended gradient
// (reference: the same federation without a defense, i.e. FedAvg) and the config's
// defense at each of attack.epsilons (its epsilon_total; default: the config's own).
// "uninformed_mse" is MSE(x̄, x) with x̄ the training set's mean window: what an
// attacker gets without any gradient. A defended upload or a final matching loss that
// is not finite is FP_EDIVERGED (no curve is presented as a finding). "applicable" says
// whether the reference curve beats the uninformed guess: an attack that learns nothing
// without a defense is no evidence about one.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/attack.h"
#include "attacks/lbfgs.h"
#include "attacks/victims.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "defenses/registry.h"

#define DLGR_MAX_TARGETS 256
#define DLGR_MAX_EPS 16

typedef struct DlgrOptions {
    int *samples, n_samples;
    int steps;
    double eps[DLGR_MAX_EPS];
    int n_eps;                 // 0: the config's defense as it is
    int reference;
    int recent;                // the last `recent` time steps: the hours DLG recovers on an LSTM
    LbfgsConfig lbfgs;
    VictimOptions victims;
} DlgrOptions;

static FpStatus dlgr_parse(const AttackEnv *env, DlgrOptions *o, FpError *err) {
    memset(o, 0, sizeof *o);
    const cJSON *j = env->attack_json;
    const char *path = env->path;
    const Experiment *ex = env->ex;
    char p[256];
    static const char *const keys[] = {"name", "samples", "steps", "epsilons", "reference", "recent_steps", "lbfgs",
                                       VICTIM_KEYS, NULL};
    FP_TRY(jv_keys(j, path, keys, err));
    if (ex->shape.target_dim < 1 || ex->train->n_classes)
        return fp_fail(err, FP_EPARAM, "dataset.name: dlg-regression needs a regression dataset (e.g. power-load)");
    long long v;
    FP_TRY(jv_int(j, path, "steps", JV_OPTIONAL, 100, 1, 1000000, &v, err));
    o->steps = (int)v;
    FP_TRY(jv_bool(j, path, "reference", 1, &o->reference, err));
    FP_TRY(jv_int(j, path, "recent_steps", JV_OPTIONAL, 6 < ex->shape.h ? 6 : ex->shape.h, 1, ex->shape.h, &v, err));
    o->recent = (int)v;
    o->lbfgs = lbfgs_defaults();
    const cJSON *lj;
    FP_TRY(jv_object(j, path, "lbfgs", JV_OPTIONAL, &lj, err));
    if (lj) {
        static const char *const lk[] = {"lr", "max_iter", "history_size", NULL};
        const char *lp = jv_path(p, sizeof p, path, "lbfgs");
        FP_TRY(jv_keys(lj, lp, lk, err));
        FP_TRY(jv_number(lj, lp, "lr", JV_OPTIONAL, o->lbfgs.lr, 0, 1, 1e6, 0, &o->lbfgs.lr, err));
        FP_TRY(jv_int(lj, lp, "max_iter", JV_OPTIONAL, o->lbfgs.max_iter, 1, 100000, &v, err));
        o->lbfgs.max_iter = (int)v;
        o->lbfgs.max_eval = o->lbfgs.max_iter * 5 / 4;
        FP_TRY(jv_int(lj, lp, "history_size", JV_OPTIONAL, o->lbfgs.history_size, 1, 10000, &v, err));
        o->lbfgs.history_size = (int)v;
    }
    double *e = NULL;
    int ne = 0;
    FP_TRY(jv_number_array(j, path, "epsilons", JV_OPTIONAL, 1, DLGR_MAX_EPS, &e, &ne, err));
    for (int i = 0; i < ne; i++) {
        if (!(e[i] > 0) || !isfinite(e[i])) {
            free(e);
            return fp_fail(err, FP_EPARAM, "%s[%d]: must be > 0", jv_path(p, sizeof p, path, "epsilons"), i);
        }
        o->eps[i] = e[i];
    }
    free(e);
    o->n_eps = ne;
    if (ne && strcmp(ex->defense->name, "none") == 0)
        return fp_fail(err, FP_EPARAM, "%s: the defense is \"none\": there is no epsilon to sweep",
                       jv_path(p, sizeof p, path, "epsilons"));
    double *s = NULL;
    int n = 0;
    FP_TRY(jv_number_array(j, path, "samples", JV_OPTIONAL, 1, DLGR_MAX_TARGETS, &s, &n, err));
    if (!s) { // default: 4 samples spread over the training set (different zones)
        n = ex->train->n < 4 ? ex->train->n : 4;
        s = fp_malloc(sizeof(double) * n, err);
        if (!s)
            return FP_ENOMEM;
        for (int i = 0; i < n; i++)
            s[i] = (double)((long)ex->train->n * i / n + i);
    }
    o->samples = fp_malloc(sizeof(int) * n, err);
    if (!o->samples) {
        free(s);
        return FP_ENOMEM;
    }
    o->n_samples = n;
    FpStatus st = FP_OK;
    jv_path(p, sizeof p, path, "samples");
    for (int i = 0; i < n && st == FP_OK; i++) {
        if (s[i] != floor(s[i]) || s[i] < 0 || s[i] >= ex->train->n)
            st = fp_fail(err, FP_EPARAM, "%s[%d]: must be an index in [0, %d) of the train split, got %g", p, i,
                         ex->train->n, s[i]);
        else
            o->samples[i] = (int)s[i];
    }
    free(s);
    if (st == FP_OK)
        st = victims_parse(env, n, &o->victims, err);
    if (st != FP_OK) {
        free(o->samples);
        o->samples = NULL;
    }
    return st;
}

static FpStatus dlgr_validate(const AttackEnv *env, FpError *err) {
    DlgrOptions o;
    FP_TRY(dlgr_parse(env, &o, err));
    free(o.samples);
    return FP_OK;
}

// The curves a run draws: the clean reference (when asked), then the defense at each ε
// of attack.epsilons, or as configured (not again when it is "none" and the reference
// already shows FedAvg).
static int dlgr_curves(const DlgrOptions *o, const Experiment *ex) {
    int undefended = strcmp(ex->defense->name, "none") == 0;
    return (o->reference ? 1 : 0) + (o->n_eps ? o->n_eps : (undefended && o->reference) ? 0 : 1);
}

// Every sample in every curve: `steps` L-BFGS steps of at most max_eval gradient-matching
// evaluations (an upper bound).
static FpStatus dlgr_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    DlgrOptions o;
    FP_TRY(dlgr_parse(env, &o, err));
    free(o.samples);
    int n_runs = dlgr_curves(&o, env->ex);
    *w = (AttackWork){.passes = (uint64_t)n_runs * (uint64_t)o.n_samples * (uint64_t)o.steps *
                                (uint64_t)o.lbfgs.max_eval * 6};
    return FP_OK;
}

// -- what the server observes ----------------------------------------------------------------
// The victims' observed uploads under `defense` (eps > 0: its epsilon_total replaced).
static FpStatus observe(const AttackEnv *env, const DlgrOptions *o, const DefenseOps *defense,
                        const cJSON *defense_json, double eps, FedObservation *obs, FpError *err) {
    const Experiment *ex = env->ex;
    cJSON *dj = defense_json ? cJSON_Duplicate(defense_json, 1) : NULL;
    if (dj && eps > 0) {
        cJSON_DeleteItemFromObjectCaseSensitive(dj, "epsilon_total");
        cJSON_AddNumberToObject(dj, "epsilon_total", eps);
    }
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)o->n_samples);
    FpStatus st = idx ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    for (int k = 0; idx && k < o->n_samples; k++)
        idx[k] = (uint32_t)o->samples[k];
    if (st == FP_OK)
        st = victims_observe(env, &o->victims, defense, dj, ex->train, idx, 1, o->n_samples, obs, NULL, err);
    free(idx);
    cJSON_Delete(dj);
    return st;
}

// -- the matching objective -------------------------------------------------------------------
typedef struct {
    Model *m;
    Tape *t;
    const float *target; // host, n_params
    float *target_dev;
    int T, F;
    long evals;
} Objective;

// z = [x′ (T·F), y′ (1)]: D(z) and ∂D/∂z.
static FpStatus objective(void *ctx, const float *z, float *grad, double *loss, FpError *err) {
    Objective *o = ctx;
    Tape *t = o->t;
    Model *m = o->m;
    int L = m->table.n_layers;
    Var *p[64], *dw[64];
    tape_reset(t);
    int xs[4] = {1, 1, o->T, o->F}, ys[2] = {1, 1};
    Var *x = ad_from_host(t, z, 4, xs, 1), *y = ad_from_host(t, z + o->T * o->F, 2, ys, 1);
    model_param_vars(m, t, 1, p);
    Var *out = x ? model_forward(m, t, p, x, 1) : NULL;
    Var *l = out && y ? ad_mse(t, out, y) : NULL;
    FpStatus st = l ? ad_grad(t, l, p, L, dw, 1) : FP_EUNSUPPORTED;
    for (int i = 0; i < L; i++) // only ∂D/∂z is wanted from the second sweep
        p[i]->requires_grad = 0;
    Var *d = NULL;
    for (int i = 0; st == FP_OK && i < L; i++) {
        const ParamLayer *pl = &m->table.layers[i];
        if (!pl->trainable)
            continue;
        Var *g = ad_leaf(t, o->target_dev + pl->offset, pl->ndim, pl->shape, 0);
        Var *term = ad_sum(t, ad_unary(t, UN_SQUARE, ad_sub(t, dw[i], g)));
        d = d ? ad_add(t, d, term) : term;
    }
    if (st != FP_OK || !d)
        return fp_fail(err, FP_EUNSUPPORTED, "dlg-regression: the matching objective failed (%s)",
                       fp_status_name(st != FP_OK ? st : tape_status(t)));
    *loss = ad_item(t, d);
    if (grad) {
        Var *wrt[2] = {x, y}, *gz[2] = {NULL, NULL};
        if (ad_grad(t, d, wrt, 2, gz, 0) != FP_OK || !gz[0] || !gz[1])
            return fp_fail(err, FP_EUNSUPPORTED, "dlg-regression: the second-order gradient failed");
        ad_to_host(t, gz[0], grad);
        ad_to_host(t, gz[1], grad + o->T * o->F);
    }
    o->evals++;
    return FP_OK;
}

static double window_mse(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return s / n;
}

// The attacker's reconstruction: x′ clamped, column by column, to the range the training
// windows take (as DLG clamps images to [0,1]); a diverged x′ then scores like a guess
// at the range's edges instead of an unbounded number.
static void clamp_window(float *dst, const float *z, const float *lo, const float *hi, int T, int F) {
    for (int t = 0; t < T; t++)
        for (int f = 0; f < F; f++) {
            float v = z[t * F + f];
            dst[t * F + f] = isnan(v) ? 0.5f * (lo[f] + hi[f]) : v < lo[f] ? lo[f] : v > hi[f] ? hi[f] : v;
        }
}

static cJSON *curve_json(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull());
    return a;
}

// Attacks every target against the server's estimate from its observed upload, at that
// round's global weights; fills one curve object.
static FpStatus attack_curve(const AttackEnv *env, const DlgrOptions *o, const FedObservation *obs, cJSON *curve,
                             FpError *err) {
    const Experiment *ex = env->ex;
    Model *m = model_clone(ex->model, ex->backend, err);
    if (!m)
        return err && err->code ? err->code : FP_ENOMEM;
    const Dataset *d = ex->train;
    size_t np = m->table.n_params, nx = dataset_sample_size(d), nz = nx + 1;
    int S = o->steps, K = o->n_samples;
    Objective ob = {.m = m, .t = tape_create(m->be), .T = d->h, .F = d->w};
    ob.target_dev = m->be->alloc(np * sizeof(float));
    float *target = malloc(sizeof(float) * np);
    double *loss_c = calloc((size_t)S + 1, sizeof(double)), *mse_c = calloc((size_t)S + 1, sizeof(double));
    double *yerr_c = calloc((size_t)S + 1, sizeof(double)), *rec_c = calloc((size_t)S + 1, sizeof(double));
    size_t off = (size_t)(ob.T - o->recent) * ob.F, nr = (size_t)o->recent * ob.F; // the recent rows
    float *z = malloc(sizeof(float) * nz), *zc = malloc(sizeof(float) * nx);
    float *lo = malloc(sizeof(float) * ob.F), *hi = malloc(sizeof(float) * ob.F);
    for (int f = 0; lo && hi && f < ob.F; f++) {
        lo[f] = INFINITY;
        hi[f] = -INFINITY;
    }
    for (size_t i = 0; lo && hi && i < (size_t)d->n * nx; i++) {
        int f = (int)(i % (size_t)ob.F);
        lo[f] = d->x[i] < lo[f] ? d->x[i] : lo[f];
        hi[f] = d->x[i] > hi[f] ? d->x[i] : hi[f];
    }
    cJSON *per = cJSON_AddArrayToObject(curve, "targets");
    cJSON *oj = cJSON_AddArrayToObject(curve, "observations");
    FpStatus st = ob.t && ob.target_dev && target && loss_c && mse_c && yerr_c && rec_c && z && zc && lo && hi
                      ? FP_OK
                      : fp_fail(err, FP_ENOMEM, "out of memory");
    for (int k = 0; st == FP_OK && k < K; k++) {
        const float *x = d->x + (size_t)o->samples[k] * nx;
        float y = d->target[(size_t)o->samples[k] * d->target_dim];
        cJSON_AddItemToArray(oj, victims_observation_json(ex, &o->victims, &obs[k]));
        victims_gradient(ex, &obs[k], target);
        for (size_t i = 0; st == FP_OK && i < np; i++)
            if (!isfinite(target[i]))
                st = fp_fail(err, FP_EDIVERGED, "sample %d: the server's gradient estimate from client %d's defended "
                             "upload in round %d is not finite", o->samples[k], obs[k].client, obs[k].round + 1);
        if (st != FP_OK)
            break;
        model_set_params(m, obs[k].global);
        m->be->upload(ob.target_dev, target, np * sizeof(float));
        RngStream rs = rng_stream(ex->seed, RNG_ATTACK, (uint32_t)k, 0);
        for (size_t i = 0; i < nz; i++)
            z[i] = (float)rng_normal_at(&rs, i);
        Lbfgs *opt = lbfgs_create(nz, &o->lbfgs, err);
        if (!opt) {
            st = err ? err->code : FP_ENOMEM;
            break;
        }
        double dval = NAN;
        for (int s = 0; s <= S && st == FP_OK; s++) {
            if (s > 0)
                st = lbfgs_step(opt, z, objective, &ob, NULL, err);
            if (st == FP_OK)
                st = objective(&ob, z, NULL, &dval, err);
            if (st != FP_OK)
                break;
            loss_c[s] += dval / K;
            clamp_window(zc, z, lo, hi, ob.T, ob.F);
            mse_c[s] += window_mse(zc, x, nx) / K;
            rec_c[s] += window_mse(zc + off, x + off, nr) / K;
            yerr_c[s] += fabs((double)z[nx] - y) / K;
        }
        lbfgs_free(opt);
        if (st == FP_OK && !isfinite(dval))
            st = fp_fail(err, FP_EDIVERGED, "sample %d: the matching loss is not finite after %d steps (diverged)",
                         o->samples[k], S);
        if (st == FP_OK) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "sample", o->samples[k]);
            jnum_add(t, "final_matching_loss", dval);
            jnum_add(t, "final_window_mse", window_mse(zc, x, nx));
            jnum_add(t, "final_recent_mse", window_mse(zc + off, x + off, nr));
            jnum_add(t, "final_window_mse_unclamped", window_mse(z, x, nx));
            jnum_add(t, "final_target_abs_error", fabs((double)z[nx] - y));
            // Per time step (window rows), the reconstruction's MSE: which hours leak.
            cJSON *rows = cJSON_AddArrayToObject(t, "window_mse_per_step");
            for (int r = 0; r < ob.T; r++)
                cJSON_AddItemToArray(rows, cJSON_CreateNumber(window_mse(zc + (size_t)r * ob.F, x + (size_t)r * ob.F, ob.F)));
            cJSON_AddItemToArray(per, t);
        }
    }
    if (st == FP_OK) {
        jnum_add(curve, "final_matching_loss_mean", loss_c[S]);
        jnum_add(curve, "final_window_mse_mean", mse_c[S]);
        jnum_add(curve, "final_recent_mse_mean", rec_c[S]);
        jnum_add(curve, "final_target_abs_error_mean", yerr_c[S]);
        cJSON_AddItemToObject(curve, "matching_loss", curve_json(loss_c, S + 1));
        cJSON_AddItemToObject(curve, "window_mse", curve_json(mse_c, S + 1));
        cJSON_AddItemToObject(curve, "recent_mse", curve_json(rec_c, S + 1));
        cJSON_AddItemToObject(curve, "target_abs_error", curve_json(yerr_c, S + 1));
        cJSON_AddNumberToObject(curve, "evaluations", (double)ob.evals);
    }
    if (ob.target_dev)
        m->be->free(ob.target_dev);
    tape_free(ob.t);
    model_free(m);
    free(target);
    free(loss_c);
    free(mse_c);
    free(yerr_c);
    free(rec_c);
    free(z);
    free(zc);
    free(lo);
    free(hi);
    return st;
}

static FpStatus dlgr_run(const AttackEnv *env, cJSON *result, FpError *err) {
    DlgrOptions o;
    FP_TRY(dlgr_parse(env, &o, err));
    const Experiment *ex = env->ex;
    const Dataset *d = ex->train;
    size_t nx = dataset_sample_size(d);
    FedObservation *obs = calloc((size_t)o.n_samples, sizeof *obs);
    double *mean = calloc(nx, sizeof(double));
    FpStatus st = obs && mean ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory");
    // What no gradient tells: the training set's mean window.
    double uninformed = 0;
    for (int i = 0; st == FP_OK && i < d->n; i++)
        for (size_t j = 0; j < nx; j++)
            mean[j] += d->x[(size_t)i * nx + j] / d->n;
    for (int k = 0; st == FP_OK && k < o.n_samples; k++) {
        double s = 0;
        for (size_t j = 0; j < nx; j++) {
            double e = mean[j] - d->x[(size_t)o.samples[k] * nx + j];
            s += e * e;
        }
        uninformed += s / nx / o.n_samples;
    }
    cJSON *curves = cJSON_AddArrayToObject(result, "curves");
    double headline = NAN;
    int n_runs = dlgr_curves(&o, ex);
    for (int c = 0; st == FP_OK && c < n_runs; c++) {
        int ref = o.reference && c == 0;
        double eps = ref ? 0 : o.n_eps ? o.eps[c - (o.reference ? 1 : 0)] : 0;
        cJSON *curve = cJSON_CreateObject();
        cJSON_AddItemToArray(curves, curve);
        cJSON_AddStringToObject(curve, "defense", ref ? "none (FedAvg: the clean gradient)" : ex->defense->name);
        if (!ref && eps > 0)
            cJSON_AddNumberToObject(curve, "epsilon_total", eps);
        if (ref) // the clean upload: the same federation without a defense
            st = observe(env, &o, defense_find("none"), NULL, 0, obs, err);
        else
            st = observe(env, &o, ex->defense, ex->defense_json, eps, obs, err);
        if (st == FP_OK) {
            if (!env->quiet)
                fprintf(stderr, "dlg-regression: curve %d/%d (%s%s)\n", c + 1, n_runs, ref ? "reference" : ex->defense->name,
                        eps > 0 ? ", swept epsilon" : "");
            st = attack_curve(env, &o, obs, curve, err);
        }
        for (int k = 0; k < o.n_samples; k++)
            fed_observation_free(&obs[k]);
        if (st == FP_OK && !ref && isnan(headline))
            headline = cJSON_GetNumberValue(cJSON_GetObjectItem(curve, "final_window_mse_mean"));
    }
    if (st == FP_OK) {
        cJSON_AddStringToObject(result, "observer", fed_observer_name(o.victims.observer));
        // Does the attack apply? Without a defense it must beat the uninformed guess.
        const cJSON *rc = o.reference ? cJSON_GetArrayItem(curves, 0) : NULL;
        double ref_mse = rc ? cJSON_GetNumberValue(cJSON_GetObjectItem(rc, "final_window_mse_mean")) : NAN;
        if (rc && isfinite(ref_mse))
            cJSON_AddBoolToObject(result, "applicable", ref_mse < uninformed);
        else
            cJSON_AddNullToObject(result, "applicable");
        cJSON *ap = cJSON_AddObjectToObject(result, "applicability");
        cJSON_AddStringToObject(ap, "rule", "applicable when the same attack against the federation without any "
                                            "defense (the reference curve) ends with a window MSE below the "
                                            "uninformed guess's (uninformed_mse)");
        cJSON_AddStringToObject(ap, "reference", rc ? "the reference curve" : "none");
        if (rc)
            jnum_add(ap, "reference_window_mse", ref_mse);
        else
            cJSON_AddStringToObject(ap, "reason", "no reference curve (\"reference\": false)");
        cJSON_AddNumberToObject(result, "uninformed_mse", uninformed);
        cJSON_AddNumberToObject(result, "steps", o.steps);
        cJSON_AddNumberToObject(result, "recent_steps", o.recent);
        cJSON *s = cJSON_AddArrayToObject(result, "samples");
        for (int k = 0; k < o.n_samples; k++)
            cJSON_AddItemToArray(s, cJSON_CreateNumber(o.samples[k]));
        if (isnan(headline)) // only the reference ran
            headline = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(curves, 0), "final_window_mse_mean"));
        jnum_add(result, "window_mse_final", headline);
    }
    free(obs);
    free(mean);
    free(o.samples);
    return st;
}

const AttackOps attack_dlg_regression = {
    .name = "dlg-regression",
    .summary = "DLG on a regression model (lstm load windows, continuous target): matching loss and window MSE per "
               "L-BFGS step, clean vs defended",
    .headline = "window_mse_final",
    .headline_higher_leaks = 0,
    .observers = 1,
    .validate = dlgr_validate,
    .run = dlgr_run,
    .work = dlgr_work,
};
