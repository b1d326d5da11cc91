/* test_rootopen.c - the one opener of files on a process's behalf (common/rootopen.h) and the
 * pidfd checks (common/pidfd.h):
 *  - a regular file opens; a FIFO (with no writer: an open that would block), a symlink, a
 *    directory and a device are refused without being opened, and nothing blocks;
 *  - RESOLVE_IN_ROOT: `..` and absolute symlinks stay inside the directory given as the root;
 *  - as another uid (root only): a root-only file is refused, a world-readable one opens, and the
 *    thread's credentials are back afterwards;
 *  - map_files (root only): the file a process maps, after its path was replaced by a FIFO and
 *    then by a symlink, opens as the mapped file itself; a user, who has no map_files, opens its
 *    own mapped file by its path, refused once that path is another inode;
 *  - a pidfd says when its process has exited, and when it no longer holds the pid. */
#include "pidfd.h"
#include "rootopen.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static void put(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd >= 0) {
        if (write(fd, text, strlen(text)) < 0)
            perror("write");
        close(fd);
    }
    chmod(path, mode);
}

static int read_is(int fd, const char *text)
{
    char buf[256];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
    if (n < 0)
        return 0;
    buf[n] = 0;
    return !strcmp(buf, text);
}

static void kinds(const char *dir, int dfd)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/file", dir);
    put(p, "regular", 0644);
    snprintf(p, sizeof(p), "%s/fifo", dir);
    mkfifo(p, 0666);
    snprintf(p, sizeof(p), "%s/link", dir);
    symlink("file", p);
    snprintf(p, sizeof(p), "%s/sub", dir);
    mkdir(p, 0755);
    struct stat st;
    int fd = cp_open_file(dfd, "file", CP_OPEN_BENEATH, NULL, &st);
    CHECK(read_is(fd, "regular") && S_ISREG(st.st_mode), "a regular file opens");
    if (fd >= 0)
        close(fd);
    errno = 0;
    fd = cp_open_file(dfd, "fifo", CP_OPEN_BENEATH, NULL, &st);
    CHECK(fd < 0 && errno == PROC_OPEN_ENOTREG && S_ISFIFO(st.st_mode),
          "a FIFO is refused, unopened (no writer: an open would have blocked)");
    errno = 0;
    fd = cp_open_file(dfd, "link", CP_OPEN_BENEATH, NULL, &st);
    CHECK(fd < 0 && errno == ELOOP, "a symlink as the last component is refused");
    errno = 0;
    fd = cp_open_file(dfd, "sub", CP_OPEN_BENEATH, NULL, &st);
    CHECK(fd < 0 && errno == PROC_OPEN_ENOTREG, "a directory is refused");
    fd = cp_open_file(dfd, "sub", CP_OPEN_BENEATH | CP_OPEN_DIR, NULL, &st);
    CHECK(fd >= 0 && S_ISDIR(st.st_mode), "... unless a directory is asked for");
    if (fd >= 0)
        close(fd);
    int root = open("/", O_PATH | O_DIRECTORY);
    errno = 0;
    fd = cp_open_file(root, "dev/null", 0, NULL, &st);
    CHECK(fd < 0 && errno == PROC_OPEN_ENOTREG && S_ISCHR(st.st_mode),
          "a device is refused, unopened");
    close(root);
}

