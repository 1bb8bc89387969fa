// Privacy accountants: how much (ε, δ) a sequence of noisy releases spends.
//
// Three notions, each with its own conversion to (ε, δ):
// - RDP of the Poisson-subsampled Gaussian mechanism (Mironov, Talwar, Zhang 2019,
//   "Rényi Differential Privacy of the Sampled Gaussian Mechanism", §3.3), computed as
//   Opacus `accountants/analysis/rdp.py` does: integer orders by the binomial sum,
//   fractional orders by the two erfc series, composition by adding RDP order by order
//   over steps and phases. Conversion: Balle et al. 2020 ("Hypothesis testing
//   interpretations and Rényi DP", Thm 21) by default, or the classic Mironov 2017
//   Prop. 3 bound for comparison.            -> defenses/dp/accountant_rdp.c
//   The other sampling kinds (fixed-size without replacement: Wang, Balle,
//   Kasiviswanathan 2019; replace-one by joint convexity) -> defenses/dp/accountant_sampled.c
// - zCDP / plain Gaussian rounds (q = 1): ρ = Δ²/(2σ²) per round, ρ adds up; ε by
//   Bun & Steinke 2016 Prop. 1.3, by the RDP route over a continuum of orders, or
//   exactly (a composition of Gaussians is one Gaussian: Dong, Roth, Su 2022 GDP;
//   Balle & Wang 2018 Thm 8).                 -> defenses/dp/accountant_compose.c
// - Pure ε-DP (Laplace): sequential composition and the advanced composition theorem
//   of Dwork, Rothblum, Vadhan 2010 (Thm III.3). -> defenses/dp/accountant_compose.c
//
// Conventions
// - `sigma` in the RDP functions is the noise multiplier: the Gaussian's standard
//   deviation divided by the L2 sensitivity of what it is added to.
// - Every sound bound errs on the conservative side: an order whose series does not
//   converge numerically counts as +INFINITY (it is skipped), and the σ search only
//   returns a σ whose ε it has computed to be <= the target.
// - ε = INFINITY means no guarantee (σ = 0 with q > 0). best_alpha is NAN when no order
//   was needed (nothing spent).
// - No state outside the RdpAccountant object; every function is thread safe.
#ifndef FEDPRIV_DEFENSES_DP_ACCOUNTANT_H
#define FEDPRIV_DEFENSES_DP_ACCOUNTANT_H

#include "core/status.h"

// ---- RDP of the subsampled Gaussian mechanism -----------------------------------

// Opacus DEFAULT_ALPHAS: 1 + x/10 for x = 1..99, then the integers 12..63 (151 orders).
#define RDP_DEFAULT_ORDER_COUNT 151
// The default orders plus larger integer orders up to 1024, for small ε targets: with
// the default grid, δ = 1e-5 cannot certify ε below about 0.1 however large σ is.
#define RDP_EXTENDED_ORDER_COUNT (RDP_DEFAULT_ORDER_COUNT + 12)

// Write the order grid into out (room for the count) and return the count; out may
// be NULL to ask for the count only.
int rdp_default_orders(double *out);
int rdp_extended_orders(double *out);

typedef enum {
    RDP_CONVERSION_BALLE2020 = 0,  // ε = min_α ε_α − (ln δ + ln α)/(α−1) + ln((α−1)/α)  (default)
    RDP_CONVERSION_CLASSIC = 1,    // ε = min_α ε_α − ln δ/(α−1)  (Mironov 2017 Prop. 3; looser)
} RdpConversion;

// RDP ε_α of ONE step of the Poisson-subsampled Gaussian mechanism with sampling rate q
// and noise multiplier sigma, at order alpha > 1. Special cases: q = 0 → 0; sigma = 0
// → INFINITY; q = 1 → α/(2σ²). Returns NAN for q outside [0,1], sigma < 0 or
// alpha <= 1, and INFINITY when the fractional-order series fails numerically.
double rdp_subsampled_gaussian(double q, double sigma, double alpha);

// Converts RDP values rdp[i] at orders[i] (n of them, orders > 1) to (ε, δ): ε is the
// minimum over orders of the chosen conversion, clamped at 0 (an (ε<0, δ) guarantee
// implies (0, δ)), and *best_alpha (may be NULL) the order attaining it. Orders with a
// non-finite RDP are skipped; if none is left, ε = INFINITY, best_alpha = NAN.
// FP_EPARAM if δ is not in (0, 1), n < 1, or an order is <= 1.
FpStatus rdp_to_epsilon(const double *orders, const double *rdp, int n, double delta, RdpConversion conv,
                        double *eps, double *best_alpha, FpError *err);

