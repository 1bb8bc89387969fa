// Privacy records (fl/defense.h): the one settling rule, and issue findings (b)–(e)
// of the federated accounts, each with the control that the old accounting fails:
//   (b) client noise shares sized for the realised cohort: the sum carries exactly z for
//       every k (the old shares, sized for m = qN, give z·√(k/m)); the paper variant
//       accounted per round from each round's cohort size;
//   (c) dp-fedasgp corrected: aggregation weights from n_i only (no private loss);
//   (d) avp/nbafl: Δs = 2C by default, 2C/min|D_k| only as a declared assumption, and
//       the upload observer's ε beside the global-model observer's;
//   (e) fixed-size cohorts accounted by Wang-Balle-Kasiviswanathan (replace one), not as
//       Poisson (the exact-ε control is in tests/test_accountant.c).
// (f), layerwise, is in tests/test_layerwise.c. `fedpriv train` records of every defense
// owned here carry a guarantee and, when conditional, assumptions.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/jsonv.h"
#include "datasets/dataset.h"
#include "defenses/dp/accountant.h"
#include "defenses/clip.h"
#include "fl/fed.h"
#include "models/model.h"
#include "tests/cli_run.h"
#include "tests/defense_fixtures.h"

// ---- the settling rule ----------------------------------------------------------------------

START_TEST(settle_keeps_only_proven_bounds_in_sound) {
    // Proven without assumptions: as written.
    PrivacyRecord r = {.epsilon_total_sound = 2, .guarantee = GUARANTEE_PROVEN, .upload_notion = "u",
                       .epsilon_total_upload = 5};
    privacy_record_settle(&r);
    ck_assert_int_eq(r.guarantee, GUARANTEE_PROVEN);
    ck_assert_double_eq(r.epsilon_total_sound, 2);
    ck_assert_double_eq(r.epsilon_total_upload, 5);
    ck_assert(isnan(r.epsilon_total_conditional));
    // A proven claim with an assumption is conditional: the bound moves out of sound.
    r = (PrivacyRecord){.epsilon_total_sound = 2, .guarantee = GUARANTEE_PROVEN, .epsilon_total_upload = 5,
                        .upload_notion = "u"};
    privacy_assume(&r, "A");
    privacy_assume(&r, "A"); // listed once
    privacy_assume(&r, "B");
    privacy_record_settle(&r);
    ck_assert_int_eq(r.guarantee, GUARANTEE_CONDITIONAL);
    ck_assert(isinf(r.epsilon_total_sound) && isinf(r.epsilon_total_upload));
    ck_assert_double_eq(r.epsilon_total_conditional, 2);
    ck_assert_double_eq(r.epsilon_total_upload_conditional, 5);
    ck_assert_str_eq(r.assumptions[0], "A");
    ck_assert_str_eq(r.assumptions[1], "B");
    ck_assert_ptr_null(r.assumptions[2]);
    // Conditional without saying on what: none. None: every figure infinite.
    r = (PrivacyRecord){.epsilon_total_sound = 2, .guarantee = GUARANTEE_CONDITIONAL};
    privacy_record_settle(&r);
    ck_assert_int_eq(r.guarantee, GUARANTEE_NONE);
    ck_assert(isinf(r.epsilon_total_sound) && isnan(r.epsilon_total_conditional));
    r = (PrivacyRecord){.epsilon_total_sound = 0.5}; // zero-initialised: claims nothing
    privacy_record_settle(&r);
    ck_assert_int_eq(r.guarantee, GUARANTEE_NONE);
    ck_assert(isinf(r.epsilon_total_sound));
    // More assumptions than a record can list: it cannot say what it assumes.
    r = (PrivacyRecord){.epsilon_total_sound = 1, .guarantee = GUARANTEE_PROVEN};
    const char *s[] = {"1", "2", "3", "4", "5", "6", "7"};
    for (int i = 0; i < 7; i++)
        privacy_assume(&r, s[i]);
    privacy_record_settle(&r);
    ck_assert_int_eq(r.guarantee, GUARANTEE_NONE);
    // A NaN bound is no bound.
    r = (PrivacyRecord){.epsilon_total_sound = NAN, .guarantee = GUARANTEE_PROVEN};
    privacy_record_settle(&r);
    ck_assert_int_eq(r.guarantee, GUARANTEE_NONE);
    ck_assert_str_eq(guarantee_name(GUARANTEE_CONDITIONAL), "conditional");
    ck_assert_str_eq(guarantee_name((Guarantee)9), "none");
}
END_TEST

// A record of the safe discrete Gaussian, conditional on exactly a0 (and a1 when given).
static void assert_conditional_on(const PrivacyRecord *r, const char *a0, const char *a1) {
    ck_assert_int_eq(r->guarantee, GUARANTEE_CONDITIONAL);
    ck_assert_str_eq(r->assumptions[0], a0);
    if (a1)
        ck_assert_str_eq(r->assumptions[1], a1);
    ck_assert_ptr_null(r->assumptions[a1 ? 2 : 1]);
    ck_assert(isinf(r->epsilon_total_sound));
}

// The upload observer's own record conditional on exactly a0: each record is labelled by
// its own proof (before, the upload's assumption made the whole record conditional and its
// aggregate figure ∞).
static void assert_upload_conditional_on(const PrivacyRecord *r, const char *a0) {
    ck_assert_int_eq(r->upload_guarantee, GUARANTEE_CONDITIONAL);
    ck_assert_str_eq(r->upload_assumptions[0], a0);
    ck_assert_ptr_null(r->upload_assumptions[1]);
    ck_assert(isinf(r->epsilon_total_upload));
}

// The safe sampler's inflation of a multiplier (defenses/clip.h ClipNoise): noise of std
// `ratio`·Δ on d coordinates, S grid steps from the defense's describe().
static double safe_phi(const DefenseOps *ops, void *st, double ratio, size_t d, int replace) {
    double steps = describe_number(ops, st, "noise_grid_steps");
    ck_assert(steps >= 64 && steps <= DGAUSS_WIDE_SIGMA_MAX);
    return 1 + 1e-12 + ratio * sqrt((double)d) / ((replace ? 1 : 2) * steps);
}

