/* cmd_pyhook.c - `crashpack python-hook install|uninstall|status [--python PATH]`: puts the
 * Python hook (python/crashpack/, python/_crashpack_hook.py, python/crashpack-hook.pth;
 * docs/python.md) into one interpreter's site-packages, and takes out exactly what it put there.
 *
 * The interpreter names its own directory: `PATH -I -c ...` prints sysconfig's purelib, which
 * is right for the system interpreter, a venv, conda and pyenv alike (not -S: site.py is what
 * makes a venv's prefix the venv; CRASHPACK_HOOK=0 keeps an installed hook inert there). The files come from the data
 * root (common/datadir.h: $CRASHPACK_DATA_DIR, <bindir>/../share/crashpack, the source tree).
 * A record file, crashpack-hook.record, lists each installed file with a hash of what was written;
 * uninstall removes the listed files that still hold what was written (and the byte-code the
 * interpreter compiled from them), keeps a file changed since, and removes the record last.
 * The .pth is written last and removed first, so a half-done install never activates.
 *
 * Exit: 0 done / installed and intact, 1 a problem (a file changed or missing, a write that
 * failed, an interpreter that would not answer), 2 usage, 3 not installed / no such interpreter. */
#include "cmdopt.h"
#include "commands.h"
#include "listjson.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RECORD "crashpack-hook.record"
#define RECORD_FORMAT "crashpack-python-hook-record/1"
#define PTH "crashpack-hook.pth"
#define FILE_MAX (4u << 20)

/* data root relative source -> site-packages relative destination; the .pth last */
static const struct pyfile {
    const char *src, *dst;
} files[] = {
    {"python/crashpack/__init__.py", "crashpack/__init__.py"},
    {"python/crashpack/_report.py", "crashpack/_report.py"},
    {"python/crashpack/checkpoint.py", "crashpack/checkpoint.py"},
    {"python/crashpack_checkpoint.py", "crashpack_checkpoint.py"},
    {"python/_crashpack_hook.py", "_crashpack_hook.py"},
    {"python/" PTH, PTH},
};
#define NFILES (sizeof(files) / sizeof(files[0]))

