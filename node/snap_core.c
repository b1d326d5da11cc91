/* snap_core.c - ptrace stop, kernel-side thread state, ELF core writer (see snap_core.h). */
#include "util.h" /* write_all */
#include "snap_core.h"
#include "errmsg.h"
#include "pidfd.h"
#include "rootopen.h"
#include "snap_python.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096ULL
#define MAX_THREADS 65536
#define NT_FILE_TYPE 0x46494c45


struct thr {
    pid_t tid;
    int seized, stopped, gone, pending_sig;
    double t_interrupt, t_stop, t_detach;
    char state; /* from /proc/<tid>/stat before the stop */
    char name[64];
    char wchan[128];
    char syscall[512]; /* /proc/<tid>/syscall */
    long nr;           /* syscall number, -1: none/running, -2: unknown */
    uint64_t args[6], sp, pc;
    char *kstack; /* /proc/<tid>/stack, owned */
    struct user_regs_struct regs;
    int have_regs;
    struct user_fpregs_struct fp;
    int have_fp;
    uint32_t futex_word[4]; /* the 16 bytes at args[0] when nr == futex */
    int have_futex;
    pid_t ns_tid;      /* the tid in the process's own pid namespace (NSpid, last) */
    pid_t owner_host;  /* futex_word[2] (a mutex owner, an ns tid) as a host tid, or 0 */
};

struct map {
    uint64_t lo, hi, pgoff;
    char perms[8];
    unsigned long inode;
    char path[512];
    int written;   /* smaps Anonymous > 0: private pages written (RELRO, .data, COW) */
    int no_dump;   /* smaps VmFlags dd (MADV_DONTDUMP), io, pf: never read */
};

struct piece {
    uint64_t lo, hi;
    uint32_t flags;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *slurp(const char *path, size_t max, size_t *lenp)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap + 1);
    while (b) {
        if (len == cap) {
            if (cap >= max)
                break;
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb)
                break;
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, b + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (b)
        b[len] = 0;
    if (lenp)
        *lenp = len;
    return b;
}

static void kernel_view(pid_t pid, struct thr *t)
{
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)t->tid);
    char *s = slurp(path, 1 << 16, NULL);
    char *rp = s ? strrchr(s, ')') : NULL;
    char *lp = s ? strchr(s, '(') : NULL;
    if (rp && lp && rp > lp) {
        snprintf(t->name, sizeof(t->name), "%.*s", (int)(rp - lp - 1), lp + 1);
        if (rp[1] == ' ')
            t->state = rp[2];
    }
    free(s);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)t->tid);
    s = slurp(path, 1 << 16, NULL);
    t->ns_tid = cp_nspid_last(s, t->tid);
    free(s);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", (int)pid, (int)t->tid);
    s = slurp(path, 4096, NULL);
    snprintf(t->wchan, sizeof(t->wchan), "%s", s && strcmp(s, "0") ? s : "");
    free(s);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)t->tid);
    s = slurp(path, 4096, NULL);
    t->nr = -2;
    if (s) {
        s[strcspn(s, "\n")] = 0;
        snprintf(t->syscall, sizeof(t->syscall), "%s", s);
        unsigned long long a[8];
        long nr;
        if (!strcmp(s, "running"))
            t->nr = -1;
        else if (sscanf(s, "%ld 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx", &nr,
                        &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7]) == 9) {
            t->nr = nr;
            for (int i = 0; i < 6; i++)
                t->args[i] = a[i];
            t->sp = a[6];
            t->pc = a[7];
        } else if (sscanf(s, "%ld 0x%llx 0x%llx", &nr, &a[0], &a[1]) == 3) {
            t->nr = nr; /* -1: in user space (blocked, not in a syscall) */
            t->sp = a[0];
            t->pc = a[1];
        }
    }
    free(s);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stack", (int)pid, (int)t->tid);
    t->kstack = slurp(path, 1 << 16, NULL);
}

static int list_tasks(pid_t pid, struct thr **th, size_t *n, size_t *cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int added = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        pid_t tid = (pid_t)atoi(e->d_name);
        size_t i;
        for (i = 0; i < *n; i++)
            if ((*th)[i].tid == tid)
                break;
        if (i < *n || *n >= MAX_THREADS)
            continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            struct thr *nt = realloc(*th, nc * sizeof(*nt));
            if (!nt)
                break;
            *th = nt;
            *cap = nc;
        }
        memset(&(*th)[*n], 0, sizeof(**th));
        (*th)[*n].tid = tid;
        (*n)++;
        added++;
    }
    closedir(d);
    return added;
}

/* /proc/<pid>/smaps: the mappings, whether private pages were written, and the VmFlags that
 * say "do not read" (the kernel's own dump skips them too). */
