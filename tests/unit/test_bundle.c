/* test_bundle.c - the bundle reader (bundle/bundle.c) against bundles written here, by hand, with
 * libzstd, following docs/bundle-format.md: listing, reads across frames, walk mode, truncation at
 * every offset, bad indexes, unsafe names, frames that lie about their size, random corruption.
 *
 * `test_bundle --corpus DIR` writes a few small bundles into DIR (the fuzzer's seed corpus).
 * Prints `N passed, N failed`; exits 1 when something failed. */
#include "bundle.h"
#include "bundlew.h"

#include <cjson/cJSON.h>
#include <zstd.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAS_ASAN 1
#endif
#endif
#ifndef HAS_ASAN
#define HAS_ASAN 0
#endif

static int passed, failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                   \
            failed++;                                                                              \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Quiet check for loops with thousands of iterations: counts once per loop. */
#define LOOPCHECK(flag, cond, ...)                                                                 \
    do {                                                                                           \
        if (!(cond) && !(flag)) {                                                                  \
            (flag) = 1;                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static char tmpdir[256];

/* ---- a byte buffer ---- */

struct buf {
    unsigned char *p;
    size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->len + n)
            c *= 2;
        b->p = realloc(b->p, c);
        if (!b->p)
            abort();
        b->cap = c;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void put32(struct buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(b, x, 4);
}

/* ---- the test writer: markers, frames, tar headers, index (docs/bundle-format.md) ---- */

struct tw_member {
    char *name;
    uint64_t size, header, data;
    cJSON *frames;
    size_t nframes;
};

struct tw {
    struct buf f; /* the file */
    uint64_t tar; /* tar offset */
    struct tw_member m[32];
    size_t n;
};

static void ustar_header(unsigned char *h, const char *name, uint64_t size)
{
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0640);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    snprintf((char *)h + 136, 12, "%011o", 1700000000);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static void tw_frame(struct tw *w, struct tw_member *m, const void *src, size_t len)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1);
    size_t cap = ZSTD_compressBound(len);
    void *dst = malloc(cap);
    size_t r = ZSTD_compress2(c, dst, cap, src, len);
    if (ZSTD_isError(r))
        abort();
    double v[4] = {(double)w->f.len, (double)r, (double)w->tar, (double)len};
    cJSON_AddItemToArray(m->frames, cJSON_CreateDoubleArray(v, 4));
    m->nframes++;
    put(&w->f, dst, r);
    w->tar += len;
    free(dst);
    ZSTD_freeCCtx(c);
}

static void tw_marker(struct tw *w, const char *name, uint64_t size, uint64_t header, uint64_t data)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "member", name);
    cJSON_AddNumberToObject(j, "size", (double)size);
    cJSON_AddNumberToObject(j, "header", (double)header);
    cJSON_AddNumberToObject(j, "data", (double)data);
    char *s = cJSON_PrintUnformatted(j);
    put32(&w->f, BUNDLE_MAGIC_MARKER);
    put32(&w->f, (uint32_t)strlen(s));
    put(&w->f, s, strlen(s));
    free(s);
    cJSON_Delete(j);
}

/* A member: marker, then either one frame (header + data + padding, frame_size 0) or a header
 * frame and data frames of frame_size bytes, the last holding the padding. */
static void tw_member(struct tw *w, const char *name, const void *data, size_t len,
                      size_t frame_size)
{
    struct tw_member *m = &w->m[w->n++];
    m->name = strdup(name);
    m->size = len;
    m->header = w->tar;
    m->data = w->tar + 512;
    m->frames = cJSON_CreateArray();
    tw_marker(w, name, len, m->header, m->data);
    size_t padded = (len + 511) / 512 * 512;
    unsigned char *all = calloc(1, 512 + padded);
    ustar_header(all, name, len);
    memcpy(all + 512, data, len);
    if (!frame_size) {
        tw_frame(w, m, all, 512 + padded);
    } else {
        tw_frame(w, m, all, 512);
        for (size_t off = 0; off < padded;) {
            size_t n = padded - off;
            if (n > frame_size && len - off > frame_size)
                n = frame_size;
            tw_frame(w, m, all + 512 + off, n);
            off += n;
        }
    }
    free(all);
}

/* Builds the index JSON text. */
static char *tw_index_json(struct tw *w)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", BUNDLE_INDEX_FORMAT);
    cJSON_AddNumberToObject(root, "tar_size", (double)(w->tar + 1024));
    cJSON *ms = cJSON_AddArrayToObject(root, "members");
    for (size_t i = 0; i < w->n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", w->m[i].name);
        cJSON_AddNumberToObject(o, "size", (double)w->m[i].size);
        cJSON_AddNumberToObject(o, "header", (double)w->m[i].header);
        cJSON_AddNumberToObject(o, "data", (double)w->m[i].data);
        cJSON_AddItemToObject(o, "frames", cJSON_Duplicate(w->m[i].frames, 1));
        cJSON_AddItemToArray(ms, o);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static void tw_index_raw(struct tw *w, const char *json, size_t n)
{
    put32(&w->f, BUNDLE_MAGIC_INDEX);
    put32(&w->f, (uint32_t)n + 12);
    put(&w->f, json, n);
    put32(&w->f, (uint32_t)n);
    put(&w->f, BUNDLE_INDEX_TRAILER, BUNDLE_INDEX_TRAILER_LEN);
}

/* The tar end frame, then the index (unless with_index is 0). */
static void tw_finish(struct tw *w, int with_index)
{
    static const unsigned char zero[1024];
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    unsigned char dst[256];
    size_t r = ZSTD_compress2(c, dst, sizeof(dst), zero, sizeof(zero));
    if (ZSTD_isError(r))
        abort();
    put(&w->f, dst, r);
    ZSTD_freeCCtx(c);
    if (with_index) {
        char *s = tw_index_json(w);
        tw_index_raw(w, s, strlen(s));
        free(s);
    }
}

static void tw_free(struct tw *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->m[i].name);
        cJSON_Delete(w->m[i].frames);
    }
    free(w->f.p);
    memset(w, 0, sizeof(*w));
}

/* ---- fixtures ---- */

static unsigned char core[50000];
static const char manifest[] = "{\"format\":\"crashpack-manifest/1\",\"pid\":42,\"tid\":43,"
                               "\"signal\":11,\"exe\":\"/usr/bin/x\",\"cmdline\":[\"x\",\"-v\"]}";
static const char status_txt[] = "Name:\tx\nState:\tR (running)\n";
static const char capture[] = "{\"format\":\"crashpack-capture/1\",\"status\":\"complete\"}";

static void make_core(void)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof(core); i++) {
        x = x * 1103515245 + 12345;
        /* half random (real frames), half runs (compressible) */
        core[i] = (i / 3000) % 2 ? (unsigned char)(x >> 16) : (unsigned char)(i / 700);
    }
}

