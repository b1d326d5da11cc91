/* run.c - the supervisor of `crashpack run [opts] -- CMD ...` (docs/run.md) and of `crashpack
 * watch`, the same supervisor with its stall detection on (run.h; the verbs are cli/cmd_run.c).
 *
 * It runs the job in a session of its own, on pseudo-terminals (one for stdout, one for stderr:
 * both stay terminals, so Python and C stdio do not block-buffer, and they stay apart) or on
 * pipes (--no-pty), forwards what the job prints to its own stdout and stderr (the descriptors
 * run_opts.out_fd, 1 and 2) unchanged, and
 * keeps the last run_output_tail bytes for the bundle's output.txt (with which stream each byte
 * came from, in process.json).
 *
 * It sees every process of the job (jobtrack.h, proctree.h: a cgroup of the job's own when it
 * can make one, the proc connector's fork and exec events when the kernel gives them, else a walk
 * of /proc when something changed; subreaper; a pidfd for each new process at once, its status
 * from waitpid or PIDFD_INFO_EXIT). When a
 * process of interest ends abnormally - the main process with a non-zero status or a signal,
 * a Python process with a non-zero status (run_exits), any process killed by a signal - it asks
 * for a bundle: from the node service (`crashpack agent`, its socket), or, when it is root and
 * no agent answers, from crashpack-capture --event directly; neither: one warning line, and the
 * job goes on. Each report is made by a short-lived child, so the output keeps flowing.
 *
 * Signals to run (TERM, INT, HUP, QUIT, USR1, USR2) go to the whole job. When the main process
 * has ended, what is left of the job gets SIGTERM, then SIGKILL after --grace seconds (the
 * cgroup: all of it; else everything of the tree that is still alive), and the cgroup is removed.
 * run exits
 * with the main process's status (128 + N when signal N ended it). Stall detection (watch, or
 * --stall): when neither the output nor the heartbeat file changed for the stall time, the main
 * process and every Python process of the job are snapped (crashpack snap) and the job runs on
 * (unless --kill). */
#include "run.h"
#include "capreq.h"
#include "config.h"
#include "jobtrack.h"
#include "proctree.h"
#include "snap.h"
#include "util.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_SNAPS_PER_STALL 16
#define MAX_REPORTERS 4          /* reports in flight at once */
#define AGENT_WAIT_MS 130000     /* the agent waits up to 120 s for its capture */
#define REPORTER_NO_CAPTURER 3   /* a reporter's exit status: no agent, and not root */
#define TICK_MAX_S 0.5           /* the longest gap between two looks at the tree (no events) */
#define TICK_GONE_MAX_S 0.2      /* ... while a process waits for its parent to reap it */
#define TICK_COST_FACTOR 4       /* a look takes at most 1/4 of the time (an upper bound) */
#define TICK_IDLE_FACTOR 50      /* ... and at most 1/50 while nothing changes */
#define MAX_EVENTS 512           /* connector events handled at once (the output flows) */

static volatile sig_atomic_t pending_sigs; /* bit N: signal N arrived */
static int wake_fd = -1;                   /* the write end of the loop's wake-up pipe */
static void on_sig(int s)
{
    pending_sigs |= 1 << s;
    int e = errno;
    if (wake_fd >= 0 && write(wake_fd, "", 1) < 0) { /* full: the loop is awake anyway */
    }
    errno = e;
}
static const int fwd_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the job's output ---- */

/* The last cap bytes of the job's output, and which stream (1 stdout, 2 stderr) each byte came
 * from. */
struct tail {
    char *buf;
    unsigned char *tag;
    size_t cap;
    uint64_t total, bytes[3];
};

static void tail_add(struct tail *t, const char *s, size_t n, int stream)
{
    t->bytes[stream] += n;
    if (!t->buf)
        return;
    if (n > t->cap) {
        s += n - t->cap;
        t->total += n - t->cap;
        n = t->cap;
    }
    while (n) {
        size_t pos = (size_t)(t->total % t->cap), k = t->cap - pos < n ? t->cap - pos : n;
        memcpy(t->buf + pos, s, k);
        memset(t->tag + pos, stream, k);
        t->total += k;
        s += k;
        n -= k;
    }
}

/* The tail in order, malloc()ed (NUL-terminated; NUL bytes of the output become '?'), with
 * *len; the stderr ranges as [[offset, length], ...] into ranges. */
static char *tail_text(const struct tail *t, size_t *len, cJSON *ranges)
{
    size_t n = t->total < t->cap ? (size_t)t->total : t->cap;
    size_t start = t->total < t->cap ? 0 : (size_t)(t->total % t->cap);
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    long long ro = -1;
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = (start + i) % t->cap;
        s[i] = t->buf[k] ? t->buf[k] : '?';
        int err = t->tag[k] == 2;
        if (err && ro < 0)
            ro = (long long)i;
        if ((!err || i + 1 == n) && ro >= 0) {
            size_t end = err ? i + 1 : i;
            if (nr++ < 4096) {
                cJSON *r = cJSON_CreateArray();
                cJSON_AddItemToArray(r, cJSON_CreateNumber((double)ro));
                cJSON_AddItemToArray(r, cJSON_CreateNumber((double)(end - (size_t)ro)));
                cJSON_AddItemToArray(ranges, r);
            }
            ro = -1;
        }
    }
    s[n] = 0;
    *len = n;
    return s;
}

/* One output stream of the job: a pty's master side or a pipe's read end. */
struct chan {
    int fd, out, stream, open;
};

/* ---- the supervisor's state ---- */

struct reporter {
    pid_t pid;
};

struct run {
    const struct run_opts *o;
    struct cp_config cfg;
    int exits;
    struct ptree t;
    struct jobtrack jt;
    int wake[2];            /* the signal handler's wake-up pipe */
    double next_tick;       /* the next look at the tree (tick) */
    double tick_gap;        /* the gap after the last (doubles while nothing happens) */
    double next_walk;       /* look_for_new: the next look for new processes, at the earliest */
    double walk_gap;        /* ... the gap after the last one */
    unsigned long last_pid; /* ... the last pid of the machine at the last one */
    int activity;           /* something happened since the last look */
    int resync;             /* the connector lost events: the tree is looked at again */
    int reap;               /* a child of run may have ended: waitpid() */
    pid_t job;
    struct chan ch[2];
    struct tail tail;
    struct cp_scrub_stream ss[3]; /* the kept copy of each stream, scrubbed as it passes */
    char job_id[256];
    /* the main process's end */
    int main_done, main_status, main_gone;
    double main_end, term_at, kill_at;
    int fwd_mask;    /* signals forwarded to the job */
    int exec_failed; /* CMD could not be executed (exit 127, nothing to capture) */
    pid_t reporters[MAX_REPORTERS];
    int reporter_fd[MAX_REPORTERS]; /* their pidfds (or -1): the loop wakes at their end */
    int nreporters, warned, no_capturer;
    unsigned long reported, skipped;
    /* stall detection */
    double last;
    struct timespec hb_m;
    int hb_seen, snapped;
    char buf[65536];
};

