/* checkpoint.c - the last saved checkpoint: where it is (ckpt_collect, before the drain) and
 * whether it is intact (ckpt_verdict, in the finisher).
 *
 * Sources, best first: (1) the state file kept by python/crashpack_checkpoint.py, (2)
 * CRASHPACK_CHECKPOINT / CRASHPACK_CHECKPOINT_DIR in the process environment, (3) checkpoint-like
 * files open in /proc/<pid>/fd or mapped in /proc/<pid>/maps. The first source that names a
 * regular file wins; what was considered is listed as candidates.
 *
 * The crashed process names these paths, so none is touched as root: a child becomes the crashed
 * uid/gid, resolves every path inside the process's root (/proc/<pid>/root, openat2
 * RESOLVE_IN_ROOT, so containers work) with O_PATH and without following a symlink in the last
 * component (the helper's state file: in no component at all), and only fstats what it finds --
 * an O_PATH open never opens a FIFO or a device, and nothing of a checkpoint is read here. A
 * network mount that stopped answering can still hang that child, so the parent waits with poll
 * under checkpoint_timeout_s, SIGKILLs it and never waits for a child in uninterruptible sleep.
 * The child sends its findings as JSON over a socket, with the O_PATH descriptors of the chosen
 * file and its directory (SCM_RIGHTS): the finisher's verdict then checks the very file the job
 * wrote, whatever happens to its name, and as the crashed uid again.
 *
 * The helper's state file is trusted only when its directory and the file belong to the crashed
 * uid and nobody else can write them, so one user cannot plant a path in another user's bundle.
 */
#include "capture.h"
#include "privs.h"
#include "rootopen.h"
#include "utf8.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RESULT_MAX (256u << 10) /* checkpoint.json from the child */
#define STATE_MAX (64u << 10)   /* the helper's state file */
#define VERDICT_MAX (1u << 20)  /* crashpack checkpoint --json output */
#define MAPS_MAX (8u << 20)
#define SOURCE_MAX 16 /* candidates kept per source */

static unsigned timeout_s(const struct cap *c)
{
    return c->cfg.checkpoint_timeout_s ? c->cfg.checkpoint_timeout_s : 5;
}

/* ---- JSON helpers (paths are bytes; checkpoint.json must stay valid UTF-8) ---- */

/* s as valid UTF-8 (each invalid byte U+FFFD: common/utf8.c, the analyzer's validator). */
static void add_text(cJSON *o, const char *k, const char *s)
{
    char *t = cp_utf8_clean(s);
    if (!t)
        return;
    cJSON_AddStringToObject(o, k, t);
    free(t);
}

/* Sets (not adds: cJSON keeps duplicate keys) a text field. */
static void set_text(cJSON *o, const char *k, const char *s)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    add_text(o, k, s);
}

static void add_u64(cJSON *o, const char *k, uint64_t v)
{
    if (v < (1ull << 53)) {
        cJSON_AddNumberToObject(o, k, (double)v);
    } else { /* beyond a double's exact range (some filesystems' inode numbers) */
        char b[24];
        snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
        cJSON_AddStringToObject(o, k, b);
    }
}

static const char *type_name(mode_t m)
{
    return S_ISREG(m)    ? "file"
           : S_ISLNK(m)  ? "symlink"
           : S_ISFIFO(m) ? "fifo"
           : S_ISSOCK(m) ? "socket"
           : S_ISCHR(m)  ? "char-device"
           : S_ISBLK(m)  ? "block-device"
           : S_ISDIR(m)  ? "directory"
                         : "unknown";
}

/* ---- the collector child ---- */

struct kid {
    struct cap *c;
    struct proc_root root; /* its root and working directory (rootopen.h) */
    char cwd[PATH_MAX];    /* the working directory's text, for showing relative paths */
    pid_t nspid;           /* the pid the process sees (its state file's name) */
    long long starttime;
    cJSON *out;   /* checkpoint.json */
    cJSON *cands; /* out.candidates */
    cJSON *best;  /* chosen candidate (in cands), or NULL */
    cJSON *first; /* first candidate, for the not-found report */
    int best_fd, best_dirfd;
    char refused[400]; /* the first refusal, for capture.json */
    int sock;          /* to the parent */
};

static void send_all(int sock, const char *s, size_t len, const int *fds, int nfds);

/* Tells the parent what the child is about to look at: if a dead mount hangs it there, the
 * timeout's reason can say where. One "#text" line each, before the JSON result. */
