/* hang.c - thread blocking states and mutex deadlocks (see hang.h). */
#include "hang.h"
#include "errmsg.h"
#include "jpath.h"
#include "kvfile.h"
#include "utf8.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SNAP_JSON_MAX (16u << 20)
#define FDS_JSON_MAX (16u << 20)
#define FRAMES_LOOKED_AT 24

/* ---- frame patterns (innermost first; the first match wins) ---- */

/* The patterns are data: rules/hang/wait-frames.txt (its header gives the syntax), read once. */
#define WAIT_FRAMES_FILE "rules/hang/wait-frames.txt"
#define WAIT_FRAMES_MAX (1u << 20)

struct pat {
    const char *state, *detail;
    const char **names;   /* exact function names, or prefixes ending in '*'; NULL-terminated */
    const char **modules; /* module name prefixes; NULL-terminated */
};

static struct {
    pthread_once_t once;
    struct cp_kvfile file; /* the strings point into it */
    struct pat *p;
    size_t n;
    char err[512]; /* why there are no patterns */
} wait_frames = {.once = PTHREAD_ONCE_INIT};

static void wait_frames_free(void)
{
    for (size_t i = 0; i < wait_frames.n; i++) {
        free(wait_frames.p[i].names);
        free(wait_frames.p[i].modules);
    }
    free(wait_frames.p);
    wait_frames.p = NULL;
    wait_frames.n = 0;
    cp_kvfile_free(&wait_frames.file);
}

/* Builds wait_frames from its file; on any error leaves no patterns and the reason in err. */
static void wait_frames_load(void)
{
    static const char *const keys[] = {"pattern", "function", "module", NULL};
    struct cp_kvfile *f = &wait_frames.file;
    char *err = wait_frames.err;
    size_t errlen = sizeof(wait_frames.err);
    if (cp_kvfile_load(WAIT_FRAMES_FILE, "wait-frame table", WAIT_FRAMES_MAX, keys, f, err, errlen))
        return;
    for (size_t i = 0; i < f->n; i++) {
        const struct cp_kvline *l = &f->l[i];
        if (strcmp(l->key, "pattern")) {
            if (!wait_frames.n) {
                cp_errmsg(err, errlen, "%s:%d: `%s' before the first `pattern'", f->path, l->line,
                          l->key);
                goto fail;
            }
            continue;
        }
        struct pat *np = realloc(wait_frames.p, (wait_frames.n + 1) * sizeof(*np));
        if (!np)
            goto oom;
        wait_frames.p = np;
        struct pat *p = &np[wait_frames.n++];
        memset(p, 0, sizeof(*p));
        /* "STATE DETAIL": the state is the first word */
        char *sp = strpbrk(l->value, " \t");
        if (!sp) {
            cp_errmsg(err, errlen, "%s:%d: `pattern %s' without a detail text", f->path, l->line,
                      l->value);
            goto fail;
        }
        *sp++ = 0;
        p->state = l->value;
        p->detail = sp + strspn(sp, " \t");
        /* its function and module lines: up to the next pattern */
        size_t end = i + 1, nf = 0, nm = 0;
        while (end < f->n && strcmp(f->l[end].key, "pattern"))
            end++;
        p->names = cp_kvfile_values(f, "function", i + 1, end, &nf);
        p->modules = cp_kvfile_values(f, "module", i + 1, end, &nm);
        if (!p->names || !p->modules)
            goto oom;
        if (!nf && !nm) {
            cp_errmsg(err, errlen, "%s:%d: pattern %s has no function or module line", f->path,
                      l->line, p->state);
            goto fail;
        }
    }
    if (!wait_frames.n) {
        cp_errmsg(err, errlen, "%s: no patterns", f->path);
        goto fail;
    }
    return;
oom:
    cp_errmsg(err, errlen, "out of memory");
fail:
    wait_frames_free();
}

/* The patterns, loaded on first use; NULL (and *err the reason) when they cannot be. */
static const struct pat *wait_frames_get(size_t *n, const char **err)
{
    pthread_once(&wait_frames.once, wait_frames_load);
    *n = wait_frames.n;
    *err = wait_frames.err;
    return wait_frames.n ? wait_frames.p : NULL;
}

static int name_match(const char *const *names, const char *fn)
{
    for (; names && *names; names++) {
        size_t l = strlen(*names);
        if ((*names)[l - 1] == '*') {
            if (!strncmp(fn, *names, l - 1))
                return 1;
        } else if (!strcmp(fn, *names)) {
            return 1;
        }
    }
    return 0;
}

static int module_match(const char *const *mods, const char *mod)
{
    for (; mods && *mods; mods++)
        if (!strncmp(mod, *mods, strlen(*mods)))
            return 1;
    return 0;
}

/* The first pattern a frame matches, innermost frame first; *frame gets its index. A semaphore
 * wait (futex_wait) under PyThread_acquire_lock_timed is a Python lock (CPython's locks are POSIX
 * semaphores): then the Python lock frame (python_lock_wait) further out is the match. */
