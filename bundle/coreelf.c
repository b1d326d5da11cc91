/* coreelf.c - core layout from the ELF program headers; slim-core planning from the notes. */
#include "coreelf.h"
#include "format.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096ULL
#define NT_FILE_TYPE 0x46494c45

void core_layout_free(struct core_layout *L)
{
    free(L->segs);
    L->segs = NULL;
}

/* The ELF header checked: a 64-bit little-endian ELF core with standard program headers. 0, or -1
 * (why says why). */
static int check_ehdr(const Elf64_Ehdr *eh, char *why, size_t whylen)
{
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG)) {
        snprintf(why, whylen, "not an ELF file");
        return -1;
    }
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB) {
        snprintf(why, whylen, "only 64-bit little-endian cores are supported");
        return -1;
    }
    if (eh->e_type != ET_CORE || eh->e_phentsize != sizeof(Elf64_Phdr)) {
        snprintf(why, whylen, "not an ELF core (type %u)", eh->e_type);
        return -1;
    }
    return 0;
}

/* How many program headers the core has (into *phnum): e_phnum, or past 65534 (PN_XNUM) as many
 * as fit before the leading note's data. 0, 1 when *need bytes of b are required first, -1 when
 * it is bad (why says why). */
static int phdr_count(const uint8_t *b, size_t len, const Elf64_Ehdr *eh, uint64_t phoff,
                      uint64_t *phnum, uint64_t *need, char *why, size_t whylen)
{
    *phnum = eh->e_phnum;
    if (phoff > CORE_PREFIX_MAX) {
        snprintf(why, whylen, "program headers at an absurd offset");
        return -1;
    }
    if (*phnum == PN_XNUM) {
        /* more than 65534 segments: the kernel's first header is the note, right after the table */
        if (len < phoff + sizeof(Elf64_Phdr)) {
            *need = phoff + sizeof(Elf64_Phdr);
            return 1;
        }
        Elf64_Phdr ph;
        memcpy(&ph, b + phoff, sizeof(ph));
        if (ph.p_type != PT_NOTE || ph.p_offset < phoff) {
            snprintf(why, whylen, "PN_XNUM core without a leading note header");
            return -1;
        }
        *phnum = (ph.p_offset - phoff) / sizeof(Elf64_Phdr);
    }
    if (*phnum == 0 || *phnum * sizeof(Elf64_Phdr) > CORE_PREFIX_MAX) {
        snprintf(why, whylen, "bad program header count %llu", (unsigned long long)*phnum);
        return -1;
    }
    return 0;
}

/* The program headers of L (in b) walked: the first note, the PT_LOAD segments with data into
 * L->segs, where segment data starts (*data_start, UINT64_MAX when none), and the end of the last
 * one in *size (at least as large as given). 0, or -1 on an absurd segment (why says which). */
static int read_phdrs(const uint8_t *b, struct core_layout *L, uint64_t *size, uint64_t *data_start,
                      char *why, size_t whylen)
{
    uint64_t last_off = 0;
    for (uint64_t i = 0; i < L->phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, b + L->phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_offset > (1ULL << 52) || ph.p_filesz > (1ULL << 52)) {
            snprintf(why, whylen, "segment %llu has an absurd offset or size",
                     (unsigned long long)i);
            return -1;
        }
        uint64_t end = ph.p_offset + ph.p_filesz;
        if (end > *size)
            *size = end;
        if (ph.p_type == PT_NOTE && !L->note_size) {
            L->note_off = ph.p_offset;
            L->note_size = ph.p_filesz;
        }
        if (ph.p_type == PT_LOAD && ph.p_filesz) {
            if (ph.p_offset < last_off)
                L->unordered = 1; /* fine for a full copy; a slim plan needs file order */
            last_off = ph.p_offset;
            L->segs[L->nsegs++] = (struct core_seg){ph.p_offset, ph.p_filesz, ph.p_vaddr,
                                                    ph.p_memsz, ph.p_flags};
            if (ph.p_offset < *data_start)
                *data_start = ph.p_offset;
        }
    }
    return 0;
}

