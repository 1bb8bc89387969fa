// Gradient inversion by gradient matching: the optimisation shared by DLG (Zhu et al.,
// NeurIPS 2019, "Deep Leakage from Gradients") and iDLG (Zhao et al. 2020, "iDLG:
// Improved Deep Leakage from Gradients"), plus the options of Geiping et al. (NeurIPS
// 2020, "Inverting Gradients"): cosine distance and a total-variation prior.
//
// Given a model at weights θ and an observed gradient g (the target), find a dummy
// batch x′ (and, for DLG, dummy label logits y′) minimising
//   D(x′, y′) = Σ_layers ‖∇θ L(f_θ(x′), softmax(y′)) − g‖²                  (DLG eq. 4)
// or, with "cosine", 1 − ⟨∇θL, g⟩ / (‖∇θL‖ ‖g‖) over all trainable parameters at
// once (Geiping eq. 4), plus tv·TV(x′) when tv > 0, where TV is the mean absolute
// difference of horizontally and vertically adjacent pixels (their anisotropic TV).
// L is the batch-mean cross-entropy, with soft targets softmax(y′) (DLG) or the fixed
// labels (iDLG). ∇θL is taken with create_graph, so ∂D/∂x′ and ∂D/∂y′ are exact second-
// order derivatives (core/autodiff.h). The optimiser is attacks/lbfgs.h with PyTorch's
// defaults, or Geiping et al.'s (§4 and their reference code): Adam on the sign of
// ∂D/∂x′, the learning rate divided by 10 after 3/8, 5/8 and 7/8 of the steps, and x′
// projected onto the pixel box [0, 1] after every step. x′ and y′ start from N(0,1)
// drawn from rng_stream(seed, RNG_ATTACK, first_restart + restart, stream): element i
// of the flat vector [x′, y′] is rng_normal_at(&s, i), so DLG, iDLG and Inverting
// Gradients start from the same x′.
#ifndef FEDPRIV_ATTACKS_INVERSION_H
#define FEDPRIV_ATTACKS_INVERSION_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "attacks/lbfgs.h"
#include "core/progress.h"
#include "models/model.h"

typedef enum { INV_DISTANCE_L2 = 0, INV_DISTANCE_COSINE = 1 } InvDistance;
// INV_OPTIMIZER_ANALYTIC is no optimiser: the closed form below (inversion_analytic_run),
// which inversion_run dispatches to; steps, restarts, distance and tv play no part.
typedef enum { INV_OPTIMIZER_LBFGS = 0, INV_OPTIMIZER_ADAM_SIGNED = 1, INV_OPTIMIZER_ANALYTIC = 2 } InvOptimizer;

// Adam on signed gradients (Geiping et al. 2020): PyTorch's Adam (β 0.9, 0.999, ε 1e-8)
// fed sign(∂D/∂x′).
typedef struct InvAdamConfig {
    double lr;             // initial learning rate (Geiping: 0.1)
    int step_decay;        // 1: lr × 0.1 after steps/2.667, steps/1.6, steps/1.142 (their MultiStepLR)
    int boxed;             // 1: clamp x′ to [0, 1] after every step
} InvAdamConfig;

// The victim's local procedure, simulated on x′ (Geiping et al. §4, "multiple local
// steps"): E full-batch SGD steps from θ with the federation's lr, momentum μ and
// weight decay λ, d_k = ∇L(θ_k) + λθ_k, v_k = μv_{k−1} + d_k, θ_{k+1} = θ_k − lr·v_k
// (fl/local.c's rule), and the estimate the server forms from the upload,
// (θ − θ_E)/(lr·E) − λθ = (1/E)Σ_k v_k − λθ (upload_gradient_estimate), is compared with
// the target. E = 1 (or steps 0) is the gradient ∇L(θ) itself, DLG's objective.
typedef struct InvLocalSteps {
    int steps;             // E (0 or 1: one gradient)
    double lr, momentum, weight_decay;
} InvLocalSteps;

typedef struct InversionConfig {
    int steps;             // L-BFGS step() calls per restart (the reference: 300)
    int restarts;          // independent starts; the one with the lowest final matching loss is kept
    InvDistance distance;
    double tv;             // weight of the total-variation prior (0: off)
    int snapshot_every;    // keep x′ after every k steps (0: none)
    InvOptimizer optimizer;
    LbfgsConfig lbfgs;     // INV_OPTIMIZER_LBFGS
    InvAdamConfig adam;    // INV_OPTIMIZER_ADAM_SIGNED (x′ only: labels must be given)
} InversionConfig;

