// L-BFGS, a line-by-line port of torch.optim.LBFGS.step() with line_search_fn=None
// (see attacks/lbfgs.h for the algorithm and its stopping rules). The history is a ring
// buffer of history_size (s, y, ρ) triples instead of PyTorch's Python lists with
// pop(0); the order of the two-loop recursion is the same (oldest first).
#include "attacks/lbfgs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct Lbfgs {
    size_t n;
    LbfgsConfig cfg;
    float *d, *g, *prev_g, *q;  // direction, gradient, previous gradient, scratch (n each)
    float *old_dirs, *old_stps; // history_size × n: y_i = Δg and s_i = t·d
    double *ro, *al;            // ρ_i = 1/(y_i·s_i); α_i of the first loop
    int hist_head, hist_len;    // oldest entry, entries held
    double t, h_diag, prev_loss;
    long func_evals, n_iter;
};

LbfgsConfig lbfgs_defaults(void) {
    return (LbfgsConfig){.lr = 1.0, .max_iter = 20, .max_eval = 25, .history_size = 100, .tolerance_grad = 1e-7,
                         .tolerance_change = 1e-9};
}

Lbfgs *lbfgs_create(size_t n, const LbfgsConfig *cfg, FpError *err) {
    if (n == 0 || !(cfg->lr > 0) || cfg->max_iter < 1 || cfg->max_eval < 1 || cfg->history_size < 1 ||
        !(cfg->tolerance_grad >= 0) || !(cfg->tolerance_change >= 0)) {
        fp_fail(err, FP_EPARAM, "lbfgs: bad configuration (n %zu, lr %g, max_iter %d, max_eval %d, history %d)", n,
                cfg->lr, cfg->max_iter, cfg->max_eval, cfg->history_size);
        return NULL;
    }
    Lbfgs *o = fp_calloc(1, sizeof *o, err);
    if (!o)
        return NULL;
    o->n = n;
    o->cfg = *cfg;
    size_t h = (size_t)cfg->history_size;
    o->d = malloc(sizeof(float) * n);
    o->g = malloc(sizeof(float) * n);
    o->prev_g = malloc(sizeof(float) * n);
    o->q = malloc(sizeof(float) * n);
    o->old_dirs = malloc(sizeof(float) * n * h);
    o->old_stps = malloc(sizeof(float) * n * h);
    o->ro = malloc(sizeof(double) * h);
    o->al = malloc(sizeof(double) * h);
    if (!o->d || !o->g || !o->prev_g || !o->q || !o->old_dirs || !o->old_stps || !o->ro || !o->al) {
        lbfgs_free(o);
        fp_fail(err, FP_ENOMEM, "lbfgs: out of memory for %zu variables and a history of %zu", n, h);
        return NULL;
    }
    o->h_diag = 1.0;
    return o;
}

void lbfgs_free(Lbfgs *o) {
    if (!o)
        return;
    free(o->d);
    free(o->g);
    free(o->prev_g);
    free(o->q);
    free(o->old_dirs);
    free(o->old_stps);
    free(o->ro);
    free(o->al);
    free(o);
}

long lbfgs_func_evals(const Lbfgs *o) { return o->func_evals; }
long lbfgs_iterations(const Lbfgs *o) { return o->n_iter; }

// Σ a_i b_i in double, in 8 interleaved partial sums (a fixed order, so results are
// reproducible, and one the compiler can keep in vector registers).
static double dot(size_t n, const float *a, const float *b) {
    double s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += (double)a[i + k] * b[i + k];
    for (; i < n; i++)
        s[0] += (double)a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static double abs_max(size_t n, const float *a) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double v = fabs((double)a[i]);
        if (v > m || isnan(v))
            m = v; // NaN propagates, as torch's max does
    }
    return m;
}

// History entry k (0 = oldest).
static float *hist_y(Lbfgs *o, int k) {
    return o->old_dirs + (size_t)((o->hist_head + k) % o->cfg.history_size) * o->n;
}
static float *hist_s(Lbfgs *o, int k) {
    return o->old_stps + (size_t)((o->hist_head + k) % o->cfg.history_size) * o->n;
}
static double *hist_ro(Lbfgs *o, int k) { return &o->ro[(o->hist_head + k) % o->cfg.history_size]; }

