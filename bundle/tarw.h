/* tarw.h - POSIX tar header blocks (ustar, plus a pax `x` record for sizes >= 8 GiB). */
#ifndef CRASHPACK_TARW_H
#define CRASHPACK_TARW_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "format.h" /* TAR_BLOCK, tar_padding */

#define TAR_HDR_MAX (3 * TAR_BLOCK)

/* Writes the header block(s) for a regular member into out (TAR_HDR_MAX bytes).
 * Returns the number of bytes written (512 or 1536), or -1 when the name does not fit. */
int tar_header(uint8_t *out, const char *name, uint64_t size, time_t mtime, unsigned mode);
#endif
