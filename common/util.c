/* util.c - I/O helpers shared by the handler's steps (see util.h). */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += n;
        off += n;
        len -= (size_t)n;
    }
    return 0;
}

char *read_file_at(int dirfd, const char *name, size_t max, size_t *len, int *truncated)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return NULL;
    }
    *truncated = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                char c;
                if (read(fd, &c, 1) > 0)
                    *truncated = 1;
                break;
            }
            size_t ncap = cap * 2 > max ? max : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb)
                break;
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (n == 0) {
                int e = errno;
                free(buf);
                close(fd);
                errno = e;
                return NULL;
            }
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *len = n;
    return buf;
}

double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int cp_pci_norm(const char *in, char *out, size_t n)
{
    unsigned long part[3] = {0, 0, 0}, fn = 0;
    int k = 0;
    const char *p = in;
    if (n)
        out[0] = 0;
    if (!strncasecmp(p, "PCI:", 4))
        p += 4;
    for (;;) {
        size_t d = strspn(p, "0123456789abcdefABCDEF");
        if (!d || d > 8 || k == 3)
            return -1;
        char *e;
        part[k++] = strtoul(p, &e, 16);
        p = e;
        if (*p != ':')
            break;
        p++;
    }
    if (*p == '.') {
        p++;
        if (!strchr("01234567", *p) || !*p)
            return -1;
        fn = (unsigned long)(*p++ - '0');
    }
    if (k < 2 || (*p && strchr("0123456789abcdefABCDEF.:", *p)))
        return -1;
    unsigned long dom = k == 3 ? part[0] : 0, bus = part[k - 2], dev = part[k - 1];
    if (dom > 0xffff || bus > 0xff || dev > 0x1f || n < 16)
        return -1;
    snprintf(out, n, "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn);
    return 0;
}

void name_escape(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src && *src && i + 1 < n; src++) {
        char c = *src;
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '_' || c == '+' || c == '-';
        dst[i++] = keep ? c : '_';
    }
    if (i && dst[0] == '.')
        dst[0] = '_';
    dst[i] = 0;
}

void kmsg_log(int fd, const char *fmt, ...)
{
    if (fd < 0)
        return;
    char line[512];
    int k = snprintf(line, sizeof(line), "<%d>crashpack: ", 3 * 8 + 5); /* daemon.notice */
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + k, sizeof(line) - (size_t)k, fmt, ap);
    va_end(ap);
    size_t len = (size_t)k + (m > 0 ? (size_t)m : 0);
    if (len >= sizeof(line))
        len = sizeof(line) - 1;
    ssize_t r = write(fd, line, len);
    (void)r;
}

int reap_child(pid_t p, int kill_it)
{
    if (kill_it)
        kill(p, SIGKILL);
    int st;
    for (int i = 0; i < 100; i++) {
        pid_t r = waitpid(p, &st, WNOHANG);
        if (r == p)
            return st;
        if (r < 0)
            return -1;
        usleep(2000);
    }
    return -1;
}

int cp_stat_field(const char *stat, int field, unsigned long long *out)
{
    const char *p = strrchr(stat, ')');
    if (!p || field < 3)
        return -1;
    p++;
    for (int f = 3; f <= field; f++) {
        while (*p == ' ')
            p++;
        if (f == field)
            return sscanf(p, "%llu", out) == 1 ? 0 : -1;
        p = strchr(p, ' ');
        if (!p)
            return -1;
    }
    return -1;
}

int cp_status_groups(const char *status, gid_t *out, int max)
{
    const char *p = status ? strstr(status, "\nGroups:") : NULL;
    if (!p)
        return -1;
    p += 8;
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p < '0' || *p > '9')
            break;
        char *end;
        unsigned long g = strtoul(p, &end, 10);
        if (n == max || g > 0xfffffffeUL)
            return -1;
        out[n++] = (gid_t)g;
        p = end;
    }
    return *p == '\n' || !*p ? n : -1;
}

unsigned long long cp_proc_stat(pid_t pid, int field)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, path, 1 << 16, &len, &tr);
    unsigned long long v = 0;
    if (!s || cp_stat_field(s, field, &v))
        v = 0;
    free(s);
    return v;
}

unsigned long long cp_start_ticks(pid_t pid)
{
    return cp_proc_stat(pid, 22);
}

pid_t cp_nspid_last(const char *status, pid_t dflt)
{
    const char *p = status ? strstr(status, "\nNSpid:") : NULL;
    pid_t v = dflt;
    if (!p)
        return v;
    for (p += 7; *p && *p != '\n';) {
        while (*p == ' ' || *p == '\t')
            p++;
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p)
            break;
        if (n > 0 && n <= 0x3fffffff)
            v = (pid_t)n;
        p = end;
    }
    return v;
}

pid_t cp_ns_pid(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, path, 1 << 16, &len, &tr);
    pid_t v = s ? cp_nspid_last(s, 0) : 0;
    free(s);
    return v;
}

char *read_fd_max(int fd, size_t max, size_t *len, int *over)
{
    size_t cap = max < (1u << 16) ? max : (1u << 16), n = 0;
    char *buf = malloc(cap + 1);
    *over = 0;
    while (buf) {
        if (n == cap) {
            if (cap >= max) {
                char c;
                ssize_t r;
                while ((r = read(fd, &c, 1)) < 0 && errno == EINTR)
                    ;
                *over = r > 0;
                break;
            }
            size_t nc = cap * 2 < max ? cap * 2 : max;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}
