/* modules.c - a core's ELF modules from NT_FILE and the in-core ELF header pages; file lookup.
 *
 * Main data structure: struct modules (modules.h), an array of struct module sorted by start
 * address. Built in three steps: group the NT_FILE mappings into runs of one file that start at
 * file offset 0 (group_files), read each run's first page from the core to learn whether it is an
 * ELF file, its build-id and its load bias (probe_header), and add the vdso from NT_AUXV
 * (add_vdso). Lookup happens later, when libdwfl asks (modules_find_elf).
 */
#include "modules.h"
#include "errmsg.h"

#include "core.h"
#include "dcache.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HEADER_PAGE 4096u
#define VDSO_MAX (1u << 20)
#define DELETED_SUFFIX " (deleted)"
#define DEFAULT_DEBUG_DIR "/usr/lib/debug"
#ifndef AT_SYSINFO_EHDR
#define AT_SYSINFO_EHDR 33
#endif


const char *modules_build_id_hex(const struct module *mod, char *buf, size_t len)
{
    size_t j = 0;
    if (len)
        buf[0] = 0;
    for (size_t i = 0; i < mod->build_id_len && j + 3 <= len; i++, j += 2)
        snprintf(buf + j, 3, "%02x", mod->build_id[i]);
    return buf;
}

const struct module *modules_at(const struct modules *m, uint64_t addr)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct module *mod = &m->v[lo - 1];
    return addr < mod->end ? mod : NULL;
}

/* ---- the first page: ELF?, build-id, bias ---- */

static void note_build_id(struct module *mod, const unsigned char *buf, size_t len)
{
    size_t pos = 0;
    struct core_note n;
    while (core_note_next(buf, len, &pos, &n)) {
        if (n.type == NT_GNU_BUILD_ID && n.namesz == 4 && !memcmp(n.name, "GNU", 4) &&
            n.descsz > 0 && n.descsz <= MODULES_MAX_BUILD_ID) {
            memcpy(mod->build_id, n.desc, n.descsz);
            mod->build_id_len = n.descsz;
            return;
        }
    }
}

/* Parses an ELF image's header (buf holds its first len bytes, len >= 64) for the module's bias
 * and build-id. Returns 1 when it is an ELF header, 0 when not. */
static int parse_image_header(struct module *mod, unsigned char *buf, size_t len)
{
    if (len < sizeof(Elf64_Ehdr) || memcmp(buf, ELFMAG, SELFMAG))
        return 0;
    Elf *e = elf_memory((char *)buf, len);
    GElf_Ehdr eh;
    size_t phnum = 0;
    if (!e || !gelf_getehdr(e, &eh) || elf_getphdrnum(e, &phnum)) {
        if (e)
            elf_end(e);
        return 1; /* ELF magic, headers beyond the page: a module without bias or build-id */
    }
    int have_load = 0;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph))
            break;
        if (ph.p_type == PT_LOAD && !have_load) {
            uint64_t align = ph.p_align ? ph.p_align : 1;
            mod->bias = mod->start - (ph.p_vaddr & ~(align - 1));
            mod->bias_known = have_load = 1;
        } else if (ph.p_type == PT_NOTE && !mod->build_id_len && ph.p_offset < len &&
                   ph.p_filesz <= len - ph.p_offset && !(ph.p_offset & 3)) {
            note_build_id(mod, buf + ph.p_offset, (size_t)ph.p_filesz);
        }
    }
    elf_end(e);
    return 1;
}

/* Returns 1 when the module is an ELF file (or may be: its first page is not in the core). */
static int probe_header(struct core *c, struct module *mod, int *in_core)
{
    unsigned char *page = malloc(HEADER_PAGE);
    size_t got = 0;
    if (!page)
        return 0;
    uint64_t want = mod->end - mod->start < HEADER_PAGE ? mod->end - mod->start : HEADER_PAGE;
    core_read_dumped(c, mod->start, page, (size_t)want, &got);
    *in_core = got >= sizeof(Elf64_Ehdr);
    int elf = *in_core ? parse_image_header(mod, page, got) : 1;
    free(page);
    return elf;
}

/* ---- building the list ---- */

