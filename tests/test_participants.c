// Who takes part, as every part of fedpriv sees it. In a cross-device federation (100
// clients, q = 0.1, 20 rounds: about 88% of the clients take part) the participants that
// `fedpriv train` lists round by round (participant_ids) are the set that
//   - the client membership target accepts as target_client (and no other client), with
//     its default the lowest-numbered of them, and its model from the client's last round;
//   - a reference federation replays (FedSetup.replay_sampling): LiRA and RMIA against a
//     client target work for every such client, not only where every reference seed
//     happens to sample it too;
//   - DLG's victims are drawn from (default observe.client: the lowest-numbered one that
//     takes part, in the declared round or ever).
// Seed 11 is chosen so that client 0 never takes part: the old default, 0, failed there.
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/victims.h"
#include "fl/experiment.h"
#include "tests/cli_run.h"
#include "tests/mia_fixture.h"

#define PT_CLIENTS 100
#define PT_ROUNDS 20
#define PT_SEED 11

// The federation: 100 clients × 6 samples of the synthetic mixture (the default quarter
// of 2500 training rows), q = 0.1 fixed-size sampling, 20 rounds of one local epoch.
static void pt_config(char *buf, size_t n, const char *csv, const char *attack) {
    snprintf(buf, n,
             "{\"seed\": %d, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [8]},"
             " \"federation\": {\"clients\": %d, \"sample_rate\": 0.1, \"rounds\": %d, \"batch_size\": 20},"
             " \"threads\": 1%s%s}",
             PT_SEED, csv, PT_CLIENTS, PT_ROUNDS, attack ? ", \"attack\": " : "", attack ? attack : "");
}

static void pt_open(Fixture *fx) {
    make_tmpdir(fx->dir, sizeof fx->dir);
    char csv[600], cfg[2048];
    snprintf(csv, sizeof csv, "%s/mixture.csv", fx->dir);
    write_mixture_csv(csv, 3000);
    pt_config(cfg, sizeof cfg, csv, NULL);
    fx->root = cJSON_Parse(cfg);
    ck_assert_ptr_nonnull(fx->root);
    FpError err = {0};
    ck_assert_msg(experiment_load(fx->root, NULL, "cpu", 1, defense_find, &fx->ex, &err) == FP_OK, "%s", err.msg);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

// Each round's participant_ids of a train result's "rounds" (checked: `participants` of
// them, increasing, valid) into ids[r][0..count[r]), and who ever took part.
static void read_rounds(const cJSON *rounds, int ids[PT_ROUNDS][PT_CLIENTS], int count[PT_ROUNDS],
                        unsigned char ever[PT_CLIENTS]) {
    ck_assert_int_eq(cJSON_GetArraySize(rounds), PT_ROUNDS);
    memset(ever, 0, PT_CLIENTS);
    for (int r = 0; r < PT_ROUNDS; r++) {
        const cJSON *o = cJSON_GetArrayItem(rounds, r);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "participant_ids");
        ck_assert_msg(cJSON_IsArray(a), "round %d has no participant_ids", r + 1);
        count[r] = cJSON_GetArraySize(a);
        ck_assert_int_eq(count[r], (int)num(o, "participants"));
        ck_assert_int_eq(count[r], 10); // fixed-size sampling: round(q·N)
        for (int s = 0; s < count[r]; s++) {
            const cJSON *v = cJSON_GetArrayItem(a, s);
            ck_assert(cJSON_IsNumber(v));
            ids[r][s] = v->valueint;
            ck_assert_int_ge(ids[r][s], s ? ids[r][s - 1] + 1 : 0);
            ck_assert_int_lt(ids[r][s], PT_CLIENTS);
            ever[ids[r][s]] = 1;
        }
    }
}

// The participants of the experiment's own federation, as `fedpriv train` writes them
// (fed_rounds_json of a plain run).
static void train_participants(Fixture *fx, int ids[PT_ROUNDS][PT_CLIENTS], int count[PT_ROUNDS],
                               unsigned char ever[PT_CLIENTS]) {
    FpError err = {0};
    Federation *f = experiment_federation(&fx->ex, NULL, 1, &err);
    ck_assert_msg(f, "%s", err.msg);
    ck_assert_msg(fed_run(f, 0, &err) == FP_OK, "%s", err.msg);
    cJSON *rounds = fed_rounds_json(f, 0);
    read_rounds(rounds, ids, count, ever);
    cJSON_Delete(rounds);
    fed_free(f);
}

