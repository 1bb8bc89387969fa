// Gradient matching by L-BFGS (see attacks/inversion.h): the objective as a closure on
// the tape, restarts, snapshots, and iDLG's label rule.
//
// One closure evaluation records on a fresh tape: the forward pass on x′, the loss,
// ∇θL with create_graph = 1, the distance to the target, and then ∂D/∂z by a second
// reverse sweep. Nothing is cached between evaluations except the parameter and target
// buffers, so every evaluation is exact for the z it is given.
#include "attacks/inversion.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/rng.h"
#include "datasets/dataset.h"
#include "models/predict.h"

struct InversionObjective {
    const Model *m;
    const Backend *be;
    Tape *t;
    int B, c, h, w, K;
    size_t nx, ny;          // sizes of x′ and y′ (ny = 0 for iDLG)
    int32_t *labels;        // iDLG labels (B), else NULL
    float *target;          // device copy of g (n_params)
    double target_norm;     // ‖g‖ over trainable layers (cosine)
    Var **p, **dw;          // per layer
    Var **pk, **vk, **acc;  // simulated local steps: θ_k, v_k, Σ v (per layer)
    InvLocalSteps local;
    InvDistance dist;
    double tv;
    long evals;
};

void inversion_objective_free(InversionObjective *o) {
    if (!o)
        return;
    if (o->target)
        o->be->free(o->target);
    tape_free(o->t);
    free(o->labels);
    free(o->p);
    free(o->dw);
    free(o->pk);
    free(o->vk);
    free(o->acc);
    free(o);
}

InversionObjective *inversion_objective_create(const InversionProblem *p, const InversionConfig *cfg, FpError *err) {
    const Model *m = p->model;
    if (p->batch < 1 || m->in.n_classes < 2 || m->in.c < 1 || m->in.h < 1 || m->in.w < 1) {
        fp_fail(err, FP_EPARAM, "gradient inversion needs a batch >= 1 and an image classifier (batch %d, %d classes)",
                p->batch, m->in.n_classes);
        return NULL;
    }
    InversionObjective *o = fp_calloc(1, sizeof *o, err);
    if (!o)
        return NULL;
    o->m = m;
    o->be = m->be;
    o->B = p->batch;
    o->c = m->in.c;
    o->h = m->in.h;
    o->w = m->in.w;
    o->K = m->in.n_classes;
    o->nx = (size_t)o->B * o->c * o->h * o->w;
    o->ny = p->labels ? 0 : (size_t)o->B * o->K;
    o->dist = cfg->distance;
    o->tv = cfg->tv;
    o->local = p->local;
    if ((p->local.steps > 1 || cfg->optimizer == INV_OPTIMIZER_ADAM_SIGNED) && !p->labels) {
        inversion_objective_free(o);
        fp_fail(err, FP_EPARAM, "gradient inversion: simulated local steps and the signed-Adam optimiser need the "
                                "labels (iDLG or LLG)");
        return NULL;
    }
    if (p->local.steps < 0 || p->local.steps > 1000 || (p->local.steps > 1 && !(p->local.lr > 0))) {
        inversion_objective_free(o);
        fp_fail(err, FP_EPARAM, "gradient inversion: bad simulated local procedure (%d steps, lr %g)", p->local.steps,
                p->local.lr);
        return NULL;
    }
    int L = m->table.n_layers;
    size_t np = m->table.n_params;
    o->t = tape_create(o->be);
    o->p = malloc(sizeof(Var *) * L);
    o->dw = malloc(sizeof(Var *) * L);
    o->pk = malloc(sizeof(Var *) * L);
    o->vk = malloc(sizeof(Var *) * L);
    o->acc = malloc(sizeof(Var *) * L);
    o->target = o->be->alloc(np * sizeof(float));
    if (p->labels) {
        o->labels = malloc(sizeof(int32_t) * o->B);
        if (o->labels)
            memcpy(o->labels, p->labels, sizeof(int32_t) * o->B);
    }
    if (!o->t || !o->p || !o->dw || !o->pk || !o->vk || !o->acc || !o->target || (p->labels && !o->labels)) {
        inversion_objective_free(o);
        fp_fail(err, FP_ENOMEM, "out of memory preparing the gradient-matching objective");
        return NULL;
    }
    for (int i = 0; i < p->batch && p->labels; i++)
        if (p->labels[i] < 0 || p->labels[i] >= m->in.n_classes) {
            inversion_objective_free(o);
            fp_fail(err, FP_EPARAM, "gradient inversion: label %d out of range [0, %d)", (int)p->labels[i],
                    m->in.n_classes);
            return NULL;
        }
    o->be->upload(o->target, p->target, np * sizeof(float));
    double s = 0;
    for (int i = 0; i < L; i++) {
        const ParamLayer *l = &m->table.layers[i];
        for (size_t k = 0; l->trainable && k < l->count; k++)
            s += (double)p->target[l->offset + k] * p->target[l->offset + k];
    }
    o->target_norm = sqrt(s);
    return o;
}

