// Matrix files: validation, expansion into cells and cell identity (see runner/matrix.h;
// running the cells is runner/matrix_run.c, reading a run back reports/results.c).
//
// A defense entry expands into the product of its "epsilon" list (a number counts as
// a list of one) and each "sweep" list, in that order: epsilon outermost, then the
// sweep keys as written. The cell's defense object is the entry with the list
// replaced by one value and "sweep" removed, which is exactly what the defense parses.
#include "runner/attack_registry.h"
#include "runner/matrix_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "core/rng_secure.h"
#include "runner/cell_cost.h"

const char *matrix_rng_name(const Matrix *m) { return (m->base.seed & RNG_SEED_SECURE) ? "secure" : "philox"; }

const DefenseOps *matrix_defense_find(const Matrix *m, const char *name) {
    return m->reg.defense_find ? m->reg.defense_find(name) : defense_find(name);
}

const AttackOps *matrix_attack_find(const Matrix *m, const char *name) {
    return m->reg.attack_find ? m->reg.attack_find(name) : attack_find(name);
}

// The nearest registered name to an unknown one, for its message ("" with stand-ins).
static const char *defense_hint(const Matrix *m, const char *name, char *buf, size_t n) {
    return m->reg.defense_find ? "" : defense_suggest(name, buf, n);
}

static const char *attack_hint(const Matrix *m, const char *name, char *buf, size_t n) {
    return m->reg.attack_find ? "" : attack_suggest(name, buf, n);
}

// FNV-1a, 64 bits: a cell's identity, not a security boundary.
static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

// A file-name-safe slug of a label: [a-z0-9.], other runs become one '-'.
static void slugify(const char *in, char *out, size_t n) {
    size_t k = 0;
    int dash = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && k + 1 < n; p++) {
        unsigned char c = *p;
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.') {
            out[k++] = (char)c;
            dash = 0;
        } else if (!dash && k > 0) {
            out[k++] = '-';
            dash = 1;
        }
    }
    while (k > 0 && out[k - 1] == '-')
        k--;
    out[k] = 0;
    if (k == 0)
        snprintf(out, n, "cell");
}

// "defense.epsilon: ..." from a defense's create() → "defenses[2].epsilon: ...".
static void rebase_message(FpError *err, const char *from, const char *to) {
    if (!err)
        return;
    size_t n = strlen(from);
    if (strncmp(err->msg, from, n) != 0 || (err->msg[n] != '.' && err->msg[n] != ':' && err->msg[n] != '['))
        return;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s%s", to, err->msg + n);
    memcpy(err->msg, msg, sizeof msg);
}

static char *compact(const cJSON *v) {
    char *s = jv_print(v, 0); // exact integers: two seeds never share a cell id
    return s ? s : strdup("?");
}

// One cell: the setting (defense object, swept values) run with one seed. Takes defense.
static FpStatus add_cell(Matrix *m, int di, const char *dpath, const cJSON *entry, const DefenseOps *ops,
                         cJSON *defense, const cJSON *swept, int setting, uint64_t seed, FpError *err) {
    if (m->n_cells == m->cap_cells) {
        int cap = m->cap_cells ? 2 * m->cap_cells : 16;
        Cell *c = realloc(m->cells, sizeof(Cell) * (size_t)cap);
        if (!c) {
            cJSON_Delete(defense);
            return fp_fail(err, FP_ENOMEM, "out of memory expanding the matrix");
        }
        m->cells = c;
        m->cap_cells = cap;
    }
    Cell *c = &m->cells[m->n_cells++];
    memset(c, 0, sizeof *c);
    c->defense_index = di;
    c->setting = setting;
    c->seed = seed;
    c->ops = ops;
    c->defense = defense;
    c->params = cJSON_Duplicate(swept, 1);
    snprintf(c->path, sizeof c->path, "%s", dpath);
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(defense, "epsilon");
    c->epsilon = cJSON_IsNumber(eps) ? eps->valuedouble : NAN;
    // The label: name, variant, ε, then the swept parameters.
    size_t k = 0;
    k += (size_t)snprintf(c->label + k, sizeof c->label - k, "%s", ops->name);
    const cJSON *variant = cJSON_GetObjectItemCaseSensitive(entry, "variant");
    if (cJSON_IsString(variant) && k < sizeof c->label)
        k += (size_t)snprintf(c->label + k, sizeof c->label - k, " %s", variant->valuestring);
    if (!isnan(c->epsilon) && k < sizeof c->label)
        k += (size_t)snprintf(c->label + k, sizeof c->label - k, " ε=%g", c->epsilon);
    for (const cJSON *it = swept->child; it && k < sizeof c->label; it = it->next) {
        char *v = compact(it);
        k += (size_t)snprintf(c->label + k, sizeof c->label - k, " %s=%s", it->string, v);
        free(v);
    }
    return FP_OK;
}

