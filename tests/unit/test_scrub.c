/* test_scrub.c - common/scrub.c and common/shapes.c (issues 16 and 22).
 *
 * Known values: every whole occurrence is masked; a value cut at any point by a buffer boundary
 * (as the handler's core frames cut the stream) is masked on both sides; short values and
 * absolute paths are not hunted; the seam check needs only the previous buffer's last maxlen-1
 * bytes.
 *
 * Shapes, over the corpus tests/unit/secrets-corpus.tsv (the one the Python hook's test and the
 * e2e test read): each line's secret value is masked whole, byte for byte, in the line alone, in
 * a JSON member (which stays valid JSON), in a NUL-separated command line, in a stream cut at
 * every point and in chunks of every size up to 64 (at most CP_SCRUB_EDGE_MIN-1 bytes of a
 * value's start may leave with a chunk before the cut), and through cp_mask_cmdline; the whole
 * corpus masks to tests/unit/secrets-corpus.masked, byte for byte, as the Python hook masks it;
 * the lines of tests/unit/secrets-clean.txt stay as they are; a value found by its shape is
 * learned and hunted bare; a key block whose BEGIN a tail cut off is masked, not the text before
 * it; a member is JSON by its name; a pathological input is scanned in linear time.
 *
 * test_scrub [--write-golden]: the second form rewrites secrets-corpus.masked. */
#include "config.h"
#include "scrub.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static void known_values(void)
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
}

/* ---- the corpus ---- */

#define GLOBS "acmelic-*" /* the corpus's config_value_glob line */
#define MAXROWS 256

struct row {
    char name[64];
    char *value, *line; /* the line with its \n decoded */
};
static struct row rows[MAXROWS];
static size_t nrows;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    for (size_t k; s && (k = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap)
            s = realloc(s, cap *= 2);
    }
    fclose(f);
    if (s)
        s[n] = 0;
    *len = n;
    return s;
}

static void load_corpus(void)
{
    size_t len;
    char *t = slurp(CP_SOURCE_DIR "/tests/unit/secrets-corpus.tsv", &len);
    if (!t) {
        fprintf(stderr, "FAIL: cannot read the corpus\n");
        exit(1);
    }
    for (char *save, *l = strtok_r(t, "\n", &save); l && nrows < MAXROWS;
         l = strtok_r(NULL, "\n", &save)) {
        char *v = strchr(l, '\t'), *ln = v ? strchr(v + 1, '\t') : NULL;
        if (l[0] == '#' || !ln)
            continue;
        *v++ = 0;
        *ln++ = 0;
        struct row *r = &rows[nrows++];
        snprintf(r->name, sizeof(r->name), "%s", l);
        r->value = strdup(v);
        r->line = malloc(strlen(ln) + 1);
        char *o = r->line;
        for (const char *p = ln; *p; p++)
            if (p[0] == '\\' && p[1] == 'n')
                *o++ = '\n', p++;
            else
                *o++ = *p;
        *o = 0;
    }
    free(t);
    CHECK(nrows >= 30, "the corpus has %zu forms, at least 30 expected", nrows);
}

/* Every occurrence of `value` in orig (len bytes) is masked in out, but for at most `allow`
 * bytes of its start. */
static int all_masked(const char *orig, const char *out, size_t len, const char *value,
                      size_t allow)
{
    size_t vl = strlen(value);
    int seen = 0;
    for (const char *p = orig; (p = memmem(p, len - (size_t)(p - orig), value, vl)); p += vl) {
        seen = 1;
        for (size_t k = allow; k < vl; k++)
            if (out[p - orig + k] != '*')
                return 0;
    }
    return seen;
}

/* The corpus as text: every line, each followed by a line break. */
static char *corpus_text(size_t *len)
{
    size_t n = 0;
    for (size_t i = 0; i < nrows; i++)
        n += strlen(rows[i].line) + 1;
    char *t = malloc(n + 1), *o = t;
    for (size_t i = 0; i < nrows; i++)
        o += sprintf(o, "%s\n", rows[i].line);
    *len = n;
    return t;
}

static size_t text(char *s, size_t n)
{
    struct cp_scrub sc = {.globs = GLOBS};
    return cp_scrub_text(&sc, (uint8_t *)s, n);
}