size_t inversion_objective_size(const InversionObjective *o) { return o->nx + o->ny; }

// Anisotropic total variation (Geiping et al. 2020): mean |Δ_w x| + mean |Δ_h x|.
static Var *total_variation(Tape *t, Var *x) {
    int H = x->t.shape[2], W = x->t.shape[3];
    Var *tv = NULL;
    if (W > 1) {
        Var *d = ad_sub(t, ad_slice(t, x, 3, 1, W - 1), ad_slice(t, x, 3, 0, W - 1));
        tv = ad_mean(t, ad_unary(t, UN_ABS, d));
    }
    if (H > 1) {
        Var *d = ad_sub(t, ad_slice(t, x, 2, 1, H - 1), ad_slice(t, x, 2, 0, H - 1));
        Var *v = ad_mean(t, ad_unary(t, UN_ABS, d));
        tv = tv ? ad_add(t, tv, v) : v;
    }
    return tv;
}

// The victim's E local steps on x′, recorded on the tape (see InvLocalSteps): on entry
// o->dw holds ∇L(θ_0) with its graph; on exit it holds the server's estimate
// (1/E)Σ_k v_k − λθ_0, a function of x′ through every step.
static FpStatus simulate_local_steps(InversionObjective *o, Var *x) {
    Tape *t = o->t;
    const Model *m = o->m;
    int L = m->table.n_layers, E = o->local.steps;
    float lr = (float)o->local.lr, mu = (float)o->local.momentum, wd = (float)o->local.weight_decay;
    for (int i = 0; i < L; i++) {
        o->pk[i] = o->p[i];
        o->vk[i] = o->acc[i] = NULL;
    }
    FpStatus st = FP_OK;
    for (int k = 0; k < E && st == FP_OK; k++) {
        if (k > 0) {
            Var *ce = ad_cross_entropy(t, model_forward(m, t, o->pk, x, 1), o->labels);
            st = ce ? ad_grad(t, ce, o->pk, L, o->dw, 1) : (tape_status(t) != FP_OK ? tape_status(t) : FP_EUNSUPPORTED);
        }
        for (int i = 0; i < L && st == FP_OK; i++) {
            if (!m->table.layers[i].trainable)
                continue;
            Var *d = wd != 0.0f ? ad_add(t, o->dw[i], ad_scale(t, o->pk[i], wd)) : o->dw[i];
            o->vk[i] = o->vk[i] && mu != 0.0f ? ad_add(t, ad_scale(t, o->vk[i], mu), d) : d;
            o->acc[i] = o->acc[i] ? ad_add(t, o->acc[i], o->vk[i]) : o->vk[i];
            if (k + 1 < E)
                o->pk[i] = ad_sub(t, o->pk[i], ad_scale(t, o->vk[i], lr));
        }
        if (tape_status(t) != FP_OK)
            st = tape_status(t);
    }
    for (int i = 0; i < L && st == FP_OK; i++) {
        if (!m->table.layers[i].trainable)
            continue;
        Var *e = ad_scale(t, o->acc[i], 1.0f / (float)E);
        o->dw[i] = wd != 0.0f ? ad_sub(t, e, ad_scale(t, o->p[i], wd)) : e;
    }
    return st == FP_OK ? tape_status(t) : st;
}

