/* agent.c - the node service of `crashpack agent`, the one privileged broker for the deaths
 * that leave no core dump (docs/agent.md; agent.h; the verb is cli/cmd_agent.c).
 *
 * It runs as root in the foreground (`crashpack agent -c CONFIG`; the systemd unit
 * scripts/crashpack-agent.service runs the same command) and does two things:
 *
 *  - It listens on a Unix socket (config `agent_socket`, mode 0666). A caller is whoever
 *    SO_PEERCRED says it is. It sends one JSON line and gets one back (docs/agent.md):
 *      ping     -> the agent's version and pid;
 *      capture  kind exception: the caller itself, alive (SO_PEERCRED pid == pid, or its pid in
 *               its own pid namespace, for a caller in a container): a live
 *               snapshot of every thread (crashpack snap --kind exception), with the caller's
 *               exception.json;
 *               kind exit|signal|terminated: a process of the caller's uid has ended: a
 *               metadata-only bundle (crashpack-capture --event), owned by that uid, its
 *               identity "reported" by it. Nobody can make a bundle that names another uid.
 *  - It follows the kernel log (/dev/kmsg, from the moment it starts). For each process the
 *    kernel's OOM killer kills ("Killed process N (comm) ... UID:U"), global or a memory cgroup's
 *    limit, it writes a bundle (--event --kind oom_kill) from what is left: the kill lines (the
 *    handler's kmsg.json, scoped to that pid), the constraint and the memory cgroup named by the
 *    kernel's oom-kill: line with its limits and counters (cgroup v1 and v2: oom.json),
 *    nvidia-smi. NVIDIA Xid and fallen-off-the-bus lines are appended to the node's GPU event log
 *    (STATE/gpu-events.jsonl, --state-dir) with the time they were seen.
 *
 * One request at a time, each bounded (16 MiB in, 5 s to arrive); captures are limited to
 * agent_rate a minute for all callers together, and every bundle passes the handler's own
 * burst limits and disk guard. The agent never reads a caller's files: every capture is done by
 * crashpack-capture, which opens the process's files with its credentials.
 */
#include "agent.h"
#include "capreq.h"
#include "config.h"
#include "jpath.h"
#include "kline.h"
#include "snap.h"
#include "util.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAX (16u << 20)
#define REQ_WAIT_MS 5000
#define KMSG_REC_MAX 8192

static volatile sig_atomic_t stop_sig;
static void on_stop(int s) { stop_sig = s; }

struct agent {
    struct cp_config cfg;
    const char *config; /* -c, or NULL (the default file) */
    const char *state;  /* --state-dir: where gpu-events.jsonl goes */
    FILE *log;          /* the service's log lines */
    char sock[CP_PATH_MAX];
    int lfd, kfd;
    /* the token bucket of agent_rate captures a minute */
    double tokens, refilled;
    /* the last oom-kill: line (its constraint and memory cgroups), for the Killed line after it */
    char oom_constraint[64], oom_memcg[512], task_memcg[512];
    pid_t oom_pid;
    unsigned long served, captured, refused, gpu_events;
    /* jobs registered by `crashpack run` (op register): a process of its tree that the OOM
     * killer kills gets its job id */
#define MAX_JOBS 1024
    struct job {
        pid_t pid;
        unsigned long long start;
        uid_t uid;
        char id[128];
    } jobs[MAX_JOBS];
    size_t njobs;
};

