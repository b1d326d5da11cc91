/* cmd_install.c - `crashpack install`, `crashpack uninstall`, `crashpack status`.
 *
 * Each command reads what is there now (core_pattern, core_pipe_limit, the sysctl.d drop-in, the
 * install state), decides on a list of changes, prints them, and applies them unless --dry-run.
 * The install state is written before core_pattern changes and removed only after everything is
 * restored, so an interrupted run always leaves enough behind to undo it.
 */
#include "cmdopt.h"
#include "commands.h"
#include "config.h"
#include "install.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATE_PATH CP_STATE_DIR "/" CP_STATE_NAME

static const char *verb = "crashpack";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", verb);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static void show_dropin(const char *content)
{
    for (const char *l = content; *l;) {
        const char *nl = strchr(l, '\n');
        int n = nl ? (int)(nl - l) : (int)strlen(l);
        printf("    | %.*s\n", n, l);
        l += n + (nl != NULL);
    }
}

static int need_root(void)
{
    if (geteuid() == 0)
        return 0;
    return fail("must run as root (it writes /proc/sys/kernel/core_pattern); --dry-run shows the "
                "changes without root");
}

/* ---- install ---- */

static void install_usage(FILE *out)
{
    fprintf(
        out,
        "usage: crashpack install [options]\n"
        "\n"
        "Sets /proc/sys/kernel/core_pattern to pipe cores into crashpack-capture, raises\n"
        "core_pipe_limit, writes " CP_DROPIN_PATH " so it survives a reboot, creates\n"
        "the system user " CP_USER " (root's and setuid programs' crashes are enriched as it),\n"
        "and remembers the previous values in " STATE_PATH " for `crashpack uninstall`.\n"
        "Running it again is safe: the remembered values are those from before the first install.\n"
        "\n"
        "options:\n"
        "  -c, --config FILE   configuration the handler reads (validated first; default\n"
        "                      " CP_DEFAULT_CONFIG ")\n"
        "      --pipe-limit N  raise core_pipe_limit to at least N (default %u)\n"
        "      --no-pidfd      leave %%F (pidfd, kernel 6.16+) out of the pattern\n"
        "      --pidfd         put %%F in even when the kernel looks older than 6.16\n"
        "      --no-sysctl-d   do not write " CP_DROPIN_PATH "\n"
        "      --force         replace another core_pattern handler\n"
        "      --dry-run       print every change and make none\n"
        "  -h, --help          this text\n",
        CP_PIPE_LIMIT_DEFAULT);
}

/* An absolute path as named stays as is (the admin may point at a symlink on purpose); a relative
 * one is resolved, which also keeps `..` out of the 127-character pattern. */
static int absolute_path(const char *p, char *out, size_t len)
{
    if (p[0] == '/')
        return snprintf(out, len, "%s", p) < (int)len ? 0 : -1;
    char buf[PATH_MAX];
    if (!realpath(p, buf))
        return -1;
    return snprintf(out, len, "%s", buf) < (int)len ? 0 : -1;
}

struct install_opts {
    const char *config;
    unsigned pipe_limit;
    int pidfd; /* -1: by kernel version */
    int sysctl_d, force, dry_run;
};

static int install_parse(int argc, char **argv, struct install_opts *o)
{
    enum { O_PIPE = 256, O_NOPIDFD, O_PIDFD, O_NOSYSCTL, O_FORCE, O_DRY };
    static const struct option longs[] = {{"config", required_argument, 0, 'c'},
                                          {"pipe-limit", required_argument, 0, O_PIPE},
                                          {"no-pidfd", no_argument, 0, O_NOPIDFD},
                                          {"pidfd", no_argument, 0, O_PIDFD},
                                          {"no-sysctl-d", no_argument, 0, O_NOSYSCTL},
                                          {"force", no_argument, 0, O_FORCE},
                                          {"dry-run", no_argument, 0, O_DRY},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    *o = (struct install_opts){.pipe_limit = CP_PIPE_LIMIT_DEFAULT, .pidfd = -1, .sysctl_d = 1};
    struct cp_opts p = {.verb = verb, .shorts = "c:", .longs = longs, .argc = argc, .argv = argv};
    int c;
    long long n;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'c':
            o->config = optarg;
            break;
        case O_PIPE:
            if (cp_opt_num(&p, "--pipe-limit", optarg, 0, INT_MAX, &n))
                return CP_EXIT_USAGE;
            o->pipe_limit = (unsigned)n;
            break;
        case O_NOPIDFD:
            o->pidfd = 0;
            break;
        case O_PIDFD:
            o->pidfd = 1;
            break;
        case O_NOSYSCTL:
            o->sysctl_d = 0;
            break;
        case O_FORCE:
            o->force = 1;
            break;
        case O_DRY:
            o->dry_run = 1;
            break;
        case 'h':
            install_usage(stdout);
            return -1;
        default:
            return CP_EXIT_USAGE;
        }
    }
    return cp_opt_args(&p, 0, 0, "") ? CP_EXIT_USAGE : 0;
}

