// laplace: x clipped into [lo, hi] plus Laplace noise of scale b = Δ/ε, Δ = hi - lo:
// ε-DP per coordinate (Dwork et al. 2006).
//
// Safe sampler (the default; two words per element; docs/mechanisms.md §Laplace derives
// it): a discrete Laplace on a grid, clamped.
//   grid       Λ = Δ/N: the input's place v = (x - lo)/Λ ∈ [0, N] is rounded to n ∈ {⌊v⌋,
//              ⌊v⌋+1} at random (the second word's top 16 bits; E[n] = v to 2^-16), so
//              n ∈ [0, N] for every input: the sensitivity is N steps whatever the
//              rounding did.
//   noise      J from 47 bits u (the first word, then bits 14..0 of the second) and a
//              sign (bit 15 of the second): y = #{i >= 1 : u < s[i]}, J = y or -1-y (a
//              law symmetric about -½). The counts c(y) = s[y] - s[y+1] (out of 2^47 per
//              sign) are built from the centre out with c(y) = ⌈c(y-1)/E⌉, E = e^{ε/N}
//              rounded down, so that every ratio c(y-1)/c(y) is <= e^{ε/N}; the tail atom
//              c(ymax) takes the rest and is at least c(ymax-1)/(e^{ε/N} - 1).
//   output     K = clamp(n + J, N-1-ymax, ymax); y = lo + Λ(K + ½).
// Proof (pure ε): for inputs on grid points n and n+1 every output K has probabilities
// whose ratio is at most e^{ε/N} (interior K: adjacent counts; clamped K: tail sums, for
// which c(a-1) <= (e^{ε/N} - 1)·Σ_{z>=a} c(z) holds by the same construction); any two
// inputs are mixtures of grid points at most N steps apart, so every ratio is at most
// e^ε. N and ymax are chosen per ε to minimise the worst bias at the range's ends (the
// clamp's), then the variance's distance to 2b²; the clamp sits 4 to 14 scales b beyond
// the range (at ε = 1: bias about 1e-4 b, variance within 0.2% of 2b²).
// Float sampler ("sampler": "float", the pre-grid one): inversion from one word in float
// (bit 31 the sign, the other 31 bits an Exp(1) through -ln u, so |noise| <= 22.2 b),
// added in float: its outputs lie on a float grid that moves with x (Mironov 2012).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "defenses/dp/mech_internal.h"

// ---- float ----------------------------------------------------------------------------

static FpStatus laplace_float_setup(Mech *m, FpError *err) {
    (void)err;
    m->eps_proven = m->delta_proven = INFINITY;
    return FP_OK;
}

static void laplace_set_scale(Mech *m) {
    m->sigma = (m->spec.hi - m->spec.lo) / m->spec.eps;
    m->f_a = (float)m->sigma;
}

static inline float laplace_kernel(float x, uint32_t w, float lo, float hi, float b) {
    float xc = mech_clipf(x, lo, hi);
    float mag = fmaf((float)(w & 0x7fffffffu), 0x1p-31f, 0x1p-32f);   // (0, 1]
    float e = -mech_logf(mag);                                          // Exp(1)
    return fmaf(b, float_from_bits(float_to_bits(e) ^ (w & 0x80000000u)), xc);
}

static float laplace_float_one(const Mech *m, float x, const uint32_t w[4], int j) {
    return laplace_kernel(x, w[j], m->f_lo, m->f_hi, m->f_a);
}

static inline void laplace_float_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t e[64];
    philox16_interleave4(w, e);
    const float lo = m->f_lo, hi = m->f_hi, b = m->f_a;
    for (int i = 0; i < 64; i++)
        x[i] = laplace_kernel(x[i], e[i], lo, hi, b);
}

static void laplace_float_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, laplace_float_chunk);
}

static double laplace_float_mean(const Mech *m, double x) { return mech_clip(m, x); }
static double laplace_float_variance(const Mech *m, double x) { return 2 * m->sigma * m->sigma; }

static void laplace_float_law(const Mech *m, double x, MechLaw *law) {
    law->n = 1;
    law->p[0] = (LawPiece){.kind = LAW_LAPLACE, .weight = 1, .a = mech_clip(m, x), .b = m->sigma};
}

