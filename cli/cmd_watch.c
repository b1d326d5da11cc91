/* cmd_watch.c - `crashpack watch [opts] -- CMD ...`: run a job on a pseudo-terminal, forward its
 * output, and snap it (and every Python process under it) when neither its output nor its
 * heartbeat file has changed for the stall time. The pty matters: on a pipe, Python (and C
 * stdio) block-buffer their output, so a job that is progressing can look silent for minutes.
 * The job keeps running after a snap unless --kill; watch exits with the job's exit status
 * (128 + signal when a signal ended it). */
#include "util.h" /* write_all */
#include "cmdopt.h"
#include "commands.h"
#include "snap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_SNAPS_PER_STALL 16

static volatile sig_atomic_t got_sig;
static void on_sig(int s)
{
    got_sig = s;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack watch [options] -- CMD [ARG...]\n"
            "\n"
            "Runs CMD on a pseudo-terminal (so block-buffered output still flows), forwards its\n"
            "output, and when neither the output nor the heartbeat file has changed for the stall\n"
            "time, captures the job with `crashpack snap` - the job itself and every Python\n"
            "process under it (torchrun-style trees) - records why, and lets it run on. Exits\n"
            "with the job's exit status (128 + signal number when a signal ended it); 2 is a usage\n"
            "error before the job started, 1 a failure to start it.\n"
            "\n"
            "  --stall SECONDS    silence that counts as a stall (default 600)\n"
            "  --heartbeat FILE   a file the job touches to say it is alive (its mtime counts)\n"
            "  --kill             end the job (SIGKILL to its process group) after the capture\n"
            "  --full             full cores instead of slim ones\n"
            "  -o, --output DIR, -c, --config FILE\n"
            "                     as for `crashpack snap`\n"
            "  -q, --quiet        no status lines on stderr\n"
            "  -h, --help         this help\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The processes to snap: the job and its Python descendants. */
static size_t stalled_set(pid_t job, pid_t *out, size_t max)
{
    size_t n = 0;
    out[n++] = job;
    DIR *d = opendir("/proc");
    if (!d)
        return n;
    struct {
        pid_t pid, ppid;
        int python;
    } *ps = NULL;
    size_t np = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[300], buf[512];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (r <= 0)
            continue;
        buf[r] = 0;
        char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
        if (!lp || !rp || rp < lp)
            continue;
        int ppid = 0;
        if (sscanf(rp + 2, "%*c %d", &ppid) != 1)
            continue;
        if (np == cap) {
            cap = cap ? cap * 2 : 256;
            void *nps = realloc(ps, cap * sizeof(*ps));
            if (!nps)
                break;
            ps = nps;
        }
        ps[np].pid = atoi(e->d_name);
        ps[np].ppid = ppid;
        ps[np].python = !strncmp(lp + 1, "python", 6) || !strncmp(lp + 1, "pt_main_thread", 14);
        np++;
    }
    closedir(d);
    /* descendants, breadth first over the collected table */
    pid_t *q = malloc((np + 1) * sizeof(pid_t));
    size_t qh = 0, qt = 0;
    if (q)
        q[qt++] = job;
    while (q && qh < qt) {
        pid_t p = q[qh++];
        for (size_t i = 0; i < np; i++)
            if (ps[i].ppid == p && qt < np + 1) {
                q[qt++] = ps[i].pid;
                if (ps[i].python && n < max)
                    out[n++] = ps[i].pid;
            }
    }
    free(q);
    free(ps);
    return n;
}

struct watch_opts {
    double stall;
    const char *hb, *outdir, *config;
    int kill_after, full, quiet;
    char **cmd; /* CMD [ARG...] */
};

