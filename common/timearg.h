/* timearg.h - a point in time as a person types it on a command line (--since, --until). */
#ifndef CRASHPACK_TIMEARG_H
#define CRASHPACK_TIMEARG_H

#include <time.h>

/* The accepted forms, for error messages. */
#define CP_TIME_FORMS                                                                              \
    "RFC 3339 (2026-11-30T10:00:00Z, +01:00), a date (2026-11-30), N s/m/h/d/w ago (30m, 2h, 7d), " \
    "today, yesterday, now, or epoch seconds"

/* s as seconds since the epoch; `now` is the reference of the relative forms. Dates, `today` and
 * `yesterday` are midnight UTC (the knowledge base shows times in UTC); RFC 3339 without a zone
 * is UTC. Returns 0, or -1 when s is none of CP_TIME_FORMS. */
int cp_parse_time(const char *s, time_t now, double *out);

#endif
