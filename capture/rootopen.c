/* rootopen.c - the one function that opens files on the crashed process's behalf, inside its
 * root (rootopen.h). Used by every step that opens a path the process names: checkpoint.c, logs.c
 * (and, through `crashpack enrich --root-fd`, the same openat2 rules in analyze/native/modules.c). */
#include "rootopen.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long openat2_sys(int dirfd, const char *path, struct open_how *how)
{
    return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

static int same_file(int a, int b)
{
    struct stat x, y;
    return !fstat(a, &x) && !fstat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

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

/* Kernels before 5.6: one component at a time with O_NOFOLLOW, refusing any symlink and "..",
 * so the walk can neither leave the process's root nor be redirected. */
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
        int nfd = openat(fd, comp, next ? O_PATH | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY
                                        : last_flags);
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
    int oflags = (flags & O_PATH) ? O_PATH | (flags & O_DIRECTORY)
                                  : O_RDONLY | (flags & O_DIRECTORY);
    oflags |= O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    if (oflags & O_PATH)
        oflags &= ~(O_NONBLOCK | O_NOCTTY); /* openat2 refuses them with O_PATH */
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)oflags;
    how.resolve = RESOLVE_NO_MAGICLINKS | ((opts & PROC_OPEN_STRICT) ? RESOLVE_NO_SYMLINKS : 0);
    char joined[PATH_MAX];
    int base = r->rootfd;
    const char *rel = path;
    if (path[0] == '/') {
        how.resolve |= RESOLVE_IN_ROOT;
    } else if (r->cwd[0]) {
        /* relative: from the working directory, as a path inside the root, so `..` stops at
         * the root as it does for the process */
        if (snprintf(joined, sizeof(joined), "%s/%s", r->cwd, path) >= (int)sizeof(joined)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        rel = joined;
        how.resolve |= RESOLVE_IN_ROOT;
    } else if (r->cwdfd >= 0) {
        base = r->cwdfd; /* the working directory is not known inside the root: beneath it */
        how.resolve |= RESOLVE_BENEATH;
    } else {
        errno = ENOENT;
        return -1;
    }
    while (*rel == '/' && rel[1] == '/')
        rel++;
    int fd = (int)openat2_sys(base, rel, &how);
    if (fd < 0 && errno == ENOSYS) {
        while (*rel == '/')
            rel++;
        fd = walk(base, *rel ? rel : ".", oflags);
    }
    if (fd < 0)
        return -1;
    if (fstat(fd, st)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!(flags & (O_PATH | O_DIRECTORY)) && !S_ISREG(st->st_mode)) {
        close(fd);
        errno = PROC_OPEN_ENOTREG;
        return -1;
    }
    return fd;
}
