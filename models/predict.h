// What a model predicts and how well: the loss of a batch (what local training
// differentiates), evaluation on a test set, per-sample outputs. Shared by the engine,
// the defenses that read a client's model (dp-fedasgp's local loss, layerwise's Armijo
// test) and the attacks. These passes read the model and never change it.
#ifndef FEDPRIV_MODELS_PREDICT_H
#define FEDPRIV_MODELS_PREDICT_H

#include <stdint.h>

#include "datasets/batch.h"
#include "datasets/dataset.h"
#include "models/model.h"

// The loss of a batch out = f(x) of samples idx[0..n) of d (idx NULL: 0..n): the mean
// cross-entropy (classification) or MSE (regression). scratch holds n · max(1,
// target_dim) floats. NULL when out is NULL or the tape is out of memory.
Var *batch_loss(Tape *t, Var *out, const Dataset *d, const uint32_t *idx, int n, float *scratch);

// Test accuracy and mean loss of m on d (accuracy NaN for regression; mae for regression).
// Batches are dealt to threads and summed in batch order: bit-identical whatever threads.
FpStatus model_evaluate(const Model *m, const Dataset *d, int threads, double *accuracy, double *loss, double *mae,
                        FpError *err);
// Regression metrics of m on d: MSE, MAE and MAPE (mean |ŷ−y|/|y| over the outputs with
// y ≠ 0, as a fraction; NaN when every y is 0). Any output pointer may be NULL.
FpStatus model_evaluate_regression(const Model *m, const Dataset *d, int threads, double *mse, double *mae,
                                   double *mape, FpError *err);
// Per-sample softmax outputs (n × classes, host) of m on samples idx (NULL = all) of d;
// regression: the raw outputs (n × target_dim).
FpStatus model_predict(const Model *m, const Dataset *d, const uint32_t *idx, int n, float *probs, FpError *err);

#endif