/* Whether run forwarded sig to the job: only signals 1..31 have a bit (a real-time signal, 32..64,
 * is never one run forwards) */
static int fwd_bit(const struct run *r, int sig)
{
    return sig > 0 && sig < 32 && (r->fwd_mask & (1 << sig));
}

/* Forwards what is waiting on channel c (without blocking when nonblock). 1 when it read. */
static int chan_read(struct run *r, struct chan *c)
{
    ssize_t n = read(c->fd, r->buf, sizeof(r->buf));
    if (n > 0) {
        if (c->out >= 0 && write_all(c->out, r->buf, (size_t)n))
            c->out = -1; /* our own stdout/stderr went away: the job's output is still kept */
        cp_scrub_stream(&r->ss[c->stream], (uint8_t *)r->buf, (size_t)n);
        tail_add(&r->tail, r->buf, (size_t)n, c->stream);
        r->last = now_s();
        r->snapped = 0;
        return 1;
    }
    if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        c->open = 0; /* EOF, or EIO: every holder of the terminal is gone */
        close(c->fd);
        c->fd = -1;
    }
    return 0;
}

/* Everything the job has written so far (nonblocking; at most max reads a stream), e.g. before
 * reporting a death. */
static void drain(struct run *r, int max)
{
    for (int i = 0; i < 2; i++) {
        struct chan *c = &r->ch[i];
        for (int k = 0; c->open && k < max; k++) {
            struct pollfd pf = {c->fd, POLLIN, 0};
            if (poll(&pf, 1, 0) <= 0 || !chan_read(r, c))
                break;
        }
    }
}

/* ---- starting the job ---- */

static void set_raw(int fd, const struct winsize *ws)
{
    struct termios t;
    if (tcgetattr(fd, &t) == 0) {
        t.c_oflag &= ~(tcflag_t)OPOST; /* no \n -> \r\n: the output is forwarded as it is */
        t.c_lflag &= ~(tcflag_t)(ECHO | ICANON);
        tcsetattr(fd, TCSANOW, &t);
    }
    if (ws)
        ioctl(fd, TIOCSWINSZ, ws);
}

/* The forked job: a new session, stdout and stderr on the slave sides of the two ptys (the
 * first its controlling terminal) or on the pipes; it waits at the gate until the supervisor
 * has its pidfd and its signal handling, then execs CMD. */
static void job_child(const struct run_opts *o, const char slave[2][128], int pipes[2][2],
                      const struct winsize *ws, const int gate[2], const int ex[2])
    __attribute__((noreturn));
static void job_child(const struct run_opts *o, const char slave[2][128], int pipes[2][2],
                      const struct winsize *ws, const int gate[2], const int ex[2])
{
    close(gate[1]);
    close(ex[0]);
    setsid();
    /* the supervisor killed (SIGKILL, which it cannot pass on): the job must not run on */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (int i = 0; i < 2; i++) {
        int s;
        if (o->no_pty) {
            s = pipes[i][1];
        } else {
            s = open(slave[i], O_RDWR);
            if (s < 0)
                _exit(127);
            if (i == 0)
                ioctl(s, TIOCSCTTY, 0);
            set_raw(s, ws);
        }
        if (dup2(s, 1 + i) < 0)
            _exit(127);
    }
    for (int i = 0; o->no_pty && i < 2; i++) {
        close(pipes[i][0]);
        if (pipes[i][1] > 2)
            close(pipes[i][1]);
    }
    char c;
    if (read(gate[0], &c, 1) < 0) { /* the parent has set up its signal handling */
    }
    execvp(o->cmd[0], o->cmd);
    int e = errno;
    dprintf(STDERR_FILENO, "%s: %s: %s\n", o->verb, o->cmd[0], strerror(e)); /* the job's fd 2 */
    if (write(ex[1], &e, sizeof(e)) < 0) { /* the supervisor learns it from the exit 127 */
    }
    _exit(127);
}

/* The job's stdout and stderr: two ptys (slave: their names) or two pipes. 0, or RUN_FAILED. */
static int open_channels(struct run *r, char slave[2][128], int pipes[2][2])
{
    const struct run_opts *o = r->o;
    for (int i = 0; i < 2; i++) {
        r->ch[i] = (struct chan){.fd = -1, .out = o->out_fd[i], .stream = 1 + i, .open = 1};
        if (o->no_pty) {
            if (pipe2(pipes[i], O_CLOEXEC)) {
                fprintf(o->log, "%s: pipe: %s\n", o->verb, strerror(errno));
                return RUN_FAILED;
            }
            r->ch[i].fd = pipes[i][0];
            continue;
        }
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        const char *sname = m >= 0 && !grantpt(m) && !unlockpt(m) ? ptsname(m) : NULL;
        if (!sname) {
            fprintf(o->log, "%s: cannot open a pseudo-terminal: %s (--no-pty runs on pipes)\n",
                    o->verb, strerror(errno));
            return RUN_FAILED;
        }
        snprintf(slave[i], sizeof(slave[i]), "%s", sname);
        r->ch[i].fd = m;
    }
    return 0;
}

/* The job's cgroup and the proc connector, as --tracker allows, before the fork (no event of
 * the job is missed); what is not used, and why, goes into process.json. */
static void track_open(struct run *r)
{
    if (r->o->tracker & JT_SCAN)
        return;
    jt_cgroup_make(&r->jt, getpid());
    jt_connector_open(&r->jt);
}

/* The forked job, still at its gate: into the cgroup, and the first member of its lineage. Then
 * room for a pidfd per process (after the fork: the job keeps its own limits). */
