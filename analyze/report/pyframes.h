/* pyframes.h - the Python frames a report shows (issue 23, docs/python.md).
 *
 *  - crashpack's own frames (the exception hook's code: python/crashpack/, _crashpack_hook.py,
 *    crashpack_checkpoint.py), on any thread, are marked `python_frames[].tool: true` (their
 *    locals dropped); the text and Markdown renderers hide them;
 *  - for an exception (process.death.kind "exception"), the raising thread's Python stack is the
 *    hook's while it waits for the capture: the frames at the raise, from the exception's
 *    traceback (exception.json, with each frame's source line and, with python_locals on, its
 *    locals), are put under the hook's frames, innermost first, marked `traceback: true`; the
 *    live frames outside the one the traceback starts at (a thread's bootstrap) follow;
 *  - an exception.json frame's `source` and `locals` are sanitized here (pyexc.c's frames).
 * Every input is a bundle's: strings are cut and made valid UTF-8, counts are capped.
 * Library code: never prints, never exits.
 */
#ifndef CRASHPACK_PYFRAMES_H
#define CRASHPACK_PYFRAMES_H

#include <cjson/cJSON.h>

#define PYFRAMES_SOURCE_MAX 512      /* bytes of a source line */
#define PYFRAMES_LOCALS_MAX 32       /* locals of one frame */
#define PYFRAMES_LOCAL_NAME_MAX 64   /* bytes of a local's name */
#define PYFRAMES_LOCAL_VALUE_MAX 120 /* bytes of a local's repr ("..." ends a cut one) */

/* Adds the sanitized `source` (string or null) and, when f has them, `locals` ({name: repr}) and
 * `locals_truncated` of exception.json frame f to the report's frame o. */
void pyframes_exc_extras(cJSON *o, const cJSON *f);

/* 1 when file (a Python frame's co_filename) is crashpack's own code. */
int pyframes_is_tool(const char *file);

/* Marks the tool's frames of every thread and puts the frames at the raise on an exception's
 * raising thread (see above). Call after process.death and the threads are final. */
void pyframes_finish(cJSON *r);

#endif
