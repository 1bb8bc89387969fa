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
#include "defenses/dp/accountant_pld.h"
#include "defenses/dp/dgauss.h"
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

// ---- the Gaussian noise of the federated defenses ("sampler" in their params) ---------
//
//   "safe" (default): element i becomes g·(round(x[i]/g) + J_i), J_i ~ N_Z(0, S²) the
//       discrete Gaussian (Canonne, Kamath, Steinke 2020) from the wide table
//       (defenses/dp/dgauss.h) on element i's words (dgauss_wide_words), g = std/S the grid. Rounding
//       is to the nearest grid point, deterministic: a vector of d noised coordinates moves
//       by at most √d/2 steps, so a query of L2 sensitivity Δ (one vector added or removed)
//       has sensitivity at most Δ/g + √d/2 steps on the grid, and at most Δ/g + √d for two
//       vectors within Δ of each other (each side rounded). The noise on the grid integers
//       is then the discrete Gaussian mechanism: the same RDP α·Δ_steps²/(2S²) as the
//       continuous Gaussian at every order (CKS 2020 Thm 4, zCDP of the multivariate
//       discrete Gaussian), i.e. the continuous account with the noise multiplier divided
//       by clip_noise_inflation (1 + 1/512 at most unless S is capped), and δ enlarged
//       by the table's distance to the ideal law (clip_noise_epsilon).
//       With `rounded` set the table is of round(N(0, S²)) (dgauss_wide_init_rounded): the
//       grid integer plus it is round(integer + N(0, S²)), post-processing of the continuous
//       Gaussian mechanism with the same Δ_steps, so the continuous accounts themselves
//       (Poisson subsampling, Mironov, Talwar, Zhang 2019; PLD) hold, with the same
//       inflation and slack. Only for one draw per release: a sum of rounded Gaussians is
//       not one, so client shares that must add up keep the discrete Gaussian.
//   "float": x[i] + std·N_i, N_i = rng_normal_at(rng, i) (Box-Muller in double): no
//       guarantee (a floating-point sampler's outputs can reveal the input, Mironov 2012).
typedef struct ClipNoise {
    int safe;                // 1: the discrete Gaussian on a grid; 0: the float sampler
    int rounded;             // safe: 1 draws the rounded Gaussian round(N(0, S²)) instead (set
                             // before clip_noise_build by a defense whose release is one
                             // draw on one lattice sum: then the continuous accounts hold)
    size_t d;                // trainable elements (what the inflation counts)
    DGaussWide table;        // safe: N_Z(0, S²), S = table.sigma
    DefenseMemo *memo;       // optional (set before clip_noise_build): the experiment's memo, which
                             // then holds the table and shares it between the federations that
                             // draw from the same one (an audit's runs, a matrix's cells)
    int borrowed;            // the table is the memo's (clip_noise_free leaves it)
} ClipNoise;