static FpStatus parse_target(Fixture *fx, const char *attack, MiaTargetConfig *cfg, FpError *err) {
    cJSON *aj = cJSON_Parse(attack);
    ck_assert_ptr_nonnull(aj);
    AttackEnv env = {.ex = &fx->ex, .attack_json = aj, .path = "attack", .quiet = 1};
    FpStatus st = mia_target_parse(&env, cfg, err);
    cJSON_Delete(aj);
    return st;
}

// The participant set of `fedpriv train` for the seed (the binary, when there is one,
// and the library call it makes) is exactly the set of accepted target clients; the
// default target client is its lowest-numbered member, not client 0.
START_TEST(target_client_is_accepted_exactly_when_it_took_part) {
    Fixture fx;
    pt_open(&fx);
    int ids[PT_ROUNDS][PT_CLIENTS], count[PT_ROUNDS];
    unsigned char ever[PT_CLIENTS];
    train_participants(&fx, ids, count, ever);
    int taking_part = 0, first = -1;
    for (int k = PT_CLIENTS - 1; k >= 0; k--)
        if (ever[k]) {
            taking_part++;
            first = k;
        }
    ck_assert_int_gt(taking_part, 75); // 1 − 0.9^20 ≈ 88% expected
    ck_assert_int_lt(taking_part, PT_CLIENTS);
    ck_assert_int_eq(ever[0], 0);      // what the seed was chosen for
    // The binary lists the same participants, round by round.
    char cfg[2048], csv[600], path[700];
    snprintf(csv, sizeof csv, "%s/mixture.csv", fx.dir);
    pt_config(cfg, sizeof cfg, csv, NULL);
    snprintf(path, sizeof path, "%s/train.json", fx.dir);
    write_text(path, cfg);
    size_t cap = 1 << 20;
    char *out = malloc(cap), *errs = malloc(cap);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(errs);
    int rc = cli_run((const char *[]){"train", "--config", path, NULL}, out, errs, cap);
    if (rc != -1) {
        ck_assert_msg(rc == 0, "train: %s", errs);
        cJSON *res = cJSON_Parse(out);
        ck_assert_ptr_nonnull(res);
        int ids2[PT_ROUNDS][PT_CLIENTS], count2[PT_ROUNDS];
        unsigned char ever2[PT_CLIENTS];
        read_rounds(cJSON_GetObjectItemCaseSensitive(res, "rounds"), ids2, count2, ever2);
        for (int r = 0; r < PT_ROUNDS; r++) {
            ck_assert_int_eq(count2[r], count[r]);
            ck_assert_mem_eq(ids2[r], ids[r], sizeof(int) * (size_t)count[r]);
        }
        cJSON_Delete(res);
    }
    // Every client: accepted exactly when it took part, refused naming the JSON path.
    for (int k = 0; k < PT_CLIENTS; k++) {
        char aj[128];
        snprintf(aj, sizeof aj, "{\"target\": \"client\", \"target_client\": %d}", k);
        MiaTargetConfig c;
        FpError err = {0};
        FpStatus st = parse_target(&fx, aj, &c, &err);
        if (ever[k]) {
            ck_assert_msg(st == FP_OK, "client %d took part but was refused: %s", k, err.msg);
            ck_assert_int_eq(c.client, k);
            ck_assert_int_eq(c.client_defaulted, 0);
        } else {
            ck_assert_msg(st == FP_EPARAM, "client %d never took part but was accepted", k);
            char want[128];
            snprintf(want, sizeof want, "attack.target_client: client %d is never sampled", k);
            ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "%s", err.msg);
        }
    }
    MiaTargetConfig dc;
    FpError err = {0};
    ck_assert_msg(parse_target(&fx, "{\"target\": \"client\"}", &dc, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(dc.client, first);
    ck_assert_int_eq(dc.client_defaulted, 1);
    // The CLI refuses a client that never took part before any training: exit 2, one
    // line naming the path, no result.
    int never = -1;
    for (int k = PT_CLIENTS - 1; k >= 0; k--)
        if (!ever[k])
            never = k;
    char attack[128], dir[700];
    snprintf(attack, sizeof attack, "{\"name\": \"lira\", \"target\": \"client\", \"target_client\": %d}", never);
    pt_config(cfg, sizeof cfg, csv, attack);
    snprintf(path, sizeof path, "%s/attack.json", fx.dir);
    write_text(path, cfg);
    snprintf(dir, sizeof dir, "%s/refused", fx.dir);
    rc = cli_run((const char *[]){"attack", "lira", "--config", path, "--out", dir, NULL}, out, errs, cap);
    if (rc != -1) {
        ck_assert_msg(rc == 2, "rc %d: %s", rc, errs);
        ck_assert_int_eq(cli_count_lines(errs), 1);
        ck_assert_ptr_nonnull(strstr(errs, "attack.target_client: client"));
        ck_assert_ptr_nonnull(strstr(errs, "is never sampled"));
        char result[800];
        snprintf(result, sizeof result, "%s/result.json", dir);
        ck_assert_int_ne(access(result, F_OK), 0);
    }
    free(out);
    free(errs);
    fixture_close(&fx);
}
END_TEST

// The round a client's model comes from: its last participation (1-based).
static int last_round(int ids[PT_ROUNDS][PT_CLIENTS], const int count[PT_ROUNDS], int k) {
    int last = 0;
    for (int r = 0; r < PT_ROUNDS; r++)
        for (int s = 0; s < count[r]; s++)
            last = ids[r][s] == k ? r + 1 : last;
    return last;
}

// LiRA (8 reference models) and RMIA against a client target run for the default client
// and for clients that took part a few times: each reference federation replays the
// target's participants, so none of them lacks the client. (Before, each sampled its own
// clients, and a client the server picks in 2 of 20 rounds of the target federation was
// missing from most reference federations: the attack was refused.)
START_TEST(reference_models_of_a_client_target_replay_its_rounds) {
    Fixture fx;
    pt_open(&fx);
    int ids[PT_ROUNDS][PT_CLIENTS], count[PT_ROUNDS];
    unsigned char ever[PT_CLIENTS];
    train_participants(&fx, ids, count, ever);
    // The default client and the two lowest-numbered clients sampled exactly once.
    int times[PT_CLIENTS] = {0}, picks[3] = {-1, -1, -1}, n_picks = 1;
    for (int r = 0; r < PT_ROUNDS; r++)
        for (int s = 0; s < count[r]; s++)
            times[ids[r][s]]++;
    for (int k = 0; k < PT_CLIENTS && n_picks < 3; k++)
        if (times[k] == 1)
            picks[n_picks++] = k;
    ck_assert_int_eq(n_picks, 3);
    AttackCache *cache = attack_cache_create();
    for (int i = 0; i < 3; i++) {
        char aj[160];
        if (picks[i] < 0)
            snprintf(aj, sizeof aj, "{\"target\": \"client\", \"shadow_models\": 8}");
        else
            snprintf(aj, sizeof aj, "{\"target\": \"client\", \"target_client\": %d, \"shadow_models\": 8}",
                     picks[i]);
        cJSON *r = run_attack(&fx, "lira", aj, cache);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "target");
        int k = (int)num(t, "client");
        ck_assert(ever[k]);
        if (picks[i] >= 0)
            ck_assert_int_eq(k, picks[i]);
        ck_assert_int_eq((int)num(t, "from_round"), last_round(ids, count, k));
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(t, "client_rule")->valuestring,
                         picks[i] < 0 ? "default: the lowest-numbered client the server samples" : "target_client");
        ck_assert_int_eq((int)num(cJSON_GetObjectItemCaseSensitive(r, "reference_models"), "models"), 8);
        cJSON_Delete(r);
        if (i == 0) { // RMIA over the same reference federations
            cJSON *rm = run_attack(&fx, "rmia", "{\"target\": \"client\", \"shadow_models\": 8}", cache);
            ck_assert_int_eq((int)num(cJSON_GetObjectItemCaseSensitive(rm, "target"), "client"), k);
            cJSON_Delete(rm);
        }
    }
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

