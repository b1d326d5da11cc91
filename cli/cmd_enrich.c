/* cmd_enrich.c - `crashpack enrich`: the native analysis on the crashed host, with its binaries,
 * written as stacks.json (stacks.h; docs/enrich.md), so that the bundle can be analyzed on a
 * machine without them.
 *
 * The capture finisher runs it as the crashed uid (or the user crashpack) with `--socket-fd 3`:
 * main() made the process non-dumpable first thing, and receive_fds() then does the handshake
 * (docs/capture.md, "Descriptors and the enrichment") that brings the temporary bundle (no index
 * yet: read by walking its frames) and an O_PATH descriptor of the crashed process's
 * /proc/PID/root (the core's module paths are looked up through it, so a container's files
 * resolve after the container is gone). What it prints on stdout becomes the bundle's
 * stacks.json member. `--bundle-fd N` and `--root-fd M` take the same descriptors inherited. The
 * analysis itself runs in native_run()'s sandboxed child, under --timeout and --memory.
 *
 * Exit: 0 complete, 1 written but the analysis is partial, 2 usage error, unreadable bundle or
 * unwritable output. The last two are an exception to exitcodes.h's 1: the capture finisher
 * (capture/enrich.c) keeps what enrich printed when it exits 0 or 1.
 */
#include "cmdopt.h"
#include "bundle.h"
#include "commands.h"
#include "fdpass.h"
#include "native.h"
#include "signature.h"
#include "stacks.h"
#include "util.h" /* now_mono */

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 30u
#define MANIFEST_MAX (16u << 20)
#define MAX_DEBUG_DIRS 64
#define ANSWER_WAIT_MS 10000 /* for the capture finisher's answer to the hello */

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: crashpack enrich [options] BUNDLE\n"
        "       crashpack enrich [options] --bundle-fd N\n"
        "\n"
        "Analyzes a bundle's core where the crash happened, with its binaries, and writes\n"
        "stacks.json (format %s): every thread's symbolized frames, the cause, the\n"
        "modules with their build-ids. `crashpack analyze` uses it on machines that lack\n"
        "the binaries. The capture handler runs this for every crash (config key `enrich`).\n"
        "\n"
        "  --out FILE|-       where stacks.json goes (default -: standard output)\n"
        "  --bundle-fd N      read the bundle from descriptor N instead of a path (it may be\n"
        "                     still in progress: no index yet)\n"
        "  --root-fd N        descriptor N (O_PATH) is the crashed process's root directory\n"
        "                     (/proc/PID/root): binaries are looked up through it\n"
        "  --socket-fd N      the capture finisher's socket: the bundle and root descriptors\n"
        "                     come over it, after a handshake (instead of --bundle-fd/--root-fd)\n"
        "  --sysroot DIR      look binaries up under DIR instead\n"
        "  --debug-dir DIR    separate debuginfo trees (repeatable), as for analyze\n"
        "  --max-frames N     frames kept per thread (default 256)\n"
        "  --timeout SEC      time limit of the analysis (default %u)\n"
        "  --memory SIZE      address-space limit of the analysis, e.g. 8G (default 32G;\n"
        "                     not applied in sanitizer builds)\n"
        "  -h, --help         this help\n"
        "\n"
        "Exit status: 0 complete, 1 stacks.json written but the analysis is partial,\n"
        "2 usage error, unreadable bundle or unwritable output.\n",
        STACKS_FORMAT, DEFAULT_TIMEOUT_S);
}

struct enrich_args {
    const char *path, *out, *sysroot;
    int bundle_fd, root_fd, socket_fd;
    struct native_opts native;
    const char *debug_dirs[MAX_DEBUG_DIRS];
    char root_path[64];
};

static int parse_ulong(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *s == '-' || errno || v > max)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 0: break;
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: return -1;
    }
    if (*end || (shift && v > (max >> shift)))
        return -1;
    *out = v << shift;
    return 0;
}

/* The options (parse_args). */
enum {
    O_OUT = 256,
    O_BUNDLEFD,
    O_ROOTFD,
    O_SOCKETFD,
    O_SYSROOT,
    O_DEBUGDIR,
    O_MAXFRAMES,
    O_TIMEOUT,
    O_MEMORY
};
static const struct option longs[] = {{"out", required_argument, 0, O_OUT},
                                      {"bundle-fd", required_argument, 0, O_BUNDLEFD},
                                      {"root-fd", required_argument, 0, O_ROOTFD},
                                      {"socket-fd", required_argument, 0, O_SOCKETFD},
                                      {"sysroot", required_argument, 0, O_SYSROOT},
                                      {"debug-dir", required_argument, 0, O_DEBUGDIR},
                                      {"max-frames", required_argument, 0, O_MAXFRAMES},
                                      {"timeout", required_argument, 0, O_TIMEOUT},
                                      {"memory", required_argument, 0, O_MEMORY},
                                      CP_OPT_HELP,
                                      CP_OPT_END};

