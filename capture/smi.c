/* smi.c - `nvidia-smi -q -x`, started before the drain and collected by the finisher.
 *
 * nvidia-smi is the one slow and possibly hanging collector: it can take seconds, and it hangs,
 * sometimes in uninterruptible sleep, when a GPU has fallen off the bus. So it runs concurrently
 * with the drain, lands after `core`, and is bounded in time and output.
 *
 * Process layout. The finisher is forked from the handler after the drain, so it is a sibling of
 * anything smi_start forks, never its parent: it cannot waitpid() nvidia-smi. smi_start therefore
 * forks a tiny supervisor (a copy of the handler that never execs) that forks and execs
 * nvidia-smi, reports its pid, reaps it and reports its wait status on a control pipe. The
 * finisher reads stdout, stderr and that pipe with poll() under the deadline; on expiry it
 * SIGKILLs nvidia-smi's process group (its own, so the supervisor survives to reap it and
 * report). A child stuck in uninterruptible sleep never blocks anybody: the supervisor waits on
 * it alone, and the finisher gives up after about a second.
 *
 * nvidia-smi runs with an empty environment, from an absolute host path, fd 0 on /dev/null (the
 * kernel waits for every reader of the core pipe), stdout and stderr on two separate pipes (the
 * XML member is stdout byte for byte; stderr only feeds stderr_tail), nothing else open, in its
 * own process group, with no_new_privs, and with the handler's RLIMIT_CORE of 1, which tells the
 * kernel not to run core_pattern again if it crashes. */
#include "capture.h"
#include "privs.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SMI_PIPE_SIZE (1 << 20) /* nvidia-smi -q -x prints ~20-60 KiB per GPU */
#define SMI_TAIL 4096           /* stderr/stdout tail kept in nvidia-smi.json */
#define SMI_REAP_WAIT_MS 1000   /* after SIGKILL: how long to wait for the supervisor's report */

/* Control-pipe records, one write() each (atomic: smaller than PIPE_BUF). */
enum { CTL_PID = 1, CTL_STATUS = 2, CTL_FORK_FAILED = 3 };
struct ctl_msg {
    int32_t kind, value;
};

static void ctl_send(int fd, int kind, int value)
{
    struct ctl_msg m = {kind, value};
    ssize_t r = write(fd, &m, sizeof(m));
    (void)r;
}

/* Runs in the forked supervisor: only async-signal-safe calls (the handler may have threads). */
static __attribute__((noreturn)) void supervise(const char *path, const char *gpu, int out_w,
                                                int err_w, int ctl_w, const char *exec_fail_msg,
                                                size_t exec_fail_len)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0) /* drops the core pipe: the kernel waits for its readers */
        _exit(126);
    close(null);
    if (dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        _exit(126);
    /* everything else the handler holds (bundle, its lock, /proc/<pid>, pidfd) goes */
    if (ctl_w > 3)
        close_range(3, (unsigned)ctl_w - 1, 0);
    close_range((unsigned)ctl_w + 1, ~0u, 0);
    if (chdir("/"))
        _exit(126);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL); /* ignored signals would survive exec */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); /* inherited by nvidia-smi */

    pid_t s = fork();
    if (s == 0) {
        close(ctl_w);
        setpgid(0, 0);
        char *argv[] = {(char *)path, "-q", "-x", gpu ? "-i" : NULL, (char *)gpu, NULL};
        char *envp[] = {NULL};
        execve(path, argv, envp);
        ssize_t r = write(2, exec_fail_msg, exec_fail_len);
        (void)r;
        _exit(127);
    }
    if (s < 0) {
        ctl_send(ctl_w, CTL_FORK_FAILED, errno);
        _exit(1);
    }
    setpgid(s, s); /* whichever of the two runs first: the group exists before we report it */
    ctl_send(ctl_w, CTL_PID, (int)s);
    /* the finisher sees EOF on stdout/stderr only when nvidia-smi's copies are the last */
    dup2(0, 1);
    dup2(0, 2);
    /* the supervisor needs no privilege to wait */
    privs_clear();
    int st;
    while (waitpid(s, &st, 0) < 0)
        if (errno != EINTR)
            _exit(1);
    ctl_send(ctl_w, CTL_STATUS, st);
    _exit(0);
}