/* The standard test bundle: manifest, proc/status, core in 4096-byte frames, capture.json. */
static void build_standard(struct tw *w, int with_index)
{
    memset(w, 0, sizeof(*w));
    tw_member(w, "manifest.json", manifest, strlen(manifest), 0);
    tw_member(w, "proc/status", status_txt, strlen(status_txt), 0);
    tw_member(w, "core", core, sizeof(core), 4096);
    tw_member(w, "capture.json", capture, strlen(capture), 0);
    tw_finish(w, with_index);
}

static const void *expected_data(const char *name, size_t *len)
{
    if (!strcmp(name, "manifest.json"))
        return *len = strlen(manifest), manifest;
    if (!strcmp(name, "proc/status"))
        return *len = strlen(status_txt), status_txt;
    if (!strcmp(name, "core"))
        return *len = sizeof(core), core;
    if (!strcmp(name, "capture.json"))
        return *len = strlen(capture), capture;
    return NULL;
}

static void write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, p, n) != (ssize_t)n) {
        perror(path);
        exit(2);
    }
    close(fd);
}

static char *tpath(const char *name)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
    return p;
}

/* Opens bytes as a bundle through a memfd (bundle_open_fd). */
static int open_bytes(const void *p, size_t n, struct bundle **b, char *err, size_t errlen)
{
    int fd = memfd_create("bundle", MFD_CLOEXEC);
    if (fd < 0 || (n && pwrite(fd, p, n, 0) != (ssize_t)n)) {
        perror("memfd");
        exit(2);
    }
    int rc = bundle_open_fd(fd, b, err, errlen);
    close(fd);
    return rc;
}

/* Reads every member in full (and a few ranges) to exercise the reader; returns 0. */
static void read_everything(struct bundle *b)
{
    static unsigned char tmp[70000];
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        size_t got;
        (void)bundle_read(b, m, 0, tmp, sizeof(tmp), &got);
        (void)bundle_read(b, m, m->size / 2, tmp, 5000, &got);
        (void)bundle_read(b, m, m->size ? m->size - 1 : 0, tmp, 10, &got);
        char *all = NULL;
        size_t len;
        (void)bundle_read_all(b, m->name, 1 << 20, &all, &len);
        free(all);
    }
}

/* ---- tests ---- */

static void test_listing_and_reads(void)
{
    struct tw w;
    build_standard(&w, 1);
    struct bundle *b = NULL;
    char err[256] = "";
    write_file(tpath("t.zst"), w.f.p, w.f.len);
    int rc = bundle_open(tpath("t.zst"), &b, err, sizeof(err));
    CHECK(rc == 0 && b, "open: %d %s", rc, err);
    if (!b) {
        tw_free(&w);
        return;
    }
    CHECK(bundle_complete(b) == 1, "complete: %s", bundle_reason(b));
    CHECK(!strcmp(bundle_reason(b), ""), "reason `%s`", bundle_reason(b));
    CHECK(bundle_member_count(b) == 4, "count %zu", bundle_member_count(b));
    CHECK(bundle_file_size(b) == w.f.len, "file size");
    CHECK(bundle_tar_size(b) == w.tar + 1024, "tar size %llu",
          (unsigned long long)bundle_tar_size(b));
    const char *names[] = {"manifest.json", "proc/status", "core", "capture.json"};
    for (size_t i = 0; i < 4; i++) {
        const struct bundle_member *m = bundle_member(b, i);
        size_t elen;
        expected_data(names[i], &elen);
        CHECK(m && !strcmp(m->name, names[i]), "member %zu name", i);
        CHECK(m && m->size == elen && m->available == elen && !m->truncated, "member %s size",
              names[i]);
        CHECK(m && m->compressed > 0 && m->nframes >= 1, "member %s frames", names[i]);
    }
    CHECK(bundle_member(b, 4) == NULL, "member out of range");
    CHECK(bundle_find(b, "nope") == NULL, "find absent");
    const struct bundle_member *c = bundle_find(b, "core");
    CHECK(c && c->nframes == 1 + 13, "core frames %zu", c ? c->nframes : 0);

    char *txt = NULL;
    size_t len = 0;
    rc = bundle_read_all(b, "manifest.json", 4096, &txt, &len);
    CHECK(rc == 0 && len == strlen(manifest) && !memcmp(txt, manifest, len) && txt[len] == 0,
          "read_all manifest rc=%d", rc);
    free(txt);
    rc = bundle_read_all(b, "core", 1000, &txt, &len);
    CHECK(rc == BUNDLE_ETOOBIG && txt == NULL, "read_all over max: %d", rc);
    rc = bundle_read_all(b, "nope", 1000, &txt, &len);
    CHECK(rc == BUNDLE_ENOENT && txt == NULL, "read_all absent: %d", rc);

    /* reads across frame boundaries, at many offsets and lengths */
    static unsigned char got_buf[60000];
    int bad = 0;
    const size_t offs[] = {0, 1, 4095, 4096, 4097, 8191, 12000, 40959, 40960, 49151, 49999};
    const size_t lens[] = {1, 2, 100, 4096, 4097, 9000, 50000};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
        for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
            size_t got = 99;
            rc = bundle_read(b, c, offs[i], got_buf, lens[j], &got);
            size_t want = sizeof(core) - offs[i] < lens[j] ? sizeof(core) - offs[i] : lens[j];
            LOOPCHECK(bad, rc == 0 && got == want && !memcmp(got_buf, core + offs[i], got),
                      "read off=%zu len=%zu rc=%d got=%zu", offs[i], lens[j], rc, got);
        }
    CHECK(!bad, "reads across frames");
    /* backwards reads (cache misses) */
    bad = 0;
    for (size_t off = sizeof(core) - 700; off < sizeof(core); off -= 3001) {
        size_t got;
        rc = bundle_read(b, c, off, got_buf, 700, &got);
        LOOPCHECK(bad, rc == 0 && got == 700 && !memcmp(got_buf, core + off, 700), "off %zu", off);
    }
    CHECK(!bad, "backward reads");
    size_t got = 7;
    rc = bundle_read(b, c, sizeof(core), got_buf, 10, &got);
    CHECK(rc == 0 && got == 0, "read at end: rc=%d got=%zu", rc, got);
    rc = bundle_read(b, c, UINT64_MAX, got_buf, 10, &got);
    CHECK(rc == 0 && got == 0, "read far past end: rc=%d got=%zu", rc, got);
    rc = bundle_read_name(b, "proc/status", 6, got_buf, 100, &got);
    CHECK(rc == 0 && got == strlen(status_txt) - 6 && !memcmp(got_buf, status_txt + 6, got),
          "read_name");
    struct bundle_member fake = *c;
    rc = bundle_read(b, &fake, 0, got_buf, 10, &got);
    CHECK(rc == BUNDLE_EINVAL, "foreign member pointer refused: %d", rc);

    /* extract */
    const char *out = tpath("core.out");
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    rc = bundle_extract(b, "core", fd);
    close(fd);
    CHECK(rc == 0, "extract: %d %s", rc, bundle_error(b));
    struct stat st;
    CHECK(stat(out, &st) == 0 && st.st_size == (off_t)sizeof(core), "extract size");
    fd = open(out, O_RDONLY);
    ssize_t n = read(fd, got_buf, sizeof(got_buf));
    close(fd);
    CHECK(n == (ssize_t)sizeof(core) && !memcmp(got_buf, core, sizeof(core)), "extract content");
    bundle_close(b);

    /* open by fd */
    fd = open(tpath("t.zst"), O_RDONLY);
    rc = bundle_open_fd(fd, &b, err, sizeof(err));
    CHECK(rc == 0 && bundle_complete(b), "open_fd: %s", err);
    bundle_close(b);
    close(fd);

    /* the helper writes what tar itself reads: check with the real tools when present */
    if (system("command -v zstd >/dev/null 2>&1 && command -v tar >/dev/null 2>&1") == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "cd %s && zstd -qdc t.zst | tar -tf - > list.txt 2>/dev/null && "
                 "printf 'manifest.json\\nproc/status\\ncore\\ncapture.json\\n' | cmp -s - "
                 "list.txt && rm -rf x && mkdir x && zstd -qdc t.zst | tar -xf - -C x && "
                 "cmp -s x/core core.out",
                 tmpdir);
        CHECK(system(cmd) == 0, "zstd | tar lists and extracts the test bundle");
    }
    tw_free(&w);
}

