// The pieces of the layer-wise, explainability-driven DP defense (defenses/layerwise.c;
// Liu et al. 2025) that tests and tools call directly. The defense itself is reached
// through the registry as "layerwise" (and its flat DP-FL baseline as "flat-laplace").
#ifndef FEDPRIV_DEFENSES_LAYERWISE_H
#define FEDPRIV_DEFENSES_LAYERWISE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct Model;
struct Dataset;

#define LAYERWISE_MAX_UNITS 16

typedef enum { LW_CORRECTED = 0, LW_PAPER = 1 } LayerwiseVariant;

// Eq. 15 summed as in Eq. 14 for one layer: the fraction of the n sigmoid
// pre-activations that are > threshold (−2 in the paper).
double layerwise_activation_fraction(const float *preact, size_t n, double threshold);

// Eq. 14 for the sigmoid gates (input, forget, output) of an `lstm` model: the fraction
// of (gate unit, time step, sample) pre-activations > threshold over samples idx[0..n)
// of d, the model's current parameters, read through the model's forward probe
// (models/model.h ModelProbe). FP_EUNSUPPORTED for another architecture.
FpStatus layerwise_lstm_importance(const struct Model *m, const struct Dataset *d, const uint32_t *idx, int n,
                                   double threshold, double *s, FpError *err);

// Eq. 16: eps_out[i] = s[i] / Σ s · eps_t (equal shares when Σ s = 0).
void layerwise_budget_shares(const double *s, int n_units, double eps_t, double *eps_out);

// The Laplace scale of a unit with clip C and budget eps_unit:
//   paper      b = Δf/ε with Δf = 2·C·η (Eq. 20), C an L2 clip;
//   corrected  b = 2·C/ε, C an L1 clip of the gradient that is perturbed.
double layerwise_laplace_scale(LayerwiseVariant v, double clip, double lr, double eps_unit);

// The pure-DP ε one draw at unit budget eps_unit really costs, for a unit of d
// parameters: paper (L2 clip, L1 sensitivity 2C√d, noise on the gradient, so no η):
// eps_unit·√d/η; corrected: eps_unit.
double layerwise_true_epsilon(LayerwiseVariant v, double eps_unit, size_t d, double lr);

// What one client's last perturbation did (for tests and diagnostics).
typedef struct LayerwiseClientRound {
    int round;                 // -1 before the first perturbation
    int n_units;
    int draws;                 // Laplace draws (1 + Armijo escalations)
    int accepted;              // 1 when the Armijo test passed on the last draw (or Armijo is off)
    double eps_t;              // the round budget before escalation
    double eps_final;          // the ε of the last draw
    double eps_nominal;        // charged by the paper's accounting this round
    double eps_sound;          // charged by the honest accounting this round
    double s[LAYERWISE_MAX_UNITS];      // importance (Eq. 14)
    double clip[LAYERWISE_MAX_UNITS];   // C^i (Eq. 19 statistic)
    double norm[LAYERWISE_MAX_UNITS];   // the unit's norm before clipping (L2 paper, L1 corrected)
    double scale[LAYERWISE_MAX_UNITS];  // Laplace scale of the last draw
    double eps_unit[LAYERWISE_MAX_UNITS]; // ε share of the last draw
} LayerwiseClientRound;

// The record of client k in a layerwise / flat-laplace state (NULL if k is out of range).
const LayerwiseClientRound *layerwise_client_round(const void *state, int client);
// The units (budget layers) of a state: name and parameter count of unit i.
int layerwise_units(const void *state, const char **names, size_t *counts, int max);

#endif
