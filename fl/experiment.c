// Loading and describing experiments (see fl/experiment.h).
#include "fl/experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "core/rng_secure.h"
#include "core/suggest.h"

// A DefenseFindFn answers only "is there one of this name?": its near names are found by
// probing the names one edit away (core/suggest.h).
typedef struct {
    DefenseFindFn find;
} DefenseProbe;

static int defense_exists(const char *name, const void *ctx) {
    const DefenseProbe *p = ctx;
    return p->find ? p->find(name) != NULL : strcmp(name, defense_none.name) == 0;
}

static FpStatus take_first(Dataset **d, long long n, FpError *err) {
    if (n <= 0 || n >= (*d)->n)
        return FP_OK;
    uint32_t *idx = fp_malloc(sizeof(uint32_t) * (size_t)n, err);
    if (!idx)
        return FP_ENOMEM;
    for (long long i = 0; i < n; i++)
        idx[i] = (uint32_t)i;
    Dataset *sub = dataset_subset(*d, idx, (int)n, err);
    free(idx);
    if (!sub)
        return err ? err->code : FP_ENOMEM;
    dataset_free(*d);
    *d = sub;
    return FP_OK;
}

// The model is built for the training set's samples: a test set of another shape, with
// labels beyond its classes, or of another kind (labels vs targets) would only fail
// after training ("evaluation failed"), so it is refused at load, naming both files.
static FpStatus check_same_shape(Dataset *train, const Dataset *test, const char *path, FpError *err) {
    const char *tf = train->source[0] ? train->source : train->name, *sf = test->source[0] ? test->source : test->name;
    if (train->c != test->c || train->h != test->h || train->w != test->w)
        return fp_fail(err, FP_EFORMAT,
                       "%s: the test set %s has samples of %dx%dx%d (channels x height x width), the training set "
                       "%s %dx%dx%d: they must match",
                       path, sf, test->c, test->h, test->w, tf, train->c, train->h, train->w);
    if ((train->n_classes > 0) != (test->n_classes > 0) || train->target_dim != test->target_dim)
        return fp_fail(err, FP_EFORMAT,
                       "%s: the test set %s has %d classes and %d targets per sample, the training set %s %d and "
                       "%d: they must be the same kind",
                       path, sf, test->n_classes, test->target_dim, tf, train->n_classes, train->target_dim);
    if (test->n_classes > train->n_classes)
        return fp_fail(err, FP_EFORMAT,
                       "%s: the test set %s has labels up to %d, beyond the %d classes of the training set %s", path, sf,
                       test->n_classes - 1, train->n_classes, tf);
    return FP_OK;
}

FpStatus experiment_load_data(const cJSON *dj, const char *path, Dataset **train, Dataset **test, char *name_out,
                              size_t name_size, FpError *err) {
    static const char *const keys[] = {"name", "path", "train_samples", "test_samples", "split", "partition_file",
                                       NULL};
    FP_TRY(jv_keys(dj, path, keys, err));
    const char *name, *dpath, *pfile;
    long long ntrain, ntest;
    FP_TRY(jv_string(dj, path, "name", JV_REQUIRED, NULL, &name, err));
    FP_TRY(jv_string(dj, path, "path", JV_OPTIONAL, NULL, &dpath, err));
    FP_TRY(jv_string(dj, path, "partition_file", JV_OPTIONAL, NULL, &pfile, err));
    FP_TRY(jv_int(dj, path, "train_samples", JV_OPTIONAL, 0, 0, 1 << 30, &ntrain, err));
    FP_TRY(jv_int(dj, path, "test_samples", JV_OPTIONAL, 0, 0, 1 << 30, &ntest, err));
    const char *const *names = dataset_names();
    int known = 0;
    for (int i = 0; names[i]; i++)
        known |= strcmp(names[i], name) == 0;
    if (!known) {
        char p[256], hint[FP_SUGGEST_MAX_LEN + 32];
        FpSuggest s;
        fp_suggest_begin(&s, name);
        fp_suggest_add_list(&s, names);
        return fp_fail(err, FP_EPARAM, "%s: unknown dataset \"%.64s\" (%sfedpriv list shows the datasets)",
                       jv_path(p, sizeof p, path, "name"), name, fp_did_you_mean(&s, "", " ", hint, sizeof hint));
    }
    if (name_out)
        snprintf(name_out, name_size, "%s", name);
    *train = *test = NULL;
    FpStatus st = dataset_open(name, "train", dpath, train, err);
    if (st == FP_OK)
        st = dataset_open(name, "test", dpath, test, err);
    if (st == FP_OK)
        st = check_same_shape(*train, *test, path, err);
    // The partition file maps the training set as loaded; train_samples then keeps the
    // first samples with their clients.
    if (st == FP_OK && pfile)
        st = dataset_read_partition_file(*train, pfile, err);
    if (st == FP_OK)
        st = take_first(train, ntrain, err);
    if (st == FP_OK)
        st = take_first(test, ntest, err);
    if (st != FP_OK) {
        dataset_free(*train);
        dataset_free(*test);
        *train = *test = NULL;
    }
    return st;
}

