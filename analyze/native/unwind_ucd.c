/* unwind_ucd.c - libunwind-coredump over a stand-in core, memory through unwind_read().
 *
 * Main data structure: struct ucd_session - libunwind's UCD_info over the stand-in core (see
 * unwind_ucd.h for its layout), the address space with our accessor table, per module whether its
 * file was registered as a backing file, and per thread the NULL-call recovery planned when the
 * stand-in's registers were written (the note then holds the caller's pc and sp).
 */
#include "util.h" /* write_all */
#include "unwind_ucd.h"

#include "core.h"
#include "datadir.h"
#include "errmsg.h"
#include "lazylib.h"
#include "modules.h"

#include <elf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind-coredump.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/procfs.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HOST_ARCH CORE_ARCH_X86_64
#define PR_PC 16 /* user_regs_struct: rip */
#define PR_SP 19 /* rsp */
#elif defined(__aarch64__)
#define HOST_ARCH CORE_ARCH_AARCH64
#define PR_PC 32 /* user_pt_regs: pc */
#define PR_SP 31 /* sp */
#else
#define HOST_ARCH 0
#define PR_PC 0
#define PR_SP 0
#endif

#define MAX_OUTER 64

struct recovery {
    int on;
    uint64_t pc0, sp0; /* the thread's own registers (frame 0) */
};

struct ucd_session {
    struct unwind_session *u;
    struct core *c;
    struct modules *mods;
    struct UCD_info *ui;
    unw_addr_space_t as;
    unsigned char *backing; /* per module: 0 not tried, 1 registered, 2 none */
    struct recovery *rec;   /* per thread */
    const struct unwind_opts *o;
};

static struct ucd_session *current; /* the session whose walk is in progress (see unwind_ucd.h) */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- libunwind, opened on first use ---- */

/* libunwind-coredump and libunwind's remote API for this architecture, opened the first time a
 * session starts (lazylib.h): most analyses never need them (libdwfl's stacks are complete), and
 * the three libraries cost ~1 ms of every start. */
static struct {
    int ok;
    __typeof__(&_UCD_create) create;
    __typeof__(&_UCD_destroy) destroy;
    __typeof__(&_UCD_select_thread) select_thread;
    __typeof__(&_UCD_add_backing_file_at_vaddr) add_backing_file_at_vaddr;
    __typeof__(&_UCD_find_proc_info) find_proc_info;
    __typeof__(&_UCD_put_unwind_info) put_unwind_info;
    __typeof__(&_UCD_get_dyn_info_list_addr) get_dyn_info_list_addr;
    __typeof__(&_UCD_access_reg) access_reg;
    __typeof__(&_UCD_access_fpreg) access_fpreg;
    __typeof__(&_UCD_resume) resume;
    __typeof__(&_UCD_get_proc_name) get_proc_name;
    __typeof__(&unw_create_addr_space) create_addr_space;
    __typeof__(&unw_destroy_addr_space) destroy_addr_space;
    __typeof__(&unw_init_remote) init_remote;
    __typeof__(&unw_get_reg) get_reg;
    __typeof__(&unw_get_proc_info) get_proc_info;
    __typeof__(&unw_is_signal_frame) is_signal_frame;
    __typeof__(&unw_step) step;
    __typeof__(&unw_strerror) strerror;
} U;

#define UCD_FN(slot, fn) CP_LAZY_FN(&ucd, U.slot, fn, err, errlen)
#define UNW_FN(slot, fn) CP_LAZY_FN(&unw, U.slot, fn, err, errlen)

