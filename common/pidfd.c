/* pidfd.c - a process held by its pidfd (pidfd.h). */
#include "pidfd.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

long cp_pidfd_pid(int fd)
{
    if (fd < 0)
        return -2;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    size_t len;
    int tr;
    char *info = read_file_at(AT_FDCWD, path, 4096, &len, &tr);
    char *p = info ? strstr(info, "\nPid:") : NULL;
    long pid = p ? strtol(p + 5, NULL, 10) : -2;
    free(info);
    return pid;
}

int cp_pidfd_exited(int fd)
{
    if (cp_pidfd_pid(fd) == -2)
        return -1;
    /* a pidfd polls readable once its process has exited (zombie or reaped) */
    struct pollfd pf = {fd, POLLIN, 0};
    int n;
    while ((n = poll(&pf, 1, 0)) < 0 && errno == EINTR)
        ;
    return n > 0 ? 1 : 0;
}

int cp_pidfd_holds(int fd, pid_t pid)
{
    return pid > 0 && cp_pidfd_pid(fd) == (long)pid && cp_pidfd_exited(fd) == 0;
}

int cp_pidfd_open(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

int cp_peer_pidfd(int sock)
{
    int fd = -1;
    socklen_t l = sizeof(fd);
    if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &l) || fd < 0)
        return -1;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}