// With the sign bit fixed, the output is monotone in the other 31 bits: mag is, and
// mech_logf is non-decreasing on every float in [2^-34, 1] (checked exhaustively by
// bench/logf_check.c); fmaf is monotone in each argument. Sign 0 adds +e: non-increasing
// (the key negates it); sign 1 adds -e: non-decreasing.
static float laplace_float_key_plus(const Mech *m, double x, uint64_t w) {
    return -laplace_kernel((float)x, (uint32_t)w, m->f_lo, m->f_hi, m->f_a);
}
static float laplace_float_key_minus(const Mech *m, double x, uint64_t w) {
    return laplace_kernel((float)x, (uint32_t)w | 0x80000000u, m->f_lo, m->f_hi, m->f_a);
}

static int laplace_float_possible(const Mech *m, double x, float y) {
    uint64_t w = mech_search_ge(m, x, 0, 0x7fffffffu, -y, laplace_float_key_plus);
    if (w <= 0x7fffffffu && laplace_float_key_plus(m, x, w) == -y)
        return 1;
    w = mech_search_ge(m, x, 0, 0x7fffffffu, y, laplace_float_key_minus);
    return w <= 0x7fffffffu && laplace_float_key_minus(m, x, w) == y;
}

// ---- safe -----------------------------------------------------------------------------

#define LAP_SIDE 140737488355328.0   // 2^47 words per sign
#define LAP_FAST_LEVELS 7            // tables up to 128 entries: searched in registers

// Counts from the centre out: c[0] = c0, c[y] = ⌈c[y-1]/E⌉ (so c[y-1] <= E·c[y]), E = e^{ε/N}
// rounded down; returns the words c[0..ymax-1] take.
static double lap_counts(double c0, int ymax, double e, double *c) {
    double s = c[0] = c0;
    for (int y = 1; y < ymax; y++)
        s += c[y] = ceil(c[y - 1] / e);
    return s;
}

// Builds the table for (N, ymax): the largest c0 whose rest of the 2^47 words, the tail
// atom c[ymax], is at least c[ymax-1]/(E-1) (so the clamped tail's ratio stays within
// e^{ε/N}). 0 when no c0 qualifies.
static int lap_build(MechLaplaceTable *tb, int n_grid, int ymax, double eps, double *c) {
    double e = mech_exp_below(eps / n_grid);
    double lo = 0, hi = LAP_SIDE;   // lo qualifies (or is 0), hi does not
    while (hi - lo > 1) {
        double mid = floor(0.5 * (lo + hi));
        double rest = LAP_SIDE - lap_counts(mid, ymax, e, c);
        if (rest > 0 && c[ymax - 1] <= (e - 1) * rest * (1 - 0x1p-50))
            lo = mid;
        else
            hi = mid;
    }
    if (lo < 1)
        return 0;
    c[ymax] = LAP_SIDE - lap_counts(lo, ymax, e, c);
    tb->n_grid = n_grid;
    tb->ymax = ymax;
    tb->levels = 0;
    while ((1 << tb->levels) < ymax + 1)
        tb->levels++;
    double acc = 0;
    for (int y = ymax; y >= 0; y--) {
        acc += c[y];
        tb->s[y] = (uint64_t)acc;
        tb->s_hi[y] = y == 0 ? 0xffffffffu : (uint32_t)(tb->s[y] >> 15);
    }
    for (int y = ymax + 1; y < MECH_TABLE_MAX; y++) {
        tb->s[y] = 0;
        tb->s_hi[y] = 0;
    }
    return 1;
}

// P(J >= j) of the table's noise.
static double lap_ge(const Mech *m, long j) {
    const MechLaplaceTable *tb = &m->tab.lap;
    if (j >= 0)
        return j > tb->ymax ? 0 : (double)tb->s[j] / (2 * LAP_SIDE);
    if (-j > tb->ymax)
        return 1;
    return 1 - (double)tb->s[-j] / (2 * LAP_SIDE);   // P(J <= j - 1) = P(J >= -j) by the symmetry J -> -1-J
}

