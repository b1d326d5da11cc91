/* proc.c - who crashed, and the quick evidence from /proc/<pid>, taken before the core drains.
 *
 * Everything is read through the /proc/<pid> directory fd opened first (it refers to this
 * process for good: after a pid reuse, reads through it fail rather than show another process),
 * with O_NOFOLLOW, and with per-file caps. The environment keeps values only for an allow-list
 * of useful variables and never for secret-looking ones; cmdline secrets are masked. */
#include "capture.h"
#include "pidfd.h"
#include "util.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* CP_VERSION: the project version, set once in the top-level CMakeLists.txt */

static const char *const env_allow[] = {"CUDA_*",
                                        "NCCL_*",
                                        "TORCH_*",
                                        "TORCHELASTIC_*",
                                        "PYTORCH_*",
                                        "NVIDIA_*",
                                        "CRASHPACK_*",
                                        "RANK",
                                        "LOCAL_RANK",
                                        "WORLD_SIZE",
                                        "LOCAL_WORLD_SIZE",
                                        "GROUP_RANK",
                                        "ROLE_RANK",
                                        "MASTER_ADDR",
                                        "MASTER_PORT",
                                        "SLURM_*",
                                        "OMP_*",
                                        "MKL_*",
                                        "KMP_*",
                                        "PYTHON*",
                                        "LD_LIBRARY_PATH",
                                        "LD_PRELOAD",
                                        "PATH",
                                        "HOME",
                                        "USER",
                                        "LOGNAME",
                                        "PWD",
                                        "HOSTNAME",
                                        "LANG",
                                        "TZ",
                                        "VIRTUAL_ENV",
                                        "CONDA_PREFIX",
                                        "HF_HOME",
                                        "XLA_*",
                                        "JAX_*",
                                        NULL};

/* Secret-looking names: the built-in patterns plus the configured ones (redact_env); the one
 * list lives in config.c (cp_secret_env_name), shared with crashpack run. */
static int is_secret_name(const struct cp_config *cfg, const char *name)
{
    return cp_secret_env_name(cfg, name);
}

static int match_list(const char *const *pats, const char *name)
{
    for (; *pats; pats++)
        if (!fnmatch(*pats, name, FNM_CASEFOLD))
            return 1;
    return 0;
}

/* The value that may be stored for NAME=VALUE, or NULL (name only). */
static const char *env_value_policy(const struct cp_config *cfg, const char *name, char *value)
{
    if (is_secret_name(cfg, name) || !match_list(env_allow, name))
        return NULL;
    cp_mask_secrets(value);
    return value;
}

static int read_status_ids(const char *status, const char *key, unsigned ids[4])
{
    const char *p = strstr(status, key);
    if (!p)
        return -1;
    return sscanf(p + strlen(key), "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]) == 4 ? 0 : -1;
}

static long long boot_time(void)
{
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, "/proc/stat", 1 << 20, &len, &tr);
    long long bt = -1;
    char *p = s ? strstr(s, "\nbtime ") : NULL;
    if (p)
        bt = atoll(p + 7);
    free(s);
    return bt;
}

/* Ranges (as addresses) where `masked` differs from `orig`: what to overwrite in the core; the
 * original bytes of each are also hunted in the rest of the core and in every member. */
