// The discrete Gaussian table and noise (defenses/dp/dgauss.h).
#include "defenses/dp/dgauss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#endif

FpStatus dgauss_init(DGauss *g, double sigma, FpError *err) {
    if (!(sigma >= 0.5 && sigma <= DGAUSS_SIGMA_MAX))
        return fp_fail(err, FP_EPARAM, "discrete Gaussian: sigma %g grid steps is outside [0.5, %g]", sigma,
                       DGAUSS_SIGMA_MAX);
    const long double two63 = 9223372036854775808.0L, s2 = 2.0L * sigma * sigma;
    // The normaliser Σ_j exp(-j²/2σ²) (terms past 40σ are below 1e-340).
    long double z = 1;
    for (long j = 1; j <= (long)(40 * sigma) + 2; j++)
        z += 2 * expl(-(long double)j * j / s2);
    long ymax = 0;
    while (ymax + 1 < (MECH_TABLE_MAX - 2) / 2 && two63 * expl(-(long double)(ymax + 1) * (ymax + 1) / s2) / z >= 0.5L)
        ymax++;
    if (two63 * expl(-(long double)(ymax + 1) * (ymax + 1) / s2) / z >= 0.5L)
        return fp_fail(err, FP_EPARAM, "discrete Gaussian: sigma %g needs a larger table", sigma);
    g->sigma = sigma;
    g->ymax = (int)ymax;
    g->levels = 0;
    while ((1L << g->levels) < 2 * ymax + 2)
        g->levels++;
    // Counts (long double holds integers up to 2^64 exactly), the rest on j = 0.
    long double sum = 0, tv = 0, var = 0;
    for (long j = -ymax; j <= ymax; j++)
        sum += roundl(two63 * expl(-(long double)j * j / s2) / z);
    long double c0_shift = two63 - sum;
    long double acc = 0, ideal_in = 0;
    for (long j = -ymax; j <= ymax; j++) {
        long double p = expl(-(long double)j * j / s2) / z;
        long double c = roundl(two63 * p) + (j == 0 ? c0_shift : 0);
        g->cdf[j + ymax] = (uint64_t)acc;
        acc += c;
        tv += fabsl(c / two63 - p);
        var += c / two63 * (long double)j * j;
        ideal_in += p;
    }
    for (long i = 2 * ymax + 1; i < (1L << g->levels); i++)
        g->cdf[i] = (uint64_t)1 << 63;
    // Half the L1 distance, the ideal tail outside the table, and a margin for the
    // long-double rounding of 2ymax+1 probabilities.
    g->tv = (double)(0.5L * (tv + fabsl(1 - ideal_in)) + (2 * ymax + 2) * 0x1p-60L);
    g->variance = (double)var;
    g->z = z;
    return FP_OK;
}

double dgauss_rel_err(const DGauss *g, long jmax, int max_shift) {
    const long double two63 = 9223372036854775808.0L, s2 = 2.0L * g->sigma * g->sigma;
    long double worst = 0;
    for (long j = -jmax + 1; j < jmax; j++) {
        long double p = expl(-(long double)j * j / s2) / g->z;
        long double q = ((long double)g->cdf[j + g->ymax + 1] - g->cdf[j + g->ymax]) / two63;
        worst = fmaxl(worst, fabsl(q / p - 1));
    }
    for (long a = jmax - max_shift; a <= jmax; a++) {
        long double p = 0;
        for (long j = a; j <= a + (long)(40 * g->sigma) + 2; j++)
            p += expl(-(long double)j * j / s2) / g->z;
        long double q = 1 - (long double)g->cdf[a + g->ymax] / two63;
        worst = fmaxl(worst, fabsl(q / p - 1));
    }
    return (double)(worst * (1 + 1e-12L) + 1e-18L);
}

double dgauss_ge(const DGauss *g, long j) {
    if (j <= -g->ymax)
        return 1;
    if (j > g->ymax)
        return 0;
    return (double)(1 - (long double)g->cdf[j + g->ymax] / 9223372036854775808.0L);
}

