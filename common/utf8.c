/* utf8.c - see utf8.h. */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

size_t cp_utf8_seq(const unsigned char *s, size_t left)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, min = 0x10000;
    else
        return 0;
    if (n > left)
        return 0;
    unsigned cp = c & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

char *cp_utf8_clean(const char *s)
{
    size_t len = strlen(s);
    char *o = malloc(len * 3 + 1);
    if (!o)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < len;) {
        size_t n = cp_utf8_seq((const unsigned char *)s + i, len - i);
        if (n == 0) {
            memcpy(o + j, "\xEF\xBF\xBD", 3);
            j += 3;
            i++;
        } else {
            memcpy(o + j, s + i, n);
            j += n;
            i += n;
        }
    }
    o[j] = 0;
    return o;
}
