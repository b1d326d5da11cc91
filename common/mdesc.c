/* mdesc.c - escaping untrusted text for Markdown and HTML (see mdesc.h). libc only. */
#include "mdesc.h"

#include <string.h>

static int is_ctl(unsigned c)
{
    return c < 0x20 || c == 0x7f;
}

/* Whether s (at p) starts a bare-URL autolink GitHub's Markdown would make a link of: the "://"
 * of a scheme, or "www." at a word start. */
static int autolink_at(const char *s, const char *p)
{
    if (p[0] == ':' && p[1] == '/' && p[2] == '/')
        return 1;
    return p - s >= 3 && p[0] == '.' && !strncmp(p - 3, "www", 3) &&
           (p - s == 3 || strchr(" \t([{<\"'", p[-4]));
}

void cp_md_text(FILE *o, const char *s, const char *null_text)
{
    if (!s) {
        fputs(null_text ? null_text : "-", o);
        return;
    }
    const char *p = s;
    /* a block marker at the start: heading, list item, quote (the caller may be at a line start) */
    if (*p == '#' || *p == '-' || *p == '+' || *p == '=')
        fputc('\\', o);
    size_t digits = strspn(p, "0123456789");
    for (; *p; p++) {
        unsigned c = (unsigned char)*p;
        if (is_ctl(c))
            c = ' ';
        if (c == '<')
            fputs("&lt;", o);
        else if (c == '>')
            fputs("&gt;", o);
        else if (c == '&')
            fputs("&amp;", o);
        else {
            /* link/image brackets, emphasis, strikethrough, code, table cells, escapes; an
             * ordered-list "N." or "N)" at the start; the "://" or "www." of an autolink */
            if (strchr("\\`*_[]|~", (int)c) ||
                (digits && (size_t)(p - s) == digits && (c == '.' || c == ')')) ||
                autolink_at(s, p))
                fputc('\\', o);
            fputc((int)c, o);
        }
    }
}

/* The longest run of backticks in s. */
static size_t backtick_run(const char *s)
{
    size_t best = 0, cur = 0;
    for (; s && *s; s++) {
        cur = *s == '`' ? cur + 1 : 0;
        if (cur > best)
            best = cur;
    }
    return best;
}

static void code_span(FILE *o, const char *s, int cell)
{
    if (!s)
        s = "?";
    size_t fence = backtick_run(s) + 1;
    size_t len = strlen(s);
    /* a space pads content that starts or ends with a backtick (renderers strip one each side) */
    int pad = len && (s[0] == '`' || s[len - 1] == '`');
    for (size_t i = 0; i < fence; i++)
        fputc('`', o);
    if (pad)
        fputc(' ', o);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (cell && *p == '|')
            fputc('\\', o);
        fputc(is_ctl(*p) ? ' ' : *p, o);
    }
    if (pad)
        fputc(' ', o);
    for (size_t i = 0; i < fence; i++)
        fputc('`', o);
}

void cp_md_code(FILE *o, const char *s)
{
    code_span(o, s, 0);
}

void cp_md_code_cell(FILE *o, const char *s)
{
    code_span(o, s, 1);
}

int cp_md_fence_len(const char *const *lines, int n)
{
    size_t best = 2;
    for (int i = 0; i < n; i++) {
        size_t r = backtick_run(lines[i]);
        if (r > best)
            best = r;
    }
    return (int)best + 1;
}

void cp_md_block_line(FILE *o, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
        fputc(is_ctl(*p) ? ' ' : *p, o);
}

void cp_html_escape(FILE *o, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\'': fputs("&#39;", o); break;
        default: fputc(is_ctl(*p) ? ' ' : *p, o);
        }
    }
}
