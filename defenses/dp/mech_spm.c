// SPM, the Symmetric Piecewise (or Partition) Mechanism of Chen & Zheng, Electronics
// 2024, 13, 4091, as its Algorithm 2 runs it (digest: shared spec spm.md §1.2):
//   keep the sign of ω with probability e^ε/(e^ε+1), flip it otherwise;
//   t* ~ U[1, C] with that sign;  output k·|ω|·t*.
// Variants (u = e^ε):
//   paper      C = (u+1)/(u-1) (Eq. 3), k = 1. E = ω·u/(u+1): biased (the proof (A3)
//              integrates the unnormalised pdf of Eq. 4, whose mass is 1 + e^-ε).
//   corrected  the same draw scaled by k = 1 + e^-ε = (u+1)/u: unbiased (digest Fix A).
//   pnpm       C = (u+3)/(u-1), k = 1: unbiased, and its variance 4(u+1/3)/(u-1)²·ω² is
//              the one the paper quotes for PNPM (digest Fix B; a reconstruction).
// ω = 0 is output as 0. The guarantee is ε-LDP on the sign only: the output reveals |ω|
// within a factor C (digest §0), so the audits compare inputs ±1.
//
// Safe sampler (the default; one word per element): t* takes the centre of one of G equal
// cells of [1, C] (G a power of two); w < G·c_keep keeps the sign with cell ⌊w/c_keep⌋,
// the other G·c_flip words flip it with cell ⌊(w - G·c_keep)/c_flip⌋, where each cell's
// 2^32/G words split into c_flip = ⌈(2^32/G)/(u+1)⌉ and c_keep = the rest (u rounded down):
// at ±ω every output has probability c_keep/2^32 at one sign and c_flip/2^32 at the
// other, c_keep <= u·c_flip, so the sign is exactly ε-LDP. G = 2^16, fewer at large ε so
// that c_flip >= 2^20 (one cell from ε = 8.3 on, where C - 1 < 5e-4). k is set so that the
// discretised law has the variant's mean exactly: k = 1 (paper) or
// 2^32/((c_keep - c_flip)·G·(1 + C)/2) ≈ the variant's k.
// Float sampler ("sampler": "float", the pre-grid one): the word's place inside its part
// is the position in float, so kept and flipped outputs lie on different float grids.
#include <math.h>

#include "defenses/dp/mech_internal.h"

static void spm_constants(Mech *m) {
    double u = m->u;
    m->big_c = m->spec.variant == MV_PNPM ? (u + 3) / (u - 1) : (u + 1) / (u - 1);
    m->k = m->spec.variant == MV_CORRECTED ? (u + 1) / u : 1.0;
}

// ---- float ----------------------------------------------------------------------------

static FpStatus spm_float_setup(Mech *m, FpError *err) {
    (void)err;
    spm_constants(m);
    double thr = floor(m->u / (m->u + 1) * 4294967296.0);
    m->thr = (uint32_t)thr;
    m->p_keep = thr / 4294967296.0;
    m->f_sk = (float)(1.0 / thr);
    m->f_sf = (float)(1.0 / (4294967296.0 - thr));
    m->f_a = (float)m->k;
    m->f_b = (float)(m->k * (m->big_c - 1));
    m->eps_proven = m->delta_proven = INFINITY;
    return FP_OK;
}

// w < thr keeps the sign, and the position inside [1, C] is the word's place inside its
// part: (w/thr) when kept, ((w - thr)/(2^32 - thr)) when flipped. y = ±x·(k + k(C-1)·u).
static inline float spm_kernel(float x, uint32_t w, uint32_t thr, float sk, float sf, float a, float b) {
    int keep = w < thr;
    uint32_t ww = keep ? w : w - thr;
    float sc = keep ? sk : sf;
    float sx = keep ? x : -x;
    float u = (float)ww * sc;
    return sx * fmaf(b, u, a);
}

static float spm_float_one(const Mech *m, float x, const uint32_t w[4], int j) {
    return spm_kernel(x, w[j], m->thr, m->f_sk, m->f_sf, m->f_a, m->f_b);
}

static inline void spm_float_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t e[64];
    philox16_interleave4(w, e);
    const uint32_t thr = m->thr;
    const float sk = m->f_sk, sf = m->f_sf, a = m->f_a, b = m->f_b;
    for (int i = 0; i < 64; i++)
        x[i] = spm_kernel(x[i], e[i], thr, sk, sf, a, b);
}

static void spm_float_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, spm_float_chunk);
}

static double spm_float_mean(const Mech *m, double x) {
    double u = m->u;
    return m->spec.variant == MV_PAPER ? x * u / (u + 1) : x;
}

