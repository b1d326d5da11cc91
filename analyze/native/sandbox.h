/* sandbox.h - run untrusted parsing in a forked child with CPU, memory and time limits.
 *
 * sandbox_run() forks; the child sets RLIMIT_CPU, RLIMIT_AS (not in sanitizer builds: ASan's
 * shadow memory needs the address space; CRASHPACK_SANITIZE is defined there), RLIMIT_CORE 0 and
 * PR_SET_DUMPABLE 0 (a crash of the analyzer must not become a crash capture), runs fn(arg, fd)
 * and _exits with its return value. fn writes its result to fd; the parent collects it (at most
 * max_output bytes) until the child exits or the wall-clock limit passes, when the child is
 * killed. A child that crashed or was killed still hands over what it wrote before: callers
 * write results incrementally so that a partial result survives.
 *
 * Ownership: *out is malloc()ed (NUL-terminated) and the caller's. Never prints or exits (in the
 * parent).
 */
#ifndef CRASHPACK_SANDBOX_H
#define CRASHPACK_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

struct sandbox_limits {
    unsigned cpu_s;      /* RLIMIT_CPU, seconds (0: none) */
    unsigned wall_s;     /* killed after this many seconds (0: none) */
    uint64_t as_bytes;   /* RLIMIT_AS (0: none; ignored in sanitizer builds) */
    size_t max_output;   /* bytes collected from the child (more kills it) */
};

typedef int (*sandbox_fn)(void *arg, int out_fd);

/* Returns 0 when the child exited with status 0; 1 when it failed (exit status, signal, time or
 * output limit: `status` says which in words); -1 when it could not be started (status says
 * why). *out and *outlen hold what the child wrote in every case but -1. */
int sandbox_run(sandbox_fn fn, void *arg, const struct sandbox_limits *l, char **out,
                size_t *outlen, char *status, size_t statuslen);

/* The same in two steps, so the caller can work while the child runs: sandbox_start() forks
 * (the limits and the wall-clock deadline start now) and returns a handle, or NULL with `status`
 * saying why; sandbox_finish() collects, waits, frees the handle and returns as sandbox_run().
 * The child's output waits in the pipe meanwhile (it blocks when the pipe is full). */
struct sandbox_child;
struct sandbox_child *sandbox_start(sandbox_fn fn, void *arg, const struct sandbox_limits *l,
                                    char *status, size_t statuslen);
int sandbox_finish(struct sandbox_child *h, char **out, size_t *outlen, char *status,
                   size_t statuslen);

/* Seals the calling process (a sandboxed child, before it parses): no_new_privs and a seccomp
 * filter under which every open by path (open, openat, creat, open_by_handle_at), exec, socket,
 * ptrace, pidfd_open and pidfd_getfd (another process's descriptors), and every change to the
 * file system (mkdir, unlink, rename, link, symlink, chmod, chown, truncate, mknod, mount) fails
 * with EPERM. openat2 stays: the analysis opens files only
 * with it, relative to a directory it holds and confined by RESOLVE_IN_ROOT/RESOLVE_BENEATH
 * (modules.c), which a seccomp filter cannot check itself. Returns 0, or -1 with err set. */
int sandbox_seal(char *err, size_t errlen);

/* Waits for the children sandbox_finish_seen() left to be reaped (a command's last step: their
 * resource use then counts in the process's children, as getrusage and time(1) report it). */
void sandbox_reap(void);

/* Kills the child, waits for it and frees the handle: its output is not wanted. */
void sandbox_cancel(struct sandbox_child *h);

/* sandbox_finish() that hands the output over as it arrives: seen(ctx, buf, len) is called after
 * each read with everything collected so far (buf is NUL-terminated), so the caller can parse it
 * while the child still works. When seen() returns nonzero, the output says the child has done
 * its work (native.c's "end" line): once its end of the pipe closes, the child counts as having
 * exited with status 0 unless it is already known otherwise, and it is reaped later (by the next
 * sandbox_start or sandbox_reap; at most 16 wait) instead of waiting while the kernel tears down
 * its address space (1-2 ms for an analysis child). */
typedef int (*sandbox_seen_fn)(void *ctx, const char *buf, size_t len);
int sandbox_finish_seen(struct sandbox_child *h, sandbox_seen_fn seen, void *ctx, char **out,
                        size_t *outlen, char *status, size_t statuslen);

#endif