static void logf_(const struct agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void logf_(const struct agent *a, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(a->log, "crashpack agent: %s\n", line);
}

/* ---- the socket ---- */

static int listen_on(struct agent *a, char *err, size_t errlen)
{
    char dir[CP_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", a->sock);
    char *sl = strrchr(dir, '/');
    if (!sl || sl == dir || strlen(a->sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(err, errlen, "socket path %s: not an absolute path that fits", a->sock);
        return -1;
    }
    *sl = 0;
    if (mkdir(dir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
        snprintf(err, errlen, "%s must be a root-owned directory that only root can write", dir);
        return -1;
    }
    if (lstat(a->sock, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "%s exists and is not a socket", a->sock);
            return -1;
        }
        unlink(a->sock); /* a previous agent's */
    }
    a->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->sock);
    mode_t old = umask(0);
    int rc = a->lfd < 0 ? -1 : bind(a->lfd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc || chmod(a->sock, 0666) || listen(a->lfd, 64)) {
        snprintf(err, errlen, "listen on %s: %s", a->sock, strerror(errno));
        return -1;
    }
    return 0;
}

/* Reads one request line within REQ_WAIT_MS. malloc()ed, NUL-terminated; NULL when it did not
 * come whole. */
static char *read_request(int fd, char *why, size_t whylen)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (buf) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = REQ_WAIT_MS - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd pf = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
            snprintf(why, whylen, "the request did not arrive within %d ms", REQ_WAIT_MS);
            break;
        }
        if (len == cap) {
            if (cap >= REQ_MAX) {
                snprintf(why, whylen, "the request is over %u bytes", REQ_MAX);
                break;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(why, whylen, "the connection closed before the end of the request");
            break;
        }
        char *nl = memchr(buf + len, '\n', (size_t)r);
        len += (size_t)r;
        if (nl) {
            *nl = 0;
            return buf;
        }
    }
    free(buf);
    return NULL;
}

/* Writes o as one JSON line and frees it. A failed write is not an error here: a caller that went
 * away leaves its capture standing, a full disk leaves the kernel log's line. */
static void write_json_line(int fd, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        size_t n = strlen(s);
        s[n] = '\n'; /* over the NUL: written by length */
        if (write_all(fd, s, n + 1)) {
            /* see above */
        }
    }
    free(s);
    cJSON_Delete(o);
}

static cJSON *fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "ok");
    cJSON_AddStringToObject(o, "error", msg);
    return o;
}

static int take_token(struct agent *a)
{
    if (!a->cfg.agent_rate)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double t = (double)now.tv_sec + now.tv_nsec / 1e9;
    a->tokens += (t - a->refilled) * a->cfg.agent_rate / 60.0;
    if (a->tokens > a->cfg.agent_rate)
        a->tokens = a->cfg.agent_rate;
    a->refilled = t;
    if (a->tokens < 1)
        return 0;
    a->tokens -= 1;
    return 1;
}

/* ---- running a capture ---- */

/* The members of a request (names the capture allows; it refuses the rest) as memfds. */
static size_t request_members(const cJSON *req, struct snap_member *m, size_t max)
{
    size_t n = 0;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(req, "members"), *it;
    cJSON_ArrayForEach(it, ms)
    {
        if (n >= max || !cJSON_IsString(it) || !it->string)
            continue;
        int fd = capreq_memfd(it->string, it->valuestring, strlen(it->valuestring));
        if (fd >= 0) {
            m[n].name = it->string;
            m[n++].fd = fd;
        }
    }
    return n;
}

static cJSON *capture_answer(int rc, const char *line, const char *mode)
{
    if (rc)
        return fail("%s", line);
    cJSON *o = cJSON_CreateObject();
    int dup = !strncmp(line, "duplicate ", 10);
    cJSON_AddTrueToObject(o, "ok");
    cJSON_AddStringToObject(o, "bundle", line + (dup ? 10 : 3));
    cJSON_AddStringToObject(o, "mode", mode);
    cJSON_AddBoolToObject(o, "deduplicated", dup);
    return o;
}

/* The primary gid of uid from /etc/passwd (fgetpwent: no NSS in a root daemon), else uid. */
static gid_t gid_of(uid_t uid)
{
    FILE *f = fopen("/etc/passwd", "re");
    struct passwd *pw;
    gid_t g = (gid_t)uid;
    while (f && (pw = fgetpwent(f)))
        if (pw->pw_uid == uid) {
            g = pw->pw_gid;
            break;
        }
    if (f)
        fclose(f);
    return g;
}

