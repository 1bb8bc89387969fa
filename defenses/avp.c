// `avp`: amplitude-varying perturbation (Yuan, Ni, Ding, Wei, Li, Poor, IEEE TIFS 2023,
// "Amplitude-varying perturbation for balancing privacy and utility in federated
// learning"; digest: shared spec amplitude-varying), and `nbafl`, its constant-noise
// baseline (Wei et al., TIFS 2020, "noising before aggregation") at the same budget.
//
// Client (upload = its local weights after training, trainable layers):
//   w ← w / max(1, ‖w‖₂/C)                              (NbAFL's parameter clipping)
//   w̃ = w + N(0, Θ(m) I),  Θ(m) = ϑ^{m−1}·σ²,  m = 1..M the aggregation (round)
// with σ from the seed's Theorem 1,
//   σ = (Δs/ε)·√(2q·S_M·ln(1/δ)),  S_M = Σ_{m=1..M} ϑ^{1−m} = (ϑ − ϑ^{1−M})/(ϑ − 1),
// q the sampling rate and M the planned rounds. nbafl is ϑ = 1: σ = (Δs/ε)√(2qM ln(1/δ)).
// Δs, the L2 distance one record can move the clipped weights, defaults to 2C: clipped
// weights lie in the ball of radius C, so that holds for any change of the client's data
// (proven). NbAFL's 2C/min_k |D_k| ("sensitivity": "2C/min|D_k|", the seed's choice) or
// any number below 2C is an assumption about several SGD steps that nothing here
// establishes: the bound is then conditional on it. The server averages with the
// engine's weights (|D_k|/Σ|D_j|), so the neighbours are datasets that replace a record
// (the counts stay the same).
//
// Accounting, side by side (PrivacyRecord):
//   nominal: the seed's composition rule ε² = 2q ln(1/δ)·Σ_m Δs²/Θ(m) (it drops zCDP's
//     additive ρ and amplifies linearly in q: a heuristic, digest §1.4); after M rounds
//     it equals the target ε by construction;
//   sound, an observer of the global models who does not learn which clients took part:
//     per round the client's upload is the Gaussian mechanism with multiplier √Θ(m)/Δs,
//     included with probability q (m/N for a fixed-size cohort) and absent otherwise;
//     the other clients' uploads are not relied on, so the amplification is the joint
//     convexity bound (RDP_SAMPLING_POISSON_REPLACE), composed over the rounds run,
//     Balle et al. 2020 conversion;
//   upload: the server and an eavesdropper on the uplink see each upload and who sent
//     it: no amplification; the exact ε of the Gaussian composition over every round
//     (Dong, Roth, Su 2022).
//
// Online refinement (Theorem 2), an event planned in the config: after round
// m0 = "refine_at" the remaining rounds up to M' = federation.rounds switch schedule.
//   corrected (default): the digest's sound rule. B = ε²/(2q ln(1/δ)) is the budget,
//     B_spent = Σ_{i≤m0} Δs²/Θ(i) what the rounds run have used; the remaining M'−m0
//     rounds get the constant variance V = Δs²(M'−m0)/(B − B_spent), so the nominal
//     ledger ends exactly at ε.
//   paper: Theorem 2 as printed: σ'² = (Δs/ε)²·2q·[S_{m0} + M' − m0]·ln(1/δ) held
//     constant (ϑ > 1), (Δs/ε)²·2q·M'·ln(1/δ) (ϑ = 1), and for ϑ < 1 the printed
//     (ϑ^{1−m0} − ϑ + ϑ^{m0−M'})/(1 − ϑ) with round m0+j at σ'²ϑ^j. It treats rounds
//     1..m0 as if they had used σ', so the nominal ledger can end above ε.
// Without refine_at both variants are the same mechanism.
//
// Params: {"name": "avp", "variant", "clip" (5), "epsilon" (10), "delta" (1e-5),
// "vartheta" (1.05; avp only), "sensitivity" (2C; a number or "2C/min|D_k|"),
// "planned_rounds" (M, federation.rounds), "refine_at" (0 = never)}.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/dp/accountant.h"
#include "defenses/clip.h"
#include "fl/defense.h"