static int file_cmp(const void *a, const void *b)
{
    const struct core_file *x = *(const struct core_file *const *)a;
    const struct core_file *y = *(const struct core_file *const *)b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int seg_exec(const struct core *c, uint64_t start, uint64_t end)
{
    for (size_t i = 0; i < c->nsegs; i++) {
        const struct core_segment *s = &c->segs[i];
        if (s->vaddr < end && start < s->vaddr + s->memsz && (s->flags & PF_X))
            return 1;
    }
    return 0;
}

static int add_module(struct modules *m, size_t *cap, const char *name, uint64_t start,
                      uint64_t end)
{
    if (m->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct module *v = realloc(m->v, nc * sizeof(*v));
        if (!v)
            return -1;
        m->v = v;
        *cap = nc;
    }
    struct module *mod = &m->v[m->n];
    memset(mod, 0, sizeof(*mod));
    mod->name = strdup(name);
    if (!mod->name)
        return -1;
    size_t l = strlen(name), sl = strlen(DELETED_SUFFIX);
    mod->deleted = l > sl && !strcmp(name + l - sl, DELETED_SUFFIX);
    mod->path = strndup(name, mod->deleted ? l - sl : l);
    if (!mod->path) {
        free(mod->name);
        return -1;
    }
    mod->start = start;
    mod->end = end;
    m->n++;
    return 0;
}

static void drop_last(struct modules *m)
{
    struct module *mod = &m->v[--m->n];
    free(mod->name);
    free(mod->path);
}

/* One module per run of mappings of the same path whose first mapping has file offset 0. */
static int group_files(struct core *c, struct modules *m, size_t *cap)
{
    const struct core_file **f = malloc((c->nfiles ? c->nfiles : 1) * sizeof(*f));
    if (!f)
        return -1;
    for (size_t i = 0; i < c->nfiles; i++)
        f[i] = &c->files[i];
    qsort(f, c->nfiles, sizeof(*f), file_cmp);
    for (size_t i = 0; i < c->nfiles; i++) {
        if (f[i]->offset != 0 || !f[i]->path[0])
            continue;
        uint64_t end = f[i]->end;
        size_t j = i + 1;
        for (; j < c->nfiles && !strcmp(f[j]->path, f[i]->path) && f[j]->offset != 0; j++)
            if (f[j]->end > end)
                end = f[j]->end;
        if (m->n && m->v[m->n - 1].end > f[i]->start)
            continue; /* overlaps the previous module (hostile): keep the first */
        if (add_module(m, cap, f[i]->path, f[i]->start, end)) {
            free(f);
            return -1;
        }
        struct module *mod = &m->v[m->n - 1];
        int in_core = 0;
        mod->exec = seg_exec(c, mod->start, mod->end);
        if (!probe_header(c, mod, &in_core) || (!in_core && !mod->exec))
            drop_last(m); /* a data file (locale archive, device, ...) */
        i = j - 1;
    }
    free(f);
    return 0;
}

/* The vdso: its whole image is in the core (it is not a file). */
static int add_vdso(struct core *c, struct modules *m, size_t *cap)
{
    int found = 0;
    uint64_t base = core_auxv(c, AT_SYSINFO_EHDR, &found);
    const struct core_segment *s = found && base ? core_segment_at(c, base) : NULL;
    if (!s || modules_at(m, base))
        return 0;
    uint64_t len = s->vaddr + s->memsz - base;
    if (len > VDSO_MAX)
        len = VDSO_MAX;
    unsigned char *img = malloc(len ? len : 1);
    size_t got = 0;
    if (!img)
        return -1;
    if (core_read_dumped(c, base, img, (size_t)len, &got) || got < sizeof(Elf64_Ehdr)) {
        free(img);
        return 0;
    }
    if (add_module(m, cap, "[vdso]", base, base + got)) {
        free(img);
        return -1;
    }
    struct module *mod = &m->v[m->n - 1];
    free(mod->path);
    mod->path = NULL;
    mod->exec = 1;
    mod->image = img;
    mod->image_len = got;
    if (!parse_image_header(mod, img, got)) {
        drop_last(m);
        free(img);
    }
    return 0;
}

static int mod_cmp(const void *a, const void *b)
{
    const struct module *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

static int set_paths(struct modules *m, const struct modules_opts *o)
{
    if (o && o->sysroot && o->sysroot[0]) {
        size_t l = strlen(o->sysroot);
        while (l > 1 && o->sysroot[l - 1] == '/')
            l--;
        if (!(m->sysroot = strndup(o->sysroot, l)))
            return -1;
    }
    size_t nd = o ? o->ndebug_dirs : 0;
    m->debug_dirs = calloc(nd + 1, sizeof(char *));
    if (!m->debug_dirs)
        return -1;
    for (size_t i = 0; i < nd; i++)
        if (!(m->debug_dirs[m->ndebug_dirs++] = strdup(o->debug_dirs[i])))
            return -1;
    if (!(m->debug_dirs[m->ndebug_dirs++] = join(m->sysroot ? m->sysroot : "", DEFAULT_DEBUG_DIR)))
        return -1;
    /* the fds every lookup opens from (open_under); a dir that cannot be opened finds nothing */
    m->nuser_dirs = nd;
    m->dir_fd = calloc(m->ndebug_dirs, sizeof(int));
    m->dir_resolve = calloc(m->ndebug_dirs, sizeof(int));
    m->dir_prefix = calloc(m->ndebug_dirs, sizeof(char *));
    if (!m->dir_fd || !m->dir_resolve || !m->dir_prefix)
        return -1;
    if (m->sysroot && o && o->root_fd > 2)
        m->rootfd = fcntl(o->root_fd, F_DUPFD_CLOEXEC, 3);
    else if (m->sysroot)
        m->rootfd = open(m->sysroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; i < m->ndebug_dirs; i++) {
        m->dir_prefix[i] = "";
        if (i < nd) {
            m->dir_fd[i] = open(m->debug_dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
            m->dir_resolve[i] = RESOLVE_BENEATH;
        } else if (m->sysroot) {
            m->dir_fd[i] = m->rootfd; /* not owned: SYSROOT/usr/lib/debug, inside the root */
            m->dir_resolve[i] = RESOLVE_IN_ROOT;
            m->dir_prefix[i] = DEFAULT_DEBUG_DIR "/";
        } else {
            m->dir_fd[i] = open(DEFAULT_DEBUG_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
        }
    }
    /* "-": no CRC checks (build-ids are checked); "" and ".debug": next to the file */
    size_t len = 16;
    for (size_t i = 0; i < m->ndebug_dirs; i++)
        len += strlen(m->debug_dirs[i]) + 1;
    if (!(m->debuginfo_path = malloc(len)))
        return -1;
    strcpy(m->debuginfo_path, "-:.debug");
    for (size_t i = 0; i < m->ndebug_dirs; i++) {
        strcat(m->debuginfo_path, ":");
        strcat(m->debuginfo_path, m->debug_dirs[i]);
    }
    return 0;
}

int modules_build(struct core *c, const struct modules_opts *o, struct modules **out, char *err,
                  size_t errlen)
{
    size_t cap = 0;
    struct modules *m = calloc(1, sizeof(*m));
    *out = NULL;
    if (m)
        m->rootfd = -1;
    if (!m || set_paths(m, o) || group_files(c, m, &cap) || add_vdso(c, m, &cap)) {
        modules_free(m);
        cp_errmsg(err, errlen, "out of memory building the module list");
        return -1;
    }
    if (m->n) /* no modules: v is NULL, and qsort wants a non-NULL base */
        qsort(m->v, m->n, sizeof(*m->v), mod_cmp);
    for (size_t i = 0; i < m->n; i++)
        m->v[i].owner = m;
    *out = m;
    return 0;
}

void modules_free(struct modules *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].name);
        free(m->v[i].path);
        free(m->v[i].image);
        free(m->v[i].found_at);
        free(m->v[i].problem);
        free(m->v[i].alt_name);
        free(m->v[i].debug_dir_inside);
    }
    free(m->v);
    free(m->sysroot);
    for (size_t i = 0; i < m->ndebug_dirs; i++) {
        free(m->debug_dirs[i]);
        if (m->dir_fd && m->dir_fd[i] >= 0 && m->dir_fd[i] != m->rootfd)
            close(m->dir_fd[i]);
    }
    if (m->rootfd >= 0)
        close(m->rootfd);
    free(m->dir_fd);
    free(m->dir_resolve);
    free(m->dir_prefix);
    free(m->debug_dirs);
    free(m->debuginfo_path);
    free(m);
}

int modules_report(struct modules *m, Dwfl *dwfl, char *err, size_t errlen)
{
    for (size_t i = 0; i < m->n; i++) {
        struct module *mod = &m->v[i];
        Dwfl_Module *dm = dwfl_report_module(dwfl, mod->name, mod->start, mod->end);
        if (!dm) {
            cp_errmsg(err, errlen, "libdwfl refused module %.200s: %s", mod->name, dwfl_errmsg(-1));
            return -1;
        }
        void **ud = NULL;
        dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
        if (ud)
            *ud = mod;
    }
    return 0;
}

/* ---- lookup ---- */

static void add_problem(struct module *mod, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_problem(struct module *mod, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (!mod->problem) {
        mod->problem = strdup(buf);
        return;
    }
    char *s = NULL;
    if (strlen(mod->problem) < 4096 && asprintf(&s, "%s; %s", mod->problem, buf) >= 0) {
        free(mod->problem);
        mod->problem = s;
    }
}

static int path_ok(const char *p)
{
    if (p[0] != '/')
        return 0;
    for (const char *s = p; (s = strstr(s, "/..")); s += 3)
        if (s[3] == '/' || s[3] == 0)
            return 0;
    return 1;
}

/* ---- opening files: the one way every lookup opens one ---- */

/* Opens rel from dirfd read-only without blocking: with `resolve` (RESOLVE_IN_ROOT or
 * RESOLVE_BENEATH) by openat2, magic links refused; with 0 a plain openat (the host's own paths).
 * Returns the fd of a regular file, else -1 (a FIFO, device or directory is closed unread). */
static int open_under(int dirfd, const char *rel, int resolve)
{
    int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, fd;
    if (dirfd < 0 && dirfd != AT_FDCWD)
        return -1;
    if (resolve) {
        struct open_how how = {.flags = (unsigned)flags,
                               .resolve = (unsigned)resolve | RESOLVE_NO_MAGICLINKS};
        fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
    } else {
        fd = openat(dirfd, rel, flags);
    }
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* An absolute path of the crashed system: inside the sysroot when there is one. */
static int open_in_root(const struct modules *m, const char *abspath)
{
    if (m->sysroot)
        return open_under(m->rootfd, abspath, RESOLVE_IN_ROOT);
    return open_under(AT_FDCWD, abspath, 0);
}

/* A path relative to debug dir i (its prefix prepended), opened as that dir says. */
static int open_in_dir(const struct modules *m, size_t i, const char *rel)
{
    char p[PATH_MAX];
    while (*rel == '/')
        rel++;
    if (snprintf(p, sizeof(p), "%s%s", m->dir_prefix[i], rel) >= (int)sizeof(p))
        return -1;
    return open_under(m->dir_fd[i], p, m->dir_resolve[i]);
}

/* The path inside the sysroot that open_in_dir(m, i, rel) opens, in buf; NULL when dir i is not
 * in the sysroot. */
static const char *dir_inside(const struct modules *m, size_t i, const char *rel, char *buf,
                              size_t n)
{
    if (m->dir_resolve[i] != RESOLVE_IN_ROOT)
        return NULL;
    while (*rel == '/')
        rel++;
    return snprintf(buf, n, "/%s%s", m->dir_prefix[i], rel) < (int)n ? buf : NULL;
}

/* What an open file is: the path the kernel resolved (what realpath() gives libdwfl), else
 * `fallback`. malloc()ed. */
static char *fd_name(int fd, const char *fallback)
{
    char link[64], buf[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, sizeof(buf) - 1);
    if (n <= 0 || buf[0] != '/')
        return strdup(fallback);
    buf[n] = 0;
    return strdup(buf);
}

/* The ELF on fd if it is one and its build-id is id (any build-id when len is 0); NULL else. */
static Elf *elf_with_id(int fd, const unsigned char *id, size_t len)
{
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    GElf_Ehdr eh;
    const void *got = NULL;
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
        (len && (dwelf_elf_gnu_build_id(e, &got) != (ssize_t)len || memcmp(got, id, len)))) {
        if (e)
            elf_end(e);
        return NULL;
    }
    return e;
}

/* Checks a candidate open on fd (closed when rejected). Returns 1 with *fdp and *elfp set when
 * accepted. */
static int try_file(struct module *mod, int fd, const char *path, int *fdp, Elf **elfp)
{
    char hex[2 * MODULES_MAX_BUILD_ID + 1], fhex[2 * MODULES_MAX_BUILD_ID + 1];
    if (fd < 0)
        return 0;
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    GElf_Ehdr eh;
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
        add_problem(mod, "%s is not an ELF file", path);
        goto reject;
    }
    const void *id = NULL;
    ssize_t idlen = dwelf_elf_gnu_build_id(e, &id);
    if (mod->build_id_len &&
        (idlen != (ssize_t)mod->build_id_len || memcmp(id, mod->build_id, mod->build_id_len))) {
        struct module f = {.build_id_len = idlen > 0 && idlen <= (ssize_t)MODULES_MAX_BUILD_ID
                                               ? (size_t)idlen : 0};
        if (f.build_id_len)
            memcpy(f.build_id, id, f.build_id_len);
        add_problem(mod, "build-id mismatch: %s has %s, the core %s", path,
                    f.build_id_len ? modules_build_id_hex(&f, fhex, sizeof(fhex)) : "none",
                    modules_build_id_hex(mod, hex, sizeof(hex)));
        goto reject;
    }
    *fdp = fd;
    *elfp = e;
    return 1;
reject:
    if (e)
        elf_end(e);
    close(fd);
    return 0;
}

static int give_up(int fd, Elf **elfp)
{
    elf_end(*elfp);
    *elfp = NULL;
    close(fd);
    return -1;
}

static int take_file(struct module *mod, const char *path, char **file_name, int debug_only)
{
    free(mod->found_at);
    mod->found_at = strdup(path);
    *file_name = strdup(path);
    mod->debug_only = debug_only;
    return mod->found_at && *file_name;
}

/* Under each debug dir: .build-id/NN/REST (a main file) then .build-id/NN/REST.debug. */
static int try_build_id_trees(const struct modules *m, struct module *mod, int *fdp, Elf **elfp,
                              char **file_name)
{
    char hex[2 * MODULES_MAX_BUILD_ID + 1], path[4096];
    if (mod->build_id_len < 2)
        return 0;
    modules_build_id_hex(mod, hex, sizeof(hex));
    for (size_t i = 0; i < m->ndebug_dirs; i++) {
        for (int dbg = 0; dbg < 2; dbg++) {
            char rel[256];
            snprintf(rel, sizeof(rel), ".build-id/%.2s/%s%s", hex, hex + 2, dbg ? ".debug" : "");
            snprintf(path, sizeof(path), "%s/%s", m->debug_dirs[i], rel);
            if (try_file(mod, open_in_dir(m, i, rel), path, fdp, elfp))
                return take_file(mod, path, file_name, dbg) ? 1 : give_up(*fdp, elfp);
        }
    }
    return 0;
}

static int find_image(struct module *mod, Elf **elfp)
{
    *elfp = elf_memory((char *)mod->image, mod->image_len);
    if (!*elfp)
        add_problem(mod, "its in-core image is not a readable ELF file");
    else {
        free(mod->found_at);
        mod->found_at = strdup("(in the core)");
    }
    return -1;
}

int modules_find_elf(Dwfl_Module *dm, void **userdata, const char *modname, Dwarf_Addr base,
                     char **file_name, Elf **elfp)
{
    (void)dm;
    (void)modname;
    (void)base;
    struct module *mod = *userdata;
    int fd = -1;
    if (!mod || mod->looked_up)
        return -1;
    mod->looked_up = 1;
    if (mod->image)
        return find_image(mod, elfp);
    const struct modules *m = mod->owner;
    char path[4096];
    if (!path_ok(mod->path)) {
        add_problem(mod, "its path is not absolute or has `..`: not looked up");
    } else {
        snprintf(path, sizeof(path), "%s%s", m->sysroot ? m->sysroot : "", mod->path);
        if (try_file(mod, open_in_root(m, mod->path), path, &fd, elfp))
            return take_file(mod, path, file_name, 0) ? fd : give_up(fd, elfp);
    }
    int r = try_build_id_trees(m, mod, &fd, elfp, file_name);
    if (r > 0)
        return fd;
    if (!mod->problem || !strstr(mod->problem, "mismatch"))
        add_problem(mod, "not found%s%s", m->sysroot ? " under " : "",
                    m->sysroot ? m->sysroot : "");
    else
        add_problem(mod, "no file with the core's build-id found");
    return -1;
}


/* ---- the decompressed-debuginfo cache ---- */

static const unsigned char *module_id(Dwfl_Module *dm, const struct module *mod, size_t *len)
{
    if (mod && mod->build_id_len) {
        *len = mod->build_id_len;
        return mod->build_id;
    }
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(dm, &bits, &vaddr);
    *len = n > 0 ? (size_t)n : 0;
    return n > 0 ? bits : NULL;
}

/* A debug file found by the search below: its fd (regular, build-id checked), the name reports
 * give it, and whether it may go into the shared cache (found outside a sysroot and outside every
 * --debug-dir: a hostile directory must not change a later run's output). */
struct found {
    int fd;
    char *name;
    int trusted;
    const char *inside; /* set by the caller: the path opened inside the sysroot, else NULL */
    char *dir_inside;   /* its directory (malloc()ed), when inside */
    char *alt_name;     /* its .gnu_debugaltlink (malloc()ed), NULL when none */
    unsigned char alt_id[MODULES_MAX_BUILD_ID];
    size_t alt_id_len;
};

/* The .gnu_debugaltlink section of a dwz-processed debug file: the alt file's name, NUL, its
 * build-id. */
static void read_altlink(Elf *e, struct found *f)
{
    size_t shstrndx;
    Elf_Scn *scn = NULL;
    if (elf_getshdrstrndx(e, &shstrndx))
        return;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        const char *nm;
        if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(e, shstrndx, sh.sh_name)) ||
            strcmp(nm, ".gnu_debugaltlink"))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        const char *b = d ? d->d_buf : NULL;
        const char *z = b ? memchr(b, 0, d->d_size) : NULL;
        if (!z || z == b)
            return;
        size_t idlen = d->d_size - (size_t)(z + 1 - b);
        if (idlen < 2 || idlen > MODULES_MAX_BUILD_ID)
            return;
        f->alt_name = strdup(b);
        memcpy(f->alt_id, z + 1, idlen);
        f->alt_id_len = idlen;
        return;
    }
}

