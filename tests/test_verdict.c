// The verdict first (reports/verdict.h) and honest intervals (reports/stats.h), on
// hand-written runs shaped like the demo: thirteen defense settings (none; an LDP
// defense that stops the server's inversion; client-level DP with server-side noise,
// which does not; the same with client noise; a defense at chance), attacks in both
// views, a membership attack that does not leak even without a defense.
//   - the verdict words (leaks / protects / not measurable here) in results.json's summary
//     and on the page, with the rule stated there;
//   - two seeds: no Student-t interval, the two values instead; three seeds: a t-interval;
//   - proportions (accuracy, recovered fraction) with Wilson intervals inside [0, 1];
//   - `fedpriv report --summary`: the same table as text;
//   - in headless Chromium at 1280 x 800: every verdict row on the first screen, no table
//     wider than its box; and a control page that the same check refuses.
// Everything here reads runs through the interfaces the report had before the verdict
// (matrix_results_load, run_summary_json, report_write_html, the binary).
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "core/json_number.h"
#include "reports/html.h"
#include "reports/summary.h"
#include "scratch.h"

#define VDIR "build/test-verdict"

// The attacks of the synthetic runs: what each one observes and which figure of a
// setting it takes.
typedef enum { ROLE_INV_SERVER, ROLE_INV_PUBLIC, ROLE_MIA_PUBLIC, ROLE_MIA_SERVER } Role;
static const struct {
    const char *name, *label, *headline;
    Role role;
} syn_attacks[] = {
    {"dlg", "dlg", "ssim_mean", ROLE_INV_SERVER},
    {"dlg", "dlg observer=public", "ssim_mean", ROLE_INV_PUBLIC},
    {"ml-leaks", "ml-leaks", "auc", ROLE_MIA_PUBLIC},
    {"cs-mia", "cs-mia", "auc", ROLE_MIA_SERVER},
    {"idlg", "idlg", "ssim_mean", ROLE_INV_SERVER},
    {"idlg", "idlg observer=public", "ssim_mean", ROLE_INV_PUBLIC},
    {"basic-mia", "basic-mia", "auc", ROLE_MIA_PUBLIC},
};

// A defense setting of the synthetic runs and what the attacks achieve against it.
typedef struct {
    const char *defense, *label;
    double eps;              // NaN: none
    const char *privacy;     // the cell's privacy record (JSON)
    const char *noise;       // defense_resolved.noise, or NULL
    double acc;              // model accuracy of seed 1 (each further seed + 0.01)
    int recovered[3];        // per seed: images the server-view inversions recover, of 2
    double ssim;             // their mean SSIM
    double auc_server;       // the server-view membership attack (each further seed + 0.004)
} SynSetting;

static const char *const P_NONE = "{\"unit\": \"none\", \"nominal\": {\"epsilon_total\": \"inf\", \"notion\": \"none\"},"
                                  " \"sound\": {\"epsilon_total\": \"inf\", \"delta\": 0, \"notion\": \"no guarantee\"},"
                                  " \"guarantee\": \"none\", \"assumptions\": []}";
static const char *const P_LDP = "{\"unit\": \"scalar\", \"nominal\": {\"epsilon_total\": 20, \"notion\": \"eps-LDP per "
                                 "scalar per round\"}, \"sound\": {\"epsilon_total\": \"inf\", \"delta\": 0, \"notion\": "
                                 "\"none for a client\"}, \"guarantee\": \"none\", \"assumptions\": [\"per scalar only\"]}";
static const char *const P_CDP = "{\"unit\": \"client\", \"nominal\": {\"epsilon_total\": 1, \"notion\": \"client-level\"},"
                                 " \"sound\": {\"epsilon_total\": 1, \"delta\": 1e-05, \"notion\": \"(eps, delta)-DP per "
                                 "client, released models\", \"upload\": {\"epsilon_total\": \"inf\", \"notion\": \"the "
                                 "server sees the clipped update\", \"guarantee\": \"none\", \"assumptions\": []}},"
                                 " \"guarantee\": \"proven\", \"assumptions\": [], \"sigma\": 1.1}";
