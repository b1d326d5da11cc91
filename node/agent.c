/* agent.c - the node service of `crashpack agent`, the one privileged broker for the deaths
 * that leave no core dump (docs/agent.md; agent.h; the verb is cli/cmd_agent.c).
 *
 * It runs as root in the foreground (`crashpack agent -c CONFIG`; the systemd unit
 * scripts/crashpack-agent.service runs the same command) and does two things:
 *
 *  - It listens on a Unix socket (config `agent_socket`, mode 0666). A caller is whoever
 *    SO_PEERCRED says it is, bound to the process that connected by its pidfd (SO_PEERPIDFD):
 *    agent_req.c decides what it may ask (a capture of itself, a report of a process its run
 *    supervises, its own crashes from the knowledge base) and runs each capture or query.
 *  - It follows the kernel log (/dev/kmsg, from the moment it starts): a bundle for each OOM
 *    kill, GPU events kept (agent_kmsg.c).
 *
 * This file is the service itself: connections served at once with poll(), each bounded (16 MiB,
 * AGENT_IDLE_MS to arrive whole: an idle connection is dropped and never holds up another), and
 * fairness between users: a uid has at most AGENT_CONN_PER_UID connections, AGENT_UID_BYTES
 * buffered, AGENT_WORKERS_PER_UID captures or queries running, and agent_rate captures a minute
 * of its own. Captures and queries run in worker children, so nothing a request does can stall
 * the service. OOM-kill captures come from the kernel log, not from a request: their own queue and
 * workers, counted against no user's requests. Two captures of one process never run at once
 * (the second would not see the first's bundle: one death, one bundle), and a reported end waits
 * for the OOM kill of the same pid the kernel log holds. The agent never reads a caller's files:
 * every capture is done by crashpack-capture, which opens the process's files with its
 * credentials; the snapshot's ELF reads go through the one opener (common/rootopen.h). */
#include "agent_int.h"
#include "pidfd.h"
#include "util.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKER_MAX_S 600 /* a worker still running after this is killed */

static volatile sig_atomic_t stop_sig;
static void on_stop(int s) { stop_sig = s; }

void agent_log(const struct agent *a, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(a->log, "crashpack agent: %s\n", line);
    fflush(a->log);
}

cJSON *agent_fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "ok");
    cJSON_AddStringToObject(o, "error", msg);
    return o;
}

/* A failed write is not an error here: a caller that went away leaves its capture standing, a
 * full disk leaves the kernel log's line. */
void agent_answer(int fd, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        size_t n = strlen(s);
        s[n] = '\n'; /* over the NUL: written by length */
        if (write_all(fd, s, n + 1)) {
            /* see above */
        }
    }
    free(s);
    cJSON_Delete(o);
}

double agent_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- per-uid accounts ---- */

static int uid_idle(const struct agent_uid *u, double now)
{
    return !u->conns && !u->workers && !u->oom_queued && now - u->last > 60;
}

struct agent_uid *agent_uid_of(struct agent *a, uid_t uid)
{
    double now = agent_now();
    struct agent_uid *free_slot = NULL;
    for (size_t i = 0; i < AGENT_UIDS; i++) {
        struct agent_uid *u = &a->uids[i];
        if (u->used && u->uid == uid) {
            u->last = now;
            return u;
        }
        if (!free_slot && (!u->used || uid_idle(u, now)))
            free_slot = u;
    }
    if (!free_slot)
        return NULL;
    memset(free_slot, 0, sizeof(*free_slot));
    free_slot->used = 1;
    free_slot->uid = uid;
    free_slot->tokens = a->cfg.agent_rate;
    free_slot->refilled = free_slot->last = now;
    return free_slot;
}

/* ---- the socket ---- */