static void corpus_lines(void)
{
    for (size_t i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        size_t n = strlen(r->line);
        char *s = strdup(r->line);
        text(s, n);
        CHECK(all_masked(r->line, s, n, r->value, 0), "%s: value left in \"%s\"", r->name, s);
        /* a command line: the line is one argument of a NUL-separated /proc/<pid>/cmdline */
        char *cl = malloc(n + 32);
        memcpy(cl, "train\0", 6);
        memcpy(cl + 6, r->line, n);
        memcpy(cl + 6 + n,
               "\0--epochs\0"
               "3",
               12);
        char *m = malloc(n + 32);
        memcpy(m, cl, n + 18);
        text(m, n + 18);
        CHECK(all_masked(cl, m, n + 18, r->value, 0), "%s: value left in a command line", r->name);
        free(cl);
        free(m);
        free(s);
    }
}

/* The line as the message of an exception.json-like member: scrubbed, it is still JSON. */
static void corpus_json(void)
{
    for (size_t i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "message", r->line);
        cJSON_AddStringToObject(o, r->name, r->line);
        cJSON *a = cJSON_AddArrayToObject(o, "cmdline");
        cJSON_AddItemToArray(a, cJSON_CreateString("train"));
        cJSON_AddItemToArray(a, cJSON_CreateString(r->line));
        cJSON_AddNumberToObject(o, "n", 7);
        char *js = cJSON_Print(o);
        size_t n = strlen(js);
        text(js, n);
        CHECK(!strstr(js, r->value), "%s: value left in JSON %s", r->name, js);
        cJSON *back = cJSON_Parse(js);
        CHECK(back && cJSON_GetNumberValue(cJSON_GetObjectItem(back, "n")) == 7 &&
                  cJSON_GetArraySize(cJSON_GetObjectItem(back, "cmdline")) == 2,
              "%s: not the same JSON after the scrub: %s", r->name, js);
        cJSON_Delete(back);
        cJSON_Delete(o);
        free(js);
    }
}

/* The corpus through a stream cut at `cuts` (ascending, < n). */
static void stream_cut(const char *t, size_t n, const size_t *cuts, size_t ncuts, const char *how)
{
    char *s = malloc(n);
    memcpy(s, t, n);
    struct cp_scrub sc = {.globs = GLOBS};
    struct cp_scrub_stream st = {.sc = &sc};
    size_t from = 0;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t to = k < ncuts ? cuts[k] : n;
        cp_scrub_stream(&st, (uint8_t *)s + from, to - from);
        from = to;
    }
    for (size_t i = 0; i < nrows; i++)
        CHECK(all_masked(t, s, n, rows[i].value, CP_SCRUB_EDGE_MIN - 1), "%s: %s: value left", how,
              rows[i].name);
    free(s);
}

static void corpus_stream(void)
{
    size_t n;
    char *t = corpus_text(&n);
    char how[64];
    for (size_t cut = 1; cut < n; cut++) {
        snprintf(how, sizeof(how), "cut at %zu", cut);
        stream_cut(t, n, &cut, 1, how);
    }
    size_t *cuts = malloc(n * sizeof(*cuts));
    for (size_t chunk = 1; chunk <= 64; chunk++) {
        size_t nc = 0;
        for (size_t c = chunk; c < n; c += chunk)
            cuts[nc++] = c;
        snprintf(how, sizeof(how), "chunks of %zu", chunk);
        stream_cut(t, n, cuts, nc, how);
    }
    /* a line a chunk (a terminal's writes): the same masks as the whole text */
    char *whole = malloc(n), *s = malloc(n);
    memcpy(whole, t, n);
    memcpy(s, t, n);
    text(whole, n);
    struct cp_scrub sc = {.globs = GLOBS};
    struct cp_scrub_stream st = {.sc = &sc};
    for (size_t a = 0, e; a < n; a = e) {
        e = (size_t)((char *)memchr(s + a, '\n', n - a) - s) + 1;
        cp_scrub_stream(&st, (uint8_t *)s + a, e - a);
    }
    CHECK(!memcmp(s, whole, n), "a line a chunk: not the same masks as the whole text");
    free(whole);
    free(s);
    free(cuts);
    free(t);
}

