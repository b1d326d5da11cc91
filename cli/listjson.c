/* listjson.c - see listjson.h. */
#include "listjson.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

cJSON *cp_doc_new(const char *format)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", format);
    return o;
}

void cp_doc_str(cJSON *o, const char *key, const char *s)
{
    if (s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

void cp_doc_signal(cJSON *o, const char *name)
{
    /* what older records stored for "no signal" (a snapshot's "signal 0", "SIGUNKNOWN") */
    if (name && (!strcmp(name, "SIGUNKNOWN") || !strncmp(name, "signal 0", 8) ||
                 !strncmp(name, "signal -", 8)))
        name = NULL;
    if (!name) {
        cJSON_AddNullToObject(o, "signal");
        return;
    }
    cJSON *s = cJSON_AddObjectToObject(o, "signal");
    cJSON_AddStringToObject(s, "name", name);
    int number = 0;
    for (int n = 1; n < NSIG && !number; n++) {
        const char *abbrev = sigabbrev_np(n); /* "SEGV" for 11 */
        if (abbrev && !strncmp(name, "SIG", 3) && !strcmp(name + 3, abbrev))
            number = n;
    }
    if (number)
        cJSON_AddNumberToObject(s, "number", number);
    else
        cJSON_AddNullToObject(s, "number");
}

void cp_doc_time(cJSON *o, const char *key, double t)
{
    char k[64], buf[32];
    snprintf(k, sizeof(k), "%s_utc", key);
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm)) {
        cJSON_AddNullToObject(o, key);
        cJSON_AddNullToObject(o, k);
        return;
    }
    cJSON_AddNumberToObject(o, key, t);
    cJSON_AddStringToObject(o, k, buf);
}

int cp_doc_print(FILE *out, cJSON *doc)
{
    char *s = doc ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    if (!s)
        return -1;
    fputs(s, out);
    fputc('\n', out);
    free(s);
    return ferror(out) || fflush(out) ? -1 : 0;
}
