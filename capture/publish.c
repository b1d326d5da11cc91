/* publish.c - make the finished bundle visible atomically (fsync, mode + ACL, RENAME_NOREPLACE, fsync dir); run the post-capture command. */
#include "capture.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* POSIX ACL xattr: owner rw, user:<uid> r, group r (masked), other none. */
static int grant_read(int fd, uid_t uid)
{
    struct {
        uint32_t version;
        struct {
            uint16_t tag, perm;
            uint32_t id;
        } e[5];
    } __attribute__((packed)) acl = {
        2,
        {{0x01, 6, 0xFFFFFFFFu}, /* USER_OBJ rw- */
         {0x02, 4, uid},         /* USER uid r-- */
         {0x04, 4, 0xFFFFFFFFu}, /* GROUP_OBJ r-- */
         {0x10, 4, 0xFFFFFFFFu}, /* MASK r-- */
         {0x20, 0, 0xFFFFFFFFu}}, /* OTHER --- */
    };
    return fsetxattr(fd, "system.posix_acl_access", &acl, sizeof(acl), 0);
}

int publish_bundle(struct cap *c, char *final, size_t finallen)
{
    double t = now_mono();
    if (fsync(c->outfd)) {
        cap_step(c, "publish", "failed", t, "fsync: %s", strerror(errno));
        return -1;
    }
    const char *perm = "0600 root-only";
    if (fchmod(c->outfd, 0600) == 0 && !c->secure && c->uid != 0) {
        if (fchmod(c->outfd, 0640) == 0 && grant_read(c->outfd, c->uid) == 0)
            perm = "0640 + read ACL for the crashed uid";
        else {
            fchmod(c->outfd, 0600);
            perm = "0600: ACL not supported here";
        }
    } else if (!c->secure) {
        fchmod(c->outfd, 0640);
        perm = "0640";
    }
    for (int i = 0; i < 100; i++) {
        if (i)
            snprintf(final, finallen, "%.*s-%d.zst", (int)(strlen(c->finalname) - 4), c->finalname,
                     i);
        else
            snprintf(final, finallen, "%s", c->finalname);
        if (renameat2(c->dirfd, c->tmpname, c->dirfd, final, RENAME_NOREPLACE) == 0) {
            fsync(c->dirfd);
            cap_step(c, "publish", "ok", t, "%s", perm);
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    cap_step(c, "publish", "failed", t, "rename: %s", strerror(errno));
    return -1;
}

void publish_post_command(struct cap *c, const char *final)
{
    if (!c->cfg.post_command[0])
        return;
    char path[CP_PATH_MAX + 200];
    snprintf(path, sizeof(path), "%s/%s", c->cfg.bundle_dir, final);
    pid_t p = fork();
    if (p == 0) {
        setsid();
        int fd = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(fd, 2);
        }
        closefrom(3);
        char *argv[] = {c->cfg.post_command, path, NULL};
        char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        execve(c->cfg.post_command, argv, envp);
        _exit(127);
    }
}
