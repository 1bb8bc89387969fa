// What a matrix run says, computed once for the report, the JSON summary in
// results.json, `fedpriv export` and `fedpriv check`: per defense setting, every metric
// over the seeds (mean, 95% confidence interval, the per-seed values), the privacy
// record with its guarantee, and the warnings a reader needs before trusting a number.
//
// Statistics over seeds and the anchored scales: reports/stats.h.
//
// Warnings (kind, and the setting / attack they concern):
//   accuracy_at_chance         mean accuracy within 2 points of chance, with what the
//                              rounds and the privacy record say about why
//   accuracy_near_chance       above that, but less than ACCURACY_NEAR_CHANCE_SHARE of the
//                              way from chance to the accuracy without a defense; same why
//   attack_fails_without_defense  the attack does not leak without any defense: its
//                              numbers under defenses measure nothing (not applicable)
//   no_baseline                no setting without a defense, so nothing shows the
//                              attacks work at all
//   mixed_epsilon_notions      nominal ε of different units or notions in one table
//   noise_after_observation    the defense adds its noise at the server, after the point
//                              the attack observes (a client's upload as the server
//                              receives it): the attack sees no noise at any ε
//   attack_not_applicable      a result flagged "not applicable" by the attack itself
#ifndef FEDPRIV_REPORTS_SUMMARY_H
#define FEDPRIV_REPORTS_SUMMARY_H

#include <cjson/cJSON.h>

#include "reports/results.h"
#include "reports/stats.h"

// accuracy_near_chance: a defended setting that keeps less than this share of what the
// federation learns above chance without a defense (the accuracy scale's red end).
#define ACCURACY_NEAR_CHANCE_SHARE 0.1

// ---- the summary ----------------------------------------------------------------------------

// The metrics the report shows per attack: the headline first, then the low-FPR rate
// and the recovered fraction where the results have them.
#define SUMMARY_MAX_KEYS 4

typedef struct AttackColumn {
    const cJSON *index;     // the index's attack entry
    const char *name, *label, *headline;
    int higher_leaks;
    int n_keys;
    const char *keys[SUMMARY_MAX_KEYS];        // keys[0] = the headline metric
    const MetricScale *scales[SUMMARY_MAX_KEYS];
} AttackColumn;

typedef struct SettingSummary {
    const cJSON *entry;     // the index entry of its first cell
    const char *label, *defense, *variant; // variant NULL when none
    const cJSON *params;    // swept parameters other than ε
    double epsilon;         // the ε it was configured with (NaN: none)
    int is_baseline;        // the defense is "none"
    const MatrixSetting *runs;
    int n_done, n_diverged, n_failed, n_pending;
    // The privacy record after the last round (of the first run that has one).
    const cJSON *privacy;   // NULL when no run has one
    const char *unit, *nominal_notion, *sound_notion, *guarantee; // "" when absent
    double eps_nominal, eps_nominal_round, eps_sound, eps_conditional, delta, sigma;
    double eps_standard_rdp, eps_standard_pld; // the field's figure (privacy.standard; NaN: not stated)
    const cJSON *assumptions;
    // The upload observer's record (privacy.sound.upload), when the defense states one:
    // its proven ε (∞ when none), its conditional bound and its own guarantee label;
    // upload_guarantee NULL when there is no such record.
    double eps_upload, eps_upload_conditional;
    const char *upload_guarantee, *upload_notion;
    const char *noise_point; // "server" / "client" from the resolved defense, or NULL
    double participants;    // mean participants per round (first run with rounds), NaN
    MetricSummary accuracy, loss;
    MetricSummary *attack;  // [k * SUMMARY_MAX_KEYS + j]: attack k, key j
    int *not_applicable;    // [k]: runs whose attack k says it does not apply
    const char **observer;  // [k]: "server" (before server-side noise), "public", or NULL
} SettingSummary;

typedef struct RunWarning {
    char kind[40];
    int setting;            // -1: the whole run
    int attack;             // -1: none
    char *message;
} RunWarning;

typedef struct RunSummary {
    const MatrixResults *r;
    int n_attacks;
    AttackColumn *attacks;
    int n_settings;
    SettingSummary *settings;
    int baseline;           // the first setting without a defense, or -1
    double chance;          // chance accuracy, NaN when unknown (regression)
    int regression;         // no accuracy anywhere: the model metric is the test loss
    int n_seeds;            // most runs of one setting
    int n_warnings;
    RunWarning *warnings;
    int oom;                // a warning could not be stored (run_summary_build then fails)
} RunSummary;

// Builds the summary of a loaded run (r must outlive it).
FpStatus run_summary_build(const MatrixResults *r, RunSummary *out, FpError *err);
void run_summary_free(RunSummary *s);

// The summary as JSON (results.json's "summary", with the verdict of reports/verdict.h;
// docs/report.md documents it); NULL when out of memory.
cJSON *run_summary_json(const RunSummary *s);

// 1 when attack k observes setting s before the server adds its noise (the defense's
// noise point is "server", the attack's observer "server" or "upload", not "public"):
// noise_after_observation.
int setting_observes_before_noise(const SettingSummary *s, int k);

// The metric value of attack k, key j in setting s (the summary entry).
static inline const MetricSummary *setting_attack_metric(const SettingSummary *s, int k, int j) {
    return &s->attack[k * SUMMARY_MAX_KEYS + j];
}

#endif