FpStatus inversion_objective_eval(InversionObjective *o, const float *z, float *grad, double *loss, FpError *err) {
    Tape *t = o->t;
    const Model *m = o->m;
    int L = m->table.n_layers;
    tape_reset(t);
    int xs[4] = {o->B, o->c, o->h, o->w}, ys[2] = {o->B, o->K};
    Var *x = ad_from_host(t, z, 4, xs, 1);
    Var *y = o->ny ? ad_from_host(t, z + o->nx, 2, ys, 1) : NULL;
    if (model_param_vars(m, t, 1, o->p) != FP_OK)
        return fp_fail(err, FP_ENOMEM, "out of memory in the gradient-matching objective");
    Var *out = x ? model_forward(m, t, o->p, x, 1) : NULL;
    Var *ce = o->ny ? ad_cross_entropy_soft(t, out, ad_softmax(t, y)) : ad_cross_entropy(t, out, o->labels);
    // ∇θ L, recorded so that it can be differentiated again.
    FpStatus st = ce ? ad_grad(t, ce, o->p, L, o->dw, 1) : FP_EUNSUPPORTED;
    if (st == FP_OK && o->local.steps > 1)
        st = simulate_local_steps(o, x);
    // Only ∂D/∂z is wanted from the second sweep: with the parameter leaves marked
    // constant, the backward rules skip every ∂/∂θ branch (5 of the 16 convolutions of
    // the sweep for LeNet) and nothing else changes.
    for (int i = 0; i < L; i++)
        o->p[i]->requires_grad = 0;
    Var *d = NULL, *dot = NULL, *nrm = NULL;
    for (int i = 0; st == FP_OK && i < L; i++) {
        const ParamLayer *l = &m->table.layers[i];
        if (!l->trainable)
            continue;
        Var *g = ad_leaf(t, o->target + l->offset, l->ndim, l->shape, 0);
        if (o->dist == INV_DISTANCE_L2) {
            Var *term = ad_sum(t, ad_unary(t, UN_SQUARE, ad_sub(t, o->dw[i], g)));
            d = d ? ad_add(t, d, term) : term;
        } else {
            Var *a = ad_sum(t, ad_mul(t, o->dw[i], g)), *b = ad_sum(t, ad_unary(t, UN_SQUARE, o->dw[i]));
            dot = dot ? ad_add(t, dot, a) : a;
            nrm = nrm ? ad_add(t, nrm, b) : b;
        }
    }
    if (o->dist == INV_DISTANCE_COSINE && dot) {
        // 1 − ⟨∇θL, g⟩ / (‖∇θL‖ ‖g‖)
        double gn = o->target_norm > 1e-30 ? o->target_norm : 1e-30;
        d = ad_affine(t, ad_div(t, dot, ad_scale(t, ad_unary(t, UN_SQRT, nrm), (float)gn)), -1.0f, 1.0f);
    }
    if (d && o->tv > 0)
        d = ad_add(t, d, ad_scale(t, total_variation(t, x), (float)o->tv));
    if (st == FP_OK && !d)
        st = tape_status(t) != FP_OK ? tape_status(t) : FP_EUNSUPPORTED;
    if (st != FP_OK)
        return fp_fail(err, st == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED,
                       "gradient-matching objective failed (%s): the model's graph is not twice differentiable here",
                       fp_status_name(st));
    *loss = ad_item(t, d);
    if (grad) {
        Var *wrt[2] = {x, y}, *gz[2] = {NULL, NULL};
        st = ad_grad(t, d, wrt, o->ny ? 2 : 1, gz, 0);
        if (st != FP_OK || !gz[0] || (o->ny && !gz[1]))
            return fp_fail(err, st == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED,
                           "gradient-matching objective: second-order gradient failed (%s)", fp_status_name(st));
        ad_to_host(t, gz[0], grad);
        if (o->ny)
            ad_to_host(t, gz[1], grad + o->nx);
    }
    o->evals++;
    return FP_OK;
}

