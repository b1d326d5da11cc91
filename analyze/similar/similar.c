/* similar.c - normalization, features, TF-IDF and cosine (similar.h). */
#include "similar.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_LINES 64
#define SIM_LINE_MAX 512
/* the weights of the feature families */
#define W_CHAR 1.0
#define W_WORD 1.0
#define W_PAIR 1.0
#define W_EXC 3.0
#define W_SIG 2.0

/* ---- normalization ---- */

struct nbuf {
    char *p;
    size_t n, cap;
};

static void put(struct nbuf *b, const char *s)
{
    for (; *s; s++)
        if (b->n + 1 < b->cap)
            b->p[b->n++] = *s;
}

static void putc_(struct nbuf *b, char c)
{
    if (c == ' ' && (b->n == 0 || b->p[b->n - 1] == ' '))
        return;
    if (b->n + 1 < b->cap)
        b->p[b->n++] = c;
}

static int isword(int c)
{
    return isalnum(c) || c == '_';
}

static size_t run(const char *s, size_t i, size_t len, int (*cls)(int))
{
    size_t j = i;
    while (j < len && cls((unsigned char)s[j]))
        j++;
    return j - i;
}

/* A UUID (8-4-4-4-12 hex digits) at s[i]: its length, else 0. */
static size_t uuid_at(const char *s, size_t i, size_t len)
{
    static const int parts[] = {8, 4, 4, 4, 12};
    size_t j = i;
    for (int k = 0; k < 5; k++) {
        if (run(s, j, len, isxdigit) != (size_t)parts[k])
            return 0;
        j += parts[k];
        if (k < 4 && (j >= len || s[j] != '-'))
            return 0;
        j += k < 4;
    }
    return j - i;
}

/* "dd:dd" or "dd:dd:dd" with an optional fraction at s[i] (1 or 2 digits in front). */
static size_t clock_at(const char *s, size_t i, size_t len)
{
    size_t j = i, d = run(s, j, len, isdigit);
    if (d < 1 || d > 2 || j + d >= len || s[j + d] != ':')
        return 0;
    j += d + 1;
    if (run(s, j, len, isdigit) != 2)
        return 0;
    j += 2;
    if (j + 2 < len && s[j] == ':' && run(s, j + 1, len, isdigit) == 2)
        j += 3;
    if (j + 1 < len && (s[j] == '.' || s[j] == ',') && isdigit((unsigned char)s[j + 1]))
        j += 1 + run(s, j + 1, len, isdigit);
    return j - i;
}

/* A date (yyyy-mm-dd, yyyy/mm/dd, and a time after T or a blank) or a clock time at s[i]. */
static size_t time_at(const char *s, size_t i, size_t len)
{
    size_t j = i;
    if (run(s, j, len, isdigit) == 4 && j + 10 <= len && (s[j + 4] == '-' || s[j + 4] == '/') &&
        run(s, j + 5, len, isdigit) == 2 && s[j + 7] == s[j + 4] &&
        run(s, j + 8, len, isdigit) == 2) {
        j += 10;
        if (j + 1 < len && (s[j] == 'T' || s[j] == ' ')) {
            size_t c = clock_at(s, j + 1, len);
            j += c ? c + 1 : 0;
        }
        if (j < len && s[j] == 'Z')
            j++;
        return j - i;
    }
    return clock_at(s, i, len);
}

/* An IPv4 address with an optional port at s[i]. */
static size_t ip_at(const char *s, size_t i, size_t len)
{
    size_t j = i;
    for (int k = 0; k < 4; k++) {
        size_t d = run(s, j, len, isdigit);
        if (d < 1 || d > 3)
            return 0;
        j += d;
        if (k < 3) {
            if (j >= len || s[j] != '.')
                return 0;
            j++;
        }
    }
    if (j + 1 < len && s[j] == ':' && isdigit((unsigned char)s[j + 1]))
        j += 1 + run(s, j + 1, len, isdigit);
    return j - i;
}

