/* install.h - putting crashpack-capture into core_pattern and taking it out again.
 *
 * Library code for `crashpack install|uninstall|status`: builds the handler pattern, reads and
 * writes the kernel sysctls, keeps the previous values in a state file so uninstall restores them
 * byte-exactly, and renders the sysctl.d drop-in. Nothing here prints or exits: functions return
 * 0 on success or -1 with a message in `err`.
 */
#ifndef CRASHPACK_INSTALL_H
#define CRASHPACK_INSTALL_H

#include <stddef.h>
#include <sys/types.h>

#define CP_SYSCTL_CORE_PATTERN "/proc/sys/kernel/core_pattern"
#define CP_SYSCTL_PIPE_LIMIT "/proc/sys/kernel/core_pipe_limit"
#define CP_STATE_DIR "/var/lib/crashpack"
#define CP_STATE_NAME "install-state"
/* 99-: ordered after distro files such as 50-coredump.conf, which also set core_pattern. */
#define CP_DROPIN_PATH "/etc/sysctl.d/99-crashpack.conf"
#define CP_DROPIN_MARKER "# Written by `crashpack install`"
#define CP_HANDLER_NAME "crashpack-capture"
#define CP_PATTERN_MAX 127 /* kernel CORENAME_MAX_SIZE - 1 */
#define CP_PATTERN_BUF 256 /* room for any value the kernel hands back */
#define CP_PIPE_LIMIT_DEFAULT 16u
#define CP_DROPIN_MAX 65536
/* The system user (and group) the capture finisher runs the enrichment of root's and setuid
 * programs' crashes as (capture/enrich.c): made by install, for that alone. */
#define CP_USER "crashpack"
#define CP_USERADD "/usr/sbin/useradd"
#define CP_USERDEL "/usr/sbin/userdel"
#define CP_GROUPDEL "/usr/sbin/groupdel"

/* What `crashpack install` changed, and what it found before. */
struct cp_install_state {
    char pattern[CP_PATTERN_BUF];      /* the pattern crashpack installed */
    unsigned pipe_limit;               /* the core_pipe_limit crashpack set */
    char prev_pattern[CP_PATTERN_BUF]; /* core_pattern before the first install, raw bytes */
    unsigned prev_pipe_limit;
    int dropin_written;     /* crashpack wrote CP_DROPIN_PATH */
    int dropin_existed;     /* a foreign file was there before; dropin_prev holds it */
    char *dropin_prev;      /* owned; NULL unless dropin_existed */
    long long installed_at; /* unix seconds of the first install */
    int user_created;       /* install created the user CP_USER: uninstall removes it */
    int group_created;      /* ... and its group CP_USER */
};

void cp_install_state_free(struct cp_install_state *s);

/* Builds `|HANDLER [-c CONFIG] %P %i %I %s %t %u %g %d %c %h[ %F]`. Both paths must be absolute
 * and free of whitespace and `%`; the result must fit in CP_PATTERN_MAX. */
int cp_pattern_build(char *out, size_t outlen, const char *handler, const char *config, int pidfd,
                     char *err, size_t errlen);

/* 1 when the pattern pipes to a program named crashpack-capture. */
int cp_pattern_is_crashpack(const char *pattern);

/* 1 when the pattern hands cores to a program or socket (`|`, `@`) rather than naming a file. */
int cp_pattern_is_handler(const char *pattern);

/* 1 when the pattern uses the %F (pidfd) specifier. */
int cp_pattern_has_pidfd(const char *pattern);

/* Reads a sysctl (or any small text file) into buf without its trailing newline. */
int cp_sysctl_read(const char *path, char *buf, size_t len, char *err, size_t errlen);
int cp_sysctl_write(const char *path, const char *value, char *err, size_t errlen);
int cp_sysctl_read_uint(const char *path, unsigned *out, char *err, size_t errlen);
int cp_sysctl_write_uint(const char *path, unsigned value, char *err, size_t errlen);

/* Writes `pattern` to core_pattern at `path` and reads it back: kernels since 6.16.8 accept an
 * invalid pattern on write and only reject it on read. On mismatch writes `revert` back (when not
 * NULL) and fails. */
int cp_core_pattern_set(const char *path, const char *pattern, const char *revert, char *err,
                        size_t errlen);

/* The state file lives in `dir` (CP_STATE_DIR), which must be a directory owned by root (or the
 * caller) and writable by nobody else. cp_state_load returns 1 when there is no state file. */
int cp_state_load(const char *dir, struct cp_install_state *s, char *err, size_t errlen);
int cp_state_save(const char *dir, const struct cp_install_state *s, char *err, size_t errlen);
int cp_state_remove(const char *dir, char *err, size_t errlen);
/* 1 when both states would serialize to the same content (installed_at aside). */
int cp_state_equal(const struct cp_install_state *a, const struct cp_install_state *b);

/* The sysctl.d drop-in for a pattern and pipe limit; malloc'd, caller frees. */
char *cp_dropin_render(const char *pattern, unsigned pipe_limit);
/* 1 when the drop-in content carries crashpack's marker line. */
int cp_dropin_is_ours(const char *content);

/* Reads a small regular file (no symlinks) into a malloc'd, NUL-terminated buffer. Returns 1 when
 * it does not exist; fails on files over `max` bytes or holding NUL bytes. */
int cp_file_read_small(const char *path, size_t max, char **out, char *err, size_t errlen);
/* Replaces `path` atomically: temporary file in the same directory, fsync, rename, fsync dir. */
int cp_file_write_atomic(const char *path, const char *data, size_t len, mode_t mode, char *err,
                         size_t errlen);
int cp_file_remove(const char *path, char *err, size_t errlen);

/* 1 when /etc/passwd (cp_user_exists) or /etc/group (cp_group_exists) has `name`, read as the
 * capture handler reads it (fgetpwent, not NSS); 0 when not; -1 when it cannot be read. */
int cp_user_exists(const char *name);
int cp_group_exists(const char *name);
/* Creates the system user and group CP_USER (useradd --system, no home, no login shell; its
 * group when none of that name exists, *group_created says so). 0, or -1 with err set. */
int cp_user_create(int *group_created, char *err, size_t errlen);
/* Removes the user CP_USER (userdel), and its group too when `group` and it is left. 0, or -1. */
int cp_user_remove(int group, char *err, size_t errlen);

/* 1 when the running kernel has %F (6.16 or later), 0 when it is older, -1 when unknown.
 * `release` receives uname's release string. */
int cp_kernel_has_pidfd(char *release, size_t len);

#endif
