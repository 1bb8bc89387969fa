// `fedpriv audit-scores --scores FILE [--kind K] [--delta D] [--confidence C]
// [--epsilon-claimed E] [--name NAME] [--json] [--out FILE]`: the audits of scores made
// with any framework (audits/scores.h): membership scores give the ROC figures, canary
// scores the one-run ε lower bound, runs the multi-run bound, each by the procedure
// audit-training applies to its own (audits/training.h: the same functions). The JSON
// result is an audit finding: put it in RUN/audit/NAME.json and `fedpriv check RUN`
// bounds it ({"audit": NAME, "at_most": "epsilon"}). Exit 0 when done, 1 when
// --epsilon-claimed is refuted (ε̂ > E), 2 on bad input.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audits/scores.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "core/files.h"
#include "core/json_number.h"
#include "core/jsonv.h"

static const char *const CMD = "audit-scores";

static const char ABOUT[] =
    "  Audits scores from any framework. FILE is CSV with a header (numbers only): a bit column,\n"
    "  \"member\" (membership scores) or \"in\" (canaries or runs), an optional id column \"canary\",\n"
    "  \"run\" or \"id\", and score columns; or .npy: an N x K array, column 0 the bits, the rest scores.\n"
    "  The kind comes from the columns (\"canary\": one-run, \"run\": multi-run, \"member\": membership)\n"
    "  or --kind.\n"
    "    membership  ROC of the score: AUC with its interval, TPR at 1%, 0.1% and 0 FPR with intervals\n"
    "    one-run     epsilon lower bound from canary scores (the larger of Steinke et al. 2023 and the\n"
    "                f-DP bound of Mahloujifar et al. 2024), rows in canary order\n"
    "    multi-run   epsilon lower bound from runs with and without the canary (Nasr et al. 2023)\n"
    "  The bounds are audit-training's: its DIR/scores.csv gives the same epsilon_lower_bound with the\n"
    "  --delta and --confidence of its result.json.\n"
    "  Exit 0 when done, 1 when the claim is refuted, 2 on bad input.";

typedef struct {
    const char *scores, *kind, *name, *out;
    double delta, confidence, claimed; // claimed NAN: none
    int json;
} Options;

// Every option of the command, in one table (cli/options.h). 0 when the options are good,
// else the exit status (the help or the one line printed).
static int parse_options(int argc, char **argv, Options *o) {
    *o = (Options){.name = "scores", .delta = 0, .confidence = 0.95, .claimed = NAN};
    static const char *const kinds[] = {"membership", "one-run", "multi-run", NULL};
    int kind = -1, kind_given = 0;
    const CliOption opts[] = {
        {"--scores", NULL, CLI_STRING, &o->scores, .value = "FILE", .help = "the scores (CSV or .npy), required"},
        {"--kind", NULL, CLI_CHOICE, &kind, &kind_given, .value = "KIND", .choices = kinds,
         .help = "what the scores are (default: from the columns)"},
        {"--delta", NULL, CLI_DOUBLE, &o->delta, .value = "D", .help = "delta of the bound (default 0)", .lo = 0,
         .hi = 1, .hi_open = 1},
        {"--confidence", NULL, CLI_DOUBLE, &o->confidence, .value = "C", .help = "the bound's confidence (default 0.95)",
         .lo = 0.5, .hi = TRAINING_AUDIT_CONFIDENCE_MAX},
        {"--epsilon-claimed", NULL, CLI_DOUBLE, &o->claimed, .value = "E",
         .help = "the epsilon to test: pass = lower bound <= E (exit 1 when refuted)", .lo = 0, .hi = 1e6},
        {"--name", NULL, CLI_STRING, &o->name, .value = "NAME",
         .help = "the finding's name for fedpriv check (\"audit\": NAME; default \"scores\")"},
        {"--json", NULL, CLI_FLAG, &o->json, .help = "print the result as JSON"},
        {"--out", NULL, CLI_STRING, &o->out, .value = "FILE",
         .help = "also write the JSON result to FILE (RUN/audit/NAME.json for fedpriv check)"},
    };
    const CliCommand c = {
        .cmd = CMD,
        .synopsis = "fedpriv audit-scores --scores FILE [--kind membership|one-run|multi-run] [--delta D]\n"
                    "                            [--confidence C] [--epsilon-claimed E] [--name NAME] [--json] [--out FILE]",
        .about = ABOUT,
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
    };
    int rc = cli_options_parse(&c, argc, argv);
    if (rc != CLI_PARSED)
        return rc == CLI_EXIT_OK ? -2 : rc;
    if (!o->scores) {
        fp_print_line(stderr, "fedpriv %s: --scores FILE is required (fedpriv %s --help)", CMD, CMD);
        return CLI_EXIT_BADINPUT;
    }
    if (kind_given)
        o->kind = kinds[kind];
    return 0;
}

