// The cost model of matrix cells (runner/cell_cost.h).
#include "runner/cell_cost.h"

#include <math.h>
#include <stdlib.h>

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }

// Participants per round: round(q·N) clients for fixed-size sampling, the expected
// number q·N (rounded) for Bernoulli sampling; at least one.
static uint64_t participants(const FedConfig *fed) {
    long m = lround(fed->sample_rate * fed->clients);
    if (m < 1)
        m = 1;
    if (m > fed->clients)
        m = fed->clients;
    return (uint64_t)m;
}

uint64_t cost_train(const FedConfig *fed, int n_train, uint64_t samples, uint64_t params) {
    uint64_t n = fed->clients > 0 ? (uint64_t)fed->clients : 1;
    uint64_t per_round = sat_mul(participants(fed), (uint64_t)(fed->rounds > 0 ? fed->rounds : 0));
    uint64_t local; // sample passes of one participant in one round, times N (divided below)
    if (fed->local_steps > 0)
        local = sat_mul(sat_mul((uint64_t)fed->local_steps, (uint64_t)fed->batch_size), n);
    else
        local = sat_mul((uint64_t)(fed->local_epochs > 0 ? fed->local_epochs : 1), samples);
    return sat_mul(sat_mul(sat_mul(per_round, local) / n, params), 3);
}

FpStatus cost_cell(const Experiment *ex, const AttackOps *const *attacks, const AttackEnv *env, int n_attacks,
                   uint64_t *out, FpError *err) {
    const FedConfig *fed = &ex->fed;
    uint64_t params = (uint64_t)ex->model->table.n_params;
    uint64_t n = fed->clients > 0 ? (uint64_t)fed->clients : 1;
    uint64_t s = fed->samples_per_client > 0 ? (uint64_t)fed->samples_per_client : (uint64_t)ex->train->n / n;
    if (fed->samples_per_client > 0 && s > (uint64_t)ex->train->n / n)
        s = (uint64_t)ex->train->n / n;
    uint64_t eval = sat_mul(sat_mul(params, (uint64_t)fed->rounds), (uint64_t)ex->test->n);
    uint64_t own = cost_train(fed, ex->train->n, sat_mul(n, s), params);
    uint64_t total = sat_add(own, eval), target = 0;
    for (int k = 0; k < n_attacks; k++) {
        if (!attacks[k]->work) {
            total = sat_add(total, own);
            continue;
        }
        AttackWork w = {0};
        FP_TRY(attacks[k]->work(&env[k], &w, err));
        uint64_t p_attack = (uint64_t)env[k].ex->model->table.n_params;
        if (w.target_samples > target)
            target = w.target_samples;
        total = sat_add(total, cost_train(fed, ex->train->n, w.shadow_samples, params));
        total = sat_add(total, sat_mul(w.passes, p_attack));
    }
    if (target)
        total = sat_add(total, sat_add(cost_train(fed, ex->train->n, target, params), eval));
    *out = total;
    return FP_OK;
}

struct CostRates {
    int n_kinds;
    double *seconds, *units; // per kind: the ended cells' seconds and estimated costs
    double all_seconds, all_units;
};

CostRates *cost_rates_create(int n_kinds) {
    CostRates *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->n_kinds = n_kinds > 0 ? n_kinds : 0;
    r->seconds = calloc((size_t)(r->n_kinds ? r->n_kinds : 1), sizeof(double));
    r->units = calloc((size_t)(r->n_kinds ? r->n_kinds : 1), sizeof(double));
    if (!r->seconds || !r->units) {
        cost_rates_free(r);
        return NULL;
    }
    return r;
}

void cost_rates_free(CostRates *r) {
    if (!r)
        return;
    free(r->seconds);
    free(r->units);
    free(r);
}

static double cost_units(uint64_t cost) { return cost ? (double)cost : 1.0; }

void cost_rates_add(CostRates *r, int kind, uint64_t cost, double seconds) {
    if (!r || !(seconds >= 0) || !isfinite(seconds))
        return;
    double u = cost_units(cost);
    if (kind >= 0 && kind < r->n_kinds) {
        r->seconds[kind] += seconds;
        r->units[kind] += u;
    }
    r->all_seconds += seconds;
    r->all_units += u;
}

double cost_rates_predict(const CostRates *r, int kind, uint64_t cost) {
    if (!r || r->all_units <= 0)
        return NAN;
    int known = kind >= 0 && kind < r->n_kinds && r->units[kind] > 0;
    double rate = known ? r->seconds[kind] / r->units[kind] : r->all_seconds / r->all_units;
    return rate * cost_units(cost);
}
