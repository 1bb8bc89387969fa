// The shared body of the per-scalar local-DP defenses (see defenses/mech_defense.h).
#include "defenses/mech_defense.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/dp/accountant.h"

// Why a float sampler proves nothing, with the share of 2000 outputs at the range's upper
// end (or +1) that cannot occur at its lower end (or -1): mech_support_check, stream
// (seed 1, RNG_AUDIT, 0, 2), so the figure is the same in every run.
static void float_reason(const Mech *m, const char *path, char *out, size_t size) {
    out[0] = '\0';
    if (m->sampler->exact)
        return;
    double lo, hi;
    mech_default_inputs(m, &lo, &hi);
    const long long n = 2000;
    RngStream s = rng_stream(1, RNG_AUDIT, 0, 2);
    long long bad = mech_support_check(m, hi, lo, 0, n, &s, NULL);
    char measured[160];
    if (bad < 0)
        snprintf(measured, sizeof measured, "its outputs come from 2^64 word pairs, so the support audit cannot "
                                            "decide them");
    else
        snprintf(measured, sizeof measured, "%.1f%% of %lld outputs at input %g cannot occur at input %g (support audit)",
                 100.0 * (double)bad / (double)n, n, hi, lo);
    snprintf(out, size,
             "%s.sampler is \"float\": it draws in float32, so its outputs lie on a float grid that moves with the "
             "input (Mironov 2012) and no epsilon holds; %s. The safe sampler is the default",
             path, measured);
}

int mech_defense_takes(const MechOps *mech, const char *const *extra_keys, const char *key) {
    return (key && strcmp(key, "upload") == 0) || mech_spec_takes(mech, MECH_PARSE_DEFENSE, extra_keys, key);
}

FpStatus mech_defense_create(const MechOps *mech, const cJSON *params, const char *path, const DefenseSetup *setup,
                             const char *const *extra_keys, MechDefense **out, FpError *err) {
    *out = NULL;
    const char *keys[8];
    int nk = 0;
    keys[nk++] = "upload";
    for (int i = 0; extra_keys && extra_keys[i] && nk < 7; i++)
        keys[nk++] = extra_keys[i];
    keys[nk] = NULL;
    MechSpec spec;
    FP_TRY(mech_spec_parse(params, path, MECH_PARSE_DEFENSE, keys, &spec, err));
    char p[256];
    if (spec.ops != mech)
        return fp_fail(err, FP_EPARAM, "%s: this defense runs %s, not %s", jv_path(p, sizeof p, path, "name"),
                       mech->name, spec.ops->name);
    static const char *const uploads[] = {"weights", "delta", "gradient", NULL};
    int up = 0;
    FP_TRY(jv_choice(params, path, "upload", uploads, 0, &up, err));
    if (spec.range_per_layer && up != UPLOAD_WEIGHTS)
        return fp_fail(err, FP_EPARAM,
                       "%s: \"layer\" ranges come from the global weights; use them with \"upload\": \"weights\"",
                       jv_path(p, sizeof p, path, "range"));
    if (!setup || !setup->params)
        return fp_fail(err, FP_EPARAM, "%s: the defense needs the model's parameter table", path);
    MechDefense *d = calloc(1, sizeof *d);
    if (!d)
        return fp_fail(err, FP_ENOMEM, "out of memory creating defense %s", mech->name);
    FpStatus st = mech_init(&d->mech, &spec, err);
    if (st != FP_OK) {
        free(d);
        return st;
    }
    d->upload = (UploadKind)up;
    const ParamTable *t = setup->params;
    d->n_layers = t->n_layers;
    d->layers = malloc(sizeof(ParamLayer) * (size_t)(t->n_layers > 0 ? t->n_layers : 1));
    if (!d->layers) {
        free(d);
        return fp_fail(err, FP_ENOMEM, "out of memory creating defense %s", mech->name);
    }
    if (t->n_layers > 0)
        memcpy(d->layers, t->layers, sizeof(ParamLayer) * (size_t)t->n_layers);
    for (int l = 0; l < t->n_layers; l++)
        if (t->layers[l].trainable) {
            d->d += t->layers[l].count;
            d->n_units++;
        } else {
            d->raw += t->layers[l].count;
        }
    snprintf(d->raw_note, sizeof d->raw_note,
             "the upload also carries %zu untrainable scalars (batch-norm running statistics) unperturbed; the bound "
             "counts only the %zu perturbed ones",
             d->raw, d->d);
    float_reason(&d->mech, path, d->reason, sizeof d->reason);
    *out = d;
    return FP_OK;
}

void mech_defense_destroy(void *state) {
    MechDefense *d = state;
    if (!d)
        return;
    free(d->layers);
    free(d);
}

UploadKind mech_defense_upload_kind(const void *state) { return ((const MechDefense *)state)->upload; }

