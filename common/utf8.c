/* utf8.c - see utf8.h: the UTF-8 validator, cleaning, and the terminal policy. */
#include "utf8.h"

#include <cjson/cJSON.h>

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

void cp_utf8_clean_tree(struct cJSON *j)
{
    for (cJSON *it = j ? j->child : NULL; it; it = it->next) {
        if (cJSON_IsString(it) && it->valuestring) {
            char *c = cp_utf8_clean(it->valuestring);
            if (c && strcmp(c, it->valuestring))
                cJSON_SetValuestring(it, c);
            free(c);
        } else if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
            cp_utf8_clean_tree(it);
        }
    }
}

void cp_text_putn(FILE *out, const char *s, size_t max)
{
    if (!s)
        return;
    const unsigned char *p = (const unsigned char *)s, *end = max ? p + max : NULL;
    while (*p && (!end || p < end)) {
        size_t n = cp_utf8_seq(p, (size_t)-1);
        if (end && n > (size_t)(end - p))
            break; /* a sequence that crosses the column's limit */
        if (n == 0) {
            fprintf(out, "\\x%02x", *p);
            p++;
        } else if (n == 1 && (*p < 0x20 || *p == 0x7f)) {
            if (*p == '\n')
                fputs("\\n", out);
            else if (*p == '\t')
                fputs("\\t", out);
            else
                fprintf(out, "\\x%02x", *p);
            p++;
        } else if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0) { /* U+0080..U+009F */
            fprintf(out, "\\u%04x", p[1]);
            p += 2;
        } else {
            fwrite(p, 1, n, out);
            p += n;
        }
    }
}

void cp_text_put(FILE *out, const char *s)
{
    cp_text_putn(out, s, 0);
}
