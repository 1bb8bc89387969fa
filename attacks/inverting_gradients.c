// Inverting Gradients (Geiping, Bauermeister, Dröge and Moeller, NeurIPS 2020):
// `fedpriv attack inverting-gradients --config FILE.json --out DIR`.
//
// The threat model, victims, observers ("server", "public"), metrics, recovered
// fraction and applicability are DLG's (attacks/dlg.c, the shared pipeline of
// attacks/inversion_attack.h); what differs is the attack of their §3–4:
//   - the distance is the cosine of the gradients over all trainable parameters at once
//     (their eq. 4), plus tv times the anisotropic total variation of x′;
//   - the optimiser is Adam on sign(∂D/∂x′), learning rate `lr` (0.1) divided by 10 at
//     3/8, 5/8 and 7/8 of the steps ("decay": "step"), x′ kept in the pixel box [0, 1];
//   - `restarts` independent starts from N(0, 1), the one with the lowest final
//     objective kept (their "loss" scoring);
//   - labels are read off the last layer before the optimisation: iDLG's rule for one
//     image, for a batch Wainakh et al.'s LLG (llg_labels, attacks/inversion.h);
//   - a victim that ran E > 1 local steps on its batch ("local": "federation", with the
//     federation's local_steps or local_epochs and a batch_size of at least the batch)
//     is inverted by running the same E full-batch SGD steps (lr, momentum, weight
//     decay of the federation) on x′ and comparing the server's estimate from the
//     simulated update with the one from the observed upload (their §4, "multiple
//     local steps"; InvLocalSteps).
// The defaults follow their reference configuration for small images (lr 0.1, step
// decay, boxed, tv 1e-4) with 2000 steps instead of 4800 (28×28 images).
//
// The attacker is adaptive by default (attacks/attacker.h; "attacker": "single" runs the
// configuration above alone), with this attack's own set, every variant on the labels the
// rule above recovered:
//   cosine-tv          the configuration above (the paper's signed Adam on cosine + TV);
//   l2-lbfgs           L-BFGS on the L2 gradient distance (iDLG's optimiser, PyTorch's
//                      defaults, IG_LBFGS_STEPS steps): at B > 1 on a saturated LeNet it
//                      recovers what signed Adam in 2000 steps does not (docs/attacks-dlg.md);
//   l2-lbfgs-restarts  the same from ATTACKER_EXTRA_STARTS other starts.
// The keys restarts, distance and tv configure the first variant. "reference" decides
// applicability as for DLG.
//
// Keys beyond the shared ones: "tv" (default 1e-4), "lr" (0.1), "decay": "step" |
// "none", "boxed" (true), "distance": "cosine" (default) | "l2", "reference" (true).
#include <stdio.h>

#include "attacks/inversion_attack.h"
#include "attacks/lbfgs.h"
#include "core/jsonv.h"

#define IG_LBFGS_STEPS 300

static FpStatus ig_parse(const cJSON *j, const char *path, InversionConfig *cfg, FpError *err) {
    static const char *const dists[] = {"l2", "cosine", NULL}, *const decays[] = {"none", "step", NULL};
    int choice;
    FP_TRY(jv_choice(j, path, "distance", dists, INV_DISTANCE_COSINE, &choice, err));
    cfg->distance = (InvDistance)choice;
    FP_TRY(jv_number(j, path, "tv", JV_OPTIONAL, 1e-4, 0, 0, 1e6, 0, &cfg->tv, err));
    cfg->optimizer = INV_OPTIMIZER_ADAM_SIGNED;
    FP_TRY(jv_number(j, path, "lr", JV_OPTIONAL, 0.1, 0, 1, 1e3, 0, &cfg->adam.lr, err));
    FP_TRY(jv_choice(j, path, "decay", decays, 1, &cfg->adam.step_decay, err));
    return jv_bool(j, path, "boxed", 1, &cfg->adam.boxed, err);
}

static void ig_describe(const InversionConfig *c, cJSON *cfg) {
    cJSON_AddStringToObject(cfg, "optimizer", "adam on signed gradients");
    cJSON_AddNumberToObject(cfg, "lr", c->adam.lr);
    cJSON_AddStringToObject(cfg, "decay", c->adam.step_decay ? "step" : "none");
    cJSON_AddBoolToObject(cfg, "boxed", c->adam.boxed);
}

static void ig_adaptive_set(const InversionConfig *base, Attacker *a) {
    a->n = 3;
    a->v[0] = (AttackerVariant){.inv = *base};
    snprintf(a->v[0].name, sizeof a->v[0].name, "%s",
             base->distance == INV_DISTANCE_COSINE ? (base->tv > 0 ? "cosine-tv" : "cosine")
                                                   : (base->tv > 0 ? "l2-tv" : "l2"));
    a->v[1] = (AttackerVariant){.inv = *base};
    snprintf(a->v[1].name, sizeof a->v[1].name, "l2-lbfgs");
    a->v[1].inv.optimizer = INV_OPTIMIZER_LBFGS;
    a->v[1].inv.lbfgs = lbfgs_defaults();
    a->v[1].inv.distance = INV_DISTANCE_L2;
    a->v[1].inv.tv = 0;
    a->v[1].inv.restarts = 1;
    a->v[1].inv.steps = IG_LBFGS_STEPS;
    a->v[2] = a->v[1];
    snprintf(a->v[2].name, sizeof a->v[2].name, "l2-lbfgs-restarts");
    a->v[2].inv.restarts = ATTACKER_EXTRA_STARTS;
}

static const char *const ig_keys[] = {"distance", "tv", "lr", "decay", "boxed", ATTACKER_KEYS, NULL};

static const InversionAttack ig_attack = {.name = "inverting-gradients",
                                          .rule_owner = "Inverting Gradients' label rule",
                                          .labels = INV_LABELS_BATCH, .max_batch = INV_ATTACK_MAX_BATCH,
                                          .default_steps = 2000, .simulate_local = 1, .takes_adaptive = 1,
                                          .adaptive_set = ig_adaptive_set, .keys = ig_keys,
                                          .parse = ig_parse, .describe = ig_describe};

static FpStatus ig_validate(const AttackEnv *env, FpError *err) {
    return inversion_attack_validate(env, &ig_attack, err);
}

static FpStatus ig_run(const AttackEnv *env, cJSON *result, FpError *err) {
    return inversion_attack_run(env, &ig_attack, result, err);
}

static FpStatus ig_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    return inversion_attack_work(env, &ig_attack, w, err);
}

const AttackOps attack_inverting_gradients = {
    .name = "inverting-gradients",
    .summary = "Inverting Gradients (Geiping et al.): cosine + TV, signed Adam, restarts, LLG batch labels, "
               "simulated local steps (SSIM)",
    .headline = "ssim_mean",
    .headline_higher_leaks = 1,
    .observers = 1,
    .uses_reference = 1,
    .validate = ig_validate,
    .run = ig_run,
    .work = ig_work,
};