static void in_root(const char *dir, int dfd)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/sub/up", dir);
    symlink("../../../../../..", p); /* far above the root */
    snprintf(p, sizeof(p), "%s/sub/abs", dir);
    symlink("/file", p);
    int fd = cp_open_file(dfd, "sub/up/file", CP_OPEN_IN_ROOT, NULL, NULL);
    CHECK(read_is(fd, "regular"), "IN_ROOT: a symlink far above the root stops at it");
    if (fd >= 0)
        close(fd);
    errno = 0;
    fd = cp_open_file(dfd, "sub/up/file", CP_OPEN_BENEATH, NULL, NULL);
    CHECK(fd < 0 && errno == EXDEV, "BENEATH: the same is refused (%s)", strerror(errno));
    fd = cp_open_file(dfd, "/sub/../file", CP_OPEN_IN_ROOT, NULL, NULL);
    CHECK(read_is(fd, "regular"), "IN_ROOT: an absolute path is the root's");
    if (fd >= 0)
        close(fd);
    struct proc_root r = {.rootfd = dfd, .cwdfd = -1, .cwd = "/"};
    fd = proc_open(&r, "/sub/abs", 0, 0, NULL);
    CHECK(fd < 0 && errno == ELOOP, "proc_open: a symlink as the last component is refused");
    fd = proc_open(&r, "sub/up/file", 0, 0, NULL);
    CHECK(read_is(fd, "regular"), "proc_open: a relative path through a symlink stays inside");
    if (fd >= 0)
        close(fd);
}

static void as_user(const char *dir, int dfd)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/secret", dir);
    put(p, "root only", 0600);
    snprintf(p, sizeof(p), "%s/public", dir);
    put(p, "for all", 0644);
    struct cp_as nobody = {.uid = 65534, .gid = 65534};
    errno = 0;
    int fd = cp_open_file(dfd, "secret", CP_OPEN_BENEATH, &nobody, NULL);
    CHECK(fd < 0 && errno == EACCES, "as uid 65534: a root-only file is refused (%s)",
          strerror(errno));
    fd = cp_open_file(dfd, "public", CP_OPEN_BENEATH, &nobody, NULL);
    CHECK(read_is(fd, "for all"), "as uid 65534: a world-readable file opens");
    if (fd >= 0)
        close(fd);
    /* a supplementary group opens what the group may read, and only with it */
    snprintf(p, sizeof(p), "%s/team", dir);
    put(p, "for the group", 0640);
    CHECK(!chown(p, 0, 4242), "chown to group 4242");
    errno = 0;
    fd = cp_open_file(dfd, "team", CP_OPEN_BENEATH, &nobody, NULL);
    CHECK(fd < 0 && errno == EACCES, "as uid 65534 without group 4242: refused (%s)",
          strerror(errno));
    struct cp_as member = {.uid = 65534, .gid = 65534, .ngroups = 2, .groups = {100, 4242}};
    fd = cp_open_file(dfd, "team", CP_OPEN_BENEATH, &member, NULL);
    CHECK(read_is(fd, "for the group"), "as uid 65534 with supplementary group 4242: it opens");
    if (fd >= 0)
        close(fd);
    gid_t g[8];
    CHECK(cp_status_groups("Name:\tx\nGroups:\t4 24 4242 \nNSpid:\t1\n", g, 8) == 3 &&
              g[0] == 4 && g[2] == 4242,
          "status Groups: parsed");
    CHECK(cp_status_groups("Name:\tx\nGroups:\t\nNSpid:\t1\n", g, 8) == 0, "no groups: 0");
    CHECK(cp_status_groups("Name:\tx\nGroups:\t1 2 3\n", g, 2) == -1, "more than max: -1");
    CHECK(cp_status_groups("Name:\tx\n", g, 8) == -1, "no Groups line: -1");
    fd = cp_open_file(dfd, "secret", CP_OPEN_BENEATH, NULL, NULL);
    CHECK(read_is(fd, "root only"), "root's credentials are back afterwards");
    if (fd >= 0)
        close(fd);
}

static void mapped(const char *dir)
{
    char p[512], q[600];
    snprintf(p, sizeof(p), "%s/mapped", dir);
    put(p, "the mapped file", 0644);
    int fd = open(p, O_RDONLY);
    void *m = fd >= 0 ? mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (m == MAP_FAILED) {
        CHECK(0, "map a file");
        return;
    }
    unlink(p);
    snprintf(q, sizeof(q), "%s (deleted)", p);
    mkfifo(q, 0666); /* where the maps line says the file is */
    int procfd = open("/proc/self", O_RDONLY | O_DIRECTORY);
    uint64_t lo = (uint64_t)(uintptr_t)m, hi = lo + 4096;
    struct cp_as as;
    cp_proc_owner(procfd, &as);
    fd = cp_open_mapped(procfd, lo, hi, q, 0, &as, NULL);
    CHECK(read_is(fd, "the mapped file"), "map_files: the mapped file, not the FIFO at its path");
    if (fd >= 0)
        close(fd);
    unlink(q);
    snprintf(p, sizeof(p), "%s/secret", dir);
    symlink(p, q);
    fd = cp_open_mapped(procfd, lo, hi, q, 0, &as, NULL);
    CHECK(read_is(fd, "the mapped file"), "map_files: the mapped file, not the symlink's target");
    if (fd >= 0)
        close(fd);
    close(procfd);
    munmap(m, 4096);
}

