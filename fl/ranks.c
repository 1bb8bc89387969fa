// One federation across ranks (see fl/fed.h): a slot's record (its upload and the
// defense's per-client state), and fed_round_finish's forming of a round's slots when
// several ranks share the clients: gathered (every record to every rank) or streamed
// (every upload to rank 0, which alone sums, then the aggregate to every rank).
//
// Why the result is bit-identical to one process: every slot is formed by the one
// client-upload path (fl/upload.c) from the same global weights and the same
// counter-based streams (seed, round, client), whichever rank runs it; the records are
// moved as bytes; and the uploads are added in client order by the engine's one summing
// code (defense_sum_add, defense_aggregate), on every rank (gathered) or on rank 0, whose
// aggregate the others receive as bytes (streamed). No floating-point sum is ever split by
// rank.
#include "fl/fed.h"

#include "fl/fed_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
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

// What was applied to slot s's upload, stated from the state the client left (the same
// call its own process made right after client_perturb).
static void slot_params_from_state(Federation *f, int slot, const DefenseRound *dr) {
    const DefenseOps *ops = f->s.defense;
    f->slot_params[slot] = upload_params_none();
    if (ops->upload_params)
        ops->upload_params(f->defense_state, dr, &f->slot_params[slot]);
}

FpStatus fed_round_load_slot(Federation *f, int slot, const void *record, FpError *err) {
    if (!f->round_open || slot < 0 || slot >= f->n_round)
        return fp_fail(err, FP_EPARAM, "slot %d is not a participant of a begun round", slot);
    const DefenseOps *ops = f->s.defense;
    size_t ub = upload_bytes(f);
    if (!fed_slot_buffer(f, slot, err))
        return FP_ENOMEM;
    memcpy(f->uploads[slot], record, ub);
    DefenseRound dr = fed_client_round(f, f->rounds_done, f->round_clients[slot]);
    if (ops->client_state_size && ops->client_state_load)
        ops->client_state_load(f->defense_state, &dr, (const char *)record + ub);
    slot_params_from_state(f, slot, &dr);
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

// Every rank learns whether every rank's part of the round went well (st is this rank's):
// the lowest failing rank and its status, the same on every rank.
static FpStatus agree_round(Federation *f, FpStatus st, FpError *err) {
    Comm *comm = f->s.comm;
    int R = comm_size(comm), me = comm_rank(comm);
    int code = st == FP_OK ? INT_MAX : me * 16 + (int)st, first = INT_MAX;
    FpError agree_err = {0};
    if (comm_min_int(comm, code, &first, &agree_err) != FP_OK) {
        if (st == FP_OK && err)
            *err = agree_err;
        return st == FP_OK ? agree_err.code : st; // the ranks cannot agree: nobody goes on
    }
    if (st == FP_OK && first != INT_MAX)
        st = fp_fail(err, (FpStatus)(first % 16), "rank %d of %d could not form its clients' uploads in round %d ("
                     FED_RANK_FAILED_NOTE ")", first / 16, R, f->rounds_done + 1);
    return st;
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
    //    leave the others waiting for its records).
    st = agree_round(f, st, err);
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

// -- a streamed round across ranks --------------------------------------------------------
// A defense whose server side is a running sum (DefenseOps.sum_add, or FedAvg's) needs the
// uploads once, in client order, and nowhere but where the sum is: rank 0. Slot s belongs
// to rank s mod R, so the ranks form the round's clients in turn and rank 0, adding in
// client order, finds the next upload just formed by the next rank instead of waiting for
// a whole block. Each rank forms up to `threads` of its slots at a time (fed_round_run)
// and sends each upload to rank 0 (MPI_Isend) with its status in the record's trailer,
// keeping at most a window of sends in flight beyond those (stream_window); rank 0 keeps a
// window of receives posted (MPI_Irecv), so transfers proceed while it trains its own clients. Every
// slot's record is sent exactly once, also after a failure (then with the failure's
// status and no upload), so no rank waits for a record that never comes. Rank 0 finishes
// the aggregate (sum_finish: the server's noise, keyed by the seed and the round) and
// broadcasts it. Memory per rank: the sum (n_params doubles, rank 0) and at most
// threads + window uploads, whatever the number of participants.
#define STREAM_WINDOW_MAX 16
#define STREAM_WINDOW_BYTES ((size_t)16 << 20)
#define STREAM_TAG 7001

// The window: uploads in flight between a rank and rank 0, as many as fit in
// STREAM_WINDOW_BYTES (2 to 16): enough that a rank descheduled for a moment does not
// stall the others, few enough that a large model keeps two.
static int stream_window(size_t bytes) {
    size_t w = STREAM_WINDOW_BYTES / (bytes ? bytes : 1);
    return w < 2 ? 2 : w > STREAM_WINDOW_MAX ? STREAM_WINDOW_MAX : (int)w;
}

// Test-only: FEDPRIV_TEST_SUM_BY_RANK=1 makes rank 0 add the uploads rank by rank (all of
// rank 0's, then rank 1's, ...) instead of in client order, each rank's part rounded to
// float before the next joins: what a reduction of the float uploads across ranks
// (MPI_Reduce with MPI_SUM) would compute. Float addition is not associative, so the
// result then differs from one process's; tests/test_cluster_cli.c sets it to show that
// its comparison catches that. (The order alone, in the double sum, changes a float
// result only rarely: a control of a few clients would not see it.)
static int sum_by_rank(void) {
    const char *v = getenv("FEDPRIV_TEST_SUM_BY_RANK");
    return v && *v && strcmp(v, "0") != 0;
}

static int slot_owner(int slot, int R) { return slot % R; }

static void trailer_set(float *record, size_t np, int64_t status) { memcpy(record + np, &status, sizeof status); }
static int64_t trailer_get(const float *record, size_t np) {
    int64_t status;
    memcpy(&status, record + np, sizeof status);
    return status;
}

// (fl/fed_internal.h)
void fed_rank_abort(Federation *f, const FpError *e) {
    fprintf(stderr, "fedpriv: rank %d of %d: %s\n", fed_rank(f), fed_ranks(f), e && e->msg[0] ? e->msg : "error");
    comm_abort(f->s.comm, 1);
}

// A rank other than 0: forms its slots mine[0..m) and sends each to rank 0 in order.
static FpStatus stream_send(Federation *f, const int *mine, int m, FpError *err) {
    Comm *comm = f->s.comm;
    size_t np = f->s.global->table.n_params, bytes = np * sizeof(float) + FED_SLOT_TRAILER;
    int T = f->threads, window = stream_window(bytes), cap = T + window;
    CommRequest **req = fp_calloc((size_t)cap, sizeof *req, err);
    int *req_slot = req ? fp_malloc(sizeof(int) * (size_t)cap, err) : NULL;
    float *fail = req_slot ? fp_calloc(1, bytes, err) : NULL;
    if (!fail) { // before any record: rank 0 waits for them, so the job cannot go on
        FpError e = {0};
        fp_fail(&e, FP_ENOMEM, "out of memory for the round's exchange");
        fed_rank_abort(f, &e);
        free(req);
        free(req_slot);
        return FP_ENOMEM;
    }
    FpStatus st = FP_OK;
    FpError comm_err = {0};
    int head = 0, pending = 0;
    for (int pos = 0; pos < m;) {
        // Room for a wave: the oldest sends done (rank 0 has their uploads).
        while (pending > window) {
            int s = req_slot[head];
            if (comm_wait(comm, &req[head], &comm_err) != FP_OK)
                fed_rank_abort(f, &comm_err);
            fed_slot_release(f, s);
            head = (head + 1) % cap;
            pending--;
        }
        int w = m - pos < T ? m - pos : T;
        if (st == FP_OK)
            st = fed_round_run(f, mine + pos, w, err);
        for (int i = 0; i < w; i++) {
            int s = mine[pos + i], at = (head + pending) % cap;
            float *rec = st == FP_OK ? f->uploads[s] : fail;
            trailer_set(rec, np, st == FP_OK ? 0 : (int64_t)st);
            if (comm_isend(comm, 0, STREAM_TAG, rec, bytes, &req[at], &comm_err) != FP_OK)
                fed_rank_abort(f, &comm_err);
            req_slot[at] = rec == fail ? -1 : s;
            pending++;
        }
        pos += w;
    }
    for (; pending > 0; pending--, head = (head + 1) % cap) {
        if (comm_wait(comm, &req[head], &comm_err) != FP_OK)
            fed_rank_abort(f, &comm_err);
        if (req_slot[head] >= 0)
            fed_slot_release(f, req_slot[head]);
    }
    free(fail);
    free(req_slot);
    free(req);
    return st;
}

// Rank 0: adds every slot's upload into sum in client order (its own, formed here in
// waves, and the others' as they arrive), then finishes the aggregate into agg. local[s]:
// the slot is here (rank 0's, or formed before the round finished); mine: rank 0's
// unformed slots, in order.
static FpStatus stream_sum(Federation *f, RoundSum *sum, const unsigned char *local, const int *mine, int m,
                           float *agg, FpError *err) {
    Comm *comm = f->s.comm;
    int R = comm_size(comm), n = f->n_round, T = f->threads;
    size_t np = f->s.global->table.n_params, bytes = np * sizeof(float) + FED_SLOT_TRAILER;
    int *order = fp_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1), err);
    int *remote = order ? fp_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1), err) : NULL;
    int window = stream_window(bytes);
    float *buf[STREAM_WINDOW_MAX] = {0};
    CommRequest *req[STREAM_WINDOW_MAX] = {0};
    int ok = remote != NULL;
    for (int b = 0; b < window && ok; b++)
        ok = (buf[b] = fp_malloc(bytes, err)) != NULL;
    if (!ok) {
        FpError e = {0};
        fp_fail(&e, FP_ENOMEM, "out of memory for the round's exchange");
        fed_rank_abort(f, &e); // the other ranks are sending: the job cannot go on
        for (int b = 0; b < window; b++)
            free(buf[b]);
        free(order);
        free(remote);
        return FP_ENOMEM;
    }
    int k = 0;
    if (sum_by_rank()) { // the control's wrong order (see sum_by_rank)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < n; s++)
                if ((local[s] ? 0 : slot_owner(s, R)) == r)
                    order[k++] = s;
    } else {
        for (int s = 0; s < n; s++)
            order[k++] = s;
    }
    int n_remote = 0;
    for (int i = 0; i < n; i++)
        if (!local[order[i]])
            remote[n_remote++] = order[i];
    FpStatus st = FP_OK;
    FpError comm_err = {0};
    int posted = 0, head = 0, rpos = 0, wave = 0, remote_failed = 0;
    for (; posted < window && rpos < n_remote; posted++, rpos++) {
        int at = (head + posted) % window;
        if (comm_irecv(comm, slot_owner(remote[rpos], R), STREAM_TAG, buf[at], bytes, &req[at], &comm_err) != FP_OK)
            fed_rank_abort(f, &comm_err);
    }
    int by_rank = sum_by_rank();
    for (int i = 0; i < n; i++) {
        int s = order[i];
        if (by_rank && i > 0 && (local[s] ? 0 : slot_owner(s, R)) != (local[order[i - 1]] ? 0 : slot_owner(order[i - 1], R)))
            for (size_t j = 0; j < np; j++) // the control: a rank's part in float
                sum->acc[j] = (float)sum->acc[j];
        if (local[s]) {
            if (!f->slot_done[s] && st == FP_OK) { // the next wave of rank 0's own slots (s first)
                int w = m - wave < T ? m - wave : T;
                st = fed_round_run(f, mine + wave, w, err);
                wave += w;
            }
            if (st == FP_OK && !remote_failed)
                fed_round_sum_add(f, sum, s, f->uploads[s]);
            fed_slot_release(f, s);
            continue;
        }
        if (comm_wait(comm, &req[head], &comm_err) != FP_OK)
            fed_rank_abort(f, &comm_err);
        if (trailer_get(buf[head], np) != 0)
            remote_failed = 1; // its rank says why; the agreement names it
        else if (st == FP_OK && !remote_failed)
            fed_round_sum_add(f, sum, s, buf[head]);
        posted--;
        if (rpos < n_remote) {
            if (comm_irecv(comm, slot_owner(remote[rpos], R), STREAM_TAG, buf[head], bytes, &req[head], &comm_err) !=
                FP_OK)
                fed_rank_abort(f, &comm_err);
            rpos++;
            posted++;
        }
        head = (head + 1) % window;
    }
    memset(agg, 0, np * sizeof(float));
    if (st == FP_OK && !remote_failed && (n > 0 || f->s.defense->release_empty_rounds))
        st = defense_sum_finish(f->s.defense, f->defense_state, f->rounds_done, n, np, sum->acc, agg, err);
    for (int b = 0; b < window; b++)
        free(buf[b]);
    free(order);
    free(remote);
    return st;
}

