/* evidence.c - decoding the bundle's GPU / kernel-log / log / checkpoint evidence into the report
 * (see evidence.h and docs/evidence.md). */
#include "evidence.h"
#include "jpath.h"

#include "checkpoint.h"
#include "errmsg.h"
#include "gpu_smi.h"
#include "logerr.h"
#include "xid.h"

#include <fcntl.h>
#include <strings.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#define JSON_MEMBER_MAX (16u << 20)
#define LOG_TAIL_MAX (16u << 20)
#define OUTPUT_MEMBER "output.txt" /* the output tail a supervisor forwarded (issue 13) */
#define MAX_OWN_GPUS 64
#define MAX_OWN_TIDS 256
#define MAX_LOG_ERRORS 200
#define MAX_XIDS 1000
#define BUSLOST_DEDUP_S 60.0 /* an implied Xid 79 this close after an explicit one is the same event */

struct own {
    char pci[MAX_OWN_GPUS][32];
    int n;
    int known; /* the bundle says which GPUs the process had (possibly none) */
    int none;  /* it is known to use no GPU: no /dev/nvidia* open, none visible */
    char why[300]; /* why its GPUs are unknown, or how they are known */
    char uuid[MAX_OWN_GPUS][96]; /* CUDA_VISIBLE_DEVICES=GPU-<uuid> (and the open GPUs' UUIDs) */
    int nuuid;
    double pids[16]; /* process.pid and its NSpid values: kernel-log pids are the host's */
    int npids;
    double tids[MAX_OWN_TIDS]; /* its threads (proc/threads.json: the host's tids) */
    int ntids;
    double start; /* the process's start (wall clock), -1: unknown */
};

static void own_add(struct own *o, const char *pci)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->pci[i], pci))
            return;
    if (o->n < MAX_OWN_GPUS)
        snprintf(o->pci[o->n++], sizeof(o->pci[0]), "%s", pci);
}

static int own_has(const struct own *o, const char *pci)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->pci[i], pci))
            return 1;
    return 0;
}

static void own_add_uuid(struct own *o, const char *u)
{
    for (int i = 0; i < o->nuuid; i++)
        if (!strcasecmp(o->uuid[i], u))
            return;
    if (o->nuuid < MAX_OWN_GPUS && strlen(u) < sizeof(o->uuid[0]))
        snprintf(o->uuid[o->nuuid++], sizeof(o->uuid[0]), "%s", u);
}

static int own_has_uuid(const struct own *o, const char *u)
{
    for (int i = 0; u && i < o->nuuid; i++)
        if (!strcasecmp(o->uuid[i], u))
            return 1;
    return 0;
}

static int own_pid(const struct own *o, double pid)
{
    for (int i = 0; i < o->npids; i++)
        if (o->pids[i] == pid)
            return 1;
    return 0;
}

/* The pid a kernel line names is this process or one of its threads. */
static int own_pid_or_tid(const struct own *o, double pid)
{
    for (int i = 0; i < o->ntids; i++)
        if (o->tids[i] == pid)
            return 1;
    return own_pid(o, pid);
}

static cJSON *read_json_member(struct bundle *b, const char *name)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = bundle_read_all(b, name, JSON_MEMBER_MAX, &buf, &len);
    cJSON *j = rc == BUNDLE_OK ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* A valid-UTF-8 string item for a string from the bundle. */
static cJSON *cstr(const char *v)
{
    size_t l = strlen(v), cap = l * 3 + 1;
    char *c = malloc(cap);
    if (!c)
        return cJSON_CreateString("");
    logerr_clean_utf8(c, cap, v, l, 1);
    cJSON *o = cJSON_CreateString(c);
    free(c);
    return o;
}

static void add_s(cJSON *o, const char *key, const char *v)
{
    cJSON_AddItemToObject(o, key, v ? cstr(v) : cJSON_CreateNull());
}

static cJSON *obj(cJSON *r, const char *key)
{
    cJSON *o = cJSON_GetObjectItemCaseSensitive(r, key);
    if (!cJSON_IsObject(o)) {
        o = cJSON_CreateObject();
        cp_json_set(r, key, o);
    }
    return o;
}

static void utc(double t, char *buf, size_t len)
{
    time_t s = (time_t)t;
    struct tm tm;
    buf[0] = 0;
    if (t >= 0 && t < 1e11 && gmtime_r(&s, &tm))
        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- the process's GPUs: gpu.json ---- */

/* CUDA_VISIBLE_DEVICES is empty, -1 or otherwise names no device */
static int cvd_none(const char *v)
{
    return v && (!*v || !strcmp(v, "-1") || !strcasecmp(v, "none") || !strcasecmp(v, "void") ||
                 !strcasecmp(v, "NoDevFiles"));
}

/* What gpu.json says about the devices the process had open. */
struct gpu_open {
    int nv_open;  /* /dev/nvidia* files it had open */
    int gpu_open; /* of them, GPUs (/dev/nvidia<N>) */
    int mapped;   /* GPUs the driver's files map to a PCI address it had open */
};

/* Counts the process's open NVIDIA devices (process_devices) and adds the GPUs it had open
 * (gpus[].open_by_process) to own, with their UUIDs. */
static void own_open_gpus(struct own *own, const cJSON *gpus, const cJSON *pdev, struct gpu_open *c)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, pdev)
    {
        const char *k = cp_jstr(e, "kind");
        c->nv_open++;
        if (k && !strcmp(k, "gpu"))
            c->gpu_open++;
    }
    cJSON_ArrayForEach(e, gpus)
    {
        char pci[32];
        const char *p = cp_jstr(e, "pci");
        if (p && cJSON_IsTrue(cp_jkey(e, "open_by_process")) &&
            kline_pci_normalize(p, pci, sizeof(pci)) == 0) {
            own_add(own, pci);
            c->mapped++;
            if (cp_jstr(e, "uuid"))
                own_add_uuid(own, cp_jstr(e, "uuid"));
        }
    }
}

/* Adds the GPUs that CUDA_VISIBLE_DEVICES (cvd) names by UUID to own, with their PCI addresses
 * from gpus (indices are relative to what a container sees: not used). Returns how many. */
static int own_cvd_uuids(struct own *own, const cJSON *gpus, const char *cvd)
{
    const cJSON *e;
    int cvd_uuids = 0;
    for (const char *q = cvd; q && *q;) {
        size_t l = strcspn(q, ",");
        char tok[96];
        snprintf(tok, sizeof(tok), "%.*s", (int)(l < 95 ? l : 95), q);
        char *t = tok;
        while (*t == ' ')
            t++;
        if (!strncmp(t, "GPU-", 4) || !strncmp(t, "MIG-", 4)) {
            own_add_uuid(own, t);
            cvd_uuids++;
            cJSON_ArrayForEach(e, gpus)
            {
                char pci[32];
                const char *u = cp_jstr(e, "uuid"), *p = cp_jstr(e, "pci");
                if (u && p && !strcasecmp(u, t) && kline_pci_normalize(p, pci, sizeof(pci)) == 0)
                    own_add(own, pci);
            }
        }
        q += l;
        if (*q == ',')
            q++;
    }
    return cvd_uuids;
}

/* The GPUs a supervisor saw the process use while it lived (crashpack run's process.json "gpu":
 * its /dev/nvidia* descriptors, looked at while it ran), for a bundle written after it ended:
 * each GPU device's minor mapped to its PCI address through gpu.json's gpus[]. */
