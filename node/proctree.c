/* proctree.c - every process of a supervised job (proctree.h). */
#include "proctree.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* linux/pidfd.h of Linux 6.15 (the headers here may be older): PIDFD_GET_INFO's first version */
struct cp_pidfd_info {
    uint64_t mask, cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
};
#define CP_PIDFD_INFO_EXIT (1ULL << 3)
#define CP_PIDFD_GET_INFO _IOWR(0xFF, 11, struct cp_pidfd_info)

#define MAX_PROCS 4096       /* known processes at once; more are not tracked (counted) */
#define ENVIRON_MAX (1u << 20)
#define CMDLINE_MAX (1u << 16)
#define SECRETS_MAX 256      /* secret values kept for scrubbing the output tail */

/* rank and scheduler variables copied into process.json's "rank" */
static const char *const rank_vars[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
    "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
    "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
    "CRASHPACK_JOB_ID", NULL};

static double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int pt_have_pidfd_exit(void)
{
    struct utsname u;
    int maj = 0, min = 0;
    if (uname(&u) || sscanf(u.release, "%d.%d", &maj, &min) != 2)
        return 0;
    return maj > 6 || (maj == 6 && min >= 15);
}

void pt_init(struct ptree *t, const struct cp_config *cfg, cJSON *job)
{
    memset(t, 0, sizeof(*t));
    t->cfg = cfg;
    t->job = job;
    t->self = getpid();
    t->self_sid = getsid(0);
    t->job_sid = -1;
    t->pidfd_exit = pt_have_pidfd_exit();
}

static void proc_free(struct pt_proc *p)
{
    if (p->pidfd >= 0)
        close(p->pidfd);
    p->pidfd = -1;
    cJSON_Delete(p->info);
    p->info = NULL;
    cJSON_Delete(p->gpu);
    p->gpu = NULL;
}

void pt_free(struct ptree *t)
{
    for (size_t i = 0; i < t->n; i++)
        proc_free(&t->p[i]);
    free(t->p);
    cJSON_Delete(t->job);
    cp_scrub_free(&t->scrub);
    memset(t, 0, sizeof(*t));
}

struct pt_proc *pt_find(struct ptree *t, pid_t pid)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->p[i].pid == pid && t->p[i].state != PT_DONE)
            return &t->p[i];
    return NULL;
}

size_t pt_live(const struct ptree *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->p[i].state != PT_DONE;
    return n;
}

void pt_remove(struct ptree *t, struct pt_proc *p)
{
    size_t i = (size_t)(p - t->p);
    if (i >= t->n)
        return;
    proc_free(p);
    memmove(&t->p[i], &t->p[i + 1], (t->n - i - 1) * sizeof(*p));
    t->n--;
}

/* /proc/PID/stat: comm, state, ppid, session, start time. 0, or -1 when it is gone. */
static int read_stat(pid_t pid, char *comm, size_t commlen, char *state, pid_t *ppid, pid_t *sid,
                     unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (r <= 0)
        return -1;
    buf[r] = 0;
    char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
    if (!lp || !rp || rp < lp || !rp[1])
        return -1;
    if (comm)
        snprintf(comm, commlen, "%.*s", (int)(rp - lp - 1), lp + 1);
    char st = 0;
    int pp = 0, pg = 0, ss = 0;
    if (sscanf(rp + 2, "%c %d %d %d", &st, &pp, &pg, &ss) != 4)
        return -1;
    if (state)
        *state = st;
    if (ppid)
        *ppid = pp;
    if (sid)
        *sid = ss;
    if (start && cp_stat_field(buf, 22, start))
        *start = 0;
    return 0;
}

static char *proc_file(pid_t pid, const char *name, size_t max, size_t *len)
{
    char path[64];
    int tr;
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
    return read_file_at(AT_FDCWD, path, max, len, &tr);
}

static int is_python(const char *exe, const char *comm)
{
    const char *b = strrchr(exe, '/');
    b = b ? b + 1 : exe;
    return !strncmp(b, "python", 6) || !strncmp(comm, "python", 6) ||
           !strcmp(comm, "pt_main_thread");
}

