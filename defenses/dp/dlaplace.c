// The discrete Laplace of the federated defenses (defenses/dp/dlaplace.h).
#include "defenses/dp/dlaplace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "core/philox.h"

#define DLAP_TWO63 9223372036854775808.0L
#define DLAP_SECOND ((uint64_t)1 << 46)   // the element's second block
#define DLAP_EXT ((uint64_t)1 << 47)      // its extension blocks for A

static void digit_free(DLapDigit *d) {
    free(d->s);
    free(d->guide);
    memset(d, 0, sizeof *d);
}

// Counts proportional to 2^(-k·step) for k < n, summing to 2^63: floor(c0·w_k) with c0 =
// 2^63/Σw, the rest (fewer than n + 1 counts) one each on the first entries.
static FpStatus digit_build(DLapDigit *d, long n, long double step, FpError *err) {
    memset(d, 0, sizeof *d);
    d->n = n;
    d->guide_bits = 8;
    while ((1L << d->guide_bits) < 2 * n && d->guide_bits < 17)
        d->guide_bits++;
    d->s = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    d->guide = malloc(sizeof(uint32_t) * (((size_t)1 << d->guide_bits) + 1));
    long double *w = malloc(sizeof(long double) * (size_t)n);
    if (!d->s || !d->guide || !w) {
        free(w);
        digit_free(d);
        return fp_fail(err, FP_ENOMEM, "out of memory for a discrete Laplace table of %ld entries", n);
    }
    long double sum = 0;
    for (long k = n - 1; k >= 0; k--)
        sum += w[k] = exp2l(-(long double)k * step);
    long double c0 = DLAP_TWO63 / sum * (1 - 0x1p-60L), total = 0;
    for (long k = 0; k < n; k++)
        total += w[k] = floorl(c0 * w[k]);
    long rest = (long)(DLAP_TWO63 - total);
    for (long k = 0; k < rest; k++)
        w[k % n] += 1;
    uint64_t acc = 0;
    for (long k = 0; k < n; k++) {
        d->s[k] = acc;
        acc += (uint64_t)w[k];
    }
    d->s[n] = acc;   // 2^63
    free(w);
    long pos = 0;
    for (size_t b = 0; b <= ((size_t)1 << d->guide_bits); b++) {
        uint64_t edge = b << (63 - d->guide_bits);
        while (pos + 1 < n && d->s[pos + 1] <= edge)
            pos++;
        d->guide[b] = (uint32_t)pos;
    }
    return FP_OK;
}

// The digit k with s[k] <= u < s[k+1] (u < 2^63).
static inline long digit_draw(const DLapDigit *d, uint64_t u) {
    long pos = d->guide[u >> (63 - d->guide_bits)];
    while (pos + 1 < d->n && d->s[pos + 1] <= u)
        pos++;
    return pos;
}

static inline long double digit_count(const DLapDigit *d, long k) {
    return (long double)(d->s[k + 1] - d->s[k]);
}

// The largest ratio of adjacent probabilities of J (both directions), from the counts.
static long double realised_ratio(const DLap *t) {
    const DLapDigit *lo = &t->lo, *hi = &t->hi;
    long double worst = 1;
#define DLAP_SEE(r)                                                                                                \
    do {                                                                                                           \
        long double r_ = (r);                                                                                      \
        worst = fmaxl(worst, fmaxl(r_, 1 / r_));                                                                   \
    } while (0)
    for (long c = 0; c + 1 < lo->n; c++)   // within C
        DLAP_SEE(digit_count(lo, c) / digit_count(lo, c + 1));
    long double wrap = digit_count(lo, lo->n - 1) / digit_count(lo, 0);
    for (long b = 0; b + 1 < hi->n; b++)   // C wraps, B steps
        DLAP_SEE(digit_count(hi, b) / digit_count(hi, b + 1) * wrap);
    // C and B wrap, A steps: P(A = a)/P(A = a + 1) = 2.
    DLAP_SEE(2 * digit_count(hi, hi->n - 1) / digit_count(hi, 0) * wrap);
#undef DLAP_SEE
    // A few roundings of long double (2^-63 relative each): a margin of 2^-58.
    return worst * (1 + 0x1p-58L);
}

FpStatus dlap_init(DLap *t, double scale_min, FpError *err) {
    memset(t, 0, sizeof *t);
    if (!(scale_min >= 1 && scale_min * M_LN2 <= (double)DLAP_Q_MAX))
        return fp_fail(err, FP_EPARAM, "discrete Laplace: scale %g grid steps is outside [1, %.4g]", scale_min,
                       (double)DLAP_Q_MAX / M_LN2);
    long qmin = (long)ceil(scale_min * M_LN2);
    long m = 1;
    while (m * m * 4 <= qmin && m < (1L << 15))
        m *= 2;
    long l = (qmin + m - 1) / m;
    if (l > (1L << 16))
        return fp_fail(err, FP_EPARAM, "discrete Laplace: scale %g grid steps needs a larger table", scale_min);
    t->m = m;
    t->l = l;
    t->q = m * l;
    t->scale = (double)t->q / M_LN2;
    FpStatus st = digit_build(&t->lo, m, 1.0L / t->q, err);
    if (st == FP_OK)
        st = digit_build(&t->hi, l, 1.0L / l, err);
    if (st != FP_OK) {
        dlap_free(t);
        return st;
    }
    long double e = realised_ratio(t);
    t->ratio = (double)e;
    t->log_ratio = (double)(log1pl(e - 1) * (1 + 0x1p-58L));
    t->lipschitz = (double)((e - 1) * (1 + 0x1p-58L));
    // Doubles rounded up by one ulp where the conversion may have rounded down.
    t->ratio = nextafter(t->ratio, INFINITY);
    t->log_ratio = nextafter(t->log_ratio, INFINITY);
    t->lipschitz = nextafter(t->lipschitz, INFINITY);
    return FP_OK;
}