static void print_text(const cJSON *r, ScoresKind kind) {
    double (*num)(const cJSON *) = jnum_value;
    if (kind == SCORES_MEMBERSHIP) {
        const cJSON *ai = cJSON_GetObjectItem(r, "auc_interval"), *tf = cJSON_GetObjectItem(r, "tpr_at_fpr");
        printf("audit-scores: membership: AUC %.4f [%.4f, %.4f]; TPR %.4f at 1%% FPR, %.4f at 0.1%%, %.4f at 0 "
               "(%g members, %g non-members)\n",
               num(cJSON_GetObjectItem(r, "auc")), num(cJSON_GetArrayItem(ai, 0)), num(cJSON_GetArrayItem(ai, 1)),
               num(cJSON_GetObjectItem(tf, "0.01")), num(cJSON_GetObjectItem(tf, "0.001")),
               num(cJSON_GetObjectItem(tf, "0")), num(cJSON_GetObjectItem(r, "members")),
               num(cJSON_GetObjectItem(r, "non_members")));
        return;
    }
    double eps = num(cJSON_GetObjectItem(r, "epsilon_lower_bound")), claim = num(cJSON_GetObjectItem(r, "epsilon"));
    double ceiling = num(cJSON_GetObjectItem(r, "epsilon_ceiling")), conf = num(cJSON_GetObjectItem(r, "confidence"));
    printf("audit-scores: %s: epsilon >= %.3f at %g%% confidence (this audit's ceiling %.3f)", scores_kind_name(kind),
           eps, 100 * conf, ceiling);
    if (isfinite(claim))
        printf(" against the claimed %.3f: %s\n", claim,
               eps > claim       ? "the claim is refuted"
               : ceiling > claim ? "consistent with the claim"
                                 : "consistent, but these scores could not have refuted it");
    else
        printf("; no claim to compare with\n");
}

int cmd_audit_scores(int argc, char **argv) {
    Options o;
    int rc = parse_options(argc, argv, &o);
    if (rc == -2) // the help was printed
        return CLI_EXIT_OK;
    if (rc)
        return rc;
    FpError err = {0};
    if (o.out && fp_check_writable_file(o.out, &err) != FP_OK)
        return cli_report_error(CMD, &err);
    ScoreTable t;
    if (scores_read(o.scores, &t, &err) != FP_OK)
        return cli_report_error(CMD, &err);
    ScoresKind kind = o.kind ? scores_kind_parse(o.kind) : t.kind_from_file;
    if (kind == SCORES_KIND_UNKNOWN)
        kind = SCORES_MEMBERSHIP;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "mechanism", o.name);
    cJSON_AddStringToObject(r, "kind", scores_kind_name(kind));
    cJSON_AddStringToObject(r, "scores_file", o.scores);
    cJSON_AddNumberToObject(r, "rows", t.n);
    cJSON_AddNumberToObject(r, "confidence", o.confidence);
    FpStatus st;
    if (kind == SCORES_MEMBERSHIP) {
        st = scores_membership(&t, o.confidence, r, &err);
    } else {
        TrainingAuditScores v = scores_view(&t);
        cJSON_AddStringToObject(r, "method", scores_kind_name(kind));
        st = kind == SCORES_ONE_RUN ? training_audit_one_run_scores(&v, o.delta, o.confidence, r, &err)
                                    : training_audit_multi_run_scores(&v, o.delta, o.confidence, r, &err);
        if (st == FP_OK) {
            double eps = jnum_value(cJSON_GetObjectItem(r, "epsilon_lower_bound"));
            double claim = isnan(o.claimed) ? INFINITY : o.claimed;
            cJSON_AddNumberToObject(r, "delta", o.delta);
            jnum_add(r, "epsilon_claimed", claim);
            jnum_add(r, "epsilon", claim); // the claimed ε, where fedpriv check reads an audit finding's
            cJSON_AddStringToObject(r, "claim_source", isnan(o.claimed) ? "none" : "--epsilon-claimed");
            cJSON_AddBoolToObject(r, "pass", !(eps > claim));
            cJSON_AddBoolToObject(r, "claim_testable", jnum_value(cJSON_GetObjectItem(r, "epsilon_ceiling")) > claim);
        }
    }
    scores_free(&t);
    if (st != FP_OK) {
        cJSON_Delete(r);
        fp_error_prefix(&err, o.scores);
        return cli_report_error(CMD, &err);
    }
    if (o.out && jv_write_file_atomic(o.out, r, &err) != FP_OK) {
        cJSON_Delete(r);
        return cli_report_error(CMD, &err);
    }
    if (o.json) {
        char *s = jnum_print(r, 1);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else {
        print_text(r, kind);
    }
    rc = cJSON_IsFalse(cJSON_GetObjectItem(r, "pass")) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    cJSON_Delete(r);
    return rc;
}
