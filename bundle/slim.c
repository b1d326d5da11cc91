/* slim.c - `crashpack report --slim OUT`: a small bundle to attach to a ticket.
 *
 * The same bundle format (bundle/bundlew.h writes it), with: manifest.json first, every evidence
 * member (redacted at capture, and scrubbed again here: a bundle from an older crashpack, or a
 * form recognized since; common/scrub.h), a slim core planned by the capture's own planner
 * (bundle/coreelf.h: ELF header, notes, each thread's stack up to 1 MiB, the first page of each
 * mapped ELF file for build-ids; still a core gdb opens), stacks.json, and capture.json with a
 * "reslimmed" record. Written under a temporary name, fsynced, then renamed to OUT. The values
 * the members show by their shape (a token in an output tail) are masked in the slim core too.
 */
#include "bundle.h"
#include "bundlew.h"
#include "coreelf.h"
#include "errmsg.h"
#include "scrub.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLIM_STACK_MAX (1u << 20)
#define SLIM_FRAME (4u << 20)
#define EVIDENCE_MAX (64u << 20)

int slim_write(const char *bundle, const char *out, char *err, size_t errlen, char *summary,
               size_t sumlen);

/* Reads [off, off+len) of the core; bytes the (truncated) member does not have stay zero. */
static int core_read(struct bundle *b, const struct bundle_member *m, uint64_t off, uint8_t *buf,
                     size_t len)
{
    size_t got = 0;
    memset(buf, 0, len);
    int rc = bundle_read(b, m, off, buf, len, &got);
    return rc < 0 && rc != BUNDLE_ETRUNC ? -1 : 0;
}

struct obuf {
    struct bw *w;
    uint8_t *buf;
    size_t len;
    uint8_t *prev; /* the last frame's raw end (CP_SCRUB_MAXLEN), for values cut by a frame */
    size_t plen;
};

/* One frame of the slim core, out, with the values bw_add learned from the members masked. */
static int ob_flush(struct obuf *o)
{
    struct cp_scrub *sc = o->w->scrub;
    if (sc && sc->n) {
        uint8_t raw[CP_SCRUB_MAXLEN];
        size_t keep = sc->maxlen - 1 < o->len ? sc->maxlen - 1 : o->len;
        memcpy(raw, o->buf + o->len - keep, keep);
        cp_scrub_seam(sc, o->prev, o->plen, o->buf, o->len);
        cp_scrub_buf(sc, o->buf, o->len);
        memcpy(o->prev, raw, keep);
        o->plen = keep;
    }
    int rc = bw_data(o->w, o->buf, o->len);
    o->len = 0;
    return rc;
}

static int ob_put(struct obuf *o, const uint8_t *d, size_t n)
{
    while (n) {
        size_t k = SLIM_FRAME - o->len < n ? SLIM_FRAME - o->len : n;
        if (d)
            memcpy(o->buf + o->len, d, k);
        else
            memset(o->buf + o->len, 0, k);
        o->len += k;
        if (d)
            d += k;
        n -= k;
        if (o->len == SLIM_FRAME && ob_flush(o))
            return -1;
    }
    return 0;
}

/* The core's layout (*L) and a copy of its prefix up to the segment data (*prefix, malloc'd),
 * read larger until the headers and notes fit (CORE_PREFIX_MAX at most). 0, or -1 with nothing
 * left to free and the reason in err. */
