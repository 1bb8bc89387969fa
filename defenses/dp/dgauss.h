// The discrete Gaussian N_Z(0, σ²) (Canonne, Kamath, Steinke, NeurIPS 2020): P(J = j) ∝
// exp(-j²/(2σ²)) on the integers, sampled exactly from a table, and i.i.d. discrete
// Gaussian noise on a float buffer. The safe `gaussian` mechanism (defenses/dp/mech_gaussian.c)
// and DP-SGD noise use it.
//
// The table. J ∈ [-ymax, ymax] is the number of thresholds cdf[i] <= u, minus ymax, for a
// 63-bit word u (bits 30..0 of word 0, then word 1): P(J = j) = count(j)/2^63 exactly,
// count(j) = round(2^63·P_ideal(j)) (the rounding rest on j = 0), ymax the last j whose
// count is >= 1. `tv` bounds the total variation distance between this law and the ideal
// one: for any mechanism M built on the ideal law, the same mechanism on the table's
// law with n draws is within n·tv of it, so an (ε, δ) guarantee of M becomes
// (ε, δ + (1 + e^ε)·n·tv) (about 1e-16 per draw: negligible, but accounted).
//
// What the ideal law guarantees (CKS 2020, Prop. 5 and Thm 7): adding N_Z(0, σ²) to an
// integer-valued query with sensitivity Δ (in grid steps; L2 for vectors of independent
// draws) is (Δ²/(2σ²))-zCDP, and its exact (ε, δ) profile is the sum computed by
// dgauss_delta.
//
// Noise on floats (dgauss_add): x[i] <- g·(n_i + J_i), n_i = x[i]/g rounded to one of its two
// neighbouring integers at random (unbiased; word 2 of the element's block, 24 bits), J_i
// from words 0-1 of Philox block first + i of the stream: element-indexed, the same for
// any split of the loop. Rounding makes the query integer-valued but can move it: for a
// vector query with L2 sensitivity Δ₂ and d coordinates, the rounded query's sensitivity
// is at most Δ₂/g + √d grid steps (each coordinate moves by less than one step), so keep
// g small against Δ₂/√d; E[output] = x to 2^-24 of g per coordinate.
#ifndef FEDPRIV_DEFENSES_DP_DGAUSS_H
#define FEDPRIV_DEFENSES_DP_DGAUSS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"
#include "defenses/dp/mech.h"

// The largest σ the table holds (its support reaches about 9.2σ each side).
#define DGAUSS_SIGMA_MAX 110.0

// Builds the table for σ in [0.5, DGAUSS_SIGMA_MAX] (grid steps). FP_EPARAM outside.
FpStatus dgauss_init(DGauss *g, double sigma, FpError *err);

// J for the element's 63 bits (hi: word 0, bit 31 ignored; lo: word 1).
static inline long dgauss_draw(const DGauss *g, uint32_t hi, uint32_t lo) {
    uint64_t u = ((uint64_t)(hi & 0x7fffffffu) << 32) | lo;
    long pos = 0;
    for (long s = 1L << g->levels >> 1; s >= 1; s >>= 1)
        pos += g->cdf[pos + s] <= u ? s : 0;
    return pos - g->ymax;
}

// P(J >= j) of the table's law.
double dgauss_ge(const DGauss *g, long j);

// δ(ε) = max over shifts s = 1..max_shift of Σ_k max(0, P(J = k) - e^ε P(J = k - s)) for the
// table's law (exact up to long-double rounding, rounded up): the privacy profile of
// adding J to an integer with sensitivity max_shift.
double dgauss_delta(const DGauss *g, int max_shift, double eps);

// The largest relative error |Q/P - 1| of the table's law Q against the ideal P on the
// outputs of clamp(n + J, max_shift - jmax, jmax), n ∈ [0, max_shift]: on P(J = j) for
// |j| < jmax and on the tail sums P(J >= a) for a in [jmax - max_shift, jmax] (the law is
// symmetric, so the lower ones agree). Rounded up.
double dgauss_rel_err(const DGauss *g, long jmax, int max_shift);

// x[i] <- g·(rounded(x[i]/g) + J_i) for i < n, element first + i of stream s (see above).
// |x[i]/grid| must stay below 2^30.
void dgauss_add(const DGauss *g, double grid, float *x, size_t n, const RngStream *s, uint64_t first);

// ---- The wide table: vector noise of large σ (the federated Gaussian defenses) ----------
//
// Noise on a clipped update needs σ of thousands of grid steps: rounding each of d
// coordinates to the grid moves the vector by up to √d/2 steps, so the grid must be fine
// against the clip for the sensitivity to stay near C (see clip.h). The narrow table above
// stops at 110 steps; this one holds σ up to DGAUSS_WIDE_SIGMA_MAX with 95-bit thresholds
// for |J| (words 0-1 give the top 63 bits, word 3 the low 32; word 0's bit 31 is the sign),
// so neither the count rounding (< 2^-96 per entry) nor the truncated tails (< 2^-96)
// matter.
//
// σ is chosen with 2σ² a power of two: the weights' exponents -j²/(2σ²) are then exact in
// long double and each weight carries only expl's error (a few ulp, 2^-61 relative at
// most); the normaliser is summed with compensation. `tv` bounds the total variation
// distance between the table's law and N_Z(0, σ²) per draw (about 2^-59): over n draws
// an (ε, δ) guarantee of the ideal mechanism holds with δ + (1 + e^ε)·n·tv (a coupling).
// The per-draw total variation bound every wide table states (dgauss_wide_init derives it).
#define DGAUSS_WIDE_TV 0x1p-59

