/* capreq.c - crashpack-capture --event run from the command, and the agent's client side
 * (capreq.h). */
#include "capreq.h"
#include "datadir.h" /* cp_bindir */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CAPTURE_WAIT_S 120

int capreq_memfd(const char *name, const void *data, size_t len)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || write_all(fd, data, len) || lseek(fd, 0, SEEK_SET)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int capreq_event(const char *config, const char *const *args, const struct snap_member *m,
                 size_t nm, char *out, size_t outlen)
{
    char exe[PATH_MAX];
    const char *bindir = cp_bindir();
    snprintf(exe, sizeof(exe), "%s/crashpack-capture", bindir ? bindir : ".");
    const char *argv[64];
    char mspec[8][64];
    size_t n = 0;
    argv[n++] = exe;
    argv[n++] = "--event";
    if (config) {
        argv[n++] = "-c";
        argv[n++] = config;
    }
    for (size_t i = 0; args[i] && n < 40; i++)
        argv[n++] = args[i];
    for (size_t i = 0; i < nm && i < 8; i++) {
        snprintf(mspec[i], sizeof(mspec[i]), "%s=%zu", m[i].name, 5 + i);
        argv[n++] = "--member";
        argv[n++] = mspec[i];
    }
    argv[n] = NULL;
    int st[2];
    if (pipe2(st, O_CLOEXEC)) {
        snprintf(out, outlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t p = fork();
    if (p == 0) {
        int hi[8], hs = fcntl(st[1], F_DUPFD_CLOEXEC, 20);
        for (size_t i = 0; i < nm && i < 8; i++)
            hi[i] = fcntl(m[i].fd, F_DUPFD_CLOEXEC, 20);
        int nul = open("/dev/null", O_RDWR);
        if (hs < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(hs, 4) < 0)
            _exit(126);
        for (size_t i = 0; i < nm && i < 8; i++)
            if (hi[i] < 0 || dup2(hi[i], (int)(5 + i)) < 0)
                _exit(126);
        closefrom((unsigned)(5 + (nm < 8 ? nm : 8)));
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(st[1]);
    if (p < 0) {
        close(st[0]);
        snprintf(out, outlen, "fork: %s", strerror(errno));
        return -1;
    }
    size_t len = 0;
    out[0] = 0;
    for (;;) {
        struct pollfd pf = {st[0], POLLIN, 0};
        if (poll(&pf, 1, CAPTURE_WAIT_S * 1000) <= 0)
            break;
        ssize_t r = read(st[0], out + len, outlen - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (len += (size_t)r) >= outlen - 1)
            break;
    }
    out[len] = 0;
    out[strcspn(out, "\n")] = 0;
    close(st[0]);
    int ws = 0;
    while (waitpid(p, &ws, 0) < 0 && errno == EINTR)
        ;
    if (!strncmp(out, "ok ", 3) || !strncmp(out, "duplicate ", 10))
        return 0;
    if (!out[0])
        snprintf(out, outlen, "crashpack-capture --event %s (status %d): see the kernel log",
                 WIFEXITED(ws) && WEXITSTATUS(ws) == 2 ? "refused its arguments" : "failed",
                 WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    return -1;
}

const char *capreq_socket(const struct cp_config *cfg)
{
    const char *e = getenv("CRASHPACK_AGENT_SOCKET");
    return e && e[0] == '/' ? e : cfg->agent_socket;
}

static long ms_left(const struct timespec *t0, unsigned timeout_ms)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)timeout_ms -
           ((now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000);
}

/* Connects to the agent at sock and sends req and a newline: the descriptor, or -1 (no agent)
 * or -2 (the send failed) with err. */
static int connect_send(const char *sock, const char *req, size_t len, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!sock || strlen(sock) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "no agent socket");
        return -1;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
        snprintf(err, errlen, "no agent at %s: %s", sock, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (write_all(fd, req, len) || write_all(fd, "\n", 1)) {
        snprintf(err, errlen, "agent at %s: send: %s", sock, strerror(errno));
        close(fd);
        return -2;
    }
    return fd;
}

/* Reads the answer line into *buf (grown up to max bytes when grow, else *cap is fixed): 0 with
 * the line NUL-terminated (without its "\n"), or -2 with err. */
static int read_answer(int fd, const char *sock, const struct timespec *t0, unsigned timeout_ms,
                       char **buf, size_t *cap, size_t max, int grow, char *err, size_t errlen)
{
    size_t got = 0;
    for (;;) {
        if (grow && got + 1 >= *cap && *cap < max) {
            size_t ncap = *cap * 2 < max ? *cap * 2 : max;
            char *nb = realloc(*buf, ncap);
            if (!nb)
                break;
            *buf = nb;
            *cap = ncap;
        }
        long left = ms_left(t0, timeout_ms);
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = left > 0 ? poll(&pf, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            snprintf(err, errlen, "agent at %s: no answer within %u ms", sock, timeout_ms);
            return -2;
        }
        ssize_t r = read(fd, *buf + got, *cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0) {
            got += (size_t)r;
            (*buf)[got] = 0;
        }
        char *nl = memchr(*buf, '\n', got);
        if (nl || (r > 0 && got == *cap - 1 && (!grow || *cap >= max)) || (r == 0 && got)) {
            if (nl)
                *nl = 0;
            return 0;
        }
        if (r <= 0)
            break;
    }
    snprintf(err, errlen, "agent at %s: the connection closed without an answer", sock);
    return -2;
}

int capreq_agent(const char *sock, const char *req, size_t len, unsigned timeout_ms, char *reply,
                 size_t rlen, char *err, size_t errlen)
{
    reply[0] = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int fd = connect_send(sock, req, len, err, errlen);
    if (fd < 0)
        return fd;
    size_t cap = rlen;
    int rc = read_answer(fd, sock, &t0, timeout_ms, &reply, &cap, rlen, 0, err, errlen);
    close(fd);
    return rc;
}

int capreq_agent_alloc(const char *sock, const char *req, size_t len, unsigned timeout_ms,
                       size_t max, char **reply, char *err, size_t errlen)
{
    *reply = NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int fd = connect_send(sock, req, len, err, errlen);
    if (fd < 0)
        return fd;
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    int rc = -2;
    if (buf) {
        buf[0] = 0;
        rc = read_answer(fd, sock, &t0, timeout_ms, &buf, &cap, max, 1, err, errlen);
    } else {
        snprintf(err, errlen, "out of memory");
    }
    close(fd);
    if (rc)
        free(buf);
    else
        *reply = buf;
    return rc;
}

/* Copies the open file in to the open file out; 0 or -1 (errno). */
static int copy_fd(int in, int out)
{
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -1 : 0;
        if (write_all(out, buf, (size_t)n))
            return -1;
    }
}

int capreq_copy_out(const char *bundle, const char *dir, char *out, size_t outlen, char *err,
                    size_t errlen)
{
    const char *name = strrchr(bundle, '/') ? strrchr(bundle, '/') + 1 : bundle;
    struct stat st;
    snprintf(out, outlen, "%s/%s", dir, name);
    int in = open(bundle, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (in < 0 || fstat(in, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", bundle, in < 0 ? strerror(errno) : "not a regular file");
        if (in >= 0)
            close(in);
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* unnamed until it is whole; never through a symlink, never over a file */
    int fd = dfd < 0 ? -1 : openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    int named = 0;
    if (dfd >= 0 && fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
        fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        named = fd >= 0;
    }
    int rc = -1;
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (fd < 0)
        snprintf(err, errlen, "%s: %s", dfd < 0 ? dir : out, strerror(errno));
    else if (copy_fd(in, fd) || fsync(fd))
        snprintf(err, errlen, "%s: %s", out, strerror(errno));
    else if (!named && linkat(AT_FDCWD, self, dfd, name, AT_SYMLINK_FOLLOW))
        snprintf(err, errlen, "%s: %s", out,
                 errno == EEXIST ? "a file of that name is there" : strerror(errno));
    else
        rc = 0;
    if (rc && named)
        unlinkat(dfd, name, 0);
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    close(in);
    return rc;
}