static int listen_on(struct agent *a, char *err, size_t errlen)
{
    char dir[CP_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", a->sock);
    char *sl = strrchr(dir, '/');
    if (!sl || sl == dir || strlen(a->sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(err, errlen, "socket path %s: not an absolute path that fits", a->sock);
        return -1;
    }
    *sl = 0;
    if (mkdir(dir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
        snprintf(err, errlen, "%s must be a root-owned directory that only root can write", dir);
        return -1;
    }
    if (lstat(a->sock, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "%s exists and is not a socket", a->sock);
            return -1;
        }
        unlink(a->sock); /* a previous agent's */
    }
    a->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->sock);
    mode_t old = umask(0);
    int rc = a->lfd < 0 ? -1 : bind(a->lfd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc || chmod(a->sock, 0666) || listen(a->lfd, 64)) {
        snprintf(err, errlen, "listen on %s: %s", a->sock, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- connections ---- */

static void conn_close(struct agent *a, size_t i)
{
    struct agent_conn *c = &a->conns[i];
    close(c->fd);
    if (c->pidfd >= 0)
        close(c->pidfd);
    if (c->u) {
        c->u->conns--;
        c->u->bytes -= c->cap;
    }
    free(c->buf);
    cJSON_Delete(c->req);
    a->conns[i] = a->conns[--a->nconns];
}

/* Answers on connection i and closes it. */
static void conn_answer(struct agent *a, size_t i, cJSON *ans)
{
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "ok"))) {
        const struct agent_conn *c = &a->conns[i];
        agent_log(a, "pid %d (uid %u): refused: %s", (int)c->cr.pid, (unsigned)c->cr.uid,
                  cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ans, "error")));
    }
    agent_answer(a->conns[i].fd, ans);
    conn_close(a, i);
}

/* Who connected: SO_PEERCRED, the peer's pidfd, and its start time (read, then checked against
 * the pidfd: 0 when it no longer holds the pid). */
static void conn_peer(struct agent_conn *c)
{
    c->pidfd = cp_peer_pidfd(c->fd);
    c->pidfd_errno = c->pidfd < 0 ? errno : 0;
    c->start = cp_start_ticks(c->cr.pid);
    if (c->pidfd >= 0 && !cp_pidfd_holds(c->pidfd, c->cr.pid))
        c->start = 0; /* gone already: its pid may be another's */
}

/* Accepts what is waiting (at most 64 at a time: a flood of connections cannot keep the loop
 * here), each counted against its uid's share. */
static void accept_conns(struct agent *a)
{
    for (int k = 0; k < 64; k++) {
        int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        a->served++;
        struct ucred cr;
        socklen_t cl = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
            agent_answer(fd, agent_fail("cannot authenticate the caller (SO_PEERCRED): %s",
                                        strerror(errno)));
            close(fd);
            continue;
        }
        struct agent_uid *u = agent_uid_of(a, cr.uid);
        if (a->nconns >= AGENT_CONN_MAX || !u || u->conns >= AGENT_CONN_PER_UID) {
            a->refused++;
            agent_answer(fd, agent_fail("busy: %s", u && u->conns >= AGENT_CONN_PER_UID
                                                        ? "too many connections of this uid"
                                                        : "too many connections"));
            close(fd);
            continue;
        }
        struct agent_conn *c = &a->conns[a->nconns++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->cr = cr;
        c->u = u;
        u->conns++;
        c->deadline = agent_now() + AGENT_IDLE_MS / 1000.0;
        conn_peer(c);
    }
}

/* The request line, once it is whole: 1 (c->req set, or an answer to give in *ans), 0 when more
 * is to come, -1 when the connection is done (closed, or over a limit: *ans says why, or NULL). */
