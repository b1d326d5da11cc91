/* jpath.c - see jpath.h. */
#include "jpath.h"

#include <string.h>

const cJSON *cp_jpath(const cJSON *o, const char *path)
{
    char key[64];
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof(key))
            return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
        path += n + (dot ? 1 : 0);
    }
    return o;
}
