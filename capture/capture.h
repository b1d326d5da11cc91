/* capture.h - the handler's one context struct, passed through every step (systemd-coredump's
 * shape: a list of small steps over one context, each allowed to fail without sinking the rest;
 * every outcome lands in capture.json). */
#ifndef CRASHPACK_CAPTURE_H
#define CRASHPACK_CAPTURE_H
#include "bundlew.h"
#include "config.h"
#include "scrub.h"
#include "xxh64.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/types.h>

#define CP_MAX_GROUPS 64 /* supplementary groups kept of the crashed process */
#define CP_SMI_GPUS 16   /* GPUs queried one by one with nvidia-smi -i */

struct cap {
    struct cp_config cfg;
    const char *config_path;
    /* from the kernel (core_pattern specifiers) */
    pid_t pid, tid, ns_tid;
    int sig;
    int64_t crash_time;
    uid_t uid;
    gid_t gid;
    /* the process's supplementary groups (/proc/<pid>/status), which privs_become takes with
     * uid/gid: the process's files are opened as the process could; -1 when unknown (none then) */
    int ngroups;
    gid_t groups[CP_MAX_GROUPS];
    int dumpable;
    int64_t rlimit_core; /* -1: unlimited */
    char hostname[256];
    /* handles opened as root before anything else */
    int pidfd;  /* %F, or -1 */
    int procfd; /* /proc/<pid>, or -1 */
    int dirfd;  /* bundle directory */
    int kmsgfd;
    int outfd; /* the temporary bundle */
    char tmpname[128], finalname[160];
    /* facts */
    char comm[64];
    char reported_comm[64]; /* --event --comm: the name the reporter gave (manifest death.comm) */
    char exe[1024];
    int secure; /* setuid/setgid/capabilities or not dumpable: root-only, no environment */
    char identity_unverified[200]; /* proc.c: why the identity failed closed, or empty */
    uid_t euid;
    gid_t egid;
    enum cp_mode mode;
    char mode_reason[256];
    /* the bundle */
    struct bw bw;
    cJSON *steps; /* capture.json steps[] */
    cJSON *core;  /* capture.json core{} */
    cJSON *extra; /* other capture.json fields */
    double t0;
    /* the process environment as read from /proc/<pid>/environ (all of it, in memory only;
     * evidence members use the filtered copy) */
    char *environ_raw;
    size_t environ_len;
    unsigned long long env_start, env_end, arg_start, arg_end; /* from /proc/<pid>/stat */
    /* secret values in the core's copies of argv/envp, overwritten as the core streams */
    struct redact {
        uint64_t vaddr, len;
    } * redact;
    size_t nredact;
    /* the original bytes of every value redacted above: masked wherever else they appear (the
     * core's pages, stacks included, and every member through c->bw.scrub) */
    struct cp_scrub scrub;
    /* kmsg.c: a fallen-off-the-bus class Xid in the recent kernel log (nvidia-smi would hang) */
    int bus_lost_recent;
    char bus_lost_line[256];
    double bus_lost_time; /* wall-clock time of that line (seconds since the epoch); 0: unknown */
    /* the GPUs those lines name ("dddd:bb:dd.f"); bus_lost_unnamed: a line named none */
    char bus_lost_pci[CP_SMI_GPUS][16];
    int bus_lost_n, bus_lost_unnamed;
    /* gpu.c: the driver's GPUs (/proc/driver/nvidia/gpus), for nvidia-smi -i */
    char gpu_pci[CP_SMI_GPUS][16];
    int gpu_n;
    /* smi.c, when a GPU is known lost: one `nvidia-smi -q -x -i <pci>` per other GPU, in
     * parallel under one deadline (smi_njobs > 0 instead of the single run above) */
    struct smi_job {
        char pci[16];
        pid_t pid; /* its supervisor, or -1 */
        int fd, err, ctl;
        char status[12]; /* not started: skipped (lost) | failed */
        char reason[200];
    } smi_jobs[CP_SMI_GPUS];
    int smi_njobs;
    /* smi.c: the nvidia-smi child, running while the core drains */
    pid_t smi_pid;
    int smi_fd;
    double smi_started;
    int smi_err;         /* its stderr pipe, or -1 */
    int smi_ctl;         /* its supervisor's reports (nvidia-smi's pid, then its wait status) */
    char smi_status[12]; /* not started: skipped|absent|refused|failed (+ smi_reason) */
    char smi_reason[400];
    /* checkpoint.c: what the quick collector found, for the finisher's verdict */
    char ckpt_path[1024];
    int ckpt_found;
    int ckpt_fd, ckpt_dirfd; /* O_PATH: the checkpoint and its directory, or -1; valid only
                                once ckpt_collect has run (it sets them) */
    /* snap.c: a live process captured by `crashpack snap` (crashpack-capture --snap): the core
     * comes on fd 0 from crashpack's own core writer, snap.json (per-thread stop report) on
     * snap_info_fd, and the finisher writes the final bundle path to snap_status_fd */
    int snap;
    int snap_info_fd, snap_status_fd;
    char snap_trigger[16]; /* "snap" or "watch" */
    char snap_reason[512]; /* why: "requested", or the stall watch saw */
    /* event.c: a death without a core (crashpack-capture --event), and members handed over on
     * descriptors (--member NAME=FD, with --event or --snap) */
    int event;
    int event_gone;      /* nothing is read from /proc/<pid>: gone, or another process */
    char death_kind[16]; /* exit|signal|terminated|oom_kill|exception; "" for the others */
    int death_status, death_signal; /* -1: none */
    long long reported_by;          /* the uid that reported the death (the agent's peer), or -1 */
    unsigned long long start_ticks; /* the process's start (stat field 22), 0: unknown */
    char job[128];
    const char *ev_bundle_dir;
    char dup_kind[32]; /* event_duplicate: the kind of the bundle that already has it */
    /* --room (guard.c): whose bundles the disk guard may delete to make room for this one: fair
     * (the default: the kernel's cores, the agent's OOM-kill captures: the oldest bundles of
     * whichever uid holds the most bytes first, so one user's crash loop evicts its own bundles,
     * not another's), own (a user's request: only that uid's own older bundles, else the capture
     * is refused) */
    enum cap_room { CAP_ROOM_FAIR, CAP_ROOM_OWN } room;
#define CAP_MAX_MEMBERS 8
    struct {
        const char *name;
        int fd;
    } ev_members[CAP_MAX_MEMBERS];
    size_t nev_members;
    /* enrich.c: O_PATH descriptor of /proc/<pid>/root, opened before the drain, or -1 */
    int rootfd;
    /* privs.c: privs_drop has run (CAP_SETUID/CAP_SETGID only permitted, nothing effective) */
    int privs_dropped;
    /* guard.c: what max_use leaves this bundle (set by guard_vacuum; UINT64_MAX: no limit),
     * and the members the guard refused */
    uint64_t guard_max_bytes;
    int guard_short; /* guard_vacuum: max_use is crossed still (nothing more it may delete) */
    unsigned guard_refused;
    uint64_t guard_refused_bytes;
    char guard_refused_why[16];
};