static void add_diff_ranges(struct cap *c, uint64_t base, const char *orig, const char *masked,
                            size_t len)
{
    for (size_t i = 0; i < len;) {
        if (orig[i] == masked[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && orig[j] != masked[j])
            j++;
        cp_scrub_add(&c->scrub, orig + i, j - i);
        struct redact *r = base ? realloc(c->redact, (c->nredact + 1) * sizeof(*r)) : NULL;
        if (r) { /* base 0: the address is not known, the value is still hunted */
            c->redact = r;
            c->redact[c->nredact++] = (struct redact){base + i, j - i};
        }
        i = j;
    }
}

/* The secrets the evidence members leave out must not survive in the core's copy of the
 * initial argv and environment block either (slim and meta bundles must be shareable). */
static void plan_core_redaction(struct cap *c)
{
    size_t len;
    int tr;
    if (c->environ_raw) {
        len = c->environ_len;
        char *m = malloc(len + 1);
        if (m) {
            memcpy(m, c->environ_raw, len);
            m[len] = 0;
            for (size_t i = 0; i < len;) {
                char *kv = m + i;
                size_t l = strnlen(kv, len - i);
                char *eq = memchr(kv, '=', l);
                if (eq) {
                    *eq = 0;
                    if (is_secret_name(&c->cfg, kv))
                        memset(eq + 1, '*', l - (size_t)(eq + 1 - kv));
                    else /* URL passwords, tokens, ... by their shape */
                        cp_mask_secrets(eq + 1);
                    *eq = '=';
                }
                i += l + 1;
            }
            add_diff_ranges(c, c->env_end > c->env_start ? c->env_start : 0, c->environ_raw, m,
                            len);
            free(m);
        }
    }
    char *cl = read_file_at(c->procfd, "cmdline", 1 << 20, &len, &tr);
    if (cl) {
        char *m = malloc(len + 1);
        if (m) {
            memcpy(m, cl, len + 1);
            char *av[4096];
            int ac = 0;
            for (size_t i = 0; i < len && ac < 4096;) {
                av[ac++] = m + i;
                i += strnlen(m + i, len - i) + 1;
            }
            cp_mask_cmdline(&c->cfg, av, ac);
            add_diff_ranges(c, c->arg_start, cl, m, len);
            free(m);
        }
        free(cl);
    }
}

/* Identity fails closed: the bundle becomes metadata-only and root-only, says why in
 * manifest.json and capture.json, and nothing is read from /proc/<pid> (it may be another
 * process that reused the pid). The core on the pipe is the kernel's own and belongs to the
 * crashed process, but it is left out too: who may read it could not be established. */
static int unverified(struct cap *c, double t, const char *step, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int unverified(struct cap *c, double t, const char *step, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->identity_unverified, sizeof(c->identity_unverified), fmt, ap);
    va_end(ap);
    c->secure = 1;
    if (c->procfd >= 0)
        close(c->procfd);
    c->procfd = -1;
    cap_step(c, step, "refused", t, "identity could not be verified: %s", c->identity_unverified);
    return -1;
}

/* Start time of this handler (/proc/self/stat field 22, clock ticks since boot), or 0. */
static unsigned long long self_start_ticks(void)
{
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, "/proc/self/stat", 4096, &len, &tr);
    unsigned long long v = 0;
    if (!s || cp_stat_field(s, 22, &v))
        v = 0;
    free(s);
    return v;
}

/* %F: is fd 3 a pidfd for our pid? One that is no pidfd at all is dropped (an older kernel);
 * a pidfd of another or of a reaped process fails closed. Returns 0, or -1 when unverified. */
static int check_pidfd(struct cap *c, double t)
{
    if (c->pidfd < 0) {
        cap_step(c, "pidfd", "absent", t, "no %%F in core_pattern");
        return 0;
    }
    long fpid = cp_pidfd_pid(c->pidfd);
    if (fpid == -2) {
        cap_step(c, "pidfd", "absent", t, "fd %d is not a pidfd (kernel before 6.16?)", c->pidfd);
        c->pidfd = -1;
    } else if (fpid != c->pid) {
        return unverified(c, t, "pidfd", "fd %d is a pidfd of %s, not of pid %d", c->pidfd,
                          fpid == -1 ? "a process that has exited and been reaped"
                                     : "another process",
                          (int)c->pid);
    } else {
        cap_step(c, "pidfd", "ok", t, "fd %d", c->pidfd);
    }
    return 0;
}

/* Whether /proc/<pid> (its stat and status) is the crashed process: why not, into why; 0 when
 * it is. uids/gids get status's Uid:/Gid: lines (real, effective, saved, fs).
 *
 * A process cannot start after it crashed, nor after its handler started (the kernel starts the
 * handler while the process still holds its pid): both start times are ticks of one clock, exact
 * to a tick. Against %t: btime, start/HZ and %t are all rounded down, so the process's start so
 * computed is at most %t; anything later is another process, with no slack needed (the old
 * window accepted 2 s after %t). */