static const char *const P_CDP_COND = "{\"unit\": \"client\", \"nominal\": {\"epsilon_total\": 4, \"notion\": \"client\"},"
                                      " \"sound\": {\"epsilon_total\": \"inf\", \"epsilon_total_conditional\": 2.211,"
                                      " \"delta\": 1e-05, \"notion\": \"(eps, delta)-DP per client\", \"upload\":"
                                      " {\"epsilon_total\": \"inf\", \"epsilon_total_conditional\": 236, \"notion\": \"per"
                                      " upload\", \"guarantee\": \"conditional\", \"assumptions\": [\"a table: its distance to the ideal law"
                                      " (2^-59 per draw) is taken as negligible, though over the run's draws (1 +"
                                      " e^eps) draws 2^-59 exceeds even half of delta at this epsilon, as the upload"
                                      " record of a real run reads\"]}},"
                                      " \"guarantee\": \"conditional\", \"assumptions\": [\"exact draws: the table's distance to the ideal"
                                      " law (2^-59 per draw) is taken as negligible, though over the run's draws (1 +"
                                      " e^eps) draws 2^-59 exceeds even half of delta at this epsilon, as a real"
                                      " record's reasons read\"], \"sigma\": 0.7}";

#define NAN_ NAN
static const SynSetting demo13[] = {
    {"none", "none", NAN_, NULL, NULL, 0.76, {2, 2, 2}, 1.0, 0.75},
    {"spm", "spm variant=corrected ε=0.5", 0.5, NULL, NULL, 0.64, {0, 0, 0}, 0.02, 0.51},
    {"spm", "spm variant=corrected ε=1", 1, NULL, NULL, 0.74, {0, 0, 0}, 0.03, 0.52},
    {"spm", "spm variant=corrected ε=4", 4, NULL, NULL, 0.76, {0, 1, 0}, 0.2, 0.56},
    {"gaussian-dpfedavg", "gaussian-dpfedavg noise=server ε=0.25", 0.25, NULL, "server", 0.43, {2, 2, 2}, 1.0, 0.70},
    {"gaussian-dpfedavg", "gaussian-dpfedavg noise=server ε=1", 1, NULL, "server", 0.73, {2, 2, 2}, 1.0, 0.72},
    {"gaussian-dpfedavg", "gaussian-dpfedavg noise=server ε=4", 4, NULL, "server", 0.76, {2, 2, 2}, 1.0, 0.74},
    {"gaussian-dpfedavg", "gaussian-dpfedavg noise=client ε=0.25", 0.25, NULL, "client", 0.17, {0, 0, 0}, 0.03, 0.50},
    {"gaussian-dpfedavg", "gaussian-dpfedavg noise=client ε=1", 1, "cond", "client", 0.41, {0, 0, 0}, 0.03, 0.50},
    {"gaussian-dpfedavg", "gaussian-dpfedavg noise=client ε=4", 4, "cond", "client", 0.68, {0, 0, 0}, 0.04, 0.51},
    {"adaptive-harmony", "adaptive-harmony variant=corrected ε=1", 1, NULL, NULL, 0.12, {0, 0, 0}, 0.0, 0.50},
    {"adaptive-harmony", "adaptive-harmony variant=corrected ε=4", 4, NULL, NULL, 0.137, {0, 0, 0}, 0.01, 0.50},
    {"adaptive-harmony", "adaptive-harmony variant=corrected ε=10", 10, NULL, NULL, 0.111, {0, 0, 0}, 0.05, 0.49},
};
#define N_DEMO13 (int)(sizeof demo13 / sizeof demo13[0])

static const char *privacy_of(const SynSetting *s) {
    if (strcmp(s->defense, "none") == 0)
        return P_NONE;
    if (strcmp(s->defense, "gaussian-dpfedavg") == 0)
        return s->privacy ? P_CDP_COND : P_CDP;
    return P_LDP;
}

static void write_json(const char *path, cJSON *j) {
    char *text = cJSON_Print(j);
    ck_assert_ptr_nonnull(text);
    write_text(path, text);
    free(text);
}

