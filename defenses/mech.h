// Scalar local-DP mechanisms: the table behind the local-DP defenses and `fedpriv audit`.
//
// Each mechanism maps one input x to a randomised output, coordinate by coordinate:
//   spm               Symmetric Piecewise/Partition Mechanism (Chen & Zheng 2024, Alg. 2);
//                     any real input. variants: corrected (default; output ×(1+e^-ε),
//                     unbiased), paper (Alg. 2 as printed: biased by e^ε/(e^ε+1)), pnpm
//                     (C = (e^ε+3)/(e^ε-1): the digest's reconstruction of PNPM).
//   duchi             Duchi et al. 2018 one-dimensional mechanism; input domain [-1,1].
//   pm                Piecewise Mechanism (Wang et al. ICDE 2019); input domain [-1,1].
//   ldp-fl            Sun et al. IJCAI 2021 (Adaptive-Duchi, Eq. 9 of the Harmony paper):
//                     values clipped into [c-r, c+r], output c ± r(e^ε+1)/(e^ε-1).
//   laplace           x + Lap(Δ/ε), Δ = hi - lo of the clipping range.
//   gaussian          x + N(0, σ²) with σ for (ε, δ) and Δ = hi - lo. variants: analytic
//                     (default; Balle & Wang 2018 Thm 8, exact for every ε), classic
//                     (Dwork & Roth Thm A.1, σ = Δ√(2 ln(1.25/δ))/ε, only for ε < 1).
//   adaptive-harmony  Zhao et al. 2022, Alg. 2, seen per coordinate of a unit of d scalars:
//                     with prob. 1/d the coordinate is the sampled one and becomes
//                     c ± d·r·κ; otherwise the fill. variants: corrected (default; fill
//                     c, unbiased), paper (Eq. 12's zero fill: biased by -c(1-1/d)). The
//                     defense (defenses/adaptive_harmony.c) samples exactly one
//                     coordinate per unit; this marginal law is what one coordinate sees.
//   rr                randomised response on the sign, output ±1: an audit self-test.
//                     variants: standard (default), broken (keeps the sign with the
//                     probability for 2ε while claiming ε: the audit must catch it).
//
// Input ranges. Bounded mechanisms clip x into [lo, hi] first ("clip": C means
// [-C, C]; "range": [lo, hi]) and work on t = (x - c)/r ∈ [-1, 1], c = (lo+hi)/2,
// r = (hi-lo)/2, mapping the output back with c + r·t*. Clipping is part of the
// mechanism: the closed-form mean is that of the clipped input. duchi and pm have the
// native domain [-1, 1] (the audit's default; a defense must state its range);
// ldp-fl, laplace, gaussian and adaptive-harmony need a range; spm and rr take none.
//
// Randomness (the same on every backend). Element i of a perturbed buffer takes the
// 32-bit word (i mod 4) of Philox block ⌊i/4⌋ of the stream (core/rng.h rng_block):
// one block serves four consecutive elements, so the draw of element i depends only on
// (stream, i). Every mechanism but gaussian uses one word per element; gaussian pairs
// the words of a block for Box-Muller: (w0, w1) give elements 4b and 4b+1 (cos, sin),
// (w2, w3) give 4b+2 and 4b+3. Four elements per block rather than one: a Philox-4x32-10
// block costs about as much as the whole perturbation, and one block per element caps
// the loop near 550 M elements/s on an AVX-512 core (bench/run-perturb.sh), below the
// 1000 M/s target.
//
// Float formulas. spm, pm, laplace and gaussian compute in float with explicit fmaf()
// and otherwise single IEEE operations, each correctly rounded (no libm calls: log is
// the atanh series after musl's reduction, sin/cos are Cephes polynomials on
// [-π/4, π/4), the square root is IEEE sqrt). A GPU twin reproduces them bit for bit
// with the same formulas, __fmaf_rn for each fmaf, IEEE division and square root (nvcc's
// defaults) and no other contraction (nvcc -fmad=false); such a twin matched the CPU
// oracle bit for bit for spm, gaussian, laplace and pm on an H200.
// This file's C must be compiled without FP contraction (-std=c11 gives
// -ffp-contract=off); the tests check the fast loops against a per-element oracle.
// The two-point mechanisms (duchi, ldp-fl, rr, adaptive-harmony) decide with a 32-bit
// threshold computed in double, so that probabilities as small as 1/(e^ε+1) keep a
// relative error below 1e-5 for ε ≤ 15 (hence ε ≤ 15 here).
#ifndef FEDPRIV_DEFENSES_MECH_H
#define FEDPRIV_DEFENSES_MECH_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"

