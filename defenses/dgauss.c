// The discrete Gaussian table and noise (defenses/dgauss.h).
#include "defenses/dgauss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"

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

FpStatus dgauss_wide_init(DGaussWide *g, double sigma_min, FpError *err) {
    memset(g, 0, sizeof *g);
    if (!(sigma_min >= 1 && sigma_min <= DGAUSS_WIDE_SIGMA_MAX))
        return fp_fail(err, FP_EPARAM, "discrete Gaussian: sigma %g grid steps is outside [1, %g]", sigma_min,
                       DGAUSS_WIDE_SIGMA_MAX);
    int e = 1;
    while (ldexp(1.0, e) < 2 * sigma_min * sigma_min)
        e++;
    const long double two_var = ldexpl(1.0L, e);
    g->log2_two_var = e;
    g->sigma = sqrt(ldexp(1.0, e - 1));
    // The support: weights below σ·2^-97 have mass below 2^-96 of the normaliser (> 2.5σ).
    long ymax = 0;
    const long double floor_w = (long double)g->sigma * 0x1p-97L;
    while (expl(-(long double)(ymax + 1) * (ymax + 1) / two_var) >= floor_w)
        ymax++;
    g->ymax = ymax;
    g->levels = 0;
    while ((1L << g->levels) < 2 * ymax + 2)
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
        w[j] = expl(-(long double)j * j / two_var);
        long double term = j == 0 ? w[0] : 2 * w[j], yk = term - comp, t = sum + yk;
        comp = (t - sum) - yk;
        sum = t;
    }
    // Counts c_j = 2^95 w_j / W as integers (long double values above 2^64 are integers),
    // cumulated in 128 bits; the rest (all rounding) on j = 0.
    const long double scale = 0x1p95L / sum;
    unsigned __int128 acc = 0, total = (unsigned __int128)1 << 95;
    unsigned __int128 c0 = total;
    for (long j = 1; j <= ymax; j++)
        c0 -= 2 * (unsigned __int128)(w[j] * scale);
    long double var = 0;
    for (long j = -ymax; j <= ymax; j++) {
        unsigned __int128 c = j == 0 ? c0 : (unsigned __int128)(w[labs(j)] * scale);
        g->hi[j + ymax] = (uint64_t)(acc >> 32);
        g->lo[j + ymax] = (uint32_t)acc;
        acc += c;
        var += (long double)c / 0x1p95L * (long double)j * j;
    }
    for (size_t i = (size_t)(2 * ymax + 1); i < size; i++) {
        g->hi[i] = (uint64_t)1 << 63;
        g->lo[i] = 0;
    }
    free(w);
    // The guide: bucket b starts at u = b·2^79 (hi = b·2^47, lo = 0); count the thresholds
    // i in [1, 2ymax] at or below it (threshold 2ymax+1 is 2^95, above every u).
    const size_t buckets = (size_t)1 << DGAUSS_WIDE_GUIDE_BITS;
    g->guide = malloc((buckets + 1) * sizeof *g->guide);
    if (!g->guide) {
        dgauss_wide_free(g);
        return fp_fail(err, FP_ENOMEM, "out of memory for a discrete Gaussian guide table");
    }
    long i = 1;
    for (size_t b = 0; b <= buckets; b++) {
        uint64_t start = (uint64_t)b << (63 - DGAUSS_WIDE_GUIDE_BITS);
        while (i <= 2 * ymax && dgauss_wide_le(g, i, start, 0))
            i++;
        g->guide[b] = (uint32_t)(i - 1);
    }
    g->guide[buckets] = (uint32_t)(2 * ymax); // bucket 2^16 - 1 may search up to the last threshold
    g->variance = (double)var;
    // Every count is 2^95 P_j (1 + θ), |θ| <= expl's error (4 ulp, 2^-61) + the normaliser's
    // (compensated, 2^-62) + two roundings (2^-63): Σ|Q_j - P_j| over j != 0 is below 2^-60,
    // Q_0 absorbs the same plus the tails (< 2^-90): TV < 2^-60; 2^-59 is stated.
    g->tv = 0x1p-59;
    return FP_OK;
}

