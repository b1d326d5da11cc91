/* test_timearg.c - common/timearg.c: every accepted time form, and what is refused. */
#include "timearg.h"

#include <stdio.h>

static int fails;

static void ok(const char *s, double want)
{
    const time_t now = 1796156534; /* 2026-12-01T20:22:14Z */
    double got = -1;
    if (cp_parse_time(s, now, &got) || got != want) {
        fprintf(stderr, "FAIL: `%s`: got %.3f, want %.3f\n", s, got, want);
        fails++;
    }
}

static void bad(const char *s)
{
    double got;
    if (!cp_parse_time(s, 1796156534, &got)) {
        fprintf(stderr, "FAIL: `%s` accepted (%.3f)\n", s, got);
        fails++;
    }
}

int main(void)
{
    const double now = 1796156534, midnight = 1796083200; /* 2026-12-01T00:00:00Z */
    ok("now", now);
    ok("today", midnight);
    ok("yesterday", midnight - 86400);
    ok("30s", now - 30);
    ok("30m", now - 1800);
    ok("2h", now - 7200);
    ok("7d", now - 7 * 86400);
    ok("2w", now - 14 * 86400);
    ok("1795000000", 1795000000);
    ok("1795000000.5", 1795000000.5);
    ok("2026-11-30", midnight - 86400);
    ok("2026-11-30T10:00:00Z", midnight - 86400 + 36000);
    ok("2026-11-30t10:00:00z", midnight - 86400 + 36000);
    ok("2026-11-30T10:00Z", midnight - 86400 + 36000);
    ok("2026-11-30 10:00", midnight - 86400 + 36000);
    ok("2026-11-30T10:00:00.25Z", midnight - 86400 + 36000.25);
    ok("2026-11-30T11:00:00+01:00", midnight - 86400 + 36000);
    ok("2026-11-30T05:30:00-0430", midnight - 86400 + 36000);
    const char *refused[] = {"", "2abc", "tomorrow", "2x", "-2h", "h", "2026-11", "2026-11-30T",
                             "2026-11-30T10:00:00+1", "2026-11-30X", "2026-11-30T10:00:00Zjunk",
                             "99999999999999999999d"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        bad(refused[i]);
    if (fails)
        return 1;
    puts("all checks passed");
    return 0;
}
