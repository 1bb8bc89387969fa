// Stand-in defenses and attacks for the matrix, report and check tests: small, fast and
// deterministic, with the behaviours the tests need (a leak that shrinks with ε, a
// training run that diverges, an attack that fails, a headline that is NaN, a defense
// whose name is markup, a client-level defense with server-side noise, attacks that
// learn nothing or say they do not apply). Included by the matrix, report, check and
// export tests; the real registries are the fallback, so "none" is the real one.
//
// Data: a generated CSV of three Gaussian blobs (16 features in [0,1], 480 rows), so
// the tests need no downloaded dataset and load in milliseconds.
#ifndef FEDPRIV_TESTS_MATRIX_STANDINS_H
#define FEDPRIV_TESTS_MATRIX_STANDINS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runner/attack_registry.h"
#include "core/jsonv.h"
#include "core/rng.h"
#include "defenses/registry.h"
#include "runner/matrix.h"
#include "eval/png.h"

// ---- defenses ------------------------------------------------------------------------

typedef struct {
    double epsilon, sigma;
    int explode;
    size_t n_params;
} StandinDefense;

static FpStatus standin_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                               FpError *err, int explode, int needs_eps) {
    static const char *const keys[] = {"name", "variant", "epsilon", NULL};
    FP_TRY(jv_keys(params, path, keys, err));
    StandinDefense *s = calloc(1, sizeof *s);
    if (!s)
        return fp_fail(err, FP_ENOMEM, "out of memory");
    FpStatus st = jv_number(params, path, "epsilon", needs_eps ? JV_REQUIRED : JV_OPTIONAL, 1.0, 0, 1, 1e6, 0,
                            &s->epsilon, err);
    if (st != FP_OK) {
        free(s);
        return st;
    }
    s->sigma = 0.02 / s->epsilon;
    s->explode = explode;
    s->n_params = setup->params->n_params;
    *state = s;
    return FP_OK;
}
static FpStatus noise_create(const cJSON *p, const char *path, const DefenseSetup *setup, void **state, FpError *err) {
    return standin_create(p, path, setup, state, err, 0, 1);
}
static FpStatus explode_create(const cJSON *p, const char *path, const DefenseSetup *setup, void **state,
                               FpError *err) {
    return standin_create(p, path, setup, state, err, 1, 0);
}
static FpStatus markup_create(const cJSON *p, const char *path, const DefenseSetup *setup, void **state,
                              FpError *err) {
    return standin_create(p, path, setup, state, err, 0, 0);
}
static void standin_destroy(void *state) { free(state); }
static UploadKind standin_upload_kind(const void *state) { return UPLOAD_WEIGHTS; }
static FpStatus standin_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    StandinDefense *s = state;
    if (s->explode) { // the global model stops being finite: the engine reports divergence
        upload[0] = NAN;
        return FP_OK;
    }
    for (size_t i = 0; i < s->n_params; i++)
        upload[i] += (float)(s->sigma * rng_normal_at(&round->rng, i));
    return FP_OK;
}
static void standin_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const StandinDefense *s = state;
    *rec = (PrivacyRecord){.unit = "upload", .epsilon_round_nominal = s->epsilon,
                           .epsilon_total_nominal = s->epsilon * rounds_done, .nominal_notion = "stand-in, composed",
                           .epsilon_total_sound = 2 * s->epsilon * rounds_done, .delta = 1e-5,
                           .sound_notion = "stand-in sound bound", .sigma = s->sigma,
                           .guarantee = GUARANTEE_PROVEN};
    // Both guarantee states in one sweep: above ε = 1 the stand-in's bound is conditional.
    if (s->epsilon > 1)
        privacy_assume(rec, "stand-in: above epsilon 1 the bound is assumed");
}
static FpStatus standin_describe(const void *state, cJSON *out) {
    cJSON_AddNumberToObject(out, "epsilon", ((const StandinDefense *)state)->epsilon);
    return FP_OK;
}
// "clientdp": like "noise", but claims client-level DP in another notion and adds its
// noise at the server (as gaussian-dpfedavg does by default): the report warns about both.
static FpStatus clientdp_create(const cJSON *p, const char *path, const DefenseSetup *setup, void **state,
                                FpError *err) {
    return standin_create(p, path, setup, state, err, 0, 1);
}
static void clientdp_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const StandinDefense *s = state;
    *rec = (PrivacyRecord){.unit = "client", .epsilon_round_nominal = s->epsilon / 2,
                           .epsilon_total_nominal = s->epsilon, .nominal_notion = "stand-in client-level (eps, delta)",
                           .epsilon_total_sound = s->epsilon, .delta = 1e-5, .sound_notion = "stand-in RDP",
                           .sigma = s->sigma, .guarantee = GUARANTEE_PROVEN};
    // The upload observer's own record, as gaussian-dpfedavg's with server noise: none.
    rec->epsilon_total_upload = INFINITY;
    rec->upload_notion = "none: the server sees the update";
    rec->upload_own_label = 1;
    privacy_assume_upload(rec, "stand-in: the server sees each clipped update");
    // The field's figure beside it, as gaussian-dpfedavg's (fl/defense.h).
    rec->standard_notion = "stand-in standard accountant";
    rec->epsilon_standard_rdp = 0.9 * s->epsilon;
    rec->epsilon_standard_pld = 0.8 * s->epsilon;
}
static FpStatus clientdp_describe(const void *state, cJSON *out) {
    cJSON_AddNumberToObject(out, "epsilon", ((const StandinDefense *)state)->epsilon);
    cJSON_AddStringToObject(out, "noise", "server");
    return FP_OK;
}