static int parse_maps(pid_t pid, struct map **out, size_t *nout)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
    size_t len;
    char *s = slurp(path, 256u << 20, &len);
    if (!s)
        return -1;
    size_t n = 0, cap = 256;
    struct map *m = malloc(cap * sizeof(*m));
    for (char *line = s, *next; m && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (n && !strncmp(line, "Anonymous:", 10)) {
            m[n - 1].written = atol(line + 10) > 0;
            continue;
        }
        if (n && !strncmp(line, "VmFlags:", 8)) {
            const char *v = line + 8;
            m[n - 1].no_dump = strstr(v, " dd") || strstr(v, " io") || strstr(v, " pf");
            continue;
        }
        struct map x;
        memset(&x, 0, sizeof(x));
        unsigned long long lo, hi, off;
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %lu %n", &lo, &hi, x.perms, &off, &x.inode,
                   &pos) < 5)
            continue;
        x.lo = lo;
        x.hi = hi;
        x.pgoff = off;
        if (pos > 0)
            snprintf(x.path, sizeof(x.path), "%s", line + pos);
        if (n == cap) {
            struct map *nm = realloc(m, cap * 2 * sizeof(*m));
            if (!nm)
                break;
            m = nm;
            cap *= 2;
        }
        m[n++] = x;
    }
    free(s);
    if (!m)
        return -1;
    *out = m;
    *nout = n;
    return 0;
}

static int is_file_map(const struct map *m)
{
    return m->path[0] == '/' && m->inode != 0 && strncmp(m->path, "/dev/", 5) &&
           strncmp(m->path, "/memfd:", 7) && strncmp(m->path, "/SYSV", 5);
}

/* Mappings never read: device memory (GPU BARs, driver mappings: reading can hang or fault the
 * device), the vvar/vsyscall pages, and anything not readable. */
static int never_read(const struct map *m)
{
    if (m->perms[0] != 'r' || m->no_dump)
        return 1;
    if (!strcmp(m->path, "[vvar]") || !strcmp(m->path, "[vsyscall]") ||
        !strncmp(m->path, "[vvar", 5))
        return 1;
    if (!strncmp(m->path, "/dev/", 5) && strncmp(m->path, "/dev/shm/", 9) &&
        strncmp(m->path, "/dev/zero", 9))
        return 1;
    return 0;
}

static uint32_t pflags(const struct map *m)
{
    return (m->perms[0] == 'r' ? PF_R : 0) | (m->perms[1] == 'w' ? PF_W : 0) |
           (m->perms[2] == 'x' ? PF_X : 0);
}

struct plan {
    struct piece *p;
    size_t n, cap;
};

static void plan_add(struct plan *P, uint64_t lo, uint64_t hi, uint32_t flags)
{
    if (lo >= hi)
        return;
    if (P->n == P->cap) {
        size_t nc = P->cap ? P->cap * 2 : 256;
        struct piece *np = realloc(P->p, nc * sizeof(*np));
        if (!np)
            return;
        P->p = np;
        P->cap = nc;
    }
    P->p[P->n++] = (struct piece){lo, hi, flags};
}