enum { SENS_2C = 0, SENS_GIVEN = 1, SENS_NBAFL = 2 };

typedef struct Avp {
    int paper, nbafl;
    double clip, epsilon, delta, vartheta, sens, q;
    int sens_rule;         // SENS_2C, SENS_GIVEN or SENS_NBAFL
    char sens_assumption[200];
    int min_samples;
    int planned;           // M of Theorem 1
    int rounds;            // M' = federation.rounds
    int refine_at;         // m0 (0 = never)
    double s_m;            // S_M
    double var1;           // σ² of Theorem 1 (the variance of round 1)
    double var_refined;    // the variance after m0 (corrected), σ'² (paper)
    const ParamTable *table;
    ClipNoise noise;       // the sampler ("sampler", defenses/clip.h)
    RdpAccountant *acc;    // the sound ledger, advanced by end_round
    int acc_rounds;
} Avp;

// Σ_{m=1..M} ϑ^{1−m}, summed explicitly (no 0/0 near ϑ = 1).
static double geometric_sum(double vartheta, int m) {
    double s = 0, term = 1;
    for (int i = 0; i < m; i++) {
        s += term;
        term /= vartheta;
    }
    return s;
}

// Θ(m), m = 1, 2, ...: the noise variance of round m.
static double avp_variance(const Avp *s, int m) {
    if (s->refine_at == 0 || m <= s->refine_at)
        return pow(s->vartheta, m - 1) * s->var1;
    if (s->paper && s->vartheta < 1)
        return s->var_refined * pow(s->vartheta, m - s->refine_at);
    return s->var_refined;
}

// The seed's per-round and cumulative ε: √(2q ln(1/δ)·Σ Δs²/Θ).
static double nominal_epsilon(const Avp *s, int from, int to) {
    double b = 0;
    for (int m = from; m <= to; m++)
        b += s->sens * s->sens / avp_variance(s, m);
    return sqrt(2 * s->q * log(1 / s->delta) * b);
}

// The keys create() accepts, also what takes_param answers from.
static const char *const avp_keys[] = {"name", "variant", "clip", "epsilon", "delta", "vartheta", "sensitivity",
                                       "planned_rounds", "refine_at", "sampler", NULL};
static int avp_takes_param(const char *key) { return jv_key_in(key, avp_keys); }
static const char *const nbafl_keys[] = {"name", "variant", "clip", "epsilon", "delta", "sensitivity",
                                         "planned_rounds", "refine_at", "sampler", NULL};
static int nbafl_takes_param(const char *key) { return jv_key_in(key, nbafl_keys); }