/* Starts the supervisor of one `nvidia-smi -q -x [-i GPU]`: the read ends of its stdout, stderr
 * and control pipes, non-blocking. Returns 0, or -1 with the reason in why. */
static int spawn(struct cap *c, const char *path, const char *gpu, pid_t *pidp, int *fdp,
                 int *errp, int *ctlp, char *why, size_t whylen)
{
    int out[2], err[2], ctl[2];
    if (pipe2(out, O_CLOEXEC)) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(err, O_CLOEXEC)) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        close(out[0]), close(out[1]);
        return -1;
    }
    if (pipe2(ctl, O_CLOEXEC)) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return -1;
    }
    /* output waits in the pipe while the core drains; nvidia-smi should not block on it */
    fcntl(out[0], F_SETPIPE_SZ, SMI_PIPE_SIZE);
    char fail[CP_PATH_MAX + 64];
    int fl = snprintf(fail, sizeof(fail), "crashpack: cannot execute %s\n", path);
    size_t fail_len = fl < 0 ? 0 : (size_t)fl >= sizeof(fail) ? sizeof(fail) - 1 : (size_t)fl;

    pid_t p = fork();
    if (p == 0)
        supervise(path, gpu, out[1], err[1], ctl[1], fail, fail_len);
    int e = errno;
    close(out[1]), close(err[1]), close(ctl[1]);
    if (p < 0) {
        close(out[0]), close(err[0]), close(ctl[0]);
        snprintf(why, whylen, "fork: %s", strerror(e));
        return -1;
    }
    int rd[3] = {out[0], err[0], ctl[0]};
    for (int i = 0; i < 3; i++)
        fcntl(rd[i], F_SETFL, fcntl(rd[i], F_GETFL) | O_NONBLOCK);
    (void)c;
    *pidp = p; /* the supervisor; nvidia-smi's own pid arrives on ctl */
    *fdp = out[0];
    *errp = err[0];
    *ctlp = ctl[0];
    return 0;
}

/* A GPU fell off the bus: nvidia-smi hangs on it, so each other GPU is queried on its own
 * (`-i <pci>`), all at once; the lost ones are recorded as skipped. */
static void start_per_gpu(struct cap *c, const char *path)
{
    c->smi_njobs = 0;
    for (int i = 0; i < c->gpu_n && i < CP_SMI_GPUS; i++) {
        struct smi_job *j = &c->smi_jobs[c->smi_njobs++];
        memset(j, 0, sizeof(*j));
        j->pid = -1;
        j->fd = j->err = j->ctl = -1;
        snprintf(j->pci, sizeof(j->pci), "%s", c->gpu_pci[i]);
        int lost = 0;
        for (int k = 0; k < c->bus_lost_n; k++)
            if (!strcmp(c->bus_lost_pci[k], j->pci))
                lost = 1;
        if (lost) {
            snprintf(j->status, sizeof(j->status), "skipped");
            snprintf(j->reason, sizeof(j->reason),
                     "lost: fell off the bus %.0f s before the crash (nvidia-smi hangs on it)",
                     c->bus_lost_time > 0 && (double)c->crash_time > c->bus_lost_time
                         ? (double)c->crash_time - c->bus_lost_time
                         : 0);
            continue;
        }
        char why[200];
        if (spawn(c, path, j->pci, &j->pid, &j->fd, &j->err, &j->ctl, why, sizeof(why))) {
            snprintf(j->status, sizeof(j->status), "failed");
            snprintf(j->reason, sizeof(j->reason), "%s", why);
        }
    }
}

static void not_started(struct cap *c, const char *status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void not_started(struct cap *c, const char *status, const char *fmt, ...)
{
    snprintf(c->smi_status, sizeof(c->smi_status), "%s", status);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->smi_reason, sizeof(c->smi_reason), fmt, ap);
    va_end(ap);
}