// The inversion steps of an attack's jobs, shared by its worker threads: a line on f at
// most every INV_PROGRESS_SECONDS with the steps done of the total and the ETA (steps ×
// restarts × jobs: up to 10^6 × 1000 per batch, days of work at a millisecond a step).
#define INV_PROGRESS_SECONDS 10.0
typedef struct InvProgress {
    pthread_mutex_t lock; // the jobs' threads add to one count
    FpProgress steps;     // core/progress.h; labelled with the attack's name
} InvProgress;

void inv_progress_init(InvProgress *p, FILE *f, const char *name, long long total);
void inv_progress_add(InvProgress *p, long long steps);
void inv_progress_free(InvProgress *p);

typedef struct InversionProblem {
    const Model *model;    // θ: the weights the target gradient was taken at (not modified)
    const float *target;   // g: host, model->table.n_params floats (non-trainable layers ignored)
    int batch;             // B ≥ 1 images
    const int32_t *labels; // iDLG: the B labels to use (hard targets); NULL: DLG (learn y′)
    uint64_t seed;
    uint32_t stream;       // RNG_ATTACK stream id (e.g. the batch number), so batches differ
    uint32_t first_restart; // restart r starts from restart stream first_restart + r (attacker
                            // variants draw disjoint starts: attacks/attacker.h)
    InvLocalSteps local;    // the victim's local steps to simulate (zero: one gradient)
    InvProgress *progress;  // where the steps are counted (borrowed); NULL: silent
} InversionProblem;

typedef struct InversionResult {
    int batch, c, h, w, classes;
    float *x;              // best restart's final x′, B × c×h×w (unclamped)
    float *label_probs;    // DLG: softmax(y′), B × classes; NULL for iDLG
    double loss;           // its final matching loss D (NaN when the run diverged)
    double *loss_curve;    // steps + 1 values: D after 0, 1, ..., steps L-BFGS steps
    int n_curve;
    int n_snapshots;
    int *snapshot_steps;   // after which step each snapshot was taken
    float *snapshots;      // n_snapshots × B × c×h×w
    int best_restart;
    double *restart_losses; // final D of each restart
    long evaluations;      // closure evaluations over all restarts
    double seconds;        // wall time of the optimisation (all restarts)
    double cpu_seconds;    // CPU time of the calling thread (BLAS runs single-threaded inside)
} InversionResult;

// Runs the inversion. Fails with FP_EPARAM on a bad problem (batch < 1, a model
// without image input or classes), FP_ENOMEM, or whatever the tape reports.
FpStatus inversion_run(const InversionProblem *p, const InversionConfig *cfg, InversionResult *out, FpError *err);
void inversion_result_free(InversionResult *r);

// The closed-form input recovery from a first dense layer with a bias (Phong et al. 2017,
// "Privacy-Preserving Deep Learning via Additively Homomorphic Encryption", §3; Geiping et
// al. 2020, §3; breaching's analytic attacks). For z = W·x + b on the input x, the batch-mean
// loss has ∂L/∂W_i = (1/B) Σ_b δ_bi x_b and ∂L/∂b_i = (1/B) Σ_b δ_bi, so each unit i with
// ∂L/∂b_i ≠ 0 gives the ratio r_i = (∂L/∂W_i)/(∂L/∂b_i), a weighted mean of the images
// that reach it. With B = 1 every r_i is the image, exactly up to float rounding; with
// B > 1 a unit that only one image activates (a ReLU) gives that image, and such ratios
// recur. The recovery takes the INV_ANALYTIC_UNITS units of largest |∂L/∂b_i|, groups
// ratios within INV_ANALYTIC_SAME relative L2 distance, and returns the B groups with the
// most members (ties: the larger |∂L/∂b|), padding with the first. Any scaling of the
// target (a clip, 1/m, lr) divides out; noise does not. Its matching loss is the
// first layer's residual Σ_i min_j ‖g_Wi − g_bi·x̂_j‖² / Σ_i ‖g_Wi‖² (0 when every unit
// is explained), NaN when no unit has a finite non-zero bias gradient. DLG's labels
// (p->labels NULL) are iDLG's rule on the last layer, one-hot, in the rule's order.
// No randomness, no optimisation: one entry in the loss curve, no snapshots, no
// evaluations.
#define INV_ANALYTIC_UNITS 256
#define INV_ANALYTIC_SAME 1e-3
// 1 when m's forward starts with a dense layer on its input (ModelOps.dense_input) whose
// weight (layer 0, rows × the input size) and bias (layer 1) are trainable.
int inversion_analytic_applies(const Model *m);
FpStatus inversion_analytic_run(const InversionProblem *p, InversionResult *out, FpError *err);