static int pathch(int c)
{
    return isalnum(c) || strchr("_.-/~+@\\", c) != NULL;
}

/* A path at s[i]: a run of path characters with a '/' (or a '\'), which starts with '/', '~' or
 * '.', or has at least two of them. */
static size_t path_at(const char *s, size_t i, size_t len)
{
    size_t n = run(s, i, len, pathch), slashes = 0;
    for (size_t k = i; k < i + n; k++)
        slashes += s[k] == '/' || s[k] == '\\';
    if (!slashes || n < 2)
        return 0;
    if (strchr("/~.\\", s[i]) || slashes >= 2)
        return n;
    return 0;
}

/* A hex address (0x...) or a long hex id (8 or more hex digits with a digit and a letter). */
static size_t hex_at(const char *s, size_t i, size_t len)
{
    if (i + 2 < len && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
        isxdigit((unsigned char)s[i + 2]))
        return 2 + run(s, i + 2, len, isxdigit);
    size_t n = run(s, i, len, isxdigit), digits = 0;
    if (n < 8 || (i + n < len && isword((unsigned char)s[i + n])))
        return 0;
    for (size_t k = i; k < i + n; k++)
        digits += isdigit((unsigned char)s[k]) != 0;
    return digits && digits < n ? n : 0;
}

static int ieq(const char *s, size_t i, size_t len, const char *w)
{
    size_t n = strlen(w);
    return i + n <= len && !strncasecmp(s + i, w, n);
}

/* A rank at s[i]: "rank" (after a non-letter) then blanks, ':', '=', '#' and digits, or
 * "default" then digits (torchrun's prefix). */
static size_t rank_at(const char *s, size_t i, size_t len)
{
    size_t j = i;
    if (ieq(s, i, len, "rank"))
        j += 4;
    else if (ieq(s, i, len, "default") && i + 7 < len && isdigit((unsigned char)s[i + 7]))
        j += 7;
    else
        return 0;
    while (j < len && strchr(" :=#", s[j]))
        j++;
    size_t d = run(s, j, len, isdigit);
    return d ? j + d - i : 0;
}

/* A number at s[i]: digits, a fraction, an exponent. */
static size_t num_at(const char *s, size_t i, size_t len)
{
    size_t j = i + run(s, i, len, isdigit);
    if (j == i)
        return 0;
    if (j + 1 < len && s[j] == '.' && isdigit((unsigned char)s[j + 1]))
        j += 1 + run(s, j + 1, len, isdigit);
    if (j + 1 < len && (s[j] == 'e' || s[j] == 'E') &&
        (isdigit((unsigned char)s[j + 1]) ||
         (j + 2 < len && strchr("+-", s[j + 1]) && isdigit((unsigned char)s[j + 2]))))
        j += 2 + run(s, j + 2, len, isdigit);
    return j - i;
}

/* The placeholder for what starts at s[i] (at a token boundary), and its length in *n. */
static const char *token_at(const char *s, size_t i, size_t len, size_t *n)
{
    if ((*n = uuid_at(s, i, len)))
        return "<uuid>";
    if ((*n = time_at(s, i, len)))
        return "<time>";
    if ((*n = ip_at(s, i, len)))
        return "<ip>";
    if ((*n = path_at(s, i, len)))
        return "<path>";
    if ((*n = hex_at(s, i, len)))
        return "<addr>";
    if ((*n = rank_at(s, i, len)))
        return "<rank>";
    if (ieq(s, i, len, "pid") && i + 3 < len && strchr(" :=", s[i + 3])) {
        size_t j = i + 3;
        while (j < len && strchr(" :=", s[j]))
            j++;
        size_t d = run(s, j, len, isdigit);
        if (d) {
            *n = j + d - i;
            return "pid <pid>";
        }
    }
    if ((*n = num_at(s, i, len)))
        return "<n>";
    return NULL;
}

