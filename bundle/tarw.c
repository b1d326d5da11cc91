/* tarw.c - build ustar header blocks; sizes that do not fit 11 octal digits get a pax header. */
#include "tarw.h"
#include <stdio.h>
#include <string.h>

static void octal(char *dst, size_t width, uint64_t v)
{
    /* width includes the terminating NUL */
    snprintf(dst, width, "%0*llo", (int)(width - 1), (unsigned long long)v);
}

static void ustar(uint8_t *b, const char *name, uint64_t size, time_t mtime, unsigned mode,
                  char type)
{
    memset(b, 0, TAR_BLOCK);
    memcpy(b, name, strlen(name));
    octal((char *)b + 100, 8, mode & 07777);
    octal((char *)b + 108, 8, 0);
    octal((char *)b + 116, 8, 0);
    octal((char *)b + 124, 12, size);
    octal((char *)b + 136, 12, (uint64_t)(mtime < 0 ? 0 : mtime));
    b[156] = (uint8_t)type;
    memcpy(b + 257, "ustar", 6);
    memcpy(b + 263, "00", 2);
    memcpy(b + 265, "root", 4);
    memcpy(b + 297, "root", 4);
    memset(b + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++)
        sum += b[i];
    snprintf((char *)b + 148, 8, "%06o", sum);
    b[155] = ' ';
}

int tar_header(uint8_t *out, const char *name, uint64_t size, time_t mtime, unsigned mode)
{
    if (strlen(name) >= 100)
        return -1;
    if (size < 077777777777ULL) {
        ustar(out, name, size, mtime, mode, '0');
        return TAR_BLOCK;
    }
    /* pax record: "<len> size=<n>\n", where <len> counts itself */
    char rec[64];
    char body[40];
    int bl = snprintf(body, sizeof(body), " size=%llu\n", (unsigned long long)size);
    int len = bl + 2;
    if (snprintf(NULL, 0, "%d", len) > 2)
        len = bl + 3;
    int rl = snprintf(rec, sizeof(rec), "%d%s", len, body);
    char pname[100];
    snprintf(pname, sizeof(pname), "PaxHeaders/%s", name);
    ustar(out, pname, (uint64_t)rl, mtime, 0644, 'x');
    memset(out + TAR_BLOCK, 0, TAR_BLOCK);
    memcpy(out + TAR_BLOCK, rec, (size_t)rl);
    ustar(out + 2 * TAR_BLOCK, name, 0, mtime, mode, '0'); /* real size is in the pax record */
    return 3 * TAR_BLOCK;
}
