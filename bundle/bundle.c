/* bundle.c - reading a crashpack bundle: the index, or a walk of the frames; data on demand.
 *
 * See bundle.h for the contract and docs/bundle-format.md for the format. Two ways to build the
 * member table, which the rest of the file then uses alike:
 *   load_index()  the index skippable frame at the end of the file, validated in full;
 *   walk()        frame by frame from offset 0, using member markers and zstd frame headers.
 * Reads check each frame's header against the table and decompress into a buffer of exactly the
 * table's size (capped), so a lying frame is an error, never an allocation it asked for. A few
 * frames stay decoded (LRU slots, FRAME_SLOTS_BYTES in all), each only as far as reads needed.
 */
#include "bundle.h"
#include "errmsg.h"
#include "util.h"

#include <cjson/cJSON.h>
/* for the buffer-less streaming decoder (ZSTD_decompressBegin/Continue), exported by libzstd */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_JSON_INT 9007199254740992.0 /* 2^53: integers a double holds exactly */
/* Slack over ZSTD_COMPRESSBOUND for a frame's compressed size (frame header, checksum, block
 * headers of multi-threaded jobs). A frame larger than bound + slack is not one a writer makes. */
#define FRAME_SLACK 1024u
#define WALK_WINDOW (64u << 10)
#define EXTRACT_CHUNK (1u << 20)

/* Decoded frames are kept in a few slots (LRU), each decoded only as far as a read has needed:
 * a page near a frame's start costs one block, not the whole frame. See frame_fill(). */
#define FRAME_SLOTS 8u
#define FRAME_SLOTS_BYTES (40u << 20) /* decompressed bytes all slots may hold together */
#define FEED_READ (256u << 10)        /* compressed bytes read ahead per pread */

struct frame_slot {
    const struct bundle_frame *f; /* NULL: empty */
    uint64_t used;                /* LRU stamp */
    unsigned char *dbuf;          /* the frame's content, decoded up to `have` */
    size_t dcap, have;
    unsigned char *cbuf; /* the compressed frame, read up to `cread`, fed up to `cpos` */
    size_t ccap, cread, cpos;
    ZSTD_DCtx *dctx; /* buffer-less decoding state; the frame is done when have == f->size */
};

struct bundle {
    int fd;
    uint64_t file_size;
    uint64_t tar_size;
    int complete;
    char reason[768];
    char err[512];

    struct bundle_member *members;
    size_t nmembers, members_cap;
    size_t
        *first_frame; /* per member: index into frames (pointers are set when the table is done) */
    struct bundle_frame *frames;
    size_t nframes, frames_cap;

    struct frame_slot slots[FRAME_SLOTS];
    int last_err;  /* frame_data()'s error code */
    size_t nslots; /* slots in use: FRAME_SLOTS_BYTES / the largest frame, 1..FRAME_SLOTS */
    uint64_t clock;
    unsigned char *cbuf; /* scratch for walk() */
    size_t ccap;
};

/* ---- small helpers ---- */


#define SETERR(b, ...) cp_errmsg((b)->err, sizeof((b)->err), __VA_ARGS__)

const char *bundle_strerror(int code)
{
    switch (code) {
    case BUNDLE_OK:
        return "ok";
    case BUNDLE_EIO:
        return "I/O error";
    case BUNDLE_EFORMAT:
        return "corrupt bundle";
    case BUNDLE_ENOENT:
        return "no such member";
    case BUNDLE_ETRUNC:
        return "member is truncated";
    case BUNDLE_ETOOBIG:
        return "over a size limit";
    case BUNDLE_ENOMEM:
        return "out of memory";
    case BUNDLE_EINVAL:
        return "invalid argument";
    }
    return "unknown error";
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads up to len bytes at off; returns the bytes read (short only at end of file) or -1. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *q = realloc(*p, ncap * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = ncap;
    return 0;
}

/* Ensures a byte buffer of at least `need` bytes (exact size: these can be tens of MiB). */
/* A buffer of at least `need` bytes whose old content does not matter (no copy). */
static int fresh(unsigned char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    free(*p);
    *cap = 0;
    if (!(*p = malloc(need)))
        return -1;
    *cap = need;
    return 0;
}

static int reserve(unsigned char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    unsigned char *q = realloc(*p, need);
    if (!q)
        return -1;
    *p = q;
    *cap = need;
    return 0;
}

static uint64_t frame_bound(uint64_t size)
{
    return (uint64_t)ZSTD_COMPRESSBOUND((size_t)size) + FRAME_SLACK;
}

/* A non-negative integer a double holds exactly. */
static int json_u64(const cJSON *o, uint64_t *out)
{
    if (!cJSON_IsNumber(o))
        return -1;
    double d = o->valuedouble;
    if (!(d >= 0) || d > MAX_JSON_INT)
        return -1;
    uint64_t v = (uint64_t)d;
    if ((double)v != d)
        return -1;
    *out = v;
    return 0;
}

/* Relative, non-empty, no empty / "." / ".." component, no control characters, bounded. */
static int name_ok(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > BUNDLE_MAX_NAME || s[0] == '/')
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        if (!e)
            break;
        p = e + 1;
        if (!*p)
            return 0; /* trailing slash */
    }
    return 1;
}

/* ---- the member table ---- */

static void table_reset(struct bundle *b)
{
    for (size_t i = 0; i < b->nmembers; i++)
        free((char *)b->members[i].name);
    b->nmembers = 0;
    b->nframes = 0;
    b->tar_size = 0;
}

/* Starts a member; takes a copy of the (validated) name. */
static int table_add_member(struct bundle *b, const char *name, uint64_t size, uint64_t header,
                            uint64_t data)
{
    if (b->nmembers >= BUNDLE_MAX_MEMBERS)
        return BUNDLE_ETOOBIG;
    if (grow((void **)&b->members, &b->members_cap, b->nmembers + 1, sizeof(*b->members)))
        return BUNDLE_ENOMEM;
    size_t *ff = realloc(b->first_frame, b->members_cap * sizeof(*ff));
    if (!ff)
        return BUNDLE_ENOMEM;
    b->first_frame = ff;
    char *copy = strdup(name);
    if (!copy)
        return BUNDLE_ENOMEM;
    struct bundle_member *m = &b->members[b->nmembers];
    memset(m, 0, sizeof(*m));
    m->name = copy;
    m->size = size;
    m->header = header;
    m->data = data;
    b->first_frame[b->nmembers] = b->nframes;
    b->nmembers++;
    return BUNDLE_OK;
}