// The engine's replay: a federation of another seed that replays seed s's sampling has
// s's participants in every round.
START_TEST(replayed_sampling_has_the_same_participants) {
    Fixture fx;
    pt_open(&fx);
    int ids[PT_ROUNDS][PT_CLIENTS], count[PT_ROUNDS];
    unsigned char ever[PT_CLIENTS];
    train_participants(&fx, ids, count, ever);
    for (int replay = 0; replay < 2; replay++) {
        Model *m = model_clone(fx.ex.model, fx.ex.backend, NULL);
        ck_assert_ptr_nonnull(m);
        FedSetup s = {.cfg = fx.ex.fed, .seed = 12345, .threads = 1, .backend = fx.ex.backend, .global = m,
                      .train = fx.ex.train, .test = fx.ex.test, .quiet = 1, .replay_sampling = replay,
                      .sampling_seed = fx.ex.seed};
        FpError err = {0};
        Federation *f = fed_create(&s, &err);
        ck_assert_msg(f, "%s", err.msg);
        ck_assert_msg(fed_run(f, 0, &err) == FP_OK, "%s", err.msg);
        int same = 1;
        for (int r = 0; r < PT_ROUNDS; r++) {
            const FedRoundResult *res = fed_round_result(f, r);
            same &= res->participants == count[r] &&
                    memcmp(res->clients, ids[r], sizeof(int) * (size_t)count[r]) == 0;
        }
        ck_assert_int_eq(same, replay); // without the replay, seed 12345 samples others (control)
        fed_free(f);
        model_free(m);
    }
    fixture_close(&fx);
}
END_TEST

