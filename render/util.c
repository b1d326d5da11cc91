/* util.c - the small pieces every renderer file shares (render_internal.h). */
#include "render_internal.h"
#include "mdesc.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void render_label(FILE *out, const char *l)
{
    fprintf(out, "%-10s", l);
}

const char *render_human(double n, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (n >= 1024 && u < 5) {
        n /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", n);
    else
        snprintf(buf, len, "%.1f %s", n, unit[u]);
    return buf;
}

void render_time(double t, const char *fmt, const char *unknown, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(buf, len, fmt, &tm))
        snprintf(buf, len, "%s", unknown);
}

void render_md(FILE *o, const char *s)
{
    cp_md_text(o, s, "-");
}

void render_md_code(FILE *o, const char *s)
{
    cp_md_code(o, s);
}

void render_md_code_cell(FILE *o, const char *s)
{
    cp_md_code_cell(o, s);
}

void render_block_add(struct render_block *b, const char *s)
{
    if (b->n < RENDER_BLOCK_MAX && (b->v[b->n] = strdup(s ? s : "")))
        b->n++;
}

void render_lines_write(FILE *o, char **v, int *n)
{
    int fence = cp_md_fence_len((const char *const *)v, *n);
    for (int i = 0; i < fence; i++)
        fputc('`', o);
    fputc('\n', o);
    for (int i = 0; i < *n; i++) {
        cp_md_block_line(o, v[i]);
        fputc('\n', o);
        free(v[i]);
    }
    *n = 0;
    for (int i = 0; i < fence; i++)
        fputc('`', o);
    fputc('\n', o);
}

void render_block_write(FILE *o, struct render_block *b)
{
    render_lines_write(o, b->v, &b->n);
}

void render_put_cut(FILE *out, const char *s, size_t max)
{
    if (!s)
        return;
    size_t l = strlen(s);
    if (!max || l <= max) {
        cp_text_put(out, s);
        return;
    }
    /* back to the last space in the second half, so no word or number is cut in two */
    size_t cut = max;
    for (size_t i = max; i > max / 2; i--)
        if (s[i] == ' ') {
            cut = i;
            break;
        }
    while (cut > 0 && s[cut - 1] == ' ')
        cut--;
    cp_text_putn(out, s, cut);
    fputs("...", out);
}
