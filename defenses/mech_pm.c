// The Piecewise Mechanism of Wang et al. (ICDE 2019), as the SPM digest §3 and the
// Harmony digest §3 restate it. Input t = (x - c)/r ∈ [-1, 1] (x clipped), h = e^{ε/2}:
//   C = (h+1)/(h-1),  l(t) = (C+1)/2·t - (C-1)/2,  r(t) = l(t) + C - 1;
//   with probability h/(h+1) output U[l, r], else U([-C, l) ∪ (r, C]);
//   the density ratio between the two parts is h² = e^ε.
// Unbiased; Var = r²·(t²/(h-1) + (h+3)/(3(h-1)²)). Output c + r·t*.
#include <math.h>

#include "defenses/mech_internal.h"

void pm_setup(Mech *m) {
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
    m->f_e = (float)(1.0 / m->r);
}

// One word: w < thr picks the centre piece, and the word's place inside its part is
// the position: centre l + (C-1)u; otherwise v = (C+1)u runs over [-C, l) then (r, C].
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
    float y = mech_bits_f((mech_f_bits(yk) & mk) | (mech_f_bits(yf) & ~mk));
    return fmaf(r, y, c);
}

float pm_one(const Mech *m, float x, uint32_t w) {
    return pm_kernel(x, w, m->f_lo, m->f_hi, m->f_c, m->f_r, m->f_e, m->f_a, m->f_b, m->f_d, m->thr, m->f_sk,
                     m->f_sf);
}

static inline void pm_chunk(const Mech *m, float *restrict x, const MechU32x16 w[4]) {
    uint32_t e[64];
    mech_interleave16(w, e);
    const float lo = m->f_lo, hi = m->f_hi, c = m->f_c, r = m->f_r, ir = m->f_e, a = m->f_a, b = m->f_b,
                bc = m->f_d, sk = m->f_sk, sf = m->f_sf;
    const uint32_t thr = m->thr;
    for (int i = 0; i < 64; i++)
        x[i] = pm_kernel(x[i], e[i], lo, hi, c, r, ir, a, b, bc, thr, sk, sf);
}

void pm_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, x, n, s, first, pm_chunk);
}

double pm_mean(const Mech *m, double x) { return mech_clip(m, x); }

double pm_variance(const Mech *m, double x) {
    double h = m->d_a, t = (mech_clip(m, x) - m->c) / m->r;
    return m->r * m->r * (t * t / (h - 1) + (h + 3) / (3 * (h - 1) * (h - 1)));
}

void pm_law(const Mech *m, double x, MechLaw *law) {
    double C = m->big_c, t = (mech_clip(m, x) - m->c) / m->r;
    double l = (C + 1) / 2 * t - (C - 1) / 2, rt = l + C - 1, q = 1 - m->p_keep;
    double c = m->c, r = m->r;
    law->n = 3;
    law->p[0] = (LawPiece){LAW_UNIFORM, q * (l + C) / (C + 1), c - r * C, c + r * l};
    law->p[1] = (LawPiece){LAW_UNIFORM, m->p_keep, c + r * l, c + r * rt};
    law->p[2] = (LawPiece){LAW_UNIFORM, q * (C - rt) / (C + 1), c + r * rt, c + r * C};
}
