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
// The attacker is this one configuration ("attacker" and "variants" are DLG's adaptive
// set, whose L-BFGS variants this attack is not); "reference" decides applicability as for
// DLG (attacks/attacker.h).
//
// Keys beyond the shared ones: "tv" (default 1e-4), "lr" (0.1), "decay": "step" |
// "none", "boxed" (true), "distance": "cosine" (default) | "l2", "reference" (true).
#include "attacks/inversion_attack.h"
#include "core/jsonv.h"

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

static const char *const ig_keys[] = {"distance", "tv", "lr", "decay", "boxed", "reference", NULL};

static const InversionAttack ig_attack = {.name = "inverting-gradients",
                                          .rule_owner = "Inverting Gradients' label rule",
                                          .labels = INV_LABELS_BATCH, .max_batch = INV_ATTACK_MAX_BATCH,
                                          .default_steps = 2000, .simulate_local = 1, .keys = ig_keys,
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
