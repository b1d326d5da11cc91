/* core.c - the ELF core inside a bundle: headers and notes through libelf, memory on demand.
 *
 * Main data structure: struct core (core.h). Its header copy (`header`, at most CORE_HEADER_MAX
 * bytes: the ELF header, the program headers and the PT_NOTE segments, which the kernel writes
 * first) is what libelf parses (elf_memory); the PT_LOAD table is copied out of it, sorted by
 * address, and core_read() maps each address to a member offset and goes through a small LRU
 * cache of CHUNK-sized pieces of the member (struct core_cache), clipped to the bundle's frames,
 * to bundle_read().
 *
 * Note layouts (64-bit Linux, both arches): elf_prstatus has pr_info (signo, code, errno), pr_cursig
 * at 12, pr_sigpend at 16, pr_sighold at 24, pr_pid at 32 and pr_reg at 112; elf_prpsinfo has
 * pr_state at 0, pr_uid at 16, pr_pid at 24, pr_fname at 40 and pr_psargs at 56; siginfo has
 * si_signo, si_errno, si_code, then the union at 16 (si_addr, or si_pid and si_uid).
 */
#include "core.h"
#include "errmsg.h"

#include "bundle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (64u << 10)
#define CACHE_SLOTS 64u

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif
#ifndef NT_SIGINFO
#define NT_SIGINFO 0x53494749
#endif

#define PRSTATUS_REG_OFF 112u
#define X86_64_NREGS 27u
#define AARCH64_NREGS 34u

struct cache_slot {
    uint64_t base; /* member offset of the chunk (a multiple of CHUNK, or a frame's start) */
    size_t want;   /* bytes asked for: at most CHUNK, ending at the next multiple or frame end */
    size_t len;    /* bytes valid */
    uint64_t used; /* LRU stamp; 0 = empty */
    int err;       /* CORE_ETRUNC when the chunk is cut short by the bundle's end */
    unsigned char *data;
};

struct core_cache {
    struct cache_slot slot[CACHE_SLOTS];
    uint64_t clock;
};


/* Warnings are static strings: the core never formats untrusted text into them. */
static void warn(struct core *c, const char *w)
{
    for (size_t i = 0; i < c->nwarnings; i++)
        if (c->warnings[i] == w)
            return;
    if (c->nwarnings < CORE_MAX_WARNINGS)
        c->warnings[c->nwarnings++] = w;
}

const char *core_strerror(int code)
{
    switch (code) {
    case CORE_OK:
        return "ok";
    case CORE_EABSENT:
        return "address not in the core";
    case CORE_ETRUNC:
        return "the bundle is cut short before this part of the core";
    case CORE_EIO:
        return "the bundle could not be read";
    case CORE_EFORMAT:
        return "not a core this analyzer understands";
    case CORE_ENOMEM:
        return "out of memory";
    }
    return "unknown error";
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t le32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ---- reading the member ---- */

/* Reads member bytes [off, off + len) with bundle_read. Returns CORE_OK, CORE_ETRUNC (some
 * bytes missing: *got says how many) or CORE_EIO. */
static int member_read(struct core *c, uint64_t off, void *buf, size_t len, size_t *got)
{
    *got = 0;
    if (off >= c->size)
        return CORE_ETRUNC;
    if (len > c->size - off)
        len = (size_t)(c->size - off);
    if (c->mem) {
        memcpy(buf, c->mem + off, len);
        *got = len;
        return CORE_OK;
    }
    int rc = bundle_read(c->b, c->m, off, buf, len, got);
    if (rc == BUNDLE_OK)
        return *got == len ? CORE_OK : CORE_ETRUNC;
    return rc == BUNDLE_ETRUNC ? CORE_ETRUNC : CORE_EIO;
}

/* The cached chunk holding member byte `off`: a CHUNK-aligned piece, clipped to the bundle frame
 * that holds `off` so that filling it never decodes a neighbouring frame. */
static struct cache_slot *cache_get(struct core *c, uint64_t off)
{
    struct core_cache *k = c->cache;
    struct cache_slot *victim = &k->slot[0];
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        struct cache_slot *s = &k->slot[i];
        if (s->used && off >= s->base && off - s->base < s->want) {
            s->used = ++k->clock;
            return s;
        }
        if (s->used < victim->used)
            victim = s;
    }
    if (!victim->data && !(victim->data = malloc(CHUNK)))
        return NULL;
    uint64_t base = off - off % CHUNK, end = base + CHUNK, lo, hi;
    if (c->m && bundle_frame_span(c->m, off, &lo, &hi) == 0) {
        if (base < lo)
            base = lo;
        if (end > hi)
            end = hi;
    }
    size_t got = 0;
    int rc = member_read(c, base, victim->data, (size_t)(end - base), &got);
    if (rc == CORE_EIO)
        return NULL;
    victim->base = base;
    victim->want = (size_t)(end - base);
    victim->len = got;
    victim->err = rc;
    victim->used = ++k->clock;
    return victim;
}