// The δ the safe sampler's accounts run at (the first share set aside for its table).
#define SAFE_DELTA (1e-5 * (1 - CLIP_NOISE_SLACK))

static double account(RdpSampling kind, double q, double sigma, long long steps, double delta);

// The safe sampler's figure: the account at δ(1 − f) for the first share f of δ that
// covers (1 + e^ε)·draws·2^-59 (defenses/clip.h clip_noise_epsilon), else the first one's
// figure with *covered = 0.
static double safe_account(RdpSampling kind, double q, double sigma, long long steps, double draws, int *covered) {
    const double shares[] = {0x1p-10, 0x1p-6, 0x1p-3, 0x1p-1};
    *covered = 1;
    for (int i = 0; i < 4; i++) {
        double e = account(kind, q, sigma, steps, 1e-5 * (1 - shares[i]));
        if ((1 + exp(e)) * draws * 0x1p-59 <= 1e-5 * shares[i])
            return e;
    }
    *covered = 0;
    return account(kind, q, sigma, steps, SAFE_DELTA);
}

// One phase of an account: `steps` steps of kind at rate q, multiplier sigma.
typedef struct {
    RdpSampling kind;
    double q, sigma;
    long long steps;
} Phase;

// ε at δ of the phases composed on the extended grid (Balle et al. 2020 conversion).
static double account_phases(const Phase *ph, int n_ph, double delta) {
    double orders[RDP_EXTENDED_ORDER_COUNT], eps;
    int n = rdp_extended_orders(orders);
    RdpAccountant *acc;
    ck_assert_int_eq(rdp_accountant_create(orders, n, &acc, NULL), FP_OK);
    for (int i = 0; i < n_ph; i++)
        ck_assert_int_eq(rdp_accountant_add_sampled(acc, ph[i].kind, ph[i].q, ph[i].sigma, ph[i].steps, NULL), FP_OK);
    ck_assert_int_eq(rdp_accountant_epsilon(acc, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL), FP_OK);
    rdp_accountant_free(acc);
    return eps;
}

static double account(RdpSampling kind, double q, double sigma, long long steps, double delta) {
    Phase ph = {kind, q, sigma, steps};
    return account_phases(&ph, 1, delta);
}

// safe_account over several phases.
static double safe_account_phases(const Phase *ph, int n_ph, double draws, int *covered) {
    const double shares[] = {0x1p-10, 0x1p-6, 0x1p-3, 0x1p-1};
    *covered = 1;
    for (int i = 0; i < 4; i++) {
        double e = account_phases(ph, n_ph, 1e-5 * (1 - shares[i]));
        if ((1 + exp(e)) * draws * 0x1p-59 <= 1e-5 * shares[i])
            return e;
    }
    *covered = 0;
    return account_phases(ph, n_ph, SAFE_DELTA);
}

// The multiplier of the sum of k discrete Gaussian shares (Kairouz, Liu, Steinke 2021 Thm 1,
// defenses/dp/accountant.h) whose one-Gaussian multiplier is m, S from describe(), d coordinates.
static double kls(const DefenseOps *ops, void *st, double m, int k, size_t d) {
    double r = dgauss_sum_multiplier(m, describe_number(ops, st, "noise_grid_steps"), k, (double)d);
    ck_assert(r <= m && r > m * (1 - 1e-11));
    return r;
}

// ---- (b) client noise and the realised cohort ----------------------------------------------

