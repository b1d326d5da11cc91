/* guard.c - the disk guard (max_use / keep_free, oldest bundles deleted first) and the
 * burst/repeat limits that turn excess crashes into metadata-only bundles.
 *
 * Whose bundles the vacuum deletes (c->room, --room): for the kernel's cores and the agent's
 * OOM-kill captures (fair, the default) the oldest bundles of the uid holding the most bytes
 * first: a user's crash loop evicts its own bundles before anyone else's; for a user's request
 * (own) only that uid's own older bundles, and a capture that would still cross max_use is
 * refused (main.c): one user cannot make room by deleting another's.
 * The owner is the manifest's uid (bundle_peek), read only when something must go.
 *
 * Every bundle passes the guard, whatever its mode: main.c vacuums and refuses the crash (a line
 * in the kernel log, nothing written) when even a metadata-only bundle would cross keep_free;
 * every whole member then goes through guard_member_room (bundlew's room hook), against
 * keep_free and against what max_use leaves this bundle; the core checks keep_free before each
 * frame (stream.c). A crash loop therefore cannot fill the disk: its meta bundles count against
 * max_use and are vacuumed like the others.
 *
 * Limits use slot files created with O_EXCL in <bundle_dir>/.slots: the first K handlers of a
 * time window win a slot and keep full cores. No lock is held, so crashes never wait on each
 * other; windows are fixed (aligned to the window length), not sliding. */
#include "capture.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static uint64_t fs_size(int dirfd, uint64_t *avail)
{
    struct statvfs v;
    if (fstatvfs(dirfd, &v)) {
        *avail = UINT64_MAX;
        return 0;
    }
    *avail = (uint64_t)v.f_bavail * v.f_frsize;
    return (uint64_t)v.f_blocks * v.f_frsize;
}

uint64_t guard_keep_free(struct cap *c)
{
    uint64_t avail, total = fs_size(c->dirfd, &avail);
    uint64_t kf = cp_size_resolve(&c->cfg.keep_free, total);
    /* the default percentage is capped like systemd's: a big disk should not reserve hundreds of
     * GiB; a configured value (keep_free = 100% included) is taken as written */
    if (c->cfg.keep_free.percent && c->cfg.keep_free.capped && kf > (16ULL << 30))
        kf = 16ULL << 30;
    return kf;
}

int guard_free_ok(struct cap *c, uint64_t more)
{
    uint64_t avail;
    fs_size(c->dirfd, &avail);
    return avail >= guard_keep_free(c) + more;
}

struct old {
    char name[256];
    time_t mtime;
    uint64_t bytes;
    long long uid; /* the bundle's process's uid (its manifest); -1 unknown */
    int uid_read, gone;
};

static int by_mtime(const void *a, const void *b)
{
    const struct old *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

#define OWNER_PEEK (256u << 10) /* compressed bytes read for a bundle's manifest */

static long long owner_of(struct cap *c, struct old *o)
{
    if (!o->uid_read) {
        struct bundle_facts f;
        o->uid = bundle_peek(c->dirfd, o->name, OWNER_PEEK, &f) ? -1 : f.uid;
        o->uid_read = 1;
    }
    return o->uid;
}

/* The published bundles of the directory, oldest first, and the bytes they hold. */
static struct old *list_bundles(struct cap *c, size_t *np, uint64_t *used)
{
    *np = 0;
    *used = 0;
    int dfd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* own offset: a dup would share it */
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return NULL;
    }
    struct old *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "crash-", 6) || l < 10 || strcmp(e->d_name + l - 4, ".zst"))
            continue;
        struct stat st;
        if (fstatat(c->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            struct old *nv = realloc(v, cap * sizeof(*v));
            if (!nv)
                break;
            v = nv;
        }
        memset(&v[n], 0, sizeof(v[n]));
        snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
        v[n].mtime = st.st_mtime;
        v[n].bytes = (uint64_t)st.st_blocks * 512;
        *used += v[n].bytes;
        n++;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof(*v), by_mtime);
    *np = n;
    return v;
}

/* The next bundle the vacuum may delete for this capture (c->room), or -1: this uid's oldest
 * (own); the oldest of the uid that holds the most bytes (fair). */
static long next_victim(struct cap *c, struct old *v, size_t n)
{
    long best = -1;
    uint64_t best_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].gone)
            continue;
        long long u = owner_of(c, &v[i]);
        if (c->room == CAP_ROOM_OWN) {
            if (u == (long long)c->uid)
                return (long)i;
            continue;
        }
        uint64_t total = 0; /* fair: the bytes of this bundle's uid */
        for (size_t j = 0; j < n; j++)
            if (!v[j].gone && owner_of(c, &v[j]) == u)
                total += v[j].bytes;
        if (best < 0 || total > best_bytes) {
            best = (long)i;
            best_bytes = total;
        }
    }
    return best;
}

