// `client-membership`: did this client take part? The question client-level DP answers
// (DP-FedAvg, McMahan et al. 2018: neighbouring federations differ by one client's whole
// data), asked of the configured federation itself, from what anyone who receives the
// model sees: the global model released after every round (the public observer).
//
// The attacker knows the federation's procedure and holds each candidate client's data
// (the strongest position short of seeing uploads; the server, who sees them, knows who
// took part anyway). For round t it replays candidate k's local procedure from the
// released θ_t on k's data with its own minibatch order (it does not know the client's),
// giving u_k, and reads the released update Δ_t = θ_{t+1} − θ_t, which is the mean of the
// participants' uploads plus any noise. Every client's update shares a common direction
// (in an IID federation most of it), so the score is the projection of what is left of
// Δ_t once the candidates' mean update ū is taken out, onto what is peculiar to k:
//     s(k, t) = ⟨Δ_t − ū, u_k − ū⟩ / ‖u_k − ū‖,
// standardised over the candidates of the round (z-score), so rounds of different update
// size weigh alike. A participant's own update is in Δ_t and raises its score; clipping
// does not change a direction; noise of the defense buries it.
//
// Two tests, both from these scores:
//   per round (the headline): members are the (k, t) with k among round t's participants
//     (the engine's record, FedRoundResult.clients), non-members every other (k, t). With
//     q < 1 there are many of both in any federation, so TPR at 0.1% FPR is resolved.
//   per client ("did k take part at all?"): k's score is its largest z over the rounds;
//     members took part in some round, non-members in none. Reported when at least
//     CM_MIN_CLIENT_NON_MEMBERS candidates never took part (with q·T large nearly every
//     client does), else said why not.
// Pairs share clients and rounds, so the intervals (which assume independent draws) are
// indicative. Memory: candidates × parameters floats (the updates of one round).
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/mia.h"
#include "core/clock.h"
#include "core/jsonv.h"
#include "core/progress.h"

#define CM_DEFAULT_CANDIDATES 256
#define CM_MIN_CLIENT_NON_MEMBERS 10
#define CM_DECISION_Z 2.0 // the stated decision rule; AUC and TPR at FPR sweep every threshold

static const char *const cm_keys[] = {"name", "candidates", NULL};

typedef struct {
    int candidates; // the clients scored: 0..candidates-1 of a random permutation of the clients
} CmConfig;

static FpStatus cm_parse(const AttackEnv *env, CmConfig *cfg, FpError *err) {
    FP_TRY(jv_keys(env->attack_json, env->path, cm_keys, err));
    const Experiment *ex = env->ex;
    if (ex->fed.clients < 2)
        return fp_fail(err, FP_EPARAM, "federation.clients: client membership needs at least 2 clients (it has %d)",
                       ex->fed.clients);
    long long c;
    int dflt = ex->fed.clients < CM_DEFAULT_CANDIDATES ? ex->fed.clients : CM_DEFAULT_CANDIDATES;
    FP_TRY(jv_int(env->attack_json, env->path, "candidates", JV_OPTIONAL, dflt, 2, ex->fed.clients, &c, err));
    cfg->candidates = (int)c;
    return FP_OK;
}

static FpStatus cm_validate(const AttackEnv *env, FpError *err) {
    CmConfig cfg = {0};
    return cm_parse(env, &cfg, err);
}

// The federation once, then every candidate's local procedure in every round.
static FpStatus cm_work(const AttackEnv *env, AttackWork *w, FpError *err) {
    CmConfig cfg = {0};
    FP_TRY(cm_parse(env, &cfg, err));
    const Experiment *ex = env->ex;
    uint64_t per_client = (uint64_t)ex->train->n / (uint64_t)ex->fed.clients;
    *w = (AttackWork){.shadow_samples = (uint64_t)ex->fed.rounds * (uint64_t)cfg.candidates * per_client *
                                        (uint64_t)(ex->fed.local_epochs > 0 ? ex->fed.local_epochs : 1)};
    return FP_OK;
}

