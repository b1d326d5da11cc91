/* dcache.c - the decompressed-debuginfo cache (see dcache.h).
 *
 * The copy is written with libelf: a new ELF with the same header, program headers and sections in
 * the same order, each section's data taken from the input Elf (whose compressed sections libdw
 * has already replaced by their decompressed bytes), laid out again by libelf, plus one section
 * ORIGIN_SECTION with the path of the debug file it was made from (what reports name). */
#include "dcache.h"

#include <dirent.h>
#include <libdeflate.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ID 64

struct dcache {
    int dirfd;
    unsigned long long max_bytes; /* the size limit trim() keeps (dcache_max_bytes) */
};

unsigned long long dcache_max_bytes(void)
{
    const char *e = getenv("CRASHPACK_CACHE_MAX");
    char *end = NULL;
    if (!e || !*e)
        return DCACHE_MAX_BYTES;
    errno = 0;
    unsigned long long v = strtoull(e, &end, 10);
    if (errno || end == e || e[0] == '-')
        return DCACHE_MAX_BYTES;
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    default: break;
    }
    if (*end || (shift && v > (~0ull >> shift)))
        return DCACHE_MAX_BYTES;
    return v << shift;
}

int dcache_default_dir(char *buf, size_t len)
{
    const char *e = getenv("CRASHPACK_CACHE_DIR");
    int n;
    if (e) {
        if (!*e || !strcmp(e, "off") || e[0] != '/')
            return -1;
        n = snprintf(buf, len, "%s/debuginfo", e);
    } else if ((e = getenv("XDG_CACHE_HOME")) && e[0] == '/') {
        n = snprintf(buf, len, "%s/crashpack/debuginfo", e);
    } else if ((e = getenv("HOME")) && e[0] == '/') {
        n = snprintf(buf, len, "%s/.cache/crashpack/debuginfo", e);
    } else {
        return -1;
    }
    return n > 0 && (size_t)n < len ? 0 : -1;
}

static int dir_ok(int fd)
{
    struct stat st;
    return !fstat(fd, &st) && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
           !(st.st_mode & (S_IWGRP | S_IWOTH));
}

struct dcache *dcache_open(const char *dir)
{
    if (!dir || dir[0] != '/' || strlen(dir) >= 4096)
        return NULL;
    char p[4096];
    strcpy(p, dir);
    /* the parents first (mkdir -p, 0700); an existing one is left as it is */
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0700) && errno != EEXIST)
                return NULL;
            *s = '/';
        }
    if (mkdir(p, 0700) && errno != EEXIST)
        return NULL;
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (!dir_ok(fd)) {
        close(fd);
        return NULL;
    }
    struct dcache *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return NULL;
    }
    c->dirfd = fd;
    c->max_bytes = dcache_max_bytes();
    return c;
}

void dcache_close(struct dcache *c)
{
    if (!c)
        return;
    close(c->dirfd);
    free(c);
}

static int name_of(const unsigned char *id, size_t len, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    if (!len || len > MAX_ID || outlen < 2 * len + sizeof(".debug"))
        return -1;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hex[id[i] >> 4];
        out[2 * i + 1] = hex[id[i] & 15];
    }
    strcpy(out + 2 * len, ".debug");
    return 0;
}

#define ORIGIN_SECTION ".crashpack.origin"

/* The cached file's origin (the debug file it was made from), if its build-id is `id`. */
static char *check_file(int fd, const unsigned char *id, size_t len)
{
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e)
        return NULL;
    char *origin = NULL;
    const void *got = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(e, &got);
    size_t shstrndx;
    if (n > 0 && (size_t)n == len && !memcmp(got, id, len) && !elf_getshdrstrndx(e, &shstrndx)) {
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;
        while ((scn = elf_nextscn(e, scn))) {
            const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
            if (!name || strcmp(name, ORIGIN_SECTION))
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d && d->d_buf && d->d_size > 1 && d->d_size < 4096 &&
                ((const char *)d->d_buf)[0] == '/' &&
                memchr(d->d_buf, 0, d->d_size) == (const char *)d->d_buf + d->d_size - 1)
                origin = strdup(d->d_buf);
            break;
        }
    }
    elf_end(e);
    return origin;
}

int dcache_lookup(struct dcache *c, const unsigned char *id, size_t len, char **origin)
{
    char name[2 * MAX_ID + 8];
    *origin = NULL;
    if (!c || name_of(id, len, name, sizeof(name)))
        return -1;
    int fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        !(*origin = check_file(fd, id, len))) {
        close(fd);
        unlinkat(c->dirfd, name, 0); /* not what it claims to be: rebuilt on the next store */
        return -1;
    }
    futimens(fd, NULL); /* recently used: kept longest when the cache is trimmed */
    return fd;
}

