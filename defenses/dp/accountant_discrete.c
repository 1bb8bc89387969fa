// Proven accounts of the discrete Gaussian N_Z(0, S²) where the continuous Gaussian's
// formulas are only an analogy (see defenses/dp/accountant.h):
//
// 1. Poisson subsampling (rdp_poisson_discrete_gaussian). Zhu & Wang 2019 ("Poisson
//    Subsampled Rényi Differential Privacy", ICML, Thm 5, the general upper bound) hold for
//    ANY mechanism M that is (α, ε(α))-RDP for every integer α >= 2 between neighbours that
//    differ by one element, in both orders: for integer α >= 2 and sampling probability q,
//    the Poisson-subsampled M is (α, ε'(α))-RDP, both directions of add/remove, with
//      e^{(α−1)ε'(α)} <= (1−q)^{α−1}(1 + (α−1)q) + C(α,2) q²(1−q)^{α−2} e^{ε(2)}
//                        + 3 Σ_{ℓ=3..α} C(α,ℓ) q^ℓ (1−q)^{α−ℓ} e^{(ℓ−1)ε(ℓ)}.
//    The discrete Gaussian mechanism x ↦ x + N_Z(0, S²)^d on integer vectors with L2
//    sensitivity Δ satisfies ε(α) = αΔ²/(2S²) at every α > 1, both orders (Canonne, Kamath,
//    Steinke 2020, "The Discrete Gaussian for Differential Privacy", Thm 4 and its
//    multivariate form): with σ = S/Δ the curve α/(2σ²), so (ℓ−1)ε(ℓ) = (ℓ²−ℓ)/(2σ²) and
//    the bound is Mironov, Talwar, Zhang 2019's integer-order sum with the terms ℓ >= 3
//    tripled. Every step holds for the discrete law: no continuous density is used.
//    (One direction is even exact: for an integer shift v the lattice sum
//    Σ_x exp(−‖x − kv‖²/2S²) does not depend on k, so E_{x∼N_Z(0,S²)}[e^{k⟨x,v⟩/S²}] =
//    e^{k²‖v‖²/2S²} and D_α(mixture ‖ base) is MTZ's sum exactly; MTZ's argument that the
//    other direction is smaller uses the continuous density, hence the general bound.)
//    Fractional orders: (α−1)D_α(P‖Q) = ln E_Q[(P/Q)^α] is convex in α and 0 at α = 1, so
//    the bounds at the integers around α, interpolated linearly, bound it (in (1, 2): the
//    bound at 2). The result is the smaller of that and the unsampled α/(2σ²), times
//    (1 + 2^-40) for the rounding of the double sums (relative 1e-15 each).
//
// 2. Sums of discrete Gaussians (dgauss_sum_multiplier). Kairouz, Liu, Steinke 2021 ("The
//    Distributed Discrete Gaussian Mechanism for Federated Learning with Secure
//    Aggregation", ICML, Thm 1 / Prop. 14): for σ >= 1/2 and Y the sum of n iid
//    N_Z(0, σ²)^d, x ↦ x + Y on integer vectors with L2 sensitivity Δ is ½ε²-zCDP with
//      ε² <= Δ²/(nσ²) + ½τd,   τ = 10 Σ_{k=1..n−1} exp(−2π²σ² k/(k+1)),
//    i.e. the RDP curve α/(2σ_eff²) of a Gaussian of multiplier σ_eff with
//    1/σ_eff² = Δ²/(nσ²) + ½τd: every account written for the Gaussian's curve (Poisson,
//    fixed-size, composition) applies to the sum with σ_eff. τ underflows a double for the
//    grids used here (σ = S >= 64: τ <= 10(n−1)e^{−π²S²} ≈ e^{−40000}); it is bounded in
//    log space and every rounding goes upward (a τd/2 below the smallest normal double is
//    replaced by that double).
#include <float.h>
#include <math.h>

#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_logspace.h"

