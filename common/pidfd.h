/* pidfd.h - a process held by its pidfd, not by its pid number (libc only, lib cputil).
 *
 * A pid is reused once its process is reaped; a pidfd always means the one process it was made
 * for. To act on a process through /proc/<pid> (or any call that takes a pid), do it, then ask
 * the pidfd whether that process still holds the pid (cp_pidfd_holds): while it does, the pid
 * cannot have named anything else in between, so what was opened or read is that process's. */
#ifndef CRASHPACK_PIDFD_H
#define CRASHPACK_PIDFD_H
#include <sys/types.h>

/* The pid a pidfd's process has in this process's pid namespace, from /proc/self/fdinfo:
 * > 0 a process not yet reaped, -1 one that has been (the kernel prints "Pid: -1"), -2 when fd
 * is no pidfd at all. */
long cp_pidfd_pid(int fd);

/* 1 when the pidfd's process has exited (a zombie, or reaped), 0 while it runs, -1 when fd is no
 * pidfd. */
int cp_pidfd_exited(int fd);

/* 1 when the pidfd's process still holds pid and has not exited, else 0. */
int cp_pidfd_holds(int fd, pid_t pid);

/* A pidfd of pid (pidfd_open, close-on-exec), or -1. */
int cp_pidfd_open(pid_t pid);

/* The pidfd of a Unix socket's peer, taken when it connected (SO_PEERPIDFD, Linux 6.5+; on 6.9+
 * also for a peer that has exited since, whose fdinfo then shows Pid: -1), close-on-exec; -1
 * with errno ENOPROTOOPT on older kernels. */
int cp_peer_pidfd(int sock);
#endif
