/* bundlew.c - the bundle writer: zstd frames aligned with tar members, markers, index.
 *
 * Every data frame carries its content size and a checksum, so a reader (or the salvage walk
 * below) learns the tar layout from frame headers alone, without decompressing. */
#include "bundlew.h"
#include "scrub.h"
#include "tarw.h"
#include "util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

size_t bw_compress_frame(ZSTD_CCtx *cctx, int level, void *dst, size_t dstcap, const void *src,
                         size_t len)
{
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    size_t r = ZSTD_compress2(cctx, dst, dstcap, src, len);
    return ZSTD_isError(r) ? 0 : r;
}

/* Feeds src[in->pos, upto) to the compressor with op (flush or end) until it is all out. */
static int stage(ZSTD_CCtx *cctx, ZSTD_outBuffer *out, const void *src, size_t from, size_t upto,
                 ZSTD_EndDirective op)
{
    ZSTD_inBuffer in = {src, upto, from};
    for (;;) {
        size_t before = out->pos, r = ZSTD_compressStream2(cctx, out, &in, op);
        if (ZSTD_isError(r))
            return -1;
        if (r == 0 && in.pos == in.size)
            return 0;
        if (out->pos == out->size && out->pos == before)
            return -1; /* no room left: never loop on a full buffer */
    }
}

size_t bw_compress_frame_staged(ZSTD_CCtx *cctx, int level, void *dst, size_t dstcap,
                                const void *src, size_t len)
{
    static const size_t steps[] = {4096, 32768};
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    if (ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(cctx, len)))
        return 0;
    ZSTD_outBuffer out = {dst, dstcap, 0};
    size_t done = 0;
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && steps[i] < len; i++) {
        if (stage(cctx, &out, src, done, steps[i], ZSTD_e_flush))
            return 0;
        done = steps[i];
    }
    if (stage(cctx, &out, src, done, len, ZSTD_e_end))
        return 0;
    return out.pos;
}

int bw_init(struct bw *w, int fd, int level, time_t mtime)
{
    memset(w, 0, sizeof(*w));
    w->fd = fd;
    w->level = level;
    w->mtime = mtime;
    w->open_member = -1;
    w->cctx = ZSTD_createCCtx();
    if (!w->cctx) {
        w->err = ENOMEM;
        return -1;
    }
    return 0;
}

void bw_free(struct bw *w)
{
    for (size_t i = 0; i < w->nmembers; i++)
        free(w->members[i].frames);
    free(w->members);
    ZSTD_freeCCtx(w->cctx);
    w->members = NULL;
    w->cctx = NULL;
}

static int out(struct bw *w, const void *p, size_t n)
{
    if (w->err)
        return -1;
    if (write_all(w->fd, p, n)) {
        w->err = errno ? errno : EIO;
        /* cut back to the last whole frame so the file stays walkable */
        if (ftruncate(w->fd, (off_t)w->file_off) == 0)
            lseek(w->fd, (off_t)w->file_off, SEEK_SET);
        return -1;
    }
    w->file_off += n;
    return 0;
}

static struct bw_member *new_member(struct bw *w, const char *name, uint64_t size)
{
    if (w->nmembers == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 16;
        struct bw_member *m = realloc(w->members, nc * sizeof(*m));
        if (!m)
            return NULL;
        w->members = m;
        w->cap = nc;
    }
    struct bw_member *m = &w->members[w->nmembers++];
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->size = size;
    m->header = w->tar_off;
    return m;
}

static int add_frame(struct bw_member *m, uint64_t file_off, uint64_t csize, uint64_t tar_off,
                     uint64_t usize)
{
    if (m->nframes == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 4;
        struct bw_frame *f = realloc(m->frames, nc * sizeof(*f));
        if (!f)
            return -1;
        m->frames = f;
        m->cap = nc;
    }
    m->frames[m->nframes++] = (struct bw_frame){file_off, csize, tar_off, usize};
    return 0;
}

