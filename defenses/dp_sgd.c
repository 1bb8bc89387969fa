// `dp-sgd`: record-level DP-SGD inside every client (Abadi et al. 2016, Alg. 1, with
// Poisson sampling as in Opacus and Mironov, Talwar, Zhang 2019).
//
// Client k (configured share n_k records, DefenseSetup.client_samples) replaces every
// step of its local procedure (DefenseOps.local_gradient) by the private step of
// defenses/dpsgd_step.h on a Poisson sample of its records:
//     each record is in step t's batch with probability q_k = min(1, B / n_k) (B the
//     federation's batch size), independently (uniform at index (t << 32) + i of the
//     round's auxiliary stream),
//     g_t = ( Σ_{i ∈ batch} clip_C(∇ℓ_i) + N(0, σ²C² I) ) / (q_k n_k),
// the denominator the expected batch size, never the realised one. The client's SGD
// (lr, momentum, weight decay) applies g_t, and the upload (w_local − w_global) is a
// post-processing of the T_k noisy steps: nothing is added at upload time and the server
// averages as usual.
//
// Privacy unit: one record of a client's data (add/remove). Every step is the Poisson-
// subsampled Gaussian mechanism with rate q_k and multiplier σ (sensitivity C of the sum,
// noise σC); a round is T_k such steps (T_k = local_steps, or epochs · ⌈n_k / B⌉), the
// run composes T_k · rounds of them. The account is the PLD accountant (default; its
// discretisation, truncation and round-off errors are all in δ, defenses/dp/accountant_pld.h)
// or RDP ("accountant": "rdp"). Clients of different sizes are covered by the largest
// rate and the most steps (the subsampled Gaussian's loss grows with both), stated in the
// notion when they differ. Every round counts, whether the client took part or not: the
// server knows who took part, so the account claims no amplification by client sampling
// (for an observer of the aggregates alone who does not learn the cohort, the client's
// sampling would amplify further; that is not claimed). Uniform draws are 53-bit, so a
// record's inclusion probability exceeds q_k by less than 2^-53: the account uses
// q_k + 2^-52.
//
// The noise (ClipNoise, "sampler"): by default the federated defenses' safe sampler on a
// grid (defenses/clip.h) with the rounded Gaussian's table: each step's sum of clipped
// per-example gradients is rounded once, as a whole, to the grid g = σC/T (T the table's σ
// in grid steps), so neighbouring sums stay within C/g + √d steps (d trainable elements),
// and gets round(N(0, T²)) per element. For the integer sum x, x + round(Z) = round(x + Z):
// each step is post-processing of the continuous Gaussian mechanism on x with L2
// sensitivity C/g + √d steps, multiplier σ/φ, φ = 1 + 1e-12 + σ√d/T (dpsgd_step.h). For
// each batch B the pair (x(B), x(B + record)) is a Gaussian pair at distance <= that, and
// a Poisson mixture of such pairs is dominated by the 1-D subsampled Gaussian (joint
// convexity of the Rényi and hockey-stick divergences over B), so both accountants, the
// PLD and the RDP of Mironov, Talwar, Zhang 2019, hold exactly for it, with δ holding the
// table's distance to the rounded law over the run's d·T_k·rounds draws
// (clip_noise_epsilon). What stays conditional: DPSGD_ASSUME_FLOAT_SUM (the float
// summation of the clipped gradients, which the sensitivity C of the sum takes as exact).
// "sampler": "float" (Box–Muller in double) gives guarantee none.
//
// Params: {"name": "dp-sgd", "clip" (1), "noise_multiplier" | "epsilon" (total over the
// planned rounds), "delta" (1e-5), "accountant" ("pld" | "rdp"), "sampler" ("safe" |
// "float")}.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonv.h"
#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_pld.h"
#include "defenses/clip.h"
#include "defenses/dpsgd_step.h"
#include "defenses/registry.h"

// The excess of a 53-bit uniform's inclusion probability over q (banner).
#define DPSGD_RATE_SLACK (1.0 / 4503599627370496.0)

