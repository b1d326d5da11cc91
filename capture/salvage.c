/* salvage.c - complete the temporaries of handlers or finishers that died (kill -9, OOM, power):
 * a `.tmp-*` file whose flock can be taken has no live owner. Its frames are walked (bw_adopt),
 * the member that was cut is padded to its declared size, and capture.json, the tar end and the
 * index are added, so that it is published as a valid bundle marked "salvaged". */
#include "capture.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The adopted bundle's capture.json, marked salvaged: a complete one is taken over, a cut one
 * dropped (capture.json stays the last member); the member that was cut is padded and named,
 * and a cut core is marked truncated. Then the tar end and the index (t: when the salvage
 * started, for its ms). Returns 0 or -1. */
static int complete(struct bw *w, const char *name, const struct cp_config *cfg, const char *why,
                    double t)
{
    int rc = 0;
    int64_t padded = 0;
    char cut[100] = "";
    if (w->open_member >= 0) {
        snprintf(cut, sizeof(cut), "%s", w->members[w->open_member].name);
        padded = bw_end(w, cfg->frame_size);
    }
    char *prev = NULL;
    if (w->nmembers && !strcmp(w->members[w->nmembers - 1].name, "capture.json")) {
        prev = bw_read_small(w, "capture.json", 1 << 20);
        if (!strcmp(cut, "capture.json"))
            cut[0] = 0;
        if (bw_drop_last(w))
            rc = -1;
    }
    cJSON *cj = prev ? cJSON_Parse(prev) : NULL;
    free(prev);
    if (!cj)
        cj = cJSON_CreateObject();
    cJSON_DeleteItemFromObject(cj, "format");
    cJSON_DeleteItemFromObject(cj, "status");
    cJSON_AddStringToObject(cj, "format", "crashpack-capture/1");
    cJSON_AddStringToObject(cj, "status", "salvaged");
    cJSON *sv = cJSON_AddObjectToObject(cj, "salvage");
    cJSON_AddStringToObject(sv, "from", name);
    cJSON_AddNumberToObject(sv, "at", (double)time(NULL));
    cJSON_AddStringToObject(sv, "note", why[0] ? why : "the handler or finisher died");
    if (cut[0]) {
        cJSON_AddStringToObject(sv, "cut_member", cut);
        cJSON_AddNumberToObject(sv, "padded_bytes", (double)padded);
    }
    if (cut[0] && !strcmp(cut, "core")) {
        cJSON *core = cJSON_GetObjectItem(cj, "core");
        if (!core)
            core = cJSON_AddObjectToObject(cj, "core");
        cJSON_DeleteItemFromObject(core, "truncated");
        cJSON_DeleteItemFromObject(core, "truncation_reason");
        cJSON_AddBoolToObject(core, "truncated", 1);
        cJSON_AddStringToObject(core, "truncation_reason", "capture was interrupted; salvaged");
    }
    cJSON_AddNumberToObject(sv, "ms", (now_mono() - t) * 1000);
    char *s = cJSON_PrintUnformatted(cj);
    cJSON_Delete(cj);
    if (rc || !s || bw_add(w, "capture.json", s, strlen(s)) || bw_finish(w))
        rc = -1;
    free(s);
    return rc;
}

/* Publishes the completed temporary, root-only (the owner is not known for sure): renamed
 * without replacing anything to its bundle name, or NAME-salvaged-N.zst when that is taken. */
static void publish(int dirfd, int fd, const char *name, int kmsgfd)
{
    fchmod(fd, 0600);
    char final[256];
    const char *base = name + strlen(".tmp-");
    const char *dot = strrchr(base, '.');
    int bl = dot ? (int)(dot - base) : (int)strlen(base);
    for (int i = 0; i < 100; i++) {
        if (i)
            snprintf(final, sizeof(final), "%.*s-salvaged-%d.zst", bl, base, i);
        else
            snprintf(final, sizeof(final), "%.*s.zst", bl, base);
        if (renameat2(dirfd, name, dirfd, final, RENAME_NOREPLACE) == 0) {
            fsync(dirfd);
            kmsg_log(kmsgfd, "salvaged orphaned capture %s as %s\n", name, final);
            break;
        }
        if (errno != EEXIST)
            break;
    }
}

static int salvage_one(int dirfd, const char *name, const struct cp_config *cfg, int kmsgfd)
{
    int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        kmsg_log(kmsgfd, "cannot open orphan %s: %s\n", name, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_nlink != 1 ||
        flock(fd, LOCK_EX | LOCK_NB)) {
        kmsg_log(kmsgfd, "orphan %s busy: %s\n", name, strerror(errno));
        close(fd);
        return 0; /* alive, or not ours */
    }
    struct bw w;
    char why[200];
    double t = now_mono();
    int rc = bw_adopt(&w, fd, cfg->level, st.st_mtime, why, sizeof(why));
    if (rc == 0)
        rc = complete(&w, name, cfg, why, t);
    if (rc >= 0 && fsync(fd) == 0)
        publish(dirfd, fd, name, kmsgfd);
    else
        kmsg_log(kmsgfd, "cannot salvage %s: %s\n", name, why);
    bw_free(&w);
    close(fd);
    return rc;
}

int salvage_orphans(int dirfd, const struct cp_config *cfg, int kmsgfd)
{
    int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    char names[16][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 16)
        if (!strncmp(e->d_name, ".tmp-crash-", 11) && strlen(e->d_name) < 256)
            snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    int done = 0;
    for (int i = 0; i < n; i++)
        if (salvage_one(dirfd, names[i], cfg, kmsgfd) == 0)
            done++;
    return done;
}