// The keys of a config that name files (each a JSON path: object, then key).
static const struct {
    const char *object, *key;
} path_keys[] = {
    {"dataset", "path"},
    {"dataset", "partition_file"},
    {"model", "onnx"},
};

FpStatus experiment_resolve_paths(cJSON *root, const char *config_file, FpError *err) {
    if (!config_file || !cJSON_IsObject(root))
        return FP_OK;
    // The config's folder, absolute and without "." or ".." (realpath of the folder, not
    // of the file: a config linked into place reads data beside the link), so that
    // `m.json` and `./m.json` name the same files, and a resumed matrix the same cells.
    char dir[4096];
    const char *slash = strrchr(config_file, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if ((size_t)(slash - config_file) >= sizeof dir)
        return fp_fail(err, FP_EPARAM, "%.200s...: path too long", config_file);
    else
        snprintf(dir, sizeof dir, "%.*s", slash == config_file ? 1 : (int)(slash - config_file), config_file);
    char *real = realpath(dir, NULL);
    const char *base = real ? real : dir;
    const char *sep = base[strlen(base) - 1] == '/' ? "" : "/";
    FpStatus st = FP_OK;
    for (size_t i = 0; i < sizeof path_keys / sizeof path_keys[0] && st == FP_OK; i++) {
        cJSON *o = cJSON_GetObjectItemCaseSensitive(root, path_keys[i].object);
        cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, path_keys[i].key) : NULL;
        if (!cJSON_IsString(v) || !v->valuestring[0] || v->valuestring[0] == '/')
            continue; // absent, empty (the default), absolute, or not a string (experiment_load says so)
        size_t lb = strlen(base), ls = strlen(sep), lv = strlen(v->valuestring), n = lb + ls + lv + 1;
        char *joined = n <= 8192 ? malloc(n) : NULL;
        if (!joined) {
            st = fp_fail(err, n > 8192 ? FP_EPARAM : FP_ENOMEM, "%s.%s: %s", path_keys[i].object, path_keys[i].key,
                         n > 8192 ? "path too long" : "out of memory");
            break;
        }
        memcpy(joined, base, lb);
        memcpy(joined + lb, sep, ls);
        memcpy(joined + lb + ls, v->valuestring, lv + 1);
        cJSON *nv = cJSON_CreateString(joined);
        free(joined);
        if (!nv || !cJSON_ReplaceItemInObjectCaseSensitive(o, path_keys[i].key, nv)) {
            cJSON_Delete(nv);
            st = fp_fail(err, FP_ENOMEM, "out of memory");
        }
    }
    free(real);
    return st;
}

int experiment_output_replaces_input(const cJSON *root, const char *config_file, const char *out, char *what,
                                     size_t n) {
    if (config_file && fp_output_replaces(out, config_file)) {
        snprintf(what, n, "the config file %s", config_file);
        return 1;
    }
    for (size_t i = 0; cJSON_IsObject(root) && i < sizeof path_keys / sizeof path_keys[0]; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, path_keys[i].object);
        const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, path_keys[i].key) : NULL;
        if (!cJSON_IsString(v) || !v->valuestring[0])
            continue;
        // "{split}" names one file (or folder) per split, as the loaders expand it.
        static const char *const splits[] = {"train", "test"};
        const char *path = v->valuestring, *mark = strstr(path, "{split}");
        for (int k = 0; k < (mark ? 2 : 1); k++) {
            char file[4096];
            if (mark)
                snprintf(file, sizeof file, "%.*s%s%s", (int)(mark - path), path, splits[k], mark + 7);
            else
                snprintf(file, sizeof file, "%s", path);
            if (fp_output_replaces(out, file)) {
                snprintf(what, n, "%s.%s: %s", path_keys[i].object, path_keys[i].key, file);
                return 1;
            }
        }
    }
    return 0;
}

