// The model zoo. A model is a forward function over a flat parameter buffer described
// by a ParamTable (core/params.h): one allocation per model, so averaging, clipping and
// noise are flat loops. Models live on a backend (the buffer is device memory there).
//
//   Model *m = model_create(cfg_json, "model", &shape, backend, &err);
//   model_init(m, seed, &err);                 // RNG_INIT stream
//   Var *p[m->table.n_layers]; model_param_vars(m, tape, 1, p);
//   Var *logits = model_forward(m, tape, p, x, 1);
#ifndef FEDPRIV_MODELS_MODEL_H
#define FEDPRIV_MODELS_MODEL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/autodiff.h"
#include "core/params.h"
#include "core/status.h"

// What the data looks like: per-sample shape and outputs.
typedef struct DataShape {
    int c, h, w;          // images: channels, height, width; sequences: c=1, h=steps, w=features
    int n_classes;        // classification outputs (0 for regression)
    int target_dim;       // regression outputs (0 for classification)
} DataShape;

typedef enum { INIT_DEFAULT = 0, INIT_UNIFORM = 1 } InitKind;

// Resolved model options (from the "model" JSON object).
typedef struct ModelConfig {
    char name[32];
    InitKind init;        // default: PyTorch's (U(±1/√fan_in)); uniform: U(−0.5, 0.5) (DLG)
    int hidden[8];        // mlp hidden sizes; lstm hidden size in hidden[0]
    int n_hidden;
    float bn_momentum;    // running-statistics momentum (PyTorch's 0.1)
} ModelConfig;

typedef struct Model Model;

// An observer of a forward pass. sigmoid_input is called with the input z of every
// sigmoid gate as the model computes it, unit naming the layer (the name prefix of its
// parameters, e.g. "lstm"), so a caller can measure gate activity without re-running the
// model by hand (layerwise's importance, Liu et al. 2025 Eq. 14). Models report the
// sigmoids that gate a recurrence (lstm: i, f, o each step); others never call it.
typedef struct ModelProbe {
    void *ctx;
    void (*sigmoid_input)(void *ctx, const char *unit, Tape *t, Var *z);
} ModelProbe;

typedef struct ModelOps {
    const char *name;
    const char *summary;
    // Fill the config's model-specific defaults and check them against the data shape.
    FpStatus (*configure)(ModelConfig *cfg, const cJSON *json, const char *path, const DataShape *in, FpError *err);
    // Add the layers (in the order forward() expects them).
    FpStatus (*layout)(Model *m, FpError *err);
    // Optional: initialise parameters (NULL = generic: weights and biases U(±1/√fan_in)).
    void (*init)(Model *m, float *host_params, uint64_t seed);
    // The forward pass. training = 1 may update state kept in the parameter buffer
    // (batch-norm running statistics, written through p); training = 0 writes nothing.
    // probe (may be NULL) observes intermediate values (ModelProbe).
    Var *(*forward)(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe);
    // Optional: Model.state, immutable once made and shared by clones: share() returns it
    // with one more owner, release() drops one (an imported ONNX graph, models/onnx.h).
    void *(*state_share)(void *state);
    void (*state_release)(void *state);
    // 1: the forward's first operation is x·Wᵀ + b on the flattened input, W and b the
    // table's layers 0 and 1 (the closed-form input recovery of attacks/inversion.h applies).
    int dense_input;
} ModelOps;

struct Model {
    const ModelOps *ops;
    ModelConfig cfg;
    DataShape in;
    const Backend *be;
    ParamTable table;
    int cap_layers;
    int *fan_in;          // per layer, for the default initialisation
    float *params;        // device memory, table.n_params floats
    void *state;          // the architecture's own immutable state (ModelOps.state_share), or NULL
};

// {"name": ...} a built-in model; {"onnx": FILE} an imported graph (models/onnx.h), FILE
// read relative to base_dir (model_create: the working directory).
Model *model_create(const cJSON *json, const char *path, const DataShape *in, const Backend *be, FpError *err);
Model *model_create_at(const cJSON *json, const char *path, const DataShape *in, const Backend *be,
                       const char *base_dir, FpError *err);
// A model of the same architecture (parameters copied) on the same or another backend.
Model *model_clone(const Model *src, const Backend *be, FpError *err);
void model_free(Model *m);
// The initial weights from seed; FP_ENOMEM (the weights untouched) when out of memory.
FpStatus model_init(Model *m, uint64_t seed, FpError *err);

// Parameter I/O with the host (n_params floats).
void model_get_params(const Model *m, float *host);
void model_set_params(Model *m, const float *host);

// Leaf Vars viewing each layer of the parameter buffer (p has table.n_layers entries).
// Non-trainable layers never require a gradient.
// The model struct is not modified; the leaves view its buffer, which a training-mode
// forward may update (batch-norm statistics).
FpStatus model_param_vars(const Model *m, Tape *t, int requires_grad, Var **p);
Var *model_forward(const Model *m, Tape *t, Var *const *p, Var *x, int training);
// model_forward with an observer of intermediate values (ModelProbe).
Var *model_forward_probed(const Model *m, Tape *t, Var *const *p, Var *x, int training, const ModelProbe *probe);
// Index of the last trainable weight layer (the classifier, for iDLG's label rule).
int model_last_weight_layer(const Model *m);

// Save/load the parameters with the architecture's name and table: magic "FPMW",
// version 1, the model JSON, layer count, then each layer (name, count) and its floats.
// A reload is bit-identical; a mismatched architecture or a truncated file → FP_EFORMAT.
FpStatus model_save(const Model *m, const char *filename, FpError *err);
FpStatus model_load(Model *m, const char *filename, FpError *err);

// The registry.
int model_count(void);
const ModelOps *model_at(int i);
const ModelOps *model_find(const char *name);

// For model files: add a layer to the table during layout().
FpStatus model_add_layer(Model *m, const char *name, ParamKind kind, int ndim, const int *shape, int fan_in,
                         FpError *err);

#endif
