// The closed-form input recovery from a first dense layer with a bias (see
// attacks/inversion.h, inversion_analytic_run): the ratios of the first layer's weight
// and bias gradients, grouped, B of them returned as the batch.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/inversion.h"
#include "core/clock.h"

int inversion_analytic_applies(const Model *m) {
    const ParamTable *t = &m->table;
    if (!m->ops->dense_input || t->n_layers < 2)
        return 0;
    const ParamLayer *w = &t->layers[0], *b = &t->layers[1];
    size_t input = (size_t)m->in.c * (size_t)m->in.h * (size_t)m->in.w;
    return w->kind == PARAM_WEIGHT && w->ndim == 2 && (size_t)w->shape[1] == input && w->trainable &&
           b->kind == PARAM_BIAS && b->ndim == 1 && b->shape[0] == w->shape[0] && b->trainable;
}

typedef struct Unit {
    int index;
    double magnitude; // |∂L/∂b_i|
} Unit;

static int by_magnitude(const void *a, const void *b) {
    const Unit *x = a, *y = b;
    if (x->magnitude != y->magnitude)
        return x->magnitude < y->magnitude ? 1 : -1;
    return (x->index > y->index) - (x->index < y->index); // a total order: the same pick every run
}

static double dist2(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t k = 0; k < n; k++) {
        double d = (double)a[k] - (double)b[k];
        s += d * d;
    }
    return s;
}

// The first layer's residual (inversion.h): each unit against its best candidate.
static double residual(const float *gw, const float *gb, int rows, size_t D, const float *x, int B) {
    double num = 0, den = 0;
    for (int i = 0; i < rows; i++) {
        const float *g = gw + (size_t)i * D;
        double best = INFINITY, norm = 0;
        for (size_t k = 0; k < D; k++)
            norm += (double)g[k] * g[k];
        for (int j = 0; j < B; j++) {
            double s = 0;
            for (size_t k = 0; k < D; k++) {
                double d = (double)g[k] - (double)gb[i] * (double)x[(size_t)j * D + k];
                s += d * d;
            }
            best = s < best ? s : best;
        }
        num += best;
        den += norm;
    }
    return den > 0 ? num / den : NAN;
}

FpStatus inversion_analytic_run(const InversionProblem *p, InversionResult *out, FpError *err) {
    memset(out, 0, sizeof *out);
    const Model *m = p->model;
    if (!inversion_analytic_applies(m))
        return fp_fail(err, FP_EPARAM, "the analytic recovery needs a first dense layer with a bias on the input; "
                       "model %s has none", m->cfg.name);
    int B = p->batch, K = m->in.n_classes;
    const ParamLayer *lw = &m->table.layers[0], *lb = &m->table.layers[1];
    int rows = lw->shape[0];
    size_t D = (size_t)lw->shape[1];
    const float *gw = p->target + lw->offset, *gb = p->target + lb->offset;
    double t0 = fp_clock_seconds(CLOCK_MONOTONIC), c0 = fp_clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    *out = (InversionResult){.batch = B, .c = m->in.c, .h = m->in.h, .w = m->in.w, .classes = K, .n_curve = 1,
                             .best_restart = 0};
    out->x = calloc((size_t)B * D, sizeof(float));
    out->label_probs = p->labels ? NULL : calloc((size_t)B * (size_t)K, sizeof(float));
    out->loss_curve = malloc(sizeof(double));
    out->snapshot_steps = malloc(sizeof(int));
    out->snapshots = malloc(sizeof(float));
    out->restart_losses = malloc(sizeof(double));
    int n_top = rows < INV_ANALYTIC_UNITS ? rows : INV_ANALYTIC_UNITS;
    Unit *units = malloc(sizeof(Unit) * (size_t)rows);
    float *cand = malloc(sizeof(float) * (size_t)n_top * D); // one representative per group
    int *members = calloc((size_t)n_top, sizeof(int)), *order = malloc(sizeof(int) * (size_t)n_top);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)B);
    float *r = malloc(sizeof(float) * D); // the unit's ratio
    FpStatus st = FP_OK;
    if (!out->x || (!p->labels && !out->label_probs) || !out->loss_curve || !out->snapshot_steps ||
        !out->snapshots || !out->restart_losses || !units || !cand || !members || !order || !labels || !r) {
        st = fp_fail(err, FP_ENOMEM, "out of memory for the analytic recovery");
        goto done;
    }
    int usable = 0;
    for (int i = 0; i < rows; i++) {
        double g = fabs((double)gb[i]);
        if (isfinite(g) && g > 0)
            units[usable++] = (Unit){.index = i, .magnitude = g};
    }
    qsort(units, (size_t)usable, sizeof *units, by_magnitude);
    if (usable > n_top)
        usable = n_top;
    int groups = 0;
    for (int u = 0; u < usable; u++) {
        const float *g = gw + (size_t)units[u].index * D;
        double inv = 1.0 / (double)gb[units[u].index], norm = 0;
        for (size_t k = 0; k < D; k++) {
            r[k] = (float)((double)g[k] * inv);
            norm += (double)r[k] * r[k];
        }
        int found = -1;
        for (int q = 0; q < groups && found < 0; q++)
            if (dist2(r, cand + (size_t)q * D, D) <= INV_ANALYTIC_SAME * INV_ANALYTIC_SAME * norm)
                found = q;
        if (found < 0) {
            found = groups++;
            memcpy(cand + (size_t)found * D, r, sizeof(float) * D);
        }
        members[found]++;
    }
    // Groups by members, then by first appearance (the larger |∂L/∂b|): a stable insertion sort.
    for (int q = 0; q < groups; q++) {
        int k = q;
        while (k > 0 && members[order[k - 1]] < members[q]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = q;
    }
    for (int j = 0; j < B && groups > 0; j++)
        memcpy(out->x + (size_t)j * D, cand + (size_t)order[j < groups ? j : 0] * D, sizeof(float) * D);
    out->loss = groups > 0 ? residual(gw, gb, rows, D, out->x, B) : NAN;
    out->loss_curve[0] = out->restart_losses[0] = out->loss;
    if (!p->labels) {
        int last = model_last_weight_layer(m);
        const ParamLayer *ll = last >= 0 ? &m->table.layers[last] : NULL;
        if (ll && ll->ndim == 2 && ll->shape[0] == K) {
            idlg_labels(p->target + ll->offset, ll->shape[0], ll->shape[1], B, labels);
            for (int j = 0; j < B; j++)
                out->label_probs[(size_t)j * K + labels[j]] = 1.0f;
        } else // no linear classifier to read: no label information
            for (size_t k = 0; k < (size_t)B * (size_t)K; k++)
                out->label_probs[k] = 1.0f / (float)K;
    }
    out->seconds = fp_clock_seconds(CLOCK_MONOTONIC) - t0;
    out->cpu_seconds = fp_clock_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
done:
    free(r);
    free(units);
    free(cand);
    free(members);
    free(order);
    free(labels);
    if (st != FP_OK)
        inversion_result_free(out);
    return st;
}