void guard_vacuum(struct cap *c, uint64_t incoming)
{
    double t = now_mono();
    size_t n;
    uint64_t used;
    struct old *v = list_bundles(c, &n, &used);
    uint64_t avail, total = fs_size(c->dirfd, &avail);
    uint64_t max_use = cp_size_resolve(&c->cfg.max_use, total);
    if (c->cfg.max_use.percent && c->cfg.max_use.capped && max_use > (64ULL << 30))
        max_use = 64ULL << 30;
    uint64_t keep_free = guard_keep_free(c);
    /* deleting every old bundle for free space that even that would not give is pointless:
     * keep_free = 100% must not wipe the directory */
    int free_reachable = avail + used >= keep_free + incoming;
    size_t removed = 0;
    uint64_t freed = 0;
    c->guard_short = 0;
    for (;;) {
        int over_use = max_use && used + incoming > max_use;
        int under_free = free_reachable && avail < keep_free + incoming;
        if (!over_use && !under_free)
            break;
        long i = v ? next_victim(c, v, n) : -1;
        if (i < 0) {
            c->guard_short = over_use;
            break;
        }
        v[i].gone = 1;
        if (unlinkat(c->dirfd, v[i].name, 0) == 0) {
            used -= v[i].bytes;
            avail += v[i].bytes;
            freed += v[i].bytes;
            removed++;
        }
    }
    free(v);
    /* what max_use leaves this bundle (its whole members are held to it) */
    c->guard_max_bytes = !max_use ? UINT64_MAX : max_use > used ? max_use - used : 0;
    if (removed)
        cap_step(c, "vacuum", "ok", t, "removed %zu old bundles%s (%llu bytes)", removed,
                 c->room == CAP_ROOM_OWN ? " of this uid" : "", (unsigned long long)freed);
}

int guard_member_room(void *arg, uint64_t bytes)
{
    struct cap *c = arg;
    /* room for capture.json and the index stays free: the finisher writes those unguarded */
    uint64_t reserve = GUARD_CLOSE_RESERVE;
    const char *why = NULL;
    if (!guard_free_ok(c, bytes + reserve))
        why = "keep_free";
    else if (c->bw.file_off + bytes + reserve > c->guard_max_bytes)
        why = "max_use";
    if (!why)
        return 1;
    c->guard_refused++;
    c->guard_refused_bytes += bytes;
    snprintf(c->guard_refused_why, sizeof(c->guard_refused_why), "%s", why);
    return 0;
}

void guard_attach(struct cap *c)
{
    c->bw.room = guard_member_room;
    c->bw.room_arg = c;
}

void guard_report(struct cap *c)
{
    if (c->guard_refused)
        cap_step(c, "disk_guard", "refused", now_mono(),
                 "%u members (%llu bytes compressed) left out: they would cross %s",
                 c->guard_refused, (unsigned long long)c->guard_refused_bytes,
                 c->guard_refused_why);
}

static int take_slot(int sdir, const char *kind, unsigned long window, unsigned k)
{
    for (unsigned i = 0; i < k; i++) {
        char name[96];
        snprintf(name, sizeof(name), "%s-%lu-%u", kind, window, i);
        int fd = openat(sdir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            return 1;
        }
        if (errno != EEXIST)
            return 1; /* cannot count: err on the side of keeping the core */
    }
    return 0;
}

/* Removes slot files of past windows. */
static void slots_gc(int sdir, time_t now, const struct cp_config *cfg)
{
    int dfd = openat(sdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char kind;
        unsigned long w;
        char rest[64];
        if (sscanf(e->d_name, "%c-%63[^-]-%lu", &kind, rest, &w) == 3 && kind == 'r') {
            if (w < (unsigned long)now / (cfg->repeat_window_s ? cfg->repeat_window_s : 1))
                unlinkat(sdir, e->d_name, 0);
        } else if (sscanf(e->d_name, "b-%lu", &w) == 1) {
            if (w < (unsigned long)now / (cfg->burst_window_s ? cfg->burst_window_s : 1))
                unlinkat(sdir, e->d_name, 0);
        }
    }
    closedir(d);
}

int guard_rate_allows_core(struct cap *c, char *why, size_t whylen)
{
    if (mkdirat(c->dirfd, ".slots", 0700) && errno != EEXIST)
        return 1;
    int sdir = openat(c->dirfd, ".slots", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sdir < 0)
        return 1;
    time_t now = time(NULL);
    slots_gc(sdir, now, &c->cfg);
    int ok = 1;
    if (c->cfg.burst_window_s &&
        !take_slot(sdir, "b", (unsigned long)now / c->cfg.burst_window_s, c->cfg.burst_full)) {
        snprintf(why, whylen, "burst limit: %u full cores already in this %u s window",
                 c->cfg.burst_full, c->cfg.burst_window_s);
        ok = 0;
    }
    if (ok && c->cfg.repeat_window_s) {
        /* same executable: FNV-1a of its path */
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = c->exe[0] ? c->exe : c->comm; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ULL;
        char kind[32];
        snprintf(kind, sizeof(kind), "r-%016llx", (unsigned long long)h);
        if (!take_slot(sdir, kind, (unsigned long)now / c->cfg.repeat_window_s,
                       c->cfg.repeat_full)) {
            snprintf(why, whylen, "repeat limit: %u full cores of this executable already in "
                     "this %u s window", c->cfg.repeat_full, c->cfg.repeat_window_s);
            ok = 0;
        }
    }
    close(sdir);
    return ok;
}