/* Appends a frame to the last member. */
static int table_add_frame(struct bundle *b, uint64_t fo, uint64_t cs, uint64_t to, uint64_t ds)
{
    if (b->nframes >= BUNDLE_MAX_FRAMES)
        return BUNDLE_ETOOBIG;
    if (grow((void **)&b->frames, &b->frames_cap, b->nframes + 1, sizeof(*b->frames)))
        return BUNDLE_ENOMEM;
    b->frames[b->nframes++] = (struct bundle_frame){fo, cs, to, ds};
    struct bundle_member *m = &b->members[b->nmembers - 1];
    m->nframes++;
    m->compressed += cs;
    return BUNDLE_OK;
}

/* Sets each member's frame pointer and the bytes its frames cover. */
static void table_finish(struct bundle *b)
{
    for (size_t i = 0; i < b->nmembers; i++) {
        struct bundle_member *m = &b->members[i];
        m->frames = m->nframes ? &b->frames[b->first_frame[i]] : NULL;
        uint64_t end = m->nframes
                           ? m->frames[m->nframes - 1].tar_offset + m->frames[m->nframes - 1].size
                           : m->header;
        uint64_t avail = end > m->data ? end - m->data : 0;
        if (avail > m->size)
            avail = m->size;
        m->available = avail;
        m->truncated = avail < m->size;
    }
    uint64_t largest = 1;
    for (size_t i = 0; i < b->nframes; i++)
        if (b->frames[i].size > largest)
            largest = b->frames[i].size < BUNDLE_MAX_FRAME_SIZE ? b->frames[i].size
                                                                 : BUNDLE_MAX_FRAME_SIZE;
    b->nslots = FRAME_SLOTS_BYTES / largest;
    if (b->nslots < 1)
        b->nslots = 1;
    if (b->nslots > FRAME_SLOTS)
        b->nslots = FRAME_SLOTS;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 0 when every name is unique, else -1 with the duplicate in `why`. */
static int check_unique(struct bundle *b, char *why, size_t whylen)
{
    if (b->nmembers < 2)
        return 0;
    const char **names = malloc(b->nmembers * sizeof(*names));
    if (!names) {
        cp_errmsg(why, whylen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < b->nmembers; i++)
        names[i] = b->members[i].name;
    qsort(names, b->nmembers, sizeof(*names), cmp_names);
    int rc = 0;
    for (size_t i = 1; i < b->nmembers; i++)
        if (!strcmp(names[i - 1], names[i])) {
            cp_errmsg(why, whylen, "member name `%s` appears twice", names[i]);
            rc = -1;
            break;
        }
    free(names);
    return rc;
}

/* Validates a member's tar offsets: header/data block-aligned, data after the header, the header
 * bounded, everything inside what a double holds. */
static int member_offsets_ok(uint64_t size, uint64_t header, uint64_t data)
{
    return header % TAR_BLOCK == 0 && data % TAR_BLOCK == 0 && data > header &&
           data - header <= BUNDLE_MAX_HEADER &&
           data + tar_blocks_bytes(size) <= (uint64_t)MAX_JSON_INT;
}

/* ---- the index ---- */

/* Reads the index frame at the end of the file: the trailer, the frame header that must agree
 * with it, the JSON. Returns the parsed JSON (the caller deletes it) and the index frame's file
 * offset in *fstart, or NULL with the reason in `why`. */
static cJSON *read_index(struct bundle *b, uint64_t *fstart_out, char *why, size_t whylen)
{
    unsigned char tail[12], fh[8];
    if (b->file_size < 20) {
        cp_errmsg(why, whylen, "file too small to hold an index");
        return NULL;
    }
    if (pread_full(b->fd, tail, 12, b->file_size - 12) != 12) {
        cp_errmsg(why, whylen, "cannot read the end of the file: %s", strerror(errno));
        return NULL;
    }
    if (memcmp(tail + 4, BUNDLE_INDEX_TRAILER, BUNDLE_INDEX_TRAILER_LEN)) {
        cp_errmsg(why, whylen, "no index: the file does not end with " BUNDLE_INDEX_TRAILER);
        return NULL;
    }
    uint64_t n = le32(tail);
    if (n > BUNDLE_MAX_INDEX) {
        cp_errmsg(why, whylen, "index length %llu over the limit", (unsigned long long)n);
        return NULL;
    }
    if (n + 20 > b->file_size) {
        cp_errmsg(why, whylen, "index length %llu larger than the file", (unsigned long long)n);
        return NULL;
    }
    uint64_t fstart = b->file_size - 20 - n;
    if (pread_full(b->fd, fh, 8, fstart) != 8) {
        cp_errmsg(why, whylen, "cannot read the index frame header");
        return NULL;
    }
    if (le32(fh) != BUNDLE_MAGIC_INDEX || le32(fh + 4) != n + 12) {
        cp_errmsg(why, whylen, "index frame header at offset %llu does not match the trailer",
            (unsigned long long)fstart);
        return NULL;
    }
    char *text = malloc(n + 1);
    if (!text) {
        cp_errmsg(why, whylen, "out of memory for a %llu-byte index", (unsigned long long)n);
        return NULL;
    }
    if (pread_full(b->fd, text, n, fstart + 8) != (ssize_t)n) {
        free(text);
        cp_errmsg(why, whylen, "cannot read the index");
        return NULL;
    }
    text[n] = 0;
    cJSON *root = cJSON_ParseWithLength(text, n);
    free(text);
    if (!root) {
        cp_errmsg(why, whylen, "index is not valid JSON");
        return NULL;
    }
    *fstart_out = fstart;
    return root;
}

/* Adds frame fr of member `name` to the table: an array [file_offset, compressed_size,
 * tar_offset, decompressed_size] that lies after the previous frame (*file_end) and before the
 * index frame at fstart, with sizes in bounds, at the member's tar offset so far (*cursor); both
 * advanced. 0, or -1 with the reason in `why`. */
static int index_frame(struct bundle *b, const cJSON *fr, const char *name, uint64_t fstart,
                       uint64_t *cursor, uint64_t *file_end, char *why, size_t whylen)
{
    uint64_t v[4];
    int k = 0;
    const cJSON *x;
    if (!cJSON_IsArray(fr) || cJSON_GetArraySize(fr) != 4) {
        cp_errmsg(why, whylen, "index member `%s`: a frame is not [4 numbers]", name);
        return -1;
    }
    cJSON_ArrayForEach(x, fr)
    {
        if (json_u64(x, &v[k])) {
            cp_errmsg(why, whylen, "index member `%s`: invalid frame value", name);
            return -1;
        }
        k++;
    }
    /* v = file_offset, compressed_size, tar_offset, decompressed_size */
    if (v[0] < *file_end || v[1] > fstart || v[0] > fstart - v[1]) {
        cp_errmsg(why, whylen,
                  "index member `%s`: frame at %llu+%llu outside the file or overlapping", name,
                  (unsigned long long)v[0], (unsigned long long)v[1]);
        return -1;
    }
    if (v[3] == 0 || v[3] > BUNDLE_MAX_FRAME_SIZE || v[1] < 4 || v[1] > frame_bound(v[3])) {
        cp_errmsg(why, whylen, "index member `%s`: frame sizes %llu/%llu out of bounds", name,
                  (unsigned long long)v[1], (unsigned long long)v[3]);
        return -1;
    }
    if (v[2] != *cursor) {
        cp_errmsg(why, whylen, "index member `%s`: frames not contiguous at tar offset %llu", name,
                  (unsigned long long)*cursor);
        return -1;
    }
    int e = table_add_frame(b, v[0], v[1], v[2], v[3]);
    if (e) {
        cp_errmsg(why, whylen, "index: %s", bundle_strerror(e));
        return -1;
    }
    *cursor += v[3];
    *file_end = v[0] + v[1];
    return 0;
}

/* Adds index member #i (jm) and its frames to the table, checked against the tar end of the
 * previous member (*tar_end) and the file end of the previous frame (*file_end), both advanced;
 * frames must lie before the index frame at fstart. 0, or -1 with the reason in `why`. */
static int index_member(struct bundle *b, const cJSON *jm, int i, uint64_t fstart,
                        uint64_t *tar_end, uint64_t *file_end, char *why, size_t whylen)
{
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(jm, "name");
    const cJSON *jf = cJSON_GetObjectItemCaseSensitive(jm, "frames");
    uint64_t size, header, data;
    if (!cJSON_IsObject(jm) || !cJSON_IsString(jn) || !name_ok(jn->valuestring)) {
        cp_errmsg(why, whylen, "index member #%d: missing or unsafe name", i);
        return -1;
    }
    if (json_u64(cJSON_GetObjectItemCaseSensitive(jm, "size"), &size) ||
        json_u64(cJSON_GetObjectItemCaseSensitive(jm, "header"), &header) ||
        json_u64(cJSON_GetObjectItemCaseSensitive(jm, "data"), &data) ||
        !member_offsets_ok(size, header, data)) {
        cp_errmsg(why, whylen, "index member `%s`: invalid size/header/data", jn->valuestring);
        return -1;
    }
    if (header < *tar_end) {
        cp_errmsg(why, whylen, "index member `%s` overlaps the previous member", jn->valuestring);
        return -1;
    }
    int nf = cJSON_IsArray(jf) ? cJSON_GetArraySize(jf) : -1;
    if (nf <= 0 || (uint64_t)nf > BUNDLE_MAX_FRAMES - b->nframes) {
        cp_errmsg(why, whylen, "index member `%s`: invalid frame list", jn->valuestring);
        return -1;
    }
    int e = table_add_member(b, jn->valuestring, size, header, data);
    if (e) {
        cp_errmsg(why, whylen, "index member `%s`: %s", jn->valuestring, bundle_strerror(e));
        return -1;
    }
    uint64_t cursor = header;
    const cJSON *fr;
    cJSON_ArrayForEach(fr, jf)
    {
        if (index_frame(b, fr, jn->valuestring, fstart, &cursor, file_end, why, whylen))
            return -1;
    }
    if (cursor != data + tar_blocks_bytes(size)) {
        cp_errmsg(why, whylen, "index member `%s`: frames cover %llu tar bytes, member needs %llu",
            jn->valuestring, (unsigned long long)(cursor - header),
            (unsigned long long)(data + tar_blocks_bytes(size) - header));
        return -1;
    }
    *tar_end = cursor;
    return 0;
}

/* Builds the table from the index. Returns 0, or -1 with the reason in `why` (table left dirty). */
static int load_index(struct bundle *b, char *why, size_t whylen)
{
    uint64_t fstart;
    cJSON *root = read_index(b, &fstart, why, whylen);
    if (!root)
        return -1;
    int rc = -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *members = cJSON_GetObjectItemCaseSensitive(root, "members");
    uint64_t tar_size;
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) ||
        strcmp(fmt->valuestring, BUNDLE_INDEX_FORMAT)) {
        cp_errmsg(why, whylen, "index format is not " BUNDLE_INDEX_FORMAT);
        goto out;
    }
    if (json_u64(cJSON_GetObjectItemCaseSensitive(root, "tar_size"), &tar_size)) {
        cp_errmsg(why, whylen, "index tar_size missing or invalid");
        goto out;
    }
    if (!cJSON_IsArray(members)) {
        cp_errmsg(why, whylen, "index has no members array");
        goto out;
    }
    int count = cJSON_GetArraySize(members);
    if (count <= 0 || (unsigned)count > BUNDLE_MAX_MEMBERS) {
        cp_errmsg(why, whylen, "index lists %d members", count);
        goto out;
    }

    uint64_t tar_end = 0;  /* end of the previous member in the tar stream */
    uint64_t file_end = 0; /* end of the previous frame in the file */
    int i = 0;
    const cJSON *jm;
    cJSON_ArrayForEach(jm, members)
    {
        if (index_member(b, jm, i, fstart, &tar_end, &file_end, why, whylen))
            goto out;
        i++;
    }
    if (tar_size < tar_end) {
        cp_errmsg(why, whylen, "index tar_size %llu smaller than its members",
            (unsigned long long)tar_size);
        goto out;
    }
    if (check_unique(b, why, whylen))
        goto out;
    b->tar_size = tar_size;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

/* ---- the walk ---- */

/* Compressed size of the zstd frame at `off` whose header declared `fcs` content bytes, found from
 * its block headers (ZSTD_findFrameCompressedSize) over a window that doubles as needed.
 * 0: found; 1: the file ends inside the frame; -1: corrupt; -2: I/O or memory error. */
static int walk_frame_size(struct bundle *b, uint64_t off, uint64_t fcs, uint64_t *csize)
{
    uint64_t remain = b->file_size - off;
    uint64_t bound = frame_bound(fcs);
    uint64_t lim = remain < bound ? remain : bound;
    uint64_t win = lim < WALK_WINDOW ? lim : WALK_WINDOW;
    for (;;) {
        if (reserve(&b->cbuf, &b->ccap, (size_t)win))
            return -2;
        if (pread_full(b->fd, b->cbuf, (size_t)win, off) != (ssize_t)win)
            return -2;
        size_t r = ZSTD_findFrameCompressedSize(b->cbuf, (size_t)win);
        if (!ZSTD_isError(r)) {
            *csize = r;
            return 0;
        }
        if (ZSTD_getErrorCode(r) != ZSTD_error_srcSize_wrong)
            return -1;
        if (win == lim)
            return remain <= bound ? 1 : -1;
        win = win * 2 < lim ? win * 2 : lim;
    }
}

/* Parses a member marker's payload. 0 ok, -1 invalid (reason in why). */
static int parse_marker(const char *text, size_t len, char *name, size_t namelen, uint64_t *size,
                        uint64_t *header, uint64_t *data, char *why, size_t whylen)
{
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j) {
        cp_errmsg(why, whylen, "member marker is not valid JSON");
        return -1;
    }
    int rc = -1;
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(j, "member");
    if (!cJSON_IsObject(j) || !cJSON_IsString(jn) || !name_ok(jn->valuestring) ||
        strlen(jn->valuestring) >= namelen) {
        cp_errmsg(why, whylen, "member marker has a missing or unsafe name");
        goto out;
    }
    if (json_u64(cJSON_GetObjectItemCaseSensitive(j, "size"), size) ||
        json_u64(cJSON_GetObjectItemCaseSensitive(j, "header"), header) ||
        json_u64(cJSON_GetObjectItemCaseSensitive(j, "data"), data) ||
        !member_offsets_ok(*size, *header, *data)) {
        cp_errmsg(why, whylen, "member marker for `%s` has invalid size/header/data", jn->valuestring);
        goto out;
    }
    snprintf(name, namelen, "%s", jn->valuestring);
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

/* Where the walk of the frames stands. */
struct walk_state {
    uint64_t off;        /* file offset of the next frame */
    uint64_t cursor;     /* tar offset the frames so far reach */
    int in_member;       /* the last member still expects frames */
    uint64_t member_end; /* the tar offset where the last member ends */
    char *name;          /* BUNDLE_MAX_NAME + 1 bytes for a marker's member name */
};

/* A member marker at w->off with a len-byte payload: its member is added to the table when it
 * starts where the stream is, after the previous member is whole, under a new name. 0, or -1
 * where the walk stops (why says why). */
static int walk_marker(struct bundle *b, struct walk_state *w, uint64_t len, char *why,
                       size_t whylen)
{
    uint64_t off = w->off, size, header, data;
    if (len > BUNDLE_MAX_MARKER) {
        cp_errmsg(why, whylen, "member marker at offset %llu too large", (unsigned long long)off);
        return -1;
    }
    char text[BUNDLE_MAX_MARKER];
    if (pread_full(b->fd, text, (size_t)len, off + 8) != (ssize_t)len) {
        cp_errmsg(why, whylen, "read error at offset %llu", (unsigned long long)off);
        return -1;
    }
    char mwhy[256];
    if (parse_marker(text, (size_t)len, w->name, BUNDLE_MAX_NAME + 1, &size, &header, &data, mwhy,
                     sizeof(mwhy))) {
        cp_errmsg(why, whylen, "%s (offset %llu)", mwhy, (unsigned long long)off);
        return -1;
    }
    if (w->in_member && w->cursor < w->member_end) {
        cp_errmsg(why, whylen, "member `%s` cut short: the next marker is at offset %llu",
                  b->members[b->nmembers - 1].name, (unsigned long long)off);
        return -1;
    }
    if (header != w->cursor) {
        cp_errmsg(why, whylen,
                  "member marker for `%s` at offset %llu says tar offset %llu, the stream "
                  "is at %llu",
                  w->name, (unsigned long long)off, (unsigned long long)header,
                  (unsigned long long)w->cursor);
        return -1;
    }
    if (bundle_find(b, w->name)) {
        cp_errmsg(why, whylen, "member `%s` appears twice (second marker at offset %llu)", w->name,
                  (unsigned long long)off);
        return -1;
    }
    int e = table_add_member(b, w->name, size, header, data);
    if (e) {
        cp_errmsg(why, whylen, "member marker at offset %llu: %s", (unsigned long long)off,
                  bundle_strerror(e));
        return -1;
    }
    w->in_member = 1;
    w->member_end = data + tar_blocks_bytes(size);
    return 0;
}

/* A skippable frame at w->off (h: its first hl bytes; remain bytes left in the file): a marker
 * opens its member, any other is passed over. 0, or -1 where the walk stops (why says why). */
static int walk_skippable(struct bundle *b, struct walk_state *w, const unsigned char *h, size_t hl,
                          uint64_t remain, char *why, size_t whylen)
{
    if (hl < 8) {
        cp_errmsg(why, whylen, "file ends inside a frame header at offset %llu",
                  (unsigned long long)w->off);
        return -1;
    }
    uint64_t len = le32(h + 4);
    if (len > remain - 8) {
        cp_errmsg(why, whylen, "file ends inside a skippable frame at offset %llu",
                  (unsigned long long)w->off);
        return -1;
    }
    if (le32(h) == BUNDLE_MAGIC_MARKER && walk_marker(b, w, len, why, whylen))
        return -1;
    w->off += 8 + len;
    return 0;
}

/* The content size (*fcs) that the header of the zstd frame at off declares (h: its first hl of
 * hcap bytes read): known and within the limit. 0, or -1 (why says why). */
static int walk_content_size(const unsigned char *h, size_t hl, size_t hcap, uint64_t off,
                             unsigned long long *fcs, char *why, size_t whylen)
{
    *fcs = ZSTD_getFrameContentSize(h, hl);
    if (*fcs == ZSTD_CONTENTSIZE_ERROR) {
        if (hl < hcap)
            cp_errmsg(why, whylen, "file ends inside a frame header at offset %llu",
                      (unsigned long long)off);
        else
            cp_errmsg(why, whylen, "bad zstd frame header at offset %llu", (unsigned long long)off);
        return -1;
    }
    if (*fcs == ZSTD_CONTENTSIZE_UNKNOWN) {
        cp_errmsg(why, whylen, "zstd frame at offset %llu has no content size",
                  (unsigned long long)off);
        return -1;
    }
    if (*fcs > BUNDLE_MAX_FRAME_SIZE) {
        cp_errmsg(why, whylen, "zstd frame at offset %llu declares %llu bytes, over the limit",
                  (unsigned long long)off, *fcs);
        return -1;
    }
    return 0;
}

/* A zstd frame at w->off (h: its first hl of hcap bytes read): measured, and added to the open
 * member when it lies inside it; past a member's end the stream belongs to none. 0, or -1 where
 * the walk stops (why says why). */
static int walk_data_frame(struct bundle *b, struct walk_state *w, const unsigned char *h,
                           size_t hl, size_t hcap, char *why, size_t whylen)
{
    uint64_t off = w->off;
    unsigned long long fcs;
    if (walk_content_size(h, hl, hcap, off, &fcs, why, whylen))
        return -1;
    uint64_t csize = 0;
    int r = walk_frame_size(b, off, fcs, &csize);
    if (r == 1) {
        cp_errmsg(why, whylen, "file ends inside the zstd frame at offset %llu",
                  (unsigned long long)off);
        return -1;
    } else if (r < 0) {
        cp_errmsg(why, whylen, "%s at offset %llu",
                  r == -1 ? "corrupt zstd frame" : "read error or out of memory",
                  (unsigned long long)off);
        return -1;
    }
    if (fcs == 0) { /* adds nothing to the tar stream */
        w->off += csize;
        return 0;
    }
    if (w->in_member && w->cursor < w->member_end) {
        if (w->cursor + fcs > w->member_end) {
            cp_errmsg(why, whylen, "zstd frame at offset %llu crosses the end of member `%s`",
                      (unsigned long long)off, b->members[b->nmembers - 1].name);
            return -1;
        }
        int e = table_add_frame(b, off, csize, w->cursor, fcs);
        if (e) {
            cp_errmsg(why, whylen, "at offset %llu: %s", (unsigned long long)off,
                      bundle_strerror(e));
            return -1;
        }
    } else {
        w->in_member = 0; /* the tar end, or frames that belong to no member */
    }
    w->cursor += fcs;
    w->off += csize;
    return 0;
}

/* Builds the table by walking the frames from the start. Always returns with a usable (possibly
 * empty) table; `why` says where and why the walk stopped. */
static void walk(struct bundle *b, char *why, size_t whylen)
{
    struct walk_state w = {0};
    w.name = malloc(BUNDLE_MAX_NAME + 1);
    if (!w.name) {
        cp_errmsg(why, whylen, "out of memory");
        return;
    }
    cp_errmsg(why, whylen, "every frame is complete");
    while (w.off < b->file_size) {
        unsigned char h[18];
        uint64_t remain = b->file_size - w.off;
        size_t hl = remain < sizeof(h) ? (size_t)remain : sizeof(h);
        if (pread_full(b->fd, h, hl, w.off) != (ssize_t)hl) {
            cp_errmsg(why, whylen, "read error at offset %llu", (unsigned long long)w.off);
            break;
        }
        if (hl < 4) {
            cp_errmsg(why, whylen, "file ends inside a frame header at offset %llu",
                      (unsigned long long)w.off);
            break;
        }
        uint32_t magic = le32(h);
        int r;
        if (magic >= BUNDLE_MAGIC_SKIP_MIN && magic <= BUNDLE_MAGIC_SKIP_MAX) {
            r = walk_skippable(b, &w, h, hl, remain, why, whylen);
        } else if (magic != ZSTD_MAGICNUMBER) {
            cp_errmsg(why, whylen, "no zstd frame at offset %llu", (unsigned long long)w.off);
            r = -1;
        } else {
            r = walk_data_frame(b, &w, h, hl, sizeof(h), why, whylen);
        }
        if (r)
            break;
    }
    b->tar_size = w.cursor;
    free(w.name);
}

/* ---- open / close ---- */

static void free_bundle(struct bundle *b)
{
    if (!b)
        return;
    table_reset(b);
    free(b->members);
    free(b->first_frame);
    free(b->frames);
    for (size_t i = 0; i < FRAME_SLOTS; i++) {
        free(b->slots[i].dbuf);
        free(b->slots[i].cbuf);
        ZSTD_freeDCtx(b->slots[i].dctx);
    }
    free(b->cbuf);
    if (b->fd >= 0)
        close(b->fd);
    free(b);
}

void bundle_close(struct bundle *b)
{
    free_bundle(b);
}

/* What a file is when it is not a regular file, for the error. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a file";
}

/* Why a file holds no member at all, in a few words: empty, no zstd frame at its start (a text
 * file, another format), else the walk's own reason. */
static void no_member_why(const struct bundle *b, const char *walk_why, char *why, size_t len)
{
    unsigned char h[4];
    if (b->file_size == 0) {
        cp_errmsg(why, len, "an empty file");
        return;
    }
    if (b->file_size < 4 || pread_full(b->fd, h, 4, 0) != 4 ||
        ((le32(h) < BUNDLE_MAGIC_SKIP_MIN || le32(h) > BUNDLE_MAGIC_SKIP_MAX) &&
         le32(h) != ZSTD_MAGICNUMBER)) {
        cp_errmsg(why, len, "no zstd frame");
        return;
    }
    cp_errmsg(why, len, "%s", walk_why);
}

/* path (NULL for bundle_open_fd) is named in the errors that are about the file itself. */
static int open_common(int fd, const char *path, struct bundle **out, char *err, size_t errlen)
{
    struct stat st;
    const char *sep = path ? ": " : "";
    if (!path)
        path = "";
    if (fstat(fd, &st)) {
        cp_errmsg(err, errlen, "%s%scannot stat: %s", path, sep, strerror(errno));
        close(fd);
        return BUNDLE_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        cp_errmsg(err, errlen, "not a crashpack bundle%s%s (%s)", sep, path, file_kind(st.st_mode));
        close(fd);
        return BUNDLE_EFORMAT;
    }
    struct bundle *b = calloc(1, sizeof(*b));
    if (!b) {
        close(fd);
        cp_errmsg(err, errlen, "%s%sout of memory", path, sep);
        return BUNDLE_ENOMEM;
    }
    b->fd = fd;
    b->file_size = (uint64_t)st.st_size;
    char iwhy[384];
    if (load_index(b, iwhy, sizeof(iwhy)) == 0) {
        table_finish(b);
        b->complete = 1;
        *out = b;
        return BUNDLE_OK;
    }
    table_reset(b);
    char wwhy[384];
    walk(b, wwhy, sizeof(wwhy));
    table_finish(b);
    cp_errmsg(b->reason, sizeof(b->reason), "%s; walking the frames: %s", iwhy, wwhy);
    if (b->nmembers == 0) {
        char why[400];
        no_member_why(b, wwhy, why, sizeof(why));
        cp_errmsg(err, errlen, "not a crashpack bundle%s%s (%s)", sep, path, why);
        free_bundle(b);
        return BUNDLE_EFORMAT;
    }
    *out = b;
    return BUNDLE_OK;
}

int bundle_open(const char *path, struct bundle **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !out) {
        cp_errmsg(err, errlen, "invalid argument");
        return BUNDLE_EINVAL;
    }
    /* O_NONBLOCK: opening a FIFO must not hang; it is then refused as not a regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        cp_errmsg(err, errlen, "%s: %s", path, strerror(errno));
        return BUNDLE_EIO;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return open_common(fd, path, out, err, errlen);
}

int bundle_open_fd(int fd, struct bundle **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (fd < 0 || !out) {
        cp_errmsg(err, errlen, "invalid argument");
        return BUNDLE_EINVAL;
    }
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0) {
        cp_errmsg(err, errlen, "dup: %s", strerror(errno));
        return BUNDLE_EIO;
    }
    return open_common(d, NULL, out, err, errlen);
}

/* ---- accessors ---- */

int bundle_complete(const struct bundle *b)
{
    return b ? b->complete : 0;
}

const char *bundle_reason(const struct bundle *b)
{
    return b ? b->reason : "";
}

uint64_t bundle_file_size(const struct bundle *b)
{
    return b ? b->file_size : 0;
}

uint64_t bundle_tar_size(const struct bundle *b)
{
    return b ? b->tar_size : 0;
}

const char *bundle_error(const struct bundle *b)
{
    return b ? b->err : "no bundle";
}

size_t bundle_member_count(const struct bundle *b)
{
    return b ? b->nmembers : 0;
}

const struct bundle_member *bundle_member(const struct bundle *b, size_t i)
{
    return b && i < b->nmembers ? &b->members[i] : NULL;
}

const struct bundle_member *bundle_find(const struct bundle *b, const char *name)
{
    if (!b || !name)
        return NULL;
    for (size_t i = 0; i < b->nmembers; i++)
        if (!strcmp(b->members[i].name, name))
            return &b->members[i];
    return NULL;
}

/* ---- reading ---- */

/* The slot holding frame f, or an emptied one for it: the least recently used. */
static struct frame_slot *slot_for(struct bundle *b, const struct bundle_frame *f)
{
    struct frame_slot *victim = &b->slots[0];
    for (size_t i = 0; i < b->nslots; i++) {
        struct frame_slot *s = &b->slots[i];
        if (s->f == f) {
            s->used = ++b->clock;
            return s;
        }
        if (s->used < victim->used)
            victim = s;
    }
    victim->f = NULL;
    victim->have = victim->cread = victim->cpos = 0;
    victim->used = ++b->clock;
    return victim;
}

/* Starts decoding frame f in slot s: checks its header against the table, sizes the buffers. */
static int frame_start(struct bundle *b, const struct bundle_member *m, const struct bundle_frame *f,
                       struct frame_slot *s)
{
    if (f->size == 0 || f->size > BUNDLE_MAX_FRAME_SIZE ||
        f->compressed_size > frame_bound(f->size)) {
        SETERR(b, "member `%s`: frame at offset %llu over the size limits", m->name,
               (unsigned long long)f->file_offset);
        return BUNDLE_ETOOBIG;
    }
    size_t cs = (size_t)f->compressed_size, ds = (size_t)f->size;
    if (fresh(&s->cbuf, &s->ccap, cs)) {
        SETERR(b, "out of memory for a frame of %zu bytes", cs);
        return BUNDLE_ENOMEM;
    }
    size_t head = cs < ZSTD_FRAMEHEADERSIZE_MAX ? cs : ZSTD_FRAMEHEADERSIZE_MAX;
    ssize_t n = pread_full(b->fd, s->cbuf, head, f->file_offset);
    if (n < 0) {
        SETERR(b, "member `%s`: read error at offset %llu: %s", m->name,
               (unsigned long long)f->file_offset, strerror(errno));
        return BUNDLE_EIO;
    }
    if ((size_t)n != head) {
        SETERR(b, "member `%s`: the file ends inside the frame at offset %llu", m->name,
               (unsigned long long)f->file_offset);
        return BUNDLE_EFORMAT;
    }
    s->cread = head;
    /* a current-format zstd frame only (no skippable, no legacy format) */
    if (head < 4 || le32(s->cbuf) != ZSTD_MAGICNUMBER) {
        SETERR(b, "member `%s`: no zstd frame at offset %llu", m->name,
               (unsigned long long)f->file_offset);
        return BUNDLE_EFORMAT;
    }
    unsigned long long fcs = ZSTD_getFrameContentSize(s->cbuf, head);
    if (fcs != f->size) {
        SETERR(b, "member `%s`: frame at offset %llu declares %s bytes, the index %llu", m->name,
               (unsigned long long)f->file_offset,
               fcs == ZSTD_CONTENTSIZE_UNKNOWN ? "unknown"
               : fcs == ZSTD_CONTENTSIZE_ERROR ? "invalid"
                                               : "different",
               (unsigned long long)f->size);
        return BUNDLE_EFORMAT;
    }
    /* only now, with the header agreeing with the table, the output buffer (capped size) */
    if (fresh(&s->dbuf, &s->dcap, ds)) {
        SETERR(b, "out of memory for a frame of %zu bytes", ds);
        return BUNDLE_ENOMEM;
    }
    if (!s->dctx && !(s->dctx = ZSTD_createDCtx())) {
        SETERR(b, "out of memory for a decoder");
        return BUNDLE_ENOMEM;
    }
    size_t r = ZSTD_decompressBegin(s->dctx);
    if (ZSTD_isError(r)) {
        SETERR(b, "zstd: %s", ZSTD_getErrorName(r));
        return BUNDLE_EFORMAT;
    }
    s->f = f;
    return BUNDLE_OK;
}

/* Decodes slot s's frame block by block until `want` bytes of its content are there. The blocks
 * after that are left for a later read, so the frame's checksum is checked when a read reaches its
 * end (the block structure is checked as it goes). The compressed bytes are read as needed. */
static int frame_fill(struct bundle *b, const struct bundle_member *m, struct frame_slot *s,
                      size_t want)
{
    const struct bundle_frame *f = s->f;
    size_t cs = (size_t)f->compressed_size, ds = (size_t)f->size;
    while (s->have < want) {
        size_t need = ZSTD_nextSrcSizeToDecompress(s->dctx);
        if (need == 0 || need > cs - s->cpos) {
            SETERR(b, "member `%s`: frame at offset %llu %s", m->name,
                   (unsigned long long)f->file_offset,
                   need == 0 ? "ends before its declared size" : "is longer than the index says");
            return BUNDLE_EFORMAT;
        }
        if (s->cread < s->cpos + need) {
            size_t to = s->cpos + need;
            if (to - s->cread < FEED_READ)
                to = cs - s->cread < FEED_READ ? cs : s->cread + FEED_READ;
            ssize_t n = pread_full(b->fd, s->cbuf + s->cread, to - s->cread,
                                   f->file_offset + s->cread);
            if (n < 0) {
                SETERR(b, "member `%s`: read error at offset %llu: %s", m->name,
                       (unsigned long long)(f->file_offset + s->cread), strerror(errno));
                return BUNDLE_EIO;
            }
            if ((size_t)n != to - s->cread) {
                SETERR(b, "member `%s`: the file ends inside the frame at offset %llu", m->name,
                       (unsigned long long)f->file_offset);
                return BUNDLE_EFORMAT;
            }
            s->cread = to;
        }
        size_t r =
            ZSTD_decompressContinue(s->dctx, s->dbuf + s->have, ds - s->have, s->cbuf + s->cpos, need);
        if (ZSTD_isError(r)) {
            SETERR(b, "member `%s`: frame at offset %llu: %s", m->name,
                   (unsigned long long)f->file_offset, ZSTD_getErrorName(r));
            return BUNDLE_EFORMAT;
        }
        s->cpos += need;
        s->have += r;
    }
    if (s->have == ds) {
        /* the end: the checksum (if any) and nothing after the last block */
        size_t need;
        while ((need = ZSTD_nextSrcSizeToDecompress(s->dctx)) != 0) {
            if (need > cs - s->cpos) {
                SETERR(b, "member `%s`: frame at offset %llu is cut short", m->name,
                       (unsigned long long)f->file_offset);
                return BUNDLE_EFORMAT;
            }
            if (s->cread < s->cpos + need) {
                ssize_t n = pread_full(b->fd, s->cbuf + s->cread, s->cpos + need - s->cread,
                                       f->file_offset + s->cread);
                if (n != (ssize_t)(s->cpos + need - s->cread)) {
                    SETERR(b, "member `%s`: the file ends inside the frame at offset %llu",
                           m->name, (unsigned long long)f->file_offset);
                    return n < 0 ? BUNDLE_EIO : BUNDLE_EFORMAT;
                }
                s->cread = s->cpos + need;
            }
            size_t r = ZSTD_decompressContinue(s->dctx, s->dbuf + s->have, ds - s->have,
                                               s->cbuf + s->cpos, need);
            if (ZSTD_isError(r) || r != 0) {
                SETERR(b, "member `%s`: frame at offset %llu: %s", m->name,
                       (unsigned long long)f->file_offset,
                       ZSTD_isError(r) ? ZSTD_getErrorName(r) : "more data than declared");
                return BUNDLE_EFORMAT;
            }
            s->cpos += need;
        }
        if (s->cpos != cs) {
            SETERR(b, "member `%s`: frame at offset %llu is not %zu compressed bytes", m->name,
                   (unsigned long long)f->file_offset, cs);
            return BUNDLE_EFORMAT;
        }
    }
    return BUNDLE_OK;
}

/* Frame f's content, decoded at least up to `want` bytes (a slot's buffer), or NULL on error. */
static const unsigned char *frame_data(struct bundle *b, const struct bundle_member *m,
                                       const struct bundle_frame *f, size_t want)
{
    struct frame_slot *s = slot_for(b, f);
    int e = s->f ? BUNDLE_OK : frame_start(b, m, f, s);
    if (!e)
        e = frame_fill(b, m, s, want);
    if (e) {
        b->last_err = e;
        s->f = NULL; /* a later read starts the frame again (and fails the same way) */
        s->used = 0;
        return NULL;
    }
    return s->dbuf;
}

/* The index of the first frame of m that ends after tar offset pos (nframes when none). */
static size_t first_frame_after(const struct bundle_member *m, uint64_t pos)
{
    size_t lo = 0, hi = m->nframes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->frames[mid].tar_offset + m->frames[mid].size <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int member_of(const struct bundle *b, const struct bundle_member *m)
{
    return b->nmembers && m >= b->members && m < b->members + b->nmembers;
}

int bundle_read(struct bundle *b, const struct bundle_member *m, uint64_t offset, void *buf,
                size_t len, size_t *got)
{
    size_t dummy;
    if (!got)
        got = &dummy;
    *got = 0;
    if (!b)
        return BUNDLE_EINVAL;
    if (!m || !member_of(b, m) || (!buf && len)) {
        SETERR(b, "invalid argument");
        return BUNDLE_EINVAL;
    }
    if (offset >= m->size || len == 0)
        return BUNDLE_OK;
    uint64_t want = m->size - offset < len ? m->size - offset : len;
    uint64_t take = offset >= m->available         ? 0
                    : m->available - offset < want ? m->available - offset
                                                   : want;
    uint64_t pos = m->data + offset, end = pos + take;

    for (size_t i = first_frame_after(m, pos); pos < end; i++) {
        const struct bundle_frame *f = i < m->nframes ? &m->frames[i] : NULL;
        if (!f || f->tar_offset > pos) {
            SETERR(b, "member `%s`: no frame holds tar offset %llu", m->name,
                   (unsigned long long)pos);
            return BUNDLE_EFORMAT;
        }
        uint64_t fend = f->tar_offset + f->size;
        uint64_t n = (end < fend ? end : fend) - pos;
        const unsigned char *d = frame_data(b, m, f, (size_t)(pos - f->tar_offset + n));
        if (!d)
            return b->last_err;
        memcpy((char *)buf + *got, d + (pos - f->tar_offset), (size_t)n);
        *got += (size_t)n;
        pos += n;
    }
    if (take < want) {
        SETERR(b, "member `%s` is truncated: %llu of %llu bytes available", m->name,
               (unsigned long long)m->available, (unsigned long long)m->size);
        return BUNDLE_ETRUNC;
    }
    return BUNDLE_OK;
}

int bundle_frame_span(const struct bundle_member *m, uint64_t offset, uint64_t *lo, uint64_t *hi)
{
    if (!m || offset >= m->size || m->data > UINT64_MAX - offset)
        return -1;
    uint64_t pos = m->data + offset;
    size_t a = first_frame_after(m, pos);
    if (a == m->nframes || m->frames[a].tar_offset > pos)
        return -1;
    const struct bundle_frame *f = &m->frames[a];
    uint64_t fe = f->tar_offset + f->size, me = m->data + m->size;
    *lo = (f->tar_offset > m->data ? f->tar_offset : m->data) - m->data;
    *hi = (fe < me ? fe : me) - m->data;
    return 0;
}

int bundle_read_name(struct bundle *b, const char *name, uint64_t offset, void *buf, size_t len,
                     size_t *got)
{
    if (got)
        *got = 0;
    if (!b)
        return BUNDLE_EINVAL;
    const struct bundle_member *m = bundle_find(b, name);
    if (!m) {
        SETERR(b, "no member `%s`", name ? name : "(null)");
        return BUNDLE_ENOENT;
    }
    return bundle_read(b, m, offset, buf, len, got);
}

int bundle_read_all(struct bundle *b, const char *name, size_t max, char **buf, size_t *len)
{
    if (buf)
        *buf = NULL;
    if (len)
        *len = 0;
    if (!b)
        return BUNDLE_EINVAL;
    if (!buf || !len) {
        SETERR(b, "invalid argument");
        return BUNDLE_EINVAL;
    }
    const struct bundle_member *m = bundle_find(b, name);
    if (!m) {
        SETERR(b, "no member `%s`", name ? name : "(null)");
        return BUNDLE_ENOENT;
    }
    if (m->size > max || m->size >= SIZE_MAX) {
        SETERR(b, "member `%s` is %llu bytes, over the limit of %zu", m->name,
               (unsigned long long)m->size, max);
        return BUNDLE_ETOOBIG;
    }
    char *p = malloc((size_t)m->available + 1);
    if (!p) {
        SETERR(b, "out of memory");
        return BUNDLE_ENOMEM;
    }
    size_t got = 0;
    int e = bundle_read(b, m, 0, p, (size_t)m->size, &got);
    if (e && e != BUNDLE_ETRUNC) {
        free(p);
        return e;
    }
    p[got] = 0;
    *buf = p;
    *len = got;
    if (!e)
        b->members[m - b->members].read_whole = 1;
    return e;
}

int bundle_extract(struct bundle *b, const char *name, int out_fd)
{
    if (!b)
        return BUNDLE_EINVAL;
    const struct bundle_member *m = bundle_find(b, name);
    if (!m) {
        SETERR(b, "no member `%s`", name ? name : "(null)");
        return BUNDLE_ENOENT;
    }
    char *chunk = malloc(EXTRACT_CHUNK);
    if (!chunk) {
        SETERR(b, "out of memory");
        return BUNDLE_ENOMEM;
    }
    uint64_t off = 0;
    int e = BUNDLE_OK;
    while (off < m->size) {
        size_t got = 0;
        e = bundle_read(b, m, off, chunk, EXTRACT_CHUNK, &got);
        if (got && write_all(out_fd, chunk, got)) {
            SETERR(b, "write: %s", strerror(errno));
            e = BUNDLE_EIO;
            break;
        }
        off += got;
        if (e || got == 0)
            break;
    }
    free(chunk);
    return e;
}