static void track_enter(struct run *r)
{
    if (r->jt.cg)
        jt_cgroup_enter(&r->jt, r->job, getpid());
    if (r->jt.nl >= 0) {
        pt_lineage(&r->t, 1);
        if (!pm_has(&r->t.members, r->job))
            pm_add(&r->t.members, r->job, 0);
    }
    struct rlimit rl;
    rlim_t want = 8192;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The program execvp() ran for cmd0: through $PATH (the job's and run's), symlinks resolved
 * (/proc/PID/exe's form). 0, or -1. */
static int cmd_path(const char *cmd0, char out[PATH_MAX])
{
    if (strchr(cmd0, '/'))
        return realpath(cmd0, out) ? 0 : -1;
    const char *path = getenv("PATH");
    char dirs[4096], cand[PATH_MAX + 256];
    snprintf(dirs, sizeof(dirs), "%s", path && path[0] ? path : "/bin:/usr/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(cand, sizeof(cand), "%s/%s", d, cmd0);
        if (!access(cand, X_OK) && realpath(cand, out))
            return 0;
    }
    return -1;
}

static int run_start(struct run *r)
{
    const struct run_opts *o = r->o;
    char path[PATH_MAX];
    char slave[2][128] = {"", ""};
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    if (open_channels(r, slave, pipes))
        return RUN_FAILED;
    struct winsize ws;
    int have_ws =
        ioctl(o->out_fd[0], TIOCGWINSZ, &ws) == 0 || ioctl(o->out_fd[1], TIOCGWINSZ, &ws) == 0;
    int gate[2], ex[2]; /* ex: closed by a successful exec, an errno otherwise */
    if (pipe2(gate, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
        fprintf(o->log, "%s: pipe: %s\n", o->verb, strerror(errno));
        return RUN_FAILED;
    }
    /* the job's orphans (DataLoader workers whose parent died) come here, not to init */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    setenv("CRASHPACK_JOB_ID", r->job_id, 1);
    track_open(r);
    r->job = fork();
    if (r->job < 0) {
        fprintf(o->log, "%s: fork: %s\n", o->verb, strerror(errno));
        return RUN_FAILED;
    }
    if (r->job == 0)
        job_child(o, slave, pipes, have_ws ? &ws : NULL, gate, ex);
    close(gate[0]);
    close(ex[1]);
    for (int i = 0; o->no_pty && i < 2; i++)
        close(pipes[i][1]);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sig;
    for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
        sigaction(fwd_sigs[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* its pidfd before it can exec, let alone end */
    struct pt_proc *p = pt_add(&r->t, r->job, 1);
    if (!p)
        fprintf(o->log, "%s: warning: cannot follow the job's main process (pidfd_open: %s)\n",
                o->verb, strerror(errno));
    track_enter(r);
    close(gate[1]);
    /* its identity once it has exec'd (a job that ends at once: what it was started as) */
    int e = 0;
    ssize_t n;
    while ((n = read(ex[0], &e, sizeof(e))) < 0 && errno == EINTR)
        ;
    close(ex[0]);
    if (n > 0)
        r->exec_failed = 1;
    else if (p)
        pt_record(&r->t, p, o->cmd, cmd_path(o->cmd[0], path) ? NULL : path);
    return 0;
}

/* Tells the agent (if one listens) the job of this process tree, so that a process of it that
 * the kernel's OOM killer kills gets the job id in its bundle too, and so that the agent takes
 * the reports of run's reporters (docs/agent.md). 2 s at most. When no agent takes it and run is
 * not root, nothing can write the job's death bundles: one warning now, before the job starts,
 * and none of its ends is reported. */
static void register_job(struct run *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", "register");
    cJSON_AddStringToObject(o, "job", r->job_id);
    char *req = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!req)
        return;
    char ans[512], err[512], why[800];
    const char *sock = capreq_socket(&r->cfg);
    int rc = capreq_agent(sock, req, strlen(req), 2000, ans, sizeof(ans), err, sizeof(err));
    free(req);
    if (rc == 0) {
        cJSON *a = cJSON_Parse(ans);
        const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(a, "error"));
        int ok = cJSON_IsTrue(cJSON_GetObjectItem(a, "ok"));
        snprintf(why, sizeof(why), "the agent at %s refused to register the job: %s", sock,
                 e ? e : ans);
        cJSON_Delete(a);
        if (ok)
            return;
    } else if (rc == -1 && geteuid() != 0) {
        snprintf(why, sizeof(why), "%s, and crashpack run is not root", err);
        r->no_capturer = 1; /* nothing can write them: no reporter is started */
    } else {
        return; /* root: its reporters run crashpack-capture --event; or a busy agent */
    }
    fprintf(r->o->log,
            "%s: warning: %s: the deaths of this job's processes will not be captured; start "
            "`crashpack agent` as root (scripts/systemd/crashpack-agent.service), set "
            "agent_socket in the configuration (or CRASHPACK_AGENT_SOCKET) to the socket it "
            "listens on, or run crashpack run as root\n",
            r->o->verb, why);
    r->warned = 1;
}

/* The job id: --job, $CRASHPACK_JOB_ID, the scheduler's ids, or made up; and the record of
 * them all for process.json. */
static cJSON *job_ids(struct run *r)
{
    const struct run_opts *o = r->o;
    cJSON *j = cJSON_CreateObject();
    const char *cj = getenv("CRASHPACK_JOB_ID"), *sj = getenv("SLURM_JOB_ID"),
               *ss = getenv("SLURM_STEP_ID"), *te = getenv("TORCHELASTIC_RUN_ID"), *src;
    if (o->job) {
        snprintf(r->job_id, sizeof(r->job_id), "%s", o->job);
        src = "--job";
    } else if (cj && cj[0]) {
        snprintf(r->job_id, sizeof(r->job_id), "%s", cj);
        src = "CRASHPACK_JOB_ID";
    } else if (sj && sj[0]) {
        snprintf(r->job_id, sizeof(r->job_id), "slurm-%s%s%s", sj, ss && ss[0] ? "." : "",
                 ss && ss[0] ? ss : "");
        src = "SLURM_JOB_ID";
    } else if (te && te[0]) {
        snprintf(r->job_id, sizeof(r->job_id), "torchelastic-%s", te);
        src = "TORCHELASTIC_RUN_ID";
    } else {
        char host[64] = "host";
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = 0;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(r->job_id, sizeof(r->job_id), "%s-%lld-%d", host, (long long)ts.tv_sec,
                 (int)getpid());
        src = "generated";
    }
    cJSON_AddStringToObject(j, "id", r->job_id);
    cJSON_AddStringToObject(j, "source", src);
    const char *ids[] = {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_ARRAY_JOB_ID",
                         "SLURM_ARRAY_TASK_ID", "TORCHELASTIC_RUN_ID", NULL};
    for (size_t i = 0; ids[i]; i++) {
        const char *v = getenv(ids[i]);
        if (v && v[0])
            cJSON_AddStringToObject(j, ids[i], v);
    }
    return j;
}

/* ---- reporting a death ---- */

static const char *signame(int sig, char *buf, size_t n)
{
    const char *d = sigabbrev_np(sig);
    if (d)
        snprintf(buf, n, "SIG%s", d);
    else
        snprintf(buf, n, "signal %d", sig);
    return buf;
}

/* Whether p's end is one to capture: its kind ("exit", "signal", "terminated") or NULL. */
static const char *death_kind(struct run *r, const struct pt_proc *p)
{
    if (!p->status_known || p->signalled || (p->main && r->exec_failed))
        return NULL;
    if (WIFEXITED(p->status)) {
        int code = WEXITSTATUS(p->status);
        if (!code)
            return NULL;
        if (p->main || r->exits == CP_RUN_EXITS_ALL || (r->exits == CP_RUN_EXITS_PYTHON && p->python))
            return "exit";
        return NULL;
    }
    if (!WIFSIGNALED(p->status))
        return NULL;
    int sig = WTERMSIG(p->status);
    /* a signal run passed on to the whole job: its own end, recorded once, for the main process */
    if (!p->main && fwd_bit(r, sig))
        return NULL;
    /* the main process (the session leader) ended: the terminal's hangup is the job's end */
    if (!p->main && sig == SIGHUP && r->main_gone)
        return NULL;
    /* a pipeline's tool ending on a closed pipe is its normal end */
    if (sig == SIGPIPE && !p->main && !p->python && r->exits != CP_RUN_EXITS_ALL)
        return NULL;
    return sig == SIGTERM ? "terminated" : "signal";
}

/* Which mechanism follows the job (docs/run.md): the containment (tracker) and where new
 * processes are learnt from (discovery). */
static const char *tracker_name(const struct run *r)
{
    if (r->o->tracker & JT_SCAN)
        return "scan";
    return r->jt.cg == 2   ? "cgroup2"
           : r->jt.cg == 1 ? "cgroup1"
           : r->jt.nl >= 0 ? "connector"
                           : "walk";
}

static const char *discovery_name(const struct run *r)
{
    if (r->o->tracker & JT_SCAN)
        return "scan";
    return r->jt.nl >= 0 ? "connector" : r->jt.cg ? "cgroup.procs" : "walk";
}

/* process.json's "supervisor": run's pid and how it followed the job. */
static void supervisor_json(const struct run *r, cJSON *pj)
{
    cJSON *sup = cJSON_AddObjectToObject(pj, "supervisor");
    cJSON_AddNumberToObject(sup, "pid", getppid());
    cJSON_AddNumberToObject(sup, "scan_interval_ms", r->o->scan_ms);
    cJSON_AddBoolToObject(sup, "pidfd_exit", r->t.pidfd_exit);
    cJSON_AddNumberToObject(sup, "processes_seen", (double)r->t.seen);
    cJSON_AddNumberToObject(sup, "processes_missed", (double)r->t.missed);
    cJSON_AddStringToObject(sup, "tracker", tracker_name(r));
    cJSON_AddStringToObject(sup, "discovery", discovery_name(r));
    if (r->jt.cg) {
        cJSON *cg = cJSON_AddObjectToObject(sup, "cgroup");
        cJSON_AddNumberToObject(cg, "version", r->jt.cg);
        cJSON_AddStringToObject(cg, "hierarchy", r->jt.cg == 2 ? "unified" : r->jt.cg_hier);
        cJSON_AddStringToObject(cg, "path", r->jt.cg_name);
    } else {
        cJSON_AddNullToObject(sup, "cgroup");
    }
    if (r->jt.nl >= 0) {
        cJSON_AddNumberToObject(sup, "connector_events", (double)r->jt.nl_events);
        cJSON_AddNumberToObject(sup, "connector_overflows", (double)r->jt.nl_lost);
    }
    cJSON *no = cJSON_AddObjectToObject(sup, "not_used");
    if (!r->jt.cg && r->jt.cg_why[0])
        cJSON_AddStringToObject(no, "cgroup", r->jt.cg_why);
    if (r->jt.nl < 0 && r->jt.nl_why[0])
        cJSON_AddStringToObject(no, "connector", r->jt.nl_why);
}

/* In the reporter child, a bundle written (or found: dup) for p's end: with -o DIR, a copy of
 * it in DIR, made with run's own credentials (capreq_copy_out); the status line. */
static void say_bundle(const struct run *r, const struct pt_proc *p, const char *what,
                       const char *why, int dup, const char *path)
{
    const struct run_opts *o = r->o;
    char copy[PATH_MAX + 300] = "", err[PATH_MAX + 300];
    int crc = o->outdir && path[0]
                  ? capreq_copy_out(path, o->outdir, copy, sizeof(copy), err, sizeof(err))
                  : -2;
    if (o->quiet && crc != -1)
        return;
    fprintf(o->log, "%s: pid %d (%s, %s) %s: %s %s", o->verb, (int)p->pid, p->comm, what, why,
            dup ? "already captured:" : "bundle",
            crc >= 0  ? copy
            : path[0] ? path
                      : "(no path)");
    if (crc >= 0)
        fprintf(o->log, " (a copy of %s)\n", path);
    else if (crc == -1)
        fprintf(o->log, "; not copied to %s: %s\n", o->outdir, err);
    else
        fputc('\n', o->log);
}

/* In the reporter child: the request, to the agent, else crashpack-capture --event as root.
 * Returns its exit status. */
static int report(struct run *r, struct pt_proc *p, const char *kind)
{
    const struct run_opts *o = r->o;
    char why[300], sb[32];
    int sig = WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0;
    if (sig)
        snprintf(why, sizeof(why), "%s by %s%s", !strcmp(kind, "terminated") ? "terminated" : "killed",
                 signame(sig, sb, sizeof(sb)), WCOREDUMP(p->status) ? " (core dumped)" : "");
    else
        snprintf(why, sizeof(why), "exited with status %d", WEXITSTATUS(p->status));
    char reason[600];
    snprintf(reason, sizeof(reason), "%s%s (crashpack run, job %s)", why,
             p->main ? ", the job's main process" : p->python ? ", a Python process of the job" : "",
             r->job_id);
    if (sig && p->main && fwd_bit(r, sig))
        snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
                 "; %s was sent to crashpack run and passed on to the job", sb);
    /* the members */
    cJSON *ranges = cJSON_CreateArray();
    size_t tlen = 0;
    char *text = tail_text(&r->tail, &tlen, ranges);
    if (text)
        cp_scrub_text(&r->t.scrub, (uint8_t *)text, tlen);
    cJSON *pj = p->info ? cJSON_Duplicate(p->info, 1) : cJSON_CreateObject();
    cJSON *end = cJSON_AddObjectToObject(pj, "end");
    cJSON_AddStringToObject(end, "kind", kind);
    cJSON_AddNumberToObject(end, "time", p->ended);
    if (sig) {
        cJSON_AddNullToObject(end, "status");
        cJSON_AddNumberToObject(end, "signal", sig);
        cJSON_AddStringToObject(end, "signal_name", sb);
        cJSON_AddBoolToObject(end, "core_dumped", WCOREDUMP(p->status));
    } else {
        cJSON_AddNumberToObject(end, "status", WEXITSTATUS(p->status));
        cJSON_AddNullToObject(end, "signal");
    }
    cJSON_AddStringToObject(end, "seen_by", p->seen_by ? p->seen_by : "unknown");
    cJSON *out = cJSON_AddObjectToObject(pj, "output");
    cJSON_AddStringToObject(out, "channel", o->no_pty ? "pipes" : "ptys");
    cJSON_AddNumberToObject(out, "stdout_bytes", (double)r->tail.bytes[1]);
    cJSON_AddNumberToObject(out, "stderr_bytes", (double)r->tail.bytes[2]);
    cJSON_AddNumberToObject(out, "tail_bytes", (double)tlen);
    cJSON_AddItemToObject(out, "stderr_ranges", ranges);
    supervisor_json(r, pj);
    char *pjs = cJSON_PrintUnformatted(pj);
    cJSON_Delete(pj);

    cJSON *rq = cJSON_CreateObject();
    cJSON_AddStringToObject(rq, "op", "capture");
    cJSON_AddStringToObject(rq, "kind", kind);
    cJSON_AddNumberToObject(rq, "pid", p->pid);
    cJSON_AddNumberToObject(rq, "start_time", (double)p->start);
    if (sig) {
        cJSON_AddNullToObject(rq, "status");
        cJSON_AddNumberToObject(rq, "signal", sig);
    } else {
        cJSON_AddNumberToObject(rq, "status", WEXITSTATUS(p->status));
        cJSON_AddNullToObject(rq, "signal");
    }
    cJSON_AddNumberToObject(rq, "time", (double)(long long)p->ended);
    cJSON_AddStringToObject(rq, "trigger", "run");
    cJSON_AddStringToObject(rq, "comm", p->comm);
    cJSON_AddStringToObject(rq, "reason", reason);
    cJSON_AddStringToObject(rq, "job", r->job_id);
    cJSON *mem = cJSON_AddObjectToObject(rq, "members");
    cJSON_AddStringToObject(mem, "output.txt", text ? text : "");
    cJSON_AddStringToObject(mem, "process.json", pjs ? pjs : "{}");
    char *req = cJSON_PrintUnformatted(rq);
    cJSON_Delete(rq);

    char ans[2048], err[600], line[1400];
    const char *sock = capreq_socket(&r->cfg);
    int rc = req ? capreq_agent(sock, req, strlen(req), AGENT_WAIT_MS, ans, sizeof(ans), err,
                                sizeof(err))
                 : -2;
    free(req);
    int status = 0;
    const char *what = p->main ? "the job's main process" : "a process of the job";
    if (rc == 0) {
        cJSON *a = cJSON_Parse(ans);
        const char *b = cJSON_IsObject(a) ? cJSON_GetStringValue(cJSON_GetObjectItem(a, "bundle")) : NULL;
        const char *e = cJSON_IsObject(a) ? cJSON_GetStringValue(cJSON_GetObjectItem(a, "error")) : NULL;
        int dup = cJSON_IsTrue(cJSON_GetObjectItem(a, "deduplicated"));
        status = cJSON_IsTrue(cJSON_GetObjectItem(a, "ok")) ? 0 : 1;
        if (status == 0)
            say_bundle(r, p, what, why, dup, b ? b : "");
        else if (!o->quiet)
            fprintf(o->log, "%s: pid %d (%s) %s: the agent wrote no bundle: %s\n", o->verb,
                    (int)p->pid, p->comm, why, e ? e : ans);
        cJSON_Delete(a);
    } else if (rc == -1 && geteuid() == 0) {
        /* no agent: as root, the capture directly, with the same members */
        char a_pid[24], a_uid[24], a_gid[24], a_st[32], a_val[16], a_time[32];
        snprintf(a_pid, sizeof(a_pid), "%d", (int)p->pid);
        snprintf(a_uid, sizeof(a_uid), "%u", (unsigned)(p->uid == (uid_t)-1 ? 0 : p->uid));
        snprintf(a_gid, sizeof(a_gid), "%u", (unsigned)(p->gid == (gid_t)-1 ? 0 : p->gid));
        snprintf(a_st, sizeof(a_st), "%llu", p->start);
        snprintf(a_val, sizeof(a_val), "%d", sig ? sig : WEXITSTATUS(p->status));
        snprintf(a_time, sizeof(a_time), "%lld", (long long)p->ended);
        const char *args[] = {"--kind", kind, "--pid", a_pid, "--uid", a_uid, "--gid", a_gid,
                              "--reported-by", "0", "--start-time", a_st,
                              sig ? "--signal" : "--status", a_val, "--time", a_time,
                              "--trigger", "run", "--comm", p->comm, "--reason", reason,
                              "--job", r->job_id, NULL};
        struct snap_member m[2] = {
            {"output.txt", capreq_memfd("output.txt", text ? text : "", text ? tlen : 0)},
            {"process.json", capreq_memfd("process.json", pjs ? pjs : "{}", pjs ? strlen(pjs) : 2)}};
        int erc = m[0].fd >= 0 && m[1].fd >= 0 ? capreq_event(o->config, args, m, 2, line, sizeof(line))
                                               : (snprintf(line, sizeof(line), "memfd: %s", strerror(errno)), -1);
        for (int i = 0; i < 2; i++)
            if (m[i].fd >= 0)
                close(m[i].fd);
        int dup = !strncmp(line, "duplicate ", 10);
        if (erc == 0)
            say_bundle(r, p, what, why, dup, line + (dup ? 10 : 3));
        else if (!o->quiet)
            fprintf(o->log, "%s: pid %d (%s) %s: no bundle: %s\n", o->verb, (int)p->pid, p->comm,
                    why, line);
        status = erc ? 1 : 0;
    } else if (rc == -1) {
        status = REPORTER_NO_CAPTURER; /* the supervisor says it, once */
    } else {
        if (!o->quiet)
            fprintf(o->log, "%s: pid %d (%s) %s: no bundle: %s\n", o->verb, (int)p->pid, p->comm,
                    why, err);
        status = 1;
    }
    free(text);
    free(pjs);
    return status;
}

static void reap_all(struct run *r, int block);

/* A reporter child for p's end (at most MAX_REPORTERS at once). */
static void spawn_report(struct run *r, struct pt_proc *p, const char *kind)
{
    if (r->no_capturer) {
        r->skipped++;
        return;
    }
    while (r->nreporters >= MAX_REPORTERS)
        reap_all(r, 1);
    fflush(r->o->log);
    pid_t c = fork();
    if (c == 0) {
        wake_fd = -1; /* run's wake-up pipe is not this child's */
        /* the job's terminals are not this child's to hold */
        for (int i = 0; i < 2; i++)
            if (r->ch[i].fd >= 0)
                close(r->ch[i].fd);
        _exit(report(r, p, kind));
    }
    if (c < 0) {
        fprintf(r->o->log, "%s: pid %d ended (%s): no bundle: fork: %s\n", r->o->verb, (int)p->pid,
                kind, strerror(errno));
        return;
    }
    int fd = (int)syscall(SYS_pidfd_open, c, 0);
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    r->reporter_fd[r->nreporters] = fd;
    r->reporters[r->nreporters++] = c;
    r->reported++;
}

/* A reporter ended. */
static int reporter_done(struct run *r, pid_t pid, int status)
{
    for (int i = 0; i < r->nreporters; i++)
        if (r->reporters[i] == pid) {
            if (r->reporter_fd[i] >= 0)
                close(r->reporter_fd[i]);
            r->nreporters--;
            r->reporters[i] = r->reporters[r->nreporters];
            r->reporter_fd[i] = r->reporter_fd[r->nreporters];
            if (WIFEXITED(status) && WEXITSTATUS(status) == REPORTER_NO_CAPTURER && !r->warned) {
                r->warned = 1;
                r->no_capturer = 1;
                fprintf(r->o->log,
                        "%s: warning: no crashpack agent at %s and not root: the job's deaths are "
                        "not captured\n",
                        r->o->verb, capreq_socket(&r->cfg));
            }
            return 1;
        }
    return 0;
}

/* The ends that are known: reported (when of interest) and forgotten. */
static void handle_ends(struct run *r)
{
    int drained = 0;
    if (!r->t.ndone)
        return;
    for (size_t i = 0; i < r->t.n; i++)
        if (r->t.p[i].main && r->t.p[i].state != PT_ALIVE)
            r->main_gone = 1;
    for (size_t i = 0; i < r->t.n;) {
        struct pt_proc *p = &r->t.p[i];
        if (p->state != PT_DONE) {
            i++;
            continue;
        }
        if (p->main) {
            r->main_done = 1;
            r->main_status = p->status;
            r->main_end = now_s();
        }
        const char *kind = death_kind(r, p);
        if (kind) {
            if (!drained)
                drain(r, 64); /* what it printed last, a traceback, is in the tail */
            drained = 1;
            spawn_report(r, p, kind);
        }
        pt_remove(&r->t, p);
    }
}

static void reap_all(struct run *r, int block)
{
    int st;
    pid_t c;
    while ((c = waitpid(-1, &st, block ? 0 : WNOHANG)) > 0) {
        if (!reporter_done(r, c, st))
            pt_reaped(&r->t, c, st);
        block = 0;
    }
}

/* ---- signals ---- */

/* Whether anything of the job is left: a process of the tree, one in the cgroup, or (no cgroup)
 * an orphan of the job not seen yet. */
static int job_left(struct run *r)
{
    if (pt_live(&r->t) || (r->jt.cg && jt_cgroup_populated(&r->jt)))
        return 1;
    return !r->jt.cg && pt_walk(&r->t) > 0;
}

/* sig to the whole job: the main process's group (while its pid is not reaped, so not reused),
 * every other process of the tree through its pidfd, and every other process in the cgroup
 * (SIGKILL: the whole cgroup at once). Without a cgroup the tree is walked first: orphans of the
 * job not seen yet (setsid, double forks) are signalled too. mark: the supervisor ends them (no
 * reports). */
static void job_kill(struct run *r, int sig, int mark)
{
    if (mark)
        r->t.ending = 1; /* what is found from now on ends by these signals too */
    if (!r->jt.cg)
        pt_walk(&r->t);
    pid_t pg = r->main_done ? -1 : r->job;
    if (pg > 0)
        kill(-pg, sig);
    for (size_t i = 0; i < r->t.n; i++) {
        struct pt_proc *p = &r->t.p[i];
        if (p->state != PT_ALIVE)
            continue;
        if (mark)
            p->signalled = 1;
        if (pg < 0 || getpgid(p->pid) != pg)
            pt_signal(p, sig);
    }
    if (r->jt.cg)
        jt_cgroup_signal(&r->jt, sig, pg, &r->t.idx);
}

static void forward_signals(struct run *r)
{
    int s = pending_sigs;
    if (!s)
        return;
    pending_sigs &= ~s;
    for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
        if (s & (1 << fwd_sigs[i])) {
            r->fwd_mask |= 1 << fwd_sigs[i];
            job_kill(r, fwd_sigs[i], 0);
        }
}

/* ---- stall detection (crashpack watch) ---- */

/* A changed mtime of the heartbeat file is a sign of life. */
static void check_heartbeat(struct run *r)
{
    if (!r->o->hb)
        return;
    struct stat st;
    if (stat(r->o->hb, &st) == 0 && (!r->hb_seen || st.st_mtim.tv_sec != r->hb_m.tv_sec ||
                                     st.st_mtim.tv_nsec != r->hb_m.tv_nsec)) {
        r->hb_m = st.st_mtim;
        r->hb_seen = 1;
        r->last = now_s();
        r->snapped = 0;
    }
}

/* The stall: snaps the main process and the job's Python processes with the reason, then ends
 * the job if --kill. */
static void stall_snap(struct run *r)
{
    const struct run_opts *o = r->o;
    r->snapped = 1;
    char reason[600];
    snprintf(reason, sizeof(reason),
             "stall: no output%s%s%s for %.0f s (crashpack watch --stall %g)",
             o->hb ? " and no heartbeat (" : "", o->hb ? o->hb : "", o->hb ? ")" : "",
             now_s() - r->last, o->stall);
    pid_t set[MAX_SNAPS_PER_STALL];
    size_t n = 0;
    for (size_t i = 0; i < r->t.n && n < MAX_SNAPS_PER_STALL; i++)
        if (r->t.p[i].state == PT_ALIVE && (r->t.p[i].main || r->t.p[i].python))
            set[n++] = r->t.p[i].pid;
    for (size_t k = 0; k < n; k++) {
        struct snap_request rq = {.pid = set[k],
                                  .full = o->full,
                                  .config = o->config,
                                  .bundle_dir = o->outdir,
                                  .trigger = "watch",
                                  .reason = reason};
        char bundle[1200], err[600];
        cJSON *info = NULL;
        int rc = snap_pid(&rq, bundle, sizeof(bundle), &info, err, sizeof(err));
        cJSON_Delete(info);
        if (!o->quiet) {
            if (rc == 0)
                fprintf(o->log, "%s: %s: snapped pid %d -> %s\n", o->verb, reason, (int)set[k],
                        bundle);
            else
                fprintf(o->log, "%s: %s: snap of pid %d failed: %s\n", o->verb, reason, (int)set[k],
                        err);
        }
    }
    if (o->kill_after) {
        if (!o->quiet)
            fprintf(o->log, "%s: --kill: ending the job\n", o->verb);
        job_kill(r, SIGKILL, 1);
    }
}

/* ---- the loop ---- */

/* Something changed (a process ended, events were lost): the next look comes --scan-ms after the
 * last one. */
static void poke(struct run *r)
{
    r->activity = r->reap = 1;
    double at = r->next_tick - r->tick_gap + r->o->scan_ms / 1000.0; /* the last look + gap */
    if (at < r->next_tick)
        r->next_tick = at;
}

/* New processes without the connector: the cgroup's list (each one the job's), or a walk. */
static size_t discover(struct run *r)
{
    if (!r->jt.cg)
        return pt_walk(&r->t);
    size_t n, added = 0;
    pid_t *v = jt_cgroup_pids(&r->jt, &n);
    for (size_t i = 0; i < n; i++) {
        if (pt_find(&r->t, v[i]))
            continue;
        struct pt_proc *q = pt_add(&r->t, v[i], 0);
        if (q && !jt_cgroup_member(&r->jt, v[i])) /* the pid reused since the list was read */
            pt_remove(&r->t, q), r->t.missed++, r->t.seen--;
        else if (q)
            added++;
    }
    free(v);
    return added;
}

/* The pid the kernel gave out last (the last field of /proc/loadavg, of this pid namespace),
 * 0 when it cannot be read: while it stays the same, no process was created on the machine. */
static unsigned long last_pid(void)
{
    char buf[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *sp = strrchr(buf, ' ');
    return sp ? strtoul(sp + 1, NULL, 10) : 0;
}

/* New processes without the connector (the cgroup's list or a walk): when the machine created
 * a process since the last look, --scan-ms after a look that found one, then at doubling gaps
 * while the looks find none (up to TICK_MAX_S); never more than 1/TICK_COST_FACTOR of the time
 * (1/TICK_IDLE_FACTOR while they find none). After lost connector events: at once. */
static size_t look_for_new(struct run *r)
{
    unsigned long lp = last_pid();
    double now = now_s();
    if (!r->resync && ((lp && lp == r->last_pid) || now < r->next_walk))
        return 0;
    r->last_pid = lp; /* read before the look: a fork during it is looked for next time */
    size_t n = discover(r);
    double cost = now_s() - now, max_gap = TICK_MAX_S, min_gap = r->o->scan_ms / 1000.0;
    if (max_gap < TICK_IDLE_FACTOR * cost)
        max_gap = TICK_IDLE_FACTOR * cost;
    r->walk_gap = n ? min_gap : r->walk_gap * 2 > max_gap ? max_gap : r->walk_gap * 2;
    if (r->walk_gap < TICK_COST_FACTOR * cost)
        r->walk_gap = TICK_COST_FACTOR * cost;
    r->next_walk = now_s() + r->walk_gap;
    if (r->resync)
        pt_lineage(&r->t, 1);
    r->resync = 0;
    return n;
}

/* A look at what no event says: new processes and execs (no connector: look_for_new, every
 * --scan-ms, and pt_look_execs), the ends of processes their parent has now reaped. With the
 * connector it comes --scan-ms after a change, at doubling gaps while nothing changes (up to
 * TICK_MAX_S, TICK_GONE_MAX_S while a status is awaited). --tracker=scan: a walk of all of it
 * every --scan-ms. */
static void tick(struct run *r)
{
    double min_gap = r->o->scan_ms / 1000.0;
    pt_look_gpus(&r->t); /* the connector says nothing of a device opened */
    if (r->o->tracker & JT_SCAN) {
        pt_scan(&r->t);
        r->tick_gap = min_gap;
        r->next_tick = now_s() + min_gap;
        return;
    }
    int events = r->jt.nl >= 0;
    size_t changed = !events || r->resync ? look_for_new(r) : 0;
    if (!events)
        changed += pt_look_execs(&r->t, 0);
    double max_gap = pt_check_gone(&r->t) ? TICK_GONE_MAX_S : TICK_MAX_S;
    r->tick_gap = !events || changed || r->activity ? min_gap : r->tick_gap * 2;
    if (r->tick_gap > max_gap)
        r->tick_gap = max_gap;
    r->activity = 0;
    r->next_tick = now_s() + r->tick_gap;
}

/* The connector's events: new processes of the job, execs, ends. */
static void connector_events(struct run *r)
{
    static struct jt_ev ev[MAX_EVENTS];
    int lost = 0;
    size_t n = jt_connector_read(&r->jt, ev, MAX_EVENTS, &lost);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].what == JT_FORK)
            pt_fork(&r->t, ev[i].ppid, ev[i].pid);
        else if (ev[i].what == JT_EXEC)
            pt_exec(&r->t, ev[i].pid, ev[i].when);
        else
            pt_exit(&r->t, ev[i].pid);
    }
    if (lost) {
        r->resync = 1;
        poke(r);
    }
}