static uid_t uid_of_pid(pid_t pid, int *ok)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    *ok = stat(path, &st) == 0;
    return st.st_uid;
}

static cJSON *do_exception(struct agent *a, const struct ucred *cr, const cJSON *req)
{
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(req, "pid");
    /* SO_PEERCRED gives the caller's pid in the agent's namespace; a caller in a container (its
     * own pid namespace, the socket mounted in) sends its getpid(), the last NSpid value */
    pid_t want = cJSON_IsNumber(pid) ? (pid_t)pid->valuedouble : -1;
    if (want != cr->pid && (want <= 0 || cp_ns_pid(cr->pid) != want))
        return fail("an exception capture is of the caller itself: pid %d is not the caller (%d)",
                    (int)want, (int)cr->pid);
    struct snap_request rq = {.pid = cr->pid, .trigger = "hook", .kind = "exception",
                              .config = a->config};
    char reason[300];
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(req, "reason");
    snprintf(reason, sizeof(reason), "%s",
             cJSON_IsString(r) ? r->valuestring : "an uncaught exception");
    rq.reason = reason;
    rq.nmembers = request_members(req, rq.members, 4);
    char bundle[1200], err[600];
    cJSON *info = NULL;
    int rc = snap_pid(&rq, bundle, sizeof(bundle), &info, err, sizeof(err));
    cJSON_Delete(info);
    for (size_t i = 0; i < rq.nmembers; i++)
        close(rq.members[i].fd);
    if (rc)
        return fail("snapshot of pid %d failed: %s", (int)cr->pid, err);
    char line[1300];
    snprintf(line, sizeof(line), "ok %s", bundle);
    return capture_answer(0, line, "slim");
}

static cJSON *do_reported(struct agent *a, const struct ucred *cr, const cJSON *req, const char *kind)
{
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(req, "pid");
    if (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || pid->valuedouble > 0x3fffffff)
        return fail("capture: no valid pid");
    pid_t p = (pid_t)pid->valuedouble;
    /* the caller's own processes only: a live one must be the caller's uid */
    int alive;
    uid_t owner = uid_of_pid(p, &alive);
    if (alive && owner != cr->uid && cr->uid != 0)
        return fail("pid %d is not a process of uid %u", (int)p, (unsigned)cr->uid);
    char a_pid[24], a_uid[24], a_gid[24], a_by[24], a_st[32], a_status[16], a_sig[16], a_time[32];
    snprintf(a_pid, sizeof(a_pid), "%d", (int)p);
    snprintf(a_uid, sizeof(a_uid), "%u", (unsigned)cr->uid);
    snprintf(a_gid, sizeof(a_gid), "%u", (unsigned)cr->gid);
    snprintf(a_by, sizeof(a_by), "%u", (unsigned)cr->uid);
    const char *args[48];
    size_t n = 0;
    args[n++] = "--kind";
    args[n++] = kind;
    args[n++] = "--pid";
    args[n++] = a_pid;
    args[n++] = "--uid";
    args[n++] = a_uid;
    args[n++] = "--gid";
    args[n++] = a_gid;
    args[n++] = "--reported-by";
    args[n++] = a_by;
    args[n++] = "--trigger";
    args[n++] = "run";
    const cJSON *v;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(req, "start_time")) && v->valuedouble >= 1) {
        snprintf(a_st, sizeof(a_st), "%.0f", v->valuedouble);
        args[n++] = "--start-time";
        args[n++] = a_st;
    }
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(req, "status")) && v->valuedouble >= 0 &&
        v->valuedouble <= 255) {
        snprintf(a_status, sizeof(a_status), "%d", (int)v->valuedouble);
        args[n++] = "--status";
        args[n++] = a_status;
    }
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(req, "signal")) && v->valuedouble >= 1 &&
        v->valuedouble <= 64) {
        snprintf(a_sig, sizeof(a_sig), "%d", (int)v->valuedouble);
        args[n++] = "--signal";
        args[n++] = a_sig;
    }
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(req, "time")) && v->valuedouble >= 1) {
        snprintf(a_time, sizeof(a_time), "%.0f", v->valuedouble);
        args[n++] = "--time";
        args[n++] = a_time;
    }
    const char *strs[][2] = {{"comm", "--comm"}, {"reason", "--reason"}, {"job", "--job"}};
    for (size_t i = 0; i < 3; i++)
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(req, strs[i][0])) && v->valuestring[0]) {
            args[n++] = strs[i][1];
            args[n++] = v->valuestring;
        }
    args[n] = NULL;
    struct snap_member m[4];
    size_t nm = request_members(req, m, 4);
    char line[1400];
    int rc = capreq_event(a->config, args, m, nm, line, sizeof(line));
    for (size_t i = 0; i < nm; i++)
        close(m[i].fd);
    return capture_answer(rc, line, "meta");
}

