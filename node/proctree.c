/* proctree.c - every process of a supervised job (proctree.h). */
#include "proctree.h"
#include "datadir.h" /* cp_bindir */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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
#define CHILDREN_MAX (1u << 20) /* /proc/PID/task/TID/children read at most */
#define LOOK_MAX_S 2.0       /* the longest gap between two looks at a process's exe */

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

/* A member's value: the low 32 bits of its start time (0: not known, it was gone). */
static int start32(unsigned long long start)
{
    return (int)(uint32_t)start;
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
    t->look_min = 0.02;
    t->epfd = -1;
    /* the supervisor's own programs, which its helpers run */
    const char *bin = cp_bindir();
    snprintf(t->helper_exe[0], sizeof(t->helper_exe[0]), "%s/crashpack", bin ? bin : ".");
    snprintf(t->helper_exe[1], sizeof(t->helper_exe[1]), "%s/crashpack-capture", bin ? bin : ".");
    snprintf(t->helper_exe[2], sizeof(t->helper_exe[2]), "%s", cfg ? cfg->post_command : "");
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
    pm_free(&t->idx);
    pm_free(&t->members);
    cJSON_Delete(t->job);
    cp_scrub_free(&t->scrub);
    memset(t, 0, sizeof(*t));
}

struct pt_proc *pt_find(struct ptree *t, pid_t pid)
{
    size_t it = 0;
    int i;
    while (pm_next(&t->idx, pid, &it, &i))
        if (i >= 0 && (size_t)i < t->n && t->p[i].state != PT_DONE)
            return &t->p[i];
    return NULL;
}

struct pt_proc *pt_from_epoll(struct ptree *t, uint64_t data)
{
    pid_t pid = (pid_t)(data & 0xffffffffu);
    int fd = (int)(data >> 32), i;
    size_t it = 0;
    while (pm_next(&t->idx, pid, &it, &i))
        if (i >= 0 && (size_t)i < t->n && t->p[i].pidfd == fd)
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
    pm_del(&t->idx, p->pid, (int)i);
    if (t->lineage && p->state == PT_DONE) /* reaped: its fork events have been read */
        pm_del(&t->members, p->pid, start32(p->start));
    if (p->state == PT_DONE)
        t->ndone--;
    proc_free(p);
    /* the last entry takes its place */
    if (i != t->n - 1) {
        t->p[i] = t->p[t->n - 1];
        pm_set(&t->idx, t->p[i].pid, (int)(t->n - 1), (int)i);
    }
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
    p->recorded = now_mono();
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
    double mono = now_mono();
    struct pt_proc p = {.pid = pid,
                        .pidfd = fd,
                        .main = main,
                        .signalled = t->ending,
                        .first_seen = now_wall(),
                        .look_gap = t->look_min,
                        .next_look = mono + t->look_min};
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
    if (pm_add(&t->idx, pid, (int)t->n)) {
        close(fd);
        return NULL;
    }
    p.recorded = mono;
    t->p[t->n] = p;
    struct pt_proc *q = &t->p[t->n++];
    if (t->epfd >= 0) {
        /* one shot: it stays readable after it ended, and is looked at once */
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT,
                                 .data.u64 = ((uint64_t)(uint32_t)fd << 32) | (uint32_t)pid};
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    record(t, q);
    t->seen++;
    return q;
}

/* Whether c, a child of the supervisor that it does not know, is the job's: an orphan of it
 * re-parented here (in the job's session, or in one of its own: setsid, daemons), not one of the
 * supervisor's helpers (reporters and snaps: its own session; crashpack-capture's detached
 * finisher and what that starts: their programs). */
static int job_orphan(struct ptree *t, pid_t c)
{
    pid_t sid = 0;
    if (read_stat(c, NULL, 0, NULL, NULL, &sid, NULL) || sid == t->self_sid)
        return 0;
    if (t->job_sid > 0 && sid == t->job_sid)
        return 1;
    char path[64], exe[PATH_MAX];
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)c);
    ssize_t el = readlink(path, exe, sizeof(exe) - 1);
    if (el <= 0)
        return 1;
    exe[el] = 0;
    for (size_t i = 0; i < sizeof(t->helper_exe) / sizeof(t->helper_exe[0]); i++)
        if (t->helper_exe[i][0] && !strcmp(exe, t->helper_exe[i]))
            return 0;
    return 1;
}

