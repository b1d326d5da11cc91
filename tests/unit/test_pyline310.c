/* test_pyline310.c - analyze/native/python310.c's CPython 3.10 line-table decoder (py310_addr2line)
 * against the interpreter's own decoder: tests/unit/pyline310_vectors.py, run with pyenv's 3.10
 * (CP_PYTHON310, else the newest /root/.pyenv/versions/3.10.x), prints each code object's
 * co_linetable and its co_lines() ranges; every even byte offset of every range must decode to the
 * range's line, and a negative offset to co_firstlineno. Each table is also decoded cut short at
 * every length and walked to its end (never a read past the copy: the sanitizer build checks).
 * Exit 77 (skip) when there is no 3.10. */
#include "python310.h"

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

/* decodes a malloc()ed copy of table[0..cut) (so the sanitizer sees a read past it) */
static int cut_decode(const unsigned char *table, size_t cut, int first, long a)
{
    unsigned char *c = malloc(cut ? cut : 1);
    if (!c)
        return -2;
    memcpy(c, table, cut);
    int r = py310_addr2line(c, cut, first, a);
    free(c);
    return r;
}

int main(int argc, char **argv)
{
    char py[4096] = "";
    if (getenv("CP_PYTHON310")) {
        snprintf(py, sizeof(py), "%s", getenv("CP_PYTHON310"));
    } else {
        glob_t g;
        if (!glob("/root/.pyenv/versions/3.10.*/bin/python3.10", 0, NULL, &g) && g.gl_pathc)
            snprintf(py, sizeof(py), "%s", g.gl_pathv[g.gl_pathc - 1]);
        globfree(&g);
    }
    if (argc < 2)
        return 2;
    FILE *check = py[0] ? fopen(py, "r") : NULL;
    if (!check) {
        printf("SKIP: no CPython 3.10 (CP_PYTHON310, /root/.pyenv/versions/3.10.*)\n");
        return 77;
    }
    fclose(check);
    char cmd[8300];
    snprintf(cmd, sizeof(cmd), "%s %s", py, argv[1]);
    FILE *in = popen(cmd, "r");
    if (!in)
        return 2;
    static char line[1 << 20];
    static char hex[1 << 20];
    static unsigned char table[1 << 19];
    size_t tlen = 0, codes = 0, addrs = 0, bad = 0, cuts = 0;
    int first = 0, ended = 0;
    long expect_codes = -1;
    while (fgets(line, sizeof(line), in)) {
        line[strcspn(line, "\n")] = 0;
        long start, end, ln, nbytes;
        if (sscanf(line, "code %d %s %ld", &first, hex, &nbytes) == 3) {
            tlen = unhex(hex, table, sizeof(table));
            codes++;
            if (py310_addr2line(table, tlen, first, -2) != first) {
                printf("FAIL: code %zu: a negative offset is not firstlineno %d\n", codes, first);
                bad++;
            }
        } else if (sscanf(line, "range %ld %ld %ld", &start, &end, &ln) == 3) {
            for (long a = start; a < end; a += 2) {
                int got = py310_addr2line(table, tlen, first, a);
                addrs++;
                if (got != ln && bad++ < 20)
                    printf("FAIL: code %zu (first line %d): offset %ld: %d, CPython says %ld\n",
                           codes, first, a, got, ln);
            }
            /* once per code object: every cut length, walked to its end */
            for (size_t cut = 0; start == 0 && cut < tlen; cut++, cuts++)
                if (cut_decode(table, cut, first, 1L << 20) == -2)
                    return 2;
        } else if (sscanf(line, "end %ld", &expect_codes) == 1) {
            ended = 1;
        }
    }
    int rc = pclose(in);
    if (rc || !ended || expect_codes != (long)codes || codes < 100) {
        printf("FAIL: the vector script (status %d, %zu code objects, end %s)\n", rc, codes,
               ended ? "seen" : "missing");
        return 1;
    }
    printf("%zu code objects, %zu offsets: %zu wrong; %zu cut tables decoded\n", codes, addrs, bad,
           cuts);
    return bad ? 1 : 0;
}