#define DISCRETE_ROUND_UP (1.0 + 0x1p-40)

// Upper bound on ln of Zhu & Wang's sum at integer α >= 2 for the curve ε(ℓ) = ℓ/(2σ²).
static double zw_log_moment(double q, double sigma, long long alpha) {
    double lq = log(q), l1q = log1p(-q), inv2s2 = 1.0 / (2.0 * sigma * sigma), a = (double)alpha;
    double lga = lgam(a + 1.0);
    double m = -INFINITY, sum = 0.0;
    // (1−q)^{α−1}(1 + (α−1)q): the ℓ = 0 and ℓ = 1 terms together.
    lse_push(&m, &sum, (a - 1.0) * l1q + log1p((a - 1.0) * q));
    for (long long l = 2; l <= alpha; l++) {
        double ld = (double)l;
        double t = lga - lgam(ld + 1.0) - lgam(a - ld + 1.0) + ld * lq + (a - ld) * l1q + (ld * ld - ld) * inv2s2;
        lse_push(&m, &sum, l >= 3 ? t + log(3.0) : t);
    }
    return m + log(sum);
}

double rdp_poisson_discrete_gaussian(double q, double sigma, double alpha) {
    if (!(q >= 0.0 && q <= 1.0) || !(sigma >= 0.0) || !(alpha > 1.0))
        return NAN;
    if (q == 0.0)
        return 0.0;
    if (sigma == 0.0 || isinf(alpha))
        return isinf(sigma) ? 0.0 : INFINITY;
    if (isinf(sigma))
        return 0.0;
    double base = alpha / (2.0 * sigma * sigma);
    if (q == 1.0 || alpha >= 1e6)
        return base;
    double zw;
    if (alpha <= 2.0) {
        zw = zw_log_moment(q, sigma, 2);  // (α−1)·bound(2) >= (α−1)D_α, and ε' grows with α
    } else if (alpha == floor(alpha)) {
        zw = zw_log_moment(q, sigma, (long long)alpha) / (alpha - 1.0);
    } else {
        double lo = floor(alpha), t = alpha - lo;
        zw = ((1.0 - t) * zw_log_moment(q, sigma, (long long)lo) + t * zw_log_moment(q, sigma, (long long)lo + 1)) /
             (alpha - 1.0);
    }
    if (!(zw >= 0.0))
        zw = 0.0;  // the sum is >= 1 in exact arithmetic (ln of a moment of a likelihood ratio)
    zw *= DISCRETE_ROUND_UP;
    return zw < base ? zw : base;
}

double dgauss_sum_log_tau(double sigma, long long n) {
    if (!(sigma > 0.0) || n < 2)
        return -INFINITY;  // one draw is the discrete Gaussian itself: τ = 0
    double c = 2.0 * M_PI * M_PI * sigma * sigma, m = -INFINITY, sum = 0.0;
    for (long long k = 1; k < n; k++)
        lse_push(&m, &sum, -c * ((double)k / (double)(k + 1)));
    double lt = log(10.0) + m + log(sum);
    return lt + 1e-12 * fabs(lt) + 1e-12;  // upward: relative 1e-12 covers the rounding above
}

double dgauss_sum_multiplier(double multiplier, double sigma, long long n, double d) {
    if (!(multiplier >= 0.0) || !(sigma >= 0.5) || n < 1 || !(d >= 0.0))
        return NAN;
    if (multiplier == 0.0 || n == 1 || d == 0.0)
        return multiplier;
    double lt = dgauss_sum_log_tau(sigma, n) + log(d) - M_LN2;  // ln(τd/2), rounded up
    double extra = lt < log(DBL_MIN) ? DBL_MIN : exp(lt) * DISCRETE_ROUND_UP;
    double inv2 = 1.0 / (multiplier * multiplier) * DISCRETE_ROUND_UP + extra;
    if (isinf(inv2))
        return 0.0;
    return 1.0 / sqrt(inv2 * DISCRETE_ROUND_UP);
}
