// `fedpriv accountant`: (ε, δ) of the subsampled Gaussian mechanism run for N steps
// (Poisson sampling, or a fixed-size sample without replacement), by the RDP accountant
// (defenses/dp/accountant.h) or, for Poisson sampling, the PLD accountant
// (defenses/dp/accountant_pld.h); or the smallest noise multiplier that meets a target ε.
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/json_number.h"
#include "defenses/dp/accountant.h"
#include "defenses/dp/accountant_pld.h"

static const char *const CMD = "accountant";

typedef struct {
    double q, sigma, target, delta, grid;
    long long steps, batch, dataset, epochs;
    int have_q, have_sigma, have_target, have_steps, have_delta, have_grid, have_conv, have_orders;
    int have_batch, have_dataset, have_epochs;
    int json, extended, pld;
    int conv_choice; // index into CONVERSIONS
    int sampling;    // an RdpSampling
    int orders_choice;
    RdpConversion conv;
} Args;

static const char *const METHODS[] = {"rdp", "pld", NULL};
static const char *const CONVERSIONS[] = {"balle", "classic", NULL};
static const char *const ORDERS[] = {"default", "extended", NULL};
static const char *const SAMPLINGS[] = {"poisson", "fixed", "poisson-replace", "poisson-discrete", NULL};
_Static_assert(RDP_SAMPLING_POISSON == 0 && RDP_SAMPLING_FIXED == 1 && RDP_SAMPLING_POISSON_REPLACE == 2 &&
                   RDP_SAMPLING_POISSON_DISCRETE == 3,
               "SAMPLINGS lists the RdpSampling values in order");

static const char ABOUT[] =
    "  Privacy spent by N steps of the subsampled Gaussian mechanism (sampling rate Q, noise\n"
    "  multiplier S = noise std / L2 sensitivity), as an upper bound on epsilon at delta D.\n"
    "    rdp (default): Renyi DP converted to (epsilon, delta); prints epsilon and the optimal\n"
    "         RDP order alpha.\n"
    "    pld: the privacy loss distribution composed by FFT (tighter; Poisson sampling,\n"
    "         add/remove one): a discrete dominating PLD on a loss grid of width G\n"
    "         (connect-the-dots, Doroshenko et al. 2022); its truncated tails, the FFT window's\n"
    "         overflow bound and a round-off bound are all added to delta; prints epsilon and\n"
    "         those terms.\n"
    "  Q and N from a training set-up instead: --batch-size B --dataset-size M gives Q = B/M,\n"
    "  and --epochs E gives N = E x ceil(M/B) steps (every epoch is ceil(M/B) steps of\n"
    "  expected batch B; Opacus's get_noise_multiplier computes int(E / Q) = int(E M / B),\n"
    "  which is fewer when B does not divide M).";

static const char AFTER[] =
    "  --sampling: poisson (default): each independently with probability Q, add/remove one\n"
    "  (Mironov, Talwar, Zhang 2019); fixed: a sample of fixed size Q*n without replacement,\n"
    "  replace one (Wang, Balle, Kasiviswanathan 2019 Thm 9); poisson-replace: Poisson, replace\n"
    "  one (joint convexity); poisson-discrete: Poisson, add/remove one, proven for the discrete\n"
    "  Gaussian (Zhu & Wang 2019 general bound). With replace one, S is over the replace-one\n"
    "  sensitivity (2C for vectors clipped to C).\n"
    "\n"
    "  example: fedpriv accountant --q 0.04 --sigma 1.5 --steps 2250 --delta 1e-5\n"
    "           -> epsilon 7.32911117 at alpha 3.9\n"
    "           fedpriv accountant --method pld --q 0.04 --sigma 1.5 --steps 2250 --delta 1e-5\n"
    "           fedpriv accountant --batch-size 256 --dataset-size 60000 --epochs 10 --sigma 1.1 --delta 1e-5";