static void stage(int sock, const char *what, const char *path)
{
    char line[600];
    int n = snprintf(line, sizeof(line), "#%s%s%s", what, path ? " " : "", path ? path : "");
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    for (int i = 1; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    send_all(sock, line, (size_t)n, NULL, 0);
}

/* O_PATH descriptor of `path` as the crashed process sees it (rootopen.h: inside its root,
 * relative ones from its working directory). The last component is never followed; with
 * `strict`, no component may be a symlink. */
static int open_in_root(struct kid *k, const char *path, int flags, int strict)
{
    return proc_open(&k->root, path, O_PATH | flags, strict ? PROC_OPEN_STRICT : 0, NULL);
}

/* An O_PATH descriptor reopened for reading through its magic link: no second lookup, so the
 * file checked is the file read. */
static int reopen_rd(int pathfd)
{
    char link[40];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", pathfd);
    return open(link, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
}

/* type, size, mtime, inode, device (and a symlink's target text) of an O_PATH descriptor */
static int describe(int fd, cJSON *o, struct stat *st)
{
    if (fstat(fd, st)) {
        add_text(o, "error", strerror(errno));
        return -1;
    }
    cJSON_AddStringToObject(o, "type", type_name(st->st_mode));
    if (S_ISLNK(st->st_mode)) {
        char tg[PATH_MAX];
        ssize_t n = readlinkat(fd, "", tg, sizeof(tg) - 1);
        if (n >= 0) {
            tg[n] = 0;
            add_text(o, "target", tg);
        }
    }
    add_u64(o, "size", (uint64_t)st->st_size);
    cJSON_AddNumberToObject(o, "mtime", (double)st->st_mtim.tv_sec);
    cJSON_AddNumberToObject(o, "mtime_nsec", (double)st->st_mtim.tv_nsec);
    add_u64(o, "inode", (uint64_t)st->st_ino);
    char dev[32];
    snprintf(dev, sizeof(dev), "%u:%u", major(st->st_dev), minor(st->st_dev));
    cJSON_AddStringToObject(o, "device", dev);
    return 0;
}

static void refuse(struct kid *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(struct kid *k, const char *fmt, ...)
{
    if (k->refused[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->refused, sizeof(k->refused), fmt, ap);
    va_end(ap);
}

/* The path as the process would print it: relative ones joined to its working directory. */
static void display_path(struct kid *k, const char *path, char *out, size_t n)
{
    if (path[0] == '/' || !k->cwd[0])
        snprintf(out, n, "%s", path);
    else
        snprintf(out, n, "%s/%s", strcmp(k->cwd, "/") ? k->cwd : "", path);
}

static const char *source_label(const char *source)
{
    return !strcmp(source, "helper")    ? "the helper's last save"
           : !strcmp(source, "env")     ? "CRASHPACK_CHECKPOINT"
           : !strcmp(source, "env_dir") ? "CRASHPACK_CHECKPOINT_DIR"
           : !strcmp(source, "open_fd") ? "an open file"
                                        : "a mapped file";
}

/* Records a candidate. fd is its O_PATH descriptor (or -1, errno in err); dirfd that of its
 * directory (or -1). The first regular file recorded becomes the checkpoint, and keeps both
 * descriptors; everything else is closed. Returns the candidate. */
static cJSON *candidate(struct kid *k, const char *source, const char *path, int fd, int err,
                        int dirfd)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", source);
    add_text(o, "path", path);
    struct stat st;
    int usable = 0;
    if (fd < 0) {
        cJSON_AddStringToObject(o, "status", err == ENOENT ? "missing" : "error");
        add_text(o, "reason",
                 err == ELOOP ? "a symlink in its path (not followed)" : strerror(err));
    } else if (describe(fd, o, &st)) {
        cJSON_AddStringToObject(o, "status", "error");
    } else {
        if (S_ISREG(st.st_mode)) {
            usable = 1;
            cJSON_AddStringToObject(o, "status", "ok");
        } else {
            cJSON_AddStringToObject(o, "status", "refused");
            char why[200];
            snprintf(why, sizeof(why), "%s: %s",
                     S_ISLNK(st.st_mode) ? "a symlink" : type_name(st.st_mode),
                     S_ISLNK(st.st_mode) ? "not followed" : "not a regular file, not opened");
            add_text(o, "reason", why);
            refuse(k, "%s names %s", source_label(source), why);
        }
    }
    cJSON_AddItemToArray(k->cands, o);
    if (!k->first)
        k->first = o;
    if (usable && !k->best) {
        k->best = o;
        k->best_fd = fd;
        k->best_dirfd = dirfd;
    } else {
        if (fd >= 0)
            close(fd);
        if (dirfd >= 0)
            close(dirfd);
    }
    return o;
}

/* The O_PATH descriptor of a path's directory (symlinks among the directories are allowed: a
 * scan there only lists names and opens regular files without following links). */
static int parent_dir(struct kid *k, const char *path)
{
    char d[PATH_MAX];
    snprintf(d, sizeof(d), "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash)
        return open_in_root(k, ".", O_DIRECTORY, 0);
    if (slash == d)
        slash[1] = 0;
    else
        *slash = 0;
    return open_in_root(k, d, O_DIRECTORY, 0);
}

static void path_candidate(struct kid *k, const char *source, const char *path)
{
    char shown[PATH_MAX + 8];
    display_path(k, path, shown, sizeof(shown));
    int fd = open_in_root(k, path, 0, 0);
    int err = errno;
    candidate(k, source, shown, fd, err, fd >= 0 ? parent_dir(k, path) : -1);
}

/* A helper file (the state or the in-progress marker) in the state directory, trusted only when
 * it is a regular file of the crashed uid that nobody else can write. Returns its parsed JSON,
 * or NULL with *status and why set. */
static cJSON *helper_file(struct kid *k, int dfd, const char *name, const char **status, char *why,
                          size_t whylen)
{
    int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *status = errno == ENOENT ? "absent" : "failed";
        snprintf(why, whylen, "%s: %s", name, strerror(errno));
        return NULL;
    }
    struct stat st;
    *status = "refused";
    if (fstat(fd, &st))
        snprintf(why, whylen, "%s: %s", name, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(why, whylen, "%s is a %s, not a regular file", name, type_name(st.st_mode));
    else if (st.st_uid != k->c->uid)
        snprintf(why, whylen, "%s is owned by uid %u, not by the crashed uid %u", name,
                 (unsigned)st.st_uid, (unsigned)k->c->uid);
    else if (st.st_mode & 022)
        snprintf(why, whylen, "%s is writable by group or others (mode %03o)", name,
                 (unsigned)(st.st_mode & 0777));
    else if ((uint64_t)st.st_size > STATE_MAX)
        snprintf(why, whylen, "%s is larger than %u bytes", name, STATE_MAX);
    else
        *status = NULL;
    if (*status) {
        close(fd);
        return NULL;
    }
    int rfd = reopen_rd(fd);
    close(fd);
    char *buf = malloc(STATE_MAX + 1);
    ssize_t n = rfd >= 0 && buf ? read(rfd, buf, STATE_MAX) : -1;
    if (rfd >= 0)
        close(rfd);
    cJSON *j = NULL;
    if (n >= 0)
        j = cJSON_ParseWithLength(buf, (size_t)n);
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *status = "failed";
        snprintf(why, whylen, "%s: %s", name, n < 0 ? strerror(errno) : "not a JSON object");
        return NULL;
    }
    /* a dead process with the same pid may have left it behind */
    cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
    cJSON *stt = cJSON_GetObjectItemCaseSensitive(j, "starttime");
    if (!cJSON_IsNumber(pid) || (pid_t)pid->valuedouble != k->nspid ||
        (cJSON_IsNumber(stt) && k->starttime >= 0 && (long long)stt->valuedouble != k->starttime)) {
        cJSON_Delete(j);
        *status = "refused";
        snprintf(why, whylen, "%s was left by an earlier process with the same pid (stale)", name);
        return NULL;
    }
    return j;
}

static void copy_step(cJSON *dst, const char *key, const cJSON *src)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(src, "step");
    if (cJSON_IsNumber(s))
        cJSON_AddNumberToObject(dst, key, s->valuedouble);
    else if (cJSON_IsString(s) && s->valuestring)
        add_text(dst, key, s->valuestring);
}

/* The helper's state directory, opened with no symlink in any component and trusted only when
 * it is the crashed uid's and nobody else can write it. Returns NULL, or the state_file status
 * with why set; *dfd is its descriptor or -1 (open even when refused: the caller closes it). */
static const char *state_dir_open(struct kid *k, const char *dir, int *dfd, char *why,
                                  size_t whylen)
{
    const struct cap *c = k->c;
    const char *status = NULL;
    *dfd = open_in_root(k, dir, O_DIRECTORY, 1);
    struct stat st;
    if (*dfd < 0) {
        status = errno == ENOENT                      ? "absent"
                 : errno == ELOOP || errno == ENOTDIR ? "refused"
                                                      : "failed";
        snprintf(why, whylen, "%s: %s", dir,
                 errno == ELOOP ? "a symlink in the path (not followed)" : strerror(errno));
    } else if (fstat(*dfd, &st)) {
        status = "failed";
        snprintf(why, whylen, "%s: %s", dir, strerror(errno));
    } else if (st.st_uid != c->uid) {
        status = "refused";
        snprintf(why, whylen, "%s is owned by uid %u, not by the crashed uid %u", dir,
                 (unsigned)st.st_uid, (unsigned)c->uid);
    } else if (st.st_mode & 022) {
        status = "refused";
        snprintf(why, whylen, "%s is writable by group or others (mode %03o)", dir,
                 (unsigned)(st.st_mode & 0777));
    }
    return status;
}

/* The in-progress marker next to the state file: a save that was running when the process
 * died (save_in_progress, in_progress), or why the marker was not trusted. */
static void note_save_in_progress(struct kid *k, cJSON *sf, int dfd)
{
    char mname[64], mwhy[300];
    const char *mstatus;
    snprintf(mname, sizeof(mname), "checkpoint-%d.saving", (int)k->nspid);
    cJSON *mark = helper_file(k, dfd, mname, &mstatus, mwhy, sizeof(mwhy));
    close(dfd);
    cJSON_AddBoolToObject(k->out, "save_in_progress", mark != NULL);
    if (mark) {
        cJSON *ip = cJSON_AddObjectToObject(k->out, "in_progress");
        cJSON *p = cJSON_GetObjectItemCaseSensitive(mark, "path");
        cJSON *started = cJSON_GetObjectItemCaseSensitive(mark, "started");
        if (cJSON_IsString(p) && p->valuestring)
            add_text(ip, "path", p->valuestring);
        copy_step(ip, "step", mark);
        if (cJSON_IsNumber(started))
            cJSON_AddNumberToObject(ip, "started", started->valuedouble);
        cJSON_Delete(mark);
    } else if (strcmp(mstatus, "absent")) {
        add_text(sf, "in_progress_marker", mwhy);
    }
}

/* The state file's last completed save, as the helper's candidate (with what the helper
 * recorded of it: step, size, time). Frees state. */
static void last_save_candidate(struct kid *k, cJSON *sf, cJSON *state)
{
    cJSON *last = cJSON_GetObjectItemCaseSensitive(state, "last");
    cJSON *lp = cJSON_GetObjectItemCaseSensitive(last, "path");
    cJSON *hist = cJSON_GetObjectItemCaseSensitive(state, "history");
    if (cJSON_IsArray(hist))
        cJSON_AddNumberToObject(sf, "saves_recorded", cJSON_GetArraySize(hist));
    if (!cJSON_IsString(lp) || !lp->valuestring || !lp->valuestring[0]) {
        cJSON_AddStringToObject(sf, "note", "no completed save recorded yet");
        cJSON_Delete(state);
        return;
    }
    int before = cJSON_GetArraySize(k->cands);
    path_candidate(k, "helper", lp->valuestring);
    cJSON *cand = cJSON_GetArrayItem(k->cands, before);
    copy_step(cand, "step", last);
    cJSON *rs = cJSON_GetObjectItemCaseSensitive(last, "size");
    cJSON *rt = cJSON_GetObjectItemCaseSensitive(last, "time");
    if (cJSON_IsNumber(rs))
        cJSON_AddNumberToObject(cand, "recorded_size", rs->valuedouble);
    if (cJSON_IsNumber(rt))
        cJSON_AddNumberToObject(cand, "saved_at", rt->valuedouble);
    cJSON_Delete(state);
}

/* (1) the helper's state file */
static void src_helper(struct kid *k)
{
    struct cap *c = k->c;
    cJSON *sf = cJSON_AddObjectToObject(k->out, "state_file");
    const char *env = c->secure ? NULL : cap_env(c, "CRASHPACK_STATE_DIR");
    char dir[PATH_MAX];
    if (env && env[0] == '/')
        snprintf(dir, sizeof(dir), "%s", env);
    else
        snprintf(dir, sizeof(dir), "/tmp/crashpack-%u", (unsigned)c->uid);
    char name[64], path[PATH_MAX + 64];
    snprintf(name, sizeof(name), "checkpoint-%d.json", (int)k->nspid);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    add_text(sf, "path", path);
    if (env && env[0] != '/')
        cJSON_AddStringToObject(sf, "note", "CRASHPACK_STATE_DIR is not absolute: ignored");

    char why[400] = "";
    stage(k->sock, "the helper's state file", path);
    int dfd;
    const char *status = state_dir_open(k, dir, &dfd, why, sizeof(why));
    cJSON *state = NULL;
    if (!status)
        state = helper_file(k, dfd, name, &status, why, sizeof(why));
    if (status) {
        cJSON_AddStringToObject(sf, "status", status);
        add_text(sf, "reason", why);
        if (!strcmp(status, "refused"))
            refuse(k, "helper state file refused: %s", why);
        if (dfd >= 0)
            close(dfd);
        return;
    }
    cJSON_AddStringToObject(sf, "status", "ok");
    note_save_in_progress(k, sf, dfd); /* closes dfd */
    last_save_candidate(k, sf, state);
}

/* (2b) the newest checkpoint-like regular file in CRASHPACK_CHECKPOINT_DIR */
static void src_env_dir(struct kid *k, const char *dir)
{
    char shown[PATH_MAX];
    display_path(k, dir, shown, sizeof(shown));
    int dfd = open_in_root(k, dir, O_DIRECTORY, 0);
    int rfd = dfd >= 0 ? openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
    if (!d) {
        int e = errno;
        cJSON *o = candidate(k, "env_dir", shown, -1, e, -1);
        set_text(o, "reason",
                 e == ENOTDIR || e == ELOOP
                     ? "CRASHPACK_CHECKPOINT_DIR is not a directory (or a symlink)"
                     : strerror(e));
        if (rfd >= 0)
            close(rfd);
        if (dfd >= 0)
            close(dfd);
        return;
    }
    char best[256] = "";
    struct timespec bt = {0, 0};
    unsigned matching = 0, other = 0, seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) && seen++ < 100000) {
        size_t l = strlen(e->d_name);
        static const char *const ext[] = {".pt", ".pth", ".bin", ".ckpt", ".safetensors"};
        int match = 0;
        for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]) && !match; i++)
            match = l > strlen(ext[i]) && !strcasecmp(e->d_name + l - strlen(ext[i]), ext[i]);
        struct stat st;
        if (!match || l >= sizeof(best) || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
            continue;
        if (!S_ISREG(st.st_mode)) {
            other++; /* latest.pt -> step_100.pt and the like: never followed */
            continue;
        }
        matching++;
        if (!best[0] || st.st_mtim.tv_sec > bt.tv_sec ||
            (st.st_mtim.tv_sec == bt.tv_sec && st.st_mtim.tv_nsec > bt.tv_nsec)) {
            snprintf(best, sizeof(best), "%s", e->d_name);
            bt = st.st_mtim;
        }
    }
    closedir(d);
    if (!best[0]) {
        cJSON *o = candidate(k, "env_dir", shown, -1, ENOENT, -1);
        char why[160];
        snprintf(why, sizeof(why),
                 "no regular *.pt *.pth *.bin *.ckpt *.safetensors file in the directory%s",
                 other ? " (only symlinks or special files, not followed)" : "");
        set_text(o, "reason", why);
        close(dfd);
        return;
    }
    char path[PATH_MAX + 300];
    snprintf(path, sizeof(path), "%s/%s", strcmp(shown, "/") ? shown : "", best);
    int fd = openat(dfd, best, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    cJSON *o = candidate(k, "env_dir", path, fd, err, dfd);
    cJSON_AddNumberToObject(o, "dir_checkpoints", matching);
}