typedef struct DpSgd {
    double clip, sigma, delta;
    double epsilon_target;   // -1 when sigma was given
    int use_rdp;             // 1: RDP accountant; 0: PLD
    int batch_size;          // B
    int local_steps;         // > 0: fixed steps per round
    int local_epochs;
    int n_clients;
    int *client_n;           // configured n_k
    double q_acct;           // the largest q_k plus the sampler's slack, capped at 1
    long long steps_round;   // the most local steps a client takes in a round (T)
    int uniform;             // 1 when every client has the same (q_k, T_k)
    int rounds;
    double lr;
    ClipNoise noise;         // the sampler ("sampler")
    double phi;              // the safe sampler's rounding inflation of σ (1 for the float one)
    size_t d;                // trainable elements: draws per step
    double *eps_cache;       // eps_cache[r] = ε after r rounds (NAN until computed); r in 0..rounds
    int *covered_cache;      // whether the table's slack fitted in δ for eps_cache[r]
    DefenseMemo *memo;       // the experiment's (DefenseSetup.memo): σ and ε once per configuration
    PldStepMemo *pld_memo;   // one step's PLD masses between the rounds' standard figures
} DpSgd;

static long long client_steps(const DpSgd *s, int n) {
    if (n <= 0)
        return 0;
    if (s->local_steps > 0)
        return s->local_steps;
    int b = s->batch_size < n ? s->batch_size : n;
    return (long long)s->local_epochs * ((n + b - 1) / b);
}

static double client_rate(const DpSgd *s, int n) { return n <= s->batch_size ? 1.0 : (double)s->batch_size / n; }

// ε after `rounds` rounds at δ (0 for none, INFINITY without noise), the multiplier σ/φ.
static FpStatus account(const DpSgd *s, double sigma, long long rounds, double delta, double *eps, FpError *err) {
    long long steps = s->steps_round * rounds;
    if (steps <= 0) {
        *eps = 0;
        return FP_OK;
    }
    if (sigma <= 0) {
        *eps = INFINITY;
        return FP_OK;
    }
    if (!s->use_rdp)
        return pld_epsilon(s->q_acct, sigma / s->phi, steps, delta, eps, err);
    // The safe sampler's rounded Gaussian: the continuous account at σ/φ (banner).
    return rdp_epsilon(s->q_acct, s->noise.safe ? sigma / s->phi : sigma, steps, delta, eps, NULL, err);
}

// account() as a ClipEpsilonAt (an accountant that cannot state a bound states none; one
// that ran out of memory, NaN).
static double epsilon_at(const void *ctx, long long rounds, double delta) {
    const DpSgd *s = ctx;
    double eps;
    FpError e = {0};
    FpStatus st = account(s, s->sigma, rounds, delta, &eps, &e);
    return st == FP_OK ? eps : st == FP_ENOMEM ? NAN : INFINITY;
}

// The keys create() accepts, also what takes_param answers from.
static const char *const dpsgd_keys[] = {"name", "clip", "noise_multiplier", "epsilon", "delta", "accountant",
                                         "sampler", NULL};
static int dpsgd_takes_param(const char *key) { return jv_key_in(key, dpsgd_keys); }

