/* event.c - deaths without a core: `crashpack-capture --event`, which the node service
 * (`crashpack agent`) and the supervisor (`crashpack run`) run as root:
 *
 *   crashpack-capture --event [-c CONFIG] [--bundle-dir DIR] --kind K --pid P
 *       [--start-time TICKS] [--uid U --gid G] [--reported-by U] [--comm C] [--status N]
 *       [--signal N] [--time T] [--trigger hook|run|agent] [--reason TEXT] [--job ID]
 *       [--member NAME=FD]...
 *
 * K: exit (a non-zero exit status), signal (killed by a signal that dumps no core), terminated
 * (SIGTERM: the scheduler's stop), oom_kill (the kernel's OOM killer), exception (an uncaught
 * exception the process reported; the agent normally snapshots the live process instead).
 * Everything else is the crash path: the same bundle, guard, burst limits, publishing and
 * permissions. The process is usually gone: then nothing is read from /proc/<pid>, the bundle is
 * metadata-only and says its identity was reported (by whom), not verified. When it still
 * exists with the same start time, its /proc evidence is collected as for a crash.
 *
 * One death, one bundle: a death event whose process already has a bundle that records its
 * death (a core from the kernel, an exception, an OOM kill; or a temporary still being written)
 * is not written again; the existing bundle's path is reported instead (event_duplicate). That
 * bundle must be of the same process (pid; start time when both know it; named at or after the
 * process's start) and of the same uid, and made at least as trustworthily: one the kernel or
 * crashpack verified deduplicates any report, a reported one only a report by the same uid (or
 * one root made). So nobody's report makes another user's death, or a verified capture, a
 * duplicate. --time is never later than now: a name from the future would cover later deaths.
 *
 * --room own|fair: whose bundles the disk guard may delete for this one (capture.h, guard.c).
 *
 * --member NAME=FD (also with --snap): a member the caller hands over on a descriptor, one of
 * exception.json, output.txt, process.json, events.json; at most EVENT_MEMBER_MAX bytes; JSON
 * members must parse. Secrets the capture knows are masked in them as in every member. */
#include "capture.h"
#include "util.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define EVENT_MEMBER_MAX (8u << 20)
#define PEEK_MAX (1u << 20) /* compressed bytes read from a bundle to find its manifest */

static const char *const member_names[] = {"exception.json", "output.txt", "process.json",
                                           "events.json", "oom.json"};
static const char *const kinds[] = {"exit", "signal", "terminated", "oom_kill", "exception"};

