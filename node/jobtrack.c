/* jobtrack.c - the job's cgroup and the proc connector (jobtrack.h). */
#include "jobtrack.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CG_PREFIX "crashpack-run-"
#define NL_RCVBUF (8 << 20) /* the connector's socket buffer: a burst of forks on the machine */
#define NL_ACK_MS 500       /* how long the kernel may take to acknowledge the listen request */
#define FREEZE_WAIT_MS 500  /* v1 freezer: how long a cgroup may take to freeze */
#define REMOVE_WAIT_MS 2000 /* the last processes' exits before the cgroup is removed */

int jt_want_parse(const char *spec)
{
    unsigned w = 0;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", spec);
    if (!buf[0] || strlen(spec) >= sizeof(buf))
        return -1;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "auto"))
            w |= JT_AUTO;
        else if (!strcmp(t, "cgroup"))
            w |= JT_CGROUP2 | JT_CGROUP1;
        else if (!strcmp(t, "cgroup2"))
            w |= JT_CGROUP2;
        else if (!strcmp(t, "cgroup1"))
            w |= JT_CGROUP1;
        else if (!strcmp(t, "connector"))
            w |= JT_CONNECTOR;
        else if (!strcmp(t, "scan"))
            w |= JT_SCAN;
        else if (strcmp(t, "walk"))
            return -1;
    }
    if ((w & JT_SCAN) && w != JT_SCAN)
        return -1; /* the old scan is alone */
    return (int)w;
}

void jt_init(struct jobtrack *j, unsigned want)
{
    memset(j, 0, sizeof(*j));
    j->want = want;
    j->cg_events = -1;
    j->nl = -1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- where the cgroup hierarchies are ---- */

/* Whether the comma list has the token. */
static int has_token(const char *list, const char *tok)
{
    size_t n = strlen(tok);
    for (const char *s = list; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        if (!strncmp(s, tok, n) && (s[n] == ',' || s[n] == 0 || s[n] == '\n'))
            return 1;
    return 0;
}

/* mountinfo's octal escapes (\040), in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = 0;
}

/* The mount of the hierarchy: fstype "cgroup2", or "cgroup" with tok among its super options.
 * Its mount point and root. 0, or -1. */
static int find_mount(const char *fstype, const char *tok, char *mnt, size_t mlen, char *root,
                      size_t rlen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found && fgets(line, sizeof(line), f)) {
        char *sep = strstr(line, " - ");
        char r[2048], m[2048], fs[64], src[512], opts[1024] = "";
        if (!sep || sscanf(line, "%*s %*s %*s %2047s %2047s", r, m) != 2 ||
            sscanf(sep + 3, "%63s %511s %1023s", fs, src, opts) < 2 || strcmp(fs, fstype))
            continue;
        if (tok && !has_token(opts, tok))
            continue;
        unescape(r);
        unescape(m);
        snprintf(mnt, mlen, "%s", m);
        snprintf(root, rlen, "%s", r);
        found = 0;
    }
    fclose(f);
    return found;
}

/* This process's cgroup in the hierarchy (v2: tok NULL; v1: the line naming tok). */
static int own_cgroup(const char *tok, char *path, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found && fgets(line, sizeof(line), f)) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *a = *b = 0;
        b[1 + strcspn(b + 1, "\n")] = 0;
        if (tok ? has_token(a + 1, tok) : (!strcmp(line, "0") && !a[1])) {
            snprintf(path, len, "%s", b + 1);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* Makes CG_PREFIX<self> under this process's cgroup of the hierarchy: 0, or -1 with why. */
static int make_in(struct jobtrack *j, int version, const char *tok, pid_t self)
{
    char mnt[2048], root[2048], own[2048];
    const char *what = version == 2 ? "cgroup v2" : tok;
    if (find_mount(version == 2 ? "cgroup2" : "cgroup", tok, mnt, sizeof(mnt), root,
                   sizeof(root))) {
        snprintf(j->cg_why, sizeof(j->cg_why), "%s: not mounted", what);
        return -1;
    }
    size_t rl = strlen(root);
    if (own_cgroup(tok, own, sizeof(own)) || strncmp(own, root, rl) ||
        (rl > 1 && own[rl] && own[rl] != '/')) {
        snprintf(j->cg_why, sizeof(j->cg_why), "%s: this process's cgroup is not under %s", what,
                 mnt);
        return -1;
    }
    const char *rel = rl > 1 ? own + rl : own; /* "/a/b" or "/" */
    const char *sl = rel[strlen(rel) - 1] == '/' ? "" : "/";
    snprintf(j->cg_dir, sizeof(j->cg_dir), "%s%s%s" CG_PREFIX "%d", mnt, rel, sl, (int)self);
    snprintf(j->cg_name, sizeof(j->cg_name), "%s%s" CG_PREFIX "%d", own,
             own[strlen(own) - 1] == '/' ? "" : "/", (int)self);
    if (mkdir(j->cg_dir, 0755) &&
        !(errno == EEXIST && !rmdir(j->cg_dir) && !mkdir(j->cg_dir, 0755))) {
        snprintf(j->cg_why, sizeof(j->cg_why), "%s: mkdir %s: %s", what, j->cg_dir,
                 strerror(errno));
        return -1;
    }
    j->cg = version;
    snprintf(j->cg_hier, sizeof(j->cg_hier), "%s", version == 2 ? "" : tok);
    return 0;
}

int jt_cgroup_make(struct jobtrack *j, pid_t self)
{
    char why2[400] = "";
    if ((j->want & JT_CGROUP2) && !make_in(j, 2, NULL, self))
        return 0;
    snprintf(why2, sizeof(why2), "%s", j->cg_why);
    /* v1: the freezer stops a fork storm at the end; the pids controller, or a named hierarchy,
     * only track (no limit is set) */
    static const char *const v1[] = {"freezer", "pids", "name=systemd", NULL};
    for (size_t i = 0; (j->want & JT_CGROUP1) && v1[i]; i++)
        if (!make_in(j, 1, v1[i], self))
            return 0;
    if (!(j->want & (JT_CGROUP1 | JT_CGROUP2)))
        snprintf(j->cg_why, sizeof(j->cg_why), "not asked for");
    else if (why2[0] && (j->want & JT_CGROUP1))
        snprintf(j->cg_why + strlen(j->cg_why), sizeof(j->cg_why) - strlen(j->cg_why), "; %s",
                 why2);
    else if (why2[0])
        snprintf(j->cg_why, sizeof(j->cg_why), "%s", why2);
    j->cg_dir[0] = j->cg_name[0] = 0;
    return -1;
}

static int write_file(const char *dir, const char *name, const char *s)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, s, strlen(s));
    int e = errno;
    close(fd);
    errno = e;
    return w == (ssize_t)strlen(s) ? 0 : -1;
}

