/* cmd_snap.c - `crashpack snap PID`: capture a live (hung) process the way the handler
 * captures a crash (the library is node/snap.c), and the text form of its stop report. */
#include "cmdopt.h"
#include "commands.h"
#include "listjson.h"
#include "snap.h"
#include "snapperm.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Text summary of a stop report (crashpack-snap/1): one line per thread. */
static void snap_print_report(FILE *out, const cJSON *info)
{
    const cJSON *s = cJSON_GetObjectItem(info, "stop");
    fprintf(out, "stopped %d of %d threads for %.1f ms (core written in %.1f ms)\n",
            (int)cJSON_GetNumberValue(cJSON_GetObjectItem(s, "threads_stopped")),
            (int)cJSON_GetNumberValue(cJSON_GetObjectItem(s, "threads")),
            cJSON_GetNumberValue(cJSON_GetObjectItem(s, "stopped_ms")),
            cJSON_GetNumberValue(cJSON_GetObjectItem(s, "core_write_ms")));
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(info, "threads"))
    {
        const cJSON *sc = cJSON_GetObjectItem(t, "syscall");
        const char *sn = cJSON_GetStringValue(cJSON_GetObjectItem(sc, "name"));
        const cJSON *nr = cJSON_GetObjectItem(sc, "nr");
        char sys[64] = "-";
        if (sn)
            snprintf(sys, sizeof(sys), "%s", sn);
        else if (cJSON_IsNumber(nr))
            snprintf(sys, sizeof(sys), "syscall %d", (int)nr->valuedouble);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(t, "name"));
        char nm[20];
        snprintf(nm, sizeof(nm), "%s", name ? name : "");
        for (char *p = nm; *p; p++)
            if ((unsigned char)*p < 32 || (unsigned char)*p >= 127)
                *p = '?';
        const cJSON *ms = cJSON_GetObjectItem(t, "stop_ms");
        const char *wchan = cJSON_GetStringValue(cJSON_GetObjectItem(t, "wchan"));
        fprintf(out, "  tid %-8d %-16s state %s  %-16s ",
                (int)cJSON_GetNumberValue(cJSON_GetObjectItem(t, "tid")), nm,
                cJSON_GetStringValue(cJSON_GetObjectItem(t, "state"))
                    ? cJSON_GetStringValue(cJSON_GetObjectItem(t, "state"))
                    : "?",
                sys);
        if (cJSON_IsNumber(ms))
            fprintf(out, "stopped %.1f ms\n", ms->valuedouble);
        else
            fprintf(out, "NOT stopped (kernel: %s)\n", wchan && wchan[0] ? wchan : "?");
    }
}

static void usage(FILE *out)
{
    fprintf(
        out,
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
        "  --locals        Python frames' local variables (short reprs, secrets masked) in\n"
        "                  the report, as `python_locals = on` in the configuration does\n"
        "  --kill          end the process (SIGKILL) once it has been captured\n"
        "  -o, --output DIR write the bundle to DIR (root-owned, not writable by others)\n"
        "  -c, --config F  configuration file (default "
        "/etc/crashpack/crashpack.conf)\n"
        "  --timeout MS    how long each thread may take to stop (default 500)\n"
        "  --reason TEXT   why, recorded in the manifest\n"
        "  --kind exception  the process reported an uncaught exception (manifest death)\n"
        "  --member NAME=FD  a member read from descriptor FD: exception.json, output.txt,\n"
        "                  process.json or events.json (repeatable, at most 4)\n"
        "  --json          print the bundle and the stop report as JSON (crashpack-snap-result/1:\n"
        "                  bundle.path, snap: crashpack-snap/1)\n"
        "  -h, --help      this help\n"
        "\n"
        "Exit status: 0 captured, 1 capture failed, 2 usage error, 3 no such process.\n");
}

enum { O_FULL = 256, O_KILL, O_JSON, O_TIMEOUT, O_REASON, O_TRIGGER, O_KIND, O_MEMBER, O_LOCALS };
static const struct option longs[] = {{"full", no_argument, 0, O_FULL},
                                      {"kill", no_argument, 0, O_KILL},
                                      {"json", no_argument, 0, O_JSON},
                                      {"output", required_argument, 0, 'o'},
                                      {"config", required_argument, 0, 'c'},
                                      {"timeout", required_argument, 0, O_TIMEOUT},
                                      {"reason", required_argument, 0, O_REASON},
                                      {"trigger", required_argument, 0, O_TRIGGER},
                                      {"kind", required_argument, 0, O_KIND},
                                      {"member", required_argument, 0, O_MEMBER},
                                      {"locals", no_argument, 0, O_LOCALS},
                                      CP_OPT_HELP,
                                      CP_OPT_END};