static cJSON *attack_entry(int k, int index, const SynSetting *s, int seed) {
    cJSON *a = cJSON_CreateObject(), *res = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "name", syn_attacks[k].name);
    cJSON_AddNumberToObject(a, "index", index);
    cJSON_AddStringToObject(a, "status", "done");
    double value;
    Role role = syn_attacks[k].role;
    if (role == ROLE_INV_SERVER || role == ROLE_INV_PUBLIC) {
        int rec = role == ROLE_INV_SERVER ? s->recovered[seed] : 0;
        double ssim = role == ROLE_INV_SERVER ? s->ssim : 0.03;
        cJSON_AddStringToObject(res, "observer", role == ROLE_INV_SERVER ? "server" : "public");
        cJSON *imgs = cJSON_AddArrayToObject(res, "images");
        for (int i = 0; i < 2; i++) {
            cJSON *im = cJSON_CreateObject();
            cJSON_AddNumberToObject(im, "ssim", i < rec ? 0.99 : ssim);
            cJSON_AddItemToArray(imgs, im);
        }
        cJSON_AddNumberToObject(res, "recovered_ssim", 0.9);
        cJSON_AddNumberToObject(res, "images_recovered", rec);
        cJSON_AddNumberToObject(res, "recovered_fraction", rec / 2.0);
        cJSON_AddNumberToObject(res, "ssim_mean", value = ssim);
        if (role == ROLE_INV_PUBLIC) // as the real attacks say it: nothing recovered without a defense
            cJSON_AddBoolToObject(res, "applicable", 0);
    } else {
        double auc = role == ROLE_MIA_SERVER ? s->auc_server + 0.004 * seed : 0.497 + 0.002 * seed;
        cJSON *t = cJSON_AddObjectToObject(res, "target");
        cJSON_AddStringToObject(t, "kind", role == ROLE_MIA_SERVER ? "client" : "global");
        cJSON_AddNumberToObject(res, "auc", value = auc);
        cJSON *tp = cJSON_AddObjectToObject(res, "tpr_at_fpr");
        cJSON_AddNumberToObject(tp, "0.01", 0.01 + (auc - 0.5) * 0.2);
    }
    cJSON_AddNumberToObject(a, "value", value);
    cJSON_AddItemToObject(a, "result", res);
    return a;
}

// Writes run dir: the settings × seeds, the attacks syn_attacks[attacks[0..n_attacks)].
static void write_run(const char *dir, const SynSetting *set, int n_set, int seeds, const int *attacks,
                      int n_attacks) {
    char path[512];
    scratch_remove(dir);
    ck_assert_int_eq(mkdir(VDIR, 0755) == 0 || errno == EEXIST, 1);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/cells", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    cJSON *ix = cJSON_CreateObject();
    cJSON_AddStringToObject(ix, "kind", "fedpriv-matrix");
    cJSON_AddStringToObject(ix, "description", "verdict test");
    cJSON *ds = cJSON_AddObjectToObject(ix, "dataset");
    cJSON_AddStringToObject(ds, "name", "fashion-mnist");
    cJSON_AddNumberToObject(ds, "classes", 10);
    cJSON_AddNumberToObject(ds, "chance_accuracy", 0.11);
    cJSON_AddNumberToObject(ds, "test_samples", 2000);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(ix, "model"), "name", "mlp");
    cJSON *atk = cJSON_AddArrayToObject(ix, "attacks");
    for (int q = 0; q < n_attacks; q++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "name", syn_attacks[attacks[q]].name);
        cJSON_AddStringToObject(a, "label", syn_attacks[attacks[q]].label);
        cJSON_AddStringToObject(a, "headline", syn_attacks[attacks[q]].headline);
        cJSON_AddBoolToObject(a, "higher_leaks", 1);
        cJSON_AddItemToArray(atk, a);
    }
    cJSON *cells = cJSON_AddArrayToObject(ix, "cells");
    for (int i = 0; i < n_set; i++)
        for (int sd = 0; sd < seeds; sd++) {
            const SynSetting *s = &set[i];
            char id[64];
            snprintf(id, sizeof id, "c%02d-s%d", i, sd + 1);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "id", id);
            cJSON_AddStringToObject(e, "label", s->label);
            cJSON_AddStringToObject(e, "defense", s->defense);
            jnum_add(e, "epsilon", s->eps);
            cJSON_AddObjectToObject(e, "params");
            cJSON_AddNumberToObject(e, "setting", i);
            cJSON_AddNumberToObject(e, "seed", sd + 1);
            cJSON_AddStringToObject(e, "status", "done");
            cJSON_AddStringToObject(e, "spec_hash", id);
            cJSON_AddItemToArray(cells, e);
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "cell", id);
            cJSON_AddStringToObject(c, "status", "done");
            cJSON_AddStringToObject(c, "spec_hash", id);
            cJSON_AddStringToObject(c, "defense", s->defense);
            cJSON_AddNumberToObject(c, "seed", sd + 1);
            cJSON *m = cJSON_AddObjectToObject(c, "model");
            cJSON_AddNumberToObject(m, "test_accuracy", s->acc + 0.01 * sd);
            cJSON_AddNumberToObject(m, "test_loss", 1);
            cJSON_AddItemToObject(c, "privacy", cJSON_Parse(privacy_of(s)));
            cJSON *r = cJSON_AddObjectToObject(c, "defense_resolved");
            if (s->noise)
                cJSON_AddStringToObject(r, "noise", s->noise);
            cJSON *ca = cJSON_AddArrayToObject(c, "attacks");
            for (int q = 0; q < n_attacks; q++)
                cJSON_AddItemToArray(ca, attack_entry(attacks[q], q, s, sd));
            snprintf(path, sizeof path, "%s/cells/%s.json", dir, id);
            write_json(path, c);
            cJSON_Delete(c);
        }
    snprintf(path, sizeof path, "%s/results.json", dir);
    write_json(path, ix);
    cJSON_Delete(ix);
}