// Mean and variance of K = clamp(n + J) + ½ in grid steps.
static void lap_moments(const Mech *m, long n, double *mean, double *var) {
    double s1 = 0, s2 = 0;
    for (long k = m->lat_kmin; k <= m->lat_kmax; k++) {
        double p = k == m->lat_kmin   ? 1 - lap_ge(m, k + 1 - n)
                   : k == m->lat_kmax ? lap_ge(m, k - n)
                                      : lap_ge(m, k - n) - lap_ge(m, k - n + 1);
        s1 += p * (k + 0.5);
        s2 += p * (k + 0.5) * (k + 0.5);
    }
    *mean = s1;
    *var = s2 - s1 * s1;
}

// The grid: N steps across the range (t = N/ε steps per scale b, t ∈ {1, ..., 32}) and the
// clamp L scales past the range's ends (ymax = N + ⌈L·t⌉). Chosen in this order: bias at
// the ends <= 1e-4 b, rounding variance (Λ²/6 on average) <= 1% of 2b², a table of at most
// 2^7 entries (searched in registers); then the least bias + 0.05·|variance/2b² - 1|.
static FpStatus laplace_safe_setup(Mech *m, FpError *err) {
    const double eps = m->spec.eps;
    static const double steps_per_scale[] = {1, 2, 4, 8, 16, 32};
    double *c = malloc(sizeof(double) * MECH_TABLE_MAX);
    MechLaplaceTable *best = malloc(sizeof *best);
    if (!c || !best) {
        free(c);
        free(best);
        return fp_fail(err, FP_ENOMEM, "out of memory building the laplace table");
    }
    double best_cost = INFINITY;
    int best_rank = -1;
    long best_kmin = 0, best_kmax = 0;
    int last_n = 0;
    for (size_t i = 0; i < sizeof steps_per_scale / sizeof steps_per_scale[0]; i++) {
        int n_grid = (int)ceil(eps * steps_per_scale[i] - 1e-9);
        n_grid = n_grid < 1 ? 1 : n_grid;
        if (n_grid == last_n)
            continue;
        last_n = n_grid;
        double t = n_grid / eps;   // the scale b in grid steps
        for (int clamp = 4; clamp <= 14; clamp++) {
            long ymax = n_grid + (long)ceil(clamp * t);
            if (ymax > MECH_TABLE_MAX - 2)
                break;
            if (!lap_build(&m->tab.lap, n_grid, (int)ymax, eps, c))
                continue;
            m->lat_kmin = n_grid - 1 - ymax;
            m->lat_kmax = ymax;
            double bias = 0, vdev = 0;
            for (long n = 0; n <= n_grid; n += n_grid) {
                double mean, var;
                lap_moments(m, n, &mean, &var);
                bias = fmax(bias, fabs(mean - n) / t);
                vdev = fmax(vdev, fabs((var + 1.0 / 6) / (2 * t * t) - 1));
            }
            int rank = (bias <= 1e-4) * 4 + (1.0 / 6 / (2 * t * t) <= 0.01) * 2 + (m->tab.lap.levels <= LAP_FAST_LEVELS);
            double cost = bias + 0.05 * vdev;
            if (rank > best_rank || (rank == best_rank && cost < best_cost)) {
                best_rank = rank;
                best_cost = cost;
                *best = m->tab.lap;
                best_kmin = m->lat_kmin;
                best_kmax = m->lat_kmax;
            }
        }
    }
    free(c);
    if (best_rank < 0) {
        free(best);
        return fp_fail(err, FP_EPARAM,
                       "%s.epsilon: the safe laplace sampler needs epsilon >= %.3g (its table holds %d steps), got "
                       "%g; use \"sampler\": \"float\" for smaller ones",
                       m->spec.path, 4.0 / (MECH_TABLE_MAX - 3), MECH_TABLE_MAX, eps);
    }
    m->tab.lap = *best;
    free(best);
    m->lat_kmin = best_kmin;
    m->lat_kmax = best_kmax;
    // The realised law's largest ratio per grid step (adjacent counts, adjacent tail sums),
    // times N: <= ε by construction, computed from the table itself.
    const MechLaplaceTable *tb = &m->tab.lap;
    double worst = 0;
    for (int y = 1; y <= tb->ymax; y++) {
        if (y < tb->ymax)
            worst = fmax(worst, log((double)(tb->s[y - 1] - tb->s[y]) / (double)(tb->s[y] - tb->s[y + 1])));
        worst = fmax(worst, log((double)tb->s[y - 1] / (double)tb->s[y]));
    }
    m->eps_proven = fmin(eps, tb->n_grid * worst);
    m->delta_proven = 0;
    return FP_OK;
}