static int write_marker(struct bw *w, const char *name, uint64_t size, uint64_t header,
                        uint64_t data)
{
    char payload[256];
    int n = snprintf(
        payload, sizeof(payload), "{\"member\":\"%s\",\"size\":%llu,\"header\":%llu,\"data\":%llu}",
        name, (unsigned long long)size, (unsigned long long)header, (unsigned long long)data);
    uint8_t hdr[8];
    uint32_t magic = BUNDLE_MAGIC_MARKER, len = (uint32_t)n;
    memcpy(hdr, &magic, 4);
    memcpy(hdr + 4, &len, 4);
    if (out(w, hdr, 8))
        return -1;
    return out(w, payload, (size_t)n);
}

/* Append an already compressed frame of `usize` tar bytes to member m. */
static int frame_append(struct bw *w, struct bw_member *m, const void *cdata, size_t csize,
                        uint64_t usize)
{
    uint64_t off = w->file_off;
    if (out(w, cdata, csize))
        return -1;
    if (add_frame(m, off, csize, w->tar_off, usize)) {
        w->err = ENOMEM;
        return -1;
    }
    w->tar_off += usize;
    return 0;
}

/* Compress `len` bytes into one frame, append it to member m. */
static int frame_out(struct bw *w, struct bw_member *m, const void *src, size_t len)
{
    size_t cap = ZSTD_compressBound(len);
    void *dst = malloc(cap);
    if (!dst) {
        w->err = ENOMEM;
        return -1;
    }
    size_t c = bw_compress_frame(w->cctx, w->level, dst, cap, src, len);
    int rc = -1;
    if (!c)
        w->err = EIO;
    else
        rc = frame_append(w, m, dst, c, len);
    free(dst);
    return rc;
}

/* A refusal of the room guard is not sticky: it ends at the next call. */
static void soft_clear(struct bw *w)
{
    if (w->err_soft) {
        w->err = 0;
        w->err_soft = 0;
    }
}

int bw_add(struct bw *w, const char *name, const void *data, size_t len)
{
    soft_clear(w);
    if (w->err || w->open_member >= 0)
        return -1;
    uint8_t hdr[TAR_HDR_MAX];
    int hl = tar_header(hdr, name, len, w->mtime, 0640);
    if (hl < 0) {
        w->err = ENAMETOOLONG;
        return -1;
    }
    size_t total = (size_t)hl + len + tar_padding(len);
    uint8_t *buf = calloc(1, total);
    if (!buf) {
        w->err = ENOMEM;
        return -1;
    }
    memcpy(buf, hdr, (size_t)hl);
    if (len)
        memcpy(buf + hl, data, len);
    if (w->scrub && len)
        cp_scrub_member(w->scrub, name, buf + hl, len); /* tails, exception text, any copy */
    int rc = -1;
    uint64_t marker_off = w->file_off;
    /* compressed first, so that the guard sees what the member really adds */
    size_t dcap = ZSTD_compressBound(total);
    void *dst = malloc(dcap);
    size_t csize = dst ? bw_compress_frame(w->cctx, w->level, dst, dcap, buf, total) : 0;
    free(buf);
    if (!csize) {
        w->err = dst ? EIO : ENOMEM;
        free(dst);
        return -1;
    }
    if (w->room && !w->room(w->room_arg, (uint64_t)csize + 8 + 256)) { /* frame + marker */
        free(dst);
        w->err = ENOSPC;
        w->err_soft = 1;
        return -1;
    }
    if (!write_marker(w, name, len, w->tar_off, w->tar_off + (uint64_t)hl)) {
        struct bw_member *m = new_member(w, name, len);
        if (!m)
            w->err = ENOMEM;
        else {
            m->data = w->tar_off + (uint64_t)hl;
            m->written = len;
            m->marker_off = marker_off;
            rc = frame_append(w, m, dst, csize, total);
        }
    }
    free(dst);
    return rc;
}