// N = 10, q = 0.24 (m = qN = 2.4), z = 1, C = 1. For every cohort k a Bernoulli round can
// draw, the released sum's noise is N(0, z²C²) per coordinate: k shares of z²C²/k, or the
// server's own when k = 0. 6-sigma variance test over 20000 coordinates. Control: the
// old shares N(0, z²C²/m) give the same draws scaled by √(k/m), which the test rejects
// (for k = 2: multiplier 0.913, the 5.043 instead of the reported 4.318).
START_TEST(client_noise_sum_carries_z_for_every_cohort) {
    enum { D = 20000 };
    static const char *const defs[] = {
        "{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1,\"clip\":1,\"noise\":\"client\"}",
        "{\"name\":\"fedsmp\",\"noise_multiplier\":1,\"clip\":1,\"topk_fraction\":1}",
    };
    Table t;
    table_init(&t, D, 0);
    DefenseSetup su = setup_for(&t, 10, 3, 0.24, 10); // Bernoulli (no cohort size)
    size_t np = t.table.n_params;
    float *u[5], *out = malloc(sizeof(float) * np);
    double *x = malloc(sizeof(double) * D), w[5] = {0};
    int clients[5] = {0, 1, 2, 3, 4};
    for (int c = 0; c < 5; c++)
        u[c] = malloc(sizeof(float) * np);
    for (size_t d = 0; d < 2; d++) {
        const DefenseOps *ops;
        void *st = make_defense(defs[d], &su, &ops);
        ck_assert(ops->release_empty_rounds);
        const int ks[] = {0, 1, 2, 3, 5};
        for (int i = 0; i < 5; i++) {
            int k = ks[i];
            for (int c = 0; c < k; c++) {
                memset(u[c], 0, sizeof(float) * np);
                DefenseRound r = round_ctx(i, c, 10);
                r.participants = k;
                ck_assert_int_eq(ops->client_perturb(st, u[c], &r, NULL), FP_OK);
            }
            ck_assert_int_eq(defense_aggregate(ops, st, i, (const float *const *)u, w, clients, k, np, out, NULL), FP_OK);
            for (int j = 0; j < D; j++)
                x[j] = out[j] * 2.4; // the sum: the fixed denominator is m = qN
            double z = moment_z(x, D, 1.0, 3);
            ck_assert_msg(fabs(z) < 6, "%s, k = %d: the sum's variance is off by %.1f standard errors", defs[d], k, z);
            if (k > 0) { // control: the old shares, N(0, z²C²/m) each
                for (int j = 0; j < D; j++)
                    x[j] *= sqrt(k / 2.4);
                ck_assert_msg(fabs(moment_z(x, D, 1.0, 3)) > 6, "k = %d: the old sizing passes", k);
            }
        }
        // The account. The shares' grid depends on k, so the release shows k: replace one
        // client, per round given its cohort (a Bernoulli count is independent of the data
        // then), the sum of k discrete Gaussian shares by Kairouz, Liu, Steinke 2021, Thm 9
        // of Wang et al. at rate k/N, multiplier z/2 (the rounding's φ). No round seen yet:
        // joint convexity at rate q with the sum's τ at k = N.
        PrivacyRecord rec;
        defense_privacy(ops, st, 3, &rec, NULL);
        double phi = safe_phi(ops, st, 1.0, D, 0);
        ck_assert(phi > 1 && phi < 1.005); // S capped at 16384 for 20000 coordinates: 1 + √20000/32768
        // The upload observer's ε for shares of z/√10 (about 40) is beyond what the table's
        // precision certifies: its own record's only assumption. The aggregate's, no round
        // seen (joint convexity), is beyond it too, by its own account.
        assert_upload_conditional_on(&rec, CLIP_NOISE_SLACK_ASSUMPTION);
        Phase unseen = {RDP_SAMPLING_POISSON_REPLACE, 0.24, kls(ops, st, 0.5 / phi, 10, D), 3};
        int covered;
        double want = safe_account_phases(&unseen, 1, 3.0 * D * 10, &covered);
        ck_assert(!covered);
        assert_conditional_on(&rec, CLIP_NOISE_SLACK_ASSUMPTION, NULL);
        ck_assert_double_eq_tol(rec.epsilon_total_conditional, want, 1e-12);
        ck_assert_ptr_nonnull(strstr(rec.sound_notion, "replace one"));
        ck_assert_ptr_nonnull(strstr(rec.sound_notion, "Kairouz"));
        // One upload alone: std z/√k per round against 2C, RDP composed (the discrete
        // Gaussian's curve); no round seen yet, so k = N (the smallest share) in each.
        double r10 = 0.5 / sqrt(10.0) / safe_phi(ops, st, 0.5 / sqrt(10.0), D, 1);
        double ratio[3] = {r10, r10, r10}, up;
        ck_assert_int_eq(gaussian_rdp_epsilon(ratio, 3, SAFE_DELTA, &up, NULL, NULL), FP_OK);
        ck_assert_double_eq_tol(rec.epsilon_total_upload_conditional, up, 1e-9 * up);
        // With the rounds' cohorts seen (2, 0, 3): Thm 9 at 2/10 and 3/10 (the empty round
        // releases the server's noise only). Above the 5.043 (the old shares'
        // realised multiplier under Poisson) and above the add/remove figure 4.318.
        ops->end_round(st, 0, 2);
        ops->end_round(st, 1, 0);
        ops->end_round(st, 2, 3);
        defense_privacy(ops, st, 3, &rec, NULL);
        double seen[2] = {0.5 / sqrt(2.0) / safe_phi(ops, st, 0.5 / sqrt(2.0), D, 1),
                          0.5 / sqrt(3.0) / safe_phi(ops, st, 0.5 / sqrt(3.0), D, 1)};
        ck_assert_int_eq(gaussian_rdp_epsilon(seen, 2, SAFE_DELTA, &up, NULL, NULL), FP_OK);
        ck_assert_double_eq_tol(rec.epsilon_total_upload_conditional, up, 1e-9 * up);
        Phase realised[2] = {{RDP_SAMPLING_FIXED, 0.2, kls(ops, st, 0.5 / phi, 2, D), 1},
                             {RDP_SAMPLING_FIXED, 0.3, kls(ops, st, 0.5 / phi, 3, D), 1}};
        // The table's draws the release holds: the participants' d (the server's in the
        // empty round), 2 + 1 + 3 of them, not every client's.
        want = safe_account_phases(realised, 2, 6.0 * D, &covered);
        ck_assert(covered); // the aggregate's slack fits: proven, the upload's record apart
        ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
        assert_upload_conditional_on(&rec, CLIP_NOISE_SLACK_ASSUMPTION);
        ck_assert_double_eq_tol(rec.epsilon_total_sound, want, 1e-12);
        ck_assert(want >= 5.043);
        ck_assert_double_eq_tol(account(RDP_SAMPLING_POISSON, 0.24, 1.0, 3, 1e-5), 4.31802636, 1e-6);
        ops->destroy(st);
    }
    for (int c = 0; c < 5; c++)
        free(u[c]);
    free(out);
    free(x);
}
END_TEST

