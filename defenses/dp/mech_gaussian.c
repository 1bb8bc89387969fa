// gaussian: x clipped into [lo, hi] plus Gaussian noise, (ε, δ)-DP per coordinate with
// sensitivity Δ = hi - lo. σ by variant:
//   analytic  the smallest σ with Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ) <= δ (Balle & Wang
//             2018 Thm 8; exact for every ε; defenses/dp/accountant.h computes δ(ε)).
//   classic   σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth 2014 Thm A.1), which holds only for
//             ε < 1: refused above.
//
// Safe sampler (the default; one Philox block per element; docs/mechanisms.md §Gaussian):
// the discrete Gaussian on a grid (Canonne, Kamath, Steinke 2020), clamped.
//   grid     Λ = Δ/N, N = ⌈16Δ/σ⌉: the input's place (x - lo)/Λ ∈ [0, N] is rounded at
//            random (word 2; unbiased) to n ∈ [0, N].
//   noise    J ~ the 63-bit table of N_Z(0, σ_g²) (words 0-1; defenses/dp/dgauss.h), σ_g in
//            grid steps calibrated by bisection so that the exact δ(ε) of the table's law
//            for shifts up to N (dgauss_delta) is <= δ. Start: the variant's σ·N/Δ.
//   output   K = clamp(n + J, N - jmax, jmax), jmax ≈ 6.45σ_g (ideal probabilities >= 2^-30);
//            y = lo + Λ·K. The clamp is post-processing of n + J and makes every output
//            reachable from every input.
// Per scalar this is (ε, δ)-DP for the code as it runs (mixtures over the rounding do not
// raise a hockey-stick divergence above its worst pair of grid points). For the whole
// upload (d scalars, R rounds): the ideal discrete Gaussian has RDP α·N²/(2σ_g²) per
// scalar (CKS Prop. 5), the table's law is within 1 ± η of the clamped ideal law on every
// output (η ~ 1e-10: the clamp sits where the ideal probabilities fall below 2^-30), so
// each scalar's RDP grows by at most (α ln(1+η) - (α-1) ln(1-η))/(α-1); composed over dR
// scalars and converted at δ (Balle et al. 2020) (mech_upload_epsilon).
// Float sampler ("sampler": "float", the pre-grid one): Box-Muller in float over the word
// pairs of a block (|noise| <= 6.77σ), added in float: no ε holds (Mironov 2012; Jin et
// al. 2022).
#include <math.h>

#include "defenses/dp/accountant.h"
#include "defenses/dp/dgauss.h"
#include "defenses/dp/mech_internal.h"