static void test_walk_mode(void)
{
    struct tw w;
    build_standard(&w, 0);
    struct bundle *b = NULL;
    char err[256] = "";
    int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    CHECK(rc == 0 && b, "open without index: %s", err);
    if (!b) {
        tw_free(&w);
        return;
    }
    CHECK(!bundle_complete(b), "partial");
    CHECK(strstr(bundle_reason(b), "no index") != NULL, "reason: %s", bundle_reason(b));
    CHECK(bundle_member_count(b) == 4, "walk finds 4 members, %zu", bundle_member_count(b));
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        size_t elen;
        const void *e = expected_data(m->name, &elen);
        char *all = NULL;
        size_t len;
        rc = bundle_read_all(b, m->name, 1 << 20, &all, &len);
        CHECK(e && rc == 0 && !m->truncated && len == elen && !memcmp(all, e, elen),
              "walk read %s rc=%d", m->name, rc);
        free(all);
    }
    const struct bundle_member *c = bundle_find(b, "core");
    static unsigned char buf[9000];
    size_t got;
    rc = bundle_read(b, c, 4000, buf, 9000, &got);
    CHECK(rc == 0 && got == 9000 && !memcmp(buf, core + 4000, 9000), "walk read across frames");
    CHECK(bundle_tar_size(b) == w.tar + 1024, "walk tar size");
    bundle_close(b);
    tw_free(&w);
}

/* Cuts the standard bundle at every offset: never a crash; every member whose frames all lie
 * before the cut is complete and correct; a cut member reads its available prefix correctly. */
static void test_truncation(void)
{
    struct tw w;
    build_standard(&w, 1);
    /* where each member's last frame ends, from the writer's own frame lists */
    uint64_t ends[4];
    for (size_t i = 0; i < 4; i++) {
        cJSON *last = cJSON_GetArrayItem(w.m[i].frames, (int)w.m[i].nframes - 1);
        ends[i] = (uint64_t)(cJSON_GetArrayItem(last, 0)->valuedouble +
                             cJSON_GetArrayItem(last, 1)->valuedouble);
    }
    int bad_complete = 0, bad_member = 0, bad_prefix = 0, bad_open = 0;
    size_t opened = 0;
    for (size_t cut = 0; cut <= w.f.len; cut++) {
        struct bundle *b = NULL;
        char err[256];
        int rc = open_bytes(w.f.p, cut, &b, err, sizeof(err));
        if (rc) {
            /* only acceptable before the first marker is complete */
            LOOPCHECK(bad_open, cut < 80, "cut %zu: open failed: %s", cut, err);
            continue;
        }
        opened++;
        LOOPCHECK(bad_complete, bundle_complete(b) == (cut == w.f.len), "cut %zu complete=%d", cut,
                  bundle_complete(b));
        for (size_t i = 0; i < 4; i++) {
            const struct bundle_member *m = bundle_find(b, w.m[i].name);
            if (ends[i] <= cut) {
                LOOPCHECK(bad_member, m && !m->truncated && m->available == m->size,
                          "cut %zu: member %s should be whole", cut, w.m[i].name);
            }
            if (!m)
                continue;
            size_t elen;
            const unsigned char *e = expected_data(m->name, &elen);
            char *all = NULL;
            size_t len = 0;
            rc = bundle_read_all(b, m->name, 1 << 20, &all, &len);
            LOOPCHECK(bad_prefix,
                      (rc == 0 || rc == BUNDLE_ETRUNC) && len == m->available &&
                          (m->truncated ? rc == BUNDLE_ETRUNC : rc == 0) && !memcmp(all, e, len),
                      "cut %zu: member %s rc=%d len=%zu avail=%llu", cut, m->name, rc, len,
                      (unsigned long long)m->available);
            free(all);
        }
        bundle_close(b);
    }
    CHECK(!bad_open, "truncation: open");
    CHECK(!bad_complete, "truncation: completeness");
    CHECK(!bad_member, "truncation: members before the cut whole");
    CHECK(!bad_prefix, "truncation: cut member reads its prefix");
    CHECK(opened > w.f.len * 9 / 10, "truncation: opened %zu of %zu", opened, w.f.len);

    /* a core cut mid-way: reads inside the available part work, past it ETRUNC */
    size_t cut = (size_t)ends[1] + (ends[2] - ends[1]) / 2;
    struct bundle *b = NULL;
    char err[256];
    int rc = open_bytes(w.f.p, cut, &b, err, sizeof(err));
    CHECK(rc == 0, "open cut core: %s", err);
    if (b) {
        const struct bundle_member *c = bundle_find(b, "core");
        CHECK(c && c->truncated && c->available > 0 && c->available < c->size &&
                  c->available % 4096 == 0,
              "core truncated, available %llu", c ? (unsigned long long)c->available : 0);
        CHECK(bundle_find(b, "capture.json") == NULL, "capture.json absent after the cut");
        CHECK(strstr(bundle_reason(b), "file ends inside") != NULL, "reason: %s", bundle_reason(b));
        if (c && c->available > 100) {
            static unsigned char buf[60000];
            size_t got;
            rc = bundle_read(b, c, c->available - 100, buf, 100, &got);
            CHECK(rc == 0 && got == 100 && !memcmp(buf, core + c->available - 100, 100),
                  "read just before the cut");
            rc = bundle_read(b, c, c->available - 100, buf, 300, &got);
            CHECK(rc == BUNDLE_ETRUNC && got == 100, "read over the cut: rc=%d got=%zu", rc, got);
            rc = bundle_read(b, c, c->available + 10, buf, 300, &got);
            CHECK(rc == BUNDLE_ETRUNC && got == 0, "read past the cut: rc=%d got=%zu", rc, got);
            int fd2 = open(tpath("cut.out"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            rc = bundle_extract(b, "core", fd2);
            close(fd2);
            struct stat st;
            CHECK(rc == BUNDLE_ETRUNC && stat(tpath("cut.out"), &st) == 0 &&
                      (uint64_t)st.st_size == c->available,
                  "extract truncated core writes the available bytes");
        }
        bundle_close(b);
    }
    tw_free(&w);
}

/* Replaces the standard bundle's index JSON with `json` (length fields made consistent). */
static void open_with_index(const char *json, struct bundle **b, char *err, size_t errlen, int *rc)
{
    struct tw w;
    build_standard(&w, 0);
    tw_index_raw(&w, json, strlen(json));
    *rc = open_bytes(w.f.p, w.f.len, b, err, errlen);
    tw_free(&w);
}

/* Edits the standard index: apply `edit` to the parsed JSON, write it back. */
static int index_case(const char *what, void (*edit)(cJSON *root), int expect_complete)
{
    struct tw w;
    build_standard(&w, 0);
    char *s = tw_index_json(&w);
    cJSON *root = cJSON_Parse(s);
    free(s);
    edit(root);
    s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    tw_index_raw(&w, s, strlen(s));
    free(s);
    struct bundle *b = NULL;
    char err[256] = "";
    int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    int ok = rc == 0 && b && bundle_complete(b) == expect_complete;
    if (ok && !expect_complete) {
        /* the walk still recovers every member, with the markers' safe names */
        ok = bundle_member_count(b) == 4;
        read_everything(b);
    }
    CHECK(ok, "index case `%s`: rc=%d complete=%d reason=%s", what, rc, b ? bundle_complete(b) : -1,
          b ? bundle_reason(b) : err);
    bundle_close(b);
    tw_free(&w);
    return ok;
}

static cJSON *member_n(cJSON *root, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(root, "members"), i);
}
static cJSON *frame_n(cJSON *root, int m, int f)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(member_n(root, m), "frames"), f);
}
static void set_num(cJSON *o, const char *k, double v)
{
    cJSON_ReplaceItemInObject(o, k, cJSON_CreateNumber(v));
}
static void set_str(cJSON *o, const char *k, const char *v)
{
    cJSON_ReplaceItemInObject(o, k, cJSON_CreateString(v));
}
static void set_frame(cJSON *root, int m, int f, int k, double v)
{
    cJSON_ReplaceItemInArray(frame_n(root, m, f), k, cJSON_CreateNumber(v));
}