size_t sim_normalize_line(const char *s, size_t len, char *out, size_t outlen)
{
    struct nbuf b = {out, 0, outlen};
    if (!outlen)
        return 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = 0;
        const char *ph = NULL;
        /* a boundary: not inside a word ('_' ends a word before "rank": local_rank) */
        int boundary = i == 0 || !isalpha((unsigned char)s[i - 1]);
        if (boundary && (i == 0 || !isdigit((unsigned char)s[i - 1])))
            ph = token_at(s, i, len, &n);
        if (ph && n) {
            put(&b, ph);
            i += n;
        } else if (isspace(c)) {
            putc_(&b, ' ');
            i++;
        } else {
            putc_(&b, (char)tolower(c));
            i++;
        }
    }
    while (b.n && b.p[b.n - 1] == ' ')
        b.n--;
    b.p[b.n] = 0;
    return b.n;
}

/* ---- error lines ---- */

static const char *const error_words[] = {
    "error",      "exception", "traceback",   "fail",         "fatal",         "killed",  "abort",
    "timeout",    "timed out", "signal",      "segmentation", "assert",        " nan",    "cannot",
    "can't",      "unable",    "not found",   "denied",       "refused",       "corrupt", "invalid",
    "unknown",    "exitcode",  "exit code",   "terminat",     "out of memory", "oom",     "xid",
    "warning",    "hang",      "stuck",       "deadlock",     "watchdog",      "no such", "illegal",
    "unexpected", "bus error", "core dumped", "mismatch",     "not supported", "panic",   "nccl",
};

int sim_is_error_line(const char *line, size_t len)
{
    char low[SIM_LINE_MAX + 1];
    size_t n = len < SIM_LINE_MAX ? len : SIM_LINE_MAX;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)line[i]);
    low[n] = 0;
    for (size_t k = 0; k < sizeof(error_words) / sizeof(error_words[0]); k++)
        if (strstr(low, error_words[k]))
            return 1;
    return 0;
}

/* The lines of text (the last max; errors_only: those that read as errors). */
static size_t lines_of(const char *text, int errors_only, const char **lines, size_t *lens,
                       size_t max)
{
    size_t k = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        size_t b = 0;
        while (b < n && isspace((unsigned char)p[b]))
            b++;
        if (b < n && (!errors_only || sim_is_error_line(p, n))) {
            if (k == max) { /* keep the last max */
                memmove(lines, lines + 1, (max - 1) * sizeof(*lines));
                memmove(lens, lens + 1, (max - 1) * sizeof(*lens));
                k--;
            }
            lines[k] = p;
            lens[k++] = n;
        }
        p = e ? e + 1 : NULL;
    }
    return k;
}

size_t sim_error_lines(const char *text, const char **lines, size_t *lens, size_t max)
{
    if (!max)
        return 0;
    size_t k = lines_of(text, 1, lines, lens, max);
    return k ? k : lines_of(text, 0, lines, lens, max);
}

/* ---- features ---- */

struct flist {
    struct sim_feat *f;
    size_t n, cap;
    int oom;
};

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Adds one occurrence of the feature family:text, weighted w (merge() sums the occurrences). */
static void add(struct flist *l, char fam, const char *s, size_t n, double w)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        struct sim_feat *f = realloc(l->f, cap * sizeof(*f));
        if (!f) {
            l->oom = 1;
            return;
        }
        l->f = f;
        l->cap = cap;
    }
    uint64_t h = fnv(fnv(14695981039346656037ULL, &fam, 1), s, n);
    l->f[l->n].h = h;
    l->f[l->n++].tf = w;
}

static int isalnum_(int c)
{
    return isalnum(c) || c == '_' || c == '<' || c == '>';
}

/* Words ("w"), pairs of neighbouring words ("p") and character 3..5-grams ("c") of one
 * normalized line. */