static FpStatus dpsgd_create(const cJSON *params, const char *path, const DefenseSetup *setup, void **state,
                             FpError *err) {
    static const char *const accountants[] = {"pld", "rdp", NULL};
    char p[256];
    FP_TRY(jv_keys(params, path, dpsgd_keys, err));
    if (!setup->client_samples || setup->n_clients < 1)
        return fp_fail(err, FP_EPARAM, "%s: dp-sgd needs the federation's clients and their sample counts", path);
    if (!setup->params)
        return fp_fail(err, FP_EPARAM, "%s: dp-sgd needs the model's parameter table", path);
    if (setup->model)
        FP_TRY(dpsgd_check_model(setup->model, err));
    DpSgd *s = fp_calloc(1, sizeof *s, err);
    if (!s)
        return FP_ENOMEM;
    FpStatus st = FP_OK;
    s->batch_size = setup->batch_size > 0 ? setup->batch_size : 1;
    s->local_steps = setup->local_steps;
    s->local_epochs = setup->local_epochs;
    s->n_clients = setup->n_clients;
    s->rounds = setup->rounds > 0 ? setup->rounds : 0;
    s->lr = setup->lr;
    s->epsilon_target = -1;
    s->memo = setup->memo;
    s->client_n = malloc(sizeof(int) * (size_t)s->n_clients);
    s->eps_cache = malloc(sizeof(double) * ((size_t)s->rounds + 1));
    s->covered_cache = malloc(sizeof(int) * ((size_t)s->rounds + 1));
    s->phi = 1;
    if (!s->client_n || !s->eps_cache || !s->covered_cache || pld_step_memo_create(&s->pld_memo, NULL) != FP_OK) {
        st = fp_fail(err, FP_ENOMEM, "out of memory for dp-sgd");
        goto fail;
    }
    for (int r = 0; r <= s->rounds; r++)
        s->eps_cache[r] = NAN;
    int acc;
    if ((st = jv_number(params, path, "clip", JV_OPTIONAL, 1.0, 0, 1, INFINITY, 1, &s->clip, err)) != FP_OK ||
        (st = jv_number(params, path, "delta", JV_OPTIONAL, 1e-5, 0, 1, 1, 1, &s->delta, err)) != FP_OK ||
        (st = jv_choice(params, path, "accountant", accountants, 0, &acc, err)) != FP_OK ||
        (st = clip_noise_parse(params, path, setup->params, &s->noise, err)) != FP_OK)
        goto fail;
    s->noise.rounded = 1;   // one draw per step on the rounded sum (banner)
    s->noise.memo = setup->memo;
    s->d = s->noise.d;
    s->use_rdp = acc == 1;
    // The largest rate and the most steps over the configured clients.
    double q = 0;
    s->uniform = 1;
    for (int k = 0; k < s->n_clients; k++) {
        int n = setup->client_samples[k];
        s->client_n[k] = n;
        if (n <= 0)
            continue;
        double qk = client_rate(s, n);
        long long tk = client_steps(s, n);
        if (q > 0 && (qk != q || tk != s->steps_round))
            s->uniform = 0;
        q = fmax(q, qk);
        if (tk > s->steps_round)
            s->steps_round = tk;
    }
    s->q_acct = fmin(1.0, q + DPSGD_RATE_SLACK);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(params, "noise_multiplier");
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(params, "epsilon");
    if ((nm != NULL) == (ep != NULL)) {
        st = fp_fail(err, FP_EPARAM, "%s: give exactly one of noise_multiplier and epsilon", path);
        goto fail;
    }
    if (nm) {
        if ((st = jv_number(params, path, "noise_multiplier", JV_REQUIRED, 0, 0, 0, 1e6, 0, &s->sigma, err)) != FP_OK)
            goto fail;
    } else {
        if ((st = jv_number(params, path, "epsilon", JV_REQUIRED, 0, 0, 1, INFINITY, 1, &s->epsilon_target,
                            err)) != FP_OK)
            goto fail;
        // The multiplier the account needs (at δ less the share the safe table's slack takes
        // at the target over the run's d·steps draws, as the record will count it), then the
        // σ whose rounding inflation φ(σ) = 1 + a + bσ leaves σ/φ(σ) at least that.
        long long steps = s->steps_round * (long long)s->rounds;
        double draws = (double)s->d * (double)steps, sigma_acc = 0;
        double delta_acc = s->delta * (1 - clip_noise_delta_share(&s->noise, s->epsilon_target, draws, s->delta));
        // Every input of the search below: another federation of the experiment with the
        // same ones (an audit's next run, a reference model) takes its σ from the memo.
        char key[256];
        snprintf(key, sizeof key, "dp-sgd sigma: epsilon %a delta %a q %a steps %lld rdp %d safe %d d %zu",
                 s->epsilon_target, s->delta, s->q_acct, steps, s->use_rdp, s->noise.safe, s->d);
        double memo[2]; // σ, and the multiplier the safe table was sized for (its grid)
        if (defense_memo_get(s->memo, key, memo, 2)) {
            s->sigma = memo[0];
            if ((st = clip_noise_build(&s->noise, memo[1], err)) != FP_OK)
                goto fail;
        } else {
            FpError e2 = {0};
            FpStatus cs = steps <= 0 ? fp_fail(&e2, FP_EPARAM, "the federation takes no local steps")
                          : s->use_rdp
                              ? rdp_sigma_for_epsilon_sampled(RDP_SAMPLING_POISSON, s->q_acct, steps, delta_acc, s->epsilon_target, NULL, 0,
                                                              &sigma_acc, NULL, &e2)
                              : pld_sigma_for_epsilon(s->q_acct, steps, delta_acc, s->epsilon_target, 0,
                                                      setup->progress, &sigma_acc, NULL, &e2);
            if (cs != FP_OK) {
                st = fp_fail(err, FP_EPARAM, "%s: %s", jv_path(p, sizeof p, path, "epsilon"), e2.msg);
                goto fail;
            }
            s->sigma = sigma_acc;
            if (s->noise.safe) {
                if ((st = clip_noise_build(&s->noise, sigma_acc, err)) != FP_OK)
                    goto fail;
                double a = 1e-12, b = sqrt((double)s->d) / s->noise.table.sigma;
                if (b * sigma_acc >= 1) {
                    st = fp_fail(err, FP_EPARAM, "%s: the grid of the safe sampler cannot reach epsilon %g with %zu "
                                 "trainable elements", jv_path(p, sizeof p, path, "epsilon"), s->epsilon_target, s->d);
                    goto fail;
                }
                s->sigma = sigma_acc * (1 + a) / (1 - b * sigma_acc) * (1 + 1e-12);
            }
            memo[0] = s->sigma;
            memo[1] = sigma_acc;
            defense_memo_put(s->memo, key, memo, 2);
        }
    }
    if (s->sigma > 0) {
        if ((st = clip_noise_build(&s->noise, s->sigma, err)) != FP_OK)
            goto fail;
        s->phi = clip_noise_inflation(&s->noise, s->sigma * s->clip, s->clip, 1);
    }
    *state = s;
    return FP_OK;
fail:
    clip_noise_free(&s->noise);
    free(s->client_n);
    free(s->eps_cache);
    free(s->covered_cache);
    pld_step_memo_free(s->pld_memo);
    free(s);
    return st;
}