static int read_conn(struct agent_conn *c, cJSON **ans)
{
    *ans = NULL;
    for (;;) {
        if (c->len == c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : 1 << 16;
            if (c->cap >= AGENT_REQ_MAX || c->u->bytes + (ncap - c->cap) > AGENT_UID_BYTES) {
                *ans = agent_fail(c->cap >= AGENT_REQ_MAX ? "the request is over %u bytes"
                                                          : "over %u bytes buffered for this uid",
                                  c->cap >= AGENT_REQ_MAX ? AGENT_REQ_MAX : AGENT_UID_BYTES);
                return -1;
            }
            char *nb = realloc(c->buf, ncap + 1);
            if (!nb)
                return -1;
            c->u->bytes += ncap - c->cap;
            c->buf = nb;
            c->cap = ncap;
        }
        ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0) {
            *ans = agent_fail("the connection closed before the end of the request");
            return -1;
        }
        char *nl = memchr(c->buf + c->len, '\n', (size_t)r);
        c->len += (size_t)r;
        if (nl) {
            *nl = 0;
            c->req = cJSON_Parse(c->buf);
            c->u->bytes -= c->cap;
            free(c->buf);
            c->buf = NULL;
            c->len = c->cap = 0;
            if (!cJSON_IsObject(c->req))
                *ans = agent_fail("the request is not a JSON object with an op");
            return 1;
        }
    }
}

/* Connection i is readable: a whole request is answered at once or waits for a worker. */
static void serve_conn(struct agent *a, size_t i)
{
    struct agent_conn *c = &a->conns[i];
    cJSON *ans = NULL;
    int r = read_conn(c, &ans);
    if (r == 0)
        return;
    if (r < 0 || ans || agent_request(a, c, &ans)) {
        if (ans)
            conn_answer(a, i, ans);
        else
            conn_close(a, i);
        return;
    }
    c->deadline = agent_now() + AGENT_PENDING_MS / 1000.0; /* now waiting for a worker */
}

/* Connections past their deadline: a request that did not arrive whole, or one no worker took. */
static void expire_conns(struct agent *a)
{
    double now = agent_now();
    for (size_t i = a->nconns; i-- > 0;)
        if (now >= a->conns[i].deadline) {
            a->refused++;
            conn_answer(a, i,
                        a->conns[i].req
                            ? agent_fail("busy: no capture could start within %d s",
                                         AGENT_PENDING_MS / 1000)
                            : agent_fail("the request did not arrive within %d ms", AGENT_IDLE_MS));
        }
}

/* ---- workers ---- */

/* In a worker child: nothing of the service but the one connection (keep_fd, keep_pidfd). */
static void child_reset(struct agent *a, int keep_fd, int keep_pidfd)
{
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    close(a->lfd);
    if (a->kfd >= 0)
        close(a->kfd);
    for (size_t i = 0; i < a->nconns; i++) {
        if (a->conns[i].fd != keep_fd)
            close(a->conns[i].fd);
        if (a->conns[i].pidfd >= 0 && a->conns[i].pidfd != keep_pidfd)
            close(a->conns[i].pidfd);
    }
    for (size_t i = 0; i < a->nworkers; i++)
        close(a->workers[i].pidfd);
    agent_regs_close(a);
}

static struct agent_worker *worker_add(struct agent *a, pid_t p, uid_t uid, int oom, pid_t about)
{
    struct agent_worker *w = &a->workers[a->nworkers++];
    w->pid = p;
    w->pidfd = cp_pidfd_open(p);
    w->uid = uid;
    w->oom = oom;
    w->about = about;
    w->deadline = agent_now() + WORKER_MAX_S;
    return w;
}

/* Runs connection i's accepted request in a worker child, which answers it. */
static void start_worker(struct agent *a, size_t i)
{
    struct agent_conn *c = &a->conns[i];
    fflush(a->log);
    pid_t p = fork();
    if (p == 0) {
        child_reset(a, c->fd, c->pidfd);
        int fl = fcntl(c->fd, F_GETFL);
        struct timeval tv = {10, 0};
        fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        cJSON *ans = agent_work(a, c);
        int ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "ok"));
        agent_answer(c->fd, ans);
        fflush(a->log);
        _exit(ok ? 0 : 1);
    }
    if (p < 0) {
        conn_answer(a, i, agent_fail("fork: %s", strerror(errno)));
        return;
    }
    c->u->workers++;
    worker_add(a, p, c->cr.uid, 0, c->about);
    conn_close(a, i);
}