static const struct pat *match_frames(const struct pat *pats, size_t npats, const cJSON *frames,
                                      int *frame)
{
    int i = 0;
    const cJSON *f;
    const struct pat *first = NULL;
    cJSON_ArrayForEach(f, frames)
    {
        if (i >= FRAMES_LOOKED_AT || (first && i > *frame + 3))
            break; /* the lock frame calls the semaphore wait (sem_clockwait, sem_wait) itself */
        const char *fn = cp_jstr(f, "function");
        const char *mod = cp_jstr(f, "module");
        for (size_t p = 0; p < npats; p++) {
            if ((fn && name_match(pats[p].names, fn)) ||
                (mod && module_match(pats[p].modules, mod))) {
                if (!first) {
                    *frame = i;
                    first = &pats[p];
                    if (strcmp(pats[p].state, "futex_wait"))
                        return first;
                } else if (!strcmp(pats[p].state, "python_lock_wait")) {
                    *frame = i;
                    return &pats[p];
                }
                break;
            }
        }
        i++;
    }
    return first;
}

/* Python frames: the Python lock is Thread.join's (threading.py join, within the innermost
 * few frames: join -> _wait_for_tstate_lock -> lock.acquire). */
static int python_join(const cJSON *t)
{
    int i = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "python_frames"))
    {
        if (i++ >= 3)
            break;
        const char *fn = cp_jstr(f, "function"), *file = cp_jstr(f, "file");
        size_t l = file ? strlen(file) : 0;
        if (fn && !strcmp(fn, "join") && l >= 12 && !strcmp(file + l - 12, "threading.py"))
            return 1;
    }
    return 0;
}

/* Python frames (another part fills threads[].python_frames): queue.get / DataLoader. */
static int python_queue(const cJSON *t)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "python_frames"))
    {
        const char *fn = cp_jstr(f, "function"), *file = cp_jstr(f, "file");
        if (!fn || !file)
            continue;
        size_t l = strlen(file);
        if ((!strcmp(fn, "get") && l >= 8 && !strcmp(file + l - 8, "queue.py")) ||
            strstr(file, "torch/utils/data/dataloader.py") ||
            (!strcmp(fn, "recv") && strstr(file, "multiprocessing/connection.py")))
            return 1;
    }
    return 0;
}

static const char *syscall_state(long nr, const char **what)
{
    switch (nr) {
    case 0: case 17: case 19: case 295: *what = "read"; return "io_wait";
    case 45: case 47: case 299: *what = "recv"; return "io_wait";
    case 43: case 288: *what = "accept"; return "io_wait";
    case 7: case 271: *what = "poll"; return "io_wait";
    case 23: case 270: *what = "select"; return "io_wait";
    case 232: case 281: case 441: *what = "epoll_wait"; return "io_wait";
    case 1: case 18: case 20: case 44: case 46: *what = "write"; return "io_wait";
    case 42: *what = "connect"; return "io_wait";
    case 202: case 449: *what = "futex"; return "futex_wait";
    case 35: case 230: *what = "sleep"; return "sleep";
    case 61: case 247: *what = "wait"; return "child_wait";
    case 34: case 128: case 130: *what = "signal wait"; return "signal_wait";
    case 16: *what = "ioctl"; return "ioctl";
    case 58: *what = "vfork"; return "child_wait";
    case 219: *what = "restart_syscall"; return "sleep";
    default: return NULL;
    }
}

/* The first fds.json entry for fd: its target (fds indexed by "fd"). */
static const char *fd_target(const struct cp_jindex *fds, double fd)
{
    return cp_jstr(cp_jindex_find(fds, fd), "target");
}

static uint64_t hexval(const char *s)
{
    return s ? strtoull(s, NULL, 16) : 0;
}

/* The first frame outside the C library and the threading runtime: where the program is. */
static const cJSON *user_frame(const cJSON *frames)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, frames)
    {
        const char *mod = cp_jstr(f, "module");
        if (mod && (!strncmp(mod, "libc.so", 7) || !strncmp(mod, "libpthread", 10) ||
                    !strncmp(mod, "ld-linux", 8) || !strncmp(mod, "libstdc++", 9)))
            continue;
        return f;
    }
    return NULL;
}

static void frame_text(const cJSON *f, char *out, size_t n)
{
    const char *fn = cp_jstr(f, "function"), *file = cp_jstr(f, "file");
    double line = 0;
    const char *base = file ? strrchr(file, '/') : NULL;
    base = base ? base + 1 : file;
    if (base && cp_jnum(f, "line", &line))
        snprintf(out, n, "%s (%s:%d)", fn ? fn : "??", base, (int)line);
    else
        snprintf(out, n, "%s (%s)", fn ? fn : "??",
                 cp_jstr(f, "module") ? cp_jstr(f, "module") : "?");
}

/* What classify reads of one thread: its frames (t) and snap.json's record of it (st, or NULL:
 * then t's own state and wchan). */
struct wait_in {
    const cJSON *t, *st, *frames;
    const cJSON *sc; /* st's syscall */
    double nr;       /* its number, when have_nr */
    int have_nr;
    const char *kstate, *wchan, *kfirst; /* kernel state, wait channel, innermost kernel frame */
    int stopped;
    const char *sstate, *what; /* the syscall's state and kind (syscall_state), or NULL */
};

/* The thread's state as it stands: its state, where it was learnt and its detail. */
struct wait_out {
    const char *state, *source;
    char detail[512];
};

