/* bundle.h - reading a crashpack bundle (docs/bundle-format.md) without trusting a byte of it.
 *
 * A bundle is opened through the index at its end (a zstd skippable frame); when the index is
 * missing or fails validation (a bundle cut short, or garbage), the reader walks the frames from
 * the start instead, using the member markers, and builds the same member table: every member
 * before the cut is readable, the member that was cut is reported as truncated with the bytes
 * available.
 *
 * Member data is read on demand: bundle_read() decompresses only the frames that overlap the
 * requested range (one frame of a few MiB for a page of a core) and caches the last frame.
 *
 * Every value in the file is hostile. Limits: at most BUNDLE_MAX_MEMBERS members and
 * BUNDLE_MAX_FRAMES frames, at most BUNDLE_MAX_FRAME_SIZE decompressed bytes per frame (larger
 * frames are refused, never allocated), an index of at most BUNDLE_MAX_INDEX bytes. A frame's
 * header is checked against the table before it is decompressed and the decompressed size must
 * match.
 *
 * The library never prints and never exits. Functions return BUNDLE_OK (0) or a negative
 * enum bundle_err; bundle_open() writes a message into the caller's buffer, the functions that take
 * an open bundle leave their message in the bundle (bundle_error()).
 *
 * Ownership: struct bundle is owned by the caller from bundle_open() until bundle_close(). Every
 * pointer the library returns into the bundle (members, names, frame lists, reason and error text)
 * is owned by the bundle and valid until bundle_close() (bundle_error()'s text until the next call
 * on the bundle). bundle_read_all() returns a malloc()ed buffer the caller frees.
 *
 * Not thread-safe: one bundle, one thread at a time (the frame cache is shared).
 */
#ifndef CRASHPACK_BUNDLE_H
#define CRASHPACK_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define BUNDLE_MAX_MEMBERS 10000u
#define BUNDLE_MAX_FRAMES 1000000u
#define BUNDLE_MAX_FRAME_SIZE (64u << 20) /* decompressed bytes per frame */
#define BUNDLE_MAX_INDEX (64u << 20)      /* index JSON bytes */
#define BUNDLE_MAX_MARKER (64u << 10)     /* member marker JSON bytes */
#define BUNDLE_MAX_NAME 4096u             /* member name bytes */
#define BUNDLE_MAX_HEADER (1u << 20)      /* tar header bytes of one member (pax + ustar) */

/* The format's magics, index trailer and tar framing: format.h, shared with the writer. */

enum bundle_err {
    BUNDLE_OK = 0,
    BUNDLE_EIO = -1,     /* open/read/write failed (errno-level problem) */
    BUNDLE_EFORMAT = -2, /* the bytes are not a valid bundle / frame is corrupt */
    BUNDLE_ENOENT = -3,  /* no member of that name */
    BUNDLE_ETRUNC = -4,  /* the member is cut short: the range goes past the available bytes */
    BUNDLE_ETOOBIG =
        -5, /* over a cap (member larger than the caller's max, frame over the limit) */
    BUNDLE_ENOMEM = -6,
    BUNDLE_EINVAL = -7, /* bad argument */
};

/* One zstd frame of a member: where it is in the file, where its content is in the tar stream. */
struct bundle_frame {
    uint64_t file_offset;
    uint64_t compressed_size;
    uint64_t tar_offset;
    uint64_t size; /* decompressed size (from the index, or the frame header when walking) */
};

struct bundle_member {
    const char *name;    /* validated: relative, no "." / ".." / empty components, no controls */
    uint64_t size;       /* data size (the tar header's size) */
    uint64_t header;     /* tar offset of its first header block */
    uint64_t data;       /* tar offset of its first data byte */
    uint64_t available;  /* data bytes present in the file (== size unless truncated) */
    int truncated;       /* 1: the bundle ends (or breaks) before the member's last frame */
    uint64_t compressed; /* sum of its frames' compressed sizes */
    size_t nframes;
    const struct bundle_frame *frames; /* in tar order; the first covers the header */
    int read_whole;      /* 1 once bundle_read_all() returned all of it: a reader used it */
};

struct bundle;

/* Opens `path` read-only (a regular file, else BUNDLE_EFORMAT / BUNDLE_EIO). On success *out is
 * a bundle that may be partial (bundle_complete() == 0); a file in which not even one member can be
 * found is an error. On error *out is NULL and `err` holds a one-line message. */
int bundle_open(const char *path, struct bundle **out, char *err, size_t errlen);
/* The same on an open file descriptor (dup()ed; the caller keeps `fd`). */
int bundle_open_fd(int fd, struct bundle **out, char *err, size_t errlen);
void bundle_close(struct bundle *b);

/* 1: the index was found and valid. 0: partial (members recovered by walking the frames). */
int bundle_complete(const struct bundle *b);
/* Why the bundle is partial ("" when complete), e.g. "no index (...); file ends inside a frame at
 * offset 123". */
const char *bundle_reason(const struct bundle *b);
uint64_t bundle_file_size(const struct bundle *b);
/* tar stream size from the index, or the bytes of tar stream found while walking. */
uint64_t bundle_tar_size(const struct bundle *b);
/* Message of the last failed call on `b`. */
const char *bundle_error(const struct bundle *b);

size_t bundle_member_count(const struct bundle *b);
/* i < bundle_member_count(b), else NULL. Members are in file order. */
const struct bundle_member *bundle_member(const struct bundle *b, size_t i);
/* NULL when there is no member of that name. */
const struct bundle_member *bundle_find(const struct bundle *b, const char *name);

/* Reads data bytes [offset, offset + len) of member `m` (a pointer from this bundle) into buf.
 * *got is always set: the bytes copied. Reading at or past the member's end gives *got < len and
 * BUNDLE_OK (end of member). A range that runs past the bytes available in a truncated member
 * copies what is there and returns BUNDLE_ETRUNC. Other errors (a corrupt frame) return < 0 with
 * *got bytes copied before the failing frame. */
int bundle_read(struct bundle *b, const struct bundle_member *m, uint64_t offset, void *buf,
                size_t len, size_t *got);
/* The data bytes [*lo, *hi) of member m that the frame holding data byte `offset` covers: reading
 * within one frame's span decodes no other frame. 0, or -1 when no frame holds that byte. */
int bundle_frame_span(const struct bundle_member *m, uint64_t offset, uint64_t *lo, uint64_t *hi);
/* bundle_read() by member name (BUNDLE_ENOENT when absent). */
int bundle_read_name(struct bundle *b, const char *name, uint64_t offset, void *buf, size_t len,
                     size_t *got);

/* Reads a whole small member into a malloc()ed buffer with a NUL after the data (not counted in
 * *len). Refuses (BUNDLE_ETOOBIG, nothing allocated) a member larger than `max`. For a truncated
 * member it returns BUNDLE_ETRUNC with *buf and *len holding the bytes available. The caller frees
 * *buf whenever it is non-NULL; on other errors it is NULL. */
int bundle_read_all(struct bundle *b, const char *name, size_t max, char **buf, size_t *len);

/* Writes member `name`'s data to out_fd. Returns BUNDLE_ETRUNC after writing the available bytes
 * of a truncated member. */
int bundle_extract(struct bundle *b, const char *name, int out_fd);

/* A short description of an error code ("corrupt bundle", ...). */
const char *bundle_strerror(int code);

#endif