/* Adds the children of every thread of pid that are not known yet. The number added. */
static size_t scan_children(struct ptree *t, pid_t pid)
{
    char path[80];
    size_t added = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char cp[128];
        size_t len;
        int tr;
        snprintf(cp, sizeof(cp), "/proc/%d/task/%s/children", (int)pid, e->d_name);
        /* all of it: a shell's thousand children are more than a page */
        char *buf = read_file_at(AT_FDCWD, cp, CHILDREN_MAX, &len, &tr);
        for (char *s = buf, *end; s && *s;) {
            long c = strtol(s, &end, 10);
            if (end == s)
                break;
            s = end;
            if (c <= 0 || pt_find(t, (pid_t)c) || (pid == t->self && !job_orphan(t, (pid_t)c)))
                continue;
            struct pt_proc *q = pt_add(t, (pid_t)c, 0);
            /* the pid may have been reused between the list and the pidfd: it must still be
             * pid's child (or an orphan of the job, re-parented here) */
            if (q && q->ppid != pid && q->ppid != t->self)
                pt_remove(t, q), t->missed++, t->seen--;
            else if (q)
                added++;
        }
        free(buf);
    }
    closedir(d);
    return added;
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
    t->ndone++;
    close(p->pidfd);
    p->pidfd = -1;
    return 1;
}

#define GPU_LOOK_S 1.0     /* how often a live process's descriptors are looked at, first */
#define GPU_LOOK_MAX_S 8.0 /* ... doubling to this while it has none open (a 1,500-process job) */
#define GPU_LOOK_FDS 4096  /* descriptors looked at per look */

/* What GPUs p had (issue 23): its /dev/nvidia* descriptors, looked at every GPU_LOOK_S while it
 * lives (a process opens its GPUs when CUDA starts, after its exec), kept as process.json's "gpu"
 * {devices [{path, kind, major, minor}], looks, last_look}: a bundle written after the process
 * ended then says whether it had a GPU. */
