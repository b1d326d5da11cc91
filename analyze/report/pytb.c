/* pytb.c - see pytb.h: a printed Python traceback read back into exception.json's shape.
 *
 * Main data structure: struct tblines, the text's lines (pointers into one cleaned copy) that
 * carry the traceback's prefix, each with its line number in the text. The last "Traceback (most
 * recent call last):" is the raised exception; walking back over blank lines from a block's
 * header, a chain separator names the block before it as its cause or context.
 */
#include "pytb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_HEADER "Traceback (most recent call last):"
#define SEP_CAUSE "The above exception was the direct cause of the following exception:"
#define SEP_CONTEXT "During handling of the above exception, another exception occurred:"
#define PREFIX_MAX 64
#define CHAIN_MAX 16
#define MESSAGE_LINES_MAX 400
#define MESSAGE_BYTES_MAX (64u << 10)

char *pytb_clean(const char *text, size_t len, size_t *outlen)
{
    char *o = malloc(len + 1);
    if (!o)
        return NULL;
    size_t n = 0, line_start = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\r') {
            if (i + 1 < len && text[i + 1] == '\n')
                continue;
            n = line_start; /* a redraw of the line */
        } else if (c == 0x1b) {
            if (i + 1 < len && text[i + 1] == '[') {
                i += 2;
                while (i < len && !(text[i] >= 0x40 && text[i] <= 0x7e))
                    i++;
            } else if (i + 1 < len) {
                i++;
            }
        } else {
            o[n++] = c ? c : '?';
            if (c == '\n')
                line_start = n;
        }
    }
    o[n] = 0;
    *outlen = n;
    return o;
}

/* ---- lines ---- */

struct tblines {
    char **l; /* each NUL-terminated, the prefix taken off */
    int *no;  /* its 1-based line in the text */
    int n;
};

static int is_header(const char *l)
{
    return !strcmp(l, TB_HEADER);
}

static int is_sep(const char *l)
{
    return !strcmp(l, SEP_CAUSE) || !strcmp(l, SEP_CONTEXT);
}

static int blank(const char *l)
{
    return l[strspn(l, " \t")] == 0;
}

/* Grows t to hold at least n lines. -1 when out of memory. */
static int grow(struct tblines *t, int *cap, int n)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 64;
    char **nl = realloc(t->l, nc * sizeof(char *));
    if (!nl)
        return -1;
    t->l = nl;
    int *nno = realloc(t->no, nc * sizeof(int));
    if (!nno)
        return -1;
    t->no = nno;
    *cap = nc;
    return 0;
}

/* Splits buf (modified in place) into lines; the prefix of the last traceback header in *prefix
 * (at most PREFIX_MAX bytes; never a DataLoader message's "Original "). -1 when there is no
 * header, or out of memory. */
static int split(char *buf, struct tblines *all, char *prefix)
{
    int cap = 0, last = -1;
    size_t hl = strlen(TB_HEADER);
    all->n = 0;
    for (char *s = buf; s;) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = 0;
        if (grow(all, &cap, all->n + 1))
            return -1;
        all->l[all->n] = s;
        all->no[all->n] = all->n + 1;
        size_t len = strlen(s);
        if (len >= hl && len - hl <= PREFIX_MAX && !strcmp(s + len - hl, TB_HEADER) &&
            !(len - hl >= 9 && !strncmp(s + len - hl - 9, "Original ", 9)))
            last = all->n;
        all->n++;
        s = nl ? nl + 1 : NULL;
    }
    if (last < 0)
        return -1;
    size_t pl = strlen(all->l[last]) - hl;
    memcpy(prefix, all->l[last], pl);
    prefix[pl] = 0;
    return 0;
}

/* The lines of all that carry prefix, with it taken off, into t (pointing into all's text). */
static int keep_prefixed(const struct tblines *all, const char *prefix, struct tblines *t)
{
    size_t pl = strlen(prefix);
    t->l = malloc((all->n + 1) * sizeof(char *));
    t->no = malloc((all->n + 1) * sizeof(int));
    t->n = 0;
    if (!t->l || !t->no)
        return -1;
    for (int i = 0; i < all->n; i++) {
        const char *s = all->l[i];
        if (pl && strncmp(s, prefix, pl)) {
            /* a line without the prefix: other output, unless the prefix ends in blanks that
             * an empty line of the traceback lost */
            size_t k = strspn(prefix, " \t|:");
            if (!(k == pl && blank(s)))
                continue;
            s += strlen(s);
        } else {
            s += pl;
        }
        t->l[t->n] = (char *)s;
        t->no[t->n++] = all->no[i];
    }
    return 0;
}