static int piece_cmp(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges overlapping or touching pieces of one mapping. */
static void plan_merge(struct plan *P)
{
    if (!P->n)
        return;
    qsort(P->p, P->n, sizeof(*P->p), piece_cmp);
    size_t k = 0;
    for (size_t i = 1; i < P->n; i++) {
        if (P->p[i].lo <= P->p[k].hi && P->p[i].flags == P->p[k].flags) {
            if (P->p[i].hi > P->p[k].hi)
                P->p[k].hi = P->p[i].hi;
        } else {
            P->p[++k] = P->p[i];
        }
    }
    P->n = k + 1;
}

static const struct map *map_of(const struct map *m, size_t n, uint64_t a)
{
    for (size_t i = 0; i < n; i++)
        if (a >= m[i].lo && a < m[i].hi)
            return &m[i];
    return NULL;
}

static void make_plan(const struct map *m, size_t nm, const struct thr *th, size_t nt,
                      const struct snap_opts *o, struct plan *P)
{
    for (size_t i = 0; i < nm; i++) {
        const struct map *x = &m[i];
        if (never_read(x))
            continue;
        uint32_t f = pflags(x);
        int file = is_file_map(x);
        if (o->full) {
            if (!file || x->perms[1] == 'w' || x->written || x->path[0] == '[')
                plan_add(P, x->lo, x->hi, f);
            else if (x->pgoff == 0)
                plan_add(P, x->lo, x->lo + PAGE, f); /* ELF header: build-id */
            continue;
        }
        if (file && x->pgoff == 0)
            plan_add(P, x->lo, x->lo + PAGE, f);
        if (file && (x->perms[1] == 'w' || x->written) && x->perms[2] != 'x' &&
            x->hi - x->lo <= (8ULL << 20))
            plan_add(P, x->lo, x->hi, f); /* .data, GOT, RELRO with .dynamic: r_debug */
        if (!file && x->hi - x->lo <= (64ULL << 10))
            plan_add(P, x->lo, x->hi, f); /* vdso, small early allocations, .bss tails */
    }
    if (!o->full) {
        for (size_t i = 0; i < nt; i++) {
            uint64_t sp = th[i].have_regs ? th[i].regs.rsp : th[i].sp;
            const struct map *x = sp ? map_of(m, nm, sp) : NULL;
            if (x && !never_read(x)) {
                uint64_t lo = (sp > 4096 ? sp - 4096 : 0) & ~(PAGE - 1);
                if (lo < x->lo)
                    lo = x->lo;
                uint64_t hi = x->hi;
                if (hi - lo > o->stack_max)
                    hi = lo + o->stack_max;
                plan_add(P, lo, hi, pflags(x));
            }
            /* the futex word a thread waits on (a pthread mutex: its owner is 8 bytes on) */
            uint64_t fa = th[i].nr == 202 ? th[i].args[0] : 0;
            x = fa ? map_of(m, nm, fa) : NULL;
            if (x && !never_read(x))
                plan_add(P, fa & ~(PAGE - 1), (fa & ~(PAGE - 1)) + PAGE, pflags(x));
        }
    }
    /* pieces of different mappings never overlap; merge within one */
    plan_merge(P);
}

struct py_pages {
    struct plan *P;
    const struct map *m;
    size_t nm;
};

static void py_page(void *ctx, uint64_t page)
{
    struct py_pages *pp = ctx;
    const struct map *x = map_of(pp->m, pp->nm, page);
    if (x && !never_read(x))
        plan_add(pp->P, page, page + PAGE, pflags(x));
}

/* The pages the Python walker reads, for each mapped interpreter or libpython: its ELF file
 * opened through map_files (procfd: /proc/<pid>, as the process's owner), not by its path. */
static void python_pages(int procfd, int memfd, const struct map *m, size_t nm, struct plan *P,
                         int locals)
{
    struct cp_as as;
    if (procfd < 0 || memfd < 0 || cp_proc_owner(procfd, &as))
        return;
    struct py_pages pp = {P, m, nm};
    for (size_t i = 0; i < nm; i++)
        if (m[i].pgoff == 0 && is_file_map(&m[i]) && snap_python_module(m[i].path) &&
            (i == 0 || strcmp(m[i - 1].path, m[i].path))) {
            int fd = cp_open_mapped(procfd, m[i].lo, m[i].hi, m[i].path, m[i].inode, &as, NULL);
            if (fd >= 0) {
                snap_python_pages(fd, memfd, m[i].path, m[i].lo, py_page, &pp, locals);
                close(fd);
            }
        }
    plan_merge(P);
}

/* ---- notes ---- */

struct buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
};

static void put(struct buf *b, const void *d, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->len + n)
            nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void note(struct buf *b, const char *name, uint32_t type, const void *desc, size_t len)
{
    uint32_t h[3] = {(uint32_t)strlen(name) + 1, (uint32_t)len, type};
    put(b, h, sizeof(h));
    static const uint8_t zero[8];
    put(b, name, h[0]);
    put(b, zero, ((h[0] + 3) & ~3u) - h[0]);
    put(b, desc, len);
    put(b, zero, ((len + 3) & ~(size_t)3) - len);
}

static void prstatus_note(struct buf *b, pid_t pid, const struct thr *t, long ppid, long pgrp,
                          long sid)
{
    struct elf_prstatus ps;
    memset(&ps, 0, sizeof(ps));
    ps.pr_info.si_signo = ps.pr_cursig = (short)t->pending_sig;
    /* the tid as the process itself sees it, in its own pid namespace: what the kernel writes in
     * a core (task_pid_vnr of the dumping task) and what CPython's native thread ids and futex
     * owner words hold; snap.json keeps both (tid, ns_tid) */
    ps.pr_pid = t->ns_tid > 0 ? t->ns_tid : t->tid;
    ps.pr_ppid = (int)ppid;
    ps.pr_pgrp = (int)pgrp;
    ps.pr_sid = (int)sid;
    struct user_regs_struct r;
    if (t->have_regs) {
        r = t->regs;
    } else {
        /* never stopped: what /proc/<tid>/syscall says (entry registers of the syscall) */
        memset(&r, 0, sizeof(r));
        r.rip = t->pc;
        r.rsp = t->sp;
        r.orig_rax = (unsigned long long)t->nr;
        r.rdi = t->args[0];
        r.rsi = t->args[1];
        r.rdx = t->args[2];
        r.r10 = t->args[3];
        r.r8 = t->args[4];
        r.r9 = t->args[5];
        r.cs = 0x33;
        r.ss = 0x2b;
    }
    memcpy(&ps.pr_reg, &r, sizeof(r) < sizeof(ps.pr_reg) ? sizeof(r) : sizeof(ps.pr_reg));
    ps.pr_fpvalid = t->have_fp;
    (void)pid;
    note(b, "CORE", NT_PRSTATUS, &ps, sizeof(ps));
}