FpStatus experiment_load(const cJSON *root, const char *const *extra_keys, const char *device_override,
                         int threads_override, DefenseFindFn find_defense, Experiment *ex, FpError *err) {
    return experiment_load_at(root, NULL, extra_keys, device_override, threads_override, find_defense, ex, err);
}

FpStatus experiment_load_at(const cJSON *root, const char *config_file, const char *const *extra_keys,
                            const char *device_override, int threads_override, DefenseFindFn find_defense,
                            Experiment *ex, FpError *err) {
    memset(ex, 0, sizeof *ex);
    char config_dir[4096] = "";
    const char *slash = config_file ? strrchr(config_file, '/') : NULL;
    if (slash)
        snprintf(config_dir, sizeof config_dir, "%.*s", (int)(slash - config_file), config_file);
    if (slash == config_file)
        snprintf(config_dir, sizeof config_dir, "/");
    const char *base[] = {"seed", "dataset", "model", "federation", "defense", "device", "threads", "description",
                          "rng"};
    const char *keys[40];
    int nk = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        keys[nk++] = base[i];
    for (int i = 0; extra_keys && extra_keys[i] && nk < 39; i++)
        keys[nk++] = extra_keys[i];
    keys[nk] = NULL;
    FP_TRY(jv_keys(root, "", keys, err));
    long long seed, threads;
    // Seeds are integers below 2^53: every one is exact in a double (results are JSON)
    // and bit 63 stays free for RNG_SEED_SECURE.
    FP_TRY(jv_int(root, "", "seed", JV_OPTIONAL, 1, 0, EXPERIMENT_SEED_MAX, &seed, err));
    ex->seed = (uint64_t)seed;
    // "rng": "secure" (core/rng_secure.h): the seed's flag bit makes every privacy-relevant
    // stream ChaCha20 under a fresh getrandom key; "philox" (default) stays reproducible.
    static const char *const rngs[] = {"philox", "secure", NULL};
    int rng_kind;
    FP_TRY(jv_choice(root, "", "rng", rngs, 0, &rng_kind, err));
    if (rng_kind == 1) {
        FP_TRY(rng_secure_check(err));
        ex->seed |= RNG_SEED_SECURE;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long dflt = ncpu < 1 ? 1 : ncpu > FED_MAX_THREADS ? FED_MAX_THREADS : ncpu;
    FP_TRY(jv_int(root, "", "threads", JV_OPTIONAL, dflt, 1, FED_MAX_THREADS, &threads, err));
    if (threads_override > FED_MAX_THREADS)
        return fp_fail(err, FP_EPARAM, "--threads: must be in [1, %d], got %d", FED_MAX_THREADS, threads_override);
    ex->threads = threads_override > 0 ? threads_override : (int)threads;
    static const char *const devices[] = {"cpu", "cuda", NULL};
    int dev;
    FP_TRY(jv_choice(root, "", "device", devices, 0, &dev, err));
    const char *device = device_override ? device_override : devices[dev];
    ex->backend = backend_by_name(device, err);
    if (!ex->backend)
        return err ? err->code : FP_EBACKEND;
    if (ex->backend->device != DEVICE_CPU)
        ex->threads = 1; // a GPU runs clients and attack batches one at a time: record what runs
    const cJSON *dj, *mj, *fj, *defj;
    FP_TRY(jv_object(root, "", "dataset", JV_REQUIRED, &dj, err));
    FP_TRY(jv_object(root, "", "model", JV_REQUIRED, &mj, err));
    FP_TRY(jv_object(root, "", "federation", JV_OPTIONAL, &fj, err));
    FP_TRY(jv_object(root, "", "defense", JV_OPTIONAL, &defj, err));
    ex->dataset_json = dj;
    ex->model_json = mj;
    ex->defense_json = defj;
    cJSON *empty = cJSON_CreateObject();
    FpStatus st = fed_config_parse(fj ? fj : empty, "federation", &ex->fed, err);
    cJSON_Delete(empty);
    FP_TRY(st);
    if (defj) {
        const char *dname;
        FP_TRY(jv_string(defj, "defense", "name", JV_REQUIRED, NULL, &dname, err));
        ex->defense = find_defense ? find_defense(dname) : strcmp(dname, defense_none.name) == 0 ? &defense_none : NULL;
        if (!ex->defense) {
            char near[FP_SUGGEST_MAX_LEN + 2], hint[FP_SUGGEST_MAX_LEN + 32];
            DefenseProbe probe = {find_defense};
            FpSuggest s;
            fp_suggest_begin(&s, dname);
            fp_suggest_probe(&s, defense_exists, &probe, near, sizeof near);
            return fp_fail(err, FP_EPARAM,
                           "defense.name: unknown defense \"%.64s\" (%sfedpriv list shows the defenses)", dname,
                           fp_did_you_mean(&s, "", " ", hint, sizeof hint));
        }
    } else
        ex->defense = &defense_none;
    // Validate the model config before loading data, so config errors come fast.
    FP_TRY(experiment_load_data(dj, "dataset", &ex->train, &ex->test, ex->dataset_name, sizeof ex->dataset_name, err));
    ex->shape = (DataShape){.c = ex->train->c, .h = ex->train->h, .w = ex->train->w,
                            .n_classes = ex->train->n_classes, .target_dim = ex->train->target_dim};
    ex->model = model_create_at(mj, "model", &ex->shape, ex->backend, config_dir, err);
    if (!ex->model) {
        experiment_free(ex);
        return err ? err->code : FP_EPARAM;
    }
    st = model_init(ex->model, ex->seed, err);
    if (st != FP_OK) {
        experiment_free(ex);
        return st;
    }
    if (!(ex->memo = defense_memo_create())) {
        experiment_free(ex);
        return fp_fail(err, FP_ENOMEM, "out of memory loading the experiment");
    }
    return FP_OK;
}

void experiment_free(Experiment *ex) {
    defense_memo_free(ex->memo);
    model_free(ex->model);
    dataset_free(ex->train);
    dataset_free(ex->test);
    memset(ex, 0, sizeof *ex);
}

Federation *experiment_federation(Experiment *ex, const FedHooks *hooks, int quiet, FpError *err) {
    FedSetup s = {.cfg = ex->fed, .seed = ex->seed, .threads = ex->threads, .backend = ex->backend,
                  .global = ex->model, .train = ex->train, .test = ex->test, .defense = ex->defense,
                  .defense_json = ex->defense_json, .quiet = quiet, .comm = ex->comm, .memo = ex->memo};
    if (hooks)
        s.hooks = *hooks;
    return fed_create(&s, err);
}

// sound.upload or sound.coordinate: a figure for another observer or a narrower
// neighbour relation, shown only when the defense states its notion.
// `assumptions` (the record's own label, or NULL when it shares the record's): its
// "guarantee" and "assumptions" beside it, in the shape of the record's.
static void add_narrower_figure(cJSON *snd, const char *key, double eps, double eps_conditional, const char *notion,
                                Guarantee g, const char *const *assumptions) {
    if (!notion)
        return;
    cJSON *o = cJSON_AddObjectToObject(snd, key);
    jnum_add(o, "epsilon_total", eps);
    if (g == GUARANTEE_CONDITIONAL)
        jnum_add(o, "epsilon_total_conditional", eps_conditional);
    cJSON_AddStringToObject(o, "notion", notion);
    if (assumptions) {
        cJSON_AddStringToObject(o, "guarantee", guarantee_name(g));
        cJSON *as = cJSON_AddArrayToObject(o, "assumptions");
        for (int i = 0; i < PRIVACY_MAX_ASSUMPTIONS && assumptions[i]; i++)
            cJSON_AddItemToArray(as, cJSON_CreateString(assumptions[i]));
    }
}

cJSON *privacy_record_json(const PrivacyRecord *p) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "unit", p->unit ? p->unit : "none");
    cJSON *nom = cJSON_AddObjectToObject(j, "nominal");
    jnum_add(nom, "epsilon_round", p->epsilon_round_nominal);
    jnum_add(nom, "epsilon_total", p->epsilon_total_nominal);
    cJSON_AddStringToObject(nom, "notion", p->nominal_notion ? p->nominal_notion : "");
    cJSON *snd = cJSON_AddObjectToObject(j, "sound");
    jnum_add(snd, "epsilon_total", p->epsilon_total_sound);
    cJSON_AddNumberToObject(snd, "delta", p->delta);
    cJSON_AddStringToObject(snd, "notion", p->sound_notion ? p->sound_notion : "");
    if (p->guarantee == GUARANTEE_CONDITIONAL)
        jnum_add(snd, "epsilon_total_conditional", p->epsilon_total_conditional);
    // The upload observer's record always states its label (its own, or the record's it shares).
    add_narrower_figure(snd, "upload", p->epsilon_total_upload, p->epsilon_total_upload_conditional,
                        p->upload_notion, p->upload_guarantee, p->upload_assumptions);
    add_narrower_figure(snd, "coordinate", p->epsilon_total_coordinate, p->epsilon_total_coordinate_conditional,
                        p->coordinate_notion, p->guarantee, NULL);
    if (p->unit && strcmp(p->unit, "record") == 0)
        cJSON_AddBoolToObject(snd, "covers_client", p->record_bound_covers_client);
    cJSON_AddStringToObject(j, "guarantee", guarantee_name(p->guarantee));
    cJSON *as = cJSON_AddArrayToObject(j, "assumptions");
    for (int i = 0; i < PRIVACY_MAX_ASSUMPTIONS && p->assumptions[i]; i++)
        cJSON_AddItemToArray(as, cJSON_CreateString(p->assumptions[i]));
    if (p->sigma >= 0)
        cJSON_AddNumberToObject(j, "sigma", p->sigma);
    if (p->standard_notion) {   // the field's figure for the same multiplier, rate and steps (defense.h)
        cJSON *std = cJSON_AddObjectToObject(j, "standard");
        jnum_add(std, "rdp", p->epsilon_standard_rdp);
        jnum_add(std, "pld", p->epsilon_standard_pld);
        cJSON_AddStringToObject(std, "notion", p->standard_notion);
    }
    return j;
}

