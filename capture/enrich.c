/* enrich.c - the finisher's enrichment step: `crashpack enrich` on the temporary bundle, on the
 * crashed host with its binaries, its output stored as the stacks.json member (docs/enrich.md).
 *
 * The handler stays tiny: it only fork/execs the command. Before the drain, while the process
 * still exists, enrich_open_root() opens /proc/<pid>/root with O_PATH (binaries are looked up
 * through it, so a container's files resolve after the container is gone). In the finisher,
 * after the core and before capture.json, enrich_finish() forks a child that
 *   - holds 0 /dev/null, 1 a pipe (stdout: stacks.json), 2 a pipe (stderr: the reason on
 *     failure), 3 the temporary bundle re-opened read-only (it lives in a root-only 0711
 *     directory: it is handed over as a descriptor, never re-opened by path as the user), 4 the
 *     root descriptor, nothing else;
 *   - becomes the crashed uid/gid, or for a root or secure (setuid, not dumpable) crash an
 *     unprivileged system user (`crashpack`, else `nobody`): the analysis never parses as uid 0;
 *     no capabilities, no_new_privs, RLIMIT_CORE 1 (no core_pattern recursion) and RLIMIT_CPU;
 *     with the root descriptor, the analysis child seals itself (seccomp: no open by path) and
 *     opens the core's module files only inside it (openat2 RESOLVE_IN_ROOT; modules.h);
 *   - runs in its own process group and execs `crashpack enrich --bundle-fd 3 --root-fd 4
 *     --out - --timeout T --memory M` with an empty environment.
 * The finisher reads at most enrich_max bytes under the deadline, kills the process group when
 * it is over (through a short-lived child that becomes the same uid: the finisher itself keeps
 * no CAP_KILL) and adds the member only when the output is one complete JSON object of format
 * crashpack-stacks/1. Whatever happens, capture.json gets an `enrich` step {status ok|timeout|
 * failed|off|skipped, reason, ms, bytes, uid} and the bundle is completed.
 */
#include "capture.h"
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

static void __attribute__((noreturn))
child(struct cap *c, const char *prog, int out, int err, int bfd, uid_t uid, gid_t gid,
      unsigned timeout)
{
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int hi_out = fcntl(out, F_DUPFD_CLOEXEC, 10), hi_err = fcntl(err, F_DUPFD_CLOEXEC, 10);
    int hi_b = fcntl(bfd, F_DUPFD_CLOEXEC, 10);
    int hi_r = c->rootfd >= 0 ? fcntl(c->rootfd, F_DUPFD_CLOEXEC, 10) : -1;
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (hi_out < 0 || hi_err < 0 || hi_b < 0 || nul < 0)
        _exit(126);
    if (dup2(nul, 0) < 0 || dup2(hi_out, 1) < 0 || dup2(hi_err, 2) < 0 || dup2(hi_b, 3) < 0 ||
        (hi_r >= 0 && dup2(hi_r, 4) < 0))
        _exit(126);
    close_range(hi_r >= 0 ? 5 : 4, ~0u, 0);
    if (privs_become(c, uid, gid))
        _exit(125);
    struct rlimit core1 = {1, 1}, cpu = {timeout + GRACE_S, timeout + GRACE_S};
    setrlimit(RLIMIT_CORE, &core1);
    setrlimit(RLIMIT_CPU, &cpu);
    alarm(timeout + 2 * GRACE_S); /* survives the exec, even if the finisher is gone */
    char tbuf[24], mbuf[32];
    snprintf(tbuf, sizeof(tbuf), "%u", timeout);
    snprintf(mbuf, sizeof(mbuf), "%llu", (unsigned long long)c->cfg.enrich_memory);
    char *argv[16];
    int a = 0;
    argv[a++] = "crashpack";
    argv[a++] = "enrich";
    argv[a++] = "--bundle-fd";
    argv[a++] = "3";
    if (hi_r >= 0) {
        argv[a++] = "--root-fd";
        argv[a++] = "4";
    }
    argv[a++] = "--out";
    argv[a++] = "-";
    argv[a++] = "--timeout";
    argv[a++] = tbuf;
    argv[a++] = "--memory";
    argv[a++] = mbuf;
    argv[a] = NULL;
    char *envp[] = {NULL};
    execve(prog, argv, envp);
    _exit(127);
}

/* The unprivileged system user the analysis of a root or secure crash runs as: `crashpack` when
 * /etc/passwd has one, else `nobody`, else 65534. Read with fgetpwent, not through NSS (no module
 * loading or directory service in the handler). Its only ways to the files are the descriptors it
 * is given (the bundle; the root, inside which modules open with RESOLVE_IN_ROOT). */
