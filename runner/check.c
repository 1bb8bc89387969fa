// Baseline bounds over a matrix run (see runner/check.h).
#include "runner/check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attacks/attack.h"
#include "runner/attack_registry.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "defenses/dp/mech.h"
#include "defenses/registry.h"
#include "fl/defense.h"
#include "reports/results.h"
#include "reports/summary.h"

typedef enum { STAT_MEAN = 0, STAT_CI_UPPER = 1, STAT_CI_LOWER = 2 } Statistic;
static const char *const statistic_names[] = {"mean", "ci_upper", "ci_lower", NULL};

typedef struct Bound {
    int index;
    char path[48];             // "bounds[3]"
    char name[320];            // how messages refer to it
    int is_audit;
    const char *select;        // defense or mechanism name, "*" = any
    const char *variant;       // NULL = any
    double eps_min, eps_max;   // NaN = unbounded
    const cJSON *params;       // NULL = any
    const char *attack;        // NULL = a cell-level metric
    const char *observer;      // only attack entries with this declared observer (NULL = every entry of `attack`)
    const char *metric;
    int metric_given;
    Statistic statistic;
    int has_max, has_min, max_is_epsilon;
    const char *max_key;       // attack bounds: "at_most" names another key of the same result
    double at_most, at_least;
    int min_guarantee;         // the weakest guarantee a selected setting may have (-1 = any)
    int upload_record;         // 1: min_guarantee bounds the upload observer's record ("upload_guarantee")
    long long min_cells;
} Bound;

// A guarantee by strength: none < conditional < proven (-1: absent or unknown).
static int guarantee_rank(const char *g) {
    for (int k = GUARANTEE_NONE; k <= GUARANTEE_PROVEN; k++)
        if (g && strcmp(g, guarantee_name((Guarantee)k)) == 0)
            return k;
    return -1;
}

// ---- results -----------------------------------------------------------------------------------

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...) {
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap); // raw: each output format escapes (check_format.c)
    va_end(ap);
    return strdup(buf);
}

static CheckItem *new_item(CheckResult *r, const Bound *b) {
    CheckItem *v = realloc(r->items, sizeof(CheckItem) * (size_t)(r->n_items + 1));
    if (!v)
        return NULL;
    r->items = v;
    CheckItem *it = &v[r->n_items++];
    *it = (CheckItem){.bound = b ? b->index : -1, .value = NAN, .margin = NAN};
    it->bound_name = strdup(b ? b->name : "run");
    return it;
}

