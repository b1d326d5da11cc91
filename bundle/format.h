/* format.h - the bundle format's shared definitions, written once for both ends
 * (docs/bundle-format.md): the writer pieces the handler links (bundlew.c, tarw.c, coreelf.c) and
 * the readers (bundle.c, analyze/native/core.c) include this header and define none of it again.
 *
 *   - zstd skippable frames: the member marker and the index, and the range of skippable magics
 *     a reader walking the frames steps over;
 *   - the index: its trailer (the file's last 12 bytes: the index JSON's length, u32
 *     little-endian, then BUNDLE_INDEX_TRAILER) and its `format` string;
 *   - tar framing: the block size and padding;
 *   - the ELF core notes: one note record and one walk over a note segment, used by the handler
 *     (over the core stream's prefix) and by the reader (over the core's header copy, and over
 *     build-id notes read from memory).
 *
 * libc only: the handler links it (capture/README.md). */
#ifndef CRASHPACK_FORMAT_H
#define CRASHPACK_FORMAT_H
#include <stddef.h>
#include <stdint.h>

/* ---- zstd skippable frames: magic (u32 LE), payload length (u32 LE), payload ---- */
#define BUNDLE_MAGIC_SKIP_MIN 0x184D2A50u /* every zstd skippable frame: 0x184D2A50..5F */
#define BUNDLE_MAGIC_SKIP_MAX 0x184D2A5Fu
#define BUNDLE_MAGIC_MARKER 0x184D2A51u /* member marker: {"member","size","header","data"} */
#define BUNDLE_MAGIC_INDEX 0x184D2A5Eu  /* the index, the last frame of a complete bundle */
#define BUNDLE_SKIP_HEADER 8u           /* magic + payload length */

/* ---- the index ---- */
#define BUNDLE_INDEX_TRAILER "CPKIDX01" /* the file's last 8 bytes, after the index's length */
#define BUNDLE_INDEX_TRAILER_LEN 8u
#define BUNDLE_INDEX_FORMAT "crashpack-index/1" /* the index JSON's "format" */

/* ---- tar framing (POSIX ustar, pax `x` records for large sizes) ---- */
#define TAR_BLOCK 512
/* Zero bytes after `size` data bytes up to the next block boundary. */
static inline uint64_t tar_padding(uint64_t size)
{
    return (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK;
}
/* `size` rounded up to whole blocks. */
static inline uint64_t tar_blocks_bytes(uint64_t size)
{
    return size + tar_padding(size);
}

/* ---- ELF core notes (4-byte aligned note format: namesz, descsz, type, name, desc) ---- */
struct core_note {
    uint32_t type;
    const char *name; /* not NUL-terminated when namesz is wrong: use namesz */
    uint32_t namesz;
    const unsigned char *desc;
    uint32_t descsz;
};
/* Iterates the notes in buf[0..len) (a PT_NOTE segment, or a build-id note read from memory):
 * returns 1 with the note at *pos and moves *pos past it, 0 at the end or at the first malformed
 * note (sizes that run past len). Fields are read with memcpy: buf needs no alignment. Every byte
 * is hostile; nothing past buf + len is read. */
int core_note_next(const unsigned char *buf, size_t len, size_t *pos, struct core_note *out);
#endif