static int fdinfo_flags(struct kid *k, const char *n, unsigned *flags)
{
    char p[64];
    snprintf(p, sizeof(p), "fdinfo/%s", n);
    size_t len;
    int tr;
    char *s = read_file_at(k->c->procfd, p, 4096, &len, &tr);
    char *f = s ? strstr(s, "flags:") : NULL;
    int ok = f && sscanf(f + 6, " %o", flags) == 1;
    free(s);
    return ok ? 0 : -1;
}

static int name_matches(const char *path)
{
    static const char *const ext[] = {".pt", ".pth", ".bin", ".ckpt", ".safetensors"};
    size_t l = strlen(path);
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (l > strlen(ext[i]) && !strcasecmp(path + l - strlen(ext[i]), ext[i]))
            return 1;
    return 0;
}

/* Of several candidates from one source, the newest regular file wins: move it into place. */
struct pick {
    int fd, dirfd;
    cJSON *o;
    struct timespec mt;
};

static void pick_add(struct pick *best, int fd, int dirfd, cJSON *o, const struct stat *st)
{
    if (best->o &&
        (best->mt.tv_sec > st->st_mtim.tv_sec ||
         (best->mt.tv_sec == st->st_mtim.tv_sec && best->mt.tv_nsec >= st->st_mtim.tv_nsec))) {
        close(fd);
        if (dirfd >= 0)
            close(dirfd);
        return;
    }
    if (best->o) {
        close(best->fd);
        if (best->dirfd >= 0)
            close(best->dirfd);
    }
    *best = (struct pick){fd, dirfd, o, st->st_mtim};
}

