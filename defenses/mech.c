// The mechanism table (defenses/mech.h): names, variants, input ranges, parameter
// parsing, and the dispatch to the families in defenses/mech_*.c. Also the generic
// output-law arithmetic (moments and interval probabilities of a mixture).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/mech_internal.h"

static const MechInfo infos[] = {
    {MECH_SPM, "spm", "SPM (Chen & Zheng 2024) on the sign and magnitude of each scalar", "corrected,paper,pnpm",
     MECH_RANGE_NONE, 0},
    {MECH_DUCHI, "duchi", "Duchi et al. one-dimensional mechanism, output ±(e^eps+1)/(e^eps-1)", NULL,
     MECH_RANGE_NATIVE, 0},
    {MECH_PM, "pm", "Piecewise Mechanism (Wang et al. ICDE 2019)", NULL, MECH_RANGE_NATIVE, 0},
    {MECH_LDPFL, "ldp-fl", "LDP-FL (Sun et al. IJCAI 2021): c ± r(e^eps+1)/(e^eps-1) per scalar", NULL,
     MECH_RANGE_REQUIRED, 0},
    {MECH_LAPLACE, "laplace", "Laplace noise per coordinate, scale (hi-lo)/eps", NULL, MECH_RANGE_REQUIRED, 0},
    {MECH_GAUSSIAN, "gaussian", "Gaussian noise per coordinate for (eps, delta), sensitivity hi-lo",
     "analytic,classic", MECH_RANGE_REQUIRED, 0},
    {MECH_HARMONY, "adaptive-harmony", "Adaptive-Harmony (Zhao et al. 2022): one sampled scalar per unit",
     "corrected,paper", MECH_RANGE_REQUIRED, 0},
    {MECH_RR, "rr", "randomised response on the sign (audit self-test; variant broken claims eps, uses 2 eps)",
     "standard,broken", MECH_RANGE_NONE, 1},
};
_Static_assert(sizeof infos / sizeof infos[0] == MECH_KIND_COUNT, "one MechInfo per MechKind");

static const char *const variant_names[MV_COUNT] = {"", "corrected", "paper", "pnpm", "analytic",
                                                    "classic", "standard", "broken"};

int mech_info_count(void) { return MECH_KIND_COUNT; }
const MechInfo *mech_info_at(int i) { return i >= 0 && i < MECH_KIND_COUNT ? &infos[i] : NULL; }
const MechInfo *mech_info(MechKind kind) { return &infos[kind]; }
const char *mech_variant_name(MechVariant v) { return v >= 0 && v < MV_COUNT ? variant_names[v] : ""; }

const MechInfo *mech_info_find(const char *name) {
    for (int i = 0; i < MECH_KIND_COUNT; i++)
        if (name && strcmp(infos[i].name, name) == 0)
            return &infos[i];
    return NULL;
}

static MechVariant variant_by_name(const char *s) {
    for (int v = 1; v < MV_COUNT; v++)
        if (strcmp(variant_names[v], s) == 0)
            return (MechVariant)v;
    return MV_NONE;
}