// The released global model after every round: globals[(r + 1) · np] (globals[0] the start).
typedef struct {
    float *globals;
    size_t np;
    int rounds;
} CmRelease;

static void cm_on_global(void *ctx, int round, Model *global) {
    CmRelease *r = ctx;
    if (round >= 0 && round < r->rounds)
        model_get_params(global, r->globals + (size_t)(round + 1) * r->np);
}

// One round's replays: worker w takes candidates w, w + W, ...; each replay has its own
// minibatch stream (the attacker's seed, the round, the client), so the updates do not
// depend on the number of workers.
typedef struct {
    const Experiment *ex;
    const Partition *part;
    const int *cand;
    int n_cand, round, worker, workers;
    uint64_t attacker_seed;
    const float *start;   // θ_t
    float *updates;       // n_cand × np
    size_t np;
    FpStatus st;
    FpError err;
} CmJob;

static void *cm_replay_worker(void *arg) {
    CmJob *j = arg;
    const Experiment *ex = j->ex;
    const Backend *be = ex->backend;
    Model *m = model_clone(ex->model, be, &j->err);
    Tape *t = m ? tape_create(be) : NULL;
    float *mom = t ? be->alloc(j->np * sizeof(float)) : NULL;
    if (!m || !t || !mom) {
        j->st = fp_fail(&j->err, FP_ENOMEM, "out of memory for a client's replay");
        goto out;
    }
    LocalTrainConfig lc = {.epochs = ex->fed.local_epochs, .steps = ex->fed.local_steps,
                           .batch_size = ex->fed.batch_size, .lr = ex->fed.lr, .momentum = ex->fed.momentum,
                           .weight_decay = ex->fed.weight_decay};
    for (int i = j->worker; i < j->n_cand && j->st == FP_OK; i += j->workers) {
        int k = j->cand[i];
        float *u = j->updates + (size_t)i * j->np;
        if (j->part->count[k] == 0) { // a client with no data uploads nothing to find
            memset(u, 0, j->np * sizeof(float));
            continue;
        }
        model_set_params(m, j->start);
        RngStream shuffle = rng_stream(j->attacker_seed, RNG_SHUFFLE, (uint32_t)j->round, (uint32_t)k);
        j->st = local_train(m, t, ex->train, j->part->idx[k], j->part->count[k], &lc, &shuffle, mom, &j->err);
        if (j->st != FP_OK)
            break;
        model_get_params(m, u);
        for (size_t p = 0; p < j->np; p++)
            u[p] -= j->start[p];
    }
out:
    if (mom)
        be->free(mom);
    tape_free(t);
    model_free(m);
    return NULL;
}

static FpStatus cm_replay_round(const Experiment *ex, const Partition *part, const int *cand, int n_cand, int round,
                                uint64_t attacker_seed, const float *start, float *updates, size_t np, FpError *err) {
    int W = ex->backend->device != DEVICE_CPU ? 1 : ex->threads < 1 ? 1 : ex->threads;
    if (W > n_cand)
        W = n_cand;
    CmJob jobs[FED_MAX_THREADS];
    pthread_t tid[FED_MAX_THREADS];
    int started[FED_MAX_THREADS] = {0};
    for (int w = 0; w < W; w++) {
        jobs[w] = (CmJob){.ex = ex, .part = part, .cand = cand, .n_cand = n_cand, .round = round, .worker = w,
                          .workers = W, .attacker_seed = attacker_seed, .start = start, .updates = updates, .np = np};
        started[w] = W == 1 ? 0 : pthread_create(&tid[w], NULL, cm_replay_worker, &jobs[w]) == 0;
        if (!started[w])
            cm_replay_worker(&jobs[w]);
    }
    FpStatus st = FP_OK;
    for (int w = 0; w < W; w++) {
        if (started[w])
            pthread_join(tid[w], NULL);
        if (st == FP_OK && jobs[w].st != FP_OK) {
            st = jobs[w].st;
            if (err)
                *err = jobs[w].err;
        }
    }
    return st;
}

