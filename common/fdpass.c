/* fdpass.c - see fdpass.h. */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int cp_fd_send(int sock, const char *text, const int *fds, size_t n)
{
    union {
        char buf[CMSG_SPACE(CP_FDPASS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    if (n > CP_FDPASS_MAX) {
        errno = EINVAL;
        return -1;
    }
    memset(&u, 0, sizeof(u));
    struct iovec iov = {(void *)text, strlen(text)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n) {
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
    }
    ssize_t w;
    while ((w = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (w >= 0 && (size_t)w != iov.iov_len) {
        errno = EMSGSIZE;
        return -1;
    }
    return w < 0 ? -1 : 0;
}

/* The control messages: descriptors and credentials; anything else marks it truncated. */
static void take_cmsgs(struct msghdr *mh, struct cp_fd_msg *m)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                if (m->nfds < CP_FDPASS_MAX) {
                    m->fds[m->nfds++] = fd;
                } else {
                    close(fd);
                    m->truncated = 1;
                }
            }
        } else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
                   cm->cmsg_len == CMSG_LEN(sizeof(struct ucred)) && !m->creds) {
            struct ucred uc;
            memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
            m->creds = 1;
            m->pid = uc.pid;
            m->uid = uc.uid;
            m->gid = uc.gid;
        } else {
            m->truncated = 1;
        }
    }
}

int cp_fd_recv(int sock, struct cp_fd_msg *m)
{
    union {
        char buf[CMSG_SPACE(CP_FDPASS_MAX * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } u;
    memset(m, 0, sizeof(*m));
    struct iovec iov = {m->text, sizeof(m->text) - 1};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t r;
    while ((r = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (r <= 0)
        return r < 0 ? -1 : 0;
    m->len = (size_t)r;
    m->text[r] = 0;
    take_cmsgs(&mh, m);
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || strlen(m->text) != m->len)
        m->truncated = 1;
    return 1;
}

void cp_fd_msg_close(struct cp_fd_msg *m)
{
    for (size_t i = 0; i < m->nfds; i++)
        close(m->fds[i]);
    m->nfds = 0;
}