static const int four_attacks[] = {0, 1, 2, 3};
static const int six_attacks[] = {0, 1, 4, 5, 2, 6};

// The summary JSON of run dir (as results.json carries it); free with cJSON_Delete.
static cJSON *summary_of(const char *dir) {
    MatrixResults r;
    RunSummary S;
    FpError err = {0};
    ck_assert_msg(matrix_results_load(dir, &r, &err) == FP_OK, "%s", err.msg);
    ck_assert_msg(run_summary_build(&r, &S, &err) == FP_OK, "%s", err.msg);
    cJSON *j = run_summary_json(&S);
    ck_assert_ptr_nonnull(j);
    run_summary_free(&S);
    matrix_results_free(&r);
    return j;
}

static const cJSON *jget(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static const cJSON *setting_json(const cJSON *summary, int i) {
    return cJSON_GetArrayItem(jget(summary, "settings"), i);
}

// An attack metric's summary ("auc", "recovered_fraction") of setting i, attack q.
static const cJSON *attack_metric_json(const cJSON *summary, int i, int q, const char *key) {
    return jget(cJSON_GetArrayItem(jget(setting_json(summary, i), "attacks"), q), key);
}

static char *report_of(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FpError err = {0};
    ck_assert_msg(report_write_html(dir, path, NULL, NULL, &err) == FP_OK, "%s", err.msg);
    return read_text_alloc(path, 1 << 22);
}

// ---- intervals --------------------------------------------------------------------------------

// Two seeds: the AUC of a setting is shown as its two values, never as mean ± t(1)·sd/√2
// (before: "0.499 ± 0.025" from two values); results.json has no interval for it. Three
// seeds: the Student-t interval, in both. The seed count is on the page.
START_TEST(two_seeds_show_values_not_a_t_interval) {
    write_run(VDIR "/two", demo13, 2, 2, four_attacks, 4);
    cJSON *j = summary_of(VDIR "/two");
    const cJSON *auc = attack_metric_json(j, 0, 2, "auc"); // ml-leaks without a defense: 0.497, 0.499
    ck_assert_int_eq((int)jget(auc, "n")->valuedouble, 2);
    ck_assert_msg(cJSON_IsNull(jget(auc, "ci_low")) && cJSON_IsNull(jget(auc, "ci_high")),
                  "a t-interval from two seeds in results.json");
    cJSON_Delete(j);
    char *html = report_of(VDIR "/two", "report.html");
    const char *matrix = strstr(html, "<table class=\"matrix\"");
    ck_assert_ptr_nonnull(matrix);
    ck_assert_msg(strstr(matrix, "0.498<span class=\"ci\"> 0.497–0.499</span>"), "the two values are not shown");
    ck_assert_msg(!strstr(matrix, "0.498<span class=\"ci\"> ±"), "a t-interval from two seeds");
    ck_assert_ptr_nonnull(strstr(html, "<th rowspan=\"2\">Seeds</th>")); // per setting, in both tables
    free(html);
    // Three seeds: now the interval of the mean, mean ± t(2)·sd/√3 = 0.499 ± 0.00497.
    write_run(VDIR "/three", demo13, 2, 3, four_attacks, 4);
    j = summary_of(VDIR "/three");
    auc = attack_metric_json(j, 0, 2, "auc");
    ck_assert_double_eq_tol(jget(auc, "ci_high")->valuedouble - 0.499, 4.302652730 * 0.002 / sqrt(3), 1e-5);
    cJSON_Delete(j);
    html = report_of(VDIR "/three", "report.html");
    ck_assert_ptr_nonnull(strstr(strstr(html, "<table class=\"matrix\""), "0.499<span class=\"ci\"> ± 0.005</span>"));
    free(html);
}
END_TEST

static void assert_inside_unit(const cJSON *m, const char *what) {
    const cJSON *lo = jget(m, "ci_low"), *hi = jget(m, "ci_high");
    ck_assert_msg(cJSON_IsNumber(lo) && cJSON_IsNumber(hi), "%s: no interval", what);
    ck_assert_msg(lo->valuedouble >= 0 && hi->valuedouble <= 1 && lo->valuedouble <= jget(m, "mean")->valuedouble &&
                      jget(m, "mean")->valuedouble <= hi->valuedouble,
                  "%s: [%g, %g] around %g", what, lo->valuedouble, hi->valuedouble, jget(m, "mean")->valuedouble);
}

// A recovered fraction of 0 and 1 (spm ε=4: 0 of 2, then 1 of 2 images) pooled over the
// seeds: 1 of 4, Wilson [0.0456, 0.699] (before: mean ± t(1) half-width, 0.25 ± 3.18);
// accuracy: correct test examples of 2000 per seed, Wilson. Every interval in [0, 1]
// and around its mean, on the page too.
START_TEST(proportions_get_wilson_intervals_inside_unit) {
    write_run(VDIR "/prop", demo13, 4, 2, four_attacks, 4);
    cJSON *j = summary_of(VDIR "/prop");
    const cJSON *rf = attack_metric_json(j, 3, 0, "recovered_fraction");
    ck_assert_ptr_nonnull(rf);
    assert_inside_unit(rf, "recovered fraction");
    ck_assert_double_eq_tol(jget(rf, "ci_low")->valuedouble, 0.04558, 1e-4);
    ck_assert_double_eq_tol(jget(rf, "ci_high")->valuedouble, 0.69936, 1e-4);
    // 0 of 4 and 4 of 4: the ends are exactly 0 and 1.
    const cJSON *none_rf = attack_metric_json(j, 1, 0, "recovered_fraction"), *all = attack_metric_json(j, 0, 0,
                                                                                                    "recovered_fraction");
    assert_inside_unit(none_rf, "0 of 4");
    assert_inside_unit(all, "4 of 4");
    ck_assert_double_eq(jget(none_rf, "ci_low")->valuedouble, 0);
    ck_assert_double_eq(jget(all, "ci_high")->valuedouble, 1);
    for (int i = 0; i < 4; i++) {
        const cJSON *acc = jget(jget(setting_json(j, i), "metrics"), "model_accuracy");
        assert_inside_unit(acc, "accuracy");
        // 0.76 and 0.77 of 2000: 3060 of 4000, Wilson half-width about 0.0132.
        if (i == 0)
            ck_assert_double_eq_tol(jget(acc, "ci_high")->valuedouble - jget(acc, "ci_low")->valuedouble, 0.02631,
                                    2e-4);
    }
    cJSON_Delete(j);
    char *html = report_of(VDIR "/prop", "report.html");
    ck_assert_msg(strstr(html, "Wilson 95% interval of the fraction [0.046, 0.699]\">recovered 1/4</small>"),
                  "the recovered fraction's Wilson interval is not on the page");
    ck_assert_msg(!strstr(html, "recovered fraction 0.250<span class=\"ci\"> ±"), "a t-interval on a proportion");
    free(html);
}
END_TEST

// ---- the verdict -----------------------------------------------------------------------------

static const char *cell_word(const cJSON *verdict, int row, const char *view, const char *family) {
    const cJSON *c;
    cJSON_ArrayForEach(c, jget(cJSON_GetArrayItem(jget(verdict, "rows"), row), "cells")) {
        if (strcmp(jget(c, "view")->valuestring, view) == 0 && strcmp(jget(c, "family")->valuestring, family) == 0)
            return jget(c, "verdict")->valuestring;
    }
    return NULL;
}

// The words for the thirteen settings: the server's inversion leaks without a defense and
// under server-side noise, and is stopped by local noise; the server's membership attack
// leaks without a defense (AUC 0.75) and under weak noise; the public membership attack
// scores AUC 0.497 without a defense, so it is "not measurable here" in every row, never
// "protects"; the public inversion recovers nothing anywhere, likewise.
START_TEST(verdict_words_follow_the_rule) {
    write_run(VDIR "/words", demo13, N_DEMO13, 2, four_attacks, 4);
    cJSON *j = summary_of(VDIR "/words");
    const cJSON *v = jget(j, "verdict");
    ck_assert_msg(v != NULL, "results.json's summary has no verdict");
    ck_assert_ptr_nonnull(strstr(jget(v, "rule")->valuestring, "Not measurable here"));
    ck_assert_int_eq(cJSON_GetArraySize(jget(v, "rows")), N_DEMO13);
    ck_assert_int_eq(cJSON_GetArraySize(jget(v, "columns")), 4);
    static const struct {
        int row;
        const char *inv_server, *mia_server;
    } want[] = {
        {0, "leaks", "leaks"},     {1, "protects", "protects"}, {3, "leaks", "leaks"},
        {4, "leaks", "leaks"},     {6, "leaks", "leaks"},       {7, "protects", "protects"},
        {12, "protects", "protects"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_str_eq(cell_word(v, want[i].row, "server", "inversion"), want[i].inv_server);
        ck_assert_str_eq(cell_word(v, want[i].row, "server", "membership"), want[i].mia_server);
    }
    // The public inversion says itself that it does not apply (no figure, no "no result").
    for (int i = 0; i < N_DEMO13; i++) {
        ck_assert_str_eq(cell_word(v, i, "public", "membership"), "not measurable here");
        ck_assert_str_eq(cell_word(v, i, "public", "inversion"), "not measurable here");
        const cJSON *pc = cJSON_GetArrayItem(jget(cJSON_GetArrayItem(jget(v, "rows"), i), "cells"), 2);
        ck_assert_str_eq(jget(pc, "view")->valuestring, "public");
        ck_assert(cJSON_IsTrue(jget(pc, "not_applicable")));
    }
    // The row's figures: k of n images over the seeds, the proven ε of both records.
    const cJSON *row4 = cJSON_GetArrayItem(jget(v, "rows"), 4), *c0 = cJSON_GetArrayItem(jget(row4, "cells"), 0);
    ck_assert_int_eq((int)jget(c0, "images_recovered")->valuedouble, 4);
    ck_assert_int_eq((int)jget(c0, "images")->valuedouble, 4);
    ck_assert_str_eq(jget(c0, "attack")->valuestring, "dlg");
    const cJSON *eps = jget(row4, "epsilon");
    ck_assert_str_eq(jget(jget(eps, "released"), "guarantee")->valuestring, "proven");
    ck_assert_str_eq(jget(jget(eps, "upload"), "guarantee")->valuestring, "none");
    ck_assert_str_eq(jget(eps, "unit")->valuestring, "client");
    ck_assert_double_eq_tol(jget(row4, "accuracy_cost")->valuedouble, 0.76 - 0.43, 1e-9);
    // A "protects" beside a model at chance says so (adaptive-harmony ε=10: 0.116 of chance 0.11).
    const cJSON *row12 = cJSON_GetArrayItem(jget(v, "rows"), 12);
    ck_assert_str_eq(jget(row12, "accuracy_note")->valuestring, "at chance");
    ck_assert_ptr_null(jget(row4, "accuracy_note"));
    cJSON_Delete(j);
    // On the page: first, before the warnings, each word with its class and the rule.
    char *html = report_of(VDIR "/words", "report.html");
    const char *vt = strstr(html, "<table class=\"verdict\">"), *warn = strstr(html, "id=\"warnings\"");
    ck_assert_msg(vt && warn && vt < warn, "the verdict table does not come before the warnings");
    ck_assert_ptr_null(strstr(html, "class=\"v v-protects\" title=\"ml-leaks"));
    ck_assert_int_eq(strstr(html, "class=\"v v-unmeasurable\" title=\"ml-leaks") != NULL, 1);
    ck_assert_ptr_nonnull(strstr(html, "<b>The rule.</b> One word per observer"));
    ck_assert_ptr_nonnull(strstr(html, "1 per client (proven)<small>upload ∞ (none)</small>"));
    ck_assert_ptr_nonnull(strstr(html, "∞; 2.21 per client (conditional)<small>upload ∞; 236 (conditional)</small>"));
    // Warnings: grouped by kind, collapsed, with counts.
    ck_assert_ptr_nonnull(strstr(html, "<details class=\"wgroup\"><summary><span class=\"wkind\">"
                                       "attack_fails_without_defense</span>1</summary>"));
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"wkind\">attack_not_applicable</span>1</summary>"));
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"wkind\">noise_after_observation</span>3</summary>"));
    free(html);
}
END_TEST

