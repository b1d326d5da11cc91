/* cmd_snap.c - `crashpack snap PID`: capture a live (hung) process the way the handler
 * captures a crash (the library is snap.c). */
#include "commands.h"
#include "snap.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack snap [options] PID\n"
            "\n"
            "Captures a live process into a bundle, the same bundle the crash handler writes: every\n"
            "thread is stopped briefly (ptrace), its registers and stack are written into an ELF\n"
            "core gdb opens, and the process runs on. A thread that cannot stop (uninterruptible\n"
            "sleep: a driver call, FUSE, vfork) is recorded from the kernel's side instead. The\n"
            "stop can make some blocking calls in the process return EINTR.\n"
            "\n"
            "  --full          the whole readable memory in the core (default: slim: stacks, the\n"
            "                  first page of each mapped file, small and written data mappings)\n"
            "  --kill          end the process (SIGKILL) once it has been captured\n"
            "  -o DIR          write the bundle to DIR (root-owned, not writable by others)\n"
            "  -c CONFIG       configuration file (default " "/etc/crashpack/crashpack.conf)\n"
            "  --timeout MS    how long each thread may take to stop (default 500)\n"
            "  --reason TEXT   why, recorded in the manifest\n"
            "  --json          print the stop report (crashpack-snap/1) and the bundle as JSON\n"
            "  -h, --help      this help\n"
            "\n"
            "Exit status: 0 captured, 1 capture failed, 2 usage error.\n");
}

int cmd_snap(int argc, char **argv)
{
    struct snap_request rq = {.trigger = "snap", .reason = "requested"};
    int kill_after = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--full")) {
            rq.full = 1;
        } else if (!strcmp(a, "--kill")) {
            kill_after = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "-o") && v) {
            rq.bundle_dir = v;
            i++;
        } else if (!strcmp(a, "-c") && v) {
            rq.config = v;
            i++;
        } else if (!strcmp(a, "--timeout") && v) {
            char *e;
            long ms = strtol(v, &e, 10);
            if (*e || ms <= 0 || ms > 600000) {
                fprintf(stderr, "crashpack snap: bad --timeout\n");
                return 2;
            }
            rq.timeout_ms = (unsigned)ms;
            i++;
        } else if (!strcmp(a, "--reason") && v) {
            rq.reason = v;
            i++;
        } else if (!strcmp(a, "--trigger") && v) {
            rq.trigger = !strcmp(v, "watch") ? "watch" : "snap";
            i++;
        } else if (a[0] >= '0' && a[0] <= '9' && !rq.pid) {
            char *e;
            long p = strtol(a, &e, 10);
            if (*e || p <= 0 || p > 0x3fffffff) {
                fprintf(stderr, "crashpack snap: bad pid\n");
                return 2;
            }
            rq.pid = (pid_t)p;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!rq.pid) {
        usage(stderr);
        return 2;
    }
    char bundle[1200], err[600];
    cJSON *info = NULL;
    int rc = snap_pid(&rq, bundle, sizeof(bundle), &info, err, sizeof(err));
    if (rc == 0 && kill_after && kill(rq.pid, SIGKILL))
        fprintf(stderr, "crashpack snap: kill %d: %s\n", (int)rq.pid, strerror(errno));
    if (json) {
        cJSON *o = cJSON_CreateObject();
        if (rc == 0)
            cJSON_AddStringToObject(o, "bundle", bundle);
        else
            cJSON_AddNullToObject(o, "bundle");
        if (rc)
            cJSON_AddStringToObject(o, "error", err);
        cJSON_AddItemToObject(o, "snap", info ? info : cJSON_CreateNull());
        info = NULL;
        char *s = cJSON_Print(o);
        if (s)
            puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        if (info)
            snap_print_report(stdout, info);
        if (rc == 0)
            printf("bundle: %s\n", bundle);
    }
    if (rc)
        fprintf(stderr, "crashpack snap: %s\n", err);
    cJSON_Delete(info);
    return rc ? 1 : 0;
}
