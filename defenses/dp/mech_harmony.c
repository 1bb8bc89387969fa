// Adaptive-Harmony (Zhao et al., Electronics 2022, 11, 4007; digest: shared spec
// adaptive-harmony.md §1.3-1.4). Per unit of d scalars with public centre c and radius r,
// κ = (e^ε+1)/(e^ε-1), t = (w - c)/r clipped into [-1, 1]:
//   j ~ U{0..d-1};  s = +1 with probability 1/2 + t_j/(2κ), else -1;
//   W*[j] = c + s·d·r·κ;  W*[i≠j] = fill.
// Eq. (10) is the law of W*[j] given that j was picked; per coordinate the law is
//   c + d·r·κ w.p. p/d,  c - d·r·κ w.p. (1-p)/d,  fill w.p. 1 - 1/d.
// Variants: corrected fills with c (Alg. 2 line 1): unbiased, Var = r²(dκ² - t²) (Eq. 18);
// paper fills with 0 (Eq. 12's matrix): E = w - c(1 - 1/d), biased unless c = 0.
// The scalar functions here are that per-coordinate law (what `fedpriv audit` samples:
// one word against the thresholds ⌊(t·hb + ½)/d·2^32⌋ and ⌊2^32/d⌋); mech_harmony_unit
// is the per-unit mechanism the defense runs (j by rng_next_below, the sign by one word
// against ⌊(t·hb₁ + ½)·2^32⌋). Both slopes are calibrated like the two-point mechanisms'
// (mech_twopoint_calibrate), so both laws are exactly ε-LDP: the unit's output (j, sign)
// has P = (1/d)·P(sign | t_j), and the ratio of the sign's probabilities is within e^ε.
// Per-family fields: d_a = hb (scalar law), k = hb₁ (unit), f_a/f_b the two extreme
// outputs, f_d the fill.
#include <math.h>

#include "defenses/dp/mech_internal.h"

static FpStatus harmony_setup(Mech *m, FpError *err) {
    (void)err;
    if (m->spec.dim < 1)
        m->spec.dim = 1;
    m->big_c = (m->u + 1) / (m->u - 1);
    return FP_OK;
}

static void harmony_set_range(Mech *m) {
    double d = (double)m->spec.dim;
    m->f_a = (float)(m->c + d * m->r * m->big_c);
    m->f_b = (float)(m->c - d * m->r * m->big_c);
    m->f_d = m->spec.variant == MV_PAPER ? 0.0f : (float)m->c;
    mech_twopoint_calibrate(m, 1);
    m->k = m->d_a;
    double eps_unit = m->eps_proven;
    mech_twopoint_calibrate(m, d);
    m->eps_proven = fmax(m->eps_proven, eps_unit);
}

// 2^32 · P[output c + dκr] for the input.
static uint32_t harmony_plus(const Mech *m, float x) {
    double t = ((double)mech_clipf(x, m->f_lo, m->f_hi) - m->d_b) * m->d_c;
    return (uint32_t)((t * m->d_a + 0.5) / (double)m->spec.dim * 4294967296.0);
}

static float harmony_one(const Mech *m, float x, const uint32_t w[4], int j) {
    uint32_t plus = harmony_plus(m, x);
    return w[j] < plus ? m->f_a : (double)w[j] < m->d_d ? m->f_b : m->f_d;
}

static void harmony_law(const Mech *m, double x, MechLaw *law) {
    double plus = harmony_plus(m, (float)x) / 4294967296.0, any = m->d_d / 4294967296.0;
    law->n = 3;
    law->p[0] = (LawPiece){.kind = LAW_ATOM, .weight = plus, .a = m->f_a};
    law->p[1] = (LawPiece){.kind = LAW_ATOM, .weight = any - plus, .a = m->f_b};
    law->p[2] = (LawPiece){.kind = LAW_ATOM, .weight = 1 - any, .a = m->f_d};
}

// The closed forms of the digest (the law's moments differ from them by the 2^-32
// thresholds only).
static double harmony_mean(const Mech *m, double x) {
    double xc = mech_clip(m, x);
    return m->spec.variant == MV_PAPER ? xc - m->c * (1 - 1.0 / (double)m->spec.dim) : xc;
}

static double harmony_variance(const Mech *m, double x) {
    double d = (double)m->spec.dim, c = m->c, r = m->r, k = m->big_c;
    double t = (mech_clip(m, x) - c) / r;
    double v = r * r * (d * k * k - t * t);   // Eq. (18)
    if (m->spec.variant == MV_PAPER)
        v += c * c * (d - 1) / (d * d) + 2 * c * r * t * (d - 1) / d;
    return v;
}

static int harmony_possible(const Mech *m, double x, float y) {
    MechLaw law;
    harmony_law(m, x, &law);
    return mech_law_has_atom(&law, y);
}

size_t mech_harmony_unit(const Mech *m, float *w, size_t d, RngStream *seq) {
    uint32_t j = rng_next_below(seq, (uint32_t)d);
    uint32_t word = rng_next_u32(seq);
    uint32_t plus = mech_twopoint_threshold(mech_clipf(w[j], m->f_lo, m->f_hi), m->c, 1.0 / m->r, m->k);
    double s = word < plus ? 1.0 : -1.0;
    float fill = m->spec.variant == MV_PAPER ? 0.0f : (float)m->c;
    float val = (float)(m->c + s * (double)d * m->r * m->big_c);
    for (size_t i = 0; i < d; i++)
        w[i] = fill;
    w[j] = val;
    return j;
}

static const MechSampler harmony_sampler = {
    .kind = MECH_SAMPLER_SAFE,
    .elements_per_block = 4,
    .exact = 1,
    .setup = harmony_setup,
    .set_range = harmony_set_range,
    .one = harmony_one,
    .mean = harmony_mean,
    .variance = harmony_variance,
    .law = harmony_law,
    .possible = harmony_possible,
};

const MechOps mech_harmony = {
    .name = "adaptive-harmony",
    .summary = "Adaptive-Harmony (Zhao et al. 2022): one sampled scalar per unit",
    .variants = "corrected,paper",
    .range = MECH_RANGE_REQUIRED,
    .takes_dim = 1,
    .layer_range = 1,
    .safe = &harmony_sampler,
};
