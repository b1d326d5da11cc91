/* rootopen.h - the one way crashpack opens a file on a process's behalf: the handler and its
 * helpers (checkpoints, the ML files and logs the environment names, ...: capture/) and the node
 * service (the ELF files a snapshot reads: node/). Nothing else opens a path a process names, or
 * a file it maps, as root. libc only (lib cputil, which the handler links).
 *
 * The opener, cp_open_file: a handle first (O_PATH, so opening does nothing to what it names: no
 * FIFO blocks, no device acts), resolved by openat2() from a directory descriptor with
 * RESOLVE_NO_MAGICLINKS (and RESOLVE_IN_ROOT or RESOLVE_BENEATH as asked) and O_NOFOLLOW; then
 * fstat(): anything but a regular file is refused; only then the file itself, read-only, reopened
 * through /proc/self/fd/N. With a struct cp_as it runs as that uid/gid (the calling thread's
 * fsuid, fsgid and groups, put back before it returns): a mode or an ACL stops it as it stops the
 * process. Files a process maps are opened by their mapping (/proc/PID/map_files/LO-HI:
 * cp_open_mapped), never by the path its maps show, which it can replace.
 *
 *   struct proc_root r;
 *   proc_root_open(&r, c->procfd);        as root, while /proc/<pid> is open (O_PATH handles only)
 *   privs_become(c, c->uid, c->gid);      the one switch: the opens below check the crashed uid
 *   int fd = proc_open(&r, path, 0, 0);   a regular file, read-only, or -1 with errno
 *   proc_root_close(&r);
 *
 * proc_open's paths are taken as the process would take them: absolute paths and symlink targets
 * relative to the process's root (RESOLVE_IN_ROOT, `..` stops at it), never through a magic link,
 * never a symlink in the last component, never past a FIFO. Relative paths are joined to the
 * process's working directory expressed inside its root, which proc_root_open verifies (same
 * inode as /proc/<pid>/cwd); when it cannot be (the working directory is outside the root, or was
 * renamed), relative paths resolve beneath the working directory only (RESOLVE_BENEATH: no `..`
 * above it). On kernels without openat2 (< 5.6) the walk is one component at a time, refusing
 * every symlink and `..`. */
#ifndef CRASHPACK_ROOTOPEN_H
#define CRASHPACK_ROOTOPEN_H
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* errno of the opener for a file that exists but is not a regular file (or directory, when one
 * was asked for); its type is in *st */
#define PROC_OPEN_ENOTREG EMEDIUMTYPE

/* Whose permissions an open is checked against: uid/gid and the supplementary groups (ngroups of
 * them; 0: gid alone). */
#define CP_AS_GROUPS 64
struct cp_as {
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[CP_AS_GROUPS];
};

/* cp_open_file's resolution (one of the first three, or none: a plain lookup from dirfd) */
#define CP_OPEN_IN_ROOT 1u     /* absolute paths and symlinks relative to dirfd, `..` stops there */
#define CP_OPEN_BENEATH 2u     /* never above dirfd */
#define CP_OPEN_NO_SYMLINKS 4u /* no symlink in any component */
#define CP_OPEN_MAGICLINK 8u   /* the last component is a magic link to follow (map_files) */
#define CP_OPEN_DIR 16u        /* a directory (for fdopendir), not a regular file */

/* Opens path from dirfd as described above: a regular file (or with CP_OPEN_DIR a directory),
 * read-only, close-on-exec. as: NULL for the caller's own credentials. st (may be NULL) gets its
 * fstat. Returns the descriptor, or -1 with errno (PROC_OPEN_ENOTREG: not a regular file; ELOOP:
 * a symlink where none is followed). */
int cp_open_file(int dirfd, const char *path, unsigned how, const struct cp_as *as,
                 struct stat *st);

/* The file a process maps at [lo, hi) (a line of its maps), through procfd's map_files/ (procfd:
 * /proc/<pid>, opened while the process was known to be alive): the inode it mapped, whatever
 * its path is now, read-only, as `as`. map_files needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE;
 * without them (a user snapping a process of its own) path, as the maps line names it, is opened
 * inside the process's root instead, and accepted only when it is the inode ino the line shows.
 * Returns the descriptor or -1 with errno. */
int cp_open_mapped(int procfd, uint64_t lo, uint64_t hi, const char *path, uint64_t ino,
                   const struct cp_as *as, struct stat *st);

/* The owner of /proc/<pid> (procfd): the process's effective uid/gid (and its supplementary groups,
 * from its status) when it is dumpable, root
 * for one that is not; the credentials to open its files with. 0, or -1. */
int cp_proc_owner(int procfd, struct cp_as *as);

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

/* Opens `path` as the process names it, with the caller's credentials. flags:
 *   0            a regular file, read-only (cp_open_file; anything else: errno
 *                PROC_OPEN_ENOTREG, its type in *st);
 *   O_DIRECTORY  a directory, read-only (for fdopendir);
 *   O_PATH [| O_DIRECTORY]  a handle only, of whatever type (a symlink is not followed).
 * st (may be NULL) gets the fstat of what was opened. Returns the descriptor, or -1 with errno. */
int proc_open(const struct proc_root *r, const char *path, int flags, unsigned opts,
              struct stat *st);
#endif
