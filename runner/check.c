// Baseline bounds over a matrix run (see runner/check.h).
#include "runner/check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/defense.h"
#include "reports/results.h"

typedef struct Bound {
    int index;
    char name[320];            // how messages refer to it
    int is_audit;
    const char *select;        // defense or mechanism name, "*" = any
    const char *variant;       // NULL = any
    double eps_min, eps_max;   // NaN = unbounded
    const cJSON *params;       // NULL = any
    const char *attack;        // NULL = a cell-level metric
    const char *observer;      // only attack entries with this declared observer (NULL = every entry of `attack`)
    const char *metric;
    int has_max, has_min, max_is_epsilon;
    double at_most, at_least;
    int min_guarantee;         // the weakest guarantee a selected cell may have (-1 = any)
    long long min_cells;
} Bound;

static const char *const cell_metrics[] = {"model_accuracy", "model_loss", "epsilon_nominal", "epsilon_sound",
                                           "epsilon_conditional", "epsilon_upload", NULL};

// A cell's guarantee by strength: none < conditional < proven (-1: absent or unknown).
static int guarantee_rank(const char *g) {
    for (int k = GUARANTEE_NONE; k <= GUARANTEE_PROVEN; k++)
        if (g && strcmp(g, guarantee_name((Guarantee)k)) == 0)
            return k;
    return -1;
}

static void add_violation(CheckResult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_violation(CheckResult *r, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    fp_vformat(line, sizeof line, fmt, ap); // labels come from the baseline and the run: escaped
    va_end(ap);
    char **v = realloc(r->violations, sizeof(char *) * (size_t)(r->n_violations + 1));
    if (!v)
        return;
    r->violations = v;
    if ((v[r->n_violations] = strdup(line)))
        r->n_violations++;
}

static FpStatus opt_eps(const cJSON *b, const char *path, const char *key, double *out, FpError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, key);
    *out = NAN;
    if (!v)
        return FP_OK;
    char p[160];
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return fp_fail(err, FP_EPARAM, "%s: must be a number", jv_path(p, sizeof p, path, key));
    *out = v->valuedouble;
    return FP_OK;
}