/* The first queued OOM kill, in a worker child. */
static void start_oom_worker(struct agent *a, size_t q)
{
    struct agent_oom o = a->oomq[q];
    memmove(&a->oomq[q], &a->oomq[q + 1], (a->noom - q - 1) * sizeof(a->oomq[0]));
    a->noom--;
    struct agent_uid *u = agent_uid_of(a, o.uid);
    if (u && u->oom_queued)
        u->oom_queued--;
    fflush(a->log);
    pid_t p = fork();
    if (p == 0) {
        child_reset(a, -1, -1);
        _exit(agent_oom_capture(a, &o) ? 1 : 0);
    }
    free(o.oom_json);
    if (p < 0)
        agent_log(a, "OOM kill of pid %d not captured: fork: %s", (int)o.pid, strerror(errno));
    else
        worker_add(a, p, o.uid, 1, o.pid);
}

/* Workers that ended (or ran past WORKER_MAX_S, killed). */
static void reap_workers(struct agent *a)
{
    double now = agent_now();
    for (size_t i = a->nworkers; i-- > 0;) {
        struct agent_worker *w = &a->workers[i];
        if (now > w->deadline)
            kill(w->pid, SIGKILL);
        int st;
        if (waitpid(w->pid, &st, WNOHANG) != w->pid)
            continue;
        a->captured += WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!w->oom) {
            struct agent_uid *u = agent_uid_of(a, w->uid);
            if (u && u->workers)
                u->workers--;
        }
        if (w->pidfd >= 0)
            close(w->pidfd);
        a->workers[i] = a->workers[--a->nworkers];
    }
}

static int worker_about(const struct agent *a, pid_t pid)
{
    for (size_t i = 0; pid > 0 && i < a->nworkers; i++)
        if (a->workers[i].about == pid)
            return 1;
    return 0;
}

/* Is a capture of pid running, or an OOM kill of it waiting? */
static int busy_about(const struct agent *a, pid_t pid)
{
    for (size_t i = 0; pid > 0 && i < a->noom; i++)
        if (a->oomq[i].pid == pid)
            return 1;
    return worker_about(a, pid);
}

static size_t count_workers(const struct agent *a, int oom)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nworkers; i++)
        n += a->workers[i].oom == oom;
    return n;
}

/* Starts what can start: OOM kills first (their own slots), then waiting requests, each uid at
 * most AGENT_WORKERS_PER_UID at once, never two captures of one process at once. */
static void dispatch(struct agent *a)
{
    for (size_t q = 0; q < a->noom && count_workers(a, 1) < AGENT_OOM_WORKERS;) {
        if (worker_about(a, a->oomq[q].pid))
            q++;
        else
            start_oom_worker(a, q); /* removes it from the queue */
    }
    for (size_t i = 0; i < a->nconns;) {
        struct agent_conn *c = &a->conns[i];
        if (!c->req || c->u->workers >= AGENT_WORKERS_PER_UID ||
            count_workers(a, 0) >= AGENT_WORKERS) {
            i++;
            continue;
        }
        /* a SIGKILL reported by run may be an OOM kill whose line is waiting: read it first, so
         * that the kill's own bundle is the one (deduplicated) */
        if (c->about && a->kfd >= 0)
            agent_kmsg_drain(a);
        if (c->about && busy_about(a, c->about)) {
            i++;
            continue;
        }
        start_worker(a, i); /* removes connection i */
    }
}

/* ---- the loop ---- */

/* poll()'s set: the socket, the kernel log, connections still reading, workers; and how long
 * to wait (the nearest deadline). */
