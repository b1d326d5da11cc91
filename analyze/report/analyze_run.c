/* analyze_run.c - see analyze_run.h. */
#include "analyze_run.h"
#include "datadir.h"
#include "errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPORT_MAX (256u << 20)

extern char **environ;

cJSON *analyze_run_json(const char *bundle, const char *db, int *partial, char *err, size_t errlen)
{
    *partial = 0;
    char exe[PATH_MAX];
    const char *dir = cp_bindir();
    if (!dir || snprintf(exe, sizeof(exe), "%s/crashpack", dir) >= (int)sizeof(exe)) {
        cp_errmsg(err, errlen, "cannot find the crashpack executable");
        return NULL;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
        cp_errmsg(err, errlen, "pipe: %s", strerror(errno));
        return NULL;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    char *argv[8];
    int n = 0;
    argv[n++] = (char *)"crashpack";
    argv[n++] = (char *)"analyze";
    argv[n++] = (char *)"--json";
    if (db) {
        argv[n++] = (char *)"--db";
        argv[n++] = (char *)db;
    }
    argv[n++] = (char *)"--";
    argv[n++] = (char *)bundle;
    argv[n] = NULL;
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc) {
        close(p[0]);
        cp_errmsg(err, errlen, "cannot run %s: %s", exe, strerror(rc));
        return NULL;
    }
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    int toobig = 0;
    for (;;) {
        if (!buf)
            break;
        if (len + 1 >= cap) {
            if (cap >= REPORT_MAX) {
                toobig = 1;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(p[0], buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!buf || toobig) {
        free(buf);
        cp_errmsg(err, errlen, toobig ? "the report is too large" : "out of memory");
        return NULL;
    }
    buf[len] = 0;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    cJSON *j = (code == 0 || code == 1) ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        if (WIFSIGNALED(st))
            cp_errmsg(err, errlen, "crashpack analyze died of signal %d", WTERMSIG(st));
        else
            cp_errmsg(err, errlen, "crashpack analyze failed (exit status %d)", code);
        return NULL;
    }
    *partial = code == 1;
    return j;
}