static int read_layout(struct bundle *b, const struct bundle_member *m, uint8_t **prefix_out,
                       struct core_layout *L, char *err, size_t errlen)
{
    size_t plen = 1 << 16;
    uint8_t *prefix = NULL;
    memset(L, 0, sizeof(*L));
    char why[256] = "";
    for (;;) {
        uint8_t *np = realloc(prefix, plen);
        if (!np) {
            free(prefix);
            cp_errmsg(err, errlen, "out of memory");
            return -1;
        }
        prefix = np;
        if (core_read(b, m, 0, prefix, plen)) {
            free(prefix);
            cp_errmsg(err, errlen, "cannot read the core: %s", bundle_error(b));
            return -1;
        }
        uint64_t need = 0;
        core_layout_free(L);
        memset(L, 0, sizeof(*L));
        int rc = core_layout_parse(prefix, plen, L, &need, why, sizeof(why));
        if (rc < 0) {
            free(prefix);
            cp_errmsg(err, errlen, "core: %s", why);
            return -1;
        }
        if (rc == 1 && need > plen && need <= CORE_PREFIX_MAX) {
            plen = (size_t)need;
            continue;
        }
        if (rc == 0 && L->data_start > plen && L->data_start <= CORE_PREFIX_MAX) {
            plen = (size_t)L->data_start;
            continue;
        }
        if (rc != 0 || L->data_start > plen) {
            free(prefix);
            core_layout_free(L);
            cp_errmsg(err, errlen, "core: headers and notes larger than %u bytes", CORE_PREFIX_MAX);
            return -1;
        }
        break;
    }
    *prefix_out = prefix;
    return 0;
}

/* The slim core of plan P as the member "core" of w: the head, then each piece of core member m
 * at its offset, zeros between them. 0, or -1 (w->err says why, or the plan was bad). */
static int write_pieces(struct bundle *b, const struct bundle_member *m, struct bw *w,
                        const struct slim_plan *P)
{
    int rc = -1;
    struct obuf o = {.w = w, .buf = malloc(SLIM_FRAME), .prev = malloc(CP_SCRUB_MAXLEN)};
    uint8_t *chunk = malloc(1 << 20);
    if (!o.buf || !o.prev || !chunk || bw_begin(w, "core", P->size) ||
        ob_put(&o, P->head, P->head_len))
        goto out;
    uint64_t pos = P->head_len;
    for (size_t i = 0; i < P->npieces; i++) {
        const struct slim_piece *sp = &P->pieces[i];
        if (sp->out_off < pos)
            goto out;
        if (ob_put(&o, NULL, sp->out_off - pos))
            goto out;
        for (uint64_t done = 0; done < sp->len;) {
            size_t k = sp->len - done < (1 << 20) ? (size_t)(sp->len - done) : (1 << 20);
            if (core_read(b, m, sp->in_off + done, chunk, k) || ob_put(&o, chunk, k))
                goto out;
            done += k;
        }
        pos = sp->out_off + sp->len;
    }
    if (pos < P->size && ob_put(&o, NULL, P->size - pos))
        goto out;
    if (o.len && ob_flush(&o))
        goto out;
    if (bw_end(w, SLIM_FRAME) < 0)
        goto out;
    rc = 0;
out:
    free(o.prev);
    free(o.buf);
    free(chunk);
    return rc;
}

static int write_core(struct bundle *b, struct bw *w, uint64_t *core_size, char *err, size_t errlen)
{
    const struct bundle_member *m = bundle_find(b, "core");
    if (!m)
        return 1; /* no core: a metadata-only slim bundle */
    uint8_t *prefix = NULL;
    struct core_layout L;
    if (read_layout(b, m, &prefix, &L, err, errlen))
        return -1;
    char why[256] = "";
    struct slim_plan P;
    memset(&P, 0, sizeof(P));
    if (core_slim_plan(prefix, &L, SLIM_STACK_MAX, &P, why, sizeof(why))) {
        free(prefix);
        core_layout_free(&L);
        cp_errmsg(err, errlen, "slim plan: %s", why);
        return -1;
    }
    free(prefix);
    int rc = write_pieces(b, m, w, &P);
    if (rc == 0)
        *core_size = P.size;
    else
        cp_errmsg(err, errlen, "writing the slim core: %s", w->err ? strerror(w->err) : "bad plan");
    core_slim_free(&P);
    core_layout_free(&L);
    return rc;
}

