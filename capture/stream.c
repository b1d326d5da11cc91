/* stream.c - drain the kernel's pipe into the `core` member in one pass.
 *
 * The main thread reads the pipe into frame-sized slots and hashes them in order; worker threads
 * compress each slot into an independent zstd frame; the main thread writes finished frames in
 * order. Memory is bounded by the ring: (workers + 2) slots of frame_size in and out. The tar
 * header goes out before the data because the size is known from the program headers. When the
 * stream ends early, the deadline passes, or free space would cross keep_free, the member is
 * padded with zeros to its declared size and marked truncated. */
#include "capture.h"
#include "coreelf.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

struct slot {
    uint8_t *in, *out;
    size_t inlen, outlen, outcap;
    int state; /* 0 free, 1 queued, 2 done */
    int failed;
    /* secret scrubbing: the previous slot's last bytes as they came (a value may straddle the
     * two), and the bytes this slot's worker masked */
    uint8_t *prev;
    size_t prevlen, scrubbed;
};

struct ring {
    struct slot *s;
    unsigned n, workers;
    unsigned next_job; /* next slot index to hand to a worker */
    unsigned queued_upto;
    int level, stop;
    const struct cp_scrub *scrub; /* NULL: no secret values known */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t *th;
};

static void *worker(void *arg)
{
    struct ring *r = arg;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->next_job == r->queued_upto)
            pthread_cond_wait(&r->cv_work, &r->mu);
        if (r->next_job == r->queued_upto && r->stop)
            break;
        struct slot *s = &r->s[r->next_job % r->n];
        r->next_job++;
        pthread_mutex_unlock(&r->mu);
        if (r->scrub) /* secret values anywhere in the kept pages, stacks included */
            s->scrubbed = cp_scrub_seam(r->scrub, s->prev, s->prevlen, s->in, s->inlen) +
                          cp_scrub_buf(r->scrub, s->in, s->inlen);
        s->outlen = cctx ? bw_compress_frame_staged(cctx, r->level, s->out, s->outcap, s->in, s->inlen) : 0;
        s->failed = s->outlen == 0;
        pthread_mutex_lock(&r->mu);
        s->state = 2;
        pthread_cond_broadcast(&r->cv_done);
    }
    pthread_mutex_unlock(&r->mu);
    ZSTD_freeCCtx(cctx);
    return NULL;
}

/* The output side: member bytes go into the current slot; full slots are queued. */
struct sink {
    struct cap *c;
    struct ring r;
    uint64_t frame;
    unsigned cur;    /* slot being filled (sequence number) */
    unsigned oldest; /* oldest slot not yet written */
    uint64_t stored; /* member bytes handed to the sink */
    uint64_t compressed;
    uint64_t frames;
    struct xxh64 member_hash; /* of what reached the file, when hash_member */
    int hash_member;
    uint64_t written;
    int stop_writing; /* keep_free crossed or write error: stop storing data */
    char stop_reason[160];
    const uint64_t *cuts; /* member offsets where a new frame should begin (sorted) */
    size_t ncuts, next_cut;
    uint8_t *tail; /* the last slot's last bytes before scrubbing (scrub_hand_over) */
    size_t tlen;
    uint64_t scrubbed; /* bytes the workers masked */
};

/* A frame ends early at a cut only once it holds this much: small enough that a reader reaches a
 * cut's bytes by decoding little, large enough that compression barely suffers. */
#define CUT_MIN (256u << 10)

static int write_done(struct sink *k, struct slot *s)
{
    if (k->stop_writing)
        return 0;
    if (s->failed) {
        k->stop_writing = 1;
        snprintf(k->stop_reason, sizeof(k->stop_reason), "compression failed");
        return -1;
    }
    /* keep_free: one statvfs per frame (a few MiB) is cheap next to compressing it */
    {
        /* room for this frame, the zero frames that pad the rest, and the closing members */
        uint64_t rest = k->c->bw.members[k->c->bw.open_member].size - k->c->bw.members[k->c->bw.open_member].written;
        uint64_t reserve = s->outlen + (1u << 20) + rest / k->frame * 256;
        if (!guard_free_ok(k->c, reserve)) {
            k->stop_writing = 1;
            snprintf(k->stop_reason, sizeof(k->stop_reason),
                     "free space would fall below keep_free (%llu bytes)",
                     (unsigned long long)guard_keep_free(k->c));
            return 0;
        }
    }
    if (bw_frame_raw(&k->c->bw, s->out, s->outlen, s->inlen)) {
        k->stop_writing = 1;
        snprintf(k->stop_reason, sizeof(k->stop_reason), "write failed: %s",
                 strerror(k->c->bw.err));
        k->c->bw.err = 0; /* the file was cut back to the last whole frame: keep going */
        return -1;
    }
    if (k->hash_member)
        xxh64_update(&k->member_hash, s->in, s->inlen);
    k->scrubbed += s->scrubbed;
    k->written += s->inlen;
    k->compressed += s->outlen;
    k->frames++;
    return 0;
}