typedef struct DGaussWide {
    double sigma;           // σ in grid steps, 2σ² = 2^log2_two_var
    int rounded;            // 1: the law of round(N(0, σ²)) (dgauss_wide_init_rounded); 0: N_Z(0, σ²)
    int log2_two_var;
    long ymax;              // support [-ymax, ymax]; the table is of |J| in [0, ymax]
    int levels;             // log2 of the padded table size
    double tv;              // per-draw total variation distance to N_Z(0, σ²), bounded above
    double variance;        // of the realised table
    uint64_t *hi;           // thresholds of |J|'s cdf (95 bits): hi·2^32 + lo; 2^95 past ymax
    uint32_t *lo;
    uint32_t *guide;        // guide[b]: the thresholds i >= 1 at or below b·2^79 (b < 2^16 + 1)
    uint64_t *bucket;       // bucket[b] (b < 2^16) and sub[], the cells of dgauss_wide_add:
    uint64_t *sub;          // see DGAUSS_WIDE_CELL
    size_t n_sub;           // entries of sub[]
} DGaussWide;

#define DGAUSS_WIDE_GUIDE_BITS 16

// DGAUSS_WIDE_CELL: a cell covers the u whose hi has one prefix (bucket b: bits 62..47; its
// sub-cells: bits 62..43; theirs: 62..39; and so on while the keys below fit, down to
// bits 62..14). Its 64-bit entry is either
//   bit 63 clear (a leaf): bits 62..43 the thresholds i >= 1 at or below the cell's start,
//       bits 42..40 how many the cell holds (at most 4), and four 10-bit keys (bits
//       10k+9..10k) of them: the 10 bits of hi after the prefix (1023 for a missing one, or
//       one at the next cell's start);
//   bit 63 set, bit 62 clear: the cell holds more; bits 31..0 index sub[] at its 16
//       sub-cells (the next 4 bits of hi);
//   bits 63 and 62 set: dgauss_wide_draw searches (a cell of more than 4 whose sub-cells'
//       keys would not fit in hi).
// A leaf's keys decide u's count unless one equals u's: its thresholds are then compared
// in full.

#define DGAUSS_WIDE_SIGMA_MAX 16384.0

// Builds the table for the smallest σ >= sigma_min (in [1, DGAUSS_WIDE_SIGMA_MAX]) with
// 2σ² a power of two. FP_EPARAM outside that range, FP_ENOMEM. dgauss_wide_free releases it.
FpStatus dgauss_wide_init(DGaussWide *g, double sigma_min, FpError *err);
// The same table for the rounded Gaussian round(Z), Z ~ N(0, σ²) (nearest integer):
// P(J = j) = P(j - 1/2 <= Z < j + 1/2), each weight exp(-j²/(2σ²)) times its cell's
// integral (a series in long double, 2^-62 relative), the same `tv` (2^-59) to that law.
// Why: for an integer vector x, x + round(Z) = round(x + Z), so the noised integer is
// post-processing of the continuous Gaussian mechanism on x, and every account of the
// continuous Gaussian (Poisson subsampling by Mironov, Talwar, Zhang 2019, PLD) holds for
// it exactly, where the discrete Gaussian needs general bounds (clip.h). Its variance is
// about σ² + 1/12. A sum of such draws is not one (the discrete Gaussian stays where
// shares must add up).
FpStatus dgauss_wide_init_rounded(DGaussWide *g, double sigma_min, FpError *err);
void dgauss_wide_free(DGaussWide *g);

// T_i <= u for the 95-bit threshold i and the word pair (uh, ul).
static inline int dgauss_wide_le(const DGaussWide *g, long i, uint64_t uh, uint32_t ul) {
    return g->hi[i] < uh || (g->hi[i] == uh && g->lo[i] <= ul);
}

// |J| for the 95-bit u = (uh, ul): the number of thresholds i >= 1 at or below u. The
// guide gives the count below u's bucket (its top 16 bits), so the search covers only the
// thresholds inside the bucket (one or two near the centre).
static inline long dgauss_wide_count(const DGaussWide *g, uint64_t uh, uint32_t ul) {
    uint64_t b = uh >> (63 - DGAUSS_WIDE_GUIDE_BITS);
    long pos = g->guide[b], n = (long)g->guide[b + 1] - pos;
    while (n > 0) {
        long half = n / 2;
        if (dgauss_wide_le(g, pos + half + 1, uh, ul)) {
            pos += half + 1;
            n -= half + 1;
        } else {
            n = half;
        }
    }
    return pos;
}

