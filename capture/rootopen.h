/* rootopen.h - the one way the handler and its helpers open a file on the crashed process's
 * behalf (checkpoints, the ML files and logs the environment names, ...): resolved inside the
 * process's root, as the process would resolve it, never through a magic link, never leaving
 * that root, whatever `..`, absolute or symlinked paths it names.
 *
 *   struct proc_root r;
 *   proc_root_open(&r, c->procfd);        as root, while /proc/<pid> is open (O_PATH handles only)
 *   privs_become(c, c->uid, c->gid);      the one switch: the opens below check the crashed uid
 *   int fd = proc_open(&r, path, 0, 0);   a regular file, read-only, or -1 with errno
 *   proc_root_close(&r);
 *
 * Every lookup is openat2() from the root descriptor with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS
 * (absolute paths and symlink targets are taken relative to the process's root, `..` stops at
 * it), O_NOFOLLOW (the last component is never a symlink) and O_NONBLOCK (a FIFO never blocks).
 * Relative paths are joined to the process's working directory expressed inside its root, which
 * proc_root_open verifies (same inode as /proc/<pid>/cwd); when it cannot be (the working
 * directory is outside the root, or was renamed), relative paths resolve beneath the working
 * directory only (RESOLVE_BENEATH: no `..` above it). On kernels without openat2 (< 5.6) the walk
 * is one component at a time, refusing every symlink and `..`. */
#ifndef CRASHPACK_ROOTOPEN_H
#define CRASHPACK_ROOTOPEN_H
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>

struct proc_root {
    int rootfd;         /* O_PATH: the process's root, or -1 (then nothing opens) */
    int cwdfd;          /* O_PATH: its working directory, or -1 */
    char cwd[PATH_MAX]; /* that directory as a path inside the root ("/x/y"), "" when unverified */
};

/* Opens /proc/<pid>/root and /proc/<pid>/cwd (procfd: /proc/<pid>) as O_PATH handles, and finds
 * the working directory inside the root. Returns 0, or -1 with errno when the root is not
 * accessible (r->rootfd -1: every proc_open then fails with ENOENT, never the host's root). */
int proc_root_open(struct proc_root *r, int procfd);
void proc_root_close(struct proc_root *r);

/* proc_open's opts */
#define PROC_OPEN_STRICT 1u /* no symlink in any component, not even inside the root */

/* errno of proc_open for a file that exists but is not a regular file (flags 0) */
#define PROC_OPEN_ENOTREG EMEDIUMTYPE

/* Opens `path` as the process names it. flags:
 *   0            a regular file, read-only (anything else is closed again: errno
 *                PROC_OPEN_ENOTREG, its type in *st);
 *   O_DIRECTORY  a directory, read-only (for fdopendir);
 *   O_PATH [| O_DIRECTORY]  a handle only, of whatever type (a symlink is not followed).
 * O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC are always added. st (may be NULL) gets the
 * fstat of what was opened. Returns the descriptor, or -1 with errno. */
int proc_open(const struct proc_root *r, const char *path, int flags, unsigned opts,
              struct stat *st);
#endif
