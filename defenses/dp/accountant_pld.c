// PLD accountant for the Poisson-subsampled Gaussian mechanism (see accountant_pld.h).
//
// Notation. One step, noise multiplier s, rate q; u(x) = (2x − 1)/(2s²) and
// D(x) = 1 − q + q e^{u(x)}, the density ratio of the mixture (1−q)N(0,s²) + qN(1,s²) to
// N(0,s²). Two directions (add/remove neighbours):
//   remove: P = mixture, Q = N(0,s²), loss L(x) = ln D(x), increasing in x, L > ln(1−q);
//   add:    P = N(0,s²), Q = mixture, loss L(x) = −ln D(x), decreasing, L < −ln(1−q).
// δ(ε) = ∫(p − e^ε q)_+ is the hockey-stick divergence of (P, Q); the pair is (ε, δ)-DP
// for add/remove neighbours when both directions' composed δ(ε) <= δ.
//
// 1. Discrete dominating pair ("connect the dots", Doroshenko et al. 2022). On the grid
//    ε_j = jΔ, γ_j = e^{ε_j}, let ω put mass on the ε_j and on +∞. Its δ_ω is linear in
//    γ = e^ε between grid points; choosing it to equal δ at every ε_j makes δ_ω >= δ
//    everywhere, because δ is convex in γ (an integral of the convex (p − γq)_+), so each
//    chord lies above the curve; below the lowest grid point the chord from (γ=0, δ=1)
//    does the same, and above the highest, δ_ω = ω_∞ = δ(ε_hi) >= δ. A pair dominating
//    each step's pair dominates their composition (Zhu, Dong, Wang 2022, Thm 10), so the
//    composed δ_ω bounds the composed δ. The masses follow from the chord slopes
//    B_j = (δ_{j−1} − δ_j)/(γ_j − γ_{j−1}) = average of Q(L > ln γ) over [γ_{j−1}, γ_j]:
//      ω_j e^{−ε_j} = B_j − B_{j+1} = E_Q[hat_j(e^L)],
//    hat_j the tent rising from γ_{j−1} to 1 at γ_j and falling to 0 at γ_{j+1}. So
//      ω_j = γ_j ∫ q(x) hat_j(e^{L(x)}) dx,
//    an integral of a non-negative function, which we compute per half-bin with the
//    factors e^L − γ_{j−1} and γ_{j+1} − e^L written without cancellation (expm1 of a
//    difference of x). Differencing δ values instead would lose ~u/Δ² per mass.
//    The ends: ω_lo adds γ_lo Q(L <= ε_lo) (the chord from γ = 0), ω_hi adds
//    γ_hi Q(L > ε_hi), and ω_∞ is taken as P(L > ε_hi) >= δ(ε_hi) (more mass at +∞ can
//    only raise δ_ω).
// 2. Numerical safety of the masses. Each half-bin integral is Gauss–Legendre on panels no
//    wider than s/4 and s²/(4(|x|+1+s)) (the integrand's log changes by well under 1 across
//    a panel, so the rule's error is far below double rounding; gl_integrate). Every
//    mass is then multiplied by 1 + 1e-10: raising masses can only raise δ_ω, so the
//    computed PLD still dominates as long as each mass's relative error is below 1e-10
//    (rounding of the integrands and of the bin boundaries is ~1e-14). The test
//    one_step_matches_closed_form checks δ_ω at grid points against the erfc closed form.
// 3. Truncation. ε_hi is where the step's P(L > ε_hi) <= 1e-6 δ / (total steps); that
//    mass sits at +∞ and its composition, Π(F+W)^k − ΠF^k, is added to δ. ε_lo is where
//    P(L <= ε_lo) <= 1e-12 δ / steps; the mass below is folded into ω_lo by the chord
//    (pessimistic, so nothing is added).
// 4. Composition by FFT on a cyclic window of N = 2^m grid points [J_lo, J_lo + N):
//    each phase's finite masses are placed at index j mod N, transformed once (FFTW r2c,
//    in long double: see 5),
//    raised to the phase's step count in the Fourier domain (binary powering), multiplied
//    across phases and transformed back. The result is the composed finite PLD folded
//    mod N. The window comes from Chernoff bounds on the composed loss S with the discrete
//    PLD's own moment generating function: P(S >= top) <= min_λ Π M_p(λ)^{k_p} e^{−λ top}.
//    Mass above the window folds onto lower losses, where it may count for less than the 1
//    it can contribute: its Chernoff bound (<= 1e-6 δ) is added to δ. Mass below the
//    window (Chernoff <= 1e-6 δ) folds upwards: extra mass, pessimistic; and it would
//    contribute nothing anyway, since the answer's ε lies above the window's bottom.
//    A direct convolution would cost O(N²) with N ~ 10^5..10^6: the FFT is needed.
// 5. Round-off of the FFT route, bounded by Higham (2002, Thm 24.2) for power-of-two
//    Cooley–Tukey: ‖fl(FFT x) − FFT x‖₂ <= η_N ‖FFT x‖₂, η_N = log₂N·η/(1 − log₂N·η),
//    η = μ + γ₄(√2 + μ), twiddle error μ <= 4u (assumed of FFTW). The transforms, powers
//    and window sums run in long double (u = 2^-64 on x86-64): in double the bound below
//    reaches ~5e-9 for 3000 steps, which would eat most of a δ of 1e-8. With Parseval and
//    |Â_j| <= G_p = ‖a_p‖₁ + η_N√N‖a_p‖₂, the complex power's relative error
//    <= (k+1)√5u (Brent et al. 2007 for each complex product, doubling per squaring),
//    the L1 error of the composed PLD is at most
//      √N·G·(η_N Σ_p k_p‖a_p‖₂ + ρ + η_N(1 + ρ) + u),  G = Π_p G_p^{k_p},
//    ρ = 1.01 √5 u (Σ_p k_p + phases). This bounds |δ_computed − δ_exact| and is added to δ;
//    negative entries (round-off) are set to 0 (only raises δ).
// 6. ε for the direction: the smallest ε with δ_grid(ε) <= (δ − tail − alias − roundoff)/
//    (1 + 2Nu) (the last factor covers the summation of δ_grid), found by bisection over
//    window points and the exact linear-in-γ form between them, each δ_grid(ε) a direct
//    sum of non-negative terms. ε = max over directions, clamped at 0.
#include <complex.h> // before fftw3.h: fftwl_complex is then long double _Complex
#include <fftw3.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "defenses/dp/accountant_pld.h"
#include "defenses/dp/accountant.h"

#define PLD_MASS_INFLATION 1e-10
#define PLD_TAIL_SHARE 1e-6      // truncation and alias budgets, each a fraction of δ
#define PLD_LOW_SHARE 1e-12      // lower-truncation mass per step (pessimistic; tightness only)
#define PLD_MAX_BINS (1L << 24)  // one step's grid points
#define PLD_MAX_FFT (1L << 23)   // the composition window (48 bytes a point in long double)
#define PLD_TAIL_SIGMAS 38.0     // infinite x-ranges end here: the Gaussian factor is < 1e-310
#define PLD_SEARCH_REL_TOL 1e-6
// The largest one-step loss the grid may hold: the masses use γ = e^ε, finite in double
// only below ln(DBL_MAX) = 709.78. A step whose loss exceeds this with more than its
// truncation budget (tau_hi) of probability cannot be accounted here (step_pmf:
// FP_EUNSUPPORTED).
#define PLD_MAX_LOSS 700.0
#define PLD_PROGRESS_SECONDS 10.0

