// The summary of a matrix run (see reports/summary.h).
#include "reports/summary.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"
#include "reports/verdict.h"

// ---- building ------------------------------------------------------------------------------

static const char *jstr(const cJSON *o, const char *key, const char *def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : def;
}

static const cJSON *jget(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static void add_warning(RunSummary *S, const char *kind, int setting, int attack, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add_warning(RunSummary *S, const char *kind, int setting, int attack, const char *fmt, ...) {
    char msg[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    RunWarning *w = realloc(S->warnings, sizeof(RunWarning) * (size_t)(S->n_warnings + 1));
    if (!w) {
        S->oom = 1;
        return;
    }
    S->warnings = w;
    RunWarning *x = &w[S->n_warnings];
    snprintf(x->kind, sizeof x->kind, "%s", kind);
    x->setting = setting;
    x->attack = attack;
    if ((x->message = strdup(msg)))
        S->n_warnings++;
    else
        S->oom = 1;
}

// The columns: per attack of the index, its headline and the secondary metrics that at
// least one finished result reports.
static FpStatus build_columns(RunSummary *S) {
    const MatrixResults *r = S->r;
    S->n_attacks = matrix_attack_count(r);
    S->attacks = calloc((size_t)(S->n_attacks ? S->n_attacks : 1), sizeof(AttackColumn));
    if (!S->attacks)
        return FP_ENOMEM;
    static const char *const secondary[] = {"tpr_at_fpr.0.01", "recovered_fraction", NULL};
    for (int k = 0; k < S->n_attacks; k++) {
        AttackColumn *c = &S->attacks[k];
        c->index = matrix_index_attack(r, k);
        c->name = jstr(c->index, "name", "?");
        c->label = jstr(c->index, "label", c->name);
        c->headline = jstr(c->index, "headline", "");
        c->higher_leaks = !cJSON_IsFalse(jget(c->index, "higher_leaks"));
        c->keys[0] = c->headline;
        c->n_keys = 1;
        for (int q = 0; secondary[q] && c->n_keys < SUMMARY_MAX_KEYS; q++) {
            if (strcmp(secondary[q], c->headline) == 0)
                continue;
            int found = 0;
            for (int i = 0; i < r->n && !found; i++)
                found = r->cells[i] && isfinite(results_attack_metric(matrix_cell_attack_at(r->cells[i], k), secondary[q]));
            if (found)
                c->keys[c->n_keys++] = secondary[q];
        }
        for (int j = 0; j < c->n_keys; j++)
            c->scales[j] = metric_scale(c->keys[j]);
    }
    return FP_OK;
}

static FpStatus metric_alloc(MetricSummary *m, int n) {
    m->values = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!m->values)
        return FP_ENOMEM;
    for (int i = 0; i < n; i++)
        m->values[i] = NAN;
    m->successes = m->trials = NAN;
    return FP_OK;
}

// A proportion's counts: proportion_start before the seeds, one proportion_add per seed
// with a value. A seed without valid counts makes the pool NaN (NaN + k stays NaN), so
// an interval never pools a part of the seeds; no seed leaves it NaN too.
static void proportion_start(MetricSummary *m) { m->successes = m->trials = 0; }

static void proportion_add(MetricSummary *m, double k, double n) {
    if (n > 0 && k >= 0 && k <= n) {
        m->successes += k;
        m->trials += n;
    } else
        m->successes = m->trials = NAN;
}

static void proportion_finish(MetricSummary *m) {
    if (!(m->trials > 0))
        m->successes = m->trials = NAN;
}

// The attack result keys that are proportions, and where a result holds their counts:
// successes as a number, trials as the length of a list.
static const struct {
    const char *metric, *successes, *trials_list;
} proportion_counts[] = {
    {"recovered_fraction", "images_recovered", "images"},
};

static int proportion_of(const cJSON *attack_entry, const char *metric, double *k, double *n) {
    for (size_t i = 0; i < sizeof proportion_counts / sizeof proportion_counts[0]; i++) {
        if (strcmp(proportion_counts[i].metric, metric) != 0)
            continue;
        const cJSON *res = jget(attack_entry, "result"); // NULL entry: only "is it one?"
        const cJSON *list = jget(res, proportion_counts[i].trials_list);
        *k = jnum_value(jget(res, proportion_counts[i].successes));
        *n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : NAN;
        return 1;
    }
    return 0;
}

// Who sees what attack k observed: the result's own "observer" (declared observation
// points), else what its kind implies: gradient inversion and client targets see a
// client's upload as the server receives it ("server", before any server-side noise);
// a global-model target sees the released model ("public").
static const char *observer_of(const cJSON *attack_entry) {
    const cJSON *res = jget(attack_entry, "result");
    const char *o = jstr(res, "observer", NULL);
    if (o)
        return o;
    const cJSON *target = jget(res, "target");
    const char *kind = jstr(target, "kind", NULL);
    if (kind)
        return strcmp(kind, "client") == 0 ? "server" : strcmp(kind, "global") == 0 ? "public" : NULL;
    if (jget(res, "images") || jget(res, "threat_model"))
        return "server";
    return NULL;
}

static int attack_not_applicable(const cJSON *a) {
    return strcmp(jstr(a, "status", ""), "not_applicable") == 0 || cJSON_IsFalse(jget(a, "applicable")) ||
           cJSON_IsFalse(jget(jget(a, "result"), "applicable"));
}

static FpStatus build_setting(RunSummary *S, int si) {
    const MatrixResults *r = S->r;
    SettingSummary *s = &S->settings[si];
    s->runs = &r->settings[si];
    s->entry = matrix_index_cell(r, s->runs->runs[0]);
    s->label = jstr(s->entry, "label", "?");
    s->defense = jstr(s->entry, "defense", "?");
    s->variant = jstr(s->entry, "variant", NULL);
    s->params = jget(s->entry, "params");
    s->epsilon = jnum_value(jget(s->entry, "epsilon"));
    s->is_baseline = strcmp(s->defense, "none") == 0;
    s->unit = s->nominal_notion = s->sound_notion = s->guarantee = "";
    s->eps_nominal = s->eps_nominal_round = s->eps_sound = s->eps_conditional = s->delta = s->sigma = NAN;
    s->eps_upload = s->eps_upload_conditional = NAN;
    s->upload_guarantee = s->upload_notion = NULL;
    s->eps_standard_rdp = s->eps_standard_pld = NAN;
    s->participants = NAN;
    int n = s->runs->n_runs, K = S->n_attacks;
    FpStatus st = metric_alloc(&s->accuracy, n);
    if (st == FP_OK)
        st = metric_alloc(&s->loss, n);
    s->attack = calloc((size_t)(K ? K : 1) * SUMMARY_MAX_KEYS, sizeof(MetricSummary));
    s->not_applicable = calloc((size_t)(K ? K : 1), sizeof(int));
    s->observer = calloc((size_t)(K ? K : 1), sizeof(char *));
    if (!s->attack || !s->not_applicable || !s->observer)
        st = FP_ENOMEM;
    for (int q = 0; q < K * SUMMARY_MAX_KEYS && st == FP_OK; q++)
        st = metric_alloc(&s->attack[q], n);
    if (st != FP_OK)
        return st;
    // Proportions: accuracy counts correct test examples (of the index's test_samples), a
    // result key of proportion_counts its own successes and trials.
    double test_n = jnum_value(jget(jget(r->index, "dataset"), "test_samples"));
    if (test_n > 0 && test_n == floor(test_n))
        proportion_start(&s->accuracy);
    for (int k = 0; k < K; k++)
        for (int q = 0; q < S->attacks[k].n_keys; q++) {
            double pk, pn;
            if (proportion_of(NULL, S->attacks[k].keys[q], &pk, &pn))
                proportion_start(&s->attack[k * SUMMARY_MAX_KEYS + q]);
        }
    for (int j = 0; j < n; j++) {
        int i = s->runs->runs[j];
        const cJSON *c = r->cells[i];
        switch (r->status[i]) {
        case CELL_DONE: s->n_done++; break;
        case CELL_DIVERGED: s->n_diverged++; break;
        case CELL_FAILED: s->n_failed++; break;
        default: s->n_pending++; break;
        }
        if (!c)
            continue;
        s->accuracy.values[j] = results_cell_metric(c, "model_accuracy");
        s->loss.values[j] = results_cell_metric(c, "model_loss");
        if (!isnan(s->accuracy.values[j]) && !isnan(s->accuracy.trials)) // counts rounded from the fraction
            proportion_add(&s->accuracy, round(s->accuracy.values[j] * test_n), test_n);
        const cJSON *p = jget(c, "privacy");
        if (p && !s->privacy) {
            s->privacy = p;
            const cJSON *nom = jget(p, "nominal"), *snd = jget(p, "sound");
            s->unit = jstr(p, "unit", "");
            s->guarantee = jstr(p, "guarantee", "");
            s->nominal_notion = jstr(nom, "notion", "");
            s->sound_notion = jstr(snd, "notion", "");
            s->eps_nominal = jnum_value(jget(nom, "epsilon_total"));
            s->eps_nominal_round = jnum_value(jget(nom, "epsilon_round"));
            s->eps_sound = jnum_value(jget(snd, "epsilon_total"));
            s->eps_conditional = jnum_value(jget(snd, "epsilon_total_conditional"));
            s->delta = jnum_value(jget(snd, "delta"));
            s->sigma = jnum_value(jget(p, "sigma"));
            s->eps_standard_rdp = jnum_value(jget(jget(p, "standard"), "rdp"));
            s->eps_standard_pld = jnum_value(jget(jget(p, "standard"), "pld"));
            s->assumptions = jget(p, "assumptions");
            const cJSON *up = jget(snd, "upload");
            if (up) {
                s->eps_upload = jnum_value(jget(up, "epsilon_total"));
                s->eps_upload_conditional = jnum_value(jget(up, "epsilon_total_conditional"));
                s->upload_guarantee = jstr(up, "guarantee", s->guarantee);
                s->upload_notion = jstr(up, "notion", "");
            }
        }
        if (!s->noise_point)
            s->noise_point = jstr(jget(c, "defense_resolved"), "noise", NULL);
        const cJSON *rounds = jget(jget(c, "model"), "rounds");
        if (isnan(s->participants) && cJSON_GetArraySize(rounds) > 0) {
            double sum = 0;
            int m = 0;
            const cJSON *ro;
            cJSON_ArrayForEach(ro, rounds) {
                double pv = jnum_value(jget(ro, "participants"));
                if (isfinite(pv)) {
                    sum += pv;
                    m++;
                }
            }
            if (m)
                s->participants = sum / m;
        }
        for (int k = 0; k < K; k++) {
            const cJSON *a = matrix_cell_attack_at(c, k);
            if (!a)
                continue;
            // Its observer, from a result that finished (one that does not apply says it too).
            if (!s->observer[k] && (strcmp(jstr(a, "status", ""), "done") == 0 || attack_not_applicable(a)))
                s->observer[k] = observer_of(a);
            if (attack_not_applicable(a)) {
                s->not_applicable[k]++;
                continue;
            }
            for (int q = 0; q < S->attacks[k].n_keys; q++) {
                MetricSummary *m = &s->attack[k * SUMMARY_MAX_KEYS + q];
                m->values[j] = results_attack_metric(a, q == 0 ? "headline" : S->attacks[k].keys[q]);
                double pk, pn;
                if (!isnan(m->values[j]) && !isnan(m->trials) && proportion_of(a, S->attacks[k].keys[q], &pk, &pn))
                    proportion_add(m, pk, pn);
            }
        }
    }
    seed_stat(s->accuracy.values, n, &s->accuracy.stat);
    seed_stat(s->loss.values, n, &s->loss.stat);
    proportion_finish(&s->accuracy);
    for (int q = 0; q < K * SUMMARY_MAX_KEYS; q++) {
        seed_stat(s->attack[q].values, n, &s->attack[q].stat);
        proportion_finish(&s->attack[q]);
    }
    return FP_OK;
}

// ---- warnings --------------------------------------------------------------------------------

// Why a setting sits at chance: what its rounds and its privacy record say.
static void explain_chance(const RunSummary *S, const SettingSummary *s, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    // The per-round trajectory of the first finished run.
    const cJSON *rounds = NULL;
    for (int j = 0; j < s->runs->n_runs && !rounds; j++) {
        const cJSON *c = S->r->cells[s->runs->runs[j]];
        if (c && cJSON_GetArraySize(jget(jget(c, "model"), "rounds")) > 0)
            rounds = jget(jget(c, "model"), "rounds");
    }
    double best = NAN, last_loss = NAN;
    int best_round = 0, last_round = 0;
    const cJSON *ro;
    cJSON_ArrayForEach(ro, rounds) {
        double a = jnum_value(jget(ro, "test_accuracy"));
        int rn = (int)jnum_value(jget(ro, "round"));
        last_round = rn;
        last_loss = jnum_value(jget(ro, "test_loss"));
        if (isfinite(a) && !(a <= best)) {
            best = a;
            best_round = rn;
        }
    }
    // A model that answers at random has a test loss of about ln C (C classes); far above
    // it, the noise has blown the weights up.
    double classes = jnum_value(jget(jget(S->r->index, "dataset"), "classes"));
    double uniform = classes >= 2 ? log(classes) : NAN;
    if (isfinite(last_loss) && isfinite(uniform) && last_loss > 10 * uniform)
        k += (size_t)snprintf(buf + k, n - k, "The noise has blown the weights up: the final test loss is %.4g (a "
                              "model that answers at random has %.2f). ", last_loss, uniform);
    else if (isfinite(best) && best > S->chance + 0.05 && best_round > 1)
        k += (size_t)snprintf(buf + k, n - k, "It reached %.3f in round %d and fell back by round %d: training became "
                              "unstable under the noise. ", best, best_round, last_round);
    else if (isfinite(best))
        k += (size_t)snprintf(buf + k, n - k, "It never rose more than %.0f points above chance in any round (best "
                              "%.3f). ", fmax(0, (best - S->chance) * 100), best);
    if (k >= n)
        return;
    double P = s->participants;
    if (s->is_baseline)
        snprintf(buf + k, n - k, "There is no defense here: the federation itself does not learn (see its rounds, "
                 "learning rate and local epochs), so no other number in this run is meaningful.");
    else if (strcmp(s->unit, "client") == 0 && isfinite(s->sigma) && isfinite(P))
        snprintf(buf + k, n - k, "Client-level DP adds noise of multiplier σ = %.3g to the sum of the clipped updates "
                 "of about %.0f client%s per round, so the noise on their average is σ/m = %.3g times the clip "
                 "norm%s. Client-level DP learns only when many clients take part in each round (σ/m well below 0.1: "
                 "thousands of clients, sampled at q ≤ 0.1).",
                 s->sigma, P, P == 1 ? "" : "s", s->sigma / fmax(P, 1), s->sigma / fmax(P, 1) > 0.1 ? ", far more than the "
                 "signal" : "");
    else if (s->unit[0] && strcmp(s->unit, "client") != 0 && strcmp(s->unit, "none") != 0) {
        char part[64] = "the participants";
        if (isfinite(P))
            snprintf(part, sizeof part, "about %.0f participant%s", P, P == 1 ? "" : "s");
        snprintf(buf + k, n - k, "The defense is local: every upload is perturbed on its own (privacy unit: %s), so "
                 "averaging %s per round shrinks the noise only by the square root of their number; at this ε the "
                 "perturbed updates carry too little signal to train on.", s->unit, part);
    }
    else if (isfinite(s->sigma))
        snprintf(buf + k, n - k, "Noise scale σ = %.3g.", s->sigma);
}

static void warn_chance(RunSummary *S) {
    if (!isfinite(S->chance))
        return;
    for (int i = 0; i < S->n_settings; i++) {
        const SettingSummary *s = &S->settings[i];
        const SeedStat *a = &s->accuracy.stat;
        if (a->n == 0 || !isfinite(a->mean))
            continue;
        int at = a->mean <= S->chance + 0.02;
        // Near chance: less than a tenth of the way from chance to the accuracy without a
        // defense (the accuracy colour scale's red end), when that baseline learned.
        double base = S->baseline >= 0 ? S->settings[S->baseline].accuracy.stat.mean : NAN;
        int near = !at && !s->is_baseline && isfinite(base) && base > S->chance + 0.02 &&
                   a->mean - S->chance < ACCURACY_NEAR_CHANCE_SHARE * (base - S->chance);
        if (!at && !near)
            continue;
        char why[1100];
        explain_chance(S, s, why, sizeof why);
        if (at)
            add_warning(S, "accuracy_at_chance", i, -1,
                        "%s: model accuracy %.3f is no better than chance (%.3f, always answering the most frequent "
                        "class, + 2 points); its attack numbers describe a model that learned nothing. %s",
                        s->label, a->mean, S->chance, why);
        else
            add_warning(S, "accuracy_near_chance", i, -1,
                        "%s: model accuracy %.3f is close to chance (%.3f): it keeps %.0f%% of what the federation "
                        "learns without a defense (%.3f), so its attack numbers describe a model that learned almost "
                        "nothing. %s",
                        s->label, a->mean, S->chance, 100 * (a->mean - S->chance) / (base - S->chance), base, why);
    }
}

// Runs of a setting whose test loss exploded while the weights stayed finite
// (fl/experiment.h, FED_LOSS_EXPLODED_FACTOR): their accuracy is not a trained model's,
// whether or not it sits near chance.
static void warn_exploded(RunSummary *S) {
    for (int i = 0; i < S->n_settings; i++) {
        const SettingSummary *s = &S->settings[i];
        int n = 0, first = 0;
        const cJSON *example = NULL;
        for (int j = 0; j < s->runs->n_runs; j++) {
            const cJSON *boom = jget(jget(S->r->cells[s->runs->runs[j]], "model"), "loss_exploded");
            if (!cJSON_IsObject(boom))
                continue;
            n++;
            if (!example) {
                example = boom;
                first = j;
            }
        }
        if (!example)
            continue;
        const cJSON *msg = jget(example, "message");
        add_warning(S, "loss_exploded", i, -1, "%s: %d of %d run%s exploded; run %d: %s", s->label, n,
                    s->runs->n_runs, s->runs->n_runs == 1 ? "" : "s", first + 1,
                    cJSON_IsString(msg) ? msg->valuestring : "the test loss exploded");
    }
}

static void warn_attacks(RunSummary *S) {
    if (S->baseline < 0) {
        if (S->n_attacks > 0)
            add_warning(S, "no_baseline", -1, -1, "No setting runs without a defense (\"none\"), so nothing shows "
                        "that the attacks work at all in this federation: a low leak under a defense may be a "
                        "broken or inapplicable attack.");
        return;
    }
    const SettingSummary *b = &S->settings[S->baseline];
    for (int k = 0; k < S->n_attacks; k++) {
        const AttackColumn *c = &S->attacks[k];
        const MetricSummary *m = setting_attack_metric(b, k, 0);
        if (b->not_applicable[k]) {
            add_warning(S, "attack_not_applicable", S->baseline, k, "%s reports itself not applicable in this "
                        "federation (without a defense).", c->label);
            continue;
        }
        if (m->stat.n == 0 || !c->scales[0])
            continue;
        // The mean over seeds within a tenth of the way from chance to a full leak (AUC
        // below 0.55, SSIM below 0.1).
        if (metric_leak(c->scales[0], m->stat.mean) < STATS_LEAK_SHARE)
            add_warning(S, "attack_fails_without_defense", S->baseline, k,
                        "%s does not leak without any defense (%s %.3f; chance %.3g): it finds nothing to protect "
                        "here, so its values under the defenses say nothing about them (not applicable).",
                        c->label, c->scales[0]->name, m->stat.mean, c->scales[0]->chance);
    }
}

static void warn_notions(RunSummary *S) {
    // Distinct (unit, nominal notion) pairs among the defended settings.
    const SettingSummary *first[32];
    int nd = 0;
    for (int i = 0; i < S->n_settings && nd < 32; i++) {
        const SettingSummary *s = &S->settings[i];
        if (s->is_baseline || !s->privacy)
            continue;
        int seen = 0;
        for (int j = 0; j < nd && !seen; j++)
            seen = strcmp(first[j]->unit, s->unit) == 0 && strcmp(first[j]->nominal_notion, s->nominal_notion) == 0;
        if (!seen)
            first[nd++] = s;
    }
    if (nd < 2)
        return;
    char list[1000];
    size_t k = 0;
    for (int j = 0; j < nd && k < sizeof list; j++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s: per %s, %.120s", j ? "; " : "", first[j]->defense,
                              first[j]->unit[0] ? first[j]->unit : "?", first[j]->nominal_notion);
    add_warning(S, "mixed_epsilon_notions", -1, -1,
                "The nominal ε values in this table are of %d different units or notions (%s). They are not "
                "comparable with each other; compare the sound ε column, one notion ((ε, δ)-DP, per its unit) "
                "with its guarantee.",
                nd, list);
}

// Observers that see a client's upload before the server adds its noise: "server" (the
// upload as the server receives it) and "upload" (as the client sends it). "public" sees
// the released aggregate, after the server's noise.
static const char *const observers_before_server_noise[] = {"server", "upload"};

int setting_observes_before_noise(const SettingSummary *s, int k) {
    if (!s->noise_point || !s->observer[k] || strcmp(s->noise_point, "server") != 0)
        return 0;
    for (size_t i = 0; i < sizeof observers_before_server_noise / sizeof observers_before_server_noise[0]; i++)
        if (strcmp(s->observer[k], observers_before_server_noise[i]) == 0)
            return 1;
    return 0;
}

// One warning per setting, naming every attack that observes before the server's noise
// (setting_observes_before_noise says which).
static void warn_noise_point(RunSummary *S) {
    for (int i = 0; i < S->n_settings; i++) {
        const SettingSummary *s = &S->settings[i];
        char names[400];
        size_t k = 0;
        int n = 0;
        names[0] = 0;
        for (int a = 0; a < S->n_attacks && k < sizeof names; a++)
            if (setting_observes_before_noise(s, a)) {
                k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", n ? ", " : "", S->attacks[a].label);
                n++;
            }
        if (n)
            add_warning(S, "noise_after_observation", i, -1,
                        "%s: the defense adds its noise at the server, after the point %s observe%s (a client's "
                        "upload as the server receives it): the attack sees the clipped update without noise, "
                        "whatever ε. Its numbers here measure clipping only.",
                        s->label, names, n == 1 ? "s" : "");
    }
}

FpStatus run_summary_build(const MatrixResults *r, RunSummary *S, FpError *err) {
    memset(S, 0, sizeof *S);
    S->r = r;
    S->baseline = -1;
    const cJSON *ds = jget(r->index, "dataset");
    S->chance = jnum_value(jget(ds, "chance_accuracy"));
    double classes = jnum_value(jget(ds, "classes"));
    if (isnan(S->chance) && classes >= 2)
        S->chance = 1 / classes;
    FpStatus st = build_columns(S);
    S->n_settings = r->n_settings;
    if (st == FP_OK && !(S->settings = calloc((size_t)(r->n_settings ? r->n_settings : 1), sizeof(SettingSummary))))
        st = FP_ENOMEM;
    for (int i = 0; i < S->n_settings && st == FP_OK; i++) {
        st = build_setting(S, i);
        if (S->settings[i].runs->n_runs > S->n_seeds)
            S->n_seeds = S->settings[i].runs->n_runs;
        if (S->baseline < 0 && S->settings[i].is_baseline)
            S->baseline = i;
    }
    if (st != FP_OK) {
        run_summary_free(S);
        return fp_fail(err, st, "out of memory summarising the run");
    }
    int any_acc = 0;
    for (int i = 0; i < S->n_settings; i++)
        any_acc |= S->settings[i].accuracy.stat.n > 0;
    int any_loss = 0;
    for (int i = 0; i < S->n_settings; i++)
        any_loss |= S->settings[i].loss.stat.n > 0;
    S->regression = !any_acc && any_loss;
    warn_chance(S);
    warn_exploded(S);
    warn_attacks(S);
    warn_notions(S);
    warn_noise_point(S);
    if (S->oom) { // a report or results.json without one of its warnings would read as complete
        run_summary_free(S);
        return fp_fail(err, FP_ENOMEM, "out of memory summarising the run");
    }
    return FP_OK;
}

void run_summary_free(RunSummary *S) {
    for (int i = 0; S->settings && i < S->n_settings; i++) {
        SettingSummary *s = &S->settings[i];
        free(s->accuracy.values);
        free(s->loss.values);
        for (int q = 0; s->attack && q < S->n_attacks * SUMMARY_MAX_KEYS; q++)
            free(s->attack[q].values);
        free(s->attack);
        free(s->not_applicable);
        free(s->observer);
    }
    free(S->settings);
    free(S->attacks);
    for (int i = 0; i < S->n_warnings; i++)
        free(S->warnings[i].message);
    free(S->warnings);
    memset(S, 0, sizeof *S);
}

// ---- JSON --------------------------------------------------------------------------------------

static cJSON *metric_json(const MetricSummary *m, int n) {
    cJSON *o = cJSON_CreateObject();
    MetricInterval iv = metric_interval(m);
    jnum_add(o, "mean", m->stat.mean);
    jnum_add(o, "ci_low", iv.low);
    jnum_add(o, "ci_high", iv.high);
    cJSON_AddStringToObject(o, "interval", interval_kind_name(iv.kind));
    if (iv.kind == INTERVAL_WILSON) {
        cJSON_AddNumberToObject(o, "successes", m->successes);
        cJSON_AddNumberToObject(o, "trials", m->trials);
    }
    jnum_add(o, "min", m->stat.min);
    jnum_add(o, "max", m->stat.max);
    cJSON_AddNumberToObject(o, "n", m->stat.n);
    cJSON *v = cJSON_AddArrayToObject(o, "values");
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(v, jnum_create(m->values[i]));
    return o;
}

cJSON *run_summary_json(const RunSummary *S) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "statistics",
                            "mean over seeds; ci_low, ci_high: a 95% interval, by \"interval\": \"wilson\" for a "
                            "proportion with counts (the successes of the trials pooled over the seeds), "
                            "\"student-t\" for the mean of another metric from 3 seeds, \"none\" (null ends) "
                            "otherwise; min, max: of the seeds' values; n: seeds with a value; values: per seed, in "
                            "the order of the setting's cells");
    jnum_add(j, "chance_accuracy", S->chance);
    cJSON *settings = cJSON_AddArrayToObject(j, "settings");
    for (int i = 0; i < S->n_settings; i++) {
        const SettingSummary *s = &S->settings[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "label", s->label);
        cJSON_AddStringToObject(o, "defense", s->defense);
        if (s->variant)
            cJSON_AddStringToObject(o, "variant", s->variant);
        jnum_add(o, "epsilon", s->epsilon);
        if (s->params)
            cJSON_AddItemToObject(o, "params", cJSON_Duplicate(s->params, 1));
        cJSON *cells = cJSON_AddArrayToObject(o, "cells"), *seeds = cJSON_AddArrayToObject(o, "seeds");
        for (int q = 0; q < s->runs->n_runs; q++) {
            const cJSON *e = matrix_index_cell(S->r, s->runs->runs[q]);
            cJSON_AddItemToArray(cells, cJSON_CreateString(jstr(e, "id", "?")));
            cJSON_AddItemToArray(seeds, jnum_create(jnum_value(jget(e, "seed"))));
        }
        cJSON *cnt = cJSON_AddObjectToObject(o, "counts");
        cJSON_AddNumberToObject(cnt, "done", s->n_done);
        cJSON_AddNumberToObject(cnt, "diverged", s->n_diverged);
        cJSON_AddNumberToObject(cnt, "failed", s->n_failed);
        cJSON_AddNumberToObject(cnt, "pending", s->n_pending);
        cJSON *pr = cJSON_AddObjectToObject(o, "privacy");
        cJSON_AddStringToObject(pr, "unit", s->unit);
        jnum_add(pr, "epsilon_nominal", s->eps_nominal);
        cJSON_AddStringToObject(pr, "nominal_notion", s->nominal_notion);
        jnum_add(pr, "epsilon_sound", s->eps_sound);
        jnum_add(pr, "delta", s->delta);
        cJSON_AddStringToObject(pr, "guarantee", s->guarantee);
        if (isfinite(s->eps_conditional))
            jnum_add(pr, "epsilon_conditional", s->eps_conditional);
        if (s->upload_guarantee) {
            cJSON *up = cJSON_AddObjectToObject(pr, "upload");
            jnum_add(up, "epsilon_sound", s->eps_upload);
            if (isfinite(s->eps_upload_conditional))
                jnum_add(up, "epsilon_conditional", s->eps_upload_conditional);
            cJSON_AddStringToObject(up, "guarantee", s->upload_guarantee);
        }
        cJSON_AddStringToObject(pr, "sound_notion", s->sound_notion);
        int n = s->runs->n_runs;
        cJSON *metrics = cJSON_AddObjectToObject(o, "metrics");
        cJSON_AddItemToObject(metrics, "model_accuracy", metric_json(&s->accuracy, n));
        cJSON_AddItemToObject(metrics, "model_loss", metric_json(&s->loss, n));
        cJSON *atk = cJSON_AddArrayToObject(o, "attacks");
        for (int k = 0; k < S->n_attacks; k++) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, "label", S->attacks[k].label);
            if (s->not_applicable[k])
                cJSON_AddBoolToObject(a, "not_applicable", 1);
            if (s->observer[k])
                cJSON_AddStringToObject(a, "observer", s->observer[k]);
            for (int q = 0; q < S->attacks[k].n_keys; q++)
                cJSON_AddItemToObject(a, S->attacks[k].keys[q], metric_json(setting_attack_metric(s, k, q), n));
            cJSON_AddItemToArray(atk, a);
        }
        cJSON_AddItemToArray(settings, o);
    }
    RunVerdict v;
    if (run_verdict_build(S, &v) != FP_OK) { // out of memory: no summary, never one without its verdict
        run_verdict_free(&v);
        cJSON_Delete(j);
        return NULL;
    }
    cJSON_AddItemToObject(j, "verdict", run_verdict_json(&v));
    run_verdict_free(&v);
    cJSON *w = cJSON_AddArrayToObject(j, "warnings");
    for (int i = 0; i < S->n_warnings; i++) {
        const RunWarning *x = &S->warnings[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", x->kind);
        if (x->setting >= 0)
            cJSON_AddStringToObject(o, "setting", S->settings[x->setting].label);
        if (x->attack >= 0)
            cJSON_AddStringToObject(o, "attack", S->attacks[x->attack].label);
        cJSON_AddStringToObject(o, "message", x->message);
        cJSON_AddItemToArray(w, o);
    }
    return j;
}