/* A thread in uninterruptible sleep that never stopped: the kernel function it sleeps in. */
static void uninterruptible(const struct wait_in *w, struct wait_out *o)
{
    o->state = "uninterruptible";
    o->source = "kernel";
    char kf[200];
    snprintf(kf, sizeof(kf), "%s", w->kfirst ? w->kfirst : w->wchan ? w->wchan : "?");
    kf[strcspn(kf, "+")] = 0;
    if (w->have_nr && (long)w->nr == 58)
        snprintf(o->detail, sizeof(o->detail),
                 "uninterruptible sleep in the kernel (%s): vfork, waiting for the child to "
                 "exec or exit; never stopped",
                 kf);
    else
        snprintf(o->detail, sizeof(o->detail),
                 "uninterruptible sleep in the kernel (%s)%s%s; never stopped", kf,
                 w->what ? " in " : "", w->what ? w->what : "");
}

/* The state of wait pattern p, matched at frame fi; a Python lock wait is told apart further by
 * the Python frames (a queue or DataLoader get, a thread's join). */
static void frames_state(const struct wait_in *w, const struct pat *p, int fi, struct wait_out *o)
{
    o->state = p->state;
    o->source = "frames";
    const cJSON *f = cJSON_GetArrayItem(w->frames, fi);
    snprintf(o->detail, sizeof(o->detail), "%s in %s", p->detail,
             cp_jstr(f, "function") ? cp_jstr(f, "function") : "?");
    if (!strcmp(o->state, "python_lock_wait") && python_queue(w->t)) {
        o->state = "python_queue_wait";
        snprintf(o->detail, sizeof(o->detail), "Python queue/DataLoader wait (%s)",
                 cp_jstr(f, "function") ? cp_jstr(f, "function") : "?");
    } else if (!strcmp(o->state, "python_lock_wait") && python_join(w->t)) {
        o->state = "join_wait";
        snprintf(o->detail, sizeof(o->detail),
                 "joining a Python thread (threading.Thread.join, %s)",
                 cp_jstr(f, "function") ? cp_jstr(f, "function") : "?");
    }
}

/* The thread's state, from the first that says: the kernel (uninterruptible sleep), the frames
 * (wait patterns), the syscall, the kernel or /proc (running). 0, or -1 when there is nothing to
 * go by (no frames, no snap.json record). */
static int wait_state(const struct wait_in *w, struct wait_out *o)
{
    int fi = -1;
    size_t npats;
    const char *pats_err;
    const struct pat *pats = wait_frames_get(&npats, &pats_err);
    const struct pat *p = pats ? match_frames(pats, npats, w->frames, &fi) : NULL;
    if (w->kstate && w->kstate[0] == 'D' && !w->stopped && w->st) {
        uninterruptible(w, o);
    } else if (p) {
        frames_state(w, p, fi, o);
    } else if (w->sstate) {
        o->state = w->sstate;
        o->source = "syscall";
        snprintf(o->detail, sizeof(o->detail), "blocked in %s",
                 cp_jstr(w->sc, "name") ? cp_jstr(w->sc, "name") : w->what);
    } else if ((w->have_nr == 0 && w->st && cp_jstr(w->sc, "raw") &&
                !strcmp(cp_jstr(w->sc, "raw"), "running")) ||
               (w->kstate && w->kstate[0] == 'R')) {
        o->state = "running";
        o->source = w->st ? "kernel" : "proc";
        snprintf(o->detail, sizeof(o->detail), "running (on a CPU or runnable)");
    } else if (!w->frames && !w->st) {
        return -1;
    } else {
        o->state = "unknown";
        o->source = "none";
    }
    /* python_queue_wait without a lock frame: Python frames alone */
    if ((!strcmp(o->state, "futex_wait") || !strcmp(o->state, "unknown")) && python_queue(w->t)) {
        o->state = "python_queue_wait";
        snprintf(o->detail, sizeof(o->detail), "Python queue/DataLoader wait");
    }
    return 0;
}

/* Adds fd and fd_target to the thread's hang_state o: the file its syscall waits on, when it is
 * one that takes a file descriptor, also named in detail (replaced in o). A wait on an NVIDIA
 * device is gpu_driver_wait. */
static void add_wait_fd(cJSON *o, const struct wait_in *w, const struct cp_jindex *fds,
                        struct wait_out *wo)
{
    const char *what = w->what;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(w->sc, "args");
    double fd = -1;
    if (w->have_nr &&
        (!strcmp(what ? what : "", "read") || !strcmp(what ? what : "", "recv") ||
         !strcmp(what ? what : "", "accept") || !strcmp(what ? what : "", "epoll_wait") ||
         !strcmp(what ? what : "", "write") || !strcmp(what ? what : "", "connect") ||
         !strcmp(what ? what : "", "ioctl")))
        fd = (double)(int64_t)hexval(cJSON_GetStringValue(cJSON_GetArrayItem(args, 0)));
    if (fd >= 0 && fd < 1 << 30) {
        cJSON_AddNumberToObject(o, "fd", fd);
        const char *tg = fd_target(fds, fd);
        if (tg)
            cJSON_AddStringToObject(o, "fd_target", tg);
        else
            cJSON_AddNullToObject(o, "fd_target");
        char more[300];
        snprintf(more, sizeof(more), " on fd %d%s%s", (int)fd, tg ? " -> " : "", tg ? tg : "");
        if (strlen(wo->detail) + strlen(more) < sizeof(wo->detail))
            strcat(wo->detail, more);
        cJSON_ReplaceItemInObject(o, "detail", cJSON_CreateString(wo->detail));
        if (!strcmp(wo->state, "ioctl") || (tg && !strncmp(tg, "/dev/nvidia", 11))) {
            if (tg && !strncmp(tg, "/dev/nvidia", 11))
                cJSON_ReplaceItemInObject(o, "state", cJSON_CreateString("gpu_driver_wait"));
        }
    } else {
        cJSON_AddNullToObject(o, "fd");
        cJSON_AddNullToObject(o, "fd_target");
    }
}

