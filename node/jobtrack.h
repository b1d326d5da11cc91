/* jobtrack.h - how `crashpack run` knows the processes of its job (docs/run.md, "Every process
 * of the job"): a cgroup of the job's own, the kernel's proc connector, or neither.
 *
 * - The cgroup (root, or a delegated cgroup): a child of run's own cgroup, crashpack-run-<run's
 *   pid>, in the unified (v2) hierarchy, else in a writable v1 hierarchy (freezer, pids, or a named
 *   one). The job's main process is moved into it before it execs, so every process the job
 *   starts is in it, whatever its parentage (setsid, double forks). No controller is enabled and
 *   no limit set; a child of run's own cgroup stays under that cgroup's limits (a scheduler's
 *   memory cgroup). At the end every process in it gets the signals, and SIGKILL in one step (v2
 *   cgroup.kill, v1 freezer: frozen, killed, thawed), then it is removed.
 * - The proc connector (netlink, CN_IDX_PROC; in the initial network and pid namespaces): fork,
 *   exec and exit events of every process of the machine, so a new process of the job is known
 *   when it is forked, not at the next look at /proc.
 * - Neither: the caller walks /proc (proctree.h).
 *
 * This file has the kernel interfaces; proctree.c keeps the processes. */
#ifndef CRASHPACK_JOBTRACK_H
#define CRASHPACK_JOBTRACK_H
#include "pidmap.h"

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* What run may use (the hidden option --tracker, a comma list; docs/run.md). */
#define JT_CGROUP2 1u
#define JT_CGROUP1 2u
#define JT_CONNECTOR 4u
#define JT_SCAN 8u /* the old fixed-interval walk of /proc (comparisons), nothing else */
#define JT_AUTO (JT_CGROUP2 | JT_CGROUP1 | JT_CONNECTOR)

struct jobtrack {
    unsigned want;
    int cg;                        /* 0: no cgroup; 1 or 2: its version */
    char cg_dir[PATH_MAX];         /* the job's cgroup, a directory */
    char cg_name[PATH_MAX];        /* its path in its hierarchy, as /proc/PID/cgroup says it */
    char cg_hier[64];              /* v1: the hierarchy ("freezer", "pids", "name=systemd") */
    int cg_events;                 /* v2: cgroup.events (POLLPRI when populated changes), or -1 */
    int cg_kill;                   /* v2: the kernel has cgroup.kill */
    int nl;                        /* the proc connector's socket, or -1 */
    unsigned long nl_events;       /* events read */
    unsigned long nl_lost;         /* times the socket overflowed (events lost: walked instead) */
    char cg_why[400], nl_why[200]; /* why there is no cgroup, no connector */
};

/* A process event of the connector, for a whole process (threads left out). */
enum jt_what { JT_FORK = 1, JT_EXEC, JT_EXIT };
struct jt_ev {
    enum jt_what what;
    pid_t pid;   /* the new process (FORK), the process */
    pid_t ppid;  /* FORK: the parent process */
    double when; /* CLOCK_MONOTONIC seconds */
};

/* The parsed --tracker list ("auto", "cgroup", "cgroup2", "cgroup1", "connector", "walk",
 * "scan"), or -1. */
int jt_want_parse(const char *spec);

void jt_init(struct jobtrack *j, unsigned want);

/* Makes the job's cgroup (as j->want allows): 0, or -1 with j->cg_why. */
int jt_cgroup_make(struct jobtrack *j, pid_t self);

/* Moves pid (the forked job, before it execs) into the cgroup (self: run's pid, for a v1 cgroup
 * made instead when a v2 one refuses it): 0, or -1 (no cgroup; j->cg_why says why). */
int jt_cgroup_enter(struct jobtrack *j, pid_t pid, pid_t self);

/* The pids in the cgroup and the cgroups below it, malloc()ed (*n of them; NULL, 0 when none). */
pid_t *jt_cgroup_pids(const struct jobtrack *j, size_t *n);

/* Whether pid is in the cgroup (or one below it). */
int jt_cgroup_member(const struct jobtrack *j, pid_t pid);

/* Whether a process is in the cgroup: 1, 0. */
int jt_cgroup_populated(const struct jobtrack *j);

/* sig to every process in the cgroup (SIGKILL: v2 cgroup.kill, v1 freezer when it is one),
 * except those of the process group skip_pgrp (> 0) and the pids in skip (NULL: none), which the
 * caller signals itself. The number of processes signalled (SIGKILL through cgroup.kill: 1 when
 * populated). */
size_t jt_cgroup_signal(const struct jobtrack *j, int sig, pid_t skip_pgrp,
                        const struct pidmap *skip);

/* Kills what is left, and removes the cgroup (and those below it). 0, or -1 with err. */
int jt_cgroup_remove(struct jobtrack *j, char *err, size_t errlen);

/* Opens the proc connector (as j->want allows): 0, or -1 with j->nl_why. */
int jt_connector_open(struct jobtrack *j);

/* The events waiting (without blocking), at most max (at least 16): their count; *lost set when
 * events were lost (the socket overflowed: the caller looks at the tree itself once). */
size_t jt_connector_read(struct jobtrack *j, struct jt_ev *ev, size_t max, int *lost);

/* Closes the connector (the kernel stops sending when no one listens) and the cgroup's files;
 * the cgroup itself is removed by jt_cgroup_remove. */
void jt_close(struct jobtrack *j);
#endif