/* The main process has ended: what is left of the job gets SIGTERM, and SIGKILL --grace seconds
 * later, again while something is left (a process forked while the others were being killed).
 * 1 when nothing of it is left (or nothing that SIGKILL ends within 2 s). */
static int end_phase(struct run *r, double now)
{
    int left = job_left(r);
    if (!r->term_at && left) {
        r->term_at = now;
        job_kill(r, SIGTERM, 1);
    }
    if (r->term_at && left && (r->kill_at || now - r->term_at >= r->o->grace)) {
        if (!r->kill_at)
            r->kill_at = now;
        job_kill(r, SIGKILL, 1);
    }
    return !left || (r->kill_at && now - r->kill_at > 2);
}

/* What to wait on: the output, the wake-up pipe, the connector, the cgroup's events (at the
 * end), the reporters' and the live processes' pidfds (pp: the process of each, else NULL). The
 * number of descriptors; 0 when out of memory. */
static size_t loop_fds(struct run *r, struct pollfd **pf, struct pt_proc ***pp, size_t *cap)
{
    size_t need = 6 + MAX_REPORTERS + (r->t.epfd >= 0 ? 0 : r->t.n), n = 0;
    if (need > *cap) {
        struct pollfd *npf = realloc(*pf, need * 2 * sizeof(**pf));
        if (npf)
            *pf = npf;
        struct pt_proc **npp = realloc(*pp, need * 2 * sizeof(**pp));
        if (npp)
            *pp = npp;
        if (!npf || !npp)
            return 0;
        *cap = need * 2;
    }
    int fds[6] = {r->ch[0].open ? r->ch[0].fd : -1,
                  r->ch[1].open ? r->ch[1].fd : -1,
                  r->wake[0],
                  r->jt.nl,
                  r->t.epfd,
                  r->main_done ? r->jt.cg_events : -1};
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0) {
            (*pf)[n] = (struct pollfd){fds[i], i == 5 ? POLLPRI : POLLIN, 0};
            (*pp)[n++] = NULL;
        }
    for (int i = 0; i < r->nreporters; i++)
        if (r->reporter_fd[i] >= 0) {
            (*pf)[n] = (struct pollfd){r->reporter_fd[i], POLLIN, 0};
            (*pp)[n++] = NULL;
        }
    for (size_t i = 0; r->t.epfd < 0 && i < r->t.n; i++) /* no epoll: each pidfd */
        if (r->t.p[i].state == PT_ALIVE && r->t.p[i].pidfd >= 0) {
            (*pf)[n] = (struct pollfd){r->t.p[i].pidfd, POLLIN, 0};
            (*pp)[n++] = &r->t.p[i];
        }
    return n;
}