static FpStatus parse_bound(const cJSON *b, int i, Bound *out, FpError *err) {
    char path[48], p[160];
    snprintf(path, sizeof path, "bounds[%d]", i);
    static const char *const keys[] = {"label", "defense", "audit", "variant", "epsilon_min", "epsilon_max", "params",
                                       "attack", "observer", "metric", "at_most", "at_least", "guarantee", "min_cells", NULL};
    FP_TRY(jv_keys(b, path, keys, err));
    memset(out, 0, sizeof *out);
    out->index = i;
    const char *label, *defense, *audit;
    FP_TRY(jv_string(b, path, "label", JV_OPTIONAL, NULL, &label, err));
    FP_TRY(jv_string(b, path, "defense", JV_OPTIONAL, NULL, &defense, err));
    FP_TRY(jv_string(b, path, "audit", JV_OPTIONAL, NULL, &audit, err));
    if (!defense == !audit)
        return fp_fail(err, FP_EPARAM, "%s: needs exactly one of \"defense\" (cell bounds) or \"audit\" (audit bounds)",
                       path);
    out->is_audit = audit != NULL;
    out->select = audit ? audit : defense;
    FP_TRY(jv_string(b, path, "variant", JV_OPTIONAL, NULL, &out->variant, err));
    FP_TRY(opt_eps(b, path, "epsilon_min", &out->eps_min, err));
    FP_TRY(opt_eps(b, path, "epsilon_max", &out->eps_max, err));
    if (out->eps_min > out->eps_max)
        return fp_fail(err, FP_EPARAM, "%s: epsilon_min %g > epsilon_max %g", path, out->eps_min, out->eps_max);
    FP_TRY(jv_object(b, path, "params", JV_OPTIONAL, &out->params, err));
    FP_TRY(jv_string(b, path, "attack", JV_OPTIONAL, NULL, &out->attack, err));
    if (out->is_audit && (out->attack || out->params))
        return fp_fail(err, FP_EPARAM, "%s: an audit bound takes no \"attack\" or \"params\"", path);
    static const char *const observers[] = {"server", "public", NULL};
    if (cJSON_GetObjectItemCaseSensitive(b, "observer")) {
        if (!out->attack)
            return fp_fail(err, FP_EPARAM, "%s: \"observer\" selects an attack's entries (needs \"attack\")",
                           jv_path(p, sizeof p, path, "observer"));
        int o;
        FP_TRY(jv_choice(b, path, "observer", observers, 0, &o, err));
        out->observer = observers[o];
    }
    static const char *const guarantees[] = {"none", "conditional", "proven", NULL};
    out->min_guarantee = -1;
    if (cJSON_GetObjectItemCaseSensitive(b, "guarantee")) {
        if (out->is_audit || out->attack)
            return fp_fail(err, FP_EPARAM, "%s: \"guarantee\" bounds a cell's privacy record (no \"audit\" or "
                           "\"attack\")", jv_path(p, sizeof p, path, "guarantee"));
        FP_TRY(jv_choice(b, path, "guarantee", guarantees, 0, &out->min_guarantee, err));
    }
    int limits = cJSON_GetObjectItemCaseSensitive(b, "at_most") || cJSON_GetObjectItemCaseSensitive(b, "at_least");
    const char *def_metric = out->is_audit ? "epsilon_lower_bound" : out->attack ? "headline" : NULL;
    FP_TRY(jv_string(b, path, "metric", def_metric || !limits ? JV_OPTIONAL : JV_REQUIRED, def_metric, &out->metric,
                     err));
    if (!out->metric && limits)
        return fp_fail(err, FP_EPARAM, "%s: a cell bound needs a \"metric\"", path);
    if (!out->is_audit && !out->attack && out->metric) {
        int ok = 0;
        for (int k = 0; cell_metrics[k]; k++)
            ok |= strcmp(cell_metrics[k], out->metric) == 0;
        if (!ok)
            return fp_fail(err, FP_EPARAM, "%s: \"%.64s\" is not a cell metric (model_accuracy, model_loss, "
                           "epsilon_nominal, epsilon_sound, epsilon_conditional, epsilon_upload; attack metrics "
                           "need \"attack\")",
                           jv_path(p, sizeof p, path, "metric"), out->metric);
    }
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(b, "at_most");
    if (mx) {
        out->has_max = 1;
        if (out->is_audit && cJSON_IsString(mx) && strcmp(mx->valuestring, "epsilon") == 0)
            out->max_is_epsilon = 1;
        else if (cJSON_IsNumber(mx) && isfinite(mx->valuedouble))
            out->at_most = mx->valuedouble;
        else
            return fp_fail(err, FP_EPARAM, "%s: must be a number%s", jv_path(p, sizeof p, path, "at_most"),
                           out->is_audit ? " or \"epsilon\"" : "");
    }
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(b, "at_least");
    if (mn) {
        out->has_min = 1;
        if (!cJSON_IsNumber(mn) || !isfinite(mn->valuedouble))
            return fp_fail(err, FP_EPARAM, "%s: must be a number", jv_path(p, sizeof p, path, "at_least"));
        out->at_least = mn->valuedouble;
    }
    if (!out->has_max && !out->has_min && out->min_guarantee < 0)
        return fp_fail(err, FP_EPARAM, "%s: needs \"at_most\" and/or \"at_least\"%s", path,
                       out->is_audit || out->attack ? "" : ", or \"guarantee\"");
    if (out->metric && !out->has_max && !out->has_min && cJSON_GetObjectItemCaseSensitive(b, "metric"))
        return fp_fail(err, FP_EPARAM, "%s: \"metric\" needs \"at_most\" and/or \"at_least\"", path);
    FP_TRY(jv_int(b, path, "min_cells", JV_OPTIONAL, 1, 0, 1000000, &out->min_cells, err));
    // The name messages use: the label, else what the bound says.
    if (label)
        snprintf(out->name, sizeof out->name, "bound %d \"%.200s\"", i + 1, label);
    else {
        char sel[160] = "";
        if (!isnan(out->eps_min) && !isnan(out->eps_max))
            snprintf(sel, sizeof sel, ", %g <= eps <= %g", out->eps_min, out->eps_max);
        else if (!isnan(out->eps_max))
            snprintf(sel, sizeof sel, ", eps <= %g", out->eps_max);
        else if (!isnan(out->eps_min))
            snprintf(sel, sizeof sel, ", eps >= %g", out->eps_min);
        snprintf(out->name, sizeof out->name, "bound %d (%s %.64s%s%.64s%s: %s%.64s%s)", i + 1,
                 out->is_audit ? "audit" : "defense", out->select, out->variant ? " " : "",
                 out->variant ? out->variant : "", sel, out->attack ? out->attack : "", out->attack ? " " : "",
                 out->metric ? out->metric : "guarantee");
    }
    return FP_OK;
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// A number, "inf" → +∞, anything else → NaN.
static double jval(const cJSON *v) {
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsString(v) && strcmp(v->valuestring, "inf") == 0)
        return INFINITY;
    return NAN;
}