/* 0, CP_EXIT_USAGE, or -1 when --help was printed. */
static int watch_parse(int argc, char **argv, struct watch_opts *o)
{
    enum { O_STALL = 256, O_HEARTBEAT, O_KILL, O_FULL };
    static const struct option longs[] = {
        {"stall", required_argument, 0, O_STALL}, {"heartbeat", required_argument, 0, O_HEARTBEAT},
        {"output", required_argument, 0, 'o'}, {"config", required_argument, 0, 'c'},
        {"kill", no_argument, 0, O_KILL}, {"full", no_argument, 0, O_FULL},
        {"quiet", no_argument, 0, 'q'}, CP_OPT_HELP, CP_OPT_END};
    *o = (struct watch_opts){.stall = 600};
    /* in order: the options end at CMD, whose own options are its */
    struct cp_opts p = {.verb = "crashpack watch", .shorts = "o:c:q", .longs = longs, .in_order = 1,
                        .argc = argc, .argv = argv};
    int c;
    char *e;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return -1;
        case O_STALL:
            o->stall = strtod(optarg, &e);
            if (!*optarg || *e || !(o->stall > 0) || o->stall > 1e7)
                return cp_usage_error(&p, "--stall `%s`: expected seconds, more than 0 and at most 1e7",
                                      optarg);
            break;
        case O_HEARTBEAT: o->hb = optarg; break;
        case 'o': o->outdir = optarg; break;
        case 'c': o->config = optarg; break;
        case O_KILL: o->kill_after = 1; break;
        case O_FULL: o->full = 1; break;
        case 'q': o->quiet = 1; break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 1, -1, "CMD"))
        return CP_EXIT_USAGE;
    o->cmd = argv + optind;
    return 0;
}

/* The forked job: a new session whose controlling terminal is the pty's slave side (with the
 * window size of ours when ws is not NULL), stdout and stderr on it; it waits at the gate until
 * the parent has set up its signal handling, then execs CMD. */
static void job_child(const char *slave, const struct winsize *ws, const int gate[2], char **cmd)
    __attribute__((noreturn));
static void job_child(const char *slave, const struct winsize *ws, const int gate[2], char **cmd)
{
    close(gate[1]);
    setsid();
    int s = open(slave, O_RDWR);
    if (s < 0)
        _exit(127);
    ioctl(s, TIOCSCTTY, 0);
    struct termios t;
    if (tcgetattr(s, &t) == 0) {
        t.c_oflag &= ~(tcflag_t)OPOST; /* no \n -> \r\n: the output is forwarded as it is */
        t.c_lflag &= ~(tcflag_t)(ECHO | ICANON);
        tcsetattr(s, TCSANOW, &t);
    }
    if (ws)
        ioctl(s, TIOCSWINSZ, ws);
    dup2(s, STDOUT_FILENO);
    dup2(s, STDERR_FILENO);
    if (s > 2)
        close(s);
    char c;
    if (read(gate[0], &c, 1) < 0) { /* the parent has set up its signal handling */
    }
    execvp(cmd[0], cmd);
    fprintf(stderr, "crashpack watch: %s: %s\n", cmd[0], strerror(errno));
    _exit(127);
}

/* Opens the pseudo-terminal and starts CMD on it: *job is its pid, *m the master side. SIGINT,
 * SIGTERM and SIGHUP are caught (to pass them on to the job) before the job may exec. */
static int watch_start(char **cmd, pid_t *job, int *m)
{
    *m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*m < 0 || grantpt(*m) || unlockpt(*m)) {
        fprintf(stderr, "crashpack watch: cannot open a pseudo-terminal: %s\n", strerror(errno));
        return CP_EXIT_PROBLEM;
    }
    const char *sname = ptsname(*m);
    char slave[128];
    snprintf(slave, sizeof(slave), "%s", sname ? sname : "");
    struct winsize ws;
    int have_ws = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0;
    int gate[2];
    if (pipe2(gate, O_CLOEXEC)) {
        fprintf(stderr, "crashpack watch: pipe: %s\n", strerror(errno));
        return CP_EXIT_PROBLEM;
    }
    *job = fork();
    if (*job < 0) {
        fprintf(stderr, "crashpack watch: fork: %s\n", strerror(errno));
        return CP_EXIT_PROBLEM;
    }
    if (*job == 0)
        job_child(slave, have_ws ? &ws : NULL, gate, cmd);
    close(gate[0]);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sig;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    close(gate[1]);
    return 0;
}

/* The watch loop's state. */
struct watch {
    const struct watch_opts *o;
    pid_t job;
    int m;                /* the pty's master side */
    double last;          /* when the job last showed life (output or heartbeat) */
    struct timespec hb_m; /* the heartbeat file's mtime, when hb_seen */
    int hb_seen;
    int snapped; /* this stall has been captured */
    int status, exited, master_open;
    char buf[65536];
};

