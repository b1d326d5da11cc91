/* test_pyline.c - analyze/native/python.c's CPython line-table decoder (python_addr2line, one format
 * from 3.11 to 3.14) against each interpreter's own decoder: tests/unit/pyline_vectors.py, run with
 * every interpreter found (CP_PYTHON311 or /usr/bin/python3.11, and pyenv's 3.11-3.14 builds),
 * prints each code object's co_linetable and its co_lines() ranges; every even byte offset of every
 * range must decode to the range's line, and a negative offset to co_firstlineno. Exit 77 (skip)
 * when none is there. */
#include "python.h"

#include <glob.h>
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

/* 0 when every offset of the vectors py prints decodes right, 1 when not */
static int one(const char *py, const char *script)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "%s %s", py, script);
    FILE *in = popen(cmd, "r");
    if (!in)
        return 1;
    static char line[1 << 20];
    static unsigned char table[1 << 19];
    size_t tlen = 0, codes = 0, addrs = 0, bad = 0;
    int first = 0, ended = 0;
    long expect_codes = -1;
    while (fgets(line, sizeof(line), in)) {
        line[strcspn(line, "\n")] = 0;
        char hex[sizeof(line)];
        long start, end, ln, nbytes;
        if (sscanf(line, "code %d %s %ld", &first, hex, &nbytes) == 3) {
            tlen = unhex(hex, table, sizeof(table));
            codes++;
            if (python_addr2line(table, tlen, first, -2) != first) {
                printf("FAIL: code %zu: a negative offset is not firstlineno %d\n", codes, first);
                bad++;
            }
        } else if (sscanf(line, "range %ld %ld %ld", &start, &end, &ln) == 3) {
            for (long a = start; a < end; a += 2) {
                int got = python_addr2line(table, tlen, first, a);
                addrs++;
                if (got != ln && bad++ < 20)
                    printf("FAIL: code %zu (first line %d): offset %ld: %d, CPython says %ld\n",
                           codes, first, a, got, ln);
            }
        } else if (sscanf(line, "end %ld", &expect_codes) == 1) {
            ended = 1;
        }
    }
    int rc = pclose(in);
    if (rc || !ended || expect_codes != (long)codes || codes < 100) {
        printf("FAIL: %s: the vector script (status %d, %zu code objects, end %s)\n", py, rc, codes,
               ended ? "seen" : "missing");
        return 1;
    }
    printf("%s: %zu code objects, %zu offsets: %zu wrong\n", py, codes, addrs, bad);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *py311 = getenv("CP_PYTHON311") ? getenv("CP_PYTHON311") : "/usr/bin/python3.11";
    if (argc < 2)
        return 2;
    int ran = 0, failed = 0;
    FILE *check = fopen(py311, "r");
    if (check) {
        fclose(check);
        failed |= one(py311, argv[1]);
        ran++;
    } else {
        printf("note: no %s\n", py311);
    }
    glob_t g;
    if (!glob("/root/.pyenv/versions/3.1[1-4].*/bin/python3.1[1-4]", 0, NULL, &g)) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            failed |= one(g.gl_pathv[i], argv[1]);
            ran++;
        }
        globfree(&g);
    }
    if (!ran) {
        printf("SKIP: no CPython 3.11-3.14 here\n");
        return 77;
    }
    return failed;
}