/* What install knows and decides, stage by stage: plan_target fills the first block, plan_read
 * the second, plan_compute the third; plan_print and plan_apply only read it. */
struct install_plan {
    /* plan_target: where cores go */
    char handler[PATH_MAX], config[PATH_MAX];
    char pattern[CP_PATTERN_BUF];
    char release[128];
    int kpidfd; /* cp_kernel_has_pidfd: 1, 0 (older than 6.16) or -1 (unknown) */
    /* plan_read: what is there now */
    char cur[CP_PATTERN_BUF];
    unsigned cur_limit;
    struct cp_install_state old; /* the install state on disk, when have */
    int have;
    char *dcur; /* the drop-in's content, when dexists */
    int dexists;
    int user_exists; /* the system user CP_USER */
    /* plan_compute: the new state and what changes */
    struct cp_install_state st;
    int cur_ours;
    char *dnew; /* the drop-in to write */
    int pchange, lchange, dchange, schange;
    int uchange; /* the user is to be created */
};

/* The handler next to this executable, the configuration (validated) and the pattern naming
 * them. */
static int plan_target(const struct install_opts *o, struct install_plan *pl)
{
    char err[1024];
    const char *bindir = cp_bindir();
    struct stat hst;
    if (!bindir || snprintf(pl->handler, sizeof(pl->handler), "%s/" CP_HANDLER_NAME, bindir) >=
                       (int)sizeof(pl->handler))
        return fail("cannot locate the crashpack executable's directory");
    if (stat(pl->handler, &hst) || !S_ISREG(hst.st_mode) || access(pl->handler, X_OK))
        return fail("handler %s is missing or not executable: every core would be lost",
                    pl->handler);

    struct cp_config cfg;
    cp_config_defaults(&cfg);
    if (o->config) {
        if (absolute_path(o->config, pl->config, sizeof(pl->config)))
            return fail("config %s: %s", o->config, strerror(errno));
        if (cp_config_load(&cfg, pl->config, 1, err, sizeof(err)))
            return fail("invalid configuration: %s", err);
    } else if (cp_config_load(&cfg, CP_DEFAULT_CONFIG, 0, err, sizeof(err))) {
        return fail("invalid configuration: %s", err);
    }

    pl->kpidfd = cp_kernel_has_pidfd(pl->release, sizeof(pl->release));
    int pidfd = o->pidfd >= 0 ? o->pidfd : pl->kpidfd != 0;
    if (cp_pattern_build(pl->pattern, sizeof(pl->pattern), pl->handler,
                         o->config ? pl->config : NULL, pidfd, err, sizeof(err)))
        return fail("%s", err);
    return 0;
}

/* core_pattern, core_pipe_limit, the install state and the drop-in as they are now. */
static int plan_read(const struct install_opts *o, struct install_plan *pl)
{
    char err[1024];
    if (cp_sysctl_read(CP_SYSCTL_CORE_PATTERN, pl->cur, sizeof(pl->cur), err, sizeof(err)) ||
        cp_sysctl_read_uint(CP_SYSCTL_PIPE_LIMIT, &pl->cur_limit, err, sizeof(err)))
        return fail("%s", err);

    int lrc = cp_state_load(CP_STATE_DIR, &pl->old, err, sizeof(err));
    if (lrc < 0 && !o->force)
        return fail("%s\n(--force installs anyway and replaces it)", err);
    pl->have = lrc == 0;
    int dexists = cp_file_read_small(CP_DROPIN_PATH, CP_DROPIN_MAX, &pl->dcur, err, sizeof(err));
    if (dexists < 0)
        return fail("%s", err);
    pl->dexists = dexists == 0;
    if ((pl->user_exists = cp_user_exists(CP_USER)) < 0)
        return fail("cannot read /etc/passwd");
    return 0;
}

