// The private step of DP-SGD (Abadi et al. 2016, Alg. 1; Opacus' optimizer): one noisy,
// clipped gradient from a batch of records, for the `dp-sgd` defense to call once per local
// step (it fits DefenseOps.local_gradient: the step's model, tape and minibatch in, the
// gradient out) and for benchmarks and audits.
//
//   g = ( Σ_{i ∈ batch} clip_C(∇ℓ_i) + σ C z ) / denominator,   clip_C(v) = v · min(1, C/‖v‖)
//
// on the trainable elements of the model's flat parameter buffer (0 on the others). Models
// with batch norm are refused: per-example gradients are ill-defined when the batch's
// statistics mix its examples. ℓ_i is the loss of record i alone (what batch_loss gives for
// a batch of one). Per-example gradients are exact and come from one forward and one
// backward pass (core/per_example.h), not a pass per record.
// The noise is the federated defenses' Gaussian sampler (ClipNoise, defenses/clip.h), drawn
// on the clipped sum S before the division: element k of S becomes, with std = σC,
//   safe (default): g·(round(S_k/g) + J_k), J_k ~ round(N(0, T²)) the rounded Gaussian of
//       the sampler's table (T grid steps, g = σC/T the grid; the dp-sgd defense sets the
//       sampler's `rounded`), from Philox block noise_first + k;
//   float: S_k + σC·rng_normal_at(noise, noise_first + k) (no guarantee, Mironov 2012);
// then g_k = that / denominator (post-processing). Element-indexed, so the noise is the
// same on every backend and for any split of the work; the caller keeps the steps of one
// stream apart with noise_first (e.g. ((uint64_t)(step + 1) << 32), as the defense
// contract asks).
//
// Sensitivity. Adding or removing one record moves S by at most C (its clipped gradient).
// The safe sampler rounds S once per step, as a whole (not each record's gradient), to the
// nearest grid point: two sums within C stay within C/g + √d grid steps after rounding (d
// the trainable elements; each coordinate moves by less than one step on each side), so
// each step is the discrete Gaussian mechanism with L2 sensitivity C/g + √d steps: the
// continuous account's multiplier σ divided by φ = clip_noise_inflation(sampler, σC, C, 1)
// = 1 + 1e-12 + σ√d/T. With Poisson sampling at rate q and denominator = q·n (the expected
// batch size, never the realised one, which would leak it) each call is one step of the
// Poisson-subsampled (discrete) Gaussian mechanism (defenses/dp_sgd.c states what is
// proven of its account). A batch may be empty (Poisson sampling): g is then the noise
// alone.
//
// Floating point: norms are computed in float and summed in double; a record is scaled by
// C / (‖g_i‖ (1 + 2^-20)) when that is below 1, which covers the norm's rounding. The
// clipped gradients are then summed in float (one GEMM per layer): that summation's
// rounding is not bounded here (DPSGD_ASSUME_FLOAT_SUM below).
#ifndef FEDPRIV_DEFENSES_DPSGD_STEP_H
#define FEDPRIV_DEFENSES_DPSGD_STEP_H

// The assumption of a dp-sgd record with the safe sampler (defenses/dp_sgd.c): the float
// summation above. (Its rounded Gaussian makes both accountants exact, so no assumption
// about the continuous privacy loss remains.)
#define DPSGD_ASSUME_FLOAT_SUM                                                                               \
    "the clipped per-example gradients are summed in float32 (one matrix product per layer): the sums of "     \
    "neighbouring batches are taken to differ by at most the clip C, the summation's rounding not bounded, "   \
    "nor how each record's float gradient, computed inside the batch's matrix products, depends on the "       \
    "other records of the batch"

#include <stdint.h>

#include "core/rng.h"
#include "datasets/dataset.h"
#include "defenses/clip.h"
#include "models/model.h"

typedef struct DpSgdStepConfig {
    double clip;             // C > 0: the per-record L2 bound
    double noise_multiplier; // σ >= 0: the sum gets N(0, (σC)²) per element
    double denominator;      // > 0: the noisy sum is divided by this (q·n under Poisson sampling)
    const ClipNoise *sampler; // the Gaussian sampler (clip_noise_parse, clip_noise_build for σ);
                              // required when σ > 0
    // Audit canary records in the batch (fl/defense.h DefenseCanaries): each is a record
    // whose clipped gradient is dirac_value·e_j, so it adds dirac_value at its coordinate
    // dirac_coords[i] (trainable) of the clipped sum before the noise; |dirac_value| <= clip.
    int n_diracs;
    const uint32_t *dirac_coords;
    float dirac_value;
} DpSgdStepConfig;

typedef struct DpSgdStats {
    int batch;               // records in the batch
    int clipped;             // records whose gradient norm exceeded C
    double mean_norm;        // mean per-record gradient norm before clipping (0 for an empty batch)
    double max_norm;
} DpSgdStats;

// FP_OK when DP-SGD can run on the model; FP_EUNSUPPORTED (the message says why) for a model
// with batch norm.
FpStatus dpsgd_check_model(const Model *m, FpError *err);

// grad (device memory of m's backend, n_params floats) = the private gradient above for
// records idx[0..n) of d (n >= 0), recorded on t (reset first; its values are freed by the
// next reset). stats may be NULL. FP_EUNSUPPORTED for a model with batch norm or a parameter
// used in a way with no per-example rule; FP_EPARAM for a bad config (σ > 0 without a
// sampler, or a safe sampler without its table) or noise indices beyond the stream's 2^48.
FpStatus dpsgd_step(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, const DpSgdStepConfig *cfg,
                    const RngStream *noise, uint64_t noise_first, float *grad, DpSgdStats *stats, FpError *err);

// The exact per-record gradients of records idx[0..n) (n >= 1), host memory, row i = ∇ℓ_i
// over the flat buffer (0 on non-trainable elements), recorded on t: for tests and audits.
FpStatus dpsgd_per_example_grads(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, float *out,
                                 FpError *err);

#endif