static void e_none(cJSON *r)
{
    (void)r;
}
static void e_name_dotdot(cJSON *r)
{
    set_str(member_n(r, 1), "name", "../x");
}
static void e_name_abs(cJSON *r)
{
    set_str(member_n(r, 1), "name", "/etc/passwd");
}
static void e_name_empty(cJSON *r)
{
    set_str(member_n(r, 1), "name", "");
}
static void e_name_mid(cJSON *r)
{
    set_str(member_n(r, 1), "name", "proc/../../x");
}
static void e_name_ctrl(cJSON *r)
{
    set_str(member_n(r, 1), "name", "a\x1b[2Jb");
}
static void e_name_slash(cJSON *r)
{
    set_str(member_n(r, 1), "name", "proc/");
}
static void e_name_dup(cJSON *r)
{
    set_str(member_n(r, 1), "name", "manifest.json");
}
static void e_name_num(cJSON *r)
{
    set_num(member_n(r, 1), "name", 5);
}
static void e_frame_beyond(cJSON *r)
{
    set_frame(r, 2, 3, 0, 1e9);
}
static void e_frame_into_index(cJSON *r)
{
    set_frame(r, 3, 0, 1, cJSON_GetArrayItem(frame_n(r, 3, 0), 1)->valuedouble + 200);
}
static void e_frame_overlap(cJSON *r)
{
    set_frame(r, 2, 2, 0, cJSON_GetArrayItem(frame_n(r, 2, 1), 0)->valuedouble + 1);
}
static void e_tar_gap(cJSON *r)
{
    set_frame(r, 2, 2, 2, cJSON_GetArrayItem(frame_n(r, 2, 2), 2)->valuedouble + 512);
}
static void e_huge_size(cJSON *r)
{
    set_frame(r, 2, 1, 3, 1e15);
}
static void e_frame_size_negative(cJSON *r)
{
    set_frame(r, 2, 1, 3, -4096);
}
static void e_frame_size_fraction(cJSON *r)
{
    set_frame(r, 2, 1, 3, 4095.5);
}
static void e_member_size(cJSON *r)
{
    set_num(member_n(r, 2), "size", 1e13);
}
static void e_member_overlap(cJSON *r)
{
    set_num(member_n(r, 1), "header", 0);
}
static void e_no_frames(cJSON *r)
{
    cJSON_ReplaceItemInObject(member_n(r, 1), "frames", cJSON_CreateArray());
}
static void e_frame_3(cJSON *r)
{
    cJSON_DeleteItemFromArray(frame_n(r, 0, 0), 3);
}
static void e_format(cJSON *r)
{
    set_str(r, "format", "crashpack-index/9");
}
static void e_tar_size(cJSON *r)
{
    set_num(r, "tar_size", 10);
}
static void e_members_obj(cJSON *r)
{
    cJSON_ReplaceItemInObject(r, "members", cJSON_CreateObject());
}
static void e_nan(cJSON *r)
{
    set_num(member_n(r, 0), "size", 1e308 * 10);
}

/* The index agrees with itself but lies about a frame: caught when the frame is read. */
static void e_lie_dsize(cJSON *r)
{
    /* core data frame 1 and 2: swap sizes 4096 -> 4095/4097 keeping contiguity */
    set_frame(r, 2, 1, 3, 4095);
    set_frame(r, 2, 2, 2, cJSON_GetArrayItem(frame_n(r, 2, 2), 2)->valuedouble - 1);
    set_frame(r, 2, 2, 3, 4097);
}

