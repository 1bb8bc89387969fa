// Shapley values (exact and permutation-sampled), the model SHAP vector over feature
// groups, and the greedy SHAP-similarity merge (see defenses/shapley.h).
#include "defenses/shapley.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

#define SHAP_BATCH_ROWS 4096 // samples per forward pass when evaluating coalitions

static int popcount64(uint64_t x) { return __builtin_popcountll(x); }

// Evaluates v on masks[0..n_masks) in chunks whose rows fit one forward batch.
static FpStatus eval_masks(ShapleyValueFn v, void *ctx, const uint64_t *masks, int n_masks, int rows, double *out,
                           FpError *err) {
    int chunk = SHAP_BATCH_ROWS / (rows > 0 ? rows : 1);
    if (chunk < 1)
        chunk = 1;
    for (int j = 0; j < n_masks; j += chunk) {
        int m = n_masks - j < chunk ? n_masks - j : chunk;
        FP_TRY(v(ctx, masks + j, m, out + (size_t)j * rows, err));
    }
    return FP_OK;
}

FpStatus shapley_values(int n, int rows, ShapleyValueFn v, void *ctx, int n_perm, RngStream *rng, double *phi,
                        FpError *err) {
    if (n < 1 || n > SHAPLEY_MAX_PLAYERS || rows < 1)
        return fp_fail(err, FP_EPARAM, "shapley: need 1..%d players and >= 1 row, got %d and %d",
                       SHAPLEY_MAX_PLAYERS, n, rows);
    memset(phi, 0, sizeof(double) * (size_t)n * rows);
    if (n <= SHAPLEY_EXACT_MAX) {
        // Eq. 21 over all 2^n coalitions; weight |S|!(n-|S|-1)!/n! = 1 / (n · C(n-1, |S|)).
        int nm = 1 << n;
        uint64_t *masks = fp_malloc(sizeof(uint64_t) * nm, err);
        double *val = fp_malloc(sizeof(double) * (size_t)nm * rows, err);
        double w[SHAPLEY_EXACT_MAX];
        if (!masks || !val) {
            free(masks);
            free(val);
            return FP_ENOMEM;
        }
        for (int s = 0; s < n; s++) {
            double binom = 1; // C(n-1, s)
            for (int k = 1; k <= s; k++)
                binom = binom * (n - 1 - s + k) / k;
            w[s] = 1.0 / (n * binom);
        }
        for (int m = 0; m < nm; m++)
            masks[m] = (uint64_t)m;
        FpStatus st = eval_masks(v, ctx, masks, nm, rows, val, err);
        for (int i = 0; st == FP_OK && i < n; i++)
            for (int m = 0; m < nm; m++) {
                if (m & (1 << i))
                    continue;
                double ws = w[popcount64((uint64_t)m)];
                const double *with = val + (size_t)(m | (1 << i)) * rows, *without = val + (size_t)m * rows;
                for (int r = 0; r < rows; r++)
                    phi[(size_t)i * rows + r] += ws * (with[r] - without[r]);
            }
        free(masks);
        free(val);
        return st;
    }
    if (n_perm < 1 || !rng)
        return fp_fail(err, FP_EPARAM, "shapley: %d players need permutation sampling (n_perm >= 1 and an rng)", n);
    // Permutation sampling: the marginal contribution of each player along a uniformly
    // random order is an unbiased estimate of its Shapley value.
    uint64_t *masks = fp_malloc(sizeof(uint64_t) * (n + 1), err);
    double *val = fp_malloc(sizeof(double) * (size_t)(n + 1) * rows, err);
    uint32_t *perm = fp_malloc(sizeof(uint32_t) * n, err);
    FpStatus st = masks && val && perm ? FP_OK : FP_ENOMEM;
    for (int p = 0; st == FP_OK && p < n_perm; p++) {
        for (int i = 0; i < n; i++)
            perm[i] = (uint32_t)i;
        rng_shuffle_u32(rng, perm, (uint32_t)n);
        masks[0] = 0;
        for (int k = 0; k < n; k++)
            masks[k + 1] = masks[k] | ((uint64_t)1 << perm[k]);
        st = eval_masks(v, ctx, masks, n + 1, rows, val, err);
        for (int k = 0; st == FP_OK && k < n; k++)
            for (int r = 0; r < rows; r++)
                phi[(size_t)perm[k] * rows + r] += val[(size_t)(k + 1) * rows + r] - val[(size_t)k * rows + r];
    }
    for (size_t i = 0; st == FP_OK && i < (size_t)n * rows; i++)
        phi[i] /= n_perm;
    free(masks);
    free(val);
    free(perm);
    return st;
}