// Reads "sampler" ("safe" | "float", default safe) for t's trainable elements;
// clip_noise_build then builds the table for the largest noise multiplier `ratio` (std
// over the sensitivity) the defense will draw: S = 256·√d·max(1, ratio), within
// [64, DGAUSS_WIDE_SIGMA_MAX] (a second call keeps the first table). clip_noise_free
// releases it.
FpStatus clip_noise_parse(const cJSON *params, const char *path, const ParamTable *t, ClipNoise *n, FpError *err);
FpStatus clip_noise_build(ClipNoise *n, double ratio, FpError *err);
void clip_noise_free(ClipNoise *n);
// Element i of x noised with std (see above): element i of rng gives its words.
static inline float clip_noise_one(const ClipNoise *n, float x, uint64_t i, const RngStream *rng, double std) {
    if (!n->safe)
        return (float)(x + std * rng_normal_at(rng, i));
    return dgauss_wide_value_at(&n->table, std / n->table.sigma, x, rng, i);
}
// x[k] for k < count noised with std as element first + k of rng: the one loop every
// noised vector goes through (the safe sampler a chunk at a time, dgauss_wide_add, bit for
// bit clip_noise_one). Nothing when std <= 0.
void clip_noise_add_at(const ClipNoise *n, float *x, size_t count, const RngStream *rng, uint64_t first, double std);
// Every trainable element of x noised with std (nothing when std <= 0).
void clip_noise_add(const ClipNoise *n, float *x, const ParamTable *t, const RngStream *rng, double std);
// The factor φ >= 1 by which the safe sampler's rounding divides the noise multiplier
// std/Δ of a release: 1 + 1e-12 + (std/S)·√d/Δ' with Δ' = 2Δ for add/remove (Δ one
// vector's norm) and Δ' = Δ for two vectors within Δ (replace); the 1e-12 covers the
// division x/g in double. 1 for the float sampler.
double clip_noise_inflation(const ClipNoise *n, double std, double sensitivity, int replace);
// Adds "sampler" and, for the safe one, "noise_grid_steps" (S) to a describe() object.
void clip_noise_describe(const ClipNoise *n, cJSON *out);
// (1 + e^ε)·draws·tv: the δ the table's distance to N_Z(0, σ²) adds over `draws` draws
// (0 for the float sampler).
double clip_noise_delta_slack(const ClipNoise *n, double eps, double draws);
// An account's ε after `rounds` rounds at δ (a defense's function over its state):
// INFINITY when the account states no bound, NaN (never INFINITY) when it could not be
// computed for lack of memory, which the privacy slot passes on (fl/defense.h) and a
// calibration search turns into FP_ENOMEM.
typedef double (*ClipEpsilonAt)(const void *ctx, long long rounds, double delta);
// The ε of an account at δ with the safe sampler's slack inside it: the account runs at
// δ(1 − f) for the first share f of δ in 2^-10, 2^-6, 2^-3, 2^-1 whose slack over `draws`
// draws fits in δf (*covered = 1; an infinite ε needs none). When none fits (ε above
// about 10 to 15 for 10^9 to 10^6 draws at δ = 1e-5: beyond what the table's precision
// certifies) it returns the ε at δ(1 − 2^-10) with *covered = 0, and the record is
// conditional on CLIP_NOISE_SLACK_ASSUMPTION. The float sampler: the account at δ.
double clip_noise_epsilon(const ClipNoise *n, double delta, double draws, ClipEpsilonAt at, const void *ctx,
                          long long rounds, int *covered);
// The first share.
#define CLIP_NOISE_SLACK 0x1p-10
// The share of δ that clip_noise_epsilon gives the safe table's slack in an account that
// reaches eps over `draws` draws: the first share whose slack fits (CLIP_NOISE_SLACK when
// none does; 0 for the float sampler). A calibration to a target ε solves its multiplier at
// δ(1 − this share at the target): the record then meets the target, because at every
// smaller share either the ε is above the target or the slack already fitted there.
double clip_noise_delta_share(const ClipNoise *n, double eps, double draws, double delta);
// The assumption of a record whose figure the slack does not cover.
#define CLIP_NOISE_SLACK_ASSUMPTION                                                                          \
    "the discrete Gaussian table's distance to the ideal law (2^-59 per draw) is taken as negligible: over " \
    "the run's draws, (1 + e^eps) draws 2^-59 exceeds even half of delta at this epsilon"
// The sentence a record without guarantee gives for the float sampler.
#define CLIP_NOISE_FLOAT_REASON                                                                              \
    "the Gaussian noise is drawn in floating point (\"sampler\": \"float\"): a float sampler's outputs can "    \
    "reveal the input (Mironov 2012); the default safe sampler draws the discrete Gaussian on a grid"

// The field's figure (PrivacyRecord.standard_notion): the ε of `steps` compositions of the
// Poisson-subsampled Gaussian at rate q and multiplier sigma, at delta, by RDP (default
// orders, Balle et al. 2020) and by PLD (default grid), into rec; INFINITY where an
// accountant states none, NaN when one ran out of memory (0 for no steps, INFINITY for
// sigma <= 0, without an accountant). Once per (q, sigma, steps, delta) in memo (the
// experiment's, DefenseSetup.memo; NULL: computed each time): the PLD costs about 0.05 s
// for 20 steps, and every round's record states it; pld (the defense's, may be NULL) keeps
// one step's masses between the rounds' figures (the same figures, bit for bit).
void clip_standard_account(PrivacyRecord *rec, DefenseMemo *memo, PldStepMemo *pld, double q, double sigma,
                           long long steps, double delta);