static void test_bad_index(void)
{
    struct bundle *b = NULL;
    char err[256];
    int rc;
    open_with_index("{garbage", &b, err, sizeof(err), &rc);
    CHECK(rc == 0 && b && !bundle_complete(b) && bundle_member_count(b) == 4 &&
              strstr(bundle_reason(b), "not valid JSON"),
          "garbage index JSON falls back to the walk: %s", b ? bundle_reason(b) : err);
    bundle_close(b);
    open_with_index("[]", &b, err, sizeof(err), &rc);
    CHECK(rc == 0 && b && !bundle_complete(b), "array index");
    bundle_close(b);
    open_with_index("", &b, err, sizeof(err), &rc);
    CHECK(rc == 0 && b && !bundle_complete(b), "empty index");
    bundle_close(b);

    index_case("unchanged", e_none, 1);
    index_case("../x", e_name_dotdot, 0);
    index_case("/etc/passwd", e_name_abs, 0);
    index_case("empty name", e_name_empty, 0);
    index_case("proc/../../x", e_name_mid, 0);
    index_case("control characters", e_name_ctrl, 0);
    index_case("trailing slash", e_name_slash, 0);
    index_case("duplicate name", e_name_dup, 0);
    index_case("numeric name", e_name_num, 0);
    index_case("frame beyond the file", e_frame_beyond, 0);
    index_case("frame into the index", e_frame_into_index, 0);
    index_case("overlapping frames", e_frame_overlap, 0);
    index_case("tar gap", e_tar_gap, 0);
    index_case("huge frame size", e_huge_size, 0);
    index_case("negative size", e_frame_size_negative, 0);
    index_case("fractional size", e_frame_size_fraction, 0);
    index_case("member size beyond frames", e_member_size, 0);
    index_case("overlapping members", e_member_overlap, 0);
    index_case("member without frames", e_no_frames, 0);
    index_case("frame with 3 values", e_frame_3, 0);
    index_case("format", e_format, 0);
    index_case("tar_size", e_tar_size, 0);
    index_case("members not an array", e_members_obj, 0);
    index_case("infinite number", e_nan, 0);

    /* consistent index, lying about decompressed sizes: open works, the read fails cleanly */
    {
        struct tw w;
        build_standard(&w, 0);
        char *s = tw_index_json(&w);
        cJSON *root = cJSON_Parse(s);
        free(s);
        e_lie_dsize(root);
        s = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        tw_index_raw(&w, s, strlen(s));
        free(s);
        rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
        CHECK(rc == 0 && bundle_complete(b), "lying index opens: %s", err);
        if (b) {
            static unsigned char buf[20000];
            size_t got;
            const struct bundle_member *c = bundle_find(b, "core");
            rc = bundle_read(b, c, 3 * 4096, buf, 100, &got);
            CHECK(rc == 0 && got == 100 && !memcmp(buf, core + 3 * 4096, 100),
                  "honest frames still read");
            rc = bundle_read(b, c, 4096, buf, 100, &got);
            CHECK(rc == BUNDLE_EFORMAT && strstr(bundle_error(b), "declares"),
                  "lying frame refused: rc=%d %s", rc, bundle_error(b));
            bundle_close(b);
        }
        tw_free(&w);
    }

    /* trailer inconsistent with the frame header; length beyond the file */
    {
        struct tw w;
        build_standard(&w, 1);
        unsigned char *t = w.f.p + w.f.len - 12;
        uint32_t n;
        memcpy(&n, t, 4);
        uint32_t big = 0xFFFFFFF0u;
        memcpy(t, &big, 4);
        rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
        CHECK(rc == 0 && !bundle_complete(b) && bundle_member_count(b) == 4,
              "huge index length: %s", b ? bundle_reason(b) : err);
        bundle_close(b);
        n -= 1;
        memcpy(t, &n, 4);
        rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
        CHECK(rc == 0 && !bundle_complete(b) && strstr(bundle_reason(b), "does not match"),
              "index length off by one: %s", b ? bundle_reason(b) : err);
        bundle_close(b);
        tw_free(&w);
    }
}

/* Unsafe names in the markers too: the walk stops there, the members before stay. */
static void test_unsafe_marker_names(void)
{
    const char *bad[] = {"../x", "/etc/passwd", "", "a/./b", "x\n", "a//b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct tw w;
        memset(&w, 0, sizeof(w));
        tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
        tw_member(&w, bad[i], "evil", 4, 0);
        tw_member(&w, "capture.json", capture, strlen(capture), 0);
        tw_finish(&w, 1);
        struct bundle *b = NULL;
        char err[256] = "";
        int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
        CHECK(rc == 0 && b && !bundle_complete(b) && bundle_member_count(b) == 1 &&
                  bundle_find(b, "manifest.json") && strstr(bundle_reason(b), "unsafe name"),
              "marker name `%s`: rc=%d %s", bad[i], rc, b ? bundle_reason(b) : err);
        bundle_close(b);
        tw_free(&w);

        /* as the first member: nothing to recover, an error */
        memset(&w, 0, sizeof(w));
        tw_member(&w, bad[i], "evil", 4, 0);
        tw_finish(&w, 1);
        rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
        CHECK(rc == BUNDLE_EFORMAT && b == NULL, "only member `%s`: rc=%d", bad[i], rc);
        tw_free(&w);
    }
}

/* The same name twice: the index is refused, the walk keeps the first and stops at the second. */
static void test_duplicate_markers(void)
{
    struct tw w;
    memset(&w, 0, sizeof(w));
    tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
    tw_member(&w, "proc/status", status_txt, strlen(status_txt), 0);
    tw_member(&w, "manifest.json", "{}", 2, 0);
    tw_member(&w, "capture.json", capture, strlen(capture), 0);
    tw_finish(&w, 1);
    struct bundle *b = NULL;
    char err[256] = "";
    int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    CHECK(rc == 0 && b && !bundle_complete(b) && bundle_member_count(b) == 2 &&
              strstr(bundle_reason(b), "appears twice"),
          "duplicate member: rc=%d %s", rc, b ? bundle_reason(b) : err);
    char *all = NULL;
    size_t len = 0;
    rc = b ? bundle_read_all(b, "manifest.json", 4096, &all, &len) : -99;
    CHECK(rc == 0 && len == strlen(manifest), "the first of the duplicates is the one read");
    free(all);
    bundle_close(b);
    tw_free(&w);
}

/* Empty members, block-sized members, a core whose size is a multiple of the frame size. */
static void test_edge_sizes(void)
{
    for (int with_index = 1; with_index >= 0; with_index--) {
        struct tw w;
        memset(&w, 0, sizeof(w));
        tw_member(&w, "empty", "", 0, 0);
        tw_member(&w, "block", core, 512, 0);
        tw_member(&w, "core", core, 8192, 4096);
        tw_member(&w, "empty-streamed", "", 0, 4096);
        tw_finish(&w, with_index);
        struct bundle *b = NULL;
        char err[256] = "";
        int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
        CHECK(rc == 0 && b && bundle_complete(b) == with_index && bundle_member_count(b) == 4,
              "edge sizes (index %d): rc=%d %s", with_index, rc, b ? bundle_reason(b) : err);
        if (!b) {
            tw_free(&w);
            continue;
        }
        const char *names[] = {"empty", "block", "core", "empty-streamed"};
        const size_t sizes[] = {0, 512, 8192, 0};
        for (int i = 0; i < 4; i++) {
            char *all = NULL;
            size_t len = 99;
            rc = bundle_read_all(b, names[i], 1 << 20, &all, &len);
            CHECK(rc == 0 && all && len == sizes[i] && !memcmp(all, core, len) && !all[len],
                  "edge size member %s (index %d): rc=%d len=%zu", names[i], with_index, rc, len);
            free(all);
        }
        bundle_close(b);
        tw_free(&w);
    }
}

/* A frame with 8-byte content size `fcs`, `nblocks` RLE blocks of `bsize` bytes (no checksum);
 * single-segment when `single`, else with a window descriptor for a 128 KiB window. */