static void laplace_safe_set_range(Mech *m) {
    laplace_set_scale(m);
    double lam = (m->spec.hi - m->spec.lo) / m->tab.lap.n_grid;
    m->f_b = (float)lam;
    m->f_e = (float)(1.0 / lam);
}

// y = #{i >= 1 : u < s[i]}, u = u_hi·2^15 + u_lo: a branch-free binary search on the high
// 32 bits, then the (rare) thresholds whose high bits equal u_hi, on the low 15.
static inline int lap_search(const MechLaplaceTable *tb, uint32_t u_hi, uint32_t u_lo) {
    int pos = 0;
    for (int s = 1 << tb->levels >> 1; s >= 1; s >>= 1)
        pos += u_hi < tb->s_hi[pos + s] ? s : 0;
    while (pos < tb->ymax && tb->s_hi[pos + 1] == u_hi && u_lo < (uint32_t)(tb->s[pos + 1] & 0x7fffu))
        pos++;
    return pos;
}

// Element words: a = u_hi; b = coin (bits 31..16) | sign (bit 15) | u_lo (bits 14..0).
static inline float laplace_safe_kernel(const MechLaplaceTable *tb, float x, uint32_t a, uint32_t b, float lo,
                                        float hi, float inv_lam, float lam, int kmin, int kmax) {
    int n = mech_round_random((mech_clipf(x, lo, hi) - lo) * inv_lam, tb->n_grid, b >> 16, 16);
    int j = lap_search(tb, a, b & 0x7fffu) ^ -(int)((b >> 15) & 1u);   // y, or -1-y
    int k = n + j;
    k = k < kmin ? kmin : k > kmax ? kmax : k;
    return fmaf(lam, (float)k + 0.5f, lo);
}

static float laplace_safe_one(const Mech *m, float x, const uint32_t w[4], int j) {
    return laplace_safe_kernel(&m->tab.lap, x, w[2 * j], w[2 * j + 1], m->f_lo, m->f_hi, m->f_e, m->f_b,
                               (int)m->lat_kmin, (int)m->lat_kmax);
}

// 16 blocks = 32 elements: element 2l takes words 0, 1 of block l, element 2l+1 words 2, 3.
// The search level by level across the 32 elements (each pass vectorises), then the rare
// ties on the low bits: the same operations as laplace_safe_kernel.
static inline void laplace_safe_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t ea[32], eb[32];
    int n[32], pos[32];
    philox16_interleave2(&w[0], &w[2], ea);
    philox16_interleave2(&w[1], &w[3], eb);
    const MechLaplaceTable *tb = &m->tab.lap;
    const float lo = m->f_lo, hi = m->f_hi, il = m->f_e, lam = m->f_b;
    const int kmin = (int)m->lat_kmin, kmax = (int)m->lat_kmax;
    for (int i = 0; i < 32; i++) {
        n[i] = mech_round_random((mech_clipf(x[i], lo, hi) - lo) * il, tb->n_grid, eb[i] >> 16, 16);
        pos[i] = 0;
    }
    for (int s = 1 << tb->levels >> 1; s >= 1; s >>= 1)
        for (int i = 0; i < 32; i++)
            pos[i] += ea[i] < tb->s_hi[pos[i] + s] ? s : 0;
    for (int i = 0; i < 32; i++)
        while (pos[i] < tb->ymax && tb->s_hi[pos[i] + 1] == ea[i] &&
               (eb[i] & 0x7fffu) < (uint32_t)(tb->s[pos[i] + 1] & 0x7fffu))
            pos[i]++;
    for (int i = 0; i < 32; i++) {
        int k = n[i] + (pos[i] ^ -(int)((eb[i] >> 15) & 1u));
        k = k < kmin ? kmin : k > kmax ? kmax : k;
        x[i] = fmaf(lam, (float)k + 0.5f, lo);
    }
}

