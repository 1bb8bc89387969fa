// Additive noise per coordinate, on x clipped into [lo, hi] (sensitivity Δ = hi - lo):
//   laplace   x + Lap(b), b = Δ/ε: ε-DP per coordinate (Dwork et al. 2006).
//   gaussian  x + N(0, σ²), (ε, δ)-DP per coordinate. variants:
//     analytic  the smallest σ with Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ) <= δ (Balle & Wang
//               2018 Thm 8; exact for every ε; defenses/accountant.h computes δ(ε)).
//     classic   σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth 2014 Thm A.1), which holds only for
//               ε < 1: refused above.
// Sampling (float, see mech.h): Laplace by inversion from one word (bit 31 the sign, the
// other 31 bits an Exp(1) through -ln u, so |noise| <= 22.2 b); Gaussian by Box-Muller
// over the word pairs of a block (|noise| <= 6.77 σ). The truncated tails have mass
// below 3e-10 and 2e-11.
#include <math.h>

#include "defenses/accountant.h"
#include "defenses/mech_internal.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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

FpStatus noise_setup(Mech *m, FpError *err) {
    double sens = m->spec.hi - m->spec.lo, eps = m->spec.eps;
    if (m->spec.kind == MECH_LAPLACE) {
        m->sigma = sens / eps;
    } else if (m->spec.variant == MV_CLASSIC) {
        if (eps >= 1)
            return fp_fail(err, FP_EPARAM,
                           "%s.epsilon: the classic Gaussian calibration (Dwork & Roth Thm A.1) holds only for "
                           "epsilon < 1, got %g (use variant analytic)",
                           m->spec.path, eps);
        m->sigma = gaussian_classic_sigma(sens, eps, m->spec.delta, NULL);
    } else {
        double mu = analytic_mu(eps, m->spec.delta);
        if (!(mu > 0))
            return fp_fail(err, FP_EPARAM, "%s.delta: no Gaussian noise meets (epsilon %g, delta %g)", m->spec.path,
                           eps, m->spec.delta);
        m->sigma = sens / mu;
    }
    m->f_a = (float)m->sigma;
    return FP_OK;
}

static inline float laplace_kernel(float x, uint32_t w, float lo, float hi, float b) {
    float xc = mech_clipf(x, lo, hi);
    float mag = fmaf((float)(w & 0x7fffffffu), 0x1p-31f, 0x1p-32f);   // (0, 1]
    float e = -mech_logf(mag);                                          // Exp(1)
    return fmaf(b, mech_bits_f(mech_f_bits(e) ^ (w & 0x80000000u)), xc);
}

float laplace_one(const Mech *m, float x, uint32_t w) { return laplace_kernel(x, w, m->f_lo, m->f_hi, m->f_a); }

float gaussian_one(const Mech *m, float x, const uint32_t w[4], int j) {
    float z[2];
    mech_gauss2(w[j & 2], w[(j & 2) + 1], &z[0], &z[1]);
    return fmaf(m->f_a, z[j & 1], mech_clipf(x, m->f_lo, m->f_hi));
}

static inline void laplace_chunk(const Mech *m, float *restrict x, const MechU32x16 w[4]) {
    uint32_t e[64];
    mech_interleave16(w, e);
    const float lo = m->f_lo, hi = m->f_hi, b = m->f_a;
    for (int i = 0; i < 64; i++)
        x[i] = laplace_kernel(x[i], e[i], lo, hi, b);
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
static inline void gaussian_chunk(const Mech *m, float *restrict x, const MechU32x16 w[4]) {
    MechU32x16 zv[4];
#if defined(__AVX512F__)
    __m512 z[4];
    gauss2_x16((__m512i)w[0], (__m512i)w[1], &z[0], &z[1]);
    gauss2_x16((__m512i)w[2], (__m512i)w[3], &z[2], &z[3]);
    for (int j = 0; j < 4; j++)
        zv[j] = (MechU32x16)_mm512_castps_si512(z[j]);
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
    mech_interleave16(zv, ze);
    float n[64];
    memcpy(n, ze, sizeof n);
    const float lo = m->f_lo, hi = m->f_hi, sigma = m->f_a;
    for (int i = 0; i < 64; i++)
        x[i] = fmaf(sigma, n[i], mech_clipf(x[i], lo, hi));
}

void noise_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    if (m->spec.kind == MECH_LAPLACE)
        mech_drive(m, x, n, s, first, laplace_chunk);
    else
        mech_drive(m, x, n, s, first, gaussian_chunk);
}

double noise_mean(const Mech *m, double x) { return mech_clip(m, x); }

double noise_variance(const Mech *m, double x) {
    return m->spec.kind == MECH_LAPLACE ? 2 * m->sigma * m->sigma : m->sigma * m->sigma;
}

void noise_law(const Mech *m, double x, MechLaw *law) {
    law->n = 1;
    law->p[0] = (LawPiece){m->spec.kind == MECH_LAPLACE ? LAW_LAPLACE : LAW_NORMAL, 1, mech_clip(m, x), m->sigma};
}
