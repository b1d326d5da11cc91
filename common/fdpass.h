/* fdpass.h - descriptors over a Unix socket (SCM_RIGHTS), with the sender's credentials
 * (SCM_CREDENTIALS, on a socket with SO_PASSCRED): the handshake between the capture finisher
 * (capture/enrich.c) and `crashpack enrich --socket-fd` (cli/cmd_enrich.c), described in
 * docs/capture.md, "Descriptors and the enrichment". libc only (lib cputil).
 */
#ifndef CRASHPACK_FDPASS_H
#define CRASHPACK_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* The enricher's one message on the socket it was started with: carries one end of a socketpair
 * it made once it was no longer dumpable. */
#define CP_ENRICH_HELLO "crashpack-enrich/1"
/* The finisher's answer on that socketpair: "crashpack-fds/1 bundle" or "crashpack-fds/1 bundle
 * root", with the bundle (and root) descriptors in that order. */
#define CP_ENRICH_FDS "crashpack-fds/1 bundle"
#define CP_ENRICH_FDS_ROOT "crashpack-fds/1 bundle root"

#define CP_FDPASS_MAX 4   /* descriptors one message may carry */
#define CP_FDPASS_TEXT 64 /* room for a message's text */

/* Sends `text` and the n descriptors (SCM_RIGHTS, n <= CP_FDPASS_MAX) as one message, without
 * blocking. 0, or -1 with errno. */
int cp_fd_send(int sock, const char *text, const int *fds, size_t n);

struct cp_fd_msg {
    char text[CP_FDPASS_TEXT]; /* NUL-terminated (a NUL inside counts as truncated) */
    size_t len;
    int fds[CP_FDPASS_MAX]; /* received close-on-exec */
    size_t nfds;
    int creds; /* SCM_CREDENTIALS came with it: */
    pid_t pid; /*   the sender's pid (the kernel's word, unless the sender had CAP_SYS_ADMIN) */
    uid_t uid;
    gid_t gid;
    int truncated; /* the text or the control data did not fit, or other control messages came */
};

/* Receives one message without blocking. 1: one message (m filled; cp_fd_msg_close closes its
 * descriptors); 0: end of stream (the peer closed); -1 with errno (EAGAIN: nothing yet). */
int cp_fd_recv(int sock, struct cp_fd_msg *m);
void cp_fd_msg_close(struct cp_fd_msg *m);

#endif
