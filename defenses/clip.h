// Clipping, Gaussian noise, order statistics and the client-level Gaussian calibration
// over the trainable part of a flat parameter buffer: the shared pieces of the federated
// DP defenses (gaussian-dpfedavg, dp-fedasgp, fedsmp, avp/nbafl).
//
// Conventions
// - "Trainable" means the layers with ParamLayer.trainable set; batch-norm running
//   statistics are never clipped or noised (defenses/defense.h).
// - Norms are accumulated in double, elements in buffer order, so the result does not
//   depend on threads.
// - Noise on element i is drawn with rng_normal_at(rng, i), i the flat index of the
//   element in the buffer, so the same element gets the same draw on every backend and
//   whatever subset of elements is perturbed.
#ifndef FEDPRIV_DEFENSES_CLIP_H
#define FEDPRIV_DEFENSES_CLIP_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/params.h"
#include "core/rng.h"
#include "defenses/defense.h"

// L2 norm of the trainable elements of x.
double clip_norm(const float *x, const ParamTable *t);

// Scales the trainable elements of x by min(1, c / ||x||_2) (c > 0) and returns the
// norm before clipping. A zero vector is left as it is.
double clip_to_norm(float *x, const ParamTable *t, double c);

// x[i] += std · N_i(0, 1), N_i = rng_normal_at(rng, i), for every trainable element i.
void clip_add_gaussian(float *x, const ParamTable *t, const RngStream *rng, double std);

// Writes the flat indices of the trainable elements into idx (room for t->n_trainable)
// in increasing order and returns their count.
size_t clip_trainable_index(const ParamTable *t, uint32_t *idx);

// The k-th smallest (0-based, k < n) of buf[0..n) by quickselect; buf is reordered.
float clip_select_kth(float *buf, size_t n, size_t k);

// Marks in keep[0..n) (1 = kept) exactly k elements of val[0..n) with the largest
// values: all those above the k-th largest value, then ties in index order. scratch
// holds n floats. k = 0 keeps none; k >= n keeps all.
void clip_top_k(const float *val, size_t n, size_t k, unsigned char *keep, float *scratch);

// The client id of the server's own noise stream: rng_stream(seed, RNG_DEFENSE, round,
// CLIP_SERVER_CLIENT) (no client has this id).
#define CLIP_SERVER_CLIENT 0xffffffffu

// The server's average of k uploads over a fixed denominator m (McMahan et al. 2018,
// "Learning differentially private recurrent language models", the fixed-denominator
// estimator): for trainable elements out[i] = (Σ_s u_s[i] + std · N_i) / m with
// N_i = rng_normal_at(rng, i) (rng may be NULL when std = 0); so one client moves the
// average by at most C/m whatever the others do. Non-trainable elements (batch-norm
// statistics) get the engine's weighted mean Σ_s weights[s] u_s[i]. Sums in double,
// uploads in order.
void clip_aggregate_fixed(const float *const *uploads, const double *weights, int k, double m,
                          const ParamTable *t, const RngStream *rng, double std, float *out);

// ---- client-level Gaussian calibration (gaussian-dpfedavg, fedsmp) ------------------
//
// One number carries the privacy: z, the standard deviation of the Gaussian noise on
// the SUM of a round's clipped updates divided by the clip C. The sum's sensitivity to
// adding or removing one client is C, so a round is the Poisson-subsampled Gaussian
// mechanism with rate q and noise multiplier z, accounted by RDP (defenses/accountant.h)
// on the extended order grid with the Balle et al. 2020 conversion. Noise is added
// either by the server (std zC on the sum) or by each client (std zC/√m, m the expected
// number of participants, so that the m independent shares add up to zC).
//
// Variants
//   corrected (default): "noise_multiplier" z, or a target "epsilon" (total over the
//       run's rounds, at "delta") from which z is searched (rdp_sigma_for_epsilon: the
//       ε reached after all rounds never exceeds the target).
//   paper: calibrated as the DP-FedASGP paper's baselines (its eq. 2): every client adds
//       N(0, σ²) per coordinate with σ = (ΔS/ε)·√(2 ln(1.25/ζ)), ζ = e^{-ε}, i.e.
//       σ = (ΔS/ε)·√(2(ln 1.25 + ε)), "epsilon" per round and ΔS = "sensitivity"
//       (default: the clip). Its nominal claim is (ε, e^{-ε})-DP per round (a vacuous δ);
//       the sound figure is the RDP account of the noise actually added, z = σ√m / C.
typedef struct ClipGaussian {
    int paper;            // 1 for the paper calibration
    int server_noise;     // 1: the server adds the noise; 0: each client adds its share
    double clip;          // C
    double delta;         // δ of the sound account
    double epsilon;       // corrected: the target (or -1 when z was given); paper: per-round ε
    double sensitivity;   // paper: ΔS of eq. 2 (else -1)
    double z;             // noise multiplier of the sum (see above)
    double client_std;    // std each client adds per coordinate (0 with server noise)
    double server_std;    // std the server adds to the sum (0 with client noise)
    double q;             // sampling rate used by the accountant
    double m;             // expected participants per round: the fixed denominator
    int rounds;           // planned rounds
} ClipGaussian;

// Reads "clip", "delta", "noise_multiplier", "epsilon", "sensitivity" and, when
// allow_noise_site, "noise" ("server" | "client"; default server; the paper variant is
// client-side) from params. The caller has checked the keys and read "variant" (paper).
FpStatus clip_gaussian_parse(const cJSON *params, const char *path, const DefenseSetup *setup, int paper,
                             int allow_noise_site, ClipGaussian *g, FpError *err);
// The sound (ε, δ) after `rounds` rounds (0 for rounds = 0, INFINITY when z = 0).
double clip_gaussian_epsilon(const ClipGaussian *g, long long rounds);
// Fills the privacy record after rounds_done rounds (unit "client").
void clip_gaussian_privacy(const ClipGaussian *g, int rounds_done, PrivacyRecord *rec);
// Adds the calibration to a describe() object.
void clip_gaussian_describe(const ClipGaussian *g, cJSON *out);

#endif
