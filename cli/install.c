/* install.c - the library half of `crashpack install|uninstall|status`.
 *
 * Kernel sysctls are read and written as text; the state file (struct cp_install_state) is JSON via
 * cJSON, which round-trips any core_pattern byte-exactly (the kernel stores no NUL or newline).
 * Files are replaced by temp + fsync + rename so a crash never leaves a half-written state.
 */
#include "util.h" /* write_all */
#include "install.h"
#include "jpath.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STATE_FORMAT "crashpack-install-state"
#define STATE_VERSION 1
#define STATE_MAX (1u << 20)

void cp_install_state_free(struct cp_install_state *s)
{
    free(s->dropin_prev);
    s->dropin_prev = NULL;
}

/* ---- patterns ---- */

static int path_ok_in_pattern(const char *what, const char *p, char *err, size_t errlen)
{
    if (p[0] != '/') {
        snprintf(err, errlen, "%s path must be absolute: %s", what, p);
        return -1;
    }
    for (const char *c = p; *c; c++) {
        /* the kernel splits pipe arguments on whitespace and expands every % */
        if (isspace((unsigned char)*c) || *c == '%') {
            snprintf(err, errlen,
                     "%s path cannot go into core_pattern (contains whitespace or %%): %s", what,
                     p);
            return -1;
        }
    }
    return 0;
}

int cp_pattern_build(char *out, size_t outlen, const char *handler, const char *config, int pidfd,
                     char *err, size_t errlen)
{
    if (path_ok_in_pattern("handler", handler, err, errlen))
        return -1;
    if (config && path_ok_in_pattern("config", config, err, errlen))
        return -1;
    char buf[4 * PATH_MAX];
    int n = snprintf(buf, sizeof(buf), "|%s%s%s %%P %%i %%I %%s %%t %%u %%g %%d %%c %%h%s", handler,
                     config ? " -c " : "", config ? config : "", pidfd ? " %F" : "");
    if (n < 0 || (size_t)n >= sizeof(buf) || n > CP_PATTERN_MAX) {
        snprintf(err, errlen,
                 "core_pattern would be %d characters, over the kernel's limit of %d: %s\n"
                 "(use a shorter config path, or move crashpack to a shorter directory)",
                 n, CP_PATTERN_MAX, n > 0 && (size_t)n < sizeof(buf) ? buf : "(too long)");
        return -1;
    }
    if ((size_t)n >= outlen) {
        snprintf(err, errlen, "pattern buffer too small");
        return -1;
    }
    memcpy(out, buf, (size_t)n + 1);
    return 0;
}

int cp_pattern_is_handler(const char *pattern)
{
    return pattern[0] == '|' || pattern[0] == '@';
}

int cp_pattern_is_crashpack(const char *pattern)
{
    if (pattern[0] != '|')
        return 0;
    const char *p = pattern + 1;
    while (*p && isspace((unsigned char)*p))
        p++;
    const char *end = p;
    while (*end && !isspace((unsigned char)*end))
        end++;
    const char *base = p;
    for (const char *c = p; c < end; c++)
        if (*c == '/')
            base = c + 1;
    size_t n = strlen(CP_HANDLER_NAME);
    return (size_t)(end - base) == n && !memcmp(base, CP_HANDLER_NAME, n);
}

int cp_pattern_has_pidfd(const char *pattern)
{
    for (const char *p = pattern; *p; p++) {
        if (*p != '%')
            continue;
        if (!p[1])
            break;
        if (p[1] == 'F')
            return 1;
        p++; /* skip the specifier, so %%F is a literal %F */
    }
    return 0;
}

/* ---- sysctls ---- */

int cp_sysctl_read(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t got = 0;
    for (;;) {
        if (got + 1 >= len) {
            close(fd);
            snprintf(err, errlen, "%s: value too long", path);
            return -1;
        }
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got && buf[got - 1] == '\n')
        got--;
    buf[got] = 0;
    return 0;
}

