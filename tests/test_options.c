// The command-line option parser (cli/options.h): every kind of option in both forms,
// positional arguments, one line naming the option and exit 2 for every bad value, the
// usage text generated from the table; then every command through it, end to end
// (skipped when FEDPRIV_BIN is unset).
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli_run.h"

#define CAP (1 << 16)
static char msg[CAP], out_buf[CAP], err_buf[CAP];

// ---- the parser itself -------------------------------------------------------------------

// Every kind once, as a command would declare them.
typedef struct {
    const char *config, *out, *pos[2];
    long long n;
    double x, q, list[4];
    int flag, choice, n_list, n_pos, have_x;
} Parsed;

static const char *const COLOURS[] = {"red", "green", "blue", NULL};

// Parses argv (NULL-terminated, argv[0] the command) into p; what it printed on stderr
// goes to msg. Returns cli_options_parse's status.
static int parse(Parsed *p, const char *const *args) {
    memset(p, 0, sizeof *p);
    p->n = 7;
    const CliOption opts[] = {
        {"--config", NULL, CLI_STRING, &p->config, .value = "FILE", .help = "a file"},
        {"--out", "-o", CLI_STRING, &p->out, .value = "FILE", .help = "an output"},
        {"--n", NULL, CLI_INT, &p->n, .value = "N", .help = "a count", .lo = 1, .hi = 16},
        {"--x", NULL, CLI_DOUBLE, &p->x, &p->have_x, "X", "a number", .lo = 0, .hi = 1, .lo_open = 1},
        {"--q", NULL, CLI_FRACTION, &p->q, .value = "Q", .help = "a rate", .lo = 0, .hi = 1},
        {"--list", NULL, CLI_DOUBLES, p->list, .value = "A B", .help = "two or three numbers", .count = &p->n_list,
         .min_n = 2, .max_n = 3},
        {"--flag", NULL, CLI_FLAG, &p->flag, .help = "a flag"},
        {"--colour", NULL, CLI_CHOICE, &p->choice, .choices = COLOURS, .help = "a colour"},
    };
    const CliCommand c = {.cmd = "demo", .synopsis = "fedpriv demo [A [B]] [options]", .about = "  About it.",
                          .opts = opts, .n_opts = CLI_OPTIONS_COUNT(opts), .positional = p->pos, .max_positional = 2,
                          .n_positional = &p->n_pos, .positional_names = "A B"};
    int argc = 0;
    while (args[argc])
        argc++;
    fflush(stderr);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    int rc = cli_options_parse(&c, argc, (char **)args);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t got = fread(msg, 1, CAP - 1, tmp);
    msg[got] = 0;
    fclose(tmp);
    return rc;
}

#define PARSE(p, ...) parse(p, (const char *const[]){"demo", __VA_ARGS__, NULL})

START_TEST(both_forms_every_kind) {
    Parsed p;
    ck_assert_int_eq(PARSE(&p, "a", "--config", "c.json", "-o", "o.json", "--n=16", "--x", "0.5", "--q", "256/60000",
                           "--list", "-1", "2", "--flag", "--colour=blue", "b"),
                     CLI_PARSED);
    ck_assert_str_eq(msg, "");
    ck_assert_str_eq(p.config, "c.json");
    ck_assert_str_eq(p.out, "o.json");
    ck_assert_int_eq(p.n, 16);
    ck_assert_double_eq(p.x, 0.5);
    ck_assert(p.have_x);
    ck_assert_double_eq(p.q, 256.0 / 60000.0);
    ck_assert_int_eq(p.n_list, 2);
    ck_assert_double_eq(p.list[0], -1);
    ck_assert_double_eq(p.list[1], 2);
    ck_assert_int_eq(p.flag, 1);
    ck_assert_int_eq(p.choice, 2);
    ck_assert_int_eq(p.n_pos, 2);
    ck_assert_str_eq(p.pos[0], "a");
    ck_assert_str_eq(p.pos[1], "b");
    // The other forms: --opt=value for strings and numbers, a comma list, a value that
    // starts with '-', a lone "-" as a positional.
    ck_assert_int_eq(PARSE(&p, "--config=x=y.json", "--out", "-weird", "--list=1,2,3", "-", "--x=1"), CLI_PARSED);
    ck_assert_str_eq(p.config, "x=y.json");
    ck_assert_str_eq(p.out, "-weird");
    ck_assert_int_eq(p.n_list, 3);
    ck_assert_double_eq(p.list[2], 3);
    ck_assert_str_eq(p.pos[0], "-");
    ck_assert_int_eq(p.n, 7); // untouched when not given
    ck_assert(!p.flag);
    ck_assert_int_eq(PARSE(&p, "--list", "4,5"), CLI_PARSED);
    ck_assert_int_eq(p.n_list, 2);
    ck_assert_double_eq(p.list[1], 5);
}
END_TEST