// -- the model SHAP vector -------------------------------------------------------------
typedef struct {
    Model *m;
    Tape *t;
    const ShapInput *in;
    float *batch;       // SHAP_BATCH_ROWS (at least rows) samples
    float *pred;
} ModelValueCtx;

static FpStatus model_value(void *vctx, const uint64_t *masks, int n_masks, double *out, FpError *err) {
    ModelValueCtx *c = vctx;
    const ShapInput *in = c->in;
    size_t ss = in->sample_size;
    int steps = (int)(ss / in->cols), total = n_masks * in->rows;
    for (int j = 0; j < n_masks; j++)
        for (int r = 0; r < in->rows; r++) {
            float *dst = c->batch + ((size_t)j * in->rows + r) * ss;
            memcpy(dst, in->x + (size_t)r * ss, ss * sizeof(float));
            for (int col = 0; col < in->cols; col++)
                if (!(masks[j] >> in->group_of_col[col] & 1))
                    for (int s = 0; s < steps; s++)
                        dst[(size_t)s * in->cols + col] = in->baseline[(size_t)s * in->cols + col];
        }
    tape_reset(c->t);
    Var *p[64];
    if (c->m->table.n_layers > 64)
        return fp_fail(err, FP_EUNSUPPORTED, "shapley: models with more than 64 parameter tensors are not supported");
    if (model_param_vars(c->m, c->t, 0, p) != FP_OK)
        return fp_fail(err, FP_ENOMEM, "shapley: out of memory");
    int shape[4] = {total, c->m->in.c, c->m->in.h, c->m->in.w};
    Var *x = ad_from_host(c->t, c->batch, 4, shape, 0);
    Var *y = x ? model_forward(c->m, c->t, p, x, 0) : NULL;
    if (!y)
        return fp_fail(err, tape_status(c->t) == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED,
                       "shapley: the model's forward pass failed");
    int od = (int)(y->t.numel / (size_t)total);
    ad_to_host(c->t, y, c->pred);
    for (int i = 0; i < total; i++)
        out[i] = c->pred[(size_t)i * od];
    return FP_OK;
}

FpStatus shapley_model_vector(Model *m, Tape *tape, const ShapInput *in, RngStream *rng, double *vec, FpError *err) {
    size_t msize = (size_t)m->in.c * m->in.h * m->in.w;
    if (in->rows < 1 || in->rows > SHAP_BATCH_ROWS || in->cols < 1 || in->sample_size != msize ||
        in->sample_size % (size_t)in->cols != 0 || in->n_groups < 1)
        return fp_fail(err, FP_EPARAM, "shapley: %d samples of %zu values in %d columns do not fit the model's %zu",
                       in->rows, in->sample_size, in->cols, msize);
    int out_dim = m->in.target_dim ? m->in.target_dim : m->in.n_classes;
    ModelValueCtx c = {.m = m, .t = tape, .in = in};
    int chunk_rows = (SHAP_BATCH_ROWS / in->rows) * in->rows;
    c.batch = fp_malloc(sizeof(float) * (size_t)chunk_rows * in->sample_size, err);
    c.pred = fp_malloc(sizeof(float) * (size_t)chunk_rows * (out_dim > 0 ? out_dim : 1), err);
    double *phi = fp_malloc(sizeof(double) * (size_t)in->n_groups * in->rows, err);
    FpStatus st = c.batch && c.pred && phi ? FP_OK : FP_ENOMEM;
    if (st == FP_OK)
        st = shapley_values(in->n_groups, in->rows, model_value, &c, in->n_perm, rng, phi, err);
    for (int g = 0; st == FP_OK && g < in->n_groups; g++) {
        double s = 0;
        for (int r = 0; r < in->rows; r++) {
            double v = phi[(size_t)g * in->rows + r];
            s += in->kind == SHAP_MEAN_ABS ? fabs(v) : v;
        }
        vec[g] = s / in->rows;
    }
    free(c.batch);
    free(c.pred);
    free(phi);
    return st;
}