double dgauss_delta(const DGauss *g, int max_shift, double eps) {
    const long double two63 = 9223372036854775808.0L, e = expl((long double)eps) * (1 - 1e-15L);
    const long y = g->ymax;
    long double worst = 0;
    for (int s = 1; s <= max_shift; s++) {
        long double d = 0;
        for (long k = -y; k <= y; k++) {
            long double p = ((long double)g->cdf[k + y + 1] - g->cdf[k + y]) / two63;   // cdf[2y+1] = 2^63
            long double q = k - s >= -y ? ((long double)g->cdf[k - s + y + 1] - g->cdf[k - s + y]) / two63 : 0;
            if (p > e * q)
                d += p - e * q;
        }
        worst = d > worst ? d : worst;
    }
    return (double)(worst * (1 + 1e-15L) + 1e-300L);
}

static inline float dgauss_value(const DGauss *g, double grid, float x, uint32_t w0, uint32_t w1, uint32_t w2) {
    double v = (double)x / grid, fl = floor(v);
    double thr = floor((v - fl) * 16777216.0);
    double n = fl + ((double)(w2 >> 8) < thr ? 1 : 0);
    return (float)(grid * (n + (double)dgauss_draw(g, w0, w1)));
}

void dgauss_add(const DGauss *g, double grid, float *x, size_t n, const RngStream *s, uint64_t first) {
    size_t i = 0;
    uint32_t w[4];
    for (; i < n && ((first + i) & 15u); i++) {
        rng_block(s, first + i, w);
        x[i] = dgauss_value(g, grid, x[i], w[0], w[1], w[2]);
    }
    if (!s->secure) {   // secure streams (core/rng_secure.h) draw through rng_block only
        Philox16 ph = {0};
        uint64_t hi = UINT64_MAX;
        for (; i + 16 <= n; i += 16) {
            uint64_t b0 = first + i;
            if ((b0 >> 32) != hi) {
                hi = b0 >> 32;
                philox16_prepare(&ph, s->key[0], s->key[1], s->purpose, s->round, s->client, hi);
            }
            PhiloxU32x16 wv[4];
            philox16_blocks(&ph, (uint32_t)b0, wv);
            for (int l = 0; l < 16; l++)
                x[i + l] = dgauss_value(g, grid, x[i + l], wv[0][l], wv[1][l], wv[2][l]);
        }
    }
    for (; i < n; i++) {
        rng_block(s, first + i, w);
        x[i] = dgauss_value(g, grid, x[i], w[0], w[1], w[2]);
    }
}

// ---- the wide table ------------------------------------------------------------------

// The thresholds i in [1, ymax] at or below (hi, lo) = (start, 0), counting on from `at`
// (a count at or below it).
static long wide_count_le(const DGaussWide *g, long at, uint64_t start) {
    while (at < g->ymax && dgauss_wide_le(g, at + 1, start, 0))
        at++;
    return at;
}

// The entry of the cell of hi prefix start >> shift whose thresholds are pos+1..next
// (DGAUSS_WIDE_CELL): the keys are bits shift-1..shift-10 of hi; bit 63 alone when the
// cell holds more than 4 (or pos does not fit in 20 bits).
static uint64_t wide_cell(const DGaussWide *g, uint64_t start, int shift, long pos, long next) {
    if (next - pos > 4 || pos >= (1L << 20))
        return (uint64_t)1 << 63;
    uint64_t e = (uint64_t)pos << 43 | (uint64_t)(next - pos) << 40;
    for (long k = 0; k < 4; k++) {
        uint64_t key = 1023;
        if (pos + 1 + k <= next && g->hi[pos + 1 + k] >> shift == start >> shift)
            key = (g->hi[pos + 1 + k] >> (shift - 10)) & 1023u;
        e |= key << (10 * k);
    }
    return e;
}

// A bucket's cell: the hi prefix bits 62..WIDE_BUCKET_SHIFT (DGAUSS_WIDE_CELL).
#define WIDE_BUCKET_SHIFT (63 - DGAUSS_WIDE_GUIDE_BITS)

// The growing sub[] of dgauss_wide_init.
typedef struct {
    const DGaussWide *g;
    uint64_t *sub;
    size_t n, cap;
    int failed;
} WideCells;