/* The whole corpus masks to secrets-corpus.masked (the Python hook's test reads it too). */
static void corpus_golden(int write)
{
    size_t n, gl;
    char *t = corpus_text(&n);
    text(t, n);
    const char *path = CP_SOURCE_DIR "/tests/unit/secrets-corpus.masked";
    if (write) {
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(t, 1, n, f) == n && !fclose(f), "cannot write %s", path);
        free(t);
        return;
    }
    char *g = slurp(path, &gl);
    CHECK(g && gl == n && !memcmp(g, t, n), "the corpus does not mask to %s", path);
    if (g && gl == n)
        for (size_t i = 0, line = 1; i < n; i++) {
            if (g[i] != t[i]) {
                fprintf(stderr, "  first difference: line %zu\n", line);
                break;
            }
            line += t[i] == '\n';
        }
    free(g);
    free(t);
}

/* Ordinary output stays as it is. */
static void clean_lines(void)
{
    size_t n;
    char *t = slurp(CP_SOURCE_DIR "/tests/unit/secrets-clean.txt", &n);
    CHECK(t != NULL, "cannot read secrets-clean.txt");
    for (char *save, *l = t ? strtok_r(t, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        if (l[0] == '#')
            continue;
        char *s = strdup(l);
        text(s, strlen(s));
        CHECK(!strcmp(s, l), "a false positive: \"%s\" became \"%s\"", l, s);
        free(s);
    }
    free(t);
}

/* A value found by its shape is learned: hunted bare elsewhere (the handler's core). */
static void learning(void)
{
    struct cp_scrub sc = {.learn = 1};
    char a[] = "export HF_TOKEN=hf_QpZ7wLx0mN3bV5cT8yR2uK6jH4gF1dS9aZ0x";
    cp_scrub_text(&sc, (uint8_t *)a, strlen(a));
    CHECK(sc.n >= 1, "nothing learned");
    char b[] = "stack: hf_QpZ7wLx0mN3bV5cT8yR2uK6jH4gF1dS9aZ0x end";
    cp_scrub_buf(&sc, (uint8_t *)b, strlen(b));
    CHECK(!strstr(b, "QpZ7wLx0mN3bV5cT8yR2uK6jH4gF1dS9aZ0x"), "a learned value left: %s", b);
    cp_scrub_free(&sc);
}

/* A tail that starts inside a key block: its base64 lines are masked up to the END line, the
 * text before them is not; the same in a JSON string. */
#define ORPHAN_BODY "Zm9vYmFyQ3E5OWJvZHkxMjM0NTY3ODkwYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo0"
static void orphan_end(void)
{
    const char *t = "d2hhdGV2ZXIgY3V0IGxpbmU=\n" ORPHAN_BODY "\n" ORPHAN_BODY "\n"
                    "-----END RSA PRIVATE KEY-----\nsaved: done, 3 files\n";
    char *s = strdup(t);
    text(s, strlen(s));
    CHECK(!strstr(s, ORPHAN_BODY) && !strstr(s, "d2hhdGV2") && strstr(s, "\n-----END RSA") &&
              strstr(s, "saved: done, 3 files"),
          "a key block cut at its start: %s", s);
    free(s);
    const char *u = "ok, the key follows (prose)\n" ORPHAN_BODY "\n-----END PRIVATE KEY-----\n";
    s = strdup(u);
    text(s, strlen(s));
    CHECK(!strstr(s, ORPHAN_BODY) && !strncmp(s, "ok, the key follows (prose)\n", 28),
          "the text before a cut key block: %s", s);
    free(s);
    const char *j = "{\"tail\": \"" ORPHAN_BODY "\\n" ORPHAN_BODY "\\n-----END EC PRIVATE "
                    "KEY-----\\n\", \"n\": 1}";
    s = strdup(j);
    cp_scrub_member(NULL, "logs.json", (uint8_t *)s, strlen(s));
    cJSON *back = cJSON_Parse(s);
    CHECK(!strstr(s, ORPHAN_BODY) && back, "a key block cut at its start, in JSON: %s", s);
    cJSON_Delete(back);
    free(s);
}

/* A member is JSON by its name: an output tail whose first line is JSON is text. */
static void member_kind(void)
{
    char t[] = "{\"step\": 1}\nlogin token=\"Tq7x9vB2mK4\" ok\n";
    cp_scrub_member(NULL, "output.txt", (uint8_t *)t, strlen(t));
    CHECK(!strstr(t, "Tq7x9vB2mK4"), "output.txt: %s", t);
    char j[] = "{\"msg\": \"run --token=\", \"next\": \"x\"}";
    cp_scrub_member(NULL, "exception.json", (uint8_t *)j, strlen(j));
    CHECK(!strcmp(j, "{\"msg\": \"run --token=\", \"next\": \"x\"}"), "exception.json: %s", j);
}

/* cp_mask_cmdline (capture/secret.c): argv as the capture and crashpack run see it. */
static void cmdline(void)
{
    struct cp_config cfg;
    cp_config_defaults(&cfg);
    char a0[] = "/usr/bin/mysql", a1[] = "-u", a2[] = "root", a3[] = "-pS3cretMysqlPw", a4[] = "db";
    char *av[] = {a0, a1, a2, a3, a4};
    cp_mask_cmdline(&cfg, av, 5);
    CHECK(!strcmp(a3, "-p*************") && !strcmp(a4, "db") && !strcmp(a2, "root"),
          "mysql -pX: %s %s %s", a2, a3, a4);
    char b0[] = "python3", b1[] = "train.py", b2[] = "--hub-token",
         b3[] = "hf_abcdefghijklmnopqrstuvwxyz0123456789", b4[] = "url=https://u:pw123456@h/x",
         b5[] = "-pthread";
    char *bv[] = {b0, b1, b2, b3, b4, b5};
    cp_mask_cmdline(&cfg, bv, 6);
    CHECK(!strchr(b3, 'a') && strstr(b4, "u:********@h") && !strcmp(b5, "-pthread"),
          "python3 train.py: %s %s %s", b3, b4, b5);
}

/* Linear time on what would make a naive matcher quadratic, and a stream's memory is its
 * struct. */
static void pathological(void)
{
    static const char *const bits[] = {"eyJ",
                                       "eyJabcdefghijk.",
                                       "-----BEGIN RSA PRIVATE KEY-----\n",
                                       "-----END RSA PRIVATE KEY-----\n",
                                       " -p",
                                       "mysql ",
                                       "ab://",
                                       "password=",
                                       "::",
                                       "==",
                                       "\"token\": \"",
                                       "Bearer ",
                                       "hf_",
                                       "AKIA",
                                       "wandb login ",
                                       "--token ",
                                       "x:y@",
                                       "\\\"",
                                       "-",
                                       "a"};
    size_t n = 8 << 20;
    char *s = malloc(n);
    unsigned seed = 1;
    for (size_t i = 0; i < n;) {
        seed = seed * 1103515245 + 12345;
        const char *b = bits[(seed >> 16) % (sizeof(bits) / sizeof(bits[0]))];
        size_t l = strlen(b);
        memcpy(s + i, b, l < n - i ? l : n - i);
        i += l;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    text(s, n);
    struct cp_scrub_stream st = {0};
    for (size_t i = 0; i < n; i += 4096)
        cp_scrub_stream(&st, (uint8_t *)s + i, 4096);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("8 MiB of triggers, whole and streamed: %.2f s\n", sec);
    CHECK(sec < 30, "8 MiB of triggers took %.1f s", sec);
    CHECK(sizeof(struct cp_scrub_stream) < 1024, "a stream's state is %zu bytes",
          sizeof(struct cp_scrub_stream));
    free(s);
}

int main(int argc, char **argv)
{
    int write = argc > 1 && !strcmp(argv[1], "--write-golden");
    known_values();
    load_corpus();
    if (write) {
        corpus_golden(1);
        return fails != 0;
    }
    corpus_lines();
    corpus_json();
    corpus_stream();
    corpus_golden(0);
    clean_lines();
    learning();
    orphan_end();
    member_kind();
    cmdline();
    pathological();
    printf("%zu corpus forms\n", nrows);
    if (fails)
        return 1;
    puts("all checks passed");
    return 0;
}
