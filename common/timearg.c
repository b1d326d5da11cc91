/* timearg.c - see timearg.h. The calendar parts are strptime's; this file only picks the form. */
#include "timearg.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* "Z", "+HH:MM", "+HHMM", "-HH" or "" (UTC) as seconds east of UTC; -1 on anything else. */
static int zone_offset(const char *z, long *off)
{
    *off = 0;
    if (!*z || ((z[0] == 'Z' || z[0] == 'z') && !z[1]))
        return 0;
    if (z[0] != '+' && z[0] != '-')
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *e = strptime(z + 1, "%H:%M", &tm);
    if (!e || *e) {
        memset(&tm, 0, sizeof(tm));
        e = strptime(z + 1, "%H%M", &tm);
    }
    if (!e || *e || strlen(z + 1) < 2)
        return -1;
    *off = (z[0] == '-' ? -1 : 1) * (tm.tm_hour * 3600L + tm.tm_min * 60L);
    return 0;
}

/* YYYY-MM-DD, then optionally T (or a space) HH:MM[:SS[.fraction]] and a zone. */
static int calendar(const char *s, double *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *e = strptime(s, "%Y-%m-%d", &tm);
    if (!e || !isdigit((unsigned char)s[0]))
        return -1;
    double frac = 0;
    long off = 0;
    if (*e == 'T' || *e == 't' || *e == ' ') {
        e = strptime(e + 1, "%H:%M", &tm);
        if (!e)
            return -1;
        if (*e == ':' && !(e = strptime(e + 1, "%S", &tm)))
            return -1;
        if (*e == '.' && isdigit((unsigned char)e[1])) {
            char *fe;
            frac = strtod(e, &fe);
            e = fe;
        }
        if (zone_offset(e, &off))
            return -1;
    } else if (*e) {
        return -1;
    }
    *out = (double)timegm(&tm) + frac - (double)off;
    return 0;
}

int cp_parse_time(const char *s, time_t now, double *out)
{
    if (!s || !*s)
        return -1;
    time_t midnight = now - now % 86400;
    if (!strcmp(s, "now")) {
        *out = (double)now;
        return 0;
    }
    if (!strcmp(s, "today") || !strcmp(s, "yesterday")) {
        *out = (double)(midnight - (s[0] == 'y' ? 86400 : 0));
        return 0;
    }
    if (!isdigit((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end); /* epoch seconds */
    if (!*end && !errno) {
        *out = v;
        return 0;
    }
    unsigned long long n = strtoull(s, &end, 10); /* N followed by one unit: that long ago */
    if (!errno && end[0] && !end[1] && strchr("smhdw", end[0])) {
        static const char units[] = "smhdw";
        static const unsigned long long secs[] = {1, 60, 3600, 86400, 7 * 86400};
        unsigned long long u = secs[strchr(units, end[0]) - units];
        if (n > (unsigned long long)now / u)
            return -1; /* before the epoch */
        *out = (double)now - (double)(n * u);
        return 0;
    }
    return calendar(s, out);
}