// Without a setting that has no defense nothing is measurable: a low figure under a
// defense is no evidence of protection.
START_TEST(no_baseline_measures_nothing) {
    write_run(VDIR "/nobase", demo13 + 1, 6, 2, four_attacks, 4);
    cJSON *j = summary_of(VDIR "/nobase");
    const cJSON *v = jget(j, "verdict");
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(cell_word(v, i, "server", "inversion"), "not measurable here");
    cJSON_Delete(j);
}
END_TEST

// `fedpriv report --summary DIR`: the same table as text on stdout, one line per setting,
// the rule after it; the page is not written. Bad input: exit 2 with one line.
START_TEST(summary_prints_the_verdict_as_text) {
    write_run(VDIR "/text", demo13, N_DEMO13, 2, four_attacks, 4);
    static char out[1 << 15], err[1 << 15];
    int rc = cli_run((const char *[]){"report", VDIR "/text", "--summary", NULL}, out, err, sizeof out);
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(out, "verdict: 13 defense settings, 4 attacks in 4 columns\n") == out, "%s", out);
    ck_assert_msg(strstr(out, "setting ") && strstr(out, "server: inversion") && strstr(out, "public: membership"),
                  "%s", out);
    // One line per setting, each naming it and with one word per column.
    const char *line = strchr(strchr(out, '\n') + 1, '\n') + 1;
    for (int i = 0; i < N_DEMO13; i++) {
        const char *end = strchr(line, '\n');
        ck_assert_ptr_nonnull(end);
        ck_assert_msg(strncmp(line, demo13[i].label, strlen(demo13[i].label)) == 0, "line %d: %.*s", i, (int)(end - line),
                      line);
        int words = 0;
        for (const char *w = line; (w = strstr(w, "leaks: ")) && w < end; w++)
            words++;
        for (const char *w = line; (w = strstr(w, "protects: ")) && w < end; w++)
            words++;
        for (const char *w = line; (w = strstr(w, "not measurable here: ")) && w < end; w++)
            words++;
        ck_assert_msg(words == 4, "line %d has %d words: %.*s", i, words, (int)(end - line), line);
        line = end + 1;
    }
    ck_assert_msg(strstr(out, "none  ") && strstr(out, "leaks: 4/4 recovered (dlg)") &&
                      strstr(out, "not measurable here: AUC 0.498, TPR 1.0% (ml-leaks)"),
                  "%s", out);
    ck_assert_msg(strstr(out, "gaussian-dpfedavg noise=server ε=0.25") && strstr(out, "0.435 (-33.0 pts)"), "%s", out);
    ck_assert_msg(strstr(line, "rule: One word per observer"), "%s", line);
    struct stat st;
    ck_assert_msg(stat(VDIR "/text/report.html", &st) != 0, "--summary wrote the page");
    // A label that is a terminal escape is printed escaped, never raw.
    SynSetting hostile[2] = {demo13[0], demo13[1]};
    hostile[1].label = "spm \x1b[2J\x1b]0;owned\x07 ε=1";
    write_run(VDIR "/text-hostile", hostile, 2, 2, four_attacks, 4);
    rc = cli_run((const char *[]){"report", VDIR "/text-hostile", "--summary", NULL}, out, err, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(!strchr(out, '\x1b') && !strchr(out, '\x07'), "a raw control character in: %s", out);
    ck_assert_msg(strstr(out, "spm \\x1b[2J\\x1b]0;owned\\x07 ε=1"), "%s", out);
    rc = cli_run((const char *[]){"report", "--summary", NULL}, out, err, sizeof err);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err);
    rc = cli_run((const char *[]){"report", VDIR "/text", "--summary", "-o", VDIR "/text/page.html", NULL}, out, err,
                 sizeof err);
    ck_assert_int_eq(rc, 2);
    assert_one_clean_line(err);
    ck_assert_msg(stat(VDIR "/text/page.html", &st) != 0, "--summary with -o wrote a page");
    rc = cli_run((const char *[]){"report", VDIR "/no-such-run", "--summary", NULL}, out, err, sizeof err);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "results.json"), "%s", err);
}
END_TEST

