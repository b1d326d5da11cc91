/* checkpoint.c - checkpoint structure checks (see checkpoint.h).
 *
 * Only metadata is read: the first bytes (format detection), the zip central directory and local
 * headers (libzip with ZIP_CHECKCONS), or the safetensors JSON header. A checkpoint is often tens
 * of GiB on a network filesystem and this runs in the crash handler's finisher under a deadline,
 * so tensor data is never read and no CRC is computed: "valid" means structurally complete, which
 * is what a save cut short by a crash (or a full disk) breaks. */
#include "checkpoint.h"
#include "lazylib.h"
#include "util.h"

#include <cjson/cJSON.h>
#include <zip.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* libzip, opened the first time a checkpoint is a zip (lazylib.h) */
static struct {
    int ok;
    __typeof__(&zip_fdopen) fdopen;
    __typeof__(&zip_error_init_with_code) error_init_with_code;
    __typeof__(&zip_error_strerror) error_strerror;
    __typeof__(&zip_error_fini) error_fini;
    __typeof__(&zip_get_num_entries) get_num_entries;
    __typeof__(&zip_stat_init) stat_init;
    __typeof__(&zip_stat_index) stat_index;
    __typeof__(&zip_strerror) strerror;
    __typeof__(&zip_discard) discard;
} Z;

static int zip_load(char *err, size_t errlen)
{
    static struct cp_lazylib lib = {.soname = CP_SONAME_LIBZIP};
    if (Z.ok)
        return 0;
    if (CP_LAZY_FN(&lib, Z.fdopen, zip_fdopen, err, errlen) ||
        CP_LAZY_FN(&lib, Z.error_init_with_code, zip_error_init_with_code, err, errlen) ||
        CP_LAZY_FN(&lib, Z.error_strerror, zip_error_strerror, err, errlen) ||
        CP_LAZY_FN(&lib, Z.error_fini, zip_error_fini, err, errlen) ||
        CP_LAZY_FN(&lib, Z.get_num_entries, zip_get_num_entries, err, errlen) ||
        CP_LAZY_FN(&lib, Z.stat_init, zip_stat_init, err, errlen) ||
        CP_LAZY_FN(&lib, Z.stat_index, zip_stat_index, err, errlen) ||
        CP_LAZY_FN(&lib, Z.strerror, zip_strerror, err, errlen) ||
        CP_LAZY_FN(&lib, Z.discard, zip_discard, err, errlen))
        return -1;
    Z.ok = 1;
    return 0;
}

/* safetensors' own limit on the header (MAX_HEADER_SIZE in the reference implementation) */
#define ST_HEADER_MAX 100000000ull

const char *ckv_verdict_name(enum ckv_verdict v)
{
    switch (v) {
    case CKV_VALID:
        return "valid";
    case CKV_TRUNCATED:
        return "truncated";
    case CKV_UNREADABLE:
        return "unreadable";
    case CKV_UNVERIFIABLE:
        return "unverifiable";
    }
    return "unreadable";
}

int ckv_is_checkpoint_name(const char *name)
{
    static const char *const ext[] = {".pt", ".pth", ".bin", ".ckpt", ".safetensors"};
    size_t l = strlen(name);
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
        size_t e = strlen(ext[i]);
        if (l > e && !strcasecmp(name + l - e, ext[i]))
            return 1;
    }
    return 0;
}

