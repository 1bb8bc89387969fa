// `fedpriv forecast --config FILE.json [--model FILE] [--out result.json]`: reference
// forecasts for a power-load experiment and, given a model saved by `fedpriv train
// --save-model`, that model's test error per zone (the max / min / average over zones
// that the layer-wise DP paper's Fig. 3 plots). Seasonal naive: ŷ(h) = load(h − 24)
// and load(h − 168); persistence: load(h − 1); all on the test windows' targets, in the
// dataset's normalisation (MSE, MAE on load / zone mean; MAPE as a fraction).
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"
#include "datasets/power_load.h"
#include "defenses/registry.h"
#include "fl/experiment.h"

static cJSON *metrics_json(double mse, double mae, double mape) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mse", mse);
    cJSON_AddNumberToObject(o, "mae", mae);
    jnum_add(o, "mape", mape);
    return o;
}

static FpStatus model_per_zone(Experiment *ex, cJSON *res, FpError *err) {
    const Dataset *te = ex->test;
    int Z = power_load_zones(te);
    double mse, mae, mape;
    FP_TRY(model_evaluate_regression(ex->model, te, ex->threads, &mse, &mae, &mape, err));
    cJSON *m = cJSON_AddObjectToObject(res, "model");
    cJSON_AddItemToObject(m, "overall", metrics_json(mse, mae, mape));
    if (Z < 1 || te->n % Z)
        return FP_OK;
    int per = te->n / Z;
    uint32_t *idx = fp_malloc(sizeof(uint32_t) * per, err);
    if (!idx)
        return FP_ENOMEM;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    cJSON *zones = cJSON_AddArrayToObject(m, "zones");
    FpStatus st = FP_OK;
    for (int z = 0; z < Z && st == FP_OK; z++) {
        for (int i = 0; i < per; i++)
            idx[i] = (uint32_t)(z * per + i);
        Dataset *sub = dataset_subset(te, idx, per, err);
        if (!sub) {
            st = err ? err->code : FP_ENOMEM;
            break;
        }
        st = model_evaluate_regression(ex->model, sub, ex->threads, &mse, &mae, &mape, err);
        dataset_free(sub);
        if (st != FP_OK)
            break;
        cJSON_AddItemToArray(zones, metrics_json(mse, mae, mape));
        lo = mse < lo ? mse : lo;
        hi = mse > hi ? mse : hi;
        sum += mse;
    }
    free(idx);
    if (st == FP_OK) {
        cJSON_AddNumberToObject(m, "zone_mse_max", hi);
        cJSON_AddNumberToObject(m, "zone_mse_min", lo);
        cJSON_AddNumberToObject(m, "zone_mse_mean", sum / Z);
    }
    return st;
}

int cmd_forecast(int argc, char **argv) {
    const char *config = NULL, *model = NULL, *out = NULL;
    const CliOption opts[] = {
        {"--config", NULL, CLI_STRING, &config, .value = "FILE.json", .help = "a power-load experiment"},
        {"--model", NULL, CLI_STRING, &model, .value = "FILE", .help = "a model saved by fedpriv train --save-model"},
        {"--out", NULL, CLI_STRING, &out, .value = "result.json", .help = "where the JSON goes (default: stdout)"},
    };
    const CliCommand c = {
        .cmd = "forecast",
        .synopsis = "fedpriv forecast --config FILE.json [--model FILE] [--out result.json]",
        .about = "  For a power-load config: the seasonal-naive (24 h, 168 h) and persistence (1 h)\n"
                 "  forecasts' MSE, MAE and MAPE on the test split and, with --model (a file from\n"
                 "  fedpriv train --save-model), the model's metrics overall and per zone (max, min,\n"
                 "  mean over zones). Writes JSON (default: stdout). Exit 2 on bad input.",
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
    };
    int prc = cli_options_parse(&c, argc, argv);
    if (prc != CLI_PARSED)
        return prc;
    if (!config) {
        fp_print_line(stderr, "fedpriv forecast: --config FILE.json is required");
        return CLI_EXIT_BADINPUT;
    }
    FpError err = {0};
    cJSON *root = NULL;
    if ((out && fp_check_writable_file(out, &err) != FP_OK) || jv_load_file(config, &root, &err) != FP_OK ||
        experiment_resolve_paths(root, config, &err) != FP_OK) {
        cJSON_Delete(root);
        return cli_report_error("forecast", &err);
    }
    static const char *const extra[] = {"attack", NULL};
    Experiment ex;
    if (experiment_load(root, extra, NULL, 0, defense_find, &ex, &err) != FP_OK) {
        cJSON_Delete(root);
        return cli_report_error("forecast", &err);
    }
    int rc = CLI_EXIT_OK;
    cJSON *res = cJSON_CreateObject();
    FpStatus st = FP_OK;
    if (!power_load_zones(ex.test))
        st = fp_fail(&err, FP_EPARAM, "%s: dataset.name: forecast references need the power-load dataset", config);
    const char *path = NULL;
    if (st == FP_OK)
        st = jv_string(ex.dataset_json, "dataset", "path", JV_OPTIONAL, NULL, &path, &err);
    cJSON_AddStringToObject(res, "command", "forecast");
    cJSON_AddStringToObject(res, "dataset", path && path[0] ? path : "power-load (synthetic)");
    static const struct { const char *name; int lag; } refs[] = {
        {"seasonal_naive_24h", 24}, {"seasonal_naive_168h", 168}, {"persistence_1h", 1}};
    for (size_t i = 0; st == FP_OK && i < sizeof refs / sizeof refs[0]; i++) {
        ForecastMetrics fm;
        st = power_load_seasonal_naive(path, refs[i].lag, &fm, &err);
        if (st == FP_OK) {
            cJSON *o = metrics_json(fm.mse, fm.mae, fm.mape);
            cJSON_AddNumberToObject(o, "targets", fm.n);
            cJSON_AddItemToObject(res, refs[i].name, o);
        }
    }
    if (st == FP_OK && model)
        st = model_load(ex.model, model, &err);
    if (st == FP_OK && model)
        st = model_per_zone(&ex, res, &err);
    if (st != FP_OK)
        rc = cli_report_error("forecast", &err);
    else if (out) {
        if (jv_write_file_atomic(out, res, &err) != FP_OK)
            rc = cli_report_error("forecast", &err);
    } else {
        char *text = jnum_print(res, 1);
        puts(text);
        free(text);
    }
    cJSON_Delete(res);
    experiment_free(&ex);
    cJSON_Delete(root);
    return rc;
}