int bw_begin(struct bw *w, const char *name, uint64_t size)
{
    soft_clear(w);
    if (w->err || w->open_member >= 0)
        return -1;
    uint8_t hdr[TAR_HDR_MAX];
    int hl = tar_header(hdr, name, size, w->mtime, 0640);
    if (hl < 0) {
        w->err = ENAMETOOLONG;
        return -1;
    }
    uint64_t marker_off = w->file_off;
    if (write_marker(w, name, size, w->tar_off, w->tar_off + (uint64_t)hl))
        return -1;
    struct bw_member *m = new_member(w, name, size);
    if (!m) {
        w->err = ENOMEM;
        return -1;
    }
    m->marker_off = marker_off;
    m->data = w->tar_off + (uint64_t)hl;
    w->open_member = (int)(m - w->members);
    return frame_out(w, m, hdr, (size_t)hl);
}

int bw_frame_raw(struct bw *w, const void *cdata, size_t csize, uint64_t usize)
{
    if (w->open_member < 0)
        return -1;
    struct bw_member *m = &w->members[w->open_member];
    if (m->written + usize > m->size) {
        w->err = EOVERFLOW;
        return -1;
    }
    if (frame_append(w, m, cdata, csize, usize))
        return -1;
    m->written += usize;
    return 0;
}

int bw_data(struct bw *w, const void *data, size_t len)
{
    if (w->open_member < 0)
        return -1;
    struct bw_member *m = &w->members[w->open_member];
    if (m->written + len > m->size) {
        w->err = EOVERFLOW;
        return -1;
    }
    if (frame_out(w, m, data, len))
        return -1;
    m->written += len;
    return 0;
}

int64_t bw_end(struct bw *w, uint64_t frame_size)
{
    if (w->open_member < 0)
        return -1;
    struct bw_member *m = &w->members[w->open_member];
    uint64_t missing = m->size - m->written, added = 0;
    if (missing) {
        /* one compressed zero frame, reused: a few hundred bytes per frame_size of padding */
        size_t fs = (size_t)(missing < frame_size ? missing : frame_size);
        void *zeros = calloc(1, fs);
        size_t cap = ZSTD_compressBound(fs);
        void *cz = malloc(cap);
        size_t cl = zeros && cz ? bw_compress_frame(w->cctx, w->level, cz, cap, zeros, fs) : 0;
        while (cl && missing >= fs) {
            if (bw_frame_raw(w, cz, cl, fs))
                break;
            missing -= fs;
            added += fs;
        }
        if (cl && missing && missing < fs && !w->err) {
            if (bw_data(w, zeros, (size_t)missing) == 0) {
                added += missing;
                missing = 0;
            }
        }
        free(zeros);
        free(cz);
        if (!cl && !w->err)
            w->err = ENOMEM;
        if (missing)
            return -1;
    }
    uint64_t pad = tar_padding(m->size);
    if (pad) {
        uint8_t z[TAR_BLOCK] = {0};
        if (frame_out(w, m, z, (size_t)pad))
            return -1;
    }
    w->open_member = -1;
    return (int64_t)added;
}

