/* test_symtab.c - analyze/native/symtab.c against libdwfl itself, on the real libraries of this process.
 *
 * The process reports its own modules (itself, libc with libc6-dbg's full symbol table when it is
 * installed, libdw, libelf, libstdc++, libxml2, ...) and, for a sample of every module's symbols,
 * asks both symtab_addrinfo and dwfl_module_addrinfo about the addresses around each symbol (one
 * before, the start, the middle, the last byte, one past the end) and about every 8191st byte of
 * the module: the name, offset and symbol must be the same. symtab_function must give the lowest
 * address of a function symbol of that name, found here by a plain walk over the table. The test
 * also checks that most answers came from the table (not handed on to libdwfl, which would make
 * the comparison hollow).
 *
 * Real libraries seldom have the cases where libdwfl's preferences matter (a local symbol inside a
 * global one, a weak alias longer than its global, labels without a size), so a small shared
 * object made here with cc from assembly has them all, and every byte of it is compared.
 */
#include "symtab.h"

#include <dlfcn.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails;
static size_t compared;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);                           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

static void compare(Dwfl_Module *m, const char *mname, GElf_Addr a)
{
    GElf_Off o1 = 0, o2 = 0;
    GElf_Sym s1, s2;
    memset(&s1, 0, sizeof(s1));
    memset(&s2, 0, sizeof(s2));
    const char *n1 = symtab_addrinfo(m, a, &o1, &s1);
    const char *n2 = dwfl_module_addrinfo(m, a, &o2, &s2, NULL, NULL, NULL);
    compared++;
    if (!n1 || !n2) {
        CHECK(!n1 && !n2, "%s %#lx: %s vs libdwfl %s", mname, (unsigned long)a, n1 ? n1 : "(none)",
              n2 ? n2 : "(none)");
        return;
    }
    CHECK(!strcmp(n1, n2) && o1 == o2 && s1.st_value == s2.st_value && s1.st_size == s2.st_size &&
              s1.st_info == s2.st_info && s1.st_shndx == s2.st_shndx,
          "%s %#lx: %s+%#lx vs libdwfl %s+%#lx", mname, (unsigned long)a, n1, (unsigned long)o1, n2,
          (unsigned long)o2);
}

/* The lowest address of a function symbol named exactly `name` (before any '@'). */
static uint64_t function_by_walk(Dwfl_Module *m, const char *name)
{
    int n = dwfl_module_getsymtab(m);
    size_t len = strlen(name);
    uint64_t best = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr v = 0;
        const char *s = dwfl_module_getsym_info(m, i, &sym, &v, NULL, NULL, NULL);
        if (!s || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || !v)
            continue;
        const char *at = strchr(s, '@');
        size_t l = at ? (size_t)(at - s) : strlen(s);
        if (l == len && !memcmp(s, name, len) && (!best || v < best))
            best = v;
    }
    return best;
}

static int per_module(Dwfl_Module *m, void **user, const char *mname, Dwarf_Addr low, void *arg)
{
    (void)user;
    int *nmods = arg;
    Dwarf_Addr high = 0;
    dwfl_module_info(m, NULL, NULL, &high, NULL, NULL, NULL, NULL);
    int n = dwfl_module_getsymtab(m);
    if (n <= 1)
        return DWARF_CB_OK;
    (*nmods)++;
    int step = n > 1000 ? n / 1000 : 1;
    size_t funcs = 0;
    for (int i = 1; i < n; i += step) {
        GElf_Sym sym;
        GElf_Addr v = 0;
        const char *s = dwfl_module_getsym_info(m, i, &sym, &v, NULL, NULL, NULL);
        if (!s || sym.st_shndx == SHN_UNDEF || !v)
            continue;
        GElf_Addr pts[5] = {v - 1, v, v + sym.st_size / 2, v + (sym.st_size ? sym.st_size - 1 : 0),
                            v + sym.st_size};
        for (int k = 0; k < 5; k++)
            compare(m, mname, pts[k]);
        if (GELF_ST_TYPE(sym.st_info) == STT_FUNC && s[0] && funcs++ < 200) {
            char name[512];
            const char *at = strchr(s, '@');
            size_t l = at ? (size_t)(at - s) : strlen(s);
            if (l < sizeof(name)) {
                memcpy(name, s, l);
                name[l] = 0;
                uint64_t want = function_by_walk(m, name), got = symtab_function(m, name);
                CHECK(got == want, "%s function %s: %#lx, walk %#lx", mname, name, (unsigned long)got,
                      (unsigned long)want);
            }
        }
    }
    for (GElf_Addr a = low; a < high; a += 8191)
        compare(m, mname, a);
    CHECK(symtab_function(m, "no such function, surely") == 0, "%s: a made-up name found", mname);
    return DWARF_CB_OK;
}

/* Symbols over one 0x700-byte function body F: nested local L and global G, a weak alias W longer
 * than F, labels without a size (H after everything, N exactly inside a local M), a weak and a
 * global of the same start and size (X, Y), a longer weak Z with a shorter global Z2, and weak
 * symbols inside F (V1-V3: libdwfl keeps the global F, it binds more strongly). */
