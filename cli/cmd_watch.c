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

int cmd_watch(int argc, char **argv)
{
    double stall = 600;
    const char *hb = NULL, *outdir = NULL, *config = NULL;
    int kill_after = 0, full = 0, quiet = 0, i;
    enum { O_STALL = 256, O_HEARTBEAT, O_KILL, O_FULL };
    static const struct option longs[] = {
        {"stall", required_argument, 0, O_STALL}, {"heartbeat", required_argument, 0, O_HEARTBEAT},
        {"output", required_argument, 0, 'o'}, {"config", required_argument, 0, 'c'},
        {"kill", no_argument, 0, O_KILL}, {"full", no_argument, 0, O_FULL},
        {"quiet", no_argument, 0, 'q'}, CP_OPT_HELP, CP_OPT_END};
    /* in order: the options end at CMD, whose own options are its */
    struct cp_opts p = {.verb = "crashpack watch", .shorts = "o:c:q", .longs = longs, .in_order = 1,
                        .argc = argc, .argv = argv};
    int c;
    char *e;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case O_STALL:
            stall = strtod(optarg, &e);
            if (!*optarg || *e || !(stall > 0) || stall > 1e7)
                return cp_usage_error(&p, "--stall `%s`: expected seconds, more than 0 and at most 1e7",
                                      optarg);
            break;
        case O_HEARTBEAT: hb = optarg; break;
        case 'o': outdir = optarg; break;
        case 'c': config = optarg; break;
        case O_KILL: kill_after = 1; break;
        case O_FULL: full = 1; break;
        case 'q': quiet = 1; break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 1, -1, "CMD"))
        return CP_EXIT_USAGE;
    i = optind;
    char **cmd = argv + i;

    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) || unlockpt(m)) {
        fprintf(stderr, "crashpack watch: cannot open a pseudo-terminal: %s\n", strerror(errno));
        return CP_EXIT_PROBLEM;
    }
    const char *sname = ptsname(m);
    char slave[128];
    snprintf(slave, sizeof(slave), "%s", sname ? sname : "");
    struct winsize ws;
    int have_ws = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0;
    int gate[2];
    if (pipe2(gate, O_CLOEXEC)) {
        fprintf(stderr, "crashpack watch: pipe: %s\n", strerror(errno));
        return CP_EXIT_PROBLEM;
    }
    pid_t job = fork();
    if (job < 0) {
        fprintf(stderr, "crashpack watch: fork: %s\n", strerror(errno));
        return CP_EXIT_PROBLEM;
    }
    if (job == 0) {
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
        if (have_ws)
            ioctl(s, TIOCSWINSZ, &ws);
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
    close(gate[0]);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sig;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    close(gate[1]);

    double last = now_s();
    struct timespec hb_m = {0, 0};
    int hb_seen = 0;
    if (hb) {
        struct stat st;
        if (stat(hb, &st) == 0) {
            hb_m = st.st_mtim;
            hb_seen = 1;
        }
    }
    int snapped = 0, status = 0, exited = 0, master_open = 1;
    char buf[65536];
    while (!exited || master_open) {
        if (got_sig) {
            kill(-job, got_sig);
            kill(job, got_sig);
            got_sig = 0;
        }
        struct pollfd pf = {.fd = m, .events = POLLIN};
        int pr = master_open ? poll(&pf, 1, 200) : (usleep(50000), 0);
        if (pr > 0) {
            ssize_t r = read(m, buf, sizeof(buf));
            if (r > 0) {
                write_all(STDOUT_FILENO, buf, (size_t)r);
                last = now_s();
                snapped = 0;
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                master_open = 0; /* EIO: every holder of the terminal is gone */
            }
        }
        if (!exited) {
            pid_t w = waitpid(job, &status, WNOHANG);
            if (w == job) {
                exited = 1;
                /* whatever is still buffered in the terminal, without waiting for grandchildren */
                int fl = fcntl(m, F_GETFL);
                fcntl(m, F_SETFL, fl | O_NONBLOCK);
                ssize_t r;
                while ((r = read(m, buf, sizeof(buf))) > 0)
                    write_all(STDOUT_FILENO, buf, (size_t)r);
                master_open = 0;
            }
        }
        if (exited)
            break;
        if (hb) {
            struct stat st;
            if (stat(hb, &st) == 0 &&
                (!hb_seen || st.st_mtim.tv_sec != hb_m.tv_sec ||
                 st.st_mtim.tv_nsec != hb_m.tv_nsec)) {
                hb_m = st.st_mtim;
                hb_seen = 1;
                last = now_s();
                snapped = 0;
            }
        }
        if (!snapped && now_s() - last >= stall) {
            snapped = 1;
            char reason[600];
            snprintf(reason, sizeof(reason),
                     "stall: no output%s%s%s for %.0f s (crashpack watch --stall %g)",
                     hb ? " and no heartbeat (" : "", hb ? hb : "", hb ? ")" : "", now_s() - last,
                     stall);
            pid_t set[MAX_SNAPS_PER_STALL];
            size_t n = stalled_set(job, set, MAX_SNAPS_PER_STALL);
            for (size_t k = 0; k < n; k++) {
                struct snap_request rq = {.pid = set[k],
                                          .full = full,
                                          .config = config,
                                          .bundle_dir = outdir,
                                          .trigger = "watch",
                                          .reason = reason};
                char bundle[1200], err[600];
                cJSON *info = NULL;
                int rc = snap_pid(&rq, bundle, sizeof(bundle), &info, err, sizeof(err));
                cJSON_Delete(info);
                if (!quiet) {
                    if (rc == 0)
                        fprintf(stderr, "crashpack watch: %s: snapped pid %d -> %s\n", reason,
                                (int)set[k], bundle);
                    else
                        fprintf(stderr, "crashpack watch: %s: snap of pid %d failed: %s\n",
                                reason, (int)set[k], err);
                }
            }
            if (kill_after) {
                if (!quiet)
                    fprintf(stderr, "crashpack watch: --kill: ending the job\n");
                kill(-job, SIGKILL);
                kill(job, SIGKILL);
            }
        }
    }
    close(m);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}