static int num_arg(const char *s, long long lo, long long hi, long long *out)
{
    char *e;
    errno = 0;
    long long v = s && *s ? strtoll(s, &e, 10) : 0;
    if (!s || !*s || *e || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int cap_room_arg(struct cap *c, const char *v)
{
    if (!strcmp(v, "own"))
        c->room = CAP_ROOM_OWN;
    else if (!strcmp(v, "fair"))
        c->room = CAP_ROOM_FAIR;
    else
        return -1;
    return 0;
}

int cap_member_arg(struct cap *c, const char *spec)
{
    const char *eq = strrchr(spec, '=');
    long long fd;
    if (!eq || c->nev_members >= CAP_MAX_MEMBERS || num_arg(eq + 1, 5, 1 << 20, &fd))
        return -1;
    size_t nl = (size_t)(eq - spec);
    for (size_t i = 0; i < sizeof(member_names) / sizeof(member_names[0]); i++)
        if (strlen(member_names[i]) == nl && !memcmp(member_names[i], spec, nl)) {
            c->ev_members[c->nev_members].name = member_names[i];
            c->ev_members[c->nev_members++].fd = (int)fd;
            fcntl((int)fd, F_SETFD, FD_CLOEXEC);
            return 0;
        }
    return -1;
}

/* The identity the reporter gives, checked once every option is read. */
struct ev_ids {
    long long uid, gid, pid;
};

/* One option with its value (every --event option takes one). Returns 0, or -1 when the option
 * is unknown or its value is not allowed. */
static int event_option(struct cap *c, struct ev_ids *ids, const char *a, const char *val)
{
    long long v;
    if (!strcmp(a, "-c")) {
        c->config_path = val;
    } else if (!strcmp(a, "--bundle-dir")) {
        c->ev_bundle_dir = val;
    } else if (!strcmp(a, "--kind")) {
        size_t k = 0;
        while (k < sizeof(kinds) / sizeof(kinds[0]) && strcmp(kinds[k], val))
            k++;
        if (k == sizeof(kinds) / sizeof(kinds[0]))
            return -1;
        snprintf(c->death_kind, sizeof(c->death_kind), "%s", val);
    } else if (!strcmp(a, "--pid")) {
        if (num_arg(val, 1, 0x3fffffff, &ids->pid))
            return -1;
    } else if (!strcmp(a, "--start-time")) {
        if (num_arg(val, 1, (long long)1 << 62, &v))
            return -1;
        c->start_ticks = (unsigned long long)v;
    } else if (!strcmp(a, "--uid") || !strcmp(a, "--gid") || !strcmp(a, "--reported-by")) {
        if (num_arg(val, 0, 0xfffffffeLL, &v))
            return -1;
        if (a[2] == 'u')
            ids->uid = v;
        else if (a[2] == 'g')
            ids->gid = v;
        else
            c->reported_by = v;
    } else if (!strcmp(a, "--comm")) {
        snprintf(c->comm, sizeof(c->comm), "%s", val);
        snprintf(c->reported_comm, sizeof(c->reported_comm), "%s", val);
    } else if (!strcmp(a, "--status")) {
        if (num_arg(val, 0, 255, &v))
            return -1;
        c->death_status = (int)v;
    } else if (!strcmp(a, "--signal")) {
        if (num_arg(val, 1, 64, &v))
            return -1;
        c->death_signal = (int)v;
    } else if (!strcmp(a, "--time")) {
        if (num_arg(val, 1, (long long)1 << 40, &v))
            return -1;
        c->crash_time = v;
    } else if (!strcmp(a, "--trigger")) {
        if (strcmp(val, "hook") && strcmp(val, "run") && strcmp(val, "agent"))
            return -1;
        snprintf(c->snap_trigger, sizeof(c->snap_trigger), "%s", val);
    } else if (!strcmp(a, "--reason")) {
        snprintf(c->snap_reason, sizeof(c->snap_reason), "%s", val);
    } else if (!strcmp(a, "--job")) {
        snprintf(c->job, sizeof(c->job), "%s", val);
    } else if (!strcmp(a, "--member")) {
        if (cap_member_arg(c, val))
            return -1;
    } else if (!strcmp(a, "--room")) {
        if (cap_room_arg(c, val))
            return -1;
    } else {
        return -1;
    }
    return 0;
}

/* The context from the reported identity, as the kernel's specifiers would set it; whether
 * the process is gone (or its pid another process's now). */
static void event_identity(struct cap *c, const struct ev_ids *ids)
{
    c->pid = c->tid = c->ns_tid = (pid_t)ids->pid;
    c->uid = (uid_t)ids->uid;
    c->gid = (gid_t)ids->gid;
    c->sig = c->death_signal > 0 ? c->death_signal : 0;
    time_t now = time(NULL);
    if (!c->crash_time || c->crash_time > now)
        c->crash_time = now;
    c->rlimit_core = -1;
    c->dumpable = 1;
    c->snap_status_fd = fcntl(4, F_GETFD) >= 0 ? 4 : -1;
    if (c->snap_status_fd >= 0)
        fcntl(c->snap_status_fd, F_SETFD, FD_CLOEXEC);
    if (gethostname(c->hostname, sizeof(c->hostname) - 1))
        snprintf(c->hostname, sizeof(c->hostname), "unknown");
    /* the same process only when its start time says so: a pid is reused */
    c->event_gone = !c->start_ticks || cp_start_ticks(c->pid) != c->start_ticks;
}

int event_parse_args(struct cap *c, int argc, char **argv)
{
    c->event = 1;
    c->death_status = c->death_signal = -1;
    c->reported_by = -1;
    snprintf(c->snap_trigger, sizeof(c->snap_trigger), "agent");
    struct ev_ids ids = {-1, -1, 0};
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc || event_option(c, &ids, argv[i], argv[i + 1]))
            return -1;
    }
    if (!ids.pid || !c->death_kind[0] || ids.uid < 0 || ids.gid < 0)
        return -1;
    event_identity(c, &ids);
    return 0;
}

void event_config(struct cap *c)
{
    if (c->ev_bundle_dir)
        snprintf(c->cfg.bundle_dir, sizeof(c->cfg.bundle_dir), "%s", c->ev_bundle_dir);
    c->cfg.mode = CP_MODE_META; /* no core: the process is gone, or only reported its death */
    snprintf(c->mode_reason, sizeof(c->mode_reason), "%s",
             "a death without a core dump (crashpack-capture --event)");
}