static FpStatus closure(void *ctx, const float *z, float *grad, double *loss, FpError *err) {
    return inversion_objective_eval(ctx, z, grad, loss, err);
}

void inversion_result_free(InversionResult *r) {
    if (!r)
        return;
    free(r->x);
    free(r->label_probs);
    free(r->loss_curve);
    free(r->snapshot_steps);
    free(r->snapshots);
    free(r->restart_losses);
    memset(r, 0, sizeof *r);
}

// Adam on sign(∂D/∂x′) (Geiping et al. 2020), PyTorch's update rule in float: m, v the
// moment estimates, bias corrections 1 − β^t; the rate steps down by 10 at their
// milestones; x′ is projected onto [0, 1].
typedef struct SignedAdam {
    float *m, *v;
    size_t n;
    long t;
} SignedAdam;

static double adam_rate(const InvAdamConfig *a, int step, int steps) {
    double lr = a->lr;
    // Their MultiStepLR milestones: steps // 2.667, steps // 1.6, steps // 1.142.
    static const double div[3] = {2.667, 1.6, 1.142};
    for (int k = 0; a->step_decay && k < 3; k++)
        if (step >= (int)floor(steps / div[k]))
            lr *= 0.1;
    return lr;
}

static void adam_signed_step(SignedAdam *a, float *x, const float *g, double lr, int boxed) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    a->t++;
    double bc1 = 1.0 - pow(b1, (double)a->t), bc2 = 1.0 - pow(b2, (double)a->t);
    float step = (float)(lr / bc1), sbc2 = (float)sqrt(bc2);
    for (size_t i = 0; i < a->n; i++) {
        float s = g[i] > 0.0f ? 1.0f : g[i] < 0.0f ? -1.0f : 0.0f;
        a->m[i] = b1 * a->m[i] + (1.0f - b1) * s;
        a->v[i] = b2 * a->v[i] + (1.0f - b2) * s * s;
        x[i] -= step * a->m[i] / (sqrtf(a->v[i]) / sbc2 + eps);
        if (boxed)
            x[i] = x[i] < 0.0f ? 0.0f : x[i] > 1.0f ? 1.0f : x[i];
    }
}

void inv_progress_init(InvProgress *p, FILE *f, const char *name, long long total) {
    p->steps = fp_progress_start(f, total, INV_PROGRESS_SECONDS, INV_PROGRESS_SECONDS, "inversion steps", "%s", name);
    pthread_mutex_init(&p->lock, NULL);
}

void inv_progress_add(InvProgress *p, long long steps) {
    if (!p || !p->steps.f)
        return;
    pthread_mutex_lock(&p->lock);
    fp_progress_add(&p->steps, steps);
    pthread_mutex_unlock(&p->lock);
}

void inv_progress_free(InvProgress *p) { pthread_mutex_destroy(&p->lock); }

// NaN (a diverged run) ranks after every finite loss.
static int better(double a, double b) { return !isnan(a) && (isnan(b) || a < b); }