// The largest μ = Δ/σ (to relative 1e-12) with δ(ε; μ) <= delta: bisection on μ, δ(ε; μ)
// increasing in μ, keeping the side that satisfies the bound.
static double analytic_mu(double eps, double delta) {
    double lo = 0, hi = 1;
    while (gaussian_delta_for_epsilon(hi, eps) <= delta && hi < 1e6) {
        lo = hi;
        hi *= 2;
    }
    for (int it = 0; it < 200 && hi - lo > 1e-12 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (gaussian_delta_for_epsilon(mid, eps) <= delta)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// σ/Δ of the variant's continuous calibration.
static FpStatus sigma_over_sens(const Mech *m, double *out, FpError *err) {
    double eps = m->spec.eps;
    if (m->spec.variant == MV_CLASSIC) {
        if (eps >= 1)
            return fp_fail(err, FP_EPARAM,
                           "%s.epsilon: the classic Gaussian calibration (Dwork & Roth Thm A.1) holds only for "
                           "epsilon < 1, got %g (use variant analytic)",
                           m->spec.path, eps);
        *out = gaussian_classic_sigma(1, eps, m->spec.delta, NULL);
        return FP_OK;
    }
    double mu = analytic_mu(eps, m->spec.delta);
    if (!(mu > 0))
        return fp_fail(err, FP_EPARAM, "%s.delta: no Gaussian noise meets (epsilon %g, delta %g)", m->spec.path, eps,
                       m->spec.delta);
    *out = 1 / mu;
    return FP_OK;
}

// ---- float ----------------------------------------------------------------------------

static FpStatus gaussian_float_setup(Mech *m, FpError *err) {
    FP_TRY(sigma_over_sens(m, &m->d_a, err));
    m->eps_proven = m->delta_proven = INFINITY;
    return FP_OK;
}

static void gaussian_float_set_range(Mech *m) {
    m->sigma = m->d_a * (m->spec.hi - m->spec.lo);
    m->f_a = (float)m->sigma;
}

static float gaussian_float_one(const Mech *m, float x, const uint32_t w[4], int j) {
    float z[2];
    mech_gauss2(w[j & 2], w[(j & 2) + 1], &z[0], &z[1]);
    return fmaf(m->f_a, z[j & 1], mech_clipf(x, m->f_lo, m->f_hi));
}

#if defined(__AVX512F__)
// mech_gauss2 on 16 lanes, operation for operation (the same roundings: fmaf is
// vfmadd, sqrtf is vsqrtps, (float)u32 is vcvtudq2ps). The compiler does not vectorise
// the scalar loop itself: sqrtf may set errno.
static inline void gauss2_x16(__m512i w0, __m512i w1, __m512 *z0, __m512 *z1) {
#define F(v) _mm512_set1_ps(v)
    __m512 u1 = _mm512_fmadd_ps(_mm512_cvtepu32_ps(w0), F(0x1p-32f), F(0x1p-33f));
    __m512i ix = _mm512_sub_epi32(_mm512_castps_si512(u1), _mm512_set1_epi32(0x3f3504f3));
    __m512 fk = _mm512_cvtepi32_ps(_mm512_srai_epi32(ix, 23));
    __m512 m = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_and_si512(ix, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x3f3504f3)));
    __m512 sv = _mm512_div_ps(_mm512_sub_ps(m, F(1.0f)), _mm512_add_ps(m, F(1.0f)));
    __m512 s2 = _mm512_mul_ps(sv, sv);
    __m512 p = _mm512_fmadd_ps(s2, F(0.22222222f), F(0.28571429f));
    p = _mm512_fmadd_ps(p, s2, F(0.4f));
    p = _mm512_fmadd_ps(p, s2, F(0.66666667f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, s2), sv, _mm512_add_ps(sv, sv));
    __m512 lg = _mm512_fmadd_ps(fk, F(0.693359375f), _mm512_fmadd_ps(fk, F(-2.12194440e-4f), p));
    __m512 t = _mm512_mul_ps(F(-2.0f), lg);
    __m512 r = _mm512_sqrt_ps(_mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, F(0.0f), _CMP_GT_OQ), F(0.0f), t));
    __m512 a = _mm512_fmadd_ps(_mm512_cvtepu32_ps(_mm512_and_si512(w1, _mm512_set1_epi32(0x3fffffff))),
                               F(0x1.921fb6p-30f), F(-0.785398163f));
    __m512 a2 = _mm512_mul_ps(a, a);
    __m512 sn = _mm512_fmadd_ps(a2, F(-1.9515295891E-4f), F(8.3321608736E-3f));
    sn = _mm512_fmadd_ps(sn, a2, F(-1.6666654611E-1f));
    sn = _mm512_fmadd_ps(_mm512_mul_ps(sn, a2), a, a);
    __m512 cs = _mm512_fmadd_ps(a2, F(2.443315711809948E-5f), F(-1.388731625493765E-3f));
    cs = _mm512_fmadd_ps(cs, a2, F(4.166664568298827E-2f));
    cs = _mm512_fmadd_ps(_mm512_mul_ps(cs, a2), a2, _mm512_fmadd_ps(F(-0.5f), a2, F(1.0f)));
    __mmask16 swap = _mm512_test_epi32_mask(w1, _mm512_set1_epi32(0x40000000));
    __m512i neg = _mm512_and_si512(w1, _mm512_set1_epi32((int)0x80000000u));
    __m512 c = _mm512_mask_blend_ps(swap, cs, sn), s = _mm512_mask_blend_ps(swap, sn, cs);
    *z0 = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(r, c)), neg));
    *z1 = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(r, s)), neg));
#undef F
}
#endif

