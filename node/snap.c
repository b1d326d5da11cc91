/* snap.c - snap_pid: a stopper child writes the core and the stop report, crashpack-capture
 * --snap turns them into the bundle. Slim cores are built in memory (memfd) and handed over
 * after the process runs again, so the stop lasts only as long as reading the stacks; a full
 * core streams through a pipe while the process is stopped. */
#include "util.h" /* write_all */
#include "snap.h"
#include "datadir.h"
#include "config.h"
#include "errmsg.h"
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

static int sym_in_elf(const char *file, uint64_t base, uint64_t addr, char *out, size_t olen)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
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
    close(fd);
    return found;
}

/* The global variable holding addr in pid's modules, or -1. Files are opened through the
 * process's root (a process in another container). */
static int addr_symbol(pid_t pid, uint64_t addr, char *out, size_t olen)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[1200], last[600] = "";
    uint64_t base = 0;
    int rc = -1;
    /* the module whose mappings (plus a following anonymous .bss tail) cover addr */
    char cand[600] = "";
    uint64_t cand_base = 0;
    while (fgets(line, sizeof(line), f)) {
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
            if (addr >= lo && addr < hi) {
                snprintf(cand, sizeof(cand), "%s", last);
                cand_base = base;
            }
        } else if (!p[0] && last[0] && addr >= lo && addr < hi) {
            snprintf(cand, sizeof(cand), "%s", last); /* .bss past the file's end */
            cand_base = base;
        } else if (p[0]) {
            last[0] = 0;
        }
    }
    fclose(f);
    if (cand[0]) {
        char file[700];
        snprintf(file, sizeof(file), "/proc/%d/root%s", (int)pid, cand);
        rc = sym_in_elf(file, cand_base, addr, out, olen);
    }
    return rc;
}

static void name_futexes(pid_t pid, cJSON *info)
{
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(info, "threads"))
    {
        cJSON *f = cJSON_GetObjectItem(t, "futex");
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(f, "addr"));
        if (!a)
            continue;
        char sym[256];
        if (addr_symbol(pid, strtoull(a, NULL, 16), sym, sizeof(sym)) == 0)
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