int jt_cgroup_enter(struct jobtrack *j, pid_t pid, pid_t self)
{
    char s[32];
    snprintf(s, sizeof(s), "%d\n", (int)pid);
    while (j->cg && write_file(j->cg_dir, "cgroup.procs", s)) {
        char why[sizeof(j->cg_why)];
        snprintf(why, sizeof(why), "%s: moving the job into %s: %s",
                 j->cg == 2 ? "cgroup v2" : j->cg_hier, j->cg_dir, strerror(errno));
        rmdir(j->cg_dir);
        /* v2 refused (a threaded cgroup, no delegation of run's own): v1, where there is one */
        j->want &= j->cg == 2 ? ~JT_CGROUP2 : ~(JT_CGROUP1 | JT_CGROUP2);
        j->cg = 0;
        if ((j->want & (JT_CGROUP1 | JT_CGROUP2)) && jt_cgroup_make(j, self)) {
            size_t l = strlen(why);
            snprintf(why + l, sizeof(why) - l, "; %s", j->cg_why);
        }
        snprintf(j->cg_why, sizeof(j->cg_why), "%s", why);
    }
    if (!j->cg)
        return -1;
    if (j->cg == 2) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof(p), "%s/cgroup.events", j->cg_dir);
        j->cg_events = open(p, O_RDONLY | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/cgroup.kill", j->cg_dir);
        j->cg_kill = access(p, W_OK) == 0;
    }
    return 0;
}

/* ---- the processes in it ---- */

struct pidv {
    pid_t *v;
    size_t n, cap;
};

