/* snap.c - the handler's "snap" entry: `crashpack snap` runs
 *
 *   crashpack-capture --snap [-c CONFIG] [--bundle-dir DIR] [--mode full|slim]
 *                     [--trigger snap|watch|hook] [--kind exception] [--member NAME=FD]...
 *                     [--reason TEXT] [--pidfd FD] [--room own] PID
 *
 * with its own ELF core of the live process on fd 0 (instead of the kernel's pipe), the stop
 * report (snap.json) on fd 3, and a pipe on fd 4 where the finisher writes the published
 * bundle's path. Everything else is the crash path: same collectors, same bundle, same publish.
 * The identity the kernel would pass as core_pattern specifiers is read from /proc/<pid>, checked
 * against the process's pidfd: the caller's (--pidfd FD, inherited: the process it stopped), or
 * one opened here. A pidfd whose process no longer holds the pid refuses the snapshot. --room
 * own: the capture of a user's request, which the disk guard makes room for only among that
 * user's bundles (guard.c). */
#include "capture.h"
#include "pidfd.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define SNAP_INFO_MAX (16u << 20)

static const char *o_bundle_dir, *o_mode;
static int o_pidfd = -1;

static int status_ids(const char *status, const char *key, unsigned *real)
{
    const char *p = strstr(status, key);
    return p && sscanf(p + strlen(key), "%u", real) == 1 ? 0 : -1;
}

/* One option with its value: 1 when taken (the value used), 0 when a is no such option (or has
 * no value), -1 when its value is not allowed. */
static int snap_option(struct cap *c, const char *a, const char *v)
{
    if (!v)
        return 0;
    if (!strcmp(a, "-c")) {
        c->config_path = v;
    } else if (!strcmp(a, "--bundle-dir")) {
        o_bundle_dir = v;
    } else if (!strcmp(a, "--mode")) {
        o_mode = v;
    } else if (!strcmp(a, "--trigger")) {
        snprintf(c->snap_trigger, sizeof(c->snap_trigger), "%s",
                 !strcmp(v, "watch")  ? "watch"
                 : !strcmp(v, "hook") ? "hook"
                                      : "snap");
    } else if (!strcmp(a, "--kind")) {
        if (strcmp(v, "exception")) /* a live snapshot records no other death */
            return -1;
        snprintf(c->death_kind, sizeof(c->death_kind), "%s", v);
    } else if (!strcmp(a, "--member")) {
        if (cap_member_arg(c, v))
            return -1;
    } else if (!strcmp(a, "--reason")) {
        snprintf(c->snap_reason, sizeof(c->snap_reason), "%s", v);
    } else if (!strcmp(a, "--pidfd")) {
        char *e;
        long fd = strtol(v, &e, 10);
        if (*e || fd < 5 || fd > 1 << 20 || cp_pidfd_pid((int)fd) == -2)
            return -1;
        o_pidfd = (int)fd;
        fcntl(o_pidfd, F_SETFD, FD_CLOEXEC);
    } else if (!strcmp(a, "--room")) {
        if (cap_room_arg(c, v))
            return -1;
    } else {
        return 0;
    }
    return 1;
}

/* The descriptors crashpack snap hands over, when open: the stop report on 3, the pipe for the
 * final name on 4. */
static void snap_fds(struct cap *c)
{
    c->snap_info_fd = fcntl(3, F_GETFD) >= 0 ? 3 : -1;
    c->snap_status_fd = fcntl(4, F_GETFD) >= 0 ? 4 : -1;
    if (c->snap_info_fd >= 0)
        fcntl(c->snap_info_fd, F_SETFD, FD_CLOEXEC);
    if (c->snap_status_fd >= 0)
        fcntl(c->snap_status_fd, F_SETFD, FD_CLOEXEC);
}

/* What the kernel passes as %u %g: the real ids; %d: a non-dumpable process has its /proc
 * directory owned by root. Returns 0, or -1 when /proc/<pid> cannot tell. */
