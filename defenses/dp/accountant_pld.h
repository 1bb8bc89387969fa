// Privacy loss distribution (PLD) accountant for the Poisson-subsampled Gaussian mechanism,
// add/remove neighbours: an upper bound on ε for a given δ, tighter than RDP
// (defenses/dp/accountant.h), with every approximation made on the safe side.
//
// Method (details and proofs in defenses/dp/accountant_pld.c):
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
#ifndef FEDPRIV_DEFENSES_DP_ACCOUNTANT_PLD_H
#define FEDPRIV_DEFENSES_DP_ACCOUNTANT_PLD_H

#include <stdio.h>

#include "core/status.h"

// The loss grid Δ used when none is given: ε within ~1e-4 relative of the exact value
// for thousands of steps (tests/test_accountant_pld.c), in well under a second.
#define PLD_DEFAULT_GRID 1e-4

// Below this noise multiplier, sqrt(DBL_MIN), σ² underflows double precision and one
// step's privacy loss, about 1/(2σ²) at the mixture's mean (remove direction), is above
// 2e307: ε is INFINITY, the only bound a double can state (as for σ = 0).
#define PLD_MIN_SIGMA 1.4916681462400413e-154
#define PLD_MIN_SIGMA_REASON                                                                                   \
    "sigma below 1.49e-154 (sqrt of the smallest normal double): one step's privacy loss, about "              \
    "1/(2 sigma^2), is beyond the double range"

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
    const char *infinite_reason; // epsilon = INFINITY: why (a static string), else NULL
} PldEpsilon;

typedef struct PldAccountant PldAccountant;

// A memo of one step's grid masses for accountings that share a mechanism. One step's
// half-bin integrals are a function of the grid index alone for a given (q, σ, direction,
// grid), while the truncation points that bound them move with the total steps (their
// budget is a share of δ over the steps): a record restated after every round (the
// standard figure of t rounds at round t) computes at round t only the bins round t − 1
// did not. The figures are bit for bit those without it (tests/test_accountant_pld.c).
// Up to 8 mechanisms; a step of more than 2^22 bins, or one beyond them, is computed
// each time. Thread safe (one mutex). Every *_create has its *_free.
typedef struct PldStepMemo PldStepMemo;
FpStatus pld_step_memo_create(PldStepMemo **out, FpError *err);
void pld_step_memo_free(PldStepMemo *m);
// The bins it holds over all its mechanisms (for tests).
long pld_step_memo_bins(PldStepMemo *m);

// grid <= 0 uses PLD_DEFAULT_GRID; otherwise grid in [1e-6, 0.1].
FpStatus pld_accountant_create(double grid, PldAccountant **out, FpError *err);
// Adds `steps` compositions of the mechanism (q in [0,1], sigma >= 0 finite, steps >= 0).
FpStatus pld_accountant_add(PldAccountant *acc, double q, double sigma, long long steps, FpError *err);
// The (ε, δ) bound of everything added so far; out->epsilon = INFINITY when a phase has
// σ = 0 or σ < PLD_MIN_SIGMA, and q > 0 (out->infinite_reason says which). FP_EPARAM for
// δ outside (0, 1) or a δ below what the error budget at this grid allows (the message
// says so); FP_ENOMEM when a step or the window needs more grid points than the limits
// (use a coarser grid); FP_EUNSUPPORTED when one step's loss passes 700 with more than its
// truncation budget of probability (σ too small for this accountant at any grid: the
// masses need e^loss finite).
FpStatus pld_accountant_epsilon(const PldAccountant *acc, double delta, PldEpsilon *out, FpError *err);
// Where pld_accountant_epsilon reports an accounting that runs long (fine grids: tens of
// seconds): a line at most every 10 s; NULL (the default): silent. Borrowed.
void pld_accountant_set_progress(PldAccountant *acc, FILE *progress);
// The memo pld_accountant_epsilon takes one step's masses from and adds to (borrowed;
// NULL, the default: every bin computed).
void pld_accountant_set_step_memo(PldAccountant *acc, PldStepMemo *memo);
void pld_accountant_free(PldAccountant *acc);

// One phase at the default grid: the common case.
FpStatus pld_epsilon(double q, double sigma, long long steps, double delta, double *eps, FpError *err);
// The same with a memo (NULL: none): the same ε bit for bit.
FpStatus pld_epsilon_memo(double q, double sigma, long long steps, double delta, PldStepMemo *memo, double *eps,
                          FpError *err);

// The smallest noise multiplier σ (to relative 1e-6, or ε within relative 1e-6 below the
// target; Illinois false position) whose PLD ε over
// `steps` steps at rate q and the given grid (<= 0: default) is <= target_eps; the
// returned σ was computed to meet the target (never overshoots); *eps_at (may be NULL)
// is its ε. q = 0 gives σ = 0. A target whose σ the accountant cannot account (one
// step's loss beyond its range, or more grid points than it holds: targets in the
// hundreds at the default grid and above) is refused with FP_EPARAM at the first such σ,
// the message giving RDP's σ for it, what the target means, and a coarser grid only when
// the caller chose the grid (grid > 0). progress (NULL: silent)
// gets a line at most every 10 s: a search takes one accounting per step, each up to
// seconds.
FpStatus pld_sigma_for_epsilon(double q, long long steps, double delta, double target_eps, double grid,
                               FILE *progress, double *sigma, double *eps_at, FpError *err);

// The exact hockey-stick divergence δ(ε) of ONE step in one direction (remove = 1: P the
// mixture), by the closed form with erfc: what the discrete PLD interpolates at grid points.
double pld_one_step_delta(double q, double sigma, int remove, double eps);

#endif