// The L-BFGS update of the memory and the two-loop recursion: d = −H g.
static void lbfgs_direction(Lbfgs *o) {
    size_t n = o->n;
    // y = g − g_prev, s = d·t (the last step taken); kept only when the curvature y·s > 1e-10.
    float *y = o->q; // borrow the scratch for y, s before storing
    for (size_t i = 0; i < n; i++)
        y[i] = o->g[i] - o->prev_g[i];
    double ys = 0;
    for (size_t i = 0; i < n; i++)
        ys += (double)y[i] * (double)(float)(o->d[i] * o->t);
    if (ys > 1e-10) {
        if (o->hist_len == o->cfg.history_size) { // drop the oldest (PyTorch's pop(0))
            o->hist_head = (o->hist_head + 1) % o->cfg.history_size;
            o->hist_len--;
        }
        int k = o->hist_len++;
        float *hy = hist_y(o, k), *hs = hist_s(o, k);
        memcpy(hy, y, sizeof(float) * n);
        for (size_t i = 0; i < n; i++)
            hs[i] = (float)(o->d[i] * o->t);
        *hist_ro(o, k) = 1.0 / ys;
        o->h_diag = ys / dot(n, hy, hy);
    }
    // q = −g; for i = newest..oldest: α_i = ρ_i s_i·q; q −= α_i y_i
    float *q = o->q;
    for (size_t i = 0; i < n; i++)
        q[i] = -o->g[i];
    for (int k = o->hist_len - 1; k >= 0; k--) {
        const float *hy = hist_y(o, k), *hs = hist_s(o, k);
        double a = dot(n, hs, q) * *hist_ro(o, k);
        o->al[k] = a;
        float af = (float)a;
        for (size_t i = 0; i < n; i++)
            q[i] -= af * hy[i];
    }
    // d = H₀ q; for i = oldest..newest: β_i = ρ_i y_i·d; d += (α_i − β_i) s_i
    float hd = (float)o->h_diag;
    for (size_t i = 0; i < n; i++)
        o->d[i] = q[i] * hd;
    for (int k = 0; k < o->hist_len; k++) {
        const float *hy = hist_y(o, k), *hs = hist_s(o, k);
        double be = dot(n, hy, o->d) * *hist_ro(o, k);
        float c = (float)(o->al[k] - be);
        for (size_t i = 0; i < n; i++)
            o->d[i] += c * hs[i];
    }
}

FpStatus lbfgs_step(Lbfgs *o, float *x, LbfgsClosure f, void *ctx, double *orig_loss, FpError *err) {
    const LbfgsConfig *c = &o->cfg;
    size_t n = o->n;
    double loss;
    FP_TRY(f(ctx, x, o->g, &loss, err));
    if (orig_loss)
        *orig_loss = loss;
    int current_evals = 1;
    o->func_evals++;
    int opt_cond = abs_max(n, o->g) <= c->tolerance_grad;
    if (opt_cond)
        return FP_OK;
    for (int it = 0; it < c->max_iter;) {
        it++;
        o->n_iter++;
        // -- descent direction
        if (o->n_iter == 1) {
            for (size_t i = 0; i < n; i++)
                o->d[i] = -o->g[i];
            o->hist_len = o->hist_head = 0;
            o->h_diag = 1.0;
        } else
            lbfgs_direction(o);
        memcpy(o->prev_g, o->g, sizeof(float) * n);
        double prev_loss = o->prev_loss = loss;
        // -- step length: min(1, 1/‖g‖₁)·lr on the run's first iteration, then lr
        if (o->n_iter == 1) {
            double l1 = 0;
            for (size_t i = 0; i < n; i++)
                l1 += fabs((double)o->g[i]);
            o->t = (1.0 / l1 < 1.0 ? 1.0 / l1 : 1.0) * c->lr;
        } else
            o->t = c->lr;
        double gtd = dot(n, o->g, o->d);
        if (gtd > -c->tolerance_change) // directional derivative below tolerance
            break;
        // -- fixed step, no line search
        for (size_t i = 0; i < n; i++)
            x[i] += (float)o->t * o->d[i];
        int ls_evals = 0;
        if (it != c->max_iter) { // PyTorch skips the evaluation after the last iteration
            FP_TRY(f(ctx, x, o->g, &loss, err));
            opt_cond = abs_max(n, o->g) <= c->tolerance_grad;
            ls_evals = 1;
        }
        current_evals += ls_evals;
        o->func_evals += ls_evals;
        // -- stopping rules, in PyTorch's order
        if (it == c->max_iter)
            break;
        if (current_evals >= c->max_eval)
            break;
        if (opt_cond)
            break;
        double dmax = 0;
        for (size_t i = 0; i < n; i++) {
            double v = fabs((double)(float)(o->d[i] * o->t));
            if (v > dmax)
                dmax = v;
        }
        if (dmax <= c->tolerance_change)
            break;
        if (fabs(loss - prev_loss) < c->tolerance_change)
            break;
    }
    return FP_OK;
}