static int unw_load(char *err, size_t errlen)
{
    static struct cp_lazylib ucd = {.soname = CP_SONAME_LIBUNWIND_COREDUMP};
    static struct cp_lazylib unw = {.soname = CP_SONAME_LIBUNWIND_ARCH, .global = 1};
    if (U.ok)
        return 0;
    /* libunwind first, globally: libunwind-coredump calls its _U<arch>_* functions */
    if (!cp_lazylib_open(&unw, err, errlen) || UCD_FN(create, _UCD_create) || UCD_FN(destroy, _UCD_destroy) ||
        UCD_FN(select_thread, _UCD_select_thread) ||
        UCD_FN(add_backing_file_at_vaddr, _UCD_add_backing_file_at_vaddr) ||
        UCD_FN(find_proc_info, _UCD_find_proc_info) ||
        UCD_FN(put_unwind_info, _UCD_put_unwind_info) ||
        UCD_FN(get_dyn_info_list_addr, _UCD_get_dyn_info_list_addr) ||
        UCD_FN(access_reg, _UCD_access_reg) || UCD_FN(access_fpreg, _UCD_access_fpreg) ||
        UCD_FN(resume, _UCD_resume) || UCD_FN(get_proc_name, _UCD_get_proc_name) ||
        UNW_FN(create_addr_space, unw_create_addr_space) ||
        UNW_FN(destroy_addr_space, unw_destroy_addr_space) ||
        UNW_FN(init_remote, unw_init_remote) || UNW_FN(get_reg, unw_get_reg) ||
        UNW_FN(get_proc_info, unw_get_proc_info) || UNW_FN(is_signal_frame, unw_is_signal_frame) ||
        UNW_FN(step, unw_step) || UNW_FN(strerror, unw_strerror))
        return -1;
    U.ok = 1;
    return 0;
}

/* ---- accessors ---- */

static void ensure_backing(struct ucd_session *s, uint64_t ip)
{
    const struct module *m = modules_at(s->mods, ip);
    if (!m || m->image)
        return;
    size_t i = (size_t)(m - s->mods->v);
    if (s->backing[i])
        return;
    s->backing[i] = 2;
    Dwfl *dwfl = unwind_dwfl(s->u);
    Dwfl_Module *dm = dwfl ? dwfl_addrmodule(dwfl, ip) : NULL;
    Dwarf_Addr bias = 0;
    if (dm)
        dwfl_module_getelf(dm, &bias); /* looks the file up (build-id checked): sets found_at */
    if (!m->found_at || m->debug_only || m->found_at[0] != '/')
        return;
    if (U.add_backing_file_at_vaddr(s->ui, (unsigned long)m->start, m->found_at) == 0)
        s->backing[i] = 1;
}

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need,
                              void *arg)
{
    if (current)
        ensure_backing(current, ip);
    return U.find_proc_info(as, ip, pi, need, arg);
}

/* Reads from the module file by its program headers: the bytes a mapping really shows, also where
 * a word straddles two sections (libunwind reads whole words of .eh_frame_hdr and .eh_frame,
 * whose ends need not meet; unwind_read() copies section by section). */
static int segment_read(struct ucd_session *s, uint64_t addr, unsigned char *buf, size_t len)
{
    Dwfl *dwfl = unwind_dwfl(s->u);
    Dwfl_Module *m = dwfl ? dwfl_addrmodule(dwfl, addr) : NULL;
    Dwarf_Addr bias = 0;
    Elf *elf = m ? dwfl_module_getelf(m, &bias) : NULL;
    size_t n = 0, size = 0;
    char *raw = elf ? elf_rawfile(elf, &size) : NULL;
    if (!raw || elf_getphdrnum(elf, &n))
        return -1;
    uint64_t a = addr - bias;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || a < ph.p_vaddr ||
            a - ph.p_vaddr > ph.p_filesz || len > ph.p_filesz - (a - ph.p_vaddr))
            continue;
        uint64_t off = ph.p_offset + (a - ph.p_vaddr);
        if (off > size || len > size - off)
            return -1;
        memcpy(buf, raw + off, len);
        return 0;
    }
    return -1;
}

