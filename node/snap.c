/* snap.c - snap_pid: a stopper child writes the core and the stop report, crashpack-capture
 * --snap turns them into the bundle. Slim cores are built in memory (memfd) and handed over
 * after the process runs again, so the stop lasts only as long as reading the stacks; a full
 * core streams through a pipe while the process is stopped. */
#include "util.h" /* write_all */
#include "snap.h"
#include "datadir.h"
#include "config.h"
#include "errmsg.h"
#include "pidfd.h"
#include "rootopen.h"
#include "snap_core.h"
#include "snap_python.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SNAP_TIMEOUT_MS 500

/* ---- naming the futex words threads wait on (a global mutex gets its symbol) ---- */

/* The data symbol of ELF file fd (mapped at base) that holds addr, into out; 0, or -1. */
static int sym_in_elf(int fd, uint64_t base, uint64_t addr, char *out, size_t olen)
{
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    int found = -1;
    GElf_Ehdr eh;
    if (e && gelf_getehdr(e, &eh)) {
        uint64_t a = addr - snap_load_bias(e, base);
        for (int pass = 0; pass < 2 && found < 0; pass++) {
            Elf_Scn *scn = NULL;
            while ((scn = elf_nextscn(e, scn)) && found < 0) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh) ||
                    sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) || !sh.sh_entsize)
                    continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
                for (size_t i = 0; i < n; i++) {
                    GElf_Sym s;
                    if (!gelf_getsym(d, (int)i, &s))
                        continue;
                    int ty = GELF_ST_TYPE(s.st_info);
                    if ((ty != STT_OBJECT && ty != STT_TLS && ty != STT_COMMON) || !s.st_size ||
                        s.st_shndx == SHN_UNDEF)
                        continue;
                    if (a >= s.st_value && a < s.st_value + s.st_size) {
                        const char *nm = elf_strptr(e, sh.sh_link, s.st_name);
                        if (!nm)
                            continue;
                        if (a == s.st_value)
                            snprintf(out, olen, "%s", nm);
                        else
                            snprintf(out, olen, "%s+0x%llx", nm,
                                     (unsigned long long)(a - s.st_value));
                        found = 0;
                        break;
                    }
                }
            }
        }
    }
    if (e)
        elf_end(e);
    return found;
}

/* The module whose mappings (plus a following anonymous .bss tail) cover addr: one of its
 * mappings (lo, hi: its map_files name) and its base. */
struct module_at {
    uint64_t lo, hi, base, ino;
    char path[600];
    int found;
};

static void module_of(FILE *maps, uint64_t addr, struct module_at *mod)
{
    char line[1200], last[600] = "";
    uint64_t base = 0, last_lo = 0, last_hi = 0, last_ino = 0;
    mod->found = 0;
    while (fgets(line, sizeof(line), maps)) {
        unsigned long long lo, hi, off;
        char perms[8];
        unsigned long inode;
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %lu %n", &lo, &hi, perms, &off, &inode, &pos) <
            5)
            continue;
        char *p = line + pos;
        p[strcspn(p, "\n")] = 0;
        if (p[0] == '/' && inode) {
            if (strcmp(p, last)) {
                snprintf(last, sizeof(last), "%s", p);
                base = lo - off;
            }
            last_lo = lo;
            last_hi = hi;
            last_ino = inode;
            if (addr >= lo && addr < hi) {
                *mod = (struct module_at){lo, hi, base, inode, "", 1};
                snprintf(mod->path, sizeof(mod->path), "%s", last);
            }
        } else if (!p[0] && last[0] && addr >= lo && addr < hi) {
            /* .bss past the file's end */
            *mod = (struct module_at){last_lo, last_hi, base, last_ino, "", 1};
            snprintf(mod->path, sizeof(mod->path), "%s", last);
        } else if (p[0]) {
            last[0] = 0;
        }
    }
}

/* The global variable holding addr in the process's modules, or -1. The module's file is the one
 * the process maps (procfd's map_files, as its owner), never the path its maps show: that path
 * is the process's to replace (a FIFO would hang us, a symlink would name another file). */