static void rle_frame(struct buf *o, uint64_t fcs, size_t nblocks, uint32_t bsize, int single)
{
    put32(o, 0xFD2FB528u);
    unsigned char fhd = 0xC0 | (single ? 0x20 : 0);
    put(o, &fhd, 1);
    if (!single) {
        unsigned char wd = (17 - 10) << 3; /* 2^17 */
        put(o, &wd, 1);
    }
    for (int i = 0; i < 8; i++) {
        unsigned char c = (unsigned char)(fcs >> (8 * i));
        put(o, &c, 1);
    }
    for (size_t i = 0; i < nblocks; i++) {
        uint32_t h = (bsize << 3) | (1u << 1) | (i + 1 == nblocks ? 1u : 0u);
        unsigned char x[4] = {(unsigned char)h, (unsigned char)(h >> 8), (unsigned char)(h >> 16),
                              0x00};
        put(o, x, 4); /* 3-byte header + the RLE byte */
    }
}

/* Decompression bombs and frames whose header lies, in walk mode (no index) and in index mode. */
static void test_bombs(void)
{
    /* The member's marker, then a header frame, then a data frame declaring 1 GiB in its header
     * (8 RLE blocks, a few bytes). Index (1 GiB frame) refused; walk: refused by the declared
     * size, never allocated. */
    struct tw w;
    memset(&w, 0, sizeof(w));
    tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
    uint64_t header = w.tar;
    tw_marker(&w, "core", 1ull << 30, header, header + 512);
    struct tw_member *m = &w.m[w.n++];
    m->name = strdup("core");
    m->size = 1ull << 30;
    m->header = header;
    m->data = header + 512;
    m->frames = cJSON_CreateArray();
    unsigned char h[512];
    ustar_header(h, "core", 1ull << 30);
    tw_frame(&w, m, h, 512);
    size_t bomb_off = w.f.len;
    rle_frame(&w.f, 1ull << 30, 8, 128 << 10, 0);
    double v[4] = {(double)bomb_off, (double)(w.f.len - bomb_off), (double)w.tar,
                   (double)(1ull << 30)};
    cJSON_AddItemToArray(m->frames, cJSON_CreateDoubleArray(v, 4));
    m->nframes++;
    w.tar += 1ull << 30;
    tw_finish(&w, 1);

    struct bundle *b = NULL;
    char err[256] = "";
    int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    CHECK(rc == 0 && b && !bundle_complete(b), "bomb: index refused (%s)",
          b ? bundle_reason(b) : err);
    if (b) {
        CHECK(strstr(bundle_reason(b), "over the limit") != NULL, "bomb reason: %s",
              bundle_reason(b));
        const struct bundle_member *c = bundle_find(b, "core");
        CHECK(c && c->truncated && c->available == 0, "bomb member truncated to nothing");
        unsigned char buf[64];
        size_t got;
        rc = bundle_read(b, c, 0, buf, sizeof(buf), &got);
        CHECK(rc == BUNDLE_ETRUNC && got == 0, "bomb read: rc=%d", rc);
        char *all = NULL;
        size_t len;
        rc = bundle_read_all(b, "manifest.json", 4096, &all, &len);
        CHECK(rc == 0 && len == strlen(manifest), "member before the bomb reads");
        free(all);
        bundle_close(b);
    }

    /* Same bomb, index claims only 4096 bytes for it: the frame header disagrees, refused
     * before any output buffer is sized from it. Done in a child with a 256 MiB address-space
     * limit when not under ASan (whose shadow memory needs more), so an allocation of the
     * declared size would fail the test. */
    {
        char *s = tw_index_json(&w);
        cJSON *root = cJSON_Parse(s);
        free(s);
        cJSON *mm = member_n(root, 1);
        set_num(mm, "size", 4096 - 512);
        /* the bomb frame now covers data [0, 3584) by the index; its header says 1 GiB */
        set_frame(root, 1, 1, 3, 3584);
        set_num(root, "tar_size",
                cJSON_GetArrayItem(frame_n(root, 1, 1), 2)->valuedouble + 3584 + 1024);
        s = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        struct tw w2 = w;
        struct buf f = {0};
        /* the bundle up to (without) the tar end frame and index, then a new index */
        size_t end = (size_t)(bomb_off + (size_t)v[1]);
        put(&f, w.f.p, end);
        w2.f = f;
        tw_index_raw(&w2, s, strlen(s));
        free(s);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
#if !defined(__SANITIZE_ADDRESS__) && !defined(CRASHPACK_SANITIZE) && !HAS_ASAN
            struct rlimit rl = {256u << 20, 256u << 20};
            setrlimit(RLIMIT_AS, &rl);
#endif
            struct bundle *cb = NULL;
            char cerr[256];
            if (open_bytes(w2.f.p, w2.f.len, &cb, cerr, sizeof(cerr)) || !bundle_complete(cb))
                _exit(10);
            unsigned char buf[64];
            size_t got;
            int r = bundle_read_name(cb, "core", 0, buf, sizeof(buf), &got);
            if (r != BUNDLE_EFORMAT || !strstr(bundle_error(cb), "declares"))
                _exit(11);
            bundle_close(cb);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "bomb under a lying index refused (%d)", st);
        free(w2.f.p);
    }
    tw_free(&w);

    /* A frame whose header declares 200000 bytes but holds 1000: the walk records 200000 (under
     * the cap); the read notices the mismatch. */
    memset(&w, 0, sizeof(w));
    tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
    header = w.tar;
    tw_marker(&w, "core", 200000, header, header + 512);
    m = &w.m[w.n++];
    m->name = strdup("core");
    m->size = 200000;
    m->header = header;
    m->data = header + 512;
    m->frames = cJSON_CreateArray();
    ustar_header(h, "core", 200000);
    tw_frame(&w, m, h, 512);
    rle_frame(&w.f, 200192, 1, 1000, 0);
    rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    CHECK(rc == 0 && b && !bundle_complete(b), "short frame: open (%s)", err);
    if (b) {
        const struct bundle_member *c = bundle_find(b, "core");
        CHECK(c && !c->truncated, "short frame: looks whole by its header");
        unsigned char buf[64];
        size_t got;
        rc = bundle_read(b, c, 0, buf, sizeof(buf), &got);
        CHECK(rc == BUNDLE_EFORMAT && got == 0, "short frame refused at read: rc=%d %s", rc,
              bundle_error(b));
        bundle_close(b);
    }
    tw_free(&w);

    /* A single-segment frame declaring 1000 bytes whose RLE block expands to 128 KiB. */
    memset(&w, 0, sizeof(w));
    tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
    header = w.tar;
    tw_marker(&w, "core", 512, header, header + 512);
    m = &w.m[w.n++];
    m->name = strdup("core");
    m->frames = cJSON_CreateArray();
    ustar_header(h, "core", 512);
    tw_frame(&w, m, h, 512);
    rle_frame(&w.f, 512, 1, 128 << 10, 1);
    rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    if (rc == 0 && b) {
        const struct bundle_member *c = bundle_find(b, "core");
        unsigned char buf[64];
        size_t got = 0;
        rc = c ? bundle_read(b, c, 0, buf, sizeof(buf), &got) : BUNDLE_ENOENT;
        CHECK(rc != 0 && got == 0, "expanding frame refused: rc=%d", rc);
        bundle_close(b);
    } else {
        CHECK(1, "expanding frame refused at open");
    }
    tw_free(&w);
}

