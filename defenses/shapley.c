// Shapley values (exact and permutation-sampled), the model SHAP vector over feature
// groups, and the greedy SHAP-similarity merge (see defenses/shapley.h).
#include "defenses/shapley.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsonv.h"
#include "models/predict.h"
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

FpStatus shapley_parse_groups(const cJSON *obj, const char *path, const char *key, int cols, int *group_of_col,
                              int *n_groups, FpError *err) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[256];
    jv_path(p, sizeof p, path, key);
    if (!g) {
        for (int j = 0; j < cols; j++)
            group_of_col[j] = j;
        *n_groups = cols;
        return cols <= SHAPLEY_MAX_PLAYERS
                   ? FP_OK
                   : fp_fail(err, FP_EPARAM, "%s: %d columns: give at most %d groups", p, cols, SHAPLEY_MAX_PLAYERS);
    }
    int n = cJSON_GetArraySize(g);
    if (!cJSON_IsArray(g) || n < 1 || n > SHAPLEY_MAX_PLAYERS)
        return fp_fail(err, FP_EPARAM, "%s: must be an array of 1..%d arrays of column indices", p,
                       SHAPLEY_MAX_PLAYERS);
    for (int j = 0; j < cols; j++)
        group_of_col[j] = -1;
    for (int i = 0; i < n; i++) {
        const cJSON *gi = cJSON_GetArrayItem(g, i);
        if (!cJSON_IsArray(gi) || cJSON_GetArraySize(gi) < 1)
            return fp_fail(err, FP_EPARAM, "%s[%d]: must be a non-empty array of column indices", p, i);
        for (int k = 0; k < cJSON_GetArraySize(gi); k++) {
            const cJSON *v = cJSON_GetArrayItem(gi, k);
            if (!cJSON_IsNumber(v) || v->valuedouble != (int)v->valuedouble || v->valuedouble < 0 ||
                v->valuedouble >= cols)
                return fp_fail(err, FP_EPARAM, "%s[%d][%d]: must be a column index in [0, %d)", p, i, k, cols);
            int col = (int)v->valuedouble;
            if (group_of_col[col] >= 0)
                return fp_fail(err, FP_EPARAM, "%s[%d][%d]: column %d is already in group %d", p, i, k, col,
                               group_of_col[col]);
            group_of_col[col] = i;
        }
    }
    for (int j = 0; j < cols; j++)
        if (group_of_col[j] < 0)
            return fp_fail(err, FP_EPARAM, "%s: column %d is in no group", p, j);
    *n_groups = n;
    return FP_OK;
}

// -- the server's side -------------------------------------------------------------------------
struct ShapServer {
    Model *m;
    Tape *t;
    const Dataset *d;
    ShapInput in;
    float *x, *baseline;
    int *groups;
    uint32_t *eval_idx;
    int n_eval;
    float *w, *scratch;
    uint64_t seed;
    FILE *progress;
    double progress_seconds;
};

void shap_server_free(ShapServer *s) {
    if (!s)
        return;
    model_free(s->m);
    tape_free(s->t);
    free(s->x);
    free(s->baseline);
    free(s->groups);
    free(s->eval_idx);
    free(s->w);
    free(s->scratch);
    free(s);
}

int shap_server_rows(const ShapServer *s) { return s->in.rows; }
int shap_server_eval_samples(const ShapServer *s) { return s->n_eval; }
int shap_server_groups(const ShapServer *s) { return s->in.n_groups; }

ShapServer *shap_server_create(const Model *arch, const Dataset *d, const uint32_t *idx, int n,
                               const ShapServerConfig *cfg, FpError *err) {
    if (n < 1 || cfg->shap_samples < 1 || cfg->eval_samples < 1 || cfg->n_groups < 1) {
        fp_fail(err, FP_EPARAM, "shapley server: needs an evaluation set and >= 1 sample and group");
        return NULL;
    }
    ShapServer *s = fp_calloc(1, sizeof *s, err);
    if (!s)
        return NULL;
    size_t ss = dataset_sample_size(d);
    int cols = d->w, rows = cfg->shap_samples < n ? cfg->shap_samples : n;
    s->d = d;
    s->seed = cfg->seed;
    s->progress = cfg->progress;
    s->progress_seconds = cfg->progress_seconds > 0 ? cfg->progress_seconds : SHAP_PROGRESS_SECONDS;
    s->n_eval = cfg->eval_samples < n ? cfg->eval_samples : n;
    uint32_t *perm = fp_malloc(sizeof(uint32_t) * n, err);
    double *mean = fp_calloc(ss, sizeof(double), err);
    s->x = fp_malloc(sizeof(float) * ss * rows, err);
    s->baseline = fp_malloc(sizeof(float) * ss, err);
    s->groups = fp_malloc(sizeof(int) * cols, err);
    s->eval_idx = fp_malloc(sizeof(uint32_t) * s->n_eval, err);
    s->w = fp_malloc(sizeof(float) * arch->table.n_params, err);
    s->scratch = fp_malloc(sizeof(float) * (256 * (ss > (size_t)d->target_dim ? ss : (size_t)d->target_dim) + 256), err);
    s->m = model_clone(arch, arch->be, err);
    s->t = tape_create(arch->be);
    if (!perm || !mean || !s->x || !s->baseline || !s->groups || !s->eval_idx || !s->w || !s->scratch || !s->m ||
        !s->t) {
        free(perm);
        free(mean);
        shap_server_free(s);
        fp_fail(err, FP_ENOMEM, "shapley server: out of memory");
        return NULL;
    }
    // A fixed, seeded order of the server's samples: the first rows for SHAP, the first
    // eval_samples for p, the same every round.
    memcpy(perm, idx, sizeof(uint32_t) * n);
    RngStream rs = rng_stream(cfg->seed, RNG_DEFENSE_AUX, UINT32_MAX, UINT32_MAX);
    rng_shuffle_u32(&rs, perm, (uint32_t)n);
    for (int r = 0; r < rows; r++)
        memcpy(s->x + (size_t)r * ss, d->x + (size_t)perm[r] * ss, ss * sizeof(float));
    memcpy(s->eval_idx, perm, sizeof(uint32_t) * s->n_eval);
    for (int i = 0; i < n; i++) // the interventional mean baseline over the whole server set
        for (size_t j = 0; j < ss; j++)
            mean[j] += d->x[(size_t)idx[i] * ss + j];
    for (size_t j = 0; j < ss; j++)
        s->baseline[j] = (float)(mean[j] / n);
    memcpy(s->groups, cfg->group_of_col, sizeof(int) * cols);
    free(perm);
    free(mean);
    s->in = (ShapInput){.x = s->x, .rows = rows, .sample_size = ss, .cols = cols, .baseline = s->baseline,
                        .group_of_col = s->groups, .n_groups = cfg->n_groups, .kind = cfg->kind, .n_perm = cfg->n_perm};
    return s;
}

