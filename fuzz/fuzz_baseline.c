// libFuzzer target: `fedpriv check` baseline files and the run they are checked against
// (runner/check.c check_baseline, which reads the run with matrix_results_load and
// matrix_audit_load).
//
// Byte 0 even: the rest is the baseline, checked against a fixed run directory
// (fuzz/fuzz_run_dir.h). Odd: the rest replaces one file of that run (byte 1 picks:
// results.json, a cell file, or the audit record) and a fixed baseline is checked.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <unistd.h>

#include "core/jsonv.h"
#include "fuzz/fuzz_run_dir.h"
#include "fuzz/fuzz_util.h"
#include "runner/check.h"

static char dir[128];
static cJSON *fixed_baseline;

static void cleanup(void) {
    fuzz_run_dir_remove(dir);
    rmdir(dir);
    cJSON_Delete(fixed_baseline);
}

static void setup(void) {
    snprintf(dir, sizeof dir, "%s", fuzz_tmpdir());
    fuzz_run_dir_make(dir);
    fixed_baseline = cJSON_Parse(
        "{\"require_complete\": true, \"bounds\": ["
        "{\"defense\": \"none\", \"metric\": \"model_accuracy\", \"at_least\": 0.7},"
        "{\"defense\": \"*\", \"attack\": \"dlg\", \"metric\": \"ssim_mean\", \"at_most\": 0.99},"
        "{\"defense\": \"spm\", \"epsilon_max\": 1, \"params\": {\"epsilon\": 1}, \"attack\": \"ml-leaks\","
        " \"at_most\": 0.6},"
        "{\"defense\": \"*\", \"metric\": \"epsilon_sound\", \"at_most\": 100, \"min_cells\": 2},"
        "{\"audit\": \"*\", \"at_most\": \"epsilon\"}]}");
    if (!fixed_baseline)
        abort();
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0])
        setup();
    if (size < 2)
        return 0;
    FpError err = {0};
    CheckResult res = {0};
    if ((data[0] & 1) == 0) {
        const char *path = fuzz_file(0, data + 1, size - 1);
        cJSON *baseline = NULL;
        if (jv_load_file(path, &baseline, &err) != FP_OK) {
            fuzz_check_message(err.msg);
            return 0;
        }
        fuzz_check_tree(baseline);
        if (check_baseline(dir, baseline, "baseline.json", &res, &err) == FP_OK)
            check_result_free(&res);
        else
            fuzz_check_message(err.msg);
        cJSON_Delete(baseline);
        return 0;
    }
    char p[512];
    int which = data[1] % 5; // 0: index, 1-3: a cell, 4: the audit record
    if (which == 0)
        snprintf(p, sizeof p, "%s/results.json", dir);
    else if (which < 4)
        snprintf(p, sizeof p, "%s/cells/%s.json", dir, fuzz_cell_ids[which - 1]);
    else
        snprintf(p, sizeof p, "%s/audit/a.json", dir);
    fuzz_write(p, data + 2, size - 2);
    if (check_baseline(dir, fixed_baseline, "baseline.json", &res, &err) == FP_OK)
        check_result_free(&res);
    else
        fuzz_check_message(err.msg);
    fuzz_run_dir_make(dir); // restore the fixed run
    return 0;
}
