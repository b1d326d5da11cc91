/* unwind.c - libdwfl fed from a bundle's core through our own callbacks, plus the fallbacks.
 *
 * Main data structure: struct unwind_session - the Dwfl, its callbacks (which must outlive it),
 * the module list, and one struct tctx per core thread (the thread_arg libdwfl hands back to
 * set_initial_registers), indexed by tid for get_thread. A walk (struct walk) collects frames from
 * dwfl_getthread_frames' callback, deciding each frame's trust from whether the previous frame's
 * pc had CFI, and keeps the last frame's registers so the frame-pointer walk (fp_walk) can go on
 * where libdwfl stopped.
 */
#include "unwind.h"
#include "errmsg.h"

#include "core.h"
#include "dcache.h"
#include "symbolize.h"
#include "tailcall.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tctx {
    struct unwind_session *s;
    const struct core_thread *t;
    int recover; /* set_initial_registers starts from the caller (NULL-call recovery) */
    uint64_t rec_pc, rec_sp;
};

struct tid_index {
    int32_t tid;
    size_t i;
};

struct unwind_session {
    struct core *core;
    struct modules *mods;
    Dwfl *dwfl;
    Dwfl_Callbacks cb;
    int attached;
    struct unwind_opts o;
    struct tctx *tctx;
    struct tid_index *byid; /* sorted by tid */
    struct tailcall_cache *tailcalls;
    struct dcache *dcache;
    uint64_t read_fail; /* an address a memory_read callback could not read (0: none) */
    size_t n;
    char warning[512];
};

struct walk {
    struct unwind_session *s;
    struct tctx *x;
    struct unwind_stack *out;
    size_t total;   /* frames seen (kept + dropped) */
    int first;      /* the next libdwfl frame is the first of its walk */
    int skip_first; /* ... and repeats the frame the scan already pushed */
    int recovered;  /* ... and is a caller recovered after a jump to nowhere */
    int prev_cfi;   /* the previous frame's pc had CFI */
    uint64_t last_pc, last_sp, last_fp;
    int have_fp;
    int stop;       /* the walk must end (cap, time, loop) */
};


const char *unwind_method_name(enum unwind_method m)
{
    return m == UNWIND_FP ? "fp" : m == UNWIND_LIBUNWIND ? "libunwind" : "dwfl";
}