/* A corrupt byte inside one core frame: that frame fails its checksum, the others read. */
static void test_corrupt_frame(void)
{
    struct tw w;
    build_standard(&w, 1);
    cJSON *f5 = cJSON_GetArrayItem(w.m[2].frames, 5);
    size_t off = (size_t)cJSON_GetArrayItem(f5, 0)->valuedouble;
    size_t cs = (size_t)cJSON_GetArrayItem(f5, 1)->valuedouble;
    w.f.p[off + cs / 2] ^= 0x55;
    struct bundle *b = NULL;
    char err[256];
    int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    CHECK(rc == 0 && bundle_complete(b), "corrupt frame: index still fine");
    if (b) {
        const struct bundle_member *c = bundle_find(b, "core");
        static unsigned char buf[50000];
        size_t got;
        rc = bundle_read(b, c, 4 * 4096, buf, 4096, &got);
        CHECK(rc == BUNDLE_EFORMAT && got == 0, "corrupt frame read fails: rc=%d", rc);
        rc = bundle_read(b, c, 3 * 4096, buf, 8192, &got);
        CHECK(rc == BUNDLE_EFORMAT && got == 4096 && !memcmp(buf, core + 3 * 4096, 4096),
              "read up to the corrupt frame: rc=%d got=%zu", rc, got);
        rc = bundle_read(b, c, 5 * 4096, buf, 4096, &got);
        CHECK(rc == 0 && got == 4096 && !memcmp(buf, core + 5 * 4096, 4096),
              "frames after it read: rc=%d", rc);
        bundle_close(b);
    }
    tw_free(&w);
}

/* Frames are decoded only as far as reads need (block by block), a few of them kept (LRU slots):
 * reads in random order across more frames than there are slots give the right bytes; a frame
 * whose checksum is broken still serves the blocks before its end and fails a read of its end; a
 * frame broken in the middle serves the blocks before the break; bundle_frame_span gives the
 * frame's bounds. */
#define BIGF (1u << 20)
#define NBIG 12
static void test_partial_frames(void)
{
    static unsigned char big[NBIG * BIGF];
    uint32_t x = 99;
    for (size_t i = 0; i < sizeof(big); i++) {
        x = x * 1103515245 + 12345;
        big[i] = (i / 5000) % 3 ? (unsigned char)(x >> 16) : (unsigned char)(i / 900);
    }
    struct tw w;
    memset(&w, 0, sizeof(w));
    tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
    tw_member(&w, "core", big, sizeof(big), BIGF);
    tw_finish(&w, 1);
    struct bundle *b = NULL;
    char err[256];
    int rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    CHECK(rc == 0 && b, "partial: opens: %s", err);
    if (b) {
        const struct bundle_member *c = bundle_find(b, "core");
        static unsigned char buf[70000];
        int bad = 0;
        uint32_t y = 4242;
        for (int i = 0; i < 2000; i++) {
            y = y * 1103515245 + 12345;
            size_t off = (y >> 4) % (sizeof(big) - sizeof(buf));
            y = y * 1103515245 + 12345;
            size_t len = 1 + (y >> 8) % sizeof(buf);
            size_t got = 0;
            rc = bundle_read(b, c, off, buf, len, &got);
            LOOPCHECK(bad, rc == 0 && got == len && !memcmp(buf, big + off, len),
                      "random read %d at %zu+%zu: rc=%d got=%zu", i, off, len, rc, got);
        }
        CHECK(!bad, "partial: 2000 random reads over %u frames of 1 MiB are right", NBIG);
        uint64_t lo = 0, hi = 0;
        CHECK(bundle_frame_span(c, 3 * BIGF + 17, &lo, &hi) == 0 && lo == 3 * BIGF &&
                  hi == 4 * BIGF,
              "partial: frame span of byte 3 MiB + 17 is [3 MiB, 4 MiB): [%llu, %llu)",
              (unsigned long long)lo, (unsigned long long)hi);
        CHECK(bundle_frame_span(c, sizeof(big), &lo, &hi) == -1, "partial: no span past the end");
        bundle_close(b);
    }
    /* frame 4 (core data frame index 5: index 0 is the tar header): its checksum broken */
    cJSON *f5 = cJSON_GetArrayItem(w.m[1].frames, 5);
    size_t off5 = (size_t)cJSON_GetArrayItem(f5, 0)->valuedouble;
    size_t cs5 = (size_t)cJSON_GetArrayItem(f5, 1)->valuedouble;
    w.f.p[off5 + cs5 - 1] ^= 0x5a; /* the last byte: the content checksum */
    /* frame 6: a byte in the middle of its compressed data */
    cJSON *f7 = cJSON_GetArrayItem(w.m[1].frames, 7);
    size_t off7 = (size_t)cJSON_GetArrayItem(f7, 0)->valuedouble;
    size_t cs7 = (size_t)cJSON_GetArrayItem(f7, 1)->valuedouble;
    for (size_t k = cs7 / 2; k < cs7 / 2 + 64; k++)
        w.f.p[off7 + k] ^= 0xa5;
    rc = open_bytes(w.f.p, w.f.len, &b, err, sizeof(err));
    CHECK(rc == 0 && b, "partial, damaged: opens: %s", err);
    if (b) {
        const struct bundle_member *c = bundle_find(b, "core");
        static unsigned char buf[4096];
        size_t got = 0;
        rc = bundle_read(b, c, 4 * BIGF, buf, sizeof(buf), &got);
        CHECK(rc == 0 && got == sizeof(buf) && !memcmp(buf, big + 4 * BIGF, sizeof(buf)),
              "bad checksum: the frame's first block reads (not decoded to its end): rc=%d", rc);
        rc = bundle_read(b, c, 5 * BIGF - sizeof(buf), buf, sizeof(buf), &got);
        CHECK(rc == BUNDLE_EFORMAT && got == 0 && strstr(bundle_error(b), "checksum"),
              "bad checksum: reading its end fails: rc=%d %s", rc, bundle_error(b));
        rc = bundle_read(b, c, 6 * BIGF, buf, sizeof(buf), &got);
        CHECK(rc == 0 && got == sizeof(buf) && !memcmp(buf, big + 6 * BIGF, sizeof(buf)),
              "broken middle: the frame's first block reads: rc=%d", rc);
        rc = bundle_read(b, c, 7 * BIGF - sizeof(buf), buf, sizeof(buf), &got);
        CHECK(rc != 0 && got == 0, "broken middle: a read past the break fails: rc=%d", rc);
        rc = bundle_read(b, c, 8 * BIGF, buf, sizeof(buf), &got);
        CHECK(rc == 0 && got == sizeof(buf) && !memcmp(buf, big + 8 * BIGF, sizeof(buf)),
              "the frames after them read: rc=%d", rc);
        bundle_close(b);
    }
    tw_free(&w);
}