// An entry's sweep dimensions: "epsilon" first when it is a list, then the "sweep"
// lists as written. Checks their types and contents, and counts the cells the entry
// expands into (the product of the lengths, as a double: no overflow) without
// expanding anything.
typedef struct EntryDims {
    const cJSON *list[17];
    const char *name[17];
    int n;
    const cJSON *eps;
    double cells;
} EntryDims;

static FpStatus entry_dims(const cJSON *entry, const char *path, EntryDims *d, FpError *err) {
    char p[128];
    memset(d, 0, sizeof *d);
    d->cells = 1;
    if (!cJSON_IsObject(entry))
        return fp_fail(err, FP_EPARAM, "%s: must be an object", path);
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(entry, "epsilon");
    d->eps = eps;
    if (eps && cJSON_IsArray(eps)) {
        d->list[d->n] = eps;
        d->name[d->n++] = "epsilon";
    } else if (eps && !cJSON_IsNumber(eps))
        return fp_fail(err, FP_EPARAM, "%s: must be a number or a list of numbers", jv_path(p, sizeof p, path, "epsilon"));
    const cJSON *sweep = cJSON_GetObjectItemCaseSensitive(entry, "sweep");
    if (sweep) {
        if (!cJSON_IsObject(sweep))
            return fp_fail(err, FP_EPARAM, "%s: must be an object of parameter lists", jv_path(p, sizeof p, path, "sweep"));
        for (const cJSON *it = sweep->child; it; it = it->next) {
            char sp[160];
            snprintf(sp, sizeof sp, "%s.sweep.%.64s", path, it->string);
            if (!cJSON_IsArray(it))
                return fp_fail(err, FP_EPARAM, "%s: must be a list of values", sp);
            if (strcmp(it->string, "name") == 0 || strcmp(it->string, "epsilon") == 0 ||
                cJSON_GetObjectItemCaseSensitive(entry, it->string))
                return fp_fail(err, FP_EPARAM, "%s: cannot sweep \"%s\" (give epsilon lists directly; a key set "
                               "outright cannot also be swept)", sp, it->string);
            if (d->n == 16)
                return fp_fail(err, FP_EPARAM, "%s: at most 16 swept parameters", sp);
            d->list[d->n] = it;
            d->name[d->n++] = it->string;
        }
    }
    for (int k = 0; k < d->n; k++) {
        int len = cJSON_GetArraySize(d->list[k]);
        char dp[160];
        if (d->list[k] == eps)
            snprintf(dp, sizeof dp, "%s.epsilon", path);
        else
            snprintf(dp, sizeof dp, "%s.sweep.%.64s", path, d->name[k]);
        if (len == 0)
            return fp_fail(err, FP_EPARAM, "%s: empty list", dp);
        if (d->list[k] == eps) {
            int j = 0;
            for (const cJSON *v = eps->child; v; v = v->next, j++)
                if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
                    return fp_fail(err, FP_EPARAM, "%s[%d]: must be a number", dp, j);
        }
        d->cells *= len;
    }
    return FP_OK;
}

