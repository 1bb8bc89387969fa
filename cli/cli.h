// Shared pieces of the command-line front end. Only cli/ prints errors and exits.
#ifndef FEDPRIV_CLI_CLI_H
#define FEDPRIV_CLI_CLI_H

#include "core/status.h"

// Exit statuses: 0 success, 1 a failed check or an internal failure, 2 bad input.
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_BADINPUT 2

// Prints "fedpriv <cmd>: <message>" on one line to stderr and returns the exit status
// for the error (2 for bad input: io, format, parameter, out-of-memory on a requested size).
int cli_report_error(const char *cmd, const FpError *err);
// The exit status for err, without printing (e.g. for MPI ranks other than 0, whose
// errors rank 0 reports).
int cli_error_status(const FpError *err);

// 1 when argv[i] is -h or --help.
int cli_wants_help(int argc, char **argv);

// Parses a number option value (cli/options.c); on failure prints one line and returns 0.
int cli_parse_double(const char *cmd, const char *opt, const char *s, double *out);

// Every option of a command may be given once: a second --epsilon (or --epsilon=...)
// prints one line and returns the exit status 2; 0 when none repeats. main() calls it
// for every command, so a command's own parser never sees a repeat.
int cli_reject_repeated_options(const char *cmd, int argc, char **argv);

// Subcommands (one file each in cli/).
int cmd_train(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_attack(int argc, char **argv);
// `fedpriv attack` under another command's name (audit-training), which its messages
// carry, with that command's usage text (its synopsis and about text; the options are
// attack's). argv[0] is the command, argv[1] the attack's name.
int cmd_attack_as(const char *cmd, const char *synopsis, const char *about, int argc, char **argv);
int cmd_accountant(int argc, char **argv);
int cmd_forecast(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_audit_training(int argc, char **argv);
int cmd_audit_scores(int argc, char **argv);
int cmd_ssim(int argc, char **argv);
int cmd_matrix(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