/* Copies member bytes [off, off + len) through the cache. */
static int cached_read(struct core *c, uint64_t off, unsigned char *buf, size_t len, size_t *got)
{
    *got = 0;
    while (len) {
        struct cache_slot *s = cache_get(c, off);
        if (!s)
            return CORE_EIO;
        size_t in = (size_t)(off - s->base);
        if (in >= s->len)
            return s->len < s->want ? CORE_ETRUNC : CORE_EIO;
        size_t n = s->len - in < len ? s->len - in : len;
        memcpy(buf, s->data + in, n);
        *got += n;
        buf += n;
        off += n;
        len -= n;
    }
    return CORE_OK;
}

const struct core_segment *core_segment_at(const struct core *c, uint64_t vaddr)
{
    size_t lo = 0, hi = c->nsegs;
    while (lo < hi) { /* first segment with vaddr > addr */
        size_t mid = lo + (hi - lo) / 2;
        if (c->segs[mid].vaddr <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* overlapping segments (hostile) are tolerated: look back a few */
    for (size_t i = lo, k = 0; i > 0 && k < 4; i--, k++) {
        const struct core_segment *s = &c->segs[i - 1];
        if (vaddr - s->vaddr < s->memsz)
            return s;
    }
    return NULL;
}

static int read_mem(struct core *c, uint64_t vaddr, void *buf, size_t len, size_t *got,
                    int zero_tails)
{
    unsigned char *out = buf;
    *got = 0;
    while (len) {
        const struct core_segment *s = core_segment_at(c, vaddr);
        if (!s)
            return CORE_EABSENT;
        uint64_t in = vaddr - s->vaddr;
        uint64_t n = s->memsz - in < len ? s->memsz - in : len;
        if (in < s->filesz) {
            if (n > s->filesz - in)
                n = s->filesz - in;
            size_t g = 0;
            int rc = cached_read(c, s->offset + in, out, (size_t)n, &g);
            *got += g;
            if (rc)
                return rc;
        } else if (zero_tails) {
            memset(out, 0, (size_t)n);
            *got += (size_t)n;
        } else {
            return CORE_EABSENT;
        }
        out += n;
        vaddr += n;
        len -= (size_t)n;
        if (len && vaddr == 0) /* wrapped around the address space */
            return CORE_EABSENT;
    }
    return CORE_OK;
}

int core_read(struct core *c, uint64_t vaddr, void *buf, size_t len, size_t *got)
{
    return read_mem(c, vaddr, buf, len, got, 1);
}

int core_read_dumped(struct core *c, uint64_t vaddr, void *buf, size_t len, size_t *got)
{
    return read_mem(c, vaddr, buf, len, got, 0);
}

uint64_t core_auxv(const struct core *c, uint64_t type, int *found)
{
    for (size_t i = 0; i < c->nauxv; i++)
        if (c->auxv[2 * i] == type) {
            if (found)
                *found = 1;
            return c->auxv[2 * i + 1];
        }
    if (found)
        *found = 0;
    return 0;
}

/* ---- registers ---- */

static const uint8_t x86_64_dwarf[17] = {10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16};

static uint64_t reg(const struct core_thread *t, size_t i)
{
    return i < t->nregs ? t->regs[i] : 0;
}

uint64_t core_thread_pc(const struct core *c, const struct core_thread *t)
{
    return reg(t, c->arch == CORE_ARCH_X86_64 ? 16 : 32);
}

uint64_t core_thread_sp(const struct core *c, const struct core_thread *t)
{
    return reg(t, c->arch == CORE_ARCH_X86_64 ? 19 : 31);
}

uint64_t core_thread_fp(const struct core *c, const struct core_thread *t)
{
    return reg(t, c->arch == CORE_ARCH_X86_64 ? 4 : 29);
}

size_t core_thread_dwarf_regs(const struct core *c, const struct core_thread *t, uint64_t *out,
                              size_t max)
{
    size_t n = 0;
    if (c->arch == CORE_ARCH_X86_64) {
        for (; n < 17 && n < max; n++)
            out[n] = reg(t, x86_64_dwarf[n]);
    } else {
        for (; n < 32 && n < max; n++)
            out[n] = reg(t, n);
    }
    return n;
}

/* ---- notes ---- */

static int name_is(const struct core_note *n, const char *want)
{
    size_t l = strlen(want) + 1;
    return n->namesz == l && !memcmp(n->name, want, l);
}

static void parse_prstatus(struct core *c, const struct core_note *n, size_t index)
{
    size_t nregs = c->arch == CORE_ARCH_X86_64 ? X86_64_NREGS : AARCH64_NREGS;
    if (n->descsz < PRSTATUS_REG_OFF + nregs * 8) {
        warn(c, "an NT_PRSTATUS note is too short; its thread is skipped");
        return;
    }
    if (c->nthreads >= CORE_MAX_THREADS) {
        warn(c, "more threads than the analyzer's cap (100000); the rest are skipped");
        return;
    }
    struct core_thread *t = &c->threads[c->nthreads++];
    memset(t, 0, sizeof(*t));
    const unsigned char *d = n->desc;
    int16_t cursig;
    memcpy(&cursig, d + 12, 2);
    t->cursig = cursig;
    t->sigpend = le64(d + 16);
    t->sighold = le64(d + 24);
    t->tid = (int32_t)le32(d + 32);
    t->nregs = nregs;
    for (size_t i = 0; i < nregs; i++)
        t->regs[i] = le64(d + PRSTATUS_REG_OFF + 8 * i);
    t->note_index = index;
}

static void parse_siginfo(struct core *c, const struct core_note *n)
{
    if (n->descsz < 32) {
        warn(c, "the NT_SIGINFO note is too short");
        return;
    }
    if (c->siginfo.present) {
        warn(c, "more than one NT_SIGINFO note; the first is used");
        return;
    }
    const unsigned char *d = n->desc;
    struct core_siginfo *s = &c->siginfo;
    s->present = 1;
    s->signo = (int32_t)le32(d);
    s->errnum = (int32_t)le32(d + 4);
    s->code = (int32_t)le32(d + 8);
    s->addr = le64(d + 16);
    s->sender_pid = (int32_t)le32(d + 16);
    s->sender_uid = le32(d + 20);
    if (s->signo <= 0 || s->signo > 64)
        warn(c, "the NT_SIGINFO note's signal number is out of range (1..64)");
    if (c->nthreads)
        c->threads[c->nthreads - 1].owns_siginfo = 1;
}

static void parse_psinfo(struct core *c, const struct core_note *n)
{
    if (n->descsz < 136) {
        warn(c, "the NT_PRPSINFO note is too short");
        return;
    }
    const unsigned char *d = n->desc;
    struct core_psinfo *p = &c->psinfo;
    p->present = 1;
    p->state = (char)d[1];
    p->uid = le32(d + 16);
    p->gid = le32(d + 20);
    p->pid = (int32_t)le32(d + 24);
    p->ppid = (int32_t)le32(d + 28);
    memcpy(p->fname, d + 40, 16);
    p->fname[16] = 0;
    memcpy(p->psargs, d + 56, 80);
    p->psargs[80] = 0;
}

static void parse_auxv(struct core *c, const struct core_note *n)
{
    if (c->auxv) {
        warn(c, "more than one NT_AUXV note; the first is used");
        return;
    }
    size_t pairs = n->descsz / 16;
    if (pairs > 4096)
        pairs = 4096;
    if (!pairs || !(c->auxv = malloc(pairs * 16)))
        return;
    for (size_t i = 0; i < pairs; i++) {
        c->auxv[2 * i] = le64(n->desc + 16 * i);
        c->auxv[2 * i + 1] = le64(n->desc + 16 * i + 8);
        c->nauxv = i + 1;
        if (c->auxv[2 * i] == 0) /* AT_NULL */
            break;
    }
}

/* NT_FILE: count, page_size, count * (start, end, file_ofs in pages), count NUL-terminated names. */
static void parse_files(struct core *c, const struct core_note *n)
{
    if (c->files) {
        warn(c, "more than one NT_FILE note; the first is used");
        return;
    }
    const unsigned char *d = n->desc;
    size_t len = n->descsz;
    if (len < 16) {
        warn(c, "the NT_FILE note is too short");
        return;
    }
    uint64_t count = le64(d), page = le64(d + 8);
    if (count > CORE_MAX_FILES || count > (len - 16) / 24) {
        warn(c, "the NT_FILE note's count does not fit the note (or exceeds the cap); files skipped");
        return;
    }
    if (page == 0 || page > (1u << 30) || (page & (page - 1)))
        page = 4096;
    const char *names = (const char *)d + 16 + count * 24;
    size_t names_len = len - 16 - count * 24;
    c->files = calloc(count ? count : 1, sizeof(*c->files));
    c->strings = malloc(names_len + 1);
    if (!c->files || !c->strings)
        return;
    memcpy(c->strings, names, names_len);
    c->strings[names_len] = 0;
    size_t pos = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (pos >= names_len) {
            warn(c, "the NT_FILE note has fewer names than mappings");
            break;
        }
        const unsigned char *e = d + 16 + i * 24;
        struct core_file *f = &c->files[c->nfiles];
        f->start = le64(e);
        f->end = le64(e + 8);
        uint64_t pg = le64(e + 16);
        f->offset = pg > UINT64_MAX / page ? UINT64_MAX : pg * page;
        f->path = c->strings + pos;
        pos += strlen(c->strings + pos) + 1;
        if (f->end <= f->start) {
            warn(c, "an NT_FILE mapping ends before it starts; skipped");
            continue;
        }
        c->nfiles++;
    }
}

static void parse_note(struct core *c, const struct core_note *n, size_t index)
{
    if (name_is(n, "CORE")) {
        switch (n->type) {
        case NT_PRSTATUS:
            parse_prstatus(c, n, index);
            return;
        case NT_PRPSINFO:
            parse_psinfo(c, n);
            return;
        case NT_SIGINFO:
            parse_siginfo(c, n);
            return;
        case NT_AUXV:
            parse_auxv(c, n);
            return;
        case NT_FILE:
            parse_files(c, n);
            return;
        }
    }
}

/* Upper bound on the threads in a note segment, so the array is allocated once. */
static size_t count_prstatus(const unsigned char *buf, size_t len)
{
    size_t pos = 0, n = 0;
    struct core_note note;
    while (core_note_next(buf, len, &pos, &note))
        if (note.type == NT_PRSTATUS && name_is(&note, "CORE"))
            n++;
    return n;
}

static int parse_notes(struct core *c)
{
    size_t phnum = 0, nthreads = 0, index = 0;
    if (elf_getphdrnum(c->elf, &phnum))
        return CORE_EFORMAT;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < phnum; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(c->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
                continue;
            if (ph.p_offset >= c->header_len || ph.p_filesz > c->header_len - ph.p_offset) {
                warn(c, "a note segment is beyond what could be read; notes are incomplete");
                continue;
            }
            const unsigned char *buf = c->header + ph.p_offset;
            size_t len = (size_t)ph.p_filesz, pos = 0;
            if (((uintptr_t)buf & 3)) {
                warn(c, "a note segment is misaligned; skipped");
                continue;
            }
            if (pass == 0) {
                nthreads += count_prstatus(buf, len);
                continue;
            }
            struct core_note note;
            while (core_note_next(buf, len, &pos, &note))
                parse_note(c, &note, index++);
            if (pos < len && len - pos >= 12)
                warn(c, "a malformed note ends its note segment early");
        }
        if (pass == 0) {
            if (nthreads > CORE_MAX_THREADS)
                nthreads = CORE_MAX_THREADS;
            c->threads = calloc(nthreads ? nthreads : 1, sizeof(*c->threads));
            if (!c->threads)
                return CORE_ENOMEM;
        }
    }
    return CORE_OK;
}