void smi_start(struct cap *c)
{
    c->smi_pid = -1;
    c->smi_njobs = 0;
    c->smi_fd = c->smi_err = c->smi_ctl = -1;
    c->smi_status[0] = c->smi_reason[0] = 0;
    c->smi_started = now_mono();
    const char *path = c->cfg.nvidia_smi;
    if (!path[0]) {
        not_started(c, "skipped", "disabled (nvidia_smi is empty in the configuration)");
        return;
    }
    if (path[0] != '/') {
        not_started(c, "failed", "%s: not an absolute path", path);
        return;
    }
    if (c->cfg.nvidia_smi_timeout_s == 0) {
        not_started(c, "skipped", "disabled (nvidia_smi_timeout is 0)");
        return;
    }
    struct stat st;
    if (stat(path, &st)) {
        if (errno == ENOENT || errno == ENOTDIR)
            not_started(c, "absent", "%s: not installed", path);
        else
            not_started(c, "failed", "%s: %s", path, strerror(errno));
        return;
    }
    /* it runs as root on every crash: only a binary root controls */
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
        not_started(c, "failed", "%s: not an executable file", path);
        return;
    }
    if (st.st_uid != 0 || (st.st_mode & 022)) {
        not_started(c, "refused", "%s: not owned by root or writable by group/others", path);
        return;
    }

    if (c->bus_lost_recent && c->gpu_n > 0) {
        start_per_gpu(c, path);
        return;
    }
    /* a GPU fell off the bus but the driver's GPU list is unknown: all GPUs at once, under the
     * same deadline (a hang is killed and recorded; nothing is skipped for the host) */
    char why[400];
    if (spawn(c, path, NULL, &c->smi_pid, &c->smi_fd, &c->smi_err, &c->smi_ctl, why, sizeof(why)))
        not_started(c, "failed", "%s", why);
}

/* ---- the finisher's side ---- */

struct smi_run {
    char *out;
    size_t out_len, out_cap;
    uint64_t out_total; /* bytes seen, including those past the cap */
    char err_tail[SMI_TAIL];
    size_t err_len; /* bytes in err_tail (ring buffer, oldest at err_pos when full) */
    size_t err_pos;
    uint64_t err_total;
    int out_eof, err_eof, ctl_eof;
    pid_t spid; /* nvidia-smi, from the supervisor */
    int have_status, wstatus;
    int fork_errno;
    int truncated;
};

static void tail_add(struct smi_run *r, const char *b, size_t n)
{
    r->err_total += n;
    for (size_t i = 0; i < n; i++) {
        r->err_tail[r->err_pos] = b[i];
        r->err_pos = (r->err_pos + 1) % SMI_TAIL;
        if (r->err_len < SMI_TAIL)
            r->err_len++;
    }
}

/* Reads what is there without blocking. Returns -1 when the output cap was crossed. */
static int drain_out(struct smi_run *r, int fd, uint64_t max)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                r->out_eof = 1;
            return 0;
        }
        if (n == 0) {
            r->out_eof = 1;
            return 0;
        }
        r->out_total += (uint64_t)n;
        size_t keep = (size_t)n;
        if (r->out_len + keep > max) {
            keep = (size_t)(max - r->out_len);
            r->truncated = 1;
        }
        if (r->out_len + keep > r->out_cap) {
            size_t nc = r->out_cap ? r->out_cap : 256 << 10;
            while (nc < r->out_len + keep)
                nc *= 2;
            if (nc > max)
                nc = (size_t)max;
            char *nb = realloc(r->out, nc);
            if (!nb) {
                r->truncated = 1;
                return -1;
            }
            r->out = nb;
            r->out_cap = nc;
        }
        memcpy(r->out + r->out_len, buf, keep);
        r->out_len += keep;
        if (r->truncated)
            return -1;
    }
}

