/* snap_python.c - see snap_python.h. */
#include "snap_python.h"

#include "python.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PAGE 4096ULL
#define MAX_PAGES 65536u /* 256 MiB: a hostile process cannot make the core unbounded */

int snap_python_module(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

/* _PyRuntime (symbol, else the .PyRuntime section) and Py_Version, unrelocated; 0 when absent */
static int find_runtime(Elf *e, uint64_t *runtime, uint64_t *version)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx))
        return -1;
    uint64_t section = 0;
    for (int pass = 0; pass < 2; pass++) {
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(e, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh))
                continue;
            const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
            if (pass == 0 && nm && !strcmp(nm, ".PyRuntime") && sh.sh_addr)
                section = sh.sh_addr;
            if (sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) || !sh.sh_entsize)
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
            for (size_t i = 0; i < n && !(*runtime && *version); i++) {
                GElf_Sym s;
                if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
                    continue;
                const char *sn = elf_strptr(e, sh.sh_link, s.st_name);
                if (!sn)
                    continue;
                if (!*runtime && !strcmp(sn, "_PyRuntime"))
                    *runtime = s.st_value;
                else if (!*version && !strcmp(sn, "Py_Version"))
                    *version = s.st_value;
            }
        }
    }
    if (!*runtime)
        *runtime = section;
    return *runtime ? 0 : -1;
}

struct reader {
    int memfd;
    snap_page_fn page;
    void *ctx;
    uint64_t last;   /* the last page reported (+1), to skip repeats */
    unsigned pages;
};

static int mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    struct reader *r = ctx;
    if (!len || addr + len < addr || (off_t)addr < 0 ||
        pread(r->memfd, buf, len, (off_t)addr) != (ssize_t)len)
        return -1;
    for (uint64_t p = addr & ~(PAGE - 1); p < addr + len && r->pages < MAX_PAGES; p += PAGE) {
        if (p + 1 == r->last)
            continue;
        r->page(r->ctx, p);
        r->last = p + 1;
        r->pages++;
    }
    return 0;
}

uint64_t snap_load_bias(Elf *e, uint64_t base)
{
    GElf_Ehdr eh;
    if (!gelf_getehdr(e, &eh) || eh.e_type != ET_DYN)
        return 0;
    size_t phn = 0;
    elf_getphdrnum(e, &phn);
    uint64_t minv = UINT64_MAX;
    for (size_t i = 0; i < phn; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < minv)
            minv = ph.p_vaddr;
    }
    return base - (minv == UINT64_MAX ? 0 : (minv & ~(PAGE - 1)));
}

int snap_python_pages(int elffd, int memfd, const char *module, uint64_t base, snap_page_fn page,
                      void *ctx, int locals)
{
    if (elffd < 0)
        return -1;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(elffd, ELF_C_READ, NULL);
    GElf_Ehdr eh;
    uint64_t runtime = 0, version = 0, bias = 0;
    int rc = -1;
    if (e && gelf_getehdr(e, &eh)) {
        rc = 0;
        bias = snap_load_bias(e, base);
        if (find_runtime(e, &runtime, &version))
            runtime = 0;
    }
    if (e)
        elf_end(e);
    if (!runtime)
        return rc;
    struct reader r = {.memfd = memfd, .page = page, .ctx = ctx};
    struct py_state st;
    memset(&st, 0, sizeof(st));
    st.gil_locked = -1;
    st.present = 1;
    st.want_locals = locals;
    st.runtime = runtime + bias;
    st.runtime_source = "symbol";
    snprintf(st.module, sizeof(st.module), "%s", module);
    python_walk(mem_read, &r, module, version ? version + bias : 0, &st);
    python_free(&st);
    return (int)r.pages;
}
