// The client-level observer ("target": "client", "client_model": "rounds"): the server's
// view of one client over every round it took part in. The target holds every upload of
// the client (as many as `fedpriv train` lists it among a round's participant_ids, the
// last one being the "uploaded" target's model) and the global model each started from;
// LiRA and basic-mia score each candidate by its gain φ(upload) − φ(start) in every round
// and combine the rounds. A planted case shows that combining R rounds
// scores better than one, and that R copies of one upload (what a capture keeping only
// the last upload would give) score exactly like one round.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl/experiment.h"
#include "tests/mia_fixture.h"

// 10 clients, q = 0.4 (4 per round), 8 rounds of 10 local epochs on 40 samples each of
// the synthetic mixture: each client uploads about 3 times, and its local models
// overfit its records.
#define RD_CLIENTS 10
#define RD_ROUNDS 8

static void rd_open(Fixture *fx) {
    make_tmpdir(fx->dir, sizeof fx->dir);
    char csv[600], cfg[2048];
    snprintf(csv, sizeof csv, "%s/mixture.csv", fx->dir);
    write_mixture_csv(csv, 3000);
    snprintf(cfg, sizeof cfg,
             "{\"seed\": 5, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [32]},"
             " \"federation\": {\"clients\": %d, \"sample_rate\": 0.4, \"rounds\": %d, \"local_epochs\": 10,"
             " \"samples_per_client\": 40, \"batch_size\": 20, \"lr\": 0.05, \"momentum\": 0.9}, \"threads\": 2}",
             csv, RD_CLIENTS, RD_ROUNDS);
    fx->root = cJSON_Parse(cfg);
    ck_assert_ptr_nonnull(fx->root);
    FpError err = {0};
    ck_assert_msg(experiment_load(fx->root, NULL, "cpu", 2, defense_find, &fx->ex, &err) == FP_OK, "%s", err.msg);
}

// The rounds (1-based) in which client k takes part, as `fedpriv train` lists them (the
// experiment's own federation, fed_rounds_json's participant_ids); the count is returned.
static int rounds_of(Fixture *fx, int k, int *rounds) {
    FpError err = {0};
    Federation *f = experiment_federation(&fx->ex, NULL, 1, &err);
    ck_assert_msg(f, "%s", err.msg);
    ck_assert_msg(fed_run(f, 0, &err) == FP_OK, "%s", err.msg);
    cJSON *rj = fed_rounds_json(f, 0);
    int n = 0;
    for (int r = 0; r < cJSON_GetArraySize(rj); r++) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rj, r), "participant_ids");
        for (int s = 0; s < cJSON_GetArraySize(ids); s++)
            if (cJSON_GetArrayItem(ids, s)->valueint == k)
                rounds[n++] = r + 1;
    }
    cJSON_Delete(rj);
    fed_free(f);
    return n;
}

// The client that takes part most often (the lowest-numbered of them).
static int busiest_client(Fixture *fx, int *n_rounds) {
    int best = 0, most = -1, rounds[RD_ROUNDS];
    for (int k = 0; k < RD_CLIENTS; k++) {
        int n = rounds_of(fx, k, rounds);
        if (n > most) {
            most = n;
            best = k;
        }
    }
    *n_rounds = most;
    return best;
}

