// The shared body of the per-scalar local-DP defenses (see defenses/mech_defense.h).
#include "defenses/mech_defense.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/accountant.h"

FpStatus mech_defense_create(MechKind kind, const cJSON *params, const char *path, const DefenseSetup *setup,
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
    if (spec.kind != kind)
        return fp_fail(err, FP_EPARAM, "%s: this defense runs %s, not %s", jv_path(p, sizeof p, path, "name"),
                       mech_info(kind)->name, mech_info(spec.kind)->name);
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
        return fp_fail(err, FP_ENOMEM, "out of memory creating defense %s", mech_info(kind)->name);
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
        return fp_fail(err, FP_ENOMEM, "out of memory creating defense %s", mech_info(kind)->name);
    }
    if (t->n_layers > 0)
        memcpy(d->layers, t->layers, sizeof(ParamLayer) * (size_t)t->n_layers);
    for (int l = 0; l < t->n_layers; l++)
        if (t->layers[l].trainable) {
            d->d += t->layers[l].count;
            d->n_units++;
        }
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
    for (int l = 0; l < d->n_layers; l++) {
        const ParamLayer *ly = &d->layers[l];
        if (!ly->trainable || ly->count == 0)
            continue;
        Mech m;
        FP_TRY(mech_defense_layer_mech(d, l, round, &m, err));
        mech_perturb(&m, upload + ly->offset, ly->count, &round->rng, ly->offset);
    }
    return FP_OK;
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
                           .epsilon_total_sound = (double)d->d * rounds * eps,
                           .delta = 0,
                           .sound_notion = "epsilon-LDP of the whole upload: sequential composition over its d "
                                           "clipped scalars and the rounds (a client in every round)",
                           .sigma = -1};
    switch (m->spec.kind) {
    case MECH_SPM:
        rec->nominal_notion = "epsilon-LDP per scalar per round on the sign only (the paper's claim); total = "
                              "rounds x epsilon per scalar";
        rec->epsilon_total_sound = INFINITY;
        rec->sound_notion = "none for the values: SPM reveals |w| within a factor C and outputs 0 for 0; only the "
                            "signs are protected (d x rounds x epsilon for all of them)";
        break;
    case MECH_LAPLACE: rec->sigma = m->sigma; break;
    case MECH_GAUSSIAN: {
        rec->nominal_notion = "(epsilon, delta)-LDP per scalar per round; total = rounds x epsilon per scalar";
        rec->sigma = m->sigma;
        rec->delta = m->spec.delta;
        rec->sound_notion = "Gaussian mechanism on the whole upload (L2 sensitivity (hi-lo) sqrt(d)), composed "
                            "exactly over the rounds (Dong, Roth, Su 2022), at delta";
        if (rounds_done <= 0 || d->d == 0) {
            rec->epsilon_total_sound = 0;
            break;
        }
        double sens = (m->spec.hi - m->spec.lo) * sqrt((double)d->d * rounds);
        double s = m->sigma / sens, e = INFINITY;
        if (gaussian_exact_epsilon(&s, 1, m->spec.delta, &e, NULL) != FP_OK)
            e = INFINITY;
        rec->epsilon_total_sound = e;
        break;
    }
    default: break;
    }
}

void mech_defense_describe(const void *state, cJSON *out) {
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
    } else if (mech_info(m->spec.kind)->range != MECH_RANGE_NONE) {
        cJSON *r = cJSON_AddArrayToObject(out, "range");
        cJSON_AddItemToArray(r, cJSON_CreateNumber(m->spec.lo));
        cJSON_AddItemToArray(r, cJSON_CreateNumber(m->spec.hi));
    }
    if (m->spec.kind == MECH_GAUSSIAN) {
        cJSON_AddNumberToObject(out, "delta", m->spec.delta);
        cJSON_AddNumberToObject(out, "sigma", m->sigma);
    }
    if (m->spec.kind == MECH_LAPLACE)
        cJSON_AddNumberToObject(out, "scale", m->sigma);
    if (m->spec.kind == MECH_SPM) {
        cJSON_AddNumberToObject(out, "C", m->big_c);
        cJSON_AddNumberToObject(out, "output_scale", m->k);
    }
    cJSON_AddNumberToObject(out, "perturbed_scalars", (double)d->d);
    cJSON_AddNumberToObject(out, "units", d->n_units);
}

void mech_defense_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    const MechDefense *d = state;
    const MechInfo *info = mech_info(d->mech.spec.kind);
    *out = upload_params_none();
    out->noise = info->name;
    out->epsilon = d->mech.spec.eps;
    int ranged = info->range != MECH_RANGE_NONE;
    if (ranged) {
        out->clip_norm = "range";
        out->clip = 0;
    }
    for (int l = 0; l < d->n_layers; l++) {
        const ParamLayer *ly = &d->layers[l];
        Mech m;
        if (!ly->trainable || ly->count == 0 || mech_defense_layer_mech(d, l, round, &m, NULL) != FP_OK)
            continue;
        double var;
        if (m.spec.kind == MECH_LAPLACE || m.spec.kind == MECH_GAUSSIAN)
            var = m.sigma * m.sigma;
        else if (!ranged)
            var = mech_variance(&m, 1.0);
        else
            var = fmax(mech_variance(&m, m.spec.lo), fmax(mech_variance(&m, m.c), mech_variance(&m, m.spec.hi)));
        double scale = m.spec.kind == MECH_LAPLACE || m.spec.kind == MECH_GAUSSIAN ? m.sigma : sqrt(var);
        out->noise_scale = fmax(out->noise_scale, scale);
        if (ranged)
            out->clip = fmax(out->clip, m.r);
    }
}
