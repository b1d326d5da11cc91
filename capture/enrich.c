/* enrich.c - the finisher's enrichment step: `crashpack enrich` on the temporary bundle, on the
 * crashed host with its binaries, its output stored as the stacks.json member (docs/enrich.md).
 *
 * The handler stays tiny: it only fork/execs the command. Before the drain, while the process
 * still exists, enrich_open_root() opens /proc/<pid>/root with O_PATH (binaries are looked up
 * through it, so a container's files resolve after the container is gone). In the finisher,
 * after the core and before capture.json, enrich_finish() forks a child that
 *   - holds 0 /dev/null, 1 a pipe (stdout: stacks.json), 2 a pipe (stderr: the reason on
 *     failure), 3 one end of a socketpair, nothing else: never the bundle or the root, because
 *     the new image is dumpable until its main() says otherwise, and any process of its uid may
 *     take a dumpable process's descriptors (pidfd_getfd);
 *   - becomes the crashed uid/gid, or for a root or secure (setuid, not dumpable) crash the
 *     system user `crashpack` that `crashpack install` creates (none: no enrichment; never a
 *     shared user like nobody, whose every process could be the attacker): the analysis never
 *     parses as uid 0; no capabilities, no_new_privs, RLIMIT_CORE 1 (no core_pattern recursion)
 *     and RLIMIT_CPU; with the root descriptor, the analysis child seals itself (seccomp: no
 *     open by path, no pidfd_getfd) and opens the core's module files only inside it (openat2
 *     RESOLVE_IN_ROOT; modules.h);
 *   - runs in its own process group and execs `crashpack enrich --socket-fd 3 --out - --timeout
 *     T --memory M` with an empty environment.
 * The handshake (docs/capture.md, "Descriptors and the enrichment"): the enricher, once it is
 * not dumpable, makes a fresh socketpair and sends one end over fd 3; the finisher takes it only
 * from the pid it forked (SCM_CREDENTIALS: the kernel's word, which a process that took a copy
 * of fd 3 cannot forge), as the one message there, and sends the bundle (re-opened read-only)
 * and root descriptors over that end, which only the enricher holds. Anything else fails closed.
 * The finisher reads at most enrich_max bytes under the deadline, kills the process group when
 * it is over (through a short-lived child that becomes the same uid: the finisher itself keeps
 * no CAP_KILL) and adds the member only when the output is one complete JSON object of format
 * crashpack-stacks/1. Whatever happens, capture.json gets an `enrich` step {status ok|timeout|
 * failed|off|skipped, reason, ms, bytes, uid} and the bundle is completed.
 */
#include "capture.h"
#include "fdpass.h"
#include "privs.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STACKS_FORMAT "crashpack-stacks/1"
#define ERR_MAX 1024u  /* stderr bytes kept for the reason */
#define GRACE_S 5u     /* after --timeout: start-up, writing the output */
#define MARGIN_S 10u   /* left to the finisher after this step (capture.json, fsync, rename) */

static int wanted(const struct cap *c)
{
    return strcmp(c->cfg.enrich, "off") != 0;
}