/* Wait for and write the oldest queued slot. */
static void drain_one(struct sink *k)
{
    struct slot *s = &k->r.s[k->oldest % k->r.n];
    pthread_mutex_lock(&k->r.mu);
    while (s->state != 2)
        pthread_cond_wait(&k->r.cv_done, &k->r.mu);
    pthread_mutex_unlock(&k->r.mu);
    write_done(k, s);
    s->state = 0;
    s->inlen = 0;
    k->oldest++;
}

/* Before a slot goes to a worker: it gets the previous slot's raw tail, and keeps its own for the
 * next one, so that a secret cut by the frame boundary is found by the seam check. */
static void scrub_hand_over(struct sink *k, struct slot *s)
{
    if (!k->r.scrub)
        return;
    memcpy(s->prev, k->tail, k->tlen);
    s->prevlen = k->tlen;
    s->scrubbed = 0;
    size_t keep = k->r.scrub->maxlen - 1;
    k->tlen = s->inlen < keep ? s->inlen : keep;
    memcpy(k->tail, s->in + s->inlen - k->tlen, k->tlen);
}

static void submit(struct sink *k)
{
    struct slot *s = &k->r.s[k->cur % k->r.n];
    if (!s->inlen)
        return;
    scrub_hand_over(k, s);
    k->stored += s->inlen;
    pthread_mutex_lock(&k->r.mu);
    s->state = 1;
    k->r.queued_upto = k->cur + 1;
    pthread_cond_signal(&k->r.cv_work);
    pthread_mutex_unlock(&k->r.mu);
    k->cur++;
    if (k->cur - k->oldest >= k->r.n)
        drain_one(k);
}

/* Space in the current slot (after making one free). */
static uint8_t *reserve(struct sink *k, size_t *avail)
{
    struct slot *s = &k->r.s[k->cur % k->r.n];
    uint64_t pos = k->stored + s->inlen;
    for (; k->next_cut < k->ncuts && k->cuts[k->next_cut] <= pos; k->next_cut++)
        if (k->cuts[k->next_cut] == pos && s->inlen >= CUT_MIN) {
            submit(k);
            s = &k->r.s[k->cur % k->r.n];
        }
    if (s->inlen == k->frame) {
        submit(k);
        s = &k->r.s[k->cur % k->r.n];
    }
    *avail = k->frame - s->inlen;
    /* stop at the next cut, so that it is met exactly */
    if (k->next_cut < k->ncuts && k->cuts[k->next_cut] - pos < *avail)
        *avail = (size_t)(k->cuts[k->next_cut] - pos);
    return s->in + s->inlen;
}

static void commit(struct sink *k, size_t n)
{
    k->r.s[k->cur % k->r.n].inlen += n;
}

/* Member bytes handed over so far, including the slot being filled. */
static uint64_t sink_pos(struct sink *k)
{
    return k->stored + k->r.s[k->cur % k->r.n].inlen;
}

static void sink_write(struct sink *k, const uint8_t *p, size_t n)
{
    while (n) {
        size_t a;
        uint8_t *d = reserve(k, &a);
        if (a > n)
            a = n;
        memcpy(d, p, a);
        commit(k, a);
        p += a;
        n -= a;
    }
}

static void sink_zero(struct sink *k, uint64_t n)
{
    while (n) {
        size_t a;
        uint8_t *d = reserve(k, &a);
        if (a > n)
            a = (size_t)n;
        memset(d, 0, a);
        commit(k, a);
        n -= a;
    }
}

