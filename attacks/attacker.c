// Attacker variants, recovery figures and applicability (see attacks/attacker.h).
#include "attacks/attacker.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/json_number.h"
#include "core/jsonv.h"

static const char *const distance_names[] = {"l2", "cosine", NULL};

// The default adaptive set (attacks/attacker.h).
static void default_variants(const InversionConfig *base, Attacker *a) {
    a->n = 3;
    a->v[0] = (AttackerVariant){.inv = *base};
    snprintf(a->v[0].name, sizeof a->v[0].name, "dlg-l2");
    a->v[0].inv.distance = INV_DISTANCE_L2;
    a->v[0].inv.tv = 0;
    a->v[0].inv.restarts = 1;
    a->v[1] = a->v[0];
    snprintf(a->v[1].name, sizeof a->v[1].name, "cosine-tv");
    a->v[1].inv.distance = INV_DISTANCE_COSINE;
    a->v[1].inv.tv = ATTACKER_COSINE_TV;
    a->v[2] = a->v[0];
    snprintf(a->v[2].name, sizeof a->v[2].name, "l2-restarts");
    a->v[2].inv.restarts = ATTACKER_EXTRA_STARTS;
}

// The analytic variant (attacks/inversion.h, inversion_analytic_run): no starts drawn.
static void analytic_variant(const InversionConfig *base, AttackerVariant *v) {
    *v = (AttackerVariant){.inv = *base};
    snprintf(v->name, sizeof v->name, "analytic");
    v->inv.optimizer = INV_OPTIMIZER_ANALYTIC;
    v->inv.restarts = 1;
    v->inv.tv = 0;
}

// The default set over base, and the analytic variant after it where it applies.
static void default_set(const InversionConfig *base, AttackerSet set, int analytic, Attacker *a) {
    (set ? set : default_variants)(base, a);
    if (!set && analytic && a->n < ATTACKER_MAX_VARIANTS)
        analytic_variant(base, &a->v[a->n++]);
}

static void number_starts(Attacker *a) {
    uint32_t first = 0;
    for (int k = 0; k < a->n; k++) {
        a->v[k].first_restart = first;
        first += (uint32_t)a->v[k].inv.restarts;
    }
}

long long attacker_variant_steps(const AttackerVariant *v) {
    return v->inv.optimizer == INV_OPTIMIZER_ANALYTIC ? 0 : (long long)v->inv.steps * v->inv.restarts;
}

static const char *const method_names[] = {"gradient-matching", "analytic", NULL};

static FpStatus parse_variant(const cJSON *vj, const char *path, const InversionConfig *base, int analytic,
                              AttackerVariant *v, int k, FpError *err) {
    if (!cJSON_IsObject(vj))
        return fp_fail(err, FP_EPARAM, "%s: must be an object", path);
    static const char *const keys[] = {"name", "method", "distance", "tv", "restarts", "steps", NULL};
    FP_TRY(jv_keys(vj, path, keys, err));
    int method;
    FP_TRY(jv_choice(vj, path, "method", method_names, 0, &method, err));
    if (method == 1) {
        static const char *const analytic_keys[] = {"name", "method", NULL};
        char p[300];
        if (!analytic)
            return fp_fail(err, FP_EPARAM, "%s: the analytic recovery needs a model whose first layer is dense with "
                           "a bias on the input (mlp, logreg)", jv_path(p, sizeof p, path, "method"));
        FP_TRY(jv_keys(vj, path, analytic_keys, err));
        analytic_variant(base, v);
    } else {
        v->inv = *base;
        v->inv.restarts = 1;
        v->inv.tv = 0;
    }
    const char *name;
    char dflt[32];
    snprintf(dflt, sizeof dflt, "variant %d", k);
    FP_TRY(jv_string(vj, path, "name", JV_OPTIONAL, dflt, &name, err));
    if (!name[0] || strlen(name) >= sizeof v->name)
        return fp_fail(err, FP_EPARAM, "%s.name: 1 to %zu characters", path, sizeof v->name - 1);
    snprintf(v->name, sizeof v->name, "%s", name);
    if (method == 1)
        return FP_OK;
    int choice;
    FP_TRY(jv_choice(vj, path, "distance", distance_names, INV_DISTANCE_L2, &choice, err));
    v->inv.distance = (InvDistance)choice;
    FP_TRY(jv_number(vj, path, "tv", JV_OPTIONAL, 0.0, 0, 0, 1e6, 0, &v->inv.tv, err));
    long long n;
    FP_TRY(jv_int(vj, path, "restarts", JV_OPTIONAL, 1, 1, 1000, &n, err));
    v->inv.restarts = (int)n;
    FP_TRY(jv_int(vj, path, "steps", JV_OPTIONAL, base->steps, 1, 1000000, &n, err));
    v->inv.steps = (int)n;
    return FP_OK;
}