// ---- in a browser -------------------------------------------------------------------------

static int sh(const char *cmd, char *out, size_t n) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t k = 0;
    int c;
    while ((c = fgetc(p)) != EOF)
        if (k + 1 < n)
            out[k++] = (char)c;
    out[k] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The demo's shape (13 settings, 6 attacks, 2 seeds) at 1280 x 800: every verdict row
// within the first screen, neither the verdict table nor the matrix wider than its box
// (scrollWidth <= clientWidth, the page no wider than the window).
START_TEST(verdict_fits_1280_by_800) {
    SKIP_UNLESS_BIN();
    write_run(VDIR "/wide", demo13, N_DEMO13, 2, six_attacks, 6);
    static char out[1 << 15], err[1 << 15];
    int rc = cli_run((const char *[]){"report", VDIR "/wide", NULL}, out, err, sizeof out);
    ck_assert_msg(rc == 0, "report exited %d: %s", rc, err);
    remove(VDIR "/verdict-1280.png");
    rc = sh("bash tests/browser/run.sh " VDIR "/wide/report.html " VDIR "/verdict-1280.png --width 1280 --height 800"
            " --expect-count 'table.verdict tbody tr' 13 --expect-in-view 'table.verdict tbody tr'"
            " --expect-fits 'table.verdict' --expect-fits 'table.matrix' --expect-text 'not measurable here'"
            " --expect-text 'The rule.'",
            out, sizeof out);
    ck_assert_msg(rc == 0, "browser check exited %d:\n%s", rc, out);
}
END_TEST

