// Two-point mechanisms: the output is one of two fixed values.
//   duchi   Duchi, Jordan, Wainwright (JASA 2018), one-dimensional: t ∈ [-1, 1] gives
//           +B with probability 1/2 + t/(2B), else -B, B = (e^ε+1)/(e^ε-1). Unbiased,
//           Var = B² - t² (SPM digest §3).
//   ldp-fl  Sun et al. (IJCAI 2021), Eq. (9) of the Harmony paper: the same law on
//           t = (w - c)/r for w clipped into [c - r, c + r], output c ± r·B. Unbiased,
//           Var = r²(B² - t²). The range is per layer in the defense.
// One sampler, exact: the decision compares the element's word with the 32-bit threshold
// ⌊(t·hb + ½)·2^32⌋, t computed in double from the float input, and hb (ideally 1/(2B))
// is set so that the exact thresholds at the two ends of the float range keep both
// ratios P(+|hi)/P(+|lo) and P(-|lo)/P(-|hi) within e^ε (mech_twopoint_calibrate). The law
// is then exactly ε-LDP; its mean is c + rB(2p - 1) with p the threshold over 2^32, which
// differs from the clipped input by less than 10^-9 of r.
#include <math.h>

#include "defenses/dp/mech_internal.h"

void mech_twopoint_calibrate(Mech *m, double d) {
    const double two32 = 4294967296.0;
    const double top = floor(two32 / d);     // words of the two signs together
    double eps = m->spec.eps, E = exp(eps);
    double t_lo = ((double)m->f_lo - m->c) / m->r, t_hi = ((double)m->f_hi - m->c) / m->r;
    // The largest slope that meets both ratios in real arithmetic, then shrink until the
    // integers do (ideally hb = 1/(2B) and t = ±1 meet both with equality).
    double hb = 0.5 / m->big_c;
    double h1 = 0.5 * (E - 1) / (t_hi - E * t_lo), h2 = 0.5 * (E - 1) / (E * t_hi - t_lo);
    hb = fmin(hb, fmin(h1, h2));
    double plus_lo, plus_hi;
    for (;;) {
        plus_lo = floor((t_lo * hb + 0.5) / d * two32);
        plus_hi = floor((t_hi * hb + 0.5) / d * two32);
        if (plus_lo > 0 && mech_ratio_within(plus_hi, plus_lo, eps) && mech_ratio_within(top - plus_lo, top - plus_hi, eps))
            break;
        hb *= 1 - 0x1p-30;
    }
    m->d_a = hb;
    m->d_b = m->c;
    m->d_c = 1.0 / m->r;
    m->d_d = top;
    double e1 = log(plus_hi / plus_lo), e2 = log((top - plus_lo) / (top - plus_hi));
    m->eps_proven = fmin(eps, fmax(e1, e2));
    m->delta_proven = 0;
}

static FpStatus twopoint_setup(Mech *m, FpError *err) {
    (void)err;
    m->big_c = (m->u + 1) / (m->u - 1);
    return FP_OK;
}

static void twopoint_set_range(Mech *m) {
    m->f_a = (float)(m->c + m->r * m->big_c);
    m->f_b = (float)(m->c - m->r * m->big_c);
    mech_twopoint_calibrate(m, 1);
}

static inline float twopoint_kernel(float x, uint32_t w, float lo, float hi, double c, double inv_r, double hb,
                                    float out_hi, float out_lo) {
    return w < mech_twopoint_threshold(mech_clipf(x, lo, hi), c, inv_r, hb) ? out_hi : out_lo;
}

static float twopoint_one(const Mech *m, float x, const uint32_t w[4], int j) {
    return twopoint_kernel(x, w[j], m->f_lo, m->f_hi, m->d_b, m->d_c, m->d_a, m->f_a, m->f_b);
}

static inline void twopoint_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t e[64];
    philox16_interleave4(w, e);
    const float lo = m->f_lo, hi = m->f_hi, oh = m->f_a, ol = m->f_b;
    const double c = m->d_b, ir = m->d_c, hb = m->d_a;
    for (int i = 0; i < 64; i++)
        x[i] = twopoint_kernel(x[i], e[i], lo, hi, c, ir, hb, oh, ol);
}

static void twopoint_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, twopoint_chunk);
}

static void twopoint_law(const Mech *m, double x, MechLaw *law) {
    float xc = mech_input(m, x);
    double p = (double)mech_twopoint_threshold(xc, m->d_b, m->d_c, m->d_a) / 4294967296.0;
    law->n = 2;
    law->p[0] = (LawPiece){.kind = LAW_ATOM, .weight = p, .a = m->f_a};
    law->p[1] = (LawPiece){.kind = LAW_ATOM, .weight = 1 - p, .a = m->f_b};
}

static double twopoint_mean(const Mech *m, double x) {
    MechLaw law;
    twopoint_law(m, x, &law);
    return law_mean(&law);
}

static double twopoint_variance(const Mech *m, double x) {
    MechLaw law;
    twopoint_law(m, x, &law);
    return law_central_moment(&law, 2);
}

static int twopoint_possible(const Mech *m, double x, float y) {
    MechLaw law;
    twopoint_law(m, x, &law);
    return mech_law_has_atom(&law, y);
}

static const MechSampler twopoint_sampler = {
    .kind = MECH_SAMPLER_SAFE,
    .elements_per_block = 4,
    .exact = 1,
    .setup = twopoint_setup,
    .set_range = twopoint_set_range,
    .one = twopoint_one,
    .perturb_fast = twopoint_perturb_fast,
    .mean = twopoint_mean,
    .variance = twopoint_variance,
    .law = twopoint_law,
    .possible = twopoint_possible,
};

const MechOps mech_duchi = {
    .name = "duchi",
    .summary = "Duchi et al. one-dimensional mechanism, output ±(e^eps+1)/(e^eps-1)",
    .range = MECH_RANGE_NATIVE,
    .safe = &twopoint_sampler,
};

const MechOps mech_ldp_fl = {
    .name = "ldp-fl",
    .summary = "LDP-FL (Sun et al. IJCAI 2021): c ± r(e^eps+1)/(e^eps-1) per scalar",
    .range = MECH_RANGE_REQUIRED,
    .layer_range = 1,
    .safe = &twopoint_sampler,
};