/* Whether to go on at all (another handler, or ours with nothing to restore, needs --force),
 * then the state to write and which of pattern, limit, drop-in and state change. */
static int plan_compute(const struct install_opts *o, struct install_plan *pl)
{
    const struct cp_install_state *old = &pl->old;
    struct cp_install_state *st = &pl->st;
    int have = pl->have;

    pl->cur_ours = cp_pattern_is_crashpack(pl->cur);
    if (!pl->cur_ours && cp_pattern_is_handler(pl->cur) && !o->force)
        return fail("core_pattern already hands cores to another program: `%s`\n"
                    "refusing to replace it; --force replaces it (and uninstall restores it)",
                    pl->cur);
    if (pl->cur_ours && !have && !o->force)
        return fail("core_pattern already holds a crashpack handler (`%s`) but there is no %s,\n"
                    "so the value to restore is unknown; --force installs anyway and uninstall "
                    "will then restore the kernel default `core`",
                    pl->cur, STATE_PATH);

    int update = have && pl->cur_ours;
    if (update) {
        *st = *old;
        st->dropin_prev = old->dropin_prev ? strdup(old->dropin_prev) : NULL;
    } else {
        /* our own pattern is never worth restoring */
        snprintf(st->prev_pattern, sizeof(st->prev_pattern), "%s", pl->cur_ours ? "core" : pl->cur);
        st->prev_pipe_limit =
            have && pl->cur_limit == old->pipe_limit ? old->prev_pipe_limit : pl->cur_limit;
        st->installed_at = (long long)time(NULL);
        if (have && old->dropin_written && pl->dexists && cp_dropin_is_ours(pl->dcur)) {
            st->dropin_written = 1;
            st->dropin_existed = old->dropin_existed;
            st->dropin_prev = old->dropin_prev ? strdup(old->dropin_prev) : NULL;
        }
        st->user_created = have && old->user_created;
        st->group_created = have && old->group_created;
    }
    if (!pl->user_exists) { /* made now: uninstall removes it (and the group, if made too) */
        pl->uchange = st->user_created = 1;
        st->group_created = cp_group_exists(CP_USER) == 0;
    }
    snprintf(st->pattern, sizeof(st->pattern), "%s", pl->pattern);
    st->pipe_limit = st->prev_pipe_limit > o->pipe_limit ? st->prev_pipe_limit : o->pipe_limit;

    pl->dnew = cp_dropin_render(pl->pattern, st->pipe_limit);
    if (!pl->dnew)
        return fail("out of memory");
    if (o->sysctl_d) {
        if (pl->dexists && !cp_dropin_is_ours(pl->dcur)) {
            /* someone else's file under our name: keep it to put back on uninstall */
            free(st->dropin_prev);
            st->dropin_existed = 1;
            st->dropin_prev = strdup(pl->dcur);
        }
        st->dropin_written = 1;
        pl->dchange = !pl->dexists || strcmp(pl->dcur, pl->dnew);
    }

    pl->pchange = strcmp(pl->cur, pl->pattern) != 0;
    pl->lchange = pl->cur_limit != st->pipe_limit;
    pl->schange = !have || !cp_state_equal(st, old);
    if (st->dropin_existed && !st->dropin_prev)
        return fail("out of memory");
    return 0;
}