// 1 when name is one of the comma-separated variants.
static int variant_allowed(const MechInfo *info, const char *name) {
    if (!info->variants)
        return 0;
    size_t len = strlen(name);
    for (const char *p = info->variants; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && strncmp(p, name, l) == 0)
            return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

static MechVariant default_variant(const MechInfo *info) {
    if (!info->variants)
        return MV_NONE;
    char first[32];
    size_t l = strcspn(info->variants, ",");
    snprintf(first, sizeof first, "%.*s", (int)l, info->variants);
    return variant_by_name(first);
}

static int key_in(const char *key, const char *const *list) {
    for (int i = 0; list && list[i]; i++)
        if (strcmp(list[i], key) == 0)
            return 1;
    return 0;
}

FpStatus mech_spec_parse(const cJSON *obj, const char *path, int flags, const char *const *extra_keys,
                         MechSpec *out, FpError *err) {
    char p[256];
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path ? path : "");
    if (!cJSON_IsObject(obj))
        return fp_fail(err, FP_EPARAM, "%s: must be an object", path && path[0] ? path : "(top level)");
    const char *name = NULL;
    FP_TRY(jv_string(obj, path, "name", JV_REQUIRED, NULL, &name, err));
    const MechInfo *info = mech_info_find(name);
    if (!info || ((flags & MECH_PARSE_DEFENSE) && info->audit_only)) {
        char list[256] = "";
        for (int i = 0; i < MECH_KIND_COUNT; i++) {
            if ((flags & MECH_PARSE_DEFENSE) && infos[i].audit_only)
                continue;
            if (list[0])
                strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, infos[i].name, sizeof list - strlen(list) - 1);
        }
        return fp_fail(err, FP_EPARAM, "%s: unknown mechanism \"%.64s\" (expected one of: %s)",
                       jv_path(p, sizeof p, path, "name"), name, list);
    }
    out->kind = info->kind;
    int defense = (flags & MECH_PARSE_DEFENSE) != 0;

    // The keys this mechanism takes.
    const char *keys[16];
    int nk = 0;
    keys[nk++] = "name";
    keys[nk++] = "epsilon";
    if (info->variants)
        keys[nk++] = "variant";
    if (info->range != MECH_RANGE_NONE) {
        keys[nk++] = "clip";
        keys[nk++] = "range";
    }
    if (info->kind == MECH_GAUSSIAN)
        keys[nk++] = "delta";
    if (info->kind == MECH_HARMONY && !defense)
        keys[nk++] = "dim";
    if ((info->kind == MECH_HARMONY || info->kind == MECH_LDPFL) && defense)
        keys[nk++] = "min_radius";
    keys[nk] = NULL;
    for (const cJSON *it = obj->child; it; it = it->next) {
        if (key_in(it->string, keys) || key_in(it->string, extra_keys))
            continue;
        jv_path(p, sizeof p, path, it->string);
        if (strcmp(it->string, "variant") == 0)
            return fp_fail(err, FP_EPARAM, "%s: %s has no variants", p, info->name);
        if (strcmp(it->string, "clip") == 0 || strcmp(it->string, "range") == 0)
            return fp_fail(err, FP_EPARAM, "%s: %s takes no input range", p, info->name);
        return fp_fail(err, FP_EPARAM, "%s: unknown key", p);
    }

    // Variant.
    out->variant = default_variant(info);
    const char *vname = NULL;
    FP_TRY(jv_string(obj, path, "variant", JV_OPTIONAL, NULL, &vname, err));
    if (vname) {
        if (!variant_allowed(info, vname))
            return fp_fail(err, FP_EPARAM, "%s: unknown variant \"%.64s\" of %s (expected one of: %s)",
                           jv_path(p, sizeof p, path, "variant"), vname, info->name, info->variants);
        out->variant = variant_by_name(vname);
    }

    // Privacy parameters.
    FP_TRY(jv_number(obj, path, "epsilon", JV_REQUIRED, 0, defense ? 0 : MECH_EPS_MIN, defense, MECH_EPS_MAX, 0,
                     &out->eps, err));
    if (info->kind == MECH_GAUSSIAN)
        FP_TRY(jv_number(obj, path, "delta", JV_OPTIONAL, 1e-5, 0, 1, 1, 1, &out->delta, err));

    // Input range.
    if (info->range != MECH_RANGE_NONE) {
        const cJSON *clip = cJSON_GetObjectItemCaseSensitive(obj, "clip");
        const cJSON *range = cJSON_GetObjectItemCaseSensitive(obj, "range");
        if (clip && range)
            return fp_fail(err, FP_EPARAM, "%s: give either \"clip\" or \"range\", not both",
                           jv_path(p, sizeof p, path, "range"));
        if (clip) {
            double c;
            FP_TRY(jv_number(obj, path, "clip", JV_REQUIRED, 0, 0, 1, 1e30, 0, &c, err));
            out->has_range = 1;
            out->lo = -c;
            out->hi = c;
        } else if (range && cJSON_IsString(range)) {
            int per_layer_ok = defense && (info->kind == MECH_LDPFL || info->kind == MECH_HARMONY);
            if (!per_layer_ok || strcmp(range->valuestring, "layer") != 0)
                return fp_fail(err, FP_EPARAM, "%s: must be [lo, hi]%s", jv_path(p, sizeof p, path, "range"),
                               per_layer_ok ? " or \"layer\"" : "");
            out->range_per_layer = 1;
        } else if (range) {
            double *a = NULL;
            int n = 0;
            FP_TRY(jv_number_array(obj, path, "range", JV_REQUIRED, 2, 2, &a, &n, err));
            out->lo = a[0];
            out->hi = a[1];
            free(a);
            if (!(out->hi > out->lo) || fabs(out->lo) > 1e30 || fabs(out->hi) > 1e30)
                return fp_fail(err, FP_EPARAM, "%s: needs lo < hi, got [%g, %g]", jv_path(p, sizeof p, path, "range"),
                               out->lo, out->hi);
            out->has_range = 1;
        } else if (info->range == MECH_RANGE_NATIVE && !defense) {
            out->has_range = 1;
            out->lo = -1;
            out->hi = 1;
        } else {
            return fp_fail(err, FP_EPARAM,
                           "%s: %s needs an input range: \"clip\": C (values clipped into [-C, C]) or \"range\": "
                           "[lo, hi]%s",
                           jv_path(p, sizeof p, path, "range"), info->name,
                           defense && (info->kind == MECH_LDPFL || info->kind == MECH_HARMONY)
                               ? " or \"range\": \"layer\""
                               : "");
        }
        if (out->range_per_layer)
            FP_TRY(jv_number(obj, path, "min_radius", JV_OPTIONAL, 1e-3, 0, 1, 1e30, 0, &out->min_radius, err));
        else if (cJSON_GetObjectItemCaseSensitive(obj, "min_radius"))
            return fp_fail(err, FP_EPARAM, "%s: only with \"range\": \"layer\"",
                           jv_path(p, sizeof p, path, "min_radius"));
    }
    if (info->kind == MECH_HARMONY) {
        long long d = 10;
        if (!defense)
            FP_TRY(jv_int(obj, path, "dim", JV_OPTIONAL, 10, 1, 1000000, &d, err));
        out->dim = (long)d;
    }
    return FP_OK;
}