#if defined(__AVX512F__)
// The same kernel on 16 lanes with the binary search in registers: level k of a table of
// 2^L entries reads the 2^(k-1) entries at odd multiples of 2^(L-k), which fit one
// register up to k = 5 (vpermd), two at k = 6 and four at k = 7 (vpermt2d). Lanes whose
// next threshold ties u_hi go through the scalar kernel. Same float operations as
// laplace_safe_kernel (max_ps(v, 0) takes NaN to 0 as mech_round_random does).
typedef struct LapLevels {
    uint32_t t[LAP_FAST_LEVELS][64];   // level k's entries, level-major
} LapLevels;

static void lap_levels(const MechLaplaceTable *tb, LapLevels *lv) {
    memset(lv, 0, sizeof *lv);
    for (int k = 1; k <= tb->levels; k++)
        for (int i = 0; i < 1 << (k - 1); i++)
            lv->t[k - 1][i] = tb->s_hi[(2 * i + 1) << (tb->levels - k)];
}

static inline __m512 laplace_safe_x16(const Mech *m, const LapLevels *lv, __m512 x, __m512i a, __m512i b) {
    const MechLaplaceTable *tb = &m->tab.lap;
    const int levels = tb->levels;
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(m->f_lo)),
                                                         _mm512_set1_ps(m->f_hi)),
                                           _mm512_set1_ps(m->f_lo)),
                             _mm512_set1_ps(m->f_e));
    v = _mm512_max_ps(v, _mm512_setzero_ps());
    __m512i top = _mm512_set1_epi32(tb->n_grid);
    __m512i n0 = _mm512_min_epi32(_mm512_cvttps_epi32(v), top);
    __m512 f = _mm512_max_ps(_mm512_sub_ps(v, _mm512_cvtepi32_ps(n0)), _mm512_setzero_ps());
    __m512i thr = _mm512_cvttps_epu32(_mm512_mul_ps(f, _mm512_set1_ps(65536.0f)));
    __mmask16 up = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(b, 16), thr);
    __m512i n = _mm512_min_epi32(_mm512_mask_add_epi32(n0, up, n0, _mm512_set1_epi32(1)), top);
    __m512i pos = _mm512_setzero_si512();
    for (int k = 1; k <= levels; k++) {
        __m512i idx = _mm512_srli_epi32(pos, levels - k + 1), cand;
        const uint32_t *t = lv->t[k - 1];
        if (k <= 5) {
            cand = _mm512_permutexvar_epi32(idx, _mm512_loadu_si512(t));
        } else if (k == 6) {
            cand = _mm512_permutex2var_epi32(_mm512_loadu_si512(t), idx, _mm512_loadu_si512(t + 16));
        } else {
            __m512i c0 = _mm512_permutex2var_epi32(_mm512_loadu_si512(t), idx, _mm512_loadu_si512(t + 16));
            __m512i c1 = _mm512_permutex2var_epi32(_mm512_loadu_si512(t + 32), idx, _mm512_loadu_si512(t + 48));
            cand = _mm512_mask_blend_epi32(_mm512_test_epi32_mask(idx, _mm512_set1_epi32(32)), c0, c1);
        }
        __mmask16 lt = _mm512_cmplt_epu32_mask(a, cand);
        pos = _mm512_mask_add_epi32(pos, lt, pos, _mm512_set1_epi32(1 << (levels - k)));
    }
    __m512i j = _mm512_xor_si512(pos, _mm512_sub_epi32(_mm512_setzero_si512(),
                                                       _mm512_and_si512(_mm512_srli_epi32(b, 15), _mm512_set1_epi32(1))));
    __m512i k = _mm512_max_epi32(_mm512_min_epi32(_mm512_add_epi32(n, j), _mm512_set1_epi32((int)m->lat_kmax)),
                                 _mm512_set1_epi32((int)m->lat_kmin));
    __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(m->f_b), _mm512_add_ps(_mm512_cvtepi32_ps(k), _mm512_set1_ps(0.5f)),
                               _mm512_set1_ps(m->f_lo));
    // Ties of u_hi with the next threshold: decided on the low bits, in scalar.
    __m512i next = _mm512_i32gather_epi32(_mm512_add_epi32(pos, _mm512_set1_epi32(1)), (const void *)tb->s_hi, 4);
    __mmask16 tie = _mm512_cmpeq_epi32_mask(next, a) & _mm512_cmplt_epi32_mask(pos, _mm512_set1_epi32(tb->ymax));
    if (tie) {
        float xs[16], ys[16];
        uint32_t as[16], bs[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(ys, y);
        _mm512_storeu_si512(as, a);
        _mm512_storeu_si512(bs, b);
        for (int l = 0; l < 16; l++)
            if (tie >> l & 1)
                ys[l] = laplace_safe_kernel(tb, xs[l], as[l], bs[l], m->f_lo, m->f_hi, m->f_e, m->f_b,
                                            (int)m->lat_kmin, (int)m->lat_kmax);
        y = _mm512_loadu_ps(ys);
    }
    return y;
}