// A check that is not a comparison of a value (a guarantee), pass or fail.
static void add_check(CheckResult *r, const Bound *b, const char *subject, int ok, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add_check(CheckResult *r, const Bound *b, const char *subject, int ok, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->evaluations++;
    CheckItem *it = new_item(r, b);
    if (!it)
        return;
    it->subject = strdup(subject ? subject : "");
    it->what = strdup("guarantee");
    it->ok = ok;
    it->message = dupf("%s: %s", b->name, msg);
    r->n_violations += !ok;
}

// A violation that is not a comparison of a value.
static void add_violation(CheckResult *r, const Bound *b, const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_violation(CheckResult *r, const Bound *b, const char *subject, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    CheckItem *it = new_item(r, b);
    if (!it)
        return;
    it->subject = strdup(subject ? subject : "");
    it->what = strdup("");
    it->message = dupf("%s: %s", b ? b->name : "run", msg);
    r->n_violations++;
}

// Compares v with the bound; records the comparison either way.
static void compare(CheckResult *r, const Bound *b, const char *subject, const char *what, double v, double at_most) {
    r->evaluations++;
    CheckItem *it = new_item(r, b);
    if (!it)
        return;
    it->is_comparison = 1;
    it->subject = strdup(subject);
    it->what = strdup(what);
    it->value = v;
    it->has_max = b->has_max;
    it->has_min = b->has_min;
    it->at_most = at_most;
    it->at_least = b->at_least;
    char limits[160] = "";
    if (b->has_min && b->has_max)
        snprintf(limits, sizeof limits, "in [%.4g, %.4g]", b->at_least, at_most);
    else if (b->has_max)
        snprintf(limits, sizeof limits, "at most %.4g", at_most);
    else
        snprintf(limits, sizeof limits, "at least %.4g", b->at_least);
    if (isnan(v)) {
        it->ok = 0;
        it->message = dupf("%s: %s: %s has no value (bound: %s)", b->name, subject, what, limits);
        r->n_violations++;
        return;
    }
    double m = INFINITY;
    if (b->has_max)
        m = fmin(m, at_most - v);
    if (b->has_min)
        m = fmin(m, v - b->at_least);
    it->margin = m;
    it->ok = m >= 0;
    char vt[40];
    snprintf(vt, sizeof vt, "%.4g", v);
    if (it->ok)
        it->message = dupf("%s: %s: %s = %s, %s (margin %.4g)", b->name, subject, what, vt, limits, m);
    else {
        it->message = dupf("%s: %s: %s = %s, %s the bound %.4g", b->name, subject, what, vt,
                           b->has_max && v > at_most ? "above" : "below", b->has_max && v > at_most ? at_most : b->at_least);
        r->n_violations++;
    }
}

// ---- parsing ---------------------------------------------------------------------------------------

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
    char p[160];
    memset(out, 0, sizeof *out);
    out->index = i;
    snprintf(out->path, sizeof out->path, "bounds[%d]", i);
    const char *path = out->path;
    static const char *const keys[] = {"label",  "defense", "audit",     "variant", "epsilon_min", "epsilon_max",
                                       "params", "attack",  "observer",  "metric",    "statistic", "at_most",
                                       "at_least",
                                       "guarantee", "upload_guarantee", "min_cells", NULL};
    if (!cJSON_IsObject(b))
        return fp_fail(err, FP_EPARAM, "%s: must be an object", path);
    FP_TRY(jv_keys(b, path, keys, err));
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
    // "guarantee": the weakest guarantee a selected setting's privacy record may have (the
    // record's own, the released aggregates' observer), or "upload_guarantee" that of the
    // upload observer's record (sound.upload, labelled by its own proof); a bound of its
    // own, or beside a metric's limits.
    static const char *const guarantees[] = {"none", "conditional", "proven", NULL};
    out->min_guarantee = -1;
    out->upload_record = cJSON_GetObjectItemCaseSensitive(b, "upload_guarantee") != NULL;
    const char *gkey = out->upload_record ? "upload_guarantee" : "guarantee";
    if (out->upload_record && cJSON_GetObjectItemCaseSensitive(b, "guarantee"))
        return fp_fail(err, FP_EPARAM, "%s: give one of \"guarantee\" and \"upload_guarantee\" per bound",
                       jv_path(p, sizeof p, path, "upload_guarantee"));
    if (cJSON_GetObjectItemCaseSensitive(b, gkey)) {
        if (out->is_audit || out->attack)
            return fp_fail(err, FP_EPARAM, "%s: \"%s\" bounds a cell's privacy record (no \"audit\" or "
                           "\"attack\")", jv_path(p, sizeof p, path, gkey), gkey);
        FP_TRY(jv_choice(b, path, gkey, guarantees, 0, &out->min_guarantee, err));
    }
    int limits = cJSON_GetObjectItemCaseSensitive(b, "at_most") || cJSON_GetObjectItemCaseSensitive(b, "at_least");
    out->metric_given = cJSON_GetObjectItemCaseSensitive(b, "metric") != NULL;
    const char *def_metric = out->is_audit ? "epsilon_lower_bound" : out->attack ? "headline" : NULL;
    FP_TRY(jv_string(b, path, "metric", def_metric || !limits ? JV_OPTIONAL : JV_REQUIRED, def_metric, &out->metric,
                     err));
    if (!out->metric && limits)
        return fp_fail(err, FP_EPARAM, "%s: a cell bound needs a \"metric\"", path);
    if (out->metric && !out->is_audit && !out->attack && !results_is_cell_metric(out->metric)) {
        char names[256] = "";
        for (int k = 0; results_cell_metric_at(k); k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                     results_cell_metric_at(k));
        return fp_fail(err, FP_EPARAM, "%s: \"%.64s\" is not a cell metric (%s; attack metrics need \"attack\")",
                       jv_path(p, sizeof p, path, "metric"), out->metric, names);
    }
    int stat;
    FP_TRY(jv_choice(b, path, "statistic", statistic_names, STAT_MEAN, &stat, err));
    out->statistic = (Statistic)stat;
    if (out->is_audit && out->statistic != STAT_MEAN)
        return fp_fail(err, FP_EPARAM, "%s: an audit finding has one value: no \"statistic\" over seeds",
                       jv_path(p, sizeof p, path, "statistic"));
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(b, "at_most");
    if (mx) {
        out->has_max = 1;
        if (out->is_audit && cJSON_IsString(mx) && strcmp(mx->valuestring, "epsilon") == 0)
            out->max_is_epsilon = 1;
        else if (out->attack && cJSON_IsString(mx) && *mx->valuestring && strcmp(mx->valuestring, "epsilon") != 0)
            out->max_key = mx->valuestring;
        else if (cJSON_IsNumber(mx) && isfinite(mx->valuedouble))
            out->at_most = mx->valuedouble;
        else
            return fp_fail(err, FP_EPARAM, "%s: must be a number%s", jv_path(p, sizeof p, path, "at_most"),
                           out->is_audit ? " or \"epsilon\""
                           : out->attack ? " or the name of another key of the attack's result (\"epsilon_claimed\")"
                                         : "");
    }
    if (out->max_key && out->statistic != STAT_MEAN)
        return fp_fail(err, FP_EPARAM, "%s: a bound against another key of the result compares seed by seed: no "
                       "\"statistic\"", jv_path(p, sizeof p, path, "statistic"));
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
    if (out->metric_given && !out->has_max && !out->has_min)
        return fp_fail(err, FP_EPARAM, "%s: \"metric\" needs \"at_most\" and/or \"at_least\"", path);
    if (out->has_max && out->has_min && !out->max_is_epsilon && out->at_least > out->at_most)
        return fp_fail(err, FP_EPARAM, "%s: at_least %g > at_most %g: no value can satisfy it", path, out->at_least,
                       out->at_most);
    FP_TRY(jv_int(b, path, "min_cells", JV_OPTIONAL, 1, 1, 1000000, &out->min_cells, err));
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
                 out->metric ? out->metric : out->upload_record ? "upload guarantee" : "guarantee");
    }
    return FP_OK;
}

