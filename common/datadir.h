/* datadir.h - where crashpack's data files live (signature lists, Xid catalogue, built-in rules).
 *
 * The data root holds `rules/...`. It is, first match wins:
 *   1. $CRASHPACK_DATA_DIR (tests, relocated installs);
 *   2. <directory of the running executable>/../share/crashpack (an installed crashpack);
 *   3. the source tree the binary was built from (CRASHPACK_SOURCE_DIR, set by CMake), so a build
 *      tree works without installing.
 * A candidate counts only when it has a `rules` directory. Never prints or exits.
 */
#ifndef CRASHPACK_DATADIR_H
#define CRASHPACK_DATADIR_H
#include <stddef.h>

/* The data root, or NULL when none of the candidates exists. The string is static. */
const char *cp_datadir(void);

/* Joins the data root and a relative path ("rules/signature/skip.txt") into buf. Returns buf, or
 * NULL (with errbuf saying which places were tried) when there is no data root. */
char *cp_datapath(const char *rel, char *buf, size_t len, char *errbuf, size_t errlen);

/* Reads the data file `rel` (cp_datapath) whole into a malloc()ed, NUL-terminated buffer sized to
 * the file (not to max: a 4 MiB buffer for a 20 KiB file is 4 MiB of fresh memory), and its full
 * path into path (for the caller's own messages). NULL with err set ("<path>: over the size
 * limit", "<path>: No such file...") when it cannot. what names the file in the errors about
 * the data root ("log patterns"). */
char *cp_data_read(const char *rel, const char *what, size_t max, size_t *len, char *path,
                   size_t pathlen, char *err, size_t errlen);

/* Directory holding the crashpack executables (resolved from /proc/self/exe); static, NULL when
 * unknown. */
const char *cp_bindir(void);

#endif
