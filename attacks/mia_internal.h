// What attacks/target.c (the data plan, the target) and attacks/mia_reference.c (shadow
// and reference models) share. Not for the attacks themselves: they use attacks/target.h.
#ifndef FEDPRIV_ATTACKS_MIA_INTERNAL_H
#define FEDPRIV_ATTACKS_MIA_INTERNAL_H

#include "attacks/target.h"

struct TrainHooks;

// The member range [*first, *first + count) of a model trained on n samples split in
// `clients` contiguous pieces: the target client's piece, or all of them.
int mia_member_range(const MiaTargetConfig *cfg, int clients, int n, int *first);

// Trains a model of the experiment's architecture on idx[0..n) as cfg says, by fl/
// (fed_run with the plan's pieces as the partition, or local_train for the central
// target). fresh: a new initialisation from seed (shadow and reference models); else the
// experiment's initial model (the target). series: optional confidence-series recording
// (global target). *round_out: the client target's round. *defense_out (when not NULL):
// the defense's resolved parameters and the privacy spent. participations (when not
// NULL, federated): the rounds each client took part in.
FpStatus mia_train_model(const AttackEnv *env, const MiaTargetConfig *cfg, const uint32_t *idx, int n, uint64_t seed,
                         int fresh, const Dataset *test, int quiet, int threads, struct TrainHooks *series,
                         Model **out, int *round_out, cJSON **defense_out, int *participations, FpError *err);

// Sets up the reference models' queries of a freshly built target (population order,
// query list and content hashes, the procedure's identity text) and scores the default
// population with the target model.
FpStatus mia_queries_init(const AttackEnv *env, MiaTarget *t, FpError *err);
// Frees what mia_reference.c allocated in t (queries, reference sets, shadow).
void mia_references_free(MiaTarget *t);

#endif
