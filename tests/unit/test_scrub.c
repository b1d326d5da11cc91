/* test_scrub.c - common/scrub.c: every whole occurrence is masked; a value cut at any point by a
 * buffer boundary (as the handler's core frames cut the stream) is masked on both sides; short
 * values and absolute paths are not hunted; the seam check needs only the previous buffer's
 * last maxlen-1 bytes. */
#include "scrub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...)                                                                            \
    do {                                                                                         \
        if (!(c)) {                                                                              \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
            fails++;                                                                             \
        }                                                                                        \
    } while (0)

static int contains(const uint8_t *b, size_t n, const char *v)
{
    return memmem(b, n, v, strlen(v)) != NULL;
}

int main(void)
{
    struct cp_scrub sc = {0};
    const char *secrets[] = {"hunter2-XYZZY-0001", "s3cr3tTokenValue", "abcdef"};
    for (int i = 0; i < 3; i++)
        CHECK(cp_scrub_add(&sc, secrets[i], strlen(secrets[i])) == 0, "add");
    cp_scrub_add(&sc, "true", 4);               /* too short to hunt */
    cp_scrub_add(&sc, "/usr/lib/x86_64", 15);   /* a path, not a secret */
    cp_scrub_add(&sc, secrets[0], strlen(secrets[0])); /* duplicate */
    CHECK(sc.n == 3, "3 values kept, got %zu", sc.n);
    CHECK(sc.maxlen == strlen(secrets[0]), "maxlen");

    /* a buffer with each secret at several places, "true" and the path in between */
    uint8_t base[600];
    memset(base, 'x', sizeof(base));
    size_t at[] = {0, 37, 100, 181, 250, 333, 420, 582};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        const char *v = secrets[i % 3];
        memcpy(base + at[i], v, strlen(v));
    }
    memcpy(base + 500, "true/usr/lib/x86_64", 19);

    /* whole buffer */
    uint8_t b[600];
    memcpy(b, base, sizeof(b));
    size_t m = cp_scrub_buf(&sc, b, sizeof(b));
    for (int i = 0; i < 3; i++)
        CHECK(!contains(b, sizeof(b), secrets[i]), "whole: %s left", secrets[i]);
    CHECK(contains(b, sizeof(b), "true/usr/lib/x86_64"), "whole: unrelated bytes kept");
    CHECK(m > 0 && memchr(b, '*', sizeof(b)), "whole: masked %zu", m);

    /* every split point, the way stream.c hands frames over: seam with the raw tail, then buf */
    for (size_t cut = 1; cut < sizeof(base); cut++) {
        uint8_t a[600], c2[600];
        memcpy(a, base, cut);
        memcpy(c2, base + cut, sizeof(base) - cut);
        size_t keep = sc.maxlen - 1 < cut ? sc.maxlen - 1 : cut;
        uint8_t tail[64];
        memcpy(tail, a + cut - keep, keep); /* before the first buffer's worker masks it */
        cp_scrub_buf(&sc, a, cut);
        cp_scrub_seam(&sc, tail, keep, c2, sizeof(base) - cut);
        cp_scrub_buf(&sc, c2, sizeof(base) - cut);
        uint8_t joined[600];
        memcpy(joined, a, cut);
        memcpy(joined + cut, c2, sizeof(base) - cut);
        for (int i = 0; i < 3; i++) {
            CHECK(!contains(joined, sizeof(joined), secrets[i]), "cut %zu: %s left", cut,
                  secrets[i]);
            /* at most EDGE_MIN-1 bytes of a value's start may stay before a cut */
            char head[CP_SCRUB_EDGE_MIN + 1];
            snprintf(head, sizeof(head), "%s", secrets[i]);
            CHECK(!contains(joined, sizeof(joined), head), "cut %zu: %s's first %d bytes left",
                  cut, secrets[i], CP_SCRUB_EDGE_MIN);
        }
        CHECK(contains(joined, sizeof(joined), "/usr/lib/x86_64"), "cut %zu: path masked", cut);
    }
    cp_scrub_free(&sc);
    CHECK(sc.n == 0 && cp_scrub_buf(&sc, b, sizeof(b)) == 0, "empty set masks nothing");
    if (fails)
        return 1;
    puts("all checks passed");
    return 0;
}