static int take_debug(struct found *f, int fd, const unsigned char *id, size_t len,
                      const char *path, int trusted)
{
    Elf *e = fd >= 0 ? elf_with_id(fd, id, len) : NULL;
    if (!e) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    read_altlink(e, f);
    elf_end(e);
    f->fd = fd;
    f->name = fd_name(fd, path);
    f->trusted = trusted;
    if (f->inside) {
        const char *sl = strrchr(f->inside, '/');
        f->dir_inside = sl ? strndup(f->inside, (size_t)(sl - f->inside)) : NULL;
    }
    return 1;
}

/* DIR/.build-id/NN/REST.debug under each debug dir, in order (what libdwfl's build-id search
 * looks for). */
static int find_by_build_id(const struct modules *m, const unsigned char *id, size_t len,
                            struct found *f)
{
    char hex[2 * MODULES_MAX_BUILD_ID + 1], rel[256], path[PATH_MAX];
    if (len < 2 || len > MODULES_MAX_BUILD_ID)
        return 0;
    for (size_t i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", id[i]);
    snprintf(rel, sizeof(rel), ".build-id/%.2s/%s.debug", hex, hex + 2);
    for (size_t i = 0; i < m->ndebug_dirs; i++) {
        snprintf(path, sizeof(path), "%s/%s", m->debug_dirs[i], rel);
        char in[PATH_MAX];
        f->inside = dir_inside(m, i, rel, in, sizeof(in));
        if (take_debug(f, open_in_dir(m, i, rel), id, len, path,
                       i >= m->nuser_dirs && !m->sysroot))
            return 1;
    }
    return 0;
}

/* The .gnu_debuglink candidates of the standard search ("-:.debug:DIRS"), for the module's path
 * in the crashed system: NAME next to the file and in its .debug/ (inside the root), then under
 * each debug dir + the file's directory, and that directory with its leading components dropped
 * one at a time; NAME is the debug link and, as libdwfl does without one, basename + ".debug".
 * An absolute debug link is opened inside the root. */
static int find_by_debuglink(const struct modules *m, const struct module *mod, const char *link,
                             const unsigned char *id, size_t len, struct found *f)
{
    if (!mod->path || mod->path[0] != '/')
        return 0;
    const char *slash = strrchr(mod->path, '/');
    int dlen = (int)(slash - mod->path);
    char alt[NAME_MAX + 8], p[PATH_MAX], shown[PATH_MAX];
    const char *names[2] = {link, NULL};
    if (snprintf(alt, sizeof(alt), "%s.debug", slash + 1) < (int)sizeof(alt))
        names[1] = alt;
    const char *root = m->sysroot ? m->sysroot : "";
    int host = !m->sysroot;
    for (size_t n = 0; n < 2; n++) {
        const char *nm = names[n];
        if (!nm || !*nm || (n == 1 && link && !strcmp(link, alt)))
            continue;
        if (nm[0] == '/') {
            snprintf(shown, sizeof(shown), "%s%s", root, nm);
            f->inside = m->sysroot ? nm : NULL;
            if (take_debug(f, open_in_root(m, nm), id, len, shown, host))
                return 1;
            continue;
        }
        for (int sub = 0; sub < 2; sub++) {
            snprintf(p, sizeof(p), "%.*s%s/%s", dlen, mod->path, sub ? "/.debug" : "", nm);
            snprintf(shown, sizeof(shown), "%s%s", root, p);
            f->inside = m->sysroot ? p : NULL;
            if (take_debug(f, open_in_root(m, p), id, len, shown, host))
                return 1;
        }
        for (size_t i = 0; i < m->ndebug_dirs; i++) {
            const char *d = mod->path; /* "/usr/lib/x", then "/lib/x", "/x", "" */
            while (d && d <= slash) {
                snprintf(p, sizeof(p), "%.*s/%s", (int)(slash - d), d, nm);
                snprintf(shown, sizeof(shown), "%s%s", m->debug_dirs[i], p);
                char in[PATH_MAX];
                f->inside = dir_inside(m, i, p, in, sizeof(in));
                if (take_debug(f, open_in_dir(m, i, p), id, len, shown,
                               i >= m->nuser_dirs && !m->sysroot))
                    return 1;
                d = d < slash ? strchr(d + 1, '/') : NULL;
            }
        }
    }
    return 0;
}

/* The dwz alt file of a module's debug file, with a sysroot: what libdwfl's standard search would
 * do (by the alt build-id in the debug dirs, then the recorded name: absolute inside the root,
 * relative to the debug file's directory), every open inside the root and the build-id checked.
 * Returns the fd, or -1. */
static int find_alt(const struct modules *m, const struct module *mod, const char *altname,
                    char **debuginfo_file_name)
{
    struct found f = {.fd = -1};
    const char *nm = mod->alt_name ? mod->alt_name : altname;
    if (!mod->alt_id_len || !nm)
        return -1;
    if (!find_by_build_id(m, mod->alt_id, mod->alt_id_len, &f)) {
        char p[PATH_MAX], shown[PATH_MAX];
        if (nm[0] == '/')
            snprintf(p, sizeof(p), "%s", nm);
        else if (mod->debug_dir_inside)
            snprintf(p, sizeof(p), "%s/%s", mod->debug_dir_inside, nm);
        else
            return -1;
        snprintf(shown, sizeof(shown), "%s%s", m->sysroot, p);
        if (!take_debug(&f, open_in_root(m, p), mod->alt_id, mod->alt_id_len, shown, 0))
            return -1;
    }
    free(f.alt_name);
    free(f.dir_inside);
    free(*debuginfo_file_name);
    *debuginfo_file_name = f.name;
    return f.fd;
}

int modules_find_debuginfo(Dwfl_Module *dm, void **userdata, const char *modname, Dwarf_Addr base,
                           const char *file_name, const char *debuglink_file,
                           GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    struct module *mod = userdata ? *userdata : NULL;
    /* Once a module's debug file is found, a further ask is for its dwz alt file
     * (.gnu_debugaltlink), which is never cached and is left to the standard search. */
    int first = mod && !mod->debug_found;
    if (!first && mod && mod->owner && mod->owner->sysroot)
        return find_alt(mod->owner, mod, debuglink_file, debuginfo_file_name);
    if (!first || !mod->owner)
        return dwfl_standard_find_debuginfo(dm, userdata, modname, base, file_name,
                                            debuglink_file, debuglink_crc, debuginfo_file_name);
    const struct modules *m = mod->owner;
    size_t len = 0;
    const unsigned char *id = module_id(dm, mod, &len);
    struct dcache *dc = m->dcache;
    /* The cache is looked up before the search: the search hands libdwfl its own Elf of the file
     * it finds, which would win. It holds only what trusted places gave (struct found). */
    if (id && dc) {
        char *origin = NULL;
        int cfd = dcache_lookup(dc, id, len, &origin);
        if (cfd >= 0) {
            free(*debuginfo_file_name);
            *debuginfo_file_name = origin; /* reports name the file the copy was made from */
            mod->debug_found = 1;
            Elf *ce = m->sysroot ? elf_begin(cfd, ELF_C_READ_MMAP, NULL) : NULL;
            if (ce) { /* its dwz alt file is looked up by find_alt */
                struct found a = {.fd = -1};
                read_altlink(ce, &a);
                elf_end(ce);
                mod->alt_name = a.alt_name;
                memcpy(mod->alt_id, a.alt_id, sizeof(mod->alt_id));
                mod->alt_id_len = a.alt_id_len;
            }
            return cfd;
        }
    }
    /* Our own search, not libdwfl's standard one: that opens path strings (a FIFO blocks it, a
     * sysroot symlink leaves the sysroot) and ends with a debuginfod query, for which libdw
     * dlopens libdebuginfod (and libcurl, gnutls...) even with DEBUGINFOD_URLS unset. */
    struct found f = {.fd = -1};
    if ((!id || !find_by_build_id(m, id, len, &f)) &&
        !find_by_debuglink(m, mod, debuglink_file, id, id ? len : 0, &f))
        return -1;
    mod->debug_found = 1;
    mod->alt_name = f.alt_name;
    memcpy(mod->alt_id, f.alt_id, sizeof(mod->alt_id));
    mod->alt_id_len = f.alt_id_len;
    mod->debug_dir_inside = f.dir_inside;
    if (id && dc && f.trusted) {
        /* not cached: a compressed file from a build-id tree is decompressed into the cache now
         * (libdeflate, several times faster than libdw's inflate) and the copy used; one found by
         * its debug link is stored from libdw's sections at the end (modules_cache_store) */
        char *origin = NULL;
        int cfd = -1;
        if (f.name && !dcache_fill(dc, f.fd, id, len, f.name))
            cfd = dcache_lookup(dc, id, len, &origin);
        if (cfd >= 0) {
            close(f.fd);
            free(f.name);
            free(*debuginfo_file_name);
            *debuginfo_file_name = origin;
            return cfd;
        }
        mod->cache_store = f.name && f.name[0] == '/' && dcache_worth(f.fd);
    }
    free(*debuginfo_file_name);
    *debuginfo_file_name = f.name;
    return f.fd;
}

static int store_one(Dwfl_Module *dm, void **userdata, const char *name, Dwarf_Addr start,
                     void *arg)
{
    (void)name;
    (void)start;
    struct modules *m = arg;
    struct module *mod = userdata ? *userdata : NULL;
    if (!mod || !mod->cache_store)
        return DWARF_CB_OK;
    mod->cache_store = 0;
    const char *debugfile = NULL, *mainfile = NULL;
    dwfl_module_info(dm, NULL, NULL, NULL, NULL, NULL, &mainfile, &debugfile);
    if (!debugfile || (mainfile && !strcmp(mainfile, debugfile)))
        return DWARF_CB_OK;
    Dwarf_Addr bias;
    Dwarf *dw = dwfl_module_getdwarf(dm, &bias);
    Elf *e = dw ? dwarf_getelf(dw) : NULL;
    size_t len = 0;
    const unsigned char *id = module_id(dm, mod, &len);
    const void *got = NULL;
    if (e && id && dwelf_elf_gnu_build_id(e, &got) == (ssize_t)len && !memcmp(got, id, len))
        dcache_store(m->dcache, e, id, len, debugfile);
    return DWARF_CB_OK;
}

void modules_cache_store(struct modules *m, Dwfl *dwfl)
{
    if (m && m->dcache && dwfl)
        dwfl_getmodules(dwfl, store_one, m, 0);
}
