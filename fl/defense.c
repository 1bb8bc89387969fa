// What the defense contract (fl/defense.h) defines itself: the names of guarantees, how
// a privacy record is settled (privacy_assume, privacy_record_settle, defense_privacy),
// and `none`, plain FedAvg: clients upload their weights untouched and no privacy is
// claimed. The engine runs it when it is given no defense; the registry lists it.
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "fl/defense.h"

const char *guarantee_name(Guarantee g) {
    static const char *const names[] = {[GUARANTEE_NONE] = "none", [GUARANTEE_CONDITIONAL] = "conditional",
                                        [GUARANTEE_PROVEN] = "proven"};
    return (unsigned)g < sizeof names / sizeof names[0] ? names[g] : "none";
}

// Appends sentence to one label's list (once); a full list makes the label NONE.
static void assume_in(const char **list, Guarantee *g, const char *sentence) {
    if (!sentence)
        return;
    for (int i = 0; i < PRIVACY_MAX_ASSUMPTIONS; i++) {
        if (!list[i]) {
            list[i] = sentence;
            return;
        }
        if (strcmp(list[i], sentence) == 0)
            return;
    }
    *g = GUARANTEE_NONE; // it cannot say all it assumes
}

void privacy_assume(PrivacyRecord *rec, const char *sentence) {
    assume_in(rec->assumptions, &rec->guarantee, sentence);
}

void privacy_assume_upload(PrivacyRecord *rec, const char *sentence) {
    assume_in(rec->upload_assumptions, &rec->upload_guarantee, sentence);
}

typedef struct MemoEntry {
    char *key;
    double values[DEFENSE_MEMO_VALUES];
    int n;                      // values held (0 for an object)
    void *obj;                  // defense_memo_put_object's, owned
    void (*free_obj)(void *);
} MemoEntry;

struct DefenseMemo {
    pthread_mutex_t lock;
    MemoEntry *entries;
    int n, cap;
};

DefenseMemo *defense_memo_create(void) {
    DefenseMemo *m = calloc(1, sizeof *m);
    if (m && pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        m = NULL;
    }
    return m;
}

void defense_memo_free(DefenseMemo *m) {
    if (!m)
        return;
    for (int i = 0; i < m->n; i++) {
        free(m->entries[i].key);
        if (m->entries[i].obj)
            m->entries[i].free_obj(m->entries[i].obj);
    }
    free(m->entries);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

// The entry of key, or NULL (the caller holds the lock). A memo holds a handful of
// entries (one per distinct configuration), so a scan is enough.
static MemoEntry *memo_find(DefenseMemo *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->entries[i].key, key) == 0)
            return &m->entries[i];
    return NULL;
}

int defense_memo_get(DefenseMemo *m, const char *key, double *values, int n) {
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    const MemoEntry *e = memo_find(m, key);
    int found = e && e->n == n;
    if (found)
        memcpy(values, e->values, sizeof(double) * (size_t)n);
    pthread_mutex_unlock(&m->lock);
    return found;
}

// A new entry for key, or NULL out of memory (the caller holds the lock).
static MemoEntry *memo_add(DefenseMemo *m, const char *key) {
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 8;
        MemoEntry *grown = realloc(m->entries, sizeof *grown * (size_t)cap);
        if (!grown)
            return NULL;
        m->entries = grown;
        m->cap = cap;
    }
    char *k = strdup(key);
    if (!k)
        return NULL;
    MemoEntry *e = &m->entries[m->n++];
    *e = (MemoEntry){.key = k};
    return e;
}

void defense_memo_put(DefenseMemo *m, const char *key, const double *values, int n) {
    if (!m || n < 1 || n > DEFENSE_MEMO_VALUES)
        return;
    pthread_mutex_lock(&m->lock);
    MemoEntry *e = memo_find(m, key) ? NULL : memo_add(m, key);
    if (e) {
        e->n = n;
        memcpy(e->values, values, sizeof(double) * (size_t)n);
    }
    pthread_mutex_unlock(&m->lock);
}

void *defense_memo_get_object(DefenseMemo *m, const char *key) {
    if (!m)
        return NULL;
    pthread_mutex_lock(&m->lock);
    const MemoEntry *e = memo_find(m, key);
    void *obj = e ? e->obj : NULL;
    pthread_mutex_unlock(&m->lock);
    return obj;
}

void *defense_memo_put_object(DefenseMemo *m, const char *key, void *obj, void (*free_obj)(void *)) {
    if (!m || !obj || !free_obj)
        return NULL;
    pthread_mutex_lock(&m->lock);
    MemoEntry *e = memo_find(m, key);
    void *stored = NULL;
    if (e)
        stored = e->obj; // another thread's (NULL if the key holds values)
    else if ((e = memo_add(m, key)) != NULL) {
        e->obj = obj;
        e->free_obj = free_obj;
        stored = obj;
    }
    pthread_mutex_unlock(&m->lock);
    return stored;
}

int defense_memo_size(DefenseMemo *m) {
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    int n = m->n;
    pthread_mutex_unlock(&m->lock);
    return n;
}

// One figure of a record under its settled guarantee: a conditional bound moves to *cond,
// and *fig keeps only a proven bound (∞ otherwise, or when none was stated).
static void settle_figure(Guarantee g, double *fig, double *cond) {
    *cond = g == GUARANTEE_CONDITIONAL ? *fig : NAN;
    if (g != GUARANTEE_PROVEN || isnan(*fig))
        *fig = INFINITY;
}

