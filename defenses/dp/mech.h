// Scalar local-DP mechanisms: the table behind the local-DP defenses and `fedpriv audit`.
//
// Each mechanism maps one input x to a randomised output, coordinate by coordinate:
//   spm               Symmetric Piecewise/Partition Mechanism (Chen & Zheng 2024, Alg. 2);
//                     any real input. variants: corrected (default; unbiased), paper (Alg. 2
//                     as printed: biased by e^ε/(e^ε+1)), pnpm (C = (e^ε+3)/(e^ε-1): the
//                     digest's reconstruction of PNPM).
//   duchi             Duchi et al. 2018 one-dimensional mechanism; input domain [-1,1].
//   pm                Piecewise Mechanism (Wang et al. ICDE 2019); input domain [-1,1].
//   ldp-fl            Sun et al. IJCAI 2021 (Adaptive-Duchi, Eq. 9 of the Harmony paper):
//                     values clipped into [c-r, c+r], output c ± r(e^ε+1)/(e^ε-1).
//   laplace           x + Lap(Δ/ε), Δ = hi - lo of the clipping range.
//   gaussian          x + N(0, σ²) with σ for (ε, δ) and Δ = hi - lo. variants: analytic
//                     (default; Balle & Wang 2018 Thm 8), classic (Dwork & Roth Thm A.1,
//                     only for ε < 1).
//   adaptive-harmony  Zhao et al. 2022, Alg. 2, seen per coordinate of a unit of d scalars.
//                     variants: corrected (default; fill c, unbiased), paper (Eq. 12's zero
//                     fill). The defense (defenses/adaptive_harmony.c) runs the per-unit
//                     procedure (mech_harmony_unit); this marginal law is what one coordinate
//                     sees.
//   rr                randomised response on the sign, output ±1: an audit self-test.
//                     variants: standard (default), broken (keeps the sign with the
//                     probability for 2ε while claiming ε: the audits must catch it).
//
// Samplers ("sampler" in the mechanism's JSON object). Every mechanism has a safe sampler,
// the default: its exact output law is known to the code (mech_law), is the same law the
// privacy proof is about, and puts ratios within e^ε (or the (ε, δ) profile) between any
// two inputs, floating point included (docs/mechanisms.md derives each one):
//   two-point mechanisms (duchi, ldp-fl, rr, adaptive-harmony): two or three fixed outputs
//     chosen by a 32-bit threshold, the thresholds set so that their exact ratios stay
//     within e^ε;
//   laplace: a discrete Laplace on the grid lo + Λ(k + ½), the input rounded to the grid at
//     random (unbiased), the output clamped so that every input reaches every output;
//   gaussian: a discrete Gaussian on the grid lo + Λk (Canonne, Kamath, Steinke 2020),
//     clamped likewise, σ calibrated on the exact law of the 63-bit table;
//   pm: the piecewise law on G equal cells of [-C, C], the window of cells placed at
//     random between its two nearest positions, exact integer counts per cell;
//   spm: its magnitude factor t* on a grid of cells with exact counts (SPM is still
//     ε-LDP on the sign only).
// spm, pm, laplace and gaussian also keep the samplers they had before ("sampler":
// "float"), which draw in float32: their outputs lie on a float grid that moves with the
// input (Mironov 2012), so no ε holds for them and their defenses say guarantee "none".
// mech_possible decides whether an output can occur at an input (audits/support.h).
//
// Input ranges. Bounded mechanisms clip x into [lo, hi] first ("clip": C means
// [-C, C]; "range": [lo, hi]) and work on t = (x - c)/r ∈ [-1, 1], c = (lo+hi)/2,
// r = (hi-lo)/2, mapping the output back with c + r·t*. Clipping is part of the
// mechanism: the closed-form mean is that of the clipped input. duchi and pm have the
// native domain [-1, 1] (the audit's default; a defense must state its range);
// ldp-fl, laplace, gaussian and adaptive-harmony need a range; spm and rr take none.
//
// Randomness (the same on every backend). Element i of a perturbed buffer draws from
// Philox block ⌊i/e⌋ of the stream (core/rng.h rng_block), e = the sampler's elements per
// block: e = 4 uses word (i mod 4) (one word per element), e = 2 words 2(i mod 2) and
// 2(i mod 2)+1, e = 1 the whole block. So the draw of element i depends only on
// (stream, i), never on the loop split, the thread or the layer. The float Gaussian
// (e = 4) pairs the words of a block for Box-Muller: (w0, w1) give elements 4b and 4b+1,
// (w2, w3) give 4b+2 and 4b+3.
//
// Float formulas. The kernels compute in float with explicit fmaf() and otherwise single
// IEEE operations, each correctly rounded (no libm calls); the safe ones decide with
// integer arithmetic and exact integer divisions. This file's C must be compiled without
// FP contraction (-std=c11 gives -ffp-contract=off); the tests check the fast loops
// against the per-element oracle bit for bit.
#ifndef FEDPRIV_DEFENSES_DP_MECH_H
#define FEDPRIV_DEFENSES_DP_MECH_H

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

