/* pidmap.h - pids to small integers, for the supervisor's lookups (proctree.c: the entry of a
 * pid; the job's live members as the proc connector's fork events name them). An
 * open-addressing hash with linear probing: a pid may be there more than once (a reused pid, its
 * old entry not removed yet), each pair (pid, value) once. */
#ifndef CRASHPACK_PIDMAP_H
#define CRASHPACK_PIDMAP_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pidmap {
    struct pm_slot {
        int32_t pid; /* 0: empty */
        int32_t val;
    } * s;
    size_t cap, n;
};

/* Adds the pair (pid > 0). 0, or -1 when out of memory. */
int pm_add(struct pidmap *m, pid_t pid, int val);

/* Removes the pair (pid, val); val < 0: one pair of pid, whichever. 1 when there was one. */
int pm_del(struct pidmap *m, pid_t pid, int val);

/* The pairs of pid, one at a time: *it = 0 first; 1 with *val, or 0 when there are no more. */
int pm_next(const struct pidmap *m, pid_t pid, size_t *it, int *val);

/* Whether pid has a pair. */
int pm_has(const struct pidmap *m, pid_t pid);

/* The pair (pid, from) becomes (pid, to). */
void pm_set(struct pidmap *m, pid_t pid, int from, int to);

/* Empties the map (pm_free: and releases its memory). */
void pm_clear(struct pidmap *m);
void pm_free(struct pidmap *m);
#endif