// ---- Sampling kinds: who takes part in a step, and which neighbours a bound is for ----
//
// `sigma` is the noise std over the L2 sensitivity of the kind's neighbouring relation:
// for a sum of vectors clipped to norm C that is C for add/remove and 2C for replace-one.
// One account composes phases of one relation only (RDP composes per relation).
typedef enum {
    // Each participant independently with probability q; add/remove one participant.
    // Mironov, Talwar, Zhang 2019 (rdp_subsampled_gaussian): exact for the SGM.
    RDP_SAMPLING_POISSON = 0,
    // A uniformly random subset of fixed size m of the n, q = m/n; replace one.
    // Wang, Balle, Kasiviswanathan 2019 Thm 9 (rdp_fixed_gaussian).
    RDP_SAMPLING_FIXED = 1,
    // Each independently with probability q; replace one. Joint convexity only
    // (rdp_poisson_replace_gaussian): valid for any mechanism whose output, when the
    // changed participant is not sampled, does not depend on it.
    RDP_SAMPLING_POISSON_REPLACE = 2,
    // Each independently with probability q; add/remove one participant; the noise is the
    // discrete Gaussian (or any mechanism with the RDP curve α/(2σ²) in both orders):
    // Zhu & Wang 2019's general bound (rdp_poisson_discrete_gaussian), proven where
    // RDP_SAMPLING_POISSON's continuous-density formula is not.
    RDP_SAMPLING_POISSON_DISCRETE = 3,
} RdpSampling;

// "poisson", "fixed", "poisson-replace"; NULL for an unknown kind.
const char *rdp_sampling_name(RdpSampling s);
// 1 when the kind's bounds are for replace-one neighbours, 0 for add/remove.
int rdp_sampling_replace_one(RdpSampling s);

// RDP ε_α of ONE step of the Gaussian mechanism (noise multiplier sigma for replace-one
// neighbours) on a fixed-size sample without replacement, q = m/n. Wang, Balle,
// Kasiviswanathan 2019 ("Subsampled Rényi differential privacy and analytical moments
// accountant", AISTATS, Thm 9), for integer α >= 2 with ε(j) = j/(2σ²) the base
// mechanism's RDP and ε(∞) = ∞:
//   ε'(α) <= 1/(α−1) · ln(1 + q² C(α,2) min{4(e^{ε(2)} − 1), 2 e^{ε(2)}}
//                          + Σ_{j=3..α} 2 q^j C(α,j) e^{(j−1) ε(j)});
// between integers the bound on (α−1)ε'(α) (a cumulant generating function, convex in
// α) is interpolated linearly, and below 2 the bound at 2 holds (ε'(α) grows with α).
// The result is the smaller of that, the joint-convexity bound (see
// rdp_poisson_replace_gaussian) and the unsampled α/(2σ²): all three hold.
// q = 0 → 0; sigma = 0 → INFINITY; NAN for q outside [0,1], sigma < 0 or alpha <= 1.
double rdp_fixed_gaussian(double q, double sigma, double alpha);

// RDP ε_α of ONE step when the changed participant is sampled with probability q and
// the output does not depend on it otherwise (replace-one, Poisson or any sampling):
// by the joint convexity of e^{(α−1)D_α}, ε'(α) <= ln(1 − q + q e^{(α−1)α/(2σ²)})/(α−1).
// Weaker than rdp_fixed_gaussian for small q, valid without any other structure.
double rdp_poisson_replace_gaussian(double q, double sigma, double alpha);

// RDP ε_α of ONE step of the Poisson-subsampled discrete Gaussian mechanism, add/remove
// one participant, both directions: the mechanism adds N_Z(0, S²)^d to an integer vector
// of L2 sensitivity Δ, sigma = S/Δ, so its unsampled curve is α/(2σ²) (Canonne, Kamath,
// Steinke 2020 Thm 4). Zhu & Wang 2019 ("Poisson Subsampled Rényi Differential Privacy",
// ICML, Thm 5, the general upper bound for any mechanism with that curve), for integer
// α >= 2:
//   e^{(α−1)ε'(α)} <= (1−q)^{α−1}(1 + (α−1)q) + C(α,2) q²(1−q)^{α−2} e^{1/σ²}
//                     + 3 Σ_{ℓ=3..α} C(α,ℓ) q^ℓ (1−q)^{α−ℓ} e^{(ℓ²−ℓ)/(2σ²)},
// summed in log space; between integers the bound on (α−1)ε'(α) is interpolated linearly
// (convex in α), below 2 the bound at 2 holds; the result is the smaller of that and
// α/(2σ²), rounded up by 2^-40 relative. Always >= rdp_subsampled_gaussian at integer
// orders (the same sum with the terms ℓ >= 3 tripled). Also the bound a DP-SGD step with
// the discrete Gaussian uses: per-step curve α ↦ αΔ²/(2S²).
// q = 0 → 0; sigma = 0 → INFINITY; NAN for q outside [0,1], sigma < 0 or alpha <= 1.
double rdp_poisson_discrete_gaussian(double q, double sigma, double alpha);