static void own_recorded_gpus(struct own *own, const cJSON *gpus, const cJSON *rec,
                              struct gpu_open *c)
{
    const cJSON *e, *g;
    cJSON_ArrayForEach(e, cp_jkey(rec, "devices"))
    {
        const char *k = cp_jstr(e, "kind");
        double minor = -1, gm = -2;
        c->nv_open++;
        if (!k || strcmp(k, "gpu") || !cp_jnum(e, "minor", &minor))
            continue;
        c->gpu_open++;
        cJSON_ArrayForEach(g, gpus)
        {
            char pci[32];
            const char *p = cp_jstr(g, "pci");
            if (cp_jnum(g, "minor", &gm) && gm == minor && p &&
                kline_pci_normalize(p, pci, sizeof(pci)) == 0) {
                own_add(own, pci);
                c->mapped++;
                if (cp_jstr(g, "uuid"))
                    own_add_uuid(own, cp_jstr(g, "uuid"));
            }
        }
    }
}

static void own_from_gpu_json(struct bundle *b, struct own *own, const cJSON *pj)
{
    cJSON *g = read_json_member(b, "gpu.json");
    if (!g) {
        snprintf(own->why, sizeof(own->why), "%s",
                 bundle_find(b, "gpu.json")
                     ? "gpu.json is unreadable"
                     : "the bundle has no gpu.json (no driver files captured)");
        return;
    }
    const cJSON *gpus = cp_jkey(g, "gpus");
    const cJSON *pdev = cp_jkey(g, "process_devices");
    /* the supervisor's record when the process is gone: only when it looked at least once */
    const cJSON *rec = cp_jkey(pj, "gpu");
    double looks = 0;
    int recorded = !cJSON_IsArray(pdev) && cJSON_IsArray(cp_jkey(rec, "devices")) &&
                   cp_jnum(rec, "looks", &looks) && looks >= 1;
    struct gpu_open c = {0, 0, 0};
    if (recorded) {
        own_recorded_gpus(own, gpus, rec, &c);
        pdev = cp_jkey(rec, "devices");
    } else {
        own_open_gpus(own, gpus, pdev, &c);
    }
    const char *cvd = cp_jstr(g, "cuda_visible_devices");
    if (!cvd && recorded) /* the process's environment as the supervisor recorded it */
        cvd = cp_jstr(cp_jkey(pj, "environ"), "CUDA_VISIBLE_DEVICES");
    int cvd_uuids = own_cvd_uuids(own, gpus, cvd);
    int driver = cJSON_IsTrue(cp_jkey(cp_jkey(g, "driver"), "present"));
    if (!cJSON_IsArray(pdev)) {
        snprintf(own->why, sizeof(own->why), "the process's open files were not read");
        if (own->n || cvd_uuids)
            own->known = 1;
    } else if (c.gpu_open > c.mapped && !own->n && !cvd_uuids) {
        snprintf(
            own->why, sizeof(own->why),
            "the process had %d /dev/nvidia<N> open but the driver's files (/proc/driver/nvidia) "
            "do not say which GPU%s",
            c.gpu_open, c.gpu_open > 1 ? "s" : "");
    } else {
        own->known = 1;
        if (!c.nv_open && !cvd_uuids &&
            (!driver || cJSON_GetArraySize(gpus) == 0 || cvd_none(cvd) || recorded)) {
            own->none = 1;
            snprintf(own->why, sizeof(own->why),
                     "the process opened no /dev/nvidia*%s and none is visible to it%s",
                     recorded ? " while crashpack run watched it" : "",
                     !driver ? " (no NVIDIA driver on this host)" : "");
        } else if (!c.gpu_open && !cvd_uuids) {
            snprintf(own->why, sizeof(own->why), "the process opened no /dev/nvidia<N>");
        } else {
            snprintf(own->why, sizeof(own->why), "%s%s%s",
                     c.gpu_open ? "the /dev/nvidia<N> it had open" : "",
                     c.gpu_open && cvd_uuids ? " and " : "",
                     cvd_uuids ? "CUDA_VISIBLE_DEVICES (by UUID)" : "");
        }
    }
    cJSON_Delete(g);
}

/* ---- nvidia-smi ---- */

#define SMI_GPU_PREFIX "nvidia-smi/"

/* The per-GPU outputs (nvidia-smi/<pci>.xml, one `nvidia-smi -q -x -i <pci>` each, written when a
 * GPU of the host was known lost) merged into one object; NULL when there is none. */
static cJSON *smi_per_gpu(struct bundle *b, char *err, size_t errlen)
{
    cJSON *all = NULL;
    size_t pl = strlen(SMI_GPU_PREFIX);
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        size_t nl = strlen(m->name);
        if (strncmp(m->name, SMI_GPU_PREFIX, pl) || nl < pl + 5 || strcmp(m->name + nl - 4, ".xml"))
            continue;
        char *buf = NULL;
        size_t len = 0;
        char e[300] = "";
        cJSON *one = NULL;
        if (bundle_read_all(b, m->name, GPU_SMI_MAX, &buf, &len) == BUNDLE_OK)
            one = gpu_smi_parse(buf, len, e, sizeof(e));
        free(buf);
        if (!one) {
            if (!all)
                cp_errmsg(err, errlen, "%s unparsable: %s", m->name, e);
            continue;
        }
        if (!all) {
            all = one;
            continue;
        }
        cJSON *gs = cJSON_GetObjectItemCaseSensitive(all, "gpus"), *g;
        cJSON *more = cJSON_DetachItemFromObjectCaseSensitive(one, "gpus");
        while (more && (g = cJSON_DetachItemFromArray(more, 0)))
            cJSON_AddItemToArray(gs, g);
        cJSON_Delete(more);
        cJSON_Delete(one);
    }
    if (all)
        cp_json_set(all, "attached_gpus",
                    cJSON_CreateNumber(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(all, "gpus"))));
    return all;
}

/* nvidia-smi.json's per-GPU record (which GPUs answered, hung, or were skipped as lost) */
static void smi_queries(cJSON *gpu, struct bundle *b)
{
    cJSON *j = bundle_find(b, "nvidia-smi.json") ? read_json_member(b, "nvidia-smi.json") : NULL;
    const cJSON *q = cp_jkey(j, "gpus"), *e;
    cJSON *out = cJSON_CreateArray();
    cJSON_ArrayForEach(e, q)
    {
        cJSON *o = cJSON_CreateObject();
        add_s(o, "pci", cp_jstr(e, "pci"));
        add_s(o, "status", cp_jstr(e, "status") ? cp_jstr(e, "status") : "unknown");
        add_s(o, "reason", cp_jstr(e, "reason"));
        cJSON_AddItemToArray(out, o);
    }
    cJSON_Delete(j);
    cp_json_set(gpu, "nvidia_smi_queries", out);
}

