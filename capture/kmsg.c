/* kmsg.c - the kernel log lines that explain a GPU job's crash, taken before the ring rotates.
 *
 * Reads /dev/kmsg from its oldest record (non-blocking, one record per read) and keeps the records
 * whose TEXT matches a table of known failure lines - NVIDIA Xid and NVRM, GPU off the bus, OOM
 * killer, segfaults and traps, MCE/EDAC, hung tasks, NVLink/NVSwitch, peermem, mlx5, PCIe AER,
 * dropped core dumps - from the process start minus a margin up to now, with wall-clock times.
 * When the ring no longer reaches back to the window start, the older part comes from
 * /var/log/kern.log{.1,}. It also notes a recent fallen-off-the-bus class event: nvidia-smi hangs
 * then, and smi.c skips it. Output: kmsg.json. The journal is not read: that would mean running
 * journalctl or parsing its binary files in a handler that must stay small.
 *
 * Scope: a bundle the crashed uid may read (not secure, not root's) keeps only the lines about
 * that process (naming its pid or one of its thread ids, as the kernel prints them: host pids)
 * and the GPU driver's lines, while the host has dmesg_restrict set; other processes' segfaults,
 * Oopses and OOM kills go only into root-only bundles. kmsg.json counts what was left out. */
#include "capture.h"
#include "kline.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REC_MAX 16384  /* a read must hold a whole record, or it fails: records are <= 8 KiB */
#define TEXT_MAX 8192  /* per kept line, after unescaping */
#define DEADLINE_S 2.0 /* a kernel flooding the ring must not keep the crash waiting */
#define KERNLOG_TAIL (4u << 20)
#define HEADER_RESERVE 4096 /* kmsg.json's fields other than lines[] fit in this */
#define ATTRS_MAX 8

enum { P_ICASE = 1, P_BUSLOST = 2 };

struct pat {
    const char *text; /* substring that selects the line */
    const char *also; /* NULL, or '|'-separated words (any case) of which one must also appear */
    const char *cls;
    int flags;
};

/* First match wins, so the specific entries come before the general ones. Plain substrings:
 * the handler links no regex engine, and a table is easy to extend and to review. */
static const struct pat pats[] = {
    /* NVIDIA driver; every Xid era: with or without PCI:, MIG GPU-I:, pid or not */
    {"NVRM: Xid", NULL, "xid", 0},
    {"fallen off the bus", NULL, "bus", P_BUSLOST},
    {"RmInitAdapter failed", NULL, "gpu", P_BUSLOST},
    {"SXid", NULL, "nvlink", 0},
    {"NVRM:", NULL, "gpu", 0},
    {"nvswitch", NULL, "nvlink", P_ICASE},
    {"nvlink", NULL, "nvlink", P_ICASE},
    {"nvidia-peermem", NULL, "peermem", 0},
    {"nv_get_p2p_", NULL, "peermem", 0}, /* older nv_peer_mem / nv_mem */
    /* host memory */
    {"Out of memory", NULL, "oom", 0},
    {"Memory cgroup out of memory", NULL, "oom", 0},
    {"oom-kill:", NULL, "oom", 0},
    {"invoked oom-killer", NULL, "oom", 0},
    {"oom_reaper:", NULL, "oom", 0},
    /* the process itself */
    {"segfault at ", " ip |error", "segfault", 0},
    {"traps: ", NULL, "trap", 0},
    {"general protection", NULL, "trap", 0},
    {"unexpected fatal signal", NULL, "trap", 0},
    /* kernel dropped or refused a core dump */
    {"Skipping core dump", NULL, "core_dump", 0},
    {"over core_pipe_limit", NULL, "core_dump", 0},
    {"core_pipe_limit", NULL, "core_dump", 0},
    {"Unsafe core_pattern", NULL, "core_dump", 0},
    {"coredump:", NULL, "core_dump", 0},
    {"Core dump to ", NULL, "core_dump", 0},
    {"crashpack: ", "not captured|cannot", "core_dump", 0},
    /* machine */
    {"Hardware Error", NULL, "mce", 0},
    {"Machine check", NULL, "mce", P_ICASE},
    {"mce:", "error|threshold|throttl|event", "mce", 0}, /* not the boot-time bank census */
    {"EDAC", "error", "mce", 0},                         /* not "EDAC MC: Ver: 3.0.0" */
    {"blocked for more than", NULL, "hung_task", 0},
    {"hung_task", NULL, "hung_task", 0},
    {"state:D stack:", NULL, "hung_task", 0}, /* the blocked task's header line */
    {"soft lockup", NULL, "hung_task", 0},
    {"hard LOCKUP", NULL, "hung_task", 0},
    {"Oops:", NULL, "oops", 0},
    {"kernel BUG at", NULL, "oops", 0},
    {"BUG: unable to handle", NULL, "oops", 0},
    {"BUG: kernel NULL pointer", NULL, "oops", 0},
    {"Kernel panic", NULL, "oops", 0},
    /* fabric and bus */
    {"mlx5_core", "err|fail|fatal|timeout|down", "net", 0}, /* not "Port: 1 Link ACTIVE" */
    {"PCIe Bus Error", NULL, "pcie", 0},
    {"AER:", "error", "pcie", 0}, /* not "AER: enabled with IRQ" */
    {"DPC: ", "containment", "pcie", 0},
};