int cp_sysctl_write(const char *path, const char *value, char *err, size_t errlen)
{
    /* the trailing newline makes an empty value writable too (a zero-length write is a no-op) */
    size_t n = strlen(value);
    char *buf = malloc(n + 2);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(buf, value, n);
    buf[n] = '\n';
    buf[n + 1] = 0;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s for writing: %s", path, strerror(errno));
        free(buf);
        return -1;
    }
    ssize_t w = write(fd, buf, n + 1); /* one write: sysctls do not append */
    int e = errno;
    free(buf);
    if (close(fd) && w >= 0) {
        w = -1;
        e = errno;
    }
    if (w != (ssize_t)(n + 1)) {
        snprintf(err, errlen, "cannot write %s: %s", path, w < 0 ? strerror(e) : "short write");
        return -1;
    }
    return 0;
}

int cp_sysctl_read_uint(const char *path, unsigned *out, char *err, size_t errlen)
{
    char buf[64], *end;
    if (cp_sysctl_read(path, buf, sizeof(buf), err, errlen))
        return -1;
    errno = 0;
    unsigned long v = strtoul(buf, &end, 10);
    if (errno || end == buf || *end || v > UINT_MAX || buf[0] == '-') {
        snprintf(err, errlen, "%s: not a number: `%s`", path, buf);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

int cp_sysctl_write_uint(const char *path, unsigned value, char *err, size_t errlen)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%u", value);
    return cp_sysctl_write(path, buf, err, errlen);
}

int cp_core_pattern_set(const char *path, const char *pattern, const char *revert, char *err,
                        size_t errlen)
{
    char back[CP_PATTERN_BUF], e2[256];
    if (cp_sysctl_write(path, pattern, err, errlen))
        return -1;
    int read_ok = cp_sysctl_read(path, back, sizeof(back), e2, sizeof(e2)) == 0;
    if (read_ok && !strcmp(back, pattern))
        return 0;
    int reverted = revert && cp_sysctl_write(path, revert, e2, sizeof(e2)) == 0;
    snprintf(err, errlen, "the kernel did not keep core_pattern `%s` (%s)%s", pattern,
             read_ok ? "it reads back differently" : "reading it back fails",
             !revert    ? ""
             : reverted ? "; previous value restored"
                        : "; COULD NOT restore the previous value");
    return -1;
}

/* ---- files ---- */

static int read_small_at(int dfd, const char *name, const char *shown, size_t max, char **out,
                         int trusted, char *err, size_t errlen)
{
    *out = NULL;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        snprintf(err, errlen, "cannot open %s: %s", shown, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is not a regular file", shown);
        close(fd);
        return -1;
    }
    /* the state decides what root writes into core_pattern: nobody else may have written it */
    if (trusted && ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022))) {
        snprintf(err, errlen, "%s is writable by someone other than root; not trusting it", shown);
        close(fd);
        return -1;
    }
    if ((size_t)st.st_size > max) {
        snprintf(err, errlen, "%s is too large (%lld bytes)", shown, (long long)st.st_size);
        close(fd);
        return -1;
    }
    char *buf = malloc(max + 1);
    if (!buf) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, max + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read %s: %s", shown, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got > max) {
            snprintf(err, errlen, "%s is too large", shown);
            free(buf);
            close(fd);
            return -1;
        }
    }
    close(fd);
    if (memchr(buf, 0, got)) {
        snprintf(err, errlen, "%s holds NUL bytes", shown);
        free(buf);
        return -1;
    }
    buf[got] = 0;
    *out = buf;
    return 0;
}

int cp_file_read_small(const char *path, size_t max, char **out, char *err, size_t errlen)
{
    return read_small_at(AT_FDCWD, path, path, max, out, 0, err, errlen);
}

static int write_atomic_at(int dfd, const char *name, const char *shown, const char *data,
                           size_t len, mode_t mode, char *err, size_t errlen)
{
    char tmp[NAME_MAX + 1];
    if (snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, (int)getpid()) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "%s: name too long", shown);
        return -1;
    }
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST) {
        /* left by a dead process with our pid */
        unlinkat(dfd, tmp, 0);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    }
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a temporary file next to %s: %s", shown,
                 strerror(errno));
        return -1;
    }
    if (fchmod(fd, mode) || write_all(fd, data, len) || fsync(fd)) {
        snprintf(err, errlen, "cannot write %s: %s", shown, strerror(errno));
        close(fd);
        unlinkat(dfd, tmp, 0);
        return -1;
    }
    if (close(fd) || renameat(dfd, tmp, dfd, name)) {
        snprintf(err, errlen, "cannot replace %s: %s", shown, strerror(errno));
        unlinkat(dfd, tmp, 0);
        return -1;
    }
    fsync(dfd);
    return 0;
}