static int sink_init(struct sink *k, struct cap *c, unsigned workers)
{
    memset(k, 0, sizeof(*k));
    k->c = c;
    k->frame = c->cfg.frame_size;
    xxh64_init(&k->member_hash);
    struct ring *r = &k->r;
    r->workers = workers;
    r->n = workers + 2;
    r->level = c->cfg.level;
    r->scrub = c->scrub.n ? &c->scrub : NULL;
    if (r->scrub && !(k->tail = malloc(c->scrub.maxlen)))
        return -1;
    r->s = calloc(r->n, sizeof(*r->s));
    r->th = calloc(workers, sizeof(*r->th));
    if (!r->s || !r->th)
        return -1;
    for (unsigned i = 0; i < r->n; i++) {
        r->s[i].in = malloc(k->frame);
        r->s[i].outcap = ZSTD_compressBound(k->frame);
        r->s[i].out = malloc(r->s[i].outcap);
        if (!r->s[i].in || !r->s[i].out)
            return -1;
        if (r->scrub && !(r->s[i].prev = malloc(c->scrub.maxlen)))
            return -1;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv_work, NULL);
    pthread_cond_init(&r->cv_done, NULL);
    for (unsigned i = 0; i < workers; i++)
        if (pthread_create(&r->th[i], NULL, worker, r)) {
            r->workers = i;
            break;
        }
    return r->workers ? 0 : -1;
}

static void sink_close(struct sink *k)
{
    submit(k);
    while (k->oldest < k->cur)
        drain_one(k);
    struct ring *r = &k->r;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
    for (unsigned i = 0; i < r->workers; i++)
        pthread_join(r->th[i], NULL);
    for (unsigned i = 0; i < r->n; i++) {
        free(r->s[i].in);
        free(r->s[i].out);
        free(r->s[i].prev);
    }
    free(k->tail);
    free(r->s);
    free(r->th);
}

/* The pipe: reads with a deadline. Returns bytes read, 0 at EOF, -1 on error/deadline. */
struct pipe_in {
    int fd;
    double deadline;
    uint64_t bytes;
    struct xxh64 hash;
    int eof, timed_out, error;
    uint64_t reads;
    /* stream offsets to overwrite after hashing (secrets in argv/envp) */
    struct redact *redact;
    size_t nredact;
    uint64_t redacted;
};

/* Overwrite secrets in buf, which holds stream bytes [off, off + n). */
static void redact_apply(struct pipe_in *p, uint8_t *buf, uint64_t off, size_t n)
{
    for (size_t i = 0; i < p->nredact; i++) {
        uint64_t lo = p->redact[i].vaddr, hi = lo + p->redact[i].len;
        if (hi <= off || lo >= off + n)
            continue;
        if (lo < off)
            lo = off;
        if (hi > off + n)
            hi = off + n;
        memset(buf + (lo - off), '*', (size_t)(hi - lo));
        p->redacted += hi - lo;
    }
}

/* NT_PRPSINFO carries the first 80 bytes of the command line (NULs turned into spaces): the
 * same secrets, at the same positions as in argv. */
static void redact_psargs(const struct cap *c, uint8_t *prefix, size_t plen,
                          const struct core_layout *L)
{
    if (!c->arg_start || L->note_off + L->note_size > plen)
        return;
    size_t pos = 0;
    struct core_note note;
    uint8_t *notes = prefix + L->note_off;
    while (core_note_next(notes, L->note_size, &pos, &note)) {
        if (note.type == 3 /* NT_PRPSINFO */ && note.descsz >= 56 + 80) {
            uint8_t *psargs = notes + (note.desc - notes) + 56; /* the walk hands out const */
            for (size_t i = 0; i < c->nredact; i++) {
                uint64_t lo = c->redact[i].vaddr, hi = lo + c->redact[i].len;
                if (hi <= c->arg_start || lo >= c->arg_start + 80)
                    continue;
                lo = lo < c->arg_start ? 0 : lo - c->arg_start;
                hi = hi - c->arg_start > 80 ? 80 : hi - c->arg_start;
                memset(psargs + lo, '*', (size_t)(hi - lo));
            }
        }
    }
}