int dcache_worth(int fd)
{
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e)
        return 0;
    int worth = 0;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while (!worth && (scn = elf_nextscn(e, scn)))
        if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED))
            worth = 1;
    elf_end(e);
    return worth;
}

/* A section's content to write instead of the input's (dcache_fill: decompressed here). */
struct repl {
    void *buf; /* NULL: the input's data */
    size_t size, align;
};

/* Copies the program headers of in (phnum of them) to out. 0, or -1. */
static int copy_phdrs(Elf *in, Elf *out, size_t phnum)
{
    if (!phnum)
        return 0;
    if (!gelf_newphdr(out, phnum))
        return -1;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(in, (int)i, &ph) || !gelf_update_phdr(out, (int)i, &ph))
            return -1;
    }
    return 0;
}

/* Section so of the copy gets the content rp, uncompressed, under the input's header sh (its size,
 * alignment and flags changed to match). 0, or -1. */
static int section_replaced(Elf_Scn *so, GElf_Shdr *sh, const struct repl *rp)
{
    Elf_Data *od = elf_newdata(so);
    if (!od)
        return -1;
    od->d_buf = rp->buf;
    od->d_size = rp->size;
    od->d_type = ELF_T_BYTE;
    od->d_align = rp->align ? rp->align : 1;
    od->d_version = EV_CURRENT;
    sh->sh_flags &= ~(GElf_Xword)SHF_COMPRESSED;
    sh->sh_size = rp->size;
    sh->sh_addralign = od->d_align;
    return gelf_update_shdr(so, sh) ? 0 : -1;
}

/* The copy's section-name table: the input's with ORIGIN_SECTION appended. */
struct names {
    unsigned char *buf; /* NULL until made; owned */
    size_t origin_name; /* where ORIGIN_SECTION's name starts in it */
};

/* Section so of the copy gets the data of section si (header sh). When si is the section-name
 * table (shstr), its data is the extended table of nm (made here, once, sh's size updated). 0, or
 * -1. */
static int section_copied(Elf_Scn *si, Elf_Scn *so, GElf_Shdr *sh, int shstr, struct names *nm)
{
    Elf_Data *d = NULL;
    while ((d = elf_getdata(si, d))) {
        Elf_Data *od = elf_newdata(so);
        if (!od)
            return -1;
        od->d_buf = d->d_buf;
        od->d_size = d->d_size;
        od->d_type = d->d_type;
        od->d_align = d->d_align;
        od->d_version = d->d_version;
        if (shstr && !nm->buf && d->d_buf && d->d_size == sh->sh_size &&
            sh->sh_type == SHT_STRTAB) {
            if (!(nm->buf = malloc(d->d_size + sizeof(ORIGIN_SECTION))))
                return -1;
            memcpy(nm->buf, d->d_buf, d->d_size);
            memcpy(nm->buf + d->d_size, ORIGIN_SECTION, sizeof(ORIGIN_SECTION));
            nm->origin_name = d->d_size;
            od->d_buf = nm->buf;
            od->d_size = d->d_size + sizeof(ORIGIN_SECTION);
            sh->sh_size = od->d_size;
        }
    }
    return 0;
}

/* Copies every section of in (shnum, the names in shstrndx) to out in the same order: the content
 * of r where it has an entry (r may be NULL), else the input's data. 0, or -1. */
static int copy_sections(Elf *in, Elf *out, size_t shnum, size_t shstrndx, const struct repl *r,
                         struct names *nm)
{
    for (size_t i = 1; i < shnum; i++) {
        Elf_Scn *si = elf_getscn(in, i), *so = elf_newscn(out);
        GElf_Shdr sh;
        if (!si || !so || !gelf_getshdr(si, &sh))
            return -1;
        if (r && r[i].buf) {
            if (section_replaced(so, &sh, &r[i]))
                return -1;
            continue;
        }
        if (section_copied(si, so, &sh, i == shstrndx, nm) || !gelf_update_shdr(so, &sh))
            return -1;
    }
    return 0;
}

/* Appends the section ORIGIN_SECTION to out, holding origin (NUL-terminated), its name at
 * origin_name in the section-name table. 0, or -1. */
static int add_origin(Elf *out, const char *origin, size_t origin_name)
{
    Elf_Scn *so = elf_newscn(out);
    Elf_Data *od = so ? elf_newdata(so) : NULL;
    GElf_Shdr sh;
    if (!od || !gelf_getshdr(so, &sh))
        return -1;
    od->d_buf = (void *)origin;
    od->d_size = strlen(origin) + 1;
    od->d_type = ELF_T_BYTE;
    od->d_align = 1;
    od->d_version = EV_CURRENT;
    memset(&sh, 0, sizeof(sh));
    sh.sh_name = (GElf_Word)origin_name;
    sh.sh_type = SHT_PROGBITS;
    sh.sh_size = od->d_size;
    sh.sh_addralign = 1;
    return gelf_update_shdr(so, &sh) ? 0 : -1;
}