static int not_the_process(const struct cap *c, const char *stat, const char *status,
                           unsigned uids[4], unsigned gids[4], char *why, size_t n)
{
    unsigned long long start = 0, self = self_start_ticks();
    long long bt = boot_time(), hz = sysconf(_SC_CLK_TCK);
    if (!stat || !status || cp_stat_field(stat, 22, &start)) {
        snprintf(why, n, "cannot read stat/status");
        return 1;
    }
    if (self && start > self) {
        snprintf(why, n, "process started after its handler (tick %llu > %llu): pid reused", start,
                 self);
        return 1;
    }
    if (bt > 0 && hz > 0 && c->crash_time > 0 &&
        bt + (long long)(start / (unsigned long long)hz) > c->crash_time) {
        snprintf(why, n, "process started after the crash: pid reused");
        return 1;
    }
    if (read_status_ids(status, "\nUid:", uids) || read_status_ids(status, "\nGid:", gids)) {
        snprintf(why, n, "no Uid/Gid in status");
        return 1;
    }
    if (uids[0] != c->uid || gids[0] != c->gid) {
        snprintf(why, n, "uid/gid %u/%u differ from the kernel's %u/%u", uids[0], gids[0],
                 (unsigned)c->uid, (unsigned)c->gid);
        return 1;
    }
    return 0;
}

/* AT_SECURE from auxv: setuid/setgid/file capabilities. */
static int auxv_secure(const struct cap *c)
{
    size_t len;
    int tr;
    int at_secure = 0;
    char *auxv = read_file_at(c->procfd, "auxv", 1 << 16, &len, &tr);
    for (size_t i = 0; auxv && i + 16 <= len; i += 16) {
        uint64_t k, v;
        memcpy(&k, auxv + i, 8);
        memcpy(&v, auxv + i + 8, 8);
        if (k == AT_SECURE)
            at_secure = v != 0;
    }
    free(auxv);
    return at_secure;
}

/* The verified process's facts: effective ids, name, executable, whether it is secure, where
 * the kernel put argv and envp (the core's copies are redacted in place), its environment. */
static void read_facts(struct cap *c, const char *stat, const char *status, const unsigned uids[4],
                       const unsigned gids[4])
{
    c->euid = uids[1];
    c->egid = gids[1];
    c->ngroups = cp_status_groups(status, c->groups, CP_MAX_GROUPS);
    const char *p = strstr(status, "Name:");
    if (p)
        sscanf(p + 5, " %63[^\n]", c->comm);
    ssize_t n = readlinkat(c->procfd, "exe", c->exe, sizeof(c->exe) - 1);
    c->exe[n > 0 ? n : 0] = 0;
    int at_secure = auxv_secure(c);
    c->secure = c->dumpable != 1 || at_secure || uids[0] != uids[1] || gids[0] != gids[1];
    cp_stat_field(stat, 48, &c->arg_start);
    cp_stat_field(stat, 49, &c->arg_end);
    cp_stat_field(stat, 50, &c->env_start);
    cp_stat_field(stat, 51, &c->env_end);
    int tr;
    c->environ_raw = read_file_at(c->procfd, "environ", 1 << 20, &c->environ_len, &tr);
}