// The entry of the cell of hi prefix start >> shift holding thresholds pos+1..next: a leaf
// (wide_cell), else 16 sub-cells of the next 4 bits appended to sub[] (while their keys
// still fit in hi: shift - 4 >= 10), else the search. The entries of sub-cells are written
// after their own sub-cells are built, since those may move sub[].
static FpStatus wide_cell_build(WideCells *c, uint64_t start, int shift, long pos, long next, uint64_t *entry) {
    uint64_t e = wide_cell(c->g, start, shift, pos, next);
    if (!(e >> 63) || shift - 4 < 10) {
        *entry = e >> 63 ? (uint64_t)3 << 62 : e;
        return FP_OK;
    }
    if (c->n + 16 > c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4096;
        uint64_t *grown = realloc(c->sub, cap * sizeof *grown);
        if (!grown) {
            c->failed = 1;
            return FP_ENOMEM;
        }
        c->sub = grown;
        c->cap = cap;
    }
    size_t first = c->n;
    c->n += 16;
    const int child = shift - 4;
    long at = pos;
    for (uint64_t k = 0; k < 16; k++) {
        uint64_t child_start = start | k << child;
        long child_next = k == 15 ? next : wide_count_le(c->g, at, child_start + ((uint64_t)1 << child));
        uint64_t child_entry;
        if (wide_cell_build(c, child_start, child, at, child_next, &child_entry) != FP_OK)
            return FP_ENOMEM;
        c->sub[first + k] = child_entry;
        at = child_next;
    }
    *entry = (uint64_t)1 << 63 | first;
    return FP_OK;
}

// ∫_{-1/2}^{1/2} exp(-(2jt + t²)/s2) dt, the rounded Gaussian's cell j over its centre's
// weight exp(-j²/s2) (s2 = 2σ²): with a = 2j/s2 and b = 1/s2, ∫ exp(-at - bt²) dt =
// Σ_{k,m} a^{2k} (-b)^m / ((2k)! m!) · 2^{-2(k+m)} / (2(k+m) + 1) (the odd powers of t
// integrate to 0). The k terms are positive and the m terms below b/4 <= 1/8 of the one
// before, so the sum carries no cancellation: a few ulp (2^-62) relative; the loops stop
// when a term is below 2^-72 of the sum.
static long double rounded_cell(long j, long double s2) {
    const long double a = 2.0L * (long double)j / s2, b = 1.0L / s2;
    long double sum = 0, ak = 1;   // ak = (a/2)^{2k} / (2k)!
    for (int k = 0; k < 400; k++) {
        if (k > 0)
            ak *= (a / 2) * (a / 2) / ((2.0L * k - 1) * (2.0L * k));
        long double bm = 1, inner = 0;   // bm = (-b/4)^m / m!
        for (int m = 0; m < 200; m++) {
            if (m > 0)
                bm *= -(b / 4) / m;
            long double t = bm / (2.0L * (k + m) + 1);
            inner += t;
            if (fabsl(t) < 0x1p-72L * fabsl(inner))
                break;
        }
        long double term = ak * inner;
        sum += term;
        if (k > 0 && term < 0x1p-72L * sum)
            break;
    }
    return sum;
}