/* Writes the copy to fd, with a section ORIGIN_SECTION holding `origin`; sections with an entry
 * in `r` (indexed by section number, may be NULL) get that content, uncompressed. 0 on success. */
static int write_copy(Elf *in, int fd, const char *origin, const struct repl *r)
{
    GElf_Ehdr eh;
    size_t phnum, shnum, shstrndx;
    if (!gelf_getehdr(in, &eh) || elf_getphdrnum(in, &phnum) || elf_getshdrnum(in, &shnum) ||
        elf_getshdrstrndx(in, &shstrndx) || shnum >= SHN_LORESERVE || shstrndx >= SHN_LORESERVE)
        return -1;
    Elf *out = elf_begin(fd, ELF_C_WRITE, NULL);
    if (!out)
        return -1;
    int rc = -1;
    struct names nm = {NULL, 0}; /* the section-name table, with ORIGIN_SECTION appended */
    if (!gelf_newehdr(out, gelf_getclass(in)) || copy_phdrs(in, out, phnum) ||
        copy_sections(in, out, shnum, shstrndx, r, &nm))
        goto done;
    if (!nm.buf)
        goto done; /* no section-name table we could extend */
    if (add_origin(out, origin, nm.origin_name))
        goto done;
    eh.e_shstrndx = (Elf64_Half)shstrndx;
    if (!gelf_update_ehdr(out, &eh) || elf_update(out, ELF_C_WRITE) < 0)
        goto done;
    rc = 0;
done:
    elf_end(out);
    free(nm.buf);
    return rc;
}

struct entry {
    char name[2 * MAX_ID + 8];
    off_t size;
    struct timespec used;
};

static int older(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return (x->used.tv_nsec > y->used.tv_nsec) - (x->used.tv_nsec < y->used.tv_nsec);
}

/* Removes the files used longest ago until the cache holds at most c->max_bytes (the file just
 * written too, when it alone is over the limit: the limit is a bound), and
 * temporary files over an hour old. */
static void trim(struct dcache *c)
{
    int fd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct entry *v = NULL;
    size_t n = 0, cap = 0;
    unsigned long long total = 0;
    struct dirent *de;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        struct stat st;
        /* a temporary file an analysis killed mid-write left behind, an hour old */
        if (!strncmp(de->d_name, ".tmp.", 5) &&
            !fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
            st.st_mtim.tv_sec < now.tv_sec - 3600) {
            unlinkat(c->dirfd, de->d_name, 0);
            continue;
        }
        if (l < 7 || l >= sizeof(v->name) || strcmp(de->d_name + l - 6, ".debug") ||
            fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            struct entry *nv = realloc(v, nc * sizeof(*v));
            if (!nv)
                break;
            v = nv;
            cap = nc;
        }
        strcpy(v[n].name, de->d_name);
        v[n].size = st.st_size;
        v[n].used = st.st_mtim;
        total += (unsigned long long)st.st_size;
        n++;
    }
    closedir(d);
    if (total > c->max_bytes) {
        qsort(v, n, sizeof(*v), older);
        for (size_t i = 0; i < n && total > c->max_bytes; i++)
            if (!unlinkat(c->dirfd, v[i].name, 0))
                total -= (unsigned long long)v[i].size;
    }
    free(v);
}

/* Writes the copy of `in` under the build-id's name (through a temporary file), then trims. */
static int publish(struct dcache *c, Elf *in, const unsigned char *id, size_t len,
                   const char *origin, const struct repl *r)
{
    char name[2 * MAX_ID + 8], tmp[2 * MAX_ID + 40];
    if (!c || !in || !origin || origin[0] != '/' || strlen(origin) >= 4096 ||
        name_of(id, len, name, sizeof(name)))
        return -1;
    snprintf(tmp, sizeof(tmp), ".tmp.%ld.%s", (long)getpid(), name);
    int fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = write_copy(in, fd, origin, r);
    if (close(fd))
        rc = -1;
    if (!rc)
        rc = renameat(c->dirfd, tmp, c->dirfd, name) ? -1 : 0;
    if (rc)
        unlinkat(c->dirfd, tmp, 0);
    else
        trim(c);
    return rc;
}

int dcache_store(struct dcache *c, Elf *debug, const unsigned char *id, size_t len,
                 const char *origin)
{
    return publish(c, debug, id, len, origin, NULL);
}

/* A decompressed section's size is capped: a debug file is a local file, but a lying header must
 * not make us allocate what it asks. */
#define MAX_SECTION (1ull << 31)
#define MAX_TOTAL (8ull << 30)
#define HUGE ((size_t)2 << 20)

