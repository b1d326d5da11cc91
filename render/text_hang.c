/* text_hang.c - the hang analysis in the text report: the deadlocks proved (at the top, in the
 * answer: render_text_deadlocks), then each thread's wait state (render_text_hang). */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <string.h>

/* s (a thread's name, set by the process) in a column of width bytes and a space, through the
 * terminal policy: cut at the width, padded to it. */
static void column(FILE *out, const char *s, size_t width)
{
    size_t l = strlen(s);
    cp_text_putn(out, s, width);
    fprintf(out, "%*s ", (int)(l < width ? width - l : 0), "");
}

void render_text_deadlocks(FILE *out, const cJSON *r)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, cp_jpath(r, "hang.deadlocks"))
    {
        render_label(out, "deadlock");
        fputs("DEADLOCK: ", out);
        cp_text_put(out, cp_jstr(d, "summary"));
        fputc('\n', out);
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(d, "threads"))
        {
            double tid = 0;
            cp_jnum(t, "tid", &tid);
            render_label(out, "");
            fprintf(out, "thread %d blocked in ", (int)tid);
            cp_text_put(out, cp_jstr(t, "blocked_in") ? cp_jstr(t, "blocked_in") : "?");
            fputc('\n', out);
        }
    }
}

void render_text_hang(FILE *out, const cJSON *r)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "hang");
    if (!h)
        return;
    int snap = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "snap"));
    const cJSON *dl = cJSON_GetObjectItemCaseSensitive(h, "deadlocks");
    if (!snap && cJSON_GetArraySize(dl) == 0)
        return;
    fprintf(out, "\nhang (%s", snap ? "live capture" : "from the core");
    if (cp_jstr(h, "reason")) {
        fprintf(out, ", reason: ");
        cp_text_put(out, cp_jstr(h, "reason"));
    }
    fprintf(out, ")\n");
    if (cJSON_GetArraySize(dl) > 0)
        fprintf(out, "  (the deadlock%s: at the top)\n", cJSON_GetArraySize(dl) > 1 ? "s" : "");
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "threads"))
    {
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(t, "hang_state");
        if (!cJSON_IsObject(hs))
            continue;
        double tid = 0;
        cp_jnum(t, "tid", &tid);
        fprintf(out, "  %-8d ", (int)tid);
        column(out, cp_jstr(t, "name") ? cp_jstr(t, "name") : "", 16);
        column(out, cp_jstr(hs, "state") ? cp_jstr(hs, "state") : "?", 18);
        cp_text_put(out, cp_jstr(hs, "detail"));
        if (cp_jstr(hs, "mutex")) {
            fputs(" [", out);
            cp_text_put(out, cp_jstr(hs, "mutex"));
            if (cp_jstr(hs, "mutex_symbol")) {
                fputc(' ', out);
                cp_text_put(out, cp_jstr(hs, "mutex_symbol"));
            }
            double ow;
            if (cp_jnum(hs, "mutex_owner", &ow))
                fprintf(out, ", owner %d", (int)ow);
            fputc(']', out);
        }
        fputc('\n', out);
    }
}