static const DefenseOps standin_noise = {.name = "noise", .summary = "stand-in: Gaussian noise 0.02/eps",
                                         .variants = "corrected,paper", .create = noise_create,
                                         .destroy = standin_destroy, .upload_kind = standin_upload_kind,
                                         .client_perturb = standin_perturb, .privacy = standin_privacy,
                                         .describe = standin_describe};
static const DefenseOps standin_explode = {.name = "explode", .summary = "stand-in: diverges",
                                           .create = explode_create, .destroy = standin_destroy,
                                           .upload_kind = standin_upload_kind, .client_perturb = standin_perturb,
                                           .privacy = standin_privacy};
#define STANDIN_MARKUP_NAME "<script>alert(1)</script>"
static const DefenseOps standin_markup = {.name = STANDIN_MARKUP_NAME, .summary = "stand-in: a name that is markup",
                                          .create = markup_create, .destroy = standin_destroy,
                                          .upload_kind = standin_upload_kind, .client_perturb = standin_perturb,
                                          .privacy = standin_privacy};

static const DefenseOps standin_clientdp = {.name = "clientdp", .summary = "stand-in: client-level, server noise",
                                            .create = clientdp_create, .destroy = standin_destroy,
                                            .upload_kind = standin_upload_kind, .client_perturb = standin_perturb,
                                            .privacy = clientdp_privacy, .describe = clientdp_describe};

