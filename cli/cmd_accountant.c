// `fedpriv accountant`: (ε, δ) of the subsampled Gaussian mechanism run for N steps
// (Poisson sampling, or a fixed-size sample without replacement), by the RDP accountant
// (defenses/accountant.h) or, for Poisson sampling, the PLD accountant
// (defenses/accountant_pld.h); or the smallest noise multiplier that meets a target ε.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json_number.h"
#include "defenses/accountant.h"
#include "defenses/accountant_pld.h"

static const char *const CMD = "accountant";

static void usage(FILE *f) {
    fprintf(f,
            "usage: fedpriv accountant --q Q (--sigma S | --target-eps E) --steps N --delta D\n"
            "                          [--method rdp|pld] [--sampling poisson|fixed|poisson-replace|poisson-discrete]\n"
            "                          [--conversion balle|classic] [--orders default|extended]\n"
            "                          [--grid G] [--json]\n"
            "\n"
            "  Privacy spent by N steps of the subsampled Gaussian mechanism (sampling rate Q, noise\n"
            "  multiplier S = noise std / L2 sensitivity), as an upper bound on epsilon at delta D.\n"
            "    rdp (default): Renyi DP converted to (epsilon, delta); prints epsilon and the optimal\n"
            "         RDP order alpha.\n"
            "    pld: the privacy loss distribution composed by FFT (tighter; Poisson sampling,\n"
            "         add/remove one): a discrete dominating PLD on a loss grid of width G\n"
            "         (connect-the-dots, Doroshenko et al. 2022); its truncated tails, the FFT window's\n"
            "         overflow bound and a round-off bound are all added to delta; prints epsilon and\n"
            "         those terms.\n"
            "\n"
            "  --method         rdp (default) or pld\n"
            "  --q Q            sampling rate in [0, 1] (1 = every record/client every step)\n"
            "  --sigma S        noise multiplier, >= 0\n"
            "  --target-eps E   instead of --sigma: print the smallest sigma whose epsilon is <= E\n"
            "  --steps N        number of steps (compositions), >= 1\n"
            "  --sampling       poisson (default): each independently with probability Q, add/remove one\n"
            "                   (Mironov, Talwar, Zhang 2019); fixed: a sample of fixed size Q*n without\n"
            "                   replacement, replace one (Wang, Balle, Kasiviswanathan 2019 Thm 9);\n"
            "                   poisson-replace: Poisson, replace one (joint convexity); poisson-discrete:\n"
            "                   Poisson, add/remove one, proven for the discrete Gaussian (Zhu & Wang 2019\n"
            "                   general bound). With replace one,\n"
            "                   S is over the replace-one sensitivity (2C for vectors clipped to C)\n"
            "  --delta D        target delta in (0, 1)\n"
            "  --conversion     balle (default; Balle et al. 2020 Thm 21) or classic (Mironov 2017\n"
            "                   Prop. 3, looser; for comparison); rdp only\n"
            "  --orders         default (Opacus DEFAULT_ALPHAS: 1.1..10.9 step 0.1, 12..63) or extended\n"
            "                   (adds integer orders up to 1024, for small epsilon); rdp only\n"
            "  --grid G         pld only: loss grid width in [1e-6, 0.1] (default 1e-4)\n"
            "  --json           print one JSON object instead of text\n"
            "\n"
            "  example: fedpriv accountant --q 0.04 --sigma 1.5 --steps 2250 --delta 1e-5\n"
            "           -> epsilon 7.32911117 at alpha 3.9\n"
            "           fedpriv accountant --method pld --q 0.04 --sigma 1.5 --steps 2250 --delta 1e-5\n");
}

typedef struct {
    double q, sigma, target, delta, grid;
    long long steps;
    int have_q, have_sigma, have_target, have_steps, have_delta, have_grid, have_conv, have_orders;
    int json, extended, pld;
    RdpConversion conv;
    RdpSampling sampling;
} Args;