// One defense entry → its cells. Cells on an axis (every list but at most one at its
// first value) are marked: they are validated first, so a bad value anywhere in a list
// is found after about the sum of the list lengths, not their product.
static FpStatus expand_defense(Matrix *m, int di, const cJSON *entry, FpError *err) {
    char path[64], p[128];
    snprintf(path, sizeof path, "defenses[%d]", di);
    EntryDims dm;
    FP_TRY(entry_dims(entry, path, &dm, err));
    const char *name;
    FP_TRY(jv_string(entry, path, "name", JV_REQUIRED, NULL, &name, err));
    const DefenseOps *ops = matrix_defense_find(m, name);
    char hint[128];
    if (!ops)
        return fp_fail(err, FP_EPARAM, "%s: unknown defense \"%.64s\" (%sfedpriv list shows the defenses)",
                       jv_path(p, sizeof p, path, "name"), name, defense_hint(m, name, hint, sizeof hint));
    int nd = dm.n, len[17], at[17] = {0};
    for (int d = 0; d < nd; d++)
        len[d] = cJSON_GetArraySize(dm.list[d]);
    long total = (long)dm.cells; // matrix_load checked it against MATRIX_MAX_CELLS
    for (long c = 0; c < total; c++) {
        cJSON *defense = cJSON_Duplicate(entry, 1);
        cJSON *swept = cJSON_CreateObject();
        if (!defense || !swept) {
            cJSON_Delete(defense);
            cJSON_Delete(swept);
            return fp_fail(err, FP_ENOMEM, "out of memory expanding the matrix");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(defense, "sweep");
        int off_axis = 0;
        for (int d = 0; d < nd; d++) {
            off_axis += at[d] != 0;
            cJSON *v = cJSON_Duplicate(cJSON_GetArrayItem(dm.list[d], at[d]), 1);
            if (cJSON_GetObjectItemCaseSensitive(defense, dm.name[d]))
                cJSON_ReplaceItemInObjectCaseSensitive(defense, dm.name[d], v);
            else
                cJSON_AddItemToObject(defense, dm.name[d], v);
            if (dm.list[d] != dm.eps)
                cJSON_AddItemToObject(swept, dm.name[d], cJSON_Duplicate(v, 1));
        }
        // One cell per seed; they share the setting (and its label). add_cell owns its copy.
        FpStatus st = FP_OK;
        int setting = m->n_settings++;
        for (int k = 0; k < m->n_seeds && st == FP_OK; k++) {
            cJSON *copy = cJSON_Duplicate(defense, 1);
            st = copy ? add_cell(m, di, path, entry, ops, copy, swept, setting, m->seeds[k], err)
                      : fp_fail(err, FP_ENOMEM, "out of memory expanding the matrix");
        }
        cJSON_Delete(defense);
        cJSON_Delete(swept);
        FP_TRY(st);
        for (int k = 0; k < m->n_seeds; k++)
            m->cells[m->n_cells - 1 - k].on_axis = off_axis <= 1;
        for (int d = nd - 1; d >= 0; d--) { // odometer, last dimension fastest
            if (++at[d] < len[d])
                break;
            at[d] = 0;
        }
    }
    return FP_OK;
}

// The size of the whole matrix, before anything is expanded: a file of 200 entries x
// 999 epsilons is refused at once rather than expanded (memory) and validated (time).
static FpStatus check_matrix_size(const cJSON *defs, const cJSON *attacks, int n_seeds, FpError *err) {
    double cells = 0;
    int n = cJSON_GetArraySize(defs);
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "defenses[%d]", i);
        EntryDims dm;
        FP_TRY(entry_dims(cJSON_GetArrayItem(defs, i), path, &dm, err));
        cells += dm.cells * (double)n_seeds; // one cell per setting and seed
    }
    int n_attacks = cJSON_IsArray(attacks) ? cJSON_GetArraySize(attacks) : 0;
    if (cells > MATRIX_MAX_CELLS)
        return fp_fail(err, FP_EPARAM,
                       "defenses: the %d entr%s into %.0f cells, more than the limit of %d per matrix (split it "
                       "into several matrix files, or sweep fewer values)",
                       n, n == 1 ? "y expands" : "ies expand", cells, MATRIX_MAX_CELLS);
    if (cells * (1.0 + n_attacks) > MATRIX_MAX_RUNS)
        return fp_fail(err, FP_EPARAM,
                       "attacks: %.0f cells x (training + %d attacks) = %.0f runs, more than the limit of %d per matrix "
                       "(split it into several matrix files)",
                       cells, n_attacks, cells * (1.0 + n_attacks), MATRIX_MAX_RUNS);
    return FP_OK;
}