// A fixed cohort of 2 of the same 10 clients: shares of z²C²/2 (the sum carries z), and
// the account of a fixed-size sample without replacement, replace one (multiplier z/2):
// above the 5.043 that the old shares' realised multiplier gave under Poisson.
START_TEST(fixed_cohort_accounted_without_replacement) {
    Table t;
    table_init(&t, 100, 0);
    DefenseSetup su = setup_for(&t, 10, 3, 0.24, 10);
    su.cohort_size = 2;
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1,\"noise\":\"client\"}", &su, &ops);
    PrivacyRecord rec;
    defense_privacy(ops, st, 3, &rec, NULL);
    // The sum of the 2 discrete Gaussian shares (Kairouz, Liu, Steinke 2021) in Thm 9 at
    // 2/10, proven; the upload observer's own record is conditional on the table's
    // precision, for its ε of about 35 (shares of z/√2 against 2C).
    assert_upload_conditional_on(&rec, CLIP_NOISE_SLACK_ASSUMPTION);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert_ptr_null(rec.assumptions[0]);
    int covered;
    // ε 15 over 600 draws (the 2 participants' d in each of 3 rounds; before, every
    // client's, 3000 and δ/64): the first share, δ/1024, holds the table's slack.
    double m = kls(ops, st, 0.5 / safe_phi(ops, st, 1.0, 100, 0), 2, 100);
    double want = safe_account(RDP_SAMPLING_FIXED, 0.2, m, 3, 600, &covered);
    ck_assert(covered);
    ck_assert_double_eq_tol(rec.epsilon_total_sound, want, 1e-12);
    ck_assert_double_eq(want, account(RDP_SAMPLING_FIXED, 0.2, m, 3, SAFE_DELTA)); // the first share
    ck_assert(rec.epsilon_total_sound >= 5.043);
    ck_assert_ptr_nonnull(strstr(rec.sound_notion, "replace one"));
    ck_assert_double_eq(describe_number(ops, st, "aggregation_denominator"), 2);
    ops->destroy(st);
    // A target ε is met under the same account (z found for the fixed cohort); with the
    // server's noise and a fixed cohort the safe sampler's bound is proven.
    st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"epsilon\":3}", &su, &ops);
    defense_privacy(ops, st, 3, &rec, NULL);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert_ptr_null(rec.assumptions[0]);
    ck_assert(rec.epsilon_total_sound <= 3 && rec.epsilon_total_sound > 2.99);
    double z = describe_number(ops, st, "noise_multiplier");
    ck_assert_double_eq_tol(rec.epsilon_total_sound,
                            account(RDP_SAMPLING_FIXED, 0.2, z / 2 / safe_phi(ops, st, z, 100, 0), 3, SAFE_DELTA),
                            1e-12);
    ck_assert(isinf(rec.epsilon_total_upload)); // server noise: the server sees the clipped update
    ops->destroy(st);
    // Control: the float sampler proves nothing.
    st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"epsilon\":3,\"sampler\":\"float\"}", &su, &ops);
    defense_privacy(ops, st, 3, &rec, NULL);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_NONE);
    ck_assert_str_eq(rec.assumptions[0], CLIP_NOISE_FLOAT_REASON);
    ck_assert(isinf(rec.epsilon_total_sound));
    ops->destroy(st);
}
END_TEST

// Bernoulli sampling with the server's noise: the safe sampler draws the rounded Gaussian
// on the lattice sum, post-processing of the continuous Gaussian mechanism, so the record
// is the continuous Poisson-subsampled Gaussian of Mironov, Talwar, Zhang 2019, proven, at
// rate q and multiplier z/φ. Control: Zhu & Wang 2019's general bound, which the discrete
// Gaussian needed, is above it, so a record still stating that would fail here.
START_TEST(bernoulli_server_noise_proven_by_general_bound) {
    Table t;
    table_init(&t, 100, 0);
    DefenseSetup su = setup_for(&t, 10, 3, 0.24, 10);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1.5}", &su, &ops);
    PrivacyRecord rec;
    defense_privacy(ops, st, 3, &rec, NULL);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert_ptr_null(rec.assumptions[0]);
    int covered;
    double want = safe_account(RDP_SAMPLING_POISSON, 0.24, 1.5 / safe_phi(ops, st, 1.5, 100, 0), 3, 300, &covered);
    ck_assert(covered);
    ck_assert_double_eq_tol(rec.epsilon_total_sound, want, 1e-12);
    double general = safe_account(RDP_SAMPLING_POISSON_DISCRETE, 0.24, 1.5 / safe_phi(ops, st, 1.5, 100, 0), 3, 300,
                                  &covered);
    ck_assert_msg(general > rec.epsilon_total_sound * 1.01, "general bound %g vs record %g", general,
                  rec.epsilon_total_sound);
    ck_assert_ptr_nonnull(strstr(rec.sound_notion, "rounded Gaussian"));
    ops->destroy(st);
    // A target ε is met under the proven account.
    st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"epsilon\":2}", &su, &ops);
    defense_privacy(ops, st, 3, &rec, NULL);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert(rec.epsilon_total_sound <= 2 && rec.epsilon_total_sound > 1.99);
    ops->destroy(st);
}
END_TEST

// The paper variant: every client adds σ whatever the cohort, so the sum's noise is σ√k.
// Each round is accounted from its own cohort size (replace one; Thm 9 at rate k/N,
// multiplier σ√k/2C); a round whose k was not seen counts as the client alone.
START_TEST(paper_variant_accounts_each_rounds_cohort) {
    Table t;
    table_init(&t, 100, 0);
    DefenseSetup su = setup_for(&t, 10, 3, 0.24, 10);
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"variant\":\"paper\",\"epsilon\":1}", &su, &ops);
    double sigma = sqrt(2 * (log(1.25) + 1)); // eq. 2 with ΔS = C = 1, ε = 1
    double phi = safe_phi(ops, st, sigma, 100, 0);
    PrivacyRecord rec;
    defense_privacy(ops, st, 3, &rec, NULL);
    // Proven: the shares' sum by Kairouz, Liu, Steinke 2021, every account for the discrete
    // Gaussian's curve; unseen rounds: the client alone (k = 1) with the sum's τ at k = N.
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert_ptr_null(rec.assumptions[0]);
    ck_assert_double_eq_tol(
        rec.epsilon_total_sound,
        account(RDP_SAMPLING_POISSON_REPLACE, 0.24, kls(ops, st, sigma / 2 / phi, 10, 100), 3, SAFE_DELTA), 1e-12);
    ops->end_round(st, 0, 2);
    ops->end_round(st, 1, 4);
    ops->end_round(st, 2, 0);
    defense_privacy(ops, st, 3, &rec, NULL);
    double orders[RDP_EXTENDED_ORDER_COUNT], eps;
    int n = rdp_extended_orders(orders);
    RdpAccountant *acc;
    ck_assert_int_eq(rdp_accountant_create(orders, n, &acc, NULL), FP_OK);
    ck_assert_int_eq(rdp_accountant_add_sampled(acc, RDP_SAMPLING_FIXED, 0.2,
                                                kls(ops, st, sigma * sqrt(2.0) / 2 / phi, 2, 100), 1, NULL),
                     FP_OK);
    ck_assert_int_eq(
        rdp_accountant_add_sampled(acc, RDP_SAMPLING_FIXED, 0.4, kls(ops, st, sigma * 2 / 2 / phi, 4, 100), 1, NULL),
        FP_OK);
    ck_assert_int_eq(rdp_accountant_epsilon(acc, SAFE_DELTA, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL), FP_OK);
    rdp_accountant_free(acc);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ck_assert_double_eq_tol(rec.epsilon_total_sound, eps, 1e-12);
    ck_assert_double_eq_tol(rec.epsilon_total_nominal, 3, 1e-12); // the paper's ε per round
    // The client's noise is σ in every round it takes part: the upload observer composes
    // the two RDP curves of the discrete Gaussian (proven); the exact composition of
    // continuous Gaussians, smaller, is not what the record states.
    double ratio[2] = {sigma / 2 / phi, sigma / 2 / phi}, up, up_exact;
    ck_assert_int_eq(gaussian_rdp_epsilon(ratio, 2, SAFE_DELTA, &up, NULL, NULL), FP_OK);
    ck_assert_double_eq_tol(rec.epsilon_total_upload, up, 1e-9 * up);
    ck_assert_int_eq(gaussian_exact_epsilon(ratio, 2, SAFE_DELTA, &up_exact, NULL), FP_OK);
    ck_assert(up_exact < up);
    ops->destroy(st);
}
END_TEST