/* cap.c: the context's setup (every descriptor -1, the capture.json pieces created; opens
 * nothing), before anything else */
void cap_init(struct cap *c);

/* cap.c: the value of NAME in the crashed process's initial environment, or NULL. */
const char *cap_env(const struct cap *c, const char *name);

/* cap.c, steps: record one outcome. status: ok|absent|timeout|refused|skipped|failed */
void cap_step(struct cap *c, const char *name, const char *status, double t_start, const char *fmt,
              ...) __attribute__((format(printf, 5, 6)));

/* proc.c: quick evidence from /proc/<pid> (manifest and proc/ members) */
int proc_identify(struct cap *c);
int proc_collect(struct cap *c);

/* Evidence collectors (issue 3). Each records its outcome with cap_step and adds its member(s);
 * quick ones run as root before privileges are dropped, nvidia-smi runs concurrently with the
 * drain, the checkpoint verdict runs in the finisher. */
void kmsg_collect(struct cap *c);    /* kmsg.c: kernel log lines that matter -> kmsg.json */
void gpu_collect(struct cap *c);     /* gpu.c: this process's GPUs, PCI ids, AER -> gpu.json */
void gpu_node_events(struct cap *c); /* gpu.c: the agent's GPU events -> node-gpu-events.json */
void ckpt_collect(struct cap *c); /* checkpoint.c: the last saved checkpoint -> checkpoint.json */
void ckpt_verdict(struct cap *c); /* checkpoint.c, finisher: checkpoint-verdict.json */
void logs_collect(struct cap *c); /* logs.c: stdout/stderr tails, ML debug files -> logs/, ml/ */
void smi_start(struct cap *c);    /* smi.c: spawn nvidia-smi before the drain */
void smi_finish(struct cap *c);   /* smi.c, finisher: collect it -> nvidia-smi.xml */
/* enrich.c: `crashpack enrich` as the crashed uid -> stacks.json (config key `enrich`) */
void enrich_open_root(struct cap *c); /* before the drain: the crashed process's root */
void enrich_finish(struct cap *c);    /* finisher, after the core: the stacks.json member */