/* Turn the planned address ranges into stream offsets through the segment table. */
static void redact_map(struct pipe_in *p, const struct cap *c, const struct core_layout *L)
{
    p->redact = calloc(c->nredact ? c->nredact : 1, sizeof(*p->redact));
    if (!p->redact)
        return;
    for (size_t i = 0; i < c->nredact; i++)
        for (size_t s = 0; s < L->nsegs; s++) {
            const struct core_seg *g = &L->segs[s];
            uint64_t a = c->redact[i].vaddr;
            if (a >= g->vaddr && a + c->redact[i].len <= g->vaddr + g->filesz) {
                p->redact[p->nredact++] =
                    (struct redact){g->off + (a - g->vaddr), c->redact[i].len};
                break;
            }
        }
}

static ssize_t pipe_read(struct pipe_in *p, uint8_t *buf, size_t n)
{
    for (;;) {
        double left = p->deadline - now_mono();
        if (left <= 0) {
            p->timed_out = 1;
            return -1;
        }
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        int pr = poll(&pf, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (pr < 0 && errno != EINTR) {
            p->error = errno;
            return -1;
        }
        if (pr <= 0)
            continue;
        ssize_t r = read(p->fd, buf, n);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            p->error = errno;
            return -1;
        }
        p->reads++;
        if (r == 0) {
            p->eof = 1;
            return 0;
        }
        xxh64_update(&p->hash, buf, (size_t)r);
        if (p->nredact)
            redact_apply(p, buf, p->bytes, (size_t)r);
        p->bytes += (uint64_t)r;
        return r;
    }
}