// obj[path] where path is a key, or "a.b.c" into objects and lists ("images.0.ssim");
// keys holding dots are tried whole first ("tpr_at_fpr.0.01" finds
// {"tpr_at_fpr": {"0.01": ...}}).
static const cJSON *lookup(const cJSON *obj, const char *path) {
    const cJSON *v = NULL;
    if (cJSON_IsArray(obj)) { // "images.0.ssim": a list index
        char *end;
        long i = strtol(path, &end, 10);
        if (end == path || i < 0 || i > 1000000000 || (*end && *end != '.'))
            return NULL;
        v = cJSON_GetArrayItem(obj, (int)i);
        return *end ? lookup(v, end + 1) : v;
    }
    if (!cJSON_IsObject(obj))
        return NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, path)))
        return v;
    for (const char *dot = strchr(path, '.'); dot; dot = strchr(dot + 1, '.')) {
        size_t n = (size_t)(dot - path);
        char head[256];
        if (n >= sizeof head)
            break;
        memcpy(head, path, n);
        head[n] = 0;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(obj, head);
        if (h && (v = lookup(h, dot + 1)))
            return v;
    }
    return NULL;
}

static int eps_selected(const Bound *b, double eps) {
    if (isnan(b->eps_min) && isnan(b->eps_max))
        return 1;
    if (!isfinite(eps))
        return 0;
    return (isnan(b->eps_min) || eps >= b->eps_min) && (isnan(b->eps_max) || eps <= b->eps_max);
}

// Compares v with the bound; adds a violation naming `where` when it does not hold.
static void compare(CheckResult *r, const Bound *b, const char *where, const char *what, double v, double at_most) {
    r->evaluations++;
    if (isnan(v)) {
        add_violation(r, "%s: %s: %s has no value", b->name, where, what);
        return;
    }
    if (b->has_max && !(v <= at_most))
        add_violation(r, "%s: %s: %s = %.4g, above the bound %.4g", b->name, where, what, v, at_most);
    if (b->has_min && !(v >= b->at_least))
        add_violation(r, "%s: %s: %s = %.4g, below the bound %.4g", b->name, where, what, v, b->at_least);
}

// Every entry of the bound's attack in a cell (of its observer, when the bound names one).
// An entry that is not done, or that says it does not apply (fails without any defense),
// is a violation: neither is evidence for or against the bound.
static void check_attack_entries(CheckResult *r, const Bound *b, const cJSON *c, const char *where, const char *msg) {
    const cJSON *a;
    int found = 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(c, "attacks")) {
        const char *name = jstr(a, "name"), *obs = jstr(a, "observer");
        if (!name || strcmp(name, b->attack) != 0 || (b->observer && (!obs || strcmp(obs, b->observer) != 0)))
            continue;
        found++;
        int headline = strcmp(b->metric, "headline") == 0;
        const char *metric = headline && jstr(a, "headline") ? jstr(a, "headline") : b->metric;
        char what[200];
        snprintf(what, sizeof what, "%.64s%s%.16s%s %.100s", b->attack, obs ? " (" : "", obs ? obs : "", obs ? ")" : "",
                 metric);
        const char *ast = jstr(a, "status") ? jstr(a, "status") : "?";
        if (strcmp(ast, "done") != 0) {
            r->evaluations++;
            add_violation(r, "%s: %s: %.100s %s (%.300s): no %s", b->name, where, what, ast,
                          jstr(a, "message") ? jstr(a, "message") : msg, b->metric);
            continue;
        }
        if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(a, "applicable"))) {
            r->evaluations++;
            add_violation(r, "%s: %s: %.100s is not applicable (it recovers nothing without any defense): no "
                          "evidence either way", b->name, where, what);
            continue;
        }
        double v = headline ? jval(cJSON_GetObjectItemCaseSensitive(a, "value"))
                            : jval(lookup(cJSON_GetObjectItemCaseSensitive(a, "result"), b->metric));
        compare(r, b, where, what, v, b->at_most);
    }
    if (!found) {
        r->evaluations++;
        add_violation(r, "%s: %s has no attack \"%.64s\"%s%.16s%s", b->name, where, b->attack,
                      b->observer ? " with observer \"" : "", b->observer ? b->observer : "", b->observer ? "\"" : "");
    }
}