FpStatus attacker_parse(const cJSON *j, const char *path, const InversionConfig *base, int explicit, int takes_adaptive,
                        AttackerSet set, int analytic, Attacker *a, FpError *err) {
    memset(a, 0, sizeof *a);
    char p[256];
    static const char *const kinds[] = {"single", "adaptive", NULL};
    FP_TRY(jv_choice(j, path, "attacker", kinds, takes_adaptive, &a->adaptive, err));
    FP_TRY(jv_bool(j, path, "reference", 1, &a->reference, err));
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(j, "variants");
    if (vs && !a->adaptive)
        return fp_fail(err, FP_EPARAM, "%s: variants are the adaptive attacker's (set \"attacker\": \"adaptive\")",
                       jv_path(p, sizeof p, path, "variants"));
    if (a->adaptive && explicit)
        return fp_fail(err, FP_EPARAM, "%s: with \"attacker\": \"adaptive\"%s, distance, tv and restarts are set per "
                       "variant (\"variants\"); \"attacker\": \"single\" runs one configuration of them",
                       jv_path(p, sizeof p, path, "attacker"),
                       cJSON_GetObjectItemCaseSensitive(j, "attacker") ? "" : " (the default)");
    if (!a->adaptive) {
        a->n = 1;
        a->v[0] = (AttackerVariant){.inv = *base};
        snprintf(a->v[0].name, sizeof a->v[0].name, "%s",
                 base->distance == INV_DISTANCE_COSINE ? (base->tv > 0 ? "cosine-tv" : "cosine")
                                                       : (base->tv > 0 ? "l2-tv" : "dlg-l2"));
    } else if (!vs)
        default_set(base, set, analytic, a);
    else {
        const char *vp = jv_path(p, sizeof p, path, "variants");
        if (!cJSON_IsArray(vs) || cJSON_GetArraySize(vs) < 1 || cJSON_GetArraySize(vs) > ATTACKER_MAX_VARIANTS)
            return fp_fail(err, FP_EPARAM, "%s: must be a list of 1 to %d variant objects", vp, ATTACKER_MAX_VARIANTS);
        a->n = cJSON_GetArraySize(vs);
        for (int k = 0; k < a->n; k++) {
            char ep[300];
            snprintf(ep, sizeof ep, "%s[%d]", vp, k);
            FP_TRY(parse_variant(cJSON_GetArrayItem(vs, k), ep, base, analytic, &a->v[k], k, err));
            for (int i = 0; i < k; i++)
                if (strcmp(a->v[i].name, a->v[k].name) == 0)
                    return fp_fail(err, FP_EPARAM, "%s.name: \"%s\" is the name of variant %d too", ep, a->v[k].name, i);
        }
    }
    number_starts(a);
    return FP_OK;
}

void attacker_default_adaptive(const InversionConfig *base, AttackerSet set, int analytic, Attacker *a) {
    memset(a, 0, sizeof *a);
    a->adaptive = 1;
    a->reference = 1;
    default_set(base, set, analytic, a);
    number_starts(a);
}