static int fail(const char *msg) {
    fp_print_line(stderr, "fedpriv %s: %s", CMD, msg);
    return CLI_EXIT_BADINPUT;
}

// Parses argv into a; returns 0 on success or an exit status after printing one line.
static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    const CliOption opts[] = {
        {"--method", NULL, CLI_CHOICE, &a->pld, .choices = METHODS, .help = "rdp (default) or pld"},
        {"--q", NULL, CLI_FRACTION, &a->q, &a->have_q, "Q", "sampling rate, a number or a fraction (256/60000;\n"
                                                            "1 = every record/client every step)", .lo = 0, .hi = 1},
        {"--sigma", NULL, CLI_DOUBLE, &a->sigma, &a->have_sigma, "S", "noise multiplier", .lo = 0, .hi = INFINITY},
        {"--target-eps", NULL, CLI_DOUBLE, &a->target, &a->have_target, "E",
         "instead of --sigma: print the smallest sigma whose epsilon is <= E", .lo = 0, .hi = INFINITY, .lo_open = 1},
        {"--steps", NULL, CLI_INT, &a->steps, &a->have_steps, "N", "number of steps (compositions)", .lo = 1,
         .hi = INFINITY},
        {"--batch-size", NULL, CLI_INT, &a->batch, &a->have_batch, "B",
         "with --dataset-size, instead of --q: Q = B/M", .lo = 1, .hi = INFINITY},
        {"--dataset-size", NULL, CLI_INT, &a->dataset, &a->have_dataset, "M", "records (or clients) sampled from",
         .lo = 1, .hi = INFINITY},
        {"--epochs", NULL, CLI_INT, &a->epochs, &a->have_epochs, "E",
         "with --batch-size and --dataset-size, instead of --steps:\nE x ceil(M/B) steps", .lo = 1, .hi = INFINITY},
        {"--delta", NULL, CLI_DOUBLE, &a->delta, &a->have_delta, "D", "target delta", .lo = 0, .hi = 1, .lo_open = 1,
         .hi_open = 1},
        {"--sampling", NULL, CLI_CHOICE, &a->sampling, .choices = SAMPLINGS, .help = "how each step samples (below)"},
        {"--conversion", NULL, CLI_CHOICE, &a->conv_choice, &a->have_conv, .choices = CONVERSIONS,
         .help = "balle (default; Balle et al. 2020 Thm 21) or classic (Mironov 2017\n"
                 "Prop. 3, looser; for comparison); rdp only"},
        {"--orders", NULL, CLI_CHOICE, &a->orders_choice, &a->have_orders, .choices = ORDERS,
         .help = "default (Opacus DEFAULT_ALPHAS: 1.1..10.9 step 0.1, 12..63) or extended\n"
                 "(adds integer orders up to 1024, for small epsilon); rdp only"},
        {"--grid", NULL, CLI_DOUBLE, &a->grid, &a->have_grid, "G", "pld only: loss grid width (default 1e-4)",
         .lo = 1e-6, .hi = 0.1},
        {"--json", NULL, CLI_FLAG, &a->json, .help = "print one JSON object instead of text"},
    };
    const CliCommand c = {
        .cmd = CMD,
        .synopsis = "fedpriv accountant (--q Q --steps N | --batch-size B --dataset-size M [--epochs E])\n"
                    "                          (--sigma S | --target-eps E) --delta D\n"
                    "                          [--method rdp|pld] [--sampling poisson|fixed|poisson-replace|poisson-discrete]\n"
                    "                          [--conversion balle|classic] [--orders default|extended]\n"
                    "                          [--grid G] [--json]",
        .about = ABOUT,
        .after = AFTER,
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
    };
    int rc = cli_options_parse(&c, argc, argv);
    if (rc != CLI_PARSED)
        return rc == CLI_EXIT_OK ? -2 : rc; // -2: the help was printed
    a->conv = a->conv_choice == 0 ? RDP_CONVERSION_BALLE2020 : RDP_CONVERSION_CLASSIC;
    a->extended = a->orders_choice == 1;
    // Q and N, given or from the training set-up.
    if (a->have_q && (a->have_batch || a->have_dataset))
        return fail("give --q or --batch-size with --dataset-size, not both");
    if (a->have_batch != a->have_dataset)
        return fail("--batch-size and --dataset-size go together (Q = B/M)");
    if (a->have_batch) {
        if (a->batch > a->dataset) {
            fp_print_line(stderr, "fedpriv %s: --batch-size %lld is larger than --dataset-size %lld", CMD, a->batch,
                          a->dataset);
            return CLI_EXIT_BADINPUT;
        }
        a->q = (double)a->batch / (double)a->dataset;
        a->have_q = 1;
    }
    if (a->have_epochs && a->have_steps)
        return fail("give --steps or --epochs, not both");
    if (a->have_epochs && !a->have_batch)
        return fail("--epochs needs --batch-size and --dataset-size (E x ceil(M/B) steps)");
    if (a->have_epochs) {
        long long per_epoch = (a->dataset + a->batch - 1) / a->batch;
        if (a->epochs > LLONG_MAX / per_epoch)
            return fail("--epochs: too many steps");
        a->steps = a->epochs * per_epoch;
        a->have_steps = 1;
    }
    if (!a->have_q)
        return fail("--q (or --batch-size with --dataset-size) is required");
    if (a->have_sigma == a->have_target)
        return fail("give exactly one of --sigma and --target-eps");
    if (a->have_target && a->conv != RDP_CONVERSION_BALLE2020)
        return fail("--target-eps uses the balle conversion; drop --conversion classic");
    if (!a->have_steps)
        return fail("--steps (or --epochs with --batch-size and --dataset-size) is required");
    if (!a->have_delta)
        return fail("--delta is required");
    if (a->pld && (a->have_conv || a->have_orders))
        return fail("--conversion and --orders apply to --method rdp only");
    if (a->pld && a->sampling != RDP_SAMPLING_POISSON)
        return fail("--method pld accounts Poisson sampling (add/remove one) only");
    if (!a->pld && a->have_grid)
        return fail("--grid applies to --method pld only");
    return 0;
}