/* Xids after which the GPU is gone or its firmware does not answer: nvidia-smi would hang on it.
 * Not 48 (double-bit ECC): the GPU still answers, and its ECC counters, retired pages and row
 * remaps are exactly the evidence a DBE diagnosis needs. */
static const int buslost_xids[] = {74, 79, 95, 119, 120, 154};

static const char *const facilities[] = {
    "kern",   "user",   "mail",   "daemon", "auth",   "syslog",       "lpr",     "news",
    "uucp",   "cron",   "authpriv", "ftp",  "ntp",    "security",     "console", "solaris-cron",
    "local0", "local1", "local2", "local3", "local4", "local5",       "local6",  "local7"};
static const char *const levels[] = {"emerg", "alert",  "crit", "err",
                                     "warning", "notice", "info", "debug"};

/* Kept lines, each already serialized; the oldest are dropped to stay within the budget. */
struct lines {
    char **s;
    size_t *len;
    size_t head, n, cap; /* live entries are [head, n) */
    size_t bytes, budget, dropped;
};

struct kctx {
    double rt0, mono0; /* one reading of both clocks: wall = rt0 - (mono0 - ts) */
    double from, to, bus_from, deadline;
    struct lines ring, klog;
    size_t read, overwritten;
    double bus_t;
    char bus_line[256];
    char bus_pci[CP_SMI_GPUS][16]; /* the GPUs the bus-loss lines name */
    int nbus, bus_unnamed;
    /* scope (see the top): when set, only GPU lines and lines naming one of pids[] are kept */
    int scoped;
    pid_t *pids;
    size_t npids, filtered;
};

static void lines_push(struct lines *l, char *s)
{
    size_t len = strlen(s);
    if (len + 1 > l->budget) {
        free(s);
        l->dropped++;
        return;
    }
    while (l->head < l->n && l->bytes + len + 1 > l->budget) {
        l->bytes -= l->len[l->head] + 1;
        free(l->s[l->head++]);
        l->dropped++;
    }
    if (l->n == l->cap) {
        if (l->head > 0) {
            memmove(l->s, l->s + l->head, (l->n - l->head) * sizeof(*l->s));
            memmove(l->len, l->len + l->head, (l->n - l->head) * sizeof(*l->len));
            l->n -= l->head;
            l->head = 0;
        } else {
            size_t nc = l->cap ? l->cap * 2 : 64;
            char **ns = realloc(l->s, nc * sizeof(*ns));
            if (ns)
                l->s = ns;
            size_t *nl = ns ? realloc(l->len, nc * sizeof(*nl)) : NULL;
            if (!nl) {
                free(s);
                l->dropped++;
                return;
            }
            l->len = nl;
            l->cap = nc;
        }
    }
    l->s[l->n] = s;
    l->len[l->n++] = len;
    l->bytes += len + 1;
}

static void lines_free(struct lines *l)
{
    for (size_t i = l->head; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    free(l->len);
}

static int has_any(const char *text, const char *alts)
{
    char w[32];
    while (*alts) {
        size_t k = strcspn(alts, "|");
        if (k < sizeof(w)) {
            memcpy(w, alts, k);
            w[k] = 0;
            if (strcasestr(text, w))
                return 1;
        }
        alts += k;
        if (*alts == '|')
            alts++;
    }
    return 0;
}

static const struct pat *classify(const char *text)
{
    for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
        const struct pat *p = &pats[i];
        if (!(p->flags & P_ICASE ? strcasestr(text, p->text) : strstr(text, p->text)))
            continue;
        if (p->also && !has_any(text, p->also))
            continue;
        return p;
    }
    return NULL;
}

/* "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ..." -> 94; -1 when it is not an Xid line (the
 * fallen-off-the-bus message without a number is not one: P_BUSLOST covers it). */
static int xid_code(const char *text)
{
    struct kline_xid ev;
    return kline_xid_parse(NULL, text, &ev) && !ev.implied ? ev.code : -1;
}

static int is_buslost(const struct pat *p, int xid)
{
    if (p->flags & P_BUSLOST)
        return 1;
    for (size_t i = 0; i < sizeof(buslost_xids) / sizeof(buslost_xids[0]); i++)
        if (xid == buslost_xids[i])
            return 1;
    return 0;
}

