/* agent.h - the node service of `crashpack agent` (docs/agent.md): the Unix socket where jobs
 * ask for a capture of themselves or report a process that ended, and users read their own
 * crashes from the node's knowledge base; and the kernel log (a bundle for every OOM kill, NVIDIA
 * Xid lines kept as node GPU events). The verb (cli/cmd_agent.c) parses the options into struct
 * agent_opts and calls agent_run. */
#ifndef CRASHPACK_AGENT_H
#define CRASHPACK_AGENT_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

/* Answers a user's `crashpack db` query (a request {"op":"db","query":"list"|"show"|"search",
 * ...}, docs/agent.md) from the knowledge base at where, with uid's crashes only: the document
 * `db list|show|search --json` prints (crashpack-db-list/1, crashpack-db-show/1), or NULL with
 * err (and *notfound set for no such crash, or no knowledge base). The command layer provides it
 * (node/ includes nothing of db/). It runs in a worker child of the agent. */
typedef cJSON *(*agent_db_fn)(const char *where, const cJSON *req, unsigned uid, int *notfound,
                              char *err, size_t errlen);

struct agent_opts {
    const char *config; /* -c, or NULL (the default file) */
    const char *socket; /* --socket, or NULL: the config's agent_socket */
    const char *state;  /* --state-dir, or NULL: the config's state_dir */
    const char *db;     /* --db, or NULL: the config's knowledge_base */
    agent_db_fn db_query; /* NULL: users' queries are refused */
    FILE *log;          /* the service's log lines, "crashpack agent: ..." (the verb's stderr) */
};

/* Runs the service (as root) until SIGTERM or SIGINT (it handles both, and ignores SIGPIPE).
 * Returns 0 once stopped by one of them, -1 when it cannot start (not root, the configuration,
 * the socket), after a line on o->log saying why. */
int agent_run(const struct agent_opts *o);
#endif