static void drain_err(struct smi_run *r, int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                r->err_eof = 1;
            return;
        }
        tail_add(r, buf, (size_t)n);
    }
}

static void drain_ctl(struct smi_run *r, int fd)
{
    struct ctl_msg m;
    for (;;) {
        ssize_t n = read(fd, &m, sizeof(m));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n != (ssize_t)sizeof(m)) { /* EOF, error, or a torn record (never written) */
            r->ctl_eof = 1;
            return;
        }
        if (m.kind == CTL_PID)
            r->spid = m.value;
        else if (m.kind == CTL_STATUS) {
            r->have_status = 1;
            r->wstatus = m.value;
        } else if (m.kind == CTL_FORK_FAILED)
            r->fork_errno = m.value;
    }
}

/* One poll round over the open fds (only the control pipe with ctl_only). Returns the number
 * of ready fds, 0 on timeout or when nothing is left open, -1 when the output cap was crossed. */
static int poll_round(struct cap *c, struct smi_run *r, int timeout_ms, int ctl_only)
{
    struct pollfd pf[3];
    int n = 0, io = -1, ie = -1, ic = -1;
    if (!ctl_only && !r->out_eof)
        io = n, pf[n++] = (struct pollfd){c->smi_fd, POLLIN, 0};
    if (!ctl_only && !r->err_eof)
        ie = n, pf[n++] = (struct pollfd){c->smi_err, POLLIN, 0};
    if (!r->ctl_eof && !r->have_status)
        ic = n, pf[n++] = (struct pollfd){c->smi_ctl, POLLIN, 0};
    if (n == 0)
        return 0;
    int k = poll(pf, (nfds_t)n, timeout_ms);
    if (k <= 0)
        return k < 0 && errno == EINTR ? 1 : 0;
    if (io >= 0 && pf[io].revents && drain_out(r, c->smi_fd, c->cfg.smi_output_max) < 0)
        return -1;
    if (ie >= 0 && pf[ie].revents)
        drain_err(r, c->smi_err);
    if (ic >= 0 && pf[ic].revents)
        drain_ctl(r, c->smi_ctl);
    return k;
}

static int ms_left(double deadline)
{
    double left = (deadline - now_mono()) * 1000;
    return left <= 0 ? 0 : left > 1e9 ? 1000000000 : (int)left + 1;
}

/* State letter of /proc/<pid>/stat ('D': uninterruptible sleep), or 0. */
static char proc_state(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, path, 4096, &len, &tr);
    if (!s)
        return 0;
    char *p = strrchr(s, ')'), st = 0;
    if (p && p[1] == ' ')
        st = p[2];
    free(s);
    return st;
}

/* JSON-safe copy: printable ASCII, newlines and tabs kept, other bytes as '?'. */
static char *printable(const char *b, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)b[i];
        s[i] = (ch >= 0x20 && ch < 0x7f) || ch == '\n' || ch == '\t' ? (char)ch : '?';
    }
    s[n] = 0;
    return s;
}