// The released update as FedAvg forms it: the mean of the participants' updates, Δ_t =
// U β with β_k = n_k / Σ n over the participants and 0 elsewhere (plus noise, clipping
// and the replays' own batch order). The attacker fits β over every candidate at once by
// least squares, (UᵀU + λI) β = UᵀΔ with λ = 1e-6 × the mean of diag(UᵀU) (the updates'
// common direction makes UᵀU ill-conditioned), so a candidate whose update resembles a
// participant's is not credited with it; its score is β_k, z-scored over the round's
// candidates. UᵀU and UᵀΔ accumulate in double, CM_BLOCK parameters at a time.
#define CM_BLOCK 2048

extern void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b,
                   const int *ldb, int *info); // LAPACK (OpenBLAS ships it)

typedef struct {
    double *gram, *rhs, *block, *dblock; // N × N, N, CM_BLOCK × N, CM_BLOCK
} CmScratch;

static FpStatus cm_round_scores(const float *delta, const float *updates, int N, size_t np, CmScratch *w,
                                double *score, FpError *err) {
    memset(w->gram, 0, sizeof(double) * (size_t)N * N);
    memset(w->rhs, 0, sizeof(double) * (size_t)N);
    for (size_t p0 = 0; p0 < np; p0 += CM_BLOCK) {
        int b = (int)(np - p0 < CM_BLOCK ? np - p0 : CM_BLOCK);
        for (int i = 0; i < N; i++)
            for (int q = 0; q < b; q++)
                w->block[(size_t)q * N + i] = updates[(size_t)i * np + p0 + q];
        for (int q = 0; q < b; q++)
            w->dblock[q] = delta[p0 + q];
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, N, b, 1.0, w->block, N, 1.0, w->gram, N);
        cblas_dgemv(CblasRowMajor, CblasTrans, b, N, 1.0, w->block, N, w->dblock, 1, 1.0, w->rhs, 1);
    }
    double tr = 0;
    for (int i = 0; i < N; i++)
        tr += w->gram[(size_t)i * N + i];
    for (int i = 0; i < N; i++)
        w->gram[(size_t)i * N + i] += 1e-6 * (tr > 0 ? tr / N : 1.0);
    // Row-major upper is column-major lower.
    int n = N, one = 1, info = 0;
    dposv_("L", &n, &one, w->gram, &n, w->rhs, &n, &info);
    if (info != 0)
        return fp_fail(err, FP_EDIVERGED, "client-membership: the candidates' updates are degenerate (LAPACK dposv "
                       "info %d): they are not finite or all zero", info);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < N; i++) {
        score[i] = w->rhs[i];
        sum += score[i];
        sum2 += score[i] * score[i];
    }
    double mu = sum / N, var = sum2 / N - mu * mu, sd = var > 0 ? sqrt(var) : 0;
    for (int i = 0; i < N; i++)
        score[i] = sd > 0 ? (score[i] - mu) / sd : 0;
    return FP_OK;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static FpStatus cm_run(const AttackEnv *env, cJSON *result, FpError *err) {
    CmConfig cfg = {0};
    FP_TRY(cm_parse(env, &cfg, err));
    Experiment *ex = env->ex;
    const Backend *be = ex->backend;
    int K = ex->fed.clients, T = ex->fed.rounds, N = cfg.candidates;
    double t0 = fp_monotonic_seconds();
    Model *global = model_clone(ex->model, be, err);
    if (!global)
        return err ? err->code : FP_ENOMEM;
    size_t np = global->table.n_params;
    CmRelease rel = {.globals = malloc(sizeof(float) * np * ((size_t)T + 1)), .np = np, .rounds = T};
    float *updates = malloc(sizeof(float) * np * (size_t)N), *delta = malloc(sizeof(float) * np);
    CmScratch scratch = {.gram = malloc(sizeof(double) * (size_t)N * N), .rhs = malloc(sizeof(double) * (size_t)N),
                         .block = malloc(sizeof(double) * CM_BLOCK * (size_t)N), .dblock = malloc(sizeof(double) * CM_BLOCK)};
    double *score = malloc(sizeof(double) * (size_t)N * (size_t)T);
    int32_t *member = malloc(sizeof(int32_t) * (size_t)N * (size_t)T);
    int *cand = malloc(sizeof(int) * (size_t)K);
    uint32_t *perm = malloc(sizeof(uint32_t) * (size_t)K);
    Federation *f = NULL;
    FpStatus st = FP_OK;
    if (!rel.globals || !updates || !delta || !scratch.gram || !scratch.rhs || !scratch.block || !scratch.dblock || !score || !member || !cand || !perm) {
        st = fp_fail(err, FP_ENOMEM, "%s: out of memory for %d candidates' updates (%zu parameters each): lower "
                     "candidates", env->path, N, np);
        goto out;
    }
    model_get_params(global, rel.globals);
    FedSetup s = {.cfg = ex->fed, .seed = ex->seed, .threads = ex->threads, .backend = be, .global = global,
                  .train = ex->train, .test = ex->test, .defense = ex->defense, .defense_json = ex->defense_json,
                  .quiet = env->quiet, .memo = ex->memo, .comm = ex->comm,
                  .hooks = {.ctx = &rel, .on_global = cm_on_global}};
    if (!(f = fed_create(&s, err)) || (st = fed_run(f, 0, err)) != FP_OK) {
        st = f ? st : (err ? err->code : FP_ENOMEM);
        goto out;
    }
    double train_seconds = fp_monotonic_seconds() - t0;
    // The candidates: N clients of a random permutation (all of them when N = K), in
    // increasing order.
    uint64_t attacker_seed = mia_derived_seed(ex->seed, RNG_ATTACK, 0xC1u, 0);
    for (int k = 0; k < K; k++)
        perm[k] = (uint32_t)k;
    RngStream rc = rng_stream(attacker_seed, RNG_ATTACK, 0, 0);
    rng_shuffle_u32(&rc, perm, (uint32_t)K);
    for (int i = 0; i < N; i++)
        cand[i] = (int)perm[i];
    qsort(cand, (size_t)N, sizeof(int), cmp_int);
    const Partition *part = fed_partition(f);
    double every = env->progress_seconds > 0 ? env->progress_seconds : 10.0;
    FpProgress pr = fp_progress_start(env->quiet ? env->progress : stderr, T, every, every, "rounds", "%s: replaying %d clients",
                                      env->progress_label ? env->progress_label : "client-membership", N);
    for (int t = 0; t < T && st == FP_OK; t++) {
        const float *start = rel.globals + (size_t)t * np, *next = start + np;
        for (size_t p = 0; p < np; p++)
            delta[p] = next[p] - start[p];
        st = cm_replay_round(ex, part, cand, N, t, attacker_seed, start, updates, np, err);
        if (st != FP_OK)
            break;
        if ((st = cm_round_scores(delta, updates, N, np, &scratch, score + (size_t)t * N, err)) != FP_OK)
            break;
        const FedRoundResult *rr = fed_round_result(f, t);
        for (int i = 0; i < N; i++) {
            int in = 0;
            for (int j = 0; j < rr->participants && !in; j++)
                in = rr->clients[j] == cand[i];
            member[(size_t)t * N + i] = in;
        }
        fp_progress_add(&pr, 1);
    }
    if (st != FP_OK)
        goto out;
    // Per round: the headline.
    int n_pairs = N * T, pos = 0;
    for (int i = 0; i < n_pairs; i++)
        pos += member[i];
    if (pos == 0 || pos == n_pairs) {
        st = fp_fail(err, FP_EPARAM, "%s: %s of the %d candidates took part in every round, so there is nothing to "
                     "tell apart", env->path, pos ? "each" : "none", N);
        goto out;
    }
    st = mia_report(result, score, member, n_pairs, NULL, CM_DECISION_Z, "member iff z >= 2 (2 sd above the round's "
                    "mean score)", err);
    if (st != FP_OK)
        goto out;
    cJSON_AddStringToObject(result, "test", "per round: did client k take part in round t? (members: the round's "
                                            "participants among the candidates; non-members: the others)");
    cJSON_AddStringToObject(result, "observer", "public"); // the report's view (reports/summary.c)
    cJSON_AddStringToObject(result, "observed", "the global model released after every round");
    cJSON_AddStringToObject(result, "score_rule", "z-score over the round's candidates of beta_k, the least-squares "
                                                  "coefficients of the released update delta on every candidate's "
                                                  "update u_k at once (ridge 1e-6 of the mean diagonal): u_k the "
                                                  "candidate's local procedure replayed from the round's model with "
                                                  "the attacker's own minibatch order");
    cJSON_AddNumberToObject(result, "candidates", N);
    cJSON_AddNumberToObject(result, "rounds", T);
    cJSON_AddStringToObject(result, "interval_note", "pairs share clients and rounds: the intervals assume "
                                                     "independent pairs and are indicative");
    // Per client: did k take part at all?
    cJSON *cl = cJSON_AddObjectToObject(result, "client_level");
    double *best = malloc(sizeof(double) * (size_t)N);
    int32_t *ever = malloc(sizeof(int32_t) * (size_t)N);
    if (!best || !ever) {
        free(best);
        free(ever);
        st = fp_fail(err, FP_ENOMEM, "out of memory");
        goto out;
    }
    int never = 0;
    for (int i = 0; i < N; i++) {
        best[i] = -INFINITY;
        ever[i] = 0;
        for (int t = 0; t < T; t++) {
            best[i] = fmax(best[i], score[(size_t)t * N + i]);
            ever[i] |= member[(size_t)t * N + i];
        }
        never += !ever[i];
    }
    cJSON_AddStringToObject(cl, "test", "did client k take part in any round? (score: its largest z over the rounds)");
    cJSON_AddNumberToObject(cl, "took_part", N - never);
    cJSON_AddNumberToObject(cl, "never_took_part", never);
    if (never >= CM_MIN_CLIENT_NON_MEMBERS && never < N)
        st = mia_report(cl, best, ever, N, NULL, CM_DECISION_Z, "member iff its largest z over the rounds >= 2", err);
    else {
        char why[200];
        snprintf(why, sizeof why, "not evaluated: %d of the %d candidates never took part (at least %d are needed)",
                 never, N, CM_MIN_CLIENT_NON_MEMBERS);
        cJSON_AddStringToObject(cl, "status", why);
    }
    free(best);
    free(ever);
    if (st != FP_OK)
        goto out;
    cJSON *dj = fed_defense_json(f, err);
    if (dj)
        cJSON_AddItemToObject(result, "defense", dj);
    mia_conclude(env, "client-membership", result);
    cJSON *tm = cJSON_AddObjectToObject(result, "timing");
    cJSON_AddNumberToObject(tm, "federation_seconds", train_seconds);
    cJSON_AddNumberToObject(tm, "replay_seconds", fp_monotonic_seconds() - t0 - train_seconds);
out:
    fed_free(f);
    model_free(global);
    free(rel.globals);
    free(updates);
    free(delta);
    free(scratch.gram);
    free(scratch.rhs);
    free(scratch.block);
    free(scratch.dblock);
    free(score);
    free(member);
    free(cand);
    free(perm);
    return st;
}

const AttackOps attack_client_membership = {
    .name = "client-membership",
    .summary = "membership of a client: did it take part (in a round, at all)? from the released global models",
    .headline = "auc",
    .headline_higher_leaks = 1,
    .uses_reference = 1,
    .validate = cm_validate,
    .run = cm_run,
    .work = cm_work,
};