static FpStatus load_attacks(Matrix *m, const cJSON *arr, FpError *err) {
    if (!arr)
        return FP_OK;
    if (!cJSON_IsArray(arr))
        return fp_fail(err, FP_EPARAM, "attacks: must be a list of attack objects");
    int n = cJSON_GetArraySize(arr);
    m->attacks = calloc((size_t)(n ? n : 1), sizeof(AttackSpec));
    if (!m->attacks)
        return fp_fail(err, FP_ENOMEM, "out of memory reading attacks");
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(arr, i);
        AttackSpec *as = &m->attacks[i];
        snprintf(as->path, sizeof as->path, "attacks[%d]", i);
        char p[128];
        if (!cJSON_IsObject(a))
            return fp_fail(err, FP_EPARAM, "%s: must be an object", as->path);
        const char *name;
        FP_TRY(jv_string(a, as->path, "name", JV_REQUIRED, NULL, &name, err));
        as->ops = matrix_attack_find(m, name);
        char hint[128];
        if (!as->ops)
            return fp_fail(err, FP_EPARAM, "%s: unknown attack \"%.64s\" (%sfedpriv list shows the attacks)",
                           jv_path(p, sizeof p, as->path, "name"), name, attack_hint(m, name, hint, sizeof hint));
        m->n_attacks = i + 1;
        as->json = cJSON_Duplicate(a, 1);
        if (!as->json)
            return fp_fail(err, FP_ENOMEM, "out of memory reading attacks");
        // "model" is the matrix's: the attack sees its own keys only.
        as->model_json = cJSON_DetachItemFromObjectCaseSensitive(as->json, "model");
        if (as->model_json && !cJSON_IsObject(as->model_json))
            return fp_fail(err, FP_EPARAM, "%s: must be an object", jv_path(p, sizeof p, as->path, "model"));
    }
    return FP_OK;
}

// Do the server and the public observer see different things in some cell? Yes when a
// round can have more than one participant (the release averages them), or when a
// defense of the matrix replaces the aggregation (server-side noise, its own merge).
static int observers_differ(const Matrix *m) {
    const FedConfig *c = &m->base.fed;
    int several = c->sampling == SAMPLING_FIXED ? fed_cohort_size(c) > 1 : c->clients > 1 && c->sample_rate > 0;
    for (int i = 0; i < m->n_cells && !several; i++)
        several = defense_aggregates(m->cells[i].ops);
    return several;
}

// The matrix's defaults for gradient inversion (design notes, "Truth of a verdict"): an
// attack with observers and no "observer" runs once per observer where they differ
// (else as the server), and one with attacker variants and no "attacker" runs as the
// adaptive attacker. Then each spec gets its artifacts folder.
static FpStatus expand_attacks(Matrix *m, FpError *err) {
    int n = 0, both = observers_differ(m);
    for (int i = 0; i < m->n_attacks; i++) {
        const AttackSpec *as = &m->attacks[i];
        n += as->ops->observers && both && !cJSON_GetObjectItemCaseSensitive(as->json, "observer") ? FED_OBSERVERS : 1;
    }
    AttackSpec *out = calloc((size_t)(n ? n : 1), sizeof *out);
    if (!out)
        return fp_fail(err, FP_ENOMEM, "out of memory expanding the attacks");
    int k = 0;
    FpStatus st = FP_OK;
    for (int i = 0; i < m->n_attacks; i++) {
        AttackSpec *as = &m->attacks[i];
        int copies = as->ops->observers && both && !cJSON_GetObjectItemCaseSensitive(as->json, "observer")
                         ? FED_OBSERVERS : 1;
        if (as->ops->adaptive && !cJSON_GetObjectItemCaseSensitive(as->json, "attacker"))
            cJSON_AddStringToObject(as->json, "attacker", "adaptive");
        for (int c = copies - 1; c >= 0; c--) { // copies before the original gains its observer
            AttackSpec *o = &out[k + c];
            *o = *as;
            if (c > 0) { // its own copies of what the spec owns
                o->json = cJSON_Duplicate(as->json, 1);
                o->model_json = as->model_json ? cJSON_Duplicate(as->model_json, 1) : NULL;
                if (!o->json || (as->model_json && !o->model_json))
                    st = fp_fail(err, FP_ENOMEM, "out of memory expanding the attacks");
            }
            if (o->json && as->ops->observers && !cJSON_GetObjectItemCaseSensitive(o->json, "observer"))
                cJSON_AddStringToObject(o->json, "observer", fed_observer_name(copies > 1 ? (FedObserver)c
                                                                                          : FED_OBSERVER_SERVER));
            const cJSON *ob = o->json ? cJSON_GetObjectItemCaseSensitive(o->json, "observer") : NULL;
            o->observer = as->ops->observers && cJSON_IsString(ob) ? ob->valuestring : NULL;
            char slug[64], what[96];
            snprintf(what, sizeof what, "%s%s%.32s", as->ops->name, o->observer ? " " : "", o->observer ? o->observer : "");
            slugify(what, slug, sizeof slug);
            snprintf(o->dirname, sizeof o->dirname, "%d-%s", k + c, slug);
        }
        k += copies;
    }
    free(m->attacks);
    m->attacks = out;
    m->n_attacks = k;
    return st;
}

