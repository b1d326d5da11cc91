/* agent_req.c - the node service's requests (agent_int.h, docs/agent.md): who may ask for what,
 * decided in the service itself from the peer's credentials and pidfd, and each accepted capture
 * or query, run in a worker child.
 *
 * A request is bound to the process that connected (its pidfd, SO_PEERPIDFD), never to a pid
 * number: before each step the pidfd is asked whether that process still holds its pid
 * (pidfd.h), and a request whose process has gone is refused, since its pid may be another's.
 * Requests about a process come from that process itself (an exception capture; a report of its
 * own end) or from the `crashpack run` that supervises it (a report of a process of its job):
 * run registers (op register, held by its pidfd and start time) and its reporter children, whose
 * parent it is, report. Without SO_PEERPIDFD (kernels before 6.5) reports are refused. */
#include "agent_int.h"
#include "capreq.h"
#include "jpath.h"
#include "pidfd.h"
#include "snap.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static cJSON *ok_object(void)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    return o;
}

/* Does the caller (its pidfd; on old kernels its start time) still hold its pid? */
static int caller_here(const struct agent_conn *c)
{
    if (c->pidfd >= 0)
        return cp_pidfd_holds(c->pidfd, c->cr.pid);
    return c->start && cp_start_ticks(c->cr.pid) == c->start;
}

/* ---- registrations of `crashpack run` ---- */

static int reg_live(const struct agent_reg *r)
{
    if (r->pidfd >= 0)
        return cp_pidfd_holds(r->pidfd, r->pid);
    return cp_start_ticks(r->pid) == r->start;
}

void agent_regs_close(struct agent *a)
{
    for (size_t i = 0; i < a->nregs; i++)
        if (a->regs[i].pidfd >= 0)
            close(a->regs[i].pidfd);
    a->nregs = 0;
}

/* {"op":"register","job":ID}: the caller (a `crashpack run`) names the job of its process tree,
 * held by its pidfd. A dead registration makes room for a new one. */
static cJSON *do_register(struct agent *a, const struct agent_conn *c, const cJSON *req)
{
    const char *id = cp_jstr_ne(req, "job");
    if (!id || strlen(id) >= sizeof(a->regs[0].id) || !caller_here(c))
        return agent_fail("register: a job id of at most %zu bytes, from a live caller",
                          sizeof(a->regs[0].id) - 1);
    size_t slot = a->nregs, mine = 0;
    for (size_t i = 0; i < a->nregs; i++) {
        struct agent_reg *r = &a->regs[i];
        int live = reg_live(r);
        if (slot == a->nregs && (!live || (r->pid == c->cr.pid && r->start == c->start)))
            slot = i;
        else if (live && r->uid == c->cr.uid)
            mine++;
    }
    if (mine >= AGENT_REGS_PER_UID)
        return agent_fail("register: uid %u has %d live jobs already", (unsigned)c->cr.uid,
                          AGENT_REGS_PER_UID);
    if (slot == AGENT_REGS)
        return agent_fail("register: %d live jobs already", AGENT_REGS);
    struct agent_reg *r = &a->regs[slot];
    if (slot == a->nregs)
        a->nregs++;
    else if (r->pidfd >= 0)
        close(r->pidfd);
    r->pidfd = c->pidfd >= 0 ? fcntl(c->pidfd, F_DUPFD_CLOEXEC, 3) : -1;
    r->pid = c->cr.pid;
    r->start = c->start;
    r->uid = c->cr.uid;
    snprintf(r->id, sizeof(r->id), "%s", id);
    return ok_object();
}

const char *agent_job_of(struct agent *a, pid_t pid, uid_t uid)
{
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        unsigned long long ppid = cp_proc_stat(pid, 4);
        for (size_t i = 0; i < a->nregs; i++)
            if (a->regs[i].pid == pid && (a->regs[i].uid == uid || a->regs[i].uid == 0) &&
                reg_live(&a->regs[i]))
                return a->regs[i].id;
        pid = (pid_t)ppid;
    }
    return NULL;
}