/* guard.c: disk guard and burst/repeat limits */
#define GUARD_CLOSE_RESERVE (1u << 20) /* capture.json, the tar end and the index */
void guard_vacuum(struct cap *c, uint64_t incoming);
int guard_member_room(void *arg, uint64_t bytes); /* bundlew's room hook: 0 refuses a member */
void guard_attach(struct cap *c);                 /* every whole member passes the guard */
void guard_report(struct cap *c);                 /* finisher: the refused members, if any */
int guard_rate_allows_core(struct cap *c, char *why, size_t whylen);
int guard_free_ok(struct cap *c, uint64_t more); /* 0 when writing `more` would cross keep_free */
uint64_t guard_keep_free(struct cap *c);

/* stream.c: drain the pipe into the core member */
void stream_core(struct cap *c);

/* publish.c */
int publish_bundle(struct cap *c, char *final, size_t finallen);
void publish_post_command(struct cap *c, const char *final);
/* privs.c (privs.h): privs_drop, privs_become, privs_clear */

/* snap.c: `crashpack-capture --snap ...` arguments (the live process's identity from /proc);
 * snap.json after the core; the final name to the waiting `crashpack snap` */
int snap_parse_args(struct cap *c, int argc, char **argv);
void snap_config(struct cap *c); /* after the config file: --bundle-dir, --mode */
void snap_collect_info(struct cap *c);
void snap_report_final(struct cap *c, const char *final, int ok);

/* event.c: `crashpack-capture --event ...` arguments; --bundle-dir and the metadata-only mode
 * after the config file; manifest.json's death object (every path); the --member members; and
 * whether the death already has a bundle (1 with its path) */
int event_parse_args(struct cap *c, int argc, char **argv);
int cap_member_arg(struct cap *c, const char *spec); /* NAME=FD; 0, or -1 when not allowed */
void event_config(struct cap *c);
cJSON *event_death_json(const struct cap *c);
void event_add_members(struct cap *c);
int event_duplicate(struct cap *c, char *path, size_t n);
int cap_room_arg(struct cap *c, const char *v); /* --room own|fair; 0, or -1 */

/* What a bundle's manifest says about whom it is of and how it was made, read from the first
 * frames of the file (the manifest is its first member): for deduplication and the disk guard.
 * peek_max: compressed bytes read at most. 0, or -1 when no manifest could be read. */
struct bundle_facts {
    char kind[32];            /* death.kind; "?" for a manifest without a death object */
    long long uid;            /* the process's uid; -1 unknown */
    int verified;             /* made with no caller's word: death.identity "verified" (the
                               * kernel's, or read from /proc), or no reported_by_uid (the
                               * agent's own capture of a kernel log line) */
    long long reported_by;    /* death.reported_by_uid; -1 none */
    unsigned long long start; /* death.start_time; 0 unknown */
};
int bundle_peek(int dirfd, const char *name, size_t peek_max, struct bundle_facts *f);

/* salvage.c: complete orphaned temporaries left by killed handlers */
int salvage_orphans(int dirfd, const struct cp_config *cfg, int kmsgfd);
#endif