// Box-Muller on the block-major words (word pairs (0,1) and (2,3) of each block), then
// the deviates are interleaved into element order like the words.
static inline void gaussian_float_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    PhiloxU32x16 zv[4];
#if defined(__AVX512F__)
    __m512 z[4];
    gauss2_x16((__m512i)w[0], (__m512i)w[1], &z[0], &z[1]);
    gauss2_x16((__m512i)w[2], (__m512i)w[3], &z[2], &z[3]);
    for (int j = 0; j < 4; j++)
        zv[j] = (PhiloxU32x16)_mm512_castps_si512(z[j]);
#else
    uint32_t wb[4][16];
    float z[4][16];
    memcpy(wb, w, sizeof wb);
    for (int l = 0; l < 16; l++) {
        mech_gauss2(wb[0][l], wb[1][l], &z[0][l], &z[1][l]);
        mech_gauss2(wb[2][l], wb[3][l], &z[2][l], &z[3][l]);
    }
    memcpy(zv, z, sizeof zv);
#endif
    uint32_t ze[64];
    philox16_interleave4(zv, ze);
    float n[64];
    memcpy(n, ze, sizeof n);
    const float lo = m->f_lo, hi = m->f_hi, sigma = m->f_a;
    for (int i = 0; i < 64; i++)
        x[i] = fmaf(sigma, n[i], mech_clipf(x[i], lo, hi));
}

static void gaussian_float_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, gaussian_float_chunk);
}

static double gaussian_float_mean(const Mech *m, double x) { return mech_clip(m, x); }
static double gaussian_float_variance(const Mech *m, double x) { return m->sigma * m->sigma; }

static void gaussian_float_law(const Mech *m, double x, MechLaw *law) {
    law->n = 1;
    law->p[0] = (LawPiece){.kind = LAW_NORMAL, .weight = 1, .a = mech_clip(m, x), .b = m->sigma};
}

// An output comes from 2^64 word pairs: no inverse search decides it.
static int gaussian_float_possible(const Mech *m, double x, float y) { return -1; }

static double gaussian_float_upload_epsilon(const Mech *m, double units, double rounds, double delta) {
    return INFINITY;
}

// ---- safe -----------------------------------------------------------------------------

static FpStatus gaussian_safe_setup(Mech *m, FpError *err) {
    double ratio, eps = m->spec.eps, delta = m->spec.delta;
    FP_TRY(sigma_over_sens(m, &ratio, err));
    MechGaussTable *t = &m->tab.gauss;
    int n_grid = (int)ceil(16 / ratio - 1e-9);
    n_grid = n_grid < 1 ? 1 : n_grid;
    double s0 = ratio * n_grid;
    if (s0 * 1.1 > DGAUSS_SIGMA_MAX)
        return fp_fail(err, FP_EPARAM,
                       "%s.epsilon: the safe gaussian sampler holds sigma up to %g (hi - lo), this needs %.4g; use "
                       "\"sampler\": \"float\" or a larger epsilon",
                       m->spec.path, DGAUSS_SIGMA_MAX / 1.1, ratio);
    // The smallest σ_g (to relative 1e-7) whose exact δ(ε) over shifts 1..N is <= δ; the
    // classic variant keeps its (larger) σ unless the table needs more.
    double hi = s0 * (m->spec.variant == MV_CLASSIC ? 1 : 1.02), lo = m->spec.variant == MV_CLASSIC ? s0 : 0.9 * s0;
    for (;;) {
        FP_TRY(dgauss_init(&t->g, hi, err));
        if (dgauss_delta(&t->g, n_grid, eps) <= delta)
            break;
        lo = hi;
        hi *= 1.02;
        if (hi > DGAUSS_SIGMA_MAX)
            return fp_fail(err, FP_EPARAM, "%s.delta: the safe gaussian sampler cannot reach delta %g", m->spec.path,
                           delta);
    }
    while (hi - lo > 1e-7 * hi) {
        double mid = 0.5 * (lo + hi);
        FP_TRY(dgauss_init(&t->g, mid, err));
        if (dgauss_delta(&t->g, n_grid, eps) <= delta)
            hi = mid;
        else
            lo = mid;
    }
    FP_TRY(dgauss_init(&t->g, hi, err));
    t->n_grid = n_grid;
    t->delta_scalar = dgauss_delta(&t->g, n_grid, eps);
    // The clamp: where the ideal law's probabilities fall below 2^-30, so that the table's
    // relative error stays tiny on every output (the clamped tails hold about 1e-9).
    long jmax = (long)floor(hi * sqrt(2 * 30 * log(2.0)));
    if (jmax <= n_grid + 1 || jmax >= t->g.ymax)
        return fp_fail(err, FP_EPARAM, "%s.epsilon: the safe gaussian sampler's grid is too coarse for epsilon %g",
                       m->spec.path, eps);
    t->rel_err = dgauss_rel_err(&t->g, jmax, n_grid);
    m->lat_kmin = n_grid - jmax;
    m->lat_kmax = jmax;
    m->d_a = hi / n_grid;   // σ_g·Λ/Δ: the ideal law's σ over Δ
    m->eps_proven = eps;
    m->delta_proven = t->delta_scalar;
    return FP_OK;
}