/* The registration of the `crashpack run` that supervises the caller: the caller itself, or its
 * parent (run's reporter child), of the caller's uid, both held by their pidfds. NULL if none. */
static const struct agent_reg *supervisor_of(struct agent *a, const struct agent_conn *c)
{
    if (c->pidfd < 0)
        return NULL;
    pid_t ppid = (pid_t)cp_proc_stat(c->cr.pid, 4);
    if (!cp_pidfd_holds(c->pidfd, c->cr.pid)) /* the ppid read was the caller's */
        return NULL;
    for (size_t i = 0; i < a->nregs; i++) {
        const struct agent_reg *r = &a->regs[i];
        /* a registration older than the caller holds that pid: it is that process */
        if (r->uid == c->cr.uid && (r->pid == c->cr.pid || (ppid > 1 && r->pid == ppid)) &&
            reg_live(r))
            return r;
    }
    return NULL;
}

/* ---- what may be asked: checked in the service, before a worker starts ---- */

/* Clock ticks since boot now (the unit of a start time). */
static unsigned long long ticks_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    unsigned long long hz =
        sysconf(_SC_CLK_TCK) > 0 ? (unsigned long long)sysconf(_SC_CLK_TCK) : 100;
    return (unsigned long long)ts.tv_sec * hz +
           (unsigned long long)ts.tv_nsec * hz / 1000000000ULL + 1;
}

static cJSON *check_exception(struct agent_conn *c, const cJSON *req)
{
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(req, "pid");
    /* SO_PEERCRED gives the caller's pid in the agent's namespace; a caller in a container (its
     * own pid namespace, the socket mounted in) sends its getpid(), the last NSpid value */
    pid_t want = cJSON_IsNumber(pid) ? (pid_t)pid->valuedouble : -1;
    if (want != c->cr.pid && (want <= 0 || cp_ns_pid(c->cr.pid) != want))
        return agent_fail("an exception capture is of the caller itself: pid %d is not the "
                          "caller (%d)",
                          (int)want, (int)c->cr.pid);
    if (!caller_here(c))
        return agent_fail("the caller (pid %d) has exited: its pid may be another process's now",
                          (int)c->cr.pid);
    c->about = c->cr.pid;
    return NULL;
}

/* A report of a process's end (exit, signal, terminated): from that process itself, or from the
 * run that supervises it; never about another uid's live process; its start time, if given, not
 * before its supervisor's nor in the future. */
static cJSON *check_reported(struct agent *a, struct agent_conn *c, const cJSON *req)
{
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(req, "pid");
    if (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || pid->valuedouble > 0x3fffffff)
        return agent_fail("capture: no valid pid");
    pid_t p = (pid_t)pid->valuedouble;
    if (c->pidfd < 0)
        return agent_fail("this kernel gives no pidfd of the caller (SO_PEERPIDFD, Linux 6.5+):"
                          " reports about processes are refused");
    if (!caller_here(c))
        return agent_fail("the caller (pid %d) has exited", (int)c->cr.pid);
    const struct agent_reg *r = p == c->cr.pid ? NULL : supervisor_of(a, c);
    if (p != c->cr.pid && !r)
        return agent_fail("pid %d: a process's end is reported by that process or by the crashpack"
                          " run that supervises it (op register), and the caller is neither",
                          (int)p);
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d", (int)p);
    if (stat(path, &st) == 0 && st.st_uid != c->cr.uid && c->cr.uid != 0)
        return agent_fail("pid %d is not a process of uid %u", (int)p, (unsigned)c->cr.uid);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "start_time");
    unsigned long long lo = r ? r->start : c->start, hi = ticks_now();
    if (cJSON_IsNumber(v) && (v->valuedouble < (double)lo || v->valuedouble > (double)hi))
        return agent_fail(
            "start_time %.0f: not between its supervisor's start (%llu) and now (%llu)",
            v->valuedouble, lo, hi);
    snprintf(c->job, sizeof(c->job), "%s", r ? r->id : "");
    c->about = p;
    return NULL;
}