/* Adds mutex, mutex_symbol and mutex_owner to the hang_state o of a thread in state: the futex
 * word it waits on (snap.json's futex), and for a mutex its owner. */
static void add_wait_mutex(cJSON *o, const struct wait_in *w, const char *state)
{
    const cJSON *fx = cJSON_GetObjectItemCaseSensitive(w->st, "futex");
    const char *addr = cp_jstr(fx, "addr");
    if (!(addr && (!strcmp(state, "mutex_wait") || !strcmp(state, "condvar_wait") ||
                   !strcmp(state, "futex_wait") || !strcmp(state, "python_lock_wait")))) {
        cJSON_AddNullToObject(o, "mutex");
        cJSON_AddNullToObject(o, "mutex_symbol");
        cJSON_AddNullToObject(o, "mutex_owner");
        return;
    }
    cJSON_AddStringToObject(o, "mutex", addr);
    if (cp_jstr(fx, "symbol"))
        cJSON_AddStringToObject(o, "mutex_symbol", cp_jstr(fx, "symbol"));
    else
        cJSON_AddNullToObject(o, "mutex_symbol");
    /* the owner in the core's terms: a core with the process's own (namespace) tids (this
     * thread's tid is snap.json's ns_tid) takes glibc's word as it is; an older snapshot's
     * core held host tids (mutex_owner, translated by snap) */
    double owner, tid = 0, nst = 0;
    int ns_core = cp_jnum(w->t, "tid", &tid) && cp_jnum(w->st, "ns_tid", &nst) && nst == tid;
    const char *ok =
        ns_core && cJSON_HasObjectItem(fx, "mutex_owner_ns") ? "mutex_owner_ns" : "mutex_owner";
    if (!strcmp(state, "mutex_wait") && cp_jnum(fx, ok, &owner) && owner > 0)
        cJSON_AddNumberToObject(o, "mutex_owner", owner);
    else
        cJSON_AddNullToObject(o, "mutex_owner");
    if (!strcmp(state, "mutex_wait"))
        cJSON_AddStringToObject(o, "lock_type", "pthread_mutex");
    else if (!strcmp(state, "python_lock_wait")) /* the semaphore: python_lock_waits below */
        cJSON_AddStringToObject(o, "futex", addr);
}

/* The hang_state of thread t (st: its snap.json record, or NULL), or JSON null when nothing tells
 * it. */
static cJSON *classify(const cJSON *t, const cJSON *st, const struct cp_jindex *fds)
{
    struct wait_in w = {.t = t, .st = st, .nr = -1};
    w.frames = cJSON_GetObjectItemCaseSensitive(t, "frames");
    w.sc = cJSON_GetObjectItemCaseSensitive(st, "syscall");
    w.have_nr = cp_jnum(w.sc, "nr", &w.nr);
    w.kstate = st ? cp_jstr(st, "state") : cp_jstr(t, "state");
    w.wchan = st ? cp_jstr(st, "wchan") : cp_jstr(t, "wchan");
    w.stopped = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "stopped"));
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(st, "kernel_stack");
    w.kfirst = cJSON_GetStringValue(cJSON_GetArrayItem(ks, 0));
    w.sstate = w.have_nr ? syscall_state((long)w.nr, &w.what) : NULL;
    struct wait_out wo = {.state = NULL};
    if (wait_state(&w, &wo))
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "state", wo.state);
    cJSON_AddStringToObject(o, "detail", wo.detail);
    cJSON_AddStringToObject(o, "source", wo.source);
    if (cp_jstr(w.sc, "name"))
        cJSON_AddStringToObject(o, "syscall", cp_jstr(w.sc, "name"));
    else
        cJSON_AddNullToObject(o, "syscall");
    add_wait_fd(o, &w, fds, &wo);
    add_wait_mutex(o, &w, wo.state);
    if (w.kfirst || (w.wchan && w.wchan[0])) {
        char kf[200];
        snprintf(kf, sizeof(kf), "%s", w.kfirst ? w.kfirst : w.wchan);
        kf[strcspn(kf, "+")] = 0;
        cJSON_AddStringToObject(o, "kernel_function", kf);
    } else {
        cJSON_AddNullToObject(o, "kernel_function");
    }
    return o;
}

/* ---- Python lock waits (issue 23) ---- */

/* Whether lock l is referenced by the innermost frame of thread tid (python.locks[]). */
static int lock_seen_by(const cJSON *l, double tid)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(l, "referenced_by_tids"))
    {
        if (cJSON_IsNumber(e) && e->valuedouble == tid)
            return 1;
    }
    return 0;
}

