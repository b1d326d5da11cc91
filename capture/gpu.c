/* gpu.c - which GPUs this process had open, and what the driver and PCIe say about them
 * (gpu.json).
 *
 * Quick and safe to run before the drain: everything comes from kernel-owned files
 * (/proc/driver/nvidia, sysfs) that answer from memory, unlike nvidia-smi, which can hang. The
 * analyzer uses this to tell this process's GPUs' Xids from a neighbour's: the process's
 * /dev/nvidia<N> fds give device minors, and the driver's per-GPU `information` file maps each
 * minor to its PCI bus id and UUID. CUDA_VISIBLE_DEVICES is recorded as the process gave it: its
 * indices are in CUDA order (fastest first by default), not PCI or minor order. */
#include "capture.h"
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NV_MAJOR 195 /* /dev/nvidia<N>: minor N; nvidia-modeset 254, nvidiactl 255 */
#define NV_MINOR_MODESET 254
#define NV_MINOR_CTL 255
#define MAX_FDS 65536 /* fd entries looked at: bounded time for fd-hoarding processes */
#define MAX_GPUS 64
#define INFO_MAX 16384
#define SMALL_MAX 4096

/* Strips trailing whitespace in place. */
static char *rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

/* The value of a `Key:   value` line of an `information` file, trimmed, or "" when absent. */
static void info_field(const char *text, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    out[0] = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, key, kl) || l[kl] != ':')
            continue;
        const char *v = l + kl + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t vl = strcspn(v, "\n");
        if (vl >= n)
            vl = n - 1;
        memcpy(out, v, vl);
        out[vl] = 0;
        rtrim(out);
        return;
    }
}

/* A PCI address as sysfs names it (dddd:bb:dd.f, hex, lower case); 0 for anything else, so a
 * name never walks out of /sys/bus/pci/devices. */
static int pci_addr_norm(const char *in, char *out, size_t n)
{
    size_t l = strlen(in);
    if (l < 12 || l >= n || l > 16)
        return 0;
    for (size_t i = 0; i < l; i++) {
        char ch = (char)tolower((unsigned char)in[i]);
        if (!isxdigit((unsigned char)ch) && ch != ':' && ch != '.')
            return 0;
        out[i] = ch;
    }
    out[l] = 0;
    const char *dot = strrchr(out, '.');
    return dot && dot[1] && !dot[2] && out[0] != '.' && strchr(out, ':') != NULL;
}

/* A sysfs counter file of `NAME COUNT` lines (aer_dev_*) as {NAME: COUNT}; NULL if unreadable. */
static cJSON *aer_counters(int devfd, const char *name)
{
    size_t len;
    int tr;
    char *s = read_file_at(devfd, name, SMALL_MAX, &len, &tr);
    if (!s)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    char *save = NULL;
    for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char key[64];
        unsigned long long v;
        if (sscanf(l, "%63s %llu", key, &v) == 2)
            cJSON_AddNumberToObject(o, key, (double)v);
    }
    free(s);
    return o;
}

static cJSON *sysfs_value(int devfd, const char *name, int numeric)
{
    size_t len;
    int tr;
    char *s = read_file_at(devfd, name, SMALL_MAX, &len, &tr);
    if (!s)
        return NULL;
    rtrim(s);
    char *e;
    long v = strtol(s, &e, 10);
    cJSON *j = numeric && *s && !*e ? cJSON_CreateNumber((double)v) : cJSON_CreateString(s);
    free(s);
    return j;
}

/* AER counters and link state. The device directory is a sysfs symlink by design (kernel-owned,
 * not the process's); the files in it are opened without following links. */
static void pci_state(cJSON *g, const char *bdf)
{
    char path[96];
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", bdf);
    int devfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (devfd < 0) {
        cJSON_AddNullToObject(g, "aer");
        cJSON_AddNullToObject(g, "link");
        return;
    }
    static const char *aer_files[][2] = {{"correctable", "aer_dev_correctable"},
                                         {"fatal", "aer_dev_fatal"},
                                         {"nonfatal", "aer_dev_nonfatal"}};
    cJSON *aer = cJSON_CreateObject();
    for (size_t i = 0; i < 3; i++) {
        cJSON *o = aer_counters(devfd, aer_files[i][1]);
        if (o)
            cJSON_AddItemToObject(aer, aer_files[i][0], o);
    }
    if (cJSON_GetArraySize(aer) == 0) { /* no AER capability, or a kernel without the files */
        cJSON_Delete(aer);
        cJSON_AddNullToObject(g, "aer");
    } else
        cJSON_AddItemToObject(g, "aer", aer);
    static const char *link_files[][2] = {{"current_link_speed", "s"},
                                          {"current_link_width", "n"},
                                          {"max_link_speed", "s"},
                                          {"max_link_width", "n"}};
    cJSON *link = cJSON_CreateObject();
    for (size_t i = 0; i < 4; i++) {
        cJSON *v = sysfs_value(devfd, link_files[i][0], link_files[i][1][0] == 'n');
        if (v)
            cJSON_AddItemToObject(link, link_files[i][0], v);
    }
    if (cJSON_GetArraySize(link) == 0) {
        cJSON_Delete(link);
        cJSON_AddNullToObject(g, "link");
    } else
        cJSON_AddItemToObject(g, "link", link);
    close(devfd);
}