// Parses argv into a; returns 0 on success or an exit status after printing one line.
static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->conv = RDP_CONVERSION_BALLE2020;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--json") == 0) {
            a->json = 1;
            continue;
        }
        // --opt VALUE or --opt=VALUE
        char opt[64];
        const char *val = NULL;
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) == 0 && eq && (size_t)(eq - arg) < sizeof opt) {
            memcpy(opt, arg, (size_t)(eq - arg));
            opt[eq - arg] = '\0';
            val = eq + 1;
        } else if (strlen(arg) < sizeof opt) {
            strcpy(opt, arg);
            val = i + 1 < argc ? argv[++i] : NULL;
        } else {
            fp_print_line(stderr, "fedpriv %s: unknown option \"%.60s...\" (fedpriv accountant --help)", CMD, arg);
            return CLI_EXIT_BADINPUT;
        }
        if (strcmp(opt, "--q") == 0) {
            if (!cli_parse_double(CMD, opt, val, &a->q))
                return CLI_EXIT_BADINPUT;
            a->have_q = 1;
        } else if (strcmp(opt, "--sigma") == 0) {
            if (!cli_parse_double(CMD, opt, val, &a->sigma))
                return CLI_EXIT_BADINPUT;
            a->have_sigma = 1;
        } else if (strcmp(opt, "--target-eps") == 0) {
            if (!cli_parse_double(CMD, opt, val, &a->target))
                return CLI_EXIT_BADINPUT;
            a->have_target = 1;
        } else if (strcmp(opt, "--delta") == 0) {
            if (!cli_parse_double(CMD, opt, val, &a->delta))
                return CLI_EXIT_BADINPUT;
            a->have_delta = 1;
        } else if (strcmp(opt, "--steps") == 0) {
            if (!cli_parse_long(CMD, opt, val, &a->steps))
                return CLI_EXIT_BADINPUT;
            a->have_steps = 1;
        } else if (strcmp(opt, "--method") == 0) {
            if (val && strcmp(val, "rdp") == 0)
                a->pld = 0;
            else if (val && strcmp(val, "pld") == 0)
                a->pld = 1;
            else {
                fprintf(stderr, "fedpriv %s: --method must be rdp or pld\n", CMD);
                return CLI_EXIT_BADINPUT;
            }
        } else if (strcmp(opt, "--grid") == 0) {
            if (!cli_parse_double(CMD, opt, val, &a->grid))
                return CLI_EXIT_BADINPUT;
            a->have_grid = 1;
        } else if (strcmp(opt, "--conversion") == 0) {
            a->have_conv = 1;
            if (val && strcmp(val, "balle") == 0)
                a->conv = RDP_CONVERSION_BALLE2020;
            else if (val && strcmp(val, "classic") == 0)
                a->conv = RDP_CONVERSION_CLASSIC;
            else {
                fp_print_line(stderr, "fedpriv %s: --conversion must be balle or classic", CMD);
                return CLI_EXIT_BADINPUT;
            }
        } else if (strcmp(opt, "--sampling") == 0) {
            int found = 0;
            for (int k = 0; val && rdp_sampling_name((RdpSampling)k); k++)
                if (strcmp(val, rdp_sampling_name((RdpSampling)k)) == 0) {
                    a->sampling = (RdpSampling)k;
                    found = 1;
                }
            if (!found) {
                fp_print_line(stderr, "fedpriv %s: --sampling must be poisson, fixed, poisson-replace or poisson-discrete", CMD);
                return CLI_EXIT_BADINPUT;
            }
        } else if (strcmp(opt, "--orders") == 0) {
            a->have_orders = 1;
            if (val && strcmp(val, "default") == 0)
                a->extended = 0;
            else if (val && strcmp(val, "extended") == 0)
                a->extended = 1;
            else {
                fp_print_line(stderr, "fedpriv %s: --orders must be default or extended", CMD);
                return CLI_EXIT_BADINPUT;
            }
        } else {
            fp_print_line(stderr, "fedpriv %s: unknown option \"%s\" (fedpriv accountant --help)", CMD, opt);
            return CLI_EXIT_BADINPUT;
        }
    }
    // Range checks, one line naming the option.
    if (!a->have_q) {
        fp_print_line(stderr, "fedpriv %s: --q is required", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (!(a->q >= 0.0 && a->q <= 1.0)) {
        fp_print_line(stderr, "fedpriv %s: --q must be in [0, 1], got %g", CMD, a->q);
        return CLI_EXIT_BADINPUT;
    }
    if (a->have_sigma == a->have_target) {
        fp_print_line(stderr, "fedpriv %s: give exactly one of --sigma and --target-eps", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (a->have_sigma && !(a->sigma >= 0.0)) {
        fp_print_line(stderr, "fedpriv %s: --sigma must be >= 0, got %g", CMD, a->sigma);
        return CLI_EXIT_BADINPUT;
    }
    if (a->have_target && !(a->target > 0.0)) {
        fp_print_line(stderr, "fedpriv %s: --target-eps must be > 0, got %g", CMD, a->target);
        return CLI_EXIT_BADINPUT;
    }
    if (a->have_target && a->conv != RDP_CONVERSION_BALLE2020) {
        fp_print_line(stderr, "fedpriv %s: --target-eps uses the balle conversion; drop --conversion classic", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (!a->have_steps) {
        fp_print_line(stderr, "fedpriv %s: --steps is required", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (a->steps < 1) {
        fp_print_line(stderr, "fedpriv %s: --steps must be >= 1, got %lld", CMD, a->steps);
        return CLI_EXIT_BADINPUT;
    }
    if (!a->have_delta) {
        fp_print_line(stderr, "fedpriv %s: --delta is required", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (!(a->delta > 0.0 && a->delta < 1.0)) {
        fp_print_line(stderr, "fedpriv %s: --delta must be in (0, 1), got %g", CMD, a->delta);
        return CLI_EXIT_BADINPUT;
    }
    if (a->pld && (a->have_conv || a->have_orders)) {
        fprintf(stderr, "fedpriv %s: --conversion and --orders apply to --method rdp only\n", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (a->pld && a->sampling != RDP_SAMPLING_POISSON) {
        fprintf(stderr, "fedpriv %s: --method pld accounts Poisson sampling (add/remove one) only\n", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (!a->pld && a->have_grid) {
        fprintf(stderr, "fedpriv %s: --grid applies to --method pld only\n", CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (a->have_grid && !(a->grid >= 1e-6 && a->grid <= 0.1)) {
        fprintf(stderr, "fedpriv %s: --grid must be in [1e-6, 0.1], got %g\n", CMD, a->grid);
        return CLI_EXIT_BADINPUT;
    }
    return 0;
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
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    Args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
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