void attacker_describe(const Attacker *a, cJSON *obj) {
    cJSON_AddStringToObject(obj, "attacker", a->adaptive ? "adaptive" : "single");
    cJSON *vs = cJSON_AddArrayToObject(obj, "variants");
    for (int k = 0; k < a->n; k++) {
        const AttackerVariant *v = &a->v[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", v->name);
        int analytic = v->inv.optimizer == INV_OPTIMIZER_ANALYTIC;
        cJSON_AddStringToObject(e, "method", method_names[analytic]);
        if (analytic) {
            cJSON_AddItemToArray(vs, e);
            continue;
        }
        cJSON_AddStringToObject(e, "distance", distance_names[v->inv.distance]);
        cJSON_AddNumberToObject(e, "tv", v->inv.tv);
        cJSON_AddNumberToObject(e, "restarts", v->inv.restarts);
        cJSON_AddNumberToObject(e, "steps", v->inv.steps);
        cJSON_AddNumberToObject(e, "first_restart", v->first_restart);
        cJSON_AddItemToArray(vs, e);
    }
}

// -- recovery --------------------------------------------------------------------------------
void recovery_add(Recovery *r, double ssim, double psnr, double mse) {
    if (r->n == 0 || ssim > r->ssim_max || isnan(r->ssim_max))
        r->ssim_max = ssim;
    r->n++;
    r->recovered += ssim >= ATTACKER_RECOVERED_SSIM;
    r->ssim_sum += ssim;
    r->psnr_sum += psnr;
    r->mse_sum += mse;
}

void recovery_json(const Recovery *r, cJSON *obj) {
    double n = r->n > 0 ? r->n : NAN;
    cJSON_AddNumberToObject(obj, "recovered_ssim", ATTACKER_RECOVERED_SSIM);
    cJSON_AddNumberToObject(obj, "images_recovered", r->recovered);
    jnum_add(obj, "recovered_fraction", r->recovered / n);
    jnum_add(obj, "ssim_mean", r->ssim_sum / n);
    jnum_add(obj, "ssim_max", r->n > 0 ? r->ssim_max : NAN);
    jnum_add(obj, "psnr_mean", r->psnr_sum / n);
    jnum_add(obj, "mse_mean", r->mse_sum / n);
}

// -- applicability ---------------------------------------------------------------------------
void applicability_from(Applicability *a, const char *source, const Recovery *ref) {
    memset(a, 0, sizeof *a);
    a->decided = 1;
    a->applicable = ref->recovered > 0;
    a->ref = *ref;
    snprintf(a->source, sizeof a->source, "%s", source);
}

// A reference result's own decision by a stronger attacker (its "applicability" with
// "attacker": "adaptive" after its single attacker recovered nothing): 1 and a filled
// a when it says the attack applies.
static int escalated_from_result(Applicability *a, const char *source, const cJSON *res) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(res, "applicability");
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(j, "attacker");
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(j, "reference_images_recovered");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "reference_images");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "reference_ssim_mean");
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "applicable")) || !cJSON_IsString(by) ||
        strcmp(by->valuestring, "adaptive") != 0 || !cJSON_IsNumber(rec) || !cJSON_IsNumber(n) ||
        rec->valuedouble < 1 || rec->valuedouble > n->valuedouble || n->valuedouble > 1e9)
        return 0;
    Recovery r = {.n = (int)n->valuedouble, .recovered = (int)rec->valuedouble};
    r.ssim_sum = cJSON_IsNumber(s) ? s->valuedouble * r.n : NAN;
    applicability_from(a, source, &r);
    a->by_adaptive = 1;
    return 1;
}