/* The lock a thread in a Python lock wait waits for (python.locks[], analyze/native/pylocks.h):
 * the one whose semaphore is the futex word it sleeps on (3.11, 3.12; a snapshot), else the one
 * held lock its innermost frame references that it does not own itself. *how says which. */
static const cJSON *waited_lock(const cJSON *locks, const cJSON *hs, double tid, const char **how)
{
    const char *fx = cp_jstr(hs, "futex");
    const cJSON *l, *cand = NULL;
    int ncand = 0;
    cJSON_ArrayForEach(l, locks)
    {
        const char *sem = cp_jstr(l, "sem");
        if (fx && sem && hexval(sem) == hexval(fx)) {
            *how = "futex";
            return l;
        }
    }
    cJSON_ArrayForEach(l, locks)
    {
        double owner = -1;
        int held = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "locked"));
        if (!held || !lock_seen_by(l, tid) || (cp_jnum(l, "owner_tid", &owner) && owner == tid))
            continue;
        cand = l;
        ncand++;
    }
    *how = "frame";
    return ncand == 1 ? cand : NULL;
}

/* Sets the hang_state of each thread waiting in a Python lock from the lock it waits for: mutex
 * (the lock object), mutex_symbol (its name), lock_type, mutex_owner (an RLock's owner thread:
 * the waits-for graph then proves a cycle of RLocks as it does one of mutexes) or, for a Lock,
 * lock_owner_note: CPython records no owner. */
static void python_lock_waits(cJSON *threads, const cJSON *locks)
{
    cJSON *t;
    cJSON_ArrayForEach(t, threads)
    {
        cJSON *hs = cJSON_GetObjectItemCaseSensitive(t, "hang_state");
        double tid = 0, owner = 0;
        const char *st = cp_jstr(hs, "state"), *how = NULL;
        if (!st || strcmp(st, "python_lock_wait") || !cp_jnum(t, "tid", &tid))
            continue;
        const cJSON *l = waited_lock(locks, hs, tid, &how);
        if (!l)
            continue;
        const char *type = cp_jstr(l, "type"), *name = cp_jstr(l, "name");
        int rlock = type && !strcmp(type, "threading.RLock");
        int owned = rlock && cp_jnum(l, "owner_tid", &owner) && owner != tid;
        cp_json_set(hs, "mutex", cJSON_CreateString(cp_jstr(l, "addr") ? cp_jstr(l, "addr") : "?"));
        cp_json_set(hs, "mutex_symbol", name ? cJSON_CreateString(name) : cJSON_CreateNull());
        cp_json_set(hs, "mutex_owner", owned ? cJSON_CreateNumber(owner) : cJSON_CreateNull());
        cp_json_set(hs, "lock_type", cJSON_CreateString(type ? type : "?"));
        cp_json_set(hs, "lock_found_by", cJSON_CreateString(how));
        char d[400];
        if (!rlock)
            cp_json_set(hs, "lock_owner_note",
                        cJSON_CreateString("CPython records no owner of a threading.Lock"));
        const char *shown = name ? name : cp_jstr(l, "addr") ? cp_jstr(l, "addr") : "?";
        if (owned)
            snprintf(d, sizeof(d), "Python lock wait: %s %s, held by thread %d", type, shown,
                     (int)owner);
        else
            snprintf(d, sizeof(d), "Python lock wait: %s %s%s", type ? type : "lock", shown,
                     rlock ? "" : " (its holder is not recorded)");
        cp_json_set(hs, "detail", cJSON_CreateString(d));
    }
}

/* At most this many mutexes are listed as held by one thread of a deadlock. */
#define HOLDS_MAX 64

/* A thread's name: its Python name (threading.Thread.name) when it has one, else the kernel's. */
static const char *thread_name(const cJSON *t)
{
    const char *pn = cp_jstr(cJSON_GetObjectItemCaseSensitive(t, "python"), "name");
    return pn && pn[0] ? pn : cp_jstr(t, "name") ? cp_jstr(t, "name") : "";
}