static void regset_notes(struct buf *b, const struct thr *t)
{
    if (t->have_fp)
        note(b, "CORE", NT_FPREGSET, &t->fp, sizeof(t->fp));
    /* no NT_X86_XSTATE: gdb sizes it from its own idea of the CPU's XSAVE layout and warns on
     * what PTRACE_GETREGSET returns here; the FP/SSE state above is enough for unwinding */
}

static long stat_num(const char *stat, int field)
{
    const char *p = stat ? strrchr(stat, ')') : NULL;
    if (!p)
        return 0;
    p++;
    for (int f = 3; f <= field; f++) {
        while (*p == ' ')
            p++;
        if (f == field)
            return atol(p);
        p = strchr(p, ' ');
        if (!p)
            return 0;
    }
    return 0;
}

static void build_notes(struct buf *b, pid_t pid, struct thr *th, size_t nt,
                        const struct map *m, size_t nm)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *stat = slurp(path, 1 << 16, NULL);
    long ppid = stat_num(stat, 4), pgrp = stat_num(stat, 5), sid = stat_num(stat, 6);
    /* the main thread first (gdb's "current" thread), if it has registers at all */
    size_t first = 0;
    for (size_t i = 0; i < nt; i++)
        if (th[i].tid == pid && !th[i].gone) {
            first = i;
            break;
        }
    int first_done = 0;
    for (size_t k = 0; k < nt; k++) {
        size_t i = k == 0 ? first : (k <= first ? k - 1 : k);
        struct thr *t = &th[i];
        if (t->gone || (!t->have_regs && !t->sp))
            continue;
        prstatus_note(b, pid, t, ppid, pgrp, sid);
        if (!first_done) {
            first_done = 1;
            struct elf_prpsinfo pi;
            memset(&pi, 0, sizeof(pi));
            char *rp = stat ? strrchr(stat, ')') : NULL;
            pi.pr_state = 0;
            pi.pr_sname = rp && rp[1] ? rp[2] : 'R';
            pi.pr_zomb = pi.pr_sname == 'Z';
            pi.pr_nice = (char)stat_num(stat, 19);
            pi.pr_flag = (unsigned long)stat_num(stat, 9);
            pi.pr_pid = th[first].tid == pid && th[first].ns_tid > 0 ? th[first].ns_tid : pid;
            pi.pr_ppid = (int)ppid;
            pi.pr_pgrp = (int)pgrp;
            pi.pr_sid = (int)sid;
            snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
            char *st = slurp(path, 1 << 16, NULL);
            char *u = st ? strstr(st, "\nUid:") : NULL, *g = st ? strstr(st, "\nGid:") : NULL;
            if (u)
                pi.pr_uid = (unsigned)atol(u + 5);
            if (g)
                pi.pr_gid = (unsigned)atol(g + 5);
            free(st);
            char *lp = stat ? strchr(stat, '(') : NULL;
            if (lp && rp && rp > lp)
                snprintf(pi.pr_fname, sizeof(pi.pr_fname), "%.*s", (int)(rp - lp - 1), lp + 1);
            size_t cl = 0;
            snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
            char *cmd = slurp(path, 4096, &cl);
            if (cmd) {
                size_t n = cl < sizeof(pi.pr_psargs) - 1 ? cl : sizeof(pi.pr_psargs) - 1;
                for (size_t j = 0; j < n; j++)
                    pi.pr_psargs[j] = cmd[j] ? cmd[j] : ' ';
                while (n && pi.pr_psargs[n - 1] == ' ')
                    pi.pr_psargs[--n] = 0;
            }
            free(cmd);
            note(b, "CORE", NT_PRPSINFO, &pi, sizeof(pi));
            size_t al = 0;
            snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
            char *auxv = slurp(path, 1 << 16, &al);
            if (auxv && al)
                note(b, "CORE", NT_AUXV, auxv, al);
            free(auxv);
            /* NT_FILE: count, page size, (start, end, offset in pages)[], names. The names as
             * the process sees them, as the kernel writes them: /proc/PID/maps shows them from
             * our root, so a process in a container (its root ROOT) has ROOT/usr/lib/... there,
             * and enrichment (through the process's root) and --sysroot want /usr/lib/... */
            char root[512] = "";
            snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
            ssize_t rl = readlink(path, root, sizeof(root) - 1);
            root[rl > 1 && (size_t)rl < sizeof(root) - 1 ? rl : 0] = 0;
            struct buf f = {0};
            uint64_t count = 0, pg = PAGE;
            for (size_t j = 0; j < nm; j++)
                count += m[j].path[0] == '/';
            put(&f, &count, 8);
            put(&f, &pg, 8);
            for (size_t j = 0; j < nm; j++)
                if (m[j].path[0] == '/') {
                    uint64_t e[3] = {m[j].lo, m[j].hi, m[j].pgoff / PAGE};
                    put(&f, e, sizeof(e));
                }
            size_t rlen = strlen(root);
            for (size_t j = 0; j < nm; j++)
                if (m[j].path[0] == '/') {
                    const char *pv = m[j].path;
                    if (rlen && !strncmp(pv, root, rlen) && pv[rlen] == '/')
                        pv += rlen;
                    put(&f, pv, strlen(pv) + 1);
                }
            if (!f.oom)
                note(b, "CORE", NT_FILE_TYPE, f.p, f.len);
            free(f.p);
        }
        regset_notes(b, t);
    }
    free(stat);
}

