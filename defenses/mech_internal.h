// Internals shared by the mechanism families (defenses/mech_*.c): a 16-lane Philox
// that reproduces core/rng.c's rng_block for 16 consecutive blocks at once, the word
// interleave that maps blocks to elements, the float log/Box-Muller formulas, and the
// loop driver that runs a family's 64-element kernel over a buffer.
//
// The vector code uses GCC/Clang vector extensions (generic lowering on any target);
// the per-element kernels are plain scalar C that the compiler vectorises. The oracle
// for all of it is mech_perturb_ref (one core/rng.c rng_block call per element).
#ifndef FEDPRIV_DEFENSES_MECH_INTERNAL_H
#define FEDPRIV_DEFENSES_MECH_INTERNAL_H

#include <math.h>
#include <string.h>

#include "defenses/mech.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// Static inline helpers pass 64-byte vectors by value; without AVX-512 GCC warns that
// such a call would have another ABI, which cannot matter for inlined static functions.
#pragma GCC diagnostic ignored "-Wpsabi"

typedef uint32_t MechU32x16 __attribute__((vector_size(64)));
typedef int32_t MechI32x16 __attribute__((vector_size(64)));
typedef uint64_t MechU64x8 __attribute__((vector_size(64)));

#define MECH_PHILOX_M0 0xD2511F53u
#define MECH_PHILOX_M1 0xCD9E8D57u
#define MECH_PHILOX_W0 0x9E3779B9u
#define MECH_PHILOX_W1 0xBB67AE85u

// What rounds 1-2 of Philox compute from the counter words that are the same for 16
// consecutive blocks (ctr[1..3] and the key): only ctr[0] varies, so round 1 needs one
// product and round 2 one product per lane instead of two.
typedef struct MechPhilox {
    uint32_t r1_xor;        // ctr3 ^ k1            (round 1: c2' = hi(M0·c0) ^ ctr3 ^ k1)
    uint32_t r2_xor0;       // lo(M1·ctr2) ^ k0'    (round 2: c0'' = hi(M1·c2') ^ c1' ^ k0')
    uint32_t r2_xor2;       // hi(M0·c0') ^ k1'     (round 2: c2'' = hi(M0·c0') ^ c3' ^ k1')
    uint32_t r2_c3;         // lo(M0·c0')           (round 2: c3'')
    uint32_t k0, k1;        // keys of round 3
} MechPhilox;

// Blocks whose index has high bits `index_hi` (= index >> 32) in stream s.
static inline void mech_philox_prepare(MechPhilox *p, const RngStream *s, uint64_t index_hi) {
    uint32_t c1 = (uint32_t)(index_hi & 0xffffu) | (s->purpose << 16), c2 = s->round, c3 = s->client;
    uint32_t k0 = s->key[0], k1 = s->key[1];
    uint64_t p1 = (uint64_t)MECH_PHILOX_M1 * c2;
    uint32_t a0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, a1 = (uint32_t)p1;   // round 1, constant lanes
    p->r1_xor = c3 ^ k1;
    k0 += MECH_PHILOX_W0;
    k1 += MECH_PHILOX_W1;
    uint64_t p0 = (uint64_t)MECH_PHILOX_M0 * a0;                        // round 2, constant product
    p->r2_xor0 = a1 ^ k0;
    p->r2_xor2 = (uint32_t)(p0 >> 32) ^ k1;
    p->r2_c3 = (uint32_t)p0;
    p->k0 = k0 + MECH_PHILOX_W0;
    p->k1 = k1 + MECH_PHILOX_W1;
}

// hi and lo halves of the 32x32->64-bit products a[l]·m.
static inline MechU32x16 mech_mulhilo16(MechU32x16 a, uint32_t m, MechU32x16 *lo) {
#if defined(__AVX512F__)
    __m512i av = (__m512i)a, mv = _mm512_set1_epi32((int)m);
    __m512i pe = _mm512_mul_epu32(av, mv);                                         // even lanes' products
    __m512i po = _mm512_mul_epu32(_mm512_shuffle_epi32(av, _MM_PERM_DDBB), mv);    // odd lanes' products
    *lo = (MechU32x16)_mm512_mask_shuffle_epi32(pe, 0xAAAA, po, _MM_PERM_CCAA);
    return (MechU32x16)_mm512_mask_shuffle_epi32(po, 0x5555, pe, _MM_PERM_DDBB);
#else
    MechU64x8 pe = ((MechU64x8)a & 0xffffffffu) * (uint64_t)m;
    MechU64x8 po = ((MechU64x8)a >> 32) * (uint64_t)m;
    *lo = a * m;
    return (MechU32x16)((pe >> 32) | (po & 0xffffffff00000000ull));
#endif
}

// Blocks lo32 + 0..15 (lo32 = the low 32 bits of the first block index; the 16 must
// not straddle a multiple of 2^32): out[j][l] = word j of block lo32 + l.
static inline void mech_philox16(const MechPhilox *p, uint32_t lo32, MechU32x16 out[4]) {
    const MechU32x16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    MechU32x16 c0 = iota + lo32, a3, x1, l0, l1;
    MechU32x16 a2 = mech_mulhilo16(c0, MECH_PHILOX_M0, &a3) ^ p->r1_xor;
    MechU32x16 x0 = mech_mulhilo16(a2, MECH_PHILOX_M1, &x1) ^ p->r2_xor0;
    MechU32x16 x2 = a3 ^ p->r2_xor2, x3 = a3 * 0u + p->r2_c3;
    uint32_t k0 = p->k0, k1 = p->k1;
    for (int r = 2; r < 10; r++) {
        MechU32x16 h0 = mech_mulhilo16(x0, MECH_PHILOX_M0, &l0);
        MechU32x16 h1 = mech_mulhilo16(x2, MECH_PHILOX_M1, &l1);
        x0 = h1 ^ x1 ^ k0;
        x1 = l1;
        x2 = h0 ^ x3 ^ k1;
        x3 = l0;
        k0 += MECH_PHILOX_W0;
        k1 += MECH_PHILOX_W1;
    }
    out[0] = x0;
    out[1] = x1;
    out[2] = x2;
    out[3] = x3;
}