/* Returns -1 to go on, else the exit status. */
static int parse_args(struct enrich_args *A, int argc, char **argv)
{
    struct cp_opts p = {.verb = "crashpack enrich", .longs = longs, .argc = argc, .argv = argv};
    struct modules_opts *mo = &A->native.unwind.mods;
    unsigned long long n;
    long long v;
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case O_OUT:
            if (!*optarg)
                return cp_usage_error(&p, "--out ``: expected a file name or -");
            A->out = optarg;
            break;
        case O_BUNDLEFD:
        case O_ROOTFD:
        case O_SOCKETFD: /* 0-2 are the standard streams, never a bundle, a root or the socket */
            if (cp_opt_num(&p,
                           c == O_BUNDLEFD ? "--bundle-fd"
                           : c == O_ROOTFD ? "--root-fd"
                                           : "--socket-fd",
                           optarg, 3, INT_MAX, &v))
                return CP_EXIT_USAGE;
            *(c == O_BUNDLEFD ? &A->bundle_fd
              : c == O_ROOTFD ? &A->root_fd
                              : &A->socket_fd) = (int)v;
            break;
        case O_SYSROOT:
            A->sysroot = optarg;
            break;
        case O_DEBUGDIR:
            if (mo->ndebug_dirs == MAX_DEBUG_DIRS)
                return cp_usage_error(&p, "--debug-dir `%s`: at most %d of them", optarg, MAX_DEBUG_DIRS);
            A->debug_dirs[mo->ndebug_dirs++] = optarg;
            break;
        case O_MAXFRAMES:
            if (cp_opt_num(&p, "--max-frames", optarg, 1, 1000000, &v))
                return CP_EXIT_USAGE;
            A->native.unwind.max_frames = (size_t)v;
            break;
        case O_TIMEOUT:
            if (cp_opt_num(&p, "--timeout", optarg, 1, 86400, &v))
                return CP_EXIT_USAGE;
            A->native.wall_s = A->native.cpu_s = (unsigned)v;
            break;
        case O_MEMORY:
            if (parse_ulong(optarg, 1ULL << 50, &n) || n < (64ULL << 20))
                return cp_usage_error(&p, "--memory `%s`: expected a size from 64M to 1024T (a number "
                                      "with K, M, G or T)", optarg);
            A->native.as_bytes = n;
            break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 0, 1, "BUNDLE"))
        return CP_EXIT_USAGE;
    A->path = optind < argc ? argv[optind] : NULL;
    if (A->socket_fd >= 0 && (A->path || A->bundle_fd >= 0 || A->root_fd >= 0 || A->sysroot))
        return cp_usage_error(
            &p, "--socket-fd excludes a bundle path, --bundle-fd, --root-fd and --sysroot");
    if (A->socket_fd < 0 && !A->path == (A->bundle_fd < 0))
        return cp_usage_error(&p, "give either a bundle path or --bundle-fd");
    if (A->sysroot && A->root_fd >= 0)
        return cp_usage_error(&p, "--sysroot and --root-fd exclude each other");
    A->native.unwind.mods.debug_dirs = A->debug_dirs;
    return -1;
}

/* The manifest's crashed tid and comm, for the crashed-thread choice and heuristics. */
static cJSON *read_manifest(struct bundle *b)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = bundle_read_all(b, "manifest.json", MANIFEST_MAX, &buf, &len);
    cJSON *j = rc == BUNDLE_OK ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    return j;
}

/* Module paths found through the root descriptor read /proc/self/fd/N/...: name them <root>/... */
static void root_relative(cJSON *native, const char *prefix)
{
    static const char *keys[] = {"found_at", "debug_file", "problem"};
    size_t pl = strlen(prefix);
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(native, "modules"))
    {
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            cJSON *v = cJSON_GetObjectItemCaseSensitive(m, keys[k]);
            if (!cJSON_IsString(v) || !strstr(v->valuestring, prefix))
                continue;
            size_t n = strlen(v->valuestring);
            char *o = malloc(n * 2 + 1), *w = o;
            if (!o)
                continue;
            for (const char *s = v->valuestring; *s;) {
                const char *hit = strstr(s, prefix);
                size_t take = hit ? (size_t)(hit - s) : strlen(s);
                memcpy(w, s, take);
                w += take;
                s += take;
                if (hit) {
                    memcpy(w, "<root>", 6);
                    w += 6;
                    s += pl;
                }
            }
            *w = 0;
            cJSON_SetValuestring(v, o);
            free(o);
        }
    }
}