/* waiters: the threads indexed by hang_state.mutex_owner */
static cJSON *holder_json(const cJSON *t, const cJSON *hs, const struct cp_jindex *waiters)
{
    double tid = 0;
    cp_jnum(t, "tid", &tid);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tid", tid);
    cJSON_AddStringToObject(o, "name", thread_name(t));
    cJSON_AddStringToObject(o, "lock_type",
                            cp_jstr(hs, "lock_type") ? cp_jstr(hs, "lock_type") : "pthread_mutex");
    cJSON_AddStringToObject(o, "waits_for_mutex", cp_jstr(hs, "mutex"));
    if (cp_jstr(hs, "mutex_symbol"))
        cJSON_AddStringToObject(o, "waits_for_mutex_symbol", cp_jstr(hs, "mutex_symbol"));
    else
        cJSON_AddNullToObject(o, "waits_for_mutex_symbol");
    double owner = 0;
    cp_jnum(hs, "mutex_owner", &owner);
    cJSON_AddNumberToObject(o, "owner_tid", owner);
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(t, "frames");
    const cJSON *uf = user_frame(frames);
    const cJSON *pf = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "python_frames"), 0);
    char bi[400];
    if (pf) { /* a Python thread: where its code waits is its innermost Python line */
        frame_text(pf, bi, sizeof(bi));
        cJSON_AddStringToObject(o, "blocked_in", bi);
        if (uf) {
            frame_text(uf, bi, sizeof(bi));
            cJSON_AddStringToObject(o, "blocked_in_native", bi);
        }
    } else if (uf) {
        frame_text(uf, bi, sizeof(bi));
        cJSON_AddStringToObject(o, "blocked_in", bi);
    } else {
        cJSON_AddNullToObject(o, "blocked_in");
    }
    /* holds: the mutexes other threads wait on whose owner is this thread */
    cJSON *holds = cJSON_AddArrayToObject(o, "holds");
    int nholds = 0;
    for (size_t k = cp_jindex_first(waiters, tid); k < waiters->n && waiters->e[k].key == tid &&
                                                   nholds < HOLDS_MAX;
         k++) {
        const cJSON *us = cJSON_GetObjectItemCaseSensitive(waiters->e[k].item, "hang_state");
        if (cp_jstr(us, "mutex")) {
            int dup = 0;
            const cJSON *h;
            cJSON_ArrayForEach(h, holds) if (!strcmp(cp_jstr(h, "mutex"), cp_jstr(us, "mutex")))
                dup = 1;
            if (dup)
                continue;
            cJSON *h2 = cJSON_CreateObject();
            cJSON_AddStringToObject(h2, "mutex", cp_jstr(us, "mutex"));
            if (cp_jstr(us, "mutex_symbol"))
                cJSON_AddStringToObject(h2, "symbol", cp_jstr(us, "mutex_symbol"));
            else
                cJSON_AddNullToObject(h2, "symbol");
            cJSON_AddItemToArray(holds, h2);
            nholds++;
        }
    }
    cJSON *stack = cJSON_AddArrayToObject(o, "stack");
    const cJSON *f;
    cJSON_ArrayForEach(f, frames)
    {
        char ft[400];
        frame_text(f, ft, sizeof(ft));
        cJSON_AddItemToArray(stack, cJSON_CreateString(ft));
    }
    if (pf) {
        cJSON *ps = cJSON_AddArrayToObject(o, "python_stack");
        cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "python_frames"))
        {
            char ft[400];
            frame_text(f, ft, sizeof(ft));
            cJSON_AddItemToArray(ps, cJSON_CreateString(ft));
        }
    }
    return o;
}

/* The waits-for graph of deadlocks: node i is byid.e[i] (only the first entry of each tid is a
 * node), its successor next[i] the node of the owner of the mutex it waits for (m: none). */
struct waits_graph {
    struct cp_jindex byid;    /* the threads by tid */
    struct cp_jindex waiters; /* the threads by hang_state.mutex_owner */
    size_t m;                 /* nodes */
    size_t *next;
    unsigned char *mark;  /* 0 new, 1 on the current walk, 2 done */
    unsigned char *oncyc; /* on a cycle */
    double *cmin;         /* the smallest tid of its cycle */
    size_t *walk;         /* the current walk */
};

/* Each node's successor: the first thread of the owner of the mutex it waits for. */
static void graph_edges(struct waits_graph *g)
{
    for (size_t i = 0; i < g->m; i++) {
        g->next[i] = g->m;
        if (cp_jindex_first(&g->byid, g->byid.e[i].key) != i)
            continue;
        double ow;
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(g->byid.e[i].item, "hang_state");
        if (cp_jnum(hs, "mutex_owner", &ow))
            g->next[i] = cp_jindex_first(&g->byid, ow);
    }
}

/* Marks the nodes on a cycle (oncyc) with their cycle's smallest tid (cmin), following each
 * chain once. */
static void graph_cycles(struct waits_graph *g)
{
    for (size_t i = 0; i < g->m; i++) {
        if (g->mark[i] || cp_jindex_first(&g->byid, g->byid.e[i].key) != i)
            continue;
        size_t len = 0, v = i;
        while (v < g->m && !g->mark[v]) {
            g->mark[v] = 1;
            g->walk[len++] = v;
            v = g->next[v];
        }
        if (v < g->m && g->mark[v] == 1) { /* a new cycle: from v to the end of the walk */
            double mn = g->byid.e[v].key;
            size_t k = len;
            while (k > 0 && g->walk[k - 1] != v)
                k--;
            for (size_t q = k - 1; q < len; q++)
                if (g->byid.e[g->walk[q]].key < mn)
                    mn = g->byid.e[g->walk[q]].key;
            for (size_t q = k - 1; q < len; q++) {
                g->oncyc[g->walk[q]] = 1;
                g->cmin[g->walk[q]] = mn;
            }
        }
        for (size_t q = 0; q < len; q++)
            g->mark[g->walk[q]] = 2;
    }
}