START_TEST(bad_values_one_line_exit_2) {
    static const struct {
        const char *args[6];
        const char *line;
    } bad[] = {
        {{"--n", "17"}, "fedpriv demo: --n must be an integer in [1, 16], got \"17\"\n"},
        {{"--n", "1.5"}, "fedpriv demo: --n must be an integer in [1, 16], got \"1.5\"\n"},
        {{"--n=99999999999999999999"}, "fedpriv demo: --n must be an integer in [1, 16], got \"99999999999999999999\"\n"},
        {{"--x", "0"}, "fedpriv demo: --x must be in (0, 1], got \"0\"\n"},
        {{"--x", "nan"}, "fedpriv demo: --x: not a number: \"nan\"\n"},
        {{"--x", "1e999"}, "fedpriv demo: --x: 1e999 is out of range (finite numbers up to ±1.8e308)\n"},
        {{"--q", "2/1"}, "fedpriv demo: --q must be in [0, 1], got \"2/1\"\n"},
        {{"--q", "1/0"}, "fedpriv demo: --q: the denominator of \"1/0\" must be > 0\n"},
        {{"--q", "a/2"}, "fedpriv demo: --q: not a number: \"a\"\n"},
        {{"--list", "1"}, "fedpriv demo: --list needs at least 2 numbers, got 1\n"},
        {{"--list", "1,2,3,4"}, "fedpriv demo: --list takes at most 3 numbers\n"},
        {{"--list", "1,x"}, "fedpriv demo: --list: not a number: \"x\"\n"},
        {{"--colour", "teal"}, "fedpriv demo: --colour must be red, green or blue, got \"teal\"\n"},
        {{"--flag=1"}, "fedpriv demo: --flag takes no value\n"},
        {{"--config"}, "fedpriv demo: --config needs a value FILE\n"},
        {{"--confg", "x"}, "fedpriv demo: unknown option \"--confg\" (did you mean \"--config\"? fedpriv demo --help)\n"},
        {{"--zzzzzz"}, "fedpriv demo: unknown option \"--zzzzzz\" (fedpriv demo --help)\n"},
        {{"-x"}, "fedpriv demo: unknown option \"-x\" (did you mean \"--x\"? fedpriv demo --help)\n"},
        {{"-q"}, "fedpriv demo: unknown option \"-q\" (did you mean \"--q\"? fedpriv demo --help)\n"},
        {{"--colour"}, "fedpriv demo: --colour needs a value\n"},
        {{"a", "b", "c"}, "fedpriv demo: unexpected argument \"c\" (it takes A B; fedpriv demo --help)\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[8] = {"demo"};
        for (int k = 0; bad[i].args[k]; k++)
            args[k + 1] = bad[i].args[k];
        Parsed p;
        int rc = parse(&p, args);
        ck_assert_msg(rc == CLI_EXIT_BADINPUT, "case %zu: status %d", i, rc);
        ck_assert_msg(strcmp(msg, bad[i].line) == 0, "case %zu: %s", i, msg);
    }
}
END_TEST

START_TEST(usage_from_the_table) {
    const CliOption opts[] = {
        {"--n", NULL, CLI_INT, NULL, .value = "N", .help = "a count", .lo = 1, .hi = 16},
        {"--x", NULL, CLI_DOUBLE, NULL, .value = "X", .help = "a number\non two lines", .lo = 0, .hi = INFINITY,
         .lo_open = 1},
        {"--colour", NULL, CLI_CHOICE, NULL, .choices = COLOURS, .help = "a colour"},
        {"--out", "-o", CLI_STRING, NULL, .value = "FILE", .help = "an output"},
        {"--a-very-long-option-name", NULL, CLI_FLAG, NULL, .help = "its help on the next line"},
    };
    const CliCommand c = {.cmd = "demo", .synopsis = "fedpriv demo [options]", .about = "  About it.",
                          .after = "  example: fedpriv demo --n 3", .opts = opts, .n_opts = CLI_OPTIONS_COUNT(opts)};
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    cli_options_usage(&c, f);
    rewind(f);
    size_t got = fread(msg, 1, CAP - 1, f);
    msg[got] = 0;
    fclose(f);
    ck_assert_str_eq(msg, "usage: fedpriv demo [options]\n"
                          "\n"
                          "  About it.\n"
                          "\n"
                          "  --n N               a count (an integer in [1, 16])\n"
                          "  --x X               a number\n"
                          "                      on two lines (> 0)\n"
                          "  --colour red|green|blue\n"
                          "                      a colour\n"
                          "  -o, --out FILE      an output\n"
                          "  --a-very-long-option-name\n"
                          "                      its help on the next line\n"
                          "\n"
                          "  example: fedpriv demo --n 3\n");
}
END_TEST

// ---- every command through it ------------------------------------------------------------

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL}, out_buf, err_buf, CAP)

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

