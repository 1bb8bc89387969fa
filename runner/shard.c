// Shards of a matrix (runner/shard.h).
#include "runner/shard.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

// A plain decimal number (digits only, no sign or space) in [lo, hi]; 0 when not.
static int parse_count(const char *s, long lo, long hi, long *out) {
    if (!s || !*s || strlen(s) > 12)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

// Why the Slurm variable `name` (its value s, NULL: unset) is not a count in [lo, hi],
// into why; 1 (and *out) when it is one. "not set", "\"x\" (a number was expected)", or
// for a plain number out of range what the range is ("\"0\": the count of tasks must be
// at least 1"): a number is never called not a number.
static int slurm_count(const char *name, const char *what, const char *s, long lo, long hi, long *out, char *why,
                       size_t n) {
    if (parse_count(s, lo, hi, out))
        return 1;
    int digits = s && *s;
    for (const char *p = s; digits && *p; p++)
        digits = *p >= '0' && *p <= '9';
    if (!s)
        snprintf(why, n, "%s is not set (Slurm sets it for every task of a job array)", name);
    else if (!digits)
        snprintf(why, n, "%s is \"%.40s\" (a number was expected; Slurm sets it for every task of a job array)", name,
                 s);
    else
        snprintf(why, n, "%s is \"%.40s\": the %s must be at %s %ld", name, s, what,
                 strtod(s, NULL) < lo ? "least" : "most", strtod(s, NULL) < lo ? lo : hi);
    return 0;
}

FpStatus shard_parse(const char *text, ShardSpec *out, FpError *err) {
    const char *slash = text ? strchr(text, '/') : NULL;
    char k[16] = "";
    long kv, nv;
    if (slash && (size_t)(slash - text) < sizeof k) {
        memcpy(k, text, (size_t)(slash - text));
        k[slash - text] = 0;
    }
    if (!slash || !parse_count(k, 1, SHARD_MAX, &kv) || !parse_count(slash + 1, 1, SHARD_MAX, &nv) || kv > nv)
        return fp_fail(err, FP_EPARAM, "--shard: expected K/N with 1 <= K <= N <= %d (e.g. 2/8) or \"slurm\", got "
                       "\"%.40s\"", SHARD_MAX, text ? text : "");
    out->index = (int)kv - 1;
    out->count = (int)nv;
    return FP_OK;
}

FpStatus shard_from_slurm(const SlurmArrayEnv *env, ShardSpec *out, FpError *err) {
    if (!env->task_id)
        return fp_fail(err, FP_EPARAM, "--shard slurm: SLURM_ARRAY_TASK_ID is not set: this is not a task of a Slurm "
                       "job array (submit with sbatch --array=0-N, or give --shard K/N)");
    long id, lo, count, step = 1, hi;
    char why[200];
    if (!slurm_count("SLURM_ARRAY_TASK_ID", "task index", env->task_id, 0, INT_MAX, &id, why, sizeof why) ||
        !slurm_count("SLURM_ARRAY_TASK_MIN", "first index", env->task_min, 0, INT_MAX, &lo, why, sizeof why) ||
        !slurm_count("SLURM_ARRAY_TASK_COUNT", "count of tasks (shards)", env->task_count, 1, SHARD_MAX, &count, why,
                     sizeof why) ||
        (env->task_step &&
         !slurm_count("SLURM_ARRAY_TASK_STEP", "step", env->task_step, 1, INT_MAX, &step, why, sizeof why)))
        return fp_fail(err, FP_EPARAM, "--shard slurm: %s", why);
    // The last index of the sequence MIN, MIN+STEP, ... of COUNT indices.
    long long last = (long long)lo + (long long)step * (count - 1);
    if (env->task_max) {
        if (!parse_count(env->task_max, 0, INT_MAX, &hi))
            return fp_fail(err, FP_EPARAM, "--shard slurm: SLURM_ARRAY_TASK_MAX is \"%.40s\" (a number was expected)",
                           env->task_max);
        if (hi != last)
            return fp_fail(err, FP_EPARAM, "--shard slurm: the array's %ld indices from %ld to %ld are not one "
                           "sequence with step %ld (SLURM_ARRAY_TASK_MIN/MAX/COUNT/STEP): use --array=A-B or A-B:S, "
                           "or give --shard K/N", count, lo, hi, step);
    }
    if (id < lo || id > last || (id - lo) % step != 0)
        return fp_fail(err, FP_EPARAM, "--shard slurm: task %ld is not in the sequence %ld, %ld, ... %lld of "
                       "SLURM_ARRAY_TASK_MIN/STEP/COUNT: use --array=A-B or A-B:S, or give --shard K/N", id, lo,
                       lo + step, last);
    out->index = (int)((id - lo) / step);
    out->count = (int)count;
    return FP_OK;
}

typedef struct {
    const uint64_t *cost;
    int i;
} Ranked;

static int by_cost_desc(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    uint64_t cx = x->cost[x->i], cy = y->cost[y->i];
    if (cx != cy)
        return cx > cy ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

void shard_order_by_cost(const uint64_t *cost, int n, int *order) {
    Ranked *r = malloc(sizeof(Ranked) * (size_t)(n > 0 ? n : 1));
    if (!r) { // no memory to sort: matrix order is still a valid order
        for (int i = 0; i < n; i++)
            order[i] = i;
        return;
    }
    for (int i = 0; i < n; i++)
        r[i] = (Ranked){cost, i};
    qsort(r, (size_t)n, sizeof *r, by_cost_desc);
    for (int i = 0; i < n; i++)
        order[i] = r[i].i;
    free(r);
}

// A binary min-heap of shards by (load, index).
typedef struct {
    uint64_t load;
    int shard;
} Bin;

static int bin_less(const Bin *a, const Bin *b) { return a->load != b->load ? a->load < b->load : a->shard < b->shard; }

static void sift_down(Bin *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && bin_less(&h[l], &h[m]))
            m = l;
        if (r < n && bin_less(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        Bin t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

FpStatus shard_assign(const uint64_t *cost, int n, int count, int *owner, FpError *err) {
    if (count < 1 || count > SHARD_MAX)
        return fp_fail(err, FP_EPARAM, "shard count %d out of [1, %d]", count, SHARD_MAX);
    int *order = fp_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1), err);
    Bin *heap = fp_malloc(sizeof(Bin) * (size_t)count, err);
    if (!order || !heap) {
        free(order);
        free(heap);
        return FP_ENOMEM;
    }
    shard_order_by_cost(cost, n, order);
    for (int s = 0; s < count; s++) // loads all 0, indices ascending: already a heap
        heap[s] = (Bin){0, s};
    for (int k = 0; k < n; k++) {
        int i = order[k];
        owner[i] = heap[0].shard;
        uint64_t c = cost[i] ? cost[i] : 1; // a cell is never free: empty shards fill first
        heap[0].load = heap[0].load > UINT64_MAX - c ? UINT64_MAX : heap[0].load + c;
        sift_down(heap, count, 0);
    }
    free(order);
    free(heap);
    return FP_OK;
}