int matrix_reference_of(const Matrix *m, int i) {
    int takes = 0;
    for (int k = 0; k < m->n_attacks; k++)
        takes |= m->attacks[k].ops->uses_reference;
    if (!takes || strcmp(m->cells[i].ops->name, "none") == 0)
        return -1;
    for (int r = 0; r < m->n_cells; r++)
        if (m->cells[r].seed == m->cells[i].seed && strcmp(m->cells[r].ops->name, "none") == 0)
            return r;
    return -1;
}

// Everything a cell's result depends on, as canonical JSON; its hash names the cell.
static cJSON *cell_spec(const Matrix *m, const Cell *c) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "fedpriv_version", FEDPRIV_VERSION);
    cJSON_AddNumberToObject(s, "seed", (double)c->seed); // < 2^53: exact
    cJSON_AddStringToObject(s, "rng", matrix_rng_name(m));
    cJSON_AddStringToObject(s, "backend", m->base.backend->name);
    cJSON_AddItemToObject(s, "dataset", cJSON_Duplicate(m->base.dataset_json, 1));
    cJSON_AddItemToObject(s, "model", cJSON_Duplicate(m->base.model_json, 1));
    cJSON_AddItemToObject(s, "federation", fed_config_to_json(&m->base.fed));
    cJSON_AddItemToObject(s, "defense", cJSON_Duplicate(c->defense, 1));
    cJSON *atk = cJSON_AddArrayToObject(s, "attacks");
    for (int k = 0; k < m->n_attacks; k++) {
        cJSON *a = cJSON_Duplicate(m->attacks[k].json, 1);
        if (m->attacks[k].model_json)
            cJSON_AddItemToObject(a, "model", cJSON_Duplicate(m->attacks[k].model_json, 1));
        cJSON_AddItemToArray(atk, a);
    }
    return s;
}

// Checks one cell against the data and model: the defense's create() through a real
// federation set-up, and every attack's validate(); then estimates its cost.
static FpStatus validate_cell(Matrix *m, Cell *c, FpError *err) {
    Experiment ex = m->base;
    ex.threads = 1;
    ex.defense = c->ops;
    ex.defense_json = c->defense;
    ex.model = model_clone(m->base.model, m->base.backend, err);
    if (!ex.model)
        return err ? err->code : FP_ENOMEM;
    Federation *f = experiment_federation(&ex, NULL, 1, err);
    if (!f) {
        model_free(ex.model);
        rebase_message(err, "defense", c->path);
        if (err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%.400s (cell \"%.80s\")", err->msg, c->label);
            memcpy(err->msg, msg, sizeof msg);
        }
        return err ? err->code : FP_EPARAM;
    }
    fed_free(f);
    FpStatus st = FP_OK;
    int n = m->n_attacks;
    Experiment *aex = calloc((size_t)(n ? n : 1), sizeof(Experiment));
    AttackEnv *env = calloc((size_t)(n ? n : 1), sizeof(AttackEnv));
    const AttackOps **ops = calloc((size_t)(n ? n : 1), sizeof(AttackOps *));
    if (!aex || !env || !ops)
        st = fp_fail(err, FP_ENOMEM, "out of memory");
    for (int k = 0; k < n && st == FP_OK; k++) {
        AttackSpec *as = &m->attacks[k];
        aex[k] = ex;
        if (as->proto)
            aex[k].model = as->proto;
        env[k] = (AttackEnv){.ex = &aex[k], .attack_json = as->json, .path = as->path, .out_dir = NULL, .quiet = 1};
        ops[k] = as->ops;
        st = as->ops->validate(&env[k], err);
    }
    if (st == FP_OK)
        st = cost_cell(&ex, ops, env, n, &c->cost, err);
    free(aex);
    free(env);
    free(ops);
    model_free(ex.model);
    return st;
}

