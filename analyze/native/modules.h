/* modules.h - the ELF modules (executable, shared libraries, vdso) of a core, and their files.
 *
 * modules_build() derives the module list from the core alone: NT_FILE mappings grouped per file
 * (a module starts at the mapping of file offset 0 and spans the consecutive mappings of the same
 * path), the build-id and load bias from the core's copy of each module's first page (the kernel
 * dumps the ELF header page of every mapped ELF file), and the vdso image from NT_AUXV's
 * AT_SYSINFO_EHDR. So with no binaries at all every address still resolves to a module, a build-id
 * and an offset.
 *
 * Files are found lazily, through libdwfl's find_elf callback (modules_find_elf): the path in the
 * core (under --sysroot when one is given, and then only there), then `.build-id/NN/REST` and
 * `.build-id/NN/REST.debug` under each debug directory (--debug-dir, then SYSROOT/usr/lib/debug).
 * A file whose build-id differs from the core's is rejected and the reason kept in the module.
 * Separate debuginfo (.build-id trees, then .gnu_debuglink candidates) is searched here too
 * (modules_find_debuginfo), not by libdwfl's path-string search.
 *
 * Paths in the core, a --sysroot and a --debug-dir are hostile: only absolute core paths without
 * `..` components are looked up; under a sysroot every open is openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS) from the sysroot's fd (a symlink to /etc/shadow resolves to
 * SYSROOT/etc/shadow), under a --debug-dir openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS); only
 * regular files are used (O_NONBLOCK and fstat: a FIFO or device never blocks); every candidate's
 * build-id is checked against the module's. libdwfl gets the fd, never a path to open. Only debug
 * files found outside a sysroot and outside every --debug-dir are written to the shared cache
 * (dcache.h): a hostile --debug-dir cannot change a later run's output.
 *
 * Ownership: struct modules and its modules are owned by the caller (modules_free). The strings in
 * a module are owned by it. The library never prints or exits.
 */
#ifndef CRASHPACK_MODULES_H
#define CRASHPACK_MODULES_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

struct core;

#define MODULES_MAX_BUILD_ID 64u

struct modules;

struct module {
    char *name;        /* as the core recorded it (" (deleted)" kept), "[vdso]" for the vdso */
    char *path;        /* the path to look up: name without " (deleted)"; NULL for the vdso */
    uint64_t start, end; /* address range: start maps file offset 0 */
    int exec;          /* one of its segments is executable */
    int deleted;       /* the file was deleted while mapped */
    unsigned char build_id[MODULES_MAX_BUILD_ID];
    size_t build_id_len; /* 0: not known from the core */
    uint64_t bias;     /* load bias (address - ELF vaddr), when bias_known */
    int bias_known;
    unsigned char *image; /* a module wholly in the core (the vdso): its bytes */
    size_t image_len;
    char *found_at;    /* the file libdwfl uses for it, NULL when none */
    int debug_only;    /* found_at is a separate debug file (symbols, no code or CFI) */
    char *problem;     /* why no file, or what is wrong with it; NULL when fine */
    int looked_up;
    int cache_store; /* its debug file is compressed and not cached yet: store it (dcache.h) */
    int debug_found; /* its debug file was found (later asks are for a dwz alt file) */
    /* the debug file's .gnu_debugaltlink (dwz): the alt file's name and build-id, and the
     * directory the debug file was found in inside the sysroot ("" when not there); with a
     * sysroot the alt file is looked up by modules.c itself, never by libdwfl's path search */
    char *alt_name;
    unsigned char alt_id[MODULES_MAX_BUILD_ID];
    size_t alt_id_len;
    char *debug_dir_inside;
    const struct modules *owner; /* private */
};

struct modules_opts {
    const char *sysroot;           /* NULL: the paths as they are */
    /* > 2: an open directory standing for sysroot (`crashpack enrich --root-fd`: the crashed
     * process's /proc/PID/root), duplicated instead of opening sysroot by its name, which then
     * only names files in messages. Every file is opened inside it (RESOLVE_IN_ROOT), so the
     * analysis needs no open by path (enrich forbids them: seccomp). 0: none. */
    int root_fd;
    const char *const *debug_dirs; /* searched before SYSROOT/usr/lib/debug */
    size_t ndebug_dirs;
};

struct modules {
    struct module *v; /* sorted by start, non-overlapping */
    size_t n;
    char *sysroot;
    char **debug_dirs; /* the user's, then the default */
    size_t ndebug_dirs;
    char *debuginfo_path; /* for Dwfl_Callbacks.debuginfo_path */
    /* where files are opened (modules.c, open_under): the sysroot's fd (RESOLVE_IN_ROOT: a
     * symlink in it resolves inside it), -1 without one (host paths); each debug dir's fd
     * (--debug-dir: RESOLVE_BENEATH; the default dir: in the sysroot, or the host's own) */
    int rootfd;
    int *dir_fd;
    int *dir_resolve;        /* per debug dir: RESOLVE_* flags, 0: a plain openat (host default) */
    const char **dir_prefix; /* per debug dir: prefixed to the relative path ("" or usr/lib/debug/) */
    size_t nuser_dirs;       /* the first nuser_dirs debug dirs are the user's (--debug-dir) */
    struct dcache *dcache; /* decompressed-debuginfo cache (dcache.h); NULL: none. Not owned */
};

int modules_build(struct core *c, const struct modules_opts *o, struct modules **out, char *err,
                  size_t errlen);
void modules_free(struct modules *m);

/* The module containing addr, or NULL. */
const struct module *modules_at(const struct modules *m, uint64_t addr);

/* Reports every module to dwfl (between dwfl_report_begin and dwfl_report_end) and sets each
 * Dwfl_Module's userdata to its struct module. Returns 0, or -1 with a message. */
int modules_report(struct modules *m, Dwfl *dwfl, char *err, size_t errlen);

/* Dwfl_Callbacks.find_elf: looks the module's file up as described above. */
int modules_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                     char **file_name, Elf **elfp);

/* Lowercase hex of a module's build-id into buf (empty when unknown). */
const char *modules_build_id_hex(const struct module *mod, char *buf, size_t len);

/* Dwfl_Callbacks.find_debuginfo: when the module's owner has a cache (dcache.h) and it holds the
 * module's build-id, the cached decompressed copy (the name given is the file it was made from);
 * else this file's own search (build-id trees, then .gnu_debuglink candidates, opened as the
 * header comment says, build-id checked), and a compressed file found in a trusted place (not
 * under a sysroot or a --debug-dir) is cached now (build-id tree) or marked for
 * modules_cache_store() (debug link). A dwz alt file is looked up by libdwfl's standard search. */
int modules_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                           const char *file_name, const char *debuglink_file,
                           GElf_Word debuglink_crc, char **debuginfo_file_name);

/* Stores the decompressed debug files of the modules marked by modules_find_debuginfo whose DWARF
 * libdw has opened. Call before dwfl_end(). */
void modules_cache_store(struct modules *m, Dwfl *dwfl);

#endif
