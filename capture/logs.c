/* logs.c - the end of stdout/stderr when they are regular files (Slurm and torchrun logs usually
 * are), and the ML debug files the process environment names: PyTorch's NCCL flight-recorder
 * dumps, the torchelastic error file, CUDA GPU core dumps.
 *
 * The process's own fds 1 and 2 are duplicated with pidfd_getfd as root (so Yama's ptrace scope
 * does not get in the way); everything else runs in a child that has become the crashed uid/gid
 * (no capabilities, even for uid 0), so files named by the process are opened with its
 * credentials, inside its root (rootopen.h: proc_open, the handler's one way to open a path the
 * process names; absolute, relative and symlinked paths never leave that root), and with a time
 * limit (a log on a dead NFS mount must not hang the handler). The child streams
 * records to the parent over a pipe: a fixed header, then the bytes. Flight-recorder dumps are
 * pickles: they are copied as opaque bytes, never unpickled. */
#include "capture.h"
#include "privs.h"
#include "rootopen.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ML_FILES 8

struct rec {
    char member[96]; /* "" = no content, only a step record */
    char step[96];
    char status[16];
    char detail[400];
    uint64_t len; /* bytes that follow */
};

static int send_rec(int fd, const char *member, const char *step, const char *status,
                    const char *detail, const void *data, uint64_t len)
{
    struct rec r;
    memset(&r, 0, sizeof(r));
    snprintf(r.member, sizeof(r.member), "%s", member);
    snprintf(r.step, sizeof(r.step), "%s", step);
    snprintf(r.status, sizeof(r.status), "%s", status);
    snprintf(r.detail, sizeof(r.detail), "%s", detail);
    r.len = len;
    if (write_all(fd, &r, sizeof(r)))
        return -1;
    return len ? write_all(fd, data, (size_t)len) : 0;
}

static const char *kind_of(mode_t m)
{
    return S_ISREG(m)    ? "regular file"
           : S_ISFIFO(m) ? "pipe"
           : S_ISSOCK(m) ? "socket"
           : S_ISCHR(m)  ? "character device"
           : S_ISDIR(m)  ? "directory"
           : S_ISBLK(m)  ? "block device"
           : S_ISLNK(m)  ? "symlink"
                         : "other";
}

/* The last `max` bytes of a regular file the process has open (usually write-only): reopened
 * for reading through /proc/self/fd, which checks our credentials - the crashed user's. The
 * TAIL_CONTEXT bytes before the tail are read too, for the scrubber: a secret whose key or
 * prefix is cut off by the tail's start (password= | hunter2) is masked. */
#define TAIL_CONTEXT 4096
static void send_tail(int out, int wfd, const struct stat *st, const char *member,
                      const char *step, const char *target, uint64_t max)
{
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", wfd);
    int fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    uint64_t size = (uint64_t)st->st_size, take = size < max ? size : max;
    uint64_t pre = size - take < TAIL_CONTEXT ? size - take : TAIL_CONTEXT;
    char *buf = fd >= 0 ? malloc(take + pre ? take + pre : 1) : NULL;
    ssize_t got = buf ? pread(fd, buf, (size_t)(take + pre), (off_t)(size - take - pre)) : -1;
    if (fd >= 0)
        close(fd);
    char detail[400];
    if (got < 0) {
        snprintf(detail, sizeof(detail), "%s: %s", target, strerror(errno));
        send_rec(out, "", step, "failed", detail, NULL, 0);
    } else {
        cp_scrub_member(NULL, member, (uint8_t *)buf, (size_t)got); /* text, not JSON */
        size_t skip = (uint64_t)got > take ? (size_t)((uint64_t)got - take) : 0;
        got -= (ssize_t)skip;
        snprintf(detail, sizeof(detail), "%s: last %lld of %llu bytes", target, (long long)got,
                 (unsigned long long)size);
        send_rec(out, member, step, "ok", detail, buf + skip, (uint64_t)got);
    }
    free(buf);
}