FpStatus shap_server_score(ShapServer *s, const float *base, double scale, const float *g, double *phi, double *p,
                           FpError *err) {
    size_t np = s->m->table.n_params;
    for (size_t i = 0; i < np; i++)
        s->w[i] = (float)(base[i] - scale * g[i]);
    model_set_params(s->m, s->w);
    RngStream rs = rng_stream(s->seed, RNG_DEFENSE_AUX, UINT32_MAX, UINT32_MAX - 1);
    FP_TRY(shapley_model_vector(s->m, s->t, &s->in, &rs, phi, err));
    // p = 1 / mean loss on the evaluation subset.
    Var *pv[64];
    if (s->m->table.n_layers > 64)
        return fp_fail(err, FP_EUNSUPPORTED, "shapley server: more than 64 parameter tensors");
    double sum = 0;
    for (int b0 = 0; b0 < s->n_eval; b0 += 256) {
        int bs = s->n_eval - b0 < 256 ? s->n_eval - b0 : 256;
        tape_reset(s->t);
        model_param_vars(s->m, s->t, 0, pv);
        Var *x = dataset_batch(s->t, s->d, s->eval_idx + b0, bs, s->scratch);
        Var *l = batch_loss(s->t, x ? model_forward(s->m, s->t, pv, x, 0) : NULL, s->d, s->eval_idx + b0, bs,
                            s->scratch);
        if (!l)
            return fp_fail(err, FP_ENOMEM, "shapley server: out of memory evaluating a model");
        sum += ad_item(s->t, l) * bs;
    }
    double loss = sum / s->n_eval;
    // A diverged model (non-finite loss) gets the smallest weight rather than failing the round.
    *p = isfinite(loss) ? (loss > 1e-12 ? 1.0 / loss : 1e12) : 1e-12;
    for (int i = 0; i < s->in.n_groups; i++)
        if (!isfinite(phi[i]))
            phi[i] = 0;
    return FP_OK;
}

typedef struct {
    ShapServer *s;
    const float *base;
    double scale;
    int scored, to_score;   // models scored in this merge, of 2k − 2
    double t0, next_report; // monotonic seconds
} ServerScoreCtx;

// Scores one model of the merge and, when the interval has passed, says how far it is.
static FpStatus server_score_fn(void *ctx, const float *g, double *phi, double *p, FpError *err) {
    ServerScoreCtx *c = ctx;
    FpStatus st = shap_server_score(c->s, c->base, c->scale, g, phi, p, err);
    c->scored++;
    if (st == FP_OK && c->s->progress) {
        double now = fp_monotonic_seconds();
        if (now >= c->next_report) {
            double elapsed = now - c->t0;
            fprintf(c->s->progress, "shapley merge: %d/%d models scored (%.0f s, ETA %.0f s)\n", c->scored,
                    c->to_score, elapsed, elapsed / c->scored * (c->to_score - c->scored));
            fflush(c->s->progress);
            c->next_report = now + c->s->progress_seconds;
        }
    }
    return st;
}

FpStatus shap_server_merge(ShapServer *s, const float *base, double scale, const float *const *g, int k, float *out,
                           MergeStep *steps, FpError *err) {
    int dim = s->in.n_groups;
    double *phi = fp_malloc(sizeof(double) * (size_t)dim * (k > 0 ? k : 1), err);
    double *p = fp_malloc(sizeof(double) * (k > 0 ? k : 1), err);
    FpStatus st = phi && p ? FP_OK : FP_ENOMEM;
    double t0 = fp_monotonic_seconds();
    ServerScoreCtx c = {.s = s, .base = base, .scale = scale, .to_score = k > 1 ? 2 * k - 2 : k, .t0 = t0,
                        .next_report = t0 + s->progress_seconds};
    for (int j = 0; st == FP_OK && j < k; j++)
        st = server_score_fn(&c, g[j], phi + (size_t)j * dim, &p[j], err);
    if (st == FP_OK)
        st = shapley_merge(g, k, s->m->table.n_params, dim, phi, p, server_score_fn, &c, out, steps, err);
    free(phi);
    free(p);
    return st;
}