/* Every change, as "would ..." under --dry-run, and the notes that explain them. */
static void plan_print(const struct install_opts *o, const struct install_plan *pl)
{
    const struct cp_install_state *st = &pl->st;
    const char *w = o->dry_run ? "would " : "";
    if (o->dry_run)
        printf("dry run: nothing is changed\n");
    if (o->pidfd < 0 && pl->kpidfd == 0)
        printf("note: kernel %s predates 6.16 and has no %%F; installing without it (--pidfd puts "
               "it in)\n",
               pl->release);
    if (pl->cur_ours && !pl->have)
        printf("note: replacing a crashpack pattern with no install state; uninstall will "
               "restore `core`\n");
    else if (pl->have && !pl->cur_ours)
        printf("note: replacing stale install state (core_pattern had been changed to `%s`)\n",
               pl->cur);
    if (pl->pchange)
        printf("%sset core_pattern: `%s` -> `%s`\n", w, pl->cur, pl->pattern);
    else
        printf("core_pattern unchanged: `%s`\n", pl->cur);
    if (pl->lchange)
        printf("%sset core_pipe_limit: %u -> %u\n", w, pl->cur_limit, st->pipe_limit);
    else
        printf("core_pipe_limit unchanged: %u\n", pl->cur_limit);
    if (pl->dchange) {
        printf("%s%s %s:\n", w, pl->dexists ? "replace" : "create", CP_DROPIN_PATH);
        if (pl->dexists && !cp_dropin_is_ours(pl->dcur))
            printf("  (its current content is kept in the install state for uninstall)\n");
        show_dropin(pl->dnew);
    } else if (o->sysctl_d) {
        printf("%s unchanged\n", CP_DROPIN_PATH);
    } else if (st->dropin_written && pl->dexists && strcmp(pl->dcur, pl->dnew)) {
        printf("note: --no-sysctl-d leaves %s with the earlier pattern\n", CP_DROPIN_PATH);
    }
    if (pl->uchange)
        printf("%screate the system user %s%s (no home, no login shell): root's and setuid "
               "programs' crashes are enriched as it\n",
               w, CP_USER, st->group_created ? " and its group" : "");
    if (pl->schange)
        printf("%s%s %s: previous core_pattern `%s`, previous core_pipe_limit %u\n", w,
               pl->have ? "update" : "write", STATE_PATH, st->prev_pattern, st->prev_pipe_limit);
}

/* The system user, before anything else changes. A user that cannot be made is a warning, not a
 * failure: the handler works without it (it does not enrich root's crashes). Returns 1 when it
 * was made (so that a failure later removes it again). */
static int make_user(struct install_plan *pl)
{
    char err[1024];
    if (!pl->uchange)
        return 0;
    if (cp_user_create(&pl->st.group_created, err, sizeof(err)) == 0)
        return 1;
    fprintf(stderr,
            "%s: warning: cannot create the system user %s: %s\n"
            "  root's and setuid programs' crashes will not be enriched (no stacks.json)\n",
            verb, CP_USER, err);
    pl->st.user_created = pl->st.group_created = 0;
    pl->schange = !pl->have || !cp_state_equal(&pl->st, &pl->old);
    return 0;
}

/* The changes, in order; on a failure, undo what was done and say that nothing changed. */
static int plan_apply(struct install_plan *pl)
{
    char err[1024], e2[512];
    int made = make_user(pl);
    /* state first: if we die half-way, uninstall still knows what to restore */
    if (pl->schange && cp_state_save(CP_STATE_DIR, &pl->st, err, sizeof(err))) {
        if (made)
            cp_user_remove(pl->st.group_created, e2, sizeof(e2));
        return fail("%s", err);
    }
    int step = 0;
    if (pl->pchange &&
        cp_core_pattern_set(CP_SYSCTL_CORE_PATTERN, pl->pattern, pl->cur, err, sizeof(err)))
        step = 1;
    else if (pl->lchange &&
             cp_sysctl_write_uint(CP_SYSCTL_PIPE_LIMIT, pl->st.pipe_limit, err, sizeof(err)))
        step = 2;
    else if (pl->dchange && cp_file_write_atomic(CP_DROPIN_PATH, pl->dnew, strlen(pl->dnew), 0644,
                                                 err, sizeof(err)))
        step = 3;
    if (step) {
        /* undo what was done, newest first */
        if (step > 2 && pl->lchange)
            cp_sysctl_write_uint(CP_SYSCTL_PIPE_LIMIT, pl->cur_limit, e2, sizeof(e2));
        if (step > 1 && pl->pchange)
            cp_sysctl_write(CP_SYSCTL_CORE_PATTERN, pl->cur, e2, sizeof(e2));
        if (pl->schange && (pl->have ? cp_state_save(CP_STATE_DIR, &pl->old, e2, sizeof(e2))
                                     : cp_state_remove(CP_STATE_DIR, e2, sizeof(e2))))
            fprintf(stderr, "%s: also: %s\n", verb, e2);
        if (made && cp_user_remove(pl->st.group_created, e2, sizeof(e2)))
            fprintf(stderr, "%s: also: %s\n", verb, e2);
        return fail("%s\nnothing was changed", err);
    }
    printf("crashpack installed: cores now go to %s\n", pl->handler);
    return 0;
}

