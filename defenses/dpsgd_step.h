// The private step of DP-SGD (Abadi et al. 2016, Alg. 1; Opacus' optimizer): one noisy,
// clipped gradient from a batch of records, for the `dp-sgd` defense to call once per local
// step and for benchmarks and audits.
//
//   g = ( Σ_{i ∈ batch} clip_C(∇ℓ_i) + σ C z ) / denominator,   clip_C(v) = v · min(1, C/‖v‖)
//
// on the trainable elements of the model's flat parameter buffer (0 on batch-norm-free
// models' other elements; models with batch norm are refused: per-example gradients are
// ill-defined when the batch's statistics mix examples). ℓ_i is the loss of record i alone
// (what fl's batch_loss gives for a batch of one). Per-example gradients are exact and come
// from one forward and one backward pass (core/per_example.h), not a pass per record.
// z_k = rng_normal_at(noise, step·n_params + k) for element k: element-indexed, so the
// noise is the same on every backend and for any split of the work; `step` keeps the steps
// of one stream apart. The sum's sensitivity to adding or removing one record is C, so with
// Poisson sampling at rate q and denominator = q·n (the expected batch size, never the
// realised one, which would leak it) each call is one step of the Poisson-subsampled
// Gaussian mechanism with noise multiplier σ (defenses/accountant.h, accountant_pld.h).
// A batch may be empty (Poisson sampling): g is then the noise alone.
//
// Floating point: norms are computed in float and summed in double; a record is scaled by
// C / (‖g_i‖ (1 + 2^-20)) when that is below 1, which covers the norm's rounding. The
// Gaussian draws are Box–Muller in double rounded to float, not a floating-point-safe
// sampler (Mironov 2012), so a guarantee stated for this step is conditional on exact
// arithmetic.
#ifndef FEDPRIV_DEFENSES_DPSGD_STEP_H
#define FEDPRIV_DEFENSES_DPSGD_STEP_H

#include <stdint.h>

#include "core/rng.h"
#include "datasets/dataset.h"
#include "models/model.h"

typedef struct DpSgdStepConfig {
    double clip;             // C > 0: the per-record L2 bound
    double noise_multiplier; // σ >= 0: the sum gets N(0, (σC)²) per element
    double denominator;      // > 0: the noisy sum is divided by this (q·n under Poisson sampling)
} DpSgdStepConfig;

typedef struct DpSgdStats {
    int batch;               // records in the batch
    int clipped;             // records whose gradient norm exceeded C
    double mean_norm;        // mean per-record gradient norm before clipping (0 for an empty batch)
    double max_norm;
} DpSgdStats;

// Scratch for steps on one model architecture and dataset shape (a tape and host buffers);
// one per thread. FP_EUNSUPPORTED for a model with batch norm.
typedef struct DpSgdStep DpSgdStep;
FpStatus dpsgd_step_create(const Model *m, int max_batch, DpSgdStep **out, FpError *err);
void dpsgd_step_free(DpSgdStep *s);

// grad (device memory of m's backend, n_params floats) = the private gradient above for
// records idx[0..n) of d (0 <= n <= max_batch). stats may be NULL. FP_EUNSUPPORTED when the
// model uses a parameter in a way with no per-example rule; FP_EPARAM for a bad config or
// step·n_params beyond the stream's 2^48 indices.
FpStatus dpsgd_step(DpSgdStep *s, Model *m, const Dataset *d, const uint32_t *idx, int n, const DpSgdStepConfig *cfg,
                    const RngStream *noise, uint64_t step, float *grad, DpSgdStats *stats, FpError *err);

// The exact per-record gradients of records idx[0..n) (1 <= n <= max_batch), host memory,
// row i = ∇ℓ_i over the flat buffer (0 on non-trainable elements): for tests and audits.
FpStatus dpsgd_per_example_grads(DpSgdStep *s, Model *m, const Dataset *d, const uint32_t *idx, int n, float *out,
                                 FpError *err);

#endif