static FpStatus avp_create_common(const cJSON *params, const char *path, const DefenseSetup *setup, int nbafl,
                                  void **state, FpError *err) {
    static const char *const variants[] = {"corrected", "paper", NULL};
    char p[256];
    FP_TRY(jv_keys(params, path, nbafl ? nbafl_keys : avp_keys, err));
    int variant;
    FP_TRY(jv_choice(params, path, "variant", variants, 0, &variant, err));
    Avp s = {.paper = variant == 1, .nbafl = nbafl, .table = setup->params, .rounds = setup->rounds,
             .min_samples = setup->min_client_samples};
    FP_TRY(jv_number(params, path, "clip", JV_OPTIONAL, 5.0, 0, 1, INFINITY, 0, &s.clip, err));
    FP_TRY(jv_number(params, path, "epsilon", JV_OPTIONAL, 10.0, 0, 1, INFINITY, 0, &s.epsilon, err));
    FP_TRY(jv_number(params, path, "delta", JV_OPTIONAL, 1e-5, 0, 1, 1, 1, &s.delta, err));
    s.vartheta = 1.0;
    if (!nbafl)
        FP_TRY(jv_number(params, path, "vartheta", JV_OPTIONAL, 1.05, 0, 1, 1e6, 0, &s.vartheta, err));
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(params, "sensitivity");
    s.sens_rule = SENS_2C;
    s.sens = 2 * s.clip;
    if (cJSON_IsString(sj) && strcmp(sj->valuestring, "2C/min|D_k|") == 0) {
        if (setup->min_client_samples < 1)
            return fp_fail(err, FP_EPARAM, "%s: the smallest client has no samples, so 2C/min|D_k| is undefined",
                           jv_path(p, sizeof p, path, "sensitivity"));
        s.sens_rule = SENS_NBAFL;
        s.sens = 2 * s.clip / setup->min_client_samples;
    } else if (sj && !cJSON_IsNumber(sj)) {
        return fp_fail(err, FP_EPARAM, "%s: must be a number or \"2C/min|D_k|\"",
                       jv_path(p, sizeof p, path, "sensitivity"));
    } else if (sj) {
        FP_TRY(jv_number(params, path, "sensitivity", JV_REQUIRED, 0, 0, 1, INFINITY, 0, &s.sens, err));
        s.sens_rule = SENS_GIVEN;
    }
    if (s.sens < 2 * s.clip)
        snprintf(s.sens_assumption, sizeof s.sens_assumption,
                 "one record moves the client's clipped local weights by at most ds = %.6g in L2 (%s); only 2C = %.6g "
                 "is proven for clipped weights",
                 s.sens, s.sens_rule == SENS_NBAFL ? "NbAFL's 2C/min|D_k|" : "as given", 2 * s.clip);
    long long v;
    FP_TRY(jv_int(params, path, "planned_rounds", JV_OPTIONAL, setup->rounds, 1, 1000000, &v, err));
    s.planned = (int)v;
    FP_TRY(jv_int(params, path, "refine_at", JV_OPTIONAL, 0, 0, 1000000, &v, err));
    s.refine_at = (int)v;
    if (s.refine_at > 0 && (s.refine_at >= s.rounds || s.refine_at >= s.planned))
        return fp_fail(err, FP_EPARAM, "%s: must be below federation.rounds (%d) and planned_rounds (%d), got %d",
                       jv_path(p, sizeof p, path, "refine_at"), s.rounds, s.planned, s.refine_at);
    // The probability that a client takes part in a round: m/N for a fixed cohort, q for
    // Bernoulli sampling.
    int n = setup->n_clients > 0 ? setup->n_clients : 1;
    s.q = setup->cohort_size > 0 ? fmin(1.0, (double)setup->cohort_size / n) : setup->sample_rate;
    double c2 = 2 * s.q * log(1 / s.delta);
    s.s_m = geometric_sum(s.vartheta, s.planned);
    s.var1 = (s.sens / s.epsilon) * (s.sens / s.epsilon) * c2 * s.s_m; // Theorem 1
    if (s.refine_at > 0) {
        int m0 = s.refine_at, mp = s.rounds;
        if (s.paper) {
            double w;
            if (s.vartheta > 1)
                w = geometric_sum(s.vartheta, m0) + mp - m0;
            else if (s.vartheta == 1)
                w = mp;
            else
                w = (pow(s.vartheta, 1 - m0) - s.vartheta + pow(s.vartheta, m0 - mp)) / (1 - s.vartheta);
            s.var_refined = (s.sens / s.epsilon) * (s.sens / s.epsilon) * c2 * w;
        } else {
            double budget = s.epsilon * s.epsilon / c2, spent = 0;
            for (int m = 1; m <= m0; m++)
                spent += s.sens * s.sens / avp_variance(&s, m);
            if (!(budget - spent > 0))
                return fp_fail(err, FP_EPARAM, "%s: no budget left after round %d",
                               jv_path(p, sizeof p, path, "refine_at"), m0);
            s.var_refined = s.sens * s.sens * (mp - m0) / (budget - spent);
        }
    }
    double orders[RDP_EXTENDED_ORDER_COUNT];
    int no = rdp_extended_orders(orders);
    FP_TRY(clip_noise_parse(params, path, setup->params, &s.noise, err));
    s.noise.memo = setup->memo;
    double ratio = 0;
    for (int m = 1; m <= s.rounds; m++)
        ratio = fmax(ratio, sqrt(avp_variance(&s, m)) / s.sens);
    FP_TRY(clip_noise_build(&s.noise, ratio, err));
    FpStatus st = rdp_accountant_create(orders, no, &s.acc, err);
    Avp *out = st == FP_OK ? fp_calloc(1, sizeof *out, err) : NULL;
    if (!out) {
        rdp_accountant_free(s.acc);
        clip_noise_free(&s.noise);
        return st != FP_OK ? st : FP_ENOMEM;
    }
    *out = s;
    *state = out;
    return FP_OK;
}