/* The deadlock of the cycle through node s0: its summary and each thread on it (holder_json). */
static cJSON *deadlock_json(const struct waits_graph *g, size_t s0)
{
    cJSON *d = cJSON_CreateObject();
    cJSON *dt = cJSON_CreateArray();
    char summary[2048] = "deadlock:";
    size_t slen = strlen(summary);
    size_t v = s0;
    do {
        const cJSON *ct = g->byid.e[v].item;
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(ct, "hang_state");
        cJSON_AddItemToArray(dt, holder_json(ct, hs, &g->waiters));
        char part[300];
        double ow = 0;
        cp_jnum(hs, "mutex_owner", &ow);
        int pn = snprintf(part, sizeof(part), "%s thread %d (%s) waits for %s held by thread %d",
                          v == s0 ? "" : ";", (int)g->byid.e[v].key, thread_name(ct),
                          cp_jstr(hs, "mutex_symbol") ? cp_jstr(hs, "mutex_symbol")
                                                      : cp_jstr(hs, "mutex"),
                          (int)ow);
        size_t plen = pn < 0 ? 0 : strlen(part);
        if (slen + plen < sizeof(summary)) {
            memcpy(summary + slen, part, plen + 1);
            slen += plen;
        }
        v = g->next[v];
    } while (v != s0 && v < g->m);
    cJSON_AddStringToObject(d, "summary", summary);
    /* the kind of lock of the whole cycle: pthread_mutex, threading.RLock, or mixed */
    const char *kind = NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, dt)
    {
        const char *k = cp_jstr(e, "lock_type");
        kind = !kind ? k : k && strcmp(kind, k) ? "mixed" : kind;
    }
    cJSON_AddStringToObject(d, "lock", kind ? kind : "pthread_mutex");
    cJSON_AddItemToObject(d, "threads", dt);
    return d;
}

/* Each waiting thread waits for one owner: the threads and their owners form a graph in which
 * every node has at most one successor, so its cycles are found in one pass (each node is visited
 * once: linear in the threads, where following each chain from every thread was quadratic). A
 * node is a tid (its first thread in the array); a cycle is reported once, from its smallest tid,
 * in the order of the array. */
static void deadlocks(cJSON *threads, cJSON *out)
{
    int n = cJSON_GetArraySize(threads);
    struct waits_graph g;
    if (n <= 0 || cp_jindex_build(&g.byid, threads, "tid"))
        return;
    if (cp_jindex_build(&g.waiters, threads, "hang_state.mutex_owner")) {
        cp_jindex_free(&g.byid);
        return;
    }
    size_t m = g.m = g.byid.n;
    g.next = malloc((m + 1) * sizeof(*g.next));
    g.mark = calloc(m + 1, 1);
    g.oncyc = calloc(m + 1, 1);
    g.cmin = malloc((m + 1) * sizeof(*g.cmin));
    g.walk = malloc((m + 1) * sizeof(*g.walk));
    if (!g.next || !g.mark || !g.oncyc || !g.cmin || !g.walk)
        goto out;
    graph_edges(&g);
    graph_cycles(&g);
    const cJSON *t;
    cJSON_ArrayForEach(t, threads)
    {
        double start;
        if (!cp_jnum(t, "tid", &start))
            continue;
        size_t s0 = cp_jindex_first(&g.byid, start);
        if (s0 >= m || !g.oncyc[s0] || g.cmin[s0] != start)
            continue;
        cJSON_AddItemToArray(out, deadlock_json(&g, s0));
    }
out:
    free(g.next);
    free(g.mark);
    free(g.oncyc);
    free(g.cmin);
    free(g.walk);
    cp_jindex_free(&g.byid);
    cp_jindex_free(&g.waiters);
}

/* The indexes hang_analyze_json looks threads up by: one pass each, not one per thread. */
struct hang_ix {
    struct cp_jindex snapix; /* snap.json's threads by tid (the host's) */
    struct cp_jindex snapns; /* snap.json's threads by ns_tid */
    struct cp_jindex fds;    /* fds.json by fd */
    struct cp_jindex byid;   /* the report's threads by tid */
};

/* Sets each thread's hang_state (its snap.json record found by ns_tid first, then tid) and counts
 * the threads of each state in states. */
static void classify_threads(cJSON *threads, const cJSON *snap, const struct hang_ix *ix,
                             cJSON *states)
{
    cJSON *t;
    cJSON_ArrayForEach(t, threads)
    {
        double tid = 0;
        cp_jnum(t, "tid", &tid);
        const cJSON *st = snap ? cp_jindex_find(&ix->snapns, tid) : NULL;
        if (snap && !st)
            st = cp_jindex_find(&ix->snapix, tid);
        cJSON *hs = classify(t, st, &ix->fds);
        cJSON_DeleteItemFromObjectCaseSensitive(t, "hang_state");
        cJSON_AddItemToObject(t, "hang_state", hs);
        const char *s = cp_jstr(hs, "state");
        if (s) {
            cJSON *c = cJSON_GetObjectItemCaseSensitive(states, s);
            if (c)
                cJSON_SetNumberValue(c, c->valuedouble + 1);
            else
                cJSON_AddNumberToObject(states, s, 1);
        }
    }
}

/* Adds the threads the native analysis did not see (no registers: never stopped) from snap.json,
 * once per tid (the snap's first thread with it, when the core has none), with their hang_state. */