cJSON *event_death_json(const struct cap *c)
{
    cJSON *d = cJSON_CreateObject();
    const char *kind = c->death_kind[0] ? c->death_kind : c->snap ? "snapshot" : "core";
    cJSON_AddStringToObject(d, "kind", kind);
    int sig = c->event ? c->death_signal : c->snap ? -1 : c->sig;
    if (sig > 0)
        cJSON_AddNumberToObject(d, "signal", sig);
    else
        cJSON_AddNullToObject(d, "signal");
    if (c->death_status >= 0 && c->event)
        cJSON_AddNumberToObject(d, "status", c->death_status);
    else
        cJSON_AddNullToObject(d, "status");
    cJSON_AddStringToObject(d, "trigger", c->snap || c->event ? c->snap_trigger : "kernel");
    if (c->snap_reason[0] && (c->snap || c->event))
        cJSON_AddStringToObject(d, "reason", c->snap_reason);
    int verified = !c->identity_unverified[0] && c->procfd >= 0;
    cJSON_AddStringToObject(d, "identity", verified || !c->event ? "verified" : "reported");
    if (c->event && c->reported_by >= 0)
        cJSON_AddNumberToObject(d, "reported_by_uid", (double)c->reported_by);
    else
        cJSON_AddNullToObject(d, "reported_by_uid");
    if (c->job[0])
        cJSON_AddStringToObject(d, "job", c->job);
    else
        cJSON_AddNullToObject(d, "job");
    if (c->start_ticks)
        cJSON_AddNumberToObject(d, "start_time", (double)c->start_ticks);
    if (c->event && c->reported_comm[0]) /* the process's name as its reporter gave it */
        cJSON_AddStringToObject(d, "comm", c->reported_comm);
    return d;
}

void event_add_members(struct cap *c)
{
    for (size_t i = 0; i < c->nev_members; i++) {
        double t = now_mono();
        const char *name = c->ev_members[i].name;
        int fd = c->ev_members[i].fd;
        size_t len = 0;
        int over = 0;
        char *buf = read_fd_max(fd, EVENT_MEMBER_MAX, &len, &over);
        close(fd);
        if (!buf) {
            cap_step(c, name, "failed", t, "out of memory");
            continue;
        }
        size_t nl = strlen(name);
        int is_json = nl > 5 && !strcmp(name + nl - 5, ".json");
        cJSON *j = is_json && !over ? cJSON_ParseWithLength(buf, len) : NULL;
        if (over)
            cap_step(c, name, "refused", t, "over %u bytes: not stored", EVENT_MEMBER_MAX);
        else if (is_json && !cJSON_IsObject(j))
            cap_step(c, name, "refused", t, "%s", "not a JSON object: not stored");
        else if (bw_add(&c->bw, name, buf, len))
            cap_step(c, name, "failed", t, "write: %s", strerror(c->bw.err ? c->bw.err : ENOMEM));
        else
            cap_step(c, name, "ok", t, "%zu bytes from the %s", len,
                     c->event ? "reporter" : "caller");
        cJSON_Delete(j);
        free(buf);
    }
    c->nev_members = 0;
}

/* The manifest of a bundle: its first tar member, inflated from the first frames of the file
 * (markers are skippable frames); NULL when it cannot be read. */
static cJSON *peek_manifest(int dirfd, const char *name, size_t peek_max)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *in = NULL, *out = NULL;
    ssize_t got = -1;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && (in = malloc(peek_max)) &&
        (out = malloc(PEEK_MAX)))
        got = pread(fd, in, peek_max, 0);
    close(fd);
    ZSTD_DStream *ds = got > 0 ? ZSTD_createDStream() : NULL;
    size_t have = 0;
    if (ds) {
        ZSTD_inBuffer ib = {in, (size_t)got, 0};
        while (ib.pos < ib.size && have < PEEK_MAX) {
            ZSTD_outBuffer ob = {out + have, PEEK_MAX - have, 0};
            size_t r = ZSTD_decompressStream(ds, &ob, &ib);
            have += ob.pos;
            if (ZSTD_isError(r) || (have >= 512 && ob.pos == 0))
                break;
        }
        ZSTD_freeDStream(ds);
    }
    cJSON *m = NULL;
    /* tar: the first header names manifest.json; its size is octal at 124 */
    if (have >= 512 && !strncmp(out, "manifest.json", 100)) {
        char sz[13];
        memcpy(sz, out + 124, 12);
        sz[12] = 0;
        unsigned long long msz = strtoull(sz, NULL, 8);
        if (msz && 512 + msz <= have)
            m = cJSON_ParseWithLength(out + 512, (size_t)msz);
    }
    free(in);
    free(out);
    return m;
}

static long long num_or(const cJSON *o, const char *key, long long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (long long)v->valuedouble : dflt;
}