const char *unwind_trust_name(enum unwind_trust t)
{
    static const char *names[] = {"context", "cfi", "frame_pointer", "recovered", "scan"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

Dwfl *unwind_dwfl(struct unwind_session *s)
{
    return s->dwfl;
}

const char *unwind_addrname(struct unwind_session *s, uint64_t pc)
{
    Dwfl_Module *m = s->dwfl ? dwfl_addrmodule(s->dwfl, pc) : NULL;
    GElf_Off off;
    GElf_Sym sym;
    return m ? symbolize_addrinfo(m, pc, &off, &sym) : NULL;
}

struct modules *unwind_modules(struct unwind_session *s)
{
    return s->mods;
}

const char *unwind_warning(const struct unwind_session *s)
{
    return s->warning;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned sp_regno(const struct core *c)
{
    return c->arch == CORE_ARCH_X86_64 ? 7 : 31;
}

static unsigned fp_regno(const struct core *c)
{
    return c->arch == CORE_ARCH_X86_64 ? 6 : 29;
}

/* ---- memory ---- */

/* Copies bytes of the module file mapped at addr (one section at a time). */
static int file_read(struct unwind_session *s, uint64_t addr, unsigned char *buf, size_t len)
{
    while (len) {
        Dwfl_Module *m = s->dwfl ? dwfl_addrmodule(s->dwfl, addr) : NULL;
        Dwarf_Addr bias = 0, off = addr;
        if (!m || !dwfl_module_getelf(m, &bias))
            return -1;
        Elf_Scn *scn = dwfl_module_address_section(m, &off, &bias);
        GElf_Shdr sh;
        Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
        if (!d || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !d->d_buf ||
            off >= d->d_size)
            return -1;
        size_t n = d->d_size - off < len ? (size_t)(d->d_size - off) : len;
        memcpy(buf, (const char *)d->d_buf + off, n);
        buf += n;
        addr += n;
        len -= n;
    }
    return 0;
}

int unwind_read(struct unwind_session *s, uint64_t addr, void *buf, size_t len)
{
    size_t got = 0;
    int rc = core_read_dumped(s->core, addr, buf, len, &got);
    if (rc == CORE_OK)
        return 0;
    if (rc != CORE_EABSENT)
        return -1;
    return file_read(s, addr + got, (unsigned char *)buf + got, len - got);
}

/* ---- libdwfl thread callbacks ---- */

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    struct unwind_session *s = arg;
    size_t i = *thread_argp ? (size_t)((struct tctx *)*thread_argp - s->tctx) + 1 : 0;
    if (i >= s->n)
        return 0;
    *thread_argp = &s->tctx[i];
    return s->tctx[i].t->tid;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl;
    struct unwind_session *s = arg;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->byid[mid].tid < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= s->n || s->byid[lo].tid != tid)
        return false;
    *thread_argp = &s->tctx[s->byid[lo].i];
    return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    struct unwind_session *s = arg;
    uint64_t v;
    if (unwind_read(s, addr, &v, sizeof(v))) {
        s->read_fail = addr ? addr : 1;
        return false;
    }
    *result = v;
    return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    struct tctx *x = arg;
    const struct core *c = x->s->core;
    Dwarf_Word regs[CORE_MAX_REGS];
    uint64_t raw[CORE_MAX_REGS];
    size_t n = core_thread_dwarf_regs(c, x->t, raw, CORE_MAX_REGS);
    uint64_t pc = core_thread_pc(c, x->t);
    for (size_t i = 0; i < n; i++)
        regs[i] = raw[i];
    if (x->recover) {
        pc = x->rec_pc;
        regs[sp_regno(c)] = x->rec_sp;
    }
    if (c->arch == CORE_ARCH_X86_64)
        regs[16] = pc;
    if (!dwfl_thread_state_registers(thread, 0, (unsigned)n, regs))
        return false;
    dwfl_thread_state_register_pc(thread, pc);
    return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = cb_next_thread,
    .get_thread = cb_get_thread,
    .memory_read = cb_memory_read,
    .set_initial_registers = cb_set_initial_registers,
};

/* ---- session ---- */

static int tid_cmp(const void *a, const void *b)
{
    const struct tid_index *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int make_threads(struct unwind_session *s)
{
    struct core *c = s->core;
    s->n = c->nthreads;
    s->tctx = calloc(s->n ? s->n : 1, sizeof(*s->tctx));
    s->byid = calloc(s->n ? s->n : 1, sizeof(*s->byid));
    if (!s->tctx || !s->byid)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        s->tctx[i].s = s;
        s->tctx[i].t = &c->threads[i];
        s->byid[i].tid = c->threads[i].tid;
        s->byid[i].i = i;
    }
    qsort(s->byid, s->n, sizeof(*s->byid), tid_cmp);
    return 0;
}

static int start_dwfl(struct unwind_session *s, char *err, size_t errlen)
{
    s->cb.find_elf = modules_find_elf;
    s->cb.find_debuginfo = modules_find_debuginfo;
    s->cb.section_address = dwfl_offline_section_address;
    s->cb.debuginfo_path = &s->mods->debuginfo_path;
    s->dwfl = dwfl_begin(&s->cb);
    if (!s->dwfl) {
        cp_errmsg(err, errlen, "libdwfl: %s", dwfl_errmsg(-1));
        return -1;
    }
    dwfl_report_begin(s->dwfl);
    if (modules_report(s->mods, s->dwfl, err, errlen))
        return -1;
    if (dwfl_report_end(s->dwfl, NULL, NULL)) {
        cp_errmsg(err, errlen, "libdwfl: %s", dwfl_errmsg(-1));
        return -1;
    }
    pid_t pid = s->core->psinfo.present && s->core->psinfo.pid > 0 ? s->core->psinfo.pid
                : s->n                                               ? s->tctx[0].t->tid
                                                                     : 1;
    if (s->n && dwfl_attach_state(s->dwfl, s->core->elf, pid, &thread_callbacks, s))
        s->attached = 1;
    else if (s->n)
        cp_errmsg(s->warning, sizeof(s->warning), "libdwfl cannot unwind this core (%s): frame pointers only",
            dwfl_errmsg(-1));
    return 0;
}

int unwind_begin(struct core *c, const struct unwind_opts *o, struct unwind_session **out,
                 char *err, size_t errlen)
{
    *out = NULL;
    symbolize_forget(); /* its memos are keyed by module pointers: a new Dwfl starts clean */
    struct unwind_session *s = calloc(1, sizeof(*s));
    if (!s) {
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    s->core = c;
    s->o = *o;
    if (!s->o.max_frames)
        s->o.max_frames = UNWIND_DEFAULT_MAX_FRAMES;
    if (s->o.count_limit < s->o.max_frames)
        s->o.count_limit = s->o.max_frames > UNWIND_DEFAULT_COUNT_LIMIT
                               ? s->o.max_frames
                               : UNWIND_DEFAULT_COUNT_LIMIT;
    s->tailcalls = tailcall_cache_new();
    if (!s->tailcalls || make_threads(s) || modules_build(c, &o->mods, &s->mods, err, errlen)) {
        if (!err[0])
            cp_errmsg(err, errlen, "out of memory");
        unwind_end(s);
        return -1;
    }
    if (o->cache_dir)
        s->mods->dcache = s->dcache = dcache_open(o->cache_dir);
    if (start_dwfl(s, err, errlen)) {
        if (!err[0])
            cp_errmsg(err, errlen, "out of memory");
        unwind_end(s);
        return -1;
    }
    *out = s;
    return 0;
}

void unwind_end_for_exit(struct unwind_session *s)
{
    if (s && s->dwfl)
        modules_cache_store(s->mods, s->dwfl);
}

void unwind_end(struct unwind_session *s)
{
    if (!s)
        return;
    tailcall_cache_free(s->tailcalls); /* points into the Dwfl's modules: before dwfl_end */
    symbolize_forget();                /* so does the symbol memo */
    if (s->dwfl) {
        modules_cache_store(s->mods, s->dwfl);
        dwfl_end(s->dwfl);
    }
    dcache_close(s->dcache);
    modules_free(s->mods);
    free(s->tctx);
    free(s->byid);
    free(s);
}

/* ---- one thread ---- */

#define SCAN_BYTES (256u << 10) /* how far up the stack a scan looks */
#define SCAN_RESTARTS 16        /* libdwfl walks restarted from scanned frames */

static int is_code(struct unwind_session *s, uint64_t pc)
{
    const struct module *m = modules_at(s->mods, pc);
    if (m)
        return m->exec || m->image;
    const struct core_segment *seg = core_segment_at(s->core, pc);
    return seg && (seg->flags & PF_X);
}

static int has_cfi(Dwfl *dwfl, uint64_t pc)
{
    Dwfl_Module *m = dwfl ? dwfl_addrmodule(dwfl, pc) : NULL;
    Dwarf_Addr bias = 0;
    Dwarf_Frame *fr = NULL;
    if (!m)
        return 0;
    Dwarf_CFI *cfi = dwfl_module_eh_cfi(m, &bias);
    if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &fr) == 0) {
        free(fr);
        return 1;
    }
    cfi = dwfl_module_dwarf_cfi(m, &bias);
    if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &fr) == 0) {
        free(fr);
        return 1;
    }
    return 0;
}