// "seed": n (default 1) or "seeds": [n, ...]: every defense setting runs once per seed.
// Seeds are integers in [0, 2^53] (exact in JSON), without repeats.
static FpStatus parse_seeds(Matrix *m, FpError *err) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(m->root, "seeds");
    if (!list) {
        long long seed;
        FP_TRY(jv_int(m->root, "", "seed", JV_OPTIONAL, 1, 0, (long long)1 << 53, &seed, err));
        if (!(m->seeds = fp_malloc(sizeof(uint64_t), err)))
            return FP_ENOMEM;
        m->seeds[0] = (uint64_t)seed;
        m->n_seeds = 1;
        return FP_OK;
    }
    if (cJSON_GetObjectItemCaseSensitive(m->root, "seed"))
        return fp_fail(err, FP_EPARAM, "seeds: give either \"seed\" or \"seeds\", not both");
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        return fp_fail(err, FP_EPARAM, "seeds: must be a non-empty list of integers");
    int n = cJSON_GetArraySize(list);
    if (n > 1000)
        return fp_fail(err, FP_EPARAM, "seeds: at most 1000 seeds, got %d", n);
    if (!(m->seeds = fp_malloc(sizeof(uint64_t) * (size_t)n, err)))
        return FP_ENOMEM;
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(list, i);
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (!(d >= 0 && d <= 9007199254740992.0 && d == floor(d)))
            return fp_fail(err, FP_EPARAM, "seeds[%d]: must be an integer in [0, 2^53]", i);
        m->seeds[i] = (uint64_t)d;
        for (int j = 0; j < i; j++)
            if (m->seeds[j] == m->seeds[i])
                return fp_fail(err, FP_EPARAM, "seeds[%d]: %llu appears twice (also seeds[%d])", i,
                               (unsigned long long)m->seeds[i], j);
        m->n_seeds = i + 1;
    }
    return FP_OK;
}