int proc_identify(struct cap *c)
{
    double t = now_mono();
    if (c->event && c->event_gone) {
        cap_step(c, "identify", "absent", t, "%s",
                 c->start_ticks ? "the process has ended (or its pid is another process's now): "
                                  "its death is as reported"
                                : "no start time given: nothing is read from /proc/<pid>");
        return -1;
    }
    if (check_pidfd(c, t))
        return -1;
    t = now_mono();
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d", (int)c->pid);
    c->procfd = c->pid > 0 ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (c->procfd < 0) {
        cap_step(c, "identify", "absent", t, "/proc/%d: %s", (int)c->pid, strerror(errno));
        return -1;
    }
    /* again, now that /proc/<pid> is open: while the pidfd's process still holds the pid, the
     * directory opened is that process's */
    if (c->pidfd >= 0 && cp_pidfd_pid(c->pidfd) != c->pid)
        return unverified(c, t, "identify",
                          "the pidfd's process exited between the checks: "
                          "/proc/%d may be another process",
                          (int)c->pid);
    size_t len;
    int tr;
    char *stat = read_file_at(c->procfd, "stat", 1 << 16, &len, &tr);
    char *status = read_file_at(c->procfd, "status", 1 << 16, &len, &tr);
    unsigned uids[4] = {0}, gids[4] = {0};
    char why[160] = "";
    if (not_the_process(c, stat, status, uids, gids, why, sizeof(why))) {
        free(stat);
        free(status);
        return unverified(c, t, "identify", "%s", why);
    }
    read_facts(c, stat, status, uids, gids);
    plan_core_redaction(c);
    cap_step(c, "identify", "ok", t, "%s", c->secure ? "secure process: root-only bundle" : "");
    free(stat);
    free(status);
    return 0;
}

static void add_proc_member(struct cap *c, const char *file, const char *member, size_t cap)
{
    double t = now_mono();
    size_t len;
    int tr;
    char *s = read_file_at(c->procfd, file, cap, &len, &tr);
    if (!s) {
        cap_step(c, member, errno == ENOENT ? "absent" : "failed", t, "%s", strerror(errno));
        return;
    }
    if (bw_add(&c->bw, member, s, len))
        cap_step(c, member, "failed", t, "write: %s", strerror(c->bw.err));
    else
        cap_step(c, member, "ok", t, "%s", tr ? "truncated at the cap" : "");
    free(s);
}

static cJSON *json_lines_of(int dirfd, const char *dir, size_t cap_entries, int fds)
{
    cJSON *arr = cJSON_CreateArray();
    int dfd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return arr;
    }
    struct dirent *e;
    size_t n = 0;
    while ((e = readdir(d)) && n < cap_entries) {
        if (e->d_name[0] == '.')
            continue;
        cJSON *o = cJSON_CreateObject();
        if (fds) {
            char target[1024];
            ssize_t l = readlinkat(dfd, e->d_name, target, sizeof(target) - 1);
            target[l > 0 ? l : 0] = 0;
            cJSON_AddNumberToObject(o, "fd", atoi(e->d_name));
            cJSON_AddStringToObject(o, "target", target);
        } else {
            char p[300];
            size_t len;
            int tr;
            snprintf(p, sizeof(p), "%s/comm", e->d_name);
            char *comm = read_file_at(dfd, p, 256, &len, &tr);
            if (comm && len && comm[len - 1] == '\n')
                comm[len - 1] = 0;
            snprintf(p, sizeof(p), "%s/stat", e->d_name);
            char *st = read_file_at(dfd, p, 4096, &len, &tr);
            char state[4] = "?";
            const char *rp = st ? strrchr(st, ')') : NULL;
            if (rp && rp[1] == ' ')
                state[0] = rp[2];
            snprintf(p, sizeof(p), "%s/wchan", e->d_name);
            char *wchan = read_file_at(dfd, p, 256, &len, &tr);
            cJSON_AddNumberToObject(o, "tid", atoi(e->d_name));
            /* the tid the process sees (its pid namespace): the one a core holds */
            snprintf(p, sizeof(p), "%s/status", e->d_name);
            char *status = read_file_at(dfd, p, 1 << 16, &len, &tr);
            cJSON_AddNumberToObject(o, "ns_tid", cp_nspid_last(status, atoi(e->d_name)));
            free(status);
            cJSON_AddStringToObject(o, "name", comm ? comm : "");
            cJSON_AddStringToObject(o, "state", state);
            cJSON_AddStringToObject(o, "wchan", wchan ? wchan : "");
            free(comm);
            free(st);
            free(wchan);
        }
        cJSON_AddItemToArray(arr, o);
        n++;
    }
    closedir(d);
    return arr;
}