static FpStatus avp_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                           FpError *err) {
    return avp_create_common(params, path, setup, 0, state, err);
}

static FpStatus nbafl_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                             FpError *err) {
    return avp_create_common(params, path, setup, 1, state, err);
}

static void avp_destroy(void *state) {
    Avp *s = state;
    if (!s)
        return;
    rdp_accountant_free(s->acc);
    clip_noise_free(&s->noise);
    free(s);
}

static UploadKind avp_upload_kind(const void *state) { return UPLOAD_WEIGHTS; }

static FpStatus avp_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    const Avp *s = state;
    clip_to_norm(upload, s->table, s->clip);
    clip_noise_add(&s->noise, upload, s->table, &round->rng, sqrt(avp_variance(s, round->round + 1)));
    return FP_OK;
}

static void avp_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    const Avp *s = state;
    *out = upload_params_none();
    out->noise = "gaussian";
    out->noise_scale = sqrt(avp_variance(s, round->round + 1));
    out->clip_norm = "l2";
    out->clip = s->clip;
}

// Round m's multiplier in the accounts: σ_m/Δs, divided by the safe sampler's rounding
// inflation (two uploads within Δs of each other, each rounded: defenses/clip.h).
static double round_multiplier(const Avp *s, int m) {
    double std = sqrt(avp_variance(s, m));
    return std / s->sens / clip_noise_inflation(&s->noise, std, s->sens, 1);
}

// Round m (1-based) in the sound ledger: the client's Gaussian upload, included with
// probability q (replace one record; joint convexity, which needs only the base
// mechanism's RDP curve: the discrete Gaussian's is the continuous one's, CKS 2020 Thm 4).
static FpStatus add_round(RdpAccountant *acc, const Avp *s, int m) {
    return rdp_accountant_add_sampled(acc, RDP_SAMPLING_POISSON_REPLACE, s->q, round_multiplier(s, m), 1, NULL);
}

static void avp_end_round(void *state, int round, int n_participants) {
    Avp *s = state;
    if (s->acc_rounds != round)
        return; // out of order: privacy() recomputes from scratch
    if (add_round(s->acc, s, round + 1) == FP_OK)
        s->acc_rounds++;
}

// Sound ε after `rounds` rounds (subsampled RDP), from the ledger when it matches.
static double sound_epsilon_at(const void *ctx, long long rounds, double delta) {
    const Avp *s = ctx;
    if (rounds <= 0)
        return 0;
    double eps = INFINITY;
    FpStatus st;
    if (rounds == s->acc_rounds) {
        st = rdp_accountant_epsilon(s->acc, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL);
    } else {
        double orders[RDP_EXTENDED_ORDER_COUNT];
        int no = rdp_extended_orders(orders);
        RdpAccountant *acc = NULL;
        st = rdp_accountant_create(orders, no, &acc, NULL);
        for (int m = 1; m <= (int)rounds && st == FP_OK; m++)
            st = add_round(acc, s, m);
        if (st == FP_OK)
            st = rdp_accountant_epsilon(acc, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL);
        rdp_accountant_free(acc);
    }
    return st == FP_OK ? eps : st == FP_ENOMEM ? NAN : INFINITY; // NaN: see ClipEpsilonAt
}

