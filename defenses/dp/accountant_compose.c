// Accountants without subsampling: zCDP / Gaussian rounds and pure ε-DP composition.
//
// - Gaussian rounds (amplitude-varying noise, NbAFL): round m adds N(0, σ_m²) to a query
//   of L2 sensitivity Δ_s. With s_m = σ_m/Δ_s the round is ρ_m = 1/(2 s_m²)-zCDP
//   (Bun & Steinke 2016 Prop. 1.6), i.e. (α, α ρ_m)-RDP for every α > 1; both add up
//   over rounds. Three conversions of the total ρ, loosest first:
//     Bun & Steinke Prop. 1.3     ε = ρ + 2√(ρ ln(1/δ));
//     RDP route (Balle+ 2020 Thm 21) ε = min_{α>1} αρ + (ln(1/δ) − ln α)/(α−1) + ln(1 − 1/α),
//                                 minimised over a continuum of α (any α is valid, so a
//                                 numerical minimiser cannot make the bound unsound);
//     exact                       the composition is the Gaussian mechanism with
//                                 μ = √(2ρ) (Dong, Roth, Su 2022 Cor. 3.3), and
//                                 δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)
//                                 (Balle & Wang 2018 Thm 8), inverted by bisection.
// - Pure ε-DP (Laplace): sequential composition Σ ε_i, and advanced composition
//   (Dwork, Rothblum, Vadhan 2010 Thm III.3).
// - The classic Gaussian calibration σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth Thm A.1),
//   flagged when ε >= 1 where the theorem does not apply.
#include <math.h>

#include "defenses/dp/accountant.h"

#define RHO_ALPHA_GRID 2000
#define RHO_LOG_AM1_MIN (-14.0)  // ln(α−1) range searched: α−1 in [e^−14, e^28]
#define RHO_LOG_AM1_MAX 28.0

// ---- zCDP ----------------------------------------------------------------------------

double zcdp_gaussian_rho(double sensitivity, double sigma) {
    if (!(sensitivity >= 0.0) || !(sigma >= 0.0))
        return NAN;
    if (sensitivity == 0.0)
        return 0.0;
    if (sigma == 0.0)
        return INFINITY;
    double s = sigma / sensitivity;
    return 1.0 / (2.0 * s * s);
}

double zcdp_to_epsilon(double rho, double delta) {
    if (!(rho >= 0.0) || !(delta > 0.0 && delta < 1.0))
        return NAN;
    return rho + 2.0 * sqrt(rho * log(1.0 / delta));
}

// The Balle et al. 2020 Thm 21 bound at order α for RDP curve αρ, in t = ln(α−1).
static double rho_bound_at(double rho, double log_inv_delta, double t) {
    double am1 = exp(t), a = 1.0 + am1;
    return a * rho + (log_inv_delta - log(a)) / am1 + log(am1 / a);
}

double zcdp_to_epsilon_rdp(double rho, double delta, double *best_alpha) {
    if (best_alpha)
        *best_alpha = NAN;
    if (!(rho >= 0.0) || !(delta > 0.0 && delta < 1.0))
        return NAN;
    if (rho == 0.0)
        return 0.0;  // RDP 0 at every order: the two output laws are the same
    if (isinf(rho))
        return INFINITY;
    double lid = log(1.0 / delta);
    // A log-spaced grid, then golden-section refinement around its best point.
    double step = (RHO_LOG_AM1_MAX - RHO_LOG_AM1_MIN) / (RHO_ALPHA_GRID - 1);
    double best = INFINITY, best_t = RHO_LOG_AM1_MIN;
    for (int i = 0; i < RHO_ALPHA_GRID; i++) {
        double t = RHO_LOG_AM1_MIN + i * step, v = rho_bound_at(rho, lid, t);
        if (v < best) {
            best = v;
            best_t = t;
        }
    }
    const double g = 0.5 * (sqrt(5.0) - 1.0);
    double a = best_t - step, b = best_t + step;
    double c = b - g * (b - a), d = a + g * (b - a);
    double fc = rho_bound_at(rho, lid, c), fd = rho_bound_at(rho, lid, d);
    for (int it = 0; it < 100 && b - a > 1e-13; it++) {
        if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = rho_bound_at(rho, lid, c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = rho_bound_at(rho, lid, d);
        }
    }
    if (fc < best) {
        best = fc;
        best_t = c;
    }
    if (fd < best) {
        best = fd;
        best_t = d;
    }
    if (best_alpha)
        *best_alpha = 1.0 + exp(best_t);
    return best < 0.0 ? 0.0 : best;
}