static FpStatus wide_init(DGaussWide *g, double sigma_min, int rounded, FpError *err) {
    memset(g, 0, sizeof *g);
    g->rounded = rounded;
    if (!(sigma_min >= 1 && sigma_min <= DGAUSS_WIDE_SIGMA_MAX))
        return fp_fail(err, FP_EPARAM, "discrete Gaussian: sigma %g grid steps is outside [1, %g]", sigma_min,
                       DGAUSS_WIDE_SIGMA_MAX);
    int e = 1;
    while (ldexp(1.0, e) < 2 * sigma_min * sigma_min)
        e++;
    const long double two_var = ldexpl(1.0L, e);
    g->log2_two_var = e;
    g->sigma = sqrt(ldexp(1.0, e - 1));
    // The support: weights below σ·2^-97 have mass below 2^-96 of the normaliser (> 2.5σ;
    // the rounded law's weights, the cells', decrease as fast).
    long ymax = 0;
    const long double floor_w = (long double)g->sigma * 0x1p-97L;
    while (expl(-(long double)(ymax + 1) * (ymax + 1) / two_var) * (rounded ? rounded_cell(ymax + 1, two_var) : 1.0L) >=
           floor_w)
        ymax++;
    g->ymax = ymax;
    g->levels = 0;
    while ((1L << g->levels) < ymax + 2)
        g->levels++;
    size_t size = (size_t)1 << g->levels;
    g->hi = malloc(size * sizeof *g->hi);
    g->lo = malloc(size * sizeof *g->lo);
    long double *w = malloc(((size_t)ymax + 1) * sizeof *w);
    if (!g->hi || !g->lo || !w) {
        free(w);
        dgauss_wide_free(g);
        return fp_fail(err, FP_ENOMEM, "out of memory for a discrete Gaussian table of %zu entries", size);
    }
    // Weights (exponent exact: j² < 2^64, 2σ² a power of two) and the normaliser summed
    // from the tails inward with compensation (Kahan).
    long double sum = 0, comp = 0;
    for (long j = ymax; j >= 0; j--) {
        w[j] = expl(-(long double)j * j / two_var) * (rounded ? rounded_cell(j, two_var) : 1.0L);
        long double term = j == 0 ? w[0] : 2 * w[j], yk = term - comp, t = sum + yk;
        comp = (t - sum) - yk;
        sum = t;
    }
    // Counts c_j = 2^95 w_j / W as integers (long double values above 2^64 are integers),
    // the rest (all rounding) on j = 0. The table is of |J| (count c_0, then 2c_m for m >= 1),
    // cumulated in 128 bits; the draw takes J's sign from a bit of its own, which gives
    // P(J = ±m) = c_m/2^95 exactly, and halves the table and the tail the cells must split.
    const long double scale = 0x1p95L / sum;
    unsigned __int128 acc = 0, total = (unsigned __int128)1 << 95;
    unsigned __int128 c0 = total;
    for (long j = 1; j <= ymax; j++)
        c0 -= 2 * (unsigned __int128)(w[j] * scale);
    long double var = 0;
    for (long m = 0; m <= ymax; m++) {
        unsigned __int128 c = m == 0 ? c0 : 2 * (unsigned __int128)(w[m] * scale);
        g->hi[m] = (uint64_t)(acc >> 32);
        g->lo[m] = (uint32_t)acc;
        acc += c;
        var += (long double)c / 0x1p95L * (long double)m * m;
    }
    for (size_t i = (size_t)(ymax + 1); i < size; i++) {
        g->hi[i] = (uint64_t)1 << 63;
        g->lo[i] = 0;
    }
    free(w);
    // The guide: bucket b starts at u = b·2^79 (hi = b·2^47, lo = 0); count the thresholds
    // i in [1, ymax] at or below it (threshold ymax+1 is 2^95, above every u).
    const size_t buckets = (size_t)1 << DGAUSS_WIDE_GUIDE_BITS;
    g->guide = malloc((buckets + 1) * sizeof *g->guide);
    if (!g->guide) {
        dgauss_wide_free(g);
        return fp_fail(err, FP_ENOMEM, "out of memory for a discrete Gaussian guide table");
    }
    long i = 1;
    for (size_t b = 0; b <= buckets; b++) {
        uint64_t start = (uint64_t)b << (63 - DGAUSS_WIDE_GUIDE_BITS);
        while (i <= ymax && dgauss_wide_le(g, i, start, 0))
            i++;
        g->guide[b] = (uint32_t)(i - 1);
    }
    g->guide[buckets] = (uint32_t)ymax; // bucket 2^16 - 1 may search up to the last threshold
    // The cells of dgauss_wide_add (DGAUSS_WIDE_CELL): a bucket, and recursively a cell, that
    // holds more than 4 thresholds points to 16 sub-cells in sub[].
    g->bucket = malloc(buckets * sizeof *g->bucket);
    WideCells cells = {.g = g};
    for (size_t b = 0; b < buckets && g->bucket; b++)
        if (wide_cell_build(&cells, (uint64_t)b << WIDE_BUCKET_SHIFT, WIDE_BUCKET_SHIFT, g->guide[b], g->guide[b + 1], &g->bucket[b]) != FP_OK)
            break;
    g->sub = cells.sub;
    g->n_sub = cells.n;
    if (!g->bucket || cells.failed) {
        dgauss_wide_free(g);
        return fp_fail(err, FP_ENOMEM, "out of memory for a discrete Gaussian guide table");
    }
    g->variance = (double)var;
    // Every count is 2^95 P_j (1 + θ), |θ| <= expl's error (4 ulp, 2^-61) + the normaliser's
    // (compensated, 2^-62) + two roundings (2^-63), and for the rounded law the cell's series
    // (2^-62): Σ|Q_j - P_j| over j != 0 is below 2^-59.4, Q_0 absorbs the same plus the tails
    // (< 2^-90), and TV, half the L1 distance, is below 2^-59.4; 2^-59 is stated.
    g->tv = DGAUSS_WIDE_TV;
    return FP_OK;
}