static FpStatus parse_victims(Fixture *fx, const char *attack, int n_victims, VictimOptions *o, FpError *err) {
    cJSON *aj = cJSON_Parse(attack);
    ck_assert_ptr_nonnull(aj);
    AttackEnv env = {.ex = &fx->ex, .attack_json = aj, .path = "attack", .quiet = 1};
    FpStatus st = victims_parse(&env, n_victims, o, err);
    cJSON_Delete(aj);
    return st;
}

// DLG's default victim is the lowest-numbered client that takes part (ever, or in the
// declared round); a given client must take part, as the engine samples it.
START_TEST(default_victim_takes_part) {
    Fixture fx;
    pt_open(&fx);
    int ids[PT_ROUNDS][PT_CLIENTS], count[PT_ROUNDS];
    unsigned char ever[PT_CLIENTS];
    train_participants(&fx, ids, count, ever);
    int first = 0;
    while (!ever[first])
        first++;
    VictimOptions o;
    FpError err = {0};
    ck_assert_msg(parse_victims(&fx, "{}", 1, &o, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(o.client, first);
    ck_assert_int_eq(o.client_defaulted, 1);
    ck_assert_int_eq(o.round, -1);
    for (int r = 0; r < PT_ROUNDS; r++) {
        char aj[96];
        snprintf(aj, sizeof aj, "{\"observe\": {\"round\": %d}}", r + 1);
        ck_assert_msg(parse_victims(&fx, aj, 1, &o, &err) == FP_OK, "%s", err.msg);
        ck_assert_int_eq(o.client, ids[r][0]);
    }
    for (int k = 0; k < PT_CLIENTS; k++) {
        char aj[96];
        snprintf(aj, sizeof aj, "{\"observe\": {\"client\": %d}}", k);
        FpStatus st = parse_victims(&fx, aj, 1, &o, &err);
        ck_assert_msg(st == (ever[k] ? FP_OK : FP_EPARAM), "client %d: %s", k, err.msg);
        if (st == FP_OK)
            ck_assert_int_eq(o.client_defaulted, 0);
        else
            ck_assert_ptr_nonnull(strstr(err.msg, "attack.observe: client"));
    }
    fixture_close(&fx);
}
END_TEST

Suite *suite_participants(void) {
    Suite *s = suite_create("participants");
    TCase *tc = tcase_create("participants");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, target_client_is_accepted_exactly_when_it_took_part);
    tcase_add_test(tc, reference_models_of_a_client_target_replay_its_rounds);
    tcase_add_test(tc, replayed_sampling_has_the_same_participants);
    tcase_add_test(tc, default_victim_takes_part);
    suite_add_tcase(s, tc);
    return s;
}