static int hexval(char h)
{
    if (h >= '0' && h <= '9')
        return h - '0';
    if (h >= 'a' && h <= 'f')
        return h - 'a' + 10;
    if (h >= 'A' && h <= 'F')
        return h - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char b = s[0];
    size_t k;
    unsigned char lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf)
        k = 2;
    else if (b >= 0xe0 && b <= 0xef) {
        k = 3;
        if (b == 0xe0)
            lo = 0xa0;
        if (b == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (b >= 0xf0 && b <= 0xf4) {
        k = 4;
        if (b == 0xf0)
            lo = 0x90;
        if (b == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return k;
}

/* /dev/kmsg escapes every byte outside printable ASCII, and the backslash, as \xNN: undo that
 * (multi-line records such as "fallen off the bus" get their newlines back), then keep the text
 * valid UTF-8 for JSON by re-escaping what is not, and control bytes but \n and \t. */
static void text_clean(char *out, size_t outcap, const char *in, size_t inlen, int unescape)
{
    unsigned char raw[TEXT_MAX];
    size_t n = 0;
    for (size_t i = 0; i < inlen && n < sizeof(raw);) {
        if (unescape && in[i] == '\\' && i + 3 < inlen && in[i + 1] == 'x' &&
            hexval(in[i + 2]) >= 0 && hexval(in[i + 3]) >= 0) {
            raw[n++] = (unsigned char)(hexval(in[i + 2]) * 16 + hexval(in[i + 3]));
            i += 4;
        } else
            raw[n++] = (unsigned char)in[i++];
    }
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < outcap;) {
        unsigned char b = raw[i];
        size_t k = b >= 0x80 ? utf8_len(raw + i, n - i) : 1;
        if (k > 1 && o + k < outcap) {
            memcpy(out + o, raw + i, k);
            o += k;
            i += k;
        } else if (b >= 0x80 || b == 0 || b == 0x7f || (b < 0x20 && b != '\n' && b != '\t')) {
            o += (size_t)snprintf(out + o, outcap - o, "\\x%02x", b);
            i++;
        } else {
            out[o++] = (char)b;
            i++;
        }
    }
    out[o] = 0;
}

static cJSON *raw_time(double t)
{
    char b[48];
    snprintf(b, sizeof(b), "%.6f", t);
    return cJSON_CreateRaw(b);
}

static void fmt_utc(char *buf, size_t n, double t)
{
    if (t < 0)
        t = 0;
    time_t s = (time_t)t;
    long us = (long)((t - (double)s) * 1e6 + 0.5);
    if (us >= 1000000) {
        s++;
        us -= 1000000;
    }
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
}

static void add_time(cJSON *o, const char *name, const char *utc_name, double t)
{
    char u[40];
    cJSON_AddItemToObject(o, name, raw_time(t));
    fmt_utc(u, sizeof(u), t);
    cJSON_AddStringToObject(o, utc_name, u);
}

struct kline {
    long long seq;     /* -1: none (kern.log) */
    long long ts_usec; /* -1: unknown */
    double time;
    int fac, lvl; /* -1: unknown */
    const char *cls, *text, *source, *file;
    int xid;
    cJSON *attrs; /* taken over */
};

static void keep(struct lines *l, struct kline *kl)
{
    cJSON *o = cJSON_CreateObject();
    if (kl->seq >= 0)
        cJSON_AddNumberToObject(o, "seq", (double)kl->seq);
    if (kl->ts_usec >= 0)
        cJSON_AddNumberToObject(o, "ts_usec", (double)kl->ts_usec);
    add_time(o, "time", "time_utc", kl->time);
    if (kl->fac >= 0) {
        cJSON_AddStringToObject(o, "facility",
                                kl->fac < (int)(sizeof(facilities) / sizeof(facilities[0]))
                                    ? facilities[kl->fac]
                                    : "unknown");
        cJSON_AddNumberToObject(o, "facility_num", kl->fac);
    }
    if (kl->lvl >= 0) {
        cJSON_AddStringToObject(o, "level", levels[kl->lvl & 7]);
        cJSON_AddNumberToObject(o, "level_num", kl->lvl);
    }
    cJSON_AddStringToObject(o, "class", kl->cls);
    if (kl->xid >= 0)
        cJSON_AddNumberToObject(o, "xid", kl->xid);
    cJSON_AddStringToObject(o, "text", kl->text);
    if (kl->attrs) {
        cJSON_AddItemToObject(o, "attrs", kl->attrs);
        kl->attrs = NULL;
    }
    cJSON_AddStringToObject(o, "source", kl->source);
    if (kl->file)
        cJSON_AddStringToObject(o, "file", kl->file);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (s)
        lines_push(l, s);
    else
        l->dropped++;
}

/* Copies at most n-1 bytes without cutting a UTF-8 sequence in two (the result goes to JSON). */
static void copy_utf8(char *dst, size_t n, const char *src)
{
    size_t len = strnlen(src, n - 1);
    if (src[len])
        while (len && ((unsigned char)src[len] & 0xc0) == 0x80)
            len--;
    memcpy(dst, src, len);
    dst[len] = 0;
}

/* The GPU driver's classes: context for any GPU job, kept in every bundle. */
static int gpu_class(const char *cls)
{
    return !strcmp(cls, "xid") || !strcmp(cls, "bus") || !strcmp(cls, "gpu") ||
           !strcmp(cls, "nvlink") || !strcmp(cls, "peermem");
}

/* Does the text name pid `v` the way the kernel prints a task: "comm[PID]" (segfault, traps),
 * "pid=PID" (OOM, Xid), "pid PID" / "process PID" / "Pid PID(comm)" (OOM kill, core dumps),
 * "PID(comm)" (coredump:), "comm:PID" (hung task)? A bare number (an address, a count) is not. */
static int names_pid(const char *text, pid_t v)
{
    char d[16];
    int n = snprintf(d, sizeof(d), "%d", (int)v);
    for (const char *p = strstr(text, d); p; p = strstr(p + 1, d)) {
        char before = p > text ? p[-1] : 0, after = p[n];
        if ((after >= '0' && after <= '9') || (after >= 'a' && after <= 'z') ||
            (after >= 'A' && after <= 'Z') || (before >= '0' && before <= '9') ||
            (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z'))
            continue;
        if ((before == '[' && after == ']') || (before == ':' && after == ' ') || after == '(')
            return 1;
        if (before == '=' && p - text >= 4 && !strncasecmp(p - 4, "pid", 3))
            return 1;
        if (before == ' ' && ((p - text >= 4 && !strncasecmp(p - 4, "pid", 3)) ||
                              (p - text >= 8 && !strncmp(p - 8, "process", 7))))
            return 1;
    }
    return 0;
}

static int about_process(const struct kctx *k, const char *text)
{
    for (size_t i = 0; i < k->npids; i++)
        if (names_pid(text, k->pids[i]))
            return 1;
    return 0;
}

/* The GPU a bus-loss line names: "Xid (PCI:0000:3b:00)", "GPU 0000:2b:00.0", "NVIDIA GPU
 * 0000:b3:00.0"; remembered for nvidia-smi -i (every other GPU is still queried). */
static void bus_lost_gpu(struct kctx *k, const char *text)
{
    const char *q = strstr(text, "Xid (");
    if (q)
        q += 5;
    else if ((q = strstr(text, "NVIDIA GPU ")))
        q += 11;
    else if ((q = strstr(text, "GPU ")))
        q += 4;
    char tok[40], pci[16];
    size_t n = q ? strspn(q + (strncmp(q, "PCI:", 4) ? 0 : 4), "0123456789abcdefABCDEF:.") : 0;
    if (q && !strncmp(q, "PCI:", 4))
        q += 4;
    if (n && n < sizeof(tok)) {
        memcpy(tok, q, n);
        tok[n] = 0;
        if (tok[n - 1] == ':')
            tok[n - 1] = 0;
    }
    if (!n || n >= sizeof(tok) || cp_pci_norm(tok, pci, sizeof(pci))) {
        k->bus_unnamed = 1;
        return;
    }
    for (int i = 0; i < k->nbus; i++)
        if (!strcmp(k->bus_pci[i], pci))
            return;
    if (k->nbus < CP_SMI_GPUS)
        snprintf(k->bus_pci[k->nbus++], sizeof(k->bus_pci[0]), "%s", pci);
}

/* Keeps a matched line when it is in the window (and in scope), and notes bus-loss events even
 * older than the window: a GPU that fell off the bus before this job started still hangs
 * nvidia-smi. */
static void consider(struct kctx *k, struct lines *l, struct kline *kl, const struct pat *p)
{
    if (!p)
        return;
    kl->cls = p->cls;
    kl->xid = xid_code(kl->text);
    if (kl->time >= k->bus_from && is_buslost(p, kl->xid)) {
        if (kl->time >= k->bus_t) {
            k->bus_t = kl->time;
            copy_utf8(k->bus_line, sizeof(k->bus_line), kl->text);
        }
        bus_lost_gpu(k, kl->text);
    }
    if (kl->time < k->from)
        return;
    if (k->scoped && !gpu_class(p->cls) && !about_process(k, kl->text))
        k->filtered++; /* another process's line: root-only bundles only */
    else
        keep(l, kl);
}

/* The host's kernel.dmesg_restrict; unreadable counts as set (fails closed). */
static int dmesg_restricted(void)
{
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, "/proc/sys/kernel/dmesg_restrict", 64, &len, &tr);
    int r = !s || atoi(s) != 0;
    free(s);
    return r;
}

/* The process's pid and thread ids (the kernel names a thread by its tid), capped. */
static void scope_pids(struct kctx *k, const struct cap *c)
{
    size_t cap = 4098;
    k->pids = malloc(cap * sizeof(*k->pids));
    if (!k->pids)
        return;
    k->pids[k->npids++] = c->pid;
    if (c->tid > 0 && c->tid != c->pid)
        k->pids[k->npids++] = c->tid;
    int dfd = c->procfd >= 0 ? openat(c->procfd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && k->npids < cap) {
        pid_t t = (pid_t)atoi(e->d_name);
        if (t > 0 && t != c->pid && t != c->tid)
            k->pids[k->npids++] = t;
    }
    closedir(d);
}

/* The attribute lines after a record (" SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"). */
static cJSON *parse_attrs(const char *p, const char *end)
{
    cJSON *a = NULL;
    int n = 0;
    char key[64], val[512];
    while (p < end && *p == ' ' && n < ATTRS_MAX) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e)
            e = end;
        const char *eq = memchr(p + 1, '=', (size_t)(e - p - 1));
        if (eq && eq - p - 1 > 0 && (size_t)(eq - p - 1) < sizeof(key)) {
            memcpy(key, p + 1, (size_t)(eq - p - 1));
            key[eq - p - 1] = 0;
            text_clean(val, sizeof(val), eq + 1, (size_t)(e - eq - 1), 1);
            if (!a)
                a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, key, val);
            n++;
        }
        p = e + 1;
    }
    return a;
}

