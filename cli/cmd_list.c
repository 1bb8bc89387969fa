// `fedpriv list`: what this build can run.
#include <stdio.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "attacks/attack.h"
#include "runner/attack_registry.h"
#include "datasets/dataset.h"
#include "defenses/registry.h"
#include "fl/defense.h"
#include "models/model.h"

int cmd_list(int argc, char **argv) {
    const CliCommand c = {.cmd = "list", .synopsis = "fedpriv list",
                          .about = "  Lists the models, datasets, defenses (with variants) and attacks."};
    int rc = cli_options_parse(&c, argc, argv);
    if (rc != CLI_PARSED)
        return rc;
    printf("models:\n");
    for (int i = 0; i < model_count(); i++)
        printf("  %-20s %s\n", model_at(i)->name, model_at(i)->summary);
    printf("datasets:\n");
    for (const char *const *n = dataset_names(); *n; n++)
        printf("  %-20s %s\n", *n, dataset_summary(*n) ? dataset_summary(*n) : "");
    printf("defenses:\n");
    for (int i = 0; i < defense_count(); i++) {
        const DefenseOps *d = defense_at(i);
        printf("  %-20s %s%s%s%s\n", d->name, d->summary, d->variants ? " [variants: " : "",
               d->variants ? d->variants : "", d->variants ? "]" : "");
    }
    printf("attacks:\n");
    for (int i = 0; i < attack_count(); i++)
        printf("  %-20s %s\n", attack_at(i)->name, attack_at(i)->summary);
    return CLI_EXIT_OK;
}
