// The attack plugin contract. An attack observes what a threat model allows (one
// client's upload, the global model each round, the final model, shadow data), runs,
// and fills a result JSON with metrics and artifacts (PNG paths relative to out_dir,
// ROC points). One file per attack; runner/attack_registry.c lists them (above attacks
// and audits, since the training audit is one of them).
//
// The experiment (fl/experiment.h) gives the data, the model architecture (initialised
// from the seed), the federation settings and the defense under attack. An attack never
// trains through a second path: it uses fl/ (local_train, Federation) for every model.
#ifndef FEDPRIV_ATTACKS_ATTACK_H
#define FEDPRIV_ATTACKS_ATTACK_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "fl/experiment.h"

struct AttackCache; // trained targets shared by the membership attacks of one matrix cell (attacks/target.h)

typedef struct AttackEnv {
    Experiment *ex;
    const cJSON *attack_json;      // the attack's object ({"name": "dlg", ...})
    const char *path;              // its JSON path for messages ("attack", "attacks[1]")
    const char *out_dir;           // existing directory for artifacts
    struct AttackCache *cache;     // NULL: nothing shared
    const char *reference_dir;     // the on-disk reference-model cache (attacks/refcache.h); NULL: none
    int quiet;                     // no progress on stderr
    FILE *progress;                // when quiet, long work's lines all the same (core/progress.h:
                                   // inversion steps, reference models k of N); NULL: none (a
                                   // matrix cell's runner sets it)
    double progress_seconds;       // their interval, 0: 10 s (inversion steps: always 10 s)
    const char *progress_label;    // their prefix (a matrix cell's names the cell and the
                                   // attack); NULL: the attack's name, or its JSON path
    // The same attack against the federation without a defense, for attacks that decide
    // whether they apply (attacks/attacker.h): reference_given = 1 when the caller hands
    // it over (a matrix's "none" cell); reference is then that cell's entry for this attack
    // ({"status", "result", ...}; NULL when it has none) and reference_source names it.
    int reference_given;
    const cJSON *reference;
    const char *reference_source;
} AttackEnv;

// An attack's work for a given config, for the matrix's cost model (runner/cell_cost.h),
// counted in samples: an estimate to balance cells across shards and ranks, not a timing.
typedef struct AttackWork {
    uint64_t target_samples;  // training samples of the membership target it trains (shared by the
                              // attacks of a cell), trained by the federation's own procedure
    uint64_t shadow_samples;  // training samples of all its shadow models (or of the federation
                              // it runs to an observed round), the same procedure
    uint64_t passes;          // other passes of one sample through the attack's model: a forward
                              // pass = 1, forward and backward = 3, a gradient-matching evaluation
                              // (forward, backward with its graph, backward again) = 6
} AttackWork;

typedef struct AttackOps {
    const char *name;
    const char *summary;           // one line for `fedpriv list`
    const char *headline;          // key of the headline metric in the result ("ssim_mean", "auc", ...)
    int headline_higher_leaks;     // 1 when a higher headline value means more leakage
    // Gradient inversion's declared observers and attacker variants: a matrix runs an
    // attack with `observers` once per observer ("observer": "server" and "public") where
    // they differ, and one with `adaptive` as the adaptive attacker ("attacker":
    // "adaptive"), unless its object says otherwise; one with `uses_reference` (gradient
    // inversion, and the membership attacks, which are not applicable when at chance there)
    // is handed the matrix's "none" cell as its reference (AttackEnv.reference).
    int observers, adaptive, uses_reference;
    // Strict validation of attack_json (unknown keys, ranges) before any expensive work.
    FpStatus (*validate)(const AttackEnv *env, FpError *err);
    // Run; fill result with metrics (headline included) and artifact paths.
    FpStatus (*run)(const AttackEnv *env, cJSON *result, FpError *err);
    // Optional: the work a run with this config does (validate() accepted it). NULL: the
    // cost model counts one training of the federation's data.
    FpStatus (*work)(const AttackEnv *env, AttackWork *out, FpError *err);
} AttackOps;

// The shipped attacks by name: runner/attack_registry.h (above attacks and audits, since
// the training audit is one of them).

#endif
