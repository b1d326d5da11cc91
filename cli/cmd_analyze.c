/* cmd_analyze.c - `crashpack analyze BUNDLE [--json] [--verbose] [--members]`: the options, then
 * the report library (analyze/report/report.h) builds the crashpack-report/1 object, printed as
 * JSON or rendered as text (render/render.h). Both come from the one report object, so they never
 * disagree.
 *
 * Every string from the bundle is untrusted: the JSON report carries it as valid UTF-8 (invalid
 * bytes become U+FFFD), the text output goes through the terminal policy (cp_text_put, utf8.h).
 *
 * Exit: 0 complete bundle, 1 partial or unreadable bundle (what could be read is still printed),
 * 2 usage error, 3 no such bundle file (exitcodes.h).
 */
#include "cmdopt.h"
#include "commands.h"
#include "kbarg.h"
#include "render.h"
#include "report.h"
#include "utf8.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: crashpack analyze BUNDLE [--json] [-v|--verbose] [--members] [options]\n"
        "\n"
        "Explains a crash bundle offline: the crashed process (manifest.json), how the\n"
        "capture went (capture.json), the bundle's members, and from the core: the crashed\n"
        "thread, the signal and its cause, and every thread's symbolized frames.\n"
        "\n"
        "The text opens with the answer: what died and how, the top diagnosis with its\n"
        "evidence and first action, the exception or the crashing frame, a deadlock; then\n"
        "the threads (every frame of the crashed thread), the evidence, the other diagnoses.\n"
        "\n"
        "  --json             print one JSON object (format crashpack-report/1) instead of text\n"
        "  -v, --verbose      text: also the bundle, user, capture and core details, every\n"
        "                     capture step that did not succeed, and the member table\n"
        "  --members          text: print only the member table (name, size, compressed, frames)\n"
        "  --explain          show which signature rule kept or skipped each frame of the\n"
        "                     crashed thread (JSON: signature_info.explain[])\n"
        "  --sysroot DIR      look the core's binaries up under DIR (and only there)\n"
        "  --debug-dir DIR    separate debuginfo: DIR/.build-id/NN/REST.debug trees, and\n"
        "                     .gnu_debuglink targets (repeatable; /usr/lib/debug is always last)\n"
        "  --unwinder=KIND    dwfl (default: libdwfl with CFI, frame-pointer fallback; a thread\n"
        "                     libdwfl leaves cut short is unwound by libunwind as well), fp\n"
        "                     (frame-pointer chains only) or libunwind (libunwind-coredump for\n"
        "                     every thread), for comparison; implies --no-stacks\n"
        "  --max-frames N     frames kept per thread, innermost first (default 256);\n"
        "                     implies --no-stacks\n"
        "  --timeout SEC      time limit of the core analysis (default 180)\n"
        "  --in-process       analyze the core without the sandboxed child (debugging)\n"
        "  --db PATH          knowledge base whose user rules join the built-in rules\n"
        "                     (default: $CRASHPACK_DB, /var/lib/crashpack/kb.sqlite for root)\n"
        "  --no-stacks        ignore the bundle's stacks.json (the crashed host's analysis)\n"
        "  --no-cache         do not use or fill the cache of decompressed debug files\n"
        "                     ($CRASHPACK_CACHE_DIR, else ~/.cache/crashpack; off: none)\n"
        "  -h, --help         this help\n"
        "\n"
        "The core and the binaries are parsed in a child process with CPU, memory and time\n"
        "limits; if it fails, what it finished is still reported.\n"
        "\n"
        "Exit status: 0 complete, 1 partial (the bundle is cut short, or the core analysis\n"
        "did not complete; what could be read is shown) or unreadable, 2 usage error,\n"
        "3 no such bundle.\n");
}

#define MAX_DEBUG_DIRS 64

struct analyze_args {
    int json;
    int verbose; /* -v, --verbose */
    const char *path;
    struct report_opts R; /* --members, --explain, --no-stacks, --no-cache, the core's */
    const char *db;       /* --db */
    const char *debug_dirs[MAX_DEBUG_DIRS];
};