static void gaussian_safe_set_range(Mech *m) {
    double lam = (m->spec.hi - m->spec.lo) / m->tab.gauss.n_grid;
    m->sigma = sqrt(m->tab.gauss.g.variance) * lam;   // the realised law's standard deviation
    m->f_b = (float)lam;
    m->f_e = (float)(1.0 / lam);
}

static inline float gaussian_safe_kernel(float x, uint32_t w0, uint32_t w1, uint32_t w2, float lo, float hi,
                                         float inv_lam, float lam, int n_grid, const DGauss *g, int kmin, int kmax) {
    int n = mech_round_random((mech_clipf(x, lo, hi) - lo) * inv_lam, n_grid, w2 >> 8, 24);
    long k = n + dgauss_draw(g, w0, w1);
    k = k < kmin ? kmin : k > kmax ? kmax : k;
    return fmaf(lam, (float)k, lo);
}

static float gaussian_safe_one(const Mech *m, float x, const uint32_t w[4], int j) {
    (void)j;
    return gaussian_safe_kernel(x, w[0], w[1], w[2], m->f_lo, m->f_hi, m->f_e, m->f_b, m->tab.gauss.n_grid,
                                &m->tab.gauss.g, (int)m->lat_kmin, (int)m->lat_kmax);
}

// The kernel with the table search level by level across the 16 lanes (each pass
// vectorises; the search is dgauss_draw's): the same operations as gaussian_safe_kernel.
static inline void gaussian_safe_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    const float lo = m->f_lo, hi = m->f_hi, il = m->f_e, lam = m->f_b;
    const int ng = m->tab.gauss.n_grid, kmin = (int)m->lat_kmin, kmax = (int)m->lat_kmax;
    const DGauss *g = &m->tab.gauss.g;
    uint64_t u[16];
    int n[16], pos[16];
    for (int l = 0; l < 16; l++) {
        u[l] = ((uint64_t)(w[0][l] & 0x7fffffffu) << 32) | w[1][l];
        n[l] = mech_round_random((mech_clipf(x[l], lo, hi) - lo) * il, ng, w[2][l] >> 8, 24);
        pos[l] = 0;
    }
    for (int s = 1 << g->levels >> 1; s >= 1; s >>= 1)
        for (int l = 0; l < 16; l++)
            pos[l] += g->cdf[pos[l] + s] <= u[l] ? s : 0;
    for (int l = 0; l < 16; l++) {
        int k = n[l] + pos[l] - g->ymax;
        k = k < kmin ? kmin : k > kmax ? kmax : k;
        x[l] = fmaf(lam, (float)k, lo);
    }
}

static void gaussian_safe_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, gaussian_safe_chunk);
}

static double gaussian_ge(const Mech *m, long j) { return dgauss_ge(&m->tab.gauss.g, j); }

static void gaussian_safe_law(const Mech *m, double x, MechLaw *law) {
    int n[2];
    double p_hi;
    mech_round_law((mech_input(m, x) - m->f_lo) * m->f_e, m->tab.gauss.n_grid, 24, &n[0], &n[1], &p_hi);
    law->n = 0;
    for (int i = 0; i < 2; i++)
        if ((i ? p_hi : 1 - p_hi) > 0)
            law->p[law->n++] = (LawPiece){LAW_LATTICE, i ? p_hi : 1 - p_hi, 0, m->f_b, n[i], m};
}