// ---- names ---------------------------------------------------------------------------------------

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// 1 when name is one of the comma-separated list's entries.
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

// Attack k of the run is selected by b: by name, or by its label ("dlg observer=public").
static int attack_selected(const Bound *b, const cJSON *ix_attack) {
    const char *name = jstr(ix_attack, "name"), *label = jstr(ix_attack, "label");
    return (name && strcmp(name, b->attack) == 0) || (label && strcmp(label, b->attack) == 0);
}

// A key of a bound's "params" names a parameter of a selected defense: one its create()
// takes (DefenseOps.takes_param; any registered defense for "*"), or one a setting of
// the run has in its defense object (stand-ins, older runs). Else a typo ({"nosie":
// "client"}), which would otherwise match no setting and read as a missing defense.
static int param_known(const Bound *b, const DefenseOps *ops, const MatrixResults *mr, const char *key) {
    int any = strcmp(b->select, "*") == 0;
    for (int i = 0; i < defense_count(); i++) {
        const DefenseOps *d = defense_at(i);
        if ((any || d == ops) && (!d->takes_param || d->takes_param(key)))
            return 1;
    }
    for (int i = 0; i < mr->n; i++) {
        const cJSON *c = mr->cells[i];
        const char *d = jstr(matrix_index_cell(mr, i), "defense");
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "spec"), "defense");
        if (d && (any || strcmp(d, b->select) == 0) && cJSON_GetObjectItemCaseSensitive(def, key))
            return 1;
    }
    return 0;
}