static void pick_done(struct kid *k, struct pick *best)
{
    if (!best->o)
        return;
    if (k->best) {
        close(best->fd);
        if (best->dirfd >= 0)
            close(best->dirfd);
        return;
    }
    cJSON_ReplaceItemInObject(best->o, "status", cJSON_CreateString("ok"));
    k->best = best->o;
    k->best_fd = best->fd;
    k->best_dirfd = best->dirfd;
    if (!k->first)
        k->first = best->o;
}

/* (3a) checkpoint-like files the process has open (a save in progress shows up here too) */
static void src_open_fds(struct kid *k)
{
    int dfd = openat(k->c->procfd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        add_text(k->out, "open_fd_error", strerror(errno));
        return;
    }
    struct pick best = {-1, -1, NULL, {0, 0}};
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < SOURCE_MAX) {
        if (e->d_name[0] == '.')
            continue;
        char link[64], target[PATH_MAX];
        snprintf(link, sizeof(link), "fd/%s", e->d_name);
        ssize_t l = readlinkat(k->c->procfd, link, target, sizeof(target) - 1);
        if (l <= 0 || target[0] != '/')
            continue;
        target[l] = 0;
        int deleted = l > 10 && !strcmp(target + l - 10, " (deleted)");
        if (deleted)
            target[l - 10] = 0;
        if (!name_matches(target))
            continue;
        n++;
        /* the magic link itself: the very file the process has open, whatever its name now */
        int fd = openat(k->c->procfd, link, O_PATH | O_CLOEXEC);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "source", "open_fd");
        add_text(o, "path", target);
        cJSON_AddNumberToObject(o, "fd", atoi(e->d_name));
        unsigned flags;
        if (fdinfo_flags(k, e->d_name, &flags) == 0)
            cJSON_AddBoolToObject(o, "open_for_writing", (flags & O_ACCMODE) != O_RDONLY);
        struct stat st;
        cJSON_AddItemToArray(k->cands, o);
        if (fd < 0 || describe(fd, o, &st)) {
            cJSON_AddStringToObject(o, "status", "error");
            if (fd >= 0)
                close(fd);
            continue;
        }
        if (deleted || !S_ISREG(st.st_mode)) {
            cJSON_AddStringToObject(o, "status", deleted ? "deleted" : "refused");
            close(fd);
            continue;
        }
        cJSON_AddStringToObject(o, "status", "candidate");
        pick_add(&best, fd, parent_dir(k, target), o, &st);
    }
    closedir(d);
    pick_done(k, &best);
}

