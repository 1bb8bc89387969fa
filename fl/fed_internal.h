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
    float **uploads;          // per slot (allocated on first use)
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

// fed_round_finish's forming of the missing slots with several ranks (fl/ranks.c):
// each rank forms its block, every record reaches every rank.
FpStatus fed_round_form_ranks(Federation *f, FpError *err);

#endif