static inline void laplace_safe_chunk512(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i lo16 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi16 = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    __m512 ye = laplace_safe_x16(m, ctx, _mm512_permutex2var_ps(x0, even, x1), (__m512i)w[0], (__m512i)w[1]);
    __m512 yo = laplace_safe_x16(m, ctx, _mm512_permutex2var_ps(x0, odd, x1), (__m512i)w[2], (__m512i)w[3]);
    _mm512_storeu_ps(x, _mm512_permutex2var_ps(ye, lo16, yo));
    _mm512_storeu_ps(x + 16, _mm512_permutex2var_ps(ye, hi16, yo));
}
#endif

static void laplace_safe_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
#if defined(__AVX512F__)
    if (m->tab.lap.levels <= LAP_FAST_LEVELS) {
        LapLevels lv;
        lap_levels(&m->tab.lap, &lv);
        mech_drive(m, &lv, x, n, s, first, laplace_safe_chunk512);
        return;
    }
#endif
    mech_drive(m, NULL, x, n, s, first, laplace_safe_chunk);
}

static void laplace_safe_law(const Mech *m, double x, MechLaw *law) {
    int n[2];
    double p_hi;
    mech_round_law((mech_input(m, x) - m->f_lo) * m->f_e, m->tab.lap.n_grid, 16, &n[0], &n[1], &p_hi);
    law->n = 0;
    for (int i = 0; i < 2; i++)
        if ((i ? p_hi : 1 - p_hi) > 0)
            law->p[law->n++] = (LawPiece){LAW_LATTICE, i ? p_hi : 1 - p_hi, 0.5, m->f_b, n[i], m};
}

static double laplace_safe_mean(const Mech *m, double x) {
    MechLaw law;
    laplace_safe_law(m, x, &law);
    return law_mean(&law);
}

static double laplace_safe_variance(const Mech *m, double x) {
    MechLaw law;
    laplace_safe_law(m, x, &law);
    return law_central_moment(&law, 2);
}

// Every K in [kmin, kmax] has positive probability at every input (all counts >= 1).
static int laplace_safe_possible(const Mech *m, double x, float y) {
    (void)x;
    double k0 = round(((double)y - m->f_lo) / m->f_b - 0.5);
    for (double k = k0 - 2; k <= k0 + 2; k++)
        if (k >= m->lat_kmin && k <= m->lat_kmax && fmaf(m->f_b, (float)k + 0.5f, m->f_lo) == y)
            return 1;
    return 0;
}

static const MechSampler laplace_safe = {
    .kind = MECH_SAMPLER_SAFE,
    .elements_per_block = 2,
    .exact = 1,
    .setup = laplace_safe_setup,
    .set_range = laplace_safe_set_range,
    .one = laplace_safe_one,
    .perturb_fast = laplace_safe_perturb_fast,
    .mean = laplace_safe_mean,
    .variance = laplace_safe_variance,
    .law = laplace_safe_law,
    .possible = laplace_safe_possible,
    .lattice_ge = lap_ge,
};

static const MechSampler laplace_float = {
    .kind = MECH_SAMPLER_FLOAT,
    .elements_per_block = 4,
    .exact = 0,
    .setup = laplace_float_setup,
    .set_range = laplace_set_scale,
    .one = laplace_float_one,
    .perturb_fast = laplace_float_perturb_fast,
    .mean = laplace_float_mean,
    .variance = laplace_float_variance,
    .law = laplace_float_law,
    .possible = laplace_float_possible,
};

const MechOps mech_laplace = {
    .name = "laplace",
    .summary = "Laplace noise per coordinate, scale (hi-lo)/eps",
    .range = MECH_RANGE_REQUIRED,
    .safe = &laplace_safe,
    .fp = &laplace_float,
};