FpStatus dgauss_wide_init(DGaussWide *g, double sigma_min, FpError *err) {
    return wide_init(g, sigma_min, 0, err);
}

FpStatus dgauss_wide_init_rounded(DGaussWide *g, double sigma_min, FpError *err) {
    return wide_init(g, sigma_min, 1, err);
}

void dgauss_wide_free(DGaussWide *g) {
    free(g->hi);
    free(g->lo);
    free(g->guide);
    free(g->bucket);
    free(g->sub);
    g->bucket = NULL;
    g->sub = NULL;
    g->n_sub = 0;
    g->hi = NULL;
    g->lo = NULL;
    g->guide = NULL;
}

// The position (count of thresholds at or below u) a cell entry with bit 63 clear gives for
// u's 10 key bits uk, and in *tie whether the key of one of the cell's thresholds equals uk
// (then the keys cannot order them).
// Every threshold T in the cell shares u's prefix, so a key below uk means T < u and a key
// above means T > u; key 1023 (no threshold, or one at the next cell's start, above every
// u of the cell) is never below uk.
static inline long wide_cell_pos(uint64_t e, uint32_t uk, uint32_t *tie) {
    long pos = (long)((e >> 43) & 0xfffffu);
    uint32_t cnt = (uint32_t)(e >> 40) & 7u;
    for (uint32_t k = 0; k < 4; k++) {
        uint32_t key = (uint32_t)(e >> (10 * k)) & 1023u;
        pos += uk > key;
        *tie |= (k < cnt) & (uk == key);
    }
    return pos;
}

// |J|, the count of thresholds at or below u = (uh, ul), from a cell entry e of hi prefix bits
// 62..shift that holds u: down through sub-cells to a leaf, whose keys decide unless one
// ties u's (then its at most 4 thresholds are compared in full), or the guided search
// where no cell could be built.
static long wide_cell_descend(const DGaussWide *g, uint64_t e, int shift, uint64_t uh, uint32_t ul) {
    while (e >> 62 == 2) {
        shift -= 4;
        e = g->sub[(uint32_t)e + ((uh >> shift) & 15u)];
    }
    if (e >> 63)
        return dgauss_wide_count(g, uh, ul);
    uint32_t tie = 0;
    long pos = wide_cell_pos(e, (uint32_t)(uh >> (shift - 10)) & 1023u, &tie);
    if (tie) {
        long first = (long)((e >> 43) & 0xfffffu), cnt = (long)((e >> 40) & 7u);
        pos = first;
        for (long k = 1; k <= cnt; k++)
            pos += dgauss_wide_le(g, first + k, uh, ul);
    }
    return pos;
}

// The bucket entry e of u's top 16 bits decides |J| from w0 alone (u's next 10 bits are
// its key, wide_cell_pos) unless it is not a leaf or a key equals u's: *undecided is then
// 1. Unlike wide_cell_pos this does not look at the count, so a missing key (1023) ties
// u's key 1023 too: one draw in 1024 goes down the slow way for nothing, and the test is
// a compare fewer. Branch-free, so that a loop of it vectorises.
static inline uint64_t wide_bucket_pos(uint64_t e, uint32_t w0, uint64_t *undecided) {
    uint64_t uk = (w0 >> (WIDE_BUCKET_SHIFT - 42)) & 1023u;
    uint64_t pos = (e >> 43) & 0xfffffu, t = e >> 63;
    for (uint64_t k = 0; k < 4; k++) {
        uint64_t key = (e >> (10 * k)) & 1023u;
        pos += uk > key;
        t |= uk == key;
    }
    *undecided = t;
    return pos;
}

