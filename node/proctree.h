/* proctree.h - every process of a supervised job (crashpack run, docs/run.md).
 *
 * The supervisor is a child subreaper (orphans of the job are re-parented to it). It learns of
 * the job's processes from the proc connector's fork and exec events (pt_fork, pt_exec: the
 * job's processes by their parentage), from its cgroup's list (pt_add), or by walking
 * /proc/<pid>/task/<tid>/children of every process it knows, from its own children down
 * (pt_walk; run.c says when). Each new process gets a pidfd at once, and its identity is
 * recorded then (and again when it execs): pid, start time, comm, exe, cmdline, uid/gid, cgroup,
 * rank variables and the environment with secret values replaced (process.json). When its pidfd
 * says it ended, its wait status comes from waitpid() when the supervisor is its parent, else
 * from ioctl(PIDFD_GET_INFO, PIDFD_INFO_EXIT) once its own parent has reaped it (Linux 6.15+); a
 * zombie whose parent never reaps it is re-parented here when that parent ends.
 *
 * Kernel floor: Linux 6.15 (PIDFD_INFO_EXIT). Below it the exit status of a process that its
 * own parent reaps is unknown (recorded as such; it is not reported), the job's main process and
 * orphans are still seen through waitpid(). Without the connector, a process that starts and
 * ends between two looks is never seen. */
#ifndef CRASHPACK_PROCTREE_H
#define CRASHPACK_PROCTREE_H
#include "config.h"
#include "pidmap.h"
#include "scrub.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

enum pt_state {
    PT_ALIVE, /* running (pidfd not readable yet) */
    PT_GONE,  /* ended; its wait status not known yet (a zombie its parent has not reaped) */
    PT_DONE,  /* ended, status known (or known to be unknowable) */
};

struct pt_proc {
    pid_t pid, ppid;
    unsigned long long start; /* field 22 of /proc/PID/stat */
    int pidfd;                /* -1 once the end is known */
    enum pt_state state;
    int status;       /* wait status when PT_DONE and status_known */
    int status_known; /* 0: the kernel could not say (no PIDFD_INFO_EXIT) */
    const char *seen_by; /* "waitpid" or "pidfd" */
    int main, python;
    int signalled; /* the supervisor itself signalled it (--kill, the end-of-job cleanup) */
    uid_t uid;
    gid_t gid;
    double first_seen, ended; /* wall-clock seconds */
    double next_look, look_gap; /* pt_look_execs: when its exe is looked at next (monotonic) */
    double recorded;            /* when its identity was last read (monotonic) */
    char comm[64];
    char exe[512];
    cJSON *info; /* process.json */
    cJSON *gpu;  /* its /dev/nvidia* descriptors, looked at while it lived (process.json "gpu") */
    double gpu_next; /* the next look (wall clock) */
    double gpu_gap;  /* the gap to it: 1 s, doubling to 8 s while no /dev/nvidia* is open */
};

struct ptree {
    struct pt_proc *p;
    size_t n, cap;
    pid_t self, self_sid, job_sid;
    const struct cp_config *cfg;
    cJSON *job;            /* {"id": ..., scheduler ids}: copied into every process.json */
    struct cp_scrub scrub; /* secret values seen in the job's environments */
    int pidfd_exit;        /* the kernel has PIDFD_INFO_EXIT */
    unsigned long seen, missed; /* descendants recorded; seen but gone before a pidfd opened */
    size_t ndone;               /* entries PT_DONE (their ends to deal with) */
    struct pidmap idx;          /* pid -> index in p */
    int lineage;                /* pt_lineage: members is kept from the connector's events */
    struct pidmap members;      /* the job's live processes by their parentage (fork events) */
    double look_min;            /* the first gap between two looks at a process's exe (s) */
    int ending; /* the supervisor ends the job: a process found now is "signalled" */
    int epfd;   /* an epoll instance every new pidfd joins (one shot), or -1 */
    char helper_exe[3][PATH_MAX]; /* the programs of the supervisor's helpers */
};

/* An empty tree for a supervisor with this config; job is taken over (may be NULL). */
void pt_init(struct ptree *t, const struct cp_config *cfg, cJSON *job);
void pt_free(struct ptree *t);

/* Records pid (the job's main process when main) with a pidfd. NULL when it is gone. */
struct pt_proc *pt_add(struct ptree *t, pid_t pid, int main);

/* Records p's identity again now (after it exec'd); when it has ended already, argv (what it
 * was started as, may be NULL) stands for its command line, and exe (the program that argv ran,
 * may be NULL) for its exe. */
void pt_record(struct ptree *t, struct pt_proc *p, char *const *argv, const char *exe);

/* New descendants: children of the supervisor that are the job's orphans (not its helpers'),
 * and of every known process, theirs in the same pass. The number added. */
size_t pt_walk(struct ptree *t);

/* The ends of GONE processes whose parent has now reaped them. The number still GONE. */
size_t pt_check_gone(struct ptree *t);

/* The identities of processes that exec'd since their last look (all: every process now; else
 * those whose look is due: the gap doubles from look_min to 2 s while the exe stays). The
 * number recorded again. */
size_t pt_look_execs(struct ptree *t, int all);
/* What GPUs each live process has open (process.json's "gpu"): a look at its descriptors when
 * its own gap is due (1 s, doubling to 8 s while it has no /dev/nvidia* open). run's tick. */
void pt_look_gpus(struct ptree *t);

/* The old fixed-interval scan (--tracker=scan): pt_walk, pt_check_gone, pt_look_execs(all). */
void pt_scan(struct ptree *t);

/* The proc connector's events: on (after the main process is added): the job's members are
 * its known processes, and new ones come by pt_fork; off: none are kept. */
void pt_lineage(struct ptree *t, int on);

/* pid was forked by ppid: added when ppid is the job's (the new entry, or NULL). */
struct pt_proc *pt_fork(struct ptree *t, pid_t ppid, pid_t pid);

/* pid exec'd at when (monotonic s): its identity recorded again when it is the job's (and the
 * last record is older). */
void pt_exec(struct ptree *t, pid_t pid, double when);

/* pid ended (the connector's event): no longer a member, once its pidfd says so too. */
void pt_exit(struct ptree *t, pid_t pid);

/* sig to p through its pidfd (never to a reused pid): 0, or -1. */
int pt_signal(struct pt_proc *p, int sig);

/* The pidfd of p became readable: it ended (its comm re-read while its zombie is there). */
void pt_ended(struct ptree *t, struct pt_proc *p);

/* waitpid() reaped pid with this status: 1 when it is a known process (now PT_DONE). */
int pt_reaped(struct ptree *t, pid_t pid, int status);

/* The known process pid (not PT_DONE), or NULL. */
struct pt_proc *pt_find(struct ptree *t, pid_t pid);

/* The process of an event of t->epfd (its data: the pidfd << 32 | the pid), or NULL. */
struct pt_proc *pt_from_epoll(struct ptree *t, uint64_t data);

/* Removes the entry (after its end has been dealt with). */
void pt_remove(struct ptree *t, struct pt_proc *p);

/* Live processes (PT_ALIVE or PT_GONE). */
size_t pt_live(const struct ptree *t);

/* Whether this kernel answers PIDFD_GET_INFO with PIDFD_INFO_EXIT (Linux 6.15+). */
int pt_have_pidfd_exit(void);
#endif
