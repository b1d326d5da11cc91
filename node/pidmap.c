/* pidmap.c - pids to small integers (pidmap.h). */
#include "pidmap.h"

#include <stdlib.h>
#include <string.h>

static size_t home(const struct pidmap *m, pid_t pid)
{
    return ((uint32_t)pid * 2654435761u) & (m->cap - 1);
}

static int grow(struct pidmap *m)
{
    size_t nc = m->cap ? m->cap * 2 : 64;
    struct pm_slot *ns = calloc(nc, sizeof(*ns)), *old = m->s;
    if (!ns)
        return -1;
    size_t oc = m->cap;
    m->s = ns;
    m->cap = nc;
    m->n = 0;
    for (size_t i = 0; i < oc; i++)
        if (old[i].pid)
            pm_add(m, old[i].pid, old[i].val);
    free(old);
    return 0;
}

int pm_add(struct pidmap *m, pid_t pid, int val)
{
    if ((m->n + 1) * 2 > m->cap && grow(m))
        return -1;
    size_t i = home(m, pid);
    while (m->s[i].pid)
        i = (i + 1) & (m->cap - 1);
    m->s[i] = (struct pm_slot){(int32_t)pid, val};
    m->n++;
    return 0;
}

int pm_next(const struct pidmap *m, pid_t pid, size_t *it, int *val)
{
    if (!m->cap)
        return 0;
    for (size_t k = *it; k < m->cap; k++) {
        size_t i = (home(m, pid) + k) & (m->cap - 1);
        if (!m->s[i].pid)
            return 0;
        if (m->s[i].pid == pid) {
            *it = k + 1;
            *val = m->s[i].val;
            return 1;
        }
    }
    return 0;
}

int pm_has(const struct pidmap *m, pid_t pid)
{
    size_t it = 0;
    int v;
    return pm_next(m, pid, &it, &v);
}

/* The slot of the pair, or cap. */
static size_t slot_of(const struct pidmap *m, pid_t pid, int val)
{
    if (!m->cap)
        return 0;
    for (size_t i = home(m, pid);; i = (i + 1) & (m->cap - 1)) {
        if (!m->s[i].pid)
            return m->cap;
        if (m->s[i].pid == pid && (val < 0 || m->s[i].val == val))
            return i;
    }
}

void pm_set(struct pidmap *m, pid_t pid, int from, int to)
{
    size_t i = slot_of(m, pid, from);
    if (i < m->cap)
        m->s[i].val = to;
}

int pm_del(struct pidmap *m, pid_t pid, int val)
{
    size_t i = slot_of(m, pid, val);
    if (i >= m->cap)
        return 0;
    /* backward-shift deletion: every later slot of the run that may move up does */
    size_t mask = m->cap - 1;
    for (size_t j = (i + 1) & mask; m->s[j].pid; j = (j + 1) & mask) {
        size_t h = home(m, m->s[j].pid);
        /* the entry at j may fill the hole at i when its home is not in (i, j] */
        if (((j - h) & mask) >= ((j - i) & mask)) {
            m->s[i] = m->s[j];
            i = j;
        }
    }
    m->s[i].pid = 0;
    m->n--;
    return 1;
}

void pm_clear(struct pidmap *m)
{
    if (m->s)
        memset(m->s, 0, m->cap * sizeof(*m->s));
    m->n = 0;
}

void pm_free(struct pidmap *m)
{
    free(m->s);
    memset(m, 0, sizeof(*m));
}