static void usage(FILE *out, const char *sub)
{
    fprintf(out, "usage: crashpack python-hook %s [--python PATH]%s\n", sub ? sub : "install|uninstall|status",
            !sub ? " [--force] [--json]" : !strcmp(sub, "install") ? " [--force]" : !strcmp(sub, "status") ? " [--json]" : "");
    fprintf(out,
            "\n"
            "Installs the Python hook (docs/python.md) into one interpreter's site-packages: the\n"
            "`crashpack` package, `_crashpack_hook.py`, the `crashpack_checkpoint` shim and\n"
            "`crashpack-hook.pth`, which imports the hook at every start of that interpreter. The\n"
            "hook stays inert until CRASHPACK_HOOK=1 is in the environment (or `python_hook = on` in\n"
            "the configuration); then every uncaught exception is captured with no change to the\n"
            "script. venvs, conda and pyenv each have their own site-packages: install into each\n"
            "interpreter the jobs run (the one named here is asked for its sysconfig purelib).\n"
            "\n"
            "  install     copy the files (again: an upgrade); a file of the same name that this\n"
            "              command did not write is left alone and the install fails, unless --force\n"
            "  uninstall   remove exactly what install wrote (a file changed since is kept, exit 1)\n"
            "  status      is it installed, intact, and the same as this crashpack's files?\n"
            "\n"
            "  --python PATH  the interpreter (default: python3 on PATH)\n"
            "  --force        install: overwrite files this command did not write\n"
            "  --json         status: one JSON object (format crashpack-python-hook-status/1)\n"
            "  -h, --help     this help\n"
            "\n"
            "Exit status: 0 done (status: installed and intact), 1 a problem (a changed or missing\n"
            "file, a failed write, an interpreter that did not answer), 2 usage error, 3 not\n"
            "installed, or no such interpreter.\n");
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Reads a whole (small) file; NULL with errno set. */
static unsigned char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > FILE_MAX) {
        int e = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
        close(fd);
        errno = e;
        return NULL;
    }
    unsigned char *b = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    ssize_t r;
    while (b && n < (size_t)st.st_size && (r = read(fd, b + n, (size_t)st.st_size - n)) > 0)
        n += (size_t)r;
    close(fd);
    if (!b) {
        errno = ENOMEM;
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

struct interp {
    char purelib[PATH_MAX], executable[PATH_MAX], version[64];
};

static const char ask_prog[] =
    "import json, sys, sysconfig\n"
    "print(json.dumps({'purelib': sysconfig.get_paths()['purelib'],"
    " 'executable': sys.executable, 'version': sys.version.split()[0]}))\n";
/* Byte-compiles the installed modules (argv[1] is site-packages): an interpreter that may not
 * write there (a root-owned site-packages, PYTHONDONTWRITEBYTECODE) would otherwise compile
 * _crashpack_hook.py at every start. */
static const char compile_prog[] =
    "import json, os, py_compile, sys\n"
    "for f in ('_crashpack_hook.py', 'crashpack_checkpoint.py', 'crashpack/__init__.py',"
    " 'crashpack/_report.py', 'crashpack/checkpoint.py'):\n"
    "    py_compile.compile(os.path.join(sys.argv[1], f), doraise=False, quiet=2)\n"
    "print(json.dumps({'purelib': sys.argv[1]}))\n";

/* Runs prog in the interpreter (arg: its sys.argv[1], or NULL), which prints a JSON object with
 * `purelib`. 0, or -1 with err (3 in *code: no such interpreter). */
static int run_python(const char *python, const char *prog, const char *arg, struct interp *ip,
                      int *code, char *err, size_t errlen)
{
    int pfd[2];
    *code = CP_EXIT_PROBLEM;
    if (pipe2(pfd, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(pfd[1], 1);
        dup2(nul, 2);
        setenv("CRASHPACK_HOOK", "0", 1);
        execlp(python, python, "-I", "-c", prog, arg, (char *)NULL);
        _exit(errno == ENOENT ? 127 : 126);
    }
    close(pfd[1]);
    char out[16384];
    size_t n = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = 30000 - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {pfd[0], POLLIN, 0};
        if (ms <= 0 || poll(&p, 1, (int)ms) == 0) {
            kill(pid, SIGKILL);
            break;
        }
        ssize_t r = read(pfd[0], out + n, sizeof(out) - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == sizeof(out) - 1)
            break;
    }
    out[n] = 0;
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        snprintf(err, errlen, "no interpreter `%s`", python);
        *code = CP_EXIT_NOTFOUND;
        return -1;
    }
    cJSON *j = cJSON_Parse(out);
    const char *pl = cJSON_GetStringValue(cJSON_GetObjectItem(j, "purelib"));
    const char *ex = cJSON_GetStringValue(cJSON_GetObjectItem(j, "executable"));
    const char *ve = cJSON_GetStringValue(cJSON_GetObjectItem(j, "version"));
    if (!WIFEXITED(st) || WEXITSTATUS(st) || !pl || pl[0] != '/') {
        snprintf(err, errlen, "`%s` did not name its site-packages (%s %d)", python,
                 WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        cJSON_Delete(j);
        return -1;
    }
    snprintf(ip->purelib, sizeof(ip->purelib), "%s", pl);
    snprintf(ip->executable, sizeof(ip->executable), "%s", ex ? ex : python);
    snprintf(ip->version, sizeof(ip->version), "%s", ve ? ve : "?");
    cJSON_Delete(j);
    return 0;
}

/* The record: the hash of each file as written, by destination. */
struct record {
    int present;
    int have[NFILES];
    uint64_t hash[NFILES];
};

static void read_record(const char *dir, struct record *r)
{
    char path[PATH_MAX];
    size_t len;
    memset(r, 0, sizeof(*r));
    snprintf(path, sizeof(path), "%s/%s", dir, RECORD);
    char *b = (char *)slurp(path, &len);
    if (!b)
        return;
    r->present = 1;
    for (char *save, *line = strtok_r(b, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[PATH_MAX];
        unsigned long long h;
        if (sscanf(line, "%16llx %4095s", &h, name) != 2)
            continue;
        for (size_t i = 0; i < NFILES; i++)
            if (!strcmp(name, files[i].dst)) {
                r->have[i] = 1;
                r->hash[i] = h;
            }
    }
    free(b);
}

/* Writes data to dir/rel through a temporary file and a rename; 0 or -1 (errno). */
static int write_file(const char *dir, const char *rel, const unsigned char *data, size_t len,
                      mode_t mode)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    snprintf(tmp, sizeof(tmp), "%s.crashpack-tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    if (fchmod(fd, mode) || close(fd) || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* Removes the byte-code compiled from dir/rel (its __pycache__/NAME.*.pyc). */
static void remove_pyc(const char *dir, const char *rel)
{
    const char *slash = strrchr(rel, '/'), *base = slash ? slash + 1 : rel;
    size_t bl = strlen(base);
    if (bl < 4 || strcmp(base + bl - 3, ".py"))
        return;
    char cache[PATH_MAX];
    snprintf(cache, sizeof(cache), "%s/%.*s__pycache__", dir, slash ? (int)(slash - rel + 1) : 0, rel);
    DIR *d = opendir(cache);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t el = strlen(e->d_name);
        if (!strncmp(e->d_name, base, bl - 2) && el > 4 && !strcmp(e->d_name + el - 4, ".pyc")) {
            char p[PATH_MAX];
            snprintf(p, sizeof(p), "%s/%s", cache, e->d_name);
            unlink(p);
        }
    }
    closedir(d);
    rmdir(cache); /* only when nothing else is in it */
}

enum fstate { FS_OK, FS_MODIFIED, FS_MISSING, FS_FOREIGN };
static const char *fstate_name[] = {"ok", "modified", "missing", "not ours"};

/* The state of one destination file against the record. */
static enum fstate file_state(const char *dir, const struct record *r, size_t i, uint64_t *hash)
{
    char path[PATH_MAX];
    size_t len;
    snprintf(path, sizeof(path), "%s/%s", dir, files[i].dst);
    unsigned char *b = slurp(path, &len);
    if (!b)
        return FS_MISSING;
    *hash = fnv1a(b, len);
    free(b);
    if (!r->have[i])
        return FS_FOREIGN;
    return *hash == r->hash[i] ? FS_OK : FS_MODIFIED;
}

static int do_install(const char *python, const struct interp *ip, int force)
{
    const char *dir = ip->purelib;
    struct record r;
    read_record(dir, &r);
    unsigned char *data[NFILES] = {0};
    size_t len[NFILES];
    char err[600];
    int rc = CP_EXIT_OK;
    for (size_t i = 0; i < NFILES && rc == CP_EXIT_OK; i++) {
        char src[PATH_MAX];
        if (!cp_datapath(files[i].src, src, sizeof(src), err, sizeof(err))) {
            fprintf(stderr, "crashpack python-hook install: %s\n", err);
            rc = CP_EXIT_PROBLEM;
        } else if (!(data[i] = slurp(src, &len[i]))) {
            fprintf(stderr, "crashpack python-hook install: %s: %s\n", src, strerror(errno));
            rc = CP_EXIT_PROBLEM;
        }
    }
    /* a file of ours that was changed since, or someone else's file of the same name */
    for (size_t i = 0; i < NFILES && rc == CP_EXIT_OK && !force; i++) {
        uint64_t h;
        enum fstate s = file_state(dir, &r, i, &h);
        if (s == FS_FOREIGN || s == FS_MODIFIED) {
            fprintf(stderr, "crashpack python-hook install: %s/%s exists and is %s (--force replaces it)\n",
                    dir, files[i].dst, s == FS_FOREIGN ? "not from crashpack python-hook install" :
                                                        "changed since it was installed");
            rc = CP_EXIT_PROBLEM;
        }
    }
    char sub[PATH_MAX];
    snprintf(sub, sizeof(sub), "%s/crashpack", dir);
    if (rc == CP_EXIT_OK && (mkdir(dir, 0755) && errno != EEXIST)) {
        fprintf(stderr, "crashpack python-hook install: %s: %s\n", dir, strerror(errno));
        rc = CP_EXIT_PROBLEM;
    }
    if (rc == CP_EXIT_OK && mkdir(sub, 0755) && errno != EEXIST) {
        fprintf(stderr, "crashpack python-hook install: %s: %s\n", sub, strerror(errno));
        rc = CP_EXIT_PROBLEM;
    }
    /* the record first (what may be on disk), then the files, the .pth last */
    char rec[4096];
    size_t rl = (size_t)snprintf(rec, sizeof(rec), "# %s: written by crashpack python-hook install; "
                                 "`crashpack python-hook uninstall` removes these files\n", RECORD_FORMAT);
    for (size_t i = 0; i < NFILES && rc == CP_EXIT_OK; i++)
        rl += (size_t)snprintf(rec + rl, sizeof(rec) - rl, "%016llx %s\n",
                               (unsigned long long)fnv1a(data[i], len[i]), files[i].dst);
    if (rc == CP_EXIT_OK && write_file(dir, RECORD, (unsigned char *)rec, rl, 0644)) {
        fprintf(stderr, "crashpack python-hook install: %s/%s: %s\n", dir, RECORD, strerror(errno));
        rc = CP_EXIT_PROBLEM;
    }
    for (size_t i = 0; i < NFILES && rc == CP_EXIT_OK; i++) {
        if (write_file(dir, files[i].dst, data[i], len[i], 0644)) {
            fprintf(stderr, "crashpack python-hook install: %s/%s: %s\n", dir, files[i].dst, strerror(errno));
            rc = CP_EXIT_PROBLEM;
        }
        remove_pyc(dir, files[i].dst); /* stale byte-code of an older version */
    }
    for (size_t i = 0; i < NFILES; i++)
        free(data[i]);
    struct interp cp;
    int code;
    if (rc == CP_EXIT_OK && run_python(python, compile_prog, dir, &cp, &code, err, sizeof(err)))
        fprintf(stderr, "crashpack python-hook install: byte-compiling in %s: %s (the hook works, and is "
                        "compiled at each start)\n", dir, err);
    if (rc == CP_EXIT_OK)
        printf("installed into %s (python %s, %s); switched on by CRASHPACK_HOOK=1\n", dir, ip->version,
               ip->executable);
    return rc;
}

static int do_uninstall(const struct interp *ip)
{
    const char *dir = ip->purelib;
    struct record r;
    read_record(dir, &r);
    if (!r.present) {
        fprintf(stderr, "crashpack python-hook uninstall: not installed in %s (no %s)\n", dir, RECORD);
        return CP_EXIT_NOTFOUND;
    }
    int kept = 0;
    /* the .pth first: from here on nothing activates */
    for (size_t k = 0; k < NFILES; k++) {
        size_t i = NFILES - 1 - k;
        if (!r.have[i])
            continue;
        uint64_t h;
        enum fstate s = file_state(dir, &r, i, &h);
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].dst);
        if (s == FS_MODIFIED) {
            fprintf(stderr, "crashpack python-hook uninstall: kept %s: changed since it was installed\n", path);
            kept++;
            continue;
        }
        if (s == FS_OK && unlink(path)) {
            fprintf(stderr, "crashpack python-hook uninstall: %s: %s\n", path, strerror(errno));
            kept++;
            continue;
        }
        remove_pyc(dir, files[i].dst);
    }
    char sub[PATH_MAX];
    snprintf(sub, sizeof(sub), "%s/crashpack", dir);
    rmdir(sub); /* only when empty */
    char rec[PATH_MAX];
    snprintf(rec, sizeof(rec), "%s/%s", dir, RECORD);
    if (!kept && unlink(rec)) {
        fprintf(stderr, "crashpack python-hook uninstall: %s: %s\n", rec, strerror(errno));
        kept++;
    }
    if (!kept)
        printf("removed from %s\n", dir);
    return kept ? CP_EXIT_PROBLEM : CP_EXIT_OK;
}