void dlap_free(DLap *t) {
    digit_free(&t->lo);
    digit_free(&t->hi);
}

// A: trailing one bits of w, then of the element's extension words.
static long long trailing_ones(const RngStream *s, uint64_t index, uint32_t w) {
    if (w != 0xffffffffu)
        return __builtin_ctz(~w);
    long long a = 32;
    for (uint64_t j = 0; j < ((uint64_t)1 << 16); j++) {
        uint32_t e[4];
        rng_block(s, DLAP_EXT | (index << 16) | j, e);
        for (int k = 0; k < 4; k++) {
            if (e[k] != 0xffffffffu)
                return a + __builtin_ctz(~e[k]);
            a += 32;
        }
    }
    return a;
}

static inline long long draw_words(const DLap *t, const RngStream *s, uint64_t index, const uint32_t w[4],
                                   const uint32_t v[4]) {
    long c = digit_draw(&t->lo, ((uint64_t)(w[0] & 0x7fffffffu) << 32) | w[1]);
    long b = digit_draw(&t->hi, ((uint64_t)(w[2] & 0x7fffffffu) << 32) | w[3]);
    long long y = (long long)t->q * trailing_ones(s, index, v[0]) + (long long)t->m * b + c;
    return w[0] >> 31 ? -1 - y : y;
}

long long dlap_draw(const DLap *t, const RngStream *s, uint64_t index, uint32_t *coin) {
    uint32_t w[4], v[4];
    rng_block(s, index, w);
    rng_block(s, index | DLAP_SECOND, v);
    if (coin)
        *coin = v[1];
    return draw_words(t, s, index, w, v);
}

// ⌊v⌋ + [coin < ⌊frac(v)·2^32⌋], v = x/g.
static inline long long round_random(double g, float x, uint32_t coin) {
    double v = (double)x / g, fl = floor(v);
    double thr = floor((v - fl) * 4294967296.0);
    return (long long)fl + ((double)coin < thr ? 1 : 0);
}

long long dlap_noisy_int(const DLap *t, double g, float x, const RngStream *s, uint64_t index) {
    uint32_t coin;
    long long j = dlap_draw(t, s, index, &coin);
    return round_random(g, x, coin) + j;
}

void dlap_add(const DLap *t, double g, float *x, size_t n, const RngStream *s, uint64_t first) {
    size_t i = 0;
    for (; i < n && ((first + i) & 15u); i++)
        x[i] = dlap_value(t, g, x[i], s, first + i);
    if (!s->secure) {   // secure streams (core/rng_secure.h) draw through rng_block only
        // 16 elements at once: their first blocks, then their second blocks (the same
        // words rng_block gives; the tests compare both paths).
        Philox16 p1 = {0}, p2 = {0};
        uint64_t hi = UINT64_MAX;
        for (; i + 16 <= n; i += 16) {
            uint64_t b0 = first + i;
            if ((b0 >> 32) != hi) {
                hi = b0 >> 32;
                philox16_prepare(&p1, s->key[0], s->key[1], s->purpose, s->round, s->client, hi);
                philox16_prepare(&p2, s->key[0], s->key[1], s->purpose, s->round, s->client, (b0 | DLAP_SECOND) >> 32);
            }
            PhiloxU32x16 w1[4], w2[4];
            philox16_blocks(&p1, (uint32_t)b0, w1);
            philox16_blocks(&p2, (uint32_t)b0, w2);
            for (int l = 0; l < 16; l++) {
                const uint32_t w[4] = {w1[0][l], w1[1][l], w1[2][l], w1[3][l]};
                const uint32_t v[4] = {w2[0][l], w2[1][l], 0, 0};
                long long k = round_random(g, x[i + l], v[1]) + draw_words(t, s, b0 + l, w, v);
                x[i + l] = (float)(g * ((double)k + 0.5));
            }
        }
    }
    for (; i < n; i++)
        x[i] = dlap_value(t, g, x[i], s, first + i);
}

long double dlap_pmf(const DLap *t, long long j) {
    long long y = j >= 0 ? j : -1 - j;
    long long a = y / t->q, r = y % t->q;
    long b = (long)(r / t->m), c = (long)(r % t->m);
    return 0.5L * ldexpl(1.0L, -(int)(a + 1)) * digit_count(&t->hi, b) / DLAP_TWO63 * digit_count(&t->lo, c) /
           DLAP_TWO63;
}

double dlap_position_error(double g, double vmax) {
    return fabs(vmax / g) * 0x1p-52 + 0x1p-32;
}

double dlap_epsilon_l1(const DLap *t, double g, double l1, double d, double vmax) {
    double steps = l1 / g * (1 + 0x1p-50) + 2 * d * dlap_position_error(g, vmax);
    return t->lipschitz * steps * (1 + 0x1p-50);
}

void dlap_describe(const DLap *t, double g, const char *key, cJSON *out) {
    cJSON *o = cJSON_AddObjectToObject(out, key);
    cJSON_AddNumberToObject(o, "grid", g);
    cJSON_AddNumberToObject(o, "scale_steps", t->scale);
    cJSON_AddNumberToObject(o, "steps_per_halving", (double)t->q);
    cJSON_AddNumberToObject(o, "ratio_bound", t->ratio);
}

FpStatus dlap_parse_sampler(const cJSON *params, const char *path, int *safe, FpError *err) {
    static const char *const samplers[] = {"safe", "float", NULL};
    int choice;
    FP_TRY(jv_choice(params, path, "sampler", samplers, 0, &choice, err));
    *safe = choice == 0;
    return FP_OK;
}