/* ---- one block: Traceback, frames, "Type: message" ---- */

/* "  File "F", line N, in FUNC" as a frame object, or NULL. */
static cJSON *frame_of(const char *l)
{
    if (strncmp(l, "  File \"", 8))
        return NULL;
    const char *f = l + 8, *q = strstr(f, "\", line ");
    if (!q)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    char *file = strndup(f, (size_t)(q - f));
    cJSON_AddStringToObject(o, "file", file ? file : "?");
    free(file);
    char *end;
    long ln = strtol(q + 8, &end, 10);
    if (end != q + 8 && ln >= 0)
        cJSON_AddNumberToObject(o, "line", (double)ln);
    else
        cJSON_AddNullToObject(o, "line");
    const char *in = strstr(end, ", in ");
    cJSON_AddStringToObject(o, "function", in ? in + 5 : "?");
    return o;
}

/* The exception type at the start of l ("pkg.Error: msg", "KeyboardInterrupt"): its length, or
 * 0 when l does not start with one. */
static size_t type_len(const char *l)
{
    size_t i = 0;
    if (!((l[0] >= 'A' && l[0] <= 'Z') || (l[0] >= 'a' && l[0] <= 'z') || l[0] == '_'))
        return 0;
    while ((l[i] >= 'A' && l[i] <= 'Z') || (l[i] >= 'a' && l[i] <= 'z') ||
           (l[i] >= '0' && l[i] <= '9') || l[i] == '_' || l[i] == '.')
        i++;
    if (l[i] == ':' || l[i] == '\n' || blank(l + i))
        return i;
    return 0;
}

/* The message: the rest of the type line, then its further lines up to a blank line, another
 * header or a separator; *next: the first line after it. */
static char *message_of(const struct tblines *t, int at, size_t tl, int *next)
{
    const char *first = t->l[at] + tl;
    if (*first == ':')
        first++;
    if (*first == ' ')
        first++;
    size_t cap = strlen(first) + 1, n = 0;
    char *m = malloc(cap);
    if (!m)
        return NULL;
    memcpy(m, first, cap);
    n = cap - 1;
    int j = at + 1;
    for (; j < t->n && j - at < MESSAGE_LINES_MAX && n < MESSAGE_BYTES_MAX; j++) {
        const char *l = t->l[j];
        if (blank(l) || is_header(l) || is_sep(l))
            break;
        size_t ll = strlen(l);
        char *nm = realloc(m, n + ll + 2);
        if (!nm)
            break;
        m = nm;
        m[n++] = '\n';
        memcpy(m + n, l, ll + 1);
        n += ll;
    }
    *next = j;
    return m;
}

/* A DataLoader worker's error, re-raised in the main process ("Caught T in DataLoader worker
 * process N.\nOriginal Traceback (most recent call last):\n..."): the worker object, or NULL. */
static cJSON *worker_of(const char *msg)
{
    static const char orig[] = "\nOriginal " TB_HEADER "\n";
    const char *w = strstr(msg, " in DataLoader worker process ");
    const char *tb = strstr(msg, orig);
    if (strncmp(msg, "Caught ", 7) || !w || !tb || w > tb)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "DataLoader");
    char *end;
    long id = strtol(w + 30, &end, 10);
    if (end != w + 30 && id >= 0 && id < 1000000)
        cJSON_AddNumberToObject(o, "id", (double)id);
    else
        cJSON_AddNullToObject(o, "id");
    cJSON_AddNullToObject(o, "pid");
    const char *text = tb + 10; /* "Traceback ..." */
    /* the original type: its last line that is not indented */
    const char *type = NULL;
    for (const char *s = text; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
        if (*s != ' ' && *s != '\n' && type_len(s))
            type = s;
    char *tname = type ? strndup(type, type_len(type)) : NULL;
    cJSON_AddItemToObject(o, "original_type",
                          tname ? cJSON_CreateString(tname) : cJSON_CreateNull());
    free(tname);
    cJSON_AddStringToObject(o, "original_traceback", text);
    return o;
}

/* The block whose header is line h: an exception object, or NULL; *end: the line after it,
 * *at: its "Type: message" line. */