/* stdout/stderr: fds[i] is the process's fd i+1 duplicated into ours, or -1. */
static void std_tails(struct cap *c, int out, const int fds[2], char targets[2][512])
{
    struct stat sts[2];
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "stderr" : "stdout";
        char member[32], step[32], detail[600];
        snprintf(member, sizeof(member), "logs/%s.tail", name);
        snprintf(step, sizeof(step), "logs/%s", name);
        if (fds[i] < 0 || fstat(fds[i], &sts[i])) {
            sts[i].st_ino = 0;
            snprintf(detail, sizeof(detail), "fd %d is closed or unreadable", i + 1);
            send_rec(out, "", step, "absent", detail, NULL, 0);
            continue;
        }
        if (i == 1 && sts[0].st_ino && sts[0].st_ino == sts[1].st_ino &&
            sts[0].st_dev == sts[1].st_dev) {
            snprintf(detail, sizeof(detail), "same file as stdout (%s)", targets[i]);
            send_rec(out, "", step, "skipped", detail, NULL, 0);
            continue;
        }
        if (!S_ISREG(sts[i].st_mode)) {
            snprintf(detail, sizeof(detail), "%s is a %s (%s): nothing kept", name,
                     kind_of(sts[i].st_mode), targets[i]);
            send_rec(out, "", step, "skipped", detail, NULL, 0);
            continue;
        }
        send_tail(out, fds[i], &sts[i], member, step, targets[i], c->cfg.log_tail);
    }
}

/* Opens a path the process named, as the process (we are its uid now), inside its root
 * (rootopen.h: never a symlink in the last component, never a FIFO's open blocking, never past
 * its root), and sends the start of it. */
static void copy_named(const struct proc_root *r, int out, const char *path, const char *member,
                       const char *step, uint64_t cap)
{
    char detail[600];
    struct stat st;
    int fd = proc_open(r, path, 0, 0, &st);
    if (fd < 0) {
        int e = errno;
        if (e == PROC_OPEN_ENOTREG)
            snprintf(detail, sizeof(detail), "%s is a %s: not read", path, kind_of(st.st_mode));
        else
            snprintf(detail, sizeof(detail), "%s: %s", path,
                     e == ELOOP ? "a symlink (not followed)" : strerror(e));
        send_rec(out, "", step, e == ENOENT ? "absent" : "refused", detail, NULL, 0);
        return;
    }
    uint64_t size = (uint64_t)st.st_size, take = size < cap ? size : cap;
    char *buf = malloc(take ? take : 1);
    ssize_t got = buf ? pread(fd, buf, (size_t)take, 0) : -1;
    if (got < 0) {
        snprintf(detail, sizeof(detail), "%s: %s", path, strerror(errno));
        send_rec(out, "", step, "failed", detail, NULL, 0);
    } else {
        snprintf(detail, sizeof(detail), "%s: %llu bytes%s", path, (unsigned long long)size,
                 size > take ? " (capped: the start is kept)" : "");
        send_rec(out, member, step, "ok", detail, buf, (uint64_t)got);
    }
    free(buf);
    close(fd);
}

struct found {
    char path[512];
    time_t mtime;
};

static int newest_first(const void *a, const void *b)
{
    const struct found *x = a, *y = b;
    return x->mtime < y->mtime ? 1 : x->mtime > y->mtime ? -1 : strcmp(x->path, y->path);
}

/* Files in the directory of `pattern` (inside the process's root) whose base name matches its
 * glob, newest first. */
static size_t glob_dir(const struct proc_root *r, const char *pattern, struct found *out,
                       size_t max)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", pattern);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    char glob[256];
    snprintf(glob, sizeof(glob), "%s", base);
    if (slash == dir)
        snprintf(dir, sizeof(dir), "/");
    else if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof(dir), ".");
    int dfd = proc_open(r, dir, O_DIRECTORY, 0, NULL);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    size_t n = 0, cap = 256;
    struct found *all = calloc(cap, sizeof(*all));
    struct dirent *e;
    while (all && (e = readdir(d)) && n < cap) {
        if (fnmatch(glob, e->d_name, 0))
            continue;
        struct stat st;
        snprintf(all[n].path, sizeof(all[n].path), "%s/%s", strcmp(dir, "/") ? dir : "",
                 e->d_name);
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            all[n].mtime = st.st_mtime;
            n++;
        }
    }
    closedir(d);
    if (!all)
        return 0;
    qsort(all, n, sizeof(*all), newest_first);
    size_t k = n < max ? n : max;
    memcpy(out, all, k * sizeof(*out));
    free(all);
    return k;
}

static void member_name(char *dst, size_t n, const char *prefix, const char *path)
{
    const char *base = strrchr(path, '/');
    char esc[80];
    name_escape(esc, sizeof(esc), base ? base + 1 : path);
    snprintf(dst, n, "%s%s", prefix, esc);
}