static void add_json_member(struct cap *c, const char *member, cJSON *j, double t)
{
    char *s = cJSON_PrintUnformatted(j);
    if (!s || bw_add(&c->bw, member, s, strlen(s)))
        cap_step(c, member, "failed", t, "%s", s ? strerror(c->bw.err) : "out of memory");
    else
        cap_step(c, member, "ok", t, "%s", "");
    free(s);
}

static cJSON *environ_json(struct cap *c)
{
    if (!c->environ_raw)
        return NULL;
    size_t len = c->environ_len;
    int tr = len >= (1 << 20);
    char *env = malloc(len + 1);
    if (!env)
        return NULL;
    memcpy(env, c->environ_raw, len);
    env[len] = 0;
    cJSON *o = cJSON_CreateObject();
    cJSON *vals = cJSON_AddObjectToObject(o, "values");
    cJSON *names = cJSON_AddArrayToObject(o, "names_only");
    for (size_t i = 0; i < len;) {
        char *kv = env + i;
        size_t l = strnlen(kv, len - i);
        i += l + 1;
        char *eq = strchr(kv, '=');
        if (!eq)
            continue;
        *eq = 0;
        const char *v = env_value_policy(&c->cfg, kv, eq + 1);
        if (v && !cJSON_GetObjectItemCaseSensitive(vals, kv))
            cJSON_AddStringToObject(vals, kv, v);
        else if (!v)
            cJSON_AddItemToArray(names, cJSON_CreateString(kv));
    }
    cJSON_AddBoolToObject(o, "truncated", tr);
    free(env);
    return o;
}

static void add_ns(cJSON *o, int procfd)
{
    static const char *const ns[] = {"pid", "mnt", "net", "user", "uts", "ipc", "cgroup", NULL};
    for (int i = 0; ns[i]; i++) {
        char p[32], target[64];
        snprintf(p, sizeof(p), "ns/%s", ns[i]);
        ssize_t l = readlinkat(procfd, p, target, sizeof(target) - 1);
        if (l > 0) {
            target[l] = 0;
            cJSON_AddStringToObject(o, ns[i], target);
        }
    }
}

/* A 64-hex-digit component of the cgroup path is how docker/containerd/cri-o name containers. */
static void container_id(const char *cg, char *out, size_t n)
{
    out[0] = 0;
    for (const char *p = cg; *p; p++) {
        size_t h = strspn(p, "0123456789abcdef");
        if (h == 64 && (p == cg || !strchr("0123456789abcdef", p[-1]))) {
            snprintf(out, n, "%.64s", p);
            return;
        }
        if (h)
            p += h - 1;
    }
}

/* manifest.json's host: name, kernel, machine, boot id. */
static void manifest_host(cJSON *m, const struct cap *c)
{
    struct utsname u;
    cJSON *host = cJSON_AddObjectToObject(m, "host");
    cJSON_AddStringToObject(host, "hostname", c->hostname);
    if (uname(&u) == 0) {
        cJSON_AddStringToObject(host, "kernel", u.release);
        cJSON_AddStringToObject(host, "kernel_version", u.version);
        cJSON_AddStringToObject(host, "machine", u.machine);
        if (!c->hostname[0])
            cJSON_ReplaceItemInObject(host, "hostname", cJSON_CreateString(u.nodename));
    }
    size_t len;
    int tr;
    char *boot = read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &len, &tr);
    if (boot) {
        boot[strcspn(boot, "\n")] = 0;
        cJSON_AddStringToObject(host, "boot_id", boot);
        free(boot);
    }
}

/* The kernel's facts: when, which pid and thread, which signal, whose. Returns the ns_tid item
 * (corrected later from /proc/<pid>/status for snap and --event). */
