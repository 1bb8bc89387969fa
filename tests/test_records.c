// Privacy records in the demo federation (fixtures/demo.json: 1,000 clients, Bernoulli q 0.1,
// 20 rounds, the MLP 784-64-10, δ 1e-5), without training: the defense is created from its
// JSON, told the cohorts the server's sampling draws (fed_server_sample, seed 1), and asked
// for its record.
//   labels: the aggregate's record and the upload observer's are labelled each by its own
//       proof: the upload's table slack, which does not fit in δ at its ε of 30 and more,
//       never makes the aggregate conditional or ∞; the aggregate is proven at ε 0.25, 1
//       and 4 (it read "conditional", sound ∞, at 1 and 4);
//   calibration: a target ε ends with a record of the same notion in [0.99 target, target]
//       (client noise ended at 0.762 for 2);
//   controls: a record whose slack exceeds its δ share is not labelled proven, and an
//       upload record's assumption stays in its own record.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "defenses/clip.h"
#include "fl/experiment.h"
#include "fl/fed.h"
#include "reports/export.h"
#include "runner/check.h"
#include "tests/cli_run.h"
#include "tests/defense_fixtures.h"
#include "tests/matrix_standins.h"

#define DEMO_CLIENTS 1000
#define DEMO_ROUNDS 20
#define DEMO_Q 0.1
#define DEMO_SEED 1
#define RECORDS_DIR "build/test-records"

// The demo federation's parameter table (784·64 + 64 + 64·10 + 10 trainable) and the cohorts
// its server draws, in a setup with or without them (planned = 0: what a caller that does
// not know them gives).
typedef struct {
    Table t;
    int k[DEMO_ROUNDS];
    DefenseSetup su;
} Demo;

static void demo_init(Demo *d, int planned) {
    table_init(&d->t, 784 * 64 + 64 + 64 * 10, 10);
    FedConfig c = {.clients = DEMO_CLIENTS, .sample_rate = DEMO_Q, .sampling = SAMPLING_BERNOULLI,
                   .rounds = DEMO_ROUNDS};
    int *scratch = malloc(sizeof(int) * DEMO_CLIENTS);
    ck_assert_ptr_nonnull(scratch);
    for (int r = 0; r < DEMO_ROUNDS; r++)
        d->k[r] = fed_server_sample(&c, DEMO_SEED, r, scratch);
    free(scratch);
    d->su = setup_for(&d->t, DEMO_CLIENTS, DEMO_ROUNDS, DEMO_Q, 60);
    d->su.seed = DEMO_SEED;
    d->su.planned_cohorts = planned ? d->k : NULL;
}

// The settled record of `json` after the demo's rounds, each ended with its cohort. With
// FP_RECORDS_FIGURES set, its figures on standard error (the figures docs/defenses-federated.md
// states).
static void demo_record(Demo *d, const char *json, PrivacyRecord *rec) {
    const DefenseOps *ops;
    void *st = make_defense(json, &d->su, &ops);
    for (int r = 0; r < DEMO_ROUNDS; r++)
        ops->end_round(st, r, d->k[r]);
    defense_privacy(ops, st, DEMO_ROUNDS, rec, NULL);
    if (getenv("FP_RECORDS_FIGURES"))
        fprintf(stderr, "%s%s: z %.6g; aggregate %s %.6g (conditional %.6g); upload %s %.6g (conditional %.6g)\n",
                json, d->su.cohort_size ? " (fixed cohort)" : "", describe_number(ops, st, "noise_multiplier"),
                guarantee_name(rec->guarantee), rec->epsilon_total_sound, rec->epsilon_total_conditional,
                guarantee_name(rec->upload_guarantee), rec->epsilon_total_upload,
                rec->epsilon_total_upload_conditional);
    ops->destroy(st);
}

static const double label_eps[] = {0.25, 1, 4};

