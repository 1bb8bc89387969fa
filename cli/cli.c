#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_report_error(const char *cmd, const FpError *err) {
    fprintf(stderr, "fedpriv %s: %s\n", cmd, err->msg[0] ? err->msg : fp_status_name(err->code));
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
        fprintf(stderr, "fedpriv %s: %s needs a value\n", cmd, opt);
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        fprintf(stderr, "fedpriv %s: %s: not a number: \"%s\"\n", cmd, opt, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_long(const char *cmd, const char *opt, const char *s, long long *out) {
    if (!s) {
        fprintf(stderr, "fedpriv %s: %s needs a value\n", cmd, opt);
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) {
        fprintf(stderr, "fedpriv %s: %s: not an integer: \"%s\"\n", cmd, opt, s);
        return 0;
    }
    *out = v;
    return 1;
}
