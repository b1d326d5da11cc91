/* coreelf.h - learn a core's layout from the start of the kernel's stream, and plan a slim core.
 *
 * The kernel writes the ELF header, the program headers, the notes, then the segments in file
 * order. The core's exact size follows from the program headers, so the tar header can be
 * written before the data; the notes (threads' registers, mapped files) decide what a slim core
 * keeps. Only 64-bit little-endian cores (x86_64, aarch64) are planned for slim. */
#ifndef CRASHPACK_COREELF_H
#define CRASHPACK_COREELF_H
#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define CORE_PREFIX_MAX (64u << 20)

struct core_seg {
    uint64_t off, filesz, vaddr, memsz;
    uint32_t flags;
};

struct core_layout {
    uint16_t machine;
    uint64_t size;       /* whole core, from the headers */
    uint64_t phoff;
    uint64_t phnum;
    uint64_t note_off, note_size;
    uint64_t data_start; /* first byte of segment data = how much prefix the plan needs */
    struct core_seg *segs; /* PT_LOAD with file data, in file order; owned, core_layout_free */
    size_t nsegs;
    int unordered; /* segments not in file order (not a kernel core) */
};

/* Parses the stream prefix b[0..len). Returns 0 when the layout is known, 1 when *need bytes are
 * required (need > len), -1 when it is not a core we understand (why says why). */
int core_layout_parse(const uint8_t *b, size_t len, struct core_layout *L, uint64_t *need,
                      char *why, size_t whylen);
void core_layout_free(struct core_layout *L);

/* The notes of the core's PT_NOTE are walked with core_note_next (format.h) over
 * prefix + note_off, note_size bytes, once the prefix covers them. */

struct slim_piece {
    uint64_t in_off, len, out_off;
};

struct slim_plan {
    uint8_t *head; /* new ELF header + program headers + the notes; owned */
    size_t head_len;
    struct slim_piece *pieces; /* in input order; owned */
    size_t npieces;
    uint64_t size;     /* size of the slim core */
    uint64_t kept;     /* segment bytes kept */
    size_t stacks;     /* threads whose stack was found */
};

/* Where the core member's frames should begin so that a reader decodes little to reach what an
 * analysis reads first: every segment's start (module ELF headers, the start of each mapping) and,
 * when the notes lie in the prefix (len >= data_start), a page below each thread's stack pointer.
 * Offsets in the core, sorted and unique; *out is owned by the caller. Returns the count (0 and
 * *out NULL when there is nothing or no memory). */
size_t core_frame_cuts(const uint8_t *prefix, size_t len, const struct core_layout *L,
                       uint64_t **out);

/* Plans the slim core from the prefix (which covers data_start bytes). */
int core_slim_plan(const uint8_t *prefix, const struct core_layout *L, uint64_t stack_max,
                   struct slim_plan *P, char *why, size_t whylen);
void core_slim_free(struct slim_plan *P);
#endif