int bundle_peek(int dirfd, const char *name, size_t peek_max, struct bundle_facts *f)
{
    memset(f, 0, sizeof(*f));
    f->uid = f->reported_by = -1;
    cJSON *m = peek_manifest(dirfd, name, peek_max ? peek_max : PEEK_MAX);
    if (!cJSON_IsObject(m)) {
        cJSON_Delete(m);
        return -1;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "death");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(d, "kind");
    const cJSON *idn = cJSON_GetObjectItemCaseSensitive(d, "identity");
    snprintf(f->kind, sizeof(f->kind), "%s", cJSON_IsString(k) ? k->valuestring : "?");
    f->uid = num_or(m, "uid", -1);
    f->reported_by = num_or(d, "reported_by_uid", -1);
    /* read from /proc, or no caller's word in it at all: the kernel's core, the agent's own
     * capture of a kernel log line (an OOM kill) */
    f->verified =
        (cJSON_IsString(idn) && !strcmp(idn->valuestring, "verified")) || f->reported_by < 0;
    f->start = (unsigned long long)num_or(d, "start_time", 0);
    cJSON_Delete(m);
    return 0;
}

static int death_kind(const char *kind)
{
    static const char *const deaths[] = {"core",   "exception", "oom_kill",
                                         "signal", "exit",      "terminated"};
    for (size_t i = 0; i < sizeof(deaths) / sizeof(deaths[0]); i++)
        if (!strcmp(kind, deaths[i]))
            return 1;
    return 0;
}

/* Whether the existing bundle b (a temporary when tmp; no manifest yet: f NULL) already records
 * this death: the same uid, the same process, and made at least as trustworthily (header). */
static int records_this_death(const struct cap *c, const struct bundle_facts *f, int tmp)
{
    if (!f) /* a temporary with no manifest yet: the kernel's handler, mid-core */
        return tmp && c->reported_by >= 0;
    if (!death_kind(f->kind) || f->uid != (long long)c->uid)
        return 0;
    if (f->start && c->start_ticks && f->start != c->start_ticks)
        return 0; /* another process that had the pid */
    if (f->verified)
        return 1;
    return c->reported_by >= 0 && (f->reported_by == c->reported_by || f->reported_by == 0);
}

/* The process's start in wall-clock seconds, rounded down (as the names' times are); else the
 * last ten minutes. */
static long long process_since(const struct cap *c)
{
    long long since = 0;
    if (c->start_ticks) {
        size_t len;
        int tr;
        char *st = read_file_at(AT_FDCWD, "/proc/stat", 1 << 20, &len, &tr);
        char *b = st ? strstr(st, "\nbtime ") : NULL;
        long hz = sysconf(_SC_CLK_TCK);
        if (b && hz > 0)
            since = strtoll(b + 7, NULL, 10) + (long long)(c->start_ticks / (unsigned long long)hz);
        free(st);
    }
    return since ? since : c->crash_time - 600;
}

/* The path a bundle is (or will be) published under: a temporary .tmp-NAME.XXXXXXXX is NAME.zst. */
static void published_path(const struct cap *c, const char *nm, int tmp, char *path, size_t n)
{
    if (tmp) {
        const char *dot = strrchr(nm, '.');
        snprintf(path, n, "%s/%.*s.zst", c->cfg.bundle_dir,
                 (int)((dot && dot > nm + 5 ? dot : nm + strlen(nm)) - (nm + 5)), nm + 5);
    } else {
        snprintf(path, n, "%s/%s", c->cfg.bundle_dir, nm);
    }
}

int event_duplicate(struct cap *c, char *path, size_t n)
{
    if (!c->event || c->dirfd < 0)
        return 0;
    long long since = process_since(c);
    int dfd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        const char *nm = e->d_name;
        int tmp = !strncmp(nm, ".tmp-crash-", 11);
        if (!tmp && strncmp(nm, "crash-", 6))
            continue;
        long long t;
        int pid, off = 0;
        if (sscanf(nm + (tmp ? 11 : 6), "%lld-%d-%n", &t, &pid, &off) != 2 || !off ||
            pid != (int)c->pid || t < since || !strcmp(nm, c->tmpname))
            continue;
        struct bundle_facts f;
        int have = bundle_peek(c->dirfd, nm, PEEK_MAX, &f) == 0;
        if (!records_this_death(c, have ? &f : NULL, tmp))
            continue;
        published_path(c, nm, tmp, path, n);
        snprintf(c->dup_kind, sizeof(c->dup_kind), "%s", have ? f.kind : "in progress");
        found = 1;
    }
    closedir(d);
    return found;
}
