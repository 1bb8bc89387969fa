// The mechanism table (defenses/dp/mech.h): the list of mechanisms, parameter parsing, and
// the calls through each mechanism's sampler table (defenses/mech_*.c). The output-law
// arithmetic is in defenses/dp/mech_law.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "core/suggest.h"
#include "defenses/dp/mech_internal.h"

// The mechanisms, in the order `fedpriv list` and the messages show them. A new one is a
// file defenses/mech_<name>.c defining its MechOps, and a line here.
static const MechOps *const mechs[] = {
    &mech_spm, &mech_duchi, &mech_pm, &mech_ldp_fl, &mech_laplace, &mech_gaussian, &mech_harmony, &mech_rr,
};
#define MECH_COUNT ((int)(sizeof mechs / sizeof mechs[0]))

static const char *const variant_names[MV_COUNT] = {"", "corrected", "paper", "pnpm", "analytic",
                                                    "classic", "standard", "broken"};

int mech_count(void) { return MECH_COUNT; }
const MechOps *mech_at(int i) { return i >= 0 && i < MECH_COUNT ? mechs[i] : NULL; }
const char *mech_variant_name(MechVariant v) { return v >= 0 && v < MV_COUNT ? variant_names[v] : ""; }
const char *mech_sampler_name(MechSamplerKind k) { return k == MECH_SAMPLER_FLOAT ? "float" : "safe"; }

const MechOps *mech_find(const char *name) {
    for (int i = 0; i < MECH_COUNT; i++)
        if (name && strcmp(mechs[i]->name, name) == 0)
            return mechs[i];
    return NULL;
}

static MechVariant variant_by_name(const char *s) {
    for (int v = 1; v < MV_COUNT; v++)
        if (strcmp(variant_names[v], s) == 0)
            return (MechVariant)v;
    return MV_NONE;
}