FpStatus inversion_run(const InversionProblem *p, const InversionConfig *cfg, InversionResult *out, FpError *err) {
    memset(out, 0, sizeof *out);
    if (cfg->optimizer == INV_OPTIMIZER_ANALYTIC)
        return inversion_analytic_run(p, out, err);
    if (cfg->steps < 1 || cfg->restarts < 1 || cfg->snapshot_every < 0 || !(cfg->tv >= 0))
        return fp_fail(err, FP_EPARAM, "gradient inversion: bad configuration (steps %d, restarts %d)", cfg->steps,
                       cfg->restarts);
    InversionObjective *o = inversion_objective_create(p, cfg, err);
    if (!o)
        return err ? err->code : FP_ENOMEM;
    size_t n = inversion_objective_size(o), nx = o->nx;
    int n_snap = cfg->snapshot_every > 0 ? cfg->steps / cfg->snapshot_every : 0;
    int adam = cfg->optimizer == INV_OPTIMIZER_ADAM_SIGNED;
    float *zg = adam ? malloc(sizeof(float) * n) : NULL;
    SignedAdam sa = {.n = n, .m = adam ? malloc(sizeof(float) * n) : NULL,
                     .v = adam ? malloc(sizeof(float) * n) : NULL};
    float *z = malloc(sizeof(float) * n), *cur_snap = malloc(sizeof(float) * nx * (n_snap ? n_snap : 1));
    double *cur_curve = malloc(sizeof(double) * (cfg->steps + 1));
    out->batch = o->B;
    out->c = o->c;
    out->h = o->h;
    out->w = o->w;
    out->classes = o->K;
    out->n_curve = cfg->steps + 1;
    out->n_snapshots = n_snap;
    out->x = malloc(sizeof(float) * nx);
    out->label_probs = o->ny ? malloc(sizeof(float) * o->ny) : NULL;
    out->loss_curve = malloc(sizeof(double) * out->n_curve);
    out->snapshot_steps = malloc(sizeof(int) * (n_snap ? n_snap : 1));
    out->snapshots = malloc(sizeof(float) * nx * (n_snap ? n_snap : 1));
    out->restart_losses = malloc(sizeof(double) * cfg->restarts);
    float *best_y = o->ny ? malloc(sizeof(float) * o->ny) : NULL;
    FpStatus st = FP_OK;
    if ((adam && (!zg || !sa.m || !sa.v)) || !z || !cur_snap || !cur_curve || !out->x ||
        (o->ny && (!out->label_probs || !best_y)) || !out->loss_curve ||
        !out->snapshot_steps || !out->snapshots || !out->restart_losses) {
        st = fp_fail(err, FP_ENOMEM, "out of memory for the gradient inversion");
        goto done;
    }
    for (int k = 0; k < n_snap; k++)
        out->snapshot_steps[k] = (k + 1) * cfg->snapshot_every;
    double t0 = fp_clock_seconds(CLOCK_MONOTONIC), c0 = fp_clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    out->loss = NAN;
    out->best_restart = -1;
    for (int r = 0; r < cfg->restarts && st == FP_OK; r++) {
        RngStream rs = rng_stream(p->seed, RNG_ATTACK, p->first_restart + (uint32_t)r, p->stream);
        for (size_t i = 0; i < n; i++)
            z[i] = (float)rng_normal_at(&rs, i);
        Lbfgs *opt = adam ? NULL : lbfgs_create(n, &cfg->lbfgs, err);
        if (!adam && !opt) {
            st = err ? err->code : FP_ENOMEM;
            break;
        }
        if (adam) {
            memset(sa.m, 0, sizeof(float) * n);
            memset(sa.v, 0, sizeof(float) * n);
            sa.t = 0;
        }
        for (int s = 0; s < cfg->steps && st == FP_OK; s++) {
            if (adam) {
                st = inversion_objective_eval(o, z, zg, &cur_curve[s], err);
                if (st == FP_OK)
                    adam_signed_step(&sa, z, zg, adam_rate(&cfg->adam, s, cfg->steps), cfg->adam.boxed);
            } else
                st = lbfgs_step(opt, z, closure, o, &cur_curve[s], err);
            if (cfg->snapshot_every > 0 && (s + 1) % cfg->snapshot_every == 0 &&
                (s + 1) / cfg->snapshot_every <= n_snap)
                memcpy(cur_snap + (size_t)((s + 1) / cfg->snapshot_every - 1) * nx, z, sizeof(float) * nx);
            if (((s + 1) & 15) == 0 || s + 1 == cfg->steps) // counted in sixteens (the lock is shared)
                inv_progress_add(p->progress, ((s + 1) & 15) ? (s + 1) & 15 : 16);
        }
        lbfgs_free(opt);
        if (st == FP_OK) // the loss at the final point (neither optimiser evaluates it)
            st = inversion_objective_eval(o, z, NULL, &cur_curve[cfg->steps], err);
        if (st != FP_OK)
            break;
        double final = cur_curve[cfg->steps];
        out->restart_losses[r] = final;
        if (out->best_restart < 0 || better(final, out->loss)) {
            out->best_restart = r;
            out->loss = final;
            memcpy(out->x, z, sizeof(float) * nx);
            if (o->ny)
                memcpy(best_y, z + nx, sizeof(float) * o->ny);
            memcpy(out->loss_curve, cur_curve, sizeof(double) * out->n_curve);
            memcpy(out->snapshots, cur_snap, sizeof(float) * nx * n_snap);
        }
    }
    out->seconds = fp_clock_seconds(CLOCK_MONOTONIC) - t0;
    out->cpu_seconds = fp_clock_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    out->evaluations = o->evals;
    // softmax(y′) per image: DLG's recovered soft label.
    for (int b = 0; st == FP_OK && b < o->B && o->ny; b++) {
        const float *row = best_y + (size_t)b * o->K;
        double mx = row[0], s = 0;
        for (int k = 1; k < o->K; k++)
            mx = row[k] > mx ? row[k] : mx;
        for (int k = 0; k < o->K; k++)
            s += exp(row[k] - mx);
        for (int k = 0; k < o->K; k++)
            out->label_probs[(size_t)b * o->K + k] = (float)(exp(row[k] - mx) / s);
    }
done:
    free(zg);
    free(sa.m);
    free(sa.v);
    free(z);
    free(cur_snap);
    free(cur_curve);
    free(best_y);
    inversion_objective_free(o);
    if (st != FP_OK)
        inversion_result_free(out);
    return st;
}

