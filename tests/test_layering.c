// The layering rule (README, docs): dependencies point downward only,
//   cli -> runner -> audits -> reports, attacks -> defenses -> fl -> models -> datasets, eval, dp -> core
// (dp is defenses/dp: the mechanisms, samplers and accountants, which know nothing of
// federations or plugins, so the mechanism audits and `fedpriv accountant` use them
// without the plugin layer)
// (audits sit above attacks: the training-run audit runs in a matrix as an attack)
// (models sit above datasets: models/predict.h evaluates a model over a dataset's batches)
// Every `#include "MODULE/..."` in the library's sources is checked against it: a module
// may include its own headers and those of modules below it, never one above it or a
// sibling on its own level. A control checks that the rule catches an upward include.
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *dir;   // a source folder
    const char *module; // the module it belongs to
    int level;
} Layer;

static const Layer layers[] = {
    {"core", "core", 0},         {"core/cpu", "core", 0},   {"core/cuda", "core", 0},
    {"datasets", "datasets", 1}, {"eval", "eval", 1},         {"defenses/dp", "dp", 1},
    {"models", "models", 2},
    {"fl", "fl", 3},             {"defenses", "defenses", 4}, {"attacks", "attacks", 5},
    {"reports", "reports", 5},   {"audits", "audits", 6},     {"runner", "runner", 7},
    {"cli", "cli", 8},
};
#define N_LAYERS (int)(sizeof layers / sizeof layers[0])

static const Layer *layer_of_dir(const char *dir) {
    for (int i = 0; i < N_LAYERS; i++)
        if (strcmp(layers[i].dir, dir) == 0)
            return &layers[i];
    return NULL;
}

// The folder of an include path ("core/cpu/x.h" -> "core/cpu"), into buf.
static const Layer *layer_of_include(const char *inc, char *buf, size_t n) {
    const char *slash = strrchr(inc, '/');
    if (!slash || (size_t)(slash - inc) >= n)
        return NULL;
    memcpy(buf, inc, (size_t)(slash - inc));
    buf[slash - inc] = 0;
    return layer_of_dir(buf);
}

// 1 when a file of module `from` may include `inc`.
static int include_allowed(const Layer *from, const char *inc) {
    char dir[256];
    const Layer *to = layer_of_include(inc, dir, sizeof dir);
    if (!to)
        return 1; // not a module header (system, tests/, fuzz/)
    if (strcmp(to->module, from->module) == 0)
        return 1;
    return to->level < from->level;
}

// Scans every .c/.h/.cu file in the layer's folder; appends violations to out.
static int scan_dir(const Layer *l, char *out, size_t n) {
    DIR *d = opendir(l->dir);
    ck_assert_msg(d != NULL, "%s: cannot open (tests run from the repository root)", l->dir);
    int bad = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        int src = (len > 2 && (strcmp(de->d_name + len - 2, ".c") == 0 || strcmp(de->d_name + len - 2, ".h") == 0)) ||
                  (len > 3 && strcmp(de->d_name + len - 3, ".cu") == 0);
        if (!src)
            continue;
        char path[512], line[1024];
        snprintf(path, sizeof path, "%s/%s", l->dir, de->d_name);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "%s", path);
        int lineno = 0;
        while (fgets(line, sizeof line, f)) {
            lineno++;
            char inc[300];
            if (sscanf(line, " # include \"%299[^\"]\"", inc) != 1)
                continue;
            if (!include_allowed(l, inc)) {
                size_t k = strlen(out);
                snprintf(out + k, n - k, "  %s:%d includes %s\n", path, lineno, inc);
                bad++;
            }
        }
        fclose(f);
    }
    closedir(d);
    return bad;
}

START_TEST(includes_point_downward) {
    static char report[16384];
    report[0] = 0;
    int bad = 0;
    for (int i = 0; i < N_LAYERS; i++)
        bad += scan_dir(&layers[i], report, sizeof report);
    ck_assert_msg(bad == 0, "%d include(s) point up or sideways:\n%s", bad, report);
}
END_TEST

// The rule can fail: upward and sideways includes are refused, downward ones allowed.
START_TEST(rule_catches_upward_includes) {
    const Layer *fl = layer_of_dir("fl"), *reports = layer_of_dir("reports"), *cpu = layer_of_dir("core/cpu");
    ck_assert(!include_allowed(fl, "defenses/registry.h"));
    ck_assert(!include_allowed(reports, "runner/check.h"));
    ck_assert(!include_allowed(reports, "attacks/attack.h")); // a sibling
    ck_assert(include_allowed(reports, "eval/png.h"));
    ck_assert(include_allowed(fl, "fl/defense.h"));
    ck_assert(include_allowed(cpu, "core/tensor.h"));
    ck_assert(!include_allowed(cpu, "models/model.h"));
    ck_assert(include_allowed(layer_of_dir("models"), "datasets/dataset.h"));
    ck_assert(!include_allowed(layer_of_dir("datasets"), "models/model.h"));
    ck_assert(!include_allowed(layer_of_dir("datasets"), "eval/png.h")); // a sibling
    const Layer *dp = layer_of_dir("defenses/dp"), *defenses = layer_of_dir("defenses");
    ck_assert(!include_allowed(dp, "defenses/mech_defense.h")); // the plugin layer above it
    ck_assert(!include_allowed(dp, "fl/defense.h"));
    ck_assert(include_allowed(dp, "defenses/dp/dgauss.h"));
    ck_assert(include_allowed(defenses, "defenses/dp/mech.h"));
    ck_assert(include_allowed(layer_of_dir("audits"), "defenses/dp/accountant.h"));
}
END_TEST

Suite *suite_layering(void) {
    Suite *s = suite_create("layering");
    TCase *tc = tcase_create("includes");
    tcase_add_test(tc, includes_point_downward);
    tcase_add_test(tc, rule_catches_upward_includes);
    suite_add_tcase(s, tc);
    return s;
}
