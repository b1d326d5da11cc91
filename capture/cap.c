/* cap.c - the handler's context (struct cap, capture.h): its setup, the step record every step
 * writes its outcome with, and the crashed process's environment. The step files (proc.c,
 * stream.c, the collectors, ...) depend on this file and capture.h, never on main.c. */
#include "capture.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void cap_init(struct cap *c)
{
    memset(c, 0, sizeof(*c));
    c->t0 = now_mono();
    c->ngroups = -1;
    c->pidfd = c->procfd = c->dirfd = c->kmsgfd = c->outfd = c->smi_fd = -1;
    c->smi_pid = -1;
    c->rootfd = -1;
    c->guard_max_bytes = UINT64_MAX;
    c->steps = cJSON_CreateArray();
    c->core = cJSON_CreateObject();
    c->extra = cJSON_CreateObject();
    c->snap_info_fd = c->snap_status_fd = -1;
    c->death_status = c->death_signal = -1;
    c->reported_by = -1;
}

void cap_step(struct cap *c, const char *name, const char *status, double t_start,
              const char *fmt, ...)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "status", status);
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    if (reason[0])
        cJSON_AddStringToObject(o, "reason", reason);
    cJSON_AddNumberToObject(o, "ms", (double)(long)((now_mono() - t_start) * 1e4) / 10);
    cJSON_AddItemToArray(c->steps, o);
}

const char *cap_env(const struct cap *c, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; c->environ_raw && i < c->environ_len;) {
        const char *kv = c->environ_raw + i;
        size_t l = strnlen(kv, c->environ_len - i);
        if (l > nl && !memcmp(kv, name, nl) && kv[nl] == '=')
            return kv + nl + 1;
        i += l + 1;
    }
    return NULL;
}