static int addr_symbol(int procfd, const struct cp_as *as, uint64_t addr, char *out, size_t olen)
{
    int mfd = openat(procfd, "maps", O_RDONLY | O_CLOEXEC);
    FILE *f = mfd >= 0 ? fdopen(mfd, "re") : NULL;
    if (!f) {
        if (mfd >= 0)
            close(mfd);
        return -1;
    }
    struct module_at mod;
    module_of(f, addr, &mod);
    fclose(f);
    int fd = mod.found ? cp_open_mapped(procfd, mod.lo, mod.hi, mod.path, mod.ino, as, NULL) : -1;
    if (fd < 0)
        return -1;
    int rc = sym_in_elf(fd, mod.base, addr, out, olen);
    close(fd);
    return rc;
}

static void name_futexes(int procfd, cJSON *info)
{
    struct cp_as as;
    int have_owner = procfd >= 0 && cp_proc_owner(procfd, &as) == 0;
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(info, "threads"))
    {
        cJSON *f = cJSON_GetObjectItem(t, "futex");
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(f, "addr"));
        if (!a)
            continue;
        char sym[256];
        if (have_owner && addr_symbol(procfd, &as, strtoull(a, NULL, 16), sym, sizeof(sym)) == 0)
            cJSON_AddStringToObject(f, "symbol", sym);
        else
            cJSON_AddNullToObject(f, "symbol");
    }
}

/* ---- running the pieces ---- */

static int read_fd_all(int fd, char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        if (n == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb)
                break;
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (!b)
        return -1;
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

/* crashpack-capture --snap's arguments for rq (with the pidfd on descriptor 5 + members). */
struct capture_args {
    const char *argv[40];
    char mspec[4][64], pid_s[24], pidfd_s[24];
};

static void capture_argv(const struct snap_request *rq, const char *exe, size_t nm, int pidfd,
                         struct capture_args *A)
{
    int n = 0;
    A->argv[n++] = exe;
    A->argv[n++] = "--snap";
    if (rq->kind) {
        A->argv[n++] = "--kind";
        A->argv[n++] = rq->kind;
    }
    for (size_t i = 0; i < nm; i++) {
        snprintf(A->mspec[i], sizeof(A->mspec[i]), "%s=%zu", rq->members[i].name, 5 + i);
        A->argv[n++] = "--member";
        A->argv[n++] = A->mspec[i];
    }
    const char *opt[][2] = {{"-c", rq->config},
                            {"--bundle-dir", rq->bundle_dir},
                            {"--room", rq->room},
                            {"--mode", rq->full ? "full" : "slim"},
                            {"--trigger", rq->trigger ? rq->trigger : "snap"},
                            {"--reason", rq->reason ? rq->reason : "requested"}};
    for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
        if (opt[i][1]) {
            A->argv[n++] = opt[i][0];
            A->argv[n++] = opt[i][1];
        }
    if (pidfd >= 0) {
        snprintf(A->pidfd_s, sizeof(A->pidfd_s), "%zu", 5 + nm);
        A->argv[n++] = "--pidfd";
        A->argv[n++] = A->pidfd_s;
    }
    snprintf(A->pid_s, sizeof(A->pid_s), "%d", (int)rq->pid);
    A->argv[n++] = A->pid_s;
    A->argv[n] = NULL;
}

/* Starts crashpack-capture --snap: 0 the core, 3 snap.json, 4 where the finisher names the
 * bundle, 5... the members, then the process's pidfd. */
static pid_t spawn_capture(const struct snap_request *rq, int core_in, int info_in, int status_out,
                           int pidfd, char *err, size_t errlen)
{
    char exe[4200];
    const char *dir = cp_bindir();
    snprintf(exe, sizeof(exe), "%s/crashpack-capture", dir ? dir : ".");
    if (access(exe, X_OK)) {
        cp_errmsg(err, errlen, "%s: %s", exe, strerror(errno));
        return -1;
    }
    size_t nm = rq->nmembers < 4 ? rq->nmembers : 4;
    struct capture_args A;
    capture_argv(rq, exe, nm, pidfd, &A);
    pid_t p = fork();
    if (p < 0) {
        cp_errmsg(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (p == 0) {
        int fds[3 + 4 + 1] = {core_in, info_in, status_out}, to[3 + 4 + 1] = {0, 3, 4};
        int tmp[3 + 4 + 1];
        size_t k = 3;
        for (size_t i = 0; i < nm; i++, k++) {
            fds[k] = rq->members[i].fd;
            to[k] = (int)(5 + i);
        }
        if (pidfd >= 0) {
            fds[k] = pidfd;
            to[k++] = (int)(5 + nm);
        }
        for (size_t i = 0; i < k; i++)
            if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16)) < 0)
                _exit(126);
        for (size_t i = 0; i < k; i++)
            if (dup2(tmp[i], to[i]) < 0)
                _exit(126);
        closefrom((unsigned)(5 + nm + (pidfd >= 0)));
        execv(exe, (char *const *)A.argv);
        _exit(127);
    }
    return p;
}