START_TEST(client_noise_aggregate_proven_at_every_epsilon) {
    Demo d;
    demo_init(&d, 1);
    for (int i = 0; i < 3; i++) {
        char json[160];
        snprintf(json, sizeof json, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"client\",\"epsilon\":%g}",
                 label_eps[i]);
        PrivacyRecord rec;
        demo_record(&d, json, &rec);
        ck_assert_msg(rec.guarantee == GUARANTEE_PROVEN, "eps %g: the aggregate is %s", label_eps[i],
                      guarantee_name(rec.guarantee));
        ck_assert_msg(isfinite(rec.epsilon_total_sound) && rec.epsilon_total_sound <= label_eps[i],
                      "eps %g: sound %g", label_eps[i], rec.epsilon_total_sound);
        ck_assert_ptr_null(rec.assumptions[0]);
        // The upload observer's record has its own label: proven where its slack fits, else
        // conditional on the table's precision with its figure beside it, never both ∞.
        ck_assert_ptr_nonnull(rec.upload_notion);
        ck_assert_int_ne(rec.upload_guarantee, GUARANTEE_NONE);
        if (rec.upload_guarantee == GUARANTEE_CONDITIONAL) {
            ck_assert(isinf(rec.epsilon_total_upload));
            ck_assert(isfinite(rec.epsilon_total_upload_conditional));
            ck_assert_str_eq(rec.upload_assumptions[0], CLIP_NOISE_SLACK_ASSUMPTION);
        } else {
            ck_assert(isfinite(rec.epsilon_total_upload));
        }
        // What results show: the upload record's label beside its figure, the record's
        // "guarantee" the aggregate's.
        cJSON *j = privacy_record_json(&rec);
        ck_assert_str_eq(cJSON_GetObjectItem(j, "guarantee")->valuestring, "proven");
        const cJSON *up = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "sound"), "upload");
        ck_assert_ptr_nonnull(up);
        ck_assert_str_eq(cJSON_GetObjectItem(up, "guarantee")->valuestring, guarantee_name(rec.upload_guarantee));
        ck_assert(cJSON_IsArray(cJSON_GetObjectItem(up, "assumptions")));
        cJSON_Delete(j);
    }
}
END_TEST

// Server noise: the upload observer has no bound (the server sees the clipped update), a
// record of its own that leaves the aggregate's proof alone.
START_TEST(server_noise_upload_record_is_none) {
    Demo d;
    demo_init(&d, 1);
    PrivacyRecord rec;
    demo_record(&d, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"server\",\"epsilon\":1}", &rec);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert(isfinite(rec.epsilon_total_sound));
    ck_assert_int_eq(rec.upload_guarantee, GUARANTEE_NONE);
    ck_assert(isinf(rec.epsilon_total_upload));
    ck_assert_ptr_nonnull(rec.upload_assumptions[0]);
}
END_TEST

// The record's ε within [0.99 target, target] for each target and sampling, proven: the
// table's slack counts the draws the release holds (the participants' d, not every
// client's: at ε 8 over the demo's 10^9 it did not fit in δ/2).
static void assert_meets(Demo *d, const char *fmt, const double *targets, int n) {
    for (int i = 0; i < n; i++) {
        char json[200];
        snprintf(json, sizeof json, fmt, targets[i]);
        PrivacyRecord rec;
        demo_record(d, json, &rec);
        double e = rec.epsilon_total_sound;
        ck_assert_msg(rec.guarantee == GUARANTEE_PROVEN, "%s: %s", json, guarantee_name(rec.guarantee));
        ck_assert_msg(e <= targets[i] && e >= 0.99 * targets[i], "%s: record %.6g for target %g", json, e,
                      targets[i]);
    }
}

static const double calib_eps[] = {0.5, 2, 8};

START_TEST(client_noise_target_met) {
    Demo d;
    demo_init(&d, 1);
    assert_meets(&d, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"client\",\"epsilon\":%g}", calib_eps, 3);
}
END_TEST

// The other samplings of the same defense, and fedsmp's corrected variant (the same account).
START_TEST(server_noise_and_fixed_cohort_targets_met) {
    Demo d;
    demo_init(&d, 1);
    assert_meets(&d, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"server\",\"epsilon\":%g}", calib_eps, 3);
    d.su.cohort_size = 100;
    d.su.planned_cohorts = NULL;
    for (int r = 0; r < DEMO_ROUNDS; r++)
        d.k[r] = 100;
    assert_meets(&d, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"client\",\"epsilon\":%g}", calib_eps, 3);
    assert_meets(&d, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"server\",\"epsilon\":%g}", calib_eps, 3);
}
END_TEST

// dp-fedasgp corrected: its ε per upload is what its safe sampler proves, and the grids'
// rounding put that up to 1e-4 above it (0.50005 for 0.5, 2.00004 for 2).
START_TEST(asgp_per_upload_proof_meets_epsilon) {
    Table t;
    table_init(&t, 2000, 10);
    DefenseSetup su = setup_for(&t, 100, 20, 0.1, 600);
    for (int i = 0; i < 3; i++) {
        char json[160];
        snprintf(json, sizeof json, "{\"name\":\"dp-fedasgp\",\"epsilon\":%g,\"max_selected_fraction\":0.02}",
                 calib_eps[i]);
        const DefenseOps *ops;
        void *st = make_defense(json, &su, &ops);
        double per = describe_number(ops, st, "epsilon_sound_per_upload");
        ck_assert_msg(per <= calib_eps[i] && per >= 0.99 * calib_eps[i], "%s: %.9g per upload", json, per);
        ops->destroy(st);
    }
}
END_TEST

