/* cmd_checkpoint.c - `crashpack checkpoint [--json] PATH`: is this checkpoint intact, and if not,
 * which is the newest intact one next to it (the library is checkpoint.c).
 *
 * The capture handler's finisher runs this as the crashed uid with the file already open
 * (`--fd N --dir-fd M`, descriptors its collector resolved inside the crashed process's root
 * without following symlinks), so the verdict is about the very file the job wrote, even in a
 * container or after a rename. Paths are untrusted text: JSON gets valid UTF-8, the terminal gets
 * them through the terminal policy (cp_text_put, utf8.h).
 *
 * Exit: 0 valid, 1 truncated / unreadable / unverifiable, 2 usage error, 3 no such file
 * (exitcodes.h). */
#include "utf8.h"
#include "checkpoint.h"
#include "cmdopt.h"
#include "commands.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SCAN_BUDGET_MS 10000u

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack checkpoint [--json] [--no-follow] [--no-scan] [--scan-budget-ms MS] "
            "[--] PATH\n"
            "\n"
            "Checks that a checkpoint file is complete, reading only its metadata: a torch.save zip\n"
            "(PyTorch >= 1.6) must have an intact end of central directory (ZIP64 too) with every\n"
            "entry inside the file; a safetensors file's header and tensor offsets must fit the\n"
            "file. Legacy (pickle) checkpoints cannot be verified. Verdict: valid, truncated,\n"
            "unreadable or unverifiable, with the reason. When the file is truncated or\n"
            "unreadable, the newest valid checkpoint (*.pt *.pth *.bin *.ckpt *.safetensors) in\n"
            "the same directory is named.\n"
            "\n"
            "  --json              one JSON object (format crashpack-checkpoint/1)\n"
            "  --no-follow         do not follow PATH if it is a symlink\n"
            "  --no-scan           do not look for the newest valid checkpoint\n"
            "  --scan-budget-ms MS time allowed for that search (default %u)\n"
            "  --fd N --dir-fd M   the file (and its directory) are already open as N (and M);\n"
            "                      PATH only names them (used by the capture handler)\n"
            "  -h, --help          this help\n"
            "\n"
            "Exit status: 0 valid, 1 truncated, unreadable or unverifiable, 2 usage error,\n"
            "3 no such file.\n",
            DEFAULT_SCAN_BUDGET_MS);
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    char *c = cp_utf8_clean(v);
    cJSON_AddStringToObject(o, k, c ? c : "");
    free(c);
}

static void add_result(cJSON *o, const char *path, const struct ckv_result *r)
{
    add_str(o, "path", path);
    cJSON_AddStringToObject(o, "verdict", ckv_verdict_name(r->verdict));
    if (r->verdict == CKV_UNVERIFIABLE)
        cJSON_AddNullToObject(o, "valid");
    else
        cJSON_AddBoolToObject(o, "valid", r->verdict == CKV_VALID);
    add_str(o, "reason", r->reason);
    cJSON_AddStringToObject(o, "file_format", r->format);
    if (r->have_stat) {
        cJSON_AddNumberToObject(o, "size", (double)r->size);
        cJSON_AddNumberToObject(o, "mtime", (double)r->mtime);
        cJSON_AddNumberToObject(o, "mtime_nsec", (double)r->mtime_nsec);
        if (r->inode < (1ull << 53))
            cJSON_AddNumberToObject(o, "inode", (double)r->inode);
        else {
            char b[24];
            snprintf(b, sizeof(b), "%llu", (unsigned long long)r->inode);
            cJSON_AddStringToObject(o, "inode", b);
        }
        char dev[32];
        snprintf(dev, sizeof(dev), "%u:%u", r->dev_major, r->dev_minor);
        cJSON_AddStringToObject(o, "device", dev);
    }
    if (r->entries)
        cJSON_AddNumberToObject(o, "entries", (double)r->entries);
}

static void print_text(const char *path, const struct ckv_result *r)
{
    cp_text_put(stdout, path);
    printf(": %s (%s)\n  ", ckv_verdict_name(r->verdict), r->format);
    cp_text_put(stdout, r->reason);
    printf("\n");
    if (r->have_stat) {
        char tb[64] = "?";
        time_t t = (time_t)r->mtime;
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(tb, sizeof(tb), "%Y-%m-%d %H:%M:%S %z", &tm);
        printf("  %llu bytes, modified %s, inode %llu on %u:%u\n", (unsigned long long)r->size,
               tb, (unsigned long long)r->inode, r->dev_major, r->dev_minor);
    }
}

/* A path that does not exist: one line on stderr (1), else 0. */
static int no_such_checkpoint(const char *path)
{
    struct stat st;
    if (!lstat(path, &st) || errno != ENOENT)
        return 0;
    fputs("crashpack checkpoint: no such checkpoint: ", stderr);
    cp_text_put(stderr, path);
    fputc('\n', stderr);
    return 1;
}