static void dpsgd_destroy(void *state) {
    DpSgd *s = state;
    if (!s)
        return;
    clip_noise_free(&s->noise);
    free(s->client_n);
    free(s->eps_cache);
    free(s->covered_cache);
    pld_step_memo_free(s->pld_memo);
    free(s);
}

static UploadKind dpsgd_upload_kind(const void *state) { return UPLOAD_DELTA; }

// Client k's configured size (its rate and denominator do not depend on the data it holds).
static int configured_n(const DpSgd *s, const DefenseRound *r) {
    return r->client >= 0 && r->client < s->n_clients ? s->client_n[r->client] : r->n_local;
}

static FpStatus dpsgd_local_gradient(void *state, const DefenseLocalStep *step, float *grad, FpError *err) {
    const DpSgd *s = state;
    const DefenseRound *r = step->round;
    int nk = configured_n(s, r);
    if (nk <= 0)
        return fp_fail(err, FP_EPARAM, "dp-sgd: client %d has no configured records", r->client);
    if (step->step >= s->steps_round)
        return fp_fail(err, FP_EPARAM,
                       "dp-sgd: client %d takes local step %ld but the account covers %lld steps a round",
                       r->client, step->step + 1, s->steps_round);
    double q = client_rate(s, nk);
    // The step's Poisson batch over the client's records (not the shuffled minibatch).
    uint32_t *batch = malloc(sizeof(uint32_t) * (size_t)(r->n_local > 0 ? r->n_local : 1));
    if (!batch)
        return fp_fail(err, FP_ENOMEM, "out of memory for a dp-sgd batch");
    int n = 0;
    uint64_t base = (uint64_t)step->step << 32;
    for (int i = 0; i < r->n_local; i++)
        if (q >= 1.0 || rng_uniform_at(&r->aux_rng, base + (uint64_t)i) < q)
            batch[n++] = r->local_idx[i];
    // An audit's canary records (fl/defense.h DefenseCanaries) join the batch with the same
    // probability, from draws of their own (indices 2^31 + c, beyond any record's).
    const DefenseCanaries *cn = r->canaries;
    uint32_t *diracs = cn && cn->n > 0 ? malloc(sizeof(uint32_t) * (size_t)cn->n) : NULL;
    int n_diracs = 0;
    if (cn && cn->n > 0 && !diracs) {
        free(batch);
        return fp_fail(err, FP_ENOMEM, "out of memory for a dp-sgd batch");
    }
    for (int c = 0; cn && c < cn->n; c++)
        if (q >= 1.0 || rng_uniform_at(&r->aux_rng, base + (UINT64_C(1) << 31) + (uint64_t)c) < q)
            diracs[n_diracs++] = cn->coords[c];
    DpSgdStepConfig cfg = {.clip = s->clip, .noise_multiplier = s->sigma, .denominator = q * nk, .sampler = &s->noise,
                           .n_diracs = n_diracs, .dirac_coords = diracs, .dirac_value = cn ? cn->value : 0.0f};
    FpStatus st = dpsgd_step(step->model, step->tape, r->local_data, batch, n, &cfg, &r->rng,
                             (uint64_t)(step->step + 1) << 32, grad, NULL, err);
    free(batch);
    free(diracs);
    return st;
}

// Nothing happens at upload time: the noise is in every step.
static FpStatus dpsgd_perturb(void *state, float *upload, const DefenseRound *round, FpError *err) {
    return FP_OK;
}

