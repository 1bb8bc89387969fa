// rr: randomised response on the sign of x (x >= 0 is +1), output ±1: the audits'
// self-test. Keep the sign with probability thr/2^32, thr = ⌊e^ε/(e^ε+1)·2^32⌋ (so the
// exact ratio thr/(2^32 - thr) is at most e^ε); E = sign(x)(2p - 1). Variant broken keeps
// it with the probability for 2ε while claiming ε: a mechanism the audits must reject
// (its eps_proven is the 2ε it really spends).
#include <math.h>

#include "defenses/dp/mech_internal.h"

static FpStatus rr_setup(Mech *m, FpError *err) {
    (void)err;
    double v = m->spec.variant == MV_BROKEN ? m->u * m->u : m->u;
    double thr = floor(v / (v + 1) * 4294967296.0);
    m->thr = (uint32_t)thr;
    m->p_keep = thr / 4294967296.0;
    m->eps_proven = log(thr / (4294967296.0 - thr));
    m->delta_proven = 0;
    return FP_OK;
}

static inline float rr_kernel(float x, uint32_t w, uint32_t thr) {
    float t = x >= 0 ? 1.0f : -1.0f;
    return w < thr ? t : -t;
}

static float rr_one(const Mech *m, float x, const uint32_t w[4], int j) { return rr_kernel(x, w[j], m->thr); }

static inline void rr_chunk(const Mech *m, const void *ctx, float *restrict x, const PhiloxU32x16 w[4]) {
    uint32_t e[64];
    philox16_interleave4(w, e);
    const uint32_t thr = m->thr;
    for (int i = 0; i < 64; i++)
        x[i] = rr_kernel(x[i], e[i], thr);
}

static void rr_perturb_fast(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    mech_drive(m, NULL, x, n, s, first, rr_chunk);
}

static void rr_law(const Mech *m, double x, MechLaw *law) {
    double t = (float)x >= 0 ? 1 : -1;
    law->n = 2;
    law->p[0] = (LawPiece){.kind = LAW_ATOM, .weight = m->p_keep, .a = t};
    law->p[1] = (LawPiece){.kind = LAW_ATOM, .weight = 1 - m->p_keep, .a = -t};
}

static double rr_mean(const Mech *m, double x) { return ((float)x >= 0 ? 1 : -1) * (2 * m->p_keep - 1); }

static double rr_variance(const Mech *m, double x) {
    double e = 2 * m->p_keep - 1;
    return 1 - e * e;
}

static int rr_possible(const Mech *m, double x, float y) {
    MechLaw law;
    rr_law(m, x, &law);
    return mech_law_has_atom(&law, y);
}

static const MechSampler rr_sampler = {
    .kind = MECH_SAMPLER_SAFE,
    .elements_per_block = 4,
    .exact = 1,
    .setup = rr_setup,
    .one = rr_one,
    .perturb_fast = rr_perturb_fast,
    .mean = rr_mean,
    .variance = rr_variance,
    .law = rr_law,
    .possible = rr_possible,
};

const MechOps mech_rr = {
    .name = "rr",
    .summary = "randomised response on the sign (audit self-test; variant broken claims eps, uses 2 eps)",
    .variants = "standard,broken",
    .range = MECH_RANGE_NONE,
    .audit_only = 1,
    .safe = &rr_sampler,
};
