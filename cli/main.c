/* main.c - `crashpack <verb> ...`: one table, one function per verb (see commands.h). */
#include "commands.h"
#include "sandbox.h"

#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <libgen.h>

struct verb {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct verb verbs[] = {
    {"install", cmd_install, "install the capture handler into core_pattern"},
    {"uninstall", cmd_uninstall, "restore the previous core_pattern"},
    {"status", cmd_status, "is the handler installed, and did something take core_pattern back?"},
    {"analyze", cmd_analyze, "explain a bundle: crashed thread, cause, symbolized stacks"},
    {"checkpoint", cmd_checkpoint, "is a checkpoint file intact? (and the newest valid one)"},
    {"rules", cmd_rules, "the rule base: list, show, test, add, import, export"},
    {"db", cmd_db, "the knowledge base of analyzed crashes: add, list, show, groups, jobs, search, stats"},
    {"report", cmd_report, "ticket-ready Markdown for a bundle"},
    {"snap", cmd_snap, "capture a live (hung) process into a bundle, and let it run on"},
    {"agent", cmd_agent, "the node service (root): captures exceptions, exits and OOM kills without a core"},
    {"run", cmd_run, "supervise a job: a bundle for every abnormal end of its processes"},
    {"watch", cmd_watch, "run with stall detection: snap the job when its output and heartbeat stall"},
    {"python-hook", cmd_python_hook, "the Python exception hook in an interpreter: install, uninstall, status"},
    {"enrich", cmd_enrich, "on the crashed host: the native analysis as stacks.json"},
    {"version", cmd_version, "the version, git commit and libraries (also --version)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: crashpack <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        fprintf(out, "  %-11s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(out, "\n`crashpack <command> --help` describes each command; `crashpack --version` the build.\n"
                 "Exit status: 0 ok, 1 a problem found or a partial result, 2 usage, 3 no such thing\n"
                 "(docs/cli.md).\n");
}

/* The heap in one step, in 2 MiB pages. An analysis touches a few thousand fresh heap pages
 * (libdw's tables, the decoded core frames, the report), and a first touch is a page fault: on the
 * VMs CI runs on (shadow page tables) one costs about 13 us per 4 KiB page, 0.25 us per 4 KiB when
 * the page is part of a transparent huge page. So: every allocation below 32 MiB comes from the
 * brk heap (not from mmap), the heap grows 64 MiB at a time and is never trimmed back, and the
 * first 64 MiB are marked MADV_HUGEPAGE (THP in "madvise" mode, the usual default, honours it;
 * elsewhere madvise fails and nothing changes). `perf stat -r 10` on bench/analyze's two bundles,
 * with and without this call: the python3-torch core 149 -> 71 ms, the 64-thread one 82 -> 61 ms.
 * Only virtual space is reserved up front: what is never touched is never backed. */
#define HEAP_STEP (64u << 20)
#define HUGE_PAGE (2u << 20)

static void heap_in_huge_pages(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TOP_PAD, HEAP_STEP);
    mallopt(M_TRIM_THRESHOLD, 4 * HEAP_STEP);
    uintptr_t b0 = (uintptr_t)sbrk(0);
    void *volatile first = malloc(256u << 10); /* volatile: the pair is not optimized away */
    free(first);
    uintptr_t b1 = (uintptr_t)sbrk(0);
    uintptr_t lo = (b0 + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t hi = b1 & ~(uintptr_t)(HUGE_PAGE - 1);
    if (b0 != (uintptr_t)-1 && b1 != (uintptr_t)-1 && hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

int main(int argc, char **argv)
{
    /* before anything else: `crashpack enrich` is not dumpable, so no other process of its uid
     * can take a descriptor it holds (pidfd_getfd, /proc/PID/fd); the capture finisher sends it
     * the bundle only after this (docs/capture.md, "Descriptors and the enrichment") */
    if (argc > 1 && !strcmp(argv[1], "enrich"))
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    heap_in_huge_pages();
    if (argc < 2) {
        usage(stderr);
        return CP_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CP_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        argv[1] = "version";
        return cmd_version(argc - 1, argv + 1);
    }
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (!strcmp(argv[1], verbs[i].name)) {
            int rc = verbs[i].fn(argc - 1, argv + 1);
            sandbox_reap(); /* children whose exit was not waited for (sandbox.h) */
            return rc;
        }
    fprintf(stderr, "crashpack: unknown command `%s`; accepted:", argv[1]);
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        fprintf(stderr, " %s", verbs[i].name);
    fprintf(stderr, ", --help, --version\n");
    return CP_EXIT_USAGE;
}
