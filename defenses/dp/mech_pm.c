// The Piecewise Mechanism of Wang et al. (ICDE 2019), as the SPM digest §3 and the
// Harmony digest §3 restate it. Input t = (x - c)/r ∈ [-1, 1] (x clipped), h = e^{ε/2}:
//   C = (h+1)/(h-1),  l(t) = (C+1)/2·t - (C-1)/2,  r(t) = l(t) + C - 1;
//   with probability h/(h+1) output U[l, r], else U([-C, l) ∪ (r, C]);
//   the density ratio between the two parts is h² = e^ε.
// Unbiased; Var = r²·(t²/(h-1) + (h+3)/(3(h-1)²)). Output c + r·t*.
//
// Safe sampler (the default; two words per element, docs/mechanisms.md §PM):
//   [-C, C] is cut into G = 2^16 equal cells with centres v_k = -C + (k + ½)·2C/G; the
//   window is W = round(G/(h+1)) consecutive cells (PM's [l, r] has that share of the
//   domain). Its first cell a ∈ [0, G-W] is the input's place v = (t+1)/2·(G-W), rounded
//   to one of its two neighbours at random (mech_round_random, the second word's top 24
//   bits: unbiased). The first word w picks the cell with exact integer counts: w < W·c_hi
//   gives window cell ⌊w/c_hi⌋, then (G-W)·c_lo words give the other cells in order,
//   ⌊(w - W·c_hi)/c_lo⌋; the words left (fewer than W) give the centre c.
//   c_lo = ⌈2^32/(W E + G - W)⌉ (E = e^ε rounded down) and c_hi = ⌊(2^32 - (G-W)c_lo)/W⌋
//   <= E·c_lo, so every output cell has probability c_hi/2^32 or c_lo/2^32 at every input
//   and the ratio of any output's probabilities at two inputs is 1 or c_hi/c_lo <= e^ε:
//   exactly ε-LDP for the code as it runs. The output is
//   c + r·s·v_k, s = 2^32·G/((c_hi - c_lo)·W·C·(G - W)) ≈ 1 making it unbiased.
// Float sampler ("sampler": "float", the pre-grid one): one word; w < thr picks the
//   centre piece and the word's place inside its part is the position. Its outputs lie on
//   a float grid that moves with t (no ε holds).
#include <math.h>

#include "defenses/dp/mech_internal.h"

// ---- float ----------------------------------------------------------------------------

static FpStatus pm_float_setup(Mech *m, FpError *err) {
    (void)err;
    double h = exp(0.5 * m->spec.eps);
    m->d_a = h;
    m->big_c = (h + 1) / (h - 1);
    double thr = floor(h / (h + 1) * 4294967296.0);
    m->thr = (uint32_t)thr;
    m->p_keep = thr / 4294967296.0;
    m->f_sk = (float)(1.0 / thr);
    m->f_sf = (float)(1.0 / (4294967296.0 - thr));
    m->f_a = (float)((m->big_c + 1) / 2);
    m->f_b = (float)((m->big_c - 1) / 2);
    m->f_d = (float)m->big_c;
    m->eps_proven = m->delta_proven = INFINITY;
    return FP_OK;
}

static void pm_float_set_range(Mech *m) { m->f_e = (float)(1.0 / m->r); }

// The centre piece: l + (C-1)u; the rest: v = (C+1)u runs over [-C, l) then (r, C].
static inline float pm_kernel(float x, uint32_t w, float lo, float hi, float c, float r, float inv_r, float a,
                              float b, float big_c, uint32_t thr, float sk, float sf) {
    float t = (mech_clipf(x, lo, hi) - c) * inv_r;
    float l = fmaf(a, t, -b);
    int keep = w < thr;
    uint32_t ww = keep ? w : w - thr;
    float sc = keep ? sk : sf;
    float u = (float)ww * sc;
    float yk = fmaf(2.0f * b, u, l);
    float v = (2.0f * a) * u;
    float shift = v < l + big_c ? big_c : 1.0f;
    float yf = v - shift;
    uint32_t mk = 0u - (uint32_t)keep;   // a bitwise select: the compiler if-converts it
    float y = float_from_bits((float_to_bits(yk) & mk) | (float_to_bits(yf) & ~mk));
    return fmaf(r, y, c);
}