static inline uint64_t wide_bucket_of(const DGaussWide *g, uint32_t w0) {
    return g->bucket[(w0 & 0x7fffffffu) >> (WIDE_BUCKET_SHIFT - 32)];
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// wide_bucket_pos on 8 elements a step in AVX-512, whose compares give the undecided
// elements as a bit mask (the portable loop below stores a byte per element and scans
// them).
int dgauss_wide_chunk_head(const DGaussWide *g, const uint32_t *w0, double *jv, uint16_t *slow) {
    uint64_t cell[DGAUSS_WIDE_CHUNK] __attribute__((aligned(64)));
    const __m512i low31 = _mm512_set1_epi64(0x7fffffff), k1023 = _mm512_set1_epi64(1023);
    const __m512i pos_bits = _mm512_set1_epi64(0xfffff), sign = _mm512_set1_epi64(0x80000000);
    const __m512i minus_one = _mm512_set1_epi64(-1), zero = _mm512_setzero_si512();
    for (int l = 0; l < DGAUSS_WIDE_CHUNK; l += 8) {   // the reads alone, so that they overlap
        __m512i w = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(w0 + l)));
        __m512i b = _mm512_srli_epi64(_mm512_and_si512(w, low31), WIDE_BUCKET_SHIFT - 32);
        _mm512_store_si512(cell + l, _mm512_i64gather_epi64(b, (const void *)g->bucket, 8));
    }
    uint8_t undecided[DGAUSS_WIDE_CHUNK / 8] __attribute__((aligned(8)));
    for (int l = 0; l < DGAUSS_WIDE_CHUNK; l += 8) {
        __m512i w = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(w0 + l)));
        __m512i e = _mm512_load_si512(cell + l);
        __m512i uk = _mm512_and_si512(_mm512_srli_epi64(w, WIDE_BUCKET_SHIFT - 42), k1023);
        __m512i pos = _mm512_and_si512(_mm512_srli_epi64(e, 43), pos_bits);
        __mmask8 t = _mm512_movepi64_mask(e);   // bit 63: not a leaf
        __m512i keys[4] = {_mm512_and_si512(e, k1023), _mm512_and_si512(_mm512_srli_epi64(e, 10), k1023),
                           _mm512_and_si512(_mm512_srli_epi64(e, 20), k1023),
                           _mm512_and_si512(_mm512_srli_epi64(e, 30), k1023)};
        for (int k = 0; k < 4; k++) {
            pos = _mm512_mask_sub_epi64(pos, _mm512_cmpgt_epu64_mask(uk, keys[k]), pos, minus_one);
            t |= _mm512_cmpeq_epu64_mask(uk, keys[k]);
        }
        pos = _mm512_mask_sub_epi64(pos, _mm512_test_epi64_mask(w, sign), zero, pos);   // J's sign
        _mm512_storeu_pd(jv + l, _mm512_cvtepi64_pd(pos));
        undecided[l / 8] = (uint8_t)t;
    }
    int n_slow = 0;
    for (int q = 0; q < DGAUSS_WIDE_CHUNK / 64; q++) {   // the undecided ones, in order (about 2.3%)
        uint64_t m;
        memcpy(&m, undecided + 8 * q, sizeof m);
        for (; m; m &= m - 1)
            slow[n_slow++] = (uint16_t)(64 * q + __builtin_ctzll(m));
    }
    return n_slow;
}
#else
int dgauss_wide_chunk_head(const DGaussWide *g, const uint32_t *w0, double *jv, uint16_t *slow) {
    uint64_t cell[DGAUSS_WIDE_CHUNK];
    uint64_t undecided[DGAUSS_WIDE_CHUNK / 8]; // a byte per element: 1 where the bucket cannot decide
    for (int l = 0; l < DGAUSS_WIDE_CHUNK; l++)   // the reads alone, so that they overlap
        cell[l] = wide_bucket_of(g, w0[l]);
    // In 64-bit lanes without a data-dependent store, so that it vectorises.
    uint8_t *undecided_byte = (uint8_t *)undecided;
    for (int l = 0; l < DGAUSS_WIDE_CHUNK; l++) {
        uint64_t t, pos = wide_bucket_pos(cell[l], w0[l], &t);
        int64_t negative = -(int64_t)(w0[l] >> 31);   // J's sign bit: all ones or zero
        jv[l] = (double)(((int64_t)pos ^ negative) - negative);
        undecided_byte[l] = (uint8_t)t;
    }
    int n_slow = 0;
    for (int q = 0; q < DGAUSS_WIDE_CHUNK / 8; q++)   // the undecided ones, in order (about 2.3%)
        for (uint64_t w = undecided[q]; w; w &= w - 1)
            slow[n_slow++] = (uint16_t)(8 * q + (__builtin_ctzll(w) >> 3));
    return n_slow;
}
#endif