#define CLIP_STANDARD_NOTION                                                                                  \
    "the standard accountant (Opacus, TF Privacy) for the same multiplier, rate and steps: Poisson-subsampled " \
    "Gaussian, add/remove one, RDP (Mironov, Talwar, Zhang 2019; Balle et al. 2020 conversion) and PLD; for "  \
    "comparison, not this run's bound"

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
// estimator): for trainable elements out[i] = (Σ_s u_s[i] + std · N_i) / m, so one client
// moves the average by at most C/m whatever the others do. With std > 0 and the safe
// sampler the sum is g·(Σ_s round(u_s[i]/g) + J_i): each upload rounded to the grid on its
// own, so adding or removing one moves the integer sum by its own rounded vector (see
// ClipNoise); rng may be NULL when std = 0 (then noise may be NULL too). Non-trainable
// elements (batch-norm statistics) get the engine's weighted mean Σ_s weights[s] u_s[i].
// Sums in double, uploads in order, as a running sum (DefenseOps.sum_add/sum_finish):
// clip_sum_add adds one upload (its engine weight `weight`) into acc (n_params doubles,
// zero at the start: the integer lattice sum for the safe sampler's trainable elements),
// in client order; clip_sum_finish turns the sum into out with the noise and the
// denominator. std must be the same in both calls of a round.
void clip_sum_add(const ParamTable *t, const ClipNoise *noise, double std, double *acc, const float *upload,
                  double weight);
void clip_sum_finish(const ParamTable *t, const ClipNoise *noise, const RngStream *rng, double std, double m,
                     const double *acc, float *out);

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
//   Bernoulli sampling, server noise: Poisson-subsampled Gaussian, rate q, multiplier z,
//       add/remove one client (Mironov, Talwar, Zhang 2019; exact for the safe sampler's
//       rounded Gaussian, post-processing of the continuous mechanism, ClipNoise);
//   fixed-size sampling (m of N without replacement): Wang, Balle, Kasiviswanathan 2019
//       Thm 9, rate m/N, replace one client: the sum moves by up to 2C, multiplier z/2.
// With client shares the shares' grid depends on k (each is on the grid of its std), so
// the release shows k: the account is for replace-one neighbours, where a Bernoulli k's law
// does not depend on the data and, given k, the cohort is a uniform k-subset: per round,
// Thm 9 at rate k_r/N for the sum of the k_r shares (multiplier z/2), the realised counts
// composed (a round of unknown k: the client sampled with probability q, joint convexity).
// One client's upload alone (client noise; what the server sees without secure
// aggregation) is the Gaussian mechanism with std zC/√k_r on a vector within 2C of any
// other: the upload observer's RDP composes over the rounds (the float sampler: exactly,
// Dong, Roth, Su 2022), no amplification. With server noise the server sees the clipped
// update itself: no bound for that observer.
//
// The sampler (ClipNoise): the safe one's accounts divide every multiplier by the
// rounding's inflation and run at δ(1 − CLIP_NOISE_SLACK). Every account is proven for it:
//   the discrete Gaussian's RDP curve is the continuous one's (CKS 2020 Thm 4), so Thm 9 of
//       Wang et al. (any mechanism given that curve) holds for fixed-size cohorts;
//   server noise draws the rounded Gaussian (one draw on the lattice sum of the rounded
//       uploads): the continuous accounts themselves, Poisson subsampling by Mironov,
//       Talwar, Zhang 2019 included;
//   a sum of k clients' shares N_Z(0, S²) (not a discrete Gaussian): Kairouz, Liu, Steinke
//       2021 Thm 1 (dgauss_sum_multiplier), a term e^{−π²S²} small beside 1/z²;
//   one client's uploads: plain RDP composition of the discrete Gaussian.
//   The float sampler: none.
//
// Variants
//   corrected (default): "noise_multiplier" z, or a target "epsilon" (total over the
//       run's rounds, at "delta") from which z is searched (rdp_sigma_for_epsilon_sampled:
//       the ε reached after all rounds never exceeds the target; with client shares and
//       Bernoulli sampling z is searched for the account that holds whatever the counts,
//       joint convexity at rate q, and the record's figure, from the realised cohorts,
//       is below it for cohorts near qN and can exceed it for much larger ones).
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
    ClipNoise noise;      // the sampler ("sampler")
    DefenseMemo *memo;    // borrowed, may be NULL: the experiment's (the standard figures)
    PldStepMemo *pld_memo; // owned: one step's PLD masses, kept between rounds' standard figures
} ClipGaussian;

// Reads "clip", "delta", "noise_multiplier", "epsilon", "sensitivity", "sampler" and, when
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
// Adds the calibration to a describe() object; FP_ENOMEM when its account ran out of memory.
FpStatus clip_gaussian_describe(const ClipGaussian *g, cJSON *out);
// UploadParams of an upload clipped to C in L2 in a round of k participants, with the
// client's share of the noise (clip_gaussian_client_std; 0 with server noise, whose std
// goes to server_noise_scale); ε per round for the paper calibration, else -1 (the
// claim is over the run, not per upload).
void clip_gaussian_upload_params(const ClipGaussian *g, int k, UploadParams *out);

#endif
