/* kline.c - kernel-log lines parsed once (see kline.h). */
#include "kline.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- /dev/kmsg records ---- */

int kline_record(const char *rec, size_t len, struct kline_rec *out)
{
    memset(out, 0, sizeof(*out));
    const char *end = rec + len, *semi = memchr(rec, ';', len), *nl = memchr(rec, '\n', len);
    if (!semi || (nl && nl < semi))
        return -1;
    char *e;
    unsigned long prio = strtoul(rec, &e, 10);
    if (*e != ',')
        return -1;
    out->seq = strtoll(e + 1, &e, 10);
    if (*e != ',')
        return -1;
    out->ts_usec = strtoll(e + 1, &e, 10);
    if (*e != ',')
        return -1;
    out->fac = (int)(prio >> 3);
    out->lvl = (int)(prio & 7);
    out->text = semi + 1;
    nl = memchr(out->text, '\n', (size_t)(end - out->text));
    out->text_len = (size_t)((nl ? nl : end) - out->text);
    out->attrs = nl && nl + 1 < end ? nl + 1 : NULL;
    out->end = end;
    return 0;
}

/* ---- NVIDIA Xid ---- */

int kline_pci_normalize(const char *in, char *out, size_t len)
{
    unsigned long part[3];
    int n = 0;
    unsigned long fn = 0;
    const char *p = in;
    if (len)
        out[0] = 0;
    while (*p == ' ')
        p++;
    if (!strncasecmp(p, "PCI:", 4))
        p += 4;
    for (;;) {
        if (!isxdigit((unsigned char)*p) || n == 3)
            return -1;
        char *end;
        size_t digits = strspn(p, "0123456789abcdefABCDEF");
        if (digits > 8)
            return -1;
        part[n++] = strtoul(p, &end, 16);
        p = end;
        if (*p == ':') {
            p++;
            continue;
        }
        break;
    }
    if (*p == '.') {
        p++;
        if (!isxdigit((unsigned char)*p))
            return -1;
        fn = strtoul(p, (char **)&p, 16);
    }
    if (n < 2 || fn > 7)
        return -1;
    unsigned long dom = n == 3 ? part[0] : 0, bus = part[n - 2], dev = part[n - 1];
    if (dom > 0xffffffffUL || bus > 0xff || dev > 0x1f)
        return -1;
    snprintf(out, len, "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn);
    return 0;
}

/* Copies [s, s+n) into dst (size dsz), cut on a UTF-8 boundary, trailing blanks removed. */
static void copy_span(char *dst, size_t dsz, const char *s, size_t n)
{
    if (n >= dsz) {
        n = dsz - 1;
        while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(dst, s, n);
    dst[n] = 0;
    while (n &&
           (dst[n - 1] == ' ' || dst[n - 1] == '\n' || dst[n - 1] == '\t' || dst[n - 1] == '\r'))
        dst[--n] = 0;
}

static void ev_init(struct kline_xid *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->gpu_instance = -1;
    ev->caused_by = -1;
}

/* Reads a decimal number (at most 9 digits) at *pp; -1 when there is none. */
static long read_num(const char **pp)
{
    const char *p = *pp;
    long v = 0;
    int d = 0;
    while (isdigit((unsigned char)*p) && d < 9) {
        v = v * 10 + (*p - '0');
        p++;
        d++;
    }
    if (!d || isdigit((unsigned char)*p))
        return -1;
    *pp = p;
    return v;
}

static int parse_xid(const char *p, struct kline_xid *ev)
{
    /* p points after "NVRM: Xid (" */
    const char *close = strchr(p, ')');
    if (!close || close - p > 64)
        return 0;
    char inner[80];
    copy_span(inner, sizeof(inner), p, (size_t)(close - p));
    char *gi = strstr(inner, "GPU-I:");
    if (gi) {
        const char *q = gi + 6;
        long v = read_num(&q);
        ev->gpu_instance = (int)v;
        *gi = 0;
    }
    char *sp = strpbrk(inner, " ,");
    if (sp)
        *sp = 0;
    kline_pci_normalize(inner, ev->pci, sizeof(ev->pci));
    const char *q = close + 1;
    if (*q != ':')
        return 0;
    q++;
    while (*q == ' ')
        q++;
    long code = read_num(&q);
    if (code < 0)
        return 0;
    ev->code = (int)code;
    while (*q == ',' || *q == ' ')
        q++;
    if (!strncmp(q, "pid=", 4)) {
        q += 4;
        const char *e;
        if (*q == '\'') {
            e = strchr(q + 1, '\'');
            e = e ? e + 1 : q + strlen(q);
        } else {
            e = q + strcspn(q, ", ");
        }
        const char *n = q;
        long pid = read_num(&n);
        if (pid >= 0 && n == e) {
            ev->has_pid = 1;
            ev->pid = pid;
        } else if (strstr(q, "<unknown>") && strstr(q, "<unknown>") < e) {
            ev->pid_unknown = 1;
        }
        q = e;
        while (*q == ',' || *q == ' ')
            q++;
    }
    if (!strncmp(q, "name=", 5)) {
        q += 5;
        size_t n = strcspn(q, ",");
        if (strncmp(q, "<unknown>", 9) || n != 9)
            copy_span(ev->name, sizeof(ev->name), q, n);
        q += n;
        while (*q == ',' || *q == ' ')
            q++;
    }
    copy_span(ev->text, sizeof(ev->text), q, strlen(q));
    const char *cb = strstr(ev->text, "caused by previous Xid ");
    if (cb) {
        const char *c = cb + strlen("caused by previous Xid ");
        long v = read_num(&c);
        if (v >= 0)
            ev->caused_by = (int)v;
    }
    return 1;
}

/* The PCI address right after `after` in s ("0000:b3:00.0"), normalized into out. */
static int pci_after(const char *s, const char *after, char *out, size_t len)
{
    const char *p = strstr(s, after);
    if (!p)
        return -1;
    p += strlen(after);
    char tok[40];
    size_t n = strspn(p, "0123456789abcdefABCDEF:.");
    if (!n || n >= sizeof(tok))
        return -1;
    memcpy(tok, p, n);
    tok[n] = 0;
    if (n && tok[n - 1] == ':')
        tok[n - 1] = 0;
    return kline_pci_normalize(tok, out, len);
}

int kline_xid_parse(struct kline_xid_ctx *ctx, const char *line, struct kline_xid *ev)
{
    ev_init(ev);
    const char *x = strstr(line, "NVRM: Xid (");
    if (x)
        return parse_xid(x + strlen("NVRM: Xid ("), ev);
    const char *nv = strstr(line, "NVRM:");
    if (!nv)
        return 0;
    char pci[32];
    int bus = strstr(nv, "fallen off the bus") != NULL;
    if (pci_after(nv, "NVRM: The NVIDIA GPU ", pci, sizeof(pci)) == 0) {
        if (!bus) { /* the first line of the three: wait for the rest */
            if (ctx)
                snprintf(ctx->pending_pci, sizeof(ctx->pending_pci), "%s", pci);
            return 0;
        }
    } else if (pci_after(nv, "NVRM: GPU ", pci, sizeof(pci)) != 0) {
        pci[0] = 0;
    }
    if (!bus)
        return 0;
    if (!pci[0] && ctx && ctx->pending_pci[0])
        snprintf(pci, sizeof(pci), "%s", ctx->pending_pci);
    if (ctx)
        ctx->pending_pci[0] = 0;
    ev->code = KLINE_XID_BUSLOST;
    ev->implied = 1;
    snprintf(ev->pci, sizeof(ev->pci), "%s", pci);
    copy_span(ev->text, sizeof(ev->text), nv + 5 + strspn(nv + 5, " "),
              strlen(nv + 5 + strspn(nv + 5, " ")));
    return 1;
}

/* ---- the OOM killer ---- */

/* The last occurrence of needle in [s, end) (NULL when none). */
static const char *last_in(const char *s, const char *end, const char *needle)
{
    const char *found = NULL;
    size_t n = strlen(needle);
    for (const char *p = s; (p = memmem(p, (size_t)(end - p), needle, n)); p++)
        found = p;
    return found;
}

/* A decimal number at p (at most 10 digits) followed by one of `then` (or the end); -1 else. */
static long number_at(const char *p, const char *then)
{
    long v = 0;
    int d = 0;
    for (; isdigit((unsigned char)*p) && d < 10; p++, d++)
        v = v * 10 + (*p - '0');
    if (!d || (*p && !strchr(then, *p)))
        return -1;
    return v;
}

/* Copies [s, e) into dst (dsz bytes), trailing blanks removed. */
static void span(char *dst, size_t dsz, const char *s, const char *e)
{
    size_t l = (size_t)(e - s);
    while (l && (s[l - 1] == ' ' || s[l - 1] == '\n'))
        l--;
    if (l >= dsz)
        l = dsz - 1;
    memcpy(dst, s, l);
    dst[l] = 0;
}

/* "... NAME:NkB" after `from` -> N, or -1. */
static double kib_after(const char *from, const char *name)
{
    const char *p = strstr(from, name);
    if (!p)
        return -1;
    char *end;
    double v = strtod(p + strlen(name), &end);
    return end != p + strlen(name) && !strncmp(end, "kB", 2) ? v : -1;
}

/* oom-kill:constraint=C,nodemask=..,cpuset=..,mems_allowed=..,oom_memcg=M,task_memcg=T,task=COMM,
 * pid=N,uid=U (global_oom instead of oom_memcg for the host's memory). The kernel writes the
 * fields in this order; the paths and the comm are the process's to choose, so the numbers are
 * read from the end, and each text field ends where the next fixed key begins. */
static int oom_list(const char *list, struct kline_oom *o)
{
    const char *end = list + strlen(list);
    while (end > list && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    const char *pid = last_in(list, end, ",pid=");
    if (!pid)
        return 0;
    const char *uid = last_in(pid, end, ",uid=");
    o->pid = number_at(pid + 5, uid ? ",\n " : ",\n ");
    if (o->pid < 0)
        return 0;
    o->uid = uid ? number_at(uid + 5, ",\n ") : -1;
    o->kind = KLINE_OOM_LIST;
    if (!strncmp(list, "constraint=", 11)) {
        const char *c = list + 11, *ce = strchr(c, ',');
        span(o->constraint, sizeof(o->constraint), c, ce && ce < pid ? ce : pid);
        o->have_constraint = 1;
    }
    const char *task = last_in(list, pid, ",task=");
    if (task) {
        span(o->comm, sizeof(o->comm), task + 6, pid);
        o->have_comm = 1;
    }
    const char *stop = task ? task : pid;
    const char *tm = last_in(list, stop, ",task_memcg=");
    if (tm) {
        span(o->task_memcg, sizeof(o->task_memcg), tm + 12, stop);
        o->have_task_memcg = 1;
        stop = tm;
    }
    const char *om = strstr(list, ",oom_memcg=");
    if (om && om < stop) {
        span(o->oom_memcg, sizeof(o->oom_memcg), om + 11, stop);
        o->have_oom_memcg = 1;
    }
    const char *g = strstr(list, ",global_oom");
    o->global_oom = g && g < stop && (g[11] == ',' || g[11] == 0 || g[11] == ' ' || g[11] == '\n');
    return 1;
}

/* "Killed process N (COMM) total-vm:..kB, anon-rss:..kB, file-rss:..kB, shmem-rss:..kB, UID:U
 * pgtables:..", or the older "Kill process N (COMM) score S or sacrifice child". The comm is
 * between the first "(" and the ")" of the last ") total-vm:" (or ") score "): what follows it is
 * the kernel's. */
static int oom_kill(const char *k, size_t kl, struct kline_oom *o)
{
    const char *p = k + kl;
    o->pid = number_at(p, " ");
    if (o->pid < 0)
        return 0;
    o->kind = kl == 15 ? KLINE_OOM_KILLED : KLINE_OOM_KILL;
    const char *open = strchr(p, ' ');
    if (!open || strncmp(open, " (", 2))
        return 1;
    const char *end = open + strlen(open);
    const char *close = last_in(open, end, kl == 15 ? ") total-vm:" : ") score ");
    if (!close)
        close = last_in(open, end, ")");
    if (close && close - open - 2 < (long)sizeof(o->comm)) {
        span(o->comm, sizeof(o->comm), open + 2, close);
        o->have_comm = 1;
    }
    const char *rest = close ? close : open;
    o->total_vm_kib = kib_after(rest, "total-vm:");
    o->anon_rss_kib = kib_after(rest, "anon-rss:");
    const char *u = strstr(rest, ", UID:");
    o->uid = u ? number_at(u + 6, " ,\n") : -1;
    return 1;
}

int kline_oom(const char *text, struct kline_oom *o)
{
    memset(o, 0, sizeof(*o));
    o->pid = o->uid = -1;
    o->total_vm_kib = o->anon_rss_kib = -1;
    const char *p;
    if ((p = strstr(text, "Task in ")) && strstr(p, " killed as a result of limit of ")) {
        const char *a = p + 8, *e = strstr(a, " killed as a result of limit of ");
        span(o->task_memcg, sizeof(o->task_memcg), a, e);
        span(o->oom_memcg, sizeof(o->oom_memcg), e + 32, e + 32 + strlen(e + 32));
        o->kind = KLINE_OOM_TASK_IN;
        return 1;
    }
    if ((p = strstr(text, "oom-kill:")))
        return oom_list(p + 9, o);
    o->scope_hint = strstr(text, "Memory cgroup out of memory") ? 1
                    : strstr(text, "Out of memory")             ? 2
                                                                : 0;
    const char *k = strstr(text, "Killed process ");
    size_t kl = 15;
    if (!k && (k = strstr(text, "Kill process ")))
        kl = 13;
    return k ? oom_kill(k, kl, o) : 0;
}