static const DefenseOps *standin_defense_find(const char *name) {
    const DefenseOps *all[] = {&standin_noise, &standin_explode, &standin_markup, &standin_clientdp};
    for (int i = 0; i < 4; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return defense_find(name);
}

// ---- attacks ---------------------------------------------------------------------------

static FpStatus probe_validate(const AttackEnv *env, FpError *err) {
    static const char *const keys[] = {"name", "sleep_ms", NULL};
    FP_TRY(jv_keys(env->attack_json, env->path, keys, err));
    long long ms;
    return jv_int(env->attack_json, env->path, "sleep_ms", JV_OPTIONAL, 0, 0, 10000, &ms, err);
}

// A leak that falls with ε (1 without a defense), images that show it, a ROC curve.
static FpStatus probe_run(const AttackEnv *env, cJSON *res, FpError *err) {
    long long ms = 0;
    jv_int(env->attack_json, env->path, "sleep_ms", JV_OPTIONAL, 0, 0, 10000, &ms, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(env->ex->defense_json, "epsilon");
    double eps = cJSON_IsNumber(e) ? e->valuedouble : INFINITY;
    double leak = isfinite(eps) ? 1 / (1 + eps) : 1;
    const Dataset *d = env->ex->train;
    int n = (int)dataset_sample_size(d), side = (int)sqrt((double)n);
    float *orig = malloc(sizeof(float) * (size_t)n), *rec = malloc(sizeof(float) * (size_t)n);
    RngStream rs = rng_stream(env->ex->seed, RNG_ATTACK, 0, 0);
    for (int i = 0; i < n; i++) {
        orig[i] = d->x[i];
        rec[i] = (float)(leak * orig[i] + (1 - leak) * rng_uniform_at(&rs, (uint64_t)i));
    }
    char path[4300];
    FpStatus st = FP_OK;
    snprintf(path, sizeof path, "%s/original.png", env->out_dir);
    if (st == FP_OK)
        st = png_write_gray(path, orig, side, side, err);
    snprintf(path, sizeof path, "%s/step5.png", env->out_dir);
    if (st == FP_OK)
        st = png_write_gray(path, rec, side, side, err);
    snprintf(path, sizeof path, "%s/final.png", env->out_dir);
    if (st == FP_OK)
        st = png_write_gray(path, rec, side, side, err);
    free(orig);
    free(rec);
    if (st != FP_OK)
        return st;
    cJSON *imgs = cJSON_AddArrayToObject(res, "images");
    cJSON *im = cJSON_CreateObject();
    cJSON_AddStringToObject(im, "original_png", "original.png");
    cJSON_AddStringToObject(im, "reconstruction_png", "final.png");
    cJSON_AddNumberToObject(im, "ssim", leak);
    cJSON *snaps = cJSON_AddArrayToObject(im, "snapshots");
    cJSON *sn = cJSON_CreateObject();
    cJSON_AddNumberToObject(sn, "step", 5);
    cJSON_AddNumberToObject(sn, "ssim", leak);
    cJSON_AddStringToObject(sn, "png", "step5.png");
    cJSON_AddItemToArray(snaps, sn);
    cJSON_AddItemToArray(imgs, im);
    cJSON_AddNumberToObject(res, "ssim_mean", leak);
    cJSON_AddNumberToObject(res, "auc", 0.5 + leak / 2);
    // It inverts a client's upload as the server receives it; an exact reconstruction has
    // infinite PSNR (written by the one non-finite rule), and a nested metric.
    cJSON_AddStringToObject(res, "threat_model", "gradient");
    cJSON_AddNumberToObject(res, "psnr", leak == 1 ? INFINITY : -10 * log10(1 - leak));
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(res, "tpr_at_fpr"), "0.01", 0.01 + 0.99 * leak * 0.1);
    cJSON *roc = cJSON_AddObjectToObject(res, "roc");
    double fpr[] = {0, 0.001, 0.01, 0.1, 0.5, 1};
    cJSON *fa = cJSON_AddArrayToObject(roc, "fpr"), *ta = cJSON_AddArrayToObject(roc, "tpr");
    for (int i = 0; i < 6; i++) {
        cJSON_AddItemToArray(fa, cJSON_CreateNumber(fpr[i]));
        cJSON_AddItemToArray(ta, cJSON_CreateNumber(fpr[i] + (1 - fpr[i]) * leak * sqrt(fpr[i])));
    }
    if (ms > 0)
        usleep((useconds_t)ms * 1000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cJSON_AddNumberToObject(res, "probe_seconds", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return FP_OK;
}

// "blind": learns nothing (AUC 0.5 whatever the defense): the report says it is not
// applicable. "na": says itself that it does not apply.
static FpStatus blind_run(const AttackEnv *env, cJSON *res, FpError *err) {
    cJSON_AddNumberToObject(res, "auc", 0.5);
    cJSON_AddNumberToObject(res, "best_advantage", -INFINITY);
    return FP_OK;
}
static FpStatus na_run(const AttackEnv *env, cJSON *res, FpError *err) {
    cJSON_AddNumberToObject(res, "auc", 0.5);
    cJSON_AddBoolToObject(res, "applicable", 0);
    return FP_OK;
}

static FpStatus broken_run(const AttackEnv *env, cJSON *res, FpError *err) {
    return fp_fail(err, FP_EBACKEND, "stand-in attack failure");
}
static FpStatus nan_run(const AttackEnv *env, cJSON *res, FpError *err) {
    cJSON_AddNumberToObject(res, "ssim_mean", NAN);
    return FP_OK;
}

static const AttackOps standin_probe = {.name = "probe", .summary = "stand-in leak", .headline = "ssim_mean",
                                        .headline_higher_leaks = 1, .validate = probe_validate, .run = probe_run};
static const AttackOps standin_broken = {.name = "broken", .summary = "stand-in failure", .headline = "ssim_mean",
                                         .headline_higher_leaks = 1, .validate = probe_validate, .run = broken_run};
static const AttackOps standin_nan = {.name = "nan", .summary = "stand-in NaN", .headline = "ssim_mean",
                                      .headline_higher_leaks = 1, .validate = probe_validate, .run = nan_run};

static const AttackOps standin_blind = {.name = "blind", .summary = "stand-in: learns nothing", .headline = "auc",
                                        .headline_higher_leaks = 1, .validate = probe_validate, .run = blind_run};
static const AttackOps standin_na = {.name = "na", .summary = "stand-in: not applicable", .headline = "auc",
                                     .headline_higher_leaks = 1, .validate = probe_validate, .run = na_run};

static const AttackOps *standin_attack_find(const char *name) {
    const AttackOps *all[] = {&standin_probe, &standin_broken, &standin_nan, &standin_blind, &standin_na};
    for (int i = 0; i < 5; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return attack_find(name);
}

static const MatrixRegistry standin_registry = {.defense_find = standin_defense_find,
                                                .attack_find = standin_attack_find};

// ---- data and files --------------------------------------------------------------------

// Writes the blob CSV (deterministic) to path; returns 0 on failure.
static int standin_write_csv(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        return 0;
    fprintf(f, "label");
    for (int j = 0; j < 16; j++)
        fprintf(f, ",f%d", j);
    fprintf(f, "\n");
    RngStream rs = rng_stream(7, RNG_TEST, 0, 0);
    for (int i = 0; i < 480; i++) {
        int y = i % 3;
        fprintf(f, "%d", y);
        for (int j = 0; j < 16; j++) {
            double v = 0.25 + 0.25 * y * ((j + y) % 3 == 0) + 0.1 * rng_next_normal(&rs);
            fprintf(f, ",%.4f", v < 0 ? 0 : v > 1 ? 1 : v);
        }
        fprintf(f, "\n");
    }
    return fclose(f) == 0;
}

// Writes text to path (the test fails when it cannot).
static inline void standin_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

// mkdir -p for a relative test folder; returns 0 on failure.
static int standin_mkdirs(const char *dir) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0777);
            *p = '/';
        }
    return mkdir(buf, 0777) == 0 || access(buf, F_OK) == 0;
}

// Removes a test folder (tests own everything under build/test-*).
static void standin_rm(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

// A matrix over the blob CSV at csv, with the given "defenses" and "attacks" JSON text.
static inline cJSON *standin_matrix(const char *csv, const char *defenses, const char *attacks) {
    char text[8192];
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"description\": \"stand-in matrix\", \"threads\": 2,"
             " \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
             " \"federation\": {\"clients\": 4, \"rounds\": 3, \"batch_size\": 16, \"lr\": 0.1},"
             " \"defenses\": %s, \"attacks\": %s}",
             csv, defenses, attacks);
    return cJSON_Parse(text);
}

// The same with "seeds" instead of "seed" (seeds: JSON list text).
static inline cJSON *standin_matrix_seeds(const char *csv, const char *seeds, const char *defenses, const char *attacks) {
    char text[8192];
    snprintf(text, sizeof text,
             "{\"seeds\": %s, \"description\": \"stand-in matrix\", \"threads\": 2,"
             " \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
             " \"federation\": {\"clients\": 4, \"rounds\": 3, \"batch_size\": 16, \"lr\": 0.1},"
             " \"defenses\": %s, \"attacks\": %s}",
             seeds, csv, defenses, attacks);
    return cJSON_Parse(text);
}

// Loads and runs a matrix; returns the status (summary and error filled).
static inline FpStatus standin_run(const cJSON *root, const char *dir, int jobs, MatrixSummary *sum, FpError *err) {
    Matrix *m = NULL;
    MatrixOptions mo = {.registry = &standin_registry, .file = "standin.json"};
    FP_TRY(matrix_load(root, &mo, &m, err));
    MatrixRunOptions ro = {.jobs = jobs};
    FpStatus st = matrix_run(m, dir, &ro, sum, err);
    matrix_free(m);
    return st;
}

#endif