int core_layout_parse(const uint8_t *b, size_t len, struct core_layout *L, uint64_t *need,
                      char *why, size_t whylen)
{
    memset(L, 0, sizeof(*L));
    if (len < sizeof(Elf64_Ehdr)) {
        *need = sizeof(Elf64_Ehdr);
        return 1;
    }
    Elf64_Ehdr eh;
    memcpy(&eh, b, sizeof(eh));
    if (check_ehdr(&eh, why, whylen))
        return -1;
    L->machine = eh.e_machine;
    L->phoff = eh.e_phoff;
    uint64_t phnum;
    int rc = phdr_count(b, len, &eh, L->phoff, &phnum, need, why, whylen);
    if (rc)
        return rc;
    uint64_t ph_end = L->phoff + phnum * sizeof(Elf64_Phdr);
    if (len < ph_end) {
        *need = ph_end;
        return 1;
    }
    L->phnum = phnum;
    L->segs = calloc(phnum, sizeof(*L->segs));
    if (!L->segs) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    uint64_t size = ph_end, data_start = UINT64_MAX;
    if (read_phdrs(b, L, &size, &data_start, why, whylen)) {
        core_layout_free(L);
        return -1;
    }
    if (eh.e_shoff) {
        uint64_t shn = eh.e_shnum ? eh.e_shnum : 1;
        uint64_t end = eh.e_shoff + shn * (eh.e_shentsize ? eh.e_shentsize : 64);
        if (end > size && end < (1ULL << 52))
            size = end;
    }
    if (data_start == UINT64_MAX)
        data_start = size;
    L->size = size;
    L->data_start = data_start;
    return 0;
}

/* The one note walk (format.h). Both ends use it: the handler over the stream's prefix, the reader
 * over the core's header copy and over notes read from memory. */
int core_note_next(const unsigned char *buf, size_t len, size_t *pos, struct core_note *out)
{
    if (*pos > len || len - *pos < 12)
        return 0;
    const unsigned char *n = buf + *pos;
    uint32_t namesz, descsz;
    memcpy(&namesz, n, 4);
    memcpy(&descsz, n + 4, 4);
    uint64_t nlen = (namesz + 3ULL) & ~3ULL, dlen = (descsz + 3ULL) & ~3ULL;
    if (len - *pos - 12 < nlen + dlen)
        return 0;
    memcpy(&out->type, n + 8, 4);
    out->name = (const char *)n + 12;
    out->namesz = namesz;
    out->desc = n + 12 + nlen;
    out->descsz = descsz;
    *pos += 12 + nlen + dlen;
    return 1;
}

void core_slim_free(struct slim_plan *P)
{
    free(P->head);
    free(P->pieces);
    memset(P, 0, sizeof(*P));
}

struct keep {
    uint64_t lo, hi; /* virtual range to keep, relative to nothing; lo == hi: none */
};

static void keep_add(struct keep *k, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return;
    if (k->lo == k->hi) {
        k->lo = lo;
        k->hi = hi;
        return;
    }
    if (lo < k->lo)
        k->lo = lo;
    if (hi > k->hi)
        k->hi = hi;
}

static const struct core_seg *seg_of(const struct core_layout *L, uint64_t addr, size_t *idx)
{
    size_t lo = 0, hi = L->nsegs;
    /* segments are in file order, which the kernel also keeps in address order */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct core_seg *s = &L->segs[mid];
        if (addr < s->vaddr)
            hi = mid;
        else if (addr >= s->vaddr + s->filesz)
            lo = mid + 1;
        else {
            *idx = mid;
            return s;
        }
    }
    for (size_t i = 0; i < L->nsegs; i++) /* not sorted by address after all */
        if (addr >= L->segs[i].vaddr && addr < L->segs[i].vaddr + L->segs[i].filesz) {
            *idx = i;
            return &L->segs[i];
        }
    return NULL;
}

