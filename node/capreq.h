/* capreq.h - asking for the bundle of a death without a core, shared by `crashpack agent` and
 * `crashpack run`: crashpack-capture --event run directly (root only), and the client side of the
 * agent's socket (one JSON line out, one back; docs/agent.md). */
#ifndef CRASHPACK_CAPREQ_H
#define CRASHPACK_CAPREQ_H
#include "config.h"
#include "snap.h" /* struct snap_member */

#include <stddef.h>

/* A memfd holding data, positioned at its start (close-on-exec), or -1. */
int capreq_memfd(const char *name, const void *data, size_t len);

/* Runs <bindir>/crashpack-capture --event [-c config] ARGS... with the members handed over on
 * descriptors 5... (--member NAME=FD) and the finisher's result line read from fd 4 ("ok PATH",
 * "duplicate PATH", "failed ..."), which is left in out. 0 when it published the bundle or found
 * the death already captured; -1 with out saying why. Waits at most 120 s for the line. */
int capreq_event(const char *config, const char *const *args, const struct snap_member *m,
                 size_t nm, char *out, size_t outlen);

/* The agent's socket: $CRASHPACK_AGENT_SOCKET when set, else the config's agent_socket. */
const char *capreq_socket(const struct cp_config *cfg);

/* Sends one request line (req, len bytes, without its "\n") to the agent at sock and reads its
 * one-line answer into reply (NUL-terminated, without the "\n"), waiting at most timeout_ms.
 * 0: an answer came; -1: no agent there (nothing listens, or no socket), err says so; -2: the
 * agent did not answer in time or the connection broke, err says so. */
int capreq_agent(const char *sock, const char *req, size_t len, unsigned timeout_ms, char *reply,
                 size_t rlen, char *err, size_t errlen);
/* The same, the answer malloc()ed into *reply (the caller frees it), at most max bytes: for the
 * answers to knowledge base queries, which can be long. */
int capreq_agent_alloc(const char *sock, const char *req, size_t len, unsigned timeout_ms,
                       size_t max, char **reply, char *err, size_t errlen);
/* With `crashpack run -o DIR`: a copy of the published bundle in dir, under its own name, made
 * with the caller's credentials (a user's run copies from the node's bundle directory, which the
 * capture made readable to that user, into a directory of theirs: root never writes there on a
 * user's behalf). Written unnamed (O_TMPFILE) and linked when whole, so never through a symlink
 * nor over a file. 0 with the copy's path in out, or -1 with err. */
int capreq_copy_out(const char *bundle, const char *dir, char *out, size_t outlen, char *err,
                    size_t errlen);
#endif