struct ringinfo {
    int err; /* errno of open, or of a failed read */
    int have_oldest;
    long long oldest_seq;
    double oldest_time;
    int cut; /* stopped at the deadline */
};

static void read_ring(struct kctx *k, struct ringinfo *ri)
{
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        ri->err = errno;
        return;
    }
    char *rec = malloc(REC_MAX + 1), *text = malloc(TEXT_MAX);
    if (!rec || !text) {
        ri->err = ENOMEM;
        goto out;
    }
    for (;;) {
        if (now_mono() > k->deadline) {
            ri->cut = 1;
            break;
        }
        ssize_t r = read(fd, rec, REC_MAX);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EPIPE) { /* overwritten while we read: the next read resumes */
                k->overwritten++;
                continue;
            }
            if (errno != EAGAIN)
                ri->err = errno;
            break;
        }
        if (r == 0)
            break;
        rec[r] = 0;
        k->read++;
        struct kline_rec kr;
        if (kline_record(rec, (size_t)r, &kr))
            continue;
        long long seq = kr.seq, ts = kr.ts_usec;
        /* ts_usec is the kernel's local_clock, which follows CLOCK_MONOTONIC (both stop during
         * suspend), not CLOCK_BOOTTIME: map it to wall-clock through the monotonic clock. */
        double wall = k->rt0 - (k->mono0 - (double)ts / 1e6);
        if (!ri->have_oldest) {
            ri->have_oldest = 1;
            ri->oldest_seq = seq;
            ri->oldest_time = wall;
        }
        if (wall < k->from && wall < k->bus_from)
            continue;
        text_clean(text, TEXT_MAX, kr.text, kr.text_len, 1);
        struct kline kl = {.seq = seq,
                           .ts_usec = ts,
                           .time = wall,
                           .fac = kr.fac,
                           .lvl = kr.lvl,
                           .text = text,
                           .source = "kmsg",
                           .xid = -1};
        const struct pat *p = classify(text);
        if (p && wall >= k->from && kr.attrs)
            kl.attrs = parse_attrs(kr.attrs, kr.end);
        consider(k, &k->ring, &kl, p);
        cJSON_Delete(kl.attrs);
    }