static void add_json(struct cap *c, const char *status, const char *reason, struct smi_run *r,
                     double elapsed_ms)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "status", status);
    cJSON_AddStringToObject(j, "reason", reason);
    cJSON_AddStringToObject(j, "path", c->cfg.nvidia_smi);
    if (r && r->have_status && WIFEXITED(r->wstatus))
        cJSON_AddNumberToObject(j, "exit_status", WEXITSTATUS(r->wstatus));
    else
        cJSON_AddNullToObject(j, "exit_status");
    if (r && r->have_status && WIFSIGNALED(r->wstatus))
        cJSON_AddNumberToObject(j, "signal", WTERMSIG(r->wstatus));
    cJSON_AddNumberToObject(j, "elapsed_ms", (double)(long)(elapsed_ms * 10) / 10);
    cJSON_AddNumberToObject(j, "timeout_s", c->cfg.nvidia_smi_timeout_s);
    cJSON_AddNumberToObject(j, "output_bytes", r ? (double)r->out_total : 0);
    cJSON_AddBoolToObject(j, "truncated", r && r->truncated);
    char *tail = NULL;
    if (r && r->err_len) {
        char lin[SMI_TAIL];
        size_t start = r->err_len < SMI_TAIL ? 0 : r->err_pos;
        for (size_t i = 0; i < r->err_len; i++)
            lin[i] = r->err_tail[(start + i) % SMI_TAIL];
        tail = printable(lin, r->err_len);
    }
    cJSON_AddStringToObject(j, "stderr_tail", tail ? tail : "");
    free(tail);
    /* nvidia-smi prints its own failures ("Failed to initialize NVML: ...") on stdout */
    if (r && r->out_len) {
        size_t n = r->out_len > SMI_TAIL ? SMI_TAIL : r->out_len;
        char *t = printable(r->out + r->out_len - n, n);
        cJSON_AddStringToObject(j, "stdout_tail", t ? t : "");
        free(t);
        cJSON_AddStringToObject(j, "partial_member", "nvidia-smi.partial");
    }
    char *s = cJSON_PrintUnformatted(j);
    if (s)
        bw_add(&c->bw, "nvidia-smi.json", s, strlen(s));
    free(s);
    cJSON_Delete(j);
    /* whatever it printed before failing or hanging (often the GPUs before the broken one) */
    if (r && r->out_len)
        bw_add(&c->bw, "nvidia-smi.partial", r->out, r->out_len);
}

/* The collection deadline: nvidia_smi_timeout from the start, but the finisher dies at its own
 * alarm (finisher_deadline), so at most half of that from now (*shortened when it cut in). */
static double smi_deadline(const struct cap *c, int *shortened)
{
    double deadline = c->smi_started + c->cfg.nvidia_smi_timeout_s;
    double limit =
        now_mono() + (c->cfg.finisher_deadline_s > 1 ? c->cfg.finisher_deadline_s / 2 : 1);
    *shortened = deadline > limit;
    if (*shortened)
        deadline = limit;
    return deadline;
}

/* Reads every started per-GPU run's pipes until all are done or the deadline; a run whose
 * output crosses the cap stops being read (capped[i]). */