static int copy_member(struct bundle *b, struct bw *w, const char *name, const char *note)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = bundle_read_all(b, name, EVIDENCE_MAX, &buf, &len);
    if (rc && rc != BUNDLE_ETRUNC) {
        free(buf);
        return rc == BUNDLE_ENOENT ? 0 : -1;
    }
    if (note && !strcmp(name, "capture.json")) {
        cJSON *j = cJSON_ParseWithLength(buf, len);
        if (cJSON_IsObject(j)) {
            cJSON *r = cJSON_AddObjectToObject(j, "reslimmed");
            cJSON_AddStringToObject(r, "by", "crashpack report --slim");
            cJSON_AddStringToObject(r, "note", note);
            char *s = cJSON_PrintUnformatted(j);
            if (s) {
                free(buf);
                buf = s;
                len = strlen(s);
            }
        }
        cJSON_Delete(j);
    }
    rc = bw_add(w, name, buf, len);
    free(buf);
    return rc;
}

/* "OUT, 1.2 MiB, slim core 3.4 MiB uncompressed" */
static void summarize(const char *out, uint64_t core_size, char *summary, size_t sumlen)
{
    FILE *f = fopen(out, "r");
    long sz = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        sz = ftell(f);
    if (f)
        fclose(f);
    snprintf(summary, sumlen, "%s, %.1f MiB, slim core %.1f MiB uncompressed", out, sz / 1048576.0,
             core_size / 1048576.0);
}

int slim_write(const char *bundle, const char *out, char *err, size_t errlen, char *summary,
               size_t sumlen)
{
    struct bundle *b = NULL;
    if (bundle_open(bundle, &b, err, errlen))
        return -1;
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0) {
        cp_errmsg(err, errlen, "%s: %s", tmp, strerror(errno));
        bundle_close(b);
        return -1;
    }
    struct bw w;
    int rc = -1;
    uint64_t core_size = 0;
    struct cp_scrub sc = {.learn = 1}; /* every member scrubbed; what they show, in the core */
    if (bw_init(&w, fd, 6, time(NULL))) {
        cp_errmsg(err, errlen, "out of memory");
        goto fail;
    }
    w.scrub = &sc;
    if (copy_member(b, &w, "manifest.json", NULL)) {
        cp_errmsg(err, errlen, "cannot copy manifest.json");
        goto fail_w;
    }
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const char *name = bundle_member(b, i)->name;
        if (!strcmp(name, "manifest.json") || !strcmp(name, "core") || !strcmp(name, "stacks.json") ||
            !strcmp(name, "capture.json"))
            continue;
        if (copy_member(b, &w, name, NULL)) {
            cp_errmsg(err, errlen, "cannot copy %s", name);
            goto fail_w;
        }
    }
    int c = write_core(b, &w, &core_size, err, errlen);
    if (c < 0)
        goto fail_w;
    if (copy_member(b, &w, "stacks.json", NULL) ||
        copy_member(b, &w, "capture.json",
                    c == 0 ? "core replaced by a slim core (headers, notes, thread stacks, build-id pages)"
                           : "no core in the original bundle")) {
        cp_errmsg(err, errlen, "cannot copy stacks.json / capture.json");
        goto fail_w;
    }
    if (bw_finish(&w) || fsync(fd)) {
        cp_errmsg(err, errlen, "writing %s: %s", tmp, strerror(w.err ? w.err : errno));
        goto fail_w;
    }
    bw_free(&w);
    if (close(fd) || rename(tmp, out)) {
        fd = -1;
        cp_errmsg(err, errlen, "%s: %s", out, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (summary)
        summarize(out, core_size, summary, sumlen);
    bundle_close(b);
    cp_scrub_free(&sc);
    return 0;
fail_w:
    bw_free(&w);
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    bundle_close(b);
    cp_scrub_free(&sc);
    return rc;
}
