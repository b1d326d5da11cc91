/* scrub.h - overwrite known secret values wherever their bytes appear (issue 16, item 4).
 *
 * The capture collects the values it redacts by name (secret-looking environment variables,
 * URL passwords, command-line secrets) into one `struct cp_scrub`; every member the bundle
 * writer stores and every frame of the core pass through cp_scrub_buf, so that a copy of a
 * value on a stack, in a heap page, in an output tail or in an exception message is masked
 * too. Masking keeps the length (each byte becomes '*'), so offsets and sizes do not move.
 * Any member that carries process text (a later Python hook's exception text) calls it too. */
#ifndef CRASHPACK_SCRUB_H
#define CRASHPACK_SCRUB_H
#include <stddef.h>
#include <stdint.h>

/* Values shorter than this are masked where they were found by name but not hunted elsewhere:
 * "true", "none", "1234" would hit unrelated bytes (and break JSON). */
#define CP_SCRUB_MIN 6
/* A value cut by a buffer boundary: a trailing prefix this long is masked on suspicion. */
#define CP_SCRUB_EDGE_MIN 4
#define CP_SCRUB_MAXLEN 4096 /* longer values are hunted by their first 4096 bytes */

struct cp_scrub {
    struct cp_secret {
        uint8_t *v;
        size_t len;
    } *s;
    size_t n;
    size_t maxlen; /* the longest value: how much of a previous buffer a seam check needs */
};

/* Adds a value (copied). Values under CP_SCRUB_MIN bytes, absolute paths (names of files, not
 * secrets) and duplicates are ignored. 0, or -1 out of memory. */
int cp_scrub_add(struct cp_scrub *sc, const void *v, size_t len);
void cp_scrub_free(struct cp_scrub *sc);

/* Masks every whole occurrence of every value in buf, and a trailing partial one (a prefix of a
 * value of at least CP_SCRUB_EDGE_MIN bytes at the very end, which may continue in the next
 * buffer). Returns the bytes masked. */
size_t cp_scrub_buf(const struct cp_scrub *sc, uint8_t *buf, size_t n);

/* Seams: `prev` holds the last `plen` bytes (as they were before masking) of the buffer that
 * came before `buf` in the same stream. Masks the part in buf of every occurrence that begins
 * in prev and ends in buf. Returns the bytes masked. */
size_t cp_scrub_seam(const struct cp_scrub *sc, const uint8_t *prev, size_t plen, uint8_t *buf,
                     size_t n);
#endif
