// Privacy loss distribution (PLD) accountant for the Poisson-subsampled Gaussian mechanism,
// add/remove neighbours: an upper bound on ε for a given δ, tighter than RDP
// (defenses/accountant.h), with every approximation made on the safe side.
//
// Method (details and proofs in defenses/accountant_pld.c):
// - One step's pair of output laws, per direction (remove: P = (1−q)N(0,σ²) + qN(1,σ²),
//   Q = N(0,σ²); add: P and Q swapped), is replaced by a discrete dominating pair on the
//   loss grid {jΔ}: the "connect-the-dots" PLD (Doroshenko, Ghazi, Kamath, Kumar,
//   Manurangsi 2022), whose hockey-stick curve δ(ε) interpolates the exact one at grid
//   points and lies above it everywhere (δ is convex in e^ε). Masses are integrals of
//   non-negative integrands (no differences of δ), inflated by a relative 1e-10 that covers
//   their rounding and quadrature error.
// - Truncation: loss above a point where the step's tail mass is below 1e-6 δ / steps is
//   moved to +∞ (counted fully in δ); loss below a lower point is moved up to it (both
//   pessimistic).
// - Composition by FFT (FFTW, one forward transform per phase, the power in the Fourier
//   domain, one inverse) on a cyclic window chosen by Chernoff bounds from the discrete
//   PLD's moment generating function (Koskela, Jälkö, Honkela 2020): the composed mass
//   beyond the window's top (≤ 1e-6 δ) is added to δ; mass below its bottom aliases into
//   the window, which only adds mass (pessimistic).
// - FFT and power round-off: a bound from the error analysis of the Cooley–Tukey FFT
//   (Higham 2002, Thm 24.2), added to δ. This is the one assumption: that FFTW's
//   power-of-two transforms are at least as accurate as that analysis states.
// The result: ε such that δ_grid(ε) + tail + alias + round-off ≤ δ in both directions.
//
// Conventions as in accountant.h: sigma is the noise multiplier (std / L2 sensitivity);
// ε = INFINITY for σ = 0 with q > 0; ε = 0 when nothing was spent; clamped at 0.
// Thread safety: every function is; FFTW's planner is serialised by one mutex in
// accountant_pld.c (the only code in fedpriv that calls FFTW).
#ifndef FEDPRIV_DEFENSES_ACCOUNTANT_PLD_H
#define FEDPRIV_DEFENSES_ACCOUNTANT_PLD_H

#include "core/status.h"

// The loss grid Δ used when none is given: ε within ~1e-4 relative of the exact value
// for thousands of steps (tests/test_accountant_pld.c), in well under a second.
#define PLD_DEFAULT_GRID 1e-4

// How ε was reached, for the direction that attains it (all δ terms at that ε).
typedef struct PldEpsilon {
    double epsilon;          // the upper bound: max over the two directions, >= 0
    int remove_direction;    // 1: attained by "remove" (P the sampled mixture), 0: "add"
    double delta_grid;       // δ of the composed discrete PLD at ε (window part)
    double delta_tail;       // composed mass at +∞ (the truncated upper tails)
    double delta_alias;      // Chernoff bound on the composed mass above the window
    double delta_roundoff;   // bound on the FFT and power round-off (L1 norm)
    double grid;             // Δ
    long fft_size;           // N of the transforms
} PldEpsilon;

typedef struct PldAccountant PldAccountant;

// grid <= 0 uses PLD_DEFAULT_GRID; otherwise grid in [1e-6, 0.1].
FpStatus pld_accountant_create(double grid, PldAccountant **out, FpError *err);
// Adds `steps` compositions of the mechanism (q in [0,1], sigma >= 0 finite, steps >= 0).
FpStatus pld_accountant_add(PldAccountant *acc, double q, double sigma, long long steps, FpError *err);
// The (ε, δ) bound of everything added so far; out->epsilon = INFINITY when a phase has
// σ = 0 and q > 0. FP_EPARAM for δ outside (0, 1) or a δ below what the error budget at
// this grid allows (the message says so); FP_ENOMEM when the window needs more than
// 2^26 grid points (use a coarser grid).
FpStatus pld_accountant_epsilon(const PldAccountant *acc, double delta, PldEpsilon *out, FpError *err);
void pld_accountant_free(PldAccountant *acc);

// One phase at the default grid: the common case.
FpStatus pld_epsilon(double q, double sigma, long long steps, double delta, double *eps, FpError *err);

// The smallest noise multiplier σ (to relative 1e-6, or ε within relative 1e-6 below the
// target; Illinois false position) whose PLD ε over
// `steps` steps at rate q and the given grid (<= 0: default) is <= target_eps; the
// returned σ was computed to meet the target (never overshoots); *eps_at (may be NULL)
// is its ε. q = 0 gives σ = 0.
FpStatus pld_sigma_for_epsilon(double q, long long steps, double delta, double target_eps, double grid,
                               double *sigma, double *eps_at, FpError *err);

// The exact hockey-stick divergence δ(ε) of ONE step in one direction (remove = 1: P the
// mixture), by the closed form with erfc: what the discrete PLD interpolates at grid points.
double pld_one_step_delta(double q, double sigma, int remove, double eps);

#endif