/* Splits a path into an opened parent directory and the final name. */
static int open_parent(const char *path, const char **name, char *err, size_t errlen)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash) {
        snprintf(dir, sizeof(dir), ".");
        *name = path;
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        if (n >= sizeof(dir)) {
            snprintf(err, errlen, "%s: path too long", path);
            return -1;
        }
        memcpy(dir, path, n);
        dir[n] = 0;
        *name = slash + 1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        snprintf(err, errlen, "cannot open directory %s: %s", dir, strerror(errno));
    return dfd;
}

int cp_file_write_atomic(const char *path, const char *data, size_t len, mode_t mode, char *err,
                         size_t errlen)
{
    const char *name;
    int dfd = open_parent(path, &name, err, errlen);
    if (dfd < 0)
        return -1;
    int rc = write_atomic_at(dfd, name, path, data, len, mode, err, errlen);
    close(dfd);
    return rc;
}

int cp_file_remove(const char *path, char *err, size_t errlen)
{
    const char *name;
    int dfd = open_parent(path, &name, err, errlen);
    if (dfd < 0)
        return -1;
    int rc = 0;
    if (unlinkat(dfd, name, 0) && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove %s: %s", path, strerror(errno));
        rc = -1;
    } else {
        fsync(dfd);
    }
    close(dfd);
    return rc;
}

/* ---- state file ---- */

/* Opens the state directory, creating it (0755) when asked; 1 when absent and not created. */
static int open_state_dir(const char *dir, int create, int *dfd, char *err, size_t errlen)
{
    if (create && mkdir(dir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !create)
            return 1;
        snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022)) {
        snprintf(err, errlen, "%s must be a directory owned by root and writable only by it", dir);
        close(fd);
        return -1;
    }
    *dfd = fd;
    return 0;
}

static char *state_to_json(const struct cp_install_state *s)
{
    cJSON *root = cJSON_CreateObject(), *prev = cJSON_CreateObject(),
          *dropin = cJSON_CreateObject(), *user = cJSON_CreateObject();
    char *text = NULL;
    if (!root || !prev || !dropin || !user) {
        cJSON_Delete(prev);
        cJSON_Delete(dropin);
        cJSON_Delete(user);
        goto out;
    }
    cJSON_AddItemToObject(root, "previous", prev);
    cJSON_AddItemToObject(root, "dropin", dropin);
    cJSON_AddItemToObject(root, "user", user);
    int ok = cJSON_AddStringToObject(root, "format", STATE_FORMAT) &&
             cJSON_AddNumberToObject(root, "version", STATE_VERSION) &&
             cJSON_AddNumberToObject(root, "installed_at", (double)s->installed_at) &&
             cJSON_AddStringToObject(root, "core_pattern", s->pattern) &&
             cJSON_AddNumberToObject(root, "core_pipe_limit", s->pipe_limit) &&
             cJSON_AddStringToObject(prev, "core_pattern", s->prev_pattern) &&
             cJSON_AddNumberToObject(prev, "core_pipe_limit", s->prev_pipe_limit) &&
             cJSON_AddStringToObject(dropin, "path", CP_DROPIN_PATH) &&
             cJSON_AddBoolToObject(dropin, "written", s->dropin_written) &&
             cJSON_AddBoolToObject(dropin, "existed", s->dropin_existed) &&
             (s->dropin_prev ? cJSON_AddStringToObject(dropin, "previous_content", s->dropin_prev)
                             : cJSON_AddNullToObject(dropin, "previous_content")) &&
             cJSON_AddStringToObject(user, "name", CP_USER) &&
             cJSON_AddBoolToObject(user, "created", s->user_created) &&
             cJSON_AddBoolToObject(user, "group_created", s->group_created);
    if (ok)
        text = cJSON_Print(root);
out:
    cJSON_Delete(root);
    return text;
}