// A figure that may be "not defined" (< 0): null then, else by the one number rule.
static void add_defined(cJSON *o, const char *key, double v) { jnum_add(o, key, v >= 0 ? v : NAN); }

static void add_number(cJSON *o, const char *key, double v) { jnum_add(o, key, v); }

cJSON *upload_params_json(const UploadParams *p) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "noise", p->noise ? p->noise : "none");
    jnum_add(j, "noise_scale", p->noise_scale);
    jnum_add(j, "server_noise_scale", p->server_noise_scale);
    cJSON_AddStringToObject(j, "clip_norm", p->clip_norm ? p->clip_norm : "none");
    add_defined(j, "clip", p->clip);
    add_defined(j, "epsilon", p->epsilon);
    return j;
}

// One key, or key_min and key_max when the participants differ.
static void add_range(cJSON *o, const char *key, double lo, double hi, int defined_only) {
    char k[64];
    void (*add)(cJSON *, const char *, double) = defined_only ? add_defined : add_number;
    if (lo == hi || (isnan(lo) && isnan(hi))) {
        add(o, key, lo);
        return;
    }
    snprintf(k, sizeof k, "%s_min", key);
    add(o, k, lo);
    snprintf(k, sizeof k, "%s_max", key);
    add(o, k, hi);
}