static int snap_ids(struct cap *c, long pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld", pid);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    size_t len;
    int tr;
    char *status = read_file_at(dfd, "status", 1 << 16, &len, &tr);
    unsigned uid = 0, gid = 0;
    int bad = !status || status_ids(status, "\nUid:", &uid) || status_ids(status, "\nGid:", &gid);
    free(status);
    struct stat st;
    if (!bad && fstat(dfd, &st) == 0 && st.st_uid != uid)
        c->dumpable = 0;
    close(dfd);
    if (bad)
        return -1;
    c->uid = uid;
    c->gid = gid;
    return 0;
}

int snap_parse_args(struct cap *c, int argc, char **argv)
{
    c->snap = 1;
    snprintf(c->snap_trigger, sizeof(c->snap_trigger), "snap");
    snprintf(c->snap_reason, sizeof(c->snap_reason), "requested");
    const char *pid_s = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int r = snap_option(c, a, i + 1 < argc ? argv[i + 1] : NULL);
        if (r < 0)
            return -1;
        if (r > 0)
            i++;
        else if (!pid_s && a[0] >= '0' && a[0] <= '9')
            pid_s = a;
        else
            return -1;
    }
    if (!pid_s || (o_mode && strcmp(o_mode, "full") && strcmp(o_mode, "slim")))
        return -1;
    char *e;
    long pid = strtol(pid_s, &e, 10);
    if (*e || pid <= 0 || pid > 0x3fffffff)
        return -1;
    c->pid = c->tid = c->ns_tid = (pid_t)pid;
    c->sig = 0;
    c->crash_time = time(NULL);
    c->rlimit_core = -1;
    c->dumpable = 1;
    snap_fds(c);
    /* the process the caller stopped, or the one that holds the pid now */
    c->pidfd = o_pidfd >= 0 ? o_pidfd : cp_pidfd_open((pid_t)pid);
    if (o_pidfd >= 0 && !cp_pidfd_holds(o_pidfd, (pid_t)pid))
        return -2;
    if (snap_ids(c, pid))
        return -1;
    /* read from /proc/<pid> by number: still that process's only if it holds the pid now */
    if (o_pidfd >= 0 && !cp_pidfd_holds(o_pidfd, (pid_t)pid))
        return -2;
    if (gethostname(c->hostname, sizeof(c->hostname) - 1))
        snprintf(c->hostname, sizeof(c->hostname), "unknown");
    return 0;
}

void snap_config(struct cap *c)
{
    if (o_bundle_dir)
        snprintf(c->cfg.bundle_dir, sizeof(c->cfg.bundle_dir), "%s", o_bundle_dir);
    if (o_mode)
        c->cfg.mode = !strcmp(o_mode, "full") ? CP_MODE_FULL : CP_MODE_SLIM;
}

void snap_collect_info(struct cap *c)
{
    double t = now_mono();
    if (c->snap_info_fd < 0) {
        cap_step(c, "snap.json", "absent", t, "no stop report from crashpack snap");
        return;
    }
    size_t len = 0;
    int truncated = 0;
    char *buf = read_fd_max(c->snap_info_fd, SNAP_INFO_MAX, &len, &truncated);
    close(c->snap_info_fd);
    c->snap_info_fd = -1;
    cJSON *j = buf && !truncated ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (!j) {
        cap_step(c, "snap.json", "failed", t, "%s",
                 truncated ? "stop report over the cap" : "stop report is not JSON");
        return;
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s || bw_add(&c->bw, "snap.json", s, strlen(s)))
        cap_step(c, "snap.json", "failed", t, "write: %s", strerror(c->bw.err ? c->bw.err : ENOMEM));
    else
        cap_step(c, "snap.json", "ok", t, "%s", "");
    free(s);
}

void snap_report_final(struct cap *c, const char *final, int ok)
{
    if (c->snap_status_fd < 0)
        return;
    char line[CP_PATH_MAX + 256];
    int n = ok ? snprintf(line, sizeof(line), "ok %s/%s\n", c->cfg.bundle_dir, final)
               : snprintf(line, sizeof(line), "failed %s\n", c->tmpname);
    if (n > 0 && write(c->snap_status_fd, line, (size_t)n) < 0) {
        /* crashpack snap went away: the bundle is published all the same */
    }
    close(c->snap_status_fd);
    c->snap_status_fd = -1;
}