static int state_from_json(const char *text, struct cp_install_state *s)
{
    memset(s, 0, sizeof(*s));
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return -1;
    int rc = -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(root, "installed_at");
    const cJSON *prev = cJSON_GetObjectItemCaseSensitive(root, "previous");
    const cJSON *dropin = cJSON_GetObjectItemCaseSensitive(root, "dropin");
    uint64_t version, limit, prev_limit;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, STATE_FORMAT) ||
        !cp_juint(root, "version", UINT_MAX, &version) || version != STATE_VERSION ||
        !cJSON_IsNumber(at) || !cp_jstrcpy(root, "core_pattern", s->pattern, sizeof(s->pattern)) ||
        !cp_juint(root, "core_pipe_limit", UINT_MAX, &limit) || !cJSON_IsObject(prev) ||
        !cp_jstrcpy(prev, "core_pattern", s->prev_pattern, sizeof(s->prev_pattern)) ||
        !cp_juint(prev, "core_pipe_limit", UINT_MAX, &prev_limit) || !cJSON_IsObject(dropin) ||
        !cp_jbool(dropin, "written", &s->dropin_written) ||
        !cp_jbool(dropin, "existed", &s->dropin_existed))
        goto out;
    s->pipe_limit = (unsigned)limit;
    s->prev_pipe_limit = (unsigned)prev_limit;
    s->installed_at = (long long)at->valuedouble;
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(dropin, "previous_content");
    if (cJSON_IsString(pc)) {
        if (!(s->dropin_prev = strdup(pc->valuestring)))
            goto out;
    } else if (!cJSON_IsNull(pc)) {
        goto out;
    }
    if (s->dropin_existed && !s->dropin_prev)
        goto out;
    /* the user: absent in the states of installs before it existed (none created) */
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (user && (!cJSON_IsObject(user) || !cp_jbool(user, "created", &s->user_created) ||
                 !cp_jbool(user, "group_created", &s->group_created)))
        goto out;
    rc = 0;
out:
    cJSON_Delete(root);
    if (rc)
        cp_install_state_free(s);
    return rc;
}

int cp_state_load(const char *dir, struct cp_install_state *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    int dfd, rc = open_state_dir(dir, 0, &dfd, err, errlen);
    if (rc)
        return rc;
    char shown[PATH_MAX], *text;
    snprintf(shown, sizeof(shown), "%s/%s", dir, CP_STATE_NAME);
    rc = read_small_at(dfd, CP_STATE_NAME, shown, STATE_MAX, &text, 1, err, errlen);
    close(dfd);
    if (rc)
        return rc;
    if (state_from_json(text, s)) {
        snprintf(err, errlen, "%s is damaged (not a crashpack install state)", shown);
        rc = -1;
    }
    free(text);
    return rc;
}

int cp_state_save(const char *dir, const struct cp_install_state *s, char *err, size_t errlen)
{
    char *text = state_to_json(s);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int dfd, rc = open_state_dir(dir, 1, &dfd, err, errlen);
    if (rc == 0) {
        char shown[PATH_MAX];
        snprintf(shown, sizeof(shown), "%s/%s", dir, CP_STATE_NAME);
        size_t len = strlen(text);
        text[len] = '\n'; /* over the NUL: the file ends with a newline */
        rc = write_atomic_at(dfd, CP_STATE_NAME, shown, text, len + 1, 0600, err, errlen);
        close(dfd);
    }
    free(text);
    return rc;
}

int cp_state_remove(const char *dir, char *err, size_t errlen)
{
    int dfd, rc = open_state_dir(dir, 0, &dfd, err, errlen);
    if (rc)
        return rc > 0 ? 0 : -1;
    if (unlinkat(dfd, CP_STATE_NAME, 0) && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove %s/%s: %s", dir, CP_STATE_NAME, strerror(errno));
        rc = -1;
    } else {
        fsync(dfd);
    }
    close(dfd);
    return rc;
}

int cp_state_equal(const struct cp_install_state *a, const struct cp_install_state *b)
{
    return !strcmp(a->pattern, b->pattern) && a->pipe_limit == b->pipe_limit &&
           !strcmp(a->prev_pattern, b->prev_pattern) && a->prev_pipe_limit == b->prev_pipe_limit &&
           a->dropin_written == b->dropin_written && a->dropin_existed == b->dropin_existed &&
           !a->dropin_prev == !b->dropin_prev &&
           (!a->dropin_prev || !strcmp(a->dropin_prev, b->dropin_prev)) &&
           a->user_created == b->user_created && a->group_created == b->group_created;
}

/* ---- sysctl.d drop-in ---- */

