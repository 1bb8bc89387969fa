// The one client-upload path (design notes: "Truth of a verdict"). Every upload that a
// server aggregates or an attack observes is formed by fed_client_upload (fl/upload.c),
// the only place a DefenseRound is built:
//   1. the client's model starts from the round's global weights g;
//   2. its local procedure runs on its local data: minibatch SGD with the federation's
//      lr, momentum and weight decay (RNG_SHUFFLE, round, client), E epochs or S steps, or
//      one step on all its samples for a probed victim (fed_set_client_data); each
//      step's gradient is the minibatch mean, or, when the defense fills the
//      local_gradient slot (record-level DP-SGD), the gradient the defense returns;
//   3. the upload of the defense's kind is formed from the trained weights w (upload_form);
//   4. the defense perturbs it with its state, created once from the federation's own
//      DefenseSetup (fl/fed.c), and the DefenseRound of (seed, round, client), and states
//      what it applied (DefenseOps.upload_params).
// The engine runs it for a round's participants (fed_round_run); attacks reach it
// through fed_observe (fl/fed.h), never through a federation of their own.
#ifndef FEDPRIV_FL_UPLOAD_H
#define FEDPRIV_FL_UPLOAD_H

#include <stddef.h>

#include "fl/defense.h"

// The upload of `kind` from trained weights w and the round's global weights g (host, n):
//   UPLOAD_WEIGHTS w;  UPLOAD_DELTA w − g;  UPLOAD_GRADIENT (g − w)/lr.
void upload_form(UploadKind kind, const float *w, const float *g, size_t n, double lr, float *upload);

// What an upload of `kind` (or an aggregate of such uploads) makes of the global weights
// g: the weights; g + delta; g − lr·gradient. out may be g.
void upload_to_weights(UploadKind kind, const float *upload, const float *g, size_t n, double lr, float *out);

// The server's estimate of the client's mean per-step loss gradient at g from its upload,
// when the client took `steps` SGD steps at learning rate lr with weight decay wd:
//   (g − w)/(lr·steps) − wd·g, with w the upload as weights (upload_to_weights; for a
//   delta −delta/(lr·steps), for a gradient upload/steps, without the round trip).
// Exact for one step without momentum (the FedSGD probe, up to float rounding); with
// more steps it is the mean of the steps' gradients, each at its own point.
void upload_gradient_estimate(UploadKind kind, const float *upload, const float *g, size_t n, double lr, long steps,
                              double wd, float *out);

const char *upload_kind_name(UploadKind kind); // "weights", "delta", "gradient"

#endif