static void per_gpu_read(struct cap *c, struct smi_run *r, int capped[], double deadline)
{
    int nj = c->smi_njobs;
    for (;;) {
        struct pollfd pf[3 * CP_SMI_GPUS];
        int who[3 * CP_SMI_GPUS], what[3 * CP_SMI_GPUS], n = 0;
        for (int i = 0; i < nj; i++) {
            struct smi_job *j = &c->smi_jobs[i];
            if (j->fd < 0 || capped[i])
                continue;
            if (!r[i].out_eof)
                who[n] = i, what[n] = 0, pf[n++] = (struct pollfd){j->fd, POLLIN, 0};
            if (!r[i].err_eof)
                who[n] = i, what[n] = 1, pf[n++] = (struct pollfd){j->err, POLLIN, 0};
            if (!r[i].ctl_eof && !r[i].have_status)
                who[n] = i, what[n] = 2, pf[n++] = (struct pollfd){j->ctl, POLLIN, 0};
        }
        if (n == 0)
            break;
        int left = ms_left(deadline);
        if (left == 0)
            break;
        int k = poll(pf, (nfds_t)n, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        for (int x = 0; x < n; x++) {
            if (!pf[x].revents)
                continue;
            struct smi_job *j = &c->smi_jobs[who[x]];
            struct smi_run *ri = &r[who[x]];
            if (what[x] == 0 && drain_out(ri, j->fd, c->cfg.smi_output_max) < 0)
                capped[who[x]] = 1;
            else if (what[x] == 1)
                drain_err(ri, j->err);
            else if (what[x] == 2)
                drain_ctl(ri, j->ctl);
        }
    }
}

/* One started per-GPU run's outcome (a run still going, or capped, is killed: its group, or
 * its supervisor when no pid came); its pipes are closed. Returns the status, why set. */
static const char *per_gpu_outcome(struct cap *c, struct smi_job *j, struct smi_run *ri, int capped,
                                   char *why, size_t n)
{
    const char *st;
    int done = ri->out_eof && ri->err_eof && (ri->have_status || ri->ctl_eof);
    if (!done || capped) {
        if (ri->spid <= 0)
            drain_ctl(ri, j->ctl);
        if (ri->spid > 0)
            kill(-ri->spid, SIGKILL);
        else if (!ri->have_status)
            kill(j->pid, SIGKILL);
        st = capped ? "failed" : "timeout";
        snprintf(why, n,
                 capped ? "output over nvidia_smi_output_max; killed"
                        : "no answer within the %u s deadline; killed (hung)",
                 c->cfg.nvidia_smi_timeout_s);
    } else if (ri->have_status && WIFEXITED(ri->wstatus) && WEXITSTATUS(ri->wstatus) == 0) {
        st = "ok";
    } else if (ri->have_status && WIFEXITED(ri->wstatus)) {
        st = "failed";
        snprintf(why, n, "exit status %d", WEXITSTATUS(ri->wstatus));
    } else {
        st = "failed";
        snprintf(why, n,
                 ri->have_status ? "killed by signal %d" : "the supervisor exited without a report",
                 ri->have_status ? WTERMSIG(ri->wstatus) : 0);
    }
    close(j->fd), close(j->err), close(j->ctl);
    j->fd = j->err = j->ctl = -1;
    return st;
}

/* The per-GPU counts and lists, for the step's reason. */
struct tally {
    int nok, nlost, nbad;
    char okl[200], badl[200]; /* the PCI ids that answered, that failed or hung */
};

static void tally_add(struct tally *tl, const char *st, const char *pci)
{
    char *lst = !strcmp(st, "ok") ? tl->okl : !strcmp(st, "skipped") ? NULL : tl->badl;
    if (!strcmp(st, "ok"))
        tl->nok++;
    else if (!strcmp(st, "skipped"))
        tl->nlost++;
    else
        tl->nbad++;
    if (lst && strlen(lst) + strlen(pci) + 3 < sizeof(tl->okl))
        snprintf(lst + strlen(lst), sizeof(tl->okl) - strlen(lst), "%s%s", lst[0] ? ", " : "", pci);
}

/* One GPU's entry of nvidia-smi.json (and its nvidia-smi/<pci>.xml member when it answered). */
static void per_gpu_record(struct cap *c, struct smi_job *j, struct smi_run *ri, int capped,
                           cJSON *arr, struct tally *tl)
{
    char why[300] = "";
    const char *st = j->status[0] ? j->status : NULL;
    if (st)
        snprintf(why, sizeof(why), "%s", j->reason);
    else
        st = per_gpu_outcome(c, j, ri, capped, why, sizeof(why));
    char member[64];
    snprintf(member, sizeof(member), "nvidia-smi/%s.xml", j->pci);
    if (!strcmp(st, "ok") && bw_add(&c->bw, member, ri->out ? ri->out : "", ri->out_len)) {
        st = "failed";
        snprintf(why, sizeof(why), "writing %s: %s", member, strerror(c->bw.err));
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "pci", j->pci);
    cJSON_AddStringToObject(o, "status", st);
    if (why[0])
        cJSON_AddStringToObject(o, "reason", why);
    else
        cJSON_AddNullToObject(o, "reason");
    if (!strcmp(st, "ok"))
        cJSON_AddStringToObject(o, "member", member);
    if (ri->have_status && WIFEXITED(ri->wstatus))
        cJSON_AddNumberToObject(o, "exit_status", WEXITSTATUS(ri->wstatus));
    cJSON_AddItemToArray(arr, o);
    tally_add(tl, st, j->pci);
}

/* The per-GPU runs (start_per_gpu): read under one deadline, killed at it, each recorded. */
static void finish_per_gpu(struct cap *c)
{
    double t0 = c->smi_started ? c->smi_started : now_mono();
    int nj = c->smi_njobs;
    struct smi_run *r = calloc((size_t)nj, sizeof(*r));
    if (!r) {
        cap_step(c, "nvidia-smi", "failed", t0, "out of memory");
        return;
    }
    for (int i = 0; i < nj; i++)
        r[i].spid = -1;
    int shortened;
    double deadline = smi_deadline(c, &shortened);
    int capped[CP_SMI_GPUS] = {0};
    per_gpu_read(c, r, capped, deadline);
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "status", "per_gpu");
    cJSON_AddStringToObject(js, "path", c->cfg.nvidia_smi);
    cJSON_AddNumberToObject(js, "timeout_s", c->cfg.nvidia_smi_timeout_s);
    cJSON *arr = cJSON_CreateArray();
    struct tally tl = {0, 0, 0, "", ""};
    for (int i = 0; i < nj; i++) {
        per_gpu_record(c, &c->smi_jobs[i], &r[i], capped[i], arr, &tl);
        free(r[i].out);
    }
    free(r);
    char sum[400];
    snprintf(
        sum, sizeof(sum),
        "per GPU (a GPU fell off the bus): %d answered%s%s%s, %d skipped as lost, %d failed or "
        "hung%s%s%s",
        tl.nok, tl.okl[0] ? " (" : "", tl.okl, tl.okl[0] ? ")" : "", tl.nlost, tl.nbad,
        tl.badl[0] ? " (" : "", tl.badl, tl.badl[0] ? ")" : "");
    cJSON_AddStringToObject(js, "reason", sum);
    cJSON_AddItemToObject(js, "gpus", arr);
    char *str = cJSON_PrintUnformatted(js);
    if (str)
        bw_add(&c->bw, "nvidia-smi.json", str, strlen(str));
    free(str);
    cJSON_Delete(js);
    cap_step(c, "nvidia-smi", tl.nok ? "ok" : tl.nbad ? "failed" : "skipped", t0, "%s", sum);
}