/* ---- ELF header, program headers ---- */

static int seg_cmp(const void *a, const void *b)
{
    const struct core_segment *x = a, *y = b;
    if (x->vaddr != y->vaddr)
        return x->vaddr < y->vaddr ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int load_segments(struct core *c)
{
    size_t phnum = 0, n = 0;
    if (elf_getphdrnum(c->elf, &phnum))
        return CORE_EFORMAT;
    c->segs = calloc(phnum ? phnum : 1, sizeof(*c->segs));
    if (!c->segs)
        return CORE_ENOMEM;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(c->elf, (int)i, &ph) || ph.p_type != PT_LOAD || ph.p_memsz == 0)
            continue;
        struct core_segment *s = &c->segs[n];
        s->vaddr = ph.p_vaddr;
        s->memsz = ph.p_memsz;
        if (s->memsz > UINT64_MAX - s->vaddr)
            s->memsz = UINT64_MAX - s->vaddr; /* hostile: clip at the top of the space */
        s->offset = ph.p_offset;
        s->filesz = ph.p_filesz < s->memsz ? ph.p_filesz : s->memsz;
        if (s->offset >= c->size)
            s->filesz = 0;
        else if (s->filesz > c->size - s->offset)
            s->filesz = c->size - s->offset;
        if (s->filesz != (ph.p_filesz < s->memsz ? ph.p_filesz : s->memsz))
            warn(c, "a segment extends past the end of the core; it is clipped");
        s->flags = ph.p_flags;
        n++;
    }
    c->nsegs = n;
    qsort(c->segs, n, sizeof(*c->segs), seg_cmp);
    for (size_t i = 1; i < n; i++)
        if (c->segs[i].vaddr - c->segs[i - 1].vaddr < c->segs[i - 1].memsz) {
            warn(c, "PT_LOAD segments overlap (the kernel never writes that); memory reads may be wrong");
            break;
        }
    return CORE_OK;
}