/* {"op":"register","job":ID}: the caller (a `crashpack run`) names the job of its process tree.
 * A dead registration (its pid now another process, or gone) makes room for a new one. */
static cJSON *do_register(struct agent *a, const struct ucred *cr, const cJSON *req)
{
    const char *id = cp_jstr_ne(req, "job");
    unsigned long long st = cp_start_ticks(cr->pid);
    if (!id || strlen(id) >= sizeof(a->jobs[0].id) || !st)
        return fail("register: a job id of at most %zu bytes, from a live caller",
                    sizeof(a->jobs[0].id) - 1);
    size_t slot = a->njobs;
    for (size_t i = 0; i < a->njobs && slot == a->njobs; i++)
        if (a->jobs[i].pid == cr->pid || cp_start_ticks(a->jobs[i].pid) != a->jobs[i].start)
            slot = i;
    if (slot == MAX_JOBS)
        return fail("register: %d live jobs already", MAX_JOBS);
    if (slot == a->njobs)
        a->njobs++;
    a->jobs[slot].pid = cr->pid;
    a->jobs[slot].start = st;
    a->jobs[slot].uid = cr->uid;
    snprintf(a->jobs[slot].id, sizeof(a->jobs[slot].id), "%s", id);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    return o;
}

/* The job of pid: the registration of the nearest ancestor (pid itself included; a zombie's
 * /proc/PID/stat still has its ppid) whose start time still matches, and whose uid is the
 * process's or root. NULL when none. */
static const char *job_of(const struct agent *a, pid_t pid, uid_t uid)
{
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        unsigned long long ppid = cp_proc_stat(pid, 4);
        for (size_t i = 0; i < a->njobs; i++)
            if (a->jobs[i].pid == pid && (a->jobs[i].uid == uid || a->jobs[i].uid == 0) &&
                cp_start_ticks(pid) == a->jobs[i].start)
                return a->jobs[i].id;
        pid = (pid_t)ppid;
    }
    return NULL;
}

