/* history.c - the knowledge base's stage of the report (report.h): what earlier crashes say about
 * this one. Run before the rules, which read it; the knowledge base is an optional input that the
 * command layer opened (kb_open_input): without one the report says why there is no history.
 *
 * gpu.history: the hardware faults of this process's GPUs and of its host in the hours before the
 * crash (db/query.h kb_gpu_history), which the gpu_history leaf reads; gpu.history_error says why
 * there is none to read (no knowledge base, an older schema).
 *
 * resolution: what the team found this crash's group to be (`crashpack db resolve`), matched by
 * db/resolution.h's kb_resolution_match (by fingerprint; a similarity matcher is its next entry);
 * null when nothing matches or there is no knowledge base. The renderers show it first. */
#include "report.h"
#include "query.h"
#include "resolution.h"
#include "jpath.h"

#include <stdio.h>

#define GPU_HISTORY_WINDOW_S (6 * 3600.0)

void report_history(cJSON *report, struct kb *kb)
{
    cJSON *res = kb_resolution_match(kb, report);
    cp_json_set(report, "resolution", res ? res : cJSON_CreateNull());
    cJSON *gpu = cJSON_GetObjectItemCaseSensitive(report, "gpu");
    if (!cJSON_IsObject(gpu))
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(gpu, "history");
    cJSON_DeleteItemFromObjectCaseSensitive(gpu, "history_error");
    cJSON_DeleteItemFromObjectCaseSensitive(gpu, "history_window_s");
    cJSON_AddNumberToObject(gpu, "history_window_s", GPU_HISTORY_WINDOW_S);
    char e[300] = "";
    cJSON *h = kb ? kb_gpu_history(kb, report, GPU_HISTORY_WINDOW_S, e, sizeof(e)) : NULL;
    if (!kb)
        snprintf(e, sizeof(e), "no knowledge base (--db, $CRASHPACK_DB)");
    cJSON_AddItemToObject(gpu, "history", h ? h : cJSON_CreateArray());
    if (h)
        cJSON_AddNullToObject(gpu, "history_error");
    else
        cJSON_AddStringToObject(gpu, "history_error", e);
}