static void ml_files(struct cap *c, const struct proc_root *r, int out)
{
    uint64_t cap = c->cfg.ml_file_max;
    char member[100];
    /* NCCL flight recorder: TORCH_NCCL_DEBUG_INFO_TEMP_FILE is a prefix, the rank is appended */
    const char *fr = cap_env(c, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
    int fr_on = fr || cap_env(c, "TORCH_NCCL_TRACE_BUFFER_SIZE") ||
                cap_env(c, "TORCH_NCCL_DUMP_ON_TIMEOUT");
    if (fr_on) {
        char pat[512];
        snprintf(pat, sizeof(pat), "%s*", fr && *fr ? fr : "/tmp/nccl_trace_rank_");
        struct found f[MAX_ML_FILES];
        size_t n = glob_dir(r, pat, f, MAX_ML_FILES);
        if (!n)
            send_rec(out, "", "ml/nccl_flight_recorder", "absent", pat, NULL, 0);
        for (size_t i = 0; i < n; i++) {
            member_name(member, sizeof(member), "ml/", f[i].path);
            copy_named(r, out, f[i].path, member, "ml/nccl_flight_recorder", cap);
        }
    }
    const char *te = cap_env(c, "TORCHELASTIC_ERROR_FILE");
    if (te && *te)
        copy_named(r, out, te, "ml/torchelastic_error.json", "ml/torchelastic_error", cap);
    /* CUDA GPU core dumps: CUDA_COREDUMP_FILE may hold %p %h %t; the default name is
     * core_<time>_<host>_<pid>.nvcudmp in the working directory */
    const char *cf = cap_env(c, "CUDA_COREDUMP_FILE");
    const char *on = cap_env(c, "CUDA_ENABLE_COREDUMP_ON_EXCEPTION");
    if ((cf && *cf) || (on && !strcmp(on, "1"))) {
        char pat[512] = "";
        size_t k = 0;
        const char *src = cf && *cf ? cf : "core_%t_%h_%p.nvcudmp";
        for (const char *p = src; *p && k + 64 < sizeof(pat); p++) {
            if (p[0] == '%' && p[1] == 'p')
                k += (size_t)snprintf(pat + k, sizeof(pat) - k, "%d", (int)c->pid), p++;
            else if (p[0] == '%' && p[1] == 'h')
                k += (size_t)snprintf(pat + k, sizeof(pat) - k, "%s", c->hostname), p++;
            else if (p[0] == '%' && p[1])
                pat[k++] = '*', p++;
            else
                pat[k++] = *p;
        }
        pat[k] = 0;
        struct found f[2];
        size_t n = glob_dir(r, pat, f, 2);
        if (!n)
            send_rec(out, "", "ml/cuda_coredump", "absent", pat, NULL, 0);
        for (size_t i = 0; i < n; i++) {
            member_name(member, sizeof(member), "ml/", f[i].path);
            copy_named(r, out, f[i].path, member, "ml/cuda_coredump", cap);
        }
    }
}

/* Become the crashed process's uid/gid for good, then read what it names. */
static void child(struct cap *c, int out, const int fds[2], char targets[2][512])
{
    /* above all not the core pipe: the kernel waits for every reader of it, and this child may
     * hang on a dead mount */
    for (int fd = 0; fd < 1024; fd++)
        if (fd != out && fd != fds[0] && fd != fds[1] && fd != c->procfd)
            close(fd);
    int nul = open("/dev/null", O_RDWR);
    if (nul > 0) {
        dup2(nul, 0);
        close(nul);
    }
    /* the process's root and working directory (O_PATH handles): the paths it named resolve
     * inside its root, relative ones from its working directory, after the switch */
    struct proc_root r;
    int noroot = proc_root_open(&r, c->procfd);
    close(c->procfd);
    if (privs_become(c, c->uid, c->gid)) {
        send_rec(out, "", "logs", "failed", "cannot switch to the crashed uid", NULL, 0);
        _exit(1);
    }
    std_tails(c, out, fds, targets);
    if (!c->secure && noroot)
        send_rec(out, "", "ml", "failed", "the process's root is not accessible: no path opened",
                 NULL, 0);
    else if (!c->secure)
        ml_files(c, &r, out);
    _exit(0);
}

static int dup_process_fd(struct cap *c, int n, char *target, size_t tlen)
{
    char link[32];
    snprintf(link, sizeof(link), "fd/%d", n);
    ssize_t l = readlinkat(c->procfd, link, target, tlen - 1);
    target[l > 0 ? l : 0] = 0;
    if (l <= 0)
        return -1;
    int pidfd = c->pidfd >= 0 ? c->pidfd : (int)syscall(SYS_pidfd_open, c->pid, 0);
    int fd = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, n, 0) : -1;
    if (pidfd >= 0 && pidfd != c->pidfd)
        close(pidfd);
    if (fd < 0) {
        /* no pidfd_getfd (kernel < 5.6): the magic link itself, after checking its type */
        struct stat st;
        if (fstatat(c->procfd, link, &st, 0) == 0 && S_ISREG(st.st_mode))
            fd = openat(c->procfd, link, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    }
    return fd;
}

/* Reads exactly want bytes under the deadline (*timed_out once it has passed). Returns 1, or 0
 * at EOF, an error or the deadline. */
static int read_full(int fd, char *dst, size_t want, double deadline, int *timed_out)
{
    for (size_t got = 0; got < want;) {
        double left = deadline - now_mono();
        struct pollfd pf = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) <= 0) {
            if (now_mono() >= deadline)
                *timed_out = 1;
            if (errno == EINTR && !*timed_out)
                continue;
            return 0;
        }
        ssize_t n = read(fd, dst + got, want - got);
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
    return 1;
}