#define MECH_EPS_MAX 15.0
// The smallest ε an audit takes: below it the noise scales (1/ε, 1/(e^ε - 1)) leave
// float range and there is nothing to measure (1e-320 is a number, not a budget an audit
// can sample). A defense takes any ε > 0: an upload that is no longer finite is reported
// as divergence.
#define MECH_EPS_MIN 1e-9

typedef enum {
    MECH_SPM = 0,
    MECH_DUCHI,
    MECH_PM,
    MECH_LDPFL,
    MECH_LAPLACE,
    MECH_GAUSSIAN,
    MECH_HARMONY,
    MECH_RR,
    MECH_KIND_COUNT
} MechKind;

typedef enum {
    MV_NONE = 0,      // the mechanism has no variants
    MV_CORRECTED,     // spm, adaptive-harmony (default)
    MV_PAPER,         // spm, adaptive-harmony
    MV_PNPM,          // spm
    MV_ANALYTIC,      // gaussian (default)
    MV_CLASSIC,       // gaussian
    MV_STANDARD,      // rr (default)
    MV_BROKEN,        // rr
    MV_COUNT
} MechVariant;

typedef enum {
    MECH_RANGE_NONE = 0,    // takes no range (spm, rr)
    MECH_RANGE_NATIVE,      // [-1, 1] unless given (duchi, pm); a defense must give one
    MECH_RANGE_REQUIRED,    // ldp-fl, laplace, gaussian, adaptive-harmony
} MechRangeNeed;

typedef struct MechInfo {
    MechKind kind;
    const char *name;
    const char *summary;
    const char *variants;   // comma-separated, default first; NULL when none
    MechRangeNeed range;
    int audit_only;         // 1 for rr: not a defense
} MechInfo;

int mech_info_count(void);
const MechInfo *mech_info_at(int i);
const MechInfo *mech_info_find(const char *name);
const MechInfo *mech_info(MechKind kind);
const char *mech_variant_name(MechVariant v);   // "" for MV_NONE

// What a user asked for (parsed and range-checked, not yet resolved).
typedef struct MechSpec {
    MechKind kind;
    MechVariant variant;
    double eps;
    double delta;           // gaussian only (default 1e-5), else 0
    int has_range;          // lo, hi given (or native)
    double lo, hi;
    int range_per_layer;    // defense: "range": "layer" (c, r from the round's global layer)
    double min_radius;      // with range_per_layer: floor on r (default 1e-3)
    long dim;               // adaptive-harmony: unit size d of the scalar law (default 10, <= 10^6)
    char path[96];          // JSON path of the mechanism's object, for later messages
} MechSpec;

// Flags for mech_spec_parse.
#define MECH_PARSE_AUDIT 0
#define MECH_PARSE_DEFENSE 1  // bounded mechanisms need "clip"/"range"; "layer" ranges allowed
                              // (ldp-fl, adaptive-harmony); no "dim"

// Reads {"name", "variant", "epsilon", "delta", "clip", "range", "dim", ...} from obj
// (path names it in messages). Unknown keys fail unless listed in extra_keys
// (NULL-terminated, may be NULL): the caller reads those. Errors (FP_EPARAM) name the
// JSON path: "defense.variant: unknown value ...", "defense.epsilon: must be in (0, 15]
// ...", "defense.range: ldp-fl needs an input range ...".
FpStatus mech_spec_parse(const cJSON *obj, const char *path, int flags, const char *const *extra_keys,
                         MechSpec *out, FpError *err);