// Each command's --help is its table's usage, and an unknown option is one line naming
// it; the same for every command.
START_TEST(every_command_uses_the_parser) {
    static const char *const cmds[] = {"train",  "list", "attack", "accountant", "forecast", "audit", "audit-training",
                                       "ssim",   "matrix", "report", "check",    "export", "audit-scores"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = RUN(cmds[i], "--help");
        SKIP_WITHOUT_BIN(rc);
        ck_assert_msg(rc == 0, "%s --help: %d", cmds[i], rc);
        char want[64];
        snprintf(want, sizeof want, "usage: fedpriv %s", cmds[i]);
        ck_assert_msg(strncmp(out_buf, want, strlen(want)) == 0, "%s: %s", cmds[i], out_buf);
        rc = RUN(cmds[i], "--no-such-option=1");
        ck_assert_msg(rc == 2, "%s: %d", cmds[i], rc);
        snprintf(want, sizeof want, "fedpriv %s: unknown option \"--no-such-option\"", cmds[i]);
        ck_assert_msg(strncmp(err_buf, want, strlen(want)) == 0 && lines(err_buf) == 1, "%s: %s", cmds[i], err_buf);
    }
    // The ranges in the help are the ranges enforced.
    ck_assert_int_eq(RUN("matrix", "--help"), 0);
    ck_assert_ptr_nonnull(strstr(out_buf, "--jobs N            cells run at once, in separate processes (an integer in [1, 256])"));
    ck_assert_int_eq(RUN("matrix", "m.json", "--out", "d", "--jobs", "257"), 2);
    ck_assert_str_eq(err_buf, "fedpriv matrix: --jobs must be an integer in [1, 256], got \"257\"\n");
    ck_assert_int_eq(RUN("report", "d", "--max-images=0"), 2);
    ck_assert_str_eq(err_buf, "fedpriv report: --max-images must be an integer in [1, 1000], got \"0\"\n");
}
END_TEST

// audit told --samples, --seed and --bins apart by their third and fourth characters:
// each now lands where its table row says, in either form.
START_TEST(audit_options_land_where_named) {
    int rc = RUN("audit", "--mechanism", "laplace", "--clip", "1", "--epsilon=1", "--test", "epsilon", "--samples=20000",
                 "--seed", "9", "--bins=7", "--json");
    SKIP_WITHOUT_BIN(rc);
    ck_assert_msg(rc == 0 || rc == 1, "%d: %s", rc, err_buf);
    cJSON *j = cJSON_Parse(out_buf);
    ck_assert_msg(j != NULL, "%s", out_buf);
    ck_assert_double_eq(cJSON_GetObjectItem(j, "samples")->valuedouble, 20000);
    ck_assert_double_eq(cJSON_GetObjectItem(j, "seed")->valuedouble, 9);
    cJSON_Delete(j);
    ck_assert_msg(strstr(out_buf, "\"bins\":\t7,") != NULL, "%s", out_buf);
    ck_assert_int_eq(RUN("audit", "--mechanism", "rr", "--epsilon", "1", "--bins", "401"), 2);
    ck_assert_str_eq(err_buf, "fedpriv audit: --bins must be an integer in [0, 400], got \"401\"\n");
    ck_assert_int_eq(RUN("audit", "--mechanism", "rr", "--epsilon", "1", "--seed", "-1"), 2);
    ck_assert_str_eq(err_buf, "fedpriv audit: --seed must be an integer in [0, 9007199254740991], got \"-1\"\n");
    ck_assert_int_eq(RUN("audit", "--mechanism", "laplace", "--epsilon", "1", "--range", "-1", "x"), 2);
    ck_assert_str_eq(err_buf, "fedpriv audit: --range needs 2 numbers (LO HI), got 1\n");
    ck_assert_int_eq(RUN("audit", "--mechanism", "laplace", "--epsilon", "1", "--smaples", "10"), 2);
    ck_assert_msg(strstr(err_buf, "(did you mean \"--samples\"?"), "%s", err_buf);
}
END_TEST

Suite *suite_options(void) {
    Suite *s = suite_create("options");
    TCase *t = tcase_create("options");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, both_forms_every_kind);
    tcase_add_test(t, bad_values_one_line_exit_2);
    tcase_add_test(t, usage_from_the_table);
    tcase_add_test(t, every_command_uses_the_parser);
    tcase_add_test(t, audit_options_land_where_named);
    suite_add_tcase(s, t);
    return s;
}