static cJSON *manifest_kernel_facts(cJSON *m, const struct cap *c)
{
    cJSON_AddNumberToObject(m, "time", (double)c->crash_time);
    char iso[40];
    time_t tt = (time_t)c->crash_time;
    struct tm tm;
    strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&tt, &tm));
    cJSON_AddStringToObject(m, "time_utc", iso);
    cJSON_AddNumberToObject(m, "pid", c->pid);
    cJSON_AddNumberToObject(m, "tid", c->tid);
    cJSON *nstid = cJSON_AddNumberToObject(m, "ns_tid", c->ns_tid);
    cJSON *sig = cJSON_AddObjectToObject(m, "signal");
    cJSON_AddNumberToObject(sig, "number", c->sig);
    const char *abbr = sigabbrev_np(c->sig);
    char sname[32];
    snprintf(sname, sizeof(sname), "SIG%s", abbr ? abbr : "UNKNOWN");
    cJSON_AddStringToObject(sig, "name", sname);
    cJSON_AddNumberToObject(m, "uid", c->uid);
    cJSON_AddNumberToObject(m, "gid", c->gid);
    cJSON_AddNumberToObject(m, "dumpable", c->dumpable);
    cJSON_AddNumberToObject(m, "rlimit_core", (double)c->rlimit_core);
    cJSON_AddBoolToObject(m, "secure", c->secure);
    return nstid;
}

/* cmdline, secrets masked. */
static void manifest_cmdline(cJSON *m, const struct cap *c)
{
    size_t len;
    int tr;
    char *cl = read_file_at(c->procfd, "cmdline", 1 << 16, &len, &tr);
    cJSON *args = cJSON_AddArrayToObject(m, "cmdline");
    if (!cl)
        return;
    char *av[1024];
    int ac = 0;
    for (size_t i = 0; i < len && ac < 1024;) {
        av[ac++] = cl + i;
        i += strnlen(cl + i, len - i) + 1;
    }
    cp_mask_cmdline(&c->cfg, av, ac);
    for (int i = 0; i < ac; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(av[i]));
    free(cl);
}

/* The target of the magic link /proc/<pid>/<link> as `key`, when it reads. */
static void manifest_link(cJSON *m, const struct cap *c, const char *link, const char *key)
{
    char target[1024];
    ssize_t l = readlinkat(c->procfd, link, target, sizeof(target) - 1);
    if (l > 0) {
        target[l] = 0;
        cJSON_AddStringToObject(m, key, target);
    }
}

/* The cgroup path (v2, else the last hierarchy's) and the container id it names, if any. */
static void manifest_cgroup(cJSON *m, const struct cap *c)
{
    size_t len;
    int tr;
    char *cg = read_file_at(c->procfd, "cgroup", 1 << 16, &len, &tr);
    if (!cg)
        return;
    char *v2 = strstr(cg, "0::");
    char *path = v2 ? v2 + 3 : strrchr(cg, ':') ? strrchr(cg, ':') + 1 : cg;
    path[strcspn(path, "\n")] = 0;
    cJSON_AddStringToObject(m, "cgroup", path);
    char id[65];
    container_id(path, id, sizeof(id));
    if (id[0])
        cJSON_AddStringToObject(m, "container_id", id);
    free(cg);
}

/* ns_pids (status's NSpid: the pid in each pid namespace); snap and --event are given the
 * host's pid only: the pid the process itself sees (in a container, its own pid namespace) is
 * the last NSpid value, and becomes ns_tid. */
static void manifest_ns_pids(cJSON *m, struct cap *c, cJSON *nstid)
{
    size_t len;
    int tr;
    char *status = read_file_at(c->procfd, "status", 1 << 16, &len, &tr);
    if (c->ns_tid == c->tid && c->tid == c->pid) {
        c->ns_tid = cp_nspid_last(status, c->ns_tid);
        cJSON_SetNumberValue(nstid, c->ns_tid);
    }
    char *p = status ? strstr(status, "\nNSpid:") : NULL;
    if (p) {
        cJSON *nsp = cJSON_AddArrayToObject(m, "ns_pids");
        for (char *q = p + 7; *q && *q != '\n';) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q)
                break;
            cJSON_AddItemToArray(nsp, cJSON_CreateNumber((double)v));
            q = e;
        }
    }
    free(status);
}

