// Adaptive-Harmony (Zhao et al., Electronics 2022, 11, 4007; digest: shared spec
// adaptive-harmony.md §1.3-1.4). Per unit of d scalars with public centre c and radius r,
// κ = (e^ε+1)/(e^ε-1), t = (w - c)/r clipped into [-1, 1]:
//   j ~ U{0..d-1};  s = +1 with probability 1/2 + t_j/(2κ), else -1;
//   W*[j] = c + s·d·r·κ;  W*[i≠j] = fill.
// Eq. (10) is the law of W*[j] given that j was picked; per coordinate the law is
//   c + d·r·κ w.p. p/d,  c - d·r·κ w.p. (1-p)/d,  fill w.p. 1 - 1/d.
// Variants: corrected fills with c (Alg. 2 line 1): unbiased, Var = r²(dκ² - t²) (Eq. 18);
// paper fills with 0 (Eq. 12's matrix): E = w - c(1 - 1/d), biased unless c = 0.
// The scalar functions here are that per-coordinate law (what `fedpriv audit` samples);
// mech_harmony_unit is the per-unit mechanism the defense runs.
#include <math.h>

#include "defenses/mech_internal.h"

void harmony_setup(Mech *m) {
    double u = m->u, d = (double)m->spec.dim;
    m->big_c = (u + 1) / (u - 1);
    m->d_a = 0.5 / m->big_c;
    m->d_b = m->c;
    m->d_c = 1.0 / m->r;
    m->d_d = floor(4294967296.0 / d);   // 2^32 · P[this coordinate is the sampled one]
    m->f_a = (float)(m->c + d * m->r * m->big_c);
    m->f_b = (float)(m->c - d * m->r * m->big_c);
    m->f_d = m->spec.variant == MV_PAPER ? 0.0f : (float)m->c;
}

// 2^32 · P[output c + dκr] for the clipped input.
static double harmony_plus_threshold(const Mech *m, float x) {
    double t = ((double)mech_clipf(x, m->f_lo, m->f_hi) - m->d_b) * m->d_c;
    return floor((t * m->d_a + 0.5) / (double)m->spec.dim * 4294967296.0);
}

float harmony_one(const Mech *m, float x, uint32_t w) {
    double plus = harmony_plus_threshold(m, x);
    return (double)w < plus ? m->f_a : (double)w < m->d_d ? m->f_b : m->f_d;
}

double harmony_mean(const Mech *m, double x) {
    double xc = mech_clip(m, x);
    return m->spec.variant == MV_PAPER ? xc - m->c * (1 - 1.0 / (double)m->spec.dim) : xc;
}

double harmony_variance(const Mech *m, double x) {
    double d = (double)m->spec.dim, c = m->c, r = m->r, k = m->big_c;
    double t = (mech_clip(m, x) - c) / r;
    double v = r * r * (d * k * k - t * t);   // Eq. (18)
    if (m->spec.variant == MV_PAPER)
        v += c * c * (d - 1) / (d * d) + 2 * c * r * t * (d - 1) / d;
    return v;
}

void harmony_law(const Mech *m, double x, MechLaw *law) {
    double plus = harmony_plus_threshold(m, (float)x) / 4294967296.0, any = m->d_d / 4294967296.0;
    law->n = 3;
    law->p[0] = (LawPiece){LAW_ATOM, plus, m->f_a, 0};
    law->p[1] = (LawPiece){LAW_ATOM, any - plus, m->f_b, 0};
    law->p[2] = (LawPiece){LAW_ATOM, 1 - any, m->f_d, 0};
}

size_t mech_harmony_unit(const Mech *m, float *w, size_t d, RngStream *seq) {
    uint32_t j = rng_next_below(seq, (uint32_t)d);
    double v = rng_next_uniform(seq);
    double t = ((double)mech_clipf(w[j], m->f_lo, m->f_hi) - m->c) / m->r;
    double s = v < 0.5 + t * 0.5 / m->big_c ? 1.0 : -1.0;
    float fill = m->spec.variant == MV_PAPER ? 0.0f : (float)m->c;
    float val = (float)(m->c + s * (double)d * m->r * m->big_c);
    for (size_t i = 0; i < d; i++)
        w[i] = fill;
    w[j] = val;
    return j;
}
