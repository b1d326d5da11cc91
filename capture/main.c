/* main.c - crashpack-capture, what the kernel runs through core_pattern:
 *
 *   |/path/crashpack-capture [-c CONFIG] %P %i %I %s %t %u %g %d %c %h [%F]
 *
 * Steps, in order (each may fail without sinking the rest; outcomes go to capture.json):
 *   fds 0/1/2 made safe -> arguments -> config -> pidfd and /proc/<pid> (identity checked)
 *   -> /dev/kmsg, bundle dir, locked temporary -> mode (config, RLIMIT_CORE, burst/repeat
 *   limits) -> manifest + /proc evidence -> drop privileges -> drain the core -> close the
 *   pipe (the kernel can reap the process) -> detached finisher: stacks.json (crashpack enrich
 *   as the crashed uid), capture.json, tar end, index,
 *   fsync, permissions, rename, kmsg line, post-command, salvage of orphans. */
#include "capture.h"
#include "privs.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef CRASHPACK_SANITIZE
/* The kernel gives the handler no environment: sanitizer settings must be built in. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "log_path=/tmp/crashpack-capture-asan:detect_leaks=0";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "log_path=/tmp/crashpack-capture-ubsan:print_stacktrace=1";
}
#endif

static void fds_safe(void)
{
    /* the kernel leaves 1 and 2 closed; anything we print must not land in a file we open */
    for (int fd = 1; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0) {
            int n = open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
}

static int64_t num(const char *s)
{
    if (!s || !*s)
        return -1;
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (errno == ERANGE && s[0] != '-')
        return -1; /* RLIMIT_INFINITY prints as 2^64-1 */
    return *e ? -1 : v;
}

static int parse_args(struct cap *c, int argc, char **argv)
{
    int i = 1;
    if (i + 1 < argc && !strcmp(argv[i], "-c")) {
        c->config_path = argv[i + 1];
        i += 2;
    }
    if (argc - i < 10)
        return -1;
    c->pid = (pid_t)num(argv[i]);
    c->ns_tid = (pid_t)num(argv[i + 1]);
    c->tid = (pid_t)num(argv[i + 2]);
    c->sig = (int)num(argv[i + 3]);
    c->crash_time = num(argv[i + 4]);
    c->uid = (uid_t)num(argv[i + 5]);
    c->gid = (gid_t)num(argv[i + 6]);
    c->dumpable = (int)num(argv[i + 7]);
    c->rlimit_core = num(argv[i + 8]);
    snprintf(c->hostname, sizeof(c->hostname), "%s", argv[i + 9]);
    c->pidfd = argc - i > 10 && argv[i + 10][0] ? (int)num(argv[i + 10]) : -1;
    if (c->crash_time <= 0)
        c->crash_time = time(NULL);
    return 0;
}

