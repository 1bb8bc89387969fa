// `fedpriv audit-training --config FILE.json --out DIR [--device cpu|cuda] [--threads N]`:
// the training-run audit (audits/training.h) as its own command. It is the attack
// "audit-training" (the config's "attack" object holds the audit's keys), run through
// `fedpriv attack`, so the command, the matrix cell and the attack share one path.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char ABOUT[] =
    "  Audits the config's federation and defense with canary clients and writes DIR/result.json:\n"
    "  epsilon_lower_bound (at the stated confidence; one-run: the larger of the Steinke-Nasr-Jagielski\n"
    "  and f-DP bounds, both reported), the observer, the defense's epsilon\n"
    "  (epsilon_claimed, epsilon_sound, guarantee) and pass (lower bound <= claimed).\n"
    "  The config's \"attack\" object holds the audit's keys: method (one-run | multi-run), observer\n"
    "  (final-model | aggregates | uploads), neighbours (remove | replace), canaries (200), runs (200),\n"
    "  canary_norm (the defense's clip), confidence (0.95), delta (the defense's), epsilon_claimed.\n"
    "  Exit 0 when done (whatever the verdict; fedpriv check asserts it), 1 if training diverged,\n"
    "  2 on bad input.";

int cmd_audit_training(int argc, char **argv) {
    static const char synopsis[] =
        "fedpriv audit-training --config FILE.json --out DIR [--device cpu|cuda] [--threads N]";
    char **args = malloc(sizeof(char *) * (size_t)(argc + 2));
    if (!args) {
        fprintf(stderr, "fedpriv audit-training: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    static char attack[] = "attack", name[] = "audit-training";
    args[0] = attack;
    args[1] = name;
    for (int i = 1; i < argc; i++)
        args[i + 1] = argv[i];
    args[argc + 1] = NULL;
    // No arguments at all: the usage on stderr, as for `fedpriv attack`.
    int rc = cmd_attack_as("audit-training", synopsis, ABOUT, argc < 2 ? 1 : argc + 1, args);
    free(args);
    return rc;
}