static int acc_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
                          void *arg)
{
    (void)as;
    (void)arg;
    uint64_t v;
    if (write || !current)
        return -UNW_EINVAL;
    if (unwind_read(current->u, addr, &v, sizeof(v)) &&
        segment_read(current, addr, (unsigned char *)&v, sizeof(v)))
        return -UNW_EINVAL;
    *val = v;
    return 0;
}

/* Our memory reader and proc-info hook, libunwind-coredump's for the rest (filled once loaded). */
static unw_accessors_t accessors;

static void accessors_fill(void)
{
    accessors = (unw_accessors_t){
        .find_proc_info = acc_find_proc_info,
        .put_unwind_info = U.put_unwind_info,
        .get_dyn_info_list_addr = U.get_dyn_info_list_addr,
        .access_mem = acc_access_mem,
        .access_reg = U.access_reg,
        .access_fpreg = U.access_fpreg,
        .resume = U.resume,
        .get_proc_name = U.get_proc_name,
    };
}

/* ---- the stand-in core ---- */

struct buf {
    unsigned char *p;
    size_t len, cap;
};

static int put(struct buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (data)
        memcpy(b->p + b->len, data, n);
    else
        memset(b->p + b->len, 0, n);
    b->len += n;
    return 0;
}

static int pad(struct buf *b, size_t align)
{
    size_t n = (align - b->len % align) % align;
    return n ? put(b, NULL, n) : 0;
}

static int wanted(const struct module *m)
{
    return (m->exec || m->image) && m->end > m->start;
}

/* The notes: one NT_PRSTATUS per thread, the recovered caller's pc and sp where planned. */
static int put_notes(struct ucd_session *s, struct buf *b)
{
    struct core *c = s->c;
    for (size_t i = 0; i < c->nthreads; i++) {
        const struct core_thread *t = &c->threads[i];
        struct elf_prstatus pr;
        memset(&pr, 0, sizeof(pr));
        pr.pr_pid = t->tid;
        pr.pr_cursig = (short)t->cursig;
        size_t n = sizeof(pr.pr_reg) / sizeof(pr.pr_reg[0]);
        for (size_t k = 0; k < n && k < t->nregs; k++)
            pr.pr_reg[k] = t->regs[k];
        uint64_t pc, sp;
        if (unwind_recovery(s->u, t, &pc, &sp) && PR_SP < n) {
            s->rec[i] = (struct recovery){1, core_thread_pc(c, t), core_thread_sp(c, t)};
            pr.pr_reg[PR_PC] = pc;
            pr.pr_reg[PR_SP] = sp;
        }
        Elf64_Nhdr nh = {.n_namesz = 5, .n_descsz = sizeof(pr), .n_type = NT_PRSTATUS};
        if (put(b, &nh, sizeof(nh)) || put(b, "CORE\0\0\0", 8) || put(b, &pr, sizeof(pr)) ||
            pad(b, 4))
            return -1;
    }
    return 0;
}

static int build_core(struct ucd_session *s, struct buf *b, char *err, size_t errlen)
{
    struct core *c = s->c;
    size_t nload = 0;
    for (size_t i = 0; i < s->mods->n && nload < UCD_MAX_MODULES; i++)
        nload += wanted(&s->mods->v[i]);
    size_t phnum = 1 + nload;
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof(eh));
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_CORE;
    eh.e_machine = c->machine;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(eh);
    eh.e_ehsize = sizeof(eh);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = (Elf64_Half)phnum;
    if (put(b, &eh, sizeof(eh)) || put(b, NULL, phnum * sizeof(Elf64_Phdr)))
        goto oom;
    size_t notes = b->len;
    if (put_notes(s, b))
        goto oom;
    Elf64_Phdr *ph = (Elf64_Phdr *)(b->p + sizeof(eh));
    ph[0] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = notes, .p_filesz = b->len - notes, .p_align = 4};
    size_t k = 1, images = 0;
    for (size_t i = 0; i < s->mods->n && k < phnum; i++) {
        const struct module *m = &s->mods->v[i];
        if (!wanted(m))
            continue;
        Elf64_Phdr p = {.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_vaddr = m->start,
                        .p_memsz = m->end - m->start, .p_align = 4096};
        size_t n = m->image_len < p.p_memsz ? m->image_len : (size_t)p.p_memsz;
        if (m->image && n && images + n <= UCD_MAX_IMAGE_BYTES) {
            if (pad(b, 4096))
                goto oom;
            p.p_offset = b->len;
            p.p_filesz = n;
            if (put(b, m->image, n))
                goto oom;
            images += n;
        }
        ph = (Elf64_Phdr *)(b->p + sizeof(eh)); /* put() may have moved the buffer */
        ph[k++] = p;
    }
    return 0;
