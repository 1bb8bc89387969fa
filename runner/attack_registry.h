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

#endif
