/* sandbox.c - fork, limit, collect: the child runs the untrusted parsing, the parent survives it.
 *
 * Main data structure: a growing output buffer (struct sink) the parent fills from the pipe with
 * poll() until EOF or the wall-clock deadline, then the child's wait status turned into words.
 * Children whose output said they were done are reaped later, from a small list (reap_pids).
 */
#include "sandbox.h"
#include "errmsg.h"

#include <errno.h>
#include <seccomp.h>
#include <malloc.h>
#include <stdint.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOX_PIPE_BYTES (1 << 20) /* the pipe the child writes its results into */

struct sink {
    char *buf;
    size_t len, cap, max;
    int overflow;
    sandbox_seen_fn seen; /* NULL: none */
    void *ctx;
    int done; /* seen() said the child has done its work */
};

/* Children left to be reaped (sandbox_finish_seen): a few at most, one per analysis. */
#define REAP_MAX 16
static pid_t reap_pids[REAP_MAX];
static size_t reap_n;

static void reap_pending(int block)
{
    size_t k = 0;
    for (size_t i = 0; i < reap_n; i++) {
        int st;
        pid_t r;
        while ((r = waitpid(reap_pids[i], &st, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
            ;
        if (r == 0)
            reap_pids[k++] = reap_pids[i]; /* still running (its exit is under way) */
    }
    reap_n = k;
}

void sandbox_reap(void)
{
    reap_pending(1);
}

static void reap_later(pid_t pid)
{
    if (reap_n == REAP_MAX)
        reap_pending(1);
    reap_pids[reap_n++] = pid;
}


static void set_limit(int what, uint64_t v)
{
    struct rlimit r = {.rlim_cur = v, .rlim_max = v};
    setrlimit(what, &r);
}

/* After a fork, both processes share the heap's pages copy-on-write: the first write to each
 * 4 KiB of them is a page copy (on a transparent huge page too: the kernel splits it). The
 * allocations made after the fork mostly come from the top of the heap, so each process moves its
 * top to the next 2 MiB boundary (a spacer it never frees or touches beyond its ends) and allocates
 * from pages neither has touched: fresh huge pages (main.c marks the heap MADV_HUGEPAGE). */
#define FRESH_ALIGN (2u << 20)

static void heap_fresh_top(void)
{
    struct mallinfo2 mi = mallinfo2();
    uintptr_t brk = (uintptr_t)sbrk(0);
    if (brk == (uintptr_t)-1 || mi.keepcost == 0 || mi.keepcost > brk)
        return;
    uintptr_t top = brk - mi.keepcost; /* where the top chunk starts */
    size_t gap = (size_t)(((top + FRESH_ALIGN - 1) & ~(uintptr_t)(FRESH_ALIGN - 1)) - top);
    if (gap < 4096)
        gap += FRESH_ALIGN;
    /* mmap'ed chunks would not move the top: the spacer is below M_MMAP_THRESHOLD (32 MiB) */
    void *volatile spacer = malloc(gap - 64);
    (void)spacer;
}

static void child(sandbox_fn fn, void *arg, const struct sandbox_limits *l, int fd)
{
    heap_fresh_top();
    prctl(PR_SET_DUMPABLE, 0);
    set_limit(RLIMIT_CORE, 0);
    if (l->cpu_s) {
        struct rlimit r = {.rlim_cur = l->cpu_s, .rlim_max = l->cpu_s + 1};
        setrlimit(RLIMIT_CPU, &r);
    }
#ifndef CRASHPACK_SANITIZE
    if (l->as_bytes)
        set_limit(RLIMIT_AS, l->as_bytes);
#endif
    signal(SIGPIPE, SIG_IGN);
    int rc = fn(arg, fd);
    close(fd);
    _exit(rc & 0xff);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Appends up to 64 KiB from fd. Returns 1 at EOF, 0 to go on, -1 on a read error. */
static int drain(struct sink *s, int fd)
{
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : -1;
    if (n == 0)
        return 1;
    if (s->len + (size_t)n > s->max) {
        s->overflow = 1;
        return 1;
    }
    if (s->len + (size_t)n + 1 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1 << 16;
        while (nc < s->len + (size_t)n + 1)
            nc *= 2;
        char *b = realloc(s->buf, nc);
        if (!b) {
            s->overflow = 1;
            return 1;
        }
        s->buf = b;
        s->cap = nc;
    }
    memcpy(s->buf + s->len, chunk, (size_t)n);
    s->len += (size_t)n;
    s->buf[s->len] = 0;
    if (s->seen && s->seen(s->ctx, s->buf, s->len))
        s->done = 1;
    return 0;
}

/* Reads until EOF or the deadline (CLOCK_MONOTONIC seconds, 0: none). Returns 1 when the deadline
 * passed. */
static int collect(struct sink *s, int fd, double deadline)
{
    for (;;) {
        int wait_ms = -1;
        if (deadline) {
            double left = deadline - now();
            if (left <= 0)
                return 1;
            wait_ms = (int)(left * 1000) + 1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, wait_ms);
        if (r < 0 && errno != EINTR)
            return 0;
        if (r > 0 && drain(s, fd))
            return 0;
    }
}

static void describe(int st, int timed_out, const struct sink *s, const struct sandbox_limits *l,
                     char *status, size_t statuslen)
{
    if (timed_out)
        cp_errmsg(status, statuslen, "ran past the time limit (%u s) and was killed", l->wall_s);
    else if (s->overflow)
        cp_errmsg(status, statuslen, "wrote more than the output limit (%zu bytes) and was killed",
            s->max);
    else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGXCPU)
        cp_errmsg(status, statuslen, "ran past the CPU limit (%u s)", l->cpu_s);
    else if (WIFSIGNALED(st))
        cp_errmsg(status, statuslen, "was killed by SIG%s (a crash while parsing the core or its "
            "binaries)", sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
    else if (WIFEXITED(st) && WEXITSTATUS(st))
        cp_errmsg(status, statuslen, "exited with status %d", WEXITSTATUS(st));
    else
        cp_errmsg(status, statuslen, "completed");
}

struct sandbox_child {
    pid_t pid;
    int fd;
    double deadline; /* 0: none */
    struct sandbox_limits l;
};

struct sandbox_child *sandbox_start(sandbox_fn fn, void *arg, const struct sandbox_limits *l,
                                    char *status, size_t statuslen)
{
    reap_pending(0);
    struct sandbox_child *h = calloc(1, sizeof(*h));
    int p[2];
    if (!h) {
        cp_errmsg(status, statuslen, "out of memory");
        return NULL;
    }
    if (pipe2(p, O_CLOEXEC)) {
        cp_errmsg(status, statuslen, "pipe: %s", strerror(errno));
        free(h);
        return NULL;
    }
    /* the child writes its results while the parent decodes the evidence and loads the rules:
     * a 64-thread report (~300 KiB) would fill the default 64 KiB and make the child wait until
     * the parent starts reading. Best effort: the limit is /proc/sys/fs/pipe-max-size. */
    (void)fcntl(p[1], F_SETPIPE_SZ, SANDBOX_PIPE_BYTES);
    fflush(NULL);
    h->l = *l;
    h->deadline = l->wall_s ? now() + l->wall_s : 0;
    pid_t pid = fork();
    if (pid < 0) {
        cp_errmsg(status, statuslen, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        free(h);
        return NULL;
    }
    if (pid == 0) {
        close(p[0]);
        child(fn, arg, l, p[1]);
    }
    heap_fresh_top();
    close(p[1]);
    h->pid = pid;
    h->fd = p[0];
    return h;
}

int sandbox_finish_seen(struct sandbox_child *h, sandbox_seen_fn seen, void *ctx, char **out,
                        size_t *outlen, char *status, size_t statuslen)
{
    *out = NULL;
    *outlen = 0;
    const struct sandbox_limits *l = &h->l;
    struct sink s = {.max = l->max_output ? l->max_output : (256u << 20), .seen = seen, .ctx = ctx};
    int timed_out = collect(&s, h->fd, h->deadline);
    if (timed_out || s.overflow)
        kill(h->pid, SIGKILL);
    close(h->fd);
    int st = 0;
    pid_t r;
    if (s.done && !timed_out && !s.overflow) {
        /* done, and its output closed: a status it already has counts, else it is exiting */
        while ((r = waitpid(h->pid, &st, WNOHANG)) < 0 && errno == EINTR)
            ;
        if (r == 0)
            reap_later(h->pid);
        if (r <= 0)
            st = 0;
    } else {
        while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
            ;
    }
    describe(st, timed_out, &s, l, status, statuslen);
    if (!s.buf)
        s.buf = calloc(1, 1);
    else
        s.buf[s.len] = 0;
    *out = s.buf;
    *outlen = s.len;
    free(h);
    return !timed_out && !s.overflow && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

void sandbox_cancel(struct sandbox_child *h)
{
    kill(h->pid, SIGKILL);
    close(h->fd);
    while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    free(h);
}

int sandbox_finish(struct sandbox_child *h, char **out, size_t *outlen, char *status,
                   size_t statuslen)
{
    return sandbox_finish_seen(h, NULL, NULL, out, outlen, status, statuslen);
}

int sandbox_run(sandbox_fn fn, void *arg, const struct sandbox_limits *l, char **out,
                size_t *outlen, char *status, size_t statuslen)
{
    *out = NULL;
    *outlen = 0;
    struct sandbox_child *h = sandbox_start(fn, arg, l, status, statuslen);
    return h ? sandbox_finish(h, out, outlen, status, statuslen) : -1;
}

int sandbox_seal(char *err, size_t errlen)
{
    static const int denied[] = {
        SCMP_SYS(open),
        SCMP_SYS(openat),
        SCMP_SYS(creat),
        SCMP_SYS(open_by_handle_at),
        SCMP_SYS(name_to_handle_at),
        SCMP_SYS(execve),
        SCMP_SYS(execveat),
        SCMP_SYS(socket),
        SCMP_SYS(socketpair),
        SCMP_SYS(connect),
        SCMP_SYS(ptrace),
        SCMP_SYS(process_vm_readv),
        SCMP_SYS(process_vm_writev),
        SCMP_SYS(mkdir),
        SCMP_SYS(mkdirat),
        SCMP_SYS(unlink),
        SCMP_SYS(unlinkat),
        SCMP_SYS(rmdir),
        SCMP_SYS(rename),
        SCMP_SYS(renameat),
        SCMP_SYS(renameat2),
        SCMP_SYS(link),
        SCMP_SYS(linkat),
        SCMP_SYS(symlink),
        SCMP_SYS(symlinkat),
        SCMP_SYS(chmod),
        SCMP_SYS(fchmodat),
        SCMP_SYS(chown),
        SCMP_SYS(lchown),
        SCMP_SYS(fchownat),
        SCMP_SYS(truncate),
        SCMP_SYS(mknod),
        SCMP_SYS(mknodat),
        SCMP_SYS(mount),
        SCMP_SYS(umount2),
        SCMP_SYS(chroot),
        SCMP_SYS(pivot_root),
        SCMP_SYS(setns),
        SCMP_SYS(unshare),
        /* another process's descriptors (pidfd_getfd needs only a pidfd and ptrace access) */
        SCMP_SYS(pidfd_open),
        SCMP_SYS(pidfd_getfd),
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
        cp_errmsg(err, errlen, "no_new_privs: %s", strerror(errno));
        return -1;
    }
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
    int rc = f ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < sizeof(denied) / sizeof(denied[0]); i++)
        if (denied[i] >= 0) /* __NR_SCMP_ERROR: not a syscall of this architecture */
            rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), denied[i], 0);
    if (!rc)
        rc = seccomp_load(f);
    seccomp_release(f);
    if (rc) {
        cp_errmsg(err, errlen, "cannot install the seccomp filter: %s", strerror(-rc));
        return -1;
    }
    return 0;
}
