/* dcache.h - a per-user cache of separate debuginfo files with their DWARF sections decompressed.
 *
 * Debian's -dbg and -dbgsym files compress their DWARF (SHF_COMPRESSED, zlib). libdw inflates every
 * debug section of such a file when it first needs one, which for libc6-dbg is ~10 MiB of output
 * and most of an analysis's time. The cache keeps, per build-id, a copy of the debug file with
 * those sections stored plain, so that libdw maps it and inflates nothing on the next analysis.
 *
 * Layout: DIR/<build-id hex>.debug, written as DIR/.tmp.<pid>.<hex> then renamed (a reader sees a
 * whole file or none). DIR is created 0700 and used only when it is a directory owned by the
 * effective uid and not writable by group or others; every open is O_NOFOLLOW below that fd.
 * A lookup checks the cached file's build-id note against the one asked for and drops a file
 * that does not match (or has no origin section). The directory is kept under a size limit
 * (dcache_max_bytes: $CRASHPACK_CACHE_MAX, default DCACHE_MAX_BYTES) by removing the files used
 * longest ago (a hit touches the file's mtime) after each store.
 *
 * What goes in comes from local debug files matched by build-id, never from the bundle (the bundle
 * only chooses which build-id is looked up, as hex), and only from trusted places: never from a
 * --sysroot or a --debug-dir (modules.c, struct found), so a hostile directory given to one run
 * cannot change a later run's output.
 * The library never prints or exits.
 */
#ifndef CRASHPACK_DCACHE_H
#define CRASHPACK_DCACHE_H

#include <libelf.h>
#include <stddef.h>

#define DCACHE_MAX_BYTES (512ull << 20)

struct dcache;

/* The cache's size limit in bytes: $CRASHPACK_CACHE_MAX (a number with an optional K, M or G
 * suffix; 0 keeps nothing), else DCACHE_MAX_BYTES (also when the variable is malformed). */
unsigned long long dcache_max_bytes(void);

/* The default directory: $CRASHPACK_CACHE_DIR (empty or "off": no cache), else
 * $XDG_CACHE_HOME/crashpack, else $HOME/.cache/crashpack; then "/debuginfo". Returns 0, or -1
 * when there is none (disabled, or no absolute base). */
int dcache_default_dir(char *buf, size_t len);

/* Opens (creating it and its parents 0700) the cache in `dir`; NULL when it cannot be used. */
struct dcache *dcache_open(const char *dir);
void dcache_close(struct dcache *c);

/* A read-only fd of the cached file for this build-id, or -1 (not cached, or not valid). On
 * success *origin is the path of the debug file it was made from (malloc()ed, the caller's). */
int dcache_lookup(struct dcache *c, const unsigned char *id, size_t len, char **origin);

/* Makes the cached copy of the debug file open on fd (its build-id must be `id`; it must have a
 * compressed section, else nothing is stored) by decompressing its zlib sections with libdeflate (several times faster than the zlib inflate libdw
 * would do). 0 on success (dcache_lookup() then finds it), -1 when nothing was stored. */
int dcache_fill(struct dcache *c, int fd, const unsigned char *id, size_t len, const char *origin);

/* 1 when the ELF file open on fd has a compressed section (worth caching), else 0. */
int dcache_worth(int fd);

/* Stores a copy of `debug` (an ELF whose compressed sections libdw has decompressed in memory)
 * under the build-id, recording `origin` (the debug file's absolute path) in a section
 * ".crashpack.origin". 0 on success, -1 when nothing was stored. */
int dcache_store(struct dcache *c, Elf *debug, const unsigned char *id, size_t len,
                 const char *origin);

#endif
