/* cmd_agent.c - `crashpack agent`: the node service, the one privileged broker for the deaths
 * that leave no core dump (docs/agent.md): the help, the options and the exit status; the
 * service itself is node/agent.c. */
#include "agent.h"
#include "cmdopt.h"
#include "commands.h"
#include "config.h"
#include "dbagent.h"

#include <stdio.h>

#define STATE_DIR "/var/lib/crashpack"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack agent [-c CONFIG] [--socket PATH] [--state-dir DIR] [--db PATH]\n"
            "\n"
            "The node service (root), in the foreground: captures the deaths that dump no core.\n"
            "  - a Unix socket where jobs ask for a capture of themselves (the Python hook, on\n"
            "    an uncaught exception) or report a process that ended (crashpack run);\n"
            "    Users read their own crashes there too (`crashpack db list|show|search`);\n"
            "  - the kernel log: a bundle for every process the OOM killer kills, and NVIDIA\n"
            "    Xid lines kept as node GPU events.\n"
            "\n"
            "  -c, --config F   configuration file (default %s): bundle_dir, agent_socket,\n"
            "                   agent_rate (captures a minute, per uid), agent_oom (yes|no),\n"
            "                   knowledge_base\n"
            "  --socket PATH    listen here instead of agent_socket\n"
            "  --state-dir DIR  where the node's GPU events go (default: state_dir, " STATE_DIR
            ")\n"
            "  --db PATH        the knowledge base users' queries are answered from (default:\n"
            "                   knowledge_base, " STATE_DIR "/kb.sqlite)\n"
            "  -h, --help       this help\n"
            "\n"
            "Runs until SIGTERM or SIGINT. Exit status: 0 stopped by a signal, 1 cannot start,\n"
            "2 usage error. docs/agent.md describes the protocol and the privilege model.\n",
            CP_DEFAULT_CONFIG);
}

int cmd_agent(int argc, char **argv)
{
    struct agent_opts o = {.log = stderr, .db_query = db_agent_answer};
    enum { O_SOCKET = 256, O_STATE, O_DB };
    static const struct option longs[] = {{"config", required_argument, 0, 'c'},
                                          {"socket", required_argument, 0, O_SOCKET},
                                          {"state-dir", required_argument, 0, O_STATE},
                                          {"db", required_argument, 0, O_DB},
                                          CP_OPT_HELP,
                                          CP_OPT_END};
    struct cp_opts p = {.verb = "crashpack agent", .shorts = "c:", .longs = longs, .argc = argc,
                        .argv = argv};
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case 'c': o.config = optarg; break;
        case O_SOCKET: o.socket = optarg; break;
        case O_STATE: o.state = optarg; break;
        case O_DB:
            o.db = optarg;
            break;
        default: return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 0, 0, ""))
        return CP_EXIT_USAGE;
    return agent_run(&o) ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}