// The control: a table wider than the window, and rows below the first screen, fail the
// same checks (and a selector that matches nothing fails --expect-count).
START_TEST(browser_layout_checks_can_fail) {
    SKIP_UNLESS_BIN();
    ck_assert_int_eq(mkdir(VDIR, 0755) == 0 || errno == EEXIST, 1);
    write_text(VDIR "/too-wide.html", "<!DOCTYPE html><html><body><div style=\"overflow-x:auto\"><table class=\"verdict\">"
                                      "<tbody><tr><td style=\"min-width:1900px\">wide</td></tr><tr><td style=\"height:"
                                      "2000px\">tall</td></tr><tr><td>below</td></tr></tbody></table></div></body></html>");
    char out[16384];
    int rc = sh("bash tests/browser/run.sh " VDIR "/too-wide.html " VDIR "/too-wide.png --width 1280 --height 800"
                " --expect-count 'table.verdict tbody tr' 13 --expect-in-view 'table.verdict tbody tr'"
                " --expect-fits 'table.verdict'",
                out, sizeof out);
    ck_assert_msg(rc == 1, "exited %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "3 element(s) match \"table.verdict tbody tr\", expected 13"), "%s", out);
    ck_assert_msg(strstr(out, "is cut off"), "%s", out);
    ck_assert_msg(strstr(out, "not within the first 1280x800"), "%s", out);
}
END_TEST

Suite *suite_verdict(void) {
    Suite *s = suite_create("verdict");
    TCase *tc = tcase_create("verdict");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, two_seeds_show_values_not_a_t_interval);
    tcase_add_test(tc, proportions_get_wilson_intervals_inside_unit);
    tcase_add_test(tc, verdict_words_follow_the_rule);
    tcase_add_test(tc, no_baseline_measures_nothing);
    tcase_add_test(tc, summary_prints_the_verdict_as_text);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("browser");
    tcase_set_timeout(tb, 600); // may install chromium first
    tcase_add_test(tb, verdict_fits_1280_by_800);
    tcase_add_test(tb, browser_layout_checks_can_fail);
    suite_add_tcase(s, tb);
    return s;
}
