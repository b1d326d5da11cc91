/* resolution.c - a crash group's resolution (`crashpack db resolve`; the report's and
 * crashpack-db-show/1's `resolution` object) as text and as Markdown: shown before everything
 * else, since the team already knows what this crash is. Its strings were typed by a person or
 * imported from a file: text goes through cp_text_put, Markdown through render_md. */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <string.h>

/* "2026-12-03 17:01:00Z by alice (uid 1000)" into out. */
static void resolved_by(FILE *out, const cJSON *res, int md)
{
    char t[32];
    render_time(cp_jnum_or(res, "resolved", 0), "%Y-%m-%d %H:%M:%SZ", "?", t, sizeof(t));
    fputs(t, out);
    const cJSON *by = cp_jkey(res, "resolved_by");
    const char *user = cp_jstr(by, "user");
    if (user || cJSON_IsNumber(cp_jkey(by, "uid"))) {
        fputs(" by ", out);
        if (md)
            render_md(out, user ? user : "uid");
        else
            cp_text_put(out, user ? user : "uid");
        if (cJSON_IsNumber(cp_jkey(by, "uid")))
            fprintf(out, " (uid %.0f)", cp_jnum_or(by, "uid", 0));
    }
    if (cp_jstr(res, "origin")) {
        fputs(", ", out);
        if (md)
            render_md(out, cp_jstr(res, "origin"));
        else
            cp_text_put(out, cp_jstr(res, "origin"));
    }
}

static int regressed(const cJSON *res)
{
    const char *s = cp_jstr(res, "status");
    return s && !strcmp(s, "regressed");
}

void render_text_resolution(FILE *out, const cJSON *res)
{
    if (!cJSON_IsObject(res))
        return;
    render_label(out, regressed(res) ? "REGRESSED" : "RESOLVED");
    cp_text_put(out, cp_jstr_or(res, "cause", "-"));
    fputc('\n', out);
    if (cp_jstr(res, "ticket")) {
        render_label(out, "ticket");
        cp_text_put(out, cp_jstr(res, "ticket"));
        fputc('\n', out);
    }
    if (cp_jstr(res, "category")) {
        render_label(out, "category");
        cp_text_put(out, cp_jstr(res, "category"));
        fputc('\n', out);
    }
    render_label(out, "resolved");
    resolved_by(out, res, 0);
    if (cp_jstr(res, "match")) {
        fputs("; matched by ", out);
        cp_text_put(out, cp_jstr(res, "match"));
    }
    fputc('\n', out);
    if (regressed(res))
        fputs("          this group crashed again after it was resolved: the fix did not hold, or"
              " did not reach this job\n",
              out);
    fputc('\n', out);
}

void render_md_resolution(FILE *o, const cJSON *res)
{
    if (!cJSON_IsObject(res))
        return;
    fputs(regressed(res) ? "> **Regressed** (resolved before): " : "> **Resolved**: ", o);
    render_md(o, cp_jstr_or(res, "cause", "-"));
    fputs("  \n", o);
    if (cp_jstr(res, "ticket")) {
        fputs("> Ticket: ", o);
        render_md(o, cp_jstr(res, "ticket"));
        fputs("  \n", o);
    }
    if (cp_jstr(res, "category")) {
        fputs("> Category: ", o);
        render_md(o, cp_jstr(res, "category"));
        fputs("  \n", o);
    }
    fputs("> Resolved ", o);
    resolved_by(o, res, 1);
    fputs(regressed(res) ? "; this group crashed again after it was resolved.\n\n" : ".\n\n", o);
}