static void add_smi(cJSON *r, struct bundle *b, double pid, int have_pid, struct own *own)
{
    (void)pid;
    (void)have_pid;
    cJSON *gpu = obj(r, "gpu");
    char err[400] = "";
    cJSON *smi = NULL;
    if (bundle_find(b, "nvidia-smi.xml")) {
        char *buf = NULL;
        size_t len = 0;
        int rc = bundle_read_all(b, "nvidia-smi.xml", GPU_SMI_MAX, &buf, &len);
        if (rc == BUNDLE_OK)
            smi = gpu_smi_parse(buf, len, err, sizeof(err));
        else if (rc == BUNDLE_ETOOBIG)
            cp_errmsg(err, sizeof(err), "nvidia-smi.xml is over %u MiB: not read",
                      GPU_SMI_MAX >> 20);
        else
            cp_errmsg(err, sizeof(err), "nvidia-smi.xml unreadable: %s",
                      rc == BUNDLE_ETRUNC ? "cut short in this bundle" : bundle_strerror(rc));
        free(buf);
        if (!smi && strncmp(err, "nvidia-smi.xml", 14)) {
            char e2[440];
            snprintf(e2, sizeof(e2), "unparsable: %s", err);
            snprintf(err, sizeof(err), "%s", e2);
        }
    } else if ((smi = smi_per_gpu(b, err, sizeof(err)))) {
        /* nvidia-smi -i per GPU: the GPUs that answered, merged */
    } else if (bundle_find(b, "nvidia-smi.json")) {
        cJSON *j = read_json_member(b, "nvidia-smi.json");
        const char *st = cp_jstr(j, "status"), *why = cp_jstr(j, "reason");
        cp_errmsg(err, sizeof(err), "%s%s%s", st ? st : "failed", why ? ": " : "",
                  why ? why : "");
        cJSON_Delete(j);
    } else {
        cp_errmsg(err, sizeof(err), "absent: the bundle has no nvidia-smi output");
    }
    smi_queries(gpu, b);
    if (!smi) {
        cp_json_set(gpu, "nvidia_smi", cJSON_CreateNull());
        cp_json_set(gpu, "nvidia_smi_error", cstr(err));
        return;
    }
    /* own: the GPUs running this pid (nvidia-smi's processes) or open by it (gpu.json) */
    cJSON *g;
    cJSON_ArrayForEach(g, cp_jkey(smi, "gpus"))
    {
        int mine = 0;
        const cJSON *p;
        double pp;
        cJSON_ArrayForEach(p, cp_jkey(g, "processes"))
        {
            if (cp_jnum(p, "pid", &pp) && own_pid(own, pp))
                mine = 1;
        }
        const char *pci = cp_jstr(g, "pci");
        if (own_has_uuid(own, cp_jstr(g, "uuid")))
            mine = 1;
        if (mine && pci) {
            own_add(own, pci);
            own->known = 1;
            if (own->none) { /* nvidia-smi lists it on this GPU: it does use one */
                own->none = 0;
                snprintf(own->why, sizeof(own->why), "%s", "nvidia-smi's process list");
            }
        }
        if (pci && own_has(own, pci))
            mine = 1;
        cJSON_ReplaceItemInObjectCaseSensitive(g, "own", cJSON_CreateBool(mine));
    }
    cp_json_set(gpu, "nvidia_smi", smi);
    cp_json_set(gpu, "nvidia_smi_error", cJSON_CreateNull());
}

/* ---- kernel log and Xids ---- */

static int by_time(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    double tx = -1, ty = -1;
    cp_jnum(x, "time", &tx);
    cp_jnum(y, "time", &ty);
    double sx = 0, sy = 0;
    cp_jnum(x, "_seq", &sx);
    cp_jnum(y, "_seq", &sy);
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return sx < sy ? -1 : sx > sy;
}

static cJSON *xid_object(const struct kline_xid *ev, double t, int have_t, const char *source,
                         const cJSON *cat, double pid, int have_pid, const struct own *own)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "code", ev->code);
    if (ev->pci[0])
        cJSON_AddStringToObject(o, "pci", ev->pci);
    else
        cJSON_AddNullToObject(o, "pci");
    if (ev->gpu_instance >= 0)
        cJSON_AddNumberToObject(o, "gpu_instance", ev->gpu_instance);
    if (ev->has_pid)
        cJSON_AddNumberToObject(o, "pid", (double)ev->pid);
    else
        cJSON_AddNullToObject(o, "pid");
    if (ev->name[0])
        add_s(o, "name", ev->name);
    else
        cJSON_AddNullToObject(o, "name");
    add_s(o, "text", ev->text);
    char u[40];
    if (have_t) {
        cJSON_AddNumberToObject(o, "time", t);
        utc(t, u, sizeof(u));
        cJSON_AddStringToObject(o, "time_utc", u);
    } else {
        cJSON_AddNullToObject(o, "time");
        cJSON_AddNullToObject(o, "time_utc");
    }
    const cJSON *e = xid_catalog_entry(cat, ev->code);
    const char *meaning = e ? cp_jstr(e, "meaning") : NULL;
    const char *blame = e ? cp_jstr(e, "blame") : NULL;
    const char *action = e ? cp_jstr(e, "action") : NULL;
    cJSON_AddStringToObject(o, "meaning", meaning ? meaning : "Xid not in the catalogue");
    cJSON_AddStringToObject(o, "blame", blame ? blame : "unknown");
    cJSON_AddStringToObject(o, "action", action ? action : "none");
    if (e && cp_jstr(e, "mnemonic"))
        cJSON_AddStringToObject(o, "mnemonic", cp_jstr(e, "mnemonic"));
    (void)pid;
    (void)have_pid;
    int opid = ev->has_pid && own_pid_or_tid(own, (double)ev->pid);
    int ogpu = -1; /* unknown */
    if (ev->pci[0] && (own->known || own->n))
        ogpu = own_has(own, ev->pci);
    else if (own->none)
        ogpu = 0;
    if (ogpu < 0)
        cJSON_AddNullToObject(o, "own_gpu");
    else
        cJSON_AddBoolToObject(o, "own_gpu", ogpu);
    cJSON_AddBoolToObject(o, "own_pid", opid);
    /* own: it names this process or one of its GPUs; other: it names neither, and the process's
     * GPUs are known; unscoped: which GPUs the process used is not known */
    cJSON_AddStringToObject(o, "scope", opid || ogpu == 1 ? "own" : ogpu == 0 ? "other" : "unscoped");
    if (ev->caused_by >= 0)
        cJSON_AddNumberToObject(o, "caused_by", ev->caused_by);
    else
        cJSON_AddNullToObject(o, "caused_by");
    cJSON_AddBoolToObject(o, "implied", ev->implied);
    cJSON_AddStringToObject(o, "source", source);
    return o;
}

/* 1 when `list` has an explicit Xid 79 on pci at most BUSLOST_DEDUP_S before t */
static int explicit_buslost(const cJSON *list, const char *pci, double t, int have_t)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, list)
    {
        double c = 0, tx = 0;
        const char *p = cp_jstr(x, "pci");
        if (!cp_jnum(x, "code", &c) || c != KLINE_XID_BUSLOST || cJSON_IsTrue(cp_jkey(x, "implied")))
            continue;
        if (pci[0] && (!p || strcmp(p, pci)))
            continue;
        int ht = cp_jnum(x, "time", &tx);
        if (!have_t || !ht || (t >= tx && t - tx <= BUSLOST_DEDUP_S))
            return 1;
    }
    return 0;
}


/* ---- OOM kills: kernel_log.oom_kills[] ---- */

#define MAX_OOM_KILLS 64

