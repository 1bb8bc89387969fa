// Internals shared by the mechanism files (defenses/mech_*.c): the loop driver that runs a
// sampler's kernel over 16 Philox blocks at a time (core/philox.h), the float formulas
// (log, Box-Muller), exact integer helpers, and the two-point thresholds that several
// mechanisms share.
//
// The vector code uses GCC/Clang vector extensions (generic lowering on any target);
// the per-element kernels are plain scalar C that the compiler vectorises. The oracle
// for all of it is mech_perturb_ref (one core/rng.c rng_block call per element).
#ifndef FEDPRIV_DEFENSES_DP_MECH_INTERNAL_H
#define FEDPRIV_DEFENSES_DP_MECH_INTERNAL_H

#include <math.h>
#include <string.h>

#include "core/float_bits.h"
#include "core/philox.h"
#include "defenses/dp/mech.h"


static inline float mech_clipf(float x, float lo, float hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

// e^ε rounded down far enough that ⌊fl(e·n)⌋ <= e^ε·n for every integer n < 2^53 (the
// product's rounding is below 2^-53 relative): the safe samplers build their counts with
// it, so every ratio they produce is <= e^ε exactly (docs/mechanisms.md).
static inline double mech_exp_below(double eps) { return exp(eps) * (1 - 0x1p-40); }

// 1 when a/b <= e^eps for non-negative integers a, b < 2^53 (b > 0), erring towards 0:
// a·1 <= e^eps·b checked with e^eps rounded down by 2^-40.
static inline int mech_ratio_within(double a, double b, double eps) { return a <= mech_exp_below(eps) * b; }

// ln(u) for u > 0 normal, in float: u = 2^k m with m in [√½, √2) (musl's reduction),
// ln m = 2 atanh(s) = 2(s + s³/3 + s⁵/5 + s⁷/7 + s⁹/9), s = (m-1)/(m+1) (one IEEE
// division; |s| <= 0.1716, so the truncation is below 1e-9), k·ln 2 in Cephes' two parts.
// |error| <= 2^-23 + 2^-23·|ln u| (MECH_LOGF_ERR; tested against libm).
#define MECH_LOGF_ERR(lnu) (0x1p-23 + 0x1p-23 * fabs(lnu))
static inline float mech_logf(float u) {
    uint32_t ix = float_to_bits(u) - 0x3f3504f3u;
    float fk = (float)((int32_t)ix >> 23);
    float m = float_from_bits((ix & 0x007fffffu) + 0x3f3504f3u);
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float p = fmaf(s2, 0.22222222f, 0.28571429f);
    p = fmaf(p, s2, 0.4f);
    p = fmaf(p, s2, 0.66666667f);
    p = fmaf(p * s2, s, s + s);
    return fmaf(fk, 0.693359375f, fmaf(fk, -2.12194440e-4f, p));
}

// Two N(0,1) deviates from two words (Box-Muller):
//   radius r = √(-2 ln u1), u1 = (w0 + ½)/2^32 in float (so |z| <= 6.77), √ correctly
//   rounded (sqrtf, vsqrtps, CUDA's default sqrtf all are);
//   angle: a = (w1 mod 2^30)/2^30 · π/2 - π/4 ∈ [-π/4, π/4); bit 30 of w1 swaps (cos, sin)
//   (the angle π/2 - a) and bit 31 negates both (+π): the four images of the arc tile the
//   circle, so the angle is uniform on [0, 2π).
static inline void mech_gauss2(uint32_t w0, uint32_t w1, float *z0, float *z1) {
    float u1 = fmaf((float)w0, 0x1p-32f, 0x1p-33f);
    float t = -2.0f * mech_logf(u1);
    float r = sqrtf(t > 0.0f ? t : 0.0f);
    float a = fmaf((float)(w1 & 0x3fffffffu), 0x1.921fb6p-30f, -0.785398163f);
    float a2 = a * a;
    float sn = fmaf(a2, -1.9515295891E-4f, 8.3321608736E-3f);
    sn = fmaf(sn, a2, -1.6666654611E-1f);
    sn = fmaf(sn * a2, a, a);
    float cs = fmaf(a2, 2.443315711809948E-5f, -1.388731625493765E-3f);
    cs = fmaf(cs, a2, 4.166664568298827E-2f);
    cs = fmaf(cs * a2, a2, fmaf(-0.5f, a2, 1.0f));
    uint32_t swap = (w1 >> 30) & 1u, neg = w1 & 0x80000000u;
    float c = swap ? sn : cs, s = swap ? cs : sn;
    *z0 = float_from_bits(float_to_bits(r * c) ^ neg);
    *z1 = float_from_bits(float_to_bits(r * s) ^ neg);
}

// floor(w / c) for 32-bit w and 0 < c < 2^32, given inv = 1/c in double: exact, because
// (w + ½)/c lies at least ½/c from an integer while the double error is below 2^-20/c.
static inline uint32_t mech_div_exact(uint32_t w, double inv) { return (uint32_t)(((double)w + 0.5) * inv); }

// The random rounding of v ∈ [0, top] to an integer: n0 = ⌊v⌋, one more when the coin (a
// uniform `bits`-bit integer) falls below ⌊frac(v)·2^bits⌋ (so E[n] = n0 + that/2^bits),
// capped at top.
static inline int mech_round_random(float v, int top, uint32_t coin, int bits) {
    v = v >= 0.0f ? v : 0.0f;   // NaN too
    int n0 = (int)v;
    n0 = n0 > top ? top : n0;
    float f = v - (float)n0;
    f = f < 0.0f ? 0.0f : f;
    uint32_t thr = (uint32_t)(f * (float)(1u << bits));
    int n = n0 + (coin < thr);
    return n > top ? top : n;
}
// What mech_round_random does at v, as a law: P[n = *n_hi] = *p_hi, else *n_lo.
void mech_round_law(float v, int top, int bits, int *n_lo, int *n_hi, double *p_hi);

// ---- the loop driver -----------------------------------------------------------------

// A sampler's kernel for 16 consecutive blocks (16·e elements, e = elements per block),
// element 0 at an index that is a multiple of 16·e; w holds the blocks' words
// block-major (w[j][l]: word j of block l); ctx is what the sampler's fast loop prepared.
typedef void (*MechChunkFn)(const Mech *m, const void *ctx, float *x, const PhiloxU32x16 w[4]);

static inline int mech_block_shift(int epb) { return epb == 4 ? 2 : epb == 2 ? 1 : 0; }

// Runs chunk over x[0..n) (elements first..first+n-1): elements before the first
// multiple of 16·e and after the last one go through the scalar path.
__attribute__((always_inline)) static inline void mech_drive(const Mech *m, const void *ctx, float *x, size_t n,
                                                              const RngStream *s, uint64_t first, MechChunkFn chunk) {
    const int epb = m->sampler->elements_per_block, shift = mech_block_shift(epb);
    const uint64_t span = 16u * (uint64_t)epb;
    size_t i = 0;
    for (; i < n && ((first + i) % span); i++)
        x[i] = mech_draw_one(m, x[i], s, first + i);
    Philox16 ph = {0};
    uint64_t hi = UINT64_MAX;
    for (; i + span <= n; i += span) {
        uint64_t b0 = (first + i) >> shift;
        if ((b0 >> 32) != hi) {
            hi = b0 >> 32;
            philox16_prepare(&ph, s->key[0], s->key[1], s->purpose, s->round, s->client, hi);
        }
        PhiloxU32x16 wv[4];
        philox16_blocks(&ph, (uint32_t)b0, wv);
        chunk(m, ctx, x + i, wv);
    }
    for (; i < n; i++)
        x[i] = mech_draw_one(m, x[i], s, first + i);
}

// ---- two-point thresholds (duchi, ldp-fl, adaptive-harmony) ----------------------------

// 2^32·P(upper output) for the clipped input xc: ⌊(t·hb + ½)·2^32⌋, t = (xc - c)/r in double.
static inline uint32_t mech_twopoint_threshold(float xc, double c, double inv_r, double hb) {
    double t = ((double)xc - c) * inv_r;
    return (uint32_t)((t * hb + 0.5) * 4294967296.0);
}
// The slope hb (m->d_a; at most 1/(2B)) of P(upper output) = ⌊(t·hb + ½)/d·2^32⌋/2^32,
// shrunk until the exact thresholds at the two ends of the float range keep both ratios
// within e^ε (d = 1 for two outputs; d = the unit size for the harmony scalar law, whose
// third output, the fill, has the same probability at every input). Sets d_b = c,
// d_c = 1/r, d_d = ⌊2^32/d⌋ and eps_proven.
void mech_twopoint_calibrate(Mech *m, double d);

// Shared by the samplers whose law is a few atoms: 1 when y is one of them with weight > 0.
int mech_law_has_atom(const MechLaw *law, float y);

// ---- the float samplers' inverse searches (mech_possible for spm, pm, laplace) ---------

// The smallest w in [lo, hi] with key(w) >= target, for key non-decreasing on [lo, hi];
// hi + 1 when there is none.
uint64_t mech_search_ge(const Mech *m, double x, uint64_t lo, uint64_t hi, float target,
                        float (*key)(const Mech *m, double x, uint64_t w));

#endif
