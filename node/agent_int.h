/* agent_int.h - the node service's parts (agent.c: the socket, its connections, per-user
 * fairness and the workers; agent_req.c: each request, and who may make it; agent_kmsg.c: the
 * kernel log), over one struct agent. Internal to node/: agent.h is the service's interface. */
#ifndef CRASHPACK_AGENT_INT_H
#define CRASHPACK_AGENT_INT_H
#include "agent.h"
#include "config.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#define AGENT_CONN_MAX 256          /* connections open at once, all users */
#define AGENT_CONN_PER_UID 8        /* ... of one uid */
#define AGENT_IDLE_MS 3000          /* a request must arrive whole within this */
#define AGENT_REQ_MAX (16u << 20)   /* bytes of one request */
#define AGENT_UID_BYTES (32u << 20) /* bytes buffered for one uid's connections */
#define AGENT_WORKERS 16            /* captures and queries running at once, all users */
#define AGENT_WORKERS_PER_UID 2     /* ... of one uid */
#define AGENT_PENDING_MS 120000     /* a request waits this long for a worker, then is refused */
#define AGENT_OOM_WORKERS 4         /* OOM-kill captures running at once (no user's request) */
#define AGENT_OOM_QUEUE 256         /* OOM kills waiting for one */
#define AGENT_OOM_QUEUE_PER_UID 32  /* ... of one uid's processes */
#define AGENT_REGS 1024             /* live registrations of `crashpack run` */
#define AGENT_REGS_PER_UID 64
#define AGENT_UIDS 512 /* uids with an account at once */

/* One uid's share of the service. */
struct agent_uid {
    uid_t uid;
    int used;
    unsigned conns, workers, oom_queued;
    size_t bytes;            /* buffered in its connections */
    double tokens, refilled; /* its agent_rate bucket */
    double last;             /* when it was last used (an idle account is recycled) */
};

/* One connection: who is at the other end (SO_PEERCRED, and the peer's pidfd: the process that
 * connected, whatever its pid is later), its request, and its deadline. */
struct agent_conn {
    int fd;
    int pidfd;       /* SO_PEERPIDFD, or -1 */
    int pidfd_errno; /* why not: ENOPROTOOPT (a kernel before 6.5), or the peer is gone */
    struct ucred cr;
    unsigned long long start; /* the peer's start time, read at accept (0: unknown) */
    struct agent_uid *u;
    double deadline; /* monotonic seconds: the request by then, or a worker by then */
    char *buf;
    size_t len, cap;
    cJSON *req;    /* a whole request waiting for a worker */
    pid_t about;   /* the process its capture is about (0: none) */
    char job[128]; /* the job of the run that supervises the caller, if any */
};

/* A child running one capture or query. */
struct agent_worker {
    pid_t pid;
    int pidfd;
    uid_t uid;
    int oom;     /* an OOM-kill capture (the kernel's, no user's request) */
    pid_t about; /* the process it captures (0: none) */
    double deadline;
};

/* A `crashpack run` that registered its job (op register), held by its pidfd. */
struct agent_reg {
    pid_t pid;
    int pidfd;
    unsigned long long start;
    uid_t uid;
    char id[128];
};

/* An OOM kill read from the kernel log, waiting for a capture: what was known at that moment. */
struct agent_oom {
    pid_t pid;
    uid_t uid;
    unsigned long long start; /* 0: unknown (already reaped) */
    char comm[64], reason[700], job[128];
    char *oom_json; /* malloc()ed */
};

struct agent {
    struct cp_config cfg;
    const char *config; /* -c, or NULL (the default file) */
    const char *state;  /* --state-dir: where gpu-events.jsonl goes */
    const char *db;     /* the knowledge base users' queries are answered from */
    agent_db_fn db_query;
    FILE *log;
    char sock[CP_PATH_MAX];
    int lfd, kfd;
    /* the last oom-kill: line (its constraint and memory cgroups), for the Killed line after it */
    char oom_constraint[64], oom_memcg[512], task_memcg[512];
    pid_t oom_pid;
    unsigned long served, captured, refused, gpu_events;
    struct agent_uid uids[AGENT_UIDS];
    struct agent_conn conns[AGENT_CONN_MAX];
    size_t nconns;
    struct agent_worker workers[AGENT_WORKERS + AGENT_OOM_WORKERS];
    size_t nworkers;
    struct agent_reg regs[AGENT_REGS];
    size_t nregs;
    struct agent_oom oomq[AGENT_OOM_QUEUE];
    size_t noom;
};

/* agent.c */
void agent_log(const struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cJSON *agent_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void agent_answer(int fd, cJSON *o); /* one JSON line, written whole; frees o */
double agent_now(void);              /* monotonic seconds */
struct agent_uid *agent_uid_of(struct agent *a, uid_t uid); /* NULL when the table is full */

/* agent_req.c: a whole request. Answers at once (ping, register, a refusal: returns 1 and o's
 * answer in *ans), or accepts it for a worker (returns 0; c->about set). */
int agent_request(struct agent *a, struct agent_conn *c, cJSON **ans);
/* In a worker: runs c's accepted request (a capture or a query) and returns its answer. */
cJSON *agent_work(struct agent *a, struct agent_conn *c);
/* The job of pid: the registration of its nearest live ancestor (pid itself included) whose uid
 * is the process's or root; NULL when none. */
const char *agent_job_of(struct agent *a, pid_t pid, uid_t uid);
void agent_regs_close(struct agent *a);

/* agent_kmsg.c: the kernel log (OOM kills queued in a->oomq; GPU events written now), and an
 * OOM kill's capture, in a worker (0 when a bundle was written or found). */
void agent_kmsg_drain(struct agent *a);
int agent_oom_capture(struct agent *a, const struct agent_oom *o);
#endif
