/* config.c - parse /etc/crashpack/crashpack.conf (`key = value`, `#` comments). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cp_config_defaults(struct cp_config *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->bundle_dir, sizeof(c->bundle_dir), "%s", "/var/lib/crashpack/bundles");
    c->mode = CP_MODE_FULL;
    c->max_core_size = 64ULL << 30;
    c->max_use.percent = 10;
    c->max_use.capped = 1;
    c->keep_free.percent = 15;
    c->keep_free.capped = 1;
    c->honor_rlimit_core = 1;
    c->deadline_s = 600;
    c->finisher_deadline_s = 120;
    c->level = 1;
    c->threads = 0;
    c->frame_size = 1ULL << 20;
    c->slim_stack_max = 1ULL << 20;
    c->burst_full = 4;
    c->burst_window_s = 60;
    c->repeat_full = 3;
    c->repeat_window_s = 600;
    snprintf(c->nvidia_smi, sizeof(c->nvidia_smi), "%s", "/usr/bin/nvidia-smi");
    c->nvidia_smi_timeout_s = 10;
    c->proc_file_max = 32ULL << 20;
    c->kmsg_margin_s = 60;
    c->kmsg_max = 1ULL << 20;
    c->smi_output_max = 8ULL << 20;
    c->smi_bus_lost_window_s = 600;
    c->log_tail = 256ULL << 10;
    c->ml_file_max = 8ULL << 20;
    c->checkpoint_timeout_s = 5;
    snprintf(c->enrich, sizeof(c->enrich), "%s", "auto");
    c->enrich_timeout_s = 30;
    snprintf(c->agent_socket, sizeof(c->agent_socket), "%s", "/run/crashpack/agent.sock");
    c->agent_rate = 30;
    c->agent_oom = 1;
    snprintf(c->state_dir, sizeof(c->state_dir), "%s", "/var/lib/crashpack");
    c->run_exits = CP_RUN_EXITS_PYTHON;
    c->run_output_tail = 256ULL << 10;
    c->enrich_max = 16ULL << 20;
    c->enrich_memory = 32ULL << 30;
}

int cp_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s))
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: return -1;
    }
    if (toupper((unsigned char)*end) == 'B' || toupper((unsigned char)*end) == 'I')
        end++;
    if (*end)
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_uint(const char *s, unsigned *out)
{
    uint64_t v;
    if (cp_parse_size(s, &v) || v > 1000000000ULL)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcasecmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "false") ||
             !strcasecmp(s, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

static int parse_cpsize(const char *s, struct cp_size *out)
{
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '%') {
        char buf[32];
        if (n >= sizeof(buf))
            return -1;
        memcpy(buf, s, n - 1);
        buf[n - 1] = 0;
        unsigned p;
        if (parse_uint(buf, &p) || p > 100)
            return -1;
        out->percent = (int)p;
        out->bytes = 0;
        out->capped = 0;
        return 0;
    }
    out->percent = 0;
    out->capped = 0;
    return cp_parse_size(s, &out->bytes);
}

static int copy_str(char *dst, size_t n, const char *s)
{
    size_t l = strlen(s);
    if (l >= n)
        return -1;
    memcpy(dst, s, l + 1);
    return 0;
}

static int set_key(struct cp_config *c, const char *k, const char *v)
{
    if (!strcmp(k, "bundle_dir"))
        return v[0] == '/' ? copy_str(c->bundle_dir, sizeof(c->bundle_dir), v) : -1;
    if (!strcmp(k, "mode")) {
        if (!strcmp(v, "full"))
            c->mode = CP_MODE_FULL;
        else if (!strcmp(v, "slim"))
            c->mode = CP_MODE_SLIM;
        else if (!strcmp(v, "meta"))
            c->mode = CP_MODE_META;
        else
            return -1;
        return 0;
    }
    if (!strcmp(k, "max_core_size"))
        return cp_parse_size(v, &c->max_core_size);
    if (!strcmp(k, "max_use"))
        return parse_cpsize(v, &c->max_use);
    if (!strcmp(k, "keep_free"))
        return parse_cpsize(v, &c->keep_free);
    if (!strcmp(k, "honor_rlimit_core"))
        return parse_bool(v, &c->honor_rlimit_core);
    if (!strcmp(k, "deadline"))
        return parse_uint(v, &c->deadline_s);
    if (!strcmp(k, "finisher_deadline"))
        return parse_uint(v, &c->finisher_deadline_s);
    if (!strcmp(k, "level")) {
        char *end;
        long l = strtol(v, &end, 10);
        if (*end || l < -7 || l > 19)
            return -1;
        c->level = (int)l;
        return 0;
    }
    if (!strcmp(k, "threads"))
        return parse_uint(v, &c->threads);
    if (!strcmp(k, "frame_size")) {
        uint64_t f;
        if (cp_parse_size(v, &f) || f < (64 << 10) || f > (64 << 20))
            return -1;
        c->frame_size = f & ~(uint64_t)511;
        return 0;
    }
    if (!strcmp(k, "slim_stack_max"))
        return cp_parse_size(v, &c->slim_stack_max);
    if (!strcmp(k, "burst_full"))
        return parse_uint(v, &c->burst_full);
    if (!strcmp(k, "burst_window"))
        return parse_uint(v, &c->burst_window_s);
    if (!strcmp(k, "repeat_full"))
        return parse_uint(v, &c->repeat_full);
    if (!strcmp(k, "repeat_window"))
        return parse_uint(v, &c->repeat_window_s);
    if (!strcmp(k, "agent_socket"))
        return v[0] == '/' ? copy_str(c->agent_socket, sizeof(c->agent_socket), v) : -1;
    if (!strcmp(k, "state_dir"))
        return v[0] == '/' ? copy_str(c->state_dir, sizeof(c->state_dir), v) : -1;
    if (!strcmp(k, "agent_rate"))
        return parse_uint(v, &c->agent_rate);
    if (!strcmp(k, "agent_oom"))
        return parse_bool(v, &c->agent_oom);
    if (!strcmp(k, "run_exits")) {
        if (!strcmp(v, "main"))
            c->run_exits = CP_RUN_EXITS_MAIN;
        else if (!strcmp(v, "python"))
            c->run_exits = CP_RUN_EXITS_PYTHON;
        else if (!strcmp(v, "all"))
            c->run_exits = CP_RUN_EXITS_ALL;
        else
            return -1;
        return 0;
    }
    if (!strcmp(k, "run_output_tail")) {
        uint64_t t;
        if (cp_parse_size(v, &t) || t < 1024 || t > (64ULL << 20))
            return -1;
        c->run_output_tail = t;
        return 0;
    }
    if (!strcmp(k, "post_command"))
        return (v[0] == '/' || !v[0]) ? copy_str(c->post_command, sizeof(c->post_command), v) : -1;
    if (!strcmp(k, "nvidia_smi"))
        return (v[0] == '/' || !v[0]) ? copy_str(c->nvidia_smi, sizeof(c->nvidia_smi), v) : -1;
    if (!strcmp(k, "nvidia_smi_timeout"))
        return parse_uint(v, &c->nvidia_smi_timeout_s);
    if (!strcmp(k, "proc_file_max"))
        return cp_parse_size(v, &c->proc_file_max);
    if (!strcmp(k, "kmsg_margin"))
        return parse_uint(v, &c->kmsg_margin_s);
    if (!strcmp(k, "kmsg_max"))
        return cp_parse_size(v, &c->kmsg_max);
    if (!strcmp(k, "nvidia_smi_output_max"))
        return cp_parse_size(v, &c->smi_output_max);
    if (!strcmp(k, "nvidia_smi_bus_lost_window"))
        return parse_uint(v, &c->smi_bus_lost_window_s);
    if (!strcmp(k, "log_tail"))
        return cp_parse_size(v, &c->log_tail);
    if (!strcmp(k, "ml_file_max"))
        return cp_parse_size(v, &c->ml_file_max);
    if (!strcmp(k, "checkpoint_timeout"))
        return parse_uint(v, &c->checkpoint_timeout_s);
    if (!strcmp(k, "enrich"))
        return (!strcmp(v, "auto") || !strcmp(v, "off") || v[0] == '/')
                   ? copy_str(c->enrich, sizeof(c->enrich), v)
                   : -1;
    if (!strcmp(k, "enrich_timeout"))
        return parse_uint(v, &c->enrich_timeout_s) || !c->enrich_timeout_s ? -1 : 0;
    if (!strcmp(k, "enrich_max")) {
        /* one zstd frame: readers refuse frames over 64 MiB */
        uint64_t m;
        if (cp_parse_size(v, &m) || m < 4096 || m > (48ULL << 20))
            return -1;
        c->enrich_max = m;
        return 0;
    }
    if (!strcmp(k, "enrich_memory")) {
        uint64_t m;
        if (cp_parse_size(v, &m) || m < (64ULL << 20))
            return -1;
        c->enrich_memory = m;
        return 0;
    }
    /* read by the Python hook (python/_crashpack_hook.py, python/crashpack/; docs/python.md):
     * checked here so that a bad value is an error of the configuration too */
    if (!strcmp(k, "python_hook")) {
        int on;
        return parse_bool(v, &on);
    }
    if (!strcmp(k, "python_hook_timeout")) {
        unsigned t;
        return parse_uint(v, &t) || !t || t > 3600 ? -1 : 0;
    }
    if (!strcmp(k, "redact_patterns") || !strcmp(k, "redact_env")) /* redact_env: its name */
        return copy_str(c->redact_patterns, sizeof(c->redact_patterns), v);
    return -2;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

int cp_config_load(struct cp_config *c, const char *path, int required, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        if (!required && errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected `key = value`", path, lineno);
            rc = -1;
            break;
        }
        *eq = 0;
        char *k = trim(s), *v = trim(eq + 1);
        int r = set_key(c, k, v);
        if (r == -2) {
            snprintf(err, errlen, "%s:%d: unknown key `%s`", path, lineno, k);
            rc = -1;
            break;
        }
        if (r) {
            snprintf(err, errlen, "%s:%d: bad value for `%s`: `%s`", path, lineno, k, v);
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}

const char *cp_mode_name(enum cp_mode m)
{
    return m == CP_MODE_FULL ? "full" : m == CP_MODE_SLIM ? "slim" : "meta";
}

uint64_t cp_size_resolve(const struct cp_size *s, uint64_t fs_bytes)
{
    if (s->percent > 0)
        return fs_bytes / 100 * (uint64_t)s->percent;
    return s->bytes;
}