// The names a bound uses must exist: registered, or in the run (stand-ins, older runs).
static FpStatus validate_names(const Bound *b, const MatrixResults *mr, const cJSON *audit, FpError *err) {
    char p[160];
    if (b->is_audit) {
        int known = strcmp(b->select, "*") == 0 || mech_find(b->select) != NULL, vknown = !b->variant;
        const MechOps *mi = mech_find(b->select);
        if (b->variant && mi && in_list(mi->variants, b->variant))
            vknown = 1;
        for (int i = 0; b->variant && !mi && i < mech_count(); i++) // "*": any mechanism's variant
            vknown |= in_list(mech_at(i)->variants, b->variant);
        int any_metric = 0, metric_known = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, audit) {
            const char *mech = jstr(a, "mechanism") ? jstr(a, "mechanism") : jstr(a, "defense");
            known |= mech && strcmp(mech, b->select) == 0;
            vknown |= b->variant && jstr(a, "variant") && strcmp(jstr(a, "variant"), b->variant) == 0;
            any_metric = 1;
            metric_known |= results_lookup(a, b->metric) != NULL;
        }
        if (!known)
            return fp_fail(err, FP_EPARAM, "%s: unknown mechanism \"%.64s\" (fedpriv audit --help lists them)",
                           jv_path(p, sizeof p, b->path, "audit"), b->select);
        if (!vknown)
            return fp_fail(err, FP_EPARAM, "%s: \"%.64s\" has no variant \"%.64s\"", jv_path(p, sizeof p, b->path, "variant"),
                           b->select, b->variant);
        if (any_metric && !metric_known)
            return fp_fail(err, FP_EPARAM, "%s: no audit finding of the run has \"%.64s\"",
                           jv_path(p, sizeof p, b->path, "metric"), b->metric);
        return FP_OK;
    }
    const DefenseOps *ops = strcmp(b->select, "*") == 0 ? NULL : defense_find(b->select);
    int known = strcmp(b->select, "*") == 0 || ops != NULL, vknown = !b->variant || (ops && in_list(ops->variants, b->variant));
    for (int i = 0; b->variant && !vknown && strcmp(b->select, "*") == 0 && i < defense_count(); i++)
        vknown = in_list(defense_at(i)->variants, b->variant);
    for (int i = 0; i < mr->n; i++) {
        const cJSON *e = matrix_index_cell(mr, i);
        const char *d = jstr(e, "defense"), *v = jstr(e, "variant");
        int same = d && (strcmp(b->select, "*") == 0 || strcmp(d, b->select) == 0);
        known |= same;
        vknown |= same && b->variant && v && strcmp(v, b->variant) == 0;
    }
    char hint[128];
    if (!known)
        return fp_fail(err, FP_EPARAM, "%s: unknown defense \"%.64s\" (%sfedpriv list shows the defenses)",
                       jv_path(p, sizeof p, b->path, "defense"), b->select, defense_suggest(b->select, hint, sizeof hint));
    if (!vknown)
        return fp_fail(err, FP_EPARAM, "%s: defense \"%.64s\" has no variant \"%.64s\"%s%s%s",
                       jv_path(p, sizeof p, b->path, "variant"), b->select, b->variant, ops && ops->variants ? " (it has: " : "",
                       ops && ops->variants ? ops->variants : "", ops && ops->variants ? ")" : "");
    const cJSON *pk;
    cJSON_ArrayForEach(pk, b->params)
        if (!param_known(b, ops, mr, pk->string)) {
            char pp[160];
            jv_path(pp, sizeof pp, b->path, "params");
            jv_path(p, sizeof p, pp, pk->string);
            if (strcmp(b->select, "*") == 0)
                return fp_fail(err, FP_EPARAM, "%s: no defense takes a parameter \"%.64s\"", p, pk->string);
            return fp_fail(err, FP_EPARAM, "%s: defense \"%.64s\" takes no parameter \"%.64s\"", p, b->select,
                           pk->string);
        }
    if (!b->attack)
        return FP_OK;
    int in_run = 0;
    for (int k = 0; k < matrix_attack_count(mr); k++)
        in_run |= attack_selected(b, matrix_index_attack(mr, k));
    if (!in_run && !attack_find(b->attack))
        return fp_fail(err, FP_EPARAM, "%s: unknown attack \"%.64s\" (%sfedpriv list shows the attacks)",
                       jv_path(p, sizeof p, b->path, "attack"), b->attack, attack_suggest(b->attack, hint, sizeof hint));
    if (!b->metric_given || !b->metric || strcmp(b->metric, "headline") == 0)
        return FP_OK;
    // The metric must be in a finished result of that attack; with none finished there is
    // nothing to tell a typo from, and the bound fails on the missing value instead.
    int finished = 0, found = 0;
    for (int k = 0; k < matrix_attack_count(mr); k++) {
        if (!attack_selected(b, matrix_index_attack(mr, k)))
            continue;
        for (int i = 0; i < mr->n && !found; i++) {
            const cJSON *a = mr->cells[i] ? matrix_cell_attack_at(mr->cells[i], k) : NULL;
            if (!a || !jstr(a, "status") || strcmp(jstr(a, "status"), "done") != 0)
                continue;
            finished = 1;
            found = results_lookup(cJSON_GetObjectItemCaseSensitive(a, "result"), b->metric) != NULL;
        }
    }
    if (finished && !found)
        return fp_fail(err, FP_EPARAM, "%s: the results of attack \"%.64s\" have no metric \"%.64s\" (docs/report.md: "
                       "a key of the attack's result, or \"headline\")",
                       jv_path(p, sizeof p, b->path, "metric"), b->attack, b->metric);
    return FP_OK;
}

