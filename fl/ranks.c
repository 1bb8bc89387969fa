// One federation across ranks (see fl/fed.h): a slot's record (its upload and the
// defense's per-client state), and fed_round_finish's forming of a round's slots when
// several ranks share the clients.
//
// Why the result is bit-identical to one process: every slot is formed by the one
// client-upload path (fl/upload.c) from the same global weights and the same
// counter-based streams (seed, round, client), whichever rank runs it; the records are
// moved as bytes; and every rank aggregates all slots itself, in client order, with the
// engine's own aggregate(). No floating-point sum is ever split by rank.
#include "fl/fed.h"

#include "fl/fed_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int fed_ranks(const Federation *f) { return comm_size(f->s.comm); }
int fed_rank(const Federation *f) { return comm_rank(f->s.comm); }

// -- a slot's record ---------------------------------------------------------------------
static size_t upload_bytes(const Federation *f) { return f->s.global->table.n_params * sizeof(float); }

size_t fed_slot_record_size(const Federation *f) {
    size_t b = upload_bytes(f) + f->s.defense->client_state_size;
    return (b + 7) & ~(size_t)7; // records start 8-byte aligned in a block of them
}

FpStatus fed_round_save_slot(const Federation *f, int slot, void *record, FpError *err) {
    if (!f->round_open || slot < 0 || slot >= f->n_round || !f->slot_done[slot])
        return fp_fail(err, FP_EPARAM, "slot %d is not a formed slot of a begun round", slot);
    const DefenseOps *ops = f->s.defense;
    size_t ub = upload_bytes(f);
    memset(record, 0, fed_slot_record_size(f));
    memcpy(record, f->uploads[slot], ub);
    if (ops->client_state_size && ops->client_state_save) {
        DefenseRound dr = fed_client_round(f, f->rounds_done, f->round_clients[slot]);
        ops->client_state_save(f->defense_state, &dr, (char *)record + ub);
    }
    return FP_OK;
}

FpStatus fed_round_load_slot(Federation *f, int slot, const void *record, FpError *err) {
    if (!f->round_open || slot < 0 || slot >= f->n_round)
        return fp_fail(err, FP_EPARAM, "slot %d is not a participant of a begun round", slot);
    const DefenseOps *ops = f->s.defense;
    size_t ub = upload_bytes(f);
    memcpy(f->uploads[slot], record, ub);
    DefenseRound dr = fed_client_round(f, f->rounds_done, f->round_clients[slot]);
    if (ops->client_state_size && ops->client_state_load)
        ops->client_state_load(f->defense_state, &dr, (const char *)record + ub);
    // What was applied, stated from the state the client left (the same call its own
    // process made right after client_perturb).
    f->slot_params[slot] = upload_params_none();
    if (ops->upload_params)
        ops->upload_params(f->defense_state, &dr, &f->slot_params[slot]);
    f->slot_done[slot] = 1;
    return FP_OK;
}

// -- the round across ranks ----------------------------------------------------------------
// Contiguous blocks of slots, bounds[r] .. bounds[r+1] for rank r, of about equal
// estimated cost (the client's local SGD steps, at least 1): the same on every rank.
static FpStatus split_slots(const Federation *f, int R, int *bounds, FpError *err) {
    int n = f->n_round;
    long long *cum = fp_malloc(sizeof(long long) * ((size_t)n + 1), err);
    if (!cum)
        return FP_ENOMEM;
    cum[0] = 0;
    for (int s = 0; s < n; s++) {
        int k = f->round_clients[s];
        LocalTrainConfig lc = fed_client_local(f, k);
        long steps = local_train_steps(&lc, fed_client_samples(f, k));
        cum[s + 1] = cum[s] + (steps > 0 ? steps : 1);
    }
    bounds[0] = 0;
    for (int r = 1; r < R; r++) {
        int b = bounds[r - 1];
        // The first slot whose cost so far reaches r/R of the total.
        while (b < n && (double)cum[b] * R < (double)cum[n] * r)
            b++;
        bounds[r] = b;
    }
    bounds[R] = n;
    free(cum);
    return FP_OK;
}

FpStatus fed_round_form_ranks(Federation *f, FpError *err) {
    Comm *comm = f->s.comm;
    int R = comm_size(comm), me = comm_rank(comm), n = f->n_round;
    // A hook that watches local models sees them where they train: every rank trains
    // every client (the same result, without the speed-up).
    if (f->s.hooks.on_local_model)
        return fed_round_run(f, NULL, 0, err);
    size_t rec = fed_slot_record_size(f);
    int *bounds = fp_malloc(sizeof(int) * ((size_t)R + 1), err);
    size_t *offsets = bounds ? fp_malloc(sizeof(size_t) * ((size_t)R + 1), err) : NULL;
    int *mine = offsets ? fp_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1), err) : NULL;
    // The records' buffer lives with the federation: a fresh one every round would be
    // mapped and faulted in again (tens of MB for a round of a hundred MLP clients).
    size_t need = rec * (size_t)(n > 0 ? n : 1);
    if (mine && f->rank_records_size < need) {
        free(f->rank_records);
        f->rank_records_size = 0;
        if ((f->rank_records = fp_malloc(need, err)))
            f->rank_records_size = need;
    }
    char *records = mine ? f->rank_records : NULL;
    FpStatus st = records ? split_slots(f, R, bounds, err) : FP_ENOMEM;
    // 1. This rank's block.
    if (st == FP_OK) {
        int m = 0;
        for (int s = bounds[me]; s < bounds[me + 1]; s++)
            mine[m++] = s;
        st = fed_round_run(f, mine, m, err);
    }
    for (int s = bounds ? bounds[me] : 0; st == FP_OK && s < bounds[me + 1]; s++)
        st = fed_round_save_slot(f, s, records + rec * (size_t)s, err);
    // 2. Every rank learns whether all formed their blocks (a rank that could not would
    //    leave the others waiting for its records): the lowest failing rank and its status.
    int code = st == FP_OK ? INT_MAX : me * 16 + (int)st, first = INT_MAX;
    FpError agree_err = {0};
    if (comm_min_int(comm, code, &first, &agree_err) != FP_OK) {
        if (st == FP_OK && err)
            *err = agree_err;
        st = st == FP_OK ? agree_err.code : st;
        first = INT_MIN; // the ranks cannot agree: nobody exchanges
    }
    if (st == FP_OK && first != INT_MAX)
        st = fp_fail(err, first >= 0 ? (FpStatus)(first % 16) : FP_EBACKEND,
                     "rank %d of %d could not form its clients' uploads in round %d (" FED_RANK_FAILED_NOTE ")",
                     first / 16, R, f->rounds_done + 1);
    // 3. Every block to every rank, then the others' records into this federation.
    if (st == FP_OK) {
        for (int r = 0; r <= R; r++)
            offsets[r] = rec * (size_t)bounds[r];
        st = comm_share_blocks(comm, records, offsets, err);
    }
    for (int s = 0; st == FP_OK && s < n; s++)
        if (s < bounds[me] || s >= bounds[me + 1])
            st = fed_round_load_slot(f, s, records + rec * (size_t)s, err);
    free(mine);
    free(offsets);
    free(bounds);
    return st;
}
