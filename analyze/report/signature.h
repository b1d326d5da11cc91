/* signature.h - the crash kind, signature and fingerprint of a crashpack-report/1 object.
 *
 * signature_apply() reads the report's crashed thread (threads[] with crashed == true), its
 * process.signal and cause{}, and sets:
 *   crash_kind      "hang" (hang.snap: a live process snapped), "segv_null", "segv", "sigbus",
 *                   "sigfpe", "sigill", "abort", "assertion",
 *                   "heap_corruption", "uncaught_exception", "stack_overflow", "signal" (null when
 *                   the report has no signal)
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

#endif
