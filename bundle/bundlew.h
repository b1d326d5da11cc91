/* bundlew.h - write a bundle: tar members as zstd frames, member markers, and the closing index
 * (format in docs/bundle-format.md).
 *
 * A `struct bw` tracks the file offset, the tar offset and, per member, the list of frames, so
 * that `bw_finish` can write the index. Salvage rebuilds the same state by walking an existing
 * file (bw_adopt). Write errors are sticky: after the first one every call fails, and `err`
 * holds the errno. */
#ifndef CRASHPACK_BUNDLEW_H
#define CRASHPACK_BUNDLEW_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <zstd.h>

#include "format.h" /* the magics, the index trailer, tar framing */

struct cp_scrub;


struct bw_frame {
    uint64_t file_off, csize, tar_off, usize;
};

struct bw_member {
    char name[100];
    uint64_t size, header, data; /* tar offsets */
    uint64_t written;            /* data bytes written so far */
    uint64_t marker_off;         /* file offset of the member's marker */
    struct bw_frame *frames;
    size_t nframes, cap;
};

struct bw {
    int fd;
    uint64_t file_off, tar_off;
    int level;
    time_t mtime;
    ZSTD_CCtx *cctx;
    struct bw_member *members;
    size_t nmembers, cap;
    int open_member; /* index of the streaming member, or -1 */
    int err;
    /* Optional disk guard for whole members (bw_add): asked with the bytes a member would add
     * to the file; 0 refuses it. A refusal leaves the file unchanged and is not sticky: err is
     * ENOSPC until the next call, and a later, smaller member may still fit. */
    int (*room)(void *arg, uint64_t bytes);
    void *room_arg;
    int err_soft; /* err is a refusal of `room`, cleared by the next call */
    /* secrets masked in every whole member bw_add stores (cp_scrub_member: by their shape, the
     * configured globs, the known values; common/scrub.h), or NULL; the streamed core is masked
     * frame by frame by its writer (capture/stream.c) */
    struct cp_scrub *scrub;
};

int bw_init(struct bw *w, int fd, int level, time_t mtime);
void bw_free(struct bw *w);

/* A whole small member: marker + one frame with header, data and padding (secrets masked when
 * `scrub` is set). */
int bw_add(struct bw *w, const char *name, const void *data, size_t len);

/* A streamed member of known size: marker + header frame now, then data through
 * bw_frame_raw (precompressed independent frames) or bw_data, then bw_end. */
int bw_begin(struct bw *w, const char *name, uint64_t size);
int bw_frame_raw(struct bw *w, const void *cdata, size_t csize, uint64_t usize);
int bw_data(struct bw *w, const void *data, size_t len);
/* Pads the open member with zeros up to its declared size (frames of frame_size), then closes it
 * with the tar padding. Returns the number of zero bytes added, or -1. */
int64_t bw_end(struct bw *w, uint64_t frame_size);

/* Tar end blocks + index. The file is complete afterwards (not yet fsynced). */
int bw_finish(struct bw *w);

/* Rebuild writer state from an existing bundle file by walking its frames; the file is cut
 * after the last complete frame. Fills *why on failure. */
int bw_adopt(struct bw *w, int fd, int level, time_t mtime, char *why, size_t whylen);

/* Removes the last member from the file (cut back to its marker). */
int bw_drop_last(struct bw *w);

/* Reads a small, complete member written as one frame (e.g. capture.json) into a malloc'd,
 * NUL-terminated buffer; NULL if it is absent, cut or larger than max. */
char *bw_read_small(struct bw *w, const char *name, size_t max);

/* Compress `len` bytes into one independent frame with content size and checksum.
 * Returns the compressed size or 0 on error. `dst` must hold ZSTD_compressBound(len). */
size_t bw_compress_frame(ZSTD_CCtx *cctx, int level, void *dst, size_t dstcap, const void *src,
                         size_t len);

/* The same for a core frame, with its first blocks small: a reader decodes whole blocks (up to
 * 128 KiB each) from a frame's start, and what it wants first sits near a frame's start (an ELF
 * header at a segment start, a thread's stack top a page above a cut; see core_frame_cuts). The
 * frame is flushed after 4 KiB and after 32 KiB, which ends a block there; the window carries on,
 * so compression barely changes. 0 on error. */
size_t bw_compress_frame_staged(ZSTD_CCtx *cctx, int level, void *dst, size_t dstcap,
                                const void *src, size_t len);
#endif
