/* jpath.c - see jpath.h. */
#include "jpath.h"

#include <stdlib.h>
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

void cp_json_set(cJSON *o, const char *key, cJSON *v)
{
    if (!v)
        v = cJSON_CreateNull();
    if (!o || !v) {
        cJSON_Delete(v);
        return;
    }
    /* the key may be v's own name, which replacing or adding frees: then a copy */
    char *k = v->string && key == v->string ? strdup(key) : NULL;
    if (k)
        key = k;
    else if (v->string && key == v->string) {
        cJSON_Delete(v);
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(o, key))
        cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else
        cJSON_AddItemToObject(o, key, v);
    free(k);
}