// J for the element's block words (w[2] unused): |J| from u = (w[0] bits 30..0, w[1],
// w[3]), negative when w[0]'s bit 31 is set. The same J as dgauss_wide_draw_ref.
static inline long dgauss_wide_draw(const DGaussWide *g, const uint32_t w[4]) {
    long m = dgauss_wide_count(g, ((uint64_t)(w[0] & 0x7fffffffu) << 32) | w[1], w[3]);
    return w[0] >> 31 ? -m : m;
}

// The plain binary search over the whole table (the oracle of dgauss_wide_draw).
static inline long dgauss_wide_draw_ref(const DGaussWide *g, const uint32_t w[4]) {
    uint64_t uh = ((uint64_t)(w[0] & 0x7fffffffu) << 32) | w[1];
    uint32_t ul = w[3];
    long pos = 0;
    for (long s = 1L << g->levels >> 1; s >= 1; s >>= 1) {
        long c = pos + s;
        pos += g->hi[c] < uh || (g->hi[c] == uh && g->lo[c] <= ul) ? s : 0;
    }
    return w[0] >> 31 ? -pos : pos;
}

// The words of element i of a stream s, what dgauss_wide_add and dgauss_wide_draw_at draw:
// w[0] (J's sign in bit 31 and u's top 31 bits) is word i mod 4 of block ⌊i/4⌋ of the
// sub-stream DGAUSS_WIDE_HEAD (rng_substream), and w[1], w[3] (u's other 64 bits; w[2] is
// unused) are words 1 and 3 of block i of the sub-stream DGAUSS_WIDE_TAIL. Every word of
// every element comes from its own place, so they are as independent and uniform as one
// block's four, and J's law is the same; but the tail block is only computed for the
// about 2.3% of draws whose bucket w[0] does not decide: about 0.28 Philox blocks per
// element instead of one.
#define DGAUSS_WIDE_HEAD 0   // rng_substream tags
#define DGAUSS_WIDE_TAIL 1
void dgauss_wide_words(const RngStream *s, uint64_t i, uint32_t w[4]);

// dgauss_wide_draw on element i's words (dgauss_wide_words), its tail block computed only
// where the head word's bucket cannot decide.
long dgauss_wide_draw_at(const DGaussWide *g, const RngStream *s, uint64_t i);

// x[i] <- dgauss_wide_value_at(g, grid, x[i], s, first + i) for i < n: the same floats, bit
// for bit, a chunk of DGAUSS_WIDE_CHUNK aligned elements at a time (the chunks at the ends
// of [first, first + n) are drawn whole and partly used): vectorised Philox calls of 16
// head blocks (64 elements' head words), then for each element one 8-byte read of its
// bucket (`bucket`, 512 KiB), which decides J without a branch when the bucket holds at
// most 4 thresholds and u's bits 46..37 differ from each one's (about 97.7% of draws at the
// defenses' σ); for the others one vectorised call per 16 tail blocks, and most are then
// decided by one sub-cell (`sub`), the rest further down the cells (DGAUSS_WIDE_CELL).
// Element-indexed: any split of [0, n) gives the same result.
void dgauss_wide_add(const DGaussWide *g, double grid, float *x, size_t n, const RngStream *s, uint64_t first);

// The two passes of dgauss_wide_add over a chunk. dgauss_wide_chunk_head: jv[l] for the
// elements whose bucket decides from the head word w0[l]; the others' indices, in order,
// into slow[], and their count returned. dgauss_wide_chunk_tail: jv[slow[k]] for those,
// t1[k] and t3[k] their tail words.
#define DGAUSS_WIDE_CHUNK 512
int dgauss_wide_chunk_head(const DGaussWide *g, const uint32_t *w0, double *jv, uint16_t *slow);
void dgauss_wide_chunk_tail(const DGaussWide *g, const uint32_t *w0, const uint16_t *slow, int n_slow,
                            const uint32_t *t1, const uint32_t *t3, double *jv);
// Both passes on DGAUSS_WIDE_CHUNK elements' full words: j[l] = dgauss_wide_draw on the words
// (w0[l], w1[l], -, w3[l]), as a double.
void dgauss_wide_draw_chunk(const DGaussWide *g, const uint32_t *w0, const uint32_t *w1, const uint32_t *w3,
                            double *j);

// P(J = j) of the table's law.
long double dgauss_wide_pmf(const DGaussWide *g, long j);

// The grid integer of x: x/grid rounded to the nearest (ties to even). Deterministic, so
// a vector of d coordinates moves by at most √d/2 steps.
static inline double dgauss_grid_round(float x, double grid) { return nearbyint((double)x / grid); }

// One element of noise on a grid: grid·(dgauss_grid_round(x) + J), J element i's draw
// (dgauss_wide_draw_at). The float result is a function of the integer alone
// (post-processing).
static inline float dgauss_wide_value_at(const DGaussWide *g, double grid, float x, const RngStream *s, uint64_t i) {
    return (float)(grid * (dgauss_grid_round(x, grid) + (double)dgauss_wide_draw_at(g, s, i)));
}

#endif