/* The bundle argument. Returns -1 to go on, else the exit status. */
static int take_path(struct analyze_args *A, const char *path)
{
    A->path = path;
    if (access(A->path, F_OK) && errno == ENOENT) {
        fprintf(stderr, "crashpack analyze: no such bundle: ");
        cp_text_put(stderr, A->path);
        fputc('\n', stderr);
        return CP_EXIT_NOTFOUND;
    }
    A->R.native.unwind.mods.debug_dirs = A->debug_dirs;
    return -1;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(struct analyze_args *A, int argc, char **argv)
{
    enum { O_JSON = 256, O_MEMBERS, O_EXPLAIN, O_INPROC, O_NOSTACKS, O_NOCACHE, O_DB, O_SYSROOT,
           O_DEBUGDIR, O_UNWINDER, O_MAXFRAMES, O_TIMEOUT };
    static const struct option longs[] = {{"json", no_argument, 0, O_JSON},
                                          {"verbose", no_argument, 0, 'v'},
                                          {"members", no_argument, 0, O_MEMBERS},
                                          {"explain", no_argument, 0, O_EXPLAIN},
                                          {"in-process", no_argument, 0, O_INPROC},
                                          {"no-stacks", no_argument, 0, O_NOSTACKS},
                                          {"no-cache", no_argument, 0, O_NOCACHE},
                                          {"db", required_argument, 0, O_DB},
                                          {"sysroot", required_argument, 0, O_SYSROOT},
                                          {"debug-dir", required_argument, 0, O_DEBUGDIR},
                                          {"unwinder", required_argument, 0, O_UNWINDER},
                                          {"max-frames", required_argument, 0, O_MAXFRAMES},
                                          {"timeout", required_argument, 0, O_TIMEOUT},
                                          CP_OPT_HELP,
                                          CP_OPT_END};
    struct cp_opts p = {
        .verb = "crashpack analyze", .shorts = "v", .longs = longs, .argc = argc, .argv = argv};
    struct modules_opts *mo = &A->R.native.unwind.mods;
    long long n;
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case O_JSON: A->json = 1; break;
        case 'v':
            A->verbose = 1;
            break;
        case O_MEMBERS: A->R.members_only = 1; break;
        case O_EXPLAIN: A->R.explain = 1; break;
        case O_INPROC: A->R.native.in_process = 1; break;
        case O_NOSTACKS: A->R.no_stacks = 1; break;
        case O_NOCACHE: A->R.no_cache = 1; break;
        case O_DB: A->db = optarg; break;
        case O_SYSROOT: mo->sysroot = optarg; break;
        case O_DEBUGDIR:
            if (mo->ndebug_dirs == MAX_DEBUG_DIRS)
                return cp_usage_error(&p, "--debug-dir `%s`: at most %d of them", optarg, MAX_DEBUG_DIRS);
            A->debug_dirs[mo->ndebug_dirs++] = optarg;
            break;
        case O_UNWINDER:
            if (!strcmp(optarg, "dwfl"))
                A->R.native.unwind.method = UNWIND_DWFL;
            else if (!strcmp(optarg, "fp"))
                A->R.native.unwind.method = UNWIND_FP;
            else if (!strcmp(optarg, "libunwind"))
                A->R.native.unwind.method = UNWIND_LIBUNWIND;
            else
                return cp_usage_error(&p, "--unwinder `%s`: expected dwfl, fp or libunwind", optarg);
            A->R.no_stacks = 1; /* the user asked for this unwinder's frames, not the crashed host's */
            break;
        case O_MAXFRAMES:
            if (cp_opt_num(&p, "--max-frames", optarg, 1, 1000000, &n))
                return CP_EXIT_USAGE;
            A->R.native.unwind.max_frames = (unsigned)n;
            A->R.no_stacks = 1;
            break;
        case O_TIMEOUT:
            if (cp_opt_num(&p, "--timeout", optarg, 1, 86400, &n))
                return CP_EXIT_USAGE;
            A->R.native.wall_s = (unsigned)n;
            A->R.native.cpu_s = (unsigned)n;
            break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 1, 1, "BUNDLE"))
        return CP_EXIT_USAGE;
    return take_path(A, argv[optind]);
}

int cmd_analyze(int argc, char **argv)
{
    struct analyze_args A;
    memset(&A, 0, sizeof(A));
    int rc = parse_args(&A, argc, argv);
    if (rc >= 0)
        return rc;

    struct report_status st;
    A.R.kb = cp_kb_input(A.db);
    cJSON *r = report_build(A.path, &A.R, &st); /* forks the core analysis first (report.h) */
    kb_close(A.R.kb);
    if (!r) {
        fprintf(stderr, "crashpack analyze: ");
        cp_text_put(stderr, st.error);
        fputc('\n', stderr);
        return CP_EXIT_PROBLEM;
    }
    render_notes(stderr, "crashpack analyze", r, st.diagnose_error, st.native_failed, A.json);
    if (A.json) {
        char *s = cJSON_Print(r);
        if (!s) {
            cJSON_Delete(r);
            fprintf(stderr, "crashpack analyze: out of memory\n");
            return CP_EXIT_PROBLEM;
        }
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    } else {
        render_text(stdout, r,
                    (A.R.members_only ? RENDER_TEXT_MEMBERS_ONLY : 0u) |
                        (A.verbose ? RENDER_TEXT_VERBOSE : 0u));
    }
    cJSON_Delete(r);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "crashpack analyze: cannot write the output\n");
        return CP_EXIT_PROBLEM;
    }
    return st.partial ? 1 : 0;
}