/* One record from the child: a header, then r->len bytes (*data, malloc'ed), each under the
 * deadline. Returns 1, or 0 when there is none (the end, or a broken or oversized one). */
static int read_rec(const struct cap *c, int fd, double deadline, struct rec *r, char **data,
                    int *timed_out)
{
    *data = NULL;
    if (!read_full(fd, (char *)r, sizeof(*r), deadline, timed_out))
        return 0;
    size_t want = (size_t)r->len;
    if (r->len > c->cfg.log_tail + c->cfg.ml_file_max || !(*data = malloc(want ? want : 1)))
        return 0;
    if (!read_full(fd, *data, want, deadline, timed_out)) {
        free(*data);
        *data = NULL;
        return 0;
    }
    r->member[sizeof(r->member) - 1] = r->step[sizeof(r->step) - 1] = 0;
    r->status[sizeof(r->status) - 1] = r->detail[sizeof(r->detail) - 1] = 0;
    return 1;
}

/* Every record the child sends: its member added, its step recorded. Returns whether the
 * deadline passed. */
static int take_records(struct cap *c, int fd, double t, double deadline)
{
    int timed_out = 0;
    struct rec r;
    char *data;
    while (read_rec(c, fd, deadline, &r, &data, &timed_out)) {
        if (r.member[0] && bw_add(&c->bw, r.member, data, (size_t)r.len))
            cap_step(c, r.step, "failed", t, "%s: write: %s", r.detail, strerror(c->bw.err));
        else
            cap_step(c, r.step, r.status, t, "%s", r.detail);
        free(data);
    }
    return timed_out;
}

/* Forks the reader child over the process's stdout/stderr (fds) and takes what it sends, under
 * checkpoint_timeout: a child still reading then is killed, and never waited on long (it may
 * be stuck in uninterruptible sleep on a dead mount). */
static void read_as_user(struct cap *c, double t, const int fds[2], char targets[2][512])
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) {
        cap_step(c, "logs", "failed", t, "pipe: %s", strerror(errno));
        return;
    }
    pid_t p = fork();
    if (p == 0) {
        close(pfd[0]);
        child(c, pfd[1], fds, targets);
    }
    close(pfd[1]);
    if (p < 0) {
        close(pfd[0]);
        cap_step(c, "logs", "failed", t, "fork: %s", strerror(errno));
        return;
    }
    double deadline = t + (c->cfg.checkpoint_timeout_s ? c->cfg.checkpoint_timeout_s : 5);
    int timed_out = take_records(c, pfd[0], t, deadline);
    close(pfd[0]);
    if (timed_out) {
        kill(p, SIGKILL);
        cap_step(c, "logs", "timeout", t, "reading logs took over %u s (dead mount?)",
                 c->cfg.checkpoint_timeout_s);
    }
    /* never wait on a child stuck in uninterruptible sleep */
    for (int i = 0; i < 100 && waitpid(p, NULL, WNOHANG) == 0; i++)
        usleep(2000);
}

void logs_collect(struct cap *c)
{
    double t = now_mono();
    if (c->procfd < 0) {
        cap_step(c, "logs", "absent", t, "no /proc/<pid>");
        return;
    }
    int fds[2];
    char targets[2][512];
    for (int i = 0; i < 2; i++)
        fds[i] = dup_process_fd(c, i + 1, targets[i], sizeof(targets[i]));
    read_as_user(c, t, fds, targets);
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}