/* Adds a frame (or counts it as dropped). Returns 0 to go on, 1 when the walk must stop. */
static int push(struct walk *w, uint64_t pc, uint64_t sp, int activation, enum unwind_trust trust)
{
    struct unwind_stack *o = w->out;
    if (o->nframes < w->s->o.max_frames)
        o->frames[o->nframes++] = (struct unwind_frame){pc, sp, activation, trust, 0};
    else
        o->dropped++;
    w->total++;
    w->last_pc = pc;
    if (sp)
        w->last_sp = sp;
    if (w->total >= w->s->o.count_limit) {
        cp_errmsg(o->stop, sizeof(o->stop), "stopped after %zu frames (walk limit)", w->total);
        w->stop = 1;
    } else if ((w->total & 255) == 0 && w->s->o.deadline > 0 && now() > w->s->o.deadline) {
        cp_errmsg(o->stop, sizeof(o->stop), "stopped after %zu frames: time limit", w->total);
        w->stop = 1;
    }
    return w->stop;
}

static int frame_cb(Dwfl_Frame *f, void *arg)
{
    struct walk *w = arg;
    struct core *c = w->s->core;
    Dwarf_Addr pc = 0;
    bool act = false;
    Dwarf_Word sp = 0, fp = 0;
    if (!dwfl_frame_pc(f, &pc, &act))
        return DWARF_CB_ABORT;
    int have_sp = dwfl_frame_reg(f, sp_regno(c), &sp) == 0;
    w->have_fp = dwfl_frame_reg(f, fp_regno(c), &fp) == 0;
    w->last_fp = fp;
    enum unwind_trust trust = w->prev_cfi ? UNWIND_TRUST_CFI : UNWIND_TRUST_FRAME_POINTER;
    if (w->first) {
        w->first = 0;
        if (w->skip_first) { /* the scanned frame this walk starts from: already there */
            w->skip_first = 0;
            w->prev_cfi = has_cfi(w->s->dwfl, pc - 1);
            return DWARF_CB_OK;
        }
        trust = w->recovered ? UNWIND_TRUST_RECOVERED : UNWIND_TRUST_CONTEXT;
        act = act && !w->recovered;
    } else if (pc == w->last_pc && have_sp && sp == w->last_sp) {
        cp_errmsg(w->out->stop, sizeof(w->out->stop), "the unwinder looped at pc 0x%llx",
            (unsigned long long)pc);
        w->stop = 1;
        return DWARF_CB_ABORT;
    }
    w->prev_cfi = has_cfi(w->s->dwfl, act ? pc : pc - 1);
    return push(w, pc, have_sp ? sp : 0, act, trust) ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* Follows the frame-pointer chain from fp: [fp] = caller's fp, [fp + 8] = return address. */
static void fp_walk(struct walk *w, uint64_t sp, uint64_t fp)
{
    const struct core_segment *stack = core_segment_at(w->s->core, sp);
    int steps = 0;
    while (stack && fp >= sp && fp % 8 == 0 && fp - stack->vaddr + 16 <= stack->memsz) {
        uint64_t rec[2];
        if (unwind_read(w->s, fp, rec, sizeof(rec)))
            break;
        if (rec[1] == 0) { /* the outermost frame */
            w->out->complete = 1;
            return;
        }
        if (!is_code(w->s, rec[1]))
            break;
        if (push(w, rec[1], fp + 16, 0, UNWIND_TRUST_FRAME_POINTER))
            return;
        steps++;
        if (rec[0] <= fp) {
            w->out->complete = rec[0] == 0;
            return;
        }
        sp = fp + 16;
        fp = rec[0];
    }
    if (!w->out->stop[0] && !steps)
        cp_errmsg(w->out->stop, sizeof(w->out->stop), "%s", "no valid frame-pointer chain");
}

/* Is ra a return address: in code, and (when the code is readable) right after a call? */
static int plausible_return(struct unwind_session *s, uint64_t ra)
{
    unsigned char b[7];
    if (ra < 8 || !is_code(s, ra))
        return 0;
    if (s->core->arch == CORE_ARCH_AARCH64) {
        uint32_t insn;
        if (unwind_read(s, ra - 4, &insn, 4))
            return 1;
        return (insn & 0xFC000000u) == 0x94000000u || (insn & 0xFFFFFC1Fu) == 0xD63F0000u;
    }
    if (unwind_read(s, ra - 7, b, sizeof(b)))
        return 1; /* no code to check (no binary): the address alone */
    if (b[2] == 0xE8) /* call rel32 */
        return 1;
    for (int i = 0; i <= 5; i++) /* call r/m: FF /2, 2 to 7 bytes long */
        if (b[i] == 0xFF && ((b[i + 1] >> 3) & 7) == 2 && (i == 5 || i == 4 || i == 1 || i == 0))
            return 1;
    return 0;
}

/* The next plausible return address at or above *addr (below end). */
static int scan_next(struct walk *w, uint64_t *addr, uint64_t end, uint64_t *ra)
{
    for (uint64_t a = *addr; end >= 8 && a <= end - 8; a += 8) { /* a + 8 never wraps */
        uint64_t v;
        if (unwind_read(w->s, a, &v, sizeof(v)))
            return 0;
        if (v != w->last_pc && plausible_return(w->s, v)) {
            *addr = a;
            *ra = v;
            return 1;
        }
    }
    return 0;
}

/* Last resort: scan the stack for return addresses (trust "scan"); where one has CFI, hand it
 * back to libdwfl and go on from there. */
static void scan_walk(struct walk *w)
{
    uint64_t a = (w->last_sp + 7) & ~(uint64_t)7, ra = 0;
    const struct core_segment *stack = core_segment_at(w->s->core, a);
    int restarts = 0, found = 0;
    if (!stack)
        return;
    uint64_t end = stack->vaddr + stack->memsz;
    if (end - a > SCAN_BYTES)
        end = a + SCAN_BYTES;
    while (!w->stop && !w->out->complete && scan_next(w, &a, end, &ra)) {
        found++;
        a += 8;
        if (push(w, ra, a, 0, UNWIND_TRUST_SCAN))
            return;
        if (restarts >= SCAN_RESTARTS || !w->s->attached || !has_cfi(w->s->dwfl, ra - 1))
            continue;
        restarts++;
        w->x->recover = 1;
        w->x->rec_pc = ra;
        w->x->rec_sp = a;
        w->first = w->skip_first = 1;
        if (dwfl_getthread_frames(w->s->dwfl, w->x->t->tid, frame_cb, w) == 0)
            w->out->complete = 1;
        if (w->last_sp > a)
            a = (w->last_sp + 7) & ~(uint64_t)7;
    }
    if (found && !w->out->complete && !w->stop)
        cp_errmsg(w->out->stop, sizeof(w->out->stop), "%s",
            "the outer frames were found by scanning the stack (trust \"scan\")");
}

/* pc outside code: pop the return address (x86_64) or take lr (aarch64). 1 when recovered. */
static int plan_recovery(struct unwind_session *s, const struct core_thread *t, struct tctx *x)
{
    struct core *c = s->core;
    uint64_t pc = core_thread_pc(c, t), sp = core_thread_sp(c, t), ret = 0;
    if (is_code(s, pc))
        return 0;
    if (c->arch == CORE_ARCH_X86_64) {
        if (unwind_read(s, sp, &ret, sizeof(ret)))
            return 0;
        sp += 8;
    } else {
        ret = t->nregs > 30 ? t->regs[30] : 0;
    }
    if (!is_code(s, ret))
        return 0;
    x->recover = 1;
    x->rec_pc = ret;
    x->rec_sp = sp;
    return 1;
}

static void walk_dwfl(struct walk *w)
{
    struct unwind_stack *o = w->out;
    w->first = 1;
    w->s->read_fail = 0;
    if (dwfl_getthread_frames(w->s->dwfl, w->x->t->tid, frame_cb, w) == 0) {
        /* libdwfl ends a walk quietly when the return address is unreadable: not the end */
        if (!w->s->read_fail || w->stop) {
            o->complete = !w->stop;
            return;
        }
        cp_errmsg(o->stop, sizeof(o->stop), "the stack at 0x%llx is not in the core",
            (unsigned long long)w->s->read_fail);
        return;
    }
    if (w->stop)
        return;
    cp_errmsg(o->stop, sizeof(o->stop), "libdwfl: %s", dwfl_errmsg(-1));
    size_t before = w->total;
    if (w->total > (size_t)w->recovered && w->have_fp && w->last_sp)
        fp_walk(w, w->last_sp, w->last_fp);
    if (w->total > before && !o->complete && !w->stop)
        cp_errmsg(o->stop, sizeof(o->stop), "%s", "the frame-pointer chain ends");
    if (!o->complete && !w->stop)
        scan_walk(w);
    if (o->complete)
        o->stop[0] = 0;
}

/* Inserts the frames of tail calls between each pair of kept frames (the outermost kept frames
 * give way under the cap). */
static int add_tail_calls(struct unwind_session *s, struct unwind_stack *o)
{
    size_t max = s->o.max_frames, n = 0;
    struct unwind_frame *v = calloc(max, sizeof(*v));
    if (!v)
        return -1;
    for (size_t i = 0; i < o->nframes; i++) {
        uint64_t pcs[TAILCALL_MAX_CHAIN];
        size_t k = 0;
        if (n < max)
            v[n++] = o->frames[i];
        else
            o->dropped++;
        if (i + 1 < o->nframes && !o->frames[i + 1].activation && o->frames[i].pc)
            k = tailcall_chain(s->tailcalls, s->dwfl, o->frames[i].pc, o->frames[i].activation,
                               o->frames[i + 1].pc, pcs, TAILCALL_MAX_CHAIN);
        for (size_t j = 0; j < k; j++) {
            if (n < max)
                v[n++] = (struct unwind_frame){pcs[j], 0, 0, UNWIND_TRUST_CFI, 1};
            else
                o->dropped++;
        }
    }
    free(o->frames);
    o->frames = v;
    o->nframes = n;
    return 0;
}

static int walk_thread(struct unwind_session *s, const struct core_thread *t,
                       struct unwind_stack *out);

int unwind_recovery(struct unwind_session *s, const struct core_thread *t, uint64_t *pc, uint64_t *sp)
{
    struct tctx x = {.s = s, .t = t};
    if (!plan_recovery(s, t, &x))
        return 0;
    *pc = x.rec_pc;
    *sp = x.rec_sp;
    return 1;
}

int unwind_add_tail_calls(struct unwind_session *s, struct unwind_stack *st)
{
    return s->dwfl ? add_tail_calls(s, st) : 0;
}

const struct unwind_opts *unwind_options(const struct unwind_session *s)
{
    return &s->o;
}

int unwind_thread(struct unwind_session *s, const struct core_thread *t, struct unwind_stack *out)
{
    if (walk_thread(s, t, out))
        return -1;
    return s->dwfl ? add_tail_calls(s, out) : 0;
}

static int walk_thread(struct unwind_session *s, const struct core_thread *t,
                       struct unwind_stack *out)
{
    memset(out, 0, sizeof(*out));
    out->tid = t->tid;
    out->frames = calloc(s->o.max_frames, sizeof(*out->frames));
    if (!out->frames)
        return -1;
    struct tctx *x = &s->tctx[t - s->core->threads];
    struct walk w = {.s = s, .x = x, .out = out};
    struct core *c = s->core;
    uint64_t pc = core_thread_pc(c, t), sp = core_thread_sp(c, t);
    x->recover = 0;
    w.last_sp = sp;
    if (plan_recovery(s, t, x)) {
        push(&w, pc, sp, 1, UNWIND_TRUST_CONTEXT);
        w.recovered = 1;
    }
    if (s->o.method != UNWIND_FP && s->attached) {
        walk_dwfl(&w);
        return 0;
    }
    if (!x->recover)
        push(&w, pc, sp, 1, UNWIND_TRUST_CONTEXT);
    else if (push(&w, x->rec_pc, x->rec_sp, 0, UNWIND_TRUST_RECOVERED))
        return 0;
    fp_walk(&w, x->recover ? x->rec_sp : sp, core_thread_fp(c, t));
    return 0;
}

void unwind_stack_free(struct unwind_stack *st)
{
    if (!st)
        return;
    free(st->frames);
    st->frames = NULL;
    st->nframes = 0;
}