static void test_not_bundles(void)
{
    struct bundle *b = NULL;
    char err[256] = "";
    int rc = bundle_open(tmpdir, &b, err, sizeof(err));
    CHECK(rc != 0 && !b && strstr(err, "not a crashpack bundle: ") && strstr(err, tmpdir) &&
              strstr(err, "(a directory)"),
          "directory refused, named: %s", err);
    const char *fifo = tpath("fifo");
    unlink(fifo);
    if (mkfifo(fifo, 0600) == 0) {
        rc = bundle_open(fifo, &b, err, sizeof(err));
        CHECK(rc != 0 && !b, "fifo refused without blocking: %s", err);
    }
    rc = bundle_open(tpath("does-not-exist"), &b, err, sizeof(err));
    CHECK(rc == BUNDLE_EIO && !b, "missing file: %s", err);
    rc = open_bytes("", 0, &b, err, sizeof(err));
    CHECK(rc == BUNDLE_EFORMAT && !b, "empty file: %s", err);
    rc = open_bytes("hello world, this is not a bundle at all", 40, &b, err, sizeof(err));
    CHECK(rc == BUNDLE_EFORMAT && !b, "text file: %s", err);
    /* a plain .tar.zst (no markers): zstd frames but no member */
    unsigned char z[64];
    size_t n = ZSTD_compress(z, sizeof(z), "abc", 3, 1);
    rc = open_bytes(z, n, &b, err, sizeof(err));
    CHECK(rc == BUNDLE_EFORMAT && !b, "plain zstd: %s", err);
    CHECK(bundle_open(NULL, &b, err, sizeof(err)) == BUNDLE_EINVAL, "NULL path");
    CHECK(bundle_member_count(NULL) == 0 && bundle_member(NULL, 0) == NULL, "NULL bundle");
}

/* Random byte changes anywhere in the bundle: any result but a crash (ASan/UBSan watch). */
static void test_random_corruption(void)
{
    struct tw w;
    build_standard(&w, 1);
    unsigned char *copy = malloc(w.f.len);
    uint32_t x = 777;
    int opened = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, w.f.p, w.f.len);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            x = x * 1103515245 + 12345;
            size_t pos = (x >> 8) % w.f.len;
            /* half of them near the end, where the index is */
            if (iter % 2)
                pos = w.f.len - 1 - pos % 600;
            x = x * 1103515245 + 12345;
            copy[pos] = (unsigned char)(x >> 16);
        }
        struct bundle *b = NULL;
        char err[256];
        if (open_bytes(copy, w.f.len, &b, err, sizeof(err)) == 0) {
            opened++;
            read_everything(b);
            bundle_close(b);
        }
    }
    CHECK(opened > 1000, "random corruption: %d of 3000 opened", opened);
    free(copy);
    tw_free(&w);
}

/* Seed corpus for the fuzzer: a few small bundles. */
static int write_corpus(const char *dir)
{
    char p[512];
    struct tw w;
    memset(&w, 0, sizeof(w));
    tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
    tw_member(&w, "proc/status", status_txt, strlen(status_txt), 0);
    tw_member(&w, "core", core, 3000, 1024);
    tw_member(&w, "capture.json", capture, strlen(capture), 0);
    tw_finish(&w, 1);
    snprintf(p, sizeof(p), "%s/complete.zst", dir);
    write_file(p, w.f.p, w.f.len);
    snprintf(p, sizeof(p), "%s/cut.zst", dir);
    write_file(p, w.f.p, w.f.len * 2 / 3);
    tw_free(&w);

    memset(&w, 0, sizeof(w));
    tw_member(&w, "manifest.json", manifest, strlen(manifest), 0);
    tw_member(&w, "core", core, 2000, 512);
    tw_finish(&w, 0);
    snprintf(p, sizeof(p), "%s/no-index.zst", dir);
    write_file(p, w.f.p, w.f.len);
    tw_free(&w);

    memset(&w, 0, sizeof(w));
    tw_member(&w, "capture.json", capture, strlen(capture), 0);
    tw_finish(&w, 1);
    snprintf(p, sizeof(p), "%s/one-member.zst", dir);
    write_file(p, w.f.p, w.f.len);
    tw_free(&w);
    return 0;
}

/* Salvage (bw_adopt) of a file cut after a member's marker, whose last data frame, the member
 * before's, is corrupt (a power cut): the corrupt frame is taken off its own member, which goes
 * (it has no frame left), and the frame-less member after it goes too. */
static void test_adopt_corrupt_before_marker(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/adopt.zst", tmpdir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    struct bw w;
    static unsigned char data[3000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 7 + i / 13);
    CHECK(fd >= 0 && !bw_init(&w, fd, 3, 0) && !bw_add(&w, "x.json", "{}", 2) &&
              !bw_add(&w, "a.bin", data, sizeof(data)),
          "adopt: two members written");
    uint64_t a_frame = w.members[1].frames[0].file_off, a_len = w.members[1].frames[0].csize;
    uint64_t a_marker = w.members[1].marker_off, b_marker = w.file_off;
    CHECK(!bw_begin(&w, "b.bin", 100), "adopt: a third member begun");
    bw_free(&w);
    uint32_t hdr[2] = {0, 0};
    CHECK(pread(fd, hdr, 8, (off_t)b_marker) == 8 && !ftruncate(fd, (off_t)(b_marker + 8 + hdr[1])),
          "adopt: cut after the third member's marker");
    unsigned char c;
    off_t at = (off_t)(a_frame + a_len - 6); /* in the last block, before a checksum */
    if (pread(fd, &c, 1, at) == 1) {
        c ^= 0x5a;
        CHECK(pwrite(fd, &c, 1, at) == 1, "adopt: a byte of a.bin's frame flipped");
    }
    char why[256];
    int rc = bw_adopt(&w, fd, 3, 0, why, sizeof(why));
    CHECK(rc == 0 && w.nmembers == 1 && !strcmp(w.members[0].name, "x.json") &&
              w.file_off == a_marker && w.open_member == -1,
          "adopt: the corrupt frame's member and the frame-less one after it dropped (rc=%d, %zu "
          "members, file_off %llu, a.bin's marker at %llu: %s)",
          rc, w.nmembers, (unsigned long long)w.file_off, (unsigned long long)a_marker, why);
    struct stat st;
    CHECK(!fstat(fd, &st) && (uint64_t)st.st_size == a_marker,
          "adopt: the file cut at a.bin's marker");
    bw_free(&w);
    close(fd);
}

int main(int argc, char **argv)
{
    make_core();
    if (argc == 3 && !strcmp(argv[1], "--corpus"))
        return write_corpus(argv[2]);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_bundle.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_listing_and_reads();
    test_walk_mode();
    test_truncation();
    test_bad_index();
    test_unsafe_marker_names();
    test_duplicate_markers();
    test_edge_sizes();
    test_bombs();
    test_corrupt_frame();
    test_partial_frames();
    test_not_bundles();
    test_random_corruption();
    test_adopt_corrupt_before_marker();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