void mech_set_range(Mech *m, double lo, double hi) {
    m->spec.lo = lo;
    m->spec.hi = hi;
    m->c = 0.5 * (lo + hi);
    m->r = 0.5 * (hi - lo);
    m->f_lo = (float)lo;
    m->f_hi = (float)hi;
    m->f_c = (float)m->c;
    m->f_r = (float)m->r;
    switch (m->spec.kind) {
    case MECH_DUCHI:
    case MECH_LDPFL:
    case MECH_RR: twopoint_setup(m); break;
    case MECH_PM: pm_setup(m); break;
    case MECH_LAPLACE:
    case MECH_GAUSSIAN: (void)noise_setup(m, NULL); break;
    case MECH_HARMONY: harmony_setup(m); break;
    default: break;
    }
}

FpStatus mech_init(Mech *m, const MechSpec *spec, FpError *err) {
    memset(m, 0, sizeof *m);
    m->spec = *spec;
    if (!(spec->eps > 0) || spec->eps > MECH_EPS_MAX)
        return fp_fail(err, FP_EPARAM, "%s.epsilon: must be in (0, %g], got %g", spec->path, MECH_EPS_MAX, spec->eps);
    m->u = exp(spec->eps);
    double lo = spec->has_range ? spec->lo : -1, hi = spec->has_range ? spec->hi : 1;
    m->c = 0.5 * (lo + hi);
    m->r = 0.5 * (hi - lo);
    m->f_lo = (float)lo;
    m->f_hi = (float)hi;
    m->f_c = (float)m->c;
    m->f_r = (float)m->r;
    m->spec.lo = lo;
    m->spec.hi = hi;
    switch (spec->kind) {
    case MECH_SPM: spm_setup(m); break;
    case MECH_DUCHI:
    case MECH_LDPFL:
    case MECH_RR: twopoint_setup(m); break;
    case MECH_PM: pm_setup(m); break;
    case MECH_LAPLACE:
    case MECH_GAUSSIAN: FP_TRY(noise_setup(m, err)); break;
    case MECH_HARMONY:
        if (spec->dim < 1)
            m->spec.dim = 1;
        harmony_setup(m);
        break;
    default: return fp_fail(err, FP_EPARAM, "%s.name: unknown mechanism", spec->path);
    }
    return FP_OK;
}