/* the entry for pid (the last one), or a new one */
static cJSON *oom_entry(cJSON *kills, double pid, const char *text, double t, int have_t)
{
    cJSON *k, *found = NULL;
    cJSON_ArrayForEach(k, kills)
    {
        double p;
        if (cp_jnum(k, "pid", &p) && p == pid)
            found = k;
    }
    if (found || cJSON_GetArraySize(kills) >= MAX_OOM_KILLS)
        return found;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", pid);
    cJSON_AddNullToObject(o, "comm");
    cJSON_AddNullToObject(o, "scope");
    cJSON_AddNullToObject(o, "constraint");
    cJSON_AddNullToObject(o, "oom_memcg");
    cJSON_AddNullToObject(o, "task_memcg");
    if (have_t) {
        char u[40];
        utc(t, u, sizeof(u));
        cJSON_AddNumberToObject(o, "time", t);
        cJSON_AddStringToObject(o, "time_utc", u);
    } else {
        cJSON_AddNullToObject(o, "time");
        cJSON_AddNullToObject(o, "time_utc");
    }
    add_s(o, "text", text);
    cJSON_AddItemToArray(kills, o);
    return o;
}

static void set_s(cJSON *o, const char *key, const char *v)
{
    if (v && *v)
        cp_json_set(o, key, cstr(v));
}

struct oom_state {
    char pending_task[512], pending_limit[512]; /* "Task in X killed as a result of limit of Y" */
    int hint;                                   /* the last "...out of memory:" prefix: 1 cgroup, 2 host */
};

/* One kernel line of the OOM killer (common/kline.h parses it): its kill, or the constraint and
 * cgroups of the kill its next line reports, or the older kernels' "Task in" line, which the next
 * kill line inherits. */
static void oom_line(cJSON *kills, struct oom_state *st, const char *text, double t, int have_t)
{
    struct kline_oom k;
    int is_oom = kline_oom(text, &k);
    if (k.scope_hint)
        st->hint = k.scope_hint;
    if (!is_oom)
        return;
    if (k.kind == KLINE_OOM_TASK_IN) {
        snprintf(st->pending_task, sizeof(st->pending_task), "%s", k.task_memcg);
        snprintf(st->pending_limit, sizeof(st->pending_limit), "%s", k.oom_memcg);
        return;
    }
    cJSON *o = oom_entry(kills, (double)k.pid, text, t, have_t);
    if (!o)
        return;
    if (k.kind == KLINE_OOM_LIST) {
        if (k.have_constraint)
            set_s(o, "constraint", k.constraint);
        if (k.have_oom_memcg)
            set_s(o, "oom_memcg", k.oom_memcg);
        if (k.have_task_memcg)
            set_s(o, "task_memcg", k.task_memcg);
        if (k.have_comm)
            set_s(o, "comm", k.comm);
        if (k.uid >= 0)
            cp_json_set(o, "uid", cJSON_CreateNumber((double)k.uid));
        if (k.global_oom)
            cp_json_set(o, "global_oom", cJSON_CreateTrue());
        return;
    }
    if (k.have_comm && !cp_jstr(o, "comm"))
        set_s(o, "comm", k.comm);
    if (k.kind == KLINE_OOM_KILLED) /* the kill itself: its line is the one to show */
        cp_json_set(o, "text", cstr(text));
    if (k.total_vm_kib >= 0)
        cp_json_set(o, "total_vm_kib", cJSON_CreateNumber(k.total_vm_kib));
    if (k.anon_rss_kib >= 0)
        cp_json_set(o, "anon_rss_kib", cJSON_CreateNumber(k.anon_rss_kib));
    if (k.scope_hint)
        cp_json_set(o, "_hint", cJSON_CreateNumber(k.scope_hint));
    if (st->pending_limit[0] && !cp_jstr(o, "oom_memcg")) {
        set_s(o, "oom_memcg", st->pending_limit);
        set_s(o, "task_memcg", st->pending_task);
    }
    st->pending_limit[0] = st->pending_task[0] = 0;
}

/* An OOM kill is a cause of this death for the minutes around it: a DataLoader worker's kill is
 * seen by the main process within seconds, a supervisor's report within a minute or two. One from
 * hours earlier (the same pid number reused, or the cgroup's last job) is context. */
#define OOM_WINDOW_S 600.0

/* scope: which limit the kill enforced; own_pid; its window around the crash (host.time) */
static void oom_finish(cJSON *kills, const cJSON *r, double pid, int have_pid, const struct own *own)
{
    double ct = -1;
    int have_ct = cp_jnum(cp_jkey(r, "host"), "time", &ct) && ct > 0;
    cJSON *k;
    cJSON_ArrayForEach(k, kills)
    {
        const char *c = cp_jstr(k, "constraint");
        double hint = 0, p = -1;
        cp_jnum(k, "_hint", &hint);
        const char *scope = NULL;
        if ((c && !strcmp(c, "CONSTRAINT_MEMCG")) || (!c && cp_jstr(k, "oom_memcg")) || (!c && hint == 1))
            scope = "cgroup";
        else if (cJSON_IsTrue(cp_jkey(k, "global_oom")) || (c && !strcmp(c, "CONSTRAINT_NONE")) ||
                 (!c && hint == 2))
            scope = "global";
        else if (c && !strcmp(c, "CONSTRAINT_CPUSET"))
            scope = "cpuset";
        else if (c && !strcmp(c, "CONSTRAINT_MEMORY_POLICY"))
            scope = "mempolicy";
        cp_json_set(k, "scope", scope ? cJSON_CreateString(scope) : NULL);
        if (!strcmp(scope ? scope : "", "global"))
            cJSON_DeleteItemFromObjectCaseSensitive(k, "oom_memcg");
        cJSON_DeleteItemFromObjectCaseSensitive(k, "_hint");
        cJSON_DeleteItemFromObjectCaseSensitive(k, "global_oom");
        cp_jnum(k, "pid", &p);
        cp_json_set(k, "own_pid", cJSON_CreateBool((have_pid && p == pid) || own_pid(own, p)));
        double t = -1;
        int have_t = cp_jnum(k, "time", &t);
        cp_json_set(k, "window_s", cJSON_CreateNumber(OOM_WINDOW_S));
        cp_json_set(k, "age_s", have_ct && have_t ? cJSON_CreateNumber(floor(ct - t)) : cJSON_CreateNull());
        /* no time on either side: it cannot be placed, so it is not ruled out */
        int active = !(have_ct && have_t) || (t >= ct - OOM_WINDOW_S && t <= ct + 60);
        cp_json_set(k, "active", cJSON_CreateBool(active));
    }
}

/* kernel_log.node_gpu_events[]: the node service's record of this host's GPU events of the day
 * before the capture (node-gpu-events.json: each Xid or bus-loss line when the agent saw it, with
 * nvidia-smi at that moment). Host context, never a cause by itself: the causes are the kernel
 * lines of kmsg.json, scoped to the process and its GPUs. */