/* The pidfds that became readable, through the epoll instance. */
static void pidfd_events(struct run *r)
{
    struct epoll_event ev[256];
    int k;
    while ((k = epoll_wait(r->t.epfd, ev, 256, 0)) > 0) {
        for (int i = 0; i < k; i++) {
            struct pt_proc *p = pt_from_epoll(&r->t, ev[i].data.u64);
            if (p)
                pt_ended(&r->t, p);
        }
        poke(r);
        if (k < 256)
            break;
    }
}

/* What poll said: the ends first (the connector's new processes may move the tree's array). */
static void loop_events(struct run *r, const struct pollfd *pf, struct pt_proc **pp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pf[i].revents && pp[i]) {
            pt_ended(&r->t, pp[i]);
            poke(r);
        } else if (pf[i].revents && pf[i].fd == r->t.epfd) {
            pidfd_events(r);
        }
    for (size_t i = 0; i < n; i++) {
        if (!pf[i].revents || pp[i])
            continue;
        if (pf[i].fd == r->ch[0].fd || pf[i].fd == r->ch[1].fd) {
            chan_read(r, pf[i].fd == r->ch[0].fd ? &r->ch[0] : &r->ch[1]);
        } else if (pf[i].fd == r->wake[0]) {
            char b[64];
            while (read(r->wake[0], b, sizeof(b)) > 0)
                ;
        } else if (pf[i].fd == r->jt.nl) {
            connector_events(r);
        } else {
            r->reap = 1; /* a reporter ended */
        }
    }
}