char *cp_dropin_render(const char *pattern, unsigned pipe_limit)
{
    char *out = NULL;
    if (asprintf(&out,
                 CP_DROPIN_MARKER
                 "; `crashpack uninstall` removes it.\n"
                 "# Puts crashpack-capture into core_pattern at boot, after distro files such as\n"
                 "# 50-coredump.conf.\n"
                 "kernel.core_pattern = %s\n"
                 "kernel.core_pipe_limit = %u\n",
                 pattern, pipe_limit) < 0)
        return NULL;
    return out;
}

int cp_dropin_is_ours(const char *content)
{
    size_t n = strlen(CP_DROPIN_MARKER);
    for (const char *line = content; line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (!strncmp(line, CP_DROPIN_MARKER, n))
            return 1;
    }
    return 0;
}

/* ---- the system user ---- */

/* Whether the file's entries (fgetpwent or fgetgrent) name `name`. */
static int db_has(const char *path, int group, const char *name)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int found = 0;
    if (group) {
        struct group *g;
        while (!found && (g = fgetgrent(f)))
            found = !strcmp(g->gr_name, name);
    } else {
        struct passwd *pw;
        while (!found && (pw = fgetpwent(f)))
            found = !strcmp(pw->pw_name, name);
    }
    fclose(f);
    return found;
}

int cp_user_exists(const char *name)
{
    return db_has("/etc/passwd", 0, name);
}

int cp_group_exists(const char *name)
{
    return db_has("/etc/group", 1, name);
}

/* Runs argv[0] (an absolute path) with a fixed environment, its output kept; 0 when it exits 0,
 * else -1 with err: the command and the last line it printed. */
static int run_tool(char *const argv[], char *err, size_t errlen)
{
    char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    char out[1024];
    size_t n = 0;
    for (;;) { /* until the tool's end (at once when it did not start) */
        if (n == sizeof(out) - 1)
            n = 0; /* the end is what counts */
        ssize_t r = read(p[0], out + n, sizeof(out) - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(p[0]);
    int st = 0;
    while (!rc && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!rc && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        n--;
    out[n] = 0;
    char *last = strrchr(out, '\n');
    snprintf(err, errlen, "%s %s: %s", argv[0], argv[1],
             rc     ? strerror(rc)
             : *out ? (last ? last + 1 : out)
                    : "failed");
    return -1;
}

int cp_user_create(int *group_created, char *err, size_t errlen)
{
    int has_group = cp_group_exists(CP_USER);
    *group_created = 0;
    if (has_group < 0) {
        snprintf(err, errlen, "cannot read /etc/group");
        return -1;
    }
    char *shell = access("/usr/sbin/nologin", X_OK) == 0 ? "/usr/sbin/nologin" : "/bin/false";
    char *argv[16];
    int a = 0;
    argv[a++] = CP_USERADD;
    argv[a++] = "--system";
    argv[a++] = "--no-create-home";
    argv[a++] = "--home-dir";
    argv[a++] = "/nonexistent";
    argv[a++] = "--shell";
    argv[a++] = shell;
    argv[a++] = "--comment";
    argv[a++] = "crashpack enrichment";
    if (has_group) { /* the group of that name that is already there */
        argv[a++] = "--gid";
        argv[a++] = CP_USER;
    } else {
        argv[a++] = "--user-group";
    }
    argv[a++] = CP_USER;
    argv[a] = NULL;
    if (run_tool(argv, err, errlen))
        return -1;
    *group_created = !has_group;
    return 0;
}

int cp_user_remove(int group, char *err, size_t errlen)
{
    char *argv[] = {CP_USERDEL, CP_USER, NULL};
    if (cp_user_exists(CP_USER) > 0 && run_tool(argv, err, errlen))
        return -1;
    /* the group, unless userdel removed it with the user (USERGROUPS_ENAB) */
    char *gargv[] = {CP_GROUPDEL, CP_USER, NULL};
    if (group && cp_group_exists(CP_USER) > 0 && run_tool(gargv, err, errlen))
        return -1;
    return 0;
}

/* ---- kernel ---- */

int cp_kernel_has_pidfd(char *release, size_t len)
{
    struct utsname u;
    int major, minor;
    if (uname(&u)) {
        if (len)
            snprintf(release, len, "unknown");
        return -1;
    }
    if (len)
        snprintf(release, len, "%s", u.release);
    if (sscanf(u.release, "%d.%d", &major, &minor) != 2)
        return -1;
    return major > 6 || (major == 6 && minor >= 16);
}
