/* commands.h - one function per `crashpack <verb>`; the table lives in main.c. */
#ifndef CRASHPACK_COMMANDS_H
#define CRASHPACK_COMMANDS_H

int cmd_install(int argc, char **argv);
int cmd_uninstall(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
int cmd_enrich(int argc, char **argv);

/* Directory holding the crashpack executables (resolved from /proc/self/exe). */
const char *cp_bindir(void);

#endif