oom:
    cp_errmsg(err, errlen, "%s", "out of memory writing the stand-in core for libunwind");
    return -1;
}

/* Opens the stand-in with _UCD_create: through a memfd, else a file in a private temporary
 * directory, removed (file and directory) as soon as libunwind holds it open. */
static struct UCD_info *open_standin(const struct buf *b, char *err, size_t errlen)
{
    char path[4200];
    struct UCD_info *ui = NULL;
    int fd = memfd_create("crashpack-ucd", MFD_CLOEXEC);
    if (fd >= 0) {
        if (!write_all(fd, b->p, b->len)) {
            snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
            ui = U.create(path);
        }
        close(fd);
        if (ui)
            return ui;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/crashpack-ucd-XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        cp_errmsg(err, errlen, "libunwind: no temporary directory for the stand-in core (%s)",
            strerror(errno));
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/core", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        int bad = write_all(fd, b->p, b->len);
        if (close(fd) == 0 && !bad)
            ui = U.create(path);
        unlink(path);
    }
    rmdir(dir);
    if (!ui)
        cp_errmsg(err, errlen, "%s", "libunwind could not open the stand-in core (_UCD_create)");
    return ui;
}

int ucd_begin(struct unwind_session *u, struct core *c, struct ucd_session **out, char *err,
              size_t errlen)
{
    *out = NULL;
    if (HOST_ARCH == 0 || (int)c->arch != HOST_ARCH) {
        cp_errmsg(err, errlen, "%s", "libunwind unwinds only cores of the machine's own architecture");
        return -1;
    }
    if (!c->nthreads) {
        cp_errmsg(err, errlen, "%s", "libunwind: the core has no threads");
        return -1;
    }
    if (unw_load(err, errlen))
        return -1;
    accessors_fill();
    struct ucd_session *s = calloc(1, sizeof(*s));
    struct buf b = {0};
    if (!s)
        goto oom;
    s->u = u;
    s->c = c;
    s->mods = unwind_modules(u);
    s->o = unwind_options(u);
    s->backing = calloc(s->mods->n ? s->mods->n : 1, 1);
    s->rec = calloc(c->nthreads, sizeof(*s->rec));
    if (!s->backing || !s->rec)
        goto oom;
    if (build_core(s, &b, err, errlen))
        goto fail;
    s->ui = open_standin(&b, err, errlen);
    free(b.p);
    b.p = NULL;
    if (!s->ui)
        goto fail;
    s->as = U.create_addr_space(&accessors, 0);
    if (!s->as) {
        cp_errmsg(err, errlen, "%s", "libunwind: unw_create_addr_space failed");
        goto fail;
    }
    *out = s;
    return 0;
oom:
    cp_errmsg(err, errlen, "%s", "out of memory");
fail:
    free(b.p);
    ucd_end(s);
    return -1;
}

void ucd_end(struct ucd_session *s)
{
    if (!s)
        return;
    if (s->as)
        U.destroy_addr_space(s->as);
    if (s->ui)
        U.destroy(s->ui);
    free(s->backing);
    free(s->rec);
    free(s);
}

