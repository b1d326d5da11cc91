/* snapperm.c - what keeps this process from snapshotting another one (snapperm.h): the
 * settings and facts the kernel's ptrace check and crashpack-capture's bundle directory go by,
 * each said in words with what would lift it. */
#include "snapperm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CAP_SYS_PTRACE_BIT 19

/* The value after "Key:" in /proc/PID/status (the first number of it), or -1. */
static long long status_field(pid_t pid, const char *key, int nth)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    long long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            char *p = line + kl + 1, *e;
            for (int i = 0; i <= nth; i++, p = e) {
                v = strtoll(p, &e, nth >= 0 && !strcmp(key, "CapEff") ? 16 : 10);
                if (e == p) {
                    v = -1;
                    break;
                }
            }
            break;
        }
    if (f)
        fclose(f);
    return v;
}

static int have_cap_sys_ptrace(void)
{
    long long c = status_field(getpid(), "CapEff", 0);
    return c >= 0 && (c >> CAP_SYS_PTRACE_BIT) & 1;
}

/* kernel.yama.ptrace_scope, or -1 when Yama is not there. */
static int yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Is pid a descendant of this process? */
static int my_descendant(pid_t pid)
{
    pid_t me = getpid();
    for (int depth = 0; pid > 1 && depth < 256; depth++) {
        pid = (pid_t)status_field(pid, "PPid", 0);
        if (pid == me)
            return 1;
    }
    return 0;
}

static int yama_blocks(pid_t pid, int cap, char *why, size_t len)
{
    int scope = yama_scope();
    if (scope == 1 && !cap && !my_descendant(pid))
        snprintf(why, len,
                 "kernel.yama.ptrace_scope is 1 (restricted ptrace): a process may trace only "
                 "its own descendants, and pid %d is not one of crashpack's; run crashpack snap "
                 "as root, run the job under `crashpack watch`, or (if the machine's policy "
                 "allows) set kernel.yama.ptrace_scope = 0",
                 (int)pid);
    else if (scope == 2 && !cap)
        snprintf(why, len,
                 "kernel.yama.ptrace_scope is 2 (admin-only ptrace): only a process with "
                 "CAP_SYS_PTRACE may trace another; run crashpack snap as root");
    else if (scope == 3)
        snprintf(why, len,
                 "kernel.yama.ptrace_scope is 3 (no ptrace attach): no process may trace "
                 "another, root included, until the machine reboots");
    else
        return 0;
    return 1;
}

int snap_blocker(pid_t pid, int need_capture, char *why, size_t len)
{
    uid_t me = geteuid();
    int cap = have_cap_sys_ptrace();
    long long ruid = status_field(pid, "Uid", 0), euid = status_field(pid, "Uid", 1),
              suid = status_field(pid, "Uid", 2), tracer = status_field(pid, "TracerPid", 0);
    if (ruid < 0) {
        why[0] = 0;
        return 0; /* gone, or unreadable: the caller's own error says it */
    }
    if (!cap && (ruid != me || euid != me || suid != me)) {
        snprintf(why, len,
                 "it runs as uid %lld and crashpack as uid %u without CAP_SYS_PTRACE: only "
                 "root may trace another user's process",
                 euid, (unsigned)me);
        return 1;
    }
    if (yama_blocks(pid, cap, why, len))
        return 1;
    if (tracer > 0) {
        snprintf(why, len,
                 "it is traced already, by pid %lld (a debugger or another snapshot): a process "
                 "has one tracer at a time",
                 tracer);
        return 1;
    }
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!cap && stat(path, &st) == 0 && st.st_uid == 0 && ruid != 0) {
        snprintf(why, len,
                 "it is not dumpable (it called prctl(PR_SET_DUMPABLE, 0), or it runs a setuid "
                 "or file-capability program): only root may trace it");
        return 1;
    }
    if (me == 0 && !cap) {
        snprintf(why, len,
                 "crashpack runs as root without CAP_SYS_PTRACE (a container's or a service's "
                 "bounded capability set): give it that capability");
        return 1;
    }
    if (need_capture && me != 0) {
        snprintf(why, len,
                 "a snapshot's bundle is written by crashpack-capture into the root-owned bundle "
                 "directory, which uid %u cannot write: run crashpack snap as root (sudo)",
                 (unsigned)me);
        return 1;
    }
    why[0] = 0;
    return 0;
}