// ---- (c) dp-fedasgp's aggregation weights ------------------------------------------------

// Two clients with the same upload shapes, different local models (so different losses
// L_i) and n = 10, 15 samples. corrected: the aggregate is Σ (n_i/n) g_i exactly, whatever
// the losses. Control: the paper's weights ½(n_i/n + L_i/L) differ from it here, so the
// same check fails for a rule that uses the private loss (the old corrected one did).
START_TEST(asgp_corrected_weights_from_counts_only) {
    FpError err = {0};
    const Backend *be = backend_cpu();
    Dataset *ds = dataset_create("toy", 30, 1, 1, 2, 2, 0, &err);
    ck_assert_ptr_nonnull(ds);
    for (int i = 0; i < 30; i++) {
        ds->x[2 * i] = (float)(i % 5) - 2.0f;
        ds->x[2 * i + 1] = (float)(i % 3) - 1.0f;
        ds->y[i] = i % 2;
    }
    DataShape shape = {.c = 1, .h = 1, .w = 2, .n_classes = 2};
    cJSON *mj = cJSON_Parse("{\"name\":\"logreg\"}");
    Model *m[2] = {model_create(mj, "model", &shape, be, &err), model_create(mj, "model", &shape, be, &err)};
    cJSON_Delete(mj);
    ck_assert_msg(m[0] && m[1], "%s", err.msg);
    ck_assert_int_eq(model_init(m[0], 1, NULL), FP_OK);
    ck_assert_int_eq(model_init(m[1], 2, NULL), FP_OK);
    size_t np = m[0]->table.n_params;
    uint32_t idx[2][15];
    int nloc[2] = {10, 15}, clients[2] = {1, 3};
    for (int i = 0; i < 15; i++) {
        idx[0][i] = (uint32_t)i;
        idx[1][i] = (uint32_t)(15 + i);
    }
    DefenseSetup su = {.seed = SEED, .params = &m[0]->table, .n_clients = 4, .rounds = 5, .sample_rate = 0.5,
                       .min_client_samples = 10};
    float *u[2][2], *out = malloc(sizeof(float) * np);
    double w[2] = {0.5, 0.5};
    static const char *const defs[2] = {
        "{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"max_selected_fraction\":1}",
        "{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":1,\"sensitivity\":1e-3}",
    };
    for (int v = 0; v < 2; v++) {
        const DefenseOps *ops;
        void *st = make_defense(defs[v], &su, &ops);
        for (int k = 0; k < 2; k++) {
            u[v][k] = malloc(sizeof(float) * np);
            for (size_t i = 0; i < np; i++)
                u[v][k][i] = (float)(0.01 * (k + 1) * ((int)i - 2));
            DefenseRound r = round_ctx(0, clients[k], nloc[k]);
            r.model = m[k];
            r.local_data = ds;
            r.local_idx = idx[k];
            r.n_local = nloc[k];
            ck_assert_int_eq(ops->client_perturb(st, u[v][k], &r, NULL), FP_OK);
        }
        ck_assert_int_eq(ops->server_aggregate(st, 0, (const float *const *)u[v], w, clients, 2, out, NULL), FP_OK);
        double dev = 0;
        for (size_t i = 0; i < np; i++)
            dev = fmax(dev, fabs(out[i] - (10 / 25.0 * u[v][0][i] + 15 / 25.0 * u[v][1][i])));
        PrivacyRecord rec;
        defense_privacy(ops, st, 2, &rec, NULL);
        if (v == 0) {
            ck_assert_msg(dev < 1e-6, "corrected: the aggregate is %g away from the n_i/n mean", dev);
            // The safe sampler: proven, its grids' and laws' cost within 0.1% of 1 per upload.
            ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
            ck_assert_ptr_null(rec.assumptions[0]);
            ck_assert(fabs(rec.epsilon_total_sound / 2.0 - 1) < 1e-3);
        } else {
            ck_assert_msg(dev > 1e-4, "control: the paper's loss weights should differ from n_i/n (%g)", dev);
            ck_assert_int_eq(rec.guarantee, GUARANTEE_NONE);
            ck_assert(isinf(rec.epsilon_total_sound));
            int names_loss = 0;
            for (int a = 0; a < PRIVACY_MAX_ASSUMPTIONS && rec.assumptions[a]; a++)
                names_loss |= strstr(rec.assumptions[a], "L_i") != NULL;
            ck_assert(names_loss);
        }
        for (int k = 0; k < 2; k++)
            free(u[v][k]);
        ops->destroy(st);
    }
    free(out);
    model_free(m[0]);
    model_free(m[1]);
    dataset_free(ds);
}
END_TEST

// ---- (d) avp / nbafl ----------------------------------------------------------------------