static enum ckv_verdict set(struct ckv_result *r, enum ckv_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum ckv_verdict set(struct ckv_result *r, enum ckv_verdict v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    r->verdict = v;
    return v;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- torch.save zip ---- */

static enum ckv_verdict check_zip(int fd, const unsigned char *head, size_t hlen,
                                  struct ckv_result *r)
{
    char lerr[300];
    if (zip_load(lerr, sizeof(lerr))) {
        r->format = "zip";
        return set(r, CKV_UNREADABLE, "%s", lerr);
    }
    /* zip_fdopen closes the descriptor it is given once it succeeds: give it a copy */
    int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dfd < 0)
        return set(r, CKV_UNREADABLE, "dup: %s", strerror(errno));
    int ze = 0;
    zip_t *za = Z.fdopen(dfd, ZIP_CHECKCONS | ZIP_RDONLY, &ze);
    r->format = "zip";
    if (!za) {
        close(dfd);
        zip_error_t e;
        Z.error_init_with_code(&e, ze);
        char msg[200];
        snprintf(msg, sizeof(msg), "%s", Z.error_strerror(&e));
        Z.error_fini(&e);
        /* torch.save writes the central directory and its end record last: a file that starts
         * as a zip but has no end record is a save that did not finish (or a cut copy) */
        if (ze == ZIP_ER_NOZIP && hlen >= 4 && !memcmp(head, "PK\3\4", 4))
            return set(r, CKV_TRUNCATED,
                       "a zip without an intact end of central directory (%s): the file ends "
                       "before the save finished",
                       msg);
        return set(r, CKV_UNREADABLE, "zip: %s", msg);
    }
    zip_int64_t n = Z.get_num_entries(za, 0);
    uint64_t total = 0;
    int torch = 0;
    enum ckv_verdict v = CKV_VALID;
    r->entries = n > 0 ? (uint64_t)n : 0;
    if (n <= 0)
        v = set(r, CKV_UNREADABLE, "a zip archive without entries");
    /* ZIP_CHECKCONS already compared every local header with the central directory and checked
     * that each entry's data ends before the central directory, which ends inside the file;
     * the sizes are checked again here so that no arithmetic on them is trusted blindly */
    for (zip_int64_t i = 0; v == CKV_VALID && i < n; i++) {
        zip_stat_t st;
        Z.stat_init(&st);
        if (Z.stat_index(za, (zip_uint64_t)i, 0, &st)) {
            v = set(r, CKV_UNREADABLE, "zip entry %lld: %s", (long long)i,
                    Z.strerror(za));
            break;
        }
        if (st.valid & ZIP_STAT_COMP_SIZE) {
            if (st.comp_size > r->size) {
                v = set(r, CKV_TRUNCATED, "zip entry %lld (%.100s) is larger than the %llu-byte file",
                        (long long)i, st.name ? st.name : "?", (unsigned long long)r->size);
                break;
            }
            if (total + st.comp_size > r->size) {
                v = set(r, CKV_UNREADABLE, "zip entries overlap: together they exceed the file");
                break;
            }
            total += st.comp_size;
        }
        if (st.name) {
            size_t l = strlen(st.name);
            if (!strcmp(st.name, "data.pkl") || (l > 9 && !strcmp(st.name + l - 9, "/data.pkl")))
                torch = 1;
        }
    }
    Z.discard(za);
    r->format = torch ? "torch-zip" : "zip";
    if (v == CKV_VALID)
        set(r, CKV_VALID,
            torch ? "torch.save zip: end of central directory intact, %llu entries inside the file"
                  : "a zip archive (no data.pkl: not written by torch.save) with an intact end of "
                    "central directory, %llu entries inside the file",
            (unsigned long long)r->entries);
    return v;
}

/* ---- safetensors ---- */

static int dtype_size(const char *t)
{
    static const struct {
        const char *name;
        int size;
    } k[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
             {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},    {"U32", 4},     {"F32", 4},
             {"F64", 8},  {"I64", 8}, {"U64", 8}};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        if (!strcmp(t, k[i].name))
            return k[i].size;
    return 0; /* unknown (newer sub-byte types): its byte length is not checked */
}

struct span {
    uint64_t b, e;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->b < y->b ? -1 : x->b > y->b ? 1 : x->e < y->e ? -1 : x->e > y->e;
}

/* The safetensors JSON header (hl bytes after the 8-byte length) read and parsed into *out, a JSON
 * object the caller deletes. CKV_VALID, or the verdict set in r. */
static enum ckv_verdict st_read_header(int fd, uint64_t hl, struct ckv_result *r, cJSON **out)
{
    char *buf = malloc(hl + 1);
    if (!buf)
        return set(r, CKV_UNREADABLE, "cannot hold a %llu-byte header", (unsigned long long)hl);
    size_t got = 0;
    while (got < hl) {
        ssize_t k = pread(fd, buf + got, hl - got, (off_t)(8 + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : 0;
            free(buf);
            return e ? set(r, CKV_UNREADABLE, "reading the header: %s", strerror(e))
                     : set(r, CKV_TRUNCATED, "the file ends inside the safetensors header");
        }
        got += (size_t)k;
    }
    buf[hl] = 0;
    cJSON *h = cJSON_ParseWithLength(buf, hl);
    free(buf);
    if (!cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return set(r, CKV_UNREADABLE, "the safetensors header is not a JSON object");
    }
    *out = h;
    return CKV_VALID;
}

/* Tensor t (called name) of the header: its dtype, shape and data_offsets present, and the byte
 * range (*s) as long as dtype and shape need. CKV_VALID, or the verdict set in r. */
static enum ckv_verdict st_tensor(const cJSON *t, const char *name, struct ckv_result *r,
                                  struct span *s)
{
    cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(off) ||
        cJSON_GetArraySize(off) != 2)
        return set(r, CKV_UNREADABLE, "tensor '%.100s': missing dtype, shape or data_offsets",
                   name);
    double b = cJSON_GetArrayItem(off, 0)->valuedouble;
    double e = cJSON_GetArrayItem(off, 1)->valuedouble;
    if (!cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)) || b < 0 || e < b || e > 9.0e15)
        return set(r, CKV_UNREADABLE, "tensor '%.100s': bad data_offsets", name);
    *s = (struct span){(uint64_t)b, (uint64_t)e};
    uint64_t elems = 1;
    int ok = 1;
    cJSON *d;
    cJSON_ArrayForEach(d, shape)
    {
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 9.0e15 ||
            __builtin_mul_overflow(elems, (uint64_t)d->valuedouble, &elems))
            ok = 0;
    }
    int ds = dtype_size(dt->valuestring);
    uint64_t bytes;
    if (!ok ||
        (ds && (__builtin_mul_overflow(elems, (uint64_t)ds, &bytes) || bytes != s->e - s->b)))
        return set(r, CKV_UNREADABLE,
                   "tensor '%.100s': data_offsets span %llu bytes, its dtype and shape need "
                   "another size",
                   name, (unsigned long long)(s->e - s->b));
    return CKV_VALID;
}

