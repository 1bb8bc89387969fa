// `fedpriv list`: what this build can run.
#include <stdio.h>

#include "cli/cli.h"
#include "defenses/defense.h"

int cmd_list(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        printf("usage: fedpriv list\n  Lists the models, datasets, defenses (with variants) and attacks.\n");
        return CLI_EXIT_OK;
    }
    printf("defenses:\n");
    for (int i = 0; i < defense_count(); i++) {
        const DefenseOps *d = defense_at(i);
        printf("  %-20s %s%s%s%s\n", d->name, d->summary, d->variants ? " [variants: " : "",
               d->variants ? d->variants : "", d->variants ? "]" : "");
    }
    return CLI_EXIT_OK;
}
