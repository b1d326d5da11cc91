/* deathsig.h - the signatures of the deaths that have no crashed thread to walk (signature.c
 * calls them; analyze/report/ only): an exit, a termination, an OOM kill, a signal without a core,
 * and a Python exception whose exception.json is unusable. docs/signature.md, "Deaths without a
 * core". */
#ifndef CRASHPACK_DEATHSIG_H
#define CRASHPACK_DEATHSIG_H

#include <cjson/cJSON.h>

#define FP_SCHEME "crashpack-fingerprint/1"

/* 1 when crash kind `kind` of report gets its signature from the death rather than from a
 * crashed thread's native frames (crashed: that thread, or NULL): python_exception, exit,
 * terminated, oom_kill, and a signal death without a core. */
int death_signature_kind(const cJSON *report, const char *kind, const cJSON *crashed);

/* Sets signature, fingerprint and signature_info (info, with its version, kind, frames[] and
 * normalized[] already in it: source "death", error null) of a death: the kind's label ("exit
 * status 3", "terminated", "OOM kill", "SIGUSR1", "python exception"), the limit an OOM kill hit,
 * the program (signature_program), and for an exit the last lines of its output
 * (output.last_lines, signature_norm_line). */
void death_signature(cJSON *report, const char *kind, cJSON *info, cJSON *frames,
                     cJSON *normalized);

#endif