// ---- Gaussian rounds -----------------------------------------------------------------

// Σ 1/s_m² over the rounds (= 2ρ = μ²), after validation.
static FpStatus inverse_square_sum(const double *s, int rounds, double delta, double *out, FpError *err) {
    if (rounds < 1 || !s)
        return fp_fail(err, FP_EPARAM, "need at least one round of Gaussian noise, got %d", rounds);
    if (!(delta > 0.0 && delta < 1.0))
        return fp_fail(err, FP_EPARAM, "delta must be in (0, 1), got %g", delta);
    double sum = 0.0;
    for (int m = 0; m < rounds; m++) {
        if (!(s[m] >= 0.0) || isinf(s[m]))
            return fp_fail(err, FP_EPARAM, "round %d: sigma/sensitivity must be >= 0 and finite, got %g",
                           m, s[m]);
        sum += s[m] == 0.0 ? INFINITY : 1.0 / (s[m] * s[m]);
    }
    *out = sum;
    return FP_OK;
}

FpStatus gaussian_rdp_epsilon(const double *sigma_over_sens, int rounds, double delta, double *eps,
                              double *best_alpha, FpError *err) {
    double inv2 = 0.0;
    FP_TRY(inverse_square_sum(sigma_over_sens, rounds, delta, &inv2, err));
    *eps = zcdp_to_epsilon_rdp(0.5 * inv2, delta, best_alpha);
    return FP_OK;
}

// ln Φ(x) for the standard normal CDF.
static double log_ndtr(double x) {
    return -M_LN2 + accountant_log_erfc(-x / M_SQRT2);
}

double gaussian_delta_for_epsilon(double mu, double eps) {
    if (!(mu >= 0.0) || isnan(eps))
        return NAN;
    if (mu == 0.0)
        return eps >= 0.0 ? 0.0 : NAN;
    if (isinf(mu))
        return 1.0;
    double la = log_ndtr(-eps / mu + 0.5 * mu);
    double lb = eps + log_ndtr(-eps / mu - 0.5 * mu);
    if (lb >= la)
        return 0.0;
    return -exp(la) * expm1(lb - la);  // e^la − e^lb without cancellation
}

FpStatus gaussian_exact_epsilon(const double *sigma_over_sens, int rounds, double delta, double *eps,
                                FpError *err) {
    double inv2 = 0.0;
    FP_TRY(inverse_square_sum(sigma_over_sens, rounds, delta, &inv2, err));
    double mu = sqrt(inv2);
    if (isinf(mu)) {
        *eps = INFINITY;
        return FP_OK;
    }
    if (gaussian_delta_for_epsilon(mu, 0.0) <= delta) {
        *eps = 0.0;
        return FP_OK;
    }
    // δ(ε) decreases in ε: bracket, then bisect keeping δ(hi) <= δ.
    double lo = 0.0, hi = 1.0;
    while (gaussian_delta_for_epsilon(mu, hi) > delta) {
        lo = hi;
        hi *= 2.0;
        if (hi > 1e12) {
            *eps = INFINITY;
            return FP_OK;
        }
    }
    for (int it = 0; it < 200 && hi - lo > 1e-12 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (gaussian_delta_for_epsilon(mu, mid) <= delta)
            hi = mid;
        else
            lo = mid;
    }
    *eps = hi;
    return FP_OK;
}

double gaussian_classic_sigma(double sensitivity, double eps, double delta, int *valid) {
    if (valid)
        *valid = 0;
    if (!(sensitivity >= 0.0) || !(eps > 0.0) || !(delta > 0.0 && delta < 1.0))
        return NAN;
    if (valid)
        *valid = eps < 1.0;
    return sensitivity * sqrt(2.0 * log(1.25 / delta)) / eps;
}

// ---- pure ε-DP -----------------------------------------------------------------------

double laplace_epsilon(double sensitivity, double scale) {
    if (!(sensitivity >= 0.0) || !(scale >= 0.0))
        return NAN;
    if (sensitivity == 0.0)
        return 0.0;
    return scale == 0.0 ? INFINITY : sensitivity / scale;
}

double dp_compose_basic(const double *eps, int k) {
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        if (!(eps[i] >= 0.0))
            return NAN;
        sum += eps[i];
    }
    return sum;
}

double dp_compose_advanced(double eps, long long k, double delta_prime) {
    if (!(eps >= 0.0) || k < 0 || !(delta_prime > 0.0 && delta_prime < 1.0))
        return NAN;
    double kd = (double)k;
    return sqrt(2.0 * kd * log(1.0 / delta_prime)) * eps + kd * eps * expm1(eps);
}