/* How long to wait: until the next look, the end of --grace, the stall (ms, at most 1 s). */
static int loop_timeout(const struct run *r, double now)
{
    double until = r->next_tick;
    if (r->main_done) {
        /* the end: a v1 cgroup's emptiness has no event */
        if (until > now + r->o->scan_ms / 1000.0)
            until = now + r->o->scan_ms / 1000.0;
        if (r->term_at && !r->kill_at && until > r->term_at + r->o->grace)
            until = r->term_at + r->o->grace;
    } else if (r->o->stall > 0) {
        if (until > r->last + r->o->stall)
            until = r->last + r->o->stall;
        if (r->o->hb && until > now + 0.5)
            until = now + 0.5;
    }
    double ms = (until - now) * 1000;
    return ms <= 0 ? 0 : ms > 1000 ? 1000 : (int)ms + 1;
}

static void run_loop(struct run *r)
{
    const struct run_opts *o = r->o;
    struct pollfd *pf = NULL;
    struct pt_proc **pp = NULL;
    size_t cap = 0;
    r->tick_gap = r->walk_gap = o->scan_ms / 1000.0;
    r->next_tick = now_s();
    for (;;) {
        forward_signals(r);
        if (r->main_done && end_phase(r, now_s()))
            break;
        size_t n = loop_fds(r, &pf, &pp, &cap);
        if (!n)
            break;
        if (poll(pf, n, loop_timeout(r, now_s())) > 0)
            loop_events(r, pf, pp, n);
        if (now_s() >= r->next_tick)
            tick(r), r->reap = 1;
        if (r->reap)
            reap_all(r, 0);
        r->reap = 0;
        handle_ends(r);
        if (o->stall > 0 && !r->main_done) {
            check_heartbeat(r);
            if (!r->snapped && now_s() - r->last >= o->stall)
                stall_snap(r);
        }
    }
    free(pf);
    free(pp);
    drain(r, 4096);
    /* the reports still being made */
    while (r->nreporters)
        reap_all(r, 1);
    handle_ends(r);
    while (r->nreporters)
        reap_all(r, 1);
}

