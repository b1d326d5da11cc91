/* core.h - the ELF core inside a bundle, read in place: headers, notes and memory.
 *
 * core_open() reads the start of the bundle's `core` member (ELF header, program headers, notes:
 * bounded by CORE_HEADER_MAX) into memory, parses it with libelf, and keeps:
 *   - the PT_LOAD table (sorted by address) that maps a process address to a core file offset;
 *   - per thread (NT_PRSTATUS): tid, pending signal, the raw general registers;
 *   - NT_SIGINFO (signal, si_code, fault address or sender), NT_PRPSINFO, NT_FILE (mapped files),
 *     NT_AUXV.
 * Memory is then read on demand: core_read() maps an address through PT_LOAD to a byte range of the
 * member and reads it with bundle_read(), which decompresses only the frames it needs (a small
 * chunk cache sits in between). The whole core is never extracted.
 *
 * Every byte is hostile: note sizes are checked against their note, counts are capped
 * (CORE_MAX_THREADS, CORE_MAX_FILES), a segment that points past the member is clipped, and what
 * could not be parsed becomes a warning (core->warnings) rather than a failure where the rest is
 * still usable.
 *
 * Architectures: x86_64 and aarch64, 64-bit little-endian.
 *
 * The library never prints or exits. Ownership: struct core and everything it points to (threads,
 * files, paths, warnings, the libelf handle) is owned by the core and freed by core_close(). The
 * bundle must outlive the core.
 */
#ifndef CRASHPACK_CORE_H
#define CRASHPACK_CORE_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

struct bundle;
struct bundle_member;

#define CORE_HEADER_MAX (64u << 20) /* bytes of headers + notes kept in memory */
#define CORE_MAX_THREADS 100000u
#define CORE_MAX_FILES 1000000u
#define CORE_MAX_SEGMENTS 4000000u
#define CORE_MAX_WARNINGS 32u
#define CORE_MAX_REGS 34u /* aarch64: x0..x30, sp, pc, pstate */

enum core_err {
    CORE_OK = 0,
    CORE_EABSENT = -1, /* the address is not in the core (unmapped, or mapped but not dumped) */
    CORE_ETRUNC = -2,  /* it is in the core, but the bundle was cut short before it */
    CORE_EIO = -3,     /* the bundle could not be read (corrupt frame, I/O) */
    CORE_EFORMAT = -4, /* not a core we understand */
    CORE_ENOMEM = -5,
};

enum core_arch { CORE_ARCH_X86_64 = 1, CORE_ARCH_AARCH64 = 2 };

struct core_segment {
    uint64_t vaddr, memsz;  /* process address range */
    uint64_t offset, filesz; /* bytes in the core: [offset, offset + filesz) (clipped) */
    uint32_t flags;         /* PF_R | PF_W | PF_X */
};

struct core_thread {
    int32_t tid;
    int cursig;       /* pr_cursig (the kernel sets it in every thread of a dump) */
    uint64_t sigpend, sighold;
    uint64_t regs[CORE_MAX_REGS]; /* pr_reg as the kernel laid it out */
    size_t nregs;
    size_t note_index;  /* position of its NT_PRSTATUS among all notes */
    int owns_siginfo;   /* the NT_SIGINFO note comes after this NT_PRSTATUS and before the next */
};

struct core_siginfo {
    int present;
    int signo, errnum, code;
    uint64_t addr;       /* si_addr (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP) */
    int32_t sender_pid;  /* si_pid (kill, tkill, sigqueue: code <= 0) */
    uint32_t sender_uid;
};

struct core_psinfo {
    int present;
    char state;
    int32_t pid, ppid;
    uint32_t uid, gid;
    char fname[17];  /* comm */
    char psargs[81]; /* the start of the command line */
};

struct core_file {
    uint64_t start, end; /* mapping [start, end) */
    uint64_t offset;     /* file offset of `start`, in bytes */
    const char *path;    /* as the kernel recorded it (may end in " (deleted)") */
};

struct core_cache;

struct core {
    enum core_arch arch;
    uint16_t machine;
    uint64_t size; /* member size */
    Elf *elf;      /* libelf over the header copy: ELF header, phdrs, notes (for ebl/arch) */

    struct core_segment *segs; /* PT_LOAD, sorted by vaddr */
    size_t nsegs;
    struct core_thread *threads; /* in note order */
    size_t nthreads;
    struct core_siginfo siginfo;
    struct core_psinfo psinfo;
    struct core_file *files; /* NT_FILE, in note order */
    size_t nfiles;
    uint64_t *auxv; /* pairs (type, value) */
    size_t nauxv;

    const char *warnings[CORE_MAX_WARNINGS];
    size_t nwarnings;

    /* private */
    struct bundle *b;
    const struct bundle_member *m;
    unsigned char *header;
    size_t header_len;
    char *strings; /* NT_FILE path storage */
    struct core_cache *cache;
    const unsigned char *mem; /* core_open_mem: the core's bytes (no bundle) */
};

/* Opens member `member` (normally "core") of an open bundle. On error returns < 0 and writes a
 * one-line message to err. A core whose notes are partly unreadable still opens (warnings). */
int core_open(struct bundle *b, const char *member, struct core **out, char *err, size_t errlen);
/* The same over a core held in memory (buf[0..len), which must outlive the core): for the fuzz
 * harness and tests that build cores by hand. No bundle: memory reads copy from buf. */
int core_open_mem(const void *buf, size_t len, struct core **out, char *err, size_t errlen);
void core_close(struct core *c);

/* Reads process memory [vaddr, vaddr + len). *got is the number of leading bytes copied. Bytes of a
 * segment past its p_filesz (mapped, not dumped) read as zeros. Returns CORE_OK when all len bytes
 * were copied, else a negative enum core_err for the first byte that could not be. */
int core_read(struct core *c, uint64_t vaddr, void *buf, size_t len, size_t *got);
/* The same, but bytes that were mapped and not dumped are CORE_EABSENT (not zeros): what an
 * unwinder wants, since a file-backed page that is not in the core is not known to be zero. */
int core_read_dumped(struct core *c, uint64_t vaddr, void *buf, size_t len, size_t *got);

/* The PT_LOAD segment containing vaddr, or NULL. */
const struct core_segment *core_segment_at(const struct core *c, uint64_t vaddr);
/* The value of auxv entry `type`; 0 when absent (*found says which). */
uint64_t core_auxv(const struct core *c, uint64_t type, int *found);

/* Registers of a thread. */
uint64_t core_thread_pc(const struct core *c, const struct core_thread *t);
uint64_t core_thread_sp(const struct core *c, const struct core_thread *t);
uint64_t core_thread_fp(const struct core *c, const struct core_thread *t);
/* The thread's registers in DWARF numbering from register 0: x86_64 rax rdx rcx rbx rsi rdi rbp rsp
 * r8..r15 rip (17), aarch64 x0..x30 sp (32; the pc is core_thread_pc). Returns the count. */
size_t core_thread_dwarf_regs(const struct core *c, const struct core_thread *t, uint64_t *out,
                              size_t max);

/* ELF notes (the core's, or a build-id note read from memory) are walked with core_note_next
 * and struct core_note from format.h, the one walk the handler uses too. */

const char *core_strerror(int code);

#endif