/* The stopper: a child that stops the process, writes its core to core_fd and the stop report
 * to info_fd, and lets it go (snap_core.h). 0, or -1 with err. */
static int run_stopper(pid_t pid, const struct snap_opts *o, int core_fd, int info_fd, char *err,
                       size_t errlen)
{
    int efd[2];
    if (pipe2(efd, O_CLOEXEC)) {
        cp_errmsg(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t st = fork();
    if (st == 0) {
        signal(SIGPIPE, SIG_IGN);
        char e2[400] = "";
        int r = snap_stop_and_write(pid, o, core_fd, info_fd, e2, sizeof(e2));
        if (r && write(efd[1], e2, strlen(e2)) < 0)
            _exit(2);
        _exit(r ? 1 : 0);
    }
    close(efd[1]);
    if (st < 0) {
        close(efd[0]);
        cp_errmsg(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    char e2[400];
    ssize_t en = read(efd[0], e2, sizeof(e2) - 1);
    close(efd[0]);
    int ws = 0;
    waitpid(st, &ws, 0);
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
        return 0;
    if (en > 0) {
        e2[en] = 0;
        cp_errmsg(err, errlen, "%s", e2);
    } else {
        cp_errmsg(err, errlen, "the stopper failed (status 0x%x)", ws);
    }
    return -1;
}

/* The finisher's line ("ok PATH", "failed TMPNAME"; "" at EOF: the capture gave up). */
static void read_line(int fd, char *line, size_t n)
{
    size_t ln = 0;
    while (ln < n - 1) {
        ssize_t r = read(fd, line + ln, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || line[ln] == '\n')
            break;
        ln++;
    }
    line[ln] = 0;
}

/* The process held: its pidfd (the request's, else one opened now into *own) and /proc/<pid>,
 * opened while the pidfd says the process still holds the pid. 0, or -1 with err. */
static int hold_process(const struct snap_request *rq, int *pidfd, int *own, int *procfd, char *err,
                        size_t errlen)
{
    *own = rq->pidfd > 0 ? -1 : cp_pidfd_open(rq->pid);
    *pidfd = rq->pidfd > 0 ? rq->pidfd : *own;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d", (int)rq->pid);
    *procfd = *pidfd >= 0 ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (*procfd < 0 || !cp_pidfd_holds(*pidfd, rq->pid)) {
        cp_errmsg(err, errlen, "no process %d (or it has exited)", (int)rq->pid);
        return -1;
    }
    return 0;
}

/* snap.json's parts the stopper does not know: the futexes' symbols, the trigger and reason, and
 * whether the analysis reads Python frames' locals (docs/python.md) */
static void info_finish(cJSON *info, int procfd, const struct snap_request *rq, int python_locals)
{
    name_futexes(procfd, info);
    cJSON_AddStringToObject(info, "trigger", rq->trigger ? rq->trigger : "snap");
    cJSON_AddStringToObject(info, "reason", rq->reason ? rq->reason : "requested");
    if (python_locals)
        cJSON_AddTrueToObject(info, "python_locals");
}

int snap_pid(const struct snap_request *rq, char *bundle, size_t blen, cJSON **info, char *err,
             size_t errlen)
{
    bundle[0] = 0;
    *info = NULL;
    if (rq->pid <= 0 || rq->pid == getpid()) {
        cp_errmsg(err, errlen, "cannot snap pid %d", (int)rq->pid);
        return -1;
    }
    int pidfd = -1, own = -1, procfd = -1;
    struct cp_config cfg;
    cp_config_defaults(&cfg);
    char cerr[300];
    int info_mem = -1, core_mem = -1;
    int corep[2] = {-1, -1}, infop[2] = {-1, -1}, statp[2] = {-1, -1};
    pid_t cap = -1;
    int rc = -1;
    if (hold_process(rq, &pidfd, &own, &procfd, err, errlen))
        goto out;
    if (cp_config_load(&cfg, rq->config ? rq->config : CP_DEFAULT_CONFIG, rq->config != NULL,
                       cerr, sizeof(cerr))) {
        cp_errmsg(err, errlen, "%s", cerr);
        goto out;
    }
    struct snap_opts o = {.full = rq->full,
                          .stack_max = cfg.slim_stack_max,
                          .python_locals = rq->python_locals || cfg.python_locals,
                          .timeout_ms = rq->timeout_ms ? rq->timeout_ms : SNAP_TIMEOUT_MS,
                          .pidfd = pidfd};
    info_mem = memfd_create("crashpack-snap-info", MFD_CLOEXEC);
    core_mem = rq->full ? -1 : memfd_create("crashpack-snap-core", MFD_CLOEXEC);
    if (info_mem < 0 || (!rq->full && core_mem < 0) || pipe2(infop, O_CLOEXEC) ||
        pipe2(statp, O_CLOEXEC) || (rq->full && pipe2(corep, O_CLOEXEC))) {
        cp_errmsg(err, errlen, "memfd/pipe: %s", strerror(errno));
        goto out;
    }
    if (rq->full) {
        /* the capture drains the core while the process is stopped */
        cap = spawn_capture(rq, corep[0], infop[0], statp[1], pidfd, err, errlen);
        if (cap < 0)
            goto out;
        close(corep[0]);
        corep[0] = -1;
    }
    int srun = run_stopper(rq->pid, &o, rq->full ? corep[1] : core_mem, info_mem, err, errlen);
    if (corep[1] >= 0) {
        close(corep[1]);
        corep[1] = -1;
    }
    if (srun)
        goto out;
    char *ib = NULL;
    size_t il = 0;
    lseek(info_mem, 0, SEEK_SET);
    if (read_fd_all(info_mem, &ib, &il) == 0) {
        *info = cJSON_ParseWithLength(ib, il);
        free(ib);
    }
    if (*info)
        info_finish(*info, procfd, rq, o.python_locals);
    if (!rq->full) {
        if (!cp_pidfd_holds(pidfd, rq->pid)) {
            cp_errmsg(err, errlen, "pid %d exited during the snapshot", (int)rq->pid);
            goto out;
        }
        lseek(core_mem, 0, SEEK_SET);
        cap = spawn_capture(rq, core_mem, infop[0], statp[1], pidfd, err, errlen);
        if (cap < 0)
            goto out;
    }
    close(infop[0]);
    infop[0] = -1;
    close(statp[1]);
    statp[1] = -1;
    {
        signal(SIGPIPE, SIG_IGN);
        char *s = *info ? cJSON_PrintUnformatted(*info) : NULL;
        if (s)
            write_all(infop[1], s, strlen(s));
        free(s);
        close(infop[1]);
        infop[1] = -1;
    }
    char line[1200];
    read_line(statp[0], line, sizeof(line));
    int cs = 0;
    waitpid(cap, &cs, 0);
    cap = -1;
    if (!strncmp(line, "ok ", 3)) {
        snprintf(bundle, blen, "%s", line + 3);
        rc = 0;
    } else {
        cp_errmsg(err, errlen, "the capture did not publish a bundle (%s; exit status 0x%x)",
                  line[0] ? line : "no word from it", cs);
    }
out:
    if (cap > 0)
        waitpid(cap, NULL, 0);
    int fds[] = {info_mem, core_mem, corep[0], corep[1], infop[0],
                 infop[1], statp[0], statp[1], own,      procfd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}