void dgauss_wide_chunk_tail(const DGaussWide *g, const uint32_t *w0, const uint16_t *slow, int n_slow,
                            const uint32_t *t1, const uint32_t *t3, double *jv) {
    // Their first sub-cell reads, together; then each goes down its cells (a level more for
    // about one draw in 1000) and decides by the keys, or by its leaf's thresholds on a tie.
    uint64_t cell[DGAUSS_WIDE_CHUNK];
    uint8_t shift[DGAUSS_WIDE_CHUNK];
    for (int k = 0; k < n_slow; k++) {
        uint64_t uh = ((uint64_t)(w0[slow[k]] & 0x7fffffffu) << 32) | t1[k];
        uint64_t e = g->bucket[uh >> WIDE_BUCKET_SHIFT];
        int down = e >> 62 == 2;
        cell[k] = down ? g->sub[(uint32_t)e + ((uh >> (WIDE_BUCKET_SHIFT - 4)) & 15u)] : e;
        shift[k] = (uint8_t)(down ? WIDE_BUCKET_SHIFT - 4 : WIDE_BUCKET_SHIFT);
    }
    for (int k = 0; k < n_slow; k++) {
        int l = slow[k];
        uint64_t uh = ((uint64_t)(w0[l] & 0x7fffffffu) << 32) | t1[k];
        long m = wide_cell_descend(g, cell[k], shift[k], uh, t3[k]);
        jv[l] = (double)(w0[l] >> 31 ? -m : m);
    }
}

void dgauss_wide_draw_chunk(const DGaussWide *g, const uint32_t *w0, const uint32_t *w1, const uint32_t *w3,
                            double *jv) {
    uint16_t slow[DGAUSS_WIDE_CHUNK];
    uint32_t t1[DGAUSS_WIDE_CHUNK], t3[DGAUSS_WIDE_CHUNK];
    int n_slow = dgauss_wide_chunk_head(g, w0, jv, slow);
    for (int k = 0; k < n_slow; k++) {
        t1[k] = w1[slow[k]];
        t3[k] = w3[slow[k]];
    }
    dgauss_wide_chunk_tail(g, w0, slow, n_slow, t1, t3, jv);
}

void dgauss_wide_words(const RngStream *s, uint64_t i, uint32_t w[4]) {
    uint32_t b[4];
    rng_substream_block(s, DGAUSS_WIDE_HEAD, i >> 2, b);
    rng_substream_block(s, DGAUSS_WIDE_TAIL, i, w);
    w[0] = b[i & 3u];
}

long dgauss_wide_draw_at(const DGaussWide *g, const RngStream *s, uint64_t i) {
    uint32_t b[4];
    rng_substream_block(s, DGAUSS_WIDE_HEAD, i >> 2, b);
    uint32_t w0 = b[i & 3u];
    uint64_t undecided, m = wide_bucket_pos(wide_bucket_of(g, w0), w0, &undecided);
    if (undecided) {   // u's other 64 bits (the same |J| as the cells' descent)
        rng_substream_block(s, DGAUSS_WIDE_TAIL, i, b);
        b[0] = w0;
        return dgauss_wide_draw(g, b);
    }
    return w0 >> 31 ? -(long)m : (long)m;
}

