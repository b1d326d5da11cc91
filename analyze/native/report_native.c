/* report_native.c - merging the native analysis into the report, and its text summary.
 *
 * Main data structure: the report's cJSON tree (cmd_analyze.c builds it). For the text, struct
 * group gathers threads whose frames are identical (same pcs and functions) so that a process
 * with many parked workers prints each distinct stack once.
 */
#include "report_native.h"
#include "jpath.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* ---- merge ---- */

static cJSON *take(cJSON *o, const char *key)
{
    return cJSON_DetachItemFromObjectCaseSensitive(o, key);
}


static cJSON *str_or_null(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? cJSON_CreateString(v->valuestring) : cJSON_CreateNull();
}

/* Contract order: tid, name, crashed, state first; then the rest of the thread. */
/* threads_json: proc/threads.json indexed by tid (one lookup per thread, not a pass) */
/* threads_ns: the same by ns_tid. A core's tids are the process's own (its pid namespace);
 * threads.json has the host's tid and, since it records them, the ns_tid too. */
static cJSON *shape_thread(cJSON *t, const struct cp_jindex *threads_json,
                           const struct cp_jindex *threads_ns)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *tid = take(t, "tid"), *crashed = take(t, "crashed");
    const cJSON *info = cJSON_IsNumber(tid) ? cp_jindex_find(threads_ns, tid->valuedouble) : NULL;
    if (!info && cJSON_IsNumber(tid))
        info = cp_jindex_find(threads_json, tid->valuedouble);
    double host;
    int other = info && cJSON_IsNumber(tid) && cp_jnum(info, "tid", &host) && host != tid->valuedouble;
    cp_json_set(o, "tid", tid);
    if (other)
        cJSON_AddNumberToObject(o, "host_tid", host);
    cp_json_set(o, "name", str_or_null(info, "name"));
    cp_json_set(o, "crashed", crashed ? crashed : cJSON_CreateFalse());
    cp_json_set(o, "state", cJSON_IsTrue(crashed) ? cJSON_CreateString("crashed")
                                               : str_or_null(info, "state"));
    cp_json_set(o, "wchan", str_or_null(info, "wchan"));
    while (t->child) {
        cJSON *v = cJSON_DetachItemViaPointer(t, t->child);
        cp_json_set(o, v->string, v);
    }
    cJSON_Delete(t);
    return o;
}

static void merge_process(cJSON *r, cJSON *nat)
{
    cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "process");
    cJSON *tid = take(nat, "crashed_tid"), *src = take(nat, "crashed_tid_source");
    const cJSON *man_tid = cJSON_GetObjectItemCaseSensitive(p, "crashed_tid");
    if (cJSON_IsNumber(man_tid))
        cp_json_set(p, "manifest_tid", cJSON_CreateNumber(man_tid->valuedouble));
    if (cJSON_IsNumber(tid)) {
        cp_json_set(p, "crashed_tid", tid);
        cp_json_set(p, "crashed_tid_source", src);
    } else {
        cJSON_Delete(tid);
        cJSON_Delete(src);
    }
    cJSON *ns = take(nat, "signal"), *ps = cJSON_GetObjectItemCaseSensitive(p, "signal");
    if (!cJSON_IsObject(ns) || !ps) {
        cJSON_Delete(ns);
        return;
    }
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(ps, "number"))) {
        cp_json_set(ps, "number", take(ns, "number"));
        cp_json_set(ps, "name", take(ns, "name"));
    }
    static const char *keys[] = {"code", "code_name", "code_text", "fault_address",
                                 "sender_pid", "sender_uid", "self_sent"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (cJSON_GetObjectItemCaseSensitive(ns, keys[i]))
            cp_json_set(ps, keys[i], take(ns, keys[i]));
    cJSON_Delete(ns);
}

void report_native_merge(cJSON *r, cJSON *nat, const cJSON *threads_json)
{
    cp_utf8_clean_tree(nat);
    merge_process(r, nat);
    cJSON *threads = take(nat, "threads"), *shaped = cJSON_CreateArray();
    struct cp_jindex info, info_ns;
    cp_jindex_build(&info, threads_json, "tid");
    cp_jindex_build(&info_ns, threads_json, "ns_tid");
    while (threads && threads->child)
        cJSON_AddItemToArray(shaped,
                             shape_thread(cJSON_DetachItemViaPointer(threads, threads->child),
                                          &info, &info_ns));
    cp_jindex_free(&info);
    cp_jindex_free(&info_ns);
    cJSON_Delete(threads);
    cp_json_set(r, "threads", shaped);
    cp_json_set(r, "unwinder", take(nat, "unwinder"));
    cp_json_set(r, "frames_dropped", take(nat, "frames_dropped"));
    cp_json_set(r, "cause", take(nat, "cause"));
    cp_json_set(r, "modules", take(nat, "modules"));
    cp_json_set(r, "python", take(nat, "python"));
    cJSON *a = cJSON_CreateObject();
    cp_json_set(a, "complete", take(nat, "complete"));
    cp_json_set(a, "error", take(nat, "error"));
    cp_json_set(a, "warnings", take(nat, "warnings"));
    cp_json_set(a, "core", take(nat, "core"));
    if (cJSON_GetObjectItemCaseSensitive(nat, "threads_cap"))
        cp_json_set(a, "threads_cap", take(nat, "threads_cap"));
    cp_json_set(r, "analysis", a);
    cJSON_Delete(nat);
}

void report_native_skipped(cJSON *r, const char *reason)
{
    cp_json_set(r, "unwinder", cJSON_CreateNull());
    cp_json_set(r, "frames_dropped", cJSON_CreateNumber(0));
    cp_json_set(r, "cause", cJSON_CreateNull());
    cp_json_set(r, "modules", cJSON_CreateArray());
    cJSON *a = cJSON_CreateObject();
    cp_json_set(a, "complete", cJSON_CreateFalse());
    cp_json_set(a, "error", cJSON_CreateString(reason));
    cp_json_set(a, "warnings", cJSON_CreateArray());
    cp_json_set(a, "core", cJSON_CreateNull());
    cp_json_set(r, "analysis", a);
}