static int write_out(const char *out, const char *s)
{
    if (!strcmp(out, "-")) {
        if (fputs(s, stdout) < 0 || fputc('\n', stdout) < 0 || fflush(stdout))
            return -1;
        return 0;
    }
    /* a temporary next to the target, renamed over it: never a half-written stacks.json */
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp%ld", out, (long)getpid()) >= (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    int bad = fputs(s, f) < 0 || fputc('\n', f) < 0 || fflush(f) || fsync(fileno(f));
    if (fclose(f) || bad || rename(tmp, out)) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* The crash kind, signature and fingerprint as the crashed host computes them (signature.h),
 * from the native object shaped as the report's process.signal, process.crashed_tid, cause and
 * threads. Returns {crash_kind, signature, fingerprint, version, error}, or NULL. */
static cJSON *enrich_signature(const cJSON *nat)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *proc = r ? cJSON_AddObjectToObject(r, "process") : NULL;
    if (!proc) {
        cJSON_Delete(r);
        return NULL;
    }
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(nat, "signal")))
        cJSON_AddItemToObject(proc, "signal", cJSON_Duplicate(v, 1));
    if ((v = cJSON_GetObjectItemCaseSensitive(nat, "crashed_tid")))
        cJSON_AddItemToObject(proc, "crashed_tid", cJSON_Duplicate(v, 1));
    if ((v = cJSON_GetObjectItemCaseSensitive(nat, "cause")))
        cJSON_AddItemToObject(r, "cause", cJSON_Duplicate(v, 1));
    if ((v = cJSON_GetObjectItemCaseSensitive(nat, "threads")))
        cJSON_AddItemToObject(r, "threads", cJSON_Duplicate(v, 1));
    char err[256] = "";
    signature_apply(r, 0, err, sizeof(err));
    cJSON *out = cJSON_CreateObject();
    const char *keys[] = {"crash_kind", "signature", "fingerprint"};
    for (size_t i = 0; out && i < sizeof(keys) / sizeof(keys[0]); i++) {
        v = cJSON_GetObjectItemCaseSensitive(r, keys[i]);
        cJSON_AddItemToObject(out, keys[i], v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
    }
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(r, "signature_info");
    if (out) {
        v = cJSON_GetObjectItemCaseSensitive(info, "version");
        cJSON_AddItemToObject(out, "version", v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
        v = cJSON_GetObjectItemCaseSensitive(info, "error");
        cJSON_AddItemToObject(out, "error", v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
    }
    cJSON_Delete(r);
    return out;
}

/* The capture finisher's handshake (docs/capture.md, "Descriptors and the enrichment"). This
 * process is not dumpable since main()'s first line, so nothing it holds from then on can be taken
 * by another process of its uid; the socket it started with may have been copied before that,
 * while the loader ran. So a socketpair made now goes to the finisher over that socket (the
 * finisher takes it only with this pid's credentials, which the kernel attaches), and the bundle
 * and root descriptors come back over the pair, which nothing else holds. Returns 0 with
 * A->bundle_fd (and A->root_fd) set, or -1 with err set. */
static int receive_fds(struct enrich_args *A, char *err, size_t n)
{
    int sp[2] = {-1, -1};
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
        snprintf(err, n,
                 "--socket-fd: this process is dumpable (main() makes `enrich` not dumpable)");
        return -1;
    }
    int rc = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)
                 ? -1
                 : cp_fd_send(A->socket_fd, CP_ENRICH_HELLO, &sp[1], 1);
    int e = errno;
    if (sp[1] >= 0)
        close(sp[1]);
    close(A->socket_fd); /* nothing more comes or goes over it */
    A->socket_fd = -1;
    struct pollfd pf = {sp[0], POLLIN, 0};
    int k = 0;
    while (!rc && (k = poll(&pf, 1, ANSWER_WAIT_MS)) < 0 && errno == EINTR)
        ;
    struct cp_fd_msg m = {.nfds = 0};
    int got = k > 0 ? cp_fd_recv(sp[0], &m) : -1;
    if (sp[0] >= 0)
        close(sp[0]);
    size_t want = !strcmp(m.text, CP_ENRICH_FDS_ROOT) ? 2 : !strcmp(m.text, CP_ENRICH_FDS) ? 1 : 0;
    if (rc || got <= 0 || m.truncated || !want || m.nfds != want) {
        if (rc)
            snprintf(err, n, "--socket-fd: cannot send the hello: %s", strerror(e));
        else
            snprintf(err, n, "--socket-fd: %s",
                     got <= 0 ? "no answer from the capture finisher"
                              : "the capture finisher's answer is not known");
        cp_fd_msg_close(&m);
        return -1;
    }
    A->bundle_fd = m.fds[0];
    A->root_fd = want == 2 ? m.fds[1] : -1;
    return 0;
}