static int take_token(const struct agent *a, struct agent_uid *u)
{
    if (!a->cfg.agent_rate)
        return 1;
    double t = agent_now();
    u->tokens += (t - u->refilled) * a->cfg.agent_rate / 60.0;
    if (u->tokens > a->cfg.agent_rate)
        u->tokens = a->cfg.agent_rate;
    u->refilled = t;
    if (u->tokens < 1)
        return 0;
    u->tokens -= 1;
    return 1;
}

static cJSON *check_capture(struct agent *a, struct agent_conn *c, const cJSON *req)
{
    const char *kind = cp_jstr_ne(req, "kind");
    if (!kind || (strcmp(kind, "exception") && strcmp(kind, "exit") && strcmp(kind, "signal") &&
                  strcmp(kind, "terminated")))
        return agent_fail("capture: kind must be exception, exit, signal or terminated");
    cJSON *no = !strcmp(kind, "exception") ? check_exception(c, req) : check_reported(a, c, req);
    if (no)
        return no;
    if (!take_token(a, c->u)) {
        a->refused++;
        return agent_fail("rate limited: more than %u captures a minute for uid %u (agent_rate)",
                          a->cfg.agent_rate, (unsigned)c->cr.uid);
    }
    return NULL;
}

static cJSON *check_db(const struct agent *a, const cJSON *req)
{
    const char *q = cp_jstr_ne(req, "query");
    if (!a->db_query)
        return agent_fail("this agent answers no knowledge base queries");
    if (!q || (strcmp(q, "list") && strcmp(q, "show") && strcmp(q, "search")))
        return agent_fail("db: query must be list, show or search");
    return NULL;
}

int agent_request(struct agent *a, struct agent_conn *c, cJSON **ans)
{
    const cJSON *req = c->req;
    const char *op = cp_jstr_ne(req, "op");
    *ans = NULL;
    if (!op) {
        *ans = agent_fail("the request is not a JSON object with an op");
    } else if (!strcmp(op, "ping")) {
        *ans = ok_object();
        cJSON_AddStringToObject(*ans, "version", CRASHPACK_VERSION);
        cJSON_AddNumberToObject(*ans, "pid", (double)getpid());
    } else if (!strcmp(op, "register")) {
        *ans = do_register(a, c, req);
    } else if (!strcmp(op, "capture")) {
        *ans = check_capture(a, c, req);
    } else if (!strcmp(op, "db")) {
        *ans = check_db(a, req);
    } else {
        *ans = agent_fail("unknown op `%s`", op);
    }
    return *ans != NULL;
}

/* ---- in a worker ---- */

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
        return agent_fail("%s", line);
    cJSON *o = ok_object();
    int dup = !strncmp(line, "duplicate ", 10);
    cJSON_AddStringToObject(o, "bundle", line + (dup ? 10 : 3));
    cJSON_AddStringToObject(o, "mode", mode);
    cJSON_AddBoolToObject(o, "deduplicated", dup);
    return o;
}

static cJSON *do_exception(struct agent *a, const struct agent_conn *c)
{
    /* held by its pidfd (snap_pid checks it at every step); on an old kernel by its start time */
    if (!caller_here(c))
        return agent_fail("the caller (pid %d) has exited", (int)c->cr.pid);
    struct snap_request rq = {.pid = c->cr.pid,
                              .trigger = "hook",
                              .kind = "exception",
                              .config = a->config,
                              .pidfd = c->pidfd > 0 ? c->pidfd : 0,
                              .room = "own"};
    char reason[300];
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(c->req, "reason");
    snprintf(reason, sizeof(reason), "%s",
             cJSON_IsString(r) ? r->valuestring : "an uncaught exception");
    rq.reason = reason;
    rq.nmembers = request_members(c->req, rq.members, 4);
    char bundle[1200], err[600];
    cJSON *info = NULL;
    int rc = snap_pid(&rq, bundle, sizeof(bundle), &info, err, sizeof(err));
    cJSON_Delete(info);
    for (size_t i = 0; i < rq.nmembers; i++)
        close(rq.members[i].fd);
    if (rc)
        return agent_fail("snapshot of pid %d failed: %s", (int)c->cr.pid, err);
    char line[1300];
    snprintf(line, sizeof(line), "ok %s", bundle);
    return capture_answer(0, line, "slim");
}

