// Philox-4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11): the one implementation of fedpriv's
// counter-based generator, compiled by gcc and clang (host code) and nvcc (host and
// device code) alike.
//
// What a block is (core/rng.h documents the streams): for key (k0, k1) and counter
// (c0, c1, c2, c3), ten rounds of
//   (c0, c1, c2, c3) <- (hi(M1·c2) ^ c1 ^ k0, lo(M1·c2), hi(M0·c0) ^ c3 ^ k1, lo(M0·c0)),
//   (k0, k1) <- (k0 + W0, k1 + W1),
// with the products taken as 32x32 -> 64 bits. The counter of block i of a stream is
// {i mod 2^32, (i >> 32) mod 2^16 | purpose << 16, round, client}.
//
// Two entry points, one algorithm:
//   philox_block        one block (scalar; CPU and GPU threads);
//   philox16_blocks     16 consecutive blocks at once on GCC/Clang vector types (host
//                       only): what the mechanism kernels use. Only c0 differs between
//                       the 16 blocks, so rounds 1-2 reuse the products of the counter
//                       words they share; rounds 3-10 are PHILOX_ROUND as in
//                       philox_block. The tests check both against each other.
#ifndef FEDPRIV_CORE_PHILOX_H
#define FEDPRIV_CORE_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PHILOX_FN static __host__ __device__ __forceinline__
#else
#define PHILOX_FN static inline
#endif

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

// hi and lo halves of the 32x32 -> 64-bit product a·m.
PHILOX_FN uint32_t philox_mulhilo(uint32_t a, uint32_t m, uint32_t *lo) {
#if defined(__CUDA_ARCH__)
    *lo = a * m;
    return __umulhi(a, m);
#else
    uint64_t p = (uint64_t)a * m;
    *lo = (uint32_t)p;
    return (uint32_t)(p >> 32);
#endif
}

// One round on scalars or on vectors (T: uint32_t or a vector of it; MULHILO: the
// matching product function).
#define PHILOX_ROUND(T, MULHILO, c0, c1, c2, c3, k0, k1)                                                              \
    do {                                                                                                              \
        T lo0_, lo1_;                                                                                                 \
        T hi0_ = MULHILO(c0, PHILOX_M0, &lo0_);                                                                       \
        T hi1_ = MULHILO(c2, PHILOX_M1, &lo1_);                                                                       \
        c0 = hi1_ ^ c1 ^ (k0);                                                                                        \
        c1 = lo1_;                                                                                                    \
        c2 = hi0_ ^ c3 ^ (k1);                                                                                        \
        c3 = lo0_;                                                                                                    \
    } while (0)

// The counter words of block `index` of stream (purpose, round, client).
PHILOX_FN void philox_counter(uint64_t index, uint32_t purpose, uint32_t round, uint32_t client, uint32_t ctr[4]) {
    ctr[0] = (uint32_t)index;
    ctr[1] = (uint32_t)((index >> 32) & 0xffffu) | (purpose << 16);
    ctr[2] = round;
    ctr[3] = client;
}

