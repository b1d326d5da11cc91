/* outfile.c - see outfile.h. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int cp_outfile_open(struct cp_outfile *o, const char *path, mode_t mode)
{
    memset(o, 0, sizeof(*o));
    if (!path || !*path || strlen(path) + 32 >= sizeof(o->tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(o->path, sizeof(o->path), "%s", path);
    if (geteuid() == 0)
        mode = 0600;
    for (int i = 0; i < 100; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(o->tmp, sizeof(o->tmp), "%s.tmp.%d.%lx", path, (int)getpid(),
                 (unsigned long)(ts.tv_nsec ^ (i * 2654435761u)));
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return -1;
        if (!(o->f = fdopen(fd, "w"))) {
            int e = errno;
            close(fd);
            unlink(o->tmp);
            errno = e;
            return -1;
        }
        return 0;
    }
    errno = EEXIST;
    return -1;
}

int cp_outfile_commit(struct cp_outfile *o)
{
    int bad = fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) != 0;
    int e = errno;
    bad |= fclose(o->f) != 0;
    o->f = NULL;
    if (!bad && rename(o->tmp, o->path) == 0)
        return 0;
    e = bad ? e : errno;
    unlink(o->tmp);
    errno = e;
    return -1;
}

void cp_outfile_abort(struct cp_outfile *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    unlink(o->tmp);
}