#define MAX_NODE_EVENTS 64
static void add_node_events(cJSON *kl, struct bundle *b)
{
    cJSON *arr = cJSON_CreateArray();
    cp_json_set(kl, "node_gpu_events", arr);
    cJSON *k = read_json_member(b, "node-gpu-events.json");
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, cp_jkey(k, "events"))
    {
        const char *line = cp_jstr(e, "line");
        double t = 0;
        if (!line || !cp_jnum(e, "time", &t) || n++ == MAX_NODE_EVENTS)
            continue;
        cJSON *o = cJSON_CreateObject();
        char u[40];
        cJSON_AddNumberToObject(o, "time", t);
        utc(t, u, sizeof(u));
        add_s(o, "time_utc", u);
        add_s(o, "line", line);
        add_s(o, "nvidia_smi", cp_jstr(e, "nvidia_smi"));
        add_s(o, "nvidia_smi_error", cp_jstr(e, "nvidia_smi_error"));
        cJSON_AddItemToArray(arr, o);
    }
    cJSON_Delete(k);
}

/* One line of kmsg.json as kernel_log.lines[] shows it: time, class, text, source and the code of
 * its Xid (ev, or NULL when it is none; an implied one is a bus loss). */
static cJSON *kmsg_line(const cJSON *l, const char *text, double t, int have_t, const char *src,
                        const struct kline_xid *ev)
{
    cJSON *o = cJSON_CreateObject();
    if (have_t) {
        char u[40];
        cJSON_AddNumberToObject(o, "time", t);
        const char *tu = cp_jstr(l, "time_utc");
        if (!tu) {
            utc(t, u, sizeof(u));
            tu = u;
        }
        add_s(o, "time_utc", tu);
    } else {
        cJSON_AddNullToObject(o, "time");
        cJSON_AddNullToObject(o, "time_utc");
    }
    const char *cls = cp_jstr(l, "class");
    add_s(o, "class", cls ? cls : "other");
    add_s(o, "text", text);
    cJSON_AddStringToObject(o, "source", src);
    if (ev && !ev->implied)
        cJSON_AddNumberToObject(o, "xid", ev->code);
    else if (ev)
        cJSON_AddNumberToObject(o, "xid", KLINE_XID_BUSLOST);
    else
        cJSON_AddNullToObject(o, "xid");
    return o;
}

/* Puts the Xids in time order (kern.log lines may come after the ring's), equal times in the order
 * they were read (_seq, removed). */
static void xids_by_time(cJSON *xids)
{
    int cnt = cJSON_GetArraySize(xids);
    if (cnt > 1) {
        cJSON **v = malloc(sizeof(*v) * (size_t)cnt);
        if (v) {
            for (int i = 0; i < cnt; i++)
                v[i] = cJSON_DetachItemFromArray(xids, 0);
            qsort(v, (size_t)cnt, sizeof(*v), by_time);
            for (int i = 0; i < cnt; i++)
                cJSON_AddItemToArray(xids, v[i]);
            free(v);
        }
    }
    cJSON *x;
    cJSON_ArrayForEach(x, xids) cJSON_DeleteItemFromObjectCaseSensitive(x, "_seq");
}

static void add_kmsg(cJSON *r, struct bundle *b, const cJSON *k, const cJSON *cat, double pid,
                     int have_pid, const struct own *own)
{
    cJSON *kl = obj(r, "kernel_log");
    add_node_events(kl, b);
    cJSON *lines = cJSON_CreateArray();
    cp_json_set(kl, "lines", lines);
    cJSON *gpu = obj(r, "gpu");
    cJSON *xids = cJSON_CreateArray();
    cJSON *kills = cJSON_CreateArray();
    cp_json_set(kl, "oom_kills", kills);
    struct oom_state ost;
    memset(&ost, 0, sizeof(ost));
    if (!k) {
        cp_json_set(kl, "error", cJSON_CreateString(bundle_find(b, "kmsg.json")
                                                ? "kmsg.json unreadable"
                                                : "absent: the bundle has no kmsg.json"));
        cp_json_set(gpu, "xid", xids);
        return;
    }
    cp_json_set(kl, "error", cJSON_CreateNull());
    const cJSON *l;
    struct kline_xid_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    size_t n = 0, seq = 0;
    cJSON_ArrayForEach(l, cp_jkey(k, "lines"))
    {
        const char *text = cp_jstr(l, "text");
        if (!text)
            continue;
        double t = 0;
        int have_t = cp_jnum(l, "time", &t);
        const char *src = cp_jstr(l, "source");
        if (!src || (strcmp(src, "kmsg") && strcmp(src, "kern.log")))
            src = "kmsg";
        struct kline_xid ev;
        int is_xid = kline_xid_parse(&ctx, text, &ev);
        cJSON *o = kmsg_line(l, text, t, have_t, src, is_xid ? &ev : NULL);
        cJSON_AddItemToArray(lines, o);
        oom_line(kills, &ost, text, t, have_t);
        if (is_xid && n < MAX_XIDS) {
            if (ev.implied && explicit_buslost(xids, ev.pci, t, have_t))
                continue;
            cJSON *x = xid_object(&ev, t, have_t, src, cat, pid, have_pid, own);
            add_s(x, "line", text); /* the kernel's line, verbatim */
            cJSON_AddStringToObject(o, "scope", cp_jstr(x, "scope"));
            cJSON_AddNumberToObject(x, "_seq", (double)seq++);
            cJSON_AddItemToArray(xids, x);
            n++;
        }
    }
    oom_finish(kills, r, pid, have_pid, own);
    xids_by_time(xids);
    cp_json_set(gpu, "xid", xids);
}

/* The window an Xid stays a possible cause, by kind: a GPU that fell off the bus is broken until
 * it is reset, so until nvidia-smi of this bundle answers for it; an application-class fault
 * (Xid 13, 31, 43, 45, ...) is the moments before the crash; the rest an hour. */
#define XID_APP_WINDOW_S 300.0
#define XID_HW_WINDOW_S 3600.0

static int smi_answered(const cJSON *r, const char *pci)
{
    const cJSON *g;
    cJSON_ArrayForEach(g, cp_jpath(r, "gpu.nvidia_smi.gpus"))
    {
        const char *p = cp_jstr(g, "pci");
        if (p && pci && !strcmp(p, pci))
            return 1;
    }
    return 0;
}

/* One Xid of gpu.xid[] and the crash's time. */
struct xid_at {
    double code, t; /* its code and time */
    int have_t;
    const char *pci; /* its GPU, or NULL */
    double ct;       /* the crash (host.time) */
    int have_ct;
};

/* Adds the Xid's window_s, age_s and active to x: whether it is still a possible cause, and when
 * not, why (into why). Returns active. */
static int xid_active(cJSON *x, const cJSON *r, const struct xid_at *a, char *why, size_t whylen)
{
    const char *blame = cp_jstr(x, "blame");
    int active = 1, have_both = a->have_ct && a->have_t;
    if (a->code == KLINE_XID_BUSLOST) {
        cJSON_AddNullToObject(x, "window_s");
        /* broken until a reset: only a GPU that answers nvidia-smi again, past the hardware
         * window, has been seen healthy (a same-minute answer is not a repair) */
        if (a->pci && smi_answered(r, a->pci) && have_both && a->t < a->ct - XID_HW_WINDOW_S) {
            active = 0;
            snprintf(why, whylen, "the GPU answered nvidia-smi since: seen healthy again");
        }
    } else {
        double w = blame && !strcmp(blame, "application") ? XID_APP_WINDOW_S : XID_HW_WINDOW_S;
        cJSON_AddNumberToObject(x, "window_s", w);
        if (have_both && (a->t < a->ct - w || a->t > a->ct + 60)) {
            active = 0;
            snprintf(why, whylen, "outside its %.0f s window before the crash", w);
        }
    }
    if (have_both)
        cJSON_AddNumberToObject(x, "age_s", floor(a->ct - a->t));
    else
        cJSON_AddNullToObject(x, "age_s");
    cJSON_AddBoolToObject(x, "active", active);
    return active;
}