/* Fill buf completely unless the stream ends. */
static size_t pipe_fill(struct pipe_in *p, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pipe_read(p, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void skip_bytes(struct pipe_in *p, uint64_t n, uint8_t *scratch, size_t cap)
{
    while (n) {
        size_t want = n < cap ? (size_t)n : cap;
        ssize_t r = pipe_read(p, scratch, want);
        if (r <= 0)
            return;
        n -= (uint64_t)r;
    }
}

static unsigned auto_workers(const struct cp_config *cfg)
{
    if (cfg->threads)
        return cfg->threads > 16 ? 16 : cfg->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4 ? 4 : (unsigned)n;
}

static char *hex64(char *b, uint64_t v)
{
    snprintf(b, 17, "%016llx", (unsigned long long)v);
    return b;
}

/* Reads the core's ELF headers from the pipe into a growing prefix until the layout is known, and
 * then the notes too when they fit CORE_PREFIX_MAX (the slim plan and the frame cuts read them).
 * Returns 0 with *prefix (malloc'd) holding *plen bytes, or -1 with the reason in `why` (empty:
 * out of memory) and *prefix to free. */
static int read_headers(struct pipe_in *p, uint8_t **prefix, size_t *plen, struct core_layout *L,
                        char *why, size_t whylen)
{
    size_t pcap = 1 << 16;
    *plen = 0;
    *prefix = malloc(pcap);
    memset(L, 0, sizeof(*L));
    int pr = 1;
    uint64_t need = 64;
    while (*prefix && pr == 1) {
        if (need > CORE_PREFIX_MAX) {
            snprintf(why, whylen, "core headers larger than %u bytes", CORE_PREFIX_MAX);
            pr = -1;
            break;
        }
        if (need > pcap) {
            size_t nc = pcap;
            while (nc < need)
                nc *= 2;
            uint8_t *np = realloc(*prefix, nc);
            if (!np)
                break;
            *prefix = np;
            pcap = nc;
        }
        if (need > *plen) {
            size_t got = pipe_fill(p, *prefix + *plen, (size_t)need - *plen);
            *plen += got;
            if (*plen < need) {
                snprintf(why, whylen, "stream ended after %zu bytes, inside the ELF headers",
                         *plen);
                pr = -1;
                break;
            }
        }
        pr = core_layout_parse(*prefix, *plen, L, &need, why, whylen);
        if (pr == 0 && L->data_start > *plen) {
            need = L->data_start; /* the notes, for the slim plan and the frame cuts */
            if (need <= CORE_PREFIX_MAX) {
                pr = 1;
                core_layout_free(L);
            } else {
                pr = 0;
            }
        }
    }
    return pr == 0 ? 0 : -1;
}

/* The mode the core is stored in: a full core over max_core_size becomes slim (reading the rest of
 * the notes for the plan), a slim plan that fails becomes full (better a full core than none).
 * Sets c->mode and c->mode_reason, fills *P in slim mode; returns the member's declared size. */
static uint64_t choose_core_mode(struct cap *c, struct pipe_in *p, uint8_t **prefix,
                                 size_t *plen, const struct core_layout *L, struct slim_plan *P)
{
    char why[200] = "";
    memset(P, 0, sizeof(*P));
    if (c->mode == CP_MODE_FULL && L->size > c->cfg.max_core_size) {
        c->mode = CP_MODE_SLIM;
        snprintf(c->mode_reason, sizeof(c->mode_reason),
                 "core of %llu bytes is over max_core_size (%llu): slim instead",
                 (unsigned long long)L->size, (unsigned long long)c->cfg.max_core_size);
        if (L->data_start > *plen && L->data_start <= CORE_PREFIX_MAX) {
            uint8_t *np = realloc(*prefix, L->data_start);
            if (np) {
                *prefix = np;
                *plen += pipe_fill(p, *prefix + *plen, (size_t)(L->data_start - *plen));
            }
        }
    }
    if (c->mode == CP_MODE_SLIM) {
        if (*plen < L->data_start ||
            core_slim_plan(*prefix, L, c->cfg.slim_stack_max, P, why, sizeof(why))) {
            if (*plen < L->data_start)
                snprintf(why, sizeof(why), "notes not available");
            /* better a full core than none */
            c->mode = CP_MODE_FULL;
            snprintf(c->mode_reason, sizeof(c->mode_reason), "slim plan failed (%s): full core",
                     why);
        }
    }
    return c->mode == CP_MODE_SLIM ? P->size : L->size;
}

/* Full mode: the stream itself, the prefix first, up to the core's size. */
static void copy_full(struct sink *k, struct pipe_in *p, const uint8_t *prefix, size_t plen,
                      const struct core_layout *L)
{
    uint64_t take = plen < L->size ? plen : L->size;
    sink_write(k, prefix, (size_t)take);
    while (sink_pos(k) < L->size && !k->stop_writing) {
        size_t a;
        uint8_t *d = reserve(k, &a);
        if (a > L->size - sink_pos(k))
            a = (size_t)(L->size - sink_pos(k));
        size_t got = pipe_fill(p, d, a);
        commit(k, got);
        if (got < a)
            break;
    }
}

/* Slim mode: the plan's new headers, then each kept piece of the stream at its place in the slim
 * core (zeros between), skipping the rest; then the rest of the stream is read so that the stream
 * hash covers the whole core and the dump completes. in_pos: stream offset of the next byte. */
static void copy_slim(struct sink *k, struct pipe_in *p, const struct slim_plan *P,
                      const struct core_layout *L, uint64_t in_pos)
{
    sink_write(k, P->head, P->head_len);
    uint8_t *scratch = malloc(1 << 20);
    for (size_t i = 0; i < P->npieces && scratch && !k->stop_writing; i++) {
        const struct slim_piece *sp = &P->pieces[i];
        if (sp->in_off < in_pos)
            break; /* overlapping pieces: cannot happen with kernel cores */
        skip_bytes(p, sp->in_off - in_pos, scratch, 1 << 20);
        in_pos = p->bytes;
        if (in_pos != sp->in_off)
            break;
        if (sink_pos(k) < sp->out_off)
            sink_zero(k, sp->out_off - sink_pos(k));
        uint64_t left = sp->len;
        while (left && !k->stop_writing) {
            size_t a;
            uint8_t *d = reserve(k, &a);
            if (a > left)
                a = (size_t)left;
            size_t got = pipe_fill(p, d, a);
            commit(k, got);
            left -= got;
            if (got < a)
                break;
        }
        in_pos = p->bytes;
        if (left)
            break;
    }
    free(scratch);
    /* read the rest so the stream hash covers the whole core and the dump completes */
    if (!p->eof && !p->timed_out && !k->stop_writing) {
        uint8_t *s2 = malloc(1 << 20);
        if (s2)
            skip_bytes(p, L->size > p->bytes ? L->size - p->bytes : 0, s2, 1 << 20);
        free(s2);
    }
}

/* What is still in the pipe beyond the declared size is counted, not stored (a second at most).
 * Returns the bytes. */
static uint64_t drain_extra(struct pipe_in *p, const struct sink *k, const struct core_layout *L)
{
    uint64_t extra = 0;
    if (!p->eof && !p->timed_out && !k->stop_writing && p->bytes >= L->size) {
        uint8_t tmp[65536];
        double dl = p->deadline;
        p->deadline = now_mono() + 1.0 < dl ? now_mono() + 1.0 : dl;
        ssize_t r;
        uint64_t before = p->bytes;
        while ((r = pipe_read(p, tmp, sizeof(tmp))) > 0)
            ;
        extra = p->bytes - before;
        p->timed_out = 0;
    }
    return extra;
}

/* The core's outcome after the copy: why it is short (NULL: it is not), its member hash,
 * capture.json's core{} fields, the member closed with its padding, and the step. */
static void core_result(struct cap *c, struct pipe_in *p, struct sink *k,
                        const struct core_layout *L, const struct slim_plan *P, uint64_t declared,
                        uint64_t extra, double t)
{
    cJSON *core = c->core;
    uint64_t written = k->written;
    const char *reason = NULL;
    char rbuf[200];
    if (k->stop_writing)
        reason = k->stop_reason;
    else if (p->timed_out) {
        snprintf(rbuf, sizeof(rbuf), "deadline of %u s reached", c->cfg.deadline_s);
        reason = rbuf;
    } else if (p->error) {
        snprintf(rbuf, sizeof(rbuf), "pipe read failed: %s", strerror(p->error));
        reason = rbuf;
    } else if (written < declared) {
        snprintf(rbuf, sizeof(rbuf), "stream ended at %llu of %llu bytes",
                 (unsigned long long)p->bytes, (unsigned long long)L->size);
        reason = rbuf;
    }
    /* The member hash: in full mode the member is the stream itself (plus zero padding), so the
     * stream hash is reused rather than hashing every byte twice. */
    struct xxh64 mh = k->member_hash;
    int have_mh = 1;
    if (c->mode == CP_MODE_FULL && !k->hash_member) {
        mh = p->hash;
        have_mh = written == p->bytes - extra;
    } else if (k->stop_writing) {
        have_mh = 1; /* hashed in write order: exactly what reached the file */
    }
    if (written < declared) {
        static const uint8_t zb[1 << 14];
        for (uint64_t left = declared - written; have_mh && left;) {
            size_t a = left < sizeof(zb) ? (size_t)left : sizeof(zb);
            xxh64_update(&mh, zb, a);
            left -= a;
        }
        cJSON_AddBoolToObject(core, "truncated", 1);
        cJSON_AddStringToObject(core, "truncation_reason", reason ? reason : "incomplete");
    } else {
        cJSON_AddBoolToObject(core, "truncated", 0);
    }
    if (bw_end(&c->bw, c->cfg.frame_size) < 0)
        cap_step(c, "core_padding", "failed", t, "%s", strerror(c->bw.err));
    char hx[20];
    cJSON_AddStringToObject(core, "mode", cp_mode_name(c->mode));
    cJSON_AddNumberToObject(core, "stream_bytes", (double)p->bytes);
    cJSON_AddNumberToObject(core, "stored_bytes", (double)written);
    cJSON_AddNumberToObject(core, "extra_bytes", (double)extra);
    /* the stream as it came holds the secrets masked in the member: its hash is published only
     * when there were none (a hash of a secret's bytes would confirm a guess) */
    if (!c->nredact && !c->scrub.n)
        cJSON_AddStringToObject(core, "stream_xxh64", hex64(hx, xxh64_digest(&p->hash)));
    if (have_mh)
        cJSON_AddStringToObject(core, "member_xxh64", hex64(hx, xxh64_digest(&mh)));
    cJSON_AddNumberToObject(core, "compressed_bytes", (double)k->compressed);
    cJSON_AddNumberToObject(core, "frames", (double)k->frames);
    cJSON_AddNumberToObject(core, "pipe_reads", (double)p->reads);
    cJSON_AddNumberToObject(core, "redacted_ranges", (double)p->nredact);
    cJSON_AddNumberToObject(core, "redacted_bytes", (double)p->redacted);
    cJSON_AddNumberToObject(core, "scrubbed_values", (double)c->scrub.n);
    cJSON_AddNumberToObject(core, "scrubbed_bytes", (double)k->scrubbed);
    if (c->mode == CP_MODE_SLIM) {
        cJSON_AddNumberToObject(core, "slim_kept_bytes", (double)P->kept);
        cJSON_AddNumberToObject(core, "slim_stacks", (double)P->stacks);
        cJSON_AddNumberToObject(core, "slim_segments", (double)P->npieces);
    }
    cap_step(c, "core", reason ? "failed" : "ok", t, "%s", reason ? reason : "");
}

/* The core step: headers -> redaction map -> mode (full or slim) -> the core member's frames ->
 * the outcome in capture.json. */
void stream_core(struct cap *c)
{
    double t = now_mono();
    cJSON *core = c->core;
    struct pipe_in p = {.fd = 0, .deadline = c->t0 + c->cfg.deadline_s};
    xxh64_init(&p.hash);
    /* a bigger pipe means fewer wakeups for the dumping task and for us */
    fcntl(0, F_SETPIPE_SZ, 1 << 20);

    uint8_t *prefix;
    size_t plen;
    struct core_layout L;
    char why[200] = "";
    if (read_headers(&p, &prefix, &plen, &L, why, sizeof(why))) {
        cJSON_AddStringToObject(core, "error", why[0] ? why : "out of memory");
        cap_step(c, "core", "failed", t, "%s", why[0] ? why : "out of memory");
        free(prefix);
        return;
    }
    redact_map(&p, c, &L);
    if (p.nredact)
        redact_apply(&p, prefix, 0, plen); /* the headers, read before the map existed */
    if (c->nredact)
        redact_psargs(c, prefix, plen, &L);
    cJSON_AddNumberToObject(core, "full_size", (double)L.size);
    cJSON_AddNumberToObject(core, "segments", (double)L.nsegs);

    struct slim_plan P;
    uint64_t declared = choose_core_mode(c, &p, &prefix, &plen, &L, &P);
    cJSON_AddNumberToObject(core, "declared_size", (double)declared);

    guard_vacuum(c, declared / 4);
    unsigned workers = auto_workers(&c->cfg);
    struct sink k;
    if (bw_begin(&c->bw, "core", declared) || sink_init(&k, c, workers)) {
        cap_step(c, "core", "failed", t, "cannot start the core member: %s",
                 strerror(c->bw.err ? c->bw.err : ENOMEM));
        if (c->bw.open_member >= 0 && bw_end(&c->bw, c->cfg.frame_size) >= 0) {
            cJSON_AddBoolToObject(core, "truncated", 1);
            cJSON_AddStringToObject(core, "truncation_reason", "out of memory for the stream");
        }
        free(p.redact);
        free(prefix);
        core_layout_free(&L);
        core_slim_free(&P);
        return;
    }
    /* in full mode the member is the stream itself, unless secrets were overwritten */
    k.hash_member = c->mode != CP_MODE_FULL || p.nredact > 0 || c->scrub.n > 0;
    cJSON_AddNumberToObject(core, "level", c->cfg.level);
    cJSON_AddNumberToObject(core, "threads", workers);
    cJSON_AddNumberToObject(core, "frame_size", (double)c->cfg.frame_size);

    /* frames begin at segment starts and near the threads' stack pointers (core_frame_cuts) */
    uint64_t *cuts = NULL;
    if (c->mode == CP_MODE_FULL) {
        k.ncuts = core_frame_cuts(prefix, plen, &L, &cuts);
    } else if ((cuts = malloc((P.npieces ? P.npieces : 1) * sizeof(*cuts)))) {
        for (size_t i = 0; i < P.npieces; i++)
            cuts[i] = P.pieces[i].out_off;
        k.ncuts = P.npieces;
    }
    k.cuts = cuts;

    if (c->mode == CP_MODE_FULL)
        copy_full(&k, &p, prefix, plen, &L);
    else
        copy_slim(&k, &p, &P, &L, plen);
    uint64_t extra = drain_extra(&p, &k, &L);
    sink_close(&k);
    free(cuts);
    core_result(c, &p, &k, &L, &P, declared, extra, t);
    free(p.redact);
    free(prefix);
    core_layout_free(&L);
    core_slim_free(&P);
}