FpStatus mech_defense_layer_mech(const MechDefense *d, int l, const DefenseRound *round, Mech *out, FpError *err) {
    *out = d->mech;
    if (!d->mech.spec.range_per_layer)
        return FP_OK;
    const ParamLayer *ly = &d->layers[l];
    if (!round->global)
        return fp_fail(err, FP_EUNSUPPORTED, "%s.range: \"layer\" needs the round's global weights",
                       d->mech.spec.path);
    // The layer's [min, max] in the global model: public, the same for every client.
    const float *g = round->global + ly->offset;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < ly->count; i++) {
        lo = g[i] < lo ? g[i] : lo;
        hi = g[i] > hi ? g[i] : hi;
    }
    if (!isfinite(lo) || !isfinite(hi))
        return fp_fail(err, FP_EDIVERGED, "%s.range: layer %s of the global model is not finite", d->mech.spec.path,
                       ly->name);
    double c = 0.5 * ((double)lo + hi), r = 0.5 * ((double)hi - lo);
    if (r < d->mech.spec.min_radius)
        r = d->mech.spec.min_radius;
    mech_set_range(out, c - r, c + r);
    return FP_OK;
}

FpStatus mech_defense_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    const MechDefense *d = state;
    Mech *layer_mech = NULL;   // a copy per layer only when each layer has its own range
    if (d->mech.spec.range_per_layer && !(layer_mech = malloc(sizeof *layer_mech)))
        return fp_fail(err, FP_ENOMEM, "out of memory perturbing an upload");
    FpStatus st = FP_OK;
    for (int l = 0; st == FP_OK && l < d->n_layers; l++) {
        const ParamLayer *ly = &d->layers[l];
        if (!ly->trainable || ly->count == 0)
            continue;
        const Mech *m = &d->mech;
        if (layer_mech) {
            st = mech_defense_layer_mech(d, l, round, layer_mech, err);
            m = layer_mech;
        }
        if (st == FP_OK)
            mech_perturb(m, upload + ly->offset, ly->count, &round->rng, ly->offset);
    }
    free(layer_mech);
    return st;
}

void mech_defense_guarantee(const MechDefense *d, double proven_total, PrivacyRecord *rec) {
    // defense_privacy() settles the record (defenses/defense.h): a proven bound with an
    // assumption becomes conditional, a record without guarantee shows ∞.
    rec->epsilon_total_sound = proven_total;
    if (!isfinite(proven_total)) {
        rec->guarantee = GUARANTEE_NONE;
        if (d->reason[0])
            privacy_assume(rec, d->reason);
        return;
    }
    rec->guarantee = GUARANTEE_PROVEN;
    if (d->raw > 0)
        privacy_assume(rec, d->raw_note);
}

void mech_defense_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const MechDefense *d = state;
    const Mech *m = &d->mech;
    double eps = m->spec.eps, rounds = rounds_done > 0 ? rounds_done : 0;
    *rec = (PrivacyRecord){.unit = "scalar",
                           .epsilon_round_nominal = eps,
                           .epsilon_total_nominal = eps * rounds,
                           .nominal_notion = "epsilon-LDP per scalar per round (the paper's claim); total = rounds x "
                                             "epsilon per scalar",
                           .delta = 0,
                           .sound_notion = "epsilon-LDP of the whole upload: sequential composition over its d "
                                           "clipped scalars and the rounds (a client in every round); the safe "
                                           "sampler's exact law is epsilon-LDP per scalar",
                           .sigma = -1};
    // The bound the mechanism proves for the perturbed scalars (INFINITY: none).
    double total = mech_upload_epsilon(m, (double)d->d, rounds, m->spec.delta);
    if (m->spec.ops == &mech_spm) {
        rec->nominal_notion = "epsilon-LDP per scalar per round on the sign only (the paper's claim); total = "
                              "rounds x epsilon per scalar";
        rec->sound_notion = "none for the values: SPM reveals |w| within a factor C and outputs 0 for 0; only the "
                            "signs are protected (d x rounds x epsilon for all of them, with the safe sampler)";
        rec->guarantee = GUARANTEE_NONE;
        rec->epsilon_total_sound = INFINITY;
        privacy_assume(rec, "SPM outputs k|w|t with t in [1, C]: the magnitude of every weight is revealed "
                            "within a factor C, so no epsilon bounds what the upload reveals about the values");
        if (d->reason[0])
            privacy_assume(rec, d->reason);
        return;
    }
    if (m->spec.ops == &mech_gaussian) {
        rec->nominal_notion = "(epsilon, delta)-LDP per scalar per round; total = rounds x epsilon per scalar";
        rec->sigma = m->sigma;
        rec->delta = m->spec.delta;
        rec->sound_notion = "discrete Gaussian on the whole upload: rho-zCDP with rho = d x rounds x N^2/(2 "
                            "sigma_grid^2) (Canonne, Kamath, Steinke 2020), converted at delta (Balle et al. 2020), "
                            "plus the sampler table's distance to the ideal law";
    } else if (m->spec.ops == &mech_laplace) {
        rec->sigma = m->sigma;
    }
    mech_defense_guarantee(d, total, rec);
    mech_defense_coordinate(rec, mech_upload_epsilon(m, 1, rounds, m->spec.delta),
                            "two uploads of one client that differ in one coordinate: that scalar's mechanism alone "
                            "(every scalar draws independently), over the rounds");
}

