/* test_seal.c - sandbox_seal (analyze/native/sandbox.c), the seal of the enrichment's analysis:
 * afterwards pidfd_open and pidfd_getfd fail with EPERM (issue 22: no other process's
 * descriptors), as do an open by path, socket, socketpair, exec and ptrace, while reading a
 * descriptor already held still works. Each check runs in a forked child (a seal is for good);
 * before sealing, the child checks that the same calls work, so the EPERM is the seal's. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static int fails;

static void expect(const char *what, long rc, int want_errno)
{
    int ok = want_errno ? rc == -1 && errno == want_errno : rc >= 0;
    if (!ok) {
        fprintf(stderr, "FAIL: %s: rc %ld errno %d (%s), expected %s\n", what, rc, errno,
                strerror(errno), want_errno ? strerror(want_errno) : "success");
        fails++;
    } else {
        printf("ok: %s\n", what);
    }
}

static int sealed_child(void)
{
    int p[2];
    char c;
    if (pipe(p) || write(p[1], "x", 1) != 1)
        return 1;
    /* unsealed: each works (pidfd_getfd on this process's own pidfd: no ptrace check fails) */
    long self = syscall(SYS_pidfd_open, getpid(), 0);
    expect("before the seal: pidfd_open works", self, 0);
    if (self < 0)
        return 1;
    long got = syscall(SYS_pidfd_getfd, (int)self, p[0], 0);
    expect("before the seal: pidfd_getfd works", got, 0);
    if (got >= 0)
        close((int)got);
    char err[256];
    if (sandbox_seal(err, sizeof(err))) {
        fprintf(stderr, "FAIL: sandbox_seal: %s\n", err);
        return 1;
    }
    expect("sealed: pidfd_open fails with EPERM", syscall(SYS_pidfd_open, getppid(), 0), EPERM);
    expect("sealed: pidfd_getfd fails with EPERM", syscall(SYS_pidfd_getfd, (int)self, p[0], 0),
           EPERM);
    expect("sealed: openat by path fails with EPERM", openat(AT_FDCWD, "/", O_RDONLY), EPERM);
    expect("sealed: socket fails with EPERM", socket(AF_UNIX, SOCK_STREAM, 0), EPERM);
    int sp[2];
    expect("sealed: socketpair fails with EPERM", socketpair(AF_UNIX, SOCK_STREAM, 0, sp), EPERM);
    expect("sealed: ptrace fails with EPERM", ptrace(PTRACE_ATTACH, getppid(), 0, 0), EPERM);
    char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
    expect("sealed: execve fails with EPERM", execve(argv[0], argv, envp), EPERM);
    expect("sealed: read of a descriptor held still works", read(p[0], &c, 1), 0);
    return fails ? 1 : 0;
}

int main(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        int rc = sealed_child();
        fflush(NULL);
        _exit(rc);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "FAIL: the sealed child ended with status 0x%x\n", st);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