static int do_status(const struct interp *ip, int json)
{
    const char *dir = ip->purelib;
    struct record r;
    read_record(dir, &r);
    int intact = r.present, current = r.present;
    enum fstate st[NFILES];
    for (size_t i = 0; i < NFILES; i++) {
        uint64_t h = 0;
        st[i] = r.present ? file_state(dir, &r, i, &h) : FS_MISSING;
        if (st[i] != FS_OK)
            intact = 0;
        char src[PATH_MAX], err[600];
        size_t len;
        unsigned char *b = cp_datapath(files[i].src, src, sizeof(src), err, sizeof(err)) ? slurp(src, &len) : NULL;
        if (!b || !r.have[i] || fnv1a(b, len) != r.hash[i])
            current = 0;
        free(b);
    }
    const char *hook = getenv("CRASHPACK_HOOK");
    if (json) {
        cJSON *o = cp_doc_new("crashpack-python-hook-status/1");
        cJSON *py = cJSON_AddObjectToObject(o, "python");
        cp_doc_str(py, "executable", ip->executable);
        cp_doc_str(py, "version", ip->version);
        cp_doc_str(py, "site_packages", dir);
        cJSON_AddBoolToObject(o, "installed", r.present);
        cJSON_AddBoolToObject(o, "intact", intact);
        cJSON_AddBoolToObject(o, "current", current);
        cJSON *fa = cJSON_AddArrayToObject(o, "files");
        for (size_t i = 0; i < NFILES; i++) {
            cJSON *f = cJSON_CreateObject();
            cp_doc_str(f, "path", files[i].dst);
            cJSON_AddStringToObject(f, "state", r.present ? fstate_name[st[i]] : "missing");
            cJSON_AddItemToArray(fa, f);
        }
        if (hook)
            cp_doc_str(o, "crashpack_hook_env", hook);
        else
            cJSON_AddNullToObject(o, "crashpack_hook_env");
        char *s = cJSON_Print(o);
        if (s)
            puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("python: %s (%s)\nsite-packages: %s\n", ip->executable, ip->version, dir);
        if (!r.present)
            printf("hook: not installed\n");
        else {
            printf("hook: installed, %s%s\n", intact ? "intact" : "damaged",
                   current ? "" : ", differs from this crashpack's files (install again to update)");
            for (size_t i = 0; i < NFILES; i++)
                if (st[i] != FS_OK)
                    printf("  %s: %s\n", files[i].dst, fstate_name[st[i]]);
        }
        printf("CRASHPACK_HOOK: %s\n", hook ? hook : "(not set: on only with python_hook = on in the configuration)");
    }
    return !r.present ? CP_EXIT_NOTFOUND : intact ? CP_EXIT_OK : CP_EXIT_PROBLEM;
}

