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

// ---- what the estimate costs in seconds, learned from the cells that ended ------------
// The estimate is relative work; what a unit of it costs in seconds depends on the
// machine and on what the estimate does not see (a defense's per-example gradients, an
// attack's inner loops). So the runner learns, per kind of cell (the defense object a
// cell comes from: its cells differ only in swept values and seed), the rate
//
//   rate(kind) = Σ seconds / Σ cost      over the cells of that kind that ended,
//
// and predicts a cell's seconds as rate(kind) × its cost; a kind with no cell ended yet
// takes the rate pooled over every kind. A ratio of sums, so one cell's noise weighs by
// its size, and a cell of cost 0 counts as cost 1.
typedef struct CostRates CostRates;

CostRates *cost_rates_create(int n_kinds); // NULL: out of memory
void cost_rates_free(CostRates *r);
// A cell of this kind and estimated cost ended after `seconds` (kind outside [0,
// n_kinds) counts in the pool only).
void cost_rates_add(CostRates *r, int kind, uint64_t cost, double seconds);
// The predicted seconds of a cell of this kind and cost; NaN while no cell has ended.
double cost_rates_predict(const CostRates *r, int kind, uint64_t cost);

#endif