/* Validates the ELF header at h (64 bytes) and returns the number of program headers (reading
 * the PN_XNUM extension from section header 0), or < 0 with a message. */
static int64_t check_ehdr(struct core *c, const Elf64_Ehdr *e, uint64_t *xshdr, char *err,
                          size_t errlen)
{
    *xshdr = 0;
    if (memcmp(e->e_ident, ELFMAG, SELFMAG)) {
        cp_errmsg(err, errlen, "the core member is not an ELF file");
        return -1;
    }
    if (e->e_ident[EI_CLASS] != ELFCLASS64 || e->e_ident[EI_DATA] != ELFDATA2LSB) {
        cp_errmsg(err, errlen, "unsupported core: only 64-bit little-endian cores are understood");
        return -1;
    }
    if (e->e_type != ET_CORE) {
        cp_errmsg(err, errlen, "the core member is an ELF file but not a core (e_type %u)", e->e_type);
        return -1;
    }
    if (e->e_machine == EM_X86_64)
        c->arch = CORE_ARCH_X86_64;
    else if (e->e_machine == EM_AARCH64)
        c->arch = CORE_ARCH_AARCH64;
    else {
        cp_errmsg(err, errlen, "unsupported core architecture (e_machine %u)", e->e_machine);
        return -1;
    }
    c->machine = e->e_machine;
    if (e->e_phentsize != sizeof(Elf64_Phdr) || e->e_phoff < sizeof(Elf64_Ehdr)) {
        cp_errmsg(err, errlen, "the core's program header table is malformed");
        return -1;
    }
    if (e->e_phnum == PN_XNUM) {
        *xshdr = e->e_shoff;
        return 0; /* filled in by the caller from the section header */
    }
    return e->e_phnum;
}

