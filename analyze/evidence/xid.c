/* xid.c - Xid kernel-log lines and the Xid catalogue (see xid.h). */
#include "xid.h"

#include "datadir.h"
#include "errmsg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XID_CATALOG_MAX (4u << 20)

cJSON *xid_catalog_load(char *err, size_t errlen)
{
    size_t n;
    char path[4096];
    char *buf = cp_data_read("rules/gpu/xid.json", "Xid catalogue", XID_CATALOG_MAX, &n, path,
                             sizeof(path), err, errlen);
    if (!buf)
        return NULL;
    cJSON *j = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!cJSON_IsObject(j) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "xids"))) {
        cJSON_Delete(j);
        cp_errmsg(err, errlen, "%s: not a JSON object with \"xids\"", path);
        return NULL;
    }
    return j;
}

const cJSON *xid_catalog_entry(const cJSON *cat, int code)
{
    char k[16];
    snprintf(k, sizeof(k), "%d", code);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cat, "xids"), k);
    return cJSON_IsObject(e) ? e : NULL;
}