// One block: out = Philox-4x32-10(ctr, (k0, k1)).
PHILOX_FN void philox_block(const uint32_t ctr[4], uint32_t k0, uint32_t k1, uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    for (int r = 0; r < 10; r++) {
        PHILOX_ROUND(uint32_t, philox_mulhilo, c0, c1, c2, c3, k0, k1);
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

#if !defined(__CUDACC__)
// ---- 16 blocks at once (host) ------------------------------------------------------

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// Static inline helpers pass 64-byte vectors by value; without AVX-512 GCC and Clang warn
// that such a call would have another ABI, which cannot matter for inlined static
// functions.
#pragma GCC diagnostic ignored "-Wpsabi"

typedef uint32_t PhiloxU32x16 __attribute__((vector_size(64)));
typedef int32_t PhiloxI32x16 __attribute__((vector_size(64)));
typedef uint64_t PhiloxU64x8 __attribute__((vector_size(64)));

// hi and lo halves of the 32x32 -> 64-bit products a[l]·m. Vectors travel by pointer: a
// 64-byte vector passed by value has another ABI with and without AVX-512.
static inline void philox_mulhilo16_p(const PhiloxU32x16 *a, uint32_t m, PhiloxU32x16 *hi, PhiloxU32x16 *lo) {
#if defined(__AVX512F__)
    __m512i av = (__m512i)*a, mv = _mm512_set1_epi32((int)m);
    __m512i pe = _mm512_mul_epu32(av, mv);                                         // even lanes' products
    __m512i po = _mm512_mul_epu32(_mm512_shuffle_epi32(av, _MM_PERM_DDBB), mv);    // odd lanes' products
    *lo = (PhiloxU32x16)_mm512_mask_shuffle_epi32(pe, 0xAAAA, po, _MM_PERM_CCAA);
    *hi = (PhiloxU32x16)_mm512_mask_shuffle_epi32(po, 0x5555, pe, _MM_PERM_DDBB);
#else
    PhiloxU64x8 pe = ((PhiloxU64x8)*a & 0xffffffffu) * (uint64_t)m;
    PhiloxU64x8 po = ((PhiloxU64x8)*a >> 32) * (uint64_t)m;
    *lo = *a * m;
    *hi = (PhiloxU32x16)((pe >> 32) | (po & 0xffffffff00000000ull));
#endif
}
#define philox_mulhilo16(a, m, lo)                                                                                    \
    __extension__({                                                                                                   \
        PhiloxU32x16 a_ = (a), h_;                                                                                    \
        philox_mulhilo16_p(&a_, (m), &h_, (lo));                                                                      \
        h_;                                                                                                           \
    })

// What rounds 1-2 compute from the counter words that the 16 blocks share (ctr[1..3]
// and the key): round 1 needs one product per lane instead of two, round 2 the same.
typedef struct Philox16 {
    uint32_t r1_xor;        // ctr3 ^ k1            (round 1: c2' = hi(M0·c0) ^ ctr3 ^ k1)
    uint32_t r2_xor0;       // lo(M1·ctr2) ^ k0'    (round 2: c0'' = hi(M1·c2') ^ c1' ^ k0')
    uint32_t r2_xor2;       // hi(M0·c0') ^ k1'     (round 2: c2'' = hi(M0·c0') ^ c3' ^ k1')
    uint32_t r2_c3;         // lo(M0·c0')           (round 2: c3'')
    uint32_t k0, k1;        // keys of round 3
} Philox16;

// Blocks whose index has high bits `index_hi` (= index >> 32) in the stream with key
// (k0, k1) and counter words purpose, round, client.
static inline void philox16_prepare(Philox16 *p, uint32_t k0, uint32_t k1, uint32_t purpose, uint32_t round,
                                    uint32_t client, uint64_t index_hi) {
    uint32_t ctr[4];
    philox_counter(index_hi << 32, purpose, round, client, ctr);
    uint32_t p1lo, p1hi = philox_mulhilo(ctr[2], PHILOX_M1, &p1lo);
    uint32_t a0 = p1hi ^ ctr[1] ^ k0, a1 = p1lo;   // round 1, the lanes' shared words
    p->r1_xor = ctr[3] ^ k1;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
    uint32_t p0lo, p0hi = philox_mulhilo(a0, PHILOX_M0, &p0lo);   // round 2, the shared product
    p->r2_xor0 = a1 ^ k0;
    p->r2_xor2 = p0hi ^ k1;
    p->r2_c3 = p0lo;
    p->k0 = k0 + PHILOX_W0;
    p->k1 = k1 + PHILOX_W1;
}

// The 16 blocks whose index has low 32 bits lo32[l] (and the high bits p was prepared
// for): out[j][l] = word j of block lo32[l].
static inline void philox16_blocks_at(const Philox16 *p, PhiloxU32x16 c0, PhiloxU32x16 out[4]) {
    PhiloxU32x16 a3, x1;
    PhiloxU32x16 a2 = philox_mulhilo16(c0, PHILOX_M0, &a3) ^ p->r1_xor;   // round 1
    PhiloxU32x16 x0 = philox_mulhilo16(a2, PHILOX_M1, &x1) ^ p->r2_xor0;  // round 2
    PhiloxU32x16 x2 = a3 ^ p->r2_xor2, x3 = a3 * 0u + p->r2_c3;
    uint32_t k0 = p->k0, k1 = p->k1;
    for (int r = 2; r < 10; r++) {
        PHILOX_ROUND(PhiloxU32x16, philox_mulhilo16, x0, x1, x2, x3, k0, k1);
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = x0;
    out[1] = x1;
    out[2] = x2;
    out[3] = x3;
}

// Blocks lo32 + 0..15 (lo32 = the low 32 bits of the first block index; the 16 must not
// straddle a multiple of 2^32): out[j][l] = word j of block lo32 + l.
static inline void philox16_blocks(const Philox16 *p, uint32_t lo32, PhiloxU32x16 out[4]) {
    const PhiloxU32x16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    philox16_blocks_at(p, iota + lo32, out);
}

// Vector shuffles with constant indices: __builtin_shufflevector in Clang and GCC >= 12,
// __builtin_shuffle in older GCC.
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define PHILOX_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define PHILOX_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (PhiloxI32x16){__VA_ARGS__})
#endif

// Block-major words (w[j][l]: word j of block l) to element order, four elements per
// block: e[4l + j] = w[j][l].
static inline void philox16_interleave4(const PhiloxU32x16 w[4], uint32_t e[64]) {
#define PHILOX_LO 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define PHILOX_HI 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
    PhiloxU32x16 a0 = PHILOX_SHUFFLE(w[0], w[1], PHILOX_LO), a1 = PHILOX_SHUFFLE(w[0], w[1], PHILOX_HI);
    PhiloxU32x16 b0 = PHILOX_SHUFFLE(w[2], w[3], PHILOX_LO), b1 = PHILOX_SHUFFLE(w[2], w[3], PHILOX_HI);
    PhiloxU32x16 o[4] = {
        PHILOX_SHUFFLE(a0, b0, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23),
        PHILOX_SHUFFLE(a0, b0, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31),
        PHILOX_SHUFFLE(a1, b1, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23),
        PHILOX_SHUFFLE(a1, b1, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31)};
    __builtin_memcpy(e, o, sizeof o);
}

// Two 16-lane vectors to 32 elements alternating: e[2l] = a[l], e[2l + 1] = b[l].
static inline void philox16_interleave2(const PhiloxU32x16 *a, const PhiloxU32x16 *b, uint32_t e[32]) {
    PhiloxU32x16 o[2] = {PHILOX_SHUFFLE(*a, *b, PHILOX_LO), PHILOX_SHUFFLE(*a, *b, PHILOX_HI)};
    __builtin_memcpy(e, o, sizeof o);
#undef PHILOX_LO
#undef PHILOX_HI
}
#endif   // !__CUDACC__

#endif
