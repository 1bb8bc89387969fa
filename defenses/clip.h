// Clipping, Gaussian noise, order statistics and the client-level Gaussian calibration
// over the trainable part of a flat parameter buffer: the shared pieces of the federated
// DP defenses (gaussian-dpfedavg, dp-fedasgp, fedsmp, avp/nbafl).
//
// Conventions
// - "Trainable" means the layers with ParamLayer.trainable set; batch-norm running
//   statistics are never clipped or noised (fl/defense.h).
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
#include "fl/defense.h"

// L2 norm of the trainable elements of x.
double clip_norm(const float *x, const ParamTable *t);

// Scales the trainable elements of x so that their L2 norm, as stored in float, is at
// most c (c > 0), and returns the norm before clipping. A vector with norm above
// c·(1 − CLIP_MARGIN) is scaled to that: the float rounding of the scaled elements
// (relative 2^-24 each) and the double accumulation of the norm then cannot carry it
// past c, so the sensitivities the accountants use hold for the stored upload. A zero
// vector is left as it is.
#define CLIP_MARGIN 1e-6
double clip_to_norm(float *x, const ParamTable *t, double c);
// The factor clip_to_norm applies to a vector of L2 norm `norm` (1 when it is inside).
double clip_scale(double norm, double c);

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
// the SUM of a round's clipped updates divided by the clip C. Noise is added either by
// the server (std zC on the sum) or by each client: the corrected variant sizes each
// share for the round's realised cohort k (DefenseRound.participants), N(0, z²C²/k), so
// the shares of every round add up to exactly N(0, z²C²) whatever k is, and the server
// adds the whole N(0, z²C²) itself in a round nobody takes part (the defenses set
// release_empty_rounds). The released sum is then the central mechanism, accounted by
// RDP on the extended order grid with the Balle et al. 2020 conversion:
//   Bernoulli sampling: Poisson-subsampled Gaussian, rate q, multiplier z, add/remove one
//       client (Mironov, Talwar, Zhang 2019);
//   fixed-size sampling (m of N without replacement): Wang, Balle, Kasiviswanathan 2019
//       Thm 9, rate m/N, replace one client: the sum moves by up to 2C, multiplier z/2.
// One client's upload alone (client noise; what the server sees without secure
// aggregation) is the Gaussian mechanism with std zC/√k_r on a vector within 2C of any
// other: the upload observer's ε composes those exactly over the rounds (Dong, Roth,
// Su 2022), no amplification. With server noise the server sees the clipped update
// itself: no bound for that observer.
//
// Variants
//   corrected (default): "noise_multiplier" z, or a target "epsilon" (total over the
//       run's rounds, at "delta") from which z is searched (rdp_sigma_for_epsilon_sampled:
//       the ε reached after all rounds never exceeds the target).
//   paper: calibrated as the DP-FedASGP paper's baselines (its eq. 2): every client adds
//       N(0, σ²) per coordinate with σ = (ΔS/ε)·√(2 ln(1.25/ζ)), ζ = e^{-ε}, i.e.
//       σ = (ΔS/ε)·√(2(ln 1.25 + ε)), "epsilon" per round and ΔS = "sensitivity"
//       (default: the clip), whatever the cohort. Its nominal claim is (ε, e^{-ε})-DP per
//       round (a vacuous δ). The sum's noise is then σ√k_r: the sound figure is, for
//       replace-one neighbours, Thm 9 per round at rate k_r/N with multiplier σ√k_r/(2C),
//       given the round's cohort size k_r (fixed-size: k_r = m; Bernoulli: the realised
//       count, independent of the data); a round whose count was not seen counts as the
//       client alone (joint convexity, rate q, multiplier σ/(2C)).
typedef struct ClipGaussian {
    int paper;            // 1 for the paper calibration
    int server_noise;     // 1: the server adds the noise; 0: each client adds its share
    double clip;          // C
    double delta;         // δ of the sound account
    double epsilon;       // corrected: the target (or -1 when z was given); paper: per-round ε
    double sensitivity;   // paper: ΔS of eq. 2 (else -1)
    double z;             // corrected: noise multiplier of the sum; paper: σ√m/C (nominal cohort)
    double paper_std;     // paper: σ, each client's std (else 0)
    double server_std;    // std the server adds to the sum (0 with client noise)
    double q;             // the sampling rate: q (Bernoulli) or m/N (fixed)
    double m;             // the fixed denominator: the cohort m (fixed) or qN (Bernoulli), >= 1
    int n_clients;        // N
    int cohort;           // m with fixed-size sampling; 0 with Bernoulli sampling
    int rounds;           // planned rounds
    int *seen_k;          // per round: the cohort size seen by end_round, -1 before
} ClipGaussian;

// Reads "clip", "delta", "noise_multiplier", "epsilon", "sensitivity" and, when
// allow_noise_site, "noise" ("server" | "client"; default server; the paper variant is
// client-side) from params. The caller has checked the keys and read "variant" (paper).
// clip_gaussian_free releases what it allocates.
FpStatus clip_gaussian_parse(const cJSON *params, const char *path, const DefenseSetup *setup, int paper,
                             int allow_noise_site, ClipGaussian *g, FpError *err);
void clip_gaussian_free(ClipGaussian *g);
// The std each client adds per coordinate in a round of k participants (0 with server noise).
double clip_gaussian_client_std(const ClipGaussian *g, int k);
// The std the server adds to the sum in a round of k participants: zC with server noise,
// and with client noise zC when k = 0 (corrected; the shares would be empty), else 0.
double clip_gaussian_server_std(const ClipGaussian *g, int k);
// Records the round's cohort size (from end_round).
void clip_gaussian_end_round(ClipGaussian *g, int round, int k);
// The sound (ε, δ) of the released aggregates after `rounds` rounds (0 for rounds = 0,
// INFINITY when z = 0).
double clip_gaussian_epsilon(const ClipGaussian *g, long long rounds);
// Fills the privacy record after rounds_done rounds (unit "client").
void clip_gaussian_privacy(const ClipGaussian *g, int rounds_done, PrivacyRecord *rec);
// Adds the calibration to a describe() object.
void clip_gaussian_describe(const ClipGaussian *g, cJSON *out);
// UploadParams of an upload clipped to C in L2 in a round of k participants, with the
// client's share of the noise (clip_gaussian_client_std; 0 with server noise, whose std
// goes to server_noise_scale); ε per round for the paper calibration, else -1 (the
// claim is over the run, not per upload).
void clip_gaussian_upload_params(const ClipGaussian *g, int k, UploadParams *out);

#endif