/* The size the compressed sections of e (shnum sections) take decompressed, each rounded up to 64
 * bytes, into *total. 0, or -1 when one is over MAX_SECTION or they are over MAX_TOTAL. */
static int decompressed_total(Elf *e, size_t shnum, uint64_t *total)
{
    for (size_t i = 1; i < shnum; i++) {
        Elf_Scn *scn = elf_getscn(e, i);
        GElf_Shdr sh;
        GElf_Chdr ch;
        if (scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED) &&
            sh.sh_type != SHT_NOBITS && gelf_getchdr(scn, &ch)) {
            if (ch.ch_size > MAX_SECTION || *total > MAX_TOTAL)
                return -1;
            *total += (ch.ch_size + 63) & ~(uint64_t)63;
        }
    }
    return 0;
}

/* One region for all decompressed sections, in transparent huge pages where the kernel allows
 * (madvise): ~10 MiB written at once costs thousands of page faults otherwise. */
struct region {
    unsigned char *map; /* NULL: none */
    size_t maplen;
    unsigned char *next; /* where the next section goes (huge-page aligned at first) */
};

/* Maps the region for total bytes. 0, or -1. */
static int region_map(struct region *g, uint64_t total)
{
    g->maplen = (size_t)((total + HUGE - 1) & ~(uint64_t)(HUGE - 1)) + HUGE;
    g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g->map == MAP_FAILED) {
        g->map = NULL;
        return -1;
    }
    g->next = (unsigned char *)(((uintptr_t)g->map + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    madvise(g->next, g->maplen - HUGE, MADV_HUGEPAGE);
    return 0;
}

/* Decompresses each compressed section of e (shnum sections) into the region, its place recorded
 * in r. zlib only (what Debian's debug files use): anything else is not cached this way. 0, or
 * -1 at the first section that cannot be. */
static int inflate_sections(Elf *e, size_t shnum, struct libdeflate_decompressor *dd,
                            struct region *g, struct repl *r)
{
    size_t hdr = gelf_getclass(e) == ELFCLASS32 ? sizeof(Elf32_Chdr) : sizeof(Elf64_Chdr);
    for (size_t i = 1; i < shnum; i++) {
        Elf_Scn *scn = elf_getscn(e, i);
        GElf_Shdr sh;
        GElf_Chdr ch;
        if (!scn || !gelf_getshdr(scn, &sh))
            return -1;
        if (!(sh.sh_flags & SHF_COMPRESSED) || sh.sh_type == SHT_NOBITS)
            continue;
        Elf_Data *raw = elf_rawdata(scn, NULL);
        size_t out = 0;
        if (!gelf_getchdr(scn, &ch) || ch.ch_type != ELFCOMPRESS_ZLIB || !raw || !raw->d_buf ||
            raw->d_size <= hdr || !g->next ||
            (uint64_t)(g->next - g->map) + ch.ch_size > g->maplen ||
            libdeflate_zlib_decompress(dd, (const char *)raw->d_buf + hdr, raw->d_size - hdr,
                                       g->next, ch.ch_size, &out) != LIBDEFLATE_SUCCESS ||
            out != ch.ch_size)
            return -1;
        r[i].buf = g->next;
        r[i].size = ch.ch_size;
        r[i].align = ch.ch_addralign;
        g->next += (ch.ch_size + 63) & ~(uint64_t)63;
    }
    return 0;
}

int dcache_fill(struct dcache *c, int fd, const unsigned char *id, size_t len, const char *origin)
{
    if (!c || fd < 0)
        return -1;
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t shnum = 0;
    if (!e || elf_kind(e) != ELF_K_ELF || elf_getshdrnum(e, &shnum) || !shnum ||
        shnum >= SHN_LORESERVE) {
        elf_end(e);
        return -1;
    }
    const void *got = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(e, &got);
    struct repl *r = calloc(shnum, sizeof(*r));
    struct libdeflate_decompressor *dd = libdeflate_alloc_decompressor();
    int rc = n > 0 && (size_t)n == len && !memcmp(got, id, len) && r && dd ? 0 : -1;
    uint64_t total = 0;
    if (!rc)
        rc = decompressed_total(e, shnum, &total);
    if (!total)
        rc = -1; /* nothing compressed: nothing to gain from a copy */
    struct region g = {NULL, 0, NULL};
    if (!rc)
        rc = region_map(&g, total);
    if (!rc)
        rc = inflate_sections(e, shnum, dd, &g, r);
    if (!rc)
        rc = publish(c, e, id, len, origin, r);
    if (g.map)
        munmap(g.map, g.maplen);
    free(r);
    libdeflate_free_decompressor(dd);
    elf_end(e);
    return rc;
}
