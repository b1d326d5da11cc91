/* rootopen.c - the one opener of files on a process's behalf (rootopen.h). Used by every step of
 * the handler that opens a path the process names (capture/checkpoint.c, capture/logs.c) and by
 * the snapshot's ELF reads (node/snap.c, node/snap_core.c); the enrichment sandbox applies the
 * same openat2 rules in analyze/native/modules.c. */
#include "rootopen.h"
#include "util.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SAVED_GROUPS 64

static long openat2_sys(int dirfd, const char *path, struct open_how *how)
{
    return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

static int same_file(int a, int b)
{
    struct stat x, y;
    return !fstat(a, &x) && !fstat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* ---- the credentials an open runs with: this thread's fsuid, fsgid and groups ---- */

struct as_saved {
    int switched;
    uid_t fsuid;
    gid_t fsgid;
    int ngroups;
    gid_t groups[SAVED_GROUPS];
};

/* Raw system calls: they change the calling thread only (glibc's wrappers of setgroups would
 * change every thread of the process). */
static int as_enter(const struct cp_as *as, struct as_saved *s)
{
    s->switched = 0;
    if (!as)
        return 0;
    if (geteuid() != 0) { /* a user already: only its own files, and no switch to make */
        if (as->uid == geteuid())
            return 0;
        errno = EPERM;
        return -1;
    }
    s->ngroups = (int)syscall(SYS_getgroups, SAVED_GROUPS, s->groups);
    if (s->ngroups < 0)
        return -1;
    gid_t g = as->gid;
    if (as->ngroups > 0 ? syscall(SYS_setgroups, as->ngroups, as->groups)
                        : syscall(SYS_setgroups, 1, &g))
        return -1;
    s->fsgid = (gid_t)syscall(SYS_setfsgid, as->gid);
    s->fsuid = (uid_t)syscall(SYS_setfsuid, as->uid);
    s->switched = 1;
    /* setfsuid/setfsgid say nothing when they fail: ask with an invalid id */
    if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != as->uid ||
        (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != as->gid) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

static void as_leave(struct as_saved *s)
{
    if (!s->switched)
        return;
    int e = errno;
    syscall(SYS_setfsuid, s->fsuid);
    syscall(SYS_setfsgid, s->fsgid);
    syscall(SYS_setgroups, s->ngroups, s->groups);
    s->switched = 0;
    errno = e;
}

/* ---- lookups ---- */

/* Kernels before 5.6: one component at a time with O_NOFOLLOW, refusing any symlink and "..",
 * so the walk can neither leave the base nor be redirected. */
static int walk(int base, const char *path, int last_flags)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = openat(base, ".", O_PATH | O_CLOEXEC);
    char *save = NULL;
    char *comp = strtok_r(buf, "/", &save);
    if (!comp && fd >= 0) { /* the base itself */
        int nfd = openat(fd, ".", last_flags & ~O_NOFOLLOW);
        close(fd);
        return nfd;
    }
    while (fd >= 0 && comp) {
        char *next = strtok_r(NULL, "/", &save);
        if (!strcmp(comp, ".") && next) {
            comp = next;
            continue;
        }
        if (!strcmp(comp, "..")) {
            close(fd);
            errno = EXDEV;
            return -1;
        }
        int nfd =
            openat(fd, comp, next ? O_PATH | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY : last_flags);
        int e = errno;
        close(fd);
        if (nfd < 0 && next && e == ENOTDIR)
            e = ELOOP; /* most likely a symlink among the directories */
        fd = nfd;
        errno = e;
        comp = next;
    }
    return fd;
}

/* An O_PATH handle of path from base (O_NOFOLLOW unless a magic link is to be followed). */
static int open_handle(int base, const char *path, unsigned how)
{
    int magic = (how & CP_OPEN_MAGICLINK) != 0;
    int oflags =
        O_PATH | O_CLOEXEC | (magic ? 0 : O_NOFOLLOW) | ((how & CP_OPEN_DIR) ? O_DIRECTORY : 0);
    struct open_how oh;
    memset(&oh, 0, sizeof(oh));
    oh.flags = (uint64_t)oflags;
    oh.resolve = (magic ? 0 : RESOLVE_NO_MAGICLINKS) |
                 ((how & CP_OPEN_IN_ROOT) ? RESOLVE_IN_ROOT : 0) |
                 ((how & CP_OPEN_BENEATH) ? RESOLVE_BENEATH : 0) |
                 ((how & CP_OPEN_NO_SYMLINKS) ? RESOLVE_NO_SYMLINKS : 0);
    int fd = (int)openat2_sys(base, path, &oh);
    if (fd < 0 && errno == ENOSYS) {
        if (magic)
            return openat(base, path, oflags);
        while (*path == '/')
            path++;
        fd = walk(base, *path ? path : ".", oflags);
    }
    return fd;
}

/* The handle h, checked (a regular file, or a directory with CP_OPEN_DIR) and reopened
 * read-only through /proc/self/fd: the open itself never reaches anything else. Closes h. */
static int reopen_checked(int h, unsigned how, struct stat *st)
{
    int dir = (how & CP_OPEN_DIR) != 0, fd = -1;
    if (fstat(h, st)) {
        int e = errno;
        close(h);
        errno = e;
        return -1;
    }
    if (S_ISLNK(st->st_mode)) {
        close(h);
        errno = ELOOP;
        return -1;
    }
    if (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) {
        close(h);
        errno = PROC_OPEN_ENOTREG;
        return -1;
    }
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", h);
    fd = open(self, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    int e = errno;
    if (fd >= 0 && !same_file(fd, h)) { /* cannot be: the same inode by construction */
        close(fd);
        fd = -1;
        e = EXDEV;
    }
    close(h);
    errno = e;
    return fd;
}

int cp_open_file(int dirfd, const char *path, unsigned how, const struct cp_as *as, struct stat *st)
{
    struct stat tmp;
    if (!st)
        st = &tmp;
    if (dirfd < 0 || !path || !*path) {
        errno = ENOENT;
        return -1;
    }
    struct as_saved s;
    if (as_enter(as, &s)) {
        as_leave(&s);
        return -1;
    }
    int h = open_handle(dirfd, path, how);
    int fd = h < 0 ? -1 : reopen_checked(h, how, st);
    as_leave(&s);
    return fd;
}

int cp_open_mapped(int procfd, uint64_t lo, uint64_t hi, const char *path, uint64_t ino,
                   const struct cp_as *as, struct stat *st)
{
    struct stat tmp;
    if (!st)
        st = &tmp;
    char name[64];
    snprintf(name, sizeof(name), "map_files/%llx-%llx", (unsigned long long)lo,
             (unsigned long long)hi);
    int fd = cp_open_file(procfd, name, CP_OPEN_MAGICLINK, as, st);
    if (fd >= 0 || (errno != EPERM && errno != EACCES) || !path || path[0] != '/' || !ino)
        return fd;
    /* no map_files for us: the path inside its root, if it is still the mapped inode */
    int rootfd = openat(procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    fd = rootfd >= 0 ? cp_open_file(rootfd, path, CP_OPEN_IN_ROOT, as, st) : -1;
    if (rootfd >= 0)
        close(rootfd);
    if (fd >= 0 && (uint64_t)st->st_ino != ino) {
        close(fd);
        fd = -1;
        errno = ESTALE;
    }
    return fd;
}

int cp_proc_owner(int procfd, struct cp_as *as)
{
    struct stat st;
    if (procfd < 0 || fstat(procfd, &st))
        return -1;
    as->uid = st.st_uid;
    as->gid = st.st_gid;
    /* its supplementary groups too: a file it reads through one is one it could open */
    size_t len;
    int tr;
    char *status = read_file_at(procfd, "status", 1 << 16, &len, &tr);
    as->ngroups = cp_status_groups(status, as->groups, CP_AS_GROUPS);
    if (as->ngroups < 0)
        as->ngroups = 0;
    free(status);
    return 0;
}

/* ---- a process's root ---- */

int proc_root_open(struct proc_root *r, int procfd)
{
    r->rootfd = r->cwdfd = -1;
    r->cwd[0] = 0;
    if (procfd < 0) {
        errno = ENOENT;
        return -1;
    }
    /* the magic links, followed once, here, to the process's own root and working directory
     * (its mount namespace's); every later lookup starts from these handles */
    r->rootfd = openat(procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r->rootfd < 0)
        return -1;
    r->cwdfd = openat(procfd, "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char root[PATH_MAX], cwd[PATH_MAX];
    ssize_t rl = readlinkat(procfd, "root", root, sizeof(root) - 1);
    ssize_t cl = r->cwdfd >= 0 ? readlinkat(procfd, "cwd", cwd, sizeof(cwd) - 1) : -1;
    if (rl <= 0 || cl <= 0)
        return 0;
    root[rl] = cwd[cl] = 0;
    /* the working directory's text relative to the root's text, e.g. root /srv/c, cwd
     * /srv/c/work -> /work; trusted only when that path, resolved inside the root, is the
     * working directory itself */
    const char *in = NULL;
    size_t n = (size_t)rl;
    if (!strcmp(root, "/"))
        in = cwd;
    else if (!strncmp(cwd, root, n) && (cwd[n] == '/' || !cwd[n]))
        in = cwd[n] ? cwd + n : "/";
    if (in && in[0] == '/') {
        struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
        int fd = (int)openat2_sys(r->rootfd, in, &how);
        if (fd >= 0 && same_file(fd, r->cwdfd))
            snprintf(r->cwd, sizeof(r->cwd), "%s", in);
        if (fd >= 0)
            close(fd);
    }
    return 0;
}

void proc_root_close(struct proc_root *r)
{
    if (r->rootfd >= 0)
        close(r->rootfd);
    if (r->cwdfd >= 0)
        close(r->cwdfd);
    r->rootfd = r->cwdfd = -1;
}

int proc_open(const struct proc_root *r, const char *path, int flags, unsigned opts,
              struct stat *st)
{
    struct stat tmp;
    if (!st)
        st = &tmp;
    if (r->rootfd < 0 || !path || !*path) {
        errno = ENOENT;
        return -1;
    }
    unsigned how = (opts & PROC_OPEN_STRICT) ? CP_OPEN_NO_SYMLINKS : 0;
    if (flags & O_DIRECTORY)
        how |= CP_OPEN_DIR;
    char joined[PATH_MAX];
    int base = r->rootfd;
    const char *rel = path;
    if (path[0] == '/') {
        how |= CP_OPEN_IN_ROOT;
    } else if (r->cwd[0]) {
        /* relative: from the working directory, as a path inside the root, so `..` stops at
         * the root as it does for the process */
        if (snprintf(joined, sizeof(joined), "%s/%s", r->cwd, path) >= (int)sizeof(joined)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        rel = joined;
        how |= CP_OPEN_IN_ROOT;
    } else if (r->cwdfd >= 0) {
        base = r->cwdfd; /* the working directory is not known inside the root: beneath it */
        how |= CP_OPEN_BENEATH;
    } else {
        errno = ENOENT;
        return -1;
    }
    while (*rel == '/' && rel[1] == '/')
        rel++;
    if (!(flags & O_PATH))
        return cp_open_file(base, rel, how, NULL, st);
    int fd = open_handle(base, rel, how);
    if (fd >= 0 && fstat(fd, st)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}