// The release (global-model) observer's account of avp's noise σ_m against Δ: per round
// the client's Gaussian upload, included with probability q (joint convexity).
static double avp_release_account(const cJSON *sched, int rounds, double q, double sens, double delta) {
    double orders[RDP_EXTENDED_ORDER_COUNT], eps;
    int n = rdp_extended_orders(orders);
    RdpAccountant *acc;
    ck_assert_int_eq(rdp_accountant_create(orders, n, &acc, NULL), FP_OK);
    for (int m = 0; m < rounds; m++)
        ck_assert_int_eq(rdp_accountant_add_sampled(acc, RDP_SAMPLING_POISSON_REPLACE, q,
                                                    cJSON_GetArrayItem(sched, m)->valuedouble / sens, 1, NULL), FP_OK);
    ck_assert_int_eq(rdp_accountant_epsilon(acc, delta, RDP_CONVERSION_BALLE2020, &eps, NULL, NULL), FP_OK);
    rdp_accountant_free(acc);
    return eps;
}

// Default Δs = 2C (C = 5): the record's bounds are those of its noise against 2C, and
// the only assumption is the sampler's. The upload observer's (no amplification) is
// beside it and larger. Control: the old default 2C/min|D_k| (|D_k| = 600) is now a
// declared assumption, and its figure is far below what its own noise gives against the
// 2C that clipping proves: the old "sound" number was not a bound.
START_TEST(avp_sensitivity_defaults_to_2c) {
    Table t;
    table_init(&t, 10, 0);
    DefenseSetup su = setup_for(&t, 100, 2, 0.1, 600);
    static const char *const names[] = {"avp", "nbafl"};
    for (int a = 0; a < 2; a++) {
        char json[200];
        snprintf(json, sizeof json, "{\"name\":\"%s\",\"epsilon\":10,\"delta\":1e-5}", names[a]);
        const DefenseOps *ops;
        void *st = make_defense(json, &su, &ops);
        ck_assert_double_eq(describe_number(ops, st, "sensitivity"), 10);
        cJSON *d = cJSON_CreateObject();
        ops->describe(st, d);
        const cJSON *sched = cJSON_GetObjectItem(d, "sigma_schedule");
        PrivacyRecord rec;
        defense_privacy(ops, st, 2, &rec, NULL);
        // The safe sampler: each upload is one discrete Gaussian on the grid, its
        // multiplier divided by the rounding's inflation (two uploads within 2C). At ε 44
        // the table's distance to the ideal law is not covered by δ: conditional on that
        // alone (the proven case is below).
        assert_conditional_on(&rec, CLIP_NOISE_SLACK_ASSUMPTION, NULL);
        double ratio[2];
        cJSON *eff = cJSON_CreateArray();
        for (int m = 0; m < 2; m++) {
            double sm = cJSON_GetArrayItem(sched, m)->valuedouble;
            ratio[m] = sm / 10 / safe_phi(ops, st, sm / 10, 10, 1);
            cJSON_AddItemToArray(eff, cJSON_CreateNumber(ratio[m] * 10));
        }
        double rel = avp_release_account(eff, 2, 0.1, 10, SAFE_DELTA);
        ck_assert_double_eq_tol(rec.epsilon_total_conditional, rel, 1e-12 * rel);
        ck_assert(rel > avp_release_account(sched, 2, 0.1, 10, 1e-5));
        // The upload observer by RDP (the discrete Gaussian's curve).
        double up;
        ck_assert_int_eq(gaussian_rdp_epsilon(ratio, 2, SAFE_DELTA, &up, NULL, NULL), FP_OK);
        ck_assert_double_eq_tol(rec.epsilon_total_upload_conditional, up, 1e-9 * up);
        ck_assert(up > rel);
        ck_assert_ptr_nonnull(rec.upload_notion);
        cJSON_Delete(eff);
        cJSON_Delete(d);
        ops->destroy(st);

        snprintf(json, sizeof json, "{\"name\":\"%s\",\"epsilon\":10,\"delta\":1e-5,\"sensitivity\":\"2C/min|D_k|\"}",
                 names[a]);
        st = make_defense(json, &su, &ops);
        d = cJSON_CreateObject();
        ops->describe(st, d);
        sched = cJSON_GetObjectItem(d, "sigma_schedule");
        defense_privacy(ops, st, 2, &rec, NULL);
        ck_assert_int_eq(rec.guarantee, GUARANTEE_CONDITIONAL);
        ck_assert_ptr_nonnull(strstr(rec.assumptions[0], "2C/min|D_k|"));
        double proven = avp_release_account(sched, 2, 0.1, 10, 1e-5);
        ck_assert_msg(proven > 100 * rec.epsilon_total_conditional, "%s: 2C account %g vs the assumed %g", names[a],
                      proven, rec.epsilon_total_conditional);
        cJSON_Delete(d);
        ops->destroy(st);
    }
    // Proven where the slack fits: ε 1 nominal, so the 2C account stays small.
    const DefenseOps *ops;
    void *sp = make_defense("{\"name\":\"avp\",\"epsilon\":1}", &su, &ops);
    PrivacyRecord pr;
    defense_privacy(ops, sp, 2, &pr, NULL);
    ck_assert_int_eq(pr.guarantee, GUARANTEE_PROVEN);
    ck_assert_ptr_null(pr.assumptions[0]);
    {
        cJSON *d = cJSON_CreateObject();
        ops->describe(sp, d);
        const cJSON *sched = cJSON_GetObjectItem(d, "sigma_schedule");
        cJSON *eff = cJSON_CreateArray();
        for (int m = 0; m < 2; m++) {
            double sm = cJSON_GetArrayItem(sched, m)->valuedouble;
            cJSON_AddItemToArray(eff, cJSON_CreateNumber(sm / safe_phi(ops, sp, sm / 10, 10, 1)));
        }
        double lo = avp_release_account(eff, 2, 0.1, 10, SAFE_DELTA), hi = avp_release_account(eff, 2, 0.1, 10, 0.5e-5);
        ck_assert_msg(pr.epsilon_total_sound >= lo * (1 - 1e-12) && pr.epsilon_total_sound <= hi * (1 + 1e-12),
                      "avp at eps 1: %g outside [%g, %g]", pr.epsilon_total_sound, lo, hi);
        cJSON_Delete(eff);
        cJSON_Delete(d);
    }
    ops->destroy(sp);
    // A sensitivity of at least 2C needs no assumption; one below it does.
    void *st = make_defense("{\"name\":\"nbafl\",\"sensitivity\":12,\"epsilon\":1}", &su, &ops);
    PrivacyRecord rec;
    defense_privacy(ops, st, 2, &rec, NULL);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_PROVEN);
    ops->destroy(st);
    // Control: the float sampler proves nothing.
    st = make_defense("{\"name\":\"nbafl\",\"sensitivity\":12,\"sampler\":\"float\"}", &su, &ops);
    defense_privacy(ops, st, 2, &rec, NULL);
    ck_assert_int_eq(rec.guarantee, GUARANTEE_NONE);
    ck_assert_str_eq(rec.assumptions[0], CLIP_NOISE_FLOAT_REASON);
    ops->destroy(st);
    st = make_defense("{\"name\":\"nbafl\",\"sensitivity\":9}", &su, &ops);
    defense_privacy(ops, st, 2, &rec, NULL);
    ck_assert_ptr_nonnull(strstr(rec.assumptions[0], "as given"));
    ops->destroy(st);
    FpError err = {0};
    ck_assert_int_eq(create_status("{\"name\":\"avp\",\"sensitivity\":\"2C\"}", &su, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "defense.sensitivity"));
}
END_TEST