/* The gpu.host_context[] entry of Xid x, which is no cause of this crash (why says why), with its
 * summary: "Xid 79 on 0000:ca:00.0, 10 min earlier, pid 8475". */
static cJSON *xid_context(const cJSON *x, const struct xid_at *a, const char *why)
{
    char line[400], age[64] = "", pidb[40] = "";
    if (a->have_ct && a->have_t) {
        double d = a->ct - a->t;
        if (d < 0)
            snprintf(age, sizeof(age), ", %.0f s later", -d);
        else if (d < 120)
            snprintf(age, sizeof(age), ", %.0f s earlier", d);
        else if (d < 7200)
            snprintf(age, sizeof(age), ", %.0f min earlier", floor(d / 60));
        else
            snprintf(age, sizeof(age), ", %.0f h earlier", floor(d / 3600));
    }
    double xp;
    if (cp_jnum(x, "pid", &xp))
        snprintf(pidb, sizeof(pidb), ", pid %.0f", xp);
    snprintf(line, sizeof(line), "Xid %.0f on %s%s%s", a->code, a->pci ? a->pci : "an unnamed GPU",
             age, pidb);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "code", a->code);
    add_s(c, "pci", a->pci);
    if (cp_jnum(x, "pid", &xp))
        cJSON_AddNumberToObject(c, "pid", xp);
    else
        cJSON_AddNullToObject(c, "pid");
    add_s(c, "time_utc", cp_jstr(x, "time_utc"));
    add_s(c, "summary", line);
    add_s(c, "why", why);
    add_s(c, "text", cp_jstr(x, "text"));
    return c;
}

/* gpu.scope: which GPUs are this process's, and how that is known. */
static cJSON *gpu_scope(const struct own *own)
{
    cJSON *sc = cJSON_CreateObject();
    cJSON_AddStringToObject(sc, "process_gpus", own->none ? "none" : own->known || own->n ? "known" : "unknown");
    cJSON *ps = cJSON_AddArrayToObject(sc, "pci");
    for (int i = 0; i < own->n; i++)
        cJSON_AddItemToArray(ps, cJSON_CreateString(own->pci[i]));
    cJSON *us = cJSON_AddArrayToObject(sc, "uuids");
    for (int i = 0; i < own->nuuid; i++)
        cJSON_AddItemToArray(us, cstr(own->uuid[i]));
    cJSON *pp = cJSON_AddArrayToObject(sc, "pids");
    for (int i = 0; i < own->npids; i++)
        cJSON_AddItemToArray(pp, cJSON_CreateNumber(own->pids[i]));
    add_s(sc, "reason", own->why[0] ? own->why : NULL);
    return sc;
}

static void xid_windows(cJSON *r, const struct own *own)
{
    cJSON *gpu = obj(r, "gpu");
    struct xid_at a = {.ct = -1};
    a.have_ct = cp_jnum(cp_jkey(r, "host"), "time", &a.ct) && a.ct > 0;
    cJSON *ctx = cJSON_CreateArray();
    cJSON *x;
    cJSON_ArrayForEach(x, cp_jkey(gpu, "xid"))
    {
        a.code = -1;
        a.t = -1;
        cp_jnum(x, "code", &a.code);
        a.have_t = cp_jnum(x, "time", &a.t);
        a.pci = cp_jstr(x, "pci");
        char why[160] = "";
        int active = xid_active(x, r, &a, why, sizeof(why));
        const char *scope = cp_jstr(x, "scope");
        int other = scope && !strcmp(scope, "other");
        if (!other && active)
            continue;
        if (other && !why[0])
            snprintf(why, sizeof(why), "%s", "names neither this process nor one of its GPUs");
        cJSON_AddItemToArray(ctx, xid_context(x, &a, why));
    }
    cp_json_set(gpu, "host_context", ctx);
    cp_json_set(gpu, "scope", gpu_scope(own));
}

/* ---- log tails ---- */

/* A captured log tail: logs/<name>.tail. */
static int is_log_tail(const char *name)
{
    size_t nl = strlen(name);
    return !strncmp(name, "logs/", 5) && nl >= 10 && !strcmp(name + nl - 5, ".tail");
}

/* Is there log text to scan: a non-empty log tail, or torchelastic's error file? (The pattern
 * catalogue is only loaded, and its regular expressions compiled, when there is.) */
static int have_log_text(const cJSON *r, struct bundle *b)
{
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        if ((is_log_tail(m->name) || !strcmp(m->name, OUTPUT_MEMBER)) && m->size > 0)
            return 1;
    }
    return bundle_find(b, "ml/torchelastic_error.json") != NULL ||
           cJSON_IsObject(cp_jkey(r, "exception"));
}

/* The text of the report's Python exception (pyexc.h) as a log: each exception of the chain as
 * "Type: message", then each DataLoader / multiprocessing worker's original traceback. NULL when
 * there is none, or when it was parsed from the output (identity.h), scanned as itself. */
static char *exception_text(const cJSON *r, size_t *len)
{
    const cJSON *x = cp_jkey(r, "exception"), *e;
    const char *src = cp_jstr(x, "source");
    if (!cJSON_IsObject(x) || (src && !strcmp(src, "output")))
        return NULL; /* none, or read from the output, which is scanned already */
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    cJSON_ArrayForEach(e, cp_jkey(x, "chain"))
    {
        const char *type = cp_jstr(e, "type"), *msg = cp_jstr(e, "message");
        fprintf(f, "%s%s%s\n", type ? type : "?", msg && *msg ? ": " : "", msg ? msg : "");
    }
    cJSON_ArrayForEach(e, cp_jkey(x, "chain"))
    {
        const char *tb = cp_jstr_at(e, "worker.original_traceback");
        if (tb)
            fprintf(f, "%s\n", tb);
    }
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static void add_logs(cJSON *r, struct bundle *b, const struct logerr_set *pats)
{
    cJSON *log = obj(r, "log");
    cJSON *errs = cJSON_CreateArray();
    cJSON *srcs = cJSON_CreateArray();
    cp_json_set(log, "errors", errs);
    cp_json_set(log, "sources", srcs);
    size_t total = 0;
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        if (!is_log_tail(m->name))
            continue;
        cJSON_AddItemToArray(srcs, cJSON_CreateString(m->name));
        if (!pats)
            continue;
        char *buf = NULL;
        size_t len = 0;
        int rc = bundle_read_all(b, m->name, LOG_TAIL_MAX, &buf, &len);
        if ((rc == BUNDLE_OK || rc == BUNDLE_ETRUNC) && buf) {
            size_t left = MAX_LOG_ERRORS > (size_t)cJSON_GetArraySize(errs)
                              ? MAX_LOG_ERRORS - (size_t)cJSON_GetArraySize(errs)
                              : 0;
            total += logerr_scan(pats, buf, len, m->name, errs, left);
        }
        free(buf);
    }
    /* the supervisor's output tail, and the Python exception's text (source "exception") */
    for (int pass = 0; pass < 2; pass++) {
        char *buf = NULL;
        size_t len = 0;
        const char *src = pass ? "exception" : OUTPUT_MEMBER;
        if (pass) {
            buf = exception_text(r, &len);
        } else if (bundle_find(b, OUTPUT_MEMBER)) {
            int rc = bundle_read_all(b, OUTPUT_MEMBER, LOG_TAIL_MAX, &buf, &len);
            if (rc != BUNDLE_OK && rc != BUNDLE_ETRUNC) {
                free(buf);
                buf = NULL;
            }
        }
        if (!buf)
            continue;
        cJSON_AddItemToArray(srcs, cJSON_CreateString(src));
        if (pats) {
            size_t left = MAX_LOG_ERRORS > (size_t)cJSON_GetArraySize(errs)
                              ? MAX_LOG_ERRORS - (size_t)cJSON_GetArraySize(errs)
                              : 0;
            total += logerr_scan(pats, buf, len, src, errs, left);
        }
        free(buf);
    }
    /* torchelastic's error file: {"message": {"message": "...", "extraInfo": {...}}} */
    cJSON *te = read_json_member(b, "ml/torchelastic_error.json");
    const cJSON *msg = cp_jkey(te, "message");
    if (cJSON_IsObject(msg))
        msg = cp_jkey(msg, "message");
    if (cJSON_IsString(msg)) {
        cJSON_AddItemToArray(srcs, cJSON_CreateString("ml/torchelastic_error.json"));
        if (pats) {
            size_t left = MAX_LOG_ERRORS > (size_t)cJSON_GetArraySize(errs)
                              ? MAX_LOG_ERRORS - (size_t)cJSON_GetArraySize(errs)
                              : 0;
            total += logerr_scan(pats, msg->valuestring, strlen(msg->valuestring),
                                 "ml/torchelastic_error.json", errs, left);
        }
    }
    cJSON_Delete(te);
    cp_json_set(log, "errors_total", cJSON_CreateNumber((double)total));
}

