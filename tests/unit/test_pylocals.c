/* test_pylocals.c - the reprs analyze/native/pylocals.c gives local values read from a core
 * (float, str, bytes) against the hook's (python/crashpack/_report.py Locals.repr: Python's own
 * repr(), cut to 120 bytes the same way): tests/unit/pylocals_vectors.py prints each value and the
 * hook's repr; every one must be the same bytes. Exit 77 (skip) without python3. */
#include "pylocals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t unhex(const char *h, unsigned char *out, size_t max)
{
    size_t n = 0;
    if (!strcmp(h, "-"))
        return 0;
    for (; h[0] && h[1] && n < max; h += 2) {
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1)
            break;
        out[n++] = (unsigned char)v;
    }
    return n;
}

static int check(char kind, const unsigned char *in, size_t n, const char *want, size_t *bad)
{
    char got[PY_LOCAL_VALUE_MAX + 8];
    if (kind == 'f') {
        double d;
        if (n != sizeof(d))
            return -1;
        memcpy(&d, in, sizeof(d));
        pylocals_repr_float(d, got, sizeof(got));
    } else if (kind == 's') {
        char s[4096];
        memcpy(s, in, n);
        s[n] = 0;
        /* the walker reads PY_LOCAL_VALUE_MAX + 1 characters of a longer str */
        size_t chars = 0;
        for (size_t i = 0; i < n; i++)
            if (((unsigned char)s[i] & 0xc0) != 0x80 && chars++ == PY_LOCAL_VALUE_MAX + 1) {
                s[i] = 0;
                break;
            }
        pylocals_repr_str(s, got, PY_LOCAL_VALUE_MAX);
    } else {
        size_t k = n > PY_LOCAL_VALUE_MAX + 1 ? PY_LOCAL_VALUE_MAX + 1 : n;
        pylocals_repr_bytes(in, k, n, got, PY_LOCAL_VALUE_MAX);
    }
    if (strcmp(got, want) && (*bad)++ < 20)
        printf("FAIL: %c value: C says %s, Python %s\n", kind, got, want);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_pylocals pylocals_vectors.py\n");
        return 2;
    }
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "python3 %s 2>/dev/null", argv[1]);
    FILE *in = popen(cmd, "r");
    if (!in) {
        printf("SKIP: no python3\n");
        return 77;
    }
    static char line[1 << 16];
    static unsigned char raw[8192], want[1024];
    size_t n = 0, bad = 0;
    long end = -1;
    while (fgets(line, sizeof(line), in)) {
        char kind, a[20000], b[4096];
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "end %ld", &end) == 1)
            break;
        if (sscanf(line, "%c %19999s %4095s", &kind, a, b) != 3)
            continue;
        size_t rn = unhex(a, raw, sizeof(raw)), wn = unhex(b, want, sizeof(want) - 1);
        want[wn] = 0;
        if (!check(kind, raw, rn, (const char *)want, &bad))
            n++;
    }
    int st = pclose(in);
    if (end < 0 && n == 0) {
        printf("SKIP: the vectors did not run (python3 missing? status %d)\n", st);
        return 77;
    }
    if ((long)n != end) {
        printf("FAIL: %zu values checked, the vectors have %ld\n", n, end);
        return 1;
    }
    printf("%s: %zu values (floats, str, bytes), %zu differ\n", bad ? "FAIL" : "ok", n, bad);
    return bad ? 1 : 0;
}