/* Reads nvidia-smi's output until EOF on both outputs and the supervisor's report, or the
 * deadline (*timed_out) or the output cap (*capped). A deadline that passed during a long drain
 * still takes everything already waiting in the pipes. */
static void smi_wait(struct cap *c, struct smi_run *r, double deadline, int *timed_out, int *capped)
{
    *timed_out = *capped = 0;
    while (!(r->out_eof && r->err_eof && (r->have_status || r->ctl_eof))) {
        int left = ms_left(deadline);
        int k = poll_round(c, r, left, 0);
        if (k < 0) {
            *capped = 1;
            break;
        }
        if (k == 0 && ms_left(deadline) == 0) {
            *timed_out = 1;
            break;
        }
    }
    /* both outputs closed but no report yet: nvidia-smi is exiting, the supervisor reaping */
    if (*timed_out && r->out_eof && r->err_eof) {
        double until = now_mono() + SMI_REAP_WAIT_MS / 1000.0;
        while (!r->have_status && !r->ctl_eof && poll_round(c, r, ms_left(until), 1) > 0)
            ;
        if (r->have_status)
            *timed_out = 0;
    }
}

/* nvidia-smi timed out or overflowed: its process group goes (or the supervisor, when it
 * never reported a pid); what was killed, and how it ended, into killed. */
static void smi_kill(struct cap *c, struct smi_run *r, char *killed, size_t n)
{
    if (r->spid <= 0)
        drain_ctl(r, c->smi_ctl);
    if (r->have_status) {
        /* whatever it left behind still holds the pipe: its group goes (a group with
         * members keeps its number; an empty one just gives ESRCH) */
        if (r->spid > 0)
            kill(-r->spid, SIGKILL);
        snprintf(killed, n, "it had exited; its process group killed");
    } else if (r->spid > 0) {
        kill(-r->spid, SIGKILL); /* nvidia-smi and anything it started */
        /* the supervisor reaps it and reports; never wait on a child in D state */
        double until = now_mono() + SMI_REAP_WAIT_MS / 1000.0;
        while (!r->have_status && !r->ctl_eof && poll_round(c, r, ms_left(until), 1) > 0)
            ;
        if (r->have_status)
            snprintf(killed, n, "killed (SIGKILL to process group %d)", (int)r->spid);
        else if (proc_state(r->spid) == 'D')
            snprintf(killed, n, "killed; still in uninterruptible sleep");
        else
            snprintf(killed, n, "killed; not yet reaped after %d ms", SMI_REAP_WAIT_MS);
    } else {
        /* no pid reported: the supervisor never got to fork; kill it instead */
        kill(c->smi_pid, SIGKILL);
        snprintf(killed, n, "supervisor %d killed; nvidia-smi never started", (int)c->smi_pid);
    }
}

