// Exact per-example gradients through the tape, without a pass per example.
//
// For a batch of B examples whose per-example losses ℓ_i are summed into one scalar, the
// gradient of ℓ_i with respect to a parameter depends only on example i's rows of the
// layers that use the parameter, as long as no op mixes examples (batch norm does: a
// model with it has no per-example gradient to speak of). One backward pass gives the
// gradient dY of every parameter-using layer's output Y; each layer then has a
// per-example rule (Goodfellow 2015, "Efficient per-example gradient computations";
// Opacus grad samplers; Li et al. 2022 "ghost clipping" for the norms):
//   linear  Y = X Wᵀ  (X: B×in, one row per example)   ∇_W ℓ_i = dY_iᵀ X_i (an outer product)
//           ‖∇_W ℓ_i‖² = ‖dY_i‖² ‖X_i‖², so the norm never forms the B×out×in tensor;
//   conv    Y = conv(X, W) (X: B×C×H×W)                 ∇_W ℓ_i = the filter gradient of
//           example i alone (im2col of X_i times dY_i: the backend's per-example
//           backward-filter, one call for a chunk of examples);
//   bias    Z = A + b broadcast (per example nb·inner)  ∇_b ℓ_i = dZ_i summed over inner.
// A parameter used several times (an LSTM's recurrent weight, once per time step) sums its
// uses' contributions per example; its norm then comes from the per-example gradients
// themselves, formed in chunks of examples to bound memory.
// Clipped sums Σ_i c_i ∇ℓ_i never form per-example gradients either: they are the batch
// rules (dYᵀX, the batch filter gradient, the batch bias sum) applied to dY with row i
// scaled by c_i.
//
// Every computation goes through the backend vtable, so the CUDA backend runs the same
// code; the CPU backend is the oracle (tests/test_dpsgd.c checks it against batch-size-1
// passes). A use with no rule (a parameter fed to anything but the first operand-slot rules
// above, e.g. batch norm's scale) is FP_EUNSUPPORTED with the op named.
#ifndef FEDPRIV_CORE_PER_EXAMPLE_H
#define FEDPRIV_CORE_PER_EXAMPLE_H

#include "core/autodiff.h"

typedef struct PerExample PerExample;

// After the forward pass of a batch of `batch` examples was recorded on t and loss_sum is
// Σ_i ℓ_i: finds every use of params[0..n) (entries that are NULL or need no gradient are
// skipped) and runs one backward pass from loss_sum to the uses' outputs. The results live
// on the tape: valid until tape_reset. *out is NULL on failure.
FpStatus per_example_create(Tape *t, Var *loss_sum, Var *const *params, int n, int batch, PerExample **out,
                            FpError *err);
void per_example_free(PerExample *pe);

// norms2[i] = ‖∇ℓ_i‖² over all parameters (host, batch entries; sums of squares accumulated
// in the backend's precision per parameter, in double across parameters).
FpStatus per_example_sq_norms(PerExample *pe, double *norms2, FpError *err);

// out[k] = Σ_i w[i] ∇_{params[k]} ℓ_i, written (=) into device memory of params[k]'s size
// (out[k] unused for skipped parameters); w is host memory, batch entries.
FpStatus per_example_weighted_sum(PerExample *pe, const float *w, float *const *out, FpError *err);

// out[k] (device, batch × numel(params[k]), row i = example i) = ∇_{params[k]} ℓ_i.
FpStatus per_example_grads(PerExample *pe, float *const *out, FpError *err);

#endif
