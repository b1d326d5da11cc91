/* xid.c - Xid kernel-log lines and the Xid catalogue (see xid.h). */
#include "xid.h"

#include "datadir.h"
#include "errmsg.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XID_CATALOG_MAX (4u << 20)

int xid_pci_normalize(const char *in, char *out, size_t len)
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
    while (n && (dst[n - 1] == ' ' || dst[n - 1] == '\n' || dst[n - 1] == '\t' || dst[n - 1] == '\r'))
        dst[--n] = 0;
}

static void ev_init(struct xid_event *ev)
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

static int parse_xid(const char *p, struct xid_event *ev)
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
    xid_pci_normalize(inner, ev->pci, sizeof(ev->pci));
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
    return xid_pci_normalize(tok, out, len);
}

int xid_parse(struct xid_ctx *ctx, const char *line, struct xid_event *ev)
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
    ev->code = XID_BUSLOST;
    ev->implied = 1;
    snprintf(ev->pci, sizeof(ev->pci), "%s", pci);
    copy_span(ev->text, sizeof(ev->text), nv + 5 + strspn(nv + 5, " "), strlen(nv + 5 + strspn(nv + 5, " ")));
    return 1;
}

cJSON *xid_catalog_load(char *err, size_t errlen)
{
    size_t n;
    char path[4096];
    char *buf = cp_data_read("rules/gpu/xid.json", "Xid catalogue", XID_CATALOG_MAX, &n, path,
                             sizeof(path), err, errlen);
    if (!buf)
        return NULL;
    cJSON *j = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!cJSON_IsObject(j) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "xids"))) {
        cJSON_Delete(j);
        cp_errmsg(err, errlen, "%s: not a JSON object with \"xids\"", path);
        return NULL;
    }
    return j;
}

const cJSON *xid_catalog_entry(const cJSON *cat, int code)
{
    char k[16];
    snprintf(k, sizeof(k), "%d", code);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cat, "xids"), k);
    return cJSON_IsObject(e) ? e : NULL;
}