/* (3b) checkpoint-like files mapped into memory (safetensors and torch.load(mmap=True) map
 * what they load: the checkpoint the job resumed from) */
static void src_mapped(struct kid *k)
{
    size_t len;
    int tr;
    char *maps = read_file_at(k->c->procfd, "maps", MAPS_MAX, &len, &tr);
    if (!maps) {
        add_text(k->out, "mapped_error", strerror(errno));
        return;
    }
    struct pick best = {-1, -1, NULL, {0, 0}};
    char seen[SOURCE_MAX][256];
    unsigned n = 0;
    for (char *line = maps, *nl; line && *line && n < SOURCE_MAX; line = nl) {
        nl = strchr(line, '\n');
        if (nl)
            *nl++ = 0;
        char *p = line;
        for (int f = 0; f < 5 && p; f++) { /* address perms offset dev inode */
            p = strchr(p, ' ');
            while (p && *p == ' ')
                p++;
        }
        if (!p || *p != '/')
            continue;
        size_t l = strlen(p);
        int deleted = l > 10 && !strcmp(p + l - 10, " (deleted)");
        if (deleted)
            p[l - 10] = 0;
        if (!name_matches(p))
            continue;
        int dup = 0;
        for (unsigned i = 0; i < n && !dup; i++)
            dup = !strncmp(seen[i], p, sizeof(seen[i]) - 1);
        if (dup)
            continue;
        snprintf(seen[n++], sizeof(seen[0]), "%s", p);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "source", "mapped");
        add_text(o, "path", p);
        cJSON_AddItemToArray(k->cands, o);
        if (deleted) {
            cJSON_AddStringToObject(o, "status", "deleted");
            continue;
        }
        int fd = open_in_root(k, p, 0, 0);
        struct stat st;
        if (fd < 0 || describe(fd, o, &st) || !S_ISREG(st.st_mode)) {
            cJSON_AddStringToObject(o, "status", fd < 0 ? "missing" : "refused");
            if (fd >= 0)
                close(fd);
            continue;
        }
        cJSON_AddStringToObject(o, "status", "candidate");
        pick_add(&best, fd, parent_dir(k, p), o, &st);
    }
    free(maps);
    pick_done(k, &best);
}

static long long stat_starttime(int procfd)
{
    size_t len;
    int tr;
    char *s = procfd >= 0 ? read_file_at(procfd, "stat", 4096, &len, &tr) : NULL;
    char *p = s ? strrchr(s, ')') : NULL;
    long long v = -1;
    /* fields after the comm: state is field 3, starttime field 22 */
    for (int f = 3; p && f <= 22; f++) {
        p = strchr(p + 1, ' ');
        if (p && f == 22)
            v = strtoll(p + 1, NULL, 10);
    }
    free(s);
    return v;
}

static pid_t ns_pid(struct cap *c)
{
    size_t len;
    int tr;
    char *s = c->procfd >= 0 ? read_file_at(c->procfd, "status", 1 << 16, &len, &tr) : NULL;
    pid_t v = cp_nspid_last(s, c->pid); /* innermost namespace: what os.getpid() returned */
    free(s);
    return v;
}

static void send_all(int sock, const char *s, size_t len, const int *fds, int nfds)
{
    for (size_t off = 0; off < len;) {
        struct iovec iov = {(void *)(s + off), len - off};
        struct msghdr m;
        memset(&m, 0, sizeof(m));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        union {
            char buf[CMSG_SPACE(2 * sizeof(int))];
            struct cmsghdr align;
        } u;
        if (off == 0 && nfds > 0) { /* the descriptors ride on the first byte */
            memset(&u, 0, sizeof(u));
            m.msg_control = u.buf;
            m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
            struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
            memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
        }
        ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        off += (size_t)n;
    }
}

/* The collector child's descriptors: above all not the core pipe (the kernel waits for every
 * reader of it) nor the bundle, since this child may hang on a dead mount; only the socket to
 * the parent and /proc/<pid> stay, 0-2 on /dev/null. */
static void child_fds(const struct cap *c, int sock)
{
    for (int fd = 0; fd < 1024; fd++)
        if (fd != sock && fd != c->procfd)
            close(fd);
    close_range(1024, ~0u, 0);
    int nul = open("/dev/null", O_RDWR);
    if (nul == 0) {
        dup2(nul, 1);
        dup2(nul, 2);
    }
}

/* The child's state, set up as root before the switch: checkpoint.json's start, the pid and
 * start time the helper's files are checked against, and the process's root and working
 * directory as O_PATH handles (every lookup through them happens after the switch, with the
 * crashed uid's rights; without its root no path is opened at all, never the host's). */
static void kid_init(struct kid *k, struct cap *c, int sock)
{
    memset(k, 0, sizeof(*k));
    k->c = c;
    k->sock = sock;
    k->best_fd = k->best_dirfd = -1;
    k->out = cJSON_CreateObject();
    k->cands = cJSON_CreateArray();
    k->nspid = ns_pid(c);
    k->starttime = stat_starttime(c->procfd);
    if (proc_root_open(&k->root, c->procfd))
        add_text(k->out, "root", "the process's root is not accessible: no path opened");
    if (c->procfd >= 0) {
        ssize_t l = readlinkat(c->procfd, "cwd", k->cwd, sizeof(k->cwd) - 1);
        k->cwd[l > 0 ? l : 0] = 0;
    }
}