static void plan_free(struct install_plan *pl)
{
    free(pl->dcur);
    free(pl->dnew);
    cp_install_state_free(&pl->st);
    if (pl->have)
        cp_install_state_free(&pl->old);
}

int cmd_install(int argc, char **argv)
{
    struct install_opts o;
    verb = "crashpack install";
    int rc = install_parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;

    struct install_plan pl = {0};
    if ((rc = plan_target(&o, &pl)) || (rc = plan_read(&o, &pl)) || (rc = plan_compute(&o, &pl)))
        goto out;
    if (!pl.pchange && !pl.lchange && !pl.dchange && !pl.schange && !pl.uchange) {
        printf("crashpack is already installed: core_pattern `%s`, core_pipe_limit %u; nothing to "
               "change\n",
               pl.cur, pl.cur_limit);
        goto out;
    }
    if (!o.dry_run && need_root()) {
        rc = 1;
        goto out;
    }
    plan_print(&o, &pl);
    if (!o.dry_run)
        rc = plan_apply(&pl);
out:
    plan_free(&pl);
    return rc;
}

/* ---- uninstall ---- */

static void uninstall_usage(FILE *out)
{
    fprintf(
        out,
        "usage: crashpack uninstall [options]\n"
        "\n"
        "Restores core_pattern and core_pipe_limit byte-exactly to what they were before\n"
        "`crashpack install`, removes " CP_DROPIN_PATH " if crashpack wrote it, the\n"
        "system user " CP_USER " if install created it, and " STATE_PATH ".\n"
        "\n"
        "options:\n"
        "      --force         restore the previous core_pattern even though something else\n"
        "                      has replaced crashpack's since\n"
        "      --keep-pattern  leave core_pattern and core_pipe_limit as they are now (someone\n"
        "                      else's handler) and only remove crashpack's state and drop-in\n"
        "      --dry-run       print every change and make none\n"
        "  -h, --help          this text\n"
        "\n"
        "exit status: 0 restored, 1 not restored, 3 not installed\n");
}

/* What uninstall finds and decides. */
struct uninstall {
    int force, keep, dry;
    struct cp_install_state st; /* the install state */
    char cur[CP_PATTERN_BUF];   /* core_pattern now */
    unsigned cur_limit;
    char *dcur; /* the drop-in's content, when dexists */
    int dexists, ours;
    int pchange, lchange, uremove;
    enum { D_NONE, D_REMOVE, D_RESTORE } daction;
};

/* Options into u. -1 to go on, else the exit status. */
static int uninstall_parse(int argc, char **argv, struct uninstall *u)
{
    enum { O_FORCE = 256, O_KEEP, O_DRY };
    static const struct option longs[] = {{"force", no_argument, 0, O_FORCE},
                                          {"keep-pattern", no_argument, 0, O_KEEP},
                                          {"dry-run", no_argument, 0, O_DRY},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    struct cp_opts p = {.verb = verb, .longs = longs, .argc = argc, .argv = argv};
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case O_FORCE:
            u->force = 1;
            break;
        case O_KEEP:
            u->keep = 1;
            break;
        case O_DRY:
            u->dry = 1;
            break;
        case 'h':
            uninstall_usage(stdout);
            return 0;
        default:
            return CP_EXIT_USAGE;
        }
    }
    return cp_opt_args(&p, 0, 0, "") ? CP_EXIT_USAGE : -1;
}

/* What is there now (the state loaded before) and what changes: 0, or 1 once the refusal is
 * printed. */
static int uninstall_decide(struct uninstall *u)
{
    char err[1024];
    if (cp_sysctl_read(CP_SYSCTL_CORE_PATTERN, u->cur, sizeof(u->cur), err, sizeof(err)) ||
        cp_sysctl_read_uint(CP_SYSCTL_PIPE_LIMIT, &u->cur_limit, err, sizeof(err)) ||
        (u->dexists =
             cp_file_read_small(CP_DROPIN_PATH, CP_DROPIN_MAX, &u->dcur, err, sizeof(err))) < 0)
        return fail("%s", err);
    u->dexists = u->dexists == 0;
    u->ours = cp_pattern_is_crashpack(u->cur);
    if (u->keep && u->ours)
        return fail(
            "--keep-pattern: core_pattern still holds crashpack's handler; leaving it would "
            "forget the value to restore");
    if (!u->ours && !u->force && !u->keep)
        return fail("core_pattern was changed behind crashpack's back: now `%s`\n"
                    "not restoring `%s` over it: --force restores it anyway, --keep-pattern keeps "
                    "the current value and only removes crashpack's state",
                    u->cur, u->st.prev_pattern);
    u->pchange = !u->keep && strcmp(u->cur, u->st.prev_pattern);
    u->lchange = !u->keep && u->cur_limit != u->st.prev_pipe_limit;
    u->daction = D_NONE;
    if (u->st.dropin_written) {
        if (u->dexists && !cp_dropin_is_ours(u->dcur))
            printf("note: %s is no longer crashpack's; leaving it\n", CP_DROPIN_PATH);
        else if (u->st.dropin_existed)
            u->daction = D_RESTORE;
        else if (u->dexists)
            u->daction = D_REMOVE;
    }
    u->uremove = u->st.user_created && cp_user_exists(CP_USER) > 0;
    return 0;
}

