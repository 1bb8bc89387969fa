// The command-line option parser and usage printer (cli/options.h).
#include "cli/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/suggest.h"

// The range of a number option as text: "in [0, 1]", ">= 1", "in (0, 1)"; "" when it
// has none. Integers' ends are printed in full (seeds go up to 2^53).
static const char *range_text(const CliOption *o, char *buf, size_t n) {
    buf[0] = 0;
    if (o->lo == 0 && o->hi == 0)
        return buf;
    char lo[40], hi[40];
    const char *fmt = o->kind == CLI_INT ? "%.0f" : "%g";
    snprintf(lo, sizeof lo, fmt, o->lo);
    snprintf(hi, sizeof hi, fmt, o->hi);
    if (isinf(o->hi))
        snprintf(buf, n, "%s %s", o->lo_open ? ">" : ">=", lo);
    else if (isinf(o->lo))
        snprintf(buf, n, "%s %s", o->hi_open ? "<" : "<=", hi);
    else
        snprintf(buf, n, "in %s%s, %s%s", o->lo_open ? "(" : "[", lo, hi, o->hi_open ? ")" : "]");
    return buf;
}

static int in_range(const CliOption *o, double v) {
    if (o->lo == 0 && o->hi == 0)
        return 1;
    return (o->lo_open ? v > o->lo : v >= o->lo) && (o->hi_open ? v < o->hi : v <= o->hi);
}

// A number out of the option's range: one line, the value as given.
static int range_error(const CliCommand *c, const CliOption *o, const char *s) {
    char r[96];
    fp_print_line(stderr, "fedpriv %s: %s must be %s%s, got \"%s\"", c->cmd, o->name,
                  o->kind == CLI_INT ? "an integer " : "", range_text(o, r, sizeof r), s);
    return CLI_EXIT_BADINPUT;
}

static int parse_int(const CliCommand *c, const CliOption *o, const char *s, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || !in_range(o, (double)v)) {
        if (o->lo == 0 && o->hi == 0) {
            fp_print_line(stderr, "fedpriv %s: %s must be an integer, got \"%s\"", c->cmd, o->name, s);
            return CLI_EXIT_BADINPUT;
        }
        return range_error(c, o, s);
    }
    *out = v;
    return 0;
}

// A number, or for CLI_FRACTION also A/B; then its range.
static int parse_number(const CliCommand *c, const CliOption *o, const char *s, double *out) {
    const char *slash = o->kind == CLI_FRACTION ? strchr(s, '/') : NULL;
    double v;
    if (slash) {
        char num[128];
        double a, b;
        snprintf(num, sizeof num, "%.*s", (int)(slash - s < 127 ? slash - s : 127), s);
        if (!cli_parse_double(c->cmd, o->name, num, &a) || !cli_parse_double(c->cmd, o->name, slash + 1, &b))
            return CLI_EXIT_BADINPUT;
        if (!(b > 0)) {
            fp_print_line(stderr, "fedpriv %s: %s: the denominator of \"%s\" must be > 0", c->cmd, o->name, s);
            return CLI_EXIT_BADINPUT;
        }
        v = a / b;
    } else if (!cli_parse_double(c->cmd, o->name, s, &v))
        return CLI_EXIT_BADINPUT;
    if (!in_range(o, v))
        return range_error(c, o, s);
    *out = v;
    return 0;
}

static int looks_numeric(const char *s) {
    char *end;
    if (!s || !*s)
        return 0;
    (void)strtod(s, &end);
    return *end == 0;
}

// CLI_DOUBLES: the numbers of one comma list (list != NULL), or of the arguments from
// argv[*i + 1] on that look like numbers (*i is moved past them).
static int parse_doubles(const CliCommand *c, const CliOption *o, const char *list, int argc, char **argv, int *i) {
    double *dst = o->dest;
    int n = 0, from_list = list != NULL;
    char item[128];
    for (;;) {
        const char *s;
        if (from_list) {
            if (!list)
                break;
            size_t len = strcspn(list, ",");
            snprintf(item, sizeof item, "%.*s", (int)(len < 127 ? len : 127), list);
            s = item;
            list = list[len] ? list + len + 1 : NULL;
        } else if (*i + 1 < argc && looks_numeric(argv[*i + 1]))
            s = argv[++*i];
        else
            break;
        if (n == o->max_n) {
            fp_print_line(stderr, "fedpriv %s: %s takes at most %d numbers", c->cmd, o->name, o->max_n);
            return CLI_EXIT_BADINPUT;
        }
        int rc = parse_number(c, o, s, &dst[n]);
        if (rc)
            return rc;
        n++;
    }
    if (n < o->min_n) {
        if (o->min_n == o->max_n)
            fp_print_line(stderr, "fedpriv %s: %s needs %d numbers (%s), got %d", c->cmd, o->name, o->min_n,
                          o->value ? o->value : "", n);
        else
            fp_print_line(stderr, "fedpriv %s: %s needs at least %d number%s, got %d", c->cmd, o->name, o->min_n,
                          o->min_n == 1 ? "" : "s", n);
        return CLI_EXIT_BADINPUT;
    }
    *o->count = n;
    return 0;
}