static int open_bundle_dir(struct cap *c, char *why, size_t n)
{
    const char *dir = c->cfg.bundle_dir;
    /* create missing parents root-owned; the last component must be a real directory */
    char path[CP_PATH_MAX];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
    if (mkdir(dir, 0711) == 0)
        chmod(dir, 0711);
    c->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (c->dirfd < 0) {
        snprintf(why, n, "%s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(c->dirfd, &st) || st.st_uid != 0 || (st.st_mode & 022)) {
        snprintf(why, n, "%s is not root-owned or is writable by others: refusing", dir);
        close(c->dirfd);
        c->dirfd = -1;
        return -1;
    }
    return 0;
}

/* The temporary is created unnamed, locked, then linked: a salvager never sees it unlocked. */
static int open_temp(struct cap *c, char *why, size_t n)
{
    char comm[32];
    name_escape(comm, sizeof(comm), c->comm[0] ? c->comm : "unknown");
    snprintf(c->finalname, sizeof(c->finalname), "crash-%lld-%d-%s.zst",
             (long long)c->crash_time, (int)c->pid, comm);
    int fd = openat(c->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, n, "O_TMPFILE in %s: %s", c->cfg.bundle_dir, strerror(errno));
        return -1;
    }
    flock(fd, LOCK_EX);
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    for (int i = 0; i < 20; i++) {
        unsigned r;
        if (getentropy(&r, sizeof(r)))
            r = (unsigned)getpid() * 2654435761u + (unsigned)i;
        snprintf(c->tmpname, sizeof(c->tmpname), ".tmp-crash-%lld-%d-%s.%08x",
                 (long long)c->crash_time, (int)c->pid, comm, r);
        if (linkat(AT_FDCWD, self, c->dirfd, c->tmpname, AT_SYMLINK_FOLLOW) == 0) {
            c->outfd = fd;
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    snprintf(why, n, "cannot name the temporary: %s", strerror(errno));
    close(fd);
    return -1;
}

/* Every bundle, metadata-only included, passes the disk guard: old bundles are vacuumed for a
 * metadata-only bundle's worth of room, and when keep_free would still be crossed the crash is
 * refused before anything is written (main logs the refusal to the kernel log); so is a user's
 * request (--room own) that max_use has no room for among that user's own bundles. */
static int guard_admit(struct cap *c, char *why, size_t n)
{
    guard_vacuum(c, GUARD_CLOSE_RESERVE);
    if (c->room == CAP_ROOM_OWN && c->guard_short) {
        snprintf(why, n,
                 "max_use is reached in %s and uid %u has no older bundle to make room"
                 " (a request's capture deletes no other user's bundle)",
                 c->cfg.bundle_dir, (unsigned)c->uid);
        return -1;
    }
    if (guard_free_ok(c, GUARD_CLOSE_RESERVE))
        return 0;
    snprintf(why, n, "free space is below keep_free (%llu bytes) in %s: no bundle of any mode",
             (unsigned long long)guard_keep_free(c), c->cfg.bundle_dir);
    return -1;
}

static void choose_mode(struct cap *c)
{
    double t = now_mono();
    c->mode = c->cfg.mode;
    if (c->identity_unverified[0]) {
        c->mode = CP_MODE_META; /* fails closed: proc.c's unverified() */
        snprintf(c->mode_reason, sizeof(c->mode_reason), "identity could not be verified: %s",
                 c->identity_unverified);
    }
    if (c->mode != CP_MODE_META && c->rlimit_core == 0 && c->cfg.honor_rlimit_core) {
        c->mode = CP_MODE_META;
        snprintf(c->mode_reason, sizeof(c->mode_reason),
                 "the process set RLIMIT_CORE to 0 (honor_rlimit_core = yes)");
    }
    char why[200];
    if (c->mode != CP_MODE_META && !guard_rate_allows_core(c, why, sizeof(why))) {
        c->mode = CP_MODE_META;
        snprintf(c->mode_reason, sizeof(c->mode_reason), "%s", why);
    }
    if (c->mode != CP_MODE_META && !guard_free_ok(c, 1u << 20)) {
        c->mode = CP_MODE_META;
        snprintf(c->mode_reason, sizeof(c->mode_reason), "free space is below keep_free");
    }
    cap_step(c, "mode", c->mode == c->cfg.mode ? "ok" : "skipped", t, "%s: %s",
             cp_mode_name(c->mode), c->mode_reason[0] ? c->mode_reason : "as configured");
}

static void capture_json(struct cap *c, const char *status)
{
    cJSON *j = c->extra;
    cJSON_AddStringToObject(j, "format", "crashpack-capture/1");
    cJSON_AddStringToObject(j, "status", status);
    cJSON *mode = cJSON_AddObjectToObject(j, "mode");
    cJSON_AddStringToObject(mode, "requested", cp_mode_name(c->cfg.mode));
    cJSON_AddStringToObject(mode, "effective", cp_mode_name(c->mode));
    if (c->mode_reason[0])
        cJSON_AddStringToObject(mode, "reason", c->mode_reason);
    cJSON *idn = cJSON_AddObjectToObject(j, "identity");
    cJSON_AddBoolToObject(idn, "verified", !c->identity_unverified[0] && c->procfd >= 0);
    if (c->identity_unverified[0])
        cJSON_AddStringToObject(idn, "reason", c->identity_unverified);
    cJSON_AddItemToObject(j, "core", c->core);
    cJSON_AddItemToObject(j, "steps", c->steps);
    cJSON_AddNumberToObject(j, "total_ms", (double)(long)((now_mono() - c->t0) * 1e4) / 10);
    cJSON_AddNumberToObject(j, "handler_pid", getpid());
    c->core = c->steps = NULL;
}

/* The finisher: runs after the pipe is closed, detached from the kernel's wait. */
static int finish(struct cap *c)
{
    smi_finish(c);
    ckpt_verdict(c);
    enrich_finish(c);
    guard_report(c);
    /* capture.json and the index go out unguarded: GUARD_CLOSE_RESERVE kept room for them */
    c->bw.room = NULL;
    double t = now_mono();
    capture_json(c, "complete");
    cJSON_AddNumberToObject(c->extra, "finish_started_ms", (t - c->t0) * 1000);
    char *s = cJSON_PrintUnformatted(c->extra);
    int rc = 0;
    if (!s || bw_add(&c->bw, "capture.json", s, strlen(s)) || bw_finish(&c->bw)) {
        kmsg_log(c->kmsgfd, "pid %d: cannot complete the bundle: %s\n", (int)c->pid,
                 strerror(c->bw.err));
        rc = -1; /* the temporary stays locked until we exit; the next run salvages it */
    }
    free(s);
    char final[200] = "";
    int published = rc == 0 && publish_bundle(c, final, sizeof(final)) == 0;
    if (c->snap || c->event)
        snap_report_final(c, final, published);
    if (published) {
        struct stat st;
        fstat(c->outfd, &st);
        char what[48];
        if (c->death_kind[0])
            snprintf(what, sizeof(what), "%s", c->death_kind);
        else
            snprintf(what, sizeof(what), "signal %d", c->sig);
        kmsg_log(c->kmsgfd, "captured pid %d (%s) %s: %s/%s, %s, %lld bytes\n", (int)c->pid,
                 c->comm, what, c->cfg.bundle_dir, final, cp_mode_name(c->mode),
                 (long long)st.st_size);
        publish_post_command(c, final);
    } else if (rc == 0) {
        kmsg_log(c->kmsgfd, "pid %d: cannot publish %s\n", (int)c->pid, c->tmpname);
        rc = -1;
    }
    close(c->outfd);
    salvage_orphans(c->dirfd, &c->cfg, c->kmsgfd);
    return rc;
}

/* The entry's arguments: --snap, --event, or the kernel's core_pattern specifiers. Returns 0,
 * or the exit status (2) once the usage has gone to stderr or the kernel log. */
static int parse_entry(struct cap *c, int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--snap")) {
        int r = snap_parse_args(c, argc, argv);
        if (r == -2) {
            fprintf(stderr,
                    "crashpack-capture: the process of the pidfd no longer holds pid %d:"
                    " no snapshot\n",
                    (int)c->pid);
            return 1;
        }
        if (r) {
            fprintf(stderr,
                    "usage: crashpack-capture --snap [-c CONFIG] [--bundle-dir DIR] "
                    "[--mode full|slim] [--trigger snap|watch|hook] [--kind exception] "
                    "[--member NAME=FD]... [--reason TEXT] [--pidfd FD] [--room own] PID\n");
            return 2;
        }
    } else if (argc > 1 && !strcmp(argv[1], "--event")) {
        if (event_parse_args(c, argc, argv)) {
            fprintf(stderr, "usage: crashpack-capture --event [-c CONFIG] [--bundle-dir DIR] "
                            "--kind exit|signal|terminated|oom_kill|exception --pid P --uid U "
                            "--gid G [--start-time TICKS] [--reported-by U] [--comm C] "
                            "[--status N] [--signal N] [--time T] [--trigger hook|run|agent] "
                            "[--reason TEXT] [--job ID] [--member NAME=FD]... [--room own|fair]\n");
            return 2;
        }
    } else if (parse_args(c, argc, argv)) {
        kmsg_log(c->kmsgfd, "bad arguments; usage: crashpack-capture [-c CONFIG] %%P %%i %%I "
                            "%%s %%t %%u %%g %%d %%c %%h [%%F]\n");
        return 2;
    }
    return 0;
}

/* The configuration file over the defaults; a broken one must not lose the crash: defaults,
 * and a failed `config` step says so. Then what --snap and --event override. */
static void load_config(struct cap *c)
{
    cp_config_defaults(&c->cfg);
    char err[300] = "";
    double t = now_mono();
    if (cp_config_load(&c->cfg, c->config_path ? c->config_path : CP_DEFAULT_CONFIG,
                       c->config_path != NULL, err, sizeof(err))) {
        cap_step(c, "config", "failed", t, "%s; using defaults", err);
        cp_config_defaults(&c->cfg);
    }
    if (c->snap)
        snap_config(c);
    if (c->event)
        event_config(c);
    /* every member is scrubbed (bw_add): the configured globs too, and what a member shows by
     * its shape (an output tail's token) is hunted in the core and the later members */
    c->scrub.globs = c->cfg.redact_values;
    c->scrub.learn = 1;
}

/* One death, one bundle: when the kernel's core, the exception or the OOM kill already has a
 * bundle (event_duplicate), the kernel log and the waiting caller are told its path. Returns 1
 * then (nothing more is written), else 0. The bundle directory is opened here. */
static int already_captured(struct cap *c, char *err, size_t errlen)
{
    char dup[CP_PATH_MAX + 64];
    if (open_bundle_dir(c, err, errlen) || !event_duplicate(c, dup, sizeof(dup)))
        return 0;
    kmsg_log(c->kmsgfd, "pid %d (%s) %s: already captured as %s (%s)\n", (int)c->pid, c->comm,
             c->death_kind, dup, c->dup_kind);
    if (c->snap_status_fd >= 0) {
        char line[sizeof(dup) + 64];
        int n = snprintf(line, sizeof(line), "duplicate %s\n", dup);
        if (n > 0 && write(c->snap_status_fd, line, (size_t)n) < 0) {
            /* the caller went away */
        }
    }
    return 1;
}

/* The locked temporary bundle, once the guard admits one (err: why the bundle directory did
 * not open, if it did not). Returns 0, or -1 when the crash is not captured, which the kernel
 * log (and crashpack snap's stderr) are told. */
static int open_bundle(struct cap *c, char *err, size_t errlen)
{
    if (c->dirfd >= 0 && !guard_admit(c, err, errlen) && !open_temp(c, err, errlen)) {
        bw_init(&c->bw, c->outfd, c->cfg.level, (time_t)c->crash_time);
        c->bw.scrub = &c->scrub; /* the secret values proc_identify found, masked in every member */
        guard_attach(c);
        return 0;
    }
    if (c->dirfd < 0 && !err[0])
        snprintf(err, errlen, "cannot open the bundle directory");
    kmsg_log(c->kmsgfd, "pid %d (%s) signal %d: crash NOT captured: %s\n", (int)c->pid, c->comm,
             c->sig, err);
    if (c->snap)
        fprintf(stderr, "crashpack-capture: pid %d NOT captured: %s\n", (int)c->pid, err);
    return -1;
}

/* Step 8, recorded: no effective capabilities, no_new_privs. */
static void drop_privileges(struct cap *c)
{
    double t = now_mono();
    if (privs_drop(c))
        cap_step(c, "drop_privileges", "failed", t, "%s", strerror(errno));
    else
        cap_step(c, "drop_privileges", "ok", t, "no effective capabilities, no_new_privs");
}

/* The core member, unless the mode is metadata-only. */
static void core(struct cap *c)
{
    if (c->mode != CP_MODE_META)
        stream_core(c);
    else
        cap_step(c, "core", "skipped", now_mono(), "%s", c->mode_reason);
}

/* The kernel waits for every reader of the pipe: closing it lets the kernel reap the process. */
static void release_pipe(struct cap *c)
{
    close(0);
    open("/dev/null", O_RDONLY);
    cJSON_AddNumberToObject(c->extra, "drain_ms", (now_mono() - c->t0) * 1000);
}

/* The finisher, detached (its own session, its own deadline): the handler returns at once. If
 * the fork fails it runs inline, which only delays the handler's exit, not the reaping. Returns
 * the exit status. */
static int finish_detached(struct cap *c)
{
    pid_t p = fork();
    if (p > 0)
        return 0;
    if (p == 0) {
        setsid();
        alarm(c->cfg.finisher_deadline_s);
    }
    return finish(c) ? 1 : 0;
}

int main(int argc, char **argv)
{
    fds_safe();
    struct cap cap, *c = &cap;
    cap_init(c);
    c->kmsgfd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    umask(077);
    int rc = parse_entry(c, argc, argv);
    if (rc)
        return rc;
    load_config(c);
    /* a last resort: whatever hangs, the process dies, the kernel gets its pipe back, and the
     * temporary is salvaged by the next capture */
    alarm(c->cfg.deadline_s + 60);
    proc_identify(c);
    if (!c->comm[0])
        snprintf(c->comm, sizeof(c->comm), "pid%d", (int)c->pid);
    char err[300] = "";
    if (already_captured(c, err, sizeof(err)))
        return 0;
    if (open_bundle(c, err, sizeof(err)))
        return 1;
    choose_mode(c);
    /* quick evidence, as root, before the drain: the process is still there */
    proc_collect(c);
    kmsg_collect(c);
    gpu_collect(c);
    gpu_node_events(c);
    ckpt_collect(c);
    logs_collect(c);
    enrich_open_root(c);
    /* slow evidence runs while the core drains and lands after it */
    smi_start(c);
    drop_privileges(c);
    core(c);
    if (c->snap)
        snap_collect_info(c);
    event_add_members(c);
    release_pipe(c);
    return finish_detached(c);
}