/* What /proc/<pid> says of the process (only when it was opened and verified). */
static void manifest_process(cJSON *m, struct cap *c, cJSON *nstid)
{
    cJSON_AddNumberToObject(m, "euid", c->euid);
    cJSON_AddNumberToObject(m, "egid", c->egid);
    cJSON_AddStringToObject(m, "exe", c->exe);
    cJSON_AddStringToObject(m, "comm", c->comm);
    manifest_cmdline(m, c);
    manifest_link(m, c, "cwd", "cwd");
    /* the process's root as the host sees it: "/" on the host, the container's root directory
     * (a chroot, a pivot_root'ed overlay) otherwise; its files are what a --sysroot needs */
    manifest_link(m, c, "root", "root");
    manifest_cgroup(m, c);
    manifest_ns_pids(m, c, nstid);
    add_ns(cJSON_AddObjectToObject(m, "namespaces"), c->procfd);
}

/* manifest.json's capture (mode, identity, config, trigger, reason) and death objects. */
static void manifest_capture(cJSON *m, const struct cap *c)
{
    cJSON *cap = cJSON_AddObjectToObject(m, "capture");
    cJSON_AddStringToObject(cap, "mode", cp_mode_name(c->mode));
    if (c->mode_reason[0])
        cJSON_AddStringToObject(cap, "mode_reason", c->mode_reason);
    cJSON_AddBoolToObject(cap, "pidfd", c->pidfd >= 0);
    cJSON *idn = cJSON_AddObjectToObject(cap, "identity");
    cJSON_AddBoolToObject(idn, "verified", !c->identity_unverified[0] && c->procfd >= 0);
    if (c->identity_unverified[0])
        cJSON_AddStringToObject(idn, "reason", c->identity_unverified);
    else if (c->procfd < 0)
        cJSON_AddStringToObject(idn, "reason",
                                c->event ? "the process had ended: only the facts its reporter gave"
                                         : "/proc/<pid> was gone: only the kernel's facts");
    cJSON_AddStringToObject(cap, "config", c->config_path ? c->config_path : "");
    /* kernel: a core dump through core_pattern; snap/watch: a live process, see snap.json */
    cJSON_AddStringToObject(cap, "trigger", c->snap || c->event ? c->snap_trigger : "kernel");
    if (c->cfg.python_locals) /* the analysis reads Python frames' locals (docs/python.md) */
        cJSON_AddTrueToObject(cap, "python_locals");
    cJSON_AddItemToObject(m, "death", event_death_json(c));
    if (c->snap || c->event)
        cJSON_AddStringToObject(cap, "reason", c->snap_reason);
}

/* The members a bundle may hold, in order; `when` says which bundles list one. */
static const struct {
    const char *name, *what;
    int when; /* 0 always, 1 with /proc, 2 with a core, 3 not secure, 4 snap */
} member_plan[] = {
    {"manifest.json", "this file: who crashed, when, and how it was captured", 0},
    {"proc/status", "/proc/<pid>/status", 1},
    {"proc/stat", "/proc/<pid>/stat", 1},
    {"proc/limits", "/proc/<pid>/limits", 1},
    {"proc/cgroup", "/proc/<pid>/cgroup", 1},
    {"proc/maps", "/proc/<pid>/maps (capped)", 1},
    {"proc/mountinfo", "/proc/<pid>/mountinfo (capped)", 1},
    {"proc/auxv", "/proc/<pid>/auxv (binary)", 1},
    {"proc/fds.json", "open file descriptors and their targets", 1},
    {"proc/threads.json", "threads: tid, name, state, wchan", 1},
    {"proc/environ.json", "allow-listed environment values; names only for the rest", 3},
    {"kmsg.json",
     "kernel log lines that matter: NVIDIA Xid, OOM killer, segfault, MCE, hung "
     "task, NVLink, dropped core dumps; wall-clock times and sources",
     0},
    {"gpu.json",
     "this process's GPUs: /dev/nvidia minors, PCI bus ids, UUIDs, visible "
     "devices, PCIe AER counters and link state",
     1},
    {"checkpoint.json", "the last saved checkpoint: path, size, mtime, inode, how it was found", 1},
    {"logs/stderr.tail", "the end of stderr when it is a regular file", 1},
    {"logs/stdout.tail", "the end of stdout when it is a regular file", 1},
    {"ml/",
     "ML debug files the environment names (NCCL flight recorder, torchelastic error "
     "file, CUDA core dump), capped, never unpickled",
     1},
    {"core", "ELF core file (full or slim), opens in gdb as it is", 2},
    {"snap.json",
     "live capture: each thread's stop time, kernel state, syscall, kernel stack, "
     "and the futex words threads wait on",
     4},
    {"nvidia-smi.xml", "nvidia-smi -q -x, run while the core drained (or why not)", 0},
    {"checkpoint-verdict.json",
     "is the checkpoint intact (zip/safetensors structure), and "
     "the newest valid one",
     1},
    {"capture.json", "what succeeded or failed and why, sizes, core hash, timings", 0},
};