static const char synthetic_asm[] =
    "\t.text\n\t.globl F\n\t.type F,@function\nF:\t.skip 0x700, 0x90\n\t.size F, 0x100\n"
    "\t.type L,@function\n\t.set L, F+0x20\n\t.size L, 0x10\n"
    "\t.weak W\n\t.type W,@function\n\t.set W, F\n\t.size W, 0x200\n"
    "\t.globl G\n\t.type G,@function\n\t.set G, F+0x80\n\t.size G, 0x20\n"
    "\t.globl H\n\t.set H, F+0x300\n\t.size H, 0\n"
    "\t.type M,@function\n\t.set M, F+0x400\n\t.size M, 0x40\n"
    "\t.globl N\n\t.set N, F+0x410\n\t.size N, 0\n"
    "\t.weak X\n\t.type X,@function\n\t.set X, F+0x500\n\t.size X, 0x10\n"
    "\t.globl Y\n\t.type Y,@function\n\t.set Y, F+0x500\n\t.size Y, 0x10\n"
    "\t.weak Z\n\t.type Z,@function\n\t.set Z, F+0x600\n\t.size Z, 0x40\n"
    "\t.globl Z2\n\t.type Z2,@function\n\t.set Z2, F+0x600\n\t.size Z2, 0x20\n"
    "\t.weak V1\n\t.type V1,@function\n\t.set V1, F+0x30\n\t.size V1, 0x10\n"
    "\t.weak V2\n\t.type V2,@function\n\t.set V2, F+0x40\n\t.size V2, 0x10\n"
    "\t.weak V3\n\t.type V3,@function\n\t.set V3, F+0x50\n\t.size V3, 0x10\n";

static void synthetic(void)
{
    char dir[] = "/tmp/test_symtab.XXXXXX", src[64], so[64], cmd[256];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    snprintf(src, sizeof(src), "%s/s.s", dir);
    snprintf(so, sizeof(so), "%s/s.so", dir);
    FILE *f = fopen(src, "w");
    if (f) {
        fputs(synthetic_asm, f);
        fclose(f);
    }
    snprintf(cmd, sizeof(cmd), "cc -shared -nostdlib -o %s %s", so, src);
    CHECK(f && system(cmd) == 0, "cannot build the synthetic object with cc");
    static char *no_path = NULL;
    Dwfl_Callbacks cb = {.find_elf = dwfl_build_id_find_elf,
                         .find_debuginfo = dwfl_standard_find_debuginfo,
                         .debuginfo_path = &no_path};
    Dwfl *dwfl = dwfl_begin(&cb);
    Dwfl_Module *m = dwfl ? dwfl_report_offline(dwfl, "synthetic", so, -1) : NULL;
    CHECK(m != NULL, "cannot report %s: %s", so, dwfl_errmsg(-1));
    if (m && dwfl_report_end(dwfl, NULL, NULL) == 0) {
        uint64_t fa = symtab_function(m, "F");
        CHECK(fa != 0, "no F in the synthetic object");
        size_t before = compared;
        for (uint64_t a = fa - 16; fa && a < fa + 0x710; a++)
            compare(m, "synthetic", a);
        CHECK(compared - before == 0x720, "compared %zu", compared - before);
        CHECK(symtab_function(m, "Z2") == fa + 0x600, "Z2 at %#lx", (unsigned long)symtab_function(m, "Z2"));
    }
    symtab_forget();
    dwfl_end(dwfl);
    unlink(src);
    unlink(so);
    rmdir(dir);
}

int main(void)
{
    synthetic();
    /* more modules than the test links with: C++ names, a big table */
    const char *extra[] = {"libstdc++.so.6", "libxml2.so.2", "libsqlite3.so.0"};
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
        if (!dlopen(extra[i], RTLD_NOW | RTLD_LOCAL))
            fprintf(stderr, "note: %s not loaded (%s)\n", extra[i], dlerror());
    char *debuginfo_path = NULL;
    Dwfl_Callbacks cb = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl *dwfl = dwfl_begin(&cb);
    if (!dwfl || dwfl_linux_proc_report(dwfl, getpid()) || dwfl_report_end(dwfl, NULL, NULL)) {
        fprintf(stderr, "FAIL: cannot report this process's modules: %s\n", dwfl_errmsg(-1));
        return 1;
    }
    int nmods = 0;
    dwfl_getmodules(dwfl, per_module, &nmods, 0);
    size_t answered = 0, passed_on = 0;
    symtab_counts(&answered, &passed_on);
    symtab_forget();
    dwfl_end(dwfl);
    printf("%d modules, %zu addresses compared: %zu answered from the table, %zu by libdwfl\n",
           nmods, compared, answered, passed_on);
    CHECK(nmods >= 4, "only %d modules with symbols", nmods);
    CHECK(compared >= 10000, "only %zu addresses", compared);
    CHECK(answered > passed_on, "%zu answered, %zu passed on", answered, passed_on);
    if (fails)
        fprintf(stderr, "%d failures\n", fails);
    return fails ? 1 : 0;
}