/* ---- output ---- */

static int write_zero(int fd, uint64_t n)
{
    static const uint8_t z[65536];
    while (n) {
        size_t a = n < sizeof(z) ? (size_t)n : sizeof(z);
        if (write_all(fd, z, a))
            return -1;
        n -= a;
    }
    return 0;
}

/* Copies [lo, hi) of the process to fd; unreadable pages become zeros. */
static int copy_range(int memfd, int fd, uint64_t lo, uint64_t hi, uint8_t *scratch,
                      size_t scap, uint64_t *unreadable)
{
    while (lo < hi) {
        size_t a = hi - lo < scap ? (size_t)(hi - lo) : scap;
        ssize_t r = pread(memfd, scratch, a, (off_t)lo);
        if (r <= 0) {
            /* page by page */
            a = PAGE - (lo & (PAGE - 1));
            if (a > hi - lo)
                a = (size_t)(hi - lo);
            r = pread(memfd, scratch, a, (off_t)lo);
            if (r <= 0) {
                memset(scratch, 0, a);
                *unreadable += a;
                r = (ssize_t)a;
            }
        }
        if (write_all(fd, scratch, (size_t)r))
            return -1;
        lo += (uint64_t)r;
    }
    return 0;
}

static const char *sysname(long nr)
{
    switch (nr) {
    case 0: return "read";
    case 1: return "write";
    case 7: return "poll";
    case 17: return "pread64";
    case 23: return "select";
    case 34: return "pause";
    case 35: return "nanosleep";
    case 43: return "accept";
    case 45: return "recvfrom";
    case 47: return "recvmsg";
    case 56: return "clone";
    case 57: return "fork";
    case 58: return "vfork";
    case 61: return "wait4";
    case 72: return "fcntl";
    case 16: return "ioctl";
    case 128: return "rt_sigtimedwait";
    case 130: return "rt_sigsuspend";
    case 202: return "futex";
    case 219: return "restart_syscall";
    case 230: return "clock_nanosleep";
    case 232: return "epoll_wait";
    case 270: return "pselect6";
    case 271: return "ppoll";
    case 281: return "epoll_pwait";
    case 288: return "accept4";
    case 299: return "recvmmsg";
    case 441: return "epoll_pwait2";
    case 449: return "futex_waitv";
    default: return NULL;
    }
}

static cJSON *hexnum(uint64_t v)
{
    char b[24];
    snprintf(b, sizeof(b), "0x%llx", (unsigned long long)v);
    return cJSON_CreateString(b);
}