/* The identity of p (again, after an exec): process.json. */
static void record(struct ptree *t, struct pt_proc *p)
{
    cJSON_Delete(p->info);
    cJSON *o = p->info = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "crashpack-process/1");
    cJSON_AddNumberToObject(o, "pid", p->pid);
    cJSON_AddNumberToObject(o, "ppid", p->ppid);
    cJSON_AddNumberToObject(o, "start_time", (double)p->start);
    cJSON_AddNumberToObject(o, "first_seen", p->first_seen);
    cJSON_AddNumberToObject(o, "recorded", now_wall());
    cJSON_AddStringToObject(o, "comm", p->comm);
    ssize_t el = 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
    el = readlink(path, p->exe, sizeof(p->exe) - 1);
    p->exe[el > 0 ? el : 0] = 0;
    if (el > 0)
        cJSON_AddStringToObject(o, "exe", p->exe);
    else
        cJSON_AddNullToObject(o, "exe");
    size_t len;
    char *s = proc_file(p->pid, "status", 1 << 16, &len);
    char *u = s ? strstr(s, "\nUid:") : NULL, *g = s ? strstr(s, "\nGid:") : NULL;
    p->uid = u ? (uid_t)strtoul(u + 5, NULL, 10) : (uid_t)-1;
    p->gid = g ? (gid_t)strtoul(g + 5, NULL, 10) : (gid_t)-1;
    free(s);
    cJSON_AddNumberToObject(o, "uid", u ? (double)p->uid : -1);
    cJSON_AddNumberToObject(o, "gid", g ? (double)p->gid : -1);
    /* the command line, secrets masked */
    s = proc_file(p->pid, "cmdline", CMDLINE_MAX, &len);
    cJSON *argv = cJSON_AddArrayToObject(o, "cmdline");
    if (s && len) {
        char *av[1024];
        int ac = 0;
        for (size_t i = 0; i < len && ac < 1024; i += strlen(s + i) + 1)
            av[ac++] = s + i;
        cp_mask_cmdline(t->cfg, av, ac);
        for (int i = 0; i < ac; i++)
            cJSON_AddItemToArray(argv, cJSON_CreateString(av[i]));
    }
    free(s);
    s = proc_file(p->pid, "cgroup", 1 << 16, &len);
    while (s && len && s[len - 1] == '\n')
        s[--len] = 0;
    if (s)
        cJSON_AddStringToObject(o, "cgroup", s);
    else
        cJSON_AddNullToObject(o, "cgroup");
    free(s);
    /* the environment: every name; secret values replaced (and kept for the output's scrub) */
    s = proc_file(p->pid, "environ", ENVIRON_MAX, &len);
    cJSON *rank = cJSON_AddObjectToObject(o, "rank");
    if (s) {
        cJSON *env = cJSON_AddObjectToObject(o, "environ");
        cJSON *red = cJSON_AddArrayToObject(o, "environ_redacted");
        for (size_t i = 0; i < len; i += strlen(s + i) + 1) {
            char *kv = s + i, *eq = strchr(kv, '=');
            if (!eq || eq == kv)
                continue;
            *eq = 0;
            char *v = eq + 1;
            if (cp_secret_env_name(t->cfg, kv)) {
                if (t->scrub.n < SECRETS_MAX)
                    cp_scrub_add(&t->scrub, v, strlen(v));
                cJSON_AddStringToObject(env, kv, "<redacted>");
                cJSON_AddItemToArray(red, cJSON_CreateString(kv));
                continue;
            }
            cp_mask_secrets(v);
            if (!cJSON_GetObjectItemCaseSensitive(env, kv))
                cJSON_AddStringToObject(env, kv, v);
            for (size_t k = 0; rank_vars[k]; k++)
                if (!strcmp(rank_vars[k], kv))
                    cJSON_AddStringToObject(rank, kv, v);
        }
    } else {
        cJSON_AddNullToObject(o, "environ");
    }
    free(s);
    if (t->job)
        cJSON_AddItemToObject(o, "job", cJSON_Duplicate(t->job, 1));
    cJSON_AddBoolToObject(o, "main", p->main);
    p->python = is_python(p->exe, p->comm);
    cJSON_AddBoolToObject(o, "python", p->python);
}

void pt_record(struct ptree *t, struct pt_proc *p, char *const *argv, const char *exe)
{
    char comm[64];
    if (!read_stat(p->pid, comm, sizeof(comm), NULL, NULL, NULL, NULL))
        snprintf(p->comm, sizeof(p->comm), "%s", comm);
    record(t, p);
    cJSON *cl = cJSON_GetObjectItemCaseSensitive(p->info, "cmdline");
    if (argv && !p->exe[0] && cJSON_GetArraySize(cl) == 0) {
        /* gone already: what it was started as (its environment: the supervisor's) */
        char *av[1024];
        int ac = 0;
        for (; argv[ac] && ac < 1024; ac++)
            if (!(av[ac] = strdup(argv[ac])))
                break;
        cp_mask_cmdline(t->cfg, av, ac);
        for (int i = 0; i < ac; i++)
            cJSON_AddItemToArray(cl, cJSON_CreateString(av[i]));
        for (int i = 0; i < ac; i++)
            free(av[i]);
        cJSON_AddStringToObject(p->info, "recorded_from", "the supervisor's command line");
        if (exe && exe[0]) {
            snprintf(p->exe, sizeof(p->exe), "%s", exe);
            cJSON_ReplaceItemInObject(p->info, "exe", cJSON_CreateString(p->exe));
            p->python = is_python(p->exe, p->comm);
            cJSON_ReplaceItemInObject(p->info, "python", cJSON_CreateBool(p->python));
        }
    }
}

