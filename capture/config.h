/* config.h - crashpack's one `key = value` configuration file.
 *
 * Shared by the capture handler and the crashpack command. Every key has a safe default, so a
 * missing file is not an error. Values are plain integers with an optional K/M/G/T suffix, or a
 * percentage of the bundle filesystem for the two disk limits ("10%").
 */
#ifndef CRASHPACK_CONFIG_H
#define CRASHPACK_CONFIG_H

#include <stdint.h>
#include <stddef.h>

#define CP_DEFAULT_CONFIG "/etc/crashpack/crashpack.conf"
#define CP_PATH_MAX 512

enum cp_mode { CP_MODE_FULL = 0, CP_MODE_SLIM = 1, CP_MODE_META = 2 };

/* A size that is either absolute bytes or a percentage of a filesystem. */
struct cp_size {
    uint64_t bytes;
    int percent; /* > 0: percent of the filesystem size, bytes ignored */
    int capped;  /* the default's percentage, capped on big disks (guard.c); a configured
                    value is not */
};

struct cp_config {
    char bundle_dir[CP_PATH_MAX];
    enum cp_mode mode;
    uint64_t max_core_size;     /* above this, full -> slim */
    struct cp_size max_use;     /* total size of bundles kept */
    struct cp_size keep_free;   /* free space never used */
    int honor_rlimit_core;      /* RLIMIT_CORE == 0 -> meta */
    unsigned deadline_s;        /* handler: stop reading the core after this */
    unsigned finisher_deadline_s;
    int level;                  /* zstd level */
    unsigned threads;           /* compression workers; 0 = auto */
    uint64_t frame_size;        /* core frame size */
    uint64_t slim_stack_max;    /* per-thread stack bytes kept in slim mode */
    unsigned burst_full;        /* full cores per burst window, all processes */
    unsigned burst_window_s;
    unsigned repeat_full;       /* full cores per repeat window, same executable */
    unsigned repeat_window_s;
    char post_command[CP_PATH_MAX];
    char nvidia_smi[CP_PATH_MAX];
    unsigned nvidia_smi_timeout_s;
    uint64_t proc_file_max;     /* cap per /proc file copied */
    char redact_patterns[CP_PATH_MAX]; /* redact_env (or redact_patterns): extra
                                          * comma/space-separated globs on env names */
    char redact_values[CP_PATH_MAX];   /* extra comma/space-separated globs on words of any text:
                                        * a word one matches is masked (common/scrub.h) */
    /* evidence collectors (issue 3) */
    unsigned kmsg_margin_s;     /* kernel log kept from process start minus this */
    uint64_t kmsg_max;          /* cap on kmsg.json */
    uint64_t smi_output_max;    /* cap on nvidia-smi output */
    unsigned smi_bus_lost_window_s; /* a bus-loss Xid this recent: nvidia-smi is skipped */
    uint64_t log_tail;          /* bytes of stdout/stderr kept */
    uint64_t ml_file_max;       /* cap per ML debug file */
    unsigned checkpoint_timeout_s; /* stat/verify of the checkpoint, in a child */
    /* enrichment (stacks.json, capture/enrich.c) */
    char enrich[CP_PATH_MAX];   /* "auto" (crashpack next to crashpack-capture), "off", or a path */
    unsigned enrich_timeout_s;  /* the analysis is killed after this */
    uint64_t enrich_max;        /* stacks.json bytes kept; more is a failed step */
    uint64_t enrich_memory;     /* address-space limit of the analysis (crashpack enrich --memory) */
    /* the node service (crashpack agent, node/agent.c) */
    char agent_socket[CP_PATH_MAX]; /* its Unix socket */
    unsigned agent_rate;            /* captures it starts per minute for each uid's requests (0: no
                                     * limit); its OOM-kill captures are not counted */
    int agent_oom;              /* a bundle for every process the kernel's OOM killer kills */
    char state_dir[CP_PATH_MAX]; /* the node's state: the agent's gpu-events.jsonl, read by the
                                    handler into node-gpu-events.json */
    char knowledge_base[CP_PATH_MAX]; /* the node's knowledge base, which the agent answers users'
                                         `crashpack db` queries from (their own crashes only) */
    /* the supervisor (crashpack run, node/run.c) */
    enum cp_run_exits { CP_RUN_EXITS_MAIN, CP_RUN_EXITS_PYTHON, CP_RUN_EXITS_ALL } run_exits;
                                /* whose non-zero exit is a crash: the main process only, also
                                 * every Python process (default), or every process */
    uint64_t run_output_tail;   /* bytes of the job's output kept for output.txt */
    /* Python frames' local variables (issue 23, docs/python.md): the analysis reads them from
     * the core (manifest capture.python_locals), snap keeps their pages, the hook takes them */
    int python_locals;
};

void cp_config_defaults(struct cp_config *c);

/* Loads `path` over the defaults. A missing file is fine when `required` is 0.
 * Returns 0, or -1 with a message in err. */
int cp_config_load(struct cp_config *c, const char *path, int required, char *err, size_t errlen);

/* Parses "12", "4K", "2M", "1G", "3T". Returns 0 or -1. */
int cp_parse_size(const char *s, uint64_t *out);

const char *cp_mode_name(enum cp_mode m);

/* Whether an environment variable of this name holds a secret: the built-in patterns (*PASS*,
 * *PWD*, *SECRET*, *TOKEN*, *KEY*, *CREDENTIAL*, *AUTH*, *COOKIE*, *SESSION*, *PRIVATE*; not PWD,
 * OLDPWD, *KEYBOARD*, *KEYMAP*) and the configured redact_env globs, case-insensitive. */
int cp_secret_env_name(const struct cp_config *c, const char *name);

/* Command-line secrets: --token=x, --api-key x, --password=..., --passphrase x, -p x, -pX after
 * mysql/mariadb/sshpass, and KEY=value arguments whose KEY looks secret: the value masked in
 * place (same length); and in every argument what common/scrub.h recognizes by its shape (URL
 * passwords, tokens, ...). */
void cp_mask_cmdline(const struct cp_config *cfg, char **argv, int argc);

/* Resolves a cp_size against a filesystem of `fs_bytes`. */
uint64_t cp_size_resolve(const struct cp_size *s, uint64_t fs_bytes);

#endif