/* The tensors' byte ranges in the data section, as the header declares them. */
struct st_spans {
    struct span *sp;
    size_t n, cap;
    uint64_t max_end; /* the end of the furthest range */
    char worst[160];  /* the name of its tensor */
};

/* Every tensor of header h (but __metadata__) checked and its range added to S. CKV_VALID, or the
 * verdict set in r. */
static enum ckv_verdict st_tensors(const cJSON *h, struct st_spans *S, struct ckv_result *r)
{
    enum ckv_verdict v = CKV_VALID;
    for (cJSON *t = h->child; t && v == CKV_VALID; t = t->next) {
        if (t->string && !strcmp(t->string, "__metadata__"))
            continue;
        const char *name = t->string ? t->string : "?";
        struct span s;
        v = st_tensor(t, name, r, &s);
        if (v != CKV_VALID)
            break;
        if (s.e > S->max_end) {
            S->max_end = s.e;
            snprintf(S->worst, sizeof(S->worst), "%.100s", name);
        }
        if (S->n == S->cap) {
            S->cap = S->cap ? S->cap * 2 : 64;
            struct span *ns = realloc(S->sp, S->cap * sizeof(*S->sp));
            if (!ns) {
                v = set(r, CKV_UNREADABLE, "out of memory");
                break;
            }
            S->sp = ns;
        }
        S->sp[S->n++] = s;
    }
    return v;
}

/* The ranges of S against the data section (data bytes): inside it, back to back from offset 0
 * (sorts S), nothing after the last. CKV_VALID, or the verdict set in r. */