static inline float pm_float_word(const Mech *m, float x, uint32_t w) {
    return pm_kernel(x, w, m->f_lo, m->f_hi, m->f_c, m->f_r, m->f_e, m->f_a, m->f_b, m->f_d, m->thr, m->f_sk,
                     m->f_sf);
}

static float pm_float_one(const Mech *m, float x, const uint32_t w[4], int j) { return pm_float_word(m, x, w[j]); }

static inline void pm_float_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t e[64];
    philox16_interleave4(w, e);
    const float lo = m->f_lo, hi = m->f_hi, c = m->f_c, r = m->f_r, ir = m->f_e, a = m->f_a, b = m->f_b,
                bc = m->f_d, sk = m->f_sk, sf = m->f_sf;
    const uint32_t thr = m->thr;
    for (int i = 0; i < 64; i++)
        x[i] = pm_kernel(x[i], e[i], lo, hi, c, r, ir, a, b, bc, thr, sk, sf);
}

static void pm_float_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, pm_float_chunk);
}

static double pm_float_mean(const Mech *m, double x) { return mech_clip(m, x); }

static double pm_float_variance(const Mech *m, double x) {
    double h = m->d_a, t = (mech_clip(m, x) - m->c) / m->r;
    return m->r * m->r * (t * t / (h - 1) + (h + 3) / (3 * (h - 1) * (h - 1)));
}

static void pm_float_law(const Mech *m, double x, MechLaw *law) {
    double C = m->big_c, t = (mech_clip(m, x) - m->c) / m->r;
    double l = (C + 1) / 2 * t - (C - 1) / 2, rt = l + C - 1, q = 1 - m->p_keep;
    double c = m->c, r = m->r;
    law->n = 3;
    law->p[0] = (LawPiece){.kind = LAW_UNIFORM, .weight = q * (l + C) / (C + 1), .a = c - r * C, .b = c + r * l};
    law->p[1] = (LawPiece){.kind = LAW_UNIFORM, .weight = m->p_keep, .a = c + r * l, .b = c + r * rt};
    law->p[2] = (LawPiece){.kind = LAW_UNIFORM, .weight = q * (C - rt) / (C + 1), .a = c + r * rt, .b = c + r * C};
}

// The output for word w; on [0, thr) and on each side of the flipped part's jump it is
// non-decreasing in w (every step is a monotone IEEE operation), so a binary search
// finds the words that give y.
static float pm_float_key(const Mech *m, double x, uint64_t w) { return pm_float_word(m, (float)x, (uint32_t)w); }

// The flipped part's v = (C+1)u, whose comparison with l + C picks the jump.
static float pm_float_flip_v(const Mech *m, double x, uint64_t w) {
    return (2.0f * m->f_a) * ((float)((uint32_t)w - m->thr) * m->f_sf);
}

static int pm_float_possible(const Mech *m, double x, float y) {
    float t = (mech_clipf((float)x, m->f_lo, m->f_hi) - m->f_c) * m->f_e;
    float l = fmaf(m->f_a, t, -m->f_b);
    uint64_t jump = mech_search_ge(m, x, m->thr, 0xffffffffu, l + m->f_d, pm_float_flip_v);
    const uint64_t pieces[3][2] = {{0, (uint64_t)m->thr - 1}, {m->thr, jump - 1}, {jump, 0xffffffffu}};
    for (int p = 0; p < 3; p++) {
        if (pieces[p][1] < pieces[p][0] || pieces[p][1] > 0xffffffffu)
            continue;
        uint64_t w = mech_search_ge(m, x, pieces[p][0], pieces[p][1], y, pm_float_key);
        if (w <= pieces[p][1] && pm_float_key(m, x, w) == y)
            return 1;
    }
    return 0;
}

// ---- safe -----------------------------------------------------------------------------

#define PM_CELLS 65536u