static cJSON *thread_json(const struct thr *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tid", t->tid);
    cJSON_AddNumberToObject(o, "ns_tid", t->ns_tid);
    cJSON_AddStringToObject(o, "name", t->name);
    char st[2] = {t->state ? t->state : '?', 0};
    cJSON_AddStringToObject(o, "state", st);
    cJSON_AddStringToObject(o, "wchan", t->wchan);
    cJSON_AddBoolToObject(o, "stopped", t->stopped);
    cJSON_AddBoolToObject(o, "exited", t->gone);
    if (t->stopped && t->t_detach > 0)
        cJSON_AddNumberToObject(o, "stop_ms", (double)(long)((t->t_detach - t->t_stop) * 10) / 10);
    else
        cJSON_AddNullToObject(o, "stop_ms");
    if (t->stopped)
        cJSON_AddNumberToObject(o, "time_to_stop_ms",
                                (double)(long)((t->t_stop - t->t_interrupt) * 100) / 100);
    cJSON_AddStringToObject(o, "registers",
                            t->have_regs ? "ptrace" : t->sp ? "syscall" : "none");
    if (t->pending_sig)
        cJSON_AddNumberToObject(o, "pending_signal", t->pending_sig);
    cJSON *sc = cJSON_AddObjectToObject(o, "syscall");
    cJSON_AddStringToObject(sc, "raw", t->syscall);
    if (t->nr >= 0) {
        cJSON_AddNumberToObject(sc, "nr", (double)t->nr);
        const char *n = sysname(t->nr);
        if (n)
            cJSON_AddStringToObject(sc, "name", n);
        else
            cJSON_AddNullToObject(sc, "name");
        cJSON *a = cJSON_AddArrayToObject(sc, "args");
        for (int i = 0; i < 6; i++)
            cJSON_AddItemToArray(a, hexnum(t->args[i]));
    } else {
        cJSON_AddNullToObject(sc, "nr");
        cJSON_AddNullToObject(sc, "name");
    }
    if (t->sp) {
        cJSON_AddItemToObject(sc, "sp", hexnum(t->sp));
        cJSON_AddItemToObject(sc, "pc", hexnum(t->pc));
    }
    cJSON *ks = cJSON_AddArrayToObject(o, "kernel_stack");
    if (t->kstack) {
        /* "[<0>] do_futex+0x7c/0xb0": keep "do_futex+0x7c/0xb0" */
        const char *p = t->kstack;
        while (*p) {
            size_t l = strcspn(p, "\n");
            const char *q = p;
            if (*q == '[') {
                const char *e = memchr(q, ']', l);
                if (e) {
                    q = e + 1;
                    while (*q == ' ')
                        q++;
                }
            }
            if (q < p + l) {
                char tmp[256];
                snprintf(tmp, sizeof(tmp), "%.*s", (int)(p + l - q), q);
                cJSON_AddItemToArray(ks, cJSON_CreateString(tmp));
            }
            p += l;
            if (*p)
                p++;
        }
    }
    if (t->have_futex) {
        cJSON *f = cJSON_AddObjectToObject(o, "futex");
        cJSON_AddItemToObject(f, "addr", hexnum(t->args[0]));
        cJSON_AddNumberToObject(f, "op", (double)(t->args[1] & 0x7f));
        cJSON_AddNumberToObject(f, "word", t->futex_word[0]);
        /* as a glibc pthread_mutex_t (x86-64): __lock, __count, __owner, __nusers */
        /* glibc stores the owner's tid as the process sees it (its pid namespace) */
        cJSON_AddNumberToObject(f, "mutex_owner_ns", (int32_t)t->futex_word[2]);
        cJSON_AddNumberToObject(f, "mutex_owner",
                                t->owner_host ? t->owner_host : (int32_t)t->futex_word[2]);
        cJSON_AddNumberToObject(f, "mutex_count", t->futex_word[1]);
    }
    return o;
}

/* Seizes every thread of pid (PTRACE_SEIZE: nothing stops yet), threads started meanwhile too:
 * *th grows with list_tasks. 0, or -1 with the message in err when the main thread cannot be. */
static int seize_all(pid_t pid, struct thr **thp, size_t *ntp, size_t *capp, char *err,
                     size_t errlen)
{
    for (int pass = 0; pass < 4; pass++) {
        struct thr *th = *thp;
        for (size_t i = 0; i < *ntp; i++) {
            if (th[i].seized || th[i].gone)
                continue;
            if (ptrace(PTRACE_SEIZE, th[i].tid, 0, 0) == 0)
                th[i].seized = 1;
            else if (errno == ESRCH)
                th[i].gone = 1;
            else if (i == 0 || th[i].tid == pid) {
                cp_errmsg(err, errlen,
                          "the kernel refused to let it be traced (PTRACE_SEIZE of %d: %s)",
                          (int)th[i].tid, strerror(errno));
                return -1;
            }
        }
        if (list_tasks(pid, thp, ntp, capp) <= 0)
            break;
    }
    return 0;
}

/* Interrupts every seized thread and waits for the stops; each thread gets o->timeout_ms from
 * its interrupt (50 ms when it is in uninterruptible sleep already). Records stop times and the
 * signal a signal-delivery stop took (it goes back on detach). */
static void stop_all(struct thr *th, size_t nt, const struct snap_opts *o)
{
    for (size_t i = 0; i < nt; i++)
        if (th[i].seized) {
            th[i].t_interrupt = now_ms();
            if (ptrace(PTRACE_INTERRUPT, th[i].tid, 0, 0))
                th[i].gone = errno == ESRCH;
        }
    for (;;) {
        size_t waiting = 0;
        double last = 0;
        for (size_t i = 0; i < nt; i++)
            if (th[i].seized && !th[i].stopped && !th[i].gone) {
                waiting++;
                /* already in uninterruptible sleep: it will not stop unless it wakes */
                double lim = th[i].state == 'D' && o->timeout_ms > 50 ? 50 : o->timeout_ms;
                if (th[i].t_interrupt + lim > last)
                    last = th[i].t_interrupt + lim;
            }
        if (!waiting || now_ms() > last)
            break;
        int st;
        pid_t w = waitpid(-1, &st, __WALL | WNOHANG);
        if (w < 0 && errno != EINTR)
            break;
        if (w <= 0) {
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
            continue;
        }
        for (size_t i = 0; i < nt; i++) {
            if (th[i].tid != w)
                continue;
            if (WIFEXITED(st) || WIFSIGNALED(st)) {
                th[i].gone = 1;
            } else if (WIFSTOPPED(st)) {
                th[i].stopped = 1;
                th[i].t_stop = now_ms();
                int sig = WSTOPSIG(st);
                /* a signal-delivery stop: the signal goes back on detach */
                if ((st >> 16) == 0)
                    th[i].pending_sig = sig;
            }
        }
    }
}

