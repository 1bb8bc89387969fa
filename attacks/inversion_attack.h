// The gradient-inversion attack pipeline shared by dlg, idlg (attacks/dlg.c) and
// inverting-gradients (attacks/inverting_gradients.c): the images and batches, the
// victims inside the configured federation and their observation (attacks/victims.h),
// the observer's target from each observed upload or release, the label rule, the
// inversions of every (batch, attacker variant) (attacks/inversion.h, in threads), the
// optimal assignment of reconstructions to originals (eval/assignment.h), the strongest
// variant per image, recovery figures and applicability (attacks/attacker.h), PNGs and
// the result. An attack is a table of what differs: its optimiser and objective options,
// its label rule, its batch limit and whether a victim's local steps are simulated.
//
// Shared keys: "images", "batch_size", "steps", "restarts", "snapshot_every", the
// victims' "observe", "local" and "observer"; each attack adds its own
// (InversionAttack.keys), among them the attacker's ("attacker", "variants", "reference")
// where it takes them.
#ifndef FEDPRIV_ATTACKS_INVERSION_ATTACK_H
#define FEDPRIV_ATTACKS_INVERSION_ATTACK_H

#include <cjson/cJSON.h>

#include "attacks/attack.h"
#include "attacks/attacker.h"
#include "attacks/inversion.h"

#define INV_ATTACK_MAX_BATCH 64

typedef enum {
    INV_LABELS_LEARNED = 0, // DLG: soft labels y′ optimised with x′
    INV_LABELS_IDLG = 1,    // iDLG's row-sum rule (idlg_labels)
    INV_LABELS_BATCH = 2,   // iDLG's rule for B = 1, LLG (llg_labels) for B > 1
} InvLabelRule;

typedef struct InversionAttack {
    const char *name;         // the attack's name (results, messages)
    const char *rule_owner;   // who needs the last linear layer, in messages ("iDLG")
    InvLabelRule labels;
    int max_batch;            // ≤ INV_ATTACK_MAX_BATCH
    int default_steps;
    int simulate_local;       // 1: a victim's E > 1 local steps are simulated on x′ (InvLocalSteps)
    int takes_adaptive;       // 1: takes "attacker" (adaptive by default, attacks/attacker.h); 0: its one
                              // configuration is its attacker
    // Its own default adaptive set (NULL: attacks/attacker.h's). An attack with its own set
    // configures that set's first variant with its keys (restarts, distance, tv), which
    // are then not refused beside the adaptive attacker.
    AttackerSet adaptive_set;
    const char *const *keys;  // the attack's own keys (NULL-terminated)
    // Fills the attack's part of cfg (optimiser, distance, prior) from j at path, with
    // its defaults for absent keys.
    FpStatus (*parse)(const cJSON *j, const char *path, InversionConfig *cfg, FpError *err);
    // Adds the attack's own resolved optimiser options to the result's attack_config.
    void (*describe)(const InversionConfig *cfg, cJSON *attack_config);
} InversionAttack;

FpStatus inversion_attack_validate(const AttackEnv *env, const InversionAttack *a, FpError *err);
FpStatus inversion_attack_run(const AttackEnv *env, const InversionAttack *a, cJSON *result, FpError *err);
// The work of a run for the matrix's cost model (AttackOps.work).
FpStatus inversion_attack_work(const AttackEnv *env, const InversionAttack *a, AttackWork *w, FpError *err);

#endif
