/* config.c - parse /etc/crashpack/crashpack.conf (`key = value`, `#` comments). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
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
    snprintf(c->knowledge_base, sizeof(c->knowledge_base), "%s", "/var/lib/crashpack/kb.sqlite");
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

/* ---- the keys: one row each in `keys` below, with how its value is parsed ---- */

/* The keys whose value needs more than one of the common kinds (set_key's KEY_FN rows). */
static int set_mode(struct cp_config *c, const char *v)
{
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

static int set_level(struct cp_config *c, const char *v)
{
    char *end;
    long l = strtol(v, &end, 10);
    if (*end || l < -7 || l > 19)
        return -1;
    c->level = (int)l;
    return 0;
}

/* 64 KiB .. 64 MiB, rounded down to a whole tar block */
static int set_frame_size(struct cp_config *c, const char *v)
{
    uint64_t f;
    if (cp_parse_size(v, &f) || f < (64 << 10) || f > (64 << 20))
        return -1;
    c->frame_size = f & ~(uint64_t)511;
    return 0;
}

static int set_run_exits(struct cp_config *c, const char *v)
{
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

static int set_enrich(struct cp_config *c, const char *v)
{
    return (!strcmp(v, "auto") || !strcmp(v, "off") || v[0] == '/')
               ? copy_str(c->enrich, sizeof(c->enrich), v)
               : -1;
}

/* stored before it is checked: 0 is refused, but stays in the struct (as it always has) */
static int set_enrich_timeout(struct cp_config *c, const char *v)
{
    return parse_uint(v, &c->enrich_timeout_s) || !c->enrich_timeout_s ? -1 : 0;
}

/* python_hook and python_hook_timeout are read by the Python hook (python/_crashpack_hook.py,
 * python/crashpack/; docs/python.md): checked here so that a bad value is an error of the
 * configuration too, and stored nowhere */
static int check_python_hook(struct cp_config *c, const char *v)
{
    (void)c;
    int on;
    return parse_bool(v, &on);
}

static int check_python_hook_timeout(struct cp_config *c, const char *v)
{
    (void)c;
    unsigned t;
    return parse_uint(v, &t) || !t || t > 3600 ? -1 : 0;
}

/* How a key's value is parsed, and what it may be. */
enum key_kind {
    KEY_SIZE,    /* cp_parse_size into a uint64_t, within [lo, hi] */
    KEY_UINT,    /* parse_uint into an unsigned */
    KEY_BOOL,    /* parse_bool into an int */
    KEY_DISK,    /* parse_cpsize: bytes or a percentage of the filesystem */
    KEY_ABS,     /* an absolute path */
    KEY_ABS_OFF, /* an absolute path, or empty (off) */
    KEY_TEXT,    /* any text that fits */
    KEY_FN,      /* its own function */
};

struct key {
    const char *name;
    enum key_kind kind;
    size_t off, size;                            /* the field of struct cp_config */
    uint64_t lo, hi;                             /* KEY_SIZE: the range allowed */
    int (*fn)(struct cp_config *, const char *); /* KEY_FN */
};

#define FIELD(f) .off = offsetof(struct cp_config, f), .size = sizeof(((struct cp_config *)0)->f)

static const struct key keys[] = {
    {"bundle_dir", KEY_ABS, FIELD(bundle_dir)},
    {"mode", KEY_FN, .fn = set_mode},
    {"max_core_size", KEY_SIZE, FIELD(max_core_size), 0, UINT64_MAX},
    {"max_use", KEY_DISK, FIELD(max_use)},
    {"keep_free", KEY_DISK, FIELD(keep_free)},
    {"honor_rlimit_core", KEY_BOOL, FIELD(honor_rlimit_core)},
    {"deadline", KEY_UINT, FIELD(deadline_s)},
    {"finisher_deadline", KEY_UINT, FIELD(finisher_deadline_s)},
    {"level", KEY_FN, .fn = set_level},
    {"threads", KEY_UINT, FIELD(threads)},
    {"frame_size", KEY_FN, .fn = set_frame_size},
    {"slim_stack_max", KEY_SIZE, FIELD(slim_stack_max), 0, UINT64_MAX},
    {"burst_full", KEY_UINT, FIELD(burst_full)},
    {"burst_window", KEY_UINT, FIELD(burst_window_s)},
    {"repeat_full", KEY_UINT, FIELD(repeat_full)},
    {"repeat_window", KEY_UINT, FIELD(repeat_window_s)},
    {"agent_socket", KEY_ABS, FIELD(agent_socket)},
    {"state_dir", KEY_ABS, FIELD(state_dir)},
    {"knowledge_base", KEY_ABS, FIELD(knowledge_base)},
    {"agent_rate", KEY_UINT, FIELD(agent_rate)},
    {"agent_oom", KEY_BOOL, FIELD(agent_oom)},
    {"python_locals", KEY_BOOL, FIELD(python_locals)},
    {"run_exits", KEY_FN, .fn = set_run_exits},
    {"run_output_tail", KEY_SIZE, FIELD(run_output_tail), 1024, 64ULL << 20},
    {"post_command", KEY_ABS_OFF, FIELD(post_command)},
    {"nvidia_smi", KEY_ABS_OFF, FIELD(nvidia_smi)},
    {"nvidia_smi_timeout", KEY_UINT, FIELD(nvidia_smi_timeout_s)},
    {"proc_file_max", KEY_SIZE, FIELD(proc_file_max), 0, UINT64_MAX},
    {"kmsg_margin", KEY_UINT, FIELD(kmsg_margin_s)},
    {"kmsg_max", KEY_SIZE, FIELD(kmsg_max), 0, UINT64_MAX},
    {"nvidia_smi_output_max", KEY_SIZE, FIELD(smi_output_max), 0, UINT64_MAX},
    {"nvidia_smi_bus_lost_window", KEY_UINT, FIELD(smi_bus_lost_window_s)},
    {"log_tail", KEY_SIZE, FIELD(log_tail), 0, UINT64_MAX},
    {"ml_file_max", KEY_SIZE, FIELD(ml_file_max), 0, UINT64_MAX},
    {"checkpoint_timeout", KEY_UINT, FIELD(checkpoint_timeout_s)},
    {"enrich", KEY_FN, .fn = set_enrich},
    {"enrich_timeout", KEY_FN, .fn = set_enrich_timeout},
    /* one zstd frame: readers refuse frames over 64 MiB */
    {"enrich_max", KEY_SIZE, FIELD(enrich_max), 4096, 48ULL << 20},
    {"enrich_memory", KEY_SIZE, FIELD(enrich_memory), 64ULL << 20, UINT64_MAX},
    {"python_hook", KEY_FN, .fn = check_python_hook},
    {"python_hook_timeout", KEY_FN, .fn = check_python_hook_timeout},
    {"redact_patterns", KEY_TEXT, FIELD(redact_patterns)},
    {"redact_env", KEY_TEXT, FIELD(redact_patterns)}, /* redact_env: its name */
    {"redact_values", KEY_TEXT, FIELD(redact_values)},
};

/* Parses one value by its row's kind into its field: 0, or -1 for a bad value (the field is
 * left as it was, but for enrich_timeout). */
static int set_value(struct cp_config *c, const struct key *k, const char *v)
{
    char *field = (char *)c + k->off;
    uint64_t u;
    switch (k->kind) {
    case KEY_SIZE:
        if (cp_parse_size(v, &u) || u < k->lo || u > k->hi)
            return -1;
        *(uint64_t *)(void *)field = u;
        return 0;
    case KEY_UINT:
        return parse_uint(v, (unsigned *)(void *)field);
    case KEY_BOOL:
        return parse_bool(v, (int *)(void *)field);
    case KEY_DISK:
        return parse_cpsize(v, (struct cp_size *)(void *)field);
    case KEY_ABS:
        return v[0] == '/' ? copy_str(field, k->size, v) : -1;
    case KEY_ABS_OFF:
        return (v[0] == '/' || !v[0]) ? copy_str(field, k->size, v) : -1;
    case KEY_TEXT:
        return copy_str(field, k->size, v);
    case KEY_FN:
        return k->fn(c, v);
    }
    return -1;
}

/* 0, -1 for a bad value, -2 for an unknown key. */
static int set_key(struct cp_config *c, const char *k, const char *v)
{
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strcmp(k, keys[i].name))
            return set_value(c, &keys[i], v);
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

