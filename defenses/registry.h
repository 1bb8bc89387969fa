// The defenses fedpriv ships (defenses/registry.c): every DefenseOps plugin by name,
// "none" (the engine's plain FedAvg, fl/defense.h) included.
#ifndef FEDPRIV_DEFENSES_REGISTRY_H
#define FEDPRIV_DEFENSES_REGISTRY_H

#include "fl/defense.h"

// The defense of that name, or NULL. Usable as a DefenseFindFn.
const DefenseOps *defense_find(const char *name);
int defense_count(void);
const DefenseOps *defense_at(int i);
// "did you mean \"NAME\"? " for the defense nearest to an unknown name (core/suggest.h), or
// "" when none is near; into buf (n bytes).
const char *defense_suggest(const char *name, char *buf, size_t n);

#endif