/* ---- checkpoint ---- */

/* A number field of `from` (anything else is skipped). */
static void copy_field(cJSON *to, const char *k, const cJSON *from)
{
    const cJSON *v = cp_jkey(from, k);
    if (cJSON_IsNumber(v))
        cp_json_set(to, k, cJSON_CreateNumber(v->valuedouble));
}

/* The verdict file's stat fields equal this stat: same file, unchanged. */
static int same_file(const cJSON *v, const struct stat *st)
{
    double size, mtime, ino;
    const char *dev = cp_jstr(v, "device");
    char d[32];
    snprintf(d, sizeof(d), "%u:%u", major(st->st_dev), minor(st->st_dev));
    if (!cp_jnum(v, "size", &size) || !cp_jnum(v, "mtime", &mtime) || !cp_jnum(v, "inode", &ino) ||
        !dev)
        return 0;
    return size == (double)st->st_size && mtime == (double)st->st_mtim.tv_sec &&
           ino == (double)st->st_ino && !strcmp(dev, d);
}

/* checkpoint.valid, verdict, reason, verdict_from and newest_valid of a bundle without a verdict:
 * why there is none (found: checkpoint.json, or NULL). */
static void checkpoint_no_verdict(cJSON *ck, const cJSON *found)
{
    cJSON_AddNullToObject(ck, "valid");
    cJSON_AddNullToObject(ck, "verdict");
    const char *why = cp_jstr(found, "reason");
    char buf[600];
    if (!found)
        snprintf(buf, sizeof(buf), "the bundle has no checkpoint.json");
    else if (!cJSON_IsTrue(cp_jkey(found, "found")))
        snprintf(buf, sizeof(buf), "no checkpoint found at capture time%s%s", why ? ": " : "",
                 why ? why : "");
    else
        snprintf(buf, sizeof(buf), "the bundle has no checkpoint verdict");
    add_s(ck, "reason", buf);
    cJSON_AddNullToObject(ck, "verdict_from");
    cJSON_AddNullToObject(ck, "newest_valid");
}

/* Checks the checkpoint at path again when it is still the very file the capture judged (verdict
 * v: same device, inode, size and mtime), and adds that verdict, valid, reason and the capture's
 * verdict to ck. 1 when it did, else 0. */
static int checkpoint_recheck(cJSON *ck, const cJSON *v, const char *path)
{
    struct stat st;
    if (!(path && path[0] == '/' && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
          same_file(v, &st)))
        return 0;
    struct ckv_result res;
    memset(&res, 0, sizeof(res));
    ckv_check_at(AT_FDCWD, path, 1, &res);
    if (!(res.have_stat && res.size == (uint64_t)st.st_size && res.inode == (uint64_t)st.st_ino))
        return 0;
    cJSON_AddStringToObject(ck, "verdict", ckv_verdict_name(res.verdict));
    if (res.verdict == CKV_UNVERIFIABLE)
        cJSON_AddNullToObject(ck, "valid");
    else
        cJSON_AddBoolToObject(ck, "valid", res.verdict == CKV_VALID);
    cJSON_AddStringToObject(ck, "reason", res.reason);
    const char *cv = cp_jstr(v, "verdict");
    if (cv)
        add_s(ck, "capture_verdict", cv);
    return 1;
}

/* checkpoint.verdict, valid and reason as the capture judged them (verdict v). */
static void checkpoint_capture_verdict(cJSON *ck, const cJSON *v)
{
    const char *verdict = cp_jstr(v, "verdict");
    const cJSON *valid = cp_jkey(v, "valid");
    const char *reason = cp_jstr(v, "reason");
    if (verdict)
        add_s(ck, "verdict", verdict);
    else
        cJSON_AddNullToObject(ck, "verdict");
    if (cJSON_IsBool(valid))
        cJSON_AddBoolToObject(ck, "valid", cJSON_IsTrue(valid));
    else
        cJSON_AddNullToObject(ck, "valid");
    add_s(ck, "reason", reason ? reason : "");
}

static void add_checkpoint(cJSON *r, struct bundle *b)
{
    cJSON *ck = cJSON_CreateObject();
    cp_json_set(r, "checkpoint", ck);
    cJSON *found = read_json_member(b, "checkpoint.json");
    cJSON *v = read_json_member(b, "checkpoint-verdict.json");
    const char *path = cp_jstr(v, "path");
    if (!path)
        path = cp_jstr(found, "path");
    if (path)
        add_s(ck, "path", path);
    else
        cJSON_AddNullToObject(ck, "path");
    const cJSON *step = cp_jkey(found, "step");
    if (cJSON_IsNumber(step))
        cJSON_AddNumberToObject(ck, "step", step->valuedouble);
    else if (cJSON_IsString(step))
        add_s(ck, "step", step->valuestring);
    if (cp_jstr(found, "source"))
        add_s(ck, "source", cp_jstr(found, "source"));
    if (cJSON_IsTrue(cp_jkey(found, "save_in_progress")))
        cJSON_AddTrueToObject(ck, "save_in_progress");
    if (!v) {
        checkpoint_no_verdict(ck, found);
        cJSON_Delete(found);
        return;
    }
    const char *from = "capture";
    const cJSON *nv = cp_jkey(v, "newest_valid");
    if (checkpoint_recheck(ck, v, path))
        from = "recheck";
    else
        checkpoint_capture_verdict(ck, v);
    cJSON_AddStringToObject(ck, "verdict_from", from);
    if (cp_jstr(v, "file_format"))
        add_s(ck, "file_format", cp_jstr(v, "file_format"));
    copy_field(ck, "size", v);
    copy_field(ck, "mtime", v);
    copy_field(ck, "checked_at", v);
    if (cp_jstr(nv, "path"))
        add_s(ck, "newest_valid", cp_jstr(nv, "path"));
    else
        cJSON_AddNullToObject(ck, "newest_valid");
    cJSON_Delete(found);
    cJSON_Delete(v);
}