// ---- evaluation ------------------------------------------------------------------------------------

static int eps_selected(const Bound *b, double eps) {
    if (isnan(b->eps_min) && isnan(b->eps_max))
        return 1;
    if (!isfinite(eps))
        return 0;
    return (isnan(b->eps_min) || eps >= b->eps_min) && (isnan(b->eps_max) || eps <= b->eps_max);
}

static double statistic_of(const Bound *b, const SeedStat *s) {
    return b->statistic == STAT_CI_UPPER ? s->ci_high : b->statistic == STAT_CI_LOWER ? s->ci_low : s->mean;
}

static void describe(const Bound *b, const char *metric_text, int n_runs, char *what, size_t n) {
    if (n_runs > 1 || b->statistic != STAT_MEAN)
        snprintf(what, n, "%s (%s of %d seed%s)", metric_text,
                 b->statistic == STAT_CI_UPPER ? "upper end of the 95% CI"
                 : b->statistic == STAT_CI_LOWER ? "lower end of the 95% CI" : "mean",
                 n_runs, n_runs == 1 ? "" : "s");
    else
        snprintf(what, n, "%s", metric_text);
}

// Compares one metric of one setting: its per-seed values, then the statistic.
static void check_values(CheckResult *r, const Bound *b, const char *where, const char *metric_text,
                         const double *v, int n) {
    SeedStat st;
    seed_stat(v, n, &st);
    char what[300];
    describe(b, metric_text, n, what, sizeof what);
    if (st.missing) {
        add_violation(r, b, where, "%s: %s: %d of %d seeds have no value", where, metric_text, st.missing, n);
        return;
    }
    if (b->statistic != STAT_MEAN && st.n < 2) {
        add_violation(r, b, where, "%s: %s: a confidence interval needs at least 2 seeds, the run has %d", where,
                      metric_text, st.n);
        return;
    }
    compare(r, b, where, what, statistic_of(b, &st), b->at_most);
}