static void uninstall_print(const struct uninstall *u)
{
    const char *w = u->dry ? "would " : "";
    if (!u->ours)
        printf("note: core_pattern was changed behind crashpack's back: now `%s`\n", u->cur);
    if (u->pchange)
        printf("%srestore core_pattern: `%s` -> `%s`\n", w, u->cur, u->st.prev_pattern);
    else
        printf("core_pattern %s: `%s`\n", u->keep ? "kept" : "unchanged", u->cur);
    if (u->lchange)
        printf("%srestore core_pipe_limit: %u -> %u\n", w, u->cur_limit, u->st.prev_pipe_limit);
    else
        printf("core_pipe_limit %s: %u\n", u->keep ? "kept" : "unchanged", u->cur_limit);
    if (u->daction == D_REMOVE)
        printf("%sremove %s\n", w, CP_DROPIN_PATH);
    else if (u->daction == D_RESTORE) {
        printf("%srestore %s to what was there before:\n", w, CP_DROPIN_PATH);
        show_dropin(u->st.dropin_prev);
    }
    if (u->uremove)
        printf("%sremove the system user %s%s (crashpack install created it)\n", w, CP_USER,
               u->st.group_created ? " and its group" : "");
    printf("%sremove %s\n", w, STATE_PATH);
}

/* The changes; on a failure, back to the installed state. 0 restored, 1 not. */
static int uninstall_apply(const struct uninstall *u)
{
    char err[1024], e2[512];
    int step = 0;
    if (u->pchange &&
        cp_core_pattern_set(CP_SYSCTL_CORE_PATTERN, u->st.prev_pattern, u->cur, err, sizeof(err)))
        step = 1;
    else if (u->lchange &&
             cp_sysctl_write_uint(CP_SYSCTL_PIPE_LIMIT, u->st.prev_pipe_limit, err, sizeof(err)))
        step = 2;
    else if (u->daction == D_REMOVE && cp_file_remove(CP_DROPIN_PATH, err, sizeof(err)))
        step = 3;
    else if (u->daction == D_RESTORE &&
             cp_file_write_atomic(CP_DROPIN_PATH, u->st.dropin_prev, strlen(u->st.dropin_prev),
                                  0644, err, sizeof(err)))
        step = 3;
    if (step) {
        /* back to the installed state, so a second uninstall starts from a known place */
        if (step > 2 && u->lchange)
            cp_sysctl_write_uint(CP_SYSCTL_PIPE_LIMIT, u->cur_limit, e2, sizeof(e2));
        if (step > 1 && u->pchange)
            cp_sysctl_write(CP_SYSCTL_CORE_PATTERN, u->cur, e2, sizeof(e2));
        return fail("%s\nnothing was restored; %s is kept", err, STATE_PATH);
    }
    /* the rest is restored: a user that cannot go (an enrichment still running as it) is said */
    if (u->uremove && cp_user_remove(u->st.group_created, err, sizeof(err)))
        fprintf(stderr, "%s: warning: %s\n  remove it by hand: userdel %s\n", verb, err, CP_USER);
    if (cp_state_remove(CP_STATE_DIR, err, sizeof(err)))
        return fail("restored, but %s; remove it by hand", err);
    printf("crashpack uninstalled\n");
    return 0;
}