// The upload observer's ε after `rounds` rounds (no amplification): the exact
// composition of Gaussians for the float sampler's continuous law (Dong, Roth, Su 2022),
// RDP for the safe one (the discrete Gaussian shares the continuous RDP curve, CKS 2020
// Thm 4; the exact composition is the continuous law's own).
static double upload_epsilon_at(const void *ctx, long long rounds, double delta) {
    const Avp *s = ctx;
    if (rounds <= 0)
        return 0;
    double *ratio = malloc(sizeof(double) * (size_t)rounds), e = INFINITY;
    if (!ratio)
        return NAN;
    for (int m = 1; m <= (int)rounds; m++)
        ratio[m - 1] = round_multiplier(s, m);
    FpStatus st = s->noise.safe ? gaussian_rdp_epsilon(ratio, (int)rounds, delta, &e, NULL, NULL)
                                : gaussian_exact_epsilon(ratio, (int)rounds, delta, &e, NULL);
    free(ratio);
    return st == FP_OK ? e : st == FP_ENOMEM ? NAN : INFINITY;
}

// The accounts with the safe sampler's slack over the client's own draws (the others'
// draws do not depend on its records).
static double sound_epsilon(const Avp *s, int rounds, int *covered) {
    return clip_noise_epsilon(&s->noise, s->delta, (double)s->noise.d * rounds, sound_epsilon_at, s, rounds, covered);
}

static double upload_epsilon(const Avp *s, int rounds, int *covered) {
    return clip_noise_epsilon(&s->noise, s->delta, (double)s->noise.d * rounds, upload_epsilon_at, s, rounds, covered);
}

static void avp_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const Avp *s = state;
    int m = rounds_done > 0 ? rounds_done : 1, covered_sound, covered_upload;
    *rec = (PrivacyRecord){
        .unit = "record",
        .epsilon_round_nominal = nominal_epsilon(s, m, m),
        .epsilon_total_nominal = rounds_done > 0 ? nominal_epsilon(s, 1, rounds_done) : 0,
        .nominal_notion = s->sens_rule == SENS_NBAFL
                              ? "(eps, delta)-DP by the seed's Theorem 1 rule eps^2 = 2q ln(1/delta) sum_m "
                                "ds^2/Theta(m) (ds = 2C/min|D_k|; drops zCDP's additive rho, linear-in-q "
                                "amplification)"
                              : "(eps, delta)-DP by the seed's Theorem 1 rule eps^2 = 2q ln(1/delta) sum_m "
                                "ds^2/Theta(m) (drops zCDP's additive rho, linear-in-q amplification)",
        .epsilon_total_sound = sound_epsilon(s, rounds_done, &covered_sound),
        .delta = s->delta,
        .sound_notion = "record-level (eps, delta)-DP (replace one record) of the global models, for an observer "
                        "who does not learn which clients took part: round m is the client's Gaussian upload "
                        "(multiplier sqrt(Theta(m))/ds), included with probability q; amplification by joint "
                        "convexity only, Balle et al. 2020 conversion",
        .sigma = sqrt(avp_variance(s, m)),
        .guarantee = GUARANTEE_PROVEN,
        .epsilon_total_upload = upload_epsilon(s, rounds_done, &covered_upload),
        .upload_notion = "record-level (eps, delta)-DP of one client's uploads against the server or an eavesdropper "
                         "who knows it took part: the Gaussian with multiplier sqrt(Theta(m))/ds in every round (the "
                         "safe sampler's divided by its rounding inflation), composed by RDP (safe; the float "
                         "sampler's exactly, Dong, Roth, Su 2022); no amplification",
    };
    // Δs >= 2C bounds any change of the clipped weights, not only a record's.
    rec->record_bound_covers_client = s->sens >= 2 * s->clip;
    // Two records, each labelled by its own proof (the sensitivity rule is both's).
    rec->upload_own_label = 1;
    rec->upload_guarantee = GUARANTEE_PROVEN;
    if (s->sens_assumption[0]) {
        privacy_assume(rec, s->sens_assumption);
        privacy_assume_upload(rec, s->sens_assumption);
    }
    if (!s->noise.safe) {
        rec->guarantee = rec->upload_guarantee = GUARANTEE_NONE;
        privacy_assume(rec, CLIP_NOISE_FLOAT_REASON);
        privacy_assume_upload(rec, CLIP_NOISE_FLOAT_REASON);
    } else {
        if (!covered_sound)
            privacy_assume(rec, CLIP_NOISE_SLACK_ASSUMPTION);
        if (!covered_upload)
            privacy_assume_upload(rec, CLIP_NOISE_SLACK_ASSUMPTION);
    }
}