/* Appends the pids of dir/cgroup.procs, and those of the cgroups below it (depth-limited). */
static void collect(const char *dir, struct pidv *pv, int depth)
{
    size_t len;
    int tr;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
    char *s = read_file_at(AT_FDCWD, p, 1 << 24, &len, &tr);
    for (char *q = s, *e; q && *q; q = e) {
        long v = strtol(q, &e, 10);
        if (e == q)
            break;
        if (v <= 0)
            continue;
        if (pv->n == pv->cap) {
            size_t nc = pv->cap ? pv->cap * 2 : 256;
            pid_t *nv = realloc(pv->v, nc * sizeof(*nv));
            if (!nv)
                break;
            pv->v = nv;
            pv->cap = nc;
        }
        pv->v[pv->n++] = (pid_t)v;
    }
    free(s);
    DIR *d = depth < 16 ? opendir(dir) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_type == DT_DIR && de->d_name[0] != '.') {
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            collect(p, pv, depth + 1);
        }
    if (d)
        closedir(d);
}

pid_t *jt_cgroup_pids(const struct jobtrack *j, size_t *n)
{
    struct pidv pv = {0};
    if (j->cg)
        collect(j->cg_dir, &pv, 0);
    *n = pv.n;
    return pv.v;
}

int jt_cgroup_member(const struct jobtrack *j, pid_t pid)
{
    char p[64], line[4096];
    snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
    FILE *f = j->cg ? fopen(p, "re") : NULL;
    if (!f)
        return 0;
    size_t nl = strlen(j->cg_name);
    int in = 0;
    while (!in && fgets(line, sizeof(line), f)) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *a = *b = 0;
        b[1 + strcspn(b + 1, "\n")] = 0;
        int ours = j->cg == 2 ? (!strcmp(line, "0") && !a[1]) : has_token(a + 1, j->cg_hier);
        in = ours && !strncmp(b + 1, j->cg_name, nl) && (b[1 + nl] == 0 || b[1 + nl] == '/');
    }
    fclose(f);
    return in;
}

int jt_cgroup_populated(const struct jobtrack *j)
{
    if (!j->cg)
        return 0;
    if (j->cg == 2) {
        char buf[256];
        ssize_t r = j->cg_events >= 0 ? pread(j->cg_events, buf, sizeof(buf) - 1, 0) : -1;
        if (r > 0) {
            buf[r] = 0;
            char *s = strstr(buf, "populated ");
            if (s)
                return s[10] == '1';
        }
    }
    size_t n;
    free(jt_cgroup_pids(j, &n));
    return n > 0;
}

/* sig to pid, when it is (still) in the cgroup: through a pidfd, so a reused pid is never hit. */
static int signal_member(const struct jobtrack *j, pid_t pid, int sig)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return 0;
    int ok = jt_cgroup_member(j, pid) && syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0;
    close(fd);
    return ok;
}

/* v1 freezer: frozen, every process SIGKILLed (a frozen process cannot fork, nor end and have
 * its pid reused), thawed (they die). The processes signalled. */
static size_t freezer_kill(const struct jobtrack *j)
{
    if (write_file(j->cg_dir, "freezer.state", "FROZEN"))
        return 0;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/freezer.state", j->cg_dir);
    for (int i = 0; i < FREEZE_WAIT_MS / 5; i++) {
        size_t len;
        int tr;
        char *s = read_file_at(AT_FDCWD, p, 64, &len, &tr);
        int frozen = s && !strncmp(s, "FROZEN", 6);
        free(s);
        if (frozen)
            break;
        sleep_ms(5);
    }
    size_t n, k = 0;
    pid_t *v = jt_cgroup_pids(j, &n);
    for (size_t i = 0; i < n; i++)
        k += kill(v[i], SIGKILL) == 0;
    free(v);
    write_file(j->cg_dir, "freezer.state", "THAWED");
    return k;
}

size_t jt_cgroup_signal(const struct jobtrack *j, int sig, pid_t skip_pgrp,
                        const struct pidmap *skip)
{
    if (!j->cg)
        return 0;
    if (sig == SIGKILL && j->cg == 2 && j->cg_kill) {
        int pop = jt_cgroup_populated(j);
        return pop && !write_file(j->cg_dir, "cgroup.kill", "1") ? 1 : 0;
    }
    if (sig == SIGKILL && j->cg == 1 && !strcmp(j->cg_hier, "freezer"))
        return freezer_kill(j);
    size_t n, k = 0;
    pid_t *v = jt_cgroup_pids(j, &n);
    for (size_t i = 0; i < n; i++)
        if (!(skip && pm_has(skip, v[i])) && !(skip_pgrp > 0 && getpgid(v[i]) == skip_pgrp))
            k += (size_t)signal_member(j, v[i], sig);
    free(v);
    return k;
}