static enum ckv_verdict st_layout(struct st_spans *S, uint64_t data, struct ckv_result *r)
{
    enum ckv_verdict v = CKV_VALID;
    if (S->max_end > data)
        v = set(r, CKV_TRUNCATED,
                "tensor '%s' ends at data byte %llu but the file holds %llu data bytes", S->worst,
                (unsigned long long)S->max_end, (unsigned long long)data);
    if (v == CKV_VALID && S->n) {
        /* the format packs tensors back to back from offset 0; loaders reject holes/overlaps */
        qsort(S->sp, S->n, sizeof(*S->sp), span_cmp);
        uint64_t at = 0;
        for (size_t i = 0; i < S->n && v == CKV_VALID; i++) {
            if (S->sp[i].b != at)
                v = set(r, CKV_UNREADABLE,
                        "tensor data is not contiguous at data byte %llu (overlap or hole)",
                        (unsigned long long)at);
            at = S->sp[i].e;
        }
    }
    if (v == CKV_VALID && S->max_end < data)
        v = set(r, CKV_UNREADABLE, "%llu bytes after the last tensor (loaders reject this)",
                (unsigned long long)(data - S->max_end));
    return v;
}

static enum ckv_verdict check_safetensors(int fd, uint64_t hl, struct ckv_result *r)
{
    r->format = "safetensors";
    if (8 + hl > r->size)
        return set(r, CKV_TRUNCATED,
                   "safetensors header is %llu bytes but the file has only %llu after the length",
                   (unsigned long long)hl, (unsigned long long)(r->size - 8));
    cJSON *h = NULL;
    enum ckv_verdict v = st_read_header(fd, hl, r, &h);
    if (v != CKV_VALID)
        return v;
    uint64_t data = r->size - 8 - hl;
    struct st_spans S = {.sp = NULL};
    v = st_tensors(h, &S, r);
    cJSON_Delete(h);
    r->entries = S.n;
    if (v == CKV_VALID)
        v = st_layout(&S, data, r);
    free(S.sp);
    if (v == CKV_VALID)
        set(r, CKV_VALID, "safetensors: %llu-byte header, %zu tensors, offsets inside the file",
            (unsigned long long)hl, S.n);
    return v;
}

/* ---- dispatch ---- */

enum ckv_verdict ckv_check_fd(int fd, struct ckv_result *r)
{
    memset(r, 0, sizeof(*r));
    r->format = "unknown";
    struct stat st;
    if (fstat(fd, &st))
        return set(r, CKV_UNREADABLE, "fstat: %s", strerror(errno));
    r->have_stat = 1;
    r->size = (uint64_t)st.st_size;
    r->inode = (uint64_t)st.st_ino;
    r->dev_major = major(st.st_dev);
    r->dev_minor = minor(st.st_dev);
    r->mtime = (int64_t)st.st_mtim.tv_sec;
    r->mtime_nsec = st.st_mtim.tv_nsec;
    if (!S_ISREG(st.st_mode))
        return set(r, CKV_UNREADABLE, "not a regular file");
    if (st.st_size == 0)
        return set(r, CKV_TRUNCATED, "empty file: the save wrote nothing");
    unsigned char head[512];
    ssize_t hl;
    do
        hl = pread(fd, head, sizeof(head), 0);
    while (hl < 0 && errno == EINTR);
    if (hl < 0)
        return set(r, CKV_UNREADABLE, "read: %s", strerror(errno));
    size_t h = (size_t)hl;
    if (h >= 4 && (!memcmp(head, "PK\3\4", 4) || !memcmp(head, "PK\5\6", 4)))
        return check_zip(fd, head, h, r);
    if (h >= 9 && head[8] == '{') {
        uint64_t len = le64(head);
        if (len >= 2 && len <= ST_HEADER_MAX)
            return check_safetensors(fd, len, r);
    }
    /* torch.save(..., _use_new_zipfile_serialization=False): a pickled magic number, then
     * pickles and raw storages with no index to check against */
    static const unsigned char torch_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                                0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    if (h >= sizeof(torch_magic) && !memcmp(head, torch_magic, sizeof(torch_magic))) {
        r->format = "torch-legacy";
        return set(r, CKV_UNVERIFIABLE,
                   "unverifiable (legacy format): a pre-1.6 torch.save pickle has no index to "
                   "check the file against");
    }
    if (h >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) {
        r->format = "pickle";
        return set(r, CKV_UNVERIFIABLE,
                   "unverifiable (legacy format): a pickle has no index to check the file against");
    }
    if (h >= 262 && !memcmp(head + 257, "ustar", 5)) {
        r->format = "torch-legacy";
        return set(r, CKV_UNVERIFIABLE,
                   "unverifiable (legacy format): a tar archive (torch.save before 0.4?)");
    }
    return set(r, CKV_UNREADABLE,
               "not a torch.save zip, a safetensors file or a pickle (unknown format)");
}