/* The stopped threads' registers, then the futex words of those blocked in futex(2) (the
 * syscall's first argument, read through /proc/<pid>/mem) and the host tid of a futex owner. */
static void read_threads(struct thr *th, size_t nt, int memfd)
{
    for (size_t i = 0; i < nt; i++) {
        struct thr *t = &th[i];
        if (!t->stopped)
            continue;
        struct iovec io = {&t->regs, sizeof(t->regs)};
        t->have_regs = ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_PRSTATUS, &io) == 0;
        io = (struct iovec){&t->fp, sizeof(t->fp)};
        t->have_fp = ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_PRFPREG, &io) == 0;
    }
    for (size_t i = 0; i < nt; i++)
        if (th[i].nr == 202 && memfd >= 0 &&
            pread(memfd, th[i].futex_word, sizeof(th[i].futex_word), (off_t)th[i].args[0]) ==
                (ssize_t)sizeof(th[i].futex_word))
            th[i].have_futex = 1;

    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; th[i].have_futex && j < nt; j++)
            if (th[j].ns_tid && th[j].ns_tid == (pid_t)th[i].futex_word[2])
                th[i].owner_host = th[j].tid;
}

/* Writes the core to core_fd: the ELF header, the note and load program headers, the notes,
 * page-aligned padding, then each planned range from memfd. Adds the segment bytes to *kept and
 * the bytes that could not be read (zeros in the core) to *unreadable. 0, or -1 with err. */
static int write_core(int core_fd, int memfd, const struct plan *P, const struct buf *notes,
                      uint64_t *kept, uint64_t *unreadable, char *err, size_t errlen)
{
    int rc = 0;
    if (notes->oom || (P->n + 1) >= PN_XNUM) {
        cp_errmsg(err, errlen, "%s", notes->oom ? "out of memory" : "too many segments");
        rc = -1;
    } else {
        size_t phn = 1 + P->n;
        size_t head = sizeof(Elf64_Ehdr) + phn * sizeof(Elf64_Phdr);
        Elf64_Ehdr eh;
        memset(&eh, 0, sizeof(eh));
        memcpy(eh.e_ident, ELFMAG, SELFMAG);
        eh.e_ident[EI_CLASS] = ELFCLASS64;
        eh.e_ident[EI_DATA] = ELFDATA2LSB;
        eh.e_ident[EI_VERSION] = EV_CURRENT;
        eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
        eh.e_type = ET_CORE;
        eh.e_machine = EM_X86_64;
        eh.e_version = EV_CURRENT;
        eh.e_phoff = sizeof(Elf64_Ehdr);
        eh.e_ehsize = sizeof(Elf64_Ehdr);
        eh.e_phentsize = sizeof(Elf64_Phdr);
        eh.e_phnum = (uint16_t)phn;
        struct buf hb = {0};
        put(&hb, &eh, sizeof(eh));
        Elf64_Phdr nph = {.p_type = PT_NOTE, .p_offset = head, .p_filesz = notes->len};
        put(&hb, &nph, sizeof(nph));
        uint64_t off = (head + notes->len + PAGE - 1) & ~(PAGE - 1);
        for (size_t i = 0; i < P->n; i++) {
            Elf64_Phdr ph = {.p_type = PT_LOAD,
                             .p_flags = P->p[i].flags,
                             .p_offset = off,
                             .p_vaddr = P->p[i].lo,
                             .p_filesz = P->p[i].hi - P->p[i].lo,
                             .p_memsz = P->p[i].hi - P->p[i].lo,
                             .p_align = PAGE};
            put(&hb, &ph, sizeof(ph));
            off += ph.p_filesz; /* page multiples: stays aligned */
            *kept += ph.p_filesz;
        }
        put(&hb, notes->p, notes->len);
        size_t scap = 1 << 20;
        uint8_t *scratch = malloc(scap);
        if (hb.oom || !scratch || memfd < 0) {
            cp_errmsg(err, errlen, "%s",
                      memfd < 0 ? "cannot open the process's memory" : "out of memory");
            rc = -1;
        } else if (write_all(core_fd, hb.p, hb.len) ||
                   write_zero(core_fd, ((head + notes->len + PAGE - 1) & ~(PAGE - 1)) - hb.len)) {
            cp_errmsg(err, errlen, "writing the core: %s", strerror(errno));
            rc = -1;
        } else {
            for (size_t i = 0; i < P->n && rc == 0; i++)
                if (copy_range(memfd, core_fd, P->p[i].lo, P->p[i].hi, scratch, scap,
                               unreadable)) {
                    cp_errmsg(err, errlen, "writing the core: %s", strerror(errno));
                    rc = -1;
                }
        }
        free(scratch);
        free(hb.p);
    }
    return rc;
}

/* snap.json: the stop's timings (t: start, stop, core write start and end, detach), counts, the
 * core written, and each thread's state. */
