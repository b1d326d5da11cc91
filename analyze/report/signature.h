/* signature.h - the crash kind, signature and fingerprint of a crashpack-report/1 object.
 *
 * signature_apply() reads the report's crashed thread (threads[] with crashed == true), its
 * process.signal and cause{} (the deaths without a core: process.death, exception{}, output{};
 * deathsig.h), and sets:
 *   crash_kind      "hang" (hang.snap: a live process snapped), "segv_null", "segv", "sigbus",
 *                   "sigfpe", "sigill", "abort", "assertion",
 *                   "heap_corruption", "uncaught_exception", "stack_overflow", "signal" (null when
 *                   the report has no signal), "python_exception", "exit", "terminated", "oom_kill"
 *   signature       "SIGSEGV (null) | leaf | mid | main": the kind's label and the crashed thread's
 *                   first meaningful physical frames (null when there are no frames or no lists)
 *   fingerprint     16 hex digits: XXH64 of the kind and the same frames as normalized
 *                   module!function (null likewise)
 *   signature_info  {version (of the lists), kind, frame_limit, frames[] (as in the signature),
 *                   normalized[] (the hashed module!function strings), error (null or why there is
 *                   no signature), explain[] (only when asked: for every frame of the crashed
 *                   thread, {frame, function, name, module, action, rule})}
 * Only physical frames count: inline frames and frames put back from DWARF call sites exist only
 * with debug info, and the signature must not change when a build adds -g.
 *
 * The frame rules are data: rules/signature/{stop,skip,prefix}.txt under the data root
 * (datadir.h). docs/signature.md describes their syntax and the normalization. Never prints or
 * exits.
 */
#ifndef CRASHPACK_SIGNATURE_H
#define CRASHPACK_SIGNATURE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Meaningful (non-prefix) frames a signature holds at most. */
#define SIGNATURE_FRAMES 3

struct siglists;

/* Loads stop.txt, skip.txt and prefix.txt from dir (NULL: the data root's rules/signature).
 * Every file must declare the same `version`. NULL with the reason in err on any error. */
struct siglists *siglists_load(const char *dir, char *err, size_t errlen);
void siglists_free(struct siglists *l);
const char *siglists_version(const struct siglists *l);

/* Sets crash_kind, signature, fingerprint and signature_info in report. lists may be NULL (they
 * could not be loaded: lists_error says why). explain: add signature_info.explain[].
 * Returns 0, or -1 when no signature could be formed (the reason in err and in
 * signature_info.error; crash_kind is still set). */
int signature_compute(cJSON *report, const struct siglists *lists, const char *lists_error,
                      int explain, char *err, size_t errlen);

/* siglists_load(NULL) + signature_compute(). */
int signature_apply(cJSON *report, int explain, char *err, size_t errlen);

/* Normalization, exposed for the tests. function: parameters, "@VERSION", " [clone ...]",
 * compiler clone suffixes (.cold, .isra.N, .constprop.N, .part.N, .lto_priv.N, ...) and glibc's
 * "__GI_" prefix removed. module: the base name, without " (deleted)" and a version after ".so"
 * ("libstdc++.so.6.0.30" -> "libstdc++.so"). Both write a terminated string into out. */
void signature_norm_function(const char *in, char *out, size_t outlen);
void signature_norm_module(const char *in, char *out, size_t outlen);

/* A line of a job's output as the signature of an exit keeps it (deathsig.c): terminal escapes
 * and control characters out, white space collapsed, and what differs between two runs of the
 * same bug replaced: a UUID by <uuid>, a date-time or clock time by <time>, 0x... and long hex
 * words by <hex>, a number (with its fraction) by N, digits inside a word by N ("rank3" ->
 * "rankN"), a path by .../ and its last component. At most SIGNATURE_LINE_MAX bytes. */
#define SIGNATURE_LINE_MAX 200
void signature_norm_line(const char *in, char *out, size_t outlen);

/* The program of a report's `process` object as signatures name it: the executable's base name
 * (else comm, else argv[0]'s), an interpreter's by its family ("python3.11" -> "python") with
 * its script's base name, module or -c ("python train.py", "python -m torch.distributed.run",
 * "bash -c"); "unknown program" when nothing names it. */
void signature_program(const cJSON *process, char *out, size_t outlen);

#endif
