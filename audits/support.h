// The support audit of a scalar mechanism (`fedpriv audit --test support`): can every
// output drawn at one input occur at the other?
//
// For each ordered pair of inputs (x, x') it draws N outputs at x (stream (seed, RNG_AUDIT,
// pair, 2), element-indexed as mech_perturb draws them) and decides exactly, for each
// output y, whether y can occur at x' (mech_possible: the safe samplers' exact laws, and
// exact inverse searches over the random words for the float spm, pm and laplace). If the
// mechanism is ε-DP, P[M(x') = y] >= e^-ε P[M(x) = y] > 0 for every y that M(x) can output,
// so a single output that cannot occur at x' refutes every finite ε: the lower bound is
// infinite and the audit fails. For an (ε, δ) mechanism such outputs must have probability
// at most δ: it fails when the Clopper-Pearson lower bound on their share exceeds δ.
// Interval histograms (audits/mechanism.h) cannot see this: the impossible outputs sit
// next to possible ones (Mironov 2012).
//
// Witness confirmation (confirm = 1, one-word samplers: spm, pm, laplace float; rr, duchi,
// ldp-fl, harmony): the first impossible output is checked against all 2^32 words at x',
// an exhaustive proof independent of the inverse search (tens of seconds).
#ifndef FEDPRIV_AUDITS_SUPPORT_H
#define FEDPRIV_AUDITS_SUPPORT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "audits/mechanism.h"
#include "core/status.h"
#include "defenses/dp/mech.h"

typedef struct SupportConfig {
    long long samples;      // outputs per ordered pair (default 10^5)
    uint64_t seed;          // default 1
    double alpha;           // the share's two-sided Clopper-Pearson level (default 0.05)
    const double *inputs;   // NULL: the mechanism's default pair (mech_default_inputs)
    int n_inputs;
    int confirm;            // 1: exhaustive check of the first witness over 2^32 words
    FILE *progress;         // the draws' progress (audit_progress_start); NULL: silent
} SupportConfig;

SupportConfig support_config_default(void);

typedef struct SupportPair {
    int from, to;           // indices into the inputs
    long long drawn;
    long long impossible;   // -1: the sampler cannot decide
    double share, share_lo, share_hi;   // impossible / drawn with its Clopper-Pearson interval
    int has_witness;
    float witness;          // an output at inputs[from] that cannot occur at inputs[to]
    int confirmed;          // -1 not checked; 1 no word gives it at inputs[to]; 0 one does (a bug)
    uint32_t contradiction; // the word when confirmed = 0
} SupportPair;

#define SUPPORT_MAX_PAIRS (AUDIT_MAX_INPUTS * (AUDIT_MAX_INPUTS - 1))

typedef struct SupportResult {
    int n_inputs;
    double inputs[AUDIT_MAX_INPUTS];   // as given
    int n_pairs;
    SupportPair pair[SUPPORT_MAX_PAIRS];
    long long samples;
    uint64_t seed;
    double delta;                      // the mechanism's δ (0 for pure ε)
    int decidable;                     // 0 when the sampler cannot decide (the float gaussian)
    long long impossible;              // over all pairs
    double epsilon_lower_bound;        // INFINITY when an impossible output refutes every ε, else 0
    int pass;                          // decidable, and no impossible share above δ
    double seconds;
} SupportResult;

// FP_EPARAM for a bad config (samples < 1, fewer than 2 or more than AUDIT_MAX_INPUTS
// inputs, a non-finite input, alpha outside (0, 1)).
FpStatus audit_support(const Mech *m, const SupportConfig *cfg, SupportResult *res, FpError *err);
// The result as JSON (infinities as "inf").
cJSON *audit_support_json(const SupportResult *r);

#endif