// The training set-up the rate and the steps came from, when given.
static void add_setup(cJSON *o, const Args *a) {
    if (a->have_batch) {
        cJSON_AddNumberToObject(o, "batch_size", (double)a->batch);
        cJSON_AddNumberToObject(o, "dataset_size", (double)a->dataset);
    }
    if (a->have_epochs)
        cJSON_AddNumberToObject(o, "epochs", (double)a->epochs);
}

// Prints a JSON object and frees it; the status to exit with.
static int print_json(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) {
        FpError e = {FP_ENOMEM, "out of memory"};
        return cli_report_error(CMD, &e);
    }
    printf("%s\n", s);
    cJSON_free(s);
    return CLI_EXIT_OK;
}

static int run_pld(const Args *a) {
    FpError err = {0};
    double sigma = a->sigma, grid = a->have_grid ? a->grid : PLD_DEFAULT_GRID;
    if (a->have_target && pld_sigma_for_epsilon(a->q, a->steps, a->delta, a->target, grid, stderr, &sigma, NULL, &err) != FP_OK)
        return cli_report_error(CMD, &err);
    PldAccountant *acc = NULL;
    PldEpsilon r;
    FpStatus st = pld_accountant_create(grid, &acc, &err);
    if (st == FP_OK) {
        pld_accountant_set_progress(acc, stderr);
        st = pld_accountant_add(acc, a->q, sigma, a->steps, &err);
    }
    if (st == FP_OK)
        st = pld_accountant_epsilon(acc, a->delta, &r, &err);
    pld_accountant_free(acc);
    if (st != FP_OK)
        return cli_report_error(CMD, &err);
    const char *dir = r.remove_direction ? "remove" : "add";
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        if (o) {
            cJSON_AddStringToObject(o, "notion", "PLD, Poisson-subsampled Gaussian mechanism, add/remove one");
            cJSON_AddStringToObject(o, "method", "pld");
            cJSON_AddStringToObject(o, "sampling", rdp_sampling_name(RDP_SAMPLING_POISSON));
            cJSON_AddNumberToObject(o, "q", a->q);
            cJSON_AddNumberToObject(o, "sigma", sigma);
            cJSON_AddNumberToObject(o, "steps", (double)a->steps);
            add_setup(o, a);
            cJSON_AddNumberToObject(o, "delta", a->delta);
            if (a->have_target)
                cJSON_AddNumberToObject(o, "target_epsilon", a->target);
            cJSON_AddNumberToObject(o, "epsilon", r.epsilon); // cJSON writes null for inf
            if (r.infinite_reason)
                cJSON_AddStringToObject(o, "no_finite_bound", r.infinite_reason);
            cJSON_AddStringToObject(o, "direction", dir);
            cJSON_AddNumberToObject(o, "grid", r.grid);
            cJSON_AddNumberToObject(o, "fft_size", (double)r.fft_size);
            cJSON_AddNumberToObject(o, "delta_grid", r.delta_grid);
            cJSON_AddNumberToObject(o, "delta_tail", r.delta_tail);
            cJSON_AddNumberToObject(o, "delta_alias", r.delta_alias);
            cJSON_AddNumberToObject(o, "delta_roundoff", r.delta_roundoff);
        }
        return print_json(o);
    }
    if (a->have_target)
        printf("sigma %.8g  (smallest noise multiplier with epsilon <= %.9g)\n", sigma, a->target);
    if (r.infinite_reason) {
        printf("epsilon inf  (no finite bound: %s; delta %g; q %g, %lld steps; poisson sampling; PLD)\n",
               r.infinite_reason, a->delta, a->q, a->steps);
        return CLI_EXIT_OK;
    }
    printf("epsilon %.9g  (delta %g; q %g, sigma %.8g, %lld steps; poisson sampling; PLD, grid %g)\n", r.epsilon,
           a->delta, a->q, sigma, a->steps, r.grid);
    if (isfinite(r.epsilon) && r.fft_size > 0)
        printf("delta budget at that epsilon (%s neighbours): discrete PLD %.6g + truncated tails %.3g + "
               "FFT window %.3g + round-off %.3g <= %g\n",
               dir, r.delta_grid, r.delta_tail, r.delta_alias, r.delta_roundoff, a->delta);
    return CLI_EXIT_OK;
}