float mech_perturb_one(const Mech *m, float x, const uint32_t w[4], int j) {
    switch (m->spec.kind) {
    case MECH_SPM: return spm_one(m, x, w[j]);
    case MECH_DUCHI:
    case MECH_LDPFL:
    case MECH_RR: return twopoint_one(m, x, w[j]);
    case MECH_PM: return pm_one(m, x, w[j]);
    case MECH_LAPLACE: return laplace_one(m, x, w[j]);
    case MECH_GAUSSIAN: return gaussian_one(m, x, w, j);
    case MECH_HARMONY: return harmony_one(m, x, w[j]);
    default: return x;
    }
}

void mech_perturb_ref(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    uint32_t w[4];
    for (size_t i = 0; i < n; i++) {
        rng_block(s, (first + i) >> 2, w);
        x[i] = mech_perturb_one(m, x[i], w, (int)((first + i) & 3u));
    }
}

void mech_perturb(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    if (s->secure) { // secure streams (core/rng_secure.h) draw through rng_block: no Philox fast path
        mech_perturb_ref(m, x, n, s, first);
        return;
    }
    switch (m->spec.kind) {
    case MECH_SPM: spm_perturb_fast(m, x, n, s, first); break;
    case MECH_DUCHI:
    case MECH_LDPFL:
    case MECH_RR: twopoint_perturb_fast(m, x, n, s, first); break;
    case MECH_PM: pm_perturb_fast(m, x, n, s, first); break;
    case MECH_LAPLACE:
    case MECH_GAUSSIAN: noise_perturb_fast(m, x, n, s, first); break;
    default: mech_perturb_ref(m, x, n, s, first); break;   // adaptive-harmony's scalar law: audit only
    }
}

double mech_clip(const Mech *m, double x) {
    if (mech_info(m->spec.kind)->range == MECH_RANGE_NONE)
        return x;
    return x < m->spec.lo ? m->spec.lo : x > m->spec.hi ? m->spec.hi : x;
}

double mech_mean(const Mech *m, double x) {
    switch (m->spec.kind) {
    case MECH_SPM: return spm_mean(m, x);
    case MECH_DUCHI:
    case MECH_LDPFL:
    case MECH_RR: return twopoint_mean(m, x);
    case MECH_PM: return pm_mean(m, x);
    case MECH_LAPLACE:
    case MECH_GAUSSIAN: return noise_mean(m, x);
    case MECH_HARMONY: return harmony_mean(m, x);
    default: return NAN;
    }
}

double mech_variance(const Mech *m, double x) {
    switch (m->spec.kind) {
    case MECH_SPM: return spm_variance(m, x);
    case MECH_DUCHI:
    case MECH_LDPFL:
    case MECH_RR: return twopoint_variance(m, x);
    case MECH_PM: return pm_variance(m, x);
    case MECH_LAPLACE:
    case MECH_GAUSSIAN: return noise_variance(m, x);
    case MECH_HARMONY: return harmony_variance(m, x);
    default: return NAN;
    }
}