// Stores the value s of option o (not a flag or a list).
static int store(const CliCommand *c, const CliOption *o, const char *s) {
    switch (o->kind) {
    case CLI_STRING:
        *(const char **)o->dest = s;
        return 0;
    case CLI_CHOICE:
        for (int k = 0; o->choices[k]; k++)
            if (strcmp(s, o->choices[k]) == 0) {
                *(int *)o->dest = k;
                return 0;
            }
        {
            char list[256] = "";
            for (int k = 0; o->choices[k]; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                         k == 0 ? "" : o->choices[k + 1] ? ", " : " or ", o->choices[k]);
            fp_print_line(stderr, "fedpriv %s: %s must be %s, got \"%s\"", c->cmd, o->name, list, s);
        }
        return CLI_EXIT_BADINPUT;
    case CLI_INT:
        return parse_int(c, o, s, o->dest);
    case CLI_DOUBLE:
    case CLI_FRACTION:
        return parse_number(c, o, s, o->dest);
    default:
        return CLI_EXIT_BADINPUT;
    }
}

// The option named by arg (up to len characters), or NULL.
static const CliOption *find(const CliCommand *c, const char *arg, size_t len) {
    for (int k = 0; k < c->n_opts; k++) {
        const CliOption *o = &c->opts[k];
        if ((strlen(o->name) == len && strncmp(o->name, arg, len) == 0) ||
            (o->alias && strlen(o->alias) == len && strncmp(o->alias, arg, len) == 0))
            return o;
    }
    return NULL;
}

static int unknown_option(const CliCommand *c, const char *arg, size_t len) {
    char name[FP_SUGGEST_MAX_LEN + 1], hint[FP_SUGGEST_MAX_LEN + 32];
    snprintf(name, sizeof name, "%.*s", (int)(len < FP_SUGGEST_MAX_LEN ? len : FP_SUGGEST_MAX_LEN), arg);
    FpSuggest s;
    fp_suggest_begin(&s, name);
    for (int k = 0; k < c->n_opts; k++)
        fp_suggest_add(&s, c->opts[k].name);
    fp_print_line(stderr, "fedpriv %s: unknown option \"%.*s\" (%sfedpriv %s --help)", c->cmd, (int)len, arg,
                  fp_did_you_mean(&s, "", " ", hint, sizeof hint), c->cmd);
    return CLI_EXIT_BADINPUT;
}

int cli_options_parse(const CliCommand *c, int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        cli_options_usage(c, stdout);
        return CLI_EXIT_OK;
    }
    if (c->n_positional)
        *c->n_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (!c->n_positional || *c->n_positional == c->max_positional) {
                if (c->max_positional)
                    fp_print_line(stderr, "fedpriv %s: unexpected argument \"%s\" (it takes %s; fedpriv %s --help)",
                                  c->cmd, a, c->positional_names, c->cmd);
                else
                    fp_print_line(stderr, "fedpriv %s: unexpected argument \"%s\" (fedpriv %s --help)", c->cmd, a,
                                  c->cmd);
                return CLI_EXIT_BADINPUT;
            }
            c->positional[(*c->n_positional)++] = a;
            continue;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const CliOption *o = find(c, a, len);
        if (!o)
            return unknown_option(c, a, len);
        if (o->given)
            *o->given = 1;
        if (o->kind == CLI_FLAG) {
            if (eq) {
                fp_print_line(stderr, "fedpriv %s: %s takes no value", c->cmd, o->name);
                return CLI_EXIT_BADINPUT;
            }
            *(int *)o->dest = 1;
            continue;
        }
        int rc;
        if (o->kind == CLI_DOUBLES)
            rc = parse_doubles(c, o, eq ? eq + 1 : i + 1 < argc && strchr(argv[i + 1], ',') ? argv[++i] : NULL,
                               argc, argv, &i);
        else if (!eq && i + 1 >= argc) {
            fp_print_line(stderr, "fedpriv %s: %s needs a value%s%s", c->cmd, o->name, o->value ? " " : "",
                          o->value ? o->value : "");
            return CLI_EXIT_BADINPUT;
        } else
            rc = store(c, o, eq ? eq + 1 : argv[++i]);
        if (rc)
            return rc;
    }
    return CLI_PARSED;
}

// Prints text with each line after the first indented by indent spaces.
static void put_indented(FILE *f, const char *text, int indent) {
    for (const char *p = text; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1])
            fprintf(f, "%*s", indent, "");
    }
}

void cli_options_usage(const CliCommand *c, FILE *f) {
    enum { COL = 22 }; // the help column
    fprintf(f, "usage: ");
    put_indented(f, c->synopsis, 0);
    fprintf(f, "\n");
    if (c->about) {
        fprintf(f, "\n");
        put_indented(f, c->about, 0);
        fprintf(f, "\n");
    }
    if (c->n_opts)
        fprintf(f, "\n");
    for (int k = 0; k < c->n_opts; k++) {
        const CliOption *o = &c->opts[k];
        char label[160], choices[160] = "";
        const char *value = o->value;
        if (o->kind == CLI_CHOICE && !value) {
            for (int j = 0; o->choices[j]; j++)
                snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s", j ? "|" : "",
                         o->choices[j]);
            value = choices;
        }
        snprintf(label, sizeof label, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
                 value ? " " : "", value ? value : "");
        int len = fprintf(f, "  %s", label);
        if (len >= COL - 1)
            fprintf(f, "\n%*s", COL, "");
        else
            fprintf(f, "%*s", COL - len, "");
        put_indented(f, o->help ? o->help : "", COL);
        char r[96];
        if (o->kind == CLI_INT || o->kind == CLI_DOUBLE || o->kind == CLI_FRACTION || o->kind == CLI_DOUBLES) {
            range_text(o, r, sizeof r);
            if (r[0])
                fprintf(f, " (%s%s)", o->kind == CLI_INT ? "an integer " : "", r);
        }
        fprintf(f, "\n");
    }
    if (c->after) {
        fprintf(f, "\n");
        put_indented(f, c->after, 0);
        fprintf(f, "\n");
    }
}
