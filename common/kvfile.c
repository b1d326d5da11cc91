/* kvfile.c - `KEYWORD VALUE` data files (see kvfile.h). */
#include "kvfile.h"
#include "datadir.h"
#include "errmsg.h"

#include <stdlib.h>
#include <string.h>

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

void cp_kvfile_free(struct cp_kvfile *f)
{
    if (!f)
        return;
    free(f->l);
    free(f->buf);
    f->l = NULL;
    f->buf = NULL;
    f->n = 0;
}

/* Splits one line (NUL-terminated, no '\n') into f->l. 1 for a line kept, 0 for a blank or comment
 * line, -1 with err. */
static int split_line(struct cp_kvfile *f, char *s, int line, const char *const *keys, char *err,
                      size_t errlen)
{
    while (blank(*s))
        s++;
    if (!*s || *s == '#')
        return 0;
    char *key = s;
    while (*s && !blank(*s))
        s++;
    if (*s)
        *s++ = 0;
    while (blank(*s))
        s++;
    char *v = s, *end = s + strlen(s);
    while (end > v && blank(end[-1]))
        *--end = 0;
    if (end - v >= 2 && v[0] == '"' && end[-1] == '"') {
        end[-1] = 0;
        v++;
    }
    size_t k = 0;
    while (keys[k] && strcmp(keys[k], key))
        k++;
    if (!keys[k]) {
        char want[256] = "";
        for (size_t i = 0; keys[i]; i++)
            if (strlen(want) + strlen(keys[i]) + 3 < sizeof(want))
                strcat(strcat(want, i ? ", " : ""), keys[i]);
        cp_errmsg(err, errlen, "%s:%d: unknown keyword `%s' (expected one of: %s)", f->path, line,
                  key, want);
        return -1;
    }
    if (!*v) {
        cp_errmsg(err, errlen, "%s:%d: `%s' without a value", f->path, line, key);
        return -1;
    }
    struct cp_kvline *nl = realloc(f->l, (f->n + 1) * sizeof(*nl));
    if (!nl) {
        cp_errmsg(err, errlen, "out of memory");
        return -1;
    }
    f->l = nl;
    f->l[f->n++] = (struct cp_kvline){keys[k], v, line};
    return 1;
}

int cp_kvfile_load(const char *rel, const char *what, size_t max, const char *const *keys,
                   struct cp_kvfile *f, char *err, size_t errlen)
{
    size_t len;
    memset(f, 0, sizeof(*f));
    f->buf = cp_data_read(rel, what, max, &len, f->path, sizeof(f->path), err, errlen);
    if (!f->buf)
        return -1;
    if (memchr(f->buf, 0, len)) {
        cp_errmsg(err, errlen, "%s: a NUL byte (not a text file)", f->path);
        cp_kvfile_free(f);
        return -1;
    }
    int line = 0;
    for (char *s = f->buf; s && *s;) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = 0;
        line++;
        if (split_line(f, s, line, keys, err, errlen) < 0) {
            cp_kvfile_free(f);
            return -1;
        }
        s = nl ? nl + 1 : NULL;
    }
    return 0;
}

const char **cp_kvfile_values(const struct cp_kvfile *f, const char *key, size_t from, size_t to,
                              size_t *count)
{
    size_t n = 0;
    if (to > f->n)
        to = f->n;
    for (size_t i = from; i < to; i++)
        n += !strcmp(f->l[i].key, key);
    const char **v = malloc((n + 1) * sizeof(*v));
    if (!v)
        return NULL;
    n = 0;
    for (size_t i = from; i < to; i++)
        if (!strcmp(f->l[i].key, key))
            v[n++] = f->l[i].value;
    v[n] = NULL;
    if (count)
        *count = n;
    return v;
}