static cJSON *snap_info(pid_t pid, const struct snap_opts *o, const struct thr *th, size_t nt,
                        const struct plan *P, uint64_t kept, uint64_t unreadable,
                        const double t[5], int rc, const char *err)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "crashpack-snap/1");
    cJSON_AddNumberToObject(j, "pid", pid);
    cJSON_AddStringToObject(j, "core", o->full ? "full" : "slim");
    cJSON_AddStringToObject(j, "arch", "x86_64");
    cJSON *s = cJSON_AddObjectToObject(j, "stop");
    cJSON_AddNumberToObject(s, "timeout_ms", o->timeout_ms);
    cJSON_AddNumberToObject(s, "prepare_ms", (double)(long)((t[1] - t[0]) * 10) / 10);
    cJSON_AddNumberToObject(s, "stopped_ms", (double)(long)((t[4] - t[1]) * 10) / 10);
    cJSON_AddNumberToObject(s, "core_write_ms", (double)(long)((t[3] - t[2]) * 10) / 10);
    size_t nstop = 0, nnot = 0;
    for (size_t i = 0; i < nt; i++) {
        nstop += th[i].stopped;
        nnot += !th[i].stopped && !th[i].gone;
    }
    cJSON_AddNumberToObject(s, "threads", (double)nt);
    cJSON_AddNumberToObject(s, "threads_stopped", (double)nstop);
    cJSON_AddNumberToObject(s, "threads_not_stopped", (double)nnot);
    cJSON *cj = cJSON_AddObjectToObject(j, "core_info");
    cJSON_AddNumberToObject(cj, "segments", (double)P->n);
    cJSON_AddNumberToObject(cj, "bytes", (double)kept);
    cJSON_AddNumberToObject(cj, "unreadable_bytes", (double)unreadable);
    if (rc)
        cJSON_AddStringToObject(j, "error", err);
    cJSON *ta = cJSON_AddArrayToObject(j, "threads");
    for (size_t i = 0; i < nt; i++)
        cJSON_AddItemToArray(ta, thread_json(&th[i]));
    return j;
}

int snap_stop_and_write(pid_t pid, const struct snap_opts *o, int core_fd, int info_fd, char *err,
                        size_t errlen)
{
    double t0 = now_ms();
    struct thr *th = NULL;
    size_t nt = 0, cap = 0;
    if (list_tasks(pid, &th, &nt, &cap) < 0) {
        cp_errmsg(err, errlen, "/proc/%d: %s", (int)pid, strerror(errno));
        return -1;
    }
    int rc = 0;
    /* seize everything, threads started meanwhile too */
    if (seize_all(pid, &th, &nt, &cap, err, errlen)) {
        free(th);
        return -1;
    }
    /* the mappings (smaps walks page tables: before the stop, not during it) */
    struct map *m = NULL;
    size_t nm = 0;
    parse_maps(pid, &m, &nm);
    /* the kernel's view first: it shows the hang, not our stop */
    for (size_t i = 0; i < nt; i++)
        if (!th[i].gone)
            kernel_view(pid, &th[i]);
    double t_stop0 = now_ms();
    stop_all(th, nt, o);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int memfd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    int procfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* everything so far went by the pid's number: it was the process only if it holds it still */
    int gone = o->pidfd > 0 && !cp_pidfd_holds(o->pidfd, pid);
    read_threads(th, nt, gone ? -1 : memfd);
    struct plan P = {0};
    make_plan(m, nm, th, nt, o, &P);
    if (!o->full && !gone) /* the Python walker's pages (snap_python.h) */
        python_pages(procfd, memfd, m, nm, &P, o->python_locals);
    if (procfd >= 0)
        close(procfd);
    struct buf notes = {0};
    build_notes(&notes, pid, th, nt, m, nm);
    uint64_t unreadable = 0, kept = 0;
    double t_core0 = now_ms();
    if (gone) {
        cp_errmsg(err, errlen, "the process that asked has exited: pid %d may be another's",
                  (int)pid);
        rc = -1;
    } else {
        rc = write_core(core_fd, memfd, &P, &notes, &kept, &unreadable, err, errlen);
    }
    double t_core1 = now_ms();
    /* let go: stopped threads now; the others when this process exits */
    for (size_t i = 0; i < nt; i++)
        if (th[i].stopped) {
            ptrace(PTRACE_DETACH, th[i].tid, 0, (void *)(long)th[i].pending_sig);
            th[i].t_detach = now_ms();
        }
    double t_end = now_ms();
    if (memfd >= 0)
        close(memfd);

    const double t[5] = {t0, t_stop0, t_core0, t_core1, t_end};
    cJSON *j = snap_info(pid, o, th, nt, &P, kept, unreadable, t, rc, err);
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (out) {
        write_all(info_fd, out, strlen(out));
        free(out);
    }
    for (size_t i = 0; i < nt; i++) {
        free(th[i].kstack);
    }
    free(th);
    free(m);
    free(P.p);
    free(notes.p);
    return rc;
}
