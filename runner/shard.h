// Shards of a matrix for job arrays: `fedpriv matrix F.json --out DIR --shard K/N` runs
// the cells of shard K (1-based) of N; `--shard slurm` takes K and N from the Slurm job
// array the process runs in. The assignment depends on the matrix alone (never on what
// is already on disk), so every task of an array, started in any order and on any
// machine, agrees on it; together the N shards cover every cell exactly once.
//
// Balance: longest processing time first (Graham 1969). Cells in order of decreasing
// estimated cost (runner/cell_cost.h; ties by matrix order) each go to the shard with the
// least cost so far (ties: the lowest shard). The largest shard's total is at most
// 4/3 − 1/(3N) of the best possible; with equal costs shard sizes differ by at most one.
#ifndef FEDPRIV_RUNNER_SHARD_H
#define FEDPRIV_RUNNER_SHARD_H

#include <stdint.h>

#include "core/status.h"

#define SHARD_MAX 100000

typedef struct ShardSpec {
    int index; // 0-based
    int count; // >= 1
} ShardSpec;

// "K/N" with 1 <= K <= N <= SHARD_MAX (plain decimal numbers) → index K−1, count N.
// Anything else is FP_EPARAM naming the option.
FpStatus shard_parse(const char *text, ShardSpec *out, FpError *err);

// The Slurm job-array variables of this task (the strings of the environment; NULL when
// unset). Slurm sets COUNT to the number of tasks, MIN and MAX to the lowest and highest
// index, and STEP to the step of an "A-B:S" range (1 otherwise, even for a list).
typedef struct SlurmArrayEnv {
    const char *task_id, *task_min, *task_max, *task_count, *task_step;
} SlurmArrayEnv;

// Shard (ID − MIN) / STEP of COUNT. The array must be the arithmetic sequence MIN, MIN +
// STEP, ..., MAX of COUNT indices (--array=A-B or A-B:S, with or without a %limit); ID,
// MIN and COUNT are required, STEP defaults to 1, MAX is checked when set. A list such
// as --array=1,3,7 or an index off the sequence is FP_EPARAM saying what to do instead.
FpStatus shard_from_slurm(const SlurmArrayEnv *env, ShardSpec *out, FpError *err);

// owner[i] = the shard (0-based) of cell i of n, for `count` shards, by cost[i].
FpStatus shard_assign(const uint64_t *cost, int n, int count, int *owner, FpError *err);

// The cells in order of decreasing cost, ties by index (order has n entries).
void shard_order_by_cost(const uint64_t *cost, int n, int *order);

#endif
