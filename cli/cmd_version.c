/* cmd_version.c - `crashpack version` and `crashpack --version`: the version, the git commit it
 * was built from (cli/CMakeLists.txt asks git at configure time; "unknown" outside a checkout),
 * and the libraries it was built with (pkg-config's versions at build time; for the libraries
 * linked in, also the version running now). libxml2 and libzip are opened on first use
 * (common/lazylib.h): their build-time versions are shown, and they are not loaded for this. */
#include "cmdopt.h"
#include "commands.h"
#include "kb.h"

#include <cjson/cJSON.h>
#include <zstd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CRASHPACK_VERSION
#define CRASHPACK_VERSION "unknown"
#endif
#ifndef CRASHPACK_GIT_COMMIT
#define CRASHPACK_GIT_COMMIT "unknown"
#endif

static void usage(FILE *out)
{
    fprintf(out, "usage: crashpack version [--json]\n"
                 "       crashpack --version\n"
                 "\n"
                 "The version, the git commit it was built from, and the libraries it was built with.\n"
                 "\n"
                 "  --json       one JSON object (format crashpack-version/1)\n"
                 "  -h, --help   this text\n");
}

struct lib {
    const char *name, *built, *running; /* running: NULL when not loaded for this */
};

int cmd_version(int argc, char **argv)
{
    static const struct option longs[] = {{"json", no_argument, 0, 'j'}, CP_OPT_HELP, CP_OPT_END};
    struct cp_opts p = {.verb = "crashpack version", .longs = longs, .argc = argc, .argv = argv};
    int c, json = 0;
    while ((c = cp_getopt(&p)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return CP_EXIT_OK;
        }
        if (c != 'j')
            return CP_EXIT_USAGE;
        json = 1;
    }
    if (cp_opt_args(&p, 0, 0, ""))
        return CP_EXIT_USAGE;
    const struct lib libs[] = {
        {"zstd", CP_BUILT_ZSTD, ZSTD_versionString()},
        {"cjson", CP_BUILT_CJSON, cJSON_Version()},
        {"libdw", CP_BUILT_LIBDW, NULL},
        {"sqlite", CP_BUILT_SQLITE, kb_engine_version()},
        {"libxml2", CP_BUILT_LIBXML2, NULL},
        {"libzip", CP_BUILT_LIBZIP, NULL},
        {"libdeflate", CP_BUILT_DEFLATE, NULL},
    };
    size_t n = sizeof(libs) / sizeof(libs[0]);
    if (!json) {
        printf("crashpack %s (commit %s)\nbuilt with:", CRASHPACK_VERSION, CRASHPACK_GIT_COMMIT);
        for (size_t i = 0; i < n; i++) {
            printf(" %s %s", libs[i].name, libs[i].built);
            if (libs[i].running && strcmp(libs[i].running, libs[i].built))
                printf(" (running %s)", libs[i].running);
            fputc(i + 1 < n ? ',' : '\n', stdout);
        }
        return CP_EXIT_OK;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "crashpack-version/1");
    cJSON_AddStringToObject(o, "version", CRASHPACK_VERSION);
    cJSON_AddStringToObject(o, "commit", CRASHPACK_GIT_COMMIT);
    cJSON *ls = cJSON_AddObjectToObject(o, "libraries");
    for (size_t i = 0; i < n; i++) {
        cJSON *l = cJSON_AddObjectToObject(ls, libs[i].name);
        cJSON_AddStringToObject(l, "built", libs[i].built);
        if (libs[i].running)
            cJSON_AddStringToObject(l, "running", libs[i].running);
        else
            cJSON_AddNullToObject(l, "running");
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    if (!s)
        return CP_EXIT_PROBLEM;
    puts(s);
    free(s);
    return CP_EXIT_OK;
}