void dgauss_wide_free(DGaussWide *g) {
    free(g->hi);
    free(g->lo);
    free(g->guide);
    g->hi = NULL;
    g->lo = NULL;
    g->guide = NULL;
}

// T_i <= (uh, ul) where the top 63 bits tie (about 2^-63 of the comparisons): out of line,
// so the common path never touches the low words.
__attribute__((noinline, cold)) static long wide_tie_le(const DGaussWide *g, long i, uint32_t ul) {
    return g->lo[i] <= ul;
}

static inline long wide_le_fast(const DGaussWide *g, long i, uint64_t uh, uint32_t ul) {
    uint64_t h = g->hi[i];
    long le = h < uh;
    if (__builtin_expect(h == uh, 0))
        le = wide_tie_le(g, i, ul);
    return le;
}

// dgauss_wide_draw for 16 elements (word j of element l: w[j][l]) into jv, in three passes
// so that the 16 elements' table reads overlap.
static void wide_draw16(const DGaussWide *g, const uint32_t w0[16], const uint32_t w1[16], const uint32_t w3[16],
                        double jv[16]) {
    uint64_t uh[16];
    long pos[16], cnt[16];
    for (int l = 0; l < 16; l++)
        uh[l] = ((uint64_t)(w0[l] & 0x7fffffffu) << 32) | w1[l];
    for (int l = 0; l < 16; l++) {
        uint64_t b = uh[l] >> (63 - DGAUSS_WIDE_GUIDE_BITS);
        pos[l] = g->guide[b];
        cnt[l] = (long)g->guide[b + 1] - pos[l];
    }
    for (int l = 0; l < 16; l++) {
        long p = pos[l], c = cnt[l];
        if (__builtin_expect(c <= DGAUSS_WIDE_SHORT, 1)) {
            // The thresholds p+1..p+c are sorted: J's position is p plus how many are <= u.
            // Indices past p+c are clamped to it (read, then masked off).
            long le = 0;
            for (long k = 1; k <= DGAUSS_WIDE_SHORT; k++)
                le += (c >= k) & wide_le_fast(g, p + (c < k ? c : k), uh[l], w3[l]);
            p += le;
        } else {
            while (c > 0) {   // the binary search of dgauss_wide_draw
                long half = c / 2;
                if (wide_le_fast(g, p + half + 1, uh[l], w3[l])) {
                    p += half + 1;
                    c -= half + 1;
                } else {
                    c = half;
                }
            }
        }
        jv[l] = (double)(p - g->ymax);
    }
}

void dgauss_wide_add(const DGaussWide *g, double grid, float *x, size_t n, const RngStream *s, uint64_t first) {
    size_t i = 0;
    uint32_t w[4];
    for (; i < n && ((first + i) & 15u); i++) {
        rng_block(s, first + i, w);
        x[i] = dgauss_wide_value(g, grid, x[i], w);
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
            uint32_t w0[16], w1[16], w3[16];
            double jv[16];
            philox16_blocks(&ph, (uint32_t)b0, wv);
            __builtin_memcpy(w0, &wv[0], sizeof w0);
            __builtin_memcpy(w1, &wv[1], sizeof w1);
            __builtin_memcpy(w3, &wv[3], sizeof w3);
            wide_draw16(g, w0, w1, w3, jv);
            // dgauss_wide_value's arithmetic, element by element (vectorised).
            float *xi = x + i;
            for (int l = 0; l < 16; l++)
                xi[l] = (float)(grid * (dgauss_grid_round(xi[l], grid) + jv[l]));
        }
    }
    for (; i < n; i++) {
        rng_block(s, first + i, w);
        x[i] = dgauss_wide_value(g, grid, x[i], w);
    }
}

long double dgauss_wide_pmf(const DGaussWide *g, long j) {
    if (j < -g->ymax || j > g->ymax)
        return 0;
    long i = j + g->ymax;
    unsigned __int128 a = ((unsigned __int128)g->hi[i] << 32) | g->lo[i];
    unsigned __int128 b = i + 1 < (1L << g->levels) ? ((unsigned __int128)g->hi[i + 1] << 32) | g->lo[i + 1]
                                                    : (unsigned __int128)1 << 95;
    return (long double)(b - a) / 0x1p95L;
}