/* The extended program header count of a PN_XNUM core: section header 0's sh_info. */
static int64_t xnum_count(struct core *c, uint64_t shoff, Elf64_Shdr *sh, char *err, size_t errlen)
{
    size_t got = 0;
    if (shoff == 0 || member_read(c, shoff, sh, sizeof(*sh), &got) != CORE_OK) {
        cp_errmsg(err, errlen, "the core has more than 65535 segments and its count is unreadable");
        return -1;
    }
    return sh->sh_info;
}

/* Reads [0, need) of the member into c->header (need <= CORE_HEADER_MAX). */
static int read_header(struct core *c, size_t need, const Elf64_Shdr *xsh, char *err,
                       size_t errlen)
{
    size_t extra = xsh ? sizeof(*xsh) + 8 : 0, got = 0;
    c->header = calloc(1, need + extra);
    if (!c->header) {
        cp_errmsg(err, errlen, "out of memory for the core's headers (%zu bytes)", need);
        return CORE_ENOMEM;
    }
    int rc = member_read(c, 0, c->header, need, &got);
    if (rc == CORE_EIO) {
        cp_errmsg(err, errlen, "cannot read the core's headers: %s", bundle_error(c->b));
        return rc;
    }
    if (rc == CORE_ETRUNC)
        warn(c, "the bundle ends inside the core's notes; notes are incomplete");
    c->header_len = got;
    Elf64_Ehdr *e = (Elf64_Ehdr *)c->header;
    if (xsh) { /* put the extension section header after the copy, where libelf finds it */
        size_t at = (got + 7) & ~(size_t)7;
        memcpy(c->header + at, xsh, sizeof(*xsh));
        e->e_shoff = at;
        e->e_shnum = 0;
        e->e_shstrndx = SHN_UNDEF;
        c->header_len = at + sizeof(*xsh);
    } else { /* a core has no sections we use: do not let libelf chase hostile ones */
        e->e_shoff = 0;
        e->e_shnum = 0;
        e->e_shstrndx = SHN_UNDEF;
    }
    return CORE_OK;
}