/* A user (no map_files for it) opening a file its own process maps: the path inside its root,
 * only while it is the mapped inode. Child exit status: the failed checks' bits. */
static int user_mapped_child(const char *dir)
{
    if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
        return 64;
    char p[512];
    snprintf(p, sizeof(p), "%s/open/own", dir);
    put(p, "own mapped", 0644);
    int fd = open(p, O_RDONLY);
    struct stat st;
    void *m =
        fd >= 0 && !fstat(fd, &st) ? mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (m == MAP_FAILED)
        return 64;
    int procfd = open("/proc/self", O_RDONLY | O_DIRECTORY), bad = 0;
    uint64_t lo = (uint64_t)(uintptr_t)m;
    fd = cp_open_mapped(procfd, lo, lo + 4096, p, st.st_ino, NULL, NULL);
    bad |= read_is(fd, "own mapped") ? 0 : 1;
    if (fd >= 0)
        close(fd);
    unlink(p);
    put(p, "another file", 0644); /* the same path, another inode */
    errno = 0;
    fd = cp_open_mapped(procfd, lo, lo + 4096, p, st.st_ino, NULL, NULL);
    bad |= fd < 0 && errno == ESTALE ? 0 : 2;
    return bad;
}

static void user_mapped(const char *dir)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/open", dir);
    mkdir(p, 0777);
    chmod(p, 0777);
    pid_t c = fork();
    if (c == 0)
        _exit(user_mapped_child(dir));
    int st = 0;
    waitpid(c, &st, 0);
    int bad = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
    CHECK(bad != 64 && !(bad & 1), "a user without map_files: its own mapped file by its path (%d)",
          bad);
    CHECK(bad != 64 && !(bad & 2), "... refused once the path is another inode (%d)", bad);
}

static void pidfds(void)
{
    int pfd[2];
    if (pipe(pfd))
        return;
    pid_t c = fork();
    if (c == 0) {
        char b;
        close(pfd[1]);
        if (read(pfd[0], &b, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(pfd[0]);
    int fd = cp_pidfd_open(c);
    CHECK(cp_pidfd_holds(fd, c) && cp_pidfd_exited(fd) == 0, "pidfd: a live child holds its pid");
    close(pfd[1]);
    for (int i = 0; i < 200 && cp_pidfd_exited(fd) != 1; i++)
        usleep(10000);
    CHECK(cp_pidfd_exited(fd) == 1 && !cp_pidfd_holds(fd, c), "pidfd: exited (a zombie) is told");
    waitpid(c, NULL, 0);
    CHECK(cp_pidfd_pid(fd) == -1, "pidfd: reaped, its fdinfo says Pid: -1");
    CHECK(cp_pidfd_pid(0) == -2 || cp_pidfd_pid(0) == -1, "pidfd: fd 0 is no pidfd");
    close(fd);
}

int main(void)
{
    char dir[] = "/tmp/cpopen.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    chmod(dir, 0755);
    int dfd = open(dir, O_PATH | O_DIRECTORY);
    kinds(dir, dfd);
    in_root(dir, dfd);
    if (geteuid() == 0) {
        as_user(dir, dfd);
        mapped(dir);
        user_mapped(dir);
    } else {
        printf("skip: as another uid and map_files need root\n");
    }
    pidfds();
    close(dfd);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
    printf(fails ? "%d check(s) failed\n" : "all checks passed\n", fails);
    return fails != 0;
}