void mech_defense_coordinate(PrivacyRecord *rec, double epsilon_total, const char *notion) {
    // Only where the whole upload has a bound: a record without one states none narrower.
    rec->coordinate_notion = notion;
    rec->epsilon_total_coordinate = isfinite(rec->epsilon_total_sound) ? epsilon_total : INFINITY;
}

FpStatus mech_defense_describe(const void *state, cJSON *out) {
    const MechDefense *d = state;
    const Mech *m = &d->mech;
    if (m->spec.variant != MV_NONE)
        cJSON_AddStringToObject(out, "variant", mech_variant_name(m->spec.variant));
    cJSON_AddNumberToObject(out, "epsilon", m->spec.eps);
    static const char *const uploads[] = {"weights", "delta", "gradient"};
    cJSON_AddStringToObject(out, "upload", uploads[d->upload]);
    if (m->spec.range_per_layer) {
        cJSON_AddStringToObject(out, "range", "layer");
        cJSON_AddNumberToObject(out, "min_radius", m->spec.min_radius);
    } else if (m->spec.ops->range != MECH_RANGE_NONE) {
        cJSON *r = cJSON_AddArrayToObject(out, "range");
        cJSON_AddItemToArray(r, cJSON_CreateNumber(m->spec.lo));
        cJSON_AddItemToArray(r, cJSON_CreateNumber(m->spec.hi));
    }
    if (m->spec.ops->fp)
        cJSON_AddStringToObject(out, "sampler", mech_sampler_name(m->sampler->kind));
    if (m->spec.ops == &mech_gaussian) {
        cJSON_AddNumberToObject(out, "delta", m->spec.delta);
        cJSON_AddNumberToObject(out, "sigma", m->sigma);
    }
    if (m->spec.ops == &mech_laplace)
        cJSON_AddNumberToObject(out, "scale", m->sigma);
    if (m->sampler->lattice_ge) {   // the safe laplace and gaussian grids
        int n_grid = m->spec.ops == &mech_laplace ? m->tab.lap.n_grid : m->tab.gauss.n_grid;
        double lam = (m->spec.hi - m->spec.lo) / n_grid, off = m->spec.ops == &mech_laplace ? 0.5 : 0;
        cJSON_AddNumberToObject(out, "grid_step", lam);
        cJSON *cl = cJSON_AddArrayToObject(out, "output_range");
        cJSON_AddItemToArray(cl, cJSON_CreateNumber(m->spec.lo + lam * ((double)m->lat_kmin + off)));
        cJSON_AddItemToArray(cl, cJSON_CreateNumber(m->spec.lo + lam * ((double)m->lat_kmax + off)));
    }
    if (m->spec.ops == &mech_spm) {
        cJSON_AddNumberToObject(out, "C", m->big_c);
        cJSON_AddNumberToObject(out, "output_scale", m->k);
    }
    cJSON_AddNumberToObject(out, "perturbed_scalars", (double)d->d);
    cJSON_AddNumberToObject(out, "units", d->n_units);
    return FP_OK;
}

void mech_defense_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    const MechDefense *d = state;
    const MechOps *ops = d->mech.spec.ops;
    *out = upload_params_none();
    out->noise = ops->name;
    out->epsilon = d->mech.spec.eps;
    int ranged = ops->range != MECH_RANGE_NONE, additive = ops == &mech_laplace || ops == &mech_gaussian;
    if (ranged) {
        out->clip_norm = "range";
        out->clip = 0;
    }
    Mech *layer_mech = d->mech.spec.range_per_layer ? malloc(sizeof *layer_mech) : NULL;
    if (d->mech.spec.range_per_layer && !layer_mech)
        return;
    for (int l = 0; l < d->n_layers; l++) {
        const ParamLayer *ly = &d->layers[l];
        const Mech *m = &d->mech;
        if (!ly->trainable || ly->count == 0)
            continue;
        if (layer_mech) {
            if (mech_defense_layer_mech(d, l, round, layer_mech, NULL) != FP_OK)
                continue;
            m = layer_mech;
        }
        double var;
        if (additive)
            var = m->sigma * m->sigma;
        else if (!ranged)
            var = mech_variance(m, 1.0);
        else
            var = fmax(mech_variance(m, m->spec.lo), fmax(mech_variance(m, m->c), mech_variance(m, m->spec.hi)));
        out->noise_scale = fmax(out->noise_scale, additive ? m->sigma : sqrt(var));
        if (ranged)
            out->clip = fmax(out->clip, m->r);
    }
    free(layer_mech);
}
