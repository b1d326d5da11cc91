/* xid.h - NVIDIA Xid lines from the kernel log, and the Xid catalogue (rules/gpu/xid.json).
 *
 * Every driver era's line format parses into one struct (see docs/evidence.md for the variants):
 *   NVRM: Xid (0000:01:00): 3, C 00000005 ...                       no "PCI:" prefix
 *   NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013, ...                  no pid
 *   NVRM: Xid (PCI:0000:3d:00): 43, pid=35521, Ch 00000008            pid, no name
 *   NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, ...
 *   NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: ... MIG GPU instance
 *   NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 00000001 caused by previous Xid 149
 * and the "fallen off the bus" message without any Xid (one line "NVRM: GPU 0000:2b:00.0: GPU has
 * fallen off the bus." or the three-line "NVRM: The NVIDIA GPU 0000:b3:00.0 / (PCI ID: ...)
 * installed in this system has / fallen off the bus ...", as one record or three) counts as Xid 79.
 *
 * The line may carry a dmesg / syslog prefix; only the text from "NVRM:" on is read. Plain string
 * parsing with explicit bounds: every line is hostile. Never prints, never exits.
 */
#ifndef CRASHPACK_XID_H
#define CRASHPACK_XID_H
#include <cjson/cJSON.h>
#include <stddef.h>

#define XID_BUSLOST 79

struct xid_event {
    int code;
    char pci[32];      /* normalized "dddd:bb:dd.f" (lower case), "" when the line has none */
    int gpu_instance;  /* MIG "GPU-I:NN", else -1 */
    int has_pid;       /* pid= was a number */
    long pid;
    int pid_unknown;   /* pid='<unknown>' */
    char name[128];    /* name=..., "" when absent or "<unknown>" */
    int caused_by;     /* "caused by previous Xid N", else -1 */
    int implied;       /* 1: the fallen-off-the-bus message without an Xid number */
    char text[1024];   /* the message after the header (the whole message for an implied one) */
};

/* State carried across lines: the three-line bus message may come as separate records. */
struct xid_ctx {
    char pending_pci[32];
};

/* Parses one kernel-log record (may contain '\n' for a multi-line record). Returns 1 and fills
 * *ev when it is an Xid (or the fallen-off-the-bus message), 0 otherwise. */
int xid_parse(struct xid_ctx *ctx, const char *line, struct xid_event *ev);

/* Normalizes a PCI address ("0000:01:00", "00000000:3B:00.0", "01:00.0") to "dddd:bb:dd.f".
 * Returns 0, or -1 when it is not one (out is then ""). */
int xid_pci_normalize(const char *in, char *out, size_t len);

/* The catalogue rules/gpu/xid.json (found with cp_datapath); NULL with a reason in err. */
cJSON *xid_catalog_load(char *err, size_t errlen);
/* The catalogue entry of `code` ({mnemonic, meaning, blame, action, ...}) or NULL when unknown. */
const cJSON *xid_catalog_entry(const cJSON *cat, int code);

#endif