/* manifest.json's members: the planned ones this bundle may hold, then the handed-over ones. */
static void manifest_members(cJSON *m, const struct cap *c)
{
    cJSON *ms = cJSON_AddArrayToObject(m, "members");
    for (size_t i = 0; i < sizeof(member_plan) / sizeof(member_plan[0]); i++) {
        int w = member_plan[i].when;
        if ((w == 1 && c->procfd < 0) || (w == 2 && c->mode == CP_MODE_META) ||
            (w == 3 && (c->procfd < 0 || c->secure)) || (w == 4 && !c->snap))
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", member_plan[i].name);
        cJSON_AddStringToObject(o, "what", member_plan[i].what);
        cJSON_AddItemToArray(ms, o);
    }
    for (size_t i = 0; i < c->nev_members; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", c->ev_members[i].name);
        cJSON_AddStringToObject(o, "what",
                                "handed over by the reporter (crashpack-capture --member)");
        cJSON_AddItemToArray(ms, o);
    }
}

static cJSON *manifest(struct cap *c)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "format", "crashpack-manifest/1");
    cJSON_AddStringToObject(m, "crashpack_version", CP_VERSION);
    manifest_host(m, c);
    cJSON *nstid = manifest_kernel_facts(m, c);
    if (c->procfd >= 0)
        manifest_process(m, c, nstid);
    manifest_capture(m, c);
    manifest_members(m, c);
    return m;
}

int proc_collect(struct cap *c)
{
    double t = now_mono();
    cJSON *m = manifest(c);
    add_json_member(c, "manifest.json", m, t);
    cJSON_Delete(m);
    if (c->procfd < 0)
        return 0;
    add_proc_member(c, "status", "proc/status", 1 << 16);
    add_proc_member(c, "stat", "proc/stat", 1 << 16);
    add_proc_member(c, "limits", "proc/limits", 1 << 16);
    add_proc_member(c, "cgroup", "proc/cgroup", 1 << 16);
    add_proc_member(c, "maps", "proc/maps", c->cfg.proc_file_max);
    add_proc_member(c, "mountinfo", "proc/mountinfo", 4u << 20);
    add_proc_member(c, "auxv", "proc/auxv", 1 << 16);
    t = now_mono();
    cJSON *fds = json_lines_of(c->procfd, "fd", 65536, 1);
    add_json_member(c, "proc/fds.json", fds, t);
    cJSON_Delete(fds);
    t = now_mono();
    cJSON *th = json_lines_of(c->procfd, "task", 65536, 0);
    add_json_member(c, "proc/threads.json", th, t);
    cJSON_Delete(th);
    t = now_mono();
    if (c->secure) {
        cap_step(c, "proc/environ.json", "skipped", t, "secure process: no environment");
    } else {
        cJSON *env = environ_json(c);
        if (env)
            add_json_member(c, "proc/environ.json", env, t);
        else
            cap_step(c, "proc/environ.json", "failed", t, "%s", strerror(errno));
        cJSON_Delete(env);
    }
    return 0;
}