// A resolved mechanism: the spec plus derived constants (double for the closed forms,
// float and 32-bit thresholds for the kernels). Plain data: copy it freely.
typedef struct Mech {
    MechSpec spec;
    double c, r;            // centre and radius of the input range (0, 1 when none)
    double u;               // e^ε
    double big_c;           // spm: C; pm: C; two-point: B = κ = (e^ε+1)/(e^ε-1)
    double p_keep;          // spm, pm, rr: probability of keeping the sign / the centre piece
    double k;               // spm: output scale (1 or 1 + e^-ε)
    double sigma;           // gaussian: noise std; laplace: scale b
    // kernel constants
    uint32_t thr;           // P(keep) = thr / 2^32 (spm, pm, rr)
    float f_lo, f_hi;       // clipping range in float
    float f_c, f_r;
    float f_a, f_b, f_d, f_e;      // per-family (see mech_*.c)
    float f_sk, f_sf;       // 1/thr and 1/(2^32 - thr): position inside the kept / flipped part
    double d_a, d_b, d_c, d_d;   // per-family double constants
} Mech;

// Resolves a spec. FP_EPARAM (naming spec->path) when the combination is impossible
// (e.g. classic gaussian with ε >= 1). A range_per_layer spec starts with [-1, 1];
// call mech_set_range before use.
FpStatus mech_init(Mech *m, const MechSpec *spec, FpError *err);
// Replaces the input range (hi > lo) and recomputes the derived constants.
void mech_set_range(Mech *m, double lo, double hi);

// Perturbs x[0..n) in place; x[i] is element (first + i) of the stream's index space
// (see "Randomness" above). The fast path: vectorised Philox and kernels.
void mech_perturb(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
// The plain oracle: one rng_block call per element, the scalar formula. Bit-identical
// to mech_perturb.
void mech_perturb_ref(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
// One element from its block's 4 words: element j (0..3) of the block.
float mech_perturb_one(const Mech *m, float x, const uint32_t w[4], int j);

// Closed forms from the papers (and the digests' corrections), at input x (clipped
// as the mechanism clips it).
double mech_mean(const Mech *m, double x);
double mech_variance(const Mech *m, double x);
// The variance a paper claims, when it differs from the truth (spm paper: Eq. A17/A21),
// else NAN.
double mech_variance_claimed(const Mech *m, double x);
// x clipped into the mechanism's input range (x itself when it has none).
double mech_clip(const Mech *m, double x);

// The output law at input x: a mixture of at most MECH_LAW_MAX pieces.
typedef enum { LAW_ATOM = 0, LAW_UNIFORM, LAW_LAPLACE, LAW_NORMAL } LawPieceKind;
typedef struct LawPiece {
    LawPieceKind kind;
    double weight;
    double a, b;            // atom: at a; uniform: [a, b]; laplace: loc a, scale b; normal: mean a, sd b
} LawPiece;
#define MECH_LAW_MAX 4
typedef struct MechLaw {
    int n;
    LawPiece p[MECH_LAW_MAX];
} MechLaw;

void mech_law(const Mech *m, double x, MechLaw *law);
double law_mean(const MechLaw *law);
// Central moment of order k in {2, 3, 4}.
double law_central_moment(const MechLaw *law, int k);
// P[lo <= Y < hi] (lo may be -INFINITY, hi INFINITY).
double law_prob(const MechLaw *law, double lo, double hi);

// Adaptive-Harmony on one unit of d scalars, as Alg. 2 of Zhao et al. 2022 runs it
// (m's range is the unit's [c - r, c + r]): j ~ U{0..d-1} and the sign come from seq
// (sequential draws); every scalar becomes the fill (c for corrected, 0 for paper, as
// Eq. 12 prints it) and scalar j becomes c ± d·r·κ, with + at probability
// 1/2 + t_j/(2κ), t_j = (clip(w_j) - c)/r. Returns j. d must be < 2^32.
size_t mech_harmony_unit(const Mech *m, float *w, size_t d, RngStream *seq);

// The inputs an audit uses by default: the extremes of the input range, or ±1.
void mech_default_inputs(const Mech *m, double *x0, double *x1);

#endif