/* crashpack-capture --event for a reported end: attributed to the caller's uid, its time the
 * agent's clock (the caller's is not asked), its job the supervising run's. */
static cJSON *do_reported(struct agent *a, const struct agent_conn *c, const char *kind)
{
    const cJSON *req = c->req, *v;
    char a_pid[24], a_uid[24], a_gid[24], a_st[32], a_status[16], a_sig[16];
    snprintf(a_pid, sizeof(a_pid), "%d", (int)c->about);
    snprintf(a_uid, sizeof(a_uid), "%u", (unsigned)c->cr.uid);
    snprintf(a_gid, sizeof(a_gid), "%u", (unsigned)c->cr.gid);
    const char *args[48] = {"--kind", kind,  "--pid",         a_pid, "--uid",     a_uid,
                            "--gid",  a_gid, "--reported-by", a_uid, "--trigger", "run",
                            "--room", "own"};
    size_t n = 14;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(req, "start_time")) &&
        v->valuedouble >= 1) {
        snprintf(a_st, sizeof(a_st), "%.0f", v->valuedouble);
        args[n++] = "--start-time";
        args[n++] = a_st;
    }
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(req, "status")) &&
        v->valuedouble >= 0 && v->valuedouble <= 255) {
        snprintf(a_status, sizeof(a_status), "%d", (int)v->valuedouble);
        args[n++] = "--status";
        args[n++] = a_status;
    }
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(req, "signal")) &&
        v->valuedouble >= 1 && v->valuedouble <= 64) {
        snprintf(a_sig, sizeof(a_sig), "%d", (int)v->valuedouble);
        args[n++] = "--signal";
        args[n++] = a_sig;
    }
    const char *job = c->job[0] ? c->job : cp_jstr_ne(req, "job");
    const char *strs[][3] = {{"--comm", cp_jstr_ne(req, "comm")},
                             {"--reason", cp_jstr_ne(req, "reason")},
                             {"--job", job}};
    for (size_t i = 0; i < 3; i++)
        if (strs[i][1]) {
            args[n++] = strs[i][0];
            args[n++] = strs[i][1];
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

/* A user's query of the node's knowledge base: that uid's crashes only (the uid is the peer's,
 * never the request's). */
static cJSON *do_db(struct agent *a, const struct agent_conn *c)
{
    char err[1024] = "";
    int notfound = 0;
    cJSON *doc = a->db_query(a->db, c->req, (unsigned)c->cr.uid, &notfound, err, sizeof(err));
    if (!doc) {
        cJSON *o = agent_fail("%s", err[0] ? err : "the query failed");
        cJSON_AddBoolToObject(o, "not_found", notfound);
        return o;
    }
    cJSON *o = ok_object();
    cJSON_AddItemToObject(o, "document", doc);
    return o;
}

cJSON *agent_work(struct agent *a, struct agent_conn *c)
{
    const char *op = cp_jstr_ne(c->req, "op"), *kind = cp_jstr_ne(c->req, "kind");
    if (op && !strcmp(op, "db"))
        return do_db(a, c);
    cJSON *ans = !strcmp(kind, "exception") ? do_exception(a, c) : do_reported(a, c, kind);
    agent_log(a, "pid %d (uid %u) %s capture of pid %d: %s", (int)c->cr.pid, (unsigned)c->cr.uid,
              kind, (int)c->about,
              cp_jstr_ne(ans, "bundle") ? cp_jstr_ne(ans, "bundle") : cp_jstr_ne(ans, "error"));
    return ans;
}
