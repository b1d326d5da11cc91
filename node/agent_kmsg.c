/* agent_kmsg.c - the node service's kernel log (agent_int.h): /dev/kmsg from the moment the
 * agent starts, each record parsed by its format (common/kline.h: a comm cannot forge a field).
 *
 *  - An OOM kill ("oom-kill:constraint=..." then "Killed process N (comm) ... UID:U"): what is
 *    known at that moment (the constraint, the memory cgroups with their limits and counters:
 *    oom.json; the start time of the killed process while it is a zombie; the job of the `crashpack
 *    run` that supervises it) is queued, and a worker writes the bundle (crashpack-capture --event
 *    --kind oom_kill --room fair). These captures start from the kernel, not from a user's
 *    request: no user's requests count against them (agent.c).
 *  - NVIDIA Xid and fallen-off-the-bus lines go to STATE/gpu-events.jsonl with nvidia-smi at that
 *    moment. */
#include "agent_int.h"
#include "capreq.h"
#include "kline.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KMSG_REC_MAX 8192

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
    cJSON_AddStringToObject(o, "limit",
                            !cons                               ? "unknown"
                            : !strcmp(cons, "CONSTRAINT_MEMCG") ? "cgroup"
                            : !strcmp(cons, "CONSTRAINT_NONE")  ? "host"
                                                                : "other");
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
        add_cg_file(v1, "memory.limit_in_bytes", "/sys/fs/cgroup/memory", memcg,
                    "memory.limit_in_bytes");
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
 * parsed by its format: what is known now, queued for a worker (a bundle for that pid, owned by
 * that uid). At most AGENT_OOM_QUEUE_PER_UID kills of one uid wait: a user whose processes are
 * killed in a loop cannot push another user's kill out. */
static void oom_killed(struct agent *a, const struct kline_oom *k, const char *text)
{
    if ((int)k->pid <= 0 || !k->have_comm || k->uid < 0 || !a->cfg.agent_oom)
        return;
    struct agent_uid *u = agent_uid_of(a, (uid_t)k->uid);
    if (a->noom >= AGENT_OOM_QUEUE || !u || u->oom_queued >= AGENT_OOM_QUEUE_PER_UID) {
        a->refused++;
        agent_log(a, "OOM kill of pid %d (%s) not captured: %d kills are waiting already",
                  (int)k->pid, k->comm, (int)(u ? u->oom_queued : a->noom));
        return;
    }
    struct agent_oom *o = &a->oomq[a->noom++];
    memset(o, 0, sizeof(*o));
    o->pid = (pid_t)k->pid;
    o->uid = (uid_t)k->uid;
    u->oom_queued++;
    snprintf(o->comm, sizeof(o->comm), "%s", k->comm);
    o->oom_json = oom_json(a, text, o->pid, o->comm, o->uid);
    int same = a->oom_pid == o->pid;
    snprintf(o->reason, sizeof(o->reason), "killed by the kernel's OOM killer (%s%s%s)",
             same && !strcmp(a->oom_constraint, "CONSTRAINT_MEMCG") ? "memory cgroup limit"
             : same && a->oom_constraint[0]                         ? a->oom_constraint
                                                                    : "host memory",
             same && a->oom_memcg[0] ? ", oom_memcg=" : "", same ? a->oom_memcg : "");
    const char *job = agent_job_of(a, o->pid, o->uid);
    snprintf(o->job, sizeof(o->job), "%s", job ? job : "");
    o->start = cp_start_ticks(o->pid); /* a zombie still has it */
}

int agent_oom_capture(struct agent *a, const struct agent_oom *o)
{
    struct snap_member m = {
        "oom.json", o->oom_json ? capreq_memfd("oom.json", o->oom_json, strlen(o->oom_json)) : -1};
    char a_pid[24], a_uid[24], a_gid[24], a_st[32];
    snprintf(a_pid, sizeof(a_pid), "%d", (int)o->pid);
    snprintf(a_uid, sizeof(a_uid), "%u", (unsigned)o->uid);
    snprintf(a_gid, sizeof(a_gid), "%u", (unsigned)gid_of(o->uid));
    const char *args[32] = {"--kind",    "oom_kill", "--signal", "9",       "--pid",  a_pid,
                            "--uid",     a_uid,      "--gid",    a_gid,     "--comm", o->comm,
                            "--trigger", "agent",    "--reason", o->reason, "--room", "fair"};
    size_t n = 18;
    if (o->job[0]) {
        args[n++] = "--job";
        args[n++] = o->job;
    }
    if (o->start) {
        snprintf(a_st, sizeof(a_st), "%llu", o->start);
        args[n++] = "--start-time";
        args[n++] = a_st;
    }
    args[n] = NULL;
    char line[1400];
    int rc =
        capreq_event(a->config, args, m.fd >= 0 ? &m : NULL, m.fd >= 0 ? 1 : 0, line, sizeof(line));
    if (m.fd >= 0)
        close(m.fd);
    agent_log(a, "OOM kill of pid %d (%s, uid %u): %s", (int)o->pid, o->comm, (unsigned)o->uid,
              line);
    return rc;
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
        snprintf(why, whylen, "nvidia-smi failed (status %d)",
                 WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
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
    agent_answer(fd, o);
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

void agent_kmsg_drain(struct agent *a)
{
    char rec[KMSG_REC_MAX + 1];
    while (a->kfd >= 0) {
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