/* The one line of a failed snapshot: the pid, its name, why. CP_EXIT_PROBLEM. */
static int cannot_snap(pid_t pid, const char *why)
{
    char path[64], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "re");
    if (f && fgets(comm, sizeof(comm), f))
        comm[strcspn(comm, "\n")] = 0;
    if (f)
        fclose(f);
    fprintf(stderr, "crashpack snap: cannot snapshot pid %d%s", (int)pid, comm[0] ? " (" : "");
    if (comm[0]) {
        cp_text_put(stderr, comm);
        fputc(')', stderr);
    }
    fputs(": ", stderr);
    cp_text_put(stderr, why);
    fputc('\n', stderr);
    return CP_EXIT_PROBLEM;
}

/* The result on stdout: crashpack-snap-result/1 (json), else the stop report and the bundle.
 * Takes info. */
static void print_result(int json, int rc, const char *bundle, const char *err, cJSON *info)
{
    if (json) {
        cJSON *o = cp_doc_new("crashpack-snap-result/1");
        if (rc == 0)
            cp_doc_str(cJSON_AddObjectToObject(o, "bundle"), "path", bundle); /* as in the report */
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
    cJSON_Delete(info);
}

int cmd_snap(int argc, char **argv)
{
    struct snap_request rq = {.trigger = "snap", .reason = "requested"};
    int kill_after = 0, json = 0;
    struct cp_opts p = {.verb = "crashpack snap", .shorts = "o:c:", .longs = longs, .argc = argc, .argv = argv};
    long long n;
    int c;
    char mnames[4][128]; /* --member's names */
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case O_FULL: rq.full = 1; break;
        case O_LOCALS:
            rq.python_locals = 1;
            break;
        case O_KILL: kill_after = 1; break;
        case O_JSON: json = 1; break;
        case 'o': rq.bundle_dir = optarg; break;
        case 'c': rq.config = optarg; break;
        case O_TIMEOUT:
            if (cp_opt_num(&p, "--timeout", optarg, 1, 600000, &n))
                return CP_EXIT_USAGE;
            rq.timeout_ms = (unsigned)n;
            break;
        case O_REASON: rq.reason = optarg; break;
        case O_TRIGGER:
            if (strcmp(optarg, "watch") && strcmp(optarg, "hook") && strcmp(optarg, "snap")) {
                fprintf(stderr, "crashpack snap: --trigger: watch, hook or snap (got `%s`)\n", optarg);
                return CP_EXIT_USAGE;
            }
            rq.trigger = optarg;
            break;
        case O_KIND:
            if (strcmp(optarg, "exception")) {
                fprintf(stderr, "crashpack snap: --kind: only `exception` (got `%s`)\n", optarg);
                return CP_EXIT_USAGE;
            }
            rq.kind = optarg;
            break;
        case O_MEMBER: {
            const char *eq = strrchr(optarg, '=');
            long long fd;
            if (!eq || rq.nmembers >= 4 ||
                cp_opt_num(&p, "--member descriptor", eq + 1, 0, 1 << 20, &fd) ||
                fcntl((int)fd, F_GETFD) < 0) {
                fprintf(stderr, "crashpack snap: --member NAME=FD: an open descriptor, at most 4\n");
                return CP_EXIT_USAGE;
            }
            rq.members[rq.nmembers].fd = (int)fd;
            snprintf(mnames[rq.nmembers], sizeof(mnames[0]), "%.*s", (int)(eq - optarg), optarg);
            rq.members[rq.nmembers].name = mnames[rq.nmembers];
            rq.nmembers++;
            break;
        }
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 1, 1, "PID") || cp_opt_num(&p, "PID", argv[optind], 1, 0x3fffffff, &n))
        return CP_EXIT_USAGE;
    rq.pid = (pid_t)n;
    if (kill(rq.pid, 0) && errno == ESRCH) {
        fprintf(stderr, "crashpack snap: no process %d\n", (int)rq.pid);
        return CP_EXIT_NOTFOUND;
    }
    char bundle[1200], err[600], why[600];
    if (geteuid() != 0 && snap_blocker(rq.pid, 1, why, sizeof(why))) /* before any stop */
        return cannot_snap(rq.pid, why);
    cJSON *info = NULL;
    int rc = snap_pid(&rq, bundle, sizeof(bundle), &info, err, sizeof(err));
    if (rc == 0 && kill_after && kill(rq.pid, SIGKILL))
        fprintf(stderr, "crashpack snap: kill %d: %s\n", (int)rq.pid, strerror(errno));
    print_result(json, rc, bundle, err, info);
    if (rc)
        return cannot_snap(rq.pid, snap_blocker(rq.pid, 0, why, sizeof(why)) ? why : err);
    return CP_EXIT_OK;
}