/* ---- one thread ---- */

struct walk {
    struct ucd_session *s;
    struct unwind_stack *out;
    size_t total;
    int stop;
};

static int push(struct walk *w, uint64_t pc, uint64_t sp, int activation, enum unwind_trust trust)
{
    struct unwind_stack *o = w->out;
    if (o->nframes < w->s->o->max_frames)
        o->frames[o->nframes++] = (struct unwind_frame){pc, sp, activation, trust, 0};
    else
        o->dropped++;
    w->total++;
    if (w->total >= w->s->o->count_limit) {
        cp_errmsg(o->stop, sizeof(o->stop), "stopped after %zu frames (walk limit)", w->total);
        w->stop = 1;
    } else if ((w->total & 255) == 0 && w->s->o->deadline > 0 && now() > w->s->o->deadline) {
        cp_errmsg(o->stop, sizeof(o->stop), "stopped after %zu frames: time limit", w->total);
        w->stop = 1;
    }
    return w->stop;
}

/* Did libunwind have unwind information for the cursor's frame? On x86_64 unw_get_proc_info
 * succeeds without any (a one-byte range at ip, no handler) so that _start ends the chain. */
static int had_info(unw_cursor_t *cur, uint64_t ip)
{
    unw_proc_info_t pi;
    memset(&pi, 0, sizeof(pi));
    if (U.get_proc_info(cur, &pi) < 0)
        return 0;
    return !(pi.start_ip == ip && pi.end_ip == ip + 1 && !pi.handler && !pi.lsda) &&
           pi.end_ip > pi.start_ip;
}

static void walk(struct walk *w, size_t idx)
{
    struct ucd_session *s = w->s;
    struct unwind_stack *o = w->out;
    const struct recovery *r = &s->rec[idx];
    if (r->on && push(w, r->pc0, r->sp0, 1, UNWIND_TRUST_CONTEXT))
        return;
    U.select_thread(s->ui, (int)idx);
    unw_cursor_t cur;
    int rc = U.init_remote(&cur, s->as, s->ui);
    if (rc < 0) {
        cp_errmsg(o->stop, sizeof(o->stop), "libunwind: unw_init_remote: %s", U.strerror(rc));
        return;
    }
    int first = 1, prev_info = 0, act = !r->on;
    uint64_t last_pc = 0, last_sp = 0;
    for (;;) {
        unw_word_t ip = 0, sp = 0;
        if (U.get_reg(&cur, UNW_REG_IP, &ip) < 0) {
            cp_errmsg(o->stop, sizeof(o->stop), "%s", "libunwind: no pc for the next frame");
            return;
        }
        U.get_reg(&cur, UNW_REG_SP, &sp);
        if (!first && ip == last_pc && sp == last_sp) {
            cp_errmsg(o->stop, sizeof(o->stop), "the unwinder looped at pc 0x%llx",
                (unsigned long long)ip);
            return;
        }
        enum unwind_trust trust = first ? (r->on ? UNWIND_TRUST_RECOVERED : UNWIND_TRUST_CONTEXT)
                                  : prev_info ? UNWIND_TRUST_CFI
                                              : UNWIND_TRUST_FRAME_POINTER;
        if (push(w, ip, sp, act, trust))
            return;
        last_pc = ip;
        last_sp = sp;
        prev_info = had_info(&cur, ip);
        act = U.is_signal_frame(&cur) > 0; /* the next frame is the interrupted one */
        first = 0;
        rc = U.step(&cur);
        if (rc == 0) {
            o->complete = 1;
            return;
        }
        if (rc < 0) {
            cp_errmsg(o->stop, sizeof(o->stop), "libunwind: %s", U.strerror(rc));
            return;
        }
    }
}

