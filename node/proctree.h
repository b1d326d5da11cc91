/* proctree.h - every process of a supervised job (crashpack run, docs/run.md).
 *
 * The supervisor is a child subreaper (orphans of the job are re-parented to it) and scans
 * /proc/<pid>/task/<tid>/children of every process it knows, every scan interval, from its own
 * children down. Each new descendant gets a pidfd at once, and its identity is recorded then
 * (and again when it execs): pid, start time, comm, exe, cmdline, uid/gid, cgroup, rank
 * variables and the environment with secret values replaced (process.json). When its pidfd says
 * it ended, its wait status comes from waitpid() when the supervisor is its parent, else from
 * ioctl(PIDFD_GET_INFO, PIDFD_INFO_EXIT) once its own parent has reaped it (Linux 6.15+); a
 * zombie whose parent never reaps it is re-parented here when that parent ends.
 *
 * Kernel floor: Linux 6.15 (PIDFD_INFO_EXIT). Below it the exit status of a process that its
 * own parent reaps is unknown (recorded as such; it is not reported), the job's main process and
 * orphans are still seen through waitpid(). On any kernel, a process that starts and ends within
 * one scan interval (default 20 ms) is never seen. */
#ifndef CRASHPACK_PROCTREE_H
#define CRASHPACK_PROCTREE_H
#include "config.h"
#include "scrub.h"

#include <cjson/cJSON.h>
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
    char comm[64];
    char exe[512];
    cJSON *info; /* process.json */
    cJSON *gpu;  /* its /dev/nvidia* descriptors, looked at while it lived (process.json "gpu") */
    double gpu_next; /* the next look (wall clock) */
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

/* One scan: new descendants of the supervisor and of every known process; identities of those
 * that exec'd since the last look; ends of GONE processes whose parent has now reaped them. */
void pt_scan(struct ptree *t);

/* The pidfd of p became readable: it ended (its comm re-read while its zombie is there). */
void pt_ended(struct ptree *t, struct pt_proc *p);

/* waitpid() reaped pid with this status: 1 when it is a known process (now PT_DONE). */
int pt_reaped(struct ptree *t, pid_t pid, int status);

/* The known process pid (not PT_DONE), or NULL. */
struct pt_proc *pt_find(struct ptree *t, pid_t pid);

/* Removes the entry (after its end has been dealt with). */
void pt_remove(struct ptree *t, struct pt_proc *p);

/* Live processes (PT_ALIVE or PT_GONE). */
size_t pt_live(const struct ptree *t);

/* Whether this kernel answers PIDFD_GET_INFO with PIDFD_INFO_EXIT (Linux 6.15+). */
int pt_have_pidfd_exit(void);
#endif
