/* test_pidmap.c - node/pidmap.c against a plain list of pairs: random adds, deletions and value
 * changes with many collisions and duplicate pids, then every pid's pairs compared. */
#include "pidmap.h"

#include <stdio.h>
#include <stdlib.h>

#define NPAIRS 20000
#define PIDS 3000 /* few pids: long probe runs, many duplicates */

static int fails;
static struct {
    pid_t pid;
    int val, live;
} ref[NPAIRS];
static size_t nref;

/* How many live pairs (pid, val) the reference has; val < 0: any value. */
static int ref_count(pid_t pid, int val)
{
    int n = 0;
    for (size_t i = 0; i < nref; i++)
        n += ref[i].live && ref[i].pid == pid && (val < 0 || ref[i].val == val);
    return n;
}

static void check_all(const struct pidmap *m)
{
    for (pid_t pid = 1; pid <= PIDS; pid++) {
        size_t it = 0, got = 0;
        int v;
        while (pm_next(m, pid, &it, &v)) {
            got++;
            if (!ref_count(pid, v)) {
                fprintf(stderr, "FAIL: pid %d has a pair with %d that was never added\n", pid, v);
                fails++;
            }
        }
        if (got != (size_t)ref_count(pid, -1) || pm_has(m, pid) != (got > 0)) {
            fprintf(stderr, "FAIL: pid %d: %zu pairs, want %d\n", pid, got, ref_count(pid, -1));
            fails++;
        }
    }
}

int main(void)
{
    struct pidmap m = {0};
    srand(22);
    int next_val = 0;
    for (int step = 0; step < 60000; step++) {
        int op = rand() % 10;
        pid_t pid = 1 + rand() % PIDS;
        if (op < 5 && nref < NPAIRS) { /* add (pids repeat: duplicates) */
            ref[nref].pid = pid;
            ref[nref].val = next_val++;
            ref[nref++].live = 1;
            if (pm_add(&m, pid, next_val - 1))
                return fprintf(stderr, "FAIL: pm_add: out of memory\n"), 1;
        } else if (op < 8 && nref) { /* delete one pair, known or not */
            size_t i = (size_t)rand() % nref;
            int had = ref[i].live;
            if (pm_del(&m, ref[i].pid, ref[i].val) != had) {
                fprintf(stderr, "FAIL: pm_del(%d, %d) != %d\n", ref[i].pid, ref[i].val, had);
                fails++;
            }
            ref[i].live = 0;
        } else if (nref) { /* change a live pair's value */
            size_t i = (size_t)rand() % nref;
            if (ref[i].live) {
                pm_set(&m, ref[i].pid, ref[i].val, next_val);
                ref[i].val = next_val++;
            }
        }
        if (step % 6000 == 0)
            check_all(&m);
    }
    check_all(&m);
    size_t live = 0;
    for (size_t i = 0; i < nref; i++)
        live += ref[i].live;
    if (m.n != live) {
        fprintf(stderr, "FAIL: %zu pairs in the map, want %zu\n", m.n, live);
        fails++;
    }
    pm_clear(&m);
    if (m.n || pm_has(&m, 1))
        fprintf(stderr, "FAIL: pm_clear left pairs\n"), fails++;
    pm_free(&m);
    if (fails)
        return 1;
    printf("pidmap: ok (%zu pairs added)\n", nref);
    return 0;
}