out:
    free(rec);
    free(text);
    close(fd);
}

/* "Nov 29 18:00:58" (local time, no year) or "2026-11-29T18:00:58.123456+00:00". Returns the
 * rest of the line, or NULL. */
static const char *syslog_time(const char *s, double now, double *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int iso = 1;
    for (int i = 0; i < 4 && iso; i++) /* stops at the NUL of a short line */
        iso = s[i] >= '0' && s[i] <= '9';
    if (iso && s[4] == '-') {
        int n = 0;
        if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 || n != 19)
            return NULL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        const char *p = s + n;
        double frac = 0, scale = 0.1;
        if (*p == '.' || *p == ',')
            for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
                frac += (*p - '0') * scale;
        long off = 0;
        if (*p == 'Z')
            p++;
        else if (*p == '+' || *p == '-') {
            int sign = *p == '-' ? -1 : 1, hh, mm;
            if (sscanf(p + 1, "%2d:%2d", &hh, &mm) == 2)
                p += 6;
            else if (sscanf(p + 1, "%2d%2d", &hh, &mm) == 2)
                p += 5;
            else
                return NULL;
            off = sign * (hh * 3600L + mm * 60L);
        } else
            return NULL;
        time_t base = timegm(&tm);
        if (base == (time_t)-1)
            return NULL;
        *t = (double)(base - off) + frac;
        return p;
    }
    /* RFC 3164 carries no year: this year, unless that lands in the future */
    const char *p = strptime(s, "%b %d %H:%M:%S", &tm);
    if (!p)
        return NULL;
    time_t nt = (time_t)now;
    struct tm lt;
    localtime_r(&nt, &lt);
    for (int y = 0; y < 2; y++) {
        struct tm x = tm;
        x.tm_year = lt.tm_year - y;
        x.tm_isdst = -1;
        time_t v = mktime(&x);
        if (v != (time_t)-1 && (double)v <= now + 86400) {
            *t = (double)v;
            return p;
        }
    }
    return NULL;
}

/* One kern.log line: "<time> [host] kernel: [ 123.456789] message". */
static void kernlog_line(struct kctx *k, char *line, double older_than, const char *path,
                         char *text)
{
    double t;
    const char *p = syslog_time(line, k->to, &t);
    if (!p || t < k->from || t >= older_than || t > k->to + 5)
        return;
    while (*p == ' ')
        p++;
    if (strncmp(p, "kernel:", 7)) {
        p += strcspn(p, " "); /* the host name */
        while (*p == ' ')
            p++;
        if (strncmp(p, "kernel:", 7))
            return; /* a user-space program's line */
    }
    for (p += 7; *p == ' '; p++)
        ;
    long long ts = -1;
    if (*p == '[') {
        char *e;
        double v = strtod(p + 1, &e);
        if (*e == ']') {
            ts = (long long)(v * 1e6 + 0.5);
            for (p = e + 1; *p == ' '; p++)
                ;
        }
    }
    text_clean(text, TEXT_MAX, p, strlen(p), 0);
    struct kline kl = {.seq = -1,
                       .ts_usec = ts,
                       .time = t,
                       .fac = 0,
                       .lvl = -1,
                       .text = text,
                       .source = "kern.log",
                       .file = path,
                       .xid = -1};
    consider(k, &k->klog, &kl, classify(text));
}