// FFTW's planner keeps global state and is not thread safe (its executor is): plans are
// made and destroyed under this lock, the only mutable global of the file.
static pthread_mutex_t pld_fftw_planner_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    double q, sigma;
    long long steps;
} PldPhase;

struct PldAccountant {
    double grid;
    PldPhase *phases;
    int n, cap;
    const char *infinite_reason; // a phase whose ε is ∞ (σ = 0, or below PLD_MIN_SIGMA) and q > 0: why
    FILE *progress;              // pld_accountant_set_progress; NULL: silent
    PldStepMemo *memo;           // pld_accountant_set_step_memo; NULL: every bin computed
};

// One step's half-bin integrals (half_bin over [(J−1)Δ, JΔ]) for grid indices J in
// [lo, lo + n), of one (q, σ, direction, Δ): a function of J alone, so an accounting whose
// truncation points moved reuses what another computed and adds only the bins it lacks.
typedef struct {
    double q, sigma, grid;
    int remove;
    long lo, n;
    double *up, *down;
} PldStepEntry;

#define PLD_MEMO_ENTRIES 8             // (q, σ, direction) pairs kept; beyond, bins are computed
#define PLD_MEMO_MAX_BINS (1L << 22)   // per entry (64 MiB): a wider step is computed each time
struct PldStepMemo {
    pthread_mutex_t lock;
    PldStepEntry e[PLD_MEMO_ENTRIES];
    int n;
};

// One accounting's progress line, at most every PLD_PROGRESS_SECONDS (fine grids
// take tens of seconds: a step's masses at 2^24 points, FFTs of 2^23).
typedef struct {
    FILE *f;
    const char *direction;
    double t0, next;
} PldProgress;

