// A floating-point-safe Laplace for vector queries at large scale: a discrete Laplace on an
// input-independent grid, its law built so that every ratio of adjacent probabilities is at
// most a stated E, with randomized rounding of the query. `dp-fedasgp` (the SVT's query
// and threshold noise and the value noise), `layerwise` and `flat-laplace` draw it
// (docs/defenses-federated.md, "The Laplace noise of the federated defenses").
//
// The law. Y >= 0 is Y = q·A + m·B + C with q = m·l, three independent digits:
//   A ~ Geometric(1/2), P(A = a) = 2^-(a+1): the number of trailing one bits of a stream
//       of random words (unbounded: further words only when all bits so far are ones);
//   B ∈ [0, l), C ∈ [0, m): tables of 63-bit counts (out of 2^63) proportional to
//       2^(-b/l) and 2^(-c/q), rounded.
// With exact tables Y is the geometric law P(Y = y) ∝ 2^(-y/q): a discrete Laplace of
// scale q/ln 2 grid steps. The noise is J = Y or −1 − Y by a sign bit (a law symmetric
// about −½, so J + ½ is centred). E is the largest ratio P(J = j)/P(J = j ± 1) over all
// j of the realised law (computed from the integer counts with an upward margin: within
// a digit, across a carry into B and across a carry into A): 2^(1/q) up to about 2^-40
// relative. Every J has positive probability.
//
// The query. x/g in double, then randomized rounding: n = ⌊v⌋ + [coin < ⌊frac(v)·2^32⌋],
// a 32-bit coin. The rounding's law is exactly a linear interpolation between the two
// grid points at the effective position v_eff = ⌊v⌋ + ⌊frac(v)·2^32⌋/2^32, which is
// within err = |v|·2^-52 + 2^-32 of x/g.
//
// The privacy of the released value g·(n + J + ½) (post-processing of the integer n + J).
// For integer inputs k and k + 1 every output's probabilities differ by at most a factor
// E; the randomized rounding mixes the laws of ⌊v⌋ and ⌊v⌋ + 1 linearly in v_eff, and
// the logarithm of a linear interpolation between two positive values within a factor E
// has slope at most E − 1. So log P(output | x) is (E − 1)-Lipschitz in v_eff, per
// coordinate, and for a vector of independent coordinates whose effective positions
// differ by D in L1 the ratio is at most e^((E − 1)·D): pure ε = (E − 1)·(Δ₁/g + 2·d·err)
// for an L1 sensitivity Δ₁ over d noised coordinates (dlap_epsilon_l1). E − 1 exceeds the
// ideal ln E ≈ 1/scale by a factor 1 + 1/(2·scale): no inflation of the sensitivity by
// the rounding as deterministic rounding would have (+1 step per coordinate).
//
// Draws are element-indexed: element `index` reads Philox block index (sign, C, B) and
// block index + 2^46 (A's first 32 bits, the coin) of the stream, and, with probability
// 2^-32, further blocks 2^47 + 2^16·index + j for A (j < 2^16: past 2^23 bits, a chance
// of 2^-8388640, the count would stop). index < 2^31.
#ifndef FEDPRIV_DEFENSES_DP_DLAPLACE_H
#define FEDPRIV_DEFENSES_DP_DLAPLACE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"

// One digit: P(digit = k) = (s[k+1] − s[k])/2^63, s[0] = 0, s[n] = 2^63.
typedef struct DLapDigit {
    long n;
    uint64_t *s;        // n + 1 cumulative counts
    uint32_t *guide;    // guide[b] = #{k in 1..n-1 : s[k] <= b·2^(63-guide_bits)}, b <= 2^guide_bits
    int guide_bits;
} DLapDigit;

typedef struct DLap {
    long q, m, l;       // steps per halving of P(Y = y); q = m·l
    double scale;       // q/ln 2: the Laplace scale in grid steps
    double ratio;       // E, the largest ratio of adjacent probabilities (rounded up)
    double log_ratio;   // ln E (rounded up): the cost of an integer shift by one step
    double lipschitz;   // E − 1 (rounded up): the cost of moving a query's position by one step
    DLapDigit lo, hi;   // C (m entries) and B (l entries)
} DLap;

// The largest index an element may have.
#define DLAP_INDEX_MAX ((uint64_t)1 << 31)
// The largest q a table holds (m <= 2^15, l <= 2^16).
#define DLAP_Q_MAX ((long)1 << 30)

// Builds the law with q = m·l >= scale_min·ln 2 (its scale q/ln 2 >= scale_min), m a
// power of two near √q. scale_min in [1, DLAP_Q_MAX/ln 2]; FP_EPARAM outside, FP_ENOMEM.
FpStatus dlap_init(DLap *t, double scale_min, FpError *err);
void dlap_free(DLap *t);

// The noise J of element `index` of stream s; *coin (may be NULL) gets its coin word.
long long dlap_draw(const DLap *t, const RngStream *s, uint64_t index, uint32_t *coin);

// n + J for the query value x on grid g (randomized rounding with the element's coin).
long long dlap_noisy_int(const DLap *t, double g, float x, const RngStream *s, uint64_t index);

// The released value g·(n + J + ½), as float.
static inline float dlap_value(const DLap *t, double g, float x, const RngStream *s, uint64_t index) {
    return (float)(g * ((double)dlap_noisy_int(t, g, x, s, index) + 0.5));
}

// x[i] <- dlap_value(..., first + i) for i < n.
void dlap_add(const DLap *t, double g, float *x, size_t n, const RngStream *s, uint64_t first);

// P(J = j) of the realised law.
long double dlap_pmf(const DLap *t, long long j);

// err: the distance of a query's effective position from x/g when |x| <= vmax.
double dlap_position_error(double g, double vmax);

// The pure ε of noising d coordinates, each |x| <= vmax, whose L1 sensitivity is l1 (in
// the query's units), on grid g: (E − 1)·(l1/g + 2·d·err), rounded up.
double dlap_epsilon_l1(const DLap *t, double g, double l1, double d, double vmax);

// Adds the table's parameters under `key` to a describe() object.
void dlap_describe(const DLap *t, double g, const char *key, cJSON *out);

// "sampler" of a Laplace defense: "safe" (default, 1) or "float" (0).
FpStatus dlap_parse_sampler(const cJSON *params, const char *path, int *safe, FpError *err);

// The sentence of a record without guarantee for the float Laplace sampler.
#define DLAP_FLOAT_REASON                                                                                     \
    "the Laplace noise is drawn in floating point (\"sampler\": \"float\"): its outputs have input-dependent " \
    "supports (Mironov 2012); the default safe sampler draws a discrete Laplace on a grid"

#endif