cJSON *upload_summary_json(const UploadSummary *u) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "count", u->uploads);
    cJSON_AddStringToObject(j, "noise", u->noise ? u->noise : "none");
    add_range(j, "noise_scale", u->noise_scale_min, u->noise_scale_max, 0);
    jnum_add(j, "server_noise_scale", u->server_noise_scale);
    cJSON_AddStringToObject(j, "clip_norm", u->clip_norm ? u->clip_norm : "none");
    add_range(j, "clip", u->clip_min, u->clip_max, 1);
    add_range(j, "epsilon", u->epsilon_min, u->epsilon_max, 1);
    return j;
}

cJSON *fed_loss_explosion_json(const Federation *f, int n_classes) {
    if (n_classes < 2)
        return NULL;
    double threshold = FED_LOSS_EXPLODED_FACTOR * log((double)n_classes), peak = -INFINITY, first_loss = NAN;
    int first = 0;
    for (int r = 0; r < fed_rounds_done(f); r++) {
        double loss = fed_round_result(f, r)->test_loss;
        if (!isfinite(loss))
            continue; // a non-finite loss is a divergence, reported as such
        if (loss > threshold && first == 0) {
            first = r + 1;
            first_loss = loss;
        }
        if (loss > peak)
            peak = loss;
    }
    if (first == 0)
        return NULL;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", "loss_exploded");
    cJSON_AddNumberToObject(j, "round", first);
    jnum_add(j, "test_loss", first_loss);
    jnum_add(j, "peak_test_loss", peak);
    jnum_add(j, "threshold", threshold);
    char msg[320];
    snprintf(msg, sizeof msg,
             "the test loss exploded: %.4g in round %d, peak %.4g, above %.0f x ln %d = %.3g (the loss of a uniform "
             "guess); the weights stayed finite, but this accuracy is not a trained model's",
             first_loss, first, peak, FED_LOSS_EXPLODED_FACTOR, n_classes, threshold);
    cJSON_AddStringToObject(j, "message", msg);
    return j;
}