static void sandbox_user(uid_t *uid, gid_t *gid)
{
    int fd = open("/etc/passwd", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    int best = 0; /* 2: crashpack, 1: nobody */
    *uid = *gid = 65534;
    if (!f && fd >= 0)
        close(fd);
    struct passwd *pw;
    while (f && best < 2 && (pw = fgetpwent(f))) {
        int rank = !strcmp(pw->pw_name, "crashpack") ? 2 : !strcmp(pw->pw_name, "nobody") ? 1 : 0;
        if (rank > best && pw->pw_uid != 0 && pw->pw_gid != 0) {
            best = rank;
            *uid = pw->pw_uid;
            *gid = pw->pw_gid;
        }
    }
    if (f)
        fclose(f);
}

/* SIGKILL to the process group, sent as its uid (the finisher has no CAP_KILL). */
static void kill_group(const struct cap *c, pid_t pgid, uid_t uid, gid_t gid)
{
    if (kill(-pgid, SIGKILL) == 0 || errno != EPERM)
        return;
    pid_t k = fork();
    if (k == 0) {
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
};

/* Reads stdout (up to enrich_max) and stderr (the first ERR_MAX bytes) until both close or the
 * deadline passes. */
static void collect(struct cap *c, struct run *r, int out, int err, double deadline)
{
    int fds[2] = {out, err};
    while (fds[0] >= 0 || fds[1] >= 0) {
        double left = deadline - now_mono();
        if (left <= 0) {
            r->timed_out = 1;
            return;
        }
        struct pollfd pf[2];
        int n = 0;
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                pf[n++] = (struct pollfd){fds[i], POLLIN, 0};
        int k = poll(pf, (nfds_t)n, (int)(left * 1000) + 1);
        if (k < 0 && errno != EINTR)
            return;
        for (int i = 0; k > 0 && i < n; i++) {
            if (!pf[i].revents)
                continue;
            int is_out = pf[i].fd == out;
            char tmp[65536];
            char *dst = tmp;
            size_t room = sizeof(tmp);
            if (is_out) {
                if (r->len == r->cap) {
                    if (r->cap >= c->cfg.enrich_max) {
                        r->capped = 1;
                        return;
                    }
                    size_t nc = r->cap ? r->cap * 2 : 1 << 20;
                    if (nc > c->cfg.enrich_max)
                        nc = (size_t)c->cfg.enrich_max;
                    char *nb = realloc(r->buf, nc + 1);
                    if (!nb)
                        return;
                    r->buf = nb;
                    r->cap = nc;
                }
                dst = r->buf + r->len;
                room = r->cap - r->len;
            }
            ssize_t got = read(pf[i].fd, dst, room);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                fds[is_out ? 0 : 1] = -1;
                continue;
            }
            if (is_out) {
                r->len += (size_t)got;
            } else if (r->errlen < sizeof(r->err) - 1) {
                size_t take = (size_t)got < sizeof(r->err) - 1 - r->errlen
                                  ? (size_t)got : sizeof(r->err) - 1 - r->errlen;
                memcpy(r->err + r->errlen, tmp, take);
                r->errlen += take;
            }
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

/* The command's output as a crashpack-stacks/1 object, or NULL with why set (the output is
 * incomplete, it was killed, it failed). */
static cJSON *parse_stacks(const struct cap *c, struct run *r, int ws, unsigned timeout, char *why,
                           size_t n)
{
    char errline[300] = "";
    last_line(r->err, r->errlen, errline, sizeof(errline));
    if (r->buf && !r->timed_out && !r->capped && ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) <= 1) {
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
    if (r->timed_out) {
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

/* Forks the child on a read-only descriptor of the bundle, re-opened as root (the owner) before
 * anything becomes the crashed uid. Returns its pid, with its stdout and stderr on *out and
 * *err; or -1 once the failed step is recorded. */
static pid_t start_enrich(struct cap *c, const struct job *jb, double t, int *out, int *err)
{
    char why[600] = "";
    int pout[2] = {-1, -1}, perr[2] = {-1, -1};
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", c->outfd);
    int bfd = open(self, O_RDONLY | O_CLOEXEC);
    pid_t p = -1;
    if (bfd < 0 || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) {
        snprintf(why, sizeof(why), "%s: %s", bfd < 0 ? "re-opening the bundle" : "pipe",
                 strerror(errno));
        step(c, "failed", t, 0, -1, why);
    } else if ((p = fork()) == 0) {
        child(c, jb->prog, pout[1], perr[1], bfd, jb->uid, jb->gid, jb->timeout);
    } else if (p < 0) {
        snprintf(why, sizeof(why), "fork: %s", strerror(errno));
        step(c, "failed", t, 0, -1, why);
    } else {
        setpgid(p, p); /* as the child does: no window where a kill misses it */
        *out = pout[0];
        *err = perr[0];
        pout[0] = perr[0] = -1;
    }
    for (int i = 0; i < 2; i++) {
        if (pout[i] >= 0)
            close(pout[i]);
        if (perr[i] >= 0)
            close(perr[i]);
    }
    if (bfd >= 0)
        close(bfd);
    return p;
}

/* Runs the child, reads its output under the deadline, kills its group when it is over (or
 * still running with its output closed), and records the step. */
static void run_enrich(struct cap *c, const struct job *jb, double t)
{
    int out = -1, err = -1;
    pid_t p = start_enrich(c, jb, t, &out, &err);
    if (p < 0)
        return;
    struct run r;
    memset(&r, 0, sizeof(r));
    collect(c, &r, out, err, t + jb->timeout + GRACE_S);
    if (r.timed_out || r.capped)
        kill_group(c, p, jb->uid, jb->gid);
    int ws = reap_child(p, 0);
    if (ws < 0 && !r.timed_out && !r.capped) { /* still running with its output closed */
        kill_group(c, p, jb->uid, jb->gid);
        ws = reap_child(p, 0);
    }
    record(c, jb, &r, ws, t);
    free(r.buf);
    close(out);
    close(err);
}

void enrich_finish(struct cap *c)
{
    double t = now_mono();
    struct job jb = {.uid = c->uid, .gid = c->gid};
    if (c->secure || c->uid == 0)
        sandbox_user(&jb.uid, &jb.gid); /* never parse as uid 0, nor as a setuid program's owner */
    const char *e;
    unsigned left;
    if (!wanted(c)) {
        step(c, "off", t, 0, -1, "enrich = off");
    } else if (!has_core(c)) {
        step(c, "skipped", t, 0, -1, "no core in this bundle");
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