static void add_unseen_threads(cJSON *threads, const cJSON *snap, const struct hang_ix *ix)
{
    const cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(snap, "threads"))
    {
        double tid, host;
        if (!cp_jnum(st, "tid", &host) || !cJSON_IsArray(threads))
            continue;
        if (!cp_jnum(st, "ns_tid", &tid) || tid <= 0)
            tid = host;
        if (cp_jindex_find(&ix->byid, tid) || cp_jindex_find(&ix->byid, host) ||
            cp_jindex_find(&ix->snapix, host) != st)
            continue;
        cJSON *nt = cJSON_CreateObject();
        cJSON_AddNumberToObject(nt, "tid", tid);
        if (host != tid)
            cJSON_AddNumberToObject(nt, "host_tid", host);
        cJSON_AddStringToObject(nt, "name", cp_jstr(st, "name") ? cp_jstr(st, "name") : "");
        cJSON_AddBoolToObject(nt, "crashed", 0);
        cJSON_AddStringToObject(nt, "state", cp_jstr(st, "state") ? cp_jstr(st, "state") : "?");
        cJSON_AddStringToObject(nt, "wchan", cp_jstr(st, "wchan") ? cp_jstr(st, "wchan") : "");
        cJSON_AddItemToObject(nt, "frames", cJSON_CreateArray());
        cJSON *hs = classify(nt, st, &ix->fds);
        cJSON_AddItemToObject(nt, "hang_state", hs);
        cJSON_AddItemToArray(threads, nt);
    }
}

/* The report's hang section up to its states: whether a snapshot was taken, and its trigger,
 * reason and stop counts. */
static cJSON *hang_head(const cJSON *snap)
{
    cJSON *h = cJSON_CreateObject();
    cJSON_AddBoolToObject(h, "snap", snap != NULL);
    if (snap) {
        const char *tr = cp_jstr(snap, "trigger"), *rs = cp_jstr(snap, "reason");
        cJSON_AddStringToObject(h, "trigger", tr ? tr : "snap");
        if (rs)
            cJSON_AddStringToObject(h, "reason", rs);
        else
            cJSON_AddNullToObject(h, "reason");
        const cJSON *stop = cJSON_GetObjectItemCaseSensitive(snap, "stop");
        double v;
        if (cp_jnum(stop, "threads_stopped", &v))
            cJSON_AddNumberToObject(h, "threads_stopped", v);
        if (cp_jnum(stop, "threads_not_stopped", &v))
            cJSON_AddNumberToObject(h, "threads_not_stopped", v);
        if (cp_jnum(stop, "stopped_ms", &v))
            cJSON_AddNumberToObject(h, "stopped_ms", v);
    } else {
        cJSON_AddNullToObject(h, "trigger");
        cJSON_AddNullToObject(h, "reason");
    }
    return h;
}

void hang_analyze_json(cJSON *r, const cJSON *snap, const cJSON *fds_json)
{
    cJSON *threads = cJSON_GetObjectItemCaseSensitive(r, "threads");
    cJSON *states = cJSON_CreateObject();
    /* The core's tids are the process's own (its pid namespace, as in a kernel core); snap.json
     * has both: ns_tid first, then tid (older snapshots' cores held the host's tids) */
    struct hang_ix ix;
    cp_jindex_build(&ix.snapix, cJSON_GetObjectItemCaseSensitive(snap, "threads"), "tid");
    cp_jindex_build(&ix.snapns, cJSON_GetObjectItemCaseSensitive(snap, "threads"), "ns_tid");
    cp_jindex_build(&ix.fds, fds_json, "fd");
    cp_jindex_build(&ix.byid, threads, "tid");
    classify_threads(threads, snap, &ix, states);
    python_lock_waits(threads, cp_jpath(r, "python.locks"));
    add_unseen_threads(threads, snap, &ix);
    cp_jindex_free(&ix.snapix);
    cp_jindex_free(&ix.snapns);
    cp_jindex_free(&ix.fds);
    cp_jindex_free(&ix.byid);
    cJSON *h = hang_head(snap);
    cJSON_AddItemToObject(h, "states", states);
    size_t npats;
    const char *pats_err;
    if (!wait_frames_get(&npats, &pats_err)) /* no frame patterns: the states come from syscalls */
        cJSON_AddStringToObject(h, "error", pats_err);
    cJSON *dl = cJSON_AddArrayToObject(h, "deadlocks");
    if (cJSON_IsArray(threads))
        deadlocks(threads, dl);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "hang");
    cJSON_AddItemToObject(r, "hang", h);
    if (snap) {
        cJSON_DeleteItemFromObjectCaseSensitive(r, "crash_kind");
        cJSON_AddStringToObject(r, "crash_kind", "hang");
    }
}

static cJSON *member_json(struct bundle *b, const char *name, size_t max)
{
    if (!bundle_find(b, name))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    if (bundle_read_all(b, name, max, &buf, &len) == BUNDLE_OK)
        j = cJSON_ParseWithLength(buf, len);
    free(buf);
    return j;
}

void hang_analyze(struct bundle *b, cJSON *r)
{
    cJSON *snap = member_json(b, "snap.json", SNAP_JSON_MAX);
    /* an exception's snapshot (the hook asked the agent for it) is no hang: its threads wait for
     * the capture itself (the raising one in poll, for the agent's answer). No hang section. */
    const char *death = cp_jstr_at(r, "process.death.kind");
    if (snap && (!cJSON_IsObject(snap) || (death && !strcmp(death, "exception")))) {
        cJSON_Delete(snap);
        snap = NULL;
    }
    cJSON *fds = member_json(b, "proc/fds.json", FDS_JSON_MAX);
    hang_analyze_json(r, snap, cJSON_IsArray(fds) ? fds : NULL);
    cJSON_Delete(snap);
    cJSON_Delete(fds);
}

