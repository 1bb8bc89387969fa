// Shapley values over feature groups and the SHAP-similarity merge of client models
// (Liu et al. 2025, Eqs. 21–22; the server side of defenses/layerwise.c).
//
// Shapley values (Eq. 21):
//   φ_i = Σ_{S ⊆ N∖{i}} |S|!(n−|S|−1)!/n! · [v(S ∪ {i}) − v(S)],
// computed exactly over all 2^n coalitions when n <= SHAPLEY_EXACT_MAX, else estimated by
// averaging marginal contributions along sampled permutations (unbiased; each
// permutation costs n + 1 coalition values). The value function is vector-valued: one
// value per "row" (per sample), so per-sample attributions come from the same coalition
// evaluations as the mean.
//
// Model SHAP vector (A8 of the digest): players are groups of feature columns (the last
// axis of a sample: features per time step); v_r(S) is the model's prediction for sample
// r with the columns of absent groups replaced, at every time step, by their mean over
// the server's evaluation set (the interventional mean baseline). The vector is the
// mean over samples of |φ_i| (default: the usual global SHAP importance) or of φ_i.
// With a mean baseline the signed mean of φ vanishes for a model that is linear in the
// features (φ_i(x) = Σ_{j∈G_i} w_j (x_j − x̄_j), whose mean is 0), hence mean |φ|.
//
// Merge (Fig. 2, Eq. 22): while more than one model is left, take the pair with the
// highest cosine similarity of SHAP vectors (ties: the pair with the smallest ids, ids
// being 0..k−1 for the inputs and k, k+1, ... for merged models in creation order),
// replace it by W' = (p_a W_a + p_b W_b)/(p_a + p_b), and score W' (its SHAP vector and
// performance p) unless it is the last one. Models are flat float vectors; the merge
// is affine, so it may run on gradients g with W = w_t − η g.
#ifndef FEDPRIV_DEFENSES_SHAPLEY_H
#define FEDPRIV_DEFENSES_SHAPLEY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/rng.h"
#include "core/status.h"

struct Model;
struct Tape;

#define SHAPLEY_EXACT_MAX 10
#define SHAPLEY_MAX_PLAYERS 63

// v(S) for a batch of coalitions: out[j*rows + r] = v_r(masks[j]) (bit i of a mask set =
// player i present).
typedef FpStatus (*ShapleyValueFn)(void *ctx, const uint64_t *masks, int n_masks, double *out, FpError *err);

// phi[i*rows + r] for players i < n (1 <= n <= SHAPLEY_MAX_PLAYERS): exact when
// n <= SHAPLEY_EXACT_MAX, else the mean over n_perm permutations drawn from rng.
FpStatus shapley_values(int n, int rows, ShapleyValueFn v, void *ctx, int n_perm, RngStream *rng, double *phi,
                        FpError *err);

typedef enum { SHAP_MEAN_ABS = 0, SHAP_MEAN = 1 } ShapVectorKind;

// The evaluation samples and the baseline of a model SHAP vector.
typedef struct ShapInput {
    const float *x;           // rows samples, each sample_size floats (steps × cols)
    int rows;
    size_t sample_size;
    int cols;                 // columns per step (the sample's last axis); sample_size % cols == 0
    const float *baseline;    // sample_size floats: the per-position mean the absent groups take
    const int *group_of_col;  // cols entries in [0, n_groups)
    int n_groups;
    ShapVectorKind kind;
    int n_perm;               // permutations when n_groups > SHAPLEY_EXACT_MAX
} ShapInput;

// The SHAP vector (n_groups doubles) of model m (its current parameters; output 0 of a
// regression model) on in. tape is scratch (reset here). rng is used only when sampling.
FpStatus shapley_model_vector(struct Model *m, struct Tape *tape, const ShapInput *in, RngStream *rng, double *vec,
                              FpError *err);

// Cosine similarity; 0 when either vector is 0.
double shapley_cosine(const double *a, const double *b, int n);

// Scores a merged model: its SHAP vector (dim doubles) and performance p (> 0, larger is better).
typedef FpStatus (*MergeScoreFn)(void *ctx, const float *model, double *phi, double *p, FpError *err);

// One merge: nodes a and b (ids as above), their cosine and a's weight p_a/(p_a+p_b).
typedef struct MergeStep {
    int a, b;
    double cosine, weight_a;
} MergeStep;

// Merges models[0..k) (each n floats) with SHAP vectors phi[i*dim ..] and scores p[i]
// into out (n floats). steps (k − 1 entries, may be NULL) records the merge order.
// k >= 1; p must be positive and finite (FP_EPARAM otherwise).
FpStatus shapley_merge(const float *const *models, int k, size_t n, int dim, const double *phi, const double *p,
                       MergeScoreFn score, void *ctx, float *out, MergeStep *steps, FpError *err);

// obj[key] = [[0], [1], [2, 3], ...]: the feature columns (a sample's last axis, cols of
// them) of each group, into group_of_col (cols entries) and *n_groups. Absent: one group
// per column. Every column must be in exactly one group (FP_EPARAM naming the JSON path).
FpStatus shapley_parse_groups(const cJSON *obj, const char *path, const char *key, int cols, int *group_of_col,
                              int *n_groups, FpError *err);

// -- the server's side of the merge -----------------------------------------------------
// A server holding an evaluation set (samples idx of d, never used by clients) and a
// clone of the model architecture. The SHAP rows are a fixed, seeded subset of
// shap_samples; p is 1/(mean loss) on a fixed subset of eval_samples (A7: 1/MSE for
// regression); the baseline of absent groups is the per-position mean over the whole set.
typedef struct ShapServerConfig {
    int shap_samples, eval_samples;
    const int *group_of_col;  // d->w entries (copied)
    int n_groups;
    ShapVectorKind kind;
    int n_perm;
    uint64_t seed;
    FILE *progress;           // a merge's progress, a line at most every progress_seconds; NULL: silent
    double progress_seconds;  // 0: SHAP_PROGRESS_SECONDS
} ShapServerConfig;

// A merge of k uploads scores 2k − 2 models (the k uploads, then every merged model but
// the last), each a SHAP vector and a loss over the evaluation set: over a thousand
// clients that is minutes, so the server says how far it is.
#define SHAP_PROGRESS_SECONDS 10.0

typedef struct ShapServer ShapServer;
struct Dataset;

ShapServer *shap_server_create(const struct Model *arch, const struct Dataset *d, const uint32_t *idx, int n,
                               const ShapServerConfig *cfg, FpError *err);
void shap_server_free(ShapServer *s);
int shap_server_rows(const ShapServer *s);
int shap_server_eval_samples(const ShapServer *s);
int shap_server_groups(const ShapServer *s);

// The SHAP vector (n_groups doubles) and p of W = base − scale·g.
FpStatus shap_server_score(ShapServer *s, const float *base, double scale, const float *g, double *phi, double *p,
                           FpError *err);
// Eqs. 21–22 on k uploads g_j (W_j = base − scale·g_j): the merged g into out.
FpStatus shap_server_merge(ShapServer *s, const float *base, double scale, const float *const *g, int k, float *out,
                           MergeStep *steps, FpError *err);

#endif