static FpStatus avp_describe(const void *state, cJSON *out) {
    const Avp *s = state;
    cJSON_AddStringToObject(out, "variant", s->paper ? "paper" : "corrected");
    cJSON_AddNumberToObject(out, "clip", s->clip);
    cJSON_AddNumberToObject(out, "epsilon", s->epsilon);
    cJSON_AddNumberToObject(out, "delta", s->delta);
    clip_noise_describe(&s->noise, out);
    cJSON_AddNumberToObject(out, "vartheta", s->vartheta);
    cJSON_AddNumberToObject(out, "sensitivity", s->sens);
    static const char *const rules[] = {"2C (clipped weights: proven)", "given", "2C/min|D_k| (NbAFL: assumed)"};
    cJSON_AddStringToObject(out, "sensitivity_rule", rules[s->sens_rule]);
    cJSON_AddNumberToObject(out, "min_client_samples", s->min_samples);
    cJSON_AddNumberToObject(out, "sample_rate", s->q);
    cJSON_AddNumberToObject(out, "planned_rounds", s->planned);
    cJSON_AddNumberToObject(out, "S_M", s->s_m);
    cJSON_AddNumberToObject(out, "sigma_initial", sqrt(s->var1));
    cJSON_AddNumberToObject(out, "refine_at", s->refine_at);
    if (s->refine_at > 0)
        cJSON_AddNumberToObject(out, "sigma_refined", sqrt(s->var_refined));
    cJSON *sched = cJSON_AddArrayToObject(out, "sigma_schedule");
    double rho = 0;
    for (int m = 1; m <= s->rounds; m++) {
        double v = avp_variance(s, m);
        cJSON_AddItemToArray(sched, cJSON_CreateNumber(sqrt(v)));
        rho += s->sens * s->sens / (2 * v);
    }
    cJSON_AddNumberToObject(out, "epsilon_nominal_after_all_rounds", nominal_epsilon(s, 1, s->rounds));
    // The bounds the records will give after all rounds (their guarantee: see the
    // records), for the two observers; and the looser zCDP route for the uploads.
    int covered;
    double e = sound_epsilon(s, s->rounds, &covered), ex = upload_epsilon(s, s->rounds, &covered);
    double nominal = nominal_epsilon(s, 1, s->rounds);
    if (isnan(e) || isnan(ex) || isnan(nominal))   // out of memory: never a figure (fl/defense.h)
        return FP_ENOMEM;
    if (isfinite(e))
        cJSON_AddNumberToObject(out, "epsilon_bound_after_all_rounds", e);
    if (isfinite(ex))
        cJSON_AddNumberToObject(out, "epsilon_upload_bound_after_all_rounds", ex);
    cJSON_AddNumberToObject(out, "zcdp_rho_upload_observer", rho);
    cJSON_AddNumberToObject(out, "epsilon_upload_observer_zcdp", zcdp_to_epsilon(rho, s->delta));
    return FP_OK;
}

const DefenseOps defense_avp = {
    .name = "avp",
    .summary = "amplitude-varying Gaussian noise on clipped local weights, Theta(m) = vartheta^(m-1) sigma^2",
    .variants = "corrected,paper",
    .create = avp_create,
    .destroy = avp_destroy,
    .upload_kind = avp_upload_kind,
    .client_perturb = avp_perturb,
    .upload_params = avp_upload_params,
    .end_round = avp_end_round,
    .privacy = avp_privacy,
    .describe = avp_describe,
    .takes_param = avp_takes_param,
};

const DefenseOps defense_nbafl = {
    .name = "nbafl",
    .summary = "NbAFL: constant Gaussian noise on clipped local weights, the same budget as avp (vartheta = 1)",
    .variants = "corrected,paper",
    .create = nbafl_create,
    .destroy = avp_destroy,
    .upload_kind = avp_upload_kind,
    .client_perturb = avp_perturb,
    .upload_params = avp_upload_params,
    .end_round = avp_end_round,
    .privacy = avp_privacy,
    .describe = avp_describe,
    .takes_param = nbafl_takes_param,
};