// ---- through `fedpriv train` ---------------------------------------------------------------

static void write_config(const char *dir, const char *federation, const char *defense, char *cfg, size_t n) {
    char csv[512];
    snprintf(csv, sizeof csv, "%s/toy.csv", dir);
    FILE *f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "f1,f2,label\n");
    for (int i = 0; i < 120; i++)
        fprintf(f, "%g,%g,%d\n", (i % 7) / 7.0 - 0.5 + (i % 2) * 0.4, (i % 5) / 5.0, i % 2);
    fclose(f);
    snprintf(cfg, n, "%s/cfg.json", dir);
    f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},\n"
            " \"federation\": %s, \"defense\": %s, \"threads\": 1}\n",
            csv, federation, defense);
    fclose(f);
}

// Every defense (the scalar mechanisms' under the fixed cohort only, their accounts do not
// depend on the sampling), both samplings: each round's record has a guarantee; a
// conditional one lists its assumptions and keeps sound at ∞ with the bound beside it;
// proven ones have a number; none has ∞. Bernoulli at q = 0.1 over 10 clients leaves
// rounds empty: the central-noise defenses still release (the model moves).
START_TEST(cli_every_record_has_a_guarantee) {
    char dir[] = "/tmp/fedpriv-privacy-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *const feds[] = {
        "{\"clients\": 10, \"sample_rate\": 0.3, \"rounds\": 3, \"batch_size\": 5, \"lr\": 0.1}",
        "{\"clients\": 10, \"sample_rate\": 0.1, \"sampling\": \"bernoulli\", \"rounds\": 4, \"batch_size\": 5, "
        "\"lr\": 0.1}",
    };
    // The guarantee under the fixed cohort (feds[0]) and under Bernoulli sampling (feds[1]).
    static const struct { const char *def, *guarantee[2]; } defs[] = {
        {"{\"name\":\"none\"}", {"none", "none"}},
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1}", {"proven", "proven"}},
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1,\"sampler\":\"float\"}", {"none", "none"}},
        // Client shares of z = 8 (of z = 1, the upload observer's ε, about 45 after 3 rounds, is
        // beyond what the table's precision certifies: its own record is conditional from the
        // second round on, the aggregate's stays proven).
        {"{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":8,\"noise\":\"client\"}", {"proven", "proven"}},
        {"{\"name\":\"gaussian-dpfedavg\",\"variant\":\"paper\",\"epsilon\":1}", {"proven", "proven"}},
        {"{\"name\":\"fedsmp\",\"noise_multiplier\":8}", {"proven", "proven"}},
        {"{\"name\":\"fedsmp\",\"variant\":\"paper\",\"epsilon\":1}", {"none", "none"}},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1}", {"proven", "proven"}},
        {"{\"name\":\"dp-fedasgp\",\"epsilon\":1,\"sampler\":\"float\"}", {"none", "none"}},
        {"{\"name\":\"dp-fedasgp\",\"variant\":\"paper\",\"epsilon\":1}", {"none", "none"}},
        {"{\"name\":\"avp\",\"epsilon\":1}", {"proven", "proven"}},
        {"{\"name\":\"nbafl\",\"sampler\":\"float\"}", {"none", "none"}},
        {"{\"name\":\"nbafl\",\"sensitivity\":\"2C/min|D_k|\"}", {"conditional", "conditional"}},
        {"{\"name\":\"flat-laplace\",\"epsilon_total\":4,\"clip\":1}", {"proven", "proven"}},
        {"{\"name\":\"flat-laplace\",\"epsilon_total\":4}", {"conditional", "conditional"}},
        {"{\"name\":\"flat-laplace\",\"epsilon_total\":4,\"clip\":1,\"sampler\":\"float\"}", {"none", "none"}},
        // The scalar mechanisms' defenses (docs/mechanisms.md; pm and laplace at the API level in
        // test_mechanisms.c float_sampler_records), under the fixed cohort only.
        {"{\"name\":\"gaussian\",\"epsilon\":1,\"clip\":1}", {"proven", NULL}},
        {"{\"name\":\"duchi\",\"epsilon\":1,\"clip\":1}", {"proven", NULL}},
        {"{\"name\":\"ldp-fl\",\"epsilon\":1,\"range\":[-1,1]}", {"proven", NULL}},
        {"{\"name\":\"adaptive-harmony\",\"epsilon\":1,\"clip\":1}", {"proven", NULL}},
        {"{\"name\":\"pm\",\"epsilon\":1,\"clip\":1,\"sampler\":\"float\"}", {"none", NULL}},
        {"{\"name\":\"spm\",\"epsilon\":1}", {"none", NULL}},
    };
    char cfg[600], out_path[600];
    static char out[1 << 17], errb[1 << 14];
    snprintf(out_path, sizeof out_path, "%s/result.json", dir);
    int empty_rounds = 0, bernoulli_checked = 0;
    for (size_t fi = 0; fi < 2; fi++)
        for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
            if (!defs[i].guarantee[fi])
                continue;
            write_config(dir, feds[fi], defs[i].def, cfg, sizeof cfg);
            const char *args[] = {"train", "--config", cfg, "--out", out_path, NULL};
            int rc = cli_run(args, out, errb, sizeof errb);
            if (rc < 0) {
                printf("SKIP fedpriv train runs: FEDPRIV_BIN is not set (make test sets it)\n");
                rmdir(dir);
                return;
            }
            ck_assert_msg(rc == 0, "%s: exit %d: %s", defs[i].def, rc, errb);
            cJSON *res = NULL;
            FpError e = {0};
            ck_assert_int_eq(jv_load_file(out_path, &res, &e), FP_OK);
            const cJSON *ro;
            cJSON_ArrayForEach(ro, cJSON_GetObjectItem(res, "rounds")) {
                const cJSON *p = cJSON_GetObjectItem(ro, "privacy"), *snd = cJSON_GetObjectItem(p, "sound");
                const char *g = cJSON_GetStringValue(cJSON_GetObjectItem(p, "guarantee"));
                ck_assert_msg(g && strcmp(g, defs[i].guarantee[fi]) == 0, "%s, federation %zu: guarantee %s",
                              defs[i].def, fi, g ? g : "-");
                int n_assumptions = cJSON_GetArraySize(cJSON_GetObjectItem(p, "assumptions"));
                const cJSON *tot = cJSON_GetObjectItem(snd, "epsilon_total");
                if (strcmp(g, "proven") == 0) {
                    ck_assert(cJSON_IsNumber(tot) && n_assumptions == 0);
                } else {
                    ck_assert(cJSON_IsString(tot) && strcmp(tot->valuestring, "inf") == 0);
                    ck_assert_msg(n_assumptions > 0, "%s: %s without a sentence", defs[i].def, g);
                }
                if (strcmp(g, "conditional") == 0)
                    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(snd, "epsilon_total_conditional")));
                else
                    ck_assert_ptr_null(cJSON_GetObjectItem(snd, "epsilon_total_conditional"));
                if (fi == 1 && cJSON_GetNumberValue(cJSON_GetObjectItem(ro, "participants")) == 0)
                    empty_rounds++;
                // Bernoulli sampling with the server's noise (z = 1, q = 0.1): the proven figure
                // is at least the continuous formula's (Mironov, Talwar, Zhang 2019) for the
                // rounds so far, the figure this record was conditional on before.
                if (fi == 1 && i == 1) {
                    long long r = (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(ro, "round")); // 1-based
                    double mtz = account(RDP_SAMPLING_POISSON, 0.1, 1.0, r, 1e-5);
                    ck_assert_msg(cJSON_GetNumberValue(tot) >= mtz, "round %lld: proven %g < continuous %g", r,
                                  cJSON_GetNumberValue(tot), mtz);
                    bernoulli_checked++;
                }
            }
            cJSON_Delete(res);
        }
    ck_assert_msg(empty_rounds > 0, "the Bernoulli federation had no empty round: the release path is untested");
    ck_assert_int_eq(bernoulli_checked, 4);
    unlink(out_path);
    char csv[600];
    snprintf(csv, sizeof csv, "%s/toy.csv", dir);
    unlink(csv);
    unlink(cfg);
    rmdir(dir);
}
END_TEST

