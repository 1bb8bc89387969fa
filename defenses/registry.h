// The defenses fedpriv ships (defenses/registry.c): every DefenseOps plugin by name,
// "none" (the engine's plain FedAvg, fl/defense.h) included.
#ifndef FEDPRIV_DEFENSES_REGISTRY_H
#define FEDPRIV_DEFENSES_REGISTRY_H

#include "fl/defense.h"

// The defense of that name, or NULL. Usable as a DefenseFindFn.
const DefenseOps *defense_find(const char *name);
int defense_count(void);
const DefenseOps *defense_at(int i);

#endif