FpStatus matrix_load(const cJSON *root_in, const MatrixOptions *opt, Matrix **out, FpError *err) {
    *out = NULL;
    MatrixOptions none = {0};
    if (!opt)
        opt = &none;
    Matrix *m = fp_calloc(1, sizeof *m, err);
    if (!m)
        return FP_ENOMEM;
    if (opt->registry)
        m->reg = *opt->registry;
    snprintf(m->file, sizeof m->file, "%s", opt->file ? opt->file : "");
    FpStatus st = FP_OK;
#define TRY(x)                      \
    do {                            \
        if ((st = (x)) != FP_OK)    \
            goto fail;              \
    } while (0)
    static const char *const keys[] = {"name", "seed", "seeds", "description", "dataset", "model", "federation",
                                       "device", "threads", "rng", "defenses", "attacks", NULL};
    TRY(jv_keys(root_in, "", keys, err));
    m->root = cJSON_Duplicate(root_in, 1);
    if (!m->root)
        TRY(fp_fail(err, FP_ENOMEM, "out of memory"));
    const char *desc, *name;
    TRY(jv_string(m->root, "", "description", JV_OPTIONAL, "", &desc, err));
    TRY(jv_string(m->root, "", "name", JV_OPTIONAL, NULL, &name, err));
    TRY(matrix_owner_check_name(name, err));
    matrix_owner_init(m, name, opt->file);
    TRY(parse_seeds(m, err));
    // Names and lists first: cheap, and the most common mistakes.
    const cJSON *defs = cJSON_GetObjectItemCaseSensitive(m->root, "defenses");
    if (!defs)
        TRY(fp_fail(err, FP_EPARAM, "defenses: required list is missing"));
    if (!cJSON_IsArray(defs))
        TRY(fp_fail(err, FP_EPARAM, "defenses: must be a list of defense objects"));
    if (cJSON_GetArraySize(defs) == 0)
        TRY(fp_fail(err, FP_EPARAM, "defenses: empty list"));
    TRY(check_matrix_size(defs, cJSON_GetObjectItemCaseSensitive(m->root, "attacks"), m->n_seeds, err));
    for (int i = 0; i < cJSON_GetArraySize(defs); i++)
        TRY(expand_defense(m, i, cJSON_GetArrayItem(defs, i), err));
    TRY(load_attacks(m, cJSON_GetObjectItemCaseSensitive(m->root, "attacks"), err));
    // The experiment without a defense: seed, data, model, federation, device, threads.
    m->base_root = cJSON_Duplicate(m->root, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(m->base_root, "name"); // the folder's, not the cells' (matrix_owner.c)
    cJSON_DeleteItemFromObjectCaseSensitive(m->base_root, "defenses");
    cJSON_DeleteItemFromObjectCaseSensitive(m->base_root, "attacks");
    // The first seed stands for all: data and architecture do not depend on it; each
    // cell re-initialises its models from its own seed.
    cJSON_DeleteItemFromObjectCaseSensitive(m->base_root, "seeds");
    cJSON_DeleteItemFromObjectCaseSensitive(m->base_root, "seed");
    cJSON_AddNumberToObject(m->base_root, "seed", (double)m->seeds[0]);
    // (no "defense" here: each cell sets its own)
    TRY(experiment_load(m->base_root, NULL, opt->device, opt->threads, NULL, &m->base, err));
    m->have_base = 1;
    TRY(expand_attacks(m, err));
    for (int k = 0; k < m->n_attacks; k++) {
        AttackSpec *as = &m->attacks[k];
        if (!as->model_json)
            continue;
        char p[64];
        snprintf(p, sizeof p, "%s.model", as->path);
        as->proto = model_create(as->model_json, p, &m->base.shape, m->base.backend, err);
        if (!as->proto)
            TRY(err ? err->code : FP_EPARAM);
        TRY(model_init(as->proto, m->base.seed, err));
    }
    for (int i = 0; i < m->n_cells; i++) {
        Cell *c = &m->cells[i];
        cJSON *spec = cell_spec(m, c);
        char *text = compact(spec);
        uint64_t h = fnv1a(text);
        free(text);
        c->spec = spec;
        snprintf(c->hash, sizeof c->hash, "%016llx", (unsigned long long)h);
        char slug[64];
        slugify(c->label, slug, sizeof slug);
        if (m->n_seeds > 1)
            snprintf(c->id, sizeof c->id, "%s-s%llu-%.8s", slug, (unsigned long long)c->seed, c->hash);
        else
            snprintf(c->id, sizeof c->id, "%s-%.8s", slug, c->hash);
        for (int j = 0; j < i; j++)
            if (strcmp(m->cells[j].hash, c->hash) == 0)
                TRY(fp_fail(err, FP_EPARAM, "%s: the setting \"%.80s\" appears twice (also in %s)", c->path, c->label,
                            m->cells[j].path));
    }
    // Every setting's parameters once (the seed changes none), on-axis cells first
    // (expand_defense): a bad value in a long list is reported after a few validations.
    if (opt->progress && m->n_cells >= 100) {
        fp_print_line(opt->progress, "matrix: checking the parameters of %d cells", m->n_cells);
        fflush(opt->progress);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < m->n_cells; i++)
            if (m->cells[i].on_axis == !pass && (i == 0 || m->cells[i].setting != m->cells[i - 1].setting))
                TRY(validate_cell(m, &m->cells[i], err));
    // Nor its cost: a setting's other seeds (the cells after its first) take its estimate.
    // Left at 0 they would run last under "largest first" and give the progress a rate of
    // seconds per cost unit that no other cell's cost is measured in.
    for (int i = 1; i < m->n_cells; i++)
        if (m->cells[i].setting == m->cells[i - 1].setting)
            m->cells[i].cost = m->cells[i - 1].cost;
#undef TRY
    *out = m;
    return FP_OK;
fail:
    matrix_free(m);
    return st;
}

void matrix_free(Matrix *m) {
    if (!m)
        return;
    for (int i = 0; i < m->n_cells; i++) {
        cJSON_Delete(m->cells[i].defense);
        cJSON_Delete(m->cells[i].params);
        cJSON_Delete(m->cells[i].spec);
    }
    free(m->cells);
    free(m->seeds);
    for (int k = 0; k < m->n_attacks; k++) {
        cJSON_Delete(m->attacks[k].json);
        cJSON_Delete(m->attacks[k].model_json);
        model_free(m->attacks[k].proto);
    }
    free(m->attacks);
    if (m->have_base)
        experiment_free(&m->base);
    cJSON_Delete(m->base_root);
    cJSON_Delete(m->root);
    free(m);
}

int matrix_cell_count(const Matrix *m) { return m->n_cells; }
const char *matrix_cell_id(const Matrix *m, int i) { return i >= 0 && i < m->n_cells ? m->cells[i].id : NULL; }
const char *matrix_cell_label(const Matrix *m, int i) {
    return i >= 0 && i < m->n_cells ? m->cells[i].label : NULL;
}
uint64_t matrix_cell_cost(const Matrix *m, int i) { return i >= 0 && i < m->n_cells ? m->cells[i].cost : 0; }
