// Two-point mechanisms: the output is one of two values.
//   duchi   Duchi, Jordan, Wainwright (JASA 2018), one-dimensional: t ∈ [-1, 1] gives
//           +B with probability 1/2 + t/(2B), else -B, B = (e^ε+1)/(e^ε-1). Unbiased,
//           Var = B² - t² (SPM digest §3).
//   ldp-fl  Sun et al. (IJCAI 2021), Eq. (9) of the Harmony paper: the same law on
//           t = (w - c)/r for w clipped into [c - r, c + r], output c ± r·B. Unbiased,
//           Var = r²(B² - t²). The range is per layer in the defense.
//   rr      randomised response on the sign of x (x >= 0 is +1): keep it with
//           probability e^ε/(e^ε+1), output ±1; E = sign(x)(2p - 1). Variant broken uses
//           e^{2ε}/(e^{2ε}+1) while claiming ε: a mechanism the audit must reject.
// The decision compares the element's word with a 32-bit threshold computed in double.
#include <math.h>

#include "defenses/mech_internal.h"

void twopoint_setup(Mech *m) {
    double u = m->u;
    if (m->spec.kind == MECH_RR) {
        double v = m->spec.variant == MV_BROKEN ? u * u : u;
        double thr = floor(v / (v + 1) * 4294967296.0);
        m->thr = (uint32_t)thr;
        m->p_keep = thr / 4294967296.0;
        m->d_a = v / (v + 1);   // the probability actually used (for the closed forms)
        return;
    }
    m->big_c = (u + 1) / (u - 1);
    m->d_a = 0.5 / m->big_c;
    m->d_b = m->c;
    m->d_c = 1.0 / m->r;
    m->f_a = (float)(m->c + m->r * m->big_c);
    m->f_b = (float)(m->c - m->r * m->big_c);
}

// 2^32 · P(+B) for the clipped input: floor, so P is rounded down by < 2^-32.
static inline double twopoint_threshold(double xc, double c, double inv_r, double half_over_b) {
    double t = (xc - c) * inv_r;
    return floor((t * half_over_b + 0.5) * 4294967296.0);
}

static inline float twopoint_kernel(float x, uint32_t w, float lo, float hi, double c, double inv_r,
                                    double half_over_b, float out_hi, float out_lo) {
    float xc = mech_clipf(x, lo, hi);
    double t = ((double)xc - c) * inv_r;
    uint32_t thr = (uint32_t)((t * half_over_b + 0.5) * 4294967296.0);
    return w < thr ? out_hi : out_lo;
}

static inline float rr_kernel(float x, uint32_t w, uint32_t thr) {
    float t = x >= 0 ? 1.0f : -1.0f;
    return w < thr ? t : -t;
}

float twopoint_one(const Mech *m, float x, uint32_t w) {
    if (m->spec.kind == MECH_RR)
        return rr_kernel(x, w, m->thr);
    return twopoint_kernel(x, w, m->f_lo, m->f_hi, m->d_b, m->d_c, m->d_a, m->f_a, m->f_b);
}

static inline void twopoint_chunk(const Mech *m, float *restrict x, const MechU32x16 w[4]) {
    uint32_t e[64];
    mech_interleave16(w, e);
    if (m->spec.kind == MECH_RR) {
        const uint32_t thr = m->thr;
        for (int i = 0; i < 64; i++)
            x[i] = rr_kernel(x[i], e[i], thr);
        return;
    }
    const float lo = m->f_lo, hi = m->f_hi, oh = m->f_a, ol = m->f_b;
    const double c = m->d_b, ir = m->d_c, hb = m->d_a;
    for (int i = 0; i < 64; i++)
        x[i] = twopoint_kernel(x[i], e[i], lo, hi, c, ir, hb, oh, ol);
}

void twopoint_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, x, n, s, first, twopoint_chunk);
}

double twopoint_mean(const Mech *m, double x) {
    if (m->spec.kind == MECH_RR)
        return (x >= 0 ? 1 : -1) * (2 * m->d_a - 1);
    return mech_clip(m, x);
}

double twopoint_variance(const Mech *m, double x) {
    if (m->spec.kind == MECH_RR) {
        double e = 2 * m->d_a - 1;
        return 1 - e * e;
    }
    double t = (mech_clip(m, x) - m->c) / m->r;
    return m->r * m->r * (m->big_c * m->big_c - t * t);
}

void twopoint_law(const Mech *m, double x, MechLaw *law) {
    law->n = 2;
    if (m->spec.kind == MECH_RR) {
        double t = x >= 0 ? 1 : -1;
        law->p[0] = (LawPiece){LAW_ATOM, m->p_keep, t, 0};
        law->p[1] = (LawPiece){LAW_ATOM, 1 - m->p_keep, -t, 0};
        return;
    }
    double xc = (double)mech_clipf((float)x, m->f_lo, m->f_hi);
    double p = twopoint_threshold(xc, m->d_b, m->d_c, m->d_a) / 4294967296.0;
    law->p[0] = (LawPiece){LAW_ATOM, p, m->f_a, 0};
    law->p[1] = (LawPiece){LAW_ATOM, 1 - p, m->f_b, 0};
}
