/* outfile.h - writing an output file where another user may have planted a link (/tmp, a shared
 * directory): the content goes to a new temporary beside the path (O_CREAT | O_EXCL |
 * O_NOFOLLOW), and replaces the path by rename(2) once it is complete. The path itself is never
 * opened, so a symlink there is replaced, never followed, and a reader never sees half a file.
 * In a sticky directory (/tmp) rename refuses to replace another user's file. libc only. */
#ifndef CRASHPACK_OUTFILE_H
#define CRASHPACK_OUTFILE_H

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>

struct cp_outfile {
    FILE *f;
    char tmp[PATH_MAX], path[PATH_MAX];
};

/* Opens the temporary of path (mode: the new file's, before the umask; root's outputs are 0600
 * whatever mode says: they may hold what a crash held). 0, or -1 with errno. */
int cp_outfile_open(struct cp_outfile *o, const char *path, mode_t mode);
/* Flushes, syncs and closes the temporary, then renames it to the path. 0, or -1 with errno (the
 * temporary is removed). */
int cp_outfile_commit(struct cp_outfile *o);
/* Removes the temporary (a failed write). */
void cp_outfile_abort(struct cp_outfile *o);

#endif