typedef enum { MECH_SAMPLER_SAFE = 0, MECH_SAMPLER_FLOAT = 1 } MechSamplerKind;

typedef struct Mech Mech;
typedef struct MechLaw MechLaw;
typedef struct MechOps MechOps;

// One way of drawing a mechanism's outputs, with what the code knows about its law.
typedef struct MechSampler {
    MechSamplerKind kind;
    int elements_per_block;     // 4, 2 or 1 (see "Randomness" above)
    int exact;                  // 1: `law` is the exact law of what `one` computes
    // Constants that depend on the spec but not on the range (tables, thresholds).
    FpStatus (*setup)(Mech *m, FpError *err);
    // Constants that depend on the range (m->spec.lo/hi, m->c, m->r are set). Optional.
    void (*set_range)(Mech *m);
    // Element j (0 <= j < elements_per_block) of a Philox block w.
    float (*one)(const Mech *m, float x, const uint32_t w[4], int j);
    // The fast loop, bit-identical to calling `one` element by element. Optional.
    void (*perturb_fast)(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
    // Mean and variance at input x (clipped as the mechanism clips it): the papers' closed
    // forms for the float samplers, the exact ones of the discretised law for the safe ones.
    double (*mean)(const Mech *m, double x);
    double (*variance)(const Mech *m, double x);
    void (*law)(const Mech *m, double x, MechLaw *law);
    // 1 when output y can occur at input x, 0 when it cannot, -1 when the sampler cannot
    // decide (the float Gaussian: 2^64 word pairs per output).
    int (*possible)(const Mech *m, double x, float y);
    // Samplers whose output is lo + Λ·(K + offset) for an integer K = clamp(n + J) (safe
    // laplace and gaussian): P(J >= j) of their noise (LAW_LATTICE pieces use it).
    double (*lattice_ge)(const Mech *m, long j);
    // ε of `units` scalars over `rounds` rounds at δ (mech_upload_epsilon); NULL: sequential
    // composition of eps_proven.
    double (*upload_epsilon)(const Mech *m, double units, double rounds, double delta);
} MechSampler;

// A mechanism: one file (defenses/mech_<name>.c) and one line in defenses/dp/mech.c's table.
struct MechOps {
    const char *name;
    const char *summary;
    const char *variants;       // comma-separated, default first; NULL when none
    MechRangeNeed range;
    int audit_only;             // 1 for rr: not a defense
    int takes_delta;            // "delta" (gaussian)
    int takes_dim;              // "dim" in an audit (adaptive-harmony)
    int layer_range;            // "range": "layer" in a defense (ldp-fl, adaptive-harmony)
    const MechSampler *safe;    // the default sampler
    const MechSampler *fp;      // the float sampler, NULL where the safe one is the only one
    // The variance a paper claims where it differs from the truth (spm paper), else NULL.
    double (*variance_claimed)(const Mech *m, double x);
};

extern const MechOps mech_spm, mech_duchi, mech_pm, mech_ldp_fl, mech_laplace, mech_gaussian, mech_harmony,
    mech_rr;

int mech_count(void);
const MechOps *mech_at(int i);
const MechOps *mech_find(const char *name);
const char *mech_variant_name(MechVariant v);   // "" for MV_NONE
const char *mech_sampler_name(MechSamplerKind k);   // "safe", "float"

// What a user asked for (parsed and range-checked, not yet resolved).
typedef struct MechSpec {
    const MechOps *ops;
    MechVariant variant;
    MechSamplerKind sampler;
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

// Reads {"name", "variant", "sampler", "epsilon", "delta", "clip", "range", "dim", ...} from
// obj (path names it in messages). Unknown keys fail unless listed in extra_keys
// (NULL-terminated, may be NULL): the caller reads those. Errors (FP_EPARAM) name the
// JSON path: "defense.variant: unknown value ...", "defense.epsilon: must be in (0, 15]
// ...", "defense.range: ldp-fl needs an input range ...", "defense.sampler: ...".
// 1 when key is one mech_spec_parse accepts in info's object (with those flags and extra_keys).
int mech_spec_takes(const MechOps *info, int flags, const char *const *extra_keys, const char *key);
FpStatus mech_spec_parse(const cJSON *obj, const char *path, int flags, const char *const *extra_keys,
                         MechSpec *out, FpError *err);

// ---- the safe samplers' tables (mech_laplace.c, mech_gaussian.c) ----------------------

#define MECH_TABLE_MAX 2048

// The discrete Laplace of the safe laplace sampler, in grid steps: J = y (sign bit 0) or
// -1-y (sign bit 1), y = #{i >= 1 : u < s[i]} for the element's 47-bit u; P(J >= y) =
// s[y]/2^48 for y >= 0 (s[0] = 2^47). Counts c(y) = s[y] - s[y+1] (s of ymax+1 = 0)
// satisfy c(y-1) <= e^{ε/N} c(y) by construction, and c(ymax) also holds the tail
// (docs/mechanisms.md). s_hi = s >> 15 serves the search (ties broken on the low bits).
typedef struct MechLaplaceTable {
    int n_grid;             // N: input grid steps across [lo, hi] (the sensitivity in steps)
    int ymax;               // largest |J + ½| - ½
    int levels;             // log2 of the padded table size (binary search depth)
    uint32_t s_hi[MECH_TABLE_MAX];
    uint64_t s[MECH_TABLE_MAX];
} MechLaplaceTable;

// A discrete Gaussian table N_Z(0, σ²) on 63-bit words (defenses/dp/dgauss.h).
typedef struct DGauss {
    double sigma;           // σ in grid units
    int ymax;               // support [-ymax, ymax]
    int levels;             // log2 of the padded threshold table size
    double variance;        // of the realised table
    double tv;              // total variation distance to the ideal N_Z(0, σ²), bounded above
    long double z;          // the ideal law's normaliser Σ_j exp(-j²/(2σ²))
    uint64_t cdf[MECH_TABLE_MAX];   // cdf[i] = Σ_{j < i - ymax} count(j), cdf[0] = 0; 2^63 past the end
} DGauss;

typedef struct MechGaussTable {
    int n_grid;             // N: grid steps across [lo, hi]
    double delta_scalar;    // the exact δ(ε) of one scalar under the realised table
    double rel_err;         // max |P_table(K)/P_ideal(K) - 1| over the clamped outputs K
    DGauss g;
} MechGaussTable;

// The safe pm sampler: G cells over [-C, C], a window of W cells with count c_hi per cell
// and c_lo for the others, rest words the centre (null output).
typedef struct MechPmGrid {
    uint32_t cells, window;     // G, W
    uint32_t c_hi, c_lo;        // words per window cell and per other cell
    uint32_t win_words, all_words;   // W·c_hi, W·c_hi + (G-W)·c_lo
    double inv_hi, inv_lo;      // 1/c_hi, 1/c_lo (exact floor((w + ½)/c))
    double scale;               // the unbiasing factor of the output (≈ 1)
} MechPmGrid;

// The safe spm sampler: G cells over [1, C] with c_keep words per cell keeping the sign and
// c_flip flipping it (G·(c_keep + c_flip) = 2^32).
typedef struct MechSpmGrid {
    uint32_t cells, c_keep, c_flip;
    uint32_t keep_words;    // G·c_keep
    double inv_keep, inv_flip;
} MechSpmGrid;

// A resolved mechanism: the spec plus derived constants (double for the closed forms,
// float and integer thresholds for the kernels). Plain data: copy it freely.
struct Mech {
    MechSpec spec;
    const MechSampler *sampler;
    double c, r;            // centre and radius of the input range (0, 1 when none)
    double u;               // e^ε
    double big_c;           // spm: C; pm: C; two-point: B = κ = (e^ε+1)/(e^ε-1)
    double p_keep;          // spm, pm, rr: probability of keeping the sign / the centre piece
    double k;               // spm: output scale
    double sigma;           // gaussian: noise std; laplace: scale b (of the ideal law)
    // The privacy the sampler's exact law guarantees per scalar (per sign for spm, per
    // unit's coordinate for the harmony scalar law): ε-DP, or (ε, δ) for gaussian.
    // INFINITY for the float samplers.
    double eps_proven, delta_proven;
    long lat_kmin, lat_kmax;       // lattice samplers: the output's integer range K ∈ [kmin, kmax]
    // kernel constants
    uint32_t thr;           // P(keep) = thr / 2^32 (float spm, float pm, rr)
    float f_lo, f_hi;       // clipping range in float
    float f_c, f_r;
    float f_a, f_b, f_d, f_e;      // per-family (see mech_*.c)
    float f_sk, f_sf;
    double d_a, d_b, d_c, d_d;     // per-family double constants
    union {
        MechLaplaceTable lap;
        MechGaussTable gauss;
        MechPmGrid pm;
        MechSpmGrid spm;
    } tab;
};

// Resolves a spec. FP_EPARAM (naming spec->path) when the combination is impossible
// (e.g. classic gaussian with ε >= 1, a safe sampler beyond its table). A
// range_per_layer spec starts with [-1, 1]; call mech_set_range before use.
FpStatus mech_init(Mech *m, const MechSpec *spec, FpError *err);
// Replaces the input range (hi > lo) and recomputes what depends on it (not the tables).
void mech_set_range(Mech *m, double lo, double hi);

// Perturbs x[0..n) in place; x[i] is element (first + i) of the stream's index space
// (see "Randomness" above). The fast path where the sampler has one.
void mech_perturb(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
// The plain oracle: one rng_block call per element, the scalar formula. Bit-identical
// to mech_perturb.
void mech_perturb_ref(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first);
// Element `index` of the stream at input x (what mech_perturb_ref computes for it).
float mech_draw_one(const Mech *m, float x, const RngStream *s, uint64_t index);

// Mean and variance at input x (clipped as the mechanism clips it), the paper's variance
// claim where it differs from the truth (spm paper: Eq. A17/A21, else NAN), and x clipped
// into the mechanism's input range (x itself when it has none).
double mech_mean(const Mech *m, double x);
double mech_variance(const Mech *m, double x);
double mech_variance_claimed(const Mech *m, double x);
double mech_clip(const Mech *m, double x);
// The input as the kernels see it: rounded to float, then clipped.
float mech_input(const Mech *m, double x);

// Whether output y can occur at input x: 1 yes, 0 no, -1 undecidable.
int mech_possible(const Mech *m, double x, float y);
// Draws n outputs at x_from (elements first..first+n-1 of stream s, as mech_perturb draws
// them) and counts those that cannot occur at x_to; *witness (may be NULL) is the first
// such output. -1 when the sampler cannot decide.
long long mech_support_check(const Mech *m, double x_from, double x_to, uint64_t first, long long n,
                             const RngStream *s, float *witness);

// The output law at input x: a mixture of at most MECH_LAW_MAX pieces.
typedef enum {
    LAW_ATOM = 0,   // at a
    LAW_UNIFORM,    // on [a, b]
    LAW_LAPLACE,    // location a, scale b
    LAW_NORMAL,     // mean a, sd b
    LAW_GRID,       // n equally likely atoms a, a + b, ..., a + (n-1)b (b > 0)
    LAW_LATTICE,    // atoms fmaf(m->f_b, k + a, m->f_lo) (as the kernels compute them in float),
                    // k ∈ [kmin, kmax], P(k) = the sampler's lattice law shifted by n
} LawPieceKind;
typedef struct LawPiece {
    LawPieceKind kind;
    double weight;
    double a, b;
    long n;                 // grid: atoms; lattice: the shift
    const Mech *m;          // lattice: whose table (valid while that Mech lives)
} LawPiece;
#define MECH_LAW_MAX 8
struct MechLaw {
    int n;
    LawPiece p[MECH_LAW_MAX];
};

void mech_law(const Mech *m, double x, MechLaw *law);
double law_mean(const MechLaw *law);
// Central moment of order k in {2, 3, 4}.
double law_central_moment(const MechLaw *law, int k);
// P[lo <= Y < hi] (lo may be -INFINITY, hi INFINITY).
double law_prob(const MechLaw *law, double lo, double hi);

// Adaptive-Harmony on one unit of d scalars, as Alg. 2 of Zhao et al. 2022 runs it
// (m's range is the unit's [c - r, c + r]): j ~ U{0..d-1} and the sign come from seq
// (sequential draws: rng_next_below, then one word against the two-point threshold of
// t_j); every scalar becomes the fill (c for corrected, 0 for paper, as Eq. 12 prints it)
// and scalar j becomes c ± d·r·κ. Returns j. d must be < 2^32.
size_t mech_harmony_unit(const Mech *m, float *w, size_t d, RngStream *seq);

// The inputs an audit uses by default: the extremes of the input range, or ±1.
void mech_default_inputs(const Mech *m, double *x0, double *x1);

// ε of `units` scalars (or signs, or units) of m over `rounds` rounds by sequential
// composition of eps_proven; for gaussian the upload-level (ε, δ) bound of
// mech_gaussian_upload_epsilon. INFINITY when the sampler proves nothing.
double mech_upload_epsilon(const Mech *m, double units, double rounds, double delta);

#endif