/* Reads the tail of one kern.log, line by line, in a fixed buffer. */
static void kernlog_file(struct kctx *k, const char *path, double older_than, cJSON *files)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 && errno == ENOENT)
        return;
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "path", path);
    cJSON_AddItemToArray(files, f);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        cJSON_AddStringToObject(f, "error", strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & S_IWOTH)) {
        cJSON_AddStringToObject(f, "error", "not a regular file, or writable by anyone: skipped");
        close(fd);
        return;
    }
    off_t start = st.st_size > (off_t)KERNLOG_TAIL ? st.st_size - (off_t)KERNLOG_TAIL : 0;
    const size_t cap = 64 << 10;
    char *buf = malloc(cap + 1), *text = malloc(TEXT_MAX);
    size_t have = 0, before = k->klog.n - k->klog.head + k->klog.dropped;
    uint64_t total = 0;
    int skip = start > 0; /* the first line is cut */
    if (!buf || !text || lseek(fd, start, SEEK_SET) < 0) {
        cJSON_AddStringToObject(f, "error", buf && text ? strerror(errno) : "out of memory");
        goto out;
    }
    cJSON_AddNumberToObject(f, "from_offset", (double)start);
    while (total < KERNLOG_TAIL + cap && now_mono() < k->deadline) {
        ssize_t r = read(fd, buf + have, cap - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        total += (uint64_t)r;
        have += (size_t)r;
        char *p = buf, *end = buf + have, *nl;
        while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
            *nl = 0;
            if (!skip)
                kernlog_line(k, p, older_than, path, text);
            skip = 0;
            p = nl + 1;
        }
        have = (size_t)(end - p);
        if (have == cap) { /* one line longer than the buffer: drop it */
            have = 0;
            skip = 1;
        } else
            memmove(buf, p, have);
    }
    if (have && !skip) {
        buf[have] = 0;
        kernlog_line(k, buf, older_than, path, text);
    }
    cJSON_AddNumberToObject(f, "kept",
                            (double)(k->klog.n - k->klog.head + k->klog.dropped - before));
out:
    free(buf);
    free(text);
    close(fd);
}

/* The process start as wall-clock time: /proc/<pid>/stat field 22 counts clock ticks of
 * CLOCK_BOOTTIME. Returns -1 when unknown. */