// Closed forms of the digest's §1.3 (per unit ω²).
static double spm_float_variance(const Mech *m, double x) {
    double u = m->u, x2 = x * x;
    switch (m->spec.variant) {
    case MV_PAPER: return x2 * ((3 * u * u + 1) / (3 * (u - 1) * (u - 1)) - u * u / ((u + 1) * (u + 1)));
    case MV_PNPM: return x2 * 4 * (u + 1.0 / 3) / ((u - 1) * (u - 1));
    default: return x2 * (4 * u + (u + 1) * (u + 1) / (3 * u * u)) / ((u - 1) * (u - 1));
    }
}

// The paper's Eq. (A17)/(A21): below the lower bound 4u/(u-1)² of any unbiased ε-LDP
// estimator of a sign, so impossible (digest §1.3); reported for the paper variant.
static double spm_variance_claimed(const Mech *m, double x) {
    if (m->spec.variant != MV_PAPER)
        return NAN;
    double u = m->u;
    return x * x * (3 * u + 1 / (3 * u) - 2.0 / 3) / ((u - 1) * (u - 1));
}

static void spm_float_law(const Mech *m, double x, MechLaw *law) {
    if (x == 0) {
        law->n = 1;
        law->p[0] = (LawPiece){.kind = LAW_ATOM, .weight = 1};
        return;
    }
    double a = fabs(x) * m->k, b = a * m->big_c, s = x > 0 ? 1 : -1;
    law->n = 2;
    law->p[0] = (LawPiece){.kind = LAW_UNIFORM, .weight = m->p_keep, .a = s > 0 ? a : -b, .b = s > 0 ? b : -a};
    law->p[1] = (LawPiece){.kind = LAW_UNIFORM, .weight = 1 - m->p_keep, .a = s > 0 ? -b : a, .b = s > 0 ? -a : b};
}

// Within the kept words and within the flipped ones the output is monotone in w (the
// sign of ±x decides the direction; the key flips it to non-decreasing).
static float spm_float_key(const Mech *m, double x, uint64_t w) {
    float y = spm_kernel((float)x, (uint32_t)w, m->thr, m->f_sk, m->f_sf, m->f_a, m->f_b);
    int up = (w < m->thr) == ((float)x > 0);
    return up ? y : -y;
}

static int spm_float_possible(const Mech *m, double x, float y) {
    float xf = (float)x;
    if (xf == 0)
        return y == 0;
    const uint64_t parts[2][2] = {{0, (uint64_t)m->thr - 1}, {m->thr, 0xffffffffu}};
    for (int p = 0; p < 2; p++) {
        if (parts[p][1] < parts[p][0] || parts[p][1] > 0xffffffffu)
            continue;
        int up = (p == 0) == (xf > 0);
        float target = up ? y : -y;
        uint64_t w = mech_search_ge(m, x, parts[p][0], parts[p][1], target, spm_float_key);
        if (w <= parts[p][1] && spm_float_key(m, x, w) == target)
            return 1;
    }
    return 0;
}

// ---- safe -----------------------------------------------------------------------------

static FpStatus spm_safe_setup(Mech *m, FpError *err) {
    spm_constants(m);
    MechSpmGrid *g = &m->tab.spm;
    const double two32 = 4294967296.0, u = m->u, e = mech_exp_below(m->spec.eps);
    // G = a power of two <= 2^16 with at least 2^20 flipping words per cell (one cell at
    // ε >= 8.3); each cell's 2^32/G words split into c_flip = ⌈W/(E+1)⌉ and the rest.
    double cells = 65536;
    while (cells > 1 && two32 / cells / (u + 1) < 1048576)
        cells /= 2;
    double per_cell = two32 / cells, c_flip = ceil(per_cell / (e + 1)), c_keep = per_cell - c_flip;
    if (!(c_flip >= 1) || !(c_keep > c_flip) || c_keep > e * c_flip)
        return fp_fail(err, FP_EPARAM, "%s.epsilon: the safe spm sampler has no grid for epsilon %g", m->spec.path,
                       m->spec.eps);
    g->cells = (uint32_t)cells;
    g->c_keep = (uint32_t)c_keep;
    g->c_flip = (uint32_t)c_flip;
    g->keep_words = (uint32_t)(cells * c_keep);
    g->inv_keep = 1 / c_keep;
    g->inv_flip = 1 / c_flip;
    if (m->spec.variant != MV_PAPER)
        m->k = two32 / ((c_keep - c_flip) * cells * (1 + m->big_c) / 2);
    m->p_keep = g->keep_words / two32;
    // Cell j's factor k·(1 + (C-1)(j + ½)/G) = fmaf(f_b, j, f_a).
    m->d_a = m->k * (1 + (m->big_c - 1) / (2 * cells));
    m->d_b = m->k * (m->big_c - 1) / cells;
    m->f_a = (float)m->d_a;
    m->f_b = (float)m->d_b;
    m->eps_proven = fmin(m->spec.eps, log(c_keep / c_flip));
    m->delta_proven = 0;
    return FP_OK;
}

