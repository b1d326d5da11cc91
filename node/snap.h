/* snap.h - capture a live process into a bundle: crashpack's own core (snap_core.h) handed to
 * crashpack-capture --snap, so the bundle and its evidence are the crash path's. */
#ifndef CRASHPACK_SNAP_H
#define CRASHPACK_SNAP_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include <sys/types.h>

struct snap_request {
    pid_t pid;
    int full;
    unsigned timeout_ms;    /* per-thread stop timeout; 0: the default */
    const char *config;     /* crashpack.conf, or NULL for the default */
    const char *bundle_dir; /* -o, or NULL for the configured one */
    const char *trigger;    /* "snap" or "watch" */
    const char *reason;     /* why, recorded in the manifest (capture.reason) */
    const char *kind;       /* "exception": the process reported an uncaught exception; NULL */
    int pidfd;              /* > 0: the process's pidfd (the agent's peer); else one is opened
                             * here. Every step checks the pid is still that process's */
    const char *room;       /* "own": a user's request (crashpack-capture --room own); NULL */
    int python_locals;      /* Python frames' locals in the report (snap --locals; also when
                             * the configuration says python_locals = on): snap.json says so,
                             * and a slim core keeps their pages */
    /* members handed to the capture (crashpack-capture --member NAME=FD): exception.json, ... */
    struct snap_member {
        const char *name;
        int fd;
    } members[4];
    size_t nmembers;
};

/* Stops, dumps, releases pid, and has the bundle written. The process is held by its pidfd:
 * /proc/<pid> is opened and then the pidfd asked whether its process still holds the pid, before
 * the stop, after it, and before the capture is started (which gets the pidfd too); a process
 * that has gone is not snapped (its pid may be another process's). The futex words' symbols are
 * read from the files the process maps, through map_files, as its owner (rootopen.h). On success
 * returns 0, the bundle's path in bundle (may be empty when the capture did not say), and the stop
 * report in *info (crashpack-snap/1, owned by the caller, may be NULL). Returns -1 with err set
 * otherwise. */
int snap_pid(const struct snap_request *rq, char *bundle, size_t blen, cJSON **info, char *err,
             size_t errlen);
#endif