int cmd_uninstall(int argc, char **argv)
{
    struct uninstall u;
    memset(&u, 0, sizeof(u));
    verb = "crashpack uninstall";
    int rc = uninstall_parse(argc, argv, &u);
    if (rc >= 0)
        return rc;
    char err[1024];
    rc = cp_state_load(CP_STATE_DIR, &u.st, err, sizeof(err));
    if (rc > 0) {
        fail("crashpack is not installed (no %s): nothing to restore", STATE_PATH);
        return CP_EXIT_NOTFOUND;
    }
    if (rc < 0)
        return fail("%s", err);
    rc = uninstall_decide(&u);
    if (!rc && u.dry)
        printf("dry run: nothing is changed\n");
    else if (!rc)
        rc = need_root();
    if (!rc) {
        uninstall_print(&u);
        if (!u.dry)
            rc = uninstall_apply(&u);
    }
    free(u.dcur);
    cp_install_state_free(&u.st);
    return rc;
}

/* ---- status ---- */

static void status_usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack status [--json]\n"
            "\n"
            "Shows whether crashpack-capture is installed in core_pattern, and whether something\n"
            "else has taken core_pattern over since `crashpack install`.\n"
            "\n"
            "options:\n"
            "      --json   one JSON object instead of text\n"
            "  -h, --help   this text\n"
            "\n"
            "exit status: 0 installed and intact, 1 core_pattern taken over or cannot tell (an\n"
            "             error), 3 not installed\n");
}

struct status {
    int installed, intact, ours, state_readable;
    struct cp_install_state st;
    char cur[CP_PATTERN_BUF];
    unsigned limit;
    int dropin_present, dropin_ours;
    int pidfd_in_pattern, kernel_pidfd;
    char release[128];
    int user; /* the system user CP_USER: 1 present, 0 absent, -1 cannot tell */
};

static int status_json(const struct status *s, int code)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return CP_EXIT_PROBLEM;
    const char *state = code == CP_EXIT_OK ? "intact" : code == CP_EXIT_NOTFOUND ? "not-installed" : "taken-over";
    cJSON_AddStringToObject(o, "format", "crashpack-status/1");
    cJSON_AddStringToObject(o, "state", state);
    cJSON_AddBoolToObject(o, "installed", s->installed);
    cJSON_AddBoolToObject(o, "intact", s->intact);
    cJSON_AddStringToObject(o, "core_pattern", s->cur);
    cJSON_AddBoolToObject(o, "core_pattern_is_crashpack", s->ours);
    cJSON_AddNumberToObject(o, "core_pipe_limit", s->limit);
    if (s->installed && s->state_readable) {
        cJSON_AddStringToObject(o, "installed_core_pattern", s->st.pattern);
        cJSON_AddNumberToObject(o, "installed_core_pipe_limit", s->st.pipe_limit);
        cJSON_AddStringToObject(o, "previous_core_pattern", s->st.prev_pattern);
        cJSON_AddNumberToObject(o, "previous_core_pipe_limit", s->st.prev_pipe_limit);
        cJSON_AddNumberToObject(o, "installed_at", (double)s->st.installed_at);
    }
    cJSON_AddStringToObject(o, "state_file", STATE_PATH);
    cJSON *d = cJSON_AddObjectToObject(o, "dropin");
    if (d) {
        cJSON_AddStringToObject(d, "path", CP_DROPIN_PATH);
        cJSON_AddBoolToObject(d, "present", s->dropin_present);
        cJSON_AddBoolToObject(d, "written_by_crashpack", s->dropin_ours);
    }
    cJSON_AddBoolToObject(o, "pidfd_in_pattern", s->pidfd_in_pattern);
    cJSON_AddStringToObject(o, "kernel", s->release);
    if (s->kernel_pidfd < 0)
        cJSON_AddNullToObject(o, "kernel_has_pidfd");
    else
        cJSON_AddBoolToObject(o, "kernel_has_pidfd", s->kernel_pidfd);
    if (s->user < 0)
        cJSON_AddNullToObject(o, "enrich_user");
    else
        cJSON_AddBoolToObject(o, "enrich_user", s->user);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text)
        return CP_EXIT_PROBLEM;
    printf("%s\n", text);
    free(text);
    return code;
}

