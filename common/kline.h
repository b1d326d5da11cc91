/* kline.h - kernel-log lines, parsed once: the capture handler (kmsg.json), the node service (OOM
 * kills and GPU events as they happen) and the analyzer (kernel_log, gpu.xid) read the same line
 * the same way. libc only (the handler links it).
 *
 * Every line is hostile: a process names itself (its comm, up to 15 bytes of anything) inside the
 * kernel's lines, so fields are found by the line's format, from the fixed parts the kernel
 * writes, never by searching the text for a field's name (a comm "UID:0" must not become a uid).
 *
 * /dev/kmsg records:  PRIO,SEQ,TS_USEC,FLAGS[,...];TEXT\n[ KEY=VALUE\n]...
 *
 * NVIDIA Xid lines, every driver era's format into one struct (docs/evidence.md):
 *   NVRM: Xid (0000:01:00): 3, C 00000005 ...                       no "PCI:" prefix
 *   NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013, ...                  no pid
 *   NVRM: Xid (PCI:0000:3d:00): 43, pid=35521, Ch 00000008            pid, no name
 *   NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, ...
 *   NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: ... MIG GPU instance
 *   NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 00000001 caused by previous Xid 149
 * and the "fallen off the bus" message without any Xid (one line "NVRM: GPU 0000:2b:00.0: GPU has
 * fallen off the bus." or the three-line "NVRM: The NVIDIA GPU 0000:b3:00.0 / (PCI ID: ...)
 * installed in this system has / fallen off the bus ...", as one record or three) counts as Xid 79.
 * The line may carry a dmesg / syslog prefix; only the text from "NVRM:" on is read.
 *
 * The OOM killer's lines (every kernel since 4.19 prints the first two):
 *   oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,
 *            oom_memcg=/slurm/job_1,task_memcg=/slurm/job_1/step_0,task=python,pid=1234,uid=1000
 *   Memory cgroup out of memory: Killed process 1234 (python) total-vm:...kB, anon-rss:...kB,
 *            file-rss:...kB, shmem-rss:...kB, UID:1000 pgtables:...kB oom_score_adj:0
 * (for the host's memory `global_oom` and "Out of memory: Killed process ..."), and the older
 * "Task in X killed as a result of limit of Y" and "Kill process N (comm) score S or sacrifice
 * child".
 *
 * Never prints, never exits.
 */
#ifndef CRASHPACK_KLINE_H
#define CRASHPACK_KLINE_H

#include <stddef.h>

/* ---- /dev/kmsg records ---- */

struct kline_rec {
    int fac, lvl;           /* syslog facility and level (PRIO >> 3, PRIO & 7) */
    long long seq, ts_usec; /* sequence number; local_clock in microseconds (CLOCK_MONOTONIC) */
    const char *text;       /* the message (not terminated: text_len bytes; escaped as the kernel
                             * writes it, \xNN) */
    size_t text_len;
    const char *attrs; /* the " KEY=VALUE\n" lines after it, up to end; NULL when none */
    const char *end;
};
/* Parses one record of rec (len bytes, as read(2) returned it). 0, or -1 when it is not one. */
int kline_record(const char *rec, size_t len, struct kline_rec *out);

/* ---- NVIDIA Xid ---- */

#define KLINE_XID_BUSLOST 79

struct kline_xid {
    int code;
    char pci[32];     /* normalized "dddd:bb:dd.f" (lower case), "" when the line has none */
    int gpu_instance; /* MIG "GPU-I:NN", else -1 */
    int has_pid;      /* pid= was a number */
    long pid;
    int pid_unknown; /* pid='<unknown>' */
    char name[128];  /* name=..., "" when absent or "<unknown>" */
    int caused_by;   /* "caused by previous Xid N", else -1 */
    int implied;     /* 1: the fallen-off-the-bus message without an Xid number */
    char text[1024]; /* the message after the header (the whole message for an implied one) */
};

/* State carried across lines: the three-line bus message may come as separate records. */
struct kline_xid_ctx {
    char pending_pci[32];
};

/* Parses one kernel-log record (may contain '\n' for a multi-line record). Returns 1 and fills
 * *ev when it is an Xid (or the fallen-off-the-bus message), 0 otherwise. */
int kline_xid_parse(struct kline_xid_ctx *ctx, const char *line, struct kline_xid *ev);

/* Normalizes a PCI address ("0000:01:00", "00000000:3B:00.0", "01:00.0") to "dddd:bb:dd.f".
 * Returns 0, or -1 when it is not one (out is then ""). */
int kline_pci_normalize(const char *in, char *out, size_t len);

/* ---- the OOM killer ---- */

enum kline_oom_kind {
    KLINE_OOM_NONE,
    KLINE_OOM_LIST,    /* oom-kill:constraint=...,pid=N,uid=U: the kill's constraint and cgroups */
    KLINE_OOM_KILLED,  /* "...: Killed process N (comm) total-vm:... UID:U ...": the kill */
    KLINE_OOM_KILL,    /* the older "Kill process N (comm) score S or sacrifice child" */
    KLINE_OOM_TASK_IN, /* the older "Task in X killed as a result of limit of Y" */
};

struct kline_oom {
    enum kline_oom_kind kind;
    long pid, uid;                        /* -1 when the line has none */
    char comm[64];                        /* "" when none */
    double total_vm_kib, anon_rss_kib;    /* -1 when none */
    char constraint[64];                  /* KLINE_OOM_LIST */
    char oom_memcg[512], task_memcg[512]; /* LIST; TASK_IN: the limit's and the task's cgroups */
    int global_oom;                       /* LIST: the host's memory (global_oom) */
    int have_constraint, have_oom_memcg, have_task_memcg,
        have_comm;  /* which LIST fields were there */
    int scope_hint; /* the line's "...out of memory:" prefix: 1 a cgroup's, 2 the host's */
};

/* Parses one kernel line. Returns 1 with o filled when it is one of the OOM killer's lines above
 * (o->kind), else 0 (o->scope_hint may still be set: "Out of memory: ..." alone). */
int kline_oom(const char *text, struct kline_oom *o);

#endif
