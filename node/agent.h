/* agent.h - the node service of `crashpack agent` (docs/agent.md): the Unix socket where jobs
 * ask for a capture of themselves or report a process that ended, and the kernel log (a bundle
 * for every OOM kill, NVIDIA Xid lines kept as node GPU events). The verb (cli/cmd_agent.c)
 * parses the options into struct agent_opts and calls agent_run. */
#ifndef CRASHPACK_AGENT_H
#define CRASHPACK_AGENT_H
#include <stdio.h>

struct agent_opts {
    const char *config; /* -c, or NULL (the default file) */
    const char *socket; /* --socket, or NULL: the config's agent_socket */
    const char *state;  /* --state-dir, or NULL: the config's state_dir */
    FILE *log;          /* the service's log lines, "crashpack agent: ..." (the verb's stderr) */
};

/* Runs the service (as root) until SIGTERM or SIGINT (it handles both, and ignores SIGPIPE).
 * Returns 0 once stopped by one of them, -1 when it cannot start (not root, the configuration,
 * the socket), after a line on o->log saying why. */
int agent_run(const struct agent_opts *o);
#endif
