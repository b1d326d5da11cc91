/* commands.h - one function per `crashpack <verb>`; the table lives in main.c. Every verb parses
 * its options with cmdopt.h and exits with exitcodes.h's codes (docs/cli.md). */
#ifndef CRASHPACK_COMMANDS_H
#define CRASHPACK_COMMANDS_H
#include "datadir.h" /* cp_bindir */
#include "exitcodes.h"

int cmd_install(int argc, char **argv);
int cmd_uninstall(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
int cmd_rules(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_snap(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_watch(int argc, char **argv); /* crashpack run with its stall detection on (cmd_run.c) */
int cmd_enrich(int argc, char **argv);
int cmd_python_hook(int argc, char **argv);
int cmd_version(int argc, char **argv);

#endif
