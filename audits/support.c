// The support audit (audits/support.h).
#include "audits/support.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"

SupportConfig support_config_default(void) {
    return (SupportConfig){.samples = 100000, .seed = 1, .alpha = 0.05};
}

#define SUPPORT_SLICE (1LL << 18) // draws between progress checks (under 0.3 s at the slowest sampler)

// Every word at x against the witness: 1 when none gives it, 0 (and the word) when one does.
static int confirm_exhaustive(const Mech *m, double x, float y, uint32_t *word) {
    float xf = mech_input(m, x);
    uint32_t w[4] = {0};
    uint64_t v = 0;
    do {
        w[0] = (uint32_t)v;
        float out = m->sampler->one(m, xf, w, 0);
        if (out == y) {   // == as mech_possible compares (-0 and +0 are one output)
            *word = (uint32_t)v;
            return 0;
        }
    } while (++v <= 0xffffffffu);
    return 1;
}

FpStatus audit_support(const Mech *m, const SupportConfig *cfg, SupportResult *res, FpError *err) {
    double t0 = fp_monotonic_seconds();
    memset(res, 0, sizeof *res);
    if (cfg->samples < 1 || cfg->samples > AUDIT_MAX_SAMPLES)
        return fp_fail(err, FP_EPARAM, "audit.support_samples: must be in [1, %lld], got %lld", AUDIT_MAX_SAMPLES,
                       cfg->samples);
    if (!(cfg->alpha > 0 && cfg->alpha < 1))
        return fp_fail(err, FP_EPARAM, "audit.alpha: must be in (0, 1), got %g", cfg->alpha);
    double inputs[AUDIT_MAX_INPUTS];
    int n_in;
    FP_TRY(audit_inputs(m, cfg->inputs, cfg->n_inputs, inputs, &n_in, err));
    res->n_inputs = n_in;
    memcpy(res->inputs, inputs, sizeof(double) * (size_t)n_in);
    res->samples = cfg->samples;
    res->seed = cfg->seed;
    res->delta = m->spec.ops->takes_delta ? m->spec.delta : 0;
    res->decidable = 1;
    // Two-sided interval for each pair's share, Bonferroni over the pairs.
    double a = cfg->alpha / (2.0 * n_in * (n_in - 1));
    int confirmed_one = 0;
    FpProgress pr = audit_progress_start(cfg->progress, "support", cfg->samples * n_in * (n_in - 1));
    for (int i = 0; i < n_in; i++)
        for (int j = 0; j < n_in; j++) {
            if (i == j)
                continue;
            SupportPair *p = &res->pair[res->n_pairs];
            RngStream s = rng_stream(cfg->seed, RNG_AUDIT, (uint32_t)res->n_pairs, 2);
            res->n_pairs++;
            p->from = i;
            p->to = j;
            p->drawn = cfg->samples;
            p->confirmed = -1;
            // In slices of the same stream (the same draws as one call), for the progress line.
            p->impossible = 0;
            for (long long done = 0; done < cfg->samples && p->impossible >= 0; done += SUPPORT_SLICE) {
                long long len = cfg->samples - done < SUPPORT_SLICE ? cfg->samples - done : SUPPORT_SLICE;
                long long bad = mech_support_check(m, inputs[i], inputs[j], (uint64_t)done, len, &s,
                                                   p->impossible ? NULL : &p->witness);
                p->impossible = bad < 0 ? -1 : p->impossible + bad;
                fp_progress_add(&pr, len);
            }
            if (p->impossible < 0) {
                res->decidable = 0;
                p->share = p->share_lo = p->share_hi = NAN;
                continue;
            }
            p->has_witness = p->impossible > 0;
            p->share = (double)p->impossible / (double)p->drawn;
            p->share_lo = audit_cp_lower(p->impossible, p->drawn, a);
            p->share_hi = audit_cp_upper(p->impossible, p->drawn, a);
            res->impossible += p->impossible;
            if (p->has_witness && cfg->confirm && !confirmed_one && m->sampler->elements_per_block == 4) {
                p->confirmed = confirm_exhaustive(m, inputs[j], p->witness, &p->contradiction);
                confirmed_one = 1;
            }
        }
    int refuted = 0, over_delta = 0;
    for (int k = 0; k < res->n_pairs; k++) {
        const SupportPair *p = &res->pair[k];
        if (p->impossible > 0) {
            refuted = 1;
            over_delta |= p->share_lo > res->delta;
        }
    }
    res->epsilon_lower_bound = refuted && res->delta == 0 ? INFINITY : 0;
    res->pass = res->decidable && !over_delta;
    res->seconds = fp_monotonic_seconds() - t0;
    return FP_OK;
}

static void add_num(cJSON *o, const char *key, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else if (isinf(v) && v > 0)
        cJSON_AddStringToObject(o, key, "inf");
    else
        cJSON_AddNullToObject(o, key);
}

cJSON *audit_support_json(const SupportResult *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "samples", (double)r->samples);
    cJSON_AddNumberToObject(o, "seed", (double)r->seed);
    cJSON_AddBoolToObject(o, "decidable", r->decidable);
    cJSON *ps = cJSON_AddArrayToObject(o, "pairs");
    for (int k = 0; k < r->n_pairs; k++) {
        const SupportPair *p = &r->pair[k];
        cJSON *j = cJSON_CreateObject();
        add_num(j, "input", r->inputs[p->from]);
        add_num(j, "input_other", r->inputs[p->to]);
        cJSON_AddNumberToObject(j, "drawn", (double)p->drawn);
        if (p->impossible >= 0)
            cJSON_AddNumberToObject(j, "impossible", (double)p->impossible);
        else
            cJSON_AddNullToObject(j, "impossible");
        add_num(j, "share", p->share);
        cJSON *ci = cJSON_AddArrayToObject(j, "share_interval");
        cJSON_AddItemToArray(ci, isfinite(p->share_lo) ? cJSON_CreateNumber(p->share_lo) : cJSON_CreateNull());
        cJSON_AddItemToArray(ci, isfinite(p->share_hi) ? cJSON_CreateNumber(p->share_hi) : cJSON_CreateNull());
        if (p->has_witness) {
            cJSON_AddNumberToObject(j, "witness", p->witness);
            char hex[32];
            snprintf(hex, sizeof hex, "%a", p->witness);
            cJSON_AddStringToObject(j, "witness_hex", hex);
            if (p->confirmed >= 0)
                cJSON_AddStringToObject(j, "witness_check", p->confirmed ? "no word of 2^32 gives it"
                                                                         : "a word gives it: inverse search wrong");
        }
        cJSON_AddItemToArray(ps, j);
    }
    cJSON_AddNumberToObject(o, "impossible", (double)r->impossible);
    add_num(o, "epsilon_lower_bound", r->epsilon_lower_bound);
    cJSON_AddBoolToObject(o, "pass", r->pass);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    return o;
}
