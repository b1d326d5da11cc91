/* fdgrab.c - the attacker of tests/e2e/test_enrich_fdleak.sh (issue 22, item 1): a process of the
 * enrichment's own uid that steals descriptors from every process of that uid, as fast as it can.
 *
 *   fdgrab UID STOPFILE OUT [--active]
 *
 * Until STOPFILE exists it scans /proc for the processes of UID (a process whose /proc/PID is owned
 * by UID: a process that is not dumpable shows as root's, and pidfd_getfd on it fails anyway) and
 * takes each one's descriptors 3..64 with pidfd_open + pidfd_getfd. Every descriptor it gets is
 * described (fstat, readlink of /proc/self/fd/N) on a line of OUT:
 *     got pid=PID fd=N via=getfd|recv|bait type=reg|dir|sock|fifo|chr|other path=PATH
 * With --active it also attacks what it gets: from a socket it receives whatever is queued
 * (SCM_RIGHTS), and it sends the socket one end of a fresh socketpair of its own (as the
 * enrichment's hello would) and watches the other end for descriptors sent back to it.
 * At the end, OUT gets the line
 *     summary passes=P targets=T pidfds=N taken=G baits=B
 * (targets: distinct processes of UID seen; pidfds: pidfd_open that worked; taken: descriptors
 * got). Exit 0, or 2 on a usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define FD_LO 3
#define FD_HI 64
#define MAX_BAITS 256
#define MAX_SEEN 4096

static FILE *out;
static long passes, pidfds, taken, nbaits_total;
static int baits[MAX_BAITS], bait_pid[MAX_BAITS], nbaits;
static int seen[MAX_SEEN], nseen;

static const char *kind(mode_t m)
{
    return S_ISREG(m)    ? "reg"
           : S_ISDIR(m)  ? "dir"
           : S_ISSOCK(m) ? "sock"
           : S_ISFIFO(m) ? "fifo"
           : S_ISCHR(m)  ? "chr"
                         : "other";
}

static void note_target(int pid)
{
    for (int i = 0; i < nseen; i++)
        if (seen[i] == pid)
            return;
    if (nseen < MAX_SEEN)
        seen[nseen++] = pid;
}

/* Receives whatever descriptors are queued on s (non-blocking) and describes them. */
static void drain(int s, int pid, const char *via);

static void describe(int fd, int pid, int target_fd, const char *via, int active)
{
    struct stat st;
    char link[64], path[4096] = "?";
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    path[n > 0 ? n : 1] = 0;
    if (fstat(fd, &st))
        memset(&st, 0, sizeof(st));
    taken++;
    fprintf(out, "got pid=%d fd=%d via=%s type=%s path=%s\n", pid, target_fd, via, kind(st.st_mode),
            path);
    fflush(out);
    if (active && S_ISSOCK(st.st_mode)) {
        drain(fd, pid, "recv");
        int sp[2];
        if (nbaits < MAX_BAITS && !socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
            char msg[] = "crashpack-enrich/1";
            char cbuf[CMSG_SPACE(sizeof(int))];
            struct iovec iov = {msg, sizeof(msg) - 1};
            struct msghdr mh = {.msg_iov = &iov,
                                .msg_iovlen = 1,
                                .msg_control = cbuf,
                                .msg_controllen = sizeof(cbuf)};
            struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(cm), &sp[1], sizeof(int));
            if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
                baits[nbaits] = sp[0];
                bait_pid[nbaits++] = pid;
                nbaits_total++;
            } else {
                close(sp[0]);
            }
            close(sp[1]);
        }
    }
    close(fd);
}

static void drain(int s, int pid, const char *via)
{
    for (int round = 0; round < 8; round++) {
        char buf[256], cbuf[CMSG_SPACE(16 * sizeof(int))];
        struct iovec iov = {buf, sizeof(buf)};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        if (recvmsg(s, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
            return;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < n; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                describe(fd, pid, -1, via, 0);
            }
        }
    }
}

static void attack(int pid, int active)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0)
        return;
    pidfds++;
    for (int fd = FD_LO; fd <= FD_HI; fd++) {
        int got = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
        if (got >= 0)
            describe(got, pid, fd, "getfd", active);
        else if (errno == EPERM || errno == ESRCH)
            break; /* not ours (any more): the other descriptors fail the same way */
    }
    close(pfd);
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || (argc == 5 && strcmp(argv[4], "--active"))) {
        fprintf(stderr, "usage: fdgrab UID STOPFILE OUT [--active]\n");
        return 2;
    }
    uid_t uid = (uid_t)strtoul(argv[1], NULL, 10);
    int active = argc == 5;
    if (!(out = fopen(argv[3], "w"))) {
        perror(argv[3]);
        return 2;
    }
    int self = getpid();
    DIR *d = opendir("/proc");
    if (!d) {
        perror("/proc");
        return 2;
    }
    for (;;) {
        if (passes % 64 == 0 && access(argv[2], F_OK) == 0)
            break;
        passes++;
        rewinddir(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            char *end;
            long pid = strtol(e->d_name, &end, 10);
            struct stat st;
            if (*end || pid <= 0 || pid == self || fstatat(dirfd(d), e->d_name, &st, 0) ||
                st.st_uid != uid)
                continue;
            note_target((int)pid);
            attack((int)pid, active);
        }
        for (int i = 0; i < nbaits; i++)
            drain(baits[i], bait_pid[i], "bait");
    }
    closedir(d);
    for (int i = 0; i < nbaits; i++)
        close(baits[i]);
    fprintf(out, "summary passes=%ld targets=%d pidfds=%ld taken=%ld baits=%ld\n", passes, nseen,
            pidfds, taken, nbaits_total);
    fclose(out);
    return 0;
}
