/* cmd_analyze.c - `crashpack analyze BUNDLE [--json] [--members]`: the options, then the report
 * library (analyze/report/report.h) builds the crashpack-report/1 object and prints it as JSON or
 * text. Text and JSON are printed from the one report object, so they never disagree.
 *
 * Every string from the bundle is untrusted: the JSON report carries it as valid UTF-8 (invalid
 * bytes become U+FFFD), the text output goes through the terminal policy (cp_text_put, utf8.h).
 *
 * Exit: 0 complete bundle, 1 partial bundle (what could be read is still printed), 2 usage error
 * or unreadable bundle.
 */
#include "cmdopt.h"
#include "commands.h"
#include "report.h"
#include "utf8.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack analyze BUNDLE [--json] [--members] [options]\n"
            "\n"
            "Explains a crash bundle offline: the crashed process (manifest.json), how the\n"
            "capture went (capture.json), the bundle's members, and from the core: the crashed\n"
            "thread, the signal and its cause, and every thread's symbolized frames.\n"
            "\n"
            "  --json             print one JSON object (format crashpack-report/1) instead of text\n"
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
            "did not complete; what could be read is shown), 2 usage error or unreadable file.\n");
}

#define MAX_DEBUG_DIRS 64

struct analyze_args {
    int json;
    const char *path;
    struct report_opts R; /* --members, --explain, --no-stacks, --no-cache, --db, the core's */
    const char *debug_dirs[MAX_DEBUG_DIRS];
};

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v == 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Options that take a value. Returns 1 when handled, 0 when not one of them, -1 on error. */
static int parse_value_opt(struct analyze_args *A, const char *a, int argc, char **argv, int *i)
{
    int bad = 0;
    const char *v;
    unsigned long n;
    struct modules_opts *mo = &A->R.native.unwind.mods;
    if ((v = cp_opt_value(a, "--db", argc, argv, i, &bad))) {
        A->R.db = v;
    } else if ((v = cp_opt_value(a, "--sysroot", argc, argv, i, &bad))) {
        mo->sysroot = v;
    } else if ((v = cp_opt_value(a, "--debug-dir", argc, argv, i, &bad))) {
        if (mo->ndebug_dirs == MAX_DEBUG_DIRS)
            return -1;
        A->debug_dirs[mo->ndebug_dirs++] = v;
    } else if ((v = cp_opt_value(a, "--unwinder", argc, argv, i, &bad))) {
        if (!strcmp(v, "dwfl"))
            A->R.native.unwind.method = UNWIND_DWFL;
        else if (!strcmp(v, "fp"))
            A->R.native.unwind.method = UNWIND_FP;
        else if (!strcmp(v, "libunwind"))
            A->R.native.unwind.method = UNWIND_LIBUNWIND;
        else
            return -1;
        A->R.no_stacks = 1; /* the user asked for this unwinder's frames, not the crashed host's */
    } else if ((v = cp_opt_value(a, "--max-frames", argc, argv, i, &bad))) {
        if (parse_uint(v, 1000000, &n))
            return -1;
        A->R.native.unwind.max_frames = n;
        A->R.no_stacks = 1;
    } else if ((v = cp_opt_value(a, "--timeout", argc, argv, i, &bad))) {
        if (parse_uint(v, 86400, &n))
            return -1;
        A->R.native.wall_s = (unsigned)n;
        A->R.native.cpu_s = (unsigned)n;
    } else {
        return bad ? -1 : 0;
    }
    return 1;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(struct analyze_args *A, int argc, char **argv)
{
    int opts = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r;
        if (opts && a[0] == '-' && a[1]) {
            if (!strcmp(a, "--json")) {
                A->json = 1;
            } else if (!strcmp(a, "--members")) {
                A->R.members_only = 1;
            } else if (!strcmp(a, "--explain")) {
                A->R.explain = 1;
            } else if (!strcmp(a, "--in-process")) {
                A->R.native.in_process = 1;
            } else if (!strcmp(a, "--no-stacks")) {
                A->R.no_stacks = 1;
            } else if (!strcmp(a, "--no-cache")) {
                A->R.no_cache = 1;
            } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                usage(stdout);
                return 0;
            } else if (!strcmp(a, "--")) {
                opts = 0;
            } else if ((r = parse_value_opt(A, a, argc, argv, &i)) < 0) {
                fprintf(stderr, "crashpack analyze: bad or missing value for `");
                cp_text_put(stderr, a);
                fprintf(stderr, "`\n");
                usage(stderr);
                return 2;
            } else if (r == 0) {
                fprintf(stderr, "crashpack analyze: unknown option `");
                cp_text_put(stderr, a);
                fprintf(stderr, "`\n");
                usage(stderr);
                return 2;
            }
        } else if (!A->path) {
            A->path = a;
        } else {
            fprintf(stderr, "crashpack analyze: one bundle at a time\n");
            usage(stderr);
            return 2;
        }
    }
    if (!A->path) {
        usage(stderr);
        return 2;
    }
    A->R.native.unwind.mods.debug_dirs = A->debug_dirs;
    return -1;
}

int cmd_analyze(int argc, char **argv)
{
    struct analyze_args A;
    memset(&A, 0, sizeof(A));
    int rc = parse_args(&A, argc, argv);
    if (rc >= 0)
        return rc;

    struct report_status st;
    cJSON *r = report_build(A.path, &A.R, &st); /* forks the core analysis first (report.h) */
    if (!r) {
        fprintf(stderr, "crashpack analyze: ");
        cp_text_put(stderr, st.error);
        fputc('\n', stderr);
        return 2;
    }
    report_print_notes(stderr, "crashpack analyze", r, &st, A.json);
    if (A.json) {
        char *s = cJSON_Print(r);
        if (!s) {
            cJSON_Delete(r);
            fprintf(stderr, "crashpack analyze: out of memory\n");
            return 2;
        }
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    } else {
        report_print_text(stdout, r, A.R.members_only);
    }
    cJSON_Delete(r);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "crashpack analyze: cannot write the output\n");
        return 2;
    }
    return st.partial ? 1 : 0;
}