int cmd_accountant(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc == -2 ? CLI_EXIT_OK : rc;
    if (a.pld)
        return run_pld(&a);

    double orders[RDP_EXTENDED_ORDER_COUNT];
    int n_orders = a.extended ? rdp_extended_orders(orders) : rdp_default_orders(orders);
    FpError err = {0};
    double sigma = a.sigma, eps = NAN, alpha = NAN;
    if (a.have_target) {
        FpStatus st = rdp_sigma_for_epsilon_sampled(a.sampling, a.q, a.steps, a.delta, a.target, orders, n_orders,
                                                    &sigma, NULL, &err);
        if (st != FP_OK)
            return cli_report_error(CMD, &err);
    }
    RdpAccountant *acc = NULL;
    FpStatus st = rdp_accountant_create(orders, n_orders, &acc, &err);
    if (st == FP_OK)
        st = rdp_accountant_add_sampled(acc, a.sampling, a.q, sigma, a.steps, &err);
    if (st == FP_OK)
        st = rdp_accountant_epsilon(acc, a.delta, a.conv, &eps, &alpha, &err);
    rdp_accountant_free(acc);
    if (st != FP_OK)
        return cli_report_error(CMD, &err);
    // Opacus warns when the optimum sits at an end of the grid: the bound may be loose.
    int at_edge = !isnan(alpha) && (alpha == orders[0] || alpha == orders[n_orders - 1]);
    const char *conv_name = a.conv == RDP_CONVERSION_BALLE2020 ? "balle2020" : "classic";
    const char *orders_name = a.extended ? "extended" : "default";

    if (a.json) {
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            FpError e = {FP_ENOMEM, "out of memory"};
            return cli_report_error(CMD, &e);
        }
        cJSON_AddStringToObject(o, "notion",
                                a.sampling == RDP_SAMPLING_POISSON
                                    ? "RDP, Poisson-subsampled Gaussian mechanism, add/remove one"
                                    : a.sampling == RDP_SAMPLING_FIXED
                                          ? "RDP, Gaussian mechanism on a fixed-size sample without replacement, "
                                            "replace one"
                                          : a.sampling == RDP_SAMPLING_POISSON_DISCRETE
                                                ? "RDP, Poisson-subsampled discrete Gaussian mechanism, add/remove "
                                                  "one (Zhu & Wang 2019 general bound)"
                                                : "RDP, Poisson-sampled Gaussian mechanism, replace one (joint "
                                                  "convexity)");
        cJSON_AddStringToObject(o, "method", "rdp");
        cJSON_AddStringToObject(o, "sampling", rdp_sampling_name(a.sampling));
        cJSON_AddNumberToObject(o, "q", a.q);
        cJSON_AddNumberToObject(o, "sigma", sigma);
        cJSON_AddNumberToObject(o, "steps", (double)a.steps);
        add_setup(o, &a);
        cJSON_AddNumberToObject(o, "delta", a.delta);
        if (a.have_target)
            cJSON_AddNumberToObject(o, "target_epsilon", a.target);
        // No finite bound (sigma 0 with q > 0): "inf" as in every result, and no order.
        if (isinf(eps))
            cJSON_AddStringToObject(o, "epsilon", "inf");
        else
            cJSON_AddNumberToObject(o, "epsilon", eps);
        if (isnan(alpha))
            cJSON_AddNullToObject(o, "alpha");
        else
            cJSON_AddNumberToObject(o, "alpha", alpha);
        cJSON_AddStringToObject(o, "conversion", conv_name);
        cJSON_AddStringToObject(o, "orders", orders_name);
        cJSON_AddBoolToObject(o, "alpha_at_grid_edge", at_edge);
        char *s = jnum_print(o, 0);
        cJSON_Delete(o);
        if (!s) {
            FpError e = {FP_ENOMEM, "out of memory"};
            return cli_report_error(CMD, &e);
        }
        printf("%s\n", s);
        cJSON_free(s);
        return CLI_EXIT_OK;
    }
    if (a.have_target)
        printf("sigma %.8g  (smallest noise multiplier with epsilon <= %.9g)\n", sigma, a.target);
    if (isinf(eps)) {
        printf("epsilon inf  (no finite bound: sigma %g adds no noise; delta %g; q %g, %lld steps; %s sampling)\n",
               sigma, a.delta, a.q, a.steps, rdp_sampling_name(a.sampling));
        return CLI_EXIT_OK;
    }
    if (isnan(alpha)) { // q = 0: nothing is ever sampled, no order is optimal
        printf("epsilon %.9g  (q %g: no record is sampled; delta %g, sigma %.8g, %lld steps)\n", eps, a.q, a.delta,
               sigma, a.steps);
        return CLI_EXIT_OK;
    }
    printf("epsilon %.9g  at alpha %.4g  (delta %g; q %g, sigma %.8g, %lld steps; %s sampling; %s conversion, %s "
           "orders)\n",
           eps, alpha, a.delta, a.q, sigma, a.steps, rdp_sampling_name(a.sampling), conv_name, orders_name);
    if (at_edge && alpha == orders[0])
        printf("note: the optimal order is the smallest in the grid; the bound may be loose (little noise)\n");
    else if (at_edge)
        printf("note: the optimal order is the largest in the grid; the bound may be loose%s\n",
               a.extended ? "" : " (try --orders extended)");
    return CLI_EXIT_OK;
}