/* --root-fd (or the one received): module paths are looked up inside it, and the analysis runs
 * sealed. Returns what `binaries` says, or NULL when it is not a directory (the message printed).
 */
static const char *use_root(struct enrich_args *A)
{
    if (A->root_fd < 0) {
        if (A->sysroot)
            A->native.unwind.mods.sysroot = A->sysroot;
        return A->sysroot ? "sysroot" : "host";
    }
    struct stat st;
    if (fstat(A->root_fd, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "crashpack enrich: --root-fd %d is not an open directory\n", A->root_fd);
        return NULL;
    }
    snprintf(A->root_path, sizeof(A->root_path), "/proc/self/fd/%d", A->root_fd);
    A->native.unwind.mods.sysroot = A->root_path; /* names files in messages only: */
    A->native.unwind.mods.root_fd = A->root_fd;   /* they open inside it (modules.h) */
    A->native.sealed = 1; /* and the analysis can open nothing by path (sandbox_seal) */
    return "root-fd";
}

/* Opens the bundle (a received descriptor is closed once dup()ed: the bundle holds its own).
 * Returns it, or NULL with the message printed. */
static struct bundle *open_bundle(struct enrich_args *A, int received)
{
    struct bundle *b = NULL;
    char err[512];
    int rc = A->bundle_fd >= 0 ? bundle_open_fd(A->bundle_fd, &b, err, sizeof(err))
                               : bundle_open(A->path, &b, err, sizeof(err));
    if (received)
        close(A->bundle_fd);
    if (rc) {
        fprintf(stderr, "crashpack enrich: %s\n", err);
        return NULL;
    }
    if (!bundle_find(b, "core")) {
        bundle_close(b);
        fprintf(stderr, "crashpack enrich: the bundle has no core (a metadata-only capture)\n");
        return NULL;
    }
    return b;
}

/* The analysis and the document it makes (NULL: out of memory); *failed: the analysis is
 * partial. */
static cJSON *enrich_doc(struct enrich_args *A, struct bundle *b, const char *binaries, int *failed)
{
    double t0 = now_mono();
    cJSON *man = read_manifest(b);
    const cJSON *tid = cJSON_GetObjectItemCaseSensitive(man, "tid");
    const cJSON *comm = cJSON_GetObjectItemCaseSensitive(man, "comm");
    if (cJSON_IsNumber(tid) && tid->valuedouble > 0 && tid->valuedouble < 2147483648.0)
        A->native.manifest_tid = (int32_t)tid->valuedouble;
    A->native.comm = cJSON_IsString(comm) ? comm->valuestring : NULL;
    cJSON *nat = native_run(b, &A->native, failed);
    struct stacks_meta meta = {binaries, bundle_complete(b), (now_mono() - t0) * 1000,
                               A->native.sealed};
    if (nat && A->root_fd >= 0)
        root_relative(nat, A->root_path);
    cJSON *sig = nat ? enrich_signature(nat) : NULL;
    cJSON *doc = nat ? stacks_build(nat, &meta) : NULL;
    if (doc && sig)
        cJSON_AddItemToObject(doc, "signature", sig);
    else
        cJSON_Delete(sig);
    cJSON_Delete(man);
    return doc;
}

int cmd_enrich(int argc, char **argv)
{
    struct enrich_args A;
    memset(&A, 0, sizeof(A));
    A.bundle_fd = A.root_fd = -1;
    A.out = "-";
    A.native.wall_s = A.native.cpu_s = DEFAULT_TIMEOUT_S;
    A.socket_fd = -1;
    int rc = parse_args(&A, argc, argv);
    if (rc >= 0)
        return rc;
    int received = A.socket_fd >= 0;
    char err[512];
    if (received && receive_fds(&A, err, sizeof(err))) {
        fprintf(stderr, "crashpack enrich: %s\n", err);
        return 2;
    }
    const char *binaries = use_root(&A);
    struct bundle *b = binaries ? open_bundle(&A, received) : NULL;
    if (!binaries && received)
        close(A.bundle_fd);
    int failed = 0;
    cJSON *doc = b ? enrich_doc(&A, b, binaries, &failed) : NULL;
    if (b)
        bundle_close(b);
    if (received && A.root_fd >= 0)
        close(A.root_fd); /* nothing received outlives the analysis */
    if (!b)
        return 2;
    char *s = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (!s) {
        fprintf(stderr, "crashpack enrich: out of memory\n");
        return 2;
    }
    if (write_out(A.out, s)) {
        fprintf(stderr, "crashpack enrich: cannot write %s: %s\n",
                strcmp(A.out, "-") ? A.out : "the output", strerror(errno));
        free(s);
        return 2;
    }
    free(s);
    return failed ? 1 : 0;
}