static void serve(struct agent *a, int fd)
{
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    char why[200] = "";
    a->served++;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
        write_json_line(fd, fail("cannot authenticate the caller (SO_PEERCRED): %s", strerror(errno)));
        return;
    }
    char *line = read_request(fd, why, sizeof(why));
    cJSON *req = line ? cJSON_Parse(line) : NULL;
    free(line);
    const char *op = cJSON_IsObject(req) ? cp_jstr_ne(req, "op") : NULL;
    const char *kind = cp_jstr_ne(req, "kind");
    cJSON *ans;
    if (!req || !op) {
        ans = fail("%s", why[0] ? why : "the request is not a JSON object with an op");
    } else if (!strcmp(op, "ping")) {
        ans = cJSON_CreateObject();
        cJSON_AddTrueToObject(ans, "ok");
        cJSON_AddStringToObject(ans, "version", CRASHPACK_VERSION);
        cJSON_AddNumberToObject(ans, "pid", (double)getpid());
    } else if (!strcmp(op, "register")) {
        ans = do_register(a, &cr, req);
    } else if (strcmp(op, "capture")) {
        ans = fail("unknown op `%s`", op);
    } else if (!kind || (strcmp(kind, "exception") && strcmp(kind, "exit") &&
                         strcmp(kind, "signal") && strcmp(kind, "terminated"))) {
        ans = fail("capture: kind must be exception, exit, signal or terminated");
    } else if (!take_token(a)) {
        a->refused++;
        ans = fail("rate limited: more than %u captures a minute (agent_rate)", a->cfg.agent_rate);
    } else {
        ans = !strcmp(kind, "exception") ? do_exception(a, &cr, req) : do_reported(a, &cr, req, kind);
        a->captured += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "ok"));
        logf_(a, "pid %d (uid %u) %s capture of pid %d: %s", (int)cr.pid, (unsigned)cr.uid, kind,
              cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(req, "pid"))
                  ? (int)cJSON_GetObjectItemCaseSensitive(req, "pid")->valuedouble
                  : -1,
              cp_jstr_ne(ans, "bundle") ? cp_jstr_ne(ans, "bundle") : cp_jstr_ne(ans, "error"));
    }
    cJSON_Delete(req);
    write_json_line(fd, ans);
}

/* ---- the kernel log ---- */


/* One cgroup file's contents as a JSON string (trimmed), or null. `rel` is under `base`. */
static void add_cg_file(cJSON *o, const char *key, const char *base, const char *rel,
                        const char *file)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s%s/%s", base, rel, file);
    if (strstr(rel, "..")) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, path, 1 << 16, &len, &tr);
    if (!s) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    while (len && (s[len - 1] == '\n' || s[len - 1] == ' '))
        s[--len] = 0;
    cJSON_AddStringToObject(o, key, s);
    free(s);
}

/* oom.json: the constraint, the memory cgroups, their limits and counters (v2: memory.max,
 * memory.events, memory.peak; v1: memory.limit_in_bytes, failcnt, max_usage_in_bytes,
 * memory.oom_control). The cgroup may be gone already: null values. */
