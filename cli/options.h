// The one option parser of every command (cli/options.c). A command declares its options
// in one table (name, kind, where the value goes, help text, range); the same table
// parses argv, checks each value and prints the option list of `fedpriv CMD --help`, so
// the help text cannot drift from what is accepted.
//
// Forms: "--name VALUE" and "--name=VALUE" (long options), "-o VALUE" (a short alias); a
// flag takes no value ("--json=1" is refused). An argument that does not start with '-'
// (or is a lone "-") is positional: it goes to the command's positional slots in order.
// "-h" or "--help" anywhere prints the usage to stdout (exit 0). Every failure prints
// one line naming the option ("fedpriv CMD: --q must be in [0, 1], got 2") and gives
// exit status 2. That an option is given at most once is checked before, for every
// command alike (cli_reject_repeated_options).
#ifndef FEDPRIV_CLI_OPTIONS_H
#define FEDPRIV_CLI_OPTIONS_H

#include <stdio.h>

typedef enum {
    CLI_FLAG,     // no value: *(int *)dest = 1
    CLI_STRING,   // *(const char **)dest = the value (any text, even one starting with '-')
    CLI_CHOICE,   // one of choices (NULL-terminated): *(int *)dest = its index
    CLI_INT,      // *(long long *)dest: a decimal integer in [lo, hi]
    CLI_DOUBLE,   // *(double *)dest: a finite number in the range below
    CLI_FRACTION, // as CLI_DOUBLE, also written A/B ("256/60000": A and B numbers, B > 0)
    CLI_DOUBLES,  // min_n to max_n numbers, as separate arguments ("--range -1 1") or one
                  // comma list ("--range -1,1"): (double *)dest, their count in *count
} CliKind;

typedef struct {
    const char *name;  // "--config"
    const char *alias; // "-o", or NULL
    CliKind kind;
    void *dest;        // where the value goes (the type its kind says)
    int *given;        // set to 1 when the option is given, or NULL
    const char *value; // the value's name in the help ("FILE.json"), NULL for a flag
    const char *help;  // the help text ("\n" starts a continuation line)
    // CLI_INT, CLI_DOUBLE, CLI_FRACTION, CLI_DOUBLES: the value's range, checked when lo
    // and hi are not both 0; lo = -INFINITY or hi = INFINITY leaves that side open-ended.
    // The help text states it.
    double lo, hi;
    int lo_open, hi_open; // 1: the end itself is excluded
    const char *const *choices; // CLI_CHOICE
    int *count;                 // CLI_DOUBLES
    int min_n, max_n;           // CLI_DOUBLES
} CliOption;

typedef struct {
    const char *cmd;      // "accountant": messages say "fedpriv accountant: ..."
    const char *synopsis; // the usage lines, each starting with "fedpriv ..." or spaces
    const char *about;    // the text between the synopsis and the option list, or NULL
    const char *after;    // the text after the option list (examples), or NULL
    const CliOption *opts;
    int n_opts;
    // Positional arguments: up to max_positional go to positional[0..], their count in
    // *n_positional; one more is refused naming positional_names.
    const char **positional;
    int max_positional;
    int *n_positional;
    const char *positional_names; // "DIR", "A.png B.png"
} CliCommand;

#define CLI_OPTIONS_COUNT(table) ((int)(sizeof(table) / sizeof((table)[0])))

// The status CLI_PARSED when argv[1..argc) parsed (every value stored), else the exit
// status to return: 0 after printing the help, 2 after printing one line.
#define CLI_PARSED (-1)
int cli_options_parse(const CliCommand *c, int argc, char **argv);

// The usage text: the synopsis, the about text, every option with its value, help,
// range or choices, then the after text.
void cli_options_usage(const CliCommand *c, FILE *f);

#endif