// Block-major (w[j][l], word j of block l) to element order: e[4l + j] = w[j][l].
static inline void mech_interleave16(const MechU32x16 w[4], uint32_t e[64]) {
    const MechI32x16 lo = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
    const MechI32x16 hi = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const MechI32x16 qlo = {0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23};
    const MechI32x16 qhi = {8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31};
    MechU32x16 a0 = __builtin_shuffle(w[0], w[1], lo), a1 = __builtin_shuffle(w[0], w[1], hi);
    MechU32x16 b0 = __builtin_shuffle(w[2], w[3], lo), b1 = __builtin_shuffle(w[2], w[3], hi);
    MechU32x16 o[4] = {__builtin_shuffle(a0, b0, qlo), __builtin_shuffle(a0, b0, qhi),
                       __builtin_shuffle(a1, b1, qlo), __builtin_shuffle(a1, b1, qhi)};
    memcpy(e, o, sizeof o);
}

static inline float mech_bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t mech_f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// ln(u) for u > 0 normal, in float: u = 2^k m with m in [√½, √2) (musl's reduction),
// ln m = 2 atanh(s) = 2(s + s³/3 + s⁵/5 + s⁷/7 + s⁹/9), s = (m-1)/(m+1) (one IEEE
// division; |s| <= 0.1716, so the truncation is below 1e-9), k·ln 2 in Cephes' two parts.
// Relative error about 1e-7 (tested against libm).
static inline float mech_logf(float u) {
    uint32_t ix = mech_f_bits(u) - 0x3f3504f3u;
    float fk = (float)((int32_t)ix >> 23);
    float m = mech_bits_f((ix & 0x007fffffu) + 0x3f3504f3u);
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
    *z0 = mech_bits_f(mech_f_bits(r * c) ^ neg);
    *z1 = mech_bits_f(mech_f_bits(r * s) ^ neg);
}

// A family's kernel for 64 consecutive elements, element 0 at an index that is a
// multiple of 64; w holds the 16 blocks' words (block-major).
typedef void (*MechChunkFn)(const Mech *m, float *x, const MechU32x16 w[4]);

// Runs chunk over x[0..n) (elements first..first+n-1): elements before the first
// multiple of 64 and after the last one go through the scalar path.
__attribute__((always_inline)) static inline void mech_drive(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first,
                              MechChunkFn chunk) {
    size_t i = 0;
    uint32_t w[4];
    for (; i < n && ((first + i) & 63u); i++) {
        rng_block(s, (first + i) >> 2, w);
        x[i] = mech_perturb_one(m, x[i], w, (int)((first + i) & 3u));
    }
    MechPhilox ph = {0};
    uint64_t hi = UINT64_MAX;
    for (; i + 64 <= n; i += 64) {
        uint64_t b0 = (first + i) >> 2;
        if ((b0 >> 32) != hi) {
            hi = b0 >> 32;
            mech_philox_prepare(&ph, s, hi);
        }
        MechU32x16 wv[4];
        mech_philox16(&ph, (uint32_t)b0, wv);
        chunk(m, x + i, wv);
    }
    for (; i < n; i++) {
        rng_block(s, (first + i) >> 2, w);
        x[i] = mech_perturb_one(m, x[i], w, (int)((first + i) & 3u));
    }
}

static inline float mech_clipf(float x, float lo, float hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

// Family entry points (mech_spm.c, mech_duchi.c, mech_pm.c, mech_laplace_gauss.c,
// mech_harmony.c): derived constants, the scalar kernel, the fast loop, closed forms,
// the law.
void spm_setup(Mech *m);
float spm_one(const Mech *m, float x, uint32_t w);
void spm_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
double spm_mean(const Mech *m, double x);
double spm_variance(const Mech *m, double x);
double spm_variance_claimed(const Mech *m, double x);
void spm_law(const Mech *m, double x, MechLaw *law);

void twopoint_setup(Mech *m);   // duchi, ldp-fl, rr
float twopoint_one(const Mech *m, float x, uint32_t w);
void twopoint_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
double twopoint_mean(const Mech *m, double x);
double twopoint_variance(const Mech *m, double x);
void twopoint_law(const Mech *m, double x, MechLaw *law);

void pm_setup(Mech *m);
float pm_one(const Mech *m, float x, uint32_t w);
void pm_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
double pm_mean(const Mech *m, double x);
double pm_variance(const Mech *m, double x);
void pm_law(const Mech *m, double x, MechLaw *law);

FpStatus noise_setup(Mech *m, FpError *err);   // laplace, gaussian
float laplace_one(const Mech *m, float x, uint32_t w);
float gaussian_one(const Mech *m, float x, const uint32_t w[4], int j);
void noise_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
double noise_mean(const Mech *m, double x);
double noise_variance(const Mech *m, double x);
void noise_law(const Mech *m, double x, MechLaw *law);

void harmony_setup(Mech *m);
float harmony_one(const Mech *m, float x, uint32_t w);
double harmony_mean(const Mech *m, double x);
double harmony_variance(const Mech *m, double x);
void harmony_law(const Mech *m, double x, MechLaw *law);

#endif
