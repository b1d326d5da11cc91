/* report_native.h - the native analysis (native.h) in the crashpack-report/1 object.
 *
 * report_native_merge() moves the result of native_run() into the report: threads[] (each with
 * name, state and wchan from the bundle's proc/threads.json), process.crashed_tid (from the core,
 * with its source), process.signal's si_code and fault address, cause{}, modules[], unwinder,
 * frames_dropped and analysis{complete, error, warnings, core}. Every string is made valid UTF-8.
 * Its text form is render/'s (text_native.c).
 *
 * Ownership: merge consumes `nat`; nothing is kept. Never exits.
 */
#ifndef CRASHPACK_REPORT_NATIVE_H
#define CRASHPACK_REPORT_NATIVE_H

#include <cjson/cJSON.h>
#include <stdio.h>

void report_native_merge(cJSON *r, cJSON *nat, const cJSON *threads_json);
/* Records that no native analysis ran (reason: "no core in this bundle", ...). */
void report_native_skipped(cJSON *r, const char *reason);

#endif
