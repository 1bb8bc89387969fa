// Models from ONNX files and trained weights out (docs/bring-your-own.md, "Models").
//
//   "model": {"onnx": "path/model.onnx"}     (the path relative to the config file)
//
// The file is read through protobuf-c code that protoc-c generates from the ONNX schema
// (onnx.proto, libonnx-dev); see the Makefile. The graph is compiled once into a list of
// steps over the tape's ops (core/autodiff.h), so training, per-example and second-order
// gradients, every defense and every attack run on it as on a built-in model. Its
// initializers become the layers of the model's flat parameter buffer, in the order the
// graph first uses them, under their ONNX names; they are the initial weights.
//
// Hostile files: the file is read whole (at most ONNX_MAX_FILE bytes) and unpacked with an
// allocator that refuses any allocation beyond a bound set by the file's size, so a
// declared size never allocates more than the file can hold; every tensor's declared
// element count must equal the bytes it carries. Anything the core cannot run (an
// operator, attribute, opset, dynamic shape) is refused with one line naming the node
// and its operator (FP_EFORMAT or FP_EUNSUPPORTED, exit 2 at the CLI).
#ifndef FEDPRIV_MODELS_ONNX_H
#define FEDPRIV_MODELS_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "models/model.h"

#define ONNX_MAX_FILE ((size_t)1 << 31)  // protobuf's own limit on one message
#define ONNX_OPSET_MIN 9                 // BatchNormalization without "spatial"
#define ONNX_OPSET_MAX 18

// The model of an {"onnx": PATH} object at JSON path `path`; base_dir (NULL: the working
// directory) is the folder a relative PATH is read from (the config file's).
Model *onnx_model_create(const cJSON *json, const char *path, const DataShape *in, const Backend *be,
                         const char *base_dir, FpError *err);
int model_is_onnx(const Model *m);
// The same from the file's bytes (name: what messages call the file).
Model *onnx_model_from_bytes(const uint8_t *buf, size_t len, const char *name, const DataShape *in,
                             const Backend *be, FpError *err);

// The same compilation on bytes in memory (the fuzz target and the refusal tests): name is
// what messages call the file. peak (may be NULL) receives the most bytes the unpacking
// held at once, for the bound above.
FpStatus onnx_check_bytes(const uint8_t *buf, size_t len, const char *name, const DataShape *in, size_t *peak,
                          FpError *err);

// Trained weights out (models/onnx_save.c).
// safetensors: 8-byte little-endian header length, a JSON header
// {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {...}}, then the raw little-endian data. Every layer of the parameter
// buffer under its name (an imported model: the ONNX initializer's name and dims; a
// built-in one: the names `fedpriv list` documents, PyTorch's state_dict names), and for
// each batch norm whose statistics are named PREFIX.running_mean, PREFIX.num_batches_tracked
// (I64, 0: fedpriv does not count them; PyTorch reads it only with momentum=None).
FpStatus model_save_safetensors(const Model *m, const char *filename, FpError *err);
// The trained model as an ONNX file: an imported model's graph again with its
// initializers replaced by the trained values; a built-in model's graph traced from its
// forward pass (models/onnx_export.c: Gemm, Conv, Relu, Sigmoid, Tanh, MaxPool,
// AveragePool, Flatten, Softmax, LogSoftmax; initializers under the layers' names).
// FP_EUNSUPPORTED for a built-in model with no such graph (resnet18, lstm).
FpStatus onnx_model_save(const Model *m, const char *filename, FpError *err);
// Whether onnx_model_save can write m (why, when not NULL, says why not).
int model_has_onnx_export(const Model *m, FpError *why);

// `fedpriv train --save-model FILE`: FILE.safetensors gets the safetensors, and, when the
// model has an ONNX export (model_has_onnx_export), the trained ONNX graph beside it (FILE
// with .onnx for .safetensors); any other name the fedpriv weight file (model_save).
// onnx_sibling names that ONNX file (0 when FILE does not end in .safetensors).
FpStatus model_save_by_name(const Model *m, const char *filename, FpError *err);
int onnx_sibling(const char *safetensors, char *buf, size_t n);

#endif