static double process_start(struct cap *c, double rt, double boot)
{
    if (c->procfd < 0)
        return -1;
    size_t len;
    int tr;
    char *s = read_file_at(c->procfd, "stat", 4096, &len, &tr);
    if (!s)
        return -1;
    double r = -1;
    char *p = strrchr(s, ')');
    if (p) {
        p++;
        for (int field = 3; field < 22 && p; field++) {
            while (*p == ' ')
                p++;
            p = strchr(p, ' ');
        }
        long hz = sysconf(_SC_CLK_TCK);
        if (p && hz > 0) {
            char *e;
            unsigned long long ticks = strtoull(p + 1, &e, 10);
            if (e != p + 1)
                r = rt - (boot - (double)ticks / (double)hz);
        }
    }
    free(s);
    return r;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Appends a list's entries to out (comma-separated). */
static char *append_lines(char *o, const struct lines *l, int *first)
{
    for (size_t i = l->head; i < l->n; i++) {
        if (!*first)
            *o++ = ',';
        *first = 0;
        memcpy(o, l->s[i], l->len[i]);
        o += l->len[i];
    }
    return o;
}

/* What kmsg_collect found out besides the lines, for kmsg.json's header and the step. */
struct ksum {
    double start;   /* the process's start (wall clock), -1: unknown */
    size_t budget;  /* bytes for lines[] */
    int root_only;  /* a root-only bundle: every matching line */
    int restricted; /* the host's dmesg_restrict */
    struct ringinfo ri;
    int readable, wrapped, fallback; /* the ring; kern.log read for what it lacks */
    cJSON *files;                    /* the kern.log files read */
    size_t nring, nklog, dropped;    /* lines kept from each, dropped for the budget */
};

/* One reading of the clocks, the window (the process's start minus kmsg_margin, or the last
 * hour) and the budget; the scope: root-only bundles (secure or root's own crashes) keep every
 * line, and so does a host where any user may read the kernel log anyway. */
static void kmsg_window(struct kctx *k, struct ksum *s, struct cap *c, double t0)
{
    k->rt0 = clock_s(CLOCK_REALTIME);
    k->mono0 = clock_s(CLOCK_MONOTONIC);
    double boot0 = clock_s(CLOCK_BOOTTIME);
    k->deadline = t0 + DEADLINE_S;
    k->bus_from = k->rt0 - c->cfg.smi_bus_lost_window_s;
    k->bus_t = -1;
    s->start = process_start(c, k->rt0, boot0);
    k->from = s->start >= 0 ? s->start - c->cfg.kmsg_margin_s : k->rt0 - 3600;
    k->to = k->rt0;
    s->budget = c->cfg.kmsg_max > HEADER_RESERVE ? c->cfg.kmsg_max - HEADER_RESERVE : 0;
    k->ring.budget = s->budget;
    s->root_only = c->secure || c->uid == 0;
    s->restricted = dmesg_restricted();
    k->scoped = !s->root_only && s->restricted;
    if (k->scoped)
        scope_pids(k, c);
}

/* The ring, then kern.log for what the ring does not reach back to (it wrapped, or the window
 * starts before this boot), or for everything when the ring is unreadable. */
static void kmsg_read(struct kctx *k, struct ksum *s)
{
    read_ring(k, &s->ri);
    k->to = clock_s(CLOCK_REALTIME);
    s->readable = s->ri.err == 0 || k->read > 0;
    s->wrapped = s->ri.have_oldest && s->ri.oldest_seq > 0 && s->ri.oldest_time > k->from;
    s->fallback = !s->readable || !s->ri.have_oldest || s->ri.oldest_time > k->from;
    double older_than = s->readable && s->ri.have_oldest ? s->ri.oldest_time : k->to + 5;
    s->files = cJSON_CreateArray();
    if (s->fallback) {
        k->klog.budget = s->budget > k->ring.bytes ? s->budget - k->ring.bytes : 0;
        kernlog_file(k, "/var/log/kern.log.1", older_than, s->files);
        kernlog_file(k, "/var/log/kern.log", older_than, s->files);
    }
    s->nring = k->ring.n - k->ring.head;
    s->nklog = k->klog.n - k->klog.head;
    s->dropped = k->ring.dropped + k->klog.dropped;
}

/* A recent bus loss, for nvidia-smi (smi.c skips the lost GPUs). */
static void kmsg_bus_lost(struct cap *c, const struct kctx *k)
{
    if (k->bus_t < 0)
        return;
    c->bus_lost_recent = 1;
    c->bus_lost_time = k->bus_t;
    copy_utf8(c->bus_lost_line, sizeof(c->bus_lost_line), k->bus_line);
    memcpy(c->bus_lost_pci, k->bus_pci, sizeof(c->bus_lost_pci));
    c->bus_lost_n = k->nbus;
    c->bus_lost_unnamed = k->bus_unnamed;
}

/* kmsg.json's window: from, to, and what the start is based on. */
static void header_window(cJSON *h, const struct cap *c, const struct kctx *k, const struct ksum *s)
{
    cJSON *w = cJSON_AddObjectToObject(h, "window");
    add_time(w, "from", "from_utc", k->from);
    add_time(w, "to", "to_utc", k->to);
    if (s->start >= 0) {
        cJSON_AddItemToObject(w, "process_start", raw_time(s->start));
        cJSON_AddNumberToObject(w, "margin_s", c->cfg.kmsg_margin_s);
        cJSON_AddStringToObject(w, "basis", "process start minus kmsg_margin");
    } else {
        cJSON_AddNullToObject(w, "process_start");
        cJSON_AddStringToObject(w, "basis", "the last hour (process start unknown)");
    }
}

/* kmsg.json's kern_log (whether and why it was read) and scope (which lines were kept). */
static void header_kernlog_scope(cJSON *h, const struct kctx *k, struct ksum *s)
{
    cJSON *fb = cJSON_AddObjectToObject(h, "kern_log");
    cJSON_AddBoolToObject(fb, "used", s->fallback);
    if (s->fallback)
        cJSON_AddStringToObject(fb, "why",
                                !s->readable         ? "/dev/kmsg is unreadable"
                                : !s->ri.have_oldest ? "the ring is empty"
                                : s->wrapped         ? "the ring wrapped past the window start"
                                                     : "the window starts before this boot");
    cJSON_AddItemToObject(fb, "files", s->files);
    s->files = NULL;
    cJSON_AddNumberToObject(fb, "lines", (double)s->nklog);
    cJSON_AddStringToObject(fb, "journal", "not read");
    cJSON *sc = cJSON_AddObjectToObject(h, "scope");
    cJSON_AddBoolToObject(sc, "limited", k->scoped);
    cJSON_AddStringToObject(sc, "why",
                            s->root_only     ? "root-only bundle: every matching line"
                            : !s->restricted ? "dmesg_restrict is 0: any user may read "
                                               "the kernel log"
                                             : "the crashed uid may read this bundle: "
                                               "lines about this process and GPU driver "
                                               "lines only (dmesg_restrict is set)");
    cJSON_AddNumberToObject(sc, "pids", (double)k->npids);
    cJSON_AddNumberToObject(sc, "filtered", (double)k->filtered);
}

/* kmsg.json without its lines. */
static cJSON *kmsg_header(const struct cap *c, const struct kctx *k, struct ksum *s)
{
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "source", "/dev/kmsg");
    header_window(h, c, k, s);
    if (s->ri.have_oldest) {
        add_time(h, "ring_oldest_time", "ring_oldest_utc", s->ri.oldest_time);
        cJSON_AddNumberToObject(h, "ring_oldest_seq", (double)s->ri.oldest_seq);
    } else
        cJSON_AddNullToObject(h, "ring_oldest_time");
    cJSON_AddBoolToObject(h, "wrapped", s->wrapped);
    cJSON_AddNumberToObject(h, "records_read", (double)k->read);
    cJSON_AddNumberToObject(h, "records_overwritten", (double)k->overwritten);
    if (s->ri.err)
        cJSON_AddStringToObject(h, "error", strerror(s->ri.err));
    if (s->ri.cut)
        cJSON_AddStringToObject(h, "cut", "stopped at the deadline");
    cJSON_AddBoolToObject(h, "bus_lost_recent", c->bus_lost_recent);
    cJSON_AddNumberToObject(h, "bus_lost_window_s", c->cfg.smi_bus_lost_window_s);
    if (c->bus_lost_recent) {
        cJSON_AddStringToObject(h, "bus_lost_line", c->bus_lost_line);
        add_time(h, "bus_lost_time", "bus_lost_utc", k->bus_t);
        cJSON *bl = cJSON_AddArrayToObject(h, "bus_lost_pci");
        for (int i = 0; i < k->nbus; i++)
            cJSON_AddItemToArray(bl, cJSON_CreateString(k->bus_pci[i]));
    }
    header_kernlog_scope(h, k, s);
    cJSON_AddNumberToObject(h, "lines_kept", (double)(s->nring + s->nklog));
    cJSON_AddBoolToObject(h, "truncated", s->dropped > 0 || s->ri.cut);
    cJSON_AddNumberToObject(h, "dropped", (double)s->dropped);
    cJSON_AddNumberToObject(h, "max_bytes", (double)c->cfg.kmsg_max);
    return h;
}