/* How many leading bytes hold the ELF header, program headers and notes (capped). */
static int header_extent(struct core *c, uint64_t phoff, uint64_t phnum, size_t *need, char *err,
                         size_t errlen)
{
    if (phnum > CORE_MAX_SEGMENTS || phoff > CORE_HEADER_MAX ||
        phoff + phnum * sizeof(Elf64_Phdr) > CORE_HEADER_MAX) {
        cp_errmsg(err, errlen, "the core's program header table is too large (%llu entries)",
            (unsigned long long)phnum);
        return CORE_EFORMAT;
    }
    Elf64_Phdr *ph = malloc(phnum ? phnum * sizeof(*ph) : 1);
    size_t got = 0;
    if (!ph)
        return CORE_ENOMEM;
    int rc = member_read(c, phoff, ph, phnum * sizeof(*ph), &got);
    if (rc) {
        free(ph);
        cp_errmsg(err, errlen, "cannot read the core's program headers: %s", core_strerror(rc));
        return rc;
    }
    uint64_t end = phoff + phnum * sizeof(Elf64_Phdr);
    for (uint64_t i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_offset > CORE_HEADER_MAX)
            continue;
        uint64_t e = ph[i].p_offset + (ph[i].p_filesz < CORE_HEADER_MAX ? ph[i].p_filesz
                                                                         : CORE_HEADER_MAX);
        if (e > CORE_HEADER_MAX) {
            warn(c, "the core's notes are larger than the analyzer's cap (64 MiB); cut");
            e = CORE_HEADER_MAX;
        }
        if (e > end)
            end = e;
    }
    free(ph);
    *need = (size_t)(end < c->size ? end : c->size);
    return CORE_OK;
}