// 1 when name is one of the comma-separated variants.
static int variant_allowed(const MechOps *info, const char *name) {
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

static MechVariant default_variant(const MechOps *info) {
    if (!info->variants)
        return MV_NONE;
    char first[32];
    size_t l = strcspn(info->variants, ",");
    snprintf(first, sizeof first, "%.*s", (int)l, info->variants);
    return variant_by_name(first);
}

// The keys a mechanism's object takes (keys: at least 16 slots, NULL-terminated).
static void spec_keys(const MechOps *info, int defense, const char **keys) {
    int nk = 0;
    keys[nk++] = "name";
    keys[nk++] = "epsilon";
    keys[nk++] = "sampler";
    if (info->variants)
        keys[nk++] = "variant";
    if (info->range != MECH_RANGE_NONE) {
        keys[nk++] = "clip";
        keys[nk++] = "range";
    }
    if (info->takes_delta)
        keys[nk++] = "delta";
    if (info->takes_dim && !defense)
        keys[nk++] = "dim";
    if (info->layer_range && defense)
        keys[nk++] = "min_radius";
    keys[nk] = NULL;
}

int mech_spec_takes(const MechOps *info, int flags, const char *const *extra_keys, const char *key) {
    const char *keys[16];
    spec_keys(info, (flags & MECH_PARSE_DEFENSE) != 0, keys);
    return jv_key_in(key, keys) || jv_key_in(key, extra_keys);
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
    const MechOps *info = mech_find(name);
    if (!info || ((flags & MECH_PARSE_DEFENSE) && info->audit_only)) {
        char list[256] = "";
        for (int i = 0; i < MECH_COUNT; i++) {
            if ((flags & MECH_PARSE_DEFENSE) && mechs[i]->audit_only)
                continue;
            if (list[0])
                strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, mechs[i]->name, sizeof list - strlen(list) - 1);
        }
        char hint[FP_SUGGEST_MAX_LEN + 32];
        FpSuggest s;
        fp_suggest_begin(&s, name);
        for (int i = 0; i < MECH_COUNT; i++)
            if (!((flags & MECH_PARSE_DEFENSE) && mechs[i]->audit_only))
                fp_suggest_add(&s, mechs[i]->name);
        return fp_fail(err, FP_EPARAM, "%s: unknown mechanism \"%.64s\" (%sexpected one of: %s)",
                       jv_path(p, sizeof p, path, "name"), name, fp_did_you_mean(&s, "", " ", hint, sizeof hint), list);
    }
    out->ops = info;
    int defense = (flags & MECH_PARSE_DEFENSE) != 0;

    for (const cJSON *it = obj->child; it; it = it->next) {
        if (mech_spec_takes(info, flags, extra_keys, it->string))
            continue;
        jv_path(p, sizeof p, path, it->string);
        if (strcmp(it->string, "variant") == 0)
            return fp_fail(err, FP_EPARAM, "%s: %s has no variants", p, info->name);
        if (strcmp(it->string, "clip") == 0 || strcmp(it->string, "range") == 0)
            return fp_fail(err, FP_EPARAM, "%s: %s takes no input range", p, info->name);
        const char *keys[16];
        char hint[FP_SUGGEST_MAX_LEN + 32];
        spec_keys(info, defense, keys);
        FpSuggest s;
        fp_suggest_begin(&s, it->string);
        fp_suggest_add_list(&s, keys);
        fp_suggest_add_list(&s, extra_keys);
        return fp_fail(err, FP_EPARAM, "%s: unknown key%s", p, fp_did_you_mean(&s, " (", ")", hint, sizeof hint));
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

    // Sampler.
    const char *sname = NULL;
    FP_TRY(jv_string(obj, path, "sampler", JV_OPTIONAL, NULL, &sname, err));
    out->sampler = MECH_SAMPLER_SAFE;
    if (sname && strcmp(sname, "float") == 0) {
        if (!info->fp)
            return fp_fail(err, FP_EPARAM,
                           "%s: %s has one sampler, \"safe\" (its outputs are fixed values chosen by exact "
                           "integer thresholds)",
                           jv_path(p, sizeof p, path, "sampler"), info->name);
        out->sampler = MECH_SAMPLER_FLOAT;
    } else if (sname && strcmp(sname, "safe") != 0) {
        return fp_fail(err, FP_EPARAM, "%s: unknown sampler \"%.64s\" (expected one of: safe%s)",
                       jv_path(p, sizeof p, path, "sampler"), sname, info->fp ? ", float" : "");
    }

    // Privacy parameters.
    FP_TRY(jv_number(obj, path, "epsilon", JV_REQUIRED, 0, defense ? 0 : MECH_EPS_MIN, defense, MECH_EPS_MAX, 0,
                     &out->eps, err));
    if (info->takes_delta)
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
            int per_layer_ok = defense && info->layer_range;
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
                           defense && info->layer_range ? " or \"range\": \"layer\""
                               : "");
        }
        if (out->range_per_layer)
            FP_TRY(jv_number(obj, path, "min_radius", JV_OPTIONAL, 1e-3, 0, 1, 1e30, 0, &out->min_radius, err));
        else if (cJSON_GetObjectItemCaseSensitive(obj, "min_radius"))
            return fp_fail(err, FP_EPARAM, "%s: only with \"range\": \"layer\"",
                           jv_path(p, sizeof p, path, "min_radius"));
    }
    if (info->takes_dim) {
        long long d = 10;
        if (!defense)
            FP_TRY(jv_int(obj, path, "dim", JV_OPTIONAL, 10, 1, 1000000, &d, err));
        out->dim = (long)d;
    }
    return FP_OK;
}

static void set_range(Mech *m, double lo, double hi) {
    m->spec.lo = lo;
    m->spec.hi = hi;
    m->c = 0.5 * (lo + hi);
    m->r = 0.5 * (hi - lo);
    m->f_lo = (float)lo;
    m->f_hi = (float)hi;
    m->f_c = (float)m->c;
    m->f_r = (float)m->r;
    if (m->sampler->set_range)
        m->sampler->set_range(m);
}

void mech_set_range(Mech *m, double lo, double hi) { set_range(m, lo, hi); }

FpStatus mech_init(Mech *m, const MechSpec *spec, FpError *err) {
    memset(m, 0, sizeof *m);
    m->spec = *spec;
    if (!spec->ops)
        return fp_fail(err, FP_EPARAM, "%s.name: unknown mechanism", spec->path);
    if (!(spec->eps > 0) || spec->eps > MECH_EPS_MAX)
        return fp_fail(err, FP_EPARAM, "%s.epsilon: must be in (0, %g], got %g", spec->path, MECH_EPS_MAX, spec->eps);
    m->sampler = spec->sampler == MECH_SAMPLER_FLOAT && spec->ops->fp ? spec->ops->fp : spec->ops->safe;
    m->u = exp(spec->eps);
    FP_TRY(m->sampler->setup(m, err));
    set_range(m, spec->has_range ? spec->lo : -1, spec->has_range ? spec->hi : 1);
    return FP_OK;
}

float mech_draw_one(const Mech *m, float x, const RngStream *s, uint64_t index) {
    const int epb = m->sampler->elements_per_block, shift = epb == 4 ? 2 : epb == 2 ? 1 : 0;
    uint32_t w[4];
    rng_block(s, index >> shift, w);
    return m->sampler->one(m, x, w, (int)(index & (uint64_t)(epb - 1)));
}

