/* privs.h - the handler's privileges, in one place: the drop before the core drains, and the one
 * switch to the crashed uid (with the capabilities that switch needs) that every child running
 * something on the process's behalf goes through. */
#ifndef CRASHPACK_PRIVS_H
#define CRASHPACK_PRIVS_H
#include <sys/types.h>

struct cap;

/* Keeps only CAP_SETUID/CAP_SETGID, and only in the permitted set (a finisher child may need them
 * to become the crashed uid); nothing is effective while the core drains, and nothing can be
 * regained through exec (bounding set, no_new_privs). Records the drop in c->privs_dropped, which
 * privs_become reads. Returns 0, or -1 with errno. */
int privs_drop(struct cap *c);

/* Becomes uid/gid for good, in a forked child, before it touches anything the crashed process
 * names: no supplementary groups, real/effective/saved gid and uid, no_new_privs, not dumpable
 * (no other process of the uid may take the descriptors it inherited; an exec undoes this).
 *   - Before privs_drop (the quick collectors' children, the handler still full root) the switch
 *     itself needs no capability work.
 *   - After privs_drop (the finisher's children) CAP_SETUID/CAP_SETGID are only permitted: they
 *     are made effective for the switch.
 *   - Either way every capability is cleared afterwards, for uid 0 too: a child for a root crash
 *     has uid 0's file ownership and nothing more.
 * Returns 0, or -1 with errno (the caller _exits: never run anything half-switched). */
int privs_become(const struct cap *c, uid_t uid, gid_t gid);

/* Clears every capability (permitted, effective, inheritable); the uid stays. For a child that
 * needs no privilege at all (nvidia-smi's supervisor). Returns 0, or -1 with errno. */
int privs_clear(void);
#endif
