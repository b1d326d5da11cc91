/* cmd_report.c - `crashpack report BUNDLE`: paste-ready Markdown for a bug ticket, from the same
 * report `crashpack analyze --json` prints, built in-process by the report library (report.h) and
 * rendered by render/ (render_markdown), with how often the knowledge base has seen its
 * fingerprint. `--slim OUT` also writes a small bundle to attach (slim.c). */
#include "jpath.h"
#include "query.h"
#include "cmdopt.h"
#include "commands.h"
#include "kbarg.h"
#include "outfile.h"
#include "render.h"
#include "report.h"
#include "utf8.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int slim_write(const char *bundle, const char *out, char *err, size_t errlen, char *summary,
               size_t sumlen);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack report BUNDLE [--db PATH] [-o FILE] [--slim OUT]\n"
            "       crashpack report --from-json REPORT.json [--db PATH] [-o FILE]\n"
            "\n"
            "Prints ticket-ready Markdown: summary, diagnoses with evidence and actions, the crashed\n"
            "thread (and its Python frames), GPU state, checkpoint advice, the crash signature and\n"
            "how many times the knowledge base (--db, default as in `crashpack db`) has seen it.\n"
            "\n"
            "  -o, --output F   write the Markdown to FILE instead of stdout\n"
            "  --slim OUT       also write a small bundle to attach: manifest, evidence members,\n"
            "                   stacks.json, and a slim core (ELF headers, notes, each thread's stack,\n"
            "                   the first page of each mapped file); the environment stays redacted\n"
            "  --from-json F    render a saved report (crashpack analyze --json) instead of a bundle\n"
            "  -h, --help       this text\n"
            "\n"
            "Exit status: 0 done, 1 partial, 2 usage error, 3 no such file.\n");
}

static cJSON *read_report_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 >= cap) {
            char *nb = cap < (512u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    cJSON *j = buf ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* The end of the output: -o's temporary renamed over the path (of), else stdout flushed. 1 when
 * it could not be written (the temporary is removed then). */
static int output_done(struct cp_outfile *of, FILE *o)
{
    int bad = ferror(o);
    if (of && bad)
        cp_outfile_abort(of);
    else if (of)
        bad |= cp_outfile_commit(of) != 0;
    else
        bad |= fflush(o) != 0;
    return bad;
}

int cmd_report(int argc, char **argv)
{
    const char *bundle = NULL, *db = NULL, *out = NULL, *slim = NULL, *from = NULL;
    enum { O_DB = 256, O_SLIM, O_FROM };
    static const struct option longs[] = {
        {"db", required_argument, 0, O_DB}, {"output", required_argument, 0, 'o'},
        {"slim", required_argument, 0, O_SLIM}, {"from-json", required_argument, 0, O_FROM},
        CP_OPT_HELP, CP_OPT_END};
    struct cp_opts p = {.verb = "crashpack report", .shorts = "o:", .longs = longs, .argc = argc, .argv = argv};
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case O_DB: db = optarg; break;
        case 'o': out = optarg; break;
        case O_SLIM: slim = optarg; break;
        case O_FROM: from = optarg; break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, from ? 0 : 1, from ? 0 : 1, "BUNDLE (or --from-json REPORT.json)"))
        return CP_EXIT_USAGE;
    bundle = optind < argc ? argv[optind] : NULL;
    if (slim && !bundle)
        return cp_usage_error(&p, "--slim needs a BUNDLE, not --from-json");
    if (access(bundle ? bundle : from, F_OK) && errno == ENOENT) {
        fprintf(stderr, "crashpack report: no such file: %s\n", bundle ? bundle : from);
        return CP_EXIT_NOTFOUND;
    }
    char err[1024];
    struct kb *kb = cp_kb_input(db);
    int partial = 0;
    cJSON *r;
    if (from) {
        r = read_report_file(from);
        if (!r) {
            fprintf(stderr, "crashpack report: %s: not a JSON report\n", from);
            kb_close(kb);
            return CP_EXIT_PROBLEM;
        }
        if (!cp_jpath(r, "diagnosis_info") && report_rediagnose(r, kb, err, sizeof(err)) < 0)
            fprintf(stderr, "crashpack report: diagnosis: %s\n", err);
    } else {
        struct report_opts ro = {.kb = kb};
        struct report_status st;
        r = report_build(bundle, &ro, &st);
        if (!r) {
            fputs("crashpack report: ", stderr);
            cp_text_put(stderr, st.error);
            fputc('\n', stderr);
            kb_close(kb);
            return CP_EXIT_PROBLEM;
        }
        render_notes(stderr, "crashpack report", r, st.diagnose_error, st.native_failed, 1);
        partial = st.partial;
    }
    struct cp_outfile of; /* -o: a temporary beside it, renamed when complete (outfile.h) */
    if (out && cp_outfile_open(&of, out, 0666)) {
        fprintf(stderr, "crashpack report: cannot write %s: %s\n", out, strerror(errno));
        cJSON_Delete(r);
        kb_close(kb);
        return CP_EXIT_PROBLEM;
    }
    FILE *o = out ? of.f : stdout;
    const char *fp = cp_jstr_ne_at(r, "fingerprint");
    cJSON *seen = fp && kb ? kb_fingerprint_seen(kb, fp) : NULL;
    kb_close(kb);
    struct render_md_extra x = {.seen = seen, .partial = partial};
    render_markdown(o, r, &x);
    cJSON_Delete(seen);
    int rc = 0;
    if (slim) {
        char summary[512] = "";
        if (slim_write(bundle, slim, err, sizeof(err), summary, sizeof(summary))) {
            fprintf(stderr, "crashpack report: --slim: %s\n", err);
            rc = 1;
        } else {
            render_markdown_attachment(o, summary);
        }
    }
    int bad = output_done(out ? &of : NULL, o);
    cJSON_Delete(r);
    if (bad) {
        fprintf(stderr, "crashpack report: cannot write the output\n");
        return CP_EXIT_PROBLEM;
    }
    return rc ? rc : partial;
}