// Without the planned cohorts (a caller that does not know them) the calibration keeps the
// account that holds whatever the counts: never above the target.
START_TEST(unknown_cohorts_stay_below_target) {
    Demo d;
    demo_init(&d, 0);
    for (int i = 0; i < 3; i++) {
        char json[160];
        snprintf(json, sizeof json, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"client\",\"epsilon\":%g}",
                 calib_eps[i]);
        PrivacyRecord rec;
        demo_record(&d, json, &rec);
        double e = isfinite(rec.epsilon_total_sound) ? rec.epsilon_total_sound : rec.epsilon_total_conditional;
        ck_assert_msg(e <= calib_eps[i], "%s: record %.6g", json, e);
    }
}
END_TEST

// Controls. A record whose table slack does not fit in δ at its ε (a tiny multiplier: ε in
// the hundreds over 10^9 draws) is not labelled proven; and the settling keeps an upload
// record's assumption in that record alone.
START_TEST(slack_beyond_delta_not_proven) {
    Demo d;
    demo_init(&d, 1);
    PrivacyRecord rec;
    demo_record(&d, "{\"name\":\"gaussian-dpfedavg\",\"noise\":\"client\",\"noise_multiplier\":0.05}", &rec);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_CONDITIONAL);
    ck_assert(isinf(rec.epsilon_total_sound));
    ck_assert(isfinite(rec.epsilon_total_conditional));
    ck_assert_str_eq(rec.assumptions[0], CLIP_NOISE_SLACK_ASSUMPTION);
    ck_assert_int_eq(rec.upload_guarantee, GUARANTEE_CONDITIONAL);

    PrivacyRecord r = {.epsilon_total_sound = 1, .guarantee = GUARANTEE_PROVEN, .epsilon_total_upload = 30,
                       .upload_notion = "u", .upload_own_label = 1, .upload_guarantee = GUARANTEE_PROVEN};
    privacy_assume_upload(&r, "A");
    privacy_record_settle(&r);
    ck_assert_int_eq(r.guarantee, GUARANTEE_PROVEN);
    ck_assert_double_eq(r.epsilon_total_sound, 1);
    ck_assert_ptr_null(r.assumptions[0]);
    ck_assert_int_eq(r.upload_guarantee, GUARANTEE_CONDITIONAL);
    ck_assert(isinf(r.epsilon_total_upload));
    ck_assert_double_eq(r.epsilon_total_upload_conditional, 30);
    // One bound for both observers (upload_own_label 0): one label, as before.
    r = (PrivacyRecord){.epsilon_total_sound = 1, .guarantee = GUARANTEE_PROVEN, .epsilon_total_upload = 1,
                        .upload_notion = "u"};
    privacy_assume(&r, "B");
    privacy_record_settle(&r);
    ck_assert_int_eq(r.upload_guarantee, GUARANTEE_CONDITIONAL);
    ck_assert_str_eq(r.upload_assumptions[0], "B");
    ck_assert(isinf(r.epsilon_total_upload) && isinf(r.epsilon_total_sound));
}
END_TEST

// Through the engine: `fedpriv train` gives the defense the cohorts its sampling draws, and
// the record after the last round meets the target (20 clients, Bernoulli q 0.3, 5 rounds).
START_TEST(cli_train_meets_target) {
    ck_assert(standin_mkdirs(RECORDS_DIR));
    FILE *f = fopen(RECORDS_DIR "/toy.csv", "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "f1,f2,label\n");
    for (int i = 0; i < 120; i++)
        fprintf(f, "%g,%g,%d\n", (i % 7) / 7.0 - 0.5 + (i % 2) * 0.4, (i % 5) / 5.0, i % 2);
    fclose(f);
    f = fopen(RECORDS_DIR "/cfg.json", "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"toy.csv\"}," // beside cfg.json
               " \"model\": {\"name\": \"logreg\"}, \"federation\": {\"clients\": 20, \"sample_rate\": 0.3,"
               " \"sampling\": \"bernoulli\", \"rounds\": 5, \"batch_size\": 5, \"lr\": 0.1}, \"defense\":"
               " {\"name\": \"gaussian-dpfedavg\", \"noise\": \"client\", \"epsilon\": 2}, \"threads\": 1}\n");
    fclose(f);
    remove(RECORDS_DIR "/r.json");
    static char out[1 << 14], err[1 << 14];
    const char *args[] = {"train", "--config", RECORDS_DIR "/cfg.json", "--out", RECORDS_DIR "/r.json", NULL};
    int rc = cli_run(args, out, err, sizeof out);
    if (rc == -1)
        return; // no binary: skipped (cli_run.h)
    ck_assert_msg(rc == 0, "%s", err);
    f = fopen(RECORDS_DIR "/r.json", "r");
    ck_assert_ptr_nonnull(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    cJSON *r = cJSON_Parse(text);
    ck_assert_ptr_nonnull(r);
    const cJSON *rounds = cJSON_GetObjectItem(r, "rounds");
    const cJSON *p = cJSON_GetObjectItem(cJSON_GetArrayItem(rounds, cJSON_GetArraySize(rounds) - 1), "privacy");
    ck_assert_str_eq(cJSON_GetObjectItem(p, "guarantee")->valuestring, "proven");
    double e = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "sound"), "epsilon_total")->valuedouble;
    ck_assert_msg(e <= 2 && e >= 0.99 * 2, "record %.6g for target 2", e);
    cJSON_Delete(r);
}
END_TEST