static inline float spm_safe_kernel(float x, uint32_t w, uint32_t keep_words, double inv_keep, double inv_flip,
                                    float a, float b) {
    int keep = w < keep_words;   // selects, not branches: the chunk loop vectorises
    uint32_t j = mech_div_exact(w - (keep ? 0u : keep_words), keep ? inv_keep : inv_flip);
    return (keep ? x : -x) * fmaf(b, (float)j, a);
}

static float spm_safe_one(const Mech *m, float x, const uint32_t w[4], int j) {
    const MechSpmGrid *g = &m->tab.spm;
    return spm_safe_kernel(x, w[j], g->keep_words, g->inv_keep, g->inv_flip, m->f_a, m->f_b);
}

// The kernel in three passes that each vectorise (a branch-free word split, the exact
// division in double, the float product): the same operations as spm_safe_kernel.
static inline void spm_safe_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t e[64], num[64], j[64];
    double inv[64];
    philox16_interleave4(w, e);
    const MechSpmGrid g = m->tab.spm;
    const float a = m->f_a, b = m->f_b;
    for (int i = 0; i < 64; i++) {
        int keep = e[i] < g.keep_words;
        num[i] = e[i] - (keep ? 0u : g.keep_words);
        inv[i] = keep ? g.inv_keep : g.inv_flip;
    }
    for (int i = 0; i < 64; i++)
        j[i] = mech_div_exact(num[i], inv[i]);
    for (int i = 0; i < 64; i++)
        x[i] = (e[i] < g.keep_words ? x[i] : -x[i]) * fmaf(b, (float)j[i], a);
}

static void spm_safe_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, spm_safe_chunk);
}

static void spm_safe_law(const Mech *m, double x, MechLaw *law) {
    const MechSpmGrid *g = &m->tab.spm;
    const double two32 = 4294967296.0, ax = fabs((double)(float)x);
    if (ax == 0) {
        law->n = 1;
        law->p[0] = (LawPiece){.kind = LAW_ATOM, .weight = 1};
        return;
    }
    // Positive side: |x|·(d_a + d_b j), negative side: the mirror, first atom the largest.
    double first = ax * m->d_a, step = ax * m->d_b, last = first + step * (g->cells - 1);
    double w_pos = ((float)x > 0 ? g->keep_words : two32 - g->keep_words) / two32;
    law->n = 2;
    law->p[0] = (LawPiece){LAW_GRID, w_pos, first, step, g->cells, NULL};
    law->p[1] = (LawPiece){LAW_GRID, 1 - w_pos, -last, step, g->cells, NULL};
}

static double spm_safe_mean(const Mech *m, double x) {
    MechLaw law;
    spm_safe_law(m, x, &law);
    return law_mean(&law);
}

static double spm_safe_variance(const Mech *m, double x) {
    MechLaw law;
    spm_safe_law(m, x, &law);
    return law_central_moment(&law, 2);
}

// At x != 0 both signs have positive probability on every cell: y is possible iff it is
// ±x times a cell's factor.
static int spm_safe_possible(const Mech *m, double x, float y) {
    float xf = (float)x;
    if (xf == 0)
        return y == 0;
    for (int s = 0; s < 2; s++) {
        float sx = s ? -xf : xf;
        double j0 = round(((double)y / sx - m->f_a) / m->f_b);
        for (double j = j0 - 2; j <= j0 + 2; j++)
            if (j >= 0 && j < m->tab.spm.cells && sx * fmaf(m->f_b, (float)j, m->f_a) == y)
                return 1;
    }
    return 0;
}

static const MechSampler spm_safe = {
    .kind = MECH_SAMPLER_SAFE,
    .elements_per_block = 4,
    .exact = 1,
    .setup = spm_safe_setup,
    .one = spm_safe_one,
    .perturb_fast = spm_safe_perturb_fast,
    .mean = spm_safe_mean,
    .variance = spm_safe_variance,
    .law = spm_safe_law,
    .possible = spm_safe_possible,
};

static const MechSampler spm_float = {
    .kind = MECH_SAMPLER_FLOAT,
    .elements_per_block = 4,
    .exact = 0,
    .setup = spm_float_setup,
    .one = spm_float_one,
    .perturb_fast = spm_float_perturb_fast,
    .mean = spm_float_mean,
    .variance = spm_float_variance,
    .law = spm_float_law,
    .possible = spm_float_possible,
};

const MechOps mech_spm = {
    .name = "spm",
    .summary = "SPM (Chen & Zheng 2024) on the sign and magnitude of each scalar",
    .variants = "corrected,paper,pnpm",
    .range = MECH_RANGE_NONE,
    .safe = &spm_safe,
    .fp = &spm_float,
    .variance_claimed = spm_variance_claimed,
};