static void check_cells(CheckResult *r, const Bound *b, const MatrixResults *mr) {
    long long matched = 0;
    double *v = malloc(sizeof(double) * (size_t)(mr->n ? mr->n : 1));
    if (!v)
        return;
    for (int si = 0; si < mr->n_settings; si++) {
        const MatrixSetting *set = &mr->settings[si];
        const cJSON *e = matrix_index_cell(mr, set->runs[0]);
        const char *name = jstr(e, "defense"), *variant = jstr(e, "variant");
        if (!name || (strcmp(b->select, "*") != 0 && strcmp(b->select, name) != 0))
            continue;
        if (b->variant && (!variant || strcmp(b->variant, variant) != 0))
            continue;
        if (!eps_selected(b, jnum_value(cJSON_GetObjectItemCaseSensitive(e, "epsilon"))))
            continue;
        if (b->params) {
            const cJSON *first = mr->cells[set->runs[0]];
            const cJSON *def = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(first, "spec"), "defense");
            const cJSON *p;
            int ok = first != NULL;
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
        // Every seed must have a result file (a pending or crashed cell has none or no
        // attacks); what a diverged seed lacks is reported per metric below.
        int bad = 0;
        for (int j = 0; j < set->n_runs && !bad; j++) {
            int i = set->runs[j];
            const cJSON *c = mr->cells[i];
            if (c && (mr->status[i] != CELL_FAILED || !b->attack))
                continue;
            const char *msg = c && jstr(c, "message") ? jstr(c, "message") : "";
            add_violation(r, b, where, "%s is %s%s%s%s: no %s", where, cell_status_name(mr->status[i]),
                          msg[0] ? " (" : "", msg, msg[0] ? ")" : "", b->metric ? b->metric : "privacy record");
            bad = 1;
        }
        if (bad)
            continue;
        if (b->min_guarantee >= 0) { // the weakest guarantee over the setting's seeds
            int rank = 3, missing = 0;
            const char *weakest = NULL, *why = NULL;
            for (int j = 0; j < set->n_runs; j++) {
                const cJSON *priv = cJSON_GetObjectItemCaseSensitive(mr->cells[set->runs[j]], "privacy");
                if (priv && b->upload_record) // no upload record: no label (absent, below none)
                    priv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(priv, "sound"), "upload");
                const char *g = jstr(priv, "guarantee");
                const cJSON *as = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(priv, "assumptions"), 0);
                missing |= !priv;
                if (guarantee_rank(g) < rank) {
                    rank = guarantee_rank(g);
                    weakest = g;
                    why = cJSON_IsString(as) ? as->valuestring : NULL;
                }
            }
            const char *need = guarantee_name((Guarantee)b->min_guarantee);
            if (missing)
                add_check(r, b, where, 0, "%s: no %s record (needs a %s guarantee)", where,
                          b->upload_record ? "upload observer's" : "privacy", need);
            else if (rank < b->min_guarantee)
                add_check(r, b, where, 0, "%s: guarantee %.32s, needs %s%s%.300s%s", where, weakest ? weakest : "absent",
                          need, why ? " (" : "", why ? why : "", why ? ")" : "");
            else
                add_check(r, b, where, 1, "%s: guarantee %.32s (needs %s)", where, weakest, need);
            if (!b->metric)
                continue;
        }
        if (!b->attack) {
            int stop = 0;
            for (int j = 0; j < set->n_runs && !stop; j++) {
                const cJSON *c = mr->cells[set->runs[j]];
                v[j] = results_cell_metric(c, b->metric);
                if (isnan(v[j]) && mr->status[set->runs[j]] != CELL_DONE) { // a diverged seed has no accuracy
                    const char *msg = jstr(c, "message") ? jstr(c, "message") : "";
                    add_violation(r, b, where, "%s %s (%.300s): no %s", where, cell_status_name(mr->status[set->runs[j]]),
                                  msg, b->metric);
                    stop = 1;
                }
            }
            if (!stop)
                check_values(r, b, where, b->metric, v, set->n_runs);
            continue;
        }
        int any = 0;
        for (int k = 0; k < matrix_attack_count(mr); k++) {
            const cJSON *ia = matrix_index_attack(mr, k);
            if (!attack_selected(b, ia))
                continue;
            const char *obs = jstr(ia, "observer");
            if (b->observer && (!obs || strcmp(obs, b->observer) != 0))
                continue;
            any = 1;
            const char *label = jstr(ia, "label") ? jstr(ia, "label") : b->attack;
            char metric_text[300];
            snprintf(metric_text, sizeof metric_text, "%.100s %.100s", label,
                     strcmp(b->metric, "headline") == 0 && jstr(ia, "headline") ? jstr(ia, "headline") : b->metric);
            int stop = 0;
            for (int j = 0; j < set->n_runs && !stop; j++) {
                const cJSON *a = matrix_cell_attack_at(mr->cells[set->runs[j]], k);
                const char *ast = a && jstr(a, "status") ? jstr(a, "status") : "missing";
                if (strcmp(ast, "done") != 0) {
                    add_violation(r, b, where, "%s: %.64s %s (%.300s): no %s", where, label, ast,
                                  a && jstr(a, "message") ? jstr(a, "message") : "", b->metric);
                    stop = 1;
                } else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(a, "applicable")) ||
                           cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "result"),
                                                                          "applicable"))) {
                    // Neither evidence for nor against the bound: it recovers nothing without any defense.
                    add_violation(r, b, where, "%s: %.64s is not applicable (it recovers nothing without any "
                                  "defense): no evidence either way", where, label);
                    stop = 1;
                }
                v[j] = results_attack_metric(a, b->metric);
                if (!stop && b->max_key) { // the bound is the result's own figure: ε̂ against its claimed ε, per seed
                    double lim = results_attack_metric(a, b->max_key);
                    char seed_text[340];
                    snprintf(seed_text, sizeof seed_text, "%s (seed %d of %d)", metric_text, j + 1, set->n_runs);
                    const cJSON *testable =
                        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "result"), "claim_testable");
                    if (!isfinite(lim)) // an infinite claim (no guarantee) bounds nothing
                        add_violation(r, b, where, "%s: %.64s has no finite %.100s to compare with", where, label,
                                      b->max_key);
                    else if (cJSON_IsFalse(testable)) // a gate that could not have failed
                        add_violation(r, b, where, "%s: %.64s could report at most %.4g (%s), not above the claimed %.4g: "
                                      "it cannot test the claim (more canaries or runs)", where, label,
                                      results_attack_metric(a, "epsilon_ceiling"), "epsilon_ceiling", lim);
                    else
                        compare(r, b, where, seed_text, v[j], lim);
                }
            }
            if (!stop && !b->max_key)
                check_values(r, b, where, metric_text, v, set->n_runs);
        }
        if (!any)
            add_violation(r, b, where, "%s: the run has no attack \"%.64s\"", where, b->attack);
    }
    free(v);
    if (matched < b->min_cells)
        add_violation(r, b, "", "matches %lld defense setting%s of the run, needs at least %lld", matched,
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
        double eps = jnum_value(cJSON_GetObjectItemCaseSensitive(a, "epsilon"));
        if (!eps_selected(b, eps))
            continue;
        matched++;
        char where[320];
        snprintf(where, sizeof where, "audit %.64s%s%.64s ε=%g (%.100s)", mech, variant ? " " : "",
                 variant ? variant : "", eps, jstr(a, "file") ? jstr(a, "file") : "?");
        double v = jnum_value(results_lookup(a, b->metric));
        if (b->max_is_epsilon && !isfinite(eps)) {
            add_violation(r, b, where, "%s: no claimed epsilon to compare with", where);
            continue;
        }
        compare(r, b, where, b->metric, v, b->max_is_epsilon ? eps : b->at_most);
    }
    if (matched < b->min_cells)
        add_violation(r, b, "", "matches %lld audit finding%s, needs at least %lld", matched, matched == 1 ? "" : "s",
                      b->min_cells);
}

