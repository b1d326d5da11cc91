/* scrub.h - mask secrets in text and in memory: the one scrubber of every bundle member (issues
 * 16 and 22; docs/capture.md, "Secrets").
 *
 * Two kinds of secrets:
 *  - known values (scrub.c): the capture collects the values it redacts by name (secret-looking
 *    environment variables, URL passwords, command-line secrets) into one `struct cp_scrub`;
 *    every frame of the core passes through cp_scrub_buf, so that a copy of a value on a stack
 *    or in a heap page is masked too;
 *  - shapes (shapes.c): text that looks like a secret wherever it comes from - a URL's password,
 *    `password=`, `--token X`, `-pSECRET` after mysql, a JWT, a webhook URL, a well-known token
 *    format (hf_, ghp_, AKIA, sk-, xoxb-, ...), a private-key block - and the configured value
 *    globs (redact_values). cp_scrub_text runs both over a text member (an output tail, an
 *    exception message, a JSON member), cp_scrub_stream over text that comes in chunks.
 * Masking keeps the length (each byte becomes '*'), so offsets, sizes and the JSON around a
 * value do not move: a double quote, a line end, a NUL and half of a backslash escape are
 * never masked. */
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
    /* for cp_scrub_text: */
    const char *globs; /* redact_values: globs (space/comma-separated) a whole word is masked
                        * by, or NULL; not owned */
    int learn;         /* add each value recognized by its shape to this set (at most
                        * CP_SCRUB_LEARN_MAX values in all), so it is hunted everywhere else */
};
#define CP_SCRUB_LEARN_MAX 128 /* each value hunted costs a pass over every buffer */

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

/* ---- shapes (shapes.c) ---- */

/* Masks every secret recognized by its shape in buf (the forms of docs/capture.md, "Secrets"),
 * the words sc->globs match, then every known value of sc (cp_scrub_buf); sc may be NULL
 * (shapes only). With sc->learn, each value found by its shape is added to sc first. Linear in
 * n. Returns the bytes masked. A text that starts with '{' or '[' is taken for JSON: a double
 * quote right after key= ends a string there, it opens no value. */
size_t cp_scrub_text(struct cp_scrub *sc, uint8_t *buf, size_t n);
/* The same for a bundle member: JSON when its name ends in .json, text otherwise (an output
 * tail whose first line is JSON is still text). */
size_t cp_scrub_member(struct cp_scrub *sc, const char *name, uint8_t *buf, size_t n);

/* cp_scrub_text(NULL, s, strlen(s)): shapes in a C string (an argument, an environment value). */
void cp_mask_secrets(char *s);

/* Text that comes in chunks (a job's output): each chunk is masked in place as it passes, with
 * bounded memory. A form cut by a chunk boundary is found again in the last CP_SHAPE_CTX raw
 * bytes of the previous chunk and the head of this one, and a secret that runs to the end of a
 * chunk goes on being masked at the start of the next. A zeroed struct is a stream at its
 * start; sc (optional) gives the globs. Known values are not hunted here (cp_scrub_text on the
 * kept text does that). */
#define CP_SHAPE_CTX 512
struct cp_scrub_stream {
    const struct cp_scrub *sc;
    uint8_t hold[CP_SHAPE_CTX]; /* the stream's last raw bytes */
    size_t hlen;
    int started, line_ctx;
    struct cp_scrub_open {
        uint8_t kind, cls, q, esc;
    } open; /* a match that ran to the end of the last chunk */
};
size_t cp_scrub_stream(struct cp_scrub_stream *st, uint8_t *buf, size_t n);
#endif