double shapley_cosine(const double *a, const double *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

// -- the merge ---------------------------------------------------------------------------
FpStatus shapley_merge(const float *const *models, int k, size_t n, int dim, const double *phi, const double *p,
                       MergeScoreFn score, void *ctx, float *out, MergeStep *steps, FpError *err) {
    if (k < 1 || dim < 1)
        return fp_fail(err, FP_EPARAM, "shapley merge: need >= 1 model and a SHAP dimension >= 1");
    for (int i = 0; i < k; i++)
        if (!(p[i] > 0) || !isfinite(p[i]))
            return fp_fail(err, FP_EPARAM, "shapley merge: performance of model %d must be positive, got %g", i, p[i]);
    int total = 2 * k - 1; // nodes: k inputs, then k-1 merges
    const float **w = fp_calloc((size_t)total, sizeof *w, err);
    float *merged = k > 1 ? fp_malloc(sizeof(float) * n * (size_t)(k - 1), err) : NULL;
    double *vphi = fp_malloc(sizeof(double) * (size_t)total * dim, err);
    double *vp = fp_malloc(sizeof(double) * total, err);
    int *alive = fp_malloc(sizeof(int) * total, err);
    FpStatus st = w && (merged || k == 1) && vphi && vp && alive ? FP_OK : FP_ENOMEM;
    if (st != FP_OK)
        goto out;
    for (int i = 0; i < k; i++) {
        w[i] = models[i];
        memcpy(vphi + (size_t)i * dim, phi + (size_t)i * dim, sizeof(double) * dim);
        vp[i] = p[i];
        alive[i] = 1;
    }
    int next = k;
    for (int left = k; left > 1; left--) {
        int ba = -1, bb = -1;
        double best = -INFINITY;
        for (int a = 0; a < next; a++) {
            if (!alive[a])
                continue;
            for (int b = a + 1; b < next; b++) {
                if (!alive[b])
                    continue;
                double cs = shapley_cosine(vphi + (size_t)a * dim, vphi + (size_t)b * dim, dim);
                if (cs > best) { // strict: ties keep the earlier (smaller-id) pair
                    best = cs;
                    ba = a;
                    bb = b;
                }
            }
        }
        // Eq. 22: W' = (p_a W_a + p_b W_b) / (p_a + p_b).
        double wa = vp[ba] / (vp[ba] + vp[bb]);
        float *dst = merged + (size_t)(next - k) * n;
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)(wa * w[ba][i] + (1 - wa) * w[bb][i]);
        if (steps)
            steps[next - k] = (MergeStep){.a = ba, .b = bb, .cosine = best, .weight_a = wa};
        alive[ba] = alive[bb] = 0;
        w[next] = dst;
        alive[next] = 1;
        if (left > 2) { // the last model needs no score
            st = score(ctx, dst, vphi + (size_t)next * dim, &vp[next], err);
            if (st == FP_OK && (!(vp[next] > 0) || !isfinite(vp[next])))
                st = fp_fail(err, FP_EPARAM, "shapley merge: merged model %d scored %g (must be positive)", next,
                             vp[next]);
            if (st != FP_OK)
                goto out;
        }
        next++;
    }
    memcpy(out, w[next - 1], n * sizeof(float));
out:
    free(w);
    free(merged);
    free(vphi);
    free(vp);
    free(alive);
    return st;
}
