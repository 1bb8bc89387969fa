// An experiment: the common top of every config file (seed, dataset, model, federation,
// defense, device, threads), loaded and validated in one place for `fedpriv train`, the
// attacks and the matrix runner.
//
//   {"seed": 1,
//    "dataset": {"name": "fashion-mnist", "path": "...", "train_samples": 0, "test_samples": 0},
//    "model": {"name": "mlp"},
//    "federation": {"clients": 10, "sample_rate": 1.0, "rounds": 5, ...},
//    "defense": {"name": "none"},
//    "device": "cpu", "threads": 2}
#ifndef FEDPRIV_FL_EXPERIMENT_H
#define FEDPRIV_FL_EXPERIMENT_H

#include <cjson/cJSON.h>

#include "core/version.h"
#include "fl/fed.h"

// The largest seed: 2^53 - 1. Seeds are read and written as exact integers; 2^53 and
// above are rejected (a double, which JSON readers use, cannot tell 2^53 + 1 from 2^53).
#define EXPERIMENT_SEED_MAX ((long long)(((uint64_t)1 << 53) - 1))

typedef struct Experiment {
    uint64_t seed;
    const Backend *backend;
    int threads;
    Dataset *train, *test;
    DataShape shape;
    Model *model;              // initialised from the seed
    FedConfig fed;
    const DefenseOps *defense;
    const cJSON *defense_json; // points into the config
    const cJSON *model_json;   // points into the config
    const cJSON *dataset_json;
    char dataset_name[64];
    Comm *comm;                // optional, borrowed: the ranks that run its federations together
                               // (FedSetup.comm); experiment_load leaves it NULL (one process)
    DefenseMemo *memo;         // what the defense derived once for all of its federations
                               // (fl/defense.h); experiment_load creates it, experiment_free
                               // frees it; NULL: none
} Experiment;

// Loads an experiment from a parsed config. extra_keys (NULL-terminated, may be NULL)
// are the caller's own top-level keys (e.g. "attack"), validated by the caller.
// device_override / threads_override (NULL / 0 = none) come from command-line options.
// find_defense resolves "defense.name" (defenses/registry.h defense_find; NULL knows
// only "none"): the engine does not know the defenses above it.
FpStatus experiment_load(const cJSON *root, const char *const *extra_keys, const char *device_override,
                         int threads_override, DefenseFindFn find_defense, Experiment *ex, FpError *err);
// experiment_load for a config read from config_file (NULL: none): the relative paths it
// names (an ONNX model's, "model": {"onnx": ...}) are read from that file's folder.
FpStatus experiment_load_at(const cJSON *root, const char *config_file, const char *const *extra_keys,
                            const char *device_override, int threads_override, DefenseFindFn find_defense,
                            Experiment *ex, FpError *err);
void experiment_free(Experiment *ex);

// Makes every relative file path of a parsed config (dataset.path, dataset.partition_file)
// relative to the folder of config_file, the file it was read from, in place: the
// folder made absolute (realpath) joined with the path; absolute paths are left as they
// are. The CLI calls it right after reading a config, so the result's config records
// the paths it used.
FpStatus experiment_resolve_paths(cJSON *root, const char *config_file, FpError *err);

// The run's input that writing the file out would replace (fp_output_replaces): the
// config file, or a file the config names (the ONNX model, the partition file, the
// dataset's file, each split's for "{split}", or anything under the dataset's folder),
// root as experiment_resolve_paths left it. Returns 1 and says which in what ("the
// config file cfg.json", "model.onnx: m.onnx"), else 0.
int experiment_output_replaces_input(const cJSON *root, const char *config_file, const char *out, char *what,
                                     size_t n);

// Loads train and test sets from a "dataset" object (also used by attacks that need
// only data): keys name, path, train_samples, test_samples, split, partition_file (a
// client id per training sample: the natural partition, dataset_read_partition_file).
FpStatus experiment_load_data(const cJSON *dataset_json, const char *path, Dataset **train, Dataset **test,
                              char *name_out, size_t name_size, FpError *err);

// A federation over the experiment (hooks optional).
Federation *experiment_federation(Experiment *ex, const FedHooks *hooks, int quiet, FpError *err);

// The run metadata every result carries: seed, backend, threads, version, and the
// resolved dataset/model/federation/defense configs.
// FP_ENOMEM (err set) when the defense could not state its parameters (fed_defense_json).
FpStatus experiment_describe(const Experiment *ex, const Federation *f, cJSON *result, FpError *err);

// Rounds as JSON: [{"round", "test_accuracy", "test_loss", ("test_mae"), "participants",
// "privacy": {...}, "uploads": {...}}, ...] and the final record.
cJSON *fed_rounds_json(const Federation *f, int with_timings);

// A classification run whose test loss explodes while staying finite: the rule that
// marks it, for every result that shows its accuracy (train's result, a matrix cell,
// the report). A model that answers uniformly at random over K classes has a test
// loss of ln K; a run is "loss_exploded" when some round's test loss exceeds
// FED_LOSS_EXPLODED_FACTOR · ln K (SPM as published at 5 clients passes it in round 7
// and ends at 6·10^11, docs/reproductions/spm.md). The weights are finite, so the
// run is not "diverged", but its accuracy is no model's: it is marked, never a plain ok.
#define FED_LOSS_EXPLODED_FACTOR 10.0
// {"kind": "loss_exploded", "round": first round over the threshold, "test_loss": its
// loss, "peak_test_loss", "threshold", "message"}, or NULL when the rule does not fire
// (or there are no classes: a regression run has no uniform guess to compare with).
cJSON *fed_loss_explosion_json(const Federation *f, int n_classes);
cJSON *privacy_record_json(const PrivacyRecord *p);
// What a defense applied to one upload: {"noise", "noise_scale", "server_noise_scale",
// "clip_norm", "clip", "epsilon"} (noise and clip_norm "none" when absent, clip and
// epsilon null when not defined).
cJSON *upload_params_json(const UploadParams *p);
// A round's uploads: the same keys, with "_min"/"_max" pairs where participants differ.
cJSON *upload_summary_json(const UploadSummary *u);

#endif