int cmd_checkpoint(int argc, char **argv)
{
    int json = 0, follow = 1, scan = 1, fd = -1, dirfd = -1;
    unsigned budget = DEFAULT_SCAN_BUDGET_MS;
    const char *path = NULL;
    enum { K_JSON = 256, K_NOFOLLOW, K_NOSCAN, K_FD, K_DIRFD, K_BUDGET };
    static const struct option longs[] = {
        {"json", no_argument, 0, K_JSON}, {"no-follow", no_argument, 0, K_NOFOLLOW},
        {"no-scan", no_argument, 0, K_NOSCAN}, {"fd", required_argument, 0, K_FD},
        {"dir-fd", required_argument, 0, K_DIRFD}, {"scan-budget-ms", required_argument, 0, K_BUDGET},
        CP_OPT_HELP, CP_OPT_END};
    struct cp_opts p = {.verb = "crashpack checkpoint", .longs = longs, .argc = argc, .argv = argv};
    long long v;
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case K_JSON: json = 1; break;
        case K_NOFOLLOW: follow = 0; break;
        case K_NOSCAN: scan = 0; break;
        case K_FD:
        case K_DIRFD:
            if (cp_opt_num(&p, c == K_FD ? "--fd" : "--dir-fd", optarg, 0, INT_MAX, &v))
                return CP_EXIT_USAGE;
            *(c == K_FD ? &fd : &dirfd) = (int)v;
            break;
        case K_BUDGET:
            if (cp_opt_num(&p, "--scan-budget-ms", optarg, 0, INT_MAX, &v))
                return CP_EXIT_USAGE;
            budget = (unsigned)v;
            break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 1, 1, "PATH"))
        return CP_EXIT_USAGE;
    path = argv[optind];
    if (fd < 0 && no_such_checkpoint(path))
        return CP_EXIT_NOTFOUND;

    struct ckv_result r;
    struct stat self;
    int have_self = 0;
    if (fd >= 0) {
        /* an O_PATH descriptor from the capture: reopen it for reading only once it is known to
         * be a regular file, so a FIFO or a device is never opened */
        memset(&r, 0, sizeof(r));
        r.format = "unknown";
        if (fstat(fd, &self)) {
            snprintf(r.reason, sizeof(r.reason), "--fd %d: %s", fd, strerror(errno));
            r.verdict = CKV_UNREADABLE;
        } else if (!S_ISREG(self.st_mode)) {
            snprintf(r.reason, sizeof(r.reason), "not a regular file: not opened");
            r.verdict = CKV_UNREADABLE;
        } else {
            char link[64];
            snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
            int rfd = open(link, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            struct stat st;
            if (rfd < 0) {
                snprintf(r.reason, sizeof(r.reason), "open: %s", strerror(errno));
                r.verdict = CKV_UNREADABLE;
            } else if (fstat(rfd, &st) || st.st_dev != self.st_dev || st.st_ino != self.st_ino) {
                snprintf(r.reason, sizeof(r.reason), "the reopened file is another file");
                r.verdict = CKV_UNREADABLE;
            } else {
                ckv_check_fd(rfd, &r);
                have_self = 1;
            }
            if (rfd >= 0)
                close(rfd);
        }
    } else {
        ckv_check_at(AT_FDCWD, path, follow, &r);
        if (r.have_stat && fstatat(AT_FDCWD, path, &self, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0)
            have_self = 1;
    }

    /* the newest valid checkpoint next to a bad one */
    struct ckv_scan *sc = NULL;
    char dirname_buf[PATH_MAX];
    snprintf(dirname_buf, sizeof(dirname_buf), "%s", path);
    const char *dir = dirname(dirname_buf);
    int scanned = 0;
    if (scan && (r.verdict == CKV_TRUNCATED || r.verdict == CKV_UNREADABLE)) {
        int own = -1;
        if (dirfd < 0 && fd < 0)
            dirfd = own = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dirfd >= 0 && (sc = malloc(sizeof(*sc))) &&
            ckv_scan_dir(dirfd, have_self ? &self : NULL, budget, sc) == 0)
            scanned = 1;
        if (own >= 0)
            close(own);
    }

    char full[PATH_MAX + 300];
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "format", "crashpack-checkpoint/1");
        add_result(o, path, &r);
        if (scanned) {
            if (sc->valid >= 0) {
                snprintf(full, sizeof(full), "%s/%s", dir, sc->items[sc->valid].name);
                add_result(cJSON_AddObjectToObject(o, "newest_valid"), full,
                           &sc->items[sc->valid].r);
            } else
                cJSON_AddNullToObject(o, "newest_valid");
            cJSON *arr = cJSON_AddArrayToObject(o, "scanned");
            for (size_t i = 0; i < sc->n; i++) {
                cJSON *e = cJSON_CreateObject();
                snprintf(full, sizeof(full), "%s/%s", dir, sc->items[i].name);
                add_result(e, full, &sc->items[i].r);
                cJSON_AddItemToArray(arr, e);
            }
            cJSON_AddNumberToObject(o, "scan_candidates", (double)sc->candidates);
            cJSON_AddBoolToObject(o, "scan_stopped", sc->stopped);
        } else if (r.verdict == CKV_TRUNCATED || r.verdict == CKV_UNREADABLE)
            cJSON_AddNullToObject(o, "newest_valid");
        char *s = cJSON_Print(o);
        if (s)
            puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        print_text(path, &r);
        if (scanned && sc->valid >= 0) {
            snprintf(full, sizeof(full), "%s/%s", dir, sc->items[sc->valid].name);
            printf("newest valid checkpoint in the same directory:\n");
            print_text(full, &sc->items[sc->valid].r);
        } else if (scanned)
            printf("no valid checkpoint in the same directory (%zu checked of %zu%s)\n", sc->n,
                   sc->candidates, sc->stopped ? "; search stopped by its budget" : "");
    }
    free(sc);
    return r.verdict == CKV_VALID ? CP_EXIT_OK : CP_EXIT_PROBLEM;
}