static MiaTarget *acquire(Fixture *fx, const char *attack, AttackCache *cache) {
    cJSON *aj = cJSON_Parse(attack);
    ck_assert_ptr_nonnull(aj);
    AttackEnv env = {.ex = &fx->ex, .attack_json = aj, .path = "attack", .cache = cache, .quiet = 1};
    MiaTargetConfig cfg;
    FpError err = {0};
    ck_assert_msg(mia_target_parse(&env, &cfg, &err) == FP_OK, "%s", err.msg);
    MiaTarget *t = NULL;
    ck_assert_msg(mia_target_acquire(&env, &cfg, &t, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(aj);
    return t;
}

// The target holds one upload per round the client took part in, in the rounds `fedpriv
// train` lists; the uploads differ from one another (each is a round's local training);
// the last is the "uploaded" target's model, bit for bit; the eval logits are its.
START_TEST(rounds_target_holds_every_upload) {
    Fixture fx;
    rd_open(&fx);
    int R, want[RD_ROUNDS];
    int k = busiest_client(&fx, &R);
    ck_assert_int_ge(R, 3);
    ck_assert_int_eq(rounds_of(&fx, k, want), R);
    AttackCache *cache = attack_cache_create();
    char aj[160];
    snprintf(aj, sizeof aj, "{\"target\": \"client\", \"target_client\": %d, \"client_model\": \"rounds\"}", k);
    MiaTarget *t = acquire(&fx, aj, cache);
    snprintf(aj, sizeof aj, "{\"target\": \"client\", \"target_client\": %d}", k);
    MiaTarget *last = acquire(&fx, aj, cache);
    ck_assert_ptr_ne(t, last);
    ck_assert_int_eq(t->rounds.n, R);
    ck_assert_mem_eq(t->rounds.round, want, sizeof(int) * (size_t)R);
    ck_assert_int_eq(last->rounds.n, 0);
    ck_assert_int_eq(t->participated_round, want[R - 1]);
    ck_assert_int_eq(last->participated_round, want[R - 1]);
    size_t np = t->rounds.n_params;
    ck_assert_uint_eq(np, t->model->table.n_params);
    float *w = malloc(sizeof(float) * np);
    ck_assert_ptr_nonnull(w);
    model_get_params(last->model, w);
    ck_assert_mem_eq(t->rounds.params + np * (size_t)(R - 1), w, sizeof(float) * np);
    for (int r = 1; r < R; r++)
        ck_assert_int_ne(memcmp(t->rounds.params + np * (size_t)(r - 1), t->rounds.params + np * (size_t)r,
                                sizeof(float) * np), 0);
    int M2 = 2 * t->sz.members, C = t->n_classes;
    ck_assert_mem_eq(t->eval_logits, last->eval_logits, sizeof(float) * (size_t)M2 * C);
    // mia_rounds_logits' layout: sample i, round r, model s (0: the upload, 1: the global
    // model it started from) at ((i·R + r)·2 + s)·C; the last upload's rows are the eval
    // logits; each upload differs from its start (the client trained) and from the other
    // rounds' uploads.
    float *z = malloc(sizeof(float) * (size_t)M2 * MIA_ROUND_ROWS * R * C);
    ck_assert_ptr_nonnull(z);
    FpError err = {0};
    ck_assert_msg(mia_rounds_logits(t->model, &t->rounds, fx.ex.train, t->eval_idx, M2, 1, 0, 1, z, &err) == FP_OK,
                  "%s", err.msg);
    int differ = 0, trained = 0;
    for (int i = 0; i < M2; i++) {
        for (int c = 0; c < C; c++)
            ck_assert_float_eq_tol(z[(((size_t)i * R + R - 1) * MIA_ROUND_ROWS) * C + c],
                                   t->eval_logits[(size_t)i * C + c], 1e-5);
        const float *up0 = z + ((size_t)i * R * MIA_ROUND_ROWS) * C, *start0 = up0 + C;
        const float *up1 = z + (((size_t)i * R + 1) * MIA_ROUND_ROWS) * C;
        differ += memcmp(up0, up1, sizeof(float) * C) != 0;
        trained += memcmp(up0, start0, sizeof(float) * C) != 0;
    }
    ck_assert_int_gt(differ, M2 / 2);
    ck_assert_int_gt(trained, M2 / 2);
    for (int r = 0; r < R; r++)
        ck_assert_int_ne(memcmp(t->rounds.params + np * (size_t)r, t->rounds.start + np * (size_t)r,
                                sizeof(float) * np), 0);
    model_get_params(t->model, w); // left at the last upload
    ck_assert_mem_eq(t->rounds.params + np * (size_t)(R - 1), w, sizeof(float) * np);
    free(w);
    free(z);
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

static double auc_of(const double *score, const int32_t *label, int n) {
    cJSON *r = cJSON_CreateObject();
    FpError err = {0};
    ck_assert_msg(mia_report(r, score, label, n, NULL, INFINITY, "sweep", &err) == FP_OK, "%s", err.msg);
    double a = num(r, "auc");
    cJSON_Delete(r);
    return a;
}

// A planted case of LiRA's scores over R = 4 rounds: N = 8 OUT reference values per
// candidate, round and view ~ N(μ_i, 1); the target's φ in round r is μ_i + δ·member +
// N(0, 1), independent between rounds. One round's z has AUC Φ(δ/√2) = 0.64 (δ = 0.5);
// their mean over 4 rounds Φ(δ·√4/√2) = 0.76 (both a little lower with σ estimated from
// 8 values). With 1000 + 1000 candidates the AUC's standard error is about 0.012: the
// gain of 0.12 is some 10σ, the check below asks for 0.06. Its companion: 4 copies of
// one round (a capture that kept only the last upload) score exactly like that round.
START_TEST(combining_rounds_beats_one_round_on_a_planted_case) {
    enum { M = 1000, n = 2 * M, R = 4, N = 8 };
    const double delta = 0.5;
    double *obs = malloc(sizeof(double) * n * R), *refs = malloc(sizeof(double) * N * n * R);
    double *obs1 = malloc(sizeof(double) * n), *refs1 = malloc(sizeof(double) * N * n);
    double *copies = malloc(sizeof(double) * n * R), *copies_refs = malloc(sizeof(double) * N * n * R);
    double *s_all = malloc(sizeof(double) * n), *s_one = malloc(sizeof(double) * n), *s_copies = malloc(sizeof(double) * n);
    unsigned char *member = calloc((size_t)N * n, 1); // offline: OUT everywhere
    int32_t *label = malloc(sizeof(int32_t) * n);
    ck_assert(obs && refs && obs1 && refs1 && copies && copies_refs && s_all && s_one && s_copies && member && label);
    RngStream rs = rng_stream(7, RNG_TEST, 40, 0);
    for (int i = 0; i < n; i++) {
        label[i] = i < M;
        double mu = 2 * rng_next_normal(&rs);
        for (int r = 0; r < R; r++) {
            obs[i * R + r] = mu + delta * label[i] + rng_next_normal(&rs);
            for (int j = 0; j < N; j++)
                refs[((size_t)j * n + i) * R + r] = mu + rng_next_normal(&rs);
        }
        obs1[i] = obs[i * R + R - 1];
        for (int r = 0; r < R; r++)
            copies[i * R + r] = obs1[i];
        for (int j = 0; j < N; j++) {
            refs1[(size_t)j * n + i] = refs[((size_t)j * n + i) * R + R - 1];
            for (int r = 0; r < R; r++)
                copies_refs[((size_t)j * n + i) * R + r] = refs1[(size_t)j * n + i];
        }
    }
    MiaLiraScoring all = {.n_aug = R}, one = {.n_aug = 1};
    double sigma;
    FpError err = {0};
    ck_assert_int_eq(mia_lira_scores(obs, refs, member, n, N, &all, s_all, &sigma, &err), FP_OK);
    ck_assert_int_eq(mia_lira_scores(obs1, refs1, member, n, N, &one, s_one, &sigma, &err), FP_OK);
    ck_assert_int_eq(mia_lira_scores(copies, copies_refs, member, n, N, &all, s_copies, &sigma, &err), FP_OK);
    double a_all = auc_of(s_all, label, n), a_one = auc_of(s_one, label, n), a_copies = auc_of(s_copies, label, n);
    ck_assert_msg(a_one > 0.58 && a_one < 0.68, "one round: AUC %.4f", a_one);
    ck_assert_msg(a_all > a_one + 0.06, "4 rounds: AUC %.4f, one round %.4f", a_all, a_one);
    ck_assert_msg(fabs(a_copies - a_one) < 1e-12, "4 copies of one round: AUC %.4f, one round %.4f", a_copies, a_one);
    free(obs);
    free(refs);
    free(obs1);
    free(refs1);
    free(copies);
    free(copies_refs);
    free(s_all);
    free(s_one);
    free(s_copies);
    free(member);
    free(label);
}
END_TEST

// End to end: LiRA and basic-mia over every upload of the busiest client (its reference
// and shadow federations replay the target's participants, so each holds as many uploads
// of it) score every upload (query_views.views = R). On this overfitting federation a
// client that took part before starts from a global model that already holds its data,
// so the gain of a later upload shrinks: the uploads' own confidence
// ("round_statistic": "confidence") is the statistic that must do at least as well as the
// last upload alone (within 0.05, about 1.5 standard errors of 40 + 40 candidates: the
// rounds add evidence, they must not lose it); the gain still finds the members.
START_TEST(lira_and_basic_mia_over_rounds) {
    Fixture fx;
    rd_open(&fx);
    int R, k = busiest_client(&fx, &R);
    AttackCache *cache = attack_cache_create();
    char aj[240];
    double auc[3][2];
    const char *names[2] = {"lira", "basic-mia"}, *views[3] = {"uploaded", "rounds", "rounds"};
    const char *stat[3] = {"", ", \"round_statistic\": \"confidence\"", ", \"round_statistic\": \"gain\""};
    for (int v = 0; v < 3; v++)
        for (int a = 0; a < 2; a++) {
            snprintf(aj, sizeof aj, "{\"target\": \"client\", \"target_client\": %d, \"client_model\": \"%s\"%s%s}",
                     k, views[v], stat[v], a == 0 ? ", \"shadow_models\": 8" : "");
            cJSON *r = run_attack(&fx, names[a], aj, cache);
            check_result_shape(r, 40);
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "target");
            const cJSON *tr = cJSON_GetObjectItemCaseSensitive(t, "rounds");
            ck_assert_int_eq(cJSON_IsArray(tr), v > 0);
            if (v > 0)
                ck_assert_int_eq(cJSON_GetArraySize(tr), R);
            if (a == 0)
                ck_assert_int_eq((int)num(cJSON_GetObjectItemCaseSensitive(r, "query_views"), "views"), v ? R : 1);
            auc[v][a] = num(r, "auc");
            fprintf(stderr, "mia_rounds: %s %s%s: AUC %.4f\n", names[a], views[v], v == 1 ? " confidence" : v ? " gain" : "",
                    auc[v][a]);
            cJSON_Delete(r);
        }
    for (int a = 0; a < 2; a++) {
        ck_assert_msg(auc[1][a] >= auc[0][a] - 0.05, "%s: rounds %.4f, last upload %.4f", names[a], auc[1][a],
                      auc[0][a]);
        ck_assert_msg(auc[2][a] > 0.7, "%s: rounds, gain: %.4f", names[a], auc[2][a]); // the members show
    }
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

// The attacks that read one model refuse every upload, naming client_model; a round
// statistic without the rounds is refused, naming it.
START_TEST(one_model_attacks_refuse_rounds) {
    Fixture fx;
    rd_open(&fx);
    const char *names[] = {"rmia", "ml-leaks"};
    for (int a = 0; a < 2; a++) {
        const AttackOps *ops = attack_find(names[a]);
        ck_assert_ptr_nonnull(ops);
        cJSON *aj = cJSON_Parse("{\"target\": \"client\", \"client_model\": \"rounds\"}");
        AttackEnv env = {.ex = &fx.ex, .attack_json = aj, .path = "attack", .quiet = 1};
        FpError err = {0};
        ck_assert_int_eq(ops->validate(&env, &err), FP_EPARAM);
        ck_assert_msg(strstr(err.msg, "attack.client_model:") == err.msg, "%s", err.msg);
        cJSON_Delete(aj);
    }
    // round_statistic belongs to the client-level observer only.
    const AttackOps *lira = attack_find("lira");
    cJSON *aj = cJSON_Parse("{\"target\": \"client\", \"round_statistic\": \"gain\"}");
    AttackEnv env = {.ex = &fx.ex, .attack_json = aj, .path = "attack", .quiet = 1};
    FpError err = {0};
    ck_assert_int_eq(lira->validate(&env, &err), FP_EPARAM);
    ck_assert_msg(strstr(err.msg, "attack.round_statistic:") == err.msg, "%s", err.msg);
    cJSON_Delete(aj);
    fixture_close(&fx);
}
END_TEST

Suite *suite_mia_rounds(void) {
    Suite *s = suite_create("mia_rounds");
    TCase *tc = tcase_create("mia_rounds");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rounds_target_holds_every_upload);
    tcase_add_test(tc, combining_rounds_beats_one_round_on_a_planted_case);
    tcase_add_test(tc, lira_and_basic_mia_over_rounds);
    tcase_add_test(tc, one_model_attacks_refuse_rounds);
    suite_add_tcase(s, tc);
    return s;
}