/* The process's open NVIDIA device nodes. Only fds whose link text names an nvidia* node are
 * looked at, and with AT_STATX_DONT_SYNC: the process chooses its files, and a stat that asks a
 * FUSE daemon or a dead NFS server could hang the handler; cached attributes are enough to tell a
 * character device and its numbers. */
static cJSON *process_devices(struct cap *c, unsigned char gpu_open[256], int *nopen,
                              int *scanned_all)
{
    *scanned_all = 1;
    if (c->procfd < 0)
        return NULL;
    int dfd = openat(c->procfd, "fd", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return NULL;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return NULL;
    }
    cJSON *arr = cJSON_CreateArray();
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        if (++seen > MAX_FDS) {
            *scanned_all = 0;
            break;
        }
        char target[512];
        ssize_t n = readlinkat(dfd, e->d_name, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = 0;
        const char *base = strrchr(target, '/');
        base = base ? base + 1 : target;
        if (strncmp(base, "nvidia", 6))
            continue;
        struct statx stx;
        if (statx(dfd, e->d_name, AT_STATX_DONT_SYNC, STATX_TYPE, &stx) ||
            !(stx.stx_mask & STATX_TYPE) || !S_ISCHR(stx.stx_mode))
            continue;
        unsigned maj = stx.stx_rdev_major, min = stx.stx_rdev_minor;
        const char *kind = "other"; /* nvidia-uvm, nvidia-caps/...: dynamic majors */
        if (maj == NV_MAJOR)
            kind = min == NV_MINOR_CTL       ? "nvidiactl"
                   : min == NV_MINOR_MODESET ? "nvidia-modeset"
                                             : "gpu";
        else if (!strncmp(base, "nvidia-uvm", 10))
            kind = "nvidia-uvm";
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "fd", atoi(e->d_name));
        cJSON_AddStringToObject(o, "path", target);
        cJSON_AddNumberToObject(o, "major", maj);
        cJSON_AddNumberToObject(o, "minor", min);
        cJSON_AddStringToObject(o, "kind", kind);
        cJSON_AddItemToArray(arr, o);
        if (!strcmp(kind, "gpu") && min < 256 && !gpu_open[min]) {
            gpu_open[min] = 1;
            (*nopen)++;
        }
    }
    closedir(d);
    return arr;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One GPU of /proc/driver/nvidia/gpus/<bdf>/information. */
