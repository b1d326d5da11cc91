/* cmd_run.c - `crashpack run [opts] -- CMD ...`, the supervisor (docs/run.md), and `crashpack
 * watch`, the same supervisor with its stall detection on: the help, the options (into struct
 * run_opts) and the exit status; the supervisor itself is node/run.c. */
#include "cmdopt.h"
#include "commands.h"
#include "config.h"
#include "jobtrack.h"
#include "run.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out, int watch)
{
    if (watch)
        fprintf(out,
                "usage: crashpack watch [options] -- CMD [ARG...]\n"
                "\n"
                "`crashpack run` with its stall detection on (--stall 600 unless given): runs CMD\n"
                "on a pseudo-terminal (so block-buffered output still flows), forwards its output,\n"
                "and when neither the output nor the heartbeat file has changed for the stall\n"
                "time, captures the job with `crashpack snap` - the job itself and every Python\n"
                "process under it (torchrun-style trees) - records why, and lets it run on. Every\n"
                "abnormal end of a process of the job is captured as by `crashpack run`. Exits\n"
                "with the job's exit status (128 + signal number when a signal ended it); 2 is a\n"
                "usage error before the job started, 1 a failure to start it.\n"
                "\n"
                "  --stall SECONDS    silence that counts as a stall (default 600)\n");
    else
        fprintf(out,
                "usage: crashpack run [options] -- CMD [ARG...]\n"
                "\n"
                "Supervises a job: runs CMD (on pseudo-terminals, stdout and stderr apart),\n"
                "forwards its output unchanged, follows every process of its tree, and when a\n"
                "process of interest ends abnormally - the main process with a non-zero status or\n"
                "a signal, a Python process with a non-zero status, any process killed by a\n"
                "signal - has a bundle written (through the node service `crashpack agent`, or\n"
                "crashpack-capture directly when run as root) with the exit status or signal, the\n"
                "output tail and the process's recorded identity. Signals to run go to the whole\n"
                "job; nothing of the job is left running. Exits with the job's exit status (128 +\n"
                "signal number when a signal ended it); 2 is a usage error before the job\n"
                "started, 1 a failure to start it, 127 a CMD that cannot be executed.\n"
                "docs/run.md has the details.\n"
                "\n"
                "  --stall SECONDS    snap the job when its output and heartbeat stall this long\n"
                "                     (crashpack watch; default off)\n");
    fprintf(out,
            "  --heartbeat FILE   a file the job touches to say it is alive (its mtime counts)\n"
            "  --kill             end the job (SIGKILL to its process group) after a stall capture\n"
            "  --full             full cores instead of slim ones for stall captures\n"
            "  --no-pty           plain pipes instead of pseudo-terminals\n"
            "  --tail SIZE        output kept for the bundle's output.txt (default: config\n"
            "                     run_output_tail, 256K)\n"
            "  --exits WHO        whose non-zero exit is a crash: main, python (default: config\n"
            "                     run_exits, python) or all\n"
            "  --job ID           the job id of every bundle (default: $CRASHPACK_JOB_ID, else\n"
            "                     the Slurm or torchelastic id, else generated); exported to the\n"
            "                     job as CRASHPACK_JOB_ID\n"
            "  --grace SECONDS    after the main process ended: SIGTERM to what is left of the\n"
            "                     job, SIGKILL this long after (default 10)\n"
            "  --scan-ms MS       the shortest gap between two looks at the process tree\n"
            "                     when no kernel event says what changed (default 20)\n"
            "  -o, --output DIR   every bundle of the run in DIR: stall captures are written\n"
            "                     there (as by `crashpack snap -o`), death bundles copied there\n"
            "                     (with run's own credentials) from the node's bundle directory\n"
            "  -c, --config FILE  configuration file (default %s)\n"
            "  -q, --quiet        no status lines on stderr\n"
            "  -h, --help         this help\n",
            CP_DEFAULT_CONFIG);
}

/* --exits WHO: CP_RUN_EXITS_*, or -1. */
static int parse_exits(const char *s)
{
    return !strcmp(s, "main")     ? CP_RUN_EXITS_MAIN
           : !strcmp(s, "python") ? CP_RUN_EXITS_PYTHON
           : !strcmp(s, "all")    ? CP_RUN_EXITS_ALL
                                  : -1;
}

/* --tracker LIST (hidden: comparisons and tests), what may follow the job (node/jobtrack.h,
 * docs/run.md). 0, or CP_EXIT_USAGE after the message. */
static int parse_tracker(struct cp_opts *p, const char *s, struct run_opts *o)
{
    int w = jt_want_parse(s);
    if (w < 0)
        return cp_usage_error(p,
                              "--tracker `%s`: expected a comma list of auto, cgroup, cgroup2, "
                              "cgroup1, connector and walk, or scan",
                              s);
    o->tracker = (unsigned)w;
    return 0;
}