// The upload carries the steps' noise: with plain SGD (no momentum) T_k steps of
// N(0, (σC/(q_k n_k))²) scaled by lr add N(0, lr² T_k (σC/(q_k n_k))²) to the delta.
static void dpsgd_upload_params(const void *state, const DefenseRound *round, UploadParams *out) {
    const DpSgd *s = state;
    *out = upload_params_none();
    int nk = configured_n(s, round);
    if (nk <= 0 || s->sigma <= 0)
        return;
    double per_step = s->sigma * s->clip / (client_rate(s, nk) * nk);
    out->noise = "gaussian";
    out->noise_scale = s->lr * sqrt((double)client_steps(s, nk)) * per_step;
}

// ε after `rounds` rounds (the safe sampler's table slack inside δ, clip_noise_epsilon),
// and in *covered whether that slack fitted.
static double cached_epsilon(const DpSgd *s, int rounds, int *covered) {
    if (rounds < 0)
        rounds = 0;
    if (rounds <= s->rounds && !isnan(s->eps_cache[rounds])) {
        *covered = s->covered_cache[rounds];
        return s->eps_cache[rounds];
    }
    double draws = (double)s->d * (double)s->steps_round * rounds;
    // Every input of the account (the table's σ fixes the slack): the experiment's other
    // federations of the same configuration reuse it.
    char key[256];
    snprintf(key, sizeof key, "dp-sgd epsilon: sigma %a phi %a q %a steps %lld rounds %d delta %a rdp %d safe %d T %a d %zu",
             s->sigma, s->phi, s->q_acct, s->steps_round, rounds, s->delta, s->use_rdp, s->noise.safe,
             s->noise.safe ? s->noise.table.sigma : 0.0, s->d);
    double memo[2];
    double eps;
    if (defense_memo_get(s->memo, key, memo, 2)) {
        eps = memo[0];
        *covered = (int)memo[1];
    } else {
        eps = clip_noise_epsilon(&s->noise, s->delta, draws, epsilon_at, s, rounds, covered);
        memo[0] = eps;
        memo[1] = *covered;
        if (!isnan(eps)) // an account that ran out of memory is not one to reuse
            defense_memo_put(s->memo, key, memo, 2);
    }
    if (rounds <= s->rounds) {
        s->eps_cache[rounds] = eps;
        s->covered_cache[rounds] = *covered;
    }
    return eps;
}

static void dpsgd_privacy(const void *state, int rounds_done, PrivacyRecord *rec) {
    const DpSgd *s = state;
    int covered, covered_round;
    double eps = cached_epsilon(s, rounds_done, &covered);
    *rec = (PrivacyRecord){.unit = "record", .delta = s->delta, .sigma = s->sigma, .epsilon_total_sound = eps,
                           .epsilon_round_nominal = cached_epsilon(s, 1, &covered_round), .epsilon_total_nominal = eps,
                           .nominal_notion = "the same account (dp-sgd claims what it can prove)"};
    clip_standard_account(rec, s->memo, s->pld_memo, s->q_acct, s->sigma, s->steps_round * (long long)rounds_done, s->delta);
    // By (accountant, clients uniform, safe sampler).
#define DPSGD_OBSERVER                                                                                       \
    "record-level (eps, delta)-DP w.r.t. one client's data, add/remove one record, for an observer of all of " \
    "the client's uploads: "
#define DPSGD_ROUNDS "; every round counted (no amplification by client sampling is claimed)"
#define DPSGD_SAFE                                                                                           \
    "; the noise is the rounded Gaussian round(N(0, T^2)) on a grid added to each step's clipped sum, rounded " \
    "once: round(x) + round(Z) = round(round(x) + Z), post-processing of the continuous Gaussian mechanism, "   \
    "sigma divided by the rounding's inflation (config rounding_inflation), delta holding the table's "        \
    "distance to the rounded law"
#define DPSGD_NOTION(text) {text DPSGD_ROUNDS, text DPSGD_SAFE DPSGD_ROUNDS}
    static const char *const notions[2][2][2] = {
        {DPSGD_NOTION(DPSGD_OBSERVER "PLD of the Poisson-subsampled Gaussian at the largest client rate B/n_k and the "
                                     "most local steps T over the clients (covering every client), composed over T x "
                                     "rounds, errors in delta"),
         DPSGD_NOTION(DPSGD_OBSERVER "PLD of the Poisson-subsampled Gaussian (rate q = B/n_k, multiplier sigma) "
                                     "composed over T local steps x rounds, discretisation, truncation and round-off "
                                     "errors in delta")},
        {DPSGD_NOTION(DPSGD_OBSERVER "RDP of the Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019) at the "
                                     "largest client rate B/n_k and the most local steps "
                                     "T over the clients (covering every client), composed over T x rounds, Balle et "
                                     "al. 2020 conversion"),
         DPSGD_NOTION(DPSGD_OBSERVER "RDP of the Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019; rate q = "
                                     "B/n_k, multiplier sigma) composed over T local "
                                     "steps x rounds, Balle et al. 2020 conversion")},
    };
#undef DPSGD_NOTION
#undef DPSGD_SAFE
#undef DPSGD_ROUNDS
#undef DPSGD_OBSERVER
    rec->sound_notion = notions[s->use_rdp][s->uniform][s->noise.safe];
    if (s->sigma <= 0 || !isfinite(eps)) {
        rec->guarantee = GUARANTEE_NONE;
        privacy_assume(rec, s->sigma <= 0 ? "noise multiplier 0: the clipped gradients are released without noise"
                                          : "the accountant could not bound this composition");
        return;
    }
    rec->epsilon_total_upload = eps;
    rec->upload_notion = "the same bound: it already assumes the observer sees every upload of the client and knows "
                         "when it took part";
    if (!s->noise.safe) {
        rec->guarantee = GUARANTEE_NONE;
        privacy_assume(rec, CLIP_NOISE_FLOAT_REASON);
        return;
    }
    rec->guarantee = GUARANTEE_CONDITIONAL;
    privacy_assume(rec, DPSGD_ASSUME_FLOAT_SUM);
    if (!covered)
        privacy_assume(rec, CLIP_NOISE_SLACK_ASSUMPTION);
}