void applicability_from_result(Applicability *a, const char *source, const cJSON *entry) {
    memset(a, 0, sizeof *a);
    snprintf(a->source, sizeof a->source, "%s", source);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(entry, "status");
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(entry, "result");
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(res, "images_recovered");
    const cJSON *thr = cJSON_GetObjectItemCaseSensitive(res, "recovered_ssim");
    const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(res, "images");
    if (!entry) {
        snprintf(a->reason, sizeof a->reason, "%s has no result for this attack", source);
        return;
    }
    if (!cJSON_IsString(st) || strcmp(st->valuestring, "done") != 0) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(entry, "message");
        snprintf(a->reason, sizeof a->reason, "the attack is %s in %s%s%.120s%s",
                 cJSON_IsString(st) ? st->valuestring : "missing", source, cJSON_IsString(msg) ? " (" : "",
                 cJSON_IsString(msg) ? msg->valuestring : "", cJSON_IsString(msg) ? ")" : "");
        return;
    }
    if (!cJSON_IsNumber(rec) || !cJSON_IsNumber(thr) || thr->valuedouble != ATTACKER_RECOVERED_SSIM ||
        !cJSON_IsArray(imgs)) {
        snprintf(a->reason, sizeof a->reason, "the result in %s does not count recovered images at SSIM >= %g", source,
                 ATTACKER_RECOVERED_SSIM);
        return;
    }
    Recovery r = {0};
    const cJSON *e;
    cJSON_ArrayForEach(e, imgs) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "ssim"), *p = cJSON_GetObjectItemCaseSensitive(e, "psnr"),
                    *m = cJSON_GetObjectItemCaseSensitive(e, "mse");
        double ps = cJSON_IsNumber(p) ? p->valuedouble : cJSON_IsString(p) ? INFINITY : NAN;
        recovery_add(&r, cJSON_IsNumber(s) ? s->valuedouble : NAN, ps, cJSON_IsNumber(m) ? m->valuedouble : NAN);
    }
    if (r.recovered != (int)rec->valuedouble) {
        snprintf(a->reason, sizeof a->reason, "the result in %s is inconsistent (%d images at SSIM >= %g, %g stated)",
                 source, r.recovered, ATTACKER_RECOVERED_SSIM, rec->valuedouble);
        return;
    }
    if (r.recovered == 0 && escalated_from_result(a, source, res))
        return;
    applicability_from(a, source, &r);
    // Decided by the adaptive attacker: the reference ran it, or its own decision did.
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(res, "attacker");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "applicability"),
                                                        "attacker");
    a->by_adaptive = (cJSON_IsString(by) && strcmp(by->valuestring, "adaptive") == 0) ||
                     (cJSON_IsString(dec) && strcmp(dec->valuestring, "adaptive") == 0);
}

void applicability_json(const Applicability *a, cJSON *obj) {
    if (a->decided)
        cJSON_AddBoolToObject(obj, "applicable", a->applicable);
    else
        cJSON_AddNullToObject(obj, "applicable");
    cJSON *j = cJSON_AddObjectToObject(obj, "applicability");
    char rule[200];
    snprintf(rule, sizeof rule,
             "applicable when the same attack against the federation without any defense recovers at least one "
             "image (SSIM >= %g); not applicable only when the adaptive attacker recovers none either",
             ATTACKER_RECOVERED_SSIM);
    cJSON_AddStringToObject(j, "rule", rule);
    cJSON_AddStringToObject(j, "reference", a->source);
    if (a->decided)
        cJSON_AddStringToObject(j, "attacker", a->by_adaptive ? "adaptive" : "single");
    if (!a->decided) {
        cJSON_AddStringToObject(j, "reason", a->reason);
        return;
    }
    cJSON_AddNumberToObject(j, "reference_images_recovered", a->ref.recovered);
    cJSON_AddNumberToObject(j, "reference_images", a->ref.n);
    jnum_add(j, "reference_recovered_fraction", a->ref.n ? (double)a->ref.recovered / a->ref.n : NAN);
    jnum_add(j, "reference_ssim_mean", a->ref.n ? a->ref.ssim_sum / a->ref.n : NAN);
    if (!a->applicable)
        cJSON_AddStringToObject(j, "verdict", "not applicable: the attack recovers nothing without any defense, so "
                                              "its figures under a defense are no evidence of protection");
}