static FpStatus pm_safe_setup(Mech *m, FpError *err) {
    double eps = m->spec.eps, h = exp(0.5 * eps);
    m->d_a = h;
    m->big_c = (h + 1) / (h - 1);
    MechPmGrid *g = &m->tab.pm;
    g->cells = PM_CELLS;
    double w = round(PM_CELLS / (h + 1));
    g->window = (uint32_t)(w < 1 ? 1 : w > PM_CELLS - 1 ? PM_CELLS - 1 : w);
    // c_lo = ⌈2^32/(W·E + G - W)⌉, then the window cells take what is left (at most E·c_lo
    // each), so fewer than W words are left over.
    double e = mech_exp_below(eps), w_d = g->window, rest_cells = PM_CELLS - w_d;
    double c_lo = ceil(4294967296.0 / (w_d * e + rest_cells));
    double c_hi = floor((4294967296.0 - rest_cells * c_lo) / w_d);
    c_hi = fmin(c_hi, floor(e * c_lo));
    if (!(c_lo >= 1) || !(c_hi > c_lo))
        return fp_fail(err, FP_EPARAM, "%s.epsilon: the safe pm sampler has no grid for epsilon %g", m->spec.path, eps);
    g->c_lo = (uint32_t)c_lo;
    g->c_hi = (uint32_t)c_hi;
    g->win_words = g->window * g->c_hi;
    g->all_words = (uint32_t)((double)g->win_words + (double)(PM_CELLS - g->window) * c_lo);
    g->inv_hi = 1.0 / c_hi;
    g->inv_lo = 1.0 / c_lo;
    g->scale = 4294967296.0 * PM_CELLS / ((c_hi - c_lo) * g->window * m->big_c * (PM_CELLS - g->window));
    m->eps_proven = fmin(eps, log(c_hi / c_lo));
    m->delta_proven = 0;
    return FP_OK;
}

// Output of cell k: fmaf(f_a, k, f_b) = c + r·s·(-C + (k + ½)·2C/G) (in float); the centre
// f_c for the words past all_words.
static void pm_safe_set_range(Mech *m) {
    const MechPmGrid *g = &m->tab.pm;
    double step = m->r * g->scale * 2 * m->big_c / g->cells;
    m->f_a = (float)step;
    m->f_b = (float)(m->c + m->r * g->scale * (-m->big_c + m->big_c / g->cells));
    m->f_e = (float)(1.0 / m->r);
    m->f_d = (float)(0.5 * (g->cells - g->window));
}

static inline float pm_safe_kernel(float x, uint32_t wa, uint32_t wb, float lo, float hi, float c, float inv_r,
                                   float half_gw, int gw, uint32_t window, uint32_t win_words, uint32_t all_words,
                                   double inv_hi, double inv_lo, float step, float base) {
    float t = (mech_clipf(x, lo, hi) - c) * inv_r;
    uint32_t a = (uint32_t)mech_round_random((t + 1.0f) * half_gw, gw, wb >> 8, 24);
    int win = wa < win_words;
    uint32_t j = mech_div_exact(wa - (win ? 0u : win_words), win ? inv_hi : inv_lo);
    uint32_t k = win ? a + j : j + (j >= a ? window : 0u);
    float y = fmaf(step, (float)k, base);
    return wa < all_words ? y : c;
}

#define PM_SAFE_ARGS(m)                                                                                              \
    (m)->f_lo, (m)->f_hi, (m)->f_c, (m)->f_e, (m)->f_d, (int)((m)->tab.pm.cells - (m)->tab.pm.window),             \
        (m)->tab.pm.window, (m)->tab.pm.win_words, (m)->tab.pm.all_words, (m)->tab.pm.inv_hi, (m)->tab.pm.inv_lo,  \
        (m)->f_a, (m)->f_b

static float pm_safe_one(const Mech *m, float x, const uint32_t w[4], int j) {
    return pm_safe_kernel(x, w[2 * j], w[2 * j + 1], PM_SAFE_ARGS(m));
}

// 16 blocks = 32 elements: element 2l takes words 0, 1 of block l, element 2l+1 words 2, 3.
// The kernel in passes that each vectorise (the window's place, the exact division in
// double, the cell and its float output): the same operations as pm_safe_kernel.
static inline void pm_safe_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t ea[32], eb[32], num[32], j[32];
    int a[32];
    double inv[32];
    philox16_interleave2(&w[0], &w[2], ea);
    philox16_interleave2(&w[1], &w[3], eb);
    const float lo = m->f_lo, hi = m->f_hi, c = m->f_c, ir = m->f_e, hg = m->f_d, step = m->f_a, base = m->f_b;
    const MechPmGrid g = m->tab.pm;
    const int gw = (int)(g.cells - g.window);
    for (int i = 0; i < 32; i++) {
        float t = (mech_clipf(x[i], lo, hi) - c) * ir;
        a[i] = mech_round_random((t + 1.0f) * hg, gw, eb[i] >> 8, 24);
        int win = ea[i] < g.win_words;
        num[i] = ea[i] - (win ? 0u : g.win_words);
        inv[i] = win ? g.inv_hi : g.inv_lo;
    }
    for (int i = 0; i < 32; i++)
        j[i] = mech_div_exact(num[i], inv[i]);
    for (int i = 0; i < 32; i++) {
        uint32_t au = (uint32_t)a[i];
        uint32_t k_out = j[i] + (j[i] >= au ? g.window : 0u);   // the cells after the window
        uint32_t k = ea[i] < g.win_words ? au + j[i] : k_out;
        float y = fmaf(step, (float)k, base);
        x[i] = ea[i] < g.all_words ? y : c;
    }
}

