// The victims of a gradient-inversion attack, inside the federation as configured
// (design notes: "Truth of a verdict"). Victim v is client (observe.client + v) mod N of
// the experiment's federation: same N, q, sampling, rounds, partition of everyone else,
// and the defense created once from that federation's own DefenseSetup, so σ, clip,
// sensitivity, schedules and budgets are the deployed ones. Its local data are the
// attacked samples; it runs one local step on them (the FedSGD probe DLG assumes), or
// the federation's local procedure with "local": "federation". The observer sees its
// upload through fl's one upload path (fed_observe) at the declared point: round
// observe.round, or by default each victim's first participation; rounds before it run
// in full (training, aggregation, accounting), so the model and the defense's state are
// the federation's at that round.
//
// Attack keys (with the attack's own): "observe": {"round": r (1-based), "client": c},
// "local": "probe" (default) | "federation".
#ifndef FEDPRIV_ATTACKS_VICTIMS_H
#define FEDPRIV_ATTACKS_VICTIMS_H

#include <cjson/cJSON.h>

#include "attacks/attack.h"

#define VICTIM_KEYS "observe", "local"

typedef struct VictimOptions {
    int client;            // the first victim's client id (default 0)
    int round;             // 0-based observed round, -1 = each victim's first participation
    int federation_local;  // 1: the federation's local procedure; 0: one step (probe)
} VictimOptions;

// Reads "observe" and "local" for n_victims victims (at most N, the federation's clients).
FpStatus victims_parse(const AttackEnv *env, int n_victims, VictimOptions *o, FpError *err);

// The observations of n_victims victims; victim v holds samples idx[v·per_victim ..
// (v+1)·per_victim) of d. defense/defense_json: the defense to deploy (the experiment's,
// or another for a reference run). out[v] (fed_observation_free each); *defense_out
// (may be NULL): the federation's defense, resolved (describe()).
FpStatus victims_observe(const AttackEnv *env, const VictimOptions *o, const DefenseOps *defense,
                         const cJSON *defense_json, const Dataset *d, const uint32_t *idx, int per_victim,
                         int n_victims, FedObservation *out, cJSON **defense_out, FpError *err);

// The server's estimate of the victim's per-step gradient from its upload
// (upload_gradient_estimate with the federation's lr and weight decay), host n_params.
void victims_gradient(const Experiment *ex, const FedObservation *ob, float *out);

// What an observation states: round (1-based), client, observer, upload kind, the
// federation (N, q, sampling, rounds, participants), the victim's local procedure, and
// the defense's resolved parameters at that round (noise and scale, clip, ε, privacy).
cJSON *victims_observation_json(const Experiment *ex, const VictimOptions *o, const FedObservation *ob);

#endif