/* The sources, best first, until one names a regular file (as the crashed uid). */
static void look_everywhere(struct kid *k)
{
    const struct cap *c = k->c;
    src_helper(k);
    const char *e1 = c->secure ? NULL : cap_env(c, "CRASHPACK_CHECKPOINT");
    const char *e2 = c->secure ? NULL : cap_env(c, "CRASHPACK_CHECKPOINT_DIR");
    if (!k->best && e1 && *e1) {
        stage(k->sock, "CRASHPACK_CHECKPOINT", e1);
        path_candidate(k, "env", e1);
    }
    if (!k->best && e2 && *e2) {
        stage(k->sock, "CRASHPACK_CHECKPOINT_DIR", e2);
        src_env_dir(k, e2);
    }
    if (!k->best && c->procfd >= 0) {
        stage(k->sock, "the process's open files", NULL);
        src_open_fds(k);
    }
    if (!k->best && c->procfd >= 0) {
        stage(k->sock, "the process's mapped files", NULL);
        src_mapped(k);
    }
    if (c->secure)
        cJSON_AddStringToObject(k->out, "note",
                                "secure process: its environment was not consulted");
}

/* checkpoint.json's reason: where the chosen checkpoint came from, or why none was chosen
 * (top: the candidate shown at the top level, or NULL). */
static void found_reason(const struct kid *k, const cJSON *top, char *reason, size_t n)
{
    if (k->best) {
        const char *src = cJSON_GetObjectItemCaseSensitive(k->best, "source")->valuestring;
        snprintf(reason, n, "%s",
                 !strcmp(src, "helper")    ? "the last completed save recorded by the "
                                             "crashpack_checkpoint helper"
                 : !strcmp(src, "env")     ? "named by CRASHPACK_CHECKPOINT"
                 : !strcmp(src, "env_dir") ? "the newest checkpoint in CRASHPACK_CHECKPOINT_DIR"
                 : !strcmp(src, "open_fd") ? "a checkpoint-like file the process had open"
                                           : "a checkpoint-like file the process had mapped");
    } else if (k->refused[0]) {
        snprintf(reason, n, "%s", k->refused);
    } else if (top) {
        cJSON *r = cJSON_GetObjectItemCaseSensitive(top, "reason");
        snprintf(reason, n, "%s: %s",
                 source_label(cJSON_GetObjectItemCaseSensitive(top, "source")->valuestring),
                 cJSON_IsString(r) ? r->valuestring : "not a regular file");
    } else {
        snprintf(reason, n,
                 "no helper state file, no CRASHPACK_CHECKPOINT(_DIR), no checkpoint-like file "
                 "open or mapped");
    }
}

/* checkpoint.json's top level: found, the chosen candidate's fields (all of them stay under
 * candidates), save_in_progress, reason, refused, candidates. */
static void summarize(struct kid *k)
{
    cJSON *top = k->best ? k->best : k->first;
    cJSON_AddBoolToObject(k->out, "found", k->best != NULL);
    for (cJSON *f = top ? top->child : NULL; f; f = f->next)
        if (strcmp(f->string, "status") && strcmp(f->string, "reason"))
            cJSON_AddItemToObject(k->out, f->string, cJSON_Duplicate(f, 1));
    if (!cJSON_GetObjectItemCaseSensitive(k->out, "save_in_progress"))
        cJSON_AddBoolToObject(k->out, "save_in_progress", 0);
    char reason[600];
    found_reason(k, top, reason, sizeof(reason));
    add_text(k->out, "reason", reason);
    if (k->refused[0])
        add_text(k->out, "refused", k->refused);
    cJSON_AddItemToObject(k->out, "candidates", k->cands);
}

/* Sends checkpoint.json to the parent, with the chosen file's and its directory's O_PATH
 * descriptors (_fds says how many). */
static void send_result(struct kid *k)
{
    int fds[2], nfds = 0;
    if (k->best && k->best_fd >= 0) {
        fds[nfds++] = k->best_fd;
        if (k->best_dirfd >= 0)
            fds[nfds++] = k->best_dirfd;
    }
    cJSON_AddNumberToObject(k->out, "_fds", nfds);
    char *s = cJSON_PrintUnformatted(k->out);
    if (s && strlen(s) < RESULT_MAX)
        send_all(k->sock, s, strlen(s), fds, nfds);
}

static void __attribute__((noreturn)) collect_child(struct cap *c, int sock)
{
    child_fds(c, sock);
    alarm(timeout_s(c) + 1); /* even if the parent is gone */
    struct kid k;
    kid_init(&k, c, sock);
    if (privs_become(c, c->uid, c->gid)) {
        cJSON_AddBoolToObject(k.out, "found", 0);
        cJSON_AddStringToObject(k.out, "reason", "cannot switch to the crashed uid/gid");
        char *s = cJSON_PrintUnformatted(k.out);
        if (s)
            send_all(sock, s, strlen(s), NULL, 0);
        _exit(1);
    }
    look_everywhere(&k);
    summarize(&k);
    send_result(&k);
    _exit(0);
}