static void check_cells(CheckResult *r, const Bound *b, const MatrixResults *mr) {
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(mr->index, "cells");
    long long matched = 0;
    for (int i = 0; i < mr->n; i++) {
        const cJSON *e = cJSON_GetArrayItem(cells, i), *c = mr->cells[i];
        const char *name = jstr(e, "defense"), *variant = jstr(e, "variant");
        if (!name || (strcmp(b->select, "*") != 0 && strcmp(b->select, name) != 0))
            continue;
        if (b->variant && (!variant || strcmp(b->variant, variant) != 0))
            continue;
        if (!eps_selected(b, jval(cJSON_GetObjectItemCaseSensitive(e, "epsilon"))))
            continue;
        if (b->params && c) {
            const cJSON *def = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "spec"), "defense");
            const cJSON *p;
            int ok = 1;
            cJSON_ArrayForEach(p, b->params) {
                const cJSON *have = cJSON_GetObjectItemCaseSensitive(def, p->string);
                ok &= have && cJSON_Compare(have, p, 1);
            }
            if (!ok)
                continue;
        }
        matched++;
        char where[320];
        snprintf(where, sizeof where, "cell \"%.200s\"", jstr(e, "label") ? jstr(e, "label") : "?");
        CellStatus st = mr->status[i];
        const char *msg = c && jstr(c, "message") ? jstr(c, "message") : "";
        if (!c) {
            r->evaluations++;
            add_violation(r, "%s: %s is %s: no result", b->name, where, cell_status_name(st));
            continue;
        }
        if (b->min_guarantee >= 0) {
            const cJSON *priv = cJSON_GetObjectItemCaseSensitive(c, "privacy");
            const char *g = jstr(priv, "guarantee");
            r->evaluations++;
            if (!priv && st != CELL_DONE)
                add_violation(r, "%s: %s %s (%.300s): no privacy record", b->name, where, cell_status_name(st), msg);
            else if (guarantee_rank(g) < b->min_guarantee) {
                const cJSON *as = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(priv, "assumptions"), 0);
                add_violation(r, "%s: %s: guarantee %.32s, needs %s%s%.300s%s", b->name, where, g ? g : "absent",
                              guarantee_name((Guarantee)b->min_guarantee), cJSON_IsString(as) ? " (" : "",
                              cJSON_IsString(as) ? as->valuestring : "", cJSON_IsString(as) ? ")" : "");
            }
            if (!b->metric)
                continue;
        }
        char what[200];
        double v;
        if (!b->attack) {
            const cJSON *model = cJSON_GetObjectItemCaseSensitive(c, "model");
            const cJSON *priv = cJSON_GetObjectItemCaseSensitive(c, "privacy");
            if (strcmp(b->metric, "model_accuracy") == 0)
                v = jval(cJSON_GetObjectItemCaseSensitive(model, "test_accuracy"));
            else if (strcmp(b->metric, "model_loss") == 0)
                v = jval(cJSON_GetObjectItemCaseSensitive(model, "test_loss"));
            else if (strcmp(b->metric, "epsilon_nominal") == 0)
                v = jval(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(priv, "nominal"),
                                                          "epsilon_total"));
            else { // the sound figures: proven (∞ otherwise), conditional, the upload observer's
                const cJSON *snd = cJSON_GetObjectItemCaseSensitive(priv, "sound");
                if (strcmp(b->metric, "epsilon_upload") == 0)
                    snd = cJSON_GetObjectItemCaseSensitive(snd, "upload");
                v = jval(cJSON_GetObjectItemCaseSensitive(
                    snd, strcmp(b->metric, "epsilon_conditional") == 0 ? "epsilon_total_conditional" : "epsilon_total"));
            }
            snprintf(what, sizeof what, "%s", b->metric);
            if (isnan(v) && st != CELL_DONE) {
                r->evaluations++;
                add_violation(r, "%s: %s %s (%.300s): no %s", b->name, where, cell_status_name(st), msg, b->metric);
                continue;
            }
        } else {
            check_attack_entries(r, b, c, where, msg);
            continue;
        }
        compare(r, b, where, what, v, b->at_most);
    }
    if (matched < b->min_cells)
        add_violation(r, "%s: matches %lld cell%s of the run, needs at least %lld", b->name, matched,
                      matched == 1 ? "" : "s", b->min_cells);
}

