// Who attacks a gradient-inversion target, and how a result counts (design notes: "Truth
// of a verdict", strongest attacker). Shared by the image attacks (dlg, idlg) and by any
// later inversion attack over the same objective (attacks/inversion.h).
//
// Attacker variants. "attacker": "adaptive" (the default of every attack that takes it:
// `fedpriv attack`, a matrix, the audits) runs every variant of "variants" on every
// target, by default
//   dlg-l2          the L2 gradient distance of DLG (Zhu et al. 2019), one start;
//   cosine-tv       the cosine distance with a total-variation prior (Geiping et al. 2020,
//                   eq. 4), ATTACKER_COSINE_TV, one start;
//   l2-restarts     the L2 distance again from ATTACKER_EXTRA_STARTS other starts, the
//                   lowest final matching loss kept (what the attacker can choose alone);
//   analytic        where the model's first layer is dense with a bias on the input (mlp,
//                   logreg): the closed-form recovery from that layer's gradients
//                   (attacks/inversion.h, inversion_analytic_run), no optimisation; left
//                   out of the default set for other models;
// each {"name", "distance", "tv", "restarts", "steps"} (steps, lbfgs and snapshot_every
// default to the attack's) or {"name", "method": "analytic"} ("method" is
// "gradient-matching" by default). Every start of every variant is a different draw: variant v
// uses the restart streams after those of variants 0..v−1 (InversionProblem.first_restart),
// so variant 0 with one start is exactly the single attacker. "attacker": "single" runs one
// configuration: the attack's own keys steps, restarts, distance, tv, lbfgs (with the
// adaptive attacker those three are the variants'; setting them without "attacker" is an
// error naming "single", never a silently weaker attacker).
//
// The strongest per target. Per image, the evaluator keeps the variant whose
// reconstruction is closest to the original (highest SSIM, the recovery metric itself):
// a per-image maximum over the configured attackers, so a cell's figures bound what any
// one of them, or an attacker choosing among them by its own matching loss, achieves.
//
// Recovery. An image counts as recovered at SSIM ≥ ATTACKER_RECOVERED_SSIM (stated in
// every result as recovered_ssim). Results give recovered_fraction, images_recovered,
// ssim_mean, ssim_max, psnr_mean and mse_mean, not only a mean.
//
// Applicability. An attack that recovers nothing against the same federation without any
// defense (same observer, attacker, images and seed) finds nothing a defense could
// protect: its result is "applicable": false ("not applicable"), and its figures under a
// defense are no evidence of protection. The reference is the run itself when the defense
// is "none", a matrix's "none" cell when the runner hands it over (AttackEnv.reference),
// else a reference run of the attack without the defense ("reference": false skips it:
// "applicable": null, undecided). "Not applicable" is said only of the strongest
// attacker: when a single attacker's reference recovers nothing, the adaptive attacker
// runs against the federation without the defense and decides (a weak attacker's
// failure is no finding about the setting); "applicability.attacker" says which decided.
#ifndef FEDPRIV_ATTACKS_ATTACKER_H
#define FEDPRIV_ATTACKS_ATTACKER_H

#include <cjson/cJSON.h>

#include "attacks/attack.h"
#include "attacks/inversion.h"

#define ATTACKER_MAX_VARIANTS 8
#define ATTACKER_RECOVERED_SSIM 0.9
#define ATTACKER_COSINE_TV 0.001
#define ATTACKER_EXTRA_STARTS 2
#define ATTACKER_KEYS "attacker", "variants", "reference"

typedef struct AttackerVariant {
    char name[32];
    InversionConfig inv;     // steps, restarts, distance, tv, snapshot_every, lbfgs
    uint32_t first_restart;  // its starts are restart streams first_restart .. + inv.restarts − 1
} AttackerVariant;

typedef struct Attacker {
    int adaptive;            // 0: "single", 1: "adaptive"
    int n;
    AttackerVariant v[ATTACKER_MAX_VARIANTS];
    int reference;           // "reference": run the attack without the defense when nothing else decides
} Attacker;

// Reads "attacker", "variants" and "reference" of the attack object j (path for
// messages). base: the configuration the attack's own keys give (the single attacker's,
// and each variant's defaults); explicit: 1 when j sets restarts, distance or tv itself
// (an error with "adaptive": those are set per variant).
// takes_adaptive: the attack takes the adaptive attacker (then its default); 0: only its
// one configuration (no "attacker" key). set: the attack's own default adaptive set over
// base (NULL: the set above).
typedef void (*AttackerSet)(const InversionConfig *base, Attacker *out);
// analytic: the attacked model admits the analytic variant (inversion_analytic_applies):
// the default set (set NULL) then ends with it, and a listed "method": "analytic" is
// accepted (refused otherwise, naming the path).
FpStatus attacker_parse(const cJSON *j, const char *path, const InversionConfig *base, int explicit, int takes_adaptive,
                        AttackerSet set, int analytic, Attacker *out, FpError *err);
// The default adaptive attacker over base (its variants' defaults; set and analytic as
// above), "reference" on.
void attacker_default_adaptive(const InversionConfig *base, AttackerSet set, int analytic, Attacker *out);
// The optimiser steps a variant runs over its starts (0 for the analytic one).
long long attacker_variant_steps(const AttackerVariant *v);
// {"attacker", "variants": [{"name", "method", "distance", "tv", "restarts", "steps",
// "first_restart"}]} (the analytic variant: {"name", "method"})
// added to obj (the resolved configuration).
void attacker_describe(const Attacker *a, cJSON *obj);

// What a set of scored images adds up to.
typedef struct Recovery {
    int n, recovered;
    double ssim_sum, ssim_max, psnr_sum, mse_sum;
} Recovery;
void recovery_add(Recovery *r, double ssim, double psnr, double mse);
// recovered_ssim, images_recovered, recovered_fraction, ssim_mean, ssim_max, psnr_mean,
// mse_mean into obj (non-finite values as "inf", "-inf" or null).
void recovery_json(const Recovery *r, cJSON *obj);

// How applicability was decided: the reference's recovery, or why there is none.
typedef struct Applicability {
    int decided;             // 0: no reference (applicable null)
    int applicable;
    int by_adaptive;         // 1: the adaptive attacker decided (this run's, or the one run after a single
                             // attacker's reference recovered nothing)
    char source[160];        // "this run (no defense)", "cell ID", "reference run without the defense"
    Recovery ref;            // the reference's recovery (when decided)
    char reason[256];        // why it is undecided (when not)
} Applicability;
// From a reference's recovery.
void applicability_from(Applicability *a, const char *source, const Recovery *ref);
// From a reference result (a matrix cell's entry result for the same attack): its
// images_recovered and the images it scored; NULL or a result without them is undecided.
void applicability_from_result(Applicability *a, const char *source, const cJSON *ref_entry);
// "applicable" (true, false or null) and "applicability": {"rule", "reference",
// "reference_images_recovered", "reference_recovered_fraction", "reference_ssim_mean", or
// "reason"} into obj.
void applicability_json(const Applicability *a, cJSON *obj);

#endif
