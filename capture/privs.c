/* privs.c - the handler's privileges (privs.h): the drop before the drain, and the one switch to
 * the crashed uid. Every capset the handler makes is here. */
#include "privs.h"
#include "capture.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SETID_CAPS ((1u << CAP_SETUID) | (1u << CAP_SETGID))

/* Sets the permitted set to `permitted` and the effective set to `effective` (the first 32
 * capabilities; every higher one and the inheritable set cleared). */
static int set_caps(uint32_t permitted, uint32_t effective)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    d[0].permitted = permitted;
    d[0].effective = effective;
    return (int)syscall(SYS_capset, &h, d);
}

int privs_drop(struct cap *c)
{
    c->privs_dropped = 1;
    for (int cap = 0; cap <= 63; cap++) {
        if (cap == CAP_SETUID || cap == CAP_SETGID)
            continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno == EINVAL)
            break; /* past the last capability this kernel knows */
    }
    int rc = set_caps(SETID_CAPS, 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        rc = -1;
    return rc;
}

int privs_become(const struct cap *c, uid_t uid, gid_t gid)
{
    if (c->privs_dropped)
        set_caps(SETID_CAPS, SETID_CAPS); /* a failure shows in the switch itself */
    /* the crashed process's own groups when it is its uid that is taken (a file it could read
     * through a supplementary group, its checkpoint's, is read), none for any other */
    int own = uid == c->uid && gid == c->gid && c->ngroups > 0;
    if (setgroups(own ? (size_t)c->ngroups : 0, own ? c->groups : NULL) ||
        setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
        return -1;
    /* nothing stays: not for uid 0 either (a root process's files are opened as uid 0 without
     * CAP_DAC_OVERRIDE and the rest, so a mode or an ACL stops them as it stops the process) */
    if (set_caps(0, 0) && errno != EPERM)
        return -1;
    /* not dumpable, whatever fs.suid_dumpable says (1 would make it so): the child holds the
     * finisher's descriptors until it closes or execs them, and no other process of the uid may
     * take one (pidfd_getfd, /proc/PID/fd). An exec makes the new image dumpable again. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
        return -1;
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int privs_clear(void)
{
    return set_caps(0, 0);
}
