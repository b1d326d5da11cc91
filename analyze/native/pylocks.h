/* pylocks.h - the threading locks of a Python process, read from its memory (issue 23).
 *
 * A hung Python process's threads wait in `lock.acquire()` (or `with lock:`); which lock, and who
 * holds it, is in the interpreter's objects: CPython's `_thread.RLock` (threading.RLock) records
 * its owner's thread ident and its recursion count (3.11-3.13 rlockobject: rlock_lock at 16,
 * rlock_owner at 24, rlock_count at 32; 3.14 a _PyRecursiveMutex: thread at 24, level at 32); a
 * plain `_thread.lock` (threading.Lock) records no owner at all. The locks are found where the
 * threads' code can reach them: the module globals (f_globals) and the local slots (arguments,
 * locals and the value stack, where `with lock:` keeps the lock's bound __exit__) of each
 * thread's innermost frames, and a threading.Condition's `_lock`. Each lock is named by the global
 * or local name it was found under, when there is one.
 *
 * 3.11 and 3.12 keep a lock's semaphore behind a pointer (PyThread_type_lock, a sem_t: the futex
 * word a waiting thread sleeps on is that address), so a snapshot's futex address names the lock
 * a thread waits for exactly; 3.13+ park threads on their own semaphores, and the lock waited for
 * is the one the thread's innermost frame references and does not own (hang.c).
 *
 * Every read goes through the walk's bounded readers; counts are capped (PYLOCKS_MAX locks,
 * PYLOCKS_DICT entries of one dict, PYLOCKS_SLOTS local slots, PYLOCKS_FRAMES frames per thread).
 */
#ifndef CRASHPACK_PYLOCKS_H
#define CRASHPACK_PYLOCKS_H

#include <stdint.h>

struct walk;
struct py_state;

#define PYLOCKS_MAX 256u
#define PYLOCKS_DICT 4096u
#define PYLOCKS_SLOTS 48u
#define PYLOCKS_FRAMES 3u
#define PYLOCKS_SEEN 8u

struct py_lock {
    uint64_t addr;
    int rlock;      /* 1 threading.RLock (_thread.RLock), 0 threading.Lock (_thread.lock) */
    char name[96];  /* the global or local name it was found under; "" when none */
    uint64_t owner; /* RLock: the owner's thread ident (pthread_t), 0 when free */
    uint64_t count; /* RLock: recursion count */
    int locked;     /* Lock: 1 locked, 0 free, -1 unknown */
    uint64_t sem;   /* 3.11/3.12: the semaphore (futex word) address; 0 when not known */
    uint64_t seen_by[PYLOCKS_SEEN]; /* thread idents whose innermost frame's slots reference it */
    unsigned nseen;
};

/* Finds the locks reachable from every thread's innermost frames (st->threads and their frames
 * must be walked already) into st->locks. Best effort: unreadable objects are skipped. Returns 0,
 * or -1 when out of memory. */
int pylocks_scan(struct walk *w, struct py_state *st);

#endif