static void look_gpu(struct pt_proc *p, double now)
{
    if (p->gpu_next > now)
        return;
    p->gpu_gap = p->gpu_gap < GPU_LOOK_S ? GPU_LOOK_S : p->gpu_gap;
    p->gpu_next = now + p->gpu_gap;
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
    /* one with a GPU is looked at every GPU_LOOK_S (it may open more); one without, less often */
    p->gpu_gap = cJSON_GetArraySize(devs)           ? GPU_LOOK_S
                 : p->gpu_gap * 2 > GPU_LOOK_MAX_S ? GPU_LOOK_MAX_S
                                                   : p->gpu_gap * 2;
    p->gpu_next = now + p->gpu_gap;
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

void pt_look_gpus(struct ptree *t)
{
    double now = now_wall();
    for (size_t i = 0; i < t->n; i++)
        if (t->p[i].state == PT_ALIVE)
            look_gpu(&t->p[i], now);
}

size_t pt_walk(struct ptree *t)
{
    size_t added = scan_children(t, t->self);
    /* t->n grows as children are found: they are walked in the same pass */
    for (size_t i = 0; i < t->n; i++)
        if (t->p[i].state == PT_ALIVE)
            added += scan_children(t, t->p[i].pid);
    return added;
}

size_t pt_check_gone(struct ptree *t)
{
    size_t gone = 0;
    for (size_t i = 0; i < t->n; i++) {
        struct pt_proc *p = &t->p[i];
        if (p->state != PT_GONE || pidfd_status(t, p))
            continue;
        /* no PIDFD_INFO_EXIT: the status is gone with the reaping; a zombie still being there
         * says it was not reaped yet */
        char st = 0;
        if (!t->pidfd_exit && (read_stat(p->pid, NULL, 0, &st, NULL, NULL, NULL) || st != 'Z')) {
            p->state = PT_DONE;
            t->ndone++;
            p->status_known = 0;
        } else {
            gone++;
        }
    }
    return gone;
}

size_t pt_look_execs(struct ptree *t, int all)
{
    size_t n = 0;
    double now = now_mono();
    for (size_t i = 0; i < t->n; i++) {
        struct pt_proc *p = &t->p[i];
        if (p->state != PT_ALIVE || (!all && p->next_look > now))
            continue;
        /* an exec since the last look: a new exe; looked at less often the longer it stays */
        char path[64], exe[512];
        snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
        ssize_t el = readlink(path, exe, sizeof(exe) - 1);
        p->look_gap = p->look_gap * 2 > LOOK_MAX_S ? LOOK_MAX_S : p->look_gap * 2;
        if (el > 0) {
            exe[el] = 0;
            if (strcmp(exe, p->exe) &&
                !read_stat(p->pid, p->comm, sizeof(p->comm), NULL, NULL, NULL, NULL)) {
                p->recorded = now;
                record(t, p);
                p->gpu_next = 0; /* process.json anew: its GPUs with it, at the next tick */
                p->gpu_gap = 0;
                p->look_gap = t->look_min;
                n++;
            }
        }
        p->next_look = now + p->look_gap;
    }
    return n;
}

void pt_scan(struct ptree *t)
{
    pt_walk(t);
    pt_check_gone(t);
    pt_look_execs(t, 1);
}

/* ---- the proc connector's events (jobtrack.h): the job's processes by their parentage ---- */

void pt_lineage(struct ptree *t, int on)
{
    t->lineage = on;
    pm_clear(&t->members);
    for (size_t i = 0; on && i < t->n; i++)
        if (t->p[i].state != PT_DONE)
            pm_add(&t->members, t->p[i].pid, start32(t->p[i].start));
}

/* Whether pid is a member: one of its pairs has the start time of the process that has the pid
 * now (a member ended and its pid reused is not one), or the process is gone, or its start time
 * was not known. */
static int member(struct ptree *t, pid_t pid)
{
    size_t it = 0;
    int v, have = 0;
    unsigned long long now = 0;
    while (pm_next(&t->members, pid, &it, &v)) {
        if (!v)
            return 1;
        if (!have) {
            have = 1;
            if (read_stat(pid, NULL, 0, NULL, NULL, NULL, &now))
                return 1; /* gone: its late events still name its children */
        }
        if (start32(now) == v)
            return 1;
    }
    return 0;
}

struct pt_proc *pt_fork(struct ptree *t, pid_t ppid, pid_t pid)
{
    if (!t->lineage || !member(t, ppid) || pt_find(t, pid))
        return NULL;
    struct pt_proc *q = pt_add(t, pid, 0);
    /* the pid reused since the fork (the event read late): not a child of the job's */
    if (q && q->ppid != ppid && !(q->ppid == t->self ? job_orphan(t, pid) : member(t, q->ppid))) {
        pt_remove(t, q), t->missed++, t->seen--;
        return NULL;
    }
    /* its children are the job's even when it is gone already */
    pm_add(&t->members, pid, q ? start32(q->start) : 0);
    return q;
}

void pt_exec(struct ptree *t, pid_t pid, double when)
{
    struct pt_proc *p = t->lineage && pm_has(&t->members, pid) ? pt_find(t, pid) : NULL;
    /* not when its identity was recorded after the exec already (the fork's event read late) */
    if (p && p->state == PT_ALIVE && p->recorded < when)
        pt_record(t, p, NULL, NULL);
}

void pt_exit(struct ptree *t, pid_t pid)
{
    if (!t->lineage || !pm_has(&t->members, pid))
        return;
    /* the leader of a process whose other threads run on (or are still ending): still the
     * job's; a member left behind is told from a reused pid by its start time */
    struct pt_proc *p = pt_find(t, pid);
    struct pollfd pf = {p ? p->pidfd : -1, POLLIN, 0};
    if (p && p->state == PT_ALIVE && p->pidfd >= 0 && poll(&pf, 1, 0) == 0)
        return;
    while (pm_del(&t->members, pid, -1))
        ;
}

int pt_signal(struct pt_proc *p, int sig)
{
    if (p->pidfd < 0 || p->state != PT_ALIVE)
        return -1;
    return (int)syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0);
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
        t->ndone++;
        if (p->pidfd >= 0)
            close(p->pidfd);
        p->pidfd = -1;
    }
    return 1;
}