/* Reads what the child sends until EOF or the deadline; keeps up to two descriptors. */
static char *receive(int sock, double deadline, int fds[2], int *nfds, int *timed_out)
{
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap + 1);
    *nfds = 0;
    *timed_out = 0;
    while (buf) {
        double left = deadline - now_mono();
        struct pollfd pf = {sock, POLLIN, 0};
        if (left <= 0) {
            *timed_out = 1;
            break;
        }
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue; /* the deadline check above ends it */
        if (len == cap) {
            if (cap >= RESULT_MAX)
                break;
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        struct iovec iov = {buf + len, cap - len};
        union {
            char b[CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } u;
        struct msghdr m;
        memset(&m, 0, sizeof(m));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = u.b;
        m.msg_controllen = sizeof(u.b);
        ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        for (struct cmsghdr *cm = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; cm; cm = CMSG_NXTHDR(&m, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                if (*nfds < 2)
                    fds[(*nfds)++] = fd;
                else
                    close(fd);
            }
        }
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (buf)
        buf[len] = 0;
    return buf;
}

/* Skips the child's "#stage" lines at the start of buf; the last one's text goes to where.
 * Returns the JSON result after them. */
static char *skip_stages(char *buf, char *where, size_t n)
{
    char *res = buf;
    while (res && *res == '#') {
        char *nl = strchr(res, '\n');
        if (!nl)
            break;
        snprintf(where, n, "%.*s", (int)(nl - res - 1), res + 1);
        res = nl + 1;
    }
    return res;
}

/* checkpoint.json when the child sent nothing usable: timed out (stuck at `where`) or no
 * result. Returns the step status, with reason set. */
static const char *no_result(const struct cap *c, cJSON **j, int timed_out, const char *where,
                             int st, char *reason, size_t n)
{
    cJSON_Delete(*j);
    *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(*j, "found", 0);
    if (timed_out)
        snprintf(reason, n,
                 "looking for the checkpoint took over %u s (a dead network mount?), stuck "
                 "at %s: the child was killed",
                 timeout_s(c), where[0] ? where : "the start");
    else
        snprintf(reason, n, "the collector child sent no result (status 0x%x)", st);
    cJSON_AddStringToObject(*j, "reason", reason);
    cJSON_AddBoolToObject(*j, "timed_out", timed_out);
    if (where[0])
        add_text(*j, "stuck_at", where);
    return timed_out ? "timeout" : "failed";
}

/* The child's checkpoint.json: a found checkpoint's path and descriptors (as many as _fds says
 * were sent) are kept for the verdict, other descriptors closed. Returns the step status, with
 * reason set. */
static const char *take_result(struct cap *c, cJSON *j, const int fds[2], int nfds, char *reason,
                               size_t n)
{
    const char *status;
    cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "found");
    cJSON *path = cJSON_GetObjectItemCaseSensitive(j, "path");
    cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "reason");
    cJSON *ref = cJSON_GetObjectItemCaseSensitive(j, "refused");
    cJSON *nf = cJSON_GetObjectItemCaseSensitive(j, "_fds");
    int want = cJSON_IsNumber(nf) ? (int)nf->valuedouble : 0;
    cJSON_DeleteItemFromObjectCaseSensitive(j, "_fds");
    snprintf(reason, n, "%s", cJSON_IsString(r) ? r->valuestring : "");
    if (cJSON_IsTrue(f) && cJSON_IsString(path)) {
        status = "ok";
        c->ckpt_found = 1;
        snprintf(c->ckpt_path, sizeof(c->ckpt_path), "%s", path->valuestring);
        if (nfds >= 1 && want >= 1)
            c->ckpt_fd = fds[0];
        if (nfds >= 2 && want >= 2)
            c->ckpt_dirfd = fds[1];
        /* the child runs as the crashed user: its answer's types are checked, not trusted */
        const char *src = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "source"));
        snprintf(reason, n, "%s (%s)", c->ckpt_path, src ? src : "?");
    } else {
        status = cJSON_IsString(ref) ? "refused" : "absent";
    }
    for (int i = 0; i < nfds; i++)
        if (fds[i] != c->ckpt_fd && fds[i] != c->ckpt_dirfd)
            close(fds[i]);
    return status;
}

/* Adds j (with the step's ms) as the member `name` and records the step; frees j. */
static void add_json_step(struct cap *c, const char *name, cJSON *j, double t, const char *status,
                          const char *reason)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s || bw_add(&c->bw, name, s, strlen(s)))
        cap_step(c, name, "failed", t, "write: %s", strerror(c->bw.err));
    else
        cap_step(c, name, status, t, "%s", reason);
    free(s);
}

void ckpt_collect(struct cap *c)
{
    double t = now_mono();
    c->ckpt_found = 0;
    c->ckpt_fd = c->ckpt_dirfd = -1;
    c->ckpt_path[0] = 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        cap_step(c, "checkpoint.json", "failed", t, "socketpair: %s", strerror(errno));
        return;
    }
    pid_t p = fork();
    if (p == 0) {
        close(sv[0]);
        collect_child(c, sv[1]);
    }
    close(sv[1]);
    if (p < 0) {
        close(sv[0]);
        cap_step(c, "checkpoint.json", "failed", t, "fork: %s", strerror(errno));
        return;
    }
    int fds[2], nfds, timed_out;
    char *buf = receive(sv[0], t + timeout_s(c), fds, &nfds, &timed_out);
    close(sv[0]);
    int st = reap_child(p, timed_out);
    char where[600] = "";
    char *res = skip_stages(buf, where, sizeof(where));
    cJSON *j = res && !timed_out ? cJSON_Parse(res) : NULL;
    free(buf);
    const char *status;
    char reason[600];
    if (timed_out || !cJSON_IsObject(j)) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        status = no_result(c, &j, timed_out, where, st, reason, sizeof(reason));
    } else {
        status = take_result(c, j, fds, nfds, reason, sizeof(reason));
    }
    cJSON_AddNumberToObject(j, "ms", (double)(long)((now_mono() - t) * 1e4) / 10);
    add_json_step(c, "checkpoint.json", j, t, status, reason);
}

/* ---- the verdict, in the finisher ---- */