/* rmdir of the cgroups below dir, then of dir. */
static int remove_tree(const char *dir, int depth)
{
    DIR *d = depth < 16 ? opendir(dir) : NULL;
    struct dirent *de;
    char p[PATH_MAX + 32];
    while (d && (de = readdir(d)))
        if (de->d_type == DT_DIR && de->d_name[0] != '.') {
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            remove_tree(p, depth + 1);
        }
    if (d)
        closedir(d);
    return rmdir(dir);
}

int jt_cgroup_remove(struct jobtrack *j, char *err, size_t errlen)
{
    if (!j->cg)
        return 0;
    int rc = -1, e = 0;
    for (int i = 0; i < REMOVE_WAIT_MS / 10; i++) {
        if (jt_cgroup_populated(j)) {
            if (i % 20 == 0)
                jt_cgroup_signal(j, SIGKILL, -1, NULL);
        } else if (!remove_tree(j->cg_dir, 0) || errno == ENOENT) {
            rc = 0;
            break;
        }
        e = errno;
        sleep_ms(10);
    }
    if (rc)
        snprintf(err, errlen, "%s: %s", j->cg_dir, e ? strerror(e) : "processes still in it");
    if (j->cg_events >= 0)
        close(j->cg_events);
    j->cg_events = -1;
    j->cg = 0;
    return rc;
}

/* ---- the proc connector ---- */

/* PROC_CN_MCAST_LISTEN or _IGNORE to the kernel; seq and ack come back in its answer. */
static int nl_ctl(int fd, enum proc_cn_mcast_op op, uint32_t seq, uint32_t ack)
{
    struct {
        struct nlmsghdr h;
        struct cn_msg m;
        enum proc_cn_mcast_op op;
    } __attribute__((packed)) msg;
    memset(&msg, 0, sizeof(msg));
    msg.h.nlmsg_len = sizeof(msg);
    msg.h.nlmsg_type = NLMSG_DONE;
    msg.m.id.idx = CN_IDX_PROC;
    msg.m.id.val = CN_VAL_PROC;
    msg.m.seq = seq;
    msg.m.ack = ack;
    msg.m.len = sizeof(enum proc_cn_mcast_op);
    msg.op = op;
    return send(fd, &msg, sizeof(msg), 0) == (ssize_t)sizeof(msg) ? 0 : -1;
}

/* The event of a connector message (copied: the kernel's is 4-byte aligned), or -1. */
static int nl_event(const struct nlmsghdr *h, struct proc_event *ev)
{
    const struct cn_msg *cm = NLMSG_DATA(h);
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*cm) + sizeof(*ev)) || cm->id.idx != CN_IDX_PROC)
        return -1;
    memcpy(ev, cm->data, sizeof(*ev));
    return 0;
}

/* The kernel's answer to our listen request (its ack + 1: every listener of the machine gets
 * it; the kernel numbers seq itself): 0 (it acknowledged), or an errno. */
static int nl_ack(int fd, uint32_t ack)
{
    char buf[8192] __attribute__((aligned(8)));
    double until = now_mono() + NL_ACK_MS / 1000.0;
    while (now_mono() < until) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 50) <= 0)
            continue;
        ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r < 0 && errno == ENOBUFS)
            return 0; /* events overflowed it: it listens */
        if (r < 0)
            continue;
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (size_t)r); h = NLMSG_NEXT(h, r)) {
            const struct cn_msg *cm = NLMSG_DATA(h);
            struct proc_event ev;
            if (!nl_event(h, &ev) && ev.what == PROC_EVENT_NONE && cm->ack == ack + 1)
                return (int)ev.event_data.ack.err;
        }
    }
    return ETIMEDOUT;
}

