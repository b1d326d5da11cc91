/* fuzz_bundle.c - libFuzzer harness for the bundle reader: any bytes as a bundle file.
 *
 * The input is written to a memfd and opened with bundle_open_fd (index or walk), then every
 * member is read: from the start, a range in the middle, the last byte, and whole through
 * bundle_read_all. Reads are bounded per member so a legitimately huge (highly compressible)
 * member does not turn one input into minutes of decompression. Build: see tests/CMakeLists.txt. */
#include "bundle.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define READ_BUDGET (1u << 20) /* bytes read per member, at most */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static unsigned char buf[64 << 10];
    if (fd < 0 && (fd = memfd_create("fuzz_bundle", MFD_CLOEXEC)) < 0)
        abort();
    if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        abort();

    struct bundle *b = NULL;
    char err[256];
    if (bundle_open_fd(fd, &b, err, sizeof(err)) != BUNDLE_OK)
        return 0;
    (void)bundle_complete(b);
    (void)bundle_reason(b);
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        size_t got = 0;
        uint64_t off = 0;
        while (off < m->size && off < READ_BUDGET) {
            if (bundle_read(b, m, off, buf, sizeof(buf), &got) != BUNDLE_OK || got == 0)
                break;
            off += got;
        }
        (void)bundle_read(b, m, m->size / 2, buf, 4096, &got);
        (void)bundle_read(b, m, m->size ? m->size - 1 : 0, buf, 16, &got);
        (void)bundle_read(b, m, m->available, buf, 16, &got);
        char *all = NULL;
        size_t len = 0;
        (void)bundle_read_all(b, m->name, READ_BUDGET, &all, &len);
        free(all);
        (void)bundle_find(b, m->name);
    }
    bundle_close(b);
    return 0;
}
