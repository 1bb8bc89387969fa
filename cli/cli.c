#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_report_error(const char *cmd, const FpError *err) {
    fp_print_line(stderr, "fedpriv %s: %s", cmd, err->msg[0] ? err->msg : fp_status_name(err->code));
    return cli_error_status(err);
}

int cli_error_status(const FpError *err) {
    switch (err->code) {
    case FP_EIO:
    case FP_EFORMAT:
    case FP_EPARAM:
    case FP_ENOMEM:
    case FP_EUNSUPPORTED:
        return CLI_EXIT_BADINPUT;
    default:
        return CLI_EXIT_FAIL;
    }
}

int cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double *out) {
    if (!s) {
        fp_print_line(stderr, "fedpriv %s: %s needs a value", cmd, opt);
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || isnan(v) || (isinf(v) && errno != ERANGE)) { // "nan", "inf" are not finite numbers
        fp_print_line(stderr, "fedpriv %s: %s: not a number: \"%s\"", cmd, opt, s);
        return 0;
    }
    // A number all the same: say which range it misses. strtod sets ERANGE for overflow
    // (±HUGE_VAL), for underflow to 0 and for subnormal results, which are kept.
    if (isinf(v)) {
        fp_print_line(stderr, "fedpriv %s: %s: %s is out of range (finite numbers up to ±1.8e308)", cmd, opt, s);
        return 0;
    }
    if (errno == ERANGE && v == 0) {
        fp_print_line(stderr, "fedpriv %s: %s: %s is too close to 0 to represent (the smallest is 4.9e-324)", cmd,
                      opt, s);
        return 0;
    }
    *out = v;
    return 1;
}

// The option name of an argument ("--epsilon" of "--epsilon=2", "-o"), or 0 when it is
// not an option (a value, a negative number, a lone "-").
static size_t option_name_len(const char *a) {
    if (a[0] != '-' || !a[1])
        return 0;
    if (a[1] != '-' && !((a[1] >= 'a' && a[1] <= 'z') || (a[1] >= 'A' && a[1] <= 'Z')))
        return 0; // -1, -.5: numbers
    const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    return eq ? (size_t)(eq - a) : strlen(a);
}

int cli_reject_repeated_options(const char *cmd, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        size_t n = option_name_len(argv[i]);
        if (n == 0)
            continue;
        for (int j = 1; j < i; j++)
            if (option_name_len(argv[j]) == n && strncmp(argv[i], argv[j], n) == 0) {
                fp_print_line(stderr, "fedpriv %s: %.*s is given twice (each option once; fedpriv %s --help)", cmd,
                              (int)n, argv[i], cmd);
                return CLI_EXIT_BADINPUT;
            }
    }
    return 0;
}