static int open_headers(struct core *c, char *err, size_t errlen)
{
    Elf64_Ehdr e;
    Elf64_Shdr xsh;
    size_t got = 0, need = 0;
    uint64_t xshoff = 0;
    int rc = member_read(c, 0, &e, sizeof(e), &got);
    if (rc) {
        cp_errmsg(err, errlen, "cannot read the core's ELF header: %s", core_strerror(rc));
        return rc;
    }
    int64_t phnum = check_ehdr(c, &e, &xshoff, err, errlen);
    if (phnum < 0)
        return CORE_EFORMAT;
    if (e.e_phnum == PN_XNUM && (phnum = xnum_count(c, xshoff, &xsh, err, errlen)) < 0)
        return CORE_EFORMAT;
    if ((rc = header_extent(c, e.e_phoff, (uint64_t)phnum, &need, err, errlen)))
        return rc;
    if ((rc = read_header(c, need, e.e_phnum == PN_XNUM ? &xsh : NULL, err, errlen)))
        return rc;
    c->elf = elf_memory((char *)c->header, c->header_len);
    if (!c->elf || elf_kind(c->elf) != ELF_K_ELF) {
        cp_errmsg(err, errlen, "libelf cannot parse the core's headers: %s", elf_errmsg(-1));
        return CORE_EFORMAT;
    }
    return CORE_OK;
}

static struct core *new_core(char *err, size_t errlen)
{
    struct core *c = calloc(1, sizeof(*c));
    if (!c || !(c->cache = calloc(1, sizeof(*c->cache)))) {
        free(c);
        cp_errmsg(err, errlen, "out of memory");
        return NULL;
    }
    return c;
}

/* Headers, PT_LOAD table and notes of a new core (its bytes set up); on error c is closed. */
static int parse_all(struct core *c, char *err, size_t errlen)
{
    int rc = open_headers(c, err, errlen);
    if (!rc && (rc = load_segments(c)))
        cp_errmsg(err, errlen, "cannot read the core's program headers: %s", elf_errmsg(-1));
    if (!rc && (rc = parse_notes(c)))
        cp_errmsg(err, errlen, "cannot read the core's notes: %s", core_strerror(rc));
    if (rc) {
        core_close(c);
        return rc;
    }
    if (!c->nthreads)
        warn(c, "the core has no readable NT_PRSTATUS note: no thread to unwind");
    return CORE_OK;
}

int core_open(struct bundle *b, const char *member, struct core **out, char *err, size_t errlen)
{
    *out = NULL;
    elf_version(EV_CURRENT);
    const struct bundle_member *m = bundle_find(b, member);
    if (!m) {
        cp_errmsg(err, errlen, "the bundle has no `%s` member (a metadata-only capture?)", member);
        return CORE_EFORMAT;
    }
    struct core *c = new_core(err, errlen);
    if (!c)
        return CORE_ENOMEM;
    c->b = b;
    c->m = m;
    c->size = m->size;
    int rc = parse_all(c, err, errlen);
    if (rc)
        return rc;
    if (m->truncated)
        warn(c, "the core member is cut short in this bundle: some memory is missing");
    *out = c;
    return CORE_OK;
}

int core_open_mem(const void *buf, size_t len, struct core **out, char *err, size_t errlen)
{
    *out = NULL;
    elf_version(EV_CURRENT);
    struct core *c = new_core(err, errlen);
    if (!c)
        return CORE_ENOMEM;
    static const unsigned char empty[1];
    c->mem = len ? buf : empty;
    c->size = len;
    int rc = parse_all(c, err, errlen);
    if (rc)
        return rc;
    *out = c;
    return CORE_OK;
}

void core_close(struct core *c)
{
    if (!c)
        return;
    if (c->elf)
        elf_end(c->elf);
    if (c->cache)
        for (size_t i = 0; i < CACHE_SLOTS; i++)
            free(c->cache->slot[i].data);
    free(c->cache);
    free(c->header);
    free(c->segs);
    free(c->threads);
    free(c->files);
    free(c->strings);
    free(c->auxv);
    free(c);
}