double mech_variance_claimed(const Mech *m, double x) {
    return m->spec.kind == MECH_SPM ? spm_variance_claimed(m, x) : NAN;
}

void mech_law(const Mech *m, double x, MechLaw *law) {
    memset(law, 0, sizeof *law);
    switch (m->spec.kind) {
    case MECH_SPM: spm_law(m, x, law); break;
    case MECH_DUCHI:
    case MECH_LDPFL:
    case MECH_RR: twopoint_law(m, x, law); break;
    case MECH_PM: pm_law(m, x, law); break;
    case MECH_LAPLACE:
    case MECH_GAUSSIAN: noise_law(m, x, law); break;
    case MECH_HARMONY: harmony_law(m, x, law); break;
    default: break;
    }
}

void mech_default_inputs(const Mech *m, double *x0, double *x1) {
    if (mech_info(m->spec.kind)->range == MECH_RANGE_NONE) {
        *x0 = -1;
        *x1 = 1;
    } else {
        *x0 = m->spec.lo;
        *x1 = m->spec.hi;
    }
}

// ---- output laws -----------------------------------------------------------------

// E[(Y - s)^k] of one piece, k in 1..4.
static double piece_moment(const LawPiece *p, double s, int k) {
    switch (p->kind) {
    case LAW_ATOM: return pow(p->a - s, k);
    case LAW_UNIFORM: {
        double a = p->a - s, b = p->b - s;
        if (b == a)
            return pow(a, k);
        return (pow(b, k + 1) - pow(a, k + 1)) / ((k + 1) * (b - a));
    }
    case LAW_LAPLACE:
    case LAW_NORMAL: {
        // Y - s = d + Z with Z symmetric: E Z^2 = v, E Z^4 = kurt·v^2 (Laplace 2b², 24b⁴;
        // normal σ², 3σ⁴), odd moments 0.
        double d = p->a - s;
        double v = p->kind == LAW_LAPLACE ? 2 * p->b * p->b : p->b * p->b;
        double z4 = p->kind == LAW_LAPLACE ? 6 * v * v : 3 * v * v;
        switch (k) {
        case 1: return d;
        case 2: return d * d + v;
        case 3: return d * d * d + 3 * d * v;
        default: return d * d * d * d + 6 * d * d * v + z4;
        }
    }
    }
    return NAN;
}

double law_mean(const MechLaw *law) {
    double m = 0;
    for (int i = 0; i < law->n; i++)
        m += law->p[i].weight * piece_moment(&law->p[i], 0, 1);
    return m;
}

double law_central_moment(const MechLaw *law, int k) {
    double mu = law_mean(law), m = 0;
    for (int i = 0; i < law->n; i++)
        m += law->p[i].weight * piece_moment(&law->p[i], mu, k);
    return m;
}

static double piece_cdf(const LawPiece *p, double y) {   // P[Y < y]
    switch (p->kind) {
    case LAW_ATOM: return p->a < y ? 1 : 0;
    case LAW_UNIFORM:
        if (y <= p->a)
            return 0;
        if (y >= p->b)
            return 1;
        return (y - p->a) / (p->b - p->a);
    case LAW_LAPLACE: {
        if (isinf(y))
            return y > 0 ? 1 : 0;
        double z = (y - p->a) / p->b;
        return z < 0 ? 0.5 * exp(z) : 1 - 0.5 * exp(-z);
    }
    case LAW_NORMAL:
        if (isinf(y))
            return y > 0 ? 1 : 0;
        return 0.5 * erfc(-(y - p->a) / (p->b * sqrt(2.0)));
    }
    return NAN;
}

double law_prob(const MechLaw *law, double lo, double hi) {
    double pr = 0;
    for (int i = 0; i < law->n; i++)
        pr += law->p[i].weight * (piece_cdf(&law->p[i], hi) - piece_cdf(&law->p[i], lo));
    return pr;
}