static cJSON *block(const struct tblines *t, int h, int *end, int *at)
{
    cJSON *frames = cJSON_CreateArray();
    int j = h + 1;
    for (; j < t->n; j++) {
        const char *l = t->l[j];
        cJSON *f = frame_of(l);
        if (f)
            cJSON_AddItemToArray(frames, f);
        else if (blank(l) || (l[0] != ' ' && l[0] != '\t'))
            break; /* the exception line, or no traceback after all */
    }
    size_t tl = j < t->n ? type_len(t->l[j]) : 0;
    char *msg = tl ? message_of(t, j, tl, end) : NULL;
    *at = j;
    if (!msg) {
        cJSON_Delete(frames);
        return NULL;
    }
    cJSON *e = cJSON_CreateObject();
    char *type = strndup(t->l[j], tl);
    cJSON_AddStringToObject(e, "type", type ? type : "?");
    cJSON_AddItemToObject(e, "mro",
                          cJSON_CreateStringArray((const char *const[]){type ? type : "?"}, 1));
    free(type);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddItemToObject(e, "frames", frames);
    cJSON *w = worker_of(msg);
    cJSON_AddItemToObject(e, "worker", w ? w : cJSON_CreateNull());
    free(msg);
    return e;
}

/* ---- the chain ---- */

/* Links the blocks before the raised one (header at h, object e): each separator above a block
 * makes the block before it that one's cause or context. */
static void chain_back(const struct tblines *t, int h, cJSON *e)
{
    for (int depth = 1; depth < CHAIN_MAX; depth++) {
        int k = h - 1;
        while (k >= 0 && blank(t->l[k]))
            k--;
        if (k < 0 || !is_sep(t->l[k]))
            return;
        const char *rel = !strcmp(t->l[k], SEP_CAUSE) ? "cause" : "context";
        int p = k - 1, end = 0;
        while (p >= 0 && !is_header(t->l[p]) && !is_sep(t->l[p]))
            p--;
        if (p < 0 || !is_header(t->l[p]))
            return; /* an exception printed without a traceback: the chain ends there */
        int at;
        cJSON *prev = block(t, p, &end, &at);
        if (!prev)
            return;
        if (end > k) {
            cJSON_Delete(prev);
            return;
        }
        cJSON_AddItemToObject(e, rel, prev);
        e = prev;
        h = p;
    }
}

/* The lines that are not blank after the "Type: message" line at `at` (the message's further
 * lines count: a job's output after a one-line message is indistinguishable from them); a worker's
 * re-raise does not count its original traceback, up to that traceback's own type line. */
static int trailing_lines(const struct tblines *t, int at, int worker)
{
    int j = at + 1, n = 0;
    if (worker) {
        while (j < t->n && strcmp(t->l[j], "Original " TB_HEADER))
            j++;
        for (j++; j < t->n; j++) /* its frames, up to its type line */
            if (t->l[j][0] != ' ' && t->l[j][0] != '\t' && type_len(t->l[j])) {
                j++;
                break;
            }
    }
    for (; j < t->n; j++)
        n += !blank(t->l[j]);
    return n;
}

cJSON *pytb_parse(const char *text, size_t len, int *line)
{
    char *buf = strndup(text, len), prefix[PREFIX_MAX + 1];
    struct tblines all = {0}, t = {0};
    cJSON *e = NULL;
    int h = -1, end = 0, at = 0;
    if (buf && !split(buf, &all, prefix) && !keep_prefixed(&all, prefix, &t)) {
        for (int i = t.n - 1; i >= 0 && h < 0; i--)
            if (is_header(t.l[i]))
                h = i;
        e = h >= 0 ? block(&t, h, &end, &at) : NULL;
    }
    if (e && trailing_lines(&t, at, cJSON_IsObject(cJSON_GetObjectItem(e, "worker"))) >
                 PYTB_TRAILING_MAX) {
        cJSON_Delete(e);
        e = NULL;
    }
    cJSON *o = NULL;
    if (e) {
        chain_back(&t, h, e);
        *line = t.no[h];
        o = cJSON_CreateObject();
        cJSON_AddTrueToObject(o, "fatal");
        cJSON_AddItemToObject(o, "exception", e);
    }
    free(all.l);
    free(all.no);
    free(t.l);
    free(t.no);
    free(buf);
    return o;
}