struct pt_proc *pt_add(struct ptree *t, pid_t pid, int main)
{
    if (t->n >= MAX_PROCS) {
        t->missed++;
        return NULL;
    }
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
        t->missed++;
        return NULL;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    struct pt_proc p = {.pid = pid, .pidfd = fd, .main = main, .first_seen = now_wall()};
    char st = 0;
    pid_t sid = 0;
    if (read_stat(pid, p.comm, sizeof(p.comm), &st, &p.ppid, &sid, &p.start)) {
        close(fd);
        t->missed++;
        return NULL;
    }
    if (main)
        t->job_sid = pid; /* it calls setsid() before it execs */
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 32;
        struct pt_proc *np = realloc(t->p, nc * sizeof(*np));
        if (!np) {
            close(fd);
            return NULL;
        }
        t->p = np;
        t->cap = nc;
    }
    t->p[t->n] = p;
    struct pt_proc *q = &t->p[t->n++];
    record(t, q);
    t->seen++;
    return q;
}

/* Adds the children of every thread of pid that are not known yet. parent: pid itself. */
static void scan_children(struct ptree *t, pid_t pid)
{
    char path[80];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char cp[128], buf[4096];
        snprintf(cp, sizeof(cp), "/proc/%d/task/%s/children", (int)pid, e->d_name);
        int fd = open(cp, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (r <= 0)
            continue;
        buf[r] = 0;
        for (char *s = buf, *end; *s;) {
            long c = strtol(s, &end, 10);
            if (end == s)
                break;
            s = end;
            if (c <= 0 || pt_find(t, (pid_t)c))
                continue;
            if (pid == t->self) {
                /* the supervisor's own children: the job's orphans (its session), not its
                 * helpers (crashpack-capture, snap, reporters: another session) */
                pid_t sid = 0;
                if (read_stat((pid_t)c, NULL, 0, NULL, NULL, &sid, NULL) || sid == t->self_sid ||
                    (t->job_sid > 0 && sid != t->job_sid))
                    continue;
            }
            struct pt_proc *q = pt_add(t, (pid_t)c, 0);
            /* the pid may have been reused between the list and the pidfd: it must still be
             * pid's child (or an orphan of the job, re-parented here) */
            if (q && q->ppid != pid && q->ppid != t->self)
                pt_remove(t, q), t->missed++, t->seen--;
        }
    }
    closedir(d);
}

/* An exit status from the pidfd, once the parent has reaped the process. */
static int pidfd_status(struct ptree *t, struct pt_proc *p)
{
    struct cp_pidfd_info in = {.mask = CP_PIDFD_INFO_EXIT};
    if (!t->pidfd_exit || ioctl(p->pidfd, CP_PIDFD_GET_INFO, &in) || !(in.mask & CP_PIDFD_INFO_EXIT))
        return 0;
    p->status = in.exit_code;
    p->status_known = 1;
    p->seen_by = "pidfd";
    p->state = PT_DONE;
    close(p->pidfd);
    p->pidfd = -1;
    return 1;
}

#define GPU_LOOK_S 1.0    /* how often a live process's descriptors are looked at */
#define GPU_LOOK_FDS 4096 /* descriptors looked at per look */

/* What GPUs p had (issue 23): its /dev/nvidia* descriptors, looked at every GPU_LOOK_S while it
 * lives (a process opens its GPUs when CUDA starts, after its exec), kept as process.json's "gpu"
 * {devices [{path, kind, major, minor}], looks, last_look}: a bundle written after the process
 * ended then says whether it had a GPU. */