FpStatus fed_round_stream_ranks(Federation *f, RoundSum *sum, float *agg, FpError *err) {
    Comm *comm = f->s.comm;
    int R = comm_size(comm), me = comm_rank(comm), n = f->n_round;
    // A slot formed before the round finishes (fed_observe's, a crafted canary's) was
    // formed on every rank alike (every rank runs the same program): rank 0 takes its own.
    // local[s]: the slot is on rank 0; here[s]: it is formed on this rank.
    unsigned char *local = fp_malloc(2 * (size_t)(n > 0 ? n : 1), err), *here = local ? local + n : NULL;
    int *mine = local ? fp_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1), err) : NULL;
    FpStatus st = mine ? FP_OK : FP_ENOMEM;
    int m = 0;
    for (int s = 0; mine && s < n; s++) {
        local[s] = f->slot_done[s] || slot_owner(s, R) == 0;
        here[s] = f->slot_done[s] || slot_owner(s, R) == me;
        if (!f->slot_done[s] && slot_owner(s, R) == me)
            mine[m++] = s;
    }
    if (st == FP_OK)
        st = me == 0 ? stream_sum(f, sum, local, mine, m, agg, err) : stream_send(f, mine, m, err);
    // Every rank learns whether every one formed its uploads, then the aggregate.
    st = agree_round(f, st, err);
    if (st == FP_OK)
        st = comm_bcast(comm, 0, agg, f->s.global->table.n_params * sizeof(float), err);
    // What was applied to the uploads formed elsewhere (no client state travels in a
    // streamed round: fed_round_streams), for the round's record.
    for (int s = 0; st == FP_OK && s < n; s++)
        if (!here[s]) {
            DefenseRound dr = fed_client_round(f, f->rounds_done, f->round_clients[s]);
            slot_params_from_state(f, s, &dr);
            f->slot_done[s] = 1;
        }
    free(mine);
    free(local);
    return st;
}
