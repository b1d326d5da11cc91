/* scrub.c - overwrite known secret values wherever their bytes appear (see scrub.h). libc only:
 * the capture handler links it. */
#include "scrub.h"

#include <stdlib.h>
#include <string.h>

int cp_scrub_add(struct cp_scrub *sc, const void *v, size_t len)
{
    const uint8_t *b = v;
    if (len < CP_SCRUB_MIN || (b[0] == '/' && !memchr(b, ' ', len)))
        return 0;
    if (len > CP_SCRUB_MAXLEN)
        len = CP_SCRUB_MAXLEN;
    for (size_t i = 0; i < sc->n; i++)
        if (sc->s[i].len == len && !memcmp(sc->s[i].v, b, len))
            return 0;
    struct cp_secret *ns = realloc(sc->s, (sc->n + 1) * sizeof(*ns));
    if (!ns)
        return -1;
    sc->s = ns;
    uint8_t *copy = malloc(len);
    if (!copy)
        return -1;
    memcpy(copy, b, len);
    sc->s[sc->n++] = (struct cp_secret){copy, len};
    if (len > sc->maxlen)
        sc->maxlen = len;
    return 0;
}

void cp_scrub_free(struct cp_scrub *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        memset(sc->s[i].v, 0, sc->s[i].len);
        free(sc->s[i].v);
    }
    free(sc->s);
    sc->s = NULL;
    sc->n = sc->maxlen = 0;
}

size_t cp_scrub_buf(const struct cp_scrub *sc, uint8_t *buf, size_t n)
{
    size_t masked = 0;
    if (!sc)
        return 0;
    for (size_t i = 0; i < sc->n; i++) {
        const struct cp_secret *s = &sc->s[i];
        /* whole occurrences (glibc's memmem is a linear two-way search) */
        for (uint8_t *p = buf, *end = buf + n; (size_t)(end - p) >= s->len;) {
            uint8_t *hit = memmem(p, (size_t)(end - p), s->v, s->len);
            if (!hit)
                break;
            memset(hit, '*', s->len);
            masked += s->len;
            p = hit + s->len;
        }
        /* a prefix at the very end: the rest may be in the next buffer */
        size_t k = s->len - 1 < n ? s->len - 1 : n;
        for (; k >= CP_SCRUB_EDGE_MIN; k--)
            if (!memcmp(buf + n - k, s->v, k)) {
                memset(buf + n - k, '*', k);
                masked += k;
                break;
            }
    }
    return masked;
}

size_t cp_scrub_seam(const struct cp_scrub *sc, const uint8_t *prev, size_t plen, uint8_t *buf,
                     size_t n)
{
    size_t masked = 0;
    if (!sc)
        return 0;
    for (size_t i = 0; i < sc->n; i++) {
        const struct cp_secret *s = &sc->s[i];
        /* k: bytes of the value in prev (1 .. len-1), the rest must open buf */
        for (size_t k = 1; k < s->len && k <= plen; k++) {
            size_t rest = s->len - k;
            if (rest > n)
                continue;
            if (!memcmp(prev + plen - k, s->v, k) && !memcmp(buf, s->v + k, rest)) {
                memset(buf, '*', rest);
                masked += rest;
            }
        }
    }
    return masked;
}