static void name_file(FpError *err, const char *path) {
    if (path && err) { // the message names the JSON path inside the file
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%.200s: %.300s", path, err->msg);
        memcpy(err->msg, msg, sizeof msg);
    }
}

FpStatus check_baseline(const char *dir, const cJSON *baseline, const char *path, CheckResult *out, FpError *err) {
    memset(out, 0, sizeof *out);
    static const char *const keys[] = {"description", "require_complete", "bounds", NULL};
    FpStatus st = cJSON_IsObject(baseline) ? jv_keys(baseline, "", keys, err)
                                           : fp_fail(err, FP_EPARAM, "the baseline must be a JSON object");
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
        name_file(err, path);
        return st;
    }
    MatrixResults mr;
    cJSON *audit = NULL;
    // A folder of audit findings alone (DIR/audit/*.json, no results.json: the findings a
    // CI keeps from fedpriv audit or audit-scores) is a run without cells: its audit
    // bounds are checked, and a cell bound matches nothing (a violation, never a pass).
    char rp[4200];
    struct stat sb;
    snprintf(rp, sizeof rp, "%s/results.json", dir);
    int findings_only = stat(rp, &sb) != 0 && snprintf(rp, sizeof rp, "%s/audit", dir) > 0 && stat(rp, &sb) == 0 &&
                        S_ISDIR(sb.st_mode);
    memset(&mr, 0, sizeof mr);
    st = findings_only ? FP_OK : matrix_results_load(dir, &mr, err);
    if (st == FP_OK && (st = matrix_audit_load(dir, &audit, err)) != FP_OK)
        matrix_results_free(&mr);
    if (st != FP_OK) {
        free(b);
        return st;
    }
    for (int i = 0; i < nb && st == FP_OK; i++)
        st = validate_names(&b[i], &mr, audit, err);
    if (st != FP_OK) {
        name_file(err, path);
        cJSON_Delete(audit);
        matrix_results_free(&mr);
        free(b);
        return st;
    }
    out->bounds = nb;
    if (complete)
        for (int i = 0; i < mr.n; i++)
            if (mr.status[i] == CELL_FAILED || mr.status[i] == CELL_PENDING) {
                const cJSON *e = matrix_index_cell(&mr, i);
                const char *msg = mr.cells[i] ? jstr(mr.cells[i], "message") : NULL;
                char where[300];
                snprintf(where, sizeof where, "cell \"%.200s\"", jstr(e, "label") ? jstr(e, "label") : "?");
                add_violation(out, NULL, where, "incomplete: %s is %s%s%.300s%s", where, cell_status_name(mr.status[i]),
                              msg ? " (" : "", msg ? msg : "", msg ? ")" : "");
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
    for (int i = 0; i < r->n_items; i++) {
        free(r->items[i].bound_name);
        free(r->items[i].subject);
        free(r->items[i].what);
        free(r->items[i].message);
    }
    free(r->items);
    memset(r, 0, sizeof *r);
}
