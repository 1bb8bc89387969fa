// L-BFGS as torch.optim.LBFGS implements it (torch/optim/lbfgs.py, step()), without a
// line search: the optimiser DLG and iDLG use (Zhu et al. 2019, main.py; Zhao et al. 2020).
//
// One lbfgs_step() is one `optimizer.step(closure)` call: it evaluates the closure at
// the current point, then runs up to max_iter iterations of
//   d = −H·g (two-loop recursion over the last history_size pairs (s, y), H₀ = ys/yy),
//   t = min(1, 1/‖g‖₁)·lr on the very first iteration of the run, lr afterwards,
//   x ← x + t·d, and a new closure evaluation (except after the last iteration),
// stopping early when: the directional derivative g·d > −tolerance_change; the
// evaluations of this step reach max_eval; max|g| ≤ tolerance_grad; max|t·d| ≤
// tolerance_change; or |f − f_prev| < tolerance_change. A pair (s, y) enters the history
// only when y·s > 1e-10. The state (history, last direction and step) carries over from
// one step to the next, exactly as PyTorch keeps it in optimizer.state.
//
// Vectors are float32 like PyTorch's; dot products are accumulated in double (PyTorch
// accumulates in float32 inside BLAS), which can change the last bits of a step.
//
//   Lbfgs *o = lbfgs_create(n, &cfg, &err);          // cfg from lbfgs_defaults()
//   for (step = 0; step < 300; step++) lbfgs_step(o, x, closure, ctx, &loss, &err);
//   lbfgs_free(o);
#ifndef FEDPRIV_ATTACKS_LBFGS_H
#define FEDPRIV_ATTACKS_LBFGS_H

#include <stddef.h>

#include "core/status.h"

typedef struct LbfgsConfig {
    double lr;               // 1
    int max_iter;            // 20 iterations per step
    int max_eval;            // 25 (PyTorch: max_iter * 5 / 4) closure evaluations per step
    int history_size;        // 100
    double tolerance_grad;   // 1e-7
    double tolerance_change; // 1e-9
} LbfgsConfig;

// PyTorch's defaults: lr 1, max_iter 20, max_eval 25, history 100, 1e-7, 1e-9.
LbfgsConfig lbfgs_defaults(void);

// The objective: at x (n floats) write f(x) to *loss and ∇f(x) to grad (n floats).
// A non-OK status aborts the step and is returned by lbfgs_step.
typedef FpStatus (*LbfgsClosure)(void *ctx, const float *x, float *grad, double *loss, FpError *err);

typedef struct Lbfgs Lbfgs;

// n > 0; cfg values must be positive (FP_EPARAM otherwise).
Lbfgs *lbfgs_create(size_t n, const LbfgsConfig *cfg, FpError *err);
void lbfgs_free(Lbfgs *o);

// One optimizer.step(closure): updates x (n floats) in place; *orig_loss (may be NULL)
// gets the loss at the entry point, as PyTorch's step() returns it.
FpStatus lbfgs_step(Lbfgs *o, float *x, LbfgsClosure f, void *ctx, double *orig_loss, FpError *err);

// Closure evaluations and iterations since lbfgs_create (PyTorch's state['func_evals'],
// state['n_iter']).
long lbfgs_func_evals(const Lbfgs *o);
long lbfgs_iterations(const Lbfgs *o);

#endif
