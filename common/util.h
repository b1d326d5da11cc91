/* util.h - small helpers for the capture handler: I/O that copes with short writes and EINTR,
 * capped reads of /proc files without following symlinks, monotonic time, and the kmsg log line. */
#ifndef CRASHPACK_UTIL_H
#define CRASHPACK_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int write_all(int fd, const void *buf, size_t len);
int pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* Reads up to `max` bytes of dirfd/name (O_NOFOLLOW). Returns a malloc'd buffer (NUL-terminated,
 * caller frees) and sets *len and *truncated; NULL with errno on failure. */
char *read_file_at(int dirfd, const char *name, size_t max, size_t *len, int *truncated);
double now_mono(void);
/* Field `field` (1-based, as proc(5) numbers them) of a /proc/<pid>/stat text, counted after the
 * comm (which may hold spaces and parentheses). 0, or -1 when there is no such field. */
int cp_stat_field(const char *stat, int field, unsigned long long *out);
/* The supplementary groups of a /proc/<pid>/status text ("Groups:"): how many were put in out (at
 * most max), or -1 when the line is not there or lists more than max. */
int cp_status_groups(const char *status, gid_t *out, int max);
/* The start time of pid (field 22: clock ticks since boot), or 0 when it cannot be read. A pid and
 * its start time name one process: a pid alone may be reused. */
unsigned long long cp_start_ticks(pid_t pid);
/* Field `field` (1-based, as proc(5) numbers them) of /proc/<pid>/stat; 0 when unreadable. */
unsigned long long cp_proc_stat(pid_t pid, int field);
/* The last value of the NSpid: line of a /proc/<pid>/status text: the pid (or tid) in the process's
 * own, innermost pid namespace, what its getpid() returns. dflt when there is no such line. */
pid_t cp_nspid_last(const char *status, pid_t dflt);
/* The same for /proc/<pid>/status (0 when unreadable). */
pid_t cp_ns_pid(pid_t pid);
/* Reads fd to its end, at most `max` bytes. Returns a malloc'd buffer (NUL-terminated, caller
 * frees) with *len; *over is set when more than max bytes were there (the rest is unread). NULL
 * when out of memory. */
char *read_fd_max(int fd, size_t max, size_t *len, int *over);
/* A PCI address as the driver, sysfs or a kernel line writes it ("0000:3b:00", "00000000:3B:00.0",
 * "3b:00.0") as "dddd:bb:dd.f" in out (at least 16 bytes); -1 when it is not one. */
int cp_pci_norm(const char *in, char *out, size_t n);
/* Reaps child p (SIGKILLed first when kill_it), but never waits for one stuck in uninterruptible
 * sleep: a few quick looks over ~0.2 s, then it is left to init. Returns the wait status, or -1. */
int reap_child(pid_t p, int kill_it);
/* Escapes a string for use in a file name: keeps [A-Za-z0-9._+-], maps the rest to '_'. */
void name_escape(char *dst, size_t n, const char *src);
/* Appends a printf line to /dev/kmsg via the already-open fd (no-op when fd < 0). */
void kmsg_log(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