/* Forwards what the job wrote (waiting up to 200 ms for it); output is a sign of life. */
static void watch_forward(struct watch *w)
{
    struct pollfd pf = {.fd = w->m, .events = POLLIN};
    int pr = w->master_open ? poll(&pf, 1, 200) : (usleep(50000), 0);
    if (pr > 0) {
        ssize_t r = read(w->m, w->buf, sizeof(w->buf));
        if (r > 0) {
            write_all(STDOUT_FILENO, w->buf, (size_t)r);
            w->last = now_s();
            w->snapped = 0;
        } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
            w->master_open = 0; /* EIO: every holder of the terminal is gone */
        }
    }
}

/* Whether the job has ended; if so, forwards the rest of its output. */
static void watch_reap(struct watch *w)
{
    pid_t p = waitpid(w->job, &w->status, WNOHANG);
    if (p == w->job) {
        w->exited = 1;
        /* whatever is still buffered in the terminal, without waiting for grandchildren */
        int fl = fcntl(w->m, F_GETFL);
        fcntl(w->m, F_SETFL, fl | O_NONBLOCK);
        ssize_t r;
        while ((r = read(w->m, w->buf, sizeof(w->buf))) > 0)
            write_all(STDOUT_FILENO, w->buf, (size_t)r);
        w->master_open = 0;
    }
}

/* A changed mtime of the heartbeat file is a sign of life. */
static void watch_heartbeat(struct watch *w)
{
    if (!w->o->hb)
        return;
    struct stat st;
    if (stat(w->o->hb, &st) == 0 && (!w->hb_seen || st.st_mtim.tv_sec != w->hb_m.tv_sec ||
                                     st.st_mtim.tv_nsec != w->hb_m.tv_nsec)) {
        w->hb_m = st.st_mtim;
        w->hb_seen = 1;
        w->last = now_s();
        w->snapped = 0;
    }
}

/* The stall: snaps the job and its Python descendants with the reason, then ends the job if
 * --kill. */
static void watch_snap(struct watch *w)
{
    const struct watch_opts *o = w->o;
    w->snapped = 1;
    char reason[600];
    snprintf(reason, sizeof(reason),
             "stall: no output%s%s%s for %.0f s (crashpack watch --stall %g)",
             o->hb ? " and no heartbeat (" : "", o->hb ? o->hb : "", o->hb ? ")" : "",
             now_s() - w->last, o->stall);
    pid_t set[MAX_SNAPS_PER_STALL];
    size_t n = stalled_set(w->job, set, MAX_SNAPS_PER_STALL);
    for (size_t k = 0; k < n; k++) {
        struct snap_request rq = {.pid = set[k],
                                  .full = o->full,
                                  .config = o->config,
                                  .bundle_dir = o->outdir,
                                  .trigger = "watch",
                                  .reason = reason};
        char bundle[1200], err[600];
        cJSON *info = NULL;
        int rc = snap_pid(&rq, bundle, sizeof(bundle), &info, err, sizeof(err));
        cJSON_Delete(info);
        if (!o->quiet) {
            if (rc == 0)
                fprintf(stderr, "crashpack watch: %s: snapped pid %d -> %s\n", reason, (int)set[k],
                        bundle);
            else
                fprintf(stderr, "crashpack watch: %s: snap of pid %d failed: %s\n", reason,
                        (int)set[k], err);
        }
    }
    if (o->kill_after) {
        if (!o->quiet)
            fprintf(stderr, "crashpack watch: --kill: ending the job\n");
        kill(-w->job, SIGKILL);
        kill(w->job, SIGKILL);
    }
}

int cmd_watch(int argc, char **argv)
{
    struct watch_opts o;
    int rc = watch_parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? CP_EXIT_OK : rc;

    struct watch w = {.o = &o, .master_open = 1};
    if ((rc = watch_start(o.cmd, &w.job, &w.m)))
        return rc;

    w.last = now_s();
    if (o.hb) {
        struct stat st;
        if (stat(o.hb, &st) == 0) {
            w.hb_m = st.st_mtim;
            w.hb_seen = 1;
        }
    }
    while (!w.exited || w.master_open) {
        if (got_sig) { /* pass it on to the job */
            kill(-w.job, got_sig);
            kill(w.job, got_sig);
            got_sig = 0;
        }
        watch_forward(&w);
        if (!w.exited)
            watch_reap(&w);
        if (w.exited)
            break;
        watch_heartbeat(&w);
        if (!w.snapped && now_s() - w.last >= o.stall)
            watch_snap(&w);
    }
    close(w.m);
    if (WIFEXITED(w.status))
        return WEXITSTATUS(w.status);
    if (WIFSIGNALED(w.status))
        return 128 + WTERMSIG(w.status);
    return 1;
}