/* How the single run ended: the step status, with why set (empty for ok). */
static const char *smi_outcome(const struct cap *c, const struct smi_run *r, int timed_out,
                               int capped, int shortened, const char *killed, char *why, size_t n)
{
    if (timed_out) {
        snprintf(why, n, "no result within nvidia_smi_timeout = %u s%s; %s",
                 c->cfg.nvidia_smi_timeout_s,
                 shortened ? " (shortened to half of finisher_deadline)" : "", killed);
        return "timeout";
    }
    if (capped) {
        snprintf(why, n, "output exceeded nvidia_smi_output_max = %llu bytes; %s",
                 (unsigned long long)c->cfg.smi_output_max, killed);
        return "failed";
    }
    if (r->fork_errno) {
        snprintf(why, n, "fork: %s", strerror(r->fork_errno));
        return "failed";
    }
    if (!r->have_status) {
        snprintf(why, n, "the supervisor exited without a report");
        return "failed";
    }
    if (WIFEXITED(r->wstatus) && WEXITSTATUS(r->wstatus) == 0)
        return "ok";
    if (WIFEXITED(r->wstatus))
        snprintf(why, n, "exit status %d%s", WEXITSTATUS(r->wstatus),
                 WEXITSTATUS(r->wstatus) == 127 ? " (could not execute it)" : "");
    else
        snprintf(why, n, "killed by signal %d", WTERMSIG(r->wstatus));
    return "failed";
}

void smi_finish(struct cap *c)
{
    if (c->smi_njobs > 0) {
        finish_per_gpu(c);
        return;
    }
    double t0 = c->smi_started ? c->smi_started : now_mono();
    if (c->smi_status[0] || c->smi_fd < 0) {
        const char *st = c->smi_status[0] ? c->smi_status : "failed";
        const char *why = c->smi_reason[0] ? c->smi_reason : "not started";
        add_json(c, st, why, NULL, 0);
        cap_step(c, "nvidia-smi", st, t0, "%s", why);
        return;
    }
    struct smi_run r;
    memset(&r, 0, sizeof(r));
    r.spid = -1;
    int shortened, timed_out, capped;
    double deadline = smi_deadline(c, &shortened);
    smi_wait(c, &r, deadline, &timed_out, &capped);
    double elapsed = (now_mono() - c->smi_started) * 1000;
    char killed[160] = "";
    if (timed_out || capped)
        smi_kill(c, &r, killed, sizeof(killed));
    close(c->smi_fd), close(c->smi_err), close(c->smi_ctl);
    c->smi_fd = c->smi_err = c->smi_ctl = -1;

    char why[600];
    const char *status = smi_outcome(c, &r, timed_out, capped, shortened, killed, why, sizeof(why));
    if (!strcmp(status, "ok")) {
        if (bw_add(&c->bw, "nvidia-smi.xml", r.out ? r.out : "", r.out_len))
            cap_step(c, "nvidia-smi", "failed", t0, "writing the member: %s", strerror(c->bw.err));
        else
            cap_step(c, "nvidia-smi", "ok", t0, "%zu bytes in %.0f ms", r.out_len, elapsed);
    } else {
        add_json(c, status, why, &r, elapsed);
        cap_step(c, "nvidia-smi", status, t0, "%s", why);
    }
    free(r.out);
}