// What results read: `fedpriv check` bounds each record's own label ("guarantee" the
// record's, "upload_guarantee" the upload observer's), and the export carries both. The
// stand-in "clientdp" is proven for the aggregates, none for the upload observer.
START_TEST(check_and_export_read_each_records_label) {
    ck_assert(standin_mkdirs(RECORDS_DIR));
    ck_assert(standin_write_csv(RECORDS_DIR "/blobs.csv"));
    standin_rm(RECORDS_DIR "/run");
    cJSON *root = standin_matrix_seeds(RECORDS_DIR "/blobs.csv", "[3]",
                                       "[{\"name\": \"clientdp\", \"epsilon\": [1, 4]}, {\"name\": \"none\"}]",
                                       "[{\"name\": \"probe\"}]");
    MatrixSummary sum;
    FpError err = {0};
    ck_assert_msg(standin_run(root, RECORDS_DIR "/run", 1, &sum, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(root);
    static const struct {
        const char *bounds;
        int violations;
        const char *first; // in the first violation's message
    } cases[] = {
        {"[{\"defense\": \"clientdp\", \"guarantee\": \"proven\"}]", 0, NULL},
        {"[{\"defense\": \"clientdp\", \"upload_guarantee\": \"none\"}]", 0, NULL},
        {"[{\"defense\": \"clientdp\", \"upload_guarantee\": \"proven\"}]", 2,
         "guarantee none, needs proven (stand-in: the server sees each clipped update)"},
        {"[{\"defense\": \"none\", \"upload_guarantee\": \"none\"}]", 1, "no upload observer's record"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[400];
        snprintf(text, sizeof text, "{\"bounds\": %s}", cases[i].bounds);
        cJSON *b = cJSON_Parse(text);
        CheckResult r;
        ck_assert_msg(check_baseline(RECORDS_DIR "/run", b, "b.json", &r, &err) == FP_OK, "%s", err.msg);
        cJSON_Delete(b);
        ck_assert_msg(r.n_violations == cases[i].violations, "%s: %d violations", text, r.n_violations);
        if (cases[i].first) {
            const char *msg = NULL;
            for (int k = 0; k < r.n_items && !msg; k++)
                if (!r.items[k].ok)
                    msg = r.items[k].message;
            ck_assert_msg(msg && strstr(msg, cases[i].first), "%s: %s", text, msg ? msg : "(none)");
        }
        check_result_free(&r);
    }
    cJSON *b = cJSON_Parse("{\"bounds\": [{\"defense\": \"none\", \"guarantee\": \"none\","
                           " \"upload_guarantee\": \"none\"}]}");
    CheckResult r;
    ck_assert_int_eq(check_baseline(RECORDS_DIR "/run", b, "b.json", &r, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "bounds[0].upload_guarantee"));
    cJSON_Delete(b);
    HtmlBuf o;
    hb_init(&o);
    ck_assert_msg(report_export(RECORDS_DIR "/run", EXPORT_CSV, &o, &err) == FP_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(o.s);
    ck_assert_ptr_nonnull(strstr(o.s, ",epsilon_sound,epsilon_conditional,guarantee,epsilon_upload,upload_guarantee,"
                                      "epsilon_standard_rdp,epsilon_standard_pld,"));
    ck_assert_ptr_nonnull(strstr(o.s, ",1,,proven,inf,none,0.9,0.8,client,"));
    hb_free(&o);
}
END_TEST

Suite *suite_records(void) {
    Suite *s = suite_create("records");
    TCase *t = tcase_create("demo");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, client_noise_aggregate_proven_at_every_epsilon);
    tcase_add_test(t, server_noise_upload_record_is_none);
    tcase_add_test(t, client_noise_target_met);
    tcase_add_test(t, server_noise_and_fixed_cohort_targets_met);
    tcase_add_test(t, unknown_cohorts_stay_below_target);
    tcase_add_test(t, asgp_per_upload_proof_meets_epsilon);
    tcase_add_test(t, slack_beyond_delta_not_proven);
    tcase_add_test(t, check_and_export_read_each_records_label);
    tcase_add_test(t, cli_train_meets_target);
    suite_add_tcase(s, t);
    return s;
}