int ucd_thread(struct ucd_session *s, const struct core_thread *t, struct unwind_stack *out)
{
    memset(out, 0, sizeof(*out));
    out->tid = t->tid;
    out->frames = calloc(s->o->max_frames, sizeof(*out->frames));
    if (!out->frames)
        return -1;
    struct walk w = {.s = s, .out = out};
    current = s;
    walk(&w, (size_t)(t - s->c->threads));
    current = NULL;
    if (out->complete)
        out->stop[0] = 0;
    return unwind_add_tail_calls(s->u, out);
}

/* ---- the default mode's choice ---- */

static char outer_store[4096];
static const char *outer[MAX_OUTER + 1];
static int outer_loaded;

/* rules/unwind/outermost.txt: one symbol a line, '#' comments. Without it (no data root) no name
 * is a thread entry: the name rule is off, and only an incomplete walk calls for libunwind. */
static void load_outer(void)
{
    if (outer_loaded)
        return;
    outer_loaded = 1;
    char path[4096], e[256];
    FILE *f = cp_datapath("rules/unwind/outermost.txt", path, sizeof(path), e, sizeof(e))
                  ? fopen(path, "re")
                  : NULL;
    size_t n = 0, used = 0;
    char line[256];
    while (f && n < MAX_OUTER && fgets(line, sizeof(line), f)) {
        char *p = line;
        p[strcspn(p, "#\r\n")] = 0;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, " \t");
        if (!len || used + len + 1 > sizeof(outer_store))
            continue;
        memcpy(outer_store + used, p, len);
        outer_store[used + len] = 0;
        outer[n++] = outer_store + used;
        used += len + 1;
    }
    if (f)
        fclose(f);
    outer[n] = NULL;
}

/* The symbol of st's outermost physical frame; NULL when unknown. */
static const char *outermost_name(struct unwind_session *u, const struct unwind_stack *st)
{
    size_t i = st->nframes;
    while (i > 0 && st->frames[i - 1].tail_call)
        i--;
    if (!i || !unwind_dwfl(u) || st->dropped)
        return NULL;
    const struct unwind_frame *f = &st->frames[i - 1];
    return unwind_addrname(u, f->activation || !f->pc ? f->pc : f->pc - 1);
}

static int is_outer(const char *name)
{
    load_outer();
    if (!strncmp(name, "__GI_", 5))
        name += 5;
    for (size_t i = 0; outer[i]; i++)
        if (!strcmp(name, outer[i]))
            return 1;
    return 0;
}

int ucd_plausible_end(struct unwind_session *u, const struct unwind_stack *st)
{
    const char *name = outermost_name(u, st);
    return name && is_outer(name);
}

int ucd_fallback_reason(struct unwind_session *u, const struct unwind_stack *st, char *why,
                        size_t len)
{
    const struct unwind_opts *o = unwind_options(u);
    if (st->dropped || (o->deadline > 0 && now() > o->deadline))
        return 0;
    if (!st->complete) {
        cp_errmsg(why, len, "libdwfl stopped early (%s)", st->stop[0] ? st->stop : "no reason");
        return 1;
    }
    const char *name = outermost_name(u, st);
    load_outer();
    if (name && outer[0] && !is_outer(name)) {
        cp_errmsg(why, len, "libdwfl's outermost frame is %s, not a thread entry", name);
        return 1;
    }
    return 0;
}

static size_t good_frames(const struct unwind_stack *st)
{
    size_t n = st->dropped;
    for (size_t i = 0; i < st->nframes; i++)
        n += st->frames[i].trust != UNWIND_TRUST_SCAN;
    return n;
}

int ucd_better(struct unwind_session *u, const struct unwind_stack *a, const struct unwind_stack *b)
{
    int sa = 2 * ucd_plausible_end(u, a) + a->complete;
    int sb = 2 * ucd_plausible_end(u, b) + b->complete;
    if (sa != sb)
        return sb > sa;
    return good_frames(b) > good_frames(a);
}

void ucd_preload_data(void)
{
    load_outer();
}