static char *oom_json(const struct agent *a, const char *line, pid_t pid, const char *comm,
                      uid_t uid)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "crashpack-oom/1");
    cJSON_AddStringToObject(o, "kill_line", line);
    cJSON_AddNumberToObject(o, "pid", pid);
    cJSON_AddStringToObject(o, "comm", comm);
    cJSON_AddNumberToObject(o, "uid", uid);
    int same = a->oom_pid == pid;
    const char *cons = same && a->oom_constraint[0] ? a->oom_constraint : NULL;
    if (cons)
        cJSON_AddStringToObject(o, "constraint", cons);
    else
        cJSON_AddNullToObject(o, "constraint");
    cJSON_AddStringToObject(o, "limit", !cons ? "unknown"
                                        : !strcmp(cons, "CONSTRAINT_MEMCG") ? "cgroup"
                                        : !strcmp(cons, "CONSTRAINT_NONE") ? "host" : "other");
    const char *memcg = same && a->oom_memcg[0] ? a->oom_memcg : NULL;
    if (memcg)
        cJSON_AddStringToObject(o, "oom_memcg", memcg);
    else
        cJSON_AddNullToObject(o, "oom_memcg");
    if (same && a->task_memcg[0])
        cJSON_AddStringToObject(o, "task_memcg", a->task_memcg);
    else
        cJSON_AddNullToObject(o, "task_memcg");
    if (memcg && memcg[0] == '/') {
        cJSON *v2 = cJSON_AddObjectToObject(o, "cgroup_v2");
        add_cg_file(v2, "memory.max", "/sys/fs/cgroup", memcg, "memory.max");
        add_cg_file(v2, "memory.peak", "/sys/fs/cgroup", memcg, "memory.peak");
        add_cg_file(v2, "memory.events", "/sys/fs/cgroup", memcg, "memory.events");
        cJSON *v1 = cJSON_AddObjectToObject(o, "cgroup_v1");
        add_cg_file(v1, "memory.limit_in_bytes", "/sys/fs/cgroup/memory", memcg, "memory.limit_in_bytes");
        add_cg_file(v1, "memory.max_usage_in_bytes", "/sys/fs/cgroup/memory", memcg,
                    "memory.max_usage_in_bytes");
        add_cg_file(v1, "memory.failcnt", "/sys/fs/cgroup/memory", memcg, "memory.failcnt");
        add_cg_file(v1, "memory.oom_control", "/sys/fs/cgroup/memory", memcg, "memory.oom_control");
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The kernel's "Killed process 1234 (python3) total-vm:...kB, anon-rss:..., UID:1000 ..." line,
 * parsed by its format (common/kline.h): a bundle for that pid, owned by that uid. */
static void oom_killed(struct agent *a, const struct kline_oom *k, const char *text)
{
    int pid = (int)k->pid;
    long uid = k->uid;
    char comm[64];
    snprintf(comm, sizeof(comm), "%s", k->comm);
    if (pid <= 0 || !k->have_comm || uid < 0)
        return;
    if (!a->cfg.agent_oom)
        return;
    if (!take_token(a)) {
        a->refused++;
        logf_(a, "OOM kill of pid %d (%s) not captured: rate limited (agent_rate)", pid, comm);
        return;
    }
    char *oj = oom_json(a, text, pid, comm, (uid_t)uid);
    struct snap_member m = {"oom.json", oj ? capreq_memfd("oom.json", oj, strlen(oj)) : -1};
    free(oj);
    char a_pid[24], a_uid[24], a_gid[24], a_st[32], reason[700];
    snprintf(a_pid, sizeof(a_pid), "%d", pid);
    snprintf(a_uid, sizeof(a_uid), "%ld", uid);
    snprintf(a_gid, sizeof(a_gid), "%u", (unsigned)gid_of((uid_t)uid));
    int same = a->oom_pid == pid;
    snprintf(reason, sizeof(reason), "killed by the kernel's OOM killer (%s%s%s)",
             same && !strcmp(a->oom_constraint, "CONSTRAINT_MEMCG") ? "memory cgroup limit"
             : same && a->oom_constraint[0] ? a->oom_constraint : "host memory",
             same && a->oom_memcg[0] ? ", oom_memcg=" : "", same ? a->oom_memcg : "");
    const char *args[28];
    size_t n = 0;
    args[n++] = "--kind";
    args[n++] = "oom_kill";
    args[n++] = "--signal";
    args[n++] = "9";
    args[n++] = "--pid";
    args[n++] = a_pid;
    args[n++] = "--uid";
    args[n++] = a_uid;
    args[n++] = "--gid";
    args[n++] = a_gid;
    args[n++] = "--comm";
    args[n++] = comm;
    args[n++] = "--trigger";
    args[n++] = "agent";
    args[n++] = "--reason";
    args[n++] = reason;
    const char *job = job_of(a, pid, (uid_t)uid);
    if (job) {
        args[n++] = "--job";
        args[n++] = job;
    }
    unsigned long long st = cp_start_ticks(pid); /* a zombie still has it */
    if (st) {
        snprintf(a_st, sizeof(a_st), "%llu", st);
        args[n++] = "--start-time";
        args[n++] = a_st;
    }
    args[n] = NULL;
    char line[1400];
    int rc = capreq_event(a->config, args, m.fd >= 0 ? &m : NULL, m.fd >= 0 ? 1 : 0, line, sizeof(line));
    if (m.fd >= 0)
        close(m.fd);
    a->captured += rc == 0;
    logf_(a, "OOM kill of pid %d (%s, uid %ld): %s", pid, comm, uid, line);
}

/* nvidia-smi -q -x now, into DIR/NAME (at most SMI_MAX bytes, nvidia_smi_timeout seconds: a
 * GPU that fell off the bus can hang it). Returns 0, or -1 with why. */
#define SMI_MAX (4u << 20)
static int smi_now(const struct agent *a, int dfd, const char *name, char *why, size_t whylen)
{
    if (!a->cfg.nvidia_smi[0] || access(a->cfg.nvidia_smi, X_OK)) {
        snprintf(why, whylen, "no nvidia-smi at %s", a->cfg.nvidia_smi);
        return -1;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t p = fork();
    if (p == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(pfd[1], 1) < 0 || dup2(nul, 2) < 0)
            _exit(126);
        closefrom(3);
        char prog[CP_PATH_MAX];
        snprintf(prog, sizeof(prog), "%s", a->cfg.nvidia_smi);
        char *argv[] = {prog, "-q", "-x", NULL}, *envp[] = {NULL};
        execve(prog, argv, envp);
        _exit(127);
    }
    close(pfd[1]);
    if (p < 0) {
        close(pfd[0]);
        snprintf(why, whylen, "fork: %s", strerror(errno));
        return -1;
    }
    char *buf = malloc(SMI_MAX);
    size_t len = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int timed_out = 0;
    while (buf && len < SMI_MAX) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = (long)a->cfg.nvidia_smi_timeout_s * 1000 -
                    ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd pf = {pfd[0], POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
            timed_out = 1;
            break;
        }
        ssize_t r = read(pfd[0], buf + len, SMI_MAX - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(pfd[0]);
    if (timed_out)
        kill(p, SIGKILL);
    int ws = 0;
    while (waitpid(p, &ws, 0) < 0 && errno == EINTR)
        ;
    int rc = -1;
    if (timed_out)
        snprintf(why, whylen, "nvidia-smi did not answer within %u s: killed",
                 a->cfg.nvidia_smi_timeout_s);
    else if (!WIFEXITED(ws) || WEXITSTATUS(ws) || !len)
        snprintf(why, whylen, "nvidia-smi failed (status %d)", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    else {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 && !write_all(fd, buf, len) && !close(fd))
            rc = 0;
        else
            snprintf(why, whylen, "cannot store %s: %s", name, strerror(errno));
    }
    free(buf);
    return rc;
}

/* One line of STATE/gpu-events.jsonl: when, the kernel's line, and nvidia-smi at that moment
 * (gpu-events/TIME-N.xml) or why not. The capture handler puts the recent ones into every bundle
 * of this host (node-gpu-events.json): later analyses cite them as host context. */
static void gpu_event(struct agent *a, const char *text)
{
    if (mkdir(a->state, 0755) && errno != EEXIST)
        return;
    int dfd = open(a->state, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return;
    if (mkdirat(dfd, "gpu-events", 0755) && errno != EEXIST) {
        close(dfd);
        return;
    }
    int edfd = openat(dfd, "gpu-events", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    time_t now = time(NULL);
    char name[64], why[200] = "";
    snprintf(name, sizeof(name), "%lld-%lu.xml", (long long)now, ++a->gpu_events);
    int smi = edfd >= 0 ? smi_now(a, edfd, name, why, sizeof(why)) : -1;
    if (edfd >= 0)
        close(edfd);
    int fd = openat(dfd, "gpu-events.jsonl", O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                    0644);
    close(dfd);
    if (fd < 0)
        return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "time", (double)now);
    cJSON_AddStringToObject(o, "line", text);
    char rel[96];
    snprintf(rel, sizeof(rel), "gpu-events/%s", name);
    if (smi == 0)
        cJSON_AddStringToObject(o, "nvidia_smi", rel);
    else
        cJSON_AddStringToObject(o, "nvidia_smi_error", why[0] ? why : "not run");
    write_json_line(fd, o);
    close(fd);
}

/* One /dev/kmsg record: an OOM kill (its oom-kill: line first, then the kill), or a GPU event.
 * The lines are parsed by their format (common/kline.h): a comm cannot forge a field. */
static void kmsg_record(struct agent *a, char *rec, size_t len)
{
    struct kline_rec kr;
    if (kline_record(rec, len, &kr))
        return;
    char *text = (char *)kr.text;
    text[kr.text_len] = 0;
    struct kline_oom k;
    struct kline_xid x;
    if (kline_oom(text, &k) && k.kind == KLINE_OOM_LIST) {
        snprintf(a->oom_constraint, sizeof(a->oom_constraint), "%s", k.constraint);
        snprintf(a->oom_memcg, sizeof(a->oom_memcg), "%s", k.oom_memcg);
        snprintf(a->task_memcg, sizeof(a->task_memcg), "%s", k.task_memcg);
        a->oom_pid = (pid_t)k.pid;
    } else if (k.kind == KLINE_OOM_KILLED && k.scope_hint) {
        oom_killed(a, &k, text);
    } else if (kline_xid_parse(NULL, text, &x)) {
        gpu_event(a, text);
    }
}

static void kmsg_drain(struct agent *a)
{
    char rec[KMSG_REC_MAX + 1];
    for (;;) {
        ssize_t r = read(a->kfd, rec, KMSG_REC_MAX);
        if (r < 0 && errno == EPIPE)
            continue; /* records overwritten before they were read */
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        rec[r] = 0;
        kmsg_record(a, rec, (size_t)r);
    }
}

int agent_run(const struct agent_opts *o)
{
    struct agent A;
    memset(&A, 0, sizeof(A));
    A.lfd = A.kfd = -1;
    A.config = o->config;
    A.state = o->state;
    A.log = o->log;
    const char *sock = o->socket;
    if (geteuid() != 0) {
        fprintf(A.log, "crashpack agent: run as root: it captures other users' processes\n");
        return -1;
    }
    char err[600];
    cp_config_defaults(&A.cfg);
    if (cp_config_load(&A.cfg, A.config ? A.config : CP_DEFAULT_CONFIG, A.config != NULL, err,
                       sizeof(err))) {
        fprintf(A.log, "crashpack agent: %s\n", err);
        return -1;
    }
    snprintf(A.sock, sizeof(A.sock), "%s", sock ? sock : A.cfg.agent_socket);
    if (!A.state)
        A.state = A.cfg.state_dir;
    if (listen_on(&A, err, sizeof(err))) {
        fprintf(A.log, "crashpack agent: %s\n", err);
        return -1;
    }
    A.kfd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (A.kfd >= 0)
        lseek(A.kfd, 0, SEEK_END); /* what happens from now on */
    else
        logf_(&A, "cannot read /dev/kmsg (%s): no OOM-kill capture", strerror(errno));
    A.tokens = A.cfg.agent_rate;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    A.refilled = (double)now.tv_sec + now.tv_nsec / 1e9;
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    logf_(&A, "pid %d listening on %s%s", (int)getpid(), A.sock,
          A.kfd >= 0 ? ", following /dev/kmsg" : "");
    while (!stop_sig) {
        struct pollfd pf[2] = {{A.lfd, POLLIN, 0}, {A.kfd, POLLIN, 0}};
        int n = poll(pf, A.kfd >= 0 ? 2 : 1, -1);
        if (n < 0)
            continue;
        if (A.kfd >= 0 && (pf[1].revents & POLLIN))
            kmsg_drain(&A);
        if (pf[0].revents & POLLIN) {
            int fd = accept4(A.lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                /* a SIGKILL reported by run may be an OOM kill whose line is waiting: read it
                 * first, so that the kill's own bundle is the one (deduplicated) */
                if (A.kfd >= 0)
                    kmsg_drain(&A);
                serve(&A, fd);
                close(fd);
            }
        }
    }
    unlink(A.sock);
    logf_(&A, "stopped (signal %d): %lu requests, %lu captures, %lu refused", (int)stop_sig,
          A.served, A.captured, A.refused);
    return 0;
}
