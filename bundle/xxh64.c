/* xxh64.c - XXH64 as specified in xxHash's doc/xxhash_spec.md (seed 0). */
#include "xxh64.h"
#include <string.h>

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}
static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* little-endian hosts only (x86_64, aarch64) */
}
static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t round1(uint64_t acc, uint64_t in)
{
    acc += in * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}
static inline uint64_t merge(uint64_t acc, uint64_t v)
{
    acc ^= round1(0, v);
    return acc * P1 + P4;
}

void xxh64_init(struct xxh64 *s)
{
    memset(s, 0, sizeof(*s));
    s->v[0] = P1 + P2;
    s->v[1] = P2;
    s->v[2] = 0;
    s->v[3] = -P1;
}

void xxh64_update(struct xxh64 *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->total += len;
    if (s->buflen) {
        size_t take = 32 - s->buflen;
        if (take > len)
            take = len;
        memcpy(s->buf + s->buflen, p, take);
        s->buflen += (unsigned)take;
        p += take;
        len -= take;
        if (s->buflen < 32)
            return;
        for (int i = 0; i < 4; i++)
            s->v[i] = round1(s->v[i], rd64(s->buf + 8 * i));
        s->buflen = 0;
    }
    uint64_t v0 = s->v[0], v1 = s->v[1], v2 = s->v[2], v3 = s->v[3];
    while (len >= 32) {
        v0 = round1(v0, rd64(p));
        v1 = round1(v1, rd64(p + 8));
        v2 = round1(v2, rd64(p + 16));
        v3 = round1(v3, rd64(p + 24));
        p += 32;
        len -= 32;
    }
    s->v[0] = v0, s->v[1] = v1, s->v[2] = v2, s->v[3] = v3;
    memcpy(s->buf, p, len);
    s->buflen = (unsigned)len;
}

uint64_t xxh64_digest(const struct xxh64 *s)
{
    uint64_t h;
    if (s->total >= 32) {
        h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++)
            h = merge(h, s->v[i]);
    } else {
        h = P5;
    }
    h += s->total;
    const uint8_t *p = s->buf;
    unsigned len = s->buflen;
    while (len >= 8) {
        h ^= round1(0, rd64(p));
        h = rotl(h, 27) * P1 + P4;
        p += 8;
        len -= 8;
    }
    if (len >= 4) {
        h ^= (uint64_t)rd32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
        len -= 4;
    }
    while (len) {
        h ^= (*p) * P5;
        h = rotl(h, 11) * P1;
        p++;
        len--;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}