static void pld_progress(PldProgress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pld_progress(PldProgress *p, const char *fmt, ...) {
    if (!p->f)
        return;
    double now = fp_monotonic_seconds();
    if (now < p->next)
        return;
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(p->f, "PLD accountant (%s neighbours): %s (%.0f s)\n", p->direction, what, now - p->t0);
    fflush(p->f);
    p->next = now + PLD_PROGRESS_SECONDS;
}

// ---- one step: the loss as a function of x ------------------------------------------

typedef struct {
    double q, s, s2;
    double log1mq; // ln(1 − q) (−∞ for q = 1)
    int remove;
} Step;

static double norm_cdf(double z) { return 0.5 * erfc(-z * M_SQRT1_2); }
static double norm_sf(double z) { return 0.5 * erfc(z * M_SQRT1_2); }

static double step_u(const Step *st, double x) { return (2.0 * x - 1.0) / (2.0 * st->s2); }

// ln D(x) = ln(1 − q + q e^{u}), without overflow for large u.
static double step_log_d(const Step *st, double x) {
    double u = step_u(st, x);
    if (st->q == 1.0)
        return u;
    if (u > 30.0)
        return log(st->q) + u + log1p((1.0 - st->q) / st->q * exp(-u));
    return log1p(st->q * expm1(u));
}

// x at which the loss equals eps; −∞ when no x reaches it (below the remove loss's
// infimum ln(1−q), above the add loss's supremum −ln(1−q)).
//   remove: D(x) = e^ε,  add: D(x) = e^{−ε};  D(x) − (1−q) = q e^{u(x)}, and
//   e^{±ε} − (1−q) = (1−q) expm1(±ε − ln(1−q)) without cancellation.
static double step_x(const Step *st, double eps) {
    double e = st->remove ? eps : -eps;
    if (st->q == 1.0)
        return st->s2 * e + 0.5;
    double t = e - st->log1mq;
    if (t <= 0.0)
        return -INFINITY;
    // ln(e^t − 1) = t + ln(1 − e^{−t}) above t = 30, where expm1 would overflow (past 709).
    double log_em1 = t > 30.0 ? t + log1p(-exp(-t)) : log(expm1(t));
    return st->s2 * (log1p(-st->q) + log_em1 - log(st->q)) + 0.5;
}

// P(L <= eps), P(L > eps), Q(L <= eps), Q(L > eps) of one step.
static void step_tails(const Step *st, double eps, double *p_le, double *p_gt, double *q_le, double *q_gt) {
    double x = step_x(st, eps), s = st->s, q = st->q;
    double lo0 = isinf(x) ? 0.0 : norm_cdf(x / s), lo1 = isinf(x) ? 0.0 : norm_cdf((x - 1.0) / s);
    double hi0 = isinf(x) ? 1.0 : norm_sf(x / s), hi1 = isinf(x) ? 1.0 : norm_sf((x - 1.0) / s);
    double mix_lo = (1.0 - q) * lo0 + q * lo1, mix_hi = (1.0 - q) * hi0 + q * hi1;
    if (st->remove) { // L increasing in x: {L <= ε} = {x <= x(ε)}
        if (p_le) *p_le = mix_lo;
        if (p_gt) *p_gt = mix_hi;
        if (q_le) *q_le = lo0;
        if (q_gt) *q_gt = hi0;
    } else {          // L decreasing: {L <= ε} = {x >= x(ε)}
        if (p_le) *p_le = hi0;
        if (p_gt) *p_gt = lo0;
        if (q_le) *q_le = mix_hi;
        if (q_gt) *q_gt = mix_lo;
    }
}

double pld_one_step_delta(double q, double sigma, int remove, double eps) {
    Step st = {q, sigma, sigma * sigma, log1p(-q), remove};
    double x = step_x(&st, eps);
    if (remove) {
        if (isinf(x))
            return -expm1(eps); // p >= e^ε q everywhere: δ = 1 − e^ε
        double g1 = q == 1.0 ? expm1(eps) + 1.0 : (1.0 - q) * expm1(eps - st.log1mq); // e^ε − (1−q)
        return q * norm_sf((x - 1.0) / sigma) - g1 * norm_sf(x / sigma);
    }
    if (isinf(x))
        return 0.0;
    double g1 = q == 1.0 ? -expm1(eps) : -expm1(eps + st.log1mq); // 1 − e^ε (1−q)
    return g1 * norm_cdf(x / sigma) - exp(eps) * q * norm_cdf((x - 1.0) / sigma);
}

// ---- half-bin integrals ---------------------------------------------------------------

// The two integrand shapes (c = e^{logc}, xr a bin boundary):
//   A(x) = c φ_s(x)   expm1((x − xr)/s²)   (x >= xr)
//   B(x) = c φ_s(x−1) expm1((xr − x)/s²)   (x <= xr)
typedef struct {
    int shape_b;
    double s, s2, xr, logc; // logc includes −ln(s√(2π)), the Gaussian's normalisation
} Integrand;

static double integrand(const Integrand *f, double x) {
    double t = f->shape_b ? (f->xr - x) / f->s2 : (x - f->xr) / f->s2;
    double z = f->shape_b ? x - 1.0 : x;
    double g = f->logc - z * z / (2.0 * f->s2);
    if (t > 1.0) // expm1(t) = e^t (1 − e^{−t}): fold e^t into the exponent (no overflow)
        return exp(g + t) * -expm1(-t);
    return exp(g) * expm1(t);
}

static const double GL8_X[4] = {0.1834346424956498, 0.5255324099163290, 0.7966664774136267, 0.9602898564975363};
static const double GL8_W[4] = {0.3626837833783620, 0.3137066458778873, 0.2223810344533745, 0.1012285362903763};
static const double GL3_X = 0.7745966692414834, GL3_W0 = 0.8888888888888888, GL3_W1 = 0.5555555555555556;

// ∫_a^b f (a <= b finite) by Gauss–Legendre on equal panels no wider than h, a quarter of
// the integrand's smoothness scale ℓ = min(s, s²/(max|x| + 1 + s)) (its log changes by at
// most ~1 over ℓ). An interval shorter than ℓ/1024 (most bins: the loss grid is fine) takes
// one 3-point rule, whose error (b−a)^6 f^(6)/2016000 is then below 1e-18 relative; the
// rest 8-point rules per panel (error ~ (1/4)^16/16! relative).
static double gl_integrate(const Integrand *f, double a, double b) {
    if (!(b > a))
        return 0.0;
    double xm = fmax(fabs(a), fabs(b));
    double scale = fmin(f->s, f->s2 / (xm + 1.0 + f->s)), h = scale / 4.0;
    if (b - a <= scale / 1024.0) {
        double mid = 0.5 * (a + b), half = 0.5 * (b - a);
        return half * (GL3_W0 * integrand(f, mid) +
                       GL3_W1 * (integrand(f, mid - half * GL3_X) + integrand(f, mid + half * GL3_X)));
    }
    long panels = (long)ceil((b - a) / h);
    if (panels < 1)
        panels = 1;
    double w = (b - a) / (double)panels, sum = 0.0;
    for (long p = 0; p < panels; p++) {
        double mid = a + ((double)p + 0.5) * w, half = 0.5 * w, ps = 0.0;
        for (int i = 0; i < 4; i++)
            ps += GL8_W[i] * (integrand(f, mid - half * GL8_X[i]) + integrand(f, mid + half * GL8_X[i]));
        sum += ps * half;
    }
    return sum;
}

// Over the x-range where the loss lies in [e0, e1] (x0 = x(e0), x1 = x(e1)):
//   up = ∫ q(x) (e^{L(x)} − e^{e0}) dx,   down = ∫ q(x) (e^{e1} − e^{L(x)}) dx,
// q the density of Q. Substituting the loss (derivation in the banner):
//   remove: up = q e^{u(x0)} ∫ φ(x) expm1((x − x0)/s²),   down = q ∫ φ(x−1) expm1((x1 − x)/s²)
//   add:    up = q/D(x0) ∫ φ(x−1) expm1((x0 − x)/s²),     down = q e^{u(x1)}/D(x1) ∫ φ(x) expm1((x − x1)/s²)
// over [x0, x1] (remove) or [x1, x0] (add). An end at x = −∞: the factor with the
// infinite boundary is a sum of positive Φ terms (closed form); the other integral runs
// from PLD_TAIL_SIGMAS s below the finite end.
static void half_bin(const Step *st, double e0, double e1, double x0, double x1, double *up, double *down) {
    double q = st->q, s = st->s, lq = log(q) - log(s * sqrt(2.0 * M_PI));
    *up = *down = 0.0;
    if (st->remove) {
        if (isinf(x1))
            return; // both ends below the loss's infimum: no mass
        double a = isinf(x0) ? fmin(x1, 0.0) - PLD_TAIL_SIGMAS * s : x0;
        if (isinf(x0)) // e^L − γ0 = (1 − q − γ0) + q e^u, both terms >= 0
            *up = -(1.0 - q) * expm1(e0 - st->log1mq) * norm_cdf(x1 / s) + q * norm_cdf((x1 - 1.0) / s);
        else {
            Integrand f = {0, s, st->s2, x0, lq + step_u(st, x0)};
            *up = gl_integrate(&f, x0, x1);
        }
        Integrand g = {1, s, st->s2, x1, lq};
        *down = gl_integrate(&g, a, x1);
    } else {
        if (isinf(x0))
            return;
        double a = isinf(x1) ? fmin(x0, 0.0) - PLD_TAIL_SIGMAS * s : x1;
        Integrand f = {1, s, st->s2, x0, lq - step_log_d(st, x0)};
        *up = gl_integrate(&f, a, x0);
        if (isinf(x1)) // γ1 − e^L over x < x0 with γ1 >= 1/(1−q): (γ1(1−q) − 1) Φ + γ1 q Φ, both >= 0
            *down = expm1(e1 + st->log1mq) * norm_cdf(x0 / s) + exp(e1) * q * norm_cdf((x0 - 1.0) / s);
        else {
            Integrand g = {0, s, st->s2, x1, lq + step_u(st, x1) - step_log_d(st, x1)};
            *down = gl_integrate(&g, x1, x0);
        }
    }
}

// ---- one step's discrete PLD ----------------------------------------------------------

typedef struct {
    long lo, n;       // grid indices lo .. lo+n−1
    double *mass;     // finite masses (inflated)
    double inf_mass;  // ω_∞ (an upper bound)
} StepPmf;

// The smallest-magnitude ε found by doubling then bisection with tail(ε) <= tau, where tail
// is P(L > ε) (upper = 1; searching upwards from 0) or P(L <= ε) (upper = 0; downwards);
// NAN when even |ε| = PLD_MAX_LOSS leaves more than tau there (*tail_at_max: that tail).
static double tail_point(const Step *st, int upper, double tau, double *tail_at_max) {
    double lo = 0.0, hi = upper ? 1.0 : -1.0, v;
    for (;;) {
        step_tails(st, hi, upper ? NULL : &v, upper ? &v : NULL, NULL, NULL);
        if (v <= tau)
            break;
        if (fabs(hi) >= PLD_MAX_LOSS) {
            *tail_at_max = v;
            return NAN;
        }
        lo = hi;
        hi = fmax(-PLD_MAX_LOSS, fmin(PLD_MAX_LOSS, 2.0 * hi));
    }
    for (int i = 0; i < 60; i++) {
        double mid = 0.5 * (lo + hi);
        step_tails(st, mid, upper ? NULL : &v, upper ? &v : NULL, NULL, NULL);
        if (v <= tau)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

// The entry of (st, grid) in memo, grown to cover bins [a, b] (computing the ones it lacked),
// or NULL (no room, too wide, out of memory: the caller computes them itself). The
// caller holds memo->lock. FEDPRIV_TEST_PLD_MEMO_ANY_SIGMA (tests only: the control that
// a memo of the wrong mechanism is caught) matches an entry whatever its σ.
static PldStepEntry *memo_entry(PldStepMemo *memo, const Step *st, double grid, long a, long b, PldProgress *pr) {
    const char *any = getenv("FEDPRIV_TEST_PLD_MEMO_ANY_SIGMA");
    int any_sigma = any && *any && strcmp(any, "0") != 0;
    PldStepEntry *e = NULL;
    for (int i = 0; i < memo->n && !e; i++)
        if (memo->e[i].q == st->q && (any_sigma || memo->e[i].sigma == st->s) && memo->e[i].grid == grid &&
            memo->e[i].remove == st->remove)
            e = &memo->e[i];
    if (!e) {
        if (memo->n == PLD_MEMO_ENTRIES)
            return NULL;
        e = &memo->e[memo->n];
        *e = (PldStepEntry){st->q, st->s, grid, st->remove, a, 0, NULL, NULL};
    }
    long lo = e->n ? (a < e->lo ? a : e->lo) : a, hi = e->n ? (b > e->lo + e->n - 1 ? b : e->lo + e->n - 1) : b;
    long n = hi - lo + 1;
    if (n > PLD_MEMO_MAX_BINS)
        return NULL;
    if (lo < e->lo || n > e->n || !e->up) {
        double *up = malloc(sizeof(double) * (size_t)n), *down = malloc(sizeof(double) * (size_t)n);
        if (!up || !down) {
            free(up);
            free(down);
            return NULL;
        }
        if (e->n) {
            memcpy(up + (e->lo - lo), e->up, sizeof(double) * (size_t)e->n);
            memcpy(down + (e->lo - lo), e->down, sizeof(double) * (size_t)e->n);
        }
        // The bins outside the old range, each as step_pmf computes it (same ends, same x).
        for (long J = lo; J <= hi; J++) {
            if (e->n && J >= e->lo && J < e->lo + e->n)
                continue;
            if ((J & 0xffff) == 0)
                pld_progress(pr, "one step's masses, bin %ld of %ld .. %ld", J, lo, hi);
            double e0 = (double)(J - 1) * grid, e1 = (double)J * grid;
            half_bin(st, e0, e1, step_x(st, e0), step_x(st, e1), &up[J - lo], &down[J - lo]);
        }
        free(e->up);
        free(e->down);
        e->up = up;
        e->down = down;
        e->lo = lo;
        e->n = n;
        if (e == &memo->e[memo->n])
            memo->n++;
    }
    return e;
}

static FpStatus step_pmf(const Step *st, double grid, double tau_hi, double tau_lo, PldStepMemo *memo, PldProgress *pr,
                         StepPmf *out, FpError *err) {
    double left = 0.0, e_lo = tail_point(st, 0, tau_lo, &left), e_hi = tail_point(st, 1, tau_hi, &left);
    if (isnan(e_lo) || isnan(e_hi))
        return fp_fail(err, FP_EUNSUPPORTED,
                       "PLD: at sigma %g one step's privacy loss passes %s%g with probability %.3g, above the "
                       "accountant's truncation budget %.3g (its grid needs e^loss finite in double); use the RDP "
                       "accountant",
                       st->s, isnan(e_lo) ? "-" : "", PLD_MAX_LOSS, left, isnan(e_lo) ? tau_lo : tau_hi);
    if (st->q < 1.0 && st->remove)
        e_lo = fmax(e_lo, st->log1mq - grid); // nothing below the infimum
    if (st->q < 1.0 && !st->remove)
        e_hi = fmin(e_hi, -st->log1mq + grid); // nor above the supremum
    long j_lo = (long)floor(e_lo / grid), j_hi = (long)ceil(e_hi / grid);
    if (j_hi <= j_lo)
        j_hi = j_lo + 1;
    long n = j_hi - j_lo + 1;
    if (n > PLD_MAX_BINS)
        return fp_fail(err, FP_ENOMEM,
                       "PLD: one step needs %ld grid points at grid %g (q %g, sigma %g); use a coarser grid", n,
                       grid, st->q, st->s);
    double *mass = fp_calloc((size_t)n, sizeof(double), err);
    if (!mass)
        return FP_ENOMEM;
    // ω_j += γ_j up/(γ_j − γ_{j−1}) = up/(1 − e^{−Δ});  ω_{j−1} += γ_{j−1} down/(γ_j − γ_{j−1}) = down/(e^Δ − 1)
    double f_up = 1.0 / -expm1(-grid), f_down = 1.0 / expm1(grid);
    if (memo)
        pthread_mutex_lock(&memo->lock);
    const PldStepEntry *me = memo && n > 1 ? memo_entry(memo, st, grid, j_lo + 1, j_lo + n - 1, pr) : NULL;
    if (me) { // the same values in the same order as below
        for (long j = 1; j < n; j++) {
            mass[j] += me->up[j_lo + j - me->lo] * f_up;
            mass[j - 1] += me->down[j_lo + j - me->lo] * f_down;
        }
    }
    if (memo)
        pthread_mutex_unlock(&memo->lock);
    if (!me) {
        double *xs = fp_malloc((size_t)n * sizeof(double), err);
        if (!xs) {
            free(mass);
            return FP_ENOMEM;
        }
        for (long j = 0; j < n; j++)
            xs[j] = step_x(st, (double)(j_lo + j) * grid);
        for (long j = 1; j < n; j++) {
            if ((j & 0xffff) == 0)
                pld_progress(pr, "one step's masses, %ld of %ld grid points", j, n);
            double up, down;
            half_bin(st, (double)(j_lo + j - 1) * grid, (double)(j_lo + j) * grid, xs[j - 1], xs[j], &up, &down);
            mass[j] += up * f_up;
            mass[j - 1] += down * f_down;
        }
        free(xs);
    }
    double q_le, q_gt, p_gt;
    step_tails(st, (double)j_lo * grid, NULL, NULL, &q_le, NULL);
    step_tails(st, (double)j_hi * grid, NULL, &p_gt, NULL, &q_gt);
    mass[0] += exp((double)j_lo * grid) * q_le;
    mass[n - 1] += exp((double)j_hi * grid) * q_gt;
    for (long j = 0; j < n; j++)
        mass[j] *= 1.0 + PLD_MASS_INFLATION;
    out->lo = j_lo;
    out->n = n;
    out->mass = mass;
    out->inf_mass = p_gt * (1.0 + PLD_MASS_INFLATION);
    return FP_OK;
}

// An upper bound on ln Σ_j ω_j e^{λ ε_j}, from the masses' logarithms (lm[j] = ln ω_j,
// −∞ for 0): terms more than 40 below the largest count as e^{−40} of it each (so the
// result stays an upper bound while most exponentials are skipped).
static double log_mgf(const StepPmf *p, const double *lm, double grid, double lambda) {
    double m = -INFINITY;
    for (long j = 0; j < p->n; j++) {
        double v = lm[j] + lambda * (double)(p->lo + j) * grid;
        m = v > m ? v : m;
    }
    if (m == -INFINITY)
        return -INFINITY;
    double s = 0.0;
    long small = 0;
    for (long j = 0; j < p->n; j++) {
        double v = lm[j] + lambda * (double)(p->lo + j) * grid - m;
        if (v > -40.0)
            s += exp(v);
        else
            small += v > -INFINITY;
    }
    return m + log(s + (double)small * exp(-40.0)) + 1e-12;
}

// ---- composition and ε for one direction -------------------------------------------------

typedef struct {
    double epsilon, delta_grid, delta_tail, delta_alias, delta_roundoff;
    long fft_size;
} DirResult;

// Chernoff's λ runs over 2^{m/2}, m = −16..16: any λ gives a valid bound, and this grid
// is fine enough to size the window within a few per cent of the optimum.
#define LAMBDA_COUNT 33
static double lambda_at(int m) { return exp2((double)(m - 16) / 2.0); }

// min over λ of Σ_p k_p ln M_p(sign·λ) − sign·λ·t: the log of a Chernoff bound on
// P(S >= t) (sign +1) or P(S <= t) (sign −1).
static double log_chernoff(const double *lm, int sign, double t) {
    double best = INFINITY;
    for (int m = 0; m < LAMBDA_COUNT; m++)
        best = fmin(best, lm[m] - sign * lambda_at(m) * t);
    return best;
}

static complex long double cpow_int(complex long double z, long long k) {
    complex long double r = 1.0L;
    while (k > 0) {
        if (k & 1)
            r *= z;
        k >>= 1;
        if (k)
            z *= z;
    }
    return r;
}

// δ_grid(ε) = Σ_{L_i > ε} w_i (1 − e^{ε − L_i}) over the window (L_i = (J_lo + i)Δ).
static double window_delta(const long double *w, long n, long j_lo, double grid, double eps) {
    long double s = 0.0L;
    for (long i = n - 1; i >= 0; i--) {
        double l = (double)(j_lo + i) * grid;
        if (l <= eps)
            break;
        s += w[i] * -expm1l((long double)eps - (long double)l);
    }
    return (double)s;
}

// The transforms' buffers and plans, kept across the two directions of one accounting
// (same size: no new allocation, and FFTW reuses its twiddle tables for live plans).
typedef struct {
    long n;
    long double *in, *w;
    fftwl_complex *spec, *prod;
    fftwl_plan fwd, inv;
} FftWork;

static void fft_work_release(FftWork *f) {
    if (f->fwd || f->inv) {
        pthread_mutex_lock(&pld_fftw_planner_lock);
        if (f->fwd)
            fftwl_destroy_plan(f->fwd);
        if (f->inv)
            fftwl_destroy_plan(f->inv);
        pthread_mutex_unlock(&pld_fftw_planner_lock);
    }
    fftwl_free(f->in);
    fftwl_free(f->spec);
    fftwl_free(f->prod);
    free(f->w);
    memset(f, 0, sizeof *f);
}

// Buffers and plans for n-point transforms (kept when already that size).
static FpStatus fft_work_size(FftWork *f, long n, FpError *err) {
    if (f->n == n)
        return FP_OK;
    fft_work_release(f);
    f->in = fftwl_alloc_real((size_t)n);
    f->w = malloc((size_t)n * sizeof(long double));
    f->spec = fftwl_alloc_complex((size_t)n / 2 + 1);
    f->prod = fftwl_alloc_complex((size_t)n / 2 + 1);
    if (f->in && f->w && f->spec && f->prod) {
        pthread_mutex_lock(&pld_fftw_planner_lock);
        f->fwd = fftwl_plan_dft_r2c_1d((int)n, f->in, f->spec, FFTW_ESTIMATE);
        f->inv = fftwl_plan_dft_c2r_1d((int)n, f->prod, f->in, FFTW_ESTIMATE);
        pthread_mutex_unlock(&pld_fftw_planner_lock);
    }
    if (!f->fwd || !f->inv) {
        fft_work_release(f);
        return fp_fail(err, FP_ENOMEM, "PLD: out of memory for a %ld-point FFT", n);
    }
    f->n = n;
    return FP_OK;
}

static FpStatus direction_epsilon(const PldAccountant *acc, int remove, double delta, FftWork *fw, DirResult *res,
                                  PldProgress *pr, FpError *err) {
    pr->direction = remove ? "remove" : "add";
    double grid = acc->grid;
    long long total = 0;
    for (int p = 0; p < acc->n; p++)
        total += acc->phases[p].steps;
    memset(res, 0, sizeof *res);
    StepPmf *pm = fp_calloc((size_t)acc->n, sizeof(StepPmf), err);
    if (!pm)
        return FP_ENOMEM;
    FpStatus st = FP_OK;
    long double *in, *w;
    fftwl_complex *spec, *prod;
    double **logm = fp_calloc((size_t)acc->n, sizeof(double *), err);
    if (!logm) {
        free(pm);
        return FP_ENOMEM;
    }
    for (int p = 0; p < acc->n && st == FP_OK; p++) {
        const PldPhase *ph = &acc->phases[p];
        Step s1 = {ph->q, ph->sigma, ph->sigma * ph->sigma, log1p(-ph->q), remove};
        st = step_pmf(&s1, grid, PLD_TAIL_SHARE * delta / (double)total, PLD_LOW_SHARE * delta / (double)total,
                      acc->memo, pr, &pm[p], err);
    }
    for (int p = 0; p < acc->n && st == FP_OK; p++) {
        logm[p] = fp_malloc(sizeof(double) * (size_t)pm[p].n, err);
        if (!logm[p])
            st = FP_ENOMEM;
        for (long j = 0; logm[p] && j < pm[p].n; j++)
            logm[p][j] = pm[p].mass[j] > 0.0 ? log(pm[p].mass[j]) : -INFINITY;
    }
    if (st != FP_OK)
        goto out;

    // Window from Chernoff bounds; also never beyond the composed support.
    double lm_up[LAMBDA_COUNT], lm_dn[LAMBDA_COUNT], s_min = 0.0, s_max = 0.0;
    for (int m = 0; m < LAMBDA_COUNT; m++) {
        lm_up[m] = lm_dn[m] = 0.0;
        for (int p = 0; p < acc->n; p++) {
            double k = (double)acc->phases[p].steps;
            lm_up[m] += k * log_mgf(&pm[p], logm[p], grid, lambda_at(m));
            lm_dn[m] += k * log_mgf(&pm[p], logm[p], grid, -lambda_at(m));
        }
    }
    for (int p = 0; p < acc->n; p++) {
        s_min += (double)acc->phases[p].steps * (double)pm[p].lo * grid;
        s_max += (double)acc->phases[p].steps * (double)(pm[p].lo + pm[p].n - 1) * grid;
    }
    double log_tau = log(PLD_TAIL_SHARE * delta), top = s_max, bottom = s_min;
    for (int m = 0; m < LAMBDA_COUNT; m++) {
        top = fmin(top, (lm_up[m] - log_tau) / lambda_at(m));
        bottom = fmax(bottom, -(lm_dn[m] - log_tau) / lambda_at(m));
    }
    if (!((top - bottom) / grid < (double)PLD_MAX_FFT)) { // also before the casts below overflow
        st = fp_fail(err, FP_ENOMEM,
                     "PLD: the composition needs %.3g grid points at grid %g (more than %ld); use a coarser grid",
                     (top - bottom) / grid, grid, PLD_MAX_FFT);
        goto out;
    }
    long j_lo = (long)floor(bottom / grid) - 1, need = (long)ceil(top / grid) - j_lo + 2;
    long n = 2;
    while (n < need && n <= PLD_MAX_FFT)
        n *= 2;
    if (n > PLD_MAX_FFT) {
        st = fp_fail(err, FP_ENOMEM,
                     "PLD: the composition needs %ld grid points at grid %g (more than %ld); use a coarser grid", need,
                     grid, PLD_MAX_FFT);
        goto out;
    }
    res->fft_size = n;
    double window_top = (double)(j_lo + n) * grid; // first loss outside the window
    res->delta_alias = window_top > s_max ? 0.0 : exp(log_chernoff(lm_up, 1, window_top));

    st = fft_work_size(fw, n, err);
    if (st != FP_OK)
        goto out;
    in = fw->in;
    w = fw->w;
    spec = fw->spec;
    prod = fw->prod;
    for (long i = 0; i <= n / 2; i++)
        prod[i] = 1.0L;
    // Round-off bound pieces (banner, 5), u the unit round-off of long double.
    const double u = (double)LDBL_EPSILON / 2.0, mu = 4.0 * u, g4 = 4.0 * u / (1.0 - 4.0 * u);
    double eta = mu + g4 * (M_SQRT2 + mu), l2n = log2((double)n), eta_n = l2n * eta / (1.0 - l2n * eta);
    double log_g = 0.0, sum_k_a2 = 0.0, log_fw = 0.0, log_f = 0.0, ksum = 0.0;
    for (int p = 0; p < acc->n; p++) {
        double k = (double)acc->phases[p].steps;
        memset(in, 0, sizeof(long double) * (size_t)n);
        double l1 = 0.0;
        for (long j = 0; j < pm[p].n; j++) {
            long idx = (pm[p].lo + j) % n;
            if (idx < 0)
                idx += n;
            in[idx] += (long double)pm[p].mass[j];
            l1 += pm[p].mass[j];
        }
        double l2 = 0.0;
        for (long i = 0; i < n; i++)
            l2 += (double)(in[i] * in[i]);
        l2 = sqrt(l2);
        pld_progress(pr, "composing phase %d of %d by FFT", p + 1, acc->n);
        fftwl_execute_dft_r2c(fw->fwd, in, spec);
        for (long i = 0; i <= n / 2; i++)
            prod[i] *= cpow_int(spec[i], acc->phases[p].steps);
        log_g += k * log(l1 + eta_n * sqrt((double)n) * l2);
        sum_k_a2 += k * l2;
        log_fw += k * log(l1 + pm[p].inf_mass);
        log_f += k * log(l1);
        ksum += k;
    }
    pld_progress(pr, "the inverse FFT of %ld points", n);
    fftwl_execute_dft_c2r(fw->inv, prod, in);
    for (long i = 0; i < n; i++) { // window order: w[i] is the loss (j_lo + i)Δ
        long idx = (j_lo + i) % n;
        if (idx < 0)
            idx += n;
        long double v = in[idx] / (long double)n;
        w[i] = v > 0.0L ? v : 0.0L;
    }
    double rho = 1.01 * sqrt(5.0) * u * (ksum + acc->n), gbound = exp(log_g);
    res->delta_roundoff =
        sqrt((double)n) * gbound * (eta_n * sum_k_a2 + rho + eta_n * (1.0 + rho) + u);
    res->delta_tail = exp(log_f) * expm1(log_fw - log_f);
    // The window's top holds almost no mass (FFT residue above the Chernoff point): the
    // entries whose total from the top stays below 1e-3 of the alias budget are dropped and
    // counted in full in δ (with delta_alias), so that the sums below stay short.
    long n_used = n;
    {
        long double dropped = 0.0L, cap = (long double)(1e-3 * PLD_TAIL_SHARE * delta);
        while (n_used > 1 && dropped + w[n_used - 1] <= cap)
            dropped += w[--n_used];
        res->delta_alias += (double)dropped * (1.0 + 1e-12);
    }
    double target = (delta - res->delta_tail - res->delta_alias - res->delta_roundoff) / (1.0 + 2.0 * (double)n * u);
    if (!(target > 0.0)) {
        st = fp_fail(err, FP_EPARAM,
                     "PLD: delta %g is below the accountant's error budget at grid %g (tail %.3g, alias %.3g, "
                     "round-off %.3g); use a larger delta",
                     delta, grid, res->delta_tail, res->delta_alias, res->delta_roundoff);
        goto out;
    }
    // Smallest window index i with δ_grid(L_i) <= target (δ_grid is non-increasing):
    // located by one downward pass with running sums, δ_grid(L_{i−1}) = S0_i − e^{L_{i−1}} S1_i
    // (S0_i = Σ_{m>=i} w_m, S1_i = Σ_{m>=i} w_m e^{−L_m}, scaled by e^{L_top}), then confirmed
    // by direct sums of non-negative terms, moving the index if rounding misplaced it.
    long hi_i = 0;
    {
        long double s0 = 0.0L, s1 = 0.0L;
        double l_top = (double)(j_lo + n_used - 1) * grid;
        for (long i = n_used - 1; i >= 1; i--) {
            s0 += w[i];
            s1 += w[i] * expl((long double)l_top - (long double)((double)(j_lo + i) * grid));
            long double est = s0 - expl((long double)((double)(j_lo + i - 1) * grid) - l_top) * s1;
            if (est > (long double)target) {
                hi_i = i;
                break;
            }
        }
    }
    double d_hi = window_delta(w, n_used, j_lo, grid, (double)(j_lo + hi_i) * grid);
    while (hi_i < n_used - 1 && d_hi > target)
        d_hi = window_delta(w, n_used, j_lo, grid, (double)(j_lo + ++hi_i) * grid);
    double d_lo = hi_i > 0 ? window_delta(w, n_used, j_lo, grid, (double)(j_lo + hi_i - 1) * grid) : INFINITY;
    while (hi_i > 0 && d_lo <= target) {
        d_hi = d_lo;
        hi_i--;
        d_lo = hi_i > 0 ? window_delta(w, n_used, j_lo, grid, (double)(j_lo + hi_i - 1) * grid) : INFINITY;
    }
    if (d_hi > target) {
        st = fp_fail(err, FP_EPARAM, "PLD: internal window error (delta not reached inside the window)");
        goto out;
    }
    double eps = (double)(j_lo + hi_i) * grid;
    res->delta_grid = d_hi;
    if (hi_i > 0) { // δ_grid is linear in γ = e^ε on [L_{hi−1}, L_hi]
        // Aim a hair below the target so that rounding cannot put δ_grid(ε) above it; the
        // direct sum then confirms (else the grid point stands).
        double e0 = eps - grid, g0 = exp(e0), g1 = exp(eps), aim = target * (1.0 - 1e-9);
        double e = log(g0 + (d_lo - aim) / (d_lo - d_hi) * (g1 - g0));
        double d = e > e0 && e < eps ? window_delta(w, n_used, j_lo, grid, e) : INFINITY;
        if (d <= target) {
            eps = e;
            res->delta_grid = d;
        }
    }
    res->epsilon = eps;
out:
    for (int p = 0; p < acc->n; p++) {
        free(pm[p].mass);
        free(logm[p]);
    }
    free(pm);
    free(logm);
    return st;
}

// ---- the accountant ------------------------------------------------------------------------

FpStatus pld_accountant_create(double grid, PldAccountant **out, FpError *err) {
    *out = NULL;
    if (grid <= 0.0)
        grid = PLD_DEFAULT_GRID;
    if (!(grid >= 1e-6 && grid <= 0.1))
        return fp_fail(err, FP_EPARAM, "PLD grid must be in [1e-6, 0.1], got %g", grid);
    PldAccountant *a = fp_calloc(1, sizeof *a, err);
    if (!a)
        return FP_ENOMEM;
    a->grid = grid;
    *out = a;
    return FP_OK;
}

FpStatus pld_accountant_add(PldAccountant *acc, double q, double sigma, long long steps, FpError *err) {
    if (!(q >= 0.0 && q <= 1.0))
        return fp_fail(err, FP_EPARAM, "sampling rate q must be in [0, 1], got %g", q);
    if (!(sigma >= 0.0) || !isfinite(sigma))
        return fp_fail(err, FP_EPARAM, "noise multiplier sigma must be >= 0 and finite, got %g", sigma);
    if (steps < 0)
        return fp_fail(err, FP_EPARAM, "steps must be >= 0, got %lld", steps);
    if (steps == 0 || q == 0.0)
        return FP_OK;
    if (sigma == 0.0) {
        acc->infinite_reason = "sigma 0 adds no noise";
        return FP_OK;
    }
    if (sigma < PLD_MIN_SIGMA) {
        if (!acc->infinite_reason)
            acc->infinite_reason = PLD_MIN_SIGMA_REASON;
        return FP_OK;
    }
    for (int p = 0; p < acc->n; p++)
        if (acc->phases[p].q == q && acc->phases[p].sigma == sigma) {
            acc->phases[p].steps += steps;
            return FP_OK;
        }
    if (acc->n == acc->cap) {
        int cap = acc->cap ? 2 * acc->cap : 4;
        PldPhase *np = realloc(acc->phases, sizeof(PldPhase) * (size_t)cap);
        if (!np)
            return fp_fail(err, FP_ENOMEM, "out of memory in the PLD accountant");
        acc->phases = np;
        acc->cap = cap;
    }
    acc->phases[acc->n++] = (PldPhase){q, sigma, steps};
    return FP_OK;
}

FpStatus pld_accountant_epsilon(const PldAccountant *acc, double delta, PldEpsilon *out, FpError *err) {
    if (!(delta > 0.0 && delta < 1.0))
        return fp_fail(err, FP_EPARAM, "delta must be in (0, 1), got %g", delta);
    memset(out, 0, sizeof *out);
    out->grid = acc->grid;
    out->remove_direction = 1;
    if (acc->infinite_reason) {
        out->epsilon = INFINITY;
        out->infinite_reason = acc->infinite_reason;
        return FP_OK;
    }
    if (acc->n == 0)
        return FP_OK;
    DirResult rm, ad;
    FftWork fw = {0};
    double t0 = fp_monotonic_seconds();
    PldProgress pr = {acc->progress, "remove", t0, t0 + PLD_PROGRESS_SECONDS};
    FpStatus st = direction_epsilon(acc, 1, delta, &fw, &rm, &pr, err);
    if (st == FP_OK)
        st = direction_epsilon(acc, 0, delta, &fw, &ad, &pr, err);
    fft_work_release(&fw);
    FP_TRY(st);
    const DirResult *r = rm.epsilon >= ad.epsilon ? &rm : &ad;
    out->remove_direction = r == &rm;
    out->epsilon = fmax(0.0, r->epsilon);
    out->delta_grid = r->delta_grid;
    out->delta_tail = r->delta_tail;
    out->delta_alias = r->delta_alias;
    out->delta_roundoff = r->delta_roundoff;
    out->fft_size = r->fft_size;
    return FP_OK;
}

void pld_accountant_set_progress(PldAccountant *acc, FILE *progress) { acc->progress = progress; }
void pld_accountant_set_step_memo(PldAccountant *acc, PldStepMemo *memo) { acc->memo = memo; }

FpStatus pld_step_memo_create(PldStepMemo **out, FpError *err) {
    PldStepMemo *m = fp_calloc(1, sizeof *m, err);
    if (!m)
        return FP_ENOMEM;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return fp_fail(err, FP_ENOMEM, "out of resources for the PLD memo's lock");
    }
    *out = m;
    return FP_OK;
}

void pld_step_memo_free(PldStepMemo *m) {
    if (!m)
        return;
    for (int i = 0; i < m->n; i++) {
        free(m->e[i].up);
        free(m->e[i].down);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

long pld_step_memo_bins(PldStepMemo *m) {
    long n = 0;
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < m->n; i++)
        n += m->e[i].n;
    pthread_mutex_unlock(&m->lock);
    return n;
}

void pld_accountant_free(PldAccountant *acc) {
    if (!acc)
        return;
    free(acc->phases);
    free(acc);
}

static FpStatus one_phase_epsilon(double q, double sigma, long long steps, double delta, double grid,
                                  PldStepMemo *memo, double *eps, FpError *err) {
    PldAccountant *acc;
    FP_TRY(pld_accountant_create(grid, &acc, err));
    acc->memo = memo;
    FpStatus st = pld_accountant_add(acc, q, sigma, steps, err);
    PldEpsilon r;
    if (st == FP_OK)
        st = pld_accountant_epsilon(acc, delta, &r, err);
    pld_accountant_free(acc);
    if (st == FP_OK)
        *eps = r.epsilon;
    return st;
}

FpStatus pld_epsilon(double q, double sigma, long long steps, double delta, double *eps, FpError *err) {
    return one_phase_epsilon(q, sigma, steps, delta, PLD_DEFAULT_GRID, NULL, eps, err);
}

FpStatus pld_epsilon_memo(double q, double sigma, long long steps, double delta, PldStepMemo *memo, double *eps,
                          FpError *err) {
    return one_phase_epsilon(q, sigma, steps, delta, PLD_DEFAULT_GRID, memo, eps, err);
}

// The search's ε at σ. When the accountant cannot account σ (its loss beyond the grid's
// range, FP_EUNSUPPORTED, or more points than it holds, FP_ENOMEM) that status is
// returned with σ noted for search_refusal; any other failure goes to err. Also the
// progress line, at most every PLD_PROGRESS_SECONDS.
typedef struct {
    double q, delta, target, grid;
    long long steps;
    FILE *progress;
    double t0, next_report;
    int evals;
    double fail_sigma;  // where the accountant could not account (0: nowhere yet)
    FpStatus fail_code;
} SigmaSearch;

static FpStatus search_eval(SigmaSearch *ss, double sigma, double lo, double *eps, FpError *err) {
    FpError e = {0};
    FpStatus st = one_phase_epsilon(ss->q, sigma, ss->steps, ss->delta, ss->grid, NULL, eps, &e);
    ss->evals++;
    if (st == FP_EUNSUPPORTED || st == FP_ENOMEM) {
        ss->fail_sigma = sigma;
        ss->fail_code = st;
        return st;
    }
    if (st != FP_OK) {
        *err = e;
        return st;
    }
    double now = fp_monotonic_seconds();
    if (ss->progress && now >= ss->next_report) {
        fprintf(ss->progress, "PLD sigma search for epsilon %g: sigma in [%.8g, %.8g] after %d accountings (%.0f s)\n",
                ss->target, lo, sigma, ss->evals, now - ss->t0);
        fflush(ss->progress);
        ss->next_report = now + PLD_PROGRESS_SECONDS;
    }
    return FP_OK;
}

// The refusal when the search reached a σ the accountant cannot account. The target's
// σ is at most RDP's s_rdp (RDP's ε bounds the true ε from above too), and smaller σ only
// widen the loss, so no σ near the answer can be accounted here. What such a target
// means: an (ε, δ) guarantee bounds a membership test's true-positive rate by
// e^ε·FPR + δ, which reaches 1 at FPR = (1 − δ) e^{−ε} <= e^{−ε}. A coarser grid is
// offered only to a caller that chose the grid (grid > 0).
static FpStatus search_refusal(const SigmaSearch *ss, double s_rdp, FpError *err) {
    char rdp[96] = "";
    if (s_rdp > 0)
        snprintf(rdp, sizeof rdp, " (the RDP accountant meets it at sigma %.8g)", s_rdp);
    int grid_bound = ss->fail_code == FP_ENOMEM;
    double bound = s_rdp > 0 ? s_rdp : ss->fail_sigma, scale = exp10(3.0 - floor(log10(bound)));
    bound = ceil(bound * scale) / scale; // 4 digits, rounded up: still a bound
    return fp_fail(err, FP_EPARAM,
                   "PLD: target epsilon %g needs sigma below %.4g%s, and at sigma %.8g the PLD accountant %s; "
                   "epsilon %g allows a membership test of true-positive rate 1 at false-positive rate e^-%g: no "
                   "meaningful protection. Give a smaller target%s or use the RDP accountant",
                   ss->target, bound, rdp, ss->fail_sigma,
                   grid_bound ? "needs more grid points than it holds at this grid"
                              : "cannot hold one step's privacy loss (beyond 700, where e^loss leaves double precision)",
                   ss->target, ss->target, grid_bound && ss->grid > 0 ? ", a coarser grid" : "");
}

FpStatus pld_sigma_for_epsilon(double q, long long steps, double delta, double target_eps, double grid,
                               FILE *progress, double *sigma, double *eps_at, FpError *err) {
    if (!(q >= 0.0 && q <= 1.0))
        return fp_fail(err, FP_EPARAM, "sampling rate q must be in [0, 1], got %g", q);
    if (steps < 1)
        return fp_fail(err, FP_EPARAM, "steps must be >= 1, got %lld", steps);
    if (!(delta > 0.0 && delta < 1.0))
        return fp_fail(err, FP_EPARAM, "delta must be in (0, 1), got %g", delta);
    if (!(target_eps > 0.0) || !isfinite(target_eps))
        return fp_fail(err, FP_EPARAM, "target epsilon must be > 0 and finite, got %g", target_eps);
    if (q == 0.0) {
        *sigma = 0.0;
        if (eps_at)
            *eps_at = 0.0;
        return FP_OK;
    }
    double t0 = fp_monotonic_seconds();
    SigmaSearch ss = {q, delta, target_eps, grid, steps, progress, t0, t0 + PLD_PROGRESS_SECONDS, 0, 0, FP_OK};
    // ε is non-increasing in σ. Bracket: ε(lo) > target (lo = 0: no guarantee), ε(hi) <= target.
    // The start: RDP's σ for the target (PLD's ε is at most RDP's, so it usually meets the
    // target already) and 0.8 of it below (PLD usually needs 5-20% less noise).
    double lo = 0.0, hi = 1.0, e_hi, s_rdp = 0, f_lo = INFINITY;
    FpError e_rdp = {0};
    if (rdp_sigma_for_epsilon(q, steps, delta, target_eps, NULL, 0, &s_rdp, NULL, &e_rdp) == FP_OK && s_rdp > 0)
        hi = s_rdp;
    else
        s_rdp = 0;
#define SEARCH_EVAL(sig, e)                                                                                        \
    do {                                                                                                           \
        FpStatus st_ = search_eval(&ss, (sig), lo, (e), err);                                                      \
        if (st_ == FP_EUNSUPPORTED || st_ == FP_ENOMEM)                                                            \
            return search_refusal(&ss, s_rdp, err);                                                                \
        if (st_ != FP_OK)                                                                                          \
            return st_;                                                                                            \
    } while (0)
    SEARCH_EVAL(hi, &e_hi);
    if (e_hi <= target_eps && hi != 1.0) {
        double e_lo;
        SEARCH_EVAL(0.8 * hi, &e_lo);
        if (e_lo <= target_eps) {
            hi = 0.8 * hi;
            e_hi = e_lo;
        } else {
            lo = 0.8 * hi;
            f_lo = log(e_lo) - log(target_eps);
        }
    }
    while (!(e_hi <= target_eps)) {
        lo = hi;
        f_lo = log(e_hi) - log(target_eps); // +inf while ε is
        hi *= 2.0;
        if (hi > 1e6)
            return fp_fail(err, FP_EPARAM, "target epsilon %g is not reached with sigma up to 1e6", target_eps);
        SEARCH_EVAL(hi, &e_hi);
    }
    // Illinois false position on log ε − log target (ε is close to 1/σ there), bisecting
    // while ε(lo) is infinite; the bracket [lo, hi] shrinks from both sides every step,
    // and hi always has ε <= target. It stops when the bracket is within the tolerance or
    // ε(hi) is within it below the target (then σ is too: ε falls about as 1/σ).
    double f_hi = log(e_hi) - log(target_eps);
    int side = 0;
    while (hi - lo > PLD_SEARCH_REL_TOL * hi && f_hi < -PLD_SEARCH_REL_TOL) {
        double mid = isfinite(f_lo) && f_lo != f_hi ? hi - f_hi * (hi - lo) / (f_hi - f_lo) : 0.5 * (lo + hi);
        double pad = 0.25 * PLD_SEARCH_REL_TOL * hi; // keep mid strictly inside the bracket
        if (!(mid > lo + pad && mid < hi - pad))
            mid = 0.5 * (lo + hi);
        double e;
        SEARCH_EVAL(mid, &e);
        double f = log(e) - log(target_eps);
        if (e <= target_eps) {
            hi = mid;
            e_hi = e;
            f_hi = f;
            if (side == -1)
                f_lo *= 0.5;
            side = -1;
        } else {
            lo = mid;
            f_lo = f;
            if (side == 1)
                f_hi *= 0.5;
            side = 1;
        }
    }
#undef SEARCH_EVAL
    *sigma = hi;
    if (eps_at)
        *eps_at = e_hi;
    return FP_OK;
}