int cmd_python_hook(int argc, char **argv)
{
    enum { O_PYTHON = 256, O_FORCE, O_JSON };
    static const struct option longs[] = {{"python", required_argument, 0, O_PYTHON},
                                          {"force", no_argument, 0, O_FORCE},
                                          {"json", no_argument, 0, O_JSON}, CP_OPT_HELP, CP_OPT_END};
    /* `crashpack python-hook SUB ...`: the sub-verb names the messages */
    const char *sub = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
    char verb[64];
    snprintf(verb, sizeof(verb), "crashpack python-hook%s%s", sub ? " " : "", sub ? sub : "");
    if (sub && strcmp(sub, "install") && strcmp(sub, "uninstall") && strcmp(sub, "status")) {
        fprintf(stderr, "crashpack python-hook: unknown command `%s`; accepted: install uninstall status, --help\n",
                sub);
        return CP_EXIT_USAGE;
    }
    struct cp_opts p = {.verb = verb, .longs = longs, .argc = argc - (sub != NULL), .argv = argv + (sub != NULL)};
    const char *python = "python3";
    int force = 0, json = 0, c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout, sub);
            return CP_EXIT_OK;
        case O_PYTHON: python = optarg; break;
        case O_FORCE: force = 1; break;
        case O_JSON: json = 1; break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (!sub)
        return cp_usage_error(&p, "missing command: install, uninstall or status (`crashpack python-hook --help`)");
    if (cp_opt_args(&p, 0, 0, ""))
        return CP_EXIT_USAGE;
    if (json && strcmp(sub, "status"))
        return cp_usage_error(&p, "--json goes with status only");
    if (force && strcmp(sub, "install"))
        return cp_usage_error(&p, "--force goes with install only");
    if (!*python)
        return cp_usage_error(&p, "--python ``: expected an interpreter's path or name");
    struct interp ip;
    char err[PATH_MAX + 200];
    int code;
    if (run_python(python, ask_prog, NULL, &ip, &code, err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", verb, err);
        return code;
    }
    if (!strcmp(sub, "install"))
        return do_install(python, &ip, force);
    if (!strcmp(sub, "uninstall"))
        return do_uninstall(&ip);
    return do_status(&ip, json);
}