void mech_perturb_ref(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    for (size_t i = 0; i < n; i++)
        x[i] = mech_draw_one(m, x[i], s, first + i);
}

void mech_perturb(const Mech *m, float *x, size_t n, const RngStream *s, uint64_t first) {
    // Secure streams (core/rng_secure.h) draw through rng_block: no Philox fast path.
    if (s->secure || !m->sampler->perturb_fast)
        mech_perturb_ref(m, x, n, s, first);
    else
        m->sampler->perturb_fast(m, x, n, s, first);
}

double mech_clip(const Mech *m, double x) {
    if (m->spec.ops->range == MECH_RANGE_NONE)
        return x;
    return x < m->spec.lo ? m->spec.lo : x > m->spec.hi ? m->spec.hi : x;
}

float mech_input(const Mech *m, double x) {
    float xf = (float)x;
    return m->spec.ops->range == MECH_RANGE_NONE ? xf : mech_clipf(xf, m->f_lo, m->f_hi);
}

double mech_mean(const Mech *m, double x) { return m->sampler->mean(m, x); }
double mech_variance(const Mech *m, double x) { return m->sampler->variance(m, x); }

double mech_variance_claimed(const Mech *m, double x) {
    return m->spec.ops->variance_claimed ? m->spec.ops->variance_claimed(m, x) : NAN;
}

void mech_law(const Mech *m, double x, MechLaw *law) {
    memset(law, 0, sizeof *law);
    m->sampler->law(m, x, law);
}

int mech_possible(const Mech *m, double x, float y) { return m->sampler->possible(m, x, y); }

long long mech_support_check(const Mech *m, double x_from, double x_to, uint64_t first, long long n,
                             const RngStream *s, float *witness) {
    enum { CHUNK = 4096 };
    float buf[CHUNK];
    float xf = mech_input(m, x_from);
    long long bad = 0;
    for (long long done = 0; done < n; done += CHUNK) {
        size_t len = (size_t)(n - done < CHUNK ? n - done : CHUNK);
        for (size_t i = 0; i < len; i++)
            buf[i] = xf;
        mech_perturb(m, buf, len, s, first + (uint64_t)done);
        for (size_t i = 0; i < len; i++) {
            int p = mech_possible(m, x_to, buf[i]);
            if (p < 0)
                return -1;
            if (p == 0 && bad++ == 0 && witness)
                *witness = buf[i];
        }
    }
    return bad;
}

uint64_t mech_search_ge(const Mech *m, double x, uint64_t lo, uint64_t hi, float target,
                        float (*key)(const Mech *m, double x, uint64_t w)) {
    uint64_t a = lo, b = hi + 1;   // the answer is in [a, b]
    while (a < b) {
        uint64_t mid = a + (b - a) / 2;
        if (key(m, x, mid) >= target)
            b = mid;
        else
            a = mid + 1;
    }
    return a;
}

void mech_round_law(float v, int top, int bits, int *n_lo, int *n_hi, double *p_hi) {
    v = v < 0.0f ? 0.0f : v;
    int n0 = (int)v;
    n0 = n0 > top ? top : n0;
    float f = v - (float)n0;
    f = f < 0.0f ? 0.0f : f;
    *n_lo = n0;
    *n_hi = n0 + 1 > top ? top : n0 + 1;
    *p_hi = *n_hi == n0 ? 0 : ldexp((double)(uint32_t)(f * (float)(1u << bits)), -bits);
}

int mech_law_has_atom(const MechLaw *law, float y) {
    for (int i = 0; i < law->n; i++)
        if (law->p[i].kind == LAW_ATOM && law->p[i].weight > 0 && (float)law->p[i].a == y)
            return 1;
    return 0;
}

double mech_upload_epsilon(const Mech *m, double units, double rounds, double delta) {
    if (m->sampler->upload_epsilon)
        return m->sampler->upload_epsilon(m, units, rounds, delta);
    if (!m->sampler->exact || !(m->eps_proven <= m->spec.eps))
        return INFINITY;
    return units * rounds * m->spec.eps;   // eps_proven <= eps: the configured ε is proven
}

void mech_default_inputs(const Mech *m, double *x0, double *x1) {
    if (m->spec.ops->range == MECH_RANGE_NONE) {
        *x0 = -1;
        *x1 = 1;
    } else {
        *x0 = m->spec.lo;
        *x1 = m->spec.hi;
    }
}
