// The attack plugin contract. An attack observes what a threat model allows (one
// client's upload, the global model each round, the final model, shadow data), runs,
// and fills a result JSON with metrics and artifacts (PNG paths relative to out_dir,
// ROC points). One file per attack; attacks/registry.c lists them.
//
// The experiment (fl/experiment.h) gives the data, the model architecture (initialised
// from the seed), the federation settings and the defense under attack. An attack never
// trains through a second path: it uses fl/ (local_train, Federation) for every model.
#ifndef FEDPRIV_ATTACKS_ATTACK_H
#define FEDPRIV_ATTACKS_ATTACK_H

#include <cjson/cJSON.h>

#include "fl/experiment.h"

struct AttackCache; // trained targets shared by the attacks of one matrix cell (attacks/target.h)

typedef struct AttackEnv {
    Experiment *ex;
    const cJSON *attack_json;      // the attack's object ({"name": "dlg", ...})
    const char *path;              // its JSON path for messages ("attack", "attacks[1]")
    const char *out_dir;           // existing directory for artifacts
    struct AttackCache *cache;     // NULL: nothing shared
    const char *reference_dir;     // the on-disk reference-model cache (attacks/refcache.h); NULL: none
    int quiet;                     // no progress on stderr
} AttackEnv;

typedef struct AttackOps {
    const char *name;
    const char *summary;           // one line for `fedpriv list`
    const char *headline;          // key of the headline metric in the result ("ssim_mean", "auc", ...)
    int headline_higher_leaks;     // 1 when a higher headline value means more leakage
    // Strict validation of attack_json (unknown keys, ranges) before any expensive work.
    FpStatus (*validate)(const AttackEnv *env, FpError *err);
    // Run; fill result with metrics (headline included) and artifact paths.
    FpStatus (*run)(const AttackEnv *env, cJSON *result, FpError *err);
} AttackOps;

int attack_count(void);
const AttackOps *attack_at(int i);
const AttackOps *attack_find(const char *name);

#endif