/* ---- environment ---- */

static void add_env(cJSON *r, struct bundle *b)
{
    cJSON *proc = obj(r, "process");
    cJSON *env = cJSON_CreateObject();
    cJSON *j = read_json_member(b, "proc/environ.json");
    const cJSON *vals = cp_jkey(j, "values"), *e;
    cJSON_ArrayForEach(e, vals)
    {
        if (!e->string || !cJSON_IsString(e))
            continue;
        size_t kl = strlen(e->string);
        char *k = malloc(kl * 3 + 1);
        if (!k)
            break;
        logerr_clean_utf8(k, kl * 3 + 1, e->string, kl, 0);
        if (!cp_jkey(env, k))
            cJSON_AddItemToObject(env, k, cstr(e->valuestring));
        free(k);
    }
    cp_json_set(proc, "env", env);
    const cJSON *names = cp_jkey(j, "names_only");
    if (cJSON_IsArray(names))
    {
        cJSON *arr = cJSON_CreateArray();
        const cJSON *nm;
        cJSON_ArrayForEach(nm, names)
        {
            if (cJSON_IsString(nm))
                cJSON_AddItemToArray(arr, cstr(nm->valuestring));
        }
        cp_json_set(proc, "env_names_only", arr);
    }
    cJSON_Delete(j);
}

/* The process's threads (proc/threads.json: the host's tids): a kernel line naming one of them
 * names the process. */
static void own_tids(struct bundle *b, struct own *own)
{
    char *buf = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    if (bundle_find(b, "proc/threads.json") &&
        bundle_read_all(b, "proc/threads.json", JSON_MEMBER_MAX, &buf, &len) == BUNDLE_OK)
        j = cJSON_ParseWithLength(buf, len);
    free(buf);
    const cJSON *t;
    cJSON_ArrayForEach(t, j)
    {
        double tid;
        if (own->ntids < MAX_OWN_TIDS && cp_jnum(t, "tid", &tid) && tid > 0)
            own->tids[own->ntids++] = tid;
    }
    cJSON_Delete(j);
}

/* The process's start: the kernel log's window (the handler read /proc/<pid>/stat), else what
 * the supervisor recorded (its first sight of the process). */
static void own_start(const cJSON *km, const cJSON *pj, struct own *own)
{
    own->start = -1;
    if (!cp_jnum(cp_jkey(km, "window"), "process_start", &own->start))
        cp_jnum(pj, "first_seen", &own->start);
}

/* A kernel line logged after the process started that names it (its pid, a thread) ties that GPU
 * to it, whatever /dev/nvidia* shows (issue 23: an Xid 79 with pid=<this process> is its GPU
 * falling off the bus, not a neighbour's). */
static void own_from_xid_pids(const cJSON *km, struct own *own)
{
    struct kline_xid_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    const cJSON *l;
    int n = 0;
    cJSON_ArrayForEach(l, cp_jkey(km, "lines"))
    {
        const char *text = cp_jstr(l, "text");
        struct kline_xid ev;
        double t = 0;
        if (!text || n++ >= MAX_XIDS * 4 || !kline_xid_parse(&ctx, text, &ev) || !ev.has_pid ||
            !ev.pci[0] || !own_pid_or_tid(own, (double)ev.pid))
            continue;
        if (own->start > 0 && cp_jnum(l, "time", &t) && t < own->start - 1)
            continue; /* before this process existed: another one had the pid */
        if (own_has(own, ev.pci))
            continue;
        if (!own->n) /* the only way its GPU is known */
            snprintf(own->why, sizeof(own->why),
                     "the kernel's Xid line names this process (pid %ld) on %s", (long)ev.pid,
                     ev.pci);
        own_add(own, ev.pci);
        own->known = 1;
        own->none = 0;
    }
}

/* process.supervisor: what crashpack run recorded of the process while it lived and when it saw it
 * end (process.json, a bundle of a death without a core), or null. */
static void add_supervisor(cJSON *r, const cJSON *pj)
{
    const cJSON *end = cp_jkey(pj, "end"), *gpu = cp_jkey(pj, "gpu");
    if (!cJSON_IsObject(end)) {
        cp_json_set(obj(r, "process"), "supervisor", cJSON_CreateNull());
        return;
    }
    cJSON *o = cJSON_CreateObject();
    double t;
    cJSON_AddItemToObject(o, "end_time",
                          cp_jnum(end, "time", &t) ? cJSON_CreateNumber(t) : cJSON_CreateNull());
    add_s(o, "end_seen_by", cp_jstr(end, "seen_by"));
    cJSON_AddItemToObject(o, "gpu_looks",
                          cp_jnum(gpu, "looks", &t) ? cJSON_CreateNumber(t) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "gpu_devices", cJSON_GetArraySize(cp_jkey(gpu, "devices")));
    cp_json_set(obj(r, "process"), "supervisor", o);
}

int evidence_add(cJSON *r, struct bundle *b, char *err, size_t errlen)
{
    int rc = 0;
    double pid = 0;
    const cJSON *p = cp_jkey(cp_jkey(r, "process"), "pid");
    int have_pid = cJSON_IsNumber(p);
    if (have_pid)
        pid = p->valuedouble;
    struct own own;
    memset(&own, 0, sizeof(own));
    if (have_pid)
        own.pids[own.npids++] = pid;
    cJSON *man = read_json_member(b, "manifest.json");
    const cJSON *nsp;
    cJSON_ArrayForEach(nsp, cp_jkey(man, "ns_pids"))
    {
        if (cJSON_IsNumber(nsp) && own.npids < 16 && !own_pid(&own, nsp->valuedouble))
            own.pids[own.npids++] = nsp->valuedouble;
    }
    cJSON_Delete(man);
    cJSON *pj = bundle_find(b, "process.json") ? read_json_member(b, "process.json") : NULL;
    cJSON *km = read_json_member(b, "kmsg.json");
    own_tids(b, &own);
    own_start(km, pj, &own);
    own_from_gpu_json(b, &own, pj);
    add_smi(r, b, pid, have_pid, &own);
    own_from_xid_pids(km, &own);
    add_supervisor(r, pj);
    cJSON_Delete(pj);

    char e1[512] = "", e2[512] = "";
    cJSON *cat = xid_catalog_load(e1, sizeof(e1));
    add_kmsg(r, b, km, cat, pid, have_pid, &own);
    cJSON_Delete(km);
    cJSON_Delete(cat);
    xid_windows(r, &own);

    struct logerr_set *pats = have_log_text(r, b) ? logerr_load(e2, sizeof(e2)) : NULL;
    add_logs(r, b, pats);
    logerr_free(pats);

    add_checkpoint(r, b);
    add_env(r, b);
    if (e1[0] || e2[0]) {
        cp_errmsg(err, errlen, "%s%s%s", e1, e1[0] && e2[0] ? "; " : "", e2);
        rc = -1;
    }
    return rc;
}