/* 0, CP_EXIT_USAGE, or -1 when --help was printed. */
static int run_parse(int argc, char **argv, struct run_opts *o, int watch)
{
    enum { O_STALL = 256, O_HEARTBEAT, O_KILL, O_FULL, O_NOPTY, O_TAIL, O_EXITS, O_JOB, O_GRACE,
           O_SCAN, O_TRACKER };
    static const struct option longs[] = {
        {"stall", required_argument, 0, O_STALL}, {"heartbeat", required_argument, 0, O_HEARTBEAT},
        {"output", required_argument, 0, 'o'}, {"config", required_argument, 0, 'c'},
        {"kill", no_argument, 0, O_KILL}, {"full", no_argument, 0, O_FULL},
        {"no-pty", no_argument, 0, O_NOPTY}, {"tail", required_argument, 0, O_TAIL},
        {"exits", required_argument, 0, O_EXITS}, {"job", required_argument, 0, O_JOB},
        {"grace", required_argument, 0, O_GRACE}, {"scan-ms", required_argument, 0, O_SCAN},
        {"tracker", required_argument, 0, O_TRACKER}, /* hidden (parse_tracker) */
        {"quiet", no_argument, 0, 'q'}, CP_OPT_HELP, CP_OPT_END};
    *o = (struct run_opts){.verb = watch ? "crashpack watch" : "crashpack run", .watch = watch,
                           .stall = watch ? 600 : 0, .tail = -1, .exits = -1, .grace = 10,
                           .scan_ms = 20, .tracker = JT_AUTO, .log = stderr,
                           .out_fd = {STDOUT_FILENO, STDERR_FILENO}};
    /* in order: the options end at CMD, whose own options are its */
    struct cp_opts p = {.verb = o->verb, .shorts = "o:c:q", .longs = longs, .in_order = 1,
                        .argc = argc, .argv = argv};
    int c;
    char *e;
    long long v;
    uint64_t sz;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout, watch);
            return -1;
        case O_STALL:
            o->stall = strtod(optarg, &e);
            if (!*optarg || *e || !(o->stall > 0) || o->stall > 1e7)
                return cp_usage_error(&p, "--stall `%s`: expected seconds, more than 0 and at most 1e7",
                                      optarg);
            break;
        case O_GRACE:
            o->grace = strtod(optarg, &e);
            if (!*optarg || *e || !(o->grace >= 0) || o->grace > 1e5)
                return cp_usage_error(&p, "--grace `%s`: expected seconds, from 0 to 1e5", optarg);
            break;
        case O_SCAN:
            if (cp_opt_num(&p, "--scan-ms", optarg, 1, 1000, &v))
                return CP_EXIT_USAGE;
            o->scan_ms = (unsigned)v;
            break;
        case O_TAIL:
            if (cp_parse_size(optarg, &sz) || sz < 1024 || sz > (64ULL << 20))
                return cp_usage_error(&p, "--tail `%s`: expected a size from 1K to 64M (4096, 256K, 1M)",
                                      optarg);
            o->tail = (long long)sz;
            break;
        case O_EXITS:
            if ((o->exits = parse_exits(optarg)) < 0)
                return cp_usage_error(&p, "--exits `%s`: expected main, python or all", optarg);
            break;
        case O_TRACKER:
            if (parse_tracker(&p, optarg, o))
                return CP_EXIT_USAGE;
            break;
        case O_JOB:
            if (!optarg[0] || strlen(optarg) > 200)
                return cp_usage_error(&p, "--job `%s`: expected an id of 1 to 200 characters", optarg);
            o->job = optarg;
            break;
        case O_HEARTBEAT: o->hb = optarg; break;
        case 'o': o->outdir = optarg; break;
        case 'c': o->config = optarg; break;
        case O_KILL: o->kill_after = 1; break;
        case O_FULL: o->full = 1; break;
        case O_NOPTY: o->no_pty = 1; break;
        case 'q': o->quiet = 1; break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 1, -1, "CMD"))
        return CP_EXIT_USAGE;
    o->cmd = argv + optind;
    return 0;
}

static int run_main(int argc, char **argv, int watch)
{
    struct run_opts o;
    int rc = run_parse(argc, argv, &o, watch);
    if (rc)
        return rc < 0 ? CP_EXIT_OK : rc;
    rc = run_job(&o);
    if (rc == RUN_BAD_CONFIG)
        return CP_EXIT_USAGE;
    return rc < 0 ? CP_EXIT_PROBLEM : rc;
}

int cmd_run(int argc, char **argv)
{
    return run_main(argc, argv, 0);
}

int cmd_watch(int argc, char **argv)
{
    return run_main(argc, argv, 1);
}