static void __attribute__((noreturn)) verdict_child(struct cap *c, const char *prog, int out)
{
    /* descriptors: 0 /dev/null, 1 the pipe, 2 /dev/null, 3 the checkpoint, 4 its directory */
    int hi_out = fcntl(out, F_DUPFD, 10);
    int hi_f = c->ckpt_fd >= 0 ? fcntl(c->ckpt_fd, F_DUPFD, 10) : -1;
    int hi_d = c->ckpt_dirfd >= 0 ? fcntl(c->ckpt_dirfd, F_DUPFD, 10) : -1;
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (hi_out < 0 || nul < 0)
        _exit(126);
    dup2(nul, 0);
    dup2(hi_out, 1);
    dup2(nul, 2);
    if (hi_f >= 0)
        dup2(hi_f, 3);
    if (hi_d >= 0)
        dup2(hi_d, 4);
    close_range(hi_f >= 0 ? (hi_d >= 0 ? 5 : 4) : 3, ~0u, 0);
    /* after privs_drop: the switch makes CAP_SETUID/CAP_SETGID effective for itself, then clears
     * every capability (for uid 0 too) */
    if (privs_become(c, c->uid, c->gid))
        _exit(125);
    alarm(timeout_s(c) + 1); /* survives the exec */
    char budget[24];
    snprintf(budget, sizeof(budget), "%u", timeout_s(c) * 500);
    char *argv[16];
    int a = 0;
    argv[a++] = "crashpack";
    argv[a++] = "checkpoint";
    argv[a++] = "--json";
    argv[a++] = "--scan-budget-ms";
    argv[a++] = budget;
    if (hi_f >= 0) {
        argv[a++] = "--fd";
        argv[a++] = "3";
        if (hi_d >= 0) {
            argv[a++] = "--dir-fd";
            argv[a++] = "4";
        }
    } else {
        argv[a++] = "--no-follow";
    }
    argv[a++] = "--";
    argv[a++] = c->ckpt_path;
    argv[a] = NULL;
    char *envp[] = {NULL};
    execve(prog, argv, envp);
    _exit(127);
}

/* The crashpack command next to crashpack-capture, into prog. Returns NULL, or why not. */
static const char *find_crashpack(char *prog, size_t n)
{
    ssize_t l = readlink("/proc/self/exe", prog, n - 32);
    char *slash = l > 0 ? memrchr(prog, '/', (size_t)l) : NULL;
    if (!slash)
        return "cannot locate the crashpack command (readlink /proc/self/exe)";
    strcpy(slash + 1, "crashpack");
    struct stat st;
    if (stat(prog, &st) || !S_ISREG(st.st_mode))
        return "the crashpack command is not next to crashpack-capture";
    return NULL;
}

/* The verdict's output: read until EOF, the deadline (*timed_out) or VERDICT_MAX bytes
 * (*capped). Returns it NUL-terminated, or NULL when out of memory. */
static char *read_verdict(int fd, double deadline, int *timed_out, int *capped)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    *timed_out = *capped = 0;
    while (buf) {
        double left = deadline - now_mono();
        if (left <= 0) {
            *timed_out = 1;
            break;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr <= 0)
            continue;
        if (len == cap) {
            if (cap >= VERDICT_MAX) {
                *capped = 1;
                break;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    if (buf)
        buf[len] = 0;
    return buf;
}

/* Starts `crashpack checkpoint` on the found checkpoint, its stdout on *rd. Returns its pid,
 * or -1 with why set. */
static pid_t start_verdict(struct cap *c, int *rd, const char **why)
{
    char prog[PATH_MAX];
    int pfd[2] = {-1, -1};
    *why = find_crashpack(prog, sizeof(prog));
    if (!*why && pipe2(pfd, O_CLOEXEC))
        *why = "pipe failed";
    pid_t p = *why ? -1 : fork();
    if (p == 0) {
        close(pfd[0]);
        verdict_child(c, prog, pfd[1]);
    }
    if (pfd[1] >= 0)
        close(pfd[1]);
    if (!*why && p < 0)
        *why = "fork failed";
    if (*why && pfd[0] >= 0)
        close(pfd[0]);
    *rd = pfd[0];
    return *why ? -1 : p;
}

/* checkpoint-verdict.json: the command's JSON with when and how it was checked. */
static void record_verdict(struct cap *c, cJSON *j, int ws, double t)
{
    cJSON_AddBoolToObject(j, "checked_at_capture", 1);
    cJSON_AddNumberToObject(j, "checked_at", (double)time(NULL));
    cJSON_AddNumberToObject(j, "ms", (double)(long)((now_mono() - t) * 1e4) / 10);
    if (ws >= 0 && WIFEXITED(ws))
        cJSON_AddNumberToObject(j, "exit_status", WEXITSTATUS(ws));
    cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "verdict");
    cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "reason");
    char summary[300];
    snprintf(summary, sizeof(summary), "%s: %s", cJSON_IsString(v) ? v->valuestring : "?",
             cJSON_IsString(r) ? r->valuestring : "");
    add_json_step(c, "checkpoint-verdict.json", j, t, "ok", summary);
}

/* Runs the verifier under checkpoint_timeout and records its verdict, or why there is none. */
static void run_verdict(struct cap *c, double t)
{
    const char *why;
    int rd;
    pid_t p = start_verdict(c, &rd, &why);
    if (why) {
        cap_step(c, "checkpoint-verdict.json", "failed", t, "%s", why);
        return;
    }
    int timed_out, capped;
    char *buf = read_verdict(rd, t + timeout_s(c), &timed_out, &capped);
    close(rd);
    int ws = reap_child(p, timed_out || capped);
    cJSON *j = buf && !timed_out && !capped ? cJSON_Parse(buf) : NULL;
    free(buf);
    if (cJSON_IsObject(j)) {
        record_verdict(c, j, ws, t);
        return;
    }
    cJSON_Delete(j);
    if (timed_out)
        cap_step(c, "checkpoint-verdict.json", "timeout", t,
                 "crashpack checkpoint took over %u s: killed", timeout_s(c));
    else
        cap_step(c, "checkpoint-verdict.json", "failed", t,
                 "crashpack checkpoint gave no verdict (%s, wait status 0x%x)",
                 capped ? "output over 1 MiB" : "no JSON", ws);
}

void ckpt_verdict(struct cap *c)
{
    double t = now_mono();
    if (!c->ckpt_found) {
        cap_step(c, "checkpoint-verdict.json", "skipped", t, "no checkpoint was found");
        return;
    }
    run_verdict(c, t);
    if (c->ckpt_fd >= 0)
        close(c->ckpt_fd);
    if (c->ckpt_dirfd >= 0)
        close(c->ckpt_dirfd);
    c->ckpt_fd = c->ckpt_dirfd = -1;
}
