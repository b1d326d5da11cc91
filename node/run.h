/* run.h - the supervisor of `crashpack run` and `crashpack watch` (docs/run.md): runs a job on
 * pseudo-terminals or pipes, forwards its output, follows every process of its tree (jobtrack.h:
 * the job's cgroup, the proc connector; proctree.h), has a bundle written for each abnormal end
 * of a process of interest (capreq.h: through the node service, or crashpack-capture --event as
 * root), snaps the job when its output and heartbeat stall (snap.h), passes the signals it gets
 * on to the whole job, and leaves nothing of it running.
 * The verbs (cli/cmd_run.c) parse the options into struct run_opts and call run_job. */
#ifndef CRASHPACK_RUN_H
#define CRASHPACK_RUN_H
#include <stdio.h>

struct run_opts {
    const char *verb; /* "crashpack run" or "crashpack watch": the start of every log line */
    int watch;
    double stall; /* 0: off */
    const char *hb, *outdir, *config, *job;
    int kill_after, full, quiet, no_pty;
    long long tail; /* -1: the config's run_output_tail */
    int exits;      /* -1: the config's run_exits */
    double grace;
    unsigned scan_ms; /* the shortest gap between two looks at the tree */
    unsigned tracker; /* what may follow the job: JT_* of jobtrack.h (JT_AUTO) */
    char **cmd;    /* CMD [ARG...] */
    FILE *log;     /* the supervisor's status lines and warnings (the verb's stderr) */
    int out_fd[2]; /* where the job's stdout and stderr are forwarded (1 and 2) */
};

/* run_job's results that are not the job's own exit status */
#define RUN_FAILED (-1)     /* the job could not be started, or its end is not known */
#define RUN_BAD_CONFIG (-2) /* the configuration file could not be read */

/* Runs and supervises the job o->cmd until it and everything it started have ended (the
 * process becomes a child subreaper, sets CRASHPACK_JOB_ID, and handles TERM, INT, HUP, QUIT,
 * USR1, USR2 and ignores SIGPIPE for good). Returns the main process's exit status (128 + N
 * when signal N ended it; 127 when CMD cannot be executed), or RUN_FAILED / RUN_BAD_CONFIG
 * after a line on o->log saying why. */
int run_job(const struct run_opts *o);
#endif