// One label by the rule: PROVEN with assumptions is CONDITIONAL, CONDITIONAL without any
// is NONE, and a figure that is not a number has none.
static Guarantee settle_label(Guarantee g, const char *const *assumptions, double fig) {
    int n = 0;
    while (n < PRIVACY_MAX_ASSUMPTIONS && assumptions[n])
        n++;
    if ((unsigned)g > GUARANTEE_PROVEN)
        g = GUARANTEE_NONE;
    if (g == GUARANTEE_PROVEN && n > 0)
        g = GUARANTEE_CONDITIONAL; // a bound that needs assumptions is not proven
    if (g == GUARANTEE_CONDITIONAL && n == 0)
        g = GUARANTEE_NONE;        // nor is one that does not say what it needs
    return isnan(fig) ? GUARANTEE_NONE : g;
}

void privacy_record_settle(PrivacyRecord *rec) {
    rec->guarantee = settle_label(rec->guarantee, rec->assumptions, rec->epsilon_total_sound);
    settle_figure(rec->guarantee, &rec->epsilon_total_sound, &rec->epsilon_total_conditional);
    if (!rec->upload_own_label) { // one bound for both observers: one label
        rec->upload_guarantee = rec->guarantee;
        memcpy(rec->upload_assumptions, rec->assumptions, sizeof rec->assumptions);
    } else {
        rec->upload_guarantee = rec->upload_notion ? settle_label(rec->upload_guarantee, rec->upload_assumptions,
                                                                  rec->epsilon_total_upload)
                                                   : GUARANTEE_NONE;
    }
    settle_figure(rec->upload_guarantee, &rec->epsilon_total_upload, &rec->epsilon_total_upload_conditional);
    if (rec->coordinate_notion)
        settle_figure(rec->guarantee, &rec->epsilon_total_coordinate, &rec->epsilon_total_coordinate_conditional);
    else
        rec->epsilon_total_coordinate = rec->epsilon_total_coordinate_conditional = NAN;
}

void privacy_record_unaccounted(PrivacyRecord *rec, const char *reason) {
    *rec = (PrivacyRecord){.sigma = -1, .guarantee = GUARANTEE_NONE, .upload_guarantee = GUARANTEE_NONE};
    rec->epsilon_round_nominal = rec->epsilon_total_nominal = rec->epsilon_total_sound = NAN;
    rec->epsilon_total_conditional = rec->epsilon_total_upload = rec->epsilon_total_upload_conditional = NAN;
    rec->epsilon_total_coordinate = rec->epsilon_total_coordinate_conditional = NAN;
    rec->epsilon_standard_rdp = rec->epsilon_standard_pld = rec->delta = NAN;
    privacy_assume(rec, reason);
}

FpStatus defense_privacy(const DefenseOps *ops, const void *state, int rounds_done, PrivacyRecord *rec,
                         FpError *err) {
    *rec = (PrivacyRecord){.sigma = -1};
    ops->privacy(state, rounds_done, rec);
    // NaN is never an ε: the slot's convention for an account that ran out of memory
    // (DefenseOps.privacy), which settling would otherwise show as a complete "no guarantee".
    if (isnan(rec->epsilon_total_sound) || isnan(rec->epsilon_round_nominal) || isnan(rec->epsilon_total_nominal) ||
        (rec->upload_notion && isnan(rec->epsilon_total_upload)) ||
        (rec->standard_notion && (isnan(rec->epsilon_standard_rdp) || isnan(rec->epsilon_standard_pld))))
        return fp_fail(err, FP_ENOMEM, "out of memory while accounting privacy");
    privacy_record_settle(rec);
    return FP_OK;
}

// -- aggregation ------------------------------------------------------------------------------
int defense_gathers(const DefenseOps *ops) { return ops->server_aggregate != NULL; }
int defense_aggregation_valid(const DefenseOps *ops) {
    int sum = ops->sum_add != NULL, finish = ops->sum_finish != NULL;
    return sum == finish && !(sum && ops->server_aggregate);
}
int defense_aggregates(const DefenseOps *ops) { return ops->server_aggregate || ops->sum_finish; }

// FedAvg's running sum: in double, clients in order (deterministic and accurate).
void defense_fedavg_sum_add(size_t n, double *acc, const float *upload, double weight) {
    for (size_t i = 0; i < n; i++)
        acc[i] += weight * upload[i];
}

void defense_sum_add(const DefenseOps *ops, const void *state, int round, int k, size_t n, double *acc,
                     const float *upload, double weight) {
    if (ops->sum_add)
        ops->sum_add(state, round, k, acc, upload, weight);
    else
        defense_fedavg_sum_add(n, acc, upload, weight);
}

FpStatus defense_sum_finish(const DefenseOps *ops, void *state, int round, int k, size_t n, const double *acc,
                            float *out, FpError *err) {
    if (ops->sum_finish)
        return ops->sum_finish(state, round, k, acc, out, err);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)acc[i];
    return FP_OK;
}

FpStatus defense_aggregate(const DefenseOps *ops, void *state, int round, const float *const *uploads,
                           const double *weights, const int *clients, int k, size_t n, float *out, FpError *err) {
    if (ops->server_aggregate)
        return ops->server_aggregate(state, round, uploads, weights, clients, k, out, err);
    double *acc = calloc(n ? n : 1, sizeof(double));
    if (!acc)
        return fp_fail(err, FP_ENOMEM, "out of memory aggregating");
    for (int s = 0; s < k; s++)
        defense_sum_add(ops, state, round, k, n, acc, uploads[s], weights[s]);
    FpStatus st = defense_sum_finish(ops, state, round, k, n, acc, out, err);
    free(acc);
    return st;
}

// The keys create() accepts, also what takes_param answers from.
static const char *const none_keys[] = {"name", NULL};
static int none_takes_param(const char *key) { return jv_key_in(key, none_keys); }

static FpStatus none_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                            FpError *err) {
    FP_TRY(jv_keys(params, path, none_keys, err));
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
    .takes_param = none_takes_param,
};