static void line_features(struct flist *l, const char *s, size_t len)
{
    const char *prev = NULL;
    size_t prevn = 0;
    for (size_t i = 0; i < len;) {
        size_t n = run(s, i, len, isalnum_);
        if (!n) {
            i++;
            continue;
        }
        add(l, 'w', s + i, n, W_WORD);
        if (prev) {
            char pair[2 * SIM_LINE_MAX + 2];
            memcpy(pair, prev, prevn);
            pair[prevn] = ' ';
            memcpy(pair + prevn + 1, s + i, n);
            add(l, 'p', pair, prevn + 1 + n, W_PAIR);
        }
        prev = s + i;
        prevn = n;
        i += n;
    }
    for (size_t g = 3; g <= 5; g++)
        for (size_t i = 0; i + g <= len; i++)
            add(l, 'c', s + i, g, W_CHAR);
}

static int by_hash(const void *a, const void *b)
{
    const struct sim_feat *x = a, *y = b;
    return x->h < y->h ? -1 : x->h > y->h;
}

/* Sorts the list and merges each feature's occurrences: tf = weight * (1 + ln count). */
static void merge(struct flist *l)
{
    if (!l->n)
        return;
    qsort(l->f, l->n, sizeof(*l->f), by_hash);
    size_t k = 0;
    for (size_t i = 0; i < l->n;) {
        size_t j = i;
        while (j < l->n && l->f[j].h == l->f[i].h)
            j++;
        l->f[k].h = l->f[i].h;
        l->f[k++].tf = l->f[i].tf * (1.0 + log((double)(j - i)));
        i = j;
    }
    l->n = k;
}

/* The distinct normalized error lines of text, each through line_features. */
static void text_features(struct flist *l, const char *text)
{
    const char *lines[SIM_MAX_LINES];
    size_t lens[SIM_MAX_LINES];
    char(*norm)[SIM_LINE_MAX] = malloc(SIM_MAX_LINES * sizeof(*norm));
    if (!norm) {
        l->oom = 1;
        return;
    }
    size_t k = sim_error_lines(text, lines, lens, SIM_MAX_LINES), kept = 0;
    for (size_t i = 0; i < k; i++) {
        size_t n =
            sim_normalize_line(lines[i], lens[i] < 4 * SIM_LINE_MAX ? lens[i] : 4 * SIM_LINE_MAX,
                               norm[kept], SIM_LINE_MAX);
        int seen = 0;
        for (size_t j = 0; j < kept && !seen; j++)
            seen = !strcmp(norm[j], norm[kept]);
        if (!seen && n) {
            line_features(l, norm[kept], n);
            kept++;
        }
    }
    free(norm);
}

int sim_features(const char *text, const char *exc_type, const char *signature,
                 struct sim_feat **out, size_t *n)
{
    struct flist l = {0};
    if (text)
        text_features(&l, text);
    if (exc_type && *exc_type)
        add(&l, 'x', exc_type, strlen(exc_type), W_EXC);
    for (const char *p = signature; p && *p;) { /* the signature's frames, split at blanks, '<-' */
        size_t sp = strcspn(p, " <-|");
        if (sp)
            add(&l, 's', p, sp, W_SIG);
        p += sp + (p[sp] != 0);
    }
    if (l.oom) {
        free(l.f);
        return -1;
    }
    merge(&l);
    *out = l.f;
    *n = l.n;
    return 0;
}

/* ---- the index: document frequencies, norms, cosine ---- */

struct sim_doc {
    struct sim_feat *f;
    size_t n;
    double norm;
};

struct sim_index {
    struct sim_doc *d;
    size_t n, cap;
    struct sim_feat *df; /* sorted by h; tf holds the number of documents with h */
    size_t ndf;
};

struct sim_index *sim_index_new(void)
{
    return calloc(1, sizeof(struct sim_index));
}

size_t sim_index_size(const struct sim_index *ix)
{
    return ix ? ix->n : 0;
}

