/* datadir.c - see datadir.h. */
#include "datadir.h"
#include "errmsg.h"

#include <limits.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CRASHPACK_SOURCE_DIR
#define CRASHPACK_SOURCE_DIR ""
#endif

static int has_rules(const char *root)
{
    char p[PATH_MAX];
    struct stat st;
    if (!root || !*root || snprintf(p, sizeof(p), "%s/rules", root) >= (int)sizeof(p))
        return 0;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *cp_datadir(void)
{
    static char root[PATH_MAX];
    static int done;
    if (done)
        return root[0] ? root : NULL;
    done = 1;
    const char *env = getenv("CRASHPACK_DATA_DIR");
    if (has_rules(env)) {
        snprintf(root, sizeof(root), "%s", env);
        return root;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char cand[PATH_MAX];
            if (snprintf(cand, sizeof(cand), "%s/../share/crashpack", exe) < (int)sizeof(cand) &&
                has_rules(cand)) {
                snprintf(root, sizeof(root), "%s", cand);
                return root;
            }
        }
    }
    if (has_rules(CRASHPACK_SOURCE_DIR)) {
        snprintf(root, sizeof(root), "%s", CRASHPACK_SOURCE_DIR);
        return root;
    }
    return NULL;
}

char *cp_datapath(const char *rel, char *buf, size_t len, char *errbuf, size_t errlen)
{
    const char *root = cp_datadir();
    if (!root) {
        cp_errmsg(errbuf, errlen,
                  "no crashpack data directory (tried $CRASHPACK_DATA_DIR, <bindir>/../share/crashpack, "
                  "%s)", *CRASHPACK_SOURCE_DIR ? CRASHPACK_SOURCE_DIR : "no source tree");
        return NULL;
    }
    if (snprintf(buf, len, "%s/%s", root, rel) >= (int)len) {
        cp_errmsg(errbuf, errlen, "data path too long: %s/%s", root, rel);
        return NULL;
    }
    return buf;
}

char *cp_data_read(const char *rel, const char *what, size_t max, size_t *len, char *path,
                   size_t pathlen, char *err, size_t errlen)
{
    char why[512];
    *len = 0;
    if (!cp_datapath(rel, path, pathlen, why, sizeof(why))) {
        cp_errmsg(err, errlen, "%s: %s", what, why);
        return NULL;
    }
    FILE *f = fopen(path, "re");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        cp_errmsg(err, errlen, "%s: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return NULL;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max) {
        cp_errmsg(err, errlen, "%s: over the size limit (%zu bytes)", path, max);
        fclose(f);
        return NULL;
    }
    /* the size stat gives, and one byte more to notice a file that grew since */
    size_t want = (size_t)st.st_size;
    char *buf = malloc(want + 2);
    size_t n = buf ? fread(buf, 1, want + 1, f) : 0;
    int rerr = buf && ferror(f);
    fclose(f);
    if (!buf || rerr || n > want) {
        cp_errmsg(err, errlen, "%s: %s", path,
                  !buf ? "out of memory" : rerr ? "read error" : "changed while being read");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

const char *cp_bindir(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
        if (n <= 0)
            return NULL;
        dir[n] = 0;
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
    }
    return dir;
}
