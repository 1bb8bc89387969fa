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
// defaults; x′ and y′ start from N(0,1) drawn from rng_stream(seed, RNG_ATTACK,
// first_restart + restart, stream): element i of the flat vector [x′, y′] is
// rng_normal_at(&s, i), so DLG and iDLG start from the same x′.
#ifndef FEDPRIV_ATTACKS_INVERSION_H
#define FEDPRIV_ATTACKS_INVERSION_H

#include <stdint.h>

#include "attacks/lbfgs.h"
#include "models/model.h"

typedef enum { INV_DISTANCE_L2 = 0, INV_DISTANCE_COSINE = 1 } InvDistance;

typedef struct InversionConfig {
    int steps;             // L-BFGS step() calls per restart (the reference: 300)
    int restarts;          // independent starts; the one with the lowest final matching loss is kept
    InvDistance distance;
    double tv;             // weight of the total-variation prior (0: off)
    int snapshot_every;    // keep x′ after every k steps (0: none)
    LbfgsConfig lbfgs;
} InversionConfig;

typedef struct InversionProblem {
    const Model *model;    // θ: the weights the target gradient was taken at (not modified)
    const float *target;   // g: host, model->table.n_params floats (non-trainable layers ignored)
    int batch;             // B ≥ 1 images
    const int32_t *labels; // iDLG: the B labels to use (hard targets); NULL: DLG (learn y′)
    uint64_t seed;
    uint32_t stream;       // RNG_ATTACK stream id (e.g. the batch number), so batches differ
    uint32_t first_restart; // restart r starts from restart stream first_restart + r (attacker
                            // variants draw disjoint starts: attacks/attacker.h)
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

// One evaluation of D and ∂D/∂[x′, y′] at z (for tests and benchmarks): the same
// closure the optimiser calls. grad may be NULL.
typedef struct InversionObjective InversionObjective;
InversionObjective *inversion_objective_create(const InversionProblem *p, const InversionConfig *cfg, FpError *err);
size_t inversion_objective_size(const InversionObjective *o); // length of z: B·c·h·w (+ B·classes for DLG)
FpStatus inversion_objective_eval(InversionObjective *o, const float *z, float *grad, double *loss, FpError *err);
void inversion_objective_free(InversionObjective *o);

// iDLG's label rule (Zhao et al. 2020, §3): the gradient of the last linear layer's
// weight W (classes × hidden) has row sums Σ_j ∂L/∂W[c,j] = (p_c − 1[c = y]) Σ_j h_j
// for one image, and h ≥ 0 after a sigmoid, so only the true class's row sum is
// negative: ŷ = argmin_c Σ_j ∂L/∂W[c,j]. For a batch of B > 1 (our extension, exact
// when the B labels are distinct and the rows of absent classes stay positive) the
// B classes with the smallest row sums, in increasing order. labels gets B entries.
void idlg_labels(const float *last_weight_grad, int classes, int hidden, int batch, int32_t *labels);

#endif
