/* identity.h - who died and what it printed last, for the deaths without a core (analyze/report/
 * only; report.c calls them while it builds the bundle's parts).
 *
 * report_identity: process.exe (a string, or null when nothing recorded it), process.comm (the
 * same) and process.cmdline (an array, [] when unknown) from what the capture path recorded: the
 * manifest first, then what it lacks from `crashpack run`'s process.json (the process's pid only),
 * the hook's exception.json (exception.python.executable), the name a reporter gave (the
 * manifest's death.comm), oom.json (the kill's comm).
 * process.identity_from says which member gave each: {exe, cmdline, comm}, a member name or null.
 *
 * report_output: report.output, the job's output a supervisor forwarded (output.txt; for a death
 * without a core and without it, logs/stderr.tail or logs/stdout.tail): {member, size,
 * stderr_known, last_lines[] (the last OUTPUT_LAST_LINES lines that are not blank, of stderr when
 * process.json says which bytes were stderr's, else of the whole output)}, or null. For an exit, a
 * signal or a termination without exception.json, the last Python traceback of that output
 * (pytb.h) becomes report.exception, validated as exception.json is (pyexc.h), with source
 * "output" and output {member, line}. */
#ifndef CRASHPACK_IDENTITY_H
#define CRASHPACK_IDENTITY_H

#include "bundle.h"

#include <cjson/cJSON.h>

#define OUTPUT_LAST_LINES 2

void report_identity(cJSON *r, const cJSON *man, struct bundle *b);
void report_output(cJSON *r, struct bundle *b);

/* After the native analysis: no placeholder stays in the report. A signal numbered 0 or less (a
 * live snapshot's core) is {number: null, name: null}, a negative crashed tid null, and the cause
 * of a core without a signal says so ("no signal: a live snapshot of the running process"). */
void report_no_placeholders(cJSON *r);

#endif