void idlg_labels(const float *gw, int classes, int hidden, int batch, int32_t *labels) {
    double *sums = malloc(sizeof(double) * classes);
    int *taken = calloc((size_t)classes, sizeof(int));
    if (!sums || !taken) { // fall back to a rule that needs no memory: argmin, repeated
        free(sums);
        free(taken);
        int best = 0;
        double bv = INFINITY;
        for (int c = 0; c < classes; c++) {
            double s = 0;
            for (int j = 0; j < hidden; j++)
                s += gw[(size_t)c * hidden + j];
            if (s < bv) {
                bv = s;
                best = c;
            }
        }
        for (int b = 0; b < batch; b++)
            labels[b] = best;
        return;
    }
    for (int c = 0; c < classes; c++) {
        double s = 0;
        for (int j = 0; j < hidden; j++)
            s += gw[(size_t)c * hidden + j];
        sums[c] = s;
    }
    for (int b = 0; b < batch; b++) {
        int best = -1;
        for (int c = 0; c < classes; c++)
            if (!taken[c] && (best < 0 || sums[c] < sums[best]))
                best = c;
        if (best < 0) // more images than classes: reuse the argmin
            best = labels[0];
        else
            taken[best] = 1;
        labels[b] = best;
    }
    free(sums);
    free(taken);
}