/* The end of the tracking: the cgroup removed (after what is left in it is killed). */
static void track_close(struct run *r)
{
    char err[PATH_MAX + 200];
    if (r->jt.cg && jt_cgroup_remove(&r->jt, err, sizeof(err)))
        fprintf(r->o->log, "%s: warning: the job's cgroup is not removed: %s\n", r->o->verb, err);
    jt_close(&r->jt);
}

/* What run_job holds: the cgroup (removed), the connector, the tree, the wake-up pipe. */
static void run_free(struct run *r)
{
    track_close(r);
    if (r->t.epfd >= 0)
        close(r->t.epfd);
    pt_free(&r->t);
    wake_fd = -1;
    for (int i = 0; i < 2; i++)
        if (r->wake[i] >= 0)
            close(r->wake[i]);
    free(r->tail.buf);
    free(r->tail.tag);
}

int run_job(const struct run_opts *o)
{
    int rc;
    static struct run r; /* the 64 KiB buffer */
    memset(&r, 0, sizeof(r));
    r.o = o;
    char err[600];
    cp_config_defaults(&r.cfg);
    if (cp_config_load(&r.cfg, o->config ? o->config : CP_DEFAULT_CONFIG, o->config != NULL, err,
                       sizeof(err))) {
        fprintf(o->log, "%s: %s\n", o->verb, err);
        return RUN_BAD_CONFIG;
    }
    r.exits = o->exits >= 0 ? o->exits : (int)r.cfg.run_exits;
    r.tail.cap = o->tail > 0 ? (size_t)o->tail : (size_t)r.cfg.run_output_tail;
    r.tail.buf = malloc(r.tail.cap);
    r.tail.tag = malloc(r.tail.cap);
    if (!r.tail.buf || !r.tail.tag) {
        free(r.tail.buf);
        free(r.tail.tag);
        r.tail.buf = NULL;
        r.tail.tag = NULL;
    }
    cJSON *ids = job_ids(&r);
    register_job(&r);
    if (o->outdir && access(o->outdir, W_OK | X_OK))
        fprintf(o->log, "%s: warning: -o %s: %s: its bundles stay in the bundle directory\n",
                o->verb, o->outdir, strerror(errno));
    pt_init(&r.t, &r.cfg, ids);
    r.t.look_min = o->scan_ms / 1000.0;
    r.t.epfd = epoll_create1(EPOLL_CLOEXEC);
    jt_init(&r.jt, o->tracker);
    r.wake[0] = r.wake[1] = -1;
    if (!pipe2(r.wake, O_CLOEXEC | O_NONBLOCK))
        wake_fd = r.wake[1];
    if ((rc = run_start(&r))) {
        run_free(&r);
        return rc;
    }
    r.last = now_s();
    if (o->hb) {
        struct stat st;
        if (stat(o->hb, &st) == 0) {
            r.hb_m = st.st_mtim;
            r.hb_seen = 1;
        }
    }
    run_loop(&r);
    for (int i = 0; i < 2; i++)
        if (r.ch[i].fd >= 0)
            close(r.ch[i].fd);
    if (r.skipped && !o->quiet)
        fprintf(o->log, "%s: %lu abnormal end(s) of the job's processes not captured\n", o->verb,
                r.skipped);
    run_free(&r);
    if (!r.main_done)
        return RUN_FAILED;
    if (WIFEXITED(r.main_status))
        return WEXITSTATUS(r.main_status);
    if (WIFSIGNALED(r.main_status))
        return 128 + WTERMSIG(r.main_status);
    return RUN_FAILED;
}