static double gaussian_safe_mean(const Mech *m, double x) {
    MechLaw law;
    gaussian_safe_law(m, x, &law);
    return law_mean(&law);
}

static double gaussian_safe_variance(const Mech *m, double x) {
    MechLaw law;
    gaussian_safe_law(m, x, &law);
    return law_central_moment(&law, 2);
}

// Every K in [kmin, kmax] has positive probability at every input (counts >= 1 on the
// whole table, which reaches past the clamp on both sides).
static int gaussian_safe_possible(const Mech *m, double x, float y) {
    (void)x;
    double k0 = round(((double)y - m->f_lo) / m->f_b);
    for (double k = k0 - 2; k <= k0 + 2; k++)
        if (k >= m->lat_kmin && k <= m->lat_kmax && fmaf(m->f_b, (float)k, m->f_lo) == y)
            return 1;
    return 0;
}

// The upload of `units` scalars over `rounds` rounds. Per scalar the ideal discrete
// Gaussian has RDP α·N²/(2σ_g²) for any shift up to N (CKS Prop. 5; the clamp and the
// mixtures over the rounding do not raise it); the table's law is within a factor 1 ± η of
// the clamped ideal on every output (rel_err), which adds at most
// (α ln(1+η) - (α-1) ln(1-η))/(α-1) to the Rényi divergence of order α. Composed over
// units × rounds scalars and converted at δ (Balle et al. 2020) over the extended orders.
static double gaussian_safe_upload_epsilon(const Mech *m, double units, double rounds, double delta) {
    const MechGaussTable *t = &m->tab.gauss;
    if (units <= 0 || rounds <= 0)
        return 0;
    double orders[RDP_EXTENDED_ORDER_COUNT], rdp[RDP_EXTENDED_ORDER_COUNT];
    int n = rdp_extended_orders(orders);
    double rho = t->n_grid * (double)t->n_grid / (2 * t->g.sigma * t->g.sigma), eta = t->rel_err;
    for (int i = 0; i < n; i++) {
        double a = orders[i];
        double extra = (a * log1p(eta) - (a - 1) * log1p(-eta)) / (a - 1);
        rdp[i] = units * rounds * (a * rho + extra);
    }
    double eps = INFINITY;
    if (rdp_to_epsilon(orders, rdp, n, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL) != FP_OK)
        return INFINITY;
    return eps;
}

static const MechSampler gaussian_safe = {
    .kind = MECH_SAMPLER_SAFE,
    .elements_per_block = 1,
    .exact = 1,
    .setup = gaussian_safe_setup,
    .set_range = gaussian_safe_set_range,
    .one = gaussian_safe_one,
    .perturb_fast = gaussian_safe_perturb_fast,
    .mean = gaussian_safe_mean,
    .variance = gaussian_safe_variance,
    .law = gaussian_safe_law,
    .possible = gaussian_safe_possible,
    .lattice_ge = gaussian_ge,
    .upload_epsilon = gaussian_safe_upload_epsilon,
};

static const MechSampler gaussian_float = {
    .kind = MECH_SAMPLER_FLOAT,
    .elements_per_block = 4,
    .exact = 0,
    .setup = gaussian_float_setup,
    .set_range = gaussian_float_set_range,
    .one = gaussian_float_one,
    .perturb_fast = gaussian_float_perturb_fast,
    .mean = gaussian_float_mean,
    .variance = gaussian_float_variance,
    .law = gaussian_float_law,
    .possible = gaussian_float_possible,
    .upload_epsilon = gaussian_float_upload_epsilon,
};

const MechOps mech_gaussian = {
    .name = "gaussian",
    .summary = "Gaussian noise per coordinate for (eps, delta), sensitivity hi-lo",
    .variants = "analytic,classic",
    .range = MECH_RANGE_REQUIRED,
    .takes_delta = 1,
    .safe = &gaussian_safe,
    .fp = &gaussian_float,
};