/* kmsg.json: the header with lines[] spliced in before its closing brace (the lines are kept
 * serialized), oldest first. Frees h. Returns NULL when out of memory. */
static char *kmsg_json(cJSON *h, const struct kctx *k, size_t *outlen)
{
    char *hs = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    char *out = NULL;
    *outlen = 0;
    if (!hs)
        return NULL;
    size_t hl = strlen(hs); /* ends in '}': lines[] goes before it, oldest first */
    out = malloc(hl + k->ring.bytes + k->klog.bytes + 32);
    if (out) {
        char *o = out;
        memcpy(o, hs, hl - 1);
        o += hl - 1;
        memcpy(o, ",\"lines\":[", 10);
        o += 10;
        int first = 1;
        o = append_lines(o, &k->klog, &first);
        o = append_lines(o, &k->ring, &first);
        memcpy(o, "]}", 2);
        o += 2;
        *outlen = (size_t)(o - out);
    }
    free(hs);
    return out;
}

/* The kmsg.json step: its status by what happened to the ring, and a reason that says what
 * was kept, from where, and what was left out. */
static void kmsg_step(struct cap *c, const struct kctx *k, const struct ksum *s, double t0,
                      int werr, int have_out)
{
    char more[200] = "";
    size_t m = 0;
    if (s->nklog)
        m += (size_t)snprintf(more + m, sizeof(more) - m, "; %zu from kern.log (%s)", s->nklog,
                              !s->readable ? "ring unreadable"
                              : s->wrapped ? "ring wrapped"
                                           : "window before the ring");
    if (s->dropped && m < sizeof(more))
        m += (size_t)snprintf(more + m, sizeof(more) - m, "; %zu oldest dropped (kmsg_max)",
                              s->dropped);
    if (s->ri.cut && m < sizeof(more))
        m += (size_t)snprintf(more + m, sizeof(more) - m, "; stopped at the %.0f s deadline",
                              DEADLINE_S);
    if (k->filtered && m < sizeof(more))
        m +=
            (size_t)snprintf(more + m, sizeof(more) - m,
                             "; %zu other processes' lines left out (dmesg_restrict)", k->filtered);
    if (c->bus_lost_recent && m < sizeof(more))
        snprintf(more + m, sizeof(more) - m, "; GPU bus loss in the last %u s",
                 c->cfg.smi_bus_lost_window_s);
    int err = s->ri.err;
    if (werr)
        cap_step(c, "kmsg.json", "failed", t0, "cannot write the member: %s",
                 have_out ? strerror(c->bw.err) : "out of memory");
    else if (!s->readable && (err == ENOENT || err == ENXIO || err == ENODEV))
        cap_step(c, "kmsg.json", "absent", t0, "no /dev/kmsg (%s)%s", strerror(err), more);
    else if (!s->readable && (err == EPERM || err == EACCES))
        cap_step(c, "kmsg.json", "refused", t0,
                 "/dev/kmsg: %s (dmesg_restrict without CAP_SYSLOG?)%s", strerror(err), more);
    else if (!s->readable)
        cap_step(c, "kmsg.json", "failed", t0, "/dev/kmsg: %s%s", strerror(err), more);
    else
        cap_step(c, "kmsg.json", "ok", t0, "%zu lines kept of %zu read%s", s->nring, k->read, more);
}

void kmsg_collect(struct cap *c)
{
    double t0 = now_mono();
    struct kctx k;
    memset(&k, 0, sizeof(k));
    struct ksum s;
    memset(&s, 0, sizeof(s));
    kmsg_window(&k, &s, c, t0);
    kmsg_read(&k, &s);
    kmsg_bus_lost(c, &k);
    size_t outlen;
    char *out = kmsg_json(kmsg_header(c, &k, &s), &k, &outlen);
    int have_out = out != NULL;
    int werr = !out || bw_add(&c->bw, "kmsg.json", out, outlen);
    free(out);
    lines_free(&k.ring);
    lines_free(&k.klog);
    free(k.pids);
    kmsg_step(c, &k, &s, t0, werr, have_out);
}