int sim_index_add(struct sim_index *ix, struct sim_feat *f, size_t n)
{
    if (ix->n == ix->cap) {
        size_t cap = ix->cap ? ix->cap * 2 : 128;
        struct sim_doc *d = realloc(ix->d, cap * sizeof(*d));
        if (!d) {
            free(f);
            return -1;
        }
        ix->d = d;
        ix->cap = cap;
    }
    ix->d[ix->n++] = (struct sim_doc){f, n, 0};
    return 0;
}

/* idf = ln((N + 1) / (df + 1)) + 1: a feature no document has weighs the most. */
static double idf(const struct sim_index *ix, uint64_t h)
{
    size_t lo = 0, hi = ix->ndf;
    double df = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->df[mid].h < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ix->ndf && ix->df[lo].h == h)
        df = ix->df[lo].tf;
    return log(((double)ix->n + 1.0) / (df + 1.0)) + 1.0;
}

int sim_index_finish(struct sim_index *ix)
{
    size_t total = 0;
    for (size_t i = 0; i < ix->n; i++)
        total += ix->d[i].n;
    free(ix->df);
    ix->df = malloc((total ? total : 1) * sizeof(*ix->df));
    if (!ix->df)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < ix->n; i++)
        for (size_t j = 0; j < ix->d[i].n; j++)
            ix->df[k++] = (struct sim_feat){ix->d[i].f[j].h, 1};
    qsort(ix->df, k, sizeof(*ix->df), by_hash);
    size_t m = 0;
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && ix->df[j].h == ix->df[i].h)
            j++;
        ix->df[m++] = (struct sim_feat){ix->df[i].h, (double)(j - i)};
        i = j;
    }
    ix->ndf = m;
    for (size_t i = 0; i < ix->n; i++) {
        double s = 0;
        for (size_t j = 0; j < ix->d[i].n; j++) {
            double w = ix->d[i].f[j].tf * idf(ix, ix->d[i].f[j].h);
            s += w * w;
        }
        ix->d[i].norm = sqrt(s);
    }
    return 0;
}

void sim_index_free(struct sim_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->n; i++)
        free(ix->d[i].f);
    free(ix->d);
    free(ix->df);
    free(ix);
}

/* The dot product of the query's and document d's TF-IDF vectors (both sorted by hash). */
static double dot(const struct sim_index *ix, const struct sim_feat *q, size_t nq,
                  const struct sim_doc *d)
{
    double s = 0;
    for (size_t i = 0, j = 0; i < nq && j < d->n;) {
        if (q[i].h < d->f[j].h) {
            i++;
        } else if (q[i].h > d->f[j].h) {
            j++;
        } else {
            double w = idf(ix, q[i].h);
            s += q[i].tf * w * d->f[j].tf * w;
            i++;
            j++;
        }
    }
    return s;
}

size_t sim_query(const struct sim_index *ix, const struct sim_feat *q, size_t nq, double min,
                 struct sim_hit *hits, size_t max)
{
    double qn = 0;
    for (size_t i = 0; i < nq; i++) {
        double w = q[i].tf * idf(ix, q[i].h);
        qn += w * w;
    }
    qn = sqrt(qn);
    size_t k = 0;
    for (size_t d = 0; ix && qn > 0 && d < ix->n; d++) {
        if (ix->d[d].norm <= 0)
            continue;
        double sc = dot(ix, q, nq, &ix->d[d]) / (qn * ix->d[d].norm);
        if (sc < min)
            continue;
        size_t at = k < max ? k : max; /* insertion, best first, ties keep the lower number */
        while (at > 0 && hits[at - 1].score < sc)
            at--;
        if (at >= max)
            continue;
        size_t last = k < max ? k : max - 1;
        memmove(hits + at + 1, hits + at, (last - at) * sizeof(*hits));
        hits[at] = (struct sim_hit){d, sc > 1 ? 1 : sc};
        if (k < max)
            k++;
    }
    return k;
}