static cJSON *gpu_entry(int gpusfd, const char *name, const unsigned char gpu_open[256])
{
    cJSON *g = cJSON_CreateObject();
    int gfd = openat(gpusfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    size_t len = 0;
    int tr = 0;
    char *info = gfd >= 0 ? read_file_at(gfd, "information", INFO_MAX, &len, &tr) : NULL;
    if (gfd >= 0)
        close(gfd);
    char minor_s[32] = "", uuid[128] = "", model[128] = "", bus[64] = "";
    if (info) {
        info_field(info, "Device Minor", minor_s, sizeof(minor_s));
        info_field(info, "GPU UUID", uuid, sizeof(uuid));
        info_field(info, "Model", model, sizeof(model));
        info_field(info, "Bus Location", bus, sizeof(bus));
    }
    char *e;
    long minor = strtol(minor_s, &e, 10);
    int have_minor = minor_s[0] && !*e && minor >= 0 && minor < 256;
    if (have_minor)
        cJSON_AddNumberToObject(g, "minor", (double)minor);
    else
        cJSON_AddNullToObject(g, "minor");
    /* the directory is named after the bus id too; the file's own line is preferred */
    char bdf[32];
    int ok = pci_addr_norm(bus[0] ? bus : name, bdf, sizeof(bdf)) ||
             pci_addr_norm(name, bdf, sizeof(bdf));
    cJSON_AddStringToObject(g, "pci", ok ? bdf : name);
    if (uuid[0])
        cJSON_AddStringToObject(g, "uuid", uuid);
    else
        cJSON_AddNullToObject(g, "uuid");
    if (model[0])
        cJSON_AddStringToObject(g, "model", model);
    else
        cJSON_AddNullToObject(g, "model");
    cJSON_AddBoolToObject(g, "open_by_process", have_minor && gpu_open[minor]);
    if (info) {
        cJSON_AddStringToObject(g, "information", info);
        if (tr)
            cJSON_AddBoolToObject(g, "information_truncated", 1);
    } else
        cJSON_AddNullToObject(g, "information");
    free(info);
    if (ok)
        pci_state(g, bdf);
    else {
        cJSON_AddNullToObject(g, "aer");
        cJSON_AddNullToObject(g, "link");
    }
    return g;
}

/* Driver version as printed by `nvidia-smi` (e.g. 535.54.03): the first dotted number of the
 * "NVRM version:" line. */
static void driver_version(const char *text, char *out, size_t n)
{
    out[0] = 0;
    const char *l = strstr(text, "NVRM version:");
    if (!l)
        return;
    size_t ll = strcspn(l, "\n");
    for (const char *p = l; p < l + ll; p++) {
        if (!isdigit((unsigned char)*p) || (p > l && !isspace((unsigned char)p[-1])))
            continue;
        size_t k = strspn(p, "0123456789.");
        if (k > 2 && memchr(p, '.', k) && (p[k] == 0 || isspace((unsigned char)p[k]))) {
            if (k >= n)
                k = n - 1;
            memcpy(out, p, k);
            out[k] = 0;
            return;
        }
    }
}

static void add_env(struct cap *c, cJSON *j, const char *key, const char *var)
{
    const char *v = c->secure ? NULL : cap_env(c, var);
    if (v)
        cJSON_AddStringToObject(j, key, v);
    else
        cJSON_AddNullToObject(j, key);
}

void gpu_collect(struct cap *c)
{
    double t = now_mono();
    cJSON *j = cJSON_CreateObject();
    cJSON *drv = cJSON_AddObjectToObject(j, "driver");
    unsigned char gpu_open[256] = {0};
    int nopen = 0, scanned_all = 1;
    cJSON *pdev = process_devices(c, gpu_open, &nopen, &scanned_all);

    int nvfd = open("/proc/driver/nvidia", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cJSON_AddBoolToObject(drv, "present", nvfd >= 0);
    cJSON *gpus = cJSON_AddArrayToObject(j, "gpus");
    int ngpus = 0;
    if (nvfd >= 0) {
        size_t len;
        int tr;
        char *ver = read_file_at(nvfd, "version", SMALL_MAX, &len, &tr);
        char num[64] = "";
        if (ver)
            driver_version(ver, num, sizeof(num));
        if (num[0])
            cJSON_AddStringToObject(drv, "version", num);
        else
            cJSON_AddNullToObject(drv, "version");
        if (ver)
            cJSON_AddStringToObject(drv, "version_text", rtrim(ver));
        free(ver);
        int gpusfd = openat(nvfd, "gpus", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = gpusfd >= 0 ? fdopendir(gpusfd) : NULL;
        if (d) {
            /* sorted, so the output is the same for the same machine */
            char *names[MAX_GPUS];
            int n = 0;
            struct dirent *e;
            while ((e = readdir(d)) && n < MAX_GPUS)
                if (e->d_name[0] != '.')
                    names[n++] = strdup(e->d_name);
            qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
            for (int i = 0; i < n; i++) {
                if (names[i]) {
                    cJSON *ge = gpu_entry(gpusfd, names[i], gpu_open);
                    const char *pci = cJSON_GetStringValue(cJSON_GetObjectItem(ge, "pci"));
                    if (pci && c->gpu_n < CP_SMI_GPUS &&
                        cp_pci_norm(pci, c->gpu_pci[c->gpu_n], sizeof(c->gpu_pci[0])) == 0)
                        c->gpu_n++;
                    cJSON_AddItemToArray(gpus, ge);
                }
                free(names[i]);
            }
            ngpus = n;
            closedir(d);
        } else if (gpusfd >= 0)
            close(gpusfd);
        close(nvfd);
    }
    if (pdev)
        cJSON_AddItemToObject(j, "process_devices", pdev);
    else
        cJSON_AddNullToObject(j, "process_devices");
    if (!scanned_all)
        cJSON_AddStringToObject(j, "process_devices_note",
                                "more than 65536 fds: the rest not looked at");
    /* as given: CUDA indices (or UUIDs, MIG ids), in CUDA order, not PCI order */
    add_env(c, j, "cuda_visible_devices", "CUDA_VISIBLE_DEVICES");
    add_env(c, j, "nvidia_visible_devices", "NVIDIA_VISIBLE_DEVICES");
    if (c->secure)
        cJSON_AddStringToObject(j, "environment", "not read: privileged or non-dumpable process");

    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    int werr = !s || bw_add(&c->bw, "gpu.json", s, strlen(s));
    free(s);
    if (werr)
        cap_step(c, "gpu.json", "failed", t, "writing gpu.json: %s", strerror(c->bw.err));
    else if (nvfd < 0)
        cap_step(c, "gpu.json", "absent", t, "no NVIDIA driver (/proc/driver/nvidia missing)%s",
                 nopen ? "; yet the process had /dev/nvidia* open" : "");
    else
        cap_step(c, "gpu.json", "ok", t, "%d GPU(s), %d open by the process", ngpus, nopen);
}

/* node-gpu-events.json: the node service's GPU events of the last day (STATE/gpu-events.jsonl,
 * written by `crashpack agent` when an Xid or fallen-off-the-bus line appears, with nvidia-smi
 * taken at that moment): GPU-driver lines of this host, context for the analysis. The last
 * NODE_EVENTS_MAX, read from the file's last NODE_EVENTS_READ bytes. */
#define NODE_EVENTS_MAX 64
#define NODE_EVENTS_READ (256u << 10)
void gpu_node_events(struct cap *c)
{
    double t = now_mono();
    int dfd = open(c->cfg.state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = dfd >= 0 ? openat(dfd, "gpu-events.jsonl", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
                      : -1;
    if (dfd >= 0)
        close(dfd);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        cap_step(c, "node-gpu-events.json", "absent", t, "no %s/gpu-events.jsonl (no crashpack agent)",
                 c->cfg.state_dir);
        return;
    }
    off_t from = st.st_size > (off_t)NODE_EVENTS_READ ? st.st_size - (off_t)NODE_EVENTS_READ : 0;
    size_t cap = (size_t)(st.st_size - from);
    char *buf = malloc(cap + 1);
    ssize_t got = buf ? pread(fd, buf, cap, from) : -1;
    close(fd);
    if (got < 0) {
        free(buf);
        cap_step(c, "node-gpu-events.json", "failed", t, "read: %s", strerror(errno));
        return;
    }
    buf[got] = 0;
    cJSON *keep[NODE_EVENTS_MAX];
    size_t n = 0, seen = 0;
    char *line = buf, *nl;
    if (from) /* the first line may be cut */
        line = (nl = strchr(buf, '\n')) ? nl + 1 : buf + got;
    for (; *line; line = nl ? nl + 1 : line + strlen(line)) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        cJSON *e = cJSON_Parse(line);
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(e, "time");
        const cJSON *ln = cJSON_GetObjectItemCaseSensitive(e, "line");
        if (!cJSON_IsNumber(tm) || !cJSON_IsString(ln) || tm->valuedouble < (double)c->crash_time - 86400 ||
            tm->valuedouble > (double)c->crash_time + 60) {
            cJSON_Delete(e);
            if (!nl)
                break;
            continue;
        }
        seen++;
        if (n == NODE_EVENTS_MAX) {
            cJSON_Delete(keep[0]);
            memmove(keep, keep + 1, (NODE_EVENTS_MAX - 1) * sizeof(keep[0]));
            n--;
        }
        keep[n++] = e;
        if (!nl)
            break;
    }
    free(buf);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "crashpack-node-gpu-events/1");
    cJSON_AddStringToObject(j, "source", c->cfg.state_dir);
    cJSON_AddNumberToObject(j, "window_s", 86400);
    cJSON_AddNumberToObject(j, "seen", (double)seen);
    cJSON *arr = cJSON_AddArrayToObject(j, "events");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, keep[i]);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s || bw_add(&c->bw, "node-gpu-events.json", s, strlen(s)))
        cap_step(c, "node-gpu-events.json", "failed", t, "write: %s", strerror(c->bw.err ? c->bw.err : ENOMEM));
    else
        cap_step(c, "node-gpu-events.json", "ok", t, "%zu events of the last day (%zu kept)", seen, n);
    free(s);
}
