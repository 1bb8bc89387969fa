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
// The observer (fl/fed.h FedObserver) is "server" (default: the victim's upload as the
// server receives it, before any server-side noise) or "public" (the model the server
// releases after that round: every participant's upload and the server's noise in it;
// the attack inverts the global model's change).
//
// observe.client defaults to the lowest-numbered client the server samples (in the
// declared round, or in any): the engine's sampler on the experiment's seed, the
// participants `fedpriv train` lists.
//
// Attack keys (with the attack's own): "observe": {"round": r (1-based), "client": c},
// "local": "probe" (default) | "federation", "observer": "server" (default) | "public".
#ifndef FEDPRIV_ATTACKS_VICTIMS_H
#define FEDPRIV_ATTACKS_VICTIMS_H

#include <cjson/cJSON.h>

#include "attacks/attack.h"

#define VICTIM_KEYS "observe", "local", "observer"

typedef struct VictimOptions {
    int client;            // the first victim's client id (default: the lowest-numbered client that
                           // takes part, in the declared round or in any)
    int client_defaulted;  // 1: observe.client was not given
    int round;             // 0-based observed round, -1 = each victim's first participation
    int federation_local;  // 1: the federation's local procedure; 0: one step (probe)
    FedObserver observer;
} VictimOptions;

// Reads "observe", "local" and "observer" for n_victims victims (at most N, the
// federation's clients).
FpStatus victims_parse(const AttackEnv *env, int n_victims, VictimOptions *o, FpError *err);

// The observations of n_victims victims; victim v holds samples idx[v·per_victim ..
// (v+1)·per_victim) of d. defense/defense_json: the defense to deploy (the experiment's,
// or another for a reference run). out[v] (fed_observation_free each); *defense_out
// (may be NULL): the federation's defense, resolved (describe()).
FpStatus victims_observe(const AttackEnv *env, const VictimOptions *o, const DefenseOps *defense,
                         const cJSON *defense_json, const Dataset *d, const uint32_t *idx, int per_victim,
                         int n_victims, FedObservation *out, cJSON **defense_out, FpError *err);

// The observer's estimate of the victim's per-step gradient from what it saw
// (upload_gradient_estimate with the federation's lr and weight decay and the victim's
// local steps), host n_params: from the upload for the server; for the public observer
// (w_r − w_{r+1})/(lr·steps) − wd·w_r, the released model's change, in which the victim's
// upload is one of the round's participants' (with its aggregation weight) plus the
// server's noise.
void victims_gradient(const Experiment *ex, const FedObservation *ob, float *out);

// What an observation states: round (1-based), client, observer, what was observed,
// upload kind, the federation (N, q, sampling, rounds, participants), the victim's local
// procedure, the defense's resolved parameters at that round (noise and scale, server
// noise, clip, ε, privacy) and the privacy figure for this observer (observer_privacy).
cJSON *victims_observation_json(const Experiment *ex, const VictimOptions *o, const FedObservation *ob);

// The privacy figure that applies to an observation's observer, from its record after
// the observed round: for the server, the upload observer's bound (record sound.upload)
// when the defense states one, else its one sound bound; for the public observer, the
// bound on the released models (record sound). {"observer", "figure" ("sound.upload" or
// "sound"), "round", "epsilon_total" (proven or "inf"), "epsilon_total_conditional" (a
// conditional record), "delta", "guarantee", "notion"}.
cJSON *victims_observer_privacy(const FedObservation *ob);

#endif
