// The federation's state, shared by the engine's files (fed.c: rounds; upload.c: the
// client-upload path; observe.c: victims and observation points). Not a public header.
#ifndef FEDPRIV_FL_FED_INTERNAL_H
#define FEDPRIV_FL_FED_INTERNAL_H

#include "fl/fed.h"

// One worker's resources, reused across rounds.
typedef struct Worker {
    Tape *tape;
    Model *local;
    float *momentum;     // device, n_params
    float *host_local;   // the local model's parameters on the host
    float *upload;       // a streamed round's upload in flight (fl/fed.c round_stream), n_params
} Worker;

// A client whose data were given (fed_set_client_data).
typedef struct ClientOverride {
    const Dataset *data;
    uint32_t *idx;
    int n;
    int probe;
} ClientOverride;

struct Federation {
    FedSetup s;
    Partition *own_partition;
    const Partition *part;
    void *defense_state;
    DefenseSetup dsetup;
    int *client_samples;      // DefenseSetup.client_samples: the configured share of each client
    UploadKind kind;          // the defense's upload kind (fixed at creation)
    int threads;
    Worker workers[FED_MAX_THREADS];
    float *global_host;       // the begun round's global weights
    // The begun round: participants in slots 0..n_round-1 (increasing client order).
    int round_open;           // 1 between fed_round_begin and fed_round_finish
    int n_round;
    int *round_clients;
    float **uploads;          // per slot: an upload formed and not yet summed (fed_slot_buffer), or NULL
    UploadParams *slot_params;
    unsigned char *slot_done;
    double round_t0, run_t0;
    int run_first;
    uint32_t *sample_perm;    // client sampling scratch (clients entries)
    char *sample_chosen;
    FedRoundResult *results;
    int rounds_done;
    int *participations;      // per client: rounds it took part in
    uint32_t *server_idx;     // training samples no client trains on (DefenseSetup.server_idx)
    ClientOverride **override; // per client, NULL = its partition share (allocated on first use)
    char *rank_records;       // across ranks: the round's slot records (fl/ranks.c), kept between rounds
    size_t rank_records_size;
};

// Client k's local data and procedure.
int fed_client_samples(const Federation *f, int k);
void fed_client_data(const Federation *f, int k, const Dataset **d, const uint32_t **idx, int *n);
LocalTrainConfig fed_client_local(const Federation *f, int k);

// The DefenseRound of (round, client): the one construction site (fl/upload.c).
DefenseRound fed_defense_round(const Federation *f, int round, int client);

// The DefenseRound of a participant of the begun round with its local data and the
// round's cohort (the client's model is set where it trains: NULL here).
DefenseRound fed_client_round(const Federation *f, int round, int client);

// The client-upload path (fl/upload.h): client's upload in the begun round, formed on
// worker wk into upload (host, n_params), with what the defense applied.
FpStatus fed_client_upload(Federation *f, Worker *wk, int round, int client, float *upload, UploadParams *params,
                           FpError *err);

// Slot s's upload buffer (n_params floats and FED_SLOT_TRAILER bytes after them, where
// fl/ranks.c puts a streamed record's status), allocated on first use; NULL out of memory.
#define FED_SLOT_TRAILER 8
float *fed_slot_buffer(Federation *f, int slot, FpError *err);
// Frees slot s's buffer once its upload is summed (a streamed round keeps none).
void fed_slot_release(Federation *f, int slot);

// The running sum of a round (streamed: DefenseOps.sum_add, or FedAvg's): acc holds the
// uploads added so far, in client order; weights[s] is slot s's FedAvg weight.
typedef struct RoundSum {
    double *acc;       // n_params
    double *weights;   // n_round
} RoundSum;
// Adds slot s's upload (every earlier slot's first) and calls the on_upload hook: the one
// place a streamed round's upload joins the aggregate.
void fed_round_sum_add(Federation *f, RoundSum *sum, int slot, const float *upload);

// Whether the begun round is streamed (a running sum: each upload summed as it arrives)
// rather than gathered (every upload held, then DefenseOps.server_aggregate or, across
// ranks where a hook or client state needs every upload everywhere, the sum over them).
int fed_round_streams(const Federation *f);

// fed_round_finish's forming of the missing slots of a gathered round with several ranks
// (fl/ranks.c): each rank forms its block, every record reaches every rank.
FpStatus fed_round_form_ranks(Federation *f, FpError *err);
// A broken exchange across ranks (an MPI call failed, or a rank cannot take part in a
// streamed round) leaves the other ranks waiting for records that will not come: says
// why on stderr and ends the job (core/comm.h comm_abort).
void fed_rank_abort(Federation *f, const FpError *e);
// A streamed round across ranks (fl/ranks.c): the slots go to the ranks in turn (slot s to
// rank s mod R), each rank forms its own and sends them to rank 0 as they are formed,
// rank 0 adds every upload into sum in client order and finishes the aggregate into agg,
// which reaches every rank (one broadcast). On return every slot is formed (its
// UploadParams stated on every rank) and agg is the round's aggregate on every rank.
FpStatus fed_round_stream_ranks(Federation *f, RoundSum *sum, float *agg, FpError *err);

#endif
