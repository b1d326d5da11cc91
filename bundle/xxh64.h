/* xxh64.h - XXH64 (seed 0), the hash `xxhsum -H64` prints, for the core stream.
 * libzstd uses XXH64 internally but does not export it, and the handler links nothing else. */
#ifndef CRASHPACK_XXH64_H
#define CRASHPACK_XXH64_H
#include <stddef.h>
#include <stdint.h>

struct xxh64 {
    uint64_t total, v[4];
    uint8_t buf[32];
    unsigned buflen;
};

void xxh64_init(struct xxh64 *s);
void xxh64_update(struct xxh64 *s, const void *data, size_t len);
uint64_t xxh64_digest(const struct xxh64 *s);
#endif