static size_t sp_offset(uint16_t machine)
{
    return machine == EM_X86_64 ? 112 + 19 * 8 : machine == EM_AARCH64 ? 112 + 31 * 8 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t core_frame_cuts(const uint8_t *prefix, size_t len, const struct core_layout *L,
                       uint64_t **out)
{
    *out = NULL;
    size_t cap = L->nsegs + 1, n = 0;
    uint64_t *v = malloc(cap * sizeof(*v));
    if (!v)
        return 0;
    for (size_t i = 0; i < L->nsegs; i++)
        v[n++] = L->segs[i].off;
    size_t sp_off = sp_offset(L->machine);
    if (sp_off && len >= L->data_start && L->note_size &&
        L->note_off + L->note_size <= L->data_start) {
        size_t pos = 0;
        struct core_note nt;
        while (core_note_next(prefix + L->note_off, L->note_size, &pos, &nt)) {
            if (nt.type != NT_PRSTATUS || nt.descsz < sp_off + 8)
                continue;
            uint64_t sp;
            memcpy(&sp, nt.desc + sp_off, 8);
            size_t i;
            const struct core_seg *s = seg_of(L, sp, &i);
            if (!s)
                continue;
            uint64_t lo = (sp > PAGE ? sp - PAGE : 0) & ~(PAGE - 1);
            if (lo <= s->vaddr)
                continue; /* the segment's start is a cut already */
            if (n == cap) {
                uint64_t *nv = realloc(v, 2 * cap * sizeof(*v));
                if (!nv)
                    break;
                v = nv;
                cap *= 2;
            }
            v[n++] = s->off + (lo - s->vaddr);
        }
    }
    qsort(v, n, sizeof(*v), cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || v[i] != v[u - 1])
            v[u++] = v[i];
    if (!u) {
        free(v);
        return 0;
    }
    *out = v;
    return u;
}

/* A thread's stack in a slim core: from a page below its stack pointer sp to the end of its
 * segment, at most stack_max bytes. Counts the stacks found in P. */
static void keep_stack(const struct core_layout *L, uint64_t sp, uint64_t stack_max,
                       struct keep *keep, struct slim_plan *P)
{
    size_t i;
    uint64_t lo = (sp > 4096 ? sp - 4096 : 0) & ~(PAGE - 1);
    if (seg_of(L, sp, &i)) {
        const struct core_seg *s = &L->segs[i];
        if (lo < s->vaddr)
            lo = s->vaddr;
        uint64_t hi = s->vaddr + s->filesz;
        if (hi - lo > stack_max)
            hi = lo + stack_max;
        keep_add(&keep[i], lo, hi);
        P->stacks++;
    }
}

/* The mapped files of an NT_FILE note (desc, descsz bytes): marks their segments file-backed and
 * keeps each file's ELF header page and the written data of its mappings. */
static void keep_files(const struct core_layout *L, const uint8_t *desc, uint32_t descsz,
                       struct keep *keep, uint8_t *filebacked)
{
    uint64_t count, pagesz;
    memcpy(&count, desc, 8);
    memcpy(&pagesz, desc + 8, 8);
    if (count > (descsz - 16) / 24)
        return;
    for (uint64_t k = 0; k < count; k++) {
        uint64_t st, en, pg;
        memcpy(&st, desc + 16 + k * 24, 8);
        memcpy(&en, desc + 16 + k * 24 + 8, 8);
        memcpy(&pg, desc + 16 + k * 24 + 16, 8);
        size_t i;
        if (!seg_of(L, st, &i))
            continue;
        const struct core_seg *s = &L->segs[i];
        filebacked[i] = 1;
        if (pg == 0 && s->vaddr == st) /* ELF header page: build-id */
            keep_add(&keep[i], st, st + (s->filesz < PAGE ? s->filesz : PAGE));
        /* the kernel dumps a file mapping only when it was written (data, GOT,
         * RELRO with .dynamic): r_debug and the link_map chain that debuggers
         * follow to find the shared libraries live there */
        if (!(s->flags & PF_X) && s->filesz <= (8ULL << 20))
            keep_add(&keep[i], s->vaddr, s->vaddr + s->filesz);
        (void)en;
    }
}

/* The start of the slim core in head: the core's ELF header with phn program headers right after
 * it and no sections, its one PT_NOTE, and the notes after the program headers. */
static void head_start(const uint8_t *prefix, const struct core_layout *L, size_t phn,
                       uint8_t *head)
{
    Elf64_Ehdr eh;
    memcpy(&eh, prefix, sizeof(eh));
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_phnum = (uint16_t)phn;
    eh.e_shoff = 0;
    eh.e_shnum = 0;
    eh.e_shstrndx = 0;
    memcpy(head, &eh, sizeof(eh));
    Elf64_Phdr note = {.p_type = PT_NOTE,
                       .p_offset = sizeof(Elf64_Ehdr) + phn * sizeof(Elf64_Phdr),
                       .p_filesz = L->note_size};
    memcpy(head + sizeof(Elf64_Ehdr), &note, sizeof(note));
    memcpy(head + note.p_offset, prefix + L->note_off, L->note_size);
}

/* The plan from the kept ranges: the head (ELF header, one PT_NOTE, one PT_LOAD per kept range,
 * then the notes) and one piece per range, each page-aligned in the slim core. 0, or -1 (why). */
static int plan_pieces(const uint8_t *prefix, const struct core_layout *L, const struct keep *keep,
                       struct slim_plan *P, char *why, size_t whylen)
{
    size_t nkeep = 0;
    for (size_t i = 0; i < L->nsegs; i++)
        nkeep += keep[i].lo != keep[i].hi;
    size_t phn = 1 + nkeep;
    if (phn >= PN_XNUM) {
        snprintf(why, whylen, "too many segments to keep");
        return -1;
    }
    size_t head_len = sizeof(Elf64_Ehdr) + phn * sizeof(Elf64_Phdr) + L->note_size;
    P->head = calloc(1, head_len);
    P->pieces = calloc(nkeep ? nkeep : 1, sizeof(*P->pieces));
    if (!P->head || !P->pieces) {
        core_slim_free(P);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    head_start(prefix, L, phn, P->head);
    uint64_t out = (head_len + PAGE - 1) & ~(PAGE - 1);
    size_t k = 0;
    for (size_t i = 0; i < L->nsegs; i++) {
        if (keep[i].lo == keep[i].hi)
            continue;
        const struct core_seg *s = &L->segs[i];
        uint64_t len = keep[i].hi - keep[i].lo;
        Elf64_Phdr ph = {.p_type = PT_LOAD,
                         .p_flags = s->flags,
                         .p_offset = out,
                         .p_vaddr = keep[i].lo,
                         .p_filesz = len,
                         .p_memsz = len,
                         .p_align = PAGE};
        memcpy(P->head + sizeof(Elf64_Ehdr) + (1 + k) * sizeof(Elf64_Phdr), &ph, sizeof(ph));
        P->pieces[k++] = (struct slim_piece){s->off + (keep[i].lo - s->vaddr), len, out};
        P->kept += len;
        out = (out + len + PAGE - 1) & ~(PAGE - 1);
    }
    P->npieces = k;
    P->head_len = head_len;
    P->size = k ? P->pieces[k - 1].out_off + P->pieces[k - 1].len : head_len;
    return 0;
}

int core_slim_plan(const uint8_t *prefix, const struct core_layout *L, uint64_t stack_max,
                   struct slim_plan *P, char *why, size_t whylen)
{
    memset(P, 0, sizeof(*P));
    size_t sp_off = sp_offset(L->machine);
    if (!sp_off) {
        snprintf(why, whylen, "slim cores are planned for x86_64 and aarch64 only");
        return -1;
    }
    if (!L->note_size || L->note_off + L->note_size > L->data_start || L->unordered) {
        snprintf(why, whylen, "notes are not before the segment data, or segments out of order");
        return -1;
    }
    struct keep *keep = calloc(L->nsegs ? L->nsegs : 1, sizeof(*keep));
    uint8_t *filebacked = calloc(L->nsegs ? L->nsegs : 1, 1);
    if (!keep || !filebacked) {
        free(keep);
        free(filebacked);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    size_t pos = 0;
    struct core_note nt;
    while (core_note_next(prefix + L->note_off, L->note_size, &pos, &nt)) {
        if (nt.type == NT_PRSTATUS && nt.descsz >= sp_off + 8) {
            uint64_t sp;
            memcpy(&sp, nt.desc + sp_off, 8);
            keep_stack(L, sp, stack_max, keep, P);
        } else if (nt.type == NT_FILE_TYPE && nt.descsz >= 16) {
            keep_files(L, nt.desc, nt.descsz, keep, filebacked);
        }
    }
    /* small anonymous segments: vdso, the dynamic linker's early allocations */
    for (size_t i = 0; i < L->nsegs; i++)
        if (!filebacked[i] && L->segs[i].filesz <= (64ULL << 10))
            keep_add(&keep[i], L->segs[i].vaddr, L->segs[i].vaddr + L->segs[i].filesz);
    int rc = plan_pieces(prefix, L, keep, P, why, whylen);
    free(keep);
    free(filebacked);
    return rc;
}
