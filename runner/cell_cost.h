// The estimated cost of a matrix cell, from its config alone: what the scheduler
// balances shards by and hands cells out in (largest first). An estimate of relative
// work, not a timing; integers, so every shard and rank of a job, on any machine,
// computes the same numbers and therefore the same assignment.
//
// Unit: one model parameter in one pass of one sample (a forward pass of a model with P
// parameters over S samples costs P·S; forward and backward count 3 passes). With the
// federation's model of P parameters, N clients, R rounds, m participants per round
// (round(q·N) for fixed-size sampling, else the expected q·N, at least 1), s samples per
// client (samples_per_client, else n_train / N), E local epochs (or a fixed number of
// local steps × batch size in place of E·s), and T test samples:
//
//   train(S)  = 3·P · R · m · E · S / N      a federation over S training samples
//   cell      = train(N·s) + P · R · T       the cell's federation, evaluated each round
//             + train(target) + P · R · T    the membership target, when an attack trains
//                                            one (shared by the cell's attacks: the largest)
//             + Σ train(shadow samples)      every attack's shadow models (and a federation
//                                            run to an attack's observed round)
//             + Σ P_a · passes               every attack's other passes through its own
//                                            model (P_a parameters; DLG's evaluations)
//
// Each attack reports its samples and passes (AttackOps.work in attacks/attack.h); an
// attack without that slot counts as one more train(N·s). Within one matrix the cells
// share the data, model, federation and attacks, so differences between cells come from
// what a defense changes (an attack's curves, a swept parameter); across matrices the
// numbers compare the size of whole jobs. Sums saturate at UINT64_MAX.
#ifndef FEDPRIV_RUNNER_CELL_COST_H
#define FEDPRIV_RUNNER_CELL_COST_H

#include <stdint.h>

#include "attacks/attack.h"
#include "fl/experiment.h"

// train(samples) above for the experiment's federation and model of `params` parameters.
uint64_t cost_train(const FedConfig *fed, int n_train, uint64_t samples, uint64_t params);

// The cost of one cell: ex is the experiment with the cell's defense; attacks[k] its
// attacks, each with the environment it is validated in (env[k].ex may hold an attack's
// own model). FP_EPARAM when an attack's work() rejects its config.
FpStatus cost_cell(const Experiment *ex, const AttackOps *const *attacks, const AttackEnv *env, int n_attacks,
                   uint64_t *out, FpError *err);

#endif