static void pm_safe_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, pm_safe_chunk);
}

static void pm_safe_law(const Mech *m, double x, MechLaw *law) {
    const MechPmGrid *g = &m->tab.pm;
    const double two32 = 4294967296.0, gw = g->cells - g->window;
    double step = m->r * g->scale * 2 * m->big_c / g->cells;
    double base = m->c + m->r * g->scale * (-m->big_c + m->big_c / g->cells);
    float t = (mech_input(m, x) - m->f_c) * m->f_e;
    int a[2];
    double p_hi;
    mech_round_law((t + 1.0f) * m->f_d, (int)gw, 24, &a[0], &a[1], &p_hi);
    law->n = 0;
    for (int i = 0; i < 2; i++) {
        double wt = i ? p_hi : 1 - p_hi;
        if (wt <= 0)
            continue;
        law->p[law->n++] = (LawPiece){LAW_GRID, wt * g->win_words / two32, base + step * a[i], step, g->window, NULL};
        if (a[i] > 0)
            law->p[law->n++] = (LawPiece){LAW_GRID, wt * a[i] * (double)g->c_lo / two32, base, step, a[i], NULL};
        if (a[i] < gw)
            law->p[law->n++] = (LawPiece){LAW_GRID, wt * (gw - a[i]) * g->c_lo / two32,
                                          base + step * (a[i] + g->window), step, (long)(gw - a[i]), NULL};
    }
    if (g->all_words < 0xffffffffu)
        law->p[law->n++] = (LawPiece){.kind = LAW_ATOM, .weight = (two32 - g->all_words) / two32, .a = m->c};
}

static double pm_safe_mean(const Mech *m, double x) {
    MechLaw law;
    pm_safe_law(m, x, &law);
    return law_mean(&law);
}

static double pm_safe_variance(const Mech *m, double x) {
    MechLaw law;
    pm_safe_law(m, x, &law);
    return law_central_moment(&law, 2);
}

// Every cell has probability c_hi/2^32 or c_lo/2^32 >= 2^-32 at every input: y is
// possible iff it is one of the cells' float outputs, or the centre.
static int pm_safe_possible(const Mech *m, double x, float y) {
    (void)x;
    if (y == m->f_c && m->tab.pm.all_words < 0xffffffffu)
        return 1;
    double k0 = round(((double)y - m->f_b) / m->f_a);
    for (double k = k0 - 2; k <= k0 + 2; k++)
        if (k >= 0 && k < m->tab.pm.cells && fmaf(m->f_a, (float)k, m->f_b) == y)
            return 1;
    return 0;
}

static const MechSampler pm_safe = {
    .kind = MECH_SAMPLER_SAFE,
    .elements_per_block = 2,
    .exact = 1,
    .setup = pm_safe_setup,
    .set_range = pm_safe_set_range,
    .one = pm_safe_one,
    .perturb_fast = pm_safe_perturb_fast,
    .mean = pm_safe_mean,
    .variance = pm_safe_variance,
    .law = pm_safe_law,
    .possible = pm_safe_possible,
};

static const MechSampler pm_float = {
    .kind = MECH_SAMPLER_FLOAT,
    .elements_per_block = 4,
    .exact = 0,
    .setup = pm_float_setup,
    .set_range = pm_float_set_range,
    .one = pm_float_one,
    .perturb_fast = pm_float_perturb_fast,
    .mean = pm_float_mean,
    .variance = pm_float_variance,
    .law = pm_float_law,
    .possible = pm_float_possible,
};

const MechOps mech_pm = {
    .name = "pm",
    .summary = "Piecewise Mechanism (Wang et al. ICDE 2019)",
    .range = MECH_RANGE_NATIVE,
    .safe = &pm_safe,
    .fp = &pm_float,
};