void llg_labels(const float *gw, int classes, int hidden, int batch, int32_t *labels) {
    double *sums = malloc(sizeof(double) * classes);
    if (!sums) { // no memory: iDLG's rule, which needs none beyond its own fallback
        idlg_labels(gw, classes, hidden, batch, labels);
        return;
    }
    double negative = 0;
    int n_neg = 0;
    for (int c = 0; c < classes; c++) {
        double s = 0;
        for (int j = 0; j < hidden; j++)
            s += gw[(size_t)c * hidden + j];
        sums[c] = s;
        if (s < 0) {
            negative += s;
            n_neg++;
        }
    }
    double impact = -negative / batch;
    int n = 0;
    // 1. every negative class once (the most negative first when there are more than B):
    // pick in increasing order of the original sums, then raise each.
    for (int k = 0; k < n_neg && n < batch; k++) {
        int best = -1;
        for (int c = 0; c < classes; c++) {
            int taken = 0;
            for (int i = 0; i < n; i++)
                taken |= labels[i] == c;
            if (!taken && sums[c] < 0 && (best < 0 || sums[c] < sums[best]))
                best = c;
        }
        labels[n++] = best;
    }
    for (int i = 0; i < n; i++)
        sums[labels[i]] += impact;
    // 2. the smallest remaining sum, raised by the impact each time it is taken. Classes
    // taken in step 1 were raised there; a class whose sum stays negative is taken again.
    while (n < batch) {
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (sums[c] < sums[best])
                best = c;
        labels[n++] = best;
        sums[best] += impact;
    }
    // The multiset, in increasing class order.
    for (int a = 1; a < batch; a++)
        for (int b = a; b > 0 && labels[b - 1] > labels[b]; b--) {
            int32_t tmp = labels[b];
            labels[b] = labels[b - 1];
            labels[b - 1] = tmp;
        }
    free(sums);
}

int inversion_last_bias_layer(const Model *m) {
    int w = model_last_weight_layer(m);
    if (w < 0 || w + 1 >= m->table.n_layers)
        return -1;
    const ParamLayer *b = &m->table.layers[w + 1];
    const ParamLayer *l = &m->table.layers[w];
    return b->kind == PARAM_BIAS && b->ndim == 1 && l->ndim == 2 && b->shape[0] == l->shape[0] ? w + 1 : -1;
}

FpStatus bias_count_labels(const Model *model, const float *bias_grad, int batch, uint64_t seed, uint32_t stream,
                           int32_t *labels, FpError *err) {
    const DataShape *in = &model->in;
    int K = in->n_classes, n = LABEL_PROBE_INPUTS;
    size_t dim = (size_t)in->c * in->h * in->w;
    Dataset *probe = dataset_create("label-probe", n, in->c, in->h, in->w, K, 0, err);
    float *probs = malloc(sizeof(float) * (size_t)n * (size_t)K);
    double *count = malloc(sizeof(double) * (size_t)K);
    if (!probe || !probs || !count) {
        dataset_free(probe);
        free(probs);
        free(count);
        return err && err->code ? err->code : fp_fail(err, FP_ENOMEM, "out of memory");
    }
    RngStream base = rng_stream(seed, RNG_ATTACK, 0, stream), rs = rng_substream(&base, INV_LABEL_PROBE_TAG);
    for (size_t i = 0; i < (size_t)n * dim; i++)
        probe->x[i] = (float)rng_uniform_at(&rs, i);
    for (int i = 0; i < n; i++)
        probe->y[i] = 0; // unused by the prediction
    FpStatus st = model_predict(model, probe, NULL, n, probs, err);
    if (st == FP_OK) {
        // n_c = B (p̄_c − ∂L/∂b_c); floors first, then the largest remainders until B.
        int taken = 0;
        for (int c = 0; c < K; c++) {
            double mean = 0;
            for (int i = 0; i < n; i++)
                mean += probs[(size_t)i * K + c];
            double v = fmax(0, batch * (mean / n - bias_grad[c]));
            int whole = (int)fmin(floor(v), batch);
            for (int k = 0; k < whole && taken < batch; k++)
                labels[taken++] = c;
            count[c] = v - whole;
        }
        while (taken < batch) {
            int best = 0;
            for (int c = 1; c < K; c++)
                if (count[c] > count[best])
                    best = c;
            labels[taken++] = best;
            count[best] -= 1;
        }
        for (int a = 1; a < batch; a++)
            for (int b = a; b > 0 && labels[b - 1] > labels[b]; b--) {
                int32_t tmp = labels[b];
                labels[b] = labels[b - 1];
                labels[b - 1] = tmp;
            }
    }
    dataset_free(probe);
    free(probs);
    free(count);
    return st;
}