// Sums of n iid discrete Gaussians N_Z(0, σ²)^d (distributed noise shares; Kairouz, Liu,
// Steinke 2021, "The Distributed Discrete Gaussian Mechanism for Federated Learning with
// Secure Aggregation", ICML, Thm 1): for σ >= 1/2 the sum added to an integer vector of L2
// sensitivity Δ is ½ε²-zCDP with ε² = Δ²/(nσ²) + τd/2, τ = 10 Σ_{k=1..n−1}
// e^{−2π²σ²k/(k+1)}. dgauss_sum_log_tau returns an upper bound on ln τ (−∞ for n <= 1);
// dgauss_sum_multiplier turns `multiplier` = √n·σ/Δ (what the sum would be as one
// Gaussian) into the multiplier σ' of a Gaussian with the same RDP curve α/(2σ'²):
// 1/σ'² = 1/multiplier² + τd/2, every step rounded so that σ' is never too large. Any
// account of the Gaussian's curve (RDP_SAMPLING_FIXED, _POISSON_DISCRETE, composition)
// then holds for the sum with σ'. NAN for σ < 1/2, n < 1, d < 0 or multiplier < 0.
double dgauss_sum_log_tau(double sigma, long long n);
double dgauss_sum_multiplier(double multiplier, double sigma, long long n, double d);

// The per-step RDP of a sampling kind (the functions above, by table).
double rdp_sampled_gaussian(RdpSampling s, double q, double sigma, double alpha);

// An accountant that accumulates phases (q, sigma, steps) of the subsampled Gaussian
// mechanism over a fixed order grid. Typical use in a defense: create once, add
// (q, σ, 1) after each round, ask epsilon whenever a privacy record is written.
typedef struct RdpAccountant RdpAccountant;

// orders = NULL uses the default grid (n_orders ignored); otherwise n_orders >= 1
// orders, each > 1, copied.
FpStatus rdp_accountant_create(const double *orders, int n_orders, RdpAccountant **out, FpError *err);
// Adds `steps` compositions of the Poisson-subsampled mechanism (q in [0,1], sigma >= 0
// finite, steps >= 0): rdp_accountant_add_sampled with RDP_SAMPLING_POISSON.
FpStatus rdp_accountant_add(RdpAccountant *acc, double q, double sigma, long long steps, FpError *err);
// Adds `steps` compositions under sampling kind s (per-round σ sequences: one call per
// round). FP_EPARAM when s's neighbouring relation differs from the phases already added.
FpStatus rdp_accountant_add_sampled(RdpAccountant *acc, RdpSampling s, double q, double sigma, long long steps,
                                    FpError *err);
// (ε, δ) of everything added so far. ε = 0 (best_alpha NAN) when nothing was spent
// (no phase, or only q = 0 / steps = 0 phases).
FpStatus rdp_accountant_epsilon(const RdpAccountant *acc, double delta, RdpConversion conv, double *eps,
                                double *best_alpha, FpError *err);
// The accumulated RDP per order (a view valid until the next add or free).
const double *rdp_accountant_rdp(const RdpAccountant *acc, const double **orders, int *n_orders);
void rdp_accountant_free(RdpAccountant *acc);

// One phase on the default grid with the Balle et al. 2020 conversion: the common case.
FpStatus rdp_epsilon(double q, double sigma, long long steps, double delta, double *eps, double *best_alpha,
                     FpError *err);

// The smallest noise multiplier σ (to relative 1e-7, by bisection) whose ε over `steps`
// steps at rate q, on the given orders (NULL: default grid) with the Balle et al. 2020
// conversion, is <= target_eps. The returned σ is one whose ε was computed and found
// <= target_eps (it never overshoots); *eps_at (may be NULL) is that ε. q = 0 gives
// σ = 0. FP_EPARAM for bad inputs or a target below what the grid can certify (the
// message says what the grid reaches; try rdp_extended_orders).
FpStatus rdp_sigma_for_epsilon(double q, long long steps, double delta, double target_eps, const double *orders,
                               int n_orders, double *sigma, double *eps_at, FpError *err);