// An empty Bernoulli round of a central-noise defense releases the server's noise: the
// engine calls the aggregation with k = 0 and the global model moves by N(0, z²C²)/m.
START_TEST(empty_round_releases_server_noise) {
    Table t;
    table_init(&t, 5000, 0);
    DefenseSetup su = setup_for(&t, 10, 3, 0.2, 10); // m = qN = 2
    const DefenseOps *ops;
    void *st = make_defense("{\"name\":\"gaussian-dpfedavg\",\"noise_multiplier\":1.5,\"clip\":2}", &su, &ops);
    size_t np = t.table.n_params;
    float *out = malloc(sizeof(float) * np);
    double *x = malloc(sizeof(double) * 5000);
    ck_assert_int_eq(defense_aggregate(ops, st, 1, NULL, NULL, NULL, 0, np, out, NULL), FP_OK);
    for (int j = 0; j < 5000; j++)
        x[j] = out[j];
    double want = 1.5 * 2 / 2.0;
    ck_assert_msg(fabs(moment_z(x, 5000, want * want, 3)) < 6, "empty round: not N(0, (zC/m)^2)");
    ck_assert_float_eq(out[5000], 0.0f); // the batch-norm statistics get no update
    free(out);
    free(x);
    ops->destroy(st);
}
END_TEST

Suite *suite_privacy(void) {
    Suite *s = suite_create("privacy");
    TCase *t = tcase_create("records");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, settle_keeps_only_proven_bounds_in_sound);
    tcase_add_test(t, client_noise_sum_carries_z_for_every_cohort);
    tcase_add_test(t, fixed_cohort_accounted_without_replacement);
    tcase_add_test(t, paper_variant_accounts_each_rounds_cohort);
    tcase_add_test(t, bernoulli_server_noise_proven_by_general_bound);
    tcase_add_test(t, asgp_corrected_weights_from_counts_only);
    tcase_add_test(t, avp_sensitivity_defaults_to_2c);
    tcase_add_test(t, empty_round_releases_server_noise);
    suite_add_tcase(s, t);
    t = tcase_create("cli");
    tcase_set_timeout(t, 300); // 32 fedpriv train runs: about 20 s, several times that under the sanitizers
    tcase_add_test(t, cli_every_record_has_a_guarantee);
    suite_add_tcase(s, t);
    return s;
}