void enrich_open_root(struct cap *c)
{
    c->rootfd = -1;
    if (!wanted(c) || c->mode == CP_MODE_META || c->procfd < 0)
        return;
    /* the magic link, followed as root while the process exists: its mount namespace's root */
    c->rootfd = openat(c->procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void __attribute__((noreturn)) child(struct cap *c, const char *prog, int out, int err,
                                            int sock, uid_t uid, gid_t gid, unsigned timeout)
{
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int hi_out = fcntl(out, F_DUPFD_CLOEXEC, 10), hi_err = fcntl(err, F_DUPFD_CLOEXEC, 10);
    int hi_s = fcntl(sock, F_DUPFD_CLOEXEC, 10);
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (hi_out < 0 || hi_err < 0 || hi_s < 0 || nul < 0)
        _exit(126);
    if (dup2(nul, 0) < 0 || dup2(hi_out, 1) < 0 || dup2(hi_err, 2) < 0 || dup2(hi_s, 3) < 0)
        _exit(126);
    close_range(4, ~0u, 0); /* the bundle and the root among them: they come over the socket */
    if (privs_become(c, uid, gid))
        _exit(125);
    struct rlimit core1 = {1, 1}, cpu = {timeout + GRACE_S, timeout + GRACE_S};
    setrlimit(RLIMIT_CORE, &core1);
    setrlimit(RLIMIT_CPU, &cpu);
    alarm(timeout + 2 * GRACE_S); /* survives the exec, even if the finisher is gone */
    char tbuf[24], mbuf[32];
    snprintf(tbuf, sizeof(tbuf), "%u", timeout);
    snprintf(mbuf, sizeof(mbuf), "%llu", (unsigned long long)c->cfg.enrich_memory);
    char *argv[] = {"crashpack", "enrich", "--socket-fd", "3",  "--out", "-",
                    "--timeout", tbuf,     "--memory",    mbuf, NULL};
    char *envp[] = {NULL};
    execve(prog, argv, envp);
    _exit(127);
}

/* The system user the analysis of a root or secure crash runs as: `crashpack`, which `crashpack
 * install` creates for it alone. Read from /etc/passwd with fgetpwent, not through NSS (no module
 * loading or directory service in the handler). -1 when there is none (or it is uid or gid 0,
 * or the overflow uid 65534, nobody's): never a user whose other processes could be anyone's.
 * Its only ways to the files are the descriptors it is sent (the bundle; the root, inside which
 * modules open with RESOLVE_IN_ROOT). */
static int crashpack_user(uid_t *uid, gid_t *gid)
{
    int fd = open("/etc/passwd", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    int found = 0;
    if (!f && fd >= 0)
        close(fd);
    struct passwd *pw;
    while (f && !found && (pw = fgetpwent(f))) {
        if (strcmp(pw->pw_name, "crashpack"))
            continue;
        found = pw->pw_uid != 0 && pw->pw_gid != 0 && pw->pw_uid != 65534 ? 1 : -1;
        *uid = pw->pw_uid;
        *gid = pw->pw_gid;
    }
    if (f)
        fclose(f);
    return found == 1 ? 0 : -1;
}

/* SIGKILL to the process group, sent as its uid (the finisher has no CAP_KILL). */
static void kill_group(const struct cap *c, pid_t pgid, uid_t uid, gid_t gid)
{
    if (kill(-pgid, SIGKILL) == 0 || errno != EPERM)
        return;
    pid_t k = fork();
    if (k == 0) {
        close_range(3, ~0u, 0); /* it needs none of the finisher's descriptors */
        if (privs_become(c, uid, gid) == 0)
            kill(-pgid, SIGKILL);
        _exit(0);
    }
    if (k > 0)
        while (waitpid(k, NULL, 0) < 0 && errno == EINTR)
            ;
}

static int has_core(const struct cap *c)
{
    for (size_t i = 0; i < c->bw.nmembers; i++)
        if (!strcmp(c->bw.members[i].name, "core"))
            return 1;
    return 0;
}

/* The command: next to crashpack-capture (auto), or the configured path. */
static const char *find_prog(const struct cap *c, char *prog, size_t n)
{
    if (strcmp(c->cfg.enrich, "auto")) {
        snprintf(prog, n, "%s", c->cfg.enrich);
    } else {
        ssize_t l = readlink("/proc/self/exe", prog, n - 32);
        char *slash = l > 0 ? memrchr(prog, '/', (size_t)l) : NULL;
        if (!slash)
            return "cannot locate the crashpack command (readlink /proc/self/exe)";
        strcpy(slash + 1, "crashpack");
    }
    struct stat st;
    if (stat(prog, &st) || !S_ISREG(st.st_mode))
        return strcmp(c->cfg.enrich, "auto") ? "the configured enrich command is not a file"
                                              : "the crashpack command is not next to "
                                                "crashpack-capture";
    return NULL;
}

/* Keeps the last line of the command's stderr as the reason (controls turned into spaces). */
static void last_line(const char *e, size_t n, char *out, size_t outlen)
{
    while (n && (e[n - 1] == '\n' || e[n - 1] == ' '))
        n--;
    size_t s = n;
    while (s && e[s - 1] != '\n')
        s--;
    size_t len = n - s < outlen - 1 ? n - s : outlen - 1;
    for (size_t i = 0; i < len; i++)
        out[i] = (unsigned char)e[s + i] < 0x20 || e[s + i] == 0x7f ? ' ' : e[s + i];
    out[len] = 0;
}

struct run {
    char *buf;
    size_t len, cap;
    char err[ERR_MAX];
    size_t errlen;
    int capped, timed_out;
    /* the handshake */
    pid_t pid;         /* the child forked: the only sender accepted */
    uid_t uid;         /* the uid it became */
    int hs;            /* the finisher's end of the first socket, -1 once closed */
    int bfd, rootfd;   /* what goes to the enricher (bfd is closed once sent) */
    int sent;          /* the descriptors went to the enricher */
    char refused[300]; /* why the handshake failed ("": it did not) */
    int no_hello;      /* ... the socket closed without a hello (the exit status says more) */
};

/* What is wrong with the enricher's hello, or NULL: one message, the hello's text, from the
 * pid forked and the uid it became (SCM_CREDENTIALS), with exactly one descriptor, a Unix
 * seqpacket socket of a socketpair that pid made (SO_PEERCRED). */
static const char *hello_problem(const struct run *r, const struct cp_fd_msg *m, char *why,
                                 size_t n)
{
    if (m->truncated || strcmp(m->text, CP_ENRICH_HELLO))
        return "the first message is not the enricher's hello";
    if (!m->creds)
        return "the hello came without the sender's credentials";
    if (m->pid != r->pid || m->uid != r->uid) {
        snprintf(why, n,
                 "the hello came from pid %ld uid %lu, not from the enricher (pid %ld uid %lu)",
                 (long)m->pid, (unsigned long)m->uid, (long)r->pid, (unsigned long)r->uid);
        return why;
    }
    int type = 0, domain = 0;
    struct ucred peer = {0, 0, 0};
    socklen_t tl = sizeof(type), dl = sizeof(domain), pl = sizeof(peer);
    if (m->nfds != 1 || getsockopt(m->fds[0], SOL_SOCKET, SO_TYPE, &type, &tl) ||
        getsockopt(m->fds[0], SOL_SOCKET, SO_DOMAIN, &domain, &dl) || type != SOCK_SEQPACKET ||
        domain != AF_UNIX)
        return "the hello does not carry one Unix seqpacket socket";
    if (getsockopt(m->fds[0], SOL_SOCKET, SO_PEERCRED, &peer, &pl) || peer.pid != r->pid)
        return "the socket the hello carries is not the enricher's own socketpair";
    return NULL;
}

/* The finisher's side of the handshake, once the first socket is readable: the hello checked,
 * then the bundle (and root) descriptors sent over the socketpair it carried. Returns 1 sent,
 * 0 nothing to read yet, -1 refused (r->refused says why; nothing was sent). */
static int handshake(struct run *r)
{
    struct cp_fd_msg m;
    int got = cp_fd_recv(r->hs, &m);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    char buf[200];
    r->no_hello = got == 0;
    const char *why = got < 0    ? "cannot read the socket"
                      : got == 0 ? "crashpack enrich ended or closed its socket before the hello"
                                 : hello_problem(r, &m, buf, sizeof(buf));
    char peek;
    if (!why && recv(r->hs, &peek, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
        why = "more than one message on the socket"; /* someone else holds a copy of it */
    int fds[2] = {r->bfd, r->rootfd};
    if (!why && cp_fd_send(m.fds[0], r->rootfd >= 0 ? CP_ENRICH_FDS_ROOT : CP_ENRICH_FDS, fds,
                           r->rootfd >= 0 ? 2 : 1))
        why = "cannot send the descriptors";
    cp_fd_msg_close(&m); /* the socketpair's end too: only the enricher keeps one */
    close(r->hs);
    close(r->bfd);
    r->hs = r->bfd = -1;
    if (why) {
        snprintf(r->refused, sizeof(r->refused), "%s", why);
        return -1;
    }
    r->sent = 1;
    return 1;
}

/* Reads what fd has: stdout (up to enrich_max) or stderr (the first ERR_MAX bytes). Returns 0
 * to go on, 1 at its end, -1 to stop (over enrich_max, out of memory). */
static int take(const struct cap *c, struct run *r, int fd, int is_out)
{
    char tmp[65536];
    char *dst = tmp;
    size_t room = sizeof(tmp);
    if (is_out) {
        if (r->len == r->cap) {
            if (r->cap >= c->cfg.enrich_max) {
                r->capped = 1;
                return -1;
            }
            size_t nc = r->cap ? r->cap * 2 : 1 << 20;
            if (nc > c->cfg.enrich_max)
                nc = (size_t)c->cfg.enrich_max;
            char *nb = realloc(r->buf, nc + 1);
            if (!nb)
                return -1;
            r->buf = nb;
            r->cap = nc;
        }
        dst = r->buf + r->len;
        room = r->cap - r->len;
    }
    ssize_t got = read(fd, dst, room);
    if (got < 0 && errno == EINTR)
        return 0;
    if (got <= 0)
        return 1;
    if (is_out) {
        r->len += (size_t)got;
    } else if (r->errlen < sizeof(r->err) - 1) {
        size_t take = (size_t)got < sizeof(r->err) - 1 - r->errlen ? (size_t)got
                                                                   : sizeof(r->err) - 1 - r->errlen;
        memcpy(r->err + r->errlen, tmp, take);
        r->errlen += take;
    }
    return 0;
}

/* Answers the handshake and reads stdout and stderr until all three are done (the socket once
 * the descriptors are sent, the pipes at their end) or the deadline passes; stops at a refused
 * handshake or an output over enrich_max. */
static void collect(struct cap *c, struct run *r, int out, int err, double deadline)
{
    int fds[3] = {out, err, r->hs};
    while (fds[0] >= 0 || fds[1] >= 0 || fds[2] >= 0) {
        double left = deadline - now_mono();
        if (left <= 0) {
            r->timed_out = 1;
            return;
        }
        struct pollfd pf[3];
        int n = 0;
        for (int i = 0; i < 3; i++)
            if (fds[i] >= 0)
                pf[n++] = (struct pollfd){fds[i], POLLIN, 0};
        int k = poll(pf, (nfds_t)n, (int)(left * 1000) + 1);
        if (k < 0 && errno != EINTR)
            return;
        for (int i = 0; k > 0 && i < n; i++) {
            if (!pf[i].revents)
                continue;
            int which = pf[i].fd == out ? 0 : pf[i].fd == err ? 1 : 2;
            int rc = which == 2 ? handshake(r) : take(c, r, pf[i].fd, which == 0);
            if (rc < 0)
                return;
            if (rc > 0)
                fds[which] = -1;
        }
    }
}

static void step(struct cap *c, const char *status, double t, size_t bytes, long uid,
                 const char *reason)
{
    cap_step(c, "enrich", status, t, "%s", reason);
    cJSON *o = cJSON_GetArrayItem(c->steps, cJSON_GetArraySize(c->steps) - 1);
    if (o) {
        cJSON_AddNumberToObject(o, "bytes", (double)bytes);
        if (uid >= 0)
            cJSON_AddNumberToObject(o, "uid", (double)uid);
        else
            cJSON_AddNullToObject(o, "uid");
    }
}

/* What the enrichment runs as and for how long. */
struct job {
    char prog[PATH_MAX]; /* the command */
    uid_t uid;           /* the crashed uid, or the sandbox user */
    gid_t gid;
    unsigned timeout; /* crashpack enrich --timeout */
};

/* The analysis's time limit: enrich_timeout, shortened so that the finisher, which dies at its
 * alarm (finisher_deadline), keeps time to publish. 0 when too little is left (*left: the
 * alarm's seconds, 0 when none is set). */
static unsigned time_limit(const struct cap *c, unsigned *left)
{
    *left = alarm(0);
    alarm(*left);
    unsigned timeout = c->cfg.enrich_timeout_s;
    if (*left && *left < timeout + GRACE_S + MARGIN_S)
        timeout = *left > 2 * GRACE_S + MARGIN_S ? *left - GRACE_S - MARGIN_S : 0;
    return timeout;
}

/* The command's output as a crashpack-stacks/1 object, or NULL with why set (the handshake failed,
 * the output is incomplete, it was killed, it failed). Output counts only once the descriptors
 * went to the enricher. */
static cJSON *parse_stacks(const struct cap *c, struct run *r, int ws, unsigned timeout, char *why,
                           size_t n)
{
    char errline[300] = "";
    last_line(r->err, r->errlen, errline, sizeof(errline));
    if (r->sent && r->buf && !r->timed_out && !r->capped && ws >= 0 && WIFEXITED(ws) &&
        WEXITSTATUS(ws) <= 1) {
        r->buf[r->len] = 0;
        cJSON *j = cJSON_ParseWithLength(r->buf, r->len);
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
        if (!cJSON_IsObject(j) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, STACKS_FORMAT)) {
            cJSON_Delete(j);
            snprintf(why, n, "the output is not a complete %s object", STACKS_FORMAT);
            return NULL;
        }
        return j;
    }
    if (r->refused[0] && !r->no_hello) {
        snprintf(why, n, "handshake refused, not enriched: %s", r->refused);
    } else if (r->timed_out && !r->sent) {
        snprintf(why, n, "no handshake from crashpack enrich within %u s: killed",
                 timeout + GRACE_S);
    } else if (r->timed_out) {
        snprintf(why, n, "crashpack enrich took over %u s: killed", timeout + GRACE_S);
    } else if (r->capped) {
        snprintf(why, n, "the output is over enrich_max (%llu bytes): killed",
                 (unsigned long long)c->cfg.enrich_max);
    } else if (ws >= 0 && WIFSIGNALED(ws)) {
        snprintf(why, n, "crashpack enrich was killed by signal %d%s%s", WTERMSIG(ws),
                 errline[0] ? ": " : "", errline);
    } else if (ws >= 0 && WIFEXITED(ws)) {
        int code = WEXITSTATUS(ws);
        snprintf(why, n, "crashpack enrich exited %d%s%s%s", code,
                 code == 127   ? " (exec failed)"
                 : code == 126 ? " (no descriptors)"
                 : code == 125 ? " (cannot become the crashed uid)"
                               : "",
                 errline[0] ? ": " : "", errline);
    } else {
        snprintf(why, n, "crashpack enrich did not exit (wait status unknown)");
    }
    if (!r->sent && (r->no_hello || (!r->refused[0] && !r->timed_out)) && strlen(why) + 20 < n)
        strcat(why, " (no handshake)");
    return NULL;
}

/* The step's outcome from what the command gave: stacks.json added, or why not. */
static void record(struct cap *c, const struct job *jb, struct run *r, int ws, double t)
{
    char why[600] = "";
    cJSON *j = parse_stacks(c, r, ws, jb->timeout, why, sizeof(why));
    if (!j) {
        step(c, r->timed_out ? "timeout" : "failed", t, r->len, (long)jb->uid, why);
        return;
    }
    const cJSON *nat = cJSON_GetObjectItemCaseSensitive(j, "native");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(nat, "error");
    snprintf(why, sizeof(why), "%d threads%s%s, binaries through %s",
             cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(nat, "threads")),
             cJSON_IsString(err) ? "; partial: " : "", cJSON_IsString(err) ? err->valuestring : "",
             c->rootfd >= 0 ? "the crashed process's root" : "the host's paths");
    cJSON_Delete(j);
    if (bw_add(&c->bw, "stacks.json", r->buf, r->len)) {
        snprintf(why, sizeof(why), "write: %s", strerror(c->bw.err));
        step(c, "failed", t, r->len, (long)jb->uid, why);
    } else {
        step(c, "ok", t, r->len, (long)jb->uid, why);
    }
}

/* Forks the child with the first socket (the finisher's end has SO_PASSCRED: the hello comes
 * with its sender's credentials) after re-opening the bundle read-only as root (the owner), for
 * the handshake to send. Returns its pid, with its stdout, stderr and the socket on *out, *err and
 * r->hs; or -1 once the failed step is recorded. */
static pid_t start_enrich(struct cap *c, const struct job *jb, double t, struct run *r, int *out,
                          int *err)
{
    char why[600] = "";
    int pout[2] = {-1, -1}, perr[2] = {-1, -1}, sp[2] = {-1, -1}, one = 1;
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", c->outfd);
    r->bfd = open(self, O_RDONLY | O_CLOEXEC);
    pid_t p = -1;
    if (r->bfd < 0 || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC) ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) ||
        setsockopt(sp[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one))) {
        snprintf(why, sizeof(why), "%s: %s",
                 r->bfd < 0 ? "re-opening the bundle" : "pipe or socket", strerror(errno));
        step(c, "failed", t, 0, -1, why);
    } else if ((p = fork()) == 0) {
        child(c, jb->prog, pout[1], perr[1], sp[1], jb->uid, jb->gid, jb->timeout);
    } else if (p < 0) {
        snprintf(why, sizeof(why), "fork: %s", strerror(errno));
        step(c, "failed", t, 0, -1, why);
    } else {
        setpgid(p, p); /* as the child does: no window where a kill misses it */
        *out = pout[0];
        *err = perr[0];
        r->hs = sp[0];
        r->pid = p;
        pout[0] = perr[0] = sp[0] = -1;
    }
    for (int i = 0; i < 2; i++) {
        if (pout[i] >= 0)
            close(pout[i]);
        if (perr[i] >= 0)
            close(perr[i]);
        if (sp[i] >= 0)
            close(sp[i]);
    }
    return p;
}

/* Runs the child, answers its handshake, reads its output under the deadline, kills its group
 * when it is over (or refused, or still running with its output closed), and records the step. */
static void run_enrich(struct cap *c, const struct job *jb, double t)
{
    int out = -1, err = -1;
    struct run r;
    memset(&r, 0, sizeof(r));
    r.hs = r.bfd = -1;
    r.rootfd = c->rootfd;
    r.uid = jb->uid;
    pid_t p = start_enrich(c, jb, t, &r, &out, &err);
    int over = 0;
    if (p > 0) {
        collect(c, &r, out, err, t + jb->timeout + GRACE_S);
        over = r.timed_out || r.capped || r.refused[0];
        if (over)
            kill_group(c, p, jb->uid, jb->gid);
    }
    int ws = p > 0 ? reap_child(p, 0) : -1;
    if (p > 0 && ws < 0 && !over) { /* still running with its output closed */
        kill_group(c, p, jb->uid, jb->gid);
        ws = reap_child(p, 0);
    }
    if (p > 0)
        record(c, jb, &r, ws, t);
    free(r.buf);
    int fds[] = {out, err, r.hs, r.bfd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

void enrich_finish(struct cap *c)
{
    double t = now_mono();
    struct job jb = {.uid = c->uid, .gid = c->gid};
    /* never parse as uid 0, nor as a setuid program's owner: as the user crashpack */
    int sandboxed = c->secure || c->uid == 0;
    const char *e;
    unsigned left;
    if (!wanted(c)) {
        step(c, "off", t, 0, -1, "enrich = off");
    } else if (!has_core(c)) {
        step(c, "skipped", t, 0, -1, "no core in this bundle");
    } else if (sandboxed && crashpack_user(&jb.uid, &jb.gid)) {
        step(c, "skipped", t, 0, -1, "no crashpack user: run crashpack install");
    } else if (!(jb.timeout = time_limit(c, &left))) {
        char why[600];
        snprintf(why, sizeof(why), "only %u s left before finisher_deadline", left);
        step(c, "skipped", t, 0, -1, why);
    } else if ((e = find_prog(c, jb.prog, sizeof(jb.prog)))) {
        step(c, "failed", t, 0, -1, e);
    } else {
        run_enrich(c, &jb, t);
    }
    if (c->rootfd >= 0)
        close(c->rootfd);
    c->rootfd = -1;
}
