/* cmdopt.c - see cmdopt.h. getopt_long does the parsing; this file writes the one-line errors. */
#include "cmdopt.h"

#include "timearg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The options a verb accepts, for an error message: "--db=PATH, --json, -o/--output=V, -h/--help". */
static void accepted(const struct cp_opts *p, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (const struct option *o = p->longs; o && o->name && n < len; o++) {
        int sh = o->val > ':' && o->val < 128 && (o->val == 'h' || (p->shorts && strchr(p->shorts, o->val)));
        char s[8] = "";
        if (sh)
            snprintf(s, sizeof(s), "-%c/", o->val);
        n += (size_t)snprintf(buf + n, len - n, "%s%s--%s%s", n ? ", " : "", s, o->name,
                              o->has_arg == required_argument ? " V" : "");
    }
}

int cp_usage_error(const struct cp_opts *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", p->verb);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CP_EXIT_USAGE;
}

/* The long option named by `arg` ("--name" or "--name=value"), NULL if none is. */
static const struct option *long_named(const struct cp_opts *p, const char *arg)
{
    if (strncmp(arg, "--", 2))
        return NULL;
    size_t l = strcspn(arg + 2, "=");
    for (const struct option *o = p->longs; o && o->name; o++)
        if (strlen(o->name) == l && !strncmp(o->name, arg + 2, l))
            return o;
    return NULL;
}

/* Does the table have an entry whose val is the short option c? */
static int short_in_table(const struct option *longs, int c)
{
    for (const struct option *o = longs; o && o->name; o++)
        if (o->val == c)
            return 1;
    return 0;
}

/* How many long options start with the name in `arg` ("--na" or "--na=v"). */
static int prefix_of(const struct cp_opts *p, const char *arg)
{
    size_t l = strcspn(arg + 2, "=");
    int n = 0;
    for (const struct option *o = p->longs; o && o->name; o++)
        n += !strncmp(o->name, arg + 2, l);
    return n;
}

int cp_getopt(struct cp_opts *p)
{
    char shorts[128];
    size_t n = (size_t)snprintf(shorts, sizeof(shorts), "%s:", p->in_order ? "+" : "");
    for (const char *s = p->shorts ? p->shorts : ""; *s && n + 4 < sizeof(shorts); s++) {
        if (*s == ':' || !short_in_table(p->longs, *s))
            continue;
        shorts[n++] = *s;
        if (s[1] == ':')
            shorts[n++] = ':';
    }
    shorts[n++] = 'h';
    shorts[n] = 0;
    if (!p->started) {
        optind = 0; /* glibc: start over, and read the optstring's + again */
        opterr = 0;
        p->started = 1;
    }
    int c = getopt_long(p->argc, p->argv, shorts, p->longs, NULL);
    if (c != '?' && c != ':')
        return c;
    const char *arg = optind - 1 < p->argc && optind > 0 ? p->argv[optind - 1] : "?";
    int is_long = !strncmp(arg, "--", 2);
    const struct option *lo = is_long ? long_named(p, arg) : NULL;
    char acc[1024];
    accepted(p, acc, sizeof(acc));
    if (c == ':' && is_long)
        cp_usage_error(p, "option `%s` needs a value", arg);
    else if (c == ':')
        cp_usage_error(p, "option `-%c` needs a value", optopt);
    else if (lo && lo->has_arg == no_argument && strchr(arg, '='))
        cp_usage_error(p, "option `--%s` takes no value (in `%s`)", lo->name, arg);
    else if (is_long && prefix_of(p, arg) > 1)
        cp_usage_error(p, "ambiguous option `%.*s`; accepted: %s", (int)strcspn(arg, "="), arg, acc);
    else if (is_long)
        cp_usage_error(p, "unknown option `%.*s`; accepted: %s", (int)strcspn(arg, "="), arg, acc);
    else
        cp_usage_error(p, "unknown option `-%c`; accepted: %s", optopt > 32 && optopt < 127 ? optopt : '?',
                       acc);
    return '?';
}

int cp_opt_num(const struct cp_opts *p, const char *opt, const char *v, long long min, long long max,
               long long *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < min || n > max) {
        cp_usage_error(p, "%s `%s`: expected a whole number from %lld to %lld", opt, v, min, max);
        return -1;
    }
    *out = n;
    return 0;
}

int cp_opt_time(const struct cp_opts *p, const char *opt, const char *v, double *out)
{
    if (cp_parse_time(v, time(NULL), out)) {
        cp_usage_error(p, "%s `%s`: not a time; accepted: %s", opt, v, CP_TIME_FORMS);
        return -1;
    }
    return 0;
}

int cp_opt_args(const struct cp_opts *p, int min, int max, const char *what)
{
    int n = p->argc - optind;
    if (n < min) {
        cp_usage_error(p, "missing %s (`%s --help` shows the usage)", what, p->verb);
        return -1;
    }
    if (max >= 0 && n > max) {
        cp_usage_error(p, "unexpected argument `%s` (%s takes %s%s)", p->argv[optind + max], p->verb,
                       max ? "only " : "no arguments", max ? what : "");
        return -1;
    }
    return 0;
}

void cp_opt_subset(const struct option *all, const char *names, struct option *out, int cap)
{
    int n = 0;
    for (const struct option *o = all; o->name && n < cap - 2; o++) {
        size_t l = strlen(o->name);
        for (const char *w = names; w && *w; w += strcspn(w, " "), w += strspn(w, " "))
            if (strcspn(w, " ") == l && !strncmp(w, o->name, l)) {
                out[n++] = *o;
                break;
            }
    }
    out[n++] = (struct option)CP_OPT_HELP;
    out[n] = (struct option)CP_OPT_END;
}

const struct cp_subverb *cp_subverb_find(const char *verb, const struct cp_subverb *sv, int n,
                                         const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(sv[i].name, name))
            return &sv[i];
    fprintf(stderr, "%s: unknown command `%s`; accepted:", verb, name);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %s", sv[i].name);
    fprintf(stderr, ", --help\n");
    return NULL;
}

void cp_subverb_usage(FILE *out, const char *verb, const struct cp_subverb *s, const char *footer)
{
    fprintf(out, "usage: %s %s %s\n\n%s", verb, s->name, s->synopsis, s->help);
    fprintf(out, "  -h, --help   this text\n");
    if (footer)
        fprintf(out, "\n%s", footer);
}
