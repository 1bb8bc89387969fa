// Finite-difference gradient checks of first and second order, shared by the autodiff
// tests (CPU) and the CPU-vs-CUDA tests.
//
// f(x_1..x_k) = Σ r ⊙ build(x) with a fixed random projection r. First order compares
// ad_grad with central differences of f; second order compares the gradient of
// h(x) = Σ_j s_j ⊙ ∂f/∂x_j (built with create_graph) with central differences of h.
#ifndef FEDPRIV_TESTS_GRADCHECK_H
#define FEDPRIV_TESTS_GRADCHECK_H

#include "core/autodiff.h"

#define GC_MAX_INPUTS 4

typedef Var *(*GcBuild)(Tape *t, Var **x, void *ctx);

typedef struct GcCase {
    const char *name;
    int n_inputs;
    int ndim[GC_MAX_INPUTS];
    int shape[GC_MAX_INPUTS][4];
    float lo, hi;          // inputs drawn uniformly in [lo, hi]
    GcBuild build;
    void *ctx;
    int second_order;      // also check second order
    // For the tests of the checker itself: finite differences of a different function,
    // or an analytic gradient scaled by analytic_scale (0 = 1), as a wrong backward rule would give.
    GcBuild numeric_build;
    double analytic_scale;
} GcCase;

// Returns the largest relative error ‖analytic − numeric‖ / max(‖numeric‖, 1e-3) over the
// inputs, for order 1 or 2; a negative value when the graph could not be built.
double gradcheck(const Backend *be, const GcCase *c, int order, unsigned seed);

#endif