static void look_gpu(struct pt_proc *p, double now)
{
    if (p->gpu_next > now)
        return;
    p->gpu_next = now + GPU_LOOK_S;
    if (!p->gpu && !(p->gpu = cJSON_CreateObject()))
        return;
    cJSON *devs = cJSON_GetObjectItemCaseSensitive(p->gpu, "devices");
    if (!devs)
        devs = cJSON_AddArrayToObject(p->gpu, "devices");
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)p->pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) && n++ < GPU_LOOK_FDS) {
        char fp[96], target[256];
        snprintf(fp, sizeof(fp), "%s/%s", path, e->d_name);
        ssize_t l = readlink(fp, target, sizeof(target) - 1);
        struct stat st;
        if (l <= 11 || (target[l] = 0, strncmp(target, "/dev/nvidia", 11)) || stat(fp, &st) ||
            !S_ISCHR(st.st_mode))
            continue;
        const cJSON *x;
        int seen = 0;
        cJSON_ArrayForEach(x, devs) seen |=
            !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "path")), target);
        if (seen || cJSON_GetArraySize(devs) >= 64)
            continue;
        unsigned maj = major(st.st_rdev), min = minor(st.st_rdev);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", target);
        cJSON_AddStringToObject(o, "kind",
                                maj != 195   ? "other"
                                : min == 255 ? "nvidiactl"
                                : min == 254 ? "nvidia-modeset"
                                             : "gpu");
        cJSON_AddNumberToObject(o, "major", maj);
        cJSON_AddNumberToObject(o, "minor", min);
        cJSON_AddItemToArray(devs, o);
    }
    closedir(d);
    cJSON *lk = cJSON_GetObjectItemCaseSensitive(p->gpu, "looks");
    if (lk)
        cJSON_SetNumberValue(lk, lk->valuedouble + 1);
    else
        cJSON_AddNumberToObject(p->gpu, "looks", 1);
    cJSON_DeleteItemFromObjectCaseSensitive(p->gpu, "last_look");
    cJSON_AddNumberToObject(p->gpu, "last_look", now);
    cJSON_DeleteItemFromObjectCaseSensitive(p->info, "gpu"); /* process.json's copy */
    cJSON_AddItemToObject(p->info, "gpu", cJSON_Duplicate(p->gpu, 1));
}

void pt_scan(struct ptree *t)
{
    scan_children(t, t->self);
    for (size_t i = 0; i < t->n; i++) {
        struct pt_proc *p = &t->p[i];
        if (p->state == PT_GONE) {
            if (!pidfd_status(t, p)) {
                /* no PIDFD_INFO_EXIT: the status is gone with the reaping; a zombie still
                 * being there says it was not reaped yet */
                char st = 0;
                if (!t->pidfd_exit && (read_stat(p->pid, NULL, 0, &st, NULL, NULL, NULL) || st != 'Z')) {
                    p->state = PT_DONE;
                    p->status_known = 0;
                }
            }
            continue;
        }
        if (p->state != PT_ALIVE)
            continue;
        scan_children(t, p->pid);
        p = &t->p[i]; /* the array may have moved */
        /* an exec since the last look: a new exe */
        char path[64], exe[512];
        snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
        ssize_t el = readlink(path, exe, sizeof(exe) - 1);
        if (el > 0) {
            exe[el] = 0;
            if (strcmp(exe, p->exe) &&
                !read_stat(p->pid, p->comm, sizeof(p->comm), NULL, NULL, NULL, NULL)) {
                record(t, p);
                p->gpu_next = 0; /* process.json anew: its GPUs with it */
            }
        }
        look_gpu(p, now_wall());
    }
}

void pt_ended(struct ptree *t, struct pt_proc *p)
{
    if (p->state != PT_ALIVE)
        return;
    p->state = PT_GONE;
    p->ended = now_wall();
    /* an exec not seen yet (it exec'd and ended within one interval): the zombie's comm */
    char comm[64];
    if (!read_stat(p->pid, comm, sizeof(comm), NULL, NULL, NULL, NULL) && strcmp(comm, p->comm)) {
        snprintf(p->comm, sizeof(p->comm), "%s", comm);
        cJSON_ReplaceItemInObject(p->info, "comm", cJSON_CreateString(comm));
        cJSON_AddBoolToObject(p->info, "exec_not_recorded", 1);
        if (!strncmp(comm, "python", 6))
            p->python = 1;
    }
    pidfd_status(t, p);
}

int pt_reaped(struct ptree *t, pid_t pid, int status)
{
    struct pt_proc *p = pt_find(t, pid);
    if (!p)
        return 0;
    if (p->state == PT_ALIVE)
        pt_ended(t, p);
    if (p->state != PT_DONE) {
        p->status = status;
        p->status_known = 1;
        p->seen_by = "waitpid";
        p->state = PT_DONE;
        if (p->pidfd >= 0)
            close(p->pidfd);
        p->pidfd = -1;
    }
    return 1;
}