// One evaluation of D and ∂D/∂[x′, y′] at z (for tests and benchmarks): the same
// closure the optimiser calls. grad may be NULL.
typedef struct InversionObjective InversionObjective;
InversionObjective *inversion_objective_create(const InversionProblem *p, const InversionConfig *cfg, FpError *err);
size_t inversion_objective_size(const InversionObjective *o); // length of z: B·c·h·w (+ B·classes for DLG)
FpStatus inversion_objective_eval(InversionObjective *o, const float *z, float *grad, double *loss, FpError *err);
void inversion_objective_free(InversionObjective *o);

// Wainakh et al. (PETS 2022, "User-Level Label Leakage from Gradients in Federated
// Learning"), LLG: with s_c = Σ_j ∂L/∂W[c,j] (the rows above), every class with s_c < 0
// is taken once, and its s_c raised by the impact m; then the class with the smallest
// s_c is taken and raised by m, until B labels. Their impact is the mean per-image share
// of the negative mass: m = −Σ_{s_c<0} s_c / B (their LLG, without LLG+'s auxiliary
// data). When more classes are negative than B, the B most negative are taken. labels
// gets B entries, sorted increasingly (the batch's label multiset; order carries nothing).
void llg_labels(const float *last_weight_grad, int classes, int hidden, int batch, int32_t *labels);

// Label counts from the last layer's bias gradient (Geng et al. 2021, "Towards General
// Deep Leakage in Federated Learning", §3.1): for the batch-mean cross-entropy,
// ∂L/∂b_c = (1/B) Σ_i (p_ic − 1[y_i = c]), so class c occurs n_c = B·(p̄_c − ∂L/∂b_c)
// times, with p̄ the batch's mean softmax. The attacker does not know p̄; it estimates it
// as the model's mean softmax over LABEL_PROBE_INPUTS inputs drawn uniformly from the
// pixel box [0, 1] (a saturated network answers alike for every input, which is exactly
// when LLG's row sums fail: the predicted class's row is positive even where it is a true
// label). The n_c (which sum to B) are rounded to a multiset by largest remainder, negative
// ones counted as 0. model is the network at the weights the gradient was taken at;
// bias_grad its last bias's gradient (classes floats). The probe inputs come from
// rng_substream(rng_stream(seed, RNG_ATTACK, 0, stream), INV_LABEL_PROBE_TAG). labels gets
// B entries, sorted increasingly.
#define LABEL_PROBE_INPUTS 64
#define INV_LABEL_PROBE_TAG 1
FpStatus bias_count_labels(const Model *model, const float *bias_grad, int batch, uint64_t seed, uint32_t stream,
                           int32_t *labels, FpError *err);
// The index of the bias layer that follows the last weight layer, when it is a vector of
// that layer's outputs (the classes); -1 when the last layer has no bias.
int inversion_last_bias_layer(const Model *m);

// iDLG's label rule (Zhao et al. 2020, §3): the gradient of the last linear layer's
// weight W (classes × hidden) has row sums Σ_j ∂L/∂W[c,j] = (p_c − 1[c = y]) Σ_j h_j
// for one image, and h ≥ 0 after a sigmoid, so only the true class's row sum is
// negative: ŷ = argmin_c Σ_j ∂L/∂W[c,j]. For a batch of B > 1 (our extension, exact
// when the B labels are distinct and the rows of absent classes stay positive) the
// B classes with the smallest row sums, in increasing order. labels gets B entries.
void idlg_labels(const float *last_weight_grad, int classes, int hidden, int batch, int32_t *labels);

#endif
