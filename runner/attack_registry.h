// Every attack a matrix, `fedpriv attack` and `fedpriv check` know by name: the attacks of
// attacks/ and the training-run audit of audits/ (audits/training.h), which runs as an
// attack in a matrix. It lives above both so that neither includes the other.
#ifndef FEDPRIV_RUNNER_ATTACK_REGISTRY_H
#define FEDPRIV_RUNNER_ATTACK_REGISTRY_H

#include "attacks/attack.h"

int attack_count(void);
const AttackOps *attack_at(int i);
const AttackOps *attack_find(const char *name);
// "did you mean \"NAME\"? " for the attack nearest to an unknown name (core/suggest.h), or ""
// when none is near; into buf (n bytes).
const char *attack_suggest(const char *name, char *buf, size_t n);

// The model an attack attacked, named in its result (issue: a verdict is about the
// federation's own model). By default an attack attacks the model the federation trains;
// a "model" of its own that differs (a probe model) is allowed, and then named as one:
//   "attacked_model": its label (the model's name; its compact JSON when a probe shares
//                     the federation's name), "probe": true/false, and for a probe
//                     "federation_model" (the federation's label) and "probe_model" (its JSON).
// attacked NULL: the federation's model.
void attack_name_model(const cJSON *federation, const cJSON *attacked, cJSON *obj);
// The label attack_name_model writes as "attacked_model" into buf; returns 1 for a probe.
int attack_model_label(const cJSON *federation, const cJSON *attacked, char *buf, size_t n);

#endif