static void check_audit(CheckResult *r, const Bound *b, const cJSON *records) {
    long long matched = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, records) {
        const char *mech = jstr(a, "mechanism") ? jstr(a, "mechanism") : jstr(a, "defense");
        const char *variant = jstr(a, "variant");
        if (!mech || (strcmp(b->select, "*") != 0 && strcmp(b->select, mech) != 0))
            continue;
        if (b->variant && (!variant || strcmp(b->variant, variant) != 0))
            continue;
        double eps = jval(cJSON_GetObjectItemCaseSensitive(a, "epsilon"));
        if (!eps_selected(b, eps))
            continue;
        matched++;
        char where[320];
        snprintf(where, sizeof where, "audit %.64s%s%.64s ε=%g (%.100s)", mech, variant ? " " : "",
                 variant ? variant : "", eps, jstr(a, "file") ? jstr(a, "file") : "?");
        double v = jval(lookup(a, b->metric));
        if (b->max_is_epsilon && !isfinite(eps)) {
            r->evaluations++;
            add_violation(r, "%s: %s: no claimed epsilon to compare with", b->name, where);
            continue;
        }
        compare(r, b, where, b->metric, v, b->max_is_epsilon ? eps : b->at_most);
    }
    if (matched < b->min_cells)
        add_violation(r, "%s: matches %lld audit finding%s, needs at least %lld", b->name, matched,
                      matched == 1 ? "" : "s", b->min_cells);
}

FpStatus check_baseline(const char *dir, const cJSON *baseline, const char *path, CheckResult *out, FpError *err) {
    memset(out, 0, sizeof *out);
    static const char *const keys[] = {"description", "require_complete", "bounds", NULL};
    FpStatus st = jv_keys(baseline, "", keys, err);
    int complete = 1;
    const char *desc;
    if (st == FP_OK)
        st = jv_string(baseline, "", "description", JV_OPTIONAL, "", &desc, err);
    if (st == FP_OK)
        st = jv_bool(baseline, "", "require_complete", 1, &complete, err);
    const cJSON *bounds = cJSON_GetObjectItemCaseSensitive(baseline, "bounds");
    if (st == FP_OK && (!cJSON_IsArray(bounds) || cJSON_GetArraySize(bounds) == 0))
        st = fp_fail(err, FP_EPARAM, "bounds: needs a non-empty list of bounds");
    int nb = st == FP_OK ? cJSON_GetArraySize(bounds) : 0;
    Bound *b = st == FP_OK ? calloc((size_t)nb, sizeof(Bound)) : NULL;
    if (st == FP_OK && !b)
        st = fp_fail(err, FP_ENOMEM, "out of memory");
    for (int i = 0; i < nb && st == FP_OK; i++)
        st = parse_bound(cJSON_GetArrayItem(bounds, i), i, &b[i], err);
    if (st != FP_OK) {
        free(b);
        if (path && err) { // name the file: the message names the JSON path inside it
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%.200s: %.300s", path, err->msg);
            memcpy(err->msg, msg, sizeof msg);
        }
        return st;
    }
    MatrixResults mr;
    cJSON *audit = NULL;
    st = matrix_results_load(dir, &mr, err);
    if (st == FP_OK && (st = matrix_audit_load(dir, &audit, err)) != FP_OK)
        matrix_results_free(&mr);
    if (st != FP_OK) {
        free(b);
        return st;
    }
    out->bounds = nb;
    if (complete)
        for (int i = 0; i < mr.n; i++)
            if (mr.status[i] == CELL_FAILED || mr.status[i] == CELL_PENDING) {
                const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(mr.index, "cells"), i);
                const char *msg = mr.cells[i] ? jstr(mr.cells[i], "message") : NULL;
                add_violation(out, "run incomplete: cell \"%.200s\" is %s%s%.300s%s", jstr(e, "label") ? jstr(e, "label") : "?",
                              cell_status_name(mr.status[i]), msg ? " (" : "", msg ? msg : "", msg ? ")" : "");
            }
    for (int i = 0; i < nb; i++) {
        if (b[i].is_audit)
            check_audit(out, &b[i], audit);
        else
            check_cells(out, &b[i], &mr);
    }
    cJSON_Delete(audit);
    matrix_results_free(&mr);
    free(b);
    return FP_OK;
}

void check_result_free(CheckResult *r) {
    for (int i = 0; i < r->n_violations; i++)
        free(r->violations[i]);
    free(r->violations);
    memset(r, 0, sizeof *r);
}