enum ckv_verdict ckv_check_at(int dirfd, const char *name, int follow, struct ckv_result *r)
{
    memset(r, 0, sizeof(*r));
    r->format = "unknown";
    struct stat st;
    if (fstatat(dirfd, name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW))
        return set(r, CKV_UNREADABLE, "%s", strerror(errno));
    if (!S_ISREG(st.st_mode)) {
        r->have_stat = 1;
        r->size = (uint64_t)st.st_size;
        r->inode = (uint64_t)st.st_ino;
        r->dev_major = major(st.st_dev);
        r->dev_minor = minor(st.st_dev);
        r->mtime = (int64_t)st.st_mtim.tv_sec;
        r->mtime_nsec = st.st_mtim.tv_nsec;
        return set(r, CKV_UNREADABLE, "not a regular file (%s): not opened",
                   S_ISLNK(st.st_mode)    ? "a symlink"
                   : S_ISFIFO(st.st_mode) ? "a FIFO"
                   : S_ISSOCK(st.st_mode) ? "a socket"
                   : S_ISDIR(st.st_mode)  ? "a directory"
                                          : "a device");
    }
    int fd = openat(dirfd, name,
                    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0)
        return set(r, CKV_UNREADABLE, "open: %s", strerror(errno));
    enum ckv_verdict v = ckv_check_fd(fd, r);
    close(fd);
    return v;
}

/* ---- newest valid in a directory ---- */

struct cand {
    char name[256];
    struct timespec mt;
};

static int newer(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec : a->tv_nsec > b->tv_nsec;
}


int ckv_scan_dir(int dirfd, const struct stat *skip, unsigned budget_ms, struct ckv_scan *s)
{
    memset(s, 0, sizeof(*s));
    s->valid = -1;
    double deadline = now_mono() + budget_ms / 1000.0;
    int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -1;
    }
    /* keep only the newest CKV_SCAN_MAX names, sorted newest first: a directory of thousands
     * of checkpoints costs one stat each and no memory beyond this */
    struct cand top[CKV_SCAN_MAX];
    size_t nt = 0, seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) && seen < 100000) {
        seen++;
        if (!ckv_is_checkpoint_name(e->d_name) || strlen(e->d_name) >= sizeof(top[0].name))
            continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
            continue;
        if (skip && st.st_dev == skip->st_dev && st.st_ino == skip->st_ino)
            continue;
        s->candidates++;
        size_t at = nt;
        while (at > 0 && newer(&st.st_mtim, &top[at - 1].mt))
            at--;
        if (at >= CKV_SCAN_MAX)
            continue;
        if (nt < CKV_SCAN_MAX)
            nt++;
        memmove(&top[at + 1], &top[at], (nt - 1 - at) * sizeof(top[0]));
        snprintf(top[at].name, sizeof(top[at].name), "%s", e->d_name);
        top[at].mt = st.st_mtim;
        if (now_mono() > deadline)
            break;
    }
    closedir(d);
    for (size_t i = 0; i < nt; i++) {
        if (now_mono() > deadline) {
            s->stopped = 1;
            break;
        }
        snprintf(s->items[s->n].name, sizeof(s->items[s->n].name), "%s", top[i].name);
        enum ckv_verdict v = ckv_check_at(dirfd, top[i].name, 0, &s->items[s->n].r);
        s->n++;
        if (v == CKV_VALID) {
            s->valid = (int)(s->n - 1);
            break;
        }
    }
    if (s->valid < 0 && s->candidates > s->n)
        s->stopped = 1;
    return 0;
}
