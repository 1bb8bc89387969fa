// `none`: plain FedAvg. Clients upload their weights untouched; no privacy is claimed.
#include <math.h>

#include "core/jsonv.h"
#include "defenses/defense.h"

static FpStatus none_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                            FpError *err) {
    static const char *const keys[] = {"name", NULL};
    FP_TRY(jv_keys(params, path, keys, err));
    *state = NULL;
    return FP_OK;
}

static void none_destroy(void *state) {}

static UploadKind none_upload_kind(const void *state) { return UPLOAD_WEIGHTS; }

static FpStatus none_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    return FP_OK;
}

static void none_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    *rec = (PrivacyRecord){.unit = "none",
                           .epsilon_round_nominal = INFINITY,
                           .epsilon_total_nominal = INFINITY,
                           .nominal_notion = "no privacy claimed",
                           .epsilon_total_sound = INFINITY,
                           .delta = 0,
                           .sound_notion = "no guarantee",
                           .sigma = -1};
    privacy_assume(rec, "no noise is added: the server and anyone on the uplink see each client's trained weights");
}

const DefenseOps defense_none = {
    .name = "none",
    .summary = "FedAvg without any defense (the baseline)",
    .variants = NULL,
    .create = none_create,
    .destroy = none_destroy,
    .upload_kind = none_upload_kind,
    .client_perturb = none_perturb,
    .privacy = none_privacy,
};