static pid_t spawn_capture(const struct snap_request *rq, int core_in, int info_in,
                           int status_out, char *err, size_t errlen)
{
    char exe[4200];
    const char *dir = cp_bindir();
    snprintf(exe, sizeof(exe), "%s/crashpack-capture", dir ? dir : ".");
    if (access(exe, X_OK)) {
        cp_errmsg(err, errlen, "%s: %s", exe, strerror(errno));
        return -1;
    }
    char pid_s[24];
    snprintf(pid_s, sizeof(pid_s), "%d", (int)rq->pid);
    const char *argv[32];
    char mspec[4][64];
    int n = 0;
    argv[n++] = exe;
    argv[n++] = "--snap";
    if (rq->kind) {
        argv[n++] = "--kind";
        argv[n++] = rq->kind;
    }
    size_t nm = rq->nmembers < 4 ? rq->nmembers : 4;
    for (size_t i = 0; i < nm; i++) {
        snprintf(mspec[i], sizeof(mspec[i]), "%s=%zu", rq->members[i].name, 5 + i);
        argv[n++] = "--member";
        argv[n++] = mspec[i];
    }
    if (rq->config) {
        argv[n++] = "-c";
        argv[n++] = rq->config;
    }
    if (rq->bundle_dir) {
        argv[n++] = "--bundle-dir";
        argv[n++] = rq->bundle_dir;
    }
    argv[n++] = "--mode";
    argv[n++] = rq->full ? "full" : "slim";
    argv[n++] = "--trigger";
    argv[n++] = rq->trigger ? rq->trigger : "snap";
    argv[n++] = "--reason";
    argv[n++] = rq->reason ? rq->reason : "requested";
    argv[n++] = pid_s;
    argv[n] = NULL;
    pid_t p = fork();
    if (p < 0) {
        cp_errmsg(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (p == 0) {
        /* 0: the core, 3: snap.json, 4: where the finisher names the bundle */
        /* 5...: the members */
        int fds[3 + 4] = {core_in, info_in, status_out};
        int tmp[3 + 4];
        for (size_t i = 0; i < nm; i++)
            fds[3 + i] = rq->members[i].fd;
        for (size_t i = 0; i < 3 + nm; i++)
            if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16)) < 0)
                _exit(126);
        if (dup2(tmp[0], 0) < 0 || dup2(tmp[1], 3) < 0 || dup2(tmp[2], 4) < 0)
            _exit(126);
        for (size_t i = 0; i < nm; i++)
            if (dup2(tmp[3 + i], (int)(5 + i)) < 0)
                _exit(126);
        closefrom((unsigned)(5 + nm));
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    return p;
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
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d", (int)rq->pid);
    if (access(path, F_OK)) {
        cp_errmsg(err, errlen, "no process %d", (int)rq->pid);
        return -1;
    }
    struct cp_config cfg;
    cp_config_defaults(&cfg);
    char cerr[300];
    if (cp_config_load(&cfg, rq->config ? rq->config : CP_DEFAULT_CONFIG, rq->config != NULL,
                       cerr, sizeof(cerr))) {
        cp_errmsg(err, errlen, "%s", cerr);
        return -1;
    }
    struct snap_opts o = {.full = rq->full,
                          .stack_max = cfg.slim_stack_max,
                          .timeout_ms = rq->timeout_ms ? rq->timeout_ms : SNAP_TIMEOUT_MS};
    int info_mem = memfd_create("crashpack-snap-info", MFD_CLOEXEC);
    int core_mem = rq->full ? -1 : memfd_create("crashpack-snap-core", MFD_CLOEXEC);
    int corep[2] = {-1, -1}, infop[2] = {-1, -1}, statp[2] = {-1, -1};
    pid_t cap = -1;
    int rc = -1;
    if (info_mem < 0 || (!rq->full && core_mem < 0) || pipe2(infop, O_CLOEXEC) ||
        pipe2(statp, O_CLOEXEC) || (rq->full && pipe2(corep, O_CLOEXEC))) {
        cp_errmsg(err, errlen, "memfd/pipe: %s", strerror(errno));
        goto out;
    }
    if (rq->full) {
        /* the capture drains the core while the process is stopped */
        cap = spawn_capture(rq, corep[0], infop[0], statp[1], err, errlen);
        if (cap < 0)
            goto out;
        close(corep[0]);
        corep[0] = -1;
    }
    int efd[2];
    if (pipe2(efd, O_CLOEXEC)) {
        cp_errmsg(err, errlen, "pipe: %s", strerror(errno));
        goto out;
    }
    pid_t st = fork();
    if (st == 0) {
        signal(SIGPIPE, SIG_IGN);
        char e2[400] = "";
        int r = snap_stop_and_write(rq->pid, &o, rq->full ? corep[1] : core_mem, info_mem, e2,
                                    sizeof(e2));
        if (r && write(efd[1], e2, strlen(e2)) < 0)
            _exit(2);
        _exit(r ? 1 : 0);
    }
    close(efd[1]);
    if (corep[1] >= 0) {
        close(corep[1]);
        corep[1] = -1;
    }
    if (st < 0) {
        close(efd[0]);
        cp_errmsg(err, errlen, "fork: %s", strerror(errno));
        goto out;
    }
    char e2[400];
    ssize_t en = read(efd[0], e2, sizeof(e2) - 1);
    close(efd[0]);
    int ws = 0;
    waitpid(st, &ws, 0);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        if (en > 0) {
            e2[en] = 0;
            cp_errmsg(err, errlen, "%s", e2);
        } else {
            cp_errmsg(err, errlen, "the stopper failed (status 0x%x)", ws);
        }
        goto out;
    }
    char *ib = NULL;
    size_t il = 0;
    lseek(info_mem, 0, SEEK_SET);
    if (read_fd_all(info_mem, &ib, &il) == 0) {
        *info = cJSON_ParseWithLength(ib, il);
        free(ib);
    }
    if (*info) {
        name_futexes(rq->pid, *info);
        cJSON_AddStringToObject(*info, "trigger", rq->trigger ? rq->trigger : "snap");
        cJSON_AddStringToObject(*info, "reason", rq->reason ? rq->reason : "requested");
    }
    if (!rq->full) {
        lseek(core_mem, 0, SEEK_SET);
        cap = spawn_capture(rq, core_mem, infop[0], statp[1], err, errlen);
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
    /* the finisher's line: "ok PATH" or "failed TMPNAME"; EOF: the capture gave up */
    char line[1200];
    size_t ln = 0;
    while (ln < sizeof(line) - 1) {
        ssize_t r = read(statp[0], line + ln, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || line[ln] == '\n')
            break;
        ln++;
    }
    line[ln] = 0;
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
    int fds[] = {info_mem, core_mem, corep[0], corep[1], infop[0], infop[1], statp[0], statp[1]};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}