static FpStatus dpsgd_describe(const void *state, cJSON *out) {
    const DpSgd *s = state;
    cJSON_AddNumberToObject(out, "clip", s->clip);
    cJSON_AddNumberToObject(out, "noise_multiplier", s->sigma);
    cJSON_AddNumberToObject(out, "delta", s->delta);
    if (s->epsilon_target > 0)
        cJSON_AddNumberToObject(out, "epsilon_target", s->epsilon_target);
    cJSON_AddStringToObject(out, "accountant", s->use_rdp ? "rdp" : "pld");
    cJSON_AddStringToObject(out, "accountant_notion",
                            !s->use_rdp ? "PLD, Poisson-subsampled Gaussian (add/remove one record), errors in delta"
                            : "RDP, Poisson-subsampled Gaussian (add/remove one record; Mironov, Talwar, Zhang "
                              "2019), Balle et al. 2020");
    cJSON_AddStringToObject(out, "sampling", "poisson (per record, per local step)");
    cJSON_AddNumberToObject(out, "accountant_sample_rate", s->q_acct);
    cJSON_AddNumberToObject(out, "local_steps_per_round", (double)s->steps_round);
    cJSON_AddBoolToObject(out, "clients_uniform", s->uniform);
    clip_noise_describe(&s->noise, out);
    if (s->noise.safe)   // the account's multiplier is noise_multiplier divided by this (banner)
        cJSON_AddNumberToObject(out, "rounding_inflation", s->phi);
    int covered;
    double e = cached_epsilon(s, s->rounds, &covered);
    if (isnan(e))   // out of memory: never a figure (fl/defense.h)
        return FP_ENOMEM;
    if (isfinite(e))
        cJSON_AddNumberToObject(out, "epsilon_after_all_rounds", e);
    else
        cJSON_AddNullToObject(out, "epsilon_after_all_rounds");
    return FP_OK;
}

const DefenseOps defense_dp_sgd = {
    .name = "dp-sgd",
    .summary = "record-level DP-SGD in each client: Poisson batches, per-example clip C, Gaussian noise sigma*C per "
               "step, PLD/RDP accountant over steps x rounds",
    .variants = NULL,
    .create = dpsgd_create,
    .destroy = dpsgd_destroy,
    .upload_kind = dpsgd_upload_kind,
    .local_gradient = dpsgd_local_gradient,
    .record_canaries = 1,
    .client_perturb = dpsgd_perturb,
    .upload_params = dpsgd_upload_params,
    .end_round = NULL,
    .privacy = dpsgd_privacy,
    .describe = dpsgd_describe,
    .takes_param = dpsgd_takes_param,
};