// The same search under sampling kind s (rdp_sigma_for_epsilon is s = POISSON).
FpStatus rdp_sigma_for_epsilon_sampled(RdpSampling s, double q, long long steps, double delta, double target_eps,
                                       const double *orders, int n_orders, double *sigma, double *eps_at,
                                       FpError *err);

// ---- zCDP and plain Gaussian rounds (amplitude-varying noise, NbAFL) -------------

// ρ of the Gaussian mechanism with L2 sensitivity Δ and standard deviation σ:
// Δ²/(2σ²) (Bun & Steinke 2016 Prop. 1.6). INFINITY when sigma = 0.
double zcdp_gaussian_rho(double sensitivity, double sigma);
// Bun & Steinke 2016 Prop. 1.3: ρ-zCDP ⇒ (ρ + 2√(ρ ln(1/δ)), δ)-DP.
double zcdp_to_epsilon(double rho, double delta);
// The tighter RDP route: ρ-zCDP means RDP ε_α = αρ for every α > 1; ε is minimised
// over a continuum of α with the Balle et al. 2020 conversion. *best_alpha may be NULL.
double zcdp_to_epsilon_rdp(double rho, double delta, double *best_alpha);

// Sound ε for `rounds` Gaussian releases (no subsampling), round m with noise std over
// L2 sensitivity sigma_over_sens[m] (σ_m/Δ_s): RDP α/(2 s_m²) summed over rounds, i.e.
// ρ = Σ 1/(2 s_m²), converted by zcdp_to_epsilon_rdp. For Poisson-subsampled rounds
// use an RdpAccountant with rdp_accountant_add(acc, q, s_m, 1) per round instead.
// FP_EPARAM for rounds < 1, δ outside (0,1), or a negative/non-finite s_m.
FpStatus gaussian_rdp_epsilon(const double *sigma_over_sens, int rounds, double delta, double *eps,
                              double *best_alpha, FpError *err);
// The exact (tight) ε of the same composition: it is one Gaussian mechanism with
// μ = √(Σ 1/s_m²) (Dong, Roth, Su 2022 Cor. 3.3), whose privacy profile is
// δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018 Thm 8; Dong, Roth, Su
// Cor. 2.13). ε is found by bisection and
// rounded up (δ(ε) <= δ holds at the returned ε).
FpStatus gaussian_exact_epsilon(const double *sigma_over_sens, int rounds, double delta, double *eps,
                                FpError *err);
// δ(ε) of the Gaussian mechanism with μ = Δ/σ (the formula above).
double gaussian_delta_for_epsilon(double mu, double eps);

// Classic Gaussian mechanism calibration (Dwork & Roth 2014 Thm A.1):
// σ = Δ √(2 ln(1.25/δ)) / ε. The theorem holds only for 0 < ε < 1: *valid (may be
// NULL) is set to 0 outside that range, where the value is a nominal one (NbAFL uses
// it at ε = 10) and gaussian_exact_epsilon should be used to state a sound ε.
double gaussian_classic_sigma(double sensitivity, double eps, double delta, int *valid);

// ---- Pure ε-DP (Laplace) ---------------------------------------------------------

// ε of the Laplace mechanism with L1 sensitivity Δ and scale b: Δ/b.
double laplace_epsilon(double sensitivity, double scale);
// Sequential composition: Σ eps[i].
double dp_compose_basic(const double *eps, int k);
// Advanced composition (Dwork, Rothblum, Vadhan 2010 Thm III.3; Dwork & Roth Thm 3.20):
// k mechanisms, each (ε, δ)-DP, compose to (ε', kδ + δ')-DP with
// ε' = √(2k ln(1/δ')) ε + k ε (e^ε − 1). Both this and k·ε are valid; take the smaller.
// Returns NAN for δ' outside (0, 1), ε < 0 or k < 0.
double dp_compose_advanced(double eps, long long k, double delta_prime);

// ---- Numerics shared by the accountants ------------------------------------------

// ln erfc(x), accurate in relative terms far into the tail (erfc underflows past x ≈ 26;
// this uses the asymptotic series there), as scipy's log(2) + log_ndtr(−x√2).
double accountant_log_erfc(double x);

#endif