cJSON *fed_rounds_json(const Federation *f, int with_timings) {
    cJSON *arr = cJSON_CreateArray();
    for (int r = 0; r < fed_rounds_done(f); r++) {
        const FedRoundResult *res = fed_round_result(f, r);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "round", res->round);
        cJSON_AddNumberToObject(o, "participants", res->participants);
        cJSON *ids = cJSON_AddArrayToObject(o, "participant_ids");
        for (int s = 0; s < res->participants; s++)
            cJSON_AddItemToArray(ids, cJSON_CreateNumber(res->clients[s]));
        jnum_add(o, "test_accuracy", res->test_accuracy);
        jnum_add(o, "test_loss", res->test_loss);
        if (!isnan(res->test_mae))
            jnum_add(o, "test_mae", res->test_mae);
        if (!isnan(res->test_mape))
            jnum_add(o, "test_mape", res->test_mape);
        cJSON_AddItemToObject(o, "privacy", privacy_record_json(&res->privacy));
        if (res->upload.uploads > 0)
            cJSON_AddItemToObject(o, "uploads", upload_summary_json(&res->upload));
        if (with_timings) {
            cJSON_AddNumberToObject(o, "seconds", res->seconds);
            cJSON_AddNumberToObject(o, "train_seconds", res->train_seconds);
        }
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

FpStatus experiment_describe(const Experiment *ex, const Federation *f, cJSON *result, FpError *err) {
    cJSON_AddStringToObject(result, "fedpriv_version", FEDPRIV_VERSION);
    cJSON_AddNumberToObject(result, "seed", (double)(ex->seed & ~RNG_SEED_SECURE));
    cJSON_AddStringToObject(result, "backend", ex->backend->name);
    if (ex->backend->device == DEVICE_CPU)   // bit-identical reruns need the same kernels too
        cJSON_AddStringToObject(result, "blas_kernels", backend_cpu_blas_kernels());
    cJSON_AddNumberToObject(result, "threads", ex->threads);
    cJSON_AddStringToObject(result, "rng", (ex->seed & RNG_SEED_SECURE) ? "secure" : "philox");
    cJSON *cfg = cJSON_AddObjectToObject(result, "config");
    cJSON *d = cJSON_AddObjectToObject(cfg, "dataset");
    cJSON_AddStringToObject(d, "name", ex->dataset_name);
    for (size_t i = 0; i < sizeof path_keys / sizeof path_keys[0]; i++) {
        const cJSON *v = strcmp(path_keys[i].object, "dataset") == 0
                             ? cJSON_GetObjectItemCaseSensitive(ex->dataset_json, path_keys[i].key)
                             : NULL;
        if (cJSON_IsString(v) && v->valuestring[0]) // as resolved (experiment_resolve_paths)
            cJSON_AddStringToObject(d, path_keys[i].key, v->valuestring);
    }
    cJSON_AddNumberToObject(d, "train_samples", ex->train->n);
    cJSON_AddNumberToObject(d, "test_samples", ex->test->n);
    cJSON_AddItemToObject(cfg, "model", cJSON_Duplicate(ex->model_json, 1));
    if (ex->model) // a matrix cell whose model could not be made (out of memory) describes the rest
        cJSON_AddNumberToObject(cJSON_GetObjectItem(cfg, "model"), "parameters", (double)ex->model->table.n_params);
    cJSON_AddItemToObject(cfg, "federation", fed_config_to_json(&ex->fed));
    if (f) {
        cJSON *dj = fed_defense_json(f, err);
        if (!dj)
            return err && err->code ? err->code : FP_ENOMEM;
        cJSON_AddItemToObject(cfg, "defense", dj);
    }
    return FP_OK;
}