/* Whether this process is in the initial pid namespace (the connector's pids are its). */
static int in_init_pidns(void)
{
    size_t len;
    int tr;
    char *s = read_file_at(AT_FDCWD, "/proc/self/status", 1 << 16, &len, &tr);
    char *l = s ? strstr(s, "\nNSpid:") : NULL;
    int init = 0;
    if (l) {
        l += 7;
        int fields = 0;
        for (char *e = l; *e && *e != '\n';) {
            while (*e == ' ' || *e == '\t')
                e++;
            if (*e && *e != '\n')
                fields++;
            while (*e && *e != ' ' && *e != '\t' && *e != '\n')
                e++;
        }
        init = fields == 1;
    }
    free(s);
    return init;
}

int jt_connector_open(struct jobtrack *j)
{
    if (!(j->want & JT_CONNECTOR)) {
        snprintf(j->nl_why, sizeof(j->nl_why), "not asked for");
        return -1;
    }
    if (!in_init_pidns()) {
        snprintf(j->nl_why, sizeof(j->nl_why), "not in the initial pid namespace");
        return -1;
    }
    int fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
    const char *step = "socket";
    int e = 0;
    if (fd >= 0) {
        int sz = NL_RCVBUF;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
        struct sockaddr_nl a = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC};
        step = "bind";
        /* ours among the acknowledgements of every run starting now */
        uint32_t seq = 0, ack = ((uint32_t)getpid() << 12) ^ (uint32_t)(now_mono() * 1e6);
        if (!bind(fd, (struct sockaddr *)&a, sizeof(a))) {
            step = "listen";
            if (!nl_ctl(fd, PROC_CN_MCAST_LISTEN, seq, ack)) {
                step = "the kernel's acknowledgement";
                if (!(e = nl_ack(fd, ack))) {
                    j->nl = fd;
                    return 0;
                }
                nl_ctl(fd, PROC_CN_MCAST_IGNORE, seq, ack);
            }
        }
    }
    if (!e)
        e = errno;
    snprintf(j->nl_why, sizeof(j->nl_why), "%s: %s", step, strerror(e));
    if (fd >= 0)
        close(fd);
    return -1;
}

/* One event of the kernel's, as a jt_ev when it is one of a whole process. */
static int decode(const struct proc_event *ev, struct jt_ev *out)
{
    out->when = (double)ev->timestamp_ns / 1e9;
    switch (ev->what) {
    case PROC_EVENT_FORK:
        if (ev->event_data.fork.child_pid != ev->event_data.fork.child_tgid)
            return 0; /* a new thread */
        out->what = JT_FORK;
        out->pid = ev->event_data.fork.child_tgid;
        out->ppid = ev->event_data.fork.parent_tgid;
        return 1;
    case PROC_EVENT_EXEC:
        out->what = JT_EXEC;
        out->pid = ev->event_data.exec.process_tgid;
        return 1;
    case PROC_EVENT_EXIT:
        if (ev->event_data.exit.process_pid != ev->event_data.exit.process_tgid)
            return 0; /* a thread */
        out->what = JT_EXIT;
        out->pid = ev->event_data.exit.process_tgid;
        return 1;
    default:
        return 0;
    }
}

size_t jt_connector_read(struct jobtrack *j, struct jt_ev *ev, size_t max, int *lost)
{
    char buf[16384] __attribute__((aligned(8)));
    size_t n = 0;
    *lost = 0;
    /* one event a datagram: room for a few more than one in each */
    while (j->nl >= 0 && n + 16 <= max) {
        ssize_t r = recv(j->nl, buf, sizeof(buf), MSG_DONTWAIT);
        if (r < 0) {
            if (errno == ENOBUFS) {
                *lost = 1;
                j->nl_lost++;
                continue;
            }
            break; /* EAGAIN: nothing more now */
        }
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (size_t)r) && n < max;
             h = NLMSG_NEXT(h, r)) {
            struct proc_event pe;
            if (nl_event(h, &pe))
                continue;
            j->nl_events++;
            n += (size_t)decode(&pe, &ev[n]);
        }
    }
    return n;
}

void jt_close(struct jobtrack *j)
{
    if (j->nl >= 0) {
        nl_ctl(j->nl, PROC_CN_MCAST_IGNORE, 0, 0);
        close(j->nl);
    }
    j->nl = -1;
    if (j->cg_events >= 0)
        close(j->cg_events);
    j->cg_events = -1;
}