static int status_text(const struct status *s, int code)
{
    if (!s->installed) {
        printf("crashpack is not installed (no %s)\n", STATE_PATH);
        if (s->ours)
            printf("note: core_pattern holds a crashpack handler anyway (set by hand?)\n");
    } else if (!s->state_readable) {
        printf("crashpack is installed (run as root to compare with %s)\n", STATE_PATH);
    } else {
        char when[64] = "?";
        time_t t = (time_t)s->st.installed_at;
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", &tm);
        printf("crashpack is installed (since %s)\n", when);
        if (!s->intact) {
            printf("core_pattern was changed behind crashpack's back: now `%s`\n", s->cur);
            printf("  crashpack installed: `%s`\n", s->st.pattern);
        }
    }
    printf("core_pattern: `%s`\n", s->cur);
    printf("  %s\n", s->ours
                         ? (s->intact ? "crashpack's handler, as installed" : "a crashpack handler")
                     : cp_pattern_is_handler(s->cur) ? "another program's handler"
                                                     : "a plain core file name (no handler)");
    if (s->installed && s->state_readable)
        printf("  uninstall restores: `%s`\n", s->st.prev_pattern);
    printf("core_pipe_limit: %u", s->limit);
    if (s->installed && s->state_readable)
        printf(" (crashpack set %u; uninstall restores %u)", s->st.pipe_limit,
               s->st.prev_pipe_limit);
    printf("\n");
    printf("sysctl drop-in %s: %s\n", CP_DROPIN_PATH,
           !s->dropin_present ? "absent"
           : s->dropin_ours   ? "present, written by crashpack"
                              : "present, not written by crashpack");
    printf("pidfd (%%F): %s the pattern; kernel %s %s\n", s->pidfd_in_pattern ? "in" : "not in",
           s->release,
           s->kernel_pidfd > 0    ? "has it (6.16 or later)"
           : s->kernel_pidfd == 0 ? "predates 6.16 (no %F)"
                                  : "version unknown");
    printf("system user %s: %s\n", CP_USER,
           s->user > 0    ? "present (root's and setuid programs' crashes are enriched as it)"
           : s->user == 0 ? "absent: root's and setuid programs' crashes are not enriched "
                            "(crashpack install creates it)"
                          : "cannot tell (/etc/passwd unreadable)");
    return code;
}

int cmd_status(int argc, char **argv)
{
    static const struct option longs[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int json = 0, c, rc;
    char err[1024];
    verb = "crashpack status";
    struct cp_opts p = {.verb = verb, .longs = longs, .argc = argc, .argv = argv};
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'h':
            status_usage(stdout);
            return 0;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 0, 0, ""))
        return CP_EXIT_USAGE;

    struct status s = {0};
    if (cp_sysctl_read(CP_SYSCTL_CORE_PATTERN, s.cur, sizeof(s.cur), err, sizeof(err)) ||
        cp_sysctl_read_uint(CP_SYSCTL_PIPE_LIMIT, &s.limit, err, sizeof(err))) {
        fail("%s", err);
        return CP_EXIT_PROBLEM;
    }
    rc = cp_state_load(CP_STATE_DIR, &s.st, err, sizeof(err));
    if (rc < 0 && geteuid() != 0 && access(STATE_PATH, F_OK) == 0 && access(STATE_PATH, R_OK)) {
        s.installed = 1; /* the state is root's (0600): judge by the pattern alone */
    } else if (rc < 0) {
        fail("%s", err);
        return CP_EXIT_PROBLEM;
    } else {
        s.installed = rc == 0;
        s.state_readable = 1;
    }
    s.ours = cp_pattern_is_crashpack(s.cur);
    s.intact = s.installed && (s.state_readable ? !strcmp(s.cur, s.st.pattern) : s.ours);

    char *d = NULL;
    rc = cp_file_read_small(CP_DROPIN_PATH, CP_DROPIN_MAX, &d, err, sizeof(err));
    s.dropin_present = rc == 0 || (rc < 0 && access(CP_DROPIN_PATH, F_OK) == 0);
    s.dropin_ours = rc == 0 && cp_dropin_is_ours(d);
    free(d);
    s.pidfd_in_pattern = cp_pattern_has_pidfd(s.cur);
    s.kernel_pidfd = cp_kernel_has_pidfd(s.release, sizeof(s.release));
    s.user = cp_user_exists(CP_USER);

    int code = !s.installed ? CP_EXIT_NOTFOUND : s.intact ? CP_EXIT_OK : CP_EXIT_PROBLEM;
    rc = json ? status_json(&s, code) : status_text(&s, code);
    cp_install_state_free(&s.st);
    return rc;
}