int bw_finish(struct bw *w)
{
    soft_clear(w);
    if (w->err || w->open_member >= 0)
        return -1;
    uint8_t z[2 * TAR_BLOCK] = {0};
    /* the end blocks belong to no member: write them as a bare frame */
    uint8_t cz[ZSTD_COMPRESSBOUND(sizeof(z))];
    size_t c = bw_compress_frame(w->cctx, w->level, cz, sizeof(cz), z, sizeof(z));
    if (!c) {
        w->err = EIO;
        return -1;
    }
    if (out(w, cz, c))
        return -1;
    uint64_t tar_end_off = w->tar_off;
    w->tar_off += sizeof(z);

    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", BUNDLE_INDEX_FORMAT);
    cJSON_AddNumberToObject(root, "tar_size", (double)w->tar_off);
    cJSON_AddNumberToObject(root, "tar_end", (double)tar_end_off);
    cJSON *ms = cJSON_AddArrayToObject(root, "members");
    for (size_t i = 0; i < w->nmembers; i++) {
        struct bw_member *m = &w->members[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", m->name);
        cJSON_AddNumberToObject(o, "size", (double)m->size);
        cJSON_AddNumberToObject(o, "header", (double)m->header);
        cJSON_AddNumberToObject(o, "data", (double)m->data);
        cJSON *fs = cJSON_AddArrayToObject(o, "frames");
        for (size_t j = 0; j < m->nframes; j++) {
            double v[4] = {(double)m->frames[j].file_off, (double)m->frames[j].csize,
                           (double)m->frames[j].tar_off, (double)m->frames[j].usize};
            cJSON_AddItemToArray(fs, cJSON_CreateDoubleArray(v, 4));
        }
        cJSON_AddItemToArray(ms, o);
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) {
        w->err = ENOMEM;
        return -1;
    }
    uint32_t n = (uint32_t)strlen(json);
    uint8_t hdr[8];
    uint32_t magic = BUNDLE_MAGIC_INDEX, flen = n + 12;
    memcpy(hdr, &magic, 4);
    memcpy(hdr + 4, &flen, 4);
    int rc = out(w, hdr, 8) || out(w, json, n) || out(w, &n, 4) ||
             out(w, BUNDLE_INDEX_TRAILER, BUNDLE_INDEX_TRAILER_LEN);
    free(json);
    return rc ? -1 : 0;
}

/* What bw_adopt restores when the last frame it took turns out corrupt: the state before it. */
struct adopt_undo {
    uint64_t file_off, tar_off, written;
    size_t nframes;
    int open;
};

/* The walk of bw_adopt: the file, the buffer for one whole frame, and what was learned so far. */
struct adopt {
    struct bw *w;
    int fd;
    uint64_t fsize;
    uint8_t *buf;
    size_t bufcap;
    struct bw_member *cur; /* the member of the frames that follow */
    uint64_t off, marker_off;
    struct adopt_undo prev;
    uint64_t last_off, last_len; /* the last data frame taken */
    size_t last_member;          /* its member's index */
};

/* A member marker (payload len bytes at a->off + 8): opens its member when it agrees with the tar
 * offset so far. 0 to go on, -1 where the walk stops (the cut). */
static int adopt_marker(struct adopt *a, uint32_t len)
{
    struct bw *w = a->w;
    if (len >= 512 || w->open_member >= 0)
        return -1;
    char js[512];
    if (pread(a->fd, js, len, (off_t)(a->off + 8)) != (ssize_t)len)
        return -1;
    js[len] = 0;
    cJSON *o = cJSON_Parse(js);
    cJSON *nm = cJSON_GetObjectItem(o, "member"), *sz = cJSON_GetObjectItem(o, "size"),
          *hd = cJSON_GetObjectItem(o, "header"), *da = cJSON_GetObjectItem(o, "data");
    int good = cJSON_IsString(nm) && cJSON_IsNumber(sz) && cJSON_IsNumber(hd) &&
               cJSON_IsNumber(da) && (uint64_t)hd->valuedouble == w->tar_off &&
               da->valuedouble >= hd->valuedouble + TAR_BLOCK;
    if (good) {
        a->cur = new_member(w, nm->valuestring, (uint64_t)sz->valuedouble);
        if (a->cur) {
            a->cur->data = (uint64_t)da->valuedouble;
            a->cur->marker_off = a->off;
            a->marker_off = a->off;
            w->open_member = (int)(a->cur - w->members);
        }
    }
    cJSON_Delete(o);
    if (!good || !a->cur)
        return -1;
    return 0;
}

/* A skippable frame (payload len bytes): a marker opens a member, others are passed over. 0 to go
 * on, -1 where the walk stops, 1 when it is the index (the bundle is complete). */
static int adopt_skippable(struct adopt *a, uint32_t magic, uint32_t len)
{
    if (a->off + 8 + len > a->fsize)
        return -1;
    if (magic == BUNDLE_MAGIC_INDEX)
        return 1;
    if (magic == BUNDLE_MAGIC_MARKER && adopt_marker(a, len))
        return -1;
    a->off += 8 + len;
    a->w->file_off = a->off;
    return 0;
}

/* A data frame of the open member (h: its first got bytes): read whole, measured and recorded
 * with its tar range. 0 to go on, -1 where the walk stops. */
static int adopt_frame(struct adopt *a, const uint8_t *h, size_t got)
{
    struct bw *w = a->w;
    struct bw_member *cur = a->cur;
    if (!cur || w->open_member < 0)
        return -1; /* e.g. the tar end frame of a bundle that lost its index: rewritten */
    unsigned long long usz = ZSTD_getFrameContentSize(h, got);
    if (usz == ZSTD_CONTENTSIZE_UNKNOWN || usz == ZSTD_CONTENTSIZE_ERROR)
        return -1;
    uint64_t end_expected = cur->data + cur->size + tar_padding(cur->size);
    if (w->tar_off + usz > end_expected)
        return -1;
    /* block headers are spread over the frame: read it whole (bounded by its bound) */
    size_t need = (size_t)(a->fsize - a->off);
    size_t max = ZSTD_compressBound((size_t)usz) + 64;
    if (need > max)
        need = max;
    if (need > a->bufcap) {
        uint8_t *nb = realloc(a->buf, need);
        if (!nb)
            return -1;
        a->buf = nb;
        a->bufcap = need;
    }
    if (pread(a->fd, a->buf, need, (off_t)a->off) != (ssize_t)need)
        return -1;
    size_t csz = ZSTD_findFrameCompressedSize(a->buf, need);
    if (ZSTD_isError(csz))
        return -1;
    a->prev = (struct adopt_undo){a->off, w->tar_off, cur->written, cur->nframes, w->open_member};
    if (add_frame(cur, a->off, csz, w->tar_off, usz))
        return -1;
    w->tar_off += usz;
    cur->written = w->tar_off <= cur->data ? 0 : w->tar_off - cur->data;
    if (cur->written > cur->size)
        cur->written = cur->size;
    a->off += csz;
    w->file_off = a->off;
    w->open_member = w->tar_off < end_expected ? (int)(cur - w->members) : -1;
    a->last_off = a->prev.file_off;
    a->last_len = csz;
    a->last_member = (size_t)(cur - w->members);
    return 0;
}

/* Whether the len bytes at off of fd are one frame that decompresses (64 MiB at most). */
static int frame_decodes(int fd, ZSTD_DCtx *d, uint64_t off, uint64_t len)
{
    uint8_t *src = malloc(len);
    int good = 0;
    if (src && pread(fd, src, len, (off_t)off) == (ssize_t)len) {
        unsigned long long usz = ZSTD_getFrameContentSize(src, len);
        if (usz <= (64ULL << 20)) {
            void *dst = malloc(usz ? usz : 1);
            good = dst && !ZSTD_isError(ZSTD_decompressDCtx(d, dst, usz, src, len));
            free(dst);
        }
    }
    free(src);
    return good;
}

/* The end of the walk: drops a corrupt last frame and a member without its header frame, then cuts
 * the file after what was kept. Fills why; 0, or -1 when the file cannot be cut. */
static int adopt_close(struct adopt *a, ZSTD_DCtx *d, char *why, size_t whylen)
{
    struct bw *w = a->w;
    struct bw_member *cur = a->cur;
    /* a kill cannot leave a whole frame with bad content, but a power cut can: check the last */
    if (a->last_len && !frame_decodes(a->fd, d, a->last_off, a->last_len)) {
        /* the frame is its member's, which may not be the last: a member whose marker came after
         * it is cut away with it */
        cur = a->cur = &w->members[a->last_member];
        w->nmembers = a->last_member + 1;
        a->marker_off = cur->marker_off;
        cur->nframes = a->prev.nframes;
        cur->written = a->prev.written;
        w->tar_off = a->prev.tar_off;
        w->file_off = a->prev.file_off;
        w->open_member = a->prev.open;
        snprintf(why, whylen, "dropped a corrupt last frame");
    }
    if (cur && cur->nframes == 0) {
        /* marker without its header frame: forget the member */
        free(cur->frames);
        cur->frames = NULL;
        cur->cap = 0;
        w->nmembers--;
        w->file_off = a->marker_off;
        w->open_member = -1;
    }
    if (!w->nmembers)
        snprintf(why, whylen, "no complete member");
    if (ftruncate(a->fd, (off_t)w->file_off) || lseek(a->fd, (off_t)w->file_off, SEEK_SET) < 0) {
        snprintf(why, whylen, "cannot cut the file: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Walk the frames of an existing, possibly cut, bundle and rebuild the writer state. Frames are
 * trusted only as far as they agree with the markers; the first disagreement is the cut. */
int bw_adopt(struct bw *w, int fd, int level, time_t mtime, char *why, size_t whylen)
{
    if (bw_init(w, fd, level, mtime))
        return -1;
    why[0] = 0;
    off_t fsize = lseek(fd, 0, SEEK_END);
    if (fsize < 0) {
        snprintf(why, whylen, "cannot size the file: %s", strerror(errno));
        return -1;
    }
    struct adopt a = {.w = w, .fd = fd, .fsize = (uint64_t)fsize, .bufcap = 1 << 20};
    a.prev.open = -1;
    a.buf = malloc(a.bufcap);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    int rc = 0;
    if (!a.buf || !d) {
        snprintf(why, whylen, "out of memory");
        rc = -1;
        goto out;
    }
    while (a.off + 8 <= a.fsize) {
        uint8_t h[32];
        ssize_t got = pread(fd, h, sizeof(h), (off_t)a.off);
        if (got < 8)
            break;
        uint32_t magic, len;
        memcpy(&magic, h, 4);
        memcpy(&len, h + 4, 4);
        int step = magic >= BUNDLE_MAGIC_SKIP_MIN && magic <= BUNDLE_MAGIC_SKIP_MAX
                       ? adopt_skippable(&a, magic, len)
                       : adopt_frame(&a, h, (size_t)got);
        if (step == 1) {
            snprintf(why, whylen, "bundle already has an index");
            rc = 1;
            goto out;
        }
        if (step < 0)
            break;
    }
    rc = adopt_close(&a, d, why, whylen);
out:
    free(a.buf);
    ZSTD_freeDCtx(d);
    return rc;
}

int bw_drop_last(struct bw *w)
{
    if (!w->nmembers)
        return -1;
    struct bw_member *m = &w->members[w->nmembers - 1];
    w->file_off = m->marker_off;
    w->tar_off = m->header;
    free(m->frames);
    w->nmembers--;
    w->open_member = -1;
    if (ftruncate(w->fd, (off_t)w->file_off) || lseek(w->fd, (off_t)w->file_off, SEEK_SET) < 0) {
        w->err = errno;
        return -1;
    }
    return 0;
}

char *bw_read_small(struct bw *w, const char *name, size_t max)
{
    for (size_t i = 0; i < w->nmembers; i++) {
        struct bw_member *m = &w->members[i];
        if (strcmp(m->name, name) || m->nframes != 1 || m->written != m->size || m->size > max)
            continue;
        struct bw_frame *f = &m->frames[0];
        if (f->usize > max + 4096 || f->csize > ZSTD_compressBound((size_t)f->usize) + 64)
            return NULL;
        void *src = malloc(f->csize);
        char *dst = malloc(f->usize + 1);
        char *out = NULL;
        if (src && dst && pread(w->fd, src, f->csize, (off_t)f->file_off) == (ssize_t)f->csize &&
            ZSTD_decompress(dst, f->usize, src, f->csize) == f->usize) {
            uint64_t skip = m->data - f->tar_off;
            out = malloc(m->size + 1);
            if (out) {
                memcpy(out, dst + skip, m->size);
                out[m->size] = 0;
            }
        }
        free(src);
        free(dst);
        return out;
    }
    return NULL;
}
