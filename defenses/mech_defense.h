// The shared body of the local-DP defenses that perturb every trainable scalar of an
// upload independently with one scalar mechanism of defenses/dp/mech.h: spm, duchi, pm,
// ldp-fl, laplace and gaussian (defenses/<name>.c are their DefenseOps tables). The
// parameters are the mechanism's (see mech_spec_parse) plus
//   "upload": "weights" (default: SPM's Alg. 1 perturbs the trained weights), "delta" or
//             "gradient": what the client perturbs;
//   "range": "layer" (ldp-fl): each layer's [c - r, c + r] is the [min, max] of that layer
//             in the round's global model (public), r at least "min_radius" (1e-3).
//   "sampler": "safe" (default) or "float" (spm, pm, laplace, gaussian; defenses/dp/mech.h).
// Element i of the upload draws from Philox block ⌊i/e⌋ of &round->rng (mech.h), so the
// noise does not depend on the layer loop or the thread that runs the client.
// Privacy: the unit is one scalar. The nominal ε is the paper's per scalar per round
// (total: rounds × ε). The sound total is the whole upload's: d scalars by sequential
// composition, each round (a client may take part in every round): d·rounds·ε for the
// ε-LDP mechanisms; for gaussian the discrete Gaussian on the upload (zCDP with
// sensitivity N grid steps per scalar, mech_upload_epsilon) at the configured δ; none for
// spm, which protects the sign only (its magnitude is revealed within a factor C).
// Guarantee: "proven" with the safe sampler (its exact law is the one the bound is about);
// "none" with the float sampler (the reason, with the measured share of outputs at the
// range's upper end that cannot occur at its lower end, is in the assumptions);
// "conditional" when the model also uploads untrainable data-dependent scalars (batch-norm
// running statistics), which travel unperturbed.
#ifndef FEDPRIV_DEFENSES_MECH_DEFENSE_H
#define FEDPRIV_DEFENSES_MECH_DEFENSE_H

#include "fl/defense.h"
#include "defenses/dp/mech.h"

typedef struct MechDefense {
    Mech mech;
    UploadKind upload;
    int n_layers;
    ParamLayer *layers;     // a copy of the table's layers
    size_t d;               // trainable scalars per upload
    int n_units;            // trainable layers
    int self_sampling;      // adaptive-harmony only
    size_t raw;             // untrainable scalars uploaded as they are (batch-norm statistics)
    char reason[512];       // why a float sampler proves nothing (measured at creation)
    char raw_note[200];     // the assumption about the raw scalars
} MechDefense;

// Parses params for mechanism `mech` (path e.g. "defense"); extra_keys are the
// defense's own keys besides "upload" (NULL-terminated, may be NULL).
FpStatus mech_defense_create(const MechOps *mech, const cJSON *params, const char *path, const DefenseSetup *setup,
                             const char *const *extra_keys, MechDefense **out, FpError *err);
// 1 when key is one mech_defense_create accepts for mech with extra_keys (DefenseOps.takes_param).
int mech_defense_takes(const MechOps *mech, const char *const *extra_keys, const char *key);
void mech_defense_destroy(void *state);
UploadKind mech_defense_upload_kind(const void *state);
// The mechanism for layer l in this round: the configured one, or with the layer's
// range from the round's global weights ("range": "layer").
FpStatus mech_defense_layer_mech(const MechDefense *d, int l, const DefenseRound *round, Mech *out, FpError *err);
FpStatus mech_defense_perturb(void *state, float *upload, const DefenseRound *round, FpError *err);
void mech_defense_privacy(const void *state, int rounds_done, PrivacyRecord *rec);
// Sets rec's bound and guarantee from the sampler and the upload: proven_total (the
// mechanism's bound over the rounds, INFINITY when none) with guarantee proven, the raw
// scalars' assumption when the upload carries any (so defense_privacy() settles it as
// conditional), or guarantee none with the float sampler's reason.
void mech_defense_guarantee(const MechDefense *d, double proven_total, PrivacyRecord *rec);
// States the bound for two uploads of one client that differ in one coordinate (after
// mech_defense_guarantee; ∞ when the whole upload has none): what a training audit's
// one-coordinate canary tests.
void mech_defense_coordinate(PrivacyRecord *rec, double epsilon_total, const char *notion);
FpStatus mech_defense_describe(const void *state, cJSON *out);
// UploadParams: the mechanism's name, ε per scalar, its range's half-width as the clip
// ("range"), and as the noise scale the Laplace b or Gaussian σ, or for the other
// mechanisms the largest output std over the range (at an end or the centre: their
// variances are quadratic in the input); for spm, which takes no range, its std at
// input 1 (the noise grows with |x|). Layer ranges: the largest over the layers.
void mech_defense_upload_params(const void *state, const DefenseRound *round, UploadParams *out);

#endif