// The head words of the DGAUSS_WIDE_CHUNK elements from c (a multiple of the chunk, so
// that its blocks share their high bits): 32 head blocks from c/4, 16 at a time.
static void wide_head_words(Philox16 *ph, uint64_t *ph_hi, const RngStream *head, uint64_t c, uint32_t *w0) {
    for (int q = 0; q < DGAUSS_WIDE_CHUNK; q += 64) {
        uint64_t b0 = (c + (uint64_t)q) >> 2;
        if ((b0 >> 32) != *ph_hi) {
            *ph_hi = b0 >> 32;
            philox16_prepare(ph, head->key[0], head->key[1], head->purpose, head->round, head->client, *ph_hi);
        }
        PhiloxU32x16 wv[4];
        philox16_blocks(ph, (uint32_t)b0, wv);
        philox16_interleave4(wv, w0 + q);
    }
}

// The tail words (words 1 and 3 of block c + slow[k]) of the chunk's undecided elements,
// 16 blocks per vectorised call.
static void wide_tail_words(Philox16 *pt, uint64_t *pt_hi, const RngStream *tail, uint64_t c, const uint16_t *slow,
                            int n_slow, uint32_t *t1, uint32_t *t3) {
    if ((c >> 32) != *pt_hi) {
        *pt_hi = c >> 32;
        philox16_prepare(pt, tail->key[0], tail->key[1], tail->purpose, tail->round, tail->client, *pt_hi);
    }
    for (int k = 0; k < n_slow; k += 16) {
        PhiloxU32x16 cv, wv[4];
        for (int l = 0; l < 16; l++)
            cv[l] = (uint32_t)c + slow[k + l < n_slow ? k + l : n_slow - 1];
        philox16_blocks_at(pt, cv, wv);
        for (int l = 0; l < 16 && k + l < n_slow; l++) {
            t1[k + l] = wv[1][l];
            t3[k + l] = wv[3][l];
        }
    }
}

void dgauss_wide_add(const DGaussWide *g, double grid, float *x, size_t n, const RngStream *s, uint64_t first) {
    if (s->secure) {   // secure streams (core/rng_secure.h) draw through rng_block only
        for (size_t i = 0; i < n; i++)
            x[i] = dgauss_wide_value_at(g, grid, x[i], s, first + i);
        return;
    }
    RngStream head = rng_substream(s, DGAUSS_WIDE_HEAD), tail = rng_substream(s, DGAUSS_WIDE_TAIL);
    Philox16 ph = {0}, pt = {0};
    uint64_t ph_hi = UINT64_MAX, pt_hi = UINT64_MAX, end = first + n;
    uint32_t w0[DGAUSS_WIDE_CHUNK], t1[DGAUSS_WIDE_CHUNK], t3[DGAUSS_WIDE_CHUNK];
    uint16_t slow[DGAUSS_WIDE_CHUNK];
    double jv[DGAUSS_WIDE_CHUNK];
    // Whole chunks, aligned: the elements of the first and last outside [first, end) are
    // drawn and not used.
    for (uint64_t c = first & ~(uint64_t)(DGAUSS_WIDE_CHUNK - 1); c < end; c += DGAUSS_WIDE_CHUNK) {
        wide_head_words(&ph, &ph_hi, &head, c, w0);
        int n_slow = dgauss_wide_chunk_head(g, w0, jv, slow);
        wide_tail_words(&pt, &pt_hi, &tail, c, slow, n_slow, t1, t3);
        dgauss_wide_chunk_tail(g, w0, slow, n_slow, t1, t3, jv);
        // dgauss_wide_value_at's arithmetic, element by element.
        size_t lo = c < first ? (size_t)(first - c) : 0, hi = end - c < DGAUSS_WIDE_CHUNK ? (size_t)(end - c) : DGAUSS_WIDE_CHUNK;
        float *xs = x + (c + lo - first);   // xs[l - lo] is element c + l
        for (size_t l = lo; l < hi; l++)
            xs[l - lo] = (float)(grid * (dgauss_grid_round(xs[l - lo], grid) + jv[l]));
    }
}

long double dgauss_wide_pmf(const DGaussWide *g, long j) {
    long m = labs(j);
    if (m > g->ymax)
        return 0;
    unsigned __int128 a = ((unsigned __int128)g->hi[m] << 32) | g->lo[m];
    unsigned __int128 b = ((unsigned __int128)g->hi[m + 1] << 32) | g->lo[m + 1];   // 2^95 past ymax
    return (long double)(b - a) / 0x1p95L / (m == 0 ? 1 : 2);
}
