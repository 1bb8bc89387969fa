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
// within a factor C (digest §0), so the audit compares inputs ±1.
#include <math.h>

#include "defenses/mech_internal.h"

void spm_setup(Mech *m) {
    double u = m->u;
    m->big_c = m->spec.variant == MV_PNPM ? (u + 3) / (u - 1) : (u + 1) / (u - 1);
    m->k = m->spec.variant == MV_CORRECTED ? (u + 1) / u : 1.0;
    double thr = floor(u / (u + 1) * 4294967296.0);
    m->thr = (uint32_t)thr;
    m->p_keep = thr / 4294967296.0;
    m->f_sk = (float)(1.0 / thr);
    m->f_sf = (float)(1.0 / (4294967296.0 - thr));
    m->f_a = (float)m->k;
    m->f_b = (float)(m->k * (m->big_c - 1));
}

// One word: w < thr keeps the sign, and the position inside [1, C] is the word's place
// inside its part: (w/thr) when kept, ((w - thr)/(2^32 - thr)) when flipped. So
// y = ±x · (k + k(C-1)·u), u ∈ [0, 1).
static inline float spm_kernel(float x, uint32_t w, uint32_t thr, float sk, float sf, float a, float b) {
    int keep = w < thr;
    uint32_t ww = keep ? w : w - thr;
    float sc = keep ? sk : sf;
    float sx = keep ? x : -x;
    float u = (float)ww * sc;
    return sx * fmaf(b, u, a);
}

float spm_one(const Mech *m, float x, uint32_t w) {
    return spm_kernel(x, w, m->thr, m->f_sk, m->f_sf, m->f_a, m->f_b);
}

static inline void spm_chunk(const Mech *m, float *restrict x, const MechU32x16 w[4]) {
    uint32_t e[64];
    mech_interleave16(w, e);
    const uint32_t thr = m->thr;
    const float sk = m->f_sk, sf = m->f_sf, a = m->f_a, b = m->f_b;
    for (int i = 0; i < 64; i++)
        x[i] = spm_kernel(x[i], e[i], thr, sk, sf, a, b);
}

void spm_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, x, n, s, first, spm_chunk);
}

double spm_mean(const Mech *m, double x) {
    double u = m->u;
    return m->spec.variant == MV_PAPER ? x * u / (u + 1) : x;
}

// Closed forms of the digest's §1.3 (per unit ω²).
double spm_variance(const Mech *m, double x) {
    double u = m->u, x2 = x * x;
    switch (m->spec.variant) {
    case MV_PAPER: return x2 * ((3 * u * u + 1) / (3 * (u - 1) * (u - 1)) - u * u / ((u + 1) * (u + 1)));
    case MV_PNPM: return x2 * 4 * (u + 1.0 / 3) / ((u - 1) * (u - 1));
    default: return x2 * (4 * u + (u + 1) * (u + 1) / (3 * u * u)) / ((u - 1) * (u - 1));
    }
}

// The paper's Eq. (A17)/(A21): below the lower bound 4u/(u-1)² of any unbiased ε-LDP
// estimator of a sign, so impossible (digest §1.3); reported for the paper variant.
double spm_variance_claimed(const Mech *m, double x) {
    if (m->spec.variant != MV_PAPER)
        return NAN;
    double u = m->u;
    return x * x * (3 * u + 1 / (3 * u) - 2.0 / 3) / ((u - 1) * (u - 1));
}

void spm_law(const Mech *m, double x, MechLaw *law) {
    if (x == 0) {
        law->n = 1;
        law->p[0] = (LawPiece){LAW_ATOM, 1, 0, 0};
        return;
    }
    double a = fabs(x) * m->k, b = a * m->big_c, s = x > 0 ? 1 : -1;
    law->n = 2;
    law->p[0] = (LawPiece){LAW_UNIFORM, m->p_keep, s > 0 ? a : -b, s > 0 ? b : -a};
    law->p[1] = (LawPiece){LAW_UNIFORM, 1 - m->p_keep, s > 0 ? -b : a, s > 0 ? -a : b};
}