static size_t poll_set(struct agent *a, struct pollfd *pf, size_t *conn_at, size_t *work_at,
                       int *timeout)
{
    size_t n = 0;
    pf[n++] = (struct pollfd){a->lfd, POLLIN, 0};
    pf[n++] = (struct pollfd){a->kfd, POLLIN, 0};
    double now = agent_now(), next = now + 3600;
    *conn_at = n;
    for (size_t i = 0; i < a->nconns; i++) {
        pf[n++] = (struct pollfd){a->conns[i].req ? -1 : a->conns[i].fd, POLLIN, 0};
        if (a->conns[i].deadline < next)
            next = a->conns[i].deadline;
    }
    *work_at = n;
    for (size_t i = 0; i < a->nworkers; i++) {
        pf[n++] = (struct pollfd){a->workers[i].pidfd, POLLIN, 0};
        if (a->workers[i].deadline < next)
            next = a->workers[i].deadline;
    }
    double wait = next - now;
    *timeout = wait <= 0 ? 0 : wait > 3600 ? 3600000 : (int)(wait * 1000) + 1;
    if (a->noom && count_workers(a, 1) < AGENT_OOM_WORKERS)
        *timeout = 0;
    return n;
}

static void serve(struct agent *a)
{
    struct pollfd pf[2 + AGENT_CONN_MAX + AGENT_WORKERS + AGENT_OOM_WORKERS];
    while (!stop_sig) {
        size_t conn_at, work_at;
        int timeout;
        size_t n = poll_set(a, pf, &conn_at, &work_at, &timeout);
        if (poll(pf, n, timeout) < 0 && errno != EINTR)
            break;
        if (a->kfd >= 0 && (pf[1].revents & POLLIN))
            agent_kmsg_drain(a);
        reap_workers(a);
        /* readable connections, last first: serving one may move the last into its place */
        size_t nc = work_at - conn_at;
        for (size_t i = nc; i-- > 0;)
            if (i < a->nconns && (pf[conn_at + i].revents & (POLLIN | POLLHUP | POLLERR)) &&
                !a->conns[i].req && a->conns[i].fd == pf[conn_at + i].fd)
                serve_conn(a, i);
        if (pf[0].revents & POLLIN)
            accept_conns(a);
        expire_conns(a);
        dispatch(a);
    }
}

int agent_run(const struct agent_opts *o)
{
    struct agent *A = calloc(1, sizeof(*A));
    if (!A) {
        fprintf(o->log, "crashpack agent: out of memory\n");
        return -1;
    }
    A->lfd = A->kfd = -1;
    A->config = o->config;
    A->state = o->state;
    A->log = o->log;
    A->db_query = o->db_query;
    int rc = -1;
    char err[600];
    if (geteuid() != 0) {
        fprintf(A->log, "crashpack agent: run as root: it captures other users' processes\n");
        goto out;
    }
    cp_config_defaults(&A->cfg);
    if (cp_config_load(&A->cfg, A->config ? A->config : CP_DEFAULT_CONFIG, A->config != NULL, err,
                       sizeof(err))) {
        fprintf(A->log, "crashpack agent: %s\n", err);
        goto out;
    }
    snprintf(A->sock, sizeof(A->sock), "%s", o->socket ? o->socket : A->cfg.agent_socket);
    A->state = A->state ? A->state : A->cfg.state_dir;
    A->db = o->db ? o->db : A->cfg.knowledge_base;
    if (listen_on(A, err, sizeof(err))) {
        fprintf(A->log, "crashpack agent: %s\n", err);
        goto out;
    }
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* a descriptor per connection, registration and worker */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    A->kfd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (A->kfd >= 0)
        lseek(A->kfd, 0, SEEK_END); /* what happens from now on */
    else
        agent_log(A, "cannot read /dev/kmsg (%s): no OOM-kill capture", strerror(errno));
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    agent_log(A, "pid %d listening on %s%s", (int)getpid(), A->sock,
              A->kfd >= 0 ? ", following /dev/kmsg" : "");
    serve(A);
    unlink(A->sock);
    agent_log(A, "stopped (signal %d): %lu requests, %lu captures, %lu refused", (int)stop_sig,
              A->served, A->captured, A->refused);
    rc = 0;
out:
    while (A->nconns)
        conn_close(A, A->nconns - 1);
    for (size_t i = 0; i < A->noom; i++)
        free(A->oomq[i].oom_json);
    agent_regs_close(A);
    if (A->lfd >= 0)
        close(A->lfd);
    if (A->kfd >= 0)
        close(A->kfd);
    free(A);
    return rc;
}
